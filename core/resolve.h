/* Restore resolution, by marker class (namespaced, legacy, cut short,
 * malformed).
 *
 * ck_restore_of_marker: what a restore of one job's checkpoint N reads,
 * given its parsed marker and the checkpoint directory it sits in.  Markers
 * are listed and read by markers.c, for the catalog and for ck_resolve (the
 * table from a location to its restore source, restore_source.h), so ckptctl
 * and the views share it. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "marker.h"

typedef enum {
    CK_ROOT_NONE,     /* nothing to read (malformed, cut-short without own root) */
    CK_ROOT_LOCAL,    /* inside the checkpoint directory; paths relative to it */
    CK_ROOT_EXTERNAL, /* an absolute local root allowed by external_root */
    CK_ROOT_REMOTE,   /* an object-store URI, or an absolute root not allowed: not followed */
} CkRootKind;

/* "none", "local", "external", "remote" */
const char *ck_root_kind_name(CkRootKind k);

typedef struct {
    char *legacy_backend;        /* legacy=..., NULL: the checkpoint dir itself */
    GHashTable *legacy_backends; /* job -> path (config=FILE), may be NULL */
    GPtrArray *external_roots;   /* char* prefixes allowed for absolute roots, may be NULL */
} CkResolveOptions;

typedef struct {
    const char *job; /* interned */
    uint64_t checkpoint;
    CkMarkerClass cls;
    bool restorable;
    CkRootKind root_kind;
    char *root; /* as recorded/derived: "_state/j1", "/abs", "s3://..", "" for the dir itself */
    bool has_generation;
    uint64_t generation;
    bool generation_guessed; /* generation_source=guessed */
    GArray *participants;    /* guint32 */
    char *marker;            /* "_jobs/<J>/chk-<N>/COMPLETED", relative to the dir */
    GPtrArray *reads;        /* char*: relative to the dir for CK_ROOT_LOCAL, else absolute/URI */
    bool legacy_location;    /* reads are in the shared legacy area (v<G>, <S>, legacy_backend) */
    bool older_layout;       /* legacy reads are <dir>/<S>, not <dir>/v<G>/<S> */
    const char
        *foreign_job; /* relative root names _state/<other>: that job (interned), else NULL */
    char *error;      /* why it is not restorable, else NULL */
    GArray *subtasks; /* guint32, parallel to reads: the subtask each read is for.  Equal to
                         participants except for cut-short markers, whose reads are the
                         subtask directories found under _state/<J>/v<G>. */
    char *state;      /* the marker's raw state= value when it differs from root (e.g. not
                         normalised), else NULL; for display */
} CkRestore;

/* dirfd: the checkpoint directory (for guessing generations, legacy layout
 * detection, cut-short own-root existence).  Never follows a symlink out of
 * dirfd for local roots.  Returns a new CkRestore (ck_restore_free). */
CkRestore *ck_restore_of_marker(int dirfd, const char *job, uint64_t checkpoint, const CkMarker *m,
                                const CkResolveOptions *opts);
void ck_restore_free(CkRestore *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkRestore, ck_restore_free)
CkRestore *ck_restore_copy(const CkRestore *r);
/* The state location a restore reads in (g_free): its root's generation
 * directory <root>/v<G> (for a URI the segment goes before any ?query, as
 * for the reads), the root itself for the older layout <root>/<S>; NULL
 * when it is not restorable.  Each read is <location>/<S>, so two restores
 * that share a read share the location; two that share the location share
 * state even when their subtasks differ, or one restores none: a rescaled
 * subtask of either writes into the other's. */
char *ck_restore_location(const CkRestore *r);

/* Whether r's root (and reads) is a path relative to the checkpoint
 * directory: a local root, or the own root a cut-short marker names that
 * is not there.  Shown joined to the directory, as the other paths. */
bool ck_restore_root_relative(const CkRestore *r);
/* Text as a describe line shows it (g_free): C escapes for control
 * characters, backslashes and bytes past ASCII, quotes as they are. */
char *ck_restore_escape(const char *text);

/* generation_source: "guessed" for a marker without generation= (also
 * when nothing could be guessed), "marker", or NULL for a malformed one. */
const char *ck_restore_generation_source(const CkRestore *r);

/* The "key: value" lines that describe one restore, in the words the views'
 * restore file and `ckptctl resolve` share (appended to out):
 *   checkpoint: 3
 *   class: namespaced|legacy|cut-short|malformed
 *   root: _state/j1 (local)          ("." for the dir itself)
 *   generation: 2 (marker)           (or "(guessed)")
 *   participants: 0,1
 *   marker: _jobs/j1/chk-3/COMPLETED
 *   restorable: yes|no
 *   reads: _state/j1/v2/0, _state/j1/v2/1
 *   legacy_location: yes (older layout)   (only for legacy locations)
 *   foreign_root: <job>                   (only when the root is another job's)
 *   shared_with: a, b                     (only when shared_with is given)
 *   unknown: key=value                    (one line per unknown key, C-escaped)
 *   error: <reason, C-escaped>
 * One rule for empty values: "-" (no root, no generation, no participants,
 * no reads, nobody to share with, no error).  dir (may be NULL) is joined to
 * the local paths (root, marker, local reads) as ckptctl resolve shows them;
 * NULL shows them relative to the checkpoint directory. */
void ck_restore_describe(GString *out, const CkRestore *r, const char *dir,
                         const GPtrArray *shared_with, const GPtrArray *unknown);
/* A path of the checkpoint directory as shown with dir (see above; g_free):
 * rel itself without dir ("." for ""), dir itself for "". */
char *ck_restore_path(const char *dir, const char *rel);

/* A memo of directory look-ups (root status, highest generation, entries)
 * shared by many ck_restore_of_marker_cached calls over one directory, so a
 * catalog of 100,000 markers does not stat the same roots 100,000 times.
 * Not thread-safe; drop it after one scan (it does not see later changes). */
typedef struct CkRootCache CkRootCache;
CkRootCache *ck_root_cache_new(void);
void ck_root_cache_free(CkRootCache *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkRootCache, ck_root_cache_free)
/* Tells the memo that the local directory `path` (relative to the
 * directory the look-ups are made in) is the directory open on fd, and
 * lists it now: a caller that opened it anyway spares the look-ups their
 * own open.  fd stays open, its offset moved. */
void ck_root_cache_scan_fd(CkRootCache *cache, const char *path, int fd);
/* ck_restore_of_marker with a memo (cache may be NULL). */
CkRestore *ck_restore_of_marker_cached(int dirfd, const char *job, uint64_t checkpoint,
                                       const CkMarker *m, const CkResolveOptions *opts,
                                       CkRootCache *cache);

/* Opens path beneath dirfd without crossing a symlink anywhere (openat2
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or a component-by-component walk
 * where openat2 is missing).  Returns a descriptor or -errno (ELOOP: a
 * component is a symlink; EXDEV: ".." would leave dirfd); *bad (optional,
 * g_free) gets the offending component path on failure. */
int ck_open_beneath(int dirfd, const char *path, int flags, char **bad);
/* Opens an absolute path beneath the first of external_roots (normalised
 * absolute prefixes) it is under, the prefix itself as given, without
 * crossing a symlink below it: how an external state root is read, by the
 * resolver and the views alike.  -EACCES when no prefix allows it; *bad
 * (optional) as ck_open_beneath's, absolute. */
int ck_open_external(const GPtrArray *external_roots, const char *path, int flags, char **bad);

/* Reads a directory with getdents64 on an open descriptor: no DIR, none of
 * the fcntl/fstat fdopendir adds, no allocation (the catalog lists ~100,000
 * directories).  The descriptor's offset moves; openat() relative to it is
 * unaffected.  "." and ".." are skipped. */
typedef struct {
    int fd;
    long len, pos;
    uint64_t ino; /* the inode number of the name ck_dir_iter_next returned */
    char buf[8192] __attribute__((aligned(8)));
} CkDirIter;
void ck_dir_iter_init(CkDirIter *it, int fd);
/* The next name (valid until the next call), or NULL at the end or on an
 * error; *d_type gets the entry's DT_* (DT_UNKNOWN when the file system does
 * not say). */
const char *ck_dir_iter_next(CkDirIter *it, unsigned char *d_type);
/* The DT_* type of entry `name` of dirfd, listed with d_type: d_type, or
 * when the file system left it DT_UNKNOWN, an fstatat's (not following a
 * symlink); DT_UNKNOWN when that fails too (the entry went away). */
unsigned char ck_dir_entry_type(int dirfd, const char *name, unsigned char d_type);

/* Lexical normalisation of '/'-separated paths ("." and empty components
 * dropped, ".." pops).  Relative: returns NULL when ".." climbs above the
 * start; "" is the start itself.  Absolute: ".." at "/" stays at "/". */
char *ck_path_normalize_rel(const char *p);
char *ck_path_normalize_abs(const char *p);
/* Component-wise prefix test on normalised absolute paths: /data/x is under
 * /data and /data/x, never under /data/xy. */
bool ck_path_is_under(const char *path, const char *prefix);
