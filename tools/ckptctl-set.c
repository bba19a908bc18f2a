/* ckptctl set MOUNT [KEY=VALUE...]: the settings of a live mount, through
 * the extended attributes of MOUNT/<views>/.control.  Without KEY=VALUE it
 * prints them; with, it sets each in turn (policy=enforce|audit,
 * legacy=ro|rw, rescan=SECONDS, tag_env=VAR) and prints the result. */
#include "ckptctl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#define PREFIX "user.ckptfs."

static const char *const keys[] = {"policy", "legacy", "rescan", "tag_env"};

/* A setting in --json: rescan a number, tag_env null when there is none. */
static void add_json(JsonBuilder *b, const char *key, const char *value)
{
    if (strcmp(key, "rescan") == 0) {
        /* whole seconds as an integer ("rescan":2); json-glib writes other
         * doubles with 17 digits, which every reader parses back exactly */
        double s = g_ascii_strtod(value, NULL);
        json_builder_set_member_name(b, key);
        if (s == (double)(gint64)s)
            json_builder_add_int_value(b, (gint64)s);
        else
            json_builder_add_double_value(b, s);
    } else {
        ckptctl_add_str_or_null(b, key, strcmp(key, "tag_env") == 0 && !*value ? NULL : value);
    }
}

int ckptctl_set(int argc, char **argv)
{
    gboolean json = FALSE;
    char *views = NULL;
    GOptionEntry entries[] = {
        {"json", 0, 0, G_OPTION_ARG_NONE, &json,
         "Print {\"policy\",\"legacy\",\"rescan\",\"tag_env\"} (rescan a number)", NULL},
        {"views", 0, 0, G_OPTION_ARG_STRING, &views,
         "Name of the views directory (default: what the mount says, else _views)", "NAME"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("MOUNT [KEY=VALUE...]");
    g_option_context_set_summary(
        ctx, "The settings of a live ckptfs mount, changed without a remount: policy=enforce|"
             "audit, legacy=ro|rw, rescan=SECONDS, tag_env=VAR (empty: none).  Without "
             "KEY=VALUE, prints them.  Only root or the user the daemon runs as may change "
             "them; the daemon logs and counts each change, and keeps it across its restarts.  "
             "Same as setfattr -n user.ckptfs.KEY -v VALUE MOUNT/_views/.control.");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        g_free(views);
        return ckptctl_fail("set", "%s (try ckptctl set --help)", err->message);
    }
    if (argc < 2) {
        g_free(views);
        return ckptctl_fail("set", "expected MOUNT [KEY=VALUE...] (try ckptctl set --help)");
    }
    g_autofree char *vn = ckptctl_views_of(argv[1], views);
    g_autofree char *control = g_build_filename(argv[1], vn, ".control", NULL);
    g_free(views);
    for (int i = 2; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        g_autofree char *key = eq ? g_strndup(argv[i], (gsize)(eq - argv[i])) : NULL;
        bool known = false;
        for (gsize k = 0; key && k < G_N_ELEMENTS(keys); k++)
            known |= strcmp(key, keys[k]) == 0;
        if (!known)
            return ckptctl_fail("set",
                                "%s: expected policy=enforce|audit, legacy=ro|rw, "
                                "rescan=SECONDS or tag_env=VAR",
                                argv[i]);
        g_autofree char *name = g_strconcat(PREFIX, key, NULL);
        if (setxattr(control, name, eq + 1, strlen(eq + 1), 0) != 0) {
            int e = errno;
            const char *why = e == EINVAL                   ? "not a valid value"
                              : e == EPERM || e == EACCES   ? "only root or the mount's owner may "
                                                              "change the settings"
                              : e == ENOENT || e == ENOTSUP ? "not a ckptfs mount with live "
                                                              "settings"
                                                            : g_strerror(e);
            return ckptctl_fail("set", "%s: %s: %s", control, argv[i], why);
        }
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    for (gsize k = 0; k < G_N_ELEMENTS(keys); k++) {
        g_autofree char *name = g_strconcat(PREFIX, keys[k], NULL);
        char buf[256];
        ssize_t n = getxattr(control, name, buf, sizeof buf - 1);
        if (n < 0 && errno == ENODATA && k > 0)
            continue; /* a daemon older than this setting */
        if (n < 0) {
            int e = errno;
            return ckptctl_fail("set", "%s: %s", control,
                                e == ENOENT || e == ENODATA || e == ENOTSUP
                                    ? "not a ckptfs mount with live settings"
                                    : g_strerror(e));
        }
        buf[n] = '\0';
        if (json)
            add_json(b, keys[k], buf);
        else
            printf("%s=%s\n", keys[k], buf);
    }
    json_builder_end_object(b);
    if (json)
        ckptctl_print_json(b);
    return CKPTCTL_OK;
}
