/* fs/ops: the request handlers (ckptfs_ops), acting as the caller
 * (creds.c), the write-policy hooks (enforce.h) and the open file and
 * directory handles (handles.c).
 *
 * Contract: every handler decodes its request, calls one function that
 * returns 0 or -errno, and replies once; the table of handlers and what
 * the daemon asks for at INIT are in ops.c.  The handlers use the views,
 * the node table, the protocol module and the journal below them; only
 * main.c and attach.c call in here.  Locks (flock, POSIX) are left to the
 * kernel: getlk/setlk/flock are not implemented, so locks are local to this
 * mount's kernel. */
#pragma once
#include "ckptfs.h"

extern const struct fuse_lowlevel_ops ckptfs_ops;

/* What the registry knows of a kind of handle: how to free one, and how to
 * open one again from its record (a daemon that took the connection over;
 * never NULL: a handle that cannot be opened again answers its error). */
typedef enum { HANDLE_NONE = 0, HANDLE_FILE, HANDLE_DIR, HANDLE_KINDS } HandleKind;
typedef struct HandleType {
    void (*free)(struct ckptfs *fs, void *h);
    void *(*revive)(struct ckptfs *fs, Node *n, const HandleRec *rec);
} HandleType;

/* The open-handle registry: set up after the node table; cleanup frees
 * what the kernel never released (the session ended by a signal). */
void handles_init(struct ckptfs *fs);
void handles_cleanup(struct ckptfs *fs);
/* For the attach sequence (fs/attach.c): the files and directories a
 * previous daemon had open, opened again from their slots; a handle slot
 * an unanswered request took, given back; every handle open on the node
 * in node_slot closed (the kernel holds no file of a node it forgot). */
void handles_revive(struct ckptfs *fs);
void handles_give_back(struct ckptfs *fs, uint32_t slot);
void handles_close_node(struct ckptfs *fs, uint32_t node_slot);
/* The workers that drop the kernel's pages after direct writes (direct.c):
 * started once the session is set up (threads: after fuse_daemonize's
 * fork), stopped before the session is destroyed (a drop still queued is
 * skipped); stop is idempotent. */
void direct_start(struct ckptfs *fs);
void direct_stop(struct ckptfs *fs);
/* Frees the listings parked for READDIRs without OPENDIR (dirs.c). */
void dirpark_clear(struct ckptfs *fs);
/* The kinds ckptfs has (ops.c: files.c's and dirs.c's). */
extern const HandleType *const ckptfs_handle_types[HANDLE_KINDS];

/* Saves the daemon's supplementary groups (restored after acting as a caller). */
int ckptfs_creds_init(struct ckptfs *fs);
