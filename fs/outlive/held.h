/* The files without a name a supervisor holds for the next daemon.
 *
 * A file unlinked through the mount while open, an O_TMPFILE file: the
 * daemon's descriptor may be all that holds such a file (no name, no
 * passthrough), and the daemon's death would free it with its data.  The
 * daemon says "hold SLOT GEN" with a duplicate and "let-go SLOT GEN" once
 * the node goes or the file is linked to a name.  The supervisor offers
 * what it holds to each daemon it starts or attaches ("held SLOT GEN"
 * each, then "held-end"), which finds the nodes again by slot and
 * generation and holds those again; once that daemon serves, the rest
 * goes (one that dies first leaves the offer to the next).  Nothing waits:
 * both ends hold at most HELD_MAX, so that every message fits the socket
 * between them.  This is the set and its words; the supervisor
 * (supervisor.c) carries the messages. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include <glib.h>

/* At once, at most (and half RLIMIT_NOFILE): a daemon's holds and let-gos
 * in flight, and an offer, fit a socket's buffer (about 278 messages with
 * a descriptor at the default wmem), so none is lost for want of room. */
#define HELD_MAX 128

typedef struct HeldSet HeldSet;

HeldSet *held_set_new(void);
/* Closes every descriptor held (and waits for the closes under way). */
void held_set_free(HeldSet *h);
/* A daemon's message: "hold ..." (takes *fd, sets it to -1) or "let-go
 * ..."; false when it is neither. */
bool held_set_message(HeldSet *h, const char *msg, int *fd);
/* Offers each held file, as its "held" message (msg) and descriptor, to
 * offer() until it returns false; those it took are marked offered. */
void held_set_offer(HeldSet *h, bool (*offer)(const char *msg, int fd, void *ctx), void *ctx);
/* A daemon serves: the offered ones it did not hold again have no node. */
void held_set_settle(HeldSet *h);
/* Across the supervisor's exec of itself: the set into the environment,
 * its descriptors inherited (inherit), or back as it was after a failed
 * exec (!inherit); and, in the new binary, the set from there. */
void held_set_inherit(HeldSet *h, bool inherit);
void held_set_resume(HeldSet *h);

/* "WORD SLOT GEN" into out. */
void held_word(char *out, size_t len, const char *word, guint32 slot, guint64 gen);
/* "SLOT GEN" (the rest of a message after its word). */
bool held_parse(const char *text, guint32 *slot, guint64 *gen);
