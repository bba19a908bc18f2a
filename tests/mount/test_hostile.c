/* Hostile input on a real mount (ckptfs(8) CONFINEMENT AND BAD INPUT): odd
 * names through the mount, hostile job ids in the environment, and a backing
 * directory full of garbage markers, absurd sizes and symlinks pointing out
 * of it.  Each gives a clear error or a reported hazard, the daemon stays up,
 * and a canary directory next to the backing dir is never read or written
 * (its atime is set in the past, so any read of it would move it). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define CANARY_FILE    "CANARY-SECRET"
#define CANARY_CONTENT "canary-secret-content\n"

static char *M(Mount *m, const char *rel)
{
    return g_build_filename(m->mnt, rel, NULL);
}

static char *B(Mount *m, const char *rel)
{
    return g_build_filename(m->backing, rel, NULL);
}

static void mkdirs(const char *path)
{
    assert_int_equal(g_mkdir_with_parents(path, 0755), 0);
}

static void put_bytes(const char *path, const char *data, size_t len)
{
    g_autoptr(GError) err = NULL;
    g_file_set_contents_full(path, data, (gssize)len, G_FILE_SET_CONTENTS_NONE, 0644, &err);
    g_assert_no_error(err);
}

static void put_rel(Mount *m, const char *rel, const char *data)
{
    g_autofree char *p = B(m, rel);
    g_autofree char *dir = g_path_get_dirname(p);
    mkdirs(dir);
    put_file(p, data);
}

static void symlink_rel(Mount *m, const char *target, const char *rel)
{
    g_autofree char *p = B(m, rel);
    g_autofree char *dir = g_path_get_dirname(p);
    mkdirs(dir);
    assert_int_equal(symlink(target, p), 0);
}

static bool daemon_alive(Mount *m)
{
    struct stat st;
    g_autofree char *metrics = M(m, "_views/.metrics");
    return m->pid > 0 && kill(m->pid, 0) == 0 && stat(metrics, &st) == 0;
}

/* Every line of the text parses as one JSON object. */
static void assert_json_lines(const char *text)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        g_autoptr(JsonParser) p = json_parser_new();
        g_autoptr(GError) err = NULL;
        if (!json_parser_load_from_data(p, *l, -1, &err))
            fprintf(stderr, "not JSON: %s (%s)\n", *l, err->message);
        assert_null(err);
        assert_true(JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p)));
    }
}

/* ---- the canary: a directory outside the backing dir ---- */

typedef struct {
    struct stat dir, file, marker;
} CanaryStamp;

static char *canary_dir(Mount *m)
{
    return g_build_filename(m->base, "canary", NULL);
}

/* base/canary/{CANARY-SECRET, chk-1/COMPLETED, v1/0/state}, with atimes two
 * days and mtimes three days in the past: relatime moves an atime that is
 * older than the mtime or than a day on the next read. */
static void canary_make(Mount *m, CanaryStamp *s)
{
    g_autofree char *c = canary_dir(m);
    g_autofree char *f = g_build_filename(c, CANARY_FILE, NULL);
    g_autofree char *chk = g_build_filename(c, "chk-1", NULL);
    g_autofree char *mk = g_build_filename(chk, "COMPLETED", NULL);
    g_autofree char *st = g_build_filename(c, "v1", "0", NULL);
    g_autofree char *stf = g_build_filename(st, CANARY_FILE, NULL);
    mkdirs(chk);
    mkdirs(st);
    put_file(f, CANARY_CONTENT);
    put_file(stf, CANARY_CONTENT);
    put_file(mk, "generation=1\nparticipants=0\nstate=_state/x\n");
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[1] = t[0];
    t[0].tv_sec -= 2 * 86400;
    t[1].tv_sec -= 3 * 86400;
    const char *all[] = {stf, st, mk, chk, f, c};
    for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
        assert_int_equal(utimensat(AT_FDCWD, all[i], t, AT_SYMLINK_NOFOLLOW), 0);
    g_autofree char *v1 = g_build_filename(c, "v1", NULL);
    assert_int_equal(utimensat(AT_FDCWD, v1, t, 0), 0);
    assert_int_equal(stat(c, &s->dir), 0);
    assert_int_equal(stat(f, &s->file), 0);
    assert_int_equal(stat(mk, &s->marker), 0);
}

static void same_times(const struct stat *a, const struct stat *b)
{
    assert_int_equal(a->st_atim.tv_sec, b->st_atim.tv_sec);
    assert_int_equal(a->st_atim.tv_nsec, b->st_atim.tv_nsec);
    assert_int_equal(a->st_mtim.tv_sec, b->st_mtim.tv_sec);
    assert_int_equal(a->st_mtim.tv_nsec, b->st_mtim.tv_nsec);
    assert_int_equal(a->st_ctim.tv_sec, b->st_ctim.tv_sec);
    assert_int_equal(a->st_ctim.tv_nsec, b->st_ctim.tv_nsec);
}

static void canary_untouched(Mount *m, const CanaryStamp *s)
{
    g_autofree char *c = canary_dir(m);
    g_autofree char *f = g_build_filename(c, CANARY_FILE, NULL);
    g_autofree char *mk = g_build_filename(c, "chk-1", "COMPLETED", NULL);
    CanaryStamp now;
    assert_int_equal(stat(c, &now.dir), 0);
    assert_int_equal(stat(f, &now.file), 0);
    assert_int_equal(stat(mk, &now.marker), 0);
    same_times(&s->dir, &now.dir);
    same_times(&s->file, &now.file);
    same_times(&s->marker, &now.marker);
    /* nothing new in it (stat does not move atimes) */
    assert_int_equal(now.dir.st_nlink, s->dir.st_nlink);
}

/* ---- hostile backing tree ---- */

static char *participants(unsigned n)
{
    GString *s = g_string_new("generation=1\nstate=_state/h\nparticipants=");
    for (unsigned i = 0; i < n; i++)
        g_string_append_printf(s, i ? ",%u" : "%u", i);
    g_string_append_c(s, '\n');
    return g_string_free(s, FALSE);
}

/* Lays out the hostile tree; every job below is a case:
 *   ok     a plain namespaced job (the control)
 *   bin    binary garbage marker          big    64 KiB + 1 byte marker
 *   edge   exactly 64 KiB, valid          h      10,000 participants, valid
 *   sym    state=_state/evil, evil -> canary (symlink root out of the dir)
 *   etc    state=/etc                     uri    state=file:///etc
 *   esc    state=../../canary (escapes)   lp     state=_state/loop (a loop)
 *   leg    legacy, v7 -> canary/v1        old    legacy older layout, 3 -> ../..
 *   outj   _jobs/outj -> canary           outc   _jobs/outc/chk-1 -> canary/chk-1
 *   outm   _jobs/outm/chk-1/COMPLETED -> canary/chk-1/COMPLETED
 *   own    _state/own/v1/0/out -> canary (a state file link out of the dir)
 * and names that are not jobs: _jobs/"a\nb" (non-UTF-8 names: their own test),
 * _state/<129 bytes>, _state/loop -> loop, _state/evil -> canary, v2 -> v2. */
static void build_hostile(Mount *m)
{
    g_autofree char *c = canary_dir(m);
    g_autofree char *c_v1 = g_build_filename(c, "v1", NULL);
    g_autofree char *c_chk = g_build_filename(c, "chk-1", NULL);
    g_autofree char *c_mk = g_build_filename(c_chk, "COMPLETED", NULL);

    put_rel(m, "_jobs/ok/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=_state/ok\n");
    put_rel(m, "_state/ok/v1/0/checkpoint-1.snap", "ok state");
    g_autofree char *forged = B(m, "_state/ok/v1/0/checkpoint-1.snap");
    assert_int_equal(setxattr(forged, "user.ckptfs.backing", "/etc/passwd", 11, 0), 0);
    assert_int_equal(setxattr(forged, "user.ckptfs.source", "external", 8, 0), 0);

    char garbage[4096];
    GRand *r = g_rand_new_with_seed(6);
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (char)g_rand_int_range(r, 0, 256);
    g_rand_free(r);
    garbage[10] = 0;
    g_autofree char *bin = B(m, "_jobs/bin/chk-1/COMPLETED");
    g_autofree char *bindir = g_path_get_dirname(bin);
    mkdirs(bindir);
    put_bytes(bin, garbage, sizeof garbage);

    GString *big = g_string_new("generation=1\nparticipants=0\nstate=_state/big\n#");
    while (big->len < 65536)
        g_string_append_c(big, 'x');
    g_string_append_c(big, '\n'); /* 65537 bytes */
    put_rel(m, "_jobs/big/chk-1/COMPLETED", big->str);
    g_string_truncate(big, 0);
    g_string_append(big, "generation=1\nparticipants=0\nstate=_state/edge\n#");
    while (big->len < 65535)
        g_string_append_c(big, 'x');
    g_string_append_c(big, '\n'); /* exactly 65536 */
    put_rel(m, "_jobs/edge/chk-1/COMPLETED", big->str);
    put_rel(m, "_state/edge/v1/0/s", "edge");
    g_string_free(big, TRUE);

    g_autofree char *many = participants(10000);
    put_rel(m, "_jobs/h/chk-1/COMPLETED", many);
    put_rel(m, "_state/h/v1/0/s", "h0");
    put_rel(m, "_state/h/v1/9999/s", "h9999");

    put_rel(m, "_jobs/sym/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=_state/evil\n");
    symlink_rel(m, c, "_state/evil");
    put_rel(m, "_jobs/etc/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=/etc\n");
    put_rel(m, "_jobs/uri/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=file:///etc\n");
    put_rel(m, "_jobs/esc/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=../../canary\n");
    /* '..' inside a relative root: normalised, then judged */
    put_rel(m, "_jobs/dd1/chk-1/COMPLETED",
            "generation=1\nparticipants=0\nstate=_state/dd1/../ok\n");
    put_rel(m, "_jobs/dd2/chk-1/COMPLETED",
            "generation=1\nparticipants=0\nstate=./_state/../../x\n");
    put_rel(m, "_jobs/lp/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=_state/loop\n");
    symlink_rel(m, "loop", "_state/loop");

    put_rel(m, "_jobs/leg/chk-1/COMPLETED", "generation=7\nparticipants=0\n");
    symlink_rel(m, c_v1, "v7");
    put_rel(m, "_jobs/old/chk-1/COMPLETED", "generation=9\nparticipants=3\n");
    symlink_rel(m, "../..", "3");
    symlink_rel(m, "v2", "v2");

    g_autofree char *jobs = B(m, "_jobs");
    symlink_rel(m, c, "_jobs/outj");
    symlink_rel(m, c_chk, "_jobs/outc/chk-1");
    symlink_rel(m, c_mk, "_jobs/outm/chk-1/COMPLETED");
    put_rel(m, "_jobs/own/chk-1/COMPLETED", "generation=1\nparticipants=0\nstate=_state/own\n");
    symlink_rel(m, c, "_state/own/v1/0/out");

    /* markers that are not regular files: a FIFO (an open would block), a
     * character device (/dev/zero: endless), a directory; a FIFO as state
     * and as a legacy generation */
    g_autofree char *fifo = B(m, "_jobs/fifo/chk-1/COMPLETED");
    g_autofree char *dev = B(m, "_jobs/dev/chk-1/COMPLETED");
    g_autofree char *dirm = B(m, "_jobs/dirm/chk-1/COMPLETED");
    g_autofree char *fifod = g_path_get_dirname(fifo), *devd = g_path_get_dirname(dev);
    mkdirs(fifod);
    mkdirs(devd);
    mkdirs(dirm);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(mknod(dev, S_IFCHR | 0644, makedev(1, 5)), 0);
    g_autofree char *spipe = B(m, "_state/ok/v1/0/pipe"), *lpipe = B(m, "v8");
    assert_int_equal(mkfifo(spipe, 0644), 0);
    assert_int_equal(mkfifo(lpipe, 0644), 0);
    put_rel(m, "_jobs/legp/chk-1/COMPLETED", "generation=8\nparticipants=0\n");

    g_autofree char *nl = B(m, "_jobs/a\nb/chk-1/COMPLETED");
    g_autofree char *nldir = g_path_get_dirname(nl);
    mkdirs(nldir);
    put_file(nl, "generation=1\nparticipants=0\n");
    char longname[130];
    memset(longname, 'L', 129);
    longname[129] = 0;
    g_autofree char *lrel = g_strdup_printf("_state/%s", longname);
    g_autofree char *ld = B(m, lrel);
    mkdirs(ld);
}

static JsonObject *check_json(Mount *m, int *exit_code, JsonParser **keep)
{
    const char *bin = g_getenv("CKPTCTL_BIN");
    assert_non_null(bin);
    const char *argv[] = {bin, "check", "--json", m->backing, NULL};
    g_autofree char *out = NULL;
    int status = run_cmd(argv, &out);
    assert_true(WIFEXITED(status));
    *exit_code = WEXITSTATUS(status);
    JsonParser *p = json_parser_new();
    g_autoptr(GError) err = NULL;
    if (!json_parser_load_from_data(p, out, -1, &err))
        fprintf(stderr, "ckptctl check --json is not JSON (%s):\n%s\n", err->message, out);
    assert_null(err);
    *keep = p;
    return json_node_get_object(json_parser_get_root(p));
}

/* The hazard of `kind` whose path equals `path`, or NULL. */
static JsonObject *find_hazard(JsonObject *root, const char *kind, const char *path)
{
    JsonArray *hz = json_object_get_array_member(root, "hazards");
    for (guint i = 0; i < json_array_get_length(hz); i++) {
        JsonObject *h = json_array_get_object_element(hz, i);
        const char *k = json_object_get_string_member(h, "kind");
        const char *p = json_object_get_string_member(h, "path");
        if (g_strcmp0(k, kind) == 0 && (!path || g_strcmp0(p, path) == 0))
            return h;
    }
    return NULL;
}

static bool has_hazard_on(JsonObject *root, const char *path)
{
    JsonArray *hz = json_object_get_array_member(root, "hazards");
    for (guint i = 0; i < json_array_get_length(hz); i++) {
        JsonObject *h = json_array_get_object_element(hz, i);
        if (g_strcmp0(json_object_get_string_member(h, "path"), path) == 0)
            return true;
    }
    return false;
}

static void expect_hazard(JsonObject *root, const char *kind, const char *path)
{
    if (!find_hazard(root, kind, path))
        fprintf(stderr, "no %s hazard on %s\n", kind, path);
    assert_non_null(find_hazard(root, kind, path));
}

/* ---- walking a tree without following symlinks ---- */

static GPtrArray *walk_names;
static GPtrArray *walk_paths; /* full paths of the last walk (g_steal_pointer it) */

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    g_ptr_array_add(walk_names, g_strdup(path + ftw->base));
    g_ptr_array_add(walk_paths, g_strdup(path));
    if (type == FTW_F && S_ISREG(st->st_mode)) { /* never a FIFO: it would block */
        g_autofree char *text = NULL;
        gsize len = 0;
        if (g_file_get_contents(path, &text, &len, NULL))
            assert_null(g_strstr_len(text, (gssize)len, "canary-secret"));
    }
    return 0;
}

/* Every name under root (nftw with FTW_PHYS: links are not followed); regular
 * files are read whole and must not hold the canary's content. */
static GPtrArray *walk(const char *root)
{
    walk_names = g_ptr_array_new_with_free_func(g_free);
    if (walk_paths)
        g_ptr_array_unref(walk_paths);
    walk_paths = g_ptr_array_new_with_free_func(g_free);
    assert_int_equal(nftw(root, walk_one, 16, FTW_PHYS), 0);
    GPtrArray *r = walk_names;
    walk_names = NULL;
    return r;
}

static GString *snap_text;

static int snap_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)type;
    (void)ftw;
    g_string_append_printf(snap_text, "%s %o %lld %lld.%09ld %lld.%09ld %lu\n", path, st->st_mode,
                           (long long)st->st_size, (long long)st->st_mtim.tv_sec,
                           st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec,
                           (unsigned long)st->st_nlink);
    return 0;
}

/* Everything but atimes of every entry under root (links not followed):
 * what must not change when only reads went through the mount. */
static char *snapshot(const char *root)
{
    snap_text = g_string_new("");
    assert_int_equal(nftw(root, snap_one, 16, FTW_PHYS), 0);
    return g_string_free(g_steal_pointer(&snap_text), FALSE);
}

static bool has_name(GPtrArray *names, const char *name)
{
    for (guint i = 0; i < names->len; i++)
        if (strcmp(names->pdata[i], name) == 0)
            return true;
    return false;
}

/* ---- tests ---- */

/* Names through the mount: what the kernel returns, what the backing holds,
 * and the collision log stays one JSON object per line whatever the bytes. */
static void test_hostile_names(void **state)
{
    (void)state;
    Mount *m = mount_new();
    assert_int_equal(mount_start(m, NULL), 0);
    char n255[256], n256[257];
    memset(n255, 'n', 255);
    n255[255] = 0;
    memset(n256, 'n', 256);
    n256[256] = 0;
    const char *fine[] = {"a\nb",  "\xff\xfe\x80", "..x", "x..", "...",
                          " lead", "tab\tname",    "-rf", n255};
    for (size_t i = 0; i < G_N_ELEMENTS(fine); i++) {
        g_autofree char *p = mp(m, fine[i]), *b = bp(m, fine[i]);
        put_file(p, fine[i]);
        g_autofree char *back = get_file(b);
        assert_string_equal(back, fine[i]);
        g_autofree char *through = get_file(p);
        assert_string_equal(through, fine[i]);
        g_autofree char *q = g_strconcat(p, ".renamed", NULL);
        if (strlen(fine[i]) < 240) {
            assert_int_equal(rename(p, q), 0);
            assert_int_equal(rename(q, p), 0);
        }
    }
    /* all of them listed, exactly once */
    GDir *d = g_dir_open(m->work, 0, NULL);
    assert_non_null(d);
    int seen = 0;
    for (const char *e; (e = g_dir_read_name(d));)
        for (size_t i = 0; i < G_N_ELEMENTS(fine); i++)
            seen += strcmp(e, fine[i]) == 0;
    g_dir_close(d);
    assert_int_equal(seen, (int)G_N_ELEMENTS(fine));
    for (size_t i = 0; i < G_N_ELEMENTS(fine); i++) {
        g_autofree char *p = mp(m, fine[i]);
        assert_int_equal(unlink(p), 0);
    }

    g_autofree char *p256 = mp(m, n256);
    assert_errno(open(p256, O_WRONLY | O_CREAT, 0644), ENAMETOOLONG);
    assert_errno(mkdir(p256, 0755), ENAMETOOLONG);
    struct stat st;
    assert_errno(stat(p256, &st), ENAMETOOLONG);
    g_autofree char *dotdot = mp(m, "..");
    assert_errno(mkdir(dotdot, 0755), EEXIST);
    g_autofree char *dot = mp(m, ".");
    assert_errno(rmdir(dot), EINVAL);
    /* '/' cannot be in a name: the kernel walks it as a separator */
    g_autofree char *slash = mp(m, "no-such-dir/x");
    assert_errno(open(slash, O_WRONLY | O_CREAT, 0644), ENOENT);
    /* ".." is resolved by the kernel, never sent to the daemon: at the
     * mount root it leaves the mount, as on any mount point */
    g_autofree char *climb = mp(m, "../../..");
    struct stat up, parent;
    g_autofree char *mnt_parent = g_path_get_dirname(m->mnt);
    assert_int_equal(stat(climb, &up), 0);
    assert_int_equal(stat(mnt_parent, &parent), 0);
    assert_int_equal(up.st_ino, parent.st_ino);

    /* absurd symlink targets: the policy resolves them lexically, whatever
     * their length, without a crash */
    GString *up_t = g_string_new(""), *deep_t = g_string_new("");
    for (int i = 0; i < 1300; i++)
        g_string_append(up_t, "../");
    g_string_append(up_t, "x"); /* clamps at the mount root: top level, legacy */
    for (int i = 0; i < 2000; i++)
        g_string_append(deep_t, "a/");
    g_string_append(deep_t, "x"); /* stays in _state/t */
    g_autofree char *l_up = mp(m, "l-up"), *l_deep = mp(m, "l-deep"), *l_long = mp(m, "l-long");
    assert_errno(symlink(up_t->str, l_up), EACCES);
    assert_int_equal(symlink(deep_t->str, l_deep), 0);
    g_string_free(up_t, TRUE);
    g_string_free(deep_t, TRUE);
    g_autofree char *t4095 = g_strnfill(4095, 'b'), *t4096 = g_strnfill(4096, 'b');
    assert_int_equal(symlink(t4095, l_long), 0);
    char lbuf[4200];
    assert_int_equal(readlink(l_long, lbuf, sizeof lbuf), 4095);
    g_autofree char *l_long2 = mp(m, "l-long2");
    assert_errno(symlink(t4096, l_long2), ENAMETOOLONG);
    g_autofree char *l_nu = mp(m, "l-nu");
    assert_errno(symlink("\xff\xfe/../../b/x", l_nu), EACCES); /* lands in _state/b */
    /* xattr names over 255 bytes */
    g_autofree char *xf = mp(m, "xattrs");
    put_file(xf, "x");
    g_autofree char *xname = g_strconcat("user.", t4095 + 4095 - 251, NULL);
    assert_errno(setxattr(xf, xname, "v", 1, 0), ERANGE);

    /* job ids: only valid ones may be made under _state and _jobs */
    char j128[129], j129[130];
    memset(j128, 'j', 128);
    j128[128] = 0;
    memset(j129, 'j', 129);
    j129[129] = 0;
    const char *bad_jobs[] = {"x\ny", "\xff", ".hidden", "a b", "a:b", "..a", j129, "é"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad_jobs); i++) {
        g_autofree char *rel = g_strdup_printf("_state/%s", bad_jobs[i]);
        g_autofree char *p = M(m, rel), *b = B(m, rel);
        assert_errno(mkdir(p, 0755), EACCES);
        assert_int_equal(access(b, F_OK), -1);
        g_autofree char *jrel = g_strdup_printf("_jobs/%s", bad_jobs[i]);
        g_autofree char *jp = M(m, jrel);
        g_autofree char *top = M(m, "_jobs");
        mkdir(top, 0755);
        assert_errno(mkdir(jp, 0755), EACCES);
    }
    g_autofree char *ok_rel = g_strdup_printf("_state/%s", j128);
    g_autofree char *okp = M(m, ok_rel);
    assert_int_equal(mkdir(okp, 0755), 0);
    g_autofree char *okf = g_build_filename(okp, "f", NULL);
    put_file(okf, "longest job id");

    g_autofree char *logp = M(m, "_views/.collisions");
    g_autofree char *log = get_file(logp);
    assert_json_lines(log);
    assert_non_null(strstr(log, "\"kind\":\"outside-namespace\""));
    g_auto(GStrv) lines = g_strsplit(log, "\n", -1);
    assert_int_equal(g_strv_length(lines) - 1, 2 * G_N_ELEMENTS(bad_jobs) + 2); /* + 2 symlinks */
    assert_true(daemon_alive(m));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Runs `sh -c 'echo x > TARGET'` (sh run as prog, which names its comm)
 * with CKJOB=value; returns the exit code. */
static int write_as_prog(const char *prog, const char *value, const char *target)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        g_autofree char *env = g_strconcat("CKJOB=", value, NULL);
        char *envp[] = {env, "PATH=/usr/bin:/bin", NULL};
        char *argv[] = {(char *)prog, "-c", "echo x > \"$0\" 2>/dev/null", (char *)target, NULL};
        execve(prog, argv, envp);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static int write_as(const char *value, const char *target)
{
    return write_as_prog("/bin/sh", value, target);
}

/* identity=env:VAR with values that are not job ids: the caller writes
 * nowhere (invalid-identity, never anonymous), and the record carries the
 * value escaped, whatever its bytes. */
static void test_hostile_identity(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *bb = B(m, "_state/b");
    mkdirs(bb);
    const char *args[] = {"-o", "identity=env:CKJOB", NULL};
    assert_int_equal(mount_start(m, args), 0);
    char longv[4096];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    const char *values[] = {"../b", "b/../../etc", "a\nb", "", "\xff\xfe", ".b", "b ", longv};
    for (size_t i = 0; i < G_N_ELEMENTS(values); i++) {
        g_autofree char *rel = g_strdup_printf("_state/b/anon-%zu", i);
        g_autofree char *p = M(m, rel), *b = B(m, rel);
        assert_int_not_equal(write_as(values[i], p), 0);
        assert_int_equal(access(b, F_OK), -1);
    }
    /* a valid foreign job is still refused after the garbage */
    g_autofree char *fp = M(m, "_state/b/by-c"), *fb = B(m, "_state/b/by-c");
    assert_int_not_equal(write_as("c", fp), 0);
    assert_int_equal(access(fb, F_OK), -1);
    /* a process name (comm) of newline, quote, brace and non-UTF-8 bytes */
    g_autofree char *prog = g_build_filename(m->base, "x\n\"}\xff{", NULL);
    assert_int_equal(symlink("/bin/sh", prog), 0);
    g_autofree char *fp2 = M(m, "_state/b/by-c2");
    assert_int_not_equal(write_as_prog(prog, "c", fp2), 0);
    g_autofree char *logp = M(m, "_views/.collisions");
    g_autofree char *log = get_file(logp);
    assert_json_lines(log);
    g_auto(GStrv) lines = g_strsplit(log, "\n", -1);
    /* one record per value, two foreign writes, then "" */
    assert_int_equal(g_strv_length(lines), G_N_ELEMENTS(values) + 3);
    assert_non_null(strstr(log, "\"caller_job\":\"c\""));
    assert_non_null(strstr(log, "\"identity_value\":\"a\\\\x0ab\""));
    assert_non_null(strstr(log, "\"identity_value\":\"\\\\xff\\\\xfe\""));
    assert_non_null(strstr(log, "\"identity_value\":\"\""));
    assert_non_null(strstr(log, "\"comm\":\"x\\n\\\"}"));
    /* nothing escaped the backing dir */
    g_autofree char *outside = g_build_filename(m->base, "b", NULL);
    assert_int_equal(access(outside, F_OK), -1);
    assert_true(daemon_alive(m));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

static Mount *hostile_mount(CanaryStamp *stamp, char **before)
{
    Mount *m = mount_new();
    canary_make(m, stamp);
    build_hostile(m);
    /* the canary's stamp is taken after the tree is built: symlink() into
     * it does not read it */
    canary_make(m, stamp);
    if (before)
        *before = snapshot(m->backing);
    if (mount_start(m, NULL) != 0) {
        mount_free(m);
        return NULL;
    }
    return m;
}

/* The hostile tree mounts, the whole passthrough tree walks (links not
 * followed) and reads, garbage markers written through the mount are taken
 * in, ckptctl check reports each case, and the canary is untouched. */
static void test_hostile_backing_tree(void **state)
{
    (void)state;
    CanaryStamp stamp;
    Mount *m = hostile_mount(&stamp, NULL);
    assert_non_null(m);
    g_autoptr(GPtrArray) names = walk(m->mnt);
    assert_true(has_name(names, "COMPLETED"));
    assert_true(has_name(names, "a\nb"));
    assert_true(has_name(names, "evil"));
    assert_false(has_name(names, CANARY_FILE));
    /* links show as links */
    struct stat st;
    g_autofree char *evil = M(m, "_state/evil"), *loop = M(m, "_state/loop/x");
    assert_int_equal(lstat(evil, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_errno(stat(loop, &st), ELOOP);
    g_autofree char *v2 = M(m, "v2/0");
    assert_errno(stat(v2, &st), ELOOP);
    /* the oversized marker reads whole through the mount */
    g_autofree char *bigp = M(m, "_jobs/big/chk-1/COMPLETED");
    g_autofree char *bigt = get_file(bigp);
    assert_int_equal(strlen(bigt), 65537);

    /* garbage, oversized and symlinked markers written through the mount */
    g_autofree char *wdir = M(m, "_jobs/w/chk-1"), *wdir2 = M(m, "_jobs/w/chk-2");
    g_autofree char *wj = M(m, "_jobs/w");
    assert_int_equal(mkdir(wj, 0755), 0);
    assert_int_equal(mkdir(wdir, 0755), 0);
    assert_int_equal(mkdir(wdir2, 0755), 0);
    g_autofree char *wm = g_build_filename(wdir, "COMPLETED", NULL);
    g_autofree char *wm2 = g_build_filename(wdir2, "COMPLETED", NULL);
    g_autofree char *garbage = g_strnfill(70000, '\x01');
    put_file(wm, garbage);
    g_autofree char *canary_mk = g_build_filename(m->base, "canary", "chk-1", "COMPLETED", NULL);
    /* an absolute target is resolved against the mount point: "tmp/..." is
     * the legacy area, so the link is refused; made behind the mount instead
     * (in chk-3: chk-2/COMPLETED is now a negative entry in the kernel's
     * cache for entry_timeout) */
    assert_errno(symlink(canary_mk, wm2), EACCES);
    g_autofree char *bwm3 = B(m, "_jobs/w/chk-3/COMPLETED");
    g_autofree char *bw3 = g_path_get_dirname(bwm3);
    mkdirs(bw3);
    assert_int_equal(symlink(canary_mk, bwm3), 0);
    g_autofree char *wm3 = M(m, "_jobs/w/chk-3/COMPLETED");
    struct stat lst;
    assert_int_equal(lstat(wm3, &lst), 0);
    assert_true(S_ISLNK(lst.st_mode));
    g_autofree char *views = M(m, "_views");
    g_autoptr(GPtrArray) vnames = walk(views);
    assert_true(has_name(vnames, ".metrics"));
    /* names that are not jobs never become views */
    const char *not_views[] = {"a\nb", "\xff\xfe", "evil", "loop", "outj", CANARY_FILE};
    for (size_t i = 0; i < G_N_ELEMENTS(not_views); i++) {
        if (has_name(vnames, not_views[i]))
            fprintf(stderr, "a view shows \"%s\"\n", not_views[i]);
        assert_false(has_name(vnames, not_views[i]));
    }
    assert_true(daemon_alive(m));
    assert_int_equal(mount_stop(m), 0);

    int code = 0;
    JsonParser *keep = NULL;
    JsonObject *root = check_json(m, &code, &keep);
    assert_int_equal(code, 1);
    expect_hazard(root, "malformed", "_jobs/bin/chk-1/COMPLETED");
    expect_hazard(root, "malformed", "_jobs/big/chk-1/COMPLETED");
    expect_hazard(root, "malformed", "_jobs/esc/chk-1/COMPLETED");
    expect_hazard(root, "malformed", "_jobs/w/chk-1/COMPLETED");
    JsonObject *big = find_hazard(root, "malformed", "_jobs/big/chk-1/COMPLETED");
    assert_non_null(strstr(json_object_get_string_member(big, "detail"), "64 KiB"));
    expect_hazard(root, "foreign-root", "_jobs/sym/chk-1/COMPLETED");
    expect_hazard(root, "foreign-root", "_jobs/dd1/chk-1/COMPLETED"); /* = _state/ok */
    expect_hazard(root, "malformed", "_jobs/dd2/chk-1/COMPLETED");    /* escapes */
    expect_hazard(root, "not-a-job", "_jobs/a\nb");
    expect_hazard(root, "not-a-job", "_state/evil");
    expect_hazard(root, "not-a-job", "_state/loop");
    /* a checkpoint directory that is a symlink out of the dir is not followed:
     * a malformed checkpoint, in check as in the views and resolve */
    expect_hazard(root, "malformed", "_jobs/outc/chk-1/COMPLETED");
    expect_hazard(root, "malformed", "_jobs/outm/chk-1/COMPLETED");
    expect_hazard(root, "malformed", "_jobs/fifo/chk-1/COMPLETED");
    expect_hazard(root, "malformed", "_jobs/dev/chk-1/COMPLETED");
    expect_hazard(root, "malformed", "_jobs/dirm/chk-1/COMPLETED");
    /* valid markers at the limits are not hazards */
    assert_false(has_hazard_on(root, "_jobs/edge/chk-1/COMPLETED"));
    assert_false(has_hazard_on(root, "_jobs/h/chk-1/COMPLETED"));
    assert_false(has_hazard_on(root, "_jobs/ok/chk-1/COMPLETED"));
    g_object_unref(keep);
    canary_untouched(m, &stamp);
    mount_free(m);
}

/* Names that are not valid UTF-8 under _jobs/_state: the JSON of ckptctl
 * check must still parse (a raw 0xff byte in a JSON string does not). */
static void test_check_json_non_utf8_names(void **state)
{
    Mount *m = *state; /* not mounted: ckptctl reads the dir */
    g_autofree char *bad = B(m, "_state/\xff\xfe");
    mkdirs(bad);
    int code = 0;
    JsonParser *keep = NULL;
    JsonObject *root = check_json(m, &code, &keep);
    assert_int_equal(code, 0);
    assert_true(json_array_get_length(json_object_get_array_member(root, "hazards")) >= 1);
    g_object_unref(keep);
}

/* A failed assertion skips the rest of a test: the dir is freed here. */
static int setup_dir(void **state)
{
    *state = mount_new();
    return 0;
}

static int teardown_dir(void **state)
{
    mount_free(*state);
    return 0;
}

static char *view_text(Mount *m, const char *rel)
{
    g_autofree char *p = M(m, rel);
    char *text = NULL;
    if (!g_file_get_contents(p, &text, NULL, NULL))
        return NULL;
    return text;
}

static bool has_view(Mount *m, const char *job)
{
    g_autofree char *p = g_build_filename(m->mnt, "_views", job, NULL);
    return access(p, F_OK) == 0;
}

/* The views of the hostile tree (skipped until the views exist): every
 * refusal is in the restore text, no view holds the canary, no entry claims
 * a backing path outside the backing dir. */
static void test_hostile_views(void **state)
{
    (void)state;
    CanaryStamp stamp;
    char *before = NULL;
    Mount *m = hostile_mount(&stamp, &before);
    assert_non_null(m);
    if (!has_view(m, "ok")) {
        g_free(before);
        mount_free(m);
        skip(); /* views not built yet (nothing allocated is in scope here) */
    }
    g_autofree char *ok_restore = view_text(m, "_views/ok/restore");
    assert_non_null(ok_restore);
    g_autofree char *okf = view_text(m, "_views/ok/checkpoints/1/0/checkpoint-1.snap");
    assert_non_null(okf);
    assert_string_equal(okf, "ok state");
    /* provenance comes from the resolution, never from the backing file's
     * own (forged) user.ckptfs.* attributes */
    g_autofree char *okv = M(m, "_views/ok/checkpoints/1/0/checkpoint-1.snap");
    char val[256];
    ssize_t vn = lgetxattr(okv, "user.ckptfs.backing", val, sizeof val - 1);
    assert_true(vn > 0);
    val[vn] = 0;
    assert_string_equal(val, "_state/ok/v1/0/checkpoint-1.snap");
    vn = lgetxattr(okv, "user.ckptfs.source", val, sizeof val - 1);
    assert_true(vn > 0);
    val[vn] = 0;
    assert_string_equal(val, "own");

    const char *refused[] = {"bin", "big",  "esc",  "sym", "lp",   "leg",
                             "old", "outm", "fifo", "dev", "dirm", "legp"};
    for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_autofree char *dir = g_strdup_printf("_views/%s", refused[i]);
        g_autofree char *p = M(m, dir);
        if (access(p, F_OK) != 0)
            continue; /* not presented at all: fine */
        g_autofree char *rel = g_strdup_printf("_views/%s/restore", refused[i]);
        g_autofree char *text = view_text(m, rel);
        assert_non_null(text);
        if (!strstr(text, "error") || g_getenv("CKPTFS_TEST_VERBOSE"))
            fprintf(stderr, "%s: restore text:\n%s\n", refused[i], text);
        assert_non_null(strstr(text, "restorable: no"));
        assert_non_null(strstr(text, "error"));
    }
    g_autofree char *bin_err = view_text(m, "_views/bin/checkpoints/1/ERROR");
    assert_non_null(bin_err);
    g_autofree char *big_err = view_text(m, "_views/big/checkpoints/1/ERROR");
    assert_non_null(big_err);
    g_autofree char *etc = view_text(m, "_views/etc/restore");
    assert_non_null(etc);
    assert_non_null(strstr(etc, "remote"));
    g_autofree char *h = view_text(m, "_views/h/checkpoints/1/9999/s");
    assert_non_null(h);
    assert_string_equal(h, "h9999");
    g_autofree char *edge = view_text(m, "_views/edge/checkpoints/1/0/s");
    assert_non_null(edge);
    /* a symlinked chk-1 is not followed: outc's checkpoint 1 is malformed */
    g_autofree char *outc = view_text(m, "_views/outc/checkpoints/1/ERROR");
    assert_non_null(outc);
    assert_string_equal(outc, "malformed marker: chk-1 is a symlink, not followed\n");
    g_autofree char *outj = M(m, "_views/outj");
    assert_int_equal(access(outj, F_OK), -1);

    g_autofree char *views = M(m, "_views");
    g_autoptr(GPtrArray) vnames = walk(views);
    g_autoptr(GPtrArray) vpaths = g_steal_pointer(&walk_paths);
    guint backing_attrs = 0;
    assert_false(has_name(vnames, CANARY_FILE));
    /* nothing of /etc (state=/etc, state=file:///etc) is shown */
    assert_false(has_name(vnames, "passwd"));
    assert_false(has_name(vnames, "fstab"));
    g_autofree char *uri = view_text(m, "_views/uri/restore");
    assert_non_null(uri);
    assert_non_null(strstr(uri, "remote"));
    /* every entry's provenance names a path inside the backing dir */
    for (guint i = 0; i < vpaths->len; i++) {
        char val[PATH_MAX];
        ssize_t n = lgetxattr(vpaths->pdata[i], "user.ckptfs.backing", val, sizeof val - 1);
        if (n < 0)
            continue;
        val[n] = 0;
        if (val[0] == '/' || g_str_has_prefix(val, "..") || strstr(val, "/../"))
            fprintf(stderr, "%s: user.ckptfs.backing=%s\n", (char *)vpaths->pdata[i], val);
        assert_false(val[0] == '/' || g_str_has_prefix(val, "..") || strstr(val, "/../"));
        backing_attrs++;
    }
    assert_true(backing_attrs > 0);
    assert_true(daemon_alive(m));
    assert_int_equal(mount_stop(m), 0);
    canary_untouched(m, &stamp);
    /* only reads went through the mount: the daemon wrote nothing into the
     * backing dir on its own (no entry made, changed, chmod'ed, touched) */
    g_autofree char *after = snapshot(m->backing);
    assert_string_equal(before, after);
    g_free(before);
    mount_free(m);
}

/* A mount point on the backing dir, inside it or above it would make the
 * daemon read its own mount: refused, exit 2, one line, nothing mounted. */
static void test_mountpoint_overlapping_backing(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *inner = B(m, "inner");
    mkdirs(inner);
    const char *bin = g_getenv("CKPTFS_BIN");
    const char *mnts[] = {m->backing, inner, m->base};
    for (size_t i = 0; i < G_N_ELEMENTS(mnts); i++) {
        const char *argv[] = {bin, "-f", m->backing, mnts[i], NULL};
        g_autofree char *err = NULL;
        int status = -1;
        assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                 NULL, &err, &status, NULL));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
            fprintf(stderr, "%s: status %d: %s\n", mnts[i], status, err);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 2);
        assert_non_null(strstr(err, "would read itself"));
        assert_int_equal(strchr(err, '\n')[1], '\0');
        g_autofree char *mounts = get_file("/proc/self/mountinfo");
        g_autofree char *needle = g_strdup_printf(" %s ", mnts[i]);
        assert_null(strstr(mounts, needle));
    }
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_names),
        cmocka_unit_test(test_hostile_identity),
        cmocka_unit_test(test_hostile_backing_tree),
        cmocka_unit_test_setup_teardown(test_check_json_non_utf8_names, setup_dir, teardown_dir),
        cmocka_unit_test(test_hostile_views),
        cmocka_unit_test(test_mountpoint_overlapping_backing),
    };
    return cmocka_run_group_tests_name("mount/hostile", tests, NULL, NULL);
}
