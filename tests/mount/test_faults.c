/* Faults: kill -9 of the daemon in the
 * middle of a stream of checkpoint commits loses no commit that returned
 * success and a remount on the same mountpoint works; requests in flight
 * when it dies fail as a dead mount's do; a full backing file
 * system gives ENOSPC and nothing else; a file removed behind the mount's
 * back stays readable through the descriptor that holds it. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "mount_gone.h"
#include "mountrun.h"

/* The bytes of commit i: 12 KiB that differ per commit and per offset. */
static char *commit_bytes(unsigned i, size_t *len)
{
    GString *s = g_string_sized_new(12 * 1024);
    for (unsigned line = 0; s->len < 12 * 1024 - 64; line++)
        g_string_append_printf(s, "commit %u line %u checksum %u\n", i, line, i * 7919u + line);
    *len = s->len;
    return g_string_free(s, FALSE);
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* One checkpoint commit the way a worker makes it: tmp, fsync, rename,
 * fsync of the directory.  0 on success. */
static int commit(const char *dir, unsigned i)
{
    g_autofree char *tmp = g_strdup_printf("%s/c-%u.snap.tmp", dir, i);
    g_autofree char *fin = g_strdup_printf("%s/c-%u.snap", dir, i);
    size_t len;
    g_autofree char *data = commit_bytes(i, &len);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (write_all(fd, data, len) < 0 || fsync(fd) < 0) {
        close(fd);
        return -1;
    }
    if (close(fd) < 0 || rename(tmp, fin) < 0)
        return -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = fsync(dfd);
    close(dfd);
    return rc;
}

/* A child committing c-<start>, c-<start+1>, ... into dir until a commit
 * fails, writing each committed index to the pipe (outside the mount). */
static pid_t start_committer(const char *dir, unsigned start, int *read_fd)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        for (unsigned i = start; i < start + 100000; i++) {
            if (commit(dir, i) != 0)
                _exit(0);
            char line[16];
            int n = snprintf(line, sizeof line, "%u\n", i);
            if (write(p[1], line, (size_t)n) != n)
                _exit(1);
        }
        _exit(2);
    }
    close(p[1]);
    *read_fd = p[0];
    return pid;
}

/* Reads committed indices from the pipe until `want` are in (want > 0) or
 * until EOF (want == 0). */
static void read_commits(int fd, GArray *done, guint want, GString *partial)
{
    char buf[256];
    while (want == 0 || done->len < want) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        g_string_append_len(partial, buf, n);
        char *nl;
        while ((nl = strchr(partial->str, '\n'))) {
            unsigned v = (unsigned)strtoul(partial->str, NULL, 10);
            g_array_append_val(done, v);
            g_string_erase(partial, 0, nl - partial->str + 1);
        }
    }
}

static void assert_commit_whole(const char *dir, unsigned i)
{
    g_autofree char *fin = g_strdup_printf("%s/c-%u.snap", dir, i);
    size_t len;
    g_autofree char *want = commit_bytes(i, &len);
    g_autofree char *got = NULL;
    gsize got_len = 0;
    g_autoptr(GError) err = NULL;
    if (!g_file_get_contents(fin, &got, &got_len, &err))
        fprintf(stderr, "commit %u reported done but lost: %s\n", i, err->message);
    assert_null(err);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, want, len);
}

static bool is_stale(Mount *m)
{
    /* statfs always asks the daemon (a stat may come from the kernel's
     * attribute cache) */
    struct statfs sfs;
    return statfs(m->mnt, &sfs) < 0 && ck_mount_gone_errno(errno);
}

/* A killed daemon's mount goes stale once the kernel has let go of its
 * descriptors: over io_uring the ring holds the device file until the
 * ring's own teardown, which runs after the process is reaped.  Up to
 * 10 s; each other answer on the way is printed. */
static bool goes_stale(Mount *m)
{
    for (int i = 0; i < 200; i++) {
        if (is_stale(m))
            return true;
        struct statfs sfs;
        int r = statfs(m->mnt, &sfs);
        print_message("statfs after the kill: %s\n", r == 0 ? "answered" : g_strerror(errno));
        g_usleep(50000);
    }
    return false;
}

/* Callers asking statfs until the first failure, each pinned to a CPU of
 * its own (over io_uring each CPU has its own queue).  Static: a failed
 * assertion leaves the test by longjmp, and threads still asking must not
 * write into a frame that is gone. */
#define ASKERS_MAX 8
typedef struct {
    const char *mnt;
    int cpu;
    int err;
    guint64 answered;
} Asker;
static Asker askers[ASKERS_MAX];
static pthread_t asker_threads[ASKERS_MAX];
static int askers_ready; /* atomic: callers answered at least once */
static int askers_stop;  /* atomic: the kill failed, stop asking */

static void *ask_until_it_fails(void *p)
{
    Asker *a = p;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(a->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    struct statfs sfs;
    while (statfs(a->mnt, &sfs) == 0) {
        if (a->answered++ == 0)
            g_atomic_int_inc(&askers_ready);
        if (g_atomic_int_get(&askers_stop)) {
            a->err = 0;
            return NULL;
        }
    }
    a->err = errno;
    return NULL;
}

static int count_in(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* Requests on up to ASKERS_MAX queues when the daemon is killed: each
 * caller's first failure must be one that says "the daemon is gone" (what
 * ckptctl run's clearing and the tests go by); over io_uring a request
 * handed to a ring entry while the daemon exits ends ECANCELED.  Each
 * round's new daemon clears the dead mount the round before left (of its
 * own -o subtype=). */
static void test_kill_9_amid_requests(void **state)
{
    (void)state;
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int cpus[ASKERS_MAX], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < ASKERS_MAX; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    assert_true(n > 0);
    const int gone[] = {ENOTCONN, ECONNABORTED, ECANCELED};
    int seen[G_N_ELEMENTS(gone)] = {0};
    Mount *m = mount_new();
    /* a type of its own: a restart clears a dead mount of its own type */
    const char *const args[] = {"-o", "subtype=ckptfs-test", NULL};
    for (int round = 0; round < 5; round++) {
        assert_int_equal(mount_start(m, args), 0);
        g_autofree char *log = get_file(m->log);
        assert_int_equal(count_in(log, "clearing a stale mount"), round);
        g_atomic_int_set(&askers_ready, 0);
        g_atomic_int_set(&askers_stop, 0);
        int started = 0;
        while (started < n) {
            askers[started] = (Asker){.mnt = m->mnt, .cpu = cpus[started]};
            if (pthread_create(&asker_threads[started], NULL, ask_until_it_fails,
                               &askers[started]) != 0)
                break;
            started++;
        }
        /* every caller in its loop (a busy machine may take a while), then the kill */
        for (int i = 0; i < 1000 && g_atomic_int_get(&askers_ready) < started; i++)
            g_usleep(10 * 1000);
        int killed = kill(m->pid, SIGKILL);
        int status = 0;
        pid_t reaped = killed == 0 ? waitpid(m->pid, &status, 0) : -1;
        if (reaped > 0) {
            m->pid = 0;
            m->exit_status = 0;
        } else {
            g_atomic_int_set(&askers_stop, 1); /* the mount still answers */
        }
        for (int i = 0; i < started; i++)
            pthread_join(asker_threads[i], NULL);
        assert_int_equal(started, n);
        assert_int_equal(killed, 0);
        assert_true(reaped > 0 && WIFSIGNALED(status));
        for (int i = 0; i < n; i++) {
            assert_true(askers[i].answered > 0);
            size_t k = 0;
            while (k < G_N_ELEMENTS(gone) && gone[k] != askers[i].err)
                k++;
            if (k == G_N_ELEMENTS(gone) || !ck_mount_gone_errno(askers[i].err))
                fail_msg("a statfs in flight at the kill failed with %s",
                         g_strerror(askers[i].err));
            seen[k]++;
        }
        assert_true(goes_stale(m));
    }
    assert_int_equal(mount_start(m, args), 0);
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *mounts = get_file("/proc/self/mountinfo");
    assert_null(strstr(mounts, m->mnt));
    for (size_t k = 0; k < G_N_ELEMENTS(gone); k++)
        print_message("first failure at the kill: %s, %d callers\n", g_strerror(gone[k]), seen[k]);
    mount_free(m);
}

/* A mount whose backing directory is on a mount whose daemon died (here a
 * second ckptfs) is alive: its statfs fails with EIO, never with an errno
 * that says its own daemon is gone, so no restart or ckptctl run takes it
 * for dead and detaches it. */
static void test_backing_daemon_gone(void **state)
{
    (void)state;
    Mount *inner = mount_new();
    Mount *outer = mount_new();
    assert_int_equal(mount_start(inner, NULL), 0);
    g_free(outer->backing);
    outer->backing = g_strdup(inner->mnt);
    const char *const views2[] = {"-o", "views=_views2", NULL}; /* the inner's are there */
    assert_int_equal(mount_start(outer, views2), 0);
    /* what the kill gives is collected first, then the inner's dead mount
     * is detached, then asserted: a failed assertion must not leave it */
    int killed = kill(inner->pid, SIGKILL);
    int status;
    bool reaped = killed == 0 && waitpid(inner->pid, &status, 0) == inner->pid;
    if (reaped) {
        inner->pid = 0;
        inner->exit_status = 0;
    }
    bool stale = reaped && goes_stale(inner);
    struct statfs sfs;
    errno = 0;
    int rc = statfs(outer->mnt, &sfs);
    int rc_errno = errno;
    MountState outer_state = mountrun_state(outer->mnt);
    /* a second daemon on the mount point finds it served (and leaves it) */
    const char *argv[] = {g_getenv("CKPTFS_BIN"), "-f",       "-o", "views=_views2",
                          outer->backing,         outer->mnt, NULL};
    g_autofree char *err = NULL;
    int st = -1;
    bool spawned = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                NULL, &err, &st, NULL);
    /* a passthrough open of a file of a FUSE backing is one stacking too deep */
    mount_expect_log(outer, "cannot register a backing file");
    int stopped = mount_stop(outer);
    const char *lazy_inner[] = {"fusermount3", "-u", "-z", inner->mnt, NULL};
    int detached = stale ? run_cmd(lazy_inner, NULL) : -1;
    assert_true(stale);
    assert_int_equal(detached, 0);
    assert_int_equal(rc, -1);
    assert_int_equal(rc_errno, EIO);
    assert_int_equal(outer_state, MOUNTRUN_LIVE);
    assert_true(spawned && WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    assert_non_null(strstr(err, "already serves this mount point"));
    assert_int_equal(stopped, 0);
    mount_free(outer);
    mount_free(inner);
}

/* Three rounds: commits stream into the mount, the daemon is killed with
 * SIGKILL after 40 of them; every commit the child saw succeed is whole in
 * the backing dir.  Rounds one and three clear the dead mount with
 * fusermount3 -u -z before the remount, round two leaves it for the new
 * daemon to clear. */
static void kill_9_during_commits(const char *const *args)
{
    Mount *m = mount_new();
    unsigned next = 0;
    guint total = 0;
    /* the commits in flight at a kill that never landed (absent, as they
     * may be): no earlier round committed them */
    g_autoptr(GArray) absent = g_array_new(FALSE, FALSE, sizeof(unsigned));
    for (int round = 0; round < 3; round++) {
        assert_int_equal(mount_start(m, args), 0);
        /* what earlier rounds committed reads back through the new mount */
        for (unsigned i = 0; i < next; i += 7) {
            bool landed = true;
            for (guint k = 0; k < absent->len; k++)
                landed &= g_array_index(absent, unsigned, k) != i;
            if (landed)
                assert_commit_whole(m->work, i);
        }
        int rfd;
        pid_t child = start_committer(m->work, next, &rfd);
        g_autoptr(GArray) done = g_array_new(FALSE, FALSE, sizeof(unsigned));
        g_autoptr(GString) partial = g_string_new("");
        read_commits(rfd, done, 40, partial);
        assert_true(done->len >= 40); /* a read may bring a few more */
        assert_int_equal(kill(m->pid, SIGKILL), 0);
        read_commits(rfd, done, 0, partial);
        close(rfd);
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);              /* it stopped on a failed commit */
        assert_int_equal(waitpid(m->pid, &status, 0), m->pid); /* the killed daemon */
        assert_true(WIFSIGNALED(status));
        m->pid = 0;
        m->exit_status = 0;
        assert_true(goes_stale(m));
        for (guint k = 0; k < done->len; k++)
            assert_commit_whole(m->bwork, g_array_index(done, unsigned, k));
        total += done->len;
        next = g_array_index(done, unsigned, done->len - 1) + 1;
        /* the commit in flight is either whole or absent; a tmp may remain */
        g_autofree char *inflight = g_strdup_printf("%s/c-%u.snap", m->bwork, next);
        if (access(inflight, F_OK) == 0)
            assert_commit_whole(m->bwork, next);
        else
            g_array_append_val(absent, next);
        next++;
        if (round != 1) {
            const char *lazy[] = {"fusermount3", "-u", "-z", m->mnt, NULL};
            assert_int_equal(run_cmd(lazy, NULL), 0);
            assert_false(is_stale(m));
        }
    }
    assert_int_equal(mount_start(m, args), 0);
    assert_int_equal(commit(m->work, next), 0);
    assert_commit_whole(m->bwork, next);
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *mounts = get_file("/proc/self/mountinfo");
    assert_null(strstr(mounts, m->mnt));
    print_message("kill -9%s: %u commits verified over 3 kills\n", args ? " (writeback)" : "",
                  total);
    mount_free(m);
}

static void test_kill_9_during_commits(void **state)
{
    (void)state;
    kill_9_during_commits(NULL);
}

/* With the kernel's writeback cache a write lands in the page cache first:
 * fsync must still reach the backing file before it returns. */
static void test_kill_9_during_commits_writeback(void **state)
{
    (void)state;
    const char *args[] = {"-o", "writeback", NULL};
    kill_9_during_commits(args);
}

/* SIGTERM in the middle of the commit stream: the daemon unmounts (the
 * mount is busy: lazily) and exits 0; every commit that returned success is
 * whole. */
static void test_sigterm_during_commits(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    int rfd;
    pid_t child = start_committer(m->work, 0, &rfd);
    g_autoptr(GArray) done = g_array_new(FALSE, FALSE, sizeof(unsigned));
    g_autoptr(GString) partial = g_string_new("");
    read_commits(rfd, done, 30, partial);
    assert_true(done->len >= 30);
    assert_int_equal(kill(m->pid, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(m->pid, &status, 0), m->pid);
    m->pid = 0;
    m->exit_status = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        mount_dump_log(m);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    read_commits(rfd, done, 0, partial);
    close(rfd);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    for (guint k = 0; k < done->len; k++)
        assert_commit_whole(m->bwork, g_array_index(done, unsigned, k));
    g_autofree char *mounts = get_file("/proc/self/mountinfo");
    g_autofree char *needle = g_strdup_printf(" %s ", m->mnt);
    assert_null(strstr(mounts, needle));
    mount_free(m);
}

/* ---- backing file system full ---- */

typedef struct {
    Mount *m;
} FullFs;

static int setup_full_with(void **state, const char *const *args)
{
    FullFs *f = g_new0(FullFs, 1);
    f->m = mount_new();
    int rc = mount_backing_tmpfs(f->m, "size=4m");
    if (rc != 0) {
        fprintf(stderr, "tmpfs: %s\n", g_strerror(-rc));
        mount_free(f->m);
        g_free(f);
        return -1;
    }
    if (mount_start(f->m, args) != 0) {
        mount_free(f->m);
        g_free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int setup_full(void **state)
{
    return setup_full_with(state, NULL);
}

static int setup_full_writeback(void **state)
{
    const char *args[] = {"-o", "writeback", NULL};
    return setup_full_with(state, args);
}

static int teardown_full(void **state)
{
    FullFs *f = *state;
    int rc = mount_stop(f->m);
    mount_free(f->m);
    g_free(f);
    return rc;
}

#define CHUNK (256 * 1024)

static void fill_pattern(char *buf, unsigned file)
{
    for (size_t i = 0; i < CHUNK; i++)
        buf[i] = (char)('a' + (file * 31 + i / 4096) % 26);
}

/* Writes file i (CHUNK bytes) through the mount: 0, or the errno. */
static int write_chunk(Mount *m, unsigned i, char *buf)
{
    g_autofree char *name = g_strdup_printf("f-%u", i);
    g_autofree char *p = mp(m, name);
    fill_pattern(buf, i);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return errno;
    int e = 0;
    if (write_all(fd, buf, CHUNK) < 0 || fsync(fd) < 0)
        e = errno;
    if (close(fd) < 0 && !e)
        e = errno;
    return e;
}

static void assert_chunk(const char *dir, unsigned i)
{
    g_autofree char *p = g_strdup_printf("%s/f-%u", dir, i);
    g_autofree char *want = g_malloc(CHUNK);
    fill_pattern(want, i);
    g_autofree char *got = NULL;
    gsize len = 0;
    assert_true(g_file_get_contents(p, &got, &len, NULL));
    assert_int_equal(len, CHUNK);
    assert_memory_equal(got, want, CHUNK);
}

static void test_backing_full(void **state)
{
    FullFs *f = *state;
    Mount *m = f->m;
    g_autofree char *buf = g_malloc(CHUNK);
    unsigned ok = 0;
    int e = 0;
    for (unsigned i = 0; i < 64; i++) {
        e = write_chunk(m, i, buf);
        if (e)
            break;
        ok++;
    }
    assert_int_equal(e, ENOSPC);
    assert_true(ok >= 4);
    /* the daemon is alive and answers */
    assert_int_equal(kill(m->pid, 0), 0);
    g_autofree char *metrics = g_build_filename(m->mnt, "_views", ".metrics", NULL);
    g_autofree char *mt = get_file(metrics);
    /* the daemon saw the ENOSPC unless the kernel wrote the data itself */
    if (mount_metric(m, "ckptfs_passthrough_opens_total") == 0)
        assert_true(mount_metric(m, "ckptfs_errors_total{errno=\"ENOSPC\"}") > 0);
    /* every file written before the disk filled is whole, on both sides */
    for (unsigned i = 0; i < ok; i++) {
        assert_chunk(m->bwork, i);
        assert_chunk(m->work, i);
    }
    /* small writes and creates keep failing cleanly while full */
    g_autofree char *more = mp(m, "more");
    int fd = open(more, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
        errno = 0;
        ssize_t n = write(fd, buf, CHUNK);
        /* with the writeback cache write() only fills the page cache: the
         * error comes at fsync; never may both succeed */
        bool failed = n < CHUNK || fsync(fd) < 0;
        close(fd);
        assert_true(failed);
        unlink(more);
    } else {
        assert_int_equal(errno, ENOSPC);
    }
    /* freeing space makes writes work again */
    g_autofree char *partial = g_strdup_printf("f-%u", ok);
    g_autofree char *pp = mp(m, partial);
    unlink(pp);
    for (unsigned i = 0; i < 2; i++) {
        g_autofree char *name = g_strdup_printf("f-%u", i);
        g_autofree char *p = mp(m, name);
        assert_int_equal(unlink(p), 0);
    }
    /* close(2) does not wait for the daemon's RELEASE (on every FUSE file
     * system): the space of a file unlinked right after its close comes
     * back when the daemon has answered that RELEASE, a moment later */
    int again = ENOSPC;
    for (int i = 0; i < 100 && again == ENOSPC; i++) {
        again = write_chunk(m, 100, buf);
        if (again == ENOSPC)
            g_usleep(50 * 1000);
    }
    assert_int_equal(again, 0);
    assert_chunk(m->bwork, 100);
    for (unsigned i = 2; i < ok; i++)
        assert_chunk(m->bwork, i);
    g_autofree char *d = mp(m, "dir-after");
    assert_int_equal(mkdir(d, 0755), 0);
    print_message("ENOSPC after %u files of 256 KiB; freed, written again\n", ok);
}

/* Blocks of the 4 MiB file system behind the mount that are free. */
static uint64_t free_blocks(Mount *m)
{
    struct statvfs sv;
    assert_int_equal(statvfs(m->mnt, &sv), 0);
    return sv.f_bfree * sv.f_frsize / 4096;
}

/* A file of 1 MiB written behind the mount, which the daemon then holds a
 * descriptor of (a chmod through the mount): no open, so no RELEASE whose
 * answer the test would have to wait for. */
static char *held_file(Mount *m, const char *name)
{
    g_autofree char *b = bp(m, name);
    g_autofree char *mb = g_malloc(1 << 20);
    memset(mb, 'h', 1 << 20);
    int fd = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write_all(fd, mb, 1 << 20), 0);
    close(fd);
    char *p = mp(m, name);
    assert_int_equal(chmod(p, 0600), 0);
    return p;
}

/* On a backing short of space (this 4 MiB one), removing the last name of
 * a file nobody has open gives its space back by the time unlink(2) or
 * rename(2) returns, as on the backing itself (not a moment later, when
 * the kernel's FORGET reaches the daemon). */
static void test_space_back_with_unlink(void **state)
{
    FullFs *f = *state;
    Mount *m = f->m;
    /* three times: without the rule the FORGET may win the race with the
     * next STATFS once in a while, not three times running */
    char *gone[3];
    for (unsigned i = 0; i < 3; i++) {
        g_autofree char *name = g_strdup_printf("gone-%u", i);
        gone[i] = held_file(m, name);
    }
    uint64_t before, after;
    for (unsigned i = 0; i < 3; i++) {
        before = free_blocks(m);
        int rc = unlink(gone[i]);
        after = free_blocks(m);
        g_free(gone[i]);
        assert_int_equal(rc, 0);
        assert_true(after >= before + 256);
    }

    g_autofree char *old = held_file(m, "old");
    g_autofree char *fresh = mp(m, "fresh");
    put_file(fresh, "new");
    before = free_blocks(m);
    assert_int_equal(rename(fresh, old), 0);
    after = free_blocks(m);
    assert_true(after >= before + 256);

    print_message("1 MiB back with unlink and with rename over it\n");
}

/* ---- removed behind the mount's back ---- */

static void removed_while_open(Mount *m, bool cached_names)
{
    g_autofree char *f = mp(m, "victim"), *bf = bp(m, "victim");
    put_file(f, "still here");
    int fd = open(f, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(unlink(bf), 0);
    char buf[32] = {0};
    assert_int_equal(pread(fd, buf, sizeof buf, 0), 10);
    assert_string_equal(buf, "still here");
    assert_int_equal(pwrite(fd, "!", 1, 10), 1);
    memset(buf, 0, sizeof buf);
    assert_int_equal(pread(fd, buf, sizeof buf, 0), 11);
    assert_string_equal(buf, "still here!");
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 11);
    /* no directory listing shows it */
    GDir *d = g_dir_open(m->work, 0, NULL);
    assert_non_null(d);
    for (const char *e; (e = g_dir_read_name(d));)
        assert_string_not_equal(e, "victim");
    g_dir_close(d);
    if (!cached_names) {
        assert_errno(stat(f, &st), ENOENT);
        assert_errno(open(f, O_RDONLY), ENOENT);
    }
    assert_int_equal(close(fd), 0);
    /* a name never looked up through the mount is gone at once */
    g_autofree char *g = bp(m, "never-seen");
    put_file(g, "x");
    assert_int_equal(unlink(g), 0);
    g_autofree char *gm = mp(m, "never-seen");
    assert_errno(stat(gm, &st), ENOENT);
    /* the name can be made again through the mount */
    put_file(f, "new");
    g_autofree char *text = get_file(bf);
    assert_string_equal(text, "new");
}

/* A directory moved behind the mount's back from job t's namespace into
 * job b's: with no name cache a new lookup by the old path fails, and
 * nothing of t's lands in b's tree. */
static void moved_across_namespaces(Mount *m)
{
    g_autofree char *ba = g_build_filename(m->backing, "_state", "t", NULL);
    g_autofree char *bb = g_build_filename(m->backing, "_state", "b", NULL);
    g_mkdir_with_parents(ba, 0755);
    g_mkdir_with_parents(bb, 0755);
    g_autofree char *d = g_build_filename(m->mnt, "_state", "t", "d", NULL);
    g_autofree char *f1 = g_build_filename(d, "f1", NULL), *f2 = g_build_filename(d, "f2", NULL);
    assert_int_equal(mkdir(d, 0755), 0);
    put_file(f1, "1");
    g_autofree char *bd = g_build_filename(ba, "d", NULL), *bd2 = g_build_filename(bb, "d", NULL);
    assert_int_equal(rename(bd, bd2), 0);
    assert_errno(open(f2, O_WRONLY | O_CREAT, 0644), ENOENT);
    g_autofree char *bf2 = g_build_filename(bd2, "f2", NULL);
    assert_int_equal(access(bf2, F_OK), -1);
    /* By its new path the directory and the file in it are job b's: job t,
     * which made them, may no longer write there (the nodes the daemon
     * still holds take the namespace of the path they are found by now). */
    g_autofree char *nf3 = g_build_filename(m->mnt, "_state", "b", "d", "f3", NULL);
    assert_errno(open(nf3, O_WRONLY | O_CREAT, 0644), EACCES);
    g_autofree char *bf3 = g_build_filename(bd2, "f3", NULL);
    assert_int_equal(access(bf3, F_OK), -1);
    g_autofree char *nf1 = g_build_filename(m->mnt, "_state", "b", "d", "f1", NULL);
    assert_errno(open(nf1, O_WRONLY | O_TRUNC), EACCES);
    g_autofree char *bf1 = g_build_filename(bd2, "f1", NULL);
    g_autofree char *kept = get_file(bf1);
    assert_string_equal(kept, "1");
}

static void test_removed_behind_back_while_open(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "entry_timeout=0,attr_timeout=0,job=t", NULL};
    assert_int_equal(mount_start(m, args), 0);
    removed_while_open(m, false);
    moved_across_namespaces(m);
    assert_int_equal(mount_stop(m), 0);
    /* default timeouts: the kernel may keep the name up to entry_timeout,
     * the open descriptor behaves the same */
    assert_int_equal(mount_start(m, NULL), 0);
    g_autofree char *f = mp(m, "victim");
    unlink(f);
    removed_while_open(m, true);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ---- the daemon out of descriptors ---- */

/* Child (re-executed with CKJOB=a in its environment): holds files of
 * _state/a open until the daemon runs out of descriptors, then tries to
 * remove job b's state.  Exit 0 when that was refused, 1 when allowed, 2
 * when the daemon never ran out. */
static int exhaust_child(const char *mnt)
{
    int held = 0;
    bool exhausted = false;
    for (int i = 0; i < 400 && !exhausted; i++) {
        g_autofree char *p = g_strdup_printf("%s/_state/a/f%d", mnt, i);
        if (open(p, O_RDONLY) >= 0)
            held++;
        else
            exhausted = errno == EMFILE || errno == ENFILE;
    }
    if (!exhausted)
        return 2;
    g_autofree char *precious = g_strdup_printf("%s/_state/b/precious", mnt);
    g_autofree char *evil = g_strdup_printf("%s/_state/b/evil", mnt);
    bool allowed = unlink(precious) == 0;
    allowed |= mkdir(evil, 0755) == 0;
    printf("held %d\n", held);
    return allowed ? 1 : 0;
}

/* identity=env:VAR needs /proc reads; with the daemon out of descriptors a
 * caller's job cannot be read, and it must not then pass as anonymous. */
static void test_out_of_descriptors_fails_closed(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *ba = g_build_filename(m->backing, "_state", "a", NULL);
    g_autofree char *bb = g_build_filename(m->backing, "_state", "b", NULL);
    g_mkdir_with_parents(ba, 0755);
    g_mkdir_with_parents(bb, 0755);
    for (int i = 0; i < 400; i++) {
        g_autofree char *f = g_strdup_printf("%s/f%d", ba, i);
        put_file(f, "a");
    }
    g_autofree char *precious = g_build_filename(bb, "precious", NULL);
    put_file(precious, "b's state");
    m->nofile = 64;
    const char *args[] = {"-o", "identity=env:CKJOB", NULL};
    assert_int_equal(mount_start(m, args), 0);
    /* b's directory is looked up and listed first, as a busy mount would
     * have it: its descriptor is then in the daemon's cache */
    g_autofree char *mb = g_build_filename(m->mnt, "_state", "b", NULL);
    GDir *d = g_dir_open(mb, 0, NULL);
    assert_non_null(d);
    while (g_dir_read_name(d))
        ;
    g_dir_close(d);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char *envp[] = {"CKJOB=a", "ASAN_OPTIONS=detect_leaks=0", NULL};
        char *argv[] = {"/proc/self/exe", "--exhaust-child", m->mnt, NULL};
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 2)
        fprintf(stderr, "the daemon never ran out of descriptors\n");
    assert_int_equal(WEXITSTATUS(status), 0);
    g_autofree char *text = get_file(precious);
    assert_string_equal(text, "b's state");
    g_autofree char *bevil = g_build_filename(bb, "evil", NULL);
    assert_int_equal(access(bevil, F_OK), -1);
    /* the descriptors come back: the daemon serves as before, once it has
     * the kernel's RELEASEs of the child's files (asynchronous: they may
     * come after the next request, on another CPU's queue) */
    assert_int_equal(kill(m->pid, 0), 0);
    g_autofree char *own = g_build_filename(m->mnt, "_state", "a", "after", NULL);
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; i++) {
        fd = open(own, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            assert_int_equal(errno, EMFILE);
            g_usleep(100 * 1000);
        }
    }
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "fine", 4), 4);
    assert_int_equal(close(fd), 0);
    g_autofree char *back = get_file(own);
    assert_string_equal(back, "fine");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--exhaust-child") == 0)
        return exhaust_child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_9_during_commits),
        cmocka_unit_test(test_kill_9_during_commits_writeback),
        cmocka_unit_test(test_kill_9_amid_requests),
        cmocka_unit_test(test_backing_daemon_gone),
        cmocka_unit_test(test_sigterm_during_commits),
        cmocka_unit_test_setup_teardown(test_backing_full, setup_full, teardown_full),
        cmocka_unit_test_setup_teardown(test_backing_full, setup_full_writeback, teardown_full),
        cmocka_unit_test_setup_teardown(test_space_back_with_unlink, setup_full, teardown_full),
        cmocka_unit_test(test_removed_behind_back_while_open),
        cmocka_unit_test(test_out_of_descriptors_fails_closed),
    };
    return cmocka_run_group_tests_name("mount/faults", tests, NULL, NULL);
}
