/* POSIX edges that outside suites (xfstests, fsstress, pjdfstest) found,
 * each checked against what ext4 does: O_DIRECT writes of any size, setuid
 * cleared by an O_DIRECT write, fstat of an open directory replaced by
 * rename, extended attributes of symlinks, syncfs under -o writeback after
 * unlinks, renameat2(RENAME_WHITEOUT), O_TMPFILE (linked by AT_EMPTY_PATH
 * in a recycled inode number too), a shared mapping of an
 * O_DIRECT file, a buffered read after an asynchronous O_DIRECT write
 * while others read the file, the atime of a noatime mount, the options that are
 * refused, and mount -o remount.  Runs in both variants
 * (passthrough and not); unprivileged callers are nobody/nogroup on a
 * mount with allow_other. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/aio_abi.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define NOBODY  65534
#define NOGROUP 65534

static int setup_allow_other(void **state)
{
    Mount *m = mount_new();
    const char *args[] = {"-o", "allow_other", NULL};
    if (mount_start(m, args) != 0) {
        mount_free(m);
        return -1;
    }
    /* the job directory is nobody's, as a worker's would be its own */
    chmod(m->base, 0755);
    chmod(m->backing, 0755);
    g_autofree char *st = g_build_filename(m->backing, "_state", NULL);
    chmod(st, 0755);
    if (chown(m->bwork, NOBODY, NOGROUP) != 0) {
        mount_free(m);
        return -1;
    }
    *state = m;
    return 0;
}

/* Runs fn(arg) in a child that dropped to nobody; returns its exit code. */
static int as_nobody(int (*fn)(const char *), const char *arg)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(NOGROUP, NOGROUP, NOGROUP) < 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) < 0)
            _exit(99);
        _exit(fn(arg));
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void *aligned(size_t len, int byte)
{
    void *buf = NULL;
    assert_int_equal(posix_memalign(&buf, 4096, len), 0);
    memset(buf, byte, len);
    return buf;
}

/* O_DIRECT writes of every size from a page to 1 MiB, at page offsets:
 * each one succeeds and lands in the backing file (the daemon used to
 * write them O_DIRECT from an unaligned buffer: EINVAL). */
static void test_o_direct_sizes(void **state)
{
    Mount *m = *state;
    g_autofree char *p = mp(m, "odirect");
    int fd = open(p, O_RDWR | O_CREAT | O_DIRECT, 0644);
    assert_true(fd >= 0);
    off_t off = 0;
    for (size_t len = 4096; len <= (1 << 20); len *= 2) {
        void *buf = aligned(len, (int)('a' + (len / 4096) % 26));
        assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
        memset(buf, 0, len);
        assert_int_equal(pread(fd, buf, len, off), (ssize_t)len);
        assert_int_equal(((char *)buf)[len - 1], (char)('a' + (len / 4096) % 26));
        free(buf);
        off += (off_t)len;
    }
    assert_int_equal(close(fd), 0);
    struct stat st;
    g_autofree char *b = bp(m, "odirect");
    assert_int_equal(stat(b, &st), 0);
    assert_int_equal(st.st_size, off);
}

static int write_direct(const char *path)
{
    int fd = open(path, O_WRONLY | O_DIRECT);
    if (fd < 0)
        return 10;
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, 4096))
        return 11;
    memset(buf, 'x', 4096);
    int rc = pwrite(fd, buf, 4096, 0) == 4096 ? 0 : 12;
    close(fd);
    free(buf);
    return rc;
}

static int create_setid(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return 20;
    close(fd);
    return chmod(path, strstr(path, "gx") ? 06754 : 06644) == 0 ? 0 : 21;
}

/* Readers that read the whole file with buffered reads until told to stop:
 * what they cache while a direct write runs is the old bytes.  Each pauses
 * 100 us between reads, which leaves the CPU to the writer and the daemon
 * on a loaded machine (two readers that never slept made a round 30 ms
 * there, and the test minutes long) and still caught a daemon that did not
 * drop the pages within 20 rounds. */
typedef struct {
    const char *path;
    size_t size;
    gint stop;
} Readers;

static gpointer read_all_until_stopped(gpointer p)
{
    Readers *r = p;
    g_autofree char *buf = g_malloc(r->size);
    while (!g_atomic_int_get(&r->stop)) {
        int fd = open(r->path, O_RDONLY);
        if (fd < 0)
            continue;
        if (pread(fd, buf, r->size, 0) < 0)
            g_atomic_int_set(&r->stop, 2);
        close(fd);
        g_usleep(100);
    }
    return NULL;
}

/* After an asynchronous O_DIRECT write (AIO) completes, a buffered read
 * that opens the file gets what it wrote, while two other readers read the
 * file all along (xfstests generic/451).  The kernel drops its cached pages
 * of the range before a direct write, not after an asynchronous one: the
 * daemon must, when it serves the write. */
static void test_o_direct_aio_then_buffered_read(void **state)
{
    Mount *m = *state;
    enum { SIZE = 640 * 1024, ROUNDS = 500 };
    g_autofree char *p = mp(m, "aio-dio.dat");
    char *pattern[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(posix_memalign((void **)&pattern[i], 4096, SIZE), 0);
        memset(pattern[i], i ? 0xaa : 0x55, SIZE);
    }
    g_autofree char *got = g_malloc(SIZE);
    int fd = open(p, O_CREAT | O_RDWR | O_DIRECT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, pattern[1], SIZE, 0), SIZE);
    close(fd);
    Readers r = {.path = p, .size = SIZE};
    GThread *readers[2];
    for (int i = 0; i < 2; i++)
        readers[i] = g_thread_new("reader", read_all_until_stopped, &r);
    aio_context_t ctx = 0;
    assert_int_equal(syscall(SYS_io_setup, 1, &ctx), 0);
    int stale = 0, round = 0;
    for (; round < ROUNDS && !stale; round++) {
        const char *want = pattern[round % 2];
        fd = open(p, O_RDWR | O_DIRECT);
        assert_true(fd >= 0);
        struct iocb cb = {.aio_fildes = (uint32_t)fd,
                          .aio_lio_opcode = IOCB_CMD_PWRITE,
                          .aio_buf = (uint64_t)(uintptr_t)want,
                          .aio_nbytes = SIZE};
        struct iocb *cbs[1] = {&cb};
        assert_int_equal(syscall(SYS_io_submit, ctx, 1, cbs), 1);
        struct io_event ev;
        assert_int_equal(syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL), 1);
        assert_int_equal(ev.res, SIZE);
        close(fd);
        fd = open(p, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, got, SIZE, 0), SIZE);
        close(fd);
        stale = memcmp(got, want, SIZE) != 0;
    }
    g_atomic_int_set(&r.stop, 1);
    for (int i = 0; i < 2; i++)
        g_thread_join(readers[i]);
    syscall(SYS_io_destroy, ctx);
    if (stale)
        print_message("round %d: the buffered read gave the bytes the write replaced\n", round);
    assert_false(stale);
    assert_int_equal(g_atomic_int_get(&r.stop), 1); /* no reader failed */
    for (int i = 0; i < 2; i++)
        free(pattern[i]);
}

/* An O_DIRECT write by the owner clears setuid, and setgid when the group
 * may execute (xfstests generic/355), as a buffered write does. */
static void test_o_direct_clears_setuid(void **state)
{
    Mount *m = *state;
    static const struct {
        const char *name;
        mode_t want;
    } cases[] = {{"suid", 02644}, {"suid-gx", 0754}};
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *p = mp(m, cases[i].name);
        assert_int_equal(as_nobody(create_setid, p), 0);
        assert_int_equal(as_nobody(write_direct, p), 0);
        struct stat st;
        g_autofree char *b = bp(m, cases[i].name);
        assert_int_equal(stat(b, &st), 0);
        assert_int_equal(st.st_mode & 07777, cases[i].want);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, cases[i].want);
    }
}

/* fstat of an open directory that a rename replaced: st_nlink 0, as on
 * ext4 (xfstests generic/035), not ESTALE. */
static void test_fstat_replaced_dir(void **state)
{
    Mount *m = *state;
    g_autofree char *a = mp(m, "dir-a");
    g_autofree char *b = mp(m, "dir-b");
    assert_int_equal(mkdir(a, 0755), 0);
    assert_int_equal(mkdir(b, 0755), 0);
    int fd = open(b, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(rename(a, b), 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_nlink, 0);
    close(fd);
}

/* Extended attributes of a symlink itself: trusted.* as root works and
 * lands on the backing symlink; user.* is EPERM, as ext4 answers. */
static void test_symlink_xattrs(void **state)
{
    Mount *m = *state;
    g_autofree char *l = mp(m, "link");
    assert_int_equal(symlink("target-that-does-not-exist", l), 0);
    assert_int_equal(lsetxattr(l, "trusted.ck", "v1", 2, 0), 0);
    char buf[16] = {0};
    assert_int_equal(lgetxattr(l, "trusted.ck", buf, sizeof buf), 2);
    assert_memory_equal(buf, "v1", 2);
    g_autofree char *bl = bp(m, "link");
    memset(buf, 0, sizeof buf);
    assert_int_equal(lgetxattr(bl, "trusted.ck", buf, sizeof buf), 2);
    char list[256];
    ssize_t n = llistxattr(l, list, sizeof list);
    assert_true(n > 0 && memmem(list, (size_t)n, "trusted.ck", 11) != NULL);
    assert_int_equal(lremovexattr(l, "trusted.ck"), 0);
    errno = 0;
    assert_int_equal(lgetxattr(bl, "trusted.ck", buf, sizeof buf), -1);
    assert_int_equal(errno, ENODATA);
    errno = 0;
    assert_int_equal(lsetxattr(l, "user.ck", "v", 1, 0), -1);
    assert_int_equal(errno, EPERM);
}

/* -o writeback: the kernel flushes the times of files unlinked or renamed
 * over since; syncfs must not report an error for them. */
static void test_writeback_syncfs(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "writeback", NULL};
    assert_int_equal(mount_start(m, args), 0);
    int dfd = open(m->work, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    for (int i = 0; i < 40; i++) {
        g_autofree char *name = g_strdup_printf("wb-%d", i);
        g_autofree char *other = g_strdup_printf("wb-other-%d", i);
        g_autofree char *p = mp(m, name);
        g_autofree char *o = mp(m, other);
        put_file(p, "data written through the writeback cache");
        put_file(o, "replacement");
        /* a reader keeps the inode (not among the files open for writing,
         * so the kernel's SETATTR of its times comes without a handle) */
        int rfd = open(p, O_RDONLY);
        assert_true(rfd >= 0);
        int wfd = open(p, O_WRONLY);
        assert_int_equal(write(wfd, "more", 4), 4);
        close(wfd);
        if (i % 2)
            assert_int_equal(unlink(p), 0);
        else
            assert_int_equal(rename(o, p), 0);
        assert_int_equal(syncfs(dfd), 0);
        close(rfd);
    }
    close(dfd);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static int whiteout_as_user(const char *dir)
{
    g_autofree char *a = g_build_filename(dir, "wo-user-a", NULL);
    g_autofree char *b = g_build_filename(dir, "wo-user-b", NULL);
    int fd = open(a, O_WRONLY | O_CREAT, 0644);
    if (fd < 0)
        return 30;
    close(fd);
    return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_WHITEOUT) == 0 ? 0 : 31;
}

/* renameat2(RENAME_WHITEOUT) moves the file and leaves a whiteout (a 0/0
 * character device) at the old name, made as the caller: Linux lets any
 * user make one (since 5.8), and it is the caller's, as on ext4. */
static void test_rename_whiteout(void **state)
{
    Mount *m = *state;
    g_autofree char *a = mp(m, "wo-a");
    g_autofree char *b = mp(m, "wo-b");
    put_file(a, "moved");
    assert_int_equal(renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_WHITEOUT), 0);
    g_autofree char *got = get_file(b);
    assert_string_equal(got, "moved");
    struct stat st;
    g_autofree char *ba = bp(m, "wo-a");
    assert_int_equal(lstat(ba, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(st.st_rdev, makedev(0, 0));
    assert_int_equal(as_nobody(whiteout_as_user, m->work), 0);
    g_autofree char *bu = bp(m, "wo-user-a");
    assert_int_equal(lstat(bu, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(st.st_uid, NOBODY);
}

/* O_TMPFILE: an unnamed file in the directory, written, then given a name
 * with linkat; refused where a create would be. */
static void test_tmpfile(void **state)
{
    Mount *m = *state;
    int fd = open(m->work, O_TMPFILE | O_RDWR, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "tmpfile data", 12), 12);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_nlink, 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    char proc[64];
    g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    g_autofree char *named = mp(m, "was-tmp");
    assert_int_equal(linkat(AT_FDCWD, proc, AT_FDCWD, named, AT_SYMLINK_FOLLOW), 0);
    close(fd);
    g_autofree char *b = bp(m, "was-tmp");
    g_autofree char *got = get_file(b);
    assert_string_equal(got, "tmpfile data");

    /* the structure namespace and the views take no unnamed file either */
    errno = 0;
    assert_true(open(m->mnt, O_TMPFILE | O_RDWR, 0600) < 0);
    assert_int_equal(errno, EACCES);
    g_autofree char *views = g_build_filename(m->mnt, "_views", NULL);
    errno = 0;
    assert_true(open(views, O_TMPFILE | O_RDWR, 0600) < 0);
    assert_true(errno == EROFS || errno == EACCES);

    /* an unnamed file often gets the inode number of a file just unlinked,
     * whose node the kernel has not forgotten yet: it is a new node all the
     * same, and linkat(AT_EMPTY_PATH) names it (xfstests 697 failed one in
     * ten of these with ESTALE) */
    for (int i = 0; i < 300; i++) {
        g_autofree char *gone = mp(m, "gone");
        g_autofree char *kept = mp(m, "kept");
        put_file(gone, "");
        assert_int_equal(unlink(gone), 0);
        int t = open(m->work, O_TMPFILE | O_RDWR, 0644);
        assert_true(t >= 0);
        if (linkat(t, "", AT_FDCWD, kept, AT_EMPTY_PATH) != 0)
            fail_msg("round %d: linkat(AT_EMPTY_PATH): %s", i, g_strerror(errno));
        close(t);
        assert_int_equal(unlink(kept), 0);
    }
}

/* A shared writable mapping of a file opened O_DIRECT (xfstests 091, 263):
 * the mapping works and its bytes reach the backing file. */
static void test_o_direct_mmap(void **state)
{
    Mount *m = *state;
    g_autofree char *p = mp(m, "odmap");
    void *buf = aligned(8192, 'o');
    int fd = open(p, O_RDWR | O_CREAT | O_DIRECT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, buf, 8192, 0), 8192);
    free(buf);
    char *map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(map[100], 'o');
    memcpy(map + 4096, "via mmap", 8);
    assert_int_equal(msync(map, 8192, MS_SYNC), 0);
    munmap(map, 8192);
    close(fd);
    g_autofree char *b = bp(m, "odmap");
    int bfd = open(b, O_RDONLY);
    char got[9] = {0};
    assert_int_equal(pread(bfd, got, 8, 4096), 8);
    close(bfd);
    assert_string_equal(got, "via mmap");
}

/* The mount root is the structure namespace: not even root changes its
 * mode or owner (a write outside every job's namespace). */
static void test_root_is_structure(void **state)
{
    Mount *m = *state;
    errno = 0;
    assert_int_equal(chmod(m->mnt, 0700), -1);
    assert_int_equal(errno, EACCES);
}

/* -o no_default_permissions is refused with one line, not mounted. */
static void test_no_default_permissions_refused(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "allow_other,no_default_permissions", NULL};
    assert_int_not_equal(mount_start(m, args), 0);
    g_autofree char *log = get_file(m->log);
    assert_non_null(strstr(log, "no_default_permissions is not supported"));
    mount_free(m);
}

/* A read through the mount of a file whose atime is older than its mtime:
 * the atime of the backing file after it (relatime would move it). */
static time_t atime_after_read(Mount *m)
{
    g_autofree char *b = bp(m, "atime.dat");
    put_file(b, "read me");
    struct timespec ts[2] = {{946684800, 0}, {0, UTIME_NOW}}; /* atime 2000-01-01 */
    assert_int_equal(utimensat(AT_FDCWD, b, ts, 0), 0);
    g_autofree char *p = mp(m, "atime.dat");
    g_autofree char *text = get_file(p);
    assert_string_equal(text, "read me");
    g_autofree char *dir = mp(m, "");
    GDir *d = g_dir_open(dir, 0, NULL); /* and a listing of its directory */
    assert_non_null(d);
    while (g_dir_read_name(d))
        ;
    g_dir_close(d);
    struct stat st;
    assert_int_equal(stat(b, &st), 0);
    return st.st_atim.tv_sec;
}

/* A mapped read (what exec does) through the mount of the same kind of
 * file: the backing file's atime after it. */
static time_t atime_after_mapped_read(Mount *m)
{
    g_autofree char *b = bp(m, "mapped.dat");
    put_file(b, "mapped");
    struct timespec ts[2] = {{946684800, 0}, {0, UTIME_NOW}};
    assert_int_equal(utimensat(AT_FDCWD, b, ts, 0), 0);
    g_autofree char *p = mp(m, "mapped.dat");
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    char *map = mmap(NULL, 6, PROT_READ, MAP_PRIVATE, fd, 0);
    assert_true(map != MAP_FAILED);
    assert_memory_equal(map, "mapped", 6);
    munmap(map, 6);
    close(fd);
    struct stat st;
    assert_int_equal(stat(b, &st), 0);
    return st.st_atim.tv_sec;
}

/* On a noatime mount reads through it leave atimes alone, in both data
 * paths: listings and reads the daemon serves, and reads the kernel makes
 * of the backing file itself (passthrough, a mapped file), since the
 * daemon opens backing files through a copy of their mount that has the
 * FUSE mount's atime rule; without noatime, relatime moves an atime older
 * than the mtime, as natively. */
static void test_noatime(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    assert_true(atime_after_read(m) > 946684800);
    assert_true(atime_after_mapped_read(m) > 946684800);
    assert_int_equal(mount_stop(m), 0);
    const char *args[] = {"-o", "noatime", NULL};
    assert_int_equal(mount_start(m, args), 0);
    assert_int_equal(atime_after_read(m), 946684800);
    assert_int_equal(atime_after_mapped_read(m), 946684800);
    g_autofree char *bdir = bp(m, "");
    struct stat st;
    struct timespec old[2] = {{946684800, 0}, {0, UTIME_NOW}};
    assert_int_equal(utimensat(AT_FDCWD, bdir, old, 0), 0);
    g_autofree char *dir = mp(m, "");
    GDir *d = g_dir_open(dir, 0, NULL);
    assert_non_null(d);
    while (g_dir_read_name(d))
        ;
    g_dir_close(d);
    assert_int_equal(stat(bdir, &st), 0);
    assert_int_equal(st.st_atim.tv_sec, 946684800);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* mount -o remount,... through the mount helper (as mount(8) runs it for a
 * fuse.ckptfs line, here named "BIN#BACKING" so the build's binary runs):
 * the live mount's flags change, the same daemon goes on serving, a
 * read-only mount refuses every change with EROFS and leaves the backing
 * directory alone, nosuid stays, and a caller without CAP_SYS_ADMIN is
 * told why. */
static int remount(Mount *m, const char *opts)
{
    g_autofree char *src = g_strdup_printf("%s#%s", g_getenv("CKPTFS_BIN"), m->backing);
    const char *argv[] = {"mount", "-t", "fuse", "-o", opts, src, m->mnt, NULL};
    g_autofree char *out = NULL;
    int st = run_cmd(argv, &out);
    if (st != 0)
        print_message("mount -o %s: %s\n", opts, out ? out : "");
    return st;
}

/* As the caller: ckptfs run as the helper runs it to remount mnt rw. */
static int remount_rw(const char *mnt)
{
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(g_getenv("CKPTFS_BIN"), "ckptfs", "none", mnt, "-o", "remount,rw", (char *)NULL);
    return 98;
}

/* The backing atime after a read through the mount, read again (for up to
 * 5 s) until the atime was kept (kept) or moved (!kept): the daemon follows
 * a remount's atime rule once it saw the mount table change. */
static time_t atime_once_followed(Mount *m, bool kept)
{
    time_t a = 0;
    for (int i = 0; i < 100; i++) {
        a = atime_after_read(m);
        if ((a == 946684800) == kept)
            break;
        g_usleep(50000);
    }
    return a;
}

static unsigned long mount_flags(Mount *m)
{
    struct statvfs sv;
    assert_int_equal(statvfs(m->mnt, &sv), 0);
    return sv.f_flag;
}

static void test_remount(void **state)
{
    Mount *m = *state;
    pid_t daemon = mount_daemon_pid(m);
    g_autofree char *f = mp(m, "f");
    g_autofree char *g = mp(m, "g");
    g_autofree char *d = mp(m, "d");
    g_autofree char *bg = bp(m, "g");
    put_file(f, "kept");
    assert_true(mount_flags(m) & ST_NOSUID);

    /* a file open for writing keeps it read-write */
    int w = open(f, O_WRONLY);
    assert_true(w >= 0);
    assert_int_not_equal(remount(m, "remount,ro"), 0);
    assert_false(mount_flags(m) & ST_RDONLY);
    close(w);

    assert_int_equal(remount(m, "remount,ro"), 0);
    assert_true(mount_flags(m) & ST_RDONLY);
    assert_true(mount_flags(m) & ST_NOSUID); /* the helper's "suid" does not loosen it */
    assert_errno(open(g, O_CREAT | O_WRONLY, 0644), EROFS);
    assert_errno(open(f, O_WRONLY), EROFS);
    assert_errno(mkdir(d, 0755), EROFS);
    assert_errno(unlink(f), EROFS);
    assert_errno(chmod(f, 0600), EROFS);
    assert_errno(rename(f, g), EROFS);
    assert_errno(setxattr(f, "user.k", "v", 1, 0), EROFS);
    g_autofree char *kept = get_file(f);
    assert_string_equal(kept, "kept");
    struct stat st;
    assert_errno(lstat(bg, &st), ENOENT);
    g_autofree char *bd = bp(m, "d");
    assert_errno(lstat(bd, &st), ENOENT);

    /* nobody may not change it */
    assert_int_equal(as_nobody(remount_rw, m->mnt), 1);
    assert_true(mount_flags(m) & ST_RDONLY);

    assert_int_equal(remount(m, "remount,rw,noexec"), 0);
    unsigned long fl = mount_flags(m);
    assert_false(fl & ST_RDONLY);
    assert_true(fl & ST_NOEXEC);
    assert_true(fl & ST_NOSUID);
    put_file(g, "new");
    g_autofree char *landed = get_file(bg);
    assert_string_equal(landed, "new");
    assert_int_equal(mount_daemon_pid(m), daemon);

    /* noexec stays (mount(8) drops the "exec"); sync (a superblock flag)
     * outlives a remount that does not name it, as does noatime one that
     * names only nodiratime */
    assert_int_equal(remount(m, "remount,exec,sync,noatime"), 0);
    fl = mount_flags(m);
    assert_true(fl & ST_NOEXEC);
    assert_true(fl & ST_SYNCHRONOUS);
    assert_true(fl & ST_NOATIME);
    /* and reads through the mount follow it, whoever reads the backing
     * file (the daemon, or the kernel with passthrough) */
    assert_int_equal(atime_once_followed(m, true), 946684800);
    assert_int_equal(remount(m, "remount,ro"), 0);
    fl = mount_flags(m);
    assert_true((fl & ST_RDONLY) && (fl & ST_SYNCHRONOUS) && (fl & ST_NOATIME) && (fl & ST_NOSUID));
    assert_int_equal(remount(m, "remount,rw,nodiratime"), 0);
    fl = mount_flags(m);
    assert_false(fl & ST_RDONLY);
    assert_true((fl & ST_NOATIME) && (fl & ST_NODIRATIME));
    assert_int_equal(remount(m, "remount,relatime"), 0);
    assert_false(mount_flags(m) & ST_NOATIME);
    assert_true(atime_once_followed(m, false) > 946684800);

    /* not a remount: a second daemon on a live mount is still refused */
    const char *again[] = {g_getenv("CKPTFS_BIN"), m->backing, m->mnt, NULL};
    assert_int_not_equal(run_cmd(again, NULL), 0);
    assert_int_equal(mount_daemon_pid(m), daemon);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_o_direct_sizes, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_o_direct_aio_then_buffered_read, mount_setup,
                                        mount_teardown),
        cmocka_unit_test_setup_teardown(test_o_direct_clears_setuid, setup_allow_other,
                                        mount_teardown),
        cmocka_unit_test_setup_teardown(test_fstat_replaced_dir, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_symlink_xattrs, mount_setup, mount_teardown),
        cmocka_unit_test(test_writeback_syncfs),
        cmocka_unit_test(test_noatime),
        cmocka_unit_test_setup_teardown(test_rename_whiteout, setup_allow_other, mount_teardown),
        cmocka_unit_test_setup_teardown(test_tmpfile, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_o_direct_mmap, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_root_is_structure, mount_setup, mount_teardown),
        cmocka_unit_test(test_no_default_permissions_refused),
        cmocka_unit_test_setup_teardown(test_remount, setup_allow_other, mount_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
