/* fs/nodes: the node table, one Node for everything the kernel holds a
 * lookup reference on (docs/DESIGN.md, "Nodes"), and the passthrough
 * bindings of nodes to backing files (passthrough.h).
 *
 * Contract: every function takes the table, never the daemon; the table
 * knows the backing directory by two descriptors and the state memfd, and
 * nothing of requests, policy or views.  It uses outlive/ (the slots of
 * the state memfd, the in-flight journal) and kernel/ (passthrough), and
 * nothing above.  All functions are thread-safe.
 *
 * - fuse_ino_t is the node's slot in the state memfd (outlive/state.h) in
 *   the low 32 bits and its generation's low 32 bits above; the root is
 *   slot 1, FUSE_ROOT_ID.  Every Node gets a fresh generation from a
 *   counter kept in the state, so an (ino, generation) pair never names
 *   two objects (an object the kernel forgot may get its own back:
 *   retired.c), and a daemon that attaches to a live connection finds
 *   every node the kernel holds in the slots (node_table_revive) and serves
 *   the same ids.
 * - What a new daemon needs is written into the node's slot (NodeRec) under
 *   the table's lock whenever it changes; the rest of Node is this
 *   daemon's own.
 * - BACKING nodes are keyed by the backing (st_dev, st_ino) and hold a
 *   kernel file handle, not a descriptor: descriptors come from the bounded
 *   descriptor cache (node_fd) and from open files.  When the backing fs
 *   gives no handles (or the object is on another mount), the node pins one
 *   O_PATH descriptor instead: the only case with a descriptor per node.
 * - VIRTUAL and ALIAS nodes are keyed by a string the views choose (their
 *   path in the views); an ALIAS also holds a backing handle for its reads.
 * - nlookup counts the kernel's references; forget drops them and frees the
 *   node at zero, after re-checking under the table's lock that it is still
 *   the node in the table.
 * Memory: about 166 bytes of daemon RSS per cached node that was never
 * opened (Node with its file handle, the hash entry, the slot pointer),
 * and its 112-byte record in the state memfd, measured with 1,000,000 nodes; a node once opened
 * adds its NodeOpen, a views node its NodeView.
 *
 * Locks: NodeTable.lock (the hash tables, the slots and every field marked
 * so below), then FdCache.lock, a leaf taken only after the table's is
 * released (the lock order of fs/ is in ckptfs.h). */
#pragma once
#define FUSE_USE_VERSION 314
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "decimal.h"
#include "outlive/state.h"
#include "policy.h"

typedef enum {
    NODE_BACKING, /* an object of the backing directory */
    NODE_VIRTUAL, /* exists only in the views */
    NODE_ALIAS,   /* a view entry that is a backing object: reads only */
} NodeKind;
_Static_assert(NODE_BACKING == STATE_REC_BACKING, "the state's records name backing nodes so");

typedef struct {
    dev_t dev;
    ino_t ino;
} NodeKey;

/* What only a node that was ever opened needs: made at its first open or
 * opendir (atomically, whoever comes first), freed with the node, so that
 * the nodes a walk only looks up cost none of it.  Freed with the node
 * alone: the kernel sends a node's FORGET only after the RELEASE of its
 * last open was answered (it holds the inode until then), and that
 * RELEASE is done with the NodeOpen before it replies. */
typedef struct {
    /* FUSE passthrough (NodeTable.lock): the kernel wants every open of one
     * inode bound to one backing id, or none bound */
    int backing_id;         /* > 0 while opens are bound to it */
    unsigned backing_refs;  /* opens bound to backing_id */
    unsigned cached_opens;  /* opens replied without passthrough */
    int bound_writers;      /* atomic: bound opens that may write (node_bound_writers) */
    int buffered_opens;     /* atomic: opens not made O_DIRECT (node_buffered_opens) */
    unsigned buffered_seq;  /* atomic: bumped at each of them */
    unsigned buffered_seen; /* atomic: buffered_seq at the last direct write's end */
    bool open_seen;
    /* keep_cache: the backing mtime/size seen at the last open/release (NodeTable.lock) */
    struct timespec open_mtime;
    struct timespec open_ctime; /* multigrain on kernels >= 6.13: a change after a stat differs */
    off_t open_size;
} NodeOpen;

/* A node's kernel file handle (name_to_handle_at): a short one (ext4 8
 * bytes, tmpfs 12, xfs 8 or 16) inside the node, a longer one on the heap
 * (fs/nodes/handle.c).  Set once, before the node is shared, except for a
 * revived views node that gets one back (virtual.c): len is written last
 * (release) and read first (acquire), so a reader sees none or all. */
#define NODE_HANDLE_INLINE 16
typedef struct {
    uint8_t len; /* its bytes; 0: no handle */
    int32_t type;
    union {
        uint8_t bytes[NODE_HANDLE_INLINE]; /* len <= NODE_HANDLE_INLINE */
        uint8_t *heap;                     /* longer */
    };
} NodeHandle;

/* What only a node of the views (VIRTUAL, ALIAS) has, made with it, in
 * the node's own allocation. */
typedef struct {
    ino_t vino;  /* reported st_ino of a VIRTUAL node */
    void *vdata; /* the views' own (atomic pointer: views.c revives it);
                  * NodeTable.view_free frees it */
    char vkey[]; /* the views' key: its path in the views, after
                  * "#<dev>:<ino>#" for an ALIAS (node_alias_vkey) */
} NodeView;

/* Fields ordered so that little padding is left (120 bytes, a 128-byte
 * allocation; a views node's NodeView follows in the same one): a walk of a million objects holds a
 * million of these.  The key comes first: the table of backing nodes maps the node to itself (a
 * GHashTable set keeps no array of values), and a NodeKey finds it. */
typedef struct Node {
    /* backing object (BACKING, ALIAS) */
    NodeKey key;
    uint64_t generation; /* fuse_entry_param.generation */
    uint64_t nlookup;    /* NodeTable.lock */
    uint64_t revived;    /* NodeTable.lock: of nlookup, the references a previous daemon left */
    CkNs ns;             /* NodeTable.lock (node_ns / node_set_ns) */
    NodeHandle handle;   /* none: pinned_fd (see there) */
    NodeOpen *open;      /* atomic pointer: NULL until the first open (node_open_state) */
    NodeView *view;      /* VIRTUAL, ALIAS; NULL for BACKING */
    int pinned_fd;       /* O_PATH: without a handle, or beside it for an object
                          * without a name (O_TMPFILE, a removed directory); else -1 */
    int nopen;           /* open files (NodeTable.lock): an unlinked object stays valid */
    uint32_t slot;       /* its record in the state memfd; 0 until the node is in the table */
    uint16_t type;       /* S_IFMT bits, fixed for the node's life */
    uint8_t kind;        /* NodeKind */
    bool stale;          /* NodeTable.lock: the handle gave ESTALE; next lookup re-checks */
    /* NodeTable.lock: it lost its last name through the mount while open
     * (or never had one: O_TMPFILE), so an open with no name left is a
     * reopen of a file still open (by handle, /proc/PID/fd), not a stale
     * name (node_open_live) */
    bool nameless_open;
    /* NodeTable.lock: an unlink or rename through the mount is removing its
     * last name (node_unlink_victim until node_note_unlinked): an open
     * that finds no name meanwhile raced that removal, and is not stale */
    bool unlinking;
    bool no_export; /* NodeTable.lock: its record must not bring it back (export.c) */
    bool held;      /* NodeTable.lock: the holder has a descriptor of it (node_hold_locked) */
    /* NodeTable.lock: pinned_fd was pinned for a holder that refused it
     * (one that died), to be given to the holder that adopts the daemon */
    bool pinned_unheld;
} Node;
_Static_assert(offsetof(Node, key) == 0, "a NodeKey finds its node in the backing table");
_Static_assert(sizeof(Node) == 120, "a million nodes are held: keep Node at 120 bytes");
_Static_assert((S_IFMT & ~0xffff) == 0, "S_IFMT fits Node.type");

/* The views' key of a VIRTUAL or ALIAS node, NULL for a BACKING one. */
static inline const char *node_vkey(const Node *n)
{
    return n->view ? n->view->vkey : NULL;
}

/* An ALIAS's key: its views path behind the backing object's identity, so
 * that another object at the same path is another node.  g_free. */
static inline char *node_alias_vkey(dev_t dev, ino_t ino, const char *path)
{
    CkU64Text d, i;
    return g_strconcat("#", ck_u64_text(d, dev), ":", ck_u64_text(i, ino), "#", path, NULL);
}

/* The views path a key names: an ALIAS's key without its identity. */
static inline const char *node_vkey_path(const char *vkey)
{
    const char *end = vkey[0] == '#' ? strchr(vkey + 1, '#') : NULL;
    return end ? end + 1 : vkey;
}

/* The bounded cache of O_PATH descriptors of nodes (fdcache.c). */
typedef struct {
    GMutex lock;
    GHashTable *map; /* Node* -> FdEntry* */
    GQueue lru;      /* FdEntry*, most recent at head */
    guint capacity;
} FdCache;

typedef struct {
    GMutex lock;
    GHashTable *backing;  /* a set of Node*, found by NodeKey* (the node's first field) */
    GHashTable *virtuals; /* a set of views keys, each in its node (virtual_lookup_locked) */
    GHashTable *retired;  /* folded (dev, ino) -> free slot whose record names it (retired.c) */
    GHashTable *jobs;     /* interned job id -> its number in the state's job table */
    Node *root;
    State *state;   /* the memfd behind the slots */
    Node **by_slot; /* [STATE_NODE_SLOTS]: node_of; written under lock */
    SlotPool pool;
    guint64 count; /* nodes alive except the root */
    guint64 peak;  /* the most since memory was last given back (node_forget) */
    FdCache fdcache;
    /* whether the backing is short of space, and until when (monotonic
     * µs) that answer stands (removed.c; atomic: until is stored last,
     * with release) */
    bool space_short;
    gint64 space_until;
    /* the mount is noatime: backing objects not opened through the private
     * copy are opened O_NOATIME (atomic, relaxed: a remount changes it,
     * node_set_noatime) */
    bool noatime;
    /* fixed once node_table_init returned */
    int root_fd;  /* O_PATH of the backing root (borrowed) */
    int mount_fd; /* O_RDONLY of it: open_by_handle_at's mount_fd (borrowed) */
    /* the same in a private copy of the backing mount with the FUSE mount's
     * atime rule (main.c), or mount_fd: node_open opens for I/O through it,
     * so that reads, the daemon's and the kernel's (passthrough), follow
     * the rule; descriptors for *at() calls and paths stay on mount_fd */
    int data_mount_fd;
    bool handles;             /* the backing fs gives file handles (else one O_PATH fd per node) */
    int root_mount_id;        /* handles from other mounts are not usable with mount_fd */
    const char *views_name;   /* interned: what ck_ns_child calls the views */
    GDestroyNotify view_free; /* frees a NodeView's vdata; set once, before any */
    /* who holds the objects without a name for the next daemon (the
     * supervisor), NULL for none; set once, before any request: told of
     * one with a descriptor it takes over (fd), and when its node goes or
     * it has a name again (fd -1), with the table's lock held; never
     * waits; whether it was told.  spare: a directory, held only where
     * that leaves the files room.  At most held_max at once (held, under
     * the lock), directories half of that. */
    bool (*holder)(void *ctx, uint32_t slot, uint64_t gen, int fd, bool spare);
    void *holder_ctx;
    guint held, held_max;
    guint unheld_pins; /* NodeTable.lock: nodes pinned_unheld, at most held_max */
} NodeTable;

/* A descriptor borrowed from the cache; release with node_fd_put. */
typedef struct {
    int fd;
    void *entry; /* FdEntry*, NULL when fd is not cached (close on put) */
} NodeFd;

typedef struct {
    State *state;          /* the slots; a previous daemon's when it attached */
    int root_fd, mount_fd; /* the backing root, O_PATH and O_RDONLY (borrowed) */
    int data_mount_fd;     /* NodeTable.data_mount_fd (borrowed), -1: mount_fd */
    /* a fresh state's slots holding records a previous mount left
     * (outlive/keep.h), uint32_t, the oldest first; the slots below
     * node_high are read only when this is NULL (a daemon that attached) */
    const GArray *kept;
    const char *views_name; /* interned */
    bool no_handles;        /* behave as on a file system without handles (tests) */
    bool noatime;           /* the mount's noatime: reads through it leave atimes alone */
    const char *name;       /* the backing directory, for messages */
} NodeTableSetup;

/* A table holding the root alone (a daemon that attaches then revives the
 * nodes its predecessor left: node_table_revive).  0 or -errno. */
int node_table_init(NodeTable *t, const NodeTableSetup *s);
/* What frees the views' data of a VIRTUAL or ALIAS node (NodeView.vdata),
 * set before the views make any. */
void node_table_set_view_free(NodeTable *t, GDestroyNotify view_free);
/* The mount's atime rule changed (a remount): opens from now on follow it. */
void node_set_noatime(NodeTable *t, bool noatime);
void node_table_destroy(NodeTable *t);
guint64 node_table_count(NodeTable *t);

static inline Node *node_of(NodeTable *t, fuse_ino_t ino)
{
    return ino == FUSE_ROOT_ID ? t->root : t->by_slot[(uint32_t)ino];
}

static inline fuse_ino_t node_ino(NodeTable *t, Node *n)
{
    return n == t->root ? FUSE_ROOT_ID : ((fuse_ino_t)(uint32_t)n->generation << 32) | n->slot;
}

/* Looks up `name` (one component, not "." or "..") in backing directory
 * node `parent` and returns its node with nlookup+1, filling *st.
 * dirfd: an O_PATH descriptor of parent (from node_fd).  ns: the entry's
 * namespace when the caller has it already (a create: the policy's
 * decision computed it), NULL to have it derived from parent's. */
int node_lookup_backing(NodeTable *t, Node *parent, int dirfd, const char *name, const CkNs *ns,
                        struct stat *st, Node **out);
/* The same for an object just created as `name` of namespace ns and open
 * as fd (not consumed). */
int node_lookup_fd(NodeTable *t, CkNs ns, int fd, struct stat *st, Node **out);
/* The node of a backing (dev, ino) if the table has one (no reference). */
Node *node_find_backing(NodeTable *t, dev_t dev, ino_t ino);
/* Adds count references to a node (link, create replies). */
void node_ref(NodeTable *t, Node *n, uint64_t count);
/* The kernel dropped `count` references. */
void node_forget(NodeTable *t, Node *n, uint64_t count);
/* A FORGET of node id ino: an id whose slot is empty or holds another
 * node (one this daemon dropped itself after attaching, racing the
 * kernel's own forget) is no node of the table's, and changes nothing. */
void node_forget_id(NodeTable *t, fuse_ino_t ino, uint64_t count);

/* The node's backing object is gone (marked stale, or it never had one). */
bool node_is_stale(NodeTable *t, Node *n);
/* Marks n stale when err is -ESTALE (its object is gone); returns err. */
int node_mark_stale(NodeTable *t, Node *n, int err);
/* Fills n->handle (or pinned_fd) from an O_PATH descriptor of the object. */
int node_set_handle_from_fd(NodeTable *t, Node *n, int fd);

CkNs node_ns(NodeTable *t, Node *n);
void node_set_ns(NodeTable *t, Node *n, CkNs ns);

/* keep_cache decision at open: true when the backing object's mtime and
 * size equal what the last open saw; records the new values. */
bool node_unchanged_since_open(NodeTable *t, Node *n, const struct stat *st);
/* Records the attributes a written file has at release (its pages are current). */
void node_note_release(NodeTable *t, Node *n, const struct stat *st);
void node_open_count(NodeTable *t, Node *n, int delta);
int node_nopen(NodeTable *t, Node *n);
/* Whether an open that finds n's object without a name is a reopen, not a
 * stale name: n lost its last name through the mount while open (or never
 * had one), or an unlink or rename through the mount is removing it now. */
bool node_nameless_open(NodeTable *t, Node *n);
/* Opens bound to passthrough that may write: the kernel writes the backing
 * file for them without a request (a shared mapping's stores change its
 * mtime and ctime behind the daemon), so while one lasts the kernel may not
 * keep n's attributes (node_attrs_volatile: true).  Lock-free. */
void node_bound_writers(Node *n, int delta);
bool node_attrs_volatile(Node *n);
/* Opens of n's file not made O_DIRECT, for which the kernel may cache its
 * pages: a direct write that just landed has pages to drop (ops/direct.c)
 * only when one is open, or one was opened since the last direct write
 * ended (the kernel drops the range just before it sends a direct write,
 * and a buffered read between that drop and the write may have cached the
 * old bytes): node_buffered_since_last says so, and notes this end.  (A
 * file switched to or from O_DIRECT by fcntl counts as it was opened.)
 * Lock-free. */
void node_buffered_opens(Node *n, int delta);
bool node_buffered_since_last(Node *n);

/* The passthrough binding of n's opens (passthrough.h decides and does the
 * ioctls; the table keeps the binding, in the slot too):
 * - node_binding_join_decided: when n has a binding (a backing id, or opens
 *   without passthrough), another open joins it: true, with *id its backing
 *   id or 0; false, nothing changed, when n has none yet.
 * - node_binding_join: an open joins n's binding; fresh (> 0, a backing id
 *   just registered for n) is taken when n has none.  Returns the open's
 *   backing id (fresh when taken), 0 for an open without passthrough.
 * - node_binding_leave: the open that joined with backing_id (maybe 0) is
 *   released; returns the backing id to release (the last bound open went),
 *   else 0. */
bool node_binding_join_decided(NodeTable *t, Node *n, int *id);
int node_binding_join(NodeTable *t, Node *n, int fresh);
int node_binding_leave(NodeTable *t, Node *n, int backing_id);

/* ---- the backing object (backing.c), by the descriptor cache (fdcache.c) ---- */

/* An O_PATH|O_NOFOLLOW descriptor of the node's backing object. */
int node_fd(NodeTable *t, Node *n, NodeFd *out);
void node_fd_put(NodeTable *t, NodeFd *f);
/* lstat of the node's backing object, through node_fd. */
int node_fstat(NodeTable *t, Node *n, struct stat *st);
/* Opens the node's backing object with open(2) flags (no O_CREAT) through
 * data_mount_fd; one that does not open through a private copy (none, or
 * a node with a descriptor of its own) with O_NOATIME too on a noatime
 * mount (where the daemon may: the owner's, or any as root). */
int node_open(NodeTable *t, Node *n, int flags);
/* node_open for reading or writing what is at the name now: fills st, and
 * returns -ESTALE (marking n stale) when the object has no name left,
 * unless it lost it through the mount while open (nameless_open). */
int node_open_live(NodeTable *t, Node *n, int flags, struct stat *st);

/* ---- node ids in file handles (export.c) ---- */

/* The node of id ino, as the kernel asks for it when it decodes a file
 * handle (a LOOKUP of "."): the live node, or the one the table forgot,
 * found again under the same id while its slot keeps its record.  With a
 * reference and *st filled; -ESTALE when there is none (the object is
 * gone, or the kernel holds it under another id now, or a views node). */
int node_lookup_id(NodeTable *t, fuse_ino_t ino, struct stat *st, Node **out);
/* The parent of directory node dir (a LOOKUP of ".."), its namespace
 * derived from its path below the backing root; with a reference. */
int node_lookup_parent(NodeTable *t, Node *dir, struct stat *st, Node **out);

/* ---- objects removed through the mount (removed.c) ---- */

/* The last name of a regular file, symlink or directory removed through
 * the mount (unlink, rmdir, or a rename over it): before the removal of
 * dirfd/name, node_unlink_victim says whether it may be one whose node
 * must hear of it (an fstatat and a look-up in the table), and which;
 * after the removal succeeded, node_note_unlinked marks that node if it
 * is open or being opened (it keeps serving opens: nameless_open) and
 * has the holder (the supervisor) keep a descriptor of it for the next
 * daemon (nothing else keeps an unlinked object the kernel does not hold
 * for the daemon: passthrough's binding does).  Otherwise, where the
 * backing is short of space (less than 1 GiB, or less than a tenth of it
 * up to 16 GiB, left to unprivileged writers; asked at most once a
 * second), it drops the node's cached descriptor, so that the backing
 * frees the object now, as without the mount.  Elsewhere the kernel's
 * FORGET, a moment later, lets go of it off the caller's path (freeing a
 * file's blocks is the dearest part of an unlink).  A node that pins its
 * descriptor (no file handles, an O_TMPFILE file) keeps it until the
 * FORGET.  dirs_untold: the kernel opens directories without telling the
 * daemon (ops/dirs.c), so a removed directory may be open: its node
 * pins a descriptor of it (an fstat of it still answers, st_nlink 0, as
 * natively) and is held as an open one; the kernel's FORGET, right after
 * an rmdir of a directory nothing has open, lets go of both.  Every
 * victim the first said yes to is handed to the second, `removed` saying
 * whether this request removed the name.  An open counts itself
 * (node_open_count) before the daemon's open, and between the two calls
 * an open that finds no name is not stale (node_nameless_open), so an
 * open racing the removal is either counted and marked or comes after it
 * and finds no name. */
typedef struct {
    NodeKey key;
    uint64_t generation;
    bool now;         /* the backing is short of space: let go in the request */
    bool open_untold; /* a directory whose opens the daemon does not see */
} NodeVictim;
bool node_unlink_victim(NodeTable *t, int dirfd, const char *name, bool dirs_untold, NodeVictim *v);
void node_note_unlinked(NodeTable *t, const NodeVictim *v, bool removed);
/* n is a new unnamed (O_TMPFILE) file (nameless): opens of it have no name
 * the kernel could cache; once linked (!nameless), a name it has again. */
void node_set_nameless_open(NodeTable *t, Node *n, bool nameless);
/* n is a file without a name (O_TMPFILE), and fd may soon be all that
 * holds it: the holder gets fd (a duplicate, closed here), once per node.
 * An object unlinked or removed while open is held by node_note_unlinked. */
void node_hold_nameless(NodeTable *t, Node *n, int fd);
/* An attaching daemon: a descriptor the holder handed over for node `slot`
 * of generation `gen` (this call owns it): the node pins it (opens go
 * through it) and the holder holds it again, or it is closed. */
void node_adopt_held(NodeTable *t, uint32_t slot, uint64_t gen, int fd);
/* Each node the holder holds, with a duplicate of its descriptor, to
 * each() (which owns fd), called without the table's lock: what a new
 * holder is given when the one before died (a takeover adopting a daemon
 * whose supervisor died). */
void node_each_held(NodeTable *t, void (*each)(void *ctx, uint32_t slot, uint64_t gen, int fd),
                    void *ctx);

/* ---- virtual nodes (virtual.c) ---- */

/* A VIRTUAL or ALIAS node keyed by vkey, created by make() when missing;
 * returns it with nlookup+1.  For ALIAS nodes, make() fills dev/ino/handle
 * (node_set_handle_from_fd helps). */
Node *node_get_virtual(NodeTable *t, const char *vkey, void (*make)(Node *n, void *ctx), void *ctx);
/* The kernel's inode number of the VIRTUAL or ALIAS node at vkey, 0 when
 * the table has none (the kernel holds nothing to invalidate). */
fuse_ino_t node_virtual_ino(NodeTable *t, const char *vkey);
/* Takes n out of the table of view nodes if it is still the one at vkey, so
 * that the next node_get_virtual makes a fresh one (the kernel's references
 * to n stay valid until it forgets them). */
void node_unlist_virtual(NodeTable *t, const char *vkey, Node *n);

/* ---- the nodes a previous daemon left (revive.c) ---- */

/* A daemon that attached: every node the previous daemon left in the
 * slots, in the table again (views nodes without their vdata: the views
 * give it back at their next lookup by path).  Before any request. */
void node_table_revive(NodeTable *t);
/* The node in slot, NULL for none (a slot of the state memfd, as the
 * journal and the handle records name nodes). */
Node *node_of_slot(NodeTable *t, uint32_t slot);
/* Drops the references a previous daemon left on n (a daemon that
 * attached, for a node the kernel no longer holds). */
void node_forget_revived(NodeTable *t, Node *n);
/* Nodes bound to a backing file: the ids the previous daemon registered,
 * which stay registered with the connection. */
guint64 node_table_count_bound(NodeTable *t);
