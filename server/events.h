/* Server-Sent Events of an execution (text/event-stream, WHATWG HTML "Server-sent events").
 *
 * One execution's events are an append-only log of formatted events ("id:", "event:",
 * "data:" lines), bounded in size, that any number of HTTP answers read, each at its own
 * offset: the client that asked for the stream, and clients that re-attach
 * (GET /v1/executions/{id}/events) while the log lives. Readers hold no thread: a reader with
 * nothing to send suspends its connection, and a push (or the heartbeat, a comment line sent
 * after heartbeat_ms without anything else) resumes it. The log outlives its producer by
 * TC_EVENTS_LINGER_MS so that a client that lost its connection at the end can still re-attach
 * here; after that, re-attaching is answered from the database (api/executions.c).
 *
 * A producer that is not on this process (a run on another replica, a held call that the
 * worker starts later) is followed by a watch: a thread of its own (not the heartbeats') calls
 * it every TC_EVENTS_WATCH_MS until it says the execution is over, or the log closes (a log
 * made for one reader closes when that reader leaves). */
#pragma once

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_EVENTS_LINGER_MS   60000
#define TC_EVENTS_WATCH_MS    250
#define TC_EVENTS_MAX_LOGS    4096 /* logs alive at once, this process */
#define TC_EVENTS_MAX_READERS 64   /* connections reading one log */
/* Event text of all logs together: past it, pushes that are not forced are dropped and the
 * lingering logs are let go, oldest first (their readers keep what they read from). */
#define TC_EVENTS_MAX_BYTES (256u << 20)

struct tc_events;

/* Start/stop the heartbeat and watch thread. Stop closes every log and wakes every reader, so
 * that each answer ends (call it before the HTTP daemon stops); afterwards tc_events_new()
 * fails with -ESHUTDOWN. */
int tc_events_start(int64_t heartbeat_ms);
void tc_events_stop(void);

/* A new log for exec_id holding at most cap bytes of event text (see tc_events_push). When
 * findable, tc_events_find() finds it from now until TC_EVENTS_LINGER_MS after
 * tc_events_close() (a log made for one reader is not). One reference for the caller.
 * -ENOMEM, -EAGAIN (too many logs), -ESHUTDOWN. */
int tc_events_new(const char *exec_id, size_t cap, bool findable, struct tc_events **ret);
/* A new reference to exec_id's live or lingering log, or NULL. */
struct tc_events *tc_events_find(const char *exec_id);
void tc_events_ref(struct tc_events *e);
void tc_events_unref(struct tc_events *e); /* NULL is a no-op */

/* Append one event: type (a short token) and data (compact JSON on one line; borrowed), with
 * an id line when id is non-NULL. Past the log's cap or TC_EVENTS_MAX_BYTES the event is
 * dropped unless force. 0, -ENOSPC (dropped), -EPIPE (closed), -ENOMEM. */
int tc_events_push(struct tc_events *e, const char *type, const char *id, json_t *data, bool force);
/* No more events: readers end once they have sent everything. */
void tc_events_close(struct tc_events *e);
bool tc_events_closed(struct tc_events *e);

/* Follow an execution that runs elsewhere: poll(ud) is called on the events thread every
 * TC_EVENTS_WATCH_MS until it returns true (it pushes what it learned, and closes the log
 * when the execution is over), or the log is closed; then done(ud) frees ud. The log holds a
 * reference on itself meanwhile. */
int tc_events_watch(struct tc_events *e, bool (*poll)(struct tc_events *e, void *ud),
                    void (*done)(void *ud), void *ud);

/* A 200 text/event-stream answer reading e from the start, or from after the event whose id
 * line was last_id (NULL, or an id not in the log: from the start). Takes its own reference.
 * NULL on ENOMEM or when too many connections read e. */
struct MHD_Response *tc_events_response(struct tc_events *e, struct MHD_Connection *conn,
                                        const char *last_id);
/* The same with heartbeats at least every heartbeat_ms (0: the configured interval): a reader
 * whose leaving must be noticed soon (a write to a connection that went fails; the events
 * thread looks every TC_EVENTS_WATCH_MS). */
struct MHD_Response *tc_events_response_hb(struct tc_events *e, struct MHD_Connection *conn,
                                           const char *last_id, int64_t heartbeat_ms);
