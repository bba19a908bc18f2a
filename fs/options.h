/* Command line and config file of the daemon (ckptfs(8) OPTIONS):
 *   ckptfs [-f] [-d] [-s] [-o opt[,opt...]] BACKING_DIR MOUNTPOINT
 * Our -o options are taken out of the argument vector; everything else
 * (allow_other, default_permissions, max_threads, fsname, ...) is left for
 * fuse_parse_cmdline / fuse_session_new.  config=FILE fills in what the
 * command line did not set.  fs_options_parse prints one line on stderr and
 * returns the exit code (2 usage, 1 environment) on a bad value. */
#pragma once
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <glib.h>
#include <stdbool.h>

#include "identity.h"

/* The settings a live mount changes without a remount (control.c applies
 * them, from _views/.control and from a reload of config=FILE), in the
 * order of fs_live_keys. */
typedef enum {
    FS_LIVE_POLICY,
    FS_LIVE_LEGACY,
    FS_LIVE_RESCAN,
    FS_LIVE_TAG_ENV,
    FS_LIVE_COUNT
} FsLiveKey;
extern const char *const fs_live_keys[FS_LIVE_COUNT];
#define FS_LIVE_TAG_ENV_MAX 255 /* bytes of a tag_env= name (the state memfd keeps it) */

typedef struct {
    bool audit;          /* policy=audit */
    bool legacy_rw;      /* legacy=rw */
    double rescan_s;     /* rescan=SECONDS */
    const char *tag_env; /* tag_env=VAR, interned; NULL (tag_env= empty): records carry no tag */
} FsLive;

typedef struct {
    /* our options; strings are g_malloc'ed, NULL when unset */
    char *policy;       /* "enforce" | "audit" */
    char *job;          /* job=ID */
    char *identity;     /* "env:VAR", "cgroup:PATTERN", "cgroup", "uid" */
    char *identity_map; /* identity_map=FILE */
    char *anonymous;    /* "allow" | "deny" */
    char *legacy;       /* "ro" | "rw" */
    char *legacy_backend;
    char *external_root;
    char *views;  /* views name, default "_views" */
    char *rescan; /* seconds, default 2 */
    char *config;
    char *collision_log;
    char *entry_timeout;
    char *attr_timeout;
    char *tag_env;        /* tag_env=VAR: each collision record's "tag" */
    char *passthrough;    /* "auto" | "off" */
    char *io_uring;       /* "auto" | "off" */
    char *io_uring_depth; /* entries (threads) per queue */
    char *log;            /* "journal" | "syslog" | "stderr" | FILE (log.h) */
    char *log_level;      /* "error" | "warning" | "info" | "debug" */
    char *supervise_cfg;  /* supervise= of config=FILE ("true" | "false"; the command
                           * line's supervise or nosupervise when it names one) */
    int no_policy;        /* benchmarking: skip every check */
    int no_default_permissions;
    int writeback;      /* -o writeback: the kernel writeback cache */
    int no_handles;     /* testing: behave as on a file system without handles */
    int supervise;      /* -o supervise 1, -o nosupervise 0, unset -1 (fs_options_parse) */
    int supervise_file; /* config=FILE's supervise=: 1, 0, unset -1 (a default that
                         * -o auto_unmount overrides, as the command line does) */

    /* derived */
    FsLive live;             /* as the options say at mount (a live mount's own: control.c) */
    guint from_command_line; /* bit i: config key i was given on the command line (it wins) */
    bool passthrough_off;
    bool io_uring_off;
    unsigned io_uring_depth_n;
    const char *job_interned;     /* ck_intern(job) or NULL */
    CkIdentityMode identity_mode; /* job=, identity= (CK_IDENTITY_NONE: neither) */
    bool anonymous_deny;          /* anonymous=, or the mode's default */
    const char *views_name;       /* interned */
    double entry_timeout_s;
    double attr_timeout_s;
    GHashTable *job_legacy_backends; /* interned job -> g_strdup path ([job:<ID>] groups) */
    bool allow_other;
    bool default_permissions;     /* the kernel checks permissions */
    unsigned max_read;            /* -o max_read=N (left for libfuse too), or ours */
    bool has_fsname, has_subtype; /* given: else the backing dir and "ckptfs" */
    char *fstype;                 /* the mount table's type of this mount: fuse.<subtype> */

    /* parsing state */
    int nonopts;
    int parse_error;

    /* positional */
    char *backing_arg;
    char *mountpoint_arg;
} FsOptions;

/* Parses argv into opt and leaves in args what libfuse must see (including
 * MOUNTPOINT).  Returns 0, or an exit code after printing one line. */
int fs_options_parse(struct fuse_args *args, FsOptions *opt);
void fs_options_clear(FsOptions *opt);
/* The usage text of our own options. */
void fs_options_help(void);
/* argv with every path in it absolute, against the current directory: the
 * two positional directories and the values of the -o options that name
 * files (config, collision_log, log).  A supervisor runs its daemons from
 * "/" (it must not keep a directory busy), with this vector. */
char **fs_argv_absolute(char *const *argv);
/* The -o option strings of argv ("-o a,b" and "-oa,b"), in order; and argv
 * with them replaced by one "-o opts" (opts NULL: removed). */
char *fs_argv_options(char *const *argv);
char **fs_argv_with_options(char *const *argv, const char *opts);

/* The setting named `name`, or -1. */
int fs_live_key(const char *name);
/* Parses `value` as setting k into *live (the others untouched): NULL, or
 * why it is not valid (g_free), e.g. "expected enforce or audit". */
char *fs_live_parse(FsLiveKey k, const char *value, FsLive *live);
/* Setting k of *live as text, as .control shows it and takes it (g_free). */
char *fs_live_format(FsLiveKey k, const FsLive *live);
/* The live settings as the configuration says now: the command line's,
 * else config=FILE read again (checked whole, as at mount), else the
 * defaults.  True, with in *level the log level when it changed (g_free;
 * NULL when not) and in *remount (g_free; NULL when none) the keys of
 * config=FILE that changed but need a remount; or false with *why
 * (g_free). */
bool fs_options_reread_live(const FsOptions *opt, FsLive *out, char **level, char **remount,
                            char **why);
