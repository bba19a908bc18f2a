/* FUSE over io_uring, the transport of kio (kio.h) where the kernel offers
 * it: requests arrive in ring entries instead of read(2) of /dev/fuse, and
 * each reply goes back with the next fetch in one system call.
 *
 * libfuse still does INIT on /dev/fuse and decodes every request: a ring
 * thread rebuilds each entry as the bytes a read(2) would have given
 * (header, per-opcode header, payload, contiguous in the entry's buffer)
 * and hands them to fuse_session_process_buf(); the reply libfuse writes
 * through kio's writev hook is copied into the same entry and committed.
 * FORGET, INTERRUPT and notifications stay on /dev/fuse (the kernel sends
 * them there), so libfuse's own loop keeps reading it.
 *
 * The kernel makes one queue per possible CPU and sends a request to the
 * queue of the CPU it was made on; every queue gets `depth` entries, each
 * with a thread of its own, so that a blocking FSYNC holds one entry only.
 * Not for a supervised mount, nor one with auto_unmount: see
 * kio_uring_supervised_why and kio_uring_auto_unmount_why. */
#pragma once
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

typedef struct KioRing KioRing;

/* Why a mount whose daemon may be replaced cannot use the ring (static
 * text): the kernel resends after a daemon's death only what it had read
 * from /dev/fuse, never what sat in a dead daemon's ring entries, and a
 * queue whose entries all died serves nothing more until a request of its
 * own completes. */
const char *kio_uring_supervised_why(void);
/* Why a mount with -o auto_unmount stays on /dev/fuse: the ring's requests
 * end with ECONNABORTED while its entries are torn down after the daemon's
 * death, and libfuse 3.14's fusermount3 leaves a mount whose requests fail
 * with anything but ENOTCONN in place. */
const char *kio_uring_auto_unmount_why(void);
/* Whether the fuse module lets a connection use io_uring (enable_uring). */
bool kio_uring_enabled(void);

/* After the INIT reply went out on fd (max_write and max_pages as it said):
 * registers depth entries on every queue, a thread each.  prepare(req, len)
 * sees each rebuilt request before libfuse does, as kio's read hook would.  NULL, with *why
 * (static text), when that failed: the connection stays on /dev/fuse. */
KioRing *kio_uring_start(struct fuse_session *se, int fd, uint32_t max_write, uint32_t max_pages,
                         unsigned depth, void (*prepare)(void *req, size_t len), const char **why);
/* The calling thread serves a ring entry whose request has this unique:
 * the reply goes into it (true, *written the bytes taken), else false. */
bool kio_uring_reply(uint64_t unique, const struct iovec *iov, int count, ssize_t *written);
/* Stops the threads (after the unmount, or at handover) and frees r. */
void kio_uring_stop(KioRing *r);
/* Requests served through the ring so far. */
uint64_t kio_uring_requests(const KioRing *r);
