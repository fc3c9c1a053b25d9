/* HTTP handlers, one file per resource. */
#pragma once
#include "server/http.h"

enum MHD_Result tc_api_execute(struct tc_request *r);
enum MHD_Result tc_api_prescreen(struct tc_request *r);
enum MHD_Result tc_api_execution_get(struct tc_request *r);
enum MHD_Result tc_api_tools(struct tc_request *r);
enum MHD_Result tc_api_policy_reload(struct tc_request *r);
enum MHD_Result tc_api_healthz(struct tc_request *r);
enum MHD_Result tc_api_readyz(struct tc_request *r);
enum MHD_Result tc_api_openapi(struct tc_request *r);
enum MHD_Result tc_api_metrics(struct tc_request *r);
enum MHD_Result tc_api_approvals_list(struct tc_request *r);
enum MHD_Result tc_api_approval_get(struct tc_request *r);
enum MHD_Result tc_api_approval_approve(struct tc_request *r);
enum MHD_Result tc_api_approval_deny(struct tc_request *r);
enum MHD_Result tc_api_execution_cancel(struct tc_request *r);
enum MHD_Result tc_api_audit_list(struct tc_request *r);
enum MHD_Result tc_api_audit_get(struct tc_request *r);
enum MHD_Result tc_api_audit_export(struct tc_request *r);
enum MHD_Result tc_api_audit_verify(struct tc_request *r);
