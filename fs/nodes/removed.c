/* Directories removed through the mount: their nodes keep a descriptor
 * (nodes.h, node_keep_removed_dir). */
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
