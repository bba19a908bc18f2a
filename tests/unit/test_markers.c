/* core/markers.c: what is a job, what is a checkpoint of a job, and how each
 * marker is read, on small directories in a temporary directory. */
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
#include <sys/sysmacros.h>
#include <unistd.h>

#include "markers.h"
#include "intern.h"
#include "testfs.h"

typedef struct {
    char *dir;
    int dfd;
} Fx;

static int setup(void **state)
{
    Fx *fx = g_new0(Fx, 1);
    fx->dir = testfs_tmpdir("ck-markers-XXXXXX");
    fx->dfd = open(fx->dir, O_RDONLY | O_DIRECTORY);
    assert_true(fx->dfd >= 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    Fx *fx = *state;
    close(fx->dfd);
    bool gone = testfs_remove(fx->dir);
    g_free(fx->dir);
    g_free(fx);
    return gone ? 0 : -1;
}

static char *P(Fx *fx, const char *rel)
{
    return g_build_filename(fx->dir, rel, NULL);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Job ids are directories with a valid name; the rest is not a job. */
static void job_dirs(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_jobs/a");
    testfs_mkdir(fx->dir, "_jobs/b.c-d_e");
    testfs_mkdir(fx->dir, "_jobs/.hidden");
    testfs_mkdir(fx->dir, "_jobs/bad name");
    testfs_put(fx->dir, "_jobs/file", "x");
    g_autofree char *ln = P(fx, "_jobs/link");
    assert_int_equal(symlink("a", ln), 0);
    g_autofree char *longname = g_strnfill(129, 'x');
    g_autofree char *lrel = g_strconcat("_jobs/", longname, NULL);
    testfs_mkdir(fx->dir, lrel);
    g_autoptr(GHashTable) names = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GPtrArray) not_jobs = g_ptr_array_new_with_free_func(g_free);
    ck_list_job_dirs(fx->dfd, "_jobs", names, not_jobs);
    assert_int_equal(g_hash_table_size(names), 2);
    assert_true(g_hash_table_contains(names, ck_intern("a")));
    assert_true(g_hash_table_contains(names, ck_intern("b.c-d_e")));
    g_ptr_array_sort(not_jobs, cmp_str);
    assert_int_equal(not_jobs->len, 5);
    assert_string_equal(not_jobs->pdata[0], "_jobs/.hidden");
    assert_string_equal(not_jobs->pdata[1], "_jobs/bad name");
    assert_string_equal(not_jobs->pdata[2], "_jobs/file");
    assert_string_equal(not_jobs->pdata[3], "_jobs/link");
    /* a missing _state: nothing, no crash */
    ck_list_job_dirs(fx->dfd, "_state", names, not_jobs);
    assert_int_equal(not_jobs->len, 5);
    /* a job directory that is a symlink is not opened */
    assert_true(ck_job_dir_open(fx->dfd, "link") < 0);
    assert_int_equal(ck_job_dir_open(fx->dfd, "missing"), -ENOENT);
    int jfd = ck_job_dir_open(fx->dfd, "a");
    assert_true(jfd >= 0);
    close(jfd);
}

/* What counts as a checkpoint: canonical chk-<N> directories with a
 * COMPLETED of any type, and chk-<N> symlinks; ascending by N. */
static void checkpoint_list(void **state)
{
    Fx *fx = *state;
    testfs_marker(fx->dir, "a", 10, "generation=1\n");
    testfs_marker(fx->dir, "a", 2, "generation=1\n");
    testfs_marker(fx->dir, "a", G_MAXUINT64, "generation=1\n");
    testfs_mkdir(fx->dir, "_jobs/a/chk-3");                   /* in progress */
    testfs_put(fx->dir, "_jobs/a/chk-03/COMPLETED", "x=1\n"); /* not canonical */
    testfs_put(fx->dir, "_jobs/a/chk-4", "a file");           /* holds no marker */
    testfs_put(fx->dir, "_jobs/a/other/COMPLETED", "x=1\n");
    testfs_mkdir(fx->dir, "_jobs/a/chk-5/COMPLETED"); /* a directory */
    g_autofree char *l6 = P(fx, "_jobs/a/chk-6");
    assert_int_equal(symlink("chk-2", l6), 0);
    testfs_mkdir(fx->dir, "_jobs/a/chk-7");
    g_autofree char *l7 = P(fx, "_jobs/a/chk-7/COMPLETED");
    assert_int_equal(symlink("/etc/passwd", l7), 0);
    int jfd = ck_job_dir_open(fx->dfd, "a");
    assert_true(jfd >= 0);
    g_autoptr(GArray) list = ck_job_marker_list(jfd);
    close(jfd);
    const uint64_t want[] = {2, 5, 6, 7, 10, G_MAXUINT64};
    assert_int_equal(list->len, G_N_ELEMENTS(want));
    for (guint i = 0; i < list->len; i++)
        assert_true(g_array_index(list, CkMarkerStamp, i).n == want[i]);
    const CkMarkerStamp *s5 = &g_array_index(list, CkMarkerStamp, 1);
    assert_true(S_ISDIR(s5->mode));
    assert_int_equal(s5->flags, 0);
    assert_int_equal(g_array_index(list, CkMarkerStamp, 2).flags, CK_STAMP_CHK_SYMLINK);
    assert_true(S_ISLNK(g_array_index(list, CkMarkerStamp, 3).mode));
    assert_true(S_ISREG(g_array_index(list, CkMarkerStamp, 0).mode));
    /* no job directory: no checkpoints */
    g_autoptr(GArray) none = ck_job_marker_list(-ENOENT);
    assert_int_equal(none->len, 0);
}

static CkRestore *restore_at(Fx *fx, int jfd, CkMarkerStamp *st, GPtrArray **unknown)
{
    g_autofree char *buf = g_malloc(CK_MARKER_MAX_BYTES + 1);
    return ck_job_marker_restore(fx->dfd, jfd, "a", st, NULL, NULL, buf, unknown);
}

/* Each checkpoint read: a regular COMPLETED parsed; anything else malformed
 * with one text, never opened; a COMPLETED gone since the listing: NULL. */
static void marker_restores(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_marker(fx->dir, "a", 1,
                  "generation=1\nparticipants=0\nstate=_state/a\nowner=x\nparticipants=0\n");
    testfs_marker(fx->dir, "a", 2, "generation=1\nparticipants=0\nstate=_state/a\nowner=x\n");
    testfs_mkdir(fx->dir, "_jobs/a/chk-3/COMPLETED");
    testfs_mkdir(fx->dir, "_jobs/a/chk-4");
    g_autofree char *f4 = P(fx, "_jobs/a/chk-4/COMPLETED");
    assert_int_equal(mkfifo(f4, 0644), 0);
    g_autofree char *l5 = P(fx, "_jobs/a/chk-5");
    assert_int_equal(symlink("chk-2", l5), 0);
    testfs_mkdir(fx->dir, "_jobs/a/chk-6");
    g_autofree char *l6 = P(fx, "_jobs/a/chk-6/COMPLETED");
    assert_int_equal(symlink("../chk-2/COMPLETED", l6), 0);
    bool dev = false;
    if (geteuid() == 0) {
        testfs_mkdir(fx->dir, "_jobs/a/chk-7");
        g_autofree char *d7 = P(fx, "_jobs/a/chk-7/COMPLETED");
        dev = mknod(d7, S_IFCHR | 0600, makedev(1, 3)) == 0;
    }
    testfs_marker(fx->dir, "a", 8, "generation=1\n");
    int jfd = ck_job_dir_open(fx->dfd, "a");
    assert_true(jfd >= 0);
    g_autoptr(GArray) list = ck_job_marker_list(jfd);
    assert_int_equal(list->len, dev ? 8 : 7);
    const char *want[] = {
        "malformed marker: line 5: duplicated key participants",
        NULL,
        "malformed marker: not a regular file (a directory)",
        "malformed marker: not a regular file (a FIFO)",
        "malformed marker: chk-5 is a symlink, not followed",
        "malformed marker: not a regular file (a symlink, not followed)",
        "malformed marker: not a regular file (a character device)",
    };
    /* chk-8 disappears between the listing and the read */
    g_autofree char *m8 = P(fx, "_jobs/a/chk-8/COMPLETED");
    assert_int_equal(unlink(m8), 0);
    for (guint i = 0; i < list->len; i++) {
        CkMarkerStamp st = g_array_index(list, CkMarkerStamp, i);
        GPtrArray *unknown = NULL;
        g_autoptr(CkRestore) r = restore_at(fx, jfd, &st, &unknown);
        if (st.n == 8) {
            assert_null(r);
            continue;
        }
        assert_non_null(r);
        assert_true(r->checkpoint == st.n);
        const char *w = want[st.n - 1];
        if (w) {
            assert_int_equal(r->cls, CK_MARKER_MALFORMED);
            assert_string_equal(r->error, w);
            assert_int_equal(unknown->len, 0); /* nothing half-parsed is kept */
            assert_int_equal(r->participants->len, 0);
        } else {
            assert_true(r->restorable);
            assert_int_equal(unknown->len, 1);
            assert_string_equal(((CkMarkerKv *)unknown->pdata[0])->key, "owner");
            assert_true(S_ISREG(st.mode));
        }
        g_ptr_array_unref(unknown);
    }
    close(jfd);
}

/* A COMPLETED changed between the listing and the read: a longer one is
 * read whole; a directory or a FIFO put in its place is malformed as not a
 * regular file, and the read does not hang.  The stamp then describes what
 * was read.  A marker whose bytes agree with the listing is read without an
 * fstat of its own: one renamed over it with the same size is parsed, and
 * keeps the listing's stamp (older than the bytes, so a rescan reads it
 * again). */
static void changed_since_listing(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/a/v2/0");
    for (int n = 1; n <= 4; n++)
        testfs_marker(fx->dir, "a", n, "generation=1\nparticipants=0\nstate=_state/a\n");
    int jfd = ck_job_dir_open(fx->dfd, "a");
    assert_true(jfd >= 0);
    g_autoptr(GArray) list = ck_job_marker_list(jfd);
    assert_int_equal(list->len, 4);
    const char *longer = "generation=2\nparticipants=0\nstate=_state/a\nowner=a longer marker\n";
    testfs_marker(fx->dir, "a", 1, longer);
    g_autofree char *m2 = P(fx, "_jobs/a/chk-2/COMPLETED");
    assert_int_equal(unlink(m2), 0);
    assert_int_equal(mkdir(m2, 0755), 0);
    g_autofree char *m3 = P(fx, "_jobs/a/chk-3/COMPLETED");
    assert_int_equal(unlink(m3), 0);
    assert_int_equal(mkfifo(m3, 0644), 0);
    /* the same size, another file (another inode) renamed over it */
    testfs_put(fx->dir, "_jobs/a/chk-4/next", "generation=2\nparticipants=0\nstate=_state/a\n");
    g_autofree char *next4 = P(fx, "_jobs/a/chk-4/next");
    g_autofree char *m4 = P(fx, "_jobs/a/chk-4/COMPLETED");
    assert_int_equal(rename(next4, m4), 0);
    struct stat now4;
    assert_int_equal(stat(m4, &now4), 0);
    const char *why[] = {NULL, "malformed marker: not a regular file (a directory)",
                         "malformed marker: not a regular file (a FIFO)", NULL};
    for (guint i = 0; i < list->len; i++) {
        CkMarkerStamp st = g_array_index(list, CkMarkerStamp, i);
        GPtrArray *unknown = NULL;
        g_autoptr(CkRestore) r = restore_at(fx, jfd, &st, &unknown);
        assert_non_null(r);
        if (why[i]) {
            assert_int_equal(r->cls, CK_MARKER_MALFORMED);
            assert_string_equal(r->error, why[i]);
            assert_false(S_ISREG(st.mode));
        } else {
            assert_true(r->restorable);
            assert_true(r->generation == 2);
        }
        if (st.n == 1)
            assert_int_equal(st.size, strlen(longer));
        if (st.n == 4) {
            assert_memory_equal(&st, &g_array_index(list, CkMarkerStamp, i), sizeof st);
            assert_true(st.ino != (uint64_t)now4.st_ino);
        }
        g_ptr_array_unref(unknown);
    }
    close(jfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(job_dirs, setup, teardown),
        cmocka_unit_test_setup_teardown(checkpoint_list, setup, teardown),
        cmocka_unit_test_setup_teardown(marker_restores, setup, teardown),
        cmocka_unit_test_setup_teardown(changed_since_listing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
