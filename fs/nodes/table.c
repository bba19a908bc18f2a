#include "nodes.h"
#include "intern.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs.h"
#include "outlive/inflight.h"

#define FD_CACHE_CAPACITY 512

typedef struct {
    Node *node;
    int fd;
    int refs; /* the cache's own reference + borrowers */
    GList link;
} FdEntry;

static guint key_hash(gconstpointer p)
{
    const NodeKey *k = p;
    guint64 v = (guint64)k->ino * 0x9E3779B97F4A7C15ull ^ (guint64)k->dev;
    return (guint)(v ^ (v >> 32));
}

static gboolean key_equal(gconstpointer a, gconstpointer b)
{
    const NodeKey *x = a, *y = b;
    return x->ino == y->ino && x->dev == y->dev;
}

static void fdentry_unref_locked(FdEntry *e)
{
    if (--e->refs == 0) {
        close(e->fd);
        g_free(e);
    }
}

/* Removes n's cached descriptor, if any. */
static void fdcache_drop(struct ckptfs *fs, Node *n)
{
    FdCache *c = &fs->fdcache;
    g_mutex_lock(&c->lock);
    FdEntry *e = g_hash_table_lookup(c->map, n);
    if (e) {
        g_hash_table_remove(c->map, n);
        g_queue_unlink(&c->lru, &e->link);
        fdentry_unref_locked(e);
    }
    g_mutex_unlock(&c->lock);
}

/* Closes the older half of the cached descriptors; true if it closed any. */
static bool fdcache_shrink(struct ckptfs *fs)
{
    FdCache *c = &fs->fdcache;
    g_mutex_lock(&c->lock);
    guint target = c->lru.length / 2, closed = 0;
    while (c->lru.length > target) {
        GList *tail = g_queue_pop_tail_link(&c->lru);
        FdEntry *old = tail->data;
        g_hash_table_remove(c->map, old->node);
        fdentry_unref_locked(old);
        closed++;
    }
    g_mutex_unlock(&c->lock);
    return closed > 0;
}

/* Caches fd (O_PATH) for n; returns the descriptor to use, borrowed in *out. */
static void fdcache_insert(struct ckptfs *fs, Node *n, int fd, NodeFd *out)
{
    FdCache *c = &fs->fdcache;
    g_mutex_lock(&c->lock);
    FdEntry *e = g_hash_table_lookup(c->map, n);
    if (e) {
        /* another thread opened it meanwhile */
        close(fd);
    } else {
        e = g_new0(FdEntry, 1);
        e->node = n;
        e->fd = fd;
        e->refs = 1;
        e->link.data = e;
        g_hash_table_insert(c->map, n, e);
        g_queue_push_head_link(&c->lru, &e->link);
        while (c->lru.length > c->capacity) {
            GList *tail = g_queue_pop_tail_link(&c->lru);
            FdEntry *old = tail->data;
            g_hash_table_remove(c->map, old->node);
            fdentry_unref_locked(old);
        }
    }
    if (out) {
        e->refs++;
        out->fd = e->fd;
        out->entry = e;
    }
    g_mutex_unlock(&c->lock);
}

/* ---- the node's slot in the state memfd ---- */

static void rec_put_text(NodeRec *r, const char *text)
{
    size_t len = text ? strlen(text) : 0;
    if (len >= STATE_NODE_TEXT) {
        r->text_len = STATE_TEXT_LOST; /* the node cannot be found again */
        return;
    }
    memcpy(r->text, text ? text : "", len + 1);
    r->text_len = (uint16_t)len;
}

void node_sync_locked(Node *n)
{
    NodeRec *r = n->rec;
    if (!r)
        return;
    r->nlookup = n->nlookup;
    r->ns_kind = (uint8_t)n->ns.kind;
    r->ns_place = (uint8_t)n->ns.place;
    if (n->kind == NODE_BACKING && n->ns.job != n->rec_job) {
        rec_put_text(r, n->ns.job);
        n->rec_job = n->ns.job;
    }
    r->stale = n->stale;
    r->backing_id = n->backing_id;
    r->backing_refs = n->backing_refs;
    r->cached_opens = n->cached_opens;
}

/* Gives n, just put into the table, a slot and writes the slot whole; its
 * state goes last, so a daemon killed meanwhile leaves the slot free. */
static void rec_take_locked(NodeTable *t, Node *n)
{
    uint32_t slot = slot_pool_take(&t->pool);
    if (!slot)
        g_error("ckptfs: the kernel holds %u nodes, all the state memfd has room for",
                STATE_NODE_SLOTS);
    NodeRec *r = &t->state->nodes[slot];
    memset((char *)r + sizeof r->state, 0, sizeof *r - sizeof r->state);
    r->kind = (uint8_t)n->kind;
    r->type = (uint32_t)n->type;
    r->generation = n->generation;
    r->dev = (uint64_t)n->key.dev;
    r->ino = (uint64_t)n->key.ino;
    r->vino = (uint64_t)n->vino;
    if (n->handle && n->handle->handle_bytes <= STATE_HANDLE_BYTES) {
        r->handle_len = (uint8_t)n->handle->handle_bytes;
        r->handle_type = n->handle->handle_type;
        memcpy(r->handle, n->handle->f_handle, n->handle->handle_bytes);
    }
    if (n->kind != NODE_BACKING)
        rec_put_text(r, n->vkey);
    n->rec = r;
    n->slot = slot;
    n->rec_job = NULL;
    node_sync_locked(n);
    atomic_store_explicit(&r->state, SLOT_USED, memory_order_release);
    t->by_slot[slot] = n;
}

static void rec_give_locked(NodeTable *t, Node *n)
{
    if (!n->rec)
        return;
    atomic_store_explicit(&n->rec->state, SLOT_FREE, memory_order_release);
    t->by_slot[n->slot] = NULL;
    slot_pool_give(&t->pool, n->slot);
    n->rec = NULL;
    n->slot = 0;
}

int node_mark_stale(struct ckptfs *fs, Node *n, int err)
{
    if (err == -ESTALE && n != fs->nodes.root) {
        g_mutex_lock(&fs->nodes.lock);
        n->stale = true;
        node_sync_locked(n);
        g_mutex_unlock(&fs->nodes.lock);
        fdcache_drop(fs, n);
    }
    return err;
}

/* Room for any file handle: name_to_handle_at fills the variable tail. */
typedef union {
    struct file_handle fh;
    char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
} HandleBuf;

/* name_to_handle_at(2) into h, with the mount id in *mnt; 0 or -errno. */
static int handle_get(int dirfd, const char *name, int flags, HandleBuf *h, int *mnt)
{
    h->fh.handle_bytes = MAX_HANDLE_SZ;
    *mnt = 0;
    return name_to_handle_at(dirfd, name, &h->fh, mnt, flags) == 0 ? 0 : -errno;
}

/* A copy of the handle's used bytes, as a node keeps it (g_free). */
static struct file_handle *handle_dup(const struct file_handle *fh)
{
    return g_memdup2(fh, sizeof(struct file_handle) + fh->handle_bytes);
}

static bool handle_equal(const struct file_handle *a, const struct file_handle *b)
{
    if (!a || !b)
        return a == b;
    return a->handle_type == b->handle_type && a->handle_bytes == b->handle_bytes &&
           memcmp(a->f_handle, b->f_handle, a->handle_bytes) == 0;
}

int node_fd(struct ckptfs *fs, Node *n, NodeFd *out)
{
    if (n->pinned_fd >= 0) {
        out->fd = n->pinned_fd;
        out->entry = NULL;
        return 0;
    }
    if (!n->handle)
        return -ESTALE; /* a virtual node has no backing object */
    FdCache *c = &fs->fdcache;
    g_mutex_lock(&c->lock);
    FdEntry *e = g_hash_table_lookup(c->map, n);
    if (e) {
        e->refs++;
        if (c->lru.head != &e->link) {
            g_queue_unlink(&c->lru, &e->link);
            g_queue_push_head_link(&c->lru, &e->link);
        }
        out->fd = e->fd;
        out->entry = e;
        g_mutex_unlock(&c->lock);
        return 0;
    }
    g_mutex_unlock(&c->lock);
    int fd = open_by_handle_at(fs->mount_fd, n->handle, O_PATH | O_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && fdcache_shrink(fs)) {
        /* out of descriptors (many open files): the cache gives way */
        fd = open_by_handle_at(fs->mount_fd, n->handle, O_PATH | O_CLOEXEC);
    }
    if (fd < 0)
        return node_mark_stale(fs, n, -errno);
    fdcache_insert(fs, n, fd, out);
    return 0;
}

void node_fd_put(struct ckptfs *fs, NodeFd *f)
{
    if (!f->entry)
        return;
    g_mutex_lock(&fs->fdcache.lock);
    fdentry_unref_locked(f->entry);
    g_mutex_unlock(&fs->fdcache.lock);
    f->entry = NULL;
}

int node_fstat(struct ckptfs *fs, Node *n, struct stat *st)
{
    /* initialised: with node_fd inlined, -O3 gcc cannot see it is set */
    NodeFd f = {.fd = -1, .entry = NULL};
    int err = node_fd(fs, n, &f);
    if (err)
        return err;
    if (fstatat(f.fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = -errno;
    node_fd_put(fs, &f);
    return err;
}

int node_open(struct ckptfs *fs, Node *n, int flags)
{
    flags &= ~(O_CREAT | O_EXCL | O_NOCTTY);
    flags |= O_CLOEXEC;
    int fd;
    if (n->handle) {
        fd = open_by_handle_at(fs->mount_fd, n->handle, flags);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && fdcache_shrink(fs))
            fd = open_by_handle_at(fs->mount_fd, n->handle, flags);
    } else if (n->pinned_fd >= 0) {
        char proc[64];
        g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", n->pinned_fd);
        fd = open(proc, flags);
    } else {
        return -ESTALE;
    }
    return fd < 0 ? node_mark_stale(fs, n, -errno) : fd;
}

int node_open_live(struct ckptfs *fs, Node *n, int flags, struct stat *st)
{
    int fd = node_open(fs, n, flags);
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    /* An open by name of an object that no longer has one: its name was
     * replaced or removed behind the mount's back while the kernel still
     * cached it.  ESTALE makes the kernel look the name up again (and find
     * the new file) instead of reading the old one.  This is decided by
     * nlink alone: the kernel sends RELEASE after close asynchronously, so
     * "no open file" cannot be known here.  (A reopen of an unlinked file
     * through /proc/self/fd therefore fails with ESTALE.) */
    if (st->st_nlink == 0) {
        close(fd);
        return node_mark_stale(fs, n, -ESTALE);
    }
    return fd;
}

/* The node keeps a duplicate of fd as its way to the object. */
static int node_pin_fd(Node *n, int fd)
{
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0)
        return -errno;
    n->pinned_fd = dup_fd;
    return 0;
}

int node_set_handle_from_fd(struct ckptfs *fs, Node *n, int fd)
{
    if (fs->handles) {
        HandleBuf h;
        int mnt;
        if (handle_get(fd, "", AT_EMPTY_PATH, &h, &mnt) == 0 && mnt == fs->nodes.root_mount_id) {
            n->handle = handle_dup(&h.fh);
            n->pinned_fd = -1;
            return 0;
        }
    }
    /* no handles here (or another file system mounted inside the backing
     * directory): keep the descriptor itself */
    return node_pin_fd(n, fd);
}

static Node *node_new(struct ckptfs *fs, NodeKind kind, mode_t type)
{
    Node *n = g_new0(Node, 1);
    n->kind = kind;
    n->type = type & S_IFMT;
    n->pinned_fd = -1;
    (void)fs;
    return n;
}

static void node_free(struct ckptfs *fs, Node *n)
{
    fdcache_drop(fs, n);
    if (n->pinned_fd >= 0 && n != fs->nodes.root)
        close(n->pinned_fd);
    if (n->vdata && n->vdata_free)
        n->vdata_free(n->vdata);
    g_free(n->handle);
    g_free(n->vkey);
    g_free(n);
}

/* The nodes a previous daemon left in the state (it was killed, or handed
 * the connection over): the kernel holds their ids and will use them. */
static void nodes_revive(struct ckptfs *fs)
{
    NodeTable *t = &fs->nodes;
    State *state = t->state;
    uint32_t high = atomic_load(&state->hdr->node_high);
    guint lost = 0;
    for (uint32_t i = FUSE_ROOT_ID + 1; i < high; i++) {
        NodeRec *r = &state->nodes[i];
        if (atomic_load_explicit(&r->state, memory_order_acquire) != SLOT_USED)
            continue;
        Node *n = node_new(fs, (NodeKind)r->kind, (mode_t)r->type);
        n->generation = r->generation;
        n->nlookup = n->revived = r->nlookup;
        n->key = (NodeKey){(dev_t)r->dev, (ino_t)r->ino};
        n->vino = (ino_t)r->vino;
        n->stale = r->stale;
        n->backing_id = r->backing_id;
        n->backing_refs = r->backing_refs;
        n->cached_opens = r->cached_opens;
        n->ns = (CkNs){(CkNsKind)r->ns_kind, NULL, (CkPlace)r->ns_place};
        bool text = r->text_len != STATE_TEXT_LOST;
        if (n->kind == NODE_BACKING) {
            if (n->ns.kind == CK_NS_JOB)
                n->ns.job = n->rec_job = text ? ck_intern(r->text) : NULL;
        } else if (text) {
            n->vkey = g_strdup(r->text);
        }
        if (r->handle_len) {
            n->handle = g_malloc(sizeof(struct file_handle) + r->handle_len);
            n->handle->handle_bytes = r->handle_len;
            n->handle->handle_type = r->handle_type;
            memcpy(n->handle->f_handle, r->handle, r->handle_len);
        }
        if ((n->kind != NODE_VIRTUAL && !n->handle) || (n->ns.kind == CK_NS_JOB && !n->ns.job) ||
            (n->kind != NODE_BACKING && !n->vkey)) {
            n->stale = true; /* kept no way to find it again: ESTALE, the kernel looks again */
            lost++;
            g_debug("ckptfs: node %u (kind %d, %s) has no way back", i, (int)n->kind,
                    n->vkey ? n->vkey : "-");
        }
        n->rec = r;
        n->slot = i;
        t->by_slot[i] = n;
        t->count++;
        if (n->kind == NODE_BACKING) {
            Node *old = g_hash_table_lookup(t->backing, &n->key);
            if (!old || (old->stale && !n->stale))
                g_hash_table_replace(t->backing, &n->key, n);
        } else if (n->vkey && !g_hash_table_lookup(t->virtuals, n->vkey)) {
            g_hash_table_insert(t->virtuals, n->vkey, n);
        }
    }
    g_message("ckptfs: attached to the live connection: %" G_GUINT64_FORMAT
              " nodes the kernel holds found again%s",
              t->count, lost ? " (some without a way back: they answer ESTALE)" : "");
}

int node_table_init(struct ckptfs *fs)
{
    NodeTable *t = &fs->nodes;
    g_mutex_init(&t->lock);
    t->backing = g_hash_table_new(key_hash, key_equal);
    t->virtuals = g_hash_table_new(g_str_hash, g_str_equal);
    g_mutex_init(&fs->fdcache.lock);
    fs->fdcache.map = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_queue_init(&fs->fdcache.lru);
    /* a quarter of the descriptor limit at most: open files need the rest */
    struct rlimit rl;
    fs->fdcache.capacity = FD_CACHE_CAPACITY;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        fs->fdcache.capacity = (guint)MAX(16, MIN((rlim_t)FD_CACHE_CAPACITY, rl.rlim_cur / 4));

    struct stat st;
    if (fstat(fs->root_fd, &st) < 0)
        return -errno;

    /* Probe handle support: a handle of the root that opens again. */
    HandleBuf h;
    int mnt;
    fs->handles = false;
    int probe_err =
        fs->opt.no_handles ? EOPNOTSUPP : -handle_get(fs->root_fd, "", AT_EMPTY_PATH, &h, &mnt);
    if (!probe_err) {
        int fd = open_by_handle_at(fs->mount_fd, &h.fh, O_PATH | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            fs->handles = true;
            t->root_mount_id = mnt;
        } else {
            probe_err = errno;
        }
    }
    if (!fs->handles)
        g_warning("ckptfs: %s gives no usable file handles (%s); keeping one O_PATH descriptor "
                  "per cached node, so RLIMIT_NOFILE bounds the nodes the kernel can hold",
                  fs->backing, g_strerror(probe_err));

    State *state = t->state = &fs->state;
    if (state->attached && (state->hdr->root_dev != (uint64_t)st.st_dev ||
                            state->hdr->root_ino != (uint64_t)st.st_ino))
        return -EXDEV; /* the state of a mount of another backing directory */
    state->hdr->root_dev = (uint64_t)st.st_dev;
    state->hdr->root_ino = (uint64_t)st.st_ino;
    t->by_slot = mmap(NULL, (size_t)STATE_NODE_SLOTS * sizeof(Node *), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->by_slot == MAP_FAILED) {
        t->by_slot = NULL;
        return -errno;
    }

    Node *root = node_new(fs, NODE_BACKING, st.st_mode);
    root->key.dev = st.st_dev;
    root->key.ino = st.st_ino;
    root->ns = ck_ns_root();
    root->nlookup = 1;
    root->pinned_fd = fs->root_fd;
    root->generation = 0;
    root->slot = FUSE_ROOT_ID;
    t->root = root;
    g_hash_table_insert(t->backing, &root->key, root);
    /* slot 1 is the root's, and slot 0 no node's: node ids start at 2 */
    slot_pool_init(&t->pool, &state->hdr->node_high, FUSE_ROOT_ID + 1, STATE_NODE_SLOTS,
                   &state->nodes[0].state, sizeof(NodeRec));
    if (atomic_load(&state->hdr->next_generation) == 0)
        atomic_store(&state->hdr->next_generation, 1);
    if (state->attached)
        nodes_revive(fs);
    return 0;
}

void node_table_destroy(struct ckptfs *fs)
{
    NodeTable *t = &fs->nodes;
    if (!t->backing)
        return;
    /* every node but the root has a slot, also those no key finds any more
     * (stale, or left by a previous daemon) */
    g_hash_table_destroy(t->backing);
    g_hash_table_destroy(t->virtuals);
    t->backing = t->virtuals = NULL;
    uint32_t high = t->state ? atomic_load(&t->state->hdr->node_high) : 0;
    for (uint32_t i = FUSE_ROOT_ID + 1; i < high && t->by_slot; i++)
        if (t->by_slot[i])
            node_free(fs, t->by_slot[i]);
    if (t->root)
        node_free(fs, t->root);
    t->root = NULL;
    /* whatever is left in the cache belonged to freed nodes */
    GList *l;
    while ((l = g_queue_pop_head_link(&fs->fdcache.lru))) {
        FdEntry *e = l->data;
        fdentry_unref_locked(e);
    }
    g_hash_table_destroy(fs->fdcache.map);
    fs->fdcache.map = NULL;
    g_mutex_clear(&fs->fdcache.lock);
    g_mutex_clear(&t->lock);
    slot_pool_clear(&t->pool);
    if (t->by_slot)
        munmap(t->by_slot, (size_t)STATE_NODE_SLOTS * sizeof(Node *));
    t->by_slot = NULL;
}

guint64 node_table_count(struct ckptfs *fs)
{
    g_mutex_lock(&fs->nodes.lock);
    guint64 c = fs->nodes.count;
    g_mutex_unlock(&fs->nodes.lock);
    return c;
}

CkNs node_ns(struct ckptfs *fs, Node *n)
{
    g_mutex_lock(&fs->nodes.lock);
    CkNs ns = n->ns;
    g_mutex_unlock(&fs->nodes.lock);
    return ns;
}

void node_set_ns(struct ckptfs *fs, Node *n, CkNs ns)
{
    g_mutex_lock(&fs->nodes.lock);
    n->ns = ns;
    node_sync_locked(n);
    g_mutex_unlock(&fs->nodes.lock);
}

Node *node_find_backing(struct ckptfs *fs, dev_t dev, ino_t ino)
{
    NodeKey k = {dev, ino};
    g_mutex_lock(&fs->nodes.lock);
    Node *n = g_hash_table_lookup(fs->nodes.backing, &k);
    g_mutex_unlock(&fs->nodes.lock);
    return n;
}

void node_keep_removed_dir(struct ckptfs *fs, int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return; /* not a directory, or nothing there */
    struct stat st;
    bool kept = false;
    if (fstat(fd, &st) == 0) {
        NodeKey k = {st.st_dev, st.st_ino};
        g_mutex_lock(&fs->nodes.lock);
        Node *n = g_hash_table_lookup(fs->nodes.backing, &k);
        if (n && n->pinned_fd < 0) {
            /* node_fd reads it without the lock: an fd, or -1 and the handle */
            __atomic_store_n(&n->pinned_fd, fd, __ATOMIC_RELEASE);
            kept = true;
        }
        g_mutex_unlock(&fs->nodes.lock);
    }
    if (!kept)
        close(fd);
}

void node_ref(struct ckptfs *fs, Node *n, uint64_t count)
{
    g_mutex_lock(&fs->nodes.lock);
    n->nlookup += count;
    node_sync_locked(n);
    for (uint64_t i = 0; i < count; i++)
        inflight_note(INFLIGHT_NODE, n->slot);
    g_mutex_unlock(&fs->nodes.lock);
}

/* The end of a find-or-add, called with the table lock held and releasing
 * it: a lookup reference on n, the node found in `table` (fresh is freed),
 * or, when n is NULL, fresh added under key as a new node. */
static Node *node_adopt_locked(struct ckptfs *fs, GHashTable *table, gpointer key, Node *n,
                               Node *fresh)
{
    NodeTable *t = &fs->nodes;
    if (n) {
        n->nlookup++;
        node_sync_locked(n);
        inflight_note(INFLIGHT_NODE, n->slot);
        g_mutex_unlock(&t->lock);
        node_free(fs, fresh);
        return n;
    }
    fresh->generation = atomic_fetch_add(&t->state->hdr->next_generation, 1);
    fresh->nlookup = 1;
    g_hash_table_insert(table, key, fresh);
    rec_take_locked(t, fresh);
    inflight_note(INFLIGHT_NODE, fresh->slot);
    t->count++;
    g_mutex_unlock(&t->lock);
    return fresh;
}

/* Puts `fresh` (a new BACKING node with its handle or pinned fd) into the
 * table, or takes a reference on the node already there for its key.
 * Returns the node now in the table; frees fresh if it was not used. */
static Node *node_insert(struct ckptfs *fs, Node *fresh, bool *inserted)
{
    NodeTable *t = &fs->nodes;
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, &fresh->key);
    /* a stale node is replaced unless its handle shows the same object (a
     * pinned descriptor of a gone object never comes back); so is one whose
     * handle differs (another generation: the inode number was recycled) */
    if (n && (n->type != fresh->type ||
              (n->stale && (!n->handle || !handle_equal(n->handle, fresh->handle))) ||
              (n->handle && fresh->handle && !handle_equal(n->handle, fresh->handle)))) {
        /* the inode number was recycled for another object while the kernel
         * still holds the old node: the old node stays stale (ESTALE) */
        n->stale = true;
        node_sync_locked(n);
        g_hash_table_remove(t->backing, &n->key);
        n = NULL;
    }
    *inserted = !n;
    return node_adopt_locked(fs, t->backing, &fresh->key, n, fresh);
}

/* Finds or adds the node of the object open as fd (any kind of descriptor),
 * found as `name` in a directory of namespace pns.  When cache_fd, fd is an
 * O_PATH descriptor handed over to the descriptor cache (or closed). */
static int node_from_fd(struct ckptfs *fs, CkNs pns, const char *name, int fd, bool cache_fd,
                        struct stat *st, Node **out)
{
    if (fstat(fd, st) < 0) {
        int err = -errno;
        if (cache_fd)
            close(fd);
        return err;
    }
    Node *fresh = node_new(fs, NODE_BACKING, st->st_mode);
    fresh->key = (NodeKey){st->st_dev, st->st_ino};
    fresh->ns = ck_ns_child(pns, name, fs->opt.views_name);
    /* an O_TMPFILE file has no name yet, and a handle of an inode without
     * links does not open (ESTALE): it keeps its descriptor */
    int err = st->st_nlink == 0 ? node_pin_fd(fresh, fd) : node_set_handle_from_fd(fs, fresh, fd);
    if (err) {
        if (cache_fd)
            close(fd);
        node_free(fs, fresh);
        return err;
    }
    bool inserted;
    Node *n = node_insert(fs, fresh, &inserted);
    if (cache_fd) {
        if (inserted && n->handle)
            fdcache_insert(fs, n, fd, NULL);
        else
            close(fd);
    }
    *out = n;
    return 0;
}

/* The fast path for a new object: its handle straight from the name, two
 * system calls in all.  Only taken when the handle provably names the
 * object just stat'ed: handles of type FILEID_INO32_GEN (ext4, xfs with 32-bit
 * inodes, ...) carry the inode number, which must be st_ino; a name replaced
 * between the two calls is caught there.  Returns NULL when not usable. */
static Node *node_by_name_handle(struct ckptfs *fs, CkNs pns, int dirfd, const char *name,
                                 const struct stat *st)
{
    if (!fs->handles)
        return NULL;
    HandleBuf h;
    int mnt;
    if (handle_get(dirfd, name, 0, &h, &mnt) != 0 || mnt != fs->nodes.root_mount_id)
        return NULL;
    uint32_t ino32;
    if (h.fh.handle_type != 1 /* FILEID_INO32_GEN */ || h.fh.handle_bytes != 8)
        return NULL;
    memcpy(&ino32, h.fh.f_handle, sizeof ino32);
    if (ino32 != (uint32_t)st->st_ino || st->st_ino > UINT32_MAX)
        return NULL;
    Node *n = node_new(fs, NODE_BACKING, st->st_mode);
    n->key = (NodeKey){st->st_dev, st->st_ino};
    n->ns = ck_ns_child(pns, name, fs->opt.views_name);
    n->handle = handle_dup(&h.fh);
    return n;
}

int node_lookup_backing(struct ckptfs *fs, Node *parent, int dirfd, const char *name,
                        struct stat *st, Node **out)
{
    NodeTable *t = &fs->nodes;
    if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    NodeKey k = {st->st_dev, st->st_ino};
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, &k);
    if (n && !n->stale && (n->type == (st->st_mode & S_IFMT))) {
        n->nlookup++;
        /* An object with one name is where its path says it is now: a
         * directory moved behind the mount's back (or by an audited rename)
         * takes its new namespace at the next lookup.  An object with several
         * names keeps the namespace it was first found under (DESIGN-NOTES
         * "Namespaces"). */
        if (S_ISDIR(st->st_mode) || st->st_nlink == 1)
            n->ns = ck_ns_child(parent->ns, name, fs->opt.views_name);
        node_sync_locked(n);
        inflight_note(INFLIGHT_NODE, n->slot);
        g_mutex_unlock(&t->lock);
        *out = n;
        return 0;
    }
    CkNs pns = parent->ns;
    g_mutex_unlock(&t->lock);

    Node *fresh = node_by_name_handle(fs, pns, dirfd, name, st);
    if (fresh) {
        bool inserted;
        *out = node_insert(fs, fresh, &inserted);
        return 0;
    }

    /* A new object: pin down exactly the object we look at, then take its handle. */
    int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return node_from_fd(fs, pns, name, fd, true, st, out);
}

int node_lookup_fd(struct ckptfs *fs, Node *parent, const char *name, int fd, struct stat *st,
                   Node **out)
{
    return node_from_fd(fs, node_ns(fs, parent), name, fd, false, st, out);
}

void node_forget(struct ckptfs *fs, Node *n, uint64_t count)
{
    NodeTable *t = &fs->nodes;
    g_mutex_lock(&t->lock);
    if (n == t->root) {
        g_mutex_unlock(&t->lock);
        return;
    }
    /* a reference taken earlier in this request, given back (the kernel's
     * own forgets are not journaled) */
    for (uint64_t i = 0; i < count; i++)
        inflight_unnote(INFLIGHT_NODE, n->slot);
    if (count > n->nlookup) {
        g_warning("ckptfs: forget of %" G_GUINT64_FORMAT
                  " references on a node holding %" G_GUINT64_FORMAT,
                  count, n->nlookup);
        count = n->nlookup;
    }
    n->nlookup -= count;
    n->revived = MIN(n->revived, n->nlookup);
    if (n->nlookup > 0) {
        node_sync_locked(n);
        g_mutex_unlock(&t->lock);
        return;
    }
    rec_give_locked(t, n);
    /* Erase only if the table still maps the key to this node: a recycled
     * inode number may already belong to a newer node. */
    if (n->kind == NODE_BACKING) {
        if (g_hash_table_lookup(t->backing, &n->key) == n)
            g_hash_table_remove(t->backing, &n->key);
    } else if (n->vkey && g_hash_table_lookup(t->virtuals, n->vkey) == n) {
        g_hash_table_remove(t->virtuals, n->vkey);
    }
    t->count--;
    g_mutex_unlock(&t->lock);
    node_free(fs, n);
}

void node_forget_revived(struct ckptfs *fs, Node *n)
{
    g_mutex_lock(&fs->nodes.lock);
    uint64_t count = n->revived;
    g_mutex_unlock(&fs->nodes.lock);
    if (count)
        node_forget(fs, n, count);
}

Node *node_get_virtual(struct ckptfs *fs, const char *vkey, void (*make)(Node *n, void *ctx),
                       void *ctx)
{
    NodeTable *t = &fs->nodes;
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->virtuals, vkey);
    if (n && n->vdata) {
        n->nlookup++;
        node_sync_locked(n);
        inflight_note(INFLIGHT_NODE, n->slot);
        g_mutex_unlock(&t->lock);
        return n;
    }
    g_mutex_unlock(&t->lock);

    Node *fresh = node_new(fs, NODE_VIRTUAL, 0);
    fresh->vkey = g_strdup(vkey);
    fresh->ns = (CkNs){CK_NS_VIEWS, NULL, CK_PLACE_OTHER};
    make(fresh, ctx);

    g_mutex_lock(&t->lock);
    n = g_hash_table_lookup(t->virtuals, vkey);
    if (n && !n->vdata && n->kind == fresh->kind) {
        /* a node a previous daemon left (nodes_revive): it gets its views
         * data back, and keeps its id, generation and number */
        n->vdata = g_steal_pointer(&fresh->vdata);
        n->vdata_free = fresh->vdata_free;
        if (!n->handle && fresh->handle) {
            n->handle = g_steal_pointer(&fresh->handle);
            n->stale = false;
        }
    } else if (n && !n->vdata) {
        g_hash_table_remove(t->virtuals, vkey); /* now another kind of entry */
        n = NULL;
    }
    return node_adopt_locked(fs, t->virtuals, fresh->vkey, n, fresh);
}

fuse_ino_t node_virtual_ino(struct ckptfs *fs, const char *vkey)
{
    g_mutex_lock(&fs->nodes.lock);
    Node *n = g_hash_table_lookup(fs->nodes.virtuals, vkey);
    fuse_ino_t ino = n ? node_ino(&fs->nodes, n) : 0;
    g_mutex_unlock(&fs->nodes.lock);
    return ino;
}

void node_unlist_virtual(struct ckptfs *fs, const char *vkey, Node *n)
{
    g_mutex_lock(&fs->nodes.lock);
    if (g_hash_table_lookup(fs->nodes.virtuals, vkey) == n)
        g_hash_table_remove(fs->nodes.virtuals, vkey);
    g_mutex_unlock(&fs->nodes.lock);
}

bool node_is_stale(struct ckptfs *fs, Node *n)
{
    g_mutex_lock(&fs->nodes.lock);
    bool s = n->stale || (!n->handle && n->pinned_fd < 0);
    g_mutex_unlock(&fs->nodes.lock);
    return s;
}

bool node_unchanged_since_open(struct ckptfs *fs, Node *n, const struct stat *st)
{
    g_mutex_lock(&fs->nodes.lock);
    bool same =
        n->open_seen && n->open_size == st->st_size && n->open_mtime.tv_sec == st->st_mtim.tv_sec &&
        n->open_mtime.tv_nsec == st->st_mtim.tv_nsec &&
        n->open_ctime.tv_sec == st->st_ctim.tv_sec && n->open_ctime.tv_nsec == st->st_ctim.tv_nsec;
    n->open_seen = true;
    n->open_size = st->st_size;
    n->open_mtime = st->st_mtim;
    n->open_ctime = st->st_ctim;
    g_mutex_unlock(&fs->nodes.lock);
    return same;
}

void node_note_release(struct ckptfs *fs, Node *n, const struct stat *st)
{
    g_mutex_lock(&fs->nodes.lock);
    n->open_seen = true;
    n->open_size = st->st_size;
    n->open_mtime = st->st_mtim;
    n->open_ctime = st->st_ctim;
    g_mutex_unlock(&fs->nodes.lock);
}

void node_open_count(struct ckptfs *fs, Node *n, int delta)
{
    g_mutex_lock(&fs->nodes.lock);
    n->nopen += delta;
    g_mutex_unlock(&fs->nodes.lock);
}

int node_nopen(struct ckptfs *fs, Node *n)
{
    g_mutex_lock(&fs->nodes.lock);
    int v = n->nopen;
    g_mutex_unlock(&fs->nodes.lock);
    return v;
}
