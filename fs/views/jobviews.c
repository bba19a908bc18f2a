/* The per-job trees of the views (ckptfs(8) THE VIEWS):
 *
 *   <J>/state/...             ck_job_state_layers, merged per directory
 *   <J>/checkpoints/<N>/...   ck_job_checkpoint_layers (or only ERROR)
 *   <J>/latest                -> checkpoints/<latest restorable N>
 *   <J>/restore               ck_job_restore_text
 *
 * A tree directory at path `rel` lists, for each layer in order, the backing
 * directory the layer maps `rel` to (when `rel` is at or below its prefix)
 * or the next component of its prefix (when the prefix is below `rel`).  The
 * first layer naming an entry decides what it is: a directory (virtual; the
 * layers merge again one level down) or a backing non-directory (an alias
 * node), so an own entry shadows a legacy one of the same name.
 *
 * Backing objects are opened beneath the backing root (or beneath the
 * external_root prefix's descriptor) with RESOLVE_NO_SYMLINKS: a view never
 * follows a symlink anywhere, and a symlink in a tree is shown as itself.
 *
 * A directory's merged listing is cached in its VNode, keyed by the job
 * snapshot's version, and revalidated against the (ino, mtime) of the
 * backing directories it read at most once per half views timeout (and
 * always before answering "no such entry"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify.h"
#include "decimal.h"
#include "intern.h"
#include "layout.h"
#include "resolve.h"
#include "views-private.h"

typedef struct {
    ino_t ino;           /* backing st_ino / d_ino (non-directories) */
    gint64 expires_us;   /* atomic: when the entry a lookup last gave the kernel expires */
    guint32 name;        /* offset in the listing's names (lent_name) */
    gint16 layer;        /* -1: the ERROR file */
    unsigned char type;  /* DT_* */
    bool layer_root : 1; /* the entry is its layer's root (prefix's last component) */
    bool synth : 1;      /* an intermediate component of a layer's prefix */
} LEnt;

/* A backing directory the listing read: the layer's path for the listed
 * directory, derived again from the layer when checked. */
typedef struct {
    int layer;
    dev_t dev;
    ino_t ino;
    gint64 mtime_ns;
} LStamp;

/* One allocation: this header, then the entries, the stamps and the
 * names.  A find keeps the listing of every directory it walked, so a
 * listing is sized to what it holds (most hold one or two entries): a
 * GArray each, a string per name and a path per stamp cost about 160
 * bytes more a directory, a GLib rc box's header and pointers to the
 * parts 48 more. */
struct Listing {
    /* a fingerprint of the entries: built again with the same entries, a
     * listing has the same one, so the directory's mtime stays and the
     * kernel keeps its copy (a listing is dropped when its handle goes) */
    guint64 serial;
    guint64 version;
    gint64 checked_us; /* atomic */
    /* name -> index + 1, once there are more than LISTING_SCANNED entries
     * (NULL below: most view directories hold a few, and a hash table costs
     * more than the entries); read-only once the listing is built */
    GHashTable *idx;
    gatomicrefcount ref;
    guint n_stamps, n_ents;
    LEnt ents[];
};

#define LISTING_SCANNED 16
/* the entries and then the stamps follow the header in one block: each
 * entry's atomic expires_us and each stamp 8-aligned */
G_STATIC_ASSERT(offsetof(Listing, ents) % 8 == 0 && sizeof(LEnt) % 8 == 0 &&
                offsetof(LEnt, expires_us) % 8 == 0 && G_ALIGNOF(LStamp) <= 8);

static LStamp *listing_stamps(const Listing *l)
{
    return (LStamp *)(void *)(l->ents + l->n_ents);
}

static const char *lent_name(const Listing *l, const LEnt *e)
{
    return (const char *)(listing_stamps(l) + l->n_stamps) + e->name;
}

/* The index of checkpoint n in j->checkpoints (ascending), or -1. */
static int checkpoint_index(const CkJobInfo *j, guint64 n)
{
    guint lo = 0, hi = j->checkpoints->len;
    while (lo < hi) {
        guint mid = (lo + hi) / 2;
        guint64 m = ((CkCheckpointInfo *)j->checkpoints->pdata[mid])->n;
        if (m == n)
            return (int)mid;
        if (m < n)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static GPtrArray *tree_layers(JobView *jv, const VNode *vn, const CkCheckpointInfo **cp)
{
    *cp = NULL;
    if (!vn->ckpt)
        return jv->state_layers;
    int i = checkpoint_index(jv->j, vn->n);
    if (i < 0)
        return NULL;
    *cp = jv->j->checkpoints->pdata[i];
    return jv->ckpt_layers->pdata[i];
}

/* ---- backing objects ---- */

static char *layer_path(const CkLayer *l, const char *sub)
{
    if (!sub || !sub[0])
        return g_strdup(l->backing);
    if (!l->backing[0])
        return g_strdup(sub);
    return g_strconcat(l->backing, "/", sub, NULL);
}

/* Opens a layer's backing path (local: beneath the backing root; external:
 * beneath the allowed prefix, as the resolver does), never through a
 * symlink.  -errno on failure. */
static int backing_open(struct ckptfs *fs, const CkLayer *l, const char *path, int flags)
{
    if (l->local)
        return ck_open_beneath(fs->root_fd, path, flags, NULL);
    return ck_open_external(views_of(fs)->ext_prefixes, path, flags, NULL);
}

static gint64 mtime_ns(const struct stat *sb)
{
    return (gint64)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

static unsigned char dt_of(mode_t m)
{
    return (unsigned char)IFTODT(m & S_IFMT);
}

/* ---- listings ---- */

static Listing *listing_ref(Listing *l)
{
    g_atomic_ref_count_inc(&l->ref);
    return l;
}

/* The index + 1 of entry `name`, 0 when there is none. */
static guint listing_find(const Listing *l, const char *name)
{
    if (l->idx)
        return GPOINTER_TO_UINT(g_hash_table_lookup(l->idx, name));
    for (guint i = 0; i < l->n_ents; i++)
        if (strcmp(lent_name(l, &l->ents[i]), name) == 0)
            return i + 1;
    return 0;
}

void listing_unref(Listing *l)
{
    if (!l || !g_atomic_ref_count_dec(&l->ref))
        return;
    if (l->idx)
        g_hash_table_unref(l->idx);
    g_free(l);
}

/* ---- nodes' data ---- */

VNode *vnode_new(VnKind kind, const char *job, const char *rel)
{
    size_t rl = rel ? strlen(rel) : 0;
    VNode *vn = g_malloc0(sizeof *vn + rl + 1);
    if (rl)
        memcpy(vn->rel, rel, rl);
    vn->kind = kind;
    vn->job = job;
    vn->layer = -1;
    g_mutex_init(&vn->lock);
    return vn;
}

void vnode_free(gpointer p)
{
    VNode *vn = p;
    if (!vn)
        return;
    if (vn->listing)
        listing_unref(vn->listing);
    g_mutex_clear(&vn->lock);
    g_free(vn);
}

/* A listing being built: entries (their names as offsets into `names`,
 * as in the listing) and stamps, then listing_make. */
typedef struct {
    GArray *ents;     /* LEnt */
    GArray *stamps;   /* LStamp */
    GString *names;   /* each name and its NUL */
    GHashTable *seen; /* the names (g_strdup) once past LISTING_SCANNED entries */
} ListingBuild;

static const char *build_name(const ListingBuild *b, guint i)
{
    return b->names->str + g_array_index(b->ents, LEnt, i).name;
}

static bool build_has(const ListingBuild *b, const char *name)
{
    if (b->seen)
        return g_hash_table_contains(b->seen, name);
    for (guint i = 0; i < b->ents->len; i++)
        if (strcmp(build_name(b, i), name) == 0)
            return true;
    return false;
}

static void listing_add(ListingBuild *b, const char *name, unsigned char type, int layer,
                        bool layer_root, bool synth, ino_t ino)
{
    if (build_has(b, name))
        return; /* an earlier layer's entry shadows it (directories merge one level down) */
    if (b->names->len > G_MAXUINT32 - NAME_MAX - 1)
        return; /* past 4 GiB of names in one directory: the rest is not shown */
    LEnt e = {.ino = ino,
              .name = (guint32)b->names->len,
              .layer = (gint16)layer,
              .type = type,
              .layer_root = layer_root,
              .synth = synth};
    g_string_append_len(b->names, name, (gssize)strlen(name) + 1);
    g_array_append_val(b->ents, e);
    if (b->seen) {
        g_hash_table_add(b->seen, g_strdup(name));
    } else if (b->ents->len > LISTING_SCANNED) {
        b->seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        for (guint i = 0; i < b->ents->len; i++)
            g_hash_table_add(b->seen, g_strdup(build_name(b, i)));
    }
}

/* The listing of what b gathered; b's members are freed. */
static Listing *listing_make(ListingBuild *b, guint64 serial, guint64 version, gint64 checked_us)
{
    gsize ss = b->stamps->len * sizeof(LStamp), es = b->ents->len * sizeof(LEnt);
    Listing *l = g_malloc0(sizeof(Listing) + es + ss + b->names->len);
    g_atomic_ref_count_init(&l->ref);
    l->serial = serial;
    l->version = version;
    l->checked_us = checked_us;
    l->n_stamps = b->stamps->len;
    l->n_ents = b->ents->len;
    if (es)
        memcpy(l->ents, b->ents->data, es);
    if (ss)
        memcpy(listing_stamps(l), b->stamps->data, ss);
    if (b->names->len)
        memcpy((char *)(listing_stamps(l) + l->n_stamps), b->names->str, b->names->len);
    if (l->n_ents > LISTING_SCANNED) {
        l->idx = g_hash_table_new(g_str_hash, g_str_equal);
        for (guint i = 0; i < l->n_ents; i++)
            g_hash_table_insert(l->idx, (gpointer)lent_name(l, &l->ents[i]),
                                GUINT_TO_POINTER(i + 1));
    }
    g_array_unref(b->ents);
    g_array_unref(b->stamps);
    g_string_free(b->names, TRUE);
    if (b->seen)
        g_hash_table_unref(b->seen);
    return l;
}

/* rel is `prefix` or below it: the part below, else NULL. */
static const char *below_prefix(const char *rel, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (pl == 0)
        return rel;
    if (strncmp(rel, prefix, pl) != 0)
        return NULL;
    if (rel[pl] == '\0')
        return rel + pl;
    return rel[pl] == '/' ? rel + pl + 1 : NULL;
}

/* prefix is strictly below rel: the rest of prefix after rel, else NULL. */
static const char *prefix_below(const char *rel, const char *prefix)
{
    size_t rl = strlen(rel);
    if (rl == 0)
        return prefix[0] ? prefix : NULL;
    if (strncmp(prefix, rel, rl) != 0 || prefix[rl] != '/')
        return NULL;
    return prefix + rl + 1;
}

/* The backing path layer ly maps tree path rel to (g_free), NULL when rel
 * is not at or below the layer's prefix (a component of the prefix has no
 * object of its own). */
static char *layer_rel_path(const CkLayer *ly, const char *rel)
{
    const char *sub = below_prefix(rel, ly->prefix);
    return sub ? layer_path(ly, sub) : NULL;
}

/* The backing path shown as rel's provenance (g_free): layer_rel_path, or,
 * for a directory the layer's prefix passes through (state/v<G> above a
 * legacy v<G>/<S>, or state/ itself), the backing directory as many levels
 * up when its last components are the prefix's: "." for the checkpoint
 * directory itself (where the older layout's <S>, shown at v<G>/<S>, are);
 * NULL when they are not. */
static char *layer_shown_path(const CkLayer *ly, const char *rel)
{
    char *path = layer_rel_path(ly, rel);
    if (path)
        return path;
    const char *tail = prefix_below(rel, ly->prefix);
    size_t bl = strlen(ly->backing), tl = tail ? strlen(tail) : 0;
    if (!tail || bl < tl || strcmp(ly->backing + bl - tl, tail) != 0)
        return NULL;
    if (bl == tl)
        return ly->local ? g_strdup(".") : NULL;
    if (ly->backing[bl - tl - 1] != '/')
        return NULL;
    return bl - tl - 1 ? g_strndup(ly->backing, bl - tl - 1) : g_strdup("/");
}

static void listing_gather(struct ckptfs *fs, JobView *jv, const VNode *vn, ListingBuild *b)
{
    const CkCheckpointInfo *cp;
    GPtrArray *layers = tree_layers(jv, vn, &cp);
    if (!layers)
        return;
    if (cp && vn->rel[0] == '\0' && !cp->restore->restorable) {
        listing_add(b, "ERROR", DT_REG, -1, false, false, 0);
        return;
    }
    for (guint i = 0; i < layers->len; i++) {
        const CkLayer *ly = layers->pdata[i];
        g_autofree char *path = layer_rel_path(ly, vn->rel);
        if (path) {
            int fd = backing_open(fs, ly, path, O_RDONLY | O_DIRECTORY);
            if (fd < 0)
                continue;
            struct stat sb;
            if (fstat(fd, &sb) != 0) {
                close(fd);
                continue;
            }
            LStamp ls = {(int)i, sb.st_dev, sb.st_ino, mtime_ns(&sb)};
            g_array_append_val(b->stamps, ls);
            /* getdents64 straight: a DIR would add an fstat, two fcntl and a
             * 32 KiB buffer to each of the many small directories (a large
             * one takes four times the getdents64 calls of 8 KiB instead) */
            CkDirIter it;
            ck_dir_iter_init(&it, fd);
            const char *nm;
            unsigned char t;
            while ((nm = ck_dir_iter_next(&it, &t)) != NULL) {
                t = ck_dir_entry_type(fd, nm, t);
                if (t == DT_UNKNOWN)
                    continue;
                listing_add(b, nm, t, (int)i, false, false, it.ino);
            }
            close(fd);
            continue;
        }
        const char *rest = prefix_below(vn->rel, ly->prefix);
        if (!rest)
            continue;
        const char *slash = strchr(rest, '/');
        if (slash) {
            g_autofree char *nm = g_strndup(rest, (gsize)(slash - rest));
            listing_add(b, nm, DT_DIR, (int)i, false, true, 0);
            continue;
        }
        /* the layer's root itself: what the backing object is */
        int fd = backing_open(fs, ly, ly->backing, O_PATH | O_NOFOLLOW);
        if (fd < 0)
            continue;
        struct stat sb;
        if (fstat(fd, &sb) == 0)
            listing_add(b, rest, dt_of(sb.st_mode), (int)i, true, false, sb.st_ino);
        close(fd);
    }
}

/* What the kernel is shown of each entry, in order. */
static guint64 build_fingerprint(const ListingBuild *b)
{
    guint64 h = VIEWS_HASH_START;
    for (guint i = 0; i < b->ents->len; i++) {
        const LEnt *e = &g_array_index(b->ents, LEnt, i);
        const char *name = build_name(b, i);
        guint64 ino = (guint64)e->ino;
        guint8 what[4] = {e->type, (guint8)(e->layer & 0xff), (guint8)((e->layer >> 8) & 0xff),
                          (guint8)(e->layer_root | e->synth << 1)};
        h = views_hash(h, name, strlen(name) + 1);
        h = views_hash(h, &ino, sizeof ino);
        h = views_hash(h, what, sizeof what);
    }
    return h;
}

static Listing *listing_build(struct ckptfs *fs, JobView *jv, const VNode *vn)
{
    ListingBuild b = {g_array_new(FALSE, FALSE, sizeof(LEnt)),
                      g_array_new(FALSE, FALSE, sizeof(LStamp)), g_string_new(NULL), NULL};
    gint64 now = g_get_monotonic_time();
    listing_gather(fs, jv, vn, &b);
    return listing_make(&b, build_fingerprint(&b), jv->j->version, now);
}

void jv_listing_done(VNode *vn, Listing *l)
{
    g_mutex_lock(&vn->lock);
    /* the node's reference, unless another listing took its place, or
     * this one is indexed: a walk of the views is mostly directories of
     * one or two entries, cheap to read again, while building a large
     * listing and its index again made a second walk over directories of
     * 100 entries 10 % slower */
    Listing *kept = vn->listing == l && !l->idx ? l : NULL;
    if (kept)
        vn->listing = NULL;
    g_mutex_unlock(&vn->lock);
    listing_unref(kept);
    listing_unref(l); /* the handle's */
}

/* True when every backing directory the listing read is unchanged. */
static bool listing_current(struct ckptfs *fs, JobView *jv, const VNode *vn, Listing *l)
{
    const CkCheckpointInfo *cp;
    GPtrArray *layers = tree_layers(jv, vn, &cp);
    for (guint i = 0; i < l->n_stamps; i++) {
        const LStamp *s = &listing_stamps(l)[i];
        if (!layers || (guint)s->layer >= layers->len)
            return false;
        /* the same snapshot version as the listing's: the same layers */
        const CkLayer *ly = layers->pdata[s->layer];
        g_autofree char *path = layer_rel_path(ly, vn->rel);
        if (!path)
            return false;
        int fd = backing_open(fs, ly, path, O_PATH | O_DIRECTORY);
        if (fd < 0)
            return false;
        struct stat sb;
        bool same = fstat(fd, &sb) == 0 && sb.st_dev == s->dev && sb.st_ino == s->ino &&
                    mtime_ns(&sb) == s->mtime_ns;
        close(fd);
        if (!same)
            return false;
    }
    return true;
}

/* The directory's listing (a reference).  force: revalidate now. */
static Listing *tree_listing(struct ckptfs *fs, VNode *vn, JobView *jv, bool force)
{
    gint64 now = g_get_monotonic_time();
    gint64 window = (gint64)(views_timeout(views_of(fs)) * 1e6 / 2);
    g_mutex_lock(&vn->lock);
    Listing *l =
        vn->listing && vn->listing->version == jv->j->version ? listing_ref(vn->listing) : NULL;
    g_mutex_unlock(&vn->lock);
    if (l) {
        gint64 checked = __atomic_load_n(&l->checked_us, __ATOMIC_RELAXED);
        if (!force && now - checked < window)
            return l;
        if (listing_current(fs, jv, vn, l)) {
            __atomic_store_n(&l->checked_us, now, __ATOMIC_RELAXED);
            return l;
        }
        listing_unref(l);
    }
    Listing *fresh = listing_build(fs, jv, vn);
    g_mutex_lock(&vn->lock);
    Listing *old = vn->listing;
    vn->listing = listing_ref(fresh);
    g_mutex_unlock(&vn->lock);
    listing_unref(old);
    return fresh;
}

/* The serial of the listing of tree dir vn, revalidated as tree_listing
 * does.  Taken at the first lookup already: a directory's mtime must not
 * move when it is first listed (tar: "file changed as we read it"). */
static guint64 tree_serial(struct ckptfs *fs, VNode *vn)
{
    g_autoptr(JobView) jv = jobview_get(fs, vn->job);
    if (!jv)
        return 0;
    Listing *l = tree_listing(fs, vn, jv, false);
    guint64 serial = l->serial;
    listing_unref(l);
    return serial;
}

/* ---- nodes ---- */

/* What a node about to be made needs; its VNode is built only when the node
 * table has none for the key (a walk re-reading a tree allocates nothing). */
typedef struct {
    struct ckptfs *fs;
    VnKind kind;
    mode_t type;
    ino_t vino;
    const VNode *pv;   /* the parent tree dir (tree entries) */
    const CkLayer *ly; /* the entry's layer, NULL for none */
    const LEnt *ent;   /* tree entries */
    const char *rel;   /* the entry's tree path */
    guint64 version;   /* of the snapshot the entry's listing is of */
    VNode *vn;         /* prebuilt (non-tree nodes), else built by make */
    /* aliases */
    const struct stat *st;
    int fd; /* O_PATH of the object, or -1: open dirfd/name */
    int dirfd;
    const char *name;
    bool used;
} MakeCtx;

static VNode *build_vnode(MakeCtx *m)
{
    if (m->vn)
        return g_steal_pointer(&m->vn);
    /* only a directory is listed or looked in by its path */
    VNode *vn = vnode_new(m->kind, m->pv->job, m->kind == VN_TREE ? m->rel : NULL);
    vn->ckpt = m->pv->ckpt;
    vn->n = m->pv->n;
    if (m->kind != VN_ERROR) {
        vn->layer = m->ent->layer;
        vn->version = m->version;
    }
    return vn;
}

static char *tree_vkey(const VNode *vn, const char *rel);

/* The path inside its tree that an alias's views key names: what follows
 * "<J>/state" or "<J>/checkpoints/<N>" (after the "#dev:ino#"), "" for the
 * tree's root; NULL if the key is not of vn's tree (keys are made by
 * tree_vkey from the same fields: not expected). */
static const char *vkey_rel(const VNode *vn, const char *vkey)
{
    vkey = node_vkey_path(vkey);
    g_autofree char *root = tree_vkey(vn, "");
    size_t l = strlen(root);
    if (strncmp(vkey, root, l) != 0 || (vkey[l] != '\0' && vkey[l] != '/'))
        return NULL;
    return vkey[l] ? vkey + l + 1 : vkey + l;
}

static void make_virtual(Node *n, void *p)
{
    MakeCtx *m = p;
    n->kind = NODE_VIRTUAL;
    n->type = m->type;
    n->view->vino = m->vino;
    n->view->vdata = build_vnode(m);
    m->used = true;
}

static void make_alias(Node *n, void *p)
{
    MakeCtx *m = p;
    n->kind = NODE_ALIAS;
    n->type = m->st->st_mode & S_IFMT;
    n->key.dev = m->st->st_dev;
    n->key.ino = m->st->st_ino;
    int fd = m->fd >= 0 ? m->fd : openat(m->dirfd, m->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || node_set_handle_from_fd(&m->fs->nodes, n, fd) != 0)
        n->pinned_fd = -1; /* no handle: reads fail with ESTALE, the kernel looks again */
    if (fd >= 0 && fd != m->fd)
        close(fd);
    n->view->vdata = build_vnode(m);
    m->used = true;
}

/* The node for vkey; a stale one (its object gone, the inode number maybe
 * recycled at this path: unlink + create) is taken out of the table first so
 * the kernel gets a fresh node (node_forget frees the old one when unused). */
static Node *get_node(struct ckptfs *fs, const char *vkey, void (*make)(Node *, void *), MakeCtx *m)
{
    Node *n = node_get_virtual(&fs->nodes, vkey, make, m);
    if (!m->used && n->kind == NODE_ALIAS && node_is_stale(&fs->nodes, n)) {
        node_unlist_virtual(&fs->nodes, vkey, n);
        node_forget(&fs->nodes, n, 1);
        n = node_get_virtual(&fs->nodes, vkey, make, m);
    }
    return n;
}

/* The layer an existing tree entry was looked up in now (which layer has
 * it may change with the snapshot; another request may read it).  Never
 * back to an older snapshot: a directory handle opened before the job
 * changed still hands out its listing's entries. */
static void set_layer(VNode *vn, gint16 layer, guint64 version)
{
    g_mutex_lock(&vn->lock);
    if (version >= vn->version) {
        vn->layer = layer;
        vn->version = version;
    }
    g_mutex_unlock(&vn->lock);
}

/* Fills e (attributes, ino, timeouts) for node n, which the caller got with
 * nlookup+1; on failure the count is given back.  The caller replies. */
static int node_to_entry(struct ckptfs *fs, Node *n, struct fuse_entry_param *e,
                         double attr_timeout)
{
    memset(e, 0, sizeof *e);
    int err = jv_getattr(fs, n, n->view->vdata, &e->attr, &e->attr_timeout);
    if (err) {
        node_forget(&fs->nodes, n, 1);
        return err;
    }
    e->ino = node_ino(&fs->nodes, n);
    e->generation = n->generation;
    e->entry_timeout = views_timeout(views_of(fs));
    e->attr_timeout = MIN(attr_timeout, e->attr_timeout); /* a tree dir's: half */
    return 0;
}

/* The virtual node of vkey (made with the prebuilt vn, which is taken, or
 * freed when the node exists), nlookup+1, into e (node_to_entry). */
static int virtual_to_entry(struct ckptfs *fs, const char *vkey, VNode *vn, mode_t type,
                            struct fuse_entry_param *e, double attr_timeout)
{
    MakeCtx m = {.fs = fs,
                 .kind = vn->kind,
                 .type = type,
                 .vino = views_vino(fs, vkey),
                 .vn = vn,
                 .fd = -1,
                 .dirfd = -1};
    Node *n = node_get_virtual(&fs->nodes, vkey, make_virtual, &m);
    if (!m.used)
        vnode_free(vn);
    return node_to_entry(fs, n, e, attr_timeout);
}

/* "<job>/state[/<rel>]" or "<job>/checkpoints/<N>[/<rel>]" (one per entry
 * a READDIRPLUS gives: no printf) */
static char *tree_vkey(const VNode *vn, const char *rel)
{
    const char *sep = rel[0] ? "/" : "";
    if (vn->ckpt) {
        CkU64Text num;
        return g_strconcat(vn->job, "/checkpoints/", ck_u64_text(num, (guint64)vn->n), sep, rel,
                           NULL);
    }
    return g_strconcat(vn->job, "/state", sep, rel, NULL);
}

static char *child_rel(const char *rel, const char *name)
{
    return rel[0] ? g_strconcat(rel, "/", name, NULL) : g_strdup(name);
}

/* The generation a state path shows: its layer's, or v<G> of its first component. */
static void tree_generation(const VNode *tree, const CkLayer *ly, const char *rel, ViewsProv *out)
{
    if (ly && ly->has_generation) {
        out->has_gen = true;
        out->gen = ly->generation;
        return;
    }
    if (tree->ckpt)
        return;
    const char *slash = strchr(rel, '/');
    size_t l = slash ? (size_t)(slash - rel) : strlen(rel);
    guint64 g;
    if (ck_parse_generation_name(rel, l, &g)) {
        out->has_gen = true;
        out->gen = g;
    }
}

/* The backing directory a layer maps tree dir pv to, opened once per
 * directory handle (layer_fds[i]: -2 not yet, -1 none). */
static int layer_dirfd(struct ckptfs *fs, const VNode *pv, const CkLayer *ly, int *layer_fds,
                       guint i)
{
    if (layer_fds[i] == -2) {
        g_autofree char *path = layer_rel_path(ly, pv->rel);
        int fd = path ? backing_open(fs, ly, path, O_PATH | O_DIRECTORY) : -1;
        layer_fds[i] = fd < 0 ? -1 : fd;
    }
    return layer_fds[i];
}

/* tree_entry's work, but for noting when the entry given expires. */
static int tree_entry_make(struct ckptfs *fs, VNode *pv, JobView *jv, Listing *l, guint i,
                           int *layer_fds, struct fuse_entry_param *e)
{
    double t = views_timeout(views_of(fs));
    const LEnt *ent = &l->ents[i];
    const char *name = lent_name(l, ent);
    g_autofree char *rel = child_rel(pv->rel, name);
    g_autofree char *tk = tree_vkey(pv, rel);
    const CkCheckpointInfo *cp;
    GPtrArray *layers = tree_layers(jv, pv, &cp);
    MakeCtx m = {.fs = fs,
                 .pv = pv,
                 .ent = ent,
                 .rel = rel,
                 .version = jv->j->version,
                 .fd = -1,
                 .dirfd = -1};
    if (ent->layer < 0) {
        /* checkpoints/<N>/ERROR */
        m.kind = VN_ERROR;
        m.type = S_IFREG;
        m.vino = views_vino(fs, tk);
        return node_to_entry(fs, node_get_virtual(&fs->nodes, tk, make_virtual, &m), e, 0.0);
    }
    if (!layers || (guint)ent->layer >= layers->len)
        return -ENOENT;
    m.ly = layers->pdata[ent->layer];
    if (ent->type == DT_DIR) {
        m.kind = VN_TREE;
        m.type = S_IFDIR;
        m.vino = views_vino(fs, tk);
        Node *n = node_get_virtual(&fs->nodes, tk, make_virtual, &m);
        if (!m.used)
            set_layer(n->view->vdata, ent->layer, m.version);
        return node_to_entry(fs, n, e, t);
    }

    struct stat st;
    int fd = -1;
    int dirfd = layer_fds && !ent->layer_root && !ent->synth
                    ? layer_dirfd(fs, pv, m.ly, layer_fds, (guint)ent->layer)
                    : -1;
    if (dirfd >= 0) {
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            return -ENOENT;
    } else {
        g_autofree char *bpath = layer_rel_path(m.ly, rel);
        if (!bpath)
            return -ENOENT;
        fd = backing_open(fs, m.ly, bpath, O_PATH | O_NOFOLLOW);
        if (fd < 0)
            return fd == -ELOOP || fd == -ENOTDIR ? -ENOENT : fd;
        if (fstat(fd, &st) != 0) {
            int err = -errno;
            close(fd);
            return err;
        }
    }
    if (S_ISDIR(st.st_mode)) {
        /* replaced by a directory since the listing: the next listing says so */
        if (fd >= 0)
            close(fd);
        return -ENOENT;
    }
    g_autofree char *vkey = node_alias_vkey(st.st_dev, st.st_ino, tk);
    m.kind = VN_ALIAS;
    m.st = &st;
    m.fd = fd;
    m.dirfd = dirfd;
    m.name = name;
    Node *n = get_node(fs, vkey, make_alias, &m);
    if (!m.used)
        set_layer(n->view->vdata, ent->layer, m.version);
    if (fd >= 0)
        close(fd);
    memset(e, 0, sizeof *e);
    e->attr = st;
    e->ino = node_ino(&fs->nodes, n);
    e->generation = n->generation;
    e->entry_timeout = t;
    e->attr_timeout = t;
    return 0;
}

/* Entry i of listing l of tree dir pv (a snapshot of jv): its node with
 * nlookup+1 in e.  layer_fds (optional, jv's layers->len slots): backing
 * directory descriptors kept by a directory handle.  The listing notes
 * when the kernel's entry expires, by the timeout given (views_readdir). */
static int tree_entry(struct ckptfs *fs, VNode *pv, JobView *jv, Listing *l, guint i,
                      int *layer_fds, struct fuse_entry_param *e)
{
    gint64 now = g_get_monotonic_time();
    int err = tree_entry_make(fs, pv, jv, l, i, layer_fds, e);
    if (err == 0)
        __atomic_store_n(&l->ents[i].expires_us, now + (gint64)(e->entry_timeout * 1e6),
                         __ATOMIC_RELAXED);
    return err;
}

static int tree_lookup(struct ckptfs *fs, VNode *pv, const char *name, struct fuse_entry_param *e)
{
    g_autoptr(JobView) jv = jobview_get(fs, pv->job);
    if (!jv)
        return -ENOENT;
    Listing *l = tree_listing(fs, pv, jv, false);
    guint idx = listing_find(l, name);
    if (!idx) {
        /* not there a moment ago: look again before saying so */
        listing_unref(l);
        l = tree_listing(fs, pv, jv, true);
        idx = listing_find(l, name);
        if (!idx) {
            listing_unref(l);
            return -ENOENT;
        }
    }
    int err = tree_entry(fs, pv, jv, l, idx - 1, NULL, e);
    listing_unref(l);
    return err;
}

int jv_readdir_entry(struct ckptfs *fs, ViewsDir *d, guint i, struct fuse_entry_param *e)
{
    return tree_entry(fs, d->vn, d->jv, d->listing, i, d->layer_fds, e);
}

/* Entries that exist exactly as long as their job (<J>, and its state,
 * checkpoints and restore): the notifier drops them when the job goes, so
 * the kernel may keep them long; their attributes never change (directories)
 * or are not cached (restore). */
static int stable(struct ckptfs *fs, int err, struct fuse_entry_param *e)
{
    if (err == 0 && e->ino) {
        double st = views_stable_timeout(views_of(fs));
        e->entry_timeout = st;
        if (e->attr_timeout > 0)
            e->attr_timeout = st;
    }
    return err;
}

static char *latest_target(const CkJobInfo *j)
{
    return g_strdup_printf("checkpoints/%" G_GUINT64_FORMAT, (guint64)j->latest);
}

int jv_lookup(struct ckptfs *fs, Node *parent, VNode *pv, const char *name,
              struct fuse_entry_param *e)
{
    (void)parent;
    double t = views_timeout(views_of(fs));
    switch (pv->kind) {
    case VN_ROOT: {
        if (!ck_is_job_id(name, strlen(name)) || !views_has_job(fs, name))
            return -ENOENT;
        const char *job = ck_intern(name);
        VNode *vn = vnode_new(VN_JOB, job, NULL);
        return stable(fs, virtual_to_entry(fs, job, vn, S_IFDIR, e, t), e);
    }
    case VN_JOB: {
        g_autoptr(JobView) jv = jobview_get(fs, pv->job);
        if (!jv)
            return -ENOENT;
        const CkJobInfo *j = jv->j;
        g_autofree char *vkey = g_strconcat(pv->job, "/", name, NULL);
        if (strcmp(name, "state") == 0) {
            VNode *vn = vnode_new(VN_TREE, pv->job, NULL);
            return stable(fs, virtual_to_entry(fs, vkey, vn, S_IFDIR, e, t), e);
        }
        if (strcmp(name, "checkpoints") == 0) {
            VNode *vn = vnode_new(VN_CKPTS, pv->job, NULL);
            return stable(fs, virtual_to_entry(fs, vkey, vn, S_IFDIR, e, t), e);
        }
        if (strcmp(name, "restore") == 0) {
            VNode *vn = vnode_new(VN_RESTORE, pv->job, NULL);
            return stable(fs, virtual_to_entry(fs, vkey, vn, S_IFREG, e, 0.0), e);
        }
        if (strcmp(name, "latest") == 0 && j->has_latest) {
            VNode *vn = vnode_new(VN_LATEST, pv->job, NULL);
            return virtual_to_entry(fs, vkey, vn, S_IFLNK, e, 0.0);
        }
        return -ENOENT;
    }
    case VN_CKPTS: {
        guint64 n;
        if (!ck_parse_u64(name, strlen(name), &n))
            return -ENOENT;
        g_autoptr(JobView) jv = jobview_get(fs, pv->job);
        if (!jv)
            return -ENOENT;
        int i = checkpoint_index(jv->j, n);
        if (i < 0)
            return -ENOENT;
        VNode *vn = vnode_new(VN_TREE, pv->job, NULL);
        vn->ckpt = true;
        vn->n = n;
        g_autofree char *vkey =
            g_strdup_printf("%s/checkpoints/%" G_GUINT64_FORMAT, pv->job, (guint64)n);
        return virtual_to_entry(fs, vkey, vn, S_IFDIR, e, t);
    }
    case VN_TREE:
        return tree_lookup(fs, pv, name, e);
    default:
        return -ENOTDIR;
    }
}

/* The text of checkpoints/<N>/ERROR (g_free), NULL when there is none. */
static char *error_text(JobView *jv, guint64 n)
{
    int i = checkpoint_index(jv->j, n);
    if (i < 0)
        return NULL;
    const CkRestore *r = ((CkCheckpointInfo *)jv->j->checkpoints->pdata[i])->restore;
    if (r->restorable)
        return NULL;
    return g_strconcat(r->error ? r->error : "not restorable", "\n", NULL);
}

int jv_getattr(struct ckptfs *fs, Node *n, VNode *vn, struct stat *st, double *timeout)
{
    double t = views_timeout(views_of(fs));
    switch (vn->kind) {
    case VN_JOB:
    case VN_CKPTS:
        views_dir_attr(fs, n->view->vino, st);
        *timeout = views_stable_timeout(views_of(fs)); /* never change */
        return 0;
    case VN_TREE: {
        /* the kernel keeps a directory's listing while its mtime stays (no
         * OPENDIR to ask): the mtime moves with the listing's serial, checked
         * as a READDIR would, and is kept half the timeout, so a change
         * behind the mount shows within it */
        views_dir_attr(fs, n->view->vino, st);
        guint64 serial = tree_serial(fs, vn);
        st->st_mtim.tv_nsec += (long)(serial % G_GUINT64_CONSTANT(1000000000));
        if (st->st_mtim.tv_nsec >= 1000000000L) {
            st->st_mtim.tv_sec++;
            st->st_mtim.tv_nsec -= 1000000000L;
        }
        st->st_ctim = st->st_mtim;
        *timeout = t / 2;
        return 0;
    }
    case VN_ALIAS: {
        int err = node_fstat(&fs->nodes, n, st);
        if (!err && st->st_nlink == 0)
            err = node_mark_stale(&fs->nodes, n, -ESTALE); /* deleted (still open somewhere) */
        *timeout = t;
        return err;
    }
    default:
        break;
    }
    views_dir_attr(fs, n->view->vino, st);
    *timeout = 0.0;
    g_autoptr(JobView) jv = jobview_get(fs, vn->job);
    switch (vn->kind) {
    case VN_RESTORE:
        st->st_mode = S_IFREG | 0444;
        st->st_size = jv ? (off_t)jv->restore_len : 0;
        break;
    case VN_ERROR: {
        st->st_mode = S_IFREG | 0444;
        g_autofree char *txt = jv ? error_text(jv, vn->n) : NULL;
        st->st_size = txt ? (off_t)strlen(txt) : 0;
        break;
    }
    case VN_LATEST: {
        st->st_mode = S_IFLNK | 0777;
        g_autofree char *tg = jv && jv->j->has_latest ? latest_target(jv->j) : NULL;
        st->st_size = tg ? (off_t)strlen(tg) : 0;
        break;
    }
    default:
        return -EIO;
    }
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

int jv_readlink(struct ckptfs *fs, Node *n, VNode *vn, char **target)
{
    (void)n;
    g_autoptr(JobView) jv = jobview_get(fs, vn->job);
    if (!jv || !jv->j->has_latest)
        return -ENOENT;
    *target = latest_target(jv->j);
    return 0;
}

/* <J> and <J>/checkpoints list what the job snapshot says: the kernel may
 * keep the listing while the snapshot is the one it listed. */
static void cache_by_version(VNode *vn, const CkJobInfo *j, ViewsDir *d)
{
    d->cacheable = true;
    g_mutex_lock(&vn->lock);
    d->keep_cache = vn->opened_serial == j->version + 1;
    vn->opened_serial = j->version + 1;
    g_mutex_unlock(&vn->lock);
}

int jv_opendir(struct ckptfs *fs, Node *n, VNode *vn, ViewsDir *d)
{
    (void)n;
    /* Without OPENDIR the kernel keeps a listing until the notifier drops
     * it, LISTING_DROP_PCT of a timeout after this read, and a read after
     * the drop comes here again: a listing made from a comparison no older
     * than the rest of the timeout shows a change behind the mount within
     * rescan=, where one made from a comparison up to rescan= old could be
     * kept, and served again, for up to 1.75 rescan= after it.  (With
     * OPENDIR every open comes here.) */
    g_autoptr(JobView) jv =
        fs->no_opendir
            ? jobview_get_within(fs, vn->job,
                                 VIEWS_TIMEOUT_PCT_US(views_of(fs), 100 - LISTING_DROP_PCT))
            : jobview_get(fs, vn->job);
    if (!jv)
        return -ENOENT;
    const CkJobInfo *j = jv->j;
    switch (vn->kind) {
    case VN_JOB: {
        const char *names[] = {"state", "checkpoints", "restore", "latest"};
        const unsigned char types[] = {DT_DIR, DT_DIR, DT_REG, DT_LNK};
        for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
            if (i == 3 && !j->has_latest)
                continue;
            g_autofree char *vkey = g_strconcat(vn->job, "/", names[i], NULL);
            vent_add(d, names[i], views_vino(fs, vkey), types[i]);
        }
        cache_by_version(vn, j, d);
        return 0;
    }
    case VN_CKPTS:
        for (guint i = 0; i < j->checkpoints->len; i++) {
            guint64 cn = ((CkCheckpointInfo *)j->checkpoints->pdata[i])->n;
            CkU64Text num;
            const char *name = ck_u64_text(num, cn);
            g_autofree char *vkey = g_strconcat(vn->job, "/checkpoints/", name, NULL);
            vent_add(d, name, views_vino(fs, vkey), DT_DIR);
        }
        cache_by_version(vn, j, d);
        return 0;
    case VN_TREE: {
        /* revalidated at most every half timeout: a change behind the mount
         * shows within rescan= seconds, a re-read of a tree costs nothing */
        Listing *l = tree_listing(fs, vn, jv, false);
        for (guint i = 0; i < l->n_ents; i++) {
            const LEnt *le = &l->ents[i];
            const char *name = lent_name(l, le);
            ino_t ino = le->ino;
            if (le->type == DT_DIR || le->layer < 0) {
                g_autofree char *rel = child_rel(vn->rel, name);
                g_autofree char *vkey = tree_vkey(vn, rel);
                ino = views_vino(fs, vkey);
            }
            /* the names stay the listing's: no copy per entry per opendir */
            VEnt e = {(char *)name, ino, le->type, true, (gint64 *)&le->expires_us, (int)i};
            g_array_append_val(d->ents, e);
        }
        /* kept with the handle: a readdirplus looks its entries up in them */
        d->listing = l;
        d->jv = g_atomic_rc_box_acquire(jv);
        d->vn = vn;
        const CkCheckpointInfo *cp;
        GPtrArray *layers = tree_layers(jv, vn, &cp);
        d->n_layer_fds = layers ? layers->len : 0;
        d->layer_fds = g_new(int, d->n_layer_fds + 1);
        for (guint i = 0; i < d->n_layer_fds; i++)
            d->layer_fds[i] = -2;
        /* the kernel may keep the listing while it is the same one: a
         * rebuilt listing (another snapshot, a backing dir changed) drops it */
        d->cacheable = true;
        g_mutex_lock(&vn->lock);
        d->keep_cache = vn->opened_serial == l->serial;
        vn->opened_serial = l->serial;
        g_mutex_unlock(&vn->lock);
        return 0;
    }
    default:
        return -ENOTDIR;
    }
}

int jv_open(struct ckptfs *fs, Node *n, VNode *vn, ViewsOpen *out)
{
    switch (vn->kind) {
    case VN_RESTORE:
    case VN_ERROR: {
        g_autoptr(JobView) jv = jobview_get(fs, vn->job);
        if (!jv)
            return -ENOENT;
        if (vn->kind == VN_RESTORE) {
            out->content = g_bytes_new(jv->restore, jv->restore_len);
        } else {
            char *txt = error_text(jv, vn->n);
            if (!txt)
                return -ENOENT;
            out->content = g_bytes_new_take(txt, strlen(txt));
        }
        out->fd = -1;
        out->direct_io = true;
        out->keep_cache = false;
        return 0;
    }
    case VN_ALIAS: {
        if (n->type != S_IFREG)
            return -EACCES;
        /* a file deleted behind the view (a handle of it still open
         * somewhere) gives ESTALE: the view shows what is at the path now */
        struct stat st;
        int fd = node_open_live(&fs->nodes, n, O_RDONLY | O_NOFOLLOW, &st);
        if (fd < 0)
            return fd;
        out->fd = fd;
        out->content = NULL;
        out->direct_io = false;
        out->keep_cache = node_unchanged_since_open(&fs->nodes, n, &st);
        return 0;
    }
    default:
        return -EINVAL;
    }
}

/* ---- provenance ---- */

int jv_provenance(struct ckptfs *fs, Node *n, VNode *vn, ViewsProv *p)
{
    *p = (ViewsProv){0};
    if (vn->kind == VN_JOB) {
        p->source = "own";
        p->backing = ck_job_markers_dir(vn->job);
        return 0;
    }
    g_autoptr(JobView) jv = jobview_get(fs, vn->job);
    const CkJobInfo *j = jv ? jv->j : NULL;
    int ci = j && vn->ckpt ? checkpoint_index(j, vn->n) : -1;
    const CkRestore *r = ci >= 0 ? ((CkCheckpointInfo *)j->checkpoints->pdata[ci])->restore : NULL;
    switch (vn->kind) {
    case VN_CKPTS:
    case VN_RESTORE:
        if (j && j->has_markers_dir) {
            p->source = "own";
            p->backing = ck_job_markers_dir(vn->job);
        }
        return 0;
    case VN_ERROR:
        p->source = "own";
        if (r) {
            p->backing = g_strdup(r->marker);
            p->has_gen = r->has_generation;
            p->gen = r->generation;
        }
        return 0;
    case VN_TREE:
    case VN_ALIAS:
        break;
    default:
        return 0;
    }
    const char *rel = vn->kind == VN_TREE ? vn->rel : vkey_rel(vn, node_vkey(n));
    if (!rel)
        return 0;
    if (vn->kind == VN_TREE && !rel[0]) {
        if (vn->ckpt) {
            p->source = "own";
            p->backing = ck_checkpoint_dir(vn->job, vn->n);
            if (r) {
                p->has_gen = r->has_generation;
                p->gen = r->generation;
            }
        } else if (j && j->has_own_root) {
            p->source = "own";
            p->backing = ck_job_state_dir(vn->job);
        } else if (jv) {
            /* no own root: the first legacy location it shows */
            const CkCheckpointInfo *cp;
            GPtrArray *layers = tree_layers(jv, vn, &cp);
            for (guint i = 0; layers && i < layers->len && !p->backing; i++) {
                const CkLayer *ly = layers->pdata[i];
                if ((p->backing = layer_shown_path(ly, "")))
                    p->source = ly->source;
            }
        }
        return 0;
    }
    g_mutex_lock(&vn->lock);
    gint16 layer = vn->layer;
    guint64 version = vn->version;
    g_mutex_unlock(&vn->lock);
    if (!j || layer < 0)
        return 0;
    if (version != j->version)
        return -EAGAIN;
    const CkCheckpointInfo *cp;
    GPtrArray *layers = tree_layers(jv, vn, &cp);
    if (!layers || (guint)layer >= layers->len)
        return 0;
    const CkLayer *ly = layers->pdata[layer];
    p->source = ly->source;
    p->backing = layer_shown_path(ly, rel);
    tree_generation(vn, ly, rel, p);
    return 0;
}
