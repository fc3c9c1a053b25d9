/* GET /v1/egress-asks, GET /v1/egress-asks/{id}, POST /v1/egress-asks/{id}/decision (reviewer,
 * admin): the connections a running execution's egress proxy holds for a reviewer
 * (approval/egress_ask.h, server/egress_asks.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "approval/egress_ask.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"
#include "server/http.h"

static enum MHD_Result not_found(struct tc_request *r)
{
    return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such egress ask");
}

enum MHD_Result tc_api_egress_asks_list(struct tc_request *r)
{
    const char *status = tc_request_query(r, "status"), *ls = tc_request_query(r, "limit");
    static const char *const statuses[] = {"pending", "allowed_once", "allowed_execution",
                                           "denied",  "expired",      "withdrawn"};
    bool status_ok = !status;
    for (size_t i = 0; status && i < TC_ARRAY_SIZE(statuses); i++)
        status_ok |= strcmp(status, statuses[i]) == 0;
    int64_t limit = 50;
    if (!status_ok || (ls && tc_parse_i64(ls, 1, 200, &limit) < 0))
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "status must be pending, allowed_once, allowed_execution, denied,"
                                  " expired or withdrawn; limit 1..200");
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    json_t *items = c ? tc_egress_ask_list(c, r->principal.tenant_id, status, (int)limit) : NULL;
    tc_db_release(r->srv->db, c);
    if (!items)
        return tc_respond_db_down(r);
    return tc_respond_json(r, 200, json_pack("{s:o}", "egress_asks", items));
}

enum MHD_Result tc_api_egress_ask_get(struct tc_request *r)
{
    if (!tc_uuid_valid(r->params[0]))
        return not_found(r);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    int err = -EIO;
    json_t *ask = c ? tc_egress_ask_get(c, r->principal.tenant_id, r->params[0], &err) : NULL;
    tc_db_release(r->srv->db, c);
    if (!ask)
        return err == -ENOENT ? not_found(r) : tc_respond_db_down(r);
    return tc_respond_json(r, 200, ask);
}

static enum MHD_Result invalid(struct tc_request *r, json_t *body, const char *path,
                               const char *message)
{
    json_decref(body);
    return tc_respond_problem(r, 400, "validation", "Invalid request",
                              json_pack("[{s:s, s:s}]", "path", path, "message", message),
                              "the decision is invalid");
}

/* {"decision": "allow_once" | "allow_execution" | "deny", "reason"?: text (a deny needs one)} */
enum MHD_Result tc_api_egress_ask_decide(struct tc_request *r)
{
    if (!tc_uuid_valid(r->params[0]))
        return not_found(r);
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    if (!body)
        return ret;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "decision") != 0 && strcmp(key, "reason") != 0)
            return invalid(r, body, "", "only \"decision\" and \"reason\" may be given");
    }
    int d = tc_egress_verdict_parse(json_string_value(json_object_get(body, "decision")));
    if (d < 0)
        return invalid(r, body, "decision", "must be allow_once, allow_execution or deny");
    json_t *rv = json_object_get(body, "reason");
    if (rv && (!json_is_string(rv) || json_string_length(rv) > 1000 ||
               strlen(json_string_value(rv)) != json_string_length(rv)))
        return invalid(r, body, "reason", "must be a string of at most 1000 bytes");
    const char *reason = json_string_value(rv);
    if (d == TC_EGRESS_DENY && (!reason || !*reason))
        return invalid(r, body, "reason", "is required to deny");
    char decider[48];
    if (r->principal.person_id[0])
        snprintf(decider, sizeof(decider), "person:%s", r->principal.person_id);
    else
        snprintf(decider, sizeof(decider), "key:%s", r->principal.key_id);
    json_t *actor = tc_auth_actor(&r->principal);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    int rc = c && actor
                 ? tc_egress_ask_decide(c, r->srv->keys, r->principal.tenant_id, r->params[0],
                                        decider, r->principal.key_id, r->principal.person_id, actor,
                                        (enum tc_egress_verdict)d, reason)
                 : -EIO;
    int err = -EIO;
    json_t *ask = rc == 0 ? tc_egress_ask_get(c, r->principal.tenant_id, r->params[0], &err) : NULL;
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    json_decref(body);
    switch (rc) {
    case 0:
        tc_log(TC_LOG_INFO, "egress ask decided", "{s:s, s:s, s:s}", "request_id", r->request_id,
               "ask_id", r->params[0], "decision",
               tc_egress_verdict_name((enum tc_egress_verdict)d));
        return ask ? tc_respond_json(r, 200, ask) : tc_respond_db_down(r);
    case -ENOENT:
        return not_found(r);
    case -EPERM:
        return tc_respond_problem(r, 403, "maker-checker", "Forbidden", NULL,
                                  "the key (or person) that asked for this execution cannot decide"
                                  " its connections");
    case -ESTALE:
        return tc_respond_problem(
            r, 409, "not-pending", "Conflict", NULL,
            "the ask is no longer pending (answered, expired, or its execution"
            " ended)");
    default:
        return tc_respond_db_down(r);
    }
}
