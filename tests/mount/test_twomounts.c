/* Two mounts of one backing directory (two worker hosts on shared storage):
 * what one writes, the other reads; markers written through one show in the
 * other's views within rescan; the write policy holds in each. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

typedef struct {
    Mount *a, *b; /* a's daemon acts as job a, b's as job b */
} Pair;

static char *M(Mount *m, const char *rel)
{
    return g_build_filename(m->mnt, rel, NULL);
}

static char *B(Mount *m, const char *rel)
{
    return g_build_filename(m->backing, rel, NULL);
}

static void sleep_ms(int ms)
{
    g_usleep((gulong)ms * 1000);
}

/* Mounts the pair: b shares a's backing dir. */
static Pair *pair_new(const char *extra)
{
    Pair *p = g_new0(Pair, 1);
    p->a = mount_new();
    p->b = mount_new();
    g_free(p->b->backing);
    g_free(p->b->bwork);
    p->b->backing = g_strdup(p->a->backing);
    p->b->bwork = g_strdup(p->a->bwork);
    const char *dirs[] = {"_state/a/v1/0", "_state/b/v1/0", "_jobs/a", "_jobs/b"};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *d = B(p->a, dirs[i]);
        g_mkdir_with_parents(d, 0755);
    }
    g_autofree char *oa = g_strdup_printf("job=a,rescan=1%s", extra);
    g_autofree char *ob = g_strdup_printf("job=b,rescan=1%s", extra);
    const char *aa[] = {"-o", oa, NULL}, *ab[] = {"-o", ob, NULL};
    if (mount_start(p->a, aa) != 0 || mount_start(p->b, ab) != 0) {
        mount_free(p->b);
        mount_free(p->a);
        g_free(p);
        return NULL;
    }
    return p;
}

static int setup(void **state)
{
    *state = pair_new("");
    return *state ? 0 : -1;
}

static int setup_no_cache(void **state)
{
    *state = pair_new(",entry_timeout=0,attr_timeout=0");
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    Pair *p = *state;
    int rc = mount_stop(p->b);
    rc |= mount_stop(p->a);
    mount_free(p->b);
    mount_free(p->a);
    g_free(p);
    return rc;
}

static void commit_file(const char *path, const char *data)
{
    g_autofree char *tmp = g_strconcat(path, ".tmp", NULL);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    assert_int_equal(fsync(fd), 0);
    assert_int_equal(close(fd), 0);
    assert_int_equal(rename(tmp, path), 0);
    g_autofree char *dir = g_path_get_dirname(path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    assert_int_equal(fsync(dfd), 0);
    close(dfd);
}

static void write_marker(Mount *m, const char *job, unsigned n)
{
    g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-%u", job, n);
    g_autofree char *dir = M(m, rel);
    assert_int_equal(mkdir(dir, 0755), 0);
    g_autofree char *mk = g_build_filename(dir, "COMPLETED", NULL);
    g_autofree char *text =
        g_strdup_printf("checkpoint=%u\ngeneration=1\nparticipants=0\nstate=_state/%s\n", n, job);
    commit_file(mk, text);
}

/* Polls for up to 5 s (rescan=1) until path reads as `want`. */
static bool eventually_reads(const char *path, const char *want)
{
    for (int i = 0; i < 50; i++) {
        g_autofree char *text = NULL;
        if (g_file_get_contents(path, &text, NULL, NULL) && strcmp(text, want) == 0)
            return true;
        sleep_ms(100);
    }
    return false;
}

static bool eventually_links(const char *path, const char *want)
{
    for (int i = 0; i < 50; i++) {
        char buf[PATH_MAX];
        ssize_t n = readlink(path, buf, sizeof buf - 1);
        if (n > 0) {
            buf[n] = 0;
            if (strcmp(buf, want) == 0)
                return true;
        }
        sleep_ms(100);
    }
    return false;
}

static void test_each_reads_the_others_writes(void **state)
{
    Pair *p = *state;
    g_autofree char *a_in_a = M(p->a, "_state/a/v1/0/checkpoint-1.snap");
    g_autofree char *a_in_b = M(p->b, "_state/a/v1/0/checkpoint-1.snap");
    commit_file(a_in_a, "a's checkpoint 1");
    g_autofree char *seen = get_file(a_in_b);
    assert_string_equal(seen, "a's checkpoint 1");
    g_autofree char *b_in_b = M(p->b, "_state/b/v1/0/checkpoint-1.snap");
    g_autofree char *b_in_a = M(p->a, "_state/b/v1/0/checkpoint-1.snap");
    commit_file(b_in_b, "b's checkpoint 1");
    g_autofree char *seen2 = get_file(b_in_a);
    assert_string_equal(seen2, "b's checkpoint 1");
    /* a new directory made through one is listed through the other */
    g_autofree char *gen2 = M(p->a, "_state/a/v2");
    assert_int_equal(mkdir(gen2, 0755), 0);
    g_autofree char *dir_b = M(p->b, "_state/a");
    GDir *d = g_dir_open(dir_b, 0, NULL);
    assert_non_null(d);
    bool found = false;
    for (const char *e; (e = g_dir_read_name(d));)
        found |= strcmp(e, "v2") == 0;
    g_dir_close(d);
    assert_true(found);
}

static void test_policy_holds_in_both(void **state)
{
    Pair *p = *state;
    g_autofree char *via_a = M(p->a, "_state/b/v1/0/from-a");
    g_autofree char *via_b = M(p->b, "_state/a/v1/0/from-b");
    assert_errno(open(via_a, O_WRONLY | O_CREAT, 0644), EACCES);
    assert_errno(open(via_b, O_WRONLY | O_CREAT, 0644), EACCES);
    g_autofree char *mk_a = M(p->a, "_jobs/b/chk-1");
    assert_errno(mkdir(mk_a, 0755), EACCES);
    g_autofree char *ba = B(p->a, "_state/b/v1/0/from-a"), *bb = B(p->a, "_state/a/v1/0/from-b");
    g_autofree char *bm = B(p->a, "_jobs/b/chk-1");
    assert_int_equal(access(ba, F_OK), -1);
    assert_int_equal(access(bb, F_OK), -1);
    assert_int_equal(access(bm, F_OK), -1);
    /* each mount records its own refusals only */
    g_autofree char *la = M(p->a, "_views/.collisions"), *lb = M(p->b, "_views/.collisions");
    g_autofree char *log_a = get_file(la), *log_b = get_file(lb);
    assert_non_null(strstr(log_a, "\"caller_job\":\"a\""));
    assert_non_null(strstr(log_a, "\"path\":\"_state/b/v1/0/from-a\""));
    assert_null(strstr(log_a, "\"caller_job\":\"b\""));
    assert_non_null(strstr(log_b, "\"caller_job\":\"b\""));
    assert_non_null(strstr(log_b, "\"owner_job\":\"a\""));
    assert_null(strstr(log_b, "\"caller_job\":\"a\""));
    /* a job's own writes are fine through either host's mount */
    g_autofree char *own_b = M(p->b, "_state/b/v1/0/own");
    put_file(own_b, "ok");
}

/* With no kernel name and attribute cache (entry_timeout=0,attr_timeout=0,
 * what a mount on shared storage should use), a checkpoint replaced through
 * one mount reads new through the other at once, even after the other had
 * looked the old one up. */
static void test_replaced_file_no_cache(void **state)
{
    Pair *p = *state;
    g_autofree char *fa = M(p->a, "_state/a/v1/0/state.snap");
    g_autofree char *fb = M(p->b, "_state/a/v1/0/state.snap");
    commit_file(fa, "version 1");
    g_autofree char *v1 = get_file(fb);
    assert_string_equal(v1, "version 1");
    commit_file(fa, "version 2, longer");
    g_autofree char *v2 = get_file(fb);
    assert_string_equal(v2, "version 2, longer");
    g_autofree char *gone = M(p->a, "_state/a/v1/0/gone");
    g_autofree char *gone_b = M(p->b, "_state/a/v1/0/gone");
    put_file(gone, "x");
    struct stat st;
    assert_int_equal(stat(gone_b, &st), 0);
    assert_int_equal(unlink(gone), 0);
    assert_errno(stat(gone_b, &st), ENOENT);
    /* a name looked up in vain through b, then made through a: b sees it
     * (with the default entry_timeout b's kernel keeps the negative entry) */
    g_autofree char *late = M(p->a, "_jobs/a/COMPLETED-late");
    g_autofree char *late_b = M(p->b, "_jobs/a/COMPLETED-late");
    assert_errno(stat(late_b, &st), ENOENT);
    put_file(late, "now");
    assert_int_equal(stat(late_b, &st), 0);
}

/* Commits a's checkpoint 1 through a; true when a's own view shows job a. */
static bool first_marker_has_view(Pair *p)
{
    g_autofree char *sa = M(p->a, "_state/a/v1/0/checkpoint-1.snap");
    commit_file(sa, "state of 1");
    write_marker(p->a, "a", 1);
    g_autofree char *own_view = M(p->a, "_views/a");
    struct stat st;
    return stat(own_view, &st) == 0;
}

/* Markers written through one mount show in the other's views within
 * rescan (1 s; polled for up to 5 s), latest included. */
static void test_views_follow_the_other_mount(void **state)
{
    Pair *p = *state;
    assert_true(first_marker_has_view(p));
    g_autofree char *other = M(p->b, "_views/a/checkpoints/1/0/checkpoint-1.snap");
    assert_true(eventually_reads(other, "state of 1"));
    g_autofree char *latest_b = M(p->b, "_views/a/latest");
    assert_true(eventually_links(latest_b, "checkpoints/1"));
    g_autofree char *s2 = M(p->a, "_state/a/v1/0/checkpoint-2.snap");
    commit_file(s2, "state of 2");
    write_marker(p->a, "a", 2);
    assert_true(eventually_links(latest_b, "checkpoints/2"));
    g_autofree char *other2 = M(p->b, "_views/a/checkpoints/2/0/checkpoint-2.snap");
    assert_true(eventually_reads(other2, "state of 2"));
    /* and the other way round */
    g_autofree char *sb = M(p->b, "_state/b/v1/0/checkpoint-5.snap");
    commit_file(sb, "b's 5");
    write_marker(p->b, "b", 5);
    g_autofree char *b_in_a = M(p->a, "_views/b/checkpoints/5/0/checkpoint-5.snap");
    assert_true(eventually_reads(b_in_a, "b's 5"));
}

typedef struct {
    Mount *m;
    const char *other; /* the job whose namespace is written */
} Refuser;

/* Refuses 500 writes into the other job's namespace through one mount. */
static gpointer refuse_many(gpointer data)
{
    Refuser *r = data;
    for (int i = 0; i < 500; i++) {
        g_autofree char *p = g_strdup_printf("%s/_state/%s/v1/0/x%d", r->m->mnt, r->other, i);
        if (mkdir(p, 0755) == 0 || errno != EACCES)
            return GINT_TO_POINTER(1);
    }
    return NULL;
}

/* Both hosts append to one collision_log on the shared storage at once:
 * every record arrives whole, one JSON object a line. */
static void test_shared_collision_log(void **state)
{
    (void)state;
    Mount *a = mount_new(), *b = mount_new();
    g_free(b->backing);
    b->backing = g_strdup(a->backing);
    const char *dirs[] = {"_state/a/v1/0", "_state/b/v1/0"};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *d = B(a, dirs[i]);
        g_mkdir_with_parents(d, 0755);
    }
    g_autofree char *log = g_build_filename(a->base, "shared-collisions.jsonl", NULL);
    g_autofree char *oa = g_strdup_printf("job=a,collision_log=%s", log);
    g_autofree char *ob = g_strdup_printf("job=b,collision_log=%s", log);
    const char *aa[] = {"-o", oa, NULL}, *ab[] = {"-o", ob, NULL};
    assert_int_equal(mount_start(a, aa), 0);
    assert_int_equal(mount_start(b, ab), 0);
    Refuser ra = {a, "b"}, rb = {b, "a"};
    GThread *ta = g_thread_new("a", refuse_many, &ra);
    GThread *tb = g_thread_new("b", refuse_many, &rb);
    assert_null(g_thread_join(ta));
    assert_null(g_thread_join(tb));
    assert_int_equal(mount_stop(b), 0);
    assert_int_equal(mount_stop(a), 0);
    g_autofree char *text = get_file(log);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    assert_int_equal(g_strv_length(lines), 1000 + 1);
    int from_a = 0, from_b = 0;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(lines[i][0], '{');
        assert_int_equal(lines[i][strlen(lines[i]) - 1], '}');
        from_a += strstr(lines[i], "\"caller_job\":\"a\"") != NULL;
        from_b += strstr(lines[i], "\"caller_job\":\"b\"") != NULL;
    }
    assert_int_equal(from_a, 500);
    assert_int_equal(from_b, 500);
    mount_free(b);
    mount_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_reads_the_others_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_holds_in_both, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replaced_file_no_cache, setup_no_cache, teardown),
        cmocka_unit_test_setup_teardown(test_views_follow_the_other_mount, setup, teardown),
        cmocka_unit_test(test_shared_collision_log),
    };
    return cmocka_run_group_tests_name("mount/twomounts", tests, NULL, NULL);
}
