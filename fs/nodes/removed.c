/* Objects that lose their last name through the mount: a directory's
 * node keeps a descriptor (node_keep_removed_dir), an open file's node
 * keeps serving opens (node_note_unlinked). */
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
    if (__atomic_load_n(&t->open_files, __ATOMIC_RELAXED) == 0)
        return false;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        st.st_nlink != 1)
        return false;
    *key = (NodeKey){st.st_dev, st.st_ino};
    return true;
}

void node_note_unlinked(NodeTable *t, const NodeKey *key)
{
    g_mutex_lock(&t->lock);
    Node *n = g_hash_table_lookup(t->backing, key);
    if (n && n->nopen > 0)
        n->nameless_open = true;
    g_mutex_unlock(&t->lock);
}

void node_set_nameless_open(NodeTable *t, Node *n, bool nameless)
{
    g_mutex_lock(&t->lock);
    n->nameless_open = nameless;
    g_mutex_unlock(&t->lock);
}
