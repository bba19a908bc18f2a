/* The daemon: the one struct ckptfs, the userdata of its FUSE session and
 * the only mutable state of the process (docs/DESIGN.md, "Architecture").
 *
 * It is what the request handlers (ops/) and the views (views/) take; the
 * layers below them (nodes/, outlive/, kernel/) never see it, each taking
 * its own part (the node table, the state memfd, the protocol module).
 *
 * Fields are set up before the session starts and torn down after it
 * ends, except those marked "live" (changed on a live mount by the live
 * settings, views/control.c: read without a lock, written atomically) and
 * those marked with the lock that guards them.
 *
 * Lock order, outermost first: the one list for every lock of fs/.  No
 * lock of fs/ is held across a reply to the kernel or a kernel
 * notification, nor across a backing system call other than close(), but
 * the catalog load hand-off's (3); NodeTable.lock is held across the
 * non-blocking hold or let-go sent to the supervisor (nodes/removed.c),
 * so that the two keep their order.
 *   1. InflightAdopted.lock (outlive/inflight.c): a daemon that attached,
 *      while it gives back what a resent request's first try took; the
 *      give-back takes 2.
 *   2. NodeTable.lock (nodes/) and open_lock (the handle registry,
 *      ops/handles.c): never both at once, and nothing else is taken under
 *      either but SupLink.letgo_lock (a hold or let-go sent under the
 *      table's): FdCache.lock only after the table's is released, and a
 *      handle is freed after open_lock is released.
 *   3. LoadCtl.lock (views/catalog_watch.c, the catalog load hand-off: the
 *      loader thread and the views' stop), over Views.lock and over the
 *      catalog's locks while the loader re-reads the jobs written during
 *      the load.
 *   4. IdentityWatch.lock (views/identity_watch.c: one load of the
 *      identity map at a time), over the identity's map lock inside core/;
 *      control_lock (views/control.c: one live change at a time), over
 *      Views.inval_lock (a shorter rescan brings queued listing drops
 *      forward).
 *   5. Leaf locks, under which nothing else is taken: FdCache.lock,
 *      DirPark.lock, Views.lock, each VNode.lock, Views.inval_lock,
 *      LogLimit.lock, Kio.gate_lock, KioRing.lock,
 *      SupLink.letgo_lock (outlive/supervisor.c), each
      Drop.lock (ops/direct.c; a drop's notification is written without
      it), and those
 *      inside core/: the catalog's rebuild lock over its table lock, the
 *      identity cache, the collision store, the job-name interner. */
#pragma once
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <glib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collision.h"
#include "identity.h"
#include "kernel/kio.h"
#include "metrics.h"
#include "nodes/nodes.h"
#include "nodes/passthrough.h"
#include "options.h"
#include "outlive/inflight.h"
#include "outlive/state.h"
#include "outlive/supervisor.h"
#include "policy.h"

/* The journal's share of collisions (ops/enforce.c): at most a burst per window. */
typedef struct {
    GMutex lock;
    gint64 window_start;
    guint in_window;
    guint64 suppressed;
} LogLimit;

/* identity_map=FILE kept in force (views/identity_watch.c): loaded at start,
 * again when the file changes (inotify on its directory, and a stat every
 * rescan interval) and on SIGHUP. */
typedef struct {
    GMutex lock;           /* one load at a time; guards stamp */
    CkIdentityMap *loaded; /* checked at set-up (main.c), handed to the identity */
    bool in_force;         /* a map was loaded (lock) */
    struct {
        bool exists;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime, ctime;
    } stamp; /* the file as it was at the last load, taken or failed */
    GThread *thread;
    int inotify_fd, stop_fd; /* -1 when not running */
} IdentityWatch;

/* Directories the kernel reads without an OPENDIR (ops/dirs.c): the listing
 * a READDIR stopped in, kept for the READDIR that goes on from there. */
#define DIRPARK_SLOTS 16
typedef struct {
    GMutex lock;
    struct {
        fuse_ino_t ino;
        void *dir; /* DirHandle, NULL: free */
    } slot[DIRPARK_SLOTS];
    unsigned next; /* round robin: the slot given up when none is free */
} DirPark;

struct ckptfs {
    Kio kio; /* first: the protocol module's hooks get the session's userdata (kio_attach) */

    /* what the daemon is, and where */
    FsOptions opt; /* opt.live: the live settings as the daemon started with them */
    char *backing; /* realpath of BACKING_DIR, no trailing '/' */
    size_t backing_len;
    char *mountpoint; /* realpath of MOUNTPOINT */
    int root_fd;      /* O_PATH|O_DIRECTORY of the backing root */
    int mount_fd;     /* O_RDONLY of the backing root: open_by_handle_at's mount_fd (no O_PATH) */
    bool is_root;     /* the daemon runs with euid 0 (AT_EMPTY_PATH links, open_by_handle_at) */
    uid_t euid;
    gid_t egid;
    gid_t *groups; /* the daemon's supplementary groups, restored after acting as a caller */
    int ngroups;
    CkIdentity *identity;       /* NULL when neither job= nor identity= is given */
    IdentityWatch idwatch;      /* identity_map=FILE; IdentityWatch.lock */
    CkCollisionLog *collisions; /* never NULL */
    double entry_timeout;       /* passthrough tree */
    double attr_timeout;
    /* set at INIT (before any other request): directories are opened by
     * the kernel alone, READDIR and FSYNCDIR come with fh 0 (ops/dirs.c) */
    bool no_opendir;
    /* set at INIT: the kernel leaves the umask to the daemon (creates are
     * made under the caller's umask, so that the backing file system
     * applies a default ACL instead, as it would natively: ops/creds.c) */
    bool dont_mask;
    /* set at INIT: the kernel caches POSIX ACLs and enforces them
     * (FUSE_POSIX_ACL); without, it asks the daemon for them every time */
    bool kernel_acls;
    /* the mount's atime rule (backing_mount.h; the reload thread's once
     * started), given to the private copy of the backing mount when the
     * daemon could make one (data_root_fd), else to nodes/ as O_NOATIME */
    unsigned long atime_rule;
    /* the backing root in the daemon's private copy of its mount
     * (backing_mount.h), O_PATH and O_RDONLY: files and directories are
     * opened for I/O through it; -1 without a copy */
    int data_root_fd, data_mount_fd;
    bool keep;         /* node records outlive an unmount (outlive/keep.h): a root daemon */
    int keep_lock;     /* held from the start to the last records */
    bool supervised;   /* a supervisor keeps the connection (outlive/supervisor.h) */
    bool auto_unmount; /* -o auto_unmount: fusermount3 unmounts when the daemon dies */
    SupLink *link;     /* to the supervisor (its sock is -1 when there is none) */
    gint64 started_us; /* when this daemon started (process_start_time_seconds) */

    /* the layers' own state */
    State state;             /* the state memfd: what a daemon that takes over needs */
    InflightJournal journal; /* this daemon's, when it may be replaced (attach.c) */
    NodeTable nodes;         /* NodeTable.lock */
    Passthrough pt;          /* its decisions are the node table's */
    FsMetrics *metrics;      /* atomics only; in the state memfd */
    void *views;             /* views/viewstate.h's Views: its own locks */
    struct fuse_session *se;
    GThreadPool *direct_drops; /* ops/direct.c; the main thread's */
    gint direct_stopping;      /* atomic: drops write nothing once set */

    /* the request handlers' (ops/) */
    GMutex open_lock;   /* the open file and directory handles by fh (ops/handles.c) */
    void **open_live;   /* [STATE_HANDLE_SLOTS]: fh -> handle (open_lock) */
    SlotPool open_pool; /* fh slots (open_lock) */
    const struct HandleType *const *open_types; /* by HandleKind */
    DirPark dirpark;                            /* DirPark.lock */
    LogLimit log_limit;                         /* LogLimit.lock */

    /* the live settings (views/control.c): policy= and legacy= in policy,
     * rescan= in the views, tag_env= here */
    CkPolicy policy;     /* live: audit, legacy_rw; off is fixed */
    const char *tag_env; /* live: tag_env=VAR, interned, NULL for none */
    GMutex control_lock; /* one change at a time, into the state memfd too */
    FsLive configured;   /* what the configuration said at the last load (control_lock) */

    /* main.c's: the loop, the handover, the reload thread */
    char *ready_note;     /* what a takeover's requester is told besides "done" (g_free) */
    atomic_bool handover; /* the supervisor asked for the connection */
    pthread_t main_thread;
    int reload_fd;   /* signalfd of SIGHUP, -1 */
    int mounts_fd;   /* /proc/self/mountinfo: POLLPRI when a mount changed (a remount), -1 */
    int reload_stop; /* eventfd that ends the reload thread, -1 */
    GThread *reload_thread;
};
_Static_assert(offsetof(struct ckptfs, kio) == 0, "the session's userdata begins with its Kio");
