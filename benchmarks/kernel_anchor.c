/*
 * kernel_anchor: plain-socket anchor for gk-bench (the kernel's own TCP and UDP on loopback,
 * i.e. the upper bound for any user-space transport).
 *
 *   kernel_anchor server [--host A] --port P --work W --count N --size S [--wait spin|block|epoll] [--timeout T]
 *   kernel_anchor client --host H --port P --work W --count N --size S [--nodelay on|off]
 *                        [--wait spin|block|epoll] [--timeout T]
 *
 * Work items: tcp-stream, tcp-pingpong, udp-pingpong. See README.md.
 * Must run inside scripts/sandbox (OGK_SANDBOX=1), otherwise exits 3.
 */
#include "anchor_common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

enum work { W_TCP_STREAM, W_TCP_PINGPONG, W_UDP_PINGPONG };

#define TCP_POLL_MS 50                           /* blocking calls wake up this often to check the deadline */
#define UDP_POLL_MS 10
#define UDP_LOSS_NS (100ull * 1000000ull)        /* ping-pong: no echo within 100 ms = lost */
#define DONE_LINGER_NS (5ull * 1000000000ull)    /* server: wait this long for the client to leave */
#define GRACE_NS (200ull * 1000000ull)           /* after --timeout: last chance to exchange "done" */
#define STREAM_WRITE_BUF (256u * 1024u)
#define STREAM_READ_BUF (1024u * 1024u)
#define FIN_COPIES 3

/* tcp-stream: TCP_NODELAY on by default (measured 10-15 % faster than Nagle here with
 * 256 KiB writes, and no Nagle hold-back of the final partial segment). */
#define STREAM_NODELAY_DEFAULT 1

/* --wait default (see README). */
#define WAIT_SPIN_DEFAULT 1

static const char *work_names[] = { "tcp-stream", "tcp-pingpong", "udp-pingpong" };

static void usage(const char *msg) __attribute__((noreturn));
static void usage(const char *msg)
{
    if (msg != NULL)
        fprintf(stderr, "%s: %s\n", g_prog, msg);
    fprintf(stderr,
            "usage: kernel_anchor server [--host 127.0.0.1] --port P --work W --count N --size S\n"
            "                            [--wait spin|block|epoll] [--timeout SECONDS]\n"
            "       kernel_anchor client --host 127.0.0.1 --port P --work W --count N --size S\n"
            "                            [--nodelay on|off] [--congestion NAME] [--wait spin|block|epoll]\n"
            "                            [--timeout SECONDS]\n"
            "  W: tcp-stream | tcp-pingpong | udp-pingpong\n"
            "  N >= 1 messages (stream) or round trips (ping-pong); S >= 8 bytes per message\n"
            "     (udp-pingpong: S <= 65507)\n"
            "  --nodelay: tcp-stream only, TCP_NODELAY on the client (default on)\n"
            "  --congestion: tcp-stream only, the client's congestion control (TCP_CONGESTION;\n"
            "                default the system's, net.ipv4.tcp_congestion_control)\n"
            "  --wait: spin = non-blocking calls in a loop (default); block = sleep in the kernel;\n"
            "          epoll = sleep in epoll_wait (udp-pingpong), as an event loop does\n"
            "  --timeout: give up after this many seconds and report what arrived (default 120)\n"
            "  Runs only inside scripts/sandbox (OGK_SANDBOX=1).\n");
    exit(EXIT_USAGE);
}

/* ---- socket helpers -------------------------------------------------------------------- */

#define IO_TIMEOUT (-2)
#define IO_CLOSED (-1)

static void set_io_timeouts(int fd, int ms)
{
    struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        die_errno("setsockopt(SO_RCVTIMEO)");
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        die_errno("setsockopt(SO_SNDTIMEO)");
}

static void set_nodelay(int fd, int on)
{
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0)
        die_errno("setsockopt(TCP_NODELAY)");
}

static void resolve(const char *host, int port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
        return;
    struct addrinfo hints = { .ai_family = AF_INET }, *ai = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &ai);
    if (rc != 0 || ai == NULL)
        die("cannot resolve host %s: %s", host, rc ? gai_strerror(rc) : "no address");
    sa->sin_addr = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
    freeaddrinfo(ai);
}

static void close_fd(int fd)
{
    if (fd >= 0 && close(fd) != 0 && errno != EINTR)
        warnx_("close: %s", strerror(errno));
}

/* --wait spin: non-blocking calls retried in a loop instead of sleeping in the kernel. */
static int g_spin;
/* --wait epoll (udp-pingpong only): non-blocking calls, sleeping in epoll_wait until the socket is
   readable, as an event-driven program (an event loop serving many sockets and timers) must. */
static int g_epoll = -1;

static void epoll_register(int fd)
{
    g_epoll = epoll_create1(EPOLL_CLOEXEC);
    if (g_epoll < 0)
        die_errno("epoll_create1");
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
    if (epoll_ctl(g_epoll, EPOLL_CTL_ADD, fd, &ev) < 0)
        die_errno("epoll_ctl");
}

static void epoll_wait_readable(uint64_t deadline)
{
    if (g_epoll < 0)
        return;
    struct epoll_event ev;
    if (epoll_wait(g_epoll, &ev, 1, ms_until(deadline, 50)) < 0 && errno != EINTR)
        die_errno("epoll_wait");
}

/* Bytes handed to the kernel by the stream client (for the no-report fallback). */
static uint64_t g_bytes_written;

/* Writes all of buf. Returns 0, IO_TIMEOUT (deadline passed) or IO_CLOSED (peer gone). */
static int send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
    const unsigned char *p = buf;
    while (len > 0) {
        /* checked on every call: a blocking send that keeps making progress never times out */
        if (now_ns() >= deadline)
            return IO_TIMEOUT;
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | (g_spin ? MSG_DONTWAIT : 0));
        if (n >= 0) {
            p += n;
            len -= (size_t)n;
            g_bytes_written += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return IO_CLOSED;
        die_errno("send");
    }
    return 0;
}

/* One recv. Returns bytes read (> 0), 0 on EOF, IO_TIMEOUT or IO_CLOSED (reset). */
static ssize_t recv_some(int fd, void *buf, size_t cap, uint64_t deadline)
{
    for (;;) {
        if (now_ns() >= deadline)
            return IO_TIMEOUT;
        ssize_t n = recv(fd, buf, cap, g_spin ? MSG_DONTWAIT : 0);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            continue;
        if (errno == ECONNRESET)
            return IO_CLOSED;
        die_errno("recv");
    }
}

/* Reads exactly len bytes. Returns 0, IO_CLOSED (EOF or reset first) or IO_TIMEOUT. */
static int recv_exact(int fd, void *buf, size_t len, uint64_t deadline)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = recv_some(fd, p, len, deadline);
        if (n == 0)
            return IO_CLOSED;
        if (n < 0)
            return (int)n;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int tcp_listen(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die_errno("socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        die_errno("setsockopt(SO_REUSEADDR)");
    struct sockaddr_in sa;
    resolve(host, port, &sa);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        die("bind %s:%d: %s", host, port, strerror(errno));
    if (listen(fd, 4) != 0)
        die_errno("listen");
    return fd;
}

/* Returns the accepted socket, or -1 if the deadline passed first. */
static int tcp_accept(int lfd, uint64_t deadline)
{
    for (;;) {
        int ms = ms_until(deadline, 100);
        if (ms == 0)
            return -1;
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };
        int r = poll(&pfd, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die_errno("poll");
        if (r == 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            return fd;
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
            continue;
        die_errno("accept");
    }
}

/* Connects, retrying while the server is not listening yet. -1 if the deadline passed. */
static int tcp_connect(const struct opts *o, uint64_t deadline)
{
    struct sockaddr_in sa;
    resolve(o->host, o->port, &sa);
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die_errno("socket");
        if (o->congestion != NULL &&
            setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, o->congestion, (socklen_t)strlen(o->congestion)) != 0)
            die("setsockopt(TCP_CONGESTION, %s): %s", o->congestion, strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        int e = errno;
        close_fd(fd);
        if (e != ECONNREFUSED && e != EINTR && e != EAGAIN && e != ETIMEDOUT)
            die("connect %s:%d: %s", o->host, o->port, strerror(e));
        if (now_ns() >= deadline)
            return -1;
        struct timespec ts = { .tv_sec = 0, .tv_nsec = 10 * 1000000 };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}

/* Waits (bounded) for the client to close its end, discarding anything it sends. */
static void drain_until_eof(int fd, uint64_t deadline)
{
    uint64_t until = now_ns() + DONE_LINGER_NS;
    if (until > deadline + GRACE_NS)
        until = deadline + GRACE_NS;
    unsigned char buf[65536];
    while (recv_some(fd, buf, sizeof buf, until) > 0)
        ;
}

/* ---- tcp-stream ----------------------------------------------------------------------- */

/* Incremental parser for [4-byte BE length][S bytes] frames split anywhere across reads. */
struct framer {
    unsigned char hdr[4];
    size_t hdr_have;
    size_t body_len, body_have;
    unsigned char seq[8];
};

/* Returns 0, or -1 on a malformed frame. */
static int framer_feed(struct framer *f, const unsigned char *p, size_t n, size_t want,
                       struct order *ord)
{
    while (n > 0) {
        if (f->hdr_have < 4) {
            size_t take = 4 - f->hdr_have < n ? 4 - f->hdr_have : n;
            memcpy(f->hdr + f->hdr_have, p, take);
            f->hdr_have += take;
            p += take;
            n -= take;
            if (f->hdr_have == 4) {
                f->body_len = get_be32(f->hdr);
                f->body_have = 0;
                if (f->body_len != want)
                    return -1;
            }
            continue;
        }
        size_t take = f->body_len - f->body_have < n ? f->body_len - f->body_have : n;
        if (f->body_have < 8) {
            size_t s = 8 - f->body_have < take ? 8 - f->body_have : take;
            memcpy(f->seq + f->body_have, p, s);
        }
        f->body_have += take;
        p += take;
        n -= take;
        if (f->body_have == f->body_len) {
            order_note(ord, get_be64(f->seq));
            f->hdr_have = 0;
        }
    }
    return 0;
}

static void server_tcp_stream(const struct opts *o, int fd, uint64_t deadline, struct order *ord)
{
    unsigned char *buf = malloc(STREAM_READ_BUF);
    if (buf == NULL)
        die("out of memory");
    struct framer f = { .hdr_have = 0 };
    int alive = 1;
    while (ord->delivered < o->count) {
        ssize_t n = recv_some(fd, buf, STREAM_READ_BUF, deadline);
        if (n == IO_TIMEOUT) {
            warnx_("timed out after %.1f s", o->timeout);
            break;
        }
        if (n <= 0) {
            warnx_("the client closed the connection early");
            alive = 0;
            break;
        }
        if (framer_feed(&f, buf, (size_t)n, o->size, ord) != 0) {
            warnx_("malformed frame (length %zu, expected %zu)", f.body_len, o->size);
            break;
        }
    }
    if (alive) {
        /* Report (even past the deadline, within the grace period), then wait for the client
         * to close so that it can read the report before our close could reset the connection. */
        unsigned char done[16];
        put_be64(done, ord->delivered);
        put_be64(done + 8, ord->in_order);
        if (send_all(fd, done, sizeof done, deadline + GRACE_NS) == 0) {
            if (shutdown(fd, SHUT_WR) != 0 && errno != ENOTCONN)
                die_errno("shutdown");
            drain_until_eof(fd, deadline);
        }
    }
    free(buf);
}

static void client_tcp_stream(const struct opts *o, int fd, uint64_t deadline, struct result *res)
{
    size_t frame = 4 + o->size;
    size_t cap = frame > STREAM_WRITE_BUF ? frame : STREAM_WRITE_BUF;
    size_t per_buf = cap / frame;
    unsigned char *buf = malloc(per_buf * frame);
    if (buf == NULL)
        die("out of memory");
    for (size_t j = 0; j < per_buf; j++) {
        put_be32(buf + j * frame, (uint32_t)o->size);
        fill_message(buf + j * frame + 4, o->size, 0);
    }

    int nodelay = o->nodelay >= 0 ? o->nodelay : STREAM_NODELAY_DEFAULT;
    set_nodelay(fd, nodelay);

    uint64_t sent = 0, t0 = now_ns(), t1;
    while (sent < o->count) {
        uint64_t m = o->count - sent < per_buf ? o->count - sent : per_buf;
        for (uint64_t j = 0; j < m; j++)
            put_be64(buf + j * frame + 4, sent + j);
        int r = send_all(fd, buf, (size_t)m * frame, deadline);
        if (r != 0) {
            warnx_(r == IO_TIMEOUT ? "timed out after %.1f s while sending"
                                   : "the server closed the connection (after %.1f s)",
                   (double)(now_ns() - t0) / 1e9);
            break;
        }
        sent += m;
    }
    /* The server's report; after a timeout it may already be on its way (grace period). */
    unsigned char done[16];
    int r = recv_exact(fd, done, sizeof done, sent < o->count ? deadline + GRACE_NS : deadline);
    t1 = now_ns();
    if (r == 0) {
        res->delivered = get_be64(done);
        res->in_order = get_be64(done + 8);
    } else {
        warnx_(r == IO_TIMEOUT ? "timed out after %.1f s waiting for the server's report"
                               : "connection closed after %.1f s without the server's report",
               (double)(t1 - t0) / 1e9);
        /* Fallback: messages whose bytes the peer's kernel acknowledged. */
        int outq = 0;
        if (ioctl(fd, SIOCOUTQ, &outq) != 0)
            outq = 0;
        uint64_t acked = g_bytes_written - (uint64_t)(outq > 0 ? outq : 0);
        res->delivered = acked / frame;
        res->in_order = 0;
    }
    res->seconds = (double)(t1 - t0) / 1e9;
    free(buf);
}

/* ---- tcp-pingpong ---------------------------------------------------------------------- */

static void server_tcp_pingpong(const struct opts *o, int fd, uint64_t deadline, struct order *ord)
{
    size_t frame = 4 + o->size;
    size_t cap = frame * 2 > 65536 ? frame * 2 : 65536;
    unsigned char *buf = malloc(cap);
    if (buf == NULL)
        die("out of memory");
    set_nodelay(fd, 1);
    size_t have = 0;
    for (;;) {
        ssize_t n = recv_some(fd, buf + have, cap - have, deadline);
        if (n == IO_TIMEOUT) {
            warnx_("timed out after %.1f s", o->timeout);
            break;
        }
        if (n <= 0)
            break; /* client done */
        have += (size_t)n;
        size_t off = 0;
        int stop = 0;
        while (have - off >= 4) {
            if (get_be32(buf + off) != o->size) {
                warnx_("malformed frame (length %u, expected %zu)", get_be32(buf + off), o->size);
                stop = 1;
                break;
            }
            if (have - off < frame)
                break;
            order_note(ord, get_be64(buf + off + 4));
            if (send_all(fd, buf + off, frame, deadline) != 0) {
                stop = 1;
                break;
            }
            off += frame;
        }
        if (stop)
            break;
        memmove(buf, buf + off, have - off);
        have -= off;
    }
    free(buf);
}

static void client_tcp_pingpong(const struct opts *o, int fd, uint64_t deadline, struct result *res,
                                double *rtt)
{
    size_t frame = 4 + o->size;
    unsigned char *out = malloc(frame), *in = malloc(frame);
    if (out == NULL || in == NULL)
        die("out of memory");
    put_be32(out, (uint32_t)o->size);
    fill_message(out + 4, o->size, 0);
    set_nodelay(fd, 1);

    uint64_t t_start = now_ns(), t_end = t_start;
    for (uint64_t i = 0; i < o->count; i++) {
        put_be64(out + 4, i);
        uint64_t ts = now_ns();
        int r = send_all(fd, out, frame, deadline);
        if (r == 0)
            r = recv_exact(fd, in, frame, deadline);
        uint64_t te = now_ns();
        t_end = te;
        if (r != 0) {
            warnx_(r == IO_TIMEOUT ? "timed out after %.1f s" : "connection lost after %.1f s",
                   (double)(te - t_start) / 1e9);
            break;
        }
        if (get_be32(in) != o->size || get_be64(in + 4) != i) {
            warnx_("bad echo for round trip %" PRIu64, i);
            break;
        }
        rtt[res->delivered++] = (double)(te - ts) / 1e3;
    }
    res->in_order = res->delivered;
    res->seconds = (double)(t_end - t_start) / 1e9;
    res->rtt_us = rtt;
    res->rtt_n = res->delivered;
    free(out);
    free(in);
}

/* ---- udp-pingpong ---------------------------------------------------------------------- */

static int is_fin(const unsigned char *p, ssize_t n)
{
    return n == 8 && get_be64(p) == FIN_SEQ;
}

static void server_udp_pingpong(const struct opts *o, int fd, uint64_t deadline, struct order *ord)
{
    unsigned char buf[65536];
    uint64_t bad = 0;
    for (;;) {
        if (now_ns() >= deadline) {
            warnx_("timed out after %.1f s", o->timeout);
            break;
        }
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        epoll_wait_readable(deadline);
        ssize_t n = recvfrom(fd, buf, sizeof buf, g_spin ? MSG_DONTWAIT : 0,
                             (struct sockaddr *)&from, &fl);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            die_errno("recvfrom");
        }
        if (is_fin(buf, n))
            break;
        if ((size_t)n != o->size) {
            bad++;
            continue;
        }
        uint64_t seq = get_be64(buf);
        order_note(ord, seq);
        for (;;) {
            ssize_t s = sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
            if (s >= 0 || errno != EINTR) {
                if (s < 0 && errno != ECONNREFUSED && errno != EAGAIN && errno != ENOBUFS)
                    die_errno("sendto");
                break;
            }
        }
        if (seq == o->count - 1)
            break; /* last request answered */
    }
    if (bad > 0)
        warnx_("%" PRIu64 " datagrams of unexpected size ignored", bad);
}

static void client_udp_pingpong(const struct opts *o, int fd, uint64_t deadline, struct result *res,
                                double *rtt)
{
    unsigned char *out = malloc(o->size), in[65536];
    if (out == NULL)
        die("out of memory");
    fill_message(out, o->size, 0);

    uint64_t t_start = now_ns(), t_end = t_start, lost = 0, stale = 0;
    int timed_out = 0;
    for (uint64_t i = 0; i < o->count && !timed_out; i++) {
        put_be64(out, i);
        uint64_t ts = now_ns();
        for (;;) {
            ssize_t s = send(fd, out, o->size, 0);
            if (s >= 0)
                break;
            if (errno == EINTR)
                continue;
            if (errno == ECONNREFUSED || errno == ENOBUFS || errno == EAGAIN)
                break; /* counts as lost below */
            die_errno("send");
        }
        for (;;) {
            epoll_wait_readable(deadline);
            ssize_t n = recv(fd, in, sizeof in, g_spin ? MSG_DONTWAIT : 0);
            uint64_t t = now_ns();
            if (n >= 0 && (size_t)n == o->size && get_be64(in) == i) {
                rtt[res->delivered++] = (double)(t - ts) / 1e3;
                t_end = t;
                break;
            }
            if (n >= 0)
                stale++;
            else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK &&
                     errno != ECONNREFUSED)
                die_errno("recv");
            if (t - ts >= UDP_LOSS_NS) {
                lost++;
                t_end = t;
                break;
            }
            if (t >= deadline) {
                timed_out = 1;
                t_end = t;
                break;
            }
        }
    }
    /* Tell the server we are done (it also stops by itself after the last request). */
    unsigned char fin[8];
    put_be64(fin, FIN_SEQ);
    for (int k = 0; k < FIN_COPIES; k++)
        if (send(fd, fin, sizeof fin, 0) < 0 && errno != ECONNREFUSED && errno != EINTR &&
            errno != ENOBUFS && errno != EAGAIN)
            die_errno("send");

    res->in_order = res->delivered;
    res->seconds = (double)(t_end - t_start) / 1e9;
    res->rtt_us = rtt;
    res->rtt_n = res->delivered;
    if (lost > 0 || stale > 0)
        warnx_("%" PRIu64 " echoes lost (no echo within 100 ms), %" PRIu64 " late or unexpected",
               lost, stale);
    if (timed_out)
        warnx_("timed out after %.1f s", o->timeout);
    free(out);
}

/* ---- roles ----------------------------------------------------------------------------- */

static void run_server(const struct opts *o, enum work w)
{
    uint64_t deadline = now_ns() + (uint64_t)(o->timeout * 1e9);
    struct order ord = { .strict = (w == W_TCP_STREAM) };
    if (w == W_UDP_PINGPONG) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die_errno("socket");
        struct sockaddr_in sa;
        resolve(o->host, o->port, &sa);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            die("bind %s:%d: %s", o->host, o->port, strerror(errno));
        set_io_timeouts(fd, UDP_POLL_MS);
        if (o->spin == 2)
            epoll_register(fd);
        print_ready();
        server_udp_pingpong(o, fd, deadline, &ord);
        close_fd(fd);
        print_server_json("udp", ord.delivered, ord.in_order);
        return;
    }
    int lfd = tcp_listen(o->host, o->port);
    print_ready();
    int fd = tcp_accept(lfd, deadline);
    close_fd(lfd);
    if (fd < 0) {
        warnx_("timed out after %.1f s waiting for the client", o->timeout);
    } else {
        set_io_timeouts(fd, TCP_POLL_MS);
        if (w == W_TCP_STREAM)
            server_tcp_stream(o, fd, deadline, &ord);
        else
            server_tcp_pingpong(o, fd, deadline, &ord);
        close_fd(fd);
    }
    print_server_json("tcp", ord.delivered, ord.in_order);
}

static void run_client(const struct opts *o, enum work w)
{
    uint64_t deadline = now_ns() + (uint64_t)(o->timeout * 1e9);
    struct result res = { .impl = w == W_UDP_PINGPONG ? "udp" : "tcp", .work = work_names[w],
                          .count = o->count, .size = o->size };
    double *rtt = NULL;
    if (w != W_TCP_STREAM) {
        rtt = malloc((size_t)o->count * sizeof *rtt);
        if (rtt == NULL)
            die("out of memory for %" PRIu64 " samples", o->count);
    }
    if (w == W_UDP_PINGPONG) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die_errno("socket");
        struct sockaddr_in sa;
        resolve(o->host, o->port, &sa);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            die("connect %s:%d: %s", o->host, o->port, strerror(errno));
        set_io_timeouts(fd, UDP_POLL_MS);
        if (o->spin == 2)
            epoll_register(fd);
        client_udp_pingpong(o, fd, deadline, &res, rtt);
        close_fd(fd);
    } else {
        int fd = tcp_connect(o, deadline);
        if (fd < 0) {
            warnx_("timed out connecting to %s:%d", o->host, o->port);
        } else {
            set_io_timeouts(fd, TCP_POLL_MS);
            if (w == W_TCP_STREAM)
                client_tcp_stream(o, fd, deadline, &res);
            else
                client_tcp_pingpong(o, fd, deadline, &res, rtt);
            close_fd(fd);
        }
    }
    print_client_json(&res);
    free(rtt);
}

int main(int argc, char **argv)
{
    g_prog = "kernel_anchor";
    struct opts o;
    int is_client = argc >= 2 && strcmp(argv[1], "client") == 0;
    parse_opts(argc, argv,
               is_client ? "host port work count size nodelay congestion wait timeout" : "host port work count size wait timeout",
               usage, &o);
    enum work w;
    if (strcmp(o.work, "tcp-stream") == 0)
        w = W_TCP_STREAM;
    else if (strcmp(o.work, "tcp-pingpong") == 0)
        w = W_TCP_PINGPONG;
    else if (strcmp(o.work, "udp-pingpong") == 0)
        w = W_UDP_PINGPONG;
    else
        usage("--work must be tcp-stream, tcp-pingpong or udp-pingpong");
    if (w == W_UDP_PINGPONG && o.size > 65507)
        usage("udp-pingpong: --size must be at most 65507 (one IPv4 datagram)");
    if (w != W_TCP_STREAM && o.nodelay >= 0)
        usage("--nodelay applies to tcp-stream only");
    if (w != W_TCP_STREAM && o.congestion != NULL)
        usage("--congestion applies to tcp-stream only");
    if ((size_t)o.count > SIZE_MAX / sizeof(double))
        usage("--count too large");

    g_spin = o.spin >= 0 ? o.spin != 0 : WAIT_SPIN_DEFAULT;
    if (o.spin == 2 && strcmp(o.work, "udp-pingpong") != 0)
        usage("--wait epoll is for udp-pingpong");

    require_sandbox();
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        die_errno("signal(SIGPIPE)");

    if (o.role == ROLE_SERVER)
        run_server(&o, w);
    else
        run_client(&o, w);
    return 0;
}
