/* Direct writes and the kernel's page cache.
 *
 * Without passthrough the daemon serves O_DIRECT writes.  The kernel drops
 * its cached pages of the range before it sends one, never after an
 * asynchronous one (AIO, io_uring) completes, and a buffered read that ran
 * beside the write may have cached the bytes the write replaced: a read
 * after the completion would see them (ext4 drops them at completion).  So
 * the daemon drops them itself once the data has landed, before it
 * replies, when a buffered open of the file is there or was made since
 * the last direct write (none: nothing could have cached them; files
 * opened O_DIRECT alone pay nothing).  The drop waits on pages whose reads this daemon serves, so
 * it runs on a worker of its own and the reply waits for it a bounded time: a daemon with every
 * request thread busy is delayed by it, never stuck. */
#include "ops-private.h"

#define DROP_WAIT_US (100 * 1000)

typedef struct {
    struct fuse_session *se;
    fuse_ino_t ino;
    off_t off, len;
    GMutex lock;
    GCond cond;
    bool done; /* lock */
    int refs;  /* lock: the writer's and the worker's */
} Drop;

/* Drops the caller's reference; the last one frees d (d->lock held). */
static void drop_put_locked(Drop *d)
{
    bool last = --d->refs == 0;
    g_mutex_unlock(&d->lock);
    if (last) {
        g_mutex_clear(&d->lock);
        g_cond_clear(&d->cond);
        g_free(d);
    }
}

static void drop_run(gpointer data, gpointer user)
{
    struct ckptfs *fs = user;
    Drop *d = data;
    if (!g_atomic_int_get(&fs->direct_stopping))
        fuse_lowlevel_notify_inval_inode(d->se, d->ino, d->off, d->len);
    g_mutex_lock(&d->lock);
    d->done = true;
    g_cond_signal(&d->cond);
    drop_put_locked(d);
}

void direct_start(struct ckptfs *fs)
{
    /* threads are made as drops come (a pool that is not exclusive) */
    fs->direct_drops = g_thread_pool_new(drop_run, fs, 4, FALSE, NULL);
}

void direct_stop(struct ckptfs *fs)
{
    if (!fs->direct_drops)
        return;
    /* the drops still queued run, but write nothing to the session */
    g_atomic_int_set(&fs->direct_stopping, 1);
    g_thread_pool_free(fs->direct_drops, FALSE, TRUE);
    fs->direct_drops = NULL;
}

void direct_write_landed(struct ckptfs *fs, Node *n, off_t off, size_t len)
{
    if (!fs->direct_drops)
        return; /* not started: the session does not serve yet */
    Drop *d = g_new0(Drop, 1);
    d->se = fs->se;
    d->ino = node_ino(&fs->nodes, n);
    d->off = off;
    d->len = (off_t)len;
    d->refs = 2;
    g_mutex_init(&d->lock);
    g_cond_init(&d->cond);
    g_thread_pool_push(fs->direct_drops, d, NULL);
    gint64 until = g_get_monotonic_time() + DROP_WAIT_US;
    g_mutex_lock(&d->lock);
    while (!d->done && g_cond_wait_until(&d->cond, &d->lock, until))
        ;
    drop_put_locked(d);
}
