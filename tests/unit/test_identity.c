/* core/identity.c: the caller's job (job=ID, identity=env:VAR), on a fake
 * /proc built by the test. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "identity.h"
#include "intern.h"
#include "testfs.h"

static char *proc; /* the fake /proc of every test */

static int setup(void **st)
{
    (void)st;
    proc = testfs_tmpdir("ck-proc-XXXXXX");
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    bool gone = testfs_remove(proc);
    g_free(proc);
    return gone ? 0 : -1;
}

static void put(pid_t pid, const char *file, const char *data, gssize len)
{
    g_autofree char *rel = g_strdup_printf("%d/%s", (int)pid, file);
    testfs_put_data(proc, rel, data, len);
}

/* A /proc/<pid>/stat line: comm may hold spaces and parentheses. */
static void put_stat(pid_t pid, const char *comm, unsigned long long start,
                     unsigned long long env_start)
{
    GString *s = g_string_new(NULL);
    g_string_printf(s, "%d (%s) S 1 %d %d 0 -1 4194560", (int)pid, comm, (int)pid, (int)pid);
    for (int f = 10; f <= 21; f++)
        g_string_append(s, " 0");
    g_string_append_printf(s, " %llu", start); /* 22 */
    for (int f = 23; f <= 49; f++)
        g_string_append_printf(s, " %d", f);
    g_string_append_printf(s, " %llu %llu 0\n", env_start, env_start + 100); /* 50 51 52 */
    put(pid, "stat", s->str, (gssize)s->len);
    g_string_free(s, TRUE);
}

static void put_status(pid_t tid, pid_t tgid)
{
    g_autofree char *s = g_strdup_printf(
        "Name:\tworker\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\n",
        (int)tgid, (int)tid);
    put(tid, "status", s, -1);
}

/* environ: NUL-separated, given as a '|'-separated string */
static void put_environ(pid_t pid, const char *vars)
{
    g_autofree char *buf = g_strdup(vars);
    size_t len = strlen(buf);
    for (size_t i = 0; i < len; i++)
        if (buf[i] == '|')
            buf[i] = '\0';
    put(pid, "environ", buf, (gssize)len);
}

static void process(pid_t pid, const char *comm, unsigned long long start, const char *env)
{
    put_stat(pid, comm, start, 1000);
    put_status(pid, pid);
    put_environ(pid, env);
}

static void test_fixed_job(void **st)
{
    (void)st;
    char job[] = "fixed-1";
    CkIdentity *id = ck_identity_new(job, "CKPT_JOB", "/nonexistent-proc");
    const char *j = ck_identity_of(id, 12345);
    assert_ptr_equal(j, ck_intern("fixed-1"));
    assert_ptr_equal(ck_identity_of(id, 0), j);
    ck_identity_free(id);
}

static void test_neither(void **st)
{
    (void)st;
    process(50, "w", 10, "CKPT_JOB=a");
    CkIdentity *id = ck_identity_new(NULL, NULL, proc);
    assert_null(ck_identity_of(id, 50));
    ck_identity_free(id);
}

static void test_env(void **st)
{
    (void)st;
    process(100, "worker", 500, "PATH=/bin|CKPT_JOB=job-a|HOME=/root");
    process(101, "other", 501, "PATH=/bin|HOME=/root");
    process(102, "bad", 502, "CKPT_JOB=.hidden");
    process(103, "bad2", 503, "CKPT_JOB=a/b");
    process(104, "empty", 504, "CKPT_JOB=");
    process(105, "prefix", 505, "CKPT_JOBS=x|XCKPT_JOB=y|CKPT_JOB=real|CKPT_JOB=second");
    process(106, "noenv", 506, "");
    process(107, "last", 507, "A=1|CKPT_JOB=tail"); /* no final NUL */
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_ptr_equal(ck_identity_of(id, 100), ck_intern("job-a"));
    assert_null(ck_identity_of(id, 101));
    assert_null(ck_identity_of(id, 102));
    assert_null(ck_identity_of(id, 103));
    assert_null(ck_identity_of(id, 104));
    assert_ptr_equal(ck_identity_of(id, 105), ck_intern("real"));
    assert_null(ck_identity_of(id, 106));
    assert_ptr_equal(ck_identity_of(id, 107), ck_intern("tail"));
    assert_null(ck_identity_of(id, 99999)); /* vanished */
    assert_null(ck_identity_of(id, 0));
    assert_null(ck_identity_of(id, -1));
    ck_identity_free(id);
}

static void test_comm_with_parens(void **st)
{
    (void)st;
    process(200, "a) 1 2 (b", 777, "CKPT_JOB=paren");
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_ptr_equal(ck_identity_of(id, 200), ck_intern("paren"));
    /* the cache is keyed by the start time parsed after the last ')':
     * a new start time is seen as a new process */
    put_environ(200, "CKPT_JOB=paren2");
    assert_ptr_equal(ck_identity_of(id, 200), ck_intern("paren"));
    put_stat(200, "a) 1 2 (b", 778, 1000);
    assert_ptr_equal(ck_identity_of(id, 200), ck_intern("paren2"));
    ck_identity_free(id);
}

static void test_threads_map_to_tgid(void **st)
{
    (void)st;
    process(300, "main", 900, "CKPT_JOB=threaded");
    /* thread 301 of process 300: its own stat and status, no environ of its own */
    put_stat(301, "worker-thr", 905, 1000);
    put_status(301, 300);
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_ptr_equal(ck_identity_of(id, 301), ck_intern("threaded"));
    assert_ptr_equal(ck_identity_of(id, 300), ck_intern("threaded"));
    ck_identity_free(id);
}

static void test_zombie_leader(void **st)
{
    (void)st;
    /* the leader exited (zombie: empty environ); its thread still runs */
    put_stat(800, "w", 10, 1000);
    put_status(800, 800);
    put(800, "environ", "", 0);
    put_stat(801, "w-thr", 11, 1000);
    put_status(801, 800);
    put_environ(801, "CKPT_JOB=orphaned-thread");
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_ptr_equal(ck_identity_of(id, 801), ck_intern("orphaned-thread"));
    assert_null(ck_identity_of(id, 800));
    ck_identity_free(id);
}

static void test_cached_then_pid_reuse(void **st)
{
    (void)st;
    process(400, "w", 1000, "CKPT_JOB=first");
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_ptr_equal(ck_identity_of(id, 400), ck_intern("first"));
    /* same process (same stamp): answered from the cache, environ not re-read */
    put_environ(400, "CKPT_JOB=changed");
    assert_ptr_equal(ck_identity_of(id, 400), ck_intern("first"));
    /* pid 400 reused by a new process: new start time -> the new answer */
    process(400, "w", 2000, "CKPT_JOB=second");
    assert_ptr_equal(ck_identity_of(id, 400), ck_intern("second"));
    /* reused again, by a process without VAR */
    process(400, "w", 3000, "PATH=/bin");
    assert_null(ck_identity_of(id, 400));
    ck_identity_free(id);
}

static void test_exec_new_environment(void **st)
{
    (void)st;
    process(500, "sh", 100, "PATH=/bin");
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_null(ck_identity_of(id, 500));
    /* execve: same pid and start time, environment mapped elsewhere */
    put_stat(500, "worker", 100, 5000);
    put_environ(500, "CKPT_JOB=after-exec");
    assert_ptr_equal(ck_identity_of(id, 500), ck_intern("after-exec"));
    ck_identity_free(id);
}

static void test_vanished_not_cached(void **st)
{
    (void)st;
    put_stat(600, "w", 100, 1000);
    put_status(600, 600); /* environ missing: the process is exiting */
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_null(ck_identity_of(id, 600));
    put_environ(600, "CKPT_JOB=late");
    assert_ptr_equal(ck_identity_of(id, 600), ck_intern("late"));
    ck_identity_free(id);
}

static void test_hostile_proc(void **st)
{
    (void)st;
    put(700, "stat", "garbage without paren", -1);
    put_status(700, 700);
    put_environ(700, "CKPT_JOB=x");
    put(701, "stat", "701 (x) S", -1); /* too short */
    put_status(701, 701);
    put_environ(701, "CKPT_JOB=x");
    put_stat(702, "w", 1, 1);
    put(702, "status", "Name:\tw\nTgid:\tnope\n", -1);
    put_environ(702, "CKPT_JOB=x");
    /* a 2 MiB environ with VAR past 1 MiB is not read that far */
    GString *big = g_string_new(NULL);
    while (big->len < 2 * 1024 * 1024)
        g_string_append(big, "PADDING=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx|");
    g_string_append(big, "CKPT_JOB=far");
    put_stat(703, "w", 1, 1);
    put_status(703, 703);
    put_environ(703, big->str);
    g_string_free(big, TRUE);
    CkIdentity *id = ck_identity_new(NULL, "CKPT_JOB", proc);
    assert_null(ck_identity_of(id, 700));
    assert_null(ck_identity_of(id, 701));
    assert_null(ck_identity_of(id, 702));
    assert_null(ck_identity_of(id, 703));
    ck_identity_free(id);
}

static void test_real_proc(void **st)
{
    (void)st;
    /* a real child started with VAR in its environment, read from /proc */
    char *argv[] = {"sleep", "30", NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", "CKPTFS_TEST_JOB=real-child", NULL};
    GPid child;
    g_autoptr(GError) err = NULL;
    assert_true(g_spawn_async(NULL, argv, envp,
                              G_SPAWN_SEARCH_PATH_FROM_ENVP | G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                              &child, &err));
    CkIdentity *id = ck_identity_new(NULL, "CKPTFS_TEST_JOB", "/proc");
    const char *job = ck_identity_of(id, child);
    CkIdentity *path = ck_identity_new(NULL, "PATH", "/proc"); /* '/' is never in a job id */
    const char *pj = ck_identity_of(path, child);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_ptr_equal(job, ck_intern("real-child"));
    assert_null(pj);
    assert_null(ck_identity_of(id, child)); /* gone */
    ck_identity_free(id);
    ck_identity_free(path);
}

/* ck_proc_env_value (collision records' "tag"): any string, the first VAR=,
 * bounded; absent or unreadable is NULL. */
static void test_env_value(void **st)
{
    (void)st;
    put_environ(9101, "A=1|PYTEST_CURRENT_TEST=tests/t.py::test_a (call)|PYTEST_CURRENT_TEST=no|");
    g_autofree char *v = ck_proc_env_value(proc, 9101, "PYTEST_CURRENT_TEST");
    assert_string_equal(v, "tests/t.py::test_a (call)");
    g_autofree char *a = ck_proc_env_value(proc, 9101, "A");
    assert_string_equal(a, "1");
    assert_null(ck_proc_env_value(proc, 9101, "PYTEST"));
    assert_null(ck_proc_env_value(proc, 9102, "A")); /* no such process */
    assert_null(ck_proc_env_value(proc, 0, "A"));
    /* unterminated last entry, empty value, and a value over the bound */
    put_environ(9103, "E=|LAST=x");
    g_autofree char *e = ck_proc_env_value(proc, 9103, "E");
    assert_string_equal(e, "");
    g_autofree char *last = ck_proc_env_value(proc, 9103, "LAST");
    assert_string_equal(last, "x");
    g_autofree char *big = g_strnfill(5000, 'x');
    g_autofree char *env = g_strconcat("BIG=", big, NULL);
    put_environ(9104, env);
    g_autofree char *b = ck_proc_env_value(proc, 9104, "BIG");
    assert_int_equal(strlen(b), CK_ENV_VALUE_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_job),
        cmocka_unit_test(test_neither),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_comm_with_parens),
        cmocka_unit_test(test_threads_map_to_tgid),
        cmocka_unit_test(test_zombie_leader),
        cmocka_unit_test(test_cached_then_pid_reuse),
        cmocka_unit_test(test_exec_new_environment),
        cmocka_unit_test(test_vanished_not_cached),
        cmocka_unit_test(test_hostile_proc),
        cmocka_unit_test(test_real_proc),
        cmocka_unit_test(test_env_value),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
