/* Runs the built ckptctl (path in $CKPTCTL) on fixtures it wrote and on
 * hand-made bad input; parses its --json output and checks fields and exit
 * codes (0 success, 1 found, 2 usage or I/O error). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testfs.h"

typedef struct {
    char *tmp;
} Fx;

typedef struct {
    int status; /* exit code */
    char *out;
    char *err;
} Run;

static void run_clear(Run *r)
{
    g_free(r->out);
    g_free(r->err);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Run, run_clear)

static void drop_privileges(gpointer unused)
{
    (void)unused;
    /* nobody: the marker's owner (root) made it unreadable to everyone else */
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
        _exit(99);
}

static Run run_v(bool unprivileged, const char *first, va_list ap)
{
    const char *bin = g_getenv("CKPTCTL");
    assert_non_null(bin);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)bin);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        g_ptr_array_add(argv, (gpointer)a);
    g_ptr_array_add(argv, NULL);
    Run r = {0};
    gint wait_status = 0;
    g_autoptr(GError) err = NULL;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT,
                               unprivileged ? drop_privileges : NULL, NULL, &r.out, &r.err,
                               &wait_status, &err);
    if (!ok)
        fail_msg("spawn %s: %s", bin, err->message);
    assert_true(WIFEXITED(wait_status)); /* never a crash */
    r.status = WEXITSTATUS(wait_status);
    return r;
}

static Run run(const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    Run r = run_v(false, first, ap);
    va_end(ap);
    return r;
}

static Run run_as_nobody(const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    Run r = run_v(true, first, ap);
    va_end(ap);
    return r;
}

/* An error is one line on stderr. */
static void assert_one_line_error(const Run *r)
{
    assert_int_equal(r->status, 2);
    assert_true(strlen(r->err) > 0);
    const char *nl = strchr(r->err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
}

static JsonObject *parse_obj(const char *text)
{
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) err = NULL;
    if (!json_parser_load_from_data(p, text, -1, &err))
        fail_msg("not JSON (%s): %s", err->message, text);
    JsonNode *root = json_parser_get_root(p);
    assert_non_null(root);
    assert_int_equal(JSON_NODE_TYPE(root), JSON_NODE_OBJECT);
    return json_object_ref(json_node_get_object(root));
}

static int setup(void **state)
{
    Fx *fx = g_new0(Fx, 1);
    fx->tmp = testfs_tmpdir("ck-tools-XXXXXX");
    assert_int_equal(chmod(fx->tmp, 0755), 0); /* nobody must reach inside */
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    Fx *fx = *state;
    testfs_remove(fx->tmp);
    g_free(fx->tmp);
    g_free(fx);
    return 0;
}

static char *path_in(Fx *fx, const char *rel)
{
    return g_build_filename(fx->tmp, rel, NULL);
}

/* A fixture in <tmp>/<name>; returns its path. */
static char *fixture(Fx *fx, const char *name, ...)
{
    g_autofree char *dir = path_in(fx, name);
    va_list ap;
    va_start(ap, name);
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    for (const char *a = va_arg(ap, const char *); a; a = va_arg(ap, const char *))
        g_ptr_array_add(args, (gpointer)a);
    va_end(ap);
    const char *v[16] = {0};
    assert_true(args->len < 13);
    for (guint i = 0; i < args->len; i++)
        v[i] = args->pdata[i];
    g_auto(Run) r = run("fixture", dir, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
                        v[10], v[11], NULL);
    if (r.status != 0)
        fail_msg("fixture: %s", r.err);
    return g_steal_pointer(&dir);
}

static const char *const resolve_keys[] = {
    "status",  "job",          "checkpoint",        "class",
    "root",    "generation",   "generation_source", "participants",
    "marker",  "reads",        "candidates",        "error",
    "warning", "foreign_root", "unknown",           NULL};

static void assert_all_resolve_keys(JsonObject *o)
{
    for (int i = 0; resolve_keys[i]; i++)
        if (!json_object_has_member(o, resolve_keys[i]))
            fail_msg("resolve --json lacks \"%s\"", resolve_keys[i]);
}

/* ---- the command line ---- */

static void usage_and_help(void **state)
{
    (void)state;
    g_auto(Run) h = run("--help", NULL);
    assert_int_equal(h.status, 0);
    assert_non_null(strstr(h.out, "Usage: ckptctl COMMAND"));
    const char *cmds[] = {"jobs",  "resolve",    "check",   "state-root", "unused",
                          "prune", "collisions", "fixture", "set"};
    for (gsize i = 0; i < G_N_ELEMENTS(cmds); i++) {
        assert_non_null(strstr(h.out, cmds[i]));
        g_auto(Run) sub = run(cmds[i], "--help", NULL);
        assert_int_equal(sub.status, 0);
        assert_non_null(strstr(sub.out, "--json"));
    }
    g_auto(Run) none = run(NULL, NULL);
    assert_one_line_error(&none);
    g_auto(Run) bad = run("frobnicate", NULL);
    assert_one_line_error(&bad);
    g_auto(Run) noarg = run("jobs", NULL);
    assert_one_line_error(&noarg);
    g_auto(Run) badopt = run("jobs", "--no-such-option", "/", NULL);
    assert_one_line_error(&badopt);
    g_auto(Run) fxhelp = run("fixture", "--help", NULL);
    assert_non_null(strstr(fxhelp.out, "default 3"));
    assert_non_null(strstr(fxhelp.out, "--force"));
}

/* ---- fixture ---- */

static gint cmp_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void collect_tree(const char *root, const char *rel, GString *out)
{
    g_autofree char *p = rel[0] ? g_build_filename(root, rel, NULL) : g_strdup(root);
    g_autoptr(GDir) d = g_dir_open(p, 0, NULL);
    assert_non_null(d);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *n;
    while ((n = g_dir_read_name(d)))
        g_ptr_array_add(names, g_strdup(n));
    g_ptr_array_sort(names, cmp_names);
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *r =
            rel[0] ? g_build_filename(rel, names->pdata[i], NULL) : g_strdup(names->pdata[i]);
        g_autofree char *full = g_build_filename(root, r, NULL);
        struct stat sb;
        assert_int_equal(lstat(full, &sb), 0);
        if (S_ISDIR(sb.st_mode)) {
            g_string_append_printf(out, "D %s\n", r);
            collect_tree(root, r, out);
        } else {
            g_autofree char *data = NULL;
            gsize len = 0;
            assert_true(g_file_get_contents(full, &data, &len, NULL));
            g_autofree char *sum =
                g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, len);
            g_string_append_printf(out, "F %s %o %zu %s\n", r, sb.st_mode & 07777, len, sum);
        }
    }
}

static char *tree_of(const char *root)
{
    GString *s = g_string_new(NULL);
    collect_tree(root, "", s);
    return g_string_free(s, FALSE);
}

static void fixture_is_deterministic(void **state)
{
    Fx *fx = *state;
    g_autofree char *a = fixture(fx, "a", "--seed", "7", "--jobs", "4", "--legacy", "2", NULL);
    g_autofree char *b = fixture(fx, "b", "--seed", "7", "--jobs", "4", "--legacy", "2", NULL);
    g_autofree char *c = fixture(fx, "c", "--seed", "8", "--jobs", "4", "--legacy", "2", NULL);
    g_autofree char *ta = tree_of(a), *tb = tree_of(b), *tc = tree_of(c);
    assert_true(strlen(ta) > 0);
    assert_string_equal(ta, tb);     /* same seed: the same tree, byte for byte */
    assert_string_not_equal(ta, tc); /* another seed: another tree */
    /* the files really are B bytes */
    g_autofree char *d = fixture(fx, "d", "--bytes", "1000", "--jobs", "1", "--legacy", "0",
                                 "--checkpoints", "1", "--subtasks", "1", NULL);
    g_autofree char *td = tree_of(d);
    assert_non_null(strstr(td, ".snap 644 1000 "));
}

static void fixture_refuses_non_empty_dir(void **state)
{
    Fx *fx = *state;
    testfs_put(fx->tmp, "full/something", "x");
    g_autofree char *dir = path_in(fx, "full");
    g_auto(Run) r = run("fixture", dir, NULL);
    assert_one_line_error(&r);
    g_auto(Run) f = run("fixture", dir, "--force", NULL);
    assert_int_equal(f.status, 0);
    g_autofree char *jobs = path_in(fx, "full/_jobs");
    assert_true(g_file_test(jobs, G_FILE_TEST_IS_DIR));
    g_auto(Run) bad = run("fixture", dir, "--force", "--subtasks", "0", NULL);
    assert_one_line_error(&bad);
    testfs_put(fx->tmp, "afile", "x");
    g_autofree char *af = path_in(fx, "afile");
    g_auto(Run) nd = run("fixture", af, "--force", NULL);
    assert_int_equal(nd.status, 2);
}

/* ---- jobs ---- */

static void jobs_json(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir =
        fixture(fx, "fx", "--jobs", "3", "--legacy", "2", "--checkpoints", "3", NULL);
    g_auto(Run) r = run("jobs", dir, "--json", NULL);
    assert_int_equal(r.status, 0);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonArray *jobs = json_object_get_array_member(o, "jobs");
    assert_int_equal(json_array_get_length(jobs), 5);
    guint ns = 0, legacy = 0;
    for (guint i = 0; i < json_array_get_length(jobs); i++) {
        JsonObject *j = json_array_get_object_element(jobs, i);
        assert_true(json_object_has_member(j, "job"));
        assert_true(json_object_has_member(j, "checkpoints"));
        assert_true(json_object_has_member(j, "latest"));
        assert_true(json_object_has_member(j, "layout"));
        assert_true(json_object_has_member(j, "bytes"));
        const char *layout = json_object_get_string_member(j, "layout");
        JsonArray *cps = json_object_get_array_member(j, "checkpoints");
        assert_true(json_array_get_length(cps) >= 3);
        assert_int_equal(json_array_get_int_element(cps, 0), 1);
        assert_true(json_object_get_int_member(j, "bytes") > 0);
        assert_true(json_object_get_int_member(j, "latest") >= 3);
        ns += strcmp(layout, "namespaced") == 0;
        legacy += strcmp(layout, "legacy") == 0;
    }
    assert_int_equal(ns, 3);
    assert_int_equal(legacy, 2);
    g_auto(Run) human = run("jobs", dir, NULL);
    assert_int_equal(human.status, 0);
    assert_non_null(strstr(human.out, "LAYOUT"));
    g_autofree char *missing = path_in(fx, "missing");
    g_auto(Run) m = run("jobs", missing, "--json", NULL);
    assert_one_line_error(&m);
    assert_string_equal(m.out, "");
}

/* The table's checkpoints cell as ckptctl(1) states it: seven are listed,
 * of eight or more the first six and the count; --json lists every one. */
static void jobs_table_abbreviates_long_checkpoint_lists(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = path_in(fx, "long");
    const guint64 seven[] = {1, 2, 3, 4, 5, 6, 7}, eight[] = {1, 2, 3, 10, 20, 30, 40, 50};
    for (guint i = 0; i < G_N_ELEMENTS(seven); i++)
        testfs_marker(dir, "seven", seven[i], "x");
    for (guint i = 0; i < G_N_ELEMENTS(eight); i++)
        testfs_marker(dir, "eight", eight[i], "x");
    g_auto(Run) human = run("jobs", dir, NULL);
    assert_int_equal(human.status, 0);
    assert_non_null(strstr(human.out, "\nseven 1,2,3,4,5,6,7 "));
    assert_non_null(strstr(human.out, "\neight 1,2,3,10,20,30,...(8) "));
    g_auto(Run) r = run("jobs", dir, "--json", NULL);
    assert_int_equal(r.status, 0);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonArray *jobs = json_object_get_array_member(o, "jobs");
    JsonObject *e = json_array_get_object_element(jobs, 0);
    assert_string_equal(json_object_get_string_member(e, "job"), "eight");
    JsonArray *cps = json_object_get_array_member(e, "checkpoints");
    assert_int_equal(json_array_get_length(cps), G_N_ELEMENTS(eight));
    for (guint i = 0; i < G_N_ELEMENTS(eight); i++)
        assert_int_equal(json_array_get_int_element(cps, i), eight[i]);
}

/* jobs --json writes its document itself (no node tree): byte for byte
 * what json-glib's pretty printer (indent 2) makes of the same document,
 * the form every other --json of ckptctl has: empty arrays, null latest,
 * no jobs at all. */
static void jobs_json_is_json_glib_pretty(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir =
        fixture(fx, "fx", "--jobs", "3", "--legacy", "2", "--checkpoints", "3", NULL);
    testfs_mkdir(dir, "_state/orphan/v1/0");                    /* no checkpoints */
    testfs_marker(dir, "bad", 1, "generation=1\nnot a line\n"); /* latest null */
    g_autofree char *empty = path_in(fx, "empty");
    testfs_mkdir(empty, "_jobs");
    const char *dirs[] = {dir, empty};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_auto(Run) r = run("jobs", dirs[i], "--json", NULL);
        assert_int_equal(r.status, 0);
        g_autoptr(JsonParser) p = json_parser_new();
        assert_true(json_parser_load_from_data(p, r.out, -1, NULL));
        g_autoptr(JsonGenerator) gen = json_generator_new();
        json_generator_set_pretty(gen, TRUE);
        json_generator_set_indent(gen, 2);
        json_generator_set_root(gen, json_parser_get_root(p));
        g_autofree char *text = json_generator_to_data(gen, NULL);
        g_autofree char *want = g_strconcat(text, "\n", NULL);
        assert_string_equal(r.out, want);
    }
    g_auto(Run) r = run("jobs", dir, "--json", NULL);
    assert_non_null(strstr(r.out, "\"checkpoints\" : [],\n      \"latest\" : null,"));
}

/* Every --json of ckptctl in one style: what json-glib's pretty printer,
 * two spaces of indentation, writes for the same document, and a final
 * newline (check was pretty while jobs was compact, once). */
static void every_json_in_one_style(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = fixture(fx, "fx", "--jobs", "2", "--legacy", "2", NULL);
    g_autofree char *jobdir = NULL;
    {
        g_autofree char *jobs = g_build_filename(dir, "_jobs", NULL);
        g_autoptr(GDir) jd = g_dir_open(jobs, 0, NULL);
        jobdir = g_build_filename(jobs, g_dir_read_name(jd), NULL);
    }
    testfs_put(fx->tmp, "log.jsonl",
               "{\"time\":\"2026-12-01T18:00:00.123Z\",\"kind\":\"legacy-write\","
               "\"verdict\":\"denied\",\"op\":\"mkdir\",\"path\":\"v1\",\"path2\":null,"
               "\"caller_job\":null,\"owner_job\":null,\"pid\":1,\"uid\":0,\"comm\":\"sh\"}\n");
    g_autofree char *log = path_in(fx, "log.jsonl");
    g_autofree char *fx2 = path_in(fx, "fx2");
    const char *const cmds[][6] = {
        {"jobs", dir, NULL},
        {"check", dir, NULL},
        {"unused", dir, NULL},
        {"prune", dir, NULL},
        {"resolve", jobdir, NULL},
        {"resolve", dir, "-c", "1", NULL},
        {"state-root", "s3://b/x?local=/w", "j1", NULL},
        {"collisions", "--file", log, NULL},
        {"fixture", fx2, "--jobs", "1", NULL},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cmds); i++) {
        g_auto(Run) r =
            run(cmds[i][0], "--json", cmds[i][1], cmds[i][2], cmds[i][3], cmds[i][4], NULL);
        g_autoptr(JsonParser) p = json_parser_new();
        if (!json_parser_load_from_data(p, r.out, -1, NULL))
            fail_msg("%s --json: not JSON: %s", cmds[i][0], r.out);
        g_autoptr(JsonGenerator) gen = json_generator_new();
        json_generator_set_pretty(gen, TRUE);
        json_generator_set_indent(gen, 2);
        json_generator_set_root(gen, json_parser_get_root(p));
        g_autofree char *text = json_generator_to_data(gen, NULL);
        g_autofree char *want = g_strconcat(text, "\n", NULL);
        if (strcmp(r.out, want) != 0)
            fail_msg("%s --json is not in the one style:\n%s", cmds[i][0], r.out);
    }
}

/* ---- uint64 in JSON: printed as exact integers ---- */

/* Python's reading of `expr` over the JSON document `doc`, printed with
 * repr (exact integers); NULL when python3 is missing. */
static char *python_reads(Fx *fx, const char *doc, const char *expr)
{
    g_autofree char *py = g_find_program_in_path("python3");
    if (!py)
        return NULL;
    g_autofree char *f = path_in(fx, "doc.json");
    assert_true(g_file_set_contents(f, doc, -1, NULL));
    g_autofree char *code =
        g_strdup_printf("import json,sys\nd=json.load(open(sys.argv[1]))\nprint(repr(%s))", expr);
    const char *argv[] = {py, "-c", code, f, NULL};
    g_autofree char *out = NULL;
    gint st = 0;
    assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                             &out, NULL, &st, NULL));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return g_strchomp(g_steal_pointer(&out));
}

/* jq parses the document (jq 1.6 reads numbers as doubles, so only 1.7 and
 * later print 2^63 and beyond exactly: checked when jq is one of those). */
static void jq_reads(Fx *fx, const char *doc, const char *filter, const char *want)
{
    g_autofree char *jq = g_find_program_in_path("jq");
    if (!jq)
        return;
    g_autofree char *f = path_in(fx, "doc.json");
    assert_true(g_file_set_contents(f, doc, -1, NULL));
    const char *ver[] = {jq, "--version", NULL};
    g_autofree char *v = NULL;
    gint st = 0;
    assert_true(g_spawn_sync(NULL, (char **)ver, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &v,
                             NULL, &st, NULL));
    const char *argv[] = {jq, "-c", filter, f, NULL};
    g_autofree char *out = NULL;
    assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                             &out, NULL, &st, NULL));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* valid JSON */
    if (v && !g_str_has_prefix(v, "jq-1.6") && !g_str_has_prefix(v, "jq-1.5"))
        assert_string_equal(g_strchomp(out), want);
}

/* Checkpoint ids and generations at 0, 2^63-1, 2^63 and 2^64-1 come out of
 * resolve --json and jobs --json as the exact numbers (they were once cast
 * to gint64 and came out negative). */
static void json_uint64_exact(void **state)
{
    Fx *fx = *state;
    const char *vals[] = {"0", "9223372036854775807", "9223372036854775808",
                          "18446744073709551615"};
    for (size_t i = 0; i < G_N_ELEMENTS(vals); i++) {
        g_autofree char *name = g_strdup_printf("u64-%zu", i);
        g_autofree char *dir = path_in(fx, name);
        g_autofree char *gen = g_strdup_printf("_state/a/v%s/0", vals[i]);
        testfs_mkdir(dir, gen);
        g_autofree char *mk = g_strdup_printf("_jobs/a/chk-%s/COMPLETED", vals[i]);
        g_autofree char *text = g_strdup_printf(
            "checkpoint=%s\ngeneration=%s\nparticipants=0\nstate=_state/a\n", vals[i], vals[i]);
        testfs_put(dir, mk, text);
        g_autofree char *loc = g_build_filename(dir, "_jobs", "a", NULL);
        g_auto(Run) r = run("resolve", loc, "-c", vals[i], "--json", NULL);
        assert_int_equal(r.status, 0);
        /* the bare number token, never negative, rounded or quoted */
        g_autofree char *cp = g_strdup_printf("\"checkpoint\" : %s,", vals[i]);
        g_autofree char *gn = g_strdup_printf("\"generation\" : %s,", vals[i]);
        if (!strstr(r.out, cp) || !strstr(r.out, gn))
            fail_msg("resolve --json for %s:\n%s", vals[i], r.out);
        g_autofree char *py = python_reads(fx, r.out, "(d['checkpoint'], d['generation'])");
        g_autofree char *want = g_strdup_printf("(%s, %s)", vals[i], vals[i]);
        if (py)
            assert_string_equal(py, want);
        jq_reads(fx, r.out, "[.checkpoint,.generation]", want);
        g_auto(Run) latest = run("resolve", loc, "--json", NULL);
        assert_non_null(strstr(latest.out, cp));

        g_auto(Run) j = run("jobs", dir, "--json", NULL);
        assert_int_equal(j.status, 0);
        g_autofree char *lt = g_strdup_printf("\"latest\" : %s,", vals[i]);
        if (!strstr(j.out, lt))
            fail_msg("jobs --json for %s:\n%s", vals[i], j.out);
        g_autofree char *pj =
            python_reads(fx, j.out, "(d['jobs'][0]['checkpoints'], d['jobs'][0]['latest'])");
        g_autofree char *wj = g_strdup_printf("([%s], %s)", vals[i], vals[i]);
        if (pj)
            assert_string_equal(pj, wj);
    }
    /* a string that merely looks like the tag stays a string */
    g_autofree char *dir = path_in(fx, "u64-tag");
    testfs_marker(dir, "a", 1, "generation=1\nparticipants=0\nstate=ckptctl-u64-0:1\n");
    g_autofree char *loc = g_build_filename(dir, "_jobs", "a", NULL);
    g_auto(Run) r = run("resolve", loc, "-c", "1", "--json", NULL);
    assert_non_null(strstr(r.out, "/ckptctl-u64-0:1\""));
}

/* ---- resolve ---- */

static char *first_job_of_layout(const char *dir, const char *layout)
{
    g_auto(Run) r = run("jobs", dir, "--json", NULL);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonArray *jobs = json_object_get_array_member(o, "jobs");
    for (guint i = 0; i < json_array_get_length(jobs); i++) {
        JsonObject *j = json_array_get_object_element(jobs, i);
        if (strcmp(json_object_get_string_member(j, "layout"), layout) == 0)
            return g_strdup(json_object_get_string_member(j, "job"));
    }
    fail_msg("no %s job", layout);
    return NULL;
}

/* resolve's human output speaks the restore file's words (the same
 * ck_restore_describe lines): "(marker)"/"(guessed)", "-" for every empty
 * value; a refusal is printed once. */
static void resolve_human_words(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = path_in(fx, "words");
    testfs_mkdir(dir, "_state/a/v2/0");
    testfs_marker(dir, "a", 1, "generation=2\nparticipants=0\nstate=_state/a\n");
    testfs_marker(dir, "a", 2, "participants=\nstate=_state/a\n");
    testfs_marker(dir, "b", 1, "oops\n");
    g_autofree char *loc = g_build_filename(dir, "_jobs", "a", NULL);
    g_auto(Run) r = run("resolve", loc, "-c", "1", NULL);
    assert_int_equal(r.status, 0);
    g_autofree char *want = g_strdup_printf(
        "status: ok\njob: a\ncheckpoint: 1\nclass: namespaced\nroot: %s/_state/a (local)\n"
        "generation: 2 (marker)\nparticipants: 0\nmarker: %s/_jobs/a/chk-1/COMPLETED\n"
        "restorable: yes\nreads: %s/_state/a/v2/0\nerror: -\n",
        dir, dir, dir);
    assert_string_equal(r.out, want);
    g_auto(Run) g = run("resolve", loc, "-c", "2", NULL);
    assert_non_null(strstr(g.out, "generation: 2 (guessed)\n"));
    assert_non_null(strstr(g.out, "participants: -\n"));
    assert_non_null(strstr(g.out, "reads: -\n"));
    g_autofree char *bloc = g_build_filename(dir, "_jobs", "b", NULL);
    g_auto(Run) b = run("resolve", bloc, "-c", "1", NULL);
    assert_int_equal(b.status, 1);
    assert_non_null(strstr(b.out, "root: -\ngeneration: -\nparticipants: -\n"));
    assert_non_null(strstr(b.out, "error: malformed marker: line 1: no '=' in line\n"));
    assert_string_equal(b.err, ""); /* said once, on stdout */
    /* the refusal: once on stdout; with --json, in the document and once on stderr */
    g_auto(Run) ref = run("resolve", dir, "-c", "1", NULL);
    assert_int_equal(ref.status, 1);
    assert_non_null(strstr(ref.out, "status: refused\n"));
    assert_non_null(strstr(ref.out, "\nerror: checkpoint 1 was completed by several jobs"));
    assert_string_equal(ref.err, "");
    g_auto(Run) rj = run("resolve", dir, "-c", "1", "--json", NULL);
    assert_int_equal(rj.status, 1);
    assert_true(g_str_has_prefix(rj.err, "ckptctl resolve: checkpoint 1 was completed by"));
}

/* A root that is another job's is flagged, a marker's unknown keys are
 * shown, in the text and the document alike; a refusal's text keeps its
 * quotes; a cut-short marker's own root that is not there is shown below
 * the directory, as every other path. */
static void resolve_flags_and_unknown_keys(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = path_in(fx, "flags");
    testfs_mkdir(dir, "_state/a/v1/0");
    testfs_marker(dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\nowner=team \"x\"\n");
    testfs_marker(dir, "b", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(dir, "c", 1, "checkpoint=1\n");
    g_autofree char *la = g_build_filename(dir, "_jobs", "a", NULL);
    g_autofree char *lb = g_build_filename(dir, "_jobs", "b", NULL);
    g_autofree char *lc = g_build_filename(dir, "_jobs", "c", NULL);
    g_auto(Run) b = run("resolve", lb, NULL);
    assert_non_null(strstr(b.out, "\nforeign_root: a\n"));
    g_auto(Run) bj = run("resolve", lb, "--json", NULL);
    g_autoptr(JsonObject) bo = parse_obj(bj.out);
    assert_all_resolve_keys(bo);
    assert_string_equal(json_object_get_string_member(bo, "foreign_root"), "a");
    assert_int_equal(json_array_get_length(json_object_get_array_member(bo, "unknown")), 0);
    g_auto(Run) a = run("resolve", la, NULL);
    assert_non_null(strstr(a.out, "\nunknown: owner=team \"x\"\n"));
    g_auto(Run) aj = run("resolve", la, "--json", NULL);
    g_autoptr(JsonObject) ao = parse_obj(aj.out);
    assert_true(json_object_get_null_member(ao, "foreign_root"));
    JsonArray *unknown = json_object_get_array_member(ao, "unknown");
    assert_int_equal(json_array_get_length(unknown), 1);
    assert_string_equal(json_array_get_string_element(unknown, 0), "owner=team \"x\"");
    g_auto(Run) ref = run("resolve", dir, NULL);
    assert_int_equal(ref.status, 1);
    assert_non_null(strstr(ref.out, "so \"latest\" is ambiguous"));
    g_auto(Run) cj = run("resolve", lc, "--json", NULL);
    g_autoptr(JsonObject) co = parse_obj(cj.out);
    g_autofree char *own = g_build_filename(dir, "_state", "c", NULL);
    assert_string_equal(json_object_get_string_member(co, "class"), "cut-short");
    assert_string_equal(json_object_get_string_member(co, "root"), own);
    g_auto(Run) c = run("resolve", lc, NULL);
    g_autofree char *line = g_strdup_printf("\nroot: %s (none)\n", own);
    assert_non_null(strstr(c.out, line));
}

static void resolve_refused_names_every_job(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = fixture(fx, "fx", "--jobs", "2", "--legacy", "2", NULL);
    g_auto(Run) r = run("resolve", dir, "-c", "1", "--json", NULL);
    assert_int_equal(r.status, 1);
    assert_true(strlen(r.err) > 0); /* the refusal, one line */
    g_autoptr(JsonObject) o = parse_obj(r.out);
    assert_all_resolve_keys(o);
    assert_string_equal(json_object_get_string_member(o, "status"), "refused");
    assert_true(json_object_get_null_member(o, "job"));
    JsonArray *c = json_object_get_array_member(o, "candidates");
    assert_int_equal(json_array_get_length(c), 4);
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    for (guint i = 0; i < 4; i++) {
        const char *cand = json_array_get_string_element(c, i);
        g_autofree char *prefix = g_strconcat(dir, "/_jobs/", NULL);
        assert_true(g_str_has_prefix(cand, prefix));
        assert_true(g_file_test(cand, G_FILE_TEST_IS_DIR));
        assert_non_null(strstr(json_object_get_string_member(o, "error"), cand));
        g_ptr_array_add(names, (gpointer)cand);
    }
    g_autoptr(GPtrArray) sorted = g_ptr_array_copy(names, NULL, NULL);
    g_ptr_array_sort(sorted, cmp_names);
    for (guint i = 0; i < 4; i++)
        assert_ptr_equal(sorted->pdata[i], names->pdata[i]);
    /* latest: the same refusal */
    g_auto(Run) l = run("resolve", dir, "--json", NULL);
    assert_int_equal(l.status, 1);
    g_autoptr(JsonObject) lo = parse_obj(l.out);
    assert_string_equal(json_object_get_string_member(lo, "status"), "refused");
}

static void resolve_marker_directory(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = fixture(fx, "fx", "--jobs", "2", "--legacy", "2", NULL);
    g_autofree char *job = first_job_of_layout(dir, "namespaced");
    g_autofree char *loc = g_build_filename(dir, "_jobs", job, NULL);
    g_auto(Run) r = run("resolve", loc, "-c", "2", "--json", NULL);
    assert_int_equal(r.status, 0);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    assert_all_resolve_keys(o);
    assert_string_equal(json_object_get_string_member(o, "status"), "ok");
    assert_string_equal(json_object_get_string_member(o, "job"), job);
    assert_int_equal(json_object_get_int_member(o, "checkpoint"), 2);
    assert_string_equal(json_object_get_string_member(o, "class"), "namespaced");
    assert_string_equal(json_object_get_string_member(o, "generation_source"), "marker");
    assert_true(json_object_get_null_member(o, "candidates"));
    assert_true(json_object_get_null_member(o, "error"));
    g_autofree char *root = g_build_filename(dir, "_state", job, NULL);
    assert_string_equal(json_object_get_string_member(o, "root"), root);
    g_autofree char *marker = g_build_filename(dir, "_jobs", job, "chk-2", "COMPLETED", NULL);
    assert_string_equal(json_object_get_string_member(o, "marker"), marker);
    JsonArray *reads = json_object_get_array_member(o, "reads");
    JsonArray *parts = json_object_get_array_member(o, "participants");
    assert_int_equal(json_array_get_length(reads), json_array_get_length(parts));
    assert_int_equal(json_array_get_length(reads), 2);
    for (guint i = 0; i < json_array_get_length(reads); i++) {
        const char *p = json_array_get_string_element(reads, i);
        assert_true(g_str_has_prefix(p, root));
        assert_true(g_file_test(p, G_FILE_TEST_IS_DIR));
    }
    /* one legacy job's first marker has no generation= (an older release): guessed */
    g_autoptr(JsonObject) g = NULL;
    g_auto(Run) jr = run("jobs", dir, "--json", NULL);
    g_autoptr(JsonObject) jo = parse_obj(jr.out);
    JsonArray *jobs = json_object_get_array_member(jo, "jobs");
    for (guint i = 0; i < json_array_get_length(jobs) && !g; i++) {
        JsonObject *j = json_array_get_object_element(jobs, i);
        if (strcmp(json_object_get_string_member(j, "layout"), "legacy") != 0)
            continue;
        g_autofree char *l2 =
            g_build_filename(dir, "_jobs", json_object_get_string_member(j, "job"), NULL);
        g_auto(Run) lr = run("resolve", l2, "-c", "1", "--json", NULL);
        assert_int_equal(lr.status, 0);
        JsonObject *x = parse_obj(lr.out);
        if (strcmp(json_object_get_string_member(x, "generation_source"), "guessed") == 0)
            g = x;
        else
            json_object_unref(x);
    }
    assert_non_null(g);
    assert_string_equal(json_object_get_string_member(g, "class"), "legacy");
    assert_int_equal(json_object_get_int_member(g, "generation"), 1);
    g_autofree char *v10 = g_build_filename(dir, "v1", "0", NULL);
    assert_string_equal(json_array_get_string_element(json_object_get_array_member(g, "reads"), 0),
                        v10);
}

static void resolve_as_given_and_errors(void **state)
{
    Fx *fx = *state;
    g_auto(Run) u = run("resolve", "s3://bucket/ckpt?local=/tmp/w", "-c", "3", "--json", NULL);
    assert_int_equal(u.status, 0);
    g_autoptr(JsonObject) o = parse_obj(u.out);
    assert_all_resolve_keys(o);
    assert_string_equal(json_object_get_string_member(o, "status"), "as-given");
    JsonArray *reads = json_object_get_array_member(o, "reads");
    assert_int_equal(json_array_get_length(reads), 1);
    assert_string_equal(json_array_get_string_element(reads, 0), "s3://bucket/ckpt?local=/tmp/w");
    assert_true(json_object_get_null_member(o, "job"));
    assert_true(json_object_get_null_member(o, "generation"));

    testfs_put(fx->tmp, "plain/v1/0/x", "x");
    g_autofree char *plain = path_in(fx, "plain");
    g_auto(Run) p = run("resolve", plain, "--json", NULL);
    assert_int_equal(p.status, 0);
    g_autoptr(JsonObject) po = parse_obj(p.out);
    assert_string_equal(json_object_get_string_member(po, "status"), "as-given");

    g_autofree char *missing = path_in(fx, "missing");
    g_auto(Run) m = run("resolve", missing, "--json", NULL);
    assert_one_line_error(&m);
    g_auto(Run) badc = run("resolve", plain, "-c", "01", NULL);
    assert_one_line_error(&badc);

    /* a checkpoint that is not restorable: status ok, error set, exit 1 */
    testfs_put(fx->tmp, "cs/_jobs/j/chk-1/COMPLETED", "checkpoint=1\ngeneration=1\n");
    g_autofree char *cs = path_in(fx, "cs");
    g_auto(Run) c = run("resolve", cs, "-c", "1", "--json", NULL);
    assert_int_equal(c.status, 1);
    g_autoptr(JsonObject) co = parse_obj(c.out);
    assert_string_equal(json_object_get_string_member(co, "status"), "ok");
    assert_string_equal(json_object_get_string_member(co, "class"), "cut-short");
    assert_false(json_object_get_null_member(co, "error"));
    assert_int_equal(json_array_get_length(json_object_get_array_member(co, "reads")), 0);
}

/* ---- check ---- */

static JsonObject *hazard_of(JsonObject *o, const char *kind)
{
    JsonArray *hz = json_object_get_array_member(o, "hazards");
    for (guint i = 0; i < json_array_get_length(hz); i++) {
        JsonObject *h = json_array_get_object_element(hz, i);
        if (strcmp(json_object_get_string_member(h, "kind"), kind) == 0)
            return h;
    }
    return NULL;
}

static void check_fixture(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = fixture(fx, "fx", "--jobs", "2", "--legacy", "2", NULL);
    g_auto(Run) r = run("check", dir, "--json", NULL);
    assert_int_equal(r.status, 1);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    assert_int_equal(json_object_get_int_member(o, "collisions"), 1); /* v1 */
    JsonObject *s = hazard_of(o, "shared-location");
    assert_non_null(s);
    assert_int_equal(json_array_get_length(json_object_get_array_member(s, "jobs")), 2);
    assert_true(json_object_has_member(s, "path"));
    assert_true(json_object_has_member(s, "detail"));
    assert_non_null(hazard_of(o, "cut-short"));
    /* no legacy jobs: nothing shared, the cut-short marker is informational */
    g_autofree char *clean = fixture(fx, "clean", "--jobs", "2", "--legacy", "0", NULL);
    g_auto(Run) c = run("check", clean, "--json", NULL);
    assert_int_equal(c.status, 0);
    g_autoptr(JsonObject) co = parse_obj(c.out);
    assert_int_equal(json_object_get_int_member(co, "collisions"), 0);
    assert_null(hazard_of(co, "shared-location"));
    assert_non_null(hazard_of(co, "cut-short"));
}

static void check_bad_input(void **state)
{
    Fx *fx = *state;
    const char garbage[] = "\x7f"
                           "ELF\x00\x01\x02\xff\xfe\n=\n\x80\x81";
    testfs_put_data(fx->tmp, "bad/_jobs/g/chk-1/COMPLETED", garbage, sizeof garbage - 1);
    testfs_put(fx->tmp, "bad/_jobs/.x/chk-1/COMPLETED", "participants=0\n");
    g_autofree char *bad = path_in(fx, "bad");
    g_auto(Run) r = run("check", bad, "--json", NULL);
    assert_int_equal(r.status, 1);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonObject *m = hazard_of(o, "malformed");
    assert_non_null(m);
    assert_string_equal(json_object_get_string_member(m, "path"), "_jobs/g/chk-1/COMPLETED");
    assert_non_null(hazard_of(o, "not-a-job"));
    assert_int_equal(json_object_get_int_member(o, "collisions"), 0);
    /* jobs still lists it, with nothing restorable */
    g_auto(Run) j = run("jobs", bad, "--json", NULL);
    assert_int_equal(j.status, 0);
    g_autoptr(JsonObject) jo = parse_obj(j.out);
    JsonObject *g = json_array_get_object_element(json_object_get_array_member(jo, "jobs"), 0);
    assert_string_equal(json_object_get_string_member(g, "job"), "g");
    assert_true(json_object_get_null_member(g, "latest"));
    g_autofree char *missing = path_in(fx, "missing");
    g_auto(Run) mm = run("check", missing, NULL);
    assert_one_line_error(&mm);
}

static void unreadable_marker_as_nobody(void **state)
{
    Fx *fx = *state;
    if (geteuid() != 0)
        skip();
    testfs_put(fx->tmp, "u/_jobs/j/chk-1/COMPLETED", "generation=1\nparticipants=0\n");
    testfs_put(fx->tmp, "u/v1/0/x", "x");
    g_autofree char *marker = path_in(fx, "u/_jobs/j/chk-1/COMPLETED");
    assert_int_equal(chmod(marker, 0600), 0);
    g_autofree char *dir = path_in(fx, "u");
    g_auto(Run) r = run_as_nobody("check", dir, "--json", NULL);
    assert_int_equal(r.status, 1);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonObject *m = hazard_of(o, "malformed");
    assert_non_null(m);
    assert_non_null(strstr(json_object_get_string_member(m, "detail"), "Permission denied"));
    g_auto(Run) rr = run_as_nobody("resolve", dir, "-c", "1", "--json", NULL);
    assert_int_equal(rr.status, 1);
    g_autoptr(JsonObject) ro = parse_obj(rr.out);
    assert_string_equal(json_object_get_string_member(ro, "class"), "malformed");
    assert_string_equal(json_object_get_string_member(ro, "error"),
                        "malformed marker: cannot be read: Permission denied");
    /* a chk-<N> nobody may look into: the same malformed checkpoint in
     * jobs, check and resolve, never a checkpoint that vanished */
    testfs_put(fx->tmp, "u/_jobs/j/chk-2/COMPLETED", "generation=1\nparticipants=0\n");
    g_autofree char *chk2 = path_in(fx, "u/_jobs/j/chk-2");
    assert_int_equal(chmod(chk2, 0700), 0);
    g_auto(Run) jr2 = run_as_nobody("jobs", dir, "--json", NULL);
    assert_non_null(strstr(jr2.out, "\"checkpoints\" : [\n        1,\n        2\n      ]"));
    g_autofree char *jloc = path_in(fx, "u/_jobs/j");
    g_auto(Run) r2 = run_as_nobody("resolve", jloc, "-c", "2", "--json", NULL);
    assert_int_equal(r2.status, 1);
    g_autoptr(JsonObject) r2o = parse_obj(r2.out);
    assert_string_equal(json_object_get_string_member(r2o, "error"),
                        "malformed marker: cannot be read: Permission denied");
    g_auto(Run) c2 = run_as_nobody("check", dir, NULL);
    assert_non_null(strstr(c2.out, "_jobs/j/chk-2/COMPLETED"));
    assert_int_equal(chmod(chk2, 0755), 0);
    /* as root it is readable: the same command finds nothing wrong */
    g_auto(Run) asroot = run("check", dir, "--json", NULL);
    assert_int_equal(asroot.status, 0);
    /* an unreadable job directory is an I/O error, not a job without
     * markers (or an orphan root) */
    g_autofree char *jdir = path_in(fx, "u/_jobs/j");
    assert_int_equal(chmod(jdir, 0700), 0);
    const char *cmds[] = {"jobs", "check", "unused", "prune"};
    for (gsize i = 0; i < G_N_ELEMENTS(cmds); i++) {
        g_auto(Run) jr = run_as_nobody(cmds[i], dir, "--json", NULL);
        assert_one_line_error(&jr);
        assert_non_null(strstr(jr.err, "_jobs/j: Permission denied"));
    }
    /* resolve too: not "no marker for 1, as given" */
    g_auto(Run) rj = run_as_nobody("resolve", dir, "-c", "1", "--json", NULL);
    assert_one_line_error(&rj);
    assert_non_null(strstr(rj.err, "Permission denied"));
    assert_string_equal(rj.out, "");
    assert_int_equal(chmod(jdir, 0755), 0);
    /* an unreadable directory is an I/O error */
    g_autofree char *jobs = path_in(fx, "u");
    assert_int_equal(chmod(jobs, 0700), 0);
    g_auto(Run) d = run_as_nobody("jobs", dir, "--json", NULL);
    assert_one_line_error(&d);
}

/* ---- state-root, unused, collisions ---- */

static void state_root(void **state)
{
    (void)state;
    g_auto(Run) r = run("state-root", "s3://b/ckpt?local=/tmp/w", "j1", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "s3://b/ckpt/_state/j1?local=/tmp/w/_state/j1\n");
    g_auto(Run) j = run("state-root", "/data/ckpt/", "j1", "--json", NULL);
    assert_int_equal(j.status, 0);
    g_autoptr(JsonObject) o = parse_obj(j.out);
    assert_string_equal(json_object_get_string_member(o, "state_root"), "/data/ckpt/_state/j1");
    g_auto(Run) m = run("state-root", "memory://", "j1", NULL);
    assert_string_equal(m.out, "memory://\n");
    g_auto(Run) bad = run("state-root", "/data", ".hidden", NULL);
    assert_one_line_error(&bad);
    g_auto(Run) few = run("state-root", "/data", NULL);
    assert_one_line_error(&few);
}

static void unused(void **state)
{
    Fx *fx = *state;
    testfs_put(fx->tmp, "un/v1/0/checkpoint-1.snap", "0123456789");
    testfs_put(fx->tmp, "un/_state/a/v2/0/checkpoint-2.snap", "x");
    testfs_put(fx->tmp, "un/_jobs/a/chk-2/COMPLETED",
               "generation=2\nparticipants=0\nstate=_state/a\n");
    g_autofree char *dir = path_in(fx, "un");
    g_auto(Run) r = run("unused", dir, "--json", NULL);
    assert_int_equal(r.status, 1);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonArray *u = json_object_get_array_member(o, "unused");
    assert_int_equal(json_array_get_length(u), 1);
    JsonObject *e = json_array_get_object_element(u, 0);
    assert_string_equal(json_object_get_string_member(e, "path"), "v1");
    assert_string_equal(json_object_get_string_member(e, "reason"), "legacy-unread");
    assert_true(json_object_get_int_member(e, "bytes") > 0);
    g_autofree char *still = path_in(fx, "un/v1/0/checkpoint-1.snap");
    assert_true(g_file_test(still, G_FILE_TEST_EXISTS)); /* a dry run */
    /* once v1 is read again, nothing is unused */
    testfs_put(fx->tmp, "un/_jobs/b/chk-1/COMPLETED", "generation=1\nparticipants=0\n");
    g_auto(Run) n = run("unused", dir, "--json", NULL);
    assert_int_equal(n.status, 0);
    g_autoptr(JsonObject) no = parse_obj(n.out);
    assert_int_equal(json_array_get_length(json_object_get_array_member(no, "unused")), 0);
}

/* ---- prune ---- */

/* A fixture (namespaced jobs whose older generations are superseded, legacy
 * jobs in v1) plus what nobody reads: a legacy v0 (below the
 * fixture's v1: its marker without generation= reads the highest), a bare 5, a job's v0. */
static char *prune_fixture(Fx *fx, const char *name)
{
    g_autofree char *dir = fixture(fx, name, "--jobs", "4", "--checkpoints", "4", "--legacy", "2",
                                   "--seed", "3", NULL);
    testfs_put(dir, "v0/0/checkpoint-1.snap", "unread legacy generation");
    testfs_put(dir, "5/checkpoint-1.snap", "unread older layout");
    testfs_put(dir, "_state/j/v0/0/checkpoint-0.snap", "superseded");
    testfs_put(dir, "_state/j/v0/1/deeper/x", "superseded too");
    testfs_put(dir, "_state/j/v3/0/checkpoint-3.snap", "read");
    testfs_marker(dir, "j", 3, "generation=3\nparticipants=0\nstate=_state/j\n");
    return g_steal_pointer(&dir);
}

/* The paths of an array of {"path",...} objects, in order, one a line. */
static char *paths_of(JsonArray *a)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(a); i++)
        g_string_append_printf(
            s, "%s\n", json_object_get_string_member(json_array_get_object_element(a, i), "path"));
    return g_string_free(s, FALSE);
}

/* text less its last line (the summary under a table) */
static char *table_part(const char *text)
{
    const char *end = text + strlen(text);
    if (end > text && end[-1] == '\n')
        end--;
    while (end > text && end[-1] != '\n')
        end--;
    return g_strndup(text, (gsize)(end - text));
}

/* The lines of tree_of(dir) outside every path of `gone` (one a line). */
static char *tree_without(const char *tree, const char *gone)
{
    g_auto(GStrv) lines = g_strsplit(tree, "\n", -1);
    g_auto(GStrv) paths = g_strsplit(gone, "\n", -1);
    GString *s = g_string_new(NULL);
    for (char **l = lines; *l && **l; l++) {
        const char *rel = *l + 2; /* "D path" or "F path ..." */
        bool under = false;
        for (char **p = paths; *p && **p && !under; p++) {
            size_t n = strlen(*p);
            under = strncmp(rel, *p, n) == 0 && (rel[n] == '\0' || rel[n] == '/' || rel[n] == ' ');
        }
        if (!under)
            g_string_append_printf(s, "%s\n", *l);
    }
    return g_string_free(s, FALSE);
}

static void prune_dry_run_deletes_nothing(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = prune_fixture(fx, "p");
    g_autofree char *before = tree_of(dir);
    g_auto(Run) u = run("unused", dir, "--json", NULL);
    assert_int_equal(u.status, 1);
    g_autoptr(JsonObject) uo = parse_obj(u.out);
    JsonArray *ua = json_object_get_array_member(uo, "unused");
    assert_true(json_array_get_length(ua) >= 4);

    g_auto(Run) r = run("prune", dir, "--json", NULL);
    assert_int_equal(r.status, 0);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    assert_true(json_object_get_boolean_member(o, "dry_run"));
    JsonArray *ra = json_object_get_array_member(o, "removed");
    /* what --delete would remove: unused's list, entry for entry */
    assert_int_equal(json_array_get_length(ra), json_array_get_length(ua));
    for (guint i = 0; i < json_array_get_length(ua); i++) {
        JsonObject *x = json_array_get_object_element(ua, i);
        JsonObject *y = json_array_get_object_element(ra, i);
        assert_string_equal(json_object_get_string_member(x, "path"),
                            json_object_get_string_member(y, "path"));
        assert_string_equal(json_object_get_string_member(x, "reason"),
                            json_object_get_string_member(y, "reason"));
        assert_int_equal(json_object_get_int_member(x, "bytes"),
                         json_object_get_int_member(y, "bytes"));
    }
    assert_int_equal(json_array_get_length(json_object_get_array_member(o, "skipped")), 0);
    assert_int_equal(json_object_get_int_member(o, "freed_bytes"),
                     json_object_get_int_member(uo, "bytes"));
    g_auto(Run) h = run("prune", dir, NULL);
    assert_int_equal(h.status, 0);
    assert_non_null(strstr(h.out, "would-remove"));
    assert_non_null(strstr(h.out, "(dry run, nothing deleted: --delete removes them)"));
    g_autofree char *table = table_part(h.out);
    assert_true(testfs_table_aligned(table, "", " RESULT ") >= 4);
    g_autofree char *after = tree_of(dir);
    assert_string_equal(before, after);
}

static void prune_delete_removes_exactly_unused(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = prune_fixture(fx, "p");
    g_autofree char *before = tree_of(dir);
    g_auto(Run) u = run("unused", dir, "--json", NULL);
    g_autoptr(JsonObject) uo = parse_obj(u.out);
    g_autofree char *listed = paths_of(json_object_get_array_member(uo, "unused"));
    assert_non_null(strstr(listed, "_state/j/v0\n"));
    assert_non_null(strstr(listed, "v0\n"));
    assert_non_null(strstr(listed, "5\n"));
    assert_null(strstr(listed, "_state/j/v3\n"));

    g_auto(Run) r = run("prune", dir, "--delete", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    g_autoptr(JsonObject) o = parse_obj(r.out);
    assert_false(json_object_get_boolean_member(o, "dry_run"));
    JsonArray *ra = json_object_get_array_member(o, "removed");
    g_autofree char *removed = paths_of(ra);
    assert_string_equal(removed, listed);
    assert_int_equal(json_array_get_length(json_object_get_array_member(o, "skipped")), 0);
    gint64 sum = 0;
    for (guint i = 0; i < json_array_get_length(ra); i++)
        sum += json_object_get_int_member(json_array_get_object_element(ra, i), "bytes");
    assert_true(sum > 0);
    assert_int_equal(json_object_get_int_member(o, "freed_bytes"), sum);
    /* exactly those went: everything else is as it was, byte for byte */
    g_autofree char *after = tree_of(dir);
    g_autofree char *want = tree_without(before, listed);
    assert_string_equal(after, want);
    assert_string_not_equal(after, before);
    /* nothing is unused any more; a second prune has nothing to do */
    g_auto(Run) u2 = run("unused", dir, "--json", NULL);
    assert_int_equal(u2.status, 0);
    g_auto(Run) again = run("prune", dir, "--delete", NULL);
    assert_int_equal(again.status, 0);
    assert_non_null(strstr(again.out, "0 removed, 0 bytes freed; 0 kept, 0 gone already"));
}

/* The end-to-end side of the re-check: markers written before prune runs
 * (one of the owner reading its older generation again, one of a new job
 * reading the unread legacy generation) keep what they read, and prune
 * removes the rest; the re-check between the list and each removal is
 * tested on its own in tools/prune. */
static void prune_keeps_what_a_new_marker_reads(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = prune_fixture(fx, "p");
    g_auto(Run) u = run("unused", dir, "--json", NULL);
    g_autoptr(JsonObject) uo = parse_obj(u.out);
    g_autofree char *listed = paths_of(json_object_get_array_member(uo, "unused"));
    assert_non_null(strstr(listed, "_state/j/v0\n"));
    assert_non_null(strstr(listed, "v0\n"));
    testfs_marker(dir, "j", 4, "generation=0\nparticipants=0,1\nstate=_state/j\n");
    testfs_marker(dir, "late", 1, "generation=0\nparticipants=0\n");
    g_auto(Run) r = run("prune", dir, "--delete", "--json", NULL);
    assert_int_equal(r.status, 0);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    g_autofree char *removed = paths_of(json_object_get_array_member(o, "removed"));
    assert_null(strstr(removed, "_state/j/v0\n"));
    assert_null(strstr(removed, "v0\n"));
    assert_non_null(strstr(removed, "5\n"));
    const char *kept[] = {"_state/j/v0/0/checkpoint-0.snap", "_state/j/v0/1/deeper/x",
                          "v0/0/checkpoint-1.snap"};
    for (gsize i = 0; i < G_N_ELEMENTS(kept); i++) {
        g_autofree char *p = g_build_filename(dir, kept[i], NULL);
        assert_true(g_file_test(p, G_FILE_TEST_IS_REGULAR));
    }
    g_autofree char *five = g_build_filename(dir, "5", NULL);
    assert_false(g_file_test(five, G_FILE_TEST_EXISTS));
    /* and the restores of both markers read what is there */
    g_autofree char *jdir = g_build_filename(dir, "_jobs/late", NULL);
    g_auto(Run) res = run("resolve", jdir, "--json", NULL);
    assert_int_equal(res.status, 0);
    g_autoptr(JsonObject) ro = parse_obj(res.out);
    JsonArray *reads = json_object_get_array_member(ro, "reads");
    g_autofree char *read = g_build_filename(dir, "v0/0", NULL);
    assert_string_equal(json_array_get_string_element(reads, 0), read);
}

/* A symlink inside a pruned generation is removed, never followed: what
 * it points to, outside DIR or in a generation that stays, survives; an
 * entry that is itself a symlink is never listed nor touched. */
static void prune_symlink_targets_survive(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = prune_fixture(fx, "p");
    testfs_put(fx->tmp, "outside/precious/file", "not in DIR");
    testfs_put(fx->tmp, "outside/one-file", "not in DIR either");
    g_autofree char *odir = path_in(fx, "outside/precious");
    g_autofree char *ofile = path_in(fx, "outside/one-file");
    g_autofree char *kept = g_build_filename(dir, "_state/j/v3", NULL);
    const char *links[][2] = {
        {"_state/j/v0/0/to-dir", odir},
        {"_state/j/v0/0/to-file", ofile},
        {"_state/j/v0/to-kept", kept},
        {"v0/0/up", "../../_state/j/v3"},
        {"5/root", "/"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(links); i++) {
        g_autofree char *l = g_build_filename(dir, links[i][0], NULL);
        assert_int_equal(symlink(links[i][1], l), 0);
    }
    g_autofree char *v8 = g_build_filename(dir, "v8", NULL);
    assert_int_equal(symlink(odir, v8), 0);
    g_autofree char *outside = path_in(fx, "outside");
    g_autofree char *outside_before = tree_of(outside);
    g_autofree char *kept_before = tree_of(kept);

    g_auto(Run) u = run("unused", dir, "--json", NULL);
    g_autoptr(JsonObject) uo = parse_obj(u.out);
    g_autofree char *listed = paths_of(json_object_get_array_member(uo, "unused"));
    assert_null(strstr(listed, "v8\n"));
    g_auto(Run) r = run("prune", dir, "--delete", NULL);
    assert_int_equal(r.status, 0);
    g_autofree char *v0 = g_build_filename(dir, "_state/j/v0", NULL);
    g_autofree char *lv0 = g_build_filename(dir, "v0", NULL);
    assert_false(g_file_test(v0, G_FILE_TEST_EXISTS));
    assert_false(g_file_test(lv0, G_FILE_TEST_EXISTS));
    g_autofree char *outside_after = tree_of(outside);
    g_autofree char *kept_after = tree_of(kept);
    assert_string_equal(outside_before, outside_after);
    assert_string_equal(kept_before, kept_after);
    struct stat sb;
    assert_int_equal(lstat(v8, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
}

/* What cannot be removed is kept and reported, exit 1: prune as a user
 * who may read DIR but not change it. */
static void prune_reports_what_it_cannot_remove(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = prune_fixture(fx, "p");
    g_autofree char *before = tree_of(dir);
    g_auto(Run) r = run_as_nobody("prune", dir, "--delete", "--json", NULL);
    assert_int_equal(r.status, 1);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    assert_int_equal(json_array_get_length(json_object_get_array_member(o, "removed")), 0);
    JsonArray *sk = json_object_get_array_member(o, "skipped");
    assert_true(json_array_get_length(sk) >= 4);
    for (guint i = 0; i < json_array_get_length(sk); i++) {
        JsonObject *e = json_array_get_object_element(sk, i);
        assert_string_equal(json_object_get_string_member(e, "reason"), "error");
        assert_non_null(strstr(json_object_get_string_member(e, "detail"), "Permission denied"));
    }
    assert_int_equal(json_object_get_int_member(o, "freed_bytes"), 0);
    /* one line on stderr says so */
    assert_non_null(strstr(r.err, "ckptctl prune: "));
    assert_non_null(strstr(r.err, " entries not removed: 0 became needed, 0 no longer a "
                                  "directory, "));
    const char *nl = strchr(r.err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    g_auto(Run) h = run_as_nobody("prune", dir, "--delete", NULL);
    assert_int_equal(h.status, 1);
    assert_non_null(strstr(h.out, "Permission denied"));
    g_autofree char *table = table_part(h.out);
    assert_true(testfs_table_aligned(table, "", " RESULT ") >= 4);
    g_autofree char *after = tree_of(dir);
    assert_string_equal(before, after);
}

static void prune_usage_and_io_errors(void **state)
{
    Fx *fx = *state;
    g_auto(Run) none = run("prune", NULL);
    assert_one_line_error(&none);
    g_auto(Run) two = run("prune", "a", "b", NULL);
    assert_one_line_error(&two);
    g_auto(Run) bad = run("prune", "--frobnicate", "/", NULL);
    assert_one_line_error(&bad);
    g_autofree char *missing = path_in(fx, "missing");
    g_auto(Run) m = run("prune", missing, "--delete", NULL);
    assert_one_line_error(&m);
    assert_string_equal(m.out, "");
    g_auto(Run) help = run("prune", "--help", NULL);
    assert_int_equal(help.status, 0);
    assert_non_null(strstr(help.out, "--delete"));
}

/* unused --print0: DIR/PATH of each entry, each followed by a NUL, nothing
 * else; what xargs -0 reads back; not with --json. */
static void unused_print0(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = prune_fixture(fx, "p");
    g_auto(Run) j = run("unused", dir, "--json", NULL);
    g_autoptr(JsonObject) o = parse_obj(j.out);
    JsonArray *ua = json_object_get_array_member(o, "unused");
    GString *want = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(ua); i++) {
        const char *p = json_object_get_string_member(json_array_get_object_element(ua, i), "path");
        g_autofree char *full = g_build_filename(dir, p, NULL);
        g_string_append_len(want, full, (gssize)strlen(full) + 1);
    }
    const char *bin = g_getenv("CKPTCTL");
    const char *argv[] = {bin, "unused", dir, "--print0", NULL};
    g_autofree char *out = NULL;
    gsize outlen = 0;
    gint status = 0;
    g_autoptr(GError) err = NULL;
    {
        g_autoptr(GSubprocess) sp = g_subprocess_newv(argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE, &err);
        assert_non_null(sp);
        g_autoptr(GBytes) ob = NULL;
        assert_true(g_subprocess_communicate(sp, NULL, NULL, &ob, NULL, &err));
        out = g_bytes_unref_to_data(g_steal_pointer(&ob), &outlen);
        status = g_subprocess_get_exit_status(sp);
    }
    assert_int_equal(status, 1);
    assert_int_equal(outlen, want->len);
    assert_memory_equal(out, want->str, want->len);
    assert_int_equal(out[outlen - 1], '\0');
    assert_null(memchr(out, '\n', outlen));
    /* xargs -0 reads each back whole */
    g_autofree char *cmd =
        g_strdup_printf("'%s' unused '%s' -0 | xargs -0 -n1 stat -c %%F", bin, dir);
    g_autofree char *xo = NULL;
    const char *sh[] = {"sh", "-c", cmd, NULL};
    assert_true(g_spawn_sync(NULL, (char **)sh, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &xo, NULL,
                             &status, &err));
    g_auto(GStrv) kinds = g_strsplit(g_strstrip(xo), "\n", -1);
    assert_int_equal(g_strv_length(kinds), json_array_get_length(ua));
    for (char **k = kinds; *k; k++)
        assert_string_equal(*k, "directory");
    g_string_free(want, TRUE);
    g_auto(Run) both = run("unused", dir, "--print0", "--json", NULL);
    assert_one_line_error(&both);
    /* nothing unused: nothing printed */
    g_auto(Run) del = run("prune", dir, "--delete", NULL);
    assert_int_equal(del.status, 0);
    g_auto(Run) empty = run("unused", dir, "--print0", NULL);
    assert_int_equal(empty.status, 0);
    assert_string_equal(empty.out, "");
}

/* One collision record as the daemon writes it. */
static char *record_line(const char *time, const char *kind, const char *caller, const char *owner,
                         const char *path)
{
    g_autofree char *o = owner ? g_strdup_printf("\"%s\"", owner) : g_strdup("null");
    return g_strdup_printf("{\"time\":\"%s\",\"kind\":\"%s\",\"verdict\":\"denied\",\"op\":"
                           "\"create\",\"path\":\"%s\",\"path2\":null,\"caller_job\":\"%s\","
                           "\"owner_job\":%s,\"pid\":7,\"uid\":0,\"comm\":\"w\"}\n",
                           time, kind, path, caller, o);
}

static guint records_in(const char *json)
{
    g_autoptr(JsonObject) o = parse_obj(json);
    return json_array_get_length(json_object_get_array_member(o, "records"));
}

static void collisions(void **state)
{
    Fx *fx = *state;
    const char *log =
        "{\"time\":\"2026-12-01T18:00:00.123Z\",\"kind\":\"foreign-write\",\"verdict\":\"denied\","
        "\"op\":\"rename\",\"path\":\"_state/b/v1/0/checkpoint-1.snap\",\"path2\":null,"
        "\"caller_job\":\"a\",\"owner_job\":\"b\",\"pid\":1234,\"uid\":1000,\"comm\":\"worker\"}\n"
        "{\"time\":\"2026-12-01T18:00:01.000Z\",\"kind\":\"legacy-write\",\"verdict\":\"denied\","
        "\"op\":\"create\",\"path\":\"v1/0/x\",\"path2\":null,\"caller_job\":null,"
        "\"owner_job\":null,\"pid\":1,\"uid\":0,\"comm\":null}\n";
    testfs_put(fx->tmp, "mnt/_views/.collisions", log);
    g_autofree char *mnt = path_in(fx, "mnt");
    g_auto(Run) r = run("collisions", mnt, "--json", NULL);
    assert_int_equal(r.status, 1);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonArray *recs = json_object_get_array_member(o, "records");
    assert_int_equal(json_array_get_length(recs), 2);
    JsonObject *first = json_array_get_object_element(recs, 0);
    assert_string_equal(json_object_get_string_member(first, "kind"), "foreign-write");
    assert_int_equal(json_object_get_int_member(first, "pid"), 1234);
    g_auto(Run) h = run("collisions", mnt, NULL);
    assert_int_equal(h.status, 1);
    assert_non_null(strstr(h.out, "foreign-write"));
    assert_null(strstr(h.out, "IDENTITY")); /* no record has one */
    /* the mode that named the caller, and an identity that is no job id */
    const char *ident_log =
        "{\"time\":\"2026-12-01T18:00:00.123Z\",\"kind\":\"foreign-write\",\"verdict\":\"denied\","
        "\"op\":\"create\",\"path\":\"_state/b/x\",\"path2\":null,\"caller_job\":\"a\","
        "\"identity\":\"cgroup\",\"owner_job\":\"b\",\"pid\":7,\"uid\":0,\"comm\":\"w\"}\n"
        "{\"time\":\"2026-12-01T18:00:01.000Z\",\"kind\":\"invalid-identity\","
        "\"verdict\":\"denied\",\"op\":\"create\",\"path\":\"_state/b/y\",\"path2\":null,"
        "\"caller_job\":null,\"identity\":\"env\",\"identity_value\":\"bad id!\","
        "\"owner_job\":\"b\",\"pid\":8,\"uid\":0,\"comm\":\"w\"}\n"
        "{\"time\":\"2026-12-01T18:00:02.000Z\",\"kind\":\"anonymous-write\","
        "\"verdict\":\"denied\",\"op\":\"create\",\"path\":\"_state/b/z\",\"path2\":null,"
        "\"caller_job\":null,\"owner_job\":\"b\",\"pid\":9,\"uid\":0,\"comm\":\"w\"}\n";
    testfs_put(fx->tmp, "mnti/_views/.collisions", ident_log);
    g_autofree char *mnti = path_in(fx, "mnti");
    g_auto(Run) hi = run("collisions", mnti, NULL);
    assert_int_equal(hi.status, 1);
    assert_int_equal(testfs_table_aligned(hi.out, "", " IDENTITY"), 3);
    assert_non_null(strstr(hi.out, "(invalid: bad id!)"));
    assert_non_null(strstr(hi.out, "(anonymous)"));
    assert_non_null(strstr(hi.out, " cgroup"));
    g_auto(Run) ji = run("collisions", mnti, "--json", NULL);
    g_autoptr(JsonObject) jo = parse_obj(ji.out);
    JsonObject *inv = json_array_get_object_element(json_object_get_array_member(jo, "records"), 1);
    assert_string_equal(json_object_get_string_member(inv, "identity_value"), "bad id!");
    /* another views name */
    testfs_put(fx->tmp, "mnt2/v/.collisions", "");
    g_autofree char *mnt2 = path_in(fx, "mnt2");
    g_auto(Run) e = run("collisions", mnt2, "--views", "v", "--json", NULL);
    assert_int_equal(e.status, 0);
    g_autoptr(JsonObject) eo = parse_obj(e.out);
    assert_int_equal(json_array_get_length(json_object_get_array_member(eo, "records")), 0);
    /* garbage is skipped and counted; a missing log is an error */
    testfs_put(fx->tmp, "mnt3/_views/.collisions", "{\"kind\":1}\nnot json\n");
    g_autofree char *mnt3 = path_in(fx, "mnt3");
    g_auto(Run) g = run("collisions", mnt3, "--json", NULL);
    assert_int_equal(g.status, 1);
    assert_int_equal(records_in(g.out), 1);
    assert_non_null(strstr(g.err, "skipped 1 torn line(s)"));
    g_autofree char *none = path_in(fx, "none");
    g_auto(Run) m = run("collisions", none, NULL);
    assert_one_line_error(&m);
}

/* Tables are aligned whatever the width of a job id (the fixture's are 32
 * hex characters, as real ones are): check and collisions. */
static void tables_aligned(void **state)
{
    Fx *fx = *state;
    g_autofree char *dir = path_in(fx, "fx");
    g_auto(Run) f = run("fixture", dir, "--jobs", "3", "--legacy", "2", "--seed", "5", NULL);
    assert_int_equal(f.status, 0);
    /* and a job id far longer than 32 characters */
    g_autofree char *longid = g_strnfill(100, 'j');
    g_autofree char *marker = g_strdup_printf("fx/_jobs/%s/chk-1/COMPLETED", longid);
    testfs_put(fx->tmp, marker, "generation=1\nparticipants=0\n");
    g_auto(Run) c = run("check", dir, NULL);
    assert_int_equal(c.status, 1);
    assert_true(testfs_table_aligned(c.out, "", " DETAIL") >= 2);
    assert_non_null(strstr(c.out, longid));
    g_auto(Run) j = run("jobs", dir, NULL);
    assert_int_equal(j.status, 0);
    assert_int_equal(testfs_table_aligned(j.out, "", " LAYOUT "), 6);
    assert_non_null(strstr(j.out, longid));
    g_auto(Run) u = run("unused", dir, NULL);
    assert_true(testfs_table_aligned(u.out, "", " REASON ") >= 1);
    const char *log =
        "{\"time\":\"2026-12-01T18:00:00.123Z\",\"kind\":\"foreign-write\",\"verdict\":\"denied\","
        "\"op\":\"rename\",\"path\":\"_state/0123456789abcdef0123456789abcdef/v1/0/x\","
        "\"path2\":null,\"caller_job\":\"fedcba9876543210fedcba9876543210\","
        "\"owner_job\":\"0123456789abcdef0123456789abcdef\",\"pid\":1234,\"uid\":1000,"
        "\"comm\":\"worker\"}\n"
        "{\"time\":\"2026-12-01T18:00:01.000Z\",\"kind\":\"legacy-write\",\"verdict\":\"denied\","
        "\"op\":\"create\",\"path\":\"v1/0/x\",\"path2\":null,\"caller_job\":null,"
        "\"owner_job\":null,\"pid\":1,\"uid\":0,\"comm\":null}\n";
    testfs_put(fx->tmp, "mnt/_views/.collisions", log);
    g_autofree char *mnt = path_in(fx, "mnt");
    g_auto(Run) r = run("collisions", mnt, NULL);
    assert_int_equal(r.status, 1);
    assert_int_equal(testfs_table_aligned(r.out, "", " VERDICT "), 2);
    assert_null(strstr(r.out, " TAG")); /* no record has a tag */
}

/* -c N where the job has no marker for N stays as-given (read as the
 * location names it, exit 0) but says so on stderr; --version names ckptfs. */
static void resolve_missing_checkpoint_says_so(void **state)
{
    Fx *fx = *state;
    testfs_put(fx->tmp, "rm/_jobs/j/chk-1/COMPLETED",
               "checkpoint=1\ngeneration=1\nparticipants=0\nstate=_state/j\n");
    testfs_put(fx->tmp, "rm/_state/j/v1/0/x", "x");
    g_autofree char *jobdir = path_in(fx, "rm/_jobs/j");
    g_auto(Run) r = run("resolve", jobdir, "-c", "99", "--json", NULL);
    assert_int_equal(r.status, 0);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    assert_string_equal(json_object_get_string_member(o, "status"), "as-given");
    assert_non_null(strstr(r.err, "no marker for checkpoint 99"));
    /* a job's marker directory read as given: the restore would read the
     * marker directory itself as state, which the answer says in a field */
    assert_all_resolve_keys(o);
    const char *w = json_object_get_string_member(o, "warning");
    assert_non_null(w);
    assert_non_null(strstr(w, "no marker for checkpoint 99"));
    assert_non_null(strstr(w, "read the marker directory itself as state"));
    assert_non_null(strstr(r.err, "warning: "));
    g_auto(Run) h = run("resolve", jobdir, "-c", "99", NULL);
    assert_int_equal(h.status, 0);
    assert_non_null(strstr(h.out, "status: as-given\n"));
    g_autofree char *line = g_strconcat("\nwarning: ", w, "\n", NULL);
    assert_non_null(strstr(h.out, line));
    assert_string_equal(h.err, ""); /* said once, in the text */
    /* latest of a marker directory with no marker at all: the same */
    testfs_mkdir(fx->tmp, "rm/_jobs/empty");
    g_autofree char *empty = path_in(fx, "rm/_jobs/empty");
    g_auto(Run) e = run("resolve", empty, "--json", NULL);
    assert_int_equal(e.status, 0);
    g_autoptr(JsonObject) eo = parse_obj(e.out);
    assert_string_equal(json_object_get_string_member(eo, "status"), "as-given");
    assert_non_null(strstr(json_object_get_string_member(eo, "warning"), "itself as state"));
    /* the checkpoint that exists: nothing on stderr, no warning */
    g_auto(Run) ok = run("resolve", jobdir, "-c", "1", NULL);
    assert_int_equal(ok.status, 0);
    assert_string_equal(ok.err, "");
    assert_null(strstr(ok.out, "warning"));
    g_auto(Run) okj = run("resolve", jobdir, "-c", "1", "--json", NULL);
    g_autoptr(JsonObject) oko = parse_obj(okj.out);
    assert_true(json_object_get_null_member(oko, "warning"));
    /* a checkpoint directory without a marker for N: as given, no warning */
    g_autofree char *cdir = path_in(fx, "rm");
    g_auto(Run) cd = run("resolve", cdir, "-c", "99", "--json", NULL);
    g_autoptr(JsonObject) cdo = parse_obj(cd.out);
    assert_true(json_object_get_null_member(cdo, "warning"));
    /* a URI: as given, nothing to say */
    g_auto(Run) u = run("resolve", "s3://b/ckpt", "-c", "99", NULL);
    assert_int_equal(u.status, 0);
    assert_string_equal(u.err, "");
    g_auto(Run) v = run("--version", NULL);
    assert_int_equal(v.status, 0);
    assert_non_null(strstr(v.out, "ckptfs"));
}

/* --file FILE alone reads FILE (it used to fail with "expected [MOUNT]"),
 * and MOUNT together with --file is a usage error instead of MOUNT being
 * ignored. */
static void collisions_file(void **state)
{
    Fx *fx = *state;
    const char *log =
        "{\"time\":\"2026-12-01T18:00:00.123Z\",\"kind\":\"foreign-write\",\"verdict\":\"denied\","
        "\"op\":\"create\",\"path\":\"_state/b/x\",\"path2\":null,\"caller_job\":\"a\","
        "\"owner_job\":\"b\",\"pid\":7,\"uid\":0,\"comm\":\"w\"}\n";
    testfs_put(fx->tmp, "log/collisions.jsonl", log);
    g_autofree char *file = path_in(fx, "log/collisions.jsonl");
    g_auto(Run) r = run("collisions", "--file", file, "--json", NULL);
    assert_int_equal(r.status, 1);
    g_autoptr(JsonObject) o = parse_obj(r.out);
    JsonArray *recs = json_object_get_array_member(o, "records");
    assert_int_equal(json_array_get_length(recs), 1);
    assert_int_equal(json_object_get_int_member(json_array_get_object_element(recs, 0), "pid"), 7);
    g_auto(Run) h = run("collisions", "--file", file, NULL);
    assert_int_equal(h.status, 1);
    assert_non_null(strstr(h.out, "_state/b/x"));
    /* both: which one did the user mean?  A usage error, not a silent pick */
    testfs_put(fx->tmp, "mnt/_views/.collisions", "");
    g_autofree char *mnt = path_in(fx, "mnt");
    g_auto(Run) both = run("collisions", mnt, "--file", file, NULL);
    assert_one_line_error(&both);
    assert_non_null(strstr(both.err, "not both"));
    /* neither */
    g_auto(Run) neither = run("collisions", NULL);
    assert_one_line_error(&neither);
    /* a missing file names it */
    g_autofree char *missing = path_in(fx, "log/none.jsonl");
    g_auto(Run) m = run("collisions", "--file", missing, NULL);
    assert_one_line_error(&m);
    assert_non_null(strstr(m.err, "none.jsonl"));
}

/* A directory that is not a checkpoint directory (no _jobs, _state, v<G>
 * or <S>) is a usage error for the commands that read one: `jobs /etc`
 * printed nothing and exited 0.  An empty directory is a checkpoint
 * directory before its first job. */
static void not_a_checkpoint_dir(void **state)
{
    Fx *fx = *state;
    testfs_put(fx->tmp, "etc/passwd", "root:x:0:0::/root:/bin/sh\n");
    testfs_mkdir(fx->tmp, "etc/ssh");
    testfs_mkdir(fx->tmp, "empty");
    g_autofree char *etc = path_in(fx, "etc");
    g_autofree char *empty = path_in(fx, "empty");
    static const char *const cmds[] = {"jobs", "check", "unused", "prune"};
    for (gsize i = 0; i < G_N_ELEMENTS(cmds); i++) {
        g_auto(Run) r = run(cmds[i], etc, NULL);
        assert_one_line_error(&r);
        assert_non_null(strstr(r.err, "not a checkpoint directory"));
        assert_string_equal(r.out, "");
        g_auto(Run) j = run(cmds[i], etc, "--json", NULL);
        assert_one_line_error(&j);
        assert_string_equal(j.out, "");
        g_auto(Run) e = run(cmds[i], empty, "--json", NULL);
        assert_int_equal(e.status, 0);
        g_autoptr(JsonObject) o = parse_obj(e.out);
        assert_non_null(o);
    }
}

/* A torn line (a writer killed mid-line) made the whole log unreadable;
 * now it is skipped and counted on stderr.  --since, --job and --kind
 * keep what they name. */
static void collisions_torn_lines_and_filters(void **state)
{
    Fx *fx = *state;
    g_autofree char *r1 =
        record_line("2026-01-01T10:00:00.000Z", "foreign-write", "b", "a", "_state/a/x");
    g_autofree char *r2 = record_line("2026-06-01T10:00:00.000Z", "legacy-write", "c", NULL, "v1");
    /* the newest, made a second ago: --since 1h keeps it alone */
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *nows = g_date_time_format(now, "%Y-%m-%dT%H:%M:%S.000Z");
    g_autofree char *r3 = record_line(nows, "cross-namespace-rename", "a", "b", "_state/b/y");
    g_autofree char *log = g_strconcat(r1, "{\"time\":\"2026-03-01T10:00", "\n", r2, r3,
                                       "{\"time\":", NULL); /* torn twice, the last without LF */
    testfs_put(fx->tmp, "log.jsonl", log);
    g_autofree char *file = path_in(fx, "log.jsonl");
    g_auto(Run) all = run("collisions", "--file", file, "--json", NULL);
    assert_int_equal(all.status, 1);
    assert_int_equal(records_in(all.out), 3);
    assert_non_null(strstr(all.err, "skipped 2 torn line(s)"));
    assert_non_null(strstr(all.err, "line 2"));
    g_auto(Run) h = run("collisions", "--file", file, NULL);
    assert_int_equal(h.status, 1);
    assert_non_null(strstr(h.out, "\n3 record(s)\n"));
    /* --since: an absolute time, a date, how long ago */
    g_auto(Run) s1 =
        run("collisions", "--file", file, "--since", "2026-05-01T00:00:00Z", "--json", NULL);
    assert_int_equal(records_in(s1.out), 2);
    g_auto(Run) s2 = run("collisions", "--file", file, "--since", "2026-01-02", "--json", NULL);
    assert_int_equal(records_in(s2.out), 2);
    g_auto(Run) s3 = run("collisions", "--file", file, "--since", "1h", "--json", NULL);
    assert_int_equal(records_in(s3.out), 1);
    g_auto(Run) s4 = run("collisions", "--file", file, "--since", "2099-01-01", NULL);
    assert_int_equal(s4.status, 0); /* nothing kept: nothing found */
    assert_non_null(strstr(s4.out, "0 record(s) of 3 in the log"));
    /* --job: as the writer or as the owner */
    g_auto(Run) j = run("collisions", "--file", file, "--job", "a", "--json", NULL);
    assert_int_equal(records_in(j.out), 2);
    g_auto(Run) jc = run("collisions", "--file", file, "--job", "c", "--json", NULL);
    assert_int_equal(records_in(jc.out), 1);
    /* --kind: repeated, or a comma list */
    g_auto(Run) k = run("collisions", "--file", file, "--kind", "legacy-write", "--kind",
                        "foreign-write", "--json", NULL);
    assert_int_equal(records_in(k.out), 2);
    g_auto(Run) k2 = run("collisions", "--file", file, "--kind",
                         "cross-namespace-rename,legacy-write", "--json", NULL);
    assert_int_equal(records_in(k2.out), 2);
    g_auto(Run) all3 = run("collisions", "--file", file, "--kind", "foreign-write", "--job", "b",
                           "--since", "2025-01-01", "--json", NULL);
    assert_int_equal(records_in(all3.out), 1);
    /* a kind nobody writes: said, not an error */
    g_auto(Run) ku = run("collisions", "--file", file, "--kind", "foriegn-write", "--json", NULL);
    assert_int_equal(ku.status, 0);
    assert_non_null(strstr(ku.err, "not a kind this ckptctl knows"));
    /* bad values: usage errors */
    g_auto(Run) b1 = run("collisions", "--file", file, "--since", "yesterday-ish", NULL);
    assert_one_line_error(&b1);
    g_auto(Run) b2 = run("collisions", "--file", file, "--job", "not/a/job", NULL);
    assert_one_line_error(&b2);
}

/* --follow: the records there are, then each one appended (a line still
 * being written waits for its LF, a rotated file is followed by name),
 * until SIGTERM: exit 1 after records. */
static void collisions_follow_file(void **state)
{
    Fx *fx = *state;
    g_autofree char *r1 =
        record_line("2026-01-01T10:00:00.000Z", "foreign-write", "b", "a", "_state/a/first");
    testfs_put(fx->tmp, "follow.jsonl", r1);
    g_autofree char *file = path_in(fx, "follow.jsonl");
    const char *argv[] = {g_getenv("CKPTCTL"),
                          "collisions",
                          "--file",
                          file,
                          "--follow",
                          "--json",
                          "--job",
                          "a",
                          NULL};
    GPid pid;
    gint out_fd = -1;
    g_autoptr(GError) err = NULL;
    assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                         NULL, &pid, NULL, &out_fd, NULL, &err));
    g_autoptr(GString) got = g_string_new(NULL);
    g_autofree char *r2 =
        record_line("2026-01-02T10:00:00.000Z", "foreign-write", "b", "a", "_state/a/second");
    g_autofree char *r3 = record_line("2026-01-03T10:00:00.000Z", "legacy-write", "c", NULL,
                                      "v9"); /* not job a's: filtered out */
    g_autofree char *r4 = record_line("2026-01-04T10:00:00.000Z", "foreign-write", "a", "b",
                                      "_state/b/after-rotation");
    const char *wants[] = {"_state/a/first", "_state/a/second", "_state/b/after-rotation"};
    for (int step = 0; step < 3; step++) {
        if (step == 1) {
            /* half a line, then the rest */
            size_t half = strlen(r2) / 2;
            FILE *f = fopen(file, "a");
            fwrite(r2, 1, half, f);
            fclose(f);
            g_usleep(600 * 1000);
            f = fopen(file, "a");
            fputs(r2 + half, f);
            fputs(r3, f);
            fclose(f);
        } else if (step == 2) {
            g_autofree char *moved = path_in(fx, "follow.jsonl.1");
            assert_int_equal(rename(file, moved), 0);
            testfs_put(fx->tmp, "follow.jsonl", r4);
        }
        for (int i = 0; i < 100 && !strstr(got->str, wants[step]); i++) {
            char buf[4096];
            struct pollfd pfd = {out_fd, POLLIN, 0};
            if (poll(&pfd, 1, 100) > 0) {
                ssize_t n = read(out_fd, buf, sizeof buf);
                if (n > 0)
                    g_string_append_len(got, buf, n);
            }
        }
        if (!strstr(got->str, wants[step]))
            fail_msg("--follow did not print %s; got: %s", wants[step], got->str);
    }
    kill(pid, SIGTERM);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    g_spawn_close_pid(pid);
    close(out_fd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_null(strstr(got->str, "v9"));
    /* each record its own document, pretty like every --json */
    assert_non_null(strstr(got->str, "{\n  \"time\" : "));
}

/* ---- the progress line ---- */

/* What `cmdline` writes on a terminal (a pty from script(1)); stdout is
 * redirected by the command line itself where the test wants stderr only. */
static char *on_tty(const char *cmdline)
{
    const char *argv[] = {"script", "-qec", cmdline, "/dev/null", NULL};
    g_autofree char *out = NULL;
    gint status = 0;
    g_autoptr(GError) err = NULL;
    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, NULL,
                      &status, &err))
        fail_msg("script: %s", err->message);
    assert_true(WIFEXITED(status));
    return g_steal_pointer(&out);
}

static void progress_line(void **state)
{
    Fx *fx = *state;
    const char *bin = g_getenv("CKPTCTL");
    g_autofree char *dir = path_in(fx, "d");
    /* shown from the start (instead of after a second) so a small directory shows it */
    g_setenv("CKPTCTL_PROGRESS_DELAY_MS", "0", TRUE);
    g_autofree char *fx_cmd =
        g_strdup_printf("%s fixture %s --jobs 20 --checkpoints 2 > /dev/null", bin, dir);
    g_autofree char *fx_out = on_tty(fx_cmd);
    assert_non_null(strstr(fx_out, "\r\033[Kckptctl fixture: writing"));
    static const char *const cmds[] = {"jobs", "check", "unused", "prune"};
    for (gsize i = 0; i < G_N_ELEMENTS(cmds); i++) {
        /* a terminal: the line, erased at the end */
        g_autofree char *c1 = g_strdup_printf("%s %s %s > /dev/null", bin, cmds[i], dir);
        g_autofree char *o1 = on_tty(c1);
        g_autofree char *want = g_strdup_printf("\r\033[Kckptctl %s: ", cmds[i]);
        assert_non_null(strstr(o1, want));
        assert_true(g_str_has_suffix(o1, "\r\033[K"));
        /* --json on a terminal: none */
        g_autofree char *c2 = g_strdup_printf("%s %s --json %s > /dev/null", bin, cmds[i], dir);
        g_autofree char *o2 = on_tty(c2);
        assert_null(strstr(o2, "ckptctl"));
        assert_null(strchr(o2, '\r'));
        /* piped: none, and stdout is the plain table */
        g_auto(Run) r = run(cmds[i], dir, NULL);
        assert_true(r.status == 0 || r.status == 1);
        assert_string_equal(r.err, "");
        assert_null(strchr(r.out, '\r'));
    }
    g_autofree char *d2 = path_in(fx, "d2");
    g_auto(Run) f = run("fixture", d2, "--jobs", "5", NULL);
    assert_int_equal(f.status, 0);
    assert_string_equal(f.err, "");
    g_unsetenv("CKPTCTL_PROGRESS_DELAY_MS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_and_help),
        cmocka_unit_test_setup_teardown(fixture_is_deterministic, setup, teardown),
        cmocka_unit_test_setup_teardown(fixture_refuses_non_empty_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(jobs_json, setup, teardown),
        cmocka_unit_test_setup_teardown(jobs_table_abbreviates_long_checkpoint_lists, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(jobs_json_is_json_glib_pretty, setup, teardown),
        cmocka_unit_test_setup_teardown(every_json_in_one_style, setup, teardown),
        cmocka_unit_test_setup_teardown(json_uint64_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(resolve_refused_names_every_job, setup, teardown),
        cmocka_unit_test_setup_teardown(resolve_human_words, setup, teardown),
        cmocka_unit_test_setup_teardown(resolve_flags_and_unknown_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(resolve_marker_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(resolve_as_given_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(check_fixture, setup, teardown),
        cmocka_unit_test_setup_teardown(check_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(unreadable_marker_as_nobody, setup, teardown),
        cmocka_unit_test(state_root),
        cmocka_unit_test_setup_teardown(unused, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_dry_run_deletes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_delete_removes_exactly_unused, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_keeps_what_a_new_marker_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_symlink_targets_survive, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_reports_what_it_cannot_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_usage_and_io_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(unused_print0, setup, teardown),
        cmocka_unit_test_setup_teardown(collisions, setup, teardown),
        cmocka_unit_test_setup_teardown(collisions_file, setup, teardown),
        cmocka_unit_test_setup_teardown(tables_aligned, setup, teardown),
        cmocka_unit_test_setup_teardown(resolve_missing_checkpoint_says_so, setup, teardown),
        cmocka_unit_test_setup_teardown(progress_line, setup, teardown),
        cmocka_unit_test_setup_teardown(not_a_checkpoint_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(collisions_torn_lines_and_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(collisions_follow_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
