/* fs/kernel: the protocol module, the one place that speaks the kernel's
 * FUSE protocol beyond what libfuse 3.14 knows (docs/DESIGN.md, "The data
 * path").  It sits under libfuse (fuse_session_custom_io) on the session's
 * /dev/fuse descriptor, or, where the kernel offers it, on the rings of
 * FUSE over io_uring (kio_uring.h), and sees every request read and every
 * reply written.
 *
 * Contract: it knows nothing of policy, views, nodes or the state memfd,
 * and calls nothing of fs/ above it; a handler that wants its reply
 * amended says so in one call (kio_reply_open, kio_reply_create), and
 * whoever keeps account of requests is told through hooks (KioHooks).
 * It
 *  - notes what the kernel offers in its INIT request (protocol 7.40 bits
 *    libfuse 3.14 drops) and amends libfuse's INIT reply to ask for FUSE
 *    passthrough (FUSE_PASSTHROUGH, max_stack_depth) and for io_uring;
 *  - registers and releases backing files (FUSE_DEV_IOC_BACKING_OPEN/CLOSE);
 *  - amends one OPEN or CREATE reply with the backing id its handler gives:
 *    the kernel then reads, writes, splices and mmaps that file itself;
 *  - delivers FUSE_TMPFILE (opcode 51, unknown to libfuse 3.14) as a CREATE
 *    of the name KIO_TMPFILE_NAME, which no real CREATE can carry: the two
 *    requests and their replies have the same layout;
 *  - keeps a copy of the kernel's INIT request where the caller says
 *    (kio_keep_init), and, in a daemon that attaches to a live connection,
 *    gives libfuse that copy as its first request, drops libfuse's reply to
 *    it (the kernel had its answer long ago), then asks the kernel to queue
 *    again every request the dead daemon read and never answered
 *    (FUSE_NOTIFY_RESEND, Linux 6.9 and later) before any other request is
 *    read; kio_resent() tells a handler that its request is such a one;
 *  - answers requests with an error where no daemon serves (kio_fail_one,
 *    for the supervisor), and asks the kernel which nodes it still holds.
 * Requests are always read with read(2) (libfuse splices them only when
 * given a splice_receive, which kio does not give: it must see them). */
#pragma once
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <glib.h>
#include <stdint.h>

#include "kio_uring.h"

/* The protocol minor whose structures kio declares (7.40). */
#define KIO_PROTOCOL_MINOR 40

/* The name a FUSE_TMPFILE request reaches the create handler with. */
#define KIO_TMPFILE_NAME "/"

typedef struct {
    int fd;              /* the session's /dev/fuse descriptor, -1 before kio_attach */
    bool want;           /* passthrough=auto on a root daemon without writeback */
    const char *why_not; /* static text: why passthrough is off (NULL while it may be on) */
    int stack_depth;     /* max_stack_depth to ask for: 1 + the backing fs's own depth */
    atomic_uint_fast64_t init_unique;  /* unique of the kernel's INIT request, 0 before */
    atomic_uint_fast64_t kernel_flags; /* flags | flags2 << 32 of that INIT request */
    atomic_bool passthrough;           /* negotiated: the INIT reply asked for it */
    atomic_bool init_done;             /* the INIT reply went out */
    /* the kernel's INIT request, kept (kio_keep_init) */
    uint8_t *keep;
    _Atomic uint32_t *keep_len;
    size_t keep_max;
    /* attaching to a live connection (kio_replay_init) */
    const uint8_t *replay;
    size_t replay_len;
    atomic_bool replay_given; /* libfuse has the copy */
    atomic_bool gate_open;    /* the resend notification went out: reads may go on */
    GMutex gate_lock;
    GCond gate_cond;
    /* told of every request read and every reply written (kio_set_hooks) */
    const struct KioHooks *hooks;
    void *hooks_ctx;
    /* FUSE over io_uring (kio_uring.h) */
    bool ring_want;          /* io_uring=auto, and nothing excludes it */
    const char *ring_why;    /* static text: why /dev/fuse serves (NULL while the ring may) */
    unsigned ring_depth;     /* entries (threads) per queue */
    bool ring_negotiated;    /* the INIT reply asked for it */
    uint32_t init_max_write; /* as the INIT reply said */
    uint16_t init_max_pages;
    struct fuse_session *se;
    KioRing *ring; /* serving, once started */
} Kio;

/* want: the options allow passthrough (else why_not says why, once logged).
 * backing_stack_depth: 0 for a disk file system, 1 for overlayfs and the like. */
void kio_init(Kio *k, bool want, const char *why_not, int backing_stack_depth);
/* Before kio_attach: serve over io_uring where the kernel offers it (want),
 * depth entries per queue; else why_not (static text) is what the log and
 * the status say. */
void kio_want_ring(Kio *k, bool want, const char *why_not, unsigned depth);
/* Whether requests come over io_uring (after INIT), and why not (static
 * text, NULL when they do). */
bool kio_ring(const Kio *k);
const char *kio_ring_why_not(const Kio *k);
/* At INIT, before the reply: the ring will be asked for (libfuse must not
 * splice replies then: a ring entry takes them as bytes). */
bool kio_ring_wanted(const Kio *k);
/* Requests served over the ring so far. */
uint64_t kio_ring_requests(const Kio *k);
/* Keeps a copy of the kernel's INIT request in buf (max bytes), then its
 * length in *len (0 before).  Before kio_attach. */
void kio_keep_init(Kio *k, void *buf, _Atomic uint32_t *len, size_t max);
/* What the requests and replies that go through kio tell whoever keeps
 * account of them (the in-flight journal of a daemon that may be
 * replaced), called on the thread that serves the request:
 * - request: one was read whole, before libfuse sees it: its unique
 *   without the kernel's resend mark, whether it carries that mark, and
 *   whether it takes a reply (FORGET, BATCH_FORGET and INTERRUPT take none);
 * - forget: one (node id, count) of a FORGET or BATCH_FORGET just read;
 * - replied: the reply to this thread's request went out. */
typedef enum { KIO_REQ_REPLY, KIO_REQ_FORGET, KIO_REQ_INTERRUPT } KioReqKind;
typedef struct KioHooks {
    void (*request)(void *ctx, uint64_t unique, bool resent, KioReqKind kind);
    void (*forget)(void *ctx, uint64_t nodeid, uint64_t nlookup);
    void (*replied)(void *ctx);
} KioHooks;
/* Before kio_attach.  A session with hooks is one whose daemon may be
 * replaced: its request buffers are also written to once before the first
 * read, so that the kernel's copy of a request into them never faults. */
void kio_set_hooks(Kio *k, const KioHooks *hooks, void *ctx);
/* The session attaches to a live connection whose INIT (init, len bytes,
 * as kio_keep_init kept it) a previous daemon answered.  Before kio_attach. */
void kio_replay_init(Kio *k, const void *init, size_t len);
/* The request this thread handles was sent again by the kernel after a
 * daemon died before answering it: it may have been done already. */
bool kio_resent(void);
/* Whether the kernel holds an inode for nodeid (1) or not (0), or -errno:
 * an attribute invalidation (FUSE_NOTIFY_INVAL_INODE, offset -1) answers
 * ENOENT for a node it does not have.  A daemon that attaches uses it to
 * find the nodes whose FORGET its predecessor read and died with. */
int kio_node_known(Kio *k, uint64_t nodeid);
/* Asks the kernel to queue again every request a daemon read and never
 * answered (FUSE_NOTIFY_RESEND, Linux 6.9 and later): 0 or -errno. */
int kio_ask_resend(int fd);
/* With no daemon to serve fd: reads one request and answers it with -err
 * (requests that take no answer, FORGET and INTERRUPT, are dropped).
 * buf: KIO_FAIL_BUF bytes.  0, or -errno (-ENODEV: the mount is gone). */
#define KIO_FAIL_BUF (2u << 20)
int kio_fail_one(int fd, void *buf, size_t len, int err);
/* The kernel offered FUSE_HAS_RESEND at INIT (Linux 6.9 and later). */
bool kio_can_resend(const Kio *k);
/* Routes the session's requests and replies on fd (the session's own after
 * fuse_session_mount, or a live connection's) through kio, before the loop.
 * The session's userdata must begin with k: the hooks libfuse calls get
 * only that pointer.  Returns 0 or -errno. */
int kio_attach(Kio *k, struct fuse_session *se, int fd);
/* The session is about to close its descriptor: kio uses it no more. */
void kio_detach(Kio *k);
/* Before the INIT reply (in the init handler): passthrough will be asked
 * for.  After it: passthrough was negotiated. */
bool kio_passthrough(const Kio *k);
/* Why passthrough is off (static text), or NULL when it is on. */
const char *kio_why_not(const Kio *k);
/* Registers an open descriptor of a backing file; returns its backing id
 * (> 0) or -errno.  Release the id with kio_backing_close. */
int kio_backing_open(Kio *k, int fd);
void kio_backing_close(Kio *k, int backing_id);
/* fuse_reply_open / fuse_reply_create, the file bound to backing_id
 * (0: an ordinary reply). */
int kio_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int backing_id);
int kio_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
                     const struct fuse_file_info *fi, int backing_id);
