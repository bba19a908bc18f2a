/* The session: what the daemon asks the kernel for at INIT, and the table
 * of request handlers (names.c, files.c, dirs.c, xattrs.c). */
#include "ops.h"

#include "kernel/kio.h"
#include "log.h"
#include "ops-private.h"
#include "nodes/passthrough.h"
#include "outlive/status.h"

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct ckptfs *fs = userdata;
    log_start(&(LogStart){
        .backing = fs->backing,
        .mount = fs->mountpoint,
        .passthrough_why = kio_why_not(&fs->kio),
        .supervised = fs->supervised,
        .job = fs->opt.job_interned,
        .identity = fs->opt.identity,
        .identity_map = fs->opt.identity_map,
        .anonymous_deny = fs->opt.anonymous_deny,
        .attaches = atomic_load(&fs->state.hdr->attaches),
    });
    pt_log_state(&fs->pt);
    status_publish(&fs->state, &fs->opt, kio_why_not(&fs->kio), fs->started_us);
    suplink_ready(fs->link, fs->mountpoint, fs->ready_note); /* the supervisor tells systemd */
    if (fs->supervised && !kio_can_resend(&fs->kio))
        g_warning("ckptfs: the kernel cannot resend requests (FUSE_NOTIFY_RESEND, Linux 6.9): "
                  "if the daemon dies, the requests it was serving wait until the mount is "
                  "aborted; the others go on with the next daemon");
    /* Requests are read with read(2), never spliced: fs/kio.c must see each
     * one whole (FUSE_TMPFILE), and with passthrough the daemon sees no file
     * data.  Replies to reads of backing files are spliced when the daemon
     * is on the data path (no passthrough). */
    conn->want &= ~(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE | FUSE_CAP_SPLICE_READ);
    /* a ring entry takes a reply as bytes: no splice with the ring */
    if (!kio_passthrough(&fs->kio) && !kio_ring_wanted(&fs->kio) &&
        (conn->capable & FUSE_CAP_SPLICE_WRITE))
        conn->want |= FUSE_CAP_SPLICE_WRITE;
    /* open(O_TRUNC) in one request, checked as a truncation by the policy */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
        conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
    /* Locks stay in the kernel (no getlk/setlk/flock handlers). */
    conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
    if (fs->opt.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    else
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    /* libfuse's request buffer is 1 MiB + a page: the largest write it can
     * take whole (only without passthrough do writes come here) */
    conn->max_write = 1024 * 1024;
    conn->max_read = fs->opt.max_read; /* must equal the max_read mount option */
    /* the kernel keeps min(its bdi read-ahead, this): main raises the bdi's */
    conn->max_readahead = 16u * 1024 * 1024;
    /* Creates come unmasked with the caller's umask, which the daemon
     * applies the way the backing file system would (a directory's default
     * ACL wins over it); without, they pass the mode the kernel masked. */
    if (conn->capable & FUSE_CAP_DONT_MASK)
        conn->want |= FUSE_CAP_DONT_MASK;
    fs->dont_mask = conn->want & FUSE_CAP_DONT_MASK;
    /* POSIX ACLs: where the kernel checks permissions (default_permissions)
     * it caches and enforces them too.  Not asked for otherwise: the kernel
     * would then check every permission itself, and refresh a directory's
     * attributes (a GETATTR) before each create or unlink in it; without
     * default_permissions the daemon acts as the caller and the backing
     * file system enforces the ACLs. */
    if (fs->opt.default_permissions && (conn->capable & FUSE_CAP_POSIX_ACL))
        conn->want |= FUSE_CAP_POSIX_ACL;
    fs->kernel_acls = conn->want & FUSE_CAP_POSIX_ACL;
    /* File handles (name_to_handle_at, NFS): the kernel may ask for a node
     * by an id it has forgotten (nodes/export.c) */
    if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
        conn->want |= FUSE_CAP_EXPORT_SUPPORT;
    conn->time_gran = 1;
    /* No OPENDIR/RELEASEDIR when the kernel may cache (dirs.c): a walk then
     * costs a READDIR per directory it has not listed yet, and nothing for
     * those it has.  (OPENDIR checked no permission: the kernel does, or
     * only the mounting user gets in.) */
    fs->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) && fs->entry_timeout > 0 &&
                     fs->attr_timeout > 0;
}

const HandleType *const ckptfs_handle_types[HANDLE_KINDS] = {
    [HANDLE_FILE] = &file_handle_type,
    [HANDLE_DIR] = &dir_handle_type,
};

const struct fuse_lowlevel_ops ckptfs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .read = op_read,
    .write_buf = op_write_buf,
    .flush = op_flush,
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
    .access = op_access,
    .create = op_create,
    .fallocate = op_fallocate,
    .lseek = op_lseek,
    .copy_file_range = op_copy_file_range,
};
