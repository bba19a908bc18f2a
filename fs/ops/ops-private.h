/* What the request handlers of ops/ share (names.c, files.c, dirs.c,
 * xattrs.c; the table of handlers is in ops.c), and nothing outside ops/
 * includes. */
#pragma once
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "ckptfs.h"
#include "ops.h"

/* What fi->fh of an open file names (handles.c). */
typedef struct {
    int fd; /* backing descriptor, -1 for a views snapshot */
    GBytes
        *content; /* views snapshot (NULL in a handle taken over: made again at its first read) */
    Node *node;
    int flags;              /* the open's flags */
    bool writable;          /* opened for writing: its attributes are noted at release */
    int write_err;          /* the policy's answer for data writes, taken once at open (0: go on) */
    int lost_err;           /* taken over but not opened again: every use answers this */
    bool bound;             /* pt_bind was asked (pt_unbind at release) */
    int backing_id;         /* > 0: the kernel does this file's I/O (FUSE passthrough) */
    bool bound_writer;      /* counted in node_bound_writers */
    bool sgid_watch;        /* writes may drop the set-group-ID bit (creds_sgid_to_drop) */
    const char *marker_job; /* a COMPLETED of this job written: refresh the views at release */
    bool control;           /* _views/.control open for writing: writes set its settings */
} FileHandle;

static inline struct ckptfs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* The node of the kernel's node id ino. */
static inline Node *node_by_ino(struct ckptfs *fs, fuse_ino_t ino)
{
    return node_of(&fs->nodes, ino);
}

/* The open-handle registry (handles.c).  register puts h in a slot of the
 * state memfd with rec (its node, flags, binding) and returns the fh for
 * the kernel, 0 when every slot is taken; close takes it out and frees it
 * with its kind's function. */
uint64_t handle_register(struct ckptfs *fs, void *h, HandleKind kind, const HandleRec *rec);
void handle_close(struct ckptfs *fs, uint64_t fh);
/* The handle of fh, NULL when it is not (or no longer) open. */
void *handle_lookup(struct ckptfs *fs, uint64_t fh);

/* The open file fi names (files.c): one whose fh the registry does not
 * have (a release resent after a takeover) answers EBADF to every use. */
FileHandle *file_of(struct ckptfs *fs, struct fuse_file_info *fi);

extern const HandleType file_handle_type; /* files.c */
extern const HandleType dir_handle_type;  /* dirs.c */

static inline void reply_err(struct ckptfs *fs, fuse_req_t req, int err)
{
    /* err: 0 or -errno */
    fs_metric_err(fs->metrics, -err);
    fuse_reply_err(req, -err);
}

static inline bool is_dot_or_dotdot(const char *name)
{
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

static inline void proc_path(char *buf, size_t len, int fd)
{
    g_snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* fsync and fsyncdir: FUSE's datasync flag picks fdatasync. */
static inline int sync_fd(int fd, int datasync)
{
    return (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
}

/* Acting as the caller (creds.c): switches this worker thread's fsuid, fsgid
 * and supplementary groups to the caller's when the caller is not the
 * daemon's own user and either the request creates something (ownership)
 * or the kernel does not check permissions itself.  A create also takes
 * the caller's umask (with POSIX ACLs negotiated): creds_mode gives the
 * mode to pass to the creating call. */
typedef struct {
    bool switched;
} Creds;
void creds_enter(struct ckptfs *fs, fuse_req_t req, bool creating, Creds *c);
void creds_leave(struct ckptfs *fs, Creds *c);
mode_t creds_mode(struct ckptfs *fs, fuse_req_t req, mode_t mode);
/* The set-group-ID bit of a regular file that is not group-executable is
 * dropped when a caller without CAP_FSETID outside the file's group
 * modifies it (writes, truncates, allocates), as the kernel does natively;
 * the kernel's FUSE path clears only the group-executable case.
 * creds_sgid_to_drop: whether a change by req's caller to a file of *st
 * would drop it; creds_drop_sgid: drops it from fd's file if so (after the
 * change succeeded; fd may be O_PATH), true when it did: the mode the
 * kernel holds is then stale (kernel_attrs_stale). */
bool creds_sgid_to_drop(fuse_req_t req, const struct stat *st);
bool creds_drop_sgid(fuse_req_t req, int fd);
/* An access ACL set by a caller without CAP_FSETID outside the file's
 * group drops its set-group-ID bit, group-executable or not (the kernel's
 * rule for ACLs; ext4 keeps it for the daemon, which sets it as root). */
bool creds_drop_sgid_acl(fuse_req_t req, int fd);
/* The attributes the kernel holds of n are dropped, so that its next stat
 * asks, also one that asks for the mode alone (after a write or an
 * allocation the kernel refreshes only what those change).  Inline: an
 * attribute-only invalidation takes no inode lock in the kernel, and the
 * reply must not overtake it. */
void kernel_attrs_stale(struct ckptfs *fs, Node *n);

/* A direct (O_DIRECT) write of [off, off + len) of n's file landed
 * (direct.c): the kernel's cached pages of the range are dropped, waited
 * for a bounded time. */
void direct_write_landed(struct ckptfs *fs, Node *n, off_t off, size_t len);

/* Names (names.c). */
void fill_entry(struct ckptfs *fs, Node *n, const struct stat *st, struct fuse_entry_param *e);
int do_lookup(struct ckptfs *fs, Node *p, const char *name, struct fuse_entry_param *e);
void reply_entry(struct ckptfs *fs, fuse_req_t req, int err, struct fuse_entry_param *e);

/* The handlers, by file. */
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi);
void op_readlink(fuse_req_t req, fuse_ino_t ino);
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags);
void op_statfs(fuse_req_t req, fuse_ino_t ino);
void op_access(fuse_req_t req, fuse_ino_t ino, int mask);

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                  struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                  struct fuse_file_info *fi);
void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                        struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                        struct fuse_file_info *fi_out, size_t len, int flags);

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags);
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
