/* core/identity.c: the caller's job (job=ID, identity=env:VAR, cgroup,
 * uid), on a fake /proc built by the test; the cgroup pattern matcher and
 * the identity map's parser, table by table. */
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

/* An identity of mode `spec` over the fake /proc (map taken, may be NULL). */
static CkIdentity *identity(const char *job, const char *spec, CkIdentityMap *map)
{
    g_autofree char *why = NULL;
    CkIdentity *id = ck_identity_new(job, spec, map, proc, &why);
    if (!id)
        fail_msg("%s: %s", spec ? spec : "(none)", why ? why : "?");
    return id;
}

static CkIdentity *env_identity(const char *var)
{
    g_autofree char *spec = g_strconcat("env:", var, NULL);
    return identity(NULL, spec, NULL);
}

/* The job of a caller (interned pointers outlive the answer). */
static const char *job_of(CkIdentity *id, pid_t tid)
{
    g_auto(CkCaller) c = ck_identity_caller(id, tid, 0);
    return c.job;
}

static void test_fixed_job(void **st)
{
    (void)st;
    char job[] = "fixed-1";
    CkIdentity *id = identity(job, "env:CKPT_JOB", NULL);
    assert_int_equal(ck_identity_mode(id), CK_IDENTITY_JOB);
    g_auto(CkCaller) c = ck_identity_caller(id, 12345, 7);
    assert_ptr_equal(c.job, ck_intern("fixed-1"));
    assert_int_equal(c.mode, CK_IDENTITY_JOB);
    assert_null(c.value);
    assert_ptr_equal(job_of(id, 0), c.job);
    ck_identity_free(id);
}

static void test_neither(void **st)
{
    (void)st;
    process(50, "w", 10, "CKPT_JOB=a");
    CkIdentity *id = identity(NULL, NULL, NULL);
    g_auto(CkCaller) c = ck_identity_caller(id, 50, 0);
    assert_null(c.job);
    assert_int_equal(c.mode, CK_IDENTITY_NONE);
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
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_ptr_equal(job_of(id, 100), ck_intern("job-a"));
    assert_null(job_of(id, 101));
    /* present but no job id: invalid, never anonymous */
    assert_ptr_equal(job_of(id, 102), CK_CALLER_INVALID);
    assert_ptr_equal(job_of(id, 103), CK_CALLER_INVALID);
    assert_ptr_equal(job_of(id, 104), CK_CALLER_INVALID);
    assert_ptr_equal(job_of(id, 105), ck_intern("real"));
    assert_null(job_of(id, 106));
    assert_ptr_equal(job_of(id, 107), ck_intern("tail"));
    assert_null(job_of(id, 99999)); /* vanished */
    /* no pid (a caller outside the daemon's pid namespace): unknown, never
     * anonymous */
    for (pid_t none = -1; none <= 0; none++) {
        g_auto(CkCaller) c = ck_identity_caller(id, none, 0);
        assert_ptr_equal(c.job, ck_intern(CK_IDENTITY_UNKNOWN));
        assert_int_equal(c.mode, CK_IDENTITY_ENV);
        assert_null(c.value);
    }
    ck_identity_free(id);
}

static void test_comm_with_parens(void **st)
{
    (void)st;
    process(200, "a) 1 2 (b", 777, "CKPT_JOB=paren");
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_ptr_equal(job_of(id, 200), ck_intern("paren"));
    /* the cache is keyed by the start time parsed after the last ')':
     * a new start time is seen as a new process */
    put_environ(200, "CKPT_JOB=paren2");
    assert_ptr_equal(job_of(id, 200), ck_intern("paren"));
    put_stat(200, "a) 1 2 (b", 778, 1000);
    assert_ptr_equal(job_of(id, 200), ck_intern("paren2"));
    ck_identity_free(id);
}

static void test_threads_map_to_tgid(void **st)
{
    (void)st;
    process(300, "main", 900, "CKPT_JOB=threaded");
    /* thread 301 of process 300: its own stat and status, no environ of its own */
    put_stat(301, "worker-thr", 905, 1000);
    put_status(301, 300);
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_ptr_equal(job_of(id, 301), ck_intern("threaded"));
    assert_ptr_equal(job_of(id, 300), ck_intern("threaded"));
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
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_ptr_equal(job_of(id, 801), ck_intern("orphaned-thread"));
    assert_null(job_of(id, 800));
    ck_identity_free(id);
}

static void test_cached_then_pid_reuse(void **st)
{
    (void)st;
    process(400, "w", 1000, "CKPT_JOB=first");
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_ptr_equal(job_of(id, 400), ck_intern("first"));
    /* same process (same stamp): answered from the cache, environ not re-read */
    put_environ(400, "CKPT_JOB=changed");
    assert_ptr_equal(job_of(id, 400), ck_intern("first"));
    /* pid 400 reused by a new process: new start time -> the new answer */
    process(400, "w", 2000, "CKPT_JOB=second");
    assert_ptr_equal(job_of(id, 400), ck_intern("second"));
    /* reused again, by a process without VAR */
    process(400, "w", 3000, "PATH=/bin");
    assert_null(job_of(id, 400));
    ck_identity_free(id);
}

static void test_exec_new_environment(void **st)
{
    (void)st;
    process(500, "sh", 100, "PATH=/bin");
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_null(job_of(id, 500));
    /* execve: same pid and start time, environment mapped elsewhere */
    put_stat(500, "worker", 100, 5000);
    put_environ(500, "CKPT_JOB=after-exec");
    assert_ptr_equal(job_of(id, 500), ck_intern("after-exec"));
    ck_identity_free(id);
}

static void test_vanished_not_cached(void **st)
{
    (void)st;
    put_stat(600, "w", 100, 1000);
    put_status(600, 600); /* environ missing: the process is exiting */
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_null(job_of(id, 600));
    put_environ(600, "CKPT_JOB=late");
    assert_ptr_equal(job_of(id, 600), ck_intern("late"));
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
    CkIdentity *id = env_identity("CKPT_JOB");
    assert_null(job_of(id, 700));
    assert_null(job_of(id, 701));
    assert_null(job_of(id, 702));
    ck_identity_free(id);
}

/* An environ of `pad` bytes of padding entries, then `tail` (NUL-ended). */
static void put_padded_environ(pid_t pid, size_t pad, const char *tail)
{
    GString *e = g_string_sized_new(pad + strlen(tail) + 1);
    while (e->len < pad) {
        size_t chunk = MIN(pad - e->len, (size_t)100000);
        if (chunk < 3) { /* too short for "P=x": empty entries */
            g_string_append_len(e, "\0\0", (gssize)chunk);
            continue;
        }
        g_string_append(e, "P=");
        size_t at = e->len;
        g_string_set_size(e, at + chunk - 3);
        memset(e->str + at, 'x', chunk - 3);
        g_string_append_c(e, '\0');
    }
    g_string_append(e, tail);
    g_string_append_c(e, '\0');
    put(pid, "environ", e->str, (gssize)e->len);
    g_string_free(e, TRUE);
}

static void padded_process(pid_t pid, size_t pad, const char *tail)
{
    put_stat(pid, "w", 1, 1000);
    put_status(pid, pid);
    put_padded_environ(pid, pad, tail);
}

/* The environment is read whole however far VAR is: past any read size a
 * variable is found, a value across a read boundary is never cut to a
 * prefix (JOB=ab is job ab, not a), and one too large to be read whole is
 * unknown, neither a job nor anonymous. */
static void test_env_read_whole(void **st)
{
    (void)st;
    CkIdentity *id = env_identity("CKPT_JOB");
    /* 15 variables of 100 kB before VAR, as a real job's environment may be */
    padded_process(1200, 15 * 100000, "CKPT_JOB=b");
    assert_ptr_equal(job_of(id, 1200), ck_intern("b"));
    g_autofree char *tag = ck_proc_env_value(proc, 1200, "CKPT_JOB");
    assert_string_equal(tag, "b");
    /* "CKPT_JOB=ab" with its 'b' right at a boundary, and one byte either side */
    const size_t at[] = {4096, 16 * 1024, 64 * 1024, 1024 * 1024, 2 * 1024 * 1024};
    pid_t pid = 1201;
    for (size_t i = 0; i < G_N_ELEMENTS(at); i++) {
        for (int d = -1; d <= 1; d++, pid++) {
            size_t b = at[i] + (size_t)d; /* the offset of 'b' */
            padded_process(pid, b - strlen("CKPT_JOB=a"), "CKPT_JOB=ab");
            const char *job = job_of(id, pid);
            if (job != ck_intern("ab"))
                fail_msg("'b' at %zu: %s, not ab", b, job ? job : "anonymous");
            g_autofree char *v = ck_proc_env_value(proc, pid, "CKPT_JOB");
            assert_string_equal(v, "ab");
        }
    }
    /* exactly the bound is read whole; a byte more is not read at all */
    padded_process(1300, CK_PROC_READ_MAX - strlen("CKPT_JOB=far") - 1, "CKPT_JOB=far");
    assert_ptr_equal(job_of(id, 1300), ck_intern("far"));
    padded_process(1301, CK_PROC_READ_MAX - strlen("CKPT_JOB=far"), "CKPT_JOB=far");
    for (int twice = 0; twice < 2; twice++) { /* a miss, then a hit */
        g_auto(CkCaller) c = ck_identity_caller(id, 1301, 0);
        assert_ptr_equal(c.job, ck_intern(CK_IDENTITY_UNKNOWN));
        assert_int_equal(c.mode, CK_IDENTITY_ENV);
        assert_null(c.value);
    }
    assert_null(ck_proc_env_value(proc, 1301, "CKPT_JOB"));
    /* VAR first makes no difference: the rest could not be read */
    GString *first = g_string_new("CKPT_JOB=a");
    g_string_append_c(first, '\0');
    g_string_set_size(first, CK_PROC_READ_MAX + 1);
    memset(first->str + strlen("CKPT_JOB=a") + 1, 'x', first->len - strlen("CKPT_JOB=a") - 1);
    process(1302, "w", 1, "");
    put(1302, "environ", first->str, (gssize)first->len);
    g_string_free(first, TRUE);
    assert_ptr_equal(job_of(id, 1302), ck_intern(CK_IDENTITY_UNKNOWN));
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
    g_autofree char *why = NULL;
    CkIdentity *id = ck_identity_new(NULL, "env:CKPTFS_TEST_JOB", NULL, "/proc", &why);
    const char *job = job_of(id, child);
    /* '/' is never in a job id */
    CkIdentity *path = ck_identity_new(NULL, "env:PATH", NULL, "/proc", &why);
    g_auto(CkCaller) pj = ck_identity_caller(path, child, 0);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_ptr_equal(job, ck_intern("real-child"));
    assert_ptr_equal(pj.job, CK_CALLER_INVALID);
    assert_string_equal(pj.value, "/usr/bin:/bin");
    assert_null(job_of(id, child)); /* gone */
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

/* Every value of VAR that is not a job id is invalid, with the value as it
 * was, escaped, for the record; cached like any answer. */
static void test_env_invalid_values(void **st)
{
    (void)st;
    g_autofree char *long300 = g_strnfill(300, 'x');
    g_autofree char *env300 = g_strconcat("CKPT_JOB=", long300, NULL);
    const struct {
        const char *env;
        const char *value;
    } cases[] = {
        {"CKPT_JOB=bad id!", "bad id!"},   {"CKPT_JOB=", ""},
        {"CKPT_JOB=j1 ", "j1 "},           {"CKPT_JOB=other/x", "other/x"},
        {"CKPT_JOB=.hidden", ".hidden"},   {"CKPT_JOB=a\nb", "a\\x0ab"},
        {"CKPT_JOB=\xff\\", "\\xff\\x5c"}, {env300, long300},
    };
    CkIdentity *id = env_identity("CKPT_JOB");
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        pid_t pid = (pid_t)(1000 + i);
        process(pid, "w", 100 + i, cases[i].env);
        for (int twice = 0; twice < 2; twice++) { /* a miss, then a hit */
            g_auto(CkCaller) c = ck_identity_caller(id, pid, 0);
            assert_ptr_equal(c.job, CK_CALLER_INVALID);
            assert_int_equal(c.mode, CK_IDENTITY_ENV);
            assert_non_null(c.value);
            assert_string_equal(c.value, cases[i].value);
        }
    }
    /* a value past CK_ENV_VALUE_MAX bytes is kept to that many */
    g_autofree char *huge = g_strnfill(5000, 'y');
    g_autofree char *envh = g_strconcat("CKPT_JOB=", huge, NULL);
    process(1100, "w", 1, envh);
    g_auto(CkCaller) c = ck_identity_caller(id, 1100, 0);
    assert_ptr_equal(c.job, CK_CALLER_INVALID);
    assert_int_equal(strlen(c.value), CK_ENV_VALUE_MAX);
    /* a valid one and an absent one stay what they were */
    process(1101, "w", 1, "CKPT_JOB=ok");
    g_auto(CkCaller) ok = ck_identity_caller(id, 1101, 0);
    assert_ptr_equal(ok.job, ck_intern("ok"));
    assert_int_equal(ok.mode, CK_IDENTITY_ENV);
    assert_null(ok.value);
    process(1102, "w", 1, "OTHER=1");
    g_auto(CkCaller) none = ck_identity_caller(id, 1102, 0);
    assert_null(none.job);
    assert_int_equal(none.mode, CK_IDENTITY_NONE);
    ck_identity_free(id);
}

static void test_escape(void **st)
{
    (void)st;
    const struct {
        const char *raw;
        size_t len;
        const char *want;
    } cases[] = {
        {"plain id!", 9, "plain id!"}, {"", 0, ""},          {"a\\b", 3, "a\\x5cb"},
        {"\n\t", 2, "\\x0a\\x09"},     {"\0z", 2, "\\x00z"}, {"\x7f\x80", 2, "\\x7f\\x80"},
        {"\"q\"", 3, "\"q\""},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *e = ck_identity_escape(cases[i].raw, cases[i].len);
        assert_string_equal(e, cases[i].want);
    }
}

/* identity= as the options give it. */
static void test_spec(void **st)
{
    (void)st;
    const struct {
        const char *spec;
        bool ok;
        CkIdentityMode mode;
        const char *why; /* part of the reason when refused */
    } cases[] = {
        {"env:CLINK_JOB_ID", true, CK_IDENTITY_ENV, NULL},
        {"env:", false, 0, "env:VAR"},
        {"env:A=B", false, 0, "env:VAR"},
        {"cgroup", true, CK_IDENTITY_CGROUP, NULL},
        {"cgroup:/clink.slice/clink-worker@%j.service", true, CK_IDENTITY_CGROUP, NULL},
        {"cgroup:", false, 0, "absolute"},
        {"cgroup:/a/b", false, 0, "%j"},
        {"uid", true, CK_IDENTITY_UID, NULL},
        {"uid:1000", false, 0, "expected env:VAR, cgroup:PATTERN, cgroup or uid"},
        {"CKJOB", false, 0, "expected env:VAR"},
        {"", false, 0, "expected"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        CkIdentityMode mode = CK_IDENTITY_NONE;
        g_autofree char *why = NULL;
        bool ok = ck_identity_spec_check(cases[i].spec, &mode, &why);
        if (ok != cases[i].ok)
            fail_msg("%s: %s", cases[i].spec, ok ? "accepted" : why);
        if (ok)
            assert_int_equal(mode, cases[i].mode);
        else
            assert_non_null(strstr(why, cases[i].why));
    }
    assert_string_equal(ck_identity_mode_name(CK_IDENTITY_ENV), "env");
    assert_string_equal(ck_identity_mode_name(CK_IDENTITY_CGROUP), "cgroup");
    assert_string_equal(ck_identity_mode_name(CK_IDENTITY_UID), "uid");
    assert_string_equal(ck_identity_mode_name(CK_IDENTITY_JOB), "job");
    assert_null(ck_identity_mode_name(CK_IDENTITY_NONE));
    assert_false(ck_identity_anonymous_denied_by_default(CK_IDENTITY_NONE));
    assert_false(ck_identity_anonymous_denied_by_default(CK_IDENTITY_JOB));
    assert_false(ck_identity_anonymous_denied_by_default(CK_IDENTITY_ENV));
    assert_true(ck_identity_anonymous_denied_by_default(CK_IDENTITY_CGROUP));
    assert_true(ck_identity_anonymous_denied_by_default(CK_IDENTITY_UID));
}

/* Patterns: exactly one %j, '*' a whole component, absolute, no empty, "."
 * or ".." components, no trailing '/', no other '%'. */
static void test_pattern_parse(void **st)
{
    (void)st;
    const struct {
        const char *text;
        const char *why; /* NULL: a pattern */
    } cases[] = {
        {"/clink.slice/clink-worker@%j.service", NULL},
        {"/%j", NULL},
        {"/a/*/job-%j/*", NULL},
        {"/a/%j-x/b", NULL},
        {"/a b/%j", NULL},
        {"", "absolute"},
        {"a/%j", "absolute"},
        {"/", "ends with a name"},
        {"/a/%j/", "ends with a name"},
        {"/a/b", "exactly once, not 0 times"},
        {"/%j/%j", "exactly once, not 2 times"},
        {"/a/%j%j", "only as %j, once"},
        {"/a/%x", "only as %j"},
        {"/a/%", "only as %j"},
        {"/a/100%/%j", "only as %j"},
        {"/a//%j", "no empty"},
        {"/./%j", "no empty"},
        {"/../%j", "no empty"},
        {"/a*/%j", "whole component"},
        {"/*%j", "whole component"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *why = NULL;
        CkCgroupPattern *p = ck_cgroup_pattern_new(cases[i].text, &why);
        if (!cases[i].why) {
            if (!p)
                fail_msg("%s: refused: %s", cases[i].text, why);
            ck_cgroup_pattern_free(p);
            continue;
        }
        if (p)
            fail_msg("%s: accepted", cases[i].text);
        if (!strstr(why, cases[i].why))
            fail_msg("%s: \"%s\" does not say \"%s\"", cases[i].text, why, cases[i].why);
    }
    g_autofree char *as = g_strnfill(5000, 'a');
    g_autofree char *longp = g_strdup_printf("/%s/%%j", as);
    g_autofree char *why = NULL;
    assert_null(ck_cgroup_pattern_new(longp, &why));
    assert_non_null(strstr(why, "4096"));
}

/* Matching: a prefix of whole components; '*' any one component; %j what
 * stands between its neighbours in its component (possibly empty or not a
 * job id: the caller judges it). */
static void test_pattern_match(void **st)
{
    (void)st;
    const struct {
        const char *pattern;
        const char *path;
        const char *job; /* NULL: no match */
    } cases[] = {
        {"/clink.slice/clink-worker@%j.service", "/clink.slice/clink-worker@j1.service", "j1"},
        {"/clink.slice/clink-worker@%j.service", "/clink.slice/clink-worker@j1.service/sub/x",
         "j1"},
        {"/clink.slice/clink-worker@%j.service", "/clink.slice/clink-worker@j1.servicex", NULL},
        {"/clink.slice/clink-worker@%j.service", "/clink.slice", NULL},
        {"/clink.slice/clink-worker@%j.service", "/", NULL},
        {"/clink.slice/clink-worker@%j.service", "/other.slice/clink-worker@j1.service", NULL},
        {"/clink.slice/clink-worker@%j.service", "/clink.slice/clink-worker@.service", ""},
        {"/clink.slice/clink-worker@%j.service", "/clink.slice/clink-worker@a.service.service",
         "a.service"},
        {"/t/job-%j", "/t/job-a", "a"},
        {"/t/job-%j", "/t/job-a/worker/inner", "a"},
        {"/t/job-%j", "/t/job-", ""},
        {"/t/job-%j", "/t/jobs-a", NULL},
        {"/t/job-%j", "/t", NULL},
        {"/t/job-%j", "/tt/job-a", NULL},
        {"/*/%j", "/kubepods/j7", "j7"},
        {"/*/%j", "/a/b/c", "b"},
        {"/*/%j", "/a", NULL},
        {"/a/*/%j/*", "/a/x/j/y", "j"},
        {"/a/*/%j/*", "/a/x/j", NULL},
        {"/%j", "/bad id!", "bad id!"},
        {"/%j", "/j//", "j"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *why = NULL;
        g_autoptr(CkCgroupPattern) p = ck_cgroup_pattern_new(cases[i].pattern, &why);
        assert_non_null(p);
        const char *j = NULL;
        size_t jlen = 0;
        bool m = ck_cgroup_pattern_match(p, cases[i].path, strlen(cases[i].path), &j, &jlen);
        if (m != (cases[i].job != NULL))
            fail_msg("%s against %s: %s", cases[i].path, cases[i].pattern,
                     m ? "matched" : "did not match");
        if (m) {
            g_autofree char *got = g_strndup(j, jlen);
            if (strcmp(got, cases[i].job) != 0)
                fail_msg("%s against %s: %%j is \"%s\", not \"%s\"", cases[i].path,
                         cases[i].pattern, got, cases[i].job);
        }
    }
}

/* The map's lines: what parses, and the line number and reason of what
 * does not. */
static void test_map_parse(void **st)
{
    (void)st;
    const struct {
        const char *text;
        guint cgroups, uids; /* when it parses */
        const char *why;     /* NULL: parses; else part of the reason */
    } cases[] = {
        {"", 0, 0, NULL},
        {"\n\n   \n\t\n", 0, 0, NULL},
        {"# a comment\n  # indented\n/a j1\n", 1, 0, NULL},
        {"/kubepods.slice/pod1 j1\nuid:1000 j2\nuid:0 root-job\n/ everyone\n", 2, 2, NULL},
        {"  /a\t\tj1  \r\n/b j1\r\nuid:7 j1", 2, 1,
         NULL}, /* blanks, CRLF, no final LF, one job twice */
        {"/a j1\n/a/b j2\n", 2, 0, NULL},
        {"/a\n", 0, 0, "line 1: expected two fields"},
        {"/a j1\n/b j2 extra\n", 0, 0, "line 2: expected two fields"},
        {"/a j1\n\n/b bad!id\n", 0, 0, "line 3: bad!id: not a valid job id"},
        {"/a .hidden\n", 0, 0, "line 1: .hidden: not a valid job id"},
        {"a j1\n", 0, 0, "line 1: a: expected a cgroup path"},
        {"/a/ j1\n", 0, 0, "line 1: /a/: expected a cgroup path"},
        {"/a//b j1\n", 0, 0, "line 1: /a//b: expected a cgroup path"},
        {"/a/../b j1\n", 0, 0, "line 1: /a/../b: expected a cgroup path"},
        {"uid:x j1\n", 0, 0, "line 1: uid:x: not a uid"},
        {"uid: j1\n", 0, 0, "line 1: uid:: not a uid"},
        {"uid:007 j1\n", 0, 0, "line 1: uid:007: not a uid"},
        {"uid:-1 j1\n", 0, 0, "line 1: uid:-1: not a uid"},
        {"uid:4294967295 j1\n", 0, 0, "line 1: uid:4294967295: not a uid"},
        {"uid:4294967296 j1\n", 0, 0, "not a uid"},
        {"/a j1\n# x\n/a j2\n", 0, 0, "line 3: /a: given again (first on line 1)"},
        {"uid:5 j1\nuid:5 j1\n", 0, 0, "line 2: uid:5: given again (first on line 1)"},
        {"/a j1 # comment\n", 0, 0, "line 1: expected two fields"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *why = NULL;
        g_autoptr(CkIdentityMap) m =
            ck_identity_map_parse(cases[i].text, strlen(cases[i].text), &why);
        if (!cases[i].why) {
            if (!m)
                fail_msg("case %zu: refused: %s", i, why);
            assert_int_equal(ck_identity_map_cgroup_lines(m), cases[i].cgroups);
            assert_int_equal(ck_identity_map_uid_lines(m), cases[i].uids);
            continue;
        }
        if (m)
            fail_msg("case %zu: accepted", i);
        if (!strstr(why, cases[i].why))
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, why, cases[i].why);
    }
    /* a NUL byte, named with its line */
    g_autofree char *why = NULL;
    assert_null(ck_identity_map_parse("/a j1\n/b\0 j2\n", 13, &why));
    assert_string_equal(why, "line 2: NUL byte");
    /* too large */
    g_autofree char *why2 = NULL;
    assert_null(ck_identity_map_parse("", CK_IDENTITY_MAP_MAX_BYTES + 1, &why2));
    assert_non_null(strstr(why2, "larger than"));
}

/* Lookups: the longest prefix of whole components; uids exactly. */
static void test_map_lookup(void **st)
{
    (void)st;
    const char *text = "/k j-root\n/k/pod1 j1\n/k/pod1/c2 j2\nuid:1000 u1\nuid:0 u0\n";
    g_autofree char *why = NULL;
    g_autoptr(CkIdentityMap) m = ck_identity_map_parse(text, strlen(text), &why);
    assert_non_null(m);
    const struct {
        const char *path;
        const char *job;
    } cases[] = {
        {"/k/pod1/c1", "j1"},
        {"/k/pod1", "j1"},
        {"/k/pod1/c2/x", "j2"},
        {"/k/pod12", "j-root"},
        {"/k", "j-root"},
        {"/kk", NULL},
        {"/", NULL},
        {"/k/pod1/", "j1"},
        {"/other/k", NULL},
        {"k/pod1", NULL},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const char *j = ck_identity_map_by_cgroup(m, cases[i].path, strlen(cases[i].path));
        if (g_strcmp0(j, cases[i].job) != 0)
            fail_msg("%s: %s, not %s", cases[i].path, j ? j : "none",
                     cases[i].job ? cases[i].job : "none");
        if (j)
            assert_ptr_equal(j, ck_intern(cases[i].job));
    }
    assert_ptr_equal(ck_identity_map_by_uid(m, 1000), ck_intern("u1"));
    assert_ptr_equal(ck_identity_map_by_uid(m, 0), ck_intern("u0"));
    assert_null(ck_identity_map_by_uid(m, 1001));
    assert_null(ck_identity_map_by_uid(m, (uid_t)-1));
    assert_null(ck_identity_map_by_uid(NULL, 0));
    assert_null(ck_identity_map_by_cgroup(NULL, "/k", 2));
    /* "/" matches every cgroup */
    g_autofree char *why2 = NULL;
    g_autoptr(CkIdentityMap) all = ck_identity_map_parse("/ any\n", 6, &why2);
    assert_ptr_equal(ck_identity_map_by_cgroup(all, "/x/y", 4), ck_intern("any"));
    assert_ptr_equal(ck_identity_map_by_cgroup(all, "/", 1), ck_intern("any"));
}

/* A map from a file: read whole, errors said; not a regular file refused. */
static void test_map_load(void **st)
{
    (void)st;
    testfs_put(proc, "map1", "/a j1\nuid:3 j3\n");
    g_autofree char *p1 = g_build_filename(proc, "map1", NULL);
    g_autofree char *why = NULL;
    g_autoptr(CkIdentityMap) m = ck_identity_map_load(p1, &why);
    assert_non_null(m);
    assert_int_equal(ck_identity_map_cgroup_lines(m), 1);
    assert_int_equal(ck_identity_map_uid_lines(m), 1);
    testfs_put(proc, "map2", "/a j1\n/a j2\n");
    g_autofree char *p2 = g_build_filename(proc, "map2", NULL);
    assert_null(ck_identity_map_load(p2, &why));
    assert_string_equal(why, "line 2: /a: given again (first on line 1)");
    g_clear_pointer(&why, g_free);
    g_autofree char *p3 = g_build_filename(proc, "no-such-map", NULL);
    assert_null(ck_identity_map_load(p3, &why));
    assert_string_equal(why, g_strerror(ENOENT));
    g_clear_pointer(&why, g_free);
    assert_null(ck_identity_map_load(proc, &why));
    assert_string_equal(why, "not a regular file");
}

static void put_cgroup(pid_t pid, const char *text)
{
    put(pid, "cgroup", text, -1);
}

static CkIdentityMap *map_of(const char *text)
{
    g_autofree char *why = NULL;
    CkIdentityMap *m = ck_identity_map_parse(text, strlen(text), &why);
    if (!m)
        fail_msg("%s", why);
    return m;
}

/* identity=cgroup:PATTERN: the "0::" line, read each time; the map's
 * cgroup lines first, then the pattern; what the pattern gives is checked
 * as a job id. */
static void test_cgroup_mode(void **st)
{
    (void)st;
    CkIdentity *id = identity(NULL, "cgroup:/t/job-%j", map_of("/t/job-x j-mapped\n/k/pod9 j9\n"));
    assert_int_equal(ck_identity_mode(id), CK_IDENTITY_CGROUP);
    const struct {
        const char *cgroup; /* the file */
        const char *job;    /* NULL anonymous, "!" invalid, "?" unknown */
        const char *value;  /* invalid: its value */
    } cases[] = {
        {"0::/t/job-a\n", "a", NULL},
        {"0::/t/job-a/sub/deeper\n", "a", NULL},
        {"12:pids:/\n4:memory:/x\n0::/t/job-b\n", "b",
         NULL},                              /* v1 lines first, as on hybrid hosts */
        {"0::/t/job-x\n", "j-mapped", NULL}, /* the map wins over the pattern */
        {"0::/k/pod9/c1\n", "j9", NULL},
        {"0::/t/job-bad id!\n", "!", "bad id!"},
        {"0::/t/job-\n", "!", ""},
        {"0::/t/job-.x\n", "!", ".x"},
        {"0::/t\n", NULL, NULL},
        {"0::/\n", NULL, NULL},
        {"0::/elsewhere/job-a\n", NULL, NULL},
        {"4:memory:/t/job-a\n", NULL, NULL}, /* no cgroup v2 line */
        {"", NULL, NULL},
        {"0::/t/job-b/x\n0::/t/job-a\n", "?", NULL}, /* a name with a newline: fail closed */
        {"0::\n", NULL, NULL},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        pid_t pid = (pid_t)(2000 + i);
        put_cgroup(pid, cases[i].cgroup);
        g_auto(CkCaller) c = ck_identity_caller(id, pid, 0);
        const char *want = cases[i].job;
        if (!want) {
            if (c.job)
                fail_msg("%s: %s, not anonymous", cases[i].cgroup, c.job);
            assert_int_equal(c.mode, CK_IDENTITY_NONE);
        } else if (strcmp(want, "!") == 0) {
            assert_ptr_equal(c.job, CK_CALLER_INVALID);
            assert_string_equal(c.value, cases[i].value);
            assert_int_equal(c.mode, CK_IDENTITY_CGROUP);
        } else if (strcmp(want, "?") == 0) {
            assert_ptr_equal(c.job, ck_intern(CK_IDENTITY_UNKNOWN));
        } else {
            if (c.job != ck_intern(want))
                fail_msg("%s: %s, not %s", cases[i].cgroup, c.job ? c.job : "anonymous", want);
            assert_int_equal(c.mode, CK_IDENTITY_CGROUP);
            assert_null(c.value);
        }
    }
    /* a file longer than any first read (long v1 paths of a hybrid host)
     * is read whole: its "0::" line is found, never taken from part of it */
    GString *hybrid = g_string_new(NULL);
    for (int h = 1; hybrid->len < 64 * 1024; h++) {
        g_string_append_printf(hybrid, "%d:ctrl%d:/", h, h);
        for (int k = 0; k < 400; k++)
            g_string_append(hybrid, "deep/");
        g_string_append(hybrid, "end\n");
    }
    g_string_append(hybrid, "0::/t/job-long\n");
    put_cgroup(2090, hybrid->str);
    g_string_free(hybrid, TRUE);
    assert_ptr_equal(job_of(id, 2090), ck_intern("long"));
    /* read each time: a process moved to another cgroup is its new job at once */
    put_cgroup(2100, "0::/t/job-a\n");
    assert_ptr_equal(job_of(id, 2100), ck_intern("a"));
    put_cgroup(2100, "0::/t/job-b\n");
    assert_ptr_equal(job_of(id, 2100), ck_intern("b"));
    /* a new map applies to the next call; gone from it, the pattern answers */
    ck_identity_set_map(id, map_of("/t/job-b other\n"));
    assert_ptr_equal(job_of(id, 2100), ck_intern("other"));
    ck_identity_set_map(id, NULL);
    assert_ptr_equal(job_of(id, 2100), ck_intern("b"));
    /* gone: anonymous; no pid (outside the daemon's pid namespace): unknown */
    assert_null(job_of(id, 99999));
    g_auto(CkCaller) outside = ck_identity_caller(id, 0, 0);
    assert_ptr_equal(outside.job, ck_intern(CK_IDENTITY_UNKNOWN));
    assert_int_equal(outside.mode, CK_IDENTITY_CGROUP);
    ck_identity_free(id);

    /* identity=cgroup: the map alone */
    CkIdentity *map_only = identity(NULL, "cgroup", map_of("/k/pod9 j9\n"));
    put_cgroup(2200, "0::/k/pod9/c\n");
    put_cgroup(2201, "0::/t/job-a\n");
    assert_ptr_equal(job_of(map_only, 2200), ck_intern("j9"));
    assert_null(job_of(map_only, 2201));
    ck_identity_free(map_only);
}

/* identity=uid: the uid of the request, in the map's uid lines; /proc is
 * never read (the pid does not matter). */
static void test_uid_mode(void **st)
{
    (void)st;
    CkIdentity *id = identity(NULL, "uid", map_of("uid:65534 ja\nuid:65533 jb\n/t/job-a cg\n"));
    assert_int_equal(ck_identity_mode(id), CK_IDENTITY_UID);
    g_auto(CkCaller) a = ck_identity_caller(id, 424242, 65534);
    assert_ptr_equal(a.job, ck_intern("ja"));
    assert_int_equal(a.mode, CK_IDENTITY_UID);
    g_auto(CkCaller) b = ck_identity_caller(id, 0, 65533);
    assert_ptr_equal(b.job, ck_intern("jb"));
    g_auto(CkCaller) n = ck_identity_caller(id, 1, 1000);
    assert_null(n.job);
    assert_int_equal(n.mode, CK_IDENTITY_NONE);
    ck_identity_set_map(id, map_of("uid:1000 j1000\n"));
    assert_null(job_of(id, 1)); /* uid 0: no line */
    g_auto(CkCaller) m = ck_identity_caller(id, 1, 1000);
    assert_ptr_equal(m.job, ck_intern("j1000"));
    g_auto(CkCaller) gone = ck_identity_caller(id, 1, 65534);
    assert_null(gone.job);
    ck_identity_free(id);
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
        cmocka_unit_test(test_env_read_whole),
        cmocka_unit_test(test_real_proc),
        cmocka_unit_test(test_env_value),
        cmocka_unit_test(test_env_invalid_values),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_pattern_parse),
        cmocka_unit_test(test_pattern_match),
        cmocka_unit_test(test_map_parse),
        cmocka_unit_test(test_map_lookup),
        cmocka_unit_test(test_map_load),
        cmocka_unit_test(test_cgroup_mode),
        cmocka_unit_test(test_uid_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
