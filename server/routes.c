#include "server/routes.h"

#include "api/api.h"
#include "console/console.h"

/* Console pages: TC_ROUTE_CONSOLE | the console roles allowed. */
#define CONSOLE_PUBLIC TC_ROUTE_CONSOLE
#define CONSOLE_ANY (TC_ROUTE_CONSOLE | TC_ROLE_REVIEWER | TC_ROLE_AUDITOR | TC_ROLE_ADMIN)
#define CONSOLE_DECIDE (TC_ROUTE_CONSOLE | TC_ROLE_REVIEWER | TC_ROLE_ADMIN)
#define CONSOLE_AUDIT (TC_ROUTE_CONSOLE | TC_ROLE_AUDITOR | TC_ROLE_ADMIN)
#define CONSOLE_ADMIN (TC_ROUTE_CONSOLE | TC_ROLE_ADMIN)

const struct tc_route tc_routes[] = {
    {"POST", "/v1/execute", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_execute},
    {"POST", "/v1/prescreen", TC_ROLE_ANY, tc_api_prescreen},
    {"GET", "/v1/executions/{}", TC_ROLE_ANY, tc_api_execution_get},
    {"POST", "/v1/executions/{}/cancel", TC_ROLE_AGENT | TC_ROLE_ADMIN, tc_api_execution_cancel},
    {"GET", "/v1/tools", TC_ROLE_ANY | TC_ROLE_OPERATOR, tc_api_tools},
    /* Service-wide: operator keys only (an admin acts on its own tenant). */
    {"POST", "/v1/admin/policy/reload", TC_ROLE_OPERATOR, tc_api_policy_reload},
    {"GET", "/v1/approvals", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approvals_list},
    {"GET", "/v1/approvals/{}", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_get},
    {"POST", "/v1/approvals/{}/approve", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_approve},
    {"POST", "/v1/approvals/{}/deny", TC_ROLE_REVIEWER | TC_ROLE_ADMIN, tc_api_approval_deny},
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
    {"GET", "/healthz", 0, tc_api_healthz},
    {"GET", "/readyz", 0, tc_api_readyz},
    {"GET", "/openapi.yaml", 0, tc_api_openapi},
    {"GET", "/metrics", 0, tc_api_metrics},
    {"GET", "/console", CONSOLE_ANY, tc_console_home},
    {"GET", "/console/", CONSOLE_ANY, tc_console_home},
    {"GET", "/console/signin", CONSOLE_PUBLIC, tc_console_signin_form},
    {"POST", "/console/signin", CONSOLE_PUBLIC, tc_console_signin},
    {"POST", "/console/signout", CONSOLE_ANY, tc_console_signout},
    {"GET", "/console/static/console.css", CONSOLE_PUBLIC, tc_console_static},
    {"GET", "/console/approvals", CONSOLE_ANY, tc_console_approvals},
    {"GET", "/console/approvals/{}", CONSOLE_ANY, tc_console_approval},
    {"POST", "/console/approvals/{}/approve", CONSOLE_DECIDE, tc_console_approve},
    {"POST", "/console/approvals/{}/deny", CONSOLE_DECIDE, tc_console_deny},
    {"GET", "/console/executions", CONSOLE_ANY, tc_console_executions},
    {"GET", "/console/executions/{}", CONSOLE_ANY, tc_console_execution},
    {"GET", "/console/audit", CONSOLE_AUDIT, tc_console_audit},
    {"GET", "/console/audit/export", CONSOLE_AUDIT, tc_console_audit_export},
    {"GET", "/console/dashboard", CONSOLE_AUDIT, tc_console_dashboard},
    {"GET", "/console/admin/users", CONSOLE_ADMIN, tc_console_users},
    {"GET", "/console/admin/secrets", CONSOLE_ADMIN, tc_console_secrets},
    {NULL, NULL, 0, NULL},
};
