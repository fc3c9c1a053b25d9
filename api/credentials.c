/* Scoped tokens: POST /v1/credentials (agent, admin), GET /v1/credentials/keys (public),
 * POST /v1/credentials/introspect (any role), POST /v1/credentials/{id}/revoke (admin, or the
 * key that asked for the token). See broker/token.h and docs/credentials.md. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "server/auth.h"
#include "approval/approval.h"
#include "audit/audit.h"
#include "broker/token.h"
#include "common/util.h"
#include "policy/policy.h"
#include "core/db.h"
#include "core/log.h"

static json_t *only_fields(json_t *body, const char *const *allowed)
{
    json_t *errors = json_array();
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcmp(key, *a) == 0;
        if (!ok) {
            char path[80];
            snprintf(path, sizeof(path), "%.64s", key);
            json_array_append_new(
                errors, json_pack("{s:s, s:s}", "path", path, "message", "unknown field"));
        }
    }
    return errors;
}

static void add_error(json_t *errors, const char *path, const char *message)
{
    json_array_append_new(errors, json_pack("{s:s, s:s}", "path", path, "message", message));
}

static bool bounded_string(json_t *v, size_t max)
{
    return json_is_string(v) && json_string_length(v) >= 1 && json_string_length(v) <= max &&
           strlen(json_string_value(v)) == json_string_length(v);
}

/* The tool's token grant for this audience, or NULL. */
static json_t *token_grant(const struct tc_tool *tool, const char *audience)
{
    size_t i;
    json_t *cred;
    json_array_foreach(json_object_get(tool->raw, "credentials"), i, cred)
    {
        json_t *tok = json_object_get(cred, "token");
        const char *aud = json_string_value(json_object_get(tok, "audience"));
        if (aud && strcmp(aud, audience) == 0)
            return tok;
    }
    return NULL;
}

/* A tool whose calls can be held for a human: a token of its own would let the agent reach
 * the downstream service with no human in the loop. Its tokens exist only inside an approved
 * execution (issued by the broker when that execution starts). The attempt is audited. */
static enum MHD_Result refuse_held(struct tc_request *r, const struct tc_tool *tool,
                                   const char *audience, json_t *reasons)
{
    json_t *ev = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:O}", "action",
                           "credential.token.refused", "status", "refused", "tenant_id",
                           r->principal.tenant_id, "actor", tc_auth_actor(&r->principal), "tool",
                           tool->name, "audience", audience, "reasons", reasons);
    PGconn *c = ev ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    if (!c || tc_audit_append(c, r->srv->keys, ev, NULL) < 0)
        tc_log(TC_LOG_ERROR, "a refused token request could not be audited", "{s:s}", "request_id",
               r->request_id);
    tc_db_release(r->srv->db, c);
    json_decref(ev);
    char why[256] = "";
    size_t i, o = 0;
    json_t *e;
    json_array_foreach(reasons, i, e) if (o < sizeof(why)) o +=
        (size_t)snprintf(why + o, sizeof(why) - o, "%s%s", i ? ", " : "", json_string_value(e));
    tc_log(TC_LOG_WARN, "token refused: the tool's calls are held for approval", "{s:s, s:s}",
           "request_id", r->request_id, "tool", tool->name);
    return tc_respond_problem(r, 403, "approval-required", "Approval required",
                              json_pack("[{s:s, s:s}]", "path", "tool", "message",
                                        "calls of this tool are held for a human reviewer"),
                              "calls of tool '%s' can be held for approval (%s): its tokens are"
                              " issued only to an approved execution (POST /v1/execute), never"
                              " directly",
                              tool->name, why);
}

enum MHD_Result tc_api_credentials_issue(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    if (!body)
        return ret;
    json_t *errors =
        only_fields(body, (const char *const[]){"tool", "audience", "scope", "ttl_seconds", NULL});
    json_t *tool_j = json_object_get(body, "tool"), *aud = json_object_get(body, "audience");
    json_t *scope = json_object_get(body, "scope"), *ttl = json_object_get(body, "ttl_seconds");
    if (!bounded_string(tool_j, 64))
        add_error(errors, "tool", "is required: a tool name");
    if (!bounded_string(aud, 128))
        add_error(errors, "audience", "is required: a string of at most 128 bytes");
    if (scope && !bounded_string(scope, 1024))
        add_error(errors, "scope", "must be a string of 1 to 1024 bytes");
    if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 1))
        add_error(errors, "ttl_seconds", "must be a positive integer");
    if (json_array_size(errors) > 0) {
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(errors);
    struct tc_policy *policy = tc_server_policy(r->srv);
    const struct tc_tool *tool = tc_policy_tool(policy, json_string_value(tool_j));
    json_t *grant = tool ? token_grant(tool, json_string_value(aud)) : NULL;
    int64_t max_ttl = json_integer_value(json_object_get(grant, "ttl_seconds"));
    const char *grant_scope = json_string_value(json_object_get(grant, "scope"));
    json_t *held = NULL;
    if (!tool) {
        ret = tc_respond_problem(r, 404, "unknown-tool", "Unknown tool", NULL,
                                 "no tool named '%.64s' is declared in the policy",
                                 json_string_value(tool_j));
    } else if (!grant) {
        ret = tc_respond_problem(r, 422, "credential-unavailable", "Credential unavailable", NULL,
                                 "the policy of tool '%s' grants no token for this audience",
                                 tool->name);
    } else if (tc_approval_may_hold(tool, &held)) {
        ret = refuse_held(r, tool, json_string_value(aud), held);
    } else if (scope && strcmp(json_string_value(scope), grant_scope) != 0) {
        ret = tc_respond_problem(r, 422, "credential-unavailable", "Credential unavailable",
                                 json_pack("[{s:s, s:s}]", "path", "scope", "message",
                                           "must equal the scope the policy grants"),
                                 "the policy of tool '%s' grants another scope for this audience",
                                 tool->name);
    } else if (ttl && json_integer_value(ttl) > max_ttl) {
        ret = tc_respond_problem(r, 422, "limit-exceeds-policy", "Limit exceeds policy",
                                 json_pack("[{s:s, s:s}]", "path", "ttl_seconds", "message",
                                           "is above the policy's ttl_seconds"),
                                 "ttl_seconds %lld is above the %lld seconds the policy allows",
                                 (long long)json_integer_value(ttl), (long long)max_ttl);
    } else {
        struct tc_token_request req = {.tenant_id = r->principal.tenant_id,
                                       .tool = tool->name,
                                       .execution_id = NULL,
                                       .audience = json_string_value(aud),
                                       .scope = grant_scope,
                                       .ttl_seconds = ttl ? json_integer_value(ttl) : max_ttl,
                                       .issuer_key_id = r->principal.key_id};
        json_t *actor = tc_auth_actor(&r->principal), *info = NULL;
        char *token = NULL;
        PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
        int rc = c ? tc_token_issue(c, r->srv->keys, &req, actor, &token, &info) : -EIO;
        tc_db_release(r->srv->db, c);
        json_decref(actor);
        if (rc < 0) {
            ret = tc_respond_db_down(r);
        } else {
            tc_log(TC_LOG_INFO, "token issued", "{s:s, s:O, s:s, s:O}", "request_id", r->request_id,
                   "token_id", json_object_get(info, "token_id"), "tool", tool->name, "expires_at",
                   json_object_get(info, "expires_at"));
            json_object_set_new(info, "token", json_string(token));
            sodium_memzero(token, strlen(token));
            free(token);
            ret = tc_respond_json(r, 201, info);
        }
    }
    json_decref(held);
    tc_policy_unref(policy);
    json_decref(body);
    return ret;
}

enum MHD_Result tc_api_credentials_keys(struct tc_request *r)
{
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    json_t *keys = NULL;
    int rc = c ? tc_token_keys_json(c, r->srv->keys, &keys) : -EIO;
    tc_db_release(r->srv->db, c);
    if (rc < 0)
        return tc_respond_db_down(r);
    return tc_respond_json(r, 200, keys);
}

enum MHD_Result tc_api_credentials_introspect(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_api_sensitive_json(r, &ret);
    tc_api_wipe_body(r);
    if (!body)
        return ret;
    json_t *errors = only_fields(body, (const char *const[]){"token", "audience", NULL});
    json_t *tok = json_object_get(body, "token"), *aud = json_object_get(body, "audience");
    if (!bounded_string(tok, TC_TOKEN_MAX_BYTES))
        add_error(errors, "token", "is required: a string of at most 8192 bytes");
    if (aud && !bounded_string(aud, 128))
        add_error(errors, "audience", "must be a string of 1 to 128 bytes");
    if (json_array_size(errors) > 0) {
        tc_api_wipe_json_string(tok);
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(errors);
    json_t *actor = tc_auth_actor(&r->principal), *answer = NULL;
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    int rc = c ? tc_token_introspect(c, r->srv->keys, r->principal.tenant_id,
                                     json_string_value(tok), json_string_value(aud), actor, &answer)
               : -EIO;
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    tc_api_wipe_json_string(tok);
    json_decref(body);
    if (rc < 0 || !answer)
        return tc_respond_db_down(r);
    return tc_respond_json(r, 200, answer);
}

enum MHD_Result tc_api_credentials_revoke(struct tc_request *r)
{
    if (!tc_uuid_valid(r->params[0]))
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such token");
    json_t *actor = tc_auth_actor(&r->principal), *info = NULL;
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    const char *only = r->principal.role == TC_ROLE_ADMIN ? NULL : r->principal.key_id;
    int rc = c ? tc_token_revoke(c, r->srv->keys, r->principal.tenant_id, r->params[0], only, actor,
                                 &info)
               : -EIO;
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    if (rc == -ENOENT)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such token");
    if (rc == -EPERM)
        return tc_respond_problem(r, 403, "forbidden", "Forbidden", NULL,
                                  "only an admin or the key that asked for a token may revoke it");
    if (rc < 0)
        return tc_respond_db_down(r);
    tc_log(TC_LOG_INFO, "token revoked", "{s:s, s:s}", "request_id", r->request_id, "token_id",
           r->params[0]);
    return tc_respond_json(r, 200, info);
}
