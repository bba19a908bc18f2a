#include "control.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "viewsint.h"

/* The settings are read on other threads without a lock (one request reads
 * policy once); writes and reads are atomic so none sees a torn value. */
static bool audit_of(struct ckptfs *fs)
{
    return __atomic_load_n(&fs->policy.audit, __ATOMIC_RELAXED);
}

static bool legacy_rw_of(struct ckptfs *fs)
{
    return __atomic_load_n(&fs->policy.legacy_rw, __ATOMIC_RELAXED);
}

static char *value_of(struct ckptfs *fs, const char *key)
{
    if (strcmp(key, "policy") == 0)
        return g_strdup(audit_of(fs) ? "audit" : "enforce");
    if (strcmp(key, "legacy") == 0)
        return g_strdup(legacy_rw_of(fs) ? "rw" : "ro");
    if (strcmp(key, "rescan") == 0) {
        char buf[G_ASCII_DTOSTR_BUF_SIZE];
        return g_strdup(g_ascii_formatd(buf, sizeof buf, "%g", catalog_watch_rescan(fs)));
    }
    return NULL;
}

static const char *const keys[] = {"policy", "legacy", "rescan"};

GBytes *control_text(struct ckptfs *fs)
{
    GString *s = g_string_new(NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++) {
        g_autofree char *v = value_of(fs, keys[i]);
        g_string_append_printf(s, "%s=%s\n", keys[i], v);
    }
    return g_string_free_to_bytes(s);
}

int control_getxattr(struct ckptfs *fs, const char *name, GBytes **value)
{
    if (!g_str_has_prefix(name, CONTROL_NAME))
        return -ENODATA;
    char *v = value_of(fs, name + strlen(CONTROL_NAME));
    if (!v)
        return -ENODATA;
    *value = g_bytes_new_take(v, strlen(v));
    return 0;
}

void control_listxattr(struct ckptfs *fs, GString *names)
{
    (void)fs;
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++) {
        g_string_append_printf(names, "%s%s", CONTROL_NAME, keys[i]);
        g_string_append_c(names, '\0');
    }
}

int control_setxattr(struct ckptfs *fs, fuse_req_t req, const char *name, const char *value,
                     size_t size)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    if (!g_str_has_prefix(name, CONTROL_NAME))
        return -ENOTSUP;
    const char *key = name + strlen(CONTROL_NAME);
    int which = -1;
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
        if (strcmp(key, keys[i]) == 0)
            which = (int)i;
    if (which < 0)
        return -ENOTSUP;
    if (ctx->uid != 0 && ctx->uid != geteuid())
        return -EPERM;
    /* setfattr -v adds no NUL, some callers do; a trailing newline (echo) too */
    g_autofree char *v = g_strndup(value, size);
    g_strchomp(v);
    g_autofree char *before = value_of(fs, key);
    if (which == 0) {
        if (strcmp(v, "enforce") != 0 && strcmp(v, "audit") != 0)
            return -EINVAL;
        __atomic_store_n(&fs->policy.audit, strcmp(v, "audit") == 0, __ATOMIC_RELAXED);
        atomic_store(&fs->state.hdr->mode_audit,
                     strcmp(v, "audit") == 0); /* a new daemon keeps it */
    } else if (which == 1) {
        if (strcmp(v, "ro") != 0 && strcmp(v, "rw") != 0)
            return -EINVAL;
        bool rw = strcmp(v, "rw") == 0;
        __atomic_store_n(&fs->policy.legacy_rw, rw, __ATOMIC_RELAXED);
        __atomic_store_n(&fs->opt.legacy_rw, rw, __ATOMIC_RELAXED);
        atomic_store(&fs->state.hdr->mode_legacy_rw, rw);
    } else {
        char *end = NULL;
        errno = 0;
        double s = g_ascii_strtod(v, &end);
        if (errno || end == v || *end || !(s > 0) || s > 1e9)
            return -EINVAL;
        catalog_watch_set_rescan(fs, s);
    }
    g_autofree char *after = value_of(fs, key);
    atomic_fetch_add_explicit(&fs->metrics.control_changes[which], 1, memory_order_relaxed);
    g_message("ckptfs: control: %s %s -> %s by uid %u (pid %d)", key, before, after,
              (unsigned)ctx->uid, (int)ctx->pid);
    return 0;
}
