#include "testfs.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fails the running test at the caller's line (cmocka's fail_msg would name
 * this file). */
G_GNUC_PRINTF(3, 4)
static void fail_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    print_error("testfs: %s\n", msg);
    _fail(file, line);
}

char *testfs_tmpdir_at(const char *tmpl, const char *file, int line)
{
    g_autoptr(GError) err = NULL;
    char *dir = g_dir_make_tmp(tmpl, &err);
    if (!dir)
        fail_at(file, line, "temporary directory %s: %s", tmpl, err->message);
    return dir;
}

void testfs_put_at(const char *dir, const char *rel, const char *data, gssize len, const char *file,
                   int line)
{
    g_autofree char *p = g_build_filename(dir, rel, NULL);
    g_autofree char *parent = g_path_get_dirname(p);
    if (g_mkdir_with_parents(parent, 0755) != 0)
        fail_at(file, line, "mkdir -p %s: %s", parent, g_strerror(errno));
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents(p, data, len, &err))
        fail_at(file, line, "%s", err->message);
}

void testfs_mkdir_at(const char *dir, const char *rel, const char *file, int line)
{
    g_autofree char *p = g_build_filename(dir, rel, NULL);
    if (g_mkdir_with_parents(p, 0755) != 0)
        fail_at(file, line, "mkdir -p %s: %s", p, g_strerror(errno));
}

void testfs_marker_at(const char *dir, const char *job, guint64 n, const char *text,
                      const char *file, int line)
{
    g_autofree char *rel = g_strdup_printf("_jobs/%s/chk-%" G_GUINT64_FORMAT "/COMPLETED", job, n);
    testfs_put_at(dir, rel, text, -1, file, line);
}

static int remove_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p); /* what is left shows in testfs_remove's answer */
    return 0;
}

bool testfs_remove(const char *path)
{
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    struct stat sb;
    return lstat(path, &sb) != 0 && errno == ENOENT;
}

/* The table whose header line (after prefix) holds header_word, in text:
 * every row below it (lines after prefix, up to the first that is not)
 * keeps each column inside its header's bounds: a blank just before the
 * column's start and a cell between it and the next column's start (cells
 * of right-aligned columns end under their header).  Aligned, whatever the
 * width of a job id.  Returns the number of rows checked. */
int testfs_table_aligned_at(const char *text, const char *prefix, const char *header_word,
                            const char *file, int line)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    size_t pl = strlen(prefix);
    char **l = lines;
    while (*l && !(strncmp(*l, prefix, pl) == 0 && strstr(*l + pl, header_word)))
        l++;
    if (!*l)
        fail_at(file, line, "no table with %s in:\n%s", header_word, text);
    const char *head = *l + pl;
    size_t starts[32], n = 0;
    for (size_t i = 0; head[i] && n < 31; i++)
        if (head[i] != ' ' && (i == 0 || head[i - 1] == ' '))
            starts[n++] = i;
    starts[n] = strlen(head);
    int rows = 0;
    for (l++; *l && strncmp(*l, prefix, pl) == 0 && strlen(*l) > pl && (*l)[pl] != ' '; l++) {
        const char *row = *l + pl;
        size_t len = strlen(row);
        if (g_ascii_isdigit(row[0]) && (strstr(row, "(s)") || strstr(row, " unused,")))
            break; /* the summary line under the table */
        for (size_t c = 0; c < n; c++) {
            bool boundary = starts[c] == 0 || (len > starts[c] && row[starts[c] - 1] == ' ');
            bool cell = false;
            size_t end = c + 1 < n ? starts[c + 1] : len;
            for (size_t i = starts[c]; i < end && i < len && !cell; i++)
                cell = row[i] != ' ';
            /* right-aligned (PID, counts): the cell ends where its header ends */
            size_t hend = starts[c] + strcspn(head + starts[c], " ");
            bool right = hend <= len && row[hend - 1] != ' ' && (hend == len || row[hend] == ' ');
            if (!((boundary && cell) || right))
                fail_at(file, line, "column %zu of \"%s\" is not under its header \"%s\"", c, row,
                        head);
        }
        rows++;
    }
    return rows;
}
