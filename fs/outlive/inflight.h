/* The in-flight journal: what each request took that the kernel may not
 * have been told of (docs/DESIGN.md, "Outliving the daemon").
 *
 * A daemon killed between doing a lookup (or an open) and answering it
 * leaves a lookup reference (or an open handle) in the state that the
 * kernel never got; the kernel then resends the request and the next
 * daemon does it again.  So every worker thread writes, in a record of the
 * state memfd, the unique of the request it serves and each node reference
 * and handle the request takes; the record is cleared once the reply is
 * written.  A daemon that attaches adopts the records left: when a request
 * comes again (resent: the kernel never had its reply), what its first try
 * took is given back just before it is done again; a record whose request
 * never comes again was answered, and is dropped.  So the accounting is
 * exact either side of the reply.
 * Forgets get no reply and are never resent: the ones a dead daemon read
 * and had not applied, the next applies at once.
 * The protocol module tells the journal of each request and reply through
 * its hooks (inflight_kio_hooks); the node table and the handle registry
 * note what a request takes (inflight_note). */
#pragma once
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernel/kio.h"

#define INFLIGHT_THREADS 64 /* worker threads journaled; more take nothing back */
#define INFLIGHT_RECORDS (2 * INFLIGHT_THREADS) /* the live records, then the adopted ones */
#define INFLIGHT_ENTRIES 250                    /* per request; a bigger readdirplus overflows */
#define INFLIGHT_NODE    0u                     /* entry: one lookup reference on a node slot */
#define INFLIGHT_HANDLE  1u                     /* entry: a handle slot */
#define INFLIGHT_PROBE   3u /* give-back: a node of a request the kernel did not resend */
#define INFLIGHT_FORGET  2u /* entries: (kind, node id low word, count) of a forget read */

typedef struct {
    _Atomic uint64_t unique; /* 0: no request, or answered */
    _Atomic uint32_t n;
    uint32_t overflow;
    _Atomic uint32_t e[INFLIGHT_ENTRIES]; /* kind << 28 | slot */
    _Atomic int64_t since_us; /* g_get_monotonic_time() when read: a hung daemon shows (status.h) */
} InflightRec;

/* A request read by this thread (kio, at read): its record is this
 * thread's, the counter hands out the records to threads (per daemon). */
void inflight_begin(InflightRec *base, _Atomic uint32_t *threads, uint64_t unique, bool journaled,
                    bool forgets);
/* A FORGET read (kio): count references on the node whose id's low word is
 * node_lo are to be given back.  Each one the request applies goes off
 * through inflight_unnote(INFLIGHT_NODE, slot); what a dead daemon had not
 * applied, the next applies (a forget is never resent). */
void inflight_note_forget(uint32_t node_lo, uint64_t count);
/* The reply to this thread's request went out. */
void inflight_end(void);
/* This thread's request took (note) or gave back (unnote) a reference on a
 * node slot or a handle slot; a no-op outside a journaled request. */
void inflight_note(uint32_t kind, uint32_t slot);
void inflight_unnote(uint32_t kind, uint32_t slot);
/* What an attaching daemon adopted from the records (inflight_adopt). */
typedef struct InflightAdopted InflightAdopted;
typedef void (*InflightGiveBack)(void *ctx, uint32_t kind, uint32_t slot, uint32_t count);
/* Applies the forgets left unapplied and keeps the other records until
 * their requests come again; clears the records.  Before any request. */
InflightAdopted *inflight_adopt(InflightRec *base, InflightGiveBack fn, void *ctx);
/* The request this thread just read was resent (its unique, without the
 * resend bit): what its first try took is given back now (fn). */
void inflight_resent(InflightAdopted *a, uint64_t unique);
void inflight_adopted_free(InflightAdopted *a);
/* The kernel has resent all it will (a request that is not resent was
 * read): the records left were answered before their daemon died.  Their
 * nodes go to fn as INFLIGHT_PROBE (the kernel may have forgotten them
 * since, and the forget died with a daemon); the records go. */
void inflight_resend_over(InflightAdopted *a);
/* An adopted record of a request not seen again yet holds this slot. */
bool inflight_adopted_holds(InflightAdopted *a, uint32_t kind, uint32_t slot);

/* The journal of one daemon: its records, and the previous daemon's it
 * adopted.  Told of every request and reply by the protocol module
 * (inflight_kio_hooks, ctx: the journal). */
typedef struct {
    InflightRec *records;     /* the state memfd's [INFLIGHT_RECORDS] */
    _Atomic uint32_t threads; /* records handed out to this daemon's threads */
    InflightAdopted *adopted; /* a previous daemon's records (inflight_journal_adopt) */
    atomic_bool resend_over;  /* a request not resent was read since */
} InflightJournal;

void inflight_journal_init(InflightJournal *j, InflightRec *records);
/* A daemon that attached: the previous daemon's records, given back
 * request by request as the kernel resends them.  Before any request. */
void inflight_journal_adopt(InflightJournal *j, InflightGiveBack fn, void *ctx);
void inflight_journal_clear(InflightJournal *j);
extern const KioHooks inflight_kio_hooks;
