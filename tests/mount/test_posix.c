/* POSIX semantics through a ckptfs mount: each test checks what the kernel
 * returned through the mount and what the backing directory holds. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

static void test_rename_over_open_file(void **state)
{
    Mount *m = *state;
    g_autofree char *a = mp(m, "a"), *b = mp(m, "b");
    put_file(a, "old");
    int fd = open(a, O_RDONLY);
    assert_true(fd >= 0);
    put_file(b, "new");
    assert_int_equal(rename(b, a), 0);
    char buf[16] = {0};
    assert_int_equal(pread(fd, buf, sizeof buf, 0), 3);
    assert_string_equal(buf, "old");
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_nlink, 0);
    close(fd);
    g_autofree char *now = get_file(a);
    assert_string_equal(now, "new");
    g_autofree char *ba = bp(m, "a"), *bb = bp(m, "b");
    g_autofree char *backing = get_file(ba);
    assert_string_equal(backing, "new");
    assert_int_equal(access(bb, F_OK), -1);
    assert_int_equal(access(b, F_OK), -1);
}

static void test_hard_links_nlink_on_every_name(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "f"), *g = mp(m, "g"), *h = mp(m, "h");
    put_file(f, "data");
    assert_int_equal(link(f, g), 0);
    assert_int_equal(link(g, h), 0);
    struct stat sf, sg, sh, sb;
    assert_int_equal(stat(f, &sf), 0);
    assert_int_equal(stat(g, &sg), 0);
    assert_int_equal(stat(h, &sh), 0);
    assert_int_equal(sf.st_nlink, 3);
    assert_int_equal(sg.st_nlink, 3);
    assert_int_equal(sh.st_nlink, 3);
    assert_int_equal(sf.st_ino, sg.st_ino);
    assert_int_equal(sf.st_ino, sh.st_ino);
    g_autofree char *bf = bp(m, "f");
    assert_int_equal(stat(bf, &sb), 0);
    assert_int_equal(sb.st_nlink, 3);
    assert_int_equal(sb.st_ino, sf.st_ino);

    assert_int_equal(unlink(g), 0);
    assert_int_equal(stat(f, &sf), 0);
    assert_int_equal(stat(h, &sh), 0);
    assert_int_equal(sf.st_nlink, 2);
    assert_int_equal(sh.st_nlink, 2);
    put_file(h, "changed"); /* through one name, seen through the other */
    g_autofree char *via_f = get_file(f);
    assert_string_equal(via_f, "changed");
    assert_int_equal(stat(bf, &sb), 0);
    assert_int_equal(sb.st_nlink, 2);
}

static void test_symlinks(void **state)
{
    Mount *m = *state;
    g_autofree char *l = mp(m, "l"), *bl = bp(m, "l");
    assert_int_equal(symlink("target/x", l), 0);
    char buf[PATH_MAX];
    ssize_t n = readlink(l, buf, sizeof buf - 1);
    assert_int_equal(n, 8);
    buf[n] = 0;
    assert_string_equal(buf, "target/x");
    n = readlink(bl, buf, sizeof buf - 1);
    assert_int_equal(n, 8);
    struct stat st;
    assert_int_equal(lstat(l, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(st.st_size, 8);

    /* Symlinks made in the backing dir: the kernel resolves them on the
     * client side exactly as on the native dir; the daemon serves only
     * the link itself. */
    g_autofree char *bout = bp(m, "to-passwd"), *out = mp(m, "to-passwd");
    assert_int_equal(symlink("/etc/passwd", bout), 0);
    n = readlink(out, buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = 0;
    assert_string_equal(buf, "/etc/passwd");
    g_autofree char *host = get_file("/etc/passwd"), *through = get_file(out);
    assert_string_equal(host, through);

    g_autofree char *bsub = bp(m, "sub"), *bsubx = bp(m, "sub/x"), *bdl = bp(m, "dirlink");
    assert_int_equal(mkdir(bsub, 0755), 0);
    put_file(bsubx, "in sub");
    assert_int_equal(symlink("sub", bdl), 0);
    g_autofree char *dlx = mp(m, "dirlink/x"), *dl = mp(m, "dirlink");
    g_autofree char *text = get_file(dlx);
    assert_string_equal(text, "in sub");
    assert_int_equal(lstat(dl, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(dl, &st), 0);
    assert_true(S_ISDIR(st.st_mode));

    /* a link climbing out of the backing dir resolves, on both sides, relative
     * to where the link is seen: through the mount it stays in the mount */
    g_autofree char *bup = bp(m, "up"), *up = mp(m, "up/_state/t/sub/x");
    assert_int_equal(symlink("../..", bup), 0);
    g_autofree char *up_text = get_file(up);
    assert_string_equal(up_text, "in sub");
    g_autofree char *upviews = mp(m, "up/_views/.metrics");
    assert_int_equal(access(upviews, R_OK), 0);
}

static void test_unlink_while_open(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "f"), *bf = bp(m, "f");
    int fd = open(f, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    assert_int_equal(unlink(f), 0);
    assert_int_equal(access(bf, F_OK), -1);
    assert_int_equal(access(f, F_OK), -1);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_nlink, 0);
    assert_int_equal(write(fd, "def", 3), 3);
    char buf[8] = {0};
    assert_int_equal(pread(fd, buf, sizeof buf, 0), 6);
    assert_string_equal(buf, "abcdef");
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 6);
    assert_int_equal(close(fd), 0);
}

static void test_append_from_two_fds(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "log"), *bf = bp(m, "log");
    int a = open(f, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int b = open(f, O_WRONLY | O_APPEND);
    assert_true(a >= 0 && b >= 0);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(write(a, "A\n", 2), 2);
        assert_int_equal(write(b, "B\n", 2), 2);
    }
    close(a);
    close(b);
    g_autofree char *text = get_file(bf);
    assert_int_equal(strlen(text), 400);
    for (int i = 0; i < 200; i++)
        assert_int_equal(text[2 * i], i % 2 ? 'B' : 'A');
    struct stat st;
    assert_int_equal(stat(f, &st), 0);
    assert_int_equal(st.st_size, 400);
}

static void test_truncate_and_ftruncate(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "t"), *bf = bp(m, "t");
    char big[10000];
    memset(big, 'x', sizeof big);
    int fd = open(f, O_RDWR | O_CREAT, 0644);
    assert_int_equal(write(fd, big, sizeof big), (ssize_t)sizeof big);
    assert_int_equal(truncate(f, 100), 0);
    struct stat st;
    assert_int_equal(stat(f, &st), 0);
    assert_int_equal(st.st_size, 100);
    assert_int_equal(stat(bf, &st), 0);
    assert_int_equal(st.st_size, 100);
    assert_int_equal(ftruncate(fd, 5000), 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 5000);
    char buf[5000];
    assert_int_equal(pread(fd, buf, sizeof buf, 0), 5000);
    assert_int_equal(buf[99], 'x');
    for (int i = 100; i < 5000; i++)
        assert_int_equal(buf[i], 0);
    close(fd);
    assert_int_equal(stat(bf, &st), 0);
    assert_int_equal(st.st_size, 5000);
    /* O_TRUNC through open */
    fd = open(f, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(stat(bf, &st), 0);
    assert_int_equal(st.st_size, 0);
}

static void test_sparse_seek_data_hole(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "sparse"), *bf = bp(m, "sparse");
    int fd = open(f, O_RDWR | O_CREAT, 0644);
    const off_t far = 16 << 20;
    assert_int_equal(pwrite(fd, "x", 1, 0), 1);
    assert_int_equal(pwrite(fd, "y", 1, far), 1);
    assert_int_equal(fsync(fd), 0);
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    assert_true(hole > 0 && hole < far);
    off_t data = lseek(fd, hole, SEEK_DATA);
    assert_true(data > hole && data <= far);
    errno = 0;
    assert_int_equal(lseek(fd, far + 1, SEEK_DATA), -1);
    assert_int_equal(errno, ENXIO);
    close(fd);
    struct stat st;
    assert_int_equal(stat(bf, &st), 0);
    assert_int_equal(st.st_size, far + 1);
    assert_true(st.st_blocks * 512 < far / 4);
}

static void test_mmap_shared_write(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "mm"), *bf = bp(m, "mm");
    char init[8192];
    memset(init, 'a', sizeof init);
    int fd = open(f, O_RDWR | O_CREAT, 0644);
    assert_int_equal(write(fd, init, sizeof init), (ssize_t)sizeof init);
    char *p = mmap(NULL, sizeof init, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    assert_int_equal(p[100], 'a');
    memcpy(p + 4096, "mapped", 6);
    assert_int_equal(msync(p, sizeof init, MS_SYNC), 0);
    munmap(p, sizeof init);
    close(fd);
    g_autofree char *text = NULL;
    gsize len = 0;
    assert_true(g_file_get_contents(bf, &text, &len, NULL));
    assert_int_equal(len, sizeof init);
    assert_memory_equal(text + 4096, "mapped", 6);
    assert_int_equal(text[4095], 'a');
}

static void test_xattrs(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "x"), *bf = bp(m, "x");
    put_file(f, "");
    assert_int_equal(setxattr(f, "user.k", "value", 5, 0), 0);
    char buf[64];
    assert_int_equal(getxattr(f, "user.k", buf, sizeof buf), 5);
    assert_memory_equal(buf, "value", 5);
    assert_int_equal(getxattr(f, "user.k", NULL, 0), 5);
    assert_int_equal(getxattr(bf, "user.k", buf, sizeof buf), 5);
    ssize_t n = listxattr(f, buf, sizeof buf);
    assert_true(n > 0);
    assert_non_null(memmem(buf, (size_t)n, "user.k", 7));
    errno = 0;
    assert_int_equal(setxattr(f, "user.k", "v", 1, XATTR_CREATE), -1);
    assert_int_equal(errno, EEXIST);
    errno = 0;
    assert_int_equal(getxattr(f, "user.k", buf, 2), -1);
    assert_int_equal(errno, ERANGE);
    assert_int_equal(removexattr(f, "user.k"), 0);
    errno = 0;
    assert_int_equal(getxattr(f, "user.k", buf, sizeof buf), -1);
    assert_int_equal(errno, ENODATA);
    errno = 0;
    assert_int_equal(getxattr(bf, "user.k", buf, sizeof buf), -1);
    assert_int_equal(errno, ENODATA);
    /* on a symlink, as on the backing fs: user.* is refused */
    g_autofree char *l = mp(m, "lnk"), *bl = bp(m, "lnk");
    assert_int_equal(symlink("x", l), 0);
    errno = 0;
    int native = lsetxattr(bl, "user.k", "v", 1, 0) == 0 ? 0 : errno;
    errno = 0;
    int through = lsetxattr(l, "user.k", "v", 1, 0) == 0 ? 0 : errno;
    assert_int_equal(through, native);
}

static void test_utimensat_now_and_omit(void **state)
{
    Mount *m = *state;
    g_autofree char *f = mp(m, "u"), *bf = bp(m, "u");
    put_file(f, "u");
    struct timespec set[2] = {{1000, 5}, {2000, 7}};
    assert_int_equal(utimensat(AT_FDCWD, f, set, 0), 0);
    struct stat st, bst;
    assert_int_equal(stat(f, &st), 0);
    assert_int_equal(st.st_atim.tv_sec, 1000);
    assert_int_equal(st.st_mtim.tv_sec, 2000);
    assert_int_equal(st.st_mtim.tv_nsec, 7);
    struct timespec omit[2] = {{3000, 0}, {0, UTIME_OMIT}};
    assert_int_equal(utimensat(AT_FDCWD, f, omit, 0), 0);
    assert_int_equal(stat(f, &st), 0);
    assert_int_equal(st.st_atim.tv_sec, 3000);
    assert_int_equal(st.st_mtim.tv_sec, 2000);
    time_t before = time(NULL);
    struct timespec now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    assert_int_equal(utimensat(AT_FDCWD, f, now, 0), 0);
    assert_int_equal(stat(f, &st), 0);
    assert_int_equal(st.st_atim.tv_sec, 3000);
    assert_true(st.st_mtim.tv_sec >= before - 1);
    assert_int_equal(stat(bf, &bst), 0);
    assert_int_equal(bst.st_atim.tv_sec, 3000);
    assert_int_equal(bst.st_mtim.tv_sec, st.st_mtim.tv_sec);
    /* on a symlink itself */
    g_autofree char *l = mp(m, "ul"), *bl = bp(m, "ul");
    assert_int_equal(symlink("u", l), 0);
    assert_int_equal(utimensat(AT_FDCWD, l, set, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(lstat(bl, &bst), 0);
    assert_int_equal(bst.st_mtim.tv_sec, 2000);
    assert_int_equal(stat(bf, &bst), 0);
    assert_int_equal(bst.st_atim.tv_sec, 3000);
}

static void test_name_too_long(void **state)
{
    Mount *m = *state;
    char name[257];
    memset(name, 'n', 256);
    name[256] = 0;
    g_autofree char *f = mp(m, name);
    errno = 0;
    assert_int_equal(open(f, O_CREAT | O_WRONLY, 0644), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    name[255] = 0;
    g_autofree char *ok = mp(m, name), *bok = bp(m, name);
    int fd = open(ok, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(access(bok, F_OK), 0);
}

static void test_rename_noreplace_and_exchange(void **state)
{
    Mount *m = *state;
    g_autofree char *a = mp(m, "a"), *b = mp(m, "b"), *ba = bp(m, "a"), *bb = bp(m, "b");
    put_file(a, "A");
    put_file(b, "B");
    errno = 0;
    assert_int_equal(renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_NOREPLACE), -1);
    assert_int_equal(errno, EEXIST);
    g_autofree char *ta = get_file(ba), *tb = get_file(bb);
    assert_string_equal(ta, "A");
    assert_string_equal(tb, "B");
    assert_int_equal(renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE), 0);
    g_autofree char *xa = get_file(a), *xb = get_file(b);
    assert_string_equal(xa, "B");
    assert_string_equal(xb, "A");
    g_autofree char *bxa = get_file(ba), *bxb = get_file(bb);
    assert_string_equal(bxa, "B");
    assert_string_equal(bxb, "A");
    g_autofree char *c = mp(m, "c");
    assert_int_equal(renameat2(AT_FDCWD, a, AT_FDCWD, c, RENAME_NOREPLACE), 0);
    assert_int_equal(access(ba, F_OK), -1);
    /* a whiteout as ext4 makes it (test_edges.c has the details) */
    assert_int_equal(renameat2(AT_FDCWD, c, AT_FDCWD, a, RENAME_WHITEOUT), 0);
}

static void test_fsync_reaches_backing(void **state)
{
    Mount *m = *state;
    int64_t fsync0 = mount_metric(m, "ckptfs_ops_total{op=\"fsync\"}");
    int64_t dir0 = mount_metric(m, "ckptfs_ops_total{op=\"fsyncdir\"}");
    assert_true(fsync0 >= 0 && dir0 >= 0);
    g_autofree char *f = mp(m, "s");
    int fd = open(f, O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "x", 1), 1);
    assert_int_equal(fsync(fd), 0);
    assert_int_equal(fdatasync(fd), 0);
    close(fd);
    int dfd = open(m->work, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    assert_int_equal(fsync(dfd), 0);
    assert_int_equal(fdatasync(dfd), 0);
    close(dfd);
    assert_int_equal(mount_metric(m, "ckptfs_ops_total{op=\"fsync\"}"), fsync0 + 2);
    assert_int_equal(mount_metric(m, "ckptfs_ops_total{op=\"fsyncdir\"}"), dir0 + 2);
}

static void test_replaced_behind_the_mount(void **state)
{
    Mount *m = *state;
    g_autofree char *a = mp(m, "a"), *ba = bp(m, "a"), *btmp = bp(m, "tmp");
    put_file(a, "one");
    struct stat before;
    assert_int_equal(stat(a, &before), 0);
    g_autofree char *t1 = get_file(a);
    assert_string_equal(t1, "one");
    /* replace the name directly in the backing dir: the kernel still caches
     * the old node; the daemon answers ESTALE and the kernel looks again */
    put_file(btmp, "two");
    assert_int_equal(rename(btmp, ba), 0);
    g_autofree char *t2 = get_file(a);
    assert_string_equal(t2, "two");
    struct stat after;
    assert_int_equal(stat(a, &after), 0);
    assert_int_not_equal(before.st_ino, after.st_ino);
    /* and a name deleted behind the mount is ENOENT, never a stale success */
    assert_int_equal(unlink(ba), 0);
    errno = 0;
    assert_int_equal(open(a, O_RDONLY), -1);
    assert_int_equal(errno, ENOENT);
    errno = 0;
    assert_int_equal(stat(a, &after), -1);
    assert_int_equal(errno, ENOENT);
}

static int64_t wait_nodes_at_most(Mount *m, int64_t limit)
{
    int64_t n = -1;
    for (int i = 0; i < 100; i++) {
        n = mount_metric(m, "ckptfs_nodes");
        if (n <= limit)
            return n;
        g_usleep(100 * 1000);
    }
    return n;
}

static void test_readdir_lookup_accounting(void **state)
{
    Mount *m = *state;
    g_autofree char *bdir = bp(m, "many"), *dir = mp(m, "many");
    assert_int_equal(mkdir(bdir, 0755), 0);
    for (int i = 0; i < 3000; i++) {
        g_autofree char *name = g_strdup_printf("%s/file-with-a-longish-name-%05d", bdir, i);
        put_file(name, "");
    }
    kernel_drop_caches();
    int64_t base = wait_nodes_at_most(m, 10);
    assert_true(base >= 0 && base <= 10);

    /* ls -l: readdirplus (and lookups); every entry the kernel took is a reference */
    const char *ls_l[] = {"ls", "-l", dir, NULL};
    assert_int_equal(run_cmd(ls_l, NULL), 0);
    int64_t listed = mount_metric(m, "ckptfs_nodes");
    assert_true(listed >= base + 3000);
    assert_true(mount_metric(m, "ckptfs_ops_total{op=\"readdirplus\"}") > 0);
    kernel_drop_caches();
    assert_true(wait_nodes_at_most(m, base) <= base);

    /* plain readdir (ls -f does not stat) then stat a few */
    const char *ls_f[] = {"ls", "-f", dir, NULL};
    assert_int_equal(run_cmd(ls_f, NULL), 0);
    const char *find[] = {"find", dir, "-name", "*-0001*", NULL};
    assert_int_equal(run_cmd(find, NULL), 0);
    kernel_drop_caches();
    assert_true(wait_nodes_at_most(m, base) <= base);

    /* no forget ever exceeded what the daemon had handed out */
    g_autofree char *log = NULL;
    g_file_get_contents(m->log, &log, NULL, NULL);
    assert_null(log ? strstr(log, "forget of") : NULL);
}

static void test_views_are_read_only(void **state)
{
    Mount *m = *state;
    g_autofree char *metrics = g_build_filename(m->mnt, "_views", ".metrics", NULL);
    g_autofree char *text = get_file(metrics);
    assert_non_null(strstr(text, "# TYPE ckptfs_ops_total counter"));
    assert_non_null(strstr(text, "\nckptfs_nodes{mount=\""));
    errno = 0;
    assert_int_equal(open(metrics, O_WRONLY), -1);
    assert_int_equal(errno, EROFS);
    g_autofree char *newdir = g_build_filename(m->mnt, "_views", "x", NULL);
    errno = 0;
    assert_int_equal(mkdir(newdir, 0755), -1);
    assert_int_equal(errno, EROFS);
    errno = 0;
    assert_int_equal(unlink(metrics), -1);
    assert_int_equal(errno, EROFS);
    /* and the views dir is not in the backing dir */
    g_autofree char *bviews = g_build_filename(m->backing, "_views", NULL);
    assert_int_equal(access(bviews, F_OK), -1);
    struct stat st;
    g_autofree char *views = g_build_filename(m->mnt, "_views", NULL);
    assert_int_equal(stat(views, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_true((st.st_ino >> 63) == 1);
}

static void test_statfs_is_backing(void **state)
{
    Mount *m = *state;
    struct statvfs a, b;
    assert_int_equal(statvfs(m->work, &a), 0);
    assert_int_equal(statvfs(m->bwork, &b), 0);
    assert_int_equal(a.f_blocks, b.f_blocks);
    assert_int_equal(a.f_bsize, b.f_bsize);
    assert_int_equal(a.f_namemax, b.f_namemax);
}

static void test_copy_file_range_and_fallocate(void **state)
{
    Mount *m = *state;
    g_autofree char *src = mp(m, "src"), *dst = mp(m, "dst"), *bdst = bp(m, "dst");
    put_file(src, "0123456789");
    int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT, 0644);
    assert_true(in >= 0 && out >= 0);
    loff_t oi = 2, oo = 0;
    assert_int_equal(copy_file_range(in, &oi, out, &oo, 5, 0), 5);
    assert_int_equal(fallocate(out, 0, 0, 65536), 0);
    close(in);
    close(out);
    struct stat st;
    assert_int_equal(stat(bdst, &st), 0);
    assert_int_equal(st.st_size, 65536);
    g_autofree char *text = get_file(bdst);
    assert_memory_equal(text, "23456", 5);
}

static bool listing_has(const char *dir, const char *name)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    assert_non_null(d);
    /* read to the end: only a complete listing is kept by the kernel */
    bool found = false;
    const char *n;
    while ((n = g_dir_read_name(d)))
        if (strcmp(n, name) == 0)
            found = true;
    return found;
}

/* The kernel opens directories without asking: a walk of 20 directories,
 * twice, costs no OPENDIR or RELEASEDIR (the first OPENDIR of the mount is
 * answered ENOSYS), and the second walk no READDIR either; an fsync of a
 * directory still reaches the backing one. */
static void test_directories_open_without_requests(void **state)
{
    Mount *m = *state;
    g_autofree char *top = mp(m, "walk");
    assert_int_equal(mkdir(top, 0755), 0);
    for (int i = 0; i < 20; i++) {
        g_autofree char *d = g_strdup_printf("%s/d%d", top, i);
        assert_int_equal(mkdir(d, 0755), 0);
        g_autofree char *f = g_strdup_printf("%s/f", d);
        put_file(f, "x");
    }
    assert_true(listing_has(top, "d3"));
    int64_t readdirs = mount_metric(m, "ckptfs_ops_total{op=\"readdir\"}") +
                       mount_metric(m, "ckptfs_ops_total{op=\"readdirplus\"}");
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 20; i++) {
            g_autofree char *d = g_strdup_printf("%s/d%d", top, i);
            assert_true(listing_has(d, "f"));
        }
    assert_true(mount_metric(m, "ckptfs_ops_total{op=\"opendir\"}") <= 1);
    assert_int_equal(mount_metric(m, "ckptfs_ops_total{op=\"releasedir\"}"), 0);
    int64_t walked = mount_metric(m, "ckptfs_ops_total{op=\"readdir\"}") +
                     mount_metric(m, "ckptfs_ops_total{op=\"readdirplus\"}") - readdirs;
    assert_true(walked <= 2 * 20); /* the first pass: a listing and its end, per directory */
    /* the files were made through the mount, so they were listed by name
     * alone (no attributes): a stat of one still gives the right ones */
    g_autofree char *f5 = g_strdup_printf("%s/d5/f", top);
    struct stat st;
    assert_int_equal(stat(f5, &st), 0);
    assert_true(S_ISREG(st.st_mode) && st.st_size == 1);
    int fd = open(top, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(fsync(fd), 0);
    close(fd);
    assert_true(mount_metric(m, "ckptfs_ops_total{op=\"fsyncdir\"}") >= 1);
}

/* Whether a listing of dir shows (or, !want, no longer shows) name within
 * `within` seconds. */
static bool listing_within(const char *dir, const char *name, bool want, double within)
{
    gint64 end = g_get_monotonic_time() + (gint64)(within * G_USEC_PER_SEC);
    for (;;) {
        if (listing_has(dir, name) == want)
            return true;
        if (g_get_monotonic_time() > end)
            return false;
        g_usleep(50 * 1000);
    }
}

/* The kernel keeps a listing across opens (it opens directories without
 * asking the daemon): a change through the mount shows at once, one behind
 * it once the directory's attributes expired (1 s, ckptfs(8) CACHING AND
 * CONSISTENCY). */
static void test_listing_sees_changes_behind_the_mount(void **state)
{
    Mount *m = *state;
    g_autofree char *bdir = bp(m, "ls"), *dir = mp(m, "ls");
    assert_int_equal(mkdir(bdir, 0755), 0);
    for (int i = 0; i < 50; i++) {
        g_autofree char *f = g_strdup_printf("%s/f%d", bdir, i);
        put_file(f, "");
    }
    assert_true(listing_has(dir, "f7"));
    assert_true(listing_has(dir, "f7")); /* now served from the kernel's copy */
    g_autofree char *behind = g_build_filename(bdir, "behind", NULL);
    put_file(behind, "");
    assert_true(listing_within(dir, "behind", true, 3.0));
    assert_int_equal(unlink(behind), 0);
    assert_true(listing_within(dir, "behind", false, 3.0));
    g_autofree char *through = g_build_filename(dir, "through", NULL);
    put_file(through, "");
    assert_true(listing_has(dir, "through"));
    g_autofree char *f7 = g_build_filename(dir, "f7", NULL);
    assert_int_equal(unlink(f7), 0);
    assert_false(listing_has(dir, "f7"));
}

/* Confinement: the kernel still caches "trap" as absent when a symlink
 * pointing out of the backing dir appears there behind the mount; the
 * create then reaches the daemon, which must not follow the link. */
static void test_create_never_follows_a_backing_symlink(void **state)
{
    Mount *m = *state;
    g_autofree char *outside = g_build_filename(m->base, "outside", NULL);
    g_autofree char *victim = g_build_filename(outside, "victim", NULL);
    assert_int_equal(mkdir(outside, 0755), 0);
    g_autofree char *trap = mp(m, "trap"), *btrap = bp(m, "trap");
    struct stat st;
    errno = 0;
    assert_int_equal(stat(trap, &st), -1); /* a negative entry in the kernel */
    assert_int_equal(errno, ENOENT);
    assert_int_equal(symlink(victim, btrap), 0);
    int fd = open(trap, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
        /* the kernel looked again and followed the link itself, as it would
         * natively: then the daemon took no part in it */
        close(fd);
        fprintf(stderr, "trap: the kernel followed the link itself\n");
        assert_int_equal(mount_metric(m, "ckptfs_ops_total{op=\"create\"}"), 0);
    } else {
        fprintf(stderr, "trap: the daemon refused to follow (%s)\n", g_strerror(errno));
        assert_int_equal(errno, ELOOP);
        assert_int_equal(access(victim, F_OK), -1);
    }
    assert_int_equal(lstat(btrap, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

/* The same semantics where the backing fs gives no file handles: each
 * cached node keeps one O_PATH descriptor instead (and says so at start). */
static int setup_no_handles(void **state)
{
    Mount *m = mount_new();
    mount_expect_log(m, "gives no usable file handles");
    const char *args[] = {"-o", "no_handles", NULL};
    if (mount_start(m, args) != 0) {
        mount_free(m);
        return -1;
    }
    *state = m;
    return 0;
}

static void test_no_handles_warns(void **state)
{
    Mount *m = *state;
    g_autofree char *log = get_file(m->log);
    assert_non_null(strstr(log, "gives no usable file handles"));
    g_autofree char *f = mp(m, "f");
    put_file(f, "x");
    g_autofree char *text = get_file(f);
    assert_string_equal(text, "x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, mount_setup, mount_teardown)
        T(test_rename_over_open_file),
        T(test_hard_links_nlink_on_every_name),
        T(test_symlinks),
        T(test_unlink_while_open),
        T(test_append_from_two_fds),
        T(test_truncate_and_ftruncate),
        T(test_sparse_seek_data_hole),
        T(test_mmap_shared_write),
        T(test_xattrs),
        T(test_utimensat_now_and_omit),
        T(test_name_too_long),
        T(test_rename_noreplace_and_exchange),
        T(test_fsync_reaches_backing),
        T(test_replaced_behind_the_mount),
        T(test_readdir_lookup_accounting),
        T(test_views_are_read_only),
        T(test_statfs_is_backing),
        T(test_copy_file_range_and_fallocate),
        T(test_listing_sees_changes_behind_the_mount),
        T(test_directories_open_without_requests),
        T(test_create_never_follows_a_backing_symlink),
    };
    const struct CMUnitTest fallback[] = {
#define F(f) cmocka_unit_test_setup_teardown(f, setup_no_handles, mount_teardown)
        F(test_no_handles_warns),
        F(test_rename_over_open_file),
        F(test_hard_links_nlink_on_every_name),
        F(test_unlink_while_open),
        F(test_xattrs),
        F(test_utimensat_now_and_omit),
        F(test_rename_noreplace_and_exchange),
        F(test_replaced_behind_the_mount),
        F(test_readdir_lookup_accounting),
    };
    int failed = cmocka_run_group_tests_name("mount/posix", tests, NULL, NULL);
    return failed + cmocka_run_group_tests_name("mount/posix-no-handles", fallback, NULL, NULL);
}
