/* The nodes a previous daemon left in the slots of the state memfd (it was
 * killed, or handed the connection over): the kernel holds their ids and
 * will use them.  The attach sequence (fs/attach.c) calls these. */
#include "nodes-private.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "intern.h"

Node *node_from_rec(const State *s, uint32_t slot, const NodeRec *r)
{
    bool text = r->text_len != STATE_TEXT_LOST;
    size_t room = 0;
    const char *key = r->kind != NODE_BACKING && text && r->text_len < STATE_LONG_KEY_TEXT
                          ? state_key_text(s, slot, r->text_len, &room)
                          : NULL;
    /* another daemon's key: whole, or the node is lost */
    g_autofree char *vkey = key && memchr(key, '\0', room) ? vkey_from_rec(s, key) : NULL;
    Node *n = vkey ? node_new_view((NodeKind)r->kind, (mode_t)r->type, vkey)
                   : node_new((NodeKind)r->kind, (mode_t)r->type);
    if (vkey)
        n->view->vino = (ino_t)s->keys[slot].vino;
    n->generation = r->generation;
    n->key = (NodeKey){(dev_t)r->dev, (ino_t)r->ino};
    n->ns = (CkNs){.kind = (CkNsKind)r->ns_kind, .place = (CkPlace)r->ns_place};
    if (n->kind == NODE_BACKING) {
        const char *job = text ? state_job(s, r->job) : NULL;
        if (n->ns.kind == CK_NS_JOB)
            n->ns.job = job ? ck_intern(job) : NULL;
    }
    /* a length past the record's room is not a handle: the node is lost */
    if (r->handle_len && r->handle_len <= STATE_HANDLE_BYTES)
        nhandle_set(&n->handle, r->handle_type, r->handle, r->handle_len);
    return n;
}

void node_table_revive(NodeTable *t)
{
    State *state = t->state;
    uint32_t high = atomic_load(&state->hdr->node_high);
    g_autofree guint8 *data = node_rec_pages(t);
    guint lost = 0;
    for (uint32_t i = FUSE_ROOT_ID + 1; i < high; i++) {
        NodeRec *r = &state->nodes[i];
        if (!state_slot_has_data(data, sizeof *r, i) ||
            atomic_load_explicit(&r->state, memory_order_acquire) != SLOT_USED)
            continue;
        Node *n = node_from_rec(state, i, r);
        n->nlookup = n->revived = r->nlookup;
        n->stale = r->stale;
        n->nameless_open = r->nameless_open != 0;
        if (r->backing_id || r->backing_refs || r->cached_opens) {
            NodeOpen *o = node_open_state(n);
            o->backing_id = r->backing_id;
            o->backing_refs = r->backing_refs;
            o->cached_opens = r->cached_opens;
        }
        if ((n->kind != NODE_VIRTUAL && !nhandle_present(&n->handle)) ||
            (n->ns.kind == CK_NS_JOB && !n->ns.job) || (n->kind != NODE_BACKING && !n->view)) {
            n->stale = true; /* kept no way to find it again: ESTALE, the kernel looks again */
            lost++;
            g_debug("ckptfs: node %u (kind %d, %s) has no way back", i, (int)n->kind,
                    n->view ? n->view->vkey : "-");
        }
        n->slot = i;
        t->by_slot[i] = n;
        node_counted_locked(t);
        if (n->kind == NODE_BACKING) {
            Node *old = g_hash_table_lookup(t->backing, &n->key);
            if (!old || (old->stale && !n->stale))
                g_hash_table_replace(t->backing, &n->key, n);
        } else if (n->view && !virtual_lookup_locked(t, n->view->vkey)) {
            g_hash_table_add(t->virtuals, n->view->vkey);
        }
    }
    g_message("ckptfs: attached to the live connection: %" G_GUINT64_FORMAT
              " nodes the kernel holds found again%s",
              t->count, lost ? " (some without a way back: they answer ESTALE)" : "");
}

void node_adopt_held(NodeTable *t, uint32_t slot, uint64_t gen, int fd)
{
    struct stat st;
    bool object = fstat(fd, &st) == 0;
    int copy = t->holder ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    g_mutex_lock(&t->lock);
    Node *n = slot > FUSE_ROOT_ID && slot < STATE_NODE_SLOTS ? t->by_slot[slot] : NULL;
    bool take = object && n && n->kind == NODE_BACKING && n->generation == gen &&
                n->pinned_fd < 0 && n->key.dev == st.st_dev && n->key.ino == st.st_ino;
    bool again = false;
    if (take) {
        /* node_fd reads it without the lock: an fd, or -1 and the handle */
        __atomic_store_n(&n->pinned_fd, fd, __ATOMIC_RELEASE);
        /* revival took it as lost for want of a handle: it is found */
        if (n->stale && !t->state->nodes[slot].stale)
            n->stale = false;
        /* the holder offered it: it holds it again, for the next */
        again = copy >= 0 && node_hold_locked(t, n, copy);
    }
    g_mutex_unlock(&t->lock);
    if (!take)
        close(fd);
    if (!again && copy >= 0)
        close(copy);
}

Node *node_of_slot(NodeTable *t, uint32_t slot)
{
    if (slot <= FUSE_ROOT_ID || slot >= STATE_NODE_SLOTS)
        return NULL;
    g_mutex_lock(&t->lock);
    Node *n = t->by_slot[slot];
    g_mutex_unlock(&t->lock);
    return n;
}

void node_forget_revived(NodeTable *t, Node *n)
{
    g_mutex_lock(&t->lock);
    uint64_t count = n->revived;
    /* the kernel may still send a FORGET of these references: a node
     * brought back under this id by a file handle would lose its own */
    n->no_export = count >= n->nlookup;
    g_mutex_unlock(&t->lock);
    if (count)
        node_forget(t, n, count);
}

guint64 node_table_count_bound(NodeTable *t)
{
    guint64 bound = 0;
    g_mutex_lock(&t->lock);
    uint32_t high = atomic_load(&t->state->hdr->node_high);
    for (uint32_t i = FUSE_ROOT_ID; i < high && i < STATE_NODE_SLOTS; i++) {
        const NodeOpen *o = t->by_slot[i] ? g_atomic_pointer_get(&t->by_slot[i]->open) : NULL;
        if (o && o->backing_id > 0)
            bound++;
    }
    g_mutex_unlock(&t->lock);
    return bound;
}
