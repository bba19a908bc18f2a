/* The ways from a node to its backing object: a cached descriptor, a
 * pinned one, or an open by handle. */
#include "nodes-private.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int node_fd(NodeTable *t, Node *n, NodeFd *out)
{
    if (n->pinned_fd >= 0) {
        out->fd = n->pinned_fd;
        out->entry = NULL;
        return 0;
    }
    if (!nhandle_present(&n->handle))
        return -ESTALE; /* a virtual node has no backing object */
    FdCache *c = &t->fdcache;
    if (fdcache_get(c, n, out))
        return 0;
    HandleBuf h;
    struct file_handle *fh = nhandle_fh(&n->handle, &h);
    int fd = open_by_handle_at(t->mount_fd, fh, O_PATH | O_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && fdcache_shrink(c)) {
        /* out of descriptors (many open files): the cache gives way */
        fd = open_by_handle_at(t->mount_fd, fh, O_PATH | O_CLOEXEC);
    }
    if (fd < 0)
        return node_mark_stale(t, n, -errno);
    fdcache_insert(c, n, fd, out);
    return 0;
}

void node_fd_put(NodeTable *t, NodeFd *f)
{
    fdcache_put(&t->fdcache, f);
}

int node_fstat(NodeTable *t, Node *n, struct stat *st)
{
    /* initialised: with node_fd inlined, -O3 gcc cannot see it is set */
    NodeFd f = {.fd = -1, .entry = NULL};
    int err = node_fd(t, n, &f);
    if (err)
        return err;
    if (fstatat(f.fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = -errno;
    node_fd_put(t, &f);
    return err;
}

static int node_open_as(NodeTable *t, Node *n, int flags);

int node_open(NodeTable *t, Node *n, int flags)
{
    flags &= ~(O_CREAT | O_EXCL | O_NOCTTY);
    flags |= O_CLOEXEC;
    /* through the private copy of the backing mount the copy's atime rule
     * holds; elsewhere (no copy, a node with a descriptor of its own) the
     * daemon's own reads keep a noatime mount's rule with O_NOATIME */
    bool via_copy = __atomic_load_n(&n->pinned_fd, __ATOMIC_ACQUIRE) < 0 &&
                    nhandle_present(&n->handle) && t->data_mount_fd != t->mount_fd;
    if (!via_copy && __atomic_load_n(&t->noatime, __ATOMIC_RELAXED)) {
        int fd = node_open_as(t, n, flags | O_NOATIME);
        if (fd != -EPERM)
            return fd;
    }
    return node_open_as(t, n, flags);
}

static int node_open_as(NodeTable *t, Node *n, int flags)
{
    int fd;
    HandleBuf h;
    struct file_handle *fh = nhandle_fh(&n->handle, &h);
    if (n->pinned_fd >= 0) {
        /* first: a handle of an object without a name does not open on
         * every file system.  Through the descriptor's magic link, which
         * O_NOFOLLOW would refuse (ELOOP): the descriptor is the object
         * itself, never a name that could have become a symlink */
        char proc[64];
        g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", n->pinned_fd);
        fd = open(proc, S_ISLNK(n->type) ? flags : flags & ~O_NOFOLLOW);
    } else if (fh) {
        fd = open_by_handle_at(t->data_mount_fd, fh, flags);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && fdcache_shrink(&t->fdcache))
            fd = open_by_handle_at(t->data_mount_fd, fh, flags);
    } else {
        return -ESTALE;
    }
    return fd < 0 ? node_mark_stale(t, n, -errno) : fd;
}

int node_open_live(NodeTable *t, Node *n, int flags, struct stat *st)
{
    int fd = node_open(t, n, flags);
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    /* An open by name of an object that no longer has one: its name was
     * replaced or removed behind the mount's back while the kernel still
     * cached it.  ESTALE makes the kernel look the name up again (and find
     * the new file) instead of reading the old one.  Not by "no open
     * file": the kernel sends RELEASE after close asynchronously, so a file
     * just closed may still count as open.  But a file whose last name went
     * through the mount while it was open has no name the kernel could
     * still cache: an open of it is a reopen (by handle, /proc/PID/fd). */
    if (st->st_nlink == 0 && !node_nameless_open(t, n)) {
        close(fd);
        return node_mark_stale(t, n, -ESTALE);
    }
    return fd;
}
