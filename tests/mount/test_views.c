/* The per-job views through a real mount (ckptfs(8) THE VIEWS): one fixture with a job
 * of every marker class, each view compared with `ckptctl resolve --json` on
 * the backing dir; provenance xattrs, ERROR files, EROFS, reads, inode
 * numbers, find/du/tar/rsync over the views, and `latest` moving after a
 * marker written through the mount and behind its back. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <grp.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

/* ---- fixture ---- */

typedef struct {
    Mount *m;
    char *ext; /* base/ext: an external root allowed by external_root= */
} Fx;

static char *B(Mount *m, const char *rel)
{
    return g_build_filename(m->backing, rel, NULL);
}

static char *V(Mount *m, const char *rel)
{
    return g_build_filename(m->mnt, "_views", rel, NULL);
}

/* Writes backing/rel (making its parents). */
static void bput(const char *root, const char *rel, const char *data)
{
    g_autofree char *p = g_build_filename(root, rel, NULL);
    g_autofree char *d = g_path_get_dirname(p);
    assert_int_equal(g_mkdir_with_parents(d, 0755), 0);
    put_file(p, data);
}

static void marker(const char *root, const char *job, int n, const char *text)
{
    g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-%d/COMPLETED", job, n);
    bput(root, rel, text);
}

/* One job of every class of marker:
 *  ns       namespaced, chk-1 (v1) and chk-2 (v2); a symlink and a loop in its root
 *  leg      legacy in v1 (0,1), sharing v1 with leg2 (0 only) and mix (0)
 *  old      legacy in the older layout: generation=7 but no v7, so <dir>/5
 *  cut      cut-short with its own root
 *  cutnone  cut-short without an own root (not restorable)
 *  bad      malformed
 *  foreign  state=_state/ns (another job's root)
 *  remote   state=s3://... (not followed)
 *  ext      state=<base>/ext/_state/ext, allowed by external_root
 *  mix      own root v1/0/a plus a legacy marker reading v1/0 (own shadows) */
static void write_fixture(const char *root, const char *ext)
{
    bput(root, "_state/ns/v1/0/f.snap", "ns v1 0");
    bput(root, "_state/ns/v1/1/f.snap", "ns v1 1");
    bput(root, "_state/ns/v2/0/f.snap", "ns v2 0");
    bput(root, "_state/ns/v2/1/f.snap", "ns v2 1");
    bput(root, "_state/ns/v2/1/sub/deep.bin", "deep");
    g_autofree char *lnk = g_build_filename(root, "_state/ns/v2/0/escape", NULL);
    assert_int_equal(symlink("/etc", lnk), 0);
    g_autofree char *loop = g_build_filename(root, "_state/ns/v2/1/loop", NULL);
    assert_int_equal(symlink("loop", loop), 0);
    marker(root, "ns", 1, "checkpoint=1\ngeneration=1\nparticipants=0,1\nstate=_state/ns\n");
    marker(root, "ns", 2, "checkpoint=2\ngeneration=2\nparticipants=0,1\nstate=_state/ns\n");

    bput(root, "v1/0/s0", "legacy v1 0");
    bput(root, "v1/0/a", "legacy a");
    bput(root, "v1/1/s1", "legacy v1 1");
    bput(root, "v3/0/other", "nobody's");
    marker(root, "leg", 1, "checkpoint=1\ngeneration=1\nparticipants=0,1\n");
    marker(root, "leg2", 4, "generation=1\nparticipants=0\n");

    bput(root, "5/old.snap", "older layout");
    marker(root, "old", 1, "generation=7\nparticipants=5\n");

    bput(root, "_state/cut/v1/0/x", "cut own");
    marker(root, "cut", 1, "checkpoint=1\ngeneration=1\n");
    marker(root, "cutnone", 1, "checkpoint=1\ngeneration=1\n");
    marker(root, "bad", 1, "checkpoint=1\nthis line has no equals sign\n");
    marker(root, "foreign", 1, "generation=2\nparticipants=0\nstate=_state/ns\n");
    marker(root, "remote", 1,
           "generation=1\nparticipants=0\nstate=s3://bucket/ckpt/_state/remote\n");

    g_autofree char *extroot = g_build_filename(ext, "_state/ext", NULL);
    bput(extroot, "v1/0/e.snap", "external");
    g_autofree char *extm = g_strdup_printf("generation=1\nparticipants=0\nstate=%s\n", extroot);
    marker(root, "ext", 1, extm);

    bput(root, "_state/mix/v1/0/a", "own a");
    marker(root, "mix", 1, "generation=1\nparticipants=0\n");
}

static int fx_setup(void **state)
{
    Fx *f = g_new0(Fx, 1);
    f->m = mount_new();
    f->ext = g_build_filename(f->m->base, "ext", NULL);
    write_fixture(f->m->backing, f->ext);
    g_autofree char *opt = g_strdup_printf("rescan=1,external_root=%s", f->ext);
    const char *args[] = {"-o", opt, NULL};
    if (mount_start(f->m, args) != 0) {
        mount_free(f->m);
        g_free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    Fx *f = *state;
    int rc = mount_stop(f->m);
    if (rc != 0)
        mount_dump_log(f->m);
    mount_free(f->m);
    g_free(f->ext);
    g_free(f);
    return rc;
}

/* ---- helpers ---- */

static gint cmp_name(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of a directory ("." and ".." left out); NULL if it cannot be read. */
static GPtrArray *names_of(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return NULL;
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    const char *n;
    while ((n = g_dir_read_name(d)))
        g_ptr_array_add(out, g_strdup(n));
    g_dir_close(d);
    g_ptr_array_sort(out, cmp_name);
    return out;
}

static char *joined(GPtrArray *a)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; a && i < a->len; i++)
        g_string_append_printf(s, "%s%s", i ? " " : "", (char *)a->pdata[i]);
    return g_string_free(s, FALSE);
}

static void assert_names(const char *dir, const char *expected)
{
    g_autoptr(GPtrArray) a = names_of(dir);
    if (!a)
        fail_msg("%s: cannot list (%s)", dir, g_strerror(errno));
    g_autofree char *got = joined(a);
    if (strcmp(got, expected) != 0)
        fail_msg("%s: got [%s], expected [%s]", dir, got, expected);
}

static char *xattr(const char *path, const char *name)
{
    char buf[4096];
    ssize_t l = getxattr(path, name, buf, sizeof buf - 1);
    if (l < 0)
        return NULL;
    buf[l] = '\0';
    return g_strdup(buf);
}

static void assert_xattr(const char *path, const char *name, const char *expected)
{
    g_autofree char *v = xattr(path, name);
    if (g_strcmp0(v, expected) != 0)
        fail_msg("%s: %s = %s, expected %s", path, name, v ? v : "(none)",
                 expected ? expected : "(none)");
}

static void assert_fxattr(int fd, const char *name, const char *expected)
{
    char buf[4096];
    ssize_t l = fgetxattr(fd, name, buf, sizeof buf - 1);
    if (l < 0) {
        fail_msg("fd %d: %s: %s, expected %s", fd, name, g_strerror(errno), expected);
        return;
    }
    buf[l] = '\0';
    if (strcmp(buf, expected) != 0)
        fail_msg("fd %d: %s = %s, expected %s", fd, name, buf, expected);
}

static const char *ckptctl(void)
{
    const char *p = g_getenv("CKPTCTL_BIN");
    assert_non_null(p);
    return p;
}

#define assert_no_error_msg(err, what)                                                             \
    do {                                                                                           \
        if (err)                                                                                   \
            fail_msg("%s: %s", what, (err)->message);                                              \
    } while (0)

/* `ckptctl resolve --json [opts] <backing>/_jobs/<job> -c n`, parsed. */
static JsonObject *resolve_json(Fx *f, const char *job, int n, JsonNode **keep)
{
    g_autofree char *loc = g_strdup_printf("%s/_jobs/%s", f->m->backing, job);
    g_autofree char *cn = g_strdup_printf("%d", n);
    const char *argv[] = {ckptctl(), "resolve", "--json", "--external-root", f->ext, loc,
                          "-c",      cn,        NULL};
    g_autofree char *out = NULL;
    int st = run_cmd(argv, &out);
    assert_true(st >= 0);
    g_autoptr(GError) err = NULL;
    *keep = json_from_string(out, &err);
    assert_no_error_msg(err, out);
    return json_node_get_object(*keep);
}

/* ---- tests ---- */

static void test_top(void **state)
{
    Fx *f = *state;
    g_autofree char *v = V(f->m, "");
    assert_names(v, ".collisions .control .metrics bad cut cutnone ext foreign leg leg2 mix ns old "
                    "remote t");
    g_autofree char *j = V(f->m, "ns");
    assert_names(j, "checkpoints latest restore state");
    g_autofree char *b = V(f->m, "bad");
    assert_names(b, "checkpoints restore state"); /* nothing restorable: no latest */
    g_autofree char *lb = V(f->m, "bad/latest");
    struct stat st;
    assert_int_equal(lstat(lb, &st), -1);
    assert_int_equal(errno, ENOENT);
    g_autofree char *l = V(f->m, "ns/latest");
    char buf[64] = {0};
    assert_true(readlink(l, buf, sizeof buf - 1) > 0);
    assert_string_equal(buf, "checkpoints/2");
    assert_int_equal(lstat(l, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

/* Every checkpoint of every job against ckptctl resolve --json. */
static void test_checkpoints_match_resolve(void **state)
{
    Fx *f = *state;
    const struct {
        const char *job;
        int n;
    } cps[] = {{"ns", 1},      {"ns", 2},  {"leg", 1},     {"leg2", 4},   {"old", 1}, {"cut", 1},
               {"cutnone", 1}, {"bad", 1}, {"foreign", 1}, {"remote", 1}, {"ext", 1}, {"mix", 1}};
    for (size_t i = 0; i < G_N_ELEMENTS(cps); i++) {
        g_autoptr(JsonNode) keep = NULL;
        JsonObject *o = resolve_json(f, cps[i].job, cps[i].n, &keep);
        g_autofree char *rel = g_strdup_printf("%s/checkpoints/%d", cps[i].job, cps[i].n);
        g_autofree char *cdir = V(f->m, rel);
        const char *error = json_object_get_null_member(o, "error")
                                ? NULL
                                : json_object_get_string_member(o, "error");
        JsonArray *reads = json_object_get_array_member(o, "reads");
        const char *root =
            json_object_get_null_member(o, "root") ? "" : json_object_get_string_member(o, "root");
        bool remote = g_str_has_prefix(root, "s3://");
        if (error) {
            /* not restorable: only ERROR, with the reason */
            assert_names(cdir, "ERROR");
            g_autofree char *ep = g_build_filename(cdir, "ERROR", NULL);
            g_autofree char *txt = get_file(ep);
            g_autofree char *want = g_strconcat(error, "\n", NULL);
            assert_string_equal(txt, want);
            continue;
        }
        if (remote) {
            assert_names(cdir, ""); /* remote roots are never followed */
            continue;
        }
        /* one directory per subtask read, holding what the read holds */
        g_autoptr(GPtrArray) subs = g_ptr_array_new_with_free_func(g_free);
        for (guint k = 0; k < json_array_get_length(reads); k++) {
            const char *rd = json_array_get_string_element(reads, k);
            g_autofree char *s = g_path_get_basename(rd);
            g_autofree char *vsub = g_build_filename(cdir, s, NULL);
            g_autoptr(GPtrArray) want = names_of(rd);
            assert_non_null(want);
            g_autofree char *ws = joined(want);
            assert_names(vsub, ws);
            assert_xattr(vsub, "user.ckptfs.backing",
                         g_str_has_prefix(rd, f->m->backing) ? rd + strlen(f->m->backing) + 1 : rd);
            g_ptr_array_add(subs, g_steal_pointer(&s));
        }
        g_ptr_array_sort(subs, cmp_name);
        g_autofree char *ss = joined(subs);
        assert_names(cdir, ss);
    }
}

static void test_state_merge(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    g_autofree char *a = V(m, "ns/state");
    assert_names(a, "v1 v2");
    g_autofree char *a2 = V(m, "ns/state/v2/1");
    assert_names(a2, "f.snap loop sub");
    /* legacy: only the generations and subtasks its own markers read */
    g_autofree char *b = V(m, "leg/state");
    assert_names(b, "v1");
    g_autofree char *b1 = V(m, "leg/state/v1");
    assert_names(b1, "0 1");
    /* every entry says where it comes from: the legacy v1 itself, and the
     * state of a job without its own root is the legacy area's */
    assert_xattr(b1, "user.ckptfs.source", "legacy");
    assert_xattr(b1, "user.ckptfs.backing", "v1");
    assert_xattr(b1, "user.ckptfs.generation", "1");
    assert_xattr(b, "user.ckptfs.source", "legacy");
    assert_xattr(b, "user.ckptfs.backing", ".");
    g_autofree char *c = V(m, "leg2/state/v1");
    assert_names(c, "0"); /* leg2's marker reads v1/0 only: never leg's v1/1 */
    g_autofree char *c0 = V(m, "leg2/state/v1/0");
    assert_names(c0, "a s0");
    /* the older layout: <dir>/5 shown at v7/5 */
    g_autofree char *d = V(m, "old/state/v7/5");
    assert_names(d, "old.snap");
    g_autofree char *d7 = V(m, "old/state/v7");
    assert_xattr(d7, "user.ckptfs.backing", "."); /* where its subtasks are */
    /* a foreign root is not the job's state; a remote one is not followed */
    g_autofree char *e = V(m, "foreign/state");
    assert_names(e, "");
    g_autofree char *r = V(m, "remote/state");
    assert_names(r, "");
    /* own shadows legacy: mix's own v1/0/a, legacy v1/0/s0 beneath it */
    g_autofree char *x = V(m, "mix/state/v1/0");
    assert_names(x, "a s0");
    g_autofree char *xa = V(m, "mix/state/v1/0/a");
    g_autofree char *txt = get_file(xa);
    assert_string_equal(txt, "own a");
    assert_xattr(xa, "user.ckptfs.source", "own");
    assert_xattr(xa, "user.ckptfs.backing", "_state/mix/v1/0/a");
    g_autofree char *xs = V(m, "mix/state/v1/0/s0");
    assert_xattr(xs, "user.ckptfs.source", "legacy");
    assert_xattr(xs, "user.ckptfs.backing", "v1/0/s0");
    assert_xattr(xs, "user.ckptfs.generation", "1");
    /* cut-short with an own root: its own tree */
    g_autofree char *cu = V(m, "cut/state/v1/0");
    assert_names(cu, "x");
    g_autofree char *cun = V(m, "cutnone/state");
    assert_names(cun, "");
}

static void test_xattrs(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    g_autofree char *p = V(m, "ns/state/v2/0/f.snap");
    assert_xattr(p, "user.ckptfs.source", "own");
    assert_xattr(p, "user.ckptfs.backing", "_state/ns/v2/0/f.snap");
    assert_xattr(p, "user.ckptfs.generation", "2");
    char names[512];
    ssize_t l = listxattr(p, names, sizeof names);
    assert_true(l > 0);
    g_autofree char *all = g_strdup("");
    for (char *q = names; q < names + l; q += strlen(q) + 1) {
        char *t = g_strconcat(all, q, ";", NULL);
        g_free(all);
        all = t;
    }
    assert_string_equal(all, "user.ckptfs.source;user.ckptfs.backing;user.ckptfs.generation;");
    /* no security labels below the views (ls -l then stops asking), where
     * no SELinux answers them; no ACLs either, the same way, on a mount
     * where the kernel does not enforce them (test_control: where it
     * does).  A name no security module owns reaches the daemon either
     * way. */
    bool selinux = g_file_test("/sys/fs/selinux/enforce", G_FILE_TEST_EXISTS);
    char v[64];
    assert_int_equal(lgetxattr(p, "security.ckptfs_test", v, sizeof v), -1);
    assert_int_equal(errno, selinux ? ENODATA : EOPNOTSUPP);
    assert_int_equal(lgetxattr(p, "system.posix_acl_access", v, sizeof v), -1);
    assert_int_equal(errno, EOPNOTSUPP);
    g_autofree char *vroot = g_build_filename(m->mnt, "_views", NULL);
    assert_int_equal(lgetxattr(vroot, "security.ckptfs_test", v, sizeof v), -1);
    assert_int_equal(errno, ENODATA);
    g_autofree char *e = V(m, "ext/checkpoints/1/0/e.snap");
    assert_xattr(e, "user.ckptfs.source", "external");
    g_autofree char *eb = g_build_filename(f->ext, "_state/ext/v1/0/e.snap", NULL);
    assert_xattr(e, "user.ckptfs.backing", eb);
    g_autofree char *et = get_file(e);
    assert_string_equal(et, "external");
    g_autofree char *cp = V(m, "ns/checkpoints/2");
    assert_xattr(cp, "user.ckptfs.backing", "_jobs/ns/chk-2");
    assert_xattr(cp, "user.ckptfs.generation", "2");
    /* getfattr -d shows them */
    const char *argv[] = {"getfattr", "-d", p, NULL};
    g_autofree char *out = NULL;
    int st = run_cmd(argv, &out);
    assert_true(st == 0);
    assert_non_null(strstr(out, "user.ckptfs.source=\"own\""));
    assert_non_null(strstr(out, "user.ckptfs.backing=\"_state/ns/v2/0/f.snap\""));
    assert_non_null(strstr(out, "user.ckptfs.generation=\"2\""));
}

static void test_restore_text(void **state)
{
    Fx *f = *state;
    g_autofree char *p = V(f->m, "leg/restore");
    g_autofree char *t = get_file(p);
    assert_non_null(strstr(t, "class: legacy"));
    assert_non_null(strstr(t, "shared_with: leg2, mix"));
    g_autofree char *p2 = V(f->m, "leg2/restore");
    g_autofree char *t2 = get_file(p2);
    assert_non_null(strstr(t2, "leg"));
    g_autofree char *r = V(f->m, "remote/restore");
    g_autofree char *rt = get_file(r);
    assert_non_null(strstr(rt, "s3://bucket/ckpt/_state/remote"));
    assert_non_null(strstr(rt, "(remote)"));
    g_autofree char *fr = V(f->m, "foreign/restore");
    g_autofree char *frt = get_file(fr);
    assert_non_null(strstr(frt, "foreign_root: ns"));
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, (off_t)strlen(t));
}

static void test_reads_and_inodes(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    g_autofree char *v = V(m, "ns/state/v2/0/f.snap");
    g_autofree char *c = V(m, "ns/checkpoints/2/0/f.snap");
    g_autofree char *b = B(m, "_state/ns/v2/0/f.snap");
    g_autofree char *tv = get_file(v);
    g_autofree char *tc = get_file(c);
    g_autofree char *tb = get_file(b);
    assert_string_equal(tv, tb);
    assert_string_equal(tc, tb);
    struct stat sv, sc, sb;
    assert_int_equal(stat(v, &sv), 0);
    assert_int_equal(stat(c, &sc), 0);
    assert_int_equal(stat(b, &sb), 0);
    assert_int_equal(sv.st_ino, sb.st_ino); /* the backing file's number */
    assert_int_equal(sc.st_ino, sb.st_ino);
    assert_int_equal(sv.st_size, sb.st_size);
    assert_int_equal(sv.st_mode, sb.st_mode);
    /* distinct directories, distinct numbers; stable across lookups */
    g_autofree char *d1 = V(m, "ns/state/v2/0");
    g_autofree char *d2 = V(m, "ns/checkpoints/2/0");
    struct stat s1, s2, s1b;
    assert_int_equal(stat(d1, &s1), 0);
    assert_int_equal(stat(d2, &s2), 0);
    assert_int_not_equal(s1.st_ino, s2.st_ino);
    kernel_drop_caches();
    assert_int_equal(stat(d1, &s1b), 0);
    assert_int_equal(s1.st_ino, s1b.st_ino);
    /* symlinks are shown as themselves, never followed */
    g_autofree char *l = V(m, "ns/state/v2/0/escape");
    char buf[64] = {0};
    assert_int_equal(readlink(l, buf, sizeof buf - 1), 4);
    assert_string_equal(buf, "/etc");
    struct stat sl;
    assert_int_equal(lstat(l, &sl), 0);
    assert_true(S_ISLNK(sl.st_mode));
    g_autofree char *lp = V(m, "ns/state/v2/1/loop/x");
    assert_int_equal(stat(lp, &sl), -1);
    assert_int_equal(errno, ELOOP);
}

static void test_erofs(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    g_autofree char *file = V(m, "ns/state/v2/0/f.snap");
    g_autofree char *dir = V(m, "ns/state/v2/0");
    g_autofree char *nf = V(m, "ns/state/v2/0/new");
    g_autofree char *jd = V(m, "ns/newdir");
    g_autofree char *top = V(m, "newjob");
    g_autofree char *rs = V(m, "ns/restore");
    g_autofree char *lt = V(m, "ns/latest");
    errno = 0;
    assert_int_equal(open(nf, O_CREAT | O_WRONLY, 0644), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(open(file, O_WRONLY), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(open(file, O_RDONLY | O_TRUNC), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(open(rs, O_RDWR), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(truncate(file, 0), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(mkdir(jd, 0755), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(mkdir(top, 0755), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(mknod(nf, S_IFIFO | 0644, 0), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(unlink(file), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(unlink(lt), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(rmdir(dir), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(rename(file, nf), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(link(file, nf), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(symlink("x", nf), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(chmod(file, 0600), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(chown(file, 1, 1), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(utimensat(AT_FDCWD, file, NULL, 0), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(setxattr(file, "user.x", "1", 1, 0), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(removexattr(file, "user.ckptfs.source"), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(setxattr(dir, "user.ckptfs.source", "x", 1, 0), -1);
    assert_int_equal(errno, EROFS);
    /* a rename out of the views into the job's namespace is refused as well */
    g_autofree char *out = g_build_filename(m->mnt, "_state/t/stolen", NULL);
    assert_int_equal(rename(file, out), -1);
    /* nothing changed in the backing dir */
    g_autofree char *b = B(m, "_state/ns/v2/0/f.snap");
    g_autofree char *t = get_file(b);
    assert_string_equal(t, "ns v2 0");
    g_autofree char *bn = B(m, "_state/ns/v2/0/new");
    assert_false(g_file_test(bn, G_FILE_TEST_EXISTS));
}

static int sh(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static int sh(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *cmd = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    int st = system(cmd);
    if (st != 0)
        print_message("command failed (%d): %s\n", st, cmd);
    return st;
}

static void test_tools(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    g_autofree char *v = V(m, "");
    g_autofree char *out = g_build_filename(m->base, "tools", NULL);
    assert_int_equal(g_mkdir_with_parents(out, 0755), 0);
    /* find terminates (symlinks, loops, latest) and sees every file */
    assert_int_equal(sh("find '%s' > '%s/find.txt'", v, out), 0);
    g_autofree char *fl = g_build_filename(out, "find.txt", NULL);
    g_autofree char *ft = get_file(fl);
    const char *want[] = {
        "/ns/state/v2/1/sub/deep.bin", "/ns/checkpoints/1/1/f.snap", "/ns/latest",
        "/leg/state/v1/1/s1",          "/old/state/v7/5/old.snap",   "/bad/checkpoints/1/ERROR",
        "/ext/state/v1/0/e.snap"};
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
        g_autofree char *line = g_strconcat(v, want[i], "\n", NULL);
        if (!strstr(ft, line))
            fail_msg("find does not list %s", want[i]);
    }
    assert_null(strstr(ft, "/v3/"));
    assert_null(strstr(ft, "/escape/"));
    /* du */
    assert_int_equal(sh("du -s '%s' > /dev/null", v), 0);
    /* tar (the counters change while read: left out); .collisions holds a
     * record and keeps its mtime while nothing is recorded, or tar fails with
     * "file changed as we read it" */
    g_autofree char *refused = g_build_filename(m->mnt, "v1", "tar-refused", NULL);
    assert_int_equal(creat(refused, 0644), -1);
    assert_int_equal(errno, EACCES);
    assert_int_equal(sh("tar -C '%s' --exclude=.metrics -cf '%s/v.tar' .", v, out), 0);
    assert_int_equal(sh("tar -xOf '%s/v.tar' ./.collisions | grep -q tar-refused", out), 0);
    assert_int_equal(sh("tar -tf '%s/v.tar' | grep -qx './ns/state/v2/0/f.snap'", out), 0);
    assert_int_equal(sh("tar -tvf '%s/v.tar' | grep -q './ns/latest -> checkpoints/2'", out), 0);
    /* rsync -a: files with their bytes, latest as a link (the counters
     * change between rsync's stat and its read: left out, as for tar) */
    assert_int_equal(sh("rsync -a --exclude=.metrics '%s/' '%s/copy/'", v, out), 0);
    g_autofree char *cf = g_build_filename(out, "copy/ns/checkpoints/2/1/f.snap", NULL);
    g_autofree char *ct = get_file(cf);
    assert_string_equal(ct, "ns v2 1");
    g_autofree char *cl = g_build_filename(out, "copy/ns/latest", NULL);
    char buf[64] = {0};
    assert_true(readlink(cl, buf, sizeof buf - 1) > 0);
    assert_string_equal(buf, "checkpoints/2");
    g_autofree char *ce = g_build_filename(out, "copy/bad/checkpoints/1/ERROR", NULL);
    assert_true(g_file_test(ce, G_FILE_TEST_IS_REGULAR));
}

static void test_metrics(void **state)
{
    Fx *f = *state;
    assert_int_equal(mount_metric(f->m, "ckptfs_catalog_jobs"), 12);
    assert_int_equal(mount_metric(f->m, "ckptfs_catalog_markers"), 12);
    assert_true(mount_metric(f->m, "ckptfs_views_served_total") > 0);
    for (int i = 0; i < 50 && mount_metric(f->m, "ckptfs_rescans_total") < 1; i++)
        g_usleep(100000);
    assert_true(mount_metric(f->m, "ckptfs_rescans_total") >= 1);
}

/* ---- live: markers written through the mount and behind it ---- */

static char *latest_of(Mount *m, const char *job)
{
    g_autofree char *rel = g_strconcat(job, "/latest", NULL);
    g_autofree char *l = V(m, rel);
    char buf[64] = {0};
    if (readlink(l, buf, sizeof buf - 1) < 0)
        return g_strdup("");
    return g_strdup(buf);
}

static void test_live(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    g_autofree char *l0 = latest_of(m, "ns");
    assert_string_equal(l0, "checkpoints/2");
    /* held open across the new checkpoint below: their provenance is asked
     * of the job's next snapshot, with no lookup from the kernel between */
    g_autofree char *pf = V(m, "ns/state/v2/0/f.snap");
    g_autofree char *pd = V(m, "ns/state/v2/0");
    int ffd = open(pf, O_RDONLY), dfd = open(pd, O_RDONLY | O_DIRECTORY);
    assert_true(ffd >= 0 && dfd >= 0);
    /* write + rename into chk-3/COMPLETED through the mount */
    g_autofree char *d3 = g_build_filename(m->mnt, "_jobs/ns/chk-3", NULL);
    assert_int_equal(mkdir(d3, 0755), 0);
    g_autofree char *tmp = g_build_filename(d3, "COMPLETED.tmp", NULL);
    g_autofree char *fin = g_build_filename(d3, "COMPLETED", NULL);
    put_file(tmp, "checkpoint=3\ngeneration=2\nparticipants=0,1\nstate=_state/ns\n");
    assert_int_equal(rename(tmp, fin), 0);
    g_autofree char *l1 = latest_of(m, "ns");
    assert_string_equal(l1, "checkpoints/3");
    assert_fxattr(ffd, "user.ckptfs.backing", "_state/ns/v2/0/f.snap");
    assert_fxattr(ffd, "user.ckptfs.source", "own");
    assert_fxattr(ffd, "user.ckptfs.generation", "2");
    assert_fxattr(dfd, "user.ckptfs.backing", "_state/ns/v2/0");
    assert_int_equal(close(ffd), 0);
    assert_int_equal(close(dfd), 0);
    g_autofree char *c3 = V(m, "ns/checkpoints/3");
    assert_names(c3, "0 1");
    /* a COMPLETED created and written in place */
    g_autofree char *d4 = g_build_filename(m->mnt, "_jobs/ns/chk-4", NULL);
    assert_int_equal(mkdir(d4, 0755), 0);
    g_autofree char *m4 = g_build_filename(d4, "COMPLETED", NULL);
    int fd = open(m4, O_CREAT | O_WRONLY | O_EXCL, 0644);
    assert_true(fd >= 0);
    const char *txt = "checkpoint=4\ngeneration=2\nparticipants=0\nstate=_state/ns\n";
    assert_int_equal(write(fd, txt, strlen(txt)), (ssize_t)strlen(txt));
    assert_int_equal(close(fd), 0);
    g_autofree char *l2 = latest_of(m, "ns");
    assert_string_equal(l2, "checkpoints/4");
    g_autofree char *rs = V(m, "ns/restore");
    g_autofree char *rt = get_file(rs);
    assert_non_null(strstr(rt, "checkpoint: 4"));
    /* a new job through the mount */
    g_autofree char *nj = g_build_filename(m->mnt, "_jobs/fresh", NULL);
    assert_int_equal(mkdir(nj, 0755), 0);
    g_autofree char *vj = V(m, "fresh");
    assert_true(g_file_test(vj, G_FILE_TEST_IS_DIR));

    /* behind the mount's back: within rescan=1 (poll up to 5 s) */
    g_autofree char *b5 = B(m, "_jobs/ns/chk-5");
    assert_int_equal(mkdir(b5, 0755), 0);
    g_autofree char *b5m = B(m, "_jobs/ns/chk-5/COMPLETED");
    put_file(b5m, "checkpoint=5\ngeneration=2\nparticipants=1\nstate=_state/ns\n");
    /* the marker is written in place: inotify may show it half written (no
     * participants= yet: cut-short, every subtask) before the rest lands,
     * and the next event or rescan settles it */
    g_autofree char *c5 = V(m, "ns/checkpoints/5");
    bool moved = false;
    for (int i = 0; i < 50 && !moved; i++) {
        g_autofree char *l = latest_of(m, "ns");
        moved = strcmp(l, "checkpoints/5") == 0;
        if (moved) {
            g_autoptr(GPtrArray) n5 = names_of(c5);
            g_autofree char *j5 = joined(n5);
            moved = strcmp(j5, "1") == 0;
        }
        if (!moved)
            g_usleep(100000);
    }
    assert_true(moved);
    assert_names(c5, "1");
    /* and a marker removed behind its back: latest falls back */
    g_autofree char *b5d = B(m, "_jobs/ns/chk-5");
    assert_int_equal(unlink(b5m), 0);
    assert_int_equal(rmdir(b5d), 0);
    moved = false;
    for (int i = 0; i < 50 && !moved; i++) {
        g_autofree char *l = latest_of(m, "ns");
        moved = strcmp(l, "checkpoints/4") == 0;
        if (!moved)
            g_usleep(100000);
    }
    assert_true(moved);
    /* a state file added and removed behind the mount: the (kernel-cached)
     * listing follows within rescan= */
    g_autofree char *vdir = V(m, "ns/state/v2/0");
    g_autofree char *before = NULL;
    {
        g_autoptr(GPtrArray) a = names_of(vdir);
        before = joined(a);
    }
    g_autofree char *nb = B(m, "_state/ns/v2/0/added.snap");
    put_file(nb, "added");
    bool seen = false;
    for (int i = 0; i < 50 && !seen; i++) {
        g_autoptr(GPtrArray) a = names_of(vdir);
        g_autofree char *now = joined(a);
        seen = strstr(now, "added.snap") != NULL;
        if (!seen)
            g_usleep(100000);
    }
    assert_true(seen);
    assert_int_equal(unlink(nb), 0);
    bool back = false;
    for (int i = 0; i < 50 && !back; i++) {
        g_autoptr(GPtrArray) a = names_of(vdir);
        g_autofree char *now = joined(a);
        back = strcmp(now, before) == 0;
        if (!back)
            g_usleep(100000);
    }
    assert_true(back);
    /* a job vanishing behind the mount's back */
    g_autofree char *bf = B(m, "_jobs/fresh");
    assert_int_equal(rmdir(bf), 0);
    bool gone = false;
    for (int i = 0; i < 50 && !gone; i++) {
        gone = !g_file_test(vj, G_FILE_TEST_EXISTS);
        if (!gone)
            g_usleep(100000);
    }
    assert_true(gone);
}

/* A backing file replaced behind the mount (its inode number is likely
 * recycled at the same path) reads as the new file. */
static void test_replaced_file(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    g_autofree char *b = B(m, "_state/ns/v2/1/r.snap");
    g_autofree char *v = V(m, "ns/state/v2/1/r.snap");
    for (int i = 0; i < 8; i++) {
        g_autofree char *txt = g_strdup_printf("generation %d", i);
        unlink(b);
        put_file(b, txt);
        /* the kernel's entry still names the old node: its open fails with
         * ESTALE, the kernel looks the name up again and must get the new one */
        g_autofree char *got = get_file(v);
        assert_string_equal(got, txt);
    }
    unlink(b);
}

/* ---- load: walks of the views while markers come and go ---- */

typedef struct {
    Mount *m;
    gint stop;
    gint walks;
} Load;

static void walk_tree(const char *dir, int depth)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return; /* a checkpoint may vanish mid-walk */
    const char *n;
    while ((n = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(dir, n, NULL);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) && depth < 12) {
            walk_tree(p, depth + 1);
        } else if (S_ISREG(st.st_mode) && strcmp(n, ".metrics") != 0) {
            char buf[256];
            int fd = open(p, O_RDONLY);
            if (fd >= 0) {
                while (read(fd, buf, sizeof buf) > 0)
                    ;
                close(fd);
            }
        } else if (S_ISLNK(st.st_mode)) {
            char buf[256];
            (void)!readlink(p, buf, sizeof buf);
        }
        char x[256];
        (void)getxattr(p, "user.ckptfs.backing", x, sizeof x);
    }
    g_dir_close(d);
}

static gpointer walker(gpointer p)
{
    Load *l = p;
    g_autofree char *v = V(l->m, "");
    while (!g_atomic_int_get(&l->stop)) {
        walk_tree(v, 0);
        g_atomic_int_inc(&l->walks);
    }
    return NULL;
}

static void test_load(void **state)
{
    Fx *f = *state;
    Mount *m = f->m;
    Load l = {m, 0, 0};
    GThread *th[3];
    for (int i = 0; i < 3; i++)
        th[i] = g_thread_new("walker", walker, &l);
    /* markers through the mount (ns) and behind it (leg), with removals */
    for (int n = 10; n < 40; n++) {
        g_autofree char *rel = g_strdup_printf("_jobs/ns/chk-%d", n);
        g_autofree char *d = g_build_filename(m->mnt, rel, NULL);
        assert_int_equal(mkdir(d, 0755), 0);
        g_autofree char *tmp = g_build_filename(d, "COMPLETED.tmp", NULL);
        g_autofree char *fin = g_build_filename(d, "COMPLETED", NULL);
        g_autofree char *txt = g_strdup_printf(
            "checkpoint=%d\ngeneration=2\nparticipants=%d\nstate=_state/ns\n", n, n % 2);
        put_file(tmp, txt);
        assert_int_equal(rename(tmp, fin), 0);
        g_autofree char *l1 = latest_of(m, "ns");
        g_autofree char *want = g_strdup_printf("checkpoints/%d", n);
        assert_string_equal(l1, want);
        g_autofree char *brel = g_strdup_printf("_jobs/leg/chk-%d/COMPLETED", n);
        bput(m->backing, brel, n % 3 ? "generation=1\nparticipants=1\n" : "garbage\n");
        if (n % 5 == 0 && n > 10) {
            g_autofree char *old = g_strdup_printf("_jobs/ns/chk-%d/COMPLETED", n - 1);
            g_autofree char *om = g_build_filename(m->mnt, old, NULL);
            assert_int_equal(unlink(om), 0);
        }
        g_usleep(20000);
    }
    while (g_atomic_int_get(&l.walks) < 3)
        g_usleep(10000);
    g_atomic_int_set(&l.stop, 1);
    for (int i = 0; i < 3; i++)
        g_thread_join(th[i]);
    /* leg's last restorable marker is 38 (39 % 3 == 0 is garbage) */
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) {
        g_autofree char *ll = latest_of(m, "leg");
        ok = strcmp(ll, "checkpoints/38") == 0;
        if (!ok)
            g_usleep(100000);
    }
    assert_true(ok);
    /* latest is 38 before 39 is seen too: 39 shows within rescan= */
    g_autofree char *e = V(m, "leg/checkpoints/39/ERROR");
    for (int i = 0; i < 50 && !g_file_test(e, G_FILE_TEST_IS_REGULAR); i++)
        g_usleep(100000);
    assert_true(g_file_test(e, G_FILE_TEST_IS_REGULAR));
    g_autofree char *c = V(m, "ns/checkpoints/39/1");
    assert_names(c, "f.snap loop sub");
}

/* A copied checkpoint directory restores from the copy. */
static void test_copied_dir(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *ext = g_build_filename(m->base, "ext", NULL);
    g_autofree char *orig = g_build_filename(m->base, "orig", NULL);
    write_fixture(orig, ext);
    g_autofree char *cmd =
        g_strdup_printf("cp -a '%s/_jobs' '%s/_state' '%s/'", orig, orig, m->backing);
    assert_int_equal(system(cmd), 0);
    if (mount_start(m, NULL) != 0) {
        mount_free(m);
        fail_msg("mount failed");
    }
    g_autofree char *v = V(m, "ns/checkpoints/2/0/f.snap");
    g_autofree char *b = B(m, "_state/ns/v2/0/f.snap");
    g_autofree char *o = g_build_filename(orig, "_state/ns/v2/0/f.snap", NULL);
    struct stat sv, sb, so;
    assert_int_equal(stat(v, &sv), 0);
    assert_int_equal(stat(b, &sb), 0);
    assert_int_equal(stat(o, &so), 0);
    assert_int_equal(sv.st_ino, sb.st_ino);
    assert_int_not_equal(sv.st_ino, so.st_ino);
    assert_xattr(v, "user.ckptfs.backing", "_state/ns/v2/0/f.snap");
    /* the external root is not allowed on this mount: remote, never followed */
    g_autofree char *e = V(m, "ext/checkpoints/1");
    assert_names(e, "");
    g_autofree char *es = V(m, "ext/state");
    assert_names(es, "");
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* config=FILE: a per-job legacy_backend under the allowed external_root. */
static void test_config_legacy_backend(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *extb = g_build_filename(m->base, "extb", NULL);
    g_autofree char *lbk = g_build_filename(extb, "lbk", NULL);
    bput(lbk, "v1/0/f", "from the job's own legacy backend");
    bput(m->backing, "v1/0/f", "the shared legacy area");
    marker(m->backing, "lb", 1, "generation=1\nparticipants=0\n");
    marker(m->backing, "lc", 1, "generation=1\nparticipants=0\n");
    g_autofree char *cfg = g_build_filename(m->base, "ckptfs.conf", NULL);
    g_autofree char *cfgtext =
        g_strdup_printf("[ckptfs]\nexternal_root=%s\n\n[job:lb]\nlegacy_backend=%s\n", extb, lbk);
    put_file(cfg, cfgtext);
    g_autofree char *opt = g_strdup_printf("config=%s", cfg);
    const char *args[] = {"-o", opt, NULL};
    if (mount_start(m, args) != 0) {
        mount_free(m);
        fail_msg("mount failed");
    }
    g_autofree char *v = V(m, "lb/state/v1/0/f");
    g_autofree char *t = get_file(v);
    assert_string_equal(t, "from the job's own legacy backend");
    assert_xattr(v, "user.ckptfs.source", "external");
    g_autofree char *want = g_build_filename(lbk, "v1/0/f", NULL);
    assert_xattr(v, "user.ckptfs.backing", want);
    g_autofree char *vc = V(m, "lc/checkpoints/1/0/f");
    g_autofree char *tc = get_file(vc);
    assert_string_equal(tc, "the shared legacy area");
    assert_xattr(vc, "user.ckptfs.source", "legacy");
    /* the same answer from ckptctl with the same config */
    g_autofree char *loc = g_strdup_printf("%s/_jobs/lb", m->backing);
    const char *argv[] = {ckptctl(), "resolve", "--json", "--config", cfg, loc, NULL};
    g_autofree char *out = NULL;
    assert_int_equal(run_cmd(argv, &out), 0);
    g_autofree char *rd = g_build_filename(lbk, "v1/0", NULL);
    g_autofree char *quoted = g_strdup_printf("\"%s\"", rd);
    assert_non_null(strstr(out, quoted));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* ckptctl ARGS...; its exit code, stdout in *out when out is not NULL. */
static int ckptctl_cmd(char **out, const char *first, ...)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)ckptctl());
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        g_ptr_array_add(argv, (gpointer)a);
    va_end(ap);
    g_ptr_array_add(argv, NULL);
    int status = -1;
    assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                             NULL, out, NULL, &status, NULL));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *xattr_of(const char *path, const char *name)
{
    char buf[256];
    ssize_t n = getxattr(path, name, buf, sizeof buf - 1);
    if (n < 0)
        return NULL;
    return g_strndup(buf, (gsize)n);
}

/* Policy, legacy and rescan change on a live mount through the extended
 * attributes of _views/.control (and ckptctl set); getfattr shows them;
 * only root or the daemon's user may change them; each change is logged and
 * counted; the next request obeys. */
static void test_control(void **state)
{
    (void)state;
    Mount *m = mount_new();
    const char *args[] = {"-o", "allow_other", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *control = V(m, ".control");
    g_autofree char *policy = xattr_of(control, "user.ckptfs.policy");
    assert_string_equal(policy, "enforce");
    char names[256];
    ssize_t nl = listxattr(control, names, sizeof names);
    assert_true(nl > 0);
    assert_non_null(memmem(names, (size_t)nl, "user.ckptfs.legacy", 19));
    assert_non_null(memmem(names, (size_t)nl, "user.ckptfs.rescan", 19));
    g_autofree char *text = get_file(control);
    assert_string_equal(text, "policy=enforce\nlegacy=ro\nrescan=2\ntag_env=\n");
    g_autofree char *views = V(m, "");
    assert_names(views, ".collisions .control .metrics t");
    /* allow_other: the kernel enforces ACLs, so a views entry answers it
     * has none (not "not supported", a refusal of every access then):
     * another user reads one, then root finds no ACL on it */
    g_autofree char *job = V(m, "t");
    int jfd = open(job, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(jfd >= 0);
    pid_t reader = fork();
    assert_true(reader >= 0);
    if (reader == 0) {
        DIR *d = NULL;
        if (setgroups(0, NULL) == 0 && setresgid(65534, 65534, 65534) == 0 &&
            setresuid(65534, 65534, 65534) == 0 && fchdir(jfd) == 0)
            d = opendir(".");
        _exit(d ? 0 : 1);
    }
    int wst = 0;
    assert_int_equal(waitpid(reader, &wst, 0), reader);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    close(jfd);
    char acl[64];
    assert_int_equal(lgetxattr(job, "system.posix_acl_access", acl, sizeof acl), -1);
    assert_int_equal(errno, ENODATA);
    /* enforce: refused; audit: carried out and recorded as allowed */
    g_autofree char *v1 = g_build_filename(m->mnt, "v1", NULL);
    assert_int_equal(mkdir(v1, 0755), -1);
    assert_int_equal(errno, EACCES);
    assert_int_equal(setxattr(control, "user.ckptfs.policy", "audit", 5, 0), 0);
    assert_int_equal(mkdir(v1, 0755), 0);
    g_autofree char *col = V(m, ".collisions");
    g_autofree char *log = get_file(col);
    assert_non_null(strstr(log, "\"verdict\":\"allowed\",\"op\":\"mkdir\",\"path\":\"v1\""));
    assert_int_equal(
        mount_metric(m, "ckptfs_collisions_total{kind=\"legacy-write\",verdict=\"allowed\"}"), 1);
    assert_int_equal(mount_metric(m, "ckptfs_control_changes_total{setting=\"policy\"}"), 1);
    /* ckptctl set: back to enforce, legacy=rw, another rescan period */
    g_autofree char *out = NULL;
    assert_int_equal(
        ckptctl_cmd(&out, "set", m->mnt, "policy=enforce", "legacy=rw", "rescan=0.5", NULL), 0);
    assert_string_equal(out, "policy=enforce\nlegacy=rw\nrescan=0.5\ntag_env=\n");
    g_autofree char *v2 = g_build_filename(m->mnt, "v2", NULL);
    assert_int_equal(mkdir(v2, 0755), 0); /* legacy=rw */
    g_autofree char *foreign = g_build_filename(m->mnt, "_state", "t", "x", NULL);
    (void)foreign;
    /* bad values and names change nothing */
    assert_int_equal(setxattr(control, "user.ckptfs.policy", "lax", 3, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(setxattr(control, "user.ckptfs.rescan", "0", 1, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(setxattr(control, "user.ckptfs.colour", "red", 3, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(ckptctl_cmd(NULL, "set", m->mnt, "policy=lax", NULL), 2);
    assert_int_equal(ckptctl_cmd(NULL, "set", m->mnt, "colour=red", NULL), 2);
    g_autofree char *still = xattr_of(control, "user.ckptfs.policy");
    assert_string_equal(still, "enforce");
    /* another views file takes no setting */
    g_autofree char *metrics = V(m, ".metrics");
    assert_int_equal(setxattr(metrics, "user.ckptfs.policy", "audit", 5, 0), -1);
    assert_int_equal(errno, EROFS);
    /* not root: refused (by the kernel's permission check or by the daemon) */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
            _exit(99);
        int r = setxattr(control, "user.ckptfs.policy", "audit", 5, 0);
        _exit(r == -1 && (errno == EPERM || errno == EACCES) ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    g_autofree char *after = xattr_of(control, "user.ckptfs.policy");
    assert_string_equal(after, "enforce");
    g_autofree char *dlog = get_file(m->log);
    assert_non_null(strstr(dlog, "control: policy enforce -> audit by uid 0"));
    assert_non_null(strstr(dlog, "control: rescan 2 -> 0.5 by uid 0"));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A tree walked again once its entries expired (rescan= seconds) costs a
 * listing read with READDIRPLUS, not a LOOKUP per entry. */
static void test_rewalk_after_expiry(void **state)
{
    (void)state;
    Mount *m = mount_new();
    for (int i = 0; i < 300; i++) {
        g_autofree char *rel = g_strdup_printf("_state/walk/v1/0/d/f%03d", i);
        bput(m->backing, rel, "x");
    }
    marker(m->backing, "walk", 1, "generation=1\nparticipants=0\nstate=_state/walk\n");
    const char *args[] = {"-o", "rescan=1", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *dir = V(m, "walk/checkpoints/1/0/d");
    assert_int_equal(dir_entries(dir, true), 300);
    const char *lookups = "ckptfs_ops_total{op=\"lookup\"}";
    for (int round = 0; round < 2; round++) {
        g_usleep(1500 * 1000); /* past the entries' timeout */
        int64_t before = mount_metric(m, lookups);
        assert_int_equal(dir_entries(dir, true), 300);
        int64_t looked = mount_metric(m, lookups) - before;
        if (looked > 30)
            fail_msg("walk %d after the timeout: %" PRId64 " lookups for 300 entries", round + 2,
                     looked);
    }
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* A tree walked again while its entries are still valid is served from the
 * kernel's caches: its cached listing is dropped only shortly before the
 * entries it gave expire (three quarters of rescan= seconds), not at half
 * of them, when a walk would read it again for entries it still has.  (The
 * path to it may cost a LOOKUP or two: the views' own directories above a
 * tree have timeouts of their own.) */
static void test_rewalk_before_expiry(void **state)
{
    (void)state;
    Mount *m = mount_new();
    for (int i = 0; i < 100; i++) {
        g_autofree char *rel = g_strdup_printf("_state/again/v1/0/d/f%03d", i);
        bput(m->backing, rel, "x");
    }
    marker(m->backing, "again", 1, "generation=1\nparticipants=0\nstate=_state/again\n");
    const char *args[] = {"-o", "rescan=8", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *dir = V(m, "again/checkpoints/1/0/d");
    /* another test's drop_caches would make the kernel forget the walk */
    caches_hold();
    /* the first walk's READDIR comes after t0, so the drop is due no
     * earlier than 5.6 s after it (6 s, a twentieth of 8 early) */
    gint64 t0 = g_get_monotonic_time();
    assert_int_equal(dir_entries(dir, true), 100);
    const char *ops[] = {"ckptfs_ops_total{op=\"readdir\"}", "ckptfs_ops_total{op=\"readdirplus\"}",
                         "ckptfs_ops_total{op=\"lookup\"}"};
    const int64_t most[] = {0, 0, 5};
    int64_t before[3];
    for (int i = 0; i < 3; i++)
        before[i] = mount_metric(m, ops[i]);
    /* past half the timeout (4 s: where the drop was), before three quarters */
    gint64 at = t0 + 4700 * 1000;
    if (at > g_get_monotonic_time())
        g_usleep((gulong)(at - g_get_monotonic_time()));
    bool late = g_get_monotonic_time() - t0 > 5400 * 1000;
    assert_int_equal(dir_entries(dir, true), 100);
    int64_t sent[3];
    for (int i = 0; i < 3; i++)
        sent[i] = mount_metric(m, ops[i]) - before[i];
    caches_release();
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
    if (late)
        skip(); /* a machine too busy to walk again in time: says nothing */
    for (int i = 0; i < 3; i++)
        if (sent[i] > most[i])
            fail_msg("the walk again 4.7 s later: %s went up by %" PRId64, ops[i], sent[i]);
}

/* A listing the kernel read only in part (a reader that stopped after the
 * first batch) is kept for its next READDIR; when the kernel has forgotten
 * the directory meanwhile, letting that listing go (pushed out by later
 * ones, or at unmount) must not touch the directory's node, freed by then.
 * Under AddressSanitizer a use of it fails the daemon's exit. */
static void test_partial_listing_outlives_its_node(void **state)
{
    (void)state;
    Mount *m = mount_new();
    for (int d = 0; d < 18; d++)
        for (int i = 0; i < 200; i++) {
            g_autofree char *rel =
                g_strdup_printf("_state/part/v1/0/d%02d/a-rather-long-file-name-%03d", d, i);
            bput(m->backing, rel, "x");
        }
    marker(m->backing, "part", 1, "generation=1\nparticipants=0\nstate=_state/part\n");
    assert_int_equal(mount_start(m, NULL), 0);
    for (int d = 0; d < 18; d++) {
        g_autofree char *rel = g_strdup_printf("part/checkpoints/1/0/d%02d", d);
        g_autofree char *dir = V(m, rel);
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        char buf[256]; /* one entry or two: the kernel asks for a page's worth */
        assert_true(syscall(SYS_getdents64, fd, buf, sizeof buf) > 0);
        close(fd);
        if (d == 0) /* the first directory's node goes; its listing stays parked */
            mount_forget_down_to(m, 2, 50);
    }
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* Metrics an operator can alert on.  Every series carries the mount label
 * (two mounts in one textfile collector never clash); build info; expected
 * misses (ENOENT of lookup, ENODATA and EOPNOTSUPP of getxattr) apart from
 * errors; bytes through the mount and from the views; crossings named
 * collisions, with both verdicts whatever the mode. */
static void test_metrics_alertable(void **state)
{
    (void)state;
    Mount *m = mount_new();
    g_autofree char *behind = B(m, "_state/t/behind.snap");
    g_autofree char *big = g_strnfill(65536, 'b');
    put_file(behind, big);
    /* passthrough=off: data through the daemon, so its byte counters move
     * (with passthrough the kernel moves the data itself) */
    const char *args[] = {"-o", "passthrough=off", NULL};
    assert_int_equal(mount_start(m, args), 0);
    g_autofree char *metrics = V(m, ".metrics");
    g_autofree char *text = get_file(metrics);
    g_autofree char *real = realpath(m->mnt, NULL);
    g_autofree char *build = g_strdup_printf("\nckptfs_build_info{mount=\"%s\",version=\"", real);
    assert_non_null(strstr(text, build));
    /* every sample line has the mount label first */
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *label = g_strdup_printf("{mount=\"%s\"", real);
    for (char **l = lines; *l; l++)
        if (**l && **l != '#' && !strstr(*l, label))
            fail_msg("series without the mount label: %s", *l);
    /* misses are not errors */
    int64_t miss0 = mount_metric(m, "ckptfs_misses_total{op=\"lookup\",errno=\"ENOENT\"}");
    for (int i = 0; i < 5; i++) {
        g_autofree char *name = g_strdup_printf("none-%d", i);
        g_autofree char *p = mp(m, name);
        struct stat st;
        assert_int_equal(stat(p, &st), -1);
    }
    g_autofree char *f = mp(m, "f.snap");
    put_file(f, "0123456789");
    char v[8];
    assert_int_equal(getxattr(f, "user.none", v, sizeof v), -1);
    assert_int_equal(errno, ENODATA);
    assert_true(mount_metric(m, "ckptfs_misses_total{op=\"lookup\",errno=\"ENOENT\"}") >=
                miss0 + 5);
    assert_true(mount_metric(m, "ckptfs_misses_total{op=\"getxattr\",errno=\"ENODATA\"}") >= 1);
    assert_int_equal(mount_metric(m, "ckptfs_errors_total{errno=\"ENOENT\"}"), -1);
    assert_int_equal(mount_metric(m, "ckptfs_errors_total{errno=\"ENODATA\"}"), -1);
    /* the views support no ACL (this mount does not enforce them): each
     * `getfacl` or `rsync -A` of an entry asks, and is not an error */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(getxattr(metrics, "system.posix_acl_access", v, sizeof v), -1);
        assert_int_equal(errno, EOPNOTSUPP);
    }
    assert_true(mount_metric(m, "ckptfs_misses_total{op=\"getxattr\",errno=\"EOPNOTSUPP\"}") >= 3);
    assert_int_equal(mount_metric(m, "ckptfs_errors_total{errno=\"EOPNOTSUPP\"}"), -1);
    /* bytes written and read through the mount, and served from the views */
    assert_true(mount_metric(m, "ckptfs_written_bytes_total") >= 10);
    g_autofree char *through = mp(m, "behind.snap");
    g_autofree char *back = get_file(through);
    assert_int_equal(strlen(back), 65536);
    assert_true(mount_metric(m, "ckptfs_read_bytes_total") >= 65536);
    int64_t vb = mount_metric(m, "ckptfs_views_read_bytes_total");
    assert_true(vb > 0); /* the reads of .metrics above */
    g_autofree char *col = V(m, ".collisions");
    g_autofree char *ct = get_file(col);
    (void)ct;
    /* enforce: crossings are denied (legacy=ro); the allowed series is
     * there too, at 0, so that it does not come and go with the mode */
    g_autofree char *legacy = g_build_filename(m->mnt, "v1", NULL);
    assert_int_equal(mkdir(legacy, 0755), -1);
    assert_int_equal(errno, EACCES);
    assert_int_equal(
        mount_metric(m, "ckptfs_collisions_total{kind=\"legacy-write\",verdict=\"denied\"}"), 1);
    assert_int_equal(
        mount_metric(m, "ckptfs_collisions_total{kind=\"legacy-write\",verdict=\"allowed\"}"), 0);
    assert_int_equal(
        mount_metric(m, "ckptfs_collisions_total{kind=\"foreign-write\",verdict=\"denied\"}"), 0);
    g_autofree char *again = get_file(metrics);
    assert_null(strstr(again, "ckptfs_refusals_total"));
    assert_null(strstr(again, "views-read-only"));
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

/* The catalog gauges are true from the first read of .metrics, before any
 * view was listed (they read 0 markers until then, while the catalog loaded
 * in the background).  Enough markers that the load is still under way when
 * the first scrape comes. */
static void test_metrics_on_fresh_mount(void **state)
{
    (void)state;
    Mount *m = mount_new();
    enum { JOBS = 1500, PER_JOB = 2 };
    for (int j = 0; j < JOBS; j++)
        for (int n = 1; n <= PER_JOB; n++) {
            g_autofree char *job = g_strdup_printf("job%04d", j);
            g_autofree char *rel = g_strdup_printf("_state/%s", job);
            g_autofree char *text =
                g_strdup_printf("checkpoint=%d\ngeneration=1\nparticipants=0\nstate=%s\n", n, rel);
            marker(m->backing, job, n, text);
        }
    assert_int_equal(mount_start(m, NULL), 0);
    /* the very first request of the mount: no lookup in a job view before */
    assert_int_equal(mount_metric(m, "ckptfs_catalog_markers"), JOBS * PER_JOB);
    assert_int_equal(mount_metric(m, "ckptfs_catalog_jobs"), JOBS + 1); /* and _state/t */
    assert_int_equal(mount_stop(m), 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest fixture[] = {
        cmocka_unit_test(test_top),          cmocka_unit_test(test_checkpoints_match_resolve),
        cmocka_unit_test(test_state_merge),  cmocka_unit_test(test_xattrs),
        cmocka_unit_test(test_restore_text), cmocka_unit_test(test_reads_and_inodes),
        cmocka_unit_test(test_erofs),        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_metrics),      cmocka_unit_test(test_replaced_file),
        cmocka_unit_test(test_live),         cmocka_unit_test(test_load),
    };
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_copied_dir),
        cmocka_unit_test(test_config_legacy_backend),
        cmocka_unit_test(test_metrics_on_fresh_mount),
        cmocka_unit_test(test_metrics_alertable),
        cmocka_unit_test(test_rewalk_after_expiry),
        cmocka_unit_test_teardown(test_rewalk_before_expiry, caches_teardown),
        cmocka_unit_test(test_partial_listing_outlives_its_node),
        cmocka_unit_test(test_control),
    };
    int rc = cmocka_run_group_tests_name("views", fixture, fx_setup, fx_teardown);
    rc += cmocka_run_group_tests_name("views-copy", alone, NULL, NULL);
    return rc;
}
