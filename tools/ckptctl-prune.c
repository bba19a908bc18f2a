/* The removal of one directory tree for ckptctl prune, beneath the
 * checkpoint directory's descriptor: every step is an openat or unlinkat
 * relative to a descriptor of the directory above it, with O_NOFOLLOW /
 * AT_SYMLINK_NOFOLLOW, so a symlink anywhere below is removed itself and
 * never followed, and nothing outside the tree is touched.  Nothing on
 * another mount is entered: a mount point below is left, with its parents,
 * and reported. */
#include "ckptctl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "resolve.h"

typedef struct {
    dev_t dev;     /* the tree's file system */
    guint64 freed; /* st_blocks * 512 of each inode whose last link went */
    int err;       /* the first failure, as an errno */
    char *where;   /* its path, relative to the checkpoint directory */
} Removal;

static void note_failure(Removal *r, const char *path, int e)
{
    if (r->err)
        return;
    r->err = e;
    r->where = g_strdup(path);
}

/* A mount point (another file system, or a bind mount of this one): statx
 * says so where the kernel can tell, st_dev otherwise. */
static bool is_mount_point(Removal *r, int pfd, const char *name, const struct stat *sb)
{
    if (sb->st_dev != r->dev)
        return true;
    struct statx sx;
    if (statx(pfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0, &sx) == 0 &&
        (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
        return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
    return false;
}

static void remove_dir(Removal *r, int pfd, const char *name, const struct stat *sb,
                       const char *path, int depth);

/* Removes entry `name` of directory pfd, whatever it is; a directory with
 * everything below it. */
static void remove_entry(Removal *r, int pfd, const char *name, const char *path, int depth)
{
    struct stat sb;
    if (fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) /* removed by someone else meanwhile: that is as well */
            note_failure(r, path, errno);
        return;
    }
    if (S_ISDIR(sb.st_mode)) {
        remove_dir(r, pfd, name, &sb, path, depth);
        return;
    }
    /* a symlink, a file, a FIFO, a socket, a device node: the name goes,
     * what it names (its target, the device) is never opened */
    if (unlinkat(pfd, name, 0) != 0) {
        if (errno != ENOENT)
            note_failure(r, path, errno);
        return;
    }
    if (sb.st_nlink <= 1)
        r->freed += (guint64)sb.st_blocks * 512;
}

#define MAX_DEPTH 4096 /* deeper than PATH_MAX allows names to nest anyway */

static void remove_dir(Removal *r, int pfd, const char *name, const struct stat *sb,
                       const char *path, int depth)
{
    if (is_mount_point(r, pfd, name, sb)) {
        note_failure(r, path, EXDEV); /* another file system: never entered */
        return;
    }
    if (depth > MAX_DEPTH) {
        note_failure(r, path, ELOOP);
        return;
    }
    int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            note_failure(r, path, errno);
        return;
    }
    struct stat now;
    if (fstat(fd, &now) != 0 || now.st_dev != sb->st_dev || now.st_ino != sb->st_ino) {
        /* replaced between the look and the open: not the directory judged */
        note_failure(r, path, EAGAIN);
        close(fd);
        return;
    }
    /* the names first, then the removals: a directory is not changed while
     * it is being read */
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    CkDirIter it;
    ck_dir_iter_init(&it, fd);
    const char *nm;
    unsigned char t;
    while ((nm = ck_dir_iter_next(&it, &t)) != NULL)
        g_ptr_array_add(names, g_strdup(nm));
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *cp = g_strconcat(path, "/", names->pdata[i], NULL);
        remove_entry(r, fd, names->pdata[i], cp, depth + 1);
    }
    close(fd);
    if (unlinkat(pfd, name, AT_REMOVEDIR) == 0)
        r->freed += (guint64)sb->st_blocks * 512;
    else if (errno != ENOENT && !(r->err && errno == ENOTEMPTY))
        note_failure(r, path, errno); /* ENOTEMPTY after a failure below says nothing new */
}

int ckptctl_remove_tree(int dfd, const char *path, guint64 *freed, char **where)
{
    *freed = 0;
    *where = NULL;
    g_autofree char *parent = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    struct stat top;
    if (fstat(dfd, &top) != 0) {
        *where = g_strdup(".");
        return -errno;
    }
    int pfd = ck_open_beneath(dfd, strcmp(parent, ".") ? parent : "", O_RDONLY | O_DIRECTORY, NULL);
    if (pfd < 0) {
        *where = g_strdup(parent);
        return pfd;
    }
    Removal r = {.dev = top.st_dev};
    struct stat sb;
    if (fstatat(pfd, base, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        note_failure(&r, path, errno);
    else if (!S_ISDIR(sb.st_mode))
        note_failure(&r, path, S_ISLNK(sb.st_mode) ? ELOOP : ENOTDIR);
    else
        remove_dir(&r, pfd, base, &sb, path, 0);
    close(pfd);
    *freed = r.freed;
    *where = r.where;
    return -r.err;
}
