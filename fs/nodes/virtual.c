/* The nodes of the views: VIRTUAL nodes and ALIAS nodes, keyed by the
 * string the views give (their path in the views). */
#include "nodes-private.h"

#include "outlive/inflight.h"

Node *node_get_virtual(NodeTable *t, const char *vkey, void (*make)(Node *n, void *ctx), void *ctx)
{
    g_mutex_lock(&t->lock);
    Node *n = virtual_lookup_locked(t, vkey);
    if (n && n->view->vdata) {
        n->nlookup++;
        node_sync_locked(t, n);
        inflight_note(INFLIGHT_NODE, n->slot);
        g_mutex_unlock(&t->lock);
        return n;
    }
    g_mutex_unlock(&t->lock);

    Node *fresh = node_new_view(NODE_VIRTUAL, 0, vkey);
    fresh->ns = (CkNs){.kind = CK_NS_VIEWS};
    make(fresh, ctx);

    g_mutex_lock(&t->lock);
    n = virtual_lookup_locked(t, vkey);
    if (n && !n->view->vdata && n->kind == fresh->kind) {
        /* a node a previous daemon left (node_table_revive): it gets its
         * views data back, and keeps its id, generation and number */
        g_atomic_pointer_set(&n->view->vdata, g_steal_pointer(&fresh->view->vdata));
        if (!nhandle_present(&n->handle) && nhandle_present(&fresh->handle)) {
            nhandle_move(&n->handle, &fresh->handle);
            n->stale = false;
        }
    } else if (n && !n->view->vdata) {
        g_hash_table_remove(t->virtuals, vkey); /* now another kind of entry */
        n = NULL;
    }
    return node_adopt_locked(t, t->virtuals, fresh->view->vkey, n, fresh);
}

fuse_ino_t node_virtual_ino(NodeTable *t, const char *vkey)
{
    g_mutex_lock(&t->lock);
    Node *n = virtual_lookup_locked(t, vkey);
    fuse_ino_t ino = n ? node_ino(t, n) : 0;
    g_mutex_unlock(&t->lock);
    return ino;
}

void node_unlist_virtual(NodeTable *t, const char *vkey, Node *n)
{
    g_mutex_lock(&t->lock);
    if (virtual_lookup_locked(t, vkey) == n)
        g_hash_table_remove(t->virtuals, vkey);
    g_mutex_unlock(&t->lock);
}
