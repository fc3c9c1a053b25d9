/* GET /v1/quota: a tenant's limits and use (an operator names the tenant: ?tenant=NAME).
 * PUT /v1/admin/quotas/{tenant}: an operator sets or clears a tenant's limits (audited). */
#include <string.h>

#include "api/api.h"
#include "core/db.h"
#include "execution/quota.h"
#include "server/auth.h"

static enum MHD_Result answer(struct tc_request *r, PGconn *c, const char *tenant_id,
                              const char *name)
{
    struct tc_quota_defaults d = tc_quota_defaults_of(r->srv->cfg);
    json_t *q = tc_quota_describe(c, tenant_id, &d);
    tc_db_release(r->srv->db, c);
    if (!q)
        return tc_respond_db_down(r);
    json_object_set_new(q, "tenant", json_string(name));
    return tc_respond_json(r, 200, q);
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
    int rc = strlen(want) <= 64 ? tc_auth_tenant_id(c, want, id) : -ENOENT;
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
    /* each limit: an integer (set), null (the server's default) or absent (unchanged) */
    int64_t v[TC_QUOTA__COUNT];
    json_t *errors = json_array();
    size_t known = 0;
    for (int i = 0; i < TC_QUOTA__COUNT; i++) {
        v[i] = TC_QUOTA_KEEP;
        json_t *f = json_object_get(body, tc_quota_limit_names[i]);
        if (!f)
            continue;
        known++;
        if (json_is_null(f))
            v[i] = TC_QUOTA_DEFAULT;
        else if (json_is_integer(f) && json_integer_value(f) >= 0 &&
                 json_integer_value(f) <= tc_quota_limit_max[i])
            v[i] = json_integer_value(f);
        else
            json_array_append_new(
                errors, json_pack("{s:s, s:s}", "path", tc_quota_limit_names[i], "message",
                                  "an integer from 0 up to the limit's maximum, or null"));
    }
    if (known == 0 || known != json_object_size(body))
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "(body)", "message",
                                                "only max_concurrent, rate_per_minute,"
                                                " cpu_seconds_per_day, wall_seconds_per_day,"
                                                " max_sessions"));
    json_decref(body);
    if (json_array_size(errors) > 0)
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the body sets limits by name: N, or null for the server's"
                                  " default");
    json_decref(errors);
    const char *name = r->params[0];
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    char id[37];
    int rc = strlen(name) <= 64 ? tc_auth_tenant_id(c, name, id) : -ENOENT;
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
