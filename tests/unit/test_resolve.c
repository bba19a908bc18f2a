/* core/resolve.c (what a restore reads, marker class by marker class) and
 * core/restore_source.c (the table in restore_source.h), row by row, on
 * small directories built in a temporary directory. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "intern.h"
#include "resolve.h"
#include "restore_source.h"
#include "testfs.h"

typedef struct {
    char *dir;
    int dfd;
    CkResolveOptions opts;
} Fx;

static int setup(void **state)
{
    Fx *fx = g_new0(Fx, 1);
    fx->dir = testfs_tmpdir("ck-resolve-XXXXXX");
    fx->dfd = open(fx->dir, O_RDONLY | O_DIRECTORY);
    assert_true(fx->dfd >= 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    Fx *fx = *state;
    close(fx->dfd);
    testfs_remove(fx->dir);
    g_free(fx->dir);
    if (fx->opts.external_roots)
        g_ptr_array_unref(fx->opts.external_roots);
    if (fx->opts.legacy_backends)
        g_hash_table_unref(fx->opts.legacy_backends);
    g_free(fx->opts.legacy_backend);
    g_free(fx);
    return 0;
}

/* The restore of `text` as job's checkpoint n. */
static CkRestore *restore_of(Fx *fx, const char *job, uint64_t n, const char *text)
{
    g_autoptr(CkMarker) m = ck_marker_parse(text, strlen(text), n);
    return ck_restore_of_marker(fx->dfd, job, n, m, &fx->opts);
}

static void assert_reads(const CkRestore *r, const char *const *want)
{
    guint n = 0;
    while (want[n])
        n++;
    if (r->reads->len != n) {
        for (guint i = 0; i < r->reads->len; i++)
            print_message("read[%u] = %s\n", i, (char *)r->reads->pdata[i]);
    }
    assert_int_equal(r->reads->len, n);
    for (guint i = 0; i < n; i++)
        assert_string_equal(r->reads->pdata[i], want[i]);
    assert_int_equal(r->subtasks->len, n);
}

/* ---- namespaced markers ---- */

static void namespaced_relative_root(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j1/v1/0");
    testfs_mkdir(fx->dir, "_state/j1/v1/1");
    g_autoptr(CkRestore) r =
        restore_of(fx, "j1", 1, "checkpoint=1\ngeneration=1\nparticipants=0,1\nstate=_state/j1\n");
    assert_int_equal(r->cls, CK_MARKER_NAMESPACED);
    assert_true(r->restorable);
    assert_null(r->error);
    assert_int_equal(r->root_kind, CK_ROOT_LOCAL);
    assert_string_equal(r->root, "_state/j1");
    assert_true(r->has_generation);
    assert_int_equal(r->generation, 1);
    assert_false(r->generation_guessed);
    assert_false(r->legacy_location);
    assert_null(r->foreign_job);
    assert_string_equal(r->marker, "_jobs/j1/chk-1/COMPLETED");
    assert_ptr_equal(r->job, ck_intern("j1"));
    const char *want[] = {"_state/j1/v1/0", "_state/j1/v1/1", NULL};
    assert_reads(r, want);
}

static void namespaced_root_normalised(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j1/v2/0");
    g_autoptr(CkRestore) r =
        restore_of(fx, "j1", 4, "generation=2\nparticipants=0\nstate=./_state//x/../j1/\n");
    assert_true(r->restorable);
    assert_string_equal(r->root, "_state/j1");
    const char *want[] = {"_state/j1/v2/0", NULL};
    assert_reads(r, want);
}

static void namespaced_escaping_root_is_malformed(void **state)
{
    Fx *fx = *state;
    const char *bad[] = {"state=../other", "state=_state/j1/../../..", "state=a/../../b", NULL};
    for (int i = 0; bad[i]; i++) {
        g_autofree char *text = g_strdup_printf("generation=1\nparticipants=0\n%s\n", bad[i]);
        g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, text);
        assert_int_equal(r->cls, CK_MARKER_MALFORMED);
        assert_false(r->restorable);
        assert_int_equal(r->root_kind, CK_ROOT_NONE);
        assert_non_null(r->error);
        assert_non_null(strstr(r->error, "escapes"));
        /* reported as a parse error is: its line, no field shown */
        assert_non_null(strstr(r->error, "malformed marker: line 3: state="));
        assert_null(r->root);
        assert_false(r->has_generation);
        assert_false(r->generation_guessed);
        assert_int_equal(r->participants->len, 0);
        assert_int_equal(r->reads->len, 0);
    }
}

/* generation_source is "guessed" for every marker without generation=,
 * also when there was nothing to guess from (the older layout <S>, a
 * remote root), and never for a malformed one. */
static void no_generation_is_flagged_guessed(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "0");
    g_autoptr(CkRestore) older = restore_of(fx, "j1", 1, "participants=0\n");
    assert_true(older->restorable);
    assert_true(older->older_layout);
    assert_false(older->has_generation);
    assert_true(older->generation_guessed);
    g_autoptr(CkRestore) remote = restore_of(fx, "j1", 2, "participants=0\nstate=s3://bk/x\n");
    assert_false(remote->restorable);
    assert_true(remote->generation_guessed);
    g_autoptr(CkRestore) given = restore_of(fx, "j1", 3, "generation=4\nparticipants=0\n");
    assert_false(given->generation_guessed);
    g_autoptr(CkRestore) bad = restore_of(fx, "j1", 4, "participants=x\n");
    assert_false(bad->generation_guessed);
}

static void namespaced_foreign_root(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j2/v1/0");
    g_autoptr(CkRestore) r =
        restore_of(fx, "j1", 1, "generation=1\nparticipants=0\nstate=_state/j2\n");
    assert_true(r->restorable);
    assert_ptr_equal(r->foreign_job, ck_intern("j2"));
    const char *want[] = {"_state/j2/v1/0", NULL};
    assert_reads(r, want);
    /* its own root is not foreign */
    g_autoptr(CkRestore) own =
        restore_of(fx, "j2", 1, "generation=1\nparticipants=0\nstate=_state/j2\n");
    assert_null(own->foreign_job);
}

static void namespaced_missing_root_not_restorable(void **state)
{
    Fx *fx = *state;
    g_autoptr(CkRestore) r =
        restore_of(fx, "j1", 1, "generation=1\nparticipants=0\nstate=_state/j1\n");
    assert_false(r->restorable);
    assert_non_null(strstr(r->error, "does not exist"));
    /* the root exists but not the generation */
    testfs_mkdir(fx->dir, "_state/j1/v1");
    g_autoptr(CkRestore) r2 =
        restore_of(fx, "j1", 1, "generation=2\nparticipants=0\nstate=_state/j1\n");
    assert_false(r2->restorable);
    assert_non_null(strstr(r2->error, "_state/j1/v2"));
}

static void namespaced_generation_guessed(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j1/v1/0");
    testfs_mkdir(fx->dir, "_state/j1/v7/0");
    testfs_mkdir(fx->dir, "_state/j1/v08/0"); /* not canonical: not a generation */
    testfs_put(fx->dir, "_state/j1/v9", "a file, not a generation");
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 3, "participants=0\nstate=_state/j1\n");
    assert_true(r->restorable);
    assert_true(r->has_generation);
    assert_true(r->generation_guessed);
    assert_int_equal(r->generation, 7);
    const char *want[] = {"_state/j1/v7/0", NULL};
    assert_reads(r, want);
}

static void namespaced_no_generation_found(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j1/tmp");
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 3, "participants=0\nstate=_state/j1\n");
    assert_false(r->restorable);
    assert_false(r->has_generation);
    assert_non_null(strstr(r->error, "cannot guess"));
}

/* state=. is the checkpoint directory itself, and the error says so. */
static void namespaced_dot_root_named_in_error(void **state)
{
    Fx *fx = *state;
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 3, "participants=0\nstate=.\n");
    assert_false(r->restorable);
    assert_string_equal(r->error, "no generation= and no v<G> under the checkpoint directory: "
                                  "cannot guess the generation");
}

static void namespaced_symlinked_root_not_followed(void **state)
{
    Fx *fx = *state;
    g_autofree char *outside = testfs_tmpdir("ck-outside-XXXXXX");
    testfs_mkdir(outside, "v1/0");
    testfs_mkdir(fx->dir, "_state");
    g_autofree char *link = g_build_filename(fx->dir, "_state", "j1", NULL);
    assert_int_equal(symlink(outside, link), 0);
    g_autoptr(CkRestore) r =
        restore_of(fx, "j1", 1, "generation=1\nparticipants=0\nstate=_state/j1\n");
    assert_false(r->restorable);
    assert_non_null(strstr(r->error, "symlink"));
    assert_int_equal(r->reads->len, 0);
    assert_true(r->has_generation); /* the marker's, shown even though it fails */
    assert_int_equal(r->generation, 1);
    /* a symlink in the middle of the path too */
    g_autofree char *link2 = g_build_filename(fx->dir, "alias", NULL);
    assert_int_equal(symlink("_state", link2), 0);
    g_autoptr(CkRestore) r2 =
        restore_of(fx, "j1", 1, "generation=1\nparticipants=0\nstate=alias/j1\n");
    assert_false(r2->restorable);
    assert_non_null(strstr(r2->error, "symlink"));
    assert_true(testfs_remove(outside));
}

static void namespaced_absolute_external_or_remote(void **state)
{
    Fx *fx = *state;
    g_autofree char *ext = g_build_filename(fx->dir, "ext", NULL);
    g_autofree char *extxy = g_build_filename(fx->dir, "extxy", NULL);
    testfs_mkdir(fx->dir, "ext/v1/0");
    testfs_mkdir(fx->dir, "extxy/v1/0");
    fx->opts.external_roots = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(fx->opts.external_roots, g_strdup(ext));

    g_autofree char *t1 = g_strdup_printf("generation=1\nparticipants=0\nstate=%s\n", ext);
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, t1);
    assert_true(r->restorable);
    assert_int_equal(r->root_kind, CK_ROOT_EXTERNAL);
    assert_string_equal(r->root, ext);
    g_autofree char *want0 = g_build_filename(ext, "v1", "0", NULL);
    const char *want[] = {want0, NULL};
    assert_reads(r, want);

    /* file:///abs is the same root */
    g_autofree char *t2 = g_strdup_printf("generation=1\nparticipants=0\nstate=file://%s\n", ext);
    g_autoptr(CkRestore) r2 = restore_of(fx, "j1", 1, t2);
    assert_int_equal(r2->root_kind, CK_ROOT_EXTERNAL);
    assert_string_equal(r2->root, ext);

    /* component-wise prefix: <dir>/extxy is not under <dir>/ext */
    g_autofree char *t3 = g_strdup_printf("generation=1\nparticipants=0\nstate=%s\n", extxy);
    g_autoptr(CkRestore) r3 = restore_of(fx, "j1", 1, t3);
    assert_int_equal(r3->root_kind, CK_ROOT_REMOTE);
    assert_true(r3->restorable); /* a restore reads it; the views do not follow it */

    /* nothing allowed: remote, not followed, and no guessing of its generation */
    g_ptr_array_set_size(fx->opts.external_roots, 0);
    g_autoptr(CkRestore) r4 = restore_of(fx, "j1", 1, t1);
    assert_int_equal(r4->root_kind, CK_ROOT_REMOTE);
    g_autofree char *t5 = g_strdup_printf("participants=0\nstate=%s\n", ext);
    g_autoptr(CkRestore) r5 = restore_of(fx, "j1", 1, t5);
    assert_false(r5->restorable);
    assert_non_null(strstr(r5->error, "remote"));
}

static void namespaced_remote_uri(void **state)
{
    Fx *fx = *state;
    g_autoptr(CkRestore) r = restore_of(
        fx, "j1", 1, "generation=3\nparticipants=0,2\nstate=s3://b/ckpt/_state/j1?local=/tmp/w\n");
    assert_true(r->restorable);
    assert_int_equal(r->root_kind, CK_ROOT_REMOTE);
    assert_string_equal(r->root, "s3://b/ckpt/_state/j1?local=/tmp/w");
    const char *want[] = {"s3://b/ckpt/_state/j1/v3/0?local=/tmp/w",
                          "s3://b/ckpt/_state/j1/v3/2?local=/tmp/w", NULL};
    assert_reads(r, want);
    g_autoptr(CkRestore) r2 = restore_of(fx, "j1", 1, "participants=0\nstate=memory://\n");
    assert_int_equal(r2->root_kind, CK_ROOT_REMOTE);
    assert_false(r2->restorable);
}

static void open_beneath_stays_inside(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "a/b");
    g_autofree char *ln = g_build_filename(fx->dir, "a", "up", NULL);
    assert_int_equal(symlink("..", ln), 0);
    int fd = ck_open_beneath(fx->dfd, "a/b", O_RDONLY | O_DIRECTORY, NULL);
    assert_true(fd >= 0);
    close(fd);
    char *bad = NULL;
    assert_int_equal(ck_open_beneath(fx->dfd, "a/up/a", O_RDONLY | O_DIRECTORY, &bad), -ELOOP);
    assert_string_equal(bad, "a/up");
    g_free(bad);
    assert_int_equal(ck_open_beneath(fx->dfd, "../x", O_RDONLY | O_DIRECTORY, NULL), -EXDEV);
    assert_int_equal(ck_open_beneath(fx->dfd, "a/missing", O_RDONLY | O_DIRECTORY, NULL), -ENOENT);
    fd = ck_open_beneath(fx->dfd, "", O_RDONLY | O_DIRECTORY, NULL);
    assert_true(fd >= 0);
    close(fd);
}

/* An external path opens beneath its prefix, however the prefix is
 * spelt, and never through a symlink below it. */
static void open_external_beneath_prefix(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "ext/j/v1");
    g_autofree char *ext = g_build_filename(fx->dir, "ext", NULL);
    g_autofree char *ln = g_build_filename(ext, "lnk", NULL);
    assert_int_equal(symlink("j", ln), 0);
    g_autofree char *slash = g_strconcat(ext, "/", NULL);
    g_autofree char *dot = g_build_filename(fx->dir, ".", "ext", NULL);
    const char *spellings[] = {ext, slash, dot};
    for (size_t i = 0; i < G_N_ELEMENTS(spellings); i++) {
        g_autoptr(GPtrArray) roots = g_ptr_array_new();
        g_ptr_array_add(roots, (gpointer)spellings[i]);
        g_autofree char *v1 = g_build_filename(ext, "j", "v1", NULL);
        int fd = ck_open_external(roots, v1, O_RDONLY | O_DIRECTORY, NULL);
        assert_true(fd >= 0);
        struct stat a, b;
        assert_int_equal(fstat(fd, &a), 0);
        assert_int_equal(stat(v1, &b), 0);
        assert_int_equal(a.st_ino, b.st_ino);
        close(fd);
        fd = ck_open_external(roots, ext, O_RDONLY | O_DIRECTORY, NULL); /* the prefix itself */
        assert_true(fd >= 0);
        close(fd);
        g_autofree char *via = g_build_filename(ln, "v1", NULL);
        char *bad = NULL;
        assert_int_equal(ck_open_external(roots, via, O_RDONLY | O_DIRECTORY, &bad), -ELOOP);
        assert_string_equal(bad, ln);
        g_free(bad);
        assert_int_equal(ck_open_external(roots, fx->dir, O_RDONLY | O_DIRECTORY, NULL), -EACCES);
    }
}

static void path_is_under_componentwise(void **s)
{
    (void)s;
    assert_true(ck_path_is_under("/data/x", "/data"));
    assert_true(ck_path_is_under("/data/x", "/data/x"));
    assert_true(ck_path_is_under("/data/x/y", "/data/x/"));
    assert_false(ck_path_is_under("/data/xy", "/data/x"));
    assert_false(ck_path_is_under("/data", "/data/x"));
    assert_true(ck_path_is_under("/data/x/../x/y", "/data/x"));
    assert_false(ck_path_is_under("/data/x/../y", "/data/x"));
    assert_true(ck_path_is_under("/anything", "/"));
    g_autofree char *n = ck_path_normalize_rel("a/./b//../c/");
    assert_string_equal(n, "a/c");
    assert_null(ck_path_normalize_rel("a/../.."));
    assert_null(ck_path_normalize_rel("/abs"));
    g_autofree char *a = ck_path_normalize_abs("/../x/./y/..");
    assert_string_equal(a, "/x");
}

/* ---- legacy markers ---- */

static void legacy_in_checkpoint_dir(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0");
    testfs_mkdir(fx->dir, "v1/1");
    g_autoptr(CkRestore) r =
        restore_of(fx, "j1", 1, "checkpoint=1\ngeneration=1\nparticipants=0,1\n");
    assert_int_equal(r->cls, CK_MARKER_LEGACY);
    assert_true(r->restorable);
    assert_true(r->legacy_location);
    assert_false(r->older_layout);
    assert_int_equal(r->root_kind, CK_ROOT_LOCAL);
    assert_string_equal(r->root, "");
    const char *want[] = {"v1/0", "v1/1", NULL};
    assert_reads(r, want);
}

static void legacy_generation_guessed(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0");
    testfs_mkdir(fx->dir, "v3/0");
    testfs_mkdir(fx->dir, "v03/0");
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, "participants=0\n");
    assert_true(r->restorable);
    assert_true(r->generation_guessed);
    assert_int_equal(r->generation, 3);
    const char *want[] = {"v3/0", NULL};
    assert_reads(r, want);
}

static void legacy_older_layout(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "0");
    testfs_mkdir(fx->dir, "1");
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, "generation=1\nparticipants=0,1\n");
    assert_true(r->restorable);
    assert_true(r->older_layout);
    assert_true(r->legacy_location);
    const char *want[] = {"0", "1", NULL};
    assert_reads(r, want);
    /* without generation= and no v<G> at all: the older layout, no generation */
    g_autoptr(CkRestore) r2 = restore_of(fx, "j1", 1, "participants=1\n");
    assert_true(r2->restorable);
    assert_true(r2->older_layout);
    assert_false(r2->has_generation);
    const char *want2[] = {"1", NULL};
    assert_reads(r2, want2);
}

static void legacy_nothing_there(void **state)
{
    Fx *fx = *state;
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, "generation=1\nparticipants=0\n");
    assert_false(r->restorable);
    assert_non_null(strstr(r->error, "v1"));
    g_autoptr(CkRestore) r2 = restore_of(fx, "j1", 1, "participants=0\n");
    assert_false(r2->restorable);
    assert_non_null(strstr(r2->error, "cannot guess"));
}

static void legacy_symlinked_generation_not_followed(void **state)
{
    Fx *fx = *state;
    g_autofree char *outside = testfs_tmpdir("ck-outside-XXXXXX");
    g_autofree char *link = g_build_filename(fx->dir, "v1", NULL);
    assert_int_equal(symlink(outside, link), 0);
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, "generation=1\nparticipants=0\n");
    assert_false(r->restorable);
    assert_non_null(strstr(r->error, "symlink"));
    assert_true(testfs_remove(outside));
}

static void legacy_backend_configured(void **state)
{
    Fx *fx = *state;
    g_autofree char *be = g_build_filename(fx->dir, "backend", NULL);
    g_autofree char *be2 = g_build_filename(fx->dir, "backend-j2", NULL);
    testfs_mkdir(fx->dir, "backend/v2/0");
    testfs_mkdir(fx->dir, "backend-j2/v5/0");
    testfs_mkdir(fx->dir,
                 "v2/0"); /* the checkpoint dir's own legacy area: not read when a backend is set */
    fx->opts.legacy_backend = g_strdup(be);
    fx->opts.external_roots = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(fx->opts.external_roots, g_strdup(fx->dir));
    fx->opts.legacy_backends = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
    g_hash_table_insert(fx->opts.legacy_backends, (gpointer)ck_intern("j2"), g_strdup(be2));

    g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, "participants=0\n");
    assert_true(r->restorable);
    assert_int_equal(r->root_kind, CK_ROOT_EXTERNAL);
    assert_true(r->legacy_location);
    assert_true(r->generation_guessed);
    g_autofree char *w1 = g_build_filename(be, "v2", "0", NULL);
    const char *want[] = {w1, NULL};
    assert_reads(r, want);

    /* per job (config=FILE) wins over the default */
    g_autoptr(CkRestore) r2 = restore_of(fx, "j2", 1, "participants=0\n");
    g_autofree char *w2 = g_build_filename(be2, "v5", "0", NULL);
    const char *want2[] = {w2, NULL};
    assert_reads(r2, want2);

    /* not under an external root: remote, not followed */
    g_ptr_array_set_size(fx->opts.external_roots, 0);
    g_autoptr(CkRestore) r3 = restore_of(fx, "j1", 1, "generation=2\nparticipants=0\n");
    assert_int_equal(r3->root_kind, CK_ROOT_REMOTE);
    const char *want3[] = {w1, NULL};
    assert_reads(r3, want3);

    /* an object-store backend */
    g_free(fx->opts.legacy_backend);
    fx->opts.legacy_backend = g_strdup("s3://bucket/base");
    g_autoptr(CkRestore) r4 = restore_of(fx, "j1", 1, "generation=2\nparticipants=0\n");
    assert_int_equal(r4->root_kind, CK_ROOT_REMOTE);
    const char *want4[] = {"s3://bucket/base/v2/0", NULL};
    assert_reads(r4, want4);
}

/* ---- cut-short and malformed markers ---- */

static void cut_short_with_own_root(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j1/v2/0");
    testfs_mkdir(fx->dir, "_state/j1/v2/3");
    testfs_mkdir(fx->dir, "_state/j1/v2/notasubtask");
    testfs_mkdir(fx->dir, "_state/j1/v1/0");
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 5, "checkpoint=5\ngeneration=2\n");
    assert_int_equal(r->cls, CK_MARKER_CUT_SHORT);
    assert_true(r->restorable);
    assert_int_equal(r->root_kind, CK_ROOT_LOCAL);
    assert_string_equal(r->root, "_state/j1");
    const char *want[] = {"_state/j1/v2/0", "_state/j1/v2/3", NULL};
    assert_reads(r, want);
    assert_int_equal(g_array_index(r->subtasks, guint32, 1), 3);
    assert_int_equal(r->participants->len, 0);
    /* no generation=: the highest one, guessed */
    g_autoptr(CkRestore) r2 = restore_of(fx, "j1", 5, "checkpoint=5\n");
    assert_true(r2->restorable);
    assert_true(r2->generation_guessed);
    assert_int_equal(r2->generation, 2);
}

static void cut_short_without_own_root(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0"); /* the legacy area is never a cut-short marker's fallback */
    g_autoptr(CkRestore) r = restore_of(fx, "j1", 5, "generation=1\n");
    assert_int_equal(r->cls, CK_MARKER_CUT_SHORT);
    assert_false(r->restorable);
    assert_int_equal(r->root_kind, CK_ROOT_NONE);
    assert_non_null(r->error);
    assert_int_equal(r->reads->len, 0);
}

static void malformed_reads_nothing(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j1/v1/0");
    const char *bad[] = {"participants=0\nparticipants=1\nstate=_state/j1\n",
                         "generation=01\nparticipants=0\nstate=_state/j1\n", "no equals sign\n",
                         "checkpoint=2\nparticipants=0\n", NULL};
    for (int i = 0; bad[i]; i++) {
        g_autoptr(CkRestore) r = restore_of(fx, "j1", 1, bad[i]);
        assert_int_equal(r->cls, CK_MARKER_MALFORMED);
        assert_false(r->restorable);
        assert_int_equal(r->root_kind, CK_ROOT_NONE);
        assert_non_null(r->error);
        assert_int_equal(r->reads->len, 0);
    }
    const char nul[] = "participants=0\0\nstate=_state/j1\n";
    g_autoptr(CkMarker) m = ck_marker_parse(nul, sizeof nul - 1, 1);
    g_autoptr(CkRestore) r = ck_restore_of_marker(fx->dfd, "j1", 1, m, &fx->opts);
    assert_int_equal(r->cls, CK_MARKER_MALFORMED);
    assert_false(r->restorable);
}

static void restore_copy_is_deep(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/j1/v1/0");
    g_autoptr(CkRestore) r =
        restore_of(fx, "j1", 1, "generation=1\nparticipants=0\nstate=_state/j1\n");
    g_autoptr(CkRestore) c = ck_restore_copy(r);
    assert_ptr_not_equal(c->reads, r->reads);
    assert_string_equal(c->reads->pdata[0], r->reads->pdata[0]);
    assert_int_equal(c->subtasks->len, 1);
    assert_string_equal(c->root, r->root);
}

/* ---- the restore source of a location (restore_source.h) ---- */

static CkResolution *resolve_at(Fx *fx, const char *sub, bool latest, uint64_t n, int *rc)
{
    g_autofree char *loc = sub ? g_build_filename(fx->dir, sub, NULL) : g_strdup(fx->dir);
    CkResolution *res = NULL;
    *rc = ck_resolve(loc, latest, n, &fx->opts, &res);
    return res;
}

/* The record's own failure: a script with two INSERT jobs and one directory. */
static void two_jobs_one_directory_refused(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0");
    testfs_marker(fx->dir, "insert-1", 1, "checkpoint=1\ngeneration=1\nparticipants=0\n");
    testfs_marker(fx->dir, "insert-2", 1, "checkpoint=1\ngeneration=1\nparticipants=0\n");
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, NULL, false, 1, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(res->status, CK_RESOLVE_REFUSED);
    assert_string_equal(ck_resolve_status_name(res->status), "refused");
    assert_null(res->restore);
    assert_int_equal(res->candidates->len, 2);
    g_autofree char *c1 = g_build_filename(fx->dir, "_jobs", "insert-1", NULL);
    g_autofree char *c2 = g_build_filename(fx->dir, "_jobs", "insert-2", NULL);
    assert_string_equal(res->candidates->pdata[0], c1);
    assert_string_equal(res->candidates->pdata[1], c2);
    assert_non_null(strstr(res->error, c1));
    assert_non_null(strstr(res->error, c2));
    /* latest is ambiguous the same way */
    g_autoptr(CkResolution) lat = resolve_at(fx, NULL, true, 0, &rc);
    assert_int_equal(lat->status, CK_RESOLVE_REFUSED);
    assert_int_equal(lat->candidates->len, 2);
    /* naming one job's marker directory resolves it */
    g_autoptr(CkResolution) one = resolve_at(fx, "_jobs/insert-2", false, 1, &rc);
    assert_int_equal(one->status, CK_RESOLVE_OK);
    assert_ptr_equal(one->restore->job, ck_intern("insert-2"));
    assert_string_equal(one->dir, fx->dir);
}

static void one_job_completed_n(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/b/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", 2, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=0\nstate=_state/b\n");
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, NULL, false, 2, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(res->status, CK_RESOLVE_OK);
    assert_ptr_equal(res->restore->job, ck_intern("a"));
    assert_int_equal(res->restore->checkpoint, 2);
    assert_string_equal(res->dir, fx->dir);
    /* nobody completed 9: as given */
    g_autoptr(CkResolution) none = resolve_at(fx, NULL, false, 9, &rc);
    assert_int_equal(none->status, CK_RESOLVE_AS_GIVEN);
    assert_null(none->restore);
}

static void marker_directory_latest(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", 2, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", 3, "participants=0\nparticipants=0\n"); /* malformed */
    testfs_mkdir(fx->dir, "_jobs/a/chk-4");                             /* in progress */
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, "_jobs/a", true, 0, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(res->status, CK_RESOLVE_OK);
    assert_int_equal(res->restore->checkpoint, 2);
    assert_true(res->restore->restorable);
    /* a trailing slash names the same directory */
    g_autofree char *loc = g_strconcat(fx->dir, "/_jobs/a/", NULL);
    g_autoptr(CkResolution) r2 = NULL;
    assert_int_equal(ck_resolve(loc, false, 3, &fx->opts, &r2), 0);
    assert_int_equal(r2->status, CK_RESOLVE_OK);
    assert_int_equal(r2->restore->cls, CK_MARKER_MALFORMED);
    assert_false(r2->restore->restorable);
    /* latest in the checkpoint directory with one job: that job's latest */
    g_autoptr(CkResolution) r3 = resolve_at(fx, NULL, true, 0, &rc);
    assert_int_equal(r3->status, CK_RESOLVE_OK);
    assert_int_equal(r3->restore->checkpoint, 2);
    /* no marker for N in the marker directory: as given */
    g_autoptr(CkResolution) r4 = resolve_at(fx, "_jobs/a", false, 4, &rc);
    assert_int_equal(r4->status, CK_RESOLVE_AS_GIVEN);
}

/* A COMPLETED that is not a regular file is never followed or opened; its
 * checkpoint exists and is malformed "not a regular file", in resolve as in
 * the catalog (resolve used to answer as-given). */
static void non_regular_marker_is_malformed(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_put(fx->dir, "target", "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_mkdir(fx->dir, "_jobs/a/chk-1");
    g_autofree char *ln = g_build_filename(fx->dir, "_jobs/a/chk-1/COMPLETED", NULL);
    g_autofree char *tg = g_build_filename(fx->dir, "target", NULL);
    assert_int_equal(symlink(tg, ln), 0);
    testfs_mkdir(fx->dir, "_jobs/a/chk-2/COMPLETED");
    testfs_mkdir(fx->dir, "_jobs/a/chk-3");
    g_autofree char *fifo = g_build_filename(fx->dir, "_jobs/a/chk-3/COMPLETED", NULL);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    const char *why[] = {NULL, "not a regular file (a symlink, not followed)",
                         "not a regular file (a directory)", "not a regular file (a FIFO)"};
    for (uint64_t n = 1; n <= 3; n++) {
        int rc;
        g_autoptr(CkResolution) res = resolve_at(fx, "_jobs/a", false, n, &rc);
        assert_int_equal(rc, 0);
        assert_int_equal(res->status, CK_RESOLVE_OK);
        assert_int_equal(res->restore->cls, CK_MARKER_MALFORMED);
        assert_false(res->restore->restorable);
        assert_int_equal(res->restore->reads->len, 0);
        g_autofree char *want = g_strconcat("malformed marker: ", why[n], NULL);
        assert_string_equal(res->restore->error, want);
        /* the checkpoint directory: one job has a marker for n */
        g_autoptr(CkResolution) top = resolve_at(fx, NULL, false, n, &rc);
        assert_int_equal(top->status, CK_RESOLVE_OK);
        assert_int_equal(top->restore->cls, CK_MARKER_MALFORMED);
    }
    /* latest: nothing restorable, the newest says why */
    int rc;
    g_autoptr(CkResolution) lat = resolve_at(fx, "_jobs/a", true, 0, &rc);
    assert_int_equal(lat->status, CK_RESOLVE_OK);
    assert_int_equal(lat->restore->checkpoint, 3);
    assert_false(lat->restore->restorable);
    /* a second job completing 2: the malformed marker still counts, refused */
    testfs_mkdir(fx->dir, "_state/b/v1/0");
    testfs_marker(fx->dir, "b", 2, "generation=1\nparticipants=0\nstate=_state/b\n");
    g_autoptr(CkResolution) two = resolve_at(fx, NULL, false, 2, &rc);
    assert_int_equal(two->status, CK_RESOLVE_REFUSED);
    assert_int_equal(two->candidates->len, 2);
    g_autoptr(CkResolution) only_b = resolve_at(fx, NULL, false, 1, &rc);
    assert_int_equal(only_b->status, CK_RESOLVE_OK);
    assert_ptr_equal(only_b->restore->job, ck_intern("a"));
}

/* A chk-<N> that is a symlink is not followed; it is a malformed checkpoint
 * in resolve as in the catalog (check, jobs, the views). */
static void symlinked_checkpoint_dir_is_malformed(void **state)
{
    Fx *fx = *state;
    testfs_marker(fx->dir, "x", 5, "generation=1\nparticipants=\n");
    testfs_mkdir(fx->dir, "_jobs/a");
    g_autofree char *ln = g_build_filename(fx->dir, "_jobs/a/chk-1", NULL);
    g_autofree char *tg = g_build_filename(fx->dir, "_jobs/x/chk-5", NULL);
    assert_int_equal(symlink(tg, ln), 0);
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, "_jobs/a", false, 1, &rc);
    assert_int_equal(res->status, CK_RESOLVE_OK);
    assert_int_equal(res->restore->cls, CK_MARKER_MALFORMED);
    assert_string_equal(res->restore->error, "malformed marker: chk-1 is a symlink, not followed");
}

/* A participant listed twice is read once. */
static void duplicated_participant_read_once(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/a/v1/1");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=1,0,1,1,0\nstate=_state/a\n");
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, "_jobs/a", false, 1, &rc);
    assert_int_equal(res->status, CK_RESOLVE_OK);
    const char *want[] = {"_state/a/v1/1", "_state/a/v1/0", NULL};
    assert_reads(res->restore, want);
    assert_int_equal(res->restore->participants->len, 2);
}

/* Checkpoint ids and generations up to 2^64-1 (they fit uint64). */
static void huge_ids(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v18446744073709551615/0");
    testfs_marker(fx->dir, "a", G_MAXUINT64,
                  "checkpoint=18446744073709551615\ngeneration=18446744073709551615\n"
                  "participants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", (guint64)G_MAXINT64 + 1,
                  "generation=9223372036854775808\nparticipants=0\nstate=_state/a\n");
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, "_jobs/a", true, 0, &rc);
    assert_int_equal(res->status, CK_RESOLVE_OK);
    assert_true(res->restore->checkpoint == G_MAXUINT64);
    assert_true(res->restore->generation == G_MAXUINT64);
    assert_true(res->restore->restorable);
    const char *want[] = {"_state/a/v18446744073709551615/0", NULL};
    assert_reads(res->restore, want);
    g_autoptr(CkResolution) r2 = resolve_at(fx, NULL, false, (guint64)G_MAXINT64 + 1, &rc);
    assert_int_equal(r2->status, CK_RESOLVE_OK);
    assert_true(r2->restore->generation == (guint64)G_MAXINT64 + 1);
    assert_false(r2->restore->restorable); /* no v2^63 */
}

/* The same answers from ck_resolve and from the catalog, for every checkpoint
 * of every job of a directory full of awkward shapes: one implementation. */
static void resolve_agrees_with_catalog(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/a/v2/0");
    testfs_mkdir(fx->dir, "v1/0");
    testfs_mkdir(fx->dir, "3");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", 2, "participants=0,0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", 3, "generation=9\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=0\n");
    testfs_marker(fx->dir, "b", 2, "generation=5\nparticipants=3\n");
    testfs_marker(fx->dir, "c", 1, "generation=2\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "d", 1, "generation=1\n");
    testfs_marker(fx->dir, "e", 1, "x\n");
    testfs_marker(fx->dir, "f", 1, "generation=1\nparticipants=0\nstate=s3://b/p\n");
    testfs_mkdir(fx->dir, "_jobs/g/chk-1/COMPLETED");
    testfs_mkdir(fx->dir, "_jobs/g/chk-2");
    g_autoptr(CkCatalog) cat =
        ck_catalog_open(fx->dir, &(CkCatalogOptions){.resolve = fx->opts}, NULL);
    assert_non_null(cat);
    g_autoptr(GPtrArray) names = ck_catalog_job_names(cat);
    assert_int_equal(names->len, 7);
    for (guint i = 0; i < names->len; i++) {
        g_autoptr(CkJobInfo) j = ck_catalog_get_job(cat, names->pdata[i]);
        g_autofree char *sub = g_strconcat("_jobs/", j->job, NULL);
        for (guint k = 0; k < j->checkpoints->len; k++) {
            const CkCheckpointInfo *cp = j->checkpoints->pdata[k];
            const CkRestore *w = cp->restore;
            int rc;
            g_autoptr(CkResolution) res = resolve_at(fx, sub, false, cp->n, &rc);
            assert_int_equal(rc, 0);
            assert_int_equal(res->status, CK_RESOLVE_OK);
            const CkRestore *r = res->restore;
            print_message("%s:%" G_GUINT64_FORMAT " %s\n", j->job, cp->n, w->error ? w->error : "");
            assert_int_equal(r->cls, w->cls);
            assert_int_equal(r->restorable, w->restorable);
            assert_int_equal(r->root_kind, w->root_kind);
            assert_string_equal(r->root ? r->root : "(null)", w->root ? w->root : "(null)");
            assert_int_equal(r->has_generation, w->has_generation);
            assert_true(r->generation == w->generation);
            assert_int_equal(r->generation_guessed, w->generation_guessed);
            assert_string_equal(r->error ? r->error : "", w->error ? w->error : "");
            assert_string_equal(r->marker, w->marker);
            assert_int_equal(r->reads->len, w->reads->len);
            for (guint x = 0; x < r->reads->len; x++)
                assert_string_equal(r->reads->pdata[x], w->reads->pdata[x]);
        }
        /* check says the same: each malformed checkpoint is a malformed
         * hazard on its marker, with the restore's error as its detail */
        g_autoptr(GPtrArray) hz = ck_catalog_hazards(cat);
        for (guint k = 0; k < j->checkpoints->len; k++) {
            const CkRestore *w = ((CkCheckpointInfo *)j->checkpoints->pdata[k])->restore;
            if (w->cls != CK_MARKER_MALFORMED)
                continue;
            bool found = false;
            for (guint x = 0; x < hz->len && !found; x++) {
                const CkHazard *h = hz->pdata[x];
                found = strcmp(h->kind, "malformed") == 0 && strcmp(h->path, w->marker) == 0 &&
                        strcmp(h->detail, w->error) == 0;
            }
            if (!found)
                fail_msg("no malformed hazard for %s (%s)", w->marker, w->error);
        }
        /* one definition of latest */
        int rc;
        g_autoptr(CkResolution) lat = resolve_at(fx, sub, true, 0, &rc);
        if (j->has_latest) {
            assert_int_equal(lat->status, CK_RESOLVE_OK);
            assert_true(lat->restore->restorable);
            assert_true(lat->restore->checkpoint == j->latest);
        } else if (lat->restore) {
            assert_false(lat->restore->restorable);
        }
    }
}

/* "latest" in a checkpoint directory with several jobs' markers is refused,
 * even when only one job has a restorable one. */
static void latest_refused_whatever_the_markers_hold(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "b", 7, "not a marker\n");
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, NULL, true, 0, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(res->status, CK_RESOLVE_REFUSED);
    assert_int_equal(res->candidates->len, 2);
    g_autofree char *text = ck_refusal_text(fx->dir, true, 0, res->candidates);
    assert_string_equal(res->error, text);
    assert_non_null(strstr(res->error, "\"latest\" is ambiguous"));
    /* N that only one job completed is that job's */
    g_autoptr(CkResolution) one = resolve_at(fx, NULL, false, 7, &rc);
    assert_int_equal(one->status, CK_RESOLVE_OK);
    assert_ptr_equal(one->restore->job, ck_intern("b"));
    assert_int_equal(one->restore->cls, CK_MARKER_MALFORMED);
}

static void copied_directory_restores_from_the_copy(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "orig/_state/a/v1/0");
    testfs_put(fx->dir, "orig/_state/a/v1/0/checkpoint-1.snap", "state");
    testfs_put(fx->dir, "orig/_jobs/a/chk-1/COMPLETED",
               "generation=1\nparticipants=0\nstate=_state/a\n");
    g_autofree char *orig = g_build_filename(fx->dir, "orig", NULL);
    g_autofree char *copy = g_build_filename(fx->dir, "copy", NULL);
    g_autofree char *cmd = g_strdup_printf("cp -a '%s' '%s'", orig, copy);
    int status;
    assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, &status, NULL));
    assert_int_equal(status, 0);
    assert_true(testfs_remove(orig)); /* the original is gone */
    g_autoptr(CkResolution) res = NULL;
    assert_int_equal(ck_resolve(copy, false, 1, &fx->opts, &res), 0);
    assert_int_equal(res->status, CK_RESOLVE_OK);
    assert_true(res->restore->restorable);
    assert_string_equal(res->dir, copy);
    g_autofree char *p =
        g_build_filename(res->dir, res->restore->reads->pdata[0], "checkpoint-1.snap", NULL);
    assert_true(g_file_test(p, G_FILE_TEST_IS_REGULAR));
}

static void as_given_rows(void **state)
{
    Fx *fx = *state;
    g_autoptr(CkResolution) uri = NULL;
    assert_int_equal(ck_resolve("s3://bucket/ckpt?local=/tmp/x", false, 1, &fx->opts, &uri), 0);
    assert_int_equal(uri->status, CK_RESOLVE_AS_GIVEN);
    assert_string_equal(uri->location, "s3://bucket/ckpt?local=/tmp/x");
    /* a directory without markers */
    testfs_mkdir(fx->dir, "plain/v1/0");
    int rc;
    g_autoptr(CkResolution) plain = resolve_at(fx, "plain", true, 0, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(plain->status, CK_RESOLVE_AS_GIVEN);
    /* an empty _jobs */
    testfs_mkdir(fx->dir, "empty/_jobs");
    g_autoptr(CkResolution) empty = resolve_at(fx, "empty", false, 1, &rc);
    assert_int_equal(empty->status, CK_RESOLVE_AS_GIVEN);
    /* missing: -ENOENT */
    CkResolution *missing = NULL;
    g_autofree char *loc = g_build_filename(fx->dir, "nope", NULL);
    assert_int_equal(ck_resolve(loc, false, 1, &fx->opts, &missing), -ENOENT);
    assert_null(missing);
    g_autofree char *floc = g_strconcat("file://", loc, NULL);
    assert_int_equal(ck_resolve(floc, false, 1, &fx->opts, &missing), -ENOENT);
}

static void names_are_not_jobs(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\n");
    testfs_put(fx->dir, "_jobs/.hidden/chk-1/COMPLETED", "generation=1\nparticipants=0\n");
    testfs_put(fx->dir, "_jobs/b/chk-01/COMPLETED",
               "generation=1\nparticipants=0\n"); /* not canonical */
    int rc;
    g_autoptr(CkResolution) res = resolve_at(fx, NULL, false, 1, &rc);
    assert_int_equal(res->status, CK_RESOLVE_OK);
    assert_ptr_equal(res->restore->job, ck_intern("a"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(namespaced_relative_root, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_root_normalised, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_escaping_root_is_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(no_generation_is_flagged_guessed, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_foreign_root, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_missing_root_not_restorable, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_generation_guessed, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_no_generation_found, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_dot_root_named_in_error, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_symlinked_root_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_absolute_external_or_remote, setup, teardown),
        cmocka_unit_test_setup_teardown(namespaced_remote_uri, setup, teardown),
        cmocka_unit_test(path_is_under_componentwise),
        cmocka_unit_test_setup_teardown(open_beneath_stays_inside, setup, teardown),
        cmocka_unit_test_setup_teardown(open_external_beneath_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(legacy_in_checkpoint_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(legacy_generation_guessed, setup, teardown),
        cmocka_unit_test_setup_teardown(legacy_older_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(legacy_nothing_there, setup, teardown),
        cmocka_unit_test_setup_teardown(legacy_symlinked_generation_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(non_regular_marker_is_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(symlinked_checkpoint_dir_is_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(duplicated_participant_read_once, setup, teardown),
        cmocka_unit_test_setup_teardown(huge_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(resolve_agrees_with_catalog, setup, teardown),
        cmocka_unit_test_setup_teardown(latest_refused_whatever_the_markers_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(legacy_backend_configured, setup, teardown),
        cmocka_unit_test_setup_teardown(cut_short_with_own_root, setup, teardown),
        cmocka_unit_test_setup_teardown(cut_short_without_own_root, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_reads_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(restore_copy_is_deep, setup, teardown),
        cmocka_unit_test_setup_teardown(two_jobs_one_directory_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(one_job_completed_n, setup, teardown),
        cmocka_unit_test_setup_teardown(marker_directory_latest, setup, teardown),
        cmocka_unit_test_setup_teardown(copied_directory_restores_from_the_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(as_given_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(names_are_not_jobs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
