/* Who a caller is, through real mounts, real cgroups and real users
 * (ckptfs(8) IDENTITY): identity=cgroup:PATTERN reads each writer's cgroup
 * v2 path (a job's worker claims another job in its environment in vain; a
 * process moved to another job's cgroup writes as that job from its next
 * write; a sub-cgroup keeps its job); identity_map=FILE names jobs by
 * cgroup prefix or uid, is read again when rewritten by rename, and keeps
 * its previous lines when the new file does not parse; anonymous=deny
 * refuses a caller nothing names; an identity that is present but not a
 * valid job id writes nowhere (invalid-identity), reads still work;
 * identity=env:VAR reads the whole environment (a job named past 1 MiB of
 * variables, a value never cut short); a daemon in a pid namespace of its
 * own takes a caller outside it (pid 0) for unknown; a malformed map is
 * refused at mount and at a takeover with one line, and the map and
 * anonymous= outlive a kill -9 of the daemon.
 *
 * Workers are this program run again (--worker): moved into their cgroup
 * and dropped to an unprivileged uid before they serve requests from the
 * test, with exactly the environment the test gives them (what the daemon
 * reads in /proc/<pid>/environ).  The cgroups live in
 * <cgroup2>/ckptfs-test-<pid>/ and are removed (their processes moved back
 * to the root cgroup first) by the teardown of every test and at exit, so
 * a failing test leaves none behind. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <grp.h>
#include <json-glib/json-glib.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define NOBODY 65534 /* job a's worker in the uid tests */
#define OTHER  65533 /* job b's */
#define NOONE  65532 /* in no map */

#define CK_UNKNOWN "(unknown)" /* the caller_job of a caller the daemon cannot name */

static void sleep_ms(int ms)
{
    g_usleep((gulong)ms * 1000);
}

/* ---- cgroups ---- */

/* The test's cgroups: where cgroup v2 is mounted, the test root under it
 * (as a path of this file system, and as the daemon reads it in
 * /proc/<pid>/cgroup), and every directory made, for the clean-up. */
static struct {
    char *mnt;         /* the cgroup2 mount point; NULL: none */
    char *root;        /* mnt/ckptfs-test-<pid> */
    char *view;        /* root as /proc/<pid>/cgroup shows it */
    GPtrArray *made;   /* directories made, in order */
    GArray *workers;   /* pid_t of the workers alive */
    bool cleanup_hook; /* atexit registered */
} cg;

static char *cgroup2_mount(void)
{
    g_autofree char *info = NULL;
    if (!g_file_get_contents("/proc/self/mountinfo", &info, NULL, NULL))
        return NULL;
    g_auto(GStrv) lines = g_strsplit(info, "\n", -1);
    for (char **l = lines; *l; l++) {
        const char *sep = strstr(*l, " - ");
        if (!sep || !g_str_has_prefix(sep + 3, "cgroup2 "))
            continue;
        g_auto(GStrv) f = g_strsplit(*l, " ", 6);
        if (g_strv_length(f) >= 5)
            return g_strdup(f[4]); /* no escaped characters in the usual places */
    }
    return NULL;
}

/* Moves every process of dir to the root cgroup. */
static void cg_empty(const char *dir)
{
    g_autofree char *procs = g_build_filename(dir, "cgroup.procs", NULL);
    g_autofree char *to = g_build_filename(cg.mnt, "cgroup.procs", NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(procs, &text, NULL, NULL))
        return;
    g_auto(GStrv) pids = g_strsplit(text, "\n", -1);
    for (char **p = pids; *p; p++) {
        if (!**p)
            continue;
        int fd = open(to, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, *p, strlen(*p)) < 0)
                fprintf(stderr, "cannot move pid %s out of %s: %s\n", *p, dir, g_strerror(errno));
            close(fd);
        }
    }
}

/* Kills the workers still alive, empties and removes every cgroup made
 * (deepest first).  Safe to call twice, and at exit. */
static void cg_cleanup(void)
{
    for (guint i = 0; cg.workers && i < cg.workers->len; i++) {
        pid_t pid = g_array_index(cg.workers, pid_t, i);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    if (cg.workers)
        g_array_set_size(cg.workers, 0);
    while (cg.made && cg.made->len) {
        char *dir = cg.made->pdata[cg.made->len - 1];
        for (int i = 0; i < 100; i++) {
            cg_empty(dir);
            if (rmdir(dir) == 0 || errno == ENOENT)
                break;
            sleep_ms(20); /* a process just killed leaves its cgroup a moment later */
        }
        if (access(dir, F_OK) == 0)
            fprintf(stderr, "cannot remove cgroup %s: %s\n", dir, g_strerror(errno));
        g_ptr_array_remove_index(cg.made, cg.made->len - 1);
    }
}

static int cg_teardown(void **state)
{
    (void)state;
    cg_cleanup();
    return 0;
}

/* Makes rel (under the test root) and its parents; returns its path. */
static char *cg_make(const char *rel)
{
    g_autofree char *path = rel ? g_build_filename(cg.root, rel, NULL) : g_strdup(cg.root);
    g_autofree char *parent = g_path_get_dirname(path);
    if (rel && strcmp(parent, cg.root) != 0) {
        g_autofree char *prel = g_path_get_dirname(rel);
        g_free(cg_make(prel));
    } else if (rel && access(cg.root, F_OK) != 0) {
        g_free(cg_make(NULL));
    }
    if (access(path, F_OK) != 0) {
        if (mkdir(path, 0755) != 0)
            fail_msg("mkdir %s: %s", path, g_strerror(errno));
        g_ptr_array_add(cg.made, g_strdup(path));
    }
    return g_steal_pointer(&path);
}

/* The "0::" path of a process moved into dir: how the daemon sees dir. */
static char *cg_view_of(const char *dir)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        g_autofree char *procs = g_build_filename(dir, "cgroup.procs", NULL);
        g_autofree char *me = g_strdup_printf("%d", (int)getpid());
        g_autofree char *text = NULL;
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, me, strlen(me)) < 0)
            _exit(2);
        close(fd);
        if (!g_file_get_contents("/proc/self/cgroup", &text, NULL, NULL))
            _exit(3);
        const char *l = g_str_has_prefix(text, "0::") ? text : strstr(text, "\n0::");
        if (!l)
            _exit(4);
        l += l == text ? 3 : 4;
        size_t n = strcspn(l, "\n");
        if (write(p[1], l, n) != (ssize_t)n)
            _exit(5);
        _exit(0);
    }
    close(p[1]);
    char buf[4096];
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(n > 0);
    buf[n] = '\0';
    return g_strdup(buf);
}

/* The cgroup tests need cgroup v2; set up once per test. */
static int cg_setup(void **state)
{
    (void)state;
    if (!cg.made) {
        cg.made = g_ptr_array_new_with_free_func(g_free);
        cg.workers = g_array_new(FALSE, FALSE, sizeof(pid_t));
        cg.mnt = cgroup2_mount();
        if (cg.mnt)
            cg.root = g_strdup_printf("%s/ckptfs-test-%d", cg.mnt, (int)getpid());
    }
    if (!cg.cleanup_hook) {
        atexit(cg_cleanup);
        cg.cleanup_hook = true;
    }
    if (cg.mnt && !cg.view) {
        g_autofree char *root = cg_make(NULL);
        cg.view = cg_view_of(root);
        cg_cleanup();
    }
    return 0;
}

static void need_cgroup2(void)
{
    if (!cg.mnt) {
        fprintf(stderr, "no cgroup2 file system in /proc/self/mountinfo: cgroup tests skipped\n");
        skip();
    }
}

/* identity=cgroup:<test root>/job-%j, as the daemon sees the test root. */
static char *job_pattern(void)
{
    return g_strdup_printf("identity=cgroup:%s/job-%%j", cg.view);
}

/* ---- workers ---- */

typedef struct {
    pid_t pid;
    FILE *to, *from;
} Worker;

/* argv[0] --worker CGROUP_DIR|- UID: moves itself into the cgroup, drops to
 * UID (its gid too, no supplementary groups), says "ready", then runs
 * "op path [path2]" lines: write (create or truncate, write, close), read,
 * mkdir, rename; answers each with its errno (0: done). */
static int worker_main(const char *cgdir, const char *uid_s)
{
    if (strcmp(cgdir, "-") != 0) {
        g_autofree char *procs = g_build_filename(cgdir, "cgroup.procs", NULL);
        g_autofree char *me = g_strdup_printf("%d", (int)getpid());
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, me, strlen(me)) < 0)
            return 10;
        close(fd);
    }
    uid_t uid = (uid_t)atoi(uid_s);
    if (uid &&
        (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0))
        return 11;
    printf("ready\n");
    fflush(stdout);
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        g_auto(GStrv) a = g_strsplit(line, "\t", 3);
        if (!a[0] || strcmp(a[0], "quit") == 0)
            break;
        int r = -1;
        errno = EINVAL;
        if (strcmp(a[0], "write") == 0 && a[1]) {
            int fd = open(a[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            r = fd < 0 || write(fd, "x", 1) != 1 ? -1 : 0;
            if (fd >= 0 && close(fd) != 0)
                r = -1;
        } else if (strcmp(a[0], "read") == 0 && a[1]) {
            char buf[16];
            int fd = open(a[1], O_RDONLY);
            r = fd < 0 || read(fd, buf, sizeof buf) < 0 ? -1 : 0;
            if (fd >= 0)
                close(fd);
        } else if (strcmp(a[0], "mkdir") == 0 && a[1]) {
            r = mkdir(a[1], 0777);
        } else if (strcmp(a[0], "rename") == 0 && a[1] && a[2]) {
            r = rename(a[1], a[2]);
        }
        printf("%d\n", r == 0 ? 0 : errno);
        fflush(stdout);
    }
    return 0;
}

/* Starts a worker in cgroup dir (NULL: where the test is) as uid (0:
 * root), with exactly the environment env (NULL-terminated "VAR=value"
 * strings, may be NULL) beyond what the sanitizers need. */
static Worker *worker_start(const char *dir, uid_t uid, const char *const *env)
{
    int to[2], from[2];
    assert_int_equal(pipe(to), 0);
    assert_int_equal(pipe(from), 0);
    g_autofree char *uid_s = g_strdup_printf("%u", (unsigned)uid);
    GPtrArray *envp = g_ptr_array_new();
    g_ptr_array_add(envp, "ASAN_OPTIONS=detect_leaks=0");
    for (size_t i = 0; env && env[i]; i++)
        g_ptr_array_add(envp, (gpointer)env[i]);
    g_ptr_array_add(envp, NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        char *argv[] = {"/proc/self/exe", "--worker", (char *)(dir ? dir : "-"), uid_s, NULL};
        execve("/proc/self/exe", argv, (char **)envp->pdata);
        _exit(127);
    }
    g_ptr_array_free(envp, TRUE);
    close(to[0]);
    close(from[1]);
    g_array_append_val(cg.workers, pid);
    Worker *w = g_new0(Worker, 1);
    w->pid = pid;
    w->to = fdopen(to[1], "w");
    w->from = fdopen(from[0], "r");
    char line[64] = "";
    if (!fgets(line, sizeof line, w->from) || strcmp(line, "ready\n") != 0) {
        int status = 0;
        waitpid(pid, &status, 0);
        fail_msg("worker did not start (exit %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return w;
}

/* Runs op in the worker: its errno, 0 when it worked. */
static int worker_do(Worker *w, const char *op, const char *path, const char *path2)
{
    fprintf(w->to, "%s\t%s%s%s\n", op, path, path2 ? "\t" : "", path2 ? path2 : "");
    fflush(w->to);
    char line[64];
    assert_non_null(fgets(line, sizeof line, w->from));
    return atoi(line);
}

static void worker_stop(Worker *w)
{
    fprintf(w->to, "quit\n");
    fclose(w->to);
    fclose(w->from);
    int status;
    assert_int_equal(waitpid(w->pid, &status, 0), w->pid);
    for (guint i = 0; i < cg.workers->len; i++)
        if (g_array_index(cg.workers, pid_t, i) == w->pid)
            g_array_remove_index(cg.workers, i);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    g_free(w);
}

/* Moves a running worker into cgroup dir (what an orchestrator does). */
static void cg_move(pid_t pid, const char *dir)
{
    g_autofree char *procs = g_build_filename(dir, "cgroup.procs", NULL);
    g_autofree char *me = g_strdup_printf("%d", (int)pid);
    int fd = open(procs, O_WRONLY);
    assert_true(fd >= 0);
    assert_true(write(fd, me, strlen(me)) == (ssize_t)strlen(me));
    close(fd);
}

/* ---- mounts ---- */

/* A mount's directories: _state/a (file f), _state/b (file f) and a
 * legacy v1/0, writable by everyone, files included (the workers are not
 * root). */
static Mount *id_new(void)
{
    Mount *m = mount_new();
    const char *dirs[] = {"_state/a", "_state/b", "v1/0"};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *d = g_build_filename(m->backing, dirs[i], NULL);
        g_mkdir_with_parents(d, 0755);
        chmod(d, 0777);
    }
    g_autofree char *st = g_build_filename(m->backing, "_state", NULL);
    chmod(st, 0777); /* mkdir _state/<job> by the workers */
    chmod(m->backing, 0777);
    const char *files[] = {"_state/a/f", "_state/b/f"};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *f = g_build_filename(m->backing, files[i], NULL);
        put_file(f, "state");
        chmod(f, 0666); /* the policy refuses what crosses, not the permissions */
    }
    return m;
}

/* Mounts it with opts and allow_other (the workers are other users). */
static void id_start(Mount *m, const char *opts)
{
    g_autofree char *all = g_strconcat("allow_other,", opts, NULL);
    const char *args[] = {"-o", all, NULL};
    if (mount_start(m, args) != 0) {
        mount_free(m);
        fail_msg("mount with %s failed", opts);
    }
}

static Mount *id_mount(const char *opts)
{
    Mount *m = id_new();
    id_start(m, opts);
    return m;
}

static char *M(Mount *m, const char *rel)
{
    return g_build_filename(m->mnt, rel, NULL);
}

static char *B(Mount *m, const char *rel)
{
    return g_build_filename(m->backing, rel, NULL);
}

static bool in_backing(Mount *m, const char *rel)
{
    g_autofree char *p = B(m, rel);
    return access(p, F_OK) == 0;
}

/* The records of .collisions (unref the array). */
static JsonArray *records(Mount *m)
{
    g_autofree char *p = M(m, "_views/.collisions");
    g_autofree char *text = get_file(p);
    JsonArray *out = json_array_new();
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        g_autoptr(JsonParser) parser = json_parser_new();
        g_autoptr(GError) err = NULL;
        assert_true(json_parser_load_from_data(parser, *l, -1, &err));
        json_array_add_object_element(
            out, json_object_ref(json_node_get_object(json_parser_get_root(parser))));
    }
    return out;
}

static const char *str_or_null(JsonObject *o, const char *name)
{
    if (!json_object_has_member(o, name) || json_object_get_null_member(o, name))
        return NULL;
    return json_object_get_string_member(o, name);
}

/* The one record of path (relative to the mount); fails when there is not
 * exactly one. */
static JsonObject *record_of(JsonArray *recs, const char *path)
{
    JsonObject *found = NULL;
    for (guint i = 0; i < json_array_get_length(recs); i++) {
        JsonObject *o = json_array_get_object_element(recs, i);
        if (g_strcmp0(str_or_null(o, "path"), path) == 0) {
            if (found)
                fail_msg("two records of %s", path);
            found = o;
        }
    }
    if (!found)
        fail_msg("no record of %s", path);
    return found;
}

/* Asserts the record of path: kind, caller_job (NULL: null) and identity
 * (NULL: absent). */
static void assert_record(JsonArray *recs, const char *path, const char *kind, const char *caller,
                          const char *identity)
{
    JsonObject *o = record_of(recs, path);
    assert_string_equal(str_or_null(o, "kind"), kind);
    assert_string_equal(str_or_null(o, "verdict"), "denied");
    const char *c = str_or_null(o, "caller_job"), *i = str_or_null(o, "identity");
    if (g_strcmp0(c, caller) != 0)
        fail_msg("%s: caller_job %s, not %s", path, c ? c : "null", caller ? caller : "null");
    if (g_strcmp0(i, identity) != 0)
        fail_msg("%s: identity %s, not %s", path, i ? i : "absent", identity ? identity : "absent");
    if (!identity)
        assert_false(json_object_has_member(o, "identity"));
}

/* Waits until a metric reaches want (10 s at most); its last value. */
static int64_t wait_metric(Mount *m, const char *series, int64_t want)
{
    int64_t v = -1;
    for (int i = 0; i < 1000 && (v = mount_metric(m, series)) < want; i++)
        sleep_ms(10);
    return v;
}

/* A map written as an orchestrator's agent does: whole, then renamed over
 * the old one. */
static void put_map(const char *path, const char *text)
{
    g_autoptr(GError) err = NULL;
    g_file_set_contents(path, text, -1, &err);
    g_assert_no_error(err);
}

#define RELOADS_OK     "ckptfs_identity_map_reloads_total{result=\"ok\"}"
#define RELOADS_FAILED "ckptfs_identity_map_reloads_total{result=\"failed\"}"

/* ---- the tests ---- */

/* A worker in job-a's cgroup that claims job b in its environment writes
 * a's namespace, not b's: the cgroup says who it is, and the record says
 * so (caller a, identity cgroup). */
static void test_cgroup_names_the_job(void **state)
{
    (void)state;
    need_cgroup2();
    g_autofree char *ja = cg_make("job-a");
    g_autofree char *pat = job_pattern();
    Mount *m = id_mount(pat);
    const char *env[] = {"CLINK_JOB_ID=b", NULL};
    Worker *w = worker_start(ja, NOBODY, env);
    g_autofree char *own = M(m, "_state/a/mine"), *foreign = M(m, "_state/b/theirs");
    g_autofree char *bf = M(m, "_state/b/f");
    assert_int_equal(worker_do(w, "write", own, NULL), 0);
    assert_int_equal(worker_do(w, "write", foreign, NULL), EACCES);
    assert_int_equal(worker_do(w, "write", bf, NULL), EACCES);
    assert_int_equal(worker_do(w, "read", bf, NULL), 0); /* reads are not a job's to refuse */
    worker_stop(w);
    struct stat st;
    g_autofree char *bown = B(m, "_state/a/mine");
    assert_int_equal(stat(bown, &st), 0);
    assert_int_equal(st.st_uid, NOBODY);
    assert_false(in_backing(m, "_state/b/theirs"));
    g_autofree char *bbf = B(m, "_state/b/f");
    g_autofree char *text = get_file(bbf);
    assert_string_equal(text, "state");
    g_autoptr(JsonArray) recs = records(m);
    assert_int_equal(json_array_get_length(recs), 2);
    assert_record(recs, "_state/b/theirs", "foreign-write", "a", "cgroup");
    JsonObject *r = record_of(recs, "_state/b/theirs");
    assert_string_equal(str_or_null(r, "owner_job"), "b");
    assert_int_equal(json_object_get_int_member(r, "uid"), NOBODY);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A worker in no job's cgroup: refused in every job's namespace under
 * anonymous=deny (the default with cgroup), allowed under anonymous=allow.
 * The legacy area is refused either way, as for everyone. */
static void test_cgroup_anonymous(void **state)
{
    (void)state;
    need_cgroup2();
    g_autofree char *other = cg_make("other");
    g_autofree char *pat = job_pattern();
    Mount *m = id_mount(pat);
    Worker *w = worker_start(other, NOBODY, NULL);
    g_autofree char *af = M(m, "_state/a/anon"), *bf = M(m, "_state/b/anon");
    g_autofree char *newjob = M(m, "_state/c"), *legacy = M(m, "v1/0/anon");
    g_autofree char *existing = M(m, "_state/a/f");
    assert_int_equal(worker_do(w, "write", af, NULL), EACCES);
    assert_int_equal(worker_do(w, "write", bf, NULL), EACCES);
    assert_int_equal(worker_do(w, "mkdir", newjob, NULL), EACCES);
    assert_int_equal(worker_do(w, "write", existing, NULL), EACCES);
    assert_int_equal(worker_do(w, "write", legacy, NULL), EACCES);
    assert_int_equal(worker_do(w, "read", existing, NULL), 0);
    worker_stop(w);
    assert_false(in_backing(m, "_state/a/anon"));
    assert_false(in_backing(m, "_state/c"));
    g_autoptr(JsonArray) recs = records(m);
    assert_record(recs, "_state/a/anon", "anonymous-write", NULL, NULL);
    assert_record(recs, "_state/c", "anonymous-write", NULL, NULL);
    assert_record(recs, "v1/0/anon", "legacy-write", NULL, NULL);
    assert_true(mount_metric(m, "ckptfs_collisions_total{kind=\"anonymous-write\","
                                "verdict=\"denied\"}") >= 4);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);

    g_autofree char *allow = g_strconcat(pat, ",anonymous=allow", NULL);
    m = id_mount(allow);
    w = worker_start(other, NOBODY, NULL);
    g_autofree char *af2 = M(m, "_state/a/anon"), *newjob2 = M(m, "_state/c");
    g_autofree char *legacy2 = M(m, "v1/0/anon");
    assert_int_equal(worker_do(w, "write", af2, NULL), 0);
    assert_int_equal(worker_do(w, "mkdir", newjob2, NULL), 0);
    assert_int_equal(worker_do(w, "write", legacy2, NULL), EACCES);
    worker_stop(w);
    assert_true(in_backing(m, "_state/a/anon"));
    assert_true(in_backing(m, "_state/c"));
    g_autoptr(JsonArray) recs2 = records(m);
    assert_int_equal(json_array_get_length(recs2), 1); /* the legacy write only */
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A worker moved from job-a's cgroup to job-b's while it runs writes as b
 * from its next write on; a sub-cgroup of job-a (a delegated subtree)
 * stays a. */
static void test_cgroup_move_and_subtree(void **state)
{
    (void)state;
    need_cgroup2();
    g_autofree char *ja = cg_make("job-a"), *jb = cg_make("job-b");
    g_autofree char *deep = cg_make("job-a/worker/inner");
    g_autofree char *pat = job_pattern();
    Mount *m = id_mount(pat);
    Worker *w = worker_start(ja, NOBODY, NULL);
    g_autofree char *a1 = M(m, "_state/a/1"), *b2 = M(m, "_state/b/2"), *a3 = M(m, "_state/a/3");
    g_autofree char *b0 = M(m, "_state/b/0");
    assert_int_equal(worker_do(w, "write", a1, NULL), 0);
    assert_int_equal(worker_do(w, "write", b0, NULL), EACCES);
    cg_move(w->pid, jb);
    assert_int_equal(worker_do(w, "write", b2, NULL), 0);
    assert_int_equal(worker_do(w, "write", a3, NULL), EACCES);
    worker_stop(w);
    Worker *d = worker_start(deep, NOBODY, NULL);
    g_autofree char *a4 = M(m, "_state/a/4"), *b5 = M(m, "_state/b/5");
    assert_int_equal(worker_do(d, "write", a4, NULL), 0);
    assert_int_equal(worker_do(d, "write", b5, NULL), EACCES);
    worker_stop(d);
    assert_true(in_backing(m, "_state/a/1"));
    assert_true(in_backing(m, "_state/b/2"));
    assert_true(in_backing(m, "_state/a/4"));
    assert_false(in_backing(m, "_state/b/0"));
    assert_false(in_backing(m, "_state/a/3"));
    assert_false(in_backing(m, "_state/b/5"));
    g_autoptr(JsonArray) recs = records(m);
    assert_record(recs, "_state/b/0", "foreign-write", "a", "cgroup");
    assert_record(recs, "_state/a/3", "foreign-write", "b", "cgroup");
    assert_record(recs, "_state/b/5", "foreign-write", "a", "cgroup");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* identity=cgroup with identity_map=FILE: the map names the jobs of
 * cgroups that do not hold them; rewritten by rename it applies without a
 * remount; a malformed rewrite keeps the previous lines, says why and is
 * counted; SIGHUP reads it again.  With a pattern, the map is consulted
 * first. */
static void test_map_reload(void **state)
{
    (void)state;
    need_cgroup2();
    g_autofree char *pod = cg_make("pod-17"), *ja = cg_make("job-a");
    Mount *m = id_new();
    g_autofree char *map = g_build_filename(m->base, "idmap", NULL);
    g_autofree char *text1 = g_strdup_printf("# written by the agent\n%s/pod-17 a\n", cg.view);
    put_map(map, text1);
    g_autofree char *opts = g_strdup_printf("identity=cgroup,identity_map=%s", map);
    id_start(m, opts);
    assert_int_equal(mount_metric(m, "ckptfs_identity_map_lines{kind=\"cgroup\"}"), 1);
    Worker *w = worker_start(pod, NOBODY, NULL);
    Worker *unmapped = worker_start(ja, NOBODY, NULL); /* no pattern: job-a means nothing */
    g_autofree char *a1 = M(m, "_state/a/1"), *b1 = M(m, "_state/b/1");
    assert_int_equal(worker_do(w, "write", a1, NULL), 0);
    assert_int_equal(worker_do(w, "write", b1, NULL), EACCES);
    g_autofree char *a9 = M(m, "_state/a/9");
    assert_int_equal(worker_do(unmapped, "write", a9, NULL), EACCES);

    /* the agent gives pod-17 to job b */
    int64_t ok = mount_metric(m, RELOADS_OK);
    g_autofree char *text2 = g_strdup_printf("%s/pod-17 b\n%s/pod-18 c\n", cg.view, cg.view);
    put_map(map, text2);
    assert_true(wait_metric(m, RELOADS_OK, ok + 1) >= ok + 1);
    assert_int_equal(mount_metric(m, "ckptfs_identity_map_lines{kind=\"cgroup\"}"), 2);
    g_autofree char *b2 = M(m, "_state/b/2"), *a2 = M(m, "_state/a/2");
    assert_int_equal(worker_do(w, "write", b2, NULL), 0);
    assert_int_equal(worker_do(w, "write", a2, NULL), EACCES);

    /* a malformed rewrite: the previous map stays, and says why */
    mount_expect_log(m, "line 2: not-a-path: expected a cgroup path");
    int64_t failed = mount_metric(m, RELOADS_FAILED);
    g_autofree char *bad = g_strdup_printf("%s/pod-17 a\nnot-a-path a\n", cg.view);
    put_map(map, bad);
    assert_true(wait_metric(m, RELOADS_FAILED, failed + 1) >= failed + 1);
    g_autofree char *b3 = M(m, "_state/b/3"), *a3 = M(m, "_state/a/3");
    assert_int_equal(worker_do(w, "write", b3, NULL), 0);
    assert_int_equal(worker_do(w, "write", a3, NULL), EACCES);
    assert_int_equal(mount_metric(m, "ckptfs_identity_map_lines{kind=\"cgroup\"}"), 2);
    g_autofree char *log = get_file(m->log);
    assert_non_null(strstr(log, "the previous map stays in force (2 cgroup lines, 0 uid lines)"));

    /* mended, and SIGHUP reads it again even when it did not change */
    put_map(map, text1);
    assert_true(wait_metric(m, RELOADS_OK, ok + 2) >= ok + 2);
    assert_int_equal(kill(mount_daemon_pid(m), SIGHUP), 0);
    assert_true(wait_metric(m, RELOADS_OK, ok + 3) >= ok + 3);
    g_autofree char *a4 = M(m, "_state/a/4");
    assert_int_equal(worker_do(w, "write", a4, NULL), 0);
    worker_stop(w);
    worker_stop(unmapped);
    g_autoptr(JsonArray) recs = records(m);
    assert_record(recs, "_state/b/1", "foreign-write", "a", "cgroup");
    assert_record(recs, "_state/a/2", "foreign-write", "b", "cgroup");
    assert_record(recs, "_state/a/9", "anonymous-write", NULL, NULL);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);

    /* with a pattern too: the map's line wins over what the pattern reads */
    m = id_new();
    g_autofree char *map2 = g_build_filename(m->base, "idmap", NULL);
    g_autofree char *over = g_strdup_printf("%s/job-a b\n", cg.view);
    put_map(map2, over);
    g_autofree char *pat = job_pattern();
    g_autofree char *both = g_strdup_printf("%s,identity_map=%s", pat, map2);
    id_start(m, both);
    Worker *wa = worker_start(ja, NOBODY, NULL);
    g_autofree char *bx = M(m, "_state/b/x"), *ax = M(m, "_state/a/x");
    assert_int_equal(worker_do(wa, "write", bx, NULL), 0);
    assert_int_equal(worker_do(wa, "write", ax, NULL), EACCES);
    worker_stop(wa);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* identity=uid: the uid the kernel reports names the job through the
 * map's uid lines; a uid in no line is anonymous (refused by default). */
static void test_uid(void **state)
{
    (void)state;
    Mount *m = id_new();
    g_autofree char *map = g_build_filename(m->base, "uids", NULL);
    g_autofree char *text = g_strdup_printf("uid:%d a\nuid:%d b\n", NOBODY, OTHER);
    put_map(map, text);
    g_autofree char *opts = g_strdup_printf("identity=uid,identity_map=%s", map);
    id_start(m, opts);
    assert_int_equal(mount_metric(m, "ckptfs_identity_map_lines{kind=\"uid\"}"), 2);
    const char *env[] = {"CLINK_JOB_ID=b", NULL}; /* what the environment says does not count */
    Worker *wa = worker_start(NULL, NOBODY, env);
    Worker *wb = worker_start(NULL, OTHER, NULL);
    Worker *wn = worker_start(NULL, NOONE, NULL);
    g_autofree char *a1 = M(m, "_state/a/1"), *b1 = M(m, "_state/b/1");
    g_autofree char *b2 = M(m, "_state/b/2"), *a2 = M(m, "_state/a/2"), *a3 = M(m, "_state/a/3");
    assert_int_equal(worker_do(wa, "write", a1, NULL), 0);
    assert_int_equal(worker_do(wa, "write", b1, NULL), EACCES);
    assert_int_equal(worker_do(wb, "write", b2, NULL), 0);
    assert_int_equal(worker_do(wb, "write", a2, NULL), EACCES);
    assert_int_equal(worker_do(wn, "write", a3, NULL), EACCES);
    worker_stop(wa);
    worker_stop(wb);
    worker_stop(wn);
    /* root is in no line either */
    g_autofree char *a4 = M(m, "_state/a/4");
    assert_errno(open(a4, O_WRONLY | O_CREAT, 0644), EACCES);
    struct stat st;
    g_autofree char *ba1 = B(m, "_state/a/1"), *bb2 = B(m, "_state/b/2");
    assert_int_equal(stat(ba1, &st), 0);
    assert_int_equal(st.st_uid, NOBODY);
    assert_int_equal(stat(bb2, &st), 0);
    assert_int_equal(st.st_uid, OTHER);
    assert_false(in_backing(m, "_state/b/1"));
    assert_false(in_backing(m, "_state/a/2"));
    assert_false(in_backing(m, "_state/a/3"));
    g_autoptr(JsonArray) recs = records(m);
    assert_record(recs, "_state/b/1", "foreign-write", "a", "uid");
    assert_record(recs, "_state/a/2", "foreign-write", "b", "uid");
    assert_record(recs, "_state/a/3", "anonymous-write", NULL, NULL);
    assert_record(recs, "_state/a/4", "anonymous-write", NULL, NULL);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* identity=env:CLINK_JOB_ID with values that are not job ids: each one is
 * refused everywhere (a job's namespace, a new job, the legacy area) and
 * recorded as invalid-identity with the value as it was; reads work; a
 * valid value and no value at all keep their meaning. */
static void test_env_invalid_identity(void **state)
{
    (void)state;
    Mount *m = id_mount("identity=env:CLINK_JOB_ID,legacy=rw");
    g_autofree char *v300 = g_strnfill(300, 'x');
    g_autofree char *e300 = g_strconcat("CLINK_JOB_ID=", v300, NULL);
    const struct {
        const char *env;
        const char *value; /* as the record has it */
    } cases[] = {
        {"CLINK_JOB_ID=bad id!", "bad id!"}, {"CLINK_JOB_ID=", ""}, {"CLINK_JOB_ID=a ", "a "},
        {"CLINK_JOB_ID=other/x", "other/x"}, {e300, v300},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const char *env[] = {cases[i].env, NULL};
        Worker *w = worker_start(NULL, 0, env);
        g_autofree char *rel = g_strdup_printf("_state/a/bad-%zu", i);
        g_autofree char *relj = g_strdup_printf("_state/new-%zu", i);
        g_autofree char *rell = g_strdup_printf("v1/0/bad-%zu", i);
        g_autofree char *p = M(m, rel), *pj = M(m, relj), *pl = M(m, rell);
        g_autofree char *existing = M(m, "_state/a/f");
        assert_int_equal(worker_do(w, "write", p, NULL), EACCES);
        assert_int_equal(worker_do(w, "mkdir", pj, NULL), EACCES);
        assert_int_equal(worker_do(w, "write", pl, NULL), EACCES); /* even with legacy=rw */
        assert_int_equal(worker_do(w, "write", existing, NULL), EACCES);
        assert_int_equal(worker_do(w, "read", existing, NULL), 0);
        worker_stop(w);
        assert_false(in_backing(m, rel));
        assert_false(in_backing(m, relj));
        assert_false(in_backing(m, rell));
        g_autoptr(JsonArray) recs = records(m);
        const char *paths[] = {rel, relj, rell};
        for (size_t k = 0; k < G_N_ELEMENTS(paths); k++) {
            assert_record(recs, paths[k], "invalid-identity", NULL, "env");
            JsonObject *o = record_of(recs, paths[k]);
            assert_string_equal(str_or_null(o, "identity_value"), cases[i].value);
        }
    }
    g_autofree char *bf = B(m, "_state/a/f");
    g_autofree char *text = get_file(bf);
    assert_string_equal(text, "state");
    assert_true(mount_metric(m, "ckptfs_collisions_total{kind=\"invalid-identity\","
                                "verdict=\"denied\"}") >= 20);
    /* a valid id writes its own namespace; no variable at all is anonymous
     * (allowed by default with env) */
    const char *good[] = {"CLINK_JOB_ID=a", NULL};
    Worker *w = worker_start(NULL, 0, good);
    g_autofree char *ok = M(m, "_state/a/ok");
    assert_int_equal(worker_do(w, "write", ok, NULL), 0);
    worker_stop(w);
    Worker *anon = worker_start(NULL, 0, NULL);
    g_autofree char *ab = M(m, "_state/b/anon");
    assert_int_equal(worker_do(anon, "write", ab, NULL), 0);
    worker_stop(anon);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Environment entries "Pnn=xxx..." of `bytes` bytes in all, NULs counted,
 * each under the kernel's bound on one exec string (128 KiB). */
static void add_padding(GPtrArray *env, size_t bytes)
{
    for (int i = 0; bytes > 0; i++) {
        size_t entry = MIN(bytes, (size_t)100000); /* "Pnn=" + x's + NUL */
        g_assert_cmpuint(entry, >=, 6);
        g_autofree char *xs = g_strnfill(entry - 5, 'x');
        g_ptr_array_add(env, g_strdup_printf("P%02d=%s", i, xs));
        bytes -= entry;
    }
}

/* Where entry (a whole "VAR=value") starts in /proc/<pid>/environ; -1. */
static gssize environ_offset(pid_t pid, const char *entry)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/environ", (int)pid);
    g_autofree char *text = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &text, &len, NULL))
        return -1;
    size_t elen = strlen(entry) + 1; /* with its NUL */
    for (gsize at = 0; at + elen <= len; at += strlen(text + at) + 1)
        if (memcmp(text + at, entry, elen) == 0)
            return (gssize)at;
    return -1;
}

/* identity=env:VAR reads a caller's whole environment.  With 1.5 MB of
 * variables before VAR (15 of 100 kB) the caller is still its job: it
 * writes its own namespace and is refused in another's, recorded as
 * itself.  A value is never cut short: CLINK_JOB_ID=ab lying across the
 * first MiB of the environment is job ab, not a. */
static void test_env_large_environment(void **state)
{
    (void)state;
    /* an exec passes at most a quarter of the stack limit in strings */
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_STACK, &rl), 0);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 8 * 1024 * 1024) {
        fprintf(stderr, "a stack limit under 8 MiB cannot exec 2 MiB of environment: skipped\n");
        skip();
    }
    Mount *m = id_mount("identity=env:CLINK_JOB_ID");
    g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func(g_free);
    add_padding(env, 15 * 100000);
    g_ptr_array_add(env, g_strdup("CLINK_JOB_ID=b"));
    g_ptr_array_add(env, NULL);
    Worker *w = worker_start(NULL, 0, (const char *const *)env->pdata);
    assert_true(environ_offset(w->pid, "CLINK_JOB_ID=b") > 1024 * 1024);
    g_autofree char *b1 = M(m, "_state/b/1"), *a1 = M(m, "_state/a/1");
    assert_int_equal(worker_do(w, "write", b1, NULL), 0);
    assert_int_equal(worker_do(w, "write", a1, NULL), EACCES);
    worker_stop(w);

    /* the 'b' of CLINK_JOB_ID=ab at byte 1 MiB of the environment (the
     * worker's own first entry comes before the padding) */
    const char *entry = "CLINK_JOB_ID=ab";
    const size_t b_at = 1024 * 1024, first = strlen("ASAN_OPTIONS=detect_leaks=0") + 1;
    g_autoptr(GPtrArray) env2 = g_ptr_array_new_with_free_func(g_free);
    add_padding(env2, b_at - (strlen(entry) - 1) - first);
    g_ptr_array_add(env2, g_strdup(entry));
    g_ptr_array_add(env2, NULL);
    Worker *w2 = worker_start(NULL, 0, (const char *const *)env2->pdata);
    assert_int_equal(environ_offset(w2->pid, entry) + (gssize)strlen(entry) - 1, (gssize)b_at);
    g_autofree char *a2 = M(m, "_state/a/2"), *ab = M(m, "_state/ab"), *ab3 = M(m, "_state/ab/3");
    assert_int_equal(worker_do(w2, "write", a2, NULL), EACCES);
    assert_int_equal(worker_do(w2, "mkdir", ab, NULL), 0);
    assert_int_equal(worker_do(w2, "write", ab3, NULL), 0);
    worker_stop(w2);

    assert_true(in_backing(m, "_state/b/1"));
    assert_true(in_backing(m, "_state/ab/3"));
    assert_false(in_backing(m, "_state/a/1"));
    assert_false(in_backing(m, "_state/a/2"));
    g_autoptr(JsonArray) recs = records(m);
    assert_int_equal(json_array_get_length(recs), 2);
    assert_record(recs, "_state/a/1", "foreign-write", "b", "env");
    assert_record(recs, "_state/a/2", "foreign-write", "ab", "env");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Mounts with the daemon under unshare(1): pid 1 of a pid namespace of
 * its own, which sees no process of the test.  Its LeakSanitizer is off:
 * it stops the daemon's threads by the ids /proc lists, the host's, which
 * name other threads or none in the daemon's namespace (false leaks). */
static Mount *id_mount_pid_ns(const char *opts)
{
    g_autofree char *unshare = g_find_program_in_path("unshare");
    if (!unshare) {
        fprintf(stderr, "no unshare(1) in PATH: pid namespace tests skipped\n");
        skip();
    }
    const char *asan = g_getenv("ASAN_OPTIONS");
    g_autofree char *no_lsan = g_strdup_printf("ASAN_OPTIONS=%s%sdetect_leaks=0", asan ? asan : "",
                                               asan && *asan ? ":" : "");
    const char *launcher[] = {"unshare", "--pid", "--fork", "--kill-child", "env", no_lsan, NULL};
    Mount *m = id_new();
    m->launcher = launcher;
    id_start(m, opts);
    m->launcher = NULL; /* only mount_start reads it */
    return m;
}

/* Asserts that the record of path is unknown's (refused, pid 0, no comm). */
static void assert_unknown(JsonArray *recs, const char *path, const char *identity)
{
    assert_record(recs, path, "foreign-write", CK_UNKNOWN, identity);
    JsonObject *o = record_of(recs, path);
    assert_int_equal(json_object_get_int_member(o, "pid"), 0);
    assert_null(str_or_null(o, "comm"));
}

/* A daemon in a pid namespace of its own is sent pid 0 for every caller
 * outside it.  With identity=env:VAR or cgroup:PATTERN, which need the
 * caller's process, such a caller is unknown: refused in every job's
 * namespace with a record (pid 0), its own job's included, whatever
 * anonymous= says; it never passes as anonymous.  Reads need no identity,
 * a legacy write under legacy=rw none either, and the requests the kernel
 * makes itself with pid 0 (writeback writes, release, forget) go on. */
static void test_caller_outside_pid_namespace(void **state)
{
    (void)state;
    Mount *m = id_mount_pid_ns("identity=env:CLINK_JOB_ID,legacy=rw,writeback");
    const char *env_a[] = {"CLINK_JOB_ID=a", NULL};
    Worker *wa = worker_start(NULL, NOBODY, env_a);
    Worker *anon = worker_start(NULL, NOBODY, NULL);
    g_autofree char *a1 = M(m, "_state/a/1"), *af = M(m, "_state/a/f");
    g_autofree char *b2 = M(m, "_state/b/2"), *c = M(m, "_state/c");
    g_autofree char *legacy = M(m, "v1/0/out");
    assert_int_equal(worker_do(wa, "write", a1, NULL), EACCES);
    assert_int_equal(worker_do(wa, "write", af, NULL), EACCES);
    assert_int_equal(worker_do(wa, "read", af, NULL), 0);
    assert_int_equal(worker_do(anon, "write", b2, NULL), EACCES);
    assert_int_equal(worker_do(anon, "mkdir", c, NULL), EACCES);
    worker_stop(wa);
    worker_stop(anon);
    /* through the writeback cache, flushed and released by the kernel */
    int fd = open(legacy, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "legacy", 6), 6);
    assert_int_equal(fsync(fd), 0);
    assert_int_equal(close(fd), 0);
    g_autofree char *bl = B(m, "v1/0/out");
    g_autofree char *text = get_file(bl);
    assert_string_equal(text, "legacy");
    g_autofree char *baf = B(m, "_state/a/f");
    g_autofree char *kept = get_file(baf);
    assert_string_equal(kept, "state");
    assert_false(in_backing(m, "_state/a/1"));
    assert_false(in_backing(m, "_state/b/2"));
    assert_false(in_backing(m, "_state/c"));
    g_autoptr(JsonArray) recs = records(m);
    assert_unknown(recs, "_state/a/1", "env");
    assert_unknown(recs, "_state/a/f", "env");
    assert_unknown(recs, "_state/b/2", "env");
    assert_unknown(recs, "_state/c", "env");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);

    /* anonymous=deny: unknown too, not anonymous-write */
    m = id_mount_pid_ns("identity=env:CLINK_JOB_ID,anonymous=deny");
    g_autofree char *a3 = M(m, "_state/a/3");
    assert_errno(open(a3, O_WRONLY | O_CREAT, 0644), EACCES);
    g_autoptr(JsonArray) recs2 = records(m);
    assert_unknown(recs2, "_state/a/3", "env");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);

    /* policy=audit: carried out, and recorded as unknown's */
    m = id_mount_pid_ns("identity=env:CLINK_JOB_ID,policy=audit");
    g_autofree char *a5 = M(m, "_state/a/5");
    put_file(a5, "audited");
    assert_true(in_backing(m, "_state/a/5"));
    g_autoptr(JsonArray) recs5 = records(m);
    assert_int_equal(json_array_get_length(recs5), 1);
    JsonObject *r5 = record_of(recs5, "_state/a/5");
    assert_string_equal(str_or_null(r5, "kind"), "foreign-write");
    assert_string_equal(str_or_null(r5, "verdict"), "allowed");
    assert_string_equal(str_or_null(r5, "caller_job"), CK_UNKNOWN);
    assert_int_equal(json_object_get_int_member(r5, "pid"), 0);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);

    /* cgroup:PATTERN, a worker in job-a's cgroup, anonymous callers allowed */
    if (!cg.mnt)
        return;
    g_autofree char *ja = cg_make("job-a");
    g_autofree char *pat = job_pattern();
    g_autofree char *opts = g_strconcat(pat, ",anonymous=allow", NULL);
    m = id_mount_pid_ns(opts);
    Worker *w = worker_start(ja, NOBODY, NULL);
    g_autofree char *a4 = M(m, "_state/a/4");
    assert_int_equal(worker_do(w, "write", a4, NULL), EACCES);
    worker_stop(w);
    g_autoptr(JsonArray) recs3 = records(m);
    assert_unknown(recs3, "_state/a/4", "cgroup");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Runs ckptfs with args; exit status, stderr in *err. */
static int run_ckptfs(const char *const *args, char **err)
{
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)g_getenv("CKPTFS_BIN"));
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    int status = -1;
    gboolean ran = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                                NULL, NULL, err, &status, NULL);
    g_ptr_array_free(argv, TRUE);
    assert_true(ran);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void assert_one_line(const char *err, const char *needle)
{
    if (!strstr(err, needle))
        fail_msg("stderr does not say \"%s\": %s", needle, err);
    const char *nl = strchr(err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
}

/* A malformed map, or options that do not fit together, are refused at
 * mount with one line and exit 2; nothing is mounted. */
static void test_refused_at_mount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *map = g_build_filename(m->base, "idmap", NULL);
    put_map(map, "/a j1\n\nuid:12 j2 extra\n");
    g_autofree char *bad = g_strdup_printf("identity=uid,identity_map=%s", map);
    const struct {
        const char *opts;
        const char *says;
    } cases[] = {
        {bad, "line 3: expected two fields"},
        {"identity=uid", "identity_map=FILE"},
        {"identity=cgroup", "identity_map=FILE"},
        {"identity=cgroup:/a/b", "%j"},
        {"identity=cgroup:/a/%j/%j", "exactly once"},
        {"identity=env:X,identity_map=/etc/hostname", "only identity=cgroup and identity=uid"},
        {"identity=uid,identity_map=/nonexistent/map", "No such file"},
        {"identity=env:X,anonymous=maybe", "anonymous=maybe: expected allow or deny"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const char *args[] = {"-f", "-o", cases[i].opts, m->backing, m->mnt, NULL};
        g_autofree char *err = NULL;
        int rc = run_ckptfs(args, &err);
        if (rc != 2)
            fail_msg("%s: exit %d: %s", cases[i].opts, rc, err);
        assert_one_line(err, cases[i].says);
        struct stat a, b;
        g_autofree char *parent = g_path_get_dirname(m->mnt);
        assert_int_equal(stat(parent, &a), 0);
        assert_int_equal(stat(m->mnt, &b), 0);
        assert_int_equal(a.st_dev, b.st_dev); /* not mounted */
    }
    mount_free(m);
}

/* --takeover checks the identity map with the rest of the new command
 * line, in the process that asks: a malformed map is refused there with
 * its own message (exit 2) and the daemon serving goes on; mended, the same
 * takeover goes through.  The map and anonymous= outlive a kill -9 of the
 * daemon: the next one reads both again, the map as it is now; a map
 * broken at that moment leaves the new daemon with none (no caller named,
 * so refused under anonymous=deny) until it is mended. */
static void test_takeover_and_kill(void **state)
{
    (void)state;
    Mount *m = id_new();
    g_autofree char *map = g_build_filename(m->base, "uids", NULL);
    g_autofree char *good = g_strdup_printf("uid:%d a\n", NOBODY);
    put_map(map, good);
    g_autofree char *opts =
        g_strdup_printf("supervise,identity=uid,identity_map=%s,anonymous=deny", map);
    id_start(m, opts);
    mount_expect_log(m, "supervisor: the daemon (pid");
    mount_expect_log(m, "line 1: uid:x: not a uid");
    pid_t before = mount_daemon_pid(m);
    g_autofree char *a1 = M(m, "_state/a/1");
    Worker *w = worker_start(NULL, NOBODY, NULL);
    assert_int_equal(worker_do(w, "write", a1, NULL), 0);

    put_map(map, "uid:x a\n");
    assert_true(wait_metric(m, RELOADS_FAILED, 1) >= 1);
    const char *tk[] = {"--takeover", m->mnt, NULL};
    g_autofree char *err = NULL;
    int rc = run_ckptfs(tk, &err);
    if (rc != 2)
        fail_msg("--takeover: exit %d: %s", rc, err);
    g_autofree char *says = g_strdup_printf("identity_map=%s: line 1: uid:x: not a uid", map);
    assert_non_null(strstr(err, says));
    assert_int_equal(mount_daemon_pid(m), before); /* nothing was killed */
    g_autofree char *a2 = M(m, "_state/a/2");
    assert_int_equal(worker_do(w, "write", a2, NULL), 0); /* the previous map serves */

    /* mended, with job b for the uid: the takeover goes through, and the new
     * daemon reads the map as it is */
    g_autofree char *to_b = g_strdup_printf("uid:%d b\n", NOBODY);
    put_map(map, to_b);
    g_free(err);
    err = NULL;
    rc = run_ckptfs(tk, &err);
    if (rc != 0)
        fail_msg("--takeover: exit %d: %s", rc, err);
    pid_t after = mount_daemon_pid(m);
    assert_true(after > 0 && after != before);
    g_autofree char *b3 = M(m, "_state/b/3"), *a3 = M(m, "_state/a/3");
    assert_int_equal(worker_do(w, "write", b3, NULL), 0);
    assert_int_equal(worker_do(w, "write", a3, NULL), EACCES);

    /* kill -9: the next daemon has the map and anonymous=deny again */
    put_map(map, good);
    assert_int_equal(kill(after, SIGKILL), 0);
    pid_t next = 0;
    for (int i = 0; i < 3000 && ((next = mount_daemon_pid(m)) == after || next <= 0); i++)
        sleep_ms(10);
    assert_true(next > 0 && next != after);
    g_autofree char *a4 = M(m, "_state/a/4"), *b4 = M(m, "_state/b/4"), *a5 = M(m, "_state/a/5");
    assert_int_equal(worker_do(w, "write", a4, NULL), 0);
    assert_int_equal(worker_do(w, "write", b4, NULL), EACCES);
    assert_errno(open(a5, O_WRONLY | O_CREAT, 0644), EACCES); /* root: in no line, denied */

    /* killed while the map is broken: the next daemon starts with none */
    put_map(map, "uid:x a\n");
    assert_true(wait_metric(m, RELOADS_FAILED, 2) >= 2);
    mount_expect_log(m, "(a new daemon): line 1: uid:x: not a uid; no map is in force");
    assert_int_equal(kill(next, SIGKILL), 0);
    pid_t last = 0;
    for (int i = 0; i < 3000 && ((last = mount_daemon_pid(m)) == next || last <= 0); i++)
        sleep_ms(10);
    assert_true(last > 0 && last != next);
    g_autofree char *a6 = M(m, "_state/a/6"), *a7 = M(m, "_state/a/7");
    assert_int_equal(worker_do(w, "write", a6, NULL), EACCES);
    assert_int_equal(mount_metric(m, "ckptfs_identity_map_lines{kind=\"uid\"}"), 0);
    int64_t ok = mount_metric(m, RELOADS_OK);
    put_map(map, good);
    assert_true(wait_metric(m, RELOADS_OK, ok + 1) >= ok + 1);
    assert_int_equal(worker_do(w, "write", a7, NULL), 0);
    worker_stop(w);
    g_autoptr(JsonArray) recs = records(m);
    assert_record(recs, "_state/a/3", "foreign-write", "b", "uid");
    assert_record(recs, "_state/a/6", "anonymous-write", NULL, NULL);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ckptctl run --identity cgroup:PATTERN passes the mode to the daemon it
 * mounts: a command that puts itself in job-a's cgroup and makes job b's
 * directory is reported, as job a, decided by its cgroup. */
static void test_ckptctl_run(void **state)
{
    (void)state;
    need_cgroup2();
    g_autofree char *ja = cg_make("job-a");
    g_autofree char *spec = g_strdup_printf("cgroup:%s/job-%%j", cg.view);
    g_autofree char *script =
        g_strdup_printf("echo $$ > '%s/cgroup.procs' && mkdir -p \"$CKPTFS_MOUNT/_state/a\" && "
                        "echo x > \"$CKPTFS_MOUNT/_state/a/f\" && mkdir \"$CKPTFS_MOUNT/_state/b\"",
                        ja);
    const char *argv[] = {g_getenv("CKPTCTL_BIN"),
                          "run",
                          "--policy",
                          "enforce",
                          "--identity",
                          spec,
                          "--json",
                          "--",
                          "sh",
                          "-c",
                          script,
                          NULL};
    g_autofree char *out = NULL;
    int status = run_cmd(argv, &out);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 3)
        fail_msg("ckptctl run: exit %d: %s", WEXITSTATUS(status), out);
    g_autoptr(JsonParser) parser = json_parser_new();
    assert_true(json_parser_load_from_data(parser, out, -1, NULL));
    JsonObject *rep = json_node_get_object(json_parser_get_root(parser));
    assert_string_equal(json_object_get_string_member(rep, "identity"), spec);
    JsonArray *recs = json_object_get_array_member(rep, "records");
    assert_int_equal(json_array_get_length(recs), 1);
    assert_record(recs, "_state/b", "foreign-write", "a", "cgroup");
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--worker") == 0)
        return worker_main(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cgroup_names_the_job, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_anonymous, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_move_and_subtree, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_map_reload, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_uid, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_env_invalid_identity, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_env_large_environment, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_caller_outside_pid_namespace, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_refused_at_mount, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_takeover_and_kill, cg_setup, cg_teardown),
        cmocka_unit_test_setup_teardown(test_ckptctl_run, cg_setup, cg_teardown),
    };
    return cmocka_run_group_tests_name("mount/identity", tests, NULL, NULL);
}
