/* The COMPLETED marker (key=value lines under _jobs/<J>/chk-<N>/): parser and
 * classification.
 *
 * ck_marker_parse never crashes and never reads past len, whatever the bytes.
 * A parse error is not a failure of the call: it yields a marker of class
 * CK_MARKER_MALFORMED with the 1-based line number and a reason.
 *
 * Choices made where the marker format leaves a case open:
 * - one '\r' before the LF (a CRLF file edited elsewhere) is stripped;
 * - values are not trimmed: "generation= 1" is a non-canonical number;
 * - a key outside [a-z_]+ (e.g. "Generation", "gen2", "") is malformed;
 * - unknown keys, duplicated ones included, are kept in file order;
 * - "participants=" is the empty list (has_participants is true), an empty
 *   element ("0,,1", "0,1,") is malformed; "state=" (empty) is malformed;
 * - a subtask listed twice in participants= is kept once, at its first
 *   place (a participant is read once);
 * - a '\r' is dropped only before an LF: a last line without LF keeps it;
 * - error is "line N: reason"; whole-file errors (size, not a regular file)
 *   have error_line 0 and no prefix; the first error in file order wins and
 *   the other fields hold what was parsed before it (do not rely on them). */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define CK_MARKER_MAX_BYTES (64 * 1024)

typedef enum {
    CK_MARKER_NAMESPACED, /* has state= */
    CK_MARKER_LEGACY,     /* no state=, has participants= */
    CK_MARKER_CUT_SHORT,  /* neither */
    CK_MARKER_MALFORMED,  /* parse error */
} CkMarkerClass;

/* "namespaced", "legacy", "cut-short", "malformed" */
const char *ck_marker_class_name(CkMarkerClass c);

typedef struct {
    char *key;
    char *value;
} CkMarkerKv;

typedef struct {
    CkMarkerClass cls;
    bool has_checkpoint, has_generation, has_participants, has_state;
    uint64_t checkpoint;
    uint64_t generation;
    GArray *participants; /* guint32, in file order; empty array if none */
    char *state;          /* raw value of state=, NULL if absent */
    unsigned state_line;  /* 1-based line of state=, for what the resolver finds wrong in it */
    GPtrArray *unknown;   /* CkMarkerKv*, unknown keys in file order */
    unsigned error_line;  /* 1-based; 0 when not malformed (or whole-file error) */
    char *error;          /* reason when malformed, else NULL */
} CkMarker;

/* A copy of a marker's unknown keys (CkMarkerKv*, freed with the array). */
GPtrArray *ck_marker_kv_copy(const GPtrArray *kvs);

/* Parses buf[0..len).  expected_checkpoint: the N of the chk-<N> directory;
 * a checkpoint= that differs makes the marker malformed.  Always returns a
 * marker (free with ck_marker_free). */
CkMarker *ck_marker_parse(const char *buf, size_t len, uint64_t expected_checkpoint);
/* A whole-file malformed marker (error_line 0) with this reason. */
CkMarker *ck_marker_malformed(const char *reason);
/* What a non-regular file is, for messages: "a symlink, not followed",
 * "a directory", "a FIFO", ... */
const char *ck_marker_file_type(mode_t mode);
/* The malformed marker of a COMPLETED that is not a regular file, which is
 * never followed or opened: "not a regular file (a directory)", "not a
 * regular file (a symlink, not followed)", ... */
CkMarker *ck_marker_not_regular(mode_t mode);
/* Reads and parses a marker file.  A file over 64 KiB is malformed (read at
 * most 64 KiB + 1).  Returns 0 with *out set, or -errno on I/O error (the
 * marker is then unreadable, which the caller reports).  A path that is not a
 * regular file (a symlink, a directory, a FIFO, a device) is never followed
 * or opened: it is returned as ck_marker_not_regular. */
int ck_marker_load(int dirfd, const char *path, uint64_t expected_checkpoint, CkMarker **out);
/* ck_marker_load's part after the open, for a caller that opens the file
 * itself: st is what the caller last saw of it (the stat of its name before
 * the open), buf CK_MARKER_MAX_BYTES + 1 bytes of scratch.  The bytes are
 * read from the start; when they disagree with st_size (or cannot be read)
 * fd is fstat'ed into *st and read again, so *st is never newer than the
 * bytes parsed, and what was put in the file's place (a directory, a FIFO)
 * is malformed as not a regular file.  What this gives up against an
 * fstat of every open file: a device put in the place of the listed file
 * is read (O_NONBLOCK, at most 64 KiB + 1) before the fstat says what it
 * is; and when a file of the same size replaced the listed one, *st keeps
 * the listed file's stamp, so a rescan that finds that file back (renamed
 * back) does not read it again.  Returns 0, or 1 when *st was refreshed,
 * with *out set; or -errno. */
int ck_marker_read_fd(int fd, struct stat *st, uint64_t expected_checkpoint, char *buf,
                      CkMarker **out);
void ck_marker_free(CkMarker *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkMarker, ck_marker_free)
