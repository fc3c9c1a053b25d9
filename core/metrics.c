#include "core/metrics.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

static const double buckets_s[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define NBUCKETS   TC_ARRAY_SIZE(buckets_s)
#define MAX_SERIES 256

struct histogram {
    uint64_t counts[NBUCKETS + 1]; /* last: +Inf */
    double sum_s;
    uint64_t total;
};

struct series {
    char a[72], b[24]; /* label values: route/tool, status */
    uint64_t count;
};

struct hseries {
    char a[72];
    struct histogram h;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct series requests[MAX_SERIES], executions[MAX_SERIES];
static struct series tenant_rejections[MAX_SERIES]; /* tenant id, limit */
static size_t ntenant_rejections;
static struct hseries request_latency[MAX_SERIES], execution_latency[MAX_SERIES];
static size_t nrequests, nexecutions, nrequest_latency, nexecution_latency;
static uint64_t audit_failures;
static uint64_t quota_rejections;
/* deliveries of the outbox (server/webhook.h), by kind and outcome */
static const char *const delivery_kinds[] = {"callback", "webhook", "slack", "email"};
static const char *const delivery_outcomes[] = {"delivered", "failed", "given_up"};
static uint64_t deliveries[4][3];

static struct series *find(struct series *t, size_t *n, const char *a, const char *b)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(t[i].a, a) == 0 && strcmp(t[i].b, b) == 0)
            return &t[i];
    if (*n == MAX_SERIES - 1) { /* the last slot is the overflow bucket */
        struct series *o = &t[MAX_SERIES - 1];
        snprintf(o->a, sizeof(o->a), "other");
        snprintf(o->b, sizeof(o->b), "other");
        return o;
    }
    struct series *s = &t[(*n)++];
    snprintf(s->a, sizeof(s->a), "%s", a);
    snprintf(s->b, sizeof(s->b), "%s", b);
    return s;
}

static struct histogram *hfind(struct hseries *t, size_t *n, const char *a)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(t[i].a, a) == 0)
            return &t[i].h;
    size_t i = *n < MAX_SERIES - 1 ? (*n)++ : MAX_SERIES - 1;
    snprintf(t[i].a, sizeof(t[i].a), "%s", i == MAX_SERIES - 1 ? "other" : a);
    return &t[i].h;
}

static void observe(struct histogram *h, int64_t ms)
{
    double s = (double)ms / 1000.0;
    size_t i = 0;
    while (i < NBUCKETS && s > buckets_s[i])
        i++;
    h->counts[i]++;
    h->sum_s += s;
    h->total++;
}

void tc_metrics_request(const char *route, unsigned status, int64_t duration_ms)
{
    char st[8];
    snprintf(st, sizeof(st), "%u", status);
    pthread_mutex_lock(&lock);
    find(requests, &nrequests, route, st)->count++;
    observe(hfind(request_latency, &nrequest_latency, route), duration_ms);
    pthread_mutex_unlock(&lock);
}

void tc_metrics_execution(const char *tool, const char *status, int64_t duration_ms)
{
    pthread_mutex_lock(&lock);
    find(executions, &nexecutions, tool, status)->count++;
    observe(hfind(execution_latency, &nexecution_latency, tool), duration_ms);
    pthread_mutex_unlock(&lock);
}

void tc_metrics_delivery(const char *kind, const char *outcome)
{
    for (size_t k = 0; k < 4; k++)
        for (size_t o = 0; o < 3; o++)
            if (strcmp(kind, delivery_kinds[k]) == 0 &&
                strcmp(outcome, delivery_outcomes[o]) == 0) {
                pthread_mutex_lock(&lock);
                deliveries[k][o]++;
                pthread_mutex_unlock(&lock);
                return;
            }
}

void tc_metrics_audit_failure(void)
{
    pthread_mutex_lock(&lock);
    audit_failures++;
    pthread_mutex_unlock(&lock);
}

void tc_metrics_quota_rejection(const char *tenant_id, const char *limit)
{
    pthread_mutex_lock(&lock);
    quota_rejections++;
    find(tenant_rejections, &ntenant_rejections, tenant_id ? tenant_id : "", limit ? limit : "")
        ->count++;
    pthread_mutex_unlock(&lock);
}

int tc_metrics_render_tenant_rejections(struct tc_buf *o)
{
    pthread_mutex_lock(&lock);
    int r = tc_buf_appendf(o, "# HELP toolcage_tenant_quota_rejections_total Calls refused by"
                              " their tenant's quota, by tenant and limit (this process).\n"
                              "# TYPE toolcage_tenant_quota_rejections_total counter\n");
    for (size_t i = 0; r == 0 && i < ntenant_rejections; i++)
        r = tc_buf_appendf(o,
                           "toolcage_tenant_quota_rejections_total{tenant_id=\"%s\",limit=\"%s\"}"
                           " %" PRIu64 "\n",
                           tenant_rejections[i].a, tenant_rejections[i].b,
                           tenant_rejections[i].count);
    pthread_mutex_unlock(&lock);
    return r;
}

static int render_hist(struct tc_buf *o, const char *name, const char *label, struct hseries *t,
                       size_t n)
{
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        uint64_t cum = 0;
        for (size_t b = 0; b < NBUCKETS && r == 0; b++) {
            cum += t[i].h.counts[b];
            r = tc_buf_appendf(o, "%s_bucket{%s=\"%s\",le=\"%g\"} %" PRIu64 "\n", name, label,
                               t[i].a, buckets_s[b], cum);
        }
        if (r == 0)
            r = tc_buf_appendf(o,
                               "%s_bucket{%s=\"%s\",le=\"+Inf\"} %" PRIu64 "\n"
                               "%s_sum{%s=\"%s\"} %.6f\n%s_count{%s=\"%s\"} %" PRIu64 "\n",
                               name, label, t[i].a, t[i].h.total, name, label, t[i].a, t[i].h.sum_s,
                               name, label, t[i].a, t[i].h.total);
    }
    return r;
}

int tc_metrics_render(const struct tc_metrics_gauges *g, struct tc_buf *o)
{
    int r = 0;
    pthread_mutex_lock(&lock);
    r = tc_buf_appendf(o, "# HELP toolcage_http_requests_total HTTP requests by route and status.\n"
                          "# TYPE toolcage_http_requests_total counter\n");
    for (size_t i = 0; i < nrequests && r == 0; i++)
        r = tc_buf_appendf(o,
                           "toolcage_http_requests_total{route=\"%s\",status=\"%s\"} %" PRIu64 "\n",
                           requests[i].a, requests[i].b, requests[i].count);
    if (r == 0)
        r = tc_buf_appendf(o, "# HELP toolcage_http_request_duration_seconds Latency by route.\n"
                              "# TYPE toolcage_http_request_duration_seconds histogram\n");
    if (r == 0)
        r = render_hist(o, "toolcage_http_request_duration_seconds", "route", request_latency,
                        nrequest_latency);
    if (r == 0)
        r = tc_buf_appendf(o, "# HELP toolcage_executions_total Executions by tool and status.\n"
                              "# TYPE toolcage_executions_total counter\n");
    for (size_t i = 0; i < nexecutions && r == 0; i++)
        r = tc_buf_appendf(o, "toolcage_executions_total{tool=\"%s\",status=\"%s\"} %" PRIu64 "\n",
                           executions[i].a, executions[i].b, executions[i].count);
    if (r == 0)
        r = tc_buf_appendf(o,
                           "# HELP toolcage_execution_duration_seconds Sandbox wall time by tool.\n"
                           "# TYPE toolcage_execution_duration_seconds histogram\n");
    if (r == 0)
        r = render_hist(o, "toolcage_execution_duration_seconds", "tool", execution_latency,
                        nexecution_latency);
    if (r == 0)
        r = tc_buf_appendf(
            o,
            "# HELP toolcage_audit_write_failures_total Audit records that could not be written.\n"
            "# TYPE toolcage_audit_write_failures_total counter\n"
            "toolcage_audit_write_failures_total %" PRIu64 "\n"
            "# HELP toolcage_quota_rejections_total Calls refused by their tenant's quota"
            " (tenants are not named on this unauthenticated page).\n"
            "# TYPE toolcage_quota_rejections_total counter\n"
            "toolcage_quota_rejections_total %" PRIu64 "\n"
            "# HELP toolcage_sandboxes_in_flight Sandboxes running now.\n"
            "# TYPE toolcage_sandboxes_in_flight gauge\n"
            "toolcage_sandboxes_in_flight %u\n"
            "# HELP toolcage_launcher_restarts_total Times the launcher was restarted.\n"
            "# TYPE toolcage_launcher_restarts_total counter\n"
            "toolcage_launcher_restarts_total %u\n",
            audit_failures, quota_rejections, g->sandboxes_in_flight, g->launcher_restarts);
    if (r == 0)
        r = tc_buf_appendf(
            o,
            "# HELP toolcage_outcomes_unstored Execution outcomes kept in memory or on"
            " disk until the database takes them.\n"
            "# TYPE toolcage_outcomes_unstored gauge\n"
            "toolcage_outcomes_unstored %u\n"
            "# HELP toolcage_instance_locked 1 while this process holds its instance"
            " lock (it runs nothing new without it).\n"
            "# TYPE toolcage_instance_locked gauge\n"
            "toolcage_instance_locked %d\n",
            g->outcomes_unstored, g->instance_locked ? 1 : 0);
    if (r == 0)
        r = tc_buf_appendf(o, "# HELP toolcage_deliveries_total Attempts of callbacks and reviewer"
                              " notifications, by kind and outcome (failed: tried again later).\n"
                              "# TYPE toolcage_deliveries_total counter\n");
    for (size_t k = 0; r == 0 && k < 4; k++)
        for (size_t d = 0; r == 0 && d < 3; d++)
            r = tc_buf_appendf(
                o, "toolcage_deliveries_total{kind=\"%s\",outcome=\"%s\"} %" PRIu64 "\n",
                delivery_kinds[k], delivery_outcomes[d], deliveries[k][d]);
    if (r == 0 && g->approvals_pending >= 0)
        r = tc_buf_appendf(
            o,
            "# HELP toolcage_approvals_pending Approval requests waiting for a decision.\n"
            "# TYPE toolcage_approvals_pending gauge\n"
            "toolcage_approvals_pending %" PRId64 "\n",
            g->approvals_pending);
    pthread_mutex_unlock(&lock);
    return r;
}
