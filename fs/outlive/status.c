#include "status.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs-config.h"
#include "json.h"
#include "kernel/kio.h"
#include "log.h"
#include "metrics.h"

void status_publish(State *st, const FsOptions *o, const char *why, gint64 started_us)
{
    StateHeader *h = st->hdr;
    g_strlcpy(h->status.version, CKPTFS_VERSION, sizeof h->status.version);
    g_strlcpy(h->status.passthrough_why, why ? why : "", sizeof h->status.passthrough_why);
    g_autofree char *identity = o->job_interned ? g_strconcat("job:", o->job_interned, NULL)
                                : o->identity   ? g_strdup(o->identity)
                                                : g_strdup("none");
    g_strlcpy(h->status.identity, identity, sizeof h->status.identity);
    g_strlcpy(h->status.log, log_target_name(), sizeof h->status.log);
    atomic_store(&h->status.passthrough, why == NULL);
    atomic_store(&h->status.started_us, started_us);
    atomic_store(&h->status.pid, (int32_t)getpid()); /* last: the rest is in place */
}

/* The state letter of /proc/<pid>/stat, 0 when there is no such process. */
static char proc_state(int pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
    g_autofree char *text = NULL;
    if (pid <= 0 || !g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    const char *close = strrchr(text, ')'); /* comm may hold anything */
    return close && close[1] == ' ' ? close[2] : 0;
}

static void add_time(JsonBuilder *b, const char *name, gint64 us)
{
    json_builder_set_member_name(b, name);
    if (us <= 0) {
        json_builder_add_null_value(b);
        return;
    }
    g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(us / G_USEC_PER_SEC);
    g_autofree char *text = t ? g_date_time_format(t, "%Y-%m-%dT%H:%M:%SZ") : NULL;
    json_builder_add_string_value(b, text ? text : "");
}

static void add_uptime(JsonBuilder *b, gint64 since_us)
{
    json_builder_set_member_name(b, "uptime_seconds");
    json_builder_add_int_value(b,
                               since_us > 0 ? (g_get_real_time() - since_us) / G_USEC_PER_SEC : 0);
}

static void add_text(JsonBuilder *b, const char *name, const char *v)
{
    json_builder_set_member_name(b, name);
    if (v && *v)
        ck_json_add_string(b, v);
    else
        json_builder_add_null_value(b);
}

static void add_int(JsonBuilder *b, const char *name, gint64 v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, v);
}

static void add_bool(JsonBuilder *b, const char *name, bool v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, v);
}

/* A copy of a text field the daemon may be writing (NUL-terminated). */
static char *field(const char *src, size_t len)
{
    return g_strndup(src, strnlen(src, len));
}

/* Seconds the oldest request the serving daemon read has waited for its
 * answer, or -1 when none waits (only a supervised daemon journals them). */
static double oldest_request_s(const State *st)
{
    gint64 now = g_get_monotonic_time(), oldest = now;
    for (int i = 0; i < INFLIGHT_THREADS; i++) {
        const InflightRec *r = &st->inflight[i];
        /* the unique, then the time, then the unique again: a thread that
         * took another request meanwhile is skipped, not paired with the
         * old request's time */
        uint64_t u = atomic_load(&r->unique);
        gint64 since = atomic_load(&r->since_us);
        if (u && atomic_load(&r->unique) == u && since > 0 && since < oldest)
            oldest = since;
    }
    return oldest < now ? (double)(now - oldest) / 1e6 : -1;
}

char *status_json(const State *st, const StatusProcs *p, bool *healthy)
{
    StateHeader *h = st->hdr;
    FsMetrics *m = st->metrics;
    g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
    int pid = atomic_load(&h->status.pid);
    if (p->daemon_pid)
        pid = p->daemon_pid;
    char pstate = proc_state(pid);
    if (p->connection_gone)
        g_ptr_array_add(problems, g_strdup("the mount is gone (unmounted or aborted)"));
    if (p->state && strcmp(p->state, "failed") == 0)
        g_ptr_array_add(problems,
                        g_strdup_printf("no daemon can start (%s): every request fails with EIO",
                                        p->why ? p->why : "?"));
    else if (p->state && strcmp(p->state, "starting") == 0)
        g_ptr_array_add(problems, g_strdup("no daemon serves yet: requests wait"));
    else if (!pstate || pstate == 'Z' || pstate == 'X')
        g_ptr_array_add(problems, g_strdup("the daemon is gone"));
    else if (pstate == 'T' || pstate == 't')
        g_ptr_array_add(problems,
                        g_strdup("the daemon is stopped (SIGSTOP, or a debugger): requests wait"));
    double waited = oldest_request_s(st);
    if (waited >= STATUS_HUNG_AFTER_S && !(pstate == 'T' || pstate == 't'))
        g_ptr_array_add(problems,
                        g_strdup_printf("a request has waited %.0f s for the daemon's answer: the "
                                        "daemon or the backing storage hangs",
                                        waited));

    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    g_autofree char *mount = field(h->mountpoint, sizeof h->mountpoint);
    add_text(b, "mount", mount);
    add_bool(b, "healthy", problems->len == 0);
    json_builder_set_member_name(b, "problems");
    json_builder_begin_array(b);
    for (guint i = 0; i < problems->len; i++)
        json_builder_add_string_value(b, problems->pdata[i]);
    json_builder_end_array(b);
    add_text(b, "state", p->state);
    add_bool(b, "supervised", p->supervisor_pid > 0);
    json_builder_set_member_name(b, "supervisor");
    if (p->supervisor_pid > 0) {
        json_builder_begin_object(b);
        add_int(b, "pid", p->supervisor_pid);
        add_time(b, "started", p->supervisor_started_us);
        add_uptime(b, p->supervisor_started_us);
        add_int(b, "restarts", (gint64)p->restarts);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    gint64 started = atomic_load(&h->status.started_us);
    json_builder_set_member_name(b, "daemon");
    json_builder_begin_object(b);
    add_int(b, "pid", pid);
    char ps[2] = {pstate ? pstate : '-', 0};
    add_text(b, "process_state", ps);
    add_time(b, "started", started);
    add_uptime(b, started);
    g_autofree char *version = field(h->status.version, sizeof h->status.version);
    add_text(b, "version", version);
    g_autofree char *protocol = g_strdup_printf("7.%d", KIO_PROTOCOL_MINOR);
    add_text(b, "protocol", protocol);
    json_builder_end_object(b);
    add_int(b, "attaches", (gint64)atomic_load(&h->attaches));
    json_builder_set_member_name(b, "oldest_request_seconds");
    if (waited < 0)
        json_builder_add_null_value(b);
    else
        json_builder_add_double_value(b, waited);
    int pt = atomic_load(&h->status.passthrough);
    json_builder_set_member_name(b, "passthrough");
    if (pt < 0)
        json_builder_add_null_value(b);
    else
        json_builder_add_boolean_value(b, pt == 1);
    g_autofree char *why = field(h->status.passthrough_why, sizeof h->status.passthrough_why);
    add_text(b, "passthrough_why_not", pt == 1 ? NULL : why);
    g_autofree char *identity = field(h->status.identity, sizeof h->status.identity);
    add_text(b, "identity", identity);
    g_autofree char *log = field(h->status.log, sizeof h->status.log);
    add_text(b, "log", log);
    json_builder_set_member_name(b, "catalog");
    json_builder_begin_object(b);
    add_bool(b, "loaded", atomic_load(&h->status.catalog_done) != 0);
    add_int(b, "jobs", (gint64)atomic_load(&m->catalog_jobs));
    add_int(b, "markers", (gint64)atomic_load(&m->catalog_markers));
    add_time(b, "last_rescan", atomic_load(&h->status.last_rescan_us));
    json_builder_end_object(b);
    guint64 collisions = 0;
    for (int k = 0; k < CK_VERDICT_COUNT; k++)
        collisions += atomic_load(&m->refusals[k][0]) + atomic_load(&m->refusals[k][1]);
    add_int(b, "collisions", (gint64)collisions);
    json_builder_end_object(b);
    *healthy = problems->len == 0;
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return ck_json_text(root, false);
}
