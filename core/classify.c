#include "classify.h"

#include <string.h>

static bool is_job_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

bool ck_is_job_id(const char *s, size_t len)
{
    if (s == NULL || len == 0 || len > CK_JOB_ID_MAX || s[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_job_char((unsigned char)s[i]))
            return false;
    return true;
}

bool ck_parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (s == NULL || len == 0 || (len > 1 && s[0] == '0'))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < '0' || c > '9')
            return false;
        uint64_t d = c - '0';
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (out)
        *out = v;
    return true;
}

bool ck_parse_u32(const char *s, size_t len, uint32_t *out)
{
    uint64_t v;
    if (!ck_parse_u64(s, len, &v) || v > UINT32_MAX)
        return false;
    if (out)
        *out = (uint32_t)v;
    return true;
}

static bool has_prefix(const char *s, size_t len, const char *prefix, size_t plen)
{
    return len >= plen && memcmp(s, prefix, plen) == 0;
}

bool ck_parse_generation_name(const char *name, size_t len, uint64_t *g)
{
    return name && has_prefix(name, len, "v", 1) && ck_parse_u64(name + 1, len - 1, g);
}

bool ck_parse_checkpoint_name(const char *name, size_t len, uint64_t *n)
{
    return name && has_prefix(name, len, "chk-", 4) && ck_parse_u64(name + 4, len - 4, n);
}

bool ck_parse_subtask_name(const char *name, size_t len, uint32_t *s)
{
    return ck_parse_u32(name, len, s);
}

static bool name_is(const char *s, size_t len, const char *lit)
{
    size_t l = strlen(lit);
    return len == l && memcmp(s, lit, l) == 0;
}

/* The i-th '/'-separated component of path (0-based); false past the end. */
static bool component(const char *path, size_t idx, const char **c, size_t *clen)
{
    const char *p = path;
    for (size_t i = 0;; i++) {
        const char *slash = strchr(p, '/');
        size_t l = slash ? (size_t)(slash - p) : strlen(p);
        if (i == idx) {
            *c = p;
            *clen = l;
            return true;
        }
        if (!slash)
            return false;
        p = slash + 1;
    }
}

CkPathClass ck_classify_path(const char *path, const char *views_name)
{
    CkPathClass r = {.kind = CK_PATH_ROOT};
    if (views_name == NULL)
        views_name = "_views";
    if (path == NULL || path[0] == '\0')
        return r;

    const char *c0 = NULL, *c1 = NULL, *c2 = NULL, *c3 = NULL, *extra = NULL;
    size_t l0 = 0, l1 = 0, l2 = 0, l3 = 0, lx = 0;
    component(path, 0, &c0, &l0);
    bool has1 = component(path, 1, &c1, &l1);
    bool is_jobs = name_is(c0, l0, "_jobs");

    if (is_jobs || name_is(c0, l0, "_state")) {
        if (!has1 || (l1 == 0 && c1[0] == '\0')) { /* "_jobs" or "_jobs/" */
            r.kind = is_jobs ? CK_PATH_JOBS_DIR : CK_PATH_STATE_DIR;
            return r;
        }
        if (!ck_is_job_id(c1, l1)) {
            r.kind = CK_PATH_NOT_A_JOB;
            return r;
        }
        r.job = c1;
        r.job_len = l1;
        r.kind = is_jobs ? CK_PATH_JOB_MARKERS : CK_PATH_JOB_STATE;
        if (is_jobs && component(path, 2, &c2, &l2) && component(path, 3, &c3, &l3) &&
            !component(path, 4, &extra, &lx) && name_is(c3, l3, "COMPLETED") &&
            ck_parse_checkpoint_name(c2, l2, &r.checkpoint))
            r.kind = CK_PATH_MARKER;
        return r;
    }
    if (name_is(c0, l0, views_name)) {
        r.kind = CK_PATH_VIEWS;
        return r;
    }
    if (ck_parse_generation_name(c0, l0, &r.generation)) {
        r.kind = CK_PATH_LEGACY_GEN;
        return r;
    }
    if (ck_parse_subtask_name(c0, l0, &r.subtask)) {
        r.kind = CK_PATH_LEGACY_SUBTASK;
        return r;
    }
    r.kind = CK_PATH_LEGACY_OTHER;
    return r;
}
