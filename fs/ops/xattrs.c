/* Extended attributes: of backing objects through /proc/self/fd (the
 * f*xattr calls refuse O_PATH descriptors), changes checked by the policy
 * as writes; of view entries, what views.c gives (read-only). */
#include <string.h>
#include <sys/xattr.h>

#include "enforce.h"
#include "ops.h"
#include "ops-private.h"
#include "views/views.h"

/* setxattr, or removexattr when value is NULL (FUSE never passes NULL for
 * setxattr): a write for the policy, done with the caller's rights through
 * /proc/self/fd since the f*xattr calls refuse O_PATH descriptors.  The
 * magic link resolves to the object itself, a symlink included (it is not
 * followed again): the backing file system answers as for any symlink. */
static int do_xattr_change(struct ckptfs *fs, fuse_req_t req, Node *n, const char *name,
                           const char *value, size_t size, int flags)
{
    if (n->kind == NODE_VIRTUAL && value) /* _views/.control; EROFS elsewhere */
        return views_setxattr(fs, req, n, name, value, size);
    int err = fs_check_write(fs, req, value ? "setxattr" : "removexattr", n);
    if (err)
        return err;
    NodeFd f;
    if ((err = node_fd(&fs->nodes, n, &f)))
        return err;
    char proc[64];
    proc_path(proc, sizeof proc, f.fd);
    Creds c;
    creds_enter(fs, req, false, &c);
    int r = value ? setxattr(proc, name, value, size, flags) : removexattr(proc, name);
    err = r < 0 ? -errno : 0;
    creds_leave(fs, &c);
    if (!err && value && strcmp(name, "system.posix_acl_access") == 0 &&
        creds_drop_sgid_acl(req, f.fd))
        kernel_attrs_stale(fs, n);
    node_fd_put(&fs->nodes, &f);
    return err;
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_SETXATTR);
    reply_err(fs, req, do_xattr_change(fs, req, node_by_ino(fs, ino), name, value, size, flags));
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_REMOVEXATTR);
    reply_err(fs, req, do_xattr_change(fs, req, node_by_ino(fs, ino), name, NULL, 0, 0));
}

/* The mount root answers user.ckptfs.views with the views directory's
 * name (-o views=NAME), so a tool given only the mount point finds its
 * views.  Read-only and not listed: the root's own attributes are the
 * backing directory's. */
#define XATTR_VIEWS "user.ckptfs.views"

/* getxattr, or listxattr when name is NULL: the value (or the list of
 * names, each with its NUL) in *value.  With size 0 (the caller asks for
 * the length) *value has the right length; its bytes are not sent. */
static int do_getxattr(struct ckptfs *fs, Node *n, const char *name, size_t size, GBytes **value)
{
    if (name && n == fs->nodes.root && strcmp(name, XATTR_VIEWS) == 0) {
        *value = g_bytes_new(fs->opt.views_name, strlen(fs->opt.views_name));
        return 0;
    }
    if (n->kind != NODE_BACKING) {
        if (name)
            return views_getxattr(fs, n, name, value);
        GString *names = g_string_new(NULL);
        int err = views_listxattr(fs, n, names);
        *value = g_string_free_to_bytes(names);
        return err;
    }
    NodeFd f;
    int err = node_fd(&fs->nodes, n, &f);
    if (err)
        return err;
    char proc[64];
    proc_path(proc, sizeof proc, f.fd);
    /* size 0 asks for the length: a zeroed value of that length answers */
    char *buf = size ? g_malloc(size) : NULL;
    ssize_t r = name ? getxattr(proc, name, buf, size) : listxattr(proc, buf, size);
    if (r > 0 && !size)
        buf = g_malloc0((gsize)r);
    err = r < 0 ? -errno : 0;
    node_fd_put(&fs->nodes, &f);
    /* a backing file system without ACLs has none: the kernel, which
     * enforces them, takes EOPNOTSUPP for a failure of every access */
    if (err == -EOPNOTSUPP && name && g_str_has_prefix(name, "system.posix_acl_"))
        err = -ENODATA;
    if (err) {
        g_free(buf);
        return err;
    }
    *value = g_bytes_new_take(buf, (gsize)r);
    return 0;
}

/* The one reply of getxattr and listxattr. */
static void reply_xattr(struct ckptfs *fs, fuse_req_t req, int err, size_t size, GBytes *value)
{
    gsize len = 0;
    const char *data = value ? g_bytes_get_data(value, &len) : NULL;
    if (!err && size > 0 && len > size)
        err = -ERANGE;
    if (err)
        reply_err(fs, req, err);
    else if (size == 0)
        fuse_reply_xattr(req, len);
    else
        fuse_reply_buf(req, data, len);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_GETXATTR);
    g_autoptr(GBytes) value = NULL;
    int err = do_getxattr(fs, node_by_ino(fs, ino), name, size, &value);
    reply_xattr(fs, req, err, size, value);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct ckptfs *fs = fs_of(req);
    fs_metric_op(fs->metrics, FS_OP_LISTXATTR);
    g_autoptr(GBytes) value = NULL;
    int err = do_getxattr(fs, node_by_ino(fs, ino), NULL, size, &value);
    reply_xattr(fs, req, err, size, value);
}
