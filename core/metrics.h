/* Prometheus metrics: fixed-size, mutex-protected tables; label values come from bounded
 * sets (route patterns, status codes, tool names from the policy), and past the table's
 * capacity new label sets fold into "other". */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"

void tc_metrics_request(const char *route, unsigned status, int64_t duration_ms);
void tc_metrics_execution(const char *tool, const char *status, int64_t duration_ms);
void tc_metrics_audit_failure(void);
/* One attempt of the outbox (server/webhook.h): kind "callback", "webhook", "slack", "email";
 * outcome "delivered", "failed" (tried again later), "given_up". */
void tc_metrics_delivery(const char *kind, const char *outcome);
/* A call refused by its tenant's quota (429 quota-exceeded): limit is the quota's name. */
void tc_metrics_quota_rejection(const char *tenant_id, const char *limit);
/* toolcage_tenant_quota_rejections_total{tenant_id, limit}: for operators only (the page
 * that names tenants is not public, api/health.c). */
int tc_metrics_render_tenant_rejections(struct tc_buf *out);

struct tc_metrics_gauges {
    unsigned sandboxes_in_flight;
    unsigned launcher_restarts;
    int64_t approvals_pending;  /* -1 when unknown */
    unsigned outcomes_unstored; /* kept by the recorder, not stored yet (server/recorder.h) */
    bool instance_locked;       /* this process holds its instance lock */
};
/* Render the text exposition format (version 0.0.4). */
int tc_metrics_render(const struct tc_metrics_gauges *g, struct tc_buf *out);
