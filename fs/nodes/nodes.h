/* The node table: one Node for everything the kernel holds a lookup
 * reference on (DESIGN-NOTES "Nodes").
 *
 * - fuse_ino_t is the node's slot in the state memfd (state.h) in the low
 *   32 bits and its generation's low 32 bits above; the root is slot 1,
 *   FUSE_ROOT_ID.  Every Node gets a fresh generation from a counter kept
 *   in the state, so a reused slot never repeats an (ino, generation) pair,
 *   and a daemon that attaches to a live connection (issue 14) finds every
 *   node the kernel holds in the slots and serves the same ids.
 * - What a new daemon needs is written into the node's slot (NodeRec) under
 *   NodeTable.lock whenever it changes (node_sync_locked); the rest of Node
 *   is this daemon's own.
 * - BACKING nodes are keyed by the backing (st_dev, st_ino) and hold a
 *   kernel file handle, not a descriptor: descriptors come from the bounded
 *   FdCache (node_fd) and from open files.  When the backing fs gives no
 *   handles (or the object is on another mount), the node pins one O_PATH
 *   descriptor instead: that is the only case with a descriptor per node.
 * - VIRTUAL and ALIAS nodes are keyed by a string the views choose (their
 *   path in the views); an ALIAS also holds a backing handle for its reads.
 * - nlookup counts the kernel's references; forget drops them and frees the
 *   node at zero, after re-checking under the table lock that it is still
 *   the node in the table.
 * Memory: about 230 bytes of daemon RSS per cached node on ext4 (Node, its
 * 8-byte handle, the hash entry), measured with 100,000 nodes.
 * All functions are thread-safe (NodeTable.lock, then FdCache.lock). */
#pragma once
#define FUSE_USE_VERSION 314
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "policy.h"
#include "outlive/state.h"

struct ckptfs;

typedef enum {
    NODE_BACKING, /* an object of the backing directory */
    NODE_VIRTUAL, /* exists only in the views */
    NODE_ALIAS,   /* a view entry that is a backing object: reads only */
} NodeKind;

typedef struct {
    dev_t dev;
    ino_t ino;
} NodeKey;

typedef struct Node {
    NodeKind kind;
    mode_t type;         /* S_IFMT bits, fixed for the node's life */
    uint64_t generation; /* fuse_entry_param.generation */
    uint64_t nlookup;    /* NodeTable.lock */
    CkNs ns;             /* NodeTable.lock (node_ns / node_set_ns) */

    /* backing object (BACKING, ALIAS) */
    NodeKey key;
    struct file_handle *handle; /* NULL -> pinned_fd */
    int pinned_fd;              /* O_PATH, only without a handle; else -1 */

    /* VIRTUAL, ALIAS: the views' key (owned) and private data */
    char *vkey;
    ino_t vino; /* reported st_ino of a VIRTUAL node */
    void *vdata;
    GDestroyNotify vdata_free;

    bool stale; /* NodeTable.lock: the handle gave ESTALE; next lookup re-checks */
    int nopen;  /* open files (NodeTable.lock): an unlinked object stays valid */
    /* FUSE passthrough (fs/passthrough.c, NodeTable.lock): the kernel wants
     * every open of one inode bound to one backing id, or none bound */
    int backing_id;        /* > 0 while opens are bound to it */
    unsigned backing_refs; /* opens bound to backing_id */
    unsigned cached_opens; /* opens replied without passthrough */
    /* keep_cache: the backing mtime/size seen at the last open/release (NodeTable.lock) */
    struct timespec open_mtime;
    struct timespec open_ctime; /* multigrain on kernels >= 6.13: a change after a stat differs */
    off_t open_size;
    bool open_seen;

    uint64_t revived;    /* NodeTable.lock: of nlookup, the references a previous daemon left */
    uint32_t slot;       /* in the state memfd; 0 until the node is in the table */
    NodeRec *rec;        /* that slot */
    const char *rec_job; /* the job id rec->text holds (BACKING) */
} Node;

typedef struct {
    GMutex lock;
    GHashTable *backing;  /* NodeKey* -> Node* */
    GHashTable *virtuals; /* vkey -> Node* */
    Node *root;
    State *state;   /* the memfd behind the slots (struct ckptfs.state) */
    Node **by_slot; /* [STATE_NODE_SLOTS]: node_of; written under lock */
    SlotPool pool;
    int root_mount_id; /* handles from other mounts are not usable with root_fd */
    guint64 count;     /* nodes alive except the root */
} NodeTable;

typedef struct {
    GMutex lock;
    GHashTable *map; /* Node* -> FdEntry* */
    GQueue lru;      /* FdEntry*, most recent at head */
    guint capacity;
} FdCache;

/* A descriptor borrowed from the cache; release with node_fd_put. */
typedef struct {
    int fd;
    void *entry; /* FdEntry*, NULL when fd is not cached (close on put) */
} NodeFd;

/* A fresh table, or, when fs->state was filled by a previous daemon, the
 * nodes it left (views nodes come back without vdata: views_vnode). */
int node_table_init(struct ckptfs *fs);
void node_table_destroy(struct ckptfs *fs);
guint64 node_table_count(struct ckptfs *fs);

/* Looks up `name` (one component, not "." or "..") in backing directory
 * node `parent` and returns its node with nlookup+1, filling *st.
 * dirfd: an O_PATH descriptor of parent (from node_fd). */
int node_lookup_backing(struct ckptfs *fs, Node *parent, int dirfd, const char *name,
                        struct stat *st, Node **out);
/* The same for an object just created and open as fd (not consumed). */
int node_lookup_fd(struct ckptfs *fs, Node *parent, const char *name, int fd, struct stat *st,
                   Node **out);
/* The node of a backing (dev, ino) if the table has one (no reference). */
Node *node_find_backing(struct ckptfs *fs, dev_t dev, ino_t ino);
/* Before dirfd/name, a directory, is removed or renamed over: its node (if
 * the kernel has one) keeps an O_PATH descriptor of it, so that an fstat of
 * it open somewhere still answers (st_nlink 0, as ext4 does).  The kernel
 * opens directories without telling the daemon (dirs.c): any may be open.
 * Kept for the node's life even when the removal then fails (ENOTEMPTY):
 * node_fd hands the descriptor out without a reference, so it is never
 * taken back while the node lives; it still names the live directory. */
void node_keep_removed_dir(struct ckptfs *fs, int dirfd, const char *name);
/* Adds n references to a node (link, create replies). */
void node_ref(struct ckptfs *fs, Node *n, uint64_t count);
/* The kernel dropped `count` references. */
void node_forget(struct ckptfs *fs, Node *n, uint64_t count);

/* A VIRTUAL or ALIAS node keyed by vkey, created by make() when missing;
 * returns it with nlookup+1.  For ALIAS nodes, make() fills dev/ino/handle
 * (node_set_handle_from_fd helps). */
Node *node_get_virtual(struct ckptfs *fs, const char *vkey, void (*make)(Node *n, void *ctx),
                       void *ctx);
/* The kernel's inode number of the VIRTUAL or ALIAS node at vkey, 0 when
 * the table has none (the kernel holds nothing to invalidate). */
fuse_ino_t node_virtual_ino(struct ckptfs *fs, const char *vkey);
/* Takes n out of the table of view nodes if it is still the one at vkey, so
 * that the next node_get_virtual makes a fresh one (the kernel's references
 * to n stay valid until it forgets them). */
void node_unlist_virtual(struct ckptfs *fs, const char *vkey, Node *n);
/* The node's backing object is gone (marked stale, or it never had one). */
bool node_is_stale(struct ckptfs *fs, Node *n);
/* Fills n->handle (or pinned_fd) from an O_PATH descriptor of the object. */
int node_set_handle_from_fd(struct ckptfs *fs, Node *n, int fd);

CkNs node_ns(struct ckptfs *fs, Node *n);
void node_set_ns(struct ckptfs *fs, Node *n, CkNs ns);

/* An O_PATH|O_NOFOLLOW descriptor of the node's backing object. */
int node_fd(struct ckptfs *fs, Node *n, NodeFd *out);
void node_fd_put(struct ckptfs *fs, NodeFd *f);
/* lstat of the node's backing object, through node_fd. */
int node_fstat(struct ckptfs *fs, Node *n, struct stat *st);
/* Marks n stale when err is -ESTALE (its object is gone); returns err. */
int node_mark_stale(struct ckptfs *fs, Node *n, int err);
/* Opens the node's backing object with open(2) flags (no O_CREAT). */
int node_open(struct ckptfs *fs, Node *n, int flags);
/* node_open for reading or writing what is at the name now: fills st, and
 * returns -ESTALE (marking n stale) when the object has no name left. */
int node_open_live(struct ckptfs *fs, Node *n, int flags, struct stat *st);

/* keep_cache decision at open: true when the backing object's mtime and
 * size equal what the last open saw; records the new values. */
bool node_unchanged_since_open(struct ckptfs *fs, Node *n, const struct stat *st);
/* Records the attributes a written file has at release (its pages are current). */
void node_note_release(struct ckptfs *fs, Node *n, const struct stat *st);
void node_open_count(struct ckptfs *fs, Node *n, int delta);
/* Drops the references a previous daemon left on n (a daemon that
 * attached, for a node the kernel no longer holds). */
void node_forget_revived(struct ckptfs *fs, Node *n);
/* Writes n's changed fields (lookup count, namespace, staleness, the
 * passthrough binding) into its slot; NodeTable.lock held. */
void node_sync_locked(Node *n);
int node_nopen(struct ckptfs *fs, Node *n);

static inline Node *node_of(NodeTable *t, fuse_ino_t ino)
{
    return ino == FUSE_ROOT_ID ? t->root : t->by_slot[(uint32_t)ino];
}

static inline fuse_ino_t node_ino(NodeTable *t, Node *n)
{
    return n == t->root ? FUSE_ROOT_ID : ((fuse_ino_t)(uint32_t)n->generation << 32) | n->slot;
}
