/* Execution receipts (execution/receipt.h): the statement of one finished execution, built
 * from what the database holds of it (the request row, the stored outcome, the approval and its
 * decisions, the credential leases, the audit records that tell it), signed with the audit
 * signing key (audit/receipt.h). Content is bound by SHA-256 (what `sha256sum` checks): the
 * code, stdin and files as asked for; stdout, stderr, the result and collected files as the
 * API gives them (redacted); the audit records by their chain hashes, which the signed
 * checkpoints of an export cover. */
#include "execution/receipt.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "audit/receipt.h"
#include "common/util.h"
#include "core/db.h"
#include "execution/request.h"

#define RECEIPT_AUDIT_MAX 1000 /* records of one execution (a handful in practice) */

static json_t *sha256_json(const void *data, size_t len)
{
    unsigned char h[crypto_hash_sha256_BYTES];
    char hex[2 * crypto_hash_sha256_BYTES + 1];
    crypto_hash_sha256(h, data, len);
    sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
    return json_string(hex);
}

static json_t *text_hash(json_t *s)
{
    return json_is_string(s) ? sha256_json(json_string_value(s), json_string_length(s))
                             : json_null();
}

static json_t *col(PGresult *r, int row, int c)
{
    return PQgetisnull(r, row, c) ? json_null() : json_string(PQgetvalue(r, row, c));
}

/* [{path, size, sha256}] of files given as {path, content, encoding?}: the request's, or the
 * collected ones of the outcome (then with truncated; a withheld file's content is ""). */
static json_t *files_json(json_t *files, bool collected)
{
    json_t *out = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        unsigned char *bytes = NULL;
        size_t len = 0;
        json_t *e = json_pack("{s:O}", "path", json_object_get(f, "path"));
        int rc = tc_exec_file_bytes(f, &bytes, &len);
        if (collected)
            json_object_set(e, "truncated", json_object_get(f, "truncated") ?: json_false());
        json_object_set_new(e, "size", rc == 0 ? json_integer((json_int_t)len) : json_null());
        json_object_set_new(e, "sha256", rc == 0 ? sha256_json(bytes, len) : json_null());
        free(bytes);
        json_array_append_new(out, e);
    }
    return out;
}

static bool final_status(const char *s)
{
    static const char *const final[] = {"completed", "failed", "timeout", "killed",
                                        "error",     "denied", "expired", "cancelled"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(final); i++)
        if (strcmp(s, final[i]) == 0)
            return true;
    return false;
}

/* The statement of execution id of tenant: 0, -ENOENT, -EAGAIN (no outcome yet), -EIO. */
static int statement(PGconn *c, const char *tenant, const char *id, bool deciders, json_t **ret)
{
    const char *p[] = {id, tenant};
    PGresult *e = tc_db_exec(
        c,
        "SELECT request::text, session_id::text, api_key_id::text,"
        " code_started_at IS NOT NULL, needs_review, status, tool,"
        " result::text, limits::text, " TC_SQL_ISO(
            "created_at") ","
                          " " TC_SQL_ISO(
                              "finished_at") " FROM executions WHERE id = $1 AND tenant_id = $2",
        2, p);
    if (!e)
        return -EIO;
    if (PQntuples(e) != 1) {
        PQclear(e);
        return -ENOENT;
    }
    if (!final_status(PQgetvalue(e, 0, 5))) {
        PQclear(e);
        return -EAGAIN;
    }
    /* the outcome as stored (the API's view); a call closed without running has none */
    json_t *view = PQgetisnull(e, 0, 7) ? json_object() : json_loads(PQgetvalue(e, 0, 7), 0, NULL);
    if (!view) {
        PQclear(e);
        return -EIO;
    }
    json_object_set_new(view, "status", json_string(PQgetvalue(e, 0, 5)));
    json_object_set_new(view, "tool", json_string(PQgetvalue(e, 0, 6)));
    if (!json_object_get(view, "limits"))
        json_object_set_new(view, "limits", json_loads(PQgetvalue(e, 0, 8), 0, NULL));
    json_object_set_new(view, "created_at", json_string(PQgetvalue(e, 0, 9)));
    json_object_set_new(view, "finished_at", col(e, 0, 10));
    json_t *req = json_loads(PQgetvalue(e, 0, 0), 0, NULL);
    json_t *code = json_object_get(req, "code"), *in = json_object_get(req, "stdin");
    char now[32];
    tc_iso8601(tc_wall_ms(), now);
    json_t *st = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:b, s:b,"
        " s:{s:o, s:o, s:o, s:O}}",
        "format", TC_RECEIPT_FORMAT, "issued_at", now, "execution_id", id, "tenant_id", tenant,
        "tool", json_string_value(json_object_get(view, "tool")) ?: "", "session_id", col(e, 0, 1),
        "requested_by", col(e, 0, 2), "status", json_object_get(view, "status"), "exit_code",
        json_object_get(view, "exit_code") ?: json_null(), "signal",
        json_object_get(view, "signal") ?: json_null(), "killed_reason",
        json_object_get(view, "killed_reason") ?: json_null(), "error",
        json_object_get(view, "error") ?: json_null(), "created_at",
        json_object_get(view, "created_at") ?: json_null(), "finished_at",
        json_object_get(view, "finished_at") ?: json_null(), "started",
        strcmp(PQgetvalue(e, 0, 3), "t") == 0, "needs_review",
        strcmp(PQgetvalue(e, 0, 4), "t") == 0, "request", "code_sha256", text_hash(code),
        "stdin_sha256", text_hash(in), "files", files_json(json_object_get(req, "files"), false),
        "limits", json_object_get(view, "limits") ?: json_null());
    json_t *sid = st ? json_incref(json_object_get(st, "session_id")) : NULL;
    json_decref(req);
    PQclear(e);
    if (!st) {
        json_decref(sid);
        json_decref(view);
        return -ENOMEM;
    }
    int rc = 0;

    /* what it produced, as the API gives it (a call that never ran: "") */
    if (!json_is_string(json_object_get(view, "stdout")))
        json_object_set_new(view, "stdout", json_string(""));
    if (!json_is_string(json_object_get(view, "stderr")))
        json_object_set_new(view, "stderr", json_string(""));
    json_t *out =
        json_pack("{s:o, s:I, s:O, s:o, s:I, s:O, s:o, s:o}", "stdout_sha256",
                  text_hash(json_object_get(view, "stdout")), "stdout_bytes",
                  (json_int_t)json_string_length(json_object_get(view, "stdout")),
                  "stdout_truncated", json_object_get(view, "stdout_truncated") ?: json_false(),
                  "stderr_sha256", text_hash(json_object_get(view, "stderr")), "stderr_bytes",
                  (json_int_t)json_string_length(json_object_get(view, "stderr")),
                  "stderr_truncated", json_object_get(view, "stderr_truncated") ?: json_false(),
                  "result_sha256", text_hash(json_object_get(view, "result")), "files",
                  files_json(json_object_get(view, "files"), true));
    json_object_set_new(st, "output", out ? out : json_null());
    json_t *net = json_object_get(view, "network");
    json_object_set_new(st, "network", json_is_array(net) ? json_incref(net) : json_array());
    json_t *viol = json_object_get(view, "policy_violations");
    json_object_set_new(st, "policy_violations", viol ? json_incref(viol) : json_null());

    /* the approval, with who decided */
    PGresult *a = tc_db_exec(c,
                             "SELECT id, status, encode(payload_hash, 'hex'), required_approvals,"
                             " payload->>'tool_policy' FROM approvals"
                             " WHERE execution_id = $1 AND tenant_id = $2",
                             2, p);
    if (!a)
        rc = -EIO;
    json_t *tool_policy = NULL;
    if (a && PQntuples(a) == 1) {
        json_t *ap = json_pack("{s:s, s:s, s:s, s:i, s:[]}", "id", PQgetvalue(a, 0, 0), "status",
                               PQgetvalue(a, 0, 1), "payload_hash", PQgetvalue(a, 0, 2),
                               "required_approvals", atoi(PQgetvalue(a, 0, 3)), "decisions");
        if (!PQgetisnull(a, 0, 4))
            tool_policy = json_string(PQgetvalue(a, 0, 4));
        const char *pa[] = {PQgetvalue(a, 0, 0)};
        PGresult *d = tc_db_exec(c,
                                 "SELECT decider, decision, reason, " TC_SQL_ISO(
                                     "created_at") " FROM approval_decisions WHERE approval_id = $1"
                                                   " ORDER BY created_at, id",
                                 1, pa);
        if (!d)
            rc = -EIO;
        for (int i = 0; d && ap && i < PQntuples(d); i++)
            json_array_append_new(
                json_object_get(ap, "decisions"),
                json_pack("{s:o, s:s, s:o, s:s}", "decider",
                          deciders ? json_string(PQgetvalue(d, i, 0)) : json_null(), "decision",
                          PQgetvalue(d, i, 1), "reason", col(d, i, 2), "at", PQgetvalue(d, i, 3)));
        PQclear(d);
        json_object_set_new(st, "approval", ap ? ap : json_null());
    } else {
        json_object_set_new(st, "approval", json_null());
    }
    PQclear(a);

    /* the credentials leased to it (a session's call: the session's) */
    const char *pl[] = {id, tenant, json_string_value(sid)};
    PGresult *l =
        rc == 0 ? tc_db_exec(c,
                             "SELECT id, secret_name, delivered_as, target,"
                             " " TC_SQL_ISO("issued_at") ", " TC_SQL_ISO(
                                 "revoked_at") " FROM credential_leases WHERE tenant_id = $2"
                                               " AND (execution_id = $1 OR execution_id = $3::uuid)"
                                               " ORDER BY issued_at, id",
                             3, pl)
                : NULL;
    if (rc == 0 && !l)
        rc = -EIO;
    json_t *leases = json_array();
    for (int i = 0; l && i < PQntuples(l); i++)
        json_array_append_new(leases, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "lease_id",
                                                PQgetvalue(l, i, 0), "secret", PQgetvalue(l, i, 1),
                                                "delivered_as", PQgetvalue(l, i, 2), "target",
                                                PQgetvalue(l, i, 3), "issued_at",
                                                PQgetvalue(l, i, 4), "revoked_at", col(l, i, 5)));
    PQclear(l);
    json_object_set_new(st, "credentials", leases);
    json_decref(sid);

    /* the audit records that tell it, by their chain hashes; the policy digest of its
     * "execute" record (the tool's definition it was decided under) */
    char max[16];
    snprintf(max, sizeof(max), "%d", RECEIPT_AUDIT_MAX);
    const char *pr[] = {id, tenant, max};
    PGresult *r = rc == 0 ? tc_db_exec(c,
                                       "SELECT seq, action, encode(hash, 'hex'),"
                                       " record->>'tool_policy' FROM audit_log"
                                       " WHERE record->>'execution_id' = $1 AND tenant_id = $2"
                                       " ORDER BY seq LIMIT $3::int",
                                       3, pr)
                          : NULL;
    if (rc == 0 && !r)
        rc = -EIO;
    json_t *recs = json_array();
    for (int i = 0; r && i < PQntuples(r); i++) {
        json_array_append_new(recs, json_pack("{s:I, s:s, s:s}", "seq",
                                              (json_int_t)strtoll(PQgetvalue(r, i, 0), NULL, 10),
                                              "action", PQgetvalue(r, i, 1), "hash",
                                              PQgetvalue(r, i, 2)));
        if (!tool_policy && !PQgetisnull(r, i, 3) && strcmp(PQgetvalue(r, i, 1), "execute") == 0)
            tool_policy = json_string(PQgetvalue(r, i, 3));
    }
    PQclear(r);
    json_object_set_new(st, "audit", recs);
    json_object_set_new(st, "tool_policy", tool_policy ? tool_policy : json_null());
    json_decref(view);
    if (rc < 0) {
        json_decref(st);
        return rc;
    }
    *ret = st;
    return 0;
}

int tc_execution_receipt(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                         const char *id, bool deciders, json_t **ret)
{
    json_t *st = NULL;
    int rc = statement(c, tenant_id, id, deciders, &st);
    if (rc < 0)
        return rc;
    json_t *doc = tc_receipt_sign(keys, st);
    if (!doc)
        return -ENOMEM;
    *ret = doc;
    return 0;
}
