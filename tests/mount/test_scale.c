/* Scale: the daemon holds no descriptor per known inode.  A walk
 * with stat of 100,000 files through a mount whose daemon runs with
 * RLIMIT_NOFILE at 256 must see every file, while the kernel holds a
 * reference on all of them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define DIRS    100
#define PER_DIR 1000
#define NOFILE  256

static void test_walk_100k_files_under_low_nofile(void **state)
{
    (void)state;
    Mount *m = mount_new();
    /* a tmpfs: 100,000 creates on ext4 after another variant's removals are slow */
    assert_int_equal(mount_backing_tmpfs(m, "nr_inodes=256k"), 0);
    for (int d = 0; d < DIRS; d++) {
        g_autofree char *dir = g_strdup_printf("%s/d%03d", m->bwork, d);
        assert_int_equal(mkdir(dir, 0755), 0);
        int dfd = open(dir, O_DIRECTORY | O_RDONLY);
        assert_true(dfd >= 0);
        for (int i = 0; i < PER_DIR; i++) {
            char name[32];
            g_snprintf(name, sizeof name, "f%04d", i);
            int fd = openat(dfd, name, O_WRONLY | O_CREAT, 0644);
            assert_true(fd >= 0);
            close(fd);
        }
        close(dfd);
    }
    m->nofile = NOFILE;
    assert_int_equal(mount_start(m, NULL), 0);

    /* stat every file by path, keeping a descriptor-free walk */
    long seen = 0;
    for (int d = 0; d < DIRS; d++) {
        g_autofree char *dir = g_strdup_printf("%s/d%03d", m->work, d);
        DIR *dp = opendir(dir);
        assert_non_null(dp);
        struct dirent *de;
        int dfd = dirfd(dp);
        while ((de = readdir(dp))) {
            if (de->d_name[0] == '.')
                continue;
            struct stat st;
            assert_int_equal(fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
            assert_true(S_ISREG(st.st_mode));
            seen++;
        }
        closedir(dp);
    }
    assert_int_equal(seen, (long)DIRS * PER_DIR);
    /* the kernel still holds (most of) them: far more nodes than descriptors */
    int64_t nodes = mount_metric(m, "ckptfs_nodes");
    int fds = mount_daemon_fds(m);
    fprintf(stderr, "nodes %lld, daemon fds %d\n", (long long)nodes, fds);
    assert_true(nodes > NOFILE);
    assert_true(fds > 0 && fds < NOFILE);
    /* and files still open fine */
    g_autofree char *some = g_strdup_printf("%s/d%03d/f%04d", m->work, DIRS - 1, PER_DIR - 1);
    put_file(some, "still works");
    g_autofree char *text = get_file(some);
    assert_string_equal(text, "still works");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_100k_files_under_low_nofile),
    };
    return cmocka_run_group_tests_name("mount/scale", tests, NULL, NULL);
}
