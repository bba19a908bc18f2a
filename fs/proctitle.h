/* The daemon's name and title as ps, top and pgrep show them.
 *
 * The supervisor and the daemon it serves run the same binary, often
 * started from a descriptor (comm would be its number) and always with the
 * same arguments; the title tells them apart ("ckptfs: supervisor /mnt",
 * "ckptfs: serving /mnt"), and comm is "ckptfs" for both, so pgrep -x
 * ckptfs and ps -C ckptfs find them.  The title is written over the
 * argument area in place, the environment moved out of its way first, as
 * sshd and PostgreSQL do. */
#pragma once

/* First thing in main, after the caller copied argv (its strings are
 * overwritten by proctitle_set). */
void proctitle_init(int argc, char **argv);
/* The title, cut to the room the arguments and environment left. */
void proctitle_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
