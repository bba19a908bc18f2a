/* _views/.control (issue 13): the settings that change without a remount,
 * as extended attributes of one virtual file, as mergerfs does:
 *
 *   getfattr -d _views/.control          user.ckptfs.policy="enforce" ...
 *   setfattr -n user.ckptfs.policy -v audit _views/.control
 *   ckptctl set MOUNT policy=audit
 *
 * Settings: policy (enforce|audit), legacy (ro|rw), rescan (seconds > 0).
 * Only root or the user the daemon runs as may change them; each change is
 * logged and counted (ckptfs_control_changes_total{setting}).  A change
 * applies to the next request; a file already open for writing keeps the
 * verdict its open got. */
#pragma once
#include <glib.h>

#include "ckptfs.h"

#define CONTROL_NAME "user.ckptfs."

/* The file's text: one "key=value" line per setting (g_bytes_unref). */
GBytes *control_text(struct ckptfs *fs);
/* getxattr: 0 with *value, or -ENODATA. */
int control_getxattr(struct ckptfs *fs, const char *name, GBytes **value);
/* listxattr: appends each name and its NUL. */
void control_listxattr(struct ckptfs *fs, GString *names);
/* setxattr by the caller of req: 0, -EPERM (not root, not the daemon's
 * user), -ENOTSUP (no such setting), -EINVAL (bad value). */
int control_setxattr(struct ckptfs *fs, fuse_req_t req, const char *name, const char *value,
                     size_t size);
