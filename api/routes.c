/* The JSON API's routes: path, method, the roles allowed (0: public), handler. API keys
 * authenticate them (tc_auth_bearer_dispatch, server/auth.h). */
#include "api/api.h"

#include "server/auth.h"

static const struct tc_route routes[] = {
    {"POST", "/v1/execute", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_execute},
    {"POST", "/v1/prescreen", TC_ROLE_ANY, tc_api_prescreen},
    {"GET", "/v1/executions", TC_ROLE_ANY, tc_api_executions_list},
    {"GET", "/v1/executions/{}", TC_ROLE_ANY, tc_api_execution_get},
    {"GET", "/v1/executions/{}/events", TC_ROLE_ANY, tc_api_execution_events},
    {"GET", "/v1/executions/{}/receipt", TC_ROLE_ANY, tc_api_execution_receipt},
    {"POST", "/v1/executions/{}/cancel", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_execution_cancel},
    {"POST", "/v1/sessions", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_session_create},
    {"GET", "/v1/sessions", TC_ROLE_ANY, tc_api_sessions_list},
    {"GET", "/v1/sessions/{}", TC_ROLE_ANY, tc_api_session_get},
    {"DELETE", "/v1/sessions/{}", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_session_delete},
    {"POST", "/v1/sessions/{}/execute", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_session_execute},
    {"GET", "/v1/sessions/{}/files", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_session_files_list},
    /* {*}: the rest of the path, '/' included */
    {"PUT", "/v1/sessions/{}/files/{*}", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_session_file_put},
    {"GET", "/v1/sessions/{}/files/{*}", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_session_file_get},
    {"DELETE", "/v1/sessions/{}/files/{*}", TC_ROLE_AGENT | TC_ROLE_ADMIN,
     tc_api_session_file_delete},
    {"GET", "/v1/tools", TC_ROLE_ANY | TC_ROLE_OPERATOR, tc_api_tools},
    /* Service-wide: operator keys only (an admin acts on its own tenant). */
    {"POST", "/v1/admin/policy/reload", TC_ROLE_OPERATOR, tc_api_policy_reload},
    {"PUT", "/v1/admin/quotas/{}", TC_ROLE_OPERATOR, tc_api_quota_put},
    /* A tenant's own quota; an operator names the tenant. */
    {"GET", "/v1/quota", TC_ROLE_ANY | TC_ROLE_OPERATOR, tc_api_quota_get},
    {"GET", "/v1/approvals", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approvals_list},
    {"GET", "/v1/notifications", TC_ROLE_ADMIN, tc_api_notifications_get},
    {"PUT", "/v1/notifications", TC_ROLE_ADMIN, tc_api_notifications_put},
    {"GET", "/v1/approvals/{}", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_get},
    {"POST", "/v1/approvals/{}/approve", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_approve},
    {"POST", "/v1/approvals/{}/deny", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_deny},
    /* connections held at the egress proxy for a reviewer (network.ask) */
    {"GET", "/v1/egress-asks", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_egress_asks_list},
    {"GET", "/v1/egress-asks/{}", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_egress_ask_get},
    {"POST", "/v1/egress-asks/{}/decision", TC_ROLE_REVIEWER | TC_ROLE_ADMIN,
     tc_api_egress_ask_decide},
    /* Auditors and admins read their tenant's trail, operators every tenant's. */
    {"GET", "/v1/audit", TC_ROLE_AUDITOR | TC_ROLE_ADMIN | TC_ROLE_OPERATOR, tc_api_audit_list},
    {"GET", "/v1/audit/export", TC_ROLE_AUDITOR | TC_ROLE_ADMIN | TC_ROLE_OPERATOR,
     tc_api_audit_export},
    {"GET", "/v1/audit/verify", TC_ROLE_AUDITOR | TC_ROLE_ADMIN | TC_ROLE_OPERATOR,
     tc_api_audit_verify},
    {"GET", "/v1/audit/{}", TC_ROLE_AUDITOR | TC_ROLE_ADMIN | TC_ROLE_OPERATOR, tc_api_audit_get},
    {"POST", "/v1/audit/hash", TC_ROLE_AUDITOR | TC_ROLE_ADMIN, tc_api_audit_hash},
    {"GET", "/v1/secrets", TC_ROLE_ADMIN, tc_api_secrets_list},
    {"GET", "/v1/secrets/{}", TC_ROLE_ADMIN, tc_api_secret_get},
    {"PUT", "/v1/secrets/{}", TC_ROLE_ADMIN, tc_api_secret_put},
    {"DELETE", "/v1/secrets/{}", TC_ROLE_ADMIN, tc_api_secret_delete},
    {"POST", "/v1/credentials", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_credentials_issue},
    {"GET", "/v1/credentials/keys", 0, tc_api_credentials_keys},
    {"POST", "/v1/credentials/introspect", TC_ROLE_ANY, tc_api_credentials_introspect},
    {"POST", "/v1/credentials/{}/revoke", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_credentials_revoke},
    /* MCP (api/mcp.c): tool calls like POST /v1/execute, as JSON-RPC */
    {"POST", "/mcp", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_mcp},
    {"DELETE", "/mcp", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_mcp_delete},
    {"GET", "/healthz", 0, tc_api_healthz},
    {"GET", "/readyz", 0, tc_api_readyz},
    {"GET", "/openapi.yaml", 0, tc_api_openapi},
    /* public; with an operator key, per-tenant series too */
    {"GET", "/metrics", TC_ROLE_KEY_OPTIONAL | TC_ROLE_OPERATOR, tc_api_metrics},
    {NULL, NULL, 0, NULL},
};

const struct tc_route_group tc_api_routes = {
    .prefix = "",
    .routes = routes,
    .dispatch = tc_auth_bearer_dispatch,
    .not_found = NULL,
};

/* The health listener's (TOOLCAGE_HEALTH_PORT): nothing there waits for anything but a bounded
 * ping of the database (readiness). */
static const struct tc_route health_routes[] = {
    {"GET", "/healthz", 0, tc_api_healthz},
    {"GET", "/readyz", 0, tc_api_readyz},
    {NULL, NULL, 0, NULL},
};

const struct tc_route_group tc_api_health_routes = {
    .prefix = "",
    .routes = health_routes,
    .dispatch = tc_auth_bearer_dispatch,
    .not_found = NULL,
};
