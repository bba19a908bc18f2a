/* Private to the views (views.c, jobviews.c, catalog_watch.c, and
 * control.c for rescan=): what a views node's vdata holds, the directory
 * handles, and the functions each file gives the others.  The state they
 * share is viewstate.h's.  Calls go one way: views.c -> jobviews.c,
 * views.c -> catalog_watch.c, and all three -> viewstate.c.
 *
 * Every VIRTUAL or ALIAS node's vdata is a VNode.  Inode numbers of
 * virtual nodes are a hash of their vkey (views_vino), so a path keeps its
 * number after the kernel forgot the node and across daemon restarts.
 * ALIAS nodes' vkeys start with "#<dev>:<ino>#", so a path whose backing
 * object was replaced gets a fresh node.  A node a restarted daemon found
 * in the state memfd has no VNode until views.c revives it from its vkey.
 *
 * Locks: VNode.lock (its listing, opened_serial and layer) is a leaf,
 * below NodeTable.lock in ckptfs.h's order, never held across a reply, a
 * catalog rebuild or a kernel notification; Views.lock: viewstate.h. */
#pragma once
#include <dirent.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "catalog.h"
#include "views.h"
#include "viewstate.h"

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

/* One allocation of 56 bytes and the tree path (a walk of the views makes
 * one per entry): no provenance is kept as text, it is derived when asked
 * (jv_provenance) from the job's snapshot and, below a tree's root, the
 * layer the entry was last looked up in. */
typedef struct {
    const char *job;       /* interned (job kinds) */
    guint64 n;             /* trees of checkpoints/<n>, ERROR */
    guint64 version;       /* the job snapshot `layer` is of (lock) */
    GMutex lock;           /* listing, opened_serial, layer and version */
    Listing *listing;      /* VN_TREE: the merged entries (cached, revalidated, dropped
                            * when a directory handle that read it goes) */
    guint64 opened_serial; /* the listing the last opendir gave the kernel */
    VnKind kind;
    gint16 layer; /* below a tree's root: the entry's layer in `version`; -1 none */
    bool ckpt;    /* trees: checkpoints/<n>, else state */
    char rel[];   /* VN_TREE: path inside the tree, "" for its root; else "" */
} VNode;
G_STATIC_ASSERT(sizeof(VNode) <= 56);

/* Where a views node's content comes from, as its xattrs say it. */
typedef struct {
    const char *source; /* "own", "legacy", "external"; NULL: not known */
    char *backing;      /* g_free; NULL: none */
    bool has_gen;
    guint64 gen;
} ViewsProv;

/* A directory handle of the views: entries snapshot at opendir. */
typedef struct {
    char *name; /* owned, unless borrowed from the listing */
    ino_t ino;
    unsigned char type; /* DT_* */
    bool borrowed;
    gint64 *expires; /* trees: when the entry last given to the kernel expires, else NULL */
    int lidx;        /* trees: its index in the listing, else -1 */
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

/* One entry more in a directory handle (a copy of name). */
static inline void vent_add(ViewsDir *d, const char *name, ino_t ino, unsigned char type)
{
    VEnt e = {g_strdup(name), ino, type, false, NULL, -1};
    g_array_append_val(d->ents, e);
}

/* jobviews.c: the per-job trees below the views dir, and the VNodes */
/* rel: a tree directory's path inside its tree (NULL: ""). */
VNode *vnode_new(VnKind kind, const char *job, const char *rel);
void vnode_free(gpointer p);
int jv_lookup(struct ckptfs *fs, Node *parent, VNode *pv, const char *name,
              struct fuse_entry_param *e);
int jv_getattr(struct ckptfs *fs, Node *n, VNode *vn, struct stat *st, double *timeout);
int jv_readlink(struct ckptfs *fs, Node *n, VNode *vn, char **target);
int jv_opendir(struct ckptfs *fs, Node *n, VNode *vn, ViewsDir *d);
int jv_open(struct ckptfs *fs, Node *n, VNode *vn, ViewsOpen *out);
/* n's provenance from its job's snapshot now: 0, or -EAGAIN when the
 * layer it was last looked up in is of another snapshot (look its path up
 * again, then ask again). */
int jv_provenance(struct ckptfs *fs, Node *n, VNode *vn, ViewsProv *p);
/* readdirplus: entry i of a tree handle's listing, looked up (nlookup+1). */
int jv_readdir_entry(struct ckptfs *fs, ViewsDir *d, guint i, struct fuse_entry_param *e);
void listing_unref(Listing *l);
/* A directory handle of vn is released with its listing l (a reference):
 * the node keeps no small listing the kernel has read, so a walk leaves
 * few behind (built again, the same entries give the same serial). */
void jv_listing_done(VNode *vn, Listing *l);

/* catalog_watch.c */
int catalog_watch_start(struct ckptfs *fs);
void catalog_watch_stop(struct ckptfs *fs);
/* A write through the mount changed what the catalog knows of job: re-read
 * it now (or, while the catalog loads, have the loader re-read it) and
 * queue the kernel invalidations of its views. */
void catalog_watch_refresh(struct ckptfs *fs, const char *job, bool wait);
/* The kernel just read tree directory dir's listing, and with it its
 * entries, valid for a views timeout: LISTING_DROP_PCT of it later its
 * cached listing is dropped (up to LISTING_DROP_EARLY_PCT early: fewer
 * wake-ups), so that a walk after that reads the listing again with
 * READDIRPLUS, which gives the kernel every entry anew in one request,
 * rather than its cached listing and a LOOKUP per expired entry.  A walk
 * before that is served from the kernel's caches; the rest of the timeout
 * is the margin for a walk that read the cached listing just before the
 * drop and stats its entries after it.  A READDIRPLUS leaves to the kernel
 * (no attributes) only entries it was given with at least 100 -
 * ENTRY_FRESH_PCT percent of a timeout still to run (by the timeout they
 * got: rescan= can change live), so that none of the entries the kernel
 * keeps expires before the listing is dropped. */
void catalog_watch_lag_listing(struct ckptfs *fs, fuse_ino_t dir);
#define LISTING_DROP_PCT       75
#define LISTING_DROP_EARLY_PCT 5
#define ENTRY_FRESH_PCT        25
_Static_assert(ENTRY_FRESH_PCT + LISTING_DROP_PCT - LISTING_DROP_EARLY_PCT <= 100,
               "an entry left to the kernel must outlive the listing that holds it");
/* pct percent of the views timeout v, in microseconds */
#define VIEWS_TIMEOUT_PCT_US(v, pct) ((gint64)(views_timeout(v) * 1e6 * (pct) / 100))
/* rescan= in seconds, and its live change (the watcher's next wait uses
 * it; the listings queued for a drop are brought forward to it). */
double catalog_watch_rescan(struct ckptfs *fs);
void catalog_watch_set_rescan(struct ckptfs *fs, double seconds);
/* While the catalog loads: its progress into the catalog gauges; wait:
 * first give the load up to half a second to finish (a read of .metrics). */
void catalog_watch_load_gauges(struct ckptfs *fs, bool wait);
