/* ckptctl prune --delete on the backing directory of a live mount: the
 * views stop showing what it removed within rescan= (polled for up to
 * 10 s at rescan=1), through inotify and through the periodic checks alone
 * (CKPTFS_NO_INOTIFY=1), and keep showing what is still read.  Polls are
 * bounded and assert what shows, never how fast. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <json-glib/json-glib.h>
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

static void bput(Mount *m, const char *rel, const char *data)
{
    g_autofree char *p = g_build_filename(m->backing, rel, NULL);
    g_autofree char *d = g_path_get_dirname(p);
    assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
    put_file(p, data);
}

/* Job a in its own root: v0 left behind by a restart, checkpoints of v1
 * and v2.  Job old in the legacy area's v1; a v5 nobody reads. */
static Mount *fixture(void)
{
    Mount *m = mount_new();
    bput(m, "_state/a/v0/0/checkpoint-0.snap", "superseded");
    bput(m, "_state/a/v1/0/checkpoint-1.snap", "one");
    bput(m, "_state/a/v2/0/checkpoint-2.snap", "two");
    bput(m, "_jobs/a/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=_state/a\n");
    bput(m, "_jobs/a/chk-2/COMPLETED", "generation=2\nparticipants=0\nstate=_state/a\n");
    bput(m, "v1/0/checkpoint-1.snap", "legacy, read");
    bput(m, "_jobs/old/chk-1/COMPLETED", "generation=1\nparticipants=0\n");
    bput(m, "v5/0/checkpoint-3.snap", "legacy, unread");
    return m;
}

static int start(Mount *m, bool inotify)
{
    const char *args[] = {"-o", "rescan=1", NULL};
    if (!inotify)
        g_setenv("CKPTFS_NO_INOTIFY", "1", TRUE);
    int r = mount_start(m, args);
    g_unsetenv("CKPTFS_NO_INOTIFY");
    return r;
}

/* Whether directory `rel` of the mount lists `name`. */
static bool listed(Mount *m, const char *rel, const char *name)
{
    g_autofree char *p = g_build_filename(m->mnt, rel, NULL);
    g_autoptr(GDir) d = g_dir_open(p, 0, NULL);
    assert_non_null(d);
    const char *nm;
    while ((nm = g_dir_read_name(d)) != NULL)
        if (strcmp(nm, name) == 0)
            return true;
    return false;
}

static bool exists(Mount *m, const char *rel)
{
    g_autofree char *p = g_build_filename(m->mnt, rel, NULL);
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* Both the listing of rel and a look-up of rel/name say `want`. */
static bool wait_shown(Mount *m, const char *rel, const char *name, bool want)
{
    g_autofree char *full = g_build_filename(rel, name, NULL);
    for (int i = 0; i < 100; i++) {
        if (listed(m, rel, name) == want && exists(m, full) == want)
            return true;
        g_usleep(100000);
    }
    return false;
}

static JsonObject *prune_backing(Mount *m)
{
    const char *bin = g_getenv("CKPTCTL_BIN");
    assert_non_null(bin);
    const char *argv[] = {bin, "prune", m->backing, "--delete", "--json", NULL};
    g_autofree char *out = NULL, *err = NULL;
    int status = -1;
    assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                             &status, NULL));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("ckptctl prune: status %d: %s", status, err);
    g_autoptr(JsonParser) p = json_parser_new();
    assert_true(json_parser_load_from_data(p, out, -1, NULL));
    return json_object_ref(json_node_get_object(json_parser_get_root(p)));
}

static void pruned_behind(bool inotify)
{
    Mount *m = fixture();
    assert_int_equal(start(m, inotify), 0);
    /* before: every generation of a in its state view, v5 at the top */
    assert_true(listed(m, "_views/a/state", "v0"));
    assert_true(exists(m, "_views/a/state/v0/0/checkpoint-0.snap"));
    assert_true(listed(m, "_views/a/state", "v1"));
    assert_true(listed(m, "", "v5"));
    assert_true(exists(m, "v5/0/checkpoint-3.snap"));

    g_autoptr(JsonObject) o = prune_backing(m);
    JsonArray *removed = json_object_get_array_member(o, "removed");
    assert_int_equal(json_array_get_length(removed), 2);
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(removed, 0), "path"),
        "_state/a/v0");
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(removed, 1), "path"), "v5");
    g_autofree char *bv0 = g_build_filename(m->backing, "_state/a/v0", NULL);
    assert_false(g_file_test(bv0, G_FILE_TEST_EXISTS));

    /* the views follow within rescan=; what is still read stays */
    assert_true(wait_shown(m, "_views/a/state", "v0", false));
    assert_false(exists(m, "_views/a/state/v0/0/checkpoint-0.snap"));
    /* the passthrough tree: its listing is the backing dir's; a name the
     * kernel already looked up stays cached for entry_timeout= (60 s
     * here, ckptfs(8)), so only the listing is waited for */
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++)
        if (!(gone = !listed(m, "", "v5")))
            g_usleep(100000);
    assert_true(gone);
    assert_true(listed(m, "_views/a/state", "v1"));
    assert_true(listed(m, "_views/a/state", "v2"));
    g_autofree char *one =
        g_build_filename(m->mnt, "_views/a/checkpoints/1/0/checkpoint-1.snap", NULL);
    g_autofree char *text = get_file(one);
    assert_string_equal(text, "one");
    assert_true(exists(m, "v1/0/checkpoint-1.snap"));
    assert_true(exists(m, "_views/old/checkpoints/1/0/checkpoint-1.snap"));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static void test_pruned_behind_inotify(void **state)
{
    (void)state;
    pruned_behind(true);
}

static void test_pruned_behind_periodic_only(void **state)
{
    (void)state;
    pruned_behind(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pruned_behind_inotify),
        cmocka_unit_test(test_pruned_behind_periodic_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
