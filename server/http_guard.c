#include "server/http_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "common/util.h"
#include "core/log.h"

#define SCAN_MS 100 /* how late past its deadline a connection may be cut */

enum phase {
    PHASE_HEAD,     /* request line and headers due by deadline_ms */
    PHASE_IDLE,     /* kept alive between requests: request line due by deadline_ms */
    PHASE_BODY,     /* body arriving since since_ms */
    PHASE_HANDLING, /* the application has the request: no deadline */
    PHASE_CUT,      /* shut down, waiting for libmicrohttpd to close it */
};

struct tc_http_conn {
    struct tc_http_conn *prev, *next;
    int fd;
    enum phase phase;
    int64_t since_ms, deadline_ms;
    uint64_t body_bytes;
};

struct tc_http_guard {
    struct tc_http_guard_limits lim;
    pthread_mutex_t lock; /* the list and every record in it */
    pthread_cond_t cond;  /* stop requested */
    pthread_t thread;
    bool stopping;
    struct tc_http_conn *head;
};

static const char *const phase_names[] = {[PHASE_HEAD] = "request head",
                                          [PHASE_IDLE] = "next request line",
                                          [PHASE_BODY] = "request body",
                                          [PHASE_HANDLING] = "handling",
                                          [PHASE_CUT] = "cut"};

/* When the connection's body is overdue: after the grace, the bytes received must keep
 * up with min_rate; and never later than grace + max_body / min_rate. */
static int64_t body_deadline(const struct tc_http_guard *g, const struct tc_http_conn *c)
{
    int64_t earned = (int64_t)(c->body_bytes * 1000 / (uint64_t)g->lim.min_rate);
    int64_t cap = g->lim.max_body * 1000 / g->lim.min_rate;
    return c->since_ms + g->lim.header_ms + (earned < cap ? earned : cap);
}

struct cut_note {
    enum phase phase;
    int64_t ms;
};

/* Under g->lock; logged by the caller after unlocking (a blocked stderr must not hold up
 * libmicrohttpd's threads, which take the lock on every request). */
static void cut(struct tc_http_conn *c, int64_t now, struct cut_note *note)
{
    note->phase = c->phase;
    note->ms = now - c->since_ms;
    /* The fd is libmicrohttpd's and still open (its close notification, which removes this
     * record under the same lock, comes before the close). It sees the end of the stream and
     * closes the connection itself. */
    shutdown(c->fd, SHUT_RDWR);
    c->phase = PHASE_CUT;
}

static void *guard_main(void *arg)
{
    struct tc_http_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        int64_t now = tc_now_ms();
        struct cut_note notes[16];
        size_t n = 0, more = 0;
        for (struct tc_http_conn *c = g->head; c; c = c->next) {
            bool late =
                ((c->phase == PHASE_HEAD || c->phase == PHASE_IDLE) && now > c->deadline_ms) ||
                (c->phase == PHASE_BODY && g->lim.min_rate > 0 && now > body_deadline(g, c));
            if (!late)
                continue;
            struct cut_note spare;
            cut(c, now, n < TC_ARRAY_SIZE(notes) ? &notes[n] : &spare);
            if (n < TC_ARRAY_SIZE(notes))
                n++;
            else
                more++;
        }
        if (n) {
            pthread_mutex_unlock(&g->lock);
            for (size_t i = 0; i < n; i++)
                tc_log(TC_LOG_INFO, "connection cut: too slow", "{s:s, s:I}", "waiting_for",
                       phase_names[notes[i].phase], "ms", (json_int_t)notes[i].ms);
            if (more)
                tc_log(TC_LOG_INFO, "connections cut: too slow", "{s:I}", "more", (json_int_t)more);
            pthread_mutex_lock(&g->lock);
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += SCAN_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (!g->stopping)
            pthread_cond_timedwait(&g->cond, &g->lock, &until);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int tc_http_guard_new(const struct tc_http_guard_limits *limits, struct tc_http_guard **ret_guard)
{
    if (limits->header_ms <= 0 || limits->idle_ms <= 0 || limits->min_rate < 0 ||
        limits->max_body < 0)
        return -EINVAL;
    struct tc_http_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->lim = *limits;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->lock, NULL);
    int r = pthread_create(&g->thread, NULL, guard_main, g);
    if (r != 0) {
        pthread_cond_destroy(&g->cond);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return -r;
    }
    *ret_guard = g;
    return 0;
}

void tc_http_guard_free(struct tc_http_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = true;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head) {
        struct tc_http_conn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

struct tc_http_conn *tc_http_guard_open(struct tc_http_guard *g, int fd)
{
    struct tc_http_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->fd = fd;
    c->phase = PHASE_HEAD;
    c->since_ms = tc_now_ms();
    c->deadline_ms = c->since_ms + g->lim.header_ms;
    pthread_mutex_lock(&g->lock);
    c->next = g->head;
    if (g->head)
        g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->lock);
    return c;
}

void tc_http_guard_close(struct tc_http_guard *g, struct tc_http_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
}

/* Move c to phase p with the given deadline: from any phase but PHASE_CUT, or only from
 * phase `from` when that is not -1. */
static void set_phase(struct tc_http_guard *g, struct tc_http_conn *c, int from, enum phase p,
                      int64_t deadline_ms)
{
    if (!c)
        return;
    int64_t now = tc_now_ms();
    pthread_mutex_lock(&g->lock);
    if (c->phase != PHASE_CUT && (from < 0 || c->phase == (enum phase)from)) {
        c->phase = p;
        c->since_ms = now;
        c->deadline_ms = now + deadline_ms;
        c->body_bytes = 0;
    }
    pthread_mutex_unlock(&g->lock);
}

void tc_http_guard_request_line(struct tc_http_guard *g, struct tc_http_conn *c)
{
    /* The first request's head is due header_ms after the accept, as set by open. */
    set_phase(g, c, PHASE_IDLE, PHASE_HEAD, g->lim.header_ms);
}

void tc_http_guard_headers_done(struct tc_http_guard *g, struct tc_http_conn *c)
{
    set_phase(g, c, -1, PHASE_BODY, 0);
}

void tc_http_guard_body(struct tc_http_guard *g, struct tc_http_conn *c, size_t n)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    c->body_bytes += n;
    pthread_mutex_unlock(&g->lock);
}

void tc_http_guard_handling(struct tc_http_guard *g, struct tc_http_conn *c)
{
    set_phase(g, c, -1, PHASE_HANDLING, 0);
}

void tc_http_guard_completed(struct tc_http_guard *g, struct tc_http_conn *c)
{
    set_phase(g, c, -1, PHASE_IDLE, g->lim.idle_ms);
}
