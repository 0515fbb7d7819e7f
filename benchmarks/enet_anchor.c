/*
 * enet_anchor: ENet (libenet 1.3.x) anchor for gk-bench.
 *
 *   enet_anchor server [--host A] --port P --work W --count N --size S [--wait spin|block] [--timeout T]
 *   enet_anchor client --host H --port P --work W --count N --size S [--window M]
 *                      [--wait spin|block] [--timeout T]
 *
 * Work items: stream, pingpong-reliable, pingpong-unreliable. See README.md.
 * Must run inside scripts/sandbox (OGK_SANDBOX=1), otherwise exits 3.
 */
#include "anchor_common.h"

#include <enet/enet.h>

#define CH_DATA 0     /* work messages and echoes */
#define CH_CTRL 1     /* the stream's 16-byte "done" report */
#define CHANNELS 2
#define UNRELIABLE_LOSS_NS (100ull * 1000000ull)
#define DONE_LINGER_NS (5ull * 1000000000ull)   /* server: wait this long for the client to leave */
#define GRACE_NS (200ull * 1000000ull)          /* after --timeout: last chance to exchange "done" */

enum work { W_STREAM, W_PP_RELIABLE, W_PP_UNRELIABLE };

static void usage(const char *msg) __attribute__((noreturn));
static void usage(const char *msg)
{
    if (msg != NULL)
        fprintf(stderr, "%s: %s\n", g_prog, msg);
    fprintf(stderr,
            "usage: enet_anchor server [--host 127.0.0.1] --port P --work W --count N --size S\n"
            "                          [--wait spin|block] [--timeout SECONDS]\n"
            "       enet_anchor client --host 127.0.0.1 --port P --work W --count N --size S\n"
            "                          [--window M] [--wait spin|block] [--timeout SECONDS]\n"
            "  W: stream | pingpong-reliable | pingpong-unreliable\n"
            "  N >= 1 messages (stream) or round trips (ping-pong); S >= 8 bytes per message\n"
            "  --window: stream only, max reliable commands queued or unacknowledged in ENet (default 1024)\n"
            "  --wait: spin = enet_host_service(0) in a loop while working (default);\n"
            "          block = let ENet sleep in poll() (1 ms slices) when there is nothing to do\n"
            "  --timeout: give up after this many seconds and report what arrived (default 120)\n"
            "  Runs only inside scripts/sandbox (OGK_SANDBOX=1).\n");
    exit(EXIT_USAGE);
}

/* Packets whose last reference ENet drops after they were acknowledged (reliable) or sent
 * (unreliable) carry ENET_PACKET_FLAG_SENT when freed: used to count acknowledged stream
 * messages if the server's report never comes. */
static uint64_t g_acked;

/* --wait: 1 = call enet_host_service with timeout 0 in a loop while work is under way (spin),
 * 0 = let it sleep in poll() for up to 1 ms when there is nothing to do (block). */
static int g_spin = 1;

static void ENET_CALLBACK on_packet_free(ENetPacket *p)
{
    if (p->flags & ENET_PACKET_FLAG_SENT)
        g_acked++;
}

/* OGK_ANCHOR_DEBUG=1: print ENet's view of the connection on stderr at the end. */
static void debug_peer(const char *who, const ENetHost *h, const ENetPeer *p)
{
    const char *d = getenv("OGK_ANCHOR_DEBUG");
    if (d == NULL || strcmp(d, "1") != 0)
        return;
    fprintf(stderr,
            "%s: %s: host sent %u datagrams / %u bytes, received %u datagrams / %u bytes",
            g_prog, who, h->totalSentPackets, h->totalSentData, h->totalReceivedPackets,
            h->totalReceivedData);
    if (p != NULL)
        fprintf(stderr,
                "; peer rtt %u ms (var %u), packetThrottle %u/32, windowSize %u, mtu %u, "
                "packetsSent %u, packetsLost %u, packetLoss %.4f",
                p->roundTripTime, p->roundTripTimeVariance, p->packetThrottle, p->windowSize,
                p->mtu, p->packetsSent, p->packetsLost,
                (double)p->packetLoss / ENET_PEER_PACKET_LOSS_SCALE);
    fputc('\n', stderr);
}

static ENetPacket *make_packet(const unsigned char *data, size_t len, enet_uint32 flags)
{
    ENetPacket *p = enet_packet_create(data, len, flags);
    if (p == NULL)
        die("enet_packet_create(%zu bytes) failed", len);
    return p;
}

static void send_packet(ENetPeer *peer, enet_uint8 channel, ENetPacket *p)
{
    if (enet_peer_send(peer, channel, p) < 0) {
        enet_packet_destroy(p);
        die("enet_peer_send failed");
    }
}

static int service(ENetHost *h, ENetEvent *ev, enet_uint32 timeout_ms)
{
    int r = enet_host_service(h, ev, timeout_ms);
    if (r < 0)
        die("enet_host_service failed");
    return r;
}

static int next_event(ENetHost *h, ENetEvent *ev)
{
    int r = enet_host_check_events(h, ev);
    if (r < 0)
        die("enet_host_check_events failed");
    return r;
}

/* ---- server ---------------------------------------------------------------------------- */

struct server {
    const struct opts *o;
    enum work w;
    ENetHost *host;
    ENetPeer *peer;
    int peer_gone;
    int done_sent;
    int echoed;   /* echoes queued since the last flush */
    uint64_t bad;
    struct order ord;
};

static void server_send_done(struct server *s)
{
    unsigned char done[16];
    put_be64(done, s->ord.delivered);
    put_be64(done + 8, s->ord.in_order);
    send_packet(s->peer, CH_CTRL, make_packet(done, sizeof done, ENET_PACKET_FLAG_RELIABLE));
    enet_host_flush(s->host);
    s->done_sent = 1;
}

static void server_event(struct server *s, ENetEvent *ev)
{
    switch (ev->type) {
    case ENET_EVENT_TYPE_CONNECT:
        if (s->peer == NULL) {
            s->peer = ev->peer;
        } else {
            warnx_("ignoring a second client");
            enet_peer_reset(ev->peer);
        }
        break;
    case ENET_EVENT_TYPE_RECEIVE: {
        ENetPacket *p = ev->packet;
        if (s->done_sent) {
            /* the report is final: late data is not counted */
        } else if (ev->peer == s->peer && ev->channelID == CH_DATA && p->dataLength == s->o->size) {
            order_note(&s->ord, get_be64(p->data));
            if (s->w != W_STREAM) {
                enet_uint32 fl = s->w == W_PP_RELIABLE ? ENET_PACKET_FLAG_RELIABLE
                                                       : ENET_PACKET_FLAG_UNSEQUENCED;
                send_packet(s->peer, CH_DATA, make_packet(p->data, p->dataLength, fl));
                s->echoed = 1;
            }
        } else if (s->bad++ == 0) {
            warnx_("ignoring unexpected packet (channel %u, %zu bytes)", ev->channelID,
                   p->dataLength);
        }
        enet_packet_destroy(p);
        break;
    }
    case ENET_EVENT_TYPE_DISCONNECT:
        if (ev->peer == s->peer) {
            s->peer = NULL;
            s->peer_gone = 1;
        }
        break;
    case ENET_EVENT_TYPE_NONE:
        break;
    }
}

static void run_server(const struct opts *o, enum work w)
{
    ENetAddress addr;
    if (enet_address_set_host_ip(&addr, o->host) != 0)
        die("enet_address_set_host_ip failed");
    addr.port = (enet_uint16)o->port;
    ENetHost *h = enet_host_create(&addr, 1, CHANNELS, 0, 0);
    if (h == NULL)
        die("cannot create an ENet host on %s:%d (port in use?)", o->host, o->port);

    struct server s = { .o = o, .w = w, .host = h };
    s.ord.strict = (w == W_STREAM);
    uint64_t deadline = now_ns() + (uint64_t)(o->timeout * 1e9);
    uint64_t linger_until = 0;
    int timed_out = 0;
    print_ready();

    while (!s.peer_gone) {
        uint64_t t = now_ns();
        if (s.done_sent && t >= linger_until)
            break;
        if (t >= deadline && !timed_out) {
            timed_out = 1;
            warnx_("timed out after %.1f s", o->timeout);
            if (w != W_STREAM || s.peer == NULL || s.done_sent)
                break;
            /* Report what arrived, then allow a short grace for ENet to deliver it. */
            server_send_done(&s);
            linger_until = t + GRACE_NS;
        }
        /* Spin while a client is working; sleep in the kernel while idle. */
        enet_uint32 wait_ms = (s.peer != NULL && !s.done_sent) ? (g_spin ? 0 : 1)
                                                               : (enet_uint32)ms_until(deadline, 10);
        if (s.done_sent)
            wait_ms = (enet_uint32)ms_until(linger_until, 10);
        ENetEvent ev;
        int r = service(h, &ev, wait_ms);
        while (r > 0) {
            server_event(&s, &ev);
            r = next_event(h, &ev);
        }
        if (s.echoed) {
            enet_host_flush(h);
            s.echoed = 0;
        }
        if (w == W_STREAM && s.peer != NULL && !s.done_sent && s.ord.delivered >= o->count) {
            server_send_done(&s);
            linger_until = now_ns() + DONE_LINGER_NS;
            if (linger_until > deadline + GRACE_NS)
                linger_until = deadline + GRACE_NS;
        }
    }

    if (s.bad > 0)
        warnx_("%" PRIu64 " unexpected packets ignored", s.bad);
    debug_peer("server", h, s.peer);
    print_server_json("enet", s.ord.delivered, s.ord.in_order);
    if (s.peer != NULL)
        enet_peer_disconnect_now(s.peer, 0);
    enet_host_destroy(h);
}

/* ---- client ---------------------------------------------------------------------------- */

struct client {
    const struct opts *o;
    enum work w;
    ENetHost *host;
    ENetPeer *peer;
    int server_gone;
    uint64_t deadline;
};

/* Leaves politely so the server stops; bounded so that we never hang here. */
static void client_disconnect(struct client *c)
{
    if (c->server_gone)
        return;
    enet_peer_disconnect(c->peer, 0);
    uint64_t until = now_ns() + 2000000000ull;
    if (until > c->deadline + GRACE_NS)
        until = c->deadline + GRACE_NS;
    for (;;) {
        uint64_t t = now_ns();
        if (t >= until)
            break;
        ENetEvent ev;
        int r = service(c->host, &ev, (enet_uint32)ms_until(until, 10));
        while (r > 0) {
            if (ev.type == ENET_EVENT_TYPE_RECEIVE)
                enet_packet_destroy(ev.packet);
            else if (ev.type == ENET_EVENT_TYPE_DISCONNECT)
                return;
            r = next_event(c->host, &ev);
        }
    }
    enet_peer_reset(c->peer);
}

/* Returns 1 once connected, 0 on timeout. */
static int client_connect(struct client *c)
{
    ENetAddress addr;
    if (enet_address_set_host_ip(&addr, c->o->host) != 0 &&
        enet_address_set_host(&addr, c->o->host) != 0)
        die("cannot resolve host %s", c->o->host);
    addr.port = (enet_uint16)c->o->port;
    c->peer = enet_host_connect(c->host, &addr, CHANNELS, 0);
    if (c->peer == NULL)
        die("enet_host_connect failed");
    while (now_ns() < c->deadline) {
        ENetEvent ev;
        int r = service(c->host, &ev, (enet_uint32)ms_until(c->deadline, 10));
        while (r > 0) {
            if (ev.type == ENET_EVENT_TYPE_CONNECT)
                return 1;
            if (ev.type == ENET_EVENT_TYPE_DISCONNECT)
                die("could not connect to %s:%d", c->o->host, c->o->port);
            if (ev.type == ENET_EVENT_TYPE_RECEIVE)
                enet_packet_destroy(ev.packet);
            r = next_event(c->host, &ev);
        }
    }
    return 0;
}

static void client_stream(struct client *c, struct result *res)
{
    const struct opts *o = c->o;
    unsigned char *tmpl = malloc(o->size);
    if (tmpl == NULL)
        die("out of memory");
    fill_message(tmpl, o->size, 0);

    uint64_t sent = 0, t0 = 0, t1 = 0;
    int got_done = 0;
    while (!got_done && !c->server_gone) {
        uint64_t t = now_ns();
        int past_deadline = t >= c->deadline;
        if (past_deadline && t >= c->deadline + GRACE_NS)
            break;
        int window_full = 0;
        if (sent < o->count && !past_deadline) {
            /* Reliable commands queued or in flight (fragments count individually). */
            size_t inflight = enet_list_size(&c->peer->outgoingCommands) +
                              enet_list_size(&c->peer->sentReliableCommands);
            if (t0 == 0)
                t0 = now_ns();
            while (sent < o->count && inflight < o->window) {
                ENetPacket *p = make_packet(tmpl, o->size, ENET_PACKET_FLAG_RELIABLE);
                put_be64(p->data, sent);
                p->freeCallback = on_packet_free;
                send_packet(c->peer, CH_DATA, p);
                sent++;
                inflight++;
            }
            window_full = inflight >= o->window;
        }
        ENetEvent ev;
        int r = service(c->host, &ev, (g_spin || (sent < o->count && !window_full)) ? 0 : 1);
        while (r > 0) {
            if (ev.type == ENET_EVENT_TYPE_RECEIVE) {
                if (ev.channelID == CH_CTRL && ev.packet->dataLength == 16 && !got_done) {
                    t1 = now_ns();
                    got_done = 1;
                    res->delivered = get_be64(ev.packet->data);
                    res->in_order = get_be64(ev.packet->data + 8);
                } else {
                    warnx_("ignoring unexpected packet (channel %u, %zu bytes)", ev.channelID,
                           ev.packet->dataLength);
                }
                enet_packet_destroy(ev.packet);
            } else if (ev.type == ENET_EVENT_TYPE_DISCONNECT) {
                warnx_("the server disconnected (or ENet timed the connection out)");
                c->server_gone = 1;
            }
            r = next_event(c->host, &ev);
        }
    }
    if (!got_done) {
        t1 = now_ns();
        /* No report from the server: fall back to what ENet saw acknowledged. */
        res->delivered = g_acked;
        res->in_order = 0;
        if (!c->server_gone)
            warnx_("timed out after %.1f s: %" PRIu64 " of %" PRIu64 " messages sent, %" PRIu64
                   " acknowledged",
                   o->timeout, sent, o->count, g_acked);
    }
    res->seconds = t0 ? (double)(t1 - t0) / 1e9 : 0.0;
    free(tmpl);
}

static void client_pingpong(struct client *c, struct result *res, double *rtt)
{
    const struct opts *o = c->o;
    int reliable = (c->w == W_PP_RELIABLE);
    enet_uint32 flags = reliable ? ENET_PACKET_FLAG_RELIABLE : ENET_PACKET_FLAG_UNSEQUENCED;
    unsigned char *tmpl = malloc(o->size);
    if (tmpl == NULL)
        die("out of memory");
    fill_message(tmpl, o->size, 0);

    uint64_t lost = 0, stale = 0, t_start = now_ns(), t_end = t_start;
    int timed_out = 0;
    for (uint64_t i = 0; i < o->count && !c->server_gone && !timed_out; i++) {
        ENetPacket *p = make_packet(tmpl, o->size, flags);
        put_be64(p->data, i);
        uint64_t ts = now_ns();
        send_packet(c->peer, CH_DATA, p);
        enet_host_flush(c->host);
        int got = 0;
        while (!got) {
            ENetEvent ev;
            int r = service(c->host, &ev, g_spin ? 0 : 1);
            while (r > 0) {
                if (ev.type == ENET_EVENT_TYPE_RECEIVE) {
                    if (ev.channelID == CH_DATA && ev.packet->dataLength == o->size &&
                        get_be64(ev.packet->data) == i && !got) {
                        uint64_t te = now_ns();
                        rtt[res->delivered++] = (double)(te - ts) / 1e3;
                        t_end = te;
                        got = 1;
                    } else {
                        stale++;
                    }
                    enet_packet_destroy(ev.packet);
                } else if (ev.type == ENET_EVENT_TYPE_DISCONNECT) {
                    warnx_("the server disconnected (or ENet timed the connection out)");
                    c->server_gone = 1;
                }
                r = next_event(c->host, &ev);
            }
            if (got)
                break;
            if (c->server_gone) {
                t_end = now_ns();
                break;
            }
            uint64_t t = now_ns();
            if (!reliable && t - ts >= UNRELIABLE_LOSS_NS) {
                lost++;
                t_end = t;
                break;
            }
            if (t >= c->deadline) {
                timed_out = 1;
                t_end = t;
                break;
            }
        }
    }
    res->in_order = res->delivered; /* only the echo of the outstanding request counts */
    res->seconds = (double)(t_end - t_start) / 1e9;
    res->rtt_us = rtt;
    res->rtt_n = res->delivered;
    if (lost > 0 || stale > 0)
        warnx_("%" PRIu64 " echoes lost (no echo within 100 ms), %" PRIu64 " late or unexpected",
               lost, stale);
    if (timed_out)
        warnx_("timed out after %.1f s", o->timeout);
    free(tmpl);
}

static void run_client(const struct opts *o, enum work w)
{
    struct client c = { .o = o, .w = w };
    c.deadline = now_ns() + (uint64_t)(o->timeout * 1e9);
    c.host = enet_host_create(NULL, 1, CHANNELS, 0, 0);
    if (c.host == NULL)
        die("cannot create an ENet client host");

    static const char *names[] = { "stream", "pingpong-reliable", "pingpong-unreliable" };
    struct result res = { .impl = "enet", .work = names[w], .count = o->count, .size = o->size };
    double *rtt = NULL;
    if (w != W_STREAM) {
        rtt = malloc((size_t)o->count * sizeof *rtt);
        if (rtt == NULL)
            die("out of memory for %" PRIu64 " samples", o->count);
    }

    if (!client_connect(&c)) {
        warnx_("timed out connecting to %s:%d", o->host, o->port);
        c.server_gone = 1;
        enet_peer_reset(c.peer);
    } else if (w == W_STREAM) {
        client_stream(&c, &res);
    } else {
        client_pingpong(&c, &res, rtt);
    }
    debug_peer("client", c.host, c.server_gone ? NULL : c.peer);
    print_client_json(&res);
    client_disconnect(&c);
    enet_host_destroy(c.host);
    free(rtt);
}

int main(int argc, char **argv)
{
    g_prog = "enet_anchor";
    struct opts o;
    int is_client = argc >= 2 && strcmp(argv[1], "client") == 0;
    parse_opts(argc, argv,
               is_client ? "host port work count size window wait timeout" : "host port work count size wait timeout",
               usage, &o);
    enum work w;
    if (strcmp(o.work, "stream") == 0)
        w = W_STREAM;
    else if (strcmp(o.work, "pingpong-reliable") == 0)
        w = W_PP_RELIABLE;
    else if (strcmp(o.work, "pingpong-unreliable") == 0)
        w = W_PP_UNRELIABLE;
    else
        usage("--work must be stream, pingpong-reliable or pingpong-unreliable");
    if ((size_t)o.count > SIZE_MAX / sizeof(double))
        usage("--count too large");

    if (o.spin >= 0)
        g_spin = o.spin;

    require_sandbox();
    if (enet_initialize() != 0)
        die("enet_initialize failed");
    atexit(enet_deinitialize);

    if (o.role == ROLE_SERVER)
        run_server(&o, w);
    else
        run_client(&o, w);
    return 0;
}
