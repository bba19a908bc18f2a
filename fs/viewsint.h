/* Private to the views (views.c, jobviews.c, catalog_watch.c): the state
 * behind fs->views and what a views node's vdata holds.
 *
 * Every VIRTUAL or ALIAS node's vdata is a VNode.  Inode numbers of
 * virtual nodes are a hash of their vkey (views_vino), so a path keeps its
 * number after the kernel forgot the node and across daemon restarts.
 * ALIAS nodes' vkeys start with "#<dev>:<ino>#", so a path whose backing
 * object was replaced gets a fresh node.  A node a restarted daemon found
 * in the state memfd has no VNode until views_vnode() rebuilds it from its
 * vkey.
 *
 * Locks (all leaf level, below NodeTable.lock in ckptfs.h's order; none is
 * held across a reply, a catalog rebuild or a kernel notification):
 * Views.lock (catalog pointer, early names, job views), VNode.lock (its
 * listing). */
#pragma once
#include <dirent.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "catalog.h"
#include "views.h"

typedef enum {
    VN_ROOT = 1, /* the views dir */
    VN_COLLISIONS,
    VN_METRICS,
    VN_CONTROL, /* .control: live settings as xattrs (control.c) */
    VN_JOB,     /* <J> */
    VN_CKPTS,   /* <J>/checkpoints */
    VN_TREE,    /* a directory of <J>/state/... or <J>/checkpoints/<N>/... */
    VN_ERROR,   /* <J>/checkpoints/<N>/ERROR */
    VN_LATEST,  /* <J>/latest */
    VN_RESTORE, /* <J>/restore */
    VN_ALIAS,   /* a backing non-directory shown in a tree */
} VnKind;

typedef struct Listing Listing;

typedef struct {
    VnKind kind;
    const char *job; /* interned (job kinds) */
    bool ckpt;       /* trees: checkpoints/<n>, else state */
    guint64 n;
    char *rel; /* VN_TREE, VN_ALIAS: path inside the tree, "" for its root */
    /* provenance for the xattrs; NULL / false when not known */
    const char *source;
    char *backing;
    bool has_gen;
    guint64 gen;
    GMutex lock;           /* listing, opened_serial */
    Listing *listing;      /* VN_TREE: the merged entries (cached, revalidated) */
    guint64 opened_serial; /* the listing the last opendir gave the kernel */
} VNode;

/* One job snapshot with what the views derive from it. */
typedef struct {
    CkJobInfo *j;
    GPtrArray *state_layers; /* CkLayer* */
    GPtrArray *ckpt_layers;  /* GPtrArray* of CkLayer*, parallel to j->checkpoints */
    char *restore;           /* ck_job_restore_text */
    gsize restore_len;
} JobView;

typedef struct {
    uid_t uid;
    gid_t gid;
    struct timespec mounted;
    double timeout;        /* entry/attr timeout of views entries */
    double stable_timeout; /* of those invalidated explicitly, and of constant attributes */

    GMutex lock;
    GCond loaded_cond;
    CkCatalog *cat;          /* NULL until the loader published it */
    bool load_done;          /* the loader finished (cat may still be NULL: failed) */
    GPtrArray *early_names;  /* sorted interned job ids, served until cat is loaded */
    GHashTable *pending;     /* jobs written through the mount while loading (set) */
    GHashTable *jobviews;    /* interned job -> JobView* (rc box) */
    CkCatalogOptions copts;  /* what the catalog was opened with */
    GPtrArray *ext_prefixes; /* normalised external_root prefixes */
    GArray *ext_fds;         /* O_PATH descriptors of them (-1: unusable) */

    guint64 next_serial; /* atomic: Listing serials */

    /* the views dir's listing once the catalog is loaded (v->lock) */
    GPtrArray *root_names; /* sorted interned job ids */
    GArray *root_inos;     /* ino_t, parallel */
    guint64 root_version;  /* ck_catalog_names_version they are of */
    guint64 root_given;    /* root_version + 1 of the listing the kernel got last, 0: none */

    /* catalog_watch.c */
    GThread *watcher, *notifier;
    void *loadctl;      /* catalog_watch.c's LoadCtl */
    GAsyncQueue *inval; /* InvalItem* for the notifier */
    int wake_fd;        /* eventfd: wakes the watcher (stop, a new rescan period) */
    gint64 rescan_us;   /* atomic: rescan= (changed live through .control) */
    gint stopping;
    gint threads_stopped;
} Views;

static inline Views *views_of(struct ckptfs *fs)
{
    return (Views *)fs->views;
}

/* views.c */
/* de's DT_* type, from fstatat in d when the file system leaves it
 * DT_UNKNOWN; DT_UNKNOWN when that fails too (the entry went away). */
unsigned char views_dirent_type(DIR *d, const struct dirent *de);
ino_t views_vino(struct ckptfs *fs, const char *vkey);
void views_dir_attr(struct ckptfs *fs, ino_t ino, struct stat *st);
VNode *vnode_new(VnKind kind, const char *job);
void vnode_free(gpointer p);
/* The catalog, waiting for the loader when it is still running (NULL: it failed). */
CkCatalog *views_catalog(struct ckptfs *fs);
/* Job ids for the views dir listing: the catalog's, or the early names. */
GPtrArray *views_job_names(struct ckptfs *fs);
bool views_has_job(struct ckptfs *fs, const char *job);

/* A directory handle of the views: entries snapshot at opendir. */
typedef struct {
    char *name; /* owned, unless borrowed from the listing */
    ino_t ino;
    unsigned char type; /* DT_* */
    bool borrowed;
    gint64 *served; /* trees: when the entry was last given to the kernel, else NULL */
    int lidx;       /* trees: its index in the listing, else -1 */
} VEnt;

typedef struct {
    GArray *ents;     /* VEnt, "." and ".." first */
    Listing *listing; /* trees: the listing whose names the entries borrow, else NULL */
    JobView *jv;      /* trees: the snapshot the listing is of */
    VNode *vn;        /* trees: the directory's VNode (alive while the kernel has it open) */
    int *layer_fds;   /* trees: backing directory per layer (-2 not opened, -1 none) */
    guint n_layer_fds;
    bool cacheable;  /* trees: the kernel may cache the listing ... */
    bool keep_cache; /* ... and what it has is this listing */
} ViewsDir;

/* jobviews.c */
JobView *jobview_get(struct ckptfs *fs, const char *job); /* NULL: no such job */
void jobview_unref(JobView *jv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(JobView, jobview_unref)
void jobviews_forget(struct ckptfs *fs, const char *job);
int jv_lookup(struct ckptfs *fs, Node *parent, VNode *pv, const char *name,
              struct fuse_entry_param *e);
int jv_getattr(struct ckptfs *fs, Node *n, VNode *vn, struct stat *st, double *timeout);
int jv_readlink(struct ckptfs *fs, Node *n, VNode *vn, char **target);
int jv_opendir(struct ckptfs *fs, Node *n, VNode *vn, ViewsDir *d);
int jv_open(struct ckptfs *fs, Node *n, VNode *vn, ViewsOpen *out);
/* readdirplus: entry i of a tree handle's listing, looked up (nlookup+1). */
int jv_readdir_entry(struct ckptfs *fs, ViewsDir *d, guint i, struct fuse_entry_param *e);
void listing_unref(Listing *l);

/* catalog_watch.c */
int catalog_watch_start(struct ckptfs *fs);
void catalog_watch_stop(struct ckptfs *fs);
/* A job changed (refresh done): queue the kernel invalidations of its views. */
void catalog_watch_changed(struct ckptfs *fs, const char *job);
/* rescan= in seconds, and its live change (the watcher's next wait uses it). */
double catalog_watch_rescan(struct ckptfs *fs);
void catalog_watch_set_rescan(struct ckptfs *fs, double seconds);
/* While the catalog loads: its progress into the catalog gauges; wait:
 * first give the load up to half a second to finish (a read of .metrics). */
void catalog_watch_load_gauges(struct ckptfs *fs, bool wait);
