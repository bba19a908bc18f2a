/* Objects that lose their last name through the mount: an open one's node
 * keeps serving opens (node_note_unlinked) and the holder (the
 * supervisor) a descriptor of it for the next daemon; a directory's node
 * keeps a descriptor where the kernel opens directories without telling;
 * and, where space is short, another regular file or symlink lets go of
 * its cached descriptor then, so that the backing frees it with the
 * unlink, as it would without the mount, not at the kernel's FORGET. */
#include "nodes-private.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Whether the file system of fd is short of space: less than 1 GiB, or
 * less than a tenth of it up to 16 GiB, left to unprivileged writers.
 * The answer stands for a second: on a network backing a statfs is a
 * round trip. */
static bool space_short(NodeTable *t, int fd)
{
    gint64 now = g_get_monotonic_time();
    if (now < __atomic_load_n(&t->space_until, __ATOMIC_ACQUIRE))
        return __atomic_load_n(&t->space_short, __ATOMIC_RELAXED);
    struct statvfs sv;
    bool shortage = true; /* not known: as if short */
    if (fstatvfs(fd, &sv) == 0 && sv.f_frsize > 0) {
        uint64_t enough = MIN((uint64_t)sv.f_blocks / 10, ((uint64_t)16 << 30) / sv.f_frsize);
        enough = MAX(enough, ((uint64_t)1 << 30) / sv.f_frsize);
        shortage = (uint64_t)sv.f_bavail < enough;
    }
    __atomic_store_n(&t->space_short, shortage, __ATOMIC_RELAXED);
    __atomic_store_n(&t->space_until, now + G_USEC_PER_SEC, __ATOMIC_RELEASE);
    return shortage;
}

/* dirfd/name, a directory whose object is key, is being removed: its node
 * keeps an O_PATH descriptor of it, so that an fstat of it open somewhere
 * still answers (st_nlink 0, as natively).  Kept for the node's life even
 * when the removal then fails (ENOTEMPTY): node_fd hands the descriptor
 * out without a reference, so it is never taken back while the node
 * lives; it still names the live directory. */
static void keep_removed_dir(NodeTable *t, int dirfd, const char *name, const NodeKey *key)
{
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return; /* not a directory any more, or nothing there */
    struct stat st;
    bool kept = false;
    if (fstat(fd, &st) == 0 && st.st_dev == key->dev && st.st_ino == key->ino) {
        g_mutex_lock(&t->lock);
        Node *n = g_hash_table_lookup(t->backing, key);
        if (n && n->pinned_fd < 0) {
            /* node_fd reads it without the lock: an fd, or -1 and the handle */
            __atomic_store_n(&n->pinned_fd, fd, __ATOMIC_RELEASE);
            kept = true;
        }
        g_mutex_unlock(&t->lock);
    }
    if (!kept)
        close(fd);
}

bool node_unlink_victim(NodeTable *t, int dirfd, const char *name, bool dirs_untold, NodeVictim *v)
{
    v->now = space_short(t, dirfd);
    /* asked even when no file is open: an open racing this unlink counts
     * itself before its open, and the count must be read after the
     * removal (node_note_unlinked) */
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    v->key = (NodeKey){st.st_dev, st.st_ino};
    /* a directory: open somewhere for all the daemon knows when the kernel
     * does not tell it of opens */
    v->open_untold = S_ISDIR(st.st_mode) && dirs_untold;
    if (v->open_untold)
        keep_removed_dir(t, dirfd, name, &v->key);
    /* only regular files and symlinks hold blocks a descriptor would keep;
     * the kernel opens FIFOs, sockets and devices without telling the
     * daemon, so their nodes must keep their descriptors */
    else if (!S_ISDIR(st.st_mode) &&
             (!(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) || st.st_nlink != 1))
        return false;
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, &v->key);
    v->generation = n ? n->generation : 0;
    if (n)
        n->unlinking = true;
    g_mutex_unlock(&t->lock);
    return n != NULL; /* no node: nothing of the daemon's holds it */
}

void node_note_unlinked(NodeTable *t, const NodeVictim *v, bool removed)
{
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, &v->key);
    /* the generation tells the node from one made meanwhile for an object
     * that took the freed inode number */
    if (n && n->generation != v->generation)
        n = NULL;
    bool let_go = false, hold = false;
    if (n) {
        n->unlinking = false;
        if (removed && (n->nopen > 0 || v->open_untold)) {
            n->nameless_open = true;
            node_sync_locked(t, n);
            const NodeOpen *o = g_atomic_pointer_get(&n->open);
            hold = t->holder && !n->held && !(o && o->backing_id);
        }
        if (hold && n->pinned_fd >= 0) {
            /* here, under the lock: nothing keeps a directory the kernel
             * does not say is open from its FORGET once the lock goes */
            int fd = fcntl(n->pinned_fd, F_DUPFD_CLOEXEC, 0);
            if (fd >= 0 && !node_hold_locked(t, n, fd))
                close(fd);
            hold = false;
        }
        let_go = removed && n->nopen == 0 && v->now;
    }
    g_mutex_unlock(&t->lock);
    /* n only names the cache's entry: a node freed meanwhile has none, and
     * one made since at its address loses a cached descriptor, no more */
    if (let_go)
        fdcache_drop(&t->fdcache, n);
    /* an open file (nopen): the kernel holds its node until this
     * request's reply */
    NodeFd f;
    if (hold && node_fd(t, n, &f) == 0) {
        node_hold_nameless(t, n, fcntl(f.fd, F_DUPFD_CLOEXEC, 0));
        node_fd_put(t, &f);
    }
}

void node_hold_nameless(NodeTable *t, Node *n, int fd)
{
    if (fd < 0)
        return;
    g_mutex_lock(&t->lock);
    bool taken = node_hold_locked(t, n, fd);
    g_mutex_unlock(&t->lock);
    if (!taken)
        close(fd);
}

void node_set_nameless_open(NodeTable *t, Node *n, bool nameless)
{
    g_mutex_lock(&t->lock);
    n->nameless_open = nameless;
    node_sync_locked(t, n);
    if (!nameless) { /* linked: it has a name to be found by */
        node_let_go_locked(t, n);
        node_unpin_count_locked(t, n);
    }
    g_mutex_unlock(&t->lock);
}
