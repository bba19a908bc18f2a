/* ckptctl status MOUNT: the health of a mount, asked of its supervisor (or
 * of a daemon without one) on the mount's control socket, never through the
 * file system: a hung mount answers too.  Exit 0 healthy, 1 not (the
 * problems are listed), 2 not a ckptfs mount or usage. */
#include "ckptctl.h"

#include <errno.h>
#include <libmount.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control_socket.h"
#include "json.h"

#define ANSWER_WAIT_MS 1000 /* a supervisor answers at once; a daemon may be stopped */
#define ANSWER_MAX     (64 * 1024)

static bool ckptfs_mounted_at(const char *mnt)
{
    struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
    struct libmnt_fs *fs = tb ? mnt_table_find_target(tb, mnt, MNT_ITER_BACKWARD) : NULL;
    bool yes = fs && g_strcmp0(mnt_fs_get_fstype(fs), "fuse.ckptfs") == 0;
    mnt_unref_table(tb);
    return yes;
}

/* The answer (g_free), or NULL when none came in time. */
static char *ask(int fd)
{
    struct timeval tv = {ANSWER_WAIT_MS / 1000, (ANSWER_WAIT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send(fd, "status", 6, MSG_NOSIGNAL) != 6)
        return NULL;
    g_autofree char *buf = g_malloc(ANSWER_MAX);
    ssize_t r = recv(fd, buf, ANSWER_MAX - 1, 0);
    if (r <= 0)
        return NULL;
    buf[r] = '\0';
    return g_steal_pointer(&buf);
}

static const char *str_of(JsonObject *o, const char *k)
{
    return o && json_object_has_member(o, k) &&
                   JSON_NODE_HOLDS_VALUE(json_object_get_member(o, k)) &&
                   json_node_get_value_type(json_object_get_member(o, k)) == G_TYPE_STRING
               ? json_object_get_string_member(o, k)
               : NULL;
}

static char *num_of(JsonObject *o, const char *k)
{
    if (!o || !json_object_has_member(o, k) || !JSON_NODE_HOLDS_VALUE(json_object_get_member(o, k)))
        return g_strdup("-");
    JsonNode *n = json_object_get_member(o, k);
    if (json_node_get_value_type(n) == G_TYPE_BOOLEAN)
        return g_strdup(json_node_get_boolean(n) ? "yes" : "no");
    return g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(n));
}

static JsonObject *obj_of(JsonObject *o, const char *k)
{
    return o && json_object_has_member(o, k) && JSON_NODE_HOLDS_OBJECT(json_object_get_member(o, k))
               ? json_object_get_object_member(o, k)
               : NULL;
}

static void print_human(JsonObject *o)
{
    const char *hdr[] = {"WHAT", "VALUE", NULL};
    g_autoptr(CkptctlTable) t = ckptctl_table_new(hdr);
    JsonObject *sup = obj_of(o, "supervisor"), *d = obj_of(o, "daemon"), *c = obj_of(o, "catalog");
    g_autofree char *healthy = num_of(o, "healthy");
    ckptctl_table_row(t, "mount", str_of(o, "mount"));
    ckptctl_table_row(t, "healthy", healthy);
    ckptctl_table_row(t, "state", str_of(o, "state"));
    g_autofree char *spid = num_of(sup, "pid"), *sup_up = num_of(sup, "uptime_seconds"),
                    *restarts = num_of(sup, "restarts");
    g_autofree char *supervised = num_of(o, "supervised");
    /* "none" only when the answer says so: a supervisor that did not
     * answer, or a mount that did not say, has none of its numbers */
    bool none = !sup && strcmp(supervised, "no") == 0;
    ckptctl_table_row(t, "supervisor pid", none ? "none (not supervised)" : spid);
    if (!none) {
        ckptctl_table_row(t, "supervisor uptime (s)", sup_up);
        ckptctl_table_row(t, "restarts", restarts);
    }
    g_autofree char *dpid = num_of(d, "pid"), *d_up = num_of(d, "uptime_seconds");
    g_autofree char *attaches = num_of(o, "attaches");
    ckptctl_table_row(t, "daemon pid", dpid);
    ckptctl_table_row(t, "daemon uptime (s)", d_up);
    ckptctl_table_row(t, "version", str_of(d, "version"));
    ckptctl_table_row(t, "kernel protocol", str_of(d, "protocol"));
    ckptctl_table_row(t, "attaches", attaches);
    g_autofree char *pt = num_of(o, "passthrough");
    g_autofree char *ptline = str_of(o, "passthrough_why_not")
                                  ? g_strdup_printf("%s (%s)", pt, str_of(o, "passthrough_why_not"))
                                  : g_strdup(pt);
    ckptctl_table_row(t, "passthrough", ptline);
    ckptctl_table_row(t, "identity", str_of(o, "identity"));
    ckptctl_table_row(t, "log", str_of(o, "log"));
    g_autofree char *loaded = num_of(c, "loaded"), *jobs = num_of(c, "jobs"),
                    *markers = num_of(c, "markers");
    ckptctl_table_row(t, "catalog loaded", loaded);
    ckptctl_table_row(t, "catalog jobs", jobs);
    ckptctl_table_row(t, "catalog markers", markers);
    ckptctl_table_row(t, "last rescan", str_of(c, "last_rescan"));
    g_autofree char *collisions = num_of(o, "collisions");
    ckptctl_table_row(t, "collisions", collisions);
    ckptctl_table_print(t, NULL);
    JsonArray *p =
        json_object_has_member(o, "problems") ? json_object_get_array_member(o, "problems") : NULL;
    for (guint i = 0; p && i < json_array_get_length(p); i++)
        printf("problem: %s\n", json_array_get_string_element(p, i));
}

/* Whose control socket took the question. */
typedef enum {
    ASKED_NOBODY,     /* neither socket listens */
    ASKED_SUPERVISOR, /* a supervisor listens: it speaks for the daemon */
    ASKED_DAEMON,     /* only a daemon listens, which it does when it has no supervisor */
} Asked;

static void add_null(JsonBuilder *b, const char *name)
{
    json_builder_set_member_name(b, name);
    json_builder_add_null_value(b);
}

/* A mount that does not answer: the document says so, with every member an
 * answer has, so that a script reads one shape whoever answered; what only
 * the answer could tell is null, not a guess. */
static char *no_answer(const char *mnt, Asked asked)
{
    const char *problem =
        asked == ASKED_SUPERVISOR
            ? "nothing answers on the mount's supervisor socket within 1 s: the supervisor is "
              "stopped or hung"
        : asked == ASKED_DAEMON
            ? "nothing answers on the mount's control socket within 1 s: the daemon (without a "
              "supervisor) is stopped or hung"
            : "nothing listens on the mount's control sockets: its daemon is starting, or is gone "
              "and had no supervisor";
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    ckptctl_add_str_or_null(b, "mount", mnt);
    json_builder_set_member_name(b, "healthy");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_set_member_name(b, "problems");
    json_builder_begin_array(b);
    json_builder_add_string_value(b, problem);
    json_builder_end_array(b);
    add_null(b, "state");
    /* which socket listens says whether a supervisor does; when neither
     * does, one may be about to (a mount that is starting) */
    json_builder_set_member_name(b, "supervised");
    if (asked == ASKED_NOBODY)
        json_builder_add_null_value(b);
    else
        json_builder_add_boolean_value(b, asked == ASKED_SUPERVISOR);
    const char *unknown[] = {"supervisor",  "daemon",
                             "attaches",    "oldest_request_seconds",
                             "passthrough", "passthrough_why_not",
                             "identity",    "log",
                             "catalog",     "collisions",
                             NULL};
    for (const char *const *k = unknown; *k; k++)
        add_null(b, *k);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return ck_json_text(root, false);
}

int ckptctl_status(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the status as one JSON document", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("MOUNT");
    g_option_context_set_summary(
        ctx, "The health of a ckptfs mount: its supervisor and daemon, versions, uptime, "
             "restarts, passthrough, identity, catalog, collisions.  Asked on the mount's control "
             "socket, not through the file system, so a hung mount answers too.  Exit 0 when "
             "healthy, 1 when not (each problem is named), 2 when MOUNT is no ckptfs mount.");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        return ckptctl_fail("status", "%s (try ckptctl status --help)", err->message);
    if (argc != 2)
        return ckptctl_fail("status", "expected one MOUNT (try ckptctl status --help)");
    g_autofree char *mnt = ck_mountpoint_path(argv[1]);
    if (!mnt)
        return ckptctl_fail("status", "%s: %s", argv[1], g_strerror(errno));
    Asked asked = ASKED_SUPERVISOR;
    int fd = ck_control_connect(mnt, "supervisor");
    if (fd < 0) {
        asked = ASKED_DAEMON;
        fd = ck_control_connect(mnt, "daemon");
    }
    if (fd < 0)
        asked = ASKED_NOBODY;
    bool mounted = ckptfs_mounted_at(mnt);
    if (fd < 0 && !mounted)
        return ckptctl_fail("status", "%s: not a ckptfs mount", mnt);
    g_autofree char *answer = fd >= 0 ? ask(fd) : NULL;
    if (fd >= 0)
        close(fd);
    if (!answer)
        answer = no_answer(mnt, asked);
    if (g_str_has_prefix(answer, "error"))
        return ckptctl_fail("status", "%s: %s", mnt, answer);
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, answer, -1, &err) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p)))
        return ckptctl_fail("status", "%s: not a status document: %s", mnt,
                            err ? err->message : "not an object");
    JsonObject *o = json_node_get_object(json_parser_get_root(p));
    bool healthy =
        json_object_has_member(o, "healthy") && json_object_get_boolean_member(o, "healthy");
    if (json) {
        g_autofree char *text = ckptctl_json_node_text(json_parser_get_root(p));
        fputs(text, stdout);
    } else {
        print_human(o);
    }
    return healthy ? CKPTCTL_OK : CKPTCTL_FOUND;
}
