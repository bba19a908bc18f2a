/* The daemon's life cycle: option validation and exit codes, config files,
 * SIGTERM, kill -9 and the stale mount it leaves, mount -t fuse.ckptfs. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "mount_gone.h"
#include "mountrun.h"

/* Runs ckptfs with argv (after the binary), returns the exit code and the
 * stderr text. */
static int run_ckptfs(const char *const *args, char **err_out)
{
    const char *bin = g_getenv("CKPTFS_BIN");
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)bin);
    for (size_t i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    int status = -1;
    g_autoptr(GError) err = NULL;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                               NULL, NULL, err_out, &status, &err);
    g_ptr_array_free(argv, TRUE);
    assert_true(ok);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* One line on stderr, exit code `code`, no mount. */
static void expect_refusal(Mount *m, const char *const *args, int code, const char *needle)
{
    g_autofree char *err = NULL;
    int rc = run_ckptfs(args, &err);
    if (rc != code || !strstr(err, needle))
        fprintf(stderr, "exit %d, stderr: %s\n", rc, err);
    assert_int_equal(rc, code);
    assert_non_null(strstr(err, needle));
    const char *nl = strchr(err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0'); /* exactly one line */
    struct stat a, b;
    g_autofree char *parent = g_path_get_dirname(m->mnt);
    assert_int_equal(stat(parent, &a), 0);
    assert_int_equal(stat(m->mnt, &b), 0);
    assert_int_equal(a.st_dev, b.st_dev);
}

/* mount(8) and findmnt show the backing directory as the source and
 * fuse.ckptfs as the type; fsname= given by the user wins. */
static char *mountinfo_line(const char *mnt)
{
    g_autofree char *info = NULL;
    assert_true(g_file_get_contents("/proc/self/mountinfo", &info, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(info, "\n", -1);
    g_autofree char *needle = g_strdup_printf(" %s ", mnt);
    for (char **l = lines; *l; l++)
        if (strstr(*l, needle))
            return g_strdup(*l);
    fail_msg("%s not in /proc/self/mountinfo", mnt);
    return NULL;
}

static void test_source_and_type(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    g_autofree char *line = mountinfo_line(m->mnt);
    g_autofree char *want = g_strdup_printf(" - fuse.ckptfs %s ", m->backing);
    assert_non_null(strstr(line, want));
    assert_int_equal(mount_stop(m), 0);
    const char *args[] = {"-o", "fsname=ckpt-main", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *line2 = mountinfo_line(m->mnt);
    assert_non_null(strstr(line2, " - fuse.ckptfs ckpt-main "));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_bad_options_exit_2(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *file = g_build_filename(m->base, "plainfile", NULL);
    put_file(file, "");
    g_autofree char *inside = g_build_filename(m->backing, "log.jsonl", NULL);
    g_autofree char *log_opt = g_strdup_printf("collision_log=%s", inside);
    g_autofree char *bad_cfg = g_build_filename(m->base, "bad.conf", NULL);
    put_file(bad_cfg, "[ckptfs]\npolicy=enforce\n[other]\nx=1\n");
    g_autofree char *cfg_opt = g_strdup_printf("config=%s", bad_cfg);

    const char *missing[] = {"-f", "/nonexistent/backing", m->mnt, NULL};
    expect_refusal(m, missing, 2, "/nonexistent/backing");
    const char *not_dir[] = {"-f", file, m->mnt, NULL};
    expect_refusal(m, not_dir, 2, "not a directory");
    const char *no_mnt[] = {"-f", m->backing, "/nonexistent/mnt", NULL};
    expect_refusal(m, no_mnt, 2, "/nonexistent/mnt");
    const char *policy[] = {"-f", "-o", "policy=bogus", m->backing, m->mnt, NULL};
    expect_refusal(m, policy, 2, "policy=bogus");
    const char *legacy[] = {"-f", "-o", "legacy=x", m->backing, m->mnt, NULL};
    expect_refusal(m, legacy, 2, "legacy=x");
    const char *job[] = {"-f", "-o", "job=.hidden", m->backing, m->mnt, NULL};
    expect_refusal(m, job, 2, "job=.hidden");
    const char *job2[] = {"-f", "-o", "job=a/b", m->backing, m->mnt, NULL};
    expect_refusal(m, job2, 2, "not a valid job id");
    const char *ident[] = {"-f", "-o", "identity=CKJOB", m->backing, m->mnt, NULL};
    expect_refusal(m, ident, 2, "identity=CKJOB");
    const char *rescan[] = {"-f", "-o", "rescan=-1", m->backing, m->mnt, NULL};
    expect_refusal(m, rescan, 2, "rescan=-1");
    const char *views[] = {"-f", "-o", "views=a/b", m->backing, m->mnt, NULL};
    expect_refusal(m, views, 2, "views=a/b");
    const char *log[] = {"-f", "-o", log_opt, m->backing, m->mnt, NULL};
    expect_refusal(m, log, 2, "inside the backing directory");
    const char *cfg[] = {"-f", "-o", cfg_opt, m->backing, m->mnt, NULL};
    expect_refusal(m, cfg, 2, "[other]");
    /* a misspelt key, in [ckptfs] or in a job's group */
    g_autofree char *typo_cfg = g_build_filename(m->base, "typo.conf", NULL);
    put_file(typo_cfg, "[ckptfs]\npolcy=audit\n");
    g_autofree char *typo_opt = g_strdup_printf("config=%s", typo_cfg);
    const char *typo[] = {"-f", "-o", typo_opt, m->backing, m->mnt, NULL};
    expect_refusal(m, typo, 2, "unknown key polcy");
    g_autofree char *jtypo_cfg = g_build_filename(m->base, "jtypo.conf", NULL);
    put_file(jtypo_cfg, "[job:a]\nlegacy_backnd=/x\n");
    g_autofree char *jtypo_opt = g_strdup_printf("config=%s", jtypo_cfg);
    const char *jtypo[] = {"-f", "-o", jtypo_opt, m->backing, m->mnt, NULL};
    expect_refusal(m, jtypo, 2, "unknown key legacy_backnd");
    const char *extra[] = {"-f", m->backing, m->mnt, "third", NULL};
    expect_refusal(m, extra, 2, "third");
    /* an option only libfuse knows to refuse: its message is one line too */
    const char *unknown[] = {"-f", "-o", "nosuchopt=1,rescan=5", m->backing, m->mnt, NULL};
    expect_refusal(m, unknown, 2, "nosuchopt=1");
    /* nothing was written into the backing dir */
    assert_int_equal(access(inside, F_OK), -1);
    mount_free(m);
}

static void test_views_name_clash(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *clash = g_build_filename(m->backing, "_views", NULL);
    assert_int_equal(mkdir(clash, 0755), 0);
    g_autofree char *clash_file = g_build_filename(clash, "real", NULL);
    put_file(clash_file, "real data");
    const char *plain[] = {"-f", m->backing, m->mnt, NULL};
    expect_refusal(m, plain, 2, "views=NAME");
    const char *args[] = {"-o", "views=_v", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *through = g_build_filename(m->mnt, "_views", "real", NULL);
    g_autofree char *text = get_file(through);
    assert_string_equal(text, "real data");
    g_autofree char *metrics = g_build_filename(m->mnt, "_v", ".metrics", NULL);
    assert_int_equal(access(metrics, R_OK), 0);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_sigterm_unmounts_cleanly(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    g_autofree char *f = mp(m, "f");
    put_file(f, "x");
    pid_t pid = m->pid;
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    m->pid = 0;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        mount_dump_log(m);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    struct stat a, b;
    assert_int_equal(stat(m->base, &a), 0);
    assert_int_equal(stat(m->mnt, &b), 0);
    assert_int_equal(a.st_dev, b.st_dev);
    g_autofree char *bf = bp(m, "f");
    assert_int_equal(access(bf, F_OK), 0);
    m->exit_status = 0;
    mount_free(m);
}

static void test_kill_9_then_remount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    g_autofree char *f = mp(m, "state.snap"), *bf = bp(m, "state.snap");
    put_file(f, "committed");
    int fd = open(f, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(kill(m->pid, SIGKILL), 0);
    waitpid(m->pid, NULL, 0);
    m->pid = 0;
    m->exit_status = 0;
    close(fd);
    struct statfs sfs;
    errno = 0;
    assert_int_equal(statfs(m->mnt, &sfs), -1);
    assert_true(ck_mount_gone_errno(errno));
    g_autofree char *text = get_file(bf);
    assert_string_equal(text, "committed");
    /* the new daemon clears the dead mount itself */
    assert_int_equal(mount_start(m, NULL), 0);
    g_autofree char *again = get_file(f);
    assert_string_equal(again, "committed");
    assert_int_equal(mount_stop(m), 0);
    /* exactly one mount was left behind: none now */
    g_autofree char *mounts = get_file("/proc/self/mountinfo");
    assert_null(strstr(mounts, m->mnt));
    mount_free(m);
}

/* Mount lines at exactly mnt in this namespace. */
static int mounts_at(const char *mnt)
{
    g_autofree char *info = get_file("/proc/self/mountinfo");
    g_auto(GStrv) lines = g_strsplit(info, "\n", -1);
    g_autofree char *needle = g_strdup_printf(" %s ", mnt);
    int n = 0;
    for (char **l = lines; *l; l++)
        n += strstr(*l, needle) != NULL;
    return n;
}

/* A second ckptfs on a mount point a live ckptfs serves used to stack a
 * second daemon (exit 0, two collision logs, umount removed only the top
 * one).  It is refused with one line; the first mount goes on serving. */
static void test_second_mount_on_live_mount_refused(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    assert_int_equal(mounts_at(m->mnt), 1);
    g_autofree char *other = g_build_filename(m->base, "other", NULL);
    assert_int_equal(mkdir(other, 0755), 0);
    /* not -f: a daemon that wrongly mounts returns 0 instead of blocking */
    const char *args[] = {other, m->mnt, NULL};
    g_autofree char *err = NULL;
    int rc = run_ckptfs(args, &err);
    int stacked = mounts_at(m->mnt);
    if (stacked > 1) { /* clean up the stacked mount before failing */
        const char *um[] = {"fusermount3", "-u", "-z", m->mnt, NULL};
        run_cmd(um, NULL);
    }
    fprintf(stderr, "second mount: exit %d, stderr: %s", rc, err);
    assert_int_equal(stacked, 1);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "already"));
    assert_non_null(strstr(err, m->mnt));
    const char *nl = strchr(err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    /* the first daemon still serves */
    g_autofree char *f = mp(m, "still.snap"), *bf = bp(m, "still.snap");
    put_file(f, "first");
    g_autofree char *text = get_file(bf);
    assert_string_equal(text, "first");
    /* the same through mount(8) */
    g_autofree char *bindir = g_path_get_dirname(g_getenv("CKPTFS_BIN"));
    g_autofree char *path = g_strdup_printf("%s:%s", bindir, g_getenv("PATH"));
    g_autofree char *old_path = g_strdup(g_getenv("PATH"));
    g_setenv("PATH", path, TRUE);
    const char *cmd[] = {"mount", "-t", "fuse.ckptfs", other, m->mnt, NULL};
    int st = run_cmd(cmd, NULL);
    g_setenv("PATH", old_path, TRUE);
    stacked = mounts_at(m->mnt);
    if (stacked > 1) {
        const char *um[] = {"fusermount3", "-u", "-z", m->mnt, NULL};
        run_cmd(um, NULL);
    }
    assert_int_equal(stacked, 1);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_int_equal(mount_stop(m), 0);
    assert_int_equal(mounts_at(m->mnt), 0);
    mount_free(m);
}

/* --help lists every -o option the README lists; --version names ckptfs's
 * and libfuse's versions. */
static void test_help_and_version(void **state)
{
    (void)state;
    const char *bin = g_getenv("CKPTFS_BIN");
    const char *help[] = {bin, "--help", NULL};
    g_autofree char *out = NULL;
    int status = -1;
    assert_true(g_spawn_sync(NULL, (char **)help, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                             &out, NULL, &status, NULL));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    const char *opts[] = {
        "policy=",        "job=",           "identity=",     "legacy=",     "legacy_backend=",
        "external_root=", "views=",         "rescan=",       "config=",     "collision_log=",
        "tag_env=",       "entry_timeout=", "attr_timeout=", "writeback",   "max_read=",
        "fsname=",        "no_policy",      "no_handles",    "allow_other", "default_permissions"};
    for (gsize i = 0; i < G_N_ELEMENTS(opts); i++)
        if (!strstr(out, opts[i]))
            fail_msg("ckptfs --help does not list %s", opts[i]);
    /* it offers what works: --takeover, and no option that is refused */
    assert_non_null(strstr(out, "--takeover MOUNTPOINT"));
    assert_null(strstr(out, "no_default_permissions"));
    const char *version[] = {bin, "--version", NULL};
    g_autofree char *vout = NULL;
    assert_true(g_spawn_sync(NULL, (char **)version, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                             &vout, NULL, &status, NULL));
    assert_true(g_str_has_prefix(vout, "ckptfs "));
    assert_non_null(strstr(vout, "\nlibfuse 3."));
    /* the protocol the daemon speaks, not libfuse's header's */
    assert_non_null(strstr(vout, "protocol 7.40"));
    assert_null(strstr(vout, "7.31"));
}

/* The next datagram on fd within 10 s, as a string (g_free), or NULL. */
static char *notify_message(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1)
        return NULL;
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    if (n < 0)
        return NULL;
    return g_strndup(buf, (gsize)n);
}

/* Under systemd (Type=notify) the daemon says READY=1 once the mount is up
 * and STOPPING=1 when it ends: a socket in NOTIFY_SOCKET plays systemd. */
static void test_systemd_notify(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *sock = g_build_filename(m->base, "notify.sock", NULL);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof sa.sun_path);
    strcpy(sa.sun_path, sock);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    g_setenv("NOTIFY_SOCKET", sock, TRUE);
    int rc = mount_start(m, NULL);
    g_unsetenv("NOTIFY_SOCKET");
    assert_int_equal(rc, 0);
    g_autofree char *ready = notify_message(fd);
    assert_non_null(ready);
    assert_non_null(strstr(ready, "READY=1"));
    struct statfs sfs;
    assert_int_equal(statfs(m->mnt, &sfs), 0);
    assert_int_equal(sfs.f_type, 0x65735546); /* FUSE_SUPER_MAGIC: up */
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *stopping = notify_message(fd);
    assert_non_null(stopping);
    assert_non_null(strstr(stopping, "STOPPING=1"));
    close(fd);
    mount_free(m);
}

static void test_config_file_and_command_line(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *bb = g_build_filename(m->backing, "_state", "b", NULL);
    assert_int_equal(mkdir(bb, 0755), 0);
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    put_file(cfg, "[ckptfs]\npolicy=audit\njob=a\n\n[job:a]\nlegacy_backend=/srv/state\n");
    g_autofree char *opt = g_strdup_printf("config=%s", cfg);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *x = g_build_filename(m->mnt, "_state", "b", "x", NULL);
    put_file(x, "audit lets it through");
    g_autofree char *log_path = g_build_filename(m->mnt, "_views", ".collisions", NULL);
    g_autofree char *log = get_file(log_path);
    assert_non_null(strstr(log, "\"verdict\":\"allowed\""));
    assert_int_equal(mount_stop(m), 0);

    /* the command line wins over the file */
    g_autofree char *opt2 = g_strdup_printf("config=%s,policy=enforce", cfg);
    const char *args2[] = {"-o", opt2, NULL};
    assert_int_equal(mount_start(m, args2), 0);
    g_autofree char *y = g_build_filename(m->mnt, "_state", "b", "y", NULL);
    errno = 0;
    assert_int_equal(open(y, O_WRONLY | O_CREAT, 0644), -1);
    assert_int_equal(errno, EACCES);
    assert_int_equal(mount_stop(m), 0);

    /* supervise=false in the file, where supervision is the default (under
     * systemd): not supervised; a value that is not a boolean is refused */
    g_autofree char *scfg = g_build_filename(m->base, "nosup.conf", NULL);
    put_file(scfg, "[ckptfs]\nsupervise=false\n");
    g_autofree char *sopt = g_strdup_printf("config=%s", scfg);
    const char *sargs[] = {"-o", sopt, NULL};
    assert_int_equal(truncate(m->log, 0), 0); /* this mount's start line only */
    g_setenv("INVOCATION_ID", "ckptfs-test", TRUE);
    int rc = mount_start(m, sargs);
    g_unsetenv("INVOCATION_ID");
    assert_int_equal(rc, 0);
    assert_true(mount_log_has(m, "not supervised"));
    assert_int_equal(mount_stop(m), 0);
    /* the file's supervise=true is a default: auto_unmount overrides it */
    g_autofree char *ycfg = g_build_filename(m->base, "sup.conf", NULL);
    put_file(ycfg, "[ckptfs]\nsupervise=true\n");
    g_autofree char *yopt = g_strdup_printf("config=%s,auto_unmount", ycfg);
    const char *yargs[] = {"-o", yopt, NULL};
    assert_int_equal(truncate(m->log, 0), 0);
    assert_int_equal(mount_start(m, yargs), 0);
    assert_true(mount_log_has(m, "not supervised"));
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *bcfg = g_build_filename(m->base, "badsup.conf", NULL);
    put_file(bcfg, "[ckptfs]\nsupervise=maybe\n");
    g_autofree char *bopt = g_strdup_printf("config=%s", bcfg);
    const char *bad[] = {"-f", "-o", bopt, m->backing, m->mnt, NULL};
    expect_refusal(m, bad, 2, "supervise=maybe");
    mount_free(m);
}

static void test_allow_other_turns_on_default_permissions(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "allow_other", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *mounts = get_file("/proc/self/mountinfo");
    g_auto(GStrv) lines = g_strsplit(mounts, "\n", -1);
    bool found = false;
    for (char **l = lines; *l; l++) {
        if (strstr(*l, m->mnt)) {
            found = true;
            assert_non_null(strstr(*l, "default_permissions"));
            assert_non_null(strstr(*l, "allow_other"));
            assert_non_null(strstr(*l, "fuse.ckptfs"));
        }
    }
    assert_true(found);
    assert_int_equal(mount_stop(m), 0);

    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* fstab and mount(8): mount.fuse3 runs `ckptfs BACKING MNT -o opts` and
 * waits for it to daemonize.  mount(8) resets PATH for its helpers, so the
 * type form (-t fuse.ckptfs) is run through mount.fuse3 with the build dir
 * on PATH, and mount(8) itself with the "PROGRAM#SOURCE" form. */
static void check_helper_mount(Mount *m, const char *const *cmd)
{
    g_autofree char *bf = bp(m, "f");
    put_file(bf, "via mount(8)");
    g_autofree char *out = NULL;
    assert_int_equal(run_cmd(cmd, &out), 0);
    g_autofree char *f = mp(m, "f");
    g_autofree char *text = get_file(f);
    assert_string_equal(text, "via mount(8)");
    g_autofree char *b_other = g_build_filename(m->backing, "_state", "other", NULL);
    g_mkdir_with_parents(b_other, 0755);
    g_autofree char *other = g_build_filename(m->mnt, "_state", "other", "x", NULL);
    errno = 0;
    assert_int_equal(open(other, O_WRONLY | O_CREAT, 0644), -1); /* job=t came through */
    assert_int_equal(errno, EACCES);
    const char *um[] = {"umount", m->mnt, NULL};
    assert_int_equal(run_cmd(um, NULL), 0);
    struct stat a, b;
    assert_int_equal(stat(m->base, &a), 0);
    assert_int_equal(stat(m->mnt, &b), 0);
    assert_int_equal(a.st_dev, b.st_dev);
}

static void test_mount_fuse3_type_form(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *bindir = g_path_get_dirname(g_getenv("CKPTFS_BIN"));
    g_autofree char *path = g_strdup_printf("%s:%s", bindir, g_getenv("PATH"));
    g_setenv("PATH", path, TRUE);
    const char *cmd[] = {"mount.fuse3", m->backing, m->mnt,  "-t",
                         "fuse.ckptfs", "-o",       "job=t", NULL};
    check_helper_mount(m, cmd);
    mount_free(m);
}

static void test_mount_8(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *source = g_strdup_printf("%s#%s", g_getenv("CKPTFS_BIN"), m->backing);
    const char *cmd[] = {"mount", "-t", "fuse", "-o", "job=t", source, m->mnt, NULL};
    check_helper_mount(m, cmd);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_source_and_type),
        cmocka_unit_test(test_bad_options_exit_2),
        cmocka_unit_test(test_views_name_clash),
        cmocka_unit_test(test_sigterm_unmounts_cleanly),
        cmocka_unit_test(test_kill_9_then_remount),
        cmocka_unit_test(test_second_mount_on_live_mount_refused),
        cmocka_unit_test(test_systemd_notify),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_config_file_and_command_line),
        cmocka_unit_test(test_allow_other_turns_on_default_permissions),
        cmocka_unit_test(test_mount_fuse3_type_form),
        cmocka_unit_test(test_mount_8),
    };
    return cmocka_run_group_tests_name("mount/daemon", tests, NULL, NULL);
}
