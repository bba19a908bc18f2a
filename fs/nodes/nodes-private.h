/* What the files of fs/nodes share, and nothing outside them includes:
 * making and freeing nodes, putting them into the table, their slots, the
 * descriptor cache's insides and file handles. */
#pragma once
#include <fcntl.h>

#include "nodes.h"

/* Room for any file handle: name_to_handle_at fills the variable tail. */
typedef union {
    struct file_handle fh;
    char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
} HandleBuf;

/* name_to_handle_at(2) into h, with the mount id in *mnt; 0 or -errno. */
int fhandle_of(int dirfd, const char *name, int flags, HandleBuf *h, int *mnt);

/* A node's file handle (handle.c).  nhandle_set and nhandle_set_fh fill
 * one that has none; nhandle_move gives from's (if any) to `to`, which has
 * none, and leaves from without; nhandle_clear frees it.  nhandle_bytes
 * gives its bytes and their count (0: none); nhandle_fh writes it as a
 * struct file_handle into buf for open_by_handle_at (NULL: none). */
void nhandle_set(NodeHandle *h, int type, const void *bytes, size_t len);
void nhandle_set_fh(NodeHandle *h, const struct file_handle *fh);
void nhandle_move(NodeHandle *to, NodeHandle *from);
void nhandle_clear(NodeHandle *h);
bool nhandle_present(const NodeHandle *h);
const uint8_t *nhandle_bytes(const NodeHandle *h, size_t *len);
bool nhandle_is(const NodeHandle *h, int type, const void *bytes, size_t len);
bool nhandle_equal(const NodeHandle *a, const NodeHandle *b);
struct file_handle *nhandle_fh(const NodeHandle *h, HandleBuf *buf);

/* A views key as a slot's KeyRec (or LongKeyRec) keeps it (table.c):
 * whole, or, when too long, with its job named by its number in the
 * state's job table after VKEY_JOB_NUMBER, or as its parent's slot and
 * generation after VKEY_PARENT and its own name (numbers in hex).
 * vkey_from_rec gives it whole again (g_free), NULL when the number names
 * no job or the slot not the parent. */
#define VKEY_JOB_NUMBER '\001'
#define VKEY_PARENT     '\002'
char *vkey_from_rec(const State *s, const char *text);

/* The table of views nodes is a set of their keys, each inside its node's
 * allocation after the NodeView (node_new_view): a GHashTable whose keys
 * are its values keeps no array of values, and a walk of the views holds
 * a million keys.  The node a key of the set is in: */
static inline Node *virtual_of_key(const char *vkey)
{
    return (Node *)(void *)(vkey - offsetof(NodeView, vkey)) - 1;
}
/* The node the set has under vkey, or NULL; the table's lock held. */
static inline Node *virtual_lookup_locked(NodeTable *t, const char *vkey)
{
    const char *k = g_hash_table_lookup(t->virtuals, vkey);
    return k ? virtual_of_key(k) : NULL;
}

/* A node not in the table yet (no slot, no generation). */
Node *node_new(NodeKind kind, mode_t type);
/* The same with the views' part of a VIRTUAL or ALIAS node, keyed by
 * vkey, in the node's allocation (a walk of the views makes one an entry). */
Node *node_new_view(NodeKind kind, mode_t type, const char *vkey);
/* Frees a node out of the table (its cached descriptor too). */
void node_free(NodeTable *t, Node *n);
/* The end of a find-or-add, called with the table's lock held and
 * releasing it: a lookup reference on n, the node found in `table` (fresh
 * is freed), or, when n is NULL, fresh added under key as a new node. */
Node *node_adopt_locked(NodeTable *t, GHashTable *table, gpointer key, Node *n, Node *fresh);
/* Freed slots whose records the table keeps before it takes the oldest
 * again: a file handle's node id can be found again (export.c) until at
 * least this many other nodes were made after the node was forgotten. */
#define NODE_RETIRED_KEEP 16384

/* Retired slots by the object their records name (retired.c), under the
 * table's lock: noted when a slot is given back with its record, forgotten
 * when the slot is taken again; retired_slot_locked gives the free slot
 * whose record is n's object (same key and file handle), or 0. */
/* init: the retired slots a daemon that attached finds below node_high
 * (kept NULL; data: which pages of the records hold data), or a fresh
 * state's kept slots, given to the pool too.  trim: the entries of slots
 * whose records the table no longer keeps go (slot_pool_forgettable). */
void retired_init_locked(NodeTable *t, const GArray *kept, const guint8 *data);
void retired_trim_locked(NodeTable *t);
void retired_clear(NodeTable *t);
void retired_note_locked(NodeTable *t, uint32_t slot);
void retired_forget_locked(NodeTable *t, uint32_t slot);
uint32_t retired_slot_locked(NodeTable *t, const Node *n);
/* The index's key of an object: (dev, ino) folded into a pointer. */
gpointer retired_key(dev_t dev, ino_t ino);

/* n's NodeOpen, made now if it has none (lock-free: safe with or without
 * the table's lock). */
NodeOpen *node_open_state(Node *n);

/* Writes n, just put into the table, into slot (which must be free) and
 * makes it n's. */
void rec_fill_locked(NodeTable *t, Node *n, uint32_t slot);
/* A node (not in the table) of what the record says: kind, type,
 * generation, key, namespace, the views' key and the file handle.  r is
 * slot's record of state s, or a copy of it. */
Node *node_from_rec(const State *s, uint32_t slot, const NodeRec *r);
/* Finds or adds the node of the object open as fd (any kind of descriptor),
 * of namespace ns.  When cache_fd, fd is an O_PATH descriptor handed over
 * to the descriptor cache (or closed). */
int node_from_fd(NodeTable *t, CkNs ns, int fd, bool cache_fd, struct stat *st, Node **out);
/* One node more in the table (its count and peak); the table's lock held. */
static inline void node_counted_locked(NodeTable *t)
{
    t->count++;
    t->peak = MAX(t->peak, t->count);
}
/* Writes n's changed fields (lookup count, namespace, staleness, the
 * passthrough binding) into its slot; the table's lock held. */
void node_sync_locked(NodeTable *t, Node *n);
/* The holder is given fd (a descriptor of n, which it takes over) unless
 * it holds n already, or as many as it may; whether fd was taken (else
 * the caller closes it). */
bool node_hold_locked(NodeTable *t, Node *n, int fd);
/* The holder lets go of n's descriptor, if it holds one. */
void node_let_go_locked(NodeTable *t, Node *n);
/* n's pin no longer counts as one the holder refused (held now, linked
 * again, or gone); the pin itself stays with the node. */
void node_unpin_count_locked(NodeTable *t, Node *n);
/* Which pages of the state's node records (below node_high) hold data:
 * state_region_pages (g_free). */
guint8 *node_rec_pages(NodeTable *t);
/* n's record in the state memfd, NULL while it has none (and the root's). */
static inline NodeRec *node_rec(NodeTable *t, const Node *n)
{
    return n->slot > FUSE_ROOT_ID ? &t->state->nodes[n->slot] : NULL;
}

/* The descriptor cache (fdcache.c). */
void fdcache_init(FdCache *c);
void fdcache_clear(FdCache *c);
/* Removes n's cached descriptor, if any. */
void fdcache_drop(FdCache *c, Node *n);
/* Caches fd (O_PATH) for n; the descriptor to use is borrowed in *out
 * (NULL: none wanted). */
void fdcache_insert(FdCache *c, Node *n, int fd, NodeFd *out);
/* n's cached descriptor, borrowed in *out (fdcache_put): false for none. */
bool fdcache_get(FdCache *c, Node *n, NodeFd *out);
void fdcache_put(FdCache *c, NodeFd *f);
/* Closes the older half of the cached descriptors; true if it closed any. */
bool fdcache_shrink(FdCache *c);
