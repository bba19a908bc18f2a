/* core/layout.c: the paths of a job in a checkpoint directory, and the
 * names the layout keeps at the top level. */
#include <fcntl.h>
#include <glib.h>
#include <setjmp.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "classify.h"
#include "layout.h"
#include "testfs.h"

static void test_paths(void **state)
{
    (void)state;
    g_autofree char *m = ck_job_markers_dir("j1");
    g_autofree char *s = ck_job_state_dir("j1");
    g_autofree char *c = ck_checkpoint_dir("j1", 18446744073709551615ull);
    assert_string_equal(m, "_jobs/j1");
    assert_string_equal(s, "_state/j1");
    assert_string_equal(c, "_jobs/j1/chk-18446744073709551615");
}

/* What the layout spells, the classifier reads back as that place. */
static void test_paths_classify_as_theirs(void **state)
{
    (void)state;
    g_autofree char *m = ck_job_markers_dir("a.b-c");
    g_autofree char *s = ck_job_state_dir("a.b-c");
    g_autofree char *c = ck_checkpoint_dir("a.b-c", 7);
    g_autofree char *marker = g_strconcat(c, "/COMPLETED", NULL);
    assert_int_equal(ck_classify_path(m, "_views").kind, CK_PATH_JOB_MARKERS);
    assert_int_equal(ck_classify_path(s, "_views").kind, CK_PATH_JOB_STATE);
    CkPathClass k = ck_classify_path(marker, "_views");
    assert_int_equal(k.kind, CK_PATH_MARKER);
    assert_int_equal(k.checkpoint, 7);
    assert_int_equal(ck_classify_path(CK_JOBS_DIR, "_views").kind, CK_PATH_JOBS_DIR);
    assert_int_equal(ck_classify_path(CK_STATE_DIR, "_views").kind, CK_PATH_STATE_DIR);
}

static void test_layout_dirs(void **state)
{
    (void)state;
    assert_true(ck_is_layout_dir("_jobs"));
    assert_true(ck_is_layout_dir("_state"));
    assert_false(ck_is_layout_dir("_views"));
    assert_false(ck_is_layout_dir("_job"));
    assert_false(ck_is_layout_dir("_jobs/"));
    assert_false(ck_is_layout_dir(""));
}

/* A directory with none of the layout's names is not a checkpoint
 * directory (ckptctl jobs /etc said nothing and exited 0); an empty one,
 * or one holding only the views, is one before its first job. */
static int is_ckpt(const char *dir, const char *rel, const char *views)
{
    g_autofree char *p = g_build_filename(dir, rel, NULL);
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    int r = ck_is_checkpoint_dir(fd, views);
    close(fd);
    return r;
}

static void test_checkpoint_dir(void **state)
{
    (void)state;
    g_autofree char *d = testfs_tmpdir("ck-layout-XXXXXX");
    testfs_put(d, "etc/passwd", "root:x:0:0\n");
    testfs_mkdir(d, "etc/ssh");
    testfs_put(d, "etc/_jobs", "a file, not the directory");
    testfs_mkdir(d, "etc/v01");   /* not canonical: not a generation */
    testfs_mkdir(d, "etc/chk-1"); /* a marker's directory, not at the top */
    assert_int_equal(is_ckpt(d, "etc", "_views"), 0);
    testfs_mkdir(d, "empty");
    assert_int_equal(is_ckpt(d, "empty", "_views"), 1);
    testfs_mkdir(d, "mnt/_views");
    assert_int_equal(is_ckpt(d, "mnt", "_views"), 1);
    assert_int_equal(is_ckpt(d, "mnt", NULL), 0);
    const char *const shapes[] = {"jobs/_jobs", "state/_state", "gen/v7", "older/3"};
    for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
        testfs_mkdir(d, shapes[i]);
        g_autofree char *top = g_path_get_dirname(shapes[i]);
        g_autofree char *readme = g_build_filename(top, "README", NULL);
        testfs_put(d, readme, "x");
        assert_int_equal(is_ckpt(d, top, "_views"), 1);
    }
    testfs_remove(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_paths_classify_as_theirs),
        cmocka_unit_test(test_layout_dirs),
        cmocka_unit_test(test_checkpoint_dir),
    };
    return cmocka_run_group_tests_name("unit/layout", tests, NULL, NULL);
}
