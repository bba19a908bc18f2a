/* ckptfs: the daemon (ckptfs(8)).  Parses and validates the options, clears a
 * stale mount, sets up the one struct ckptfs and runs the FUSE session. */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "intern.h"
#include "resolve.h"
#include "ckptfs-config.h"
#include "attach.h"
#include "ckptfs.h"
#include "views/control.h"
#include "views/identity_watch.h"
#include "kernel/kio.h"
#include "log.h"
#include "backing_mount.h"
#include "outlive/keep.h"
#include "mounttab.h"
#include "ops/ops.h"
#include "outlive/supervisor.h"
#include "proctitle.h"
#include "views/views.h"

/* One line on stderr; and, from a daemon a takeover started, the same line
 * for the supervisor to pass on to whoever asked. */
static int setup_error(struct ckptfs *fs, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int setup_error(struct ckptfs *fs, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "ckptfs: %s\n", msg);
    if (fs)
        suplink_error(fs->link, msg);
    return code;
}

/* A ckptfs daemon killed without unmounting leaves a mount whose every
 * request fails (ENOTCONN); detach it so the new mount can take its place. */
static void clear_stale_mount(const char *mnt, const char *fstype)
{
    if (!mounttab_dead_ckptfs(mnt, fstype))
        return;
    g_message("ckptfs: %s: clearing a stale mount left by a dead daemon", mnt);
    if (!unmount_lazily(mnt, 0))
        g_warning("ckptfs: %s: fusermount3 -u -z failed", mnt);
}

/* collision_log must not lead into the backing directory: the daemon never
 * writes there on its own (nor into the mount, which it would serve
 * itself).  Returns the absolute path to use. */
static int check_collision_log(struct ckptfs *fs, char **abs_out)
{
    g_autoptr(GError) err = NULL;
    *abs_out = log_file_path(fs->opt.collision_log, fs->backing, fs->mountpoint, &err);
    return *abs_out
               ? 0
               : setup_error(fs, 2, "collision_log=%s: %s", fs->opt.collision_log, err->message);
}

/* The kernel gives a FUSE mount the default 128 KiB read-ahead: cold
 * sequential reads then go in 128 KiB requests, one or two in flight.  As
 * root, raise it on the mount's bdi (named for its st_dev, read from
 * mountinfo: a stat of our own mount would wait for the loop we have not
 * started).  Not root, or no sysfs: the default stays. */
#define CKPTFS_READAHEAD_KB 4096 /* ckpt-bench cold read: 2048 0.75-0.85, 4096 0.82-0.91 */
static void raise_readahead(dev_t dev)
{
    if (geteuid() != 0 || !dev)
        return;
    g_autofree char *path =
        g_strdup_printf("/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
    g_autofree char *val = g_strdup_printf("%d\n", CKPTFS_READAHEAD_KB);
    int fd = open(path, O_WRONLY | O_CLOEXEC); /* sysfs: no g_file_set_contents (it renames) */
    if (fd < 0 || write(fd, val, strlen(val)) < 0)
        g_debug("ckptfs: %s: cannot set the read-ahead: %s", path, g_strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* FUSE passthrough (docs/DESIGN.md, "The data path"): asked for unless the options exclude it or
 * the daemon lacks the privilege the kernel requires (CAP_SYS_ADMIN: the
 * daemon runs as root).  A backing directory on a stacking file system
 * (overlayfs, as in containers) needs one more level of stack depth. */
static void passthrough_setup(struct ckptfs *fs)
{
    const char *why = NULL;
    if (fs->opt.passthrough_off)
        why = "-o passthrough=off";
    else if (fs->opt.writeback)
        why = "-o writeback: the kernel refuses the writeback cache with passthrough";
    else if (geteuid() != 0)
        why = "the daemon is not root: binding backing files needs CAP_SYS_ADMIN";
    struct statfs sfs;
    int depth = 0;
    if (fstatfs(fs->root_fd, &sfs) == 0 &&
        (sfs.f_type == 0x794c7630 /* overlayfs */ || sfs.f_type == 0xf15f /* ecryptfs */))
        depth = 1;
    kio_init(&fs->kio, why == NULL, why, depth);
    const char *ring_why = fs->opt.io_uring_off ? "-o io_uring=off"
                           : fs->supervised     ? kio_uring_supervised_why()
                           : fs->auto_unmount   ? kio_uring_auto_unmount_why()
                           : !kio_uring_enabled()
                               ? "the fuse module's enable_uring is off (echo Y > "
                                 "/sys/module/fuse/parameters/enable_uring)"
                               : NULL;
    kio_want_ring(&fs->kio, ring_why == NULL, ring_why, fs->opt.io_uring_depth_n);
}

/* Whether this process is in a cgroup v2 hierarchy: identity=cgroup reads
 * the callers' "0::" lines. */
static bool has_cgroup2(void)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/proc/self/cgroup", &text, NULL, NULL))
        return false;
    return g_str_has_prefix(text, "0::") || strstr(text, "\n0::") != NULL;
}

/* The backing directory and the files the options name, as a daemon will
 * find them: what a takeover checks before the running daemon hands over,
 * and the first thing a daemon checks.  fs->backing is set.  check_map:
 * identity_map=FILE is read into fs->idwatch.loaded (a malformed map is
 * refused); a daemon that replaces a dead one leaves it to
 * identity_watch_init, which goes on without a map rather than leave the
 * mount without a daemon. */
static int check_paths(struct ckptfs *fs, char **collision_log, bool check_map)
{
    FsOptions *o = &fs->opt;
    struct stat st;
    char *real = realpath(o->backing_arg, NULL);
    if (!real)
        return setup_error(fs, 2, "backing directory %s: %s", o->backing_arg, g_strerror(errno));
    free(fs->backing);
    fs->backing = real;
    fs->backing_len = strlen(real);
    if (fs->backing_len == 1)
        fs->backing_len = 0; /* "/": every path is below it */
    if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
        return setup_error(fs, 2, "%s: not a directory", o->backing_arg);
    g_autofree char *views = g_build_filename(real, o->views_name, NULL);
    if (lstat(views, &st) == 0)
        return setup_error(fs, 2,
                           "%s: the backing directory already has an entry named %s; choose "
                           "another name for the views with -o views=NAME",
                           o->backing_arg, o->views_name);
    g_autofree char *map_why = NULL;
    if (check_map && !identity_watch_check(fs, &map_why))
        return setup_error(fs, 2, "identity_map=%s: %s", o->identity_map, map_why);
    if (o->identity_mode == CK_IDENTITY_CGROUP && !has_cgroup2())
        return setup_error(fs, 1,
                           "identity=%s: this system has no cgroup v2 hierarchy (no \"0::\" line "
                           "in /proc/self/cgroup)",
                           o->identity);
    if (o->collision_log)
        return check_collision_log(fs, collision_log);
    return 0;
}

/* The first half of a daemon's set-up: what it can check without the state
 * a running daemon still uses (a takeover's standby daemon stops here until
 * the running one handed over).  A daemon that attaches to a live
 * connection (supervisor.h) must not look at its own mount point: no daemon
 * serves it until this one does. */
static int setup_check(struct ckptfs *fs, const char *mountpoint, const SupLink *link, char **note)
{
    FsOptions *o = &fs->opt;
    if (!o->backing_arg || !mountpoint)
        return setup_error(fs, 2,
                           "usage: ckptfs [-f] [-d] [-s] [-o opt[,opt...]] BACKING_DIR MOUNTPOINT");
    const char *why = attach_state_open(fs, link);
    if (why)
        return setup_error(fs, 1, "%s", why);
    bool attach = fs->state.attached;
    struct stat st;
    if (!attach) {
        clear_stale_mount(mountpoint, o->fstype);
        char *real = realpath(mountpoint, NULL);
        if (!real)
            return setup_error(fs, 2, "mount point %s: %s", mountpoint, g_strerror(errno));
        fs->mountpoint = real;
        /* before the stat: a live mount's root may fail it (its backing gone) */
        g_autofree char *serving = mounttab_live_ckptfs(real, o->fstype);
        if (serving)
            return setup_error(fs, 2,
                               "%s: a live ckptfs (of %s) already serves this mount point; "
                               "unmount it first (fusermount3 -u)",
                               real, serving);
        if (stat(real, &st) < 0)
            return setup_error(fs, 2, "mount point %s: %s", mountpoint, g_strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return setup_error(fs, 2, "%s: not a directory", mountpoint);
        if (strlen(real) >= sizeof fs->state.hdr->mountpoint)
            return setup_error(fs, 2, "%s: path too long", mountpoint);
    }
    g_autofree char *log_path = NULL;
    int rc = check_paths(fs, &log_path, link->mode != LINK_ATTACH);
    if (rc)
        return rc;
    if (attach)
        *note = attach_keep_fixed(fs);
    /* the catalog and inotify read the backing dir by path, and lookups pass
     * through: a mount on the backing dir, inside it or above it would read
     * itself (and its own descriptors would keep it from being unmounted) */
    if (fs->backing_len == 0 || ck_path_is_under(fs->mountpoint, fs->backing) ||
        ck_path_is_under(fs->backing, fs->mountpoint))
        return setup_error(fs, 2,
                           "%s: is the backing directory, inside it or above it: the mount would "
                           "read itself; choose a mount point outside the backing directory",
                           mountpoint);

    fs->root_fd = open(fs->backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fs->root_fd < 0)
        return setup_error(fs, 2, "%s: %s", o->backing_arg, g_strerror(errno));
    fs->mount_fd = open(fs->backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->mount_fd < 0)
        return setup_error(fs, 2, "%s: %s", o->backing_arg, g_strerror(errno));
    /* what is opened for reading and writing goes through a private copy of
     * the backing mount with the FUSE mount's atime rule */
    long now = attach ? mounttab_atime_rule(fs->mountpoint) : -1;
    if (now >= 0)
        fs->atime_rule = (unsigned long)now; /* a remount may have changed it */
    int tree = backing_mount_open(fs->backing, fs->atime_rule);
    if (tree >= 0) {
        fs->data_root_fd = tree;
        fs->data_mount_fd = openat(tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fs->data_mount_fd < 0)
            return setup_error(fs, 2, "%s: %s", o->backing_arg, g_strerror(errno));
    } else {
        g_debug("ckptfs: no private copy of the backing mount (%s): the daemon's own opens "
                "follow the atime rule with O_NOATIME",
                g_strerror(-tree));
    }
    /* a daemon that attaches serves the directory the mount was made of, or
     * none: a takeover's standby says so before the running daemon hands over */
    rc = attach_match(fs);
    if (rc == -EXDEV)
        return setup_error(fs, 1,
                           "%s: is no longer the directory this mount was made of (moved, "
                           "replaced or remounted); the running daemon goes on serving it",
                           o->backing_arg);
    if (rc < 0)
        return setup_error(fs, 1, "%s: %s", o->backing_arg, g_strerror(-rc));
    g_autoptr(GError) err = NULL;
    /* the check of check_collision_log, made again at every reopen */
    g_autoptr(CkFence) fence = ck_fence_new(fs->backing, fs->mountpoint);
    /* the newest records are kept in the state memfd: a new daemon has them */
    fs->collisions = ck_collision_log_new_in(fs->state.collisions, fs->state.collisions_size,
                                             CK_COLLISION_LOG_KEEP, log_path, fence, &err);
    if (!fs->collisions)
        return setup_error(fs, 2, "collision_log=%s: %s", o->collision_log,
                           err ? err->message : "?");
    if (o->identity_mode != CK_IDENTITY_NONE) {
        g_autofree char *why = NULL;
        fs->identity = ck_identity_new(o->job_interned, o->identity, NULL, "/proc", &why);
        if (!fs->identity)
            return setup_error(fs, 2, "identity=%s: %s", o->identity, why);
    }
    return 0;
}

/* The second half: the state (node table, handles, live settings) is this
 * daemon's from here on. */
static int setup_state(struct ckptfs *fs)
{
    FsOptions *o = &fs->opt;
    /* the counters go on from the previous daemon's; the gauges are this one's */
    fs->metrics = fs->state.metrics;
    fs_metrics_reset_gauges(fs->metrics);
    /* settings changed while mounted outlive the daemon, unless this one's
     * options change them (control.h) */
    fs->policy = (CkPolicy){.off = o->no_policy, .anonymous_deny = o->anonymous_deny};
    control_init(fs);
    identity_watch_init(fs);
    fs->entry_timeout = o->entry_timeout_s;
    fs->attr_timeout = o->attr_timeout_s;
    passthrough_setup(fs);
    if (ckptfs_creds_init(fs) < 0)
        return setup_error(fs, 1, "cannot read the daemon's groups");
    g_mutex_init(&fs->log_limit.lock);
    g_mutex_init(&fs->dirpark.lock);
    /* a first daemon: handles taken through the last mount of the
     * directory open through this one (generations go on past its) */
    struct stat root;
    if (fstat(fs->root_fd, &root) < 0)
        return setup_error(fs, 1, "%s: %s", o->backing_arg, g_strerror(errno));
    bool first = !fs->state.attached;
    fs->keep = fs->is_root && !o->no_handles; /* open_by_handle_at needs root */
    if (fs->keep)
        fs->keep_lock = keep_lock(fs->backing, root.st_dev, root.st_ino,
                                  first && !mounttab_has_ckptfs_of(fs->backing));
    g_autoptr(GArray) kept = first ? g_array_new(FALSE, FALSE, sizeof(uint32_t)) : NULL;
    if (first) {
        keep_take(&fs->state, fs->backing, root.st_dev, root.st_ino, o->views_name,
                  fs->keep ? kept : NULL);
        if (kept->len)
            g_debug("ckptfs: %u node records of the last mount taken over", kept->len);
    }
    NodeTableSetup nts = {.state = &fs->state,
                          .root_fd = fs->root_fd,
                          .mount_fd = fs->mount_fd,
                          .views_name = o->views_name,
                          .no_handles = o->no_handles,
                          .data_mount_fd = fs->data_mount_fd,
                          .kept = kept,
                          .noatime = (fs->atime_rule & MS_NOATIME) != 0,
                          .name = fs->backing};
    int rc = node_table_init(&fs->nodes, &nts);
    if (rc < 0)
        return setup_error(fs, 1, "%s: %s", o->backing_arg, g_strerror(-rc));
    pt_init(&fs->pt, &fs->nodes, &fs->kio, fs->metrics,
            o->passthrough_off || o->writeback ? FS_PT_OFF
            : !fs->is_root                     ? FS_PT_UNPRIVILEGED
                                               : FS_PT_KERNEL);
    rc = views_init(fs);
    if (rc < 0)
        return setup_error(fs, 1, "views: %s", g_strerror(-rc));
    handles_init(fs);
    attach_revive(fs);
    return 0;
}

static void teardown(struct ckptfs *fs)
{
    g_free(fs->ready_note);
    dirpark_clear(fs);
    direct_stop(fs);
    handles_cleanup(fs);
    inflight_journal_clear(&fs->journal);
    g_mutex_clear(&fs->log_limit.lock);
    if (fs->views)
        views_destroy(fs);
    node_table_destroy(&fs->nodes);
    identity_watch_clear(fs);
    if (fs->identity)
        ck_identity_free(fs->identity);
    if (fs->collisions)
        ck_collision_log_free(fs->collisions);
    control_clear(fs);
    if (fs->root_fd >= 0)
        close(fs->root_fd);
    if (fs->mount_fd >= 0)
        close(fs->mount_fd);
    if (fs->keep_lock >= 0)
        close(fs->keep_lock);
    if (fs->data_root_fd >= 0)
        close(fs->data_root_fd);
    if (fs->data_mount_fd >= 0)
        close(fs->data_mount_fd);
    free(fs->backing);
    free(fs->mountpoint);
    state_close(&fs->state);
    g_free(fs->groups);
    fs_options_clear(&fs->opt);
}

/* The -o options left for libfuse, joined by commas. */
static char *mount_options_text(const struct fuse_args *args)
{
    GString *all = g_string_new(NULL);
    for (int i = 0; i < args->argc; i++) {
        const char *a = args->argv[i];
        if (strcmp(a, "-o") == 0 && i + 1 < args->argc)
            a = args->argv[++i];
        else if (g_str_has_prefix(a, "-o"))
            a += 2;
        else
            continue;
        g_string_append_printf(all, "%s%s", all->len ? "," : "", a);
    }
    return g_string_free(all, FALSE);
}

/* Whether the -o options left for libfuse name `opt` (alone, not as a
 * prefix of another option). */
static bool has_mount_option(const struct fuse_args *args, const char *opt)
{
    g_autofree char *text = mount_options_text(args);
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);
    return g_strv_contains((const char *const *)parts, opt);
}

/* Told by the supervisor to hand the connection over (a thread): the loop
 * ends, in-flight requests finish, and main exits without unmounting. */
static void on_handover(void *ctx)
{
    struct ckptfs *fs = ctx;
    atomic_store(&fs->handover, true);
    fuse_session_exit(fs->se);
    pthread_kill(fs->main_thread, SIGUSR1); /* out of the loop's wait (wake_loop) */
}

/* SIGUSR1 only interrupts the main thread's wait in the session loop, so
 * that it sees the session ended (on_handover). */
static void wake_loop(int sig)
{
    (void)sig;
}

/* SIGHUP: a reload, never an unmount.  The signal is blocked in every
 * thread of the daemon and read from a signalfd by one thread, which does
 * the work (control_reload) outside any signal handler. */
static int reload_signal_setup(struct ckptfs *fs)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wake_loop;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return -errno;
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    /* before any thread: they all inherit the mask */
    if (pthread_sigmask(SIG_BLOCK, &hup, NULL) != 0)
        return -EINVAL;
    fs->reload_fd = signalfd(-1, &hup, SFD_CLOEXEC | SFD_NONBLOCK);
    fs->reload_stop = eventfd(0, EFD_CLOEXEC);
    /* without it (no /proc), the atime rule stays the one mounted with */
    fs->mounts_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    return fs->reload_fd < 0 || fs->reload_stop < 0 ? -errno : 0;
}

/* Reads through the mount follow its atime rule as it is now: `mount -o
 * remount,noatime` (or relatime) changes the kernel's rule behind the
 * daemon, and the private copy of the backing mount (or, without one, the
 * daemon's O_NOATIME) must follow. */
static void follow_atime_rule(struct ckptfs *fs)
{
    long now = mounttab_atime_rule(fs->mountpoint);
    if (now < 0 || (unsigned long)now == fs->atime_rule)
        return;
    fs->atime_rule = (unsigned long)now;
    node_set_noatime(&fs->nodes, (fs->atime_rule & MS_NOATIME) != 0);
    int err = fs->data_root_fd >= 0 ? backing_mount_set_atime(fs->data_root_fd, fs->atime_rule) : 0;
    if (err)
        g_warning("ckptfs: %s: remounted, but files opened through the mount keep their atime "
                  "rule: %s",
                  fs->mountpoint, g_strerror(-err));
    g_message("ckptfs: %s: remounted %s: reads through it %s atimes", fs->mountpoint,
              (now & MS_NOATIME) ? "noatime" : "with atimes",
              (now & MS_NOATIME) ? "leave" : "update");
}

static gpointer reload_loop(gpointer p)
{
    struct ckptfs *fs = p;
    struct pollfd fds[3] = {
        {fs->reload_fd, POLLIN, 0}, {fs->reload_stop, POLLIN, 0}, {fs->mounts_fd, POLLPRI, 0}};
    follow_atime_rule(fs); /* a takeover's daemon: the mount may have changed before it */
    for (;;) {
        if (poll(fds, fs->mounts_fd >= 0 ? 3 : 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            g_warning("ckptfs: reload: poll: %s; SIGHUP is ignored from now on", g_strerror(errno));
            return NULL;
        }
        if (fds[1].revents)
            return NULL;
        if (fds[2].revents & (POLLPRI | POLLERR))
            follow_atime_rule(fs);
        struct signalfd_siginfo si;
        bool hup = false;
        pid_t from = 0;
        while (read(fs->reload_fd, &si, sizeof si) == sizeof si) {
            hup = true;
            from = (pid_t)si.ssi_pid;
        }
        if (hup) {
            g_message("ckptfs: SIGHUP (from pid %d): reloading", (int)from);
            control_reload(fs);
        }
    }
}

/* After fuse_daemonize (threads do not survive its fork) and views_start. */
static void reload_start(struct ckptfs *fs)
{
    if (fs->reload_fd >= 0 && fs->reload_stop >= 0)
        fs->reload_thread = g_thread_new("ckptfs-reload", reload_loop, fs);
}

static void reload_stop(struct ckptfs *fs)
{
    uint64_t one = 1;
    if (fs->reload_thread && write(fs->reload_stop, &one, sizeof one) == sizeof one)
        g_thread_join(g_steal_pointer(&fs->reload_thread));
    if (fs->reload_fd >= 0)
        close(fs->reload_fd);
    if (fs->reload_stop >= 0)
        close(fs->reload_stop);
    if (fs->mounts_fd >= 0)
        close(fs->mounts_fd);
    fs->reload_fd = fs->reload_stop = fs->mounts_fd = -1;
}

/* `ckptfs --takeover MNT [-o OPTIONS]` (or --takeover=MNT): 1 with *mnt
 * and *opts set, 0 when argv asks for something else, -1 after a usage
 * line. */
static int takeover_args(char **argv, const char **mnt, const char **opts)
{
    int at = -1;
    for (int i = 1; argv[i]; i++)
        if (strcmp(argv[i], "--takeover") == 0 || g_str_has_prefix(argv[i], "--takeover="))
            at = i;
    if (at < 0)
        return 0;
    *mnt = *opts = NULL;
    for (int i = 1; argv[i]; i++) {
        const char *a = argv[i];
        if (i == at && a[strlen("--takeover")] == '=')
            *mnt = a + strlen("--takeover=");
        else if (i == at)
            continue;
        else if (strcmp(a, "-o") == 0 && argv[i + 1] && !*opts)
            *opts = argv[++i];
        else if (g_str_has_prefix(a, "-o") && a[2] && !*opts)
            *opts = a + 2;
        else if (a[0] != '-' && !*mnt)
            *mnt = a;
        else
            *mnt = NULL, at = -2;
        if (at == -2)
            break;
    }
    if (at == -2 || !*mnt || !**mnt) {
        fprintf(stderr, "usage: ckptfs --takeover MOUNTPOINT [-o OPTIONS]\n");
        return -1;
    }
    return 1;
}

/* -o supervise: on by default under systemd and in the background, or as
 * config=FILE's supervise= says; always for a daemon a supervisor started
 * (a takeover's options come that way).  auto_unmount asks for the mount
 * to go with its daemon, the death supervision is there to outlive: on
 * the command line it overrides a default; with -o supervise, or under a
 * supervisor, the two are refused (the text why, else NULL). */
static const char *decide_supervise(const FsOptions *opt, const struct fuse_args *args,
                                    bool foreground, bool by_supervisor, bool *supervise)
{
    bool auto_unmount = has_mount_option(args, "auto_unmount");
    bool by_default =
        opt->supervise_file >= 0 ? opt->supervise_file : (!foreground || g_getenv("INVOCATION_ID"));
    *supervise = by_supervisor         ? true
                 : opt->supervise >= 0 ? opt->supervise
                                       : !auto_unmount && by_default;
    if (!*supervise || !auto_unmount)
        return NULL;
    return by_supervisor ? "-o auto_unmount unmounts when the daemon dies, which the supervisor "
                           "taking this mount over is there to outlive"
                         : "-o auto_unmount unmounts when the first daemon dies, which "
                           "supervision is there to outlive; give one of them";
}

/* A takeover's command line, checked by the binary that will run it, in
 * the process that asked: options, config file, and the files and
 * directories they name. */
static int check_command_line(char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT((int)g_strv_length(argv), argv);
    struct ckptfs fs;
    memset(&fs, 0, sizeof fs);
    struct fuse_cmdline_opts c;
    memset(&c, 0, sizeof c);
    int rc = fs_options_parse(&args, &fs.opt);
    if (!rc && fuse_parse_cmdline(&args, &c) != 0)
        rc = 2;
    if (!rc && (!fs.opt.backing_arg || !c.mountpoint))
        rc = setup_error(NULL, 2, "the command line names no backing directory or mount point");
    bool supervise; /* a takeover's daemon is a supervisor's */
    const char *refused = rc ? NULL : decide_supervise(&fs.opt, &args, true, true, &supervise);
    if (refused)
        rc = setup_error(NULL, 2, "%s", refused);
    if (!rc) {
        /* what only libfuse reads (its own options and the mount's), as the
         * new daemon's session will read it: refused here, not after the
         * running daemon handed over.  On a copy: libfuse takes out of
         * the arguments what it knows. */
        static const struct fuse_lowlevel_ops none;
        struct fuse_args copy = FUSE_ARGS_INIT(args.argc, args.argv);
        struct fuse_session *se = fuse_session_new(&copy, &none, sizeof none, NULL);
        if (se)
            fuse_session_destroy(se);
        else
            rc = 2;
        fuse_opt_free_args(&copy);
    }
    if (!rc) {
        fs.mountpoint = g_canonicalize_filename(c.mountpoint, NULL);
        g_autofree char *log_path = NULL;
        rc = check_paths(&fs, &log_path, true);
        g_clear_pointer(&fs.idwatch.loaded, ck_identity_map_free);
        g_free(fs.mountpoint);
        fs.mountpoint = NULL;
    }
    free(c.mountpoint);
    fuse_opt_free_args(&args);
    free(fs.backing);
    fs_options_clear(&fs.opt);
    return rc;
}

int main(int argc, char *argv[])
{
    log_init();
    /* the title overwrites the strings argv points at */
    g_auto(GStrv) args0 = g_strdupv(argv);
    proctitle_init(argc, argv);
    g_set_prgname("ckptfs"); /* log records say "ckptfs", not "process" */
    /* a supervisor re-executed by a takeover parses nothing: a config file
     * broken meanwhile must not stop the mount's keeper */
    if (supervisor_resuming())
        return supervisor_resume(args0);
    const char *tk_mnt, *tk_opts;
    int tk = takeover_args(args0, &tk_mnt, &tk_opts);
    if (tk)
        return tk < 0 ? 2 : supervisor_takeover(tk_mnt, tk_opts, check_command_line);
    /* paths absolute before anything: a supervisor runs its daemons from / */
    g_auto(GStrv) cmd = fs_argv_absolute(args0);
    struct fuse_args args = FUSE_ARGS_INIT(argc, cmd);
    struct ckptfs fs;
    memset(&fs, 0, sizeof fs);
    fs.root_fd = fs.mount_fd = fs.data_root_fd = fs.data_mount_fd = -1;
    fs.reload_fd = fs.reload_stop = fs.mounts_fd = fs.keep_lock = -1;
    fs.idwatch.inotify_fd = fs.idwatch.stop_fd = -1;
    fs.started_us = g_get_real_time();
    struct fuse_cmdline_opts c;
    memset(&c, 0, sizeof c);
    SupLink link = {.sock = -1, .state_fd = -1, .fuse_fd = -1, .conn_fd = -1};
    fs.link = &link;
    g_autofree char *mount_opts = NULL;
    int rc = fs_options_parse(&args, &fs.opt);
    if (rc)
        goto out;
    if (fuse_parse_cmdline(&args, &c) != 0) {
        rc = 2;
        goto out;
    }
    bool daemonized = false;
    mount_opts = mount_options_text(&args);
    if (has_mount_option(&args, "remount") && c.mountpoint) {
        rc = mounttab_remount(c.mountpoint, mount_opts, fs.opt.fstype);
        goto out;
    }
    fs.atime_rule = mounttab_atime_rule_of(mount_opts);
    if (c.show_help) {
        fs_options_help();
        fuse_cmdline_help();
        fuse_lowlevel_help();
        rc = 0;
        goto out;
    }
    if (c.show_version) {
        printf("ckptfs %s\nlibfuse %s\nFUSE kernel protocol 7.%d (what libfuse lacks of it, "
               "passthrough and resend, ckptfs speaks itself)\n",
               CKPTFS_VERSION, fuse_pkgversion(), KIO_PROTOCOL_MINOR);
        rc = 0;
        goto out;
    }
    /* before the supervisor: it logs there too */
    rc = log_open(fs.opt.log, fs.opt.log_level, c.debug, fs.opt.backing_arg, c.mountpoint);
    if (rc)
        goto out;
    /* said once the mount is up (a refusal stays one line) */
    const char *lost_log =
        !c.foreground && !fs.opt.log && strcmp(log_target_name(), "stderr") == 0 &&
                !supervisor_started_me()
            ? "ckptfs: this host has neither a journal nor syslog: in the background the "
              "daemon's log goes nowhere; -o log=FILE keeps it"
            : NULL;
    fs.auto_unmount = has_mount_option(&args, "auto_unmount");
    bool supervise;
    const char *refused =
        decide_supervise(&fs.opt, &args, c.foreground, supervisor_started_me(), &supervise);
    if (refused) {
        rc = setup_error(&fs, 2, "%s", refused);
        goto out;
    }
    rc = supervisor_start(cmd, supervise, c.foreground, lost_log, &link);
    if (rc || (supervise && link.sock < 0))
        goto out; /* the supervisor's own exit status */
    rc = reload_signal_setup(&fs);
    if (rc) {
        rc = setup_error(&fs, 1, "SIGHUP: %s", g_strerror(-rc));
        goto out;
    }
    link.handover = on_handover;
    link.held_now = attach_held_now;
    link.ctx = &fs;
    link.state = &fs.state;
    fs.main_thread = link.main_thread;
    fs.supervised = link.sock >= 0;
    bool attach = link.fuse_fd >= 0;
    if (link.sock >= 0) {
        c.foreground = 1; /* the supervisor detached already, or stays in the foreground */
        daemonized = link.daemonized;
    }
    rc = setup_check(&fs, c.mountpoint, &link, &fs.ready_note);
    if (rc)
        goto out;
    if (link.mode == LINK_STANDBY) {
        /* a takeover's: the running daemon hands over once this one knows
         * it can serve */
        proctitle_set("ckptfs: standby %s", fs.mountpoint);
        if (suplink_standby(&link) < 0) {
            rc = 1;
            goto out;
        }
    }
    rc = setup_state(&fs);
    if (rc)
        goto out;
    proctitle_set("ckptfs: serving %s", fs.mountpoint);

    /* creates pass the caller's mode through as the kernel computed it */
    umask(0);
    fs.se = fuse_session_new(&args, &ckptfs_ops, sizeof ckptfs_ops, &fs);
    if (!fs.se) {
        rc = 2;
        goto out;
    }
    if (fuse_set_signal_handlers(fs.se) != 0) {
        rc = 1;
        goto out_session;
    }
    if (attach) {
        rc = attach_connect(&fs, link.fuse_fd);
    } else if (fuse_session_mount(fs.se, fs.mountpoint) != 0) {
        rc = 1;
        goto out_signals;
    } else {
        rc = attach_first(&fs);
    }
    if (rc != 0) {
        setup_error(&fs, 1, "custom I/O: %s", g_strerror(-rc));
        rc = 1;
        goto out_unmount;
    }
    if (!attach) {
        raise_readahead((dev_t)fs.state.hdr->mount_dev);
        suplink_mounted(&link, fuse_session_fd(fs.se));
    }
    if (link.sock < 0) {
        if (lost_log)
            g_message("%s", lost_log);
        fuse_daemonize(c.foreground);
        daemonized = !c.foreground;
    }
    direct_start(&fs);
    if (views_start(&fs) != 0) /* threads: after the fork of fuse_daemonize */
        g_warning("ckptfs: views: cannot start the catalog threads");
    reload_start(&fs);
    identity_watch_start(&fs);
    if (link.sock < 0)
        sd_notify(0, "READY=1"); /* systemd Type=notify: the mount is up */
    /* the supervisor hears "ready" at INIT (ops.c), once the state holds the
     * kernel's INIT request that a takeover's daemon replays */
    if (daemonized && link.sock >= 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            close(null);
        }
    }
    if (c.singlethread) {
        rc = fuse_session_loop(fs.se);
    } else {
        struct fuse_loop_config *cfg = fuse_loop_cfg_create();
        fuse_loop_cfg_set_clone_fd(cfg, (unsigned)c.clone_fd);
        fuse_loop_cfg_set_max_threads(cfg, c.max_threads);
        if (c.max_idle_threads != UINT_MAX)
            fuse_loop_cfg_set_idle_threads(cfg, c.max_idle_threads);
        rc = fuse_session_loop_mt(fs.se, cfg);
        fuse_loop_cfg_destroy(cfg);
    }
    log_stop(fs.mountpoint, rc, atomic_load(&fs.handover));
    if (atomic_load(&fs.handover)) {
        /* in-flight requests were answered; those read after the loop ended
         * the next daemon asks the kernel to resend.  The state stays as it
         * is for it: nothing is freed, nothing unmounted (a reload under
         * way finishes first). */
        reload_stop(&fs);
        identity_watch_stop(&fs);
        views_stop(&fs);
        _exit(SUPERVISOR_EXIT_HANDOVER);
    }
    /* a session ended by SIGTERM or SIGINT is a clean unmount (SIGHUP
     * reloads: reload_loop) */
    rc = (rc == 0 || rc == SIGTERM || rc == SIGINT) ? 0 : 1;
    if (link.sock < 0)
        sd_notify(0, "STOPPING=1");
    reload_stop(&fs);
    identity_watch_stop(&fs);
    views_stop(&fs);  /* its notifier writes to the session: stop it first */
    direct_stop(&fs); /* so do its drops */
    attach_end(&fs, link.fuse_fd);
    if (fs.keep)
        keep_save(&fs.state, fs.backing, fs.nodes.root->key.dev, fs.nodes.root->key.ino,
                  fs.opt.views_name, fs.keep_lock);
    fs.keep_lock = -1;
out_unmount:
    fuse_session_unmount(fs.se);
out_signals:
    fuse_remove_signal_handlers(fs.se);
out_session:
    views_stop(&fs);
    /* handles the kernel never released are freed after this: their
     * backing ids went with the connection, and the descriptor number may
     * be reused once the session closes it */
    kio_detach(&fs.kio);
    fuse_session_destroy(fs.se);
out:
    reload_stop(&fs);
    free(c.mountpoint);
    fuse_opt_free_args(&args);
    teardown(&fs);
    return rc;
}
