/* core/collision.c: the collision records of ckptfs(8) and their log. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collision.h"
#include "json.h"

/* 2026-12-01T18:00:00.123Z */
#define EXAMPLE_TIME_US (G_GINT64_CONSTANT(1796148000) * G_USEC_PER_SEC + 123456)

static CkCollision example_record(void)
{
    return (CkCollision){
        .time_us = EXAMPLE_TIME_US,
        .kind = "foreign-write",
        .denied = true,
        .op = "rename",
        .path = "_state/b/v1/0/checkpoint-1.snap",
        .path2 = NULL,
        .caller_job = "a",
        .owner_job = "b",
        .pid = 1234,
        .uid = 1000,
        .comm = "worker",
    };
}

static void test_example_record(void **st)
{
    (void)st;
    CkCollision c = example_record();
    g_autofree char *json = ck_collision_to_json(&c);
    assert_string_equal(
        json, "{\"time\":\"2026-12-01T18:00:00.123Z\",\"kind\":\"foreign-write\","
              "\"verdict\":\"denied\",\"op\":\"rename\","
              "\"path\":\"_state/b/v1/0/checkpoint-1.snap\",\"path2\":null,\"caller_job\":\"a\","
              "\"owner_job\":\"b\",\"pid\":1234,\"uid\":1000,\"comm\":\"worker\"}");
}

static void test_nulls_and_audit(void **st)
{
    (void)st;
    CkCollision c = {.time_us = 0,
                     .kind = "legacy-write",
                     .denied = false,
                     .op = "create",
                     .path = "v1/0/f",
                     .path2 = "v2/0/f",
                     .pid = 1,
                     .uid = 0};
    g_autofree char *json = ck_collision_to_json(&c);
    assert_string_equal(json, "{\"time\":\"1970-01-01T00:00:00.000Z\",\"kind\":\"legacy-write\","
                              "\"verdict\":\"allowed\",\"op\":\"create\",\"path\":\"v1/0/f\","
                              "\"path2\":\"v2/0/f\",\"caller_job\":null,\"owner_job\":null,"
                              "\"pid\":1,\"uid\":0,\"comm\":null}");
}

/* tag_env=VAR mounts: "tag" last, a string or null; without it, no member. */
static void test_tag(void **st)
{
    (void)st;
    CkCollision c = example_record();
    c.has_tag = true;
    c.tag = "tests/test_x.py::test_a (call)";
    g_autofree char *json = ck_collision_to_json(&c);
    assert_true(
        g_str_has_suffix(json, "\"comm\":\"worker\",\"tag\":\"tests/test_x.py::test_a (call)\"}"));
    c.tag = NULL;
    g_autofree char *null_tag = ck_collision_to_json(&c);
    assert_true(g_str_has_suffix(null_tag, "\"comm\":\"worker\",\"tag\":null}"));
    c.has_tag = false;
    g_autofree char *none = ck_collision_to_json(&c);
    assert_null(strstr(none, "\"tag\""));
}

static void test_escaping(void **st)
{
    (void)st;
    CkCollision c = example_record();
    c.path = "_state/b/we\"ird\nname\\\xff";
    c.comm = "a\tb";
    g_autofree char *json = ck_collision_to_json(&c);
    assert_null(strchr(json, '\n'));
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) recs = ck_collision_parse_lines(json, strlen(json), &err);
    assert_non_null(recs);
    assert_int_equal(recs->len, 1);
    JsonObject *o = recs->pdata[0];
    assert_string_equal(json_object_get_string_member(o, "path"),
                        "_state/b/we\"ird\nname\\\xef\xbf\xbd");
    assert_string_equal(json_object_get_string_member(o, "comm"), "a\tb");
}

/* Every control character comes out escaped, U+001F too (json-glib 1.6
 * writes that one raw), in records and in any other document. */
static void test_control_characters(void **st)
{
    (void)st;
    char path[64] = "_state/b/";
    size_t n = strlen(path);
    for (char ch = 1; ch < 0x20; ch++)
        path[n++] = ch;
    path[n++] = 0x7f;
    path[n] = '\0';
    CkCollision c = example_record();
    c.path = path;
    g_autofree char *json = ck_collision_to_json(&c);
    for (const char *p = json; *p; p++)
        assert_true((unsigned char)*p >= 0x20);
    assert_non_null(strstr(json, "\\u001f"));
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) recs = ck_collision_parse_lines(json, strlen(json), &err);
    assert_non_null(recs);
    assert_int_equal(recs->len, 1);
    assert_string_equal(json_object_get_string_member(recs->pdata[0], "path"), path);

    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_array(b);
    ck_json_add_string(b, "a\037b");
    json_builder_end_array(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *line = ck_json_text(root, false);
    assert_string_equal(line, "[\"a\\u001fb\"]");
    g_autofree char *pretty = ck_json_text(root, true);
    assert_string_equal(pretty, "[\n  \"a\\u001fb\"\n]");
}

static void test_ring_keeps_newest(void **st)
{
    (void)st;
    g_autoptr(GError) err = NULL;
    g_autoptr(CkCollisionLog) log = ck_collision_log_new(3, NULL, NULL, &err);
    assert_non_null(log);
    g_autoptr(GBytes) empty = ck_collision_log_snapshot(log);
    assert_int_equal(g_bytes_get_size(empty), 0);
    for (int i = 0; i < 10; i++) {
        CkCollision c = example_record();
        c.pid = 100 + i;
        ck_collision_log_append(log, &c);
    }
    assert_int_equal(ck_collision_log_total(log), 10);
    g_autoptr(GBytes) snap = ck_collision_log_snapshot(log);
    gsize len;
    const char *data = g_bytes_get_data(snap, &len);
    assert_int_equal(data[len - 1], '\n');
    g_autoptr(GPtrArray) recs = ck_collision_parse_lines(data, len, &err);
    assert_non_null(recs);
    assert_int_equal(recs->len, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(json_object_get_int_member(recs->pdata[i], "pid"), 107 + i);
}

static void test_keep_zero(void **st)
{
    (void)st;
    g_autoptr(CkCollisionLog) log = ck_collision_log_new(0, NULL, NULL, NULL);
    CkCollision c = example_record();
    ck_collision_log_append(log, &c);
    assert_int_equal(ck_collision_log_total(log), 1);
    g_autoptr(GBytes) snap = ck_collision_log_snapshot(log);
    assert_int_equal(g_bytes_get_size(snap), 0);
}

static void test_file_append(void **st)
{
    (void)st;
    char dir[] = "/tmp/ck-coll-XXXXXX";
    assert_non_null(mkdtemp(dir));
    g_autofree char *path = g_build_filename(dir, "log.jsonl", NULL);
    assert_true(g_file_set_contents(path, "{\"old\":1}\n", -1, NULL));
    CkCollision c = example_record();
    g_autofree char *want = ck_collision_to_json(&c);
    for (int round = 0; round < 2; round++) { /* a restart appends */
        g_autoptr(GError) err = NULL;
        CkCollisionLog *log = ck_collision_log_new(1, path, NULL, &err);
        assert_non_null(log);
        ck_collision_log_append(log, &c);
        ck_collision_log_append(log, &c);
        ck_collision_log_free(log);
    }
    g_autofree char *got = NULL;
    assert_true(g_file_get_contents(path, &got, NULL, NULL));
    g_autofree char *expect =
        g_strconcat("{\"old\":1}\n", want, "\n", want, "\n", want, "\n", want, "\n", NULL);
    assert_string_equal(got, expect);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    unlink(path);

    /* a fresh file is created 0644 (under umask 022) */
    umask(022);
    g_autoptr(CkCollisionLog) log = ck_collision_log_new(1, path, NULL, NULL);
    assert_non_null(log);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);
    unlink(path);
    rmdir(dir);
}

static void test_file_error(void **st)
{
    (void)st;
    g_autoptr(GError) err = NULL;
    CkCollisionLog *log = ck_collision_log_new(1, "/nonexistent-dir/x/log", NULL, &err);
    assert_null(log);
    assert_non_null(err);
    assert_true(err->domain == G_FILE_ERROR);
    assert_non_null(strstr(err->message, "/nonexistent-dir/x/log"));
}

static gpointer hammer(gpointer data)
{
    CkCollisionLog *log = data;
    for (int i = 0; i < 500; i++) {
        CkCollision c = example_record();
        c.pid = i;
        ck_collision_log_append(log, &c);
    }
    return NULL;
}

static void test_threads(void **st)
{
    (void)st;
    g_autoptr(CkCollisionLog) log = ck_collision_log_new(100, NULL, NULL, NULL);
    GThread *t[4];
    for (int i = 0; i < 4; i++)
        t[i] = g_thread_new("hammer", hammer, log);
    for (int i = 0; i < 4; i++)
        g_thread_join(t[i]);
    assert_int_equal(ck_collision_log_total(log), 2000);
    g_autoptr(GBytes) snap = ck_collision_log_snapshot(log);
    gsize len;
    const char *data = g_bytes_get_data(snap, &len);
    g_autoptr(GPtrArray) recs = ck_collision_parse_lines(data, len, NULL);
    assert_non_null(recs);
    assert_int_equal(recs->len, 100);
}

static void test_parse_lines(void **st)
{
    (void)st;
    const char *ok = "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}";
    g_autoptr(GPtrArray) r = ck_collision_parse_lines(ok, strlen(ok), NULL);
    assert_non_null(r);
    assert_int_equal(r->len, 3);
    assert_true(json_object_has_member(r->pdata[2], "c"));
    g_autoptr(GPtrArray) e = ck_collision_parse_lines("", 0, NULL);
    assert_non_null(e);
    assert_int_equal(e->len, 0);

    const char *bad[][2] = {
        {"{\"a\":1}\n{\"a\":\n", "line 2: "},
        {"{\"a\":1}\n\n[1,2]\n", "line 3: not a JSON object"},
        {"42\n", "line 1: not a JSON object"},
        {"{\"a\":1} x\n", "line 1: "},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) err = NULL;
        GPtrArray *res = ck_collision_parse_lines(bad[i][0], strlen(bad[i][0]), &err);
        assert_null(res);
        assert_non_null(err);
        assert_true(g_error_matches(err, CK_COLLISION_ERROR, CK_COLLISION_ERROR_PARSE));
        if (!g_str_has_prefix(err->message, bad[i][1]))
            fail_msg("%s: got %s", bad[i][0], err->message);
    }
    const char nul[] = "{\"a\":1}\n{\"a\0\":1}\n";
    g_autoptr(GError) err = NULL;
    assert_null(ck_collision_parse_lines(nul, sizeof nul - 1, &err));
    assert_string_equal(err->message, "line 2: NUL byte");
}

/* A reader that goes on: torn lines (a writer killed mid-line) are
 * skipped and counted, the records around them kept. */
static void test_parse_skipping_torn_lines(void **st)
{
    (void)st;
    const char log[] = "{\"kind\":\"a\"}\n"
                       "{\"kind\":\"fore\n" /* torn: the rest of it never came */
                       "{\"kind\":\"b\"}\r\n"
                       "\n"
                       "[1]\n"
                       "{\"kind\":\"c\"}\n"
                       "{\"kind\":\"d\""; /* the last, without its LF */
    guint skipped = 99, first = 99;
    g_autoptr(GPtrArray) r =
        ck_collision_parse_lines_skipping(log, sizeof log - 1, &skipped, &first);
    assert_non_null(r);
    assert_int_equal(r->len, 3);
    assert_string_equal(json_object_get_string_member(r->pdata[0], "kind"), "a");
    assert_string_equal(json_object_get_string_member(r->pdata[1], "kind"), "b");
    assert_string_equal(json_object_get_string_member(r->pdata[2], "kind"), "c");
    assert_int_equal(skipped, 3);
    assert_int_equal(first, 2);
    const char nul[] = "{\"a\":1}\n{\"a\0\":1}\n";
    g_autoptr(GPtrArray) n = ck_collision_parse_lines_skipping(nul, sizeof nul - 1, &skipped, NULL);
    assert_int_equal(n->len, 1);
    assert_int_equal(skipped, 1);
    g_autoptr(GPtrArray) e = ck_collision_parse_lines_skipping("", 0, &skipped, &first);
    assert_int_equal(e->len, 0);
    assert_int_equal(skipped, 0);
    assert_int_equal(first, 0);
}

/* A store in memory shared with the next process (the state memfd of a
 * mount): a log made again on it has every line and the counts. */
static void test_store_outlives_log(void **st)
{
    (void)st;
    size_t size = ck_collision_store_size(5);
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(mem != MAP_FAILED);
    CkCollisionLog *log = ck_collision_log_new_in(mem, size, 5, NULL, NULL, NULL);
    for (int i = 0; i < 7; i++) {
        CkCollision c = example_record();
        c.pid = i;
        ck_collision_log_append(log, &c);
    }
    g_autoptr(GBytes) before = ck_collision_log_snapshot(log);
    gint64 last = ck_collision_log_last_time(log);
    ck_collision_log_free(log);
    /* in another process, as a daemon that takes the mount over */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CkCollisionLog *again = ck_collision_log_new_in(mem, size, 5, NULL, NULL, NULL);
        CkCollision c = example_record();
        c.pid = 7;
        ck_collision_log_append(again, &c);
        _exit(ck_collision_log_total(again) == 8 ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CkCollisionLog *back = ck_collision_log_new_in(mem, size, 5, NULL, NULL, NULL);
    assert_int_equal(ck_collision_log_total(back), 8);
    assert_true(ck_collision_log_last_time(back) > last);
    g_autoptr(GBytes) after = ck_collision_log_snapshot(back);
    gsize len;
    const char *data = g_bytes_get_data(after, &len);
    g_autoptr(GPtrArray) recs = ck_collision_parse_lines(data, len, NULL);
    assert_non_null(recs);
    assert_int_equal(recs->len, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(json_object_get_int_member(recs->pdata[i], "pid"), 3 + i);
    /* the first four lines of `before` (pids 2..6) minus the oldest: 3..6 */
    gsize blen;
    const char *bdata = g_bytes_get_data(before, &blen);
    const char *second = strchr(bdata, '\n') + 1;
    assert_memory_equal(data, second, blen - (gsize)(second - bdata));
    ck_collision_log_free(back);
    /* a store made for another keep starts afresh */
    CkCollisionLog *other = ck_collision_log_new_in(mem, size, 4, NULL, NULL, NULL);
    assert_int_equal(ck_collision_log_total(other), 0);
    ck_collision_log_free(other);
    munmap(mem, size);
}

/* Writers killed at any instruction (kill -9 of a daemon in the middle of
 * an append, holding the lock): what the next one finds parses line by
 * line, is in order, and takes appends again. */
static void test_store_writer_killed(void **st)
{
    (void)st;
    enum { KEEP = 50 };
    size_t size = ck_collision_store_size(KEEP);
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(mem != MAP_FAILED);
    guint64 seen = 0;
    for (int round = 0; round < 200; round++) {
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            CkCollisionLog *log = ck_collision_log_new_in(mem, size, KEEP, NULL, NULL, NULL);
            guint64 n = ck_collision_log_total(log);
            char big[3000];
            memset(big, 'p', sizeof big - 1);
            big[sizeof big - 1] = '\0';
            for (bool told = false;; n++) {
                CkCollision c = example_record();
                c.pid = (pid_t)n;
                c.path = n % 3 ? "short" : big; /* lines of different lengths: the ring wraps */
                ck_collision_log_append(log, &c);
                /* killed from the first record on: on a loaded machine a child
                 * killed before it ran at all would test nothing */
                if (!told && write(ready[1], "x", 1) != 1)
                    _exit(2);
                told = true;
            }
        }
        close(ready[1]);
        char b;
        assert_int_equal(read(ready[0], &b, 1), 1);
        close(ready[0]);
        usleep((useconds_t)(100 + (round * 7919) % 1000));
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        CkCollisionLog *log = ck_collision_log_new_in(mem, size, KEEP, NULL, NULL, NULL);
        guint64 total = ck_collision_log_total(log);
        assert_true(total >= seen);
        seen = total;
        g_autoptr(GBytes) snap = ck_collision_log_snapshot(log);
        gsize len;
        const char *data = g_bytes_get_data(snap, &len);
        g_autoptr(GError) err = NULL;
        g_autoptr(GPtrArray) recs = ck_collision_parse_lines(data, len, &err);
        if (!recs)
            fail_msg("round %d: %s", round, err->message);
        assert_true(recs->len <= KEEP);
        assert_true(total < KEEP || recs->len >= KEEP - 1); /* at most the oldest lost */
        for (guint i = 1; i < recs->len; i++)
            assert_true(json_object_get_int_member(recs->pdata[i], "pid") >
                        json_object_get_int_member(recs->pdata[i - 1], "pid"));
        if (recs->len)
            assert_int_equal(json_object_get_int_member(recs->pdata[recs->len - 1], "pid"),
                             (gint64)total - 1);
        ck_collision_log_free(log);
    }
    assert_true(seen > 0);
    munmap(mem, size);
}

/* Log rotation: the file moved away, reopen, and the next line lands in a
 * new file at the old path. */
static void test_reopen(void **st)
{
    (void)st;
    char dir[] = "/tmp/ck-coll-XXXXXX";
    assert_non_null(mkdtemp(dir));
    g_autofree char *path = g_build_filename(dir, "log.jsonl", NULL);
    g_autofree char *moved = g_build_filename(dir, "log.jsonl.1", NULL);
    g_autoptr(CkCollisionLog) log = ck_collision_log_new(10, path, NULL, NULL);
    assert_non_null(log);
    CkCollision c = example_record();
    ck_collision_log_append(log, &c);
    assert_int_equal(rename(path, moved), 0);
    c.pid = 2;
    ck_collision_log_append(log, &c); /* still to the old file */
    assert_true(ck_collision_log_reopen(log, NULL));
    c.pid = 3;
    ck_collision_log_append(log, &c);
    g_autofree char *old = NULL, *fresh = NULL;
    assert_true(g_file_get_contents(moved, &old, NULL, NULL));
    assert_true(g_file_get_contents(path, &fresh, NULL, NULL));
    assert_int_equal(strlen(old) > 0 && strchr(old, '\n') != strrchr(old, '\n'), 1);
    assert_non_null(strstr(fresh, "\"pid\":3"));
    assert_null(strstr(fresh, "\"pid\":2"));
    /* the directory gone: the old descriptor stays, with a reason */
    unlink(path);
    unlink(moved);
    rmdir(dir);
    g_autoptr(GError) err = NULL;
    assert_false(ck_collision_log_reopen(log, &err));
    assert_non_null(strstr(err->message, path));
    ck_collision_log_append(log, &c);
    g_autoptr(CkCollisionLog) none = ck_collision_log_new(1, NULL, NULL, NULL);
    assert_true(ck_collision_log_reopen(none, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_record),
        cmocka_unit_test(test_nulls_and_audit),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_control_characters),
        cmocka_unit_test(test_ring_keeps_newest),
        cmocka_unit_test(test_keep_zero),
        cmocka_unit_test(test_file_append),
        cmocka_unit_test(test_file_error),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_parse_lines),
        cmocka_unit_test(test_tag),
        cmocka_unit_test(test_parse_skipping_torn_lines),
        cmocka_unit_test(test_store_outlives_log),
        cmocka_unit_test(test_store_writer_killed),
        cmocka_unit_test(test_reopen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
