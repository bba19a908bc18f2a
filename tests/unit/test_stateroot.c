/* core/stateroot.c: composing a job's state root (record 013, "The change"). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glib.h>

#include "stateroot.h"

static void expect(const char *base, const char *job, const char *want)
{
    g_autofree char *got = ck_job_state_root(base, job);
    if (g_strcmp0(got, want) != 0)
        fail_msg("job_state_root(%s, %s) = %s, want %s", base, job, got, want);
}

static void test_examples(void **st)
{
    (void)st;
    expect("s3://b/ckpt?local=/tmp/w", "j1", "s3://b/ckpt/_state/j1?local=/tmp/w/_state/j1");
    expect("/data/ckpt/", "j1", "/data/ckpt/_state/j1");
    expect("memory://", "j1", "memory://");
}

static void test_plain_paths(void **st)
{
    (void)st;
    expect("/data/ckpt", "j1", "/data/ckpt/_state/j1");
    expect("/data/ckpt//", "j1", "/data/ckpt/_state/j1");
    expect("/", "j1", "/_state/j1");
    expect("rel/dir", "j1", "rel/dir/_state/j1");
    expect("", "j1", "_state/j1");
    /* a plain path has no query: '?' is a literal character */
    expect("/data/a?local=/x", "j1", "/data/a?local=/x/_state/j1");
    expect("/data/a:b", "j1", "/data/a:b/_state/j1");
}

static void test_file_uris(void **st)
{
    (void)st;
    expect("file:///abs", "j", "file:///abs/_state/j");
    expect("file:///abs/", "j", "file:///abs/_state/j");
    expect("file:///", "j", "file:///_state/j");
    expect("FILE:///abs", "j", "FILE:///abs/_state/j");
}

static void test_location_and_query(void **st)
{
    (void)st;
    expect("s3://b/ckpt", "j1", "s3://b/ckpt/_state/j1");
    expect("s3://b/ckpt/", "j1", "s3://b/ckpt/_state/j1");
    expect("s3://b", "j1", "s3://b/_state/j1");
    expect("s3://b/ckpt?region=eu&local=/tmp/w&x=1", "j1",
           "s3://b/ckpt/_state/j1?region=eu&local=/tmp/w/_state/j1&x=1");
    expect("s3://b/ckpt/?local=/tmp/w/", "j1", "s3://b/ckpt/_state/j1?local=/tmp/w/_state/j1");
    expect("s3://b/ckpt?region=eu", "j1", "s3://b/ckpt/_state/j1?region=eu");
    expect("s3://b/ckpt?", "j1", "s3://b/ckpt/_state/j1?");
    expect("s3://b/ckpt?local=", "j1", "s3://b/ckpt/_state/j1?local=");
    expect("s3://b/ckpt?nolocal=/x&local_dir=/y", "j1",
           "s3://b/ckpt/_state/j1?nolocal=/x&local_dir=/y");
    expect("s3://b/ckpt?a=1&&b=2", "j1", "s3://b/ckpt/_state/j1?a=1&&b=2");
    expect("changelog+s3+rocksdb://bucket/p?local=/w", "job.x",
           "changelog+s3+rocksdb://bucket/p/_state/job.x?local=/w/_state/job.x");
}

static void test_no_location(void **st)
{
    (void)st;
    expect("changelog://", "j1", "changelog://");
    expect("disagg-local://", "j1", "disagg-local://");
    expect("memory://?size=10", "j1", "memory://?size=10");
    expect("changelog://?local=/tmp/w", "j1", "changelog://?local=/tmp/w");
    expect("disagg-local://?a=b", "j1", "disagg-local://?a=b");
}

/* The location-less schemes stay unchanged whatever follows "://", with or
 * without a query; schemes that merely start with those names
 * (changelog+file, changelog+rocksdb, memoryx) are composed as usual. */
static void test_no_location_whatever_follows(void **st)
{
    (void)st;
    expect("disagg-local://tmp/x", "j1", "disagg-local://tmp/x");
    expect("disagg-local:///abs/dir?local=/w", "j1", "disagg-local:///abs/dir?local=/w");
    expect("memory://anything/at/all", "j1", "memory://anything/at/all");
    expect("Memory://x?y=z", "j1", "Memory://x?y=z");
    expect("changelog://base/path", "j1", "changelog://base/path");
    expect("changelog://base?local=/tmp/w", "j1", "changelog://base?local=/tmp/w");
    expect("changelog+file:///data/c", "j1", "changelog+file:///data/c/_state/j1");
    expect("changelog+rocksdb://b/p?local=/w", "j1",
           "changelog+rocksdb://b/p/_state/j1?local=/w/_state/j1");
    expect("memoryx://b/p", "j1", "memoryx://b/p/_state/j1");
    expect("other://?local=/w", "j1", "other://?local=/w");
    assert_true(ck_is_locationless_scheme("disagg-local://x"));
    assert_false(ck_is_locationless_scheme("changelog+file://x"));
    assert_false(ck_is_locationless_scheme("memory"));
}

static void test_remote(void **st)
{
    (void)st;
    assert_true(ck_is_remote_uri("s3://b/x"));
    assert_true(ck_is_remote_uri("memory://"));
    assert_true(ck_is_remote_uri("changelog+file://x"));
    assert_false(ck_is_remote_uri("file:///abs"));
    assert_false(ck_is_remote_uri("File:///abs"));
    assert_false(ck_is_remote_uri("/abs/path"));
    assert_false(ck_is_remote_uri("_state/j"));
    assert_false(ck_is_remote_uri("s3:/b"));
    assert_false(ck_is_remote_uri("://x"));
    assert_false(ck_is_remote_uri("1s3://x"));
    assert_false(ck_is_remote_uri(""));
    assert_false(ck_is_remote_uri(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples),    cmocka_unit_test(test_plain_paths),
        cmocka_unit_test(test_file_uris),   cmocka_unit_test(test_location_and_query),
        cmocka_unit_test(test_no_location), cmocka_unit_test(test_no_location_whatever_follows),
        cmocka_unit_test(test_remote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
