/* Keeping the views' catalog current (SPEC §5 "Live", DESIGN-NOTES "Views
 * and the catalog").  Two threads:
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
 * Writes through the mount refresh synchronously in views.c and only queue
 * here. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "classify.h"
#include "viewsint.h"

static char stop_item;
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
    GHashTable *wds;     /* wd -> WatchInfo* */
    GHashTable *jobdirs; /* job -> wd of _jobs/<J> */
    bool full;           /* the next pass rescans everything */
    GHashTable *todo;    /* interned jobs to refresh */
    bool warned;
} Watch;

static void publish_gauges(struct ckptfs *fs, CkCatalog *c)
{
    atomic_store(&fs->metrics.catalog_jobs, ck_catalog_n_jobs(c));
    atomic_store(&fs->metrics.catalog_markers, ck_catalog_n_markers(c));
}

double catalog_watch_rescan(struct ckptfs *fs)
{
    return (double)__atomic_load_n(&views_of(fs)->rescan_us, __ATOMIC_RELAXED) / 1e6;
}

void catalog_watch_set_rescan(struct ckptfs *fs, double seconds)
{
    Views *v = views_of(fs);
    __atomic_store_n(&v->rescan_us, (gint64)(seconds * 1e6), __ATOMIC_RELAXED);
    uint64_t one = 1;
    if (v->wake_fd >= 0 && write(v->wake_fd, &one, sizeof one) < 0)
        g_debug("ckptfs: views: wake: %s", g_strerror(errno));
}

void catalog_watch_changed(struct ckptfs *fs, const char *job)
{
    Views *v = views_of(fs);
    if (v->inval && !g_atomic_int_get(&v->stopping))
        g_async_queue_push(v->inval, (gpointer)job);
}

/* ---- inotify ---- */

static int add_watch(Watch *w, const char *rel, uint32_t mask, WatchKind kind, const char *job)
{
    if (w->ifd < 0)
        return -1;
    g_autofree char *abs = g_build_filename(w->fs->backing, rel, NULL);
    int wd = inotify_add_watch(w->ifd, abs, mask | IN_DONT_FOLLOW | IN_ONLYDIR);
    if (wd < 0) {
        if ((errno == ENOSPC || errno == ENOMEM) && !w->warned) {
            g_warning("ckptfs: inotify watch limit reached at %s: changes behind the mount "
                      "show within rescan= seconds only",
                      rel);
            w->warned = true;
        }
        return -1;
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
    g_autofree char *rel = g_strconcat("_jobs/", job, NULL);
    int wd = add_watch(w, rel, DIR_EVENTS | IN_DELETE_SELF, W_JOBDIR, job);
    if (wd >= 0)
        g_hash_table_insert(w->jobdirs, (gpointer)job, GINT_TO_POINTER(wd));
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
    add_watch(w, "_jobs", DIR_EVENTS, W_JOBS, NULL);
    add_watch(w, "_state", DIR_EVENTS, W_STATE, NULL);
    watch_all_jobs(w, c);
}

static void handle_event(Watch *w, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
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
        if (strcmp(name, "_jobs") == 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
            add_watch(w, "_jobs", DIR_EVENTS, W_JOBS, NULL);
        if (strcmp(name, "_state") == 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
            add_watch(w, "_state", DIR_EVENTS, W_STATE, NULL);
        if (strcmp(name, w->fs->opt.views_name) != 0)
            w->full = true;
        break;
    case W_JOBS:
    case W_STATE:
        if (ck_is_job_id(name, strlen(name))) {
            const char *job = g_intern_string(name);
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
            g_str_has_prefix(name, "chk-")) {
            /* a checkpoint in progress: its COMPLETED comes later */
            g_autofree char *rel = g_strconcat("_jobs/", wi->job, "/", name, NULL);
            add_watch(w, rel, DIR_EVENTS | IN_CLOSE_WRITE, W_CHKDIR, wi->job);
        }
        break;
    case W_CHKDIR:
        if (strcmp(name, "COMPLETED") == 0) {
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
        catalog_watch_changed(fs, changed->pdata[i]);
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
    return l;
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
            v->cat = c;
            v->load_done = true;
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
    publish_gauges(fs, c);
    catalog_watch_changed(fs, &root_item);

    Watch w = {fs,
               -1,
               g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free),
               g_hash_table_new(g_direct_hash, g_direct_equal),
               false,
               g_hash_table_new(g_direct_hash, g_direct_equal),
               false};
    watch_init(&w, c);
    gint64 period = MAX(__atomic_load_n(&v->rescan_us, __ATOMIC_RELAXED), 10000);
    gint64 next = g_get_monotonic_time() + period;
    while (!g_atomic_int_get(&v->stopping)) {
        gint64 now = g_get_monotonic_time();
        int timeout = now >= next ? 0 : (int)MIN((next - now + 999) / 1000, 60000);
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
                next = next - period + p;
                period = p;
            }
        }
        if (r > 0 && w.ifd >= 0 && (pfd[1].revents & POLLIN)) {
            /* let a burst (mkdir chk-N, write, rename) settle into one pass */
            g_usleep(5000);
            drain_events(&w);
        }
        g_autoptr(GPtrArray) changed = g_ptr_array_new();
        if (g_get_monotonic_time() >= next || w.full) {
            ck_catalog_rescan(c, changed);
            atomic_fetch_add(&fs->metrics.rescans, 1);
            next = g_get_monotonic_time() + period;
            w.full = false;
            g_hash_table_remove_all(w.todo);
            if (changed->len)
                watch_all_jobs(&w, c);
        } else if (g_hash_table_size(w.todo)) {
            GHashTableIter it;
            gpointer job;
            g_hash_table_iter_init(&it, w.todo);
            while (g_hash_table_iter_next(&it, &job, NULL))
                if (ck_catalog_refresh_job(c, job))
                    g_ptr_array_add(changed, job);
            g_hash_table_remove_all(w.todo);
        }
        if (changed->len) {
            forget_gone(fs, c, changed);
            publish_gauges(fs, c);
            notify_changed(fs, changed);
        }
    }
    if (w.ifd >= 0)
        close(w.ifd);
    g_hash_table_unref(w.wds);
    g_hash_table_unref(w.jobdirs);
    g_hash_table_unref(w.todo);
    return NULL;
}

/* ---- the notifier ---- */

/* The kernel inode number of the virtual node at vkey, 0 when the kernel
 * holds none (nothing cached to drop). */
static fuse_ino_t ino_of(struct ckptfs *fs, const char *vkey)
{
    g_mutex_lock(&fs->nodes.lock);
    Node *n = g_hash_table_lookup(fs->nodes.virtuals, vkey);
    fuse_ino_t ino = n ? node_ino(&fs->nodes, n) : 0;
    g_mutex_unlock(&fs->nodes.lock);
    return ino;
}

static void inval_entry(struct fuse_session *se, fuse_ino_t parent, const char *name)
{
    if (parent)
        fuse_lowlevel_notify_inval_entry(se, parent, name, strlen(name));
}

static void invalidate_job(struct ckptfs *fs, struct fuse_session *se, const char *job)
{
    fuse_ino_t root = ino_of(fs, "");
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
    fuse_ino_t jn = ino_of(fs, job);
    if (!jn)
        return;
    inval_entry(se, jn, "latest");
    inval_entry(se, jn, "restore");
    g_autofree char *ck = g_strconcat(job, "/checkpoints", NULL);
    fuse_ino_t cn = ino_of(fs, ck);
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

static gpointer notifier_main(gpointer p)
{
    struct ckptfs *fs = p;
    Views *v = views_of(fs);
    for (;;) {
        gpointer item = g_async_queue_pop(v->inval);
        if (item == &stop_item)
            break;
        /* collapse what queued up meanwhile */
        g_autoptr(GHashTable) batch = g_hash_table_new(g_direct_hash, g_direct_equal);
        g_hash_table_add(batch, item);
        bool stop = false;
        gpointer more;
        while ((more = g_async_queue_try_pop(v->inval)) != NULL) {
            if (more == &stop_item)
                stop = true;
            else
                g_hash_table_add(batch, more);
        }
        struct fuse_session *se = __atomic_load_n(&fs->se, __ATOMIC_ACQUIRE);
        if (se) {
            GHashTableIter it;
            gpointer job;
            g_hash_table_iter_init(&it, batch);
            while (g_hash_table_iter_next(&it, &job, NULL))
                invalidate_job(fs, se, job);
        }
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
        loadctl_unref(ctl);
        v->loadctl = NULL;
    }
    if (v->watcher)
        g_thread_join(v->watcher);
    v->watcher = NULL;
    if (v->notifier) {
        g_async_queue_push(v->inval, &stop_item);
        g_thread_join(v->notifier);
        v->notifier = NULL;
    }
    if (v->inval) {
        while (g_async_queue_try_pop(v->inval))
            ;
        g_async_queue_unref(v->inval);
        v->inval = NULL;
    }
    if (v->wake_fd >= 0)
        close(v->wake_fd);
    v->wake_fd = -1;
    /* a request still waiting for the catalog must not wait forever */
    g_mutex_lock(&v->lock);
    v->load_done = true;
    g_cond_broadcast(&v->loaded_cond);
    g_mutex_unlock(&v->lock);
}
