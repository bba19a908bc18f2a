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
/* The umask this thread last set (-1: not yet): callers mostly share one,
 * and only this function sets a thread's own, so it is set when it differs. */
static _Thread_local int set_umask = -1;

mode_t creds_mode(struct ckptfs *fs, fuse_req_t req, mode_t mode)
{
    if (!fs->dont_mask)
        return mode & 07777; /* the kernel masked it; the daemon's umask is 0 */
    mode_t mask = fuse_req_ctx(req)->umask & 0777;
    if (!own_umask)
        own_umask = unshare(CLONE_FS) == 0 ? 1 : -1;
    if (own_umask < 0)
        return mode & 07777 & ~mask; /* no default ACL then, but the right mode */
    /* the backing file system applies it, or a default ACL of the parent */
    if ((int)mask != set_umask) {
        umask(mask);
        set_umask = (int)mask;
    }
    return mode & 07777;
}

/* Whether req's caller has group gid (its own or a supplementary one). */
static bool caller_in_group(fuse_req_t req, gid_t gid)
{
    if (fuse_req_ctx(req)->gid == gid)
        return true;
    gid_t small[64];
    int n = fuse_req_getgroups(req, G_N_ELEMENTS(small), small);
    if (n < 0)
        return true; /* unknown (the caller is gone): keep the bit */
    g_autofree gid_t *big = NULL;
    gid_t *list = small;
    if (n > (int)G_N_ELEMENTS(small)) {
        big = g_new(gid_t, n);
        n = fuse_req_getgroups(req, n, big);
        list = big;
    }
    for (int i = 0; i < n; i++)
        if (list[i] == gid)
            return true;
    return false;
}

bool creds_sgid_to_drop(fuse_req_t req, const struct stat *st)
{
    /* uid 0 stands for CAP_FSETID: the request carries no capabilities */
    return S_ISREG(st->st_mode) && (st->st_mode & (S_ISGID | S_IXGRP)) == S_ISGID &&
           fuse_req_ctx(req)->uid != 0 && !caller_in_group(req, st->st_gid);
}

static void chmod_without_sgid(int fd, const struct stat *st)
{
    char proc[64];
    proc_path(proc, sizeof proc, fd); /* fchmod refuses an O_PATH descriptor */
    if (chmod(proc, st->st_mode & 07777 & ~S_ISGID) < 0)
        g_debug("ckptfs: dropping the set-group-ID bit: %s", g_strerror(errno));
}

bool creds_drop_sgid_acl(fuse_req_t req, int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !(st.st_mode & S_ISGID) || fuse_req_ctx(req)->uid == 0 ||
        caller_in_group(req, st.st_gid))
        return false;
    chmod_without_sgid(fd, &st);
    return true;
}

bool creds_drop_sgid(fuse_req_t req, int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !creds_sgid_to_drop(req, &st))
        return false;
    chmod_without_sgid(fd, &st);
    return true;
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
