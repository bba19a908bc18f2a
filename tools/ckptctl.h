/* ckptctl's subcommands share these: each one is int cmd(argc, argv) that
 * returns the exit code (0 success, 1 found what it looks for, 2 usage or
 * I/O error, after one line on stderr). */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <json-glib/json-glib.h>

#include "catalog.h"
#include "jsonout.h"

#define CKPTCTL_OK    0
#define CKPTCTL_FOUND 1
#define CKPTCTL_ERROR 2

/* One line on stderr ("ckptctl CMD: ..."); returns CKPTCTL_ERROR. */
int ckptctl_fail(const char *cmd, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* The builder's document in the one JSON style of every --json
 * (json_out_text: pretty, with a final newline; g_free). */
char *ckptctl_json_text(JsonBuilder *b);
/* The same for a document already made (status, --follow's records). */
char *ckptctl_json_node_text(JsonNode *root);
/* An unsigned 64-bit number, written exactly (json_out_add_u64). */
void ckptctl_add_u64(JsonBuilder *b, guint64 v);
/* Prints ckptctl_json_text(b) on stdout. */
void ckptctl_print_json(JsonBuilder *b);
/* Member name, then the string (ck_json_add_string: valid UTF-8) or null. */
void ckptctl_add_str_or_null(JsonBuilder *b, const char *name, const char *v);
/* "records": the collision records (JsonObject*) as they were read. */
void ckptctl_add_records(JsonBuilder *b, GPtrArray *recs);
/* "hazards": [{"kind","jobs","path","detail"}] of ck_catalog_hazards, as
 * ckptctl check --json prints them; with_collision adds "collision" and
 * "baseline" (run's --report): whether the hazard's key (ck_hazard_key) is
 * in `baseline` (may be NULL: none is). */
void ckptctl_add_hazards(JsonBuilder *b, GPtrArray *hazards, bool with_collision,
                         GHashTable *baseline);
/* A hazard's jobs joined by ',', "-" when none (g_free). */
char *ckptctl_hazard_jobs(const CkHazard *h);
/* The views directory's name of the ckptfs mount at `mount`: `given`
 * (--views) when set, else what the mount root says (user.ckptfs.views),
 * else "_views" (g_free). */
char *ckptctl_views_of(const char *mount, const char *given);
/* A record's string member, NULL when absent or not a string. */
const char *ckptctl_member_str(JsonObject *o, const char *k);

/* Aligned human tables (tools/ckptctl-table.c, libsmartcols).  headers:
 * NULL-terminated column names, a leading '>' right-aligns the column;
 * each row gives one string per column (NULL or "" prints "-").  print:
 * on stdout, each line after prefix when prefix is not NULL. */
typedef struct CkptctlTable CkptctlTable;
CkptctlTable *ckptctl_table_new(const char *const *headers);
void ckptctl_table_row(CkptctlTable *t, ...);
guint ckptctl_table_rows(CkptctlTable *t);
/* No header line (rows that continue a table printed before). */
void ckptctl_table_noheadings(CkptctlTable *t);
void ckptctl_table_print(CkptctlTable *t, const char *prefix);
void ckptctl_table_free(CkptctlTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkptctlTable, ckptctl_table_free)
/* A progress line on stderr for work that can take more than a second
 * (fixture, jobs, check, unused): only when stderr is a terminal and not
 * with --json; redrawn in place four times a second once the work has taken
 * a second (CKPTCTL_PROGRESS_DELAY_MS overrides that, for tests), erased
 * when done.  new returns NULL when there is to be none; every call takes
 * NULL.  phase: what is being done, and the counters (atomics, read with
 * g_atomic_int_get; total may be NULL) of the things done, in `unit`. */
typedef struct CkptctlProgress CkptctlProgress;
CkptctlProgress *ckptctl_progress_new(const char *cmd, bool json);
void ckptctl_progress_phase(CkptctlProgress *p, const char *phase, const gint *done,
                            const gint *total, const char *unit);
void ckptctl_progress_free(CkptctlProgress *p);

/* Removes the directory `path` (relative to dfd, reached through no
 * symlink) and everything below it (tools/ckptctl-prune.c): no symlink is
 * followed, no other mount is entered.  0, or -errno of the first failure
 * with *where (g_free) its path relative to dfd (what could be removed
 * still is).  *freed: st_blocks * 512 of each inode whose last link went. */
int ckptctl_remove_tree(int dfd, const char *path, guint64 *freed, char **where);

int ckptctl_fixture(int argc, char **argv);
/* ckptctl set MOUNT [KEY=VALUE...] (tools/ckptctl-set.c): live settings. */
int ckptctl_set(int argc, char **argv);
/* ckptctl status MOUNT (tools/ckptctl-status.c): 0 healthy, 1 not. */
int ckptctl_status(int argc, char **argv);
/* ckptctl run (tools/ckptctl-run.c): exit 3 on collisions, else COMMAND's status. */
int ckptctl_run(int argc, char **argv);
