#include "collision.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "fence.h"
#include "json.h"

G_DEFINE_QUARK(ck - collision - error - quark, ck_collision_error)

static void add_string(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    if (value == NULL)
        json_builder_add_null_value(b);
    else
        ck_json_add_string(b, value);
}

static char *format_time(gint64 time_us)
{
    gint64 secs = time_us / G_USEC_PER_SEC, rem = time_us % G_USEC_PER_SEC;
    if (rem < 0) { /* floor, for times before 1970 */
        secs--;
        rem += G_USEC_PER_SEC;
    }
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(secs);
    if (dt == NULL)
        return g_strdup("1970-01-01T00:00:00.000Z");
    g_autofree char *s = g_date_time_format(dt, "%Y-%m-%dT%H:%M:%S");
    return g_strdup_printf("%s.%03dZ", s, (int)(rem / 1000));
}

char *ck_collision_to_json(const CkCollision *c)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *time = format_time(c->time_us);
    json_builder_begin_object(b);
    add_string(b, "time", time);
    add_string(b, "kind", c->kind);
    add_string(b, "verdict", c->denied ? "denied" : "allowed");
    add_string(b, "op", c->op);
    add_string(b, "path", c->path);
    add_string(b, "path2", c->path2);
    add_string(b, "caller_job", c->caller_job);
    if (c->identity)
        add_string(b, "identity", c->identity);
    if (c->identity_value)
        add_string(b, "identity_value", c->identity_value);
    add_string(b, "owner_job", c->owner_job);
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, c->pid);
    json_builder_set_member_name(b, "uid");
    json_builder_add_int_value(b, c->uid);
    add_string(b, "comm", c->comm);
    if (c->has_tag)
        add_string(b, "tag", c->tag);
    json_builder_end_object(b);

    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return ck_json_text(root, false);
}

/* The store: a header, an index of `keep` entries (record n in entry
 * n % keep) and a ring of line bytes.  Positions in the ring are counted
 * from the first byte ever written (`reserved` grows forever); the ring
 * holds positions [reserved - cap, reserved), and a line never wraps (the
 * rest of the ring is skipped instead).
 *
 * An append, under the lock: move `reserved` past the new line (so no
 * reader trusts the bytes about to be overwritten), clear the seq of the
 * index entry it takes (the oldest line's), copy the bytes, fill the entry,
 * set its seq, and last publish the line by moving `total`.  A process
 * killed at any point leaves every published line either whole or
 * recognisably gone (its seq or its bytes out of the ring): at most the
 * oldest line is lost, and the next append starts after whatever was
 * half-written.  The lock is robust: the next owner after a dead one just
 * goes on. */
#define STORE_MAGIC   0x676f6c6c6f636b63ull /* "ckcollog" */
#define STORE_VERSION 1
#define LINE_BYTES    1600         /* ring bytes a kept line may take on average */
#define RING_MIN      (256 * 1024) /* small keeps still hold long lines */

typedef struct {
    _Atomic uint64_t seq; /* record number + 1; 0: never written, or being rewritten */
    uint64_t off;         /* ring position of the line's first byte */
    uint32_t len;
    uint32_t pad;
} StoreIdx;

typedef struct {
    _Atomic uint64_t magic; /* written last when the store is set up */
    uint32_t version, keep;
    uint64_t cap; /* ring bytes */
    pthread_mutex_t lock;
    _Atomic uint64_t total;    /* lines appended (published) */
    _Atomic uint64_t reserved; /* ring position after the last line begun */
    _Atomic int64_t last_us;   /* time_us of the newest record, 0 before the first */
} StoreHdr;

#define STORE_HDR_BYTES ((sizeof(StoreHdr) + 63) / 64 * 64)

struct CkCollisionLog {
    StoreHdr *st;
    StoreIdx *idx;
    char *ring;
    bool owned; /* st was allocated by ck_collision_log_new */
    guint keep;
    char *file;     /* NULL without a file */
    CkFence *fence; /* where file may not lead, NULL: anywhere */
    int fd;         /* -1 without a file; swapped under st->lock (reopen) */
};

static uint64_t ring_bytes(guint keep)
{
    return keep ? MAX((uint64_t)keep * LINE_BYTES, (uint64_t)RING_MIN) : 0;
}

size_t ck_collision_store_size(guint keep)
{
    size_t n = STORE_HDR_BYTES + (size_t)keep * sizeof(StoreIdx) + (size_t)ring_bytes(keep);
    return (n + 4095) / 4096 * 4096;
}

static void store_lock(StoreHdr *st)
{
    /* a dead owner left nothing half-done that the append protocol does not
     * tolerate: the lock is simply taken over */
    if (pthread_mutex_lock(&st->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&st->lock);
}

static void store_unlock(StoreHdr *st)
{
    pthread_mutex_unlock(&st->lock);
}

/* A store this build can take over as it is, else set up empty. */
static void store_setup(StoreHdr *st, guint keep)
{
    if (atomic_load_explicit(&st->magic, memory_order_acquire) == STORE_MAGIC &&
        st->version == STORE_VERSION && st->keep == keep && st->cap == ring_bytes(keep))
        return;
    atomic_store(&st->magic, 0);
    memset((char *)st + sizeof st->magic, 0, sizeof *st - sizeof st->magic);
    st->version = STORE_VERSION;
    st->keep = keep;
    st->cap = ring_bytes(keep);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&st->lock, &a);
    pthread_mutexattr_destroy(&a);
    StoreIdx *idx = (StoreIdx *)((char *)st + STORE_HDR_BYTES);
    for (guint i = 0; i < keep; i++)
        atomic_store(&idx[i].seq, 0);
    atomic_store_explicit(&st->magic, STORE_MAGIC, memory_order_release);
}

static int open_file(const char *file, const CkFence *fence, GError **error)
{
    g_autoptr(GError) why = NULL;
    int fd = ck_fence_open(fence, file, 0644, &why);
    if (fd < 0)
        g_set_error(error, G_FILE_ERROR, why->code, "cannot open collision log %s: %s", file,
                    why->message);
    return fd;
}

CkCollisionLog *ck_collision_log_new_in(void *store, size_t size, guint keep, const char *file,
                                        const CkFence *fence, GError **error)
{
    g_return_val_if_fail(store != NULL && size >= ck_collision_store_size(keep), NULL);
    int fd = -1;
    if (file != NULL && (fd = open_file(file, fence, error)) < 0)
        return NULL;
    CkCollisionLog *log = g_new0(CkCollisionLog, 1);
    log->st = store;
    store_setup(log->st, keep);
    log->idx = (StoreIdx *)((char *)store + STORE_HDR_BYTES);
    log->ring = (char *)(log->idx + keep);
    log->keep = keep;
    log->file = g_strdup(file);
    log->fence = ck_fence_copy(fence);
    log->fd = fd;
    return log;
}

CkCollisionLog *ck_collision_log_new(guint keep, const char *file, const CkFence *fence,
                                     GError **error)
{
    size_t size = ck_collision_store_size(keep);
    void *store = g_malloc0(size);
    CkCollisionLog *log = ck_collision_log_new_in(store, size, keep, file, fence, error);
    if (!log) {
        g_free(store);
        return NULL;
    }
    log->owned = true;
    return log;
}

void ck_collision_log_free(CkCollisionLog *log)
{
    if (log == NULL)
        return;
    if (log->fd >= 0)
        close(log->fd);
    if (log->owned) {
        pthread_mutex_destroy(&log->st->lock);
        g_free(log->st);
    }
    g_free(log->file);
    ck_fence_free(log->fence);
    g_free(log);
}

/* One write() per line: with O_APPEND the kernel places each line whole, so
 * several mounts sharing a log file never interleave their lines. */
static void write_line(int fd, const char *line, size_t len)
{
    ssize_t n;
    do
        n = write(fd, line, len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        g_warning("collision log write failed: %s", g_strerror(errno));
    else if ((size_t)n != len)
        g_warning("collision log: short write (%zd of %zu bytes)", n, len);
}

void ck_collision_log_append(CkCollisionLog *log, const CkCollision *c)
{
    g_autofree char *json = ck_collision_to_json(c);
    g_autofree char *line = g_strconcat(json, "\n", NULL);
    size_t len = strlen(line);
    StoreHdr *st = log->st;

    store_lock(st);
    uint64_t n = atomic_load(&st->total);
    if (log->fd >= 0)
        write_line(log->fd, line, len);
    if (log->keep > 0 && len <= st->cap) {
        uint64_t off = atomic_load(&st->reserved);
        if (off % st->cap + len > st->cap)
            off += st->cap - off % st->cap; /* no line wraps: start the ring again */
        atomic_store(&st->reserved, off + len);
        StoreIdx *e = &log->idx[n % log->keep];
        atomic_store(&e->seq, 0);
        memcpy(log->ring + off % st->cap, line, len);
        e->off = off;
        e->len = (uint32_t)len;
        atomic_store_explicit(&e->seq, n + 1, memory_order_release);
    }
    /* strictly increasing, so every append moves the file's mtime */
    int64_t last = atomic_load(&st->last_us);
    atomic_store(&st->last_us, MAX(c->time_us, last + 1));
    atomic_store_explicit(&st->total, n + 1, memory_order_release);
    store_unlock(st);
}

bool ck_collision_log_reopen(CkCollisionLog *log, GError **error)
{
    if (!log->file)
        return true;
    int fd = open_file(log->file, log->fence, error);
    if (fd < 0)
        return false;
    store_lock(log->st);
    int old = log->fd;
    log->fd = fd;
    store_unlock(log->st);
    if (old >= 0)
        close(old);
    return true;
}

GBytes *ck_collision_log_snapshot(CkCollisionLog *log)
{
    GString *s = g_string_new(NULL);
    StoreHdr *st = log->st;
    store_lock(st);
    uint64_t total = atomic_load(&st->total), end = atomic_load(&st->reserved);
    uint64_t first = total > log->keep ? total - log->keep : 0;
    for (uint64_t n = first; log->keep && n < total; n++) {
        const StoreIdx *e = &log->idx[n % log->keep];
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != n + 1)
            continue; /* lost to a writer that died over it */
        if (e->len == 0 || e->len > st->cap || e->off + e->len > end || end - e->off > st->cap)
            continue; /* its bytes were overwritten since */
        g_string_append_len(s, log->ring + e->off % st->cap, e->len);
    }
    store_unlock(st);
    return g_string_free_to_bytes(s);
}

guint64 ck_collision_log_total(CkCollisionLog *log)
{
    return atomic_load(&log->st->total);
}

gint64 ck_collision_log_last_time(CkCollisionLog *log)
{
    return atomic_load(&log->st->last_us);
}

/* The lines of buf as records; a line that is not a JSON object stops
 * the parse (err set, NULL) unless skipped is given, which counts it. */
static GPtrArray *parse_lines(const char *buf, gsize len, guint *skipped, guint *first_bad,
                              GError **err)
{
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func((GDestroyNotify)json_object_unref);
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *p = buf, *end = buf ? buf + len : buf;
    guint lineno = 0;
    while (p < end) {
        lineno++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line = p;
        gsize llen = nl ? (gsize)(nl - p) : (gsize)(end - p);
        p = nl ? nl + 1 : end;
        if (llen > 0 && line[llen - 1] == '\r')
            llen--;
        if (llen == 0)
            continue;
        g_autoptr(GError) perr = NULL;
        g_autofree char *why = NULL;
        JsonNode *root = NULL;
        if (memchr(line, '\0', llen) != NULL)
            why = g_strdup("NUL byte");
        else if (!json_parser_load_from_data(parser, line, (gssize)llen, &perr))
            why = g_strdup(perr->message);
        else if ((root = json_parser_get_root(parser)) == NULL || !JSON_NODE_HOLDS_OBJECT(root))
            why = g_strdup("not a JSON object");
        if (!why) {
            g_ptr_array_add(out, json_object_ref(json_node_get_object(root)));
            continue;
        }
        if (!skipped) {
            g_set_error(err, CK_COLLISION_ERROR, CK_COLLISION_ERROR_PARSE, "line %u: %s", lineno,
                        why);
            return NULL;
        }
        if (first_bad && *skipped == 0)
            *first_bad = lineno;
        (*skipped)++;
    }
    return g_steal_pointer(&out);
}

GPtrArray *ck_collision_parse_lines(const char *buf, gsize len, GError **err)
{
    return parse_lines(buf, len, NULL, NULL, err);
}

GPtrArray *ck_collision_parse_lines_skipping(const char *buf, gsize len, guint *skipped,
                                             guint *first_bad)
{
    *skipped = 0;
    if (first_bad)
        *first_bad = 0;
    return parse_lines(buf, len, skipped, first_bad, NULL);
}

/* A string member, or NULL (absent, null, another type). */
static const char *str_member(JsonObject *o, const char *name)
{
    JsonNode *n = json_object_get_member(o, name);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

char *ck_collision_caller_text(JsonObject *rec)
{
    const char *job = str_member(rec, "caller_job");
    if (job)
        return g_strdup(job);
    const char *value = str_member(rec, "identity_value");
    if (value)
        return g_strdup_printf("(invalid: %s)", value);
    if (g_strcmp0(str_member(rec, "kind"), "invalid-identity") == 0)
        return g_strdup("(invalid)");
    return g_strdup("(anonymous)");
}
