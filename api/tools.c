/* GET /v1/tools[?format=openai|anthropic]: the tools of the policy; with a format, as
 * function/tool definitions an agent framework can hand straight to its model. */
#include <string.h>

#include "api/api.h"
#include "common/util.h"
#include "execution/request.h"
#include "policy/policy.h"
#include "core/log.h"
#include "server/reload.h"

json_t *tc_api_tool_input_schema(const struct tc_tool *t, bool full)
{
    const char *what = strcmp(t->language, "python") == 0       ? "Python 3 source code to run"
                       : strcmp(t->language, "shell") == 0      ? "a bash script to run"
                       : strcmp(t->language, "javascript") == 0 ? "JavaScript source code to run"
                                                                : "the program text to run";
    json_t *schema = json_pack(
        "{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s], s:b}", "type", "object", "properties", "code",
        "type", "string", "description", what, "stdin", "type", "string", "description",
        "optional standard input", "required", "code", "additionalProperties", 0);
    if (!schema || !full)
        return schema;
    json_t *props = json_object_get(schema, "properties");
    json_object_set_new(
        props, "files",
        json_pack("{s:s, s:s, s:i, s:{s:s, s:b, s:[s, s], s:{s:{s:s, s:i, s:i, s:s}, s:{s:s},"
                  " s:{s:s, s:[s, s]}}}}",
                  "type", "array", "description", "files written into /workspace before the run",
                  "maxItems", 64, "items", "type", "object", "additionalProperties", 0, "required",
                  "path", "content", "properties", "path", "type", "string", "minLength", 1,
                  "maxLength", 255, "description", "relative to /workspace", "content", "type",
                  "string", "encoding", "type", "string", "enum", "utf8", "base64"));
    json_t *limits = json_object();
    for (int i = 0; i < TC_LIMIT__COUNT; i++)
        json_object_set_new(limits, tc_limit_names[i],
                            json_pack("{s:s, s:i, s:I, s:I}", "type", "integer", "minimum", 1,
                                      "maximum", (json_int_t)t->limits[i].max, "default",
                                      (json_int_t)t->limits[i].def));
    json_object_set_new(props, "limits",
                        json_pack("{s:s, s:s, s:b, s:o}", "type", "object", "description",
                                  "tighter limits for this call (the tool's are the maximum)",
                                  "additionalProperties", 0, "properties", limits));
    json_object_set_new(
        props, "collect",
        json_pack("{s:s, s:s, s:i, s:i, s:{s:s, s:i, s:i}}", "type", "array", "description",
                  "glob patterns of files in /workspace to return after the run", "minItems", 1,
                  "maxItems", 32, "items", "type", "string", "minLength", 1, "maxLength", 256));
    return schema;
}

/* The policy's description, and for a tool image what this server's store holds of it now. */
static json_t *describe(struct tc_request *r, const struct tc_tool *t)
{
    json_t *o = tc_tool_describe(t), *entry = NULL;
    json_t *img = json_object_get(o, "image");
    if (!img)
        return o;
    bool have = tc_exec_image(t, r->srv->cfg->state_dir, &entry) == 0 && entry;
    json_object_set_new(img, "available", json_boolean(have));
    if (have) {
        static const char *const keys[] = {"name", "digest", "config", "imported"};
        for (size_t i = 0; i < TC_ARRAY_SIZE(keys); i++)
            json_object_set(img, keys[i], json_object_get(entry, keys[i]));
    }
    json_decref(entry);
    return o;
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
            json_array_append_new(tools, describe(r, t));
        else if (strcmp(format, "openai") == 0)
            json_array_append_new(tools, json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function",
                                                   "function", "name", t->name, "description",
                                                   t->description, "parameters",
                                                   tc_api_tool_input_schema(t, false)));
        else
            json_array_append_new(tools, json_pack("{s:s, s:s, s:o}", "name", t->name,
                                                   "description", t->description, "input_schema",
                                                   tc_api_tool_input_schema(t, false)));
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
