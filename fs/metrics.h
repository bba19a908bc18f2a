/* Counters behind _views/.metrics (ckptfs(8) THE VIEWS): lock-free
 * atomics bumped on every request, rendered in the Prometheus text
 * exposition format.  They live in the state memfd (outlive/state.h): a
 * daemon that takes the mount over counts on from where the dead one
 * stopped, so a scrape never sees a counter go back; the gauges it sets
 * afresh (fs_metrics_reset_gauges).  Every layer of fs/ counts here. */
#pragma once
#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "options.h"
#include "policy.h"

/* Keep in step with fs_op_names in metrics.c. */
typedef enum {
    FS_OP_LOOKUP,
    FS_OP_FORGET,
    FS_OP_GETATTR,
    FS_OP_SETATTR,
    FS_OP_READLINK,
    FS_OP_MKNOD,
    FS_OP_MKDIR,
    FS_OP_UNLINK,
    FS_OP_RMDIR,
    FS_OP_SYMLINK,
    FS_OP_RENAME,
    FS_OP_LINK,
    FS_OP_OPEN,
    FS_OP_READ,
    FS_OP_WRITE,
    FS_OP_FLUSH,
    FS_OP_RELEASE,
    FS_OP_FSYNC,
    FS_OP_OPENDIR,
    FS_OP_READDIR,
    FS_OP_READDIRPLUS,
    FS_OP_RELEASEDIR,
    FS_OP_FSYNCDIR,
    FS_OP_STATFS,
    FS_OP_SETXATTR,
    FS_OP_GETXATTR,
    FS_OP_LISTXATTR,
    FS_OP_REMOVEXATTR,
    FS_OP_ACCESS,
    FS_OP_CREATE,
    FS_OP_FALLOCATE,
    FS_OP_LSEEK,
    FS_OP_COPY_FILE_RANGE,
    FS_OP_COUNT
} FsOp;

#define FS_ERRNO_MAX 134

/* Answers that are not failures: a lookup of a name that does not exist (a
 * create's first step, a PATH search), a getxattr of an attribute the file
 * has not (every ls -l asks for ACLs and capabilities) or of a kind the
 * file system does not support there (the views' labels and ACLs, which
 * backups ask for of every file), and the daemon's own
 * ENOSYS to the first OPENDIR (dirs.c: from then on the kernel opens
 * directories alone).  Counted apart so that they do not drown EACCES and
 * EIO in ckptfs_errors_total, and an alert on errors does not fire on every
 * mount. */
typedef enum {
    FS_MISS_LOOKUP_ENOENT,
    FS_MISS_GETXATTR_ENODATA,
    FS_MISS_OPENDIR_ENOSYS,
    FS_MISS_GETXATTR_EOPNOTSUPP,
    FS_MISS_COUNT
} FsMiss;

/* Why an open of a backing file went without passthrough (label values in
 * metrics.c). */
typedef enum {
    FS_PT_OFF,          /* -o passthrough=off, or -o writeback */
    FS_PT_UNPRIVILEGED, /* the kernel binds only for CAP_SYS_ADMIN */
    FS_PT_KERNEL,       /* the kernel did not offer or accept it */
    FS_PT_REGISTER,     /* FUSE_DEV_IOC_BACKING_OPEN failed */
    FS_PT_CACHED,       /* the inode is open without passthrough already */
    FS_PT_WHY_COUNT
} FsPtWhy;

typedef struct {
    atomic_uint_fast64_t ops[FS_OP_COUNT];
    atomic_uint_fast64_t errors[FS_ERRNO_MAX + 1];      /* [0] counts errnos above the max */
    atomic_uint_fast64_t misses[FS_MISS_COUNT];         /* expected misses, not in errors */
    atomic_uint_fast64_t refusals[CK_VERDICT_COUNT][2]; /* [kind][0 denied, 1 allowed] */
    atomic_uint_fast64_t read_bytes;                    /* through the daemon, passthrough tree */
    atomic_uint_fast64_t written_bytes;
    atomic_uint_fast64_t views_read_bytes; /* served from _views (state files, texts) */
    atomic_uint_fast64_t control_changes[FS_LIVE_COUNT]; /* live settings changed, by FsLiveKey */
    atomic_uint_fast64_t config_reloads[2];              /* SIGHUP: [0] failed, [1] ok */
    atomic_uint_fast64_t views_served;
    atomic_uint_fast64_t rescans;
    atomic_uint_fast64_t catalog_jobs; /* gauges, set by the views */
    atomic_uint_fast64_t catalog_markers;
    atomic_uint_fast64_t pt_opens;                      /* opens bound in passthrough */
    atomic_uint_fast64_t pt_fallbacks[FS_PT_WHY_COUNT]; /* opens of backing files without */
    atomic_int_fast64_t pt_ids;                         /* gauge: backing ids registered */
    /* the catalog's upkeep (catalog_watch.c) */
    atomic_uint_fast64_t catalog_markers_loaded; /* gauge: markers read and resolved */
    atomic_uint_fast64_t rescan_duration_us;     /* gauge: the last periodic pass */
    atomic_uint_fast64_t sweep_duration_us;      /* gauge: the last sweep over every job */
    atomic_uint_fast64_t inotify_overflows;
    /* one request in FS_METRIC_SAMPLE_EVERY of each thread, by operation:
     * how many, and the thread's CPU time and context switches from its
     * start to the start of the thread's next request (the reply and the
     * wait for the next one included) */
    atomic_uint_fast64_t sampled[FS_OP_COUNT];
    atomic_uint_fast64_t sampled_cpu_ns[FS_OP_COUNT];
    atomic_uint_fast64_t sampled_switches[FS_OP_COUNT];
    /* identity_map=FILE (views/identity_watch.c) */
    atomic_uint_fast64_t idmap_reloads[2]; /* [0] failed (the previous map kept), [1] ok */
    atomic_uint_fast64_t idmap_lines[2];   /* gauges: [0] cgroup lines, [1] uid lines in force */
} FsMetrics;
/* The layout is part of the state memfd's: a change needs STATE_VERSION + 1. */
#define FS_METRICS_SIZE 2552

/* A sample costs two getrusage calls (about 2 us each on a VM): one request
 * in 16 keeps that under 0.3 us a request on average. */
#define FS_METRIC_SAMPLE_EVERY 16

/* Zeroes the gauges (a daemon that takes over sets them for itself). */
void fs_metrics_reset_gauges(FsMetrics *m);

/* The request the calling thread serves (each handler counts its op first,
 * and replies on the same thread): tells an expected miss from an error. */
extern _Thread_local FsOp fs_metric_cur_op;
extern _Thread_local unsigned fs_metric_tick; /* requests of this thread */
extern _Thread_local bool fs_metric_armed;    /* a sample of this thread runs */
/* Ends this thread's running sample, and starts one on the sampled ticks. */
void fs_metric_sample(FsMetrics *m, FsOp op);

static inline void fs_metric_op(FsMetrics *m, FsOp op)
{
    if (G_UNLIKELY(fs_metric_armed || ++fs_metric_tick % FS_METRIC_SAMPLE_EVERY == 0))
        fs_metric_sample(m, op);
    fs_metric_cur_op = op;
    atomic_fetch_add_explicit(&m->ops[op], 1, memory_order_relaxed);
}

static inline void fs_metric_err(FsMetrics *m, int err)
{
    if (err <= 0)
        return;
    if (err == ENOENT && fs_metric_cur_op == FS_OP_LOOKUP)
        atomic_fetch_add_explicit(&m->misses[FS_MISS_LOOKUP_ENOENT], 1, memory_order_relaxed);
    else if (err == ENODATA && fs_metric_cur_op == FS_OP_GETXATTR)
        atomic_fetch_add_explicit(&m->misses[FS_MISS_GETXATTR_ENODATA], 1, memory_order_relaxed);
    else if (err == EOPNOTSUPP && fs_metric_cur_op == FS_OP_GETXATTR)
        atomic_fetch_add_explicit(&m->misses[FS_MISS_GETXATTR_EOPNOTSUPP], 1, memory_order_relaxed);
    else if (err == ENOSYS && fs_metric_cur_op == FS_OP_OPENDIR)
        atomic_fetch_add_explicit(&m->misses[FS_MISS_OPENDIR_ENOSYS], 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&m->errors[err <= FS_ERRNO_MAX ? err : 0], 1,
                                  memory_order_relaxed);
}

/* Bytes of a read served (views: from _views) or a write passed through. */
static inline void fs_metric_bytes(atomic_uint_fast64_t *counter, guint64 n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/* What the exposition shows of the mount besides the counters. */
typedef struct {
    const char *mount;               /* the mount point: the "mount" label of every series */
    guint64 nodes;                   /* the node table's current size */
    guint64 attaches;                /* daemons that attached to the live connection */
    guint64 failed_starts, give_ups; /* the supervisor's (state.h) */
    gint64 started_us;               /* when the serving daemon started (g_get_real_time) */
    bool ring;                       /* requests come over io_uring (else /dev/fuse) */
    guint64 ring_requests;
} FsMetricsMount;

/* The exposition text. */
GString *fs_metrics_render(FsMetrics *m, const FsMetricsMount *mnt);
