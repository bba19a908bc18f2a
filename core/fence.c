#include "fence.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "resolve.h"

/* the kernel's own limit on links followed in one lookup (MAXSYMLINKS) */
#define MAX_LINKS 40
/* directories above a file: past this the walk up is taken for a loop */
#define MAX_DEPTH 4096
/* a file made or removed by someone else between the open and the create */
#define MAX_RACES 16

#define BEHIND "is inside the backing directory or the mount (ckptfs never writes there)"

struct CkFence {
    char *backing; /* NULL: not checked */
    char *mount;   /* NULL: not checked */
    bool has_id;
    dev_t dev; /* the backing directory's */
    ino_t ino;
};

CkFence *ck_fence_new(const char *backing, const char *mount)
{
    CkFence *f = g_new0(CkFence, 1);
    f->backing = g_strdup(backing);
    f->mount = g_strdup(mount);
    struct stat st;
    if (backing && stat(backing, &st) == 0) {
        f->has_id = true;
        f->dev = st.st_dev;
        f->ino = st.st_ino;
    }
    return f;
}

CkFence *ck_fence_copy(const CkFence *f)
{
    if (!f)
        return NULL;
    CkFence *c = g_memdup2(f, sizeof *f);
    c->backing = g_strdup(f->backing);
    c->mount = g_strdup(f->mount);
    return c;
}

void ck_fence_free(CkFence *f)
{
    if (!f)
        return;
    g_free(f->backing);
    g_free(f->mount);
    g_free(f);
}

static int fail(GError **err, int e, const char *why)
{
    g_set_error_literal(err, G_FILE_ERROR, g_file_error_from_errno(e), why ? why : g_strerror(e));
    return -e;
}

/* Where fd is now, as the kernel names it; NULL without /proc. */
static char *fd_path(int fd)
{
    char proc[64], buf[PATH_MAX + 1];
    g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, buf, sizeof buf - 1);
    if (n <= 0 || buf[0] != '/')
        return NULL;
    buf[n] = '\0';
    return g_strdup(buf);
}

/* Whether the backing directory is dir or above it, found by walking up
 * from the directory itself: a bind mount or another path to the backing
 * directory escapes every comparison of paths, not this one.  0 (no), 1
 * (yes), or -errno when the walk cannot be made (then nobody can tell). */
static int below_backing(const CkFence *f, int dir)
{
    int cur = fcntl(dir, F_DUPFD_CLOEXEC, 0);
    if (cur < 0)
        return -errno;
    struct stat prev = {0};
    int rc = -ELOOP;
    for (int depth = 0; depth < MAX_DEPTH; depth++) {
        struct stat st;
        if (fstat(cur, &st) < 0) {
            rc = -errno;
            break;
        }
        if (st.st_dev == f->dev && st.st_ino == f->ino) {
            rc = 1;
            break;
        }
        if (depth > 0 && st.st_dev == prev.st_dev && st.st_ino == prev.st_ino) {
            rc = 0; /* the root: its ".." is itself */
            break;
        }
        prev = st;
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (up < 0) {
            rc = -errno;
            break;
        }
        close(cur);
        cur = up;
    }
    close(cur);
    return rc;
}

/* The one check of a directory the daemon would open or create its file
 * in (dir, reached by the name shown; where: where it resolves).  0, or
 * -errno with *err set. */
static int check_dir(const CkFence *f, int dir, const char *shown, const char *where, GError **err)
{
    bool behind = (f->backing && ck_path_is_under(where, f->backing)) ||
                  (f->mount && ck_path_is_under(where, f->mount));
    if (!behind && f->has_id) {
        int below = below_backing(f, dir);
        if (below < 0) {
            g_autofree char *why =
                g_strdup_printf("cannot tell whether %s is inside the backing directory: %s", where,
                                g_strerror(-below));
            return fail(err, -below, why);
        }
        behind = below;
    }
    if (!behind)
        return 0;
    if (!shown)
        return fail(err, EPERM, BEHIND);
    g_autofree char *why = g_strdup_printf("leads to %s, which " BEHIND, shown);
    return fail(err, EPERM, why);
}

/* Whether dir is in /proc, where a name may be a link to what no path
 * names (/dev/stdout leads to /proc/self/fd/1, a pipe's "pipe:[N]"). */
static bool in_proc(int dir)
{
    struct statfs sf;
    return fstatfs(dir, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
}

/* Follows path to the directory its file is (or would be) in, one
 * symbolic link at a time, checking each directory before it is used:
 * *dir (open O_PATH) and *base name the file, which is not a symbolic
 * link (or was not when looked at), or, *proc, an entry of /proc, which
 * is opened as it leads and checked by what it opened (check_file).  0,
 * or -errno with *err set. */
static int reach(const CkFence *f, const char *path, int *dir, char **base, bool *proc,
                 GError **err)
{
    *proc = false;
    g_autofree char *cur = g_strdup(path);
    for (int links = 0; links <= MAX_LINKS; links++) {
        g_autofree char *dname = g_path_get_dirname(cur);
        g_autofree char *name = g_path_get_basename(cur);
        int d = open(dname, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
            return fail(err, errno, NULL);
        g_autofree char *where = fd_path(d);
        if (!where)
            where = g_strdup(dname);
        /* shown only when it differs from what was asked for */
        g_autofree char *shown =
            links > 0 || strcmp(where, dname) != 0 ? g_build_filename(where, name, NULL) : NULL;
        int rc = f ? check_dir(f, d, shown, where, err) : 0;
        if (rc) {
            close(d);
            return rc;
        }
        if (in_proc(d)) {
            *dir = d;
            *base = g_steal_pointer(&name);
            *proc = true;
            return 0;
        }
        char target[PATH_MAX + 1];
        ssize_t n = readlinkat(d, name, target, sizeof target - 1);
        if (n < 0 && (errno == EINVAL || errno == ENOENT)) { /* a file, or none yet */
            *dir = d;
            *base = g_steal_pointer(&name);
            return 0;
        }
        int e = n < 0 ? errno : ENAMETOOLONG;
        close(d);
        if (n < 0 || (size_t)n >= sizeof target - 1)
            return fail(err, e, NULL);
        target[n] = '\0';
        g_free(cur);
        cur = target[0] == '/' ? g_strdup(target) : g_build_filename(where, target, NULL);
    }
    return fail(err, ELOOP, NULL);
}

char *ck_fence_path(const CkFence *f, const char *arg, GError **err)
{
    g_autofree char *abs = g_canonicalize_filename(arg, NULL);
    g_autofree char *dname = g_path_get_dirname(abs);
    g_autofree char *name = g_path_get_basename(abs);
    int d;
    bool proc;
    g_autofree char *base = NULL;
    if (reach(f, abs, &d, &base, &proc, err) < 0)
        return NULL;
    close(d);
    /* the name the daemon opens again on SIGHUP: its directory resolved
     * now, its last component left to lead wherever it leads then */
    char *real_dir = realpath(dname, NULL);
    if (!real_dir) {
        fail(err, errno, NULL);
        return NULL;
    }
    char *full = g_build_filename(real_dir, name, NULL);
    free(real_dir);
    return full;
}

/* An existing file opened: one with another hard link on the backing
 * directory's file system may be linked from inside it.  Opened through
 * /proc (proc), it is checked by where it is: a pipe, socket or terminal
 * is nowhere; a file by its directory, as a name's directory is. */
static int check_file(const CkFence *f, int fd, bool proc, GError **err)
{
    struct stat st;
    if (!f)
        return 0;
    if (fstat(fd, &st) < 0)
        return fail(err, errno, NULL);
    if (proc && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
        g_autofree char *where = fd_path(fd);
        if (!where)
            return fail(err, ENOENT, "cannot tell where it leads");
        g_autofree char *dname = g_path_get_dirname(where);
        int d = open(dname, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
            return fail(err, errno, NULL);
        int rc = check_dir(f, d, where, dname, err);
        close(d);
        if (rc < 0)
            return rc;
    }
    if (!f->has_id)
        return 0;
    if (S_ISREG(st.st_mode) && st.st_nlink > 1 && st.st_dev == f->dev)
        return fail(err, EPERM,
                    "has another hard link on the backing directory's file system, which may be "
                    "inside the backing directory (ckptfs never writes there)");
    return 0;
}

int ck_fence_open(const CkFence *f, const char *path, mode_t mode, GError **err)
{
    const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW;
    for (int race = 0; race < MAX_RACES; race++) {
        int d;
        bool proc;
        g_autofree char *base = NULL;
        int rc = reach(f, path, &d, &base, &proc, err);
        if (rc < 0)
            return rc;
        /* never O_CREAT through a name not checked: the file is made only
         * in the directory just checked, and only when it is not there;
         * an entry of /proc is opened as it leads, never made */
        int fd = openat(d, base, proc ? flags & ~O_NOFOLLOW : flags);
        if (fd < 0 && errno == ENOENT && !proc)
            fd = openat(d, base, flags | O_CREAT | O_EXCL, mode);
        int e = errno;
        close(d);
        if (fd >= 0) {
            rc = check_file(f, fd, proc, err);
            if (rc < 0)
                close(fd);
            return rc < 0 ? rc : fd;
        }
        /* made, or made a symbolic link, since it was looked at: again */
        if (e != EEXIST && e != ELOOP)
            return fail(err, e, NULL);
    }
    return fail(err, EAGAIN, "the name kept changing while it was opened");
}
