/* Load: 16 threads in 4 jobs' namespaces at once (4 worker
 * processes, each with its own CLINK_JOB_ID and 4 threads, on a mount with
 * identity=env:CLINK_JOB_ID) make checkpoint commits, rename storms, marker
 * writes and view lookups for a fixed count.  Afterwards: no lost write,
 * no refused legitimate write, no leaked node once the kernel drops its
 * caches, and no deadlock (a watchdog kills the workers after 90 s and the
 * test fails; the harness still unmounts). */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define JOBS     4
#define THREADS  4
#define COMMITS  120
#define WATCHDOG 90 /* seconds */

/* ---- the worker process (re-executed with --load-child MNT) ---- */

typedef struct {
    const char *mnt;
    const char *job;
    int thread;
    char err[256];
    unsigned ops;
} Worker;

static char *content(const char *job, int thread, unsigned i, size_t *len)
{
    GString *s = g_string_sized_new(4096);
    while (s->len < 4000)
        g_string_append_printf(s, "%s/%d/%u ", job, thread, i);
    *len = s->len;
    return g_string_free(s, FALSE);
}

#define FAIL_IF(cond, what)                                                                        \
    do {                                                                                           \
        if (cond) {                                                                                \
            g_snprintf(w->err, sizeof w->err, "%s/%d #%u: %s: %s", w->job, w->thread, i, what,     \
                       g_strerror(errno));                                                         \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int write_whole(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (write(fd, data, len) != (ssize_t)len || fsync(fd) < 0) {
        close(fd);
        return -1;
    }
    return close(fd);
}

static void *worker(void *arg)
{
    Worker *w = arg;
    unsigned i = 0;
    g_autofree char *dir = g_strdup_printf("%s/_state/%s/v1/%d", w->mnt, w->job, w->thread);
    g_autofree char *shared = g_strdup_printf("%s/_state/%s/v1/shared", w->mnt, w->job);
    g_autofree char *view = g_strdup_printf("%s/_views/%s", w->mnt, w->job);
    g_autofree char *latest = g_strdup_printf("%s/_views/%s/latest", w->mnt, w->job);
    g_autofree char *restore = g_strdup_printf("%s/_views/%s/restore", w->mnt, w->job);
    g_autofree char *metrics = g_strdup_printf("%s/_views/.metrics", w->mnt);
    /* a directory of its own that moves back and forth across the shared
     * one while the other threads move their files through it */
    g_autofree char *sdir = g_strdup_printf("%s/s%d", dir, w->thread);
    g_autofree char *sdir_away = g_strdup_printf("%s/s%d", shared, w->thread);
    g_autofree char *sfile = g_strdup_printf("%s/inside", sdir);
    FAIL_IF(mkdir(sdir, 0755) < 0, "mkdir scratch");
    FAIL_IF(write_whole(sfile, "inside", 6) < 0, "write scratch");
    for (i = 0; i < COMMITS; i++) {
        size_t len;
        g_autofree char *data = content(w->job, w->thread, i, &len);
        g_autofree char *tmp = g_strdup_printf("%s/checkpoint-%u.snap.tmp", dir, i);
        g_autofree char *fin = g_strdup_printf("%s/checkpoint-%u.snap", dir, i);
        g_autofree char *keep = g_strdup_printf("%s/keep-%u.snap", dir, i);
        g_autofree char *away = g_strdup_printf("%s/t%d-%u", shared, w->thread, i);
        FAIL_IF(write_whole(tmp, data, len) < 0, "write tmp");
        FAIL_IF(rename(tmp, fin) < 0, "rename tmp");
        FAIL_IF(fsync_dir(dir) < 0, "fsync dir");
        /* the rename storm: within the dir, across dirs of the namespace, back */
        FAIL_IF(rename(fin, keep) < 0, "rename keep");
        FAIL_IF(rename(keep, away) < 0, "rename away");
        FAIL_IF(rename(away, keep) < 0, "rename back");
        FAIL_IF(rename(sdir, sdir_away) < 0, "rename dir away");
        FAIL_IF(rename(sdir_away, sdir) < 0, "rename dir back");
        w->ops += 10;
        /* view lookups, whether or not the views exist yet */
        struct stat st;
        stat(view, &st);
        stat(latest, &st);
        if (i % 4 == 0) {
            g_autofree char *text = NULL;
            g_file_get_contents(restore, &text, NULL, NULL);
            /* a view of this thread's subtask in the latest checkpoint, read
             * while the renames go on (entries may vanish: ENOENT is fine) */
            g_autofree char *sub = g_strdup_printf("%s/%d", latest, w->thread);
            GDir *d = g_dir_open(sub, 0, NULL);
            for (const char *e; d && (e = g_dir_read_name(d));) {
                g_autofree char *f = g_build_filename(sub, e, NULL);
                g_autofree char *data2 = NULL;
                g_file_get_contents(f, &data2, NULL, NULL);
                w->ops++;
            }
            if (d)
                g_dir_close(d);
            g_autofree char *m = NULL;
            FAIL_IF(!g_file_get_contents(metrics, &m, NULL, NULL), "read .metrics");
            w->ops += 2;
        }
        w->ops += 2;
        /* thread 0 completes a checkpoint every 10 commits */
        if (w->thread == 0 && i % 10 == 9) {
            g_autofree char *chk = g_strdup_printf("%s/_jobs/%s/chk-%u", w->mnt, w->job, i);
            g_autofree char *mtmp = g_strdup_printf("%s/COMPLETED.tmp", chk);
            g_autofree char *mk = g_strdup_printf("%s/COMPLETED", chk);
            g_autofree char *marker = g_strdup_printf(
                "checkpoint=%u\ngeneration=1\nparticipants=0,1,2,3\nstate=_state/%s\n", i, w->job);
            FAIL_IF(mkdir(chk, 0755) < 0, "mkdir chk");
            FAIL_IF(write_whole(mtmp, marker, strlen(marker)) < 0, "write marker");
            FAIL_IF(rename(mtmp, mk) < 0, "rename marker");
            w->ops += 4;
        }
    }
    return NULL;
}

static int child_main(const char *mnt)
{
    const char *job = g_getenv("CLINK_JOB_ID");
    if (!job)
        return 2;
    Worker w[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (Worker){.mnt = mnt, .job = job, .thread = t};
        pthread_create(&th[t], NULL, worker, &w[t]);
    }
    int rc = 0;
    unsigned ops = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        if (w[t].err[0]) {
            fprintf(stderr, "worker %s\n", w[t].err);
            rc = 1;
        }
        ops += w[t].ops;
    }
    printf("%u\n", ops);
    return rc;
}

/* ---- the test ---- */

typedef struct {
    GMutex lock;
    GCond cond;
    bool done, fired;
    pid_t pids[JOBS];
} Watchdog;

static gpointer watchdog_thread(gpointer data)
{
    Watchdog *wd = data;
    gint64 end = g_get_monotonic_time() + WATCHDOG * G_TIME_SPAN_SECOND;
    g_mutex_lock(&wd->lock);
    while (!wd->done)
        if (!g_cond_wait_until(&wd->cond, &wd->lock, end))
            break;
    if (!wd->done) {
        wd->fired = true;
        fprintf(stderr, "watchdog: no progress after %d s: killing the workers\n", WATCHDOG);
        for (int j = 0; j < JOBS; j++)
            kill(wd->pids[j], SIGKILL);
    }
    g_mutex_unlock(&wd->lock);
    return NULL;
}

static pid_t spawn_worker(Mount *m, const char *job, int *out_fd)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        g_autofree char *env = g_strconcat("CLINK_JOB_ID=", job, NULL);
        char *envp[] = {env, "ASAN_OPTIONS=detect_leaks=0", NULL};
        char *argv[] = {"/proc/self/exe", "--load-child", m->mnt, NULL};
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    close(p[1]);
    *out_fd = p[0];
    return pid;
}

static void sleep_ms(int ms)
{
    g_usleep((gulong)ms * 1000);
}

static void test_sixteen_threads_four_jobs(void **state)
{
    (void)state;
    Mount *m = mount_new();
    char job[JOBS][8];
    for (int j = 0; j < JOBS; j++) {
        g_snprintf(job[j], sizeof job[j], "j%d", j);
        for (int t = 0; t < THREADS; t++) {
            g_autofree char *rel = g_strdup_printf("_state/%s/v1/%d", job[j], t);
            g_autofree char *d = g_build_filename(m->backing, rel, NULL);
            assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
        }
        g_autofree char *rel = g_strdup_printf("_state/%s/v1/shared", job[j]);
        g_autofree char *d = g_build_filename(m->backing, rel, NULL);
        assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
        g_autofree char *jrel = g_strdup_printf("_jobs/%s", job[j]);
        g_autofree char *jd = g_build_filename(m->backing, jrel, NULL);
        assert_int_equal(g_mkdir_with_parents(jd, 0755), 0);
    }
    const char *args[] = {"-o", "identity=env:CLINK_JOB_ID,rescan=1", NULL};
    assert_int_equal(mount_start(m, args), 0);
    kernel_drop_caches();
    sleep_ms(200);
    mount_metric(m, "ckptfs_nodes");
    int64_t base = mount_metric(m, "ckptfs_nodes");
    assert_true(base >= 0);

    Watchdog wd = {0};
    g_mutex_init(&wd.lock);
    g_cond_init(&wd.cond);
    int fds[JOBS];
    for (int j = 0; j < JOBS; j++)
        wd.pids[j] = spawn_worker(m, job[j], &fds[j]);
    GThread *dog = g_thread_new("watchdog", watchdog_thread, &wd);
    unsigned ops = 0;
    bool all_ok = true;
    for (int j = 0; j < JOBS; j++) {
        g_autoptr(GString) out = g_string_new("");
        char buf[64];
        ssize_t n;
        while ((n = read(fds[j], buf, sizeof buf)) > 0)
            g_string_append_len(out, buf, n);
        close(fds[j]);
        int status;
        assert_int_equal(waitpid(wd.pids[j], &status, 0), wd.pids[j]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            all_ok = false;
        ops += (unsigned)strtoul(out->str, NULL, 10);
    }
    g_mutex_lock(&wd.lock);
    wd.done = true;
    g_cond_signal(&wd.cond);
    g_mutex_unlock(&wd.lock);
    g_thread_join(dog);
    assert_false(wd.fired);
    assert_true(all_ok);
    assert_true(kill(m->pid, 0) == 0);

    /* no lost write: every commit of every thread, whole, in the backing dir */
    unsigned files = 0;
    for (int j = 0; j < JOBS; j++) {
        for (int t = 0; t < THREADS; t++) {
            for (unsigned i = 0; i < COMMITS; i++) {
                g_autofree char *rel =
                    g_strdup_printf("_state/%s/v1/%d/keep-%u.snap", job[j], t, i);
                g_autofree char *p = g_build_filename(m->backing, rel, NULL);
                size_t len;
                g_autofree char *want = content(job[j], t, i, &len);
                g_autofree char *got = NULL;
                gsize got_len = 0;
                if (!g_file_get_contents(p, &got, &got_len, NULL))
                    fprintf(stderr, "lost: %s\n", rel);
                assert_non_null(got);
                assert_int_equal(got_len, len);
                assert_memory_equal(got, want, len);
                files++;
            }
            g_autofree char *srel = g_strdup_printf("_state/%s/v1/%d/s%d/inside", job[j], t, t);
            g_autofree char *spath = g_build_filename(m->backing, srel, NULL);
            g_autofree char *inside = get_file(spath);
            assert_string_equal(inside, "inside");
            g_autofree char *shared = g_strdup_printf("_state/%s/v1/shared", job[j]);
            g_autofree char *sp = g_build_filename(m->backing, shared, NULL);
            GDir *d = g_dir_open(sp, 0, NULL);
            assert_non_null(d);
            assert_null(g_dir_read_name(d)); /* every file and dir came back */
            g_dir_close(d);
        }
        for (unsigned i = 9; i < COMMITS; i += 10) {
            g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-%u/COMPLETED", job[j], i);
            g_autofree char *p = g_build_filename(m->backing, rel, NULL);
            assert_int_equal(access(p, F_OK), 0);
        }
    }
    /* no refused legitimate write */
    g_autofree char *logp = g_build_filename(m->mnt, "_views", ".collisions", NULL);
    g_autofree char *log = get_file(logp);
    if (*log)
        fprintf(stderr, "collisions:\n%s", log);
    assert_string_equal(log, "");

    /* no leaked node: once the kernel forgets what it cached, the table is
     * back to its size before the load (forgets arrive asynchronously) */
    int64_t nodes = mount_forget_down_to(m, base, 50);
    if (nodes > base)
        fprintf(stderr, "nodes: %" G_GINT64_FORMAT " after the load, %" G_GINT64_FORMAT " before\n",
                nodes, base);
    assert_true(nodes >= 0 && nodes <= base);
    print_message(
        "load: %u ops by %d threads in %d jobs, %u files verified, nodes %" G_GINT64_FORMAT
        " -> %" G_GINT64_FORMAT "\n",
        ops, JOBS * THREADS, JOBS, files, base, nodes);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
    g_mutex_clear(&wd.lock);
    g_cond_clear(&wd.cond);
}

/* A flood of refusals: the views keep the newest 10,000 records, the
 * collision_log file gets every one, the counters count every one. */
static void test_collision_flood(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *bb = g_build_filename(m->backing, "_state", "b", NULL);
    assert_int_equal(g_mkdir_with_parents(bb, 0755), 0);
    g_autofree char *logfile = g_build_filename(m->base, "collisions.jsonl", NULL);
    g_autofree char *opt = g_strdup_printf("job=a,collision_log=%s", logfile);
    const char *args[] = {"-o", opt, NULL};
    assert_int_equal(mount_start(m, args), 0);
    const int n = 10100;
    for (int i = 0; i < n; i++) {
        g_autofree char *p = g_strdup_printf("%s/_state/b/d%d", m->mnt, i);
        errno = 0;
        assert_int_equal(mkdir(p, 0755), -1);
        assert_int_equal(errno, EACCES);
    }
    g_autofree char *vp = g_build_filename(m->mnt, "_views", ".collisions", NULL);
    g_autofree char *view = get_file(vp);
    g_auto(GStrv) lines = g_strsplit(view, "\n", -1);
    assert_int_equal(g_strv_length(lines), 10000 + 1);
    assert_non_null(strstr(lines[0], "\"path\":\"_state/b/d100\""));
    assert_non_null(strstr(lines[9999], "\"path\":\"_state/b/d10099\""));
    assert_int_equal(
        mount_metric(m, "ckptfs_collisions_total{kind=\"foreign-write\",verdict=\"denied\"}"), n);
    assert_int_equal(mount_stop(m), 0);
    g_autofree char *all = get_file(logfile);
    g_auto(GStrv) all_lines = g_strsplit(all, "\n", -1);
    assert_int_equal(g_strv_length(all_lines), (guint)n + 1);
    print_message("flood: %d refusals, 10000 kept in the views, %d in the file\n", n, n);
    mount_free(m);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--load-child") == 0)
        return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sixteen_threads_four_jobs),
        cmocka_unit_test(test_collision_flood),
    };
    return cmocka_run_group_tests_name("mount/load", tests, NULL, NULL);
}
