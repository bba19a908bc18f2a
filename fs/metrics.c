#include "metrics.h"

#include <errno.h>
#include <string.h>

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

const char *fs_op_name(FsOp op)
{
    return op < FS_OP_COUNT ? fs_op_names[op] : "unknown";
}

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

GString *fs_metrics_render(FsMetrics *m, guint64 nodes)
{
    GString *s = g_string_sized_new(4096);

    g_string_append(s, "# HELP ckptfs_ops_total Requests served, by operation.\n"
                       "# TYPE ckptfs_ops_total counter\n");
    for (int op = 0; op < FS_OP_COUNT; op++)
        g_string_append_printf(s, "ckptfs_ops_total{op=\"%s\"} %" G_GUINT64_FORMAT "\n",
                               fs_op_names[op], get(&m->ops[op]));

    g_string_append(s, "# HELP ckptfs_errors_total Requests answered with an error, by errno.\n"
                       "# TYPE ckptfs_errors_total counter\n");
    for (int e = 0; e <= FS_ERRNO_MAX; e++) {
        guint64 v = get(&m->errors[e]);
        if (!v)
            continue;
        char buf[16];
        g_string_append_printf(s, "ckptfs_errors_total{errno=\"%s\"} %" G_GUINT64_FORMAT "\n",
                               e ? errno_label(e, buf, sizeof buf) : "other", v);
    }

    g_string_append(s, "# HELP ckptfs_refusals_total Writes that crossed a job namespace, by "
                       "kind and verdict.\n"
                       "# TYPE ckptfs_refusals_total counter\n");
    for (int k = 1; k < CK_VERDICT_COUNT; k++) {
        for (int v = 0; v < 2; v++)
            g_string_append_printf(
                s, "ckptfs_refusals_total{kind=\"%s\",verdict=\"%s\"} %" G_GUINT64_FORMAT "\n",
                ck_verdict_kind((CkVerdict)k), v ? "allowed" : "denied", get(&m->refusals[k][v]));
    }

    g_string_append_printf(s,
                           "# HELP ckptfs_views_served_total Lookups and reads served in the "
                           "views.\n"
                           "# TYPE ckptfs_views_served_total counter\n"
                           "ckptfs_views_served_total %" G_GUINT64_FORMAT "\n"
                           "# HELP ckptfs_rescans_total Rescans of the backing directory.\n"
                           "# TYPE ckptfs_rescans_total counter\n"
                           "ckptfs_rescans_total %" G_GUINT64_FORMAT "\n"
                           "# HELP ckptfs_catalog_jobs Jobs in the catalog.\n"
                           "# TYPE ckptfs_catalog_jobs gauge\n"
                           "ckptfs_catalog_jobs %" G_GUINT64_FORMAT "\n"
                           "# HELP ckptfs_catalog_markers Markers in the catalog.\n"
                           "# TYPE ckptfs_catalog_markers gauge\n"
                           "ckptfs_catalog_markers %" G_GUINT64_FORMAT "\n"
                           "# HELP ckptfs_nodes Nodes the kernel holds a reference on.\n"
                           "# TYPE ckptfs_nodes gauge\n"
                           "ckptfs_nodes %" G_GUINT64_FORMAT "\n",
                           get(&m->views_served), get(&m->rescans), get(&m->catalog_jobs),
                           get(&m->catalog_markers), nodes);

    static const char *const pt_why[FS_PT_WHY_COUNT] = {
        [FS_PT_OFF] = "off",
        [FS_PT_UNPRIVILEGED] = "unprivileged",
        [FS_PT_KERNEL] = "kernel",
        [FS_PT_REGISTER] = "register_failed",
        [FS_PT_CACHED] = "open_without_passthrough",
    };
    g_string_append_printf(s,
                           "# HELP ckptfs_passthrough_opens_total Opens bound to their backing "
                           "file in the kernel (FUSE passthrough).\n"
                           "# TYPE ckptfs_passthrough_opens_total counter\n"
                           "ckptfs_passthrough_opens_total %" G_GUINT64_FORMAT "\n"
                           "# HELP ckptfs_passthrough_backing_ids Backing files registered with "
                           "the kernel now.\n"
                           "# TYPE ckptfs_passthrough_backing_ids gauge\n"
                           "ckptfs_passthrough_backing_ids %" G_GINT64_FORMAT "\n"
                           "# HELP ckptfs_passthrough_fallbacks_total Opens of backing files "
                           "served by the daemon instead, by reason.\n"
                           "# TYPE ckptfs_passthrough_fallbacks_total counter\n",
                           get(&m->pt_opens),
                           (gint64)atomic_load_explicit(&m->pt_ids, memory_order_relaxed));
    for (int w = 0; w < FS_PT_WHY_COUNT; w++)
        g_string_append_printf(s,
                               "ckptfs_passthrough_fallbacks_total{reason=\"%s\"} "
                               "%" G_GUINT64_FORMAT "\n",
                               pt_why[w], get(&m->pt_fallbacks[w]));
    g_string_append_printf(
        s,
        "# HELP ckptfs_catalog_markers_loaded Markers of the catalog read and resolved (below "
        "ckptfs_catalog_markers while it loads).\n"
        "# TYPE ckptfs_catalog_markers_loaded gauge\n"
        "ckptfs_catalog_markers_loaded %" G_GUINT64_FORMAT "\n"
        "# HELP ckptfs_catalog_rescan_duration_seconds Duration of the last periodic rescan pass.\n"
        "# TYPE ckptfs_catalog_rescan_duration_seconds gauge\n"
        "ckptfs_catalog_rescan_duration_seconds %.6f\n"
        "# HELP ckptfs_catalog_sweep_duration_seconds Time spent on the last sweep that checked "
        "every job.\n"
        "# TYPE ckptfs_catalog_sweep_duration_seconds gauge\n"
        "ckptfs_catalog_sweep_duration_seconds %.6f\n"
        "# HELP ckptfs_inotify_overflows_total Inotify queue overflows (each followed by a full "
        "rescan).\n"
        "# TYPE ckptfs_inotify_overflows_total counter\n"
        "ckptfs_inotify_overflows_total %" G_GUINT64_FORMAT "\n",
        get(&m->catalog_markers_loaded), (double)get(&m->rescan_duration_us) / 1e6,
        (double)get(&m->sweep_duration_us) / 1e6, get(&m->inotify_overflows));
    return s;
}
