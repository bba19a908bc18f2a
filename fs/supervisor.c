#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "state.h"

#define ENV_DAEMON            "CKPTFS_SUPERVISED"     /* sock,state,fuse,daemonized */
#define ENV_RESUME            "CKPTFS_SUPERVISOR_FDS" /* fuse,state,listen,client,daemonized */
#define RESTART_FAILED_STARTS 3    /* daemons in a row that died before serving ... */
#define RESTART_PAUSE_MS      1000 /* ... and the next starts after this long */

/* ---- messages: one word, maybe one descriptor ---- */

static int send_msg(int sock, const char *text, int fd)
{
    struct iovec iov = {(void *)text, strlen(text)};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } c;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&c, 0, sizeof c);
        m.msg_control = c.buf;
        m.msg_controllen = sizeof c.buf;
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &fd, sizeof fd);
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Returns the length read (0 at the end), or -errno; *fd gets a passed
 * descriptor (CLOEXEC) or -1. */
static ssize_t recv_msg(int sock, char *buf, size_t len, int *fd)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } c;
    struct iovec iov = {buf, len - 1};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    if (fd)
        *fd = -1;
    ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (r < 0)
        return -errno;
    buf[r] = '\0';
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
            int got;
            memcpy(&got, CMSG_DATA(h), sizeof got);
            if (fd && *fd < 0)
                *fd = got;
            else
                close(got);
        }
    }
    return r;
}

/* The takeover socket of a mount point: abstract, named by a hash of its
 * real path (any length fits). */
static socklen_t sock_addr(const char *mnt, struct sockaddr_un *a)
{
    g_autofree char *sum = g_compute_checksum_for_string(G_CHECKSUM_SHA256, mnt, -1);
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = g_snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "ckptfs-supervisor/%s", sum);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void set_cloexec(int fd, bool on)
{
    if (fd >= 0)
        fcntl(fd, F_SETFD, on ? FD_CLOEXEC : 0);
}

/* ---- the daemon's end ---- */

static gpointer link_thread(gpointer p)
{
    SupLink *l = p;
    char buf[64];
    for (;;) {
        ssize_t r = recv_msg(l->sock, buf, sizeof buf, NULL);
        if (r == -EINTR)
            continue;
        if (r <= 0) {
            g_warning("ckptfs: the supervisor is gone: a crash of this daemon now ends the "
                      "mount (ENOTCONN)");
            return NULL;
        }
        if (strcmp(buf, "handover") == 0 && l->handover) {
            l->handover(l->ctx);
            return NULL;
        }
    }
}

int suplink_mounted(SupLink *l, int fuse_fd)
{
    return l->sock < 0 ? 0 : send_msg(l->sock, "mounted", fuse_fd);
}

void suplink_ready(SupLink *l)
{
    if (l->sock < 0)
        return;
    send_msg(l->sock, "ready", -1);
    g_thread_unref(g_thread_new("ckptfs-suplink", link_thread, l));
}

/* ---- the supervisor ---- */

typedef struct {
    char **argv;
    GMainLoop *loop;
    int state_fd, fuse_fd, listen_fd, client_fd;
    int sock;       /* to the daemon */
    int ready_pipe; /* to the terminal's process until the first ready, else -1 */
    bool daemonized;
    GPid pid;
    bool ready_once, stopping, handing_over;
    char *new_exe;
    int status;
    bool serving;        /* the current daemon said "ready" */
    guint failed_starts; /* daemons in a row that died before serving */
    char mnt[sizeof((StateHeader *)0)->mountpoint];
} Sup;

static void spawn_daemon(Sup *s);

static void finish(Sup *s, int status)
{
    s->status = status;
    if (s->ready_pipe >= 0) {
        unsigned char b = (unsigned char)status;
        if (write(s->ready_pipe, &b, 1) < 0) {
        }
        close(s->ready_pipe);
        s->ready_pipe = -1;
    }
    g_main_loop_quit(s->loop);
}

static void reply_client(Sup *s, const char *text)
{
    if (s->client_fd < 0)
        return;
    send_msg(s->client_fd, text, -1);
    close(s->client_fd);
    s->client_fd = -1;
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

static void on_ready(Sup *s)
{
    s->serving = true;
    if (!s->ready_once) {
        s->ready_once = true;
        if (s->ready_pipe >= 0) {
            unsigned char ok = 0;
            if (write(s->ready_pipe, &ok, 1) < 0) {
            }
            close(s->ready_pipe);
            s->ready_pipe = -1;
            detach_stdio();
        }
    }
    if (s->handing_over || s->client_fd >= 0) {
        s->handing_over = false;
        reply_client(s, "ok");
    }
    sd_notify(0, "READY=1");
}

/* The mount point the daemon wrote into the state header. */
static void read_mountpoint(Sup *s)
{
    ssize_t r = pread(s->state_fd, s->mnt, sizeof s->mnt - 1, offsetof(StateHeader, mountpoint));
    s->mnt[r > 0 ? r : 0] = '\0';
    s->mnt[sizeof s->mnt - 1] = '\0';
}

static gboolean on_accept(gint fd, GIOCondition cond, gpointer p);

static void listen_takeover(Sup *s)
{
    if (s->listen_fd < 0) {
        read_mountpoint(s);
        if (!s->mnt[0])
            return;
        struct sockaddr_un a;
        socklen_t len = sock_addr(s->mnt, &a);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, 4) < 0) {
            g_warning("ckptfs: supervisor: no takeover socket for %s: %s", s->mnt,
                      g_strerror(errno));
            if (fd >= 0)
                close(fd);
            return;
        }
        s->listen_fd = fd;
    }
    g_unix_fd_add(s->listen_fd, G_IO_IN, on_accept, s);
}

static gboolean on_daemon_msg(gint fd, GIOCondition cond, gpointer p)
{
    Sup *s = p;
    (void)cond;
    char buf[64];
    int got = -1;
    ssize_t r = recv_msg(fd, buf, sizeof buf, &got);
    if (r <= 0) {
        if (got >= 0)
            close(got);
        close(fd);
        if (s->sock == fd)
            s->sock = -1;
        return G_SOURCE_REMOVE;
    }
    if (strcmp(buf, "mounted") == 0 && got >= 0 && s->fuse_fd < 0) {
        s->fuse_fd = got;
        listen_takeover(s);
    } else if (got >= 0) {
        close(got);
    }
    if (strcmp(buf, "ready") == 0)
        on_ready(s);
    return G_SOURCE_CONTINUE;
}

/* After a takeover: this supervisor becomes the new binary. */
static void exec_new(Sup *s)
{
    g_autofree char *env = g_strdup_printf("%d,%d,%d,%d,%d", s->fuse_fd, s->state_fd, s->listen_fd,
                                           s->client_fd, s->daemonized);
    g_setenv(ENV_RESUME, env, TRUE);
    int fds[] = {s->fuse_fd, s->state_fd, s->listen_fd, s->client_fd};
    for (size_t i = 0; i < G_N_ELEMENTS(fds); i++)
        set_cloexec(fds[i], false);
    execv(s->new_exe, s->argv);
    int err = errno;
    for (size_t i = 0; i < G_N_ELEMENTS(fds); i++)
        set_cloexec(fds[i], true);
    g_unsetenv(ENV_RESUME);
    g_warning("ckptfs: supervisor: cannot run %s (%s): the old daemon goes on", s->new_exe,
              g_strerror(err));
    g_autofree char *msg = g_strdup_printf("error: cannot run %s: %s", s->new_exe, g_strerror(err));
    reply_client(s, msg);
    s->handing_over = false;
    spawn_daemon(s);
}

static gboolean respawn_later(gpointer p)
{
    spawn_daemon(p);
    return G_SOURCE_REMOVE;
}

bool unmount_lazily(const char *mnt)
{
    if (!mnt[0])
        return true;
    if (geteuid() == 0 && umount2(mnt, MNT_DETACH) == 0)
        return true;
    const char *argv[] = {"fusermount3", "-u", "-z", mnt, NULL};
    int status = 0;
    return g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                        NULL, NULL, NULL, NULL, &status, NULL) &&
           g_spawn_check_wait_status(status, NULL);
}

/* An unmounted (aborted) connection polls as an error: a daemon that died
 * after it, or on its way out, is not replaced. */
static bool connection_alive(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) >= 0 && !(p.revents & (POLLERR | POLLNVAL));
}

static void on_daemon_exit(GPid pid, gint status, gpointer p)
{
    Sup *s = p;
    g_spawn_close_pid(pid);
    s->pid = 0;
    bool exited = WIFEXITED(status);
    int code = exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (s->handing_over && exited && code == SUPERVISOR_EXIT_HANDOVER) {
        exec_new(s);
        return;
    }
    if (s->stopping || (exited && code == 0) || s->fuse_fd < 0 || !connection_alive(s->fuse_fd)) {
        /* unmounted, told to stop, or never mounted (bad options: code 2) */
        reply_client(s, "error: the daemon stopped");
        sd_notify(0, "STOPPING=1");
        finish(s, exited ? code : 1);
        return;
    }
    if (s->handing_over) {
        reply_client(s, "error: the daemon died during the handover");
        s->handing_over = false;
    }
    log_event(G_LOG_LEVEL_WARNING, LOG_ID_RESTART,
              "supervisor: the daemon (pid %d) %s %d; a new one takes the connection over",
              (int)pid, exited ? "exited with" : "was killed by signal",
              exited ? code : WTERMSIG(status));
    /* a daemon that fails before it serves, again and again (it cannot
     * start): one try a second; one killed from outside comes back at once */
    bool killed = !exited && WTERMSIG(status) == SIGKILL; /* kill -9, the OOM killer */
    s->failed_starts = s->serving || killed ? 0 : s->failed_starts + 1;
    if (s->failed_starts >= RESTART_FAILED_STARTS)
        g_timeout_add(RESTART_PAUSE_MS, respawn_later, s);
    else
        spawn_daemon(s);
}

static void spawn_daemon(Sup *s)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        g_warning("ckptfs: supervisor: socketpair: %s", g_strerror(errno));
        finish(s, 1);
        return;
    }
    g_autofree char *env =
        g_strdup_printf("%d,%d,%d,%d", sv[1], s->state_fd, s->fuse_fd, s->daemonized);
    pid_t pid = fork();
    if (pid == 0) {
        set_cloexec(sv[1], false);
        set_cloexec(s->state_fd, false);
        set_cloexec(s->fuse_fd, false);
        setenv(ENV_DAEMON, env, 1);
        execv("/proc/self/exe", s->argv);
        _exit(127);
    }
    close(sv[1]);
    if (pid < 0) {
        g_warning("ckptfs: supervisor: fork: %s", g_strerror(errno));
        close(sv[0]);
        finish(s, 1);
        return;
    }
    s->pid = pid;
    s->serving = false;
    s->sock = sv[0];
    g_unix_fd_add(s->sock, G_IO_IN | G_IO_HUP, on_daemon_msg, s);
    g_child_watch_add(pid, on_daemon_exit, s);
}

static gboolean on_accept(gint fd, GIOCondition cond, gpointer p)
{
    Sup *s = p;
    (void)cond;
    int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return G_SOURCE_CONTINUE;
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    char buf[PATH_MAX + 32];
    struct timeval tv = {5, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const char *refusal = NULL;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 ||
        (cr.uid != 0 && cr.uid != geteuid()))
        refusal = "error: only root or the mount's owner may take it over";
    else if (recv_msg(c, buf, sizeof buf, NULL) <= 0 || !g_str_has_prefix(buf, "takeover "))
        refusal = "error: not a takeover request";
    else if (!g_str_has_prefix(buf + strlen("takeover "), state_layout()) ||
             buf[strlen("takeover ") + strlen(state_layout())] != ' ')
        refusal = "error: the new binary keeps its state in another layout; it cannot take this "
                  "mount over (unmount and mount again to upgrade)";
    else if (s->handing_over || s->client_fd >= 0 || !s->pid || !s->ready_once)
        refusal = "error: busy (the daemon is starting or being replaced)";
    if (refusal) {
        send_msg(c, refusal, -1);
        close(c);
        return G_SOURCE_CONTINUE;
    }
    g_free(s->new_exe);
    s->new_exe = g_strdup(buf + strlen("takeover ") + strlen(state_layout()) + 1);
    s->client_fd = c;
    s->handing_over = true;
    sd_notify(0, "RELOADING=1");
    if (send_msg(s->sock, "handover", -1) < 0) {
        s->handing_over = false;
        reply_client(s, "error: the daemon does not answer");
    }
    return G_SOURCE_CONTINUE;
}

static gboolean on_signal(gpointer p)
{
    Sup *s = *(Sup **)p;
    int sig = GPOINTER_TO_INT(((gpointer *)p)[1]);
    s->stopping = true;
    sd_notify(0, "STOPPING=1");
    if (s->pid) {
        kill(s->pid, sig);
    } else {
        unmount_lazily(s->mnt);
        finish(s, 0);
    }
    return G_SOURCE_CONTINUE;
}

static int run(Sup *s)
{
    s->loop = g_main_loop_new(NULL, FALSE);
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    gpointer args[G_N_ELEMENTS(sigs)][2];
    for (size_t i = 0; i < G_N_ELEMENTS(sigs); i++) {
        args[i][0] = s;
        args[i][1] = GINT_TO_POINTER(sigs[i]);
        g_unix_signal_add(sigs[i], on_signal, args[i]);
    }
    signal(SIGPIPE, SIG_IGN);
    if (s->listen_fd >= 0) {
        read_mountpoint(s);
        listen_takeover(s);
    }
    spawn_daemon(s);
    g_main_loop_run(s->loop);
    g_main_loop_unref(s->loop);
    if (s->fuse_fd >= 0)
        close(s->fuse_fd);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    close(s->state_fd);
    g_free(s->new_exe);
    return s->status;
}

static bool parse_fds(const char *env, int *out, int n)
{
    g_auto(GStrv) parts = g_strsplit(env, ",", -1);
    if (g_strv_length(parts) != (guint)n)
        return false;
    for (int i = 0; i < n; i++)
        out[i] = atoi(parts[i]);
    return true;
}

int supervisor_start(char **argv, bool supervise, bool foreground, SupLink *link)
{
    memset(link, 0, sizeof *link);
    link->sock = link->state_fd = link->fuse_fd = -1;
    link->main_thread = pthread_self();
    const char *denv = g_getenv(ENV_DAEMON);
    if (denv) {
        int v[4];
        if (!parse_fds(denv, v, 4)) {
            fprintf(stderr, "ckptfs: bad %s\n", ENV_DAEMON);
            return 1;
        }
        link->sock = v[0];
        link->state_fd = v[1];
        link->fuse_fd = v[2];
        link->daemonized = v[3];
        for (int i = 0; i < 3; i++)
            set_cloexec(v[i], true);
        g_unsetenv(ENV_DAEMON);
        return 0;
    }
    Sup s = {.argv = argv,
             .sock = -1,
             .ready_pipe = -1,
             .listen_fd = -1,
             .client_fd = -1,
             .fuse_fd = -1};
    const char *renv = g_getenv(ENV_RESUME);
    if (renv) {
        int v[5];
        if (!parse_fds(renv, v, 5)) {
            fprintf(stderr, "ckptfs: bad %s\n", ENV_RESUME);
            return 1;
        }
        g_unsetenv(ENV_RESUME);
        s.fuse_fd = v[0];
        s.state_fd = v[1];
        s.listen_fd = v[2];
        s.client_fd = v[3];
        s.daemonized = v[4];
        s.ready_once = true;
        for (int i = 0; i < 4; i++)
            set_cloexec(v[i], true);
        exit(run(&s));
    }
    if (!supervise)
        return 0;
    s.state_fd = state_create_fd();
    if (s.state_fd < 0) {
        fprintf(stderr, "ckptfs: supervisor: state memfd: %s\n", g_strerror(-s.state_fd));
        return 1;
    }
    if (!foreground) {
        /* the caller (mount(8), a shell) gets its answer once the mount is
         * up; the supervisor goes on in a session of its own */
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return 1;
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid > 0) {
            close(p[1]);
            unsigned char b = 1;
            _exit(read(p[0], &b, 1) == 1 ? b : 1);
        }
        close(p[0]);
        setsid();
        if (chdir("/") < 0) {
        }
        s.ready_pipe = p[1];
        s.daemonized = true;
    }
    exit(run(&s));
}

int supervisor_takeover(const char *mountpoint)
{
    char *real = realpath(mountpoint, NULL);
    if (!real) {
        fprintf(stderr, "ckptfs: --takeover %s: %s\n", mountpoint, g_strerror(errno));
        return 1;
    }
    struct sockaddr_un a;
    socklen_t len = sock_addr(real, &a);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, len) < 0) {
        fprintf(stderr,
                "ckptfs: --takeover %s: no supervised ckptfs serves this mount point (mounted "
                "with -o nosupervise, or not ckptfs)\n",
                real);
        free(real);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_autofree char *req =
        g_strdup_printf("takeover %s %s", state_layout(), exe ? exe : "/proc/self/exe");
    char buf[512] = "";
    ssize_t r = send_msg(fd, req, -1) == 0 ? recv_msg(fd, buf, sizeof buf, NULL) : -EIO;
    close(fd);
    if (r > 0 && strcmp(buf, "ok") == 0) {
        free(real);
        return 0;
    }
    fprintf(stderr, "ckptfs: --takeover %s: %s\n", real,
            r > 0 ? buf : "the supervisor closed the connection");
    free(real);
    return 1;
}
