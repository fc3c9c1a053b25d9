/* GET /v1/audit, /v1/audit/{seq}, /v1/audit/export, /v1/audit/verify (auditor, admin). */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "audit/audit.h"
#include "core/keys.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"
#include "server/audit_http.h"
#include "server/verifier.h"

#define AUDIT_PAGE_DEFAULT 100
#define AUDIT_PAGE_MAX     500

static json_t *row_json(PGresult *res, int i)
{
    json_t *rec = json_loads(PQgetvalue(res, i, 1), 0, NULL);
    const char *h = PQgetvalue(res, i, 2);
    return json_pack("{s:I, s:s, s:o}", "seq", (json_int_t)strtoll(PQgetvalue(res, i, 0), NULL, 10),
                     "hash", strncmp(h, "\\x", 2) == 0 ? h + 2 : h, "record",
                     rec ? rec : json_null());
}

enum MHD_Result tc_api_audit_list(struct tc_request *r)
{
    enum MHD_Result ret = MHD_NO;
    struct tc_audit_filter f;
    if (!tc_audit_filter_build(r, &f, &ret)) {
        tc_buf_free(&f.where);
        return ret;
    }
    int64_t limit = AUDIT_PAGE_DEFAULT, cursor = INT64_MAX;
    const char *ls = tc_request_query(r, "limit"), *cs = tc_request_query(r, "cursor");
    if ((ls && tc_parse_i64(ls, 1, AUDIT_PAGE_MAX, &limit) < 0) ||
        (cs && tc_parse_i64(cs, 1, INT64_MAX, &cursor) < 0)) {
        tc_buf_free(&f.where);
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "limit must be 1..%d and cursor a positive integer",
                                  AUDIT_PAGE_MAX);
    }
    char cbuf[24], lbuf[24];
    snprintf(cbuf, sizeof(cbuf), "%" PRId64, cursor);
    snprintf(lbuf, sizeof(lbuf), "%" PRId64, limit + 1);
    /* Newest first; the cursor is the last seq seen, so pages stay stable while records arrive. */
    tc_audit_filter_add(&f, "seq < ?", cbuf);
    struct tc_buf sql;
    tc_buf_init(&sql, 8192);
    int rc = tc_buf_appendf(&sql,
                            "SELECT seq, record::text, hash FROM audit_log WHERE %s"
                            " ORDER BY seq DESC LIMIT $%d",
                            f.where.data, f.n + 1);
    f.params[f.n] = lbuf;
    PGconn *c = rc == 0 ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    PGresult *res = c ? tc_db_exec_once(c, sql.data, f.n + 1, f.params) : NULL;
    if (c && !res)
        tc_log(TC_LOG_ERROR, "audit query failed", "{s:s, s:s}", "request_id", r->request_id,
               "error", tc_db_error(c));
    tc_db_release(r->srv->db, c);
    tc_buf_free(&sql);
    tc_buf_free(&f.where);
    if (!res)
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the audit trail cannot be read right now");
    int n = PQntuples(res);
    json_t *records = json_array();
    for (int i = 0; i < n && i < limit; i++)
        json_array_append_new(records, row_json(res, i));
    json_t *next = n > limit ? json_string(PQgetvalue(res, (int)limit - 1, 0)) : json_null();
    PQclear(res);
    return tc_respond_json(r, 200,
                           json_pack("{s:o, s:o}", "records", records, "next_cursor", next));
}

enum MHD_Result tc_api_audit_get(struct tc_request *r)
{
    int64_t seq;
    if (tc_parse_i64(r->params[0], 1, INT64_MAX, &seq) < 0)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such audit record");
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    const char *all = r->principal.role == TC_ROLE_OPERATOR ? "t" : "f";
    const char *p[] = {r->params[0], r->principal.tenant_id, all};
    PGresult *res = tc_db_exec(c,
                               "SELECT seq, record::text, hash FROM audit_log WHERE seq = $1"
                               " AND ($3::boolean OR tenant_id = $2)",
                               3, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the audit trail cannot be read right now");
    if (PQntuples(res) != 1) {
        PQclear(res);
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such audit record");
    }
    json_t *o = row_json(res, 0);
    PQclear(res);
    return tc_respond_json(r, 200, o);
}

#define VERIFY_MAX_AGE 86400 /* seconds a client may accept a verdict to be old */

/* The verdict of a walk that started no more than max_age seconds before the request
 * arrived (default 0: after it). The walk runs on the verifier's thread; this request waits
 * for it suspended, sharing it with every other request that asked meanwhile. */
static enum MHD_Result verify_answer(struct tc_request *r, int64_t max_age, bool waited)
{
    struct tc_audit_verdict v;
    int64_t started_wall;
    if (tc_verifier_cached(r->srv->verifier, r->start_ms - max_age * 1000, &v, NULL, &started_wall,
                           NULL)) {
        json_t *o = tc_audit_verdict_json(&v);
        char ts[32];
        tc_iso8601(started_wall, ts);
        json_object_set_new(o, "verified_at", json_string(ts));
        return tc_respond_json(r, 200, o);
    }
    if (waited || !tc_server_begin(r->srv))
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the audit trail cannot be read right now");
    tc_request_suspend(r, tc_api_audit_verify);
    r->state = r; /* marks the second run, after the walk; nothing to free */
    if (tc_verifier_wait(r->srv->verifier, r) < 0)
        tc_request_resume(r);
    tc_server_end(r->srv);
    return MHD_YES;
}

enum MHD_Result tc_api_audit_verify(struct tc_request *r)
{
    int64_t max_age = 0;
    const char *ma = tc_request_query(r, "max_age");
    if (ma && tc_parse_i64(ma, 0, VERIFY_MAX_AGE, &max_age) < 0)
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "max_age must be an integer of seconds, 0 to %d", VERIFY_MAX_AGE);
    return verify_answer(r, max_age, r->state == r);
}

/* ---- streamed export ---- */

enum MHD_Result tc_api_audit_export(struct tc_request *r)
{
    return tc_audit_export_respond(r);
}

/* POST /v1/audit/hash {value} -> {hash, key_id, previous}: the keyed hash under which a secret
 * value appears in the trail (value_hash), so an investigator holding a value can search for
 * it; "previous" gives its hash under each earlier master key still configured. Audited
 * (who asked, and the hash; never the value). */
enum MHD_Result tc_api_audit_hash(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_api_sensitive_json(r, &ret);
    tc_api_wipe_body(r);
    if (!body)
        return ret;
    json_t *value = json_object_get(body, "value");
    if (json_object_size(body) != 1 || !json_is_string(value) ||
        json_string_length(value) > 65536) {
        tc_api_wipe_json_string(value);
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request",
                                  json_pack("[{s:s, s:s}]", "path", "value", "message",
                                            "is required (the only field): a string of at most"
                                            " 65536 bytes"),
                                  "the request does not match the schema (see errors)");
    }
    const struct tc_keys *k = r->srv->keys;
    char hash[65];
    /* The caller's tenant's key: the hash matches only that tenant's records. */
    tc_audit_value_hash(k, r->principal.tenant_id, json_string_value(value),
                        json_string_length(value), hash);
    json_t *previous = json_array();
    for (size_t i = 0; i < k->nprevious; i++) {
        char hex[65];
        tc_audit_value_hash_with(k->previous[i].audit_value_key, r->principal.tenant_id,
                                 json_string_value(value), json_string_length(value), hex);
        json_array_append_new(
            previous, json_pack("{s:s, s:s}", "key_id", k->previous[i].master_id, "hash", hex));
    }
    tc_api_wipe_json_string(value);
    json_decref(body);
    json_t *ev =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:s}", "action", "audit.hash", "tenant_id",
                  r->principal.tenant_id, "actor", "type", "api_key", "id", r->principal.key_id,
                  "role", tc_role_name(r->principal.role), "value_hash", hash);
    PGconn *c = ev ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    int rc = c ? tc_audit_append(c, k, ev, NULL) : -EIO;
    tc_db_release(r->srv->db, c);
    json_decref(ev);
    if (rc < 0) {
        json_decref(previous);
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the request could not be recorded in the audit trail");
    }
    return tc_respond_json(
        r, 200,
        json_pack("{s:s, s:s, s:o}", "hash", hash, "key_id", k->master_id, "previous", previous));
}
