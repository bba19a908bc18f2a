/* Directories: opendir (a snapshot for the root and the views; a backing
 * directory's stream opens at the first readdir), readdir and readdirplus,
 * releasedir, fsyncdir.
 *
 * When the kernel may cache (timeouts above 0), the first OPENDIR is
 * answered ENOSYS: from then on the kernel opens and closes directories
 * without asking (no OPENDIR, no RELEASEDIR: two round trips per directory
 * of a walk) and keeps every listing until the directory's mtime or
 * version moves.  READDIR and FSYNCDIR then come with fh 0: a READDIR at
 * offset 0 takes a new listing, and the listing a READDIR stopped in is
 * parked for the READDIR that goes on from there. */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "ops.h"
#include "ops-private.h"
#include "views/views.h"

/* What fi->fh of an open directory points at. */
typedef struct {
    Node *node;
    bool counted; /* among the node's opens (a backing directory) */
    DIR *dp;      /* backing directory stream, opened at the first readdir */
    int sync_fd;  /* for fsyncdir, opened at the first (-1 before; atomic) */
    off_t offset;
    GArray *root; /* RootEntry: the root's entries, snapshot at opendir */
    void *views;  /* views_opendir handle */
} DirHandle;

typedef struct {
    char *name;
    ino_t ino;
    unsigned char type;
} RootEntry;

/* NULL for an fh the registry does not have (EBADF). */
static inline DirHandle *dir_of(struct ckptfs *fs, struct fuse_file_info *fi)
{
    return handle_lookup(fs, fi->fh);
}

static void dirhandle_free(struct ckptfs *fs, void *p)
{
    DirHandle *d = p;
    if (d->dp)
        closedir(d->dp);
    if (d->sync_fd >= 0)
        close(d->sync_fd);
    if (d->counted)
        node_open_count(&fs->nodes, d->node, -1);
    if (d->root) {
        for (guint i = 0; i < d->root->len; i++)
            g_free(g_array_index(d->root, RootEntry, i).name);
        g_array_free(d->root, TRUE);
    }
    if (d->views)
        views_releasedir(fs, d->views);
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

/* Opens the backing directory stream of d if it has none yet. */
static int dirhandle_stream(struct ckptfs *fs, DirHandle *d)
{
    if (d->dp)
        return 0;
    int fd = node_open(&fs->nodes, d->node, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return fd;
    if (!(d->dp = fdopendir(fd))) {
        int err = -errno;
        close(fd);
        return err;
    }
    return 0;
}

/* A handle of directory n with the listing taken at open where there is
 * one (a views directory, the root's snapshot); a backing directory's
 * stream opens at the first readdir.  Not counted among n's opens: an
 * OPENDIR counts it, a READDIR without one (fh 0) parks it, and the kernel
 * may forget n meanwhile. */
static int dirhandle_new(struct ckptfs *fs, Node *n, DirHandle **out)
{
    DirHandle *d = g_new0(DirHandle, 1);
    d->node = n;
    d->sync_fd = -1;
    int err = 0;
    if (n->kind != NODE_BACKING) {
        err = views_opendir(fs, n, &d->views);
    } else if (n == fs->nodes.root && !(err = dirhandle_stream(fs, d))) {
        d->root = g_array_new(FALSE, FALSE, sizeof(RootEntry));
        err = snapshot_root(fs, d->dp, d->root);
    }
    if (err) {
        dirhandle_free(fs, d);
        return err;
    }
    *out = d;
    return 0;
}

static int do_opendir(struct ckptfs *fs, Node *n, struct fuse_file_info *fi)
{
    if (fs->no_opendir)
        return -ENOSYS; /* the kernel opens directories alone from now on */
    DirHandle *d;
    int err = dirhandle_new(fs, n, &d);
    if (err)
        return err;
    if (d->views) {
        bool keep = false;
        fi->cache_readdir = views_dir_cacheable(d->views, &keep);
        fi->keep_cache = keep;
    } else {
        struct stat st;
        err = node_fstat(&fs->nodes, n, &st);
        if (!err) {
            node_open_count(&fs->nodes, n, 1);
            d->counted = true;
        }
        if (!err && fs->entry_timeout > 0) {
            /* The kernel may keep this directory's listing across opens while
             * its mtime is what the last open saw: changes through the mount
             * invalidate the kernel's copy themselves, changes behind its back
             * move the mtime (stat'ed before the listing is read). */
            fi->cache_readdir = 1;
            fi->keep_cache = node_unchanged_since_open(&fs->nodes, n, &st);
        }
    }
    if (err) {
        dirhandle_free(fs, d);
        return err;
    }
    HandleRec rec = {.node = node_ino(&fs->nodes, n), .flags = fi->flags};
    fi->fh = handle_register(fs, d, HANDLE_DIR, &rec);
    if (!fi->fh) {
        dirhandle_free(fs, d);
        return -ENFILE;
    }
    return 0;
}

/* A directory a previous daemon had open (handles.c): its stream opens at
 * the next readdir and seeks to the kernel's offset; a views listing or
 * the root's snapshot is taken again. */
static void *dirhandle_revive(struct ckptfs *fs, Node *n, const HandleRec *rec)
{
    (void)rec;
    DirHandle *d = g_new0(DirHandle, 1);
    d->node = n;
    d->sync_fd = -1;
    if (n->kind == NODE_BACKING) {
        node_open_count(&fs->nodes, n, 1);
        d->counted = true;
        if (n == fs->nodes.root && dirhandle_stream(fs, d) == 0) {
            d->root = g_array_new(FALSE, FALSE, sizeof(RootEntry));
            snapshot_root(fs, d->dp, d->root);
        }
    }
    return d;
}

const HandleType dir_handle_type = {dirhandle_free, dirhandle_revive};

/* The parked listing of ino, taken out of the park (NULL: none).  A slot
 * matches by node id only: ids are never reused, so a match is a node the
 * kernel holds now. */
static DirHandle *dirpark_take(struct ckptfs *fs, fuse_ino_t ino)
{
    DirPark *p = &fs->dirpark;
    DirHandle *d = NULL;
    g_mutex_lock(&p->lock);
    for (unsigned i = 0; i < DIRPARK_SLOTS && !d; i++)
        if (p->slot[i].dir && p->slot[i].ino == ino) {
            d = p->slot[i].dir;
            p->slot[i].dir = NULL;
        }
    g_mutex_unlock(&p->lock);
    return d;
}

/* A parked handle freed out of the park: the kernel may have forgotten
 * its node meanwhile (a views node is then freed, and its handle must
 * not touch it). */
static void dirpark_free(struct ckptfs *fs, DirHandle *d)
{
    if (d->views)
        views_dir_detach(d->views);
    dirhandle_free(fs, d);
}

static void dirpark_put(struct ckptfs *fs, fuse_ino_t ino, DirHandle *d)
{
    DirPark *p = &fs->dirpark;
    DirHandle *out = NULL;
    g_mutex_lock(&p->lock);
    unsigned i = 0;
    while (i < DIRPARK_SLOTS && p->slot[i].dir)
        i++;
    if (i == DIRPARK_SLOTS) {
        i = p->next++ % DIRPARK_SLOTS;
        out = p->slot[i].dir;
    }
    p->slot[i].ino = ino;
    p->slot[i].dir = d;
    g_mutex_unlock(&p->lock);
    if (out)
        dirpark_free(fs, out); /* closedir outside the lock */
}

void dirpark_clear(struct ckptfs *fs)
{
    for (unsigned i = 0; i < DIRPARK_SLOTS; i++)
        if (fs->dirpark.slot[i].dir)
            dirpark_free(fs, g_steal_pointer(&fs->dirpark.slot[i].dir));
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_OPENDIR);
    int err = do_opendir(fs, node_by_ino(fs, ino), fi);
    if (err)
        reply_err(fs, req, err);
    else if (fuse_reply_open(req, fi) != 0)
        handle_close(fs, fi->fh); /* the kernel did not take it */
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
    if (is_dot_or_dotdot(name) ||
        (dir->kind == NODE_BACKING && node_find_backing(&fs->nodes, dir->key.dev, ino))) {
        /* The kernel ignores "." and "..".  An object the kernel has already
         * (created or looked up through the mount) goes without attributes
         * (nodeid 0): no lookup here, no inode work in the kernel, and a
         * stat of it revalidates as it would anyway.  A walk right after
         * the files were made costs the names alone. */
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
            node_forget(&fs->nodes, node_by_ino(fs, e.ino), 1);
        return 0;
    }
    return len;
}

/* Fills buf (size bytes) with the entries of directory ino from offset
 * off; *used: the bytes filled, sent even when an error came after some
 * (their lookup references cannot be given back once they are in buf). */
static int do_readdir(struct ckptfs *fs, fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi, bool plus, char *buf, size_t *used_out)
{
    Node *dir = node_by_ino(fs, ino);
    bool unopened = fi->fh == 0 && fs->no_opendir;
    DirHandle *d = unopened ? dirpark_take(fs, ino) : dir_of(fs, fi);
    int err = 0;
    if (unopened && off == 0 && d) {
        dirhandle_free(fs, d); /* a new listing begins */
        d = NULL;
    }
    if (unopened && !d)
        err = dirhandle_new(fs, dir, &d);
    else if (!d)
        err = -EBADF;
    if (err)
        return err;
    size_t used = 0;
    if (dir->kind != NODE_BACKING && !d->views) {
        /* taken over from a previous daemon: the listing is taken again */
        void *vh = NULL;
        if ((err = views_opendir(fs, dir, &vh)) == 0 &&
            !g_atomic_pointer_compare_and_exchange(&d->views, NULL, vh))
            views_releasedir(fs, vh);
    }

    /* No lock: the kernel sends one READDIR at a time per open directory
     * (getdents holds the file's f_pos lock), and fsyncdir touches only
     * sync_fd. */
    if (err) {
        /* the listing could not be taken again */
    } else if (d->views) {
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
    } else if (!(err = dirhandle_stream(fs, d))) {
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

    if (unopened) {
        /* an empty answer is the end of the listing: nothing goes on from it */
        if (used > 0)
            dirpark_put(fs, ino, d);
        else
            dirhandle_free(fs, d);
    }
    *used_out = used;
    return err;
}

/* The one reply of a readdir: an error after some entries went into the
 * buffer cannot be reported without losing their lookup references, so
 * what is there is sent. */
static void reply_dir(struct ckptfs *fs, fuse_req_t req, int err, const char *buf, size_t used)
{
    if (err && used == 0)
        reply_err(fs, req, err);
    else
        fuse_reply_buf(req, buf, used);
}

/* READDIR and READDIRPLUS, one handler. */
static void readdir_handler(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                            struct fuse_file_info *fi, bool plus)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, plus ? FS_OP_READDIRPLUS : FS_OP_READDIR);
    g_autofree char *buf = g_malloc(size);
    size_t used = 0;
    int err = do_readdir(fs, req, ino, size, off, fi, plus, buf, &used);
    reply_dir(fs, req, err, buf, used);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    readdir_handler(req, ino, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    readdir_handler(req, ino, size, off, fi, true);
}

static int do_releasedir(struct ckptfs *fs, struct fuse_file_info *fi)
{
    handle_close(fs, fi->fh);
    return 0;
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    (void)ino;
    fs_metric_op(fs->metrics, FS_OP_RELEASEDIR);
    reply_err(fs, req, do_releasedir(fs, fi));
}

static int do_fsyncdir(struct ckptfs *fs, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    if (fi->fh == 0 && fs->no_opendir) {
        /* no handle (no OPENDIR): a descriptor for this call; views are read-only */
        Node *n = node_by_ino(fs, ino);
        int err = 0;
        if (n->kind == NODE_BACKING) {
            int fd = node_open(&fs->nodes, n, O_RDONLY | O_DIRECTORY);
            err = fd < 0 ? fd : sync_fd(fd, datasync);
            if (fd >= 0)
                close(fd);
        }
        return err;
    }
    DirHandle *d = dir_of(fs, fi);
    int err = d ? 0 : -EBADF;
    if (d && d->counted) {
        /* a descriptor of its own, kept for the next fsyncdir (a commit
         * loop syncs one open directory again and again) */
        int fd = g_atomic_int_get(&d->sync_fd);
        if (fd < 0) {
            fd = node_open(&fs->nodes, d->node, O_RDONLY | O_DIRECTORY);
            /* two fsyncdir at once: one descriptor is kept, the other closed */
            if (fd >= 0 && !g_atomic_int_compare_and_exchange(&d->sync_fd, -1, fd)) {
                close(fd);
                fd = g_atomic_int_get(&d->sync_fd);
            }
        }
        err = fd < 0 ? fd : sync_fd(fd, datasync);
    }
    return err;
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_FSYNCDIR);
    reply_err(fs, req, do_fsyncdir(fs, ino, datasync, fi));
}
