#include "server/routes.h"

#include "api/api.h"

const struct tc_route tc_routes[] = {
    {"POST", "/v1/execute", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_execute},
    {"POST", "/v1/prescreen", TC_ROLE_ANY, tc_api_prescreen},
    {"GET", "/v1/executions/{}", TC_ROLE_ANY, tc_api_execution_get},
    {"POST", "/v1/executions/{}/cancel", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_execution_cancel},
    {"GET", "/v1/tools", TC_ROLE_ANY, tc_api_tools},
    {"POST", "/v1/admin/policy/reload", TC_ROLE_ADMIN, tc_api_policy_reload},
    {"GET", "/v1/approvals", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approvals_list},
    {"GET", "/v1/approvals/{}", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_get},
    {"POST", "/v1/approvals/{}/approve", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_approve},
    {"POST", "/v1/approvals/{}/deny", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_deny},
    {"GET", "/v1/audit", TC_ROLE_AUDITOR | TC_ROLE_ADMIN, tc_api_audit_list},
    {"GET", "/v1/audit/export", TC_ROLE_AUDITOR | TC_ROLE_ADMIN, tc_api_audit_export},
    {"GET", "/v1/audit/verify", TC_ROLE_AUDITOR | TC_ROLE_ADMIN, tc_api_audit_verify},
    {"GET", "/v1/audit/{}", TC_ROLE_AUDITOR | TC_ROLE_ADMIN, tc_api_audit_get},
    {"GET", "/healthz", 0, tc_api_healthz},
    {"GET", "/readyz", 0, tc_api_readyz},
    {"GET", "/openapi.yaml", 0, tc_api_openapi},
    {"GET", "/metrics", 0, tc_api_metrics},
    {NULL, NULL, 0, NULL},
};
