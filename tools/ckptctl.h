/* ckptctl's subcommands share these: each one is int cmd(argc, argv) that
 * returns the exit code (0 success, 1 found what it looks for, 2 usage or
 * I/O error, after one line on stderr). */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <json-glib/json-glib.h>

#define CKPTCTL_OK    0
#define CKPTCTL_FOUND 1
#define CKPTCTL_ERROR 2

/* One line on stderr ("ckptctl CMD: ..."); returns CKPTCTL_ERROR. */
int ckptctl_fail(const char *cmd, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* Prints the builder's document on stdout, pretty, with a final newline. */
void ckptctl_print_json(JsonBuilder *b);

int ckptctl_fixture(int argc, char **argv);
/* ckptctl run (tools/ckptctl-run.c): exit 3 on collisions, else COMMAND's status. */
int ckptctl_run(int argc, char **argv);
