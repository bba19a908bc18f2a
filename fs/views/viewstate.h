/* The views' shared state: what views.c (the views dir and the dispatch),
 * jobviews.c (the per-job trees) and catalog_watch.c (the catalog's
 * upkeep) all read, behind fs->views.
 *
 * This file calls none of the three; views.c calls jobviews.c and
 * catalog_watch.c, and those two call only this file, so no two of the
 * views' files call each other both ways.
 *
 * Here: the catalog (published once loaded) and the job names served
 * before it is, the job snapshots the views derive (JobView, a bounded
 * cache), the inode numbers of virtual nodes and the attributes of views
 * directories.
 *
 * Locks (leaves in ckptfs.h's order; none is held across a reply, a
 * catalog rebuild or a kernel notification): Views.lock guards the fields
 * marked (lock) below, inval_lock the invalidation counters.  One wait
 * between requests: a request for a job another request is comparing
 * waits for that comparison, at most COMPARE_WAIT_US after it began; so a
 * request comparing a job never waits for another request or for the
 * notifier (which may wait for the kernel, which may wait for a request). */
#pragma once
#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "catalog.h"
#include "ckptfs.h"

/* One job snapshot with what the views derive from it (an atomic rc box). */
typedef struct {
    CkJobInfo *j;
    GPtrArray *state_layers; /* CkLayer* */
    GPtrArray *ckpt_layers;  /* GPtrArray* of CkLayer*, parallel to j->checkpoints */
    char *restore;           /* ck_job_restore_text */
    gsize restore_len;
    _Atomic gint64 used_us; /* monotonic time of its last jobview_get */
} JobView;

typedef struct {
    /* immutable once views_init returned */
    uid_t uid;
    gid_t gid;
    struct timespec mounted;
    CkCatalogOptions copts;  /* what the catalog was opened with */
    GPtrArray *ext_prefixes; /* normalised external_root prefixes */
    /* no SELinux on this host: the kernel passes security.* to the daemon,
     * and entries below the views answer them "not supported" */
    bool no_labels;

    GMutex lock;
    GCond loaded_cond;      /* load_done became true */
    CkCatalog *cat;         /* (lock) NULL until the loader published it; then fixed */
    bool load_done;         /* (lock) the loader finished (cat may still be NULL: failed) */
    GPtrArray *early_names; /* sorted interned job ids, served until cat is loaded */
    GHashTable *pending;    /* (lock) jobs written through the mount while loading (set) */
    GHashTable *jobviews;   /* (lock) interned job -> JobView* (rc box) */
    /* (lock) interned job -> when a request last compared its markers with
     * the backing directory (monotonic us, as a pointer; jobview_get),
     * within rescan= (jobviews_expire lets older ones go) */
    GHashTable *compared;
    /* (lock) interned job -> when the request comparing it now began
     * (monotonic us, as a pointer): one request at a time compares a
     * job, and the others wait for it (jobview_get), a bounded while */
    GHashTable *comparing;
    GCond compared_cond;    /* a comparison ended, of any job */
    guint64 compares_ended; /* (lock) how many did */

    /* the views dir's listing once the catalog is loaded (views.c; lock) */
    GPtrArray *root_names; /* sorted interned job ids */
    GArray *root_inos;     /* ino_t, parallel */
    guint64 root_version;  /* ck_catalog_names_version they are of */
    guint64 root_given;    /* root_version + 1 of the listing the kernel got last, 0: none */

    /* catalog_watch.c's: its threads and their wake-ups */
    GThread *watcher, *notifier;
    void *loadctl;      /* (lock) catalog_watch.c's LoadCtl */
    GAsyncQueue *inval; /* InvalItem* for the notifier */
    /* how many items were queued and how many the notifier has sent
     * (inval_lock), for a write that waits for its own (catalog_watch.c) */
    GMutex inval_lock;
    GCond inval_cond;
    guint64 inval_queued, inval_sent;
    /* tree directories whose cached listing the notifier drops when due
     * (catalog_watch_lag_listing; inval_lock): LaggedDir* in due order,
     * and the set of their inode numbers */
    GQueue lagged;
    GHashTable *lagged_set;
    int wake_fd;      /* eventfd: wakes the watcher (stop, a new rescan period) */
    gint64 rescan_us; /* atomic: rescan= (changed live through .control) */
    gint stopping;    /* atomic */
    gint threads_stopped;
} Views;

static inline Views *views_of(struct ckptfs *fs)
{
    return (Views *)fs->views;
}

/* The entry and attribute timeout of views entries, in seconds: as long
 * as a change behind the mount may take to show anyway, rescan= as it is
 * now.  A live change applies to what the kernel is given from then on;
 * what it holds keeps the timeout it got. */
static inline double views_timeout(const Views *v)
{
    return (double)__atomic_load_n(&v->rescan_us, __ATOMIC_RELAXED) / 1e6;
}

/* The timeout of entries invalidated explicitly, and of constant attributes. */
static inline double views_stable_timeout(const Views *v)
{
    return MAX(views_timeout(v), 60.0);
}

/* The state of a mount's views: reads the job names (the views dir lists
 * them at once, before the catalog is loaded). */
Views *viewstate_new(struct ckptfs *fs);
/* Frees it (catalog_watch_stop first: its threads read it). */
void viewstate_free(Views *v);
/* No catalog is coming (any more): requests waiting for it stop waiting. */
void viewstate_end_load(Views *v);

/* Inode numbers of virtual nodes: the top bit set (never a backing
 * number); four fixed ones for the views dir and its files, and a 62-bit
 * hash of the vkey for every other (views_vino). */
#define VINO_DIR        ((ino_t)((1ull << 63) | 1))
#define VINO_COLLISIONS ((ino_t)((1ull << 63) | 2))
#define VINO_METRICS    ((ino_t)((1ull << 63) | 3))
#define VINO_CONTROL    ((ino_t)((1ull << 63) | 4))
#define VINO_FIRST      ((1ull << 63) | (1ull << 62))

/* The inode number of the virtual node of vkey (a hash: stable across
 * forgets and daemons). */
ino_t views_vino(struct ckptfs *fs, const char *vkey);
/* 64-bit FNV-1a of n bytes at p, going on from h (VIEWS_HASH_START first):
 * inode numbers of keys, and the fingerprint of a tree directory's listing. */
#define VIEWS_HASH_START 0xcbf29ce484222325ull
guint64 views_hash(guint64 h, const void *p, size_t n);
void views_dir_attr(struct ckptfs *fs, ino_t ino, struct stat *st);

/* The catalog, waiting for the loader when it is still running (NULL: it failed). */
CkCatalog *views_catalog(struct ckptfs *fs);
/* The catalog when it is loaded, else NULL (never waits). */
CkCatalog *views_catalog_if_loaded(struct ckptfs *fs);
/* Job ids for the views dir listing: the catalog's, or the early names. */
GPtrArray *views_job_names(struct ckptfs *fs);
bool views_has_job(struct ckptfs *fs, const char *job);

/* The snapshot of job's views (a reference; NULL: no such job).  A job
 * not compared with the backing directory within rescan= is compared
 * first, marker by marker (ck_catalog_job_stale): what the catalog holds
 * of it may be as old as its last full comparison, minutes. */
JobView *jobview_get(struct ckptfs *fs, const char *job);
/* The same, comparing when the last comparison is older than max_age_us
 * (jobview_get: rescan=). */
JobView *jobview_get_within(struct ckptfs *fs, const char *job, gint64 max_age_us);
void jobview_unref(JobView *jv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(JobView, jobview_unref)
/* Drops the cached snapshot and comparison time of a job that is gone. */
void jobviews_forget(struct ckptfs *fs, const char *job);
/* A job changed (its catalog refresh done): queue the kernel invalidations
 * of its views for the notifier (catalog_watch.c).  The item's number, 0
 * when not queued (the views stop). */
guint64 views_queue_inval(struct ckptfs *fs, const char *job);
/* The same after a refresh of job in c made in a request: the catalog's
 * gauges (jobs, markers) first. */
guint64 views_job_refreshed(struct ckptfs *fs, CkCatalog *c, const char *job);
/* Drops the cached snapshots nobody asked for in idle_us (a walk over the
 * views leaves up to JOBVIEWS_MAX of them), and the comparison times older
 * than rescan= (a walk leaves one a job); gives the memory back. */
void jobviews_expire(struct ckptfs *fs, gint64 idle_us);
