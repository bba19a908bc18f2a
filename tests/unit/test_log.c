/* fs/log.c without a mount: the journal entry a record becomes (no journal
 * runs where the suites run, so the fields are checked as built), the line
 * on stderr and in a file, levels, a file reopened after mv, and the start
 * and stop lines. */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <fuse_log.h>

#include "ckptfs-config.h"
#include "log.h"

/* The entry as "KEY=value" strings, and how often each key occurs. */
static char *entry_value(GPtrArray *e, const char *key, int *count)
{
    char *found = NULL;
    *count = 0;
    size_t kl = strlen(key);
    for (guint i = 0; i < e->len; i++) {
        gsize len;
        const char *d = g_bytes_get_data(e->pdata[i], &len);
        if (len > kl && memcmp(d, key, kl) == 0 && d[kl] == '=') {
            (*count)++;
            g_free(found);
            found = g_malloc0(len - kl); /* binary values too: no g_strndup */
            memcpy(found, d + kl + 1, len - kl - 1);
        }
    }
    return found;
}

static void assert_field(GPtrArray *e, const char *key, const char *want)
{
    int n;
    g_autofree char *v = entry_value(e, key, &n);
    if (!v || strcmp(v, want) != 0 || n != 1)
        fail_msg("%s: got %s (%d times), want %s", key, v ? v : "(none)", n, want);
}

static void assert_no_field(GPtrArray *e, const char *key)
{
    int n;
    g_autofree char *v = entry_value(e, key, &n);
    if (n)
        fail_msg("%s should not be in the entry (got %s)", key, v);
}

static void test_journal_entry_of_a_refusal(void **state)
{
    (void)state;
    CkCollision c = {.kind = "foreign-write",
                     .denied = true,
                     .op = "create",
                     .path = "_state/b/x",
                     .caller_job = "a",
                     .owner_job = "b",
                     .pid = 7,
                     .comm = "python"};
    GLogField f[16];
    g_autofree char *text = NULL;
    gsize n = log_collision_fields(&c, f, G_N_ELEMENTS(f), &text);
    g_autoptr(GPtrArray) e = log_journal_entry(G_LOG_LEVEL_WARNING, f, n, "/mnt/ckpt");
    assert_field(e, "MESSAGE",
                 "collision refused: foreign-write create _state/b/x by job a (pid 7, python), "
                 "owner b");
    assert_field(e, "PRIORITY", "4");
    assert_field(e, "SYSLOG_IDENTIFIER", "ckptfs");
    assert_field(e, "CKPTFS_MOUNT", "/mnt/ckpt");
    assert_field(e, "MESSAGE_ID", LOG_ID_COLLISION);
    assert_field(e, "CKPTFS_KIND", "foreign-write");
    assert_field(e, "CKPTFS_VERDICT", "denied");
    assert_field(e, "CKPTFS_OP", "create");
    assert_field(e, "CKPTFS_PATH", "_state/b/x");
    assert_field(e, "CKPTFS_JOB", "a");
    assert_field(e, "CKPTFS_OWNER", "b");
}

/* Allowed (audit), anonymous, unowned, a rename with its target. */
static void test_journal_entry_of_an_allowed_rename(void **state)
{
    (void)state;
    CkCollision c = {.kind = "cross-namespace-rename",
                     .denied = false,
                     .op = "rename",
                     .path = "_state/a/x",
                     .path2 = "_state/b/x",
                     .pid = 9,
                     .tag = "t1",
                     .has_tag = true};
    GLogField f[16];
    g_autofree char *text = NULL;
    gsize n = log_collision_fields(&c, f, G_N_ELEMENTS(f), &text);
    g_autoptr(GPtrArray) e = log_journal_entry(G_LOG_LEVEL_MESSAGE, f, n, NULL);
    assert_field(e, "MESSAGE",
                 "collision allowed: cross-namespace-rename rename _state/a/x -> _state/b/x by "
                 "job (anonymous) (pid 9, ?, tag t1), owner -");
    assert_field(e, "PRIORITY", "5");
    assert_field(e, "CKPTFS_VERDICT", "allowed");
    assert_field(e, "CKPTFS_JOB", "");
    assert_field(e, "CKPTFS_OWNER", "");
    assert_no_field(e, "CKPTFS_MOUNT");
}

/* glib's own fields: its PRIORITY is replaced, the "ckptfs: " of the text
 * dropped, names journald would refuse (or takes as its own) left out. */
static void test_journal_entry_of_a_plain_record(void **state)
{
    (void)state;
    GLogField f[] = {
        {"GLIB_DOMAIN", "GLib", -1},        {"PRIORITY", "4", -1}, {"CODE_FILE", "x.c", -1},
        {"MESSAGE", "ckptfs: hello", -1},   {"lower", "no", -1},   {"_PID", "1", -1},
        {"MESSAGE_ID", LOG_ID_RESTART, -1}, {"BIN", "a\nb\0c", 5},
    };
    g_autoptr(GPtrArray) e = log_journal_entry(G_LOG_LEVEL_DEBUG, f, G_N_ELEMENTS(f), "/m");
    assert_field(e, "MESSAGE", "hello");
    assert_field(e, "PRIORITY", "7");
    assert_field(e, "CODE_FILE", "x.c");
    assert_field(e, "GLIB_DOMAIN", "GLib");
    assert_field(e, "MESSAGE_ID", LOG_ID_RESTART);
    assert_no_field(e, "lower");
    assert_no_field(e, "_PID");
    int count;
    g_autofree char *bin = entry_value(e, "BIN", &count);
    assert_int_equal(count, 1);
    assert_memory_equal(bin, "a\nb\0c", 5); /* binary values pass whole */
}

static void test_lines(void **state)
{
    (void)state;
    g_autofree char *l1 = log_format_line(G_LOG_LEVEL_WARNING, "ckptfs: x\ny\tz", 12, 0);
    assert_string_equal(l1, "ckptfs[12]: warning: x\\ny\\x09z\n");
    g_autofree char *l2 = log_format_line(G_LOG_LEVEL_MESSAGE, "start", 3, 1234567);
    assert_string_equal(l2, "1970-01-01T00:00:01.234Z ckptfs[3]: info: start\n");
    g_autofree char *l3 = log_format_line(G_LOG_LEVEL_CRITICAL, "bad", 3, 0);
    assert_string_equal(l3, "ckptfs[3]: error: bad\n");
    g_autofree char *l4 = log_format_line(G_LOG_LEVEL_DEBUG, "d", 3, 0);
    assert_string_equal(l4, "ckptfs[3]: debug: d\n");
}

static void test_levels(void **state)
{
    (void)state;
    assert_int_equal(log_set_level("loud"), -EINVAL);
    assert_int_equal(log_set_level(NULL), -EINVAL);
    assert_false(log_level_known("Info"));
    const char *names[] = {"error", "warning", "info", "debug"};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        assert_true(log_level_known(names[i]));
        assert_int_equal(log_set_level(names[i]), 0);
        assert_string_equal(log_level_name(), names[i]);
    }
    assert_int_equal(log_set_level("info"), 0);
}

static char *dir_file(const char *dir, const char *name)
{
    return g_build_filename(dir, name, NULL);
}

static char *read_or_empty(const char *path)
{
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return g_strdup("");
    return text;
}

/* A file named by log=, moved away (logrotate, mv), then reopened: what
 * came before the reopen is in the moved file, what came after in a new
 * one of the old name.  Records below the level reach neither. */
static void test_file_reopen_and_level(void **state)
{
    (void)state;
    g_autofree char *dir = g_dir_make_tmp("ckptfs-log-XXXXXX", NULL);
    assert_non_null(dir);
    g_autofree char *path = dir_file(dir, "d.log");
    g_autofree char *moved = dir_file(dir, "d.log.1");
    umask(022);
    assert_int_equal(log_open(path, NULL, false, NULL, NULL), 0);
    assert_string_equal(log_target_name(), path);
    g_message("ckptfs: one");
    assert_int_equal(g_rename(path, moved), 0);
    g_message("two");
    assert_int_equal(log_reopen(NULL), 0);
    g_message("three");
    assert_int_equal(log_set_level("warning"), 0);
    g_message("four");
    g_warning("five");
    g_debug("six");
    fuse_log(FUSE_LOG_ERR, "fuse: seven\n");
    fuse_log(FUSE_LOG_INFO, "fuse: eight\n");
    assert_int_equal(log_set_level("info"), 0);
    g_autofree char *old = read_or_empty(moved);
    g_autofree char *now = read_or_empty(path);
    assert_non_null(strstr(old, " ckptfs["));
    assert_non_null(strstr(old, "]: info: one\n"));
    assert_non_null(strstr(old, "]: info: two\n"));
    assert_null(strstr(old, "three"));
    assert_non_null(strstr(now, "]: info: three\n"));
    assert_null(strstr(now, "four"));
    assert_non_null(strstr(now, "]: warning: five\n"));
    assert_null(strstr(now, "six"));
    assert_non_null(strstr(now, "]: error: fuse: seven\n")); /* libfuse's own, one line */
    assert_null(strstr(now, "eight"));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(log_open("stderr", NULL, false, NULL, NULL), 0);
    g_unlink(path);
    g_unlink(moved);
    g_rmdir(dir);
}

/* The start and stop lines as the daemon writes them. */
static void test_start_and_stop_lines(void **state)
{
    (void)state;
    g_autofree char *dir = g_dir_make_tmp("ckptfs-log-XXXXXX", NULL);
    g_autofree char *path = dir_file(dir, "s.log");
    assert_int_equal(log_open(path, "info", false, NULL, "/mnt/x"), 0);
    log_start(&(LogStart){.backing = "/data/b",
                          .mount = "/mnt/x",
                          .passthrough_why = "-o passthrough=off",
                          .supervised = true,
                          .identity = "env:CLINK_JOB_ID"});
    log_start(&(LogStart){.backing = "/data/b", .mount = "/mnt/x", .job = "j", .attaches = 2});
    log_stop("/mnt/x", 0, false);
    log_stop("/mnt/x", 15, false);
    log_stop("/mnt/x", 1, true);
    log_stop("/mnt/x", -EIO, false);
    g_autofree char *text = read_or_empty(path);
    g_autofree char *s1 = g_strdup_printf(
        "]: info: start: ckptfs %s, backing /data/b, mount /mnt/x, FUSE passthrough off "
        "(-o passthrough=off), supervised, identity env:CLINK_JOB_ID, log %s at info\n",
        CKPTFS_VERSION, path);
    assert_non_null(strstr(text, s1));
    g_autofree char *s2 = g_strdup_printf(
        "]: info: start: ckptfs %s, backing /data/b, mount /mnt/x, FUSE passthrough on, not "
        "supervised, identity job=j, log %s at info, took the live connection over (2 times "
        "since mounted)\n",
        CKPTFS_VERSION, path);
    assert_non_null(strstr(text, s2));
    assert_non_null(strstr(text, "]: info: stop: /mnt/x: unmounted\n"));
    assert_non_null(strstr(text, "]: info: stop: /mnt/x: signal SIGTERM, unmounting\n"));
    assert_non_null(
        strstr(text, "]: info: stop: /mnt/x: handing the connection over to a new daemon\n"));
    assert_non_null(strstr(text, "]: info: stop: /mnt/x: the session failed: "));
    assert_int_equal(log_open("stderr", NULL, false, NULL, NULL), 0);
    g_unlink(path);
    g_rmdir(dir);
}

/* A file in the backing directory or the mount, or in no directory, is
 * refused and not created. */
static void test_file_refused(void **state)
{
    (void)state;
    g_autofree char *dir = g_dir_make_tmp("ckptfs-log-XXXXXX", NULL);
    g_autofree char *backing = dir_file(dir, "backing");
    g_autofree char *mnt = dir_file(dir, "mnt");
    assert_int_equal(g_mkdir(backing, 0755), 0);
    assert_int_equal(g_mkdir(mnt, 0755), 0);
    g_autofree char *in_b = dir_file(backing, "x.log");
    g_autofree char *in_m = dir_file(mnt, "x.log");
    assert_int_equal(log_open(in_b, NULL, false, backing, mnt), 2);
    assert_int_equal(log_open(in_m, NULL, false, backing, mnt), 2);
    assert_int_equal(log_open("/nonexistent/dir/x.log", NULL, false, backing, mnt), 2);
    assert_int_equal(log_open("stderr", "loud", false, backing, mnt), 2);
    assert_int_equal(access(in_b, F_OK), -1);
    assert_int_equal(access(in_m, F_OK), -1);
    g_autoptr(GError) err = NULL;
    g_autofree char *rel = log_file_path("x.log", backing, mnt, &err);
    char *cwd = realpath(".", NULL);
    g_autofree char *want = g_build_filename(cwd, "x.log", NULL);
    free(cwd);
    assert_string_equal(rel, want); /* relative to the cwd at start */
    assert_int_equal(log_open("stderr", NULL, false, NULL, NULL), 0);
    g_rmdir(backing);
    g_rmdir(mnt);
    g_rmdir(dir);
}

int main(void)
{
    log_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal_entry_of_a_refusal),
        cmocka_unit_test(test_journal_entry_of_an_allowed_rename),
        cmocka_unit_test(test_journal_entry_of_a_plain_record),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_file_reopen_and_level),
        cmocka_unit_test(test_start_and_stop_lines),
        cmocka_unit_test(test_file_refused),
    };
    return cmocka_run_group_tests_name("unit/log", tests, NULL, NULL);
}
