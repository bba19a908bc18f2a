/* Names of a clink checkpoint directory: job ids, v<G>, chk-<N>, subtasks.
 *
 * Every parser here takes (bytes, length), never reads past them, and accepts
 * only canonical decimal: no sign, no leading zero except "0" itself.  N and G
 * fit in uint64, S in uint32.  A name that is not canonical ("v01",
 * "chk-007") is simply not a generation or checkpoint. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CK_JOB_ID_MAX 128

/* 1..128 bytes of [A-Za-z0-9_.-], not starting with '.'. */
bool ck_is_job_id(const char *s, size_t len);
/* Canonical unsigned decimal. */
bool ck_parse_u64(const char *s, size_t len, uint64_t *out);
bool ck_parse_u32(const char *s, size_t len, uint32_t *out);
/* "v<G>" */
bool ck_parse_generation_name(const char *name, size_t len, uint64_t *g);
/* "chk-<N>" */
bool ck_parse_checkpoint_name(const char *name, size_t len, uint64_t *n);
/* "<S>": a bare subtask index */
bool ck_parse_subtask_name(const char *name, size_t len, uint32_t *s);

/* What a relative path of a checkpoint directory is, for ckptctl and the
 * catalog (the mount keeps a CkNs per node instead; see policy.h). */
typedef enum {
    CK_PATH_ROOT,           /* "" */
    CK_PATH_JOBS_DIR,       /* "_jobs" */
    CK_PATH_STATE_DIR,      /* "_state" */
    CK_PATH_VIEWS,          /* the views dir or below */
    CK_PATH_JOB_MARKERS,    /* "_jobs/<J>" or below, except ... */
    CK_PATH_MARKER,         /* "_jobs/<J>/chk-<N>/COMPLETED" */
    CK_PATH_JOB_STATE,      /* "_state/<J>" or below */
    CK_PATH_NOT_A_JOB,      /* a name under _jobs/_state that is not a job id, or below */
    CK_PATH_LEGACY_GEN,     /* "v<G>" or below */
    CK_PATH_LEGACY_SUBTASK, /* "<S>" (older layout) or below */
    CK_PATH_LEGACY_OTHER,   /* any other top-level entry or below */
} CkPathKind;

typedef struct {
    CkPathKind kind;
    const char *job; /* points into the path; job_len bytes; NULL if none */
    size_t job_len;
    uint64_t checkpoint; /* CK_PATH_MARKER */
    uint64_t generation; /* CK_PATH_LEGACY_GEN */
    uint32_t subtask;    /* CK_PATH_LEGACY_SUBTASK */
} CkPathClass;

/* path: relative to the checkpoint directory, '/'-separated, no leading '/';
 * "." and ".." components are not interpreted (callers normalise first).
 * views_name: the virtual directory's name ("_views" by default). */
CkPathClass ck_classify_path(const char *path, const char *views_name);
