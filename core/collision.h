/* Collision records (as ckptfs(8) shows them): one JSON object per line,
 *   {"time","kind","verdict","op","path","path2","caller_job"[,"identity"
 *    [,"identity_value"]],"owner_job","pid","uid","comm"[,"tag"]}
 * and the bounded in-memory log behind _views/.collisions (newest N records),
 * optionally appended to a file that survives restarts.  Thread-safe. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fence.h"

#define CK_COLLISION_LOG_KEEP 10000

typedef struct {
    gint64 time_us;         /* g_get_real_time() */
    const char *kind;       /* ck_verdict_kind() */
    bool denied;            /* "denied" (enforce) or "allowed" (audit) */
    const char *op;         /* "create", "rename", "write", ... */
    const char *path;       /* relative to the mount root */
    const char *path2;      /* rename/link destination or symlink target; NULL -> null */
    const char *caller_job; /* NULL -> null */
    /* "identity": the mode that named the caller ("env", "cgroup", "uid",
     * "job": ck_identity_mode_name); NULL (an anonymous caller, a mount
     * without identity) leaves the member out */
    const char *identity;
    /* "identity_value": for an identity that is not a valid job id
     * (invalid-identity), the value as given, escaped; NULL leaves it out */
    const char *identity_value;
    const char *owner_job; /* NULL -> null */
    pid_t pid;
    uid_t uid;
    const char *comm; /* process name, may be NULL */
    /* "tag" (a mount with tag_env=VAR): VAR of the writing process, naming
     * e.g. the test that crossed; NULL -> null.  Without has_tag the member
     * is left out, so records of mounts without tag_env= stay as they were. */
    bool has_tag;
    const char *tag;
} CkCollision;

/* One line, no trailing newline; g_free. Time as 2026-12-01T18:00:00.123Z. */
char *ck_collision_to_json(const CkCollision *c);

typedef struct CkCollisionLog CkCollisionLog;
/* file: NULL, or a path opened O_APPEND (created 0644) through fence (a
 * name leading behind it is refused, now and at every reopen; NULL: none;
 * copied).  Returns NULL and sets *error (G_FILE_ERROR) when the file
 * cannot be opened.  keep: lines kept in memory (CK_COLLISION_LOG_KEEP; 0
 * keeps none).  Each line reaches the file in one write(), so mounts
 * sharing a file never interleave. */
CkCollisionLog *ck_collision_log_new(guint keep, const char *file, const CkFence *fence,
                                     GError **error);
/* The same, keeping the lines in `store`, memory the caller owns (and must
 * keep mapped until ck_collision_log_free): zeroed memory becomes an empty
 * log; memory that holds a log (left by another process that mapped it,
 * and may have died at any instruction) is taken over with its lines and
 * counts.  The store is shared safely between processes (a robust,
 * process-shared lock): a writer killed in the middle of an append leaves
 * the lines before it whole, and at most the oldest line is lost.  size:
 * at least ck_collision_store_size(keep); a store made for another keep or
 * layout is started afresh. */
CkCollisionLog *ck_collision_log_new_in(void *store, size_t size, guint keep, const char *file,
                                        const CkFence *fence, GError **error);
/* The bytes a store for `keep` lines needs (page-aligned; untouched pages
 * of a sparse mapping cost nothing). */
size_t ck_collision_store_size(guint keep);
void ck_collision_log_free(CkCollisionLog *log);
void ck_collision_log_append(CkCollisionLog *log, const CkCollision *c);
/* Opens the file again by its path (log rotation: the old one was moved
 * away); appends go to the new one from then on.  Without a file, true.
 * On failure (the path leads behind the fence too) the old descriptor
 * stays, and *error says why, naming the path. */
bool ck_collision_log_reopen(CkCollisionLog *log, GError **error);
/* All kept lines, oldest first, each ending in '\n'. */
GBytes *ck_collision_log_snapshot(CkCollisionLog *log);
guint64 ck_collision_log_total(CkCollisionLog *log);
/* time_us of the newest record appended, 0 before the first: the mtime of
 * _views/.collisions, so it changes only when the log does (tar, rsync). */
gint64 ck_collision_log_last_time(CkCollisionLog *log);

/* For ckptctl: parses a log (the lines of _views/.collisions or of
 * collision_log=FILE).  Returns one JsonObject* per non-empty line
 * (json_object_unref is the array's free func), or NULL with *err set
 * (CK_COLLISION_ERROR_PARSE, "line N: ...") at the first line that is not a
 * JSON object; nothing is skipped silently.  A '\r' before the LF is
 * stripped. */
#define CK_COLLISION_ERROR (ck_collision_error_quark())
GQuark ck_collision_error_quark(void);
typedef enum {
    CK_COLLISION_ERROR_PARSE,
} CkCollisionError;
GPtrArray *ck_collision_parse_lines(const char *buf, gsize len, GError **err);
/* The same for a reader that goes on past a torn line (a writer killed
 * mid-line, a disk that filled up): every line that is not a JSON object
 * is skipped and counted in *skipped, *first_bad (optional) gets the
 * number of the first such line (0 when none).  A last line without its
 * LF is read like the others.  Never NULL. */
GPtrArray *ck_collision_parse_lines_skipping(const char *buf, gsize len, guint *skipped,
                                             guint *first_bad);
/* For tables of records (a record as ck_collision_parse_lines gives it):
 * who wrote, as a reader would say it: the caller's job; "(invalid: VALUE)"
 * for an identity that is not a job id; "(anonymous)".  g_free. */
char *ck_collision_caller_text(JsonObject *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkCollisionLog, ck_collision_log_free)
