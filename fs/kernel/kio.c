#include "kio.h"
#include "mount_gone.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

/* The kernel's side of the protocol, as include/uapi/linux/fuse.h of
 * protocol 7.40+ has it; Debian 12's headers (7.38) and libfuse 3.14 stop
 * short of these fields, so they are declared here and nowhere else. */
#define KIO_OP_FORGET          2
#define KIO_OP_INTERRUPT       36
#define KIO_OP_BATCH_FORGET    42
#define KIO_OP_INIT            26
#define KIO_OP_CREATE          35
#define KIO_OP_TMPFILE         51
#define KIO_INIT_EXT           (1u << 30)
#define KIO_WRITEBACK_CACHE    (1u << 16)
#define KIO_PASSTHROUGH        (1ull << 37) /* flags2 bit 5 */
#define KIO_FOPEN_PASSTHROUGH  (1u << 7)
#define KIO_HAS_RESEND         (1ull << 39) /* flags2 bit 7: FUSE_NOTIFY_RESEND works */
#define KIO_OVER_IO_URING      (1ull << 41) /* flags2 bit 9: requests over io_uring */
#define KIO_NOTIFY_RESEND      7
#define KIO_NOTIFY_INVAL_INODE 2
#define KIO_UNIQUE_RESEND      (1ull << 63)

struct kio_in_header {
    uint32_t len;
    uint32_t opcode;
    uint64_t unique;
    uint64_t nodeid;
    uint32_t uid;
    uint32_t gid;
    uint32_t pid;
    uint16_t total_extlen;
    uint16_t padding;
};
_Static_assert(sizeof(struct kio_in_header) == 40, "fuse_in_header");

struct kio_out_header {
    uint32_t len;
    int32_t error;
    uint64_t unique;
};
_Static_assert(sizeof(struct kio_out_header) == 16, "fuse_out_header");

struct kio_init_in {
    uint32_t major;
    uint32_t minor;
    uint32_t max_readahead;
    uint32_t flags;
    uint32_t flags2;
    uint32_t unused[11];
};
_Static_assert(sizeof(struct kio_init_in) == 64, "fuse_init_in");

struct kio_init_out {
    uint32_t major;
    uint32_t minor;
    uint32_t max_readahead;
    uint32_t flags;
    uint16_t max_background;
    uint16_t congestion_threshold;
    uint32_t max_write;
    uint32_t time_gran;
    uint16_t max_pages;
    uint16_t map_alignment;
    uint32_t flags2;
    uint32_t max_stack_depth; /* libfuse 3.14: unused[0] */
    uint16_t request_timeout;
    uint16_t unused[11];
};
_Static_assert(sizeof(struct kio_init_out) == 64, "fuse_init_out");
_Static_assert(offsetof(struct kio_init_out, flags2) == 32, "fuse_init_out.flags2");
_Static_assert(offsetof(struct kio_init_out, max_stack_depth) == 36, "max_stack_depth");

struct kio_open_out {
    uint64_t fh;
    uint32_t open_flags;
    int32_t backing_id; /* libfuse 3.14: padding */
};
_Static_assert(sizeof(struct kio_open_out) == 16, "fuse_open_out");

#define KIO_ENTRY_OUT_SIZE 128 /* struct fuse_entry_out, protocol >= 7.9 */

struct kio_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};
_Static_assert(sizeof(struct kio_backing_map) == 16, "fuse_backing_map");
#define KIO_DEV_IOC_MAGIC         229
#define KIO_DEV_IOC_BACKING_OPEN  _IOW(KIO_DEV_IOC_MAGIC, 1, struct kio_backing_map)
#define KIO_DEV_IOC_BACKING_CLOSE _IOW(KIO_DEV_IOC_MAGIC, 2, uint32_t)

/* The backing id of the OPEN/CREATE reply this thread is sending: libfuse
 * writes a reply from the thread that calls fuse_reply_*, so kio_writev
 * knows which reply to amend without a table keyed by request. */
static _Thread_local int32_t tls_backing_id;
/* The request this thread read was resent (kio_resent): libfuse handles a
 * request in the thread that read it. */
static _Thread_local bool tls_resent;

/* The session's userdata begins with its Kio (kio_attach). */
static Kio *kio_of(void *userdata)
{
    return userdata;
}

void kio_init(Kio *k, bool want, const char *why_not, int backing_stack_depth)
{
    memset(k, 0, sizeof *k);
    k->fd = -1;
    k->want = want;
    k->why_not = want ? NULL : why_not;
    k->stack_depth = 1 + CLAMP(backing_stack_depth, 0, 1);
}

/* The first request is INIT: note what the kernel offers before libfuse
 * (which does not know flags2's upper bits) answers it. */
static void note_init(Kio *k, const void *buf, ssize_t len)
{
    if (len < (ssize_t)(sizeof(struct kio_in_header) + sizeof(struct kio_init_in)))
        return;
    struct kio_in_header h;
    memcpy(&h, buf, sizeof h);
    if (h.opcode != KIO_OP_INIT)
        return;
    struct kio_init_in in;
    memcpy(&in, (const char *)buf + sizeof h, sizeof in);
    uint64_t flags = in.flags;
    if (in.flags & KIO_INIT_EXT)
        flags |= (uint64_t)in.flags2 << 32;
    atomic_store(&k->kernel_flags, flags);
    atomic_store(&k->init_unique, h.unique);
    if (k->keep && (size_t)len <= k->keep_max && !k->replay) {
        memcpy(k->keep, buf, (size_t)len);
        atomic_store_explicit(k->keep_len, (uint32_t)len, memory_order_release);
    }
}

void kio_keep_init(Kio *k, void *buf, _Atomic uint32_t *len, size_t max)
{
    k->keep = buf;
    k->keep_len = len;
    k->keep_max = max;
}

void kio_set_hooks(Kio *k, const KioHooks *hooks, void *ctx)
{
    k->hooks = hooks;
    k->hooks_ctx = ctx;
}

void kio_replay_init(Kio *k, const void *init, size_t len)
{
    k->replay = init;
    k->replay_len = len;
    note_init(k, init, (ssize_t)len); /* what the kernel offers, known before the loop */
    g_mutex_init(&k->gate_lock);
    g_cond_init(&k->gate_cond);
}

struct kio_notify_inval_inode_out {
    uint64_t ino;
    int64_t off;
    int64_t len;
};
_Static_assert(sizeof(struct kio_notify_inval_inode_out) == 24, "fuse_notify_inval_inode_out");

int kio_node_known(Kio *k, uint64_t nodeid)
{
    struct kio_out_header oh = {.len = sizeof oh + sizeof(struct kio_notify_inval_inode_out),
                                .error = KIO_NOTIFY_INVAL_INODE,
                                .unique = 0};
    struct kio_notify_inval_inode_out arg = {.ino = nodeid, .off = -1, .len = 0};
    struct iovec iov[2] = {{&oh, sizeof oh}, {&arg, sizeof arg}};
    if (writev(k->fd, iov, 2) >= 0)
        return 1;
    return errno == ENOENT ? 0 : -errno;
}

bool kio_can_resend(const Kio *k)
{
    return atomic_load(&k->kernel_flags) & KIO_HAS_RESEND;
}

bool kio_resent(void)
{
    return tls_resent;
}

/* An attaching daemon: the first read gets the kept INIT; the others wait
 * until the resend notification went out, so that no request this daemon
 * reads is queued again under it.  Returns the length given, 0 to read. */
static ssize_t replay_read(Kio *k, void *buf, size_t len)
{
    if (!atomic_exchange(&k->replay_given, true)) {
        size_t n = MIN(len, k->replay_len);
        memcpy(buf, k->replay, n);
        note_init(k, buf, (ssize_t)n);
        return (ssize_t)n;
    }
    g_mutex_lock(&k->gate_lock);
    while (!atomic_load(&k->gate_open))
        g_cond_wait(&k->gate_cond, &k->gate_lock);
    g_mutex_unlock(&k->gate_lock);
    return 0;
}

/* After libfuse answered the kept INIT (the answer is dropped): the kernel
 * queues again what the dead daemon read and never answered, then reads go on. */
int kio_ask_resend(int fd)
{
    struct kio_out_header oh = {.len = sizeof oh, .error = KIO_NOTIFY_RESEND, .unique = 0};
    return write(fd, &oh, sizeof oh) == (ssize_t)sizeof oh ? 0 : -errno;
}

int kio_fail_one(int fd, void *buf, size_t len, int err)
{
    ssize_t r = read(fd, buf, len);
    if (r < 0)
        return errno == EINTR || errno == EAGAIN || errno == ENOENT ? 0 : -errno;
    if (r < (ssize_t)sizeof(struct kio_in_header))
        return 0;
    struct kio_in_header h;
    memcpy(&h, buf, sizeof h);
    if (h.opcode == KIO_OP_FORGET || h.opcode == KIO_OP_BATCH_FORGET ||
        h.opcode == KIO_OP_INTERRUPT)
        return 0;
    struct kio_out_header oh = {.len = sizeof oh, .error = -err, .unique = h.unique};
    if (write(fd, &oh, sizeof oh) < 0 && errno == ENODEV)
        return -ENODEV;
    return 0;
}

static void resend_and_open(Kio *k, int fd)
{
    /* without resend (before 6.9) ops.c warned at INIT: nothing comes again */
    if (kio_can_resend(k)) {
        int rc = kio_ask_resend(fd);
        if (rc < 0)
            g_warning("ckptfs: asking the kernel to resend pending requests: %s", g_strerror(-rc));
    }
    g_mutex_lock(&k->gate_lock);
    atomic_store(&k->gate_open, true);
    g_cond_broadcast(&k->gate_cond);
    g_mutex_unlock(&k->gate_lock);
}

/* FUSE_TMPFILE carries fuse_create_in and the dentry's name, "/" (vfs_tmpfile
 * names its dentry so), exactly as a CREATE would: relabel it. */
static void tmpfile_as_create(void *buf, ssize_t len)
{
    struct kio_in_header h;
    if (len < (ssize_t)sizeof h)
        return;
    memcpy(&h, buf, sizeof h);
    if (h.opcode != KIO_OP_TMPFILE)
        return;
    const char *name = (const char *)buf + sizeof h + 16; /* after fuse_create_in */
    if (len < (ssize_t)(sizeof h + 16 + sizeof KIO_TMPFILE_NAME) ||
        memcmp(name, KIO_TMPFILE_NAME, sizeof KIO_TMPFILE_NAME) != 0)
        return; /* not the layout we know: libfuse answers ENOSYS */
    h.opcode = KIO_OP_CREATE;
    memcpy(buf, &h, sizeof h);
}

/* Each (node id, count) of a FORGET or BATCH_FORGET request, to the hooks. */
static void tell_forgets(Kio *k, const struct kio_in_header *h, const void *buf, ssize_t len)
{
    const char *p = (const char *)buf + sizeof *h;
    if (h->opcode == KIO_OP_FORGET) {
        uint64_t nlookup;
        if (len >= (ssize_t)(sizeof *h + sizeof nlookup)) {
            memcpy(&nlookup, p, sizeof nlookup);
            k->hooks->forget(k->hooks_ctx, h->nodeid, nlookup);
        }
        return;
    }
    uint32_t count;
    if (len < (ssize_t)(sizeof *h + 8))
        return;
    memcpy(&count, p, sizeof count);
    p += 8; /* fuse_batch_forget_in */
    for (uint32_t i = 0; i < count && p + 16 <= (const char *)buf + len; i++, p += 16) {
        uint64_t one[2]; /* fuse_forget_one: nodeid, nlookup */
        memcpy(one, p, sizeof one);
        k->hooks->forget(k->hooks_ctx, one[0], one[1]);
    }
}

/* The kernel copies a request into the daemon's buffer page by page, and
 * a page it must fault in while the daemon has a SIGKILL pending fails the
 * copy, which fails the request with EIO (fs/fuse/dev.c) instead of leaving
 * it to be resent.  libfuse's buffers are malloc'ed and touched only as far
 * as requests went: write to every page once per buffer, so a copy never
 * faults (a 64 KiB WRITE into fresh pages was the case seen). */
static _Thread_local void *tls_faulted;
static _Thread_local size_t tls_faulted_len;

static void prefault(void *buf, size_t len)
{
    if (buf == tls_faulted && len <= tls_faulted_len)
        return;
    long page = sysconf(_SC_PAGESIZE);
    for (size_t o = 0; o < len; o += (size_t)page)
        ((volatile char *)buf)[o] = 0;
    tls_faulted = buf;
    tls_faulted_len = len;
}

static ssize_t kio_read(int fd, void *buf, size_t len, void *userdata)
{
    Kio *k = kio_of(userdata);
    tls_resent = false;
    if (k->hooks)
        prefault(buf, len); /* only where a daemon may die under it */
    if (k->replay && !atomic_load_explicit(&k->gate_open, memory_order_acquire)) {
        ssize_t given = replay_read(k, buf, len);
        if (given > 0)
            return given;
    }
    ssize_t r = read(fd, buf, len);
    if (r <= 0)
        return r;
    if (r >= (ssize_t)sizeof(struct kio_in_header)) {
        struct kio_in_header h;
        memcpy(&h, buf, sizeof h);
        tls_resent = (h.unique & KIO_UNIQUE_RESEND) != 0;
        bool forgets = h.opcode == KIO_OP_FORGET || h.opcode == KIO_OP_BATCH_FORGET;
        if (k->hooks) {
            KioReqKind kind = forgets                        ? KIO_REQ_FORGET
                              : h.opcode == KIO_OP_INTERRUPT ? KIO_REQ_INTERRUPT
                                                             : KIO_REQ_REPLY;
            k->hooks->request(k->hooks_ctx, h.unique & ~KIO_UNIQUE_RESEND, tls_resent, kind);
            if (forgets)
                tell_forgets(k, &h, buf, r);
        }
    }
    if (!atomic_load_explicit(&k->init_done, memory_order_relaxed) &&
        atomic_load(&k->init_unique) == 0)
        note_init(k, buf, r);
    else
        tmpfile_as_create(buf, r);
    return r;
}

/* libfuse's INIT reply, amended to ask for passthrough when the kernel
 * offers it and the reply does not ask for the writeback cache (the kernel
 * refuses the two together), and for io_uring where that is wanted. */
static void amend_init(Kio *k, struct iovec *iov, int count)
{
    atomic_store(&k->init_done, true);
    const struct kio_out_header *oh = iov[0].iov_base;
    uint64_t offered = atomic_load(&k->kernel_flags);
    bool layout = count == 2 && oh->error == 0 && iov[1].iov_len >= sizeof(struct kio_init_out);
    struct kio_init_out *out = layout ? iov[1].iov_base : NULL;
    if (out) {
        k->init_max_write = out->max_write;
        k->init_max_pages = out->max_pages;
    }
    if (k->ring_want) {
        if (!(offered & KIO_OVER_IO_URING))
            k->ring_why = "the kernel does not offer FUSE over io_uring (the fuse module's "
                          "enable_uring is off)";
        else if (!out)
            k->ring_why = "the INIT reply is not the 7.40 layout";
        else {
            out->flags |= KIO_INIT_EXT;
            out->flags2 |= (uint32_t)(KIO_OVER_IO_URING >> 32);
            k->ring_negotiated = true;
        }
    }
    if (!k->want)
        return;
    if (!(offered & KIO_PASSTHROUGH)) {
        k->why_not = "the kernel does not offer FUSE passthrough";
        return;
    }
    if (!out) {
        k->why_not = "the INIT reply is not the 7.40 layout";
        return;
    }
    if (out->flags & KIO_WRITEBACK_CACHE) {
        k->why_not = "the writeback cache excludes passthrough";
        return;
    }
    out->flags |= KIO_INIT_EXT;
    out->flags2 |= (uint32_t)(KIO_PASSTHROUGH >> 32);
    out->max_stack_depth = (uint32_t)k->stack_depth;
    atomic_store(&k->passthrough, true);
}

/* What a request read from /dev/fuse goes through before libfuse sees it,
 * for one rebuilt from a ring entry. */
static void ring_prepare(void *buf, size_t len)
{
    tls_resent = false;
    tmpfile_as_create(buf, (ssize_t)len);
}

/* A daemon that was not to use the ring says why, once its INIT reply is
 * out (or the first daemon's was replayed). */
static void say_not_ring(const Kio *k)
{
    if (k->ring_why)
        g_message("ckptfs: requests come over /dev/fuse: %s", k->ring_why);
}

/* The INIT reply is out: the ring's entries go in now (the kernel takes
 * them only on an initialised connection). */
static void start_ring(Kio *k, int fd)
{
    const char *why = NULL;
    KioRing *r = kio_uring_start(k->se, fd, k->init_max_write, k->init_max_pages, k->ring_depth,
                                 ring_prepare, &why);
    __atomic_store_n(&k->ring, r, __ATOMIC_RELEASE);
    if (r) {
        g_message("ckptfs: requests come over io_uring: %u entries a queue, one thread each",
                  k->ring_depth);
    } else {
        k->ring_why = why;
        g_message("ckptfs: requests come over /dev/fuse: %s", why);
    }
}

/* fuse_open_out is the last 16 bytes of an OPEN reply and of a CREATE
 * reply (after fuse_entry_out). */
static void amend_open(struct iovec *iov, int count, int32_t backing_id)
{
    if (count != 2)
        return;
    size_t len = iov[1].iov_len;
    if (len != sizeof(struct kio_open_out) &&
        len != KIO_ENTRY_OUT_SIZE + sizeof(struct kio_open_out))
        return;
    struct kio_open_out *o =
        (struct kio_open_out *)((char *)iov[1].iov_base + len - sizeof(struct kio_open_out));
    o->open_flags |= KIO_FOPEN_PASSTHROUGH;
    o->backing_id = backing_id;
}

/* A backing directory on a network or FUSE mount whose server is gone
 * answers with the errnos that, from this mount, say that its own daemon
 * is gone (mount_gone.h): every reply, those libfuse makes itself too (a
 * read spliced from a backing file), says EIO instead; .metrics counts the
 * backing's errno. */
static void mask_gone(struct kio_out_header *oh)
{
    if (ck_mount_gone_errno(-oh->error))
        oh->error = -EIO;
}

static ssize_t kio_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    Kio *k = kio_of(userdata);
    bool reply = count >= 1 && iov[0].iov_len >= sizeof(struct kio_out_header) &&
                 ((const struct kio_out_header *)iov[0].iov_base)->unique != 0;
    if (reply)
        mask_gone(iov[0].iov_base);
    bool init_reply = false;
    if (tls_backing_id) {
        amend_open(iov, count, tls_backing_id);
    } else if (!atomic_load_explicit(&k->init_done, memory_order_relaxed) && count >= 1 &&
               iov[0].iov_len >= sizeof(struct kio_out_header)) {
        const struct kio_out_header *oh = iov[0].iov_base;
        uint64_t unique = atomic_load(&k->init_unique);
        if (unique && oh->unique == unique) {
            init_reply = true;
            amend_init(k, iov, count);
            if (k->replay) {
                /* the kernel had the answer to this INIT from the first daemon */
                ssize_t total = 0;
                for (int i = 0; i < count; i++)
                    total += (ssize_t)iov[i].iov_len;
                resend_and_open(k, fd);
                say_not_ring(k);
                return total;
            }
        }
    }
    ssize_t r;
    if (reply &&
        kio_uring_reply(((const struct kio_out_header *)iov[0].iov_base)->unique, iov, count, &r))
        return r; /* it goes back with the entry's next fetch */
    r = writev(fd, iov, count);
    if (reply && r >= 0 && k->hooks)
        k->hooks->replied(k->hooks_ctx); /* the kernel has it: it will not come again */
    if (init_reply && r >= 0 && k->ring_negotiated)
        start_ring(k, fd);
    else if (init_reply && r >= 0)
        say_not_ring(k);
    return r;
}

/* Replies to reads may still be spliced (libfuse offers splice for
 * replies only when this exists). */
static ssize_t kio_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                               unsigned int flags, void *userdata)
{
    (void)userdata;
    return splice(fdin, offin, fdout, offout, len, flags);
}

int kio_attach(Kio *k, struct fuse_session *se, int fd)
{
    static const struct fuse_custom_io io = {
        .read = kio_read,
        .writev = kio_writev,
        .splice_send = kio_splice_send,
    };
    int rc = fuse_session_custom_io(se, &io, fd);
    if (rc == 0) {
        k->fd = fd;
        k->se = se;
    }
    return rc;
}

void kio_detach(Kio *k)
{
    kio_uring_stop(k->ring); /* after the unmount: its entries ended with it */
    k->ring = NULL;
    k->fd = -1;
}

bool kio_passthrough(const Kio *k)
{
    if (!atomic_load(&k->init_done))
        return k->want && (atomic_load(&k->kernel_flags) & KIO_PASSTHROUGH);
    return atomic_load(&k->passthrough);
}

const char *kio_why_not(const Kio *k)
{
    if (kio_passthrough(k))
        return NULL;
    if (k->why_not)
        return k->why_not;
    return "the kernel does not offer FUSE passthrough";
}

int kio_backing_open(Kio *k, int fd)
{
    if (k->fd < 0)
        return -ENOTCONN;
    struct kio_backing_map map = {.fd = fd, .flags = 0, .padding = 0};
    int id = ioctl(k->fd, KIO_DEV_IOC_BACKING_OPEN, &map);
    return id > 0 ? id : (id < 0 ? -errno : -EIO);
}

void kio_backing_close(Kio *k, int backing_id)
{
    uint32_t id = (uint32_t)backing_id;
    if (k->fd < 0)
        return; /* the connection is gone, and its backing files with it */
    if (backing_id > 0 && ioctl(k->fd, KIO_DEV_IOC_BACKING_CLOSE, &id) < 0)
        g_warning("ckptfs: releasing passthrough backing id %d: %s", backing_id, g_strerror(errno));
}

int kio_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int backing_id)
{
    tls_backing_id = backing_id;
    int rc = fuse_reply_open(req, fi);
    tls_backing_id = 0;
    return rc;
}

int kio_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
                     const struct fuse_file_info *fi, int backing_id)
{
    tls_backing_id = backing_id;
    int rc = fuse_reply_create(req, e, fi);
    tls_backing_id = 0;
    return rc;
}

void kio_want_ring(Kio *k, bool want, const char *why_not, unsigned depth)
{
    k->ring_want = want;
    k->ring_why = want ? NULL : why_not;
    k->ring_depth = depth ? depth : 1;
}

bool kio_ring(const Kio *k)
{
    return __atomic_load_n(&k->ring, __ATOMIC_ACQUIRE) != NULL;
}

const char *kio_ring_why_not(const Kio *k)
{
    if (kio_ring(k))
        return NULL;
    return k->ring_why ? k->ring_why : "not asked for";
}

bool kio_ring_wanted(const Kio *k)
{
    return k->ring_want && (atomic_load(&k->kernel_flags) & KIO_OVER_IO_URING);
}

uint64_t kio_ring_requests(const Kio *k)
{
    return kio_uring_requests(__atomic_load_n(&k->ring, __ATOMIC_ACQUIRE));
}
