/* The FUSE low-level operations of ckptfs: thin handlers that decode a
 * request, call one function returning 0 or -errno, and reply exactly once.
 * Locks (flock, POSIX) are left to the kernel: getlk/setlk/flock are not
 * implemented, so locks are local to this mount's kernel. */
#pragma once
#include "ckptfs.h"

extern const struct fuse_lowlevel_ops ckptfs_ops;

/* Saves the daemon's supplementary groups (restored after acting as a caller). */
int ckptfs_creds_init(struct ckptfs *fs);
