/* The settings that change on a live mount: policy (enforce|audit),
 * legacy (ro|rw), rescan (seconds > 0) and tag_env (a variable name, empty
 * for none).  Three ways in, one way to apply (control_apply):
 *
 *   _views/.control, as extended attributes, as mergerfs does:
 *     getfattr -d _views/.control          user.ckptfs.policy="enforce" ...
 *     setfattr -n user.ckptfs.policy -v audit _views/.control
 *     ckptctl set MOUNT policy=audit
 *   _views/.control, as a file of key=value lines (reading gives them all):
 *     echo policy=audit > _views/.control
 *   a reload (SIGHUP to the daemon): config=FILE read again, and what it
 *   changed since it was last read applied.
 *
 * Only root or the user the daemon runs as may change them; each change is
 * logged and counted (ckptfs_control_changes_total{setting}) and kept in
 * the state memfd, so a daemon that takes the mount over applies it again.
 * A change applies to the next request; a file already open for writing
 * keeps the verdict its open got. */
#pragma once
#include <glib.h>

#include "ckptfs.h"

#define CONTROL_NAME "user.ckptfs."

/* At set-up, before views_init: the settings the daemon starts with, into
 * fs->opt.live and fs->policy, fs->tag_env; fs->configured: the options'.
 * A setting changed live by an earlier daemon of this mount is kept unless
 * this daemon's options (and config=) say otherwise of it than the earlier
 * daemon's did: a takeover or reload applies the options it changes and
 * keeps the rest. */
void control_init(struct ckptfs *fs);
void control_clear(struct ckptfs *fs);

/* The settings in force now. */
void control_current(struct ckptfs *fs, FsLive *live);
/* The tag_env= variable in force now, NULL for none. */
const char *control_tag_env(struct ckptfs *fs);

/* Sets setting k from its text (as .control shows it): 0, or -EINVAL
 * (with *why when why is not NULL; g_free) and nothing changed.  `who`
 * names who asked, for the log line. */
int control_apply(struct ckptfs *fs, FsLiveKey k, const char *value, const char *who, char **why);

/* A reload (SIGHUP), on the thread that waits for it, never in a signal
 * handler: config=FILE read again, the live settings it changed since it
 * was last read applied (a file that does not parse changes nothing, and
 * a warning says why); collision_log=FILE opened again by its path (log
 * rotation: mv, then kill -HUP).  Counted in ckptfs_config_reloads_total. */
void control_reload(struct ckptfs *fs);

/* The file's text: one "key=value" line per setting (g_bytes_unref). */
GBytes *control_text(struct ckptfs *fs);
/* Whether the caller of req may change the settings (root or the daemon's
 * user): an open of .control for writing asks it. */
bool control_may_change(fuse_req_t req);
/* A write(2) to .control: whole "key=value" lines (blank lines skipped),
 * each as setxattr of user.ckptfs.KEY would set it; all are checked before
 * any is applied.  0, -EPERM, -EINVAL (an unknown key or a bad value:
 * nothing applied). */
int control_write(struct ckptfs *fs, fuse_req_t req, const char *data, size_t size);
/* getxattr: 0 with *value, or -ENODATA. */
int control_getxattr(struct ckptfs *fs, const char *name, GBytes **value);
/* listxattr: appends each name and its NUL. */
void control_listxattr(struct ckptfs *fs, GString *names);
/* setxattr by the caller of req: 0, -ENOTSUP (a name outside
 * user.ckptfs.), -EINVAL (no such setting, or a bad value), -EPERM (not
 * root, not the daemon's user). */
int control_setxattr(struct ckptfs *fs, fuse_req_t req, const char *name, const char *value,
                     size_t size);
