/* The node table: finding and adding backing nodes, their references,
 * slots and namespaces, staleness, opens and passthrough bindings. */
#include "nodes-private.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "intern.h"
#include "outlive/inflight.h"

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

/* ---- the node's slot in the state memfd ---- */

static uint32_t job_number_locked(NodeTable *t, const char *job);

/* vkey as its parent's slot and generation and its own name, for a key
 * too long for its record even with its job as a number (a state tree
 * nested deep): the kernel holds a node's parent as long as the node, so
 * the parent's record is there for the daemon that takes over to read
 * (were the parent's FORGET served first, its generation tells, and the
 * node is lost).  NULL when the parent has no record to be found by.  The
 * table's lock held. */
static char *vkey_by_parent_locked(NodeTable *t, const char *vkey)
{
    const char *path = node_vkey_path(vkey);
    const char *slash = strrchr(path, '/');
    if (!slash)
        return NULL;
    g_autofree char *dir = g_strndup(path, (gsize)(slash - path));
    const Node *p = virtual_lookup_locked(t, dir);
    if (!p || !p->slot || t->state->nodes[p->slot].text_len == STATE_TEXT_LOST)
        return NULL;
    return g_strdup_printf("%.*s%c%x:%" G_GINT64_MODIFIER "x%s", (int)(path - vkey), vkey,
                           VKEY_PARENT, p->slot, p->generation, slash);
}

/* A views node's key and number, in the slot's KeyRec.  A key too long
 * for it names its job by its number in the job table instead, after
 * VKEY_JOB_NUMBER, or else its parent's record (vkey_by_parent_locked):
 * the first of the three that fits the KeyRec, or else the slot's
 * LongKeyRec (a job id is up to 128 bytes).  No key of the views begins
 * its path with either byte, and a daemon that does not know the form
 * finds no such node, as it would find none for a key it could not keep. */
static void rec_put_key(NodeTable *t, NodeRec *r, uint32_t slot, const NodeView *v)
{
    if (!v) {
        r->text_len = STATE_TEXT_LOST;
        return;
    }
    const char *forms[3] = {v->vkey, NULL, NULL};
    g_autofree char *by_job = NULL, *by_parent = NULL;
    size_t len = strlen(v->vkey);
    if (len >= STATE_KEY_TEXT) {
        const char *job = node_vkey_path(v->vkey);
        const char *slash = strchr(job, '/');
        g_autofree char *id = slash ? g_strndup(job, (gsize)(slash - job)) : g_strdup(job);
        uint32_t number = job_number_locked(t, ck_intern(id));
        if (number)
            forms[1] = by_job = g_strdup_printf("%.*s%c%x%s", (int)(job - v->vkey), v->vkey,
                                                VKEY_JOB_NUMBER, number, slash ? slash : "");
        if (!by_job || strlen(by_job) >= STATE_KEY_TEXT)
            forms[2] = by_parent = vkey_by_parent_locked(t, v->vkey);
    }
    /* the first form that fits the short record, else the first that fits the long one */
    static const size_t rooms[] = {STATE_KEY_TEXT, STATE_LONG_KEY_TEXT};
    const char *text = NULL;
    for (size_t k = 0; k < G_N_ELEMENTS(rooms) && !text; k++)
        for (size_t i = 0; i < G_N_ELEMENTS(forms) && !text; i++)
            if (forms[i] && strlen(forms[i]) < rooms[k])
                text = forms[i];
    if (!text) {
        r->text_len = STATE_TEXT_LOST; /* the node cannot be found again */
        return;
    }
    len = strlen(text);
    t->state->keys[slot].vino = (uint64_t)v->vino;
    size_t room;
    memcpy((char *)state_key_text(t->state, slot, len, &room), text, len + 1);
    r->text_len = (uint16_t)len;
}

/* The parents a key may be named through, at most: a bound of ours,
 * deeper than any state tree a restore names (a path of PATH_MAX bytes
 * has at most 2048 components). */
#define VKEY_PARENTS_MAX 2048

static char *vkey_expand(const State *s, const char *text, int depth)
{
    const char *job = node_vkey_path(text);
    if (job[0] == VKEY_PARENT) {
        char *end = NULL;
        guint64 slot = g_ascii_strtoull(job + 1, &end, 16), gen = 0;
        if (end == job + 1 || *end != ':' || slot <= FUSE_ROOT_ID || slot >= STATE_NODE_SLOTS ||
            depth >= VKEY_PARENTS_MAX)
            return NULL;
        const char *num = end + 1;
        gen = g_ascii_strtoull(num, &end, 16);
        /* a record never written, or given back, is not read: a hole of
         * the memfd read through the mapping would be made again */
        if (slot >= atomic_load(&s->hdr->node_high) ||
            !state_region_has_data(s, s->nodes, (size_t)slot * sizeof(NodeRec)))
            return NULL;
        const NodeRec *r = &s->nodes[slot];
        if (end == num || *end != '/' ||
            atomic_load_explicit(&r->state, memory_order_acquire) != SLOT_USED ||
            r->kind == STATE_REC_BACKING || r->generation != gen ||
            r->text_len == STATE_TEXT_LOST || r->text_len >= STATE_LONG_KEY_TEXT)
            return NULL;
        size_t room;
        const char *ptext = state_key_text(s, (uint32_t)slot, r->text_len, &room);
        if (!memchr(ptext, '\0', room))
            return NULL;
        g_autofree char *parent = vkey_expand(s, ptext, depth + 1);
        return parent ? g_strdup_printf("%.*s%s%s", (int)(job - text), text, node_vkey_path(parent),
                                        end)
                      : NULL;
    }
    if (job[0] != VKEY_JOB_NUMBER)
        return g_strdup(text);
    char *end = NULL;
    guint64 number = g_ascii_strtoull(job + 1, &end, 16);
    const char *id = end != job + 1 && number <= G_MAXUINT32 && (*end == '/' || !*end)
                         ? state_job(s, (uint32_t)number)
                         : NULL;
    return id ? g_strdup_printf("%.*s%s%s", (int)(job - text), text, id, end) : NULL;
}

char *vkey_from_rec(const State *s, const char *text)
{
    return vkey_expand(s, text, 0);
}

/* job's number in the state's job table, written there when new; 0 when
 * the table is full.  The table's lock held. */
static uint32_t job_number_locked(NodeTable *t, const char *job)
{
    uint32_t number = GPOINTER_TO_UINT(g_hash_table_lookup(t->jobs, job));
    if (!number && (number = state_job_add(t->state, job)) != 0)
        g_hash_table_insert(t->jobs, (gpointer)job, GUINT_TO_POINTER(number));
    return number;
}

/* The job table's entries a previous daemon (or mount) wrote, by their
 * interned ids, so that a job is written once. */
static void jobs_init(NodeTable *t)
{
    t->jobs = g_hash_table_new(g_direct_hash, g_direct_equal);
    uint32_t high = atomic_load(&t->state->hdr->job_high);
    for (uint32_t i = 1; i <= high; i++) {
        const char *job = state_job(t->state, i);
        const char *id = job ? ck_intern(job) : NULL;
        if (id && !g_hash_table_contains(t->jobs, id))
            g_hash_table_insert(t->jobs, (gpointer)id, GUINT_TO_POINTER(i));
    }
}

void node_sync_locked(NodeTable *t, Node *n)
{
    NodeRec *r = node_rec(t, n);
    if (!r)
        return;
    r->nlookup = n->nlookup;
    r->ns_kind = (uint8_t)n->ns.kind;
    r->ns_place = (uint8_t)n->ns.place;
    if (n->kind == NODE_BACKING) {
        bool job = n->ns.kind == CK_NS_JOB && n->ns.job;
        r->job = job ? job_number_locked(t, n->ns.job) : 0;
        r->text_len = job && !r->job ? STATE_TEXT_LOST : 0;
    }
    r->stale = n->stale;
    r->nameless_open = n->nameless_open;
    const NodeOpen *o = g_atomic_pointer_get(&n->open);
    r->backing_id = o ? o->backing_id : 0;
    r->backing_refs = o ? o->backing_refs : 0;
    r->cached_opens = o ? o->cached_opens : 0;
}

void rec_fill_locked(NodeTable *t, Node *n, uint32_t slot)
{
    NodeRec *r = &t->state->nodes[slot];
    retired_forget_locked(t, slot); /* the record names another node now */
    memset((char *)r + sizeof r->state, 0, sizeof *r - sizeof r->state);
    r->kind = (uint8_t)n->kind;
    r->type = n->type;
    r->generation = n->generation;
    r->dev = (uint64_t)n->key.dev;
    r->ino = (uint64_t)n->key.ino;
    size_t hlen;
    const uint8_t *hb = nhandle_bytes(&n->handle, &hlen);
    if (hlen && hlen <= STATE_HANDLE_BYTES) {
        r->handle_len = (uint8_t)hlen;
        r->handle_type = n->handle.type;
        memcpy(r->handle, hb, hlen);
    }
    if (n->kind != NODE_BACKING)
        rec_put_key(t, r, slot, n->view);
    n->slot = slot;
    node_sync_locked(t, n);
    atomic_store_explicit(&r->state, SLOT_USED, memory_order_release);
    t->by_slot[slot] = n;
}

/* Gives n, just put into the table, a slot and writes the slot whole; its
 * state goes last, so a daemon killed meanwhile leaves the slot free. */
static void rec_take_locked(NodeTable *t, Node *n)
{
    uint32_t slot = slot_pool_take(&t->pool);
    if (!slot)
        g_error("ckptfs: the kernel holds %u nodes, all the state memfd has room for",
                STATE_NODE_SLOTS);
    rec_fill_locked(t, n, slot);
}

void node_unpin_count_locked(NodeTable *t, Node *n)
{
    if (n->pinned_unheld) {
        n->pinned_unheld = false;
        t->unheld_pins--;
    }
}

bool node_hold_locked(NodeTable *t, Node *n, int fd)
{
    /* a directory holds no data: files come first */
    bool spare = S_ISDIR(n->type);
    if (!t->holder || n->held || !n->slot || t->held >= (spare ? t->held_max / 2 : t->held_max))
        return false;
    /* the node pins a duplicate too, so that a holder that dies (a killed
     * supervisor) can be replaced by one given it again (node_each_held) */
    int pin = n->pinned_fd < 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    /* under the lock: its let-go (node_let_go_locked) cannot come first */
    if ((n->held = t->holder(t->holder_ctx, n->slot, n->generation, fd, spare))) {
        t->held++;
        node_unpin_count_locked(t, n); /* pinned before: counted as held now */
    }
    /* a file the holder could not take (it died, or had no room) is pinned
     * all the same, within the same bound: the holder that adopts this
     * daemon gets it then */
    else if (!spare && pin >= 0 && t->unheld_pins < t->held_max) {
        n->pinned_unheld = true;
        t->unheld_pins++;
    }
    if (pin >= 0 && (n->held || n->pinned_unheld)) {
        /* node_fd reads it without the lock: an fd, or -1 and the handle */
        __atomic_store_n(&n->pinned_fd, pin, __ATOMIC_RELEASE);
        pin = -1;
    }
    if (pin >= 0)
        close(pin);
    return true;
}

void node_each_held(NodeTable *t, void (*each)(void *ctx, uint32_t slot, uint64_t gen, int fd),
                    void *ctx)
{
    typedef struct {
        uint32_t slot;
        uint64_t gen;
        int fd;
    } One;
    g_autoptr(GArray) held = g_array_new(FALSE, FALSE, sizeof(One));
    g_mutex_lock(&t->lock);
    uint32_t high = atomic_load(&t->state->hdr->node_high);
    /* those held first, then those pinned without a name while no holder
     * took them (a removed directory, a file made while there was none) */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = FUSE_ROOT_ID + 1; i < high && i < STATE_NODE_SLOTS; i++) {
            const Node *n = t->by_slot[i];
            One o = {i, n ? n->generation : 0, -1};
            if (n && (pass ? !n->held && n->nameless_open : n->held) && n->pinned_fd >= 0 &&
                held->len < t->held_max && (o.fd = fcntl(n->pinned_fd, F_DUPFD_CLOEXEC, 0)) >= 0)
                g_array_append_val(held, o);
        }
    g_mutex_unlock(&t->lock);
    for (guint i = 0; i < held->len; i++) {
        const One *o = &g_array_index(held, One, i);
        each(ctx, o->slot, o->gen, o->fd);
    }
}

void node_let_go_locked(NodeTable *t, Node *n)
{
    if (!n->held)
        return;
    n->held = false;
    t->held--;
    t->holder(t->holder_ctx, n->slot, n->generation, -1, false);
}

/* The slot goes back to the pool with its record intact: a file handle
 * may name the node again (export.c). */
static void rec_give_locked(NodeTable *t, Node *n)
{
    NodeRec *r = node_rec(t, n);
    if (!r)
        return;
    if (n->no_export)
        r->handle_len = 0;
    node_let_go_locked(t, n);
    node_unpin_count_locked(t, n); /* its pin goes with the node */
    atomic_store_explicit(&r->state, SLOT_FREE, memory_order_release);
    t->by_slot[n->slot] = NULL;
    slot_pool_give(&t->pool, n->slot);
    retired_note_locked(t, n->slot);
    n->slot = 0;
}

int node_mark_stale(NodeTable *t, Node *n, int err)
{
    if (err == -ESTALE && n != t->root) {
        g_mutex_lock(&t->lock);
        n->stale = true;
        node_sync_locked(t, n);
        g_mutex_unlock(&t->lock);
        fdcache_drop(&t->fdcache, n);
    }
    return err;
}

/* ---- file handles ---- */

int fhandle_of(int dirfd, const char *name, int flags, HandleBuf *h, int *mnt)
{
    h->fh.handle_bytes = MAX_HANDLE_SZ;
    *mnt = 0;
    return name_to_handle_at(dirfd, name, &h->fh, mnt, flags) == 0 ? 0 : -errno;
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

/* n->handle from fd's object, where the backing has handles and fd is on
 * its file system; whether it took one. */
static bool node_take_handle(NodeTable *t, Node *n, int fd)
{
    HandleBuf h;
    int mnt;
    if (!t->handles || fhandle_of(fd, "", AT_EMPTY_PATH, &h, &mnt) != 0 || mnt != t->root_mount_id)
        return false;
    nhandle_set_fh(&n->handle, &h.fh);
    return true;
}

int node_set_handle_from_fd(NodeTable *t, Node *n, int fd)
{
    if (node_take_handle(t, n, fd)) {
        n->pinned_fd = -1;
        return 0;
    }
    /* no handles here (or another file system mounted inside the backing
     * directory): keep the descriptor itself */
    return node_pin_fd(n, fd);
}

static int node_pin_fd_and_handle(NodeTable *t, Node *n, int fd)
{
    node_take_handle(t, n, fd);
    return node_pin_fd(n, fd);
}

/* ---- nodes ---- */

static Node *node_alloc(NodeKind kind, mode_t type, size_t extra)
{
    Node *n = g_malloc0(sizeof *n + extra);
    n->kind = (uint8_t)kind;
    n->type = (uint16_t)(type & S_IFMT);
    n->pinned_fd = -1;
    return n;
}

Node *node_new(NodeKind kind, mode_t type)
{
    return node_alloc(kind, type, 0);
}

G_STATIC_ASSERT(sizeof(Node) % G_ALIGNOF(NodeView) == 0);

Node *node_new_view(NodeKind kind, mode_t type, const char *vkey)
{
    size_t len = strlen(vkey);
    Node *n = node_alloc(kind, type, sizeof(NodeView) + len + 1);
    n->view = (NodeView *)(void *)(n + 1);
    memcpy(n->view->vkey, vkey, len); /* the NUL is the allocation's zero */
    return n;
}

void node_table_set_view_free(NodeTable *t, GDestroyNotify view_free)
{
    t->view_free = view_free;
}

void node_free(NodeTable *t, Node *n)
{
    fdcache_drop(&t->fdcache, n);
    if (n->pinned_fd >= 0 && n != t->root)
        close(n->pinned_fd);
    if (n->view && n->view->vdata && t->view_free)
        t->view_free(n->view->vdata);
    nhandle_clear(&n->handle);
    g_free(n->open);
    g_free(n); /* its NodeView too */
}

NodeOpen *node_open_state(Node *n)
{
    NodeOpen *o = g_atomic_pointer_get(&n->open);
    if (o)
        return o;
    NodeOpen *fresh = g_new0(NodeOpen, 1);
    if (g_atomic_pointer_compare_and_exchange(&n->open, NULL, fresh))
        return fresh;
    g_free(fresh); /* another thread's came first */
    return g_atomic_pointer_get(&n->open);
}

int node_table_init(NodeTable *t, const NodeTableSetup *s)
{
    memset(t, 0, sizeof *t);
    g_mutex_init(&t->lock);
    t->backing = g_hash_table_new(key_hash, key_equal);
    t->virtuals = g_hash_table_new(g_str_hash, g_str_equal);
    fdcache_init(&t->fdcache);
    t->root_fd = s->root_fd;
    t->mount_fd = s->mount_fd;
    t->data_mount_fd = s->data_mount_fd >= 0 ? s->data_mount_fd : s->mount_fd;
    t->views_name = s->views_name;
    t->noatime = s->noatime;
    t->state = s->state;

    struct stat st;
    if (fstat(t->root_fd, &st) < 0)
        return -errno;

    /* Probe handle support: a handle of the root that opens again. */
    HandleBuf h;
    int mnt;
    int probe_err =
        s->no_handles ? EOPNOTSUPP : -fhandle_of(t->root_fd, "", AT_EMPTY_PATH, &h, &mnt);
    if (!probe_err) {
        int fd = open_by_handle_at(t->mount_fd, &h.fh, O_PATH | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            t->handles = true;
            t->root_mount_id = mnt;
        } else {
            probe_err = errno;
        }
    }
    if (!t->handles)
        g_warning("ckptfs: %s gives no usable file handles (%s); keeping one O_PATH descriptor "
                  "per cached node, so RLIMIT_NOFILE bounds the nodes the kernel can hold",
                  s->name, g_strerror(probe_err));

    t->by_slot = mmap(NULL, (size_t)STATE_NODE_SLOTS * sizeof(Node *), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->by_slot == MAP_FAILED) {
        t->by_slot = NULL;
        return -errno;
    }

    Node *root = node_new(NODE_BACKING, st.st_mode);
    root->key.dev = st.st_dev;
    root->key.ino = st.st_ino;
    root->ns = ck_ns_root();
    root->nlookup = 1;
    root->pinned_fd = t->root_fd;
    root->generation = 0;
    root->slot = FUSE_ROOT_ID;
    t->root = root;
    g_hash_table_add(t->backing, root);
    /* slot 1 is the root's, and slot 0 no node's: node ids start at 2 */
    StateHeader *hdr = t->state->hdr;
    /* a predecessor's records, where it did not give their pages back */
    g_autofree guint8 *data = node_rec_pages(t);
    slot_pool_init(&t->pool, &hdr->node_high, FUSE_ROOT_ID + 1, STATE_NODE_SLOTS, NODE_RETIRED_KEEP,
                   &t->state->nodes[0].state, sizeof(NodeRec), data);
    if (atomic_load(&hdr->next_generation) == 0)
        atomic_store(&hdr->next_generation, 1);
    /* nothing else runs yet: no lock */
    retired_init_locked(t, s->kept, data);
    jobs_init(t);
    return 0;
}

void node_set_noatime(NodeTable *t, bool noatime)
{
    __atomic_store_n(&t->noatime, noatime, __ATOMIC_RELAXED);
}

void node_table_destroy(NodeTable *t)
{
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
            node_free(t, t->by_slot[i]);
    if (t->root)
        node_free(t, t->root);
    t->root = NULL;
    /* whatever is left in the cache belonged to freed nodes */
    fdcache_clear(&t->fdcache);
    g_mutex_clear(&t->lock);
    slot_pool_clear(&t->pool);
    retired_clear(t);
    if (t->jobs)
        g_hash_table_destroy(t->jobs);
    t->jobs = NULL;
    if (t->by_slot)
        munmap(t->by_slot, (size_t)STATE_NODE_SLOTS * sizeof(Node *));
    t->by_slot = NULL;
}

guint64 node_table_count(NodeTable *t)
{
    g_mutex_lock(&t->lock);
    guint64 c = t->count;
    g_mutex_unlock(&t->lock);
    return c;
}

CkNs node_ns(NodeTable *t, Node *n)
{
    g_mutex_lock(&t->lock);
    CkNs ns = n->ns;
    g_mutex_unlock(&t->lock);
    return ns;
}

void node_set_ns(NodeTable *t, Node *n, CkNs ns)
{
    g_mutex_lock(&t->lock);
    n->ns = ns;
    node_sync_locked(t, n);
    g_mutex_unlock(&t->lock);
}

Node *node_find_backing(NodeTable *t, dev_t dev, ino_t ino)
{
    NodeKey k = {dev, ino};
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, &k);
    g_mutex_unlock(&t->lock);
    return n;
}

void node_ref(NodeTable *t, Node *n, uint64_t count)
{
    g_mutex_lock(&t->lock);
    n->nlookup += count;
    node_sync_locked(t, n);
    for (uint64_t i = 0; i < count; i++)
        inflight_note(INFLIGHT_NODE, n->slot);
    g_mutex_unlock(&t->lock);
}

Node *node_adopt_locked(NodeTable *t, GHashTable *table, gpointer key, Node *n, Node *fresh)
{
    if (n) {
        n->nlookup++;
        node_sync_locked(t, n);
        inflight_note(INFLIGHT_NODE, n->slot);
        g_mutex_unlock(&t->lock);
        node_free(t, fresh);
        return n;
    }
    fresh->nlookup = 1;
    /* both tables are sets: the backing one of nodes (found by their first
     * field), the views one of keys */
    g_hash_table_add(table, key);
    /* an object the kernel forgot comes back under its old id, which a
     * file handle may hold (retired.c) */
    uint32_t old = table == t->backing ? retired_slot_locked(t, fresh) : 0;
    if (old) {
        fresh->generation = t->state->nodes[old].generation;
        slot_pool_claim(&t->pool, old);
        rec_fill_locked(t, fresh, old);
    } else {
        fresh->generation = atomic_fetch_add(&t->state->hdr->next_generation, 1);
        rec_take_locked(t, fresh);
    }
    inflight_note(INFLIGHT_NODE, fresh->slot);
    node_counted_locked(t);
    g_mutex_unlock(&t->lock);
    return fresh;
}

/* Puts `fresh` (a new BACKING node with its handle or pinned fd) into the
 * table, or takes a reference on the node already there for its key.
 * Returns the node now in the table; frees fresh if it was not used. */
static Node *node_insert(NodeTable *t, Node *fresh, bool *inserted)
{
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, &fresh->key);
    /* a stale node is replaced unless its handle shows the same object (a
     * pinned descriptor of a gone object never comes back); so is one whose
     * handle differs (another generation: the inode number was recycled),
     * and one with a handle when the fresh node has none for want of a
     * name: a new O_TMPFILE file, in the number of a file just unlinked
     * whose node the kernel has not forgotten yet */
    bool nameless = t->handles && !nhandle_present(&fresh->handle) && fresh->pinned_fd >= 0;
    bool had = n && nhandle_present(&n->handle);
    if (n &&
        (n->type != fresh->type ||
         (n->stale && (!had || !nhandle_equal(&n->handle, &fresh->handle))) ||
         (had && nhandle_present(&fresh->handle) && !nhandle_equal(&n->handle, &fresh->handle)) ||
         (had && nameless))) {
        /* the inode number was recycled for another object while the kernel
         * still holds the old node: the old node stays stale (ESTALE) */
        n->stale = true;
        node_sync_locked(t, n);
        g_hash_table_remove(t->backing, &n->key);
        n = NULL;
    }
    *inserted = !n;
    return node_adopt_locked(t, t->backing, &fresh->key, n, fresh);
}

int node_from_fd(NodeTable *t, CkNs ns, int fd, bool cache_fd, struct stat *st, Node **out)
{
    if (fstat(fd, st) < 0) {
        int err = -errno;
        if (cache_fd)
            close(fd);
        return err;
    }
    Node *fresh = node_new(NODE_BACKING, st->st_mode);
    fresh->key = (NodeKey){st->st_dev, st->st_ino};
    fresh->ns = ns;
    /* an O_TMPFILE file has no name yet: it keeps its descriptor, which
     * opens it on any file system, and its handle too where there is one,
     * so that the next daemon finds it while the kernel holds it (with
     * passthrough) */
    int err = st->st_nlink == 0 ? node_pin_fd_and_handle(t, fresh, fd)
                                : node_set_handle_from_fd(t, fresh, fd);
    if (err) {
        if (cache_fd)
            close(fd);
        node_free(t, fresh);
        return err;
    }
    bool inserted;
    Node *n = node_insert(t, fresh, &inserted);
    if (cache_fd) {
        if (inserted && nhandle_present(&n->handle))
            fdcache_insert(&t->fdcache, n, fd, NULL);
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
static Node *node_by_name_handle(NodeTable *t, CkNs ns, int dirfd, const char *name,
                                 const struct stat *st)
{
    if (!t->handles)
        return NULL;
    HandleBuf h;
    int mnt;
    if (fhandle_of(dirfd, name, 0, &h, &mnt) != 0 || mnt != t->root_mount_id)
        return NULL;
    uint32_t ino32;
    if (h.fh.handle_type != 1 /* FILEID_INO32_GEN */ || h.fh.handle_bytes != 8)
        return NULL;
    memcpy(&ino32, h.fh.f_handle, sizeof ino32);
    if (ino32 != (uint32_t)st->st_ino || st->st_ino > UINT32_MAX)
        return NULL;
    Node *n = node_new(NODE_BACKING, st->st_mode);
    n->key = (NodeKey){st->st_dev, st->st_ino};
    n->ns = ns;
    nhandle_set_fh(&n->handle, &h.fh);
    return n;
}

int node_lookup_backing(NodeTable *t, Node *parent, int dirfd, const char *name, const CkNs *ns,
                        struct stat *st, Node **out)
{
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
         * names keeps the namespace it was first found under (docs/DESIGN.md,
         * "Namespaces and the write policy"). */
        if (S_ISDIR(st->st_mode) || st->st_nlink == 1)
            n->ns =
                ns ? *ns : ck_ns_child_of(parent->ns, name, S_ISDIR(st->st_mode), t->views_name);
        node_sync_locked(t, n);
        inflight_note(INFLIGHT_NODE, n->slot);
        g_mutex_unlock(&t->lock);
        *out = n;
        return 0;
    }
    CkNs pns = parent->ns;
    g_mutex_unlock(&t->lock);
    CkNs child = ns ? *ns : ck_ns_child_of(pns, name, S_ISDIR(st->st_mode), t->views_name);

    Node *fresh = node_by_name_handle(t, child, dirfd, name, st);
    if (fresh) {
        bool inserted;
        *out = node_insert(t, fresh, &inserted);
        return 0;
    }

    /* A new object: pin down exactly the object we look at, then take its handle. */
    int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return node_from_fd(t, child, fd, true, st, out);
}

int node_lookup_fd(NodeTable *t, CkNs ns, int fd, struct stat *st, Node **out)
{
    return node_from_fd(t, ns, fd, false, st, out);
}

#define NODE_TRIM_MIN 4096 /* nodes: below, what a trim gives back is not worth it */

guint8 *node_rec_pages(NodeTable *t)
{
    uint32_t high = atomic_load(&t->state->hdr->node_high);
    return state_region_pages(t->state, t->state->nodes, (size_t)high * sizeof(NodeRec));
}

/* The records of slots freed before the newest NODE_RETIRED_KEEP go, with
 * the pages of the state memfd that held nothing else (a file handle
 * naming one of them is stale from now on).  The table's lock held. */
static void records_trim_locked(NodeTable *t)
{
    State *s = t->state;
    uint32_t high = atomic_load(&s->hdr->node_high);
    retired_trim_locked(t);
    g_autofree guint8 *keys = state_region_pages(s, s->keys, (size_t)high * sizeof(KeyRec));
    g_autofree guint8 *long_keys =
        state_region_pages(s, s->long_keys, (size_t)high * sizeof(LongKeyRec));
    g_autofree guint8 *recs = node_rec_pages(t);
    size_t given = state_trim_region(&t->pool, s->keys, sizeof(KeyRec), high, keys) +
                   state_trim_region(&t->pool, s->long_keys, sizeof(LongKeyRec), high, long_keys) +
                   state_trim_region(&t->pool, s->nodes, sizeof(NodeRec), high, recs);
    g_debug("ckptfs: %zu pages of forgotten nodes' records given back", given);
}

void node_forget(NodeTable *t, Node *n, uint64_t count)
{
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
        node_sync_locked(t, n);
        g_mutex_unlock(&t->lock);
        return;
    }
    rec_give_locked(t, n);
    /* Erase only if the table still maps the key to this node: a recycled
     * inode number may already belong to a newer node. */
    if (n->kind == NODE_BACKING) {
        if (g_hash_table_lookup(t->backing, &n->key) == n)
            g_hash_table_remove(t->backing, &n->key);
    } else if (node_vkey(n) && virtual_lookup_locked(t, node_vkey(n)) == n) {
        g_hash_table_remove(t->virtuals, node_vkey(n));
    }
    t->count--;
    /* The allocator keeps what nodes free in its arenas, for them to be
     * taken again; once the kernel has let go of half of what it held (a
     * walk's nodes, after the kernel's caches were dropped), that memory
     * goes back to the system. */
    bool trim = t->peak >= NODE_TRIM_MIN && t->count <= t->peak / 2;
    if (trim) {
        t->peak = t->count;
        records_trim_locked(t);
    }
    g_mutex_unlock(&t->lock);
    node_free(t, n);
    if (trim)
        malloc_trim(0);
}

void node_forget_id(NodeTable *t, fuse_ino_t ino, uint64_t count)
{
    Node *n = node_of(t, ino);
    if (n && node_ino(t, n) == ino)
        node_forget(t, n, count);
}

bool node_is_stale(NodeTable *t, Node *n)
{
    g_mutex_lock(&t->lock);
    bool s = n->stale || (!nhandle_present(&n->handle) && n->pinned_fd < 0);
    g_mutex_unlock(&t->lock);
    return s;
}

/* ---- opens ---- */

/* What keep_cache compares at the next open.  The table's lock held. */
static void open_stamp_locked(NodeOpen *o, const struct stat *st)
{
    o->open_seen = true;
    o->open_size = st->st_size;
    o->open_mtime = st->st_mtim;
    o->open_ctime = st->st_ctim;
}

bool node_unchanged_since_open(NodeTable *t, Node *n, const struct stat *st)
{
    NodeOpen *o = node_open_state(n);
    g_mutex_lock(&t->lock);
    bool same =
        o->open_seen && o->open_size == st->st_size && o->open_mtime.tv_sec == st->st_mtim.tv_sec &&
        o->open_mtime.tv_nsec == st->st_mtim.tv_nsec &&
        o->open_ctime.tv_sec == st->st_ctim.tv_sec && o->open_ctime.tv_nsec == st->st_ctim.tv_nsec;
    open_stamp_locked(o, st);
    g_mutex_unlock(&t->lock);
    return same;
}

void node_note_release(NodeTable *t, Node *n, const struct stat *st)
{
    NodeOpen *o = node_open_state(n);
    g_mutex_lock(&t->lock);
    open_stamp_locked(o, st);
    g_mutex_unlock(&t->lock);
}

void node_open_count(NodeTable *t, Node *n, int delta)
{
    g_mutex_lock(&t->lock);
    n->nopen += delta;
    g_mutex_unlock(&t->lock);
}

void node_bound_writers(Node *n, int delta)
{
    g_atomic_int_add(&node_open_state(n)->bound_writers, delta);
}

void node_buffered_opens(Node *n, int delta)
{
    NodeOpen *o = node_open_state(n);
    if (delta > 0)
        g_atomic_int_inc((gint *)&o->buffered_seq);
    g_atomic_int_add(&o->buffered_opens, delta);
}

bool node_buffered_since_last(Node *n)
{
    NodeOpen *o = g_atomic_pointer_get(&n->open);
    if (!o)
        return false; /* never opened: no buffered open, none since */
    unsigned now = (unsigned)g_atomic_int_get((gint *)&o->buffered_seq);
    unsigned before = (unsigned)g_atomic_int_exchange((gint *)&o->buffered_seen, (gint)now);
    return g_atomic_int_get(&o->buffered_opens) > 0 || before != now;
}

bool node_attrs_volatile(Node *n)
{
    NodeOpen *o = g_atomic_pointer_get(&n->open);
    return o && g_atomic_int_get(&o->bound_writers) > 0;
}

int node_nopen(NodeTable *t, Node *n)
{
    g_mutex_lock(&t->lock);
    int v = n->nopen;
    g_mutex_unlock(&t->lock);
    return v;
}

/* ---- passthrough bindings ---- */

/* A bound open joins the node's backing id, an unbound one is counted so
 * that no open is bound while it lasts; the binding is in the node's slot
 * too, so that a daemon that takes over the connection releases the id
 * when the last bound open is released.  The table's lock held. */
static int binding_join_locked(NodeTable *t, Node *n, int fresh)
{
    NodeOpen *o = node_open_state(n);
    int id = 0;
    if (o->backing_id > 0) {
        o->backing_refs++;
        id = o->backing_id;
    } else if (o->cached_opens == 0 && fresh > 0) {
        o->backing_id = fresh;
        o->backing_refs = 1;
        id = fresh;
    } else {
        o->cached_opens++;
    }
    node_sync_locked(t, n);
    return id;
}

bool node_binding_join_decided(NodeTable *t, Node *n, int *id)
{
    g_mutex_lock(&t->lock);
    const NodeOpen *o = g_atomic_pointer_get(&n->open);
    bool decided = o && (o->backing_id > 0 || o->cached_opens > 0);
    if (decided)
        *id = binding_join_locked(t, n, 0);
    g_mutex_unlock(&t->lock);
    return decided;
}

int node_binding_join(NodeTable *t, Node *n, int fresh)
{
    g_mutex_lock(&t->lock);
    int id = binding_join_locked(t, n, fresh);
    g_mutex_unlock(&t->lock);
    return id;
}

int node_binding_leave(NodeTable *t, Node *n, int backing_id)
{
    int release = 0;
    g_mutex_lock(&t->lock);
    NodeOpen *o = g_atomic_pointer_get(&n->open);
    if (!o) {
        /* nothing joined: nothing to leave */
    } else if (backing_id > 0) {
        if (o->backing_refs > 0 && --o->backing_refs == 0) {
            release = o->backing_id;
            o->backing_id = 0;
        }
    } else if (o->cached_opens > 0) {
        o->cached_opens--;
    }
    node_sync_locked(t, n);
    g_mutex_unlock(&t->lock);
    return release;
}

bool node_nameless_open(NodeTable *t, Node *n)
{
    g_mutex_lock(&t->lock);
    bool v = n->nameless_open || n->unlinking;
    g_mutex_unlock(&t->lock);
    return v;
}
