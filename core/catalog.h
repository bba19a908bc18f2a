/* The catalog of one checkpoint directory: jobs -> markers -> what each
 * restore reads, the hazards (ckptctl check) and the unused report.
 *
 * Built once (ck_catalog_open), then kept current: ck_catalog_refresh_job
 * after a write through the mount touched _jobs/<J>, ck_catalog_rescan for
 * changes made behind the mount's back (re-stats markers, re-parses only
 * those whose (ino, size, mtime) changed).
 *
 * Concurrency: jobs are immutable, reference-counted snapshots.  Readers take
 * one with ck_catalog_get_job and may keep it as long as they like; a refresh
 * swaps in a new snapshot under the catalog's lock.  All calls thread-safe.
 *
 * Freshness: rescan re-evaluates a job (re-parsing its markers) when a
 * marker's (ino, size, mtime) changed, when _state/<J> changed (ino, mtime),
 * or, for jobs with legacy markers, when the top level changed (mtime); a
 * change deeper down (a subtask dir added under _state/<J>/v<G>) is seen at
 * the job's next marker change or refresh.
 *
 * Budget: 10,000 jobs x 10 markers open in well under 1 s and take at most
 * 1 KiB per marker (ckpt-bench(1) measures both). */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "resolve.h"

typedef struct {
    uint64_t n;
    CkRestore *restore;     /* class, root, generation, participants, reads, error */
    GPtrArray *shared_with; /* interned job ids whose restorable markers read the state location
                               this one reads (ck_restore_location: the same root and
                               generation, even when their subtasks are disjoint) */
    GPtrArray *unknown;     /* CkMarkerKv*: unknown keys, kept and shown */
} CkCheckpointInfo;

typedef struct {
    const char *job;        /* interned */
    GPtrArray *checkpoints; /* CkCheckpointInfo*, ascending n */
    bool has_latest;
    uint64_t latest;      /* highest restorable n */
    bool has_markers_dir; /* _jobs/<J> exists */
    bool has_own_root;    /* _state/<J> exists */
    const char *layout;   /* "namespaced", "legacy", "mixed"; "namespaced" when no
                           * readable marker says */
    guint64 bytes;        /* bytes of state its restorable markers read (computed lazily by
                             ck_catalog_job_bytes, 0 here) */
    guint64 version;      /* bumps each time this job's snapshot is replaced */
} CkJobInfo;

/* One mapped subtree of a job's resolved state tree (_views/<J>/state):
 * the virtual path `prefix` (e.g. "" or "v1/0") shows the backing directory
 * `backing` (relative to the checkpoint dir when local, absolute when
 * external).  Layers are ordered: own root first; an earlier layer's entry
 * shadows a later layer's entry of the same name. */
typedef struct {
    char *prefix;
    char *backing;
    bool local;         /* backing is relative to the checkpoint dir */
    const char *source; /* "own", "legacy", "external" */
    bool has_generation;
    uint64_t generation;
} CkLayer;

typedef struct CkCatalog CkCatalog;

/* How far ck_catalog_open got, for a progress line or a metric: atomics
 * (g_atomic_int_get) the build adds to while it runs. */
typedef struct {
    gint jobs_total;     /* jobs the build looks at (set once they are listed) */
    gint jobs_done;      /* jobs looked at */
    gint markers_known;  /* markers listed */
    gint markers_loaded; /* markers read and resolved */
} CkCatalogProgress;

typedef struct {
    CkResolveOptions resolve;
    const char *views_name;      /* skipped at the top level; "_views" */
    CkCatalogProgress *progress; /* optional: counted into during ck_catalog_open only */
    /* A report (ckptctl) must not read an unreadable _jobs/<J> or _state/<J>
     * as a job without markers or state; a mount goes on past it.  When
     * set, a full listing (open, rescan) notes the directories it could not
     * open, for ck_catalog_unreadable (every _state/<J> is opened, not only
     * looked at, and its listing serves the restores that read it). */
    bool report_unreadable;
} CkCatalogOptions;

CkCatalog *ck_catalog_open(const char *dir, const CkCatalogOptions *opts, GError **error);
/* A catalog of the one job `job` of dir (what ck_resolve reads a job's
 * markers with): the same snapshot as ck_catalog_open's for that job, less
 * shared_with (no other job is looked at); rescans keep to that job. */
CkCatalog *ck_catalog_open_job(const char *dir, const char *job, const CkCatalogOptions *opts,
                               GError **error);
void ck_catalog_free(CkCatalog *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkCatalog, ck_catalog_free)

/* Sorted interned job ids (a new array; g_ptr_array_unref). */
GPtrArray *ck_catalog_job_names(CkCatalog *c);
/* Changes whenever a job is added or removed (so the names above did). */
guint64 ck_catalog_names_version(CkCatalog *c);
/* A referenced snapshot, or NULL if no such job. */
CkJobInfo *ck_catalog_get_job(CkCatalog *c, const char *job);
CkJobInfo *ck_job_info_ref(CkJobInfo *j);
void ck_job_info_unref(CkJobInfo *j);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkJobInfo, ck_job_info_unref)

/* The layers of _views/<J>/state (a new array of CkLayer*, freed with it):
 *  - the own root "_state/<J>" at prefix "" (only when it exists), then
 *  - for each restorable checkpoint of J, newest first, each read that is not
 *    inside the own root: prefix "v<G>/<S>" (the older layout too; "<S>" when
 *    an older-layout marker has no generation at all), source "legacy" for
 *    local reads and "external" for external roots.  Remote roots are never
 *    layers; nor is a foreign root (_state/<other>): another job's state is
 *    never shown as J's (checkpoints/<N> still shows what that restore reads).
 *  A legacy generation no marker of J references is never a layer. */
GPtrArray *ck_job_state_layers(const CkJobInfo *j);
/* The layers of _views/<J>/checkpoints/<N>: prefix "<S>" -> each read
 * (empty for a checkpoint that is not restorable, or whose root is remote). */
GPtrArray *ck_job_checkpoint_layers(const CkJobInfo *j, const CkCheckpointInfo *cp);
/* The text of _views/<J>/restore (g_free): one block per checkpoint,
 * ascending, blocks separated by one blank line, each block
 * ck_restore_describe's lines (the words ckptctl resolve prints), with
 * shared_with and the unknown keys, paths relative to the directory. */
char *ck_job_restore_text(const CkJobInfo *j);

/* Bytes of state (regular files, st_size) under the locations j's restorable
 * markers read, each file counted once (hard links too).  Remote roots count 0. */
guint64 ck_catalog_job_bytes(CkCatalog *c, const CkJobInfo *j);

/* Re-reads _jobs/<J> (and _state/<J>).  Returns true when the snapshot changed. */
bool ck_catalog_refresh_job(CkCatalog *c, const char *job);
/* The same for several jobs at once (one publication, one pass over the
 * shared locations); changed_out (optional) as below. */
void ck_catalog_refresh_jobs(CkCatalog *c, GPtrArray *jobs, GPtrArray *changed_out);
/* Re-lists _jobs and _state and re-stats every marker; re-parses what changed.
 * changed_out (optional): gets the interned ids of jobs added, removed or changed. */
void ck_catalog_rescan(CkCatalog *c, GPtrArray *changed_out);

/* The cheap checks a periodic rescan is made of (three and two or three
 * fstatat, no listing, no parsing, nothing allocated when nothing changed):
 *  - ck_catalog_check_top: the top level, _jobs and _state; when _jobs or
 *    _state changed, re-lists them (new jobs are read, vanished ones
 *    dropped); when the top level changed, re-reads the jobs whose restores
 *    depend on it (legacy markers);
 *  - ck_catalog_job_check: true when `job` may have changed since it was
 *    last read: _jobs/<J> (a chk-<N> added, removed or renamed), _state/<J>,
 *    or a chk-<N> that had no COMPLETED yet changed.  Then refresh it.
 * A COMPLETED rewritten in place, or replaced by a rename, changes none of
 * these: ck_catalog_job_stale and ck_catalog_refresh_job (which compare
 * every marker's stamp) see it. */
void ck_catalog_check_top(CkCatalog *c, GPtrArray *changed_out);
bool ck_catalog_job_check(CkCatalog *c, const char *job);
/* ck_catalog_job_check, and then one fstatat a marker: true when any
 * COMPLETED of `job` is not as last read (rewritten in place, replaced by
 * a rename, gone).  For the jobs someone is looking at. */
bool ck_catalog_job_stale(CkCatalog *c, const char *job);
/* The jobs that had a chk-<N> without COMPLETED when last read (interned
 * ids, a new array): where a marker is about to appear. */
GPtrArray *ck_catalog_pending_jobs(CkCatalog *c);

/* With report_unreadable: 0 when the last full listing opened _jobs, _state
 * and every _jobs/<J> and _state/<J> it found (or found them gone, not
 * directories, or symlinks), else -errno of the first that failed (_jobs,
 * _state, every _jobs/<J> by job id, then every _state/<J>) with *where
 * (g_free) its path relative to the directory.  0 without report_unreadable. */
int ck_catalog_unreadable(CkCatalog *c, char **where);

/* The descriptor of the directory the catalog reads beneath (its own: do
 * not close it, nor read it as a directory stream). */
int ck_catalog_dirfd(CkCatalog *c);
/* The N of each chk-<N> of `job` that had no COMPLETED when last read (a new
 * GArray of guint64, empty when none). */
GArray *ck_catalog_pending_checkpoints(CkCatalog *c, const char *job);

/* Threads for a walk over every job (the catalog's build, the bytes of
 * ckptctl jobs): more than processors, since a walk after boot waits on
 * the disk for most entries.  Eight reads in flight instead of two took a
 * cold load of 10,000 jobs from 7.7-9.4 s to 5.0 s, of 100,000 from 102 s
 * to 83 s, and the bytes walk of 10,000 from 8.4-10.6 s to 7.4-8.4 s (two
 * processors), within 3 % either way when everything is cached. */
#define CK_WALK_THREADS_MAX 16
guint ck_walk_threads(void); /* 4 per processor, at least 8, at most the max */

guint ck_catalog_n_jobs(CkCatalog *c);
guint ck_catalog_n_markers(CkCatalog *c);

typedef struct {
    const char *kind; /* "shared-location", "foreign-root", "malformed", "cut-short",
                         "orphan-root", "not-a-job" */
    GPtrArray *jobs;  /* char* */
    char *path;       /* relative to the dir */
    char *detail;     /* never NULL */
    bool collision;   /* shared-location, foreign-root */
} CkHazard;

/* A new array of CkHazard* (freed with it), sorted by kind (in the order
 * above) then path.  path: the shared state location, <root>/v<G> ("." for
 * the directory itself: the older layout), for shared-location, whatever
 * subtasks each job reads there (a rescaled subtask of either writes into
 * the other's); the marker
 * (foreign-root, malformed, cut-short; an unreadable marker is malformed),
 * "_state/<J>" (orphan-root), "_jobs/<name>" or "_state/<name>" (not-a-job).
 * jobs: sorted ids; for foreign-root [J, the other job]; empty for not-a-job. */
GPtrArray *ck_catalog_hazards(CkCatalog *c);
/* What makes two hazards the same one, as a string (g_free): kind, path
 * and jobs, not the detail (which lists every checkpoint involved, and
 * grows as jobs go on writing there). */
char *ck_hazard_key(const CkHazard *h);

typedef struct {
    char *path;         /* relative to the dir: "v1", "3", "_state/j1/v2" */
    const char *reason; /* "legacy-unread", "superseded-generation" */
    guint64 bytes;      /* du-like: st_blocks * 512 of everything below, each inode once */
} CkUnused;

/* A new array of CkUnused* (freed with it), sorted by path.  Deletes nothing.
 *  - "legacy-unread": a top-level v<G> or bare <S> directory that no
 *    restorable marker of any job reads;
 *  - "superseded-generation": _state/<J>/v<G> with G below the generation of
 *    every restorable marker of J whose root is _state/<J> (J needs at least
 *    one), and that no restorable marker of any job reads. */
GPtrArray *ck_catalog_unused(CkCatalog *c);
/* The same rule for one path, by the catalog's current snapshots: the
 * reason ck_catalog_unused would list `path` with ("v1", "3",
 * "_state/j1/v2", relative to the dir), or NULL when it would not, with
 * *why (optional, g_free) saying why not: "read by
 * _jobs/b/chk-1/COMPLETED", "not older than generation 3 of ...".  *err
 * (optional): 0 when the markers decided, else -errno of looking at the
 * path, reached through no symlink: -ENOENT (gone), -ENOTDIR (not a
 * directory), -ELOOP (a symlink, itself or on the way), -EACCES, ... */
const char *ck_catalog_unused_reason(CkCatalog *c, const char *path, int *err, char **why);
