#include "core/db.h"

#include <errno.h>
#include <libpq-events.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "common/buf.h"
#include "common/resolve.h"
#include "common/util.h"
#include "core/log.h"

/* A thread waiting for a connection: a released one is handed to the longest waiting, in
 * order (no barging: a thread that releases and acquires in a loop, as an export's batches
 * do, would otherwise take it back before a woken waiter runs, for as long as it likes). */
struct waiter {
    struct waiter *next;
    PGconn *conn; /* handed over by tc_db_release */
    pthread_cond_t cv;
};

struct tc_db {
    pthread_mutex_t lock;
    char *conninfo;
    unsigned size;
    unsigned nfree;
    PGconn **free_list;
    struct waiter *wait_head, **wait_tail;
    /* readiness's own connection (tc_db_ping), under probe_lock */
    pthread_mutex_t probe_lock;
    PGconn *probe;
    int64_t probe_sent_ms; /* its SELECT 1 went then, unanswered so far; 0: none out */
    bool probe_seen;       /* that SELECT 1's rows came (its end has not yet) */
};

/* ---- Prepared statements, per connection ----
 * A request runs the same few dozen statements over and over; PQexecParams has the server
 * parse and plan each one every time (parse + bind were ~5 ms of PostgreSQL's CPU per
 * call, more than the statements' execution). Each connection keeps the statements it has
 * run as named prepared statements, keyed by their text: after the first use a statement is
 * only bound and executed (PostgreSQL plans it once, or per bind while custom plans are
 * cheaper, as it decides). The list is bounded: a text beyond it runs unnamed, as before.
 * The server's side lives in the session: a reset (a new connection) starts with an empty
 * list, and a session that ends forgets it. TOOLCAGE_DB_PREPARE=0 turns it off for connections made
 * after (a transaction-mode connection pooler in front of PostgreSQL, which moves a client's
 * statements between sessions, cannot keep them). */
#define STMT_MAX 192

struct stmt {
    uint64_t hash;
    char *sql;
};

/* A statement sent with the next one that waits for its result (tc_db_send). */
struct queued {
    char *sql;
    int n;
    char **params;
    bool plain; /* sent unnamed (BEGIN) */
};
#define QUEUE_MAX 8

struct stmts {
    bool named; /* prepare_on when the connection was made */
    unsigned n;
    bool stale; /* the server's and this list disagree: start both afresh (stmts_renew) */
    unsigned nq;
    struct queued q[QUEUE_MAX];
    char *err; /* the error a run of the queue met (tc_db_error) */
    struct stmt e[STMT_MAX];
};

static void err_forget(struct stmts *ss)
{
    free(ss->err);
    ss->err = NULL;
}

static void queue_forget(struct stmts *ss)
{
    for (unsigned i = 0; i < ss->nq; i++) {
        for (int k = 0; k < ss->q[i].n; k++)
            free(ss->q[i].params[k]);
        free(ss->q[i].params);
        free(ss->q[i].sql);
    }
    ss->nq = 0;
}

static void stmts_forget(struct stmts *ss)
{
    for (unsigned i = 0; i < ss->n; i++)
        free(ss->e[i].sql);
    ss->n = 0;
}

static int stmts_event(PGEventId id, void *info, void *pass)
{
    (void)pass;
    if (id == PGEVT_CONNRESET) {
        struct stmts *ss = PQinstanceData(((PGEventConnReset *)info)->conn, stmts_event);
        if (ss) {
            stmts_forget(ss);
            queue_forget(ss);
            err_forget(ss);
        }
    } else if (id == PGEVT_CONNDESTROY) {
        struct stmts *ss = PQinstanceData(((PGEventConnDestroy *)info)->conn, stmts_event);
        if (ss) {
            stmts_forget(ss);
            queue_forget(ss);
            err_forget(ss);
            free(ss);
        }
    }
    return 1;
}

static bool prepare_on = true;  /* set once at start (tc_db_prepare_statements) */
static int stmt_timeout_s = 30; /* likewise (tc_db_set_timeout) */

void tc_db_prepare_statements(bool on)
{
    prepare_on = on;
}

/* FNV-1a: the key is compared in full on a hit; the hash only skips the others. */
static uint64_t sql_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* An error that says the session's statements are not what this list says: gone
 * (26000: a pooler's DISCARD or DEALLOCATE), or no longer valid (0A000: "cached plan must
 * not change result type" after a column's type changed), or a name taken (42P05). */
static bool stale_error(const PGresult *r)
{
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return st && (strcmp(st, "26000") == 0 || strcmp(st, "0A000") == 0 || strcmp(st, "42P05") == 0);
}

void tc_db_set_timeout(int seconds)
{
    stmt_timeout_s = seconds < 1 ? 1 : seconds;
}

/* ---- round trips, bounded on our side too ----
 *
 * statement_timeout (session_setup) ends a statement the server runs too long. A server that
 * does not answer at all (stopped, its host or VM paused, the network gone: TCP notices a
 * vanished peer after hours) would hold the calling thread, and with it a request, the
 * recorder or a worker, for ever. So every round trip here is sent and awaited by hand, and
 * given up REPLY_GRACE_MS after the statement's own bound: the connection is then shut down
 * (libpq sees it closed: CONNECTION_BAD), the call fails as it would on a broken connection
 * (a COMMIT's outcome unknown, as then), and the pool reconnects it at its next use, within
 * the same bound (connect_within: the host names' lookup, the connect, the authentication). */
#define REPLY_GRACE_MS 5000

/* Waits for c's socket (events) until deadline: > 0 ready, 0 timed out, < 0 poll failed. */
static int wait_socket(PGconn *c, short events, int64_t deadline)
{
    struct pollfd p = {.fd = PQsocket(c), .events = events};
    for (;;) {
        int64_t left = deadline - tc_now_us() / 1000;
        if (left <= 0)
            return 0;
        int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (n > 0 || (n < 0 && errno != EINTR))
            return n;
    }
}

/* The server did not answer in time: give the connection up (shut down, not closed: the fd
 * is libpq's), so that libpq marks it broken and nothing reads a late answer from it. */
static void give_up(PGconn *c, int64_t bound_ms)
{
    tc_log(TC_LOG_WARN, "the database did not answer within the bound: connection given up",
           "{s:I}", "bound_ms", (json_int_t)bound_ms);
    if (PQsocket(c) >= 0)
        shutdown(PQsocket(c), SHUT_RDWR);
    (void)PQconsumeInput(c); /* reads the end: CONNECTION_BAD */
    PGresult *r;
    while (PQstatus(c) == CONNECTION_BAD && (r = PQgetResult(c))) /* (a broken one ends) */
        PQclear(r);
}

/* Nothing more to read from c at once, though a result is pending: PQgetResult would wait
 * (without a bound) for a connection that is not yet marked broken. */
static bool stuck(PGconn *c)
{
    return PQstatus(c) == CONNECTION_OK && PQisBusy(c);
}

/* The result of a query sent with PQsend* (sent: its return value), as PQexec gives it: the
 * last one, or the first error; NULL when it could not be sent or the server did not answer
 * within the bound (the connection is then broken). */
static PGresult *await_within(PGconn *c, int sent, int64_t bound_ms)
{
    if (!sent)
        return NULL;
    int64_t deadline = tc_now_us() / 1000 + bound_ms;
    int f;
    while ((f = PQflush(c)) == 1) { /* (non-blocking connection: the rest of the query) */
        if (wait_socket(c, POLLOUT | POLLIN, deadline) <= 0) {
            give_up(c, bound_ms);
            return NULL;
        }
        if (!PQconsumeInput(c))
            break; /* broken: PQgetResult says so */
    }
    if (f < 0 && stuck(c)) {
        give_up(c, bound_ms);
        return NULL;
    }
    PGresult *keep = NULL, *r;
    for (;;) {
        while (PQisBusy(c)) {
            if (wait_socket(c, POLLIN, deadline) <= 0) { /* (PQgetResult would block) */
                PQclear(keep);
                give_up(c, bound_ms);
                return NULL;
            }
            if (!PQconsumeInput(c)) {
                if (stuck(c)) { /* a read failed, yet libpq would wait on */
                    PQclear(keep);
                    give_up(c, bound_ms);
                    return NULL;
                }
                break; /* broken: PQgetResult says so */
            }
        }
        if (!(r = PQgetResult(c)))
            break;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
            /* none of ours starts a COPY (PQgetResult would return it for ever): not ours */
            PQclear(r);
            PQclear(keep);
            give_up(c, bound_ms);
            return NULL;
        }
        if (keep && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
            PQclear(r); /* the first error stands */
            continue;
        }
        PQclear(keep);
        keep = r;
        if (PQstatus(c) == CONNECTION_BAD)
            break;
    }
    return keep;
}

static PGresult *await_result(PGconn *c, int sent)
{
    return await_within(c, sent, (int64_t)stmt_timeout_s * 1000 + REPLY_GRACE_MS);
}

static PGresult *exec_plain(PGconn *c, const char *sql)
{
    return await_result(c, PQsendQuery(c, sql));
}

static PGresult *exec_params(PGconn *c, const char *sql, int n, const char *const *params)
{
    return await_result(c, PQsendQueryParams(c, sql, n, NULL, params, NULL, NULL, 0));
}

/* Forget every statement, here and in the session (outside a transaction only: an aborted
 * one refuses DEALLOCATE; then it is done at the next statement after it). */
static void stmts_renew(PGconn *c, struct stmts *ss)
{
    if (PQtransactionStatus(c) != PQTRANS_IDLE)
        return;
    PGresult *r = exec_plain(c, "DEALLOCATE ALL");
    PQclear(r);
    stmts_forget(ss);
    ss->stale = false;
}

/* sql's place in c's list (ss): 1 with the name of a statement prepared already; 2 with a
 * new name, entered in the list for a statement the caller prepares now (stmts_truncate
 * takes the entry back if the server refuses it); 0 when it is to run unnamed (off, the list
 * full, out of memory, a failed transaction). */
static int stmt_slot(PGconn *c, struct stmts *ss, const char *sql, char name[16])
{
    if (!ss || !ss->named)
        return 0;
    if (ss->stale)
        stmts_renew(c, ss);
    if (ss->stale)
        return 0;
    uint64_t h = sql_hash(sql);
    for (unsigned i = 0; i < ss->n; i++)
        if (ss->e[i].hash == h && strcmp(ss->e[i].sql, sql) == 0) {
            snprintf(name, 16, "s%u", i);
            return 1;
        }
    if (ss->n == STMT_MAX || PQtransactionStatus(c) == PQTRANS_INERROR)
        return 0;
    char *copy = strdup(sql);
    if (!copy)
        return 0;
    snprintf(name, 16, "s%u", ss->n);
    ss->e[ss->n].hash = h;
    ss->e[ss->n].sql = copy;
    ss->n++;
    return 2;
}

/* The list back to its first n entries (the server never prepared the others). */
static void stmts_truncate(struct stmts *ss, unsigned n)
{
    while (ss->n > n)
        free(ss->e[--ss->n].sql);
}

/* sql's prepared statement on c: 1 with its name ("s<index>"), prepared on first use; 0
 * when it is to run unnamed; -1 when the server refused to parse it (as an unnamed run would
 * have; the error is c's). */
static int stmt_name(PGconn *c, const char *sql, int nparams, char name[16])
{
    struct stmts *ss = PQinstanceData(c, stmts_event);
    int k = stmt_slot(c, ss, sql, name);
    if (k != 2)
        return k;
    PGresult *r = await_result(c, PQsendPrepare(c, name, sql, nparams, NULL));
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK, stale = !ok && stale_error(r);
    PQclear(r);
    if (ok)
        return 1;
    stmts_truncate(ss, ss->n - 1);
    if (!stale)
        return -1;
    ss->stale = true; /* the name is taken in the session: start afresh, run it unnamed */
    stmts_renew(c, ss);
    return 0;
}

/* ---- Statements sent ahead ----
 * A transaction's BEGIN, and the statements whose result their caller does not read (the
 * admission lock, a usage counter, an audit record: tc_db_send), wait in the connection's
 * queue and go with the next statement that does wait for a result (a COMMIT too): one round
 * trip for all of them instead of one each (libpq's pipeline mode: the statements, one Sync,
 * then their results in order). They run as before, in order and in the same transaction; one
 * that fails fails the statement that carried it (the server skips everything after an error
 * up to the Sync, and the transaction is aborted: its COMMIT is then no commit). */

/* c's statements and queue, its last run's error forgotten (a new statement is under way) */
static struct stmts *queue_of(PGconn *c)
{
    struct stmts *ss = c ? PQinstanceData(c, stmts_event) : NULL;
    if (ss)
        err_forget(ss);
    return ss;
}

const char *tc_db_error(PGconn *c)
{
    struct stmts *ss = c ? PQinstanceData(c, stmts_event) : NULL;
    return !c ? "no connection" : ss && ss->err ? ss->err : PQerrorMessage(c);
}

static bool queue_add(struct stmts *ss, const char *sql, int n, const char *const *params,
                      bool plain)
{
    if (ss->nq == QUEUE_MAX || n < 0)
        return false;
    struct queued q = {.sql = strdup(sql),
                       .n = n,
                       .params = n > 0 ? calloc((size_t)n, sizeof(char *)) : NULL,
                       .plain = plain};
    bool ok = q.sql && (n == 0 || q.params);
    for (int i = 0; ok && i < n; i++) /* (NULL: an SQL NULL, as in PQexecParams) */
        ok = !params[i] || (q.params[i] = strdup(params[i]));
    if (!ok) {
        for (int i = 0; q.params && i < n; i++)
            free(q.params[i]);
        free(q.params);
        free(q.sql);
        return false;
    }
    ss->q[ss->nq++] = q;
    return true;
}

/* The next result of a pipeline, waiting for input up to deadline: false when given up (the
 * connection is then broken); *ret is NULL at the end of a statement's results. */
static bool next_result(PGconn *c, int64_t deadline, int64_t bound_ms, PGresult **ret)
{
    while (PQisBusy(c)) {
        if (wait_socket(c, POLLIN, deadline) <= 0) {
            give_up(c, bound_ms);
            return false;
        }
        if (!PQconsumeInput(c)) {
            if (stuck(c)) {
                give_up(c, bound_ms);
                return false;
            }
            break; /* broken: PQgetResult says so */
        }
    }
    *ret = PQgetResult(c);
    return true;
}

/* The queue, then sql, in one round trip: sql's result as await_result gives it (the first
 * error of its own; PGRES_PIPELINE_ABORTED when a queued statement failed), or NULL. */
static PGresult *run_queue(PGconn *c, struct stmts *ss, const char *sql, int n,
                           const char *const *params, bool may_name)
{
    int64_t bound = (int64_t)stmt_timeout_s * 1000 + REPLY_GRACE_MS;
    unsigned total = ss->nq + 1;
    char names[QUEUE_MAX + 1][16];
    int kind[QUEUE_MAX + 1];      /* stmt_slot's: 0 unnamed, 1 prepared, 2 prepared here */
    unsigned slot[QUEUE_MAX + 1]; /* a new one's entry in the list */
    bool ok = true;
    /* A statement run for the first time on c is prepared in the pipeline too, just before
     * its run: after the BEGIN, so that one the server refuses fails the transaction (with its
     * own error), and after the statements sent before it, which it may need. (A stale list
     * is renewed only at the first stmt_slot: a queue that starts outside a transaction starts
     * with its unnamed BEGIN, so no name given here is voided by a renewal.) */
    for (unsigned i = 0; i < total; i++) {
        kind[i] = i < ss->nq ? (ss->q[i].plain ? 0 : stmt_slot(c, ss, ss->q[i].sql, names[i]))
                  : may_name ? stmt_slot(c, ss, sql, names[i])
                             : 0;
        slot[i] = ss->n - 1;
    }
    /* the pipeline's items in order: a new statement's prepare, then each run */
    unsigned item_of[QUEUE_MAX + 1], items = 0;
    for (unsigned i = 0; i < total; i++) {
        items += kind[i] == 2;
        item_of[i] = items++;
    }
    bool piped = PQenterPipelineMode(c);
    for (unsigned i = 0; i < total && piped && ok; i++) {
        const char *q = i < ss->nq ? ss->q[i].sql : sql;
        int qn = i < ss->nq ? ss->q[i].n : n;
        const char *const *qp = i < ss->nq ? (const char *const *)ss->q[i].params : params;
        if (kind[i] == 2)
            ok = PQsendPrepare(c, names[i], q, qn, NULL);
        ok = ok && (kind[i] ? PQsendQueryPrepared(c, names[i], qn, qp, NULL, NULL, 0)
                            : PQsendQueryParams(c, q, qn, NULL, qp, NULL, NULL, 0));
    }
    ok = ok && piped && PQpipelineSync(c);
    queue_forget(ss);
    if (!ok) {
        if (piped && PQexitPipelineMode(c) != 1)
            give_up(c, bound); /* some went, not all: never used half sent */
        for (unsigned i = 0; i < total; i++)
            if (kind[i] == 2) { /* (none of them was prepared) */
                stmts_truncate(ss, slot[i]);
                break;
            }
        return NULL;
    }
    int64_t deadline = tc_now_us() / 1000 + bound;
    int f;
    while ((f = PQflush(c)) == 1) {
        if (wait_socket(c, POLLOUT | POLLIN, deadline) <= 0) {
            give_up(c, bound);
            break;
        }
        if (!PQconsumeInput(c))
            break;
    }
    if (f < 0 && stuck(c))
        give_up(c, bound);
    PGresult *own = NULL, *r, *failed = NULL;
    unsigned idx = 0, first_bad = items; /* (the item of the first error) */
    bool synced = false;
    while (!synced && idx <= items && next_result(c, deadline, bound, &r)) {
        deadline = tc_now_us() / 1000 + bound; /* each statement its own bound, as alone */
        if (!r) {
            if (PQstatus(c) == CONNECTION_BAD)
                break;
            idx++;
            continue;
        }
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC)
            synced = true;
        if (st == PGRES_FATAL_ERROR && idx < first_bad)
            first_bad = idx;
        if (st == PGRES_PIPELINE_SYNC || idx >= items) {
            PQclear(r);
        } else if (idx < items - 1) { /* a prepare, or a queued one: its error is told below */
            if (st == PGRES_FATAL_ERROR && !failed)
                failed = r;
            else
                PQclear(r);
        } else if (own && PQresultStatus(own) == PGRES_FATAL_ERROR) {
            PQclear(r); /* the first error stands */
        } else {
            PQclear(own);
            own = r;
        }
    }
    if (!synced)
        first_bad = 0; /* (broken: what it prepared is not known; the reset forgets it all) */
    /* what the server skipped after the first error (or refused) was never prepared */
    for (unsigned i = 0; i < total; i++)
        if (kind[i] == 2 && item_of[i] - 1 >= first_bad) {
            stmts_truncate(ss, slot[i]);
            break;
        }
    /* libpq's own message is the Sync's by now (empty): tc_db_error tells it */
    const PGresult *why = failed ? failed : PQresultStatus(own) == PGRES_FATAL_ERROR ? own : NULL;
    if (why && !(ss->err = strdup(PQresultErrorMessage(why))))
        ss->err = strdup("out of memory");
    if (failed) {
        if (stale_error(failed))
            ss->stale = true;
        tc_log(TC_LOG_WARN, "a statement sent ahead failed", "{s:s}", "error",
               PQresultErrorMessage(failed));
        PQclear(failed);
    }
    if (!synced) { /* given up, or broken: nothing of it is an answer */
        PQclear(own);
        own = NULL;
    }
    if (PQexitPipelineMode(c) != 1 && PQstatus(c) == CONNECTION_OK)
        give_up(c, bound); /* (cannot be: every result was read) never left half way */
    return own;
}

bool tc_db_send(PGconn *c, const char *sql, int nparams, const char *const *params)
{
    struct stmts *ss = queue_of(c);
    /* only in a transaction (begun, or its BEGIN waiting): there its COMMIT carries what
     * waits; outside one nothing might come after it, and it would be lost */
    bool in_tx = ss && PQstatus(c) == CONNECTION_OK &&
                 (ss->nq > 0 || PQtransactionStatus(c) == PQTRANS_INTRANS);
    if (in_tx && queue_add(ss, sql, nparams, params, false))
        return true;
    PGresult *r = tc_db_exec(c, sql, nparams, params); /* now, with what waits already */
    PQclear(r);
    return r != NULL;
}

/* Every statement is bounded: a stuck query must not pin a worker forever (and a server that
 * does not answer: await_result). Sends do not block either (a full socket buffer). */
static bool session_setup_within(PGconn *c, int64_t deadline)
{
    char sql[96];
    snprintf(sql, sizeof(sql), "SET statement_timeout = '%ds'; SET TIME ZONE 'UTC'",
             stmt_timeout_s);
    bool ok = PQsetnonblocking(c, 1) == 0;
    if (ok) {
        int64_t left = deadline - tc_now_us() / 1000;
        PGresult *r = left > 0 ? await_within(c, PQsendQuery(c, sql), left) : NULL;
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
    }
    /* a session without its bounds is never used: broken, it is made again at its next use */
    if (!ok && PQstatus(c) == CONNECTION_OK && PQsocket(c) >= 0) {
        shutdown(PQsocket(c), SHUT_RDWR);
        (void)PQconsumeInput(c); /* reads the end: CONNECTION_BAD */
    }
    return ok;
}

static bool session_setup(PGconn *c)
{
    return session_setup_within(c, tc_now_us() / 1000 + (int64_t)stmt_timeout_s * 1000 +
                                       REPLY_GRACE_MS);
}

/* The prepared statements' list (above), attached to a new connection. */
static void adopt(PGconn *c)
{
    if (!PQregisterEventProc(c, stmts_event, "toolcage statements", NULL))
        return; /* none: its statements run unnamed, each in a round trip of its own */
    struct stmts *ss = calloc(1, sizeof(*ss));
    if (ss)
        ss->named = prepare_on;
    if (ss && !PQsetInstanceData(c, stmts_event, ss))
        free(ss);
}

static int poll_within(PGconn *c, int64_t deadline);

/* ---- Host names, looked up within a bound ----
 * libpq resolves a host name with libc's getaddrinfo inside PQconnectStart (and PQconnectdb,
 * PQresetStart): for as long as the resolver's configuration says (timeout x attempts x
 * servers, for each search domain), and nothing can stop it. A resolver that does not answer
 * would hold a call, the worker or readiness for tens of seconds or minutes, whatever the
 * round trips' bound. So every connection is made here (connect_within), host by host as libpq
 * goes: a TCP host name of the conninfo (or PGHOST) is looked up when its turn comes
 * (common/resolve.h), within RESOLVE_BOUND_MS (or the statements' bound, or what is left of
 * the caller's, when shorter); then each of its addresses is an attempt of its own, handed to
 * libpq as hostaddr beside the name (libpq resolves nothing, and keeps the name for the server
 * certificate's check, .pgpass and its messages), within the conninfo's connect_timeout (else
 * an even share of what is left), as libpq's blocking connect goes from address to address;
 * all of it within the round trips' bound (or the caller's, readiness's 1.5 s). A name
 * that is not found, or not in time, is passed over as libpq passes over a host it cannot
 * reach. Unix sockets and address literals are tried as they are; a conninfo that gives
 * hostaddr or a service goes to libpq whole (a service file's host names are then looked up
 * by libpq, without this bound; one address that does not answer ends that attempt). A reset
 * is a new connection, its names looked up again: an address that moved (a managed
 * database's failover) is followed. */
#define RESOLVE_BOUND_MS 5000

static unsigned list_len(const char *list)
{
    unsigned n = 1;
    for (const char *p = list; (p = strchr(p, ',')); p++)
        n++;
    return n;
}

/* Entry i (from 0) of a comma-separated list, as libpq splits it: false past its end or when
 * it does not fit. */
static bool list_entry(const char *list, unsigned i, char *out, size_t size)
{
    const char *p = list;
    for (; i > 0; i--) {
        if (!(p = strchr(p, ',')))
            return false;
        p++;
    }
    size_t len = strcspn(p, ",");
    if (len >= size)
        return false;
    memcpy(out, p, len);
    out[len] = '\0';
    return true;
}

static bool is_literal(const char *h)
{
    unsigned char a[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

/* The database's host names: a pool of lookups of their own (never behind the names tenants
 * ask webhooks to go to), at most 16 pending at once, a name's joined for RESOLVE_BOUND_MS. */
static struct tc_resolver db_lookups = TC_RESOLVER_INIT(16, RESOLVE_BOUND_MS);

/* What the conninfo says about where to connect, libpq's environment variables where it says
 * nothing (as libpq takes them; an explicit empty value stays empty). */
struct target {
    PQconninfoOption *opts;
    const char *host, *hostaddr, *port, *service, *attrs;
    int64_t timeout_ms; /* connect_timeout: each address's bound; 0: none given */
};

static const char *opt_or_env(PQconninfoOption *opts, const char *key, const char *env)
{
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, key) == 0 && o->val)
            return o->val;
    return getenv(env);
}

static void target_parse(const char *conninfo, struct target *t)
{
    t->opts = PQconninfoParse(conninfo, NULL);
    t->host = opt_or_env(t->opts, "host", "PGHOST");
    t->hostaddr = opt_or_env(t->opts, "hostaddr", "PGHOSTADDR");
    t->port = opt_or_env(t->opts, "port", "PGPORT");
    t->service = opt_or_env(t->opts, "service", "PGSERVICE");
    t->attrs = opt_or_env(t->opts, "target_session_attrs", "PGTARGETSESSIONATTRS");
    const char *ct = opt_or_env(t->opts, "connect_timeout", "PGCONNECT_TIMEOUT");
    long v = ct ? strtol(ct, NULL, 10) : 0;
    t->timeout_ms = v > 0 ? (v < 2 ? 2 : v) * 1000L : 0; /* (libpq's floor: 2 s) */
}

/* A list libpq takes as it is: an empty entry (libpq's default for it), which an override
 * could not say. */
static bool has_empty_entry(const char *list)
{
    size_t n = strlen(list);
    return n == 0 || list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,");
}

/* key = val onto PQconnectStartParams's arrays, when val is given. */
static void add_key(const char **keys, const char **vals, int *n, const char *key, const char *val)
{
    if (key && val) {
        keys[*n] = key;
        vals[(*n)++] = val;
    }
}

/* One attempt: at one address (host, and hostaddr when it was looked up; or the conninfo as it
 * is, host NULL), with attrs as its target_session_attrs (NULL: the conninfo's), started and
 * polled to its end by until (poll_within). NULL, with its message appended to errs, when it
 * failed. */
static PGconn *attempt(const char *conninfo, const char *first_key, const char *first_val,
                       const char *host, const char *hostaddr, const char *port, const char *attrs,
                       int64_t until, struct tc_buf *errs)
{
    const char *keys[8], *vals[8];
    int n = 0;
    add_key(keys, vals, &n, first_key, first_val);
    add_key(keys, vals, &n, "dbname", conninfo);
    add_key(keys, vals, &n, "host", host);
    add_key(keys, vals, &n, "hostaddr", hostaddr);
    add_key(keys, vals, &n, "port", port);
    add_key(keys, vals, &n, "target_session_attrs", attrs);
    keys[n] = vals[n] = NULL;
    PGconn *c = PQconnectStartParams(keys, vals, 1);
    int r = c && PQstatus(c) != CONNECTION_BAD ? poll_within(c, until) : -1;
    if (r > 0)
        return c;
    if (r == 0) /* (libpq's words: the message then says only that the socket was closed) */
        (void)!tc_buf_appendf(
            errs, "connection to server at \"%s\"%s%s%s, port %s failed: timeout expired\n",
            PQhost(c), PQhostaddr(c)[0] ? " (" : "", PQhostaddr(c), PQhostaddr(c)[0] ? ")" : "",
            PQport(c));
    else
        (void)!tc_buf_appendf(errs, "%s", c ? PQerrorMessage(c) : "out of memory\n");
    PQfinish(c);
    return NULL;
}

/* Host name's addresses, looked up within bound_ms (numeric, an IPv6 one with its scope:
 * fe80::1%eth0), each followed by a NUL, in addrs: 0, or < 0 with the reason appended to
 * errs. */
static int resolve_host(const char *name, int bound_ms, struct tc_buf *addrs, struct tc_buf *errs)
{
    struct addrinfo *ai = NULL;
    int r = bound_ms > 0 ? tc_resolve_within(&db_lookups, name, bound_ms, &ai) : -ETIMEDOUT;
    for (struct addrinfo *x = ai; x && r == 0; x = x->ai_next) {
        char addr[NI_MAXHOST];
        if ((x->ai_family != AF_INET && x->ai_family != AF_INET6) ||
            getnameinfo(x->ai_addr, x->ai_addrlen, addr, sizeof(addr), NULL, 0, NI_NUMERICHOST))
            continue;
        if (tc_buf_append(addrs, addr, strlen(addr) + 1) < 0)
            r = -ENOMEM;
    }
    tc_resolve_free(ai);
    if (r == 0 && addrs->len == 0)
        r = -ENOENT;
    if (r < 0)
        (void)!tc_buf_appendf(errs, "could not translate host name \"%s\" to address: ", name);
    if (r == -ETIMEDOUT)
        (void)!tc_buf_appendf(errs, "no answer within %d ms\n", bound_ms);
    else if (r == -EAGAIN)
        (void)!tc_buf_appendf(errs, "too many lookups pending\n");
    else if (r < 0)
        (void)!tc_buf_appendf(errs, "%s\n", r == -ENOMEM ? "out of memory" : "not found");
    return r;
}

/* The bound of an attempt at one address, with left more after it (of this host, and one for
 * each host after it): the conninfo's connect_timeout, else an even share of what is left of
 * the deadline (a first address that does not answer leaves the others their turn). */
static int64_t attempt_until(const struct target *t, int64_t deadline, unsigned left)
{
    int64_t now = tc_now_us() / 1000;
    int64_t share = t->timeout_ms ? t->timeout_ms : (deadline - now) / (left + 1);
    return now + share < deadline ? now + share : deadline;
}

/* A connection from conninfo, host by host and address by address (above), all of it within
 * deadline (ms, tc_now_us's clock; 0: the round trips' bound from now); first_key/first_val
 * (or NULL) go before the conninfo, so that the conninfo's own wins. NULL, and *ret_error
 * (every attempt's reason), when it failed. */
static PGconn *connect_within(const char *conninfo, int64_t deadline, const char *first_key,
                              const char *first_val, char **ret_error)
{
    if (!deadline)
        deadline = tc_now_us() / 1000 + (int64_t)stmt_timeout_s * 1000 + REPLY_GRACE_MS;
    struct target t;
    target_parse(conninfo, &t);
    unsigned nh = t.host && *t.host ? list_len(t.host) : 0,
             np = t.port && *t.port ? list_len(t.port) : 0;
    bool as_is = !t.opts || nh == 0 || (t.hostaddr && *t.hostaddr) || (t.service && *t.service) ||
                 (np > 1 && np != nh) || has_empty_entry(t.host) ||
                 (np > 1 && has_empty_entry(t.port));
    /* prefer-standby: libpq's two rounds, a standby first, then any */
    bool prefer = t.attrs && strcmp(t.attrs, "prefer-standby") == 0;
    PGconn *c = NULL;
    struct tc_buf errs, addrs;
    tc_buf_init(&errs, 64 * 1024);
    tc_buf_init(&addrs, 64 * 1024);
    if (as_is) {
        c = attempt(conninfo, first_key, first_val, NULL, NULL, NULL, NULL,
                    attempt_until(&t, deadline, 0), &errs);
        goto out;
    }
    for (int round = 0; round < (prefer ? 2 : 1) && !c; round++) {
        const char *attrs = prefer ? (round == 0 ? "standby" : "any") : NULL;
        for (unsigned i = 0; i < nh && !c; i++) {
            char name[1024], port[64];
            int64_t now = tc_now_us() / 1000;
            if (now >= deadline) {
                (void)!tc_buf_appendf(&errs, "no more hosts tried: the bound is over\n");
                break;
            }
            if (!list_entry(t.host, i, name, sizeof(name)) ||
                (np > 1 && !list_entry(t.port, i, port, sizeof(port)))) {
                (void)!tc_buf_appendf(&errs, "host list entry %u cannot be used\n", i + 1);
                continue;
            }
            const char *pt = np > 1 ? port : NULL;
            unsigned after = nh - 1 - i;
            if (name[0] == '/' || name[0] == '@' || is_literal(name)) {
                c = attempt(conninfo, first_key, first_val, name, NULL, pt, attrs,
                            attempt_until(&t, deadline, after), &errs);
                continue;
            }
            int64_t bound =
                stmt_timeout_s * 1000 < RESOLVE_BOUND_MS ? stmt_timeout_s * 1000 : RESOLVE_BOUND_MS;
            if (deadline - now < bound)
                bound = deadline - now;
            tc_buf_reset(&addrs);
            if (resolve_host(name, (int)bound, &addrs, &errs) < 0)
                continue;
            /* each address an attempt of its own, in the resolver's order, as libpq goes */
            unsigned naddr = 0;
            for (size_t off = 0; off < addrs.len; off += strlen(addrs.data + off) + 1)
                naddr++;
            for (size_t off = 0; off < addrs.len && !c; off += strlen(addrs.data + off) + 1)
                c = attempt(conninfo, first_key, first_val, name, addrs.data + off, pt, attrs,
                            attempt_until(&t, deadline, --naddr + after), &errs);
        }
    }
out:
    if (!c && ret_error)
        *ret_error = errs.len ? tc_buf_steal(&errs, NULL) : strdup("no host to connect to\n");
    tc_buf_free(&errs);
    tc_buf_free(&addrs);
    PQconninfoFree(t.opts);
    return c;
}

PGconn *tc_db_connect(const char *conninfo, char **ret_error)
{
    /* (within the round trips' bound; each address within connect_timeout, or its share) */
    PGconn *c = connect_within(conninfo, 0, NULL, NULL, ret_error);
    if (!c)
        return NULL;
    adopt(c);
    if (!session_setup(c)) {
        if (ret_error)
            *ret_error = strdup(PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

bool tc_db_conn_ok(PGconn *c)
{
    if (!c || PQstatus(c) != CONNECTION_OK)
        return false;
    if (PQpipelineStatus(c) != PQ_PIPELINE_OFF)
        return false; /* (run_queue always leaves it: cannot be) start afresh */
    PGTransactionStatusType ts = PQtransactionStatus(c);
    if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR)
        return true; /* in use: its next result says */
    if (ts != PQTRANS_IDLE)
        return false; /* a result nobody read (PQTRANS_ACTIVE): it cannot send; start afresh */
    /* An idle connection has nothing to read. A backend that was terminated, or a server
     * that restarted, sent an error and closed: libpq only notices at the next query, which
     * would then fail (and with it a request that had nothing to do with the restart). */
    struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
    int n;
    do
        n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return true;
    (void)PQconsumeInput(c);
    return false; /* unsolicited input on a connection that does not LISTEN: start afresh */
}

/* A connection's start polled to its end (PQconnectPoll), given up at deadline (ms,
 * tc_now_us's clock): a server that accepts and then says nothing holds no caller longer than
 * that. 1 connected, 0 given up at the deadline, -1 failed. (Its host name was looked up
 * before, within its own bound: connect_within.) */
static int poll_within(PGconn *c, int64_t deadline)
{
    PostgresPollingStatusType st = PGRES_POLLING_WRITING; /* (libpq's first state) */
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED)
            return -1;
        if (wait_socket(c, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline) <= 0) {
            tc_log(TC_LOG_WARN, "the database did not accept a connection within the bound", NULL);
            /* Shut down, libpq may try again (without TLS) on a new socket: again, until it
             * gives up; at most a few times. */
            for (int i = 0; i < 8 && st != PGRES_POLLING_FAILED && st != PGRES_POLLING_OK; i++) {
                if (PQsocket(c) >= 0)
                    shutdown(PQsocket(c), SHUT_RDWR);
                st = PQconnectPoll(c);
            }
            return st == PGRES_POLLING_OK && PQstatus(c) == CONNECTION_OK ? 1 : 0;
        }
        st = PQconnectPoll(c);
    }
    return PQstatus(c) == CONNECTION_OK ? 1 : -1;
}

/* *c made again: a new connection (its host names looked up again), with a new session's
 * bounds (statement_timeout, the time zone, non-blocking again). The old one's socket is shut
 * down first, as PQreset would; when the new one cannot be made, *c stays, broken (not ok:
 * made again at its next use), and tc_db_error(*c) says why the new one could not be. */
bool tc_db_reset(PGconn **c, const char *conninfo)
{
    if (*c && PQsocket(*c) >= 0) {
        shutdown(PQsocket(*c), SHUT_RDWR);
        (void)PQconsumeInput(*c); /* reads the end: CONNECTION_BAD */
    }
    char *why = NULL;
    PGconn *n = connect_within(conninfo, 0, NULL, NULL, &why);
    if (n) {
        adopt(n);
        if (session_setup(n)) {
            free(why);
            PQfinish(*c);
            *c = n;
            return true;
        }
        free(why);
        why = strdup(PQerrorMessage(n));
        PQfinish(n);
    }
    struct stmts *ss = *c ? PQinstanceData(*c, stmts_event) : NULL;
    if (ss && why) {
        err_forget(ss);
        ss->err = why;
        why = NULL;
    }
    free(why);
    return false;
}

bool tc_db_revive(PGconn **c, const char *conninfo)
{
    if (*c && PQstatus(*c) == CONNECTION_OK)
        return true;
    if (*c)
        return tc_db_reset(c, conninfo);
    *c = tc_db_connect(conninfo, NULL);
    return *c != NULL;
}

bool tc_db_ensure(PGconn **c, const char *conninfo)
{
    if (tc_db_conn_ok(*c))
        return true;
    if (*c)
        return tc_db_reset(c, conninfo);
    *c = tc_db_connect(conninfo, NULL);
    return *c != NULL;
}

int tc_db_open(const char *conninfo, unsigned size, struct tc_db **ret_db, char **ret_error)
{
    struct tc_db *db = calloc(1, sizeof(*db));
    if (!db)
        return -ENOMEM;
    db->conninfo = strdup(conninfo);
    db->free_list = calloc(size, sizeof(PGconn *));
    if (!db->conninfo || !db->free_list) {
        tc_db_close(db);
        return -ENOMEM;
    }
    pthread_mutex_init(&db->lock, NULL);
    pthread_mutex_init(&db->probe_lock, NULL);
    db->wait_tail = &db->wait_head;
    db->size = size;
    for (unsigned i = 0; i < size; i++) {
        PGconn *c = tc_db_connect(conninfo, ret_error);
        if (!c) {
            tc_db_close(db);
            return -EIO;
        }
        db->free_list[db->nfree++] = c;
    }
    *ret_db = db;
    return 0;
}

void tc_db_close(struct tc_db *db)
{
    if (!db)
        return;
    for (unsigned i = 0; i < db->nfree; i++)
        PQfinish(db->free_list[i]);
    PQfinish(db->probe);
    if (db->size) {
        pthread_mutex_destroy(&db->lock);
        pthread_mutex_destroy(&db->probe_lock);
    }
    free(db->free_list);
    free(db->conninfo);
    free(db);
}

PGconn *tc_db_acquire(struct tc_db *db, int timeout_ms)
{
    struct timespec deadline = tc_timespec_in(CLOCK_REALTIME, timeout_ms);
    PGconn *c = NULL;
    pthread_mutex_lock(&db->lock);
    if (db->nfree > 0 && !db->wait_head) {
        c = db->free_list[--db->nfree];
    } else { /* in line behind those already waiting */
        struct waiter w = {.next = NULL, .conn = NULL};
        pthread_cond_init(&w.cv, NULL); /* CLOCK_REALTIME, as the deadline */
        *db->wait_tail = &w;
        db->wait_tail = &w.next;
        while (!w.conn && pthread_cond_timedwait(&w.cv, &db->lock, &deadline) != ETIMEDOUT)
            ;
        c = w.conn;
        if (!c) { /* timed out: out of the line */
            struct waiter **pp = &db->wait_head;
            while (*pp != &w)
                pp = &(*pp)->next;
            *pp = w.next;
            if (db->wait_tail == &w.next)
                db->wait_tail = pp;
        }
        pthread_cond_destroy(&w.cv);
    }
    pthread_mutex_unlock(&db->lock);
    if (!c)
        return NULL;

    if (!tc_db_conn_ok(c)) {
        /* The database restarted, the backend was terminated or the socket broke: one
         * reconnect attempt, outside the lock. */
        if (!tc_db_reset(&c, db->conninfo)) {
            /* why, at most every 5 s (each request that meets it fails: 503) */
            static int64_t said_ms;
            int64_t now = tc_now_ms(), said = __atomic_load_n(&said_ms, __ATOMIC_RELAXED);
            if (now - said >= 5000 &&
                __atomic_compare_exchange_n(&said_ms, &said, now, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                tc_log(TC_LOG_WARN, "a database connection could not be made again", "{s:s}",
                       "error", tc_db_error(c));
            tc_db_release(db, c);
            return NULL;
        }
    }
    return c;
}

void tc_db_release(struct tc_db *db, PGconn *conn)
{
    if (!conn)
        return;
    struct stmts *ss = PQinstanceData(conn, stmts_event);
    if (ss) /* (its transaction was not committed: what waited would be rolled back) */
        queue_forget(ss);
    /* Never hand out a connection stuck inside a transaction. */
    if (PQtransactionStatus(conn) != PQTRANS_IDLE && PQstatus(conn) == CONNECTION_OK) {
        PGresult *r = exec_plain(conn, "ROLLBACK");
        PQclear(r);
    }
    pthread_mutex_lock(&db->lock);
    struct waiter *w = db->wait_head;
    if (w) { /* straight to the longest waiting, out of the line */
        db->wait_head = w->next;
        if (!db->wait_head)
            db->wait_tail = &db->wait_head;
        w->conn = conn;
        pthread_cond_signal(&w->cv);
    } else {
        db->free_list[db->nfree++] = conn;
    }
    pthread_mutex_unlock(&db->lock);
}

/* r when its status is PGRES_COMMAND_OK or PGRES_TUPLES_OK, else NULL (r cleared). */
static PGresult *succeeded(PGresult *r)
{
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        PQclear(r);
        return NULL;
    }
    return r;
}

PGresult *tc_db_exec(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
    struct stmts *ss = queue_of(conn);
    if (ss && ss->nq) {
        PGresult *r = run_queue(conn, ss, sql, nparams, params, true);
        if (PQresultStatus(r) == PGRES_FATAL_ERROR && stale_error(r))
            ss->stale = true; /* (in a transaction: it has failed; renewed after it) */
        return succeeded(r);
    }
    char name[16];
    int named = stmt_name(conn, sql, nparams, name);
    if (named < 0)
        return NULL;
    PGresult *r =
        named ? await_result(conn, PQsendQueryPrepared(conn, name, nparams, params, NULL, NULL, 0))
              : exec_params(conn, sql, nparams, params);
    if (named && PQresultStatus(r) == PGRES_FATAL_ERROR && stale_error(r)) {
        /* the session lost it, or it went stale: start afresh; outside a transaction the
         * statement runs again, unnamed (inside one, the transaction has failed already) */
        ss->stale = true; /* (named: ss is there) */
        stmts_renew(conn, ss);
        if (!ss->stale) {
            PQclear(r);
            r = exec_params(conn, sql, nparams, params);
        }
    }
    return succeeded(r);
}

PGresult *tc_db_exec_once(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
    struct stmts *ss = queue_of(conn);
    if (ss && ss->nq)
        return succeeded(run_queue(conn, ss, sql, nparams, params, false));
    return succeeded(exec_params(conn, sql, nparams, params));
}

/* ---- Readiness's own connection ----
 * tc_db_ping asks with a SELECT 1 on a connection of its own, never a pooled one. A probe not
 * answered within its bound leaves its SELECT 1 out, and the next probe waits for that answer:
 * a slow but live database costs the calls' pool nothing (before, each such probe gave up a
 * pooled connection, made again by the next call that took it, on a database that was slow
 * already), and a probe never waits for a pooled connection that calls hold. A SELECT 1 left
 * unanswered for the round trips' bound is given up (a frozen or vanished server): the next
 * probe connects afresh, within its own bound. */

static PGconn *probe_connect(const char *conninfo, int64_t deadline)
{
    /* (first: the conninfo's own application_name wins) */
    PGconn *c =
        connect_within(conninfo, deadline, "fallback_application_name", "toolcage readiness", NULL);
    if (c && PQsetnonblocking(c, 1) == 0)
        return c;
    PQfinish(c);
    return NULL;
}

/* The answer to the probe's SELECT 1, read until its end or deadline: 1 its rows came, 0 not
 * yet (still out), -1 the connection broke or the server refused (the connection is then
 * started afresh). */
static int probe_answer(struct tc_db *db, PGconn *c, int64_t deadline)
{
    int f;
    while ((f = PQflush(c)) == 1)
        if (wait_socket(c, POLLOUT | POLLIN, deadline) <= 0 || !PQconsumeInput(c))
            return PQstatus(c) == CONNECTION_OK && tc_now_us() / 1000 >= deadline ? 0 : -1;
    if (f < 0 || !PQconsumeInput(c)) /* (what came already: a deadline of now reads it too) */
        return -1;
    for (;;) {
        while (PQisBusy(c)) {
            int w = wait_socket(c, POLLIN, deadline);
            if (w == 0)
                return 0;
            if (w < 0 || !PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)
                return -1;
        }
        PGresult *r = PQgetResult(c);
        if (!r)
            return db->probe_seen ? 1 : -1;
        bool rows = PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
        if (!rows)
            return -1;
        db->probe_seen = true;
    }
}

bool tc_db_ping(struct tc_db *db, int bound_ms)
{
    pthread_mutex_lock(&db->probe_lock);
    int64_t now = tc_now_us() / 1000, deadline = now + bound_ms;
    PGconn *c = db->probe;
    bool out = db->probe_sent_ms != 0;
    if (c && out && now - db->probe_sent_ms >= (int64_t)stmt_timeout_s * 1000 + REPLY_GRACE_MS) {
        /* out for the round trips' bound: an answer that came meanwhile (probes far apart)
         * says the connection works, and a fresh SELECT 1 goes; none, it is made again */
        int a = probe_answer(db, c, now);
        if (a == 0)
            tc_log(TC_LOG_WARN,
                   "the database did not answer readiness within the bound: "
                   "its connection is made again",
                   NULL);
        if (a <= 0) {
            PQfinish(c);
            c = NULL;
        }
        out = false;
    } else if (c && !out && !tc_db_conn_ok(c)) {
        PQfinish(c);
        c = NULL;
    }
    if (!c)
        c = probe_connect(db->conninfo, deadline);
    if (c && !out) {
        out = PQsendQuery(c, "SELECT 1") == 1;
        db->probe_sent_ms = out ? (now ? now : 1) : 0;
        db->probe_seen = false;
    }
    int a = c && out ? probe_answer(db, c, deadline) : -1;
    if (a != 0)
        db->probe_sent_ms = 0;
    if (a < 0) {
        PQfinish(c);
        c = NULL;
    }
    db->probe = c;
    pthread_mutex_unlock(&db->probe_lock);
    return a > 0;
}

void tc_db_bytea_hex(const unsigned char *b, size_t n, char *out)
{
    out[0] = '\\';
    out[1] = 'x';
    sodium_bin2hex(out + 2, 2 * n + 1, b, n);
}

bool tc_db_bytea_parse(const char *s, unsigned char *out, size_t n)
{
    size_t len = 0;
    if (strncmp(s, "\\x", 2) != 0)
        return false;
    return sodium_hex2bin(out, n, s + 2, strlen(s + 2), NULL, &len, NULL) == 0 && len == n;
}

bool tc_db_command(PGconn *conn, const char *sql)
{
    bool commit = strcmp(sql, "COMMIT") == 0, rollback = strcmp(sql, "ROLLBACK") == 0;
    /* (a ROLLBACK cleans up after a failure: what tc_db_error says of it stays) */
    struct stmts *ss = rollback && conn ? PQinstanceData(conn, stmts_event) : queue_of(conn);
    /* a BEGIN goes with the transaction's first statement (statements sent ahead, above) */
    if (ss && strcmp(sql, "BEGIN") == 0 && ss->nq == 0 && PQstatus(conn) == CONNECTION_OK &&
        PQtransactionStatus(conn) == PQTRANS_IDLE && queue_add(ss, sql, 0, NULL, true))
        return true;
    /* what waits to be sent would be rolled back: it is not sent (a ROLLBACK TO SAVEPOINT
     * too: what waits came after the savepoint, whose statement carried what came before) */
    if (ss && (rollback || strncmp(sql, "ROLLBACK TO ", 12) == 0))
        queue_forget(ss);
    /* Nothing to roll back (a COMMIT that rolled back came first, see below): no round
     * trip, and no "there is no transaction in progress" warning from the server. */
    if (rollback && PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) == PQTRANS_IDLE)
        return true;
    PGresult *r = ss && ss->nq ? run_queue(conn, ss, sql, 0, NULL, false) : exec_plain(conn, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    /* COMMIT of a transaction that a failed statement aborted rolls it back, and says so
     * only in its tag ("ROLLBACK"), not as an error: that is no commit. The failed
     * statement's message is gone from PQerrorMessage by now, which is empty: say why. */
    if (ok && commit && strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        ok = false;
        tc_log(TC_LOG_WARN, "a COMMIT was a ROLLBACK: a statement of the transaction had failed",
               NULL);
    }
    PQclear(r);
    /* A COMMIT that carried a statement that failed was skipped with the rest of its
     * pipeline: the transaction is still open, aborted. A COMMIT ends it whatever happens
     * (callers on connections of their own do not all roll back after one): here. */
    if (commit && !ok && PQstatus(conn) == CONNECTION_OK &&
        PQtransactionStatus(conn) == PQTRANS_INERROR)
        PQclear(exec_plain(conn, "ROLLBACK"));
    return ok;
}

int tc_db_begin(PGconn *conn)
{
    return tc_db_command(conn, "BEGIN") ? 0 : -EIO;
}

int tc_db_finish(PGconn *conn, int rc)
{
    if (rc == 0 && tc_db_command(conn, "COMMIT"))
        return 0;
    /* (no round trip after a COMMIT that rolled back, nor for a BEGIN that never went: what
     * waited to be sent is dropped) */
    tc_db_command(conn, "ROLLBACK");
    return rc < 0 ? rc : -EIO;
}
