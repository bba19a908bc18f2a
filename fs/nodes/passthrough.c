#include "passthrough.h"

#include <errno.h>

#include "log.h"

void pt_init(Passthrough *p, NodeTable *t, Kio *k, FsMetrics *m, FsPtWhy off_why)
{
    p->nodes = t;
    p->kio = k;
    p->metrics = m;
    p->off_why = off_why;
    atomic_store(&p->register_logged, false);
}

static void count_fallback(Passthrough *p, FsPtWhy why)
{
    atomic_fetch_add_explicit(&p->metrics->pt_fallbacks[why], 1, memory_order_relaxed);
}

void pt_log_state(Passthrough *p)
{
    const char *why = kio_why_not(p->kio);
    if (why)
        log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_PT_FALLBACK,
                  "FUSE passthrough off (%s): reads and writes go through the daemon "
                  "(splice, page cache, 512 KiB requests)",
                  why);
    else
        g_debug("ckptfs: FUSE passthrough on: the kernel reads and writes backing files itself");
}

int pt_bind(Passthrough *p, Node *n, int fd)
{
    if (!kio_passthrough(p->kio)) {
        count_fallback(p, p->off_why);
        return 0;
    }
    int id = 0;
    if (node_binding_join_decided(p->nodes, n, &id)) {
        if (id)
            atomic_fetch_add_explicit(&p->metrics->pt_opens, 1, memory_order_relaxed);
        else
            count_fallback(p, FS_PT_CACHED);
        return id;
    }

    /* First open: register outside the lock, then decide again (another
     * open of the node may have raced us; its choice wins). */
    int fresh = kio_backing_open(p->kio, fd);
    if (fresh < 0 && !atomic_exchange(&p->register_logged, true))
        log_event(G_LOG_LEVEL_WARNING, LOG_ID_PT_FALLBACK,
                  "FUSE passthrough: cannot register a backing file (%s); such opens go through "
                  "the daemon",
                  g_strerror(-fresh));
    id = node_binding_join(p->nodes, n, fresh);
    if (fresh > 0 && id != fresh)
        kio_backing_close(p->kio, fresh);
    if (fresh > 0 && id == fresh)
        atomic_fetch_add_explicit(&p->metrics->pt_ids, 1, memory_order_relaxed);
    if (id)
        atomic_fetch_add_explicit(&p->metrics->pt_opens, 1, memory_order_relaxed);
    else
        count_fallback(p, fresh < 0 ? FS_PT_REGISTER : FS_PT_CACHED);
    return id;
}

int pt_bind_unless_unbound(Passthrough *p, Node *n)
{
    if (!kio_passthrough(p->kio)) {
        count_fallback(p, p->off_why);
        return 0;
    }
    int id = node_binding_join(p->nodes, n, 0);
    if (id)
        atomic_fetch_add_explicit(&p->metrics->pt_opens, 1, memory_order_relaxed);
    else
        count_fallback(p, FS_PT_CACHED);
    return id;
}

void pt_unbind(Passthrough *p, Node *n, int backing_id)
{
    if (!kio_passthrough(p->kio))
        return;
    int release = node_binding_leave(p->nodes, n, backing_id);
    if (release) {
        kio_backing_close(p->kio, release);
        atomic_fetch_sub_explicit(&p->metrics->pt_ids, 1, memory_order_relaxed);
    }
}
