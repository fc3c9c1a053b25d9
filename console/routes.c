/* The console's pages: path, method, the console roles allowed (0: public, the sign-in page
 * and the stylesheet), handler. A session cookie authenticates them, and every POST carries
 * a CSRF token and a same-origin Origin (tc_console_dispatch, console/web.c). */
#include "console/console.h"

#include "server/auth.h"

#define CONSOLE_ANY    (TC_ROLE_REVIEWER | TC_ROLE_AUDITOR | TC_ROLE_ADMIN)
#define CONSOLE_DECIDE (TC_ROLE_REVIEWER | TC_ROLE_ADMIN)
#define CONSOLE_AUDIT  (TC_ROLE_AUDITOR | TC_ROLE_ADMIN)
#define CONSOLE_ADMIN  TC_ROLE_ADMIN

static const struct tc_route routes[] = {
    {"GET", "/console", CONSOLE_ANY, tc_console_home},
    {"GET", "/console/", CONSOLE_ANY, tc_console_home},
    {"GET", "/console/signin", 0, tc_console_signin_form},
    {"POST", "/console/signin", 0, tc_console_signin},
    {"POST", "/console/signout", CONSOLE_ANY, tc_console_signout},
    {"GET", "/console/static/console.css", 0, tc_console_static},
    {"GET", "/console/approvals", CONSOLE_ANY, tc_console_approvals},
    {"GET", "/console/approvals/{}", CONSOLE_ANY, tc_console_approval},
    {"POST", "/console/approvals/{}/approve", CONSOLE_DECIDE, tc_console_approve},
    {"POST", "/console/approvals/{}/deny", CONSOLE_DECIDE, tc_console_deny},
    {"GET", "/console/egress-asks", CONSOLE_ANY, tc_console_egress_asks},
    {"GET", "/console/egress-asks/{}", CONSOLE_ANY, tc_console_egress_ask},
    {"POST", "/console/egress-asks/{}/decision", CONSOLE_DECIDE, tc_console_egress_decide},
    {"GET", "/console/executions", CONSOLE_ANY, tc_console_executions},
    {"GET", "/console/executions/{}", CONSOLE_ANY, tc_console_execution},
    {"GET", "/console/executions/{}/receipt", CONSOLE_ANY, tc_console_execution_receipt},
    {"GET", "/console/audit", CONSOLE_AUDIT, tc_console_audit},
    {"GET", "/console/audit/export", CONSOLE_AUDIT, tc_console_audit_export},
    {"GET", "/console/dashboard", CONSOLE_AUDIT, tc_console_dashboard},
    {"GET", "/console/admin/users", CONSOLE_ADMIN, tc_console_users},
    {"GET", "/console/admin/secrets", CONSOLE_ADMIN, tc_console_secrets},
    {NULL, NULL, 0, NULL},
};

const struct tc_route_group tc_console_routes = {
    .prefix = "/console/",
    .routes = routes,
    .dispatch = tc_console_dispatch,
    .not_found = tc_console_not_found,
};
