/* core/db.c against a real PostgreSQL (scripts/test gives the unit tests a database of their
 * own in TOOLCAGE_DATABASE_URL): the per-connection prepared statements, and transactions. Each
 * case asserts what the server holds (pg_prepared_statements), not only that a query answered. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/resolve.h"
#include "common/util.h"
#include "core/db.h"
#include "tap.h"

static const char *url;

/* The case needs the database; CI always has one (a skip there would hide the cases). */
#define NEED_DB()                                                                                  \
    do {                                                                                           \
        if (!url) {                                                                                \
            CHECK(getenv("CI") == NULL);                                                           \
            TAP_SKIP_HERE("no TOOLCAGE_DATABASE_URL (scripts/test sets it)");                      \
        }                                                                                          \
    } while (0)

/* The rows of table, counted by a statement run outside the layer under test (PQexec). */
static long count_rows(PGconn *c, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    PGresult *r = PQexec(c, sql);
    long n = PQresultStatus(r) == PGRES_TUPLES_OK ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return n;
}

/* How many statements the session behind c holds prepared (not counting itself). */
static long prepared_count(PGconn *c)
{
    return count_rows(c, "pg_prepared_statements");
}

static long add_one(PGconn *c, const char *v)
{
    const char *p[1] = {v};
    PGresult *r = tc_db_exec(c, "SELECT $1::int + 1", 1, p);
    long n = r ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return n;
}

TEST(statements_are_prepared_once_and_reused)
{
    NEED_DB();
    char *err = NULL;
    PGconn *c = tc_db_connect(url, &err);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(prepared_count(c) == 0);
    CHECK(add_one(c, "1") == 2);
    CHECK(prepared_count(c) == 1);
    /* the same text with other parameters: the same statement, the right answers */
    for (int i = 0; i < 20; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%d", i * 7);
        CHECK(add_one(c, v) == i * 7 + 1);
    }
    CHECK(prepared_count(c) == 1);
    /* another text is another statement */
    PGresult *r = tc_db_exec(c, "SELECT 'x'::text", 0, NULL);
    CHECK(r && strcmp(PQgetvalue(r, 0, 0), "x") == 0);
    PQclear(r);
    CHECK(prepared_count(c) == 2);
    PQfinish(c);
}

TEST(texts_beyond_the_bound_run_unnamed)
{
    NEED_DB();
    PGconn *c = tc_db_connect(url, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    for (int i = 0; i < 300; i++) {
        char sql[64];
        snprintf(sql, sizeof(sql), "SELECT %d", i);
        PGresult *r = tc_db_exec(c, sql, 0, NULL);
        CHECK(r && atoi(PQgetvalue(r, 0, 0)) == i);
        PQclear(r);
    }
    long n = prepared_count(c);
    CHECK(n > 100 && n < 300); /* bounded: the rest ran unnamed, and answered */
    /* the first ones are still the prepared ones */
    PGresult *r = tc_db_exec(c, "SELECT 0", 0, NULL);
    CHECK(r && atoi(PQgetvalue(r, 0, 0)) == 0);
    PQclear(r);
    CHECK(prepared_count(c) == n);
    PQfinish(c);
}

/* A reset is a new session: the statements are gone on the server, and must be here too
 * (else the next run asks for a statement the server does not have). */
TEST(a_reset_session_prepares_again)
{
    NEED_DB();
    PGconn *c = tc_db_connect(url, NULL);
    PGconn *killer = tc_db_connect(url, NULL);
    CHECK(c && killer);
    if (!c || !killer) {
        PQfinish(c);
        PQfinish(killer);
        return;
    }
    CHECK(add_one(c, "41") == 42);
    CHECK(prepared_count(c) == 1);
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", PQbackendPID(c));
    const char *p[1] = {pid};
    PGresult *r = PQexecParams(killer, "SELECT pg_terminate_backend($1::int, 5000)", 1, NULL, p,
                               NULL, NULL, 0);
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "t") == 0);
    PQclear(r);
    CHECK(tc_db_ensure(&c, url)); /* notices the closed session and resets */
    CHECK(PQbackendPID(c) != atoi(pid));
    CHECK(prepared_count(c) == 0);
    CHECK(add_one(c, "1") == 2);
    CHECK(prepared_count(c) == 1);
    PQfinish(c);
    PQfinish(killer);
}

/* What a session's SHOW says (a static buffer), run outside the layer under test. */
static const char *show(PGconn *c, const char *setting)
{
    static char v[64];
    char sql[64];
    snprintf(sql, sizeof(sql), "SHOW %s", setting);
    PGresult *r = PQexec(c, sql);
    snprintf(v, sizeof(v), "%s", PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "?");
    PQclear(r);
    return v;
}

static bool terminate(PGconn *killer, PGconn *c)
{
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", PQbackendPID(c));
    const char *p[1] = {pid};
    PGresult *r = PQexecParams(killer, "SELECT pg_terminate_backend($1::int, 5000)", 1, NULL, p,
                               NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return ok;
}

/* A reset makes a new session, which has none of the old one's settings: tc_db_reset sets
 * them again (the statement bound, UTC, the non-blocking sends the round trips' own bound
 * needs). The control: a bare PQreset, as the worker's LISTEN connection and the webhook
 * sender once did, leaves a session without statement_timeout. */
TEST(a_reset_session_is_bounded_again)
{
    NEED_DB();
    tc_db_set_timeout(3);
    PGconn *c = tc_db_connect(url, NULL);
    PGconn *killer = tc_db_connect(url, NULL);
    CHECK(c && killer);
    if (c && killer) {
        CHECK(strcmp(show(c, "statement_timeout"), "3s") == 0);
        CHECK(PQisnonblocking(c) == 1);
        CHECK(terminate(killer, c));
        PQreset(c); /* the control */
        CHECK(PQstatus(c) == CONNECTION_OK);
        CHECK(strcmp(show(c, "statement_timeout"), "0") == 0);
        CHECK(terminate(killer, c));
        CHECK(tc_db_reset(&c, url));
        CHECK(strcmp(show(c, "statement_timeout"), "3s") == 0);
        CHECK(strcmp(show(c, "TimeZone"), "UTC") == 0);
        CHECK(PQisnonblocking(c) == 1);
        CHECK(add_one(c, "2") == 3);
    }
    PQfinish(c);
    PQfinish(killer);
    tc_db_set_timeout(30);
}

/* A connection with a result nobody read (a caller that sent and left) cannot send again
 * ("another command is already in progress"): it is not "ok", and tc_db_ensure makes it new. */
TEST(a_connection_with_an_unread_result_is_made_again)
{
    NEED_DB();
    PGconn *c = tc_db_connect(url, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    int pid = PQbackendPID(c);
    CHECK(PQsendQuery(c, "SELECT pg_sleep(0.05)") == 1);
    CHECK(PQtransactionStatus(c) == PQTRANS_ACTIVE);
    CHECK(!tc_db_conn_ok(c));
    CHECK(tc_db_ensure(&c, url));
    CHECK(PQbackendPID(c) != pid);
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    CHECK(add_one(c, "5") == 6);
    PQfinish(c);
}

/* A statement the server cannot parse fails as it did unnamed, with the server's message,
 * is not kept, and leaves the connection usable; statements prepared inside a transaction
 * that rolls back stay (they are not transactional). */
TEST(errors_and_rollbacks)
{
    NEED_DB();
    PGconn *c = tc_db_connect(url, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(tc_db_exec(c, "SELEC 1", 0, NULL) == NULL);
    CHECK(strstr(tc_db_error(c), "syntax error") != NULL);
    CHECK(prepared_count(c) == 0);
    CHECK(tc_db_exec(c, "SELEC 1", 0, NULL) == NULL);

    CHECK(tc_db_begin(c) == 0);
    CHECK(add_one(c, "2") == 3);
    CHECK(tc_db_exec(c, "SELECT no_such_column FROM pg_class", 0, NULL) == NULL);
    CHECK(strstr(tc_db_error(c), "no_such_column") != NULL);
    CHECK(add_one(c, "2") == -1); /* the transaction is aborted */
    CHECK(tc_db_finish(c, -1) == -1);
    CHECK(prepared_count(c) == 1);
    CHECK(add_one(c, "9") == 10);
    PQfinish(c);
}

/* The session's statements and the list part ways: a pooler's DEALLOCATE (or DISCARD), a
 * column whose type changed under a prepared statement ("cached plan must not change result
 * type"). Each is noticed at the statement that meets it: outside a transaction it runs
 * again, unnamed, and answers; inside one, that transaction fails (as any error fails it)
 * and the next statement after it works. Before, the statement failed for the connection's
 * whole life. */
TEST(stale_statements_are_renewed)
{
    NEED_DB();
    PGconn *c = tc_db_connect(url, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(add_one(c, "1") == 2);
    PQclear(PQexec(c, "DEALLOCATE ALL")); /* behind the list's back */
    CHECK(prepared_count(c) == 0);
    CHECK(add_one(c, "2") == 3);
    CHECK(add_one(c, "3") == 4);
    CHECK(prepared_count(c) == 1);

    PQclear(PQexec(c, "CREATE TEMP TABLE tt (x int); INSERT INTO tt VALUES (7)"));
    PGresult *r = tc_db_exec(c, "SELECT x FROM tt", 0, NULL);
    CHECK(r && strcmp(PQgetvalue(r, 0, 0), "7") == 0 && PQftype(r, 0) == 23 /* int4 */);
    PQclear(r);
    PQclear(PQexec(c, "ALTER TABLE tt ALTER x TYPE text USING 'seven'"));
    r = tc_db_exec(c, "SELECT x FROM tt", 0, NULL);
    CHECK(r && strcmp(PQgetvalue(r, 0, 0), "seven") == 0 && PQftype(r, 0) == 25 /* text */);
    PQclear(r);

    /* inside a transaction */
    CHECK(add_one(c, "4") == 5);
    PQclear(PQexec(c, "DEALLOCATE ALL"));
    CHECK(tc_db_begin(c) == 0);
    CHECK(add_one(c, "5") == -1);
    CHECK(tc_db_finish(c, -1) == -1);
    CHECK(add_one(c, "6") == 7);
    CHECK(add_one(c, "7") == 8);
    CHECK(prepared_count(c) == 1);

    /* text built at run time is never kept */
    r = tc_db_exec_once(c, "SELECT 42", 0, NULL);
    CHECK(r && strcmp(PQgetvalue(r, 0, 0), "42") == 0);
    PQclear(r);
    CHECK(prepared_count(c) == 1);
    PQfinish(c);
}

TEST(off_runs_every_statement_unnamed)
{
    NEED_DB();
    tc_db_prepare_statements(false);
    PGconn *c = tc_db_connect(url, NULL);
    tc_db_prepare_statements(true);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(add_one(c, "1") == 2);
    CHECK(add_one(c, "5") == 6);
    CHECK(prepared_count(c) == 0);
    PQfinish(c);
}

static bool insert(PGconn *c, const char *v)
{
    const char *p[1] = {v};
    PGresult *r = tc_db_exec(c, "INSERT INTO tb VALUES ($1::int)", 1, p);
    PQclear(r);
    return r != NULL;
}

/* A transaction's statements are all its own, the first one too (a rollback takes it back),
 * and any failed statement fails it, whether the server refused to prepare it (the first
 * time a text runs: the prepare happens inside the transaction) or to run it: the commit
 * then fails and nothing of it stays. The same with statements unnamed. (The BEGIN goes with
 * the first statement, to save its round trip: a statement the server refuses to prepare,
 * which happens before that BEGIN, is then sent unnamed after it, to fail in the
 * transaction; a first try without that failed here: the transaction went on and committed.) */
TEST(a_transaction_is_all_or_nothing)
{
    NEED_DB();
    for (int prepare = 1; prepare >= 0; prepare--) {
        tc_db_prepare_statements(prepare);
        PGconn *c = tc_db_connect(url, NULL);
        tc_db_prepare_statements(true);
        CHECK(c != NULL);
        if (!c)
            return;
        PQclear(PQexec(c, "CREATE TEMP TABLE tb (x int)"));

        CHECK(tc_db_begin(c) == 0);
        CHECK(insert(c, "1"));
        CHECK(insert(c, "2"));
        CHECK(tc_db_finish(c, -5) == -5);
        CHECK(count_rows(c, "tb") == 0);

        CHECK(tc_db_begin(c) == 0);
        CHECK(insert(c, "3"));
        CHECK(tc_db_finish(c, 0) == 0);
        CHECK(count_rows(c, "tb") == 1);

        /* the first statement fails (never prepared: a new text), then the transaction */
        for (int first = 1; first >= 0; first--) {
            CHECK(tc_db_begin(c) == 0);
            if (!first)
                CHECK(insert(c, "4"));
            CHECK(tc_db_exec(c,
                             first ? "SELECT no_such_column FROM pg_class"
                                   : "SELECT no_such_column FROM pg_proc",
                             0, NULL) == NULL);
            CHECK(strstr(tc_db_error(c), "no_such_column") != NULL);
            CHECK(PQtransactionStatus(c) == PQTRANS_INERROR);
            CHECK(!insert(c, "5"));
            CHECK(tc_db_finish(c, 0) == -EIO);
            CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
            CHECK(count_rows(c, "tb") == 1);
        }
        PQfinish(c);
    }
}

static void count_notice(void *arg, const char *message)
{
    (void)message;
    ++*(int *)arg;
}

/* Callers end a transaction with `COMMIT` when all went well, else `ROLLBACK`, and some
 * send `ROLLBACK` after a `COMMIT` that said false. After a COMMIT that rolled back there is
 * no transaction left: that ROLLBACK is a no-op, not a round trip the server warns about
 * (25P01, "there is no transaction in progress", printed by libpq on stderr). */
TEST(a_rollback_after_a_commit_that_rolled_back_is_quiet)
{
    NEED_DB();
    PGconn *c = tc_db_connect(url, NULL);
    CHECK(c != NULL);
    if (!c)
        return;
    int notices = 0;
    PQsetNoticeProcessor(c, count_notice, &notices);
    PQclear(PQexec(c, "CREATE TEMP TABLE tb (x int)"));
    CHECK(tc_db_begin(c) == 0);
    CHECK(insert(c, "1"));
    CHECK(tc_db_exec(c, "SELECT no_such_column FROM pg_class", 0, NULL) == NULL);
    CHECK(!tc_db_command(c, "COMMIT"));
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    CHECK(tc_db_command(c, "ROLLBACK"));
    CHECK(notices == 0);
    CHECK(count_rows(c, "tb") == 0);
    /* the positive control: a ROLLBACK sent as is, with no transaction, is warned about */
    PQclear(PQexec(c, "ROLLBACK"));
    CHECK(notices == 1);
    /* and one in a transaction still rolls it back */
    CHECK(tc_db_begin(c) == 0);
    CHECK(insert(c, "2"));
    CHECK(tc_db_command(c, "ROLLBACK"));
    CHECK(count_rows(c, "tb") == 0);
    PQfinish(c);
}

/* A connection given back to the pool inside a transaction is rolled back: the next
 * borrower's statements stand on their own (they would otherwise wait in a transaction no
 * one commits). */
TEST(a_released_connection_is_out_of_its_transaction)
{
    NEED_DB();
    struct tc_db *db = NULL;
    CHECK(tc_db_open(url, 1, &db, NULL) == 0);
    if (!db)
        return;
    PGconn *c = tc_db_acquire(db, 1000);
    CHECK(c != NULL);
    PQclear(PQexec(c, "CREATE TEMP TABLE tb (x int)"));
    CHECK(tc_db_begin(c) == 0);
    CHECK(insert(c, "1"));
    tc_db_release(db, c);
    PGconn *again = tc_db_acquire(db, 1000);
    CHECK(again == c); /* the pool's only one */
    CHECK(PQtransactionStatus(again) == PQTRANS_IDLE);
    CHECK(count_rows(again, "tb") == 0);
    CHECK(insert(again, "2"));
    CHECK(PQtransactionStatus(again) == PQTRANS_IDLE);
    tc_db_release(db, again);
    c = tc_db_acquire(db, 1000);
    CHECK(c && count_rows(c, "tb") == 1);
    tc_db_release(db, c);
    tc_db_close(db);
}

/* ---- statements sent ahead (tc_db_send, and the BEGIN) ---- */

/* The round trips c made while fn ran: the Syncs it sent (a statement's own, or a whole
 * pipeline's) and its simple queries, read from libpq's protocol trace. */
static long round_trips(PGconn *c, void (*fn)(PGconn *c))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -1;
    PQtrace(c, f);
    fn(c);
    PQuntrace(c);
    fclose(f);
    long n = 0;
    for (char *p = buf; p && (p = strstr(p, "\tF\t")); p++) {
        char *tag = strchr(p + 3, '\t'); /* F, the length, then the message's name */
        n += tag && (strncmp(tag, "\tSync", 5) == 0 || strncmp(tag, "\tQuery\t", 7) == 0);
    }
    free(buf);
    return n;
}

/* A session with its own empty table tb (x int). */
static PGconn *connect_with_tb(void)
{
    PGconn *c = tc_db_connect(url, NULL);
    CHECK(c != NULL);
    if (c)
        PQclear(PQexec(c, "CREATE TEMP TABLE tb (x int)"));
    return c;
}

static bool send_insert(PGconn *c, const char *v)
{
    const char *p[1] = {v};
    return tc_db_send(c, "INSERT INTO tb VALUES ($1::int)", 1, p);
}

static long seen_in_tx;

/* BEGIN, an insert sent ahead, a count that reads it, another insert sent ahead, COMMIT */
static void tx_with_sends(PGconn *c)
{
    CHECK(tc_db_begin(c) == 0);
    CHECK(send_insert(c, "1"));
    PGresult *r = tc_db_exec(c, "SELECT count(*) FROM tb", 0, NULL);
    seen_in_tx = r ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    CHECK(send_insert(c, "2"));
    CHECK(tc_db_finish(c, 0) == 0);
}

/* A transaction's BEGIN goes with its first statement, and what is sent ahead with the next
 * statement that waits, the COMMIT at the latest: 2 round trips where there were 5, in the
 * same order (the count sees the insert sent before it) and all or nothing as before. */
TEST(statements_sent_ahead_share_a_round_trip)
{
    NEED_DB();
    PGconn *c = connect_with_tb();
    if (!c)
        return;
    /* the first run prepares its statements in the same round trips */
    CHECK(round_trips(c, tx_with_sends) == 2);
    CHECK(seen_in_tx == 1);
    CHECK(prepared_count(c) == 2);
    PQclear(PQexec(c, "DELETE FROM tb"));
    CHECK(round_trips(c, tx_with_sends) == 2);
    CHECK(seen_in_tx == 1);
    CHECK(count_rows(c, "tb") == 2);
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    PQfinish(c);
}

static void tx_rolled_back(PGconn *c)
{
    CHECK(tc_db_begin(c) == 0);
    CHECK(send_insert(c, "7"));
    CHECK(tc_db_finish(c, -ECANCELED) == -ECANCELED);
}

/* A statement sent ahead that fails fails the statement that carried it, with its own error
 * (tc_db_error), and its transaction: its COMMIT is false and nothing of it stays. A
 * transaction rolled back before anything of it went costs no round trip at all. Outside a
 * transaction, a statement sent ahead runs at once (nothing might come after it). */
TEST(a_statement_sent_ahead_fails_its_transaction)
{
    NEED_DB();
    PGconn *c = connect_with_tb();
    if (!c)
        return;
    CHECK(tc_db_begin(c) == 0);
    CHECK(insert(c, "1"));
    CHECK(send_insert(c, "one")); /* (queued: the server has not seen it yet) */
    CHECK(add_one(c, "2") == -1);
    CHECK(strstr(tc_db_error(c), "invalid input syntax") != NULL);
    CHECK(PQtransactionStatus(c) == PQTRANS_INERROR);
    CHECK(tc_db_finish(c, 0) == -EIO);
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    CHECK(count_rows(c, "tb") == 0);

    /* the failing one sent ahead, carried by the COMMIT itself */
    CHECK(tc_db_begin(c) == 0);
    CHECK(insert(c, "1"));
    CHECK(send_insert(c, "one"));
    CHECK(tc_db_finish(c, 0) == -EIO);
    CHECK(strstr(tc_db_error(c), "invalid input syntax") != NULL);
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    CHECK(count_rows(c, "tb") == 0);

    /* a bare COMMIT too ends the transaction (a connection of the worker's or the
     * recorder's is not rolled back by a release): the next one runs */
    CHECK(tc_db_begin(c) == 0);
    CHECK(insert(c, "1"));
    CHECK(send_insert(c, "one"));
    CHECK(!tc_db_command(c, "COMMIT"));
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    CHECK(tc_db_begin(c) == 0);
    CHECK(send_insert(c, "2"));
    CHECK(tc_db_command(c, "COMMIT"));
    CHECK(count_rows(c, "tb") == 1);

    /* what waits after a savepoint goes with a ROLLBACK TO it, not sent */
    CHECK(tc_db_begin(c) == 0);
    CHECK(tc_db_command(c, "SAVEPOINT sp"));
    CHECK(send_insert(c, "one"));
    CHECK(tc_db_command(c, "ROLLBACK TO SAVEPOINT sp"));
    CHECK(send_insert(c, "3"));
    CHECK(tc_db_finish(c, 0) == 0);
    CHECK(count_rows(c, "tb") == 2);
    PQclear(PQexec(c, "DELETE FROM tb"));

    CHECK(round_trips(c, tx_rolled_back) == 0);
    CHECK(count_rows(c, "tb") == 0);

    /* one the server refuses to prepare (a table not there yet): its own error, not that of
     * an aborted transaction; nothing of it kept, as prepared or otherwise */
    const char *late = "INSERT INTO tlate VALUES ($1::int)", *two[1] = {"2"};
    long prepared = prepared_count(c);
    CHECK(tc_db_begin(c) == 0);
    CHECK(insert(c, "1"));
    CHECK(tc_db_send(c, late, 1, two));
    CHECK(tc_db_finish(c, 0) == -EIO);
    CHECK(strstr(tc_db_error(c), "\"tlate\" does not exist") != NULL);
    CHECK(count_rows(c, "tb") == 0);
    CHECK(prepared_count(c) == prepared);
    PQclear(PQexec(c, "CREATE TEMP TABLE tlate (x int)"));
    CHECK(tc_db_begin(c) == 0);
    CHECK(tc_db_send(c, late, 1, two)); /* (the list did not keep a name the server lacks) */
    CHECK(tc_db_finish(c, 0) == 0);
    CHECK(count_rows(c, "tlate") == 1);

    CHECK(send_insert(c, "3")); /* no transaction: at once */
    CHECK(count_rows(c, "tb") == 1);
    CHECK(!send_insert(c, "three"));
    CHECK(count_rows(c, "tb") == 1);
    PQfinish(c);
}

/* The server ends the session while statements wait to be sent: the statement that carries
 * them fails, and the connection is made again as after any break (out of libpq's pipeline
 * mode, its statements prepared anew), nothing of the lost transaction in it. */
TEST(a_session_lost_under_statements_sent_ahead_is_made_again)
{
    NEED_DB();
    PGconn *c = tc_db_connect(url, NULL), *killer = tc_db_connect(url, NULL);
    CHECK(c != NULL && killer != NULL);
    if (!c || !killer) {
        PQfinish(c);
        PQfinish(killer);
        return;
    }
    CHECK(add_one(c, "1") == 2);
    PQclear(PQexec(c, "CREATE TEMP TABLE tb (x int)"));
    CHECK(send_insert(c, "0")); /* (prepared now: the pipeline below is the first contact) */
    CHECK(tc_db_begin(c) == 0);
    CHECK(send_insert(c, "1"));
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", PQbackendPID(c));
    const char *p[1] = {pid};
    PGresult *r = tc_db_exec(killer, "SELECT pg_terminate_backend($1::int, 5000)", 1, p);
    CHECK(r && strcmp(PQgetvalue(r, 0, 0), "t") == 0);
    PQclear(r);
    CHECK(add_one(c, "2") == -1);
    CHECK(PQpipelineStatus(c) == PQ_PIPELINE_OFF);
    CHECK(!tc_db_conn_ok(c));
    CHECK(tc_db_reset(&c, url));
    CHECK(tc_db_conn_ok(c) && PQpipelineStatus(c) == PQ_PIPELINE_OFF);
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    CHECK(add_one(c, "2") == 3);
    CHECK(prepared_count(c) == 1);
    CHECK(count_rows(c, "pg_tables WHERE tablename = 'tb'") == 0); /* a new session */
    PQfinish(c);
    PQfinish(killer);
}

/* The backend of readiness's connection (tc_db_ping's own), by its application_name: 0 when
 * there is none, -1 when there is more than one. */
static int readiness_backend(PGconn *admin)
{
    PGresult *r = PQexec(admin, "SELECT pid FROM pg_stat_activity WHERE application_name ="
                                " 'toolcage readiness' AND datname = current_database()");
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : -1;
    int pid = n == 1 ? atoi(PQgetvalue(r, 0, 0)) : n == 0 ? 0 : -1;
    PQclear(r);
    return pid;
}

/* A backend this test may stop: a local PostgreSQL (a Unix socket: pg_stat_activity's pid is
 * a process here) whose pid is a postgres process. */
static bool local_backend(PGconn *admin, int pid)
{
    PGresult *r = PQexec(admin, "SELECT inet_server_addr() IS NULL");
    bool local = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    char path[64], comm[32] = "";
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    FILE *f = local && pid > 0 ? fopen(path, "re") : NULL;
    if (f) {
        if (!fgets(comm, sizeof(comm), f))
            comm[0] = '\0';
        fclose(f);
    }
    return local && strcmp(comm, "postgres\n") == 0;
}

/* A watchdog: SIGCONT to pid once this process is gone (a check that aborts, a timeout), so
 * that no backend stays stopped. Its pid, to be killed when the case is done. */
static pid_t cont_when_gone(int pid)
{
    pid_t parent = getpid(), w = fork();
    if (w == 0) {
        while (getppid() == parent)
            usleep(50 * 1000);
        kill(pid, SIGCONT);
        _exit(0);
    }
    return w;
}

/* Readiness asks on a connection of its own. Its backend stopped (SIGSTOP: a database that
 * is slow, not gone): a ping answers false within its bound, the pool's connection is the
 * same session and runs (before, each such ping gave a pooled connection up, and the next call
 * made it again); the late answer is the next ping's, on the same session; unanswered for the
 * round trips' bound (1 s + the reply's grace here), the connection is made again. */
TEST(readiness_has_a_connection_of_its_own)
{
    NEED_DB();
    tc_db_set_timeout(1);
    struct tc_db *db = NULL;
    PGconn *admin = tc_db_connect(url, NULL);
    CHECK(admin && tc_db_open(url, 1, &db, NULL) == 0);
    if (!admin || !db) {
        PQfinish(admin);
        tc_db_set_timeout(30);
        return;
    }
    CHECK(tc_db_ping(db, 1500));
    int probe = readiness_backend(admin);
    CHECK(probe > 0);
    PGconn *c = tc_db_acquire(db, 1000);
    int pooled = c ? PQbackendPID(c) : 0;
    CHECK(pooled > 0 && pooled != probe);
    tc_db_release(db, c);
    if (probe > 0 && !local_backend(admin, probe)) {
        CHECK(getenv("CI") == NULL);
        tc_db_close(db);
        PQfinish(admin);
        tc_db_set_timeout(30);
        TAP_SKIP_HERE("the database is not a local PostgreSQL: its backend cannot be stopped");
    }
    pid_t watchdog = probe > 0 ? cont_when_gone(probe) : -1;
    CHECK(watchdog > 0);
    if (probe > 0 && watchdog > 0 && kill(probe, SIGSTOP) == 0) {
        int64_t t0 = tc_now_ms();
        CHECK(!tc_db_ping(db, 300));
        CHECK(!tc_db_ping(db, 300)); /* (its SELECT 1 is still out) */
        int64_t took = tc_now_ms() - t0;
        CHECK(took >= 600 && took < 3000);
        c = tc_db_acquire(db, 1000);
        CHECK(c && PQbackendPID(c) == pooled); /* not given up, not made again */
        PGresult *r = c ? tc_db_exec(c, "SELECT 1", 0, NULL) : NULL;
        CHECK(r != NULL);
        PQclear(r);
        tc_db_release(db, c);
        CHECK(kill(probe, SIGCONT) == 0);
        CHECK(tc_db_ping(db, 1500)); /* the late answer */
        CHECK(readiness_backend(admin) == probe);
        /* a late answer that came long before the next probe (probes far apart: past the
         * round trips' bound) keeps the session too */
        CHECK(kill(probe, SIGSTOP) == 0);
        CHECK(!tc_db_ping(db, 300));
        CHECK(kill(probe, SIGCONT) == 0);
        sleep(6);
        CHECK(tc_db_ping(db, 1500));
        CHECK(readiness_backend(admin) == probe);
        /* stopped for longer than the round trips' bound: made again */
        CHECK(kill(probe, SIGSTOP) == 0);
        CHECK(!tc_db_ping(db, 300));
        sleep(6);
        CHECK(tc_db_ping(db, 1500)); /* a new session, which answers */
        CHECK(kill(probe, SIGCONT) == 0);
        for (int i = 0; i < 50 && readiness_backend(admin) == -1; i++)
            usleep(100 * 1000); /* the old one ends at its socket's end */
        int again = readiness_backend(admin);
        CHECK(again > 0 && again != probe);
        c = tc_db_acquire(db, 1000);
        CHECK(c && PQbackendPID(c) == pooled);
        tc_db_release(db, c);
    }
    if (probe > 0)
        (void)kill(probe, SIGCONT); /* (a failed check above left it stopped) */
    if (watchdog > 0) {
        kill(watchdog, SIGKILL);
        while (waitpid(watchdog, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    tc_db_close(db);
    PQfinish(admin);
    tc_db_set_timeout(30);
}

/* ---- Host names looked up within a bound (core/db.c, connect_within) ----
 * Each case runs in a child of its own, in a mount and network namespace of its own: its
 * /etc/hosts, resolv.conf and nsswitch.conf are bound over the host's, its loopback is its
 * own, and the database is reached through its Unix socket (a path: any namespace), or a
 * relay to it on the loopback. */

#define NAME "db.toolcage-resolve.test"

struct netns {
    char dir[64];
    char hosts[96];
};

static bool write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* This process in namespaces of its own (above): hosts as /etc/hosts, a resolver at
 * 127.0.0.1 (slow to give up: 30 s a try) for names not in it. */
static bool private_net(struct netns *n, const char *hosts)
{
    snprintf(n->dir, sizeof(n->dir), "/tmp/tc-resolve.XXXXXX");
    if (!mkdtemp(n->dir) || unshare(CLONE_NEWNS | CLONE_NEWNET) < 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return false;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    bool up = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 &&
              (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
    if (s >= 0)
        close(s);
    static const char *const files[][2] = {
        {"resolv.conf", "nameserver 127.0.0.1\noptions timeout:30 attempts:2\n"},
        {"nsswitch.conf", "hosts: files dns\n"},
        {"hosts", NULL}};
    for (size_t i = 0; up && i < TC_ARRAY_SIZE(files); i++) {
        char src[128], dst[64];
        snprintf(src, sizeof(src), "%s/%s", n->dir, files[i][0]);
        snprintf(dst, sizeof(dst), "/etc/%s", files[i][0]);
        up = write_file(src, files[i][1] ? files[i][1] : hosts) &&
             mount(src, dst, NULL, MS_BIND, NULL) == 0;
    }
    snprintf(n->hosts, sizeof(n->hosts), "%s/hosts", n->dir);
    return up;
}

static void private_net_done(struct netns *n)
{
    static const char *const names[] = {"resolv.conf", "nsswitch.conf", "hosts"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(names); i++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/%s", n->dir, names[i]);
        unlink(p);
    }
    rmdir(n->dir);
}

/* The test database's conninfo option key ("" when it has none). */
static void url_option(const char *key, char *out, size_t size)
{
    PQconninfoOption *o = PQconninfoParse(url, NULL);
    out[0] = '\0';
    for (PQconninfoOption *x = o; x && x->keyword; x++)
        if (strcmp(x->keyword, key) == 0 && x->val)
            snprintf(out, size, "%s", x->val);
    PQconninfoFree(o);
}

/* Runs fn in a child (in its own namespaces: private_net); the case passes when the child's
 * checks did. */
static void in_child(void (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        tap_case_failed = 0;
        fn();
        fflush(stderr);
        _exit(tap_case_failed ? 1 : 0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void *blocking_lookup(void *arg)
{
    struct addrinfo *ai = NULL, hints = {.ai_socktype = SOCK_STREAM};
    if (getaddrinfo(NAME, "5432", &hints, &ai) == 0)
        freeaddrinfo(ai);
    __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static int lookup_done;

/* tc_db_connect(ci, err), and how long it took in *took (ms). */
static PGconn *timed_connect(const char *ci, char **err, int64_t *took)
{
    int64_t t0 = tc_now_ms();
    PGconn *c = tc_db_connect(ci, err);
    *took = tc_now_ms() - t0;
    return c;
}

static void resolver_silent(void)
{
    struct netns n;
    CHECK(private_net(&n, "127.0.0.1 localhost\n"));
    /* the resolver: a socket that takes the queries and never answers */
    int dns = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(dns >= 0 && bind(dns, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    /* the control: libc's own lookup, as libpq makes it, is still waiting when ours is over */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, blocking_lookup, &lookup_done) == 0);
    pthread_detach(t);
    char sock[512], db[128], user[128], ci[1024];
    url_option("host", sock, sizeof(sock));
    url_option("dbname", db, sizeof(db));
    url_option("user", user, sizeof(user));
    tc_db_set_timeout(1); /* the lookup's bound: 1 s (the statements' bound, under 5 s) */
    snprintf(ci, sizeof(ci), "host=%s port=5432 dbname='%s' user='%s'", NAME, db, user);
    char *err = NULL;
    int64_t took;
    PGconn *c = timed_connect(ci, &err, &took);
    CHECK(c == NULL);
    CHECK(took >= 900 && took < 3000);
    CHECK(err && strstr(err, "\"" NAME "\"") && strstr(err, "no answer within 1000 ms"));
    if (err)
        fprintf(stderr, "    # %lld ms: %s", (long long)took, err);
    free(err);
    PQfinish(c);
    /* a list: the name given up on, the next host (the socket) tried, within the bound */
    snprintf(ci, sizeof(ci), "host=%s,%s dbname='%s' user='%s'", NAME, sock, db, user);
    c = timed_connect(ci, NULL, &took);
    CHECK(c && add_one(c, "1") == 2);
    CHECK(took >= 900 && took < 3000);
    PQfinish(c);
    /* the other way round: the first host answers, the name's lookup never starts (as libpq
     * goes host by host: a slow name after a good host costs nothing) */
    snprintf(ci, sizeof(ci), "host=%s,%s dbname='%s' user='%s'", sock, NAME, db, user);
    c = timed_connect(ci, NULL, &took);
    CHECK(c && add_one(c, "1") == 2);
    CHECK(took < 500);
    PQfinish(c);
    /* asked again and again while unanswered: one pending lookup, not one per asking (each
     * lookup is two queries, A and AAAA, and the resolver is slow to give up) */
    static struct tc_resolver pool = TC_RESOLVER_INIT(4, 5000);
    for (int i = 0; i < 5; i++) {
        struct addrinfo *ai = NULL;
        CHECK(tc_resolve_within(&pool, NAME, 100, &ai) == -ETIMEDOUT && ai == NULL);
    }
    int queries = 0;
    char q[512];
    while (recv(dns, q, sizeof(q), MSG_DONTWAIT) > 0)
        queries++;
    fprintf(stderr, "    # %d queries reached the resolver\n", queries);
    /* the database's lookup, the control's, and the pool's first (each A and AAAA): 14 when
     * each asking sends its own */
    CHECK(queries >= 1 && queries <= 6);
    /* a pool's bound on names pending: the fifth name is refused at once, not queued */
    for (int i = 0; i < 4; i++) {
        char other[64];
        struct addrinfo *ai = NULL;
        snprintf(other, sizeof(other), "n%d." NAME, i);
        CHECK(tc_resolve_within(&pool, other, i < 3 ? 1 : 2000, &ai) ==
              (i < 3 ? -ETIMEDOUT : -EAGAIN));
    }
    /* never fresh (1 ms): a name still has at most two lookups pending, and the pool's other
     * room stays for other names */
    static struct tc_resolver stale = TC_RESOLVER_INIT(4, 1);
    for (int i = 0; i < 4; i++) {
        struct addrinfo *none = NULL;
        usleep(5 * 1000);
        CHECK(tc_resolve_within(&stale, NAME, 10, &none) == -ETIMEDOUT);
    }
    struct addrinfo *other = NULL;
    CHECK(tc_resolve_within(&stale, "other." NAME, 10, &other) == -ETIMEDOUT);
    pthread_mutex_lock(&stale.mu);
    CHECK(stale.n == 3);
    pthread_mutex_unlock(&stale.mu);
    /* the name back in /etc/hosts while its lookup still waits on the resolver: a lookup
     * within the pool's fresh_ms joins that one (no answer), the next after it starts anew */
    static struct tc_resolver fresh = TC_RESOLVER_INIT(4, 300);
    struct addrinfo *ai = NULL;
    CHECK(tc_resolve_within(&fresh, NAME, 50, &ai) == -ETIMEDOUT);
    CHECK(write_file(n.hosts, "127.0.0.1 localhost\n127.0.0.9 " NAME "\n"));
    CHECK(tc_resolve_within(&fresh, NAME, 50, &ai) == -ETIMEDOUT);
    usleep(300 * 1000);
    CHECK(tc_resolve_within(&fresh, NAME, 1000, &ai) == 0 && ai && ai->ai_family == AF_INET &&
          ((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr.s_addr == htonl(0x7f000009));
    tc_resolve_free(ai);
    CHECK(__atomic_load_n(&lookup_done, __ATOMIC_SEQ_CST) == 0);
    tc_db_set_timeout(30);
    private_net_done(&n);
}

/* A resolver that takes queries and never answers: a connection to a host name is given up
 * within the lookup's bound (before, libpq waited for libc's lookup: the resolver's 30 s x 2
 * tries here, for each search domain), with a message that names the host; in a list of
 * hosts, the next one is tried, and a name after a host that answers is never looked up; the
 * name asked for again meanwhile, no second query goes out; back in /etc/hosts, the name is
 * found once the pending lookup is no longer fresh. */
TEST(a_host_name_is_looked_up_within_a_bound)
{
    NEED_DB();
    if (geteuid() != 0) {
        CHECK(getenv("CI") == NULL);
        TAP_SKIP_HERE("needs root (a mount and network namespace of its own)");
    }
    in_child(resolver_silent);
}

/* Copies between a and b until either ends. */
static void pump(int a, int b)
{
    char buf[16384];
    struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return;
        for (int i = 0; i < 2; i++) {
            if (!p[i].revents)
                continue;
            ssize_t n = read(p[i].fd, buf, sizeof(buf));
            if (n <= 0)
                return;
            for (ssize_t off = 0; off < n;) {
                ssize_t w = write(p[1 - i].fd, buf + off, (size_t)(n - off));
                if (w <= 0)
                    return;
                off += w;
            }
        }
    }
}

/* A relay from 127.0.0.1 and 127.0.0.2, port *ret_port (the same on both), to the database's
 * Unix socket path: a process (and one per connection), gone with this one. Other loopback
 * addresses on that port are free: 127.0.0.3 for a silent listener. */
static pid_t relay_to(const char *path, int *ret_port)
{
    int l[2];
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    for (int i = 0; i < 2; i++) {
        sa.sin_addr.s_addr = htonl(0x7f000001 + (uint32_t)i);
        if ((l[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
            bind(l[i], (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l[i], 16) < 0 ||
            getsockname(l[i], (struct sockaddr *)&sa, &len) < 0)
            return -1; /* (the port of the first is the second's) */
    }
    *ret_port = ntohs(sa.sin_port);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGCHLD, SIG_IGN);
        struct pollfd p[2] = {{.fd = l[0], .events = POLLIN}, {.fd = l[1], .events = POLLIN}};
        for (;;) {
            if (poll(p, 2, -1) <= 0)
                continue;
            int a = accept4(p[0].revents ? l[0] : l[1], NULL, NULL, SOCK_CLOEXEC);
            if (a < 0)
                continue;
            if (fork() == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                struct sockaddr_un su = {.sun_family = AF_UNIX};
                size_t pl = strlen(path);
                int u =
                    pl < sizeof(su.sun_path) ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
                if (u >= 0)
                    memcpy(su.sun_path, path, pl + 1);
                if (u >= 0 && connect(u, (struct sockaddr *)&su, sizeof(su)) == 0)
                    pump(a, u);
                _exit(0);
            }
            close(a);
        }
    }
    close(l[0]);
    close(l[1]);
    return pid;
}

static void each_address(void)
{
    struct netns n;
    CHECK(private_net(&n, "::1 " NAME "\n127.0.0.1 " NAME "\n"));
    char sock[512], port[16], db[128], user[128], path[600], ci[1024];
    url_option("host", sock, sizeof(sock));
    url_option("port", port, sizeof(port));
    url_option("dbname", db, sizeof(db));
    url_option("user", user, sizeof(user));
    snprintf(path, sizeof(path), "%s/.s.PGSQL.%s", sock, port[0] ? port : "5432");
    int rport = 0;
    pid_t relay = relay_to(path, &rport);
    CHECK(relay > 0);
    snprintf(ci, sizeof(ci), "host=%s port=%d dbname='%s' user='%s'", NAME, rport, db, user);
    PGconn *c = tc_db_connect(ci, NULL), *killer = tc_db_connect(url, NULL);
    CHECK(c && killer);
    if (c && killer) {
        /* the name kept (certificate, .pgpass), the address the one that answered: ::1 first
         * (refused: no listener), then 127.0.0.1 */
        CHECK(strcmp(PQhost(c), NAME) == 0);
        CHECK(strcmp(PQhostaddr(c), "127.0.0.1") == 0);
        CHECK(add_one(c, "1") == 2);
        /* the name moves: a reset looks it up again (PQreset would go to the old address) */
        CHECK(write_file(n.hosts, "127.0.0.2 " NAME "\n"));
        CHECK(terminate(killer, c));
        CHECK(add_one(c, "1") == -1);
        CHECK(tc_db_reset(&c, ci));
        CHECK(strcmp(PQhostaddr(c), "127.0.0.2") == 0);
        CHECK(add_one(c, "2") == 3);
        CHECK(strcmp(show(c, "TimeZone"), "UTC") == 0);
        /* an address that accepts and says nothing (a stale address now someone else's):
         * given its connect_timeout, then the next address, as libpq's blocking connect does */
        int hole = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in h4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)rport)};
        h4.sin_addr.s_addr = htonl(0x7f000003);
        CHECK(hole >= 0 && bind(hole, (struct sockaddr *)&h4, sizeof(h4)) == 0 &&
              listen(hole, 4) == 0);
        /* (.3 and .2 share as long a prefix with the source, 127.0.0.1: the resolver keeps
         * their order, RFC 6724 rule 9) */
        CHECK(write_file(n.hosts, "127.0.0.3 " NAME "\n127.0.0.2 " NAME "\n"));
        char ct[1100];
        snprintf(ct, sizeof(ct), "%s connect_timeout=2", ci);
        CHECK(terminate(killer, c));
        int64_t t0 = tc_now_ms();
        CHECK(tc_db_reset(&c, ct));
        int64_t took = tc_now_ms() - t0;
        CHECK(strcmp(PQhostaddr(c), "127.0.0.2") == 0 && add_one(c, "1") == 2);
        CHECK(took >= 1900 && took < 6000);
        fprintf(stderr, "    # past the silent address in %lld ms\n", (long long)took);
        /* without connect_timeout: the bound (1 s + 5 s here) shared out, half each */
        tc_db_set_timeout(1);
        CHECK(terminate(killer, c));
        t0 = tc_now_ms();
        CHECK(tc_db_reset(&c, ci));
        took = tc_now_ms() - t0;
        CHECK(strcmp(PQhostaddr(c), "127.0.0.2") == 0 && add_one(c, "1") == 2);
        CHECK(took >= 2900 && took < 5500);
        fprintf(stderr, "    # and in %lld ms with its share of the bound\n", (long long)took);
        tc_db_set_timeout(30);
        if (hole >= 0)
            close(hole);
        /* gone from the hosts: the reset fails, and c stays (not ok, made again later) */
        CHECK(write_file(n.hosts, "127.0.0.1 localhost\n"));
        CHECK(terminate(killer, c));
        PGconn *before = c;
        CHECK(!tc_db_reset(&c, ci));
        CHECK(c == before && !tc_db_conn_ok(c) && PQstatus(c) == CONNECTION_BAD);
        CHECK(strstr(tc_db_error(c), "could not translate host name \"" NAME "\""));
    }
    PQfinish(c);
    PQfinish(killer);
    if (relay > 0)
        kill(relay, SIGKILL);
    private_net_done(&n);
}

/* A host name with two addresses (::1 with no listener, then 127.0.0.1 with a relay to the
 * database): the connection goes through the second; moved to 127.0.0.2, a reset follows it;
 * first 127.0.0.3 accepting and saying nothing, its connect_timeout (or, without one, its
 * share of the bound) passes and the next address (127.0.0.2) is tried; gone, a reset fails and
 * leaves the connection, broken, with the reason. */
TEST(a_host_name_connects_to_each_of_its_addresses)
{
    NEED_DB();
    char sock[512];
    url_option("host", sock, sizeof(sock));
    if (geteuid() != 0 || sock[0] != '/') {
        CHECK(getenv("CI") == NULL);
        TAP_SKIP_HERE("needs root and a database on a Unix socket");
    }
    in_child(each_address);
}

/* Host by host, target_session_attrs still means what it means to libpq: "standby" is refused
 * by a primary (the test database), "prefer-standby" takes it in its second round. */
TEST(target_session_attrs_hold_host_by_host)
{
    NEED_DB();
    char sock[512], db[128], user[128], ci[1024];
    url_option("host", sock, sizeof(sock));
    url_option("dbname", db, sizeof(db));
    url_option("user", user, sizeof(user));
    snprintf(ci, sizeof(ci), "host=%s dbname='%s' user='%s' target_session_attrs=standby", sock, db,
             user);
    char *err = NULL;
    PGconn *c = tc_db_connect(ci, &err);
    CHECK(c == NULL && err && strstr(err, "hot standby"));
    free(err);
    snprintf(ci, sizeof(ci), "host=%s dbname='%s' user='%s' target_session_attrs=prefer-standby",
             sock, db, user);
    c = tc_db_connect(ci, NULL);
    CHECK(c && add_one(c, "1") == 2);
    PQfinish(c);
}

int main(void)
{
    url = getenv("TOOLCAGE_DATABASE_URL");
    if (url && !*url)
        url = NULL;
    RUN(statements_are_prepared_once_and_reused);
    RUN(texts_beyond_the_bound_run_unnamed);
    RUN(a_reset_session_prepares_again);
    RUN(a_reset_session_is_bounded_again);
    RUN(a_connection_with_an_unread_result_is_made_again);
    RUN(errors_and_rollbacks);
    RUN(stale_statements_are_renewed);
    RUN(off_runs_every_statement_unnamed);
    RUN(a_transaction_is_all_or_nothing);
    RUN(a_rollback_after_a_commit_that_rolled_back_is_quiet);
    RUN(a_released_connection_is_out_of_its_transaction);
    RUN(statements_sent_ahead_share_a_round_trip);
    RUN(a_statement_sent_ahead_fails_its_transaction);
    RUN(a_session_lost_under_statements_sent_ahead_is_made_again);
    RUN(readiness_has_a_connection_of_its_own);
    RUN(a_host_name_is_looked_up_within_a_bound);
    RUN(a_host_name_connects_to_each_of_its_addresses);
    RUN(target_session_attrs_hold_host_by_host);
    return TAP_DONE();
}
