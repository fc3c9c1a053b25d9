/* POST /mcp: the Model Context Protocol (Streamable HTTP transport) for agent frameworks that
 * speak MCP rather than HTTP. Stateless: each POST carries one JSON-RPC 2.0 message and gets
 * one application/json answer (no event stream, no Mcp-Session-Id); a bearer API key (role
 * agent or admin) authenticates it like every /v1 route, before any of this runs.
 *
 * Methods: initialize (the version is negotiated), ping, tools/list (the policy's tools, plus
 * toolcage_wait), tools/call. A tool call is POST /v1/execute's own path
 * (tc_api_execute_json): the same validation, pre-screen, approval gate, sandbox, redaction
 * and audit. Its answers are turned into JSON-RPC by a reply filter (server/http.h): an
 * Execution becomes a CallToolResult (text plus structuredContent, isError unless it
 * completed), a bad argument a -32602 error carrying the problem, a call held for a human
 * waits up to TOOLCAGE_MCP_HOLD_SECONDS for the decision and the run (the long-poll of GET
 * /v1/executions/{id}?wait=, no thread held), then answers what it has: the result, the
 * reviewer's reason for a denial, or the execution id to resume with toolcage_wait.
 * Notifications and responses are accepted (202, no body). Requests that carry an Origin
 * header come from a web page and are refused (DNS rebinding): MCP clients send none.
 *
 * Progress: a tools/call with params._meta.progressToken from a client that accepts
 * text/event-stream is answered with an event stream instead: notifications/progress as the
 * program writes (the redacted text as the message; progress counts its bytes), or while a
 * held call waits for its reviewer (every TOOLCAGE_MCP_HOLD_SECONDS / 6 at most 10 s), then
 * the JSON-RPC response. Its events come from the run's own (api/stream.h, a tap). */
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/stream.h"
#include "common/buf.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"
#include "execution/request.h"
#include "policy/policy.h"

/* Newest first: initialize answers the client's version if it is here, else the first. */
static const char *const versions[] = {"2025-11-25", "2025-06-18"};

#define WAIT_TOOL "toolcage_wait"

enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
};

struct mcp_stream;

struct mcp_call {
    json_t *id;                /* the request's id */
    struct mcp_stream *stream; /* progress asked for, until the run or the wait adopts it */
    bool may_hold;             /* a held call waits for its outcome (once) */
    /* 2025-11-25 (SEP-1303): arguments that fail validation are a tool error the model can
     * read and correct (isError), not a protocol error; -32602 before that revision */
    bool argument_errors_as_results;
    char mcp_session[37];            /* Mcp-Session-Id, validated (or empty: a stateless client) */
    json_t *session_call;            /* the call to run once its session is open (opened_reply) */
    const struct tc_stream_tap *tap; /* progress for it, or NULL */
    char replaced[32]; /* the conversation's earlier session of this tool ended so (state lost) */
    struct tc_stream_tap tap_store;
};

static void mcp_stream_free(struct mcp_stream *m);

static void mcp_call_free(void *p)
{
    struct mcp_call *c = p;
    if (c) {
        json_decref(c->id);
        json_decref(c->session_call);
        mcp_stream_free(c->stream);
    }
    free(c);
}

/* ---- JSON-RPC answers (never through the filter) ---- */

static enum MHD_Result send_message(struct tc_request *r, unsigned http_status, json_t *msg)
{
    r->reply_filter = NULL;
    return tc_respond_json_ex(r, http_status, msg, "application/json", NULL, NULL);
}

static enum MHD_Result rpc_result(struct tc_request *r, json_t *id, json_t *result /* stolen */)
{
    return send_message(r, 200,
                        json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* data (stolen) may be NULL. */
static enum MHD_Result rpc_error(struct tc_request *r, unsigned http_status, json_t *id, int code,
                                 const char *message, json_t *data)
{
    json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);
    if (err && data)
        json_object_set_new(err, "data", data);
    else
        json_decref(data);
    return send_message(
        r, http_status,
        json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err));
}

static enum MHD_Result accepted(struct tc_request *r)
{
    r->reply_filter = NULL;
    return tc_respond_text(r, 202, "application/json", "", 0);
}

/* ---- tools ---- */

static json_t *output_schema(void)
{
    return json_pack("{s:s, s:{s:{s:s}, s:{s:s}}, s:[s, s]}", "type", "object", "properties", "id",
                     "type", "string", "status", "type", "string", "required", "id", "status");
}

static json_t *tools_list(struct tc_request *r)
{
    struct tc_policy *p = tc_server_policy(r->srv);
    json_t *tools = json_array();
    for (size_t i = 0; i < tc_policy_ntools(p); i++) {
        const struct tc_tool *t = tc_policy_tool_at(p, i);
        json_array_append_new(tools,
                              json_pack("{s:s, s:s, s:o, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name",
                                        t->name, "description", t->description, "inputSchema",
                                        tc_api_tool_input_schema(t, true), "outputSchema",
                                        output_schema(), "annotations", "title", t->name,
                                        "readOnlyHint", 0, "destructiveHint", t->irreversible,
                                        "idempotentHint", 0, "openWorldHint", !t->network_none));
    }
    tc_policy_unref(p);
    json_array_append_new(
        tools,
        json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:i, s:i, s:i, s:s}}, s:[s],"
                  " s:b}, s:o, s:{s:s, s:b, s:b}}",
                  "name", WAIT_TOOL, "description",
                  "Wait for a call that was held for approval or is still running, and return "
                  "its result (the execution_id comes from that call's answer).",
                  "inputSchema", "type", "object", "properties", "execution_id", "type", "string",
                  "description", "the id of the held or running execution", "timeout_seconds",
                  "type", "integer", "minimum", 0, "maximum", 60, "default", 30, "description",
                  "how long to wait for it to finish", "required", "execution_id",
                  "additionalProperties", 0, "outputSchema", output_schema(), "annotations",
                  "title", "wait for a toolcage execution", "readOnlyHint", 1, "openWorldHint", 0));
    return json_pack("{s:o}", "tools", tools);
}

/* The reviewer's reason for a denial, or NULL. */
static char *denial_reason(struct tc_db *db, const char *tenant_id, const char *approval_id)
{
    if (!approval_id || !db)
        return NULL;
    PGconn *c = tc_db_acquire(db, TC_DB_WAIT_MS);
    if (!c)
        return NULL;
    const char *p[] = {approval_id, tenant_id};
    PGresult *res = tc_db_exec(c,
                               "SELECT d.reason FROM approval_decisions d JOIN approvals a"
                               " ON a.id = d.approval_id WHERE d.approval_id = $1"
                               " AND a.tenant_id = $2 AND d.decision = 'deny'"
                               " ORDER BY d.created_at LIMIT 1",
                               2, p);
    tc_db_release(db, c);
    char *reason = res && PQntuples(res) == 1 ? strdup(PQgetvalue(res, 0, 0)) : NULL;
    PQclear(res);
    return reason;
}

/* Text for the model: what does not fit the buffer's cap is left out (an append that fails
 * changes nothing), the structured result keeps it all. */
static void put(struct tc_buf *b, const char *fmt, ...) TC_PRINTF(2, 3);
static void put(struct tc_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (tc_buf_vappendf(b, fmt, ap) < 0)
        tc_log(TC_LOG_DEBUG, "mcp: text left out of a tool result", NULL);
    va_end(ap);
}

/* Each stream's text for the model is bounded (the structured result keeps all of it); a cut
 * never splits a UTF-8 sequence. */
#define TEXT_STREAM_MAX (256 * 1024)

static void append_stream(struct tc_buf *b, const char *name, json_t *view)
{
    json_t *v = json_object_get(view, name);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (!s || n == 0)
        return;
    char flag[24];
    snprintf(flag, sizeof(flag), "%s_truncated", name);
    bool cut = n > TEXT_STREAM_MAX;
    if (cut) {
        n = TEXT_STREAM_MAX;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    put(b, "\n--- %s%s ---\n%.*s", name,
        json_is_true(json_object_get(view, flag)) || cut ? " (truncated)" : "", (int)n, s);
}

/* An Execution (or a HeldExecution) as a CallToolResult; db and tenant_id look up a denial's
 * reason (NULL: none). */
static json_t *call_result(struct tc_db *db, const char *tenant_id, json_t *view /* stolen */)
{
    const char *id = json_string_value(json_object_get(view, "id"));
    const char *status = json_string_value(json_object_get(view, "status"));
    const char *approval = json_string_value(json_object_get(view, "approval_id"));
    if (!id || !status) {
        json_decref(view);
        return NULL;
    }
    struct tc_buf text;
    tc_buf_init(&text, 2 * TEXT_STREAM_MAX + 64 * 1024);
    bool error;
    if (!strcmp(status, "pending_approval") || !strcmp(status, "queued") ||
        !strcmp(status, "running")) {
        error = false;
        put(&text, "Execution %s is %s", id, status);
        if (approval && !strcmp(status, "pending_approval"))
            put(&text, ": held for a human's approval (approval %s, expires %s)", approval,
                json_string_value(json_object_get(view, "expires_at")) ?: "?");
        put(&text,
            ". Call " WAIT_TOOL " with {\"execution_id\": \"%s\"} to wait for"
            " its result.",
            id);
    } else if (!json_is_true(json_object_get(view, "started")) &&
               (!strcmp(status, "denied") || !strcmp(status, "expired") ||
                !strcmp(status, "cancelled"))) {
        error = true;
        _cleanup_free_ char *why =
            !strcmp(status, "denied") ? denial_reason(db, tenant_id, approval) : NULL;
        put(&text, "Execution %s did not run: %s", id,
            !strcmp(status, "denied")    ? "a reviewer denied it"
            : !strcmp(status, "expired") ? "no reviewer decided in time"
                                         : "it was cancelled");
        if (why) {
            put(&text, ". Reason: %s", why);
            json_object_set_new(view, "denial_reason", json_string(why));
        }
    } else {
        error = strcmp(status, "completed") != 0;
        json_t *code = json_object_get(view, "exit_code");
        put(&text, "status: %s", status);
        if (json_is_integer(code))
            put(&text, ", exit code %lld", (long long)json_integer_value(code));
        const char *killed = json_string_value(json_object_get(view, "killed_reason"));
        const char *err = json_string_value(json_object_get(view, "error"));
        if (killed)
            put(&text, ", killed: %s", killed);
        if (err)
            put(&text, ", error: %s", err);
        append_stream(&text, "stdout", view);
        append_stream(&text, "stderr", view);
    }
    json_t *res = json_pack("{s:[{s:s, s:s%}], s:o, s:b}", "content", "type", "text", "text",
                            text.data ? text.data : "", text.len, "structuredContent", view,
                            "isError", error);
    tc_buf_free(&text);
    return res;
}

/* The findings of a 403 blocked-by-prescreen, for the model to fix its code. */
static json_t *blocked_result(json_t *problem)
{
    struct tc_buf text;
    tc_buf_init(&text, 1024 * 1024);
    put(&text, "The pre-screen blocked this code; nothing ran.");
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(problem, "errors"), i, e)
        put(&text, "\n%s: %s (%s)", json_string_value(json_object_get(e, "path")) ?: "",
            json_string_value(json_object_get(e, "message")) ?: "",
            json_string_value(json_object_get(e, "rule")) ?: "");
    json_t *res = json_pack("{s:[{s:s, s:s%}], s:b}", "content", "type", "text", "text",
                            text.data ? text.data : "", text.len, "isError", 1);
    tc_buf_free(&text);
    return res;
}

/* Arguments the call refused (problem: the problem POST /v1/execute answered, or {errors}). */
static enum MHD_Result invalid_arguments(struct tc_request *r, struct mcp_call *call,
                                         const char *message, json_t *problem /* stolen */)
{
    if (!call->argument_errors_as_results)
        return rpc_error(r, 200, call->id, RPC_INVALID_PARAMS, message, problem);
    struct tc_buf text;
    tc_buf_init(&text, 256 * 1024);
    put(&text, "Invalid arguments: %s", message);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(problem, "errors"), i, e)
        put(&text, "\n%s: %s", json_string_value(json_object_get(e, "path")) ?: "",
            json_string_value(json_object_get(e, "message")) ?: "");
    json_t *res = json_pack("{s:[{s:s, s:s%}], s:b}", "content", "type", "text", "text",
                            text.data ? text.data : "", text.len, "isError", 1);
    tc_buf_free(&text);
    json_decref(problem);
    return res ? rpc_result(r, call->id, res) : MHD_NO;
}

/* ---- progress: the answer as an event stream ---- */

struct mcp_stream {
    struct tc_events *e;
    json_t *rpc_id, *token;
    double progress;           /* what notifications/progress counts: output bytes, or waits */
    struct mcp_stream **owner; /* the call's pointer to us, cleared when adopted */
    /* following a held call (the events thread) */
    struct tc_db *db;
    char tenant[40], exec_id[40];
    int64_t until_ms, next_ms, note_ms, note_every_ms;
};

static void mcp_stream_free(struct mcp_stream *m)
{
    if (!m)
        return;
    if (m->e) {
        tc_events_close(m->e);
        tc_events_unref(m->e);
    }
    json_decref(m->rpc_id);
    json_decref(m->token);
    free(m);
}

static void mcp_push(struct mcp_stream *m, json_t *msg /* stolen */, bool force)
{
    if (msg)
        (void)tc_events_push(m->e, "message", NULL, msg, force);
    json_decref(msg);
}

static void mcp_progress(struct mcp_stream *m, double add, const char *message, size_t len)
{
    m->progress += add;
    mcp_push(m,
             json_pack("{s:s, s:s, s:{s:O, s:f, s:s%}}", "jsonrpc", "2.0", "method",
                       "notifications/progress", "params", "progressToken", m->token, "progress",
                       m->progress, "message", message, len),
             false);
}

/* The JSON-RPC response, last. */
static void mcp_end(struct mcp_stream *m, json_t *result /* stolen, or NULL */, json_t *problem)
{
    json_t *msg;
    if (result)
        msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", m->rpc_id, "result", result);
    else
        msg = json_pack("{s:s, s:O, s:{s:i, s:s, s:O?}}", "jsonrpc", "2.0", "id", m->rpc_id,
                        "error", "code", RPC_INTERNAL_ERROR, "message",
                        json_string_value(json_object_get(problem, "detail")) ?: "error", "data",
                        problem);
    mcp_push(m, msg, true);
    tc_events_close(m->e);
}

/* The run's events (api/stream.h), on the launcher's and the recorder's threads. */
static void tap_event(void *ud, const char *event, json_t *data)
{
    struct mcp_stream *m = ud;
    if (!event) {
        mcp_stream_free(m);
    } else if (!strcmp(event, "stdout") || !strcmp(event, "stderr")) {
        json_t *t = json_object_get(data, "text");
        mcp_progress(m, (double)json_string_length(t), json_string_value(t) ?: "",
                     json_string_length(t));
    } else if (!strcmp(event, "result")) {
        mcp_end(m, call_result(NULL, NULL, json_incref(data)), NULL);
    } else if (!strcmp(event, "error")) {
        mcp_end(m, NULL, data);
    }
}

static enum MHD_Result stream_answer(struct tc_request *r, struct mcp_stream *m)
{
    *m->owner = NULL; /* ours no more: the run's (or the wait's) */
    r->reply_filter = NULL;
    struct MHD_Response *resp = tc_events_response(m->e, r->conn, NULL);
    return resp ? tc_http_queue(r, 200, resp) : MHD_NO;
}

static enum MHD_Result tap_answer(void *ud, struct tc_request *r)
{
    return stream_answer(r, ud);
}

/* A held call, followed in the database until it has its outcome or the bound passes. */
static bool held_poll(struct tc_events *e, void *ud)
{
    struct mcp_stream *m = ud;
    (void)e;
    int64_t now = tc_now_ms();
    if (now < m->next_ms)
        return false;
    m->next_ms = now + 1000;
    json_t *view = NULL;
    int rc = tc_api_execution_load(m->db, m->tenant, m->exec_id, &view);
    if (rc == -ENOENT) {
        mcp_end(m, NULL, NULL);
        return true;
    }
    const char *status = rc == 0 ? json_string_value(json_object_get(view, "status")) : NULL;
    if ((status && tc_api_execution_terminal(status)) || now >= m->until_ms) {
        json_t *res = view ? call_result(m->db, m->tenant, TC_STEAL(view)) : NULL;
        if (res)
            mcp_end(m, res, NULL);
        else {
            json_t *problem =
                json_pack("{s:s}", "detail", "the execution could not be read; call " WAIT_TOOL);
            mcp_end(m, NULL, problem);
            json_decref(problem);
        }
        json_decref(view);
        return true;
    }
    if (now >= m->note_ms) {
        m->note_ms = now + m->note_every_ms;
        char msg[160];
        snprintf(msg, sizeof(msg), "execution %s: %s", m->exec_id,
                 status && !strcmp(status, "pending_approval") ? "waiting for a reviewer's decision"
                 : status                                      ? status
                                                               : "waiting");
        mcp_progress(m, 1, msg, strlen(msg));
    }
    json_decref(view);
    return false;
}

static void held_done(void *ud)
{
    mcp_stream_free(ud);
}

/* The reply filter of tools/call: POST /v1/execute's and GET /v1/executions/{id}'s answers
 * as JSON-RPC. */
static enum MHD_Result tool_reply(struct tc_request *r, unsigned status, json_t *body,
                                  const char *content_type)
{
    struct mcp_call *call = r->reply_ctx;
    json_t *id = json_incref(call->id);
    enum MHD_Result ret;
    if (content_type && strncmp(content_type, "application/problem+json", 24) == 0) {
        const char *type = json_string_value(json_object_get(body, "type")) ?: "";
        const char *detail = json_string_value(json_object_get(body, "detail")) ?: "error";
        if (status == 403 && strstr(type, ":blocked-by-prescreen"))
            ret = rpc_result(r, id, blocked_result(body));
        else if (status == 404 && strstr(type, ":unknown-tool")) /* a protocol error always */
            ret = rpc_error(r, 200, id, RPC_INVALID_PARAMS, detail, json_incref(body));
        else if (status == 400 || status == 404 || status == 422)
            ret = invalid_arguments(r, call, detail, json_incref(body));
        else if (status == 409 || status == 429 || status == 507) /* a session's state, a quota */
            ret = rpc_result(r, id,
                             json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                                       detail, "isError", 1));
        else
            ret = rpc_error(r, 200, id, RPC_INTERNAL_ERROR, detail, json_incref(body));
        json_decref(body);
    } else if (status == 202 && call->may_hold && r->srv->cfg->mcp_hold_seconds > 0 &&
               call->stream && json_is_string(json_object_get(body, "id"))) {
        /* Held, progress asked for: the answer is an event stream that says it waits. */
        struct mcp_stream *m = call->stream;
        call->may_hold = false;
        m->db = r->srv->db;
        snprintf(m->tenant, sizeof(m->tenant), "%s", r->principal.tenant_id);
        snprintf(m->exec_id, sizeof(m->exec_id), "%s",
                 json_string_value(json_object_get(body, "id")));
        int64_t now = tc_now_ms(), hold = r->srv->cfg->mcp_hold_seconds * 1000;
        m->until_ms = now + hold;
        m->next_ms = now + 250;
        m->note_every_ms = hold / 6 < 10000 ? (hold / 6 > 1000 ? hold / 6 : 1000) : 10000;
        m->note_ms = now + m->note_every_ms;
        char msg[256];
        snprintf(msg, sizeof(msg), "execution %s is held for a reviewer's approval (approval %s)",
                 m->exec_id, json_string_value(json_object_get(body, "approval_id")) ?: "?");
        mcp_progress(m, 1, msg, strlen(msg));
        json_decref(body);
        /* Answered first (the response holds its own reference on the log), then handed to the
         * watch, which may end and free m at once. */
        struct tc_events *e = m->e;
        tc_events_ref(e);
        ret = stream_answer(r, m);
        if (tc_events_watch(e, held_poll, held_done, m) < 0) {
            json_t *problem = json_pack("{s:s}", "detail", "the server is shutting down");
            mcp_end(m, NULL, problem);
            json_decref(problem);
            mcp_stream_free(m);
        }
        tc_events_unref(e);
    } else if (status == 202 && call->may_hold && r->srv->cfg->mcp_hold_seconds > 0 &&
               json_is_string(json_object_get(body, "id"))) {
        /* Held: wait for the decision and the run like GET /v1/executions/{id}?wait= (this
         * filter then sees its 200). */
        call->may_hold = false;
        free(r->params[0]);
        r->params[0] = strdup(json_string_value(json_object_get(body, "id")));
        json_decref(body);
        ret = r->params[0] ? tc_api_execution_wait(r, r->srv->cfg->mcp_hold_seconds)
                           : rpc_error(r, 200, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
    } else if (status == 200 || status == 202) {
        json_t *result = call_result(r->srv->db, r->principal.tenant_id, body);
        json_t *text =
            json_object_get(json_array_get(json_object_get(result, "content"), 0), "text");
        if (call->replaced[0] && json_is_string(text)) { /* the model must know its state is gone */
            char *note = NULL;
            if (asprintf(&note,
                         "Note: this ran in a new session: the conversation's earlier one ended "
                         "(%s), so its variables and files are gone.\n%s",
                         call->replaced, json_string_value(text)) >= 0) {
                json_string_set(text, note);
                free(note);
            }
        }
        ret = result ? rpc_result(r, id, result)
                     : rpc_error(r, 200, id, RPC_INTERNAL_ERROR, "no execution to report", NULL);
    } else {
        json_decref(body);
        ret = rpc_error(r, 200, id, RPC_INTERNAL_ERROR, "unexpected answer", NULL);
    }
    json_decref(id);
    return ret;
}

static bool only_keys(json_t *o, const char *const *allowed, json_t *errors, const char *where)
{
    const char *key;
    json_t *v;
    bool ok = true;
    json_object_foreach(o, key, v)
    {
        bool known = false;
        for (const char *const *a = allowed; *a; a++)
            known |= strcmp(key, *a) == 0;
        if (!known) {
            json_array_append_new(errors, json_pack("{s:s+, s:s}", "path", where, key, "message",
                                                    "unknown argument"));
            ok = false;
        }
    }
    return ok;
}

/* ---- MCP sessions (Mcp-Session-Id): a conversation's state ----
 * initialize gives the client an Mcp-Session-Id (a row of mcp_sessions, bound to the API key
 * that made it; it lapses after MCP_SESSION_IDLE without use, or with DELETE /mcp). A
 * tools/call that carries it and names a tool that may be opened as a session (api/sessions.c)
 * runs in that tool's session for this conversation, opened on its first call (with that
 * call's limits) and again if it ended: variables, imports and files persist between the
 * model's calls. A call that asks for `collect`, or for limits other than timeout_ms once the
 * session is open, runs in a fresh sandbox of its own, as without a session. */

#define MCP_SESSION_IDLE "24 hours"

static void random_uuid(char out[37])
{
    unsigned char b[16];
    randombytes_buf(b, sizeof(b));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* One statement of the MCP session tables: its result (NULL on failure). */
static PGresult *mcp_sql(struct tc_request *r, const char *sql, int n, const char *const *p)
{
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    PGresult *res = c ? tc_db_exec(c, sql, n, p) : NULL;
    tc_db_release(r->srv->db, c);
    return res;
}

/* 0 (valid: its use is noted), -ENOENT (unknown, another key's, ended or lapsed), -EIO. */
static int mcp_session_touch(struct tc_request *r, const char *id)
{
    if (!tc_uuid_valid(id))
        return -ENOENT;
    const char *p[] = {id, r->principal.tenant_id, r->principal.key_id};
    PGresult *res =
        mcp_sql(r,
                "UPDATE mcp_sessions SET last_used_at = now() WHERE id = $1"
                " AND tenant_id = $2 AND api_key_id = $3 AND ended_at IS NULL"
                " AND last_used_at > now() - interval '" MCP_SESSION_IDLE "' RETURNING 1",
                3, p);
    int rc = !res ? -EIO : PQntuples(res) == 1 ? 0 : -ENOENT;
    PQclear(res);
    return rc;
}

/* The tool's open session in this conversation, into sid (empty: none; then, in replaced, why
 * the one it had ended, if it had one). 0 or -EIO. */
static int mcp_bound(struct tc_request *r, const char *mcp_id, const char *tool, char sid[37],
                     char replaced[32])
{
    const char *p[] = {mcp_id, tool};
    PGresult *res = mcp_sql(r,
                            "SELECT m.session_id, s.status, coalesce(s.ended_reason, '')"
                            " FROM mcp_session_tools m JOIN sessions s ON s.id = m.session_id"
                            " WHERE m.mcp_session_id = $1 AND m.tool = $2",
                            2, p);
    sid[0] = replaced[0] = '\0';
    if (res && PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 1), "active") == 0)
        snprintf(sid, 37, "%s", PQgetvalue(res, 0, 0));
    else if (res && PQntuples(res) == 1)
        snprintf(replaced, 32, "%s", PQgetvalue(res, 0, 2));
    int rc = res ? 0 : -EIO;
    PQclear(res);
    return rc;
}

/* Runs call->session_call in session sid; the answer goes through tool_reply. */
static enum MHD_Result run_in_session(struct tc_request *r, struct mcp_call *call, const char *sid)
{
    free(r->params[0]);
    r->params[0] = strdup(sid);
    json_t *body = TC_STEAL(call->session_call);
    r->reply_filter = tool_reply;
    if (!r->params[0]) {
        json_decref(body);
        return rpc_error(r, 200, call->id, RPC_INTERNAL_ERROR, "out of memory", NULL);
    }
    return tc_api_session_execute_json(r, body, call->tap);
}

/* The reply filter of the session's opening (POST /v1/sessions's answer): bound to the
 * conversation, then the call runs in it; a refusal is the call's answer. */
static enum MHD_Result opened_reply(struct tc_request *r, unsigned status, json_t *body,
                                    const char *content_type)
{
    struct mcp_call *call = r->reply_ctx;
    r->reply_filter = tool_reply;
    if (status != 201)
        return tool_reply(r, status, body, content_type);
    const char *sid = json_string_value(json_object_get(body, "id"));
    const char *tool = json_string_value(json_object_get(body, "tool"));
    const char *p[] = {call->mcp_session, tool, sid};
    PGresult *res = sid && tool ? mcp_sql(r,
                                          "INSERT INTO mcp_session_tools (mcp_session_id, tool,"
                                          " session_id) VALUES ($1, $2, $3)"
                                          " ON CONFLICT (mcp_session_id, tool)"
                                          " DO UPDATE SET session_id = EXCLUDED.session_id",
                                          3, p)
                                : NULL;
    char id[37];
    snprintf(id, sizeof(id), "%s", sid ? sid : "");
    json_decref(body);
    if (!res) { /* not bound: nobody would end it with the conversation */
        tc_api_session_end_here(r->principal.tenant_id, id);
        return rpc_error(r, 200, call->id, RPC_INTERNAL_ERROR,
                         "the conversation's session could not be recorded", NULL);
    }
    PQclear(res);
    return run_in_session(r, call, id);
}

/* tools/call of a session tool in a conversation with an Mcp-Session-Id: MHD_NO in *handled
 * == false when the call is not a session's (it runs as a one-shot call). */
static enum MHD_Result session_call(struct tc_request *r, struct mcp_call *call,
                                    const struct tc_tool *tool, json_t *args, bool *handled)
{
    json_t *limits = json_object_get(args, "limits");
    *handled = false;
    if (json_object_get(args, "collect"))
        return MHD_NO; /* what it collects is a one-shot run's */
    /* Arguments that cannot run: the one-shot path answers them, with nothing opened */
    json_t *code = json_object_get(args, "code"), *in = json_object_get(args, "stdin");
    json_t *errors = json_array();
    tc_exec_check_files(json_object_get(args, "files"), errors);
    bool bad = !errors || json_array_size(errors) > 0 || !json_is_string(code) ||
               json_string_length(code) > TC_EXEC_MAX_CODE_BYTES ||
               (in && (!json_is_string(in) || json_string_length(in) > TC_EXEC_MAX_STDIN_BYTES)) ||
               (limits && !json_is_object(limits));
    json_decref(errors);
    if (bad)
        return MHD_NO;
    char sid[37];
    if (mcp_bound(r, call->mcp_session, tool->name, sid, call->replaced) < 0) {
        *handled = true;
        return rpc_error(r, 200, call->id, RPC_INTERNAL_ERROR, "the database is not reachable",
                         NULL);
    }
    const char *k;
    json_t *v;
    if (sid[0] && json_is_object(limits))
        json_object_foreach(limits, k, v) if (strcmp(k, "timeout_ms") != 0) return MHD_NO;
    json_t *exec = json_object();
    static const char *const keys[] = {"code", "stdin", "files"};
    for (size_t i = 0; exec && i < TC_ARRAY_SIZE(keys); i++)
        if (json_object_get(args, keys[i]))
            json_object_set(exec, keys[i], json_object_get(args, keys[i]));
    json_t *timeout = json_object_get(limits, "timeout_ms");
    if (exec && timeout)
        json_object_set(exec, "timeout_ms", timeout);
    *handled = true;
    if (!exec)
        return MHD_NO;
    json_decref(call->session_call);
    call->session_call = exec;
    if (sid[0])
        return run_in_session(r, call, sid);
    json_t *open = json_pack("{s:s}", "tool", tool->name);
    if (open && json_is_object(limits))
        json_object_set(open, "limits", limits);
    if (!open)
        return MHD_NO;
    r->reply_filter = opened_reply;
    return tc_api_session_create_json(r, open);
}

static enum MHD_Result tools_call(struct tc_request *r, struct mcp_call *call, json_t *params)
{
    json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");
    if (!json_is_string(name))
        return rpc_error(r, 200, call->id, RPC_INVALID_PARAMS, "params.name must be a string",
                         NULL);
    if (args && !json_is_object(args))
        return rpc_error(r, 200, call->id, RPC_INVALID_PARAMS, "params.arguments must be an object",
                         NULL);
    json_t *errors = json_array();
    r->reply_filter = tool_reply;
    if (strcmp(json_string_value(name), WAIT_TOOL) == 0) {
        static const char *const allowed[] = {"execution_id", "timeout_seconds", NULL};
        json_t *eid = json_object_get(args, "execution_id");
        json_t *secs = json_object_get(args, "timeout_seconds");
        only_keys(args, allowed, errors, "arguments.");
        if (!json_is_string(eid) || !tc_uuid_valid(json_string_value(eid)))
            json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "arguments.execution_id",
                                                    "message", "must be an execution id"));
        if (secs && (!json_is_integer(secs) || json_integer_value(secs) < 0 ||
                     json_integer_value(secs) > 60))
            json_array_append_new(errors,
                                  json_pack("{s:s, s:s}", "path", "arguments.timeout_seconds",
                                            "message", "must be an integer from 0 to 60"));
        if (json_array_size(errors) > 0)
            return invalid_arguments(r, call, "invalid arguments",
                                     json_pack("{s:o}", "errors", errors));
        json_decref(errors);
        r->params[0] = strdup(json_string_value(eid));
        if (!r->params[0])
            return MHD_NO;
        return tc_api_execution_wait(r, secs ? json_integer_value(secs) : 30);
    }
    static const char *const allowed[] = {"code", "stdin", "files", "limits", "collect", NULL};
    if (!only_keys(args, allowed, errors, "arguments."))
        return invalid_arguments(r, call, "invalid arguments",
                                 json_pack("{s:o}", "errors", errors));
    json_decref(errors);
    json_t *body = args ? json_deep_copy(args) : json_object();
    if (!body || json_object_set(body, "tool", name) < 0) {
        json_decref(body);
        return MHD_NO;
    }
    call->may_hold = true;
    /* Progress asked for (params._meta.progressToken) by a client that takes an event stream. */
    json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if ((json_is_string(token) || json_is_integer(token)) && tc_stream_wanted(r)) {
        struct mcp_stream *m = calloc(1, sizeof(*m));
        if (m && tc_events_new("mcp", 32u << 20, false, &m->e) == 0) {
            m->rpc_id = json_incref(call->id);
            m->token = json_incref(token);
            m->owner = &call->stream;
            call->stream = m;
        } else {
            free(m); /* no stream: the JSON answer */
        }
    }
    struct tc_stream_tap tap = {.event = tap_event, .answer = tap_answer, .ud = call->stream};
    if (call->mcp_session[0]) {
        struct tc_policy *p = tc_server_policy(r->srv);
        const struct tc_tool *t = tc_policy_tool(p, json_string_value(name));
        bool handled = false;
        enum MHD_Result sret = MHD_NO;
        if (t && tc_api_session_allowed(t)) {
            call->tap_store = tap;
            call->tap = call->stream ? &call->tap_store : NULL;
            sret = session_call(r, call, t, args, &handled);
        }
        tc_policy_unref(p);
        if (handled) {
            json_decref(body);
            return sret;
        }
        r->reply_filter = tool_reply;
    }
    return tc_api_execute_json(
        r, body, &(struct tc_execute_opts){.tap = call->stream ? &tap : NULL, .retry = tc_api_mcp});
}

/* ---- the message ---- */

static bool id_ok(json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

static enum MHD_Result initialize(struct tc_request *r, json_t *id, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    if (!want)
        return rpc_error(r, 200, id, RPC_INVALID_PARAMS, "params.protocolVersion must be a string",
                         NULL);
    const char *v = versions[0];
    for (size_t i = 0; i < TC_ARRAY_SIZE(versions); i++)
        if (strcmp(want, versions[i]) == 0)
            v = versions[i];
    /* The conversation's id (see "MCP sessions"); without the database, none: stateless. */
    char sid[37];
    random_uuid(sid);
    const char *p[] = {sid, r->principal.tenant_id, r->principal.key_id};
    PGresult *res = mcp_sql(r,
                            "INSERT INTO mcp_sessions (id, tenant_id, api_key_id)"
                            " VALUES ($1, $2, $3)",
                            3, p);
    if (!res) {
        tc_log(TC_LOG_WARN, "mcp: no session for this client (it works stateless)", NULL);
        sid[0] = '\0';
    }
    PQclear(res);
    json_t *result = json_pack(
        "{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", v, "capabilities", "tools",
        "listChanged", 0, "serverInfo", "name", "toolcage", "title", "toolcage sandbox", "version",
        TOOLCAGE_VERSION, "instructions",
        "Each tool runs code in an isolated sandbox under its policy and returns the redacted"
        " output. Tools that allow it keep their interpreter or shell, variables and files"
        " between the calls of this conversation (Mcp-Session-Id); the others start fresh each"
        " call. Calls to tools that need a human's approval wait for it; if they are still"
        " waiting, call " WAIT_TOOL " with the execution id.");
    r->reply_filter = NULL;
    return tc_respond_json_ex(
        r, 200, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result),
        "application/json", sid[0] ? "Mcp-Session-Id" : NULL, sid);
}

static bool version_supported(const char *v)
{
    for (size_t i = 0; i < TC_ARRAY_SIZE(versions); i++)
        if (strcmp(v, versions[i]) == 0)
            return true;
    /* the version a client assumes before negotiating (Streamable HTTP, 2025-03-26) */
    return strcmp(v, "2025-03-26") == 0;
}

enum MHD_Result tc_api_mcp(struct tc_request *r)
{
    if (MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin"))
        return rpc_error(r, 403, NULL, RPC_INVALID_REQUEST,
                         "requests from web pages (with an Origin header) are not accepted", NULL);
    const char *pv = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "MCP-Protocol-Version");
    if (pv && !version_supported(pv))
        return rpc_error(r, 400, NULL, RPC_INVALID_REQUEST,
                         "unsupported MCP-Protocol-Version (supported: 2025-11-25, 2025-06-18)",
                         NULL);
    json_error_t jerr;
    json_t *msg = r->body.len ? json_loadb(r->body.data, r->body.len,
                                           JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr)
                              : NULL;
    if (!msg) /* the parser's text may quote the body: only where it failed */
        return rpc_error(
            r, 400, NULL, RPC_PARSE_ERROR, "Parse error",
            r->body.len ? json_pack("{s:i, s:i}", "line", jerr.line, "column", jerr.column) : NULL);
    enum MHD_Result ret;
    json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
    json_t *params = json_object_get(msg, "params");
    /* A conversation's id: known, this key's, live (initialize makes a new one). */
    const char *msid = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Mcp-Session-Id");
    bool initializing =
        json_is_string(method) && strcmp(json_string_value(method), "initialize") == 0;
    if (msid && !initializing) {
        int trc = mcp_session_touch(r, msid);
        if (trc == -EIO) {
            json_decref(msg);
            return tc_respond_db_down(r);
        }
        if (trc < 0) {
            ret = rpc_error(r, 404, id_ok(id) ? id : NULL, RPC_INVALID_REQUEST,
                            "unknown or ended Mcp-Session-Id: initialize a new session", NULL);
            json_decref(msg);
            return ret;
        }
    }
    if (json_is_array(msg)) {
        ret = rpc_error(r, 400, NULL, RPC_INVALID_REQUEST,
                        "batches are not supported: send one message per request", NULL);
    } else if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "jsonrpc")) ||
               strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0 ||
               (id && !id_ok(id))) {
        ret = rpc_error(r, 400, id_ok(id) ? id : NULL, RPC_INVALID_REQUEST,
                        "not a JSON-RPC 2.0 message", NULL);
    } else if (!method && id && (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
        ret = accepted(r); /* a response: we send no requests, so nothing waits for it */
    } else if (!json_is_string(method)) {
        ret = rpc_error(r, 400, id, RPC_INVALID_REQUEST, "method must be a string", NULL);
    } else if (!id) {
        ret = accepted(r); /* a notification (initialized, cancelled, ...) */
    } else if (params && !json_is_object(params)) {
        ret = rpc_error(r, 200, id, RPC_INVALID_PARAMS, "params must be an object", NULL);
    } else {
        const char *m = json_string_value(method);
        if (strcmp(m, "initialize") == 0) {
            ret = initialize(r, id, params);
        } else if (strcmp(m, "ping") == 0) {
            ret = rpc_result(r, id, json_object());
        } else if (strcmp(m, "tools/list") == 0) {
            ret = rpc_result(r, id, tools_list(r));
        } else if (strcmp(m, "tools/call") == 0) {
            struct mcp_call *call = calloc(1, sizeof(*call));
            if (!call) {
                ret = MHD_NO;
            } else {
                call->id = json_incref(id);
                call->argument_errors_as_results = pv && strcmp(pv, "2025-11-25") == 0;
                if (msid)
                    snprintf(call->mcp_session, sizeof(call->mcp_session), "%s", msid);
                if (r->reply_ctx && r->reply_ctx_free) /* run again after a wait for a slot */
                    r->reply_ctx_free(r->reply_ctx);
                r->reply_ctx = call;
                r->reply_ctx_free = mcp_call_free;
                ret = tools_call(r, call, params);
            }
        } else {
            ret = rpc_error(r, 200, id, RPC_METHOD_NOT_FOUND, "Method not found", NULL);
        }
    }
    json_decref(msg);
    return ret;
}

/* DELETE /mcp with Mcp-Session-Id: the conversation ends, and with it the sessions bound to
 * it that live in this process (one on another replica ends when it is idle). */
enum MHD_Result tc_api_mcp_delete(struct tc_request *r)
{
    const char *msid = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Mcp-Session-Id");
    if (!msid)
        return tc_respond_problem(r, 400, "validation", "Invalid request",
                                  json_pack("[{s:s, s:s}]", "path", "Mcp-Session-Id", "message",
                                            "required: the session to end"),
                                  "the Mcp-Session-Id header names the session to end");
    const char *p[] = {tc_uuid_valid(msid) ? msid : "00000000-0000-0000-0000-000000000000",
                       r->principal.tenant_id, r->principal.key_id};
    PGresult *res = mcp_sql(r,
                            "UPDATE mcp_sessions SET ended_at = now() WHERE id = $1"
                            " AND tenant_id = $2 AND api_key_id = $3 AND ended_at IS NULL"
                            " RETURNING (SELECT coalesce(json_agg(session_id), '[]')::text"
                            " FROM mcp_session_tools WHERE mcp_session_id = $1)",
                            3, p);
    if (!res)
        return tc_respond_db_down(r);
    if (PQntuples(res) != 1) {
        PQclear(res);
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL,
                                  "no live MCP session with this id belongs to your key");
    }
    json_t *ids = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
    PQclear(res);
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
        tc_api_session_end_here(r->principal.tenant_id, json_string_value(v) ?: "");
    json_decref(ids);
    return tc_respond_text(r, 204, "application/json", "", 0);
}
