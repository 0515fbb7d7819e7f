/*
 * Shared helpers for the benchmark anchor programs (enet_anchor.c, kernel_anchor.c):
 * option parsing, the sandbox guard, clocks, message encoding, percentiles and the
 * JSON result lines. Header-only (static functions) so each anchor stays one translation unit.
 */
#ifndef OGK_ANCHOR_COMMON_H
#define OGK_ANCHOR_COMMON_H

#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXIT_USAGE 2
#define EXIT_NOSANDBOX 3

/* A 8-byte message of all 0xFF bytes: "no more messages" marker used by the UDP ping-pong. */
#define FIN_SEQ UINT64_MAX

enum role { ROLE_SERVER, ROLE_CLIENT };

struct opts {
    enum role role;
    const char *host;     /* client: where to connect; server: where to listen (127.0.0.1) */
    int port;             /* 1..65535 */
    const char *work;
    uint64_t count;       /* N >= 1 */
    size_t size;          /* S >= 8 */
    size_t window;        /* enet stream only */
    double timeout;       /* seconds, > 0 */
    int nodelay;          /* kernel tcp-stream only: -1 = program default */
    int spin;             /* --wait: 1 = spin (busy-poll), 0 = block, 2 = epoll, -1 = program default */
    const char *congestion; /* kernel tcp-stream client only: TCP_CONGESTION name, NULL = the system's */
};

static const char *g_prog = "anchor";

static inline void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", g_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static inline void die_errno(const char *what) __attribute__((noreturn));
static inline void die_errno(const char *what)
{
    die("%s: %s", what, strerror(errno));
}

static inline void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void warnx_(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", g_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- sandbox guard -------------------------------------------------------------------- */

static inline void require_sandbox(void)
{
    const char *s = getenv("OGK_SANDBOX");
    if (s == NULL || strcmp(s, "1") != 0) {
        fprintf(stderr,
                "%s: refusing to open sockets outside the network sandbox "
                "(OGK_SANDBOX is not \"1\"); run it through scripts/sandbox\n",
                g_prog);
        exit(EXIT_NOSANDBOX);
    }
}

/* ---- clocks ------------------------------------------------------------------------------ */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        die_errno("clock_gettime");
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Milliseconds from now until deadline, clamped to [0, cap_ms]. */
static inline int ms_until(uint64_t deadline, int cap_ms)
{
    uint64_t t = now_ns();
    if (t >= deadline)
        return 0;
    uint64_t ms = (deadline - t + 999999ull) / 1000000ull;
    return ms > (uint64_t)cap_ms ? cap_ms : (int)ms;
}

/* ---- message encoding ---------------------------------------------------------------- */

static inline void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static inline uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline uint32_t get_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* S-byte message: 8-byte big-endian sequence number, then filler. */
static inline void fill_message(unsigned char *msg, size_t size, uint64_t seq)
{
    put_be64(msg, seq);
    for (size_t i = 8; i < size; i++)
        msg[i] = (unsigned char)(0xA5 ^ (i & 0xff));
}

/* In-order accounting for a receiver.
 * Stream work items: a message is in order when its sequence number is exactly the next
 * one expected (0, 1, 2, ...); a duplicate or a gap is not in order.
 * Ping-pong work items (where an unreliable request may legitimately be lost): a message is in
 * order when its sequence number is greater than every one seen before. */
struct order {
    int strict;          /* 1 = stream rule, 0 = increasing rule */
    uint64_t next;       /* stream: next expected; pingpong: highest seen + 1 */
    uint64_t delivered;
    uint64_t in_order;
};

static inline void order_note(struct order *o, uint64_t seq)
{
    o->delivered++;
    if (o->strict) {
        if (seq == o->next) {
            o->in_order++;
            o->next++;
        }
    } else if (seq >= o->next) {
        o->in_order++;
        o->next = seq + 1;
    }
}

/* ---- percentiles & output ------------------------------------------------------------- */

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile over a sorted array: the ceil(p/100 * n)-th smallest value. */
static inline double percentile_sorted(const double *v, size_t n, double p)
{
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

struct result {
    const char *impl;
    const char *work;
    uint64_t count;
    size_t size;
    uint64_t delivered;
    uint64_t in_order;
    double seconds;
    const double *rtt_us; /* NULL for stream work items */
    size_t rtt_n;
};

static inline void print_client_json(const struct result *r)
{
    double msgs = r->seconds > 0 ? (double)r->delivered / r->seconds : 0.0;
    double mb = r->seconds > 0 ? (double)r->delivered * (double)r->size / r->seconds / 1e6 : 0.0;
    char p50[64] = "null", p99[64] = "null";
    if (r->rtt_us != NULL && r->rtt_n > 0) {
        double *copy = malloc(r->rtt_n * sizeof *copy);
        if (copy == NULL)
            die("out of memory");
        memcpy(copy, r->rtt_us, r->rtt_n * sizeof *copy);
        qsort(copy, r->rtt_n, sizeof *copy, cmp_double);
        snprintf(p50, sizeof p50, "%.3f", percentile_sorted(copy, r->rtt_n, 50.0));
        snprintf(p99, sizeof p99, "%.3f", percentile_sorted(copy, r->rtt_n, 99.0));
        free(copy);
    }
    printf("{\"impl\":\"%s\",\"work\":\"%s\",\"count\":%" PRIu64 ",\"size\":%zu,"
           "\"delivered\":%" PRIu64 ",\"expected\":%" PRIu64 ",\"in_order\":%" PRIu64 ","
           "\"seconds\":%.6f,\"msgs_per_s\":%.3f,\"mb_per_s\":%.3f,\"p50_us\":%s,\"p99_us\":%s}\n",
           r->impl, r->work, r->count, r->size, r->delivered, r->count, r->in_order,
           r->seconds, msgs, mb, p50, p99);
    if (fflush(stdout) != 0)
        die_errno("stdout");
}

static inline void print_server_json(const char *impl, uint64_t delivered, uint64_t in_order)
{
    printf("{\"role\":\"server\",\"impl\":\"%s\",\"delivered\":%" PRIu64 ",\"in_order\":%" PRIu64 "}\n",
           impl, delivered, in_order);
    if (fflush(stdout) != 0)
        die_errno("stdout");
}

static inline void print_ready(void)
{
    if (printf("ready\n") < 0 || fflush(stdout) != 0)
        die_errno("stdout");
}

/* ---- option parsing ------------------------------------------------------------------- */

static inline int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static inline int parse_seconds(const char *s, double *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !(v > 0) || v > 1e7)
        return -1;
    *out = v;
    return 0;
}

/* Parses "ROLE --opt value ...". Options not in `allowed` (a space-separated list of option
 * names without dashes) are rejected. Calls usage() (which must exit 2) on any error. */
typedef void (*usage_fn)(const char *msg) __attribute__((noreturn));

static inline void parse_opts(int argc, char **argv, const char *allowed, usage_fn usage,
                              struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->window = 1024;
    o->timeout = 120.0;
    o->nodelay = -1;
    o->spin = -1;
    int have_port = 0, have_work = 0, have_count = 0, have_size = 0, have_host = 0;

    if (argc < 2)
        usage("missing role (server or client)");
    if (strcmp(argv[1], "server") == 0)
        o->role = ROLE_SERVER;
    else if (strcmp(argv[1], "client") == 0)
        o->role = ROLE_CLIENT;
    else if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
        usage(NULL);
    else
        usage("role must be server or client");

    for (int i = 2; i < argc; i += 2) {
        const char *name = argv[i];
        if (strncmp(name, "--", 2) != 0)
            usage("unexpected argument");
        name += 2;
        /* whole-word match against the allowed list */
        size_t len = strlen(name);
        int ok = 0;
        for (const char *p = allowed; *p;) {
            const char *q = strchr(p, ' ');
            size_t l = q ? (size_t)(q - p) : strlen(p);
            if (l == len && strncmp(p, name, len) == 0)
                ok = 1;
            p += l;
            while (*p == ' ')
                p++;
        }
        if (!ok || len == 0) {
            fprintf(stderr, "%s: unknown option %s\n", g_prog, argv[i]);
            usage(NULL);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: option %s needs a value\n", g_prog, argv[i]);
            usage(NULL);
        }
        const char *val = argv[i + 1];
        uint64_t u;
        if (strcmp(name, "host") == 0) {
            o->host = val;
            have_host = 1;
        } else if (strcmp(name, "port") == 0) {
            if (parse_u64(val, 1, 65535, &u) != 0)
                usage("--port must be 1..65535");
            o->port = (int)u;
            have_port = 1;
        } else if (strcmp(name, "work") == 0) {
            o->work = val;
            have_work = 1;
        } else if (strcmp(name, "count") == 0) {
            if (parse_u64(val, 1, (uint64_t)1 << 40, &u) != 0)
                usage("--count must be a positive integer");
            o->count = u;
            have_count = 1;
        } else if (strcmp(name, "size") == 0) {
            if (parse_u64(val, 8, (uint64_t)32 * 1024 * 1024, &u) != 0)
                usage("--size must be 8..33554432 bytes");
            o->size = (size_t)u;
            have_size = 1;
        } else if (strcmp(name, "window") == 0) {
            if (parse_u64(val, 1, 1000000, &u) != 0)
                usage("--window must be 1..1000000");
            o->window = (size_t)u;
        } else if (strcmp(name, "timeout") == 0) {
            if (parse_seconds(val, &o->timeout) != 0)
                usage("--timeout must be a positive number of seconds");
        } else if (strcmp(name, "wait") == 0) {
            if (strcmp(val, "spin") == 0)
                o->spin = 1;
            else if (strcmp(val, "block") == 0)
                o->spin = 0;
            else if (strcmp(val, "epoll") == 0)
                o->spin = 2;
            else
                usage("--wait must be spin, block or epoll");
        } else if (strcmp(name, "congestion") == 0) {
            if (val[0] == '\0' || strlen(val) >= 16)
                usage("--congestion must name a congestion control (e.g. cubic, bbr, reno)");
            o->congestion = val;
        } else if (strcmp(name, "nodelay") == 0) {
            if (strcmp(val, "on") == 0)
                o->nodelay = 1;
            else if (strcmp(val, "off") == 0)
                o->nodelay = 0;
            else
                usage("--nodelay must be on or off");
        }
    }
    if (!have_port || !have_work || !have_count || !have_size)
        usage("--port, --work, --count and --size are required");
    if (o->role == ROLE_CLIENT && !have_host)
        usage("the client needs --host");
    if (o->role == ROLE_SERVER && !have_host)
        o->host = "127.0.0.1";
}

#endif
