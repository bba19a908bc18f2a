/* The one userdata of the ckptfs daemon (SPEC §4): options, the backing
 * root, the node table, the policy, the collision log and the counters.
 *
 * Everything here is set up before the session starts and torn down after
 * it ends; while requests run, only the fields marked "mutable" change, each
 * under the lock named beside it.
 *
 * Lock order (outermost first), for every file of fs/:
 *   1. NodeTable.lock         (inode.c: the hash tables and nlookup counts)
 *   2. FdCache.lock           (inode.c: the bounded descriptor cache)
 *   3. locks inside core/     (CkIdentity, CkCollisionLog: leaf locks)
 * No lock is held across a reply to the kernel or across a backing syscall
 * other than close(). */
#pragma once
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <glib.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "collision.h"
#include "identity.h"
#include "policy.h"
#include "nodes/nodes.h"
#include "nodes/passthrough.h"
#include "kernel/kio.h"
#include "metrics.h"
#include "options.h"
#include "outlive/inflight.h"
#include "outlive/supervisor.h"

/* The journal's share of collisions (enforce.c): at most a burst per window. */
typedef struct {
    GMutex lock; /* leaf */
    gint64 window_start;
    guint in_window;
    guint64 suppressed;
} LogLimit;

/* Directories the kernel reads without an OPENDIR (dirs.c): the listing a
 * READDIR stopped in, kept for the READDIR that goes on from there. */
#define DIRPARK_SLOTS 16
typedef struct {
    GMutex lock; /* leaf */
    struct {
        fuse_ino_t ino;
        void *dir; /* DirHandle, NULL: free */
    } slot[DIRPARK_SLOTS];
    unsigned next; /* round robin: the slot given up when none is free */
} DirPark;

struct ckptfs {
    Kio kio; /* first: the protocol module's hooks get the session's userdata (kio_attach) */
    /* immutable while mounted */
    FsOptions opt;
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
    CkPolicy policy;
    CkIdentity *identity;       /* NULL when neither job= nor identity= is given */
    CkCollisionLog *collisions; /* never NULL */
    double entry_timeout;       /* passthrough tree */
    double attr_timeout;
    /* set at INIT (before any other request): directories are opened by
     * the kernel alone, READDIR and FSYNCDIR come with fh 0 (dirs.c) */
    bool no_opendir;

    /* mutable, each with its own lock */
    NodeTable nodes;    /* NodeTable.lock */
    Passthrough pt;     /* the bindings' decisions: NodeTable.lock */
    DirPark dirpark;    /* DirPark.lock */
    FsMetrics *metrics; /* atomics only; in the state memfd (set up with it) */
    void *views;        /* fs/views.c private state; its own locks, leaf level */
    /* open file and directory handles by fh (handles.c; open_lock, leaf) */
    GMutex open_lock;
    void **open_live;                           /* [STATE_HANDLE_SLOTS]: fh -> handle */
    SlotPool open_pool;                         /* fh slots */
    const struct HandleType *const *open_types; /* by HandleKind */
    State state; /* what a daemon that takes over needs (state.h); set up before the session */

    struct fuse_session *se;
    LogLimit log_limit;      /* its own lock */
    InflightJournal journal; /* this daemon's, when it may be replaced */
    atomic_bool handover;    /* the supervisor asked for the connection (main.c) */
    bool supervised;         /* a supervisor keeps the connection (supervisor.h) */
    SupLink *link;           /* to the supervisor (its sock is -1 when there is none) */
    char *ready_note;        /* what a takeover's requester is told besides "done" (g_free) */
    pthread_t main_thread;
    gint64 started_us; /* when this daemon started (process_start_time_seconds) */

    /* the live settings (control.c): policy above, rescan in the views */
    GMutex control_lock; /* leaf: one change at a time, in the state memfd too */
    const char *tag_env; /* tag_env=VAR, interned, NULL for none; read atomically */
    FsLive configured;   /* what the configuration said at the last load (control_lock) */
    int reload_fd;       /* signalfd of SIGHUP (main.c), -1 */
    int reload_stop;     /* eventfd that ends the reload thread, -1 */
    GThread *reload_thread;
};
_Static_assert(offsetof(struct ckptfs, kio) == 0, "the session's userdata begins with its Kio");
