/* ckptctl run against real mounts: record 013's failure exits 3 and names
 * both jobs, the fixed layout exits 0, COMMAND's status passes through, a
 * command killed by a signal or a SIGTERM to ckptctl run still unmounts and
 * leaves no daemon, two runs at once do not see each other, the mount
 * failing to come up exits 2, and --report holds the same report.
 *
 * Every run gets TMPDIR = a private directory of this program, so "no mount
 * left" is checked as "no line of /proc/self/mountinfo under it" and "no
 * daemon left" as "no process whose command line names it".  The teardown
 * lazily unmounts anything left there, so a failing test cleans up too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mount_gone.h"
#include "mountrun.h"
#include "testfs.h"

typedef struct {
    char *tmp;     /* TMPDIR of every run */
    char *scripts; /* tests/tools/run */
    const char *ckptctl;
} T;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Mount points of this process's namespace under dir. */
static GPtrArray *mounts_under(const char *dir)
{
    GPtrArray *found = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *text = NULL;
    assert_true(g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    size_t n = strlen(dir);
    for (char **l = lines; *l; l++) {
        g_auto(GStrv) f = g_strsplit(*l, " ", 6);
        if (g_strv_length(f) < 5)
            continue;
        if (strncmp(f[4], dir, n) == 0 && (f[4][n] == '/' || f[4][n] == '\0'))
            g_ptr_array_add(found, g_strdup(f[4]));
    }
    return found;
}

/* Pids of processes (other than us) whose command line mentions needle. */
static GPtrArray *processes_naming(const char *needle)
{
    GPtrArray *found = g_ptr_array_new();
    g_autoptr(GDir) d = g_dir_open("/proc", 0, NULL);
    assert_non_null(d);
    const char *name;
    while ((name = g_dir_read_name(d))) {
        if (!g_ascii_isdigit(name[0]) || atoi(name) == getpid())
            continue;
        g_autofree char *p = g_build_filename("/proc", name, "cmdline", NULL);
        g_autofree char *buf = NULL;
        gsize len = 0;
        if (!g_file_get_contents(p, &buf, &len, NULL) || !len)
            continue;
        for (gsize i = 0; i < len; i++)
            if (!buf[i])
                buf[i] = ' ';
        if (strstr(buf, needle))
            g_ptr_array_add(found, GINT_TO_POINTER(atoi(name)));
    }
    return found;
}

static void clear_leftovers(T *t)
{
    g_autoptr(GPtrArray) m = mounts_under(t->tmp);
    for (guint i = 0; i < m->len; i++) {
        const char *argv[] = {"fusermount3", "-u", "-z", m->pdata[i], NULL};
        g_spawn_sync(NULL, (char **)argv, NULL,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                     NULL, NULL, NULL, NULL, NULL, NULL);
    }
    g_autoptr(GPtrArray) p = processes_naming(t->tmp);
    for (guint i = 0; i < p->len; i++)
        kill(GPOINTER_TO_INT(p->pdata[i]), SIGKILL);
}

static int setup(void **state)
{
    T *t = g_new0(T, 1);
    t->ckptctl = g_getenv("CKPTCTL_BIN");
    t->scripts = g_strdup(g_getenv("RUN_SCRIPTS"));
    if (!t->ckptctl || !t->scripts)
        return -1;
    t->tmp = g_dir_make_tmp("ckptctl-run-test-XXXXXX", NULL);
    if (!t->tmp)
        return -1;
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    T *t = *state;
    clear_leftovers(t);
    testfs_remove(t->tmp);
    g_free(t->tmp);
    g_free(t->scripts);
    g_free(t);
    return 0;
}

static char **run_env(T *t)
{
    char **env = g_get_environ();
    return g_environ_setenv(env, "TMPDIR", t->tmp, TRUE);
}

static int ckptctl_run_v(T *t, char **out, char **err_out, const char *first, va_list ap)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)t->ckptctl);
    g_ptr_array_add(argv, "run");
    for (const char *a = first; a; a = va_arg(ap, const char *))
        g_ptr_array_add(argv, (gpointer)a);
    g_ptr_array_add(argv, NULL);
    g_auto(GStrv) env = run_env(t);
    g_autofree char *err = NULL;
    int status = -1;
    g_autoptr(GError) e = NULL;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, env, G_SPAWN_DEFAULT, NULL, NULL, out,
                               &err, &status, &e);
    assert_true(ok);
    if (out)
        printf("%s", *out);
    fprintf(stderr, "%s", err);
    if (err_out)
        *err_out = g_steal_pointer(&err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ckptctl run ARGS... ; returns its exit code (128+N when killed by N). */
static int ckptctl_run(T *t, char **out, const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    int rc = ckptctl_run_v(t, out, NULL, first, ap);
    va_end(ap);
    return rc;
}

/* The same, with its stderr too. */
static int ckptctl_run_err(T *t, char **out, char **err, const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    int rc = ckptctl_run_v(t, out, err, first, ap);
    va_end(ap);
    return rc;
}

static char *script(T *t, const char *name)
{
    return g_build_filename(t->scripts, name, NULL);
}

static char *tmp_path(T *t, const char *name)
{
    return g_build_filename(t->tmp, name, NULL);
}

static JsonObject *load_report(const char *path)
{
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) err = NULL;
    if (!json_parser_load_from_file(p, path, &err))
        fail_msg("--report %s: %s", path, err->message);
    JsonNode *root = json_parser_get_root(p);
    assert_true(JSON_NODE_HOLDS_OBJECT(root));
    return json_object_ref(json_node_get_object(root));
}

static void assert_nothing_left(T *t)
{
    g_autoptr(GPtrArray) m = mounts_under(t->tmp);
    for (guint i = 0; i < m->len; i++)
        fprintf(stderr, "left mounted: %s\n", (char *)m->pdata[i]);
    assert_int_equal(m->len, 0);
    /* fusermount3's auto_unmount watchdog exits just after the daemon */
    for (int i = 0; i < 200; i++) {
        g_autoptr(GPtrArray) p = processes_naming(t->tmp);
        if (!p->len)
            break;
        sleep_ms(50);
    }
    g_autoptr(GPtrArray) p = processes_naming(t->tmp);
    for (guint i = 0; i < p->len; i++) {
        g_autofree char *cl = g_strdup_printf("/proc/%d/cmdline", GPOINTER_TO_INT(p->pdata[i]));
        g_autofree char *text = NULL;
        g_file_get_contents(cl, &text, NULL, NULL);
        fprintf(stderr, "left running: pid %d: %s\n", GPOINTER_TO_INT(p->pdata[i]),
                text ? text : "?");
    }
    assert_int_equal(p->len, 0);
}

/* A line of text holding every one of the strings (NULL-terminated). */
static bool has_line(const char *text, ...)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        va_list ap;
        va_start(ap, text);
        bool all = true;
        for (const char *s = va_arg(ap, const char *); s && all; s = va_arg(ap, const char *))
            all = strstr(*l, s) != NULL;
        va_end(ap);
        if (all)
            return true;
    }
    return false;
}

static bool group_present(JsonArray *groups, const char *kind, const char *caller)
{
    for (guint i = 0; i < json_array_get_length(groups); i++) {
        JsonObject *g = json_array_get_object_element(groups, i);
        if (strcmp(json_object_get_string_member(g, "kind"), kind) == 0 &&
            !json_object_get_null_member(g, "caller_job") &&
            strcmp(json_object_get_string_member(g, "caller_job"), caller) == 0 &&
            json_object_get_int_member(g, "count") > 0)
            return true;
    }
    return false;
}

/* The rename onto v1/0/checkpoint-1.snap by job `caller`, as in the record. */
static bool renamed_snap(JsonArray *recs, const char *caller, const char *verdict)
{
    for (guint i = 0; i < json_array_get_length(recs); i++) {
        JsonObject *r = json_array_get_object_element(recs, i);
        if (strcmp(json_object_get_string_member(r, "op"), "rename") == 0 &&
            !json_object_get_null_member(r, "caller_job") &&
            strcmp(json_object_get_string_member(r, "caller_job"), caller) == 0 &&
            !json_object_get_null_member(r, "path2") &&
            strcmp(json_object_get_string_member(r, "path2"), "v1/0/checkpoint-1.snap") == 0 &&
            strcmp(json_object_get_string_member(r, "verdict"), verdict) == 0)
            return true;
    }
    return false;
}

static void test_record_failure_exits_3(void **state)
{
    T *t = *state;
    g_autofree char *sh = script(t, "record-013.sh");
    g_autofree char *rep = tmp_path(t, "r013.json");
    g_autofree char *out = NULL;
    int rc = ckptctl_run(t, &out, "--identity", "env:CLINK_JOB_ID", "--report", rep, "--", "sh", sh,
                         NULL);
    assert_int_equal(rc, 3);
    /* the human report names both jobs and the shared location */
    assert_true(has_line(out, "ckptctl run:   legacy-write ", " a ", " (legacy area) ", NULL));
    assert_true(has_line(out, "ckptctl run:   legacy-write ", " b ", " (legacy area) ", NULL));
    assert_non_null(strstr(out, "v1/0/checkpoint-1.snap"));
    assert_true(has_line(out, "ckptctl run:   shared-location ", " a,b ", " v1 ", NULL));
    /* each record is listed, with its group's kind and caller */
    assert_true(has_line(out, "legacy-write ", " a ", " allowed ", " rename ",
                         " v1/0/checkpoint-1.snap.tmp-a -> v1/0/checkpoint-1.snap ", " mv ", NULL));
    assert_true(has_line(out, "legacy-write ", " b ", " allowed ", " rename ",
                         " v1/0/checkpoint-1.snap.tmp-b -> v1/0/checkpoint-1.snap ", " mv ", NULL));
    assert_int_equal(testfs_table_aligned(out, "ckptctl run:   ", " OWNER "), 2);
    assert_int_equal(testfs_table_aligned(out, "ckptctl run:   ", " VERDICT "), 6);
    assert_int_equal(testfs_table_aligned(out, "ckptctl run:   ", " DETAIL"), 1);

    g_autoptr(JsonObject) r = load_report(rep);
    assert_int_equal(json_object_get_int_member(r, "exit_status"), 3);
    assert_int_equal(json_object_get_int_member(r, "command_exit"), 0);
    assert_true(json_object_get_null_member(r, "command_signal"));
    assert_string_equal(json_object_get_string_member(r, "policy"), "audit");
    assert_string_equal(json_object_get_string_member(r, "identity"), "env:CLINK_JOB_ID");
    JsonArray *cmd = json_object_get_array_member(r, "command");
    assert_int_equal(json_array_get_length(cmd), 2);
    assert_string_equal(json_array_get_string_element(cmd, 0), "sh");
    assert_string_equal(json_array_get_string_element(cmd, 1), sh);
    JsonArray *recs = json_object_get_array_member(r, "records");
    assert_true(renamed_snap(recs, "a", "allowed"));
    assert_true(renamed_snap(recs, "b", "allowed"));
    JsonArray *groups = json_object_get_array_member(r, "groups");
    assert_true(group_present(groups, "legacy-write", "a"));
    assert_true(group_present(groups, "legacy-write", "b"));
    gint64 grouped = 0;
    for (guint i = 0; i < json_array_get_length(groups); i++)
        grouped += json_object_get_int_member(json_array_get_object_element(groups, i), "count");
    assert_int_equal(grouped, json_array_get_length(recs));
    JsonArray *hz = json_object_get_array_member(r, "hazards");
    bool shared = false;
    for (guint i = 0; i < json_array_get_length(hz); i++) {
        JsonObject *h = json_array_get_object_element(hz, i);
        if (strcmp(json_object_get_string_member(h, "kind"), "shared-location") != 0)
            continue;
        JsonArray *jobs = json_object_get_array_member(h, "jobs");
        assert_int_equal(json_array_get_length(jobs), 2);
        assert_string_equal(json_array_get_string_element(jobs, 0), "a");
        assert_string_equal(json_array_get_string_element(jobs, 1), "b");
        assert_string_equal(json_object_get_string_member(h, "path"), "v1");
        assert_true(json_object_get_boolean_member(h, "collision"));
        shared = true;
    }
    assert_true(shared);
    assert_int_equal(json_object_get_int_member(r, "collisions"), json_array_get_length(recs) + 1);
    /* the temporary directory is gone, so is the mountpoint */
    assert_false(json_object_get_boolean_member(r, "dir_kept"));
    assert_false(g_file_test(json_object_get_string_member(r, "dir"), G_FILE_TEST_EXISTS));
    assert_false(g_file_test(json_object_get_string_member(r, "mount"), G_FILE_TEST_EXISTS));
    assert_nothing_left(t);
}

static void test_record_failure_enforce(void **state)
{
    T *t = *state;
    g_autofree char *sh = script(t, "record-013.sh");
    g_autofree char *rep = tmp_path(t, "enforce.json");
    int rc = ckptctl_run(t, NULL, "--policy", "enforce", "--identity", "env:CLINK_JOB_ID",
                         "--report", rep, "--", "sh", sh, NULL);
    assert_int_equal(rc, 3);
    g_autoptr(JsonObject) r = load_report(rep);
    assert_string_equal(json_object_get_string_member(r, "policy"), "enforce");
    /* the script fails at its first legacy write (set -e): mkdir v1 */
    assert_int_not_equal(json_object_get_int_member(r, "command_exit"), 0);
    JsonArray *recs = json_object_get_array_member(r, "records");
    assert_true(json_array_get_length(recs) >= 2);
    for (guint i = 0; i < json_array_get_length(recs); i++)
        assert_string_equal(
            json_object_get_string_member(json_array_get_object_element(recs, i), "verdict"),
            "denied");
    JsonArray *groups = json_object_get_array_member(r, "groups");
    assert_true(group_present(groups, "legacy-write", "a"));
    assert_true(group_present(groups, "legacy-write", "b"));
    assert_nothing_left(t);
}

static void test_fixed_layout_exits_0(void **state)
{
    T *t = *state;
    g_autofree char *sh = script(t, "fixed-layout.sh");
    g_autofree char *rep = tmp_path(t, "fixed.json");
    g_autofree char *out = NULL;
    int rc = ckptctl_run(t, &out, "--identity", "env:CLINK_JOB_ID", "--report", rep, "--", "sh", sh,
                         NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "ckptctl run: 0 collision record(s)"));
    g_autoptr(JsonObject) r = load_report(rep);
    assert_int_equal(json_object_get_int_member(r, "exit_status"), 0);
    assert_int_equal(json_array_get_length(json_object_get_array_member(r, "records")), 0);
    assert_int_equal(json_array_get_length(json_object_get_array_member(r, "groups")), 0);
    assert_int_equal(json_array_get_length(json_object_get_array_member(r, "hazards")), 0);
    assert_int_equal(json_object_get_int_member(r, "collisions"), 0);
    assert_nothing_left(t);
}

/* --json: the same report document on stdout, and no table. */
static void test_json_on_stdout(void **state)
{
    T *t = *state;
    g_autofree char *sh = script(t, "record-013.sh");
    g_autofree char *out = NULL;
    int rc = ckptctl_run(t, &out, "--json", "--identity", "env:CLINK_JOB_ID", "--", "sh", sh, NULL);
    assert_int_equal(rc, 3);
    assert_null(strstr(out, "ckptctl run:"));
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) err = NULL;
    if (!json_parser_load_from_data(p, out, -1, &err))
        fail_msg("--json output is not one JSON document: %s", err->message);
    JsonObject *r = json_node_get_object(json_parser_get_root(p));
    assert_int_equal(json_object_get_int_member(r, "exit_status"), 3);
    assert_true(json_array_get_length(json_object_get_array_member(r, "records")) > 0);
    assert_true(json_object_get_int_member(r, "collisions") > 0);
    assert_nothing_left(t);
}

/* With --json, COMMAND's own stdout goes to stderr, so stdout is the report
 * alone (`ckptctl run --json -- CMD | jq .`). */
static void test_json_command_stdout_to_stderr(void **state)
{
    T *t = *state;
    g_autofree char *out = NULL, *err = NULL;
    int rc = ckptctl_run_err(t, &out, &err, "--json", "--", "sh", "-c",
                             "echo from-$((40 + 2)); echo to-stderr >&2; "
                             "mkdir \"$CKPTFS_MOUNT/v1\"",
                             NULL);
    assert_int_equal(rc, 3);
    /* (the report's "command" holds the script itself, not what it prints) */
    assert_null(strstr(out, "from-42"));
    assert_non_null(strstr(err, "from-42"));
    assert_non_null(strstr(err, "to-stderr"));
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) e = NULL;
    if (!json_parser_load_from_data(p, out, -1, &e))
        fail_msg("stdout is not one JSON document: %s", e->message);
    JsonObject *r = json_node_get_object(json_parser_get_root(p));
    assert_int_equal(json_object_get_int_member(r, "exit_status"), 3);
    assert_nothing_left(t);
}

/* A reader of the report that is gone (`| head -c0`, a jq that stopped)
 * used to kill ckptctl run with SIGPIPE (exit 141), skipping the clean-up
 * of its temporary directories.  The exit status stays the collision status
 * and nothing is left behind. */
static void test_json_reader_gone(void **state)
{
    T *t = *state;
    const char *argv[] = {t->ckptctl,
                          "run",
                          "--json",
                          "--",
                          "sh",
                          "-c",
                          "echo from-command; mkdir \"$CKPTFS_MOUNT/v1\"",
                          NULL};
    g_auto(GStrv) env = run_env(t);
    GPid pid;
    int out_fd = -1;
    assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                         NULL, &pid, NULL, &out_fd, NULL, NULL));
    close(out_fd); /* the reader is gone before anything was written */
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);
    assert_nothing_left(t);
    g_autoptr(GDir) d = g_dir_open(t->tmp, 0, NULL);
    const char *n;
    while ((n = g_dir_read_name(d)))
        if (g_str_has_prefix(n, "ckptctl-run-"))
            fail_msg("left behind: %s/%s", t->tmp, n);
}

/* The report's tables stay aligned with real (32 hex) job ids: record
 * 013's failure with such ids. */
static void test_report_aligned_with_long_job_ids(void **state)
{
    T *t = *state;
    const char *body =
        "cd \"$CKPTFS_MOUNT\"; mkdir -p v1/0; "
        "CLINK_JOB_ID=0123456789abcdef0123456789abcdef sh -c 'echo a > v1/0/checkpoint-1.snap'; "
        "CLINK_JOB_ID=b sh -c 'echo b > v1/0/checkpoint-1.snap'; "
        "CLINK_JOB_ID=fedcba9876543210fedcba9876543210 PYTEST_CURRENT_TEST='t.py::test_c (call)' "
        "sh -c 'mkdir -p _state/b/v1 && echo c > _state/b/v1/x'";
    g_autofree char *out = NULL;
    assert_int_equal(
        ckptctl_run(t, &out, "--identity", "env:CLINK_JOB_ID", "--", "sh", "-c", body, NULL), 3);
    assert_int_equal(testfs_table_aligned(out, "ckptctl run:   ", " OWNER "), 4); /* groups */
    assert_true(testfs_table_aligned(out, "ckptctl run:   ", " VERDICT ") >= 4);  /* records */
    assert_true(has_line(out, "foreign-write", "fedcba9876543210fedcba9876543210",
                         "t.py::test_c (call)", NULL));
    assert_nothing_left(t);
}

/* --collision-exit N replaces 3 (pytest's "internal error"); clean runs keep
 * COMMAND's status. */
static void test_collision_exit(void **state)
{
    T *t = *state;
    g_autofree char *out = NULL;
    assert_int_equal(ckptctl_run(t, &out, "--collision-exit", "42", "--", "sh", "-c",
                                 "mkdir \"$CKPTFS_MOUNT/v1\"", NULL),
                     42);
    assert_non_null(strstr(out, "exit 42"));
    assert_int_equal(
        ckptctl_run(t, NULL, "--collision-exit", "42", "--", "sh", "-c", "exit 5", NULL), 5);
    assert_int_equal(ckptctl_run(t, NULL, "--collision-exit", "0", "--", "true", NULL), 2);
    assert_int_equal(ckptctl_run(t, NULL, "--collision-exit", "256", "--", "true", NULL), 2);
    assert_int_equal(ckptctl_run(t, NULL, "--collision-exit", "x", "--", "true", NULL), 2);
    assert_nothing_left(t);
}

/* The writing process's PYTEST_CURRENT_TEST (or --tag-env VAR) is each
 * record's "tag", in the JSON and in the table. */
static void test_tag_names_the_test(void **state)
{
    T *t = *state;
    g_autofree char *rep = tmp_path(t, "tag.json");
    g_autofree char *out = NULL;
    const char *body = "cd \"$CKPTFS_MOUNT\"; "
                       "PYTEST_CURRENT_TEST='tests/test_x.py::test_crossing (call)' mkdir v1; "
                       "mkdir v2";
    assert_int_equal(ckptctl_run(t, &out, "--report", rep, "--", "sh", "-c", body, NULL), 3);
    assert_non_null(strstr(out, "tests/test_x.py::test_crossing (call)"));
    g_autoptr(JsonObject) r = load_report(rep);
    JsonArray *recs = json_object_get_array_member(r, "records");
    assert_int_equal(json_array_get_length(recs), 2);
    bool tagged = false, untagged = false;
    for (guint i = 0; i < 2; i++) {
        JsonObject *o = json_array_get_object_element(recs, i);
        assert_true(json_object_has_member(o, "tag"));
        const char *path = json_object_get_string_member(o, "path");
        if (strcmp(path, "v1") == 0) {
            assert_string_equal(json_object_get_string_member(o, "tag"),
                                "tests/test_x.py::test_crossing (call)");
            tagged = true;
        } else {
            assert_string_equal(path, "v2");
            assert_true(json_object_get_null_member(o, "tag"));
            untagged = true;
        }
    }
    assert_true(tagged && untagged);
    /* another variable */
    g_autofree char *rep2 = tmp_path(t, "tag2.json");
    assert_int_equal(ckptctl_run(t, NULL, "--tag-env", "CTEST_NAME", "--report", rep2, "--", "sh",
                                 "-c", "CTEST_NAME=suite.case mkdir \"$CKPTFS_MOUNT/v1\"", NULL),
                     3);
    g_autoptr(JsonObject) r2 = load_report(rep2);
    JsonArray *recs2 = json_object_get_array_member(r2, "records");
    assert_int_equal(json_array_get_length(recs2), 1);
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(recs2, 0), "tag"),
        "suite.case");
    assert_int_equal(ckptctl_run(t, NULL, "--tag-env", "A=B", "--", "true", NULL), 2);
    assert_nothing_left(t);
}

/* --dir: the state stays in DIR; the command's cwd (the caller's, so that
 * pytest finds its files) and environment. */
static void test_given_dir_and_environment(void **state)
{
    T *t = *state;
    g_autofree char *dir = tmp_path(t, "given");
    assert_int_equal(g_mkdir(dir, 0755), 0);
    g_autofree char *here = g_get_current_dir();
    g_autofree char *cwd = realpath(here, NULL);
    const char *body = "set -e; test \"$(pwd -P)\" = \"$2\"; "
                       "test \"$CKPTFS_BACKING\" = \"$1\"; test \"$KEEP_ME\" = yes; "
                       "test -d \"$CKPTFS_MOUNT/_views\"; cd \"$CKPTFS_MOUNT\"; "
                       "mkdir -p _state/t; echo hi > _state/t/x";
    g_setenv("KEEP_ME", "yes", TRUE);
    int rc = ckptctl_run(t, NULL, "--dir", dir, "--", "sh", "-c", body, "sh", dir, cwd, NULL);
    g_unsetenv("KEEP_ME");
    assert_int_equal(rc, 0);
    g_autofree char *x = g_build_filename(dir, "_state", "t", "x", NULL);
    g_autofree char *text = NULL;
    assert_true(g_file_get_contents(x, &text, NULL, NULL));
    assert_string_equal(text, "hi\n");
    assert_nothing_left(t);
}

static void test_keep(void **state)
{
    T *t = *state;
    g_autofree char *rep = tmp_path(t, "keep.json");
    int rc =
        ckptctl_run(t, NULL, "--keep", "--report", rep, "--", "sh", "-c",
                    "cd \"$CKPTFS_MOUNT\" && mkdir -p _state/t && echo kept > _state/t/f", NULL);
    assert_int_equal(rc, 0);
    g_autoptr(JsonObject) r = load_report(rep);
    assert_true(json_object_get_boolean_member(r, "dir_kept"));
    g_autofree char *f =
        g_build_filename(json_object_get_string_member(r, "dir"), "_state", "t", "f", NULL);
    assert_true(g_file_test(f, G_FILE_TEST_IS_REGULAR));
    assert_nothing_left(t);
}

static void test_command_status_passes_through(void **state)
{
    T *t = *state;
    assert_int_equal(ckptctl_run(t, NULL, "--", "sh", "-c", "exit 7", NULL), 7);
    assert_int_equal(ckptctl_run(t, NULL, "sh", "-c", "exit 0", NULL), 0);
    assert_int_equal(ckptctl_run(t, NULL, "--", "/nonexistent/command", NULL), 127);
    assert_nothing_left(t);
}

/* Under systemd (a CI job of a runner service, systemd-run), where a mount
 * is supervised by default: the run's own auto_unmount wins, and the
 * mount is set up. */
static void test_under_systemd(void **state)
{
    T *t = *state;
    g_setenv("INVOCATION_ID", "ckptctl-run-test", TRUE);
    int rc = ckptctl_run(
        t, NULL, "--", "sh", "-c",
        "mkdir -p \"$CKPTFS_MOUNT/_state/t\" && echo x > \"$CKPTFS_MOUNT/_state/t/f\"", NULL);
    g_unsetenv("INVOCATION_ID");
    assert_int_equal(rc, 0);
    assert_nothing_left(t);
}

static void test_killed_command_still_unmounts(void **state)
{
    T *t = *state;
    g_autofree char *rep = tmp_path(t, "killed.json");
    /* the command holds a file open on the mount when it dies */
    int rc = ckptctl_run(
        t, NULL, "--report", rep, "--", "sh", "-c",
        "cd \"$CKPTFS_MOUNT\"; mkdir -p _state/t; exec 3>_state/t/open; kill -KILL $$", NULL);
    assert_int_equal(rc, 128 + SIGKILL);
    g_autoptr(JsonObject) r = load_report(rep);
    assert_int_equal(json_object_get_int_member(r, "command_signal"), SIGKILL);
    assert_true(json_object_get_null_member(r, "command_exit"));
    assert_false(g_file_test(json_object_get_string_member(r, "mount"), G_FILE_TEST_EXISTS));
    assert_nothing_left(t);
}

static void test_two_runs_do_not_see_each_other(void **state)
{
    T *t = *state;
    g_autofree char *sync = tmp_path(t, "sync");
    assert_int_equal(g_mkdir(sync, 0755), 0);
    /* each writes its file, waits until the other has written its own, then
     * lists its mount: only its own file may be there */
    const char *body =
        "set -e; cd \"$CKPTFS_MOUNT\"; mkdir -p _state/a/v1/0; echo \"$1\" > "
        "_state/a/v1/0/checkpoint-1.snap; "
        "touch \"$2/$1\"; i=0; while [ ! -e \"$2/$3\" ] && [ $i -lt 600 ]; do sleep 0.1; "
        "i=$((i+1)); done; test -e \"$2/$3\"; "
        "test \"$(cat _state/a/v1/0/checkpoint-1.snap)\" = \"$1\"; "
        "test \"$(ls _state/a/v1/0)\" = checkpoint-1.snap; echo \"$CKPTFS_MOUNT\" > "
        "\"$2/$1.mnt\"";
    g_autofree char *rep1 = tmp_path(t, "one.json");
    g_autofree char *rep2 = tmp_path(t, "two.json");
    const char *argv1[] = {t->ckptctl, "run", "--job", "a",   "--report", rep1,  "--", "sh",
                           "-c",       body,  "sh",    "one", sync,       "two", NULL};
    const char *argv2[] = {t->ckptctl, "run", "--job", "a",   "--report", rep2,  "--", "sh",
                           "-c",       body,  "sh",    "two", sync,       "one", NULL};
    g_auto(GStrv) env = run_env(t);
    GPid p1, p2;
    assert_true(
        g_spawn_async(NULL, (char **)argv1, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &p1, NULL));
    assert_true(
        g_spawn_async(NULL, (char **)argv2, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &p2, NULL));
    int s1, s2;
    assert_int_equal(waitpid(p1, &s1, 0), p1);
    assert_int_equal(waitpid(p2, &s2, 0), p2);
    assert_true(WIFEXITED(s1));
    assert_true(WIFEXITED(s2));
    assert_int_equal(WEXITSTATUS(s1), 0);
    assert_int_equal(WEXITSTATUS(s2), 0);
    g_autoptr(JsonObject) r1 = load_report(rep1);
    g_autoptr(JsonObject) r2 = load_report(rep2);
    assert_string_not_equal(json_object_get_string_member(r1, "mount"),
                            json_object_get_string_member(r2, "mount"));
    assert_string_not_equal(json_object_get_string_member(r1, "dir"),
                            json_object_get_string_member(r2, "dir"));
    assert_int_equal(json_object_get_int_member(r1, "collisions"), 0);
    assert_int_equal(json_object_get_int_member(r2, "collisions"), 0);
    assert_nothing_left(t);
}

static void test_mount_failure_exits_2(void **state)
{
    T *t = *state;
    g_autofree char *ran = tmp_path(t, "ran");
    g_autofree char *touch = g_strdup_printf("touch %s", ran);
    assert_int_equal(
        ckptctl_run(t, NULL, "--ckptfs", "/nonexistent/ckptfs", "--", "sh", "-c", touch, NULL), 2);
    g_autofree char *file = tmp_path(t, "a-file");
    assert_true(g_file_set_contents(file, "x", -1, NULL));
    assert_int_equal(ckptctl_run(t, NULL, "--dir", file, "--", "sh", "-c", touch, NULL), 2);
    g_autofree char *missing = tmp_path(t, "missing");
    assert_int_equal(ckptctl_run(t, NULL, "--dir", missing, "--", "sh", "-c", touch, NULL), 2);
    /* the daemon itself refuses: the backing dir holds _views */
    g_autofree char *views = tmp_path(t, "with-views/_views");
    assert_int_equal(g_mkdir_with_parents(views, 0755), 0);
    g_autofree char *with_views = tmp_path(t, "with-views");
    assert_int_equal(ckptctl_run(t, NULL, "--dir", with_views, "--", "sh", "-c", touch, NULL), 2);
    /* a daemon that never mounts: /bin/true exits at once */
    assert_int_equal(ckptctl_run(t, NULL, "--ckptfs", "/bin/true", "--", "sh", "-c", touch, NULL),
                     2);
    assert_false(g_file_test(ran, G_FILE_TEST_EXISTS));
    /* usage */
    assert_int_equal(ckptctl_run(t, NULL, "--policy", "lax", "--", "true", NULL), 2);
    assert_int_equal(ckptctl_run(t, NULL, NULL), 2);
    assert_nothing_left(t);
}

/* Starts ckptctl run [--report REPORT] over a COMMAND that holds a file open
 * in the mount, then runs `tail` (sh); returns ckptctl's pid (not reaped)
 * once COMMAND is under way. */
static GPid start_busy_run(T *t, const char *report, const char *tail)
{
    g_autofree char *started = tmp_path(t, "started");
    g_autofree char *script =
        g_strconcat("cd \"$CKPTFS_MOUNT\"; mkdir -p _state/t; exec 3>_state/t/open; touch \"$1\"; ",
                    tail, NULL);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)t->ckptctl);
    g_ptr_array_add(argv, "run");
    if (report) {
        g_ptr_array_add(argv, "--report");
        g_ptr_array_add(argv, (gpointer)report);
    }
    const char *rest[] = {"--", "sh", "-c", script, "sh", started, NULL};
    for (gsize i = 0; i < G_N_ELEMENTS(rest); i++)
        g_ptr_array_add(argv, (gpointer)rest[i]);
    g_auto(GStrv) env = run_env(t);
    GPid pid;
    assert_true(g_spawn_async(NULL, (char **)argv->pdata, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                              NULL, &pid, NULL));
    for (int i = 0; i < 1200 && !g_file_test(started, G_FILE_TEST_EXISTS); i++)
        sleep_ms(50);
    assert_true(g_file_test(started, G_FILE_TEST_EXISTS));
    return pid;
}

static void test_sigterm_unmounts(void **state)
{
    T *t = *state;
    g_autofree char *rep = tmp_path(t, "term.json");
    GPid pid = start_busy_run(t, rep, "sleep 60; echo not killed");
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGTERM);
    g_autoptr(JsonObject) r = load_report(rep);
    assert_int_equal(json_object_get_int_member(r, "command_signal"), SIGTERM);
    assert_false(g_file_test(json_object_get_string_member(r, "mount"), G_FILE_TEST_EXISTS));
    assert_false(g_file_test(json_object_get_string_member(r, "dir"), G_FILE_TEST_EXISTS));
    assert_nothing_left(t);
}

/* SIGKILL cannot be caught: the daemon's PR_SET_PDEATHSIG (and auto_unmount)
 * still take the mount down, and COMMAND gets SIGTERM. */
static void test_sigkill_of_run_leaves_no_mount(void **state)
{
    T *t = *state;
    GPid pid = start_busy_run(t, NULL, "exec sleep 60");
    g_autoptr(GPtrArray) before = mounts_under(t->tmp);
    assert_int_equal(before->len, 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    /* the daemon unmounts on its own; give it time, assert no duration */
    for (int i = 0; i < 600; i++) {
        g_autoptr(GPtrArray) m = mounts_under(t->tmp);
        g_autoptr(GPtrArray) p = processes_naming(t->tmp);
        if (!m->len && !p->len)
            break;
        sleep_ms(50);
    }
    assert_nothing_left(t);
}

/* The first word of a process's command line (g_free). */
static char *argv0_of(int pid)
{
    g_autofree char *cl = g_strdup_printf("/proc/%d/cmdline", pid);
    char *text = NULL;
    if (!g_file_get_contents(cl, &text, NULL, NULL))
        return g_strdup("");
    return text; /* NUL-separated: the first string is argv[0] */
}

/* CTest's timeout SIGKILLs the whole tree (the daemon and its auto_unmount
 * helper too), leaving a dead mount; the next ckptctl run clears it and the
 * dead run's temporary directory. */
static void test_next_run_clears_a_dead_run(void **state)
{
    T *t = *state;
    GPid pid = start_busy_run(t, NULL, "exec sleep 60");
    /* the helper first, then the daemon, then the rest: nobody unmounts */
    g_autoptr(GPtrArray) procs = processes_naming(t->tmp);
    for (int pass = 0; pass < 3; pass++) {
        for (guint i = 0; i < procs->len; i++) {
            int p = GPOINTER_TO_INT(procs->pdata[i]);
            g_autofree char *a0 = argv0_of(p);
            int which = g_str_has_suffix(a0, "fusermount3") ? 0
                        : g_str_has_suffix(a0, "ckptfs")    ? 1
                                                            : 2;
            if (which == pass)
                kill(p, SIGKILL);
        }
        sleep_ms(100);
    }
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    g_autoptr(GPtrArray) dead = mounts_under(t->tmp);
    assert_int_equal(dead->len, 1);
    struct statfs sfs; /* a stat may come from the kernel's attribute cache */
    assert_int_equal(statfs(dead->pdata[0], &sfs), -1);
    assert_true(ck_mount_gone_errno(errno));
    g_autoptr(GPtrArray) tmpdirs_before = g_ptr_array_new_with_free_func(g_free);
    {
        g_autoptr(GDir) d = g_dir_open(t->tmp, 0, NULL);
        const char *n;
        while ((n = g_dir_read_name(d)))
            if (g_str_has_prefix(n, "ckptctl-run-dir-"))
                g_ptr_array_add(tmpdirs_before, g_build_filename(t->tmp, n, NULL));
    }
    assert_int_equal(tmpdirs_before->len, 1);

    assert_int_equal(ckptctl_run(t, NULL, "--", "true", NULL), 0);
    g_autoptr(GPtrArray) after = mounts_under(t->tmp);
    assert_int_equal(after->len, 0);
    assert_false(g_file_test(dead->pdata[0], G_FILE_TEST_EXISTS));
    assert_false(g_file_test(tmpdirs_before->pdata[0], G_FILE_TEST_EXISTS));
    assert_nothing_left(t);
}

static char *read_text(const char *dir, const char *name)
{
    g_autofree char *p = g_build_filename(dir, name, NULL);
    char *text = NULL;
    if (!g_file_get_contents(p, &text, NULL, NULL))
        fail_msg("%s: not written", p);
    return text;
}

/* ckptctl collisions MOUNT and ckptctl set MOUNT on a mount with
 * -o views=NAME find its views without --views (they looked in _views and
 * failed); --follow on the mount prints the records made while it runs,
 * as --kind and --job filter them, and exits 1 on SIGTERM after records. */
static void test_collisions_of_a_mount_with_views_name(void **state)
{
    T *t = *state;
    g_autofree char *sh = script(t, "collisions-of-the-mount.sh");
    g_autofree char *found = tmp_path(t, "found");
    assert_int_equal(g_mkdir(found, 0755), 0);
    int rc = ckptctl_run(t, NULL, "--identity", "env:CLINK_JOB_ID", "--policy", "enforce", "-o",
                         "views=_v", "--", "sh", sh, found, NULL);
    assert_int_equal(rc, 3);
    g_autofree char *crc = read_text(found, "collisions.rc");
    assert_string_equal(crc, "1\n");
    g_autofree char *cj = read_text(found, "collisions.json");
    g_autoptr(JsonParser) p = json_parser_new();
    assert_true(json_parser_load_from_data(p, cj, -1, NULL));
    JsonArray *recs =
        json_object_get_array_member(json_node_get_object(json_parser_get_root(p)), "records");
    assert_int_equal(json_array_get_length(recs), 1);
    JsonObject *r0 = json_array_get_object_element(recs, 0);
    assert_string_equal(json_object_get_string_member(r0, "path"), "_state/a/stolen");
    assert_string_equal(json_object_get_string_member(r0, "caller_job"), "b");
    g_autofree char *src = read_text(found, "set.rc");
    assert_string_equal(src, "0\n");
    g_autofree char *so = read_text(found, "set.out");
    assert_non_null(strstr(so, "policy=enforce\n"));
    g_autofree char *frc = read_text(found, "follow.rc");
    assert_string_equal(frc, "1\n");
    g_autofree char *fj = read_text(found, "follow.json");
    assert_non_null(strstr(fj, "\"path\" : \"_state/a/stolen\""));
    assert_non_null(strstr(fj, "\"path\" : \"_state/a/again\""));
    assert_null(strstr(fj, "v9")); /* a legacy-write: not the kind asked for */
    assert_nothing_left(t);
}

/* Without --identity (or --job) every caller is anonymous: job b writing
 * _state/a is not seen, and the run passes.  It used to say so only as
 * "no identity (every caller anonymous)" in the report; now a warning on
 * stderr before COMMAND, in the report and in the report's "warnings". */
static void test_no_identity_warns(void **state)
{
    T *t = *state;
    g_autofree char *rep = tmp_path(t, "anon.json");
    g_autofree char *out = NULL, *err = NULL;
    int rc = ckptctl_run_err(t, &out, &err, "--report", rep, "--", "sh", "-c",
                             "mkdir -p \"$CKPTFS_MOUNT/_state/a\" && "
                             "CLINK_JOB_ID=b sh -c 'echo x > \"$CKPTFS_MOUNT/_state/a/x\"'",
                             NULL);
    assert_int_equal(rc, 0); /* nothing could be seen */
    assert_non_null(strstr(err, "ckptctl run: warning: no --identity or --job"));
    assert_non_null(strstr(err, "foreign-write"));
    assert_true(has_line(out, "ckptctl run: warning: ", "every caller is anonymous", NULL));
    g_autoptr(JsonObject) r = load_report(rep);
    JsonArray *w = json_object_get_array_member(r, "warnings");
    assert_int_equal(json_array_get_length(w), 1);
    assert_non_null(strstr(json_array_get_string_element(w, 0), "cannot be seen"));
    /* with an identity, or a job: no warning, and b's write is seen */
    g_autofree char *rep2 = tmp_path(t, "named.json");
    g_autofree char *out2 = NULL, *err2 = NULL;
    rc = ckptctl_run_err(t, &out2, &err2, "--identity", "env:CLINK_JOB_ID", "--report", rep2, "--",
                         "sh", "-c",
                         "mkdir -p \"$CKPTFS_MOUNT/_state/a\" && "
                         "CLINK_JOB_ID=b sh -c 'echo x > \"$CKPTFS_MOUNT/_state/a/x\"'",
                         NULL);
    assert_int_equal(rc, 3);
    assert_null(strstr(err2, "warning"));
    g_autoptr(JsonObject) r2 = load_report(rep2);
    assert_int_equal(json_array_get_length(json_object_get_array_member(r2, "warnings")), 0);
    g_autofree char *err3 = NULL;
    rc = ckptctl_run_err(t, NULL, &err3, "-o", "job=j", "--", "true", NULL);
    assert_int_equal(rc, 0);
    assert_null(strstr(err3, "warning"));
    assert_nothing_left(t);
}

/* --dir over a directory that already has a collision hazard failed the
 * run even when COMMAND did nothing.  With --baseline the hazards DIR had
 * before COMMAND are listed, marked, and do not count; a new one does. */
static void test_baseline(void **state)
{
    T *t = *state;
    g_autofree char *dir = tmp_path(t, "shared");
    testfs_mkdir(dir, "v1/0");
    testfs_mkdir(dir, "v1/1");
    testfs_marker(dir, "a", 1, "generation=1\nparticipants=0\n");
    testfs_marker(dir, "b", 1, "generation=1\nparticipants=1\n");
    /* without --baseline: the hazard DIR had fails the run */
    int rc = ckptctl_run(t, NULL, "--job", "a", "--dir", dir, "--", "true", NULL);
    assert_int_equal(rc, 3);
    /* with: reported, not counted */
    g_autofree char *rep = tmp_path(t, "baseline.json");
    g_autofree char *out = NULL;
    rc = ckptctl_run(t, &out, "--job", "a", "--dir", dir, "--baseline", "--report", rep, "--",
                     "true", NULL);
    assert_int_equal(rc, 0);
    assert_true(has_line(out, "ckptctl run: ", "1 there before COMMAND", NULL));
    assert_true(has_line(out, "ckptctl run:   shared-location ", " a,b ", " v1 ", " yes ", NULL));
    g_autoptr(JsonObject) r = load_report(rep);
    assert_int_equal(json_object_get_int_member(r, "collisions"), 0);
    JsonObject *h = json_array_get_object_element(json_object_get_array_member(r, "hazards"), 0);
    assert_string_equal(json_object_get_string_member(h, "kind"), "shared-location");
    assert_true(json_object_get_boolean_member(h, "collision"));
    assert_true(json_object_get_boolean_member(h, "baseline"));
    /* a job that joins the shared location makes a new hazard: it counts */
    g_autofree char *rep2 = tmp_path(t, "baseline2.json");
    rc = ckptctl_run(
        t, NULL, "--job", "c", "--dir", dir, "--baseline", "--report", rep2, "--", "sh", "-c",
        "mkdir -p \"$CKPTFS_MOUNT/_jobs/c/chk-1\" && printf "
        "'generation=1\\nparticipants=2\\n' > \"$CKPTFS_MOUNT/_jobs/c/chk-1/COMPLETED\"",
        NULL);
    assert_int_equal(rc, 3);
    g_autoptr(JsonObject) r2 = load_report(rep2);
    assert_int_equal(json_object_get_int_member(r2, "collisions"), 1);
    JsonObject *h2 = json_array_get_object_element(json_object_get_array_member(r2, "hazards"), 0);
    assert_int_equal(json_array_get_length(json_object_get_array_member(h2, "jobs")), 3);
    assert_false(json_object_get_boolean_member(h2, "baseline"));
    assert_nothing_left(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_record_failure_exits_3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_failure_enforce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_layout_exits_0, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_on_stdout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_command_stdout_to_stderr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_reader_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collision_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_aligned_with_long_job_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tag_names_the_test, setup, teardown),
        cmocka_unit_test_setup_teardown(test_given_dir_and_environment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_status_passes_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_under_systemd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_command_still_unmounts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_runs_do_not_see_each_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mount_failure_exits_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_unmounts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_of_run_leaves_no_mount, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_run_clears_a_dead_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collisions_of_a_mount_with_views_name, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_identity_warns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_baseline, setup, teardown),
    };
    return cmocka_run_group_tests_name("ckptctl run", tests, NULL, NULL);
}
