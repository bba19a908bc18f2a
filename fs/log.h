/* The log of the daemon and of its supervisor (the same binary): glib's
 * structured writer, set once, first thing in main.
 *
 * Contract:
 *  - Every g_message/g_warning/g_debug/g_log_structured of the process, and
 *    libfuse's own messages, go to one target: the journal (with fields),
 *    syslog (LOG_DAEMON, identifier "ckptfs", LOG_PID), standard error, or
 *    a file opened O_APPEND.  On standard error and in the file each record
 *    is one line, "ckptfs[PID]: LEVEL: text" (the file with a UTC time
 *    first); control characters in the text are escaped.  A leading
 *    "ckptfs: " of the text is dropped: the identifier says it.
 *  - LEVEL is error, warning, info or debug; records below the level set
 *    are dropped.  g_message and g_info are info.
 *  - Until log_open, records go to standard error at level info.
 *  - log_set_level and log_reopen may be called from any thread at any
 *    time; everything else is set up before the first thread.
 * The state is the process's, as glib's writer is: the supervisor, which has
 * no struct ckptfs, logs through it too. */
#pragma once
#include <glib.h>
#include <stdbool.h>

#include "collision.h"

/* MESSAGE_ID of each kind of record (journalctl MESSAGE_ID=...). */
#define LOG_ID_START       "7f4d04ffa68447f2b26dedcbaa40e164"
#define LOG_ID_STOP        "cc4ecc517db44faabf5fd9b2eac583ff"
#define LOG_ID_COLLISION   "e4fe43aab37b437cb5095beb63420f89"
#define LOG_ID_RESTART     "618882962e1d4992a63147bbac7d85d3"
#define LOG_ID_PT_FALLBACK "59765defd9f44c9db817a394f82f2a53"
#define LOG_ID_RELOAD      "cec9b3a8353a4e71aabdf926759fd900"
#define LOG_ID_GIVE_UP     "a62f5cbed5724d908537d6fcbad4b431"

/* A record of kind id (LOG_ID_*), printf-style text after the id. */
#define log_event(level, id, ...)                                                                  \
    g_log_structured(G_LOG_DOMAIN, level, "CODE_FILE", __FILE__, "CODE_LINE",                      \
                     G_STRINGIFY(__LINE__), "CODE_FUNC", G_STRFUNC, "MESSAGE_ID", id, "MESSAGE",   \
                     __VA_ARGS__)

/* Installs the writer (and libfuse's log function): standard error, info. */
void log_init(void);
/* -o log=TARGET (NULL: the journal when its socket is there, else syslog
 * when /dev/log is, else standard error; with -d standard error) and
 * -o log_level=LEVEL (NULL: info; debug: debug whatever LEVEL says).
 * A FILE may not lie in backing or in mountpoint (as given; NULL: not
 * checked).  mountpoint also names the mount in each journal record.
 * Returns 0, or 2 after one line on standard error. */
int log_open(const char *target, const char *level, bool debug, const char *backing,
             const char *mountpoint);
/* Opens the file again under its name (after logrotate's or an operator's
 * mv), refused where log_open refuses it, also when the name leads there
 * by way of a symbolic link put in since; 0, or -errno with the old file
 * kept and *why (g_free; why may be NULL) saying why, for the caller to
 * log.  No file: 0. */
int log_reopen(char **why);
/* The level by name; 0, or -EINVAL for a name that is none. */
int log_set_level(const char *name);
bool log_level_known(const char *name);
const char *log_level_name(void);
/* "journal", "syslog", "stderr" or the file's absolute path. */
const char *log_target_name(void);

/* The absolute path of a file the daemon writes (log=, collision_log=):
 * arg canonicalised against the cwd, its directory resolved.  NULL, with
 * *err set, when the directory does not resolve or the name leads into
 * backing or mnt (real paths; NULL: not checked): the daemon never writes
 * there (core/fence.h, the check every open of the file makes again). */
char *log_file_path(const char *arg, const char *backing, const char *mnt, GError **err);

/* The line at start, at INIT (when passthrough is known), and the one at
 * stop, at info. */
typedef struct {
    const char *backing, *mount;
    const char *passthrough_why; /* NULL: on */
    bool supervised;
    const char *job;          /* job=ID, or NULL */
    const char *identity;     /* identity= as given ("env:VAR", "cgroup:PATTERN", ...), or NULL */
    const char *identity_map; /* identity_map=FILE, or NULL */
    bool anonymous_deny;      /* anonymous=deny (said only when denied) */
    unsigned attaches;        /* 0: mounted now; N: took the live connection over, N times */
} LogStart;
void log_start(const LogStart *s);
/* rc: the session loop's (0 unmounted, the signal that ended it, -errno);
 * handover: the supervisor asked for the connection. */
void log_stop(const char *mount, int rc, bool handover);

/* One collision record, with its fields (CKPTFS_KIND, CKPTFS_JOB, ...): a
 * warning when refused, info when allowed. */
void log_collision_record(const CkCollision *c);

/* For tests: the fields of the record of c, text included (MESSAGE);
 * strings in *text (g_free) back the values.  Returns how many. */
gsize log_collision_fields(const CkCollision *c, GLogField out[], gsize max, char **text);
/* For tests: the journal entry of a record, as "KEY=value" byte strings
 * (GBytes); mount: CKPTFS_MOUNT, or NULL. */
GPtrArray *log_journal_entry(GLogLevelFlags level, const GLogField *fields, gsize n,
                             const char *mount);
/* For tests: the line of a record on standard error (time_us 0) or in the
 * file (time_us: the record's time), with its newline. */
char *log_format_line(GLogLevelFlags level, const char *text, int pid, gint64 time_us);
