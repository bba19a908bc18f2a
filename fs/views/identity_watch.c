/* identity_map=FILE kept in force (identity_watch.h). */
#include "identity_watch.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "views-private.h"

/* The file as stat(2) sees it now, following symlinks (a ConfigMap's). */
static void take_stamp(const char *path, IdentityWatch *w)
{
    struct stat st;
    memset(&w->stamp, 0, sizeof w->stamp);
    if (stat(path, &st) < 0)
        return;
    w->stamp.exists = true;
    w->stamp.dev = st.st_dev;
    w->stamp.ino = st.st_ino;
    w->stamp.size = st.st_size;
    w->stamp.mtime = st.st_mtim;
    w->stamp.ctime = st.st_ctim;
}

static bool same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Whether the file differs from the one last loaded (lock held). */
static bool changed(const char *path, IdentityWatch *w)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return w->stamp.exists;
    return !w->stamp.exists || st.st_dev != w->stamp.dev || st.st_ino != w->stamp.ino ||
           st.st_size != w->stamp.size || !same_time(st.st_mtim, w->stamp.mtime) ||
           !same_time(st.st_ctim, w->stamp.ctime);
}

static void set_gauges(struct ckptfs *fs, const CkIdentityMap *m)
{
    atomic_store(&fs->metrics->idmap_lines[0], ck_identity_map_cgroup_lines(m));
    atomic_store(&fs->metrics->idmap_lines[1], ck_identity_map_uid_lines(m));
}

/* Loads the file into the identity (lock held): true, or false after the
 * warning.  count: a reload, for ckptfs_identity_map_reloads_total. */
static bool load(struct ckptfs *fs, const char *why, bool count)
{
    IdentityWatch *w = &fs->idwatch;
    const char *path = fs->opt.identity_map;
    take_stamp(path, w); /* before the read: a change after it is seen next time */
    g_autofree char *bad = NULL;
    CkIdentityMap *m = ck_identity_map_load(path, &bad);
    if (count)
        atomic_fetch_add_explicit(&fs->metrics->idmap_reloads[m ? 1 : 0], 1, memory_order_relaxed);
    if (!m && !w->in_force) {
        g_warning("ckptfs: identity_map=%s (%s): %s; no map is in force until the file is "
                  "mended: no caller is named by one",
                  path, why, bad);
        return false;
    }
    if (!m) {
        g_warning("ckptfs: identity_map=%s (%s): %s; the previous map stays in force "
                  "(%" G_GUINT64_FORMAT " cgroup lines, %" G_GUINT64_FORMAT " uid lines)",
                  path, why, bad, (guint64)atomic_load(&fs->metrics->idmap_lines[0]),
                  (guint64)atomic_load(&fs->metrics->idmap_lines[1]));
        return false;
    }
    w->in_force = true;
    set_gauges(fs, m);
    g_message("ckptfs: identity_map=%s (%s): %u cgroup lines, %u uid lines", path, why,
              ck_identity_map_cgroup_lines(m), ck_identity_map_uid_lines(m));
    ck_identity_set_map(fs->identity, m);
    return true;
}

bool identity_watch_check(struct ckptfs *fs, char **why)
{
    IdentityWatch *w = &fs->idwatch;
    g_clear_pointer(&w->loaded, ck_identity_map_free);
    if (!fs->opt.identity_map)
        return true;
    take_stamp(fs->opt.identity_map, w);
    w->loaded = ck_identity_map_load(fs->opt.identity_map, why);
    return w->loaded != NULL;
}

void identity_watch_init(struct ckptfs *fs)
{
    IdentityWatch *w = &fs->idwatch;
    g_mutex_init(&w->lock);
    w->inotify_fd = w->stop_fd = -1;
    if (!fs->opt.identity_map || !fs->identity)
        return;
    g_mutex_lock(&w->lock);
    if (w->loaded) { /* checked at set-up, with its stamp */
        CkIdentityMap *m = g_steal_pointer(&w->loaded);
        w->in_force = true;
        set_gauges(fs, m);
        ck_identity_set_map(fs->identity, m);
    } else {
        load(fs, fs->state.attached ? "a new daemon" : "mount", fs->state.attached);
    }
    g_mutex_unlock(&w->lock);
}

void identity_watch_reload(struct ckptfs *fs, const char *why)
{
    if (!fs->opt.identity_map || !fs->identity)
        return;
    g_mutex_lock(&fs->idwatch.lock);
    load(fs, why, true);
    g_mutex_unlock(&fs->idwatch.lock);
}

/* A look at the file: read again when it is not the one last loaded. */
static void look(struct ckptfs *fs)
{
    IdentityWatch *w = &fs->idwatch;
    g_mutex_lock(&w->lock);
    if (changed(fs->opt.identity_map, w))
        load(fs, "the file changed", true);
    g_mutex_unlock(&w->lock);
}

static gpointer watch_loop(gpointer p)
{
    struct ckptfs *fs = p;
    IdentityWatch *w = &fs->idwatch;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        struct pollfd fds[2] = {{w->stop_fd, POLLIN, 0}, {w->inotify_fd, POLLIN, 0}};
        /* at most a minute: a rescan= shortened live applies by then */
        int timeout_ms = (int)MIN(catalog_watch_rescan(fs) * 1000, 60000);
        int n = poll(fds, w->inotify_fd >= 0 ? 2 : 1, MAX(timeout_ms, 100));
        if (n < 0 && errno != EINTR) {
            g_warning("ckptfs: identity_map=%s: poll: %s; SIGHUP still reloads it",
                      fs->opt.identity_map, g_strerror(errno));
            return NULL;
        }
        if (n > 0 && fds[0].revents)
            return NULL;
        /* whatever happened in the directory (a rename into place, a close
         * after writing, a symlink swapped, an overflow), or nothing for a
         * while: the file's stamp says whether to read it */
        if (n > 0 && fds[1].revents)
            while (read(w->inotify_fd, buf, sizeof buf) > 0)
                ;
        look(fs);
    }
}

void identity_watch_start(struct ckptfs *fs)
{
    IdentityWatch *w = &fs->idwatch;
    if (!fs->opt.identity_map || !fs->identity)
        return;
    w->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (w->stop_fd < 0) {
        g_warning("ckptfs: identity_map=%s: eventfd: %s; only SIGHUP reloads it",
                  fs->opt.identity_map, g_strerror(errno));
        return;
    }
    g_autofree char *dir = g_path_get_dirname(fs->opt.identity_map);
    w->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (w->inotify_fd < 0 || inotify_add_watch(w->inotify_fd, dir,
                                               IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM |
                                                   IN_DELETE | IN_ONLYDIR) < 0) {
        g_warning("ckptfs: identity_map=%s: cannot watch %s (%s); it is checked every rescan "
                  "interval instead",
                  fs->opt.identity_map, dir, g_strerror(errno));
        if (w->inotify_fd >= 0)
            close(w->inotify_fd);
        w->inotify_fd = -1;
    }
    w->thread = g_thread_new("ckptfs-idmap", watch_loop, fs);
}

void identity_watch_stop(struct ckptfs *fs)
{
    IdentityWatch *w = &fs->idwatch;
    uint64_t one = 1;
    if (w->thread && write(w->stop_fd, &one, sizeof one) == sizeof one)
        g_thread_join(g_steal_pointer(&w->thread));
    if (w->inotify_fd >= 0)
        close(w->inotify_fd);
    if (w->stop_fd >= 0)
        close(w->stop_fd);
    w->inotify_fd = w->stop_fd = -1;
}

void identity_watch_clear(struct ckptfs *fs)
{
    identity_watch_stop(fs);
    g_clear_pointer(&fs->idwatch.loaded, ck_identity_map_free);
}
