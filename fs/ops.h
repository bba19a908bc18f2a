/* The FUSE low-level operations of ckptfs: thin handlers that decode a
 * request, call one function returning 0 or -errno, and reply exactly once.
 * Locks (flock, POSIX) are left to the kernel: getlk/setlk/flock are not
 * implemented, so locks are local to this mount's kernel. */
#pragma once
#include "ckptfs.h"

extern const struct fuse_lowlevel_ops ckptfs_ops;

/* Sets up and frees the open-handle registry; cleanup frees what the
 * kernel never released (the session ended by a signal). */
void ckptfs_handles_init(struct ckptfs *fs);
void ckptfs_handles_cleanup(struct ckptfs *fs);

/* Saves the daemon's supplementary groups (restored after acting as a caller). */
int ckptfs_creds_init(struct ckptfs *fs);
