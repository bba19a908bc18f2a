/* Permissions and ownership as an unprivileged caller, through a mount with
 * allow_other (so default_permissions): every operation is run once on the
 * native backing dir and once through the mount, by a child that dropped
 * to nobody/nogroup, and must give the same result; what it creates is
 * owned by the caller, setgid directories and sticky bits act natively. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define NOBODY      65534
#define NOGROUP     65534
#define OTHER_GROUP 4242

typedef enum { OP_CREATE, OP_MKDIR, OP_UNLINK, OP_CHMOD, OP_OPEN_READ, OP_OPEN_WRITE } Op;

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_eacces_where_native_gives_eacces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_files_belong_to_the_caller, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setgid_directory_inheritance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sticky_directory, setup, teardown),
    };
    return cmocka_run_group_tests_name("mount/perms", tests, NULL, NULL);
}
