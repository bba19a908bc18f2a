#include "control.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "identity_watch.h"
#include "log.h"
#include "views-private.h"

_Static_assert(FS_LIVE_TAG_ENV_MAX < sizeof((StateHeader *)0)->live_tag_env_text[0],
               "the state memfd holds every tag_env= name");

/* The settings are read on other threads without a lock (one request reads
 * policy once); writes and reads are atomic so none sees a torn value. */
void control_current(struct ckptfs *fs, FsLive *live)
{
    live->audit = __atomic_load_n(&fs->policy.audit, __ATOMIC_RELAXED);
    live->legacy_rw = __atomic_load_n(&fs->policy.legacy_rw, __ATOMIC_RELAXED);
    live->rescan_s = fs->views ? catalog_watch_rescan(fs) : fs->opt.live.rescan_s;
    live->tag_env = control_tag_env(fs);
}

const char *control_tag_env(struct ckptfs *fs)
{
    return __atomic_load_n(&fs->tag_env, __ATOMIC_RELAXED);
}

/* Into the state memfd, for the next daemon (control_lock held). */
static void keep_for_next_daemon(struct ckptfs *fs, FsLiveKey k, const FsLive *v)
{
    StateHeader *h = fs->state.hdr;
    switch (k) {
    case FS_LIVE_POLICY:
        atomic_store(&h->mode_audit, v->audit);
        break;
    case FS_LIVE_LEGACY:
        atomic_store(&h->mode_legacy_rw, v->legacy_rw);
        break;
    case FS_LIVE_RESCAN:
        atomic_store(&h->live_rescan_us, MAX((int64_t)(v->rescan_s * 1e6), 1));
        break;
    case FS_LIVE_TAG_ENV: {
        /* the buffer not in use, then its name: a daemon killed in between
         * leaves the previous value whole */
        int next = atomic_load(&h->live_tag_env) == 1 ? 1 : 0;
        g_strlcpy(h->live_tag_env_text[next], v->tag_env ? v->tag_env : "",
                  sizeof h->live_tag_env_text[next]);
        atomic_store(&h->live_tag_env, next + 1);
        break;
    }
    default:
        break;
    }
}

/* What the options said of each setting, as key=value lines. */
static char *configured_text(const FsLive *c)
{
    GString *s = g_string_new(NULL);
    for (int k = 0; k < FS_LIVE_COUNT; k++) {
        g_autofree char *v = fs_live_format((FsLiveKey)k, c);
        g_string_append_printf(s, "%s=%s\n", fs_live_keys[k], v);
    }
    return g_string_free(s, FALSE);
}

/* Into the state memfd, for the next daemon (control_lock held, or no
 * other thread yet): the buffer not in use, then its name. */
static void keep_configured(struct ckptfs *fs)
{
    StateHeader *h = fs->state.hdr;
    g_autofree char *text = configured_text(&fs->configured);
    int next = atomic_load(&h->configured_at) == 1 ? 1 : 0;
    g_strlcpy(h->configured_text[next], text, sizeof h->configured_text[next]);
    atomic_store(&h->configured_at, next + 1);
}

/* The value the previous daemon's options gave key k, or NULL (g_free). */
static char *configured_before(const StateHeader *h, FsLiveKey k)
{
    int at = atomic_load(&h->configured_at);
    if (at != 1 && at != 2)
        return NULL;
    char text[sizeof h->configured_text[0]];
    memcpy(text, h->configured_text[at - 1], sizeof text);
    text[sizeof text - 1] = '\0';
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *prefix = g_strconcat(fs_live_keys[k], "=", NULL);
    for (char **l = lines; *l; l++)
        if (g_str_has_prefix(*l, prefix))
            return g_strdup(*l + strlen(prefix));
    return NULL;
}

/* A setting changed live outlives the daemon, unless this daemon's options
 * say otherwise of it than the previous daemon's did: a takeover (or
 * systemctl reload) that changes an option applies it, one that leaves it
 * alone keeps what was set live. */
static bool options_changed(const StateHeader *h, FsLiveKey k, const FsLive *mine)
{
    g_autofree char *before = configured_before(h, k);
    g_autofree char *now = fs_live_format(k, mine);
    return before && strcmp(before, now) != 0;
}

void control_init(struct ckptfs *fs)
{
    g_mutex_init(&fs->control_lock);
    fs->configured = fs->opt.live;
    FsLive l = fs->opt.live;
    StateHeader *h = fs->state.hdr;
    int audit = atomic_load(&h->mode_audit), rw = atomic_load(&h->mode_legacy_rw);
    if (audit >= 0 && !options_changed(h, FS_LIVE_POLICY, &l))
        l.audit = audit;
    if (rw >= 0 && !options_changed(h, FS_LIVE_LEGACY, &l))
        l.legacy_rw = rw;
    int64_t rescan_us = atomic_load(&h->live_rescan_us);
    if (rescan_us > 0 && !options_changed(h, FS_LIVE_RESCAN, &l))
        l.rescan_s = (double)rescan_us / 1e6;
    int tag = atomic_load(&h->live_tag_env);
    if ((tag == 1 || tag == 2) && !options_changed(h, FS_LIVE_TAG_ENV, &l)) {
        char name[sizeof h->live_tag_env_text[0]];
        memcpy(name, h->live_tag_env_text[tag - 1], sizeof name);
        name[sizeof name - 1] = '\0';
        FsLive t;
        g_autofree char *bad = fs_live_parse(FS_LIVE_TAG_ENV, name, &t);
        if (!bad)
            l.tag_env = t.tag_env;
    }
    /* what is kept from now on: the values in force, and what the options
     * said */
    for (int k = 0; k < FS_LIVE_COUNT; k++)
        keep_for_next_daemon(fs, (FsLiveKey)k, &l);
    keep_configured(fs);
    fs->opt.live = l;
    fs->policy.audit = l.audit;
    fs->policy.legacy_rw = l.legacy_rw;
    fs->tag_env = l.tag_env;
}

void control_clear(struct ckptfs *fs)
{
    g_mutex_clear(&fs->control_lock);
}

static char *shown(FsLiveKey k, const FsLive *l)
{
    char *v = fs_live_format(k, l);
    if (*v)
        return v;
    g_free(v);
    return g_strdup("(none)");
}

int control_apply(struct ckptfs *fs, FsLiveKey k, const char *value, const char *who, char **why)
{
    FsLive v;
    control_current(fs, &v);
    char *bad = fs_live_parse(k, value, &v);
    if (bad) {
        if (why)
            *why = bad;
        else
            g_free(bad);
        return -EINVAL;
    }
    g_mutex_lock(&fs->control_lock);
    FsLive before;
    control_current(fs, &before);
    switch (k) {
    case FS_LIVE_POLICY:
        __atomic_store_n(&fs->policy.audit, v.audit, __ATOMIC_RELAXED);
        break;
    case FS_LIVE_LEGACY:
        __atomic_store_n(&fs->policy.legacy_rw, v.legacy_rw, __ATOMIC_RELAXED);
        break;
    case FS_LIVE_RESCAN:
        catalog_watch_set_rescan(fs, v.rescan_s);
        break;
    case FS_LIVE_TAG_ENV:
        __atomic_store_n(&fs->tag_env, v.tag_env, __ATOMIC_RELAXED);
        break;
    default:
        break;
    }
    keep_for_next_daemon(fs, k, &v);
    atomic_fetch_add_explicit(&fs->metrics->control_changes[k], 1, memory_order_relaxed);
    g_mutex_unlock(&fs->control_lock);
    g_autofree char *was = shown(k, &before), *now = shown(k, &v);
    g_message("ckptfs: control: %s %s -> %s by %s", fs_live_keys[k], was, now, who);
    return 0;
}

void control_reload(struct ckptfs *fs)
{
    bool ok = true;
    if (fs->opt.config) {
        FsLive now;
        g_autofree char *remount = NULL, *why = NULL, *level = NULL;
        if (!fs_options_reread_live(&fs->opt, &now, &level, &remount, &why)) {
            g_warning("ckptfs: reload: %s; the settings stay as they were", why);
            ok = false;
        } else {
            /* what the file changed since it was last read: a setting
             * changed through .control meanwhile stays unless the file
             * changes it too */
            g_autofree char *who = g_strdup_printf("a reload of config=%s", fs->opt.config);
            for (int k = 0; k < FS_LIVE_COUNT; k++) {
                g_autofree char *was = fs_live_format((FsLiveKey)k, &fs->configured);
                g_autofree char *is = fs_live_format((FsLiveKey)k, &now);
                if (strcmp(was, is) != 0)
                    control_apply(fs, (FsLiveKey)k, is, who, NULL);
            }
            g_mutex_lock(&fs->control_lock);
            fs->configured = now;
            keep_configured(fs);
            g_mutex_unlock(&fs->control_lock);
            if (level && log_set_level(level) == 0) {
                g_message("ckptfs: reload: log_level is %s", level);
                free(fs->opt.log_level);
                fs->opt.log_level = strdup(level);
            }
            if (remount)
                g_message("ckptfs: reload: config=%s: %s changed, which takes a remount",
                          fs->opt.config, remount);
        }
    }
    identity_watch_reload(fs, "SIGHUP");
    g_autoptr(GError) err = NULL;
    if (!ck_collision_log_reopen(fs->collisions, &err)) {
        g_warning("ckptfs: reload: %s; collisions still go to the file open before", err->message);
        ok = false;
    }
    /* log=FILE too: moved away by a rotation, it is made again */
    g_autofree char *log_why = NULL;
    if (log_reopen(&log_why) < 0) {
        g_warning("ckptfs: reload: log=%s: %s; the log still goes to the file open before",
                  log_target_name(), log_why);
        ok = false;
    }
    atomic_fetch_add_explicit(&fs->metrics->config_reloads[ok ? 1 : 0], 1, memory_order_relaxed);
    if (ok)
        log_event(G_LOG_LEVEL_MESSAGE, LOG_ID_RELOAD, "ckptfs: reload: done%s%s",
                  fs->opt.config ? ", config=" : "", fs->opt.config ? fs->opt.config : "");
}

GBytes *control_text(struct ckptfs *fs)
{
    FsLive now;
    control_current(fs, &now);
    GString *s = g_string_new(NULL);
    for (int k = 0; k < FS_LIVE_COUNT; k++) {
        g_autofree char *v = fs_live_format((FsLiveKey)k, &now);
        g_string_append_printf(s, "%s=%s\n", fs_live_keys[k], v);
    }
    return g_string_free_to_bytes(s);
}

bool control_may_change(fuse_req_t req)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    return ctx->uid == 0 || ctx->uid == geteuid();
}

static char *who_of(fuse_req_t req)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    return g_strdup_printf("uid %u (pid %d)", (unsigned)ctx->uid, (int)ctx->pid);
}

int control_write(struct ckptfs *fs, fuse_req_t req, const char *data, size_t size)
{
    if (!control_may_change(req))
        return -EPERM;
    if (memchr(data, '\0', size))
        return -EINVAL;
    g_autofree char *text = g_strndup(data, size);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autoptr(GArray) keys = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GPtrArray) values = g_ptr_array_new();
    /* all checked first: a bad line anywhere changes nothing */
    FsLive probe;
    control_current(fs, &probe);
    for (char **l = lines; *l; l++) {
        char *line = g_strstrip(*l);
        if (!*line)
            continue;
        char *eq = strchr(line, '=');
        if (!eq)
            return -EINVAL;
        *eq = '\0';
        int k = fs_live_key(g_strstrip(line));
        char *value = g_strstrip(eq + 1);
        g_autofree char *bad =
            k >= 0 ? fs_live_parse((FsLiveKey)k, value, &probe) : g_strdup("unknown");
        if (bad)
            return -EINVAL;
        g_array_append_val(keys, k);
        g_ptr_array_add(values, value);
    }
    g_autofree char *who = who_of(req);
    for (guint i = 0; i < keys->len; i++) {
        int err =
            control_apply(fs, (FsLiveKey)g_array_index(keys, int, i), values->pdata[i], who, NULL);
        if (err)
            return err;
    }
    return 0;
}

int control_getxattr(struct ckptfs *fs, const char *name, GBytes **value)
{
    if (!g_str_has_prefix(name, CONTROL_NAME))
        return -ENODATA;
    int k = fs_live_key(name + strlen(CONTROL_NAME));
    if (k < 0)
        return -ENODATA;
    FsLive now;
    control_current(fs, &now);
    char *v = fs_live_format((FsLiveKey)k, &now);
    *value = g_bytes_new_take(v, strlen(v));
    return 0;
}

void control_listxattr(struct ckptfs *fs, GString *names)
{
    (void)fs;
    for (int k = 0; k < FS_LIVE_COUNT; k++) {
        g_string_append_printf(names, "%s%s", CONTROL_NAME, fs_live_keys[k]);
        g_string_append_c(names, '\0');
    }
}

int control_setxattr(struct ckptfs *fs, fuse_req_t req, const char *name, const char *value,
                     size_t size)
{
    if (!g_str_has_prefix(name, CONTROL_NAME))
        return -ENOTSUP; /* not an attribute of ours (security.*, trusted.*) */
    int k = fs_live_key(name + strlen(CONTROL_NAME));
    if (k < 0)
        return -EINVAL;
    if (!control_may_change(req))
        return -EPERM;
    /* setfattr -v adds no NUL, some callers do; a trailing newline (echo) too */
    g_autofree char *v = g_strndup(value, size);
    g_strchomp(v);
    g_autofree char *who = who_of(req);
    return control_apply(fs, (FsLiveKey)k, v, who, NULL);
}
