/* The JSON API: its routes (api/routes.c) and their handlers, one file per resource. */
#pragma once
#include "server/http.h"

struct tc_tool;
struct tc_stream_tap;
struct tc_stream_tap;

/* Every /v1 route, /healthz, /readyz, /openapi.yaml and /metrics; API keys authenticate. */
extern const struct tc_route_group tc_api_routes;
extern const struct tc_route_group tc_api_health_routes; /* /healthz, /readyz alone */

enum MHD_Result tc_api_execute(struct tc_request *r);
/* POST /v1/execute's work on a parsed body (stolen): async answers 202 at once; idempotency
 * honours an Idempotency-Key header (the raw request body is what it hashes). */
struct tc_execute_opts {
    bool async;
    bool idempotency;
    bool events; /* answer with Server-Sent Events (api/stream.h) unless async */
    /* the handler to run again when a sandbox slot comes free (server/slotq.h); NULL: a call
     * that finds every slot taken is refused at once */
    tc_handler retry;
    /* MCP (api/mcp.c): a call that runs is answered by tap->answer and its events go to
     * tap->event (api/stream.h); NULL: none */
    const struct tc_stream_tap *tap;
};
enum MHD_Result tc_api_execute_json(struct tc_request *r, json_t *body,
                                    const struct tc_execute_opts *opts);
/* The "execute" audit record of a call (code and stdin redacted with red, and hashed). */
struct tc_api_call_ids {
    const struct tc_principal *principal;
    const char *request_id, *tool, *exec_id;
    const int64_t *limits;   /* TC_LIMIT__COUNT */
    json_t *findings;        /* the pre-screen's, or NULL */
    const char *session_id;  /* a call in a session (api/sessions.c), or NULL */
    const char *tool_policy; /* the tool's definition (tc_approval_tool_digest), or NULL */
};
struct tc_redactor;
json_t *tc_api_execute_event(const struct tc_api_call_ids *ids, const struct tc_redactor *red,
                             json_t *body, const char *decision);
/* A problem's errors from pre-screen findings: {path "code:LINE:COL" | "stdin:..." |
 * "files[N]:...", message, rule, severity}. */
json_t *tc_api_findings_errors(json_t *findings, json_t *body);
enum MHD_Result tc_api_prescreen(struct tc_request *r);
enum MHD_Result tc_api_execution_get(struct tc_request *r);
/* The stored Execution id of the tenant (what GET /v1/executions/{id} answers): 0 and
 * *ret_view, -ENOENT (none of this tenant's), or -EIO. */
int tc_api_execution_load(struct tc_db *db, const char *tenant_id, const char *id,
                          json_t **ret_view);
/* An execution in this status has its outcome (it is not pending_approval, queued, running). */
bool tc_api_execution_terminal(const char *status);
/* GET /v1/executions/{id}/events: its Server-Sent Events (api/stream.c). */
enum MHD_Result tc_api_execution_events(struct tc_request *r);
/* GET /v1/executions/{id}/receipt (api/receipt.c). */
enum MHD_Result tc_api_execution_receipt(struct tc_request *r);
/* GET|PUT /v1/notifications (api/notifications.c): the tenant's reviewer notifications. */
enum MHD_Result tc_api_notifications_get(struct tc_request *r);
enum MHD_Result tc_api_notifications_put(struct tc_request *r);
enum MHD_Result tc_api_executions_list(struct tc_request *r);
/* The execution r->params[0] of the caller's tenant, after waiting up to `wait` seconds (at
 * most 60) for it to finish without holding a thread; 404 for an id that is not one. */
enum MHD_Result tc_api_execution_wait(struct tc_request *r, int64_t wait);
/* Sessions (api/sessions.c): the keeper thread starts before the server serves and stops
 * (ending every session open here, recorded as server_shutdown) before the launcher does. */
int tc_api_sessions_start(struct tc_server *srv);
/* The writer of running calls' output for readers on other replicas (api/stream.h, "shared"):
 * its thread, and srv->follow_asked. Stop it after every stream here has ended. */
int tc_stream_share_start(struct tc_server *srv);
void tc_stream_share_stop(void);
void tc_api_sessions_stop(void);
enum MHD_Result tc_api_session_create(struct tc_request *r);
enum MHD_Result tc_api_sessions_list(struct tc_request *r);
enum MHD_Result tc_api_session_get(struct tc_request *r);
enum MHD_Result tc_api_session_delete(struct tc_request *r);
enum MHD_Result tc_api_session_execute(struct tc_request *r);
/* The same two with the request's body given (stolen): MCP's sessions (api/mcp.c). The
 * execute's session id is r->params[0]. */
enum MHD_Result tc_api_session_create_json(struct tc_request *r, json_t *body);
enum MHD_Result tc_api_session_execute_json(struct tc_request *r, json_t *body,
                                            const struct tc_stream_tap *tap);
/* Whether tool can be opened as a session (the checks of POST /v1/sessions). */
bool tc_api_session_allowed(const struct tc_tool *tool);
/* Ends session id of the tenant if it lives in this process ("deleted"); false otherwise. */
bool tc_api_session_end_here(const char *tenant_id, const char *id);
enum MHD_Result tc_api_session_files_list(struct tc_request *r);
enum MHD_Result tc_api_session_file_put(struct tc_request *r);
enum MHD_Result tc_api_session_file_get(struct tc_request *r);
enum MHD_Result tc_api_session_file_delete(struct tc_request *r);
/* MCP (api/mcp.c): POST /mcp */
enum MHD_Result tc_api_mcp(struct tc_request *r);
enum MHD_Result tc_api_mcp_delete(struct tc_request *r);
/* The JSON Schema of a tool's arguments: code and stdin; full adds files, limits (bounded by
 * the tool's maxima) and collect. */
json_t *tc_api_tool_input_schema(const struct tc_tool *t, bool full);
enum MHD_Result tc_api_tools(struct tc_request *r);
enum MHD_Result tc_api_policy_reload(struct tc_request *r);
enum MHD_Result tc_api_quota_get(struct tc_request *r);
enum MHD_Result tc_api_quota_put(struct tc_request *r);
enum MHD_Result tc_api_healthz(struct tc_request *r);
enum MHD_Result tc_api_readyz(struct tc_request *r);
enum MHD_Result tc_api_openapi(struct tc_request *r);
enum MHD_Result tc_api_metrics(struct tc_request *r);
enum MHD_Result tc_api_approvals_list(struct tc_request *r);
enum MHD_Result tc_api_approval_get(struct tc_request *r);
enum MHD_Result tc_api_approval_approve(struct tc_request *r);
enum MHD_Result tc_api_approval_deny(struct tc_request *r);
enum MHD_Result tc_api_egress_asks_list(struct tc_request *r);
enum MHD_Result tc_api_egress_ask_get(struct tc_request *r);
enum MHD_Result tc_api_egress_ask_decide(struct tc_request *r);
enum MHD_Result tc_api_execution_cancel(struct tc_request *r);
/* Withdraw (held), close (queued) or kill (running) an execution of p's tenant, audited as p:
 * TC_CANCEL_DONE, TC_CANCEL_REQUESTED (execution/cancel.h), -ENOENT, -ESTALE (finished), -EIO. */
int tc_api_cancel(struct tc_server *srv, const struct tc_principal *p, const char *exec_id);
/* "cancel_on_disconnect": if r's client leaves before r's answer is whole (a stream of events:
 * noticed at the next event or heartbeat), exec_id is cancelled as if it had asked. */
void tc_api_cancel_when_gone(struct tc_request *r, const char *exec_id);
/* The answer to a call just held for approval: body (the 202's, stolen) as JSON with its
 * Location, or (events) a "held" event and then the call's events as it is decided and runs
 * (wherever it runs: followed through the database). */
enum MHD_Result tc_api_held_answer(struct tc_request *r, const char *exec_id, json_t *body,
                                   bool events, bool cancel_gone);
enum MHD_Result tc_api_audit_list(struct tc_request *r);
enum MHD_Result tc_api_audit_get(struct tc_request *r);
enum MHD_Result tc_api_audit_export(struct tc_request *r);
enum MHD_Result tc_api_audit_verify(struct tc_request *r);
/* credentials (api/secrets.c, api/credentials.c; POST /v1/audit/hash in api/audit.c) */
enum MHD_Result tc_api_secrets_list(struct tc_request *r);
enum MHD_Result tc_api_secret_get(struct tc_request *r);
enum MHD_Result tc_api_secret_put(struct tc_request *r);
enum MHD_Result tc_api_secret_delete(struct tc_request *r);
enum MHD_Result tc_api_credentials_issue(struct tc_request *r);
enum MHD_Result tc_api_credentials_keys(struct tc_request *r);
enum MHD_Result tc_api_credentials_introspect(struct tc_request *r);
enum MHD_Result tc_api_credentials_revoke(struct tc_request *r);
enum MHD_Result tc_api_audit_hash(struct tc_request *r);
/* Bodies that carry secret values or tokens: parsed without echoing parser messages (they may
 * quote the text), then wiped from the request buffer and the parsed string. */
json_t *tc_api_sensitive_json(struct tc_request *r, enum MHD_Result *ret);
void tc_api_wipe_body(struct tc_request *r);
void tc_api_wipe_json_string(json_t *v);
