/* The agreement test: for many generated checkpoint directories
 * (ckptctl fixture seeds and options, plus hostile shapes: non-regular and
 * symlinked markers, malformed ones, foreign, escaping, remote and external
 * roots, legacy and older layouts, cut-short, huge ids, duplicated
 * participants), mount each and, for every job and every checkpoint,
 * compare `ckptctl resolve <dir>/_jobs/<J> -c N --json` with what the view
 * shows: the restore block field by field, checkpoints/<N>/ (ERROR and its
 * text, or one entry per subtask read with its user.ckptfs.backing and
 * user.ckptfs.generation), latest, and resolve's human text against the
 * restore block.  The job and checkpoint lists come from `ckptctl jobs
 * --json` and must match the views' listings.  The first disagreement
 * fails, printing both sides and keeping the directory.
 *
 * CKPTFS_AGREE_DIRS=N changes the number of directories (default 200);
 * CKPTFS_AGREE_FIRST=K starts at directory K (to replay one). */
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

/* ---- writing a directory ---- */

static void put(const char *root, const char *rel, const char *data, gssize len)
{
    g_autofree char *p = g_build_filename(root, rel, NULL);
    g_autofree char *d = g_path_get_dirname(p);
    assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents(p, data, len, &err))
        fail_msg("%s: %s", p, err->message);
}

static void mk(const char *root, const char *rel)
{
    g_autofree char *p = g_build_filename(root, rel, NULL);
    assert_int_equal(g_mkdir_with_parents(p, 0755), 0);
}

static void marker(const char *root, const char *job, const char *n, const char *text)
{
    g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-%s/COMPLETED", job, n);
    put(root, rel, text, -1);
}

static void sym(const char *root, const char *rel, const char *target)
{
    g_autofree char *p = g_build_filename(root, rel, NULL);
    g_autofree char *d = g_path_get_dirname(p);
    assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
    assert_int_equal(symlink(target, p), 0);
}

/* The hostile shapes; each writes job(s) named after its tag t. */
typedef void (*Shape)(const char *root, const char *ext, const char *t, GRand *r, GString *cfg);

static void shape_non_regular(const char *root, const char *ext, const char *t, GRand *r,
                              GString *cfg)
{
    (void)cfg;
    (void)ext;
    g_autofree char *j = g_strdup_printf("nr-%s", t);
    g_autofree char *own = g_strdup_printf("_state/%s/v1/0/s", j);
    put(root, own, "x", -1);
    g_autofree char *good = g_strdup_printf("generation=1\nparticipants=0\nstate=_state/%s\n", j);
    marker(root, j, "1", good);
    put(root, "elsewhere/COMPLETED", good, -1);
    g_autofree char *c2 = g_strdup_printf("_jobs/%s/chk-2/COMPLETED", j);
    g_autofree char *tg = g_build_filename(root, "elsewhere/COMPLETED", NULL);
    sym(root, c2, g_rand_boolean(r) ? tg : "../../../elsewhere/COMPLETED");
    g_autofree char *c3 = g_strdup_printf("_jobs/%s/chk-3/COMPLETED", j);
    mk(root, c3);
    g_autofree char *c4 = g_strdup_printf("_jobs/%s/chk-4", j);
    mk(root, c4);
    g_autofree char *f4 = g_build_filename(root, c4, "COMPLETED", NULL);
    assert_int_equal(mkfifo(f4, 0644), 0);
    if (g_rand_boolean(r) && geteuid() == 0) {
        g_autofree char *c5 = g_strdup_printf("_jobs/%s/chk-5", j);
        mk(root, c5);
        g_autofree char *f5 = g_build_filename(root, c5, "COMPLETED", NULL);
        assert_int_equal(mknod(f5, S_IFCHR | 0600, makedev(1, 3)), 0);
    }
}

static void shape_malformed(const char *root, const char *ext, const char *t, GRand *r,
                            GString *cfg)
{
    (void)cfg;
    (void)ext;
    static const char *const bad[] = {
        "generation=1\nparticipants\n",
        "generation=01\nparticipants=0\n",
        "generation=1\ngeneration=1\n",
        "Generation=1\n",
        "checkpoint=9\nparticipants=0\n",
        "generation=1\nparticipants=0,,1\n",
        "generation=1\nstate=\n",
        "generation=1\r",
        "generation=1\n \nparticipants=0\n",
        "participants=0\nstate=../up\n",
        "generation=1\nparticipants=0\nstate=_state/x/../../..\n",
    };
    g_autofree char *j = g_strdup_printf("bad-%s", t);
    guint n = 1 + g_rand_int_range(r, 0, 3);
    for (guint i = 0; i < n; i++) {
        g_autofree char *cn = g_strdup_printf("%u", i + 1);
        marker(root, j, cn, bad[g_rand_int_range(r, 0, G_N_ELEMENTS(bad))]);
    }
    if (g_rand_boolean(r)) { /* a NUL byte, and a file over 64 KiB */
        g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-7/COMPLETED", j);
        put(root, rel, "generation=1\n\0participants=0\n", 29);
        GString *big = g_string_new(NULL);
        while (big->len <= 66000)
            g_string_append(big, "# a comment line of a marker that grew too large\n");
        g_autofree char *rel8 = g_strdup_printf("_jobs/%s/chk-8/COMPLETED", j);
        put(root, rel8, big->str, (gssize)big->len);
        g_string_free(big, TRUE);
    }
}

static void shape_foreign(const char *root, const char *ext, const char *t, GRand *r, GString *cfg)
{
    (void)cfg;
    (void)ext;
    g_autofree char *a = g_strdup_printf("own-%s", t), *b = g_strdup_printf("thief-%s", t);
    g_autofree char *sa = g_strdup_printf("_state/%s/v2/0/s", a);
    put(root, sa, "a", -1);
    g_autofree char *sa1 = g_strdup_printf("_state/%s/v2/1/s", a);
    put(root, sa1, "a", -1);
    g_autofree char *ma = g_strdup_printf("generation=2\nparticipants=0,1\nstate=_state/%s\n", a);
    marker(root, a, "3", ma);
    g_autofree char *mb = g_strdup_printf("generation=2\nparticipants=%s\nstate=./_state//%s/\n",
                                          g_rand_boolean(r) ? "1" : "0,1", a);
    marker(root, b, "1", mb);
}

static void shape_legacy(const char *root, const char *ext, const char *t, GRand *r, GString *cfg)
{
    (void)cfg;
    (void)ext;
    g_autofree char *a = g_strdup_printf("leg-%s", t), *b = g_strdup_printf("leg2-%s", t);
    put(root, "v1/0/checkpoint-1.snap", "shared", -1);
    put(root, "v1/1/checkpoint-1.snap", "shared", -1);
    marker(root, a, "1", "generation=1\nparticipants=0,1\n");
    marker(root, a, "2", "participants=0\n"); /* generation guessed */
    marker(root, b, "4", g_rand_boolean(r) ? "generation=1\nparticipants=1\n" : "participants=\n");
    /* the older layout: generation=9 but no v9, so <dir>/<S> */
    g_autofree char *o = g_strdup_printf("old-%s", t);
    put(root, "5/old.snap", "older", -1);
    marker(root, o, "1", "generation=9\nparticipants=5\n");
    marker(root, o, "2", "generation=9\nparticipants=6\n"); /* neither v9 nor 6 */
}

static void shape_cut_short(const char *root, const char *ext, const char *t, GRand *r,
                            GString *cfg)
{
    (void)cfg;
    (void)ext;
    g_autofree char *a = g_strdup_printf("cut-%s", t), *b = g_strdup_printf("cutnone-%s", t);
    g_autofree char *s = g_strdup_printf("_state/%s/v3/%u/x", a, g_rand_int_range(r, 0, 3));
    put(root, s, "cut", -1);
    marker(root, a, "1", "generation=3\n");
    marker(root, a, "2", "# no generation either\n");
    marker(root, b, "1", "checkpoint=1\ngeneration=1\n");
}

static void shape_huge(const char *root, const char *ext, const char *t, GRand *r, GString *cfg)
{
    (void)cfg;
    (void)ext;
    (void)r;
    g_autofree char *j = g_strdup_printf("huge-%s", t);
    g_autofree char *s = g_strdup_printf("_state/%s/v18446744073709551615/0/s", j);
    put(root, s, "max", -1);
    g_autofree char *m1 = g_strdup_printf("checkpoint=18446744073709551615\n"
                                          "generation=18446744073709551615\n"
                                          "participants=0\nstate=_state/%s\n",
                                          j);
    marker(root, j, "18446744073709551615", m1);
    g_autofree char *s2 = g_strdup_printf("_state/%s/v9223372036854775808/0/s", j);
    put(root, s2, "2^63", -1);
    g_autofree char *m2 =
        g_strdup_printf("generation=9223372036854775808\nparticipants=0,0\nstate=_state/%s\n", j);
    marker(root, j, "9223372036854775808", m2);
    g_autofree char *m3 =
        g_strdup_printf("generation=9223372036854775807\nparticipants=0\nstate=_state/%s\n", j);
    marker(root, j, "9223372036854775807", m3);
    marker(root, j, "0", "generation=0\nparticipants=\n");
}

static void shape_roots(const char *root, const char *ext, const char *t, GRand *r, GString *cfg)
{
    (void)cfg;
    g_autofree char *a = g_strdup_printf("remote-%s", t);
    marker(root, a, "1",
           "generation=1\nparticipants=0\nstate=s3://bucket/ckpt/_state/x?local=/w\n");
    marker(root, a, "2", "participants=0\nstate=memory://\n"); /* cannot guess */
    marker(root, a, "3", "generation=1\nparticipants=0\nstate=/etc\n");
    g_autofree char *e = g_strdup_printf("ext-%s", t);
    g_autofree char *eroot = g_build_filename(ext, t, "_state", e, NULL);
    put(eroot, "v1/0/e.snap", "external", -1);
    g_autofree char *me = g_strdup_printf("generation=1\nparticipants=0,1\nstate=%s%s\n",
                                          g_rand_boolean(r) ? "file://" : "", eroot);
    marker(root, e, "1", me);
    /* external roots reached through a symlink below the prefix: the root
     * itself, and its generation; never followed, by either side */
    g_autofree char *x = g_strdup_printf("exl-%s", t);
    g_autofree char *real = g_build_filename(ext, t, "real", NULL);
    put(real, "v1/0/r.snap", "through a link", -1);
    g_autofree char *lnk = g_strdup_printf("%s/lnk", t);
    sym(ext, lnk, real);
    g_autofree char *lroot = g_build_filename(ext, lnk, NULL);
    g_autofree char *ml = g_strdup_printf("generation=1\nparticipants=0\nstate=%s\n", lroot);
    marker(root, x, "1", ml);
    g_autofree char *gen = g_strdup_printf("%s/viagen/v1", t);
    g_autofree char *realgen = g_build_filename(real, "v1", NULL);
    sym(ext, gen, realgen);
    g_autofree char *groot = g_build_filename(ext, t, "viagen", NULL);
    g_autofree char *mg = g_strdup_printf("generation=1\nparticipants=0\nstate=%s\n", groot);
    marker(root, x, "2", mg);
}

static void shape_odd_names(const char *root, const char *ext, const char *t, GRand *r,
                            GString *cfg)
{
    (void)cfg;
    (void)ext;
    (void)r;
    g_autofree char *j = g_strdup_printf("odd.%s-_x", t);
    g_autofree char *s = g_strdup_printf("_state/%s/v1/0/s", j);
    put(root, s, "x", -1);
    g_autofree char *m = g_strdup_printf("generation=1\nparticipants=0\nstate=_state/%s\n"
                                         "zeta=unknown \\ value\n",
                                         j);
    marker(root, j, "1", m);
    g_autofree char *inprog = g_strdup_printf("_jobs/%s/chk-2", j);
    mk(root, inprog); /* in progress: no checkpoint */
    g_autofree char *noncanon = g_strdup_printf("_jobs/%s/chk-03/COMPLETED", j);
    put(root, noncanon, m, -1);
    g_autofree char *file = g_strdup_printf("_jobs/%s/chk-4", j);
    put(root, file, "a file, not a checkpoint", -1);
    g_autofree char *ln = g_strdup_printf("_jobs/%s/chk-5", j);
    g_autofree char *tg = g_build_filename(root, "_jobs", j, "chk-1", NULL);
    sym(root, ln, tg);
    put(root, "_jobs/.hidden/chk-1/COMPLETED", "generation=1\n", -1);
    sym(root, "_jobs/linked", "../_state");
}

static void shape_namespaced_edges(const char *root, const char *ext, const char *t, GRand *r,
                                   GString *cfg)
{
    (void)cfg;
    (void)ext;
    g_autofree char *j = g_strdup_printf("ns-%s", t);
    g_autofree char *s1 = g_strdup_printf("_state/%s/v1/0/s", j);
    g_autofree char *s3 = g_strdup_printf("_state/%s/v3/1/s", j);
    put(root, s1, "1", -1);
    put(root, s3, "3", -1);
    g_autofree char *m1 = g_strdup_printf("participants=0,1\nstate=_state/%s\n", j); /* v3 */
    marker(root, j, "1", m1);
    g_autofree char *m2 = g_strdup_printf("generation=2\nparticipants=0\nstate=_state/%s\n", j);
    marker(root, j, "2", m2); /* no v2 */
    g_autofree char *m3 =
        g_strdup_printf("generation=1\nparticipants=%s\nstate=_state/%s\n",
                        g_rand_boolean(r) ? "1,0,1" : "0,5", j); /* a read that is missing */
    marker(root, j, "3", m3);
    g_autofree char *l = g_strdup_printf("lnk-%s", t);
    g_autofree char *lr = g_strdup_printf("_state/%s", l);
    g_autofree char *target = g_strdup_printf("%s", j);
    sym(root, lr, target); /* a root that is a symlink */
    g_autofree char *ml = g_strdup_printf("generation=1\nparticipants=0\nstate=_state/%s\n", l);
    marker(root, l, "1", ml);
}

/* Legacy markers whose state lives in a legacy backend: one job's own
 * ([job:<J>] legacy_backend in the config both sides read), under the
 * external root, and the same written for a backend that is missing. */
static void shape_legacy_backend(const char *root, const char *ext, const char *t, GRand *r,
                                 GString *cfg)
{
    g_autofree char *j = g_strdup_printf("lbj-%s", t), *k = g_strdup_printf("lbk-%s", t);
    g_autofree char *lb = g_build_filename(ext, t, "lb", NULL);
    put(lb, "v2/0/s", "backend v2", -1);
    put(lb, "3/s", "backend older layout", -1);
    marker(root, j, "1", "generation=2\nparticipants=0\n");
    marker(root, j, "2", g_rand_boolean(r) ? "generation=4\nparticipants=3\n" : "participants=0\n");
    g_string_append_printf(cfg, "[job:%s]\nlegacy_backend=%s\n", j, lb);
    g_autofree char *gone = g_build_filename(ext, t, "gone", NULL);
    marker(root, k, "1", "generation=1\nparticipants=0\n");
    g_string_append_printf(cfg, "[job:%s]\nlegacy_backend=%s\n", k, gone);
}

static const Shape shapes[] = {
    shape_non_regular,      shape_malformed,      shape_foreign, shape_legacy,
    shape_cut_short,        shape_huge,           shape_roots,   shape_odd_names,
    shape_namespaced_edges, shape_legacy_backend,
};

static const char *ckptctl(void)
{
    const char *p = g_getenv("CKPTCTL_BIN");
    assert_non_null(p);
    return p;
}

/* Writes directory i: a small ckptctl fixture (two in three) and a shape
 * (every other time), or one or two shapes.  Small on purpose: every
 * checkpoint costs runs of ckptctl, and 200 directories must stay quick. */
static void generate(guint i, const char *root, const char *ext, GString *cfg)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(i * 2654435761u + 7);
    guint n;
    if (i % 3 != 2) {
        g_autofree char *jobs = g_strdup_printf("%d", g_rand_int_range(r, 0, 2));
        g_autofree char *cps = g_strdup_printf("%d", g_rand_int_range(r, 1, 3));
        g_autofree char *subs = g_strdup_printf("%d", g_rand_int_range(r, 1, 3));
        g_autofree char *legacy = g_strdup_printf("%d", g_rand_int_range(r, 0, 3));
        g_autofree char *seed = g_strdup_printf("%u", i);
        const char *argv[] = {
            ckptctl(),       "fixture", root,         "--force", "--jobs",   jobs,
            "--checkpoints", cps,       "--subtasks", subs,      "--legacy", legacy,
            "--bytes",       "8",       "--seed",     seed,      NULL};
        g_autofree char *out = NULL;
        int st = run_cmd(argv, &out);
        if (st != 0)
            fail_msg("dir %u: ckptctl fixture failed (%d)", i, st);
        n = i % 2;
    } else {
        n = 1 + (guint)g_rand_int_range(r, 0, 2);
    }
    for (guint k = 0; k < n; k++) {
        g_autofree char *t = g_strdup_printf("%u%c", i, 'a' + k);
        guint which = (i / 2 + k * 5 + (guint)g_rand_int_range(r, 0, 2)) % G_N_ELEMENTS(shapes);
        shapes[which](root, ext, t, r, cfg);
    }
}

/* ---- reading both sides ---- */

typedef struct {
    guint dir;
    const char *path; /* the backing dir */
    const char *job;
    char *n;
    const char *json;  /* resolve's document */
    const char *block; /* the restore block */
} Where;

static void disagree(const Where *w, const char *field, const char *resolve, const char *view)
{
    const char *job = w->job ? w->job : "(no job yet)";
    fail_msg("directory %u (%s), job %s, checkpoint %s: %s disagrees\n"
             "  ckptctl resolve: %s\n  view:            %s\n"
             "--- ckptctl resolve --json ---\n%s--- _views/%s/restore block ---\n%s---",
             w->dir, w->path, job, w->n ? w->n : "latest", field, resolve ? resolve : "(none)",
             view ? view : "(none)", w->json ? w->json : "", job, w->block ? w->block : "");
}

static void same(const Where *w, const char *field, const char *resolve, const char *view)
{
    if (g_strcmp0(resolve, view) != 0)
        disagree(w, field, resolve, view);
}

/* ckptctl's environment here: no leak check at exit (it is most of the
 * run's cost under ASan; the tools tests check ckptctl for leaks). */
static char *asan_options(void)
{
    const char *o = g_getenv("ASAN_OPTIONS");
    return o && *o ? g_strconcat(o, ":detect_leaks=0", NULL) : g_strdup("detect_leaks=0");
}

/* Runs ckptctl; *code its exit code; stdout returned. */
static char *ctl(const char *cwd, int *code, const char *const *args)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)ckptctl());
    for (guint i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    char *out = NULL;
    int st = 0;
    g_autoptr(GError) err = NULL;
    g_autofree char *ao = asan_options();
    g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "ASAN_OPTIONS", ao, TRUE);
    if (!g_spawn_sync(cwd, (char **)argv->pdata, env, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                      NULL, &st, &err))
        fail_msg("ckptctl: %s", err->message);
    if (!WIFEXITED(st))
        fail_msg("ckptctl %s %s: killed (status %d)", args[0], args[1], st);
    *code = WEXITSTATUS(st);
    return out;
}

/* The runs of ckptctl one directory needs, started a few at a time (each is
 * mostly process start-up): key -> Result. */
typedef struct {
    char *out;
    int code;
} Result;

static void result_free(gpointer p)
{
    Result *r = p;
    g_free(r->out);
    g_free(r);
}

typedef struct {
    char *key;
    char *cwd;
    GStrv args;
} Req;

static void req_free(gpointer p)
{
    Req *q = p;
    g_free(q->key);
    g_free(q->cwd);
    g_strfreev(q->args);
    g_free(q);
}

static void req_add(GPtrArray *reqs, char *key, const char *cwd, const char *const *args)
{
    Req *q = g_new0(Req, 1);
    q->key = key;
    q->cwd = g_strdup(cwd);
    GStrvBuilder *b = g_strv_builder_new();
    g_strv_builder_add(b, ckptctl());
    for (guint i = 0; args[i]; i++)
        g_strv_builder_add(b, args[i]);
    q->args = g_strv_builder_end(b);
    g_strv_builder_unref(b);
    g_ptr_array_add(reqs, q);
}

static GHashTable *run_all(GPtrArray *reqs)
{
    GHashTable *res = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, result_free);
    const guint batch = 6;
    for (guint i = 0; i < reqs->len; i += batch) {
        GSubprocess *ps[6] = {NULL};
        for (guint k = 0; k < batch && i + k < reqs->len; k++) {
            const Req *q = reqs->pdata[i + k];
            g_autoptr(GSubprocessLauncher) l = g_subprocess_launcher_new(
                G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
            if (q->cwd)
                g_subprocess_launcher_set_cwd(l, q->cwd);
            g_autofree char *ao = asan_options();
            g_subprocess_launcher_setenv(l, "ASAN_OPTIONS", ao, TRUE);
            g_autoptr(GError) err = NULL;
            ps[k] = g_subprocess_launcher_spawnv(l, (const char *const *)q->args, &err);
            if (!ps[k])
                fail_msg("ckptctl: %s", err->message);
        }
        for (guint k = 0; k < batch && i + k < reqs->len; k++) {
            const Req *q = reqs->pdata[i + k];
            Result *r = g_new0(Result, 1);
            g_autoptr(GError) err = NULL;
            if (!g_subprocess_communicate_utf8(ps[k], NULL, NULL, &r->out, NULL, &err))
                fail_msg("ckptctl %s: %s", q->args[1], err->message);
            if (!g_subprocess_get_if_exited(ps[k]))
                fail_msg("ckptctl %s %s: killed", q->args[1], q->key);
            r->code = g_subprocess_get_exit_status(ps[k]);
            g_object_unref(ps[k]);
            g_hash_table_insert(res, g_strdup(q->key), r);
        }
    }
    return res;
}

static const Result *result_of(GHashTable *res, const char *kind, const char *job, const char *n)
{
    g_autofree char *key = g_strdup_printf("%s\t%s\t%s", kind, job, n ? n : "");
    const Result *r = g_hash_table_lookup(res, key);
    assert_non_null(r);
    return r;
}

static JsonNode *parse(const char *text, const char *what)
{
    g_autoptr(GError) err = NULL;
    JsonNode *n = json_from_string(text, &err);
    if (!n)
        fail_msg("%s: not JSON (%s): %s", what, err ? err->message : "empty", text);
    /* checkpoint ids and generations are never negative */
    if (strstr(text, " : -"))
        fail_msg("%s: a negative number: %s", what, text);
    return n;
}

static const char *str_or_null(JsonObject *o, const char *k)
{
    JsonNode *n = json_object_get_member(o, k);
    return !n || JSON_NODE_HOLDS_NULL(n) ? NULL : json_node_get_string(n);
}

/* json-glib reads a number above G_MAXINT64 as its two's complement. */
static guint64 u64_of(JsonNode *n)
{
    return (guint64)json_node_get_int(n);
}

/* A path of resolve's output as the views show it: relative to the dir. */
static char *rel(const char *dir, const char *p)
{
    if (strcmp(p, dir) == 0)
        return g_strdup(".");
    size_t l = strlen(dir);
    if (strncmp(p, dir, l) == 0 && p[l] == '/')
        return g_strdup(p + l + 1);
    return g_strdup(p);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of a directory, joined by ' '; NULL if it cannot be read. */
static char *names_of(const char *dir, bool skip_dot)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return NULL;
    g_autoptr(GPtrArray) a = g_ptr_array_new_with_free_func(g_free);
    const char *n;
    while ((n = g_dir_read_name(d)))
        if (!skip_dot || n[0] != '.')
            g_ptr_array_add(a, g_strdup(n));
    g_dir_close(d);
    g_ptr_array_sort(a, cmp_str);
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < a->len; i++)
        g_string_append_printf(s, "%s%s", i ? " " : "", (char *)a->pdata[i]);
    return g_string_free(s, FALSE);
}

static char *xattr(const char *path, const char *name)
{
    char buf[PATH_MAX + 64];
    ssize_t l = lgetxattr(path, name, buf, sizeof buf - 1);
    if (l < 0)
        return NULL;
    buf[l] = '\0';
    return g_strdup(buf);
}

/* The restore file's blocks: "<N>" -> block text. */
static GHashTable *blocks_of(const char *text)
{
    GHashTable *t = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_auto(GStrv) blocks = g_strsplit(text, "\n\n", -1);
    for (char **b = blocks; *b && **b; b++) {
        if (!g_str_has_prefix(*b, "checkpoint: "))
            fail_msg("restore block without its checkpoint: %s", *b);
        const char *nl = strchr(*b, '\n');
        g_autofree char *n = g_strndup(*b + 12, nl ? (gsize)(nl - *b - 12) : strlen(*b + 12));
        const char *end = *b + strlen(*b);
        g_hash_table_insert(t, g_steal_pointer(&n),
                            g_strconcat(*b, end > *b && end[-1] == '\n' ? "" : "\n", NULL));
    }
    return t;
}

/* The value of "key: " in a block, NULL when the line is absent. */
static char *field_of(const char *block, const char *key)
{
    g_autofree char *needle = g_strconcat("\n", key, ": ", NULL);
    g_autofree char *b = g_strconcat("\n", block, NULL);
    const char *p = strstr(b, needle);
    if (!p)
        return NULL;
    p += strlen(needle);
    const char *e = strchr(p, '\n');
    return g_strndup(p, e ? (gsize)(e - p) : strlen(p));
}

static char *joined_array(JsonArray *a, const char *sep, const char *dir, bool numbers)
{
    if (!a || json_array_get_length(a) == 0)
        return g_strdup("-");
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *n = json_array_get_element(a, i);
        g_autofree char *v = numbers ? g_strdup_printf("%" G_GUINT64_FORMAT, u64_of(n))
                                     : rel(dir, json_node_get_string(n));
        g_string_append_printf(s, "%s%s", i ? sep : "", v);
    }
    return g_string_free(s, FALSE);
}

/* ---- one checkpoint ---- */

static bool is_uri(const char *s)
{
    return strstr(s, "://") != NULL;
}

static void compare_checkpoint(Mount *m, const char *ext, Where *w, GHashTable *res, bool human_too)
{
    const char *dir = m->backing;
    const Result *jres = result_of(res, "json", w->job, w->n);
    const char *json = jres->out;
    int code = jres->code;
    w->json = json;
    g_autoptr(JsonNode) root = parse(json, "resolve --json");
    JsonObject *o = json_node_get_object(root);
    g_autofree char *rpath = g_strdup_printf("_views/%s/restore", w->job);
    g_autofree char *rp = g_build_filename(m->mnt, rpath, NULL);
    g_autofree char *rtext = get_file(rp);
    g_autoptr(GHashTable) blocks = blocks_of(rtext);
    const char *block = g_hash_table_lookup(blocks, w->n);
    w->block = block;
    if (!block)
        disagree(w, "the checkpoint's restore block", "a marker", NULL);

    if (g_strcmp0(str_or_null(o, "status"), "ok") != 0) /* the view shows this checkpoint */
        disagree(w, "status", str_or_null(o, "status"), "ok (checkpoints/<N> is shown)");
    g_autofree char *cpn =
        g_strdup_printf("%" G_GUINT64_FORMAT, u64_of(json_object_get_member(o, "checkpoint")));
    same(w, "checkpoint", cpn, w->n);
    same(w, "job", str_or_null(o, "job"), w->job);

    g_autofree char *vclass = field_of(block, "class");
    same(w, "class", str_or_null(o, "class"), vclass);

    const char *jroot = str_or_null(o, "root");
    g_autofree char *jr = jroot ? rel(dir, jroot) : g_strdup("-");
    g_autofree char *vroot = field_of(block, "root");
    char *paren = vroot ? strrchr(vroot, '(') : NULL;
    if (paren && paren > vroot)
        paren[-1] = '\0';
    same(w, "root", jr, vroot);

    JsonNode *gn = json_object_get_member(o, "generation");
    const char *src = str_or_null(o, "generation_source");
    g_autofree char *jg = JSON_NODE_HOLDS_NULL(gn) ? g_strdup("-")
                                                   : g_strdup_printf("%" G_GUINT64_FORMAT " (%s)",
                                                                     u64_of(gn), src ? src : "?");
    g_autofree char *vgen = field_of(block, "generation");
    same(w, "generation", jg, vgen);

    g_autofree char *jp =
        joined_array(json_object_get_array_member(o, "participants"), ",", dir, true);
    g_autofree char *vp = field_of(block, "participants");
    same(w, "participants", jp, vp);

    g_autofree char *jm = rel(dir, str_or_null(o, "marker"));
    g_autofree char *vm = field_of(block, "marker");
    same(w, "marker", jm, vm);

    JsonArray *reads = json_object_get_array_member(o, "reads");
    g_autofree char *jreads = joined_array(reads, ", ", dir, false);
    g_autofree char *vreads = field_of(block, "reads");
    same(w, "reads", jreads, vreads);

    const char *err = str_or_null(o, "error");
    g_autofree char *jerr = err ? g_strescape(err, NULL) : g_strdup("-");
    g_autofree char *verr = field_of(block, "error");
    same(w, "error", jerr, verr);

    const char *restorable = code == 0 ? "yes" : code == 1 ? "no" : "exit 2";
    g_autofree char *vres = field_of(block, "restorable");
    same(w, "restorable (exit code)", restorable, vres);
    same(w, "error iff not restorable", err ? "no" : "yes", restorable);

    /* checkpoints/<N>: ERROR, or one entry per subtask read that exists */
    g_autofree char *cpath = g_strdup_printf("_views/%s/checkpoints/%s", w->job, w->n);
    g_autofree char *cdir = g_build_filename(m->mnt, cpath, NULL);
    g_autofree char *listing = names_of(cdir, false);
    g_autofree char *vgx = xattr(cdir, "user.ckptfs.generation");
    g_autofree char *jgx =
        JSON_NODE_HOLDS_NULL(gn) ? NULL : g_strdup_printf("%" G_GUINT64_FORMAT, u64_of(gn));
    same(w, "user.ckptfs.generation of checkpoints/<N>", jgx, vgx);
    if (err) {
        same(w, "checkpoints/<N> of a checkpoint that is not restorable", "ERROR", listing);
        g_autofree char *ep = g_build_filename(cdir, "ERROR", NULL);
        g_autofree char *etext = get_file(ep);
        g_autofree char *want = g_strconcat(err, "\n", NULL);
        same(w, "checkpoints/<N>/ERROR", want, etext);
    } else {
        g_autoptr(GPtrArray) want = g_ptr_array_new_with_free_func(g_free);
        for (guint k = 0; k < json_array_get_length(reads); k++) {
            const char *rd = json_array_get_string_element(reads, k);
            g_autofree char *rr = rel(dir, rd);
            g_autofree char *ext_slash = g_strconcat(ext, "/", NULL);
            if (is_uri(rr) || (rr[0] == '/' && !g_str_has_prefix(rr, ext_slash)))
                continue; /* remote: never followed */
            g_autofree char *abs = rr[0] == '/' ? g_strdup(rr) : g_build_filename(dir, rr, NULL);
            struct stat sb;
            if (lstat(abs, &sb) != 0)
                continue; /* a read of nothing shows nothing */
            g_autofree char *s = g_path_get_basename(rd);
            g_autofree char *vs = g_build_filename(cdir, s, NULL);
            g_autofree char *vb = xattr(vs, "user.ckptfs.backing");
            g_autofree char *what = g_strdup_printf("user.ckptfs.backing of checkpoints/<N>/%s", s);
            same(w, what, rr, vb);
            g_autofree char *sg = xattr(vs, "user.ckptfs.generation");
            g_autofree char *what2 =
                g_strdup_printf("user.ckptfs.generation of checkpoints/<N>/%s", s);
            same(w, what2, jgx, sg);
            g_ptr_array_add(want, g_steal_pointer(&s));
        }
        g_ptr_array_sort(want, cmp_str);
        GString *ws = g_string_new(NULL);
        for (guint k = 0; k < want->len; k++)
            g_string_append_printf(ws, "%s%s", k ? " " : "", (char *)want->pdata[k]);
        g_autofree char *wl = g_string_free(ws, FALSE);
        same(w, "checkpoints/<N> entries (subtasks read)", wl, listing);
    }

    /* resolve's human text speaks the restore block's words (one checkpoint
     * per job: each is another run of ckptctl) */
    if (!human_too) {
        w->json = w->block = NULL;
        return;
    }
    const char *human = result_of(res, "human", w->job, w->n)->out;
    g_autofree char *head = g_strdup_printf("status: ok\njob: %s\n", w->job);
    if (!g_str_has_prefix(human, head))
        disagree(w, "resolve's human text", human, block);
    GString *vb = g_string_new(NULL);
    g_auto(GStrv) lines = g_strsplit(block, "\n", -1);
    for (char **l = lines; *l; l++)
        if (**l && !g_str_has_prefix(*l, "shared_with: ") && !g_str_has_prefix(*l, "unknown: "))
            g_string_append_printf(vb, "%s\n", *l);
    g_autofree char *vbs = g_string_free(vb, FALSE);
    same(w, "resolve's human text (less status and job)", human + strlen(head), vbs);
    w->json = w->block = NULL;
}

static void compare_latest(Mount *m, Where *w, GHashTable *res)
{
    const Result *lr = result_of(res, "latest", w->job, NULL);
    const char *json = lr->out;
    int code = lr->code;
    w->json = json;
    g_autoptr(JsonNode) root = parse(json, "resolve --json");
    JsonObject *o = json_node_get_object(root);
    g_autofree char *want = NULL;
    if (code == 0 && g_strcmp0(str_or_null(o, "status"), "ok") == 0)
        want = g_strdup_printf("checkpoints/%" G_GUINT64_FORMAT,
                               u64_of(json_object_get_member(o, "checkpoint")));
    g_autofree char *lp = g_strdup_printf("_views/%s/latest", w->job);
    g_autofree char *l = g_build_filename(m->mnt, lp, NULL);
    g_autofree char *got = g_file_read_link(l, NULL);
    same(w, "latest", want, got);
    w->json = NULL;
}

/* ---- one directory ---- */

static void compare_dir(guint i, guint *n_checkpoints)
{
    Mount *m = mount_new();
    /* an empty backing dir (mount_new makes _state/t for other tests) */
    g_autofree char *t = g_build_filename(m->backing, "_state", "t", NULL);
    g_autofree char *st = g_build_filename(m->backing, "_state", NULL);
    assert_int_equal(rmdir(t), 0);
    assert_int_equal(rmdir(st), 0);
    g_autofree char *ext = g_build_filename(m->base, "ext", NULL);
    mk(ext, "");
    /* both sides read one config: the external root, per-job legacy
     * backends, and (one directory in seven) a legacy backend for all */
    g_autoptr(GString) cfg = g_string_new(NULL);
    g_string_append_printf(cfg, "[ckptfs]\nexternal_root=%s\n", ext);
    if (i % 7 == 3) {
        g_autofree char *all = g_build_filename(ext, "all-lb", NULL);
        put(all, "v1/0/s", "the legacy backend of every job", -1);
        g_string_append_printf(cfg, "legacy_backend=%s\n", all);
    }
    generate(i, m->backing, ext, cfg);
    g_autofree char *cfgp = g_build_filename(m->base, "ckptfs.conf", NULL);
    put(m->base, "ckptfs.conf", cfg->str, -1);
    g_autofree char *opt = g_strdup_printf("config=%s", cfgp);
    const char *margs[] = {"-o", opt, NULL};
    if (mount_start(m, margs) != 0)
        fail_msg("directory %u: the mount failed", i);

    const char *jargs[] = {"jobs", "--json", "--config", cfgp, m->backing, NULL};
    int code = 0;
    g_autofree char *jtext = ctl(NULL, &code, jargs);
    g_autoptr(JsonNode) jroot = parse(jtext, "jobs --json");
    JsonArray *jobs = json_object_get_array_member(json_node_get_object(jroot), "jobs");
    Where w = {i, m->backing, NULL, NULL, jtext, NULL};
    GString *names = g_string_new(NULL);
    for (guint k = 0; k < json_array_get_length(jobs); k++)
        g_string_append_printf(
            names, "%s%s", k ? " " : "",
            json_object_get_string_member(json_array_get_object_element(jobs, k), "job"));
    g_autofree char *jnames = g_string_free(names, FALSE);
    /* a lookup below _views/<J> waits for the catalog; listing _views does not */
    if (json_array_get_length(jobs) > 0) {
        const char *j0 =
            json_object_get_string_member(json_array_get_object_element(jobs, 0), "job");
        g_autofree char *r0 = g_strdup_printf("_views/%s/restore", j0);
        g_autofree char *p0 = g_build_filename(m->mnt, r0, NULL);
        struct stat sb;
        stat(p0, &sb);
    }
    g_autofree char *views = g_build_filename(m->mnt, "_views", NULL);
    g_autofree char *vnames = names_of(views, true);
    same(&w, "the jobs (ckptctl jobs --json / ls _views)", jnames, vnames);

    /* every run of ckptctl this directory needs, first */
    g_autoptr(GPtrArray) reqs = g_ptr_array_new_with_free_func(req_free);
    g_autoptr(GPtrArray) per_job =
        g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    for (guint k = 0; k < json_array_get_length(jobs); k++) {
        JsonObject *j = json_array_get_object_element(jobs, k);
        const char *job = json_object_get_string_member(j, "job");
        g_autofree char *loc = g_build_filename(m->backing, "_jobs", job, NULL);
        g_autofree char *jrel = g_strconcat("_jobs/", job, NULL);
        JsonArray *cps = json_object_get_array_member(j, "checkpoints");
        GPtrArray *ns = g_ptr_array_new_with_free_func(g_free);
        for (guint x = 0; x < json_array_get_length(cps); x++) {
            char *n = g_strdup_printf("%" G_GUINT64_FORMAT, u64_of(json_array_get_element(cps, x)));
            g_ptr_array_add(ns, n);
            const char *args[] = {"resolve", "--json", "--config", cfgp, loc, "-c", n, NULL};
            req_add(reqs, g_strdup_printf("json\t%s\t%s", job, n), NULL, args);
            if (x + 1 == json_array_get_length(cps)) {
                const char *h[] = {"resolve", "--config", cfgp, jrel, "-c", n, NULL};
                req_add(reqs, g_strdup_printf("human\t%s\t%s", job, n), m->backing, h);
            }
        }
        const char *largs[] = {"resolve", "--json", "--config", cfgp, loc, NULL};
        req_add(reqs, g_strdup_printf("latest\t%s\t", job), NULL, largs);
        g_ptr_array_add(per_job, ns);
    }
    g_autoptr(GHashTable) res = run_all(reqs);

    for (guint k = 0; k < json_array_get_length(jobs); k++) {
        JsonObject *j = json_array_get_object_element(jobs, k);
        w.job = json_object_get_string_member(j, "job");
        w.json = jtext;
        GPtrArray *ns = per_job->pdata[k];
        g_autoptr(GPtrArray) sorted = g_ptr_array_copy(ns, NULL, NULL);
        g_ptr_array_set_free_func(sorted, NULL); /* ns owns the strings */
        g_ptr_array_sort(sorted, cmp_str);
        GString *cs = g_string_new(NULL);
        for (guint x = 0; x < sorted->len; x++)
            g_string_append_printf(cs, "%s%s", x ? " " : "", (char *)sorted->pdata[x]);
        g_autofree char *jc = g_string_free(cs, FALSE);
        g_autofree char *cp = g_strdup_printf("_views/%s/checkpoints", w.job);
        g_autofree char *cdir = g_build_filename(m->mnt, cp, NULL);
        g_autofree char *vc = names_of(cdir, false);
        same(&w, "the checkpoints (ckptctl jobs --json / ls checkpoints)", jc, vc);
        for (guint x = 0; x < ns->len; x++) {
            w.n = ns->pdata[x];
            compare_checkpoint(m, ext, &w, res, x + 1 == ns->len);
            (*n_checkpoints)++;
        }
        w.n = NULL;
        compare_latest(m, &w, res);
    }
    if (mount_stop(m) != 0)
        fail_msg("directory %u: the daemon did not exit cleanly", i);
    mount_free(m);
}

static void test_agreement(void **state)
{
    (void)state;
    const char *nd = g_getenv("CKPTFS_AGREE_DIRS");
    const char *first = g_getenv("CKPTFS_AGREE_FIRST");
    guint n = nd ? (guint)atoi(nd) : 200, f = first ? (guint)atoi(first) : 0;
    guint cps = 0;
    gint64 t0 = g_get_monotonic_time();
    for (guint i = f; i < f + n; i++)
        compare_dir(i, &cps);
    printf("agreement: %u directories, %u checkpoints compared in %.1f s\n", n, cps,
           (double)(g_get_monotonic_time() - t0) / 1e6);
    assert_true(n == 0 || cps > n); /* the directories held checkpoints to compare */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agreement),
    };
    return cmocka_run_group_tests_name("mount/agree", tests, NULL, NULL);
}
