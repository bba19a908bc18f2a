#include "identity.h"
#include "intern.h"
#include "classify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CACHE_MAX   4096
#define ENVIRON_MAX (1024 * 1024)
#define STAT_MAX    4096

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
    const char *job; /* interned, or NULL: anonymous */
} Entry;

struct CkIdentity {
    const char *fixed_job; /* interned */
    char *env_prefix;      /* "VAR=", or NULL */
    size_t env_prefix_len;
    char *proc_root;
    GMutex lock;
    GHashTable *cache; /* tid -> Entry* */
};

CkIdentity *ck_identity_new(const char *fixed_job, const char *env_var, const char *proc_root)
{
    CkIdentity *id = g_new0(CkIdentity, 1);
    id->fixed_job = fixed_job ? ck_intern(fixed_job) : NULL;
    if (env_var && !fixed_job) {
        id->env_prefix = g_strconcat(env_var, "=", NULL);
        id->env_prefix_len = strlen(id->env_prefix);
    }
    id->proc_root = g_strdup(proc_root ? proc_root : "/proc");
    g_mutex_init(&id->lock);
    id->cache = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    return id;
}

void ck_identity_free(CkIdentity *id)
{
    if (id == NULL)
        return;
    g_hash_table_destroy(id->cache);
    g_mutex_clear(&id->lock);
    g_free(id->env_prefix);
    g_free(id->proc_root);
    g_free(id);
}

/* Reads at most cap bytes of <proc_root>/<pid>/<file>; returns the length or
 * -errno. */
static gssize read_proc_at(const char *proc_root, pid_t pid, const char *file, char *buf,
                           size_t cap)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%d/%s", proc_root, (int)pid, file);
    if (n < 0 || (size_t)n >= sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
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

char *ck_proc_env_value(const char *proc_root, pid_t tid, const char *var)
{
    if (tid <= 0 || !var || !*var)
        return NULL;
    g_autofree char *prefix = g_strconcat(var, "=", NULL);
    size_t plen = strlen(prefix);
    g_autofree char *buf = g_malloc(ENVIRON_MAX);
    gssize n = read_proc_at(proc_root ? proc_root : "/proc", tid, "environ", buf, ENVIRON_MAX);
    if (n < 0)
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

static int read_tgid(const CkIdentity *id, pid_t tid, pid_t *tgid)
{
    char buf[STAT_MAX];
    gssize n = read_proc(id, tid, "status", buf, sizeof buf - 1);
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

/* The job named by VAR in tgid's environment: 0 with *job set (NULL when VAR
 * is absent or not a job id), or -errno. */
static int read_env_job(const CkIdentity *id, pid_t tgid, const char **job)
{
    *job = NULL;
    g_autofree char *buf = g_malloc(ENVIRON_MAX);
    gssize n = read_proc(id, tgid, "environ", buf, ENVIRON_MAX);
    if (n < 0)
        return (int)n;
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

const char *ck_identity_of(CkIdentity *id, pid_t tid)
{
    if (id->fixed_job != NULL)
        return id->fixed_job;
    if (id->env_prefix == NULL || tid <= 0)
        return NULL;

    Stamp st;
    int rs = read_stamp(id, tid, &st);
    if (rs < 0) /* vanished (or not a process): anonymous */
        return vanished(rs) ? NULL : ck_intern(CK_IDENTITY_UNKNOWN);

    g_mutex_lock(&id->lock);
    Entry *e = g_hash_table_lookup(id->cache, GINT_TO_POINTER(tid));
    if (e != NULL && stamp_equal(&e->stamp, &st)) {
        const char *job = e->job;
        g_mutex_unlock(&id->lock);
        return job;
    }
    g_mutex_unlock(&id->lock);

    /* A miss: resolve outside the lock, then check that the thread is still
     * the one stamped (it could have exited, been replaced or exec'd). */
    for (int attempt = 0; attempt < 3; attempt++) {
        pid_t tgid;
        const char *job;
        int rt = read_tgid(id, tid, &tgid);
        if (rt < 0)
            return vanished(rt) ? NULL : ck_intern(CK_IDENTITY_UNKNOWN);
        int r = read_env_job(id, tgid, &job);
        /* A leader that exited before its threads is a zombie without an
         * environment; the thread's own entry reads the same mm. */
        if (job == NULL && tgid != tid)
            r = read_env_job(id, tid, &job);
        if (vanished(r))
            return NULL;
        /* EACCES (not ours to read) leaves it anonymous, cached; any other
         * error (EMFILE: the daemon is out of descriptors) must not let the
         * caller act as anonymous: unknown, not cached */
        if (r < 0 && r != -EACCES)
            return ck_intern(CK_IDENTITY_UNKNOWN);
        Stamp again;
        rs = read_stamp(id, tid, &again);
        if (rs < 0)
            return vanished(rs) ? NULL : ck_intern(CK_IDENTITY_UNKNOWN);
        if (!stamp_equal(&st, &again)) {
            st = again;
            continue;
        }
        Entry *ne = g_new(Entry, 1);
        ne->stamp = st;
        ne->job = job;
        g_mutex_lock(&id->lock);
        /* Bounded: clearing when full is simpler than LRU and a miss costs
         * only one environ read per live thread. */
        if (g_hash_table_size(id->cache) >= CACHE_MAX)
            g_hash_table_remove_all(id->cache);
        g_hash_table_replace(id->cache, GINT_TO_POINTER(tid), ne);
        g_mutex_unlock(&id->lock);
        return job;
    }
    return NULL;
}
