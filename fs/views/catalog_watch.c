/* Keeping the views' catalog current (docs/DESIGN.md, "The views and the
 * catalog"; ckptfs(8) KEEPING THE VIEWS CURRENT).  Two threads:
 *
 * - the watcher builds the catalog (ck_catalog_open, in the background so
 *   the first `ls` of the views dir needs only the job names), then waits on
 *   inotify (the top level, _jobs, _state, each _jobs/<J>, and each
 *   chk-<N> created while mounted) and re-reads the jobs an event names;
 *   every `rescan` seconds it runs ck_catalog_rescan for what inotify
 *   cannot see (network file systems, an exhausted watch limit).
 * - the notifier is the one thread that calls fuse_lowlevel_notify_inval_*:
 *   it takes job ids from a GAsyncQueue and drops the kernel's entries of
 *   that job's views (the job's entry when it is gone, latest,
 *   checkpoints), never inside a request and holding no lock.
 *
 * Writes through the mount refresh their job synchronously, in the request
 * (catalog_watch_refresh), and only queue the invalidations. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "classify.h"
#include "follow.h"
#include "intern.h"
#include "layout.h"
#include "views-private.h"

/* How long a read of .metrics waits for a catalog still loading. */
#define LOAD_GAUGE_WAIT_US (500 * G_TIME_SPAN_MILLISECOND)

/* What core calls `name` in a directory of job's namespace at `place`
 * (a checkpoint directory, a marker): one answer, core's. */
static CkPlace place_of(struct ckptfs *fs, const char *job, CkPlace place, const char *name)
{
    return ck_ns_child((CkNs){.kind = CK_NS_JOB, .job = job, .place = place}, name,
                       fs->opt.views_name)
        .place;
}

static char stop_item;
static char lag_item;  /* wakes the notifier: a lagged directory was queued */
static char root_item; /* the views dir's listing changed as a whole */

typedef enum {
    W_TOP,
    W_JOBS,
    W_STATE,
    W_JOBDIR, /* _jobs/<J> */
    W_CHKDIR, /* _jobs/<J>/chk-<N> */
} WatchKind;

typedef struct {
    WatchKind kind;
    const char *job; /* interned, W_JOBDIR / W_CHKDIR */
} WatchInfo;

typedef struct {
    struct ckptfs *fs;
    int ifd;
    GHashTable *wds;       /* wd -> WatchInfo* */
    GHashTable *jobdirs;   /* job -> wd of _jobs/<J> */
    bool full;             /* the next pass rescans everything */
    GHashTable *todo;      /* interned jobs to refresh */
    bool warned;           /* a watch could not be added: inotify misses something */
    GHashTable *unwatched; /* jobs whose _jobs/<J> has no watch (NULL: none) */
} Watch;

static void publish_gauges(struct ckptfs *fs, CkCatalog *c)
{
    atomic_store(&fs->metrics->catalog_jobs, ck_catalog_n_jobs(c));
    atomic_store(&fs->metrics->catalog_markers, ck_catalog_n_markers(c));
    atomic_store(&fs->metrics->catalog_markers_loaded, ck_catalog_n_markers(c));
}

double catalog_watch_rescan(struct ckptfs *fs)
{
    return views_timeout(views_of(fs));
}

/* Waits (at most INVAL_WAIT_US) until the notifier sent item `ticket`.
 * Bounded: the notifier may wait for the kernel, and the kernel for a
 * request this thread's caller is part of. */
#define INVAL_WAIT_US (200 * 1000)
static void wait_inval(struct ckptfs *fs, guint64 ticket)
{
    Views *v = views_of(fs);
    gint64 end = g_get_monotonic_time() + INVAL_WAIT_US;
    g_mutex_lock(&v->inval_lock);
    while (ticket && v->inval_sent < ticket && !g_atomic_int_get(&v->stopping))
        if (!g_cond_wait_until(&v->inval_cond, &v->inval_lock, end))
            break;
    g_mutex_unlock(&v->inval_lock);
}

void catalog_watch_refresh(struct ckptfs *fs, const char *job, bool wait)
{
    Views *v = views_of(fs);
    g_mutex_lock(&v->lock);
    if (!v->load_done) {
        /* the loader re-reads it before publishing: no write waits for a load */
        if (!v->pending)
            v->pending = g_hash_table_new(g_direct_hash, g_direct_equal);
        g_hash_table_add(v->pending, (gpointer)job);
        g_mutex_unlock(&v->lock);
        return;
    }
    CkCatalog *c = v->cat;
    g_mutex_unlock(&v->lock);
    if (!c)
        return;
    ck_catalog_refresh_job(c, job);
    /* the invalidations even when the catalog saw no change: another path
     * (inotify) may have refreshed it first, before the kernel dropped its
     * entries */
    guint64 ticket = views_job_refreshed(fs, c, job);
    /* the kernel keeps listings of views directories without asking (no
     * OPENDIR): a marker's close(2) returns once they are dropped */
    if (wait)
        wait_inval(fs, ticket);
}

/* ---- inotify ---- */

static int add_watch(Watch *w, const char *rel, uint32_t mask, WatchKind kind, const char *job)
{
    if (w->ifd < 0)
        return -EBADF;
    g_autofree char *abs = g_build_filename(w->fs->backing, rel, NULL);
    int wd = inotify_add_watch(w->ifd, abs, mask | IN_DONT_FOLLOW | IN_ONLYDIR);
    if (wd < 0) {
        int e = errno;
        if ((e == ENOSPC || e == ENOMEM) && !w->warned) {
            g_warning("ckptfs: inotify watch limit reached at %s: changes behind the mount "
                      "show within rescan= seconds only",
                      rel);
            w->warned = true;
        }
        return -e;
    }
    WatchInfo *wi = g_new0(WatchInfo, 1);
    wi->kind = kind;
    wi->job = job;
    g_hash_table_replace(w->wds, GINT_TO_POINTER(wd), wi);
    return wd;
}

#define DIR_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)

static void watch_job(Watch *w, const char *job)
{
    if (g_hash_table_contains(w->jobdirs, job))
        return;
    g_autofree char *rel = ck_job_markers_dir(job);
    int wd = add_watch(w, rel, DIR_EVENTS | IN_DELETE_SELF, W_JOBDIR, job);
    if (wd >= 0) {
        g_hash_table_insert(w->jobdirs, (gpointer)job, GINT_TO_POINTER(wd));
        if (w->unwatched)
            g_hash_table_remove(w->unwatched, job);
    } else if (w->ifd >= 0 && wd != -ENOENT && wd != -ENOTDIR) {
        /* checked every rescan period instead */
        if (!w->unwatched)
            w->unwatched = g_hash_table_new(g_direct_hash, g_direct_equal);
        g_hash_table_add(w->unwatched, (gpointer)job);
    }
}

static void watch_all_jobs(Watch *w, CkCatalog *c)
{
    g_autoptr(GPtrArray) names = ck_catalog_job_names(c);
    for (guint i = 0; i < names->len; i++)
        watch_job(w, names->pdata[i]);
}

static void watch_init(Watch *w, CkCatalog *c)
{
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ifd < 0) {
        g_message("ckptfs: no inotify (%s): changes behind the mount show within rescan= "
                  "seconds",
                  g_strerror(errno));
        return;
    }
    add_watch(w, ".", DIR_EVENTS, W_TOP, NULL);
    add_watch(w, CK_JOBS_DIR, DIR_EVENTS, W_JOBS, NULL);
    add_watch(w, CK_STATE_DIR, DIR_EVENTS, W_STATE, NULL);
    watch_all_jobs(w, c);
}

static void handle_event(Watch *w, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        atomic_fetch_add(&w->fs->metrics->inotify_overflows, 1);
        w->full = true;
        return;
    }
    WatchInfo *wi = g_hash_table_lookup(w->wds, GINT_TO_POINTER(ev->wd));
    if (!wi)
        return;
    if (ev->mask & IN_IGNORED) {
        if (wi->kind == W_JOBDIR &&
            GPOINTER_TO_INT(g_hash_table_lookup(w->jobdirs, wi->job)) == ev->wd)
            g_hash_table_remove(w->jobdirs, wi->job);
        if (wi->kind == W_JOBDIR || wi->kind == W_CHKDIR)
            g_hash_table_add(w->todo, (gpointer)wi->job);
        else
            w->full = true;
        g_hash_table_remove(w->wds, GINT_TO_POINTER(ev->wd));
        return;
    }
    const char *name = ev->len ? ev->name : "";
    switch (wi->kind) {
    case W_TOP:
        /* _jobs/_state appearing, or legacy v<G>/<S> changing what legacy markers read */
        if (strcmp(name, CK_JOBS_DIR) == 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
            add_watch(w, CK_JOBS_DIR, DIR_EVENTS, W_JOBS, NULL);
        if (strcmp(name, CK_STATE_DIR) == 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
            add_watch(w, CK_STATE_DIR, DIR_EVENTS, W_STATE, NULL);
        if (strcmp(name, w->fs->opt.views_name) != 0)
            w->full = true;
        break;
    case W_JOBS:
    case W_STATE:
        if (ck_is_job_id(name, strlen(name))) {
            const char *job = ck_intern(name);
            g_hash_table_add(w->todo, (gpointer)job);
            if (wi->kind == W_JOBS && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                watch_job(w, job);
        }
        break;
    case W_JOBDIR:
        if (ev->mask & IN_DELETE_SELF)
            break;
        g_hash_table_add(w->todo, (gpointer)wi->job);
        if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR) &&
            place_of(w->fs, wi->job, CK_PLACE_JOB_DIR, name) == CK_PLACE_CHK_DIR) {
            /* a checkpoint in progress: its COMPLETED comes later */
            g_autofree char *jobdir = ck_job_markers_dir(wi->job);
            g_autofree char *rel = g_build_filename(jobdir, name, NULL);
            add_watch(w, rel, DIR_EVENTS | IN_CLOSE_WRITE, W_CHKDIR, wi->job);
        }
        break;
    case W_CHKDIR:
        if (place_of(w->fs, wi->job, CK_PLACE_CHK_DIR, name) == CK_PLACE_MARKER) {
            g_hash_table_add(w->todo, (gpointer)wi->job);
            /* complete: later changes are rare, and a watch per checkpoint
             * ever made would exhaust max_user_watches (rescans see them) */
            if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
                inotify_rm_watch(w->ifd, ev->wd);
        }
        break;
    }
}

static void drain_events(Watch *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t len = read(w->ifd, buf, sizeof buf);
        if (len <= 0)
            return;
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            handle_event(w, ev);
            p += sizeof *ev + ev->len;
        }
    }
}

/* ---- the watcher ---- */

static void notify_changed(struct ckptfs *fs, GPtrArray *changed)
{
    for (guint i = 0; i < changed->len; i++)
        views_queue_inval(fs, changed->pdata[i]);
}

static void forget_gone(struct ckptfs *fs, CkCatalog *c, GPtrArray *changed)
{
    for (guint i = 0; i < changed->len; i++) {
        g_autoptr(CkJobInfo) j = ck_catalog_get_job(c, changed->pdata[i]);
        if (!j)
            jobviews_forget(fs, changed->pdata[i]);
    }
}

/* What the load needs, owned by the watcher thread, so that an unmount
 * during a long (cold) load does not wait for it: the thread is then
 * abandoned (it touches nothing of fs once `abandoned` is set) and dies
 * with the process. */
typedef struct {
    gatomicrefcount rc;
    GMutex lock;
    bool abandoned; /* lock */
    struct ckptfs *fs;
    char *dir;
    CkCatalogOptions opts;
    char *legacy_backend;
    CkCatalogProgress progress; /* the load's, read by catalog_watch_load_gauges */
} LoadCtl;

static void loadctl_unref(LoadCtl *l)
{
    if (!g_atomic_ref_count_dec(&l->rc))
        return;
    g_mutex_clear(&l->lock);
    g_free(l->dir);
    g_free(l->legacy_backend);
    if (l->opts.resolve.legacy_backends)
        g_hash_table_unref(l->opts.resolve.legacy_backends);
    if (l->opts.resolve.external_roots)
        g_ptr_array_unref(l->opts.resolve.external_roots);
    g_free(l);
}

static LoadCtl *loadctl_new(struct ckptfs *fs)
{
    Views *v = views_of(fs);
    LoadCtl *l = g_new0(LoadCtl, 1);
    g_atomic_ref_count_init(&l->rc);
    g_atomic_ref_count_inc(&l->rc); /* the thread's and the views' */
    g_mutex_init(&l->lock);
    l->fs = fs;
    l->dir = g_strdup(fs->backing);
    l->opts = v->copts;
    l->legacy_backend = g_strdup(v->copts.resolve.legacy_backend);
    l->opts.resolve.legacy_backend = l->legacy_backend;
    if (l->opts.resolve.legacy_backends)
        g_hash_table_ref(l->opts.resolve.legacy_backends);
    if (l->opts.resolve.external_roots) {
        GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
        for (guint i = 0; i < l->opts.resolve.external_roots->len; i++)
            g_ptr_array_add(a, g_strdup(l->opts.resolve.external_roots->pdata[i]));
        l->opts.resolve.external_roots = a;
    }
    l->opts.views_name = v->copts.views_name; /* interned */
    l->opts.progress = &l->progress;
    return l;
}

/* The periodic side, for what inotify cannot see.  Every `rescan` seconds:
 * the top level, _jobs and _state (three fstatat), and the jobs inotify may
 * miss (a chk-<N> without COMPLETED yet, no watch).  Beside it, a sweep over
 * every job, a slice per tick so the work is spread over its period: one
 * cheap check per job (ck_catalog_job_check: two fstatat), and every
 * SWEEP_DEEP-th sweep the full comparison of every marker's stamp.  The
 * sweep's period is `rescan` where inotify cannot be trusted (a network or
 * cluster file system, no inotify, a watch limit reached), else
 * SWEEP_LOCAL_S, or longer where a sweep takes more than SWEEP_LOCAL_SHARE
 * of a core over that (it only backs inotify up: at 100,000 jobs a sweep is
 * 200,000 fstatat, 1.9 s here, where the dentry hash is small). */
#define JOBVIEWS_IDLE_S   10.0 /* a job's snapshot unused this long is dropped */
#define TICKS_PER_PERIOD  20
#define SWEEP_LOCAL_S     60.0
#define SWEEP_LOCAL_SHARE 0.002
#define SWEEP_DEEP_S      600.0 /* at most this long between two full comparisons */

typedef struct {
    GPtrArray *names; /* the jobs of this sweep */
    guint pos;
    guint64 n;       /* sweeps begun */
    gint64 period;   /* us */
    gint64 next;     /* next tick */
    gint64 work_us;  /* time spent on this sweep so far */
    gint64 last_us;  /* time the last whole sweep took */
    gint64 begun_us; /* when it started */
    gint64 deep_us;  /* when the last full comparison began */
    bool deep;       /* this sweep compares every marker */
} Sweep;

static void record_duration(atomic_uint_fast64_t *gauge, gint64 us)
{
    atomic_store(gauge, (guint64)us);
}

/* One tick of the sweep: the next slice of jobs; changed gets what changed. */
static void sweep_tick(struct ckptfs *fs, CkCatalog *c, Sweep *sw, GPtrArray *changed)
{
    gint64 t0 = g_get_monotonic_time();
    if (!sw->names || sw->pos >= sw->names->len) {
        if (sw->names)
            g_ptr_array_unref(sw->names);
        sw->names = ck_catalog_job_names(c);
        sw->pos = 0;
        sw->n++;
        sw->work_us = 0;
        sw->begun_us = t0;
        sw->deep = t0 - sw->deep_us >= (gint64)(SWEEP_DEEP_S * 1e6);
        if (sw->deep)
            sw->deep_us = t0;
    }
    guint per = (sw->names->len + TICKS_PER_PERIOD - 1) / TICKS_PER_PERIOD;
    guint end = MIN(sw->names->len, sw->pos + MAX(per, 1));
    bool deep = sw->deep;
    g_autoptr(GPtrArray) batch = g_ptr_array_new();
    for (; sw->pos < end; sw->pos++) {
        const char *job = sw->names->pdata[sw->pos];
        if (deep || ck_catalog_job_check(c, job))
            g_ptr_array_add(batch, (gpointer)job);
    }
    if (batch->len)
        ck_catalog_refresh_jobs(c, batch, changed);
    sw->work_us += g_get_monotonic_time() - t0;
    if (sw->pos >= sw->names->len) {
        record_duration(&fs->metrics->sweep_duration_us, sw->work_us);
        sw->last_us = sw->work_us;
    }
}

/* Every rescan period: the top level, and the jobs inotify may miss.  (A
 * COMPLETED rewritten in place changes no directory: the views compare a
 * job's markers when they are looked at, jobview_get.) */
static void rescan_tick(Watch *w, CkCatalog *c, GPtrArray *changed)
{
    ck_catalog_check_top(c, changed);
    g_autoptr(GPtrArray) risky = ck_catalog_pending_jobs(c);
    g_autoptr(GPtrArray) batch = g_ptr_array_new();
    for (guint i = 0; i < risky->len; i++)
        if (ck_catalog_job_check(c, risky->pdata[i]))
            g_ptr_array_add(batch, risky->pdata[i]);
    if (w->unwatched) {
        GHashTableIter it;
        gpointer job;
        g_hash_table_iter_init(&it, w->unwatched);
        while (g_hash_table_iter_next(&it, &job, NULL))
            if (ck_catalog_job_check(c, job))
                g_ptr_array_add(batch, job);
    }
    if (batch->len)
        ck_catalog_refresh_jobs(c, batch, changed);
}

void catalog_watch_load_gauges(struct ckptfs *fs, bool wait)
{
    Views *v = views_of(fs);
    g_mutex_lock(&v->lock);
    /* a small directory loads in moments: wait for it (a little), so the
     * gauges read true right after the mount; a big one shows its progress */
    gint64 until = g_get_monotonic_time() + LOAD_GAUGE_WAIT_US;
    while (wait && !v->load_done && g_cond_wait_until(&v->loaded_cond, &v->lock, until))
        ;
    if (!v->load_done && v->loadctl) {
        /* still loading: what it has listed and read so far */
        LoadCtl *l = v->loadctl;
        atomic_store(&fs->metrics->catalog_markers,
                     (guint64)g_atomic_int_get(&l->progress.markers_known));
        atomic_store(&fs->metrics->catalog_markers_loaded,
                     (guint64)g_atomic_int_get(&l->progress.markers_loaded));
    }
    g_mutex_unlock(&v->lock);
}

static gpointer watcher_main(gpointer p)
{
    LoadCtl *ctl = p;
    g_autoptr(GError) err = NULL;
    CkCatalog *c = ck_catalog_open(ctl->dir, &ctl->opts, &err);
    g_mutex_lock(&ctl->lock);
    if (ctl->abandoned) {
        g_mutex_unlock(&ctl->lock);
        ck_catalog_free(c);
        loadctl_unref(ctl);
        return NULL;
    }
    struct ckptfs *fs = ctl->fs;
    Views *v = views_of(fs);
    if (!c)
        g_warning("ckptfs: views: cannot read the catalog of %s: %s (no job views)", fs->backing,
                  err ? err->message : "?");
    for (;;) {
        /* markers written through the mount during the load: re-read them
         * before anyone sees the catalog */
        g_mutex_lock(&v->lock);
        GHashTable *todo = g_steal_pointer(&v->pending);
        if (!todo || !c) {
            if (c)
                publish_gauges(fs, c); /* before anyone waiting for the load reads them */
            v->cat = c;
            v->load_done = true;
            atomic_store(&fs->state.hdr->status.catalog_done, 1);
            g_cond_broadcast(&v->loaded_cond);
            g_mutex_unlock(&v->lock);
            if (todo)
                g_hash_table_unref(todo);
            break;
        }
        g_mutex_unlock(&v->lock);
        GHashTableIter it;
        gpointer job;
        g_hash_table_iter_init(&it, todo);
        while (g_hash_table_iter_next(&it, &job, NULL))
            ck_catalog_refresh_job(c, job);
        g_hash_table_unref(todo);
    }
    g_mutex_unlock(&ctl->lock);
    loadctl_unref(ctl);
    if (!c)
        return NULL;
    views_queue_inval(fs, &root_item);

    Watch w = {fs,
               -1,
               g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free),
               g_hash_table_new(g_direct_hash, g_direct_equal),
               false,
               g_hash_table_new(g_direct_hash, g_direct_equal),
               false,
               NULL};
    /* where another host may change the directory, inotify (which sees
     * this kernel's changes only) cannot be trusted alone */
    bool trusted = !ck_fs_is_shared(fs->root_fd) && !g_getenv("CKPTFS_NO_INOTIFY");
    if (trusted) {
        watch_init(&w, c);
        /* what changed between the load's look at a job and its watch: one
         * cheap check of every job, now that the watches are in place */
        g_autoptr(GPtrArray) changed = g_ptr_array_new();
        g_autoptr(GPtrArray) names = ck_catalog_job_names(c);
        g_autoptr(GPtrArray) batch = g_ptr_array_new();
        ck_catalog_check_top(c, changed);
        for (guint i = 0; i < names->len; i++)
            if (ck_catalog_job_check(c, names->pdata[i]))
                g_ptr_array_add(batch, names->pdata[i]);
        if (batch->len)
            ck_catalog_refresh_jobs(c, batch, changed);
        if (changed->len) {
            watch_all_jobs(&w, c);
            forget_gone(fs, c, changed);
            publish_gauges(fs, c);
            notify_changed(fs, changed);
        }
    }
    gint64 period = MAX(__atomic_load_n(&v->rescan_us, __ATOMIC_RELAXED), 10000);
    Sweep sw = {0};
    gint64 now0 = g_get_monotonic_time();
    sw.deep_us = now0; /* the load just compared everything */
    gint64 next_rescan = now0 + period;
    gint64 next_expire = now0 + (gint64)(JOBVIEWS_IDLE_S * 1e6 / 4);
    while (!g_atomic_int_get(&v->stopping)) {
        /* inotify is trusted while every job directory has a watch */
        bool inotify_ok = w.ifd >= 0 && !w.warned;
        gint64 local = MAX((gint64)(SWEEP_LOCAL_S * 1e6), (gint64)(sw.last_us / SWEEP_LOCAL_SHARE));
        sw.period = inotify_ok ? MAX(period, local) : period;
        if (!sw.next)
            sw.next = now0 + sw.period / TICKS_PER_PERIOD;
        gint64 now = g_get_monotonic_time();
        gint64 due = MIN(MIN(next_rescan, sw.next), next_expire);
        int timeout = now >= due ? 0 : (int)MIN((due - now + 999) / 1000, 60000);
        struct pollfd pfd[2] = {{v->wake_fd, POLLIN, 0}, {w.ifd, POLLIN, 0}};
        int r = poll(pfd, w.ifd >= 0 ? 2 : 1, timeout);
        if (g_atomic_int_get(&v->stopping))
            break;
        if (r > 0 && (pfd[0].revents & POLLIN)) {
            /* rescan= changed through .control: the next pass on the new period */
            uint64_t n;
            if (read(v->wake_fd, &n, sizeof n) < 0 && errno != EAGAIN)
                g_debug("ckptfs: views: wake: %s", g_strerror(errno));
            gint64 p = MAX(__atomic_load_n(&v->rescan_us, __ATOMIC_RELAXED), 10000);
            if (p != period) {
                next_rescan = next_rescan - period + p;
                period = p;
            }
        }
        if (r > 0 && w.ifd >= 0 && (pfd[1].revents & POLLIN)) {
            /* let a burst (mkdir chk-N, write, rename) settle into one pass */
            g_usleep(5000);
            drain_events(&w);
        }
        g_autoptr(GPtrArray) changed = g_ptr_array_new();
        if (w.full) {
            /* an overflowed queue (or a watched top directory gone): look at everything */
            gint64 t0 = g_get_monotonic_time();
            ck_catalog_rescan(c, changed);
            record_duration(&fs->metrics->rescan_duration_us, g_get_monotonic_time() - t0);
            atomic_fetch_add(&fs->metrics->rescans, 1);
            atomic_store(&fs->state.hdr->status.last_rescan_us, g_get_real_time());
            w.full = false;
            g_hash_table_remove_all(w.todo);
            if (changed->len)
                watch_all_jobs(&w, c);
        } else if (g_hash_table_size(w.todo)) {
            g_autoptr(GPtrArray) jobs = g_ptr_array_new();
            GHashTableIter it;
            gpointer job;
            g_hash_table_iter_init(&it, w.todo);
            while (g_hash_table_iter_next(&it, &job, NULL))
                g_ptr_array_add(jobs, job);
            g_hash_table_remove_all(w.todo);
            ck_catalog_refresh_jobs(c, jobs, changed);
        }
        now = g_get_monotonic_time();
        if (now >= next_rescan) {
            guint before = changed->len;
            gint64 t0 = g_get_monotonic_time();
            rescan_tick(&w, c, changed);
            record_duration(&fs->metrics->rescan_duration_us, g_get_monotonic_time() - t0);
            atomic_fetch_add(&fs->metrics->rescans, 1);
            atomic_store(&fs->state.hdr->status.last_rescan_us, g_get_real_time());
            if (changed->len > before && w.ifd >= 0)
                for (guint i = before; i < changed->len; i++)
                    watch_job(&w, changed->pdata[i]);
            next_rescan = MAX(next_rescan + period, now + period / 2);
        }
        if (now >= next_expire) {
            jobviews_expire(fs, (gint64)(JOBVIEWS_IDLE_S * 1e6));
            next_expire = now + (gint64)(JOBVIEWS_IDLE_S * 1e6 / 4);
        }
        if (now >= sw.next) {
            sweep_tick(fs, c, &sw, changed);
            sw.next = MAX(sw.next + sw.period / TICKS_PER_PERIOD, now + sw.period / 40);
        }
        if (changed->len) {
            forget_gone(fs, c, changed);
            publish_gauges(fs, c);
            notify_changed(fs, changed);
        }
    }
    if (sw.names)
        g_ptr_array_unref(sw.names);
    if (w.ifd >= 0)
        close(w.ifd);
    g_hash_table_unref(w.wds);
    g_hash_table_unref(w.jobdirs);
    g_hash_table_unref(w.todo);
    if (w.unwatched)
        g_hash_table_unref(w.unwatched);
    return NULL;
}

/* ---- the notifier ---- */

static void inval_entry(struct fuse_session *se, fuse_ino_t parent, const char *name)
{
    if (parent)
        fuse_lowlevel_notify_inval_entry(se, parent, name, strlen(name));
}

static void invalidate_job(struct ckptfs *fs, struct fuse_session *se, const char *job)
{
    fuse_ino_t root = node_virtual_ino(&fs->nodes, "");
    if (root)
        fuse_lowlevel_notify_inval_inode(se, root, 0, 0);
    if (job == &root_item)
        return;
    CkCatalog *c = views_of(fs)->cat;
    g_autoptr(CkJobInfo) j = c ? ck_catalog_get_job(c, job) : NULL;
    if (!j) {
        inval_entry(se, root, job);
        return;
    }
    fuse_ino_t jn = node_virtual_ino(&fs->nodes, job);
    if (!jn)
        return;
    fuse_lowlevel_notify_inval_inode(se, jn, 0, 0); /* its listing: "latest" comes and goes */
    inval_entry(se, jn, "latest");
    inval_entry(se, jn, "restore");
    g_autofree char *ck = g_strconcat(job, "/checkpoints", NULL);
    fuse_ino_t cn = node_virtual_ino(&fs->nodes, ck);
    if (cn) {
        fuse_lowlevel_notify_inval_inode(se, cn, 0, 0);
        for (guint i = 0; i < j->checkpoints->len; i++) {
            char name[32];
            g_snprintf(name, sizeof name, "%" G_GUINT64_FORMAT,
                       (guint64)((CkCheckpointInfo *)j->checkpoints->pdata[i])->n);
            inval_entry(se, cn, name);
        }
    }
}

typedef struct {
    gint64 due_us;
    fuse_ino_t ino;
} LaggedDir;

/* rescan= just changed: no queued listing is dropped later than one read
 * now would be.  A bound that only lowers keeps the queue in due order,
 * and every listing queued after it gets the new delay, which is not
 * earlier (the lock orders the new rescan= before their reads of it). */
static void lagged_clamp(Views *v)
{
    g_mutex_lock(&v->inval_lock);
    if (v->inval && !g_atomic_int_get(&v->stopping) && !g_queue_is_empty(&v->lagged)) {
        gint64 bound = g_get_monotonic_time() + VIEWS_TIMEOUT_PCT_US(v, LISTING_DROP_PCT);
        for (GList *it = v->lagged.head; it; it = it->next) {
            LaggedDir *l = it->data;
            l->due_us = MIN(l->due_us, bound);
        }
        g_async_queue_push(v->inval, &lag_item); /* the head may be due sooner */
    }
    g_mutex_unlock(&v->inval_lock);
}

void catalog_watch_set_rescan(struct ckptfs *fs, double seconds)
{
    Views *v = views_of(fs);
    __atomic_store_n(&v->rescan_us, MAX((gint64)(seconds * 1e6), 1), __ATOMIC_RELAXED);
    lagged_clamp(v);
    uint64_t one = 1;
    if (v->wake_fd >= 0 && write(v->wake_fd, &one, sizeof one) < 0)
        g_debug("ckptfs: views: wake: %s", g_strerror(errno));
}

void catalog_watch_lag_listing(struct ckptfs *fs, fuse_ino_t dir)
{
    Views *v = views_of(fs);
    /* under the lock: a request may come while the views stop */
    g_mutex_lock(&v->inval_lock);
    if (v->inval && v->lagged_set && !g_atomic_int_get(&v->stopping) &&
        g_hash_table_add(v->lagged_set, GSIZE_TO_POINTER(dir))) {
        bool first = g_queue_is_empty(&v->lagged);
        LaggedDir *l = g_new(LaggedDir, 1);
        /* the same delay for all, so the queue stays in due order (a
         * shorter rescan= brings those queued before forward: lagged_clamp) */
        l->due_us = g_get_monotonic_time() + VIEWS_TIMEOUT_PCT_US(v, LISTING_DROP_PCT);
        l->ino = dir;
        g_queue_push_tail(&v->lagged, l);
        if (first)
            g_async_queue_push(v->inval, &lag_item); /* its wait was unbounded */
    }
    g_mutex_unlock(&v->inval_lock);
}

/* At most this many listings dropped before the jobs' invalidations get
 * their turn (a writer waits for its own). */
#define LAGGED_BATCH 256

/* Drops the cached listings that are due, or nearly; returns how long until
 * the next one is, -1 for none, 0 when more are due. */
static gint64 send_lagged(Views *v, struct fuse_session *se)
{
    gint64 slack = VIEWS_TIMEOUT_PCT_US(v, LISTING_DROP_EARLY_PCT);
    for (int sent = 0; sent < LAGGED_BATCH; sent++) {
        g_mutex_lock(&v->inval_lock);
        LaggedDir *l = g_queue_peek_head(&v->lagged);
        gint64 wait = l ? l->due_us - g_get_monotonic_time() : -1;
        if (l && wait <= slack) {
            g_queue_pop_head(&v->lagged);
            g_hash_table_remove(v->lagged_set, GSIZE_TO_POINTER(l->ino));
        }
        g_mutex_unlock(&v->inval_lock);
        if (!l || wait > slack)
            return wait;
        /* ENOENT when the kernel forgot it meanwhile: nothing to drop */
        if (se)
            fuse_lowlevel_notify_inval_inode(se, l->ino, 0, 0);
        g_free(l);
    }
    return 0;
}

static gpointer notifier_main(gpointer p)
{
    struct ckptfs *fs = p;
    Views *v = views_of(fs);
    for (;;) {
        gint64 wait = send_lagged(v, __atomic_load_n(&fs->se, __ATOMIC_ACQUIRE));
        gpointer item =
            wait < 0 ? g_async_queue_pop(v->inval) : g_async_queue_timeout_pop(v->inval, wait);
        if (item == &stop_item)
            break;
        if (!item || item == &lag_item)
            continue;
        /* collapse what queued up meanwhile */
        g_autoptr(GHashTable) batch = g_hash_table_new(g_direct_hash, g_direct_equal);
        g_hash_table_add(batch, item);
        guint64 popped = 1;
        bool stop = false;
        gpointer more;
        while ((more = g_async_queue_try_pop(v->inval)) != NULL) {
            if (more == &lag_item)
                continue; /* send_lagged's turn comes next round */
            if (more == &stop_item)
                stop = true;
            else
                g_hash_table_add(batch, more);
            popped++;
        }
        struct fuse_session *se = __atomic_load_n(&fs->se, __ATOMIC_ACQUIRE);
        if (se) {
            GHashTableIter it;
            gpointer job;
            g_hash_table_iter_init(&it, batch);
            while (g_hash_table_iter_next(&it, &job, NULL))
                invalidate_job(fs, se, job);
        }
        g_mutex_lock(&v->inval_lock);
        v->inval_sent += popped;
        g_cond_broadcast(&v->inval_cond);
        g_mutex_unlock(&v->inval_lock);
        if (stop)
            break;
    }
    return NULL;
}

int catalog_watch_start(struct ckptfs *fs)
{
    Views *v = views_of(fs);
    v->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (v->wake_fd < 0)
        return -errno;
    v->lagged_set = g_hash_table_new(g_direct_hash, g_direct_equal);
    v->inval = g_async_queue_new();
    v->notifier = g_thread_new("ckptfs-notify", notifier_main, fs);
    v->loadctl = loadctl_new(fs);
    v->watcher = g_thread_new("ckptfs-watch", watcher_main, v->loadctl);
    return 0;
}

void catalog_watch_stop(struct ckptfs *fs)
{
    Views *v = views_of(fs);
    if (!v || g_atomic_int_get(&v->threads_stopped))
        return;
    g_atomic_int_set(&v->threads_stopped, 1);
    g_atomic_int_set(&v->stopping, 1);
    if (v->wake_fd >= 0) {
        uint64_t one = 1;
        if (write(v->wake_fd, &one, sizeof one) < 0)
            g_debug("ckptfs: views: wake: %s", g_strerror(errno));
    }
    if (v->loadctl) {
        LoadCtl *ctl = v->loadctl;
        g_mutex_lock(&ctl->lock);
        g_mutex_lock(&v->lock);
        bool loading = !v->load_done;
        g_mutex_unlock(&v->lock);
        if (loading)
            ctl->abandoned = true;
        g_mutex_unlock(&ctl->lock);
        if (loading) {
            /* a (cold) load still running: do not hold the unmount for it */
            g_thread_unref(v->watcher);
            v->watcher = NULL;
        }
        g_mutex_lock(&v->lock);
        v->loadctl = NULL;
        g_mutex_unlock(&v->lock);
        loadctl_unref(ctl);
    }
    if (v->watcher)
        g_thread_join(v->watcher);
    v->watcher = NULL;
    if (v->notifier) {
        g_async_queue_push(v->inval, &stop_item);
        g_thread_join(v->notifier);
        v->notifier = NULL;
    }
    /* taken under the lock, freed after it: requests may still come */
    g_mutex_lock(&v->inval_lock);
    GAsyncQueue *q = g_steal_pointer(&v->inval);
    GHashTable *set = g_steal_pointer(&v->lagged_set);
    GQueue lagged = v->lagged;
    g_queue_init(&v->lagged);
    g_mutex_unlock(&v->inval_lock);
    if (q) {
        while (g_async_queue_try_pop(q))
            ;
        g_async_queue_unref(q);
    }
    g_queue_clear_full(&lagged, g_free);
    if (set)
        g_hash_table_unref(set);
    if (v->wake_fd >= 0)
        close(v->wake_fd);
    v->wake_fd = -1;
    /* a request still waiting for the catalog must not wait forever */
    viewstate_end_load(v);
}
