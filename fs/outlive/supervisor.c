#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib.h>
#include <libmount.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "control_socket.h"
#include "held.h"
#include "kernel/kio.h"
#include "log.h"
#include "mounttab.h"
#include "options.h"
#include "proctitle.h"
#include "state.h"
#include "status.h"

extern char **environ;

#define ENV_DAEMON "CKPTFS_SUPERVISED" /* sock,state,fuse,daemonized,mode */
#define ENV_RESUME                                                                                 \
    "CKPTFS_SUPERVISOR"      /* fuse,state,listen,pid,sock,exe,daemonized,restarts,started */
#define START_TRIES     5    /* daemons in a row that die before serving: then EIO */
#define START_PAUSE_MS  1000 /* from the third try on, one a second */
#define GOING_AWAY      "error: the mount is going away"
#define MSG_MAX         (64 * 1024) /* a command line fits */
#define TAKEOVER_WAIT_S 120         /* a standby checks, the old daemon finishes its requests */
#define BIND_TRIES      250 /* 20 ms apart: an unmounted supervisor's socket goes within 5 s */

/* ---- messages: a word and a payload, maybe one descriptor ---- */

#define MSG_FDS 2 /* descriptors a message carries at most */

static int send_fds_flags(int sock, const void *data, size_t len, const int *fds, int nfds,
                          int flags)
{
    struct iovec iov = {(void *)data, len};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(MSG_FDS * sizeof(int))];
    } c;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&c, 0, sizeof c);
        m.msg_control = c.buf;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(h), fds, (size_t)nfds * sizeof(int));
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL | flags) < 0 ? -errno : 0;
}

static int send_fds(int sock, const void *data, size_t len, const int *fds, int nfds)
{
    return send_fds_flags(sock, data, len, fds, nfds, 0);
}

static int send_msg(int sock, const void *data, size_t len, int fd)
{
    return send_fds(sock, data, len, &fd, fd >= 0 ? 1 : 0);
}

static int send_text(int sock, const char *text)
{
    return send_msg(sock, text, strlen(text), -1);
}

/* Returns the length read (0 at the end), or -errno; the payload is
 * NUL-terminated in buf (len - 1 bytes at most); fds[0..nfds) get the
 * descriptors passed (CLOEXEC) or -1; any more are closed. */
static ssize_t recv_fds_flags(int sock, char *buf, size_t len, int *fds, int nfds, int flags)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(MSG_FDS * sizeof(int))];
    } c;
    struct iovec iov = {buf, len - 1};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    for (int i = 0; i < nfds; i++)
        fds[i] = -1;
    ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | flags);
    if (r < 0)
        return -errno;
    buf[r] = '\0';
    int have = 0;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int got;
            memcpy(&got, CMSG_DATA(h) + i * sizeof(int), sizeof got);
            if (have < nfds)
                fds[have++] = got;
            else
                close(got);
        }
    }
    return r;
}

static ssize_t recv_fds(int sock, char *buf, size_t len, int *fds, int nfds)
{
    return recv_fds_flags(sock, buf, len, fds, nfds, 0);
}

static ssize_t recv_msg(int sock, char *buf, size_t len, int *fd)
{
    int none;
    return recv_fds(sock, buf, len, fd ? fd : &none, fd ? 1 : 0);
}

/* NUL-separated strings of a payload, as a vector (g_strfreev). */
static char **split_nul(const char *p, size_t len)
{
    GPtrArray *v = g_ptr_array_new();
    for (size_t o = 0; o < len;) {
        size_t n = strnlen(p + o, len - o);
        g_ptr_array_add(v, g_strndup(p + o, n));
        o += n + 1;
    }
    g_ptr_array_add(v, NULL);
    return (char **)g_ptr_array_free(v, FALSE);
}

static void append_nul(GByteArray *b, char *const *v)
{
    for (; *v; v++)
        g_byte_array_append(b, (const guint8 *)*v, (guint)strlen(*v) + 1);
}

static socklen_t sock_addr(const char *mnt, const char *who, struct sockaddr_un *a)
{
    return ck_control_socket(mnt, who, a);
}

static void set_cloexec(int fd, bool on)
{
    if (fd >= 0)
        fcntl(fd, F_SETFD, on ? FD_CLOEXEC : 0);
}

static bool parse_ints(const char *env, long long *out, int n)
{
    g_auto(GStrv) parts = g_strsplit(env, ",", -1);
    if (g_strv_length(parts) != (guint)n)
        return false;
    for (int i = 0; i < n; i++) {
        char *end = NULL;
        out[i] = g_ascii_strtoll(parts[i], &end, 10);
        if (!end || *end)
            return false;
    }
    return true;
}

/* a replacement daemon: the supervisor queued a held list (held.h) first */
#define ENV_HELD_LIST "CKPTFS_HELD"

/* ---- the daemon's end ---- */

static bool peer_may_take_over(int c)
{
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    return getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0 &&
           (cr.uid == 0 || cr.uid == geteuid());
}

/* A daemon without a supervisor (one that died, or -o nosupervise) answers
 * here: "status", and "adopt" from a takeover that becomes its supervisor.
 * An adopter is given the connection, the state and the command line,
 * then the objects without a name the dead supervisor held ("hold"); when
 * its own daemon is ready to attach it says "handover", and this daemon
 * hands over as it would to its supervisor. */
static void serve_unsupervised(SupLink *l, int c)
{
    char buf[64];
    if (recv_msg(c, buf, sizeof buf, NULL) <= 0)
        return;
    if (strcmp(buf, "status") == 0) {
        StatusProcs p = {.state = "serving",
                         .daemon_pid = (int)getpid(),
                         .connection_gone = !connection_alive(l->conn_fd)};
        bool healthy;
        g_autofree char *json = status_json(l->state, &p, &healthy);
        send_text(c, json);
        return;
    }
    if (strcmp(buf, "adopt") != 0) {
        send_text(c, "error: not a request this daemon knows");
        return;
    }
    if (!peer_may_take_over(c)) {
        send_text(c, "error: only root or the mount's owner may take it over");
        return;
    }
    if (!l->was_supervised) {
        send_text(c, "error: mounted without supervision (-o nosupervise or auto_unmount): the "
                     "daemon keeps no journal of the requests it serves, which a takeover needs; "
                     "mount again with supervise");
        return;
    }
    g_autoptr(GByteArray) b = g_byte_array_new();
    g_byte_array_append(b, (const guint8 *)"adopt", 6);
    append_nul(b, l->argv);
    int fds[2] = {l->conn_fd, l->state_fd};
    if (send_fds(c, b->data, b->len, fds, 2) < 0)
        return;
    /* what the dead supervisor held: the adopter holds it, for the daemon
     * it starts (at most SUPLINK_HELD_MAX: the socket has room) */
    g_autoptr(GArray) held = l->held_now ? l->held_now(l->ctx) : NULL;
    for (guint i = 0; held && i < held->len; i++) {
        const SupHeld *h = &g_array_index(held, SupHeld, i);
        char m[64];
        held_word(m, sizeof m, "hold", h->slot, h->gen);
        send_msg(c, m, strlen(m), h->fd);
        close(h->fd);
    }
    ssize_t r = recv_msg(c, buf, sizeof buf, NULL);
    if (r > 0 && strcmp(buf, "handover") == 0 && l->handover) {
        l->handover(l->ctx);
        pause(); /* the daemon exits from its main thread */
    }
}

static void listen_unsupervised(SupLink *l)
{
    struct sockaddr_un a;
    socklen_t len = sock_addr(l->mnt, "daemon", &a);
    int fd = -1;
    /* the daemon of the mount that was here before lets go of the name as
     * it exits, which may be just after its unmount */
    for (int i = 0; i < BIND_TRIES; i++) {
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd >= 0 && bind(fd, (struct sockaddr *)&a, len) == 0 && listen(fd, 8) == 0)
            break;
        int err = errno;
        if (fd >= 0)
            close(fd);
        fd = -1;
        if (err != EADDRINUSE)
            break;
        g_usleep(20000);
    }
    if (fd < 0) {
        g_warning("ckptfs: no socket for `ckptctl status` and takeovers: %s", g_strerror(errno));
        return;
    }
    for (;;) {
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break;
        }
        struct timeval tv = {5, 0};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        serve_unsupervised(l, c);
        close(c);
    }
    close(fd);
}

static gpointer unsupervised_thread(gpointer p)
{
    listen_unsupervised(p);
    return NULL;
}

/* Sends the let-gos that had no room, oldest first, while they go;
 * letgo_lock held. */
static void send_letgos_locked(SupLink *l)
{
    guint sent = 0;
    for (; l->letgos && sent < l->letgos->len; sent++) {
        const SupHeld *h = &g_array_index(l->letgos, SupHeld, sent);
        char m[64];
        held_word(m, sizeof m, "let-go", h->slot, h->gen);
        if (send_fds_flags(l->sock, m, strlen(m), NULL, 0, MSG_DONTWAIT) == -EAGAIN)
            break; /* any other failure: the supervisor is gone, and with it what it held */
    }
    if (sent)
        g_array_remove_range(l->letgos, 0, sent);
}

static gpointer link_thread(gpointer p)
{
    SupLink *l = p;
    char buf[64];
    for (;;) {
        /* the let-gos that had no room go as soon as the socket has some
         * (told by letgo_wake when the first one waits) */
        g_mutex_lock(&l->letgo_lock);
        bool waiting = l->letgos && l->letgos->len;
        g_mutex_unlock(&l->letgo_lock);
        struct pollfd pfd[2] = {{.fd = l->sock, .events = POLLIN | (waiting ? POLLOUT : 0)},
                                {.fd = l->letgo_wake, .events = POLLIN}};
        /* without the eventfd (none could be made), once a second */
        int ready = poll(pfd, l->letgo_wake >= 0 ? 2 : 1, l->letgo_wake >= 0 ? -1 : 1000);
        if (ready < 0 && errno != EINTR)
            g_usleep(G_USEC_PER_SEC / 10);
        eventfd_t ignored;
        if (l->letgo_wake >= 0 && (pfd[1].revents & POLLIN))
            (void)!eventfd_read(l->letgo_wake, &ignored);
        g_mutex_lock(&l->letgo_lock);
        send_letgos_locked(l);
        g_mutex_unlock(&l->letgo_lock);
        if (ready <= 0 || !(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t r = recv_msg(l->sock, buf, sizeof buf, NULL);
        if (r == -EINTR)
            continue;
        if (r <= 0) {
            g_warning("ckptfs: the supervisor is gone: a crash of this daemon now ends the "
                      "mount (ENOTCONN); `ckptfs --takeover %s` gives it a supervisor again",
                      l->mnt);
            listen_unsupervised(l);
            return NULL;
        }
        if (strcmp(buf, "ping") == 0) {
            send_text(l->sock, "pong");
        } else if (strcmp(buf, "handover") == 0 && l->handover) {
            l->handover(l->ctx);
            return NULL;
        }
    }
}

void suplink_error(SupLink *l, const char *msg)
{
    if (l && l->sock >= 0 && l->mode != LINK_NONE) {
        g_autofree char *m = g_strconcat("error ", msg, NULL);
        send_text(l->sock, m);
    }
}

/* One message of a held list: a "held" one (kept in l->held), or not. */
static bool take_held(SupLink *l, const char *buf, int *fd)
{
    guint32 slot;
    guint64 gen;
    if (!g_str_has_prefix(buf, "held ") || *fd < 0 || !held_parse(buf + 5, &slot, &gen))
        return false;
    if (!l->held)
        l->held = g_array_new(FALSE, FALSE, sizeof(SupHeld));
    SupHeld h = {slot, gen, *fd};
    g_array_append_val(l->held, h);
    *fd = -1;
    return true;
}

int suplink_standby(SupLink *l)
{
    if (send_text(l->sock, "standby") < 0)
        return -1;
    char buf[64];
    for (;;) {
        int fd = -1;
        ssize_t r = recv_msg(l->sock, buf, sizeof buf, &fd);
        if (r == -EINTR)
            continue;
        if (r <= 0)
            return -1;
        take_held(l, buf, &fd);
        if (fd >= 0)
            close(fd);
        if (strcmp(buf, "attach") == 0)
            return 0;
        if (strcmp(buf, "ping") == 0)
            send_text(l->sock, "pong");
    }
}

GArray *suplink_take_held(SupLink *l)
{
    /* a replacement's list was queued before it started: what is there */
    char buf[64];
    while (l->held_coming) {
        int fd = -1;
        ssize_t r = recv_fds_flags(l->sock, buf, sizeof buf, &fd, 1, MSG_DONTWAIT);
        if (r == -EINTR)
            continue;
        if (r <= 0 || strcmp(buf, "held-end") == 0)
            l->held_coming = false;
        else
            take_held(l, buf, &fd);
        if (fd >= 0)
            close(fd);
    }
    GArray *a = l->held;
    l->held = NULL;
    return a;
}

/* Whether the socket has half its buffer free: a spare hold (a directory)
 * leaves the rest to the files.  letgo_lock held. */
static bool room_to_spare(SupLink *l)
{
    if (!l->sndbuf) {
        int v = 0;
        socklen_t len = sizeof v;
        l->sndbuf = getsockopt(l->sock, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0 && v > 0 ? v : -1;
    }
    int queued = 0;
    return l->sndbuf > 0 && ioctl(l->sock, SIOCOUTQ, &queued) == 0 && queued < l->sndbuf / 2;
}

bool suplink_hold(SupLink *l, uint32_t slot, uint64_t gen, int fd, bool spare)
{
    bool sent = false;
    if (l && l->sock >= 0 && l->mode != LINK_NONE) {
        char m[64];
        held_word(m, sizeof m, fd >= 0 ? "hold" : "let-go", slot, gen);
        /* never waits: a node table lock may be held.  A hold that finds no
         * room is an object not held; a let-go waits its turn, since the
         * supervisor would otherwise keep the object until the next daemon
         * serves (a burst of removals sends a hold and a let-go each), and
         * no hold goes past a waiting let-go, which may be of its slot */
        g_mutex_lock(&l->letgo_lock);
        send_letgos_locked(l);
        bool waiting = l->letgos && l->letgos->len;
        int err = waiting || (fd >= 0 && spare && !room_to_spare(l))
                      ? -EAGAIN
                      : send_fds_flags(l->sock, m, strlen(m), &fd, fd >= 0 ? 1 : 0, MSG_DONTWAIT);
        if (err == -EAGAIN && fd < 0) {
            if (!l->letgos)
                l->letgos = g_array_new(FALSE, FALSE, sizeof(SupHeld));
            SupHeld h = {slot, gen, -1};
            g_array_append_val(l->letgos, h);
            if (!waiting && l->letgo_wake >= 0)
                (void)!eventfd_write(l->letgo_wake, 1); /* the link's thread sends it */
            err = 0;
        }
        g_mutex_unlock(&l->letgo_lock);
        sent = err == 0;
    }
    if (fd >= 0)
        close(fd);
    return sent;
}

int suplink_mounted(SupLink *l, int fuse_fd)
{
    l->conn_fd = fuse_fd;
    return l->sock < 0 ? 0 : send_msg(l->sock, "mounted", strlen("mounted"), fuse_fd);
}

void suplink_ready(SupLink *l, const char *mnt, const char *note)
{
    l->mnt = mnt;
    if (l->conn_fd < 0)
        l->conn_fd = l->fuse_fd;
    l->was_supervised = l->sock >= 0;
    if (l->sock < 0) {
        g_thread_unref(g_thread_new("ckptfs-status", unsupervised_thread, l));
        return;
    }
    g_autofree char *m = g_strconcat("ready", note ? " " : "", note ? note : "", NULL);
    send_text(l->sock, m);
    l->letgo_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    g_thread_unref(g_thread_new("ckptfs-suplink", link_thread, l));
}

/* ---- the supervisor ---- */

typedef struct Sup Sup;

/* A daemon the supervisor started (or, resumed, inherited). */
typedef struct {
    Sup *s;
    GPid pid; /* 0: none */
    int sock; /* -1: none */
    guint sock_src;
    int pidfd; /* a daemon adopted from a dead supervisor: not a child, watched by pidfd */
    guint pidfd_src;
    int exe;     /* its binary (O_PATH), owned */
    char **argv; /* its command line, owned */
    bool ready, standby, attaching;
    char *error; /* what it said before it failed */
    char *note;  /* what its "ready" said */
} Daemon;

struct Sup {
    GMainLoop *loop;
    int state_fd, fuse_fd, listen_fd;
    guint listen_src, gone_src, fail_src, bind_src;
    unsigned bind_tries;
    int ready_pipe; /* to the terminal's process until the first ready, else -1 */
    bool daemonized, ready_once, stopping, handing_over, given_up;
    Daemon cur;          /* the daemon that serves, or is being started to */
    Daemon next;         /* a takeover's new daemon, until it serves */
    struct Conn *client; /* the takeover's requester, waiting for its answer */
    gint64 started_us;   /* when the supervisor started (a takeover's exec goes on) */
    char *failed_why;    /* given up: why no daemon starts */
    State st;            /* the state memfd mapped, for status (status_json), once asked */
    char *fallback_why;  /* a takeover's daemon failed after the handover */
    bool adopting;       /* a takeover's requester adopting a daemon whose supervisor died */
    int adopt_exe;       /* ... and the daemon it starts: its binary and command line */
    char **adopt_argv;
    HeldSet *held; /* files without a name, for the next daemon */
    guint failed_starts;
    guint64 restarts;
    void *fail_buf;
    int status;
    char mnt[sizeof((StateHeader *)0)->mountpoint];
};

static void spawn_daemon(Sup *s, Daemon *d, int exe, char **argv, LinkMode mode);
static void exec_self(Sup *s);
static gboolean on_daemon_msg(gint fd, GIOCondition cond, gpointer p);

static void daemon_init(Daemon *d, Sup *s)
{
    memset(d, 0, sizeof *d);
    d->s = s;
    d->sock = -1;
    d->exe = -1;
    d->pidfd = -1;
}

/* Lets go of everything the record holds but its process. */
static void daemon_drop(Daemon *d)
{
    if (d->sock_src)
        g_source_remove(d->sock_src);
    if (d->sock >= 0)
        close(d->sock);
    if (d->pidfd_src)
        g_source_remove(d->pidfd_src);
    if (d->pidfd >= 0)
        close(d->pidfd);
    if (d->exe >= 0)
        close(d->exe);
    g_strfreev(d->argv);
    g_free(d->error);
    g_free(d->note);
    daemon_init(d, d->s);
}

static void tell_terminal(Sup *s, unsigned char status);

static void finish(Sup *s, int status)
{
    s->status = status;
    tell_terminal(s, (unsigned char)(status ? status : 1));
    g_main_loop_quit(s->loop);
}

/* One connection to the supervisor's socket: a status, or a takeover. */
typedef struct Conn {
    Sup *s;
    int fd;
    guint src;
    bool may_take_over; /* root or the mount's owner */
} Conn;

static void conn_close(Conn *c)
{
    if (c->src)
        g_source_remove(c->src);
    close(c->fd);
    if (c->s->client == c)
        c->s->client = NULL;
    g_free(c);
}

static void reply_client(Sup *s, const char *text)
{
    if (!s->client)
        return;
    send_text(s->client->fd, text);
    conn_close(s->client);
}

static void detach_stdio(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    dup2(fd, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
}

/* The process on the terminal (a background start's first process) exits
 * with status once the mount serves, or did not come up. */
static void tell_terminal(Sup *s, unsigned char status)
{
    if (s->ready_pipe < 0)
        return;
    if (write(s->ready_pipe, &status, 1) < 0) {
    }
    close(s->ready_pipe);
    s->ready_pipe = -1;
    if (status == 0)
        detach_stdio();
}

/* The mount point the daemon wrote into the state header. */
static void read_mountpoint(Sup *s)
{
    ssize_t r = pread(s->state_fd, s->mnt, sizeof s->mnt - 1, offsetof(StateHeader, mountpoint));
    s->mnt[r > 0 ? r : 0] = '\0';
    s->mnt[sizeof s->mnt - 1] = '\0';
    if (s->mnt[0])
        proctitle_set("ckptfs: supervisor %s", s->mnt);
}

static gboolean on_accept(gint fd, GIOCondition cond, gpointer p);

/* The device of the mount, as the daemon that mounted it wrote it. */
static unsigned long mount_dev(Sup *s)
{
    uint64_t dev = 0;
    if (pread(s->state_fd, &dev, sizeof dev, offsetof(StateHeader, mount_dev)) != sizeof dev)
        return 0;
    return (unsigned long)dev;
}

static void close_listener(Sup *s)
{
    if (s->listen_src)
        g_source_remove(s->listen_src);
    if (s->bind_src)
        g_source_remove(s->bind_src);
    s->listen_src = s->bind_src = 0;
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
}

static gboolean bind_listener(gpointer p)
{
    Sup *s = p;
    struct sockaddr_un a;
    socklen_t len = sock_addr(s->mnt, "supervisor", &a);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, len) == 0 && listen(fd, 8) == 0) {
        s->listen_fd = fd;
        s->listen_src = g_unix_fd_add(fd, G_IO_IN, on_accept, s);
        s->bind_src = 0;
        return G_SOURCE_REMOVE;
    }
    int err = errno;
    if (fd >= 0)
        close(fd);
    /* the supervisor of the mount that was here before lets go of the name
     * once its connection is gone, which may be just after the unmount */
    if (err == EADDRINUSE && ++s->bind_tries < BIND_TRIES) {
        if (!s->bind_src)
            s->bind_src = g_timeout_add(20, bind_listener, s);
        return G_SOURCE_CONTINUE;
    }
    g_warning("ckptfs: supervisor: no takeover socket for %s: %s", s->mnt, g_strerror(err));
    s->bind_src = 0;
    return G_SOURCE_REMOVE;
}

/* The connection is gone (unmounted, aborted): nothing is left to take
 * over, and a new mount on the same mount point needs the socket's name. */
static gboolean on_connection_gone(gint fd, GIOCondition cond, gpointer p)
{
    Sup *s = p;
    (void)fd;
    (void)cond;
    s->gone_src = 0;
    close_listener(s);
    return G_SOURCE_REMOVE;
}

static void have_connection(Sup *s)
{
    read_mountpoint(s);
    if (s->mnt[0] && s->listen_fd < 0 && !s->bind_src)
        bind_listener(s);
    else if (s->listen_fd >= 0 && !s->listen_src)
        s->listen_src = g_unix_fd_add(s->listen_fd, G_IO_IN, on_accept, s);
    if (!s->gone_src)
        s->gone_src = g_unix_fd_add(s->fuse_fd, G_IO_ERR | G_IO_HUP, on_connection_gone, s);
}

/* An unmounted (aborted) connection polls as an error: a daemon that died
 * after it, or on its way out, is not replaced. */
bool connection_alive(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return fd >= 0 && poll(&p, 1, 0) >= 0 && !(p.revents & (POLLERR | POLLNVAL));
}

/* The state memfd as the daemons fill it (mapped at the first need), or
 * NULL with errno set. */
static StateHeader *sup_state(Sup *s)
{
    if (!s->st.hdr) {
        int fd = dup(s->state_fd);
        int rc = fd < 0 ? -errno : state_open(&s->st, fd);
        if (rc < 0) {
            if (fd >= 0)
                close(fd);
            errno = -rc;
            return NULL;
        }
    }
    return s->st.hdr;
}

/* Counted where .metrics shows them (ckptfs_daemon_failed_starts_total,
 * ckptfs_supervisor_give_ups_total), for as long as the mount lives. */
static void count(Sup *s, size_t field)
{
    StateHeader *h = sup_state(s);
    if (h)
        atomic_fetch_add((_Atomic uint64_t *)((char *)h + field), 1);
}

/* ---- giving up: every request fails with EIO instead of waiting ---- */

static gboolean on_failing_request(gint fd, GIOCondition cond, gpointer p)
{
    Sup *s = p;
    if (!(cond & G_IO_IN) || kio_fail_one(fd, s->fail_buf, KIO_FAIL_BUF, EIO) == -ENODEV) {
        s->fail_src = 0;
        g_warning("ckptfs: supervisor: %s was unmounted while no daemon could serve it", s->mnt);
        finish(s, 1);
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static void give_up(Sup *s, const char *why)
{
    s->given_up = true;
    count(s, offsetof(StateHeader, give_ups));
    g_free(s->failed_why);
    s->failed_why = g_strdup(why);
    log_event(G_LOG_LEVEL_WARNING, LOG_ID_GIVE_UP,
              "ckptfs: supervisor: %u daemons in a row failed to start (%s); giving up: every "
              "request to %s fails with EIO until `ckptfs --takeover %s` brings a daemon that "
              "starts, or the mount is unmounted",
              s->failed_starts, why, s->mnt, s->mnt);
    sd_notifyf(0, "STATUS=no daemon can start (%s): requests fail with EIO", why);
    /* a takeover that ends here is answered now, not when it gives up waiting */
    g_autofree char *after =
        s->fallback_why ? g_strdup_printf("the new daemon failed after the handover (%s), and ",
                                          s->fallback_why)
                        : g_strdup("");
    g_autofree char *msg =
        g_strdup_printf("error: %sno daemon can start (%s): every request fails with EIO until a "
                        "takeover brings one that starts",
                        after, why);
    g_clear_pointer(&s->fallback_why, g_free);
    reply_client(s, msg);
    if (!s->fail_buf)
        s->fail_buf = g_malloc(KIO_FAIL_BUF);
    /* what the dead daemons read and never answered comes again, to fail */
    kio_ask_resend(s->fuse_fd);
    s->fail_src = g_unix_fd_add(s->fuse_fd, G_IO_IN | G_IO_ERR | G_IO_HUP, on_failing_request, s);
}

static void stop_failing(Sup *s)
{
    if (s->fail_src)
        g_source_remove(s->fail_src);
    s->fail_src = 0;
    s->given_up = false;
    s->failed_starts = 0;
}

/* ---- the life of the daemons ---- */

/* The holds and let-gos a daemon sent before it ended, still in its
 * socket (which is closed next), and its last "error" (why it ended): the
 * rest of what it said no longer matters. */
static void held_drain(Sup *s, Daemon *d)
{
    char buf[4096];
    struct pollfd p = {.fd = d->sock, .events = POLLIN};
    while (d->sock >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
        int fd = -1;
        if (recv_msg(d->sock, buf, sizeof buf, &fd) <= 0)
            break;
        if (!held_set_message(s->held, buf, &fd) && g_str_has_prefix(buf, "error ")) {
            g_free(d->error);
            d->error = g_strdup(buf + 6);
        }
        if (fd >= 0)
            close(fd);
    }
}

static bool offer_to(const char *msg, int fd, void *ctx)
{
    return send_fds_flags(*(int *)ctx, msg, strlen(msg), &fd, 1, MSG_DONTWAIT) == 0;
}

/* Offers what is held to a daemon about to attach, without waiting. */
static void held_send(Sup *s, int sock)
{
    held_set_offer(s->held, offer_to, &sock);
    send_fds_flags(sock, "held-end", strlen("held-end"), NULL, 0, MSG_DONTWAIT);
}

static void on_ready(Sup *s, Daemon *d, const char *note)
{
    d->ready = true;
    s->failed_starts = 0;
    held_set_settle(s->held); /* before exec_self: nothing unconfirmed is passed on */
    if (d == &s->next) {
        /* the takeover is done: the new daemon is the daemon (the old one
         * exited when it handed over) */
        Daemon n = s->next;
        if (n.sock_src)
            g_source_remove(n.sock_src);
        n.sock_src = 0;
        daemon_drop(&s->cur);
        s->cur = n;
        s->cur.s = s;
        s->cur.sock_src = g_unix_fd_add(s->cur.sock, G_IO_IN | G_IO_HUP, on_daemon_msg, &s->cur);
        daemon_init(&s->next, s);
        g_autofree char *msg = g_strconcat("ok", note && *note ? " " : "", note ? note : "", NULL);
        reply_client(s, msg);
        sd_notify(0, "READY=1\nSTATUS=serving");
        if (s->adopting) {
            /* this process is the new binary already */
            s->adopting = false;
            if (note && *note)
                fprintf(stderr, "ckptfs: --takeover %s: done; %s\n", s->mnt, note);
            tell_terminal(s, 0);
            return;
        }
        /* the supervisor becomes the new binary too */
        exec_self(s);
        return;
    }
    if (!s->ready_once) {
        s->ready_once = true;
        tell_terminal(s, 0);
    }
    if (s->fallback_why) {
        /* a takeover that failed after the handover: the old binary is back */
        g_autofree char *msg = g_strdup_printf(
            "error: the new daemon failed after the handover (%s); the previous binary serves "
            "again",
            s->fallback_why);
        g_clear_pointer(&s->fallback_why, g_free);
        reply_client(s, msg);
    }
    sd_notify(0, "READY=1\nSTATUS=serving");
}

static void attach_next(Sup *s)
{
    if (s->given_up)
        stop_failing(s); /* the supervisor reads no more requests */
    s->next.attaching = true;
    held_send(s, s->next.sock);
    if (send_text(s->next.sock, "attach") < 0)
        g_warning("ckptfs: supervisor: the new daemon does not answer");
}

static gboolean on_daemon_msg(gint fd, GIOCondition cond, gpointer p)
{
    Daemon *d = p;
    Sup *s = d->s;
    (void)cond;
    char buf[4096];
    int got = -1;
    ssize_t r = recv_msg(fd, buf, sizeof buf, &got);
    if (r <= 0) {
        if (got >= 0)
            close(got);
        d->sock_src = 0;
        close(d->sock);
        d->sock = -1;
        return G_SOURCE_REMOVE;
    }
    if (held_set_message(s->held, buf, &got)) {
        /* noted */
    } else if (strcmp(buf, "mounted") == 0 && got >= 0 && s->fuse_fd < 0) {
        s->fuse_fd = got;
        got = -1;
        have_connection(s);
    } else if (strcmp(buf, "ready") == 0 || g_str_has_prefix(buf, "ready ")) {
        on_ready(s, d, buf[5] ? buf + 6 : NULL);
    } else if (strcmp(buf, "standby") == 0 && d == &s->next) {
        d->standby = true;
        if (s->cur.pid && s->cur.ready && s->cur.sock >= 0) {
            s->handing_over = true;
            if (send_text(s->cur.sock, "handover") < 0)
                kill(s->cur.pid, SIGTERM);
        } else if (!s->cur.pid) {
            attach_next(s);
        }
    } else if (g_str_has_prefix(buf, "error ")) {
        g_free(d->error);
        d->error = g_strdup(buf + 6);
    }
    if (got >= 0)
        close(got);
    return G_SOURCE_CONTINUE;
}

static gboolean respawn_later(gpointer p)
{
    Sup *s = p;
    if (!s->cur.pid && !s->stopping && !s->given_up)
        spawn_daemon(s, &s->cur, s->cur.exe, s->cur.argv, LINK_ATTACH);
    return G_SOURCE_REMOVE;
}

static char *exit_text(int status)
{
    return WIFEXITED(status) ? g_strdup_printf("exit status %d", WEXITSTATUS(status))
                             : g_strdup_printf("killed by signal %d", WTERMSIG(status));
}

/* The takeover's new daemon ended before it served. */
static void next_exited(Sup *s, int status)
{
    Daemon *n = &s->next;
    held_drain(s, n);
    g_autofree char *how = exit_text(status);
    g_autofree char *why = g_strdup(n->error ? n->error : how);
    bool attached = n->attaching;
    daemon_drop(n);
    if (attached) {
        /* the old daemon is gone: the old binary, with the old command line */
        g_warning("ckptfs: supervisor: the new daemon failed after the handover (%s); the "
                  "previous binary takes the connection again",
                  why);
        s->fallback_why = g_steal_pointer(&why); /* for on_ready's reply */
        spawn_daemon(s, &s->cur, s->cur.exe, s->cur.argv, LINK_ATTACH);
        return;
    }
    g_autofree char *msg = g_strdup_printf(
        "error: the new daemon could not start (%s); the running daemon goes on serving", why);
    reply_client(s, msg);
    if (s->adopting) {
        /* the adopted daemon goes on as it was, without a supervisor */
        fprintf(stderr, "ckptfs: --takeover %s: %s\n", s->mnt, msg + strlen("error: "));
        finish(s, 1);
        return;
    }
    if (!s->cur.pid && !s->stopping && !s->given_up)
        spawn_daemon(s, &s->cur, s->cur.exe, s->cur.argv, LINK_ATTACH);
}

static void on_daemon_exit(GPid pid, gint status, gpointer p)
{
    Sup *s = p;
    g_spawn_close_pid(pid);
    if (pid == s->next.pid) {
        s->next.pid = 0;
        if (!s->next.ready)
            next_exited(s, status);
        return;
    }
    if (pid != s->cur.pid)
        return;
    held_drain(s, &s->cur);
    bool was_ready = s->cur.ready;
    g_autofree char *error = g_steal_pointer(&s->cur.error);
    int exe = s->cur.exe;
    char **argv = s->cur.argv;
    s->cur.exe = -1;
    s->cur.argv = NULL;
    daemon_drop(&s->cur);
    s->cur.exe = exe; /* what serves again after a crash */
    s->cur.argv = argv;
    bool exited = WIFEXITED(status);
    int code = exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (s->handing_over) {
        s->handing_over = false;
        if (s->next.pid && s->next.standby)
            attach_next(s);
        return;
    }
    if (s->next.pid)
        return; /* a takeover is on its way: its daemon attaches when ready */
    if (s->stopping || (exited && code == 0) || s->fuse_fd < 0 || !connection_alive(s->fuse_fd)) {
        /* unmounted, told to stop, or never mounted (bad options: code 2) */
        reply_client(s, "error: the daemon stopped");
        sd_notify(0, "STOPPING=1");
        finish(s, exited ? code : 1);
        return;
    }
    g_autofree char *how = exit_text(status);
    log_event(G_LOG_LEVEL_WARNING, LOG_ID_RESTART,
              "supervisor: the daemon (pid %d) %s; a new one takes the connection over", (int)pid,
              how);
    s->restarts++;
    /* one that served before it died (kill -9, a crash) comes back at
     * once; one that died before it served, whatever killed it (a broken
     * config, the OOM killer at start-up), is retried a few times, then the
     * supervisor gives up rather than keep every access waiting */
    s->failed_starts = was_ready ? 0 : s->failed_starts + 1;
    if (!was_ready)
        count(s, offsetof(StateHeader, failed_starts));
    if (s->failed_starts >= START_TRIES)
        give_up(s, error ? error : how);
    else if (s->failed_starts >= 2)
        g_timeout_add(START_PAUSE_MS, respawn_later, s);
    else
        spawn_daemon(s, &s->cur, s->cur.exe, s->cur.argv, LINK_ATTACH);
}

static void spawn_daemon(Sup *s, Daemon *d, int exe, char **argv, LinkMode mode)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        g_warning("ckptfs: supervisor: socketpair: %s", g_strerror(errno));
        finish(s, 1);
        return;
    }
    if (mode != LINK_MOUNT && s->fuse_fd < 0)
        mode = LINK_MOUNT;
    g_autofree char *env =
        g_strdup_printf("%d,%d,%d,%d,%d", sv[1], s->state_fd, s->fuse_fd, s->daemonized, (int)mode);
    if (mode == LINK_ATTACH)
        held_send(s, sv[0]); /* queued before the daemon can look */
    pid_t pid = fork();
    if (pid == 0) {
        set_cloexec(sv[1], false);
        set_cloexec(s->state_fd, false);
        set_cloexec(s->fuse_fd, false);
        setenv(ENV_DAEMON, env, 1);
        if (mode == LINK_ATTACH)
            setenv(ENV_HELD_LIST, "1", 1);
        execveat(exe, "", argv, environ, AT_EMPTY_PATH);
        _exit(127);
    }
    close(sv[1]);
    if (pid < 0) {
        g_warning("ckptfs: supervisor: fork: %s", g_strerror(errno));
        close(sv[0]);
        finish(s, 1);
        return;
    }
    d->pid = pid;
    d->ready = d->standby = d->attaching = false;
    d->exe = exe;
    d->argv = argv;
    d->sock = sv[0];
    d->sock_src = g_unix_fd_add(d->sock, G_IO_IN | G_IO_HUP, on_daemon_msg, d);
    g_child_watch_add(pid, on_daemon_exit, s);
}

/* After a takeover: the supervisor becomes the binary that now serves, and
 * goes on where it was (supervisor_resume). */
static void exec_self(Sup *s)
{
    g_autofree char *env =
        g_strdup_printf("%d,%d,%d,%d,%d,%d,%d,%" G_GUINT64_FORMAT ",%" G_GINT64_FORMAT, s->fuse_fd,
                        s->state_fd, s->listen_fd, (int)s->cur.pid, s->cur.sock, s->cur.exe,
                        s->daemonized, s->restarts, s->started_us);
    int fds[] = {s->fuse_fd, s->state_fd, s->listen_fd, s->cur.sock, s->cur.exe};
    for (size_t i = 0; i < G_N_ELEMENTS(fds); i++)
        set_cloexec(fds[i], false);
    setenv(ENV_RESUME, env, 1);
    held_set_inherit(s->held, true);
    execveat(s->cur.exe, "", s->cur.argv, environ, AT_EMPTY_PATH);
    int err = errno;
    unsetenv(ENV_RESUME);
    held_set_inherit(s->held, false);
    for (size_t i = 0; i < G_N_ELEMENTS(fds); i++)
        set_cloexec(fds[i], true);
    g_warning("ckptfs: supervisor: cannot become the new binary (%s); the old supervisor goes "
              "on, the new daemon serves",
              g_strerror(err));
}

/* ---- requests on the takeover socket ---- */

static void on_takeover(Sup *s, char *payload, size_t len, int exe)
{
    /* payload: layout NUL argv... */
    size_t n = strnlen(payload, len);
    const char *refusal = NULL;
    if (n >= len)
        refusal = "error: not a takeover request";
    else if (strcmp(payload, state_layout()) != 0)
        refusal = "error: the new binary keeps its state in another layout; it cannot take this "
                  "mount over (unmount and mount again to upgrade)";
    else if (exe < 0)
        refusal = "error: the request carries no binary";
    else if (s->next.pid || s->handing_over || (s->cur.pid && !s->cur.ready) ||
             (!s->cur.pid && !s->given_up) || s->fuse_fd < 0)
        refusal = "error: busy (the daemon is starting or being replaced)";
    else if (!connection_alive(s->fuse_fd))
        refusal = GOING_AWAY;
    if (refusal) {
        if (exe >= 0)
            close(exe);
        reply_client(s, refusal);
        return;
    }
    /* then the new daemon's command line */
    char **argv = split_nul(payload + n + 1, len - n - 1);
    if (!argv[0]) {
        g_strfreev(argv);
        close(exe);
        reply_client(s, "error: the request carries no command line");
        return;
    }
    g_message("ckptfs: supervisor: a takeover of %s: starting the new daemon beside the "
              "running one",
              s->mnt);
    sd_notify(0, "RELOADING=1");
    spawn_daemon(s, &s->next, exe, argv, LINK_STANDBY);
}

/* The processes as this supervisor knows them, for status_json. */
static char *status_of(Sup *s, bool *healthy)
{
    if (!sup_state(s)) {
        *healthy = false;
        return g_strdup_printf("error: the state memfd: %s", g_strerror(errno));
    }
    StatusProcs p = {
        .supervisor_pid = (int)getpid(),
        .supervisor_started_us = s->started_us,
        .restarts = s->restarts,
        .state = s->given_up                  ? "failed"
                 : s->next.pid                ? "replacing"
                 : s->cur.pid && s->cur.ready ? "serving"
                                              : "starting",
        .why = s->failed_why,
        .daemon_pid = s->cur.pid && s->cur.ready ? (int)s->cur.pid : 0,
        .connection_gone = s->fuse_fd >= 0 && !connection_alive(s->fuse_fd),
    };
    return status_json(&s->st, &p, healthy);
}

static gboolean on_client_msg(gint fd, GIOCondition cond, gpointer p)
{
    Conn *c = p;
    Sup *s = c->s;
    (void)cond;
    g_autofree char *buf = g_malloc(MSG_MAX);
    int got = -1;
    ssize_t r = recv_msg(fd, buf, MSG_MAX, &got);
    if (r <= 0) {
        if (got >= 0)
            close(got);
        c->src = 0;
        conn_close(c);
        return G_SOURCE_REMOVE;
    }
    if (strcmp(buf, "status") == 0) {
        if (got >= 0)
            close(got);
        bool healthy;
        g_autofree char *json = status_of(s, &healthy);
        send_text(fd, json);
        c->src = 0;
        conn_close(c);
        return G_SOURCE_REMOVE;
    }
    const char *refusal = NULL;
    if (!c->may_take_over)
        refusal = "error: only root or the mount's owner may take it over";
    else if (s->client && s->client != c)
        refusal = "error: busy (another takeover is on its way)";
    else if (strcmp(buf, "describe") != 0 && strcmp(buf, "takeover") != 0)
        refusal = "error: not a request this supervisor knows";
    else if (!connection_alive(s->fuse_fd))
        refusal = GOING_AWAY; /* a new mount there has its own supervisor */
    if (refusal) {
        if (got >= 0)
            close(got);
        send_text(fd, refusal);
        c->src = 0;
        conn_close(c);
        return G_SOURCE_REMOVE;
    }
    s->client = c;
    if (strcmp(buf, "describe") == 0) {
        if (got >= 0)
            close(got);
        g_autoptr(GByteArray) b = g_byte_array_new();
        g_byte_array_append(b, (const guint8 *)"argv", 5);
        if (s->cur.argv)
            append_nul(b, s->cur.argv);
        send_msg(fd, b->data, b->len, -1);
        return G_SOURCE_CONTINUE;
    }
    size_t head = strlen("takeover") + 1;
    on_takeover(s, buf + head, (size_t)r > head ? (size_t)r - head : 0, got);
    /* a refusal closed it already (reply_client) */
    return s->client == c ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static gboolean on_accept(gint fd, GIOCondition cond, gpointer p)
{
    Sup *s = p;
    (void)cond;
    int fdc = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    if (fdc < 0)
        return G_SOURCE_CONTINUE;
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    Conn *c = g_new0(Conn, 1);
    c->s = s;
    c->fd = fdc;
    c->may_take_over = getsockopt(fdc, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0 &&
                       (cr.uid == 0 || cr.uid == geteuid());
    c->src = g_unix_fd_add(fdc, G_IO_IN | G_IO_HUP, on_client_msg, c);
    return G_SOURCE_CONTINUE;
}

/* ---- signals ---- */

typedef struct {
    Sup *s;
    int sig;
} SigArg;

static gboolean on_signal(gpointer p)
{
    SigArg *a = p;
    Sup *s = a->s;
    if (a->sig == SIGHUP) {
        /* a reload is the daemon's to do: its config file, its logs */
        if (s->cur.pid)
            kill(s->cur.pid, SIGHUP);
        return G_SOURCE_CONTINUE;
    }
    s->stopping = true;
    sd_notify(0, "STOPPING=1");
    if (s->next.pid)
        kill(s->next.pid, SIGTERM);
    if (s->cur.pid) {
        kill(s->cur.pid, a->sig);
    } else {
        if (connection_alive(s->fuse_fd)) /* else it is unmounted already */
            unmount_lazily(s->mnt, mount_dev(s));
        finish(s, s->given_up ? 1 : 0);
    }
    return G_SOURCE_CONTINUE;
}

unsigned long mount_dev_at(const char *mnt)
{
    struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
    struct libmnt_fs *fs = tb ? mnt_table_find_target(tb, mnt, MNT_ITER_BACKWARD) : NULL;
    unsigned long dev = fs ? (unsigned long)mnt_fs_get_devno(fs) : 0;
    mnt_unref_table(tb);
    return dev;
}

bool unmount_lazily(const char *mnt, unsigned long dev)
{
    if (!mnt[0])
        return true;
    if (dev && mount_dev_at(mnt) != dev)
        return true; /* ours went already; what is there now is another's */
    if (geteuid() == 0 && umount2(mnt, MNT_DETACH) == 0)
        return true;
    const char *argv[] = {"fusermount3", "-u", "-z", mnt, NULL};
    int status = 0;
    return g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                        NULL, NULL, NULL, NULL, &status, NULL) &&
           g_spawn_check_wait_status(status, NULL);
}

static int run(Sup *s)
{
    s->loop = g_main_loop_new(NULL, FALSE);
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    SigArg args[G_N_ELEMENTS(sigs)];
    for (size_t i = 0; i < G_N_ELEMENTS(sigs); i++) {
        args[i] = (SigArg){s, sigs[i]};
        g_unix_signal_add(sigs[i], on_signal, &args[i]);
    }
    signal(SIGPIPE, SIG_IGN);
    proctitle_set("ckptfs: supervisor");
    if (s->fuse_fd >= 0)
        have_connection(s);
    if (s->adopting) {
        spawn_daemon(s, &s->next, s->adopt_exe, s->adopt_argv, LINK_STANDBY); /* it owns them */
        s->adopt_exe = -1;
        s->adopt_argv = NULL;
    } else if (!s->cur.pid)
        spawn_daemon(s, &s->cur, s->cur.exe, s->cur.argv, LINK_MOUNT);
    g_main_loop_run(s->loop);
    g_main_loop_unref(s->loop);
    close_listener(s);
    if (s->fuse_fd >= 0)
        close(s->fuse_fd);
    close(s->state_fd);
    if (s->adopt_exe >= 0)
        close(s->adopt_exe);
    g_strfreev(s->adopt_argv);
    g_free(s->fail_buf);
    g_free(s->fallback_why);
    g_free(s->failed_why);
    if (s->client)
        conn_close(s->client);
    if (s->st.hdr)
        state_close(&s->st);
    daemon_drop(&s->cur);
    daemon_drop(&s->next);
    held_set_free(s->held);
    return s->status;
}

static void sup_init(Sup *s)
{
    memset(s, 0, sizeof *s);
    s->state_fd = s->fuse_fd = s->listen_fd = s->ready_pipe = s->adopt_exe = -1;
    s->st.fd = -1;
    s->started_us = g_get_real_time();
    s->held = held_set_new();
    daemon_init(&s->cur, s);
    daemon_init(&s->next, s);
}

/* Goes into the background as a daemon does: the calling process waits
 * for the supervisor's first word on a pipe (ready_pipe) and exits with
 * it, saying `note` (if any) when that is success; this returns in the
 * supervisor, in a session of its own.  False when it cannot. */
static bool sup_background(Sup *s, const char *note)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return false;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid > 0) {
        close(p[1]);
        unsigned char b = 1;
        if (read(p[0], &b, 1) != 1 || b != 0)
            waitpid(pid, NULL, 0); /* a supervisor that failed exits: reap it */
        else if (note)
            g_message("%s", note);
        _exit(b);
    }
    close(p[0]);
    setsid();
    s->ready_pipe = p[1];
    s->daemonized = true;
    return true;
}

/* A daemon keeps no directory busy (one an operator may unmount). */
static void leave_cwd(void)
{
    if (chdir("/") < 0) {
    }
}

/* Logs as the command line argv asks (its log= and log_level=, config=
 * included): a supervisor that a takeover re-executed, or one that adopted
 * a daemon, keeps logging where the daemons it runs do.  Before any thread.
 * A command line that does not parse (a config file broken meanwhile)
 * leaves the log as it is. */
static void log_like(char **argv, const char *mnt)
{
    g_auto(GStrv) copy = g_strdupv(argv);
    struct fuse_args args = FUSE_ARGS_INIT((int)g_strv_length(copy), copy);
    FsOptions o;
    memset(&o, 0, sizeof o);
    if (fs_options_parse(&args, &o) == 0) /* fenced off the backing directory as the mount's */
        log_open(o.log, o.log_level, false, o.backing_arg, mnt);
    fuse_opt_free_args(&args);
    fs_options_clear(&o);
}

bool supervisor_started_me(void)
{
    return g_getenv(ENV_DAEMON) != NULL;
}

bool supervisor_resuming(void)
{
    return g_getenv(ENV_RESUME) != NULL;
}

int supervisor_resume(char **argv)
{
    long long v[9];
    const char *env = g_getenv(ENV_RESUME);
    if (!env || !parse_ints(env, v, 9)) {
        fprintf(stderr, "ckptfs: bad %s\n", ENV_RESUME);
        return 1;
    }
    Sup s;
    sup_init(&s);
    s.fuse_fd = (int)v[0];
    s.state_fd = (int)v[1];
    s.listen_fd = (int)v[2];
    s.cur.pid = (GPid)v[3];
    s.cur.sock = (int)v[4];
    s.cur.exe = (int)v[5];
    s.daemonized = v[6];
    s.restarts = (guint64)v[7];
    s.started_us = v[8];
    s.cur.argv = g_strdupv(argv);
    s.cur.ready = s.ready_once = true;
    g_unsetenv(ENV_RESUME);
    held_set_resume(s.held);
    int fds[] = {s.fuse_fd, s.state_fd, s.listen_fd, s.cur.sock, s.cur.exe};
    for (size_t i = 0; i < G_N_ELEMENTS(fds); i++)
        set_cloexec(fds[i], true);
    read_mountpoint(&s);
    log_like(s.cur.argv, s.mnt);
    s.loop = NULL;
    /* the daemon is this process's child still: exec keeps children */
    if (s.cur.sock >= 0)
        s.cur.sock_src = g_unix_fd_add(s.cur.sock, G_IO_IN | G_IO_HUP, on_daemon_msg, &s.cur);
    g_child_watch_add(s.cur.pid, on_daemon_exit, &s);
    return run(&s);
}

int supervisor_start(char **argv, bool supervise, bool foreground, const char *started_note,
                     SupLink *link)
{
    memset(link, 0, sizeof *link);
    g_mutex_init(&link->letgo_lock);
    link->sock = link->state_fd = link->fuse_fd = link->conn_fd = link->letgo_wake = -1;
    link->argv = argv;
    link->main_thread = pthread_self();
    const char *denv = g_getenv(ENV_DAEMON);
    if (denv) {
        long long v[5];
        if (!parse_ints(denv, v, 5) || v[4] < LINK_MOUNT || v[4] > LINK_STANDBY) {
            fprintf(stderr, "ckptfs: bad %s\n", ENV_DAEMON);
            return 1;
        }
        link->sock = (int)v[0];
        link->state_fd = (int)v[1];
        link->fuse_fd = (int)v[2];
        link->daemonized = v[3];
        link->mode = (LinkMode)v[4];
        for (int i = 0; i < 3; i++)
            set_cloexec((int)v[i], true);
        g_unsetenv(ENV_DAEMON);
        link->held_coming = link->mode == LINK_ATTACH && g_getenv(ENV_HELD_LIST);
        g_unsetenv(ENV_HELD_LIST);
        return 0;
    }
    if (!supervise)
        return 0;
    Sup s;
    sup_init(&s);
    s.cur.exe = open("/proc/self/exe", O_PATH | O_CLOEXEC);
    if (s.cur.exe < 0) {
        fprintf(stderr, "ckptfs: supervisor: its own binary: %s\n", g_strerror(errno));
        return 1;
    }
    s.cur.argv = g_strdupv(argv);
    s.state_fd = state_create_fd();
    if (s.state_fd < 0) {
        fprintf(stderr, "ckptfs: supervisor: state memfd: %s\n", g_strerror(-s.state_fd));
        return 1;
    }
    /* the caller (mount(8), a shell) gets its answer once the mount is up */
    if (!foreground) {
        if (!sup_background(&s, started_note))
            return 1;
        leave_cwd();
    }
    exit(run(&s));
}

/* ---- `ckptfs --takeover` ---- */

static char *real_mountpoint(const char *mnt)
{
    return ck_mountpoint_path(mnt);
}

/* Whether a ckptfs is mounted at mnt in this mount namespace. */
static bool ckptfs_mounted_at(const char *mnt)
{
    return mounttab_is_ckptfs(mnt, "fuse.ckptfs");
}

/* An adopted daemon is not this process's child: its end is seen on a
 * pidfd, and handled as a child's exit would be. */
static gboolean on_adopted_exit(gint fd, GIOCondition cond, gpointer p)
{
    Sup *s = p;
    (void)fd;
    (void)cond;
    s->cur.pidfd_src = 0;
    on_daemon_exit(s->cur.pid, s->handing_over ? SUPERVISOR_EXIT_HANDOVER << 8 : SIGKILL, s);
    return G_SOURCE_REMOVE;
}

/* The new command line of a takeover: the old one with its -o options
 * replaced by opts (when given), checked by this binary. */
static char **takeover_argv(char **old, const char *opts, TakeoverCheck check, const char *mnt)
{
    g_auto(GStrv) given = opts ? fs_argv_with_options(old, opts) : g_strdupv(old);
    char **argv = fs_argv_absolute(given);
    /* checked here, by the binary that will serve: a bad option or config
     * file stops the takeover before anything changes */
    if (check(argv) != 0) {
        fprintf(stderr, "ckptfs: --takeover %s: refused; the running daemon goes on serving\n",
                mnt);
        g_strfreev(argv);
        return NULL;
    }
    return argv;
}

/* `--takeover` of a daemon whose supervisor died: this process becomes its
 * supervisor (in the background, as a mount's first process does), starts
 * its own daemon as a standby, and has the adopted one hand over. */
static int adopt(const char *mnt, int c, const char *opts, TakeoverCheck check)
{
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    g_autofree char *buf = g_malloc(MSG_MAX);
    int fds[2];
    ssize_t r =
        getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0 && send_text(c, "adopt") == 0
            ? recv_fds(c, buf, MSG_MAX, fds, 2)
            : -EIO;
    if (r <= 6 || strcmp(buf, "adopt") != 0 || fds[0] < 0 || fds[1] < 0) {
        fprintf(stderr, "ckptfs: --takeover %s: %s\n", mnt,
                r > 0 ? buf : "the daemon closed the connection");
        close(c);
        return 1;
    }
    g_auto(GStrv) old = split_nul(buf + 6, (size_t)r - 6);
    char **argv = takeover_argv(old, opts, check, mnt);
    if (!argv) {
        close(fds[0]);
        close(fds[1]);
        close(c);
        return 2;
    }
    Sup s;
    sup_init(&s);
    s.fuse_fd = fds[0];
    s.state_fd = fds[1];
    s.cur.pid = cr.pid;
    s.cur.sock = c;
    s.cur.ready = s.ready_once = true;
    s.cur.argv = g_steal_pointer(&old);
    g_autofree char *exe_path = g_strdup_printf("/proc/%d/exe", (int)cr.pid);
    s.cur.exe = open(exe_path, O_PATH | O_CLOEXEC); /* to fall back on */
    s.cur.pidfd = pidfd_open(cr.pid, 0);
    s.adopting = true;
    s.adopt_exe = open("/proc/self/exe", O_PATH | O_CLOEXEC);
    s.adopt_argv = argv;
    if (s.cur.exe < 0 || s.cur.pidfd < 0 || s.adopt_exe < 0) {
        fprintf(stderr, "ckptfs: --takeover %s: the daemon (pid %d): %s\n", mnt, (int)cr.pid,
                g_strerror(errno));
        return 1;
    }
    g_strlcpy(s.mnt, mnt, sizeof s.mnt);
    if (!sup_background(&s, NULL))
        return 1;
    log_like(s.adopt_argv, mnt);
    leave_cwd();
    s.cur.sock_src = g_unix_fd_add(c, G_IO_IN | G_IO_HUP, on_daemon_msg, &s.cur);
    s.cur.pidfd_src = g_unix_fd_add(s.cur.pidfd, G_IO_IN, on_adopted_exit, &s);
    exit(run(&s));
}

int supervisor_takeover(const char *mountpoint, const char *opts, TakeoverCheck check)
{
    g_autofree char *real = real_mountpoint(mountpoint);
    if (!real) {
        fprintf(stderr, "ckptfs: --takeover %s: %s\n", mountpoint, g_strerror(errno));
        return 1;
    }
    /* a mount just made may not have bound its socket yet, and the
     * supervisor of the one unmounted before it may hold the name a moment
     * longer (it answers that its mount is going away) */
    int fd = -1;
    g_autofree char *buf = g_malloc(MSG_MAX);
    ssize_t r = -EIO;
    for (int i = 0; i < 250; i++) {
        if ((fd = ck_control_connect(real, "supervisor")) < 0) {
            if ((fd = ck_control_connect(real, "daemon")) >= 0)
                return adopt(real, fd, opts, check);
            if (!ckptfs_mounted_at(real))
                break;
            g_usleep(20000);
            continue;
        }
        struct timeval tv = {TAKEOVER_WAIT_S, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        r = send_text(fd, "describe") == 0 ? recv_msg(fd, buf, MSG_MAX, NULL) : -EIO;
        /* an old supervisor may also exit with the request still queued */
        if ((r <= 0 || strcmp(buf, GOING_AWAY) == 0) && ckptfs_mounted_at(real)) {
            close(fd);
            fd = -1;
            g_usleep(20000);
            continue;
        }
        break;
    }
    if (fd < 0) {
        fprintf(stderr,
                ckptfs_mounted_at(real)
                    ? "ckptfs: --takeover %s: no supervisor answers for this mount (mounted with "
                      "-o nosupervise?)\n"
                    : "ckptfs: --takeover %s: no ckptfs is mounted here\n",
                real);
        return 1;
    }
    if (r <= 5 || strcmp(buf, "argv") != 0) {
        fprintf(stderr, "ckptfs: --takeover %s: %s\n", real,
                r > 0 ? buf : "the supervisor closed the connection");
        close(fd);
        return 1;
    }
    g_auto(GStrv) old = split_nul(buf + 5, (size_t)r - 5);
    g_auto(GStrv) argv = takeover_argv(old, opts, check, real);
    if (!argv) {
        close(fd);
        return 2;
    }
    int exe = open("/proc/self/exe", O_PATH | O_CLOEXEC);
    g_autoptr(GByteArray) req = g_byte_array_new();
    g_byte_array_append(req, (const guint8 *)"takeover", 9);
    g_byte_array_append(req, (const guint8 *)state_layout(), (guint)strlen(state_layout()) + 1);
    append_nul(req, argv);
    r = exe >= 0 && send_msg(fd, req->data, req->len, exe) == 0 ? recv_msg(fd, buf, MSG_MAX, NULL)
                                                                : -EIO;
    if (exe >= 0)
        close(exe);
    close(fd);
    if (r > 0 && (strcmp(buf, "ok") == 0 || g_str_has_prefix(buf, "ok "))) {
        if (buf[2])
            fprintf(stderr, "ckptfs: --takeover %s: done; %s\n", real, buf + 3);
        return 0;
    }
    fprintf(stderr, "ckptfs: --takeover %s: %s\n", real,
            r > 0 ? buf : "the supervisor closed the connection");
    return 1;
}
