/* identity_map=FILE kept in force on a live mount (ckptfs(8) IDENTITY):
 * the map names the jobs of identity=cgroup and identity=uid, and an
 * orchestrator's agent rewrites it as workers come and go.
 *
 * It is read again when it changes (inotify on its directory: a rename
 * into place, a file closed after writing, a symlink swapped as a
 * Kubernetes ConfigMap volume does; and one stat every rescan interval,
 * for file systems where inotify sees nothing) and on SIGHUP.  A load
 * that fails (a malformed line, the file gone or unreadable) keeps the map
 * in force, logs a warning saying why, and counts in
 * ckptfs_identity_map_reloads_total{result="failed"}; a load that works
 * replaces the map for the next request.  ckptfs_identity_map_lines has
 * the lines in force.  Without identity_map= each of these does nothing. */
#pragma once
#include "ckptfs.h"

/* At set-up, before anything else of the daemon's state (and in the
 * process that asks for a takeover): reads the file into
 * fs->idwatch.loaded, true; or false with *why (g_free).  Without
 * identity_map=, true. */
bool identity_watch_check(struct ckptfs *fs, char **why);
/* Once the identity and the metrics exist: the map checked at set-up
 * (fs->idwatch.loaded), else the file read now.  A daemon that
 * replaces a dead one over a live connection must not fail on a map
 * broken meanwhile: it goes on with no map (no caller is named by one)
 * and a warning, until the file is mended. */
void identity_watch_init(struct ckptfs *fs);
/* After fuse_daemonize (threads do not survive its fork): the watcher. */
void identity_watch_start(struct ckptfs *fs);
void identity_watch_stop(struct ckptfs *fs);
/* Reads the map again now (SIGHUP); `why` names the cause in the log. */
void identity_watch_reload(struct ckptfs *fs, const char *why);
void identity_watch_clear(struct ckptfs *fs);
