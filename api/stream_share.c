/* A running call's output for readers on other replicas: see stream.h ("shared"). One thread
 * writes what the streams here give it to execution_output, and removes a call's rows once its
 * outcome is stored. Writing happens only for calls someone follows from elsewhere (asked with
 * NOTIFY toolcage_follow), so a call nobody follows costs nothing here. */
#include "api/stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "common/util.h"
#include "core/db.h"

#define SHARE_EVERY_MS 100 /* how often a call's new events are written */
#define SHARE_BATCH    256 /* events per INSERT */

struct tc_share {
    struct tc_share *next;
    char id[40];
    json_t *pending; /* [[stream, text, out, err], ...] not written yet */
    int seq;         /* rows written */
    int64_t next_ms; /* write again from then on */
    bool closed;     /* the outcome is stored: remove the rows */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct tc_share *list;
    struct tc_db *db;
    pthread_t thread;
    bool started, stop;
} sh = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

struct tc_share *tc_share_open(const char *exec_id, json_t *history)
{
    struct tc_share *x = calloc(1, sizeof(*x));
    if (!x) {
        json_decref(history);
        return NULL;
    }
    snprintf(x->id, sizeof(x->id), "%s", exec_id);
    x->pending = history ? history : json_array();
    pthread_mutex_lock(&sh.mu);
    if (!sh.started || sh.stop || !x->pending) {
        pthread_mutex_unlock(&sh.mu);
        json_decref(x->pending);
        free(x);
        return NULL;
    }
    x->next = sh.list;
    sh.list = x;
    pthread_cond_signal(&sh.cv);
    pthread_mutex_unlock(&sh.mu);
    return x;
}

void tc_share_event(struct tc_share *x, int k, const char *text, size_t n, size_t out, size_t err)
{
    json_t *ev = json_pack("[i, s%, I, I]", k, text, n, (json_int_t)out, (json_int_t)err);
    pthread_mutex_lock(&sh.mu);
    if (ev && !x->closed)
        json_array_append(x->pending, ev);
    pthread_mutex_unlock(&sh.mu);
    json_decref(ev);
}

void tc_share_close(struct tc_share *x)
{
    if (!x)
        return;
    pthread_mutex_lock(&sh.mu);
    x->closed = true;
    pthread_cond_signal(&sh.cv);
    pthread_mutex_unlock(&sh.mu);
}

/* Write up to SHARE_BATCH of x's pending events (seq from *seq). 0 or -EIO. */
static int write_some(PGconn *c, const char *id, json_t *batch, int *seq)
{
    json_t *rows = json_array();
    size_t i;
    json_t *ev;
    json_array_foreach(batch, i, ev)
    {
        json_array_append_new(
            rows, json_pack("{s:i, s:s, s:O, s:O, s:O}", "seq", *seq + (int)i, "stream",
                            json_integer_value(json_array_get(ev, 0)) == 1 ? "stderr" : "stdout",
                            "text", json_array_get(ev, 1), "o", json_array_get(ev, 2), "e",
                            json_array_get(ev, 3)));
    }
    char *text = json_dumps(rows, JSON_COMPACT);
    json_decref(rows);
    if (!text)
        return -ENOMEM;
    const char *p[] = {id, text};
    PGresult *r = tc_db_exec(
        c,
        "INSERT INTO execution_output (execution_id, seq, stream, text, out_bytes, err_bytes)"
        " SELECT $1::uuid, x.seq, x.stream, x.text, x.o, x.e"
        " FROM json_to_recordset($2::json) AS x(seq int, stream text, text text, o bigint, e "
        "bigint)"
        " ON CONFLICT DO NOTHING",
        2, p);
    free(text);
    if (!r)
        return -EIO;
    PQclear(r);
    *seq += (int)json_array_size(batch);
    return 0;
}

/* Wait on sh.cv (sh.mu held) until ms from now at most. */
static void nap(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&sh.cv, &sh.mu, &ts);
}

static void unlink_share(struct tc_share *x)
{
    struct tc_share **pp = &sh.list;
    while (*pp != x)
        pp = &(*pp)->next;
    *pp = x->next;
    json_decref(x->pending);
    free(x);
}

/* Each shared call's new events at most every SHARE_EVERY_MS (a chatty call's gather), its
 * rows removed once it is closed. */
static void *share_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sh.mu);
    while (!sh.stop || sh.list) {
        int64_t now = tc_now_ms(), wake = now + 1000;
        struct tc_share *work = NULL;
        for (struct tc_share *x = sh.list; x && !work; x = x->next) {
            if (x->closed || (json_array_size(x->pending) && now >= x->next_ms))
                work = x;
            else if (json_array_size(x->pending) && x->next_ms < wake)
                wake = x->next_ms;
        }
        if (!work) {
            if (sh.stop)
                break; /* streams still open at the end: the sweep removes their rows */
            nap(wake - now);
            continue;
        }
        bool closed = work->closed;
        json_t *batch = json_array();
        for (size_t i = 0; !closed && i < json_array_size(work->pending) && i < SHARE_BATCH; i++)
            json_array_append(batch, json_array_get(work->pending, i));
        char id[40];
        int seq = work->seq;
        memcpy(id, work->id, sizeof(id));
        pthread_mutex_unlock(&sh.mu);

        PGconn *c = tc_db_acquire(sh.db, 1000);
        int rc = -EIO;
        if (c && closed) {
            const char *p[] = {id};
            PGresult *r =
                tc_db_exec(c, "DELETE FROM execution_output WHERE execution_id = $1::uuid", 1, p);
            rc = r ? 0 : -EIO;
            PQclear(r);
        } else if (c && batch) {
            rc = write_some(c, id, batch, &seq);
        }
        tc_db_release(sh.db, c);
        size_t done = json_array_size(batch);
        json_decref(batch);

        pthread_mutex_lock(&sh.mu);
        if (closed && (rc == 0 || sh.stop)) {
            unlink_share(work); /* or the worker's sweep removes the rows */
        } else if (rc == 0) {
            work->seq = seq;
            for (size_t i = 0; i < done; i++)
                json_array_remove(work->pending, 0);
            work->next_ms = tc_now_ms() + SHARE_EVERY_MS;
        } else if (sh.stop) { /* readers elsewhere get the rest with the result */
            json_array_clear(work->pending);
            work->closed = true;
        } else { /* the database is away: again in a while */
            work->next_ms = tc_now_ms() + 1000;
            if (closed)
                nap(1000);
        }
    }
    pthread_mutex_unlock(&sh.mu);
    return NULL;
}

/* ---- the worker's runs (server/http.h) ---- */

static void *run_open(const char *exec_id, const struct tc_redactor *red,
                      const char *const *secrets, size_t nsecrets, int64_t output_bytes)
{
    struct tc_exec_stream *s = NULL;
    return tc_exec_stream_new(exec_id, red, secrets, nsecrets, output_bytes, false, &s) == 0 ? s
                                                                                             : NULL;
}

static void run_chunk(void *stream, int kind, const char *data, size_t len)
{
    if (kind == 3)
        tc_exec_stream_network(stream, data, len);
    else if (kind == 1 || kind == 2)
        tc_exec_stream_chunk(stream, kind, data, len);
}

static void run_end(void *stream, json_t *view)
{
    tc_exec_stream_end(stream, view, NULL); /* no reader of its own: it only shares */
}

int tc_stream_share_start(struct tc_server *srv)
{
    sh.db = srv->db;
    sh.stop = false;
    if (pthread_create(&sh.thread, NULL, share_main, NULL) != 0)
        return -EAGAIN;
    sh.started = true;
    srv->follow_asked = tc_exec_stream_share;
    srv->run_stream_open = run_open;
    srv->run_stream_chunk = run_chunk;
    srv->run_stream_end = run_end;
    return 0;
}

void tc_stream_share_stop(void)
{
    if (!sh.started)
        return;
    pthread_mutex_lock(&sh.mu);
    sh.stop = true;
    pthread_cond_signal(&sh.cv);
    pthread_mutex_unlock(&sh.mu);
    pthread_join(sh.thread, NULL);
    sh.started = false;
}
