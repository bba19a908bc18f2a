/* File handles through the mount (name_to_handle_at, open_by_handle_at; what
 * an NFS export of the mount uses): a handle opens its object after the
 * kernel dropped every cached inode (drop_caches: the daemon is asked for
 * a node id it forgot), after a rename and through a second hard link; a
 * handle of an unlinked file is stale (ESTALE), as on ext4, but one of a
 * file unlinked while open opens it (and so does its /proc/self/fd link,
 * as does an O_TMPFILE file's, also when the open raced the unlink); a directory's
 * handle opens a directory the kernel has to connect to the root again
 * (lookups of ".."), and a file created in it lands where the path says;
 * a handle opens after the daemon was killed and replaced, and after an
 * unmount and a new mount of the same directory (also with its directory
 * renamed in between), and after the kernel looked its object up by name
 * again; an old handle never opens another object.
 * Runs in every variant (passthrough and not, both transports). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

typedef union {
    struct file_handle fh;
    char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
} Handle;

static void handle_of(const char *path, Handle *h)
{
    int mnt;
    h->fh.handle_bytes = MAX_HANDLE_SZ;
    assert_int_equal(name_to_handle_at(AT_FDCWD, path, &h->fh, &mnt, 0), 0);
}

/* Every dentry and inode the kernel can drop: the mount's nodes are
 * forgotten (all but those open or in use). */
static void drop_kernel_caches(Mount *m, int64_t at_most)
{
    int64_t left = mount_forget_down_to(m, at_most, 50);
    if (left < 0 || left > at_most)
        fail_msg("the kernel kept %lld nodes", (long long)left);
}

static char *read_by_handle(int mount_fd, Handle *h, int *err)
{
    int fd = open_by_handle_at(mount_fd, &h->fh, O_RDONLY);
    *err = fd < 0 ? errno : 0;
    if (fd < 0)
        return NULL;
    char buf[64] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n < 0 ? NULL : g_strdup(buf);
}

static void test_files(void **state)
{
    Mount *m = *state;
    enum { N = 8 };
    Handle h[N];
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("f%d", i);
        g_autofree char *p = mp(m, name);
        put_file(p, name);
        handle_of(p, &h[i]);
    }
    /* f2 renamed, f3 linked and its first name removed, f4..f7 unlinked */
    g_autofree char *f2 = mp(m, "f2"), *g2 = mp(m, "g2");
    g_autofree char *f3 = mp(m, "f3"), *l3 = mp(m, "l3");
    assert_int_equal(rename(f2, g2), 0);
    assert_int_equal(link(f3, l3), 0);
    assert_int_equal(unlink(f3), 0);
    for (int i = 4; i < N; i++) {
        g_autofree char *name = g_strdup_printf("f%d", i);
        g_autofree char *p = mp(m, name);
        assert_int_equal(unlink(p), 0);
    }
    int mount_fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    assert_true(mount_fd >= 0);
    drop_kernel_caches(m, 2); /* the root's children _state and t may stay */
    for (int i = 0; i < N; i++) {
        int err;
        g_autofree char *text = read_by_handle(mount_fd, &h[i], &err);
        g_autofree char *want = g_strdup_printf("f%d", i);
        if (i < 4) {
            assert_int_equal(err, 0);
            assert_string_equal(text, want);
        } else {
            assert_int_equal(err, ESTALE);
        }
    }
    /* a second time, the nodes held again: the same answers */
    int err;
    g_autofree char *again = read_by_handle(mount_fd, &h[0], &err);
    assert_string_equal(again, "f0");
    /* what the handle opened is the object the names show */
    int fd = open_by_handle_at(mount_fd, &h[2].fh, O_RDONLY);
    assert_true(fd >= 0);
    struct stat a, b;
    assert_int_equal(fstat(fd, &a), 0);
    assert_int_equal(stat(g2, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino);
    close(fd);
    close(mount_fd);
}

/* A file unlinked through the mount while it is open: its handle and its
 * /proc/self/fd link open it with its content, as on ext4 (xfstests
 * generic/467); so does an O_TMPFILE file's link.  Once closed, the
 * handle is stale. */
static void test_unlinked_while_open(void **state)
{
    Mount *m = *state;
    g_autofree char *p = mp(m, "kept-open");
    put_file(p, "still here");
    Handle h;
    handle_of(p, &h);
    int keep = open(p, O_RDONLY);
    assert_true(keep >= 0);
    assert_int_equal(unlink(p), 0);
    int mount_fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    assert_true(mount_fd >= 0);
    int err;
    g_autofree char *text = read_by_handle(mount_fd, &h, &err);
    assert_int_equal(err, 0);
    assert_string_equal(text, "still here");
    char proc[64];
    g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", keep);
    g_autofree char *again = get_file(proc);
    assert_string_equal(again, "still here");

    int tmp = open(m->work, O_TMPFILE | O_RDWR, 0600);
    assert_true(tmp >= 0);
    assert_int_equal(write(tmp, "unnamed", 7), 7);
    g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", tmp);
    int fd = open(proc, O_RDONLY);
    assert_true(fd >= 0);
    char buf[16] = {0};
    assert_int_equal(read(fd, buf, sizeof buf), 7);
    assert_string_equal(buf, "unnamed");
    close(fd);
    close(tmp);

    close(keep);
    drop_kernel_caches(m, 2);
    g_autofree char *gone = read_by_handle(mount_fd, &h, &err);
    assert_int_equal(err, ESTALE);
    close(mount_fd);
}

/* An open racing an unlink of its file through the mount: when the open
 * wins, its /proc/self/fd link opens the file again, as on ext4, however
 * the two requests interleave in the daemon (the open counts itself
 * before it opens, and the unlink reads that count after the removal).
 * And a reopen through /proc/self/fd of a file held open, racing the
 * unlink of its name, always opens it. */
typedef struct {
    const char *path;
    gint go; /* both threads spin until it is set: the two requests leave together */
    int fd, err;
} OpenRace;

static gpointer race_open(gpointer p)
{
    OpenRace *r = p;
    while (!g_atomic_int_get(&r->go))
        ;
    r->fd = open(r->path, O_RDONLY);
    r->err = r->fd < 0 ? errno : 0;
    return NULL;
}

static void race_unlink(const char *path, const char *opening, OpenRace *r)
{
    *r = (OpenRace){.path = opening};
    GThread *t = g_thread_new("open", race_open, r);
    g_atomic_int_set(&r->go, 1);
    assert_int_equal(unlink(path), 0);
    g_thread_join(t);
}

static void assert_reads(int fd, const char *want, const char *what, int round)
{
    char buf[16] = {0};
    if (fd < 0)
        fail_msg("round %d: %s: %s", round, what, g_strerror(errno));
    assert_int_equal(pread(fd, buf, sizeof buf - 1, 0), (ssize_t)strlen(want));
    assert_string_equal(buf, want);
}

static void test_open_racing_unlink(void **state)
{
    Mount *m = *state;
    g_autofree char *p = mp(m, "racing");
    char proc[64];
    int won = 0;
    for (int i = 0; i < 3000; i++) {
        put_file(p, "raced");
        OpenRace r;
        race_unlink(p, p, &r);
        if (r.fd < 0) {
            assert_int_equal(r.err, ENOENT);
            continue;
        }
        won++;
        g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", r.fd);
        int again = open(proc, O_RDONLY);
        assert_reads(again, "raced", "reopening an open file unlinked meanwhile", i);
        close(again);
        close(r.fd);
    }
    print_message("the open won %d of 3000 races\n", won);
    assert_true(won > 0);

    for (int i = 0; i < 3000; i++) {
        put_file(p, "held");
        int keep = open(p, O_RDONLY);
        assert_true(keep >= 0);
        g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", keep);
        OpenRace r;
        race_unlink(p, proc, &r);
        errno = r.err;
        assert_reads(r.fd, "held", "reopening a held file while it is unlinked", i);
        close(r.fd);
        close(keep);
    }
}

static void test_directory(void **state)
{
    Mount *m = *state;
    g_autofree char *deep = mp(m, "a/b/c");
    g_autofree char *ab = mp(m, "a/b");
    g_autofree char *a = mp(m, "a");
    assert_int_equal(mkdir(a, 0755), 0);
    assert_int_equal(mkdir(ab, 0755), 0);
    assert_int_equal(mkdir(deep, 0755), 0);
    Handle h;
    handle_of(deep, &h);
    int mount_fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    assert_true(mount_fd >= 0);
    drop_kernel_caches(m, 2);
    int dfd = open_by_handle_at(mount_fd, &h.fh, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    int fd = openat(dfd, "new", O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
    close(dfd);
    g_autofree char *landed = bp(m, "a/b/c/new");
    g_autofree char *text = get_file(landed);
    assert_string_equal(text, "x");

    /* removed: stale */
    g_autofree char *newp = mp(m, "a/b/c/new");
    assert_int_equal(unlink(newp), 0);
    assert_int_equal(rmdir(deep), 0);
    drop_kernel_caches(m, 4);
    errno = 0;
    assert_int_equal(open_by_handle_at(mount_fd, &h.fh, O_RDONLY | O_DIRECTORY), -1);
    assert_int_equal(errno, ESTALE);
    close(mount_fd);
}

/* The records of forgotten nodes are in the state a new daemon maps: a
 * handle taken before a kill -9 opens after it. */
/* SIGKILL to a supervised mount's daemon; returns once another serves. */
static void kill_daemon_and_wait(Mount *m)
{
    g_autoptr(GString) err = g_string_new(NULL);
    if (mount_replace_daemon(m, DAEMON_KILL, err) <= 0)
        fail_msg("%s", err->str);
}

/* A supervised mount, started. */
static Mount *supervised_mount(void)
{
    Mount *m = mount_new();
    const char *args[] = {"-o", "supervise", NULL};
    assert_int_equal(mount_start(m, args), 0);
    return m;
}

static void test_after_daemon_death(void **state)
{
    (void)state;
    Mount *m = supervised_mount();
    g_autofree char *f = mp(m, "f");
    put_file(f, "kept");
    Handle h;
    handle_of(f, &h);
    int mount_fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    assert_true(mount_fd >= 0);
    drop_kernel_caches(m, 2);
    kill_daemon_and_wait(m);
    int err;
    g_autofree char *text = read_by_handle(mount_fd, &h, &err);
    assert_int_equal(err, 0);
    assert_string_equal(text, "kept");
    close(mount_fd);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Descriptors process pid has of objects below dir (a held file shows as
 * "dir/... (deleted)"). */
static int descriptors_below(pid_t pid, const char *dir)
{
    g_autofree char *fds = g_strdup_printf("/proc/%d/fd", (int)pid);
    g_autoptr(GDir) d = g_dir_open(fds, 0, NULL);
    assert_non_null(d);
    int below = 0;
    for (const char *name; (name = g_dir_read_name(d));) {
        g_autofree char *link = g_build_filename(fds, name, NULL);
        g_autofree char *target = g_file_read_link(link, NULL);
        below += target && g_str_has_prefix(target, dir) && target[strlen(dir)] == '/';
    }
    return below;
}

/* The supervisor's descriptors below the backing work dir, once they are
 * `want` (holds and let-gos reach it asynchronously; 2 s at most). */
static int supervisor_holds(Mount *m, int want)
{
    int now = -1;
    for (int i = 0; i < 100 && now != want; i++) {
        if (i)
            usleep(20 * 1000);
        now = descriptors_below(m->pid, m->bwork);
    }
    return now;
}

/* Once the kernel forgot what the test had open, the supervisor holds
 * nothing; then the mount goes. */
static void stop_holding_none(Mount *m)
{
    drop_kernel_caches(m, 2);
    assert_int_equal(supervisor_holds(m, 0), 0);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A file unlinked through the mount while open (or an O_TMPFILE file),
 * still in use when the daemon is killed or taken over, twice.  The
 * supervisor held a descriptor of it for the next daemon, or passthrough
 * the backing file: the open file keeps reading and
 * writing under the new daemon, syncs, opens again through /proc/self/fd
 * (its slot says it has no name through the mount), and an O_TMPFILE file
 * links into place, as a commit made that way does.  Once closed and
 * forgotten, the supervisor lets go of it. */
static void nameless_open_across(DaemonEvent ev, bool tmpfile)
{
    Mount *m = supervised_mount();
    /* the kernel holds a file passthrough serves: only an O_TMPFILE file
     * (bound after its create) is held then */
    int held = tmpfile || !mount_log_has(m, "FUSE passthrough on");
    g_autofree char *f = mp(m, "scratch");
    g_autofree char *other = mp(m, "other");
    g_autofree char *placed = mp(m, "placed");
    put_file(other, "named");
    int fd = tmpfile ? open(m->work, O_TMPFILE | O_RDWR, 0600)
                     : open(f, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "before", 6, 0), 6);
    if (!tmpfile)
        assert_int_equal(unlink(f), 0);
    assert_int_equal(supervisor_holds(m, held), held);
    g_autofree char *proc = g_strdup_printf("/proc/self/fd/%d", fd);
    g_autoptr(GString) err = g_string_new(NULL);
    /* twice: the next daemon holds it again, and a takeover's supervisor
     * passes what it holds on to the binary it becomes */
    for (int i = 0; i < 2; i++) {
        if (mount_replace_daemon(m, ev, err) <= 0)
            fail_msg("%s", err->str);
        assert_int_equal(supervisor_holds(m, held), held);
    }
    const char *what = ev == DAEMON_KILL ? "kill -9" : "--takeover";
    const char *file = tmpfile ? "an O_TMPFILE file" : "an unlinked open file";
    char buf[16] = {0};
    if (pwrite(fd, "after", 5, 6) != 5)
        fail_msg("a write to %s after a %s: %s", file, what, g_strerror(errno));
    assert_int_equal(pread(fd, buf, sizeof buf - 1, 0), 11);
    assert_string_equal(buf, "beforeafter");
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_nlink, 0);
    assert_int_equal(st.st_size, 11);
    if (fsync(fd) != 0)
        fail_msg("fsync of %s after a %s: %s", file, what, g_strerror(errno));
    int again = open(proc, O_RDONLY);
    if (again < 0)
        fail_msg("a reopen of %s after a %s: %s", file, what, g_strerror(errno));
    memset(buf, 0, sizeof buf);
    assert_int_equal(pread(again, buf, sizeof buf - 1, 0), 11);
    assert_string_equal(buf, "beforeafter");
    close(again);
    if (tmpfile) {
        if (linkat(AT_FDCWD, proc, AT_FDCWD, placed, AT_SYMLINK_FOLLOW) != 0)
            fail_msg("linkat of %s after a %s: %s", file, what, g_strerror(errno));
        g_autofree char *bplaced = bp(m, "placed");
        g_autofree char *got = get_file(bplaced);
        assert_string_equal(got, "beforeafter");
        assert_int_equal(unlink(placed), 0);
    }
    close(fd);
    g_autofree char *got = get_file(other);
    assert_string_equal(got, "named");
    stop_holding_none(m);
}

/* A directory removed through the mount while a process has it open,
 * through two kills or takeovers: natively it stays a directory with no
 * link and no entries, and fsync succeeds.  The supervisor holds a
 * descriptor of it (nothing else keeps the removed directory's inode for
 * the next daemon to find), and lets go once it is closed and forgotten. */
static void removed_dir_across(DaemonEvent ev, bool opens_told)
{
    /* entry_timeout=0: the kernel sends OPENDIR, and the daemon counts
     * the directory's opens */
    Mount *m = mount_new();
    const char *told[] = {"-o", "supervise", "-o", "entry_timeout=0", NULL};
    const char *untold[] = {"-o", "supervise", NULL};
    assert_int_equal(mount_start(m, opens_told ? told : untold), 0);
    g_autofree char *d = mp(m, "gone");
    assert_int_equal(mkdir(d, 0755), 0);
    int fd = open(d, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(rmdir(d), 0);
    assert_int_equal(supervisor_holds(m, 1), 1);
    g_autoptr(GString) err = g_string_new(NULL);
    for (int i = 0; i < 2; i++) {
        if (mount_replace_daemon(m, ev, err) <= 0)
            fail_msg("%s", err->str);
        assert_int_equal(supervisor_holds(m, 1), 1);
    }
    const char *what = ev == DAEMON_KILL ? "kill -9" : "--takeover";
    struct stat st;
    if (fstat(fd, &st) != 0)
        fail_msg("fstat of a removed directory after a %s: %s", what, g_strerror(errno));
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_nlink, 0);
    if (fsync(fd) != 0)
        fail_msg("fsync of a removed directory after a %s: %s", what, g_strerror(errno));
    int again = dup(fd);
    DIR *dir = fdopendir(again);
    assert_non_null(dir);
    errno = 0;
    assert_null(readdir(dir)); /* the kernel lists a removed directory as empty */
    assert_int_equal(errno, 0);
    closedir(dir);
    errno = 0;
    assert_int_equal(openat(fd, "new", O_CREAT | O_WRONLY, 0644), -1);
    assert_int_equal(errno, ENOENT);
    close(fd);
    g_autofree char *bd = bp(m, "gone");
    assert_int_equal(access(bd, F_OK), -1);
    stop_holding_none(m);
}

static void test_removed_dir_after_daemon_death(void **state)
{
    (void)state;
    removed_dir_across(DAEMON_KILL, false);
}

static void test_removed_dir_after_daemon_death_opens_told(void **state)
{
    (void)state;
    removed_dir_across(DAEMON_KILL, true);
}

static void test_removed_dir_after_takeover(void **state)
{
    (void)state;
    removed_dir_across(DAEMON_TAKEOVER, false);
}

/* Holds and let-gos while the supervisor cannot read (stopped): a
 * hundred O_TMPFILE files are held, a burst of others opened and closed
 * fills the socket (a hold and a let-go each), and the hundred are closed
 * then: their let-gos find no room.  Those wait their turn and go once the
 * supervisor reads again, so that it keeps none of them (a hold that finds
 * no room is a file not held). */
static void test_letgos_wait_their_turn(void **state)
{
    (void)state;
    enum { HELD = 100, BURST = 200 };
    Mount *m = supervised_mount();
    int fds[HELD];
    assert_int_equal(kill(m->pid, SIGSTOP), 0);
    for (int i = 0; i < HELD; i++)
        assert_true((fds[i] = open(m->work, O_TMPFILE | O_RDWR, 0600)) >= 0);
    for (int i = 0; i < BURST; i++) {
        int fd = open(m->work, O_TMPFILE | O_RDWR, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    for (int i = 0; i < HELD; i++)
        close(fds[i]);
    drop_kernel_caches(m, 2);
    usleep(200 * 1000);
    assert_int_equal(kill(m->pid, SIGCONT), 0);
    /* the supervisor reads what was queued (it holds the hundred then),
     * and the let-gos that waited come as soon as there is room */
    usleep(300 * 1000);
    assert_int_equal(supervisor_holds(m, 0), 0);
    stop_holding_none(m);
}

/* Directories removed in a burst while the supervisor cannot read take at
 * most half the socket: a file that loses its name just after is still
 * held. */
static void test_files_before_directories(void **state)
{
    (void)state;
    enum { N = 400 };
    Mount *m = supervised_mount();
    assert_int_equal(kill(m->pid, SIGSTOP), 0);
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("burst%d", i);
        g_autofree char *p = mp(m, name);
        assert_int_equal(mkdir(p, 0755), 0);
        assert_int_equal(rmdir(p), 0);
    }
    drop_kernel_caches(m, 2);
    int fd = open(m->work, O_TMPFILE | O_RDWR, 0600);
    assert_true(fd >= 0);
    usleep(200 * 1000);
    assert_int_equal(kill(m->pid, SIGCONT), 0);
    usleep(300 * 1000);
    assert_int_equal(supervisor_holds(m, 1), 1);
    close(fd);
    stop_holding_none(m);
}

/* A hundred files unlinked while open (as many as a process may keep of
 * its temporary files), through two kills: every one still reads what was
 * written, and the supervisor holds none once they are closed. */
static void test_many_unlinked_after_daemon_death(void **state)
{
    (void)state;
    enum { N = 100 };
    Mount *m = supervised_mount();
    int fds[N];
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("many%d", i);
        g_autofree char *p = mp(m, name);
        fds[i] = open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
        assert_true(fds[i] >= 0);
        assert_int_equal(pwrite(fds[i], name, strlen(name), 0), (ssize_t)strlen(name));
        assert_int_equal(unlink(p), 0);
    }
    g_autoptr(GString) err = g_string_new(NULL);
    for (int k = 0; k < 2; k++)
        if (mount_replace_daemon(m, DAEMON_KILL, err) <= 0)
            fail_msg("%s", err->str);
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("many%d", i);
        char buf[32] = {0};
        if (pread(fds[i], buf, sizeof buf - 1, 0) != (ssize_t)strlen(name))
            fail_msg("file %d of %d after two kills: %s", i, N, g_strerror(errno));
        assert_string_equal(buf, name);
        close(fds[i]);
    }
    stop_holding_none(m);
}

static void test_unlinked_open_after_daemon_death(void **state)
{
    (void)state;
    nameless_open_across(DAEMON_KILL, false);
}

static void test_unlinked_open_after_takeover(void **state)
{
    (void)state;
    nameless_open_across(DAEMON_TAKEOVER, false);
}

static void test_tmpfile_after_daemon_death(void **state)
{
    (void)state;
    nameless_open_across(DAEMON_KILL, true);
}

static void test_tmpfile_after_takeover(void **state)
{
    (void)state;
    nameless_open_across(DAEMON_TAKEOVER, true);
}

/* A handle of a file the kernel forgot and then looked up again by name
 * (a listing, a stat: how the kernel reconnects a decoded handle to its
 * parent) still opens it: the object comes back under its old node id. */
static void test_found_again_by_name(void **state)
{
    Mount *m = *state;
    enum { N = 5 };
    g_autofree char *dir = mp(m, "again");
    assert_int_equal(mkdir(dir, 0755), 0);
    Handle h[N];
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("again/f%d", i);
        g_autofree char *p = mp(m, name);
        put_file(p, name);
        handle_of(p, &h[i]);
    }
    drop_kernel_caches(m, 2);
    for (int i = 0; i < N; i++) { /* by name first */
        g_autofree char *name = g_strdup_printf("again/f%d", i);
        g_autofree char *p = mp(m, name);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
    }
    int mount_fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    assert_true(mount_fd >= 0);
    for (int i = 0; i < N; i++) {
        int err;
        g_autofree char *text = read_by_handle(mount_fd, &h[i], &err);
        g_autofree char *want = g_strdup_printf("again/f%d", i);
        assert_int_equal(err, 0);
        assert_string_equal(text, want);
    }
    close(mount_fd);
}

/* Handles of 10 files and their directory, taken through one mount, then
 * the mount cycled (as xfstests generic/477 does; also with the directory
 * renamed, and a file removed, while unmounted; and a mount made as soon
 * as the unmount returned): each opens its object through the next mount,
 * or is stale when the object is gone. */
static void test_across_a_remount(void **state)
{
    (void)state;
    enum { N = 10 };
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    g_autofree char *dir = mp(m, "d");
    assert_int_equal(mkdir(dir, 0755), 0);
    Handle h[N], hd;
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("d/f%d", i);
        g_autofree char *p = mp(m, name);
        put_file(p, name);
        handle_of(p, &h[i]);
    }
    handle_of(dir, &hd);
    for (int round = 0; round < 3; round++) {
        if (round < 2) {
            assert_int_equal(mount_stop(m), 0);
        } else {
            /* as umount; mount in a script: the new daemon starts while the
             * old one may still be writing what it leaves */
            const char *umount[] = {"fusermount3", "-u", m->mnt, NULL};
            assert_int_equal(run_cmd(umount, NULL), 0);
            pid_t old = m->pid;
            m->pid = 0;
            assert_int_equal(mount_start(m, NULL), 0);
            int status;
            assert_int_equal(waitpid(old, &status, 0), old);
            assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        if (round == 1) {
            /* behind the mount, while unmounted: d renamed, f3 removed */
            g_autofree char *from = bp(m, "d"), *to = bp(m, "renamed");
            assert_int_equal(rename(from, to), 0);
            g_autofree char *f3 = bp(m, "renamed/f3");
            assert_int_equal(unlink(f3), 0);
        }
        if (round < 2)
            assert_int_equal(mount_start(m, NULL), 0);
        int mount_fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
        assert_true(mount_fd >= 0);
        for (int i = 0; i < N; i++) {
            int err;
            g_autofree char *text = read_by_handle(mount_fd, &h[i], &err);
            g_autofree char *want = g_strdup_printf("d/f%d", i);
            if (round >= 1 && i == 3) {
                assert_int_equal(err, ESTALE);
            } else {
                assert_int_equal(err, 0);
                assert_string_equal(text, want);
            }
        }
        int dfd = open_by_handle_at(mount_fd, &hd.fh, O_RDONLY | O_DIRECTORY);
        assert_true(dfd >= 0);
        struct stat a, b;
        assert_int_equal(fstat(dfd, &a), 0);
        g_autofree char *now = mp(m, round ? "renamed" : "d");
        assert_int_equal(stat(now, &b), 0);
        assert_int_equal(a.st_ino, b.st_ino);
        close(dfd);
        close(mount_fd);
    }
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A mount that finds nothing of the last one (as after a reboot, or a
 * daemon killed without a supervisor): old handles are stale, never
 * another object, however many objects the new mount makes. */
static void test_old_handles_never_name_new_objects(void **state)
{
    (void)state;
    enum { N = 200 };
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    Handle h[N];
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("old%d", i);
        g_autofree char *p = mp(m, name);
        put_file(p, "old");
        handle_of(p, &h[i]);
    }
    pid_t d = m->pid;
    assert_int_equal(kill(d, SIGKILL), 0); /* no supervisor: nothing kept */
    assert_int_equal(waitpid(d, NULL, 0), d);
    m->pid = 0;
    const char *lazy[] = {"fusermount3", "-u", "-z", m->mnt, NULL};
    assert_int_equal(run_cmd(lazy, NULL), 0);
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("old%d", i);
        g_autofree char *b = bp(m, name);
        assert_int_equal(unlink(b), 0);
    }
    assert_int_equal(mount_start(m, NULL), 0);
    for (int i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("new%d", i);
        g_autofree char *p = mp(m, name);
        put_file(p, "new");
    }
    int mount_fd = open(m->mnt, O_RDONLY | O_DIRECTORY);
    assert_true(mount_fd >= 0);
    for (int i = 0; i < N; i++) {
        int err;
        g_autofree char *text = read_by_handle(mount_fd, &h[i], &err);
        if (err != ESTALE)
            print_message("old handle %d: %s, \"%s\"\n", i, g_strerror(err), text ? text : "");
        assert_int_equal(err, ESTALE);
    }
    close(mount_fd);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_files, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_unlinked_while_open, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_open_racing_unlink, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_directory, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_found_again_by_name, mount_setup, mount_teardown),
        cmocka_unit_test(test_after_daemon_death),
        cmocka_unit_test(test_unlinked_open_after_daemon_death),
        cmocka_unit_test(test_unlinked_open_after_takeover),
        cmocka_unit_test(test_tmpfile_after_daemon_death),
        cmocka_unit_test(test_tmpfile_after_takeover),
        cmocka_unit_test(test_many_unlinked_after_daemon_death),
        cmocka_unit_test(test_removed_dir_after_daemon_death),
        cmocka_unit_test(test_removed_dir_after_takeover),
        cmocka_unit_test(test_removed_dir_after_daemon_death_opens_told),
        cmocka_unit_test(test_letgos_wait_their_turn),
        cmocka_unit_test(test_files_before_directories),
        cmocka_unit_test(test_across_a_remount),
        cmocka_unit_test(test_old_handles_never_name_new_objects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
