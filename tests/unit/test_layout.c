/* core/layout.c: the paths of a job in a checkpoint directory, and the
 * names the layout keeps at the top level. */
#include <glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "classify.h"
#include "layout.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_paths_classify_as_theirs),
        cmocka_unit_test(test_layout_dirs),
    };
    return cmocka_run_group_tests_name("unit/layout", tests, NULL, NULL);
}
