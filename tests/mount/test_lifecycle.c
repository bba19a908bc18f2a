/* The daemon's life as an operator lives it, on supervised mounts: a
 * takeover (what `systemctl reload` runs) with a broken config leaves the
 * running daemon serving; SIGHUP to the supervisor reloads, the mount stays;
 * new options apply at a takeover and those the kernel fixed are named; relative paths work in the
 * background; both processes are named ckptfs and titled by role; a daemon whose supervisor died is
 * adopted by a takeover; a daemon that cannot start makes requests fail with EIO instead of
 * hanging, and a takeover resumes the mount; a failed background start leaves no zombie; the
 * takeover socket survives quick remounts; the command line of --takeover is checked.
 *
 * No duration is asserted: the waits are bounded only so that a hang fails
 * the test instead of the suite's timeout. */
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>
#include <json-glib/json-glib.h>

#include "harness.h"
#include "mountrun.h"

#define WAIT_MS 20000 /* hang detection only */

static void sleep_ms(int ms)
{
    g_usleep((gulong)ms * 1000);
}

/* Runs the ckptfs binary with args in dir (NULL: here); stderr in *err. */
static int run_ckptfs_in(const char *dir, const char *const *args, char **err)
{
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)g_getenv("CKPTFS_BIN"));
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    int status = -1;
    g_autoptr(GError) gerr = NULL;
    gboolean ok = g_spawn_sync(dir, (char **)argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                               NULL, NULL, err, &status, &gerr);
    g_ptr_array_free(argv, TRUE);
    assert_true(ok);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* opts and the suite's variant (the data path), as one -o string (g_free). */
static char *with_variant(const char *opts)
{
    const char *v = g_getenv("CKPTFS_TEST_OPTS");
    return v && *v ? g_strconcat(opts, ",", v, NULL) : g_strdup(opts);
}

static int takeover(Mount *m, const char *opts, char **err)
{
    g_autofree char *all = opts ? with_variant(opts) : NULL;
    const char *with[] = {"--takeover", m->mnt, "-o", all, NULL};
    const char *without[] = {"--takeover", m->mnt, NULL};
    return run_ckptfs_in(NULL, opts ? with : without, err);
}

/* The pid whose title (cmdline) is exactly `title`, or 0. */
static pid_t titled(const char *fmt, const char *mnt)
{
    g_autofree char *title = g_strdup_printf(fmt, mnt);
    GDir *d = g_dir_open("/proc", 0, NULL);
    pid_t found = 0;
    for (const char *e; d && !found && (e = g_dir_read_name(d));) {
        if (!g_ascii_isdigit(*e))
            continue;
        g_autofree char *p = g_build_filename("/proc", e, "cmdline", NULL);
        g_autofree char *cmd = NULL;
        if (g_file_get_contents(p, &cmd, NULL, NULL) && strcmp(cmd, title) == 0 &&
            mountrun_proc_state((pid_t)atoi(e)) != 'Z')
            found = (pid_t)atoi(e);
    }
    if (d)
        g_dir_close(d);
    return found;
}

static char *comm_of(pid_t pid)
{
    g_autofree char *p = g_strdup_printf("/proc/%d/comm", (int)pid);
    char *c = NULL;
    if (!g_file_get_contents(p, &c, NULL, NULL))
        return g_strdup("");
    return g_strchomp(c);
}

/* A config file rewritten as an operator's editor does (whole, by rename). */
static void put_config(const char *path, const char *text)
{
    g_autoptr(GError) err = NULL;
    g_file_set_contents(path, text, -1, &err);
    g_assert_no_error(err);
}

/* ckptctl status [--json] MNT: exit status, stdout in *out. */
static int status_of(const char *mnt, bool json, char **out)
{
    const char *argv[] = {g_getenv("CKPTCTL_BIN"), "status", json ? "--json" : mnt,
                          json ? mnt : NULL, NULL};
    int status = run_cmd(argv, out);
    assert_true(WIFEXITED(status));
    /* an unhealthy mount (some tests want one): what made it so, in the log */
    if (WEXITSTATUS(status) == 1 && out && *out)
        fprintf(stderr, "ckptctl status (exit 1): %s\n", *out);
    return WEXITSTATUS(status);
}

/* A file written and read back through the mount. */
static void assert_serves(Mount *m, const char *name)
{
    g_autofree char *path = mp(m, name);
    put_file(path, name);
    g_autofree char *back = get_file(path);
    assert_string_equal(back, name);
    g_autofree char *bpath = bp(m, name);
    assert_true(g_file_test(bpath, G_FILE_TEST_EXISTS));
}

static char *control_value(Mount *m, const char *key)
{
    g_autofree char *control = g_build_filename(m->mnt, "_views", ".control", NULL);
    g_autofree char *name = g_strconcat("user.ckptfs.", key, NULL);
    char buf[256];
    ssize_t n = getxattr(control, name, buf, sizeof buf - 1);
    assert_true(n >= 0);
    return g_strndup(buf, (gsize)n);
}

/* Waits for the background mount at mnt to go after an unmount: its
 * supervisor ends (it is no child of the test). */
static void unmount_background(const char *mnt)
{
    pid_t sup = titled("ckptfs: supervisor %s", mnt);
    if (!mountrun_fusermount(mnt, false, NULL))
        assert_true(mountrun_fusermount(mnt, true, NULL));
    for (int i = 0;
         sup && i < WAIT_MS / 10 && mountrun_proc_state(sup) && mountrun_proc_state(sup) != 'Z';
         i++)
        sleep_ms(10);
}

static Mount *supervised(const char *opts)
{
    Mount *m = mount_new();
    const char *with[] = {"-o", "supervise", "-o", opts, NULL};
    const char *without[] = {"-o", "supervise", NULL};
    assert_int_equal(mount_start(m, opts ? with : without), 0);
    return m;
}

/* ---- a takeover with a broken config ---- */

typedef struct {
    Mount *m;
    gint stop, writes, failures;
} Writer;

static gpointer writer(gpointer p)
{
    Writer *w = p;
    g_autofree char *path = mp(w->m, "busy");
    while (!g_atomic_int_get(&w->stop)) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "x", 1) != 1 || fsync(fd) != 0)
            g_atomic_int_inc(&w->failures);
        if (fd >= 0)
            close(fd);
        g_atomic_int_inc(&w->writes);
    }
    return NULL;
}

static void test_takeover_with_broken_config_keeps_serving(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    put_config(cfg, "[ckptfs]\npolicy=enforce\n");
    g_autofree char *opt = g_strconcat("config=", cfg, NULL);
    const char *args[] = {"-o", "supervise", "-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    pid_t before = mount_daemon_pid(m);
    put_config(cfg, "[ckptfs]\npolicy=enforce\nbogus=1\n");
    Writer w = {.m = m};
    GThread *t = g_thread_new("writer", writer, &w);
    while (g_atomic_int_get(&w.writes) < 5)
        sleep_ms(5);
    g_autofree char *err = NULL;
    int rc = takeover(m, NULL, &err);
    int at = g_atomic_int_get(&w.writes);
    while (g_atomic_int_get(&w.writes) < at + 5)
        sleep_ms(5);
    g_atomic_int_set(&w.stop, 1);
    g_thread_join(t);
    if (rc != 2)
        fprintf(stderr, "--takeover: exit %d: %s", rc, err);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "unknown key bogus")); /* the real message */
    assert_int_equal(g_atomic_int_get(&w.failures), 0);
    assert_int_equal(mount_daemon_pid(m), before); /* nothing was killed */
    assert_serves(m, "after-refused-takeover");
    /* fixed, the same takeover goes through */
    put_config(cfg, "[ckptfs]\npolicy=audit\n");
    g_free(err);
    err = NULL;
    rc = takeover(m, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "--takeover: exit %d: %s", rc, err);
    assert_int_equal(rc, 0);
    assert_int_not_equal(mount_daemon_pid(m), before);
    g_autofree char *policy = control_value(m, "policy");
    assert_string_equal(policy, "audit"); /* the new config is read by the new daemon */
    assert_serves(m, "after-takeover");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A takeover whose backing directory is no longer the one mounted (moved
 * and replaced) is refused by the standby daemon, before the running one
 * hands over: it goes on serving the directory it has. */
static void test_takeover_of_a_replaced_backing_dir_keeps_serving(void **state)
{
    (void)state;
    Mount *m = supervised(NULL);
    assert_serves(m, "before");
    pid_t before = mount_daemon_pid(m);
    g_autofree char *moved = g_strconcat(m->backing, ".moved", NULL);
    assert_int_equal(rename(m->backing, moved), 0);
    assert_int_equal(mkdir(m->backing, 0755), 0);
    g_autofree char *err = NULL;
    int rc = takeover(m, NULL, &err);
    if (rc != 1)
        fprintf(stderr, "--takeover: exit %d: %s", rc, err);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "no longer the directory this mount was made of"));
    assert_int_equal(mount_daemon_pid(m), before);
    /* it serves the directory it was made of */
    g_autofree char *path = mp(m, "after-refused-takeover");
    put_file(path, "still");
    g_autofree char *back = get_file(path);
    assert_string_equal(back, "still");
    g_autofree char *in_moved =
        g_build_filename(moved, "_state", "t", "after-refused-takeover", NULL);
    assert_true(g_file_test(in_moved, G_FILE_TEST_EXISTS));
    assert_int_equal(rmdir(m->backing), 0);
    assert_int_equal(rename(moved, m->backing), 0);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ---- SIGHUP to the supervisor ---- */

static void test_sighup_to_supervisor_reloads_and_keeps_mount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    put_config(cfg, "[ckptfs]\npolicy=enforce\n");
    g_autofree char *opt = g_strconcat("config=", cfg, NULL);
    const char *args[] = {"-o", "supervise", "-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    pid_t daemon = mount_daemon_pid(m);
    put_config(cfg, "[ckptfs]\npolicy=audit\n");
    assert_int_equal(kill(m->pid, SIGHUP), 0);
    g_autofree char *policy = NULL;
    for (int i = 0; i < WAIT_MS / 10; i++) {
        g_free(policy);
        policy = control_value(m, "policy");
        if (strcmp(policy, "audit") == 0)
            break;
        sleep_ms(10);
    }
    assert_string_equal(policy, "audit"); /* the daemon reloaded its config */
    assert_int_equal(mountrun_state(m->mnt), MOUNTRUN_LIVE);
    assert_int_equal(mount_daemon_pid(m), daemon);
    assert_serves(m, "after-sighup");
    /* still supervised: a kill -9 afterwards is survived */
    mount_expect_log(m, "a new one takes the connection over");
    kill(daemon, SIGKILL);
    pid_t next = 0;
    for (int i = 0; i < WAIT_MS / 10 && (!(next = mount_daemon_pid(m)) || next == daemon); i++)
        sleep_ms(10);
    assert_int_not_equal(next, daemon);
    assert_serves(m, "after-kill");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ---- new options at a takeover ---- */

static void test_takeover_options_apply_and_fixed_ones_are_named(void **state)
{
    (void)state;
    Mount *m = supervised("policy=enforce");
    g_autofree char *err = NULL;
    /* -o replaces the mount's options: the supervise of the command line
     * stays (it is not an -o of this one), policy changes */
    assert_int_equal(takeover(m, "supervise,policy=audit", &err), 0);
    g_autofree char *policy = control_value(m, "policy");
    assert_string_equal(policy, "audit");
    /* a setting changed live is kept by a takeover without options, and by
     * one whose options leave it as they were (systemctl reload always
     * gives the env file's options); a takeover whose options change it
     * applies them */
    g_autofree char *control = g_build_filename(m->mnt, "_views", ".control", NULL);
    assert_int_equal(setxattr(control, "user.ckptfs.legacy", "rw", 2, 0), 0);
    assert_int_equal(setxattr(control, "user.ckptfs.policy", "enforce", 7, 0), 0);
    g_free(err);
    err = NULL;
    assert_int_equal(takeover(m, NULL, &err), 0);
    g_autofree char *legacy = control_value(m, "legacy");
    assert_string_equal(legacy, "rw");
    g_free(err);
    err = NULL;
    assert_int_equal(takeover(m, "supervise,policy=audit", &err), 0);
    g_free(legacy);
    legacy = control_value(m, "legacy");
    assert_string_equal(legacy, "rw");
    g_free(policy);
    policy = control_value(m, "policy");
    assert_string_equal(policy, "enforce");
    g_free(err);
    err = NULL;
    assert_int_equal(takeover(m, "supervise,policy=audit,legacy=rw,rescan=5", &err), 0);
    g_free(legacy);
    legacy = control_value(m, "legacy");
    assert_string_equal(legacy, "rw");
    g_autofree char *rescan = control_value(m, "rescan");
    assert_string_equal(rescan, "5");
    g_free(err);
    err = NULL;
    assert_int_equal(takeover(m, "supervise,policy=enforce,rescan=5", &err), 0);
    g_free(legacy);
    legacy = control_value(m, "legacy");
    assert_string_equal(legacy, "ro");
    g_free(policy);
    policy = control_value(m, "policy");
    assert_string_equal(policy, "enforce");
    /* the views name is the kernel's now: kept, and said so */
    mount_expect_log(m, "change only with a remount");
    g_free(err);
    err = NULL;
    assert_int_equal(takeover(m, "supervise,views=other", &err), 0);
    assert_non_null(strstr(err, "need a remount"));
    assert_non_null(strstr(err, "views"));
    g_autofree char *views = g_build_filename(m->mnt, "_views", NULL);
    assert_true(g_file_test(views, G_FILE_TEST_IS_DIR));
    /* a bad option is refused by the requester, the mount untouched */
    pid_t before = mount_daemon_pid(m);
    g_free(err);
    err = NULL;
    assert_int_equal(takeover(m, "supervise,policy=bogus", &err), 2);
    assert_non_null(strstr(err, "policy=bogus"));
    assert_int_equal(mount_daemon_pid(m), before);
    /* so is one only libfuse knows to refuse, in one line */
    g_free(err);
    err = NULL;
    assert_int_equal(takeover(m, "supervise,rescan=3,nosuchopt", &err), 2);
    const char *unknown = strstr(err, "unknown option");
    assert_non_null(unknown);
    const char *named = strstr(unknown, "nosuchopt");
    assert_non_null(named);
    assert_null(memchr(unknown, '\n', (size_t)(named - unknown)));
    assert_int_equal(mount_daemon_pid(m), before);
    assert_serves(m, "still");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ---- relative paths, background ---- */

static void test_relative_paths_in_the_background(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *conf = g_build_filename(m->base, "rel.conf", NULL);
    put_config(conf, "[ckptfs]\npolicy=audit\n");
    /* cd base; ckptfs -o config=rel.conf backing mnt: the supervisor runs
     * its daemon from /, the paths must still mean what they meant here */
    g_autofree char *opts = with_variant("config=rel.conf");
    const char *args[] = {"-o", opts, "backing", "mnt", NULL};
    g_autofree char *err = NULL;
    int rc = run_ckptfs_in(m->base, args, &err);
    if (rc != 0)
        fprintf(stderr, "ckptfs: exit %d: %s", rc, err);
    assert_int_equal(rc, 0);
    assert_int_equal(mountrun_state(m->mnt), MOUNTRUN_LIVE);
    g_autofree char *policy = control_value(m, "policy");
    assert_string_equal(policy, "audit");
    assert_serves(m, "background");
    /* both processes are named ckptfs and titled by their role */
    pid_t sup = titled("ckptfs: supervisor %s", m->mnt);
    pid_t daemon = titled("ckptfs: serving %s", m->mnt);
    assert_true(sup > 0);
    assert_true(daemon > 0);
    g_autofree char *c1 = comm_of(sup);
    g_autofree char *c2 = comm_of(daemon);
    assert_string_equal(c1, "ckptfs");
    assert_string_equal(c2, "ckptfs");
    const char *pgrep[] = {"pgrep", "-x", "ckptfs", NULL};
    g_autofree char *out = NULL;
    assert_int_equal(run_cmd(pgrep, &out), 0);
    g_autofree char *s1 = g_strdup_printf("%d\n", (int)sup);
    g_autofree char *s2 = g_strdup_printf("%d\n", (int)daemon);
    assert_non_null(strstr(out, s1));
    assert_non_null(strstr(out, s2));
    unmount_background(m->mnt);
    mount_free(m);
}

/* ---- a daemon whose supervisor died ---- */

static void test_orphaned_daemon_is_adopted_by_a_takeover(void **state)
{
    (void)state;
    Mount *m = supervised(NULL);
    mount_expect_log(m, "the supervisor is gone");
    /* a file without a name, held by the supervisor that dies: the orphan
     * hands it to its adopter, and it outlives the daemons after */
    int nameless = open(m->work, O_TMPFILE | O_RDWR, 0600);
    assert_true(nameless >= 0);
    assert_int_equal(pwrite(nameless, "held", 4, 0), 4);
    pid_t orphan = mount_daemon_pid(m);
    kill(m->pid, SIGKILL);
    waitpid(m->pid, NULL, 0);
    m->pid = 0; /* the harness's supervisor is gone; the mount is the orphan's */
    assert_serves(m, "orphan-serves");
    /* and two that lose their names while no supervisor runs: a file
     * unlinked while open, and one made without a name */
    g_autofree char *gone_path = g_build_filename(m->work, "unlinked-orphaned", NULL);
    int gone = open(gone_path, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(gone >= 0);
    assert_int_equal(pwrite(gone, "gone", 4, 0), 4);
    assert_int_equal(unlink(gone_path), 0);
    int late = open(m->work, O_TMPFILE | O_RDWR, 0600);
    assert_true(late >= 0);
    assert_int_equal(pwrite(late, "late", 4, 0), 4);
    g_autofree char *err = NULL;
    int rc = takeover(m, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "--takeover: exit %d: %s", rc, err);
    assert_int_equal(rc, 0);
    pid_t sup = titled("ckptfs: supervisor %s", m->mnt);
    assert_true(sup > 0);
    pid_t daemon = 0;
    for (int i = 0; i < WAIT_MS / 10 && !(daemon = titled("ckptfs: serving %s", m->mnt)); i++)
        sleep_ms(10);
    assert_true(daemon > 0 && daemon != orphan);
    assert_serves(m, "adopted");
    /* supervised again: a kill -9 of the daemon is survived */
    kill(daemon, SIGKILL);
    pid_t next = 0;
    for (int i = 0; i < WAIT_MS / 10; i++) {
        next = titled("ckptfs: serving %s", m->mnt);
        if (next && next != daemon)
            break;
        sleep_ms(10);
    }
    assert_true(next > 0 && next != daemon);
    assert_serves(m, "after-kill");
    char buf[8] = {0};
    if (pread(nameless, buf, sizeof buf - 1, 0) != 4)
        fail_msg("a file without a name after the adoption and a kill: %s", g_strerror(errno));
    assert_string_equal(buf, "held");
    assert_int_equal(fsync(nameless), 0);
    close(nameless);
    const int fds[] = {gone, late};
    const char *want[] = {"gone", "late"};
    for (int i = 0; i < 2; i++) {
        memset(buf, 0, sizeof buf);
        if (pread(fds[i], buf, sizeof buf - 1, 0) != 4)
            fail_msg("%s: a file that lost its name while no supervisor ran, after the "
                     "adoption and a kill: %s",
                     want[i], g_strerror(errno));
        assert_string_equal(buf, want[i]);
        struct stat st;
        assert_int_equal(fstat(fds[i], &st), 0);
        assert_int_equal(st.st_nlink, 0);
        close(fds[i]);
    }
    unmount_background(m->mnt);
    mount_free(m);
}

/* ---- a daemon that cannot start ---- */

static void test_daemon_that_cannot_start_fails_requests_with_eio(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    put_config(cfg, "[ckptfs]\npolicy=enforce\n");
    g_autofree char *opt = g_strconcat("config=", cfg, NULL);
    const char *args[] = {"-o", "supervise", "-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    mount_expect_log(m, "giving up");
    mount_expect_log(m, "a new one takes the connection over");
    put_config(cfg, "[ckptfs]\nbogus=1\n");
    kill(mount_daemon_pid(m), SIGKILL);
    /* every new daemon refuses the config: after a few tries the
     * supervisor answers with EIO instead of leaving requests to wait */
    g_autofree char *path = mp(m, "x");
    int err = 0;
    for (int i = 0; i < WAIT_MS / 100; i++) {
        struct stat st;
        err = stat(path, &st) == 0 ? 0 : errno;
        if (err == EIO)
            break;
        sleep_ms(100);
    }
    assert_int_equal(err, EIO);
    assert_true(mount_log_has(m, "a new one takes the connection over"));
    assert_true(mount_log_has(m, "giving up"));
    assert_true(mountrun_proc_state(m->pid) && mountrun_proc_state(m->pid) != 'Z');
    g_autofree char *st = NULL;
    assert_int_equal(status_of(m->mnt, false, &st), 1);
    assert_non_null(strstr(st, "no daemon can start"));
    /* fixed, a takeover brings a daemon back */
    put_config(cfg, "[ckptfs]\npolicy=enforce\n");
    g_autofree char *msg = NULL;
    int rc = takeover(m, NULL, &msg);
    if (rc != 0)
        fprintf(stderr, "--takeover: exit %d: %s", rc, msg);
    assert_int_equal(rc, 0);
    assert_serves(m, "resumed");
    /* the episode stays in the counters */
    assert_true(mount_metric(m, "ckptfs_daemon_failed_starts_total") >= 5);
    assert_int_equal(mount_metric(m, "ckptfs_supervisor_give_ups_total"), 1);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_given_up_supervisor_exits_nonzero_at_unmount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    put_config(cfg, "[ckptfs]\n");
    g_autofree char *opt = g_strconcat("config=", cfg, NULL);
    const char *args[] = {"-o", "supervise", "-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    put_config(cfg, "[ckptfs]\nbogus=1\n");
    kill(mount_daemon_pid(m), SIGKILL);
    g_autofree char *path = mp(m, "x");
    struct stat st;
    for (int i = 0; i < WAIT_MS / 100 && !(stat(path, &st) < 0 && errno == EIO); i++)
        sleep_ms(100);
    assert_true(mountrun_fusermount(m->mnt, false, NULL));
    int status = 0;
    for (int i = 0; i < WAIT_MS / 10 && waitpid(m->pid, &status, WNOHANG) == 0; i++)
        sleep_ms(10);
    m->pid = 0;
    assert_true(WIFEXITED(status));
    assert_int_not_equal(WEXITSTATUS(status), 0);
    mount_free(m);
}

/* ---- a failed background start ---- */

static void test_failed_background_start_leaves_no_zombie(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *views = g_build_filename(m->backing, "_views", NULL);
    assert_int_equal(g_mkdir(views, 0755), 0);
    /* orphans of the start (the supervisor it forked) come to this process */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const char *args[] = {m->backing, m->mnt, NULL};
    g_autofree char *err = NULL;
    assert_int_equal(run_ckptfs_in(NULL, args, &err), 2);
    assert_non_null(strstr(err, "_views"));
    sleep_ms(200);
    int status;
    pid_t z = waitpid(-1, &status, WNOHANG);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    assert_true(z <= 0); /* nothing left for anybody to reap */
    mount_free(m);
}

/* ---- quick remounts ---- */

static void test_takeover_after_each_quick_remount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *opts = with_variant("supervise");
    const char *args[] = {"-o", opts, m->backing, m->mnt, NULL};
    for (int i = 0; i < 50; i++) {
        g_autofree char *err = NULL;
        int rc = run_ckptfs_in(NULL, args, &err);
        if (rc != 0)
            fprintf(stderr, "cycle %d: mount: exit %d: %s", i, rc, err);
        assert_int_equal(rc, 0);
        g_free(err);
        err = NULL;
        rc = takeover(m, NULL, &err);
        if (rc != 0) {
            fprintf(stderr, "cycle %d: --takeover: exit %d: %s", i, rc, err);
            unmount_background(m->mnt); /* the mount is no child of the harness */
        }
        assert_int_equal(rc, 0);
        /* not lazily: the mount must be free to go.  A statfs of every
         * mount by anyone (df) holds it for an instant: EBUSY, once */
        bool gone = false;
        for (int t = 0; t < 20 && !gone; t++) {
            gone = mountrun_fusermount(m->mnt, false, NULL);
            if (!gone)
                sleep_ms(50);
        }
        assert_true(gone);
    }
    sleep_ms(200);
    mount_free(m);
}

/* ---- the command line of --takeover ---- */

static void test_takeover_command_line(void **state)
{
    (void)state;
    Mount *m = supervised(NULL);
    g_autofree char *err = NULL;
    const char *extra[] = {"--takeover", m->mnt, "extra", NULL};
    assert_int_equal(run_ckptfs_in(NULL, extra, &err), 2);
    assert_non_null(strstr(err, "usage: ckptfs --takeover"));
    g_autofree char *eq = g_strconcat("--takeover=", m->mnt, NULL);
    const char *eqform[] = {eq, NULL};
    g_free(err);
    err = NULL;
    assert_int_equal(run_ckptfs_in(NULL, eqform, &err), 0);
    assert_serves(m, "eq-form");
    /* auto_unmount would end the mount with its daemon, which supervision
     * is there to outlive: refused, and the running daemon goes on */
    const char *au[] = {"--takeover", m->mnt, "-o", "auto_unmount", NULL};
    g_free(err);
    err = NULL;
    assert_int_not_equal(run_ckptfs_in(NULL, au, &err), 0);
    assert_non_null(strstr(err, "auto_unmount"));
    assert_serves(m, "after a refused auto_unmount");
    g_autofree char *plain = g_build_filename(m->base, "plain", NULL);
    assert_int_equal(g_mkdir(plain, 0755), 0);
    const char *none[] = {"--takeover", plain, NULL};
    g_free(err);
    err = NULL;
    assert_int_equal(run_ckptfs_in(NULL, none, &err), 1);
    assert_non_null(strstr(err, "no ckptfs is mounted here"));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ---- ckptctl status ---- */

static JsonObject *parse_object(const char *text, JsonParser **keep)
{
    *keep = json_parser_new();
    assert_true(json_parser_load_from_data(*keep, text, -1, NULL));
    return json_node_get_object(json_parser_get_root(*keep));
}

static void test_status_answers_even_when_the_daemon_is_stopped(void **state)
{
    (void)state;
    Mount *m = supervised(NULL);
    pid_t daemon = mount_daemon_pid(m);
    g_autofree char *out = NULL;
    assert_int_equal(status_of(m->mnt, true, &out), 0);
    g_autoptr(JsonParser) p = NULL;
    JsonObject *o = parse_object(out, &p);
    assert_true(json_object_get_boolean_member(o, "healthy"));
    assert_string_equal(json_object_get_string_member(o, "state"), "serving");
    assert_true(json_object_get_boolean_member(o, "supervised"));
    JsonObject *sup = json_object_get_object_member(o, "supervisor");
    JsonObject *d = json_object_get_object_member(o, "daemon");
    assert_int_equal(json_object_get_int_member(sup, "pid"), m->pid);
    assert_int_equal(json_object_get_int_member(d, "pid"), daemon);
    assert_string_equal(json_object_get_string_member(d, "protocol"), "7.40");
    assert_true(json_object_has_member(o, "passthrough"));
    assert_true(json_object_has_member(json_object_get_object_member(o, "catalog"), "loaded"));
    /* a hung daemon: the supervisor answers for it, and says it is not well */
    assert_int_equal(kill(daemon, SIGSTOP), 0);
    g_free(out);
    out = NULL;
    int rc = status_of(m->mnt, false, &out);
    kill(daemon, SIGCONT);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "the daemon is stopped"));
    assert_int_equal(status_of(m->mnt, false, NULL), 0);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_status_without_a_supervisor_and_of_no_mount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "nosupervise", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *out = NULL;
    /* the daemon answers for itself, within ckptctl's 1 s: on two CPUs busy
     * with other suites it may not (ckptctl then calls it hung), nor listen
     * yet just after the mount shows, and is asked again */
    int rc = status_of(m->mnt, true, &out);
    for (int i = 0;
         i < 5 && rc == 1 && (strstr(out, "nothing answers") || strstr(out, "nothing listens"));
         i++) {
        g_clear_pointer(&out, g_free);
        rc = status_of(m->mnt, true, &out);
    }
    assert_int_equal(rc, 0);
    g_autoptr(JsonParser) p = NULL;
    JsonObject *o = parse_object(out, &p);
    assert_false(json_object_get_boolean_member(o, "supervised"));
    assert_int_equal(json_object_get_int_member(json_object_get_object_member(o, "daemon"), "pid"),
                     m->pid);
    assert_int_equal(mount_stop(m), 0);
    assert_int_equal(status_of(m->mnt, false, NULL), 2); /* no ckptfs there any more */
    mount_free(m);
}

/* Every member ckptctl(1) promises of status --json, on every path. */
static const char *const status_members[] = {"mount",
                                             "healthy",
                                             "problems",
                                             "state",
                                             "supervised",
                                             "supervisor",
                                             "daemon",
                                             "attaches",
                                             "oldest_request_seconds",
                                             "passthrough",
                                             "passthrough_why_not",
                                             "identity",
                                             "log",
                                             "catalog",
                                             "collisions",
                                             NULL};

/* The VALUE cell of status's row `what` (g_free), NULL when there is none. */
static char *status_row(const char *text, const char *what)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    size_t n = strlen(what);
    for (char **l = lines; *l; l++)
        if (strncmp(*l, what, n) == 0 && (*l)[n] == ' ')
            return g_strstrip(g_strdup(*l + n));
    return NULL;
}

/* status --json and the table of a mount whose control socket accepts but
 * nothing answers on it; each member is null but those in `known`. */
static void assert_no_answer(Mount *m, pid_t stop, const char *const *known, char **json,
                             char **text, JsonParser **keep, JsonObject **o)
{
    /* the mount is up before its listener: stopped only once it answers */
    for (int i = 0; i < 200 && status_of(m->mnt, true, NULL) != 0; i++)
        sleep_ms(10);
    assert_int_equal(kill(stop, SIGSTOP), 0);
    int rc = status_of(m->mnt, true, json);
    int rc_text = status_of(m->mnt, false, text);
    kill(stop, SIGCONT);
    assert_int_equal(rc, 1);
    assert_int_equal(rc_text, 1);
    *o = parse_object(*json, keep);
    for (const char *const *k = status_members; *k; k++) {
        if (!json_object_has_member(*o, *k))
            fail_msg("status --json without member %s: %s", *k, *json);
        if (!g_strv_contains(known, *k) && !json_object_get_null_member(*o, *k))
            fail_msg("status --json: %s is not null, nothing answered: %s", *k, *json);
    }
    assert_false(json_object_get_boolean_member(*o, "healthy"));
    JsonArray *problems = json_object_get_array_member(*o, "problems");
    assert_int_equal(json_array_get_length(problems), 1);
    assert_non_null(strstr(json_array_get_string_element(problems, 0), "nothing answers"));
    /* the base, not the mount point: a stat of that would wait on the mount */
    char *base = realpath(m->base, NULL);
    assert_non_null(base);
    g_autofree char *real = g_build_filename(base, "mnt", NULL);
    free(base);
    assert_string_equal(json_object_get_string_member(*o, "mount"), real);
    /* the table says what the document says: what nobody answered is "-" */
    g_autofree char *problem =
        g_strconcat("problem: ", json_array_get_string_element(problems, 0), "\n", NULL);
    assert_non_null(strstr(*text, problem));
    const char *unknown[] = {"state",       "daemon pid", "version", "attaches",
                             "passthrough", "identity",   "log",     "catalog loaded",
                             "collisions",  NULL};
    for (const char *const *w = unknown; *w; w++) {
        g_autofree char *v = status_row(*text, *w);
        if (g_strcmp0(v, "-") != 0)
            fail_msg("status: row %s is \"%s\", not \"-\": nothing answered:\n%s", *w,
                     v ? v : "(none)", *text);
    }
}

/* The mount's listener stopped: without a supervisor the daemon listens
 * itself, and which socket took the question tells whether it has one;
 * the table's supervisor row says so, or "-" for a pid nobody said. */
static void stopped_listener(Mount *m, bool supervised, const char *sup_row)
{
    g_autofree char *json = NULL, *text = NULL;
    g_autoptr(JsonParser) p = NULL;
    JsonObject *o = NULL;
    const char *known[] = {"mount", "healthy", "problems", "supervised", NULL};
    assert_no_answer(m, m->pid, known, &json, &text, &p, &o);
    assert_int_equal(json_object_get_boolean_member(o, "supervised"), supervised);
    g_autofree char *sup = status_row(text, "supervisor pid");
    assert_string_equal(sup, sup_row);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_status_of_a_stopped_daemon_without_a_supervisor(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "nosupervise", NULL};
    assert_int_equal(mount_start(m, args), 0);
    stopped_listener(m, false, "none (not supervised)");
}

static void test_status_of_a_stopped_supervisor(void **state)
{
    (void)state;
    stopped_listener(supervised(NULL), true, "-");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_takeover_with_broken_config_keeps_serving),
        cmocka_unit_test(test_takeover_of_a_replaced_backing_dir_keeps_serving),
        cmocka_unit_test(test_sighup_to_supervisor_reloads_and_keeps_mount),
        cmocka_unit_test(test_takeover_options_apply_and_fixed_ones_are_named),
        cmocka_unit_test(test_relative_paths_in_the_background),
        cmocka_unit_test(test_orphaned_daemon_is_adopted_by_a_takeover),
        cmocka_unit_test(test_daemon_that_cannot_start_fails_requests_with_eio),
        cmocka_unit_test(test_given_up_supervisor_exits_nonzero_at_unmount),
        cmocka_unit_test(test_failed_background_start_leaves_no_zombie),
        cmocka_unit_test(test_takeover_after_each_quick_remount),
        cmocka_unit_test(test_takeover_command_line),
        cmocka_unit_test(test_status_answers_even_when_the_daemon_is_stopped),
        cmocka_unit_test(test_status_without_a_supervisor_and_of_no_mount),
        cmocka_unit_test(test_status_of_a_stopped_daemon_without_a_supervisor),
        cmocka_unit_test(test_status_of_a_stopped_supervisor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
