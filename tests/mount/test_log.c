/* The daemon's log: -o log=FILE gets the start line, the refusals and the
 * stop line, also from a background mount once it has detached from the
 * terminal; log_level= drops what is less urgent; lines on stderr are plain
 * ("ckptfs[PID]: LEVEL: text"); a FILE in the backing directory or the
 * mount is refused.  (No journal runs where the suites run: the journal's
 * fields are checked as built, in unit/log.) */
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "mountrun.h"

/* A write into job b's namespace by job a: refused (EACCES) and logged. */
static void refused_write(const char *mnt)
{
    g_autofree char *p = g_build_filename(mnt, "_state", "b", "x", NULL);
    errno = 0;
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0)
        close(fd);
    assert_int_equal(fd, -1);
    assert_int_equal(errno, EACCES);
}

static Mount *new_mount_with_b(void)
{
    Mount *m = mount_new();
    g_autofree char *b = g_build_filename(m->backing, "_state", "b", NULL);
    assert_int_equal(g_mkdir_with_parents(b, 0755), 0);
    return m;
}

static char *read_or_empty(const char *path)
{
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return g_strdup("");
    return text;
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Every line of a log= file: "TIME ckptfs[PID]: LEVEL: text", the text
 * without a second "ckptfs: ". */
static void assert_file_lines(const char *text)
{
    g_autoptr(GRegex) re = g_regex_new("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                                       "\\.[0-9]{3}Z ckptfs\\[[0-9]+\\]: (error|warning|info|"
                                       "debug): (?!ckptfs: ).",
                                       0, 0, NULL);
    assert_non_null(re);
    assert_true(g_str_has_suffix(text, "\n"));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l && l[1]; l++) /* the last is the empty tail */
        if (!g_regex_match(re, *l, 0, NULL))
            fail_msg("not a log line: \"%s\"", *l);
}

static void test_log_file_gets_start_refusal_and_stop(void **state)
{
    (void)state;
    Mount *m = new_mount_with_b();
    g_autofree char *file = g_build_filename(m->base, "ckptfs.log", NULL);
    g_autofree char *opt = g_strdup_printf("job=a,log=%s", file);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    refused_write(m->mnt);
    assert_int_equal(mount_stop(m), 0);

    g_autofree char *text = get_file(file);
    char *real_mnt = realpath(m->mnt, NULL), *real_backing = realpath(m->backing, NULL);
    g_autofree char *start =
        g_strdup_printf(", backing %s, mount %s, FUSE passthrough ", real_backing, real_mnt);
    g_autofree char *stop = g_strdup_printf("]: info: stop: %s: unmounted\n", real_mnt);
    free(real_mnt);
    free(real_backing);
    if (!strstr(text, start) || !strstr(text, stop))
        fprintf(stderr, "log file:\n%s", text);
    assert_int_equal(count_lines(text, "]: info: start: ckptfs "), 1);
    assert_int_equal(count_lines(text, start), 1);
    g_autofree char *target = g_strdup_printf(", identity job=a, log %s at info\n", file);
    assert_non_null(strstr(text, target));
    assert_int_equal(count_lines(text, "]: warning: collision refused: foreign-write create "
                                       "_state/b/x by job a (pid "),
                     1);
    assert_int_equal(count_lines(text, stop), 1);
    assert_true(strstr(text, "start: ") < strstr(text, "collision refused"));
    assert_true(strstr(text, "collision refused") < strstr(text, "stop: "));
    assert_file_lines(text);
    /* nothing of it on stderr */
    g_autofree char *err = get_file(m->log);
    assert_null(strstr(err, "start: "));
    assert_null(strstr(err, "collision refused"));
    /* the file is the daemon's: not world-readable */
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 0007, 0);
    mount_free(m);
}

/* log_level=warning keeps the refusal and drops the info lines;
 * log_level=error drops both.  The levels come from a config= file's
 * [ckptfs] group here. */
static void test_log_level_drops_less_urgent_records(void **state)
{
    (void)state;
    const char *levels[] = {"warning", "error"};
    for (size_t i = 0; i < G_N_ELEMENTS(levels); i++) {
        Mount *m = new_mount_with_b();
        g_autofree char *file = g_build_filename(m->base, "ckptfs.log", NULL);
        g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
        g_autofree char *cfg_text =
            g_strdup_printf("[ckptfs]\njob=a\nlog=%s\nlog_level=%s\n", file, levels[i]);
        put_file(cfg, cfg_text);
        g_autofree char *opt = g_strdup_printf("config=%s", cfg);
        const char *args[] = {"-o", opt, NULL};
        assert_int_equal(mount_start(m, args), 0);
        refused_write(m->mnt);
        assert_int_equal(mount_stop(m), 0);
        g_autofree char *text = get_file(file); /* created at start, even if empty */
        assert_null(strstr(text, "]: info: "));
        assert_null(strstr(text, "start: "));
        assert_null(strstr(text, "stop: "));
        if (strcmp(levels[i], "warning") == 0)
            assert_non_null(strstr(text, "]: warning: collision refused: foreign-write"));
        else
            assert_string_equal(text, "");
        mount_free(m);
    }
}

/* On stderr: one plain line per record, no glib decoration ("** (ckptfs:N):
 * WARNING **: time: ckptfs: ..." and a blank line). */
static void test_stderr_lines_are_plain(void **state)
{
    (void)state;
    Mount *m = new_mount_with_b();
    const char *args[] = {"-o", "job=a", NULL};
    assert_int_equal(mount_start(m, args), 0);
    refused_write(m->mnt);
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *text = get_file(m->log);
    assert_non_null(strstr(text, "]: info: start: ckptfs "));
    assert_non_null(strstr(text, "]: warning: collision refused: foreign-write"));
    assert_non_null(strstr(text, "]: info: stop: "));
    assert_null(strstr(text, "**"));
    assert_null(strstr(text, "\n\n"));
    g_autoptr(GRegex) re = g_regex_new(
        "^ckptfs\\[[0-9]+\\]: (error|warning|info|debug): (?!ckptfs: )[^ ]", 0, 0, NULL);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l && l[1]; l++)
        if (!g_regex_match(re, *l, 0, NULL))
            fail_msg("not a plain log line: \"%s\"", *l);
    mount_free(m);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (30 s at most: a loaded machine under ASan) for needle in path. */
static bool wait_for_text(const char *path, const char *needle)
{
    for (int i = 0; i < 3000; i++) {
        g_autofree char *text = read_or_empty(path);
        if (strstr(text, needle))
            return true;
        sleep_ms(10);
    }
    return false;
}

/* Without -f: ckptfs returns once the mount is up and its daemon (and
 * supervisor) go on detached, stderr on /dev/null.  A refusal made after
 * that, and the stop, still reach log=FILE.  Checked for the default
 * (supervised) background mount and for -o nosupervise. */
static void test_background_mount_logs_after_detaching(void **state)
{
    (void)state;
    const char *modes[] = {"", ",nosupervise"};
    for (size_t i = 0; i < G_N_ELEMENTS(modes); i++) {
        Mount *m = new_mount_with_b();
        g_autofree char *file = g_build_filename(m->base, "ckptfs.log", NULL);
        const char *variant = g_getenv("CKPTFS_TEST_OPTS");
        g_autofree char *opt =
            g_strdup_printf("job=a,log=%s%s%s%s", file, modes[i], variant && *variant ? "," : "",
                            variant ? variant : "");
        const char *argv[] = {g_getenv("CKPTFS_BIN"), "-o", opt, m->backing, m->mnt, NULL};
        int status = run_cmd(argv, NULL);
        bool up = mountrun_state(m->mnt) == MOUNTRUN_LIVE;
        /* nothing asserted while mounted: a failed assertion would leave it */
        bool refused = false, logged = false;
        if (up) {
            g_autofree char *p = g_build_filename(m->mnt, "_state", "b", "x", NULL);
            errno = 0;
            int fd = open(p, O_WRONLY | O_CREAT, 0644);
            refused = fd < 0 && errno == EACCES;
            if (fd >= 0)
                close(fd);
            logged = wait_for_text(file, "]: warning: collision refused: foreign-write create "
                                         "_state/b/x by job a");
        }
        bool unmounted = !up || mountrun_fusermount(m->mnt, false, NULL) ||
                         mountrun_fusermount(m->mnt, true, NULL);
        bool stopped = up && wait_for_text(file, "]: info: stop: ");
        g_autofree char *text = read_or_empty(file);
        if (!(up && refused && logged && stopped))
            fprintf(stderr, "background%s: exit status %d, up %d, log:\n%s", modes[i], status, up,
                    text);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_true(up);
        assert_true(unmounted);
        assert_true(refused);
        assert_true(logged);
        assert_true(stopped);
        assert_non_null(strstr(text, "]: info: start: ckptfs "));
        assert_non_null(strstr(text, modes[i][0] ? ", not supervised, " : ", supervised, "));
        assert_file_lines(text);
        mount_free(m);
    }
}

/* ckptfs run with args, its exit code and stderr. */
static int run_ckptfs(const char *const *args, char **err_out)
{
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)g_getenv("CKPTFS_BIN"));
    for (size_t i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    int status = -1;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                               NULL, NULL, err_out, &status, NULL);
    g_ptr_array_free(argv, TRUE);
    assert_true(ok);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void expect_refusal(Mount *m, const char *opt, const char *needle)
{
    const char *args[] = {"-f", "-o", opt, m->backing, m->mnt, NULL};
    g_autofree char *err = NULL;
    int rc = run_ckptfs(args, &err);
    if (rc != 2 || !strstr(err, needle))
        fprintf(stderr, "-o %s: exit %d, stderr: %s\n", opt, rc, err);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, needle));
    const char *nl = strchr(err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0'); /* exactly one line */
    assert_true(mountrun_state(m->mnt) == MOUNTRUN_NONE);
}

/* A log file in the backing directory or the mount (the daemon never
 * writes there), in no directory, or a level that is none: exit 2 with one
 * line, nothing mounted, nothing created. */
static void test_bad_log_options_refused(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *in_backing = g_build_filename(m->backing, "ckptfs.log", NULL);
    g_autofree char *in_mnt = g_build_filename(m->mnt, "ckptfs.log", NULL);
    g_autofree char *o1 = g_strdup_printf("log=%s", in_backing);
    expect_refusal(m, o1, "is inside the backing directory or the mount");
    g_autofree char *o2 = g_strdup_printf("log=%s", in_mnt);
    expect_refusal(m, o2, "is inside the backing directory or the mount");
    /* relative: canonicalised against the cwd, here the backing directory */
    g_autofree char *cwd = g_get_current_dir();
    assert_int_equal(chdir(m->backing), 0);
    expect_refusal(m, "log=rel.log", "is inside the backing directory or the mount");
    assert_int_equal(chdir(cwd), 0);
    expect_refusal(m, "log=/nonexistent/dir/ckptfs.log", "No such file or directory");
    expect_refusal(m, "log_level=loud", "log_level=loud");
    expect_refusal(m, "log=", "log=");
    struct stat st;
    if (stat("/run/systemd/journal/socket", &st) != 0)
        expect_refusal(m, "log=journal", "no journal here");
    if (stat("/dev/log", &st) != 0)
        expect_refusal(m, "log=syslog", "no syslog here");
    assert_int_equal(access(in_backing, F_OK), -1);
    assert_int_equal(access(in_mnt, F_OK), -1);
    g_autofree char *rel = g_build_filename(m->backing, "rel.log", NULL);
    assert_int_equal(access(rel, F_OK), -1);
    mount_free(m);
}

/* A log= name that leads into the backing directory by a symbolic link
 * (its own name, or a directory on the way) is refused as the directory
 * itself is, and nothing is made at its end.  (Through mount_start: a
 * mount that wrongly comes up is unmounted, not waited on.) */
static void test_log_by_a_link_into_the_backing_dir_refused(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *linked = g_build_filename(m->backing, "linked.log", NULL);
    g_autofree char *link = g_build_filename(m->base, "link.log", NULL);
    g_autofree char *dir_link = g_build_filename(m->base, "logs", NULL);
    g_autofree char *by_dir = g_build_filename(dir_link, "linked.log", NULL);
    assert_int_equal(symlink(linked, link), 0);
    assert_int_equal(symlink(m->backing, dir_link), 0);
    const char *names[] = {link, by_dir};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *opt = g_strdup_printf("log=%s", names[i]);
        const char *args[] = {"-o", opt, NULL};
        assert_int_equal(mount_start(m, args), -1);
        assert_true(mount_log_has(m, "is inside the backing directory or the mount"));
        assert_int_equal(access(linked, F_OK), -1);
    }
    mount_free(m);
}

/* log=/dev/stdout with the daemon's standard output a pipe (a container's
 * log): the name leads through /proc to a pipe, which no path names, and
 * the log goes down it. */
static void test_log_to_stdout_a_pipe(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *argv[] = {g_getenv("CKPTFS_BIN"),
                          "-f",
                          "-o",
                          "nosupervise,log=/dev/stdout",
                          m->backing,
                          m->mnt,
                          NULL};
    GPid pid;
    int out;
    g_autoptr(GError) err = NULL;
    assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                         NULL, &pid, NULL, &out, NULL, &err));
    g_autoptr(GString) got = g_string_new(NULL);
    char buf[4096];
    ssize_t n;
    while (!strstr(got->str, "start:") && (n = read(out, buf, sizeof buf)) > 0)
        g_string_append_len(got, buf, n);
    const char *umount[] = {"fusermount3", "-u", m->mnt, NULL};
    g_spawn_sync(NULL, (char **)umount, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL,
                 NULL);
    while ((n = read(out, buf, sizeof buf)) > 0)
        g_string_append_len(got, buf, n);
    close(out);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!strstr(got->str, "start:"))
        fail_msg("nothing logged down the pipe: %s", got->str);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    mount_free(m);
}

/* Polls (up to 10 s) until the file at path holds text. */
static bool eventually_has(const char *path, const char *text)
{
    for (int i = 0; i < 1000; i++) {
        g_autofree char *t = read_or_empty(path);
        if (strstr(t, text))
            return true;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* SIGHUP opens log=FILE again under its name (rotation by mv) and applies a
 * log_level= the config file changed, without a remount. */
static void test_sighup_reopens_the_log_and_applies_its_level(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *file = g_build_filename(m->base, "ckptfs.log", NULL);
    g_autofree char *rotated = g_build_filename(m->base, "ckptfs.log.1", NULL);
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    assert_true(g_file_set_contents(cfg, "[ckptfs]\nlog_level=warning\n", -1, NULL));
    g_autofree char *opt = g_strdup_printf("log=%s,config=%s", file, cfg);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    assert_int_equal(rename(file, rotated), 0);
    assert_true(g_file_set_contents(cfg, "[ckptfs]\nlog_level=info\n", -1, NULL));
    assert_int_equal(kill(m->pid, SIGHUP), 0);
    /* the reload's own line is info: it shows only at the new level, and
     * only in the file made again */
    assert_true(eventually_has(file, "]: info: reload: done"));
    g_autofree char *old = read_or_empty(rotated);
    assert_null(strstr(old, "reload: done"));
    assert_null(strstr(old, "takes a remount"));
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *text = read_or_empty(file);
    assert_non_null(strstr(text, "]: info: stop: "));
    mount_free(m);
}

/* Waits (30 s at most) until path holds needle n times or more, or until
 * the file at stop exists (where a reload that should have been refused
 * went). */
static bool wait_for_count(const char *path, const char *needle, int n, const char *stop)
{
    for (int i = 0; i < 3000; i++) {
        g_autofree char *text = read_or_empty(path);
        if (count_lines(text, needle) >= n || access(stop, F_OK) == 0)
            return true;
        sleep_ms(10);
    }
    return false;
}

/* A log= name turned, between two rotations, into a symbolic link that
 * leads into the backing directory (the file's own name, or a directory on
 * the way): SIGHUP refuses it with one warning naming the path, the log
 * goes on into the file open before, and nothing is made in the backing
 * directory, not even an empty file. */
static void test_sighup_never_reopens_the_log_in_the_backing_dir(void **state)
{
    (void)state;
    Mount *m = new_mount_with_b();
    g_autofree char *logs = g_build_filename(m->base, "logs", NULL);
    g_autofree char *dir = g_build_filename(logs, "sub", NULL);
    g_autofree char *dir_moved = g_build_filename(logs, "sub.1", NULL);
    g_autofree char *file = g_build_filename(dir, "ckptfs.log", NULL);
    g_autofree char *moved = g_build_filename(dir, "ckptfs.log.1", NULL);
    g_autofree char *moved_later = g_build_filename(dir_moved, "ckptfs.log.1", NULL);
    g_autofree char *a = g_build_filename(m->backing, "_state", "a", NULL);
    g_autofree char *evil = g_build_filename(a, "evil.log", NULL);
    g_autofree char *evil_by_dir = g_build_filename(a, "ckptfs.log", NULL);
    assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
    assert_int_equal(g_mkdir_with_parents(a, 0755), 0);
    g_autofree char *opt = g_strdup_printf("job=a,log=%s", file);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    pid_t d = mount_daemon_pid(m);
    const char *refusal = "]: warning: reload: log=";

    /* the file's own name */
    assert_int_equal(rename(file, moved), 0);
    assert_int_equal(symlink(evil, file), 0);
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_true(wait_for_count(moved, refusal, 1, evil));
    refused_write(m->mnt);
    assert_true(wait_for_count(moved, "collision refused", 1, evil));
    assert_int_equal(access(evil, F_OK), -1);
    assert_int_equal(dir_entries(a, false), 0);
    g_autofree char *text = read_or_empty(moved);
    g_autofree char *said = g_strdup_printf("]: warning: reload: log=%s: leads to %s, which is "
                                            "inside the backing directory or the mount",
                                            file, evil);
    if (count_lines(text, said) != 1)
        fprintf(stderr, "log file:\n%s", text);
    assert_int_equal(count_lines(text, said), 1);
    assert_int_equal(count_lines(text, refusal), 1);

    /* a directory on the way */
    assert_int_equal(unlink(file), 0);
    assert_int_equal(rename(dir, dir_moved), 0);
    assert_int_equal(symlink(a, dir), 0);
    assert_int_equal(kill(d, SIGHUP), 0);
    assert_true(wait_for_count(moved_later, refusal, 2, evil_by_dir));
    refused_write(m->mnt);
    assert_true(wait_for_count(moved_later, "collision refused", 2, evil_by_dir));
    assert_int_equal(access(evil_by_dir, F_OK), -1);
    assert_int_equal(dir_entries(a, false), 0);
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *last = read_or_empty(moved_later);
    assert_non_null(strstr(last, "]: info: stop: "));
    assert_int_equal(dir_entries(a, false), 0);
    mount_free(m);
}

/* A supervisor re-executed by a takeover logs where the mount's log= says,
 * as before it: the restart of a daemon killed afterwards is in the file. */
static void test_supervisor_keeps_its_log_after_a_takeover(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *file = g_build_filename(m->base, "ckptfs.log", NULL);
    g_autofree char *opt = g_strdup_printf("supervise,log=%s", file);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    const char *argv[] = {g_getenv("CKPTFS_BIN"), "--takeover", m->mnt, NULL};
    int status = -1;
    g_autofree char *out = NULL, *err = NULL;
    assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                             &status, NULL));
    if (!g_spawn_check_wait_status(status, NULL))
        fail_msg("--takeover: %s", err);
    pid_t daemon = mount_daemon_pid(m);
    assert_true(daemon > 0);
    assert_int_equal(kill(daemon, SIGKILL), 0);
    assert_true(eventually_has(file, "a new one takes the connection over"));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_file_gets_start_refusal_and_stop),
        cmocka_unit_test(test_log_level_drops_less_urgent_records),
        cmocka_unit_test(test_stderr_lines_are_plain),
        cmocka_unit_test(test_background_mount_logs_after_detaching),
        cmocka_unit_test(test_bad_log_options_refused),
        cmocka_unit_test(test_log_by_a_link_into_the_backing_dir_refused),
        cmocka_unit_test(test_log_to_stdout_a_pipe),
        cmocka_unit_test(test_sighup_reopens_the_log_and_applies_its_level),
        cmocka_unit_test(test_sighup_never_reopens_the_log_in_the_backing_dir),
        cmocka_unit_test(test_supervisor_keeps_its_log_after_a_takeover),
    };
    return cmocka_run_group_tests_name("mount/log", tests, NULL, NULL);
}
