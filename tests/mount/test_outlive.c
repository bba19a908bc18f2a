/* The mount outlives its daemon (ckptfs(8) WHEN THE DAEMON DIES): with
 * `-o supervise`, kill -9 of the daemon (the supervisor's child) in the
 * middle of a 4-thread commit loop, of a walk of _views, of an SQLite
 * transaction loop and of RocksDB's synced writes (flushing and compacting
 * all along), 20 times each, and `ckptfs --takeover` 10 times in the
 * middle of each but the SQLite rollback journal: every call the clients made succeeds, every
 * acknowledged commit is intact byte for byte (through the mount and in the backing dir), a file
 * opened before the first kill reads and writes through its old descriptor, node count and the
 * daemon's descriptors come back, and ckptfs_daemon_attaches_total counts the attaches.
 * `--takeover` of a mount without a supervisor exits 1 with one line; SIGTERM of the supervisor
 * unmounts and it exits 0 (every teardown checks fusermount3 -u the same
 * way).
 *
 * Nothing here asserts a duration.  The waits below (a new daemon, the
 * clients making progress again) are bounded only so that a hang fails the
 * test instead of the suite's timeout; on such a failure the FUSE
 * connection is aborted so that blocked clients return. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <setjmp.h>
#include <rocksdb/c.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "mountrun.h"

#define THREADS          4
#define SLOTS            4 /* final names per thread, renamed over in turn */
#define KILLS            20
#define TAKEOVERS        10
#define OLD_SIZE         (64 * 1024)
#define PROGRESS_WAIT_MS 60000 /* hang detection only */

static void sleep_ms(int ms)
{
    g_usleep((gulong)ms * 1000);
}

static double now_s(void)
{
    return (double)g_get_monotonic_time() / 1e6;
}

/* ---- the mount ---- */

/* The supervised mount every test here uses (plus the suite's variant). */
static int sup_setup(void **state)
{
    Mount *m = mount_new();
    const char *args[] = {"-o", "supervise", NULL};
    if (mount_start(m, args) != 0) {
        mount_free(m);
        return -1;
    }
    *state = m;
    return 0;
}

/* Aborts the mount's FUSE connection (found through mountinfo, without
 * touching the mount) so that clients blocked on a daemon that never came
 * back return; the test is failing anyway. */
static void abort_connection(Mount *m)
{
    g_autofree char *info = NULL;
    if (!g_file_get_contents("/proc/self/mountinfo", &info, NULL, NULL))
        return;
    g_auto(GStrv) lines = g_strsplit(info, "\n", -1);
    g_autofree char *needle = g_strdup_printf(" %s ", m->mnt);
    for (char **l = lines; *l; l++) {
        unsigned maj, min;
        if (!strstr(*l, needle) || sscanf(*l, "%*d %*d %u:%u", &maj, &min) != 2)
            continue;
        g_autofree char *p = g_strdup_printf("/sys/fs/fuse/connections/%u/abort", min);
        int fd = open(p, O_WRONLY);
        if (fd >= 0) {
            (void)!write(fd, "1", 1);
            close(fd);
        }
        fprintf(stderr, "aborted FUSE connection %u of %s\n", min, m->mnt);
    }
}

/* The descriptors of a process, pipes apart: libfuse keeps one splice pipe
 * (two descriptors) per worker thread that spliced, for as long as the
 * thread lives, so their number follows the threads, not the requests. */
static int thread_count(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return -1;
    const char *p = strstr(text, "\nThreads:");
    return p ? atoi(p + 9) : -1;
}

/* "fd -> target" lines of a process's descriptors. */
static char *fd_listing(pid_t pid)
{
    GString *s = g_string_new("");
    g_autofree char *path = g_strdup_printf("/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return g_string_free(s, FALSE);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        g_autofree char *l = g_build_filename(path, de->d_name, NULL);
        g_autofree char *t = g_file_read_link(l, NULL);
        g_string_append_printf(s, "  %s -> %s\n", de->d_name, t ? t : "?");
    }
    closedir(d);
    return g_string_free(s, FALSE);
}

/* Nodes once the kernel has forgotten what it no longer uses: the lowest of
 * at least five readings after dropping dentries (forgets arrive
 * asynchronously), more (5 s at most) until it is at most `at_most` (< 0:
 * no more). */
static int64_t settled_nodes(Mount *m, int64_t at_most)
{
    int64_t n = -1;
    for (int i = 0; i < 50; i++) {
        kernel_drop_caches();
        sleep_ms(100);
        int64_t v = mount_metric(m, "ckptfs_nodes");
        if (n < 0 || (v >= 0 && v < n))
            n = v;
        if (i >= 4 && (at_most < 0 || (n >= 0 && n <= at_most)))
            break;
    }
    return n;
}

/* The daemon's descriptors (pipes apart, *pipes and *threads of the same
 * reading) once it is idle, the same way. */
static int settled_fds(Mount *m, int at_most, int *pipes, int *threads)
{
    int n = -1;
    for (int i = 0; i < 30; i++) {
        pid_t d = mount_daemon_pid(m);
        int p = 0, v = mountrun_count_fds(d, &p), t = thread_count(d);
        if (v >= 0 && (n < 0 || v < n)) {
            n = v;
            *pipes = p;
            *threads = t;
        }
        if (i >= 4 && (at_most < 0 || (n >= 0 && n <= at_most)))
            break;
        sleep_ms(100);
    }
    return n;
}

/* ---- the commit loop ---- */

typedef struct Loop Loop;

typedef struct {
    Loop *loop;
    int id;
    char *dir;             /* mnt/_state/t/w<id> */
    guint64 acked[SLOTS];  /* the commit whose bytes slot i's final file holds (0: none) */
    guint64 unsure[SLOTS]; /* a commit whose rename failed or came before a failure: may be
                            * there instead */
} Worker;

struct Loop {
    gint stop;
    gint commits;  /* acknowledged, all threads */
    gint failures; /* calls that returned an error */
    gint wrong;    /* read-backs that did not return the acknowledged bytes */
    GMutex lock;
    GString *errors; /* the first failures, described */
    Worker w[THREADS];
};

/* The bytes of commit `seq` of thread `t`: 4 to 68 KiB, different per
 * commit and per offset. */
static guint8 *commit_bytes(int t, guint64 seq, size_t *len)
{
    *len = 4096 + (size_t)((seq * 7919u + (guint64)t * 104729u) % (64 * 1024));
    guint8 *b = g_malloc(*len + 4);
    GRand *r = g_rand_new_with_seed((guint32)(seq * 4 + (guint64)t) ^ 0x5eed);
    for (size_t i = 0; i < *len; i += 4) {
        guint32 v = g_rand_int(r);
        memcpy(b + i, &v, 4);
    }
    g_rand_free(r);
    return b;
}

static void loop_fail(Loop *l, const char *op, const char *path)
{
    int e = errno;
    int n = g_atomic_int_add(&l->failures, 1);
    if (n < 20) {
        g_mutex_lock(&l->lock);
        g_string_append_printf(l->errors, "  %s %s: %s (errno %d)\n", op, path, g_strerror(e), e);
        g_mutex_unlock(&l->lock);
    }
}

static int write_all(int fd, const guint8 *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The call of the last read_whole that failed (per thread). */
static __thread const char *read_failed = "";

/* Reads path whole; NULL (errno set, read_failed naming the call) on error. */
static guint8 *read_whole(const char *path, size_t *len)
{
    read_failed = "open";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    read_failed = "read";
    GByteArray *a = g_byte_array_new();
    guint8 buf[16384];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            int e = errno;
            close(fd);
            g_byte_array_free(a, TRUE);
            errno = e;
            return NULL;
        }
        if (n == 0)
            break;
        g_byte_array_append(a, buf, (guint)n);
    }
    if (close(fd) < 0) {
        int e = errno;
        read_failed = "close";
        g_byte_array_free(a, TRUE);
        errno = e;
        return NULL;
    }
    *len = a->len;
    if (a->len == 0) { /* an empty GByteArray's data is NULL */
        g_byte_array_free(a, TRUE);
        return g_malloc0(1);
    }
    return g_byte_array_free(a, FALSE);
}

/* One commit the way a worker makes it: tmp file, write, fsync, close,
 * rename over the final name, fsync of the directory.  Every call that fails
 * is counted; true when all succeeded. */
static bool commit_one(Worker *w, guint64 seq)
{
    Loop *l = w->loop;
    int slot = (int)(seq % SLOTS);
    g_autofree char *tmp = g_strdup_printf("%s/ckpt-%d.tmp", w->dir, slot);
    g_autofree char *fin = g_strdup_printf("%s/ckpt-%d", w->dir, slot);
    size_t len;
    g_autofree guint8 *data = commit_bytes(w->id, seq, &len);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        loop_fail(l, "open", tmp);
        return false;
    }
    if (write_all(fd, data, len) < 0) {
        loop_fail(l, "write", tmp);
        close(fd);
        return false;
    }
    if (fsync(fd) < 0) {
        loop_fail(l, "fsync", tmp);
        close(fd);
        return false;
    }
    if (close(fd) < 0) {
        loop_fail(l, "close", tmp);
        return false;
    }
    if (rename(tmp, fin) < 0) {
        /* it may have happened all the same (a replayed rename says ENOENT) */
        loop_fail(l, "rename", tmp);
        w->unsure[slot] = seq;
        return false;
    }
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        loop_fail(l, "open dir", w->dir);
        w->unsure[slot] = seq;
        return false;
    }
    if (fsync(dfd) < 0) {
        loop_fail(l, "fsync dir", w->dir);
        close(dfd);
        w->unsure[slot] = seq;
        return false;
    }
    if (close(dfd) < 0) {
        loop_fail(l, "close dir", w->dir);
        w->unsure[slot] = seq;
        return false;
    }
    w->acked[slot] = seq;
    w->unsure[slot] = 0;
    return true;
}

/* Whether `got` is the bytes of commit `seq` of thread t. */
static bool is_commit(int t, guint64 seq, const guint8 *got, size_t got_len)
{
    size_t len;
    g_autofree guint8 *want = commit_bytes(t, seq, &len);
    return got_len == len && memcmp(got, want, len) == 0;
}

static gpointer worker_thread(gpointer p)
{
    Worker *w = p;
    Loop *l = w->loop;
    for (guint64 seq = 1; !g_atomic_int_get(&l->stop); seq++) {
        if (!commit_one(w, seq))
            continue;
        g_atomic_int_inc(&l->commits);
        /* the commit before this one, read back through the mount */
        if (seq < 2 || w->unsure[(seq - 1) % SLOTS])
            continue;
        guint64 prev = w->acked[(seq - 1) % SLOTS];
        g_autofree char *fin = g_strdup_printf("%s/ckpt-%d", w->dir, (int)((seq - 1) % SLOTS));
        size_t len = 0;
        g_autofree guint8 *got = read_whole(fin, &len);
        if (!got) {
            g_autofree char *op = g_strdup_printf("read back (%s)", read_failed);
            loop_fail(l, op, fin);
        } else if (!is_commit(w->id, prev, got, len)) {
            g_atomic_int_inc(&l->wrong);
            g_mutex_lock(&l->lock);
            g_string_append_printf(
                l->errors, "  %s: not the bytes of commit %" G_GUINT64_FORMAT " (%zu bytes read)\n",
                fin, prev, len);
            g_mutex_unlock(&l->lock);
        }
    }
    return NULL;
}

/* Waits until the threads acknowledged `more` commits beyond `from`. */
static bool wait_progress(gint *counter, int from, int more)
{
    for (int waited = 0; waited < PROGRESS_WAIT_MS; waited += 2) {
        if (g_atomic_int_get(counter) >= from + more)
            return true;
        sleep_ms(2);
    }
    return false;
}

/* The final files hold the acknowledged bytes, through the mount and in the
 * backing dir; returns the number of files checked. */
static int check_final_files(Mount *m, Loop *l, const char *root)
{
    int checked = 0;
    for (int t = 0; t < THREADS; t++) {
        Worker *w = &l->w[t];
        for (int s = 0; s < SLOTS; s++) {
            if (!w->acked[s] && !w->unsure[s])
                continue;
            g_autofree char *p = g_strdup_printf("%s/w%d/ckpt-%d", root, t, s);
            size_t len = 0;
            g_autofree guint8 *got = read_whole(p, &len);
            if (!got)
                fprintf(stderr, "%s: %s\n", p, g_strerror(errno));
            assert_non_null(got);
            bool ok = (w->acked[s] && is_commit(t, w->acked[s], got, len)) ||
                      (w->unsure[s] && is_commit(t, w->unsure[s], got, len));
            if (!ok)
                fprintf(stderr, "%s: not the bytes of commit %" G_GUINT64_FORMAT " (%zu bytes)\n",
                        p, w->acked[s], len);
            assert_true(ok);
            checked++;
        }
    }
    (void)m;
    return checked;
}

static void old_pattern(guint8 *buf)
{
    for (size_t i = 0; i < OLD_SIZE; i++)
        buf[i] = (guint8)(i * 31 + i / 251);
}

/* The commit loop with `rounds` events (kill -9 or --takeover) in its
 * middle; see the file's comment for what is checked. */
static void commit_loop_under(Mount *m, DaemonEvent kind, int rounds)
{
    /* a file opened before the first event, kept open throughout */
    g_autofree char *old = mp(m, "old.bin"), *bold = bp(m, "old.bin");
    g_autofree guint8 *expect = g_malloc(OLD_SIZE);
    old_pattern(expect);
    {
        g_autoptr(GError) gerr = NULL;
        g_file_set_contents_full(old, (const char *)expect, OLD_SIZE, G_FILE_SET_CONTENTS_NONE,
                                 0644, &gerr);
        g_assert_no_error(gerr);
    }
    int oldfd = open(old, O_RDWR | O_CLOEXEC);
    assert_true(oldfd >= 0);
    g_autofree guint8 *buf = g_malloc(OLD_SIZE);

    Loop *l = g_new0(Loop, 1);
    g_mutex_init(&l->lock);
    l->errors = g_string_new("");
    for (int t = 0; t < THREADS; t++) {
        l->w[t].loop = l;
        l->w[t].id = t;
        g_autofree char *rel = g_strdup_printf("w%d", t);
        l->w[t].dir = mp(m, rel);
        assert_int_equal(mkdir(l->w[t].dir, 0755), 0);
    }

    /* what the daemon holds with the clients idle */
    int64_t attaches0 = mount_metric(m, "ckptfs_daemon_attaches_total");
    int64_t nodes0 = settled_nodes(m, -1);
    int pipes0 = 0, threads0 = 0, fds0 = settled_fds(m, -1, &pipes0, &threads0);
    pid_t first = mount_daemon_pid(m);
    assert_true(first > 0 && first != m->pid);
    g_autofree char *fdlist0 = fd_listing(first);

    GThread *th[THREADS];
    for (int t = 0; t < THREADS; t++)
        th[t] = g_thread_new("committer", worker_thread, &l->w[t]);
    g_autoptr(GString) evmsg = g_string_new("");
    bool ok = wait_progress(&l->commits, 0, 4 * THREADS);
    if (!ok)
        g_string_append(evmsg, "the commit loop made no progress before the first event\n");
    int done = 0, oldio_failures = 0;
    for (int r = 0; ok && r < rounds; r++) {
        /* in the middle of the loop: after a few more commits, at a random moment */
        int c0 = g_atomic_int_get(&l->commits);
        if (!wait_progress(&l->commits, c0, THREADS)) {
            g_string_append_printf(evmsg, "no commit progress before event %d\n", r + 1);
            ok = false;
            break;
        }
        sleep_ms(g_random_int_range(0, 30));
        if (!mount_replace_daemon(m, kind, evmsg)) {
            ok = false;
            break;
        }
        done++;
        /* the descriptor opened before the first event: a write through it
         * lands, and it reads the same bytes */
        guint8 mark[16];
        for (size_t i = 0; i < sizeof mark; i++)
            mark[i] = (guint8)(0xA0 + r + i);
        off_t off = (off_t)r * 1024 + 7;
        if (pwrite(oldfd, mark, sizeof mark, off) != (ssize_t)sizeof mark) {
            g_string_append_printf(evmsg, "pwrite through the old descriptor after event %d: %s\n",
                                   r + 1, g_strerror(errno));
            oldio_failures++;
        } else {
            memcpy(expect + off, mark, sizeof mark);
        }
        if (pread(oldfd, buf, OLD_SIZE, 0) != OLD_SIZE || memcmp(buf, expect, OLD_SIZE) != 0) {
            g_string_append_printf(evmsg, "pread through the old descriptor after event %d: %s\n",
                                   r + 1, errno ? g_strerror(errno) : "wrong bytes");
            oldio_failures++;
        }
        /* the new daemon serves the clients before the next event */
        int c1 = g_atomic_int_get(&l->commits);
        if (!wait_progress(&l->commits, c1, THREADS)) {
            g_string_append_printf(evmsg, "no commit progress after event %d\n", r + 1);
            ok = false;
        }
    }
    if (!ok) {
        fprintf(stderr, "%s", evmsg->str);
        mount_dump_log(m);
        abort_connection(m);
    }
    g_atomic_int_set(&l->stop, 1);
    for (int t = 0; t < THREADS; t++)
        g_thread_join(th[t]);
    print_message("%s x%d: %d commits acknowledged, %d failed calls, %d wrong read-backs\n",
                  kind == DAEMON_KILL ? "kill -9" : "--takeover", done,
                  g_atomic_int_get(&l->commits), g_atomic_int_get(&l->failures),
                  g_atomic_int_get(&l->wrong));
    if (l->errors->len) {
        fprintf(stderr, "failed calls and wrong bytes seen by the clients:\n%s", l->errors->str);
        mount_dump_log(m);
    }
    if (evmsg->len && ok)
        fprintf(stderr, "%s", evmsg->str);
    assert_true(ok);
    assert_int_equal(done, rounds);
    assert_int_equal(g_atomic_int_get(&l->failures), 0);
    assert_int_equal(g_atomic_int_get(&l->wrong), 0);
    assert_int_equal(oldio_failures, 0);

    /* every acknowledged commit is whole, through the mount and in the backing dir */
    int files = check_final_files(m, l, m->work);
    assert_int_equal(check_final_files(m, l, m->bwork), files);
    assert_int_equal(files, THREADS * SLOTS);

    /* the old descriptor: its writes reached the backing file */
    assert_int_equal(fsync(oldfd), 0);
    assert_int_equal(pread(oldfd, buf, OLD_SIZE, 0), OLD_SIZE);
    assert_memory_equal(buf, expect, OLD_SIZE);
    size_t blen = 0;
    g_autofree guint8 *bbytes = read_whole(bold, &blen);
    assert_non_null(bbytes);
    assert_int_equal(blen, OLD_SIZE);
    assert_memory_equal(bbytes, expect, OLD_SIZE);

    /* each event was one attach to the live connection */
    int64_t attaches = mount_metric(m, "ckptfs_daemon_attaches_total");
    print_message("attaches: %" PRId64 " before, %" PRId64 " after %d events\n", attaches0,
                  attaches, rounds);
    assert_int_equal(attaches0, 0);
    assert_int_equal(attaches, rounds);

    /* nodes and the daemon's descriptors are back to where they were with
     * the clients idle (the old file still open, as before): a leak of one
     * per event would show as `rounds` more */
    int64_t nodes1 = settled_nodes(m, nodes0);
    int pipes1 = 0, threads1 = 0, fds1 = settled_fds(m, fds0, &pipes1, &threads1);
    print_message("nodes %" PRId64 " -> %" PRId64 ", daemon fds %d + %d pipe ends, %d threads "
                  "(pid %d) -> %d + %d pipe ends, %d threads (pid %d)\n",
                  nodes0, nodes1, fds0, pipes0, threads0, (int)first, fds1, pipes1, threads1,
                  (int)mount_daemon_pid(m));
    assert_true(nodes0 >= 0 && nodes1 >= 0);
    assert_true(nodes1 <= nodes0 + 2);
    assert_true(fds0 > 0 && fds1 > 0);
    if (fds1 > fds0 + 2 || pipes1 > 2 * threads1) {
        g_autofree char *fdlist1 = fd_listing(mount_daemon_pid(m));
        fprintf(stderr, "the first daemon's descriptors:\n%sthe last one's:\n%s", fdlist0, fdlist1);
    }
    assert_true(fds1 <= fds0 + 2);
    assert_true(pipes1 <= 2 * threads1); /* one splice pipe per thread at most */

    assert_int_equal(close(oldfd), 0);
    for (int t = 0; t < THREADS; t++)
        g_free(l->w[t].dir);
    g_string_free(l->errors, TRUE);
    g_mutex_clear(&l->lock);
    g_free(l);
}

static void test_kill_during_commits(void **state)
{
    commit_loop_under(*state, DAEMON_KILL, KILLS);
}

static void test_takeover_during_commits(void **state)
{
    commit_loop_under(*state, DAEMON_TAKEOVER, TAKEOVERS);
}

/* ---- a walk of _views ---- */

/* The id of job j of the views fixture: the last is as long as a job id
 * may be (128 bytes), so that its views' paths are longer than a node's
 * record keeps as text. */
static char *views_job(int j)
{
    if (j < 7)
        return g_strdup_printf("job%d", j);
    g_autofree char *pad = g_strnfill(124, 'x');
    return g_strdup_printf("job%d%s", j, pad);
}

/* The deep file of job0's first checkpoint, under root: the backing
 * directory ("_state/job0/v1"), or its checkpoint's view. */
static char *views_deep(const char *root, bool backing)
{
    g_autofree char *pad = g_strnfill(40, 'd');
    return g_strdup_printf("%s/%s0/%s1/%s2/%s3/leaf.snap", root,
                           backing ? "_state/job0/v1/" : "job0/checkpoints/1/", pad, pad, pad);
}

/* A few jobs with completed checkpoints, their state in their own roots. */
static void write_views_fixture(const char *root)
{
    for (int j = 0; j < 8; j++) {
        g_autofree char *job = views_job(j);
        for (int c = 1; c <= 3; c++) {
            for (int s = 0; s < 4; s++)
                for (int f = 0; f < 6; f++) {
                    g_autofree char *rel =
                        g_strdup_printf("_state/%s/v%d/%d/part-%d.snap", job, c, s, f);
                    g_autofree char *p = g_build_filename(root, rel, NULL);
                    g_autofree char *d = g_path_get_dirname(p);
                    assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
                    g_autofree char *text =
                        g_strdup_printf("job %d gen %d subtask %d part %d\n", j, c, s, f);
                    put_file(p, text);
                }
            if (j == 0 && c == 1) {
                /* a state tree nested deep: paths too long for a node's
                 * record even with the job as a number */
                g_autofree char *deep = views_deep(root, true);
                g_autofree char *d = g_path_get_dirname(deep);
                assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
                put_file(deep, "deep state\n");
            }
            g_autofree char *mrel = g_strdup_printf("_jobs/%s/chk-%d/COMPLETED", job, c);
            g_autofree char *mk = g_build_filename(root, mrel, NULL);
            g_autofree char *md = g_path_get_dirname(mk);
            assert_int_equal(g_mkdir_with_parents(md, 0755), 0);
            g_autofree char *text = g_strdup_printf(
                "checkpoint=%d\ngeneration=%d\nparticipants=0,1,2,3\nstate=_state/%s\n", c, c, job);
            put_file(mk, text);
        }
    }
}

static int views_setup(void **state)
{
    Mount *m = mount_new();
    write_views_fixture(m->backing);
    const char *args[] = {"-o", "supervise", NULL};
    if (mount_start(m, args) != 0) {
        mount_free(m);
        return -1;
    }
    *state = m;
    return 0;
}

typedef struct {
    const char *root;
    gint visited;
    int err;            /* errno of the first failed call, 0 if none */
    char *failed;       /* which call on which path */
    GPtrArray *entries; /* "relpath type [size crc | -> target]" */
} Walk;

/* Top-level files of _views whose contents change by themselves. */
static bool volatile_file(const char *rel)
{
    return rel[0] == '.' && !strchr(rel, '/');
}

static void walk_fail(Walk *w, const char *op, const char *path)
{
    if (!w->err) {
        w->err = errno ? errno : EIO;
        w->failed = g_strdup_printf("%s %s: %s", op, path, g_strerror(w->err));
    }
}

/* Like find plus cat: readdir, lstat, readlink and a read of every file. */
static void walk_dir(Walk *w, const char *rel)
{
    g_autofree char *dir = g_build_filename(w->root, rel, NULL);
    DIR *d = opendir(dir);
    if (!d) {
        walk_fail(w, "opendir", dir);
        return;
    }
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            g_ptr_array_add(names, g_strdup(de->d_name));
        errno = 0;
    }
    if (errno)
        walk_fail(w, "readdir", dir);
    closedir(d);
    for (guint i = 0; i < names->len && !w->err; i++) {
        g_autofree char *r =
            *rel ? g_build_filename(rel, names->pdata[i], NULL) : g_strdup(names->pdata[i]);
        g_autofree char *p = g_build_filename(w->root, r, NULL);
        struct stat st;
        if (lstat(p, &st) < 0) {
            walk_fail(w, "lstat", p);
            return;
        }
        g_atomic_int_inc(&w->visited);
        if (S_ISDIR(st.st_mode)) {
            g_ptr_array_add(w->entries, g_strdup_printf("%s d", r));
            walk_dir(w, r);
        } else if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = readlink(p, target, sizeof target - 1);
            if (n < 0) {
                walk_fail(w, "readlink", p);
                return;
            }
            target[n] = 0;
            g_ptr_array_add(w->entries, g_strdup_printf("%s l -> %s", r, target));
        } else if (volatile_file(r)) {
            g_ptr_array_add(w->entries, g_strdup_printf("%s f", r));
        } else {
            size_t len = 0;
            g_autofree guint8 *data = read_whole(p, &len);
            if (!data) {
                walk_fail(w, read_failed, p);
                return;
            }
            guint32 h = 2166136261u; /* FNV-1a */
            for (size_t k = 0; k < len; k++)
                h = (h ^ data[k]) * 16777619u;
            g_ptr_array_add(w->entries, g_strdup_printf("%s f %zu %08x", r, len, h));
        }
    }
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static gpointer walk_thread(gpointer p)
{
    Walk *w = p;
    walk_dir(w, "");
    g_ptr_array_sort(w->entries, cmp_str);
    return NULL;
}

static char *joined(GPtrArray *a)
{
    GString *s = g_string_new("");
    for (guint i = 0; i < a->len; i++)
        g_string_append_printf(s, "%s\n", (char *)a->pdata[i]);
    return g_string_free(s, FALSE);
}

/* Starts `find MNT/_views -mindepth 1 -printf ...` with its output in
 * `out` (a file: a pipe would stop find once full). */
static pid_t start_find(Mount *m, const char *out)
{
    g_autofree char *views = g_build_filename(m->mnt, "_views", NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0)
            _exit(126);
        execlp("find", "find", views, "-mindepth", "1", "-printf", "%P %y %s %l\n", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* find's output sorted, without the volatile files' sizes. */
static char *find_listing(const char *out)
{
    g_autofree char *text = get_file(out);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        char *sp = strchr(*l, ' ');
        g_autofree char *rel = g_strndup(*l, sp ? (size_t)(sp - *l) : strlen(*l));
        g_ptr_array_add(keep, volatile_file(rel) ? g_strdup(rel) : g_strdup(*l));
    }
    g_ptr_array_sort(keep, cmp_str);
    return joined(keep);
}

static void views_walk_under(Mount *m, DaemonEvent kind, int rounds)
{
    g_autofree char *views = g_build_filename(m->mnt, "_views", NULL);

    /* the walks without kills */
    kernel_drop_caches();
    Walk ref = {.root = views, .entries = g_ptr_array_new_with_free_func(g_free)};
    walk_thread(&ref);
    if (ref.err) {
        fprintf(stderr, "%s\n", ref.failed);
        mount_dump_log(m);
    }
    assert_int_equal(ref.err, 0);
    g_autofree char *want = joined(ref.entries);
    int total = (int)ref.entries->len;
    assert_true(total > 8 * 3 * 4 * 6); /* every job's state shows */
    kernel_drop_caches();
    g_autofree char *out = g_build_filename(m->base, "find.out", NULL);
    double t0 = now_s();
    pid_t fp = start_find(m, out);
    int st;
    assert_int_equal(waitpid(fp, &st, 0), fp);
    double find_s = now_s() - t0;
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    g_autofree char *find_want = find_listing(out);

    /* a views file open across every replacement, deep enough that its
     * node's record names it through its parent's */
    g_autofree char *deep = views_deep(views, false);
    int deep_fd = open(deep, O_RDONLY);
    assert_true(deep_fd >= 0);

    int mid_walk = 0, mid_find = 0;
    g_autoptr(GString) evmsg = g_string_new("");
    for (int r = 0; r < rounds; r++) {
        kernel_drop_caches(); /* the walk asks the daemon, not the kernel's cache */
        if (r % 2 == 0) {
            /* a walk in a thread, killed once it has seen a third to two thirds */
            Walk w = {.root = views, .entries = g_ptr_array_new_with_free_func(g_free)};
            GThread *th = g_thread_new("walk", walk_thread, &w);
            int at = total / 3 + g_random_int_range(0, total / 3);
            while (g_atomic_int_get(&w.visited) < at && !w.err && w.visited < total)
                sleep_ms(1);
            mid_walk += g_atomic_int_get(&w.visited) < total;
            pid_t nd = mount_replace_daemon(m, kind, evmsg);
            if (!nd) {
                fprintf(stderr, "%s", evmsg->str);
                mount_dump_log(m);
                abort_connection(m);
            }
            g_thread_join(th);
            assert_true(nd > 0);
            if (w.err)
                fprintf(stderr, "walk %d: %s\n", r + 1, w.failed);
            assert_int_equal(w.err, 0);
            g_autofree char *got = joined(w.entries);
            if (strcmp(got, want))
                fprintf(stderr, "walk %d listed:\n%s\ninstead of:\n%s\n", r + 1, got, want);
            assert_string_equal(got, want);
            g_ptr_array_unref(w.entries);
            g_free(w.failed);
        } else {
            /* find(1), killed at a random point of its usual duration */
            pid_t pid = start_find(m, out);
            sleep_ms((int)(find_s * 1000 * g_random_double_range(0.2, 0.8)));
            siginfo_t si = {0};
            mid_find +=
                waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
            pid_t nd = mount_replace_daemon(m, kind, evmsg);
            if (!nd) {
                fprintf(stderr, "%s", evmsg->str);
                mount_dump_log(m);
                abort_connection(m);
            }
            int status;
            assert_int_equal(waitpid(pid, &status, 0), pid);
            assert_true(nd > 0);
            g_autofree char *got = find_listing(out);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fprintf(stderr, "find %d: status %d\n", r + 1, status);
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
            if (strcmp(got, find_want))
                fprintf(stderr, "find %d listed:\n%s\ninstead of:\n%s\n", r + 1, got, find_want);
            assert_string_equal(got, find_want);
        }
    }
    char buf[32] = {0};
    struct stat dst;
    if (fstat(deep_fd, &dst) < 0 || pread(deep_fd, buf, sizeof buf - 1, 0) != 11)
        fail_msg("a deep views file open across the replacements: %s", g_strerror(errno));
    assert_string_equal(buf, "deep state\n");
    assert_int_equal(dst.st_size, 11);
    close(deep_fd);
    print_message("views: %d entries; %d %s, %d in the middle of a walk, %d of a find\n", total,
                  rounds, kind == DAEMON_KILL ? "kills" : "takeovers", mid_walk, mid_find);
    assert_int_equal(mount_metric(m, "ckptfs_daemon_attaches_total"), rounds);
    g_ptr_array_unref(ref.entries);
}

static void test_kill_during_views_walk(void **state)
{
    views_walk_under(*state, DAEMON_KILL, KILLS);
}

static void test_takeover_during_views_walk(void **state)
{
    views_walk_under(*state, DAEMON_TAKEOVER, TAKEOVERS);
}

/* Runs a client thread (fn, which returns once *stop is set) amid `rounds`
 * events (kill -9 or --takeover), while it counts what it got acknowledged
 * in *acked: each event at a random moment after fresh progress, then
 * progress again.  The events done; *ok false on a hang, after which the
 * connection is aborted so that the client returns. */
static int client_amid(Mount *m, DaemonEvent kind, int rounds, GThreadFunc fn, gpointer client,
                       gint *acked, gint *stop, bool *ok)
{
    GThread *th = g_thread_new("client", fn, client);
    g_autoptr(GString) evmsg = g_string_new("");
    *ok = wait_progress(acked, 0, 5);
    int done = 0;
    for (int r = 0; *ok && r < rounds; r++) {
        *ok = wait_progress(acked, g_atomic_int_get(acked), 2);
        if (!*ok) {
            g_string_append_printf(evmsg, "no progress before event %d\n", r + 1);
            break;
        }
        sleep_ms(g_random_int_range(0, 20));
        *ok = mount_replace_daemon(m, kind, evmsg) > 0;
        if (!*ok)
            break;
        done++;
        *ok = wait_progress(acked, g_atomic_int_get(acked), 2);
        if (!*ok)
            g_string_append_printf(evmsg, "no progress after event %d\n", r + 1);
    }
    if (!*ok) {
        fprintf(stderr, "%s", evmsg->str);
        mount_dump_log(m);
        abort_connection(m);
    }
    g_atomic_int_set(stop, 1);
    g_thread_join(th);
    return done;
}

/* ---- SQLite ---- */

typedef struct {
    sqlite3 *db;
    gint stop;
    gint txns;   /* acknowledged transactions */
    gint64 rows; /* rows of acknowledged transactions (written by the thread only) */
    gint failures;
    GString *errors;
} SqlLoop;

static bool sql_ok(SqlLoop *s, int rc, const char *what)
{
    if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW)
        return true;
    if (g_atomic_int_add(&s->failures, 1) < 20)
        g_string_append_printf(s->errors, "  %s: %s (rc %d, extended %d, errno %d)\n", what,
                               sqlite3_errmsg(s->db), rc, sqlite3_extended_errcode(s->db),
                               sqlite3_system_errno(s->db));
    return false;
}

static gpointer sql_thread(gpointer p)
{
    SqlLoop *s = p;
    sqlite3_stmt *ins = NULL;
    if (!sql_ok(s, sqlite3_prepare_v2(s->db, "INSERT INTO kv (v) VALUES (?)", -1, &ins, NULL),
                "prepare"))
        return NULL;
    char v[300];
    for (int t = 0; !g_atomic_int_get(&s->stop); t++) {
        if (!sql_ok(s, sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL), "BEGIN"))
            continue;
        bool ok = true;
        for (int i = 0; i < 10 && ok; i++) {
            g_snprintf(v, sizeof v, "txn %d row %d %0256d", t, i, t * 10 + i);
            ok = sql_ok(s, sqlite3_bind_text(ins, 1, v, -1, SQLITE_TRANSIENT), "bind") &&
                 sql_ok(s, sqlite3_step(ins), "INSERT") && sql_ok(s, sqlite3_reset(ins), "reset");
        }
        if (!ok) {
            sqlite3_reset(ins);
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            continue;
        }
        if (sql_ok(s, sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL), "COMMIT")) {
            s->rows += 10;
            g_atomic_int_inc(&s->txns);
        } else {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        }
    }
    sqlite3_finalize(ins);
    return NULL;
}

static char *query_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    char *v = g_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

static void sqlite_under(Mount *m, const char *journal, DaemonEvent kind, int rounds)
{
    g_autofree char *name = g_strdup_printf("%s.db", journal);
    g_autofree char *path = mp(m, name), *bpath = bp(m, name);
    SqlLoop s = {.errors = g_string_new("")};
    assert_int_equal(sqlite3_open(path, &s.db), SQLITE_OK);
    g_autofree char *pragma = g_strdup_printf("PRAGMA journal_mode=%s", journal);
    g_autofree char *mode = query_text(s.db, pragma);
    assert_string_equal(mode, journal);
    assert_int_equal(sqlite3_exec(s.db, "PRAGMA synchronous=FULL", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(s.db, "CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT)", NULL, NULL, NULL),
        SQLITE_OK);

    bool ok;
    int done = client_amid(m, kind, rounds, sql_thread, &s, &s.txns, &s.stop, &ok);
    print_message("sqlite %s: %d %s, %d transactions acknowledged, %d failed calls\n", journal,
                  done, kind == DAEMON_KILL ? "kills" : "takeovers", g_atomic_int_get(&s.txns),
                  g_atomic_int_get(&s.failures));
    if (s.errors->len) {
        fprintf(stderr, "failed sqlite calls:\n%s", s.errors->str);
        mount_dump_log(m);
    }
    assert_true(ok);
    assert_int_equal(g_atomic_int_get(&s.failures), 0);

    g_autofree char *count = query_text(s.db, "SELECT count(*) FROM kv");
    g_autofree char *want = g_strdup_printf("%" G_GINT64_FORMAT, s.rows);
    assert_string_equal(count, want);
    g_autofree char *integrity = query_text(s.db, "PRAGMA integrity_check");
    assert_string_equal(integrity, "ok");
    if (!strcmp(journal, "wal"))
        assert_int_equal(sqlite3_exec(s.db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL),
                         SQLITE_OK);
    assert_int_equal(sqlite3_close(s.db), SQLITE_OK);

    /* the backing file is the same database */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(bpath, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    g_autofree char *bcount = query_text(db, "SELECT count(*) FROM kv");
    assert_string_equal(bcount, want);
    g_autofree char *bok = query_text(db, "PRAGMA integrity_check");
    assert_string_equal(bok, "ok");
    sqlite3_close(db);
    assert_int_equal(mount_metric(m, "ckptfs_daemon_attaches_total"), rounds);
    g_string_free(s.errors, TRUE);
}

static void test_kill_during_sqlite_wal(void **state)
{
    sqlite_under(*state, "wal", DAEMON_KILL, KILLS);
}

static void test_kill_during_sqlite_delete(void **state)
{
    sqlite_under(*state, "delete", DAEMON_KILL, KILLS);
}

static void test_takeover_during_sqlite_wal(void **state)
{
    sqlite_under(*state, "wal", DAEMON_TAKEOVER, TAKEOVERS);
}

/* ---- RocksDB ---- */

typedef struct {
    rocksdb_t *db;
    gint stop;
    gint batches; /* acknowledged (synced) batches of ROCKS_BATCH keys */
    gint failures;
    GString *errors;
} RocksLoop;

#define ROCKS_BATCH 10

static void rocks_kv(int n, char *k, size_t kl, char *v, size_t vl, int *klen, int *vlen)
{
    *klen = g_snprintf(k, kl, "key-%09d", n);
    *vlen = g_snprintf(v, vl, "value-%09d-%0200d", n, n);
}

/* Synced batches, with a write buffer small enough that the loop flushes
 * and compacts all along: files created, renamed (CURRENT), synced with
 * their directory, and deleted while the table cache still holds them. */
static gpointer rocks_thread(gpointer p)
{
    RocksLoop *r = p;
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(wo, 1);
    for (int b = 0; !g_atomic_int_get(&r->stop); b++) {
        rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
        for (int i = 0; i < ROCKS_BATCH; i++) {
            char k[32], v[256];
            int kl, vl;
            rocks_kv(b * ROCKS_BATCH + i, k, sizeof k, v, sizeof v, &kl, &vl);
            rocksdb_writebatch_put(wb, k, (size_t)kl, v, (size_t)vl);
        }
        char *err = NULL;
        rocksdb_write(r->db, wo, wb, &err);
        rocksdb_writebatch_destroy(wb);
        if (err) {
            if (g_atomic_int_add(&r->failures, 1) < 20)
                g_string_append_printf(r->errors, "  batch %d: %s\n", b, err);
            rocksdb_free(err);
            break; /* RocksDB stops writing after a failed sync */
        }
        g_atomic_int_inc(&r->batches);
    }
    rocksdb_writeoptions_destroy(wo);
    return NULL;
}

/* Every acknowledged key of `batches` reads back from the database at
 * path; the keys past them are at most the one batch in flight. */
static void check_rocks_keys(const char *path, bool read_only, int batches)
{
    char *err = NULL;
    rocksdb_options_t *opts = rocksdb_options_create();
    rocksdb_t *db = read_only ? rocksdb_open_for_read_only(opts, path, 0, &err)
                              : rocksdb_open(opts, path, &err);
    if (err)
        fail_msg("rocksdb open %s: %s", path, err);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    for (int n = 0; n < batches * ROCKS_BATCH; n++) {
        char k[32], v[256];
        int kl, vl;
        rocks_kv(n, k, sizeof k, v, sizeof v, &kl, &vl);
        size_t len = 0;
        char *got = rocksdb_get(db, ro, k, (size_t)kl, &len, &err);
        if (err || !got || len != (size_t)vl || memcmp(got, v, len) != 0)
            fail_msg("rocksdb %s: acknowledged key %s %s", path, k,
                     err   ? err
                     : got ? "has another value"
                           : "is missing");
        rocksdb_free(got);
    }
    int more = 0;
    rocksdb_iterator_t *it = rocksdb_create_iterator(db, ro);
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it))
        more++;
    rocksdb_iter_destroy(it);
    more -= batches * ROCKS_BATCH;
    assert_true(more == 0 || more == ROCKS_BATCH);
    rocksdb_readoptions_destroy(ro);
    rocksdb_close(db);
    rocksdb_options_destroy(opts);
}

static void rocksdb_under(Mount *m, DaemonEvent kind, int rounds)
{
    g_autofree char *path = mp(m, "rocks"), *bpath = bp(m, "rocks");
    RocksLoop r = {.errors = g_string_new("")};
    char *err = NULL;
    rocksdb_options_t *opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(opts, 1);
    rocksdb_options_set_write_buffer_size(opts, 64 * 1024);
    rocksdb_options_set_level0_file_num_compaction_trigger(opts, 2);
    rocksdb_options_set_use_fsync(opts, 1);
    r.db = rocksdb_open(opts, path, &err);
    if (err)
        fail_msg("rocksdb open: %s", err);

    bool ok;
    int done = client_amid(m, kind, rounds, rocks_thread, &r, &r.batches, &r.stop, &ok);
    print_message("rocksdb: %d %s, %d batches acknowledged, %d failed writes\n", done,
                  kind == DAEMON_KILL ? "kills" : "takeovers", g_atomic_int_get(&r.batches),
                  g_atomic_int_get(&r.failures));
    if (r.errors->len) {
        fprintf(stderr, "failed rocksdb writes:\n%s", r.errors->str);
        mount_dump_log(m);
    }
    assert_true(ok);
    assert_int_equal(g_atomic_int_get(&r.failures), 0);
    rocksdb_close(r.db);
    rocksdb_options_destroy(opts);

    /* the loop flushed and compacted: SST files were made and deleted */
    g_autoptr(GDir) d = g_dir_open(bpath, 0, NULL);
    assert_non_null(d);
    guint64 ssts = 0, newest = 0;
    for (const char *name; (name = g_dir_read_name(d));) {
        if (g_str_has_suffix(name, ".sst")) {
            ssts++;
            newest = MAX(newest, g_ascii_strtoull(name, NULL, 10));
        }
    }
    print_message("rocksdb: %" G_GUINT64_FORMAT " SST files, the newest numbered %" G_GUINT64_FORMAT
                  "\n",
                  ssts, newest);
    assert_true(ssts > 0 && newest > ssts + 2);
    /* through the mount, and the backing copy is the same database */
    check_rocks_keys(path, false, r.batches);
    check_rocks_keys(bpath, true, r.batches);
    assert_int_equal(mount_metric(m, "ckptfs_daemon_attaches_total"), rounds);
    g_string_free(r.errors, TRUE);
}

static void test_kill_during_rocksdb(void **state)
{
    rocksdb_under(*state, DAEMON_KILL, KILLS);
}

static void test_takeover_during_rocksdb(void **state)
{
    rocksdb_under(*state, DAEMON_TAKEOVER, TAKEOVERS);
}

/* ---- the supervisor's own interface ---- */

/* Runs `ckptfs --takeover MNT`: the exit code, stderr in *err. */
static int takeover(const char *mnt, char **err)
{
    const char *argv[] = {g_getenv("CKPTFS_BIN"), "--takeover", mnt, NULL};
    int status = -1;
    g_autoptr(GError) gerr = NULL;
    assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                             NULL, err, &status, &gerr));
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void assert_one_line(const char *err)
{
    const char *nl = strchr(err, '\n');
    if (!nl || nl[1])
        fprintf(stderr, "stderr: %s\n", err);
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    assert_true(nl > err);
}

/* --takeover where no supervised ckptfs serves: exit 1, one line, and the
 * unsupervised mount goes on serving. */
static void test_takeover_without_supervisor(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "nosupervise", NULL};
    assert_int_equal(mount_start(m, args), 0);
    assert_false(m->supervised);
    assert_int_equal(mount_daemon_pid(m), m->pid);
    g_autofree char *err = NULL;
    assert_int_equal(takeover(m->mnt, &err), 1);
    assert_one_line(err);
    assert_int_equal(kill(m->pid, 0), 0);
    g_autofree char *f = mp(m, "still");
    put_file(f, "serving");
    g_autofree char *got = get_file(f);
    assert_string_equal(got, "serving");

    /* nothing mounted there at all */
    g_autofree char *plain = g_build_filename(m->base, "plain", NULL);
    assert_int_equal(mkdir(plain, 0755), 0);
    g_autofree char *err2 = NULL;
    assert_int_equal(takeover(plain, &err2), 1);
    assert_one_line(err2);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* auto_unmount would unmount at the first daemon's death: refused with
 * supervise, in one line, with nothing mounted. */
static void test_supervise_refuses_auto_unmount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *argv[] = {
        g_getenv("CKPTFS_BIN"), "-f", "-o", "supervise,auto_unmount", m->backing, m->mnt, NULL};
    g_autofree char *out = NULL, *err = NULL;
    int status = -1;
    assert_true(g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL, &out, &err, &status, NULL));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_one_line(err);
    assert_non_null(strstr(err, "auto_unmount"));
    struct statfs sfs, parent;
    g_autofree char *up = g_path_get_dirname(m->mnt);
    assert_int_equal(statfs(m->mnt, &sfs), 0);
    assert_int_equal(statfs(up, &parent), 0);
    assert_true(sfs.f_type == parent.f_type); /* not a FUSE mount */
    mount_free(m);
}

/* auto_unmount alone, where a mount is supervised by default (under
 * systemd, INVOCATION_ID set): the mount is up, not supervised, and goes
 * when its daemon is killed, as auto_unmount promises. */
static void test_auto_unmount_alone(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_setenv("INVOCATION_ID", "ckptfs-test", TRUE);
    const char *args[] = {"-o", "auto_unmount", NULL};
    int rc = mount_start(m, args);
    g_unsetenv("INVOCATION_ID");
    assert_int_equal(rc, 0);
    assert_true(mount_log_has(m, "not supervised"));
    /* over a ring, a dead daemon's mount could answer ECONNABORTED, which
     * fusermount3 does not take for a dead mount (said once the INIT reply
     * is out, a moment after the mount shows) */
    bool said = false;
    for (int i = 0; i < 500 && !(said = mount_log_has(m, "requests come over /dev/fuse")); i++)
        g_usleep(10000);
    assert_true(said);
    g_autofree char *f = mp(m, "before-kill");
    put_file(f, "x");
    assert_int_equal(kill(m->pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(m->pid, &status, 0), m->pid);
    m->pid = 0;
    m->exit_status = 0;
    struct statfs sfs, parent;
    g_autofree char *up = g_path_get_dirname(m->mnt);
    assert_int_equal(statfs(up, &parent), 0);
    /* fusermount3's helper unmounts once the daemon's descriptor closes;
     * 30 s at most: a hang, not a time limit */
    bool gone = false;
    for (int i = 0; i < 3000 && !gone; i++) {
        /* ENOTCONN until then: the dead daemon's mount */
        gone = statfs(m->mnt, &sfs) == 0 && sfs.f_type == parent.f_type;
        if (!gone)
            g_usleep(10000);
    }
    assert_true(gone); /* not a FUSE mount any more */
    g_autofree char *b = bp(m, "before-kill");
    g_autofree char *got = get_file(b);
    assert_string_equal(got, "x");
    mount_free(m);
}

/* SIGTERM to the supervisor: it unmounts, its daemon exits, it exits 0. */
static void test_sigterm_supervisor(void **state)
{
    Mount *m = *state;
    assert_true(m->supervised);
    pid_t d = mount_daemon_pid(m);
    assert_true(d > 0 && d != m->pid);
    g_autofree char *f = mp(m, "before-term");
    put_file(f, "x");
    assert_int_equal(mount_metric(m, "ckptfs_daemon_attaches_total"), 0);
    assert_int_equal(kill(m->pid, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(m->pid, &status, 0), m->pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "supervisor: wait status %d\n", status);
        mount_dump_log(m);
    }
    m->pid = 0;
    m->exit_status = status;
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* the daemon is gone with it (not left serving, nor orphaned) */
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        gone = kill(d, 0) != 0 && errno == ESRCH;
        if (!gone)
            sleep_ms(10);
    }
    assert_true(gone);
    g_autofree char *info = get_file("/proc/self/mountinfo");
    g_autofree char *needle = g_strdup_printf(" %s ", m->mnt);
    assert_null(strstr(info, needle));
    g_autofree char *bf = bp(m, "before-term");
    g_autofree char *got = get_file(bf);
    assert_string_equal(got, "x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill_during_commits, sup_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_kill_during_views_walk, views_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_kill_during_sqlite_wal, sup_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_kill_during_sqlite_delete, sup_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_takeover_during_commits, sup_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_takeover_during_views_walk, views_setup,
                                        mount_teardown),
        cmocka_unit_test_setup_teardown(test_takeover_during_sqlite_wal, sup_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_kill_during_rocksdb, sup_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_takeover_during_rocksdb, sup_setup, mount_teardown),
        cmocka_unit_test(test_takeover_without_supervisor),
        cmocka_unit_test(test_supervise_refuses_auto_unmount),
        cmocka_unit_test(test_auto_unmount_alone),
        cmocka_unit_test_setup_teardown(test_sigterm_supervisor, sup_setup, mount_teardown),
    };
    /* CKPTFS_OUTLIVE_ONLY=test_kill_during_commits (a cmocka pattern) runs
     * one test, e.g. to repeat it */
    const char *only = g_getenv("CKPTFS_OUTLIVE_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("mount/outlive", tests, NULL, NULL);
}
