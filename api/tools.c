#include "api/api.h"
#include "policy/policy.h"

enum MHD_Result tc_api_tools(struct tc_request *r)
{
    struct tc_policy *p = tc_server_policy(r->srv);
    json_t *tools = json_array();
    for (size_t i = 0; i < tc_policy_ntools(p); i++)
        json_array_append_new(tools, tc_tool_describe(tc_policy_tool_at(p, i)));
    tc_policy_unref(p);
    return tc_respond_json(r, 200, json_pack("{s:o}", "tools", tools));
}
