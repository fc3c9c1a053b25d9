/* Server-Sent Events of an execution: see events.h. */
#include "server/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"

static const char HEARTBEAT[] = ": keep-alive\n\n";

struct mark {
    char id[48];
    size_t end; /* offset in the log right after that event */
};

struct reader {
    struct tc_events *e;
    struct MHD_Connection *conn;
    size_t off;
    bool suspended;
    int64_t last_ms; /* when it last sent something (an event or a heartbeat) */
    int64_t hb_ms;   /* its heartbeat */
    struct reader *next;
};

struct tc_events {
    pthread_mutex_t mu;
    int refs; /* under mu */
    char exec_id[40];
    bool findable;
    struct tc_buf log;
    size_t cap;
    struct mark *marks;
    size_t nmarks, amarks;
    bool closed;
    int64_t closed_ms;
    struct reader *readers;
    unsigned nreaders;
    /* the watch (tc_events_watch), run on the events thread only */
    bool (*poll)(struct tc_events *e, void *ud);
    void (*done)(void *ud);
    void *wud;
    /* the process's list (under g_mu), which holds one reference */
    struct tc_events *gnext, *gprev;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static struct tc_events *g_head;
static unsigned g_n;
static bool g_running, g_stopping;
static pthread_t g_thread, g_watch_thread;
static int64_t g_heartbeat_ms = 15000;
static _Atomic size_t g_bytes; /* event text of every log, live or not yet freed */

void tc_events_ref(struct tc_events *e)
{
    pthread_mutex_lock(&e->mu);
    e->refs++;
    pthread_mutex_unlock(&e->mu);
}

void tc_events_unref(struct tc_events *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    int left = --e->refs;
    pthread_mutex_unlock(&e->mu);
    if (left > 0)
        return;
    g_bytes -= e->log.len;
    tc_buf_free(&e->log);
    free(e->marks);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* Under g_mu: take e off the list (its readers keep it). */
static void unlist_locked(struct tc_events *e)
{
    if (e->gprev)
        e->gprev->gnext = e->gnext;
    else
        g_head = e->gnext;
    if (e->gnext)
        e->gnext->gprev = e->gprev;
    e->gnext = e->gprev = NULL;
    g_n--;
    tc_events_unref(e); /* the list's */
}

/* Under g_mu: the list is full; let the oldest lingering log (closed, no watch) go. */
static void evict_one_locked(void)
{
    struct tc_events *tail = g_head;
    while (tail && tail->gnext)
        tail = tail->gnext;
    for (struct tc_events *e = tail; e; e = e->gprev) {
        pthread_mutex_lock(&e->mu);
        bool idle = e->closed && !e->poll;
        pthread_mutex_unlock(&e->mu);
        if (idle) {
            unlist_locked(e);
            return;
        }
    }
}

int tc_events_new(const char *exec_id, size_t cap, bool findable, struct tc_events **ret)
{
    struct tc_events *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    pthread_mutex_init(&e->mu, NULL);
    e->refs = 2; /* the caller's and the list's */
    snprintf(e->exec_id, sizeof(e->exec_id), "%s", exec_id);
    tc_buf_init(&e->log, SIZE_MAX / 2);
    e->cap = cap;
    e->findable = findable;
    pthread_mutex_lock(&g_mu);
    if (g_n >= TC_EVENTS_MAX_LOGS)
        evict_one_locked();
    int r = g_stopping || !g_running ? -ESHUTDOWN : g_n >= TC_EVENTS_MAX_LOGS ? -EAGAIN : 0;
    if (r == 0) {
        e->gnext = g_head;
        if (g_head)
            g_head->gprev = e;
        g_head = e;
        g_n++;
    }
    pthread_mutex_unlock(&g_mu);
    if (r < 0) {
        pthread_mutex_destroy(&e->mu);
        free(e);
        return r;
    }
    *ret = e;
    return 0;
}

struct tc_events *tc_events_find(const char *exec_id)
{
    struct tc_events *found = NULL;
    pthread_mutex_lock(&g_mu);
    for (struct tc_events *e = g_head; e && !found; e = e->gnext)
        if (e->findable && strcmp(e->exec_id, exec_id) == 0) {
            tc_events_ref(e);
            found = e;
        }
    pthread_mutex_unlock(&g_mu);
    return found;
}

/* Under e->mu: every suspended reader goes on (to send, to heartbeat, or to end). */
static void wake_locked(struct tc_events *e)
{
    for (struct reader *rd = e->readers; rd; rd = rd->next)
        if (rd->suspended) {
            rd->suspended = false;
            MHD_resume_connection(rd->conn);
        }
}

int tc_events_push(struct tc_events *e, const char *type, const char *id, json_t *data, bool force)
{
    char *js = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!js)
        return -ENOMEM;
    int r = 0;
    pthread_mutex_lock(&e->mu);
    size_t before = e->log.len;
    if (e->closed)
        r = -EPIPE;
    else if (!force && (before + strlen(js) + 128 > e->cap ||
                        g_bytes + strlen(js) + 128 > TC_EVENTS_MAX_BYTES))
        r = -ENOSPC;
    else if (id && e->nmarks == e->amarks) {
        size_t n = e->amarks ? e->amarks * 2 : 16;
        struct mark *m = realloc(e->marks, n * sizeof(*m));
        if (!m)
            r = -ENOMEM;
        else
            e->marks = m, e->amarks = n;
    }
    if (r == 0 && ((id && (r = tc_buf_appendf(&e->log, "id: %s\n", id)) < 0) ||
                   (r = tc_buf_appendf(&e->log, "event: %s\ndata: %s\n\n", type, js)) < 0)) {
        e->log.len = before; /* nothing half-written */
        if (e->log.data)
            e->log.data[before] = '\0';
    }
    if (r == 0)
        g_bytes += e->log.len - before;
    if (r == 0 && id) {
        struct mark *m = &e->marks[e->nmarks++];
        snprintf(m->id, sizeof(m->id), "%s", id);
        m->end = e->log.len;
    }
    if (r == 0)
        wake_locked(e);
    pthread_mutex_unlock(&e->mu);
    free(js);
    return r;
}

void tc_events_close(struct tc_events *e)
{
    pthread_mutex_lock(&e->mu);
    if (!e->closed) {
        e->closed = true;
        e->closed_ms = tc_now_ms();
        wake_locked(e);
    }
    pthread_mutex_unlock(&e->mu);
}

bool tc_events_closed(struct tc_events *e)
{
    pthread_mutex_lock(&e->mu);
    bool c = e->closed;
    pthread_mutex_unlock(&e->mu);
    return c;
}

int tc_events_watch(struct tc_events *e, bool (*poll)(struct tc_events *e, void *ud),
                    void (*done)(void *ud), void *ud)
{
    int r = 0;
    pthread_mutex_lock(&g_mu);
    pthread_mutex_lock(&e->mu);
    if (g_stopping || e->closed)
        r = -ESHUTDOWN;
    else if (e->poll)
        r = -EBUSY;
    else {
        e->poll = poll;
        e->done = done;
        e->wud = ud;
        e->refs++;
    }
    pthread_mutex_unlock(&e->mu);
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* ---- readers: libmicrohttpd's content reader ---- */

static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct reader *rd = cls;
    struct tc_events *e = rd->e;
    ssize_t n;
    (void)pos;
    pthread_mutex_lock(&e->mu);
    int64_t now = tc_now_ms();
    if (rd->off < e->log.len) {
        size_t k = e->log.len - rd->off;
        if (k > max)
            k = max;
        memcpy(buf, e->log.data + rd->off, k);
        rd->off += k;
        rd->last_ms = now;
        n = (ssize_t)k;
    } else if (e->closed) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (now - rd->last_ms >= rd->hb_ms && max >= sizeof(HEARTBEAT) - 1) {
        memcpy(buf, HEARTBEAT, sizeof(HEARTBEAT) - 1);
        rd->last_ms = now;
        n = (ssize_t)sizeof(HEARTBEAT) - 1;
    } else {
        /* Nothing to send: park the connection until a push, the close or the heartbeat
         * (libmicrohttpd's way to answer "no data yet" without a busy loop). */
        rd->suspended = true;
        MHD_suspend_connection(rd->conn);
        n = 0;
    }
    pthread_mutex_unlock(&e->mu);
    return n;
}

static void free_reader(void *cls)
{
    struct reader *rd = cls;
    struct tc_events *e = rd->e;
    pthread_mutex_lock(&e->mu);
    for (struct reader **pp = &e->readers; *pp; pp = &(*pp)->next)
        if (*pp == rd) {
            *pp = rd->next;
            e->nreaders--;
            break;
        }
    /* A log made for one reader ends with it: its watch stops at the next round, instead of
     * following the database for a client that left. */
    if (!e->findable && e->nreaders == 0 && !e->closed) {
        e->closed = true;
        e->closed_ms = tc_now_ms();
    }
    pthread_mutex_unlock(&e->mu);
    tc_events_unref(e);
    free(rd);
}

struct MHD_Response *tc_events_response(struct tc_events *e, struct MHD_Connection *conn,
                                        const char *last_id)
{
    return tc_events_response_hb(e, conn, last_id, 0);
}

struct MHD_Response *tc_events_response_hb(struct tc_events *e, struct MHD_Connection *conn,
                                           const char *last_id, int64_t heartbeat_ms)
{
    struct reader *rd = calloc(1, sizeof(*rd));
    if (!rd)
        return NULL;
    rd->e = e;
    rd->conn = conn;
    rd->last_ms = tc_now_ms();
    rd->hb_ms = heartbeat_ms > 0 && heartbeat_ms < g_heartbeat_ms ? heartbeat_ms : g_heartbeat_ms;
    pthread_mutex_lock(&e->mu);
    if (e->nreaders >= TC_EVENTS_MAX_READERS) {
        pthread_mutex_unlock(&e->mu);
        free(rd);
        return NULL;
    }
    for (size_t i = 0; last_id && i < e->nmarks; i++)
        if (strcmp(e->marks[i].id, last_id) == 0)
            rd->off = e->marks[i].end;
    rd->next = e->readers;
    e->readers = rd;
    e->nreaders++;
    e->refs++;
    pthread_mutex_unlock(&e->mu);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                  read_events, rd, free_reader);
    if (!resp) {
        free_reader(rd);
        return NULL;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream; charset=utf-8");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return resp;
}

/* ---- the events thread: heartbeats, watches, lingering logs ---- */

/* Two threads run this: the keeper (arg NULL: lingering logs, the memory budget, heartbeats)
 * and the watcher (the watches, which may wait for the database: they never delay a
 * heartbeat). */
static void *events_main(void *arg)
{
    bool watcher = arg != NULL;
    pthread_mutex_lock(&g_mu);
    while (!g_stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)TC_EVENTS_WATCH_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g_cv, &g_mu, &ts);
        if (g_stopping)
            break;
        /* take a reference on each log, drop the lingering ones past their time (or, over the
         * memory budget, the oldest lingering ones: the list is newest first) */
        int64_t now = tc_now_ms();
        size_t over = g_bytes > TC_EVENTS_MAX_BYTES ? g_bytes - TC_EVENTS_MAX_BYTES : 0;
        if (over && !watcher) {
            struct tc_events *tail = g_head;
            while (tail && tail->gnext)
                tail = tail->gnext;
            for (struct tc_events *e = tail; e && over; e = e->gprev) {
                pthread_mutex_lock(&e->mu);
                if (e->closed && !e->poll) {
                    over = over > e->log.len ? over - e->log.len : 0;
                    e->closed_ms = now - TC_EVENTS_LINGER_MS; /* let go below */
                }
                pthread_mutex_unlock(&e->mu);
            }
        }
        struct tc_events **v = g_n ? calloc(g_n, sizeof(*v)) : NULL;
        size_t nv = 0;
        for (struct tc_events *e = g_head, *next; e; e = next) {
            next = e->gnext;
            pthread_mutex_lock(&e->mu);
            bool gone = !watcher && e->closed && !e->poll &&
                        (!e->findable || now - e->closed_ms >= TC_EVENTS_LINGER_MS);
            if (!gone && v)
                e->refs++, v[nv++] = e;
            pthread_mutex_unlock(&e->mu);
            if (gone)
                unlist_locked(e);
        }
        pthread_mutex_unlock(&g_mu);
        for (size_t i = 0; i < nv; i++) {
            struct tc_events *e = v[i];
            pthread_mutex_lock(&e->mu);
            for (struct reader *rd = e->readers; rd && !watcher; rd = rd->next)
                if (rd->suspended && now - rd->last_ms >= rd->hb_ms) {
                    rd->suspended = false;
                    MHD_resume_connection(rd->conn);
                }
            bool (*poll)(struct tc_events *, void *) = watcher ? e->poll : NULL;
            bool closed = e->closed;
            pthread_mutex_unlock(&e->mu);
            if (poll && (closed || poll(e, e->wud))) {
                pthread_mutex_lock(&e->mu);
                void (*done)(void *) = e->done;
                void *ud = e->wud;
                e->poll = NULL;
                e->done = NULL;
                e->wud = NULL;
                e->refs--; /* the watch's; ours below keeps e alive */
                pthread_mutex_unlock(&e->mu);
                if (done)
                    done(ud);
            }
            tc_events_unref(e);
        }
        free(v);
        pthread_mutex_lock(&g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

int tc_events_start(int64_t heartbeat_ms)
{
    pthread_mutex_lock(&g_mu);
    g_heartbeat_ms = heartbeat_ms > 0 ? heartbeat_ms : 15000;
    g_stopping = false;
    int r = 0;
    if (!g_running) {
        r = -pthread_create(&g_thread, NULL, events_main, NULL);
        if (r == 0 && (r = -pthread_create(&g_watch_thread, NULL, events_main, (void *)1)) < 0) {
            g_stopping = true;
            pthread_cond_broadcast(&g_cv);
            pthread_mutex_unlock(&g_mu);
            pthread_join(g_thread, NULL);
            pthread_mutex_lock(&g_mu);
        }
    }
    if (r == 0)
        g_running = true;
    pthread_mutex_unlock(&g_mu);
    return r;
}

void tc_events_stop(void)
{
    pthread_mutex_lock(&g_mu);
    bool running = g_running;
    g_stopping = true;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    if (running) {
        pthread_join(g_thread, NULL);
        pthread_join(g_watch_thread, NULL);
    }
    /* every log ends; watches are let go; readers finish what is written and end */
    pthread_mutex_lock(&g_mu);
    g_running = false;
    while (g_head) {
        struct tc_events *e = g_head;
        g_head = e->gnext;
        g_n--;
        tc_events_close(e);
        pthread_mutex_lock(&e->mu);
        void (*done)(void *) = e->poll ? e->done : NULL;
        void *ud = e->wud;
        bool watched = e->poll != NULL;
        e->poll = NULL;
        e->done = NULL;
        e->wud = NULL;
        pthread_mutex_unlock(&e->mu);
        if (done)
            done(ud);
        if (watched)
            tc_events_unref(e);
        tc_events_unref(e); /* the list's */
    }
    pthread_mutex_unlock(&g_mu);
}
