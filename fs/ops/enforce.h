/* The write-policy hooks (docs/DESIGN.md, "Namespaces and the write
 * policy"; ckptfs(8) NAMESPACES AND THE WRITE POLICY): core decides, each
 * hook carries the decision out.
 *
 * Every write request asks one of these before its first backing syscall, so
 * a refused write changes nothing.  Each returns 0 to go on, or -errno to
 * answer with: EACCES for a refusal in enforce mode, EROFS for anything in
 * the views (not logged).  A refusal (or, in audit mode, a write that would
 * have been refused, which then goes on; with legacy=rw, a legacy write,
 * which goes on too) is appended to the collision log
 * with the caller's pid, uid and comm, and counted in the metrics.
 * With -o no_policy nothing is checked (the namespace out-params are still
 * set).  Paths for the record are derived only when a record is written. */
#pragma once
#include <stdbool.h>

#include "ckptfs.h"

/* Who the caller of req is (core/identity.h): its job, anonymous, or an
 * identity that is not a job id.  ck_caller_clear it (g_auto). */
CkCaller fs_caller(struct ckptfs *fs, fuse_req_t req);

/* A write to existing object `n` (open for writing, setattr, xattr). */
int fs_check_write(struct ckptfs *fs, fuse_req_t req, const char *op, Node *n);
/* The removal of entry `name` of directory `dir` (unlink, rmdir);
 * *entry_out: the entry's namespace. */
int fs_check_remove(struct ckptfs *fs, fuse_req_t req, const char *op, Node *dir, const char *name,
                    CkNs *entry_out);
/* Creating entry `name` in `parent` (create, mknod, mkdir). */
int fs_check_create(struct ckptfs *fs, fuse_req_t req, const char *op, Node *parent,
                    const char *name, bool is_dir, CkNs *child_out);
/* rename(parent/name -> newparent/newname, flags): RENAME_EXCHANGE checks both
 * ways.  *src_out: the namespace of the entry at its old name; *dst_out:
 * the one it takes at its new name; *back_out: with RENAME_EXCHANGE, the
 * one the entry that goes the other way takes at name. */
int fs_check_rename(struct ckptfs *fs, fuse_req_t req, Node *parent, const char *name,
                    Node *newparent, const char *newname, unsigned flags, CkNs *src_out,
                    CkNs *dst_out, CkNs *back_out);
int fs_check_link(struct ckptfs *fs, fuse_req_t req, Node *n, Node *newparent, const char *newname,
                  CkNs *out);
int fs_check_symlink(struct ckptfs *fs, fuse_req_t req, Node *parent, const char *name,
                     const char *target, CkNs *out);

/* The path of a backing node relative to the mount root ("" for the root),
 * derived from its descriptor; NULL if it has none. */
char *fs_node_path(struct ckptfs *fs, Node *n);
