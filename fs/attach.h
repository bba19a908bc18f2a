/* The attach sequence (docs/DESIGN.md, "Outliving the daemon"): a daemon
 * that takes over the live connection of a previous daemon (killed, or
 * handed it over), from start to finish, and what the first daemon of a
 * mount leaves in the state memfd for it.  main.c calls, in this order:
 *
 *  1. attach_state_open: the state memfd the supervisor keeps (a fresh one
 *     without a supervisor); the daemon attaches exactly when the link
 *     brings a live connection, and then the state must have been filled.
 *  2. attach_keep_fixed: a daemon that attaches keeps the settings the
 *     mount fixed, whatever its options say.
 *  3. attach_match: the state is of this backing directory (attaching), or
 *     gets what a successor checks and keeps (a first daemon).
 *  4. attach_revive, once the node table and the handle registry are set
 *     up: the nodes, open files and directories the kernel holds, from
 *     their slots.  (A views node gets its data back at its next lookup by
 *     path: views/views.c.)
 *  5. attach_connect: the connection taken over.  libfuse is given the
 *     kept INIT and its answer dropped, the previous daemon's in-flight
 *     journal is adopted (what an unanswered request took is given back as
 *     the kernel resends it), and the nodes the kernel forgot while no
 *     daemon read are dropped.  A first daemon, once mounted, calls
 *     attach_first instead: the kernel's INIT is kept, and a supervised one
 *     journals every request for its successor.
 *  6. attach_end, at a clean end: a connection taken over is unmounted
 *     here (libfuse has no mount of its own to undo).
 * Everything before attach_connect runs before any request is read. */
#pragma once
#include <stdbool.h>

#include "ckptfs.h"

/* Maps the state memfd of link (or a new one); NULL, or why not (static
 * text).  Attaching, fs->mountpoint is the one the state names: no daemon
 * serves the mount point until this one does, so it is never looked at. */
const char *attach_state_open(struct ckptfs *fs, const SupLink *link);
/* Attaching: the settings the mount fixed replace this daemon's options
 * where they differ; returns what the takeover's requester is told of
 * those (g_free), NULL when none differ. */
char *attach_keep_fixed(struct ckptfs *fs);
/* 0, or -errno (-EXDEV: the state is of another backing directory). */
int attach_match(struct ckptfs *fs);
void attach_revive(struct ckptfs *fs);
/* What the supervisor holds for this daemon (SupHeld, the caller's), for
 * a takeover that adopts the daemon after its supervisor died.  fs: the
 * struct ckptfs (a SupLink callback). */
GArray *attach_held_now(void *fs);
/* Routes the session through the protocol module on fuse_fd, the live
 * connection: 0 or -errno. */
int attach_connect(struct ckptfs *fs, int fuse_fd);
/* A daemon that mounted: the same on the session's own descriptor. */
int attach_first(struct ckptfs *fs);
void attach_end(struct ckptfs *fs, int fuse_fd);
