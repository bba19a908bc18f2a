#include "options.h"
#include "intern.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "layout.h"
#include "log.h"

enum {
    KEY_ALLOW_OTHER,
    KEY_DEFAULT_PERMISSIONS,
    KEY_HELP,
    KEY_MAX_READ,
    KEY_FSNAME,
    KEY_SUBTYPE,
};

/* Read requests no larger than this: libfuse splices a read reply only
 * when header, data and a page of slack fit its pipe, and without
 * CAP_SYS_RESOURCE a pipe stops at pipe-max-size (1 MiB); a 1 MiB request
 * falls back to pread into a fresh mmap'ed buffer plus writev (ckpt-bench:
 * 4x the daemon's CPU per GiB).  Read-ahead larger than this keeps several
 * requests in flight. */
#define CKPTFS_MAX_READ (512u * 1024u)

/* Ring entries a queue: one blocking FSYNC must not hold a CPU's requests. */
#define CKPTFS_RING_DEPTH 2

#define OPT(t, f)                                                                                  \
    {                                                                                              \
        t, offsetof(FsOptions, f), 0                                                               \
    }

static const struct fuse_opt fs_opt_spec[] = {
    OPT("policy=%s", policy),
    OPT("job=%s", job),
    OPT("identity=%s", identity),
    OPT("identity_map=%s", identity_map),
    OPT("anonymous=%s", anonymous),
    OPT("legacy=%s", legacy),
    OPT("legacy_backend=%s", legacy_backend),
    OPT("external_root=%s", external_root),
    OPT("views=%s", views),
    OPT("rescan=%s", rescan),
    OPT("config=%s", config),
    OPT("collision_log=%s", collision_log),
    OPT("entry_timeout=%s", entry_timeout),
    OPT("attr_timeout=%s", attr_timeout),
    OPT("tag_env=%s", tag_env),
    OPT("passthrough=%s", passthrough),
    OPT("io_uring=%s", io_uring),
    OPT("io_uring_depth=%s", io_uring_depth),
    OPT("log=%s", log),
    OPT("log_level=%s", log_level),
    {"no_policy", offsetof(FsOptions, no_policy), 1},
    {"no_default_permissions", offsetof(FsOptions, no_default_permissions), 1},
    {"writeback", offsetof(FsOptions, writeback), 1},
    {"no_handles", offsetof(FsOptions, no_handles), 1},
    {"supervise", offsetof(FsOptions, supervise), 1},
    {"nosupervise", offsetof(FsOptions, supervise), 0},
    FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
    FUSE_OPT_KEY("default_permissions", KEY_DEFAULT_PERMISSIONS),
    FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
    FUSE_OPT_KEY("fsname=", KEY_FSNAME),
    FUSE_OPT_KEY("subtype=", KEY_SUBTYPE),
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_END,
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    FsOptions *opt = data; /* fuse_opt_parse hands the same pointer the templates write into */
    switch (key) {
    case FUSE_OPT_KEY_NONOPT:
        opt->nonopts++;
        if (opt->nonopts == 1) {
            opt->backing_arg = g_strdup(arg);
            return 0;
        }
        if (opt->nonopts == 2) {
            opt->mountpoint_arg = g_strdup(arg);
            return 1; /* fuse_parse_cmdline takes it as the mountpoint */
        }
        fprintf(stderr, "ckptfs: unexpected argument '%s'\n", arg);
        opt->parse_error = 2;
        return -1;
    case KEY_ALLOW_OTHER:
        opt->allow_other = true;
        return 1;
    case KEY_DEFAULT_PERMISSIONS:
        opt->default_permissions = true;
        return 1;
    case KEY_MAX_READ:
        opt->max_read = (unsigned)strtoul(arg + strlen("max_read="), NULL, 10);
        return 1; /* libfuse needs it too (mount option and init must agree) */
    case KEY_FSNAME:
        opt->has_fsname = true;
        return 1;
    case KEY_SUBTYPE:
        opt->has_subtype = true;
        g_free(opt->fstype);
        opt->fstype = g_strconcat("fuse.", arg + strlen("subtype="), NULL);
        return 1;
    default:
        return 1;
    }
}

void fs_options_help(void)
{
    printf("usage: ckptfs [-f] [-d] [-s] [-o opt[,opt...]] BACKING_DIR MOUNTPOINT\n"
           "       ckptfs --takeover MOUNTPOINT [-o opt[,opt...]]\n"
           "\n"
           "    --takeover MOUNTPOINT     replace the daemon of a supervised mount with this\n"
           "                              binary, no request failing; -o replaces the mount's\n"
           "                              options (those the kernel fixed need a remount)\n"
           "\n"
           "ckptfs options:\n"
           "    -o policy=enforce|audit   refuse and record, or allow and record (enforce)\n"
           "    -o job=ID                 every caller acts as job ID\n"
           "    -o identity=env:VAR       a caller's job is VAR in its environment\n"
           "    -o identity=cgroup:PATTERN\n"
           "                              a caller's job is read from its cgroup v2 path\n"
           "                              (%%j: the job id, *: any one component), after\n"
           "                              the cgroup lines of identity_map\n"
           "    -o identity=cgroup        the cgroup lines of identity_map name the jobs\n"
           "    -o identity=uid           the uid:N lines of identity_map name the jobs\n"
           "    -o identity_map=FILE      \"CGROUP-PREFIX JOB\" and \"uid:N JOB\" lines, read\n"
           "                              again when the file changes and on SIGHUP\n"
           "    -o anonymous=allow|deny   whether a caller no identity names may write in\n"
           "                              job namespaces (allow for env, deny for cgroup, uid)\n"
           "    -o legacy=ro|rw           the legacy area is read-only or writable (ro)\n"
           "    -o legacy_backend=PATH    where legacy markers' state lives\n"
           "    -o external_root=PREFIX   absolute state roots under PREFIX are browsable\n"
           "    -o views=NAME             name of the virtual directory (_views)\n"
           "    -o rescan=SECONDS         rescan delay for changes behind the mount (2)\n"
           "    -o config=FILE            key file: [ckptfs] and [job:<ID>] groups\n"
           "    -o collision_log=FILE     also append collision records to FILE\n"
           "    -o tag_env=VAR            record the writer's VAR with each collision (\"tag\")\n"
           "    -o entry_timeout=SECONDS  kernel name cache of the passthrough tree (60)\n"
           "    -o attr_timeout=SECONDS   kernel attribute cache of the passthrough tree (60)\n"
           "    -o passthrough=auto|off   bind open files to backing files in the kernel (auto)\n"
           "    -o io_uring=auto|off      requests over io_uring where the kernel offers it and\n"
           "                              the mount is neither supervised nor auto_unmount\n"
           "                              (auto)\n"
           "    -o io_uring_depth=N       ring entries a CPU queue, a thread each (2)\n"
           "    -o log=TARGET             journal, syslog, stderr or FILE (default: the\n"
           "                              journal if there is one, else syslog, else stderr)\n"
           "    -o log_level=LEVEL        error, warning, info or debug (info; -d: debug)\n"
           "    -o writeback              use the kernel's writeback cache (no passthrough)\n"
           "    -o supervise|nosupervise  keep the /dev/fuse descriptor in a supervisor that\n"
           "                              replaces a dead daemon (default: on under systemd\n"
           "                              and when not in the foreground, unless config=FILE\n"
           "                              says supervise=false or -o auto_unmount is given)\n"
           "    -o max_read=N             largest read request (524288)\n"
           "    -o fsname=NAME            source shown by mount and df (the backing dir)\n"
           "    -o default_permissions    the kernel checks permissions (on with allow_other)\n"
           "    -o no_policy              for measuring only: skip every policy check\n"
           "    -o no_handles             for testing only: O_PATH descriptors, no file handles\n"
           "\n"
           "See ckptfs(8).\n"
           "\n");
}

/* The keys of the [ckptfs] group of config=FILE. */
static const struct {
    const char *key;
    size_t off;
} config_keys[] = {
    {"policy", offsetof(FsOptions, policy)},
    {"job", offsetof(FsOptions, job)},
    {"identity", offsetof(FsOptions, identity)},
    {"identity_map", offsetof(FsOptions, identity_map)},
    {"anonymous", offsetof(FsOptions, anonymous)},
    {"legacy", offsetof(FsOptions, legacy)},
    {"legacy_backend", offsetof(FsOptions, legacy_backend)},
    {"external_root", offsetof(FsOptions, external_root)},
    {"views", offsetof(FsOptions, views)},
    {"rescan", offsetof(FsOptions, rescan)},
    {"collision_log", offsetof(FsOptions, collision_log)},
    {"entry_timeout", offsetof(FsOptions, entry_timeout)},
    {"attr_timeout", offsetof(FsOptions, attr_timeout)},
    {"tag_env", offsetof(FsOptions, tag_env)},
    {"passthrough", offsetof(FsOptions, passthrough)},
    {"io_uring", offsetof(FsOptions, io_uring)},
    {"io_uring_depth", offsetof(FsOptions, io_uring_depth)},
    {"log", offsetof(FsOptions, log)},
    {"log_level", offsetof(FsOptions, log_level)},
    {"supervise", offsetof(FsOptions, supervise_cfg)},
};

static char **config_field(FsOptions *opt, size_t i)
{
    return (char **)((char *)opt + config_keys[i].off);
}

static const char *config_value(const FsOptions *opt, size_t i)
{
    return *(char *const *)((const char *)opt + config_keys[i].off);
}

/* Sets *field from the key file when the command line left it unset. */
static int from_keyfile(GKeyFile *kf, const char *key, char **field, char **why)
{
    if (*field)
        return 0;
    g_autoptr(GError) err = NULL;
    char *v = g_key_file_get_string(kf, "ckptfs", key, &err);
    if (!v) {
        if (g_error_matches(err, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND) ||
            g_error_matches(err, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_GROUP_NOT_FOUND))
            return 0;
        *why = g_strdup_printf("config: %s: %s", key, err->message);
        return 2;
    }
    *field = v;
    return 0;
}

/* Fills what opt leaves unset from config=FILE: 0, or 2 with *why. */
static int load_config(FsOptions *opt, char **why)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) err = NULL;
    if (!g_key_file_load_from_file(kf, opt->config, G_KEY_FILE_NONE, &err)) {
        *why = g_strdup_printf("config=%s: %s", opt->config, err->message);
        return 2;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(config_keys); i++) {
        int rc = from_keyfile(kf, config_keys[i].key, config_field(opt, i), why);
        if (rc)
            return rc;
    }
    /* a misspelt key is an error, as an unknown -o option is: silently
     * ignoring "legacy_backen=" would mount with another meaning */
    g_auto(GStrv) ckeys = g_key_file_get_keys(kf, "ckptfs", NULL, NULL);
    for (gsize i = 0; ckeys && ckeys[i]; i++) {
        bool known = false;
        for (size_t k = 0; k < G_N_ELEMENTS(config_keys) && !known; k++)
            known = strcmp(ckeys[i], config_keys[k].key) == 0;
        if (!known) {
            *why = g_strdup_printf("config=%s: [ckptfs]: unknown key %s", opt->config, ckeys[i]);
            return 2;
        }
    }
    gsize ngroups = 0;
    g_auto(GStrv) groups = g_key_file_get_groups(kf, &ngroups);
    for (gsize i = 0; i < ngroups; i++) {
        const char *g = groups[i];
        if (strcmp(g, "ckptfs") == 0)
            continue;
        if (!g_str_has_prefix(g, "job:")) {
            *why = g_strdup_printf("config=%s: unknown group [%s]", opt->config, g);
            return 2;
        }
        const char *job = g + 4;
        if (!ck_is_job_id(job, strlen(job))) {
            *why = g_strdup_printf("config=%s: [%s]: not a valid job id", opt->config, g);
            return 2;
        }
        g_auto(GStrv) jkeys = g_key_file_get_keys(kf, g, NULL, NULL);
        for (gsize k = 0; jkeys && jkeys[k]; k++) {
            if (strcmp(jkeys[k], "legacy_backend") != 0) {
                *why = g_strdup_printf("config=%s: [%s]: unknown key %s", opt->config, g, jkeys[k]);
                return 2;
            }
        }
        char *path = g_key_file_get_string(kf, g, "legacy_backend", NULL);
        if (path)
            g_hash_table_replace(opt->job_legacy_backends, (gpointer)ck_intern(job), path);
    }
    return 0;
}

static int parse_seconds(const char *name, const char *s, double *out, bool positive)
{
    char *end = NULL;
    errno = 0;
    double v = g_ascii_strtod(s, &end);
    if (errno || end == s || *end || v < 0 || (positive && v <= 0) || v > 1e9) {
        fprintf(stderr, "ckptfs: %s=%s: expected a %s number of seconds\n", name, s,
                positive ? "positive" : "non-negative");
        return 2;
    }
    *out = v;
    return 0;
}

static bool valid_views_name(const char *s)
{
    return *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
           !ck_is_layout_dir(s) && strlen(s) <= 255;
}

const char *const fs_live_keys[FS_LIVE_COUNT] = {
    [FS_LIVE_POLICY] = "policy",
    [FS_LIVE_LEGACY] = "legacy",
    [FS_LIVE_RESCAN] = "rescan",
    [FS_LIVE_TAG_ENV] = "tag_env",
};

int fs_live_key(const char *name)
{
    for (int k = 0; k < FS_LIVE_COUNT; k++)
        if (strcmp(name, fs_live_keys[k]) == 0)
            return k;
    return -1;
}

char *fs_live_parse(FsLiveKey k, const char *value, FsLive *live)
{
    switch (k) {
    case FS_LIVE_POLICY:
        if (strcmp(value, "enforce") != 0 && strcmp(value, "audit") != 0)
            return g_strdup("expected enforce or audit");
        live->audit = strcmp(value, "audit") == 0;
        return NULL;
    case FS_LIVE_LEGACY:
        if (strcmp(value, "ro") != 0 && strcmp(value, "rw") != 0)
            return g_strdup("expected ro or rw");
        live->legacy_rw = strcmp(value, "rw") == 0;
        return NULL;
    case FS_LIVE_RESCAN: {
        char *end = NULL;
        errno = 0;
        double v = g_ascii_strtod(value, &end);
        if (errno || end == value || *end || !(v > 0) || v > 1e9)
            return g_strdup("expected a positive number of seconds");
        live->rescan_s = v;
        return NULL;
    }
    case FS_LIVE_TAG_ENV:
        /* empty: no tag (a live mount can turn it off again) */
        if (strchr(value, '=') || strlen(value) > FS_LIVE_TAG_ENV_MAX)
            return g_strdup("expected an environment variable name");
        live->tag_env = *value ? ck_intern(value) : NULL;
        return NULL;
    default:
        return g_strdup("not a live setting");
    }
}

char *fs_live_format(FsLiveKey k, const FsLive *live)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    switch (k) {
    case FS_LIVE_POLICY:
        return g_strdup(live->audit ? "audit" : "enforce");
    case FS_LIVE_LEGACY:
        return g_strdup(live->legacy_rw ? "rw" : "ro");
    case FS_LIVE_RESCAN:
        return g_strdup(g_ascii_formatd(buf, sizeof buf, "%g", live->rescan_s));
    case FS_LIVE_TAG_ENV:
        return g_strdup(live->tag_env ? live->tag_env : "");
    default:
        return g_strdup("");
    }
}

/* The config key of live setting k. */
static size_t live_config_key(FsLiveKey k)
{
    for (size_t i = 0; i < G_N_ELEMENTS(config_keys); i++)
        if (strcmp(config_keys[i].key, fs_live_keys[k]) == 0)
            return i;
    g_assert_not_reached();
}

/* The live settings of opt's strings, from the defaults: 0, or 2 after
 * the line that says which is wrong (*why: that line). */
static int derive_live(const FsOptions *opt, FsLive *live, char **why)
{
    *live = (FsLive){.audit = false, .legacy_rw = false, .rescan_s = 2, .tag_env = NULL};
    for (int k = 0; k < FS_LIVE_COUNT; k++) {
        const char *v = config_value(opt, live_config_key((FsLiveKey)k));
        g_autofree char *bad = v ? fs_live_parse((FsLiveKey)k, v, live) : NULL;
        if (bad) {
            *why = g_strdup_printf("%s=%s: %s", fs_live_keys[k], v, bad);
            return 2;
        }
    }
    return 0;
}

bool fs_options_reread_live(const FsOptions *opt, FsLive *out, char **level, char **remount,
                            char **why)
{
    *remount = NULL;
    *why = NULL;
    *level = NULL;
    FsOptions cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.config = opt->config;
    cfg.job_legacy_backends = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    /* the command line wins over the file, as at mount */
    for (size_t i = 0; i < G_N_ELEMENTS(config_keys); i++)
        if (opt->from_command_line & (1u << i))
            *config_field(&cfg, i) = g_strdup(config_value(opt, i));
    int rc = opt->config ? load_config(&cfg, why) : 0;
    if (rc == 0)
        rc = derive_live(&cfg, out, why);
    g_autoptr(GString) rm = g_string_new(NULL);
    for (size_t i = 0; rc == 0 && i < G_N_ELEMENTS(config_keys); i++) {
        bool live = fs_live_key(config_keys[i].key) >= 0;
        if (live || g_strcmp0(config_value(&cfg, i), config_value(opt, i)) == 0)
            continue;
        if (strcmp(config_keys[i].key, "log_level") == 0)
            *level = g_strdup(config_value(&cfg, i) ? config_value(&cfg, i) : "info");
        else
            g_string_append_printf(rm, "%s%s", rm->len ? ", " : "", config_keys[i].key);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(config_keys); i++)
        g_free(*config_field(&cfg, i));
    g_hash_table_unref(cfg.job_legacy_backends);
    if (rc == 0 && rm->len)
        *remount = g_strdup(rm->str);
    return rc == 0;
}

int fs_options_parse(struct fuse_args *args, FsOptions *opt)
{
    opt->job_legacy_backends = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    opt->supervise = opt->supervise_file = -1;
    if (fuse_opt_parse(args, opt, fs_opt_spec, opt_proc) != 0) {
        if (!opt->parse_error)
            fprintf(stderr, "ckptfs: invalid options\n");
        return 2;
    }
    /* the command line's choice stands for the key, so that the file's is
     * neither read nor, at SIGHUP, taken for a change */
    if (opt->supervise >= 0)
        opt->supervise_cfg = strdup(opt->supervise ? "true" : "false");
    for (size_t i = 0; i < G_N_ELEMENTS(config_keys); i++)
        if (config_value(opt, i))
            opt->from_command_line |= 1u << i;
    if (opt->config) {
        g_autofree char *why = NULL;
        if (load_config(opt, &why)) {
            fprintf(stderr, "ckptfs: %s\n", why);
            return 2;
        }
    }
    if (opt->supervise_cfg && opt->supervise < 0) {
        /* the key file's own spelling of a boolean */
        if (strcmp(opt->supervise_cfg, "true") == 0 || strcmp(opt->supervise_cfg, "1") == 0) {
            opt->supervise_file = 1;
        } else if (strcmp(opt->supervise_cfg, "false") == 0 ||
                   strcmp(opt->supervise_cfg, "0") == 0) {
            opt->supervise_file = 0;
        } else {
            fprintf(stderr, "ckptfs: config=%s: supervise=%s: not true or false\n", opt->config,
                    opt->supervise_cfg);
            return 2;
        }
    }
    g_autofree char *bad_live = NULL;
    if (derive_live(opt, &opt->live, &bad_live)) {
        fprintf(stderr, "ckptfs: %s\n", bad_live);
        return 2;
    }
    const char *pt = opt->passthrough ? opt->passthrough : "auto";
    if (strcmp(pt, "auto") == 0) {
        opt->passthrough_off = false;
    } else if (strcmp(pt, "off") == 0) {
        opt->passthrough_off = true;
    } else {
        fprintf(stderr, "ckptfs: passthrough=%s: expected auto or off\n", pt);
        return 2;
    }
    const char *ring = opt->io_uring ? opt->io_uring : "auto";
    if (strcmp(ring, "auto") == 0 || strcmp(ring, "off") == 0) {
        opt->io_uring_off = strcmp(ring, "off") == 0;
    } else {
        fprintf(stderr, "ckptfs: io_uring=%s: expected auto or off\n", ring);
        return 2;
    }
    opt->io_uring_depth_n = CKPTFS_RING_DEPTH;
    if (opt->io_uring_depth) {
        char *end = NULL;
        unsigned long d = strtoul(opt->io_uring_depth, &end, 10);
        if (!*opt->io_uring_depth || *end || d < 1 || d > 64) {
            fprintf(stderr, "ckptfs: io_uring_depth=%s: expected 1 to 64 entries a queue\n",
                    opt->io_uring_depth);
            return 2;
        }
        opt->io_uring_depth_n = (unsigned)d;
    }
    if (opt->log_level && !log_level_known(opt->log_level)) {
        fprintf(stderr, "ckptfs: log_level=%s: expected error, warning, info or debug\n",
                opt->log_level);
        return 2;
    }
    if (opt->log && !*opt->log) {
        fprintf(stderr, "ckptfs: log=: expected journal, syslog, stderr or a file\n");
        return 2;
    }
    if (opt->job) {
        if (!ck_is_job_id(opt->job, strlen(opt->job))) {
            fprintf(stderr,
                    "ckptfs: job=%s: not a valid job id (1-128 of [A-Za-z0-9_.-], not "
                    "starting with '.')\n",
                    opt->job);
            return 2;
        }
        opt->job_interned = ck_intern(opt->job);
    }
    opt->identity_mode = opt->job ? CK_IDENTITY_JOB : CK_IDENTITY_NONE;
    if (opt->identity) {
        g_autofree char *why = NULL;
        if (!ck_identity_spec_check(opt->identity, &opt->identity_mode, &why)) {
            fprintf(stderr, "ckptfs: identity=%s: %s\n", opt->identity, why);
            return 2;
        }
    }
    if (opt->job && opt->identity) {
        fprintf(stderr, "ckptfs: job= and identity= exclude each other\n");
        return 2;
    }
    bool with_map =
        opt->identity_mode == CK_IDENTITY_CGROUP || opt->identity_mode == CK_IDENTITY_UID;
    if (opt->identity_map && (!with_map || !*opt->identity_map)) {
        fprintf(stderr, "ckptfs: identity_map=%s: %s\n", opt->identity_map,
                *opt->identity_map ? "only identity=cgroup and identity=uid read a map"
                                   : "expected a file");
        return 2;
    }
    if (!opt->identity_map && (opt->identity_mode == CK_IDENTITY_UID ||
                               (opt->identity && strcmp(opt->identity, "cgroup") == 0))) {
        fprintf(stderr,
                "ckptfs: identity=%s: the jobs are named by identity_map=FILE, which is not "
                "given\n",
                opt->identity);
        return 2;
    }
    opt->anonymous_deny = ck_identity_anonymous_denied_by_default(opt->identity_mode);
    if (opt->anonymous) {
        if (strcmp(opt->anonymous, "allow") != 0 && strcmp(opt->anonymous, "deny") != 0) {
            fprintf(stderr, "ckptfs: anonymous=%s: expected allow or deny\n", opt->anonymous);
            return 2;
        }
        opt->anonymous_deny = strcmp(opt->anonymous, "deny") == 0;
    }
    const char *views = opt->views ? opt->views : "_views";
    if (!valid_views_name(views)) {
        fprintf(stderr, "ckptfs: views=%s: expected one file name other than _state or _jobs\n",
                views);
        return 2;
    }
    opt->views_name = ck_intern(views);
    opt->entry_timeout_s = opt->attr_timeout_s = 60;
    if (opt->entry_timeout &&
        parse_seconds("entry_timeout", opt->entry_timeout, &opt->entry_timeout_s, false))
        return 2;
    if (opt->attr_timeout &&
        parse_seconds("attr_timeout", opt->attr_timeout, &opt->attr_timeout_s, false))
        return 2;
    if (opt->legacy_backend && !g_path_is_absolute(opt->legacy_backend)) {
        fprintf(stderr, "ckptfs: legacy_backend=%s: expected an absolute path\n",
                opt->legacy_backend);
        return 2;
    }
    if (opt->external_root && !g_path_is_absolute(opt->external_root)) {
        fprintf(stderr, "ckptfs: external_root=%s: expected an absolute path\n",
                opt->external_root);
        return 2;
    }
    if (!opt->max_read) {
        opt->max_read = CKPTFS_MAX_READ;
        g_autofree char *mr = g_strdup_printf("-omax_read=%u", opt->max_read);
        fuse_opt_add_arg(args, mr);
    }
    /* mount(8), findmnt and df show the backing directory as the source and
     * fuse.ckptfs as the type, as for every file system with a device */
    if (!opt->has_fsname && opt->backing_arg) {
        g_autofree char *abs = g_canonicalize_filename(opt->backing_arg, NULL);
        g_autoptr(GString) o = g_string_new("-ofsname=");
        for (const char *c = abs; *c; c++) {
            if (*c == ',' || *c == '\\')
                g_string_append_c(o, '\\'); /* fuse_opt splits -o at unescaped commas */
            g_string_append_c(o, *c);
        }
        fuse_opt_add_arg(args, o->str);
    }
    if (!opt->has_subtype) {
        fuse_opt_add_arg(args, "-osubtype=ckptfs");
        opt->fstype = g_strdup("fuse.ckptfs");
    }
    if (opt->no_default_permissions) {
        /* the daemon does not check every operation as the caller (link,
         * opens after setfsuid, the kernel's clear-setuid setattr): leaving
         * permissions to it would let a user reach what it may not */
        fprintf(stderr, "ckptfs: no_default_permissions is not supported: the kernel checks "
                        "permissions (default_permissions) on every mount with allow_other\n");
        return 2;
    }
    if (opt->allow_other && !opt->default_permissions) {
        fuse_opt_add_arg(args, "-odefault_permissions");
        opt->default_permissions = true;
    }
    return 0;
}

void fs_options_clear(FsOptions *opt)
{
    /* fuse_opt_parse allocates with malloc */
    free(opt->policy);
    free(opt->job);
    free(opt->identity);
    free(opt->identity_map);
    free(opt->anonymous);
    free(opt->legacy);
    free(opt->legacy_backend);
    free(opt->external_root);
    free(opt->views);
    free(opt->rescan);
    free(opt->config);
    free(opt->collision_log);
    free(opt->entry_timeout);
    free(opt->attr_timeout);
    free(opt->tag_env);
    free(opt->passthrough);
    free(opt->io_uring);
    free(opt->io_uring_depth);
    free(opt->log);
    free(opt->log_level);
    free(opt->supervise_cfg);
    g_free(opt->backing_arg);
    g_free(opt->mountpoint_arg);
    g_free(opt->fstype);
    if (opt->job_legacy_backends)
        g_hash_table_unref(opt->job_legacy_backends);
    memset(opt, 0, sizeof *opt);
}

/* ---- command lines a supervisor keeps ---- */

/* fuse_opt splits an -o string at commas not escaped by a backslash. */
static GPtrArray *split_opts(const char *s)
{
    GPtrArray *items = g_ptr_array_new_with_free_func(g_free);
    GString *cur = g_string_new(NULL);
    for (const char *c = s;; c++) {
        if (*c == '\\' && c[1]) {
            g_string_append_c(cur, *++c);
        } else if (*c == ',' || !*c) {
            g_ptr_array_add(items, g_string_free(cur, FALSE));
            if (!*c)
                break;
            cur = g_string_new(NULL);
        } else {
            g_string_append_c(cur, *c);
        }
    }
    return items;
}

static void append_escaped(GString *out, const char *item)
{
    for (const char *c = item; *c; c++) {
        if (*c == ',' || *c == '\\')
            g_string_append_c(out, '\\');
        g_string_append_c(out, *c);
    }
}

/* The options whose value is a file, and the values of `log` that are not. */
static bool names_a_file(const char *key, const char *value)
{
    if (strcmp(key, "log") == 0)
        return strcmp(value, "journal") != 0 && strcmp(value, "syslog") != 0 &&
               strcmp(value, "stderr") != 0;
    return strcmp(key, "config") == 0 || strcmp(key, "collision_log") == 0 ||
           strcmp(key, "identity_map") == 0;
}

static char *absolute_opts(const char *opts)
{
    g_autoptr(GPtrArray) items = split_opts(opts);
    GString *out = g_string_new(NULL);
    for (guint i = 0; i < items->len; i++) {
        const char *item = items->pdata[i];
        const char *eq = strchr(item, '=');
        g_autofree char *key = eq ? g_strndup(item, (gsize)(eq - item)) : NULL;
        g_autofree char *abs = NULL;
        if (key && eq[1] && names_a_file(key, eq + 1)) {
            g_autofree char *path = g_canonicalize_filename(eq + 1, NULL);
            abs = g_strconcat(key, "=", path, NULL);
        }
        if (i)
            g_string_append_c(out, ',');
        append_escaped(out, abs ? abs : item);
    }
    return g_string_free(out, FALSE);
}

char **fs_argv_absolute(char *const *argv)
{
    GPtrArray *out = g_ptr_array_new();
    for (int i = 0; argv[i]; i++) {
        const char *a = argv[i];
        if (i > 0 && strcmp(a, "-o") == 0 && argv[i + 1]) {
            g_ptr_array_add(out, g_strdup(a));
            g_ptr_array_add(out, absolute_opts(argv[++i]));
        } else if (i > 0 && g_str_has_prefix(a, "-o")) {
            g_autofree char *opts = absolute_opts(a + 2);
            g_ptr_array_add(out, g_strconcat("-o", opts, NULL));
        } else if (i > 0 && a[0] != '-' && *a) {
            g_ptr_array_add(out, g_canonicalize_filename(a, NULL));
        } else {
            g_ptr_array_add(out, g_strdup(a));
        }
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

char *fs_argv_options(char *const *argv)
{
    GString *out = g_string_new(NULL);
    for (int i = 1; argv[i]; i++) {
        const char *o = NULL;
        if (strcmp(argv[i], "-o") == 0 && argv[i + 1])
            o = argv[++i];
        else if (g_str_has_prefix(argv[i], "-o"))
            o = argv[i] + 2;
        if (o && *o)
            g_string_append_printf(out, "%s%s", out->len ? "," : "", o);
    }
    return g_string_free(out, FALSE);
}

char **fs_argv_with_options(char *const *argv, const char *opts)
{
    GPtrArray *out = g_ptr_array_new();
    g_ptr_array_add(out, g_strdup(argv[0]));
    if (opts && *opts) {
        g_ptr_array_add(out, g_strdup("-o"));
        g_ptr_array_add(out, g_strdup(opts));
    }
    for (int i = 1; argv[i]; i++) {
        if (strcmp(argv[i], "-o") == 0 && argv[i + 1])
            i++;
        else if (!g_str_has_prefix(argv[i], "-o"))
            g_ptr_array_add(out, g_strdup(argv[i]));
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}
