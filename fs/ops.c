#include "ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "enforce.h"
#include "kio.h"
#include "passthrough.h"
#include "views.h"

/* What fi->fh of an open file points at. */
typedef struct {
    int fd;          /* backing descriptor, -1 for a views snapshot */
    GBytes *content; /* views snapshot */
    Node *node;
    bool writable;          /* opened for writing: its attributes are noted at release */
    int write_err;          /* the policy's answer for data writes, taken once at open (0: go on) */
    bool bound;             /* pt_bind was asked (pt_unbind at release) */
    int backing_id;         /* > 0: the kernel does this file's I/O (FUSE passthrough) */
    const char *marker_job; /* a COMPLETED of this job written: refresh the views at release */
} FileHandle;

/* What fi->fh of an open directory points at. */
typedef struct {
    GMutex lock; /* serialises readdir on one handle */
    Node *node;
    DIR *dp; /* backing directory stream (not for the root) */
    off_t offset;
    GArray *root; /* RootEntry: the root's entries, snapshot at opendir */
    void *views;  /* views_opendir handle */
} DirHandle;

typedef struct {
    char *name;
    ino_t ino;
    unsigned char type;
} RootEntry;

static inline struct ckptfs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static inline Node *N(struct ckptfs *fs, fuse_ino_t ino)
{
    return node_of(&fs->nodes, ino);
}

static inline FileHandle *FH(struct fuse_file_info *fi)
{
    return (FileHandle *)(uintptr_t)fi->fh;
}

static inline DirHandle *DH(struct fuse_file_info *fi)
{
    return (DirHandle *)(uintptr_t)fi->fh;
}

static void reply_err(struct ckptfs *fs, fuse_req_t req, int err)
{
    /* err: 0 or -errno */
    fs_metric_err(&fs->metrics, -err);
    fuse_reply_err(req, -err);
}

static bool is_dot_or_dotdot(const char *name)
{
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

static void proc_path(char *buf, size_t len, int fd)
{
    g_snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* --- open handles -------------------------------------------------------------- */

typedef enum { HANDLE_FILE = 1, HANDLE_DIR } HandleKind;

static void handle_register(struct ckptfs *fs, void *h, HandleKind kind)
{
    g_mutex_lock(&fs->open_lock);
    g_hash_table_insert(fs->open_handles, h, GINT_TO_POINTER(kind));
    g_mutex_unlock(&fs->open_lock);
}

static void handle_unregister(struct ckptfs *fs, void *h)
{
    g_mutex_lock(&fs->open_lock);
    g_hash_table_remove(fs->open_handles, h);
    g_mutex_unlock(&fs->open_lock);
}

void ckptfs_handles_init(struct ckptfs *fs)
{
    g_mutex_init(&fs->open_lock);
    fs->open_handles = g_hash_table_new(g_direct_hash, g_direct_equal);
}

static void handle_free(struct ckptfs *fs, FileHandle *h);
static void dirhandle_free(struct ckptfs *fs, DirHandle *d);

void ckptfs_handles_cleanup(struct ckptfs *fs)
{
    if (!fs->open_handles)
        return;
    GHashTableIter it;
    gpointer h, kind;
    g_hash_table_iter_init(&it, fs->open_handles);
    while (g_hash_table_iter_next(&it, &h, &kind)) {
        g_hash_table_iter_steal(&it);
        if (GPOINTER_TO_INT(kind) == HANDLE_FILE)
            handle_free(fs, h);
        else
            dirhandle_free(fs, h);
    }
    g_hash_table_destroy(fs->open_handles);
    fs->open_handles = NULL;
    g_mutex_clear(&fs->open_lock);
}

/* --- acting as the caller ------------------------------------------------- */

typedef struct {
    bool switched;
} Creds;

int ckptfs_creds_init(struct ckptfs *fs)
{
    fs->euid = geteuid();
    fs->egid = getegid();
    fs->is_root = fs->euid == 0;
    int n = getgroups(0, NULL);
    if (n < 0)
        return -errno;
    fs->groups = g_new0(gid_t, n + 1);
    fs->ngroups = getgroups(n, fs->groups);
    if (fs->ngroups < 0)
        fs->ngroups = 0;
    return 0;
}

/* Switches this worker thread's fsuid, fsgid and supplementary groups to the
 * caller's, when the caller is not the daemon's own user and either the
 * request creates something (ownership) or the kernel does not check
 * permissions itself.  setfsuid/setfsgid and the raw setgroups system call
 * act on the calling thread only (glibc's setgroups would change all). */
static void creds_enter(struct ckptfs *fs, fuse_req_t req, bool creating, Creds *c)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    c->switched = false;
    if (!fs->is_root || (ctx->uid == fs->euid && ctx->gid == fs->egid))
        return;
    if (!creating && fs->opt.default_permissions)
        return;
    gid_t small[64];
    gid_t *list = small;
    int n = fuse_req_getgroups(req, G_N_ELEMENTS(small), small);
    g_autofree gid_t *big = NULL;
    if (n > (int)G_N_ELEMENTS(small)) {
        big = g_new(gid_t, n);
        n = fuse_req_getgroups(req, n, big);
        list = big;
    }
    if (n < 0)
        n = 0;
    syscall(SYS_setgroups, (size_t)n, list);
    setfsgid(ctx->gid);
    setfsuid(ctx->uid);
    c->switched = true;
}

static void creds_leave(struct ckptfs *fs, Creds *c)
{
    if (!c->switched)
        return;
    setfsuid(fs->euid);
    setfsgid(fs->egid);
    syscall(SYS_setgroups, (size_t)fs->ngroups, fs->groups);
    c->switched = false;
}

/* --- lookup ----------------------------------------------------------------- */

static void fill_entry(struct ckptfs *fs, Node *n, const struct stat *st,
                       struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->ino = node_ino(&fs->nodes, n);
    e->generation = n->generation;
    e->attr = *st;
    e->attr_timeout = fs->attr_timeout;
    e->entry_timeout = fs->entry_timeout;
}

static int do_lookup(struct ckptfs *fs, Node *p, const char *name, struct fuse_entry_param *e)
{
    if (p->kind != NODE_BACKING || (p == fs->nodes.root && strcmp(name, fs->opt.views_name) == 0))
        return views_lookup(fs, p, name, e);
    if (is_dot_or_dotdot(name))
        return -EINVAL; /* never resolve ".." out of the backing directory */
    NodeFd pf;
    int err = node_fd(fs, p, &pf);
    if (err)
        return err;
    struct stat st;
    Node *n;
    err = node_lookup_backing(fs, p, pf.fd, name, &st, &n);
    node_fd_put(fs, &pf);
    if (err)
        return err;
    fill_entry(fs, n, &st, e);
    return 0;
}

/* Replies with an entry; a reply the kernel did not take gives its reference back. */
static void reply_entry(struct ckptfs *fs, fuse_req_t req, int err, struct fuse_entry_param *e)
{
    if (err == -ENOENT && fs->entry_timeout > 0) {
        /* a name created behind the mount's back shows within a second */
        struct fuse_entry_param neg = {0};
        neg.entry_timeout = MIN(fs->entry_timeout, 1.0);
        fs_metric_err(&fs->metrics, ENOENT);
        fuse_reply_entry(req, &neg);
        return;
    }
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    if (fuse_reply_entry(req, e) != 0 && e->ino) /* ino 0: a views negative entry */
        node_forget(fs, N(fs, e->ino), 1);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_LOOKUP);
    struct fuse_entry_param e;
    int err = do_lookup(fs, N(fs, parent), name, &e);
    reply_entry(fs, req, err, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_FORGET);
    node_forget(fs, N(fs, ino), nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_FORGET);
    for (size_t i = 0; i < count; i++)
        node_forget(fs, N(fs, forgets[i].ino), forgets[i].nlookup);
    fuse_reply_none(req);
}

/* --- attributes ------------------------------------------------------------ */

/* stat of a node without an open file: an object that is gone (no names
 * left, nothing open through the mount) is ESTALE, so the kernel looks the
 * name up again instead of reporting a deleted file. */
static int node_stat(struct ckptfs *fs, Node *n, struct stat *st)
{
    int err = node_fstat(fs, n, st);
    if (!err && st->st_nlink == 0 && n != fs->nodes.root && node_nopen(fs, n) == 0)
        err = node_mark_stale(fs, n, -ESTALE);
    return err;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_GETATTR);
    Node *n = N(fs, ino);
    struct stat st;
    double timeout = fs->attr_timeout;
    int err;
    if (n->kind != NODE_BACKING)
        err = views_getattr(fs, n, &st, &timeout);
    else if (fi && n->type == S_IFREG && FH(fi)->fd >= 0)
        err = fstat(FH(fi)->fd, &st) < 0 ? -errno : 0;
    else
        err = node_stat(fs, n, &st);
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
    int err = fs_check_write(fs, req, "setattr", n, NULL);
    if (err)
        return err;
    NodeFd f = {-1, NULL};
    int ffd = fi && n->type == S_IFREG && FH(fi)->fd >= 0 ? FH(fi)->fd : -1;
    if (ffd < 0) {
        err = node_fd(fs, n, &f);
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
    if (fstatat(fd, "", out, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = -errno;
out:
    creds_leave(fs, &c);
    node_fd_put(fs, &f);
    return err;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_SETATTR);
    struct stat st;
    int err = do_setattr(fs, req, N(fs, ino), attr, to_set, fi, &st);
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_READLINK);
    Node *n = N(fs, ino);
    if (n->kind == NODE_VIRTUAL) {
        g_autofree char *target = NULL;
        int err = views_readlink(fs, n, &target);
        if (err)
            reply_err(fs, req, err);
        else
            fuse_reply_readlink(req, target);
        return;
    }
    NodeFd f;
    int err = node_fd(fs, n, &f);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    char buf[PATH_MAX + 1];
    ssize_t len = readlinkat(f.fd, "", buf, sizeof buf);
    err = len < 0 ? -errno : 0;
    node_fd_put(fs, &f);
    if (err) {
        reply_err(fs, req, err);
    } else if ((size_t)len >= sizeof buf) {
        reply_err(fs, req, -ENAMETOOLONG);
    } else {
        buf[len] = '\0';
        fuse_reply_readlink(req, buf);
    }
}

/* --- creating -------------------------------------------------------------- */

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
    err = node_fd(fs, p, &pf);
    if (err)
        return err;
    Creds c;
    creds_enter(fs, req, true, &c);
    int r;
    if (target)
        r = symlinkat(target, pf.fd, name);
    else if (S_ISDIR(mode))
        r = mkdirat(pf.fd, name, mode & 07777);
    else
        r = mknodat(pf.fd, name, mode, rdev);
    err = r < 0 ? -errno : 0;
    creds_leave(fs, &c);
    if (!err)
        views_note_change(fs, node_ns(fs, p), name);
    if (!err) {
        struct stat st;
        Node *n;
        err = node_lookup_backing(fs, p, pf.fd, name, &st, &n);
        if (!err)
            fill_entry(fs, n, &st, e);
    }
    node_fd_put(fs, &pf);
    return err;
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_MKNOD);
    struct fuse_entry_param e;
    int err = do_make(fs, req, N(fs, parent), name, mode, rdev, NULL, &e);
    if (err)
        reply_err(fs, req, err);
    else
        reply_entry(fs, req, 0, &e);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_MKDIR);
    struct fuse_entry_param e;
    int err = do_make(fs, req, N(fs, parent), name, S_IFDIR | mode, 0, NULL, &e);
    if (err)
        reply_err(fs, req, err);
    else
        reply_entry(fs, req, 0, &e);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_SYMLINK);
    struct fuse_entry_param e;
    int err = do_make(fs, req, N(fs, parent), name, S_IFLNK, 0, link, &e);
    if (err)
        reply_err(fs, req, err);
    else
        reply_entry(fs, req, 0, &e);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_LINK);
    Node *n = N(fs, ino), *np = N(fs, newparent);
    CkNs ns;
    int err = fs_check_link(fs, req, n, np, newname, &ns);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    NodeFd f, pf;
    if ((err = node_fd(fs, n, &f))) {
        reply_err(fs, req, err);
        return;
    }
    if ((err = node_fd(fs, np, &pf))) {
        node_fd_put(fs, &f);
        reply_err(fs, req, err);
        return;
    }
    int r;
    if (fs->is_root) {
        r = linkat(f.fd, "", pf.fd, newname, AT_EMPTY_PATH);
    } else {
        char proc[64];
        proc_path(proc, sizeof proc, f.fd);
        r = linkat(AT_FDCWD, proc, pf.fd, newname, AT_SYMLINK_FOLLOW);
    }
    struct fuse_entry_param e;
    struct stat st;
    if (r < 0)
        err = -errno;
    else if (fstatat(f.fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = -errno;
    node_fd_put(fs, &pf);
    node_fd_put(fs, &f);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    node_ref(fs, n, 1);
    fill_entry(fs, n, &st, &e);
    reply_entry(fs, req, 0, &e);
}

/* --- removing and renaming --------------------------------------------------- */

static int do_remove(struct ckptfs *fs, fuse_req_t req, Node *p, const char *name, bool dir)
{
    int err = fs_check_write(fs, req, dir ? "rmdir" : "unlink", p, name);
    if (err)
        return err;
    NodeFd pf;
    if ((err = node_fd(fs, p, &pf)))
        return err;
    Creds c;
    creds_enter(fs, req, false, &c);
    if (unlinkat(pf.fd, name, dir ? AT_REMOVEDIR : 0) < 0)
        err = -errno;
    creds_leave(fs, &c);
    node_fd_put(fs, &pf);
    if (!err)
        views_note_change(fs, node_ns(fs, p), name);
    return err;
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_UNLINK);
    reply_err(fs, req, do_remove(fs, req, N(fs, parent), name, false));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_RMDIR);
    reply_err(fs, req, do_remove(fs, req, N(fs, parent), name, true));
}

/* The node now at dirfd/name takes namespace ns (rename moved it). */
static void renamed_ns(struct ckptfs *fs, int dirfd, const char *name, CkNs ns)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    Node *n = node_find_backing(fs, st.st_dev, st.st_ino);
    if (n && !ck_ns_equal(node_ns(fs, n), ns))
        node_set_ns(fs, n, ns);
}

static int do_rename(struct ckptfs *fs, fuse_req_t req, Node *p, const char *name, Node *np,
                     const char *newname, unsigned int flags)
{
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
        return -EINVAL;
    CkNs moved, back;
    int err = fs_check_rename(fs, req, p, name, np, newname, flags, &moved, &back);
    if (err)
        return err;
    NodeFd pf, npf;
    if ((err = node_fd(fs, p, &pf)))
        return err;
    if ((err = node_fd(fs, np, &npf))) {
        node_fd_put(fs, &pf);
        return err;
    }
    Creds c;
    /* a whiteout is a create (a device node at the old name): made as the
     * caller, who needs CAP_MKNOD as on any file system */
    creds_enter(fs, req, flags & RENAME_WHITEOUT, &c);
    int r = flags ? renameat2(pf.fd, name, npf.fd, newname, flags)
                  : renameat(pf.fd, name, npf.fd, newname);
    if (r < 0)
        err = -errno;
    creds_leave(fs, &c);
    if (!err) {
        const char *vn = fs->opt.views_name;
        CkNs was = ck_ns_child(node_ns(fs, p), name, vn);
        if (!ck_ns_equal(was, moved))
            renamed_ns(fs, npf.fd, newname, moved);
        if ((flags & RENAME_EXCHANGE) &&
            !ck_ns_equal(ck_ns_child(node_ns(fs, np), newname, vn), back))
            renamed_ns(fs, pf.fd, name, back);
        views_note_change(fs, node_ns(fs, p), name);
        views_note_change(fs, node_ns(fs, np), newname);
    }
    node_fd_put(fs, &npf);
    node_fd_put(fs, &pf);
    return err;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_RENAME);
    reply_err(fs, req, do_rename(fs, req, N(fs, parent), name, N(fs, newparent), newname, flags));
}

/* --- files ------------------------------------------------------------------- */

static bool wants_write(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* Binds the open file h to its backing file in the kernel when the policy
 * allows every write it could make (the verdict is taken at open and never
 * revisited, so a file whose writes the daemon must see stays unbound). */
static void bind_open(struct ckptfs *fs, FileHandle *h, int flags)
{
    if (h->fd < 0 || (h->write_err && (flags & O_ACCMODE) != O_RDONLY))
        return;
    h->bound = true;
    h->backing_id = pt_bind(fs, h->node, h->fd);
}

/* Open flags for the reply.  O_DIRECT is the kernel's own business: with
 * passthrough its backing file is opened O_DIRECT, without it the kernel
 * sends O_DIRECT reads and writes straight to the daemon, keeps shared
 * mmap working and clears setuid bits as on any write (direct_io would do
 * neither).  FLUSH is only needed for a marker, whose close must reach the
 * views: locks are the kernel's, and writes went to the backing file
 * already. */
static void set_open_flags(struct ckptfs *fs, Node *n, const struct stat *st, FileHandle *h,
                           struct fuse_file_info *fi)
{
    bool same = node_unchanged_since_open(fs, n, st);
    fi->noflush = !h->marker_job && !fs->opt.writeback;
    if (h->backing_id)
        return; /* the kernel takes no other open flag with passthrough (EIO) */
    fi->keep_cache = fs->attr_timeout > 0 && same && !(fi->flags & O_DIRECT);
}

static int open_views(struct ckptfs *fs, Node *n, struct fuse_file_info *fi)
{
    if (wants_write(fi->flags))
        return -EROFS;
    ViewsOpen vo = {.fd = -1};
    int err = views_open(fs, n, fi->flags, &vo);
    if (err)
        return err;
    FileHandle *h = g_new0(FileHandle, 1);
    h->fd = vo.fd;
    h->content = vo.content;
    h->node = n;
    h->write_err = -EROFS;
    bind_open(fs, h, fi->flags);
    handle_register(fs, h, HANDLE_FILE);
    fi->fh = (uintptr_t)h;
    fi->direct_io = vo.direct_io && !h->backing_id;
    fi->keep_cache = vo.keep_cache && !h->backing_id;
    fi->noflush = 1;
    return 0;
}

/* Makes fd, open on backing node n, the open file fi: counted among the
 * node's opens (which keep an unlinked node from going stale) and registered. */
static FileHandle *file_handle_open(struct ckptfs *fs, Node *n, int fd, bool writable,
                                    const char *marker_job, struct fuse_file_info *fi)
{
    FileHandle *h = g_new0(FileHandle, 1);
    h->fd = fd;
    h->node = n;
    h->writable = writable;
    h->marker_job = marker_job;
    node_open_count(fs, n, 1);
    bind_open(fs, h, fi->flags);
    handle_register(fs, h, HANDLE_FILE);
    fi->fh = (uintptr_t)h;
    return h;
}

/* The open(2) flags of the daemon's own descriptor of a backing file.
 * Never O_DIRECT: the daemon writes from libfuse's request buffers, which
 * are not aligned for it (EINVAL), and O_DIRECT's promise (no page cache on
 * the caller's side) is kept by the kernel above us.  Under writeback
 * caching the kernel may read pages of a write-only file, and does O_APPEND
 * itself. */
static int backing_open_flags(struct ckptfs *fs, int flags)
{
    flags &= ~O_DIRECT;
    if (fs->opt.writeback) {
        if ((flags & O_ACCMODE) == O_WRONLY)
            flags = (flags & ~O_ACCMODE) | O_RDWR;
        flags &= ~O_APPEND;
    }
    return flags;
}

static int do_open(struct ckptfs *fs, fuse_req_t req, Node *n, struct fuse_file_info *fi)
{
    if (n->kind != NODE_BACKING)
        return open_views(fs, n, fi);
    if (wants_write(fi->flags)) {
        int err = fs_check_write(fs, req, "open", n, NULL);
        if (err)
            return err;
    }
    int flags = backing_open_flags(fs, fi->flags & ~O_NOFOLLOW);
    Creds c;
    creds_enter(fs, req, false, &c);
    int fd;
    if (c.switched) {
        /* the kernel leaves permission checks to us: check as the caller,
         * then open with the daemon's rights (open_by_handle_at needs them) */
        NodeFd f;
        int err = node_fd(fs, n, &f);
        if (err) {
            creds_leave(fs, &c);
            return err;
        }
        char proc[64];
        proc_path(proc, sizeof proc, f.fd);
        int mode = ((flags & O_ACCMODE) != O_WRONLY ? R_OK : 0) |
                   ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) ? W_OK : 0);
        err = faccessat(AT_FDCWD, proc, mode, AT_EACCESS) < 0 ? -errno : 0;
        node_fd_put(fs, &f);
        creds_leave(fs, &c);
        if (err)
            return err;
    }
    struct stat st;
    fd = node_open_live(fs, n, flags, &st);
    if (fd < 0)
        return fd;
    const char *marker_job = wants_write(fi->flags) ? views_marker_job(fs, n, fd) : NULL;
    FileHandle *h =
        file_handle_open(fs, n, fd, (fi->flags & O_ACCMODE) != O_RDONLY, marker_job, fi);
    set_open_flags(fs, n, &st, h, fi);
    return 0;
}

static void handle_free(struct ckptfs *fs, FileHandle *h)
{
    if (h->bound)
        pt_unbind(fs, h->node, h->backing_id);
    if (h->fd >= 0) {
        if (h->writable && h->node->kind == NODE_BACKING) {
            struct stat st;
            if (fstat(h->fd, &st) == 0)
                node_note_release(fs, h->node, &st);
        }
        close(h->fd);
        if (h->node->kind == NODE_BACKING)
            node_open_count(fs, h->node, -1);
    }
    if (h->content)
        g_bytes_unref(h->content);
    g_free(h);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_OPEN);
    int err = do_open(fs, req, N(fs, ino), fi);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    if (kio_reply_open(req, fi, FH(fi)->backing_id) != 0) {
        handle_unregister(fs, FH(fi));
        handle_free(fs, FH(fi));
    }
}

static int do_create(struct ckptfs *fs, fuse_req_t req, Node *p, const char *name, mode_t mode,
                     struct fuse_file_info *fi, struct fuse_entry_param *e)
{
    bool tmpfile = strcmp(name, KIO_TMPFILE_NAME) == 0;
    CkNs child;
    int err = fs_check_create(fs, req, "create", p, name, false, &child);
    if (err)
        return err;
    NodeFd pf;
    if ((err = node_fd(fs, p, &pf)))
        return err;
    int flags = backing_open_flags(fs, fi->flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC);
    const char *at = name;
    if (tmpfile) {
        /* an unnamed file in the directory (kio delivers FUSE_TMPFILE so) */
        flags = (flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOFOLLOW | O_DIRECTORY)) | O_TMPFILE;
        at = ".";
    }
    Creds c;
    creds_enter(fs, req, true, &c);
    int fd = openat(pf.fd, at, flags, mode & 07777);
    if (fd < 0)
        err = -errno;
    creds_leave(fs, &c);
    node_fd_put(fs, &pf);
    if (err)
        return err;
    struct stat st;
    Node *n;
    err = node_lookup_fd(fs, p, name, fd, &st, &n);
    if (err) {
        close(fd);
        return err;
    }
    fill_entry(fs, n, &st, e);
    bool marker = !tmpfile && child.kind == CK_NS_JOB && strcmp(name, "COMPLETED") == 0;
    FileHandle *h = file_handle_open(fs, n, fd, true, marker ? child.job : NULL, fi);
    set_open_flags(fs, n, &st, h, fi);
    return 0;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_CREATE);
    struct fuse_entry_param e;
    int err = do_create(fs, req, N(fs, parent), name, mode, fi, &e);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    if (kio_reply_create(req, &e, fi, FH(fi)->backing_id) != 0) {
        handle_unregister(fs, FH(fi));
        handle_free(fs, FH(fi));
        node_forget(fs, N(fs, e.ino), 1);
    }
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_READ);
    FileHandle *h = FH(fi);
    if (h->fd < 0) {
        /* The kernel may release the handle as soon as it has the reply,
         * before fuse_reply_buf returns: keep the snapshot alive until then. */
        g_autoptr(GBytes) content = h->content ? g_bytes_ref(h->content) : NULL;
        gsize len = 0;
        const char *data = content ? g_bytes_get_data(content, &len) : NULL;
        if (off < 0 || (gsize)off >= len) {
            fuse_reply_buf(req, NULL, 0);
        } else {
            fs_metric_bytes(&fs->metrics.views_read_bytes, MIN(size, len - (gsize)off));
            fuse_reply_buf(req, data + off, MIN(size, len - (gsize)off));
        }
        return;
    }
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    buf.buf[0].fd = h->fd;
    buf.buf[0].pos = off;
    /* counted before the reply: h may be released, and the reader may look
     * at .metrics, as soon as the kernel has it */
    fs_metric_bytes(h->node && h->node->kind != NODE_BACKING ? &fs->metrics.views_read_bytes
                                                             : &fs->metrics.read_bytes,
                    size);
    /* no FUSE_BUF_SPLICE_MOVE: the kernel refuses most pages it is given
     * ("trying to steal weird page") and copies them anyway */
    int r = fuse_reply_data(req, &buf, 0);
    if (r < 0 && r != -ENOENT)
        fs_metric_err(&fs->metrics, -r);
}

/* 0 when data may be written through h, else the error to give: the
 * verdict kept at open, or EROFS for a views snapshot (it has no fd). */
static int write_refusal(const FileHandle *h)
{
    if (h->write_err)
        return h->write_err;
    return h->fd < 0 ? -EROFS : 0;
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                         struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_WRITE);
    FileHandle *h = FH(fi);
    /* The policy verdict was taken once at open (a refused open never gets
     * a handle; audit mode recorded it there): only look at it here. */
    int err = write_refusal(h);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
    out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    out.buf[0].fd = h->fd;
    out.buf[0].pos = off;
    ssize_t r = fuse_buf_copy(&out, in_buf, 0);
    if (r < 0) {
        reply_err(fs, req, (int)r);
    } else {
        fs_metric_bytes(&fs->metrics.written_bytes, (guint64)r);
        fuse_reply_write(req, (size_t)r);
    }
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_FLUSH);
    FileHandle *h = FH(fi);
    int err = 0;
    if (h->fd >= 0) {
        /* close of a duplicate reports the errors a close would (NFS-style backing) */
        int d = dup(h->fd);
        if (d < 0 || close(d) < 0)
            err = -errno;
    }
    if (h->marker_job)
        views_marker_written(fs, h->marker_job); /* close(2) waits for flush: the views see it */
    reply_err(fs, req, err);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_RELEASE);
    if (FH(fi)->marker_job)
        views_marker_written(fs,
                             FH(fi)->marker_job); /* before the reply: the next lookup sees it */
    handle_unregister(fs, FH(fi));
    handle_free(fs, FH(fi));
    fuse_reply_err(req, 0);
}

/* fsync and fsyncdir: FUSE's datasync flag picks fdatasync. */
static int sync_fd(int fd, int datasync)
{
    return (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_FSYNC);
    FileHandle *h = FH(fi);
    reply_err(fs, req, h->fd >= 0 ? sync_fd(h->fd, datasync) : 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_FALLOCATE);
    FileHandle *h = FH(fi);
    int err = write_refusal(h);
    if (!err && fallocate(h->fd, mode, off, len) < 0)
        err = -errno;
    reply_err(fs, req, err);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_LSEEK);
    FileHandle *h = FH(fi);
    if (h->fd < 0) {
        reply_err(fs, req, -EINVAL);
        return;
    }
    off_t r = lseek(h->fd, off, whence);
    if (r < 0)
        reply_err(fs, req, -errno);
    else
        fuse_reply_lseek(req, r);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                               struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                               struct fuse_file_info *fi_out, size_t len, int flags)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino_in;
    (void)ino_out;
    fs_metric_op(&fs->metrics, FS_OP_COPY_FILE_RANGE);
    FileHandle *in = FH(fi_in), *out = FH(fi_out);
    int err = write_refusal(out);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    if (in->fd < 0) {
        reply_err(fs, req, -EXDEV); /* a views snapshot: the kernel falls back to read/write */
        return;
    }
    ssize_t r = copy_file_range(in->fd, &off_in, out->fd, &off_out, len, (unsigned)flags);
    if (r < 0)
        reply_err(fs, req, -errno);
    else
        fuse_reply_write(req, (size_t)r);
}

/* --- directories ------------------------------------------------------------- */

static void dirhandle_free(struct ckptfs *fs, DirHandle *d)
{
    if (d->dp) {
        closedir(d->dp);
        node_open_count(fs, d->node, -1);
    }
    if (d->root) {
        for (guint i = 0; i < d->root->len; i++)
            g_free(g_array_index(d->root, RootEntry, i).name);
        g_array_free(d->root, TRUE);
    }
    if (d->views)
        views_releasedir(fs, d->views);
    g_mutex_clear(&d->lock);
    g_free(d);
}

/* The root's entries: the backing root's, without a stray entry named like
 * the views dir, and the views dir itself. */
static int snapshot_root(struct ckptfs *fs, DIR *dp, GArray *out)
{
    struct stat vst;
    views_dir_stat(fs, &vst);
    RootEntry dot = {g_strdup("."), fs->nodes.root->key.ino, DT_DIR};
    RootEntry dotdot = {g_strdup(".."), fs->nodes.root->key.ino, DT_DIR};
    RootEntry views = {g_strdup(fs->opt.views_name), vst.st_ino, DT_DIR};
    g_array_append_val(out, dot);
    g_array_append_val(out, dotdot);
    g_array_append_val(out, views);
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dp);
        if (!de)
            return errno ? -errno : 0;
        if (is_dot_or_dotdot(de->d_name) || strcmp(de->d_name, fs->opt.views_name) == 0)
            continue;
        RootEntry e = {g_strdup(de->d_name), de->d_ino, de->d_type};
        g_array_append_val(out, e);
    }
}

static int do_opendir(struct ckptfs *fs, Node *n, struct fuse_file_info *fi)
{
    DirHandle *d = g_new0(DirHandle, 1);
    g_mutex_init(&d->lock);
    d->node = n;
    int err = 0;
    if (n->kind != NODE_BACKING) {
        err = views_opendir(fs, n, &d->views);
        if (!err) {
            bool keep = false;
            fi->cache_readdir = views_dir_cacheable(d->views, &keep);
            fi->keep_cache = keep;
        }
    } else {
        int fd = node_open(fs, n, O_RDONLY | O_DIRECTORY);
        if (fd < 0) {
            err = fd;
        } else if (!(d->dp = fdopendir(fd))) {
            err = -errno;
            close(fd);
        } else if ((node_open_count(fs, n, 1), n == fs->nodes.root)) {
            d->root = g_array_new(FALSE, FALSE, sizeof(RootEntry));
            err = snapshot_root(fs, d->dp, d->root);
        }
        if (!err && fs->entry_timeout > 0) {
            /* The kernel may keep this directory's listing across opens while
             * its mtime is what the last open saw: changes through the mount
             * invalidate the kernel's copy themselves, changes behind its back
             * move the mtime (stat'ed before the listing is read). */
            struct stat st;
            if (fstat(dirfd(d->dp), &st) == 0) {
                fi->cache_readdir = 1;
                fi->keep_cache = node_unchanged_since_open(fs, n, &st);
            }
        }
    }
    if (err) {
        dirhandle_free(fs, d);
        return err;
    }
    handle_register(fs, d, HANDLE_DIR);
    fi->fh = (uintptr_t)d;
    return 0;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_OPENDIR);
    int err = do_opendir(fs, N(fs, ino), fi);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    if (fuse_reply_open(req, fi) != 0) {
        handle_unregister(fs, DH(fi));
        dirhandle_free(fs, DH(fi));
    }
}

/* Adds one entry; returns its size, or 0 when it did not fit (its lookup
 * reference, if any, is given back: the kernel never saw it). */
static size_t add_entry(struct ckptfs *fs, fuse_req_t req, Node *dir, char *buf, size_t rem,
                        const char *name, ino_t ino, unsigned char type, off_t next, bool plus,
                        int *err)
{
    *err = 0;
    if (!plus) {
        struct stat st = {0};
        st.st_ino = ino;
        st.st_mode = (mode_t)DTTOIF(type);
        size_t len = fuse_add_direntry(req, buf, rem, name, &st, next);
        return len > rem ? 0 : len;
    }
    struct fuse_entry_param e;
    bool looked_up = false;
    if (is_dot_or_dotdot(name)) {
        /* the kernel ignores these and takes no reference */
        memset(&e, 0, sizeof e);
        e.attr.st_ino = ino;
        e.attr.st_mode = (mode_t)DTTOIF(type);
    } else {
        int r = do_lookup(fs, dir, name, &e);
        if (r == -ENOENT) {
            /* gone since the directory was read: list it without attributes */
            memset(&e, 0, sizeof e);
            e.attr.st_ino = ino;
            e.attr.st_mode = (mode_t)DTTOIF(type);
        } else if (r) {
            *err = r;
            return 0;
        } else {
            looked_up = true;
        }
    }
    size_t len = fuse_add_direntry_plus(req, buf, rem, name, &e, next);
    if (len > rem) {
        if (looked_up)
            node_forget(fs, N(fs, e.ino), 1);
        return 0;
    }
    return len;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, bool plus)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, plus ? FS_OP_READDIRPLUS : FS_OP_READDIR);
    DirHandle *d = DH(fi);
    Node *dir = N(fs, ino);
    g_autofree char *buf = g_malloc(size);
    size_t used = 0;
    int err = 0;

    g_mutex_lock(&d->lock);
    if (d->views) {
        ssize_t r = views_readdir(fs, req, dir, d->views, buf, size, off, plus);
        if (r < 0)
            err = (int)r;
        else
            used = (size_t)r;
    } else if (d->root) {
        for (guint i = (guint)off; i < d->root->len; i++) {
            RootEntry *re = &g_array_index(d->root, RootEntry, i);
            size_t len = add_entry(fs, req, dir, buf + used, size - used, re->name, re->ino,
                                   re->type, i + 1, plus, &err);
            if (!len)
                break;
            used += len;
        }
    } else {
        if (off != d->offset) {
            seekdir(d->dp, off);
            d->offset = off;
        }
        for (;;) {
            long pos = telldir(d->dp);
            errno = 0;
            struct dirent *de = readdir(d->dp);
            if (!de) {
                if (errno)
                    err = -errno;
                break;
            }
            size_t len = add_entry(fs, req, dir, buf + used, size - used, de->d_name, de->d_ino,
                                   de->d_type, de->d_off, plus, &err);
            if (!len) {
                /* not sent: the next call starts with this entry again */
                seekdir(d->dp, pos);
                break;
            }
            d->offset = de->d_off;
            used += len;
        }
    }
    g_mutex_unlock(&d->lock);

    /* An error after some entries went into the buffer cannot be reported
     * without losing their lookup references: send what we have. */
    if (err && used == 0)
        reply_err(fs, req, err);
    else
        fuse_reply_buf(req, buf, used);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_RELEASEDIR);
    handle_unregister(fs, DH(fi));
    dirhandle_free(fs, DH(fi));
    fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(&fs->metrics, FS_OP_FSYNCDIR);
    DirHandle *d = DH(fi);
    reply_err(fs, req, d->dp ? sync_fd(dirfd(d->dp), datasync) : 0);
}

/* --- the rest ---------------------------------------------------------------- */

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_STATFS);
    Node *n = N(fs, ino);
    if (n->kind != NODE_BACKING)
        n = fs->nodes.root;
    NodeFd f;
    int err = node_fd(fs, n, &f);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    struct statvfs sv;
    err = fstatvfs(f.fd, &sv) < 0 ? -errno : 0;
    node_fd_put(fs, &f);
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_statfs(req, &sv);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_ACCESS);
    Node *n = N(fs, ino);
    if (n->kind != NODE_BACKING) {
        reply_err(fs, req, (mask & W_OK) ? -EROFS : 0);
        return;
    }
    NodeFd f;
    int err = node_fd(fs, n, &f);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    char proc[64];
    proc_path(proc, sizeof proc, f.fd);
    Creds c;
    creds_enter(fs, req, true, &c);
    err = faccessat(AT_FDCWD, proc, mask, AT_EACCESS) < 0 ? -errno : 0;
    creds_leave(fs, &c);
    node_fd_put(fs, &f);
    reply_err(fs, req, err);
}

/* setxattr, or removexattr when value is NULL (FUSE never passes NULL for
 * setxattr): a write for the policy, done with the caller's rights through
 * /proc/self/fd since the f*xattr calls refuse O_PATH descriptors.  The
 * magic link resolves to the object itself, a symlink included (it is not
 * followed again): the backing file system answers as for any symlink. */
static int do_xattr_change(struct ckptfs *fs, fuse_req_t req, Node *n, const char *name,
                           const char *value, size_t size, int flags)
{
    int err = fs_check_write(fs, req, value ? "setxattr" : "removexattr", n, NULL);
    if (err)
        return err;
    NodeFd f;
    if ((err = node_fd(fs, n, &f)))
        return err;
    char proc[64];
    proc_path(proc, sizeof proc, f.fd);
    Creds c;
    creds_enter(fs, req, false, &c);
    int r = value ? setxattr(proc, name, value, size, flags) : removexattr(proc, name);
    err = r < 0 ? -errno : 0;
    creds_leave(fs, &c);
    node_fd_put(fs, &f);
    return err;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_SETXATTR);
    Node *n = N(fs, ino);
    if (n->kind == NODE_VIRTUAL) { /* _views/.control; EROFS elsewhere */
        reply_err(fs, req, views_setxattr(fs, req, n, name, value, size));
        return;
    }
    reply_err(fs, req, do_xattr_change(fs, req, n, name, value, size, flags));
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_REMOVEXATTR);
    reply_err(fs, req, do_xattr_change(fs, req, N(fs, ino), name, NULL, 0, 0));
}

static void reply_xattr_value(struct ckptfs *fs, fuse_req_t req, size_t size, const char *data,
                              size_t len)
{
    if (size == 0)
        fuse_reply_xattr(req, len);
    else if (len > size)
        reply_err(fs, req, -ERANGE);
    else
        fuse_reply_buf(req, data, len);
}

/* getxattr, or listxattr when name is NULL, of a backing object, read
 * through /proc/self/fd since the f*xattr calls refuse O_PATH descriptors. */
static void reply_backing_xattr(struct ckptfs *fs, fuse_req_t req, Node *n, const char *name,
                                size_t size)
{
    NodeFd f;
    int err = node_fd(fs, n, &f);
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    char proc[64];
    proc_path(proc, sizeof proc, f.fd);
    g_autofree char *buf = size ? g_malloc(size) : NULL;
    ssize_t r = name ? getxattr(proc, name, buf, size) : listxattr(proc, buf, size);
    err = r < 0 ? -errno : 0;
    node_fd_put(fs, &f);
    if (err)
        reply_err(fs, req, err);
    else
        reply_xattr_value(fs, req, size, buf, (size_t)r); /* r <= size: no ERANGE */
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_GETXATTR);
    Node *n = N(fs, ino);
    if (n->kind != NODE_BACKING) {
        g_autoptr(GBytes) v = NULL;
        int err = views_getxattr(fs, n, name, &v);
        if (err) {
            reply_err(fs, req, err);
            return;
        }
        gsize len;
        const char *data = g_bytes_get_data(v, &len);
        reply_xattr_value(fs, req, size, data, len);
        return;
    }
    reply_backing_xattr(fs, req, n, name, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(&fs->metrics, FS_OP_LISTXATTR);
    Node *n = N(fs, ino);
    if (n->kind != NODE_BACKING) {
        g_autoptr(GString) names = g_string_new(NULL);
        int err = views_listxattr(fs, n, names);
        if (err)
            reply_err(fs, req, err);
        else
            reply_xattr_value(fs, req, size, names->str, names->len);
        return;
    }
    reply_backing_xattr(fs, req, n, NULL, size);
}

/* --- session ----------------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct ckptfs *fs = userdata;
    pt_log_state(fs);
    /* Requests are read with read(2), never spliced: fs/kio.c must see each
     * one whole (FUSE_TMPFILE), and with passthrough the daemon sees no file
     * data.  Replies to reads of backing files are spliced when the daemon
     * is on the data path (no passthrough). */
    conn->want &= ~(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE | FUSE_CAP_SPLICE_READ);
    if (!kio_passthrough(&fs->kio) && (conn->capable & FUSE_CAP_SPLICE_WRITE))
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
    /* creates pass the caller's mode as given; the kernel applied the umask */
    conn->time_gran = 1;
}

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
