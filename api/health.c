#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/embedded.h"
#include "common/util.h"
#include "sandbox/sandbox.h"
#include "core/db.h"
#include "core/metrics.h"
#include "execution/quota.h"
#include "server/auth.h"
#include "server/recorder.h"

enum MHD_Result tc_api_healthz(struct tc_request *r)
{
    return tc_respond_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

#define READY_DB_MS    1500
#define READY_REUSE_MS 1000

/* The database's answer to readiness: a SELECT 1 on readiness's own connection (tc_db_ping: a
 * slow database costs the calls' pool nothing), bounded well under a probe's timeout (ours 3 s)
 * (a frozen database makes /readyz answer 503 instead of holding a thread for the round trips'
 * own bound), one probe at a time; a failed one is the answer for a second: back-to-back /readyz
 * calls cannot keep the health listener's one thread in pings that wait out their bound. A
 * success is not reused (the next probe sees a database that just went away). */
static bool database_ready(struct tc_db *db)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int64_t asked_ms = INT64_MIN / 2;
    static bool ok;
    pthread_mutex_lock(&lock);
    int64_t now = tc_now_ms();
    if (ok || now - asked_ms >= READY_REUSE_MS) {
        ok = tc_db_ping(db, READY_DB_MS);
        asked_ms = tc_now_ms();
    }
    bool r = ok;
    pthread_mutex_unlock(&lock);
    return r;
}

enum MHD_Result tc_api_readyz(struct tc_request *r)
{
    bool db = database_ready(r->srv->db);
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

#define TENANTS_MAX 500 /* tenants described on one page (3 queries each) */

/* Each tenant's quota and use (GET /v1/quota's numbers), and this process's refusals by
 * tenant: only for an operator key (the public page names no tenant). */
static int render_tenants(struct tc_request *r, struct tc_buf *o)
{
    PGconn *c = tc_db_acquire(r->srv->db, 1000);
    char lim[16];
    snprintf(lim, sizeof(lim), "%d", TENANTS_MAX + 1);
    const char *p[] = {lim};
    PGresult *res =
        c ? tc_db_exec(c, "SELECT id, name FROM tenants ORDER BY name LIMIT $1", 1, p) : NULL;
    const struct tc_quota_defaults qd = tc_quota_defaults_of(r->srv->cfg);
    int n = res ? PQntuples(res) : 0, rc = 0;
    static const struct {
        const char *name, *help, *group, *field;
    } g[] = {
        {"toolcage_tenant_executions_running", "Executions of the tenant running now.",
         "concurrent", "running"},
        {"toolcage_tenant_max_concurrent", "The tenant's max_concurrent (absent: no limit).",
         "concurrent", "max_concurrent"},
        {"toolcage_tenant_sessions_open", "Sessions of the tenant open now.", "sessions", "open"},
        {"toolcage_tenant_max_sessions", "The tenant's max_sessions (absent: no limit).",
         "sessions", "max_sessions"},
        {"toolcage_tenant_cpu_seconds_day", "CPU seconds the tenant used in the last 24 hours.",
         "daily", "cpu_seconds_used"},
        {"toolcage_tenant_wall_seconds_day", "Wall seconds the tenant used in the last 24 hours.",
         "daily", "wall_seconds_used"},
    };
    json_t *described = json_array();
    for (int i = 0; i < n && i < TENANTS_MAX; i++)
        json_array_append_new(described, tc_quota_describe(c, PQgetvalue(res, i, 0), &qd));
    rc = tc_buf_appendf(o, "# HELP toolcage_tenant_info A tenant's name (for joins on tenant_id).\n"
                           "# TYPE toolcage_tenant_info gauge\n");
    for (int i = 0; rc == 0 && i < n && i < TENANTS_MAX; i++)
        rc = tc_buf_appendf(o, "toolcage_tenant_info{tenant_id=\"%s\",tenant=\"%s\"} 1\n",
                            PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
    for (size_t k = 0; rc == 0 && k < TC_ARRAY_SIZE(g); k++) {
        rc = tc_buf_appendf(o, "# HELP %s %s\n# TYPE %s gauge\n", g[k].name, g[k].help, g[k].name);
        for (int i = 0; rc == 0 && i < n && i < TENANTS_MAX; i++) {
            json_t *v = json_object_get(
                json_object_get(json_array_get(described, (size_t)i), g[k].group), g[k].field);
            if (json_is_number(v))
                rc = tc_buf_appendf(o, "%s{tenant_id=\"%s\"} %g\n", g[k].name,
                                    PQgetvalue(res, i, 0), json_number_value(v));
        }
    }
    if (rc == 0)
        rc = tc_buf_appendf(o,
                            "# HELP toolcage_tenant_metrics_complete 0 when tenants were left out"
                            " (the database did not answer, or more than %d tenants).\n"
                            "# TYPE toolcage_tenant_metrics_complete gauge\n"
                            "toolcage_tenant_metrics_complete %d\n",
                            TENANTS_MAX, res && n <= TENANTS_MAX ? 1 : 0);
    if (rc == 0)
        rc = tc_metrics_render_tenant_rejections(o);
    json_decref(described);
    PQclear(res);
    tc_db_release(r->srv->db, c);
    return rc;
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
    if (rc == 0 && r->principal.role == TC_ROLE_OPERATOR)
        rc = render_tenants(r, &out);
    enum MHD_Result ret = rc < 0
                              ? tc_respond_problem(r, 500, "internal", "Internal error", NULL,
                                                   "metrics could not be rendered")
                              : tc_respond_text(r, 200, "text/plain; version=0.0.4; charset=utf-8",
                                                out.data ? out.data : "", out.len);
    tc_buf_free(&out);
    return ret;
}
