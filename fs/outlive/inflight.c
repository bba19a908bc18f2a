#include "inflight.h"

#include <stdatomic.h>
#include <glib.h>
#include <stddef.h>

_Static_assert(sizeof(InflightRec) == 1024, "InflightRec: a change needs STATE_VERSION + 1");

#define INFLIGHT_RESENT (1ull << 63) /* the kernel's mark on a resent request's unique */
#define INFLIGHT_DONE   0xffffffffu  /* a kept entry given back already */

static _Thread_local int tls_index = -1;
static _Thread_local InflightRec *tls_rec; /* NULL outside a journaled request */
static _Thread_local bool tls_forgets;     /* the request is a FORGET or BATCH_FORGET */

void inflight_begin(InflightRec *base, _Atomic uint32_t *threads, uint64_t unique, bool journaled,
                    bool forgets)
{
    tls_rec = NULL;
    tls_forgets = forgets;
    if (!base || !journaled)
        return;
    if (tls_index < 0)
        tls_index = (int)atomic_fetch_add(threads, 1);
    if (tls_index >= INFLIGHT_THREADS)
        return;
    InflightRec *r = &base[tls_index];
    atomic_store_explicit(&r->unique, 0, memory_order_release);
    atomic_store_explicit(&r->n, 0, memory_order_relaxed);
    r->overflow = 0;
    atomic_store_explicit(&r->since_us, g_get_monotonic_time(), memory_order_relaxed);
    atomic_store_explicit(&r->unique, unique & ~INFLIGHT_RESENT, memory_order_release);
    tls_rec = r;
}

void inflight_end(void)
{
    if (tls_rec)
        atomic_store_explicit(&tls_rec->unique, 0, memory_order_release);
    tls_rec = NULL;
}

void inflight_note(uint32_t kind, uint32_t slot)
{
    InflightRec *r = tls_rec;
    if (!r)
        return;
    uint32_t n = atomic_load_explicit(&r->n, memory_order_relaxed);
    if (n >= INFLIGHT_ENTRIES) {
        r->overflow = 1;
        return;
    }
    atomic_store_explicit(&r->e[n], kind << 28 | slot, memory_order_relaxed);
    atomic_store_explicit(&r->n, n + 1, memory_order_release);
}

void inflight_note_forget(uint32_t node_lo, uint64_t count)
{
    InflightRec *r = tls_rec;
    if (!r)
        return;
    uint32_t n = atomic_load_explicit(&r->n, memory_order_relaxed);
    if (n + 3 > INFLIGHT_ENTRIES) {
        r->overflow = 1;
        return;
    }
    atomic_store_explicit(&r->e[n], INFLIGHT_FORGET << 28, memory_order_relaxed);
    atomic_store_explicit(&r->e[n + 1], node_lo, memory_order_relaxed);
    atomic_store_explicit(&r->e[n + 2], (uint32_t)MIN(count, UINT32_MAX), memory_order_relaxed);
    atomic_store_explicit(&r->n, n + 3, memory_order_release);
}

/* A forget of this request is being applied: its count goes down first, so
 * a daemon killed before the node's count went down too leaks it. */
static void forget_applied(InflightRec *r, uint32_t slot)
{
    uint32_t n = atomic_load_explicit(&r->n, memory_order_relaxed);
    for (uint32_t i = 0; i + 2 < n; i += 3) {
        if (atomic_load(&r->e[i]) >> 28 == INFLIGHT_FORGET && atomic_load(&r->e[i + 1]) == slot) {
            uint32_t c = atomic_load(&r->e[i + 2]);
            if (c > 0) {
                atomic_store(&r->e[i + 2], c - 1);
                return;
            }
        }
    }
}

void inflight_unnote(uint32_t kind, uint32_t slot)
{
    InflightRec *r = tls_rec;
    if (!r)
        return;
    if (tls_forgets) {
        forget_applied(r, slot);
        return;
    }
    uint32_t n = atomic_load_explicit(&r->n, memory_order_relaxed), want = kind << 28 | slot;
    for (uint32_t i = n; i-- > 0;) {
        if (atomic_load_explicit(&r->e[i], memory_order_relaxed) == want) {
            /* the last entry takes its place, then the count drops */
            atomic_store_explicit(&r->e[i], atomic_load(&r->e[n - 1]), memory_order_relaxed);
            atomic_store_explicit(&r->n, n - 1, memory_order_release);
            return;
        }
    }
}

/* The adopted records live in the second half of the journal, in the
 * memfd too: a daemon killed before the requests came again leaves them
 * to the next. */
struct InflightAdopted {
    GMutex lock;       /* over NodeTable.lock and open_lock (fn takes them) */
    InflightRec *kept; /* [INFLIGHT_THREADS] */
    InflightGiveBack fn;
    void *ctx;
};

/* The kept record for unique: the one that has it, else a free one, else
 * the oldest (a request answered just before its daemon died never comes
 * again; uniques only grow). */
static InflightRec *kept_for(InflightRec *kept, uint64_t unique, bool *fresh)
{
    InflightRec *free_rec = NULL, *oldest = &kept[0];
    for (int t = 0; t < INFLIGHT_THREADS; t++) {
        uint64_t u = atomic_load(&kept[t].unique);
        if (u == unique) {
            *fresh = false;
            return &kept[t];
        }
        if (u == 0 && !free_rec)
            free_rec = &kept[t];
        if (u < atomic_load(&oldest->unique))
            oldest = &kept[t];
    }
    *fresh = true;
    return free_rec ? free_rec : oldest;
}

InflightAdopted *inflight_adopt(InflightRec *base, InflightGiveBack fn, void *ctx)
{
    InflightAdopted *a = g_new0(InflightAdopted, 1);
    g_mutex_init(&a->lock);
    a->kept = base + INFLIGHT_THREADS;
    a->fn = fn;
    a->ctx = ctx;
    for (int t = 0; t < INFLIGHT_THREADS; t++) {
        InflightRec *r = &base[t];
        uint64_t unique = atomic_load(&r->unique) & ~INFLIGHT_RESENT;
        if (unique == 0)
            continue;
        if (r->overflow)
            g_debug("ckptfs: request %" G_GUINT64_FORMAT " took more than %d references: "
                    "the rest stay until unmount",
                    unique, INFLIGHT_ENTRIES);
        /* a kept record of this unique already: a daemon killed between the
         * copy and the clearing below (a live record of a request comes
         * only after its kept one was given back and freed) */
        bool fresh;
        InflightRec *k = kept_for(a->kept, unique, &fresh);
        if (fresh) {
            atomic_store(&k->unique, 0);
            atomic_store(&k->n, 0);
        }
        uint32_t n = MIN(atomic_load(&r->n), INFLIGHT_ENTRIES);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t e = atomic_load(&r->e[i]);
            if (e >> 28 == INFLIGHT_FORGET && i + 2 < n) {
                uint32_t slot = atomic_load(&r->e[i + 1]), count = atomic_load(&r->e[i + 2]);
                /* crossed out first: a daemon killed in between leaks it,
                 * and never applies it twice */
                atomic_store(&r->e[i + 2], 0);
                if (count)
                    fn(ctx, INFLIGHT_FORGET, slot, count);
                i += 2;
            } else if (fresh && (e >> 28 == INFLIGHT_NODE || e >> 28 == INFLIGHT_HANDLE) &&
                       atomic_load(&k->n) < INFLIGHT_ENTRIES) {
                uint32_t kn = atomic_load(&k->n);
                atomic_store(&k->e[kn], e);
                atomic_store(&k->n, kn + 1);
            }
        }
        if (atomic_load(&k->n))
            atomic_store(&k->unique, unique);
        /* copied: the record goes (killed before this, the next daemon
         * copies it again into the same kept record, by its unique) */
        atomic_store(&r->n, 0);
        atomic_store(&r->unique, 0);
    }
    return a;
}

void inflight_resent(InflightAdopted *a, uint64_t unique)
{
    if (!a)
        return;
    unique &= ~INFLIGHT_RESENT;
    InflightRec *saved = tls_rec;
    tls_rec = NULL; /* the give-backs are not this request's */
    g_mutex_lock(&a->lock);
    for (int t = 0; t < INFLIGHT_THREADS; t++) {
        InflightRec *k = &a->kept[t];
        if (atomic_load(&k->unique) != unique)
            continue;
        uint32_t n = MIN(atomic_load(&k->n), INFLIGHT_ENTRIES);
        /* handles first: a handle holds its node */
        for (uint32_t kind = INFLIGHT_HANDLE + 1; kind-- > 0;)
            for (uint32_t i = 0; i < n; i++) {
                uint32_t e = atomic_load(&k->e[i]);
                if (e == INFLIGHT_DONE || e >> 28 != kind)
                    continue;
                atomic_store(&k->e[i], INFLIGHT_DONE); /* crossed out first */
                a->fn(a->ctx, kind, e & ((1u << 28) - 1), 1);
            }
        atomic_store(&k->unique, 0);
        atomic_store(&k->n, 0);
    }
    g_mutex_unlock(&a->lock);
    tls_rec = saved;
}

void inflight_resend_over(InflightAdopted *a)
{
    if (!a)
        return;
    GArray *probe = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    g_mutex_lock(&a->lock);
    for (int t = 0; t < INFLIGHT_THREADS; t++) {
        InflightRec *k = &a->kept[t];
        if (atomic_load(&k->unique) == 0)
            continue;
        uint32_t n = MIN(atomic_load(&k->n), INFLIGHT_ENTRIES);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t e = atomic_load(&k->e[i]);
            if (e != INFLIGHT_DONE && e >> 28 == INFLIGHT_NODE)
                g_array_append_val(probe, e);
        }
        atomic_store(&k->unique, 0);
        atomic_store(&k->n, 0);
    }
    g_mutex_unlock(&a->lock);
    InflightRec *saved = tls_rec;
    tls_rec = NULL;
    for (guint i = 0; i < probe->len; i++)
        a->fn(a->ctx, INFLIGHT_PROBE, g_array_index(probe, uint32_t, i) & ((1u << 28) - 1), 0);
    tls_rec = saved;
    g_array_unref(probe);
}

bool inflight_adopted_holds(InflightAdopted *a, uint32_t kind, uint32_t slot)
{
    if (!a)
        return false;
    bool held = false;
    g_mutex_lock(&a->lock);
    for (int t = 0; t < INFLIGHT_THREADS && !held; t++) {
        InflightRec *k = &a->kept[t];
        if (atomic_load(&k->unique) == 0)
            continue;
        uint32_t n = MIN(atomic_load(&k->n), INFLIGHT_ENTRIES);
        for (uint32_t i = 0; i < n && !held; i++)
            held = atomic_load(&k->e[i]) == (kind << 28 | slot);
    }
    g_mutex_unlock(&a->lock);
    return held;
}

void inflight_adopted_free(InflightAdopted *a)
{
    if (!a)
        return;
    g_mutex_clear(&a->lock);
    g_free(a);
}

/* ---- the journal of this daemon, told by the protocol module ---- */

void inflight_journal_init(InflightJournal *j, InflightRec *records)
{
    j->records = records;
    atomic_store(&j->threads, 0);
    j->adopted = NULL;
    atomic_store(&j->resend_over, false);
}

void inflight_journal_adopt(InflightJournal *j, InflightGiveBack fn, void *ctx)
{
    j->adopted = inflight_adopt(j->records, fn, ctx);
}

void inflight_journal_clear(InflightJournal *j)
{
    inflight_adopted_free(j->adopted);
    j->adopted = NULL;
}

static void journal_request(void *ctx, uint64_t unique, bool resent, KioReqKind kind)
{
    InflightJournal *j = ctx;
    /* requests that get no reply are never resent: nothing to give back */
    if (resent)
        inflight_resent(j->adopted, unique); /* undo its first try first */
    else if (j->adopted && kind == KIO_REQ_REPLY &&
             !atomic_load_explicit(&j->resend_over, memory_order_relaxed) &&
             !atomic_exchange(&j->resend_over, true))
        inflight_resend_over(j->adopted); /* resent ones come first */
    inflight_begin(j->records, &j->threads, unique, kind != KIO_REQ_INTERRUPT,
                   kind == KIO_REQ_FORGET);
}

static void journal_forget(void *ctx, uint64_t nodeid, uint64_t nlookup)
{
    (void)ctx;
    inflight_note_forget((uint32_t)nodeid, nlookup);
}

static void journal_replied(void *ctx)
{
    (void)ctx;
    inflight_end();
}

const KioHooks inflight_kio_hooks = {journal_request, journal_forget, journal_replied};
