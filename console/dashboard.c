/* The dashboard: three charts over the last 24 hours of the user's tenant, drawn as inline
 * SVG on the server. C computes numbers only (coordinates, counts); the template turns them
 * into <rect>/<text> elements through the escaping renderer, so no text reaches the SVG
 * unescaped and the page needs no script. */
#include <math.h> /* isfinite: a macro, no libm */
#include <stdio.h>
#include <string.h>

#include "execution/quota.h"
#include "common/util.h"
#include "console/web.h"
#include "core/db.h"

#define PLOT_X 48
#define PLOT_Y 12
#define PLOT_W 672
#define PLOT_H 160
#define HOURS  24

static const struct {
    const char *cls, *label;
    const char *statuses[4];
} groups[] = {
    {"s-ok", "completed", {"completed"}},
    {"s-failed", "failed (non-zero exit)", {"failed"}},
    {"s-limit", "timeout, killed or error", {"timeout", "killed", "error"}},
    {"s-wait", "waiting or running", {"pending_approval", "queued", "running"}},
    {"s-closed", "denied, expired or cancelled", {"denied", "expired", "cancelled"}},
};
#define NGROUPS ((int)TC_ARRAY_SIZE(groups))

static int group_of(const char *status)
{
    for (int g = 0; g < NGROUPS; g++)
        for (int k = 0; k < 4 && groups[g].statuses[k]; k++)
            if (strcmp(status, groups[g].statuses[k]) == 0)
                return g;
    return 2;
}

/* One decimal, without libm. */
static double tenth(double v)
{
    return (double)(long long)(v * 10 + 0.5) / 10;
}

/* A round axis maximum >= v. */
static long long nice_max(long long v)
{
    if (v <= 4)
        return 4;
    long long m = 1;
    while (m * 10 < v)
        m *= 10;
    for (long long f = 1; f <= 10; f *= 2)
        if (m * f >= v)
            return m * f;
    return m * 10;
}

static json_t *hourly_chart(PGconn *c, const char *tenant_id)
{
    const char *p[] = {tenant_id};
    PGresult *res = tc_db_exec(
        c,
        "SELECT floor(extract(epoch FROM now() - created_at) / 3600)::int, status, count(*)"
        " FROM executions WHERE tenant_id = $1 AND created_at > now() - interval '24 hours'"
        " GROUP BY 1, 2",
        1, p);
    if (!res)
        return NULL;
    long long counts[HOURS][NGROUPS] = {{0}};
    long long total = 0, max = 0;
    for (int i = 0; i < PQntuples(res); i++) {
        int64_t ago = 0, n = 0;
        tc_parse_i64(PQgetvalue(res, i, 0), 0, 1000, &ago);
        tc_parse_i64(PQgetvalue(res, i, 2), 0, INT64_MAX, &n);
        if (ago >= HOURS)
            ago = HOURS - 1;
        counts[HOURS - 1 - ago][group_of(PQgetvalue(res, i, 1))] += n;
        total += n;
    }
    PQclear(res);
    for (int h = 0; h < HOURS; h++) {
        long long s = 0;
        for (int g = 0; g < NGROUPS; g++)
            s += counts[h][g];
        if (s > max)
            max = s;
    }
    long long top = nice_max(max);
    json_t *bars = json_array(), *ticks = json_array(), *xl = json_array(), *legend = json_array();
    int slot = PLOT_W / HOURS, bw = slot - 6;
    for (int h = 0; h < HOURS; h++) {
        double y = PLOT_Y + PLOT_H;
        for (int g = 0; g < NGROUPS; g++) {
            if (!counts[h][g])
                continue;
            double hh = (double)PLOT_H * (double)counts[h][g] / (double)top;
            y -= hh;
            char title[96];
            snprintf(title, sizeof(title), "%d h ago: %lld %s", HOURS - 1 - h, counts[h][g],
                     groups[g].label);
            json_array_append_new(bars,
                                  json_pack("{s:i, s:f, s:i, s:f, s:s, s:s}", "x",
                                            PLOT_X + h * slot + 3, "y", tenth(y), "w", bw, "h",
                                            tenth(hh), "cls", groups[g].cls, "title", title));
        }
        if (h % 4 == 3) {
            char label[16];
            snprintf(label, sizeof(label), "%s", h == HOURS - 1 ? "now" : "");
            if (h != HOURS - 1)
                snprintf(label, sizeof(label), "-%d h", HOURS - 1 - h);
            json_array_append_new(
                xl, json_pack("{s:i, s:s}", "x", PLOT_X + h * slot + slot / 2, "label", label));
        }
    }
    for (int k = 0; k <= 4; k++) {
        char label[24];
        snprintf(label, sizeof(label), "%lld", top * k / 4);
        json_array_append_new(
            ticks, json_pack("{s:i, s:i, s:s}", "y", PLOT_Y + PLOT_H - PLOT_H * k / 4, "ty",
                             PLOT_Y + PLOT_H - PLOT_H * k / 4 + 4, "label", label));
    }
    for (int g = 0; g < NGROUPS; g++)
        json_array_append_new(
            legend, json_pack("{s:s, s:s}", "cls", groups[g].cls, "label", groups[g].label));
    return json_pack("{s:o, s:o, s:o, s:o, s:I, s:i, s:i, s:i, s:i}", "bars", bars, "ticks", ticks,
                     "xlabels", xl, "legend", legend, "total", (json_int_t)total, "x0", PLOT_X,
                     "x1", PLOT_X + PLOT_W, "y0", PLOT_Y, "y1", PLOT_Y + PLOT_H);
}

/* Horizontal bars: items [{label, value, text}] scaled to the largest. */
static json_t *hbars(const char *const *labels, const double *values, const char *const *texts,
                     const char *const *classes, int n)
{
    double max = 0;
    for (int i = 0; i < n; i++)
        if (values[i] > max)
            max = values[i];
    json_t *items = json_array();
    for (int i = 0; i < n; i++) {
        double w = max > 0 ? 390.0 * values[i] / max : 0; /* room for the value label */
        json_array_append_new(items,
                              json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:i}", "label", labels[i],
                                        "text", texts[i], "cls", classes[i], "y", 8 + i * 34, "ty",
                                        26 + i * 34, "w", tenth(w), "tx", 160 + (int)w + 8));
    }
    return json_pack("{s:o, s:i}", "items", items, "height", 16 + n * 34);
}

static json_t *gate_chart(PGconn *c, const char *tenant_id)
{
    const char *p[] = {tenant_id};
    PGresult *res = tc_db_exec(
        c,
        "SELECT (SELECT count(*) FROM audit_log WHERE tenant_id = $1::text AND action = 'execute'"
        "        AND record->>'decision' = 'blocked'"
        "        AND ts >= " TC_SQL_ISO(
            "now() - interval '24 hours'") "),"
                                           " (SELECT count(*) FROM approvals WHERE tenant_id = "
                                           "$1::uuid"
                                           "        AND created_at > now() - interval '24 hours'),"
                                           " (SELECT count(*) FROM approvals WHERE tenant_id = "
                                           "$1::uuid AND status = 'approved'"
                                           "        AND decided_at > now() - interval '24 hours'),"
                                           " (SELECT count(*) FROM approvals WHERE tenant_id = "
                                           "$1::uuid AND status = 'denied'"
                                           "        AND decided_at > now() - interval '24 hours')",
        1, p);
    if (!res)
        return NULL;
    static const char *const labels[] = {"blocked", "held", "approved", "denied"};
    static const char *const classes[] = {"s-limit", "s-wait", "s-ok", "s-closed"};
    double v[4];
    char t[4][24];
    const char *texts[4];
    for (int i = 0; i < 4; i++) {
        int64_t n = 0;
        tc_parse_i64(PQgetvalue(res, 0, i), 0, INT64_MAX, &n);
        v[i] = (double)n;
        snprintf(t[i], sizeof(t[i]), "%lld", (long long)n);
        texts[i] = t[i];
    }
    PQclear(res);
    return hbars(labels, v, texts, classes, 4);
}

static json_t *latency_chart(PGconn *c, const char *tenant_id)
{
    const char *p[] = {tenant_id};
    PGresult *res =
        tc_db_exec(c,
                   "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d),"
                   " percentile_cont(0.9) WITHIN GROUP (ORDER BY d),"
                   " percentile_cont(0.99) WITHIN GROUP (ORDER BY d), count(*)"
                   " FROM (SELECT (result->>'duration_ms')::float8 AS d FROM executions"
                   "       WHERE tenant_id = $1 AND finished_at > now() - interval '24 hours'"
                   "       AND jsonb_typeof(result->'duration_ms') = 'number') x",
                   1, p);
    if (!res)
        return NULL;
    static const char *const labels[] = {"p50", "p90", "p99"};
    static const char *const classes[] = {"s-ok", "s-wait", "s-limit"};
    double v[3] = {0};
    char t[3][32];
    const char *texts[3];
    for (int i = 0; i < 3; i++) {
        if (!PQgetisnull(res, 0, i))
            v[i] = strtod(PQgetvalue(res, 0, i), NULL);
        if (!isfinite(v[i]) || v[i] < 0)
            v[i] = 0;
        snprintf(t[i], sizeof(t[i]), "%.0f ms", v[i]);
        texts[i] = t[i];
    }
    int64_t n = 0;
    tc_parse_i64(PQgetvalue(res, 0, 3), 0, INT64_MAX, &n);
    PQclear(res);
    json_t *o = hbars(labels, v, texts, classes, 3);
    json_object_set_new(o, "count", json_integer(n));
    return o;
}

/* The tenant's quota and use (execution/quota.h) as table rows of text. */
static json_t *quota_rows(PGconn *c, struct tc_request *r)
{
    struct tc_quota_defaults d = tc_quota_defaults_of(r->srv->cfg);
    json_t *q = tc_quota_describe(c, r->principal.tenant_id, &d);
    if (!q)
        return NULL;
    json_t *cc = json_object_get(q, "concurrent"), *rt = json_object_get(q, "rate");
    json_t *dl = json_object_get(q, "daily"), *ss = json_object_get(q, "sessions");
    enum { N = 5 };
    char use[N][64], lim[N][64];
    const char *src[N] = {json_string_value(json_object_get(cc, "source")),
                          json_string_value(json_object_get(rt, "source")),
                          json_string_value(json_object_get(dl, "source")),
                          json_string_value(json_object_get(dl, "source")),
                          json_string_value(json_object_get(ss, "source"))};
    json_t *limits[N] = {
        json_object_get(cc, "max_concurrent"), json_object_get(rt, "rate_per_minute"),
        json_object_get(dl, "cpu_seconds_per_day"), json_object_get(dl, "wall_seconds_per_day"),
        json_object_get(ss, "max_sessions")};
    snprintf(use[0], sizeof(use[0]), "%lld running",
             (long long)json_integer_value(json_object_get(cc, "running")));
    snprintf(use[1], sizeof(use[1]), "-");
    snprintf(use[2], sizeof(use[2]), "%.1f s used",
             json_real_value(json_object_get(dl, "cpu_seconds_used")));
    snprintf(use[3], sizeof(use[3]), "%.1f s used",
             json_real_value(json_object_get(dl, "wall_seconds_used")));
    snprintf(use[4], sizeof(use[4]), "%lld open",
             (long long)json_integer_value(json_object_get(ss, "open")));
    for (int i = 0; i < N; i++) {
        if (json_is_integer(limits[i]))
            snprintf(lim[i], sizeof(lim[i]), "%lld (%s)", (long long)json_integer_value(limits[i]),
                     src[i] && strcmp(src[i], "tenant") == 0 ? "set for the tenant" : "default");
        else
            snprintf(lim[i], sizeof(lim[i]), "no limit");
    }
    static const char *const labels[N] = {"Executions running at once", "Calls per minute",
                                          "CPU seconds, last 24 hours",
                                          "Wall seconds, last 24 hours", "Sessions open at once"};
    static const char *const ids[N] = {"max_concurrent", "rate_per_minute", "cpu_seconds_per_day",
                                       "wall_seconds_per_day", "max_sessions"};
    json_t *rows = json_array();
    for (int i = 0; i < N; i++)
        json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:s}", "id", ids[i], "label",
                                              labels[i], "use", use[i], "limit", lim[i]));
    json_decref(q);
    return rows;
}

enum MHD_Result tc_console_dashboard(struct tc_request *r)
{
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_console_message(r, 503, "Unavailable", "The database is not reachable.");
    json_t *hourly = hourly_chart(c, r->principal.tenant_id);
    json_t *gate = hourly ? gate_chart(c, r->principal.tenant_id) : NULL;
    json_t *lat = gate ? latency_chart(c, r->principal.tenant_id) : NULL;
    json_t *quota = lat ? quota_rows(c, r) : NULL;
    tc_db_release(r->srv->db, c);
    if (!quota) {
        json_decref(hourly);
        json_decref(gate);
        json_decref(lat);
        return tc_console_message(r, 503, "Unavailable", "The dashboard could not be computed.");
    }
    return tc_console_page(r, 200, "dashboard",
                           json_pack("{s:o, s:o, s:o, s:o}", "hourly", hourly, "gate", gate,
                                     "latency", lat, "quota", quota));
}
