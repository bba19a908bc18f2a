/* What ckptctl prune is made of, called directly: the re-check of one entry
 * of the unused list (core/follow.c, ck_catalog_unused_reason) after a
 * marker was written between the list and the removal, with inotify and
 * with the cheap checks alone; and the removal of one tree
 * (tools/ckptctl-prune.c): no symlink followed, no other mount entered,
 * nothing outside the tree touched, bytes counted once per inode. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "ckptctl.h"
#include "follow.h"
#include "testfs.h"

typedef struct {
    char *tmp;
    char *dir; /* tmp/ck: the checkpoint directory */
    CkCatalogOptions opts;
} Fx;

static int setup(void **state)
{
    Fx *fx = g_new0(Fx, 1);
    fx->tmp = testfs_tmpdir("ck-prune-XXXXXX");
    fx->dir = g_build_filename(fx->tmp, "ck", NULL);
    fx->opts.views_name = "_views";
    testfs_mkdir(fx->dir, "");
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    Fx *fx = *state;
    testfs_remove(fx->tmp);
    g_free(fx->dir);
    g_free(fx->tmp);
    g_free(fx);
    return 0;
}

/* Job a in its own root (v0 left behind, markers of v1 and v2), job b in
 * its own, a legacy job in v1, a v2 and a bare 7 nobody reads. */
static void build(Fx *fx)
{
    testfs_put(fx->dir, "_state/a/v0/0/x", "old");
    testfs_put(fx->dir, "_state/a/v1/0/x", "one");
    testfs_put(fx->dir, "_state/a/v2/0/x", "two");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", 2, "generation=2\nparticipants=0\nstate=_state/a\n");
    testfs_put(fx->dir, "_state/b/v4/0/x", "b");
    testfs_marker(fx->dir, "b", 4, "generation=4\nparticipants=0\nstate=_state/b\n");
    testfs_put(fx->dir, "v1/0/x", "legacy");
    testfs_marker(fx->dir, "leg", 1, "generation=1\nparticipants=0\n");
    testfs_put(fx->dir, "v2/0/x", "nobody");
    testfs_put(fx->dir, "7/x", "older layout, nobody");
}

static CkCatalog *open_cat(Fx *fx)
{
    g_autoptr(GError) err = NULL;
    CkCatalog *c = ck_catalog_open(fx->dir, &fx->opts, &err);
    assert_non_null(c);
    return c;
}

static const CkUnused *find(GPtrArray *un, const char *path)
{
    for (guint i = 0; i < un->len; i++)
        if (strcmp(((CkUnused *)un->pdata[i])->path, path) == 0)
            return un->pdata[i];
    return NULL;
}

/* The single-path rule agrees with the list, entry by entry, and says no
 * to what the list leaves out, naming what keeps it. */
static void reason_agrees_with_list(void **state)
{
    Fx *fx = *state;
    build(fx);
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(GPtrArray) un = ck_catalog_unused(c);
    assert_int_equal(un->len, 3);
    assert_non_null(find(un, "_state/a/v0"));
    assert_non_null(find(un, "v2"));
    assert_non_null(find(un, "7"));
    for (guint i = 0; i < un->len; i++) {
        const CkUnused *u = un->pdata[i];
        int err = -1;
        const char *r = ck_catalog_unused_reason(c, u->path, &err, NULL);
        assert_non_null(r);
        assert_string_equal(r, u->reason);
        assert_int_equal(err, 0);
    }
    g_autofree char *why = NULL;
    int err = -1;
    assert_null(ck_catalog_unused_reason(c, "v1", &err, &why));
    assert_int_equal(err, 0);
    assert_string_equal(why, "read by _jobs/leg/chk-1/COMPLETED");
    g_clear_pointer(&why, g_free);
    assert_null(ck_catalog_unused_reason(c, "_state/a/v1", &err, &why));
    assert_string_equal(why, "not older than generation 1 of _jobs/a/chk-1/COMPLETED");
    g_clear_pointer(&why, g_free);
    /* not a shape the report lists */
    assert_null(ck_catalog_unused_reason(c, "_state/a", &err, &why));
    assert_string_equal(why, "not a v<G>, <S> or _state/<J>/v<G> directory");
    g_clear_pointer(&why, g_free);
    assert_null(ck_catalog_unused_reason(c, "_jobs", &err, &why));
    g_clear_pointer(&why, g_free);
    assert_null(ck_catalog_unused_reason(c, "v9", &err, &why));
    assert_int_equal(err, -ENOENT);
}

/* Markers written after the list, each of a kind that reads an entry:
 * the owner's own (an older generation again), another job's (foreign
 * root), a checkpoint that was in progress when the list was made, a new
 * job's legacy marker.  The re-check of each says needed; what nothing
 * reads stays unused. */
static void marker_written_after_list(Fx *fx, unsigned flags)
{
    build(fx);
    testfs_mkdir(fx->dir, "_jobs/leg/chk-2"); /* in progress */
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkCatalogFollow) f = ck_catalog_follow_new(c, flags);
    if (flags & CK_FOLLOW_POLL)
        assert_non_null(ck_catalog_follow_polls(f));
    else
        assert_null(ck_catalog_follow_polls(f)); /* a local temporary directory */
    g_autoptr(GPtrArray) un = ck_catalog_unused(c);
    assert_int_equal(un->len, 3);

    /* b, which kept to its own root, now restores from a's v0 */
    testfs_marker(fx->dir, "b", 5, "generation=0\nparticipants=0\nstate=_state/a\n");
    const char *reason = NULL;
    g_autofree char *why = NULL;
    assert_int_equal(ck_catalog_unused_recheck(f, "_state/a/v0", &reason, &why), CK_RECHECK_NEEDED);
    assert_null(reason);
    assert_string_equal(why, "read by _jobs/b/chk-5/COMPLETED");
    g_clear_pointer(&why, g_free);
    /* what no marker reads is still unused */
    assert_int_equal(ck_catalog_unused_recheck(f, "v2", &reason, NULL), CK_RECHECK_UNUSED);
    assert_string_equal(reason, "legacy-unread");

    /* the legacy checkpoint in progress completes, in v2 */
    testfs_put(fx->dir, "_jobs/leg/chk-2/COMPLETED", "generation=2\nparticipants=0\n");
    assert_int_equal(ck_catalog_unused_recheck(f, "v2", &reason, &why), CK_RECHECK_NEEDED);
    assert_string_equal(why, "read by _jobs/leg/chk-2/COMPLETED");
    g_clear_pointer(&why, g_free);

    /* a new job in the older layout: no v9, so subtask 7 reads 7/ */
    assert_int_equal(ck_catalog_unused_recheck(f, "7", &reason, NULL), CK_RECHECK_UNUSED);
    testfs_marker(fx->dir, "newjob", 1, "generation=9\nparticipants=7\n");
    assert_int_equal(ck_catalog_unused_recheck(f, "7", &reason, &why), CK_RECHECK_NEEDED);
    assert_string_equal(why, "read by _jobs/newjob/chk-1/COMPLETED");
}

static void recheck_inotify(void **state)
{
    marker_written_after_list(*state, 0);
}

static void recheck_cheap_checks_only(void **state)
{
    marker_written_after_list(*state, CK_FOLLOW_POLL);
}

/* The owner of a generation is re-read in full: its marker replaced in a
 * checkpoint that was complete (no directory changes then) is seen. */
static void recheck_rereads_the_owner(void **state)
{
    Fx *fx = *state;
    build(fx);
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkCatalogFollow) f = ck_catalog_follow_new(c, 0);
    g_autoptr(GPtrArray) un = ck_catalog_unused(c);
    assert_non_null(find(un, "_state/a/v0"));
    testfs_marker(fx->dir, "a", 2, "generation=0\nparticipants=0\nstate=_state/a\n");
    const char *reason = NULL;
    g_autofree char *why = NULL;
    assert_int_equal(ck_catalog_unused_recheck(f, "_state/a/v0", &reason, &why), CK_RECHECK_NEEDED);
    assert_string_equal(why, "not older than generation 0 of _jobs/a/chk-2/COMPLETED");
}

/* A marker written between the catalog's read and the follower's watches
 * is seen all the same. */
static void follower_sees_what_came_before_it(void **state)
{
    Fx *fx = *state;
    build(fx);
    g_autoptr(CkCatalog) c = open_cat(fx);
    testfs_marker(fx->dir, "b", 5, "generation=0\nparticipants=0\nstate=_state/a\n");
    g_autoptr(CkCatalogFollow) f = ck_catalog_follow_new(c, 0);
    g_autoptr(GPtrArray) un = ck_catalog_unused(c);
    assert_null(find(un, "_state/a/v0"));
    assert_non_null(find(un, "v2"));
}

/* What is no longer there, or no longer a directory reached through no
 * symlink, is never judged unused. */
static void recheck_gone_or_replaced(void **state)
{
    Fx *fx = *state;
    build(fx);
    g_autofree char *outside = g_build_filename(fx->tmp, "outside", NULL);
    testfs_put(outside, "v0/0/x", "not in DIR");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkCatalogFollow) f = ck_catalog_follow_new(c, 0);
    const char *reason = NULL;
    g_autofree char *why = NULL;
    g_autofree char *v2 = g_build_filename(fx->dir, "v2", NULL);
    assert_true(testfs_remove(v2));
    assert_int_equal(ck_catalog_unused_recheck(f, "v2", &reason, NULL), CK_RECHECK_GONE);
    assert_int_equal(symlink(outside, v2), 0);
    assert_int_equal(ck_catalog_unused_recheck(f, "v2", &reason, &why), CK_RECHECK_NOT_DIR);
    assert_string_equal(why, "a symlink (not followed)");
    g_clear_pointer(&why, g_free);
    g_autofree char *seven = g_build_filename(fx->dir, "7", NULL);
    assert_true(testfs_remove(seven));
    testfs_put(fx->dir, "7", "a file now");
    assert_int_equal(ck_catalog_unused_recheck(f, "7", &reason, NULL), CK_RECHECK_NOT_DIR);
    /* _state/a swapped for a symlink to a directory holding a v0 */
    g_autofree char *sa = g_build_filename(fx->dir, "_state/a", NULL);
    g_autofree char *moved = g_build_filename(fx->tmp, "a-moved", NULL);
    assert_int_equal(rename(sa, moved), 0);
    assert_int_equal(symlink(outside, sa), 0);
    assert_int_equal(ck_catalog_unused_recheck(f, "_state/a/v0", &reason, &why),
                     CK_RECHECK_NOT_DIR);
    g_clear_pointer(&why, g_free);
    g_autofree char *kept = g_build_filename(outside, "v0/0/x", NULL);
    assert_true(g_file_test(kept, G_FILE_TEST_IS_REGULAR));
}

/* ---- the removal of one tree ---- */

static int open_dir(const char *p)
{
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static void remove_tree_follows_no_symlink(void **state)
{
    Fx *fx = *state;
    g_autofree char *outside = g_build_filename(fx->tmp, "outside", NULL);
    testfs_put(outside, "dir/file", "outside DIR");
    testfs_put(outside, "file", "outside DIR too");
    testfs_put(fx->dir, "_state/a/v0/0/data", "0123456789");
    testfs_put(fx->dir, "_state/a/v1/0/data", "kept");
    testfs_put(fx->dir, "_state/a/v0/0/deep/er/f", "x");
    g_autofree char *sub = g_build_filename(fx->dir, "_state/a/v0/0", NULL);
    g_autofree char *odir = g_build_filename(outside, "dir", NULL);
    g_autofree char *ofile = g_build_filename(outside, "file", NULL);
    g_autofree char *l1 = g_build_filename(sub, "to-outside-dir", NULL);
    g_autofree char *l2 = g_build_filename(sub, "to-outside-file", NULL);
    g_autofree char *l3 = g_build_filename(sub, "to-kept", NULL);
    g_autofree char *kept = g_build_filename(fx->dir, "_state/a/v1", NULL);
    assert_int_equal(symlink(odir, l1), 0);
    assert_int_equal(symlink(ofile, l2), 0);
    assert_int_equal(symlink(kept, l3), 0);
    g_autofree char *fifo = g_build_filename(sub, "fifo", NULL);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* one file, two names inside the tree, and one with a name outside it */
    g_autofree char *data = g_build_filename(sub, "data", NULL);
    g_autofree char *data2 = g_build_filename(sub, "deep/data2", NULL);
    assert_int_equal(link(data, data2), 0);
    g_autofree char *f = g_build_filename(sub, "deep/er/f", NULL);
    g_autofree char *flink = g_build_filename(outside, "f-link", NULL);
    assert_int_equal(link(f, flink), 0);
    /* a directory nobody may list: root removes it all the same */
    g_autofree char *er = g_build_filename(sub, "deep/er", NULL);
    assert_int_equal(chmod(er, 0), 0);

    int dfd = open_dir(fx->dir);
    guint64 freed = 0;
    g_autofree char *where = NULL;
    assert_int_equal(ckptctl_remove_tree(dfd, "_state/a/v0", &freed, &where), 0);
    assert_null(where);
    g_autofree char *v0 = g_build_filename(fx->dir, "_state/a/v0", NULL);
    struct stat sb;
    assert_int_equal(lstat(v0, &sb), -1);
    /* every target survives, so does the file still linked outside */
    g_autofree char *a = g_build_filename(outside, "dir/file", NULL);
    g_autofree char *kd = g_build_filename(kept, "0/data", NULL);
    assert_true(g_file_test(a, G_FILE_TEST_IS_REGULAR));
    assert_true(g_file_test(ofile, G_FILE_TEST_IS_REGULAR));
    assert_true(g_file_test(kd, G_FILE_TEST_IS_REGULAR));
    assert_int_equal(stat(flink, &sb), 0);
    assert_int_equal(sb.st_nlink, 1);
    /* freed: the directories, the data file once, the FIFO and symlinks
     * (no blocks on most file systems), not f (its other name is outside) */
    assert_true(freed > 0);

    /* a path through a symlink is refused, and nothing is removed */
    g_autofree char *sb_link = g_build_filename(fx->dir, "_state/b", NULL);
    assert_int_equal(symlink(outside, sb_link), 0);
    g_clear_pointer(&where, g_free);
    assert_int_equal(ckptctl_remove_tree(dfd, "_state/b/dir", &freed, &where), -ELOOP);
    assert_true(g_file_test(a, G_FILE_TEST_IS_REGULAR));
    g_clear_pointer(&where, g_free);
    /* the entry itself a symlink: not followed, not removed */
    g_autofree char *v9 = g_build_filename(fx->dir, "v9", NULL);
    assert_int_equal(symlink(odir, v9), 0);
    assert_int_equal(ckptctl_remove_tree(dfd, "v9", &freed, &where), -ELOOP);
    assert_string_equal(where, "v9");
    assert_int_equal(lstat(v9, &sb), 0);
    assert_true(g_file_test(a, G_FILE_TEST_IS_REGULAR));
    close(dfd);
}

/* A file system mounted below an entry is never entered (nor a bind mount
 * of the same one): its files survive and the failure names it.  In a
 * mount namespace of this process's own, so no mount outlives the test. */
static void remove_tree_enters_no_mount(void **state)
{
    Fx *fx = *state;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        print_message("no mount namespace (%s): skipped\n", g_strerror(errno));
        skip();
    }
    testfs_put(fx->dir, "v3/0/x", "legacy");
    testfs_mkdir(fx->dir, "v3/0/mnt");
    testfs_mkdir(fx->dir, "v4/bind");
    g_autofree char *mnt = g_build_filename(fx->dir, "v3/0/mnt", NULL);
    assert_int_equal(mount("tmpfs", mnt, "tmpfs", 0, "size=1m"), 0);
    testfs_put(mnt, "inside", "on the other file system");
    g_autofree char *bind = g_build_filename(fx->dir, "v4/bind", NULL);
    g_autofree char *target = g_build_filename(fx->tmp, "bound", NULL);
    testfs_put(target, "inside", "bound here");
    assert_int_equal(mount(target, bind, NULL, MS_BIND, NULL), 0);

    int dfd = open_dir(fx->dir);
    guint64 freed = 0;
    g_autofree char *where = NULL;
    assert_int_equal(ckptctl_remove_tree(dfd, "v3", &freed, &where), -EXDEV);
    assert_string_equal(where, "v3/0/mnt");
    g_autofree char *in = g_build_filename(mnt, "inside", NULL);
    assert_true(g_file_test(in, G_FILE_TEST_IS_REGULAR));
    g_autofree char *x = g_build_filename(fx->dir, "v3/0/x", NULL);
    assert_false(g_file_test(x, G_FILE_TEST_EXISTS)); /* the rest went */
    g_clear_pointer(&where, g_free);
    assert_int_equal(ckptctl_remove_tree(dfd, "v4", &freed, &where), -EXDEV);
    assert_string_equal(where, "v4/bind");
    g_autofree char *bin = g_build_filename(target, "inside", NULL);
    assert_true(g_file_test(bin, G_FILE_TEST_IS_REGULAR));
    close(dfd);
    assert_int_equal(umount2(mnt, MNT_DETACH), 0);
    assert_int_equal(umount2(bind, MNT_DETACH), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(reason_agrees_with_list, setup, teardown),
        cmocka_unit_test_setup_teardown(recheck_inotify, setup, teardown),
        cmocka_unit_test_setup_teardown(recheck_cheap_checks_only, setup, teardown),
        cmocka_unit_test_setup_teardown(recheck_rereads_the_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(follower_sees_what_came_before_it, setup, teardown),
        cmocka_unit_test_setup_teardown(recheck_gone_or_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(remove_tree_follows_no_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(remove_tree_enters_no_mount, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
