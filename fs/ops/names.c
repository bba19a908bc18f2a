/* Names and attributes: lookup and forget, getattr and setattr, readlink,
 * the creates (mknod, mkdir, symlink, link), unlink, rmdir and rename,
 * statfs and access.  Policy questions go to enforce.c, views requests to
 * views.c. */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "enforce.h"
#include "kernel/kio.h"
#include "ops.h"
#include "ops-private.h"
#include "views/views.h"

/* How long the kernel may keep the attributes of a backing object of this
 * mode.  Without OPENDIR (dirs.c) the kernel keeps a directory's listing
 * while its mtime stays, and asks for the mtime only once the attributes
 * expired: a directory's are kept at most DIR_ATTR_TIMEOUT, so a listing
 * changed behind the mount shows within it (as a name that appeared does:
 * negative entries are kept as long). */
#define DIR_ATTR_TIMEOUT 1.0
static double attr_timeout_of(struct ckptfs *fs, Node *n, mode_t mode)
{
    if (node_attrs_volatile(n))
        return 0;
    return fs->no_opendir && S_ISDIR(mode) ? MIN(fs->attr_timeout, DIR_ATTR_TIMEOUT)
                                           : fs->attr_timeout;
}

void fill_entry(struct ckptfs *fs, Node *n, const struct stat *st, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->ino = node_ino(&fs->nodes, n);
    e->generation = n->generation;
    e->attr = *st;
    e->attr_timeout = attr_timeout_of(fs, n, st->st_mode);
    e->entry_timeout = fs->entry_timeout;
}

int do_lookup(struct ckptfs *fs, Node *p, const char *name, struct fuse_entry_param *e)
{
    if (p->kind != NODE_BACKING || (p == fs->nodes.root && strcmp(name, fs->opt.views_name) == 0))
        return views_lookup(fs, p, name, e);
    if (is_dot_or_dotdot(name))
        return -EINVAL; /* never resolve ".." out of the backing directory */
    NodeFd pf;
    int err = node_fd(&fs->nodes, p, &pf);
    if (err)
        return err;
    struct stat st;
    Node *n;
    err = node_lookup_backing(&fs->nodes, p, pf.fd, name, NULL, &st, &n);
    node_fd_put(&fs->nodes, &pf);
    if (err)
        return err;
    fill_entry(fs, n, &st, e);
    return 0;
}

/* Replies with an entry; a reply the kernel did not take gives its reference back. */
void reply_entry(struct ckptfs *fs, fuse_req_t req, int err, struct fuse_entry_param *e)
{
    if (err == -ENOENT && fs->entry_timeout > 0) {
        /* a name created behind the mount's back shows within a second */
        struct fuse_entry_param neg = {0};
        neg.entry_timeout = MIN(fs->entry_timeout, 1.0);
        fs_metric_err(fs->metrics, ENOENT);
        fuse_reply_entry(req, &neg);
        return;
    }
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    if (fuse_reply_entry(req, e) != 0 && e->ino) /* ino 0: a views negative entry */
        node_forget(&fs->nodes, node_by_ino(fs, e->ino), 1);
}

/* "." and ".." come only from the kernel decoding a file handle: "." of a
 * node id it may have forgotten, ".." of a directory it decoded. */
static int lookup_by_handle(struct ckptfs *fs, fuse_ino_t ino, const char *name,
                            struct fuse_entry_param *e)
{
    struct stat st;
    Node *n;
    int err = strcmp(name, ".") == 0
                  ? node_lookup_id(&fs->nodes, ino, &st, &n)
                  : node_lookup_parent(&fs->nodes, node_by_ino(fs, ino), &st, &n);
    if (err)
        return err;
    fill_entry(fs, n, &st, e);
    return 0;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_LOOKUP);
    struct fuse_entry_param e;
    int err = is_dot_or_dotdot(name) ? lookup_by_handle(fs, parent, name, &e)
                                     : do_lookup(fs, node_by_ino(fs, parent), name, &e);
    reply_entry(fs, req, err, &e);
}

/* The end of a forget, which gets no reply: its journal record ends here,
 * applied (a forget is never resent). */
static void reply_forgotten(fuse_req_t req)
{
    inflight_end();
    fuse_reply_none(req);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_FORGET);
    node_forget_id(&fs->nodes, ino, nlookup);
    reply_forgotten(req);
}

static void do_forget_multi(struct ckptfs *fs, size_t count, struct fuse_forget_data *forgets)
{
    for (size_t i = 0; i < count; i++)
        node_forget_id(&fs->nodes, forgets[i].ino, forgets[i].nlookup);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_FORGET);
    do_forget_multi(fs, count, forgets);
    reply_forgotten(req);
}

/* --- attributes ------------------------------------------------------------ */

/* stat of a node without an open file: an object that is gone (no names
 * left, nothing open through the mount) is ESTALE, so the kernel looks the
 * name up again instead of reporting a deleted file.  Directories are open
 * without the daemon knowing when the kernel opens them alone (dirs.c): a
 * removed one is reported as ext4 does for an open one, st_nlink 0. */
static int node_stat(struct ckptfs *fs, Node *n, struct stat *st)
{
    int err = node_fstat(&fs->nodes, n, st);
    if (!err && st->st_nlink == 0 && n != fs->nodes.root &&
        !(fs->no_opendir && S_ISDIR(st->st_mode)) && node_nopen(&fs->nodes, n) == 0)
        err = node_mark_stale(&fs->nodes, n, -ESTALE);
    return err;
}

/* Attributes of n; *timeout: how long the kernel may keep them. */
static int do_getattr(struct ckptfs *fs, Node *n, struct fuse_file_info *fi, struct stat *st,
                      double *timeout)
{
    *timeout = fs->attr_timeout;
    if (n->kind != NODE_BACKING)
        return views_getattr(fs, n, st, timeout);
    *timeout = attr_timeout_of(fs, n, n->type);
    if (fi && n->type == S_IFREG && file_of(fs, fi)->fd >= 0)
        return fstat(file_of(fs, fi)->fd, st) < 0 ? -errno : 0;
    return node_stat(fs, n, st);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_GETATTR);
    struct stat st;
    double timeout;
    int err = do_getattr(fs, node_by_ino(fs, ino), fi, &st, &timeout);
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_attr(req, &st, timeout);
}

#define TIMES_ONLY                                                                                 \
    (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |                         \
     FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)

static int do_setattr(struct ckptfs *fs, fuse_req_t req, Node *n, struct stat *attr, int to_set,
                      struct fuse_file_info *fi, struct stat *out)
{
    /* With the writeback cache the kernel writes cached times back on its
     * own, from a worker with no pid in a daemon's pid namespace of its
     * own: the writes behind them were checked at their open, and a
     * refusal here would fail the job's sync. */
    bool kernel_times = fs->opt.writeback && fuse_req_ctx(req)->pid == 0 && !(to_set & ~TIMES_ONLY);
    int err = kernel_times ? 0 : fs_check_write(fs, req, "setattr", n);
    if (err)
        return err;
    NodeFd f = {-1, NULL};
    int ffd = fi && n->type == S_IFREG && file_of(fs, fi)->fd >= 0 ? file_of(fs, fi)->fd : -1;
    if (ffd < 0) {
        err = node_fd(&fs->nodes, n, &f);
        if (err == -ESTALE && !(to_set & ~TIMES_ONLY)) {
            /* the writeback cache flushing the times of a file unlinked
             * since: nothing is left to set, and an error here would stick
             * to the whole file system (syncfs) */
            memset(out, 0, sizeof *out);
            out->st_mode = n->type;
            return 0;
        }
        if (err)
            return err;
    }
    int fd = ffd >= 0 ? ffd : f.fd;
    char proc[64];
    proc_path(proc, sizeof proc, fd);
    Creds c;
    creds_enter(fs, req, false, &c);
    if (to_set & FUSE_SET_ATTR_MODE) {
        int r = ffd >= 0 ? fchmod(ffd, attr->st_mode) : fchmodat(AT_FDCWD, proc, attr->st_mode, 0);
        if (r < 0) {
            err = -errno;
            goto out;
        }
    }
    if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
        uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
        gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
        if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
            err = -errno;
            goto out;
        }
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        int r = ffd >= 0 ? ftruncate(ffd, attr->st_size) : truncate(proc, attr->st_size);
        if (r < 0) {
            err = -errno;
            goto out;
        }
    }
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
        struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
        if (to_set & FUSE_SET_ATTR_ATIME_NOW)
            ts[0].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_ATIME)
            ts[0] = attr->st_atim;
        if (to_set & FUSE_SET_ATTR_MTIME_NOW)
            ts[1].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_MTIME)
            ts[1] = attr->st_mtim;
        int r = ffd >= 0 ? futimens(ffd, ts)
                         : utimensat(fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
        if (r < 0) {
            err = -errno;
            goto out;
        }
    }
out:
    creds_leave(fs, &c);
    /* as the daemon: the caller may not chmod what it may truncate */
    if (!err && (to_set & FUSE_SET_ATTR_SIZE))
        creds_drop_sgid(req, fd);
    if (!err && fstatat(fd, "", out, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = -errno;
    node_fd_put(&fs->nodes, &f);
    return err;
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_SETATTR);
    struct stat st;
    Node *n = node_by_ino(fs, ino);
    int err = do_setattr(fs, req, n, attr, to_set, fi, &st);
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_attr(req, &st, attr_timeout_of(fs, n, st.st_mode));
}

/* The target of a symlink (g_free). */
static int do_readlink(struct ckptfs *fs, Node *n, char **target)
{
    if (n->kind == NODE_VIRTUAL)
        return views_readlink(fs, n, target);
    NodeFd f;
    int err = node_fd(&fs->nodes, n, &f);
    if (err)
        return err;
    char buf[PATH_MAX + 1];
    ssize_t len = readlinkat(f.fd, "", buf, sizeof buf);
    err = len < 0 ? -errno : 0;
    node_fd_put(&fs->nodes, &f);
    if (err)
        return err;
    if ((size_t)len >= sizeof buf)
        return -ENAMETOOLONG;
    *target = g_strndup(buf, (gsize)len);
    return 0;
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_READLINK);
    g_autofree char *target = NULL;
    int err = do_readlink(fs, node_by_ino(fs, ino), &target);
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_readlink(req, target);
}

/* --- creating -------------------------------------------------------------- */

/* A request the kernel resent after its daemon died (kio_resent) may have
 * been done by that daemon before it could answer.  Where doing it again
 * fails only because it was done (the name is there, or gone), the answer
 * is the one the first try gave (ckptfs(8) WHEN THE DAEMON DIES). */
static bool done_before(int err, int done_err)
{
    return err == done_err && kio_resent();
}

static int do_make(struct ckptfs *fs, fuse_req_t req, Node *p, const char *name, mode_t mode,
                   dev_t rdev, const char *target, struct fuse_entry_param *e)
{
    CkNs child;
    int err;
    if (target)
        err = fs_check_symlink(fs, req, p, name, target, &child);
    else
        err = fs_check_create(fs, req, S_ISDIR(mode) ? "mkdir" : "mknod", p, name, S_ISDIR(mode),
                              &child);
    if (err)
        return err;
    NodeFd pf;
    err = node_fd(&fs->nodes, p, &pf);
    if (err)
        return err;
    Creds c;
    creds_enter(fs, req, true, &c);
    int r;
    if (target)
        r = symlinkat(target, pf.fd, name);
    else if (S_ISDIR(mode))
        r = mkdirat(pf.fd, name, creds_mode(fs, req, mode));
    else
        r = mknodat(pf.fd, name, (mode & S_IFMT) | creds_mode(fs, req, mode), rdev);
    err = r < 0 ? -errno : 0;
    creds_leave(fs, &c);
    bool again = done_before(err, -EEXIST);
    if (!err)
        views_note_change(fs, node_ns(&fs->nodes, p), child);
    if (!err || again) {
        struct stat st;
        Node *n;
        err = node_lookup_backing(&fs->nodes, p, pf.fd, name, &child, &st, &n);
        if (!err && again && (st.st_mode & S_IFMT) != (mode & S_IFMT)) {
            node_forget(&fs->nodes, n, 1); /* something else has the name */
            err = -EEXIST;
        } else if (!err) {
            fill_entry(fs, n, &st, e);
        }
    }
    node_fd_put(&fs->nodes, &pf);
    return err;
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_MKNOD);
    struct fuse_entry_param e;
    int err = do_make(fs, req, node_by_ino(fs, parent), name, mode, rdev, NULL, &e);
    if (err)
        reply_err(fs, req, err);
    else
        reply_entry(fs, req, 0, &e);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_MKDIR);
    struct fuse_entry_param e;
    int err = do_make(fs, req, node_by_ino(fs, parent), name, S_IFDIR | mode, 0, NULL, &e);
    if (err)
        reply_err(fs, req, err);
    else
        reply_entry(fs, req, 0, &e);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_SYMLINK);
    struct fuse_entry_param e;
    int err = do_make(fs, req, node_by_ino(fs, parent), name, S_IFLNK, 0, link, &e);
    if (err)
        reply_err(fs, req, err);
    else
        reply_entry(fs, req, 0, &e);
}

/* A hard link of n at newparent/newname, by the daemon (root: linkat of
 * the descriptor itself; else through /proc/self/fd). */
static int do_link(struct ckptfs *fs, fuse_req_t req, Node *n, Node *np, const char *newname,
                   struct fuse_entry_param *e)
{
    CkNs ns;
    int err = fs_check_link(fs, req, n, np, newname, &ns);
    if (err)
        return err;
    NodeFd f, pf;
    if ((err = node_fd(&fs->nodes, n, &f)))
        return err;
    if ((err = node_fd(&fs->nodes, np, &pf))) {
        node_fd_put(&fs->nodes, &f);
        return err;
    }
    int r;
    if (fs->is_root) {
        r = linkat(f.fd, "", pf.fd, newname, AT_EMPTY_PATH);
    } else {
        char proc[64];
        proc_path(proc, sizeof proc, f.fd);
        r = linkat(AT_FDCWD, proc, pf.fd, newname, AT_SYMLINK_FOLLOW);
    }
    struct stat st, there;
    if (r < 0)
        err = -errno;
    if (done_before(err, -EEXIST) && fstatat(pf.fd, newname, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
        fstatat(f.fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
        there.st_ino == st.st_ino && there.st_dev == st.st_dev)
        err = 0; /* the link the first try made */
    if (!err && fstatat(f.fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = -errno;
    node_fd_put(&fs->nodes, &pf);
    node_fd_put(&fs->nodes, &f);
    if (err)
        return err;
    node_ref(&fs->nodes, n, 1);
    node_set_nameless_open(&fs->nodes, n, false); /* it has a name now */
    fill_entry(fs, n, &st, e);
    return 0;
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_LINK);
    struct fuse_entry_param e;
    int err = do_link(fs, req, node_by_ino(fs, ino), node_by_ino(fs, newparent), newname, &e);
    if (err)
        reply_err(fs, req, err);
    else
        reply_entry(fs, req, 0, &e);
}

/* --- removing and renaming --------------------------------------------------- */

static int do_remove(struct ckptfs *fs, fuse_req_t req, Node *p, const char *name, bool dir)
{
    CkNs entry;
    int err = fs_check_remove(fs, req, dir ? "rmdir" : "unlink", p, name, &entry);
    if (err)
        return err;
    NodeFd pf;
    if ((err = node_fd(&fs->nodes, p, &pf)))
        return err;
    NodeVictim victim;
    bool last_name = node_unlink_victim(&fs->nodes, pf.fd, name, fs->no_opendir, &victim);
    Creds c;
    creds_enter(fs, req, false, &c);
    if (unlinkat(pf.fd, name, dir ? AT_REMOVEDIR : 0) < 0)
        err = -errno;
    creds_leave(fs, &c);
    if (last_name)
        node_note_unlinked(&fs->nodes, &victim, !err);
    if (done_before(err, -ENOENT))
        err = 0; /* removed by the first try */
    node_fd_put(&fs->nodes, &pf);
    if (!err)
        views_note_change(fs, node_ns(&fs->nodes, p), entry);
    return err;
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_UNLINK);
    reply_err(fs, req, do_remove(fs, req, node_by_ino(fs, parent), name, false));
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_RMDIR);
    reply_err(fs, req, do_remove(fs, req, node_by_ino(fs, parent), name, true));
}

/* The node now at dirfd/name takes namespace ns (rename moved it). */
static void renamed_ns(struct ckptfs *fs, int dirfd, const char *name, CkNs ns)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    Node *n = node_find_backing(&fs->nodes, st.st_dev, st.st_ino);
    if (n && !ck_ns_identical(node_ns(&fs->nodes, n), ns))
        node_set_ns(&fs->nodes, n, ns);
}

static int do_rename(struct ckptfs *fs, fuse_req_t req, Node *p, const char *name, Node *np,
                     const char *newname, unsigned int flags)
{
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
        return -EINVAL;
    CkNs src, dst, back;
    int err = fs_check_rename(fs, req, p, name, np, newname, flags, &src, &dst, &back);
    if (err)
        return err;
    NodeFd pf, npf;
    if ((err = node_fd(&fs->nodes, p, &pf)))
        return err;
    if ((err = node_fd(&fs->nodes, np, &npf))) {
        node_fd_put(&fs->nodes, &pf);
        return err;
    }
    NodeVictim victim;
    bool last_name = !(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)) &&
                     node_unlink_victim(&fs->nodes, npf.fd, newname, fs->no_opendir, &victim);
    Creds c;
    /* a whiteout is a create (a device node at the old name): made as the
     * caller, who needs CAP_MKNOD as on any file system */
    creds_enter(fs, req, flags & RENAME_WHITEOUT, &c);
    int r = flags ? renameat2(pf.fd, name, npf.fd, newname, flags)
                  : renameat(pf.fd, name, npf.fd, newname);
    if (r < 0)
        err = -errno;
    creds_leave(fs, &c);
    struct stat st;
    if (done_before(err, -ENOENT) && !(flags & RENAME_EXCHANGE) &&
        fstatat(npf.fd, newname, &st, AT_SYMLINK_NOFOLLOW) == 0)
        err = 0; /* moved by the first try: the source is gone, the target there */
    /* by this try's rename only: a resent one that finds its work done
     * stat'ed the moved file itself as the victim */
    if (last_name)
        node_note_unlinked(&fs->nodes, &victim, r == 0);
    if (!err) {
        if (!ck_ns_identical(src, dst))
            renamed_ns(fs, npf.fd, newname, dst);
        if (flags & RENAME_EXCHANGE) /* renamed_ns changes only what differs */
            renamed_ns(fs, pf.fd, name, back);
        views_note_change(fs, node_ns(&fs->nodes, p), src);
        views_note_change(fs, node_ns(&fs->nodes, np), dst);
    }
    node_fd_put(&fs->nodes, &npf);
    node_fd_put(&fs->nodes, &pf);
    return err;
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_RENAME);
    reply_err(fs, req,
              do_rename(fs, req, node_by_ino(fs, parent), name, node_by_ino(fs, newparent), newname,
                        flags));
}

/* --- the file system and access ------------------------------------------- */

static int do_statfs(struct ckptfs *fs, Node *n, struct statvfs *sv)
{
    if (n->kind != NODE_BACKING)
        n = fs->nodes.root;
    NodeFd f;
    int err = node_fd(&fs->nodes, n, &f);
    if (err)
        return err;
    err = fstatvfs(f.fd, sv) < 0 ? -errno : 0;
    node_fd_put(&fs->nodes, &f);
    return err;
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_STATFS);
    struct statvfs sv;
    int err = do_statfs(fs, node_by_ino(fs, ino), &sv);
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_statfs(req, &sv);
}

/* access(2) as the caller; views answer EROFS to W_OK (views.c). */
static int do_access(struct ckptfs *fs, fuse_req_t req, Node *n, int mask)
{
    if (n->kind != NODE_BACKING)
        return views_access(fs, req, n, mask);
    NodeFd f;
    int err = node_fd(&fs->nodes, n, &f);
    if (err)
        return err;
    char proc[64];
    proc_path(proc, sizeof proc, f.fd);
    Creds c;
    creds_enter(fs, req, true, &c);
    err = faccessat(AT_FDCWD, proc, mask, AT_EACCESS) < 0 ? -errno : 0;
    creds_leave(fs, &c);
    node_fd_put(&fs->nodes, &f);
    return err;
}

void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_ACCESS);
    reply_err(fs, req, do_access(fs, req, node_by_ino(fs, ino), mask));
}
