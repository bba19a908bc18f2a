#include "control_socket.h"

#include <errno.h>
#include <glib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

socklen_t ck_control_socket(const char *mountpoint, const char *who, struct sockaddr_un *a)
{
    g_autofree char *sum = g_compute_checksum_for_string(G_CHECKSUM_SHA256, mountpoint, -1);
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = g_snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "ckptfs-%s/%s", who, sum);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int ck_control_connect(const char *mountpoint, const char *who)
{
    struct sockaddr_un a;
    socklen_t len = ck_control_socket(mountpoint, who, &a);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, len) == 0)
        return fd;
    int e = errno;
    if (fd >= 0)
        close(fd);
    errno = e;
    return -1;
}

char *ck_mountpoint_path(const char *mountpoint)
{
    g_autofree char *abs = g_canonicalize_filename(mountpoint, NULL);
    g_autofree char *dir = g_path_get_dirname(abs);
    g_autofree char *base = g_path_get_basename(abs);
    char *rdir = realpath(dir, NULL);
    if (!rdir)
        return NULL;
    char *out = strcmp(base, "/") == 0 ? g_strdup(rdir) : g_build_filename(rdir, base, NULL);
    free(rdir);
    return out;
}
