/* Memory: what the daemon holds follows what the kernel holds.  A walk
 * that stats every object of a tree of 1,000,000 (1,000 directories of 999
 * files) makes the kernel hold a reference on each, so the daemon holds a
 * node for each; once the kernel drops its caches (drop_caches), the nodes
 * go, and so do three quarters of the slots' memory of the state memfd
 * that the walk added.  In a build without AddressSanitizer, the daemon's
 * anonymous memory comes back to within a quarter of what the walk added
 * too, and at the peak it held at most 300 bytes per object, its slot
 * counted.  The figures (bytes per object at the peak, what stays) are
 * printed.  The backing directory is a tmpfs of its own: on ext4 without
 * a journal, creating a million files right after other tests deleted as
 * many makes the allocator skip every recently freed inode, minutes of
 * work that has nothing to do with the daemon.  CKPTFS_TEST_MEMORY_DIRS
 * sets the number of directories (default 1,000, or the build's
 * CKPTFS_TEST_MEMORY_DEFAULT_DIRS); below about 200, the 16,384 freed
 * node records the daemon always keeps weigh too much against the walk's
 * for the check on the state memfd. */
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
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define PER_DIR 999

/* RssAnon and RssShmem of pid, in bytes */
static void rss_of(pid_t pid, int64_t *anon, int64_t *shmem)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)pid);
    g_autofree char *text = NULL;
    assert_true(g_file_get_contents(path, &text, NULL, NULL));
    *anon = *shmem = -1;
    for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (g_str_has_prefix(l, "RssAnon:"))
            *anon = g_ascii_strtoll(l + 8, NULL, 10) * 1024;
        else if (g_str_has_prefix(l, "RssShmem:"))
            *shmem = g_ascii_strtoll(l + 9, NULL, 10) * 1024;
    }
    assert_true(*anon >= 0 && *shmem >= 0);
}

static long make_tree(const char *root, int dirs)
{
    long made = 0;
    for (int d = 0; d < dirs; d++) {
        g_autofree char *dir = g_strdup_printf("%s/d%04d", root, d);
        assert_int_equal(mkdir(dir, 0755), 0);
        int dfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        assert_true(dfd >= 0);
        for (int i = 0; i < PER_DIR; i++) {
            char name[32];
            g_snprintf(name, sizeof name, "f%04d", i);
            assert_int_equal(mknodat(dfd, name, S_IFREG | 0644, 0), 0);
        }
        close(dfd);
        made += 1 + PER_DIR;
    }
    return made;
}

/* Looks up every object below root through the mount: the kernel keeps an
 * inode (so a node of the daemon) for each. */
static long walk(const char *root)
{
    DIR *top = opendir(root);
    assert_non_null(top);
    long seen = 0;
    struct dirent *de;
    while ((de = readdir(top))) {
        if (de->d_name[0] == '.')
            continue;
        struct stat st;
        assert_int_equal(fstatat(dirfd(top), de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(st.st_mode));
        seen++;
        int fd = openat(dirfd(top), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        DIR *d = fdopendir(fd);
        assert_non_null(d);
        struct dirent *fe;
        while ((fe = readdir(d))) {
            if (fe->d_name[0] == '.')
                continue;
            assert_int_equal(fstatat(dirfd(d), fe->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
            assert_true(S_ISREG(st.st_mode));
            seen++;
        }
        closedir(d);
    }
    closedir(top);
    return seen;
}

static int setup_tmpfs(void **state)
{
    Mount *m = mount_new();
    int rc = mount_backing_tmpfs(m, "nr_inodes=4m");
    if (rc != 0) {
        fprintf(stderr, "tmpfs: %s\n", g_strerror(-rc));
        mount_free(m);
        return -1;
    }
    *state = m;
    return 0;
}

static int teardown_tmpfs(void **state)
{
    Mount *m = *state;
    int rc = m->pid ? mount_stop(m) : 0;
    mount_free(m);
    return rc;
}

static void test_memory_follows_the_kernel(void **state)
{
    Mount *m = *state;
    const char *env = g_getenv("CKPTFS_TEST_MEMORY_DIRS");
    if (!env) /* the build's default (meson.build) */
        env = g_getenv("CKPTFS_TEST_MEMORY_DEFAULT_DIRS");
    int dirs = env ? atoi(env) : 1000;
    assert_true(dirs > 0);
    long objects = make_tree(m->bwork, dirs);
    assert_int_equal(mount_start(m, NULL), 0);
    pid_t pid = mount_daemon_pid(m);
    assert_true(pid > 0);

    /* before: what the kernel held of the tree at mount is gone */
    int64_t base = mount_forget_down_to(m, 16, 300);
    assert_true(base >= 0);
    int64_t anon0, shm0;
    rss_of(pid, &anon0, &shm0);

    assert_int_equal(walk(m->work), objects);
    int64_t peak = mount_metric(m, "ckptfs_nodes");
    int64_t anon1, shm1;
    rss_of(pid, &anon1, &shm1);
    /* the kernel holds what was looked up: (nearly) one node each */
    assert_true(peak - base >= objects * 9 / 10);

    int64_t after = mount_forget_down_to(m, base, 300);
    if (after > base)
        fprintf(stderr,
                "nodes: %" G_GINT64_FORMAT " after the drop, %" G_GINT64_FORMAT
                " before the walk\n",
                after, base);
    assert_true(after >= 0 && after <= base);
    int64_t anon2, shm2;
    rss_of(pid, &anon2, &shm2);
    int64_t held = peak - base;
    print_message("memory: %ld objects walked, %" G_GINT64_FORMAT " nodes at the peak; "
                  "per node %" G_GINT64_FORMAT " B anonymous + %" G_GINT64_FORMAT
                  " B state; anonymous %.1f -> %.1f -> %.1f MB, state %.1f -> %.1f -> %.1f MB\n",
                  objects, held, (anon1 - anon0) / held, (shm1 - shm0) / held, anon0 / 1e6,
                  anon1 / 1e6, anon2 / 1e6, shm0 / 1e6, shm1 / 1e6, shm2 / 1e6);
    /* the slots of the state memfd: their records went with the nodes but
     * for the newest (file handles), and their pages with them */
    assert_true(shm2 - shm0 <= (shm1 - shm0) / 4);
#ifdef __SANITIZE_ADDRESS__
    /* AddressSanitizer's allocator keeps what is freed in its own size
     * classes: what comes back is the release build's figure, and
     * tools/test.sh runs this test there too */
    print_message("memory: given back not checked under AddressSanitizer\n");
#else
    /* at most 300 bytes per object the kernel holds, the node's slot in
     * the state memfd counted */
    assert_true((anon1 - anon0 + shm1 - shm0) / held <= 300);
    /* given back: at least three quarters of what the walk added */
    assert_true(anon2 - anon0 <= (anon1 - anon0) / 4);
#endif
    assert_int_equal(mount_stop(m), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_memory_follows_the_kernel, setup_tmpfs,
                                        teardown_tmpfs),
    };
    return cmocka_run_group_tests_name("mount/memory", tests, NULL, NULL);
}
