#include "passthrough.h"

#include <errno.h>

#include "kernel/kio.h"
#include "log.h"

static void count_fallback(struct ckptfs *fs, FsPtWhy why)
{
    atomic_fetch_add_explicit(&fs->metrics->pt_fallbacks[why], 1, memory_order_relaxed);
}

/* Why a connection without passthrough has none, for the metrics. */
static FsPtWhy connection_why(struct ckptfs *fs)
{
    if (fs->opt.passthrough_off || fs->opt.writeback)
        return FS_PT_OFF;
    if (!fs->is_root)
        return FS_PT_UNPRIVILEGED;
    return FS_PT_KERNEL;
}

void pt_log_state(struct ckptfs *fs)
{
    const char *why = kio_why_not(&fs->kio);
    if (why)
        log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_PT_FALLBACK,
                  "FUSE passthrough off (%s): reads and writes go through the daemon "
                  "(splice, page cache, 512 KiB requests)",
                  why);
    else
        g_debug("ckptfs: FUSE passthrough on: the kernel reads and writes backing files itself");
}

/* Under the table lock: a bound open joins the node's backing id, an
 * unbound one is counted so that no open is bound while it lasts. */
static int choose_locked(Node *n, int fresh_id)
{
    if (n->backing_id > 0) {
        n->backing_refs++;
        return n->backing_id;
    }
    if (n->cached_opens == 0 && fresh_id > 0) {
        n->backing_id = fresh_id;
        n->backing_refs = 1;
        return fresh_id;
    }
    n->cached_opens++;
    return 0;
}

/* The binding is in the node's slot too: a daemon that takes over the
 * connection releases the id when the last bound open is released. */
static int decide_locked(Node *n, int fresh_id)
{
    int id = choose_locked(n, fresh_id);
    node_sync_locked(n);
    return id;
}

int pt_bind(struct ckptfs *fs, Node *n, int fd)
{
    if (!kio_passthrough(&fs->kio)) {
        count_fallback(fs, connection_why(fs));
        return 0;
    }
    NodeTable *t = &fs->nodes;
    g_mutex_lock(&t->lock);
    int id = 0;
    bool decided = n->backing_id > 0 || n->cached_opens > 0;
    if (decided)
        id = decide_locked(n, 0);
    g_mutex_unlock(&t->lock);
    if (decided) {
        if (id)
            atomic_fetch_add_explicit(&fs->metrics->pt_opens, 1, memory_order_relaxed);
        else
            count_fallback(fs, FS_PT_CACHED);
        return id;
    }

    /* First open: register outside the lock, then decide again (another
     * open of the node may have raced us; its choice wins). */
    int fresh = kio_backing_open(&fs->kio, fd);
    if (fresh < 0 && !atomic_exchange(&fs->pt_register_logged, true))
        log_event(G_LOG_LEVEL_WARNING, LOG_ID_PT_FALLBACK,
                  "FUSE passthrough: cannot register a backing file (%s); such opens go through "
                  "the daemon",
                  g_strerror(-fresh));
    g_mutex_lock(&t->lock);
    id = decide_locked(n, fresh);
    g_mutex_unlock(&t->lock);
    if (fresh > 0 && id != fresh)
        kio_backing_close(&fs->kio, fresh);
    if (fresh > 0 && id == fresh)
        atomic_fetch_add_explicit(&fs->metrics->pt_ids, 1, memory_order_relaxed);
    if (id)
        atomic_fetch_add_explicit(&fs->metrics->pt_opens, 1, memory_order_relaxed);
    else
        count_fallback(fs, fresh < 0 ? FS_PT_REGISTER : FS_PT_CACHED);
    return id;
}

void pt_unbind(struct ckptfs *fs, Node *n, int backing_id)
{
    if (!kio_passthrough(&fs->kio))
        return;
    int release = 0;
    g_mutex_lock(&fs->nodes.lock);
    if (backing_id > 0) {
        if (n->backing_refs > 0 && --n->backing_refs == 0) {
            release = n->backing_id;
            n->backing_id = 0;
        }
    } else if (n->cached_opens > 0) {
        n->cached_opens--;
    }
    node_sync_locked(n);
    g_mutex_unlock(&fs->nodes.lock);
    if (release) {
        kio_backing_close(&fs->kio, release);
        atomic_fetch_sub_explicit(&fs->metrics->pt_ids, 1, memory_order_relaxed);
    }
}
