/* First views: the views dir with .collisions and .metrics.  The per-job
 * trees (SPEC §5) extend this file. */
#include "views.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define VINO_DIR        ((ino_t)((1ull << 63) | 1))
#define VINO_COLLISIONS ((ino_t)((1ull << 63) | 2))
#define VINO_METRICS    ((ino_t)((1ull << 63) | 3))

typedef enum {
    VIEW_DIR = 1,
    VIEW_COLLISIONS,
    VIEW_METRICS,
} ViewKind;

typedef struct {
    uid_t uid;
    gid_t gid;
    struct timespec mounted;
} Views;

typedef struct {
    GPtrArray *names; /* char* */
} ViewsDir;

static ViewKind kind_of(Node *n)
{
    return (ViewKind)GPOINTER_TO_INT(n->vdata);
}

int views_init(struct ckptfs *fs)
{
    Views *v = g_new0(Views, 1);
    struct stat st;
    if (fstat(fs->root_fd, &st) == 0) {
        v->uid = st.st_uid;
        v->gid = st.st_gid;
    }
    clock_gettime(CLOCK_REALTIME, &v->mounted);
    fs->views = v;
    /* the first counters start the metrics off at the mount's state */
    (void)fs;
    return 0;
}

void views_destroy(struct ckptfs *fs)
{
    g_free(fs->views);
    fs->views = NULL;
}

static GBytes *snapshot(struct ckptfs *fs, ViewKind k)
{
    if (k == VIEW_COLLISIONS)
        return ck_collision_log_snapshot(fs->collisions);
    GString *s = fs_metrics_render(&fs->metrics, node_table_count(fs));
    return g_string_free_to_bytes(s);
}

static void fill_stat(struct ckptfs *fs, ViewKind k, struct stat *st)
{
    Views *v = fs->views;
    memset(st, 0, sizeof *st);
    st->st_uid = v->uid;
    st->st_gid = v->gid;
    st->st_atim = st->st_mtim = st->st_ctim = v->mounted;
    st->st_blksize = 4096;
    switch (k) {
    case VIEW_DIR:
        st->st_ino = VINO_DIR;
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        break;
    case VIEW_COLLISIONS:
    case VIEW_METRICS: {
        st->st_ino = k == VIEW_COLLISIONS ? VINO_COLLISIONS : VINO_METRICS;
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        g_autoptr(GBytes) b = snapshot(fs, k);
        st->st_size = (off_t)g_bytes_get_size(b);
        st->st_blocks = (st->st_size + 511) / 512;
        if (k == VIEW_COLLISIONS) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            st->st_mtim = st->st_ctim = now;
        }
        break;
    }
    }
}

void views_dir_stat(struct ckptfs *fs, struct stat *st)
{
    fill_stat(fs, VIEW_DIR, st);
}

static void make_node(Node *n, void *ctx)
{
    ViewKind k = (ViewKind)GPOINTER_TO_INT(ctx);
    n->kind = NODE_VIRTUAL;
    n->type = k == VIEW_DIR ? S_IFDIR : S_IFREG;
    n->vdata = GINT_TO_POINTER(k);
    n->vino = k == VIEW_DIR ? VINO_DIR : k == VIEW_COLLISIONS ? VINO_COLLISIONS : VINO_METRICS;
}

int views_lookup(struct ckptfs *fs, Node *parent, const char *name, struct fuse_entry_param *e)
{
    ViewKind k;
    const char *vkey;
    if (parent == fs->nodes.root && strcmp(name, fs->opt.views_name) == 0) {
        k = VIEW_DIR;
        vkey = "";
    } else if (parent->kind == NODE_VIRTUAL && kind_of(parent) == VIEW_DIR &&
               strcmp(name, ".collisions") == 0) {
        k = VIEW_COLLISIONS;
        vkey = ".collisions";
    } else if (parent->kind == NODE_VIRTUAL && kind_of(parent) == VIEW_DIR &&
               strcmp(name, ".metrics") == 0) {
        k = VIEW_METRICS;
        vkey = ".metrics";
    } else {
        return -ENOENT;
    }
    atomic_fetch_add_explicit(&fs->metrics.views_served, 1, memory_order_relaxed);
    Node *n = node_get_virtual(fs, vkey, make_node, GINT_TO_POINTER(k));
    memset(e, 0, sizeof *e);
    fill_stat(fs, k, &e->attr);
    e->ino = node_ino(&fs->nodes, n);
    e->generation = n->generation;
    /* the files change with every request: never cache their attributes */
    e->attr_timeout = k == VIEW_DIR ? 1.0 : 0.0;
    e->entry_timeout = 1.0;
    return 0;
}

int views_getattr(struct ckptfs *fs, Node *n, struct stat *st, double *timeout)
{
    ViewKind k = kind_of(n);
    fill_stat(fs, k, st);
    *timeout = k == VIEW_DIR ? 1.0 : 0.0;
    return 0;
}

int views_readlink(struct ckptfs *fs, Node *n, char **target)
{
    (void)fs;
    (void)n;
    (void)target;
    return -EINVAL;
}

int views_opendir(struct ckptfs *fs, Node *n, void **dh)
{
    (void)fs;
    if (n->kind != NODE_VIRTUAL || kind_of(n) != VIEW_DIR)
        return -ENOTDIR;
    ViewsDir *d = g_new0(ViewsDir, 1);
    d->names = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(d->names, g_strdup("."));
    g_ptr_array_add(d->names, g_strdup(".."));
    g_ptr_array_add(d->names, g_strdup(".collisions"));
    g_ptr_array_add(d->names, g_strdup(".metrics"));
    *dh = d;
    return 0;
}

ssize_t views_readdir(struct ckptfs *fs, fuse_req_t req, Node *n, void *dh, char *buf, size_t size,
                      off_t off, bool plus)
{
    ViewsDir *d = dh;
    size_t used = 0;
    for (guint i = (guint)off; i < d->names->len; i++) {
        const char *name = d->names->pdata[i];
        bool dots = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
        size_t len;
        if (plus) {
            struct fuse_entry_param e;
            memset(&e, 0, sizeof e);
            if (dots) {
                e.attr.st_mode = S_IFDIR;
                e.attr.st_ino = VINO_DIR;
            } else {
                int err = views_lookup(fs, n, name, &e);
                if (err)
                    continue;
            }
            len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
            if (len > size - used) {
                if (!dots)
                    node_forget(fs, node_of(&fs->nodes, e.ino), 1);
                break;
            }
        } else {
            struct stat st = {0};
            if (dots) {
                st.st_mode = S_IFDIR;
                st.st_ino = VINO_DIR;
            } else {
                st.st_mode = S_IFREG;
                st.st_ino = strcmp(name, ".collisions") == 0 ? VINO_COLLISIONS : VINO_METRICS;
            }
            len = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
            if (len > size - used)
                break;
        }
        used += len;
    }
    return (ssize_t)used;
}

void views_releasedir(struct ckptfs *fs, void *dh)
{
    (void)fs;
    ViewsDir *d = dh;
    if (!d)
        return;
    g_ptr_array_unref(d->names);
    g_free(d);
}

int views_open(struct ckptfs *fs, Node *n, int flags, ViewsOpen *out)
{
    (void)flags;
    ViewKind k = kind_of(n);
    if (k == VIEW_DIR)
        return -EISDIR;
    atomic_fetch_add_explicit(&fs->metrics.views_served, 1, memory_order_relaxed);
    out->fd = -1;
    out->content = snapshot(fs, k);
    out->direct_io = true;
    out->keep_cache = false;
    return 0;
}

int views_getxattr(struct ckptfs *fs, Node *n, const char *name, GBytes **value)
{
    (void)fs;
    (void)n;
    (void)name;
    (void)value;
    return -ENODATA;
}

int views_listxattr(struct ckptfs *fs, Node *n, GString *names)
{
    (void)fs;
    (void)n;
    (void)names;
    return 0;
}

void views_note_change(struct ckptfs *fs, CkNs pns, const char *name)
{
    (void)fs;
    (void)pns;
    (void)name;
}

const char *views_marker_job(struct ckptfs *fs, Node *n, int fd)
{
    (void)fs;
    (void)n;
    (void)fd;
    return NULL;
}

void views_marker_written(struct ckptfs *fs, const char *job)
{
    (void)fs;
    (void)job;
}
