/* Objects that lose their last name through the mount: a directory's
 * node keeps a descriptor (node_keep_removed_dir), an open file's node
 * keeps serving opens (node_note_unlinked), and any other lets go of its
 * cached descriptor then, so that the backing frees the object with the
 * unlink, as it would without the mount, not at the kernel's FORGET. */
#include "nodes-private.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

void node_keep_removed_dir(NodeTable *t, int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return; /* not a directory, or nothing there */
    struct stat st;
    bool kept = false;
    if (fstat(fd, &st) == 0) {
        NodeKey k = {st.st_dev, st.st_ino};
        g_mutex_lock(&t->lock);
        Node *n = g_hash_table_lookup(t->backing, &k);
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

bool node_unlink_victim(NodeTable *t, int dirfd, const char *name, NodeKey *key)
{
    /* only a node that is open or whose descriptor is cached holds the
     * object past its last name */
    if (__atomic_load_n(&t->open_files, __ATOMIC_RELAXED) == 0 && !fdcache_holds_any(&t->fdcache))
        return false;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode) ||
        st.st_nlink != 1)
        return false;
    *key = (NodeKey){st.st_dev, st.st_ino};
    return true;
}

bool node_rename_victim(NodeTable *t, int fromfd, const char *from, int dirfd, const char *name,
                        NodeKey *key)
{
    if (!node_unlink_victim(t, dirfd, name, key))
        return false;
    /* a rename onto another name of the same object removes nothing */
    struct stat st;
    return fstatat(fromfd, from, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           (st.st_dev != key->dev || st.st_ino != key->ino);
}

void node_note_unlinked(NodeTable *t, const NodeKey *key)
{
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, key);
    if (n && n->nopen > 0) {
        n->nameless_open = true; /* its last release lets go of it */
        n = NULL;
    }
    g_mutex_unlock(&t->lock);
    /* n only names the cache's entry: a node freed meanwhile has none, and
     * one made since at its address loses a cached descriptor, no more */
    if (n)
        fdcache_drop(&t->fdcache, n);
}

void node_set_nameless_open(NodeTable *t, Node *n, bool nameless)
{
    g_mutex_lock(&t->lock);
    n->nameless_open = nameless;
    g_mutex_unlock(&t->lock);
}
