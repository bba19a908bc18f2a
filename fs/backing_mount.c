/* A private copy of the backing directory's mount, with an atime rule of
 * its own. */
#include "backing_mount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <unistd.h>

int backing_mount_set_atime(int tree, unsigned long rule)
{
    struct mount_attr attr = {.attr_clr = MOUNT_ATTR__ATIME | MOUNT_ATTR_NODIRATIME};
    /* as the kernel reads the flags: strictatime is the absence of the others */
    bool relatime = (rule & MS_RELATIME) && !(rule & MS_STRICTATIME);
    attr.attr_set = (rule & MS_NOATIME) ? MOUNT_ATTR_NOATIME
                    : relatime          ? MOUNT_ATTR_RELATIME
                                        : MOUNT_ATTR_STRICTATIME;
    if (rule & MS_NODIRATIME)
        attr.attr_set |= MOUNT_ATTR_NODIRATIME;
    if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
        return -errno;
    return 0;
}

int backing_mount_open(const char *dir, unsigned long rule)
{
    /* the directory's own mount alone: nodes on mounts below it keep a
     * descriptor of their own (nodes/), and a copy of those would keep
     * their file systems busy after their unmount */
    int tree = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0)
        return -errno;
    int err = backing_mount_set_atime(tree, rule);
    if (err) {
        close(tree);
        return err;
    }
    return tree;
}
