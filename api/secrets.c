/* PUT/GET/DELETE /v1/secrets/{name}, GET /v1/secrets (admin). Values are write-only: no
 * response, log line or audit record carries one (the trail keeps a keyed hash). */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "server/auth.h"
#include "broker/secrets.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"

void tc_api_wipe_body(struct tc_request *r)
{
    if (r->body.data)
        sodium_memzero(r->body.data, r->body.len);
}

void tc_api_wipe_json_string(json_t *v)
{
    if (json_is_string(v))
        sodium_memzero((char *)json_string_value(v), json_string_length(v));
}

json_t *tc_api_sensitive_json(struct tc_request *r, enum MHD_Result *ret)
{
    if (r->body.len == 0 || !tc_utf8_valid(r->body.data, r->body.len, false)) {
        *ret = tc_respond_problem(r, 400, r->body.len ? "invalid-encoding" : "invalid-json",
                                  r->body.len ? "Invalid encoding" : "Malformed JSON", NULL,
                                  r->body.len
                                      ? "the request body is not valid UTF-8 (or holds NUL)"
                                      : "the request body is empty; a JSON object is expected");
        return NULL;
    }
    json_error_t err;
    json_t *j = json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &err);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        /* jansson's message may quote the text around the error: never echo it here */
        *ret = j ? tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                      "the request body must be a JSON object")
                 : tc_respond_problem(r, 400, "invalid-json", "Malformed JSON", NULL,
                                      "the body is not valid JSON (line %d, column %d)", err.line,
                                      err.column);
        return NULL;
    }
    return j;
}

static enum MHD_Result invalid(struct tc_request *r, json_t *errors)
{
    return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                              "the request does not match the schema (see errors)");
}

static void add_error(json_t *errors, const char *path, const char *message)
{
    json_array_append_new(errors, json_pack("{s:s, s:s}", "path", path, "message", message));
}

static bool tool_ref_ok(const char *s)
{
    size_t n = strlen(s);
    if (strcmp(s, "*") == 0)
        return true;
    if (n == 0 || n > 64 || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

enum MHD_Result tc_api_secret_put(struct tc_request *r)
{
    const char *name = r->params[0];
    enum MHD_Result ret;
    json_t *body = tc_api_sensitive_json(r, &ret);
    tc_api_wipe_body(r);
    if (!body)
        return ret;
    json_t *errors = json_array();
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "value") && strcmp(key, "description") && strcmp(key, "allowed_tools") &&
            strcmp(key, "max_ttl_seconds")) {
            char path[80];
            snprintf(path, sizeof(path), "%.64s", key);
            add_error(errors, path, "unknown field");
        }
    }
    if (!tc_secret_name_valid(name))
        add_error(errors, "name",
                  "must be 1 to 128 of [A-Za-z0-9_.-], not starting with '.' or '-'");
    json_t *value = json_object_get(body, "value");
    if (!json_is_string(value) || json_string_length(value) < TC_SECRET_MIN_BYTES ||
        json_string_length(value) > TC_SECRET_MAX_BYTES)
        add_error(errors, "value",
                  "is required: a string of 4 to 65536 bytes (shorter values"
                  " could not be redacted reliably)");
    json_t *desc = json_object_get(body, "description");
    if (desc && (!json_is_string(desc) || json_string_length(desc) > 1000))
        add_error(errors, "description", "must be a string of at most 1000 bytes");
    json_t *tools = json_object_get(body, "allowed_tools");
    if (!json_is_array(tools) || json_array_size(tools) > TC_SECRET_MAX_ALLOWED_TOOLS) {
        add_error(errors, "allowed_tools",
                  "is required: an array of at most 64 tool names"
                  " (or \"*\" for every tool whose policy grants it)");
    } else {
        size_t i;
        json_array_foreach(tools, i, v)
        {
            if (!json_is_string(v) || !tool_ref_ok(json_string_value(v))) {
                char path[48];
                snprintf(path, sizeof(path), "allowed_tools[%zu]", i);
                add_error(errors, path, "must be a tool name or \"*\"");
            }
        }
    }
    json_t *ttl = json_object_get(body, "max_ttl_seconds");
    if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
                json_integer_value(ttl) > TC_SECRET_MAX_TTL))
        add_error(errors, "max_ttl_seconds", "must be an integer from 1 to 86400");
    if (json_array_size(errors) > 0) {
        tc_api_wipe_json_string(value);
        json_decref(body);
        return invalid(r, errors);
    }
    json_decref(errors);
    json_t *actor = tc_auth_actor(&r->principal);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    bool created = false;
    json_t *meta = NULL;
    int rc = c ? tc_secret_put(
                     c, r->srv->keys, r->principal.tenant_id, name, json_string_value(value),
                     json_string_length(value), json_string_value(desc), tools,
                     ttl ? json_integer_value(ttl) : TC_SECRET_DEFAULT_TTL, actor, &created, &meta)
               : -EIO;
    if (rc < 0 && c)
        tc_log(TC_LOG_ERROR, "storing a secret failed", "{s:s, s:s}", "request_id", r->request_id,
               "secret", name);
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    tc_api_wipe_json_string(value);
    json_decref(body);
    if (rc < 0)
        return tc_respond_db_down(r);
    tc_log(TC_LOG_INFO, created ? "secret created" : "secret replaced", "{s:s, s:s}", "request_id",
           r->request_id, "secret", name);
    return tc_respond_json(r, created ? 201 : 200, meta);
}

enum MHD_Result tc_api_secret_get(struct tc_request *r)
{
    if (!tc_secret_name_valid(r->params[0]))
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such secret");
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    json_t *meta = NULL;
    int rc = tc_secret_get(c, r->principal.tenant_id, r->params[0], &meta);
    tc_db_release(r->srv->db, c);
    if (rc == -ENOENT)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such secret");
    if (rc < 0)
        return tc_respond_db_down(r);
    return tc_respond_json(r, 200, meta);
}

enum MHD_Result tc_api_secrets_list(struct tc_request *r)
{
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    json_t *list = NULL;
    int rc = tc_secret_list(c, r->principal.tenant_id, &list);
    tc_db_release(r->srv->db, c);
    if (rc < 0)
        return tc_respond_db_down(r);
    return tc_respond_json(r, 200, json_pack("{s:o}", "secrets", list));
}

enum MHD_Result tc_api_secret_delete(struct tc_request *r)
{
    if (!tc_secret_name_valid(r->params[0]))
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such secret");
    json_t *actor = tc_auth_actor(&r->principal);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    int rc =
        c ? tc_secret_delete(c, r->srv->keys, r->principal.tenant_id, r->params[0], actor) : -EIO;
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    if (rc == -ENOENT)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such secret");
    if (rc < 0)
        return tc_respond_db_down(r);
    tc_log(TC_LOG_INFO, "secret deleted", "{s:s, s:s}", "request_id", r->request_id, "secret",
           r->params[0]);
    return tc_respond_text(r, 204, "text/plain", "", 0);
}
