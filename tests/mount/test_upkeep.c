/* Keeping the views current without rescanning everything (ckptfs(8)
 * KEEPING THE VIEWS CURRENT):
 * the catalog's metrics are true right after the mount; a marker written
 * behind the mount shows within rescan= seconds, through inotify and
 * through the periodic checks alone (CKPTFS_NO_INOTIFY=1 makes the daemon
 * act as on a file system inotify cannot see); a checkpoint that was in
 * progress at mount time shows once its COMPLETED is written behind the
 * mount; the views dir's (kernel-cached) listing follows jobs added and
 * removed behind the mount; a marker rewritten in place (or replaced by a
 * rename) behind the mount shows too, and so does a change after rescan=
 * was shortened live.  Polls are bounded (up to 10 s for rescan=1) and
 * assert what shows, never how fast. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define JOBS    300
#define MARKERS 3

static void bput(Mount *m, const char *rel, const char *data)
{
    g_autofree char *p = g_build_filename(m->backing, rel, NULL);
    g_autofree char *d = g_path_get_dirname(p);
    assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
    put_file(p, data);
}

static void bmarker(Mount *m, const char *job, int n)
{
    g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-%d/COMPLETED", job, n);
    g_autofree char *text =
        g_strdup_printf("checkpoint=%d\ngeneration=1\nparticipants=0\nstate=_state/%s\n", n, job);
    bput(m, rel, text);
}

/* A job of MARKERS markers, with its state. */
static void bjob(Mount *m, const char *job)
{
    g_autofree char *st = g_strdup_printf("_state/%s/v1/0/f.snap", job);
    bput(m, st, "state");
    for (int n = 1; n <= MARKERS; n++)
        bmarker(m, job, n);
}

/* JOBS jobs of MARKERS markers each, with their state. */
static Mount *fixture(void)
{
    Mount *m = mount_new();
    for (int j = 0; j < JOBS; j++) {
        char job[32];
        g_snprintf(job, sizeof job, "job-%04d", j);
        bjob(m, job);
    }
    return m;
}

static int start(Mount *m, bool inotify)
{
    const char *args[] = {"-o", "rescan=1", NULL};
    if (!inotify)
        g_setenv("CKPTFS_NO_INOTIFY", "1", TRUE);
    int r = mount_start(m, args);
    g_unsetenv("CKPTFS_NO_INOTIFY");
    return r;
}

static bool exists(Mount *m, const char *vrel)
{
    g_autofree char *p = g_build_filename(m->mnt, "_views", vrel, NULL);
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static bool wait_exists(Mount *m, const char *vrel, bool want)
{
    for (int i = 0; i < 100; i++) {
        if (exists(m, vrel) == want)
            return true;
        g_usleep(100000);
    }
    return false;
}

/* Whether the (kernel-cached) listing of _views/<vrel> has name ("": the
 * views dir's own).  Read with getdents64 alone, to its end: the kernel
 * keeps a listing only once a reader reached its end (a reader that
 * stopped at the name would have every read reach the daemon), and a
 * reader without opendir(3)'s fstat asks the kernel for nothing else. */
static bool listed(Mount *m, const char *vrel, const char *name)
{
    g_autofree char *p = g_build_filename(m->mnt, "_views", vrel, NULL);
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    bool found = false;
    char buf[4096] __attribute__((aligned(__alignof__(struct dirent64))));
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
        for (long off = 0; off < n;) {
            struct dirent64 *de = (struct dirent64 *)(buf + off);
            found = found || strcmp(de->d_name, name) == 0;
            off += de->d_reclen;
        }
    int err = n < 0 ? errno : 0;
    close(fd);
    if (err)
        fail_msg("getdents64 %s: %s", p, strerror(err));
    return found;
}

static bool wait_listed(Mount *m, const char *vrel, const char *name, bool want)
{
    for (int i = 0; i < 100; i++) {
        if (listed(m, vrel, name) == want)
            return true;
        g_usleep(100000);
    }
    return false;
}

/* The catalog's gauges read true at the first read of .metrics. */
static void test_metrics_at_start(void **state)
{
    (void)state;
    Mount *m = fixture();
    assert_int_equal(start(m, true), 0);
    assert_int_equal(mount_metric(m, "ckptfs_catalog_jobs"),
                     JOBS + 1); /* and the harness's _state/t */
    assert_int_equal(mount_metric(m, "ckptfs_catalog_markers"), JOBS * MARKERS);
    assert_int_equal(mount_metric(m, "ckptfs_catalog_markers_loaded"), JOBS * MARKERS);
    assert_int_equal(mount_metric(m, "ckptfs_inotify_overflows_total"), 0);
    /* the rescan gauges exist from the start (they are floats: just present) */
    g_autofree char *mp = g_build_filename(m->mnt, "_views", ".metrics", NULL);
    g_autofree char *text = get_file(mp);
    assert_non_null(strstr(text, "\nckptfs_catalog_rescan_duration_seconds{mount="));
    assert_non_null(strstr(text, "\nckptfs_catalog_sweep_duration_seconds{mount="));
    /* a rescan pass runs every rescan= second */
    bool rescanned = false;
    for (int i = 0; i < 100 && !rescanned; i++) {
        rescanned = mount_metric(m, "ckptfs_rescans_total") >= 1;
        if (!rescanned)
            g_usleep(100000);
    }
    assert_true(rescanned);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Markers written behind the mount: a new chk-<N> (mkdir, then COMPLETED),
 * a checkpoint in progress at mount time completed, a new job, a job gone. */
static void behind(bool inotify)
{
    Mount *m = fixture();
    /* in progress when mounted: chk-4 without COMPLETED */
    g_autofree char *p4 = g_build_filename(m->backing, "_jobs/job-0007/chk-4", NULL);
    assert_int_equal(g_mkdir_with_parents(p4, 0755), 0);
    assert_int_equal(start(m, inotify), 0);
    assert_true(exists(m, "job-0007/checkpoints/3"));
    assert_false(exists(m, "job-0007/checkpoints/4"));
    assert_false(exists(m, "job-0150/checkpoints/4"));

    bmarker(m, "job-0150", 4);
    assert_true(wait_exists(m, "job-0150/checkpoints/4", true));
    g_autofree char *l = g_build_filename(m->mnt, "_views/job-0150/latest", NULL);
    char buf[64] = {0};
    assert_true(readlink(l, buf, sizeof buf - 1) > 0);
    assert_string_equal(buf, "checkpoints/4");

    bmarker(m, "job-0007", 4);
    assert_true(wait_exists(m, "job-0007/checkpoints/4", true));

    /* a job appears in the (cached) listing of the views dir, and goes */
    assert_true(listed(m, "", "job-0001"));
    bmarker(m, "newjob", 1);
    assert_true(wait_listed(m, "", "newjob", true));
    assert_true(wait_exists(m, "newjob/checkpoints/1", true));
    g_autofree char *nj = g_build_filename(m->backing, "_jobs/newjob", NULL);
    g_autofree char *rm = g_strdup_printf("rm -rf '%s'", nj);
    assert_int_equal(system(rm), 0);
    assert_true(wait_listed(m, "", "newjob", false));
    assert_true(wait_exists(m, "newjob", false));

    /* a marker removed behind the mount: latest falls back */
    g_autofree char *c4 = g_build_filename(m->backing, "_jobs/job-0150/chk-4", NULL);
    g_autofree char *rm4 = g_strdup_printf("rm -rf '%s'", c4);
    assert_int_equal(system(rm4), 0);
    assert_true(wait_exists(m, "job-0150/checkpoints/4", false));
    memset(buf, 0, sizeof buf);
    assert_true(readlink(l, buf, sizeof buf - 1) > 0);
    assert_string_equal(buf, "checkpoints/3");
    assert_int_equal(mount_metric(m, "ckptfs_catalog_jobs"),
                     JOBS + 1); /* and the harness's _state/t */
    assert_int_equal(mount_metric(m, "ckptfs_catalog_markers"), JOBS * MARKERS + 1);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_behind_inotify(void **state)
{
    (void)state;
    behind(true);
}

static void test_behind_periodic_only(void **state)
{
    (void)state;
    behind(false);
}

static char *latest_of(Mount *m, const char *job)
{
    g_autofree char *l = g_strdup_printf("%s/_views/%s/latest", m->mnt, job);
    char buf[64] = {0};
    if (readlink(l, buf, sizeof buf - 1) <= 0)
        return g_strdup("");
    return g_strdup(buf);
}

static bool wait_latest(Mount *m, const char *job, const char *want)
{
    for (int i = 0; i < 100; i++) {
        g_autofree char *now = latest_of(m, job);
        if (strcmp(now, want) == 0)
            return true;
        g_usleep(100000);
    }
    return false;
}

/* A COMPLETED that already existed at mount time, rewritten in place,
 * replaced by a rename or removed behind the mount: no directory of the
 * job changes and no watch sees it, yet it shows within rescan= in what is
 * looked up and in the (kernel-cached) listings of the job, whether the
 * job's views were looked at before the change or only after it. */
static void rewritten(bool looked_before)
{
    Mount *m = fixture();
    assert_int_equal(start(m, true), 0);
    /* another job's views wait for the catalog's load: what it read of
     * the markers is what the change must show over */
    g_autofree char *other = latest_of(m, "job-0001");
    assert_string_equal(other, "checkpoints/3");
    if (looked_before) {
        g_autofree char *a = latest_of(m, "job-0042");
        g_autofree char *b = latest_of(m, "job-0043");
        assert_string_equal(a, "checkpoints/3");
        assert_string_equal(b, "checkpoints/3");
        /* twice: the mount's first directory open finds the kernel still
         * sending OPENDIR, and that open caches no listing */
        for (int i = 0; i < 2; i++) {
            assert_true(listed(m, "job-0044/checkpoints", "3"));
            assert_true(listed(m, "job-0045", "latest"));
        }
    }
    /* in place: the same inode, truncated and written (a line of blanks: malformed) */
    bput(m, "_jobs/job-0042/chk-3/COMPLETED",
         "checkpoint=3\ngeneration=1\nparticipants=0\nstate=_state/job-0042\n   \n");
    /* replaced: a new file renamed onto it */
    bput(m, "_jobs/job-0043/chk-3/COMPLETED.tmp", "checkpoint=3\n   \n");
    g_autofree char *from =
        g_build_filename(m->backing, "_jobs/job-0043/chk-3/COMPLETED.tmp", NULL);
    g_autofree char *to = g_build_filename(m->backing, "_jobs/job-0043/chk-3/COMPLETED", NULL);
    assert_int_equal(rename(from, to), 0);
    /* removed, its chk-<N> left: the checkpoint goes from the listings */
    g_autofree char *gone = g_build_filename(m->backing, "_jobs/job-0044/chk-3/COMPLETED", NULL);
    assert_int_equal(unlink(gone), 0);
    /* every marker of a job made malformed: no latest in its listing */
    for (int n = 1; n <= MARKERS; n++) {
        g_autofree char *rel = g_strdup_printf("_jobs/job-0045/chk-%d/COMPLETED", n);
        bput(m, rel, "checkpoint=0\n");
    }
    assert_true(wait_latest(m, "job-0042", "checkpoints/2"));
    assert_true(wait_latest(m, "job-0043", "checkpoints/2"));
    assert_true(wait_exists(m, "job-0042/checkpoints/3/ERROR", true));
    assert_true(wait_exists(m, "job-0043/checkpoints/3/ERROR", true));
    assert_true(wait_listed(m, "job-0044/checkpoints", "3", false));
    assert_true(wait_listed(m, "job-0045", "latest", false));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_rewritten_looked_at_before(void **state)
{
    (void)state;
    rewritten(true);
}

static void test_rewritten_looked_at_after(void **state)
{
    (void)state;
    rewritten(false);
}

/* The kernel's cached listings of <J>/checkpoints and <J>, read again and
 * again with nothing else of their job looked up: a COMPLETED removed
 * behind the mount (its chk-<N> left, so no directory of the job changes)
 * leaves the first, and a job whose every marker was made malformed loses
 * latest from the second, within rescan= all the same.  One job each, so
 * that a look at one does not refresh the other. */
static void test_listing_follows_removed_marker(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *jobs[] = {"job-0001", "job-0002"};
    for (int i = 0; i < 2; i++)
        bjob(m, jobs[i]);
    assert_int_equal(start(m, true), 0);
    for (int i = 0; i < 3; i++) { /* the first read caches no listing */
        assert_true(listed(m, "job-0001/checkpoints", "3"));
        assert_true(listed(m, "job-0002", "latest"));
    }

    g_autofree char *gone = g_build_filename(m->backing, "_jobs/job-0001/chk-3/COMPLETED", NULL);
    assert_int_equal(unlink(gone), 0);
    for (int n = 1; n <= MARKERS; n++) {
        g_autofree char *rel = g_strdup_printf("_jobs/job-0002/chk-%d/COMPLETED", n);
        bput(m, rel, "not a marker\n");
    }
    assert_true(wait_listed(m, "job-0001/checkpoints", "3", false));
    assert_true(wait_listed(m, "job-0002", "latest", false));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A job's own listing, read by the kernel right after the job's markers
 * were compared and then kept by it: every marker made malformed behind
 * the mount takes latest out of it within rescan= (4 s here), not at the
 * second drop of the listing, one and a half rescan= later, as when a
 * listing could be made from a comparison up to rescan= old.  The poll
 * stops a quarter of rescan= after the bound. */
static void test_listing_within_rescan(void **state)
{
    (void)state;
    Mount *m = mount_new();
    bjob(m, "job-0001");
    const char *args[] = {"-o", "rescan=4", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *latest = latest_of(m, "job-0001"); /* compares the job */
    assert_string_equal(latest, "checkpoints/3");
    for (int i = 0; i < 3; i++) /* the first read caches no listing */
        assert_true(listed(m, "job-0001", "latest"));
    for (int n = 1; n <= MARKERS; n++) {
        g_autofree char *rel = g_strdup_printf("_jobs/job-0001/chk-%d/COMPLETED", n);
        bput(m, rel, "not a marker\n");
    }
    bool gone = false;
    for (int i = 0; i < 50 && !gone; i++) {
        g_usleep(100000);
        gone = !listed(m, "job-0001", "latest");
    }
    assert_true(gone);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* rescan= shortened live through .control: what the kernel is given from
 * then on is kept no longer than the new rescan=, and a listing it cached
 * before is dropped no later than one cached now.  So a state file
 * removed behind the mount leaves the job's tree, and a removed COMPLETED
 * the job's cached checkpoints listing, within the new rescan=, not
 * within the one the mount started with (60 s, longer than the polls
 * wait): job-0003's listing is cached before the change, job-0002's
 * after it. */
static void test_live_rescan_applies_to_kernel_caches(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *jobs[] = {"job-0001", "job-0002", "job-0003"};
    for (int i = 0; i < 3; i++)
        bjob(m, jobs[i]);
    const char *args[] = {"-o", "rescan=60", NULL};
    assert_int_equal(mount_start(m, args), 0);
    for (int i = 0; i < 3; i++) /* the first read caches no listing */
        assert_true(listed(m, "job-0003/checkpoints", "3"));
    g_autofree char *control = g_build_filename(m->mnt, "_views/.control", NULL);
    assert_int_equal(setxattr(control, "user.ckptfs.rescan", "1", 1, 0), 0);

    assert_true(exists(m, "job-0001/state/v1/0/f.snap"));
    for (int i = 0; i < 3; i++)
        assert_true(listed(m, "job-0002/checkpoints", "3"));

    g_autofree char *snap = g_build_filename(m->backing, "_state/job-0001/v1/0/f.snap", NULL);
    assert_int_equal(unlink(snap), 0);
    for (int i = 1; i < 3; i++) {
        g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-3/COMPLETED", jobs[i]);
        g_autofree char *gone = g_build_filename(m->backing, rel, NULL);
        assert_int_equal(unlink(gone), 0);
    }
    assert_true(wait_exists(m, "job-0001/state/v1/0/f.snap", false));
    assert_true(wait_listed(m, "job-0002/checkpoints", "3", false));
    assert_true(wait_listed(m, "job-0003/checkpoints", "3", false));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_at_start),
        cmocka_unit_test(test_behind_inotify),
        cmocka_unit_test(test_behind_periodic_only),
        cmocka_unit_test(test_rewritten_looked_at_before),
        cmocka_unit_test(test_rewritten_looked_at_after),
        cmocka_unit_test(test_listing_follows_removed_marker),
        cmocka_unit_test(test_listing_within_rescan),
        cmocka_unit_test(test_live_rescan_applies_to_kernel_caches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
