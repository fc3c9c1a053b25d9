/* GET /v1/tools[?format=openai|anthropic]: the tools of the policy; with a format, as
 * function/tool definitions an agent framework can hand straight to its model. */
#include <string.h>

#include "api/api.h"
#include "policy/policy.h"
#include "core/log.h"
#include "server/reload.h"

static json_t *input_schema(const struct tc_tool *t)
{
    const char *what = strcmp(t->language, "python") == 0       ? "Python 3 source code to run"
                       : strcmp(t->language, "shell") == 0      ? "a bash script to run"
                       : strcmp(t->language, "javascript") == 0 ? "JavaScript source code to run"
                                                                : "the program text to run";
    return json_pack("{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s], s:b}", "type", "object",
                     "properties", "code", "type", "string", "description", what, "stdin", "type",
                     "string", "description", "optional standard input", "required", "code",
                     "additionalProperties", 0);
}

enum MHD_Result tc_api_tools(struct tc_request *r)
{
    const char *format = tc_request_query(r, "format");
    if (format && strcmp(format, "openai") && strcmp(format, "anthropic"))
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "format must be openai or anthropic");
    struct tc_policy *p = tc_server_policy(r->srv);
    json_t *tools = json_array();
    for (size_t i = 0; i < tc_policy_ntools(p); i++) {
        const struct tc_tool *t = tc_policy_tool_at(p, i);
        if (!format)
            json_array_append_new(tools, tc_tool_describe(t));
        else if (strcmp(format, "openai") == 0)
            json_array_append_new(tools, json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function",
                                                   "function", "name", t->name, "description",
                                                   t->description, "parameters", input_schema(t)));
        else
            json_array_append_new(tools,
                                  json_pack("{s:s, s:s, s:o}", "name", t->name, "description",
                                            t->description, "input_schema", input_schema(t)));
    }
    tc_policy_unref(p);
    return tc_respond_json(r, 200, json_pack("{s:o}", "tools", tools));
}

enum MHD_Result tc_api_policy_reload(struct tc_request *r)
{
    json_t *actor = json_pack("{s:s, s:s, s:s}", "type", "api_key", "id", r->principal.key_id,
                              "role", tc_role_name(r->principal.role));
    json_t *errors = NULL, *info = NULL;
    int rc = tc_server_reload_policy(r->srv, actor, &errors, &info);
    json_decref(actor);
    if (rc == -EINVAL) {
        json_t *items = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e)
        {
            const char *s = json_string_value(e), *sep = s ? strstr(s, ": ") : NULL;
            json_array_append_new(items, json_pack("{s:s%, s:s}", "path", s ? s : "",
                                                   sep ? (size_t)(sep - s) : 0, "message",
                                                   sep ? sep + 2 : (s ? s : "")));
        }
        json_decref(errors);
        tc_log(TC_LOG_WARN, "policy reload refused", "{s:s}", "request_id", r->request_id);
        return tc_respond_problem(r, 422, "policy-invalid", "Policy refused", items,
                                  "the policy file is not valid; the old policy stays");
    }
    if (rc < 0)
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the reload could not be audited, so it was not applied");
    json_object_set_new(info, "status", json_string("applied"));
    tc_log(TC_LOG_INFO, "policy reloaded", "{s:s, s:O}", "request_id", r->request_id, "result",
           info);
    return tc_respond_json(r, 200, info);
}
