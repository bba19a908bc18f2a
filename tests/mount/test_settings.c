/* The daemon's life as an operator lives it: SIGHUP reloads config=FILE
 * and reopens collision_log=FILE without unmounting; the live settings
 * (_views/.control: xattrs and key=value writes, ckptctl set), the counters
 * of .metrics and the records of .collisions survive a kill -9 of the
 * daemon and a takeover; the metrics an alert is built on neither count
 * the daemon's own ENOSYS as an error nor lose series when the mode
 * changes. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define FUSE_SUPER_MAGIC 0x65735546

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* config=FILE replaced as a whole, as editors and config tools do (the
 * harness's put_file writes in place without truncating). */
static void put_config(const char *path, const char *text)
{
    g_autoptr(GError) err = NULL;
    g_file_set_contents(path, text, -1, &err);
    g_assert_no_error(err);
}

static char *V(Mount *m, const char *rel)
{
    return g_build_filename(m->mnt, "_views", rel, NULL);
}

static char *control_text(Mount *m)
{
    g_autofree char *c = V(m, ".control");
    return get_file(c);
}

/* Waits (up to 20 s, polling) until the text of .control contains `line`. */
static bool wait_control(Mount *m, const char *line)
{
    for (int i = 0; i < 2000; i++) {
        g_autofree char *t = control_text(m);
        if (strstr(t, line))
            return true;
        sleep_ms(10);
    }
    return false;
}

static bool is_fuse_mount(const char *path);

/* Waits until the metric reaches at least `want`; its last value (-2: the
 * mount is gone, as a SIGHUP used to make it). */
static int64_t wait_metric(Mount *m, const char *series, int64_t want)
{
    int64_t v = -1;
    g_autofree char *metrics = g_build_filename(m->mnt, "_views", ".metrics", NULL);
    for (int i = 0; i < 2000; i++) {
        g_autofree char *probe = NULL;
        if (!is_fuse_mount(m->mnt) || !g_file_get_contents(metrics, &probe, NULL, NULL))
            return -2;
        v = mount_metric(m, series);
        if (v >= want)
            break;
        sleep_ms(10);
    }
    return v;
}

static bool is_fuse_mount(const char *path)
{
    struct statfs sfs;
    return statfs(path, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC;
}

static int ckptctl_cmd(char **out, const char *first, ...)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)g_getenv("CKPTCTL_BIN"));
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        g_ptr_array_add(argv, (gpointer)a);
    va_end(ap);
    g_ptr_array_add(argv, NULL);
    int status = -1;
    assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                             NULL, out, NULL, &status, NULL));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A crossing: a directory in the legacy area (refused with EACCES under
 * policy=enforce and legacy=ro, recorded either way).  env: NULL, or the
 * environment of the mkdir (the record's tag comes from it). */
static int crossing(Mount *m, const char *name, const char *const *env)
{
    g_autofree char *path = g_build_filename(m->mnt, name, NULL);
    const char *argv[] = {"/bin/mkdir", path, NULL};
    int status = -1;
    assert_true(g_spawn_sync(NULL, (char **)argv, (char **)env,
                             G_SPAWN_STDERR_TO_DEV_NULL | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                             NULL, NULL, &status, NULL));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Waits for a daemon other than `old` to serve the supervised mount. */
static pid_t wait_new_daemon(Mount *m, pid_t old)
{
    for (int i = 0; i < 3000; i++) {
        pid_t d = mount_daemon_pid(m);
        if (d > 0 && d != old && d != m->pid)
            return d;
        sleep_ms(10);
    }
    return 0;
}

/* kill -9 of the serving daemon, or `ckptfs --takeover`; the new daemon's pid. */
static pid_t restart_daemon(Mount *m, bool takeover)
{
    pid_t d = mount_daemon_pid(m);
    assert_true(d > 0 && d != m->pid);
    if (takeover) {
        const char *argv[] = {g_getenv("CKPTFS_BIN"), "--takeover", m->mnt, NULL};
        assert_int_equal(run_cmd(argv, NULL), 0);
    } else {
        mount_expect_log(m, "supervisor: the daemon (pid");
        assert_int_equal(kill(d, SIGKILL), 0);
    }
    pid_t nd = wait_new_daemon(m, d);
    assert_true(nd > 0);
    return nd;
}

static Mount *start(const char *const *args)
{
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, args), 0);
    return m;
}

/* SIGHUP to the daemon (no supervisor) leaves the mount up, and the edited
 * config=FILE applies: policy and rescan change, the reload is counted. */
static void test_sighup_keeps_mount_and_applies_edited_config(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    put_config(cfg, "[ckptfs]\npolicy=enforce\nrescan=2\n");
    g_autofree char *cfg_opt = g_strdup_printf("nosupervise,config=%s", cfg);
    const char *args[] = {"-o", cfg_opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    mount_expect_log(m, "collision refused");
    assert_int_equal(crossing(m, "v1", NULL), 1); /* refused under enforce */

    put_config(cfg, "[ckptfs]\npolicy=audit\nrescan=0.25\n");
    assert_int_equal(kill(mount_daemon_pid(m), SIGHUP), 0);
    assert_int_equal(wait_metric(m, "ckptfs_config_reloads_total{result=\"ok\"}", 1), 1);
    assert_true(is_fuse_mount(m->mnt));
    assert_int_equal(kill(m->pid, 0), 0);
    g_autofree char *text = control_text(m);
    assert_string_equal(text, "policy=audit\nlegacy=ro\nrescan=0.25\ntag_env=\n");
    assert_int_equal(crossing(m, "v2", NULL), 0); /* allowed under audit */
    g_autofree char *f = mp(m, "after-hup");
    put_file(f, "still serving");
    g_autofree char *bf = bp(m, "after-hup");
    g_autofree char *got = get_file(bf);
    assert_string_equal(got, "still serving");
    assert_int_equal(mount_metric(m, "ckptfs_config_reloads_total{result=\"failed\"}"), 0);
    assert_int_equal(mount_metric(m, "ckptfs_control_changes_total{setting=\"policy\"}"), 1);

    /* a second SIGHUP with the file unchanged changes nothing: a setting
     * changed through .control meanwhile stays */
    g_autofree char *control = V(m, ".control");
    assert_int_equal(setxattr(control, "user.ckptfs.rescan", "3", 1, 0), 0);
    assert_int_equal(kill(m->pid, SIGHUP), 0);
    assert_int_equal(wait_metric(m, "ckptfs_config_reloads_total{result=\"ok\"}", 2), 2);
    g_autofree char *text2 = control_text(m);
    assert_string_equal(text2, "policy=audit\nlegacy=ro\nrescan=3\ntag_env=\n");
    /* SIGTERM still unmounts cleanly */
    assert_int_equal(mount_stop(m), 0);
    assert_false(is_fuse_mount(m->mnt));
    g_autofree char *log = get_file(m->log);
    assert_non_null(strstr(log, "control: policy enforce -> audit by a reload of config="));
    mount_free(m);
}

/* A config that does not parse on SIGHUP (supervised: the daemon, not its
 * supervisor, gets the signal) keeps the settings as they were, says why,
 * and counts the failure; fixing the file and SIGHUP again applies it. */
static void test_sighup_bad_config_keeps_settings(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    put_config(cfg, "[ckptfs]\npolicy=enforce\n");
    g_autofree char *cfg_opt = g_strdup_printf("supervise,config=%s", cfg);
    const char *args[] = {"-o", cfg_opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    pid_t d = mount_daemon_pid(m);
    mount_expect_log(m, "unknown key bogus; the settings stay as they were");
    mount_expect_log(m, "policy=lax: expected enforce or audit; the settings stay");
    put_config(cfg, "[ckptfs]\npolicy=audit\nrescan=9\nbogus=1\n");
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_int_equal(wait_metric(m, "ckptfs_config_reloads_total{result=\"failed\"}", 1), 1);
    put_config(cfg, "[ckptfs]\npolicy=lax\n");
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_int_equal(wait_metric(m, "ckptfs_config_reloads_total{result=\"failed\"}", 2), 2);
    assert_int_equal(mount_metric(m, "ckptfs_config_reloads_total{result=\"ok\"}"), 0);
    g_autofree char *text = control_text(m);
    assert_string_equal(text, "policy=enforce\nlegacy=ro\nrescan=2\ntag_env=\n");
    assert_int_equal(mount_daemon_pid(m), d); /* the same daemon, still serving */
    assert_true(is_fuse_mount(m->mnt));
    put_config(cfg, "[ckptfs]\npolicy=audit\n");
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_true(wait_control(m, "policy=audit\n"));
    assert_int_equal(wait_metric(m, "ckptfs_config_reloads_total{result=\"ok\"}", 1), 1);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static guint count_lines(const char *path)
{
    g_autofree char *t = NULL;
    if (!g_file_get_contents(path, &t, NULL, NULL))
        return 0;
    guint n = 0;
    for (const char *p = t; *p; p++)
        n += *p == '\n';
    return n;
}

/* Log rotation: mv collision_log=FILE away, kill -HUP, and the next
 * refusal lands in a new FILE (the moved one keeps the old records). */
static void test_collision_log_rotation(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *log = g_build_filename(m->base, "collisions.jsonl", NULL);
    g_autofree char *rotated = g_build_filename(m->base, "collisions.jsonl.1", NULL);
    g_autofree char *opt = g_strdup_printf("collision_log=%s", log);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    mount_expect_log(m, "collision refused");
    assert_int_equal(crossing(m, "before", NULL), 1);
    assert_int_equal(count_lines(log), 1);
    assert_int_equal(rename(log, rotated), 0);
    assert_int_equal(kill(mount_daemon_pid(m), SIGHUP), 0);
    assert_int_equal(wait_metric(m, "ckptfs_config_reloads_total{result=\"ok\"}", 1), 1);
    assert_int_equal(crossing(m, "after", NULL), 1);
    assert_int_equal(count_lines(log), 1);
    assert_int_equal(count_lines(rotated), 1);
    g_autofree char *fresh = get_file(log);
    g_autofree char *old = get_file(rotated);
    assert_non_null(strstr(fresh, "\"path\":\"after\""));
    assert_non_null(strstr(old, "\"path\":\"before\""));
    /* .collisions has both: the file is a copy, not the memory */
    g_autofree char *col = V(m, ".collisions");
    g_autofree char *all = get_file(col);
    assert_non_null(strstr(all, "\"path\":\"before\""));
    assert_non_null(strstr(all, "\"path\":\"after\""));
    assert_true(is_fuse_mount(m->mnt));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Waits (20 s at most) until the daemon has finished n reloads, either way;
 * the count. */
static int64_t wait_reloads(Mount *m, int64_t n)
{
    int64_t done = 0;
    for (int i = 0; i < 2000 && done < n; i++) {
        if (i)
            sleep_ms(10);
        int64_t ok = mount_metric(m, "ckptfs_config_reloads_total{result=\"ok\"}");
        int64_t failed = mount_metric(m, "ckptfs_config_reloads_total{result=\"failed\"}");
        done = MAX(ok, 0) + MAX(failed, 0);
    }
    return done;
}

/* A collision_log= name turned, between two rotations, into a symbolic link
 * that leads into the backing directory (the file's own name, or a directory
 * on the way): SIGHUP refuses it with a warning naming the path, records go
 * on into the file open before, and nothing is made in the backing
 * directory, not even an empty file.  A link that leads elsewhere is
 * followed. */
static void test_collision_log_reopen_never_enters_the_backing_dir(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *logs = g_build_filename(m->base, "logs", NULL);
    g_autofree char *dir = g_build_filename(logs, "sub", NULL);
    g_autofree char *dir_moved = g_build_filename(logs, "sub.1", NULL);
    g_autofree char *log = g_build_filename(dir, "coll.log", NULL);
    g_autofree char *moved = g_build_filename(dir, "coll.log.1", NULL);
    g_autofree char *moved_later = g_build_filename(dir_moved, "coll.log.1", NULL);
    g_autofree char *elsewhere = g_build_filename(logs, "elsewhere.log", NULL);
    g_autofree char *a = g_build_filename(m->backing, "_state", "a", NULL);
    g_autofree char *evil = g_build_filename(a, "evil.log", NULL);
    g_autofree char *evil_by_dir = g_build_filename(a, "coll.log", NULL);
    assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
    assert_int_equal(g_mkdir_with_parents(a, 0755), 0);
    g_autofree char *opt = g_strdup_printf("collision_log=%s", log);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    mount_expect_log(m, "collision refused");
    mount_expect_log(m, "which is inside the backing directory or the mount");
    pid_t d = mount_daemon_pid(m);
    assert_int_equal(crossing(m, "before", NULL), 1);

    /* the file's own name */
    assert_int_equal(rename(log, moved), 0);
    assert_int_equal(symlink(evil, log), 0);
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_int_equal(wait_reloads(m, 1), 1);
    assert_int_equal(crossing(m, "after-link", NULL), 1);
    assert_int_equal(access(evil, F_OK), -1);
    assert_int_equal(dir_entries(a, false), 0);
    g_autofree char *old = get_file(moved);
    assert_non_null(strstr(old, "\"path\":\"before\""));
    assert_non_null(strstr(old, "\"path\":\"after-link\""));
    g_autofree char *said = g_strdup_printf(
        "reload: cannot open collision log %s: leads to %s, which is inside the backing "
        "directory or the mount",
        log, evil);
    assert_true(mount_log_has(m, said));
    assert_int_equal(mount_metric(m, "ckptfs_config_reloads_total{result=\"failed\"}"), 1);

    /* a directory on the way */
    assert_int_equal(unlink(log), 0);
    assert_int_equal(rename(dir, dir_moved), 0);
    assert_int_equal(symlink(a, dir), 0);
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_int_equal(wait_reloads(m, 2), 2);
    assert_int_equal(crossing(m, "after-dir", NULL), 1);
    assert_int_equal(access(evil_by_dir, F_OK), -1);
    assert_int_equal(dir_entries(a, false), 0);
    g_autofree char *older = get_file(moved_later);
    assert_non_null(strstr(older, "\"path\":\"after-dir\""));
    assert_int_equal(mount_metric(m, "ckptfs_config_reloads_total{result=\"failed\"}"), 2);

    /* a link that leads elsewhere is followed, and the file made there */
    assert_int_equal(unlink(dir), 0);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(symlink(elsewhere, log), 0);
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_int_equal(wait_reloads(m, 3), 3);
    assert_int_equal(mount_metric(m, "ckptfs_config_reloads_total{result=\"ok\"}"), 1);
    assert_int_equal(crossing(m, "after-fix", NULL), 1);
    g_autofree char *fresh = get_file(elsewhere);
    assert_non_null(strstr(fresh, "\"path\":\"after-fix\""));
    assert_int_equal(count_lines(elsewhere), 1);
    assert_int_equal(dir_entries(a, false), 0);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ckptctl set MNT rescan=0.7 (and the other live settings) then kill -9
 * of the daemon under -o supervise, then a takeover: the new daemons keep
 * every setting, and apply them (a crossing carries the live tag). */
static void test_live_settings_survive_kill_9_and_takeover(void **state)
{
    (void)state;
    const char *args[] = {"-o", "supervise", NULL};
    Mount *m = start(args);
    g_autofree char *out = NULL;
    assert_int_equal(ckptctl_cmd(&out, "set", m->mnt, "rescan=0.7", "policy=audit", "legacy=rw",
                                 "tag_env=CKPT_LIVE_TAG", NULL),
                     0);
    assert_string_equal(out, "policy=audit\nlegacy=rw\nrescan=0.7\ntag_env=CKPT_LIVE_TAG\n");
    for (int step = 0; step < 2; step++) {
        restart_daemon(m, step == 1);
        g_autofree char *text = control_text(m);
        assert_string_equal(text, "policy=audit\nlegacy=rw\nrescan=0.7\ntag_env=CKPT_LIVE_TAG\n");
        g_autofree char *name = g_strdup_printf("tagged%d", step);
        const char *env[] = {"CKPT_LIVE_TAG=step", "PATH=/usr/bin:/bin", NULL};
        assert_int_equal(crossing(m, name, env), 0); /* audit: allowed */
        g_autofree char *col = V(m, ".collisions");
        g_autofree char *all = get_file(col);
        g_autofree char *want = g_strdup_printf("\"path\":\"%s\"", name);
        const char *rec = strstr(all, want);
        assert_non_null(rec);
        assert_non_null(strstr(rec, "\"tag\":\"step\""));
    }
    /* the last word stays with .control: back to no tag, and it is kept too */
    assert_int_equal(ckptctl_cmd(NULL, "set", m->mnt, "tag_env=", NULL), 0);
    restart_daemon(m, false);
    g_autofree char *text = control_text(m);
    assert_string_equal(text, "policy=audit\nlegacy=rw\nrescan=0.7\ntag_env=\n");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Counter values of a .metrics text: series (name and labels) -> value,
 * for the series whose TYPE is counter. */
static GHashTable *counters_of(const char *text)
{
    GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GHashTable) is_counter = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (g_str_has_prefix(*l, "# TYPE ")) {
            g_auto(GStrv) w = g_strsplit(*l + 7, " ", 2);
            if (w[0] && w[1] && strcmp(w[1], "counter") == 0)
                g_hash_table_add(is_counter, g_strdup(w[0]));
            continue;
        }
        if (!**l || **l == '#')
            continue;
        const char *brace = strchr(*l, '{'), *sp = strrchr(*l, ' ');
        if (!brace || !sp)
            continue;
        g_autofree char *name = g_strndup(*l, (gsize)(brace - *l));
        if (!g_hash_table_contains(is_counter, name))
            continue;
        double v = g_ascii_strtod(sp + 1, NULL);
        g_hash_table_insert(h, g_strndup(*l, (gsize)(sp - *l)), g_memdup2(&v, sizeof v));
    }
    return h;
}

static double start_time_of(const char *text)
{
    const char *p = strstr(text, "\nprocess_start_time_seconds{");
    assert_non_null(p);
    return g_ascii_strtod(strchr(p, '}') + 2, NULL);
}

/* 20 kill -9 of the supervised daemon and 10 takeovers, between
 * crossings: every counter of .metrics only ever grows (none goes back to
 * 0), the start time moves with each new daemon, and .collisions holds
 * every record made. */
static void test_counters_monotonic_and_collisions_complete_across_kill_9(void **state)
{
    (void)state;
    const char *args[] = {"-o", "supervise", NULL};
    Mount *m = start(args);
    mount_expect_log(m, "collision refused");
    mount_expect_log(m, "not logged");
    g_autofree char *metrics = V(m, ".metrics");
    g_autofree char *col = V(m, ".collisions");
    int made = 0;
    g_autoptr(GHashTable) before = NULL;
    double started = 0;
    /* 30 restarts (20 kill -9, 10 takeovers), each checked after it */
    for (int step = 0; step <= 30; step++) {
        for (int i = 0; i < 5; i++) {
            g_autofree char *name = g_strdup_printf("r%d-%d", step, i);
            g_autofree char *p = g_build_filename(m->mnt, name, NULL);
            assert_int_equal(mkdir(p, 0755), -1);
            assert_int_equal(errno, EACCES);
            made++;
        }
        g_autofree char *f = mp(m, "busy");
        put_file(f, "ops to count");
        g_autofree char *text = get_file(metrics);
        g_autoptr(GHashTable) now = counters_of(text);
        double st = start_time_of(text);
        if (before) {
            GHashTableIter it;
            gpointer k, v;
            g_hash_table_iter_init(&it, before);
            while (g_hash_table_iter_next(&it, &k, &v)) {
                double *after = g_hash_table_lookup(now, k);
                if (!after)
                    fail_msg("step %d: series %s is gone", step, (char *)k);
                if (*after < *(double *)v)
                    fail_msg("step %d: %s went back from %g to %g", step, (char *)k, *(double *)v,
                             *after);
            }
            assert_true(st > started);
        }
        started = st;
        assert_int_equal(
            mount_metric(m, "ckptfs_collisions_total{kind=\"legacy-write\",verdict=\"denied\"}"),
            made);
        assert_int_equal(mount_metric(m, "ckptfs_daemon_attaches_total"), step);
        g_autofree char *all = get_file(col);
        guint lines = 0;
        for (const char *p = all; *p; p++)
            lines += *p == '\n';
        assert_int_equal(lines, made);
        for (int r = 0; r <= step; r++)
            for (int i = 0; i < 5; i++) {
                g_autofree char *want = g_strdup_printf("\"path\":\"r%d-%d\"", r, i);
                if (!strstr(all, want))
                    fail_msg("step %d: .collisions lost %s", step, want);
            }
        g_clear_pointer(&before, g_hash_table_unref);
        before = g_steal_pointer(&now);
        if (step < 30)
            restart_daemon(m, step % 3 == 2); /* kill -9, and every third a takeover */
    }
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* One ls: the daemon's own ENOSYS to the first OPENDIR (the kernel then
 * opens directories alone) is an expected miss, not an error. */
static void test_no_enosys_error_after_ls(void **state)
{
    (void)state;
    Mount *m = start(NULL);
    const char *ls[] = {"/bin/ls", "-la", m->mnt, NULL};
    assert_int_equal(run_cmd(ls, NULL), 0);
    g_autofree char *metrics = V(m, ".metrics");
    g_autofree char *text = get_file(metrics);
    if (strstr(text, "errno=\"ENOSYS\"") && !strstr(text, "op=\"opendir\",errno=\"ENOSYS\""))
        fail_msg("ENOSYS counted as an error:\n%s", text);
    assert_int_equal(mount_metric(m, "ckptfs_errors_total{errno=\"ENOSYS\"}"), -1);
    assert_int_equal(mount_metric(m, "ckptfs_misses_total{op=\"opendir\",errno=\"ENOSYS\"}"), 1);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static const char *const kinds[] = {"foreign-write",        "legacy-write",
                                    "outside-namespace",    "cross-namespace-rename",
                                    "cross-namespace-link", "cross-namespace-symlink"};

static void assert_both_verdicts(Mount *m)
{
    for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++)
        for (int a = 0; a < 2; a++) {
            g_autofree char *series =
                g_strdup_printf("ckptfs_collisions_total{kind=\"%s\",verdict=\"%s\"}", kinds[k],
                                a ? "allowed" : "denied");
            if (mount_metric(m, series) < 0)
                fail_msg("no series %s", series);
        }
}

/* Both verdict series of every kind, under enforce and under audit (and
 * legacy=rw): a policy change makes no series vanish. */
static void test_both_verdict_series_in_enforce_and_audit(void **state)
{
    (void)state;
    Mount *m = start(NULL);
    mount_expect_log(m, "collision refused");
    assert_both_verdicts(m);
    assert_int_equal(crossing(m, "denied", NULL), 1);
    g_autofree char *control = V(m, ".control");
    assert_int_equal(setxattr(control, "user.ckptfs.policy", "audit", 5, 0), 0);
    assert_both_verdicts(m);
    assert_int_equal(crossing(m, "allowed", NULL), 0);
    assert_int_equal(
        mount_metric(m, "ckptfs_collisions_total{kind=\"legacy-write\",verdict=\"denied\"}"), 1);
    assert_int_equal(
        mount_metric(m, "ckptfs_collisions_total{kind=\"legacy-write\",verdict=\"allowed\"}"), 1);
    assert_int_equal(setxattr(control, "user.ckptfs.legacy", "rw", 2, 0), 0);
    assert_int_equal(setxattr(control, "user.ckptfs.policy", "enforce", 7, 0), 0);
    assert_both_verdicts(m);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* write(2) of n bytes to path opened with flags: 0 or the errno. */
static int write_to(const char *path, int flags, const char *data)
{
    int fd = open(path, flags);
    if (fd < 0)
        return errno;
    ssize_t n = write(fd, data, strlen(data));
    int err = n < 0 ? errno : (size_t)n == strlen(data) ? 0 : EIO;
    if (close(fd) != 0 && !err)
        err = errno;
    return err;
}

/* .control: its mode says who may write it, and writing key=value lines
 * applies them as setxattr does (an unknown key or a bad value: EINVAL,
 * nothing applied); tag_env is a live setting too; every other views file
 * stays EROFS; an unknown attribute name is EINVAL. */
static void test_control_write_semantics_and_mode(void **state)
{
    (void)state;
    const char *args[] = {"-o", "allow_other", NULL};
    Mount *m = start(args);
    g_autofree char *control = V(m, ".control");
    struct stat st;
    assert_int_equal(stat(control, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(access(control, W_OK), 0);

    /* echo policy=audit > _views/.control */
    assert_int_equal(write_to(control, O_WRONLY | O_TRUNC | O_CREAT, "policy=audit\n"), 0);
    g_autofree char *t1 = control_text(m);
    assert_string_equal(t1, "policy=audit\nlegacy=ro\nrescan=2\ntag_env=\n");
    /* several lines at once, blank lines and spaces allowed */
    assert_int_equal(write_to(control, O_WRONLY, "\n legacy = rw\nrescan=0.5\n\n"), 0);
    g_autofree char *t2 = control_text(m);
    assert_string_equal(t2, "policy=audit\nlegacy=rw\nrescan=0.5\ntag_env=\n");
    /* a bad line anywhere: EINVAL, nothing applied */
    assert_int_equal(write_to(control, O_WRONLY, "policy=enforce\nrescan=soon\n"), EINVAL);
    assert_int_equal(write_to(control, O_WRONLY, "policy=enforce\ncolour=red\n"), EINVAL);
    assert_int_equal(write_to(control, O_WRONLY, "policy\n"), EINVAL);
    g_autofree char *t3 = control_text(m);
    assert_string_equal(t3, t2);
    /* what a read gives can be written back */
    assert_int_equal(write_to(control, O_RDWR | O_APPEND, t1), 0);
    g_autofree char *t4 = control_text(m);
    assert_string_equal(t4, t1);
    /* tag_env, live: records carry the writer's variable from now on */
    assert_int_equal(write_to(control, O_WRONLY, "tag_env=CKPT_CONTROL_TAG\n"), 0);
    mount_expect_log(m, "collision allowed");
    const char *env[] = {"CKPT_CONTROL_TAG=from-control", NULL};
    assert_int_equal(crossing(m, "tagged", env), 0);
    g_autofree char *col = V(m, ".collisions");
    g_autofree char *records = get_file(col);
    assert_non_null(strstr(records, "\"tag\":\"from-control\""));
    char buf[64];
    ssize_t n = getxattr(control, "user.ckptfs.tag_env", buf, sizeof buf);
    assert_int_equal(n, (ssize_t)strlen("CKPT_CONTROL_TAG"));
    assert_int_equal(setxattr(control, "user.ckptfs.tag_env", "A=B", 3, 0), -1);
    assert_int_equal(errno, EINVAL);
    /* setxattr: an unknown key is EINVAL; a name outside ours ENOTSUP */
    assert_int_equal(setxattr(control, "user.ckptfs.colour", "red", 3, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(setxattr(control, "user.other", "x", 1, 0), -1);
    assert_int_equal(errno, ENOTSUP);
    /* the other views files stay read-only */
    const char *others[] = {".metrics", ".collisions"};
    for (gsize i = 0; i < G_N_ELEMENTS(others); i++) {
        g_autofree char *p = V(m, others[i]);
        assert_int_equal(write_to(p, O_WRONLY, "policy=enforce\n"), EROFS);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0444);
    }
    /* another user: the mode's answer (EACCES), and nothing changes */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
            _exit(99);
        int w = write_to(control, O_WRONLY, "policy=enforce\n");
        int a = access(control, W_OK) == 0 ? 0 : errno;
        _exit(w == EACCES && a == EACCES ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    g_autofree char *t5 = control_text(m);
    assert_non_null(strstr(t5, "policy=audit\n"));
    /* t1 written back set it (to none), then the variable */
    assert_int_equal(mount_metric(m, "ckptfs_control_changes_total{setting=\"tag_env\"}"), 2);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ckptctl set --json: rescan is a number, tag_env null when none. */
static void test_ckptctl_set_json_number(void **state)
{
    (void)state;
    Mount *m = start(NULL);
    const char *values[] = {"rescan=0.7", "rescan=2"};
    const double want[] = {0.7, 2};
    for (gsize i = 0; i < G_N_ELEMENTS(values); i++) {
        g_autofree char *out = NULL;
        assert_int_equal(ckptctl_cmd(&out, "set", "--json", m->mnt, values[i], NULL), 0);
        g_autoptr(JsonParser) p = json_parser_new();
        assert_true(json_parser_load_from_data(p, out, -1, NULL));
        JsonObject *o = json_node_get_object(json_parser_get_root(p));
        JsonNode *r = json_object_get_member(o, "rescan");
        assert_non_null(r);
        assert_int_equal(json_node_get_node_type(r), JSON_NODE_VALUE);
        GType t = json_node_get_value_type(r);
        if (t != G_TYPE_DOUBLE && t != G_TYPE_INT64)
            fail_msg("rescan is not a number: %s", out);
        assert_true(json_node_get_double(r) == want[i]);
        assert_string_equal(json_object_get_string_member(o, "policy"), "enforce");
        assert_true(json_node_is_null(json_object_get_member(o, "tag_env")));
    }
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sighup_keeps_mount_and_applies_edited_config),
        cmocka_unit_test(test_sighup_bad_config_keeps_settings),
        cmocka_unit_test(test_collision_log_rotation),
        cmocka_unit_test(test_collision_log_reopen_never_enters_the_backing_dir),
        cmocka_unit_test(test_live_settings_survive_kill_9_and_takeover),
        cmocka_unit_test(test_counters_monotonic_and_collisions_complete_across_kill_9),
        cmocka_unit_test(test_no_enosys_error_after_ls),
        cmocka_unit_test(test_both_verdict_series_in_enforce_and_audit),
        cmocka_unit_test(test_control_write_semantics_and_mode),
        cmocka_unit_test(test_ckptctl_set_json_number),
    };
    /* CKPTFS_LIFECYCLE_ONLY=test_... (a cmocka pattern) runs one test */
    const char *only = g_getenv("CKPTFS_LIFECYCLE_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("mount/settings", tests, NULL, NULL);
}
