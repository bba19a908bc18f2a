/* Where a mount's daemon answers outside the file system, so that asking
 * never waits on the mount itself (a hung daemon, a takeover under way):
 * abstract Unix sockets named for the mount point's real path.  "supervisor"
 * is the supervisor's (status, takeover); "daemon" is a daemon's that has no
 * supervisor (status, adoption).  Messages are SOCK_SEQPACKET datagrams. */
#pragma once
#include <sys/socket.h>
#include <sys/un.h>

/* Fills *a; returns the address length to bind or connect with. */
socklen_t ck_control_socket(const char *mountpoint, const char *who, struct sockaddr_un *a);
/* A connection to mountpoint's (a real path) socket named who, or -1 with
 * errno: nobody listens there. */
int ck_control_connect(const char *mountpoint, const char *who);
/* The real path of a mount point without looking into the mount: its
 * parent resolved, its own name as given (g_free); NULL with errno. */
char *ck_mountpoint_path(const char *mountpoint);
