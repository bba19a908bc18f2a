/* Binding open files to their backing files (FUSE passthrough, SPEC §6).
 *
 * The kernel accepts, for one FUSE inode, either opens that are all bound
 * to the same backing file or opens that are not bound at all (a mix fails
 * the open with EIO).  So a node has at most one backing id, shared by its
 * bound opens and released with the last of them; while it has opens
 * without passthrough, new opens go without too.  Every decision is taken
 * under NodeTable.lock; the ioctls run outside it. */
#pragma once
#include "ckptfs.h"

/* Called for an open of node n on descriptor fd (kept open by the caller
 * until pt_unbind).  Returns the backing id for the open reply, or 0 when
 * this open goes through the daemon; either way pair it with pt_unbind. */
int pt_bind(struct ckptfs *fs, Node *n, int fd);
/* The open that pt_bind returned backing_id (maybe 0) for is released. */
void pt_unbind(struct ckptfs *fs, Node *n, int backing_id);
/* Logs once why passthrough is off, if it is (from the init handler). */
void pt_log_state(struct ckptfs *fs);
