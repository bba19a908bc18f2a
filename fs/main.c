/* ckptfs: the daemon (SPEC §4).  Parses and validates the options, clears a
 * stale mount, sets up the one struct ckptfs and runs the FUSE session. */
#include <errno.h>
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

#include "resolve.h"
#include "ckptfs-config.h"
#include "ckptfs.h"
#include "control.h"
#include "inflight.h"
#include "kio.h"
#include "ops.h"
#include "opsint.h"
#include "supervisor.h"
#include "views.h"

/* Log records: glib's default writer (stderr, or the journal when stderr is
 * a journal stream, as under systemd); once daemonized stderr is /dev/null,
 * so records go to the journal when there is one.  user_data: a bool, true
 * after fuse_daemonize detached from the terminal. */
static GLogWriterOutput log_writer(GLogLevelFlags level, const GLogField *fields, gsize n,
                                   gpointer user_data)
{
    const bool *daemonized = user_data;
    if (*daemonized) {
        const char *domain = NULL;
        for (gsize i = 0; i < n; i++)
            if (strcmp(fields[i].key, "GLIB_DOMAIN") == 0)
                domain = fields[i].value;
        if (g_log_writer_default_would_drop(level, domain))
            return G_LOG_WRITER_HANDLED;
        if (g_log_writer_journald(level, fields, n, NULL) == G_LOG_WRITER_HANDLED)
            return G_LOG_WRITER_HANDLED;
    }
    return g_log_writer_default(level, fields, n, NULL);
}

static int setup_error(int code, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "ckptfs: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return code;
}

/* A daemon killed without unmounting leaves a mount whose every request
 * fails with ENOTCONN; detach it so the new mount can take its place.
 * statfs always reaches the daemon (stat may be answered from the kernel's
 * attribute cache). */
static void clear_stale_mount(const char *mnt)
{
    struct statfs sfs;
    if (statfs(mnt, &sfs) == 0 || errno != ENOTCONN)
        return;
    g_message("ckptfs: %s: clearing a stale mount left by a dead daemon", mnt);
    if (!unmount_lazily(mnt))
        g_warning("ckptfs: %s: fusermount3 -u -z failed", mnt);
}

/* The top mount at mnt (a real path) in this mount namespace, with
 * libmount reading /proc/self/mountinfo (it unescapes "\040" and friends,
 * which a sscanf would not).  NULL when nothing is mounted there; unref
 * the table. */
static struct libmnt_fs *top_mount_at(const char *mnt, struct libmnt_table **tb)
{
    *tb = mnt_new_table_from_file("/proc/self/mountinfo");
    return *tb ? mnt_table_find_target(*tb, mnt, MNT_ITER_BACKWARD) : NULL;
}

/* A second daemon on a mount point a live ckptfs serves would stack on it
 * (two collision logs; umount removes only the top one): the source of
 * that live ckptfs (g_free), or NULL.  A dead one (ENOTCONN) was cleared
 * by clear_stale_mount already. */
static char *live_ckptfs_at(const char *mnt)
{
    struct libmnt_table *tb = NULL;
    struct libmnt_fs *top = top_mount_at(mnt, &tb);
    char *source = NULL;
    struct statfs sfs;
    if (top && g_strcmp0(mnt_fs_get_fstype(top), "fuse.ckptfs") == 0 && statfs(mnt, &sfs) == 0)
        source = g_strdup(mnt_fs_get_source(top) ? mnt_fs_get_source(top) : "?");
    mnt_unref_table(tb);
    return source;
}

/* collision_log must not be inside the backing directory: the daemon never
 * writes there on its own.  Returns the absolute path to use. */
static int check_collision_log(struct ckptfs *fs, char **abs_out)
{
    const char *arg = fs->opt.collision_log;
    g_autofree char *abs = g_canonicalize_filename(arg, NULL);
    g_autofree char *dir = g_path_get_dirname(abs);
    g_autofree char *base = g_path_get_basename(abs);
    char *real_dir = realpath(dir, NULL);
    if (!real_dir)
        return setup_error(2, "collision_log=%s: %s", arg, g_strerror(errno));
    g_autofree char *full = g_build_filename(real_dir, base, NULL);
    bool inside =
        ck_path_is_under(real_dir, fs->backing) || ck_path_is_under(real_dir, fs->mountpoint);
    free(real_dir);
    if (inside)
        return setup_error(
            2, "collision_log=%s: %s", arg,
            "is inside the backing directory or the mount (ckptfs never writes there)");
    *abs_out = g_steal_pointer(&full);
    return 0;
}

/* The kernel gives a FUSE mount the default 128 KiB read-ahead: cold
 * sequential reads then go in 128 KiB requests, one or two in flight.  As
 * root, raise it on the mount's bdi (named for its st_dev, read from
 * mountinfo: a stat of our own mount would wait for the loop we have not
 * started).  Not root, or no sysfs: the default stays. */
#define CKPTFS_READAHEAD_KB 4096 /* ckpt-bench cold read: 2048 0.75-0.85, 4096 0.82-0.91 */
static void raise_readahead(const char *mnt)
{
    if (geteuid() != 0)
        return;
    struct libmnt_table *tb = NULL;
    struct libmnt_fs *top = top_mount_at(mnt, &tb); /* ours: the one just mounted */
    dev_t dev = top ? mnt_fs_get_devno(top) : 0;
    mnt_unref_table(tb);
    if (!dev)
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

/* FUSE passthrough (SPEC §6): asked for unless the options exclude it or
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
}

/* The backing files registered with the kernel for nodes taken over: they
 * stay registered with the connection (the gauge counts them again). */
static int64_t count_bound_nodes(struct ckptfs *fs)
{
    int64_t n = 0;
    uint32_t high = atomic_load(&fs->state.hdr->node_high);
    for (uint32_t i = FUSE_ROOT_ID; i < high && i < STATE_NODE_SLOTS; i++)
        if (fs->nodes.by_slot[i] && fs->nodes.by_slot[i]->backing_id > 0)
            n++;
    return n;
}

/* A daemon that attaches to a live connection (supervisor.h) must not look
 * at its own mount point: no daemon serves it until this one does. */
static int setup(struct ckptfs *fs, const char *mountpoint, const SupLink *link)
{
    FsOptions *o = &fs->opt;
    if (!o->backing_arg || !mountpoint)
        return setup_error(
            2, "usage: ckptfs [-f] [-d] [-s] [-o opt[,opt...]] BACKING_DIR MOUNTPOINT%s%s", "", "");
    int rc = state_open(&fs->state, link->state_fd);
    if (rc < 0)
        return setup_error(1, "%s: %s", "the state memfd", g_strerror(-rc));
    bool attach = link->fuse_fd >= 0;
    if (attach != fs->state.attached || (attach && !fs->state.hdr->init_len))
        return setup_error(1, "%s%s", "the supervisor's state does not match its connection", "");
    /* the counters go on from the previous daemon's; the gauges are this one's */
    fs->metrics = fs->state.metrics;
    fs_metrics_reset_gauges(fs->metrics);

    if (!attach)
        clear_stale_mount(mountpoint);
    struct stat st;
    char *real = realpath(o->backing_arg, NULL);
    if (!real)
        return setup_error(2, "backing directory %s: %s", o->backing_arg, g_strerror(errno));
    fs->backing = real;
    fs->backing_len = strlen(real);
    if (fs->backing_len == 1)
        fs->backing_len = 0; /* "/": every path is below it */
    if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
        return setup_error(2, "%s: %s", o->backing_arg, "not a directory");
    if (attach) {
        fs->mountpoint = strdup(fs->state.hdr->mountpoint);
    } else {
        real = realpath(mountpoint, NULL);
        if (!real)
            return setup_error(2, "mount point %s: %s", mountpoint, g_strerror(errno));
        fs->mountpoint = real;
        if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
            return setup_error(2, "%s: %s", mountpoint, "not a directory");
        g_autofree char *serving = live_ckptfs_at(real);
        if (serving)
            return setup_error(2,
                               "%s: a live ckptfs (of %s) already serves this mount point; "
                               "unmount it first (fusermount3 -u)",
                               real, serving);
        if (strlen(real) >= sizeof fs->state.hdr->mountpoint)
            return setup_error(2, "%s: %s", mountpoint, "path too long");
        g_strlcpy(fs->state.hdr->mountpoint, real, sizeof fs->state.hdr->mountpoint);
    }
    /* the catalog and inotify read the backing dir by path, and lookups pass
     * through: a mount on the backing dir, inside it or above it would read
     * itself (and its own descriptors would keep it from being unmounted) */
    if (fs->backing_len == 0 || ck_path_is_under(fs->mountpoint, fs->backing) ||
        ck_path_is_under(fs->backing, fs->mountpoint))
        return setup_error(2, "%s: %s", mountpoint,
                           "is the backing directory, inside it or above it: the mount would read "
                           "itself; choose a mount point outside the backing directory");

    fs->root_fd = open(fs->backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fs->root_fd < 0)
        return setup_error(2, "%s: %s", o->backing_arg, g_strerror(errno));
    fs->mount_fd = open(fs->backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->mount_fd < 0)
        return setup_error(2, "%s: %s", o->backing_arg, g_strerror(errno));
    if (fstatat(fs->root_fd, o->views_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        g_autofree char *msg = g_strdup_printf(
            "the backing directory already has an entry named %s; choose another name for "
            "the views with -o views=NAME",
            o->views_name);
        return setup_error(2, "%s: %s", o->backing_arg, msg);
    }

    g_autofree char *log_path = NULL;
    if (o->collision_log) {
        int rc = check_collision_log(fs, &log_path);
        if (rc)
            return rc;
    }
    g_autoptr(GError) err = NULL;
    /* the newest records are kept in the state memfd: a new daemon has them */
    fs->collisions = ck_collision_log_new_in(fs->state.collisions, fs->state.collisions_size,
                                             CK_COLLISION_LOG_KEEP, log_path, &err);
    if (!fs->collisions)
        return setup_error(2, "collision_log=%s: %s", o->collision_log, err ? err->message : "?");
    if (o->job_interned || o->identity_env)
        fs->identity = ck_identity_new(o->job_interned, o->identity_env, "/proc");

    /* settings changed while mounted outlive the daemon */
    fs->policy = (CkPolicy){.off = o->no_policy};
    control_init(fs);
    fs->entry_timeout = o->entry_timeout_s;
    fs->attr_timeout = o->attr_timeout_s;
    passthrough_setup(fs);
    if (ckptfs_creds_init(fs) < 0)
        return setup_error(1, "%s%s", "cannot read the daemon's groups", "");
    g_mutex_init(&fs->log_limit.lock);
    g_mutex_init(&fs->dirpark.lock);
    rc = node_table_init(fs);
    if (rc < 0)
        return setup_error(1, "%s: %s", o->backing_arg, g_strerror(-rc));
    rc = views_init(fs);
    if (rc < 0)
        return setup_error(1, "%s: %s", "views", g_strerror(-rc));
    ckptfs_handles_init(fs, ckptfs_handle_types); /* after the nodes: it opens theirs */
    if (attach) {
        atomic_fetch_add(&fs->state.hdr->attaches, 1);
        atomic_store(&fs->metrics->pt_ids, count_bound_nodes(fs));
    }
    return 0;
}

static void teardown(struct ckptfs *fs)
{
    dirpark_clear(fs);
    ckptfs_handles_cleanup(fs);
    g_mutex_clear(&fs->log_limit.lock);
    if (fs->views)
        views_destroy(fs);
    node_table_destroy(fs);
    if (fs->identity)
        ck_identity_free(fs->identity);
    if (fs->collisions)
        ck_collision_log_free(fs->collisions);
    control_clear(fs);
    if (fs->root_fd >= 0)
        close(fs->root_fd);
    if (fs->mount_fd >= 0)
        close(fs->mount_fd);
    free(fs->backing);
    free(fs->mountpoint);
    state_close(&fs->state);
    g_free(fs->groups);
    fs_options_clear(&fs->opt);
}

/* Whether the -o options left for libfuse name `opt` (alone, not as a
 * prefix of another option). */
static bool has_mount_option(const struct fuse_args *args, const char *opt)
{
    for (int i = 0; i < args->argc; i++) {
        const char *a = args->argv[i];
        if (strcmp(a, "-o") == 0 && i + 1 < args->argc)
            a = args->argv[++i];
        else if (g_str_has_prefix(a, "-o"))
            a += 2;
        else
            continue;
        g_auto(GStrv) parts = g_strsplit(a, ",", -1);
        if (g_strv_contains((const char *const *)parts, opt))
            return true;
    }
    return false;
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
    return fs->reload_fd < 0 || fs->reload_stop < 0 ? -errno : 0;
}

static gpointer reload_loop(gpointer p)
{
    struct ckptfs *fs = p;
    struct pollfd fds[2] = {{fs->reload_fd, POLLIN, 0}, {fs->reload_stop, POLLIN, 0}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            g_warning("ckptfs: reload: poll: %s; SIGHUP is ignored from now on", g_strerror(errno));
            return NULL;
        }
        if (fds[1].revents)
            return NULL;
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
    fs->reload_fd = fs->reload_stop = -1;
}

/* What a request of the dead daemon took and the kernel never heard of,
 * given back as the request comes again (inflight.h); and the forgets it
 * read but had not applied. */
static void give_back(void *ctx, uint32_t kind, uint32_t slot, uint32_t count)
{
    struct ckptfs *fs = ctx;
    if (kind == INFLIGHT_HANDLE) {
        if (slot < STATE_HANDLE_SLOTS)
            handle_close(fs, (uint64_t)fs->state.handles[slot].generation << 32 | slot);
    } else if (kind == INFLIGHT_PROBE) {
        Node *n = slot > FUSE_ROOT_ID && slot < STATE_NODE_SLOTS ? fs->nodes.by_slot[slot] : NULL;
        if (n && kio_node_known(&fs->kio, node_ino(&fs->nodes, n)) == 0)
            node_forget_revived(fs, n);
    } else if (slot > FUSE_ROOT_ID && slot < STATE_NODE_SLOTS) {
        /* a reference taken for an unanswered request, or a forget read
         * and not applied */
        Node *n = fs->nodes.by_slot[slot];
        if (n)
            node_forget(fs, n, count);
    }
}

/* The nodes the kernel no longer holds: their FORGET was read by the daemon
 * that died (a forget is never sent again).  Asked of the kernel node by
 * node, before any request is read; a node an unanswered request took is
 * left to that request's give-back. */
static void drop_forgotten(struct ckptfs *fs)
{
    uint32_t high = atomic_load(&fs->state.hdr->node_high), dropped = 0;
    for (uint32_t i = FUSE_ROOT_ID + 1; i < high; i++) {
        Node *n = fs->nodes.by_slot[i];
        if (!n || inflight_adopted_holds(fs->kio.adopted, INFLIGHT_NODE, i) ||
            kio_node_known(&fs->kio, node_ino(&fs->nodes, n)) != 0)
            continue;
        handle_close_node(fs, i);
        node_forget_revived(fs, n);
        dropped++;
    }
    if (dropped)
        g_debug("ckptfs: %u nodes the kernel had forgotten, dropped", dropped);
}

int main(int argc, char *argv[])
{
    if (argc == 3 && strcmp(argv[1], "--takeover") == 0)
        return supervisor_takeover(argv[2]);
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct ckptfs fs;
    memset(&fs, 0, sizeof fs);
    fs.root_fd = fs.mount_fd = fs.reload_fd = fs.reload_stop = -1;
    fs.started_us = g_get_real_time();
    struct fuse_cmdline_opts c;
    memset(&c, 0, sizeof c);
    int rc = fs_options_parse(&args, &fs.opt);
    if (rc)
        goto out;
    if (fuse_parse_cmdline(&args, &c) != 0) {
        rc = 2;
        goto out;
    }
    bool daemonized = false;
    g_set_prgname("ckptfs"); /* log records say "ckptfs", not "process" */
    g_log_set_writer_func(log_writer, &daemonized, NULL);
    if (c.debug)
        g_log_set_debug_enabled(TRUE); /* -d: g_debug() too, as G_MESSAGES_DEBUG=all */
    if (c.show_help) {
        fs_options_help();
        fuse_cmdline_help();
        fuse_lowlevel_help();
        rc = 0;
        goto out;
    }
    if (c.show_version) {
        printf("ckptfs %s\nlibfuse %s\n", CKPTFS_VERSION, fuse_pkgversion());
        fflush(stdout); /* before fusermount3 --version writes its line */
        fuse_lowlevel_version();
        rc = 0;
        goto out;
    }
    /* -o supervise: on by default under systemd and in the background */
    bool supervise =
        fs.opt.supervise >= 0 ? fs.opt.supervise : (!c.foreground || g_getenv("INVOCATION_ID"));
    if (supervise && has_mount_option(&args, "auto_unmount")) {
        rc = setup_error(2, "%s%s",
                         "-o auto_unmount unmounts when the first daemon dies, which -o supervise "
                         "is there to outlive; give one of them (or -o nosupervise)",
                         "");
        goto out;
    }
    SupLink link;
    rc = supervisor_start(argv, supervise, c.foreground, &link);
    if (rc || (supervise && link.sock < 0))
        goto out; /* the supervisor's own exit status */
    rc = reload_signal_setup(&fs);
    if (rc) {
        rc = setup_error(1, "%s: %s", "SIGHUP", g_strerror(-rc));
        goto out;
    }
    link.handover = on_handover;
    link.ctx = &fs;
    fs.main_thread = link.main_thread;
    fs.supervised = link.sock >= 0;
    bool attach = link.fuse_fd >= 0;
    if (link.sock >= 0) {
        c.foreground = 1; /* the supervisor detached already, or stays in the foreground */
        daemonized = link.daemonized;
    }
    rc = setup(&fs, c.mountpoint, &link);
    if (rc)
        goto out;

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
        /* the kernel's connection, kept by the supervisor: no mount, no INIT */
        kio_replay_init(&fs.kio, fs.state.hdr->init, fs.state.hdr->init_len);
        kio_set_journal(&fs.kio, fs.state.inflight);
        rc = kio_attach(&fs.kio, fs.se, link.fuse_fd);
        if (rc == 0) {
            kio_adopt(&fs.kio, give_back, &fs); /* before any request is read */
            drop_forgotten(&fs);
        }
    } else if (fuse_session_mount(fs.se, fs.mountpoint) != 0) {
        rc = 1;
        goto out_signals;
    } else {
        kio_keep_init(&fs.kio, fs.state.hdr->init, &fs.state.hdr->init_len,
                      sizeof fs.state.hdr->init);
        if (fs.supervised) /* the journal is for a daemon that takes over */
            kio_set_journal(&fs.kio, fs.state.inflight);
        rc = kio_attach(&fs.kio, fs.se, fuse_session_fd(fs.se));
    }
    if (rc != 0) {
        fprintf(stderr, "ckptfs: custom I/O: %s\n", g_strerror(-rc));
        rc = 1;
        goto out_unmount;
    }
    if (!attach) {
        raise_readahead(fs.mountpoint);
        suplink_mounted(&link, fuse_session_fd(fs.se));
    }
    if (link.sock < 0) {
        fuse_daemonize(c.foreground);
        daemonized = !c.foreground;
    }
    if (views_start(&fs) != 0) /* threads: after the fork of fuse_daemonize */
        g_warning("ckptfs: views: cannot start the catalog threads");
    reload_start(&fs);
    if (link.sock < 0)
        sd_notify(0, "READY=1"); /* systemd Type=notify: the mount is up */
    suplink_ready(&link);        /* the supervisor tells systemd */
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
    if (atomic_load(&fs.handover)) {
        /* in-flight requests were answered; those read after the loop ended
         * the next daemon asks the kernel to resend.  The state stays as it
         * is for it: nothing is freed, nothing unmounted (a reload under
         * way finishes first). */
        reload_stop(&fs);
        views_stop(&fs);
        _exit(SUPERVISOR_EXIT_HANDOVER);
    }
    /* a session ended by SIGTERM or SIGINT is a clean unmount (SIGHUP
     * reloads: reload_loop) */
    rc = (rc == 0 || rc == SIGTERM || rc == SIGINT) ? 0 : 1;
    if (link.sock < 0)
        sd_notify(0, "STOPPING=1");
    reload_stop(&fs);
    views_stop(&fs); /* its notifier writes to the session: stop it first */
    if (attach)
        unmount_lazily(fs.mountpoint); /* libfuse has no mount of its own to unmount */
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
