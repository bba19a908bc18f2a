/* Binding open files to their backing files (FUSE passthrough,
 * docs/DESIGN.md "The data path").
 *
 * The kernel accepts, for one FUSE inode, either opens that are all bound
 * to the same backing file or opens that are not bound at all (a mix fails
 * the open with EIO).  So a node has at most one backing id, shared by its
 * bound opens and released with the last of them; while it has opens
 * without passthrough, new opens go without too.  The node table keeps the
 * binding and takes every decision under its lock (node_binding_*); the
 * ioctls run here, outside it. */
#pragma once
#include <stdatomic.h>

#include "kernel/kio.h"
#include "metrics.h"
#include "nodes.h"

typedef struct {
    NodeTable *nodes;
    Kio *kio;
    FsMetrics *metrics;
    FsPtWhy off_why;             /* why a connection without passthrough has none */
    atomic_bool register_logged; /* a failed registration was logged */
} Passthrough;

/* off_why: what the counters say of a connection without passthrough (the
 * options, the daemon's privileges, or the kernel). */
void pt_init(Passthrough *p, NodeTable *t, Kio *k, FsMetrics *m, FsPtWhy off_why);
/* Called for an open of node n on descriptor fd (kept open by the caller
 * until pt_unbind).  Returns the backing id for the open reply, or 0 when
 * this open goes through the daemon; either way pair it with pt_unbind. */
int pt_bind(Passthrough *p, Node *n, int fd);
/* pt_bind for an open that must reach the daemon (its writes are watched):
 * it goes without passthrough unless the node's other opens are bound
 * already (the kernel wants one answer per inode); then it shares theirs. */
int pt_bind_unless_unbound(Passthrough *p, Node *n);
/* The open that pt_bind returned backing_id (maybe 0) for is released. */
void pt_unbind(Passthrough *p, Node *n, int backing_id);
/* Logs once why passthrough is off, if it is (at INIT). */
void pt_log_state(Passthrough *p);
