/* The restore source (record 013, "Restoring"): from the location a restore
 * names to what it reads.  A job's markers are the catalog's (a catalog of
 * the one job the answer comes from, built by the same code as the views'
 * catalog), and the jobs holding a marker for N are listed by markers.c, so
 * `ckptctl resolve`, `jobs`, `check` and `_views/<J>` cannot disagree.
 *
 *   the location names                         status
 *   <dir>/_jobs/<J> with a marker for N        ok: that marker's restore
 *   <dir>/_jobs/<J>, latest                    ok: J's latest restorable
 *                                              checkpoint (the catalog's
 *                                              `latest`); when none is
 *                                              restorable, J's newest marker
 *                                              (not restorable, with why)
 *   a checkpoint dir where one job has N       ok: that job's marker
 *   ... where several jobs have N              refused: candidates
 *   latest where several jobs have markers     refused: candidates
 *   no marker for N, or a state backend URI    as-given
 *   <dir>/_jobs/<J> without a marker for N     as-given, with a warning: the
 *                                              restore would read the marker
 *                                              directory itself as state
 *
 * "Has a marker for N" counts every checkpoint markers.c lists, malformed
 * ones included (a COMPLETED that is not a regular file is a malformed
 * checkpoint, never "no marker"). */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "resolve.h"

typedef enum {
    CK_RESOLVE_OK,       /* "ok": one job's marker */
    CK_RESOLVE_REFUSED,  /* "refused": several jobs; candidates named */
    CK_RESOLVE_AS_GIVEN, /* "as-given": no marker, or a state backend URI */
} CkResolveStatus;

const char *ck_resolve_status_name(CkResolveStatus s);

typedef struct {
    CkResolveStatus status;
    CkRestore *restore;    /* CK_RESOLVE_OK (may be not restorable) */
    GPtrArray *unknown;    /* CK_RESOLVE_OK: its marker's unknown keys (CkMarkerKv*) */
    GPtrArray *candidates; /* CK_RESOLVE_REFUSED: "<dir>/_jobs/<J>" for each job */
    char *location;        /* as given */
    char *error;           /* the refusal (ck_refusal_text) */
    /* CK_RESOLVE_AS_GIVEN for a job's marker directory with no marker for N
     * (or none at all, for latest): a restore would read the marker
     * directory itself as state; else NULL */
    char *warning;
    /* The checkpoint directory, derived lexically from the location as given
     * (location itself, or location minus "/_jobs/<J>"); restore->marker and
     * local restore->reads are relative to it.  NULL for as-given URIs. */
    char *dir;
} CkResolution;

/* location: a path or URI.  latest=true resolves the latest restorable
 * checkpoint, else checkpoint N.  Returns 0, or -errno when the location is
 * a local path that cannot be read (ENOENT, EACCES, ...). */
int ck_resolve(const char *location, bool latest, uint64_t checkpoint, const CkResolveOptions *opts,
               CkResolution **out);
void ck_resolution_free(CkResolution *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkResolution, ck_resolution_free)

/* The refusal's text, the one wording every tool prints (g_free):
 * candidates "<dir>/_jobs/<J>"; latest, or checkpoint n. */
char *ck_refusal_text(const char *location, bool latest, uint64_t n, const GPtrArray *candidates);
