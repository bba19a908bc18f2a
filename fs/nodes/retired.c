/* Retired slots by the object their records name, so that a lookup by
 * name of an object the kernel forgot gives it its old node id again: a
 * file handle holding that id then still opens it (the kernel finds the
 * node in its cache, or asks for "." of the id, export.c), instead of
 * going stale because the same object came back under another id (one
 * object, one id in the kernel).  That is how the kernel reconnects a
 * decoded handle to its parent: it lists the parent and looks the name up.
 *
 * An entry is a hint: the slot may have been taken again since, so the
 * record is checked (free, the same object by its file handle) before it
 * is used.  Entries go when their slot is taken; at most RETIRED_INDEXED
 * are kept, so memory stays bounded when the kernel forgets many nodes at
 * once.  An entry allocates nothing of its own: its key is the object's
 * (dev, ino) folded into the pointer (the record says which object it
 * is), since entries made one by one while the nodes around them are freed
 * would pin every page of the freed nodes and keep that memory from going
 * back to the system.  Two objects folding to one key share an entry, and
 * the one not in it loses only its hint.  Everything here runs under the
 * table's lock. */
#include "nodes-private.h"

#include <string.h>

#define RETIRED_INDEXED 65536

/* Within one device (the usual case) distinct inodes give distinct keys:
 * the whole 64 bits fold into the pointer. */
G_STATIC_ASSERT(sizeof(gpointer) >= sizeof(uint64_t));
gpointer retired_key(dev_t dev, ino_t ino)
{
    return (gpointer)(uintptr_t)((uint64_t)ino ^ ((uint64_t)dev * 0x9e3779b97f4a7c15ull));
}

static guint key_hash(gconstpointer p)
{
    uint64_t k = (uint64_t)(uintptr_t)p;
    return (guint)(k ^ (k >> 32));
}

static bool rec_is_handle_of(const NodeRec *r, const Node *n)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) == SLOT_FREE &&
           r->kind == NODE_BACKING && r->handle_len > 0 && r->text_len != STATE_TEXT_LOST &&
           r->dev == (uint64_t)n->key.dev && r->ino == (uint64_t)n->key.ino &&
           r->type == (uint32_t)n->type &&
           nhandle_is(&n->handle, r->handle_type, r->handle, r->handle_len);
}

void retired_init_locked(NodeTable *t, const GArray *kept, const guint8 *data)
{
    t->retired = g_hash_table_new(key_hash, g_direct_equal);
    if (!kept) {
        /* a daemon that attached: what its predecessor retired */
        uint32_t high = atomic_load(&t->state->hdr->node_high);
        for (uint32_t slot = FUSE_ROOT_ID + 1; slot < high; slot++)
            if (state_slot_has_data(data, sizeof(NodeRec), slot))
                retired_note_locked(t, slot);
        return;
    }
    /* a fresh state: the slots a previous mount left go to the pool, and
     * node_high above them (the slots between were never used: not read,
     * so that their pages of the state memfd are never made) */
    for (guint i = 0; i < kept->len; i++) {
        uint32_t slot = g_array_index(kept, uint32_t, i);
        if (slot >= atomic_load(&t->state->hdr->node_high))
            atomic_store(&t->state->hdr->node_high, slot + 1);
        slot_pool_give(&t->pool, slot);
        retired_note_locked(t, slot);
    }
}

static gboolean slot_forgettable(gpointer key, gpointer value, gpointer data)
{
    (void)key;
    return slot_pool_forgettable(data, GPOINTER_TO_UINT(value));
}

void retired_trim_locked(NodeTable *t)
{
    g_hash_table_foreach_remove(t->retired, slot_forgettable, &t->pool);
}

void retired_clear(NodeTable *t)
{
    if (t->retired)
        g_hash_table_destroy(t->retired);
    t->retired = NULL;
}

void retired_note_locked(NodeTable *t, uint32_t slot)
{
    const NodeRec *r = &t->state->nodes[slot];
    if (atomic_load(&r->state) != SLOT_FREE || r->kind != NODE_BACKING || r->handle_len == 0 ||
        g_hash_table_size(t->retired) >= RETIRED_INDEXED)
        return;
    g_hash_table_insert(t->retired, retired_key((dev_t)r->dev, (ino_t)r->ino),
                        GUINT_TO_POINTER(slot));
}

void retired_forget_locked(NodeTable *t, uint32_t slot)
{
    const NodeRec *r = &t->state->nodes[slot];
    gpointer k = retired_key((dev_t)r->dev, (ino_t)r->ino);
    if (GPOINTER_TO_UINT(g_hash_table_lookup(t->retired, k)) == slot)
        g_hash_table_remove(t->retired, k);
}

uint32_t retired_slot_locked(NodeTable *t, const Node *n)
{
    gpointer k = retired_key(n->key.dev, n->key.ino);
    uint32_t slot = GPOINTER_TO_UINT(g_hash_table_lookup(t->retired, k));
    if (!slot)
        return 0;
    const NodeRec *r = &t->state->nodes[slot];
    if (rec_is_handle_of(r, n))
        return slot;
    /* the entry goes only when its slot holds no retired record under this
     * key any more: another object folding to the same key keeps its hint */
    if (atomic_load(&r->state) != SLOT_FREE || retired_key((dev_t)r->dev, (ino_t)r->ino) != k)
        g_hash_table_remove(t->retired, k);
    return 0;
}
