/* ckptctl fixture: writes a realistic checkpoint directory (ckptctl(1)).
 *
 * Namespaced jobs write _state/<J>/v<G>/<S>/checkpoint-<n>.snap and markers
 * with checkpoint/generation/participants/state; a job restarts into a new
 * generation now and then, and some leave behind a generation that never
 * completed a checkpoint.  Like a real commit, each subtask keeps only its
 * last two snapshots per generation.  L legacy jobs share the top-level v1/
 * (record 013's failure: both write v1/<S>/checkpoint-<n>.snap), the first
 * legacy marker lacks generation= (written by an older release), and one
 * marker is cut short.  Everything comes from one GRand seeded with --seed:
 * no time, no pid, so the same seed writes the same tree, byte for byte. */
#include "ckptctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

typedef struct {
    const char *dir;
    GRand *rand;
    gint bytes;
    guint64 files, total;
    guint markers;
    GString *err; /* first error */
} Fx;

static bool fx_mkdirs(Fx *fx, const char *rel)
{
    g_autofree char *p = g_build_filename(fx->dir, rel, NULL);
    if (g_mkdir_with_parents(p, 0755) != 0) {
        if (!fx->err->len)
            g_string_printf(fx->err, "%s: %s", p, g_strerror(errno));
        return false;
    }
    return true;
}

static bool fx_write(Fx *fx, const char *rel, const char *data, gsize len)
{
    g_autofree char *dir = g_path_get_dirname(rel);
    if (!fx_mkdirs(fx, dir))
        return false;
    g_autofree char *p = g_build_filename(fx->dir, rel, NULL);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    gsize off = 0;
    while (fd >= 0 && off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (gsize)n;
    }
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (fd < 0 || off < len) {
        if (!fx->err->len)
            g_string_printf(fx->err, "%s: %s", p, g_strerror(e));
        return false;
    }
    return true;
}

/* A state file: a header line that says what it is, then seeded bytes. */
static bool fx_state_file(Fx *fx, const char *rel, const char *job, guint64 g, guint s, guint64 n)
{
    g_autofree char *buf = g_malloc((gsize)fx->bytes + 4);
    int h = g_snprintf(buf, (gulong)fx->bytes + 1,
                       "ckptctl-fixture job=%s generation=%" G_GUINT64_FORMAT
                       " subtask=%u checkpoint=%" G_GUINT64_FORMAT "\n",
                       job, g, s, n);
    gsize off = MIN((gsize)h, (gsize)fx->bytes);
    for (; off < (gsize)fx->bytes; off += 4) {
        guint32 v = g_rand_int(fx->rand);
        memcpy(buf + off, &v, 4); /* buf has 4 spare bytes */
    }
    if (!fx_write(fx, rel, buf, (gsize)fx->bytes))
        return false;
    fx->files++;
    fx->total += (guint64)fx->bytes;
    return true;
}

static bool fx_unlink(Fx *fx, const char *rel)
{
    g_autofree char *p = g_build_filename(fx->dir, rel, NULL);
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && unlink(p) == 0) {
        fx->files--;
        fx->total -= (guint64)sb.st_size;
    }
    return true;
}

static char *participants(guint subtasks)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < subtasks; i++)
        g_string_append_printf(s, "%s%u", i ? "," : "", i);
    return g_string_free(s, FALSE);
}

static bool fx_marker(Fx *fx, const char *job, guint64 n, const char *text)
{
    g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-%" G_GUINT64_FORMAT "/COMPLETED", job, n);
    if (!fx_write(fx, rel, text, strlen(text)))
        return false;
    fx->markers++;
    return true;
}

/* One subtask commit: write checkpoint-<n>.snap, drop checkpoint-<n-2>.snap. */
static bool fx_commit(Fx *fx, const char *base, const char *job, guint64 g, guint subtasks,
                      guint64 n)
{
    for (guint s = 0; s < subtasks; s++) {
        g_autofree char *rel =
            g_strdup_printf("%s%sv%" G_GUINT64_FORMAT "/%u/checkpoint-%" G_GUINT64_FORMAT ".snap",
                            base, base[0] ? "/" : "", g, s, n);
        if (!fx_state_file(fx, rel, job, g, s, n))
            return false;
        if (n > 2) {
            g_autofree char *old = g_strdup_printf("%s%sv%" G_GUINT64_FORMAT
                                                   "/%u/checkpoint-%" G_GUINT64_FORMAT ".snap",
                                                   base, base[0] ? "/" : "", g, s, n - 2);
            fx_unlink(fx, old);
        }
    }
    return true;
}

static bool dir_is_empty(const char *dir, bool *exists)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    *exists = d != NULL;
    return !d || g_dir_read_name(d) == NULL;
}

int ckptctl_fixture(int argc, char **argv)
{
    gint jobs = 3, checkpoints = 3, subtasks = 2, bytes = 4096, legacy = 2;
    gint64 seed = 1;
    gboolean force = FALSE, json = FALSE;
    GOptionEntry entries[] = {
        {"jobs", 0, 0, G_OPTION_ARG_INT, &jobs, "Namespaced jobs (default 3)", "J"},
        {"checkpoints", 0, 0, G_OPTION_ARG_INT, &checkpoints,
         "Completed checkpoints per job (default 3)", "C"},
        {"subtasks", 0, 0, G_OPTION_ARG_INT, &subtasks, "Subtasks per job (default 2)", "S"},
        {"bytes", 0, 0, G_OPTION_ARG_INT, &bytes, "Bytes per state file (default 4096)", "B"},
        {"legacy", 0, 0, G_OPTION_ARG_INT, &legacy,
         "Legacy (pre-013) jobs sharing the top-level v1/ (default 2)", "L"},
        {"seed", 0, 0, G_OPTION_ARG_INT64, &seed,
         "Seed: the same seed writes the same tree "
         "(default 1)",
         "X"},
        {"force", 0, 0, G_OPTION_ARG_NONE, &force,
         "Write into a non-empty DIR (files of the same names are overwritten, nothing else "
         "is touched)",
         NULL},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print a JSON summary", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("DIR");
    g_option_context_set_summary(
        ctx, "Writes a realistic checkpoint directory into DIR (created if missing; a non-empty "
             "DIR is refused without --force): J namespaced jobs (_state/<J>/v<G>/<S>/"
             "checkpoint-<n>.snap, markers with checkpoint, generation, participants, state; "
             "restarts into new generations, some abandoned generations), L legacy jobs "
             "sharing v1/ (the first legacy marker without generation=), and one cut-short "
             "marker.  Job ids are 32 hex digits drawn from the seed.  Deterministic: no "
             "time, no pid in names or contents.");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        return ckptctl_fail("fixture", "%s (try ckptctl fixture --help)", err->message);
    if (argc != 2)
        return ckptctl_fail("fixture", "expected DIR (try ckptctl fixture --help)");
    if (jobs < 0 || jobs > 1000000 || legacy < 0 || legacy > 10000 || checkpoints < 1 ||
        checkpoints > 100000 || subtasks < 1 || subtasks > 4096 || bytes < 0 || bytes > (1 << 30))
        return ckptctl_fail("fixture", "out of range: --jobs 0..1000000, --legacy 0..10000, "
                                       "--checkpoints 1..100000, --subtasks 1..4096, --bytes "
                                       "0..1073741824");
    const char *dir = argv[1];
    bool exists;
    if (!dir_is_empty(dir, &exists) && !force)
        return ckptctl_fail("fixture", "%s is not empty (use --force to write into it)", dir);
    if (!exists && g_file_test(dir, G_FILE_TEST_EXISTS))
        return ckptctl_fail("fixture", "%s exists and is not a readable directory", dir);
    if (g_mkdir_with_parents(dir, 0755) != 0)
        return ckptctl_fail("fixture", "%s: %s", dir, g_strerror(errno));

    Fx fx = {dir,
             g_rand_new_with_seed((guint32)(seed ^ (seed >> 32))),
             bytes,
             0,
             0,
             0,
             g_string_new(NULL)};
    g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
    for (gint i = 0; i < jobs + legacy; i++)
        g_ptr_array_add(ids, g_strdup_printf("%08x%08x%08x%08x", g_rand_int(fx.rand),
                                             g_rand_int(fx.rand), g_rand_int(fx.rand),
                                             g_rand_int(fx.rand)));
    g_autofree char *parts = participants((guint)subtasks);
    bool ok = true;
    gint written = 0, total = jobs + legacy;
    CkptctlProgress *pl = ckptctl_progress_new("fixture", json);
    ckptctl_progress_phase(pl, "writing", &written, &total, "jobs");
    for (gint i = 0; ok && i < jobs; i++, g_atomic_int_inc(&written)) {
        const char *job = ids->pdata[i];
        g_autofree char *base = g_strconcat("_state/", job, NULL);
        guint64 g = 1;
        if (g_rand_int_range(fx.rand, 0, 2) == 0) {
            /* A first attempt that died before its first checkpoint completed. */
            g_autofree char *tmp = g_strdup_printf("%s/v1/0/checkpoint-1.snap.tmp", base);
            ok = fx_state_file(&fx, tmp, job, 1, 0, 1);
            g = 2;
        }
        for (guint64 n = 1; ok && n <= (guint64)checkpoints; n++) {
            if (n > 1 && g_rand_int_range(fx.rand, 0, 4) == 0)
                g++; /* restarted: a new generation */
            ok = fx_commit(&fx, base, job, g, (guint)subtasks, n);
            g_autofree char *m =
                g_strdup_printf("checkpoint=%" G_GUINT64_FORMAT "\ngeneration=%" G_GUINT64_FORMAT
                                "\nparticipants=%s\nstate=%s\n",
                                n, g, parts, base);
            ok = ok && fx_marker(&fx, job, n, m);
        }
        if (ok && i == 0 && jobs > 1) {
            /* A checkpoint in flight: its directory, no COMPLETED yet. */
            g_autofree char *p = g_strdup_printf("_jobs/%s/chk-%d", job, checkpoints + 1);
            ok = fx_mkdirs(&fx, p);
        }
        if (ok && i == jobs - 1) {
            /* Cut short: neither participants= nor state=. */
            guint64 n = (guint64)checkpoints + 1;
            ok = fx_commit(&fx, base, job, g, (guint)subtasks, n);
            g_autofree char *m = g_strdup_printf(
                "checkpoint=%" G_GUINT64_FORMAT "\ngeneration=%" G_GUINT64_FORMAT "\n", n, g);
            ok = ok && fx_marker(&fx, job, n, m);
        }
    }
    /* Legacy jobs take turns, as two INSERT jobs of one script would. */
    for (guint64 n = 1; ok && legacy > 0 && n <= (guint64)checkpoints; n++) {
        for (gint k = 0; ok && k < legacy; k++) {
            const char *job = ids->pdata[jobs + k];
            ok = fx_commit(&fx, "", job, 1, (guint)subtasks, n);
            g_autofree char *m = k == 0 && n == 1
                                     ? g_strdup_printf("checkpoint=1\nparticipants=%s\n", parts)
                                     : g_strdup_printf("checkpoint=%" G_GUINT64_FORMAT
                                                       "\ngeneration=1\nparticipants=%s\n",
                                                       n, parts);
            ok = ok && fx_marker(&fx, job, n, m);
        }
    }
    if (ok && jobs == 0 && legacy > 0) {
        /* The cut-short marker goes to the first legacy job (no own root: not restorable). */
        g_autofree char *m = g_strdup_printf("checkpoint=%d\n", checkpoints + 1);
        ok = fx_marker(&fx, ids->pdata[0], (guint64)checkpoints + 1, m);
    }
    g_atomic_int_add(&written, legacy);
    ckptctl_progress_free(pl);
    g_rand_free(fx.rand);
    g_autoptr(GString) ferr = fx.err;
    if (!ok)
        return ckptctl_fail("fixture", "%s", ferr->len ? ferr->str : "write failed");
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "dir");
        ck_json_add_string(b, dir);
        json_builder_set_member_name(b, "jobs");
        json_builder_begin_array(b);
        for (guint i = 0; i < ids->len; i++) {
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "job");
            ck_json_add_string(b, ids->pdata[i]);
            json_builder_set_member_name(b, "layout");
            ck_json_add_string(b, (gint)i < jobs ? "namespaced" : "legacy");
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_set_member_name(b, "markers");
        json_builder_add_int_value(b, fx.markers);
        json_builder_set_member_name(b, "files");
        ckptctl_add_u64(b, fx.files);
        json_builder_set_member_name(b, "bytes");
        ckptctl_add_u64(b, fx.total);
        json_builder_end_object(b);
        ckptctl_print_json(b);
    } else {
        printf("wrote %s: %d namespaced and %d legacy jobs, %u markers, %" G_GUINT64_FORMAT
               " state files, %" G_GUINT64_FORMAT " bytes (seed %" G_GINT64_FORMAT ")\n",
               dir, jobs, legacy, fx.markers, fx.files, fx.total, seed);
    }
    return CKPTCTL_OK;
}
