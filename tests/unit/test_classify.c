/* core/classify.c: job ids, canonical decimals, names, paths. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "classify.h"

static bool job(const char *s)
{
    return ck_is_job_id(s, strlen(s));
}

static void test_job_id_lengths(void **st)
{
    (void)st;
    char buf[CK_JOB_ID_MAX + 2];
    memset(buf, 'a', sizeof buf);
    assert_true(ck_is_job_id(buf, 1));
    assert_true(ck_is_job_id(buf, 128));
    assert_false(ck_is_job_id(buf, 129));
    assert_false(ck_is_job_id(buf, 0));
    assert_false(ck_is_job_id("", 0));
    assert_false(ck_is_job_id(NULL, 0));
}

static void test_job_id_chars(void **st)
{
    (void)st;
    assert_true(job("AZaz09_.-"));
    assert_true(job("job-1.2_x"));
    assert_true(job("-x"));
    assert_true(job("_"));
    assert_true(job("a."));
    assert_false(job(".hidden"));
    assert_false(job("."));
    assert_false(job(".."));
    const char *bad = "/ \t\n:@+*?\\~\x7f\x80\xff=,;!\"'#$%&()[]{}|<>^`";
    for (const char *b = bad; *b; b++) {
        char s[4] = {'a', *b, 'b', 0};
        assert_false(ck_is_job_id(s, 3));
    }
    /* a NUL inside the length is a bad byte, not a terminator */
    assert_false(ck_is_job_id("a\0b", 3));
    /* the length bounds the read: "ab" followed by a bad byte */
    assert_true(ck_is_job_id("ab/", 2));
}

static void test_u64(void **st)
{
    (void)st;
    uint64_t v = 42;
    assert_true(ck_parse_u64("0", 1, &v));
    assert_int_equal(v, 0);
    assert_true(ck_parse_u64("7", 1, &v));
    assert_int_equal(v, 7);
    assert_true(ck_parse_u64("10", 2, &v));
    assert_int_equal(v, 10);
    assert_true(ck_parse_u64("18446744073709551615", 20, &v));
    assert_true(v == UINT64_MAX);
    v = 5;
    assert_false(ck_parse_u64("18446744073709551616", 20, &v));
    assert_false(ck_parse_u64("99999999999999999999", 20, &v));
    assert_false(ck_parse_u64("184467440737095516150", 21, &v));
    assert_false(ck_parse_u64("00", 2, &v));
    assert_false(ck_parse_u64("01", 2, &v));
    assert_false(ck_parse_u64("+1", 2, &v));
    assert_false(ck_parse_u64("-1", 2, &v));
    assert_false(ck_parse_u64(" 1", 2, &v));
    assert_false(ck_parse_u64("1 ", 2, &v));
    assert_false(ck_parse_u64("", 0, &v));
    assert_false(ck_parse_u64("1a", 2, &v));
    assert_false(ck_parse_u64("0x1", 3, &v));
    assert_int_equal(v, 5); /* untouched on failure */
    assert_true(ck_parse_u64("123x", 3, &v));
    assert_int_equal(v, 123);
}

static void test_u32(void **st)
{
    (void)st;
    uint32_t v;
    assert_true(ck_parse_u32("4294967295", 10, &v));
    assert_true(v == UINT32_MAX);
    assert_false(ck_parse_u32("4294967296", 10, &v));
    assert_false(ck_parse_u32("00", 2, &v));
    assert_true(ck_parse_u32("0", 1, &v));
    assert_int_equal(v, 0);
}

static void test_names(void **st)
{
    (void)st;
    uint64_t g;
    uint32_t s;
    assert_true(ck_parse_generation_name("v1", 2, &g));
    assert_int_equal(g, 1);
    assert_true(ck_parse_generation_name("v0", 2, &g));
    assert_false(ck_parse_generation_name("v01", 3, &g));
    assert_false(ck_parse_generation_name("v", 1, &g));
    assert_false(ck_parse_generation_name("V1", 2, &g));
    assert_false(ck_parse_generation_name("v-1", 3, &g));
    assert_false(ck_parse_generation_name("1", 1, &g));
    assert_false(ck_parse_generation_name("v18446744073709551616", 21, &g));
    assert_true(ck_parse_checkpoint_name("chk-7", 5, &g));
    assert_int_equal(g, 7);
    assert_true(ck_parse_checkpoint_name("chk-0", 5, &g));
    assert_false(ck_parse_checkpoint_name("chk-007", 7, &g));
    assert_false(ck_parse_checkpoint_name("chk-", 4, &g));
    assert_false(ck_parse_checkpoint_name("chk7", 4, &g));
    assert_false(ck_parse_checkpoint_name("chk-+7", 6, &g));
    assert_true(ck_parse_subtask_name("3", 1, &s));
    assert_int_equal(s, 3);
    assert_false(ck_parse_subtask_name("03", 2, &s));
    assert_false(ck_parse_subtask_name("4294967296", 10, &s));
}

static void test_paths_structure(void **st)
{
    (void)st;
    assert_int_equal(ck_classify_path("", NULL).kind, CK_PATH_ROOT);
    assert_int_equal(ck_classify_path("_jobs", NULL).kind, CK_PATH_JOBS_DIR);
    assert_int_equal(ck_classify_path("_state", NULL).kind, CK_PATH_STATE_DIR);
    assert_int_equal(ck_classify_path("_views", NULL).kind, CK_PATH_VIEWS);
    assert_int_equal(ck_classify_path("_views/a/state", NULL).kind, CK_PATH_VIEWS);
    assert_int_equal(ck_classify_path("_views", "_v2").kind, CK_PATH_LEGACY_OTHER);
    assert_int_equal(ck_classify_path("_v2/x", "_v2").kind, CK_PATH_VIEWS);
}

static void test_paths_jobs(void **st)
{
    (void)st;
    CkPathClass c = ck_classify_path("_jobs/job-a", NULL);
    assert_int_equal(c.kind, CK_PATH_JOB_MARKERS);
    assert_int_equal(c.job_len, 5);
    assert_memory_equal(c.job, "job-a", 5);
    c = ck_classify_path("_jobs/job-a/chk-12/COMPLETED", NULL);
    assert_int_equal(c.kind, CK_PATH_MARKER);
    assert_int_equal(c.checkpoint, 12);
    assert_memory_equal(c.job, "job-a", 5);
    assert_int_equal(ck_classify_path("_jobs/a/chk-012/COMPLETED", NULL).kind, CK_PATH_JOB_MARKERS);
    assert_int_equal(ck_classify_path("_jobs/a/chk-1/COMPLETED/x", NULL).kind, CK_PATH_JOB_MARKERS);
    assert_int_equal(ck_classify_path("_jobs/a/chk-1/completed", NULL).kind, CK_PATH_JOB_MARKERS);
    assert_int_equal(ck_classify_path("_jobs/a/chk-1", NULL).kind, CK_PATH_JOB_MARKERS);
    assert_int_equal(ck_classify_path("_jobs/.a", NULL).kind, CK_PATH_NOT_A_JOB);
    assert_int_equal(ck_classify_path("_jobs/a b/chk-1/COMPLETED", NULL).kind, CK_PATH_NOT_A_JOB);
    assert_null(ck_classify_path("_jobs/.a", NULL).job);
}

static void test_paths_state(void **st)
{
    (void)st;
    CkPathClass c = ck_classify_path("_state/j1/v3/0/f", NULL);
    assert_int_equal(c.kind, CK_PATH_JOB_STATE);
    assert_int_equal(c.job_len, 2);
    assert_memory_equal(c.job, "j1", 2);
    assert_int_equal(ck_classify_path("_state/j1", NULL).kind, CK_PATH_JOB_STATE);
    assert_int_equal(ck_classify_path("_state/.tmp/x", NULL).kind, CK_PATH_NOT_A_JOB);
    char longname[200] = "_state/";
    memset(longname + 7, 'x', 129);
    assert_int_equal(ck_classify_path(longname, NULL).kind, CK_PATH_NOT_A_JOB);
}

static void test_paths_legacy(void **st)
{
    (void)st;
    CkPathClass c = ck_classify_path("v7/0/checkpoint-1.snap", NULL);
    assert_int_equal(c.kind, CK_PATH_LEGACY_GEN);
    assert_int_equal(c.generation, 7);
    assert_null(c.job);
    c = ck_classify_path("12", NULL);
    assert_int_equal(c.kind, CK_PATH_LEGACY_SUBTASK);
    assert_int_equal(c.subtask, 12);
    assert_int_equal(ck_classify_path("v01", NULL).kind, CK_PATH_LEGACY_OTHER);
    assert_int_equal(ck_classify_path("012/x", NULL).kind, CK_PATH_LEGACY_OTHER);
    assert_int_equal(ck_classify_path("README", NULL).kind, CK_PATH_LEGACY_OTHER);
    assert_int_equal(ck_classify_path("_jobsx", NULL).kind, CK_PATH_LEGACY_OTHER);
    assert_int_equal(ck_classify_path("4294967296", NULL).kind, CK_PATH_LEGACY_OTHER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_id_lengths),
        cmocka_unit_test(test_job_id_chars),
        cmocka_unit_test(test_u64),
        cmocka_unit_test(test_u32),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_paths_structure),
        cmocka_unit_test(test_paths_jobs),
        cmocka_unit_test(test_paths_state),
        cmocka_unit_test(test_paths_legacy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
