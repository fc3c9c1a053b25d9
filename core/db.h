/* A small fixed-size pool of libpq connections; every query is parameterised. */
#pragma once
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

struct tc_db;

/* Opens `size` connections. -EIO (with *ret_error set to libpq's message) if the first fails. */
int tc_db_open(const char *conninfo, unsigned size, struct tc_db **ret_db, char **ret_error);
void tc_db_close(struct tc_db *db); /* NULL is a no-op */

/* A timestamp column as ISO 8601 UTC with milliseconds ("2026-11-25T02:15:04.123Z"), in SQL;
 * the session's time zone is UTC (tc_db_open sets it). */
#define TC_SQL_ISO(col) "to_char(" col ", 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* How long a request waits for a pooled connection before it answers 503. */
#define TC_DB_WAIT_MS 5000

/* Borrow a healthy connection, waiting up to timeout_ms; NULL when none can be had
 * (pool exhausted or database down). Return it with tc_db_release(). */
PGconn *tc_db_acquire(struct tc_db *db, int timeout_ms);
void tc_db_release(struct tc_db *db, PGconn *conn);

/* PQexecParams with text parameters. Returns the result when its status is
 * PGRES_COMMAND_OK or PGRES_TUPLES_OK, else clears it and returns NULL. */
PGresult *tc_db_exec(PGconn *conn, const char *sql, int nparams, const char *const *params);
/* tc_db_exec for text built at run time (filters: one text per combination), which would
 * fill the connection's prepared statements: parsed and planned at each run. */
PGresult *tc_db_exec_once(PGconn *conn, const char *sql, int nparams, const char *const *params);
/* A statement whose result its caller does not read. In a transaction (after tc_db_begin)
 * it is sent with the next statement on conn that waits for a result (the COMMIT at the
 * latest), in the same round trip; if it fails, that statement fails too (the transaction is
 * aborted, its COMMIT false). Outside one it runs at once. True when queued, or run and
 * succeeded. tc_db_begin's BEGIN waits the same way; a ROLLBACK or tc_db_release drops what
 * was not sent (it would have been rolled back). */
bool tc_db_send(PGconn *conn, const char *sql, int nparams, const char *const *params);
/* Why the last statement on conn failed (PQerrorMessage's text, or the error of a run that
 * carried statements sent ahead, whose message libpq's is not by then). */
const char *tc_db_error(PGconn *conn);
/* A statement without parameters or rows (BEGIN, COMMIT, ROLLBACK, SET ...): true on success
 * (a COMMIT that rolled back, its transaction having failed, is false). */
bool tc_db_command(PGconn *conn, const char *sql);
/* A transaction: tc_db_begin() is 0 or -EIO; tc_db_finish(c, rc) commits when rc is 0 and
 * rolls back otherwise, and returns rc, or -EIO when the commit fails (rolled back then). */
int tc_db_begin(PGconn *conn);
int tc_db_finish(PGconn *conn, int rc);
/* bytea parameters and results travel in libpq's hex text form "\x<hex>".
 * tc_db_bytea_hex writes 2n + 3 bytes (NUL included) into out; tc_db_bytea_parse decodes
 * exactly n bytes and is false for anything else. */
void tc_db_bytea_hex(const unsigned char *b, size_t n, char *out);
bool tc_db_bytea_parse(const char *s, unsigned char *out, size_t n);

/* True when c is connected and, if idle, the server has not closed it meanwhile (checked
 * without a round trip). A connection found broken is left to tc_db_ensure() or the pool. */
bool tc_db_conn_ok(PGconn *c);
/* *c made again from conninfo: a new connection (its host names looked up again, within their
 * bound) with the session's settings, in *c's place (the old one finished); true when usable.
 * When it cannot be made, *c stays as it was. Every reset goes through here: a bare PQreset
 * leaves a session without statement_timeout, and resolves host names without a bound. */
bool tc_db_reset(PGconn **c, const char *conninfo);
/* Make *c usable: keep it if tc_db_conn_ok(), else reset it (or connect when NULL).
 * For connections outside the pool (worker, recorder). True when usable. */
bool tc_db_ensure(PGconn **c, const char *conninfo);
/* tc_db_ensure for a connection that LISTENs (its notifications are input by design): kept while
 * libpq calls it connected, else reset, or made when NULL. True when usable. */
bool tc_db_revive(PGconn **c, const char *conninfo);

/* Connections made from now on keep the statements they run prepared (default), or run
 * every statement unnamed (false: TOOLCAGE_DB_PREPARE=0, for a transaction-mode pooler). */
void tc_db_prepare_statements(bool on);

/* Connections made from now on bound each statement to seconds (statement_timeout, default
 * 30), and every round trip to that and 5 s more on our side: a server that does not answer
 * (stopped, paused, unreachable) costs a call that long, then its connection is given up and
 * made again at its next use (TOOLCAGE_DB_TIMEOUT_SECONDS). */
void tc_db_set_timeout(int seconds);

/* True when the server answers SELECT 1 within bound_ms, on a connection of readiness's own
 * (never a pooled one; one probe at a time): an answer that comes later is the next probe's. */
bool tc_db_ping(struct tc_db *db, int bound_ms);
/* Single connection without a pool (CLI commands). */
PGconn *tc_db_connect(const char *conninfo, char **ret_error);
