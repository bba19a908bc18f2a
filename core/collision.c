#include "collision.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK(ck - collision - error - quark, ck_collision_error)

void ck_json_add_string(JsonBuilder *b, const char *v)
{
    if (g_utf8_validate(v, -1, NULL)) {
        json_builder_add_string_value(b, v);
        return;
    }
    g_autofree char *valid = g_utf8_make_valid(v, -1);
    json_builder_add_string_value(b, valid);
}

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
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

struct CkCollisionLog {
    GMutex lock;
    guint keep;
    GQueue lines; /* char*, each ending in '\n', oldest first */
    guint64 total;
    gint64 last_us; /* time_us of the newest record, 0 before the first */
    int fd;         /* -1 without a file */
};

CkCollisionLog *ck_collision_log_new(guint keep, const char *file, GError **error)
{
    int fd = -1;
    if (file != NULL) {
        fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0) {
            int e = errno;
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e),
                        "cannot open collision log %s: %s", file, g_strerror(e));
            return NULL;
        }
    }
    CkCollisionLog *log = g_new0(CkCollisionLog, 1);
    g_mutex_init(&log->lock);
    g_queue_init(&log->lines);
    log->keep = keep;
    log->fd = fd;
    return log;
}

void ck_collision_log_free(CkCollisionLog *log)
{
    if (log == NULL)
        return;
    g_queue_clear_full(&log->lines, g_free);
    if (log->fd >= 0)
        close(log->fd);
    g_mutex_clear(&log->lock);
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
    char *line = g_strconcat(json, "\n", NULL);
    size_t len = strlen(line);

    g_mutex_lock(&log->lock);
    log->total++;
    /* strictly increasing, so every append moves the file's mtime */
    log->last_us = MAX(c->time_us, log->last_us + 1);
    if (log->fd >= 0)
        write_line(log->fd, line, len);
    if (log->keep > 0) {
        g_queue_push_tail(&log->lines, line);
        line = NULL;
        while (log->lines.length > log->keep)
            g_free(g_queue_pop_head(&log->lines));
    }
    g_mutex_unlock(&log->lock);
    g_free(line);
}

GBytes *ck_collision_log_snapshot(CkCollisionLog *log)
{
    GString *s = g_string_new(NULL);
    g_mutex_lock(&log->lock);
    for (GList *l = log->lines.head; l; l = l->next)
        g_string_append(s, l->data);
    g_mutex_unlock(&log->lock);
    return g_string_free_to_bytes(s);
}

guint64 ck_collision_log_total(CkCollisionLog *log)
{
    g_mutex_lock(&log->lock);
    guint64 t = log->total;
    g_mutex_unlock(&log->lock);
    return t;
}

gint64 ck_collision_log_last_time(CkCollisionLog *log)
{
    g_mutex_lock(&log->lock);
    gint64 t = log->last_us;
    g_mutex_unlock(&log->lock);
    return t;
}

GPtrArray *ck_collision_parse_lines(const char *buf, gsize len, GError **err)
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
        if (memchr(line, '\0', llen) != NULL) {
            g_set_error(err, CK_COLLISION_ERROR, CK_COLLISION_ERROR_PARSE, "line %u: NUL byte",
                        lineno);
            return NULL;
        }
        if (!json_parser_load_from_data(parser, line, (gssize)llen, &perr)) {
            g_set_error(err, CK_COLLISION_ERROR, CK_COLLISION_ERROR_PARSE, "line %u: %s", lineno,
                        perr->message);
            return NULL;
        }
        JsonNode *root = json_parser_get_root(parser);
        if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
            g_set_error(err, CK_COLLISION_ERROR, CK_COLLISION_ERROR_PARSE,
                        "line %u: not a JSON object", lineno);
            return NULL;
        }
        g_ptr_array_add(out, json_object_ref(json_node_get_object(root)));
    }
    return g_steal_pointer(&out);
}
