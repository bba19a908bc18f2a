/* Permissions and ownership as an unprivileged caller, through a mount with
 * allow_other (so default_permissions): every operation is run once on the
 * native backing dir and once through the mount, by a child that dropped
 * to nobody/nogroup, and must give the same result; what it creates is
 * owned by the caller, setgid directories, sticky bits, POSIX ACLs and the
 * umask act natively. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define NOBODY      65534
#define NOGROUP     65534
#define OTHER_GROUP 4242

typedef enum {
    OP_CREATE,
    OP_MKDIR,
    OP_UNLINK,
    OP_CHMOD,
    OP_OPEN_READ,
    OP_OPEN_WRITE,
    OP_CREATE_UMASKED, /* mode 0666 under umask 022 */
} Op;

/* Runs op on path as nobody (with supplementary group `group`, or none);
 * returns 0 or the errno. */
static int as_nobody(Op op, const char *path, gid_t group)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        int n = group ? 1 : 0;
        gid_t groups[1] = {group};
        if (setgroups((size_t)n, groups) < 0 || setresgid(NOGROUP, NOGROUP, NOGROUP) < 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) < 0)
            _exit(99);
        int r = 0, fd;
        switch (op) {
        case OP_CREATE:
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
            r = fd < 0 ? -1 : close(fd);
            break;
        case OP_MKDIR:
            r = mkdir(path, 0755);
            break;
        case OP_UNLINK:
            r = unlink(path);
            break;
        case OP_CHMOD:
            r = chmod(path, 0600);
            break;
        case OP_OPEN_READ:
        case OP_OPEN_WRITE:
            fd = open(path, op == OP_OPEN_READ ? O_RDONLY : O_WRONLY);
            r = fd < 0 ? -1 : close(fd);
            break;
        case OP_CREATE_UMASKED:
            umask(022);
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
            r = fd < 0 ? -1 : close(fd);
            break;
        }
        int e = r < 0 ? errno : 0;
        if (write(pipefd[1], &e, sizeof e) != sizeof e)
            _exit(98);
        _exit(0);
    }
    close(pipefd[1]);
    int e = -1;
    assert_int_equal(read(pipefd[0], &e, sizeof e), (ssize_t)sizeof e);
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return e;
}

static int setup(void **state)
{
    Mount *m = mount_new();
    /* the chain down to the work dir must be searchable by nobody */
    g_autofree char *st = g_build_filename(m->backing, "_state", NULL);
    chmod(m->backing, 0755);
    chmod(st, 0755);
    chmod(m->bwork, 0777);
    const char *args[] = {"-o", "allow_other", NULL};
    if (mount_start(m, args) != 0) {
        mount_free(m);
        return -1;
    }
    *state = m;
    return 0;
}

static int teardown(void **state)
{
    Mount *m = *state;
    int rc = mount_stop(m);
    mount_free(m);
    return rc;
}

/* Sets a directory up identically under both sides; returns its names. */
static void make_dir(Mount *m, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
    g_autofree char *native = g_build_filename(m->base, "native", name, NULL);
    g_autofree char *backing = bp(m, name);
    g_autofree char *native_root = g_build_filename(m->base, "native", NULL);
    mkdir(native_root, 0777);
    chmod(native_root, 0777);
    assert_int_equal(mkdir(native, 0), 0);
    assert_int_equal(mkdir(backing, 0), 0);
    assert_int_equal(chown(native, uid, gid), 0);
    assert_int_equal(chown(backing, uid, gid), 0);
    assert_int_equal(chmod(native, mode), 0);
    assert_int_equal(chmod(backing, mode), 0);
}

/* The same op on the native dir and through the mount: same result. */
static int same_result(Mount *m, Op op, const char *rel, gid_t group)
{
    g_autofree char *native = g_build_filename(m->base, "native", rel, NULL);
    g_autofree char *through = mp(m, rel);
    int a = as_nobody(op, native, group);
    int b = as_nobody(op, through, group);
    if (a != b)
        fprintf(stderr, "op %d on %s: native %s, mount %s\n", op, rel, g_strerror(a),
                g_strerror(b));
    assert_int_equal(a, b);
    return b;
}

static void test_eacces_where_native_gives_eacces(void **state)
{
    Mount *m = *state;
    make_dir(m, "closed", 0755, 0, 0);
    assert_int_equal(same_result(m, OP_CREATE, "closed/f", 0), EACCES);
    assert_int_equal(same_result(m, OP_MKDIR, "closed/d", 0), EACCES);
    g_autofree char *bsecret = bp(m, "closed/secret");
    g_autofree char *nsecret = g_build_filename(m->base, "native", "closed", "secret", NULL);
    put_file(bsecret, "s");
    put_file(nsecret, "s");
    chmod(bsecret, 0600);
    chmod(nsecret, 0600);
    assert_int_equal(same_result(m, OP_OPEN_READ, "closed/secret", 0), EACCES);
    assert_int_equal(same_result(m, OP_OPEN_WRITE, "closed/secret", 0), EACCES);
    assert_int_equal(same_result(m, OP_CHMOD, "closed/secret", 0), EPERM);
    assert_int_equal(same_result(m, OP_UNLINK, "closed/secret", 0), EACCES);
    g_autofree char *b_f = bp(m, "closed/f");
    assert_int_equal(access(b_f, F_OK), -1);
    assert_int_equal(access(bsecret, F_OK), 0);
    /* a group the caller is in grants access: the caller's supplementary groups count */
    make_dir(m, "group", 0770, 0, OTHER_GROUP);
    assert_int_equal(same_result(m, OP_CREATE, "group/no", 0), EACCES);
    assert_int_equal(same_result(m, OP_CREATE, "group/yes", OTHER_GROUP), 0);
}

static void test_created_files_belong_to_the_caller(void **state)
{
    Mount *m = *state;
    make_dir(m, "open", 0777, 0, 0);
    assert_int_equal(same_result(m, OP_CREATE, "open/f", 0), 0);
    assert_int_equal(same_result(m, OP_MKDIR, "open/d", 0), 0);
    struct stat st;
    g_autofree char *bf = bp(m, "open/f"), *bd = bp(m, "open/d");
    assert_int_equal(stat(bf, &st), 0);
    assert_int_equal(st.st_uid, NOBODY);
    assert_int_equal(st.st_gid, NOGROUP);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal(stat(bd, &st), 0);
    assert_int_equal(st.st_uid, NOBODY);
    assert_int_equal(st.st_gid, NOGROUP);
    g_autofree char *mf = mp(m, "open/f");
    assert_int_equal(stat(mf, &st), 0);
    assert_int_equal(st.st_uid, NOBODY);
    /* and the owner may chmod it */
    assert_int_equal(same_result(m, OP_CHMOD, "open/f", 0), 0);
    assert_int_equal(stat(bf, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
}

static void test_setgid_directory_inheritance(void **state)
{
    Mount *m = *state;
    make_dir(m, "sgid", 02777, 0, OTHER_GROUP);
    assert_int_equal(same_result(m, OP_CREATE, "sgid/f", 0), 0);
    assert_int_equal(same_result(m, OP_MKDIR, "sgid/d", 0), 0);
    struct stat st, nst;
    g_autofree char *bf = bp(m, "sgid/f"), *bd = bp(m, "sgid/d");
    g_autofree char *nd = g_build_filename(m->base, "native", "sgid", "d", NULL);
    assert_int_equal(stat(bf, &st), 0);
    assert_int_equal(st.st_gid, OTHER_GROUP);
    assert_int_equal(st.st_uid, NOBODY);
    assert_int_equal(stat(bd, &st), 0);
    assert_int_equal(stat(nd, &nst), 0);
    assert_int_equal(st.st_gid, OTHER_GROUP);
    assert_true(st.st_mode & S_ISGID);
    assert_int_equal(st.st_mode, nst.st_mode);
}

static void test_sticky_directory(void **state)
{
    Mount *m = *state;
    make_dir(m, "tmp", 01777, 0, 0);
    g_autofree char *broot = bp(m, "tmp/roots");
    g_autofree char *nroot = g_build_filename(m->base, "native", "tmp", "roots", NULL);
    put_file(broot, "r");
    put_file(nroot, "r");
    chmod(broot, 0666);
    chmod(nroot, 0666);
    assert_int_equal(same_result(m, OP_UNLINK, "tmp/roots", 0), EPERM);
    assert_int_equal(access(broot, F_OK), 0);
    assert_int_equal(same_result(m, OP_CREATE, "tmp/mine", 0), 0);
    assert_int_equal(same_result(m, OP_UNLINK, "tmp/mine", 0), 0);
    g_autofree char *bmine = bp(m, "tmp/mine");
    assert_int_equal(access(bmine, F_OK), -1);
}

/* A POSIX ACL (name: system.posix_acl_access or _default) of n entries
 * (tag, perm, id), in the kernel's xattr layout, on path. */
static void put_acl(const char *path, const char *name, const guint32 (*e)[3], int n)
{
    guint8 buf[4 + 8 * 16];
    guint32 version = GUINT32_TO_LE(2);
    memcpy(buf, &version, 4);
    for (int i = 0; i < n; i++) {
        guint16 tag = GUINT16_TO_LE((guint16)e[i][0]), perm = GUINT16_TO_LE((guint16)e[i][1]);
        guint32 id = GUINT32_TO_LE(e[i][2]);
        memcpy(buf + 4 + 8 * i, &tag, 2);
        memcpy(buf + 6 + 8 * i, &perm, 2);
        memcpy(buf + 8 + 8 * i, &id, 4);
    }
    if (setxattr(path, name, buf, 4 + 8 * (size_t)n, 0) != 0)
        fail_msg("setxattr %s %s: %s", path, name, g_strerror(errno));
}

#define ACL_USER_OBJ  0x01
#define ACL_USER      0x02
#define ACL_GROUP_OBJ 0x04
#define ACL_MASK      0x10
#define ACL_OTHER     0x20
#define NO_ID         0xffffffffu

/* A file of root's on both sides, mode mode, with an access ACL. */
static void acl_file(Mount *m, const char *rel, mode_t mode, const guint32 (*e)[3], int n)
{
    g_autofree char *b = bp(m, rel);
    g_autofree char *nat = g_build_filename(m->base, "native", rel, NULL);
    const char *both[] = {b, nat};
    for (int i = 0; i < 2; i++) {
        put_file(both[i], "acl");
        assert_int_equal(chmod(both[i], mode), 0);
        put_acl(both[i], "system.posix_acl_access", e, n);
    }
}

/* What an ACL grants or refuses is what the kernel enforces through the
 * mount, as natively: a user entry opens a file its mode bits close, and
 * closes one they open. */
static void test_posix_acls_are_enforced(void **state)
{
    Mount *m = *state;
    make_dir(m, "acl", 0755, 0, 0);
    const guint32 grant[][3] = {{ACL_USER_OBJ, 6, NO_ID},
                                {ACL_USER, 6, NOBODY},
                                {ACL_GROUP_OBJ, 0, NO_ID},
                                {ACL_MASK, 6, NO_ID},
                                {ACL_OTHER, 0, NO_ID}};
    acl_file(m, "acl/granted", 0600, grant, 5);
    assert_int_equal(same_result(m, OP_OPEN_WRITE, "acl/granted", 0), 0);
    const guint32 refuse[][3] = {{ACL_USER_OBJ, 6, NO_ID},
                                 {ACL_USER, 0, NOBODY},
                                 {ACL_GROUP_OBJ, 6, NO_ID},
                                 {ACL_MASK, 6, NO_ID},
                                 {ACL_OTHER, 6, NO_ID}};
    acl_file(m, "acl/refused", 0666, refuse, 5);
    assert_int_equal(same_result(m, OP_OPEN_READ, "acl/refused", 0), EACCES);
    assert_int_equal(same_result(m, OP_OPEN_WRITE, "acl/refused", 0), EACCES);
}

/* A create takes the caller's umask, unless the directory has a default
 * ACL, which the new file inherits instead (mode 0666 under umask 022:
 * 0644 in a plain directory, 0664 under a default ACL group::rwx). */
static void test_umask_and_default_acl_as_natively(void **state)
{
    Mount *m = *state;
    make_dir(m, "plain", 0777, 0, 0);
    make_dir(m, "dacl", 0777, 0, 0);
    const guint32 dflt[][3] = {
        {ACL_USER_OBJ, 7, NO_ID}, {ACL_GROUP_OBJ, 7, NO_ID}, {ACL_OTHER, 5, NO_ID}};
    g_autofree char *bd = bp(m, "dacl");
    g_autofree char *nd = g_build_filename(m->base, "native", "dacl", NULL);
    put_acl(bd, "system.posix_acl_default", dflt, 3);
    put_acl(nd, "system.posix_acl_default", dflt, 3);
    const char *files[] = {"plain/f", "dacl/f"};
    const mode_t want[] = {0644, 0664};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(same_result(m, OP_CREATE_UMASKED, files[i], 0), 0);
        struct stat bst, nst;
        g_autofree char *b = bp(m, files[i]);
        g_autofree char *n = g_build_filename(m->base, "native", files[i], NULL);
        assert_int_equal(stat(b, &bst), 0);
        assert_int_equal(stat(n, &nst), 0);
        assert_int_equal(nst.st_mode & 07777, want[i]);
        assert_int_equal(bst.st_mode & 07777, nst.st_mode & 07777);
        /* and through the mount, the same */
        g_autofree char *mf = mp(m, files[i]);
        assert_int_equal(stat(mf, &bst), 0);
        assert_int_equal(bst.st_mode & 07777, want[i]);
    }
}

/* One change to an existing file by nobody (not in the file's group): a
 * write, an allocation, a hole punched, a range zeroed, a truncate, an
 * empty write.  Returns the file's mode afterwards. */
typedef enum { CH_WRITE, CH_ALLOCATE, CH_PUNCH, CH_ZERO, CH_TRUNCATE, CH_EMPTY, CH_COUNT } Change;

static mode_t mode_after(const char *path, mode_t mode, Change ch)
{
    put_file(path, "0123456789");
    assert_int_equal(chown(path, 0, 0), 0);
    assert_int_equal(chmod(path, mode), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(NOGROUP, NOGROUP, NOGROUP) < 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) < 0)
            _exit(99);
        int fd = open(path, O_WRONLY);
        if (fd < 0)
            _exit(98);
        int r = 0;
        switch (ch) {
        case CH_WRITE:
            r = write(fd, "x", 1) == 1 ? 0 : -1;
            break;
        case CH_ALLOCATE:
            r = fallocate(fd, 0, 0, 8192);
            break;
        case CH_PUNCH:
            r = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4);
            break;
        case CH_ZERO:
            r = fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 4);
            break;
        case CH_TRUNCATE:
            r = ftruncate(fd, 5);
            break;
        default:
            r = pwrite(fd, "", 0, 0) == 0 ? 0 : -1;
            break;
        }
        _exit(r == 0 && close(fd) == 0 ? 0 : 97);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the mode alone first, as stat -c %a asks: after a write or an
     * allocation the kernel refreshes only what those change by itself */
    struct statx sx;
    assert_int_equal(statx(AT_FDCWD, path, 0, STATX_MODE, &sx), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if ((sx.stx_mode & 07777) != (st.st_mode & 07777))
        fail_msg("%s: statx(STATX_MODE) %04o, stat %04o", path, sx.stx_mode & 07777,
                 st.st_mode & 07777);
    return st.st_mode & 07777;
}

/* The set-user-ID and set-group-ID bits a change by another user drops are
 * the ones ext4 drops: set-user-ID always, set-group-ID when the file is
 * group-executable or the writer is not in its group; an empty write
 * drops none.  In both data paths: a file whose bit a write would drop
 * is written through the daemon, which drops it as the kernel would. */
static void test_setid_bits_dropped_as_natively(void **state)
{
    Mount *m = *state;
    make_dir(m, "setid", 0777, 0, 0);
    static const mode_t modes[] = {04777, 02777, 02666, 06777, 04666};
    for (int ch = 0; ch < CH_COUNT; ch++)
        for (size_t i = 0; i < G_N_ELEMENTS(modes); i++) {
            g_autofree char *name = g_strdup_printf("setid/f%d-%zu", ch, i);
            g_autofree char *b = bp(m, name);
            g_autofree char *n = g_build_filename(m->base, "native", name, NULL);
            g_autofree char *through = mp(m, name);
            mode_t native = mode_after(n, modes[i], ch);
            /* set up through the backing dir, changed through the mount */
            put_file(b, "0123456789");
            assert_int_equal(chown(b, 0, 0), 0);
            assert_int_equal(chmod(b, modes[i]), 0);
            struct stat st;
            assert_int_equal(stat(through, &st), 0); /* the kernel sees the new mode */
            mode_t mounted = mode_after(through, modes[i], ch);
            if (native != mounted)
                fail_msg("change %d of a %04o file: native %04o, through the mount %04o", ch,
                         modes[i], native, mounted);
        }
}

/* A backing file system without extended attributes (ramfs): files have
 * no ACLs there, and another user gets in as the mode bits say (the
 * kernel, which enforces ACLs, takes a failed ACL read for a refusal). */
static void test_backing_without_acls(void **state)
{
    (void)state;
    Mount *m = mount_new();
    if (mount("none", m->backing, "ramfs", 0, "mode=0755") != 0) {
        print_message("no ramfs here (%s): nothing to check\n", g_strerror(errno));
        mount_free(m);
        return;
    }
    g_autofree char *work = bp(m, "");
    assert_int_equal(g_mkdir_with_parents(work, 0755), 0);
    g_autofree char *st = g_build_filename(m->backing, "_state", NULL);
    chmod(st, 0755);
    chmod(work, 0755);
    g_autofree char *bf = bp(m, "open.txt");
    put_file(bf, "readable");
    chmod(bf, 0644);
    const char *args[] = {"-o", "allow_other", NULL};
    int up = mount_start(m, args);
    g_autofree char *through = mp(m, "open.txt");
    int e = up == 0 ? as_nobody(OP_OPEN_READ, through, 0) : -1;
    if (up == 0)
        mount_stop(m);
    umount2(m->backing, MNT_DETACH);
    assert_int_equal(up, 0);
    assert_int_equal(e, 0);
    mount_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_eacces_where_native_gives_eacces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_files_belong_to_the_caller, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setgid_directory_inheritance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sticky_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_posix_acls_are_enforced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_umask_and_default_acl_as_natively, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setid_bits_dropped_as_natively, setup, teardown),
        cmocka_unit_test(test_backing_without_acls),
    };
    return cmocka_run_group_tests_name("mount/perms", tests, NULL, NULL);
}
