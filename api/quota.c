/* GET /v1/quota: a tenant's limits and use (an operator names the tenant: ?tenant=NAME).
 * PUT /v1/admin/quotas/{tenant}: an operator sets or clears a tenant's limits (audited). */
#include <string.h>

#include "api/api.h"
#include "core/db.h"
#include "execution/quota.h"
#include "server/auth.h"

/* The tenant's id by name into id[37]: 0, -ENOENT or -EIO. */
static int tenant_id_of(PGconn *c, const char *name, char id[37])
{
    const char *p[] = {name};
    PGresult *r = tc_db_exec(c, "SELECT id FROM tenants WHERE name = $1", 1, p);
    int rc = !r ? -EIO : PQntuples(r) == 1 ? 0 : -ENOENT;
    if (rc == 0)
        snprintf(id, 37, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

static enum MHD_Result answer(struct tc_request *r, PGconn *c, const char *tenant_id,
                              const char *name)
{
    struct tc_quota q;
    int rc = tc_quota_get(c, tenant_id, r->srv->cfg->tenant_max_concurrent, &q);
    tc_db_release(r->srv->db, c);
    if (rc < 0)
        return tc_respond_db_down(r);
    return tc_respond_json(
        r, 200, json_pack("{s:s, s:o}", "tenant", name, "concurrent", tc_quota_json(&q)));
}

enum MHD_Result tc_api_quota_get(struct tc_request *r)
{
    const char *want = tc_request_query(r, "tenant");
    bool op = r->principal.role == TC_ROLE_OPERATOR;
    if (op != (want != NULL))
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  op ? "an operator names the tenant: ?tenant=NAME"
                                     : "tenant is for operators: a key reads its own tenant");
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    char id[37];
    if (!op)
        return answer(r, c, r->principal.tenant_id, r->principal.tenant_name);
    int rc = strlen(want) <= 64 ? tenant_id_of(c, want, id) : -ENOENT;
    if (rc < 0) {
        tc_db_release(r->srv->db, c);
        return rc == -ENOENT
                   ? tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such tenant")
                   : tc_respond_db_down(r);
    }
    return answer(r, c, id, want);
}

enum MHD_Result tc_api_quota_put(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    if (!body)
        return ret;
    json_t *mc = json_object_get(body, "max_concurrent");
    bool shape = json_object_size(body) == 1 && mc &&
                 (json_is_null(mc) || (json_is_integer(mc) && json_integer_value(mc) >= 0 &&
                                       json_integer_value(mc) <= 4096));
    int64_t v = json_is_integer(mc) ? json_integer_value(mc) : -1;
    json_decref(body);
    if (!shape)
        return tc_respond_problem(
            r, 400, "validation", "Invalid request",
            json_pack("[{s:s, s:s}]", "path", "max_concurrent", "message",
                      "required: an integer from 0 to 4096, or null for the server's default"),
            "the body must be {\"max_concurrent\": N|null}");
    const char *name = r->params[0];
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    char id[37];
    int rc = strlen(name) <= 64 ? tenant_id_of(c, name, id) : -ENOENT;
    json_t *actor = rc == 0 ? tc_auth_actor(&r->principal) : NULL;
    if (rc == 0)
        rc = actor ? tc_quota_set(c, r->srv->keys, id, v, actor) : -ENOMEM;
    json_decref(actor);
    if (rc < 0) {
        tc_db_release(r->srv->db, c);
        return rc == -ENOENT
                   ? tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such tenant")
                   : tc_respond_db_down(r);
    }
    return answer(r, c, id, name);
}
