/* Acting as the caller (docs/DESIGN.md, "Namespaces and the write
 * policy"): creates are made with the caller's
 * fsuid, fsgid and supplementary groups, switched per worker thread. */
#include <sched.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "ops.h"
#include "ops-private.h"

int ckptfs_creds_init(struct ckptfs *fs)
{
    fs->euid = geteuid();
    fs->egid = getegid();
    fs->is_root = fs->euid == 0;
    int n = getgroups(0, NULL);
    if (n < 0)
        return -errno;
    fs->groups = g_new0(gid_t, n + 1);
    fs->ngroups = getgroups(n, fs->groups);
    if (fs->ngroups < 0)
        fs->ngroups = 0;
    return 0;
}

/* Switches this worker thread's fsuid, fsgid and supplementary groups to the
 * caller's, when the caller is not the daemon's own user and either the
 * request creates something (ownership) or the kernel does not check
 * permissions itself.  setfsuid/setfsgid and the raw setgroups system call
 * act on the calling thread only (glibc's setgroups would change all). */
void creds_enter(struct ckptfs *fs, fuse_req_t req, bool creating, Creds *c)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    c->switched = false;
    if (!fs->is_root || (ctx->uid == fs->euid && ctx->gid == fs->egid))
        return;
    if (!creating && fs->opt.default_permissions)
        return;
    gid_t small[64];
    gid_t *list = small;
    int n = fuse_req_getgroups(req, G_N_ELEMENTS(small), small);
    g_autofree gid_t *big = NULL;
    if (n > (int)G_N_ELEMENTS(small)) {
        big = g_new(gid_t, n);
        n = fuse_req_getgroups(req, n, big);
        list = big;
    }
    if (n < 0)
        n = 0;
    syscall(SYS_setgroups, (size_t)n, list);
    setfsgid(ctx->gid);
    setfsuid(ctx->uid);
    c->switched = true;
}

/* Whether this thread has a umask of its own: threads share one (the
 * process's fs_struct) until each unshares it, once. */
static _Thread_local int own_umask; /* 0 not tried, 1 yes, -1 unshare failed */

mode_t creds_mode(struct ckptfs *fs, fuse_req_t req, mode_t mode)
{
    if (!fs->posix_acl)
        return mode & 07777; /* the kernel masked it; the daemon's umask is 0 */
    mode_t mask = fuse_req_ctx(req)->umask & 0777;
    if (!own_umask)
        own_umask = unshare(CLONE_FS) == 0 ? 1 : -1;
    if (own_umask < 0)
        return mode & 07777 & ~mask; /* no default ACL then, but the right mode */
    /* the backing file system applies it, or a default ACL of the parent */
    umask(mask);
    return mode & 07777;
}

void creds_leave(struct ckptfs *fs, Creds *c)
{
    if (!c->switched)
        return;
    setfsuid(fs->euid);
    setfsgid(fs->egid);
    syscall(SYS_setgroups, (size_t)fs->ngroups, fs->groups);
    c->switched = false;
}
