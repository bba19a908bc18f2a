/* Temporary trees for the unit and tools tests: make one, write files and
 * markers into it, remove it.  A step that cannot be done fails the running
 * cmocka test at the caller's line, naming the path and the reason. */
#pragma once
#include <glib.h>
#include <stdbool.h>

/* A new directory $TMPDIR/<tmpl> (tmpl ends in XXXXXX), g_free. */
#define testfs_tmpdir(tmpl) testfs_tmpdir_at((tmpl), __FILE__, __LINE__)
/* dir/rel holds text, its parent directories made as needed. */
#define testfs_put(dir, rel, text) testfs_put_at((dir), (rel), (text), -1, __FILE__, __LINE__)
/* The same with len bytes of data (NUL bytes too). */
#define testfs_put_data(dir, rel, data, len)                                                       \
    testfs_put_at((dir), (rel), (data), (len), __FILE__, __LINE__)
/* mkdir -p dir/rel. */
#define testfs_mkdir(dir, rel) testfs_mkdir_at((dir), (rel), __FILE__, __LINE__)
/* The COMPLETED marker of job's checkpoint n: dir/_jobs/<job>/chk-<n>/COMPLETED. */
#define testfs_marker(dir, job, n, text)                                                           \
    testfs_marker_at((dir), (job), (n), (text), __FILE__, __LINE__)

/* rm -rf path: follows no symlink and stays on path's file system (a mount
 * left below it is not entered).  True when nothing is left; an absent path
 * is removed already. */
bool testfs_remove(const char *path);

char *testfs_tmpdir_at(const char *tmpl, const char *file, int line);
void testfs_put_at(const char *dir, const char *rel, const char *data, gssize len, const char *file,
                   int line);
void testfs_mkdir_at(const char *dir, const char *rel, const char *file, int line);
void testfs_marker_at(const char *dir, const char *job, guint64 n, const char *text,
                      const char *file, int line);

/* The table whose header line (after prefix) holds header_word, in text:
 * every row keeps each column under its header (aligned, whatever the width
 * of a job id).  Returns the number of rows checked; fails the test at the
 * caller's line otherwise. */
#define testfs_table_aligned(text, prefix, header_word)                                            \
    testfs_table_aligned_at((text), (prefix), (header_word), __FILE__, __LINE__)
int testfs_table_aligned_at(const char *text, const char *prefix, const char *header_word,
                            const char *file, int line);
