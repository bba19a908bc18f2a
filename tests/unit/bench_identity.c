/* What deciding a caller's identity costs, per write-deciding request, in
 * each mode (the figures of docs/PERFORMANCE.md, "Caller identity"): the
 * fastest batch of many calls of ck_identity_caller on the real /proc, for a live
 * process that is not the benchmark (a sleep(1) child: its /proc entries
 * are read as the daemon reads a worker's).
 *   meson test -C build --benchmark identity -v */
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "identity.h"

#define BATCHES 20
#define BATCH   10000 /* calls; the fastest batch is reported (the machine may be busy) */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The cost of one call, in ns: the mean of the fastest batch. */
static double measure(CkIdentity *id, pid_t pid, uid_t uid, const char *want)
{
    g_auto(CkCaller) first = ck_identity_caller(id, pid, uid);
    if (g_strcmp0(first.job, want) != 0) {
        fprintf(stderr, "unexpected answer: %s, not %s\n", first.job ? first.job : "(none)",
                want ? want : "(none)");
        return -1;
    }
    double best = 1e18;
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++) {
            CkCaller c = ck_identity_caller(id, pid, uid);
            ck_caller_clear(&c);
        }
        best = MIN(best, (now_ns() - t0) / BATCH);
    }
    return best;
}

/* The same for open, read and close of /dev/null: what three system calls
 * cost on this machine, for scale. */
static double syscall_floor(void)
{
    double best = 1e18;
    char buf[16];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++) {
            int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (fd >= 0 && read(fd, buf, sizeof buf) < 0)
                fd = -1;
            if (fd >= 0)
                close(fd);
        }
        best = MIN(best, (now_ns() - t0) / BATCH);
    }
    return best;
}

/* A map of n cgroup lines and n uid lines, one of them for the child. */
static CkIdentityMap *big_map(guint n, const char *child_cgroup)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < n; i++)
        g_string_append_printf(s, "/kubepods.slice/pod%u job%u\nuid:%u job%u\n", i, i, 10000 + i,
                               i);
    g_string_append_printf(s, "%s mapped\n", child_cgroup);
    g_autofree char *why = NULL;
    CkIdentityMap *m = ck_identity_map_parse(s->str, s->len, &why);
    g_string_free(s, TRUE);
    if (!m)
        fprintf(stderr, "map: %s\n", why);
    return m;
}

int main(void)
{
    char *argv[] = {"sleep", "60", NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", "CLINK_JOB_ID=bench-job", NULL};
    GPid child;
    if (!g_spawn_async(NULL, argv, envp, G_SPAWN_SEARCH_PATH_FROM_ENVP | G_SPAWN_DO_NOT_REAP_CHILD,
                       NULL, NULL, &child, NULL))
        return 1;
    g_autofree char *cgfile = g_strdup_printf("/proc/%d/cgroup", (int)child);
    g_autofree char *cgtext = NULL;
    g_file_get_contents(cgfile, &cgtext, NULL, NULL);
    const char *line = cgtext && g_str_has_prefix(cgtext, "0::") ? cgtext
                       : cgtext                                  ? strstr(cgtext, "\n0::")
                                                                 : NULL;
    g_autofree char *path = line ? g_strndup(line + (line == cgtext ? 3 : 4),
                                             strcspn(line + (line == cgtext ? 3 : 4), "\n"))
                                 : g_strdup("/");
    g_autofree char *why = NULL;
    int rc = 0;

    CkIdentity *job = ck_identity_new("fixed", NULL, NULL, "/proc", &why);
    CkIdentity *env = ck_identity_new(NULL, "env:CLINK_JOB_ID", NULL, "/proc", &why);
    /* a pattern that does not match: the map and the pattern both tried */
    CkIdentity *cgroup =
        ck_identity_new(NULL, "cgroup:/clink.slice/clink-worker@%j.service",
                        big_map(1000, strcmp(path, "/") ? path : "/x"), "/proc", &why);
    CkIdentity *uid = ck_identity_new(NULL, "uid", big_map(1000, "/x"), "/proc", &why);
    const char *mapped = strcmp(path, "/") ? "mapped" : NULL;
    struct {
        const char *name;
        double ns;
    } r[] = {
        {"job=ID", measure(job, child, 0, "fixed")},
        {"env:VAR (cached)", measure(env, child, 0, "bench-job")},
        {"cgroup (1,000-line map, pattern)", measure(cgroup, child, 0, mapped)},
        {"uid (1,000-line map)", measure(uid, child, 10999, "job999")},
        {"for scale: open+read+close /dev/null", syscall_floor()},
    };
    printf("ns per write-deciding request (fastest of %d batches of %d calls; caller cgroup "
           "%s):\n",
           BATCHES, BATCH, path);
    for (size_t i = 0; i < G_N_ELEMENTS(r); i++) {
        printf("  %-38s %8.0f\n", r[i].name, r[i].ns);
        rc |= r[i].ns < 0;
    }
    ck_identity_free(job);
    ck_identity_free(env);
    ck_identity_free(cgroup);
    ck_identity_free(uid);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return rc;
}
