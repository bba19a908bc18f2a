/* `ckptctl status`: what a mount's daemon and supervisor say of it, as one
 * JSON document made from the state memfd alone, so that the supervisor
 * answers while its daemon is hung (stopped, deadlocked) and a takeover is
 * under way.  The daemon publishes what only it knows (status_publish); the
 * asker (supervisor, or a daemon without one) adds what it knows of the
 * processes.  The document's fields are listed in ckptctl(1). */
#pragma once
#include <glib.h>
#include <stdbool.h>

#include "options.h"
#include "state.h"

typedef struct {
    int supervisor_pid; /* 0: the mount has no supervisor */
    gint64 supervisor_started_us;
    guint64 restarts;     /* daemons the supervisor started after the first */
    const char *state;    /* "serving", "starting", "replacing", "failed" */
    const char *why;      /* failed: why no daemon can start */
    int daemon_pid;       /* the daemon that serves, 0: none */
    bool connection_gone; /* the mount was unmounted or aborted */
} StatusProcs;

/* A request unanswered this long makes the mount unhealthy: a daemon or a
 * backing file system that hangs (an fsync on a healthy disk takes far
 * less). */
#define STATUS_HUNG_AFTER_S 60

/* The daemon: what it is, at INIT (passthrough is known then: why, NULL
 * when it is on), started_us when it started (g_get_real_time). */
void status_publish(State *st, const FsOptions *o, const char *why, gint64 started_us);
/* The document (g_free); *healthy: nothing in its "problems". */
char *status_json(const State *st, const StatusProcs *p, bool *healthy);
