/* A seeded sequence of ~2,000 mixed operations applied to a native
 * directory and to the same directory through a ckptfs mount: every call
 * must give the same result (return value and errno), and at the end the
 * two trees must hold the same names, types, sizes, modes, link counts,
 * link targets and contents.  CKPTFS_RANDOM_SEED overrides the seed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define OPS 2000

static const char *const dirs[] = {".", "d0", "d1", "d0/e", "d1/f"};
static const char *const names[] = {"a", "b", "c", "d0", "d1", "e", "f", "g"};

static char *pick_path(GRand *r)
{
    const char *d = dirs[g_rand_int_range(r, 0, G_N_ELEMENTS(dirs))];
    const char *n = names[g_rand_int_range(r, 0, G_N_ELEMENTS(names))];
    return strcmp(d, ".") == 0 ? g_strdup(n) : g_strdup_printf("%s/%s", d, n);
}

typedef struct {
    int ret;
    int err;
} Result;

/* One operation, described by the random draws in `a`, applied under root. */
typedef struct {
    int kind;
    char *p1, *p2;
    guint32 n1, n2, n3;
} Op;

static Result apply(const char *root, const Op *op)
{
    g_autofree char *p1 = g_build_filename(root, op->p1, NULL);
    g_autofree char *p2 = op->p2 ? g_build_filename(root, op->p2, NULL) : NULL;
    Result r = {0, 0};
    errno = 0;
    switch (op->kind) {
    case 0: { /* create (sometimes exclusive, sometimes truncating) */
        int flags =
            O_WRONLY | O_CREAT | (op->n1 % 3 == 0 ? O_EXCL : 0) | (op->n1 % 3 == 1 ? O_TRUNC : 0);
        int fd = open(p1, flags, 0600 | (op->n2 & 0066));
        r.ret = fd < 0 ? -1 : close(fd);
        break;
    }
    case 1: { /* write at an offset */
        int fd = open(p1, O_WRONLY);
        if (fd < 0) {
            r.ret = -1;
            break;
        }
        char buf[5000];
        size_t len = op->n2 % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)('A' + (op->n3 + i) % 26);
        ssize_t w = pwrite(fd, buf, len, op->n1 % 20000);
        r.ret = w < 0 ? -1 : (int)w;
        int e = errno;
        close(fd);
        errno = e;
        break;
    }
    case 2: /* truncate */
        r.ret = truncate(p1, op->n1 % 30000);
        break;
    case 3:
        r.ret = rename(p1, p2);
        break;
    case 4:
        r.ret = link(p1, p2);
        break;
    case 5:
        r.ret = unlink(p1);
        break;
    case 6:
        r.ret = mkdir(p1, 0700 | (op->n1 & 0055));
        break;
    case 7:
        r.ret = rmdir(p1);
        break;
    case 8: /* symlink to a name in the same directory (stays in the job) */
        r.ret = symlink(names[op->n1 % G_N_ELEMENTS(names)], p1);
        break;
    case 9: { /* chmod, keeping directories usable by root anyway */
        struct stat st;
        if (lstat(p1, &st) == 0 && S_ISLNK(st.st_mode)) {
            r.ret = 0; /* chmod would follow; skip links */
            break;
        }
        r.ret = chmod(p1, (op->n1 & 0777) | 0700);
        break;
    }
    case 10: { /* utimensat, sometimes on the link itself */
        struct timespec ts[2] = {{op->n1 % 100000, 0}, {op->n2 % 100000, op->n3 % 1000000000}};
        if (op->n3 % 4 == 0)
            ts[0].tv_nsec = UTIME_OMIT;
        r.ret = utimensat(AT_FDCWD, p1, ts, op->n3 % 2 ? AT_SYMLINK_NOFOLLOW : 0);
        break;
    }
    case 11: { /* rename with flags */
        unsigned flags = op->n1 % 2 ? RENAME_NOREPLACE : RENAME_EXCHANGE;
        r.ret = renameat2(AT_FDCWD, p1, AT_FDCWD, p2, flags);
        break;
    }
    }
    r.err = r.ret < 0 ? errno : 0;
    return r;
}

static gint cmp_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int compare_trees(const char *a, const char *b, const char *rel)
{
    g_autofree char *da = g_build_filename(a, rel, NULL);
    g_autofree char *db = g_build_filename(b, rel, NULL);
    g_autoptr(GDir) ga = g_dir_open(da, 0, NULL);
    g_autoptr(GDir) gb = g_dir_open(db, 0, NULL);
    assert_non_null(ga);
    assert_non_null(gb);
    g_autoptr(GPtrArray) na = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) nb = g_ptr_array_new_with_free_func(g_free);
    const char *n;
    while ((n = g_dir_read_name(ga)))
        g_ptr_array_add(na, g_strdup(n));
    while ((n = g_dir_read_name(gb)))
        g_ptr_array_add(nb, g_strdup(n));
    g_ptr_array_sort(na, cmp_names);
    g_ptr_array_sort(nb, cmp_names);
    if (na->len != nb->len)
        fprintf(stderr, "%s: %u names natively, %u through the mount\n", rel, na->len, nb->len);
    assert_int_equal(na->len, nb->len);
    int count = (int)na->len;
    for (guint i = 0; i < na->len; i++) {
        assert_string_equal(na->pdata[i], nb->pdata[i]);
        g_autofree char *r = g_build_filename(rel, na->pdata[i], NULL);
        g_autofree char *pa = g_build_filename(a, r, NULL);
        g_autofree char *pb = g_build_filename(b, r, NULL);
        struct stat sa, sb;
        assert_int_equal(lstat(pa, &sa), 0);
        assert_int_equal(lstat(pb, &sb), 0);
        if (sa.st_mode != sb.st_mode || sa.st_nlink != sb.st_nlink ||
            (!S_ISDIR(sa.st_mode) && sa.st_size != sb.st_size))
            fprintf(stderr, "%s: mode %o/%o nlink %lu/%lu size %ld/%ld\n", r, sa.st_mode,
                    sb.st_mode, (unsigned long)sa.st_nlink, (unsigned long)sb.st_nlink,
                    (long)sa.st_size, (long)sb.st_size);
        assert_int_equal(sa.st_mode, sb.st_mode);
        assert_int_equal(sa.st_nlink, sb.st_nlink);
        if (S_ISDIR(sa.st_mode)) {
            count += compare_trees(a, b, r);
        } else if (S_ISLNK(sa.st_mode)) {
            g_autofree char *ta = g_file_read_link(pa, NULL), *tb = g_file_read_link(pb, NULL);
            assert_string_equal(ta, tb);
        } else {
            assert_int_equal(sa.st_size, sb.st_size);
            g_autofree char *ca = NULL, *cb = NULL;
            gsize la = 0, lb = 0;
            assert_true(g_file_get_contents(pa, &ca, &la, NULL));
            assert_true(g_file_get_contents(pb, &cb, &lb, NULL));
            assert_int_equal(la, lb);
            assert_memory_equal(ca, cb, la);
        }
    }
    return count;
}

static void test_random_ops_match_native(void **state)
{
    Mount *m = *state;
    guint32 seed = 20261201;
    const char *env = g_getenv("CKPTFS_RANDOM_SEED");
    if (env)
        seed = (guint32)g_ascii_strtoull(env, NULL, 10);
    g_autoptr(GRand) r = g_rand_new_with_seed(seed);
    g_autofree char *native = g_build_filename(m->base, "native", NULL);
    assert_int_equal(mkdir(native, 0755), 0);
    int mismatches = 0;
    for (int i = 0; i < OPS; i++) {
        Op op = {0};
        /* bias towards creating and writing so the trees fill up */
        static const int weights[] = {0, 0, 0, 1, 1, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 10, 11};
        op.kind = weights[g_rand_int_range(r, 0, G_N_ELEMENTS(weights))];
        op.p1 = pick_path(r);
        op.p2 = pick_path(r);
        op.n1 = g_rand_int(r);
        op.n2 = g_rand_int(r);
        op.n3 = g_rand_int(r);
        Result a = apply(native, &op);
        Result b = apply(m->work, &op);
        if (a.ret != b.ret || a.err != b.err) {
            fprintf(stderr, "seed %u op %d kind %d %s %s: native %d (%s), mount %d (%s)\n", seed, i,
                    op.kind, op.p1, op.p2, a.ret, g_strerror(a.err), b.ret, g_strerror(b.err));
            mismatches++;
        }
        g_free(op.p1);
        g_free(op.p2);
    }
    assert_int_equal(mismatches, 0);
    int entries = compare_trees(native, m->work, ".");
    fprintf(stderr, "seed %u: %d entries compared\n", seed, entries);
    assert_true(entries >= 10); /* the sequence built a real tree */
    /* and what the mount shows is what the backing dir holds */
    compare_trees(native, m->bwork, ".");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_random_ops_match_native, mount_setup, mount_teardown),
    };
    return cmocka_run_group_tests_name("mount/random", tests, NULL, NULL);
}
