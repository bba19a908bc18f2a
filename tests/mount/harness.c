#include "harness.h"

#include "mountrun.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

/* Mounts alive in this test process, and every Mount not freed yet, for
 * the atexit safety net. */
static GPtrArray *live_mounts, *made_mounts;
static pid_t harness_pid; /* a forked child that calls exit() cleans nothing */

/* How long an unmounted daemon may take to exit.  A sanitizer build's
 * daemon checks for leaks as it exits, with every thread stopped while it
 * scans its memory; on two busy CPUs that took more than 10 s. */
#define EXIT_MS 60000

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void at_exit_cleanup(void)
{
    if (getpid() != harness_pid)
        return;
    while (live_mounts && live_mounts->len) {
        Mount *m = live_mounts->pdata[live_mounts->len - 1];
        mount_stop(m);
        g_ptr_array_remove(live_mounts, m);
    }
    /* a test that failed after killing its daemon left the dead mount, and
     * one that failed after a takeover adopted its daemon left a live one
     * served by a process that is not this one's child: detached, its
     * daemon's connection ends and the process with it */
    for (guint i = 0; made_mounts && i < made_mounts->len; i++) {
        Mount *m = made_mounts->pdata[i];
        MountState st = mountrun_state(m->mnt);
        if (st == MOUNTRUN_DEAD || st == MOUNTRUN_LIVE)
            mountrun_fusermount(m->mnt, true, NULL);
        if (m->backing_tmpfs)
            umount2(m->backing, MNT_DETACH);
    }
}

int run_cmd(const char *const *argv, char **out)
{
    int status = -1;
    g_autoptr(GError) err = NULL;
    if (!g_spawn_sync(NULL, (char **)argv, NULL,
                      G_SPAWN_SEARCH_PATH | (out ? 0 : G_SPAWN_STDOUT_TO_DEV_NULL) |
                          G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, out, NULL, &status, &err))
        return -1;
    return status;
}

Mount *mount_new(void)
{
    Mount *m = g_new0(Mount, 1);
    g_autoptr(GError) err = NULL;
    m->base = g_dir_make_tmp("ckptfs-mount-XXXXXX", &err);
    g_assert_no_error(err);
    m->backing = g_build_filename(m->base, "backing", NULL);
    m->mnt = g_build_filename(m->base, "mnt", NULL);
    m->work = g_build_filename(m->mnt, "_state", "t", NULL);
    m->bwork = g_build_filename(m->backing, "_state", "t", NULL);
    m->log = g_build_filename(m->base, "daemon.log", NULL);
    g_assert_cmpint(g_mkdir_with_parents(m->bwork, 0755), ==, 0);
    g_assert_cmpint(g_mkdir(m->mnt, 0755), ==, 0);
    /* the base must be reachable by the unprivileged users of the permission tests */
    chmod(m->base, 0755);
    if (!made_mounts) {
        made_mounts = g_ptr_array_new();
        harness_pid = getpid();
        atexit(at_exit_cleanup);
    }
    g_ptr_array_add(made_mounts, m);
    return m;
}

int mount_backing_tmpfs(Mount *m, const char *opts)
{
    if (m->backing_tmpfs || m->pid)
        return -EBUSY; /* one tmpfs, under no daemon */
    g_autofree char *o = g_strconcat("mode=0755", opts ? "," : "", opts ? opts : "", NULL);
    if (mount("ckptfs-test", m->backing, "tmpfs", 0, o) != 0)
        return -errno;
    if (g_mkdir_with_parents(m->bwork, 0755) != 0) {
        int err = -errno;
        umount2(m->backing, MNT_DETACH);
        return err;
    }
    m->backing_tmpfs = true;
    return 0;
}

void mount_dump_log(Mount *m)
{
    g_autofree char *text = NULL;
    if (g_file_get_contents(m->log, &text, NULL, NULL) && *text)
        fprintf(stderr, "--- ckptfs log (%s) ---\n%s--- end of log ---\n", m->log, text);
}

/* Whether the -o values in argv (and the variant's) ask for the
 * supervisor: the last of "supervise" and "nosupervise" wins. */
static void note_supervise(Mount *m, const char *opts)
{
    g_auto(GStrv) v = g_strsplit(opts, ",", -1);
    for (char **o = v; *o; o++) {
        if (!strcmp(*o, "supervise"))
            m->supervised = true;
        else if (!strcmp(*o, "nosupervise"))
            m->supervised = false;
        else if (!strcmp(*o, "auto_unmount"))
            m->auto_unmount = true;
    }
}

/* The ring variants (CKPTFS_TEST_RING): a mount without a supervisor must
 * be served over io_uring where the fuse module offers it, never over
 * /dev/fuse in silence (auto_unmount stays on /dev/fuse, and says so).  A
 * kernel without it is said once. */
static int check_transport(Mount *m)
{
    const char *ring = g_getenv("CKPTFS_TEST_RING");
    if (!ring || !*ring || m->supervised || m->auto_unmount)
        return 0;
    g_autofree char *param = NULL;
    if (!g_file_get_contents("/sys/module/fuse/parameters/enable_uring", &param, NULL, NULL) ||
        param[0] != 'Y') {
        static bool said;
        if (!said)
            fprintf(stderr, "this kernel's fuse module offers no io_uring (enable_uring is not "
                            "Y): the ring variant runs over /dev/fuse\n");
        said = true;
        return 0;
    }
    g_autofree char *path = g_build_filename(m->mnt, "_views", ".metrics", NULL);
    /* the ring's entries go in just after INIT, the mount is up a moment
     * before: a few tries */
    for (int i = 0; i < 200; i++) {
        g_autofree char *text = NULL;
        if (!g_file_get_contents(path, &text, NULL, NULL))
            return 0; /* another views name: not this check's to find */
        if (strstr(text, "transport=\"io_uring\"} 1"))
            return 0;
        sleep_ms(10);
    }
    fprintf(stderr, "ring variant: the mount is served over /dev/fuse, not io_uring\n");
    mount_dump_log(m);
    mount_stop(m);
    return -1;
}

int mount_start(Mount *m, const char *const *args)
{
    const char *bin = g_getenv("CKPTFS_BIN");
    g_assert_nonnull(bin);
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)bin);
    g_ptr_array_add(argv, "-f");
    /* the log must reach m->log: where the default would be the journal or
     * syslog, stderr is asked for (before the test's own options: a log=
     * among them wins) */
    struct stat sock;
    if (stat("/run/systemd/journal/socket", &sock) == 0 || stat("/dev/log", &sock) == 0) {
        g_ptr_array_add(argv, "-o");
        g_ptr_array_add(argv, "log=stderr");
    }
    for (size_t i = 0; args && args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    /* the suites run once per kernel data path (meson: mount and mount-nopt) */
    const char *variant = g_getenv("CKPTFS_TEST_OPTS");
    if (variant && *variant) {
        g_ptr_array_add(argv, "-o");
        g_ptr_array_add(argv, (gpointer)variant);
    }
    g_ptr_array_add(argv, m->backing);
    g_ptr_array_add(argv, m->mnt);
    g_ptr_array_add(argv, NULL);
    m->supervised = m->auto_unmount = false;
    for (guint i = 1; i + 1 < argv->len; i++) {
        const char *a = argv->pdata[i];
        if (!strcmp(a, "-o") && argv->pdata[i + 1])
            note_supervise(m, argv->pdata[i + 1]);
        else if (!strncmp(a, "-o", 2) && a[2])
            note_supervise(m, a + 2);
    }

    GPtrArray *cmd = g_ptr_array_new();
    for (size_t i = 0; m->launcher && m->launcher[i]; i++)
        g_ptr_array_add(cmd, (gpointer)m->launcher[i]);
    for (guint i = 0; i < argv->len; i++)
        g_ptr_array_add(cmd, argv->pdata[i]);

    int logfd = open(m->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    g_assert_cmpint(logfd, >=, 0);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        /* a test process that dies without teardown takes its daemon along
         * (SIGTERM: the daemon unmounts cleanly) */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(logfd, 2);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        if (m->nofile > 0) {
            struct rlimit rl = {(rlim_t)m->nofile, (rlim_t)m->nofile};
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (m->launcher)
            execvp(cmd->pdata[0], (char **)cmd->pdata);
        else
            execv(bin, (char **)argv->pdata);
        _exit(127);
    }
    close(logfd);
    g_ptr_array_free(cmd, TRUE);
    g_ptr_array_free(argv, TRUE);
    m->pid = pid;
    if (!live_mounts)
        live_mounts = g_ptr_array_new();
    if (!g_ptr_array_find(live_mounts, m, NULL))
        g_ptr_array_add(live_mounts, m);

    /* ASan start-up can take a while on a loaded machine (30 s in all);
     * polled often, since most mounts are up within milliseconds */
    MountRun run = {pid, m->mnt, NULL, NULL, m};
    int status;
    switch (mountrun_wait_up(&run, 30000, 5000, &status)) {
    case MOUNTRUN_UP:
        return check_transport(m);
    case MOUNTRUN_EXITED:
        m->pid = 0;
        m->exit_status = status;
        g_ptr_array_remove(live_mounts, m);
        mount_dump_log(m);
        return -1;
    default:
        mount_dump_log(m);
        mount_stop(m);
        return -1;
    }
}

pid_t mount_daemon_pid(Mount *m)
{
    if (!m->pid)
        return 0;
    if (!m->supervised)
        return m->pid;
    /* one live child; while a takeover hands over there may be two for a
     * moment: the newest (listed last) after 2 s */
    pid_t newest = 0;
    for (int i = 0; i < 400; i++) { /* 2 s */
        pid_t c[8];
        int n = mountrun_children(m->pid, c, 8);
        if (n == 1)
            return c[0];
        if (n > 1)
            newest = c[n - 1];
        else if (mountrun_proc_state(m->pid) == 0 || mountrun_proc_state(m->pid) == 'Z')
            return 0;
        sleep_ms(5);
    }
    return newest;
}

/* The text of a log line at level warning or error ("ckptfs[PID]: LEVEL:
 * text", log.h), or NULL. */
static const char *complaint(const char *line)
{
    if (!g_str_has_prefix(line, "ckptfs["))
        return NULL;
    const char *p = line + strlen("ckptfs[");
    while (g_ascii_isdigit(*p))
        p++;
    if (g_str_has_prefix(p, "]: warning: "))
        return p + strlen("]: warning: ");
    if (g_str_has_prefix(p, "]: error: "))
        return p + strlen("]: error: ");
    return NULL;
}

/* Lines of the daemon log that report a problem: warnings and errors,
 * sanitizer reports.  Each must contain a text the test expects. */
static bool unexpected_warnings(Mount *m)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(m->log, &text, NULL, NULL))
        return false;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    bool bad = false;
    for (char **l = lines; *l; l++) {
        /* a supervised daemon's sanitizer report need not reach the
         * supervisor's exit status: the log is checked instead */
        bool sanitizer = m->supervised && (strstr(*l, "ERROR: AddressSanitizer") ||
                                           strstr(*l, "ERROR: LeakSanitizer"));
        const char *said = complaint(*l);
        if (!said && !strstr(*l, "runtime error:") && !sanitizer)
            continue;
        /* collision records are warnings by design */
        if (said &&
            (g_str_has_prefix(said, "collision ") || strstr(said, "collision(s) not logged")))
            continue;
        bool expected = false;
        for (guint i = 0; m->expected_log && i < m->expected_log->len && !expected; i++)
            expected = strstr(*l, m->expected_log->pdata[i]) != NULL;
        if (!expected) {
            fprintf(stderr, "daemon logged what the test did not expect: %s\n", *l);
            bad = true;
        }
    }
    if (bad)
        mount_dump_log(m);
    return bad;
}

/* The mount was still busy when its time ran out: it is detached. */
static void say_busy(void *data, const char *err)
{
    Mount *m = data;
    fprintf(stderr, "%s: still busy after 2 s (%s): unmounted lazily\n", m->mnt, err ? err : "");
}

/* A daemon that did not exit in time, about to be killed: where each of
 * its threads waits in the kernel, for whoever reads the failure. */
static void say_stuck(pid_t pid)
{
    fprintf(stderr, "daemon %d: not gone %d s after the unmount: killed; its threads:\n", (int)pid,
            EXIT_MS / 1000);
    g_autofree char *dir = g_strdup_printf("/proc/%d/task", (int)pid);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    for (const char *t; d && (t = g_dir_read_name(d));) {
        g_autofree char *comm = NULL, *stack = NULL;
        g_autofree char *cp = g_strdup_printf("%s/%s/comm", dir, t);
        g_autofree char *sp = g_strdup_printf("%s/%s/stack", dir, t);
        g_file_get_contents(cp, &comm, NULL, NULL);
        g_file_get_contents(sp, &stack, NULL, NULL);
        fprintf(stderr, "  thread %s %s%s", t, comm ? g_strstrip(comm) : "?",
                stack ? "\n" : " (no stack)\n");
        if (stack)
            fputs(stack, stderr);
    }
}

/* A mount whose daemon must be killed; a supervised one: the supervisor
 * first, so that it starts no new daemon, then its daemons. */
static void kill_stuck(void *data)
{
    Mount *m = data;
    say_stuck(m->pid);
    if (!m->supervised)
        return;
    pid_t now[8];
    int n = mountrun_children(m->pid, now, 8);
    kill(m->pid, SIGKILL);
    for (int i = 0; i < n; i++)
        kill(now[i], SIGKILL);
}

/* Waits for a daemon other than `old` (the supervisor's only live child);
 * 0 when none came. */
static pid_t wait_new_daemon(Mount *m, pid_t old)
{
    for (int waited = 0; waited < 20000; waited += 10) {
        pid_t d = mount_daemon_pid(m);
        if (d > 0 && d != old && d != m->pid)
            return d;
        sleep_ms(10);
    }
    return 0;
}

pid_t mount_replace_daemon(Mount *m, DaemonEvent ev, GString *err)
{
    pid_t d = mount_daemon_pid(m);
    if (d <= 0 || d == m->pid) {
        g_string_append_printf(err, "no daemon child of supervisor %d\n", (int)m->pid);
        return 0;
    }
    if (ev == DAEMON_KILL) {
        /* the supervisor reports a daemon that died, as it should */
        mount_expect_log(m, "supervisor: the daemon (pid");
        if (kill(d, SIGKILL) != 0) {
            g_string_append_printf(err, "kill %d: %s\n", (int)d, g_strerror(errno));
            return 0;
        }
    } else {
        const char *argv[] = {g_getenv("CKPTFS_BIN"), "--takeover", m->mnt, NULL};
        g_autofree char *out = NULL, *errtext = NULL;
        int status = -1;
        g_autoptr(GError) gerr = NULL;
        if (!g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL, &out, &errtext, &status,
                          &gerr)) {
            g_string_append_printf(err, "cannot run --takeover: %s\n", gerr->message);
            return 0;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            g_string_append_printf(err, "ckptfs --takeover %s: status %d, stderr: %s\n", m->mnt,
                                   status, errtext ? errtext : "");
            return 0;
        }
    }
    pid_t nd = wait_new_daemon(m, d);
    if (!nd)
        g_string_append_printf(err, "no new daemon after %s of %d (supervisor %d %s)\n",
                               ev == DAEMON_KILL ? "kill -9" : "--takeover", (int)d, (int)m->pid,
                               kill(m->pid, 0) == 0 ? "alive" : "gone");
    return nd;
}

int mount_stop(Mount *m)
{
    if (!m->pid)
        return m->exit_status == 0 ? 0 : -1;
    /* a supervised mount's daemons, alive now: they must be gone once the
     * supervisor is (it reaps its child before it exits) */
    pid_t daemons[8];
    int ndaemons = m->supervised ? mountrun_children(m->pid, daemons, 8) : 0;
    /* busy for 2 s at most (a test process may still be closing files),
     * then EXIT_MS to exit; else killed at once */
    MountRun run = {m->pid, m->mnt, NULL, NULL, m};
    MountStop how = {.busy_ms = 2000,
                     .exit_ms = EXIT_MS,
                     .term_ms = 0,
                     .on_busy = say_busy,
                     .on_kill = kill_stuck};
    int status;
    bool reaped = mountrun_stop(&run, &how, &status);
    if (!reaped) {
        for (int i = 0; i < ndaemons; i++)
            kill(daemons[i], SIGKILL);
        status = -1;
    }
    bool orphans = false;
    for (int i = 0; reaped && i < ndaemons; i++) {
        int j = 0;
        char st;
        while ((st = mountrun_proc_state(daemons[i])) && st != 'Z' && j++ < 200) /* 2 s */
            sleep_ms(10);
        if (st && st != 'Z') {
            fprintf(stderr, "daemon %d outlived its supervisor %d: killed\n", (int)daemons[i],
                    (int)m->pid);
            kill(daemons[i], SIGKILL);
            orphans = true;
        }
    }
    if (orphans && status == 0)
        status = -1;
    m->pid = 0;
    m->exit_status = status;
    if (live_mounts)
        g_ptr_array_remove(live_mounts, m);
    if (status != 0) {
        if (reaped && !orphans)
            fprintf(stderr, "daemon ended with wait status %#x\n", (unsigned)status);
        mount_dump_log(m);
        return -1;
    }
    return unexpected_warnings(m) ? -1 : 0;
}

void mount_expect_log(Mount *m, const char *text)
{
    if (!m->expected_log)
        m->expected_log = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(m->expected_log, g_strdup(text));
}

bool mount_log_has(Mount *m, const char *text)
{
    g_autofree char *log = get_file(m->log);
    return log && strstr(log, text);
}

void mount_free(Mount *m)
{
    if (!m)
        return;
    mount_stop(m);
    if (live_mounts)
        g_ptr_array_remove(live_mounts, m);
    g_ptr_array_remove(made_mounts, m);
    if (m->backing_tmpfs)
        umount2(m->backing, MNT_DETACH);
    const char *rm[] = {"rm", "-rf", "--one-file-system", m->base, NULL};
    run_cmd(rm, NULL);
    g_free(m->base);
    g_free(m->backing);
    g_free(m->mnt);
    g_free(m->work);
    g_free(m->bwork);
    g_free(m->log);
    if (m->expected_log)
        g_ptr_array_unref(m->expected_log);
    g_free(m);
}

char *mp(Mount *m, const char *rel)
{
    return g_build_filename(m->work, rel, NULL);
}

char *bp(Mount *m, const char *rel)
{
    return g_build_filename(m->bwork, rel, NULL);
}

void put_file(const char *path, const char *data)
{
    g_autoptr(GError) err = NULL;
    g_file_set_contents_full(path, data, -1, G_FILE_SET_CONTENTS_NONE, 0644, &err);
    g_assert_no_error(err);
}

int dir_entries(const char *dir, bool stat_each)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (stat_each)
            assert_int_equal(fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
        n++;
    }
    closedir(d);
    return n;
}

int mount_daemon_fds(Mount *m)
{
    int pipes = 0, n = mountrun_count_fds(m->pid, &pipes);
    return n < 0 ? n : n + pipes;
}

char *get_file(const char *path)
{
    char *text = NULL;
    g_autoptr(GError) err = NULL;
    g_file_get_contents(path, &text, NULL, &err);
    g_assert_no_error(err);
    return text;
}

int64_t mount_metric(Mount *m, const char *series)
{
    g_autofree char *path = g_build_filename(m->mnt, "_views", ".metrics", NULL);
    g_autofree char *text = get_file(path);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    /* every series carries the mount="<mount point>" label first */
    char *real = realpath(m->mnt, NULL);
    const char *brace = strchr(series, '{');
    g_autofree char *full = brace
                                ? g_strdup_printf("%.*s{mount=\"%s\",%s", (int)(brace - series),
                                                  series, real ? real : m->mnt, brace + 1)
                                : g_strdup_printf("%s{mount=\"%s\"}", series, real ? real : m->mnt);
    free(real);
    size_t n = strlen(full);
    for (char **l = lines; *l; l++) {
        if (strncmp(*l, full, n) == 0 && (*l)[n] == ' ')
            return g_ascii_strtoll(*l + n + 1, NULL, 10);
    }
    return -1;
}

/* One lock file for every test process of the machine, as the caches
 * are (in /run: only root drops caches, and no other user's file there can
 * refuse root's open); this process's hold, -1: none. */
static int caches_held = -1;

static int caches_lock(int how)
{
    if (caches_held >= 0)
        fail_msg("the caches dropped or held again while this test holds them");
    int fd = open("/run/ckptfs-test-caches.lock", O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    while (flock(fd, how) != 0)
        assert_int_equal(errno, EINTR);
    return fd;
}

void caches_hold(void)
{
    caches_held = caches_lock(LOCK_SH);
}

void caches_release(void)
{
    if (caches_held >= 0)
        close(caches_held);
    caches_held = -1;
}

int caches_teardown(void **state)
{
    (void)state;
    caches_release();
    return 0;
}

void kernel_drop_caches(void)
{
    sync();
    int lock = caches_lock(LOCK_EX);
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? write(fd, "2", 1) : -1;
    if (fd >= 0)
        close(fd);
    close(lock);
    assert_int_equal(n, 1);
}

int64_t mount_forget_down_to(Mount *m, int64_t at_most, int tries)
{
    int64_t nodes = -1;
    for (int i = 0; i < tries; i++) {
        kernel_drop_caches();
        nodes = mount_metric(m, "ckptfs_nodes");
        if (nodes >= 0 && nodes <= at_most)
            break;
        sleep_ms(100);
    }
    return nodes;
}

int mount_setup(void **state)
{
    Mount *m = mount_new();
    if (mount_start(m, NULL) != 0) {
        mount_free(m);
        return -1;
    }
    *state = m;
    return 0;
}

int mount_teardown(void **state)
{
    Mount *m = *state;
    int rc = mount_stop(m);
    mount_free(m);
    return rc;
}
