#include "proctitle.h"

#include <glib.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

extern char **environ;

/* The argument and environment strings the kernel placed in one run at the
 * top of the stack: /proc/<pid>/cmdline reads from its start and, once the
 * last argument's NUL is overwritten, on into what followed. */
static char *area;
static size_t area_len;
/* The moved environment's strings, owned here: setenv and unsetenv change
 * environ's array, not these. */
static char **env_strings;

void proctitle_init(int argc, char **argv)
{
    prctl(PR_SET_NAME, "ckptfs", 0, 0, 0);
    if (argc < 1 || !argv[0])
        return;
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc && argv[i] == end; i++)
        end = argv[i] + strlen(argv[i]) + 1;
    size_t n = 0;
    while (environ[n])
        n++;
    bool env_follows = n > 0 && environ[0] == end;
    if (env_follows) {
        for (size_t i = 0; i < n && environ[i] == end; i++)
            end = environ[i] + strlen(environ[i]) + 1;
        /* the environment moves to the heap, where setenv keeps working */
        env_strings = g_new0(char *, n + 1);
        char **copy = g_new0(char *, n + 1);
        for (size_t i = 0; i < n; i++)
            copy[i] = env_strings[i] = g_strdup(environ[i]);
        environ = copy;
    }
    area = argv[0];
    area_len = (size_t)(end - area);
}

void proctitle_set(const char *fmt, ...)
{
    if (!area || area_len < 2)
        return;
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *title = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    size_t n = MIN(strlen(title), area_len - 1);
    memset(area, 0, area_len);
    memcpy(area, title, n);
}
