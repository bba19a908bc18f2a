#include "metrics.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "ckptfs-config.h"

static const char *const fs_op_names[FS_OP_COUNT] = {
    [FS_OP_LOOKUP] = "lookup",
    [FS_OP_FORGET] = "forget",
    [FS_OP_GETATTR] = "getattr",
    [FS_OP_SETATTR] = "setattr",
    [FS_OP_READLINK] = "readlink",
    [FS_OP_MKNOD] = "mknod",
    [FS_OP_MKDIR] = "mkdir",
    [FS_OP_UNLINK] = "unlink",
    [FS_OP_RMDIR] = "rmdir",
    [FS_OP_SYMLINK] = "symlink",
    [FS_OP_RENAME] = "rename",
    [FS_OP_LINK] = "link",
    [FS_OP_OPEN] = "open",
    [FS_OP_READ] = "read",
    [FS_OP_WRITE] = "write",
    [FS_OP_FLUSH] = "flush",
    [FS_OP_RELEASE] = "release",
    [FS_OP_FSYNC] = "fsync",
    [FS_OP_OPENDIR] = "opendir",
    [FS_OP_READDIR] = "readdir",
    [FS_OP_READDIRPLUS] = "readdirplus",
    [FS_OP_RELEASEDIR] = "releasedir",
    [FS_OP_FSYNCDIR] = "fsyncdir",
    [FS_OP_STATFS] = "statfs",
    [FS_OP_SETXATTR] = "setxattr",
    [FS_OP_GETXATTR] = "getxattr",
    [FS_OP_LISTXATTR] = "listxattr",
    [FS_OP_REMOVEXATTR] = "removexattr",
    [FS_OP_ACCESS] = "access",
    [FS_OP_CREATE] = "create",
    [FS_OP_FALLOCATE] = "fallocate",
    [FS_OP_LSEEK] = "lseek",
    [FS_OP_COPY_FILE_RANGE] = "copy_file_range",
};

static guint64 get(atomic_uint_fast64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static const char *errno_label(int e, char *buf, size_t len)
{
    const char *name = e ? strerrorname_np(e) : NULL;
    if (!name) {
        g_snprintf(buf, len, "%d", e);
        return buf;
    }
    return name;
}

_Thread_local FsOp fs_metric_cur_op = FS_OP_COUNT;
_Thread_local unsigned fs_metric_tick;
_Thread_local bool fs_metric_armed;
static _Thread_local struct {
    FsOp op;
    struct rusage start;
} sample_of_thread;

static guint64 ns_of(const struct timeval *tv)
{
    return (guint64)tv->tv_sec * 1000000000u + (guint64)tv->tv_usec * 1000u;
}

void fs_metric_sample(FsMetrics *m, FsOp op)
{
    struct rusage now;
    if (getrusage(RUSAGE_THREAD, &now) != 0)
        return;
    if (fs_metric_armed) {
        const struct rusage *was = &sample_of_thread.start;
        FsOp o = sample_of_thread.op;
        guint64 cpu = ns_of(&now.ru_utime) + ns_of(&now.ru_stime) - ns_of(&was->ru_utime) -
                      ns_of(&was->ru_stime);
        guint64 sw = (guint64)(now.ru_nvcsw + now.ru_nivcsw - was->ru_nvcsw - was->ru_nivcsw);
        atomic_fetch_add_explicit(&m->sampled[o], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->sampled_cpu_ns[o], cpu, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->sampled_switches[o], sw, memory_order_relaxed);
        fs_metric_armed = false;
        return; /* the next sample starts FS_METRIC_SAMPLE_EVERY requests later */
    }
    sample_of_thread.op = op;
    sample_of_thread.start = now;
    fs_metric_armed = true;
}

_Static_assert(sizeof(FsMetrics) == FS_METRICS_SIZE,
               "FsMetrics: a layout change needs STATE_VERSION + 1 (state.c)");

void fs_metrics_reset_gauges(FsMetrics *m)
{
    atomic_store(&m->catalog_jobs, 0);
    atomic_store(&m->catalog_markers, 0);
    atomic_store(&m->catalog_markers_loaded, 0);
    atomic_store(&m->rescan_duration_us, 0);
    atomic_store(&m->sweep_duration_us, 0);
    atomic_store(&m->pt_ids, 0);
    atomic_store(&m->idmap_lines[0], 0);
    atomic_store(&m->idmap_lines[1], 0);
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void append_label_value(GString *s, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\' || *p == '"')
            g_string_append_c(s, '\\');
        if (*p == '\n')
            g_string_append(s, "\\n");
        else
            g_string_append_c(s, *p);
    }
}

static void header(GString *s, const char *name, const char *type, const char *help)
{
    g_string_append_printf(s, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{mount="...",<labels>} value */
static void sample(GString *s, const char *name, const char *mount, const char *labels, guint64 v)
{
    g_string_append_printf(s, "%s{mount=\"", name);
    append_label_value(s, mount);
    g_string_append_printf(s, "\"%s%s} %" G_GUINT64_FORMAT "\n", labels ? "," : "",
                           labels ? labels : "", v);
}

/* name{mount="..."} seconds */
static void sample_seconds(GString *s, const char *name, const char *mount, double v)
{
    g_string_append_printf(s, "%s{mount=\"", name);
    append_label_value(s, mount);
    g_string_append_printf(s, "\"} %.6f\n", v);
}

/* One sample of name per operation, from v[FS_OP_COUNT]; divided by
 * per_second (nanoseconds: 1e9) when it is not 0. */
static void samples_by_op(GString *s, const char *name, const char *mount, atomic_uint_fast64_t *v,
                          double per_second)
{
    char lb[64];
    for (int op = 0; op < FS_OP_COUNT; op++) {
        g_snprintf(lb, sizeof lb, "op=\"%s\"", fs_op_names[op]);
        if (!per_second) {
            sample(s, name, mount, lb, get(&v[op]));
            continue;
        }
        g_string_append_printf(s, "%s{mount=\"", name);
        append_label_value(s, mount);
        g_string_append_printf(s, "\",%s} %.9f\n", lb, (double)get(&v[op]) / per_second);
    }
}

GString *fs_metrics_render(FsMetrics *m, const FsMetricsMount *mnt)
{
    GString *s = g_string_sized_new(8192);
    const char *mp = mnt->mount ? mnt->mount : "";
    char lb[128];

    header(s, "ckptfs_build_info", "gauge",
           "Always 1; the labels name the ckptfs and libfuse versions.");
    g_autoptr(GString) bl = g_string_new("version=\"");
    append_label_value(bl, CKPTFS_VERSION);
    g_string_append(bl, "\",libfuse=\"");
    append_label_value(bl, fuse_pkgversion());
    g_string_append_c(bl, '"');
    sample(s, "ckptfs_build_info", mp, bl->str, 1);

    header(s, "ckptfs_ops_total", "counter", "Requests served, by operation.");
    samples_by_op(s, "ckptfs_ops_total", mp, m->ops, 0);
    header(s, "ckptfs_requests_sampled_total", "counter",
           "Requests whose cost was measured (one in 16 of each thread), by operation.");
    samples_by_op(s, "ckptfs_requests_sampled_total", mp, m->sampled, 0);
    header(s, "ckptfs_request_cpu_sampled_seconds_total", "counter",
           "CPU time of the sampled requests, from a request's start to its thread's next "
           "(reply and wait included), by operation.");
    samples_by_op(s, "ckptfs_request_cpu_sampled_seconds_total", mp, m->sampled_cpu_ns, 1e9);
    header(s, "ckptfs_request_context_switches_sampled_total", "counter",
           "Context switches of the sampled requests' threads, by operation.");
    samples_by_op(s, "ckptfs_request_context_switches_sampled_total", mp, m->sampled_switches, 0);

    header(s, "ckptfs_errors_total", "counter",
           "Requests answered with an error, by errno (expected misses apart: "
           "ckptfs_misses_total).");
    for (int e = 0; e <= FS_ERRNO_MAX; e++) {
        guint64 v = get(&m->errors[e]);
        if (!v)
            continue;
        char buf[16];
        g_snprintf(lb, sizeof lb, "errno=\"%s\"", e ? errno_label(e, buf, sizeof buf) : "other");
        sample(s, "ckptfs_errors_total", mp, lb, v);
    }

    header(s, "ckptfs_misses_total", "counter",
           "Expected negative answers, not failures: lookups of names that do not exist, "
           "getxattr of attributes a file has not or that are not supported there, the "
           "OPENDIR answered ENOSYS so that the kernel opens directories alone.");
    sample(s, "ckptfs_misses_total", mp, "op=\"lookup\",errno=\"ENOENT\"",
           get(&m->misses[FS_MISS_LOOKUP_ENOENT]));
    sample(s, "ckptfs_misses_total", mp, "op=\"getxattr\",errno=\"ENODATA\"",
           get(&m->misses[FS_MISS_GETXATTR_ENODATA]));
    sample(s, "ckptfs_misses_total", mp, "op=\"getxattr\",errno=\"EOPNOTSUPP\"",
           get(&m->misses[FS_MISS_GETXATTR_EOPNOTSUPP]));
    sample(s, "ckptfs_misses_total", mp, "op=\"opendir\",errno=\"ENOSYS\"",
           get(&m->misses[FS_MISS_OPENDIR_ENOSYS]));

    /* both verdicts of every kind, whatever the mode: a series that comes
     * and goes with policy= breaks rate() and the alerts built on it */
    header(s, "ckptfs_collisions_total", "counter",
           "Writes that crossed a job namespace (the records of .collisions), by kind and "
           "verdict: denied (refused with EACCES) or allowed (audit mode, legacy=rw).");
    for (int k = 1; k < CK_VERDICT_COUNT; k++) {
        if (k == CK_VIEWS_READ_ONLY)
            continue; /* EROFS in the views: not a crossing, never recorded */
        for (int allowed = 0; allowed < 2; allowed++) {
            g_snprintf(lb, sizeof lb, "kind=\"%s\",verdict=\"%s\"", ck_verdict_kind((CkVerdict)k),
                       allowed ? "allowed" : "denied");
            sample(s, "ckptfs_collisions_total", mp, lb, get(&m->refusals[k][allowed]));
        }
    }

    header(s, "ckptfs_read_bytes_total", "counter",
           "Bytes read through the daemon from the passthrough tree (requested sizes: the "
           "last page of a file counts whole; reads the kernel passes through itself are "
           "not seen).");
    sample(s, "ckptfs_read_bytes_total", mp, NULL, get(&m->read_bytes));
    header(s, "ckptfs_written_bytes_total", "counter",
           "Bytes written through the daemon to the passthrough tree.");
    sample(s, "ckptfs_written_bytes_total", mp, NULL, get(&m->written_bytes));
    header(s, "ckptfs_views_read_bytes_total", "counter",
           "Bytes served from the views (state files, restore, ERROR, .collisions, .metrics).");
    sample(s, "ckptfs_views_read_bytes_total", mp, NULL, get(&m->views_read_bytes));

    header(s, "ckptfs_control_changes_total", "counter",
           "Settings changed on the live mount (through _views/.control, or by a reload of "
           "config=FILE), by setting.");
    for (int i = 0; i < FS_LIVE_COUNT; i++) {
        g_snprintf(lb, sizeof lb, "setting=\"%s\"", fs_live_keys[i]);
        sample(s, "ckptfs_control_changes_total", mp, lb, get(&m->control_changes[i]));
    }
    header(s, "ckptfs_config_reloads_total", "counter",
           "Reloads (SIGHUP) by result: ok, or failed (config=FILE did not parse, or "
           "collision_log=FILE could not be opened again; the settings stayed as they were).");
    sample(s, "ckptfs_config_reloads_total", mp, "result=\"ok\"", get(&m->config_reloads[1]));
    sample(s, "ckptfs_config_reloads_total", mp, "result=\"failed\"", get(&m->config_reloads[0]));

    header(s, "ckptfs_identity_map_reloads_total", "counter",
           "Loads of identity_map=FILE after the mount's (the file changed, or SIGHUP), by "
           "result: ok, or failed (the file did not parse or could not be read; the previous "
           "map stays in force).");
    sample(s, "ckptfs_identity_map_reloads_total", mp, "result=\"ok\"", get(&m->idmap_reloads[1]));
    sample(s, "ckptfs_identity_map_reloads_total", mp, "result=\"failed\"",
           get(&m->idmap_reloads[0]));
    header(s, "ckptfs_identity_map_lines", "gauge",
           "Lines of identity_map=FILE in force, by kind: cgroup (a cgroup prefix) or uid.");
    sample(s, "ckptfs_identity_map_lines", mp, "kind=\"cgroup\"", get(&m->idmap_lines[0]));
    sample(s, "ckptfs_identity_map_lines", mp, "kind=\"uid\"", get(&m->idmap_lines[1]));

    header(s, "ckptfs_views_served_total", "counter", "Lookups and reads served in the views.");
    sample(s, "ckptfs_views_served_total", mp, NULL, get(&m->views_served));
    header(s, "ckptfs_rescans_total", "counter", "Rescans of the backing directory.");
    sample(s, "ckptfs_rescans_total", mp, NULL, get(&m->rescans));
    header(s, "ckptfs_catalog_jobs", "gauge", "Jobs in the catalog.");
    sample(s, "ckptfs_catalog_jobs", mp, NULL, get(&m->catalog_jobs));
    header(s, "ckptfs_catalog_markers", "gauge", "Markers in the catalog.");
    sample(s, "ckptfs_catalog_markers", mp, NULL, get(&m->catalog_markers));
    header(s, "ckptfs_nodes", "gauge", "Nodes the kernel holds a reference on.");
    sample(s, "ckptfs_nodes", mp, NULL, mnt->nodes);
    header(s, "process_start_time_seconds", "gauge",
           "Start time of the daemon serving the mount, in seconds since the epoch (a restart "
           "under -o supervise or a takeover moves it; the counters go on).");
    sample_seconds(s, "process_start_time_seconds", mp, (double)mnt->started_us / 1e6);
    header(s, "ckptfs_transport_info", "gauge",
           "The transport requests come over: io_uring, or dev_fuse (read(2) of /dev/fuse).");
    sample(s, "ckptfs_transport_info", mp,
           mnt->ring ? "transport=\"io_uring\"" : "transport=\"dev_fuse\"", 1);
    header(s, "ckptfs_io_uring_requests_total", "counter",
           "Requests served over io_uring by the daemon serving now.");
    sample(s, "ckptfs_io_uring_requests_total", mp, NULL, mnt->ring_requests);
    header(s, "ckptfs_daemon_attaches_total", "counter",
           "Daemons that attached to the live connection (a restart or a takeover).");
    sample(s, "ckptfs_daemon_attaches_total", mp, NULL, mnt->attaches);
    header(s, "ckptfs_daemon_failed_starts_total", "counter",
           "Daemons that died before they served (the supervisor retries, then gives up).");
    sample(s, "ckptfs_daemon_failed_starts_total", mp, NULL, mnt->failed_starts);
    header(s, "ckptfs_supervisor_give_ups_total", "counter",
           "Times the supervisor gave up after failed starts in a row (requests failed with EIO "
           "until a takeover).");
    sample(s, "ckptfs_supervisor_give_ups_total", mp, NULL, mnt->give_ups);

    static const char *const pt_why[FS_PT_WHY_COUNT] = {
        [FS_PT_OFF] = "off",
        [FS_PT_UNPRIVILEGED] = "unprivileged",
        [FS_PT_KERNEL] = "kernel",
        [FS_PT_REGISTER] = "register_failed",
        [FS_PT_CACHED] = "open_without_passthrough",
    };
    header(s, "ckptfs_passthrough_opens_total", "counter",
           "Opens bound to their backing file in the kernel (FUSE passthrough).");
    sample(s, "ckptfs_passthrough_opens_total", mp, NULL, get(&m->pt_opens));
    header(s, "ckptfs_passthrough_backing_ids", "gauge",
           "Backing files registered with the kernel now.");
    sample(s, "ckptfs_passthrough_backing_ids", mp, NULL,
           (guint64)MAX(atomic_load_explicit(&m->pt_ids, memory_order_relaxed), 0));
    header(s, "ckptfs_passthrough_fallbacks_total", "counter",
           "Opens of backing files served by the daemon instead, by reason.");
    for (int w = 0; w < FS_PT_WHY_COUNT; w++) {
        g_snprintf(lb, sizeof lb, "reason=\"%s\"", pt_why[w]);
        sample(s, "ckptfs_passthrough_fallbacks_total", mp, lb, get(&m->pt_fallbacks[w]));
    }
    header(s, "ckptfs_catalog_markers_loaded", "gauge",
           "Markers of the catalog read and resolved (below ckptfs_catalog_markers while it "
           "loads).");
    sample(s, "ckptfs_catalog_markers_loaded", mp, NULL, get(&m->catalog_markers_loaded));
    header(s, "ckptfs_catalog_rescan_duration_seconds", "gauge",
           "Duration of the last periodic rescan pass.");
    sample_seconds(s, "ckptfs_catalog_rescan_duration_seconds", mp,
                   (double)get(&m->rescan_duration_us) / 1e6);
    header(s, "ckptfs_catalog_sweep_duration_seconds", "gauge",
           "Time spent on the last sweep that checked every job.");
    sample_seconds(s, "ckptfs_catalog_sweep_duration_seconds", mp,
                   (double)get(&m->sweep_duration_us) / 1e6);
    header(s, "ckptfs_inotify_overflows_total", "counter",
           "Inotify queue overflows (each followed by a full rescan).");
    sample(s, "ckptfs_inotify_overflows_total", mp, NULL, get(&m->inotify_overflows));
    return s;
}
