#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_log.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#define SD_JOURNAL_SUPPRESS_LOCATION /* CODE_FILE and friends are the record's, not ours */
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "ckptfs-config.h"
#include "fence.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"
#define SYSLOG_SOCKET  "/dev/log"
#define IDENT          "ckptfs"
#define IDENT_PREFIX   IDENT ": "

typedef enum { TO_STDERR, TO_JOURNAL, TO_SYSLOG, TO_FILE } Target;

/* Set by log_open before any thread; afterwards only max_priority (an
 * atomic) changes, and fd's file (dup3 onto the same number). */
static struct {
    Target target;
    int fd;         /* TO_FILE */
    char *path;     /* TO_FILE: absolute */
    char *mount;    /* CKPTFS_MOUNT */
    CkFence *fence; /* TO_FILE: where path may not lead, at open and reopen */
    atomic_int max_priority;
} L = {.target = TO_STDERR, .fd = -1, .max_priority = LOG_INFO};

static const struct {
    const char *name;
    int priority; /* the least urgent priority shown */
} levels[] = {
    {"error", LOG_ERR},
    {"warning", LOG_WARNING},
    {"info", LOG_INFO},
    {"debug", LOG_DEBUG},
};

/* g_error (fatal) is critical for syslog and the journal, g_critical an
 * error, g_message a notice as glib's own journal writer has it. */
static int priority_of(GLogLevelFlags level)
{
    if (level & G_LOG_LEVEL_ERROR)
        return LOG_CRIT;
    if (level & G_LOG_LEVEL_CRITICAL)
        return LOG_ERR;
    if (level & G_LOG_LEVEL_WARNING)
        return LOG_WARNING;
    if (level & G_LOG_LEVEL_MESSAGE)
        return LOG_NOTICE;
    if (level & G_LOG_LEVEL_INFO)
        return LOG_INFO;
    return LOG_DEBUG;
}

/* The level word of a line: the names log_level= takes. */
static const char *word_of(int priority)
{
    return priority <= LOG_ERR       ? "error"
           : priority == LOG_WARNING ? "warning"
           : priority <= LOG_INFO    ? "info"
                                     : "debug";
}

static int parse_level(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(levels); i++)
        if (strcmp(name, levels[i].name) == 0)
            return levels[i].priority;
    return -1;
}

bool log_level_known(const char *name)
{
    return parse_level(name) >= 0;
}

int log_set_level(const char *name)
{
    int p = name ? parse_level(name) : -1;
    if (p < 0)
        return -EINVAL;
    atomic_store(&L.max_priority, p);
    g_log_set_debug_enabled(p == LOG_DEBUG); /* glib may skip a g_debug before the writer */
    return 0;
}

const char *log_level_name(void)
{
    int p = atomic_load(&L.max_priority);
    for (size_t i = 0; i < G_N_ELEMENTS(levels); i++)
        if (levels[i].priority == p)
            return levels[i].name;
    return "info";
}

const char *log_target_name(void)
{
    switch (L.target) {
    case TO_JOURNAL:
        return "journal";
    case TO_SYSLOG:
        return "syslog";
    case TO_FILE:
        return L.path;
    default:
        return "stderr";
    }
}

static const char *strip_ident(const char *text)
{
    return g_str_has_prefix(text, IDENT_PREFIX) ? text + strlen(IDENT_PREFIX) : text;
}

/* A record's text, as a NUL-terminated string (a binary MESSAGE is cut at
 * its first NUL). */
static const char *message_of(const GLogField *fields, gsize n, char **owned)
{
    *owned = NULL;
    for (gsize i = 0; i < n; i++) {
        if (strcmp(fields[i].key, "MESSAGE") != 0)
            continue;
        if (fields[i].length < 0)
            return fields[i].value;
        *owned = g_strndup(fields[i].value, (gsize)fields[i].length);
        return *owned;
    }
    return "";
}

char *log_format_line(GLogLevelFlags level, const char *text, int pid, gint64 time_us)
{
    GString *s = g_string_sized_new(128);
    if (time_us) {
        g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(time_us / G_USEC_PER_SEC);
        g_autofree char *when = t ? g_date_time_format(t, "%Y-%m-%dT%H:%M:%S") : NULL;
        g_string_append_printf(s, "%s.%03dZ ", when ? when : "?",
                               (int)(time_us % G_USEC_PER_SEC / 1000));
    }
    g_string_append_printf(s, IDENT "[%d]: %s: ", pid, word_of(priority_of(level)));
    /* a path in a collision may hold a newline: no record forges another line */
    for (const unsigned char *c = (const unsigned char *)strip_ident(text); *c; c++) {
        if (*c == '\n')
            g_string_append(s, "\\n");
        else if (*c < 0x20 || *c == 0x7f)
            g_string_append_printf(s, "\\x%02x", *c);
        else
            g_string_append_c(s, (char)*c);
    }
    g_string_append_c(s, '\n');
    return g_string_free(s, FALSE);
}

/* Journal field names: upper case letters, digits and '_', not starting
 * with '_' (those are journald's own), at most 64 bytes. */
static bool journal_key(const char *k)
{
    size_t len = strlen(k);
    if (len == 0 || len > 64 || k[0] == '_' || g_ascii_isdigit(k[0]))
        return false;
    for (const char *c = k; *c; c++)
        if (!g_ascii_isupper(*c) && !g_ascii_isdigit(*c) && *c != '_')
            return false;
    return true;
}

static void add_field(GPtrArray *a, const char *key, const void *value, gssize len)
{
    size_t vl = len < 0 ? strlen(value) : (size_t)len;
    size_t kl = strlen(key);
    char *buf = g_malloc(kl + 1 + vl);
    memcpy(buf, key, kl);
    buf[kl] = '=';
    memcpy(buf + kl + 1, value, vl);
    g_ptr_array_add(a, g_bytes_new_take(buf, kl + 1 + vl));
}

GPtrArray *log_journal_entry(GLogLevelFlags level, const GLogField *fields, gsize n,
                             const char *mount)
{
    GPtrArray *a = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    g_autofree char *owned = NULL;
    add_field(a, "MESSAGE", strip_ident(message_of(fields, n, &owned)), -1);
    char prio[2] = {(char)('0' + priority_of(level)), '\0'};
    add_field(a, "PRIORITY", prio, -1);
    add_field(a, "SYSLOG_IDENTIFIER", IDENT, -1);
    if (mount)
        add_field(a, "CKPTFS_MOUNT", mount, -1);
    static const char *const ours[] = {"MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CKPTFS_MOUNT"};
    for (gsize i = 0; i < n; i++) {
        const char *k = fields[i].key;
        bool taken = !journal_key(k) || !fields[i].value;
        for (size_t j = 0; j < G_N_ELEMENTS(ours) && !taken; j++)
            taken = strcmp(k, ours[j]) == 0;
        if (!taken)
            add_field(a, k, fields[i].value, fields[i].length);
    }
    return a;
}

static void write_all(int fd, const char *s)
{
    size_t len = strlen(s);
    while (len) {
        ssize_t w = write(fd, s, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        len -= (size_t)w;
    }
}

static bool to_journal(GLogLevelFlags level, const GLogField *fields, gsize n)
{
    g_autoptr(GPtrArray) e = log_journal_entry(level, fields, n, L.mount);
    struct iovec *iov = g_newa(struct iovec, e->len);
    for (guint i = 0; i < e->len; i++) {
        gsize len;
        iov[i].iov_base = (void *)g_bytes_get_data(e->pdata[i], &len);
        iov[i].iov_len = len;
    }
    return sd_journal_sendv(iov, (int)e->len) >= 0;
}

static GLogWriterOutput writer(GLogLevelFlags level, const GLogField *fields, gsize n,
                               gpointer data)
{
    (void)data;
    int priority = priority_of(level);
    if (priority > atomic_load_explicit(&L.max_priority, memory_order_relaxed))
        return G_LOG_WRITER_HANDLED;
    int saved = errno; /* a caller may log between a failing call and its errno */
    g_autofree char *owned = NULL;
    const char *text = message_of(fields, n, &owned);
    if (L.target == TO_JOURNAL && to_journal(level, fields, n)) {
        errno = saved;
        return G_LOG_WRITER_HANDLED;
    }
    if (L.target == TO_SYSLOG) {
        syslog(priority, "%s", strip_ident(text));
    } else {
        bool file = L.target == TO_FILE;
        g_autofree char *line =
            log_format_line(level, text, (int)getpid(), file ? g_get_real_time() : 0);
        write_all(file ? L.fd : STDERR_FILENO, line); /* one write: lines never interleave */
    }
    errno = saved;
    return G_LOG_WRITER_HANDLED;
}

/* libfuse's messages ("fuse: ...", and its -d request trace) join ours. */
/* libfuse writes some lines in pieces (the unknown-option message: one
 * call for its start, one for each option): a piece without a newline
 * waits, in its thread, for the rest of its line, so that a line stays
 * one line of the log. */
static _Thread_local struct {
    char text[1024];
    size_t len;
} fuse_line;

static void fuse_writer(enum fuse_log_level level, const char *fmt, va_list ap)
{
    GLogLevelFlags gl = level <= FUSE_LOG_ERR       ? G_LOG_LEVEL_CRITICAL
                        : level == FUSE_LOG_WARNING ? G_LOG_LEVEL_WARNING
                        : level == FUSE_LOG_NOTICE  ? G_LOG_LEVEL_MESSAGE
                        : level == FUSE_LOG_INFO    ? G_LOG_LEVEL_INFO
                                                    : G_LOG_LEVEL_DEBUG;
    if (priority_of(gl) > atomic_load_explicit(&L.max_priority, memory_order_relaxed))
        return;
    g_autofree char *piece = g_strdup_vprintf(fmt, ap);
    size_t n = strlen(piece);
    if ((n == 0 || piece[n - 1] != '\n') && fuse_line.len + n < sizeof fuse_line.text) {
        memcpy(fuse_line.text + fuse_line.len, piece, n);
        fuse_line.len += n;
        return;
    }
    g_autofree char *text = g_strdup_printf("%.*s%s", (int)fuse_line.len, fuse_line.text, piece);
    fuse_line.len = 0;
    g_strchomp(text);
    if (!*text)
        return;
    GLogField f = {"MESSAGE", text, -1};
    g_log_structured_array(gl, &f, 1);
}

void log_init(void)
{
    g_log_set_writer_func(writer, NULL, NULL);
    fuse_set_log_func(fuse_writer);
}

static bool is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static int refuse(const char *what, const char *why)
{
    fprintf(stderr, IDENT_PREFIX "%s: %s\n", what, why);
    return 2;
}

char *log_file_path(const char *arg, const char *backing, const char *mnt, GError **err)
{
    g_autoptr(CkFence) fence = ck_fence_new(backing, mnt);
    return ck_fence_path(fence, arg, err);
}

/* The mount point without looking at it: a daemon that attaches to a live
 * connection would wait on its own mount to stat it.  Its parent is
 * resolved (the mount point itself is rarely a symlink). */
static char *mount_path(const char *mountpoint)
{
    g_autofree char *abs = g_canonicalize_filename(mountpoint, NULL);
    g_autofree char *dir = g_path_get_dirname(abs);
    g_autofree char *base = g_path_get_basename(abs);
    char *real = realpath(dir, NULL);
    char *out = real && strcmp(abs, "/") != 0 ? g_build_filename(real, base, NULL) : g_strdup(abs);
    free(real);
    return out;
}

int log_open(const char *target, const char *level, bool debug, const char *backing,
             const char *mountpoint)
{
    if (level && parse_level(level) < 0) {
        g_autofree char *what = g_strdup_printf("log_level=%s", level);
        return refuse(what, "expected error, warning, info or debug");
    }
    log_set_level(debug ? "debug" : level ? level : "info");
    g_free(L.mount);
    L.mount = mountpoint ? mount_path(mountpoint) : NULL;
    if (!target)
        target = debug                       ? "stderr"
                 : is_socket(JOURNAL_SOCKET) ? "journal"
                 : is_socket(SYSLOG_SOCKET)  ? "syslog"
                                             : "stderr";
    if (strcmp(target, "stderr") == 0) {
        L.target = TO_STDERR;
    } else if (strcmp(target, "journal") == 0) {
        if (!is_socket(JOURNAL_SOCKET))
            return refuse("log=journal", "no journal here (" JOURNAL_SOCKET ")");
        L.target = TO_JOURNAL;
    } else if (strcmp(target, "syslog") == 0) {
        if (!is_socket(SYSLOG_SOCKET))
            return refuse("log=syslog", "no syslog here (" SYSLOG_SOCKET ")");
        openlog(IDENT, LOG_PID, LOG_DAEMON);
        L.target = TO_SYSLOG;
    } else {
        g_autofree char *what = g_strdup_printf("log=%s", target);
        if (!*target)
            return refuse(what, "expected journal, syslog, stderr or a file");
        char *real_backing = backing ? realpath(backing, NULL) : NULL;
        g_autoptr(CkFence) fence = ck_fence_new(real_backing ? real_backing : backing, L.mount);
        free(real_backing);
        g_autoptr(GError) err = NULL;
        g_autofree char *path = ck_fence_path(fence, target, &err);
        if (!path)
            return refuse(what, err->message);
        int fd = ck_fence_open(fence, path, 0640, &err);
        if (fd < 0)
            return refuse(what, err->message);
        if (L.fd >= 0)
            close(L.fd);
        L.fd = fd;
        g_free(L.path);
        L.path = g_steal_pointer(&path);
        ck_fence_free(L.fence);
        L.fence = g_steal_pointer(&fence);
        L.target = TO_FILE;
    }
    return 0;
}

int log_reopen(char **why)
{
    if (L.target != TO_FILE)
        return 0;
    g_autoptr(GError) err = NULL;
    int fd = ck_fence_open(L.fence, L.path, 0640, &err);
    if (fd < 0) {
        if (why)
            *why = g_strdup(err->message);
        return fd;
    }
    /* the same descriptor number: a writer in another thread writes to the
     * old file or to the new one, never to a closed descriptor */
    int rc = dup3(fd, L.fd, O_CLOEXEC) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

gsize log_collision_fields(const CkCollision *c, GLogField out[], gsize max, char **text)
{
    g_autofree char *job = c->caller_job       ? g_strdup_printf("job %s", c->caller_job)
                           : c->identity_value ? g_strdup_printf("invalid identity %s \"%s\"",
                                                                 c->identity, c->identity_value)
                                               : g_strdup("job (anonymous)");
    const char *owner = c->owner_job ? c->owner_job : "-";
    g_autofree char *where =
        c->path2 ? g_strdup_printf("%s -> %s", c->path, c->path2) : g_strdup(c->path);
    *text = g_strdup_printf("collision %s: %s %s %s by %s (pid %d, %s%s%s), owner %s",
                            c->denied ? "refused" : "allowed", c->kind, c->op, where, job,
                            (int)c->pid, c->comm ? c->comm : "?", c->tag ? ", tag " : "",
                            c->tag ? c->tag : "", owner);
    GLogField f[] = {
        {"MESSAGE_ID", LOG_ID_COLLISION, -1},
        {"CKPTFS_KIND", c->kind, -1},
        {"CKPTFS_VERDICT", c->denied ? "denied" : "allowed", -1},
        {"CKPTFS_OP", c->op, -1},
        {"CKPTFS_PATH", c->path, -1},
        /* an anonymous caller or an unowned entry: an empty value (CKPTFS_JOB=) */
        {"CKPTFS_JOB", c->caller_job ? c->caller_job : "", -1},
        {"CKPTFS_OWNER", c->owner_job ? c->owner_job : "", -1},
        {"MESSAGE", *text, -1},
    };
    gsize n = MIN(max, G_N_ELEMENTS(f));
    memcpy(out, f, n * sizeof *f);
    return n;
}

void log_collision_record(const CkCollision *c)
{
    GLogField f[8];
    g_autofree char *text = NULL;
    gsize n = log_collision_fields(c, f, G_N_ELEMENTS(f), &text);
    g_log_structured_array(c->denied ? G_LOG_LEVEL_WARNING : G_LOG_LEVEL_MESSAGE, f, n);
}

void log_start(const LogStart *s)
{
    g_autofree char *pt =
        s->passthrough_why ? g_strdup_printf("off (%s)", s->passthrough_why) : g_strdup("on");
    g_autofree char *identity =
        s->job ? g_strdup_printf("job=%s", s->job)
        : s->identity
            ? g_strdup_printf("%s%s%s%s", s->identity, s->identity_map ? " (map " : "",
                              s->identity_map ? s->identity_map : "", s->identity_map ? ")" : "")
            : g_strdup("none (every caller anonymous)");
    if (s->anonymous_deny && !s->job) {
        char *deny = g_strconcat(identity, ", anonymous callers denied", NULL);
        g_free(identity);
        identity = deny;
    }
    g_autofree char *how = s->attaches ? g_strdup_printf(", took the live connection over "
                                                         "(%u times since mounted)",
                                                         s->attaches)
                                       : g_strdup("");
    log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_START,
              "start: ckptfs %s, backing %s, mount %s, FUSE passthrough %s, %s, identity %s, "
              "log %s at %s%s",
              CKPTFS_VERSION, s->backing, s->mount, pt,
              s->supervised ? "supervised" : "not supervised", identity, log_target_name(),
              log_level_name(), how);
}

void log_stop(const char *mount, int rc, bool handover)
{
    if (handover)
        log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_STOP,
                  "stop: %s: handing the connection over to a new daemon", mount);
    else if (rc == 0)
        log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_STOP, "stop: %s: unmounted", mount);
    else if (rc > 0)
        log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_STOP, "stop: %s: signal SIG%s, unmounting", mount,
                  sigabbrev_np(rc) ? sigabbrev_np(rc) : "?");
    else
        log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_STOP, "stop: %s: the session failed: %s", mount,
                  g_strerror(-rc));
}
