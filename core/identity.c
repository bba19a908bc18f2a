#include "identity.h"
#include "intern.h"
#include "classify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAX   4096
#define STAT_MAX    4096
#define PATTERN_MAX 4096
/* The first read of a file read whole: most environments and every usual
 * cgroup file fit, so a miss costs one allocation and one read. */
#define PROC_READ_FIRST (16 * 1024)

const char *ck_identity_mode_name(CkIdentityMode m)
{
    switch (m) {
    case CK_IDENTITY_JOB:
        return "job";
    case CK_IDENTITY_ENV:
        return "env";
    case CK_IDENTITY_CGROUP:
        return "cgroup";
    case CK_IDENTITY_UID:
        return "uid";
    case CK_IDENTITY_NONE:
        break;
    }
    return NULL;
}

bool ck_identity_anonymous_denied_by_default(CkIdentityMode m)
{
    return m == CK_IDENTITY_CGROUP || m == CK_IDENTITY_UID;
}

char *ck_identity_escape(const char *raw, size_t len)
{
    GString *s = g_string_sized_new(len + 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c >= 0x20 && c <= 0x7e && c != '\\')
            g_string_append_c(s, (char)c);
        else
            g_string_append_printf(s, "\\x%02x", c);
    }
    return g_string_free(s, FALSE);
}

/* ---- cgroup patterns ---- */

typedef enum { PC_LITERAL, PC_ANY, PC_JOB } PcKind;

typedef struct {
    PcKind kind;
    char *text; /* PC_LITERAL: the name; PC_JOB: what precedes %j */
    size_t len;
    char *suffix; /* PC_JOB: what follows %j */
    size_t suffix_len;
} PatComp;

struct CkCgroupPattern {
    GArray *comps; /* PatComp */
};

static void pat_comp_clear(gpointer p)
{
    PatComp *c = p;
    g_free(c->text);
    g_free(c->suffix);
}

void ck_cgroup_pattern_free(CkCgroupPattern *p)
{
    if (p == NULL)
        return;
    g_array_unref(p->comps);
    g_free(p);
}

/* Whether a component (of a pattern or a map's prefix) is a name: not
 * empty, not "." or "..". */
static bool plain_component(const char *c, size_t len)
{
    return len > 0 && !(len == 1 && c[0] == '.') && !(len == 2 && c[0] == '.' && c[1] == '.');
}

CkCgroupPattern *ck_cgroup_pattern_new(const char *text, char **why)
{
    size_t tlen = strlen(text);
    if (text[0] != '/') {
        *why = g_strdup("a cgroup pattern is an absolute path (it starts with '/')");
        return NULL;
    }
    if (tlen > PATTERN_MAX) {
        *why = g_strdup_printf("a cgroup pattern has at most %d bytes", PATTERN_MAX);
        return NULL;
    }
    if (tlen == 1 || text[tlen - 1] == '/') {
        *why = g_strdup("a cgroup pattern ends with a name, not '/'");
        return NULL;
    }
    g_autoptr(CkCgroupPattern) p = g_new0(CkCgroupPattern, 1);
    p->comps = g_array_new(FALSE, TRUE, sizeof(PatComp));
    g_array_set_clear_func(p->comps, pat_comp_clear);
    guint jobs = 0;
    const char *c = text + 1, *end = text + tlen;
    while (c < end) {
        const char *slash = memchr(c, '/', (size_t)(end - c));
        size_t len = slash ? (size_t)(slash - c) : (size_t)(end - c);
        if (!plain_component(c, len)) {
            *why = g_strdup("a cgroup pattern has no empty, \".\" or \"..\" component");
            return NULL;
        }
        PatComp pc = {0};
        const char *pct = memchr(c, '%', len);
        const char *star = memchr(c, '*', len);
        if (len == 1 && c[0] == '*') {
            pc.kind = PC_ANY;
        } else if (star) {
            *why = g_strdup("'*' stands for a whole component of a cgroup pattern");
            return NULL;
        } else if (pct) {
            size_t at = (size_t)(pct - c);
            if (at + 1 >= len || pct[1] != 'j' || memchr(pct + 2, '%', len - at - 2)) {
                *why = g_strdup("'%' appears in a cgroup pattern only as %j, once");
                return NULL;
            }
            jobs++;
            pc.kind = PC_JOB;
            pc.text = g_strndup(c, at);
            pc.len = at;
            pc.suffix = g_strndup(pct + 2, len - at - 2);
            pc.suffix_len = len - at - 2;
        } else {
            pc.kind = PC_LITERAL;
            pc.text = g_strndup(c, len);
            pc.len = len;
        }
        g_array_append_val(p->comps, pc);
        c = slash ? slash + 1 : end;
    }
    if (jobs != 1) {
        *why = g_strdup_printf("a cgroup pattern holds %%j (the job id) exactly once, not %u times",
                               jobs);
        return NULL;
    }
    return g_steal_pointer(&p);
}

bool ck_cgroup_pattern_match(const CkCgroupPattern *p, const char *path, size_t len,
                             const char **job, size_t *job_len)
{
    const char *c = path, *end = path + len;
    if (c < end && *c == '/')
        c++;
    for (guint i = 0; i < p->comps->len; i++) {
        const PatComp *pc = &g_array_index(p->comps, PatComp, i);
        if (c >= end)
            return false; /* the path is shorter than the pattern */
        const char *slash = memchr(c, '/', (size_t)(end - c));
        size_t clen = slash ? (size_t)(slash - c) : (size_t)(end - c);
        if (clen == 0)
            return false;
        switch (pc->kind) {
        case PC_ANY:
            break;
        case PC_LITERAL:
            if (clen != pc->len || memcmp(c, pc->text, clen) != 0)
                return false;
            break;
        case PC_JOB:
            if (clen < pc->len + pc->suffix_len || memcmp(c, pc->text, pc->len) != 0 ||
                memcmp(c + clen - pc->suffix_len, pc->suffix, pc->suffix_len) != 0)
                return false;
            *job = c + pc->len;
            *job_len = clen - pc->len - pc->suffix_len;
            break;
        }
        c = slash ? slash + 1 : end;
    }
    return true; /* a prefix: deeper components are the job's own sub-cgroups */
}

bool ck_identity_spec_check(const char *spec, CkIdentityMode *mode, char **why)
{
    if (g_str_has_prefix(spec, "env:")) {
        const char *var = spec + 4;
        if (!*var || strchr(var, '=')) {
            *why = g_strdup("expected env:VAR, a variable name");
            return false;
        }
        *mode = CK_IDENTITY_ENV;
        return true;
    }
    if (strcmp(spec, "cgroup") == 0) {
        *mode = CK_IDENTITY_CGROUP;
        return true;
    }
    if (g_str_has_prefix(spec, "cgroup:")) {
        CkCgroupPattern *p = ck_cgroup_pattern_new(spec + 7, why);
        if (!p)
            return false;
        ck_cgroup_pattern_free(p);
        *mode = CK_IDENTITY_CGROUP;
        return true;
    }
    if (strcmp(spec, "uid") == 0) {
        *mode = CK_IDENTITY_UID;
        return true;
    }
    *why = g_strdup("expected env:VAR, cgroup:PATTERN, cgroup or uid");
    return false;
}

/* ---- the identity map ---- */

struct CkIdentityMap {
    GHashTable *by_prefix; /* g_strdup prefix -> interned job */
    GHashTable *by_uid;    /* GUINT_TO_POINTER(uid + 1) -> interned job */
    GHashTable *line_of;   /* key text -> GUINT_TO_POINTER(line): duplicates, while parsing */
};

void ck_identity_map_free(CkIdentityMap *m)
{
    if (m == NULL)
        return;
    g_hash_table_destroy(m->by_prefix);
    g_hash_table_destroy(m->by_uid);
    if (m->line_of)
        g_hash_table_destroy(m->line_of);
    g_free(m);
}

guint ck_identity_map_cgroup_lines(const CkIdentityMap *m)
{
    return m ? g_hash_table_size(m->by_prefix) : 0;
}

guint ck_identity_map_uid_lines(const CkIdentityMap *m)
{
    return m ? g_hash_table_size(m->by_uid) : 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* A cgroup prefix of the map: "/" or "/name[/name...]", no empty, "." or
 * ".." component, no trailing '/'. */
static bool valid_prefix(const char *s, size_t len)
{
    if (len == 0 || s[0] != '/')
        return false;
    if (len == 1)
        return true;
    const char *c = s + 1, *end = s + len;
    for (;;) {
        const char *slash = memchr(c, '/', (size_t)(end - c));
        size_t clen = slash ? (size_t)(slash - c) : (size_t)(end - c);
        if (!plain_component(c, clen))
            return false;
        if (!slash)
            return true;
        c = slash + 1;
    }
}

/* One line (without its LF; a CR before it dropped): 0, or why it is
 * malformed (g_free). */
static char *parse_line(CkIdentityMap *m, const char *line, size_t len, guint lineno)
{
    const char *p = line, *end = line + len;
    while (p < end && is_blank(*p))
        p++;
    while (end > p && is_blank(end[-1]))
        end--;
    if (p == end || *p == '#')
        return NULL;
    const char *k = p;
    while (p < end && !is_blank(*p))
        p++;
    size_t klen = (size_t)(p - k);
    while (p < end && is_blank(*p))
        p++;
    const char *j = p;
    while (p < end && !is_blank(*p))
        p++;
    size_t jlen = (size_t)(p - j);
    if (jlen == 0 || p != end)
        return g_strdup("expected two fields, \"CGROUP-PREFIX JOB-ID\" or \"uid:N JOB-ID\"");
    g_autofree char *key = g_strndup(k, klen);
    g_autofree char *jobtxt = g_strndup(j, jlen);
    if (!ck_is_job_id(j, jlen)) {
        g_autofree char *shown = ck_identity_escape(j, jlen);
        return g_strdup_printf("%s: not a valid job id (1-128 of [A-Za-z0-9_.-], not starting "
                               "with '.')",
                               shown);
    }
    bool uid_line = g_str_has_prefix(key, "uid:");
    uint32_t uid = 0;
    if (uid_line) {
        if (!ck_parse_u32(key + 4, klen - 4, &uid) || uid == (uint32_t)-1) {
            g_autofree char *shown = ck_identity_escape(k, klen);
            return g_strdup_printf("%s: not a uid (uid:N, N in decimal below 4294967295)", shown);
        }
    } else if (!valid_prefix(k, klen)) {
        g_autofree char *shown = ck_identity_escape(k, klen);
        return g_strdup_printf(
            "%s: expected a cgroup path (\"/\" or \"/name[/name...]\", no empty, \".\" or \"..\" "
            "component, no trailing '/') or uid:N",
            shown);
    }
    gpointer first = g_hash_table_lookup(m->line_of, key);
    if (first) {
        g_autofree char *shown = ck_identity_escape(k, klen);
        return g_strdup_printf("%s: given again (first on line %u)", shown,
                               GPOINTER_TO_UINT(first));
    }
    const char *job = ck_intern(jobtxt);
    if (uid_line)
        g_hash_table_insert(m->by_uid, GUINT_TO_POINTER((guint)uid + 1u), (gpointer)job);
    else
        g_hash_table_insert(m->by_prefix, g_strdup(key), (gpointer)job);
    g_hash_table_insert(m->line_of, g_steal_pointer(&key), GUINT_TO_POINTER(lineno));
    return NULL;
}

CkIdentityMap *ck_identity_map_parse(const char *text, size_t len, char **why)
{
    if (len > CK_IDENTITY_MAP_MAX_BYTES) {
        *why = g_strdup_printf("larger than %d MiB", CK_IDENTITY_MAP_MAX_BYTES / (1024 * 1024));
        return NULL;
    }
    g_autoptr(CkIdentityMap) m = g_new0(CkIdentityMap, 1);
    m->by_prefix = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    m->by_uid = g_hash_table_new(g_direct_hash, g_direct_equal);
    m->line_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    const char *p = text, *end = text + len;
    guint lineno = 0;
    while (p < end) {
        lineno++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (l > 0 && p[l - 1] == '\r')
            l--;
        g_autofree char *bad =
            memchr(p, '\0', l) ? g_strdup("NUL byte") : parse_line(m, p, l, lineno);
        if (bad) {
            *why = g_strdup_printf("line %u: %s", lineno, bad);
            return NULL;
        }
        p = nl ? nl + 1 : end;
    }
    g_hash_table_destroy(g_steal_pointer(&m->line_of));
    return g_steal_pointer(&m);
}

CkIdentityMap *ck_identity_map_load(const char *path, char **why)
{
    /* O_NONBLOCK: a FIFO put in its place must not hang the daemon */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        *why = g_strdup(g_strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        *why = g_strdup(g_strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = g_strdup("not a regular file");
        close(fd);
        return NULL;
    }
    GString *buf = g_string_sized_new((gsize)st.st_size + 1);
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *why = g_strdup(g_strerror(errno));
            close(fd);
            g_string_free(buf, TRUE);
            return NULL;
        }
        if (n == 0)
            break;
        g_string_append_len(buf, chunk, n);
        if (buf->len > CK_IDENTITY_MAP_MAX_BYTES)
            break; /* the parser says it is too large */
    }
    close(fd);
    CkIdentityMap *m = ck_identity_map_parse(buf->str, buf->len, why);
    g_string_free(buf, TRUE);
    return m;
}

const char *ck_identity_map_by_cgroup(const CkIdentityMap *m, const char *path, size_t len)
{
    if (m == NULL || g_hash_table_size(m->by_prefix) == 0 || len == 0 || path[0] != '/')
        return NULL;
    /* the path, then each shorter prefix of whole components, then "/" */
    g_autofree char *buf = g_strndup(path, len);
    while (len > 1 && buf[len - 1] == '/')
        buf[--len] = '\0';
    for (;;) {
        const char *job = g_hash_table_lookup(m->by_prefix, buf);
        if (job)
            return job;
        if (len <= 1)
            return NULL;
        char *slash = strrchr(buf, '/');
        len = slash == buf ? 1 : (size_t)(slash - buf);
        buf[len] = '\0';
    }
}

const char *ck_identity_map_by_uid(const CkIdentityMap *m, uid_t uid)
{
    if (m == NULL || uid == (uid_t)-1)
        return NULL;
    return g_hash_table_lookup(m->by_uid, GUINT_TO_POINTER((guint)uid + 1u));
}

/* ---- callers ---- */

/* What identifies one program run of a thread: its start time (a reused tid
 * has a new one) and where its environment lives (execve() keeps the pid and
 * the start time but maps a new environment; ASLR moves it and a different
 * environment has a different size). */
typedef struct {
    guint64 start_time; /* field 22 */
    guint64 env_start;  /* field 50, 0 on kernels without it */
    guint64 env_end;    /* field 51 */
} Stamp;

typedef struct {
    Stamp stamp;
    const char *job; /* interned, CK_CALLER_INVALID, or NULL: anonymous */
    char *value;     /* CK_CALLER_INVALID: the value, escaped */
} Entry;

static void entry_free(gpointer p)
{
    Entry *e = p;
    g_free(e->value);
    g_free(e);
}

struct CkIdentity {
    CkIdentityMode mode;
    const char *fixed_job; /* interned */
    char *env_prefix;      /* "VAR=", or NULL */
    size_t env_prefix_len;
    CkCgroupPattern *pattern; /* cgroup:PATTERN, or NULL */
    char *proc_root;
    GMutex lock;
    GHashTable *cache; /* tid -> Entry* (env) */
    GRWLock map_lock;
    CkIdentityMap *map; /* map_lock */
};

CkIdentity *ck_identity_new(const char *fixed_job, const char *spec, CkIdentityMap *map,
                            const char *proc_root, char **why)
{
    CkIdentityMode mode = CK_IDENTITY_NONE;
    if (fixed_job)
        mode = CK_IDENTITY_JOB;
    else if (spec && !ck_identity_spec_check(spec, &mode, why)) {
        ck_identity_map_free(map);
        return NULL;
    }
    CkIdentity *id = g_new0(CkIdentity, 1);
    id->mode = mode;
    id->fixed_job = fixed_job ? ck_intern(fixed_job) : NULL;
    if (mode == CK_IDENTITY_ENV) {
        id->env_prefix = g_strconcat(spec + 4, "=", NULL);
        id->env_prefix_len = strlen(id->env_prefix);
    }
    if (mode == CK_IDENTITY_CGROUP && g_str_has_prefix(spec, "cgroup:")) {
        g_autofree char *unused = NULL;
        id->pattern = ck_cgroup_pattern_new(spec + 7, &unused);
    }
    id->proc_root = g_strdup(proc_root ? proc_root : "/proc");
    g_mutex_init(&id->lock);
    id->cache = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, entry_free);
    g_rw_lock_init(&id->map_lock);
    id->map = map;
    return id;
}

void ck_identity_free(CkIdentity *id)
{
    if (id == NULL)
        return;
    g_hash_table_destroy(id->cache);
    g_mutex_clear(&id->lock);
    g_rw_lock_clear(&id->map_lock);
    ck_identity_map_free(id->map);
    ck_cgroup_pattern_free(id->pattern);
    g_free(id->env_prefix);
    g_free(id->proc_root);
    g_free(id);
}

CkIdentityMode ck_identity_mode(const CkIdentity *id)
{
    return id->mode;
}

void ck_identity_set_map(CkIdentity *id, CkIdentityMap *map)
{
    g_rw_lock_writer_lock(&id->map_lock);
    CkIdentityMap *old = id->map;
    id->map = map;
    g_rw_lock_writer_unlock(&id->map_lock);
    ck_identity_map_free(old);
}

void ck_caller_clear(CkCaller *c)
{
    g_clear_pointer(&c->value, g_free);
}

/* <proc_root>/<pid>/<file> opened for reading: a descriptor or -errno. */
static int open_proc(const char *proc_root, pid_t pid, const char *file)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%d/%s", proc_root, (int)pid, file);
    if (n < 0 || (size_t)n >= sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    return fd < 0 ? -errno : fd;
}

/* Reads at most cap bytes of <proc_root>/<pid>/<file>; returns the length or
 * -errno. */
static gssize read_proc_at(const char *proc_root, pid_t pid, const char *file, char *buf,
                           size_t cap)
{
    int fd = open_proc(proc_root, pid, file);
    if (fd < 0)
        return fd;
    size_t len = 0;
    while (len < cap) {
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    return (gssize)len;
}

static gssize read_proc(const CkIdentity *id, pid_t pid, const char *file, char *buf, size_t cap)
{
    return read_proc_at(id->proc_root, pid, file, buf, cap);
}

/* The whole of <proc_root>/<pid>/<file>, read until EOF into *out (g_free;
 * a NUL follows its *len bytes): 0, -EFBIG when it holds more than
 * CK_PROC_READ_MAX bytes, or -errno.  Nothing is answered from part of a
 * file: a value cut at a buffer's end would pass for another one (JOB=ab
 * read as JOB=a), a variable past the cut for absent. */
static int read_proc_whole(const char *proc_root, pid_t pid, const char *file, char **out,
                           size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open_proc(proc_root, pid, file);
    if (fd < 0)
        return fd;
    size_t cap = PROC_READ_FIRST, got = 0;
    g_autofree char *buf = g_malloc(cap + 1);
    int err = 0;
    for (;;) {
        if (got == cap) {
            if (cap == CK_PROC_READ_MAX) {
                /* full at the bound: only EOF right here makes it whole */
                char more;
                ssize_t r;
                while ((r = read(fd, &more, 1)) < 0 && errno == EINTR)
                    ;
                err = r < 0 ? -errno : r > 0 ? -EFBIG : 0;
                break;
            }
            cap = MIN(cap * 2, (size_t)CK_PROC_READ_MAX);
            buf = g_realloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err = -errno;
            break;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (err)
        return err;
    buf[got] = '\0';
    *out = g_steal_pointer(&buf);
    *len = got;
    return 0;
}

char *ck_proc_env_value(const char *proc_root, pid_t tid, const char *var)
{
    if (tid <= 0 || !var || !*var)
        return NULL;
    g_autofree char *prefix = g_strconcat(var, "=", NULL);
    size_t plen = strlen(prefix);
    g_autofree char *buf = NULL;
    size_t n;
    if (read_proc_whole(proc_root ? proc_root : "/proc", tid, "environ", &buf, &n) < 0)
        return NULL;
    const char *p = buf, *end = buf + n;
    while (p < end) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        size_t l = nul ? (size_t)(nul - p) : (size_t)(end - p);
        if (l >= plen && memcmp(p, prefix, plen) == 0)
            return g_strndup(p + plen, MIN(l - plen, (size_t)CK_ENV_VALUE_MAX));
        p = nul ? nul + 1 : end;
    }
    return NULL;
}

/* Fields after the comm, which may hold spaces and ')': parse from the last
 * ')'.  Field 3 is the first after it. */
static bool parse_stat(const char *buf, size_t len, Stamp *st)
{
    const char *rp = NULL;
    for (size_t i = len; i > 0; i--)
        if (buf[i - 1] == ')') {
            rp = buf + i;
            break;
        }
    if (rp == NULL)
        return false;
    *st = (Stamp){0};
    const char *p = rp, *end = buf + len;
    bool have_start = false;
    for (int field = 3; field <= 51 && p < end; field++) {
        while (p < end && *p == ' ')
            p++;
        const char *tok = p;
        while (p < end && *p != ' ' && *p != '\n')
            p++;
        if (p == tok)
            break;
        guint64 v;
        bool num = ck_parse_u64(tok, (size_t)(p - tok), &v);
        if (field == 22) {
            if (!num)
                return false;
            st->start_time = v;
            have_start = true;
        } else if (field == 50 && num) {
            st->env_start = v;
        } else if (field == 51 && num) {
            st->env_end = v;
        }
    }
    return have_start;
}

static int read_stamp(const CkIdentity *id, pid_t tid, Stamp *st)
{
    char buf[STAT_MAX];
    gssize n = read_proc(id, tid, "stat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return parse_stat(buf, (size_t)n, st) ? 0 : -EINVAL;
}

static int read_tgid_at(const char *proc_root, pid_t tid, pid_t *tgid)
{
    char buf[STAT_MAX];
    gssize n = read_proc_at(proc_root, tid, "status", buf, sizeof buf - 1);
    if (n < 0)
        return (int)n;
    buf[n] = '\0';
    const char *t = strstr(buf, "\nTgid:");
    if (t == NULL && strncmp(buf, "Tgid:", 5) == 0)
        t = buf - 1;
    if (t == NULL)
        return -EINVAL;
    t += 6;
    while (*t == ' ' || *t == '\t')
        t++;
    const char *e = t;
    while (*e >= '0' && *e <= '9')
        e++;
    uint32_t v;
    if (!ck_parse_u32(t, (size_t)(e - t), &v) || v == 0 || v > INT32_MAX)
        return -EINVAL;
    *tgid = (pid_t)v;
    return 0;
}

static int read_tgid(const CkIdentity *id, pid_t tid, pid_t *tgid)
{
    return read_tgid_at(id->proc_root, tid, tgid);
}

pid_t ck_proc_tgid(const char *proc_root, pid_t tid)
{
    pid_t tgid;
    if (tid <= 0 || read_tgid_at(proc_root ? proc_root : "/proc", tid, &tgid) < 0)
        return tid;
    return tgid;
}

/* The job VAR names in tgid's environment: 0 with *job set (NULL when VAR is
 * absent, CK_CALLER_INVALID with *value when it is not a job id, unknown
 * when the environment is too large to be read whole), or -errno. */
static int read_env_job(const CkIdentity *id, pid_t tgid, const char **job, char **value)
{
    *job = NULL;
    *value = NULL;
    g_autofree char *buf = NULL;
    size_t n;
    int err = read_proc_whole(id->proc_root, tgid, "environ", &buf, &n);
    if (err == -EFBIG) {
        /* an answer, not a failure: the size is env_end - env_start, part of
         * the stamp, so it holds (and is cached) until the next exec */
        *job = ck_intern(CK_IDENTITY_UNKNOWN);
        return 0;
    }
    if (err)
        return err;
    const char *p = buf, *end = buf + n;
    while (p < end) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        size_t l = nul ? (size_t)(nul - p) : (size_t)(end - p);
        if (l >= id->env_prefix_len && memcmp(p, id->env_prefix, id->env_prefix_len) == 0) {
            const char *v = p + id->env_prefix_len;
            size_t vlen = l - id->env_prefix_len;
            if (ck_is_job_id(v, vlen)) {
                char name[CK_JOB_ID_MAX + 1];
                memcpy(name, v, vlen);
                name[vlen] = '\0';
                *job = ck_intern(name);
            } else {
                /* present but not a job id (empty included): never anonymous */
                *job = CK_CALLER_INVALID;
                *value = ck_identity_escape(v, MIN(vlen, (size_t)CK_ENV_VALUE_MAX));
            }
            return 0; /* the first VAR= wins, as getenv() sees it */
        }
        p = nul ? nul + 1 : end;
    }
    return 0;
}

static bool stamp_equal(const Stamp *a, const Stamp *b)
{
    return a->start_time == b->start_time && a->env_start == b->env_start &&
           a->env_end == b->env_end;
}

/* The thread (or its process) is gone, or its /proc entry is not a
 * process's (EINVAL: unparsable): anonymous, as documented.  Other errors
 * are the daemon's own trouble (EMFILE, ENFILE, ENOMEM, EIO): fail closed. */
static bool vanished(int err)
{
    return err == -ENOENT || err == -ESRCH || err == -EINVAL;
}

static CkCaller anonymous(void)
{
    return (CkCaller){NULL, CK_IDENTITY_NONE, NULL};
}

static CkCaller unknown(CkIdentityMode mode)
{
    return (CkCaller){ck_intern(CK_IDENTITY_UNKNOWN), mode, NULL};
}

/* A read of /proc that failed: gone is anonymous, anything else unknown. */
static CkCaller failed(CkIdentityMode mode, int err)
{
    return vanished(err) ? anonymous() : unknown(mode);
}

static CkCaller env_caller(CkIdentity *id, pid_t tid)
{
    const CkIdentityMode mode = CK_IDENTITY_ENV;
    Stamp st;
    int rs = read_stamp(id, tid, &st);
    if (rs < 0) /* vanished (or not a process): anonymous */
        return failed(mode, rs);

    g_mutex_lock(&id->lock);
    Entry *e = g_hash_table_lookup(id->cache, GINT_TO_POINTER(tid));
    if (e != NULL && stamp_equal(&e->stamp, &st)) {
        CkCaller c = {e->job, e->job ? mode : CK_IDENTITY_NONE, g_strdup(e->value)};
        g_mutex_unlock(&id->lock);
        return c;
    }
    g_mutex_unlock(&id->lock);

    /* A miss: resolve outside the lock, then check that the thread is still
     * the one stamped (it could have exited, been replaced or exec'd). */
    for (int attempt = 0; attempt < 3; attempt++) {
        pid_t tgid;
        const char *job;
        g_autofree char *value = NULL;
        int rt = read_tgid(id, tid, &tgid);
        if (rt < 0)
            return failed(mode, rt);
        int r = 0;
        if (st.env_end > st.env_start && st.env_end - st.env_start > CK_PROC_READ_MAX) {
            /* too large to read whole, as the stamp already says: answered
             * unread, or each new thread of such a job would cost a read
             * of the whole bound */
            job = ck_intern(CK_IDENTITY_UNKNOWN);
        } else {
            r = read_env_job(id, tgid, &job, &value);
            /* A leader that exited before its threads is a zombie without
             * an environment; the thread's own entry reads the same mm. */
            if (job == NULL && tgid != tid) {
                g_clear_pointer(&value, g_free);
                r = read_env_job(id, tid, &job, &value);
            }
        }
        if (vanished(r))
            return anonymous();
        /* EACCES (not ours to read) leaves it anonymous, cached; any other
         * error (EMFILE: the daemon is out of descriptors) must not let the
         * caller act as anonymous: unknown, not cached */
        if (r < 0 && r != -EACCES)
            return unknown(mode);
        Stamp again;
        rs = read_stamp(id, tid, &again);
        if (rs < 0)
            return failed(mode, rs);
        if (!stamp_equal(&st, &again)) {
            st = again;
            continue;
        }
        Entry *ne = g_new(Entry, 1);
        ne->stamp = st;
        ne->job = job;
        ne->value = g_strdup(value);
        g_mutex_lock(&id->lock);
        /* Bounded: clearing when full is simpler than LRU and a miss costs
         * only one environ read per live thread. */
        if (g_hash_table_size(id->cache) >= CACHE_MAX)
            g_hash_table_remove_all(id->cache);
        g_hash_table_replace(id->cache, GINT_TO_POINTER(tid), ne);
        g_mutex_unlock(&id->lock);
        return (CkCaller){job, job ? mode : CK_IDENTITY_NONE, g_steal_pointer(&value)};
    }
    return anonymous();
}

/* The path of the one "0::" line of a /proc/<pid>/cgroup text: 1 with
 * *path, *len; 0 when there is none; -1 when there are several (a name
 * holding a newline, made to look like another line). */
static int unified_path(const char *buf, size_t n, const char **path, size_t *len)
{
    int found = 0;
    const char *p = buf, *end = buf + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (l >= 3 && memcmp(p, "0::", 3) == 0) {
            if (found++)
                return -1;
            *path = p + 3;
            *len = l - 3;
        }
        p = nl ? nl + 1 : end;
    }
    return found;
}

static CkCaller cgroup_caller(CkIdentity *id, pid_t tid)
{
    const CkIdentityMode mode = CK_IDENTITY_CGROUP;
    g_autofree char *buf = NULL;
    size_t n;
    int err = read_proc_whole(id->proc_root, tid, "cgroup", &buf, &n);
    if (err)
        return failed(mode, err);
    const char *path = NULL;
    size_t len = 0;
    int u = unified_path(buf, n, &path, &len);
    if (u < 0)
        return unknown(mode);
    if (u == 0 || len == 0 || path[0] != '/')
        return anonymous(); /* in no cgroup v2 hierarchy */
    g_rw_lock_reader_lock(&id->map_lock);
    const char *job = ck_identity_map_by_cgroup(id->map, path, len);
    g_rw_lock_reader_unlock(&id->map_lock);
    if (job)
        return (CkCaller){job, mode, NULL};
    const char *j;
    size_t jlen;
    if (!id->pattern || !ck_cgroup_pattern_match(id->pattern, path, len, &j, &jlen))
        return anonymous();
    if (!ck_is_job_id(j, jlen))
        return (CkCaller){CK_CALLER_INVALID, mode, ck_identity_escape(j, jlen)};
    char name[CK_JOB_ID_MAX + 1];
    memcpy(name, j, jlen);
    name[jlen] = '\0';
    return (CkCaller){ck_intern(name), mode, NULL};
}

static CkCaller uid_caller(CkIdentity *id, uid_t uid)
{
    g_rw_lock_reader_lock(&id->map_lock);
    const char *job = ck_identity_map_by_uid(id->map, uid);
    g_rw_lock_reader_unlock(&id->map_lock);
    return job ? (CkCaller){job, CK_IDENTITY_UID, NULL} : anonymous();
}

CkCaller ck_identity_caller(CkIdentity *id, pid_t tid, uid_t uid)
{
    /* No pid: a process the daemon cannot see (outside its pid namespace),
     * with nothing to read; taken for anonymous it would write wherever
     * anonymous callers may. */
    switch (id->mode) {
    case CK_IDENTITY_JOB:
        return (CkCaller){id->fixed_job, CK_IDENTITY_JOB, NULL};
    case CK_IDENTITY_ENV:
        return tid > 0 ? env_caller(id, tid) : unknown(CK_IDENTITY_ENV);
    case CK_IDENTITY_CGROUP:
        return tid > 0 ? cgroup_caller(id, tid) : unknown(CK_IDENTITY_CGROUP);
    case CK_IDENTITY_UID:
        return uid_caller(id, uid);
    case CK_IDENTITY_NONE:
        break;
    }
    return anonymous();
}
