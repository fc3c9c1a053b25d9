#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/embedded.h"
#include "sandbox/sandbox.h"
#include "core/db.h"
#include "core/metrics.h"
#include "server/recorder.h"

enum MHD_Result tc_api_healthz(struct tc_request *r)
{
    return tc_respond_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

enum MHD_Result tc_api_readyz(struct tc_request *r)
{
    bool db = tc_db_ping(r->srv->db);
    bool launcher = false;
    json_t *uids = NULL;
    if (tc_server_begin(r->srv)) {
        launcher = tc_launcher_alive(r->srv->launcher);
        json_t *hi = launcher ? tc_launcher_host_info(r->srv->launcher) : NULL;
        json_t *range = json_object_get(hi, "uid_range");
        if (json_is_object(range))
            uids = json_pack("{s:O, s:O}", "first", json_object_get(range, "first"), "count",
                             json_object_get(range, "count"));
        json_decref(hi);
        tc_server_end(r->srv);
    }
    bool locked = r->srv->instance_locked; /* without it, it runs nothing new */
    bool ok = db && launcher && locked;
    json_t *body = json_pack("{s:s, s:{s:s, s:s, s:s}}", "status", ok ? "ready" : "unavailable",
                             "checks", "database", db ? "ok" : "fail", "launcher",
                             launcher ? "ok" : "fail", "instance_lock", locked ? "ok" : "fail");
    /* the host uids the current launcher's sandboxes run as (sandbox/uidrange.h): for
     * operators' process and file audits, and the tests that look for leftovers */
    if (body && uids)
        json_object_set(body, "sandbox_uids", uids);
    json_decref(uids);
    return tc_respond_json(r, ok ? 200 : 503, body);
}

enum MHD_Result tc_api_openapi(struct tc_request *r)
{
    const struct tc_embedded *e = tc_embedded_find("openapi/openapi.yaml");
    if (!e)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no OpenAPI document");
    return tc_respond_text(r, 200, "application/yaml", e->data, e->len);
}

enum MHD_Result tc_api_metrics(struct tc_request *r)
{
    struct tc_metrics_gauges g = {.approvals_pending = -1,
                                  .instance_locked = r->srv->instance_locked};
    if (tc_server_begin(r->srv)) { /* the launcher and the recorder stop after this section */
        g.outcomes_unstored = tc_recorder_pending(r->srv->recorder);
        g.sandboxes_in_flight = tc_launcher_in_flight(r->srv->launcher);
        g.launcher_restarts = tc_launcher_restarts(r->srv->launcher);
        tc_server_end(r->srv);
    }
    PGconn *c = tc_db_acquire(r->srv->db, 1000);
    PGresult *res =
        c ? tc_db_exec(c, "SELECT count(*) FROM approvals WHERE status = 'pending'", 0, NULL)
          : NULL;
    if (res && PQntuples(res) == 1)
        g.approvals_pending = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    tc_db_release(r->srv->db, c);
    struct tc_buf out;
    tc_buf_init(&out, 8 << 20);
    int rc = tc_metrics_render(&g, &out);
    enum MHD_Result ret = rc < 0
                              ? tc_respond_problem(r, 500, "internal", "Internal error", NULL,
                                                   "metrics could not be rendered")
                              : tc_respond_text(r, 200, "text/plain; version=0.0.4; charset=utf-8",
                                                out.data ? out.data : "", out.len);
    tc_buf_free(&out);
    return ret;
}
