/* Running ckptfs in production: the fstab line and mount -t fuse.ckptfs
 * through mount(8), the systemd unit (systemd-analyze verify, and its
 * ExecStart/ExecStop command lines run for real), -d debug output and log
 * records on stderr.
 *
 * mount(8) runs its helpers without the caller's PATH, so mount.fuse3 finds
 * `ckptfs` only where it is installed.  The test runs in a private mount
 * namespace with a tmpfs on /usr/local/sbin (meson's install dir) holding a
 * link to the build's daemon: nothing on the host changes. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "mount_gone.h"
#include "mountrun.h"

#define INSTALLED "/usr/local/sbin/ckptfs"

/* The unit as ninja install installs it (generated from
 * tools/systemd/ckptfs@.service.in with this build's paths). */
static char *unit_path(void)
{
    return g_strdup(g_getenv("CKPTFS_UNIT"));
}

static int group_setup(void **state)
{
    (void)state;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("ckptfs-test", "/usr/local/sbin", "tmpfs", 0, "mode=0755") != 0) {
        fprintf(stderr, "private mount namespace: %s\n", g_strerror(errno));
        return -1;
    }
    g_autofree char *bin = g_canonicalize_filename(g_getenv("CKPTFS_BIN"), NULL);
    return symlink(bin, INSTALLED);
}

/* Runs argv with envp (NULL: inherited); returns the wait status, stderr in *err. */
static int run_env(const char *const *argv, char **envp, char **out, char **err)
{
    int status = -1;
    g_autoptr(GError) e = NULL;
    if (!g_spawn_sync(NULL, (char **)argv, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, out, err, &status,
                      &e)) {
        fprintf(stderr, "%s: %s\n", argv[0], e->message);
        return -1;
    }
    return status;
}

/* `sh -c 'echo x > TARGET'` as job `job`; the exit code. */
static int write_as(const char *job, const char *target)
{
    g_autofree char *env = g_strconcat("CLINK_JOB_ID=", job, NULL);
    char *envp[] = {env, "PATH=/usr/bin:/bin", NULL};
    const char *argv[] = {"/bin/sh", "-c", "echo x > \"$0\" 2>/dev/null", target, NULL};
    int status = run_env(argv, envp, NULL, NULL);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static char *mountinfo_line(const char *mnt)
{
    g_autofree char *text = get_file("/proc/self/mountinfo");
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *needle = g_strdup_printf(" %s ", mnt);
    for (char **l = lines; *l; l++)
        if (strstr(*l, needle))
            return g_strdup(*l);
    return NULL;
}

/* The pid of the daemon serving mnt, or 0: its name (comm) is ckptfs and
 * its title "ckptfs: serving MNT", as ps and pgrep show it; a supervised
 * mount has a supervisor beside it ("ckptfs: supervisor MNT"). */
static pid_t daemon_of(const char *mnt)
{
    GDir *d = g_dir_open("/proc", 0, NULL);
    pid_t found = 0;
    g_autofree char *title = g_strdup_printf("ckptfs: serving %s", mnt);
    for (const char *e; d && !found && (e = g_dir_read_name(d));) {
        if (!g_ascii_isdigit(*e))
            continue;
        g_autofree char *cp = g_build_filename("/proc", e, "comm", NULL);
        g_autofree char *comm = NULL;
        if (!g_file_get_contents(cp, &comm, NULL, NULL) || strcmp(g_strchomp(comm), "ckptfs"))
            continue;
        g_autofree char *p = g_build_filename("/proc", e, "cmdline", NULL);
        g_autofree char *cmd = NULL;
        if (g_file_get_contents(p, &cmd, NULL, NULL) && strcmp(cmd, title) == 0)
            found = (pid_t)atoi(e);
    }
    if (d)
        g_dir_close(d);
    return found;
}

static bool wait_gone(pid_t pid)
{
    for (int i = 0; i < 100; i++) {
        if (kill(pid, 0) != 0 && errno == ESRCH)
            return true;
        g_usleep(50000);
    }
    return false;
}

/* A mount made by mount(8): policy and identity came through, mountinfo
 * shows the options, umount ends the daemon. */
static void check_mounted_by_helper(Mount *m, const char *const *umount_cmd)
{
    g_autofree char *line = mountinfo_line(m->mnt);
    assert_non_null(line);
    assert_non_null(strstr(line, "fuse.ckptfs"));
    assert_non_null(strstr(line, "allow_other"));
    assert_non_null(strstr(line, "default_permissions")); /* allow_other turns it on */
    pid_t pid = daemon_of(m->mnt);
    assert_true(pid > 0);
    g_autofree char *foreign = g_build_filename(m->mnt, "_state", "j2", "from-j1", NULL);
    g_autofree char *own = g_build_filename(m->mnt, "_state", "j2", "from-j2", NULL);
    assert_int_not_equal(write_as("j1", foreign), 0);
    assert_int_equal(write_as("j2", own), 0);
    g_autofree char *b_foreign = g_build_filename(m->backing, "_state", "j2", "from-j1", NULL);
    g_autofree char *b_own = g_build_filename(m->backing, "_state", "j2", "from-j2", NULL);
    assert_int_equal(access(b_foreign, F_OK), -1);
    assert_int_equal(access(b_own, F_OK), 0);
    g_autofree char *log = g_build_filename(m->mnt, "_views", ".collisions", NULL);
    g_autofree char *text = get_file(log);
    assert_non_null(strstr(text, "\"caller_job\":\"j1\""));
    g_autofree char *err = NULL;
    int status = run_env(umount_cmd, NULL, NULL, &err);
    if (status != 0)
        fprintf(stderr, "%s: %s\n", umount_cmd[0], err);
    assert_int_equal(status, 0);
    assert_true(wait_gone(pid));
    g_autofree char *after = mountinfo_line(m->mnt);
    assert_null(after);
}

static Mount *two_jobs(void)
{
    Mount *m = mount_new();
    const char *dirs[] = {"_state/j1", "_state/j2"};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *d = g_build_filename(m->backing, dirs[i], NULL);
        assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
    }
    return m;
}

/* The fstab line of the manual page, read by mount(8) from a file. */
static void test_fstab_line(void **state)
{
    (void)state;
    Mount *m = two_jobs();
    g_autofree char *fstab = g_build_filename(m->base, "fstab", NULL);
    g_autofree char *line = g_strdup_printf(
        "%s %s fuse.ckptfs defaults,allow_other,identity=env:CLINK_JOB_ID,_netdev 0 0\n",
        m->backing, m->mnt);
    put_file(fstab, line);
    const char *mnt[] = {"mount", "-T", fstab, m->mnt, NULL};
    g_autofree char *err = NULL;
    int status = run_env(mnt, NULL, NULL, &err);
    if (status != 0)
        fprintf(stderr, "mount -T: %s\n", err);
    assert_int_equal(status, 0);
    const char *um[] = {"umount", m->mnt, NULL};
    check_mounted_by_helper(m, um);
    mount_free(m);
}

static void test_mount_t_fuse_ckptfs(void **state)
{
    (void)state;
    Mount *m = two_jobs();
    const char *mnt[] = {"mount",
                         "-t",
                         "fuse.ckptfs",
                         "-o",
                         "allow_other,identity=env:CLINK_JOB_ID,_netdev,nofail",
                         m->backing,
                         m->mnt,
                         NULL};
    g_autofree char *err = NULL;
    int status = run_env(mnt, NULL, NULL, &err);
    if (status != 0)
        fprintf(stderr, "mount -t: %s\n", err);
    assert_int_equal(status, 0);
    const char *um[] = {"fusermount3", "-u", m->mnt, NULL};
    check_mounted_by_helper(m, um);
    mount_free(m);
}

/* ---- the systemd unit ---- */

static char *escape_path(const char *path)
{
    const char *argv[] = {"systemd-escape", "-p", path, NULL};
    g_autofree char *out = NULL;
    if (run_env(argv, NULL, &out, NULL) != 0)
        return NULL;
    return g_strstrip(g_steal_pointer(&out));
}

/* What the unit promises an operator: it is ready once mounted, makes a
 * missing mount point, leaves the clock alone, waits for the network only
 * where a drop-in asks (every network-online.target line is a comment),
 * and its env file has an example to start from. */
static void test_systemd_unit_as_installed(void **state)
{
    (void)state;
    g_autofree char *src = unit_path();
    g_autofree char *unit = NULL;
    assert_true(g_file_get_contents(src, &unit, NULL, NULL));
    assert_non_null(strstr(unit, "\nType=notify\n"));
    assert_non_null(strstr(unit, "\nExecStartPre=-/bin/mkdir -p \"%f\"\n"));
    assert_non_null(strstr(unit, "\nProtectClock=yes\n"));
    assert_non_null(strstr(unit, "\nEnvironmentFile=/etc/ckptfs/%i.env\n"));
    g_auto(GStrv) lines = g_strsplit(unit, "\n", -1);
    for (char **l = lines; *l; l++)
        if (strstr(*l, "network-online.target"))
            assert_true((*l)[0] == '#');
    g_autofree char *example = g_build_filename(g_getenv("CKPTFS_SOURCE_ROOT"), "tools", "systemd",
                                                "ckptfs.env.example", NULL);
    g_autofree char *text = NULL;
    assert_true(g_file_get_contents(example, &text, NULL, NULL));
    assert_non_null(strstr(text, "CKPTFS_BACKING="));
    assert_non_null(strstr(text, "CKPTFS_OPTIONS="));
}

static void test_systemd_unit_verifies(void **state)
{
    (void)state;
    g_autofree char *sa = g_find_program_in_path("systemd-analyze");
    if (!sa)
        skip();
    Mount *m = two_jobs();
    g_autofree char *inst = escape_path(m->mnt);
    assert_non_null(inst);
    g_autofree char *unit = NULL;
    g_autofree char *src = unit_path();
    assert_true(g_file_get_contents(src, &unit, NULL, NULL));
    /* the ExecStart binary is installed (in this namespace); the env file
     * lives next to the test instead of /etc/ckptfs */
    g_autofree char *envdir = g_build_filename(m->base, "etc", NULL);
    g_mkdir(envdir, 0755);
    g_autofree char *envfile = g_strdup_printf("%s/%s.env", envdir, inst);
    g_autofree char *env = g_strdup_printf("CKPTFS_BACKING=%s\n", m->backing);
    put_file(envfile, env);
    g_autofree char *env_line = g_strdup_printf("EnvironmentFile=%s/%%i.env", envdir);
    g_auto(GStrv) parts = g_strsplit(unit, "EnvironmentFile=/etc/ckptfs/%i.env", 2);
    assert_int_equal(g_strv_length(parts), 2);
    g_autofree char *text = g_strjoin(env_line, parts[0], parts[1], NULL);
    g_autofree char *name = g_strdup_printf("%s/ckptfs@%s.service", m->base, inst);
    put_file(name, text);
    const char *argv[] = {sa, "verify", "--man=no", name, NULL};
    g_autofree char *err = NULL;
    int status = run_env(argv, NULL, NULL, &err);
    if (status != 0 || *err)
        fprintf(stderr, "systemd-analyze verify: %s\n", err);
    assert_int_equal(status, 0);
    assert_string_equal(err, ""); /* a bad key is only a warning */
    /* and the test would see one */
    g_autofree char *bad = g_strdup_printf("%s/ckptfs@bad.service", m->base);
    g_autofree char *bad_text = g_strconcat(text, "\n[Service]\nTyp=simple\n", NULL);
    put_file(bad, bad_text);
    const char *argv2[] = {sa, "verify", "--man=no", bad, NULL};
    g_autofree char *err2 = NULL;
    run_env(argv2, NULL, NULL, &err2);
    assert_string_not_equal(err2, "");
    mount_free(m);
}

/* Expands ${VAR}, %f and %i the way systemd does in ExecStart= (each word
 * one argument, double quotes around a word removed; our values have no
 * spaces). */
static GStrv expand_exec(const char *line, GHashTable *env, const char *inst, const char *path)
{
    g_auto(GStrv) words = g_strsplit(line, " ", -1);
    GPtrArray *out = g_ptr_array_new();
    for (char **w = words; *w; w++) {
        if (!**w)
            continue;
        GString *s = g_string_new("");
        for (const char *p = *w; *p;) {
            if (p[0] == '%' && p[1] == 'f') {
                g_string_append(s, path);
                p += 2;
            } else if (p[0] == '%' && p[1] == 'i') {
                g_string_append(s, inst);
                p += 2;
            } else if (*p == '"') {
                p++;
            } else if (p[0] == '$' && p[1] == '{') {
                const char *end = strchr(p, '}');
                assert_non_null(end);
                g_autofree char *var = g_strndup(p + 2, (gsize)(end - p - 2));
                const char *v = g_hash_table_lookup(env, var);
                g_string_append(s, v ? v : "");
                p = end + 1;
            } else {
                g_string_append_c(s, *p++);
            }
        }
        g_ptr_array_add(out, g_string_free(s, FALSE));
    }
    g_ptr_array_add(out, NULL);
    return (GStrv)g_ptr_array_free(out, FALSE);
}

static void load_env(GHashTable *env, const char *text)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        char *eq = strchr(*l, '=');
        if (**l == '#' || !eq)
            continue;
        g_hash_table_insert(env, g_strndup(*l, (gsize)(eq - *l)), g_strdup(eq + 1));
    }
}

static bool live_fuse(const char *mnt)
{
    struct statfs sfs;
    return statfs(mnt, &sfs) == 0 && sfs.f_type == 0x65735546; /* FUSE_SUPER_MAGIC */
}

/* Runs the ExecStart command line (stderr to log) until the mount is live. */
static pid_t exec_start(char **sargv, const char *log, const char *mnt)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        execv(sargv[0], sargv);
        _exit(127);
    }
    bool up = false;
    for (int i = 0; i < 200 && !up; i++) {
        up = live_fuse(mnt);
        if (!up)
            g_usleep(50000);
    }
    if (!up) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        g_autofree char *text = get_file(log);
        fprintf(stderr, "ExecStart did not mount:\n%s", text);
        const char *lazy[] = {"fusermount3", "-u", "-z", mnt, NULL};
        run_env(lazy, NULL, NULL, NULL);
    }
    assert_true(up);
    return pid;
}

/* The unit's ExecStart and ExecStop, expanded and run: the mount comes up
 * with the env file's options; after a SIGKILL the same ExecStart (what
 * Restart=on-failure runs) mounts again over the dead mount; ExecStop
 * unmounts and the daemon exits 0. */
static void test_systemd_unit_commands(void **state)
{
    (void)state;
    Mount *m = two_jobs();
    g_autofree char *inst = escape_path(m->mnt);
    if (!inst) {
        mount_free(m);
        skip();
    }
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autofree char *src = unit_path();
    g_autoptr(GError) err = NULL;
    assert_true(g_key_file_load_from_file(kf, src, G_KEY_FILE_NONE, &err));
    g_autofree char *start = g_key_file_get_value(kf, "Service", "ExecStart", NULL);
    g_autofree char *stop = g_key_file_get_value(kf, "Service", "ExecStop", NULL);
    g_autofree char *defaults = g_key_file_get_value(kf, "Service", "Environment", NULL);
    g_autofree char *type = g_key_file_get_value(kf, "Service", "Type", NULL);
    assert_non_null(start);
    assert_non_null(stop);
    assert_string_equal(type, "notify"); /* sd_notify READY=1 once mounted */
    assert_non_null(strstr(start, " -f "));
    g_autoptr(GHashTable) env = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    load_env(env, defaults);
    g_autofree char *envtext = g_strdup_printf(
        "# /etc/ckptfs/%s.env\nCKPTFS_BACKING=%s\nCKPTFS_OPTIONS=identity=env:CLINK_JOB_ID,"
        "allow_other\n",
        inst, m->backing);
    load_env(env, envtext);
    g_auto(GStrv) sargv = expand_exec(start, env, inst, m->mnt);
    g_auto(GStrv) eargv = expand_exec(stop, env, inst, m->mnt);
    assert_string_equal(sargv[0], INSTALLED);

    g_autofree char *log = g_build_filename(m->base, "unit.log", NULL);
    pid_t pid = exec_start(sargv, log, m->mnt);
    /* Restart=on-failure after a crash: the same ExecStart on the dead mount */
    assert_int_equal(kill(pid, SIGKILL), 0);
    waitpid(pid, NULL, 0);
    struct statfs sfs; /* always asks the daemon: a stat may come from a cache */
    errno = 0;
    int rc = statfs(m->mnt, &sfs);
    if (rc != -1 || !ck_mount_gone_errno(errno))
        fail_msg("statfs of the mount whose daemon was killed: %d (%s)", rc, g_strerror(errno));
    pid = exec_start(sargv, log, m->mnt);
    g_autofree char *foreign = g_build_filename(m->mnt, "_state", "j2", "from-j1", NULL);
    assert_int_not_equal(write_as("j1", foreign), 0);
    g_autofree char *own = g_build_filename(m->mnt, "_state", "j1", "own", NULL);
    assert_int_equal(write_as("j1", own), 0);
    g_autofree char *serr = NULL;
    int status = run_env((const char *const *)eargv, NULL, NULL, &serr);
    if (status != 0) {
        fprintf(stderr, "ExecStop: %s\n", serr);
        const char *lazy[] = {"fusermount3", "-u", "-z", m->mnt, NULL};
        run_env(lazy, NULL, NULL, NULL);
        kill(pid, SIGKILL);
    }
    assert_int_equal(status, 0);
    int dstatus;
    assert_int_equal(waitpid(pid, &dstatus, 0), pid);
    assert_true(WIFEXITED(dstatus));
    assert_int_equal(WEXITSTATUS(dstatus), 0); /* Restart=on-failure stays quiet */
    mount_free(m);
}

/* Under systemd (INVOCATION_ID set) the daemon supervises itself: the
 * unit's ExecStartPre makes a missing mount point, ExecReload applies the
 * options edited in the env file (systemd reads it again for the reload),
 * and refuses a bad one with the mount going on as it was. */
static void test_systemd_unit_reload(void **state)
{
    (void)state;
    Mount *m = two_jobs();
    g_autofree char *inst = escape_path(m->mnt);
    if (!inst) {
        mount_free(m);
        skip();
    }
    assert_int_equal(rmdir(m->mnt), 0);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autofree char *src = unit_path();
    assert_true(g_key_file_load_from_file(kf, src, G_KEY_FILE_NONE, NULL));
    g_autofree char *pre = g_key_file_get_value(kf, "Service", "ExecStartPre", NULL);
    g_autofree char *start = g_key_file_get_value(kf, "Service", "ExecStart", NULL);
    g_autofree char *reload = g_key_file_get_value(kf, "Service", "ExecReload", NULL);
    g_autofree char *stop = g_key_file_get_value(kf, "Service", "ExecStop", NULL);
    assert_non_null(pre);
    assert_non_null(reload);
    assert_true(pre[0] == '-'); /* a failure to make it (it exists, dead) is no failure */
    g_autoptr(GHashTable) env = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autofree char *envtext = g_strdup_printf(
        "CKPTFS_BACKING=%s\nCKPTFS_OPTIONS=identity=env:CLINK_JOB_ID,policy=enforce\n", m->backing);
    load_env(env, envtext);
    g_auto(GStrv) preargv = expand_exec(pre + 1, env, inst, m->mnt);
    assert_int_equal(run_env((const char *const *)preargv, NULL, NULL, NULL), 0);
    assert_true(g_file_test(m->mnt, G_FILE_TEST_IS_DIR));
    g_auto(GStrv) sargv = expand_exec(start, env, inst, m->mnt);
    g_autofree char *log = g_build_filename(m->base, "unit.log", NULL);
    g_setenv("INVOCATION_ID", "0123456789abcdef0123456789abcdef", TRUE);
    pid_t pid = exec_start(sargv, log, m->mnt);
    g_unsetenv("INVOCATION_ID");
    g_autofree char *control = g_build_filename(m->mnt, "_views", ".control", NULL);
    char v[64] = "";
    assert_true(getxattr(control, "user.ckptfs.policy", v, sizeof v - 1) > 0);
    assert_string_equal(v, "enforce");
    /* the operator edits the env file, then systemctl reload */
    load_env(env, "CKPTFS_OPTIONS=identity=env:CLINK_JOB_ID,policy=audit\n");
    g_auto(GStrv) rargv = expand_exec(reload, env, inst, m->mnt);
    g_autofree char *rerr = NULL;
    int status = run_env((const char *const *)rargv, NULL, NULL, &rerr);
    if (status != 0)
        fprintf(stderr, "ExecReload: %s\n", rerr);
    assert_int_equal(status, 0);
    memset(v, 0, sizeof v);
    assert_true(getxattr(control, "user.ckptfs.policy", v, sizeof v - 1) > 0);
    assert_string_equal(v, "audit");
    /* a bad option: refused, the mount as it was */
    load_env(env, "CKPTFS_OPTIONS=identity=env:CLINK_JOB_ID,policy=bogus\n");
    g_auto(GStrv) bargv = expand_exec(reload, env, inst, m->mnt);
    g_free(rerr);
    rerr = NULL;
    status = run_env((const char *const *)bargv, NULL, NULL, &rerr);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_non_null(strstr(rerr, "policy=bogus"));
    g_autofree char *own = g_build_filename(m->mnt, "_state", "j1", "own", NULL);
    assert_int_equal(write_as("j1", own), 0);
    g_auto(GStrv) eargv = expand_exec(stop, env, inst, m->mnt);
    assert_int_equal(run_env((const char *const *)eargv, NULL, NULL, NULL), 0);
    int dstatus;
    assert_int_equal(waitpid(pid, &dstatus, 0), pid);
    assert_true(WIFEXITED(dstatus));
    assert_int_equal(WEXITSTATUS(dstatus), 0);
    mount_free(m);
}

/* -d: libfuse's request trace and glib's records (a g_message on clearing a
 * stale mount) on stderr, which under systemd is the journal. */
static void test_debug_output_and_log_records(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    assert_int_equal(kill(m->pid, SIGKILL), 0);
    int status;
    waitpid(m->pid, &status, 0);
    m->pid = 0;
    m->exit_status = 0;
    const char *args[] = {"-d", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *f = mp(m, "traced");
    put_file(f, "x");
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *text = get_file(m->log);
    assert_non_null(strstr(text, "clearing a stale mount"));
    assert_non_null(strstr(text, "opcode: CREATE"));
    assert_non_null(strstr(text, "opcode: LOOKUP"));
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fstab_line),
        cmocka_unit_test(test_mount_t_fuse_ckptfs),
        cmocka_unit_test(test_systemd_unit_as_installed),
        cmocka_unit_test(test_systemd_unit_verifies),
        cmocka_unit_test(test_systemd_unit_commands),
        cmocka_unit_test(test_systemd_unit_reload),
        cmocka_unit_test(test_debug_output_and_log_records),
    };
    return cmocka_run_group_tests_name("mount/ops", tests, group_setup, NULL);
}
