/* HTTP glue over libmicrohttpd: per-request context, routing, problem+json responses,
 * and suspend/resume so that no worker thread waits for a sandbox. */
#pragma once

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>

#include "common/buf.h"
#include "server/auth.h"
#include "core/config.h"

struct tc_db;
struct tc_http_conn;
struct tc_http_guard;
struct tc_launcher;
struct tc_policy;
struct tc_redactor;
struct tc_keys;
struct tc_verifier;

struct tc_route_group;
struct tc_server;

/* A listener's own context (the request line's callback gets it): whose server, and which
 * routes it answers. Set before its daemon starts, so no request meets it half made. */
struct tc_listener {
    struct tc_server *srv;
    const struct tc_route_group *const *routes;
};

struct tc_server {
    const struct tc_config *cfg;
    char public_url[512]; /* the console as reviewers reach it (TOOLCAGE_PUBLIC_URL) */
    /* What the server answers: groups of routes, NULL-terminated, installed by main (the HTTP
     * layer knows no handler; api/ and console/ export their groups). */
    const struct tc_route_group *const *routes;
    /* What the health listener answers (TOOLCAGE_HEALTH_PORT): liveness and readiness on a
     * thread of their own, which no request waiting for the database or a slot can hold. */
    const struct tc_route_group *const *health_routes;
    struct tc_db *db;
    struct tc_launcher *launcher;
    struct MHD_Daemon *mhd;
    struct MHD_Daemon *health_mhd;                /* NULL without TOOLCAGE_HEALTH_PORT */
    struct tc_listener listen_api, listen_health; /* (server/http.c) */
    struct tc_http_guard *guard; /* deadlines for slow clients (server/http_guard.h) */
    const struct tc_keys *keys;
    /* This process in the instances table, and whether it holds its instance lock now
     * (written by the worker, see server/worker.h): without the lock, it starts nothing. */
    _Atomic int instance_id;
    _Atomic bool instance_locked;
    /* SIGTERM: no new connections, new executions refused (503 draining), running ones
     * finish within TOOLCAGE_DRAIN_SECONDS (main/serve.c) */
    _Atomic bool draining;
    struct tc_recorder *recorder; /* writes starts and outcomes (server/recorder.h) */
    pthread_mutex_t policy_lock;
    /* Shutdown: readers hold run_lock while they use the launcher or suspend a request;
     * the main thread takes it for writing to set stopping, after which neither happens. */
    pthread_rwlock_t run_lock;
    bool stopping;
    _Atomic int suspended; /* connections suspended now (drained before the daemon stops) */
    /* requests begun and not yet completed (answer written, or the client gone): the ones a
     * stop waits for; an idle keep-alive connection holds none */
    _Atomic int requests;
    _Atomic int exports;          /* audit exports streaming now (server/audit_http.c) */
    struct tc_policy *policy;     /* swap under policy_lock; readers take a reference */
    struct tc_verifier *verifier; /* audit chain walks (server/verifier.h) */
    /* A cancel for an execution that no sandbox of its own runs: a session's call (installed
     * by api/sessions.c). 0 if it was this process's to interrupt, -ENOENT. */
    int (*cancel_session_call)(const char *execution_id);
    /* Someone on another replica follows this execution's events (NOTIFY toolcage_follow):
     * share its output through the database if it runs here (installed by api/stream_share.c).
     * 0, or -ENOENT when it is not streamed here. */
    int (*follow_asked)(const char *execution_id);
    /* A run the worker starts (an approved call): its output as live events for whoever
     * follows it, here or on another replica (installed by api/stream_share.c). open gives
     * NULL when there is none (red must outlive it); chunk is the launcher's (sandbox.h); end
     * once the outcome is stored (view NULL: it is not) frees it. */
    void *(*run_stream_open)(const char *execution_id, const struct tc_redactor *red,
                             const char *const *secrets, size_t nsecrets, int64_t output_bytes);
    void (*run_stream_chunk)(void *stream, int kind, const char *data, size_t len);
    void (*run_stream_end)(void *stream, json_t *view);
};

struct tc_request;
typedef enum MHD_Result (*tc_handler)(struct tc_request *r);

/* A route: method, path pattern ("{}" matches one segment), the roles allowed (0: no
 * authentication), the handler. */
struct tc_route {
    const char *method;
    const char *pattern;
    unsigned roles;
    tc_handler handler;
};

/* Routes that share one way of authenticating. dispatch() is called with the route matched
 * (its path parameters set, the body within the cap): it decides who is calling (an API key,
 * a session cookie) and whether their role may use rt, then calls rt->handler. not_found
 * (may be NULL) answers unknown paths under prefix. */
struct tc_route_group {
    const char *prefix;
    const struct tc_route *routes; /* ends with {NULL} */
    enum MHD_Result (*dispatch)(struct tc_request *r, const struct tc_route *rt);
    enum MHD_Result (*not_found)(struct tc_request *r);
};

struct tc_request {
    struct tc_server *srv;
    struct MHD_Connection *conn;
    const struct tc_route_group *const *routes; /* the listener's: srv->routes or health_routes */
    const char *method;
    char *path;
    char request_id[65];
    struct tc_buf body;
    bool body_too_large;
    bool body_done;
    struct tc_principal principal;
    const char *route; /* pattern of the matched route, for metrics */
    char *params[4];   /* path segments matched by "{}" */
    unsigned status;   /* of the response queued, for the access log */
    long long start_ms;
    int64_t line_us;            /* the request line came (tc_now_us), for Server-Timing */
    int64_t auth_us, authed_us; /* the API key's lookup began and ended (0: none) */
    int64_t handler_us;         /* its handler first ran (POST /v1/execute's, for a queue) */
    bool started;               /* the headers are in and the handler has seen the request */
    size_t raw_uri_len;         /* of the request target as received, up to its first NUL byte */
    struct tc_http_conn *gconn; /* the connection's record in srv->guard, or NULL */
    const char *preference_applied; /* RFC 7240 Preference-Applied of a 2xx answer, or NULL */
    /* A reply filter (api/mcp.c): every JSON answer of the handler (tc_respond_json_ex and
     * what calls it) goes to it instead, with its status, body (stolen) and content type; it
     * queues what it makes of it, or suspends the request. ctx is freed with the request. */
    enum MHD_Result (*reply_filter)(struct tc_request *r, unsigned status, json_t *body,
                                    const char *content_type);
    void *reply_ctx;
    void (*reply_ctx_free)(void *ctx);
    /* waiting for a sandbox slot (server/slotq.h): since when it may wait, and why it runs
     * again (it waited its time, or a slot came free for it) */
    int64_t slot_deadline_ms;
    enum { TC_SLOT_NONE, TC_SLOT_WAITED, TC_SLOT_GRANTED } slot_wait;
    /* async: set by tc_request_suspend(); the handler that runs when resumed */
    tc_handler resume;
    void *state;
    void (*state_free)(void *state);
    /* The client left before its answer was whole (libmicrohttpd ended the request with an
     * error or a client abort, not at shutdown): on_gone(r, gone_ud) runs then, on a daemon
     * thread. gone_ud is free()d with the request either way. */
    void (*on_gone)(struct tc_request *r, void *gone_ud);
    void *gone_ud;
};

/* How many times the request carries the header name. */
int tc_request_header_count(struct tc_request *r, const char *name);

/* Starts the daemon on cfg->listen_host:listen_port. */
int tc_http_start(struct tc_server *srv, char **ret_error);
/* Stop accepting, then stop. Suspended requests must have been resumed first. */
void tc_http_stop(struct tc_server *srv);

/* Takes a reference on the current policy (release with tc_policy_unref). */
struct tc_policy *tc_server_policy(struct tc_server *srv);
/* Installs a new policy (steals the reference). */
void tc_server_set_policy(struct tc_server *srv, struct tc_policy *p);

/* Queue resp (adds X-Request-Id and the common headers) and destroy our reference. */
enum MHD_Result tc_http_queue(struct tc_request *r, unsigned status, struct MHD_Response *resp);

/* Response helpers; each returns the MHD result to hand back from the handler. */
enum MHD_Result tc_respond_json(struct tc_request *r, unsigned status, json_t *body /* stolen */);
/* With a content type and one extra header (extra_name NULL for none). */
enum MHD_Result tc_respond_json_ex(struct tc_request *r, unsigned status, json_t *body /* stolen */,
                                   const char *content_type, const char *extra_name,
                                   const char *extra_value);
enum MHD_Result tc_respond_text(struct tc_request *r, unsigned status, const char *content_type,
                                const void *data, size_t len);
/* Bytes (data malloc'ed, stolen) with a content type and one extra header (or none). */
enum MHD_Result tc_respond_bytes(struct tc_request *r, unsigned status, const char *content_type,
                                 void *data, size_t len, const char *extra_name,
                                 const char *extra_value);
/* type_slug becomes "urn:toolcage:problem:<slug>"; errors (stolen, may be NULL) is an
 * array of {path, message}. */
enum MHD_Result tc_respond_problem(struct tc_request *r, unsigned status, const char *type_slug,
                                   const char *title, json_t *errors, const char *detail_fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* 503 urn:toolcage:problem:unavailable, "the database is not reachable". */
enum MHD_Result tc_respond_db_down(struct tc_request *r);

/* A problem response with one extra header (e.g. WWW-Authenticate, Allow). */
enum MHD_Result tc_respond_problem_header(struct tc_request *r, unsigned status, const char *slug,
                                          const char *title, const char *hname, const char *hvalue,
                                          const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* Parse the body as a JSON object. On failure a problem response has been queued:
 * return *ret_result from the handler. */
json_t *tc_request_json(struct tc_request *r, enum MHD_Result *ret_result);

/* Enter/leave a section that may use srv->launcher or suspend a request; begin fails
 * (returns false, nothing held) once the server is stopping. */
bool tc_server_begin(struct tc_server *srv);
void tc_server_end(struct tc_server *srv);
/* Refuse new suspensions and launcher use; waits for sections in progress. */
void tc_server_set_stopping(struct tc_server *srv);

/* Suspend the connection; `resume` runs on a worker thread after tc_request_resume(). */
void tc_request_suspend(struct tc_request *r, tc_handler resume);
/* Thread-safe; call exactly once per suspend. */
void tc_request_resume(struct tc_request *r);

const char *tc_request_query(struct tc_request *r, const char *name);
/* True if a Prefer header (RFC 7240; any of them, comma-separated, case-insensitive, with or
 * without parameters) names the preference token, e.g. "respond-async". */
bool tc_request_prefers(struct tc_request *r, const char *token);
