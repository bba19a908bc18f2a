#include "kio_uring.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The kernel's side (include/uapi/linux/fuse.h, protocol 7.42 and later). */
#define KU_IN_OUT_SZ        128
#define KU_OP_IN_SZ         128
#define KU_CMD_REGISTER     1
#define KU_CMD_COMMIT_FETCH 2
#define KU_MIN_READ_BUFFER  8192

struct ku_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};
_Static_assert(sizeof(struct ku_ent_in_out) == 32, "fuse_uring_ent_in_out");

struct ku_req_header {
    char in_out[KU_IN_OUT_SZ]; /* fuse_in_header, then fuse_out_header */
    char op_in[KU_OP_IN_SZ];   /* the opcode's own header (in_args[0]) */
    struct ku_ent_in_out ent;
};
_Static_assert(sizeof(struct ku_req_header) == 288, "fuse_uring_req_header");

struct ku_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};
_Static_assert(sizeof(struct ku_cmd_req) == 24, "fuse_uring_cmd_req");

struct ku_in_header { /* fuse_in_header */
    uint32_t len, opcode;
    uint64_t unique, nodeid;
    uint32_t uid, gid, pid;
    uint16_t total_extlen, padding;
};
_Static_assert(sizeof(struct ku_in_header) == 40, "fuse_in_header");

struct ku_out_header { /* fuse_out_header */
    uint32_t len;
    int32_t error;
    uint64_t unique;
};

/* Room before the payload for the request's two headers, so that a request
 * is rebuilt in place, its payload never copied. */
#define KU_LEAD (sizeof(struct ku_in_header) + KU_OP_IN_SZ)

#define KU_STOP_TAG 1 /* user_data of the stop poll (entries are pointers) */

typedef struct {
    KioRing *r;
    unsigned qid;
    struct io_uring ring;
    bool ring_ok;
    GThread *thread;
    struct ku_req_header hdr;
    char *buf; /* KU_LEAD + payload_max: the payload at buf + KU_LEAD */
    struct iovec iov[2];
    uint64_t unique; /* the request being served, 0: none */
    bool replied;
} Ent;

struct KioRing {
    struct fuse_session *se;
    int fd;
    int stop_fd; /* eventfd: written once, every thread's poll sees it */
    size_t payload_max;
    void (*prepare)(void *req, size_t len);
    unsigned n;
    Ent *ents;
    atomic_uint_fast64_t requests;
    GMutex lock; /* leaf: registration results */
    GCond cond;
    unsigned registered, failed;
    const char *why;
};

/* The entry this thread serves a request of (its thread is the entry's). */
static _Thread_local Ent *tls_ent;

const char *kio_uring_supervised_why(void)
{
    return "a supervised mount stays on /dev/fuse: the kernel resends after a daemon's death "
           "only the requests read from /dev/fuse, not those held in the dead daemon's ring "
           "entries";
}

const char *kio_uring_auto_unmount_why(void)
{
    return "-o auto_unmount stays on /dev/fuse: fusermount3 unmounts a dead daemon's mount "
           "only when a request to it fails with ENOTCONN, and one made while a ring closes "
           "fails with ECONNABORTED";
}

bool kio_uring_enabled(void)
{
    char c = 'N';
    int fd = open("/sys/module/fuse/parameters/enable_uring", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    if (read(fd, &c, 1) != 1)
        c = 'N';
    close(fd);
    return c == 'Y' || c == 'y' || c == '1';
}

/* Queues the entry's command: REGISTER the first time, then COMMIT (the
 * reply in its buffers) AND FETCH the next request. */
static int queue_cmd(Ent *e, unsigned op, uint64_t commit_id)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
    if (!sqe)
        return -EBUSY;
    memset(sqe, 0, 2 * sizeof *sqe); /* SQE128: the command area follows */
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = e->r->fd;
    sqe->cmd_op = op;
    sqe->addr = (uint64_t)(uintptr_t)e->iov;
    sqe->len = 2;
    struct ku_cmd_req *c = (struct ku_cmd_req *)sqe->cmd;
    c->commit_id = commit_id;
    c->qid = (uint16_t)e->qid;
    io_uring_sqe_set_data(sqe, e);
    return 0;
}

/* 0, or -errno: liburing returns it and leaves errno alone */
static int submit(Ent *e)
{
    int n = io_uring_submit(&e->ring);
    return n < 0 ? n : 0;
}

static void queue_stop_poll(Ent *e)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
    if (!sqe)
        return;
    memset(sqe, 0, 2 * sizeof *sqe);
    io_uring_prep_poll_add(sqe, e->r->stop_fd, POLLIN);
    io_uring_sqe_set_data64(sqe, KU_STOP_TAG);
}

static void note_registered(KioRing *r, bool ok, const char *why)
{
    g_mutex_lock(&r->lock);
    if (ok) {
        r->registered++;
    } else {
        r->failed++;
        if (!r->why)
            r->why = why;
    }
    g_cond_broadcast(&r->cond);
    g_mutex_unlock(&r->lock);
}

/* One request, rebuilt where a read(2) would have put it, through libfuse. */
static void serve(Ent *e)
{
    KioRing *r = e->r;
    struct ku_in_header ih;
    memcpy(&ih, e->hdr.in_out, sizeof ih);
    size_t payload = e->hdr.ent.payload_sz;
    size_t heads = ih.len >= sizeof ih + payload ? ih.len - sizeof ih - payload : 0;
    if (heads > KU_OP_IN_SZ || payload > r->payload_max)
        heads = KU_OP_IN_SZ; /* not a layout we know: libfuse answers what it can */
    char *start = e->buf + KU_LEAD - heads - sizeof ih;
    memcpy(start, &ih, sizeof ih);
    memcpy(start + sizeof ih, e->hdr.op_in, heads);
    size_t len = sizeof ih + heads + payload;
    if (r->prepare)
        r->prepare(start, len);
    e->unique = ih.unique;
    e->replied = false;
    tls_ent = e;
    struct fuse_buf fbuf = {.mem = start, .size = len};
    fuse_session_process_buf(r->se, &fbuf);
    tls_ent = NULL;
    atomic_fetch_add_explicit(&r->requests, 1, memory_order_relaxed);
    if (!e->replied) {
        /* every request that comes through the ring takes a reply: one not
         * given here is answered, so that the entry goes on */
        struct ku_out_header oh = {.len = sizeof oh, .error = -EIO, .unique = ih.unique};
        memcpy(e->hdr.in_out, &oh, sizeof oh);
        e->hdr.ent.payload_sz = 0;
    }
    e->unique = 0;
}

static gpointer ent_thread(gpointer p)
{
    Ent *e = p;
    KioRing *r = e->r;
    /* On its queue's CPU: the kernel queues a request on the queue of the
     * CPU its caller runs on, so the wake-up and the reply stay on that CPU
     * (a thread left to float is woken on another, one migration a request).
     * Where the daemon may not run there (a cpuset), it floats. */
    if (e->qid < CPU_SETSIZE) {
        cpu_set_t cpu;
        CPU_ZERO(&cpu);
        CPU_SET(e->qid, &cpu);
        (void)pthread_setaffinity_np(pthread_self(), sizeof cpu, &cpu);
    }
    /* made by the thread that uses it: io_uring cancels a ring's commands
     * when the task that made the ring exits (libfuse ends idle threads) */
    e->ring_ok = io_uring_queue_init(4, &e->ring, IORING_SETUP_SQE128) == 0;
    if (!e->ring_ok) {
        note_registered(r, false, "io_uring_setup failed");
        return NULL;
    }
    queue_stop_poll(e);
    int rc = queue_cmd(e, KU_CMD_REGISTER, 0);
    if (rc == 0)
        rc = submit(e);
    /* a REGISTER the kernel refuses completes during the submit; one it
     * takes completes only with the entry's first request */
    struct io_uring_cqe *early = NULL;
    if (rc == 0 && io_uring_peek_cqe(&e->ring, &early) == 0 && early &&
        io_uring_cqe_get_data64(early) != KU_STOP_TAG && early->res < 0) {
        g_debug("ckptfs: ring entry %u of queue %u: %s", (unsigned)(e - r->ents), e->qid,
                g_strerror(-early->res));
        note_registered(r, false,
                        early->res == -EOPNOTSUPP ? "the fuse module has enable_uring off"
                                                  : "the kernel refused a ring entry");
        io_uring_cqe_seen(&e->ring, early);
        return NULL;
    }
    note_registered(r, rc == 0, "the ring's first submission failed");
    if (rc < 0)
        return NULL;
    for (;;) {
        struct io_uring_cqe *cqe = NULL;
        if (rc == 0) {
            rc = io_uring_wait_cqe(&e->ring, &cqe);
            if (rc == -EINTR) {
                rc = 0;
                continue;
            }
        }
        if (rc < 0 || !cqe)
            return NULL;
        uint64_t tag = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&e->ring, cqe);
        /* stopped; or -ENOTCONN: unmounted, aborted */
        if (tag == KU_STOP_TAG || res < 0)
            return NULL;
        serve(e);
        rc = queue_cmd(e, KU_CMD_COMMIT_FETCH, e->hdr.ent.commit_id);
        if (rc == 0)
            rc = submit(e);
    }
}

bool kio_uring_reply(uint64_t unique, const struct iovec *iov, int count, ssize_t *written)
{
    Ent *e = tls_ent;
    KioRing *r = e ? e->r : NULL;
    if (!e || e->unique != unique || count < 1 || iov[0].iov_len < sizeof(struct ku_out_header))
        return false;
    /* the out header, then the reply's body into the payload buffer */
    size_t total = 0, body = 0;
    memcpy(e->hdr.in_out, iov[0].iov_base, sizeof(struct ku_out_header));
    total += iov[0].iov_len;
    size_t extra = iov[0].iov_len - sizeof(struct ku_out_header);
    if (extra) {
        memcpy(e->buf + KU_LEAD, (const char *)iov[0].iov_base + sizeof(struct ku_out_header),
               MIN(extra, r->payload_max));
        body = MIN(extra, r->payload_max);
    }
    for (int i = 1; i < count; i++) {
        size_t n = MIN(iov[i].iov_len, r->payload_max - body);
        if (n) /* libfuse passes empty pieces with a NULL base */
            memcpy(e->buf + KU_LEAD + body, iov[i].iov_base, n);
        body += n;
        total += iov[i].iov_len;
    }
    e->hdr.ent.payload_sz = (uint32_t)body;
    e->replied = true;
    *written = (ssize_t)total;
    return true;
}

static unsigned possible_cpus(void)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/sys/devices/system/cpu/possible", &text, NULL, NULL))
        return 0;
    /* "0-3,5": the kernel numbers its queues 0 .. the highest */
    unsigned high = 0;
    for (char *p = text; *p;) {
        char *end = NULL;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p)
            break;
        high = MAX(high, (unsigned)v);
        p = end;
        while (*p == '-' || *p == ',' || *p == '\n')
            p++;
    }
    return high + 1;
}

static void free_ring(KioRing *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        Ent *e = &r->ents[i];
        if (e->thread)
            g_thread_join(e->thread);
        if (e->ring_ok)
            io_uring_queue_exit(&e->ring);
        g_free(e->buf);
    }
    g_free(r->ents);
    if (r->stop_fd >= 0)
        close(r->stop_fd);
    g_mutex_clear(&r->lock);
    g_cond_clear(&r->cond);
    g_free(r);
}

KioRing *kio_uring_start(struct fuse_session *se, int fd, uint32_t max_write, uint32_t max_pages,
                         unsigned depth, void (*prepare)(void *req, size_t len), const char **why)
{
    unsigned queues = possible_cpus();
    if (!queues) {
        *why = "the number of possible CPUs is not known";
        return NULL;
    }
    KioRing *r = g_new0(KioRing, 1);
    g_mutex_init(&r->lock);
    g_cond_init(&r->cond);
    r->se = se;
    r->fd = fd;
    r->prepare = prepare;
    /* the kernel refuses an entry whose payload buffer could not hold its
     * largest request */
    long page = sysconf(_SC_PAGESIZE);
    r->payload_max =
        MAX(MAX((size_t)KU_MIN_READ_BUFFER, (size_t)max_write), (size_t)max_pages * (size_t)page);
    r->stop_fd = eventfd(0, EFD_CLOEXEC);
    r->n = queues * depth;
    r->ents = g_new0(Ent, r->n);
    for (unsigned i = 0; i < r->n; i++) {
        Ent *e = &r->ents[i];
        e->r = r;
        e->qid = i / depth;
        e->buf = g_malloc(KU_LEAD + r->payload_max);
        e->iov[0] = (struct iovec){&e->hdr, sizeof e->hdr};
        e->iov[1] = (struct iovec){e->buf + KU_LEAD, r->payload_max};
    }
    if (r->stop_fd < 0) {
        *why = "eventfd failed";
        free_ring(r);
        return NULL;
    }
    for (unsigned i = 0; i < r->n; i++)
        r->ents[i].thread = g_thread_new("ckptfs-ring", ent_thread, &r->ents[i]);
    g_mutex_lock(&r->lock);
    while (r->registered + r->failed < r->n)
        g_cond_wait(&r->cond, &r->lock);
    bool all = r->registered == r->n;
    const char *fail = r->why;
    g_mutex_unlock(&r->lock);
    if (!all) {
        /* the kernel switches to the ring only once every queue has an
         * entry; with none missing it never did: /dev/fuse serves */
        *why = fail ? fail : "the kernel refused a ring entry";
        kio_uring_stop(r);
        return NULL;
    }
    return r;
}

void kio_uring_stop(KioRing *r)
{
    if (!r)
        return;
    uint64_t one = 1;
    if (write(r->stop_fd, &one, sizeof one) < 0) {
    }
    free_ring(r);
}

uint64_t kio_uring_requests(const KioRing *r)
{
    return r ? atomic_load(&r->requests) : 0;
}
