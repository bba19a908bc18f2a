/* Whether an errno a request to a FUSE mount failed with says that the
 * mount's daemon is gone: ENOTCONN once the connection is down;
 * ECONNABORTED for a request in flight when it was aborted; over io_uring,
 * ECANCELED for one handed to a ring entry of the daemon while it exited.
 * A restart of ckptfs, `ckptctl run` and the tests clear or report a dead
 * mount by it, so a live ckptfs never answers with these (a backing's are
 * turned into EIO). */
#pragma once
#include <errno.h>
#include <stdbool.h>

static inline bool ck_mount_gone_errno(int err)
{
    return err == ENOTCONN || err == ECONNABORTED || err == ECANCELED;
}
