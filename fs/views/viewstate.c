/* The views' shared state (viewstate.h): the catalog and the early job
 * names, the job snapshots, virtual inode numbers and directory attributes. */
#include "viewstate.h"
#include "intern.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "classify.h"
#include "layout.h"
#include "markers.h"
#include "resolve.h"

/* ---- inode numbers and attributes ---- */

ino_t views_vino(struct ckptfs *fs, const char *vkey)
{
    /* A function of the key alone (64-bit FNV-1a): a path keeps its number
     * after the kernel forgot its node and across daemon restarts, with no
     * table that grows with every path ever listed.  Two keys share a number
     * with odds of about n^2 / 2^63 (1e-7 at a million paths). */
    (void)fs;
    guint64 h = views_hash(VIEWS_HASH_START, vkey, strlen(vkey));
    return (ino_t)(VINO_FIRST | (h >> 2));
}

guint64 views_hash(guint64 h, const void *p, size_t n)
{
    for (const unsigned char *c = p, *end = c + n; c < end; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    return h;
}

void views_dir_attr(struct ckptfs *fs, ino_t ino, struct stat *st)
{
    Views *v = views_of(fs);
    memset(st, 0, sizeof *st);
    st->st_uid = v->uid;
    st->st_gid = v->gid;
    st->st_atim = st->st_mtim = st->st_ctim = v->mounted;
    st->st_blksize = 4096;
    st->st_ino = ino;
    st->st_mode = S_IFDIR | 0555;
    /* 1 as btrfs does: "subdirectories unknown", so no walker takes a leaf shortcut */
    st->st_nlink = 1;
}

/* ---- job names before the catalog is loaded ---- */

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The job directories under _jobs and _state (what the catalog lists). */
static GPtrArray *scan_job_names(struct ckptfs *fs)
{
    g_autoptr(GHashTable) set = g_hash_table_new(g_direct_hash, g_direct_equal);
    ck_list_job_dirs(fs->root_fd, CK_JOBS_DIR, set, NULL);
    ck_list_job_dirs(fs->root_fd, CK_STATE_DIR, set, NULL);
    GPtrArray *out = g_ptr_array_sized_new(g_hash_table_size(set));
    GHashTableIter it;
    gpointer k;
    g_hash_table_iter_init(&it, set);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(out, k);
    g_ptr_array_sort(out, cmp_str);
    return out;
}

/* ---- the catalog ---- */

CkCatalog *views_catalog(struct ckptfs *fs)
{
    Views *v = views_of(fs);
    g_mutex_lock(&v->lock);
    while (!v->load_done)
        g_cond_wait(&v->loaded_cond, &v->lock);
    CkCatalog *c = v->cat;
    g_mutex_unlock(&v->lock);
    return c;
}

CkCatalog *views_catalog_if_loaded(struct ckptfs *fs)
{
    Views *v = views_of(fs);
    g_mutex_lock(&v->lock);
    CkCatalog *c = v->load_done ? v->cat : NULL;
    g_mutex_unlock(&v->lock);
    return c;
}

GPtrArray *views_job_names(struct ckptfs *fs)
{
    Views *v = views_of(fs);
    CkCatalog *c = views_catalog_if_loaded(fs);
    if (c)
        return ck_catalog_job_names(c);
    g_mutex_lock(&v->lock);
    GPtrArray *out =
        v->early_names && !v->load_done ? g_ptr_array_ref(v->early_names) : g_ptr_array_new();
    g_mutex_unlock(&v->lock);
    return out;
}

bool views_has_job(struct ckptfs *fs, const char *job)
{
    Views *v = views_of(fs);
    CkCatalog *c = views_catalog_if_loaded(fs);
    if (c) {
        g_autoptr(CkJobInfo) j = ck_catalog_get_job(c, job);
        return j != NULL;
    }
    bool found = false;
    g_mutex_lock(&v->lock);
    if (!v->load_done && v->early_names) {
        const char *ij = ck_intern(job);
        found = g_ptr_array_find(v->early_names, ij, NULL);
    }
    g_mutex_unlock(&v->lock);
    return found;
}

/* ---- job views ---- */

/* Snapshots kept for their views (about 5 KB each at 10 checkpoints: the
 * layers of every checkpoint and the restore text).  A walk goes one job at
 * a time, so a few hundred serve it; 2,048 held 11 MB more after a walk of
 * 2,000 jobs and kept pages the kernel's forgets would have given back.
 * Past it the older half goes (drop_older_half_locked). */
#define JOBVIEWS_MAX 256

static void layers_unref(gpointer p)
{
    if (p)
        g_ptr_array_unref(p);
}

static void jobview_clear(gpointer p)
{
    JobView *jv = p;
    ck_job_info_unref(jv->j);
    g_ptr_array_unref(jv->state_layers);
    g_ptr_array_unref(jv->ckpt_layers);
    g_free(jv->restore);
}

void jobview_unref(JobView *jv)
{
    if (jv)
        g_atomic_rc_box_release_full(jv, jobview_clear);
}

static JobView *jobview_build(CkJobInfo *j)
{
    JobView *jv = g_atomic_rc_box_new0(JobView);
    jv->j = j;
    jv->state_layers = ck_job_state_layers(j);
    jv->ckpt_layers = g_ptr_array_new_full(j->checkpoints->len, layers_unref);
    for (guint i = 0; i < j->checkpoints->len; i++)
        g_ptr_array_add(jv->ckpt_layers, ck_job_checkpoint_layers(j, j->checkpoints->pdata[i]));
    jv->restore = ck_job_restore_text(j);
    jv->restore_len = strlen(jv->restore);
    jv->used_us = g_get_monotonic_time();
    return jv;
}

/* Drops the snapshots last asked for before `before`; how many.  Views.lock held. */
static guint drop_unused_since_locked(Views *v, gint64 before)
{
    guint dropped = 0;
    GHashTableIter it;
    gpointer jv;
    g_hash_table_iter_init(&it, v->jobviews);
    while (g_hash_table_iter_next(&it, NULL, &jv))
        if (atomic_load(&((JobView *)jv)->used_us) < before) {
            g_hash_table_iter_remove(&it);
            dropped++;
        }
    return dropped;
}

static gint cmp_i64(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

/* A full cache keeps the half asked for last: a walk that comes back to
 * the jobs it just saw still finds them.  Views.lock held. */
static void drop_older_half_locked(Views *v)
{
    g_autoptr(GArray) used = g_array_sized_new(FALSE, FALSE, sizeof(gint64), JOBVIEWS_MAX);
    GHashTableIter it;
    gpointer jv;
    g_hash_table_iter_init(&it, v->jobviews);
    while (g_hash_table_iter_next(&it, NULL, &jv)) {
        gint64 u = atomic_load(&((JobView *)jv)->used_us);
        g_array_append_val(used, u);
    }
    g_array_sort(used, cmp_i64);
    gint64 median = g_array_index(used, gint64, used->len / 2);
    if (drop_unused_since_locked(v, median) == 0)
        g_hash_table_remove_all(v->jobviews); /* all asked for at one instant */
}

/* The cached snapshot of j's job when it is of j's version (a reference),
 * marked used at now; else NULL.  Views.lock held. */
static JobView *cached_locked(Views *v, const CkJobInfo *j, gint64 now)
{
    JobView *jv = g_hash_table_lookup(v->jobviews, j->job);
    if (!jv || jv->j->version != j->version)
        return NULL;
    atomic_store(&jv->used_us, now);
    return g_atomic_rc_box_acquire(jv);
}

/* Compares job's markers' stamps with what c read of them and re-reads the
 * job where they differ: a COMPLETED rewritten in place behind the mount
 * changes no directory, and the catalog would otherwise see it only at its
 * next full comparison.  Whether they differed (the snapshot changed, here
 * or in another thread that re-read it first).  Other requests for the
 * job may be waiting for it: it waits for none, nor for the notifier. */
static bool compare_job(struct ckptfs *fs, CkCatalog *c, const char *job)
{
    if (!ck_catalog_job_stale(c, job))
        return false;
    if (ck_catalog_refresh_job(c, job))
        views_job_refreshed(fs, c, job);
    return true;
}

/* A time as a hash table value. */
G_STATIC_ASSERT(sizeof(gpointer) >= sizeof(gint64));

/* How long a comparison may hold up the other requests for its job: one
 * fstatat a marker, and a re-read when they differ, take milliseconds; a
 * comparison held up longer (a full rescan holds the catalog) is not worth
 * more of worker threads that serve the data path too.  The bound is the
 * comparison's, from when it began: every request waits within it. */
#define COMPARE_WAIT_US (100 * G_TIME_SPAN_MILLISECOND)

/* Whether the caller is to compare job (interned) now: no request did
 * within max_age, and none is.  The caller then ends its claim with
 * compare_done_locked.  Views.lock held. */
static bool claim_compare_locked(Views *v, const char *ij, gint64 now, gint64 max_age)
{
    gint64 last = (gint64)(gintptr)g_hash_table_lookup(v->compared, ij);
    if ((last && now - last < max_age) || g_hash_table_contains(v->comparing, ij))
        return false;
    g_hash_table_replace(v->compared, (gpointer)ij, (gpointer)(gintptr)now);
    g_hash_table_insert(v->comparing, (gpointer)ij, (gpointer)(gintptr)now);
    return true;
}

/* Ends a claim; the broadcast wakes the waiters of every job, which look
 * again at their own.  Views.lock held. */
static void compare_done_locked(Views *v, const char *ij)
{
    g_hash_table_remove(v->comparing, ij);
    v->compares_ended++;
    g_cond_broadcast(&v->compared_cond);
}

/* Until when a request for job waits for a comparison of it: 0 when none
 * is being made, or the one being made began COMPARE_WAIT_US ago.
 * Views.lock held. */
static gint64 wait_until_locked(Views *v, const char *job)
{
    gpointer began;
    if (!g_hash_table_lookup_extended(v->comparing, job, NULL, &began))
        return 0;
    gint64 until = (gint64)(gintptr)began + COMPARE_WAIT_US;
    return until > g_get_monotonic_time() ? until : 0;
}

/* The catalog's snapshot of job (a reference; NULL: no such job) as it is
 * when no request is comparing the job: a snapshot taken while one is
 * may be the one being compared, and a reply made from it could reach the
 * kernel after the invalidation the comparison queues, to be kept a whole
 * timeout.  So it waits for a comparison of job (up to COMPARE_WAIT_US
 * after it began, then takes the snapshot as it is), and takes it again
 * when a comparison ended while it was being taken, a few times at most.
 * Views.lock held, dropped while it takes the snapshot. */
static CkJobInfo *settled_job_locked(Views *v, CkCatalog *c, const char *job)
{
    CkJobInfo *j = NULL;
    for (int tries = 0; tries < 3; tries++) {
        gint64 until;
        while ((until = wait_until_locked(v, job)) &&
               g_cond_wait_until(&v->compared_cond, &v->lock, until))
            ;
        guint64 ended = v->compares_ended;
        g_mutex_unlock(&v->lock);
        if (j)
            ck_job_info_unref(j);
        j = ck_catalog_get_job(c, job);
        g_mutex_lock(&v->lock);
        if (!j || (v->compares_ended == ended && !wait_until_locked(v, job)))
            break;
    }
    return j;
}

/* Forgets the comparisons older than rescan=: as good as none. */
static void expire_compared_locked(Views *v, gint64 now)
{
    gint64 rescan = __atomic_load_n(&v->rescan_us, __ATOMIC_RELAXED);
    GHashTableIter it;
    gpointer t;
    g_hash_table_iter_init(&it, v->compared);
    while (g_hash_table_iter_next(&it, NULL, &t))
        if (now - (gint64)(gintptr)t >= rescan)
            g_hash_table_iter_remove(&it);
}

JobView *jobview_get(struct ckptfs *fs, const char *job)
{
    return jobview_get_within(fs, job, __atomic_load_n(&views_of(fs)->rescan_us, __ATOMIC_RELAXED));
}

JobView *jobview_get_within(struct ckptfs *fs, const char *job, gint64 max_age_us)
{
    Views *v = views_of(fs);
    CkCatalog *c = views_catalog(fs);
    if (!c)
        return NULL;
    /* A job not compared with the backing directory within max_age_us is
     * compared now (compare_job), by one of the threads that find it due;
     * the others wait for that comparison (settled_job_locked). */
    g_mutex_lock(&v->lock);
    CkJobInfo *j = settled_job_locked(v, c, job);
    if (!j) {
        g_mutex_unlock(&v->lock);
        return NULL;
    }
    gint64 now = g_get_monotonic_time();
    JobView *jv;
    bool compare = claim_compare_locked(v, j->job, now, max_age_us);
    if (!compare && (jv = cached_locked(v, j, now))) {
        g_mutex_unlock(&v->lock);
        ck_job_info_unref(j);
        return jv;
    }
    g_mutex_unlock(&v->lock);
    if (compare) {
        const char *ij = j->job;
        bool changed = compare_job(fs, c, ij);
        if (changed) {
            /* the snapshot now: another thread may have refreshed it first */
            ck_job_info_unref(j);
            j = ck_catalog_get_job(c, job);
        }
        g_mutex_lock(&v->lock);
        compare_done_locked(v, ij);
        jv = j ? cached_locked(v, j, now) : NULL; /* unchanged, or built by another thread */
        g_mutex_unlock(&v->lock);
        if (!j)
            return NULL;
        if (jv) {
            ck_job_info_unref(j);
            return jv;
        }
    }
    JobView *fresh = jobview_build(j); /* takes j */
    g_mutex_lock(&v->lock);
    jv = g_hash_table_lookup(v->jobviews, fresh->j->job);
    if (!jv || jv->j->version < fresh->j->version) {
        /* a walk over every job must not keep every job's view: bounded */
        if (!jv && g_hash_table_size(v->jobviews) >= JOBVIEWS_MAX)
            drop_older_half_locked(v);
        g_hash_table_replace(v->jobviews, (gpointer)fresh->j->job, fresh);
        jv = fresh;
    } else {
        jobview_unref(fresh);
    }
    g_atomic_rc_box_acquire(jv);
    g_mutex_unlock(&v->lock);
    return jv;
}

void jobviews_forget(struct ckptfs *fs, const char *job)
{
    Views *v = views_of(fs);
    g_mutex_lock(&v->lock);
    g_hash_table_remove(v->jobviews, job);
    g_hash_table_remove(v->compared, job);
    g_mutex_unlock(&v->lock);
}

guint64 views_queue_inval(struct ckptfs *fs, const char *job)
{
    Views *v = views_of(fs);
    guint64 ticket = 0;
    /* under the lock: a request may come while the views stop */
    g_mutex_lock(&v->inval_lock);
    if (v->inval && !g_atomic_int_get(&v->stopping)) {
        ticket = ++v->inval_queued;
        g_async_queue_push(v->inval, (gpointer)job); /* in ticket order: under the lock */
    }
    g_mutex_unlock(&v->inval_lock);
    return ticket;
}

guint64 views_job_refreshed(struct ckptfs *fs, CkCatalog *c, const char *job)
{
    atomic_store(&fs->metrics->catalog_jobs, ck_catalog_n_jobs(c));
    atomic_store(&fs->metrics->catalog_markers, ck_catalog_n_markers(c));
    return views_queue_inval(fs, job);
}

void jobviews_expire(struct ckptfs *fs, gint64 idle_us)
{
    Views *v = views_of(fs);
    gint64 now = g_get_monotonic_time();
    g_mutex_lock(&v->lock);
    guint dropped = drop_unused_since_locked(v, now - idle_us);
    expire_compared_locked(v, now);
    g_mutex_unlock(&v->lock);
    /* freed in the arenas of the threads that built them: back to the
     * system, not kept for allocations that may never come */
    if (dropped >= 64)
        malloc_trim(0);
}

/* ---- set-up ---- */

Views *viewstate_new(struct ckptfs *fs)
{
    Views *v = g_new0(Views, 1);
    struct stat st;
    if (fstat(fs->root_fd, &st) == 0) {
        v->uid = st.st_uid;
        v->gid = st.st_gid;
    }
    clock_gettime(CLOCK_REALTIME, &v->mounted);
    /* the kernel may keep view entries as long as a change behind the
     * mount may take to show anyway (views_timeout); catalog changes are
     * invalidated explicitly, negative entries are never kept */
    v->rescan_us = MAX((gint64)(fs->opt.live.rescan_s * 1e6), 1);
    /* with SELinux the kernel answers labels itself, and where a policy
     * labels FUSE by extended attribute it takes only ENODATA as "none" */
    v->no_labels = !g_file_test("/sys/fs/selinux/enforce", G_FILE_TEST_EXISTS);
    g_mutex_init(&v->lock);
    g_cond_init(&v->loaded_cond);
    /* before any thread or setting may take them (catalog_watch.c's) */
    g_mutex_init(&v->inval_lock);
    g_cond_init(&v->inval_cond);
    g_queue_init(&v->lagged);
    v->jobviews =
        g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)jobview_unref);
    v->compared = g_hash_table_new(g_direct_hash, g_direct_equal);
    v->comparing = g_hash_table_new(g_str_hash, g_str_equal); /* asked by any job id */
    g_cond_init(&v->compared_cond);
    v->wake_fd = -1;

    /* what the catalog resolves with: the mount's own options */
    v->ext_prefixes = g_ptr_array_new_with_free_func(g_free);
    if (fs->opt.external_root) {
        char *p = ck_path_normalize_abs(fs->opt.external_root);
        int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            g_warning("ckptfs: external_root=%s: %s (nothing under it is browsable)", p,
                      g_strerror(errno));
        else
            close(fd);
        g_ptr_array_add(v->ext_prefixes, p);
    }
    v->copts.resolve.legacy_backend = fs->opt.legacy_backend;
    v->copts.resolve.legacy_backends = fs->opt.job_legacy_backends;
    v->copts.resolve.external_roots = v->ext_prefixes->len ? v->ext_prefixes : NULL;
    v->copts.views_name = fs->opt.views_name;

    v->early_names = scan_job_names(fs);
    return v;
}

void viewstate_end_load(Views *v)
{
    g_mutex_lock(&v->lock);
    v->load_done = true;
    g_cond_broadcast(&v->loaded_cond);
    g_mutex_unlock(&v->lock);
}

void viewstate_free(Views *v)
{
    if (!v)
        return;
    if (v->cat)
        ck_catalog_free(v->cat);
    g_hash_table_unref(v->jobviews);
    g_hash_table_unref(v->compared);
    g_hash_table_unref(v->comparing);
    if (v->early_names)
        g_ptr_array_unref(v->early_names);
    if (v->root_names)
        g_ptr_array_unref(v->root_names);
    if (v->root_inos)
        g_array_unref(v->root_inos);
    if (v->pending)
        g_hash_table_unref(v->pending);
    g_ptr_array_unref(v->ext_prefixes);
    g_mutex_clear(&v->lock);
    g_cond_clear(&v->loaded_cond);
    g_cond_clear(&v->compared_cond);
    g_mutex_clear(&v->inval_lock);
    g_cond_clear(&v->inval_cond);
    g_free(v);
}
