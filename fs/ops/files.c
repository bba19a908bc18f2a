/* Files: open and create (the policy verdict for data writes is taken
 * here, once, and decides the passthrough binding), read and write when the
 * daemon is on the data path, flush, release, fsync, fallocate, lseek and
 * copy_file_range. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "enforce.h"
#include "kernel/kio.h"
#include "ops.h"
#include "ops-private.h"
#include "nodes/passthrough.h"
#include "views/views.h"

static void file_handle_free(struct ckptfs *fs, void *p);

/* Gives h its fh (and its record in the state memfd); frees it when the
 * registry is full. */
static int file_handle_register(struct ckptfs *fs, FileHandle *h, struct fuse_file_info *fi)
{
    HandleRec rec = {.node = node_ino(&fs->nodes, h->node),
                     .flags = h->flags,
                     .backing_id = h->backing_id,
                     .bound = h->bound,
                     .writable = h->writable,
                     .write_err = h->write_err};
    fi->fh = handle_register(fs, h, HANDLE_FILE, &rec);
    if (fi->fh)
        return 0;
    file_handle_free(fs, h);
    return -ENFILE;
}

static bool wants_write(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* A bound open that may write keeps the kernel from caching its node's
 * attributes (node_bound_writers): stores into a shared mapping reach the
 * backing file without a request, and only a stat that asks sees them. */
static void bound_writer(FileHandle *h, int flags)
{
    if (h->backing_id > 0 && (flags & O_ACCMODE) != O_RDONLY && h->node->kind == NODE_BACKING) {
        h->bound_writer = true;
        node_bound_writers(h->node, 1);
    }
}

void kernel_attrs_stale(struct ckptfs *fs, Node *n)
{
    fuse_lowlevel_notify_inval_inode(fs->se, node_ino(&fs->nodes, n), -1, 0);
}

/* After a change by req's caller to n's file succeeded: its set-group-ID
 * bit dropped where ext4 would, and the mode the kernel holds with it. */
static void drop_sgid(struct ckptfs *fs, fuse_req_t req, Node *n, int fd)
{
    if (creds_drop_sgid(req, fd))
        kernel_attrs_stale(fs, n);
}

/* The attributes the kernel holds of a file opened for writing before
 * this open bound it are dropped, so its next stat asks. */
static void drop_kernel_attrs(struct ckptfs *fs, FileHandle *h)
{
    if (h->bound_writer)
        kernel_attrs_stale(fs, h->node);
}

/* Binds the open file h to its backing file in the kernel when the policy
 * allows every write it could make (the verdict is taken at open and never
 * revisited, so a file whose writes the daemon must see stays unbound). */
static void bind_open(struct ckptfs *fs, FileHandle *h, int flags)
{
    if (h->fd < 0 || (h->write_err && (flags & O_ACCMODE) != O_RDONLY))
        return;
    h->bound = true;
    /* a write that must drop the set-group-ID bit has to reach the daemon */
    h->backing_id =
        h->sgid_watch ? pt_bind_unless_unbound(&fs->pt, h->node) : pt_bind(&fs->pt, h->node, h->fd);
    bound_writer(h, flags);
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
    bool same = node_unchanged_since_open(&fs->nodes, n, st);
    fi->noflush = !h->marker_job && !fs->opt.writeback;
    if (h->backing_id)
        return; /* the kernel takes no other open flag with passthrough (EIO) */
    fi->keep_cache = fs->attr_timeout > 0 && same && !(fi->flags & O_DIRECT);
}

static int open_views(struct ckptfs *fs, fuse_req_t req, Node *n, struct fuse_file_info *fi)
{
    ViewsOpen vo = {.fd = -1};
    int err = views_open(fs, req, n, fi->flags, &vo);
    if (err)
        return err;
    FileHandle *h = g_new0(FileHandle, 1);
    h->fd = vo.fd;
    h->content = vo.content;
    h->node = n;
    h->flags = fi->flags;
    h->control = vo.control;
    h->writable = vo.control;
    h->write_err = vo.control ? 0 : -EROFS;
    bind_open(fs, h, fi->flags);
    int err2 = file_handle_register(fs, h, fi);
    if (err2)
        return err2;
    fi->direct_io = vo.direct_io && !h->backing_id;
    fi->keep_cache = vo.keep_cache && !h->backing_id;
    fi->noflush = 1;
    return 0;
}

/* Makes fd, open on backing node n, the open file fi, registered.  The
 * caller has counted it among the node's opens (which keep an unlinked
 * node from going stale) before it opened fd: an unlink racing the open
 * then either sees the count or removes the name before the open, which
 * then finds no name (node_open_live). */
static FileHandle *file_handle_open(struct ckptfs *fs, Node *n, int fd, bool writable,
                                    bool sgid_watch, const char *marker_job,
                                    struct fuse_file_info *fi)
{
    FileHandle *h = g_new0(FileHandle, 1);
    h->fd = fd;
    h->node = n;
    h->flags = fi->flags;
    h->writable = writable;
    h->sgid_watch = sgid_watch;
    h->marker_job = marker_job;
    if (!(fi->flags & O_DIRECT))
        node_buffered_opens(n, 1);
    bind_open(fs, h, fi->flags);
    return file_handle_register(fs, h, fi) == 0 ? h : NULL;
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
        return open_views(fs, req, n, fi);
    if (wants_write(fi->flags)) {
        int err = fs_check_write(fs, req, "open", n);
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
        int err = node_fd(&fs->nodes, n, &f);
        if (err) {
            creds_leave(fs, &c);
            return err;
        }
        char proc[64];
        proc_path(proc, sizeof proc, f.fd);
        int mode = ((flags & O_ACCMODE) != O_WRONLY ? R_OK : 0) |
                   ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) ? W_OK : 0);
        err = faccessat(AT_FDCWD, proc, mode, AT_EACCESS) < 0 ? -errno : 0;
        node_fd_put(&fs->nodes, &f);
        creds_leave(fs, &c);
        if (err)
            return err;
    }
    struct stat st;
    node_open_count(&fs->nodes, n, 1);
    fd = node_open_live(&fs->nodes, n, flags, &st);
    if (fd < 0) {
        node_open_count(&fs->nodes, n, -1);
        return fd;
    }
    CkNs ns = node_ns(&fs->nodes, n);
    const char *marker_job = wants_write(fi->flags) && ck_ns_is_marker(ns) ? ns.job : NULL;
    bool writable = (fi->flags & O_ACCMODE) != O_RDONLY;
    FileHandle *h = file_handle_open(fs, n, fd, writable, writable && creds_sgid_to_drop(req, &st),
                                     marker_job, fi);
    if (!h)
        return -ENFILE;
    if (fi->flags & O_TRUNC)
        drop_sgid(fs, req, n, fd);
    set_open_flags(fs, n, &st, h, fi);
    drop_kernel_attrs(fs, h);
    return 0;
}

static void file_handle_free(struct ckptfs *fs, void *p)
{
    FileHandle *h = p;
    if (h->bound_writer)
        node_bound_writers(h->node, -1);
    if (h->bound)
        pt_unbind(&fs->pt, h->node, h->backing_id);
    if (h->fd >= 0) {
        if (h->writable && h->node->kind == NODE_BACKING) {
            struct stat st;
            if (fstat(h->fd, &st) == 0)
                node_note_release(&fs->nodes, h->node, &st);
        }
        close(h->fd);
        if (h->node->kind == NODE_BACKING) {
            node_open_count(&fs->nodes, h->node, -1);
            if (!(h->flags & O_DIRECT))
                node_buffered_opens(h->node, -1);
        }
    }
    if (h->content)
        g_bytes_unref(h->content);
    g_free(h);
}

/* A handle a previous daemon gave the kernel (handles.c): the backing file
 * opened again with the open's flags (never truncated or created again); a
 * views snapshot is made again at its first read.  The passthrough binding
 * is the kernel's and stays; the node's slot still counts it. */
static void *file_handle_revive(struct ckptfs *fs, Node *n, const HandleRec *rec)
{
    FileHandle *h = g_new0(FileHandle, 1);
    h->fd = -1;
    h->node = n;
    h->flags = rec->flags;
    h->writable = rec->writable;
    h->write_err = rec->write_err;
    h->bound = rec->bound;
    h->backing_id = rec->backing_id;
    /* the record does not say whether its writes were watched: an unbound
     * writer is (each write asks the writer's credentials again) */
    h->sgid_watch = rec->writable && !rec->backing_id && n->kind == NODE_BACKING;
    bound_writer(h, rec->flags);
    h->control = n->kind == NODE_VIRTUAL && rec->writable;
    if (n->kind != NODE_VIRTUAL) {
        /* the open is done: nothing to create, truncate or make unnamed
         * again (O_TMPFILE carries O_DIRECTORY) */
        int flags = backing_open_flags(fs, rec->flags) &
                    ~(O_CREAT | O_EXCL | O_TRUNC | O_NOFOLLOW | O_TMPFILE);
        int fd = node_open(&fs->nodes, n, flags);
        if (fd < 0) {
            g_debug(
                "ckptfs: an open file of node %u (kind %d, stale %d) cannot be opened again: %s",
                n->slot, n->kind, n->stale, g_strerror(-fd));
            h->lost_err = fd == -ESTALE ? -EIO : fd;
        } else {
            h->fd = fd;
            if (n->kind == NODE_BACKING) {
                node_open_count(&fs->nodes, n, 1);
                if (!(h->flags & O_DIRECT))
                    node_buffered_opens(n, 1);
            }
        }
    }
    return h;
}

const HandleType file_handle_type = {file_handle_free, file_handle_revive};

/* The one reply of an open: a reply the kernel did not take closes the file. */
static void reply_open(struct ckptfs *fs, fuse_req_t req, int err, struct fuse_file_info *fi)
{
    if (err)
        reply_err(fs, req, err);
    else if (kio_reply_open(req, fi, file_of(fs, fi)->backing_id) != 0)
        handle_close(fs, fi->fh);
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_OPEN);
    reply_open(fs, req, do_open(fs, req, node_by_ino(fs, ino), fi), fi);
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
    if ((err = node_fd(&fs->nodes, p, &pf)))
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
    int fd = openat(pf.fd, at, flags, creds_mode(fs, req, mode));
    if (fd < 0 && errno == EEXIST && (flags & O_EXCL) && kio_resent()) {
        /* resent after the daemon died: the first try made the file (the
         * caller never had it, so it holds nothing written through it) */
        fd = openat(pf.fd, at, flags & ~(O_EXCL | O_CREAT | O_TRUNC), 0);
    }
    if (fd < 0)
        err = -errno;
    creds_leave(fs, &c);
    node_fd_put(&fs->nodes, &pf);
    if (err)
        return err;
    struct stat st;
    Node *n;
    err = node_lookup_fd(&fs->nodes, child, fd, &st, &n);
    if (err) {
        close(fd);
        return err;
    }
    /* before the binding: the new file's attributes are kept as any entry's
     * (the next reply of a GETATTR while it is open is not).  A zero timeout
     * here would cost a GETATTR per create where the kernel checks
     * permissions; a file written only through a shared mapping right
     * after its create shows its times at the next open, write or timeout. */
    fill_entry(fs, n, &st, e);
    if (tmpfile) {
        node_set_nameless_open(&fs->nodes, n, true);
        node_hold_nameless(&fs->nodes, n, fcntl(fd, F_DUPFD_CLOEXEC, 0));
    }
    bool marker = !tmpfile && ck_ns_is_marker(child);
    /* counted after the open: the kernel holds the directory locked across
     * a create, so no unlink through the mount can race it */
    node_open_count(&fs->nodes, n, 1);
    FileHandle *h = file_handle_open(fs, n, fd, true, false, marker ? child.job : NULL, fi);
    if (!h) {
        node_forget(&fs->nodes, n, 1);
        return -ENFILE;
    }
    set_open_flags(fs, n, &st, h, fi);
    return 0;
}

/* The one reply of a create: a reply the kernel did not take closes the
 * file and gives the entry's reference back. */
static void reply_create(struct ckptfs *fs, fuse_req_t req, int err, struct fuse_entry_param *e,
                         struct fuse_file_info *fi)
{
    if (err) {
        reply_err(fs, req, err);
    } else if (kio_reply_create(req, e, fi, file_of(fs, fi)->backing_id) != 0) {
        handle_close(fs, fi->fh);
        node_forget(&fs->nodes, node_by_ino(fs, e->ino), 1);
    }
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_CREATE);
    struct fuse_entry_param e;
    int err = do_create(fs, req, node_by_ino(fs, parent), name, mode, fi, &e);
    reply_create(fs, req, err, &e, fi);
}

/* A views snapshot taken over from a previous daemon is made again. */
static void refill_snapshot(struct ckptfs *fs, FileHandle *h)
{
    ViewsOpen vo = {.fd = -1};
    if (views_open(fs, NULL, h->node, h->flags, &vo) != 0)
        return;
    if (vo.fd >= 0)
        close(vo.fd);
    if (vo.content && !g_atomic_pointer_compare_and_exchange(&h->content, NULL, vo.content))
        g_bytes_unref(vo.content); /* another read made it first */
}

/* What a read of h answers (into *out): a piece of a views snapshot, kept
 * alive in *keep until the reply is out (the kernel may release the handle
 * as soon as it has it), or size bytes of the backing file at off, spliced
 * from its descriptor. */
static int do_read(struct ckptfs *fs, FileHandle *h, size_t size, off_t off,
                   struct fuse_bufvec *out, GBytes **keep)
{
    if (h->lost_err)
        return h->lost_err;
    if (h->fd < 0) {
        if (!g_atomic_pointer_get(&h->content) && h->node)
            refill_snapshot(fs, h);
        *keep = h->content ? g_bytes_ref(h->content) : NULL;
        gsize len = 0;
        const char *data = *keep ? g_bytes_get_data(*keep, &len) : NULL;
        size_t n = off < 0 || (gsize)off >= len ? 0 : MIN(size, len - (gsize)off);
        *out = (struct fuse_bufvec)FUSE_BUFVEC_INIT(n);
        out->buf[0].mem = n ? (void *)(data + off) : NULL;
        if (n)
            fs_metric_bytes(&fs->metrics->views_read_bytes, n);
        return 0;
    }
    *out = (struct fuse_bufvec)FUSE_BUFVEC_INIT(size);
    out->buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    out->buf[0].fd = h->fd;
    out->buf[0].pos = off;
    /* counted before the reply: h may be released, and the reader may look
     * at .metrics, as soon as the kernel has it */
    fs_metric_bytes(h->node && h->node->kind != NODE_BACKING ? &fs->metrics->views_read_bytes
                                                             : &fs->metrics->read_bytes,
                    size);
    return 0;
}

/* The one reply of a read: a snapshot's bytes as they are, a backing
 * file's spliced where the connection splices.  No FUSE_BUF_SPLICE_MOVE:
 * the kernel refuses most pages it is given ("trying to steal weird page")
 * and copies them anyway. */
static void reply_data(struct ckptfs *fs, fuse_req_t req, int err, struct fuse_bufvec *buf)
{
    if (err) {
        reply_err(fs, req, err);
        return;
    }
    bool fd = buf->buf[0].flags & FUSE_BUF_IS_FD;
    int r = fuse_reply_data(req, buf, fd ? 0 : FUSE_BUF_NO_SPLICE);
    if (r < 0 && r != -ENOENT)
        fs_metric_err(fs->metrics, -r);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_READ);
    struct fuse_bufvec buf;
    g_autoptr(GBytes) keep = NULL;
    int err = do_read(fs, file_of(fs, fi), size, off, &buf, &keep);
    reply_data(fs, req, err, &buf);
}

/* 0 when data may be written through h, else the error to give: the
 * verdict kept at open, or EROFS for a views snapshot (it has no fd) but
 * .control's. */
static int write_refusal(const FileHandle *h)
{
    if (h->lost_err)
        return h->lost_err;
    if (h->write_err)
        return h->write_err;
    return h->fd < 0 && !h->control ? -EROFS : 0;
}

/* A write to .control: its settings, as lines (views_write). */
static int write_control(struct ckptfs *fs, fuse_req_t req, FileHandle *h,
                         struct fuse_bufvec *in_buf)
{
    size_t size = fuse_buf_size(in_buf);
    if (size > 64 * 1024)
        return -EFBIG; /* four settings fit in far less */
    g_autofree char *data = g_malloc(size ? size : 1);
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);
    out.buf[0].mem = data;
    ssize_t r = fuse_buf_copy(&out, in_buf, 0);
    if (r < 0)
        return (int)r;
    return views_write(fs, req, h->node, data, (size_t)r);
}

/* Writes in_buf through h at off; *written: the bytes taken.  The policy
 * verdict was taken once at open (a refused open never gets a handle;
 * audit mode recorded it there): only looked at here. */
static int do_write(struct ckptfs *fs, fuse_req_t req, FileHandle *h, struct fuse_bufvec *in_buf,
                    off_t off, int flags, size_t *written)
{
    int err = write_refusal(h);
    if (err)
        return err;
    if (h->control) {
        err = write_control(fs, req, h, in_buf);
        *written = err ? 0 : fuse_buf_size(in_buf);
        return err;
    }
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
    out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    out.buf[0].fd = h->fd;
    out.buf[0].pos = off;
    ssize_t r = fuse_buf_copy(&out, in_buf, 0);
    if (r < 0)
        return (int)r;
    if (r > 0 && h->sgid_watch)
        drop_sgid(fs, req, h->node, h->fd);
    if (r > 0 && (flags & O_DIRECT) && node_buffered_since_last(h->node))
        direct_write_landed(fs, h->node, off, (size_t)r);
    fs_metric_bytes(&fs->metrics->written_bytes, (guint64)r);
    *written = (size_t)r;
    return 0;
}

/* The one reply of a write and of a copy_file_range. */
static void reply_write(struct ckptfs *fs, fuse_req_t req, int err, size_t written)
{
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_write(req, written);
}

void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                  struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_WRITE);
    size_t written = 0;
    int err = do_write(fs, req, file_of(fs, fi), in_buf, off, fi->flags, &written);
    reply_write(fs, req, err, written);
}

static int do_flush(struct ckptfs *fs, FileHandle *h)
{
    int err = 0;
    if (h->fd >= 0) {
        /* close of a duplicate reports the errors a close would (NFS-style backing) */
        int d = dup(h->fd);
        if (d < 0 || close(d) < 0)
            err = -errno;
    }
    if (h->marker_job)
        views_marker_written(fs, h->marker_job); /* close(2) waits for flush: the views see it */
    return err;
}

void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_FLUSH);
    reply_err(fs, req, do_flush(fs, file_of(fs, fi)));
}

static int do_release(struct ckptfs *fs, struct fuse_file_info *fi)
{
    const char *marker_job = file_of(fs, fi)->marker_job;
    if (marker_job)
        views_marker_written(fs, marker_job); /* before the reply: the next lookup sees it */
    handle_close(fs, fi->fh);
    return 0;
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_RELEASE);
    reply_err(fs, req, do_release(fs, fi));
}

static int do_fsync(FileHandle *h, int datasync)
{
    return h->fd >= 0 ? sync_fd(h->fd, datasync) : h->lost_err;
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_FSYNC);
    reply_err(fs, req, do_fsync(file_of(fs, fi), datasync));
}

static int do_fallocate(struct ckptfs *fs, fuse_req_t req, FileHandle *h, int mode, off_t off,
                        off_t len)
{
    int err = write_refusal(h);
    if (!err && fallocate(h->fd, mode, off, len) < 0)
        err = -errno;
    if (!err)
        drop_sgid(fs, req, h->node, h->fd);
    return err;
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                  struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_FALLOCATE);
    reply_err(fs, req, do_fallocate(fs, req, file_of(fs, fi), mode, off, len));
}

static int do_lseek(FileHandle *h, off_t off, int whence, off_t *pos)
{
    if (h->fd < 0)
        return -EINVAL;
    *pos = lseek(h->fd, off, whence);
    return *pos < 0 ? -errno : 0;
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_LSEEK);
    off_t pos = 0;
    int err = do_lseek(file_of(fs, fi), off, whence, &pos);
    if (err)
        reply_err(fs, req, err);
    else
        fuse_reply_lseek(req, pos);
}

static int do_copy_file_range(struct ckptfs *fs, fuse_req_t req, FileHandle *in, off_t off_in,
                              FileHandle *out, off_t off_out, size_t len, int flags, size_t *copied)
{
    int err = write_refusal(out);
    if (err)
        return err;
    if (in->fd < 0)
        return -EXDEV; /* a views snapshot: the kernel falls back to read/write */
    ssize_t r = copy_file_range(in->fd, &off_in, out->fd, &off_out, len, (unsigned)flags);
    if (r < 0)
        return -errno;
    if (r > 0)
        drop_sgid(fs, req, out->node, out->fd);
    *copied = (size_t)r;
    return 0;
}

void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                        struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                        struct fuse_file_info *fi_out, size_t len, int flags)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino_in;
    (void)ino_out;
    fs_metric_op(fs->metrics, FS_OP_COPY_FILE_RANGE);
    size_t copied = 0;
    int err = do_copy_file_range(fs, req, file_of(fs, fi_in), off_in, file_of(fs, fi_out), off_out,
                                 len, flags, &copied);
    reply_write(fs, req, err, copied);
}
