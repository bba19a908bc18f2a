/* The write policy through a real mount (ckptfs(8) NAMESPACES AND THE
 * WRITE POLICY): refused writes return
 * EACCES, change nothing in the backing dir and are recorded; audit mode
 * carries them out and records them as allowed. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

/* A mount with _state/a, _state/b (file f), _jobs/a, a legacy v1/0/s. */
static Mount *policy_mount(const char *const *args)
{
    Mount *m = mount_new();
    const char *dirs[] = {"_state/a", "_state/b", "_jobs/a", "v1/0"};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *d = g_build_filename(m->backing, dirs[i], NULL);
        g_mkdir_with_parents(d, 0755);
    }
    g_autofree char *bf = g_build_filename(m->backing, "_state/b/f", NULL);
    put_file(bf, "b's state");
    g_autofree char *ls = g_build_filename(m->backing, "v1/0/s", NULL);
    put_file(ls, "legacy");
    if (mount_start(m, args) != 0) {
        mount_free(m);
        return NULL;
    }
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

static char *collisions(Mount *m)
{
    g_autofree char *p = M(m, "_views/.collisions");
    return get_file(p);
}

static int setup_job_a(void **state)
{
    const char *args[] = {"-o", "job=a", NULL};
    *state = policy_mount(args);
    return *state ? 0 : -1;
}

static int setup_anonymous(void **state)
{
    *state = policy_mount(NULL);
    return *state ? 0 : -1;
}

static int setup_audit(void **state)
{
    const char *args[] = {"-o", "job=a,policy=audit", NULL};
    *state = policy_mount(args);
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    Mount *m = *state;
    int rc = mount_stop(m);
    mount_free(m);
    return rc;
}

static void test_foreign_writes_refused(void **state)
{
    Mount *m = *state;
    g_autofree char *bf = M(m, "_state/b/f"), *bnew = M(m, "_state/b/new");
    g_autofree char *bdir = M(m, "_state/b/d"), *own = M(m, "_state/a/mine");
    /* reads are fine */
    g_autofree char *text = get_file(bf);
    assert_string_equal(text, "b's state");
    assert_errno(open(bnew, O_WRONLY | O_CREAT, 0644), EACCES);
    assert_errno(open(bf, O_WRONLY), EACCES);
    assert_errno(open(bf, O_RDONLY | O_TRUNC), EACCES);
    assert_errno(truncate(bf, 0), EACCES);
    assert_errno(chmod(bf, 0600), EACCES);
    assert_errno(setxattr(bf, "user.x", "1", 1, 0), EACCES);
    assert_errno(mkdir(bdir, 0755), EACCES);
    assert_errno(unlink(bf), EACCES);
    assert_errno(rename(bf, own), EACCES);
    assert_errno(link(bf, own), EACCES);

    /* nothing changed in the backing dir */
    g_autofree char *b_bf = B(m, "_state/b/f"), *b_bnew = B(m, "_state/b/new");
    g_autofree char *b_bdir = B(m, "_state/b/d"), *b_own = B(m, "_state/a/mine");
    g_autofree char *after = get_file(b_bf);
    assert_string_equal(after, "b's state");
    struct stat st;
    assert_int_equal(stat(b_bf, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(access(b_bnew, F_OK), -1);
    assert_int_equal(access(b_bdir, F_OK), -1);
    assert_int_equal(access(b_own, F_OK), -1);
    char v[4];
    assert_int_equal(getxattr(b_bf, "user.x", v, sizeof v), -1);

    /* own namespace is writable; its root is a directory, which unlink
     * leaves to the file system */
    g_autofree char *root = M(m, "_state/a");
    assert_errno(unlink(root), EISDIR);
    put_file(own, "a's");
    g_autofree char *b_own_text = get_file(b_own);
    assert_string_equal(b_own_text, "a's");

    g_autofree char *log = collisions(m);
    assert_non_null(strstr(log, "\"kind\":\"foreign-write\""));
    assert_non_null(strstr(log, "\"path\":\"_state/b/new\""));
    assert_non_null(strstr(log, "\"caller_job\":\"a\""));
    assert_non_null(strstr(log, "\"owner_job\":\"b\""));
    assert_non_null(strstr(log, "\"verdict\":\"denied\""));
    assert_null(strstr(log, "\"verdict\":\"allowed\""));
    assert_non_null(strstr(log, "\"op\":\"rename\""));
    /* op is the syscall's name; an open that truncates is an "open" */
    GString *ops = g_string_new(NULL);
    for (const char *p = log; (p = strstr(p, "\"op\":\"")) != NULL;) {
        p += strlen("\"op\":\"");
        const char *q = strchr(p, '"');
        assert_non_null(q);
        g_string_append_printf(ops, "%s%.*s", ops->len ? " " : "", (int)(q - p), p);
        p = q;
    }
    assert_string_equal(ops->str,
                        "create open open setattr setattr setxattr mkdir unlink rename link");
    g_string_free(ops, TRUE);
    assert_true(
        mount_metric(m, "ckptfs_collisions_total{kind=\"foreign-write\",verdict=\"denied\"}") >= 8);
}

static void test_structure_and_legacy(void **state)
{
    Mount *m = *state;
    g_autofree char *top = M(m, "topfile"), *leg = M(m, "v1/0/s"), *legnew = M(m, "v1/0/n");
    g_autofree char *newjob = M(m, "_state/newjob"), *bad = M(m, "_state/.bad");
    g_autofree char *stray = M(m, "_state/file");
    assert_errno(open(top, O_WRONLY | O_CREAT, 0644), EACCES);
    assert_errno(open(leg, O_WRONLY), EACCES);
    assert_errno(open(legnew, O_WRONLY | O_CREAT, 0644), EACCES);
    assert_errno(mkdir(bad, 0755), EACCES);
    assert_errno(open(stray, O_WRONLY | O_CREAT, 0644), EACCES);
    assert_int_equal(mkdir(newjob, 0755), 0);
    g_autofree char *b_newjob = B(m, "_state/newjob"), *b_top = B(m, "topfile");
    g_autofree char *b_legnew = B(m, "v1/0/n"), *b_bad = B(m, "_state/.bad");
    assert_int_equal(access(b_newjob, F_OK), 0);
    assert_int_equal(access(b_top, F_OK), -1);
    assert_int_equal(access(b_legnew, F_OK), -1);
    assert_int_equal(access(b_bad, F_OK), -1);
    /* an anonymous caller writes any job's namespace */
    g_autofree char *bnew = M(m, "_state/b/anon");
    put_file(bnew, "x");
    /* cross-namespace rename is refused, never EXDEV (mv would copy) */
    g_autofree char *bf = M(m, "_state/b/f"), *af = M(m, "_state/a/f");
    assert_errno(rename(bf, af), EACCES);
    assert_errno(link(bf, af), EACCES);
    g_autofree char *b_af = B(m, "_state/a/f");
    assert_int_equal(access(b_af, F_OK), -1);
    g_autofree char *log = collisions(m);
    assert_non_null(strstr(log, "\"kind\":\"legacy-write\""));
    assert_non_null(strstr(log, "\"kind\":\"outside-namespace\""));
    assert_non_null(strstr(log, "\"kind\":\"cross-namespace-rename\""));
    assert_non_null(strstr(log, "\"kind\":\"cross-namespace-link\""));
    assert_non_null(strstr(log, "\"path2\":\"_state/a/f\""));
}

static void test_cross_namespace_symlink(void **state)
{
    Mount *m = *state;
    g_autofree char *l1 = M(m, "_state/a/l1"), *l2 = M(m, "_state/a/l2");
    g_autofree char *l3 = M(m, "_state/a/l3");
    assert_errno(symlink("../b/f", l1), EACCES);
    assert_errno(symlink("/v1/0/s", l2), EACCES);
    assert_int_equal(symlink("v1/0", l3), 0); /* stays inside _state/a */
    g_autofree char *b1 = B(m, "_state/a/l1"), *b3 = B(m, "_state/a/l3");
    assert_int_equal(access(b1, F_OK), -1);
    struct stat st;
    assert_int_equal(lstat(b3, &st), 0);
    g_autofree char *log = collisions(m);
    assert_non_null(strstr(log, "\"kind\":\"cross-namespace-symlink\""));

    /* a symlink that lands in a where it was made, given a name where it
     * lands in b: by a rename into another directory or a hard link */
    g_autofree char *d = M(m, "_state/a/d"), *dl = M(m, "_state/a/d/l");
    g_autofree char *moved = M(m, "_state/a/moved"), *linked = M(m, "_state/a/linked");
    g_autofree char *same = M(m, "_state/a/d/same");
    assert_int_equal(mkdir(d, 0755), 0);
    assert_int_equal(symlink("../b/f", dl), 0); /* _state/a/b/f */
    assert_errno(rename(dl, moved), EACCES);
    assert_errno(linkat(AT_FDCWD, dl, AT_FDCWD, linked, 0), EACCES);
    assert_int_equal(rename(dl, same), 0); /* same directory: lands where it did */
    g_autofree char *bm = B(m, "_state/a/moved"), *bl = B(m, "_state/a/linked");
    g_autofree char *bsame = B(m, "_state/a/d/same");
    assert_int_equal(lstat(bm, &st), -1);
    assert_int_equal(lstat(bl, &st), -1);
    assert_int_equal(lstat(bsame, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    g_free(log);
    log = collisions(m);
    assert_non_null(strstr(log, "\"op\":\"rename\",\"path\":\"_state/a/moved\""));
    assert_non_null(strstr(log, "\"op\":\"link\",\"path\":\"_state/a/linked\""));
}

/* A file directly in _state or _jobs (made behind the mount) is outside
 * every namespace, also for the job named like it: a job's root is a
 * directory. */
static void test_file_directly_in_structure(void **state)
{
    (void)state;
    const char *args[] = {"-o", "job=loose", NULL};
    Mount *m = policy_mount(args);
    assert_non_null(m);
    g_autofree char *bs = B(m, "_state/loose"), *bj = B(m, "_jobs/loose");
    put_file(bs, "stray");
    put_file(bj, "stray");
    g_autofree char *ms = M(m, "_state/loose"), *mj = M(m, "_jobs/loose");
    g_autofree char *text = get_file(ms);
    assert_string_equal(text, "stray");
    assert_errno(open(ms, O_WRONLY | O_APPEND), EACCES);
    assert_errno(chmod(ms, 0600), EACCES);
    assert_errno(truncate(mj, 0), EACCES);
    assert_errno(setxattr(mj, "user.x", "1", 1, 0), EACCES);
    assert_errno(unlink(ms), EACCES);
    assert_errno(rename(mj, ms), EACCES);
    g_autofree char *after_s = get_file(bs), *after_j = get_file(bj);
    assert_string_equal(after_s, "stray");
    assert_string_equal(after_j, "stray");
    struct stat st;
    assert_int_equal(stat(bs, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    char v[4];
    assert_int_equal(getxattr(bj, "user.x", v, sizeof v), -1);
    g_autofree char *log = collisions(m);
    assert_non_null(strstr(log, "\"kind\":\"outside-namespace\""));
    assert_null(strstr(log, "\"verdict\":\"allowed\""));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_audit_allows_and_records(void **state)
{
    Mount *m = *state;
    g_autofree char *bnew = M(m, "_state/b/new");
    put_file(bnew, "written by a");
    g_autofree char *b_bnew = B(m, "_state/b/new");
    g_autofree char *text = get_file(b_bnew);
    assert_string_equal(text, "written by a");
    g_autofree char *log = collisions(m);
    assert_non_null(strstr(log, "\"verdict\":\"allowed\""));
    assert_non_null(strstr(log, "\"kind\":\"foreign-write\""));
    assert_null(strstr(log, "\"verdict\":\"denied\""));
    assert_true(mount_metric(
                    m, "ckptfs_collisions_total{kind=\"foreign-write\",verdict=\"allowed\"}") >= 1);
}

static int setup_legacy_rw(void **state)
{
    const char *args[] = {"-o", "job=a,legacy=rw", NULL};
    *state = policy_mount(args);
    return *state ? 0 : -1;
}

/* legacy=rw: the legacy area is writable and still recorded;
 * everything else is refused as with legacy=ro. */
static void test_legacy_rw_writes_recorded(void **state)
{
    Mount *m = *state;
    g_autofree char *ls = M(m, "v1/0/s"), *lnew = M(m, "v1/0/new"), *top = M(m, "v2");
    put_file(ls, "rewritten");
    put_file(lnew, "new");
    assert_int_equal(mkdir(top, 0755), 0);
    g_autofree char *b_ls = B(m, "v1/0/s"), *b_top = B(m, "v2");
    g_autofree char *text = get_file(b_ls);
    assert_string_equal(text, "rewritten");
    assert_int_equal(access(b_top, F_OK), 0);
    g_autofree char *bnew = M(m, "_state/b/new");
    assert_errno(open(bnew, O_WRONLY | O_CREAT, 0644), EACCES);
    g_autofree char *own = M(m, "_state/a/x");
    assert_errno(rename(ls, own), EACCES);

    g_autofree char *log = collisions(m);
    assert_non_null(strstr(log, "\"kind\":\"legacy-write\",\"verdict\":\"allowed\",\"op\":\"open\","
                                "\"path\":\"v1/0/s\""));
    assert_non_null(strstr(log,
                           "\"kind\":\"legacy-write\",\"verdict\":\"allowed\",\"op\":\"create\","
                           "\"path\":\"v1/0/new\""));
    assert_non_null(strstr(log,
                           "\"kind\":\"legacy-write\",\"verdict\":\"allowed\",\"op\":\"mkdir\","
                           "\"path\":\"v2\""));
    assert_null(strstr(log, "\"kind\":\"legacy-write\",\"verdict\":\"denied\""));
    assert_non_null(strstr(log, "\"kind\":\"foreign-write\",\"verdict\":\"denied\""));
    assert_non_null(strstr(log, "\"kind\":\"cross-namespace-rename\",\"verdict\":\"denied\""));
    assert_true(
        mount_metric(m, "ckptfs_collisions_total{kind=\"legacy-write\",verdict=\"allowed\"}") >= 3);
}

static void test_views_writes_are_erofs_not_logged(void **state)
{
    Mount *m = *state;
    g_autofree char *c = M(m, "_views/.collisions"), *n = M(m, "_views/new");
    assert_errno(open(c, O_WRONLY), EROFS);
    assert_errno(open(n, O_WRONLY | O_CREAT, 0644), EROFS);
    assert_errno(truncate(c, 0), EROFS);
    g_autofree char *log = collisions(m);
    assert_string_equal(log, "");
}

/* identity=env:VAR: the job is read from each caller's environment. */
static void test_identity_from_environment(void **state)
{
    (void)state;
    const char *args[] = {"-o", "identity=env:CKJOB", NULL};
    Mount *m = policy_mount(args);
    assert_non_null(m);
    g_autofree char *target = M(m, "_state/a/by-b");
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CKJOB", "b", 1);
        char *argv[] = {"/bin/sh", "-c", "echo x > \"$0\"", target, NULL};
        execve("/bin/sh", argv, environ);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    g_autofree char *b_target = B(m, "_state/a/by-b");
    assert_int_equal(access(b_target, F_OK), -1);
    /* without the variable: anonymous, allowed */
    put_file(target, "anon");
    assert_int_equal(access(b_target, F_OK), 0);
    g_autofree char *log = collisions(m);
    assert_non_null(strstr(log, "\"caller_job\":\"b\""));
    assert_non_null(strstr(log, "\"comm\":\"sh\""));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static gpointer write_foreign(gpointer path)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0)
        close(fd);
    return GINT_TO_POINTER(err);
}

/* A record names the process that wrote, as ps and kill know it, not the
 * thread of it the kernel names: a writer's second thread (named
 * "ckwriter") gets this process's pid and name. */
static void test_record_names_the_process(void **state)
{
    Mount *m = *state;
    g_autofree char *target = M(m, "_state/b/by-a-thread");
    GThread *t = g_thread_new("ckwriter", write_foreign, target);
    assert_int_equal(GPOINTER_TO_INT(g_thread_join(t)), EACCES);
    g_autofree char *b_target = B(m, "_state/b/by-a-thread");
    assert_int_equal(access(b_target, F_OK), -1);
    g_autofree char *comm = get_file("/proc/self/comm");
    g_strchomp(comm);
    g_autofree char *pid = g_strdup_printf("\"pid\":%d,", (int)getpid());
    g_autofree char *name = g_strdup_printf("\"comm\":\"%s\"", comm);
    g_autofree char *log = collisions(m);
    const char *rec = strstr(log, "\"path\":\"_state/b/by-a-thread\"");
    assert_non_null(rec);
    const char *end = strchr(rec, '\n');
    g_autofree char *line = g_strndup(rec, end ? (gsize)(end - rec) : strlen(rec));
    assert_non_null(strstr(line, pid));
    assert_non_null(strstr(line, name));
    assert_null(strstr(line, "ckwriter"));
}

/* collision_log=FILE gets the same records, and survives the mount. */
static void test_collision_log_file(void **state)
{
    (void)state;
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = g_dir_make_tmp("ckptfs-log-XXXXXX", &err);
    g_autofree char *file = g_build_filename(dir, "collisions.jsonl", NULL);
    g_autofree char *opt = g_strdup_printf("job=a,collision_log=%s", file);
    const char *args[] = {"-o", opt, NULL};
    Mount *m = policy_mount(args);
    assert_non_null(m);
    g_autofree char *bnew = M(m, "_state/b/x");
    assert_errno(open(bnew, O_WRONLY | O_CREAT, 0644), EACCES);
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
    g_autofree char *text = get_file(file);
    assert_non_null(strstr(text, "\"path\":\"_state/b/x\""));
    assert_int_equal(text[strlen(text) - 1], '\n');
    unlink(file);
    rmdir(dir);
}

/* The records of .collisions, oldest first (JsonObject*). */
static GPtrArray *records(Mount *m)
{
    g_autofree char *text = collisions(m);
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)json_object_unref);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        g_autoptr(JsonParser) p = json_parser_new();
        assert_true(json_parser_load_from_data(p, *l, -1, NULL));
        JsonNode *root = json_parser_get_root(p);
        assert_true(JSON_NODE_HOLDS_OBJECT(root));
        g_ptr_array_add(out, json_object_ref(json_node_get_object(root)));
    }
    return out;
}

/* An unnamed file (O_TMPFILE) refused: its record names the directory it
 * was to be made in, written as the records write every path (relative to
 * the mount, no '/' at the end; the mount root as a refused chmod of the
 * root writes it), and nothing reaches the backing directory. */
static void test_tmpfile_record_names_its_directory(void **state)
{
    (void)state;
    const char *args[] = {"-o", "job=b", NULL};
    Mount *m = policy_mount(args);
    assert_non_null(m);
    g_autofree char *bdir = B(m, "_state/a/v1/0");
    assert_int_equal(g_mkdir_with_parents(bdir, 0755), 0);
    g_autofree char *b_state = B(m, "_state");
    int in_state = dir_entries(b_state, false), in_root = dir_entries(m->backing, false);
    const char *dirs[] = {"_state/a/v1/0", "_state", ""};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *p = M(m, dirs[i]);
        assert_errno(open(p, O_TMPFILE | O_WRONLY, 0600), EACCES);
    }
    assert_errno(chmod(m->mnt, 0700), EACCES);
    assert_int_equal(dir_entries(bdir, false), 0);
    assert_int_equal(dir_entries(b_state, false), in_state);
    assert_int_equal(dir_entries(m->backing, false), in_root);

    g_autoptr(GPtrArray) recs = records(m);
    assert_int_equal(recs->len, G_N_ELEMENTS(dirs) + 1);
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        JsonObject *r = recs->pdata[i];
        assert_string_equal(json_object_get_string_member(r, "op"), "create");
        assert_string_equal(json_object_get_string_member(r, "verdict"), "denied");
        assert_string_equal(json_object_get_string_member(r, "caller_job"), "b");
        assert_string_equal(json_object_get_string_member(r, "path"), dirs[i]);
        assert_true(json_node_is_null(json_object_get_member(r, "path2")));
    }
    JsonObject *chmod_root = recs->pdata[G_N_ELEMENTS(dirs)];
    assert_string_equal(json_object_get_string_member(chmod_root, "path"),
                        json_object_get_string_member(recs->pdata[2], "path"));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Lines of text holding needle. */
static int count_lines(const char *text, const char *needle)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    int n = 0;
    for (char **l = lines; *l; l++)
        n += strstr(*l, needle) != NULL;
    return n;
}

/* Collisions reach the daemon's log (the journal under systemd) as warnings
 * naming who crossed where, rate-limited (10 per 5 s) with the count of
 * those left out said later; .collisions keeps every one. */
static void test_collisions_logged_rate_limited(void **state)
{
    (void)state;
    const char *args[] = {"-o", "job=a", NULL};
    Mount *m = policy_mount(args);
    assert_non_null(m);
    for (int i = 0; i < 30; i++) {
        g_autofree char *rel = g_strdup_printf("_state/b/x%d", i);
        g_autofree char *p = M(m, rel);
        assert_errno(open(p, O_WRONLY | O_CREAT, 0644), EACCES);
    }
    g_autofree char *log = get_file(m->log);
    assert_int_equal(count_lines(log, "collision refused: foreign-write create _state/b/x"), 10);
    assert_non_null(strstr(log, "_state/b/x0 by job a (pid "));
    g_autofree char *recs = collisions(m);
    assert_int_equal(count_lines(recs, "\"kind\":\"foreign-write\""), 30);
    /* the next window: the count of the 20 left out, then the collision */
    g_usleep(5200 * 1000);
    g_autofree char *p = M(m, "_state/b/late");
    assert_errno(open(p, O_WRONLY | O_CREAT, 0644), EACCES);
    g_autofree char *log2 = get_file(m->log);
    assert_non_null(strstr(log2, "20 more collision(s) not logged"));
    assert_non_null(strstr(log2, "collision refused: foreign-write create _state/b/late"));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_foreign_writes_refused, setup_job_a, teardown),
        cmocka_unit_test_setup_teardown(test_record_names_the_process, setup_job_a, teardown),
        cmocka_unit_test_setup_teardown(test_structure_and_legacy, setup_anonymous, teardown),
        cmocka_unit_test_setup_teardown(test_cross_namespace_symlink, setup_job_a, teardown),
        cmocka_unit_test(test_file_directly_in_structure),
        cmocka_unit_test_setup_teardown(test_audit_allows_and_records, setup_audit, teardown),
        cmocka_unit_test_setup_teardown(test_legacy_rw_writes_recorded, setup_legacy_rw, teardown),
        cmocka_unit_test_setup_teardown(test_views_writes_are_erofs_not_logged, setup_job_a,
                                        teardown),
        cmocka_unit_test(test_identity_from_environment),
        cmocka_unit_test(test_collision_log_file),
        cmocka_unit_test(test_tmpfile_record_names_its_directory),
        cmocka_unit_test(test_collisions_logged_rate_limited),
    };
    return cmocka_run_group_tests_name("mount/policy", tests, NULL, NULL);
}
