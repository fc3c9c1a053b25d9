/* Absolute deadlines for what an HTTP client sends (slowloris).
 *
 * libmicrohttpd's connection timeout is an idle timeout: a client that sends one byte of
 * its request head every few seconds keeps its connection, and one of the daemon's slots,
 * for ever. The guard keeps a record per connection (created by MHD's connection-start
 * notification, removed by its close notification, both before the socket is closed) and a
 * thread that shuts down the socket of any connection past its deadline; libmicrohttpd then
 * sees the end of the stream and closes the connection on its own thread. Deadlines:
 *   - request head: header_ms from the moment the connection was accepted; on a kept-alive
 *     connection, the next request line must come within idle_ms of the previous response's
 *     end, and its headers within header_ms of that request line;
 *   - request body: after header_ms of grace it must keep arriving at min_rate bytes per
 *     second on average (0 disables), and it is never given longer than the grace plus
 *     max_body / min_rate in total;
 *   - while the application handles a request (runs a sandbox, long-polls, streams the
 *     answer) there is no deadline: the idle timeout of libmicrohttpd still applies to the
 *     sending of the answer.
 * Nothing is written to a socket that is cut (like nginx's 408 on a header timeout): the
 * client sees the connection end. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct tc_http_guard;
struct tc_http_conn;

struct tc_http_guard_limits {
    int64_t header_ms; /* request line + headers; also the grace period of a body */
    int64_t idle_ms;   /* a kept-alive connection's wait for its next request line */
    int64_t min_rate;  /* body bytes per second, on average; 0: no body deadline */
    int64_t max_body;  /* bounds the body's total time: header_ms + max_body / min_rate */
};

/* Starts the guard's thread. 0 or -errno. */
int tc_http_guard_new(const struct tc_http_guard_limits *limits, struct tc_http_guard **ret_guard);
/* Stops the thread and frees every record; call after the daemon is stopped. NULL is a no-op. */
void tc_http_guard_free(struct tc_http_guard *g);

/* A connection was accepted on fd: its request head is due within header_ms. NULL on ENOMEM
 * (the connection then has no deadline but the idle timeout). */
struct tc_http_conn *tc_http_guard_open(struct tc_http_guard *g, int fd);
/* The connection is closing (its fd is still open). NULL is a no-op. */
void tc_http_guard_close(struct tc_http_guard *g, struct tc_http_conn *c);

/* The events of one request on the connection; each accepts c == NULL. */
void tc_http_guard_request_line(struct tc_http_guard *g, struct tc_http_conn *c);
void tc_http_guard_headers_done(struct tc_http_guard *g, struct tc_http_conn *c);
void tc_http_guard_body(struct tc_http_guard *g, struct tc_http_conn *c, size_t n);
/* The request is in (or refused): the application has it, no deadline. */
void tc_http_guard_handling(struct tc_http_guard *g, struct tc_http_conn *c);
/* The answer has been sent; the connection may wait idle_ms for another request. */
void tc_http_guard_completed(struct tc_http_guard *g, struct tc_http_conn *c);
