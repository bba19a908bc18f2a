#include "enforce.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernel/kio.h"
#include "views/control.h"

CkCaller fs_caller(struct ckptfs *fs, fuse_req_t req)
{
    if (!fs->identity)
        return (CkCaller){NULL, CK_IDENTITY_NONE, NULL};
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    return ck_identity_caller(fs->identity, ctx->pid, ctx->uid);
}

char *fs_node_path(struct ckptfs *fs, Node *n)
{
    if (n == fs->nodes.root)
        return g_strdup("");
    if (n->kind != NODE_BACKING)
        return g_strdup_printf("%s/%s", fs->opt.views_name, node_vkey(n) ? node_vkey(n) : "");
    NodeFd f;
    if (node_fd(&fs->nodes, n, &f) < 0)
        return NULL;
    char proc[64], buf[PATH_MAX + 1];
    g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", f.fd);
    ssize_t len = readlink(proc, buf, sizeof buf - 1);
    node_fd_put(&fs->nodes, &f);
    if (len < 0)
        return NULL;
    buf[len] = '\0';
    if (strncmp(buf, fs->backing, fs->backing_len) == 0 &&
        (buf[fs->backing_len] == '/' || buf[fs->backing_len] == '\0')) {
        const char *rel = buf + fs->backing_len;
        while (*rel == '/')
            rel++;
        return g_strdup(rel);
    }
    return g_strdup(buf);
}

/* A record's path for entry name of dir.  An unnamed file (O_TMPFILE)
 * reaches create as KIO_TMPFILE_NAME, which no entry can be called, and an
 * empty name is none either: such a record names the directory, written
 * as any other path ("" for the mount root), never with a '/' appended. */
static char *entry_path(struct ckptfs *fs, Node *dir, const char *name)
{
    g_autofree char *p = fs_node_path(fs, dir);
    if (!name || !*name || strcmp(name, KIO_TMPFILE_NAME) == 0)
        return g_steal_pointer(&p);
    if (!p || !*p)
        return g_strdup(name);
    return g_strconcat(p, "/", name, NULL);
}

static char *caller_comm(pid_t pid)
{
    char path[64];
    g_snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    g_strchomp(text);
    return text;
}

/* Collisions reach the log (log.h: a warning when refused, info when
 * allowed, with their fields in the journal), at most REFUSAL_LOG_BURST per
 * REFUSAL_LOG_WINDOW_US so that a test suite crossing in a loop cannot
 * flood it; the ones left out are counted and the count is logged with
 * the first collision of a later window.  .collisions has every one. */
#define REFUSAL_LOG_BURST     10
#define REFUSAL_LOG_WINDOW_US (5 * G_USEC_PER_SEC)

static void log_collision(struct ckptfs *fs, const CkCollision *c)
{
    LogLimit *l = &fs->log_limit;
    gint64 now = g_get_monotonic_time();
    guint64 said_later = 0;
    g_mutex_lock(&l->lock);
    if (l->window_start == 0 || now - l->window_start >= REFUSAL_LOG_WINDOW_US) {
        said_later = l->suppressed;
        l->suppressed = 0;
        l->in_window = 0;
        l->window_start = now;
    }
    bool logged = l->in_window < REFUSAL_LOG_BURST;
    if (logged)
        l->in_window++;
    else
        l->suppressed++;
    g_mutex_unlock(&l->lock);
    if (said_later)
        log_event(G_LOG_LEVEL_WARNING, LOG_ID_COLLISION,
                  "%" G_GUINT64_FORMAT " more collision(s) not logged (at most %d per %d s; "
                  "every one is in %s)",
                  said_later, REFUSAL_LOG_BURST, (int)(REFUSAL_LOG_WINDOW_US / G_USEC_PER_SEC),
                  ".collisions");
    if (logged)
        log_collision_record(c);
}

/* Carries out a decision: records it when core says so (the paths are
 * derived only then), and answers 0 to go on or -errno. */
static int apply(struct ckptfs *fs, fuse_req_t req, const CkDecision *d, const char *op,
                 const CkCaller *caller, Node *dir, const char *name, Node *dir2, const char *name2,
                 const char *literal2)
{
    if (!d->record)
        return d->proceed ? 0 : -d->err;
    atomic_fetch_add_explicit(&fs->metrics->refusals[d->verdict][d->proceed ? 1 : 0], 1,
                              memory_order_relaxed);
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    g_autofree char *path = entry_path(fs, dir, name);
    g_autofree char *path2 = dir2 ? entry_path(fs, dir2, name2) : NULL;
    pid_t pid = ck_proc_tgid("/proc", ctx->pid); /* the kernel gives the thread's id */
    g_autofree char *comm = caller_comm(pid);
    const char *tag_env = control_tag_env(fs); /* tag_env= may change on a live mount */
    g_autofree char *tag = tag_env ? ck_proc_env_value("/proc", ctx->pid, tag_env) : NULL;
    CkCollision c = {
        .time_us = g_get_real_time(),
        .kind = ck_verdict_kind(d->verdict),
        .denied = !d->proceed,
        .op = op,
        .path = path ? path : "",
        .path2 = path2 ? path2 : literal2,
        .caller_job = caller->job == CK_CALLER_INVALID ? NULL : caller->job,
        .identity = ck_identity_mode_name(caller->mode),
        .identity_value = caller->value,
        .owner_job = d->owner_job,
        .pid = pid,
        .uid = ctx->uid,
        .comm = comm,
        .has_tag = tag_env != NULL,
        .tag = tag,
    };
    ck_collision_log_append(fs->collisions, &c);
    log_collision(fs, &c);
    return d->proceed ? 0 : -d->err;
}

/* The mode now: policy= and legacy= may change on a live mount (_views/.control). */
static CkPolicy mode_of(struct ckptfs *fs)
{
    return (CkPolicy){
        .legacy_rw = __atomic_load_n(&fs->policy.legacy_rw, __ATOMIC_RELAXED),
        .audit = __atomic_load_n(&fs->policy.audit, __ATOMIC_RELAXED),
        .off = fs->policy.off,
        .anonymous_deny = fs->policy.anonymous_deny,
    };
}

int fs_check_write(struct ckptfs *fs, fuse_req_t req, const char *op, Node *n)
{
    CkNs ns = node_ns(&fs->nodes, n);
    g_auto(CkCaller) caller = fs_caller(fs, req);
    const char *job = caller.job;
    CkPolicy mode = mode_of(fs);
    CkDecision d = ck_decide_write(&mode, job, ns);
    return apply(fs, req, &d, op, &caller, n, NULL, NULL, NULL, NULL);
}

static int entry_kind(struct ckptfs *fs, Node *dir, const char *name, mode_t *type, char **target);

int fs_check_remove(struct ckptfs *fs, fuse_req_t req, const char *op, Node *dir, const char *name,
                    CkNs *entry_out)
{
    /* directly in _state/_jobs what is removed decides whose it is: a job's
     * root is a directory, a file there is nobody's (unlink of a job's root
     * goes on to the backing file system's EISDIR) */
    CkNs pns = node_ns(&fs->nodes, dir);
    mode_t type = strcmp(op, "rmdir") == 0 ? S_IFDIR : S_IFREG;
    g_autofree char *target = NULL;
    if (pns.kind == CK_NS_STRUCT && !fs->policy.off) {
        int err = entry_kind(fs, dir, name, &type, &target);
        if (err && err != -ENOENT) /* gone: the removal says so, or finds it done */
            return err;
    }
    CkNs ns = ck_ns_child_of(pns, name, S_ISDIR(type), fs->opt.views_name);
    *entry_out = ns;
    g_auto(CkCaller) caller = fs_caller(fs, req);
    const char *job = caller.job;
    CkPolicy mode = mode_of(fs);
    CkDecision d = ck_decide_write(&mode, job, ns);
    return apply(fs, req, &d, op, &caller, dir, name, NULL, NULL, NULL);
}

int fs_check_create(struct ckptfs *fs, fuse_req_t req, const char *op, Node *parent,
                    const char *name, bool is_dir, CkNs *child_out)
{
    g_auto(CkCaller) caller = fs_caller(fs, req);
    const char *job = caller.job;
    CkPolicy mode = mode_of(fs);
    CkDecision d =
        ck_decide_create(&mode, job, node_ns(&fs->nodes, parent), name, is_dir, fs->opt.views_name);
    *child_out = d.ns;
    return apply(fs, req, &d, op, &caller, parent, name, NULL, NULL, NULL);
}

/* What entry `name` of dir is: its S_IFMT type and, for a symlink, its
 * target (g_free).  0, or -errno. */
static int entry_kind(struct ckptfs *fs, Node *dir, const char *name, mode_t *type, char **target)
{
    NodeFd f;
    int err = node_fd(&fs->nodes, dir, &f);
    if (err)
        return err;
    struct stat st;
    if (fstatat(f.fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        err = -errno;
    } else {
        *type = st.st_mode & S_IFMT;
        if (S_ISLNK(st.st_mode)) {
            char buf[PATH_MAX];
            ssize_t n = readlinkat(f.fd, name, buf, sizeof buf - 1);
            if (n < 0)
                err = -errno;
            else
                *target = g_strndup(buf, (gsize)n);
        }
    }
    node_fd_put(&fs->nodes, &f);
    return err;
}

/* An existing symlink given a new name in dir (a rename into another
 * directory, a link): its target resolves from there now, so the new name
 * follows the rule a new symlink there would (fs_check_symlink). */
static int check_renamed_symlink(struct ckptfs *fs, fuse_req_t req, const char *op,
                                 const CkCaller *caller, Node *dir, const char *name,
                                 const char *target)
{
    CkNs pns = node_ns(&fs->nodes, dir);
    if (pns.kind != CK_NS_JOB || fs->policy.off)
        return 0;
    g_autofree char *ppath = fs_node_path(fs, dir);
    CkPolicy mode = mode_of(fs);
    CkDecision d = ck_decide_symlink(&mode, caller->job, pns, ppath ? ppath : "", name, target,
                                     fs->opt.views_name);
    return apply(fs, req, &d, op, caller, dir, name, NULL, NULL, target);
}

int fs_check_rename(struct ckptfs *fs, fuse_req_t req, Node *parent, const char *name,
                    Node *newparent, const char *newname, unsigned flags, CkNs *src_out,
                    CkNs *dst_out, CkNs *back_out)
{
    const char *vn = fs->opt.views_name;
    CkNs pns = node_ns(&fs->nodes, parent), npns = node_ns(&fs->nodes, newparent);
    /* What the object is decides its namespace directly in _state/_jobs,
     * what may land there, and, for a symlink moved to another directory,
     * where its target resolves; a rename within one job directory (a
     * commit's) needs none of it.  A source already gone is left to the
     * rename to answer (a replay after a takeover may find it moved). */
    bool look = !fs->policy.off &&
                (ck_ns_is_structure(pns) || ck_ns_is_structure(npns) || parent != newparent);
    mode_t type = S_IFDIR, other = S_IFDIR;
    g_autofree char *target = NULL, *other_target = NULL;
    int err = look ? entry_kind(fs, parent, name, &type, &target) : 0;
    if (!err && look && (flags & RENAME_EXCHANGE))
        err = entry_kind(fs, newparent, newname, &other, &other_target);
    if (err && err != -ENOENT)
        return err;
    CkNs src = ck_ns_child_of(pns, name, S_ISDIR(type), vn);
    /* with RENAME_EXCHANGE, the entry at newname goes the other way */
    CkNs back_src = ck_ns_child_of(npns, newname, S_ISDIR(other), vn);
    *back_out = ck_ns_child_of(pns, name, S_ISDIR(other), vn);
    g_auto(CkCaller) caller = fs_caller(fs, req);
    const char *job = caller.job;
    CkPolicy mode = mode_of(fs);
    CkDecision d = ck_decide_rename(&mode, job, src, S_ISDIR(type), npns, newname, vn);
    *src_out = src;
    *dst_out = d.ns;
    err = apply(fs, req, &d, "rename", &caller, parent, name, newparent, newname, NULL);
    if (!err && !d.record && target && parent != newparent)
        err = check_renamed_symlink(fs, req, "rename", &caller, newparent, newname, target);
    if (err || d.record || !(flags & RENAME_EXCHANGE))
        return err;
    CkDecision back = ck_decide_rename(&mode, job, back_src, S_ISDIR(other), pns, name, vn);
    err = apply(fs, req, &back, "rename", &caller, newparent, newname, parent, name, NULL);
    if (!err && !back.record && other_target && parent != newparent)
        err = check_renamed_symlink(fs, req, "rename", &caller, parent, name, other_target);
    return err;
}

int fs_check_link(struct ckptfs *fs, fuse_req_t req, Node *n, Node *newparent, const char *newname,
                  CkNs *out)
{
    g_auto(CkCaller) caller = fs_caller(fs, req);
    const char *job = caller.job;
    CkPolicy mode = mode_of(fs);
    CkDecision d = ck_decide_link(&mode, job, node_ns(&fs->nodes, n),
                                  node_ns(&fs->nodes, newparent), newname, fs->opt.views_name);
    *out = d.ns;
    int err = apply(fs, req, &d, "link", &caller, n, NULL, newparent, newname, NULL);
    if (err || d.record || !S_ISLNK(n->type))
        return err;
    /* a hard link to a symlink is a symlink with a new name, wherever */
    NodeFd f;
    if ((err = node_fd(&fs->nodes, n, &f)))
        return err;
    char buf[PATH_MAX];
    ssize_t len = readlinkat(f.fd, "", buf, sizeof buf - 1);
    err = len < 0 ? -errno : 0;
    node_fd_put(&fs->nodes, &f);
    if (err)
        return err;
    buf[len] = '\0';
    return check_renamed_symlink(fs, req, "link", &caller, newparent, newname, buf);
}

int fs_check_symlink(struct ckptfs *fs, fuse_req_t req, Node *parent, const char *name,
                     const char *target, CkNs *out)
{
    CkNs pns = node_ns(&fs->nodes, parent);
    g_auto(CkCaller) caller = fs_caller(fs, req);
    const char *job = caller.job;
    CkPolicy mode = mode_of(fs);
    /* The lexical resolution needs the parent's path; only a job's namespace
     * can refuse a symlink for its target, so only then derive it. */
    g_autofree char *ppath =
        pns.kind == CK_NS_JOB && !fs->policy.off ? fs_node_path(fs, parent) : NULL;
    CkDecision d =
        ck_decide_symlink(&mode, job, pns, ppath ? ppath : "", name, target, fs->opt.views_name);
    *out = d.ns;
    return apply(fs, req, &d, "symlink", &caller, parent, name, NULL, NULL, target);
}
