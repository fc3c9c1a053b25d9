#include "server/egress_asks.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approval/egress_ask.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"
#include "sandbox/sandbox.h"
#include "server/http.h"

#define POLL_MS       250
#define SWEEP_MS      10000
#define SWEEP_GRACE   10   /* seconds past expiry before a dead server's ask is expired */
#define MAX_LIVE      4096 /* asks held at once, server-wide */
#define ASK_MARGIN_MS 1000

struct live {
    char execution_id[37];
    long n;
    char host[254];
    int port;
    int64_t timeout_ms;
    int64_t deadline_ms; /* tc_now_ms clock: the proxy gives up then */
    int64_t next_try_ms; /* writing the row failed: not before then */
    char id[37];         /* the row; "" until written */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stopping;
    struct tc_server *srv;
    struct live live[MAX_LIVE];
    size_t nlive;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void verdict(const char *execution_id, long n, const char *v)
{
    if (tc_server_begin(g.srv)) {
        (void)tc_launcher_verdict(g.srv->launcher, execution_id, n, v);
        tc_server_end(g.srv);
    }
}

/* The launcher's reader thread: note it, the thread writes it. Nothing is sent from here
 * (the reader must never wait on the launcher): an ask that cannot be noted is left to the
 * proxy's clock, which denies it. */
static void on_ask(void *ud, const char *id, json_t *ask)
{
    (void)ud;
    json_int_t t = json_integer_value(json_object_get(ask, "timeout_ms"));
    long n = (long)json_integer_value(json_object_get(ask, "ask"));
    pthread_mutex_lock(&g.mu);
    bool full = g.nlive >= MAX_LIVE || g.stopping || strlen(id) >= 37;
    if (!full) {
        struct live *l = &g.live[g.nlive++];
        memset(l, 0, sizeof(*l));
        snprintf(l->execution_id, sizeof(l->execution_id), "%s", id);
        l->n = n;
        snprintf(l->host, sizeof(l->host), "%s", json_string_value(json_object_get(ask, "host")));
        l->port = (int)json_integer_value(json_object_get(ask, "port"));
        l->timeout_ms = t;
        l->deadline_ms = tc_now_ms() + t;
        pthread_cond_signal(&g.cv);
    }
    pthread_mutex_unlock(&g.mu);
    if (full)
        tc_log(TC_LOG_WARN, "egress ask not noted: the proxy denies it when its time is up",
               "{s:s, s:i}", "execution_id", id, "live", (int)MAX_LIVE);
}

/* A finished row's answer for the proxy; NULL while pending. */
static const char *answer_of(const char *status)
{
    if (strcmp(status, "allowed_once") == 0)
        return "allow_once";
    if (strcmp(status, "allowed_execution") == 0)
        return "allow_execution";
    return strcmp(status, "pending") == 0 ? NULL : "deny";
}

static void drop(size_t i)
{
    g.live[i] = g.live[--g.nlive];
}

/* One round: write new asks, pass on answers, close what timed out or outlived its run. */
static void round_once(PGconn *c)
{
    const struct tc_keys *keys = g.srv->keys;
    int64_t now = tc_now_ms();
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < g.nlive;) {
        struct live l = g.live[i];
        pthread_mutex_unlock(&g.mu);
        const char *send = NULL, *close_as = NULL;
        bool done = false;
        /* the row expires a second before the proxy gives up: an answer the row takes is one
         * the proxy can still apply (the answer reaches it within a poll, 250 ms) */
        int64_t left = l.deadline_ms - ASK_MARGIN_MS - now;
        if (!l.id[0] && left <= 0) {
            done = true; /* too late to ask anyone: the proxy denies it */
        } else if (!l.id[0] && now >= l.next_try_ms) {
            int r = tc_egress_ask_insert(c, keys, l.execution_id, l.n, l.host, l.port, left,
                                         g.srv->public_url, l.id);
            if (r == -ENOENT) { /* not a running execution (a session's sandbox): no one asks */
                send = "deny";
                done = true;
            } else if (r == 0) {
                tc_log(TC_LOG_INFO, "egress ask", "{s:s, s:s, s:s, s:i}", "ask_id", l.id,
                       "execution_id", l.execution_id, "host", l.host, "port", l.port);
            } else {
                tc_log(TC_LOG_WARN, "writing an egress ask failed; trying again in a second",
                       "{s:s, s:s}", "execution_id", l.execution_id, "error", tc_db_error(c));
                l.next_try_ms = now + 1000;
            }
        } else if (!l.id[0]) {
            /* waiting to try again */
        } else {
            const char *p[] = {l.id};
            PGresult *r = tc_db_exec(c,
                                     "SELECT a.status, e.status FROM egress_asks a"
                                     " JOIN executions e ON e.id = a.execution_id WHERE a.id = $1",
                                     1, p);
            if (r && PQntuples(r) == 1) {
                send = answer_of(PQgetvalue(r, 0, 0));
                done = send != NULL;
                if (!done && strcmp(PQgetvalue(r, 0, 1), "running") != 0) {
                    close_as = "withdrawn";
                    done = true;
                }
            }
            PQclear(r);
        }
        if (!done && now >= l.deadline_ms) { /* the proxy has denied it by now */
            close_as = l.id[0] ? "expired" : NULL;
            done = true;
        }
        if (close_as)
            (void)tc_egress_ask_close(c, keys, l.id, close_as);
        if (send)
            verdict(l.execution_id, l.n, send);
        pthread_mutex_lock(&g.mu);
        /* the entry may have moved (on_ask appends; only this thread drops) */
        if (i < g.nlive && strcmp(g.live[i].execution_id, l.execution_id) == 0 &&
            g.live[i].n == l.n) {
            if (done) {
                drop(i);
                continue;
            }
            memcpy(g.live[i].id, l.id, sizeof(l.id));
            g.live[i].next_try_ms = l.next_try_ms;
        }
        i++;
    }
    pthread_mutex_unlock(&g.mu);
}

static void *asks_main(void *arg)
{
    (void)arg;
    int64_t last_sweep = 0;
    PGconn *c = NULL;
    pthread_mutex_lock(&g.mu);
    while (!g.stopping) {
        bool busy = g.nlive > 0;
        pthread_mutex_unlock(&g.mu);
        int64_t now = tc_now_ms();
        bool sweep = now - last_sweep >= SWEEP_MS;
        if (busy || sweep) {
            c = tc_db_acquire(g.srv->db, 1000);
            if (!c) { /* no database: what the proxy gave up on is forgotten (the sweep of
                       * some replica expires its row later) */
                pthread_mutex_lock(&g.mu);
                for (size_t i = 0; i < g.nlive;)
                    if (g.live[i].deadline_ms + 5000 < tc_now_ms())
                        drop(i);
                    else
                        i++;
                pthread_mutex_unlock(&g.mu);
            }
            if (c) {
                if (busy)
                    round_once(c);
                if (sweep) { /* asks of a server that went away while they were pending */
                    (void)tc_egress_ask_expire_due(c, g.srv->keys, SWEEP_GRACE);
                    last_sweep = now;
                }
                tc_db_release(g.srv->db, c);
            }
        }
        pthread_mutex_lock(&g.mu);
        if (g.stopping)
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += POLL_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        /* a new ask is written at once; otherwise a look every POLL_MS */
        bool fresh = false;
        int64_t tnow = tc_now_ms();
        for (size_t i = 0; i < g.nlive && !fresh; i++)
            fresh = !g.live[i].id[0] && g.live[i].next_try_ms <= tnow;
        if (!fresh)
            pthread_cond_timedwait(&g.cv, &g.mu, &until);
    }
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

int tc_egress_asks_start(struct tc_server *srv)
{
    g.srv = srv;
    g.stopping = false;
    g.nlive = 0;
    if (pthread_create(&g.thread, NULL, asks_main, NULL) != 0)
        return -EAGAIN;
    g.started = true;
    tc_launcher_on_ask(srv->launcher, on_ask, NULL);
    return 0;
}

void tc_egress_asks_stop(void)
{
    if (!g.started)
        return;
    tc_launcher_on_ask(g.srv->launcher, NULL, NULL);
    pthread_mutex_lock(&g.mu);
    g.stopping = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(g.thread, NULL);
    g.started = false;
}
