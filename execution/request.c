#include "execution/request.h"
#include "execution/plots.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"
#include "image/image.h"
#include "policy/redact.h"
#include "sandbox/workspace.h"

#define MAX_ERRORS 100 /* a body of 300,000 unknown fields must not make a 15 MB answer */

static void add_error(json_t *errors, const char *path, const char *message)
{
    size_t n = json_array_size(errors);
    if (n < MAX_ERRORS)
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", path, "message", message));
    else if (n == MAX_ERRORS)
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "", "message",
                                                "further errors are not listed"));
}

static bool tool_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

/* A string field without NUL and within max bytes. */
static bool check_string(json_t *v, const char *path, size_t max, bool required, json_t *errors)
{
    char msg[96];
    if (!v) {
        if (required)
            add_error(errors, path, "is required");
        return !required;
    }
    if (!json_is_string(v)) {
        add_error(errors, path, "must be a string");
        return false;
    }
    size_t len = json_string_length(v);
    if (memchr(json_string_value(v), '\0', len)) {
        add_error(errors, path, "must not contain NUL characters");
        return false;
    }
    if (len > max) {
        snprintf(msg, sizeof(msg), "must be at most %zu bytes", max);
        add_error(errors, path, msg);
        return false;
    }
    return true;
}

/* A collect pattern: relative, no '..' component (the walk never yields one, and a pattern
 * that looks like it escapes /workspace is a mistake worth reporting). */
static bool collect_pattern_ok(const char *p)
{
    if (p[0] == '/')
        return false;
    for (const char *s = p; *s;) {
        size_t len = strcspn(s, "/");
        if (len == 2 && s[0] == '.' && s[1] == '.')
            return false;
        s += len;
        if (*s == '/')
            s++;
    }
    return true;
}

static void check_collect(json_t *collect, json_t *errors)
{
    char path[48];
    size_t i;
    json_t *p;

    if (!collect)
        return;
    if (!json_is_array(collect)) {
        add_error(errors, "collect", "must be an array");
        return;
    }
    if (json_array_size(collect) < 1 || json_array_size(collect) > TC_EXEC_MAX_COLLECT) {
        add_error(errors, "collect", "must have 1 to 32 entries");
        return;
    }
    json_array_foreach(collect, i, p)
    {
        snprintf(path, sizeof(path), "collect[%zu]", i);
        if (!check_string(p, path, TC_EXEC_MAX_COLLECT_PATTERN, true, errors))
            continue;
        if (json_string_length(p) == 0)
            add_error(errors, path, "must not be empty");
        else if (!collect_pattern_ok(json_string_value(p)))
            add_error(errors, path, "must be a pattern relative to /workspace without '..' parts");
    }
}

bool tc_exec_callback_url_ok(const char *url)
{
    const char *host = NULL;
    if (strlen(url) > 2048)
        return false;
    if (strncmp(url, "http://", 7) == 0)
        host = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        host = url + 8;
    if (!host || !*host || *host == '/' || *host == ':')
        return false;
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '\\')
            return false;
    /* credentials in the URL would end up in logs and the audit trail */
    const char *end = strpbrk(host, "/?#");
    return memchr(host, '@', end ? (size_t)(end - host) : strlen(host)) == NULL;
}

void tc_exec_check_files(json_t *files, json_t *errors)
{
    const char *key;
    json_t *v;
    char path[128];

    if (files && !json_is_array(files)) {
        add_error(errors, "files", "must be an array");
    } else if (files && json_array_size(files) > TC_EXEC_MAX_FILES) {
        add_error(errors, "files", "must have at most 64 entries");
    } else if (files) {
        size_t i;
        json_t *f;
        json_array_foreach(files, i, f)
        {
            snprintf(path, sizeof(path), "files[%zu]", i);
            if (!json_is_object(f)) {
                add_error(errors, path, "must be an object");
                continue;
            }
            json_object_foreach(f, key, v)
            {
                if (strcmp(key, "path") && strcmp(key, "content") && strcmp(key, "encoding")) {
                    snprintf(path, sizeof(path), "files[%zu].%.80s", i, key);
                    add_error(errors, path, "unknown field");
                }
            }
            snprintf(path, sizeof(path), "files[%zu].path", i);
            json_t *fp = json_object_get(f, "path");
            if (check_string(fp, path, 255, true, errors) && !tc_ws_path_ok(json_string_value(fp)))
                add_error(errors, path, "must be a relative path without '.', '..' or empty parts");
            snprintf(path, sizeof(path), "files[%zu].content", i);
            json_t *content = json_object_get(f, "content");
            json_t *enc = json_object_get(f, "encoding");
            const char *encs = json_is_string(enc) ? json_string_value(enc) : "utf8";
            snprintf(path, sizeof(path), "files[%zu].encoding", i);
            if (enc && (!json_is_string(enc) || (strcmp(encs, "utf8") && strcmp(encs, "base64"))))
                add_error(errors, path, "must be \"utf8\" or \"base64\"");
            snprintf(path, sizeof(path), "files[%zu].content", i);
            if (check_string(content, path, TC_EXEC_MAX_FILE_BYTES * 4 / 3 + 4, true, errors) &&
                strcmp(encs, "base64") == 0) {
                unsigned char *tmp = malloc(json_string_length(content) + 1);
                size_t bin_len = 0;
                if (!tmp ||
                    sodium_base642bin(tmp, json_string_length(content) + 1,
                                      json_string_value(content), json_string_length(content), NULL,
                                      &bin_len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0)
                    add_error(errors, path, "must be valid base64");
                free(tmp);
            }
        }
    }
}

int tc_exec_file_bytes(json_t *file, unsigned char **ret, size_t *ret_len)
{
    json_t *content = json_object_get(file, "content");
    const char *enc = json_string_value(json_object_get(file, "encoding"));
    const char *c = json_string_value(content);
    size_t n = json_string_length(content);
    if (!c)
        return -EINVAL;
    if (enc && strcmp(enc, "base64") == 0) {
        unsigned char *out = malloc(n + 1);
        size_t len = 0;
        if (!out)
            return -ENOMEM;
        if (sodium_base642bin(out, n + 1, c, n, NULL, &len, NULL, sodium_base64_VARIANT_ORIGINAL) !=
            0) {
            free(out);
            return -EINVAL;
        }
        *ret = out, *ret_len = len;
        return 0;
    }
    *ret = malloc(n + 1);
    if (!*ret)
        return -ENOMEM;
    memcpy(*ret, c, n + 1);
    *ret_len = n;
    return 0;
}

int tc_exec_request_parse(json_t *body, struct tc_exec_request *ret_req, json_t **ret_errors)
{
    json_t *errors = json_array();
    const char *key;
    json_t *v;
    char path[128];

    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "tool") && strcmp(key, "code") && strcmp(key, "stdin") &&
            strcmp(key, "files") && strcmp(key, "limits") && strcmp(key, "callback_url") &&
            strcmp(key, "collect") && strcmp(key, "async") && strcmp(key, "stream") &&
            strcmp(key, "cancel_on_disconnect")) {
            snprintf(path, sizeof(path), "%.100s", key);
            add_error(errors, path, "unknown field");
        }
    }
    json_t *tool = json_object_get(body, "tool");
    if (check_string(tool, "tool", 64, true, errors) && !tool_name_ok(json_string_value(tool)))
        add_error(errors, "tool", "must match ^[a-z][a-z0-9_-]{0,63}$");
    check_string(json_object_get(body, "code"), "code", TC_EXEC_MAX_CODE_BYTES, true, errors);
    check_string(json_object_get(body, "stdin"), "stdin", TC_EXEC_MAX_STDIN_BYTES, false, errors);

    json_t *async = json_object_get(body, "async");
    if (async && !json_is_boolean(async))
        add_error(errors, "async", "must be a boolean");
    json_t *stream = json_object_get(body, "stream");
    if (stream && !json_is_boolean(stream))
        add_error(errors, "stream", "must be a boolean");
    json_t *cod = json_object_get(body, "cancel_on_disconnect");
    if (cod && !json_is_boolean(cod))
        add_error(errors, "cancel_on_disconnect", "must be a boolean");

    json_t *cb = json_object_get(body, "callback_url");
    if (check_string(cb, "callback_url", 2048, false, errors) && cb &&
        !tc_exec_callback_url_ok(json_string_value(cb)))
        add_error(errors, "callback_url", "must be an http or https URL without credentials");

    tc_exec_check_files(json_object_get(body, "files"), errors);

    check_collect(json_object_get(body, "collect"), errors);

    json_t *limits = json_object_get(body, "limits");
    if (limits && !json_is_object(limits)) {
        add_error(errors, "limits", "must be an object");
    } else if (limits) {
        json_object_foreach(limits, key, v)
        {
            int id = -1;
            for (int i = 0; i < TC_LIMIT__COUNT; i++)
                if (strcmp(key, tc_limit_names[i]) == 0)
                    id = i;
            snprintf(path, sizeof(path), "limits.%.100s", key);
            if (id < 0)
                add_error(errors, path, "unknown field");
            else if (!json_is_integer(v) || json_integer_value(v) < 1)
                add_error(errors, path, "must be a positive integer");
        }
    }

    if (json_array_size(errors) > 0) {
        *ret_errors = errors;
        return -EINVAL;
    }
    json_decref(errors);
    *ret_req = (struct tc_exec_request){
        .tool = json_string_value(tool),
        .body = json_incref(body),
    };
    return 0;
}

void tc_exec_request_done(struct tc_exec_request *req)
{
    if (!req)
        return;
    json_decref(req->body);
    req->body = NULL;
}

int tc_exec_limits(const struct tc_tool *tool, const struct tc_exec_request *req,
                   int64_t ret_limits[TC_LIMIT__COUNT], json_t **ret_errors)
{
    json_t *strings = NULL;
    int r = tc_tool_limits(tool, json_object_get(req->body, "limits"), ret_limits, &strings);
    if (r < 0 && ret_errors) {
        /* the policy layer speaks "path: message"; the API speaks {path, message} */
        json_t *errors = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(strings, i, e)
        {
            const char *s = json_string_value(e), *sep = strstr(s, ": ");
            char path[128];
            snprintf(path, sizeof(path), "%.*s", sep ? (int)(sep - s) : 0, s);
            add_error(errors, path, sep ? sep + 2 : s);
        }
        *ret_errors = errors;
    }
    json_decref(strings);
    return r;
}

json_t *tc_exec_limits_json(const int64_t limits[TC_LIMIT__COUNT])
{
    json_t *o = json_object();
    for (int i = 0; i < TC_LIMIT__COUNT; i++)
        json_object_set_new(o, tc_limit_names[i], json_integer(limits[i]));
    return o;
}

static json_t *b64_string(const void *data, size_t len)
{
    size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
    char *s = malloc(n);
    if (!s)
        return NULL;
    sodium_bin2base64(s, n, data, len, sodium_base64_VARIANT_ORIGINAL);
    json_t *j = json_string(s);
    free(s);
    return j;
}

int tc_exec_image(const struct tc_tool *tool, const char *state_dir, json_t **ret_image)
{
    *ret_image = NULL;
    return tool->image ? tc_image_find(state_dir, tool->image, ret_image) : 0;
}

/* Does the policy's own env (not a default) set the variable kv sets? */
static bool policy_sets(const struct tc_tool *tool, const char *kv)
{
    size_t n = strcspn(kv, "=");
    for (size_t i = 0; i < tool->nenv; i++)
        if (!(tool->env_default && tool->env_default[i]) && strncmp(tool->env[i], kv, n) == 0 &&
            tool->env[i][n] == '=')
            return true;
    return false;
}

/* Where the program starts: /workspace, or with "workdir": "image" the image's WorkingDir,
 * cleaned as a path is (tc_path_clean; relative to / as in OCI; "/" if it cannot be). A
 * WorkingDir the image does not hold fails the call at the sandbox's start (the root is
 * read-only: it cannot be made). */
static const char *image_cwd(const struct tc_tool *tool, json_t *image, char *out, size_t outlen)
{
    if (!tool->workdir_image || !image)
        return "/workspace";
    if (tc_path_clean(json_string_value(json_object_get(image, "workdir")), out, outlen) < 0)
        return "/";
    return out;
}

static bool image_sets(json_t *image, const char *kv)
{
    size_t n = strcspn(kv, "="), i;
    json_t *e;
    json_array_foreach(json_object_get(image, "env"), i, e)
    {
        const char *s = json_string_value(e);
        if (s && strncmp(s, kv, n) == 0 && s[n] == '=')
            return true;
    }
    return false;
}

json_t *tc_exec_build_spec(const struct tc_tool *tool, const struct tc_exec_request *req,
                           const int64_t L[TC_LIMIT__COUNT], const char *id, json_t *image)
{
    json_t *body = req->body;
    char code_path[256], cwd[1100];
    snprintf(code_path, sizeof(code_path), "/workspace/%s", tool->code_file);

    /* A python interpreter given the code file as its script runs it through our runner
     * (execution/plots.h): figures (plots), and the gate that lets the launcher start it
     * before the call: only when the file is the script (once, after interpreter options
     * alone: not an argument of -m or -c). A plots tool gets the runner in any case. */
    const char *prog = tool->ncommand ? strrchr(tool->command[0], '/') : NULL;
    size_t ncode = 0;
    bool script = true;
    for (size_t i = 1; i < tool->ncommand; i++) {
        const char *a = tool->command[i];
        if (strcmp(a, "{code_file}") == 0)
            ncode++;
        else if (ncode)
            continue;
        else if (strcmp(a, "-X") == 0 || strcmp(a, "-W") == 0)
            i++; /* an option and its value */
        else if (strcmp(a, "-m") == 0 || strcmp(a, "-c") == 0 || a[0] != '-')
            script = false; /* a module, a command, or an argument before the script */
    }
    bool python = tool->language && prog && strcmp(tool->language, "python") == 0 &&
                  strncmp(prog + 1, "python", 6) == 0;
    bool gated = !req->driver && ncode == 1 && script && (python || tool->plots);
    bool runner = gated || tool->plots;
    json_t *argv = json_array();
    for (size_t i = 0; i < tool->ncommand; i++) {
        bool is_code = strcmp(tool->command[i], "{code_file}") == 0;
        if (is_code && runner) {
            json_array_append_new(argv, json_string("/workspace/" TC_PLOTS_RUNNER));
            if (tool->plots)
                json_array_append_new(argv, json_string("--plots"));
            if (gated)
                json_array_append_new(argv, json_string("--gate")); /* spec "gate", below */
        }
        json_array_append_new(argv, json_string(is_code ? code_path : tool->command[i]));
    }
    json_t *env = json_array(), *ie;
    size_t k;
    /* A tool image's Env over our defaults (PATH, HOME, LANG), under the policy's own env;
     * credentials replace their names later (tc_grant_apply_spec), the launcher sets the
     * proxy and CA variables. */
    json_array_foreach(json_object_get(image, "env"), k, ie)
    {
        const char *kv = json_string_value(ie);
        if (kv && strchr(kv, '=') && kv[0] != '=' && !policy_sets(tool, kv))
            json_array_append(env, ie);
    }
    for (size_t i = 0; i < tool->nenv; i++)
        if (!(tool->env_default && tool->env_default[i]) || !image_sets(image, tool->env[i]))
            json_array_append_new(env, json_string(tool->env[i]));

    json_t *files = json_array();
    json_t *code = json_object_get(body, "code");
    json_array_append_new(files,
                          json_pack("{s:s, s:o, s:i}", "path", tool->code_file, "content_b64",
                                    b64_string(json_string_value(code), json_string_length(code)),
                                    "mode", 0644));
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(body, "files"), i, f)
    {
        json_t *content = json_object_get(f, "content");
        const char *enc = json_string_value(json_object_get(f, "encoding"));
        json_t *b64 = enc && strcmp(enc, "base64") == 0
                          ? json_incref(content)
                          : b64_string(json_string_value(content), json_string_length(content));
        json_array_append_new(files,
                              json_pack("{s:O, s:o, s:i}", "path", json_object_get(f, "path"),
                                        "content_b64", b64, "mode", 0644));
    }

    if (runner) /* last: the runner is ours, whatever the request's files hold */
        json_array_append_new(
            files, json_pack("{s:s, s:o, s:i}", "path", TC_PLOTS_RUNNER, "content_b64",
                             b64_string(tc_plots_runner, strlen(tc_plots_runner)), "mode", 0444));

    json_t *mounts = json_array();
    for (size_t m = 0; m < tool->nmounts; m++)
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "source", tool->mounts[m].source,
                                                "target", tool->mounts[m].target, "writable",
                                                tool->mounts[m].writable));

    json_t *limits = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "wall_ms",
        (json_int_t)L[TC_LIMIT_TIMEOUT_MS], "cpu_ms", (json_int_t)L[TC_LIMIT_CPU_MS],
        "memory_bytes", (json_int_t)(L[TC_LIMIT_MEMORY_MB] << 20), "pids",
        (json_int_t)L[TC_LIMIT_PIDS], "file_size_bytes",
        (json_int_t)(L[TC_LIMIT_FILE_SIZE_MB] << 20), "nofile", (json_int_t)L[TC_LIMIT_OPEN_FILES],
        "output_bytes", (json_int_t)L[TC_LIMIT_OUTPUT_BYTES], "workspace_bytes",
        (json_int_t)(L[TC_LIMIT_WORKSPACE_MB] << 20), "tmp_bytes",
        (json_int_t)(L[TC_LIMIT_TMP_MB] << 20));

    /* "none", or the allowlist the launcher's egress proxy enforces (docs/sandbox.md) */
    json_t *network = NULL;
    if (tool->network_none) {
        network = json_string("none");
    } else {
        json_t *allow = json_array();
        for (size_t a = 0; a < tool->nnetwork_allow; a++)
            json_array_append_new(allow, json_string(tool->network_allow[a]));
        network = json_pack("{s:o}", "allow", allow);
        if (network && tool->network_ask)
            json_object_set_new(network, "ask_ms",
                                json_integer(tool->network_ask_timeout_s * 1000));
        if (network && tool->network_ask_private)
            json_object_set_new(network, "ask_private", json_true());
    }

    json_t *spec = json_pack(
        "{s:s, s:s, s:o, s:o, s:s, s:o, s:o, s:s, s:o, s:o}", "id", id, "backend",
        tool->backend == TC_BACKEND_GVISOR    ? "gvisor"
        : tool->backend == TC_BACKEND_MICROVM ? "microvm"
                                              : "native",
        "argv", argv, "env", env, "cwd", image_cwd(tool, image, cwd, sizeof(cwd)), "files", files,
        "mounts", mounts, "hostname", "toolcage", "network", network, "limits", limits);
    if (!spec)
        return NULL;
    if (image)
        json_object_set_new(spec, "image",
                            json_pack("{s:O}", "root", json_object_get(image, "root")));
    /* the runner waits for the call (its first stdin byte), so the launcher may start it
     * before the call: "warm" (dropped again when credentials are leased, they may be in env) */
    if (gated) {
        json_object_set_new(spec, "gate", json_true());
        json_object_set_new(spec, "warm", json_true());
    }
    json_t *collect = json_object_get(body, "collect");
    if (tool->plots) {
        json_t *c = collect ? json_copy(collect) : json_array();
        json_array_append_new(c, json_string(TC_PLOTS_PATTERN));
        json_object_set_new(spec, "collect", c);
    } else if (collect) {
        json_object_set(spec, "collect", collect);
    }
    json_t *in = json_object_get(body, "stdin");
    if (in)
        json_object_set_new(spec, "stdin_b64",
                            b64_string(json_string_value(in), json_string_length(in)));
    return spec;
}

void tc_exec_spec_tenant(json_t *spec, const char *tenant_id)
{
    if (spec && json_is_true(json_object_get(spec, "warm")) && tenant_id)
        json_object_set_new(spec, "warm_group", json_string(tenant_id));
}

int tc_exec_redactor(const struct tc_tool *tool, const char *state_dir,
                     struct tc_redactor **ret_redactor)
{
    json_t *redact = json_object_get(json_object_get(tool->raw, "output"), "redact");
    const char *off[64], *on[64];
    size_t noff = 0, non = 0, i;
    json_t *v;
    json_array_foreach(json_object_get(redact, "disable"), i, v)
    {
        if (noff < TC_ARRAY_SIZE(off) && json_is_string(v))
            off[noff++] = json_string_value(v);
    }
    json_array_foreach(json_object_get(redact, "enable"), i, v)
    {
        if (non < TC_ARRAY_SIZE(on) && json_is_string(v))
            on[non++] = json_string_value(v);
    }
    const char *paths[] = {state_dir};
    return tc_redactor_new(off, noff, on, non, paths, state_dir && state_dir[0] == '/' ? 1 : 0,
                           ret_redactor);
}

/* How many bytes utf8_string() takes at bin[i] (1..4), or 0 when it makes U+FFFD of bin[i];
 * -1 when that depends on bytes after bin[len - 1]. */
static int utf8_step(const unsigned char *bin, size_t i, size_t len)
{
    size_t n = 1;
    if (bin[i] >= 0x80) {
        n = bin[i] >= 0xf0 ? 4 : bin[i] >= 0xe0 ? 3 : 2;
        if (i + n > len)
            return -1;
        if (!tc_utf8_valid((const char *)bin + i, n, false))
            n = 0;
    } else if (bin[i] == 0) {
        n = 0;
    }
    return (int)n;
}

size_t tc_exec_text_settled(const void *data, size_t len)
{
    const unsigned char *bin = data;
    size_t i = 0;
    while (i < len) {
        int n = utf8_step(bin, i, len);
        if (n < 0)
            return i;
        i += n ? (size_t)n : 1;
    }
    return len;
}

static json_t *utf8_string(const unsigned char *bin, size_t len);

json_t *tc_exec_text(const void *data, size_t len)
{
    return utf8_string(data, len);
}

/* Bytes -> a JSON string that is valid UTF-8 and holds no NUL: invalid bytes and NUL become
 * U+FFFD, so the result can be stored in jsonb. */
static json_t *utf8_string(const unsigned char *bin, size_t len)
{
    struct tc_buf out;
    tc_buf_init(&out, SIZE_MAX / 2);
    size_t i = 0;
    while (i < len) {
        int step = utf8_step(bin, i, len);
        size_t n = step > 0 ? (size_t)step : 0; /* at the end, an unfinished sequence: U+FFFD */
        int rc = n ? tc_buf_append(&out, bin + i, n) : tc_buf_append(&out, "\xef\xbf\xbd", 3);
        if (rc < 0)
            break;
        i += n ? n : 1;
    }
    json_t *j = json_stringn(out.data ? out.data : "", out.len);
    tc_buf_free(&out);
    return j;
}

/* Redact raw bytes first (a secret may sit next to invalid UTF-8), then sanitise. */
static json_t *filtered_string(const struct tc_exec_filter *f, const unsigned char *bin, size_t len,
                               json_t *counts)
{
    if (!f || !f->redactor)
        return utf8_string(bin, len);
    char *red = NULL;
    size_t rlen = 0;
    if (tc_redact_buffer(f->redactor, f->secrets, f->nsecrets, (const char *)bin, len, &red, &rlen,
                         counts) < 0)
        return json_string("[REDACTED:error]"); /* fail closed: nothing unscrubbed leaves */
    json_t *j = utf8_string((const unsigned char *)red, rlen);
    free(red);
    return j;
}

json_t *tc_exec_redact_string(const struct tc_exec_filter *f, const char *s, size_t len,
                              json_t *counts)
{
    return filtered_string(f, (const unsigned char *)s, len, counts);
}

json_t *tc_exec_network_entry(const struct tc_exec_filter *f, json_t *att, bool bytes,
                              json_t *counts)
{
    static const char *const keep[] = {"port",       "allowed",        "reason",    "resolved",
                                       "bytes_sent", "bytes_received", "credential"};
    if (!json_is_object(att))
        return NULL;
    json_t *e = json_object(), *host = json_object_get(att, "host");
    if (!e)
        return NULL;
    json_object_set_new(e, "host",
                        json_is_string(host)
                            ? filtered_string(f, (const unsigned char *)json_string_value(host),
                                              json_string_length(host), counts)
                            : json_null());
    for (size_t i = 0; i < TC_ARRAY_SIZE(keep); i++) {
        json_t *v = json_object_get(att, keep[i]);
        if (v && (bytes || strncmp(keep[i], "bytes_", 6) != 0))
            json_object_set(e, keep[i], v);
    }
    return e;
}

static json_t *output_string(const struct tc_exec_filter *f, json_t *b64, json_t *counts)
{
    const char *s = json_string_value(b64);
    size_t slen = s ? strlen(s) : 0;
    unsigned char *bin = malloc(slen + 1);
    size_t len = 0;
    if (!bin)
        return NULL;
    if (slen && sodium_base642bin(bin, slen + 1, s, slen, NULL, &len, NULL,
                                  sodium_base64_VARIANT_ORIGINAL) != 0)
        len = 0;
    json_t *j = filtered_string(f, bin, len, counts);
    free(bin);
    return j;
}

/* Collected bytes are text when they are valid UTF-8 without NUL; a file cut at a cap may
 * end inside a character, which is then dropped (*ret_len is the text's length). */
static bool text_len(const unsigned char *bin, size_t len, bool truncated, size_t *ret_len)
{
    if (tc_utf8_valid((const char *)bin, len, false)) {
        *ret_len = len;
        return true;
    }
    for (size_t k = 1; truncated && k <= 3 && k <= len; k++) {
        unsigned char c = bin[len - k];
        if (c < 0x80)
            break;
        if (c >= 0xc0) { /* the lead byte of the last, incomplete character */
            size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            if (need > k && tc_utf8_valid((const char *)bin, len - k, false)) {
                *ret_len = len - k;
                return true;
            }
            break;
        }
    }
    return false;
}

static void add_counts(json_t *counts, json_t *more)
{
    const char *rule;
    json_t *n;
    json_object_foreach(more, rule, n) json_object_set_new(
        counts, rule,
        json_integer(json_integer_value(json_object_get(counts, rule)) + json_integer_value(n)));
}

/* Binary content is returned byte for byte or not at all: splicing "[REDACTED:...]" into a
 * binary would corrupt it and may leave the rest of an encoded secret readable. So the raw
 * bytes go through the same redactor (leased secrets in every form it knows, and the
 * tool's rules); if anything matches, the content is withheld ("" and *ret_withheld) and
 * the matches are counted like any other redaction. A redactor failure withholds too. */
static json_t *binary_content(const struct tc_exec_filter *f, const unsigned char *bin, size_t len,
                              json_t *counts, bool *ret_withheld)
{
    *ret_withheld = false;
    if (f && f->redactor) {
        json_t *found = json_object();
        char *red = NULL;
        size_t rlen = 0;
        int rc = found ? tc_redact_buffer(f->redactor, f->secrets, f->nsecrets, (const char *)bin,
                                          len, &red, &rlen, found)
                       : -ENOMEM;
        free(red);
        if (rc < 0 || json_object_size(found) > 0) {
            add_counts(counts, found);
            json_decref(found);
            *ret_withheld = true;
            return json_string("");
        }
        json_decref(found);
    }
    return b64_string(bin, len);
}

int tc_exec_redact_file(const struct tc_exec_filter *f, const unsigned char *bin, size_t len,
                        json_t *counts, char **ret, size_t *ret_len)
{
    size_t tlen = 0;
    if (!f || !f->redactor) {
        *ret = malloc(len + 1);
        if (!*ret)
            return -ENOMEM;
        memcpy(*ret, bin, len);
        (*ret)[len] = '\0';
        *ret_len = len;
        return 0;
    }
    if (text_len(bin, len, false, &tlen))
        return tc_redact_buffer(f->redactor, f->secrets, f->nsecrets, (const char *)bin, len, ret,
                                ret_len, counts) < 0
                   ? -EACCES /* fail closed */
                   : 0;
    bool withheld = false;
    json_t *b64 = binary_content(f, bin, len, counts, &withheld);
    json_decref(b64);
    if (withheld || !b64)
        return withheld ? -EACCES : -ENOMEM;
    return tc_exec_redact_file(NULL, bin, len, counts, ret, ret_len);
}

static int cmp_file_path(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "path")),
                  json_string_value(json_object_get(*(json_t *const *)b, "path")));
}

/* The launcher's collected files [{path, content_b64, size, truncated}] as the API's
 * [{path, size, truncated, encoding, content, withheld}], sorted by path. Text goes through
 * its own redaction stream (tc_redact_buffer is one stream), like stdout; so does the path,
 * which the sandboxed code chose. NULL on ENOMEM. */
static json_t *collected_files(const struct tc_exec_filter *f, json_t *files, json_t *counts)
{
    size_t n = json_array_size(files), k = 0, i;
    json_t **items = calloc(n ? n : 1, sizeof(*items)), *e, *out = NULL;
    if (!items)
        return NULL;
    json_array_foreach(files, i, e)
    {
        json_t *path = json_object_get(e, "path"), *b64 = json_object_get(e, "content_b64");
        if (!json_is_string(path))
            continue;
        const char *s = json_is_string(b64) ? json_string_value(b64) : "";
        size_t slen = strlen(s), len = 0, tlen = 0;
        unsigned char *bin = malloc(slen + 1);
        if (!bin)
            goto out;
        if (slen && sodium_base642bin(bin, slen + 1, s, slen, NULL, &len, NULL,
                                      sodium_base64_VARIANT_ORIGINAL) != 0)
            len = 0;
        bool truncated = json_is_true(json_object_get(e, "truncated")), withheld = false;
        json_int_t size = json_integer_value(json_object_get(e, "size"));
        bool text = text_len(bin, len, truncated, &tlen);
        json_t *content = text ? filtered_string(f, bin, tlen, counts)
                               : binary_content(f, bin, len, counts, &withheld);
        free(bin);
        items[k] =
            json_pack("{s:o, s:I, s:b, s:s, s:o, s:b}", "path",
                      filtered_string(f, (const unsigned char *)json_string_value(path),
                                      json_string_length(path), counts),
                      "size", size < 0 ? (json_int_t)0 : size, "truncated", truncated, "encoding",
                      text ? "utf8" : "base64", "content", content, "withheld", withheld);
        if (!items[k])
            goto out;
        k++;
    }
    qsort(items, k, sizeof(*items), cmp_file_path);
    out = json_array();
    for (i = 0; out && i < k; i++) {
        json_array_append_new(out, items[i]);
        items[i] = NULL;
    }
out:
    for (i = 0; i < k; i++)
        json_decref(items[i]);
    free(items);
    return out;
}

/* Plots (execution/plots.h): the collected files under .toolcage/ are not the program's files;
 * its figures become outputs [{mime, data}] (a PNG signature required; withheld, like a
 * collected binary file, if a redaction rule matches in its bytes). files: a new array of the
 * rest. */
static json_t *split_outputs(const struct tc_exec_filter *f, json_t *files, json_t *counts,
                             json_t **ret_rest)
{
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    json_t *outputs = json_array(), *rest = json_array(), *e;
    size_t i;
    json_array_foreach(files, i, e)
    {
        const char *path = json_string_value(json_object_get(e, "path"));
        if (!path || strncmp(path, TC_PLOTS_DIR "/", sizeof(TC_PLOTS_DIR)) != 0) {
            json_array_append(rest, e);
            continue;
        }
        if (strncmp(path, TC_PLOTS_OUTPUTS_DIR, sizeof(TC_PLOTS_OUTPUTS_DIR) - 1) != 0 ||
            json_is_true(json_object_get(e, "truncated")))
            continue;
        const char *s = json_string_value(json_object_get(e, "content_b64")) ?: "";
        size_t slen = strlen(s), len = 0;
        unsigned char *bin = malloc(slen + 1);
        if (bin && slen &&
            sodium_base642bin(bin, slen + 1, s, slen, NULL, &len, NULL,
                              sodium_base64_VARIANT_ORIGINAL) == 0 &&
            len > sizeof(png) && memcmp(bin, png, sizeof(png)) == 0) {
            bool withheld = false;
            json_t *data = binary_content(f, bin, len, counts, &withheld);
            if (withheld)
                json_decref(data), data = NULL;
            /* "path" orders them (fig-001, fig-002, ...: the order they were drawn) and goes */
            json_t *o = json_pack("{s:s, s:s, s:o?, s:b}", "path", path, "mime", "image/png",
                                  "data", data, "withheld", withheld);
            if (o)
                json_array_append_new(outputs, o);
        }
        free(bin);
    }
    size_t n = json_array_size(outputs);
    json_t **v = n ? calloc(n, sizeof(*v)) : NULL;
    if (v) {
        for (i = 0; i < n; i++)
            v[i] = json_incref(json_array_get(outputs, i));
        qsort(v, n, sizeof(*v), cmp_file_path);
        json_array_clear(outputs);
        for (i = 0; i < n; i++) {
            json_object_del(v[i], "path");
            json_array_append_new(outputs, v[i]);
        }
        free(v);
    } else {
        json_array_foreach(outputs, i, e) json_object_del(e, "path");
    }
    *ret_rest = rest;
    return outputs;
}

static json_t *get_or_null(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v ? json_incref(v) : json_null();
}

json_t *tc_exec_view(const char *id, const char *tool, json_t *result,
                     const int64_t limits[TC_LIMIT__COUNT], const char *created_at,
                     const char *finished_at, const struct tc_exec_filter *filter, json_t *findings)
{
    json_t *v = json_object();
    json_t *counts = json_object();
    json_object_set_new(v, "id", json_string(id));
    json_object_set_new(v, "tool", json_string(tool));
    json_t *status = json_object_get(result, "status");
    json_object_set_new(v, "status",
                        json_string(json_is_string(status) ? json_string_value(status) : "error"));
    json_object_set_new(v, "exit_code", get_or_null(result, "exit_code"));
    json_object_set_new(v, "signal", get_or_null(result, "signal"));
    json_object_set_new(v, "stdout",
                        output_string(filter, json_object_get(result, "stdout_b64"), counts));
    json_object_set_new(v, "stderr",
                        output_string(filter, json_object_get(result, "stderr_b64"), counts));
    json_object_set_new(v, "stdout_truncated",
                        json_boolean(json_is_true(json_object_get(result, "stdout_truncated"))));
    json_object_set_new(v, "stderr_truncated",
                        json_boolean(json_is_true(json_object_get(result, "stderr_truncated"))));
    json_t *rest = NULL;
    json_t *outputs = split_outputs(filter, json_object_get(result, "files"), counts, &rest);
    json_t *files = collected_files(filter, rest, counts);
    json_decref(rest);
    json_object_set_new(v, "files", files ? files : json_array());
    json_object_set_new(v, "outputs", outputs ? outputs : json_array());
    json_object_set_new(v, "files_truncated",
                        json_boolean(json_is_true(json_object_get(result, "files_incomplete"))));
    json_object_set_new(v, "pids_limit_hit",
                        json_boolean(json_is_true(json_object_get(result, "pids_limit_hit"))));
    json_object_set_new(v, "workspace_full",
                        json_boolean(json_is_true(json_object_get(result, "workspace_full"))));
    json_object_set_new(v, "warm", json_boolean(json_is_true(json_object_get(result, "warm"))));
    static const char *const ints[] = {"duration_ms", "cpu_ms", "memory_peak_bytes"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(ints); i++)
        json_object_set_new(v, ints[i],
                            json_integer(json_integer_value(json_object_get(result, ints[i]))));
    json_object_set_new(v, "killed_reason", get_or_null(result, "killed_reason"));
    json_object_set_new(v, "limits", tc_exec_limits_json(limits));
    /* The launcher speaks in its own units (wall_ms, memory_bytes); the API in the policy's. */
    static const char *const spec_names[TC_LIMIT__COUNT] = {
        [TC_LIMIT_TIMEOUT_MS] = "wall_ms",
        [TC_LIMIT_CPU_MS] = "cpu_ms",
        [TC_LIMIT_MEMORY_MB] = "memory_bytes",
        [TC_LIMIT_PIDS] = "pids",
        [TC_LIMIT_OUTPUT_BYTES] = "output_bytes",
        [TC_LIMIT_FILE_SIZE_MB] = "file_size_bytes",
        [TC_LIMIT_WORKSPACE_MB] = "workspace_bytes",
        [TC_LIMIT_TMP_MB] = "tmp_bytes",
        [TC_LIMIT_OPEN_FILES] = "nofile"};
    json_t *enforced = json_object_get(result, "enforced"), *en = json_object();
    for (int i = 0; i < TC_LIMIT__COUNT; i++) {
        json_t *m = json_object_get(enforced, spec_names[i]);
        if (json_is_string(m))
            json_object_set(en, tc_limit_names[i], m);
    }
    json_t *iso = json_object_get(enforced, "isolation"); /* microvm_kvm, microvm_tcg */
    if (json_is_string(iso))
        json_object_set(en, "isolation", iso);
    json_object_set_new(v, "enforced", en);
    json_t *pv = json_object_get(result, "policy_violations");
    json_object_set_new(v, "policy_violations", json_is_array(pv) ? json_incref(pv) : json_array());
    /* Egress proxy attempts (sandbox.h). Hosts come from the sandboxed code: redacted too. */
    json_t *net = json_object_get(result, "network"), *netv = json_array(), *att;
    size_t ai;
    json_array_foreach(net, ai, att)
    {
        json_t *entry = tc_exec_network_entry(filter, att, true, counts);
        if (entry)
            json_array_append_new(netv, entry);
    }
    json_object_set_new(v, "network", netv);
    json_t *err = json_object_get(result, "error");
    json_object_set_new(v, "error",
                        json_is_string(err)
                            ? filtered_string(filter, (const unsigned char *)json_string_value(err),
                                              json_string_length(err), counts)
                            : json_null());
    json_object_set_new(v, "findings",
                        json_is_array(findings) ? json_incref(findings) : json_array());
    json_object_set_new(v, "redactions", counts);
    json_object_set_new(v, "created_at", json_string(created_at));
    json_object_set_new(v, "finished_at", finished_at ? json_string(finished_at) : json_null());
    return v;
}
