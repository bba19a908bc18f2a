/* Acting as the caller (docs/DESIGN.md, "Namespaces and the write
 * policy"): creates are made with the caller's
 * fsuid, fsgid and supplementary groups, switched per worker thread. */
#include <sys/fsuid.h>
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

void creds_leave(struct ckptfs *fs, Creds *c)
{
    if (!c->switched)
        return;
    setfsuid(fs->euid);
    setfsgid(fs->egid);
    syscall(SYS_setgroups, (size_t)fs->ngroups, fs->groups);
    c->switched = false;
}
