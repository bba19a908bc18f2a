/* Human tables of ckptctl (check, collisions, the ckptctl run report):
 * libsmartcols, the library behind findmnt and lsblk, so columns are as
 * wide as their widest cell, whatever the width of a job id (32 hex
 * characters is common) or a path.  Cells are never truncated, on a
 * terminal or not: a path or a job id cut short cannot be pasted into the
 * next command. */
#include "ckptctl.h"

#include <libsmartcols.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct CkptctlTable {
    struct libscols_table *tb;
    guint ncols;
};

CkptctlTable *ckptctl_table_new(const char *const *headers)
{
    CkptctlTable *t = g_new0(CkptctlTable, 1);
    t->tb = scols_new_table();
    scols_table_set_termforce(t->tb, SCOLS_TERMFORCE_NEVER);
    for (const char *const *h = headers; *h; h++) {
        /* a leading '>' right-aligns the column (counts, sizes) */
        bool right = (*h)[0] == '>';
        scols_table_new_column(t->tb, right ? *h + 1 : *h, 1, right ? SCOLS_FL_RIGHT : 0);
        t->ncols++;
    }
    return t;
}

void ckptctl_table_row(CkptctlTable *t, ...)
{
    struct libscols_line *ln = scols_table_new_line(t->tb, NULL);
    va_list ap;
    va_start(ap, t);
    for (guint i = 0; i < t->ncols; i++) {
        const char *v = va_arg(ap, const char *);
        /* an empty cell would read as a missing column */
        scols_line_set_data(ln, i, v && *v ? v : "-");
    }
    va_end(ap);
}

guint ckptctl_table_rows(CkptctlTable *t)
{
    return (guint)scols_table_get_nlines(t->tb);
}

void ckptctl_table_noheadings(CkptctlTable *t)
{
    scols_table_enable_noheadings(t->tb, 1);
}

void ckptctl_table_print(CkptctlTable *t, const char *prefix)
{
    if (!prefix) {
        scols_print_table(t->tb);
        fflush(stdout);
        return;
    }
    char *text = NULL;
    if (scols_print_table_to_string(t->tb, &text) != 0 || !text)
        return;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    free(text);
    for (char **l = lines; *l; l++)
        if (**l)
            printf("%s%s\n", prefix, *l);
    fflush(stdout);
}

void ckptctl_table_free(CkptctlTable *t)
{
    if (!t)
        return;
    scols_unref_table(t->tb);
    g_free(t);
}
