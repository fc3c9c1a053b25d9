/* An execution's output as Server-Sent Events (api/, internal): the producer side for a run on
 * this process, following a run elsewhere through the database, and the answers.
 *
 * Events (each "data:" is one line of JSON):
 *   execution  {id, tool, status, created_at, findings}: the call is recorded (first event)
 *   finding    each of the pre-screen's findings, after execution
 *   held       the 202 body of a held call (approval_id, expires_at, reasons)
 *   approved   {status, approval_id}: a held call was approved and is queued or running
 *   stdout, stderr  {"text": ...}: output as it comes, redacted by the tool's rules and the
 *              leased secrets, valid UTF-8; concatenated they are exactly the Execution's
 *              stdout/stderr (a secret split across writes never shows, not even in part)
 *   network    an egress attempt as the proxy decides it (the Execution's "network" entry
 *              without its byte counts); those the live news missed come before result, whole
 *   result     the Execution, as the synchronous answer gives it (last event)
 *   error      a problem (application/problem+json body) when the outcome cannot be given
 * stdout/stderr events carry "id: O-E" (bytes of stdout and stderr text so far); result has
 * "id: end". Re-attaching with Last-Event-ID resumes after that point. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/events.h"
#include "server/http.h"

struct tc_redactor;
struct tc_exec_stream;

/* Another reader of a run's events, told synchronously as each is made (api/mcp.c turns them
 * into MCP notifications): event is "execution", "stdout", "stderr", "result" or "error",
 * and NULL exactly once at the end (after "result"/"error", or alone when the run ended
 * without one): ud may be freed then. */
struct tc_stream_tap {
    void (*event)(void *ud, const char *event, json_t *data);
    /* The call runs and the tap is adopted (event() will be called, NULL last): answer r. */
    enum MHD_Result (*answer)(void *ud, struct tc_request *r);
    void *ud;
};

/* True if an Accept header of r lists text/event-stream (with q > 0). */
bool tc_stream_wanted(struct tc_request *r);

/* A producer for exec_id run here. The redactor and secrets are the ones the outcome uses
 * (copied / referenced for the stream's life: the redactor must outlive it). Its log is
 * findable (tc_events_find) unless it is a run whose readers follow it from the database (the
 * worker's: they see it through sharing, below). */
int tc_exec_stream_new(const char *exec_id, const struct tc_redactor *red,
                       const char *const *secrets, size_t nsecrets, int64_t output_bytes,
                       bool findable, struct tc_exec_stream **ret);
/* Tell tap about every event from now on (copied; before any chunk). */
void tc_exec_stream_tap(struct tc_exec_stream *s, const struct tc_stream_tap *tap);
/* An event that is not output (e.g. "execution"): to the log and the tap. */
void tc_exec_stream_event(struct tc_exec_stream *s, const char *event, json_t *data);
struct tc_events *tc_exec_stream_events(struct tc_exec_stream *s); /* borrowed */
/* Output as the launcher sends it (raw; stream 1 stdout, 2 stderr). */
void tc_exec_stream_chunk(struct tc_exec_stream *s, int stream, const char *data, size_t len);
/* The egress proxy's live news of a connection (the launcher's stream 3, sandbox.h): a
 * "network" event the first time an index is told, host redacted; later news of it (its
 * bytes) is the result's. */
void tc_exec_stream_network(struct tc_exec_stream *s, const char *json, size_t len);
/* The same for an attempt that will be at pos in the result's "network" (a session's call
 * lists its own, not the sandbox's). */
void tc_exec_stream_network_at(struct tc_exec_stream *s, json_t *att, size_t pos);
/* The end: the rest of the output and "result" (view), or "error" (problem); closes the log
 * and frees s. Both NULL: closes with nothing more (the call ended without a run). */
void tc_exec_stream_end(struct tc_exec_stream *s, json_t *view, json_t *problem);
/* The end as the recorder reports it (server/recorder.h: rc 0 or -ESTALE with the stored view,
 * else not stored yet): "result", or an "error" that says where to read it later. Frees s. */
void tc_exec_stream_recorded(struct tc_exec_stream *s, int rc, json_t *view);
void tc_exec_stream_free(struct tc_exec_stream *s); /* NULL is a no-op; closes the log */

/* ---- shared: a run here, read on another replica ----
 * A reader elsewhere asks with NOTIFY toolcage_follow, '<id>' (the worker hears it and calls
 * srv->follow_asked): the stream of id, if it lives here, has its output events written to
 * execution_output from the first (api/stream_share.c), redacted as its own readers get them,
 * until its outcome is stored; then the rows are removed. */
/* tc_stream_share_start/stop: api/api.h */
/* The hook: 0, or -ENOENT (not streamed here), -ENOMEM. */
int tc_exec_stream_share(const char *exec_id);
struct tc_share;
/* For api/stream.c: history is [[k (0 stdout, 1 stderr), text, out, err], ...] (stolen).
 * NULL when the writer is not running. */
struct tc_share *tc_share_open(const char *exec_id, json_t *history);
void tc_share_event(struct tc_share *x, int k, const char *text, size_t n, size_t out, size_t err);
void tc_share_close(struct tc_share *x); /* NULL is a no-op */

/* Follow exec_id of tenant_id in the database into e (not findable: one reader's), from text
 * offsets out/err, status being its status now; ends e when the execution has its outcome. */
int tc_exec_stream_follow(struct tc_events *e, struct tc_db *db, const char *tenant_id,
                          const char *exec_id, const char *status, size_t out, size_t err);

/* Queue the 200 text/event-stream answer reading e after last_id (NULL: from the start);
 * watched: heartbeats every TC_STREAM_GONE_HEARTBEAT_MS, so that a client that left is noticed
 * soon (cancel_on_disconnect). */
#define TC_STREAM_GONE_HEARTBEAT_MS 1000
enum MHD_Result tc_exec_stream_respond(struct tc_request *r, struct tc_events *e,
                                       const char *last_id, bool watched);
