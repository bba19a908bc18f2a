/* The views dir (ckptfs(8) THE VIEWS): .collisions, .metrics, .control and
 * one directory per job of the catalog; the per-job trees are jobviews.c's,
 * the catalog's upkeep catalog_watch.c's, the state they share
 * viewstate.c's.  This file dispatches the requests the handlers send (to
 * jobviews.c below the views dir), hands writes through the mount to
 * catalog_watch.c and serves the provenance xattrs; jobviews.c and
 * catalog_watch.c never call back into it. */
#include "views.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify.h"
#include "control.h"
#include "resolve.h"
#include "views-private.h"

#define XATTR_SOURCE     "user.ckptfs.source"
#define XATTR_BACKING    "user.ckptfs.backing"
#define XATTR_GENERATION "user.ckptfs.generation"

/* ---- set-up ---- */

int views_init(struct ckptfs *fs)
{
    Views *v = viewstate_new(fs);
    fs->views = v;
    node_table_set_view_free(&fs->nodes, vnode_free);
    atomic_store(&fs->metrics->catalog_jobs, v->early_names->len);
    return 0;
}

int views_start(struct ckptfs *fs)
{
    int err = catalog_watch_start(fs);
    if (err)
        viewstate_end_load(views_of(fs)); /* no catalog: requests must not wait for one */
    return err;
}

void views_stop(struct ckptfs *fs)
{
    if (fs->views)
        catalog_watch_stop(fs);
}

void views_destroy(struct ckptfs *fs)
{
    Views *v = views_of(fs);
    if (!v)
        return;
    catalog_watch_stop(fs);
    viewstate_free(v);
    fs->views = NULL;
}

/* ---- the views dir, .collisions, .metrics ---- */

static int lookup_inner(struct ckptfs *fs, Node *parent, const char *name,
                        struct fuse_entry_param *e);
static int top_lookup(struct ckptfs *fs, VnKind k, const char *vkey, struct fuse_entry_param *e);

/* Looks the views path of vkey up from the views dir, as the kernel would:
 * every node on the way that a previous daemon left gets its VNode back
 * (node_get_virtual fills it).  An alias's key is its path after the
 * "#dev:ino#" prefix; if the object there changed, the old node stays
 * without a VNode (ESTALE) and the kernel looks again. */
static void revive_path(struct ckptfs *fs, const char *vkey)
{
    const char *path = node_vkey_path(vkey);
    struct fuse_entry_param e;
    if (top_lookup(fs, VN_ROOT, "", &e) != 0)
        return;
    Node *cur = node_of(&fs->nodes, e.ino);
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    for (guint i = 0; path[0] && parts[i]; i++) {
        int err = lookup_inner(fs, cur, parts[i], &e);
        node_forget(&fs->nodes, cur, 1);
        if (err || e.ino == 0)
            return;
        cur = node_of(&fs->nodes, e.ino);
    }
    node_forget(&fs->nodes, cur, 1);
}

/* A views node's VNode.  A node a daemon that took over the connection
 * found in the state memfd has none until its path is looked up again
 * (which may wait for the catalog to load). */
static VNode *vn_of(struct ckptfs *fs, Node *n)
{
    if (!n->view)
        return NULL; /* a backing node, or one revived without its key */
    VNode *vn = g_atomic_pointer_get(&n->view->vdata);
    if (vn)
        return vn;
    revive_path(fs, n->view->vkey);
    return g_atomic_pointer_get(&n->view->vdata);
}

static ino_t top_vino(VnKind k)
{
    return k == VN_ROOT         ? VINO_DIR
           : k == VN_COLLISIONS ? VINO_COLLISIONS
           : k == VN_CONTROL    ? VINO_CONTROL
                                : VINO_METRICS;
}

/* wait: a read of .metrics (may wait a little for a catalog still loading);
 * a lookup or getattr (its size, say, in a readdirplus of the views dir)
 * never waits. */
static GBytes *snapshot(struct ckptfs *fs, VnKind k, bool wait)
{
    if (k == VN_COLLISIONS)
        return ck_collision_log_snapshot(fs->collisions);
    if (k == VN_CONTROL)
        return control_text(fs);
    catalog_watch_load_gauges(fs, wait);
    StateHeader *h = fs->state.hdr;
    FsMetricsMount mnt = {.mount = fs->mountpoint,
                          .nodes = node_table_count(&fs->nodes),
                          .attaches = atomic_load(&h->attaches),
                          .failed_starts = atomic_load(&h->failed_starts),
                          .give_ups = atomic_load(&h->give_ups),
                          .started_us = fs->started_us,
                          .ring = kio_ring(&fs->kio),
                          .ring_requests = kio_ring_requests(&fs->kio)};
    GString *s = fs_metrics_render(fs->metrics, &mnt);
    return g_string_free_to_bytes(s);
}

static void fill_stat(struct ckptfs *fs, VnKind k, struct stat *st)
{
    switch (k) {
    case VN_ROOT:
        views_dir_attr(fs, VINO_DIR, st);
        break;
    default: {
        views_dir_attr(fs, top_vino(k), st);
        st->st_mode = S_IFREG | 0444;
        if (k == VN_CONTROL) {
            /* written (lines or xattrs) by root and the daemon's user alone */
            st->st_mode = S_IFREG | 0644;
            st->st_uid = fs->euid;
            st->st_gid = fs->egid;
        }
        st->st_nlink = 1;
        g_autoptr(GBytes) b = snapshot(fs, k, false);
        st->st_size = (off_t)g_bytes_get_size(b);
        st->st_blocks = (st->st_size + 511) / 512;
        /* the time of the newest record, not now: a file whose mtime moves
         * while nothing changed makes tar fail ("file changed as we read it") */
        gint64 last = k == VN_COLLISIONS ? ck_collision_log_last_time(fs->collisions) : 0;
        if (last > 0) {
            st->st_mtim.tv_sec = last / G_USEC_PER_SEC;
            st->st_mtim.tv_nsec = (last % G_USEC_PER_SEC) * 1000;
            st->st_ctim = st->st_mtim;
        }
        break;
    }
    }
}

void views_dir_stat(struct ckptfs *fs, struct stat *st)
{
    fill_stat(fs, VN_ROOT, st);
}

static void make_top(Node *n, void *ctx)
{
    VnKind k = (VnKind)GPOINTER_TO_INT(ctx);
    n->kind = NODE_VIRTUAL;
    n->type = k == VN_ROOT ? S_IFDIR : S_IFREG;
    n->view->vdata = vnode_new(k, NULL, NULL);
    n->view->vino = top_vino(k);
}

static int top_lookup(struct ckptfs *fs, VnKind k, const char *vkey, struct fuse_entry_param *e)
{
    Node *n = node_get_virtual(&fs->nodes, vkey, make_top, GINT_TO_POINTER(k));
    memset(e, 0, sizeof *e);
    fill_stat(fs, k, &e->attr);
    e->ino = node_ino(&fs->nodes, n);
    e->generation = n->generation;
    /* the files change with every request: never cache their attributes */
    e->attr_timeout = k == VN_ROOT ? views_stable_timeout(views_of(fs)) : 0.0;
    e->entry_timeout = 1.0;
    return 0;
}

static int lookup_inner(struct ckptfs *fs, Node *parent, const char *name,
                        struct fuse_entry_param *e)
{
    if (parent == fs->nodes.root)
        return strcmp(name, fs->opt.views_name) == 0 ? top_lookup(fs, VN_ROOT, "", e) : -ENOENT;
    VNode *pv = parent->kind == NODE_VIRTUAL ? vn_of(fs, parent) : NULL;
    if (!pv)
        return parent->kind == NODE_VIRTUAL ? -ESTALE : -ENOTDIR;
    if (pv->kind == VN_ROOT && strcmp(name, ".collisions") == 0)
        return top_lookup(fs, VN_COLLISIONS, ".collisions", e);
    if (pv->kind == VN_ROOT && strcmp(name, ".metrics") == 0)
        return top_lookup(fs, VN_METRICS, ".metrics", e);
    if (pv->kind == VN_ROOT && strcmp(name, ".control") == 0)
        return top_lookup(fs, VN_CONTROL, ".control", e);
    /* an entry looked up again: the kernel's listing may be older than
     * its entries (a previous daemon gave it); drop it in time too */
    if (pv->kind == VN_TREE)
        catalog_watch_lag_listing(fs, node_ino(&fs->nodes, parent));
    return jv_lookup(fs, parent, pv, name, e);
}

int views_lookup(struct ckptfs *fs, Node *parent, const char *name, struct fuse_entry_param *e)
{
    atomic_fetch_add_explicit(&fs->metrics->views_served, 1, memory_order_relaxed);
    int err = lookup_inner(fs, parent, name, e);
    if (err == -ENOENT) {
        /* a negative entry the kernel does not keep: a name may appear any moment */
        memset(e, 0, sizeof *e);
        return 0;
    }
    return err;
}

int views_getattr(struct ckptfs *fs, Node *n, struct stat *st, double *timeout)
{
    VNode *vn = vn_of(fs, n);
    if (!vn)
        return -ESTALE;
    switch (vn->kind) {
    case VN_ROOT:
    case VN_COLLISIONS:
    case VN_METRICS:
    case VN_CONTROL:
        fill_stat(fs, vn->kind, st);
        *timeout = vn->kind == VN_ROOT ? views_stable_timeout(views_of(fs)) : 0.0;
        return 0;
    default:
        return jv_getattr(fs, n, vn, st, timeout);
    }
}

int views_readlink(struct ckptfs *fs, Node *n, char **target)
{
    VNode *vn = vn_of(fs, n);
    if (!vn || vn->kind != VN_LATEST)
        return -EINVAL;
    return jv_readlink(fs, n, vn, target);
}

/* ---- directories ---- */

static void viewsdir_free(ViewsDir *d)
{
    if (!d)
        return;
    for (guint i = 0; i < d->ents->len; i++)
        if (!g_array_index(d->ents, VEnt, i).borrowed)
            g_free(g_array_index(d->ents, VEnt, i).name);
    g_array_unref(d->ents);
    if (d->listing && d->vn)
        jv_listing_done(d->vn, d->listing);
    else if (d->listing)
        listing_unref(d->listing);
    if (d->jv)
        jobview_unref(d->jv);
    for (guint i = 0; i < d->n_layer_fds; i++)
        if (d->layer_fds[i] >= 0)
            close(d->layer_fds[i]);
    g_free(d->layer_fds);
    g_free(d);
}

/* The job names of the views dir.  Once the catalog is loaded, the list
 * and its inode numbers are kept until a job comes or goes (an opendir of
 * 10,000 jobs then copies nothing), and the kernel may keep its copy while
 * it is that list. */
static void root_listing(struct ckptfs *fs, ViewsDir *d)
{
    Views *v = views_of(fs);
    CkCatalog *c = views_catalog_if_loaded(fs);
    if (!c) {
        g_autoptr(GPtrArray) names = views_job_names(fs);
        for (guint i = 0; i < names->len; i++)
            vent_add(d, names->pdata[i], views_vino(fs, names->pdata[i]), DT_DIR);
        return;
    }
    guint64 ver = ck_catalog_names_version(c); /* before the names: never newer than them */
    g_mutex_lock(&v->lock);
    bool fresh = v->root_names && v->root_version == ver;
    g_mutex_unlock(&v->lock);
    if (!fresh) {
        GPtrArray *names = ck_catalog_job_names(c);
        GArray *inos = g_array_sized_new(FALSE, FALSE, sizeof(ino_t), names->len);
        for (guint i = 0; i < names->len; i++) {
            ino_t ino = views_vino(fs, names->pdata[i]);
            g_array_append_val(inos, ino);
        }
        g_mutex_lock(&v->lock);
        if (!v->root_names || v->root_version < ver) {
            if (v->root_names)
                g_ptr_array_unref(v->root_names);
            if (v->root_inos)
                g_array_unref(v->root_inos);
            v->root_names = g_steal_pointer(&names);
            v->root_inos = g_steal_pointer(&inos);
            v->root_version = ver;
        }
        g_mutex_unlock(&v->lock);
        if (names)
            g_ptr_array_unref(names);
        if (inos)
            g_array_unref(inos);
    }
    g_mutex_lock(&v->lock);
    g_autoptr(GPtrArray) names = g_ptr_array_ref(v->root_names);
    g_autoptr(GArray) inos = g_array_ref(v->root_inos);
    guint64 have = v->root_version;
    d->cacheable = true;
    d->keep_cache = v->root_given == have + 1;
    v->root_given = have + 1;
    g_mutex_unlock(&v->lock);
    for (guint i = 0; i < names->len; i++) {
        /* interned: borrowed, never freed */
        VEnt e = {names->pdata[i], g_array_index(inos, ino_t, i), DT_DIR, true, NULL, -1};
        g_array_append_val(d->ents, e);
    }
}

int views_opendir(struct ckptfs *fs, Node *n, void **dh)
{
    VNode *vn = vn_of(fs, n);
    if (n->kind != NODE_VIRTUAL || !vn || n->type != S_IFDIR)
        return -ENOTDIR;
    ViewsDir *d = g_new0(ViewsDir, 1);
    d->ents = g_array_new(FALSE, FALSE, sizeof(VEnt));
    vent_add(d, ".", n->view->vino, DT_DIR);
    vent_add(d, "..", n->view->vino, DT_DIR);
    int err = 0;
    if (vn->kind == VN_ROOT) {
        vent_add(d, ".collisions", VINO_COLLISIONS, DT_REG);
        vent_add(d, ".metrics", VINO_METRICS, DT_REG);
        vent_add(d, ".control", VINO_CONTROL, DT_REG);
        root_listing(fs, d);
    } else {
        err = jv_opendir(fs, n, vn, d);
    }
    if (err) {
        viewsdir_free(d);
        return err;
    }
    atomic_fetch_add_explicit(&fs->metrics->views_served, 1, memory_order_relaxed);
    *dh = d;
    return 0;
}

ssize_t views_readdir(struct ckptfs *fs, fuse_req_t req, Node *n, void *dh, char *buf, size_t size,
                      off_t off, bool plus)
{
    ViewsDir *d = dh;
    size_t used = 0;
    /* catalog_watch_lag_listing says why this window */
    gint64 keep_us = VIEWS_TIMEOUT_PCT_US(views_of(fs), 100 - ENTRY_FRESH_PCT);
    /* a listing read from its start that a change behind the mount can
     * make stale with no directory changing: a tree's, and a job's own two
     * (a marker rewritten in place, jobview_get); the views dir's follows
     * the job list, which inotify and the sweeps see */
    const VNode *vn = vn_of(fs, n);
    if (off == 0 && (d->jv || (vn && (vn->kind == VN_JOB || vn->kind == VN_CKPTS))))
        catalog_watch_lag_listing(fs, node_ino(&fs->nodes, n));
    for (guint i = (guint)off; i < d->ents->len; i++) {
        const VEnt *ve = &g_array_index(d->ents, VEnt, i);
        bool dots = i < 2;
        size_t len;
        if (plus) {
            struct fuse_entry_param e;
            memset(&e, 0, sizeof e);
            gint64 expires = ve->expires ? __atomic_load_n(ve->expires, __ATOMIC_RELAXED) : 0;
            if (dots || (expires && expires - g_get_monotonic_time() > keep_us)) {
                /* no attributes (nodeid 0): the kernel's entry, given out
                 * moments ago, is still valid; a walk that re-reads a tree
                 * costs no lookup per entry */
                e.attr.st_mode = (mode_t)DTTOIF(ve->type);
                e.attr.st_ino = ve->ino;
                dots = true;
            } else {
                int err = ve->lidx >= 0 && d->jv ? jv_readdir_entry(fs, d, (guint)ve->lidx, &e)
                                                 : lookup_inner(fs, n, ve->name, &e);
                if (err || e.ino == 0)
                    continue; /* gone since opendir */
            }
            len = fuse_add_direntry_plus(req, buf + used, size - used, ve->name, &e, i + 1);
            if (len > size - used) {
                if (!dots)
                    node_forget(&fs->nodes, node_of(&fs->nodes, e.ino), 1);
                break;
            }
        } else {
            struct stat st = {0};
            st.st_ino = ve->ino;
            st.st_mode = (mode_t)DTTOIF(ve->type);
            len = fuse_add_direntry(req, buf + used, size - used, ve->name, &st, i + 1);
            if (len > size - used)
                break;
        }
        used += len;
    }
    return (ssize_t)used;
}

bool views_dir_cacheable(void *dh, bool *keep)
{
    ViewsDir *d = dh;
    *keep = d->keep_cache;
    return d->cacheable;
}

void views_dir_detach(void *dh)
{
    ((ViewsDir *)dh)->vn = NULL; /* its listing is then only let go of */
}

void views_releasedir(struct ckptfs *fs, void *dh)
{
    (void)fs;
    viewsdir_free(dh);
}

/* ---- files ---- */

int views_open(struct ckptfs *fs, fuse_req_t req, Node *n, int flags, ViewsOpen *out)
{
    VNode *vn = vn_of(fs, n);
    if (!vn)
        return -ESTALE;
    if (n->type == S_IFDIR)
        return -EISDIR;
    out->fd = -1;
    out->control = false;
    if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) {
        if (vn->kind != VN_CONTROL)
            return -EROFS;
        if (req && !control_may_change(req))
            return -EACCES;
        out->control = true; /* O_TRUNC: nothing to cut, the text is made at each open */
    }
    atomic_fetch_add_explicit(&fs->metrics->views_served, 1, memory_order_relaxed);
    if (vn->kind == VN_COLLISIONS || vn->kind == VN_METRICS || vn->kind == VN_CONTROL) {
        out->content = snapshot(fs, vn->kind, true);
        out->direct_io = true;
        out->keep_cache = false;
        return 0;
    }
    return jv_open(fs, n, vn, out);
}

/* ---- provenance ---- */

static bool has_xattrs(Node *n, VNode *vn)
{
    return vn && (n->type == S_IFREG || n->type == S_IFDIR) && vn->kind != VN_ROOT &&
           vn->kind != VN_COLLISIONS && vn->kind != VN_METRICS && vn->kind != VN_CONTROL;
}

/* n's provenance now (jv_provenance); a node last looked up in an older
 * snapshot of its job is looked up again first, as the kernel would.  A
 * node whose path now names another object has none. */
static void provenance(struct ckptfs *fs, Node *n, VNode *vn, ViewsProv *p)
{
    for (int tries = 0; jv_provenance(fs, n, vn, p) == -EAGAIN; tries++) {
        if (tries == 2) {
            *p = (ViewsProv){0};
            return;
        }
        revive_path(fs, node_vkey(n));
    }
}

int views_getxattr(struct ckptfs *fs, Node *n, const char *name, GBytes **value)
{
    VNode *vn = vn_of(fs, n);
    /* Entries below the views carry no security labels and can be given
     * none (read-only, as /proc's): "not supported", which `ls -l` takes
     * once per file system rather than asking again for every entry.  The
     * views dir itself answers as the backing tree around it does.  Nor
     * ACLs, the same way, where the kernel keeps none (it keeps them
     * only where it enforces them) and passes on each time `ls -l` asks
     * for an entry's (both, for a directory); where it enforces them it
     * takes "not supported" for a refusal of every access, and keeps the
     * "none" it is given. */
    bool below = vn && vn->kind != VN_ROOT;
    if (below && ((views_of(fs)->no_labels && g_str_has_prefix(name, "security.")) ||
                  (!fs->kernel_acls && g_str_has_prefix(name, "system.posix_acl_"))))
        return -EOPNOTSUPP;
    if (vn && vn->kind == VN_CONTROL)
        return control_getxattr(fs, name, value);
    /* the kernel asks for ACLs and security labels of every entry: those
     * are none, and cost no look at the job */
    if (!has_xattrs(n, vn) ||
        (strcmp(name, XATTR_SOURCE) != 0 && strcmp(name, XATTR_BACKING) != 0 &&
         strcmp(name, XATTR_GENERATION) != 0))
        return -ENODATA;
    ViewsProv p;
    provenance(fs, n, vn, &p);
    g_autofree char *backing = p.backing;
    if (strcmp(name, XATTR_SOURCE) == 0 && p.source) {
        *value = g_bytes_new_static(p.source, strlen(p.source));
        return 0;
    }
    if (strcmp(name, XATTR_BACKING) == 0 && backing) {
        gsize len = strlen(backing);
        *value = g_bytes_new_take(g_steal_pointer(&backing), len);
        return 0;
    }
    if (strcmp(name, XATTR_GENERATION) == 0 && p.has_gen) {
        char *text = g_strdup_printf("%" G_GUINT64_FORMAT, (guint64)p.gen);
        *value = g_bytes_new_take(text, strlen(text));
        return 0;
    }
    return -ENODATA;
}

int views_listxattr(struct ckptfs *fs, Node *n, GString *names)
{
    VNode *vn = vn_of(fs, n);
    if (vn && vn->kind == VN_CONTROL) {
        control_listxattr(fs, names);
        return 0;
    }
    if (!has_xattrs(n, vn))
        return 0;
    ViewsProv p;
    provenance(fs, n, vn, &p);
    if (p.source)
        g_string_append_len(names, XATTR_SOURCE, sizeof XATTR_SOURCE);
    if (p.backing)
        g_string_append_len(names, XATTR_BACKING, sizeof XATTR_BACKING);
    if (p.has_gen)
        g_string_append_len(names, XATTR_GENERATION, sizeof XATTR_GENERATION);
    g_free(p.backing);
    return 0;
}

int views_setxattr(struct ckptfs *fs, fuse_req_t req, Node *n, const char *name, const char *value,
                   size_t size)
{
    VNode *vn = vn_of(fs, n);
    if (vn && vn->kind == VN_CONTROL)
        return control_setxattr(fs, req, name, value, size);
    return -EROFS;
}

int views_write(struct ckptfs *fs, fuse_req_t req, Node *n, const char *data, size_t size)
{
    VNode *vn = vn_of(fs, n);
    if (vn && vn->kind == VN_CONTROL)
        return control_write(fs, req, data, size);
    return -EROFS;
}

int views_access(struct ckptfs *fs, fuse_req_t req, Node *n, int mask)
{
    if (!(mask & W_OK))
        return 0;
    VNode *vn = vn_of(fs, n);
    if (!vn || vn->kind != VN_CONTROL)
        return -EROFS;
    return control_may_change(req) ? 0 : -EACCES;
}

/* ---- writes through the mount that change the catalog ---- */

void views_note_change(struct ckptfs *fs, CkNs pns, CkNs child)
{
    if (!fs->views)
        return;
    /* a marker, a checkpoint or marker directory, or a job's own root */
    if (ck_ns_in_catalog(child) || (pns.kind == CK_NS_STRUCT && child.kind == CK_NS_JOB))
        catalog_watch_refresh(fs, child.job, false);
}

void views_marker_written(struct ckptfs *fs, const char *job)
{
    if (fs->views)
        catalog_watch_refresh(fs, job, true);
}
