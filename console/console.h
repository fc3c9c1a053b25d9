/* The web console: server-rendered HTML pages for reviewers, auditors and admins.
 * Its routes (console/routes.c) are a group of their own: server/http.c hands a match to
 * tc_console_dispatch(), which authenticates by session cookie (not API keys), checks the
 * route's roles, the CSRF token and the Origin of every POST, then calls the handler.
 * See docs/console.md. */
#pragma once
#include "server/http.h"

extern const struct tc_route_group tc_console_routes;

enum MHD_Result tc_console_dispatch(struct tc_request *r, const struct tc_route *rt);
/* An HTML 404 for unknown paths under /console. */
enum MHD_Result tc_console_not_found(struct tc_request *r);

/* Handlers (see console/routes.c for paths and roles). */
enum MHD_Result tc_console_home(struct tc_request *r);
enum MHD_Result tc_console_signin_form(struct tc_request *r);
enum MHD_Result tc_console_signin(struct tc_request *r);
enum MHD_Result tc_console_signout(struct tc_request *r);
enum MHD_Result tc_console_static(struct tc_request *r);
enum MHD_Result tc_console_approvals(struct tc_request *r);
enum MHD_Result tc_console_approval(struct tc_request *r);
enum MHD_Result tc_console_approve(struct tc_request *r);
enum MHD_Result tc_console_deny(struct tc_request *r);
enum MHD_Result tc_console_egress_asks(struct tc_request *r);
enum MHD_Result tc_console_egress_ask(struct tc_request *r);
enum MHD_Result tc_console_egress_decide(struct tc_request *r);
enum MHD_Result tc_console_executions(struct tc_request *r);
enum MHD_Result tc_console_execution(struct tc_request *r);
enum MHD_Result tc_console_execution_receipt(struct tc_request *r);
enum MHD_Result tc_console_audit(struct tc_request *r);
enum MHD_Result tc_console_audit_export(struct tc_request *r);
enum MHD_Result tc_console_dashboard(struct tc_request *r);
enum MHD_Result tc_console_users(struct tc_request *r);
enum MHD_Result tc_console_secrets(struct tc_request *r);
