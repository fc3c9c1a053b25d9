/* The egress proxy process. The main thread owns the control socket and every listener
 * (one epoll loop); each accepted connection gets a small detached thread, because name
 * resolution (getaddrinfo) blocks. Threads share a sandbox's attempt log under its mutex.
 * The process runs as nobody with no_new_privs and a seccomp denylist
 * (tc_seccomp_install_helper): it parses bytes from untrusted code. */
#include "sandbox/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/egress_proto.h"
#include "sandbox/egress_rules.h"
#include "sandbox/egress_tls.h"
#include "sandbox/seccomp.h"

#define HEAD_TIMEOUT_MS    10000
#define CONNECT_TIMEOUT_MS 10000
#define IDLE_TIMEOUT_MS    120000
#define CLOSE_GRACE_MS     200 /* let relays that are being cut report their last bytes */
#define THREAD_STACK       (512 * 1024)
#define NOBODY             65534

struct attempt {
    char host[TC_EGRESS_HOST_MAX + 1]; /* "" = unknown (malformed request) */
    uint16_t port;
    bool allowed;
    const char *reason;              /* static string */
    char resolved[INET6_ADDRSTRLEN]; /* "" = none */
    uint64_t sent, received;
    int inject; /* the credential grant the proxy added (sandbox's mitm), or -1 */
};

struct conn {
    struct conn *next, *prev;
    struct sbx *sbx;
    int cfd, ufd; /* shut down (never closed) by CLOSE under sbx->mu */
};

/* A host asked about (ADD's "ask_ms"): connections to it wait for the verdict. */
enum verdict { V_PENDING = 0, V_ONCE, V_EXECUTION, V_DENY };
struct ask {
    char host[TC_EGRESS_HOST_MAX + 1];
    uint16_t port;
    enum verdict verdict;
    bool timed_out; /* the deny is the clock's, not a reviewer's */
    bool failed;    /* the ask could not be sent: nobody could answer */
};

struct sbx {
    struct sbx *next; /* main thread's list */
    uint64_t handle;
    int lfd;
    struct tc_egress_rule *rules; /* room for TC_EGRESS_MAX_ASKS more: allowed for the run */
    size_t nrules;                /* grows (under mu) when a reviewer allows a host for the run */
    int64_t ask_ms;               /* 0: hosts not in the rules are refused; else asked about */
    bool ask_private;             /* a reviewer may allow non-public IPv4 literals (not metadata) */
    struct ask asks[TC_EGRESS_MAX_ASKS];
    size_t nasks;
    pthread_cond_t asked;     /* a verdict came, or the sandbox is being closed */
    struct tc_tls_mitm *mitm; /* credentials at egress (egress_tls.h), or NULL */
    pthread_mutex_t mu;
    pthread_cond_t idle;
    struct attempt *att;
    size_t natt;
    uint64_t dropped;
    struct conn *conns;
    unsigned active, refs;
    bool closed;
};

static atomic_uint g_total;
static struct sbx *g_list;
static int g_epfd = -1, g_ctl = -1;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sbx_unref(struct sbx *s)
{
    bool last;
    pthread_mutex_lock(&s->mu);
    last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (!last)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->asked);
    tc_tls_mitm_free(s->mitm);
    free(s->rules);
    free(s->att);
    free(s);
}

/* ---- the attempt log ---- */

static void announce(struct sbx *s, long idx);

static long record(struct sbx *s, const char *host, uint16_t port, bool allowed, const char *reason)
{
    long idx = -1;
    pthread_mutex_lock(&s->mu);
    if (s->natt < TC_EGRESS_MAX_ATTEMPTS) {
        struct attempt *a = &s->att[s->natt];
        memset(a, 0, sizeof(*a));
        snprintf(a->host, sizeof(a->host), "%s", host ? host : "");
        a->port = port;
        a->allowed = allowed;
        a->reason = reason;
        a->inject = -1;
        idx = (long)s->natt++;
    } else {
        s->dropped++;
    }
    pthread_mutex_unlock(&s->mu);
    if (strcmp(reason, "resolving") != 0)
        announce(s, idx);
    return idx;
}

static void update(struct sbx *s, long idx, bool allowed, const char *reason, const char *resolved)
{
    if (idx < 0)
        return;
    pthread_mutex_lock(&s->mu);
    s->att[idx].allowed = allowed;
    s->att[idx].reason = reason;
    if (resolved)
        snprintf(s->att[idx].resolved, sizeof(s->att[idx].resolved), "%s", resolved);
    pthread_mutex_unlock(&s->mu);
    if (strcmp(reason, "connecting") != 0)
        announce(s, idx);
}

static void count(struct sbx *s, long idx, uint64_t sent, uint64_t received)
{
    if (idx < 0)
        return;
    pthread_mutex_lock(&s->mu);
    s->att[idx].sent += sent;
    s->att[idx].received += received;
    pthread_mutex_unlock(&s->mu);
}

/* One attempt as FINAL and ATTEMPT give it. Caller holds the sandbox's mu. */
static json_t *attempt_json(const struct sbx *s, const struct attempt *a)
{
    const char *reason = a->reason;
    if (strcmp(reason, "resolving") == 0 || strcmp(reason, "connecting") == 0)
        reason = "cancelled";
    json_t *j = json_pack("{s:s?, s:i, s:b, s:s, s:I, s:I, s:s?}", "host",
                          a->host[0] ? a->host : NULL, "port", (int)a->port, "allowed", a->allowed,
                          "reason", reason, "bytes_sent", (json_int_t)a->sent, "bytes_received",
                          (json_int_t)a->received, "resolved", a->resolved[0] ? a->resolved : NULL);
    if (j && a->inject >= 0) /* which credential the proxy added: names and lease, no value */
        json_object_set_new(j, "credential",
                            json_pack("{s:s, s:s, s:s}", "secret",
                                      tc_tls_mitm_secret(s->mitm, a->inject), "lease_id",
                                      tc_tls_mitm_lease(s->mitm, a->inject), "header",
                                      tc_tls_mitm_header(s->mitm, a->inject)));
    return j;
}

/* Caller holds s->mu. */
static char *snapshot(struct sbx *s)
{
    json_t *arr = json_array(), *root;
    char *out;
    for (size_t i = 0; i < s->natt; i++)
        json_array_append_new(arr, attempt_json(s, &s->att[i]));
    root = json_pack("{s:o, s:I}", "attempts", arr, "dropped", (json_int_t)s->dropped);
    out = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return out;
}

/* Attempt idx as it stands now, to the launcher (ATTEMPT, egress_proto.h), unless the sandbox
 * is being closed (its FINAL says it all). */
static void announce(struct sbx *s, long idx)
{
    if (idx < 0)
        return;
    pthread_mutex_lock(&s->mu);
    json_t *j = s->closed ? NULL : attempt_json(s, &s->att[idx]);
    pthread_mutex_unlock(&s->mu);
    if (!j || json_object_set_new(j, "index", json_integer(idx)) < 0) {
        json_decref(j);
        return;
    }
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (text)
        (void)tc_eg_send(g_ctl, TC_EG_ATTEMPT, s->handle, text, strlen(text), -1);
    free(text);
}

/* ---- one connection ---- */

/* Wait for events on fd until deadline: >0 ready, 0 timeout, <0 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = events};
        if (left <= 0)
            return 0;
        int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r > 0)
            return p.revents & (events | POLLHUP | POLLERR) ? 1 : 0;
    }
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void reply(int fd, int status, const char *text, const char *body)
{
    char buf[768];
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     status, text, strlen(body), body);
    if (n > 0)
        (void)send_all(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static void deny(int fd, int status, const char *text, const char *why, const char *host,
                 uint16_t port)
{
    char body[512];
    snprintf(body, sizeof(body), "toolcage egress proxy: %s:%u %s\n", host, (unsigned)port, why);
    reply(fd, status, text, body);
}

static void addr_text(const struct sockaddr *sa, char *out, size_t size)
{
    const void *a = sa->sa_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    if (!inet_ntop(sa->sa_family, a, out, (socklen_t)size))
        snprintf(out, size, "?");
}

/* Non-blocking connect with a deadline; registers the socket for CLOSE first. */
static int connect_to(struct conn *c, const struct addrinfo *ai, uint16_t port)
{
    struct sockaddr_storage ss;
    int fd, err = 0;
    socklen_t el = sizeof(err);

    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    pthread_mutex_lock(&c->sbx->mu);
    bool closed = c->sbx->closed;
    if (!closed)
        c->ufd = fd;
    pthread_mutex_unlock(&c->sbx->mu);
    if (closed) {
        close(fd);
        return -ECANCELED;
    }
    if (connect(fd, (struct sockaddr *)&ss, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
        err = errno;
    } else {
        int w = wait_fd(fd, POLLOUT, now_ms() + CONNECT_TIMEOUT_MS);
        if (w <= 0)
            err = w == 0 ? ETIMEDOUT : -w;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
    }
    if (err) {
        pthread_mutex_lock(&c->sbx->mu);
        c->ufd = -1;
        pthread_mutex_unlock(&c->sbx->mu);
        close(fd);
        return -err;
    }
    fcntl(fd, F_SETFL, 0); /* blocking again: the relay uses poll + SO_SNDTIMEO */
    return 0;
}

/* Copy both ways until both sides are done or nothing moves for IDLE_TIMEOUT_MS. */
static void relay(struct conn *c, long idx)
{
    char buf[16384];
    bool c_eof = false, u_eof = false;
    struct timeval tv = {.tv_sec = IDLE_TIMEOUT_MS / 1000};

    setsockopt(c->cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(c->ufd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (!c_eof || !u_eof) {
        struct pollfd p[2] = {{.fd = c_eof ? -1 : c->cfd, .events = POLLIN},
                              {.fd = u_eof ? -1 : c->ufd, .events = POLLIN}};
        int r = poll(p, 2, IDLE_TIMEOUT_MS);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        for (int i = 0; i < 2; i++) {
            int from = i == 0 ? c->cfd : c->ufd, to = i == 0 ? c->ufd : c->cfd;
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = recv(from, buf, sizeof(buf), 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                if (n < 0)
                    return; /* reset: end both directions */
                if (i == 0)
                    c_eof = true;
                else
                    u_eof = true;
                shutdown(to, SHUT_WR);
                continue;
            }
            if (send_all(to, buf, (size_t)n) < 0)
                return;
            count(c->sbx, idx, i == 0 ? (uint64_t)n : 0, i == 1 ? (uint64_t)n : 0);
        }
    }
}

/* The rule a reviewer's allow stands for: this host and port exactly. An IPv4 literal that is
 * not a public address is only reachable when the policy says "ask_private" (it never names a
 * metadata address): a name that resolves to such an address stays refused either way, as for
 * an allowlist entry. */
static void ask_rule(const struct sbx *s, const char *host, uint16_t port, struct tc_egress_rule *r)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->host, sizeof(r->host), "%s", host);
    r->port = port;
    struct in_addr a;
    if (s->ask_private && inet_pton(AF_INET, host, &a) == 1) {
        memcpy(r->ip, &a, 4);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = a};
        r->ip_literal = tc_egress_classify((struct sockaddr *)&sa) != TC_ADDR_METADATA;
    }
}

/* The attempt's reason for an address of class c (not public). */
static const char *blocked_reason(enum tc_addr_class c)
{
    static const char *const reasons[] = {[TC_ADDR_LOOPBACK] = "blocked_loopback",
                                          [TC_ADDR_PRIVATE] = "blocked_private",
                                          [TC_ADDR_LINK_LOCAL] = "blocked_link_local",
                                          [TC_ADDR_METADATA] = "blocked_metadata",
                                          [TC_ADDR_CGNAT] = "blocked_cgnat",
                                          [TC_ADDR_MULTICAST] = "blocked_multicast",
                                          [TC_ADDR_UNSPECIFIED] = "blocked_unspecified",
                                          [TC_ADDR_RESERVED] = "blocked_reserved"};
    return c > TC_ADDR_PUBLIC && c <= TC_ADDR_RESERVED ? reasons[c] : "blocked_reserved";
}

/* The class of host when it is an IPv4 literal that is not public, else TC_ADDR_PUBLIC. */
static enum tc_addr_class literal_class(const char *host)
{
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) != 1)
        return TC_ADDR_PUBLIC;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = a};
    return tc_egress_classify((struct sockaddr *)&sa);
}

/* A deadline on the clock the sandbox's condition variables wait on (CLOCK_MONOTONIC). */
static void timespec_after(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* host:port is not in the rules and the sandbox asks: hold this connection until a reviewer
 * answers (through the launcher and the server), ask_ms pass (deny) or the sandbox ends. A
 * second connection to a host already asked about waits for the same answer. The attempt is
 * recorded as "asking", then as what came of it. true: connect, with *ret_rule (*ret_idx the
 * attempt, recorded "resolving"). */
static bool ask(struct sbx *s, const char *host, uint16_t port, struct tc_egress_rule *ret_rule,
                long *ret_idx)
{
    struct timespec until;
    size_t n = SIZE_MAX, ri;
    bool fresh = false;

    /* a non-public address literal nobody may allow here: refused without asking */
    enum tc_addr_class lc = literal_class(host);
    if (lc != TC_ADDR_PUBLIC && (!s->ask_private || lc == TC_ADDR_METADATA)) {
        *ret_idx = record(s, host, port, false, blocked_reason(lc));
        return false;
    }
    timespec_after(&until, s->ask_ms);
    pthread_mutex_lock(&s->mu);
    /* allowed for the execution since serve() looked: no second ask */
    if (tc_egress_match(s->rules, s->nrules, host, port, &ri) == TC_EGRESS_MATCH) {
        *ret_rule = s->rules[ri];
        pthread_mutex_unlock(&s->mu);
        *ret_idx = record(s, host, port, true, "resolving");
        return true;
    }
    for (size_t i = 0; i < s->nasks; i++)
        if (s->asks[i].port == port && strcmp(s->asks[i].host, host) == 0 &&
            s->asks[i].verdict == V_PENDING)
            n = i;
    if (n == SIZE_MAX && s->nasks < TC_EGRESS_MAX_ASKS) {
        n = s->nasks++;
        snprintf(s->asks[n].host, sizeof(s->asks[n].host), "%s", host);
        s->asks[n].port = port;
        s->asks[n].verdict = V_PENDING;
        s->asks[n].timed_out = s->asks[n].failed = false;
        fresh = true;
    }
    pthread_mutex_unlock(&s->mu);
    if (n == SIZE_MAX) {
        *ret_idx = record(s, host, port, false, "ask_limit");
        return false;
    }
    long idx = record(s, host, port, false, "asking");
    *ret_idx = idx;
    if (fresh) {
        json_t *j =
            json_pack("{s:I, s:s, s:i, s:I, s:I}", "ask", (json_int_t)n, "host", host, "port",
                      (int)port, "index", (json_int_t)idx, "timeout_ms", (json_int_t)s->ask_ms);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text || tc_eg_send(g_ctl, TC_EG_ASK, s->handle, text, strlen(text), -1) < 0) {
            pthread_mutex_lock(&s->mu);
            s->asks[n].verdict = V_DENY; /* nobody can answer: a deny, for every waiter */
            s->asks[n].failed = true;
            pthread_cond_broadcast(&s->asked);
            pthread_mutex_unlock(&s->mu);
        }
        free(text);
    }
    pthread_mutex_lock(&s->mu);
    int r = 0;
    while (s->asks[n].verdict == V_PENDING && !s->closed && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&s->asked, &s->mu, &until);
    enum verdict v = s->asks[n].verdict;
    bool closed = s->closed;
    if (v == V_PENDING && !closed) { /* nobody answered in time: a deny, for every waiter */
        s->asks[n].verdict = v = V_DENY;
        s->asks[n].timed_out = true;
        pthread_cond_broadcast(&s->asked);
    }
    const char *deny_why = s->asks[n].timed_out ? "ask_timeout"
                           : s->asks[n].failed  ? "ask_failed"
                                                : "denied_by_reviewer";
    ask_rule(s, host, port, ret_rule);
    if (v == V_EXECUTION) { /* later connections match the rule without asking */
        bool known = tc_egress_match(s->rules, s->nrules, host, port, &ri) == TC_EGRESS_MATCH;
        if (!known)
            s->rules[s->nrules++] = *ret_rule; /* room: one per ask, TC_EGRESS_MAX_ASKS */
    }
    pthread_mutex_unlock(&s->mu);
    if (closed && v == V_PENDING) {
        update(s, idx, false, "cancelled", NULL);
        return false;
    }
    if (v == V_DENY) {
        update(s, idx, false, deny_why, NULL);
        return false;
    }
    update(s, idx, true, "resolving", NULL);
    return true;
}

static void serve(struct conn *c)
{
    struct sbx *s = c->sbx;
    char buf[TC_EGRESS_HEAD_MAX], out[TC_EGRESS_HEAD_MAX + 512], ip[INET6_ADDRSTRLEN] = "";
    size_t len = 0, ri = 0;
    struct tc_http_head h;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    const char *blocked = NULL;
    int64_t deadline = now_ms() + HEAD_TIMEOUT_MS;
    long idx;
    int r = -EAGAIN;

    while (r == -EAGAIN) {
        if (wait_fd(c->cfd, POLLIN, deadline) <= 0)
            break;
        ssize_t n = recv(c->cfd, buf + len, sizeof(buf) - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        r = tc_http_head_parse(buf, len, &h);
    }
    if (r == -EAGAIN) { /* EOF, reset or timeout before a whole head */
        record(s, NULL, 0, false, "incomplete_request");
        if (len > 0)
            reply(c->cfd, 408, "Request Timeout", "toolcage egress proxy: incomplete request\n");
        return;
    }
    if (r < 0) {
        record(s, NULL, 0, false, r == -E2BIG ? "request_too_large" : "bad_request");
        reply(c->cfd, r == -E2BIG ? 431 : 400,
              r == -E2BIG ? "Request Header Fields Too Large" : "Bad Request",
              "toolcage egress proxy: only CONNECT host:port and absolute http:// requests\n");
        return;
    }
    struct tc_egress_rule rule; /* a copy: a reviewer's allow may grow the rules meanwhile */
    pthread_mutex_lock(&s->mu);
    enum tc_egress_match m = tc_egress_match(s->rules, s->nrules, h.host, h.port, &ri);
    if (m == TC_EGRESS_MATCH)
        rule = s->rules[ri];
    pthread_mutex_unlock(&s->mu);
    if (m != TC_EGRESS_MATCH && s->ask_ms > 0) {
        if (!ask(s, h.host, h.port, &rule, &idx)) {
            deny(c->cfd, 403, "Forbidden", "was not allowed by a reviewer", h.host, h.port);
            return;
        }
    } else if (m != TC_EGRESS_MATCH) {
        const char *why = m == TC_EGRESS_NO_PORT ? "port_not_allowed" : "host_not_allowed";
        record(s, h.host, h.port, false, why);
        deny(c->cfd, 403, "Forbidden", "is not in this tool's network allowlist", h.host, h.port);
        return;
    } else {
        idx = record(s, h.host, h.port, true, "resolving");
    }
    r = getaddrinfo(h.host, NULL, &hints, &res);
    if (r != 0 || !res) {
        update(s, idx, true, "resolve_failed", NULL);
        deny(c->cfd, 502, "Bad Gateway", "could not be resolved", h.host, h.port);
        return;
    }
    update(s, idx, true, "connecting", NULL);
    r = -EHOSTUNREACH;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        if (!tc_egress_addr_allowed(&rule, ai->ai_addr)) {
            if (!blocked) {
                blocked = tc_egress_class_name(tc_egress_classify(ai->ai_addr));
                addr_text(ai->ai_addr, ip, sizeof(ip));
            }
            continue;
        }
        addr_text(ai->ai_addr, ip, sizeof(ip));
        r = connect_to(c, ai, h.port); /* the address checked is the address used */
        if (r == 0 || r == -ECANCELED)
            break;
    }
    freeaddrinfo(res);
    if (r == -EHOSTUNREACH && blocked) {
        const char *reason = "blocked_reserved";
        for (int i = TC_ADDR_LOOPBACK; i <= TC_ADDR_RESERVED; i++)
            if (strcmp(blocked, tc_egress_class_name((enum tc_addr_class)i)) == 0)
                reason = blocked_reason((enum tc_addr_class)i);
        update(s, idx, false, reason, ip);
        deny(c->cfd, 403, "Forbidden", "resolves to an address that is not allowed", h.host,
             h.port);
        return;
    }
    if (r < 0) {
        update(s, idx, true, r == -ECANCELED ? "cancelled" : "connect_failed", ip[0] ? ip : NULL);
        deny(c->cfd, r == -ETIMEDOUT ? 504 : 502,
             r == -ETIMEDOUT ? "Gateway Timeout" : "Bad Gateway", "could not be connected to",
             h.host, h.port);
        return;
    }
    update(s, idx, true, "allowed", ip);
    int gi = h.kind == TC_HTTP_CONNECT ? tc_tls_mitm_find(s->mitm, h.host, h.port) : -1;
    if (gi >= 0 && len == h.head_len) {
        /* credentials at egress: the proxy terminates TLS, adds the header, relays */
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (send_all(c->cfd, ok, sizeof(ok) - 1) < 0)
            return;
        uint64_t sent = 0, received = 0;
        bool injected = false;
        const char *why = tc_tls_mitm_serve(s->mitm, gi, c->cfd, c->ufd, IDLE_TIMEOUT_MS, &sent,
                                            &received, &injected);
        pthread_mutex_lock(&s->mu);
        if (idx >= 0 && injected) /* recorded once the credential left, not before */
            s->att[idx].inject = gi;
        pthread_mutex_unlock(&s->mu);
        count(s, idx, sent, received);
        if (why)
            update(s, idx, true, why, NULL);
        else
            announce(s, idx); /* with its bytes */
        return;
    }
    if (h.kind == TC_HTTP_CONNECT) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (send_all(c->cfd, ok, sizeof(ok) - 1) < 0)
            return;
    } else {
        long n = tc_http_head_rewrite(buf, &h, out, sizeof(out));
        if (n < 0 || send_all(c->ufd, out, (size_t)n) < 0)
            return;
        count(s, idx, (uint64_t)n, 0);
    }
    if (len > h.head_len) { /* bytes the client sent right after the head */
        if (send_all(c->ufd, buf + h.head_len, len - h.head_len) < 0)
            return;
        count(s, idx, len - h.head_len, 0);
    }
    relay(c, idx);
    announce(s, idx); /* with its bytes */
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct sbx *s = c->sbx;

    serve(c);
    pthread_mutex_lock(&s->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    int cfd = c->cfd, ufd = c->ufd;
    s->active--;
    if (s->active == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    close(cfd);
    if (ufd >= 0)
        close(ufd);
    free(c);
    atomic_fetch_sub(&g_total, 1);
    sbx_unref(s);
    return NULL;
}

/* ---- main thread ---- */

static void on_accept(struct sbx *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or the sandbox is gone */
        pthread_mutex_lock(&s->mu);
        bool full = s->active >= TC_EGRESS_MAX_CONN_SANDBOX ||
                    atomic_load(&g_total) >= TC_EGRESS_MAX_CONN_TOTAL;
        pthread_mutex_unlock(&s->mu);
        struct conn *c = full ? NULL : calloc(1, sizeof(*c));
        if (!c) {
            record(s, NULL, 0, false, full ? "too_many_connections" : "proxy_error");
            struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
            reply(fd, 503, "Service Unavailable",
                  "toolcage egress proxy: too many connections from this sandbox\n");
            close(fd);
            continue;
        }
        c->sbx = s;
        c->cfd = fd;
        c->ufd = -1;
        pthread_mutex_lock(&s->mu);
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        s->active++;
        s->refs++;
        pthread_mutex_unlock(&s->mu);
        atomic_fetch_add(&g_total, 1);

        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, THREAD_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&t, &attr, conn_main, c);
        pthread_attr_destroy(&attr);
        if (r != 0) {
            /* undo what conn_main would have done */
            record(s, NULL, 0, false, "proxy_error");
            pthread_mutex_lock(&s->mu);
            if (c->prev)
                c->prev->next = c->next;
            else
                s->conns = c->next;
            if (c->next)
                c->next->prev = c->prev;
            s->active--;
            pthread_mutex_unlock(&s->mu);
            close(c->cfd);
            free(c);
            atomic_fetch_sub(&g_total, 1);
            sbx_unref(s);
        }
    }
}

/* payload {"allow": ["rule", ...], "ask_ms": n}: an empty list only when n > 0 */
static void on_add(const struct tc_eg_hdr *h, const char *payload, int lfd)
{
    json_t *root = payload ? json_loads(payload, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *arr = json_object_get(root, "allow"), *ask_ms = json_object_get(root, "ask_ms");
    json_t *inject = json_object_get(root, "inject");
    struct sbx *s = NULL;
    size_t i;
    json_t *v;

    if (!json_is_array(arr) || json_array_size(arr) > TC_EGRESS_MAX_RULES ||
        (ask_ms && (!json_is_integer(ask_ms) || json_integer_value(ask_ms) < 0 ||
                    json_integer_value(ask_ms) > 24 * 3600 * 1000)) ||
        (json_array_size(arr) == 0 && json_integer_value(ask_ms) <= 0))
        goto fail;
    for (struct sbx *x = g_list; x; x = x->next)
        if (x->handle == h->handle)
            goto fail;
    s = calloc(1, sizeof(*s));
    if (!s)
        goto fail;
    s->rules = calloc(json_array_size(arr) + TC_EGRESS_MAX_ASKS, sizeof(*s->rules));
    s->att = calloc(TC_EGRESS_MAX_ATTEMPTS, sizeof(*s->att));
    if (!s->rules || !s->att)
        goto fail;
    json_array_foreach(arr, i, v)
    {
        if (!json_is_string(v) || tc_egress_rule_parse(json_string_value(v), &s->rules[i]) < 0)
            goto fail;
    }
    s->nrules = json_array_size(arr);
    s->ask_ms = json_integer_value(ask_ms);
    s->ask_private = json_is_true(json_object_get(root, "ask_private"));
    if (json_array_size(inject) > 0 &&
        !(s->mitm =
              tc_tls_mitm_new(json_string_value(json_object_get(root, "ca_cert")) ?: "",
                              json_string_value(json_object_get(root, "ca_key")) ?: "", inject)))
        goto fail;
    s->handle = h->handle;
    s->lfd = lfd;
    s->refs = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* ask deadlines: not moved by clock steps */
    pthread_cond_init(&s->asked, &ca);
    pthread_condattr_destroy(&ca);
    fcntl(lfd, F_SETFL, O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    if (epoll_ctl(g_epfd, EPOLL_CTL_ADD, lfd, &ev) < 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->idle);
        pthread_cond_destroy(&s->asked);
        goto fail;
    }
    s->next = g_list;
    g_list = s;
    json_decref(root);
    return;
fail:
    /* The listener is closed: the sandbox's connections are refused, nothing leaks out. */
    if (s) {
        tc_tls_mitm_free(s->mitm);
        free(s->rules);
        free(s->att);
        free(s);
    }
    close(lfd);
    json_decref(root);
}

/* Connections still in the accept queue when the sandbox ended: record what they asked. */
static void drain_backlog(struct sbx *s)
{
    for (int k = 0; k < 64; k++) {
        char buf[TC_EGRESS_HEAD_MAX];
        struct tc_http_head h;
        size_t ri;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0 && tc_http_head_parse(buf, (size_t)n, &h) == 0) {
            pthread_mutex_lock(&s->mu);
            bool ok = tc_egress_match(s->rules, s->nrules, h.host, h.port, &ri) == TC_EGRESS_MATCH;
            pthread_mutex_unlock(&s->mu);
            record(s, h.host, h.port, ok, "cancelled");
        } else
            record(s, NULL, 0, false, "cancelled");
        close(fd);
    }
}

static void on_close(uint64_t handle)
{
    struct sbx **pp = &g_list, *s = NULL;
    char *json = NULL;

    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->handle == handle) {
            s = *pp;
            *pp = s->next;
            break;
        }
    if (!s) {
        static const char empty[] = "{\"attempts\":[],\"dropped\":0}";
        (void)tc_eg_send(g_ctl, TC_EG_FINAL, handle, empty, sizeof(empty) - 1, -1);
        return;
    }
    epoll_ctl(g_epfd, EPOLL_CTL_DEL, s->lfd, NULL);
    drain_backlog(s);
    close(s->lfd);
    s->lfd = -1;

    pthread_mutex_lock(&s->mu);
    s->closed = true;
    pthread_cond_broadcast(&s->asked); /* connections waiting for a verdict give up */
    for (struct conn *c = s->conns; c; c = c->next) {
        shutdown(c->cfd, SHUT_RDWR);
        if (c->ufd >= 0)
            shutdown(c->ufd, SHUT_RDWR);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)CLOSE_GRACE_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (s->active > 0)
        if (pthread_cond_timedwait(&s->idle, &s->mu, &until) == ETIMEDOUT)
            break;
    json = snapshot(s);
    pthread_mutex_unlock(&s->mu);
    if (json)
        (void)tc_eg_send(g_ctl, TC_EG_FINAL, handle, json, strlen(json), -1);
    else
        (void)tc_eg_send(g_ctl, TC_EG_FINAL, handle, "{\"attempts\":[],\"dropped\":0}", 27, -1);
    free(json);
    sbx_unref(s);
}

/* A reviewer's answer (egress_proto.h VERDICT) for ask n of a sandbox; one that is not pending
 * any more (timed out) is ignored. */
static void on_verdict(uint64_t handle, const char *payload)
{
    json_t *j = payload ? json_loads(payload, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *n = json_object_get(j, "ask");
    const char *v = json_string_value(json_object_get(j, "verdict"));
    enum verdict verdict = !v                                  ? V_PENDING
                           : strcmp(v, "allow_once") == 0      ? V_ONCE
                           : strcmp(v, "allow_execution") == 0 ? V_EXECUTION
                           : strcmp(v, "deny") == 0            ? V_DENY
                                                               : V_PENDING;
    for (struct sbx *s = g_list; s && verdict != V_PENDING && json_is_integer(n); s = s->next) {
        if (s->handle != handle)
            continue;
        pthread_mutex_lock(&s->mu);
        json_int_t k = json_integer_value(n);
        if (k >= 0 && (size_t)k < s->nasks && s->asks[k].verdict == V_PENDING) {
            s->asks[k].verdict = verdict;
            pthread_cond_broadcast(&s->asked);
        }
        pthread_mutex_unlock(&s->mu);
        break;
    }
    json_decref(j);
}

/* 0: keep going; <0: the launcher is gone. */
static int on_ctl(void)
{
    for (;;) {
        struct tc_eg_hdr h;
        char *payload = NULL;
        int fd = -1;
        int r = tc_eg_recv(g_ctl, &h, &payload, &fd);
        if (r == -EAGAIN)
            return 0;
        if (r == -EBADMSG)
            continue; /* the launcher is the only peer; drop what does not parse */
        if (r < 0)
            return r;
        if (h.type == TC_EG_ADD && fd >= 0) {
            on_add(&h, payload, fd);
            fd = -1;
            if (payload) /* the CA key and credentials: kept only where on_add put them */
                explicit_bzero(payload, strlen(payload));
        } else if (h.type == TC_EG_CLOSE) {
            on_close(h.handle);
        } else if (h.type == TC_EG_VERDICT) {
            on_verdict(h.handle, payload);
        }
        if (fd >= 0)
            close(fd);
        free(payload);
    }
}

static int drop_privileges(unsigned long ppid)
{
    struct rlimit nf;

    /* two fds per connection plus listeners: make room before losing the right to */
    if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_max < 2 * TC_EGRESS_MAX_CONN_TOTAL + 1100) {
        nf.rlim_cur = nf.rlim_max = 2 * TC_EGRESS_MAX_CONN_TOTAL + 1100;
        setrlimit(RLIMIT_NOFILE, &nf);
    }
    if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < nf.rlim_max) {
        nf.rlim_cur = nf.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nf);
    }
    if (geteuid() == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) < 0)
            return -errno;
    }
    /* A credential change clears the parent-death signal: arm it again, then check. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (ppid && getppid() != (pid_t)ppid)
        return -ESRCH;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    prctl(PR_SET_DUMPABLE, 0);
    return tc_seccomp_install_helper(); /* still single-threaded here */
}

int tc_egress_run(int fd, pid_t ppid, const char *ca_file)
{
    sigset_t none;
    int r;

    /* upstream TLS (credentials at egress): its trust store is read now, before the
     * privileges go; a file that does not load is a proxy that does not start */
    if (tc_tls_client_init(ca_file) < 0) {
        fprintf(stderr, "toolcage egress: cannot load the upstream CA store%s%s\n",
                ca_file ? " with " : "", ca_file ? ca_file : "");
        return 1;
    }

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* the launcher blocks a few; we want defaults */
    signal(SIGPIPE, SIG_IGN);
    if ((r = drop_privileges((unsigned long)ppid)) < 0) {
        fprintf(stderr, "toolcage egress: cannot drop privileges: %s\n", strerror(-r));
        return 1;
    }
    g_ctl = fd;
    fcntl(g_ctl, F_SETFD, FD_CLOEXEC);
    /* Blocking sends (a FINAL must not be lost to EAGAIN); receives use MSG_DONTWAIT. The
     * launcher's end is non-blocking, so the two can never wait on each other. */
    g_epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (g_epfd < 0 || epoll_ctl(g_epfd, EPOLL_CTL_ADD, g_ctl, &ev) < 0)
        return 1;
    for (;;) {
        struct epoll_event evs[64];
        int n = epoll_wait(g_epfd, evs, 64, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return 1;
        bool ctl = false;
        /* listeners first: a CLOSE handled below frees its sandbox */
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL)
                ctl = true;
            else
                on_accept(evs[i].data.ptr);
        }
        if (ctl && on_ctl() < 0)
            return 0; /* launcher gone: so are its sandboxes */
    }
}
