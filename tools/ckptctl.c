/* ckptctl: inspect a clink checkpoint directory without a mount (ckptctl(1)).
 * Every answer comes from core/ (catalog, resolve, stateroot, collision),
 * the same code the views use, so ckptctl and a mount cannot disagree. */
#include "ckptctl.h"
#include "intern.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "catalog.h"
#include "ckptfs-config.h"
#include "classify.h"
#include "collision.h"
#include "decimal.h"
#include "follow.h"
#include "json.h"
#include "layout.h"
#include "policy.h"
#include "resolve.h"
#include "restore_source.h"
#include "stateroot.h"

static const char synopsis[] =
    "Usage: ckptctl COMMAND [OPTION...] ARGS\n"
    "\n"
    "Inspect a clink checkpoint directory; see ckptctl(1) and the README.\n"
    "\n"
    "Commands:\n"
    "  jobs DIR                 each job: checkpoints, latest restorable, layout, bytes\n"
    "  resolve LOCATION [-c N]  what a restore of LOCATION (checkpoint N, else latest) reads\n"
    "  check DIR                hazards: shared-location, foreign-root, malformed, cut-short,\n"
    "                           orphan-root, not-a-job\n"
    "  state-root BASE JOB      compose a job's state root\n"
    "  unused DIR [--print0]    dry run: legacy and superseded state no restore reads, with sizes\n"
    "  prune DIR [--delete]     remove what unused lists (a dry run without --delete)\n"
    "  collisions MOUNT | --file FILE\n"
    "                           the collision log of a ckptfs mount, or a collision_log=FILE\n"
    "  set MOUNT [policy=enforce|audit] [legacy=ro|rw] [rescan=SECONDS]\n"
    "                           the settings of a live mount: print, or change them\n"
    "  status MOUNT             the mount's health: supervisor, daemon, versions, restarts\n"
    "  fixture DIR [--jobs J] [--checkpoints C] [--subtasks S] [--bytes B] [--legacy L]\n"
    "              [--seed X] [--force]\n"
    "                           write a realistic checkpoint directory\n"
    "  run [--dir DIR] [--policy enforce|audit] [--identity MODE] [--job ID]\n"
    "      [--tag-env VAR] [--collision-exit N] [--report FILE] [--baseline]\n"
    "      -- COMMAND [ARGS...]\n"
    "                           run COMMAND over a fresh mount; exit 3 (or N) on collisions\n"
    "\n"
    "Every command takes --json (one JSON document on stdout) and --help;\n"
    "ckptctl -V (--version) prints the version.\n"
    "Exit status: 0 success, 1 found what it looks for (collisions, hazards, a refusal,\n"
    "a checkpoint that is not restorable, unused state, collision records, an entry prune\n"
    "did not remove), 2 usage or I/O error (one line on stderr).\n";

int ckptctl_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    /* one line, whatever the message holds */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "ckptctl %s: %s\n", cmd, msg);
    return CKPTCTL_ERROR;
}

void ckptctl_add_u64(JsonBuilder *b, guint64 v)
{
    json_out_add_u64(b, v);
}

char *ckptctl_json_text(JsonBuilder *b)
{
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_out_text(root);
}

char *ckptctl_json_node_text(JsonNode *root)
{
    return json_out_text(root);
}

void ckptctl_print_json(JsonBuilder *b)
{
    g_autofree char *s = ckptctl_json_text(b);
    fputs(s, stdout);
    fflush(stdout);
}

void ckptctl_add_str_or_null(JsonBuilder *b, const char *name, const char *v)
{
    json_builder_set_member_name(b, name);
    if (v)
        ck_json_add_string(b, v);
    else
        json_builder_add_null_value(b);
}

void ckptctl_add_records(JsonBuilder *b, GPtrArray *recs)
{
    json_builder_set_member_name(b, "records");
    json_builder_begin_array(b);
    for (guint i = 0; i < recs->len; i++) {
        JsonNode *node = json_node_new(JSON_NODE_OBJECT);
        json_node_set_object(node, recs->pdata[i]);
        json_builder_add_value(b, node);
    }
    json_builder_end_array(b);
}

void ckptctl_add_hazards(JsonBuilder *b, GPtrArray *hazards, bool with_collision,
                         GHashTable *baseline)
{
    json_builder_set_member_name(b, "hazards");
    json_builder_begin_array(b);
    for (guint i = 0; i < hazards->len; i++) {
        const CkHazard *h = hazards->pdata[i];
        json_builder_begin_object(b);
        ckptctl_add_str_or_null(b, "kind", h->kind);
        json_builder_set_member_name(b, "jobs");
        json_builder_begin_array(b);
        for (guint k = 0; k < h->jobs->len; k++)
            ck_json_add_string(b, h->jobs->pdata[k]);
        json_builder_end_array(b);
        ckptctl_add_str_or_null(b, "path", h->path);
        ckptctl_add_str_or_null(b, "detail", h->detail);
        if (with_collision) {
            json_builder_set_member_name(b, "collision");
            json_builder_add_boolean_value(b, h->collision);
            g_autofree char *key = baseline ? ck_hazard_key(h) : NULL;
            json_builder_set_member_name(b, "baseline");
            json_builder_add_boolean_value(b, key && g_hash_table_contains(baseline, key));
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

char *ckptctl_hazard_jobs(const CkHazard *h)
{
    if (h->jobs->len == 0)
        return g_strdup("-");
    GString *js = g_string_new(NULL);
    for (guint k = 0; k < h->jobs->len; k++)
        g_string_append_printf(js, "%s%s", k ? "," : "", (char *)h->jobs->pdata[k]);
    return g_string_free(js, FALSE);
}

const char *ckptctl_member_str(JsonObject *o, const char *k)
{
    JsonNode *n = json_object_get_member(o, k);
    if (!n || JSON_NODE_TYPE(n) != JSON_NODE_VALUE || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

/* ---- options shared by the commands that read a directory ---- */

typedef struct {
    gboolean json;
    char *legacy_backend;
    char **external_roots;
    char *config;
    char *views;
    CkptctlProgress *progress; /* the progress line, NULL when none */
    CkCatalogProgress cat_progress;
} Common;

static void common_clear(Common *c)
{
    ckptctl_progress_free(c->progress);
    c->progress = NULL;
    g_free(c->legacy_backend);
    g_strfreev(c->external_roots);
    g_free(c->config);
    g_free(c->views);
}

/* Appends the shared options to entries[*n]; with_resolve adds those that
 * change what a restore reads. */
static void common_entries(Common *c, bool with_resolve, GOptionEntry *entries, guint *n)
{
    entries[(*n)++] = (GOptionEntry){
        "json", 0, 0, G_OPTION_ARG_NONE, &c->json, "Print one JSON document on stdout", NULL};
    if (with_resolve) {
        entries[(*n)++] =
            (GOptionEntry){"legacy-backend",
                           0,
                           0,
                           G_OPTION_ARG_FILENAME,
                           &c->legacy_backend,
                           "Where legacy markers' state lives (as the mount's legacy_backend=)",
                           "PATH"};
        entries[(*n)++] =
            (GOptionEntry){"external-root",
                           0,
                           0,
                           G_OPTION_ARG_FILENAME_ARRAY,
                           &c->external_roots,
                           "Absolute state roots under PREFIX are followed (repeatable)",
                           "PREFIX"};
        entries[(*n)++] = (GOptionEntry){
            "config",
            0,
            0,
            G_OPTION_ARG_FILENAME,
            &c->config,
            "A key file as the mount's config=FILE: [ckptfs] legacy_backend, external_root; "
            "[job:<ID>] legacy_backend",
            "FILE"};
    }
    entries[(*n)++] = (GOptionEntry){"views",
                                     0,
                                     0,
                                     G_OPTION_ARG_STRING,
                                     &c->views,
                                     "Name of a mount's views directory (default: what the mount "
                                     "says, else _views)",
                                     "NAME"};
    entries[*n] = (GOptionEntry){NULL, 0, 0, 0, NULL, NULL, NULL};
}

/* Fills opts from the options and --config; returns 0 or an exit code. */
static int common_resolve_options(const char *cmd, Common *c, CkResolveOptions *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->external_roots = g_ptr_array_new_with_free_func(g_free);
    opts->legacy_backends = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
    if (c->config) {
        g_autoptr(GKeyFile) kf = g_key_file_new();
        g_autoptr(GError) err = NULL;
        if (!g_key_file_load_from_file(kf, c->config, G_KEY_FILE_NONE, &err))
            return ckptctl_fail(cmd, "--config %s: %s", c->config, err->message);
        g_autofree char *lb = g_key_file_get_string(kf, "ckptfs", "legacy_backend", NULL);
        if (lb && !c->legacy_backend)
            opts->legacy_backend = g_steal_pointer(&lb);
        g_auto(GStrv) er = g_key_file_get_string_list(kf, "ckptfs", "external_root", NULL, NULL);
        for (char **p = er; p && *p; p++)
            g_ptr_array_add(opts->external_roots, g_strdup(*p));
        g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
        for (char **g = groups; *g; g++) {
            if (!g_str_has_prefix(*g, "job:"))
                continue;
            const char *job = *g + 4;
            if (!ck_is_job_id(job, strlen(job)))
                return ckptctl_fail(cmd, "--config %s: [%s] is not a job id", c->config, *g);
            char *v = g_key_file_get_string(kf, *g, "legacy_backend", NULL);
            if (v)
                g_hash_table_insert(opts->legacy_backends, (gpointer)ck_intern(job), v);
        }
    }
    if (c->legacy_backend) {
        g_free(opts->legacy_backend);
        opts->legacy_backend = g_strdup(c->legacy_backend);
    }
    for (char **p = c->external_roots; p && *p; p++) {
        if ((*p)[0] != '/')
            return ckptctl_fail(cmd, "--external-root %s: not an absolute path", *p);
        g_ptr_array_add(opts->external_roots, g_strdup(*p));
    }
    return 0;
}

static void resolve_options_clear(CkResolveOptions *o)
{
    g_free(o->legacy_backend);
    if (o->external_roots)
        g_ptr_array_unref(o->external_roots);
    if (o->legacy_backends)
        g_hash_table_unref(o->legacy_backends);
}

/* Parses a subcommand's options; returns -1 to go on, else an exit code. */
static int parse(const char *cmd, const char *params, const char *summary, GOptionEntry *entries,
                 int *argc, char ***argv, int nargs_min, int nargs_max)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_option_context_set_summary(ctx, summary);
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, argc, argv, &err))
        return ckptctl_fail(cmd, "%s (try ckptctl %s --help)", err->message, cmd);
    int n = *argc - 1;
    if (n < nargs_min || n > nargs_max)
        return ckptctl_fail(cmd, "expected %s (try ckptctl %s --help)", params, cmd);
    return -1;
}

/* ---- the progress line ---- */

struct CkptctlProgress {
    const char *cmd;
    GMutex lock; /* phase, counters, drawn, stop */
    GCond cond;
    const char *phase, *unit;
    const gint *done, *total;
    bool drawn, stop;
    gint64 start_us, delay_us;
    GThread *thread;
};

/* Under p->lock. */
static void progress_draw(CkptctlProgress *p)
{
    if (!p->phase)
        return;
    double secs = (double)(g_get_monotonic_time() - p->start_us) / 1e6;
    char count[64] = "";
    if (p->done && p->total && g_atomic_int_get(p->total) > 0)
        g_snprintf(count, sizeof count, " %d/%d %s",
                   MIN(g_atomic_int_get(p->done), g_atomic_int_get(p->total)),
                   g_atomic_int_get(p->total), p->unit);
    else if (p->done)
        g_snprintf(count, sizeof count, " %d %s", g_atomic_int_get(p->done), p->unit);
    /* \r and erase to the end of the line: one line, redrawn in place */
    fprintf(stderr, "\r\033[Kckptctl %s: %s%s (%.0f s)", p->cmd, p->phase, count, secs);
    fflush(stderr);
    p->drawn = true;
}

static gpointer progress_main(gpointer data)
{
    CkptctlProgress *p = data;
    g_mutex_lock(&p->lock);
    while (!p->stop) {
        gint64 now = g_get_monotonic_time();
        if (now - p->start_us >= p->delay_us)
            progress_draw(p);
        g_cond_wait_until(&p->cond, &p->lock, now + 250 * G_TIME_SPAN_MILLISECOND);
    }
    g_mutex_unlock(&p->lock);
    return NULL;
}

CkptctlProgress *ckptctl_progress_new(const char *cmd, bool json)
{
    if (json || !isatty(STDERR_FILENO))
        return NULL;
    CkptctlProgress *p = g_new0(CkptctlProgress, 1);
    p->cmd = cmd;
    g_mutex_init(&p->lock);
    g_cond_init(&p->cond);
    p->start_us = g_get_monotonic_time();
    const char *d = g_getenv("CKPTCTL_PROGRESS_DELAY_MS");
    p->delay_us = d ? g_ascii_strtoll(d, NULL, 10) * 1000 : G_USEC_PER_SEC;
    p->thread = g_thread_new("ckptctl-progress", progress_main, p);
    return p;
}

void ckptctl_progress_phase(CkptctlProgress *p, const char *phase, const gint *done,
                            const gint *total, const char *unit)
{
    if (!p)
        return;
    g_mutex_lock(&p->lock);
    p->phase = phase;
    p->done = done;
    p->total = total;
    p->unit = unit;
    if (p->delay_us <= 0)
        progress_draw(p); /* at once (tests): a fast phase is seen too */
    g_mutex_unlock(&p->lock);
}

void ckptctl_progress_free(CkptctlProgress *p)
{
    if (!p)
        return;
    g_mutex_lock(&p->lock);
    p->stop = true;
    g_cond_signal(&p->cond);
    g_mutex_unlock(&p->lock);
    g_thread_join(p->thread);
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    g_mutex_clear(&p->lock);
    g_cond_clear(&p->cond);
    g_free(p);
}

/* ck_catalog_open; with CKPTCTL_STATS set, also what it cost, on stderr.
 * The catalog reads what it can (a mount must go on past one unreadable
 * directory); a report must not: an unreadable _jobs/<J> or _state/<J>
 * would show as a job without markers or without state
 * (report_unreadable: the catalog's workers note it as they go). */
static CkCatalog *catalog_with_stats(const char *cmd, const char *dir, Common *c,
                                     const CkResolveOptions *ro, int *rc)
{
    CkCatalogOptions co = {.resolve = *ro,
                           .views_name = c->views ? c->views : "_views",
                           .progress = &c->cat_progress,
                           .report_unreadable = true};
    c->progress = ckptctl_progress_new(cmd, c->json);
    ckptctl_progress_phase(c->progress, "reading the markers of", &c->cat_progress.jobs_done,
                           &c->cat_progress.jobs_total, "jobs");
    g_autoptr(GError) err = NULL;
    /* CKPTCTL_STATS=1: how long the catalog took and how much heap it holds
     * (the budget: 1 KiB of catalog memory per marker), on stderr. */
    bool stats = g_getenv("CKPTCTL_STATS") != NULL;
    struct mallinfo2 before = stats ? mallinfo2() : (struct mallinfo2){0};
    gint64 t0 = g_get_monotonic_time();
    CkCatalog *cat = ck_catalog_open(dir, &co, &err);
    if (!cat) {
        ckptctl_progress_free(g_steal_pointer(&c->progress)); /* the error on a line of its own */
        *rc = ckptctl_fail(cmd, "%s", err->message);
        return NULL;
    }
    g_autofree char *where = NULL;
    int uerr = ck_catalog_unreadable(cat, &where);
    if (uerr) {
        ckptctl_progress_free(g_steal_pointer(&c->progress));
        ck_catalog_free(cat);
        g_autofree char *path = g_build_filename(dir, where, NULL);
        *rc = ckptctl_fail(cmd, "%s: %s", path, g_strerror(-uerr));
        return NULL;
    }
    if (stats) {
        gint64 t1 = g_get_monotonic_time();
        struct mallinfo2 after = mallinfo2();
        guint nm = ck_catalog_n_markers(cat);
        gint64 used =
            (gint64)(after.uordblks + after.hblkhd) - (gint64)(before.uordblks + before.hblkhd);
        fprintf(
            stderr,
            "ckptctl stats: catalog of %u jobs, %u markers opened in %.3f s; heap %" G_GINT64_FORMAT
            " bytes (%.0f per marker)\n",
            ck_catalog_n_jobs(cat), nm, (double)(t1 - t0) / 1e6, used,
            nm ? (double)used / nm : 0.0);
        g_autoptr(GPtrArray) changed = g_ptr_array_new();
        ck_catalog_rescan(cat, changed);
        gint64 t2 = g_get_monotonic_time();
        fprintf(stderr, "ckptctl stats: a rescan that found %u changed jobs took %.3f s\n",
                changed->len, (double)(t2 - t1) / 1e6);
        g_autoptr(GPtrArray) names = ck_catalog_job_names(cat);
        if (names->len) {
            ck_catalog_refresh_job(cat, names->pdata[0]);
            fprintf(stderr, "ckptctl stats: refresh of one job took %.3f s\n",
                    (double)(g_get_monotonic_time() - t2) / 1e6);
        }
    }
    return cat;
}

/* The catalog of a jobs, check or unused run, once the command is done
 * with it: not freed block by block but left for the process's exit to
 * drop (about a million small blocks at 10,000 jobs x 10 markers: 0.08 to
 * 0.1 s on one core, after the output is out, for nothing).  It stays
 * reachable from here, so a leak checker does not count it (git's UNLEAK
 * does the same).  A second command in the same process frees the first's. */
static CkCatalog *catalog_left_to_exit;

static void catalog_done(CkCatalog *cat)
{
    if (catalog_left_to_exit)
        ck_catalog_free(catalog_left_to_exit);
    catalog_left_to_exit = cat;
}

typedef CkCatalog CkptctlCatalog;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkptctlCatalog, catalog_done)

/* 0 when dir is a checkpoint directory (ck_is_checkpoint_dir), else the
 * exit code after one line: /etc has no jobs, hazards or unused state, and
 * saying so would pass a wrong path for a clean directory.  A directory
 * that cannot be opened is left to the catalog, which says why. */
static int checkpoint_dir_or_fail(const char *cmd, const char *dir, const char *views)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int is = ck_is_checkpoint_dir(fd, views ? views : "_views");
    close(fd);
    if (is != 0)
        return 0;
    return ckptctl_fail(cmd,
                        "%s: not a checkpoint directory (no _jobs, no _state, no v<G> or <S> "
                        "directory in it)",
                        dir);
}

/* The start of jobs, check, unused and prune: their options (into c, and
 * `extra`'s, NULL-terminated, may be NULL), then the catalog of DIR (the
 * one argument).  NULL with *rc the exit code when the command ends here. */
static CkCatalog *open_catalog(const char *cmd, const char *summary, const GOptionEntry *extra,
                               Common *c, int *argc, char ***argv, int *rc)
{
    GOptionEntry entries[12];
    guint n = 0;
    for (; extra && extra->long_name; extra++)
        entries[n++] = *extra;
    common_entries(c, true, entries, &n);
    *rc = parse(cmd, "DIR", summary, entries, argc, argv, 1, 1);
    if (*rc >= 0)
        return NULL;
    /* DIR may be a mount: its views are not part of the directory */
    char *views = ckptctl_views_of((*argv)[1], c->views);
    g_free(c->views);
    c->views = views;
    *rc = checkpoint_dir_or_fail(cmd, (*argv)[1], c->views);
    if (*rc)
        return NULL;
    CkResolveOptions ro;
    *rc = common_resolve_options(cmd, c, &ro);
    CkCatalog *cat = *rc ? NULL : catalog_with_stats(cmd, (*argv)[1], c, &ro, rc);
    resolve_options_clear(&ro); /* the catalog keeps its own copy */
    return cat;
}

/* ---- jobs ---- */

typedef struct {
    CkCatalog *cat;
    GPtrArray *snaps;
    guint64 *bytes;
    gint next;
} BytesWork;

static gpointer bytes_worker(gpointer p)
{
    BytesWork *w = p;
    for (;;) {
        gint i = g_atomic_int_add(&w->next, 1);
        if (i >= (gint)w->snaps->len)
            return NULL;
        w->bytes[i] = ck_catalog_job_bytes(w->cat, w->snaps->pdata[i]);
    }
}

/* Bytes of every job: a walk of its state, on ck_walk_threads() threads (independent
 * jobs, read-only snapshots). */
static guint64 *job_bytes_parallel(CkCatalog *cat, GPtrArray *snaps, CkptctlProgress *pl)
{
    BytesWork w = {cat, snaps, g_new0(guint64, snaps->len + 1), 0};
    gint total = (gint)snaps->len;
    ckptctl_progress_phase(pl, "sizing the state of", &w.next, &total, "jobs");
    guint n = snaps->len < 64 ? 1 : ck_walk_threads();
    GThread *th[CK_WALK_THREADS_MAX];
    for (guint i = 1; i < n; i++)
        th[i] = g_thread_new("ckptctl-bytes", bytes_worker, &w);
    bytes_worker(&w);
    for (guint i = 1; i < n; i++)
        g_thread_join(th[i]);
    return w.bytes;
}

/* v in decimal, after out */
static void append_u64(GString *out, guint64 v)
{
    char d[CK_U64_DIGITS];
    const char *p = ck_u64_digits(d + sizeof d, v);
    g_string_append_len(out, p, d + sizeof d - p);
}

/* A JSON string as json-glib writes it: a job id or a layout word is
 * printable ASCII with nothing to escape and goes in as it is; anything
 * else goes through json-glib itself. */
static void append_json_string(GString *out, const char *v)
{
    const char *p = v;
    while (*p > 0x1f && *p < 0x7f && *p != '"' && *p != '\\')
        p++;
    if (*p == '\0') {
        g_string_append_c(out, '"');
        g_string_append_len(out, v, p - v);
        g_string_append_c(out, '"');
        return;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    ck_json_add_string(b, v);
    g_autoptr(JsonNode) n = json_builder_get_root(b);
    g_autofree char *s = ck_json_text(n, false);
    g_string_append(out, s);
}

/* The document of jobs --json, written out directly: byte for byte what
 * ckptctl_json_text prints for the same builder (json-glib's pretty
 * printer, indent 2, "[]" for an empty array), without the 150,000 nodes
 * a builder makes, prints and frees at 10,000 jobs (0.08 s on one core).
 * tests/tools check it against json-glib's own output. */
static char *jobs_json_text(GPtrArray *snaps, const guint64 *bytes)
{
    GString *o = g_string_sized_new(64 + (gsize)snaps->len * 256);
    g_string_append(o, "{\n  \"jobs\" : [");
    for (guint i = 0; i < snaps->len; i++) {
        const CkJobInfo *j = snaps->pdata[i];
        g_string_append(o, i ? ",\n    {\n      \"job\" : " : "\n    {\n      \"job\" : ");
        append_json_string(o, j->job);
        g_string_append(o, ",\n      \"checkpoints\" : [");
        for (guint k = 0; k < j->checkpoints->len; k++) {
            g_string_append(o, "\n        ");
            append_u64(o, ((CkCheckpointInfo *)j->checkpoints->pdata[k])->n);
            if (k + 1 < j->checkpoints->len)
                g_string_append_c(o, ',');
        }
        g_string_append(o, j->checkpoints->len ? "\n      ],\n      \"latest\" : "
                                               : "],\n      \"latest\" : ");
        if (j->has_latest)
            append_u64(o, j->latest);
        else
            g_string_append(o, "null");
        g_string_append(o, ",\n      \"layout\" : ");
        append_json_string(o, j->layout);
        g_string_append(o, ",\n      \"bytes\" : ");
        append_u64(o, bytes[i]);
        g_string_append(o, "\n    }");
    }
    g_string_append(o, snaps->len ? "\n  ]\n}\n" : "]\n}\n");
    return g_string_free(o, FALSE);
}

static int cmd_jobs(int argc, char **argv)
{
    Common c = {0};
    int rc;
    g_autoptr(CkptctlCatalog) cat =
        open_catalog("jobs",
                     "Each job of DIR: its checkpoints, the latest restorable one, its layout "
                     "(namespaced, legacy or mixed) and the bytes of state its restorable "
                     "checkpoints read (regular files, st_size, each counted once).",
                     NULL, &c, &argc, &argv, &rc);
    if (!cat) {
        common_clear(&c);
        return rc;
    }
    g_autoptr(GPtrArray) names = ck_catalog_job_names(cat);
    g_autoptr(GPtrArray) snaps = g_ptr_array_new_with_free_func((GDestroyNotify)ck_job_info_unref);
    for (guint i = 0; i < names->len; i++) {
        CkJobInfo *j = ck_catalog_get_job(cat, names->pdata[i]);
        if (j)
            g_ptr_array_add(snaps, j);
    }
    g_autofree guint64 *bytes = job_bytes_parallel(cat, snaps, c.progress);
    ckptctl_progress_free(g_steal_pointer(&c.progress)); /* before the table goes out */
    if (c.json) {
        g_autofree char *text = jobs_json_text(snaps, bytes);
        fputs(text, stdout);
        fflush(stdout);
        common_clear(&c);
        return CKPTCTL_OK;
    }
    static const char *const jcols[] = {"JOB", "CHECKPOINTS", ">LATEST", "LAYOUT", ">BYTES", NULL};
    g_autoptr(CkptctlTable) t = ckptctl_table_new(jcols);
    for (guint i = 0; i < snaps->len; i++) {
        const CkJobInfo *j = snaps->pdata[i];
        /* a job may have thousands, which would make the column as wide
         * for every job: the cell names the first ones and the count,
         * --json every one (ckptctl(1) states the rule) */
        g_autoptr(GString) cps = g_string_new(NULL);
        for (guint k = 0; k < j->checkpoints->len; k++) {
            if (k == 6 && j->checkpoints->len > 7) {
                g_string_append_printf(cps, ",...(%u)", j->checkpoints->len);
                break;
            }
            g_string_append_printf(cps, "%s%" G_GUINT64_FORMAT, k ? "," : "",
                                   (guint64)((CkCheckpointInfo *)j->checkpoints->pdata[k])->n);
        }
        g_autofree char *latest = j->has_latest
                                      ? g_strdup_printf("%" G_GUINT64_FORMAT, (guint64)j->latest)
                                      : g_strdup("-");
        g_autofree char *bs = g_strdup_printf("%" G_GUINT64_FORMAT, bytes[i]);
        ckptctl_table_row(t, j->job, cps->str, latest, j->layout, bs);
    }
    ckptctl_table_print(t, NULL);
    common_clear(&c);
    return CKPTCTL_OK;
}

/* ---- resolve ---- */

static char *joined(const char *dir, const char *rel)
{
    return ck_restore_path(dir, rel);
}

/* "key: a, b" or "key: -", as ck_restore_describe writes lists */
static void add_list(GString *t, const char *key, const GPtrArray *a)
{
    g_string_append_printf(t, "%s:", key);
    for (guint i = 0; i < a->len; i++)
        g_string_append_printf(t, "%s%s", i ? ", " : " ", (char *)a->pdata[i]);
    g_string_append(t, a->len ? "\n" : " -\n");
}

static int cmd_resolve(int argc, char **argv)
{
    Common c = {0};
    char *cp_arg = NULL;
    GOptionEntry entries[8];
    guint n = 0;
    entries[n++] = (GOptionEntry){"checkpoint",
                                  'c',
                                  0,
                                  G_OPTION_ARG_STRING,
                                  &cp_arg,
                                  "Checkpoint N (default: the latest restorable)",
                                  "N"};
    common_entries(&c, true, entries, &n);
    int rc =
        parse("resolve", "LOCATION",
              "What a restore of LOCATION reads (ckptctl(1), COMMANDS): a job's marker directory "
              "<dir>/_jobs/<J>, a checkpoint directory, or a state backend URI.  status is "
              "ok (one job's marker), refused (several jobs: candidates names each job's "
              "marker directory) or as-given; a job's marker directory without a marker for N "
              "is as-given with a warning (the restore would read the marker directory itself "
              "as state).  Paths are joined to the location as given.  "
              "Exit 0 for ok and as-given, 1 for refused and for a checkpoint that is not "
              "restorable (error says why), 2 for usage or I/O errors.",
              entries, &argc, &argv, 1, 1);
    if (rc >= 0) {
        g_free(cp_arg);
        common_clear(&c);
        return rc;
    }
    guint64 cpn = 0;
    bool latest = cp_arg == NULL;
    if (cp_arg && !ck_parse_u64(cp_arg, strlen(cp_arg), &cpn)) {
        rc = ckptctl_fail("resolve", "-c %s: not a checkpoint number", cp_arg);
        g_free(cp_arg);
        common_clear(&c);
        return rc;
    }
    g_free(cp_arg);
    CkResolveOptions ro;
    rc = common_resolve_options("resolve", &c, &ro);
    if (rc) {
        resolve_options_clear(&ro);
        common_clear(&c);
        return rc;
    }
    const char *loc = argv[1];
    g_autoptr(CkResolution) res = NULL;
    int e = ck_resolve(loc, latest, cpn, &ro, &res);
    resolve_options_clear(&ro);
    if (e < 0) {
        common_clear(&c);
        return ckptctl_fail("resolve", "%s: %s", loc, g_strerror(-e));
    }
    const CkRestore *r = res->restore;
    bool local = r && ck_restore_root_relative(r);
    g_autofree char *root = NULL;
    if (r && r->root)
        root = local ? joined(res->dir, r->root) : g_strdup(r->root);
    else if (res->status == CK_RESOLVE_AS_GIVEN)
        root = g_strdup(loc);
    g_autofree char *marker = r ? joined(res->dir, r->marker) : NULL;
    g_autoptr(GPtrArray) reads = g_ptr_array_new_with_free_func(g_free);
    if (r) {
        for (guint i = 0; i < r->reads->len; i++)
            g_ptr_array_add(reads, local ? joined(res->dir, r->reads->pdata[i])
                                         : g_strdup(r->reads->pdata[i]));
    } else if (res->status == CK_RESOLVE_AS_GIVEN) {
        g_ptr_array_add(reads, g_strdup(loc));
    }
    const char *error = r && r->error ? r->error : res->error;
    int exit_code =
        res->status == CK_RESOLVE_REFUSED || (r && !r->restorable) ? CKPTCTL_FOUND : CKPTCTL_OK;
    if (c.json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        ckptctl_add_str_or_null(b, "status", ck_resolve_status_name(res->status));
        ckptctl_add_str_or_null(b, "job", r ? r->job : NULL);
        json_builder_set_member_name(b, "checkpoint");
        if (r)
            ckptctl_add_u64(b, r->checkpoint);
        else if (!latest)
            ckptctl_add_u64(b, cpn);
        else
            json_builder_add_null_value(b);
        ckptctl_add_str_or_null(b, "class", r ? ck_marker_class_name(r->cls) : NULL);
        ckptctl_add_str_or_null(b, "root", root);
        json_builder_set_member_name(b, "generation");
        if (r && r->has_generation)
            ckptctl_add_u64(b, r->generation);
        else
            json_builder_add_null_value(b);
        ckptctl_add_str_or_null(b, "generation_source", r ? ck_restore_generation_source(r) : NULL);
        json_builder_set_member_name(b, "participants");
        if (r) {
            json_builder_begin_array(b);
            for (guint i = 0; i < r->participants->len; i++)
                json_builder_add_int_value(b, g_array_index(r->participants, guint32, i));
            json_builder_end_array(b);
        } else {
            json_builder_add_null_value(b);
        }
        ckptctl_add_str_or_null(b, "marker", marker);
        json_builder_set_member_name(b, "reads");
        json_builder_begin_array(b);
        for (guint i = 0; i < reads->len; i++)
            ck_json_add_string(b, reads->pdata[i]);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "candidates");
        if (res->candidates) {
            json_builder_begin_array(b);
            for (guint i = 0; i < res->candidates->len; i++)
                ck_json_add_string(b, res->candidates->pdata[i]);
            json_builder_end_array(b);
        } else {
            json_builder_add_null_value(b);
        }
        ckptctl_add_str_or_null(b, "error", error);
        ckptctl_add_str_or_null(b, "warning", res->warning);
        /* the flag of a root that is another job's, and the marker's keys
         * no restore reads ("key=value", in file order) */
        ckptctl_add_str_or_null(b, "foreign_root", r ? r->foreign_job : NULL);
        json_builder_set_member_name(b, "unknown");
        json_builder_begin_array(b);
        for (guint i = 0; res->unknown && i < res->unknown->len; i++) {
            const CkMarkerKv *kv = res->unknown->pdata[i];
            g_autofree char *text = g_strconcat(kv->key, "=", kv->value, NULL);
            ck_json_add_string(b, text);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
        ckptctl_print_json(b);
    } else {
        /* the words of the views' restore file (ck_restore_describe) */
        g_autoptr(GString) t = g_string_new(NULL);
        g_string_append_printf(t, "status: %s\n", ck_resolve_status_name(res->status));
        if (r) {
            g_string_append_printf(t, "job: %s\n", r->job);
            ck_restore_describe(t, r, res->dir, NULL, res->unknown);
        } else {
            g_string_append_printf(t, "root: %s\n", root ? root : "-");
            add_list(t, "reads", reads);
            if (res->candidates)
                add_list(t, "candidates", res->candidates);
            g_autofree char *e = error ? ck_restore_escape(error) : NULL;
            g_string_append_printf(t, "error: %s\n", e ? e : "-");
            if (res->warning)
                g_string_append_printf(t, "warning: %s\n", res->warning);
        }
        fputs(t->str, stdout);
    }
    /* the refusal (or why it is not restorable) once: in the text above, or
     * on stderr when stdout holds the JSON document */
    if (exit_code == CKPTCTL_FOUND && error && c.json)
        fprintf(stderr, "ckptctl resolve: %s\n", error);
    /* as-given is what a restore does, yet a mistyped -c deserves a word */
    if (res->warning) { /* like the refusal: in the text, or on stderr beside the JSON */
        if (c.json)
            fprintf(stderr, "ckptctl resolve: warning: %s\n", res->warning);
    } else if (!latest && res->status == CK_RESOLVE_AS_GIVEN &&
               g_file_test(loc, G_FILE_TEST_IS_DIR))
        fprintf(stderr,
                "ckptctl resolve: no marker for checkpoint %" G_GUINT64_FORMAT
                " in %s: a restore reads the location as given\n",
                cpn, loc);
    common_clear(&c);
    return exit_code;
}

/* ---- check ---- */

static int cmd_check(int argc, char **argv)
{
    Common c = {0};
    int rc;
    g_autoptr(CkptctlCatalog) cat =
        open_catalog("check",
                     "Every hazard of DIR: shared-location (two jobs' restores read one "
                     "state location: one root and generation, whatever their subtasks), "
                     "foreign-root, malformed (also unreadable markers), cut-short, "
                     "orphan-root (informational), not-a-job.  Paths are relative to DIR.  Exit 1 "
                     "when a collision (shared-location, foreign-root) or a malformed marker is "
                     "found, else 0.",
                     NULL, &c, &argc, &argv, &rc);
    if (!cat) {
        common_clear(&c);
        return rc;
    }
    ckptctl_progress_phase(c.progress, "looking for hazards", NULL, NULL, NULL);
    g_autoptr(GPtrArray) hz = ck_catalog_hazards(cat);
    ckptctl_progress_free(g_steal_pointer(&c.progress)); /* before the table goes out */
    guint collisions = 0;
    bool malformed = false;
    for (guint i = 0; i < hz->len; i++) {
        const CkHazard *h = hz->pdata[i];
        collisions += h->collision;
        malformed |= strcmp(h->kind, "malformed") == 0;
    }
    if (c.json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        ckptctl_add_hazards(b, hz, false, NULL);
        json_builder_set_member_name(b, "collisions");
        json_builder_add_int_value(b, collisions);
        json_builder_end_object(b);
        ckptctl_print_json(b);
    } else {
        static const char *const cols[] = {"KIND", "JOBS", "PATH", "DETAIL", NULL};
        g_autoptr(CkptctlTable) t = ckptctl_table_new(cols);
        for (guint i = 0; i < hz->len; i++) {
            const CkHazard *h = hz->pdata[i];
            g_autofree char *js = ckptctl_hazard_jobs(h);
            ckptctl_table_row(t, h->kind, js, h->path, h->detail);
        }
        if (hz->len)
            ckptctl_table_print(t, NULL);
        printf("%u hazard(s), %u collision(s)\n", hz->len, collisions);
    }
    common_clear(&c);
    return collisions || malformed ? CKPTCTL_FOUND : CKPTCTL_OK;
}

/* ---- state-root ---- */

static int cmd_state_root(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print {\"base\",\"job\",\"state_root\"}", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc = parse("state-root", "BASE JOB",
                   "A job's state root (README, \"The checkpoint directory\"): <base>/_state/<job> "
                   "for paths and "
                   "file:// URIs, the segment before any ?query and into local=, URIs naming no "
                   "location unchanged.",
                   entries, &argc, &argv, 2, 2);
    if (rc >= 0)
        return rc;
    const char *base = argv[1], *job = argv[2];
    if (!ck_is_job_id(job, strlen(job)))
        return ckptctl_fail("state-root",
                            "%s: not a job id (1 to 128 of [A-Za-z0-9_.-], not "
                            "starting with '.')",
                            job);
    if (base[0] == '\0')
        return ckptctl_fail("state-root", "BASE is empty");
    g_autofree char *root = ck_job_state_root(base, job);
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        ckptctl_add_str_or_null(b, "base", base);
        ckptctl_add_str_or_null(b, "job", job);
        ckptctl_add_str_or_null(b, "state_root", root);
        json_builder_end_object(b);
        ckptctl_print_json(b);
    } else {
        printf("%s\n", root);
    }
    return CKPTCTL_OK;
}

/* ---- unused ---- */

static void add_unused_list(JsonBuilder *b, GPtrArray *un)
{
    json_builder_begin_array(b);
    for (guint i = 0; i < un->len; i++) {
        const CkUnused *u = un->pdata[i];
        json_builder_begin_object(b);
        ckptctl_add_str_or_null(b, "path", u->path);
        ckptctl_add_str_or_null(b, "reason", u->reason);
        json_builder_set_member_name(b, "bytes");
        ckptctl_add_u64(b, u->bytes);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static int cmd_unused(int argc, char **argv)
{
    Common c = {0};
    gboolean print0 = FALSE;
    const GOptionEntry extra[] = {
        {"print0", '0', 0, G_OPTION_ARG_NONE, &print0,
         "Print only the paths (DIR/PATH), each followed by a NUL byte, for xargs -0", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc;
    g_autoptr(CkptctlCatalog) cat =
        open_catalog("unused",
                     "Dry run, deletes nothing: the legacy v<G> and bare <S> directories no "
                     "restorable marker reads (legacy-unread), and _state/<J>/v<G> generations "
                     "older than every restorable marker of J (superseded-generation).  Sizes are "
                     "du-like (st_blocks * 512, each inode once).  ckptctl prune --delete removes "
                     "exactly these.  Exit 1 when something is unused, 0 when nothing is.",
                     extra, &c, &argc, &argv, &rc);
    if (cat && print0 && c.json) {
        catalog_done(g_steal_pointer(&cat));
        rc = ckptctl_fail("unused", "--print0 and --json exclude each other");
    }
    if (!cat) {
        common_clear(&c);
        return rc;
    }
    ckptctl_progress_phase(c.progress, "sizing what is unused", NULL, NULL, NULL);
    g_autoptr(GPtrArray) un = ck_catalog_unused(cat);
    ckptctl_progress_free(g_steal_pointer(&c.progress)); /* before the table goes out */
    guint64 total = 0;
    for (guint i = 0; i < un->len; i++)
        total += ((CkUnused *)un->pdata[i])->bytes;
    if (print0) {
        /* joined to DIR as given, as find(1) prints what it finds */
        for (guint i = 0; i < un->len; i++) {
            g_autofree char *p = g_build_filename(argv[1], ((CkUnused *)un->pdata[i])->path, NULL);
            fwrite(p, 1, strlen(p) + 1, stdout);
        }
        fflush(stdout);
    } else if (c.json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "unused");
        add_unused_list(b, un);
        json_builder_set_member_name(b, "bytes");
        ckptctl_add_u64(b, total);
        json_builder_end_object(b);
        ckptctl_print_json(b);
    } else {
        static const char *const ucols[] = {"PATH", "REASON", ">BYTES", NULL};
        g_autoptr(CkptctlTable) t = ckptctl_table_new(ucols);
        for (guint i = 0; i < un->len; i++) {
            const CkUnused *u = un->pdata[i];
            g_autofree char *bs = g_strdup_printf("%" G_GUINT64_FORMAT, u->bytes);
            ckptctl_table_row(t, u->path, u->reason, bs);
        }
        if (un->len)
            ckptctl_table_print(t, NULL);
        printf("%u unused, %" G_GUINT64_FORMAT " bytes (nothing deleted)\n", un->len, total);
    }
    common_clear(&c);
    return un->len ? CKPTCTL_FOUND : CKPTCTL_OK;
}

/* ---- prune ---- */

/* What became of one entry of the unused list. */
typedef struct {
    const CkUnused *u;
    const char *result; /* "removed", "would-remove", or why it was kept: "needed", "gone",
                           "not-a-directory", "error" */
    char *detail;       /* NULL when there is nothing to add */
    guint64 bytes;      /* freed; in a dry run what unused measured */
} Pruned;

static void pruned_clear(gpointer p)
{
    g_free(((Pruned *)p)->detail);
}

static const char *recheck_result(CkRecheck rc)
{
    switch (rc) {
    case CK_RECHECK_UNUSED:
        return "removed";
    case CK_RECHECK_NEEDED:
        return "needed";
    case CK_RECHECK_GONE:
        return "gone";
    case CK_RECHECK_NOT_DIR:
        return "not-a-directory";
    case CK_RECHECK_ERROR:
    default:
        return "error";
    }
}

/* Re-checks each entry just before it goes, then removes it. */
static void prune_entries(CkCatalog *cat, CkCatalogFollow *f, GPtrArray *un, GArray *out,
                          CkptctlProgress *pl)
{
    gint done = 0, total = (gint)un->len;
    ckptctl_progress_phase(pl, "removing", &done, &total, "entries");
    for (guint i = 0; i < un->len; i++, g_atomic_int_inc(&done)) {
        const CkUnused *u = un->pdata[i];
        Pruned p = {.u = u};
        const char *reason = NULL;
        CkRecheck rc = ck_catalog_unused_recheck(f, u->path, &reason, &p.detail);
        p.result = recheck_result(rc);
        if (rc == CK_RECHECK_UNUSED) {
            g_autofree char *where = NULL;
            int e = ckptctl_remove_tree(ck_catalog_dirfd(cat), u->path, &p.bytes, &where);
            if (e == -ENOENT && where && strcmp(where, u->path) == 0) {
                p.result = "gone"; /* between the re-check and the removal */
            } else if (e) {
                p.result = "error";
                p.detail =
                    g_strdup_printf("%s: %s", where ? where : u->path,
                                    e == -EXDEV ? "a mount point, not entered" : g_strerror(-e));
            }
        }
        g_array_append_val(out, p);
    }
}

static int cmd_prune(int argc, char **argv)
{
    Common c = {0};
    gboolean del = FALSE;
    const GOptionEntry extra[] = {
        {"delete", 0, 0, G_OPTION_ARG_NONE, &del,
         "Remove them (without it, a dry run that deletes nothing)", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc;
    g_autoptr(CkptctlCatalog) cat = open_catalog(
        "prune",
        "Removes exactly what ckptctl unused lists (the same rule, the same options), a dry "
        "run unless --delete.  Each entry is judged again just before it is removed, by every "
        "marker written until then: one that became needed is kept and reported.  No symlink "
        "is followed and no other mount entered.  --json prints {\"dry_run\",\"removed\":"
        "[{\"path\",\"reason\",\"bytes\"}],\"skipped\":[{\"path\",\"reason\",\"detail\","
        "\"bytes\"}],\"freed_bytes\"}.  Exit 0 when every entry was removed (or "
        "was gone already), 1 when one was kept because it became needed, is no longer a "
        "directory, or could not be removed; 2 on a usage or I/O error.",
        extra, &c, &argc, &argv, &rc);
    if (!cat) {
        common_clear(&c);
        return rc;
    }
    ckptctl_progress_phase(c.progress, "watching for new markers", NULL, NULL, NULL);
    /* watching before the list is made: a marker written after it is seen */
    g_autoptr(CkCatalogFollow) f = del ? ck_catalog_follow_new(cat, 0) : NULL;
    if (f && ck_catalog_follow_polls(f)) {
        ckptctl_progress_free(g_steal_pointer(&c.progress)); /* the note on a line of its own */
        fprintf(stderr,
                "ckptctl prune: %s: every job is looked at again before each entry (slower)\n",
                ck_catalog_follow_polls(f));
    }
    ckptctl_progress_phase(c.progress, "sizing what is unused", NULL, NULL, NULL);
    g_autoptr(GPtrArray) un = ck_catalog_unused(cat);
    g_autoptr(GArray) res = g_array_new(FALSE, TRUE, sizeof(Pruned));
    g_array_set_clear_func(res, pruned_clear);
    if (del) {
        prune_entries(cat, f, un, res, c.progress);
    } else {
        for (guint i = 0; i < un->len; i++) {
            Pruned p = {.u = un->pdata[i], .result = "would-remove", .detail = NULL};
            p.bytes = p.u->bytes;
            g_array_append_val(res, p);
        }
    }
    ckptctl_progress_free(g_steal_pointer(&c.progress)); /* before the table goes out */
    guint64 freed = 0;
    guint removed = 0, kept = 0, gone = 0, needed = 0, not_dir = 0, failed = 0;
    for (guint i = 0; i < res->len; i++) {
        const Pruned *p = &g_array_index(res, Pruned, i);
        freed += p->bytes;
        bool ok = strcmp(p->result, "removed") == 0 || strcmp(p->result, "would-remove") == 0;
        removed += ok;
        gone += strcmp(p->result, "gone") == 0;
        needed += strcmp(p->result, "needed") == 0;
        not_dir += strcmp(p->result, "not-a-directory") == 0;
        failed += strcmp(p->result, "error") == 0;
    }
    kept = needed + not_dir + failed;
    if (c.json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "dry_run");
        json_builder_add_boolean_value(b, !del);
        for (int pass = 0; pass < 2; pass++) {
            json_builder_set_member_name(b, pass ? "skipped" : "removed");
            json_builder_begin_array(b);
            for (guint i = 0; i < res->len; i++) {
                const Pruned *p = &g_array_index(res, Pruned, i);
                bool ok =
                    strcmp(p->result, "removed") == 0 || strcmp(p->result, "would-remove") == 0;
                if (ok == (pass == 1))
                    continue;
                /* "reason": why it is in this list (unused's reason, or why it was kept) */
                json_builder_begin_object(b);
                ckptctl_add_str_or_null(b, "path", p->u->path);
                ckptctl_add_str_or_null(b, "reason", pass ? p->result : p->u->reason);
                if (pass)
                    ckptctl_add_str_or_null(b, "detail", p->detail);
                json_builder_set_member_name(b, "bytes");
                ckptctl_add_u64(b, p->bytes);
                json_builder_end_object(b);
            }
            json_builder_end_array(b);
        }
        json_builder_set_member_name(b, "freed_bytes");
        ckptctl_add_u64(b, freed);
        json_builder_end_object(b);
        ckptctl_print_json(b);
    } else {
        static const char *const cols[] = {"PATH", "REASON", ">BYTES", "RESULT", "DETAIL", NULL};
        g_autoptr(CkptctlTable) t = ckptctl_table_new(cols);
        for (guint i = 0; i < res->len; i++) {
            const Pruned *p = &g_array_index(res, Pruned, i);
            g_autofree char *bs = g_strdup_printf("%" G_GUINT64_FORMAT, p->bytes);
            ckptctl_table_row(t, p->u->path, p->u->reason, bs, p->result, p->detail);
        }
        if (res->len)
            ckptctl_table_print(t, NULL);
        if (del)
            printf("%u removed, %" G_GUINT64_FORMAT " bytes freed; %u kept, %u gone already\n",
                   removed, freed, kept, gone);
        else
            printf("%u to remove, %" G_GUINT64_FORMAT
                   " bytes (dry run, nothing deleted: --delete removes them)\n",
                   removed, freed);
    }
    if (kept)
        fprintf(stderr,
                "ckptctl prune: %u of %u entries not removed: %u became needed, %u no longer a "
                "directory, %u could not be removed\n",
                kept, res->len, needed, not_dir, failed);
    common_clear(&c);
    return kept ? CKPTCTL_FOUND : CKPTCTL_OK;
}

/* ---- collisions ---- */

char *ckptctl_views_of(const char *mount, const char *given)
{
    if (given)
        return g_strdup(given);
    /* the daemon answers on its root; an older one, or no mount, does not */
    char buf[256];
    ssize_t n = getxattr(mount, "user.ckptfs.views", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = '\0';
        if (!strchr(buf, '/') && strcmp(buf, ".") != 0 && strcmp(buf, "..") != 0)
            return g_strdup(buf);
    }
    return g_strdup("_views");
}

static const char *member_str(JsonObject *o, const char *k)
{
    const char *v = ckptctl_member_str(o, k);
    return v ? v : "-";
}

/* What --since, --job and --kind keep. */
typedef struct {
    bool has_since;
    gint64 since_us; /* real time */
    const char *job;
    char **kinds; /* NULL: every kind */
} RecordFilter;

/* TIME as --since takes it: an ISO 8601 date and time ("2026-12-01T18:00:00Z";
 * without a zone, local time), a date ("2026-12-01", its midnight, local
 * time), or how long ago: N followed by s, m, h or d ("10m"). */
static bool parse_since(const char *text, gint64 *out_us)
{
    char *end = NULL;
    guint64 n = g_ascii_strtoull(text, &end, 10);
    if (end != text && end[0] && !end[1] && strchr("smhd", end[0]) && g_ascii_isdigit(text[0])) {
        static const gint64 unit[] = {['s'] = 1, ['m'] = 60, ['h'] = 3600, ['d'] = 86400};
        if (n > (guint64)(G_MAXINT64 / G_USEC_PER_SEC / 86400))
            return false;
        *out_us = g_get_real_time() - (gint64)n * unit[(unsigned char)end[0]] * G_USEC_PER_SEC;
        return true;
    }
    g_autoptr(GTimeZone) local = g_time_zone_new_local();
    g_autoptr(GDateTime) dt = g_date_time_new_from_iso8601(text, local);
    if (!dt) {
        g_autofree char *midnight = g_strconcat(text, "T00:00:00", NULL);
        dt = g_date_time_new_from_iso8601(midnight, local);
    }
    if (!dt)
        return false;
    *out_us = g_date_time_to_unix(dt) * G_USEC_PER_SEC + g_date_time_get_microsecond(dt);
    return true;
}

/* A record's time ("2026-12-01T18:00:00.123Z") in real-time microseconds. */
static bool record_time(JsonObject *o, gint64 *us)
{
    const char *t = ckptctl_member_str(o, "time");
    if (!t)
        return false;
    g_autoptr(GDateTime) dt = g_date_time_new_from_iso8601(t, NULL);
    if (!dt)
        return false;
    *us = g_date_time_to_unix(dt) * G_USEC_PER_SEC + g_date_time_get_microsecond(dt);
    return true;
}

static bool record_matches(const RecordFilter *f, JsonObject *o)
{
    gint64 t;
    if (f->has_since && (!record_time(o, &t) || t < f->since_us))
        return false;
    if (f->job && g_strcmp0(ckptctl_member_str(o, "caller_job"), f->job) != 0 &&
        g_strcmp0(ckptctl_member_str(o, "owner_job"), f->job) != 0)
        return false;
    if (f->kinds) {
        const char *k = ckptctl_member_str(o, "kind");
        return k && g_strv_contains((const char *const *)f->kinds, k);
    }
    return true;
}

/* The records of recs that f keeps, in order (borrowed). */
static GPtrArray *filter_records(const RecordFilter *f, GPtrArray *recs)
{
    GPtrArray *out = g_ptr_array_new();
    for (guint i = 0; i < recs->len; i++)
        if (record_matches(f, recs->pdata[i]))
            g_ptr_array_add(out, recs->pdata[i]);
    return out;
}

/* The records as a table: CALLER as ck_collision_caller_text says it,
 * IDENTITY only when a record has one (a mount with identity= or job=),
 * TAG only when the mount recorded one (tag_env=, ckptctl run); every
 * column (--follow: later records may have them), headings: the header
 * line. */
static void print_records_table(GPtrArray *recs, bool every_column, bool headings)
{
    bool tags = every_column, idents = every_column;
    for (guint i = 0; i < recs->len; i++) {
        tags |= json_object_has_member(recs->pdata[i], "tag");
        idents |= json_object_has_member(recs->pdata[i], "identity");
    }
    g_autoptr(GPtrArray) cols = g_ptr_array_new();
    const char *const fixed[] = {"TIME",  "KIND", "VERDICT", "OP",   "CALLER",
                                 "OWNER", "PATH", "PATH2",   "COMM", ">PID"};
    for (size_t i = 0; i < G_N_ELEMENTS(fixed); i++)
        g_ptr_array_add(cols, (gpointer)fixed[i]);
    if (idents)
        g_ptr_array_add(cols, "IDENTITY");
    if (tags)
        g_ptr_array_add(cols, "TAG");
    g_ptr_array_add(cols, NULL);
    g_autoptr(CkptctlTable) t = ckptctl_table_new((const char *const *)cols->pdata);
    if (!headings)
        ckptctl_table_noheadings(t);
    for (guint i = 0; i < recs->len; i++) {
        JsonObject *o = recs->pdata[i];
        JsonNode *pid = json_object_get_member(o, "pid");
        g_autofree char *pids = pid && JSON_NODE_HOLDS_VALUE(pid)
                                    ? g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(pid))
                                    : NULL;
        g_autofree char *caller = ck_collision_caller_text(o);
        /* the optional columns last, those not shown left out */
        const char *ident = member_str(o, "identity"), *tag = member_str(o, "tag");
        ckptctl_table_row(t, member_str(o, "time"), member_str(o, "kind"), member_str(o, "verdict"),
                          member_str(o, "op"), caller, member_str(o, "owner_job"),
                          member_str(o, "path"), member_str(o, "path2"), member_str(o, "comm"),
                          pids, idents ? ident : tag, tag);
    }
    if (recs->len)
        ckptctl_table_print(t, NULL);
}

/* --follow --json: each record as its own document. */
static void print_record_documents(GPtrArray *recs)
{
    for (guint i = 0; i < recs->len; i++) {
        g_autoptr(JsonNode) node = json_node_new(JSON_NODE_OBJECT);
        json_node_set_object(node, recs->pdata[i]);
        g_autofree char *text = ckptctl_json_node_text(node);
        fputs(text, stdout);
    }
    fflush(stdout);
}

static void note_torn(const char *path, guint skipped, guint first_bad)
{
    if (skipped)
        fprintf(stderr,
                "ckptctl collisions: %s: skipped %u torn line(s) that are not a JSON object "
                "(the first: line %u)\n",
                path, skipped, first_bad);
}

static volatile sig_atomic_t follow_stop;

static void on_follow_signal(int sig)
{
    follow_stop = sig;
}

/* What --follow has read of the log. */
typedef struct {
    const char *path;
    bool file;   /* --file: appended to, perhaps rotated; else the views' snapshot */
    guint64 ino; /* --file: the file read, and how far */
    off_t offset;
    gint64 mtime_ns; /* the snapshot: its stamp when last read ... */
    off_t size;
    char *last;    /* ... and the last whole line it had (NULL: none yet) */
    guint skipped; /* torn lines over the whole run */
    guint first_bad;
    guint shown; /* records printed */
} Follow;

/* The whole lines of the log not read yet (g_free), "" when none; NULL
 * with errno when the log cannot be read (the mount went away). */
static char *follow_new_text(Follow *f)
{
    struct stat st;
    if (stat(f->path, &st) != 0)
        return NULL;
    gint64 mtime_ns = (gint64)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (!f->file) {
        if (mtime_ns == f->mtime_ns && st.st_size == f->size && f->last)
            return g_strdup("");
        g_autofree char *buf = NULL;
        gsize len = 0;
        if (!g_file_get_contents(f->path, &buf, &len, NULL))
            return NULL;
        f->mtime_ns = mtime_ns;
        f->size = st.st_size;
        const char *end = buf + len;
        while (end > buf && end[-1] != '\n')
            end--; /* whole lines only */
        const char *from = buf;
        if (f->last) { /* after the last line seen; all of it when that line is gone */
            size_t ll = strlen(f->last);
            for (const char *p = end; p > buf;) {
                const char *ls = p - 1; /* the line before p: [ls, p) with its LF */
                while (ls > buf && ls[-1] != '\n')
                    ls--;
                if ((size_t)(p - 1 - ls) == ll && memcmp(ls, f->last, ll) == 0) {
                    from = p;
                    break;
                }
                p = ls;
            }
        }
        if (end > buf) {
            const char *ls = end - 1;
            while (ls > buf && ls[-1] != '\n')
                ls--;
            g_free(f->last);
            f->last = g_strndup(ls, (gsize)(end - 1 - ls));
        }
        return g_strndup(from, (gsize)(end - from));
    }
    if ((guint64)st.st_ino != f->ino || st.st_size < f->offset) {
        f->ino = (guint64)st.st_ino; /* rotated (moved away, a new file) or truncated */
        f->offset = 0;
    }
    if (st.st_size == f->offset)
        return g_strdup("");
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    GString *s = g_string_new(NULL);
    char chunk[65536];
    ssize_t r;
    while ((r = pread(fd, chunk, sizeof chunk, f->offset + (off_t)s->len)) > 0)
        g_string_append_len(s, chunk, r);
    close(fd);
    gsize whole = s->len;
    while (whole > 0 && s->str[whole - 1] != '\n')
        whole--; /* a line still being written waits for its LF */
    g_string_truncate(s, whole);
    f->offset += (off_t)whole;
    return g_string_free(s, FALSE);
}

/* Prints what is new and matches; false when the log cannot be read. */
static bool follow_step(Follow *f, const RecordFilter *flt, bool json)
{
    g_autofree char *text = follow_new_text(f);
    if (!text)
        return false;
    if (!*text)
        return true;
    guint skipped = 0, first_bad = 0;
    g_autoptr(GPtrArray) recs =
        ck_collision_parse_lines_skipping(text, strlen(text), &skipped, &first_bad);
    if (skipped && !f->skipped)
        f->first_bad = first_bad;
    f->skipped += skipped;
    g_autoptr(GPtrArray) keep = filter_records(flt, recs);
    if (json)
        print_record_documents(keep);
    else
        print_records_table(keep, true, f->shown == 0);
    f->shown += keep->len;
    return true;
}

/* --follow: what the log holds, then each record as it comes, until
 * SIGINT or SIGTERM (or the log goes away: exit 2). */
static int follow_log(const char *path, bool file, const RecordFilter *flt, bool json)
{
    Follow f = {.path = path, .file = file};
    struct sigaction sa = {.sa_handler = on_follow_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int rc = CKPTCTL_OK;
    if (!follow_step(&f, flt, json)) {
        rc = ckptctl_fail("collisions", "%s: %s", path, g_strerror(errno));
    } else {
        while (!follow_stop) {
            g_usleep(250 * G_TIME_SPAN_MILLISECOND);
            if (follow_stop)
                break;
            if (!follow_step(&f, flt, json)) {
                rc = ckptctl_fail("collisions", "%s: %s (no longer there to follow)", path,
                                  g_strerror(errno));
                break;
            }
        }
    }
    g_free(f.last);
    note_torn(path, f.skipped, f.first_bad);
    if (rc)
        return rc;
    return f.shown ? CKPTCTL_FOUND : CKPTCTL_OK;
}

static int cmd_collisions(int argc, char **argv)
{
    Common c = {0};
    char *file = NULL, *since = NULL, *job = NULL;
    char **kinds = NULL;
    gboolean follow = FALSE;
    GOptionEntry entries[12];
    guint n = 0;
    entries[n++] = (GOptionEntry){"file", 0,
                                  0,      G_OPTION_ARG_FILENAME,
                                  &file,  "Read FILE (a collision_log=FILE) instead of MOUNT's log",
                                  "FILE"};
    entries[n++] = (GOptionEntry){
        "since",
        0,
        0,
        G_OPTION_ARG_STRING,
        &since,
        "Only records made at or after TIME: 2026-12-01T18:00:00Z, 2026-12-01 (local time "
        "without a zone), or how long ago: 30s, 10m, 2h, 1d",
        "TIME"};
    entries[n++] =
        (GOptionEntry){"job", 0,
                       0,     G_OPTION_ARG_STRING,
                       &job,  "Only records where job ID wrote (caller) or was written (owner)",
                       "ID"};
    entries[n++] = (GOptionEntry){"kind",
                                  0,
                                  0,
                                  G_OPTION_ARG_STRING_ARRAY,
                                  &kinds,
                                  "Only records of KIND (repeatable, or a comma list), e.g. "
                                  "foreign-write",
                                  "KIND"};
    entries[n++] = (GOptionEntry){
        "follow", 'f',
        0,        G_OPTION_ARG_NONE,
        &follow,  "After the records there are, print each new one as it comes, until interrupted",
        NULL};
    common_entries(&c, false, entries, &n);
    int rc = parse("collisions", "[MOUNT]",
                   "The collision log of a ckptfs mount (MOUNT/<views>/.collisions, JSON "
                   "lines; the views' name is asked of the mount unless --views gives it), or "
                   "of --file.  A line that is not a JSON object (torn by a writer that was "
                   "killed) is skipped and counted on stderr.  --json prints "
                   "{\"records\":[...]}; with --follow, each record as its own document.  Exit 1 "
                   "when there are records (those the filters keep), 0 when there are none.",
                   entries, &argc, &argv, 0, 1);
    /* the options are read only now: MOUNT or --file, exactly one of them */
    if (rc < 0 && (file != NULL) == (argc == 2))
        rc = ckptctl_fail("collisions",
                          file ? "give MOUNT or --file FILE, not both (try ckptctl collisions "
                                 "--help)"
                               : "expected MOUNT or --file FILE (try ckptctl collisions --help)");
    RecordFilter flt = {.job = job};
    if (rc < 0 && since && !(flt.has_since = parse_since(since, &flt.since_us)))
        rc = ckptctl_fail("collisions",
                          "--since %s: expected a time (2026-12-01T18:00:00Z, 2026-12-01) or how "
                          "long ago (30s, 10m, 2h, 1d)",
                          since);
    if (rc < 0 && job && !ck_is_job_id(job, strlen(job)))
        rc = ckptctl_fail("collisions", "--job %s: not a job id", job);
    g_auto(GStrv) kind_list = NULL;
    if (rc < 0 && kinds) {
        g_autofree char *joined = g_strjoinv(",", kinds);
        kind_list = g_strsplit(joined, ",", -1);
        for (char **k = kind_list; *k && rc < 0; k++) {
            bool known = false;
            for (int v = 1; v < CK_VERDICT_COUNT; v++)
                known |= strcmp(*k, ck_verdict_kind((CkVerdict)v)) == 0;
            if (!**k)
                rc = ckptctl_fail("collisions", "--kind: an empty kind");
            else if (!known) /* a kind this ckptctl does not know may be a newer daemon's */
                fprintf(stderr, "ckptctl collisions: --kind %s: not a kind this ckptctl knows\n",
                        *k);
        }
        flt.kinds = kind_list;
    }
    if (rc >= 0) {
        g_free(file);
        g_free(since);
        g_free(job);
        g_strfreev(kinds);
        common_clear(&c);
        return rc;
    }
    g_autofree char *views = file ? NULL : ckptctl_views_of(argv[1], c.views);
    g_autofree char *path =
        file ? g_strdup(file) : g_build_filename(argv[1], views, ".collisions", NULL);
    if (follow) {
        rc = follow_log(path, file != NULL, &flt, c.json);
    } else {
        g_autofree char *buf = NULL;
        gsize len = 0;
        g_autoptr(GError) err = NULL;
        if (!g_file_get_contents(path, &buf, &len, &err)) {
            rc = ckptctl_fail("collisions", "%s", err->message);
        } else {
            guint skipped = 0, first_bad = 0;
            g_autoptr(GPtrArray) all =
                ck_collision_parse_lines_skipping(buf, len, &skipped, &first_bad);
            g_autoptr(GPtrArray) recs = filter_records(&flt, all);
            note_torn(path, skipped, first_bad);
            if (c.json) {
                g_autoptr(JsonBuilder) b = json_builder_new();
                json_builder_begin_object(b);
                ckptctl_add_records(b, recs);
                json_builder_end_object(b);
                ckptctl_print_json(b);
            } else {
                print_records_table(recs, false, true);
                if (recs->len == all->len)
                    printf("%u record(s)\n", recs->len);
                else
                    printf("%u record(s) of %u in the log\n", recs->len, all->len);
            }
            rc = recs->len ? CKPTCTL_FOUND : CKPTCTL_OK;
        }
    }
    g_free(file);
    g_free(since);
    g_free(job);
    g_strfreev(kinds);
    common_clear(&c);
    return rc;
}

/* ---- main ---- */

typedef struct {
    const char *name;
    int (*fn)(int, char **);
} Command;

static const Command commands[] = {
    {"jobs", cmd_jobs},
    {"resolve", cmd_resolve},
    {"check", cmd_check},
    {"state-root", cmd_state_root},
    {"unused", cmd_unused},
    {"prune", cmd_prune},
    {"collisions", cmd_collisions},
    {"fixture", ckptctl_fixture},
    {"run", ckptctl_run},
    {"set", ckptctl_set},
    {"status", ckptctl_status},
};

int main(int argc, char **argv)
{
    setlocale(LC_ALL, ""); /* GOption's help and messages in the user's charset */
    if (argc < 2) {
        /* a usage error is one line on stderr, as for every command */
        fputs("ckptctl: expected a command: jobs, resolve, check, state-root, unused, prune, "
              "collisions, set, status, fixture, run (try ckptctl --help)\n",
              stderr);
        return CKPTCTL_ERROR;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(synopsis, stdout);
        return CKPTCTL_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("ckptctl (ckptfs) %s\n", CKPTFS_VERSION);
        return CKPTCTL_OK;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* argv[0] becomes the command, so GOption prints "ckptctl CMD". */
            g_autofree char *prg = g_strdup_printf("ckptctl %s", argv[1]);
            g_set_prgname(prg);
            argv[1] = argv[0];
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    return ckptctl_fail(argv[1], "unknown command (try ckptctl --help)");
}
