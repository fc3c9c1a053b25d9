/* Unit tests of the tool policy loader (policy/policy.c). One line per case: "ok - name" or
 * "not ok - name", then "N passed, N failed". Fixtures: tests/unit/policy/. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy.h"

static int npassed, nfailed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "#   %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);           \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

static void run(const char *name, bool (*fn)(void))
{
    bool ok = fn();
    printf("%s - %s\n", ok ? "ok" : "not ok", name);
    fflush(stdout);
    if (ok)
        npassed++;
    else
        nfailed++;
}

static const char *source_dir(void)
{
    const char *s = getenv("TOOLCAGE_SOURCE_DIR");
    if (s && *s)
        return s;
    /* run by hand from a build directory inside the source tree */
    return access("examples/policy.json", F_OK) == 0 ? "." : "..";
}

static void source_path(char *out, size_t size, const char *rel)
{
    int n = snprintf(out, size, "%s/%s", source_dir(), rel);
    if (n < 0 || (size_t)n >= size)
        out[0] = '\0';
}

static void dump_errors(const json_t *errors)
{
    size_t i;
    json_t *v;

    if (!errors) {
        fprintf(stderr, "#   (no errors array)\n");
        return;
    }
    json_array_foreach(errors, i, v) fprintf(stderr, "#   error: %s\n", json_string_value(v));
}

/* True if errors holds exactly this string; dumps them all otherwise. */
static bool has_error(const json_t *errors, const char *want)
{
    size_t i;
    json_t *v;

    json_array_foreach(errors, i, v) if (json_is_string(v) &&
                                         strcmp(json_string_value(v), want) == 0) return true;
    fprintf(stderr, "#   missing error: %s\n", want);
    dump_errors(errors);
    return false;
}

static bool has_error_prefix(const json_t *errors, const char *want)
{
    size_t i;
    json_t *v;

    json_array_foreach(errors, i,
                       v) if (json_is_string(v) &&
                              strncmp(json_string_value(v), want, strlen(want)) == 0) return true;
    fprintf(stderr, "#   missing error starting with: %s\n", want);
    dump_errors(errors);
    return false;
}

static int load_str(const char *text, struct tc_policy **ret, json_t **errors)
{
    return tc_policy_load_buffer(text, strlen(text), ret, errors);
}

/* A policy with one tool "t" = {"description", "command"} plus the given extra members
 * (extra replaces the default command when it starts with one). */
static int load_tool(json_t **errors, struct tc_policy **ret, const char *extra)
{
    char buf[16384];
    bool own_cmd = strncmp(extra, "\"command\"", 9) == 0;
    int n = snprintf(buf, sizeof(buf),
                     "{\"version\": 1, \"tools\": {\"t\": {\"description\": \"d\"%s%s%s}}}",
                     own_cmd ? "" : ", \"command\": [\"/bin/true\"]", extra[0] ? ", " : "", extra);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return -E2BIG;
    return load_str(buf, ret, errors);
}

/* Expect loading with `extra` to fail with (at least) the given message. */
static bool tool_fails_with(const char *extra, const char *want)
{
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    int r = load_tool(&errors, &p, extra);
    bool ok = r == -EINVAL && p == NULL && has_error(errors, want);

    if (r != -EINVAL)
        fprintf(stderr, "#   load returned %d for: %s\n", r, extra);
    json_decref(errors);
    tc_policy_unref(p);
    return ok;
}

static bool tool_loads(const char *extra)
{
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    int r = load_tool(&errors, &p, extra);

    if (r != 0) {
        fprintf(stderr, "#   load returned %d for: %s\n", r, extra);
        dump_errors(errors);
    }
    json_decref(errors);
    tc_policy_unref(p);
    return r == 0;
}

static bool env_has(const struct tc_tool *t, const char *entry)
{
    for (size_t i = 0; i < t->nenv; i++)
        if (strcmp(t->env[i], entry) == 0)
            return true;
    return false;
}

/* ---- cases --------------------------------------------------------------------------------- */

static bool test_example_loads(void)
{
    char path[4096];
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    const struct tc_tool *t;
    int r;

    source_path(path, sizeof(path), "examples/policy.json");
    r = tc_policy_load(path, &p, &errors);
    if (r != 0)
        dump_errors(errors);
    CHECK(r == 0);
    CHECK(errors == NULL);
    CHECK(tc_policy_ntools(p) >= 3);
    /* sorted by name */
    for (size_t i = 1; i < tc_policy_ntools(p); i++)
        CHECK(strcmp(tc_policy_tool_at(p, i - 1)->name, tc_policy_tool_at(p, i)->name) < 0);

    t = tc_policy_tool(p, "python");
    CHECK(t);
    CHECK(strcmp(t->language, "python") == 0);
    CHECK(t->ncommand == 4);
    CHECK(strcmp(t->command[0], "/usr/bin/python3") == 0);
    CHECK(strcmp(t->command[3], "{code_file}") == 0);
    CHECK(strcmp(t->code_file, "main.py") == 0);
    CHECK(t->network_none && t->nnetwork_allow == 0);
    CHECK(t->backend == TC_BACKEND_NATIVE && t->tier == TC_TIER_AUTO && !t->irreversible);
    CHECK(t->limits[TC_LIMIT_TIMEOUT_MS].def == 10000 &&
          t->limits[TC_LIMIT_TIMEOUT_MS].max == 60000);
    CHECK(t->limits[TC_LIMIT_MEMORY_MB].def == 256 && t->limits[TC_LIMIT_MEMORY_MB].max == 1024);
    CHECK(t->limits[TC_LIMIT_OUTPUT_BYTES].def == 1048576 &&
          t->limits[TC_LIMIT_OUTPUT_BYTES].max == 8388608);
    CHECK(t->limits[TC_LIMIT_OPEN_FILES].def == 256 && t->limits[TC_LIMIT_OPEN_FILES].max == 1024);
    CHECK(env_has(t, "PATH=/usr/local/bin:/usr/bin:/bin"));
    CHECK(env_has(t, "HOME=/workspace"));
    CHECK(env_has(t, "LANG=C.UTF-8"));
    CHECK(t->raw && json_is_object(json_object_get(t->raw, "prescreen")));
    CHECK(t->runtime == NULL);

    t = tc_policy_tool(p, "shell");
    CHECK(t);
    CHECK(strcmp(t->command[0], "/bin/bash") == 0 && strcmp(t->code_file, "main.sh") == 0);
    CHECK(strcmp(t->language, "shell") == 0);

    t = tc_policy_tool(p, "deploy");
    CHECK(t);
    CHECK(t->irreversible && t->tier == TC_TIER_HUMAN_APPROVE);
    CHECK(strcmp(t->language, "shell") == 0);
    CHECK(strstr(t->description, "approval"));
    /* a bare integer is default == max; unset limits take the strict built-ins */
    CHECK(t->limits[TC_LIMIT_TIMEOUT_MS].def == 30000 &&
          t->limits[TC_LIMIT_TIMEOUT_MS].max == 30000);
    CHECK(t->limits[TC_LIMIT_TMP_MB].def == tc_limit_builtin[TC_LIMIT_TMP_MB]);
    CHECK(t->limits[TC_LIMIT_TMP_MB].max == tc_limit_builtin[TC_LIMIT_TMP_MB]);
    CHECK(strlen(tc_policy_digest(p)) == 64);
    tc_policy_unref(p);
    return true;
}

static bool test_full_fixture(void)
{
    char path[4096];
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    const struct tc_tool *t;
    int r;

    source_path(path, sizeof(path), "tests/unit/policy/full.json");
    r = tc_policy_load(path, &p, &errors);
    if (r != 0)
        dump_errors(errors);
    CHECK(r == 0);
    CHECK(tc_policy_ntools(p) == 2);
    CHECK(strcmp(tc_policy_tool_at(p, 0)->name, "awk") == 0);
    CHECK(strcmp(tc_policy_tool_at(p, 1)->name, "node") == 0);
    CHECK(tc_policy_tool_at(p, 2) == NULL);

    t = tc_policy_tool(p, "awk");
    CHECK(t && strcmp(t->language, "other") == 0);
    CHECK(strcmp(t->code_file, "main.txt") == 0);
    CHECK(t->nmounts == 0 && t->network_none && t->nenv == 3);
    for (int i = 0; i < TC_LIMIT__COUNT; i++)
        CHECK(t->limits[i].def == tc_limit_builtin[i] && t->limits[i].max == tc_limit_builtin[i]);

    t = tc_policy_tool(p, "node");
    CHECK(t && strcmp(t->language, "javascript") == 0 && t->tier == TC_TIER_ASSISTED);
    CHECK(t->limits[TC_LIMIT_MEMORY_MB].def == 512 && t->limits[TC_LIMIT_MEMORY_MB].max == 512);
    CHECK(t->limits[TC_LIMIT_TIMEOUT_MS].def == 2000 &&
          t->limits[TC_LIMIT_TIMEOUT_MS].max == 20000);
    CHECK(t->limits[TC_LIMIT_PIDS].def == tc_limit_builtin[TC_LIMIT_PIDS]);
    /* the tool's PATH replaces the default; the rest of the defaults stay; sorted by name */
    CHECK(t->nenv == 5);
    CHECK(strcmp(t->env[0], "EMPTY=") == 0);
    CHECK(strcmp(t->env[1], "HOME=/workspace") == 0);
    CHECK(strcmp(t->env[2], "LANG=C.UTF-8") == 0);
    CHECK(strcmp(t->env[3], "NODE_ENV=production") == 0);
    CHECK(strcmp(t->env[4], "PATH=/opt/node/bin:/usr/bin:/bin") == 0);
    CHECK(t->nmounts == 3);
    CHECK(strcmp(t->mounts[0].source, "/opt/node") == 0 && !t->mounts[0].writable);
    CHECK(strcmp(t->mounts[1].target, "/cache") == 0 && t->mounts[1].writable);
    CHECK(!t->mounts[2].writable); /* mode defaults to "ro" */
    CHECK(!t->network_none && t->nnetwork_allow == 4);
    CHECK(strcmp(t->network_allow[1], "*.example.com") == 0); /* lowercased */
    CHECK(strcmp(t->network_allow[2], "10.0.0.7:8080") == 0);
    tc_policy_unref(p);
    return true;
}

static bool test_all_errors_at_once(void)
{
    char path[4096];
    struct tc_policy *p = (struct tc_policy *)0x1;
    json_t *errors = NULL;
    int r;

    source_path(path, sizeof(path), "tests/unit/policy/many_errors.json");
    r = tc_policy_load(path, &p, &errors);
    CHECK(r == -EINVAL);
    CHECK(p == (struct tc_policy *)0x1); /* untouched on failure */
    CHECK(json_is_array(errors));
    CHECK(has_error(errors, "tools.python.language: must be one of \"python\", \"shell\", "
                            "\"javascript\" or \"other\""));
    CHECK(has_error(errors,
                    "tools.python.command[0]: must be an absolute path (the program to run)"));
    CHECK(has_error(errors, "tools.python.code_file: must be a file name, not a path (no '/')"));
    CHECK(has_error(errors, "tools.python.tier: must be one of \"auto\", \"assisted\", "
                            "\"human_approve\" or \"manual_only\""));
    CHECK(has_error(errors, "tools.python.irreversible: must be true or false"));
    CHECK(
        has_error(errors, "tools.python.limits.memory_mb: must be an integer between 1 and 65536"));
    CHECK(has_error(errors, "tools.python.limits.pids: default (10) exceeds max (5)"));
    CHECK(has_error(errors, "tools.python.limits.gpus: unknown key"));
    CHECK(has_error(errors, "tools.python.env[\"1BAD\"]: variable name must match "
                            "[A-Za-z_][A-Za-z0-9_]* (at most 128 bytes)"));
    CHECK(has_error(errors, "tools.python.env.GOOD: must be a string"));
    CHECK(has_error(errors, "tools.python.filesystem[0].source: must be an absolute path"));
    CHECK(has_error(errors, "tools.python.filesystem[0].target: must not be /proc or under it "
                            "(reserved by the sandbox)"));
    CHECK(has_error(errors, "tools.python.filesystem[0].mode: must be one of \"ro\" or \"rw\""));
    CHECK(has_error(errors, "tools.python.network.allow[0]: \"bad host\" is not a host, host:port, "
                            "*.domain or *.domain:port"));
    CHECK(has_error(
        errors,
        "tools.python.network.allow[1]: \"example.com:0\" has an invalid port (must be 1..65535)"));
    CHECK(has_error(errors, "tools.python.foo: unknown key"));
    CHECK(has_error(errors, "tools.Bad: tool name must match [a-z][a-z0-9_-]{0,63}"));
    CHECK(has_error(errors, "extra: unknown key"));
    CHECK(json_array_size(errors) == 18);
    json_decref(errors);
    return true;
}

static bool test_syntax_error_position(void)
{
    char path[4096];
    struct tc_policy *p = NULL;
    json_t *errors = NULL;

    source_path(path, sizeof(path), "tests/unit/policy/syntax_error.json");
    CHECK(tc_policy_load(path, &p, &errors) == -EINVAL);
    CHECK(json_array_size(errors) == 1);
    CHECK(has_error_prefix(errors, "(root): invalid JSON at line 4, column 30: "));
    json_decref(errors);

    /* duplicate keys are refused, not silently merged */
    CHECK(load_str("{\"version\": 1, \"version\": 1, \"tools\": {}}", &p, &errors) == -EINVAL);
    CHECK(has_error_prefix(errors, "(root): invalid JSON at line 1"));
    CHECK(strstr(json_string_value(json_array_get(errors, 0)), "duplicate"));
    json_decref(errors);
    CHECK(p == NULL);
    return true;
}

static bool test_unknown_keys_every_level(void)
{
    const char *doc =
        "{\"version\": 1, \"x0\": 1, \"tools\": {\"t\": {\"description\": \"d\", \"command\": "
        "[\"/bin/true\"],"
        " \"x1\": 1,"
        " \"limits\": {\"x2\": 1, \"pids\": {\"default\": 1, \"max\": 2, \"x3\": 1}},"
        " \"filesystem\": [{\"source\": \"/a\", \"target\": \"/b\", \"x4\": 1}],"
        " \"network\": {\"allow\": [\"a.com\"], \"x5\": 1},"
        " \"prescreen\": {\"x6\": 1, \"actions\": {\"x7\": \"warn\"}},"
        " \"approval\": {\"x8\": 1},"
        " \"credentials\": [{\"secret\": \"s\", \"as\": \"env\", \"name\": \"S\", \"x9\": 1},"
        "                   {\"token\": {\"audience\": \"a\", \"scope\": \"s\", \"ttl_seconds\": "
        "60, \"x10\": 1}},"
        "                   {\"token\": {\"audience\": \"a\", \"scope\": \"s\", \"ttl_seconds\": "
        "60}, \"x11\": 1}],"
        " \"output\": {\"x12\": 1, \"redact\": {\"x13\": 1}}}}}";
    struct tc_policy *p = NULL;
    json_t *errors = NULL;

    CHECK(load_str(doc, &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "x0: unknown key"));
    CHECK(has_error(errors, "tools.t.x1: unknown key"));
    CHECK(has_error(errors, "tools.t.limits.x2: unknown key"));
    CHECK(has_error(errors, "tools.t.limits.pids.x3: unknown key"));
    CHECK(has_error(errors, "tools.t.filesystem[0].x4: unknown key"));
    CHECK(has_error(errors, "tools.t.network.x5: unknown key"));
    CHECK(has_error(errors, "tools.t.prescreen.x6: unknown key"));
    CHECK(has_error_prefix(errors, "tools.t.prescreen.actions.x7: unknown key"));
    CHECK(has_error(errors, "tools.t.approval.x8: unknown key"));
    CHECK(has_error(errors, "tools.t.credentials[0].x9: unknown key"));
    CHECK(has_error(errors, "tools.t.credentials[1].token.x10: unknown key"));
    CHECK(has_error(errors, "tools.t.credentials[2].x11: unknown key"));
    CHECK(has_error(errors, "tools.t.output.x12: unknown key"));
    CHECK(has_error(errors, "tools.t.output.redact.x13: unknown key"));
    CHECK(json_array_size(errors) == 14);
    json_decref(errors);
    return true;
}

static bool test_limits(void)
{
    CHECK(tool_fails_with("\"limits\": {\"memory_mb\": {\"default\": 512, \"max\": 256}}",
                          "tools.t.limits.memory_mb: default (512) exceeds max (256)"));
    CHECK(tool_fails_with("\"limits\": {\"pids\": 0}",
                          "tools.t.limits.pids: must be an integer between 1 and 4096"));
    CHECK(tool_fails_with("\"limits\": {\"timeout_ms\": 3600001}",
                          "tools.t.limits.timeout_ms: must be an integer between 1 and 3600000"));
    CHECK(tool_fails_with("\"limits\": {\"cpu_ms\": 1.5}",
                          "tools.t.limits.cpu_ms: must be an integer between 1 and 3600000 or "
                          "{\"default\": N, \"max\": N}"));
    CHECK(tool_fails_with("\"limits\": {\"tmp_mb\": {\"default\": 1}}",
                          "tools.t.limits.tmp_mb.max: required"));
    CHECK(tool_fails_with(
        "\"limits\": {\"output_bytes\": {\"default\": 1, \"max\": 67108865}}",
        "tools.t.limits.output_bytes.max: must be an integer between 1 and 67108864"));
    CHECK(tool_fails_with("\"limits\": []", "tools.t.limits: must be an object"));
    CHECK(tool_loads(
        "\"limits\": {\"open_files\": {\"default\": 65536, \"max\": 65536}, \"pids\": 4096}"));
    for (int i = 0; i < TC_LIMIT__COUNT; i++) {
        CHECK(tc_limit_builtin[i] >= 1 && tc_limit_builtin[i] <= tc_limit_ceiling[i]);
        CHECK(tc_limit_names[i] != NULL);
    }
    return true;
}

static bool test_required_and_types(void)
{
    struct tc_policy *p = NULL;
    json_t *errors = NULL;

    CHECK(load_str("{\"version\": 1, \"tools\": {\"t\": {}}}", &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "tools.t.description: required"));
    CHECK(has_error(errors, "tools.t.command: required"));
    json_decref(errors);
    CHECK(load_str("{\"version\": 1, \"tools\": {\"t\": {\"description\": \"\", \"command\": []}}}",
                   &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "tools.t.description: must not be empty"));
    CHECK(has_error(errors, "tools.t.command: must have between 1 and 64 elements"));
    json_decref(errors);
    CHECK(tool_fails_with("\"command\": [\"/bin/sh\", 7]", "tools.t.command[1]: must be a string"));
    CHECK(tool_fails_with(
        "\"command\": [\"/usr/bin/../bin/sh\"]",
        "tools.t.command[0]: must not contain \".\" or \"..\" components (the program to run)"));
    CHECK(tool_fails_with("\"command\": [\"/bin/sh\", \"{code_file}\"]",
                          "tools.t.code_file: required when command contains \"{code_file}\""));
    CHECK(tool_fails_with(
        "\"command\": [\"/bin/sh\", \"--file={code_file}\"], \"code_file\": \"a.sh\"",
        "tools.t.command[1]: \"{code_file}\" is only replaced as a whole element"));
    CHECK(tool_fails_with("\"code_file\": \"a..b\"", "tools.t.code_file: must not contain \"..\""));
    CHECK(tool_fails_with("\"code_file\": \".bashrc\"",
                          "tools.t.code_file: must not start with '.' or '-'"));
    CHECK(tool_fails_with("\"backend\": \"docker\"",
                          "tools.t.backend: must be one of \"native\", \"gvisor\" or \"microvm\""));
    CHECK(tool_fails_with(
        "\"irreversible\": true",
        "tools.t.tier: an irreversible tool needs tier \"human_approve\" or \"manual_only\""));
    CHECK(tool_fails_with(
        "\"irreversible\": true, \"tier\": \"assisted\"",
        "tools.t.tier: an irreversible tool needs tier \"human_approve\" or \"manual_only\""));
    CHECK(tool_loads("\"irreversible\": true, \"tier\": \"manual_only\""));
    CHECK(load_str("{\"version\": 1, \"tools\": {\"t\": {\"description\": 5, \"command\": "
                   "\"/bin/true\"}}}",
                   &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "tools.t.description: must be a string"));
    CHECK(has_error(errors, "tools.t.command: must be an array"));
    json_decref(errors);
    CHECK(p == NULL);
    return true;
}

static bool test_top_level(void)
{
    struct tc_policy *p = NULL;
    json_t *errors = NULL;

    CHECK(load_str("[]", &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "(root): must be an object {\"version\": 1, \"tools\": {...}}"));
    json_decref(errors);
    CHECK(load_str("{}", &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "version: required (this build reads version 1)"));
    CHECK(has_error(errors, "tools: required"));
    json_decref(errors);
    CHECK(load_str("{\"version\": 2, \"tools\": {}}", &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "version: unsupported version (this build reads version 1)"));
    CHECK(has_error(errors, "tools: must declare at least one tool"));
    json_decref(errors);
    CHECK(load_str("{\"version\": 1, \"tools\": []}", &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "tools: must be an object {\"NAME\": {...}}"));
    json_decref(errors);
    CHECK(load_str("{\"version\": 1, \"tools\": {\"a\": 1, \"Bad Name\\n\": {}, \"_x\": {}}}", &p,
                   &errors) == -EINVAL);
    CHECK(has_error(errors, "tools.a: must be an object"));
    CHECK(
        has_error(errors, "tools[\"Bad Name\\x0a\"]: tool name must match [a-z][a-z0-9_-]{0,63}"));
    CHECK(has_error(errors, "tools._x: tool name must match [a-z][a-z0-9_-]{0,63}"));
    json_decref(errors);
    /* the built-in MCP tools' names */
    CHECK(load_str("{\"version\": 1, \"tools\": {\"toolcage_wait\": {}}}", &p, &errors) == -EINVAL);
    CHECK(has_error(errors,
                    "tools.toolcage_wait: tool names starting with \"toolcage_\" are reserved"));
    json_decref(errors);
    CHECK(p == NULL);
    return true;
}

static bool test_too_many_tools(void)
{
    size_t cap = 300 * 80 + 64;
    char *buf = malloc(cap);
    size_t o = 0;
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    int r;

    CHECK(buf);
    o += (size_t)snprintf(buf + o, cap - o, "{\"version\": 1, \"tools\": {");
    for (int i = 0; i < TC_POLICY_MAX_TOOLS + 1; i++)
        o += (size_t)snprintf(buf + o, cap - o,
                              "%s\"t%d\": {\"description\": \"d\", \"command\": [\"/bin/true\"]}",
                              i ? "," : "", i);
    snprintf(buf + o, cap - o, "}}");
    r = load_str(buf, &p, &errors);
    free(buf);
    CHECK(r == -EINVAL);
    CHECK(has_error(errors, "tools: at most 256 tools may be declared"));
    json_decref(errors);
    return true;
}

static bool test_env(void)
{
    char extra[8192];
    size_t o = 0;

    CHECK(tool_fails_with(
        "\"env\": {\"A-B\": \"x\"}",
        "tools.t.env.A-B: variable name must match [A-Za-z_][A-Za-z0-9_]* (at most 128 bytes)"));
    CHECK(tool_fails_with("\"env\": {\"A\": null}", "tools.t.env.A: must be a string"));
    CHECK(tool_fails_with("\"env\": [\"A=b\"]", "tools.t.env: must be an object"));
    o += (size_t)snprintf(extra + o, sizeof(extra) - o, "\"env\": {");
    for (int i = 0; i < 65; i++)
        o += (size_t)snprintf(extra + o, sizeof(extra) - o, "%s\"V%d\": \"x\"", i ? "," : "", i);
    snprintf(extra + o, sizeof(extra) - o, "}");
    CHECK(tool_fails_with(extra, "tools.t.env: must have at most 64 entries"));

    o = (size_t)snprintf(extra, sizeof(extra), "\"env\": {\"BIG\": \"");
    memset(extra + o, 'x', 4097);
    o += 4097;
    snprintf(extra + o, sizeof(extra) - o, "\"}");
    CHECK(tool_fails_with(extra, "tools.t.env.BIG: must be at most 4096 bytes"));
    return true;
}

static bool test_filesystem(void)
{
    static const char *const reserved[] = {"/",          "/proc",  "/dev/shm", "/sys",
                                           "/workspace", "/tmp/x", "/etc"};
    char extra[512], want[512];

    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
        snprintf(extra, sizeof(extra),
                 "\"filesystem\": [{\"source\": \"/srv\", \"target\": \"%s\"}]", reserved[i]);
        if (i == 0)
            snprintf(want, sizeof(want),
                     "tools.t.filesystem[0].target: must not be the sandbox's root directory");
        else
            snprintf(want, sizeof(want),
                     "tools.t.filesystem[0].target: must not be %.*s or under it (reserved by the "
                     "sandbox)",
                     (int)strcspn(reserved[i] + 1, "/") + 1, reserved[i]);
        CHECK(tool_fails_with(extra, want));
    }
    CHECK(tool_loads("\"filesystem\": [{\"source\": \"/srv\", \"target\": \"/etcetera\"}]"));
    CHECK(tool_fails_with(
        "\"filesystem\": [{\"source\": \"/srv/../etc\", \"target\": \"/x\"}]",
        "tools.t.filesystem[0].source: must not contain \".\" or \"..\" components"));
    CHECK(tool_fails_with("\"filesystem\": [{\"source\": \"/srv//a\", \"target\": \"/x\"}]",
                          "tools.t.filesystem[0].source: must not contain \"//\""));
    CHECK(tool_fails_with("\"filesystem\": [{\"source\": \"/srv\", \"target\": \"/x/\"}]",
                          "tools.t.filesystem[0].target: must not end with '/'"));
    CHECK(tool_fails_with("\"filesystem\": [{\"source\": \"/\", \"target\": \"/host\"}]",
                          "tools.t.filesystem[0].source: must not be the host's root directory"));
    CHECK(tool_fails_with("\"filesystem\": [{\"source\": \"/a\", \"target\": \"/x\"}, {\"source\": "
                          "\"/b\", \"target\": \"/x\"}]",
                          "tools.t.filesystem[1].target: duplicates filesystem[0].target"));
    CHECK(tool_fails_with("\"filesystem\": [{\"target\": \"/x\"}]",
                          "tools.t.filesystem[0].source: required"));
    CHECK(tool_fails_with(
        "\"filesystem\": [\"/a:/b\"]",
        "tools.t.filesystem[0]: must be an object {\"source\", \"target\", \"mode\"}"));
    return true;
}

static bool test_network(void)
{
    CHECK(tool_fails_with("\"network\": \"all\"",
                          "tools.t.network: must be \"none\" or {\"allow\": [...]}"));
    CHECK(tool_fails_with("\"network\": {}", "tools.t.network.allow: required"));
    CHECK(tool_fails_with("\"network\": {\"allow\": []}",
                          "tools.t.network.allow: must list at least one host (use \"network\": "
                          "\"none\" for no network)"));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": [\"a.com:70000\"]}",
        "tools.t.network.allow[0]: \"a.com:70000\" has an invalid port (must be 1..65535)"));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": [\"*\"]}",
        "tools.t.network.allow[0]: \"*\" is not a host, host:port, *.domain or *.domain:port"));
    CHECK(tool_fails_with("\"network\": {\"allow\": [\"-a.com\"]}",
                          "tools.t.network.allow[0]: \"-a.com\" is not a valid host name"));
    CHECK(tool_fails_with("\"network\": {\"allow\": [\"a..com\"]}",
                          "tools.t.network.allow[0]: \"a..com\" is not a valid host name"));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": [\"a.com:\"]}",
        "tools.t.network.allow[0]: \"a.com:\" has an invalid port (must be 1..65535)"));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": [\"http://a.com\"]}",
        "tools.t.network.allow[0]: \"http://a.com\" has an invalid port (must be 1..65535)"));
    CHECK(tool_fails_with("\"network\": {\"allow\": [\"A.com\", \"a.COM\"]}",
                          "tools.t.network.allow[1]: duplicate entry \"a.com\""));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": "
        "[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com\"]}",
        "tools.t.network.allow[0]: "
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com\" "
        "has a DNS label longer than 63 characters"));
    CHECK(tool_loads("\"network\": {\"allow\": [\"a.com\", \"a.com:443\", \"*.b.org:8443\", "
                     "\"x-y.z\", \"1.2.3.4:53\"]}"));
    CHECK(tool_loads("\"network\": \"none\""));
    return true;
}

static bool test_reserved_sections(void)
{
    CHECK(tool_fails_with("\"prescreen\": {\"rules\": \"perl\"}",
                          "tools.t.prescreen.rules: must be one of \"python\", \"shell\", "
                          "\"javascript\" or \"none\""));
    CHECK(tool_fails_with(
        "\"prescreen\": {\"actions\": {\"high\": \"ignore\"}}",
        "tools.t.prescreen.actions.high: must be one of \"warn\", \"approve\" or \"block\""));
    CHECK(tool_fails_with("\"prescreen\": \"python\"", "tools.t.prescreen: must be an object"));
    CHECK(
        tool_fails_with("\"approval\": {\"ttl_seconds\": 59}",
                        "tools.t.approval.ttl_seconds: must be an integer between 60 and 604800"));
    CHECK(tool_fails_with("\"approval\": {\"approvers\": 11}",
                          "tools.t.approval.approvers: must be an integer between 1 and 10"));
    CHECK(tool_fails_with("\"credentials\": {}", "tools.t.credentials: must be an array"));
    CHECK(tool_fails_with(
        "\"credentials\": [{\"secret\": \"s\", \"as\": \"stdin\", \"name\": \"x\"}]",
        "tools.t.credentials[0].as: must be one of \"env\", \"file\" or \"header\""));
    CHECK(tool_fails_with("\"credentials\": [{\"secret\": \"s\", \"name\": \"X\"}]",
                          "tools.t.credentials[0].as: required"));
    /* "as": "header": the egress proxy adds it for one host the allowlist names */
    CHECK(tool_loads(
        "\"network\": {\"allow\": [\"api.example:443\"]}, \"credentials\": [{\"secret\": "
        "\"s\", \"as\": \"header\", \"host\": \"api.example\", \"header\": "
        "\"Authorization\", \"format\": \"Bearer {value}\"}]"));
    CHECK(
        tool_loads("\"network\": {\"allow\": [\"10.1.2.3:8443\"]}, \"credentials\": [{\"secret\": "
                   "\"s\", \"as\": \"header\", \"host\": \"10.1.2.3\", \"port\": 8443, "
                   "\"header\": \"X-Api-Key\"}]"));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": [\"api.example\"]}, \"credentials\": [{\"secret\": "
        "\"s\", \"as\": \"header\", \"host\": \"api.example\", \"port\": 8443, "
        "\"header\": \"X-Key\"}]",
        "tools.t.credentials[0].host: api.example:8443 must be in network.allow "
        "(as \"api.example:8443\")"));
    CHECK(tool_fails_with("\"credentials\": [{\"secret\": \"s\", \"as\": \"header\", \"host\": "
                          "\"api.example\", \"header\": \"X-Key\"}]",
                          "tools.t.credentials[0].host: api.example:443 must be in network.allow "
                          "(as \"api.example:443\")"));
    CHECK(
        tool_fails_with("\"network\": {\"allow\": [\"a.example\"]}, \"credentials\": [{\"secret\": "
                        "\"s\", \"as\": \"header\", \"host\": \"a.example\", \"header\": "
                        "\"Host\"}]",
                        "tools.t.credentials[0].header: Host is not a credential header"));
    CHECK(
        tool_fails_with("\"network\": {\"allow\": [\"a.example\"]}, \"credentials\": [{\"secret\": "
                        "\"s\", \"as\": \"header\", \"host\": \"a.example\", \"header\": "
                        "\"X Key\"}]",
                        "tools.t.credentials[0].header: must be an HTTP header name (letters, "
                        "digits and !#$%&'*+-.^_`|~)"));
    CHECK(
        tool_fails_with("\"network\": {\"allow\": [\"a.example\"]}, \"credentials\": [{\"secret\": "
                        "\"s\", \"as\": \"header\", \"host\": \"a.example\", \"header\": "
                        "\"X-Key\", \"format\": \"{value}{value}\"}]",
                        "tools.t.credentials[0].format: must contain {value} once"));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": [\"*.a.example\"]}, \"credentials\": [{\"secret\": "
        "\"s\", \"as\": \"header\", \"host\": \"*.a.example\", \"header\": "
        "\"X-Key\"}]",
        "tools.t.credentials[0].host: \"*.a.example\" must be one host name or IPv4 "
        "address, without port"));
    CHECK(
        tool_fails_with("\"network\": {\"allow\": [\"a.example\"]}, \"credentials\": [{\"secret\": "
                        "\"s\", \"as\": \"header\", \"host\": \"a.example\", \"header\": "
                        "\"X-Key\", \"name\": \"X\"}]",
                        "tools.t.credentials[0].name: unknown key"));
    CHECK(tool_fails_with(
        "\"credentials\": [{\"secret\": \"a b\", \"as\": \"env\", \"name\": \"X\"}]",
        "tools.t.credentials[0].secret: secret names may only contain letters, digits, '_', '.' "
        "and '-'"));
    CHECK(tool_fails_with(
        "\"credentials\": [{\"secret\": \"s\", \"as\": \"env\", \"name\": \"HOME\"}]",
        "tools.t.credentials[0].name: HOME is also set by env; a credential must not be "
        "overridden"));
    /* TOOLCAGE_TOKEN* carry token grants: neither env nor a credential may take or shadow them */
    CHECK(tool_fails_with(
        "\"credentials\": [{\"secret\": \"s\", \"as\": \"env\", \"name\": \"TOOLCAGE_TOKEN\"}]",
        "tools.t.credentials[0].name: TOOLCAGE_* names are reserved (token grants)"));
    CHECK(tool_fails_with(
        "\"env\": {\"TOOLCAGE_TOKEN_1\": \"x\"}",
        "tools.t.env.TOOLCAGE_TOKEN_1: TOOLCAGE_* names are reserved (token grants)"));
    CHECK(tool_fails_with(
        "\"credentials\": [{\"secret\": \"s\", \"as\": \"file\", \"name\": \"../x\"}]",
        "tools.t.credentials[0].name: must be a file name, not a path (no '/')"));
    CHECK(tool_fails_with("\"credentials\": [{\"secret\": \"s\", \"as\": \"env\", \"name\": \"K\"},"
                          " {\"secret\": \"u\", \"as\": \"env\", \"name\": \"K\"}]",
                          "tools.t.credentials[1].name: same env name as credentials[0]"));
    CHECK(tool_fails_with("\"credentials\": [{\"token\": {\"audience\": \"a\", \"scope\": \"s\"}}]",
                          "tools.t.credentials[0].token.ttl_seconds: required"));
    CHECK(tool_fails_with(
        "\"credentials\": [{\"token\": {\"audience\": \"a\", \"scope\": \"s\", \"ttl_seconds\": "
        "86400}}]",
        "tools.t.credentials[0].token.ttl_seconds: must be an integer between 1 and 3600"));
    CHECK(tool_fails_with("\"output\": {\"redact\": {\"disable\": [\"jwt\", \"jwt\"]}}",
                          "tools.t.output.redact.disable[1]: duplicate entry \"jwt\""));
    CHECK(tool_fails_with("\"output\": {\"redact\": {\"disable\": [\"email\"]}}",
                          "tools.t.output.redact.disable[0]: unknown redaction rule \"email\" "
                          "(see docs/redaction.md)"));
    CHECK(tool_fails_with("\"output\": {\"redact\": {\"disable\": \"email\"}}",
                          "tools.t.output.redact.disable: must be an array"));
    CHECK(tool_fails_with("\"output\": {\"redact\": {\"enable\": [\"loopback\"]}}",
                          "tools.t.output.redact.enable[0]: unknown redaction rule \"loopback\" "
                          "(see docs/redaction.md)"));
    CHECK(tool_fails_with("\"output\": {\"redact\": {\"disable\": [\"jwt\", \"loopback_ip\"],"
                          " \"enable\": [\"loopback_ip\"]}}",
                          "tools.t.output.redact.enable[0]: \"loopback_ip\" is both enabled and "
                          "disabled"));
    CHECK(tool_fails_with(
        "\"output\": {\"plots\": true}",
        "tools.t.output.plots: only a tool of language \"python\" can return plots"));
    CHECK(tool_fails_with("\"language\": \"python\", \"output\": {\"plots\": 1}",
                          "tools.t.output.plots: must be a boolean"));
    CHECK(tool_loads("\"language\": \"python\", \"output\": {\"plots\": true}"));
    /* sessions: python and shell only, native only, the driver replaces {code_file} */
    const char *py = "\"command\": [\"/usr/bin/python3\", \"{code_file}\"], "
                     "\"language\": \"python\", \"code_file\": \"main.py\", ";
    char b[512];
    snprintf(b, sizeof(b), "%s\"session\": {\"enabled\": true, \"max_ttl_seconds\": 60}", py);
    CHECK(tool_loads(b));
    snprintf(b, sizeof(b), "%s\"session\": {\"enabled\": true, \"max_ttl_seconds\": 5}", py);
    CHECK(tool_fails_with(
        b, "tools.t.session.max_ttl_seconds: must be an integer between 10 and 86400"));
    snprintf(b, sizeof(b), "%s\"session\": {\"enabled\": 1, \"ttl\": 5}", py);
    CHECK(tool_fails_with(b, "tools.t.session.enabled: must be a boolean"));
    CHECK(tool_fails_with(b, "tools.t.session.ttl: unknown key"));
    snprintf(b, sizeof(b), "%s\"session\": {\"enabled\": true, \"held_calls\": \"hold\"}", py);
    CHECK(tool_loads(b));
    snprintf(b, sizeof(b), "%s\"session\": {\"enabled\": true, \"held_calls\": \"wait\"}", py);
    CHECK(tool_fails_with(b, "tools.t.session.held_calls: must be \"refuse\" or \"hold\""));
    snprintf(b, sizeof(b), "%s\"backend\": \"gvisor\", \"session\": {\"enabled\": true}", py);
    CHECK(tool_fails_with(b, "tools.t.session.enabled: sessions need the \"native\" backend"));
    CHECK(tool_fails_with("\"language\": \"javascript\", \"session\": {\"enabled\": true}",
                          "tools.t.session.enabled: only a tool of language \"python\" or "
                          "\"shell\" can be a session"));
    CHECK(tool_fails_with("\"language\": \"shell\", \"session\": {\"enabled\": true}",
                          "tools.t.session.enabled: a session runs its driver in place of "
                          "{code_file}: the command needs it"));
    /* network.ask: an empty list with it, never for a session, a bounded timeout */
    CHECK(tool_loads("\"network\": {\"allow\": [], \"ask\": true}"));
    CHECK(tool_loads("\"network\": {\"allow\": [\"a.com\"], \"ask\": true, "
                     "\"ask_timeout_seconds\": 3600}"));
    CHECK(tool_fails_with("\"network\": {\"allow\": []}",
                          "tools.t.network.allow: must list at least one host (use \"network\": "
                          "\"none\" for no network)"));
    CHECK(tool_fails_with("\"network\": {\"allow\": [], \"ask\": 1}",
                          "tools.t.network.ask: must be a boolean"));
    CHECK(tool_loads("\"network\": {\"allow\": [], \"ask\": true, \"ask_private\": true}"));
    CHECK(tool_fails_with("\"network\": {\"allow\": [\"a.com\"], \"ask_private\": true}",
                          "tools.t.network.ask_private: needs \"ask\": true"));
    CHECK(tool_fails_with("\"network\": {\"allow\": [\"a.com\"], \"ask_timeout_seconds\": 60}",
                          "tools.t.network.ask_timeout_seconds: needs \"ask\": true"));
    CHECK(tool_fails_with(
        "\"network\": {\"allow\": [], \"ask\": true, \"ask_timeout_seconds\": 4}",
        "tools.t.network.ask_timeout_seconds: must be an integer between 5 and 3600"));
    snprintf(b, sizeof(b),
             "%s\"session\": {\"enabled\": true}, \"network\": {\"allow\": [], \"ask\": true}", py);
    CHECK(tool_fails_with(b, "tools.t.network: \"ask\" is not available for session tools"));
    return true;
}

static bool test_error_cap(void)
{
    char extra[16384];
    size_t o = 0;
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    char want[128];

    o += (size_t)snprintf(extra + o, sizeof(extra) - o, "\"limits\": {");
    for (int i = 0; i < 300; i++)
        o += (size_t)snprintf(extra + o, sizeof(extra) - o, "%s\"bad%d\": 1", i ? "," : "", i);
    snprintf(extra + o, sizeof(extra) - o, "}");
    CHECK(load_tool(&errors, &p, extra) == -EINVAL);
    CHECK(json_array_size(errors) == TC_POLICY_MAX_ERRORS + 1);
    snprintf(want, sizeof(want), "(root): %d more errors not shown", 300 - TC_POLICY_MAX_ERRORS);
    CHECK(has_error(errors, want));
    json_decref(errors);
    return true;
}

static bool test_refcount(void)
{
    struct tc_policy *p = NULL, *q;
    json_t *errors = (json_t *)0x1;
    const struct tc_tool *t;

    tc_policy_unref(NULL); /* no-op */
    CHECK(tc_policy_ref(NULL) == NULL);
    CHECK(load_tool(&errors, &p, "") == 0);
    CHECK(errors == NULL);
    q = tc_policy_ref(p);
    CHECK(q == p);
    tc_policy_unref(p);
    t = tc_policy_tool(q, "t"); /* still alive: one reference left */
    CHECK(t && strcmp(t->name, "t") == 0);
    tc_policy_unref(q);
    return true;
}

static bool test_lookup(void)
{
    char path[4096];
    struct tc_policy *p = NULL;

    source_path(path, sizeof(path), "examples/policy.json");
    CHECK(tc_policy_load(path, &p, NULL) == 0);
    CHECK(tc_policy_tool(p, "nonexistent") == NULL);
    CHECK(tc_policy_tool(p, "") == NULL);
    CHECK(tc_policy_tool(p, NULL) == NULL);
    CHECK(tc_policy_tool(p, "Python") == NULL);
    CHECK(tc_policy_tool(NULL, "python") == NULL);
    CHECK(tc_policy_tool_at(p, tc_policy_ntools(p)) == NULL);
    for (size_t i = 0; i < tc_policy_ntools(p); i++)
        CHECK(tc_policy_tool(p, tc_policy_tool_at(p, i)->name) == tc_policy_tool_at(p, i));
    tc_policy_unref(p);
    return true;
}

static bool runsc_installed(void)
{
    static const char *const dirs[] = {"/usr/bin/runsc", "/usr/sbin/runsc", "/usr/local/bin/runsc"};
    for (size_t i = 0; i < 3; i++)
        if (access(dirs[i], X_OK) == 0)
            return true;
    return false;
}

/* microvm: network none only, no image, no filesystem mounts (the guest sees /usr and the
 * workspace); loading does not depend on qemu being installed (the launcher says so per call) */
static bool test_microvm_backend(void)
{
    bool ok = tool_loads("\"backend\": \"microvm\", \"network\": \"none\"");
    ok = ok && tool_fails_with(
                   "\"backend\": \"microvm\", \"network\": {\"allow\": [\"example.com:443\"]}",
                   "tools.t.network: the microvm backend supports \"none\" only "
                   "(allowlists need \"native\")");
    ok = ok &&
         tool_fails_with("\"backend\": \"microvm\", \"filesystem\": [{\"source\": \"/usr/share\", "
                         "\"target\": \"/data\", \"mode\": \"ro\"}]",
                         "tools.t.filesystem: the microvm backend shares only /usr and the "
                         "workspace with its guest");
    ok = ok && tool_fails_with("\"backend\": \"microvm\", \"session\": {\"enabled\": true}",
                               "tools.t.session.enabled: sessions need the \"native\" backend");
    return ok;
}

static bool test_gvisor_needs_runsc(void)
{
    char dir[] = "/tmp/test_policy.XXXXXX";
    char runsc[sizeof(dir) + 16];
    char *saved = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    const struct tc_tool *t;
    bool ok = true;
    int fd, r;

    CHECK(mkdtemp(dir));
    if (!runsc_installed()) {
        setenv("PATH", dir, 1); /* empty directory: no runsc anywhere */
        ok = ok &&
             tool_fails_with(
                 "\"backend\": \"gvisor\"",
                 "tools.t.backend: runsc not found in PATH, /usr/bin, /usr/sbin or /usr/local/bin "
                 "(install gVisor or use \"native\")");
    } else {
        printf("# runsc is installed here: skipping the refusal half\n");
    }
    /* A runsc earlier in PATH is found and recorded. */
    snprintf(runsc, sizeof(runsc), "%s/runsc", dir);
    fd = open(runsc, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    if (fd >= 0)
        close(fd);
    setenv("PATH", dir, 1);
    r = load_tool(&errors, &p, "\"backend\": \"gvisor\"");
    if (r != 0)
        dump_errors(errors);
    t = tc_policy_tool(p, "t");
    ok = ok && fd >= 0 && r == 0 && t && t->backend == TC_BACKEND_GVISOR && t->runtime &&
         (runsc_installed() || strcmp(t->runtime, runsc) == 0);
    tc_policy_unref(p);
    json_decref(errors);
    /* runsc runs with --network=none: an allowlist is refused at load, not at request time */
    ok = ok &&
         tool_fails_with("\"backend\": \"gvisor\", \"network\": {\"allow\": [\"example.com:443\"]}",
                         "tools.t.network: the gvisor backend supports \"none\" only "
                         "(allowlists need \"native\")");
    ok = ok && tool_loads("\"backend\": \"gvisor\", \"network\": \"none\"");
    if (saved)
        setenv("PATH", saved, 1);
    else
        unsetenv("PATH");
    free(saved);
    unlink(runsc);
    rmdir(dir);
    return ok;
}

static bool write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "we");
    bool ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = false;
    return ok;
}

static bool test_huge_file(void)
{
    char path[] = "/tmp/test_policy_big.XXXXXX";
    const char *doc = "{\"version\": 1, \"tools\": {\"t\": {\"description\": \"d\", \"command\": "
                      "[\"/bin/true\"]}}}";
    size_t n = TC_POLICY_MAX_BYTES + 1;
    char *big = malloc(n);
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    char want[256];
    int fd, r;
    bool ok;

    CHECK(big);
    memset(big, ' ', n);
    memcpy(big, doc, strlen(doc));
    fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    /* exactly at the cap: fine (trailing whitespace) */
    ok = write_file(path, big, n - 1);
    r = tc_policy_load(path, &p, &errors);
    if (r != 0)
        dump_errors(errors);
    ok = ok && r == 0 && p;
    tc_policy_unref(p);
    p = NULL;
    /* one byte over: refused, both from a file and from a buffer */
    ok = ok && write_file(path, big, n);
    r = tc_policy_load(path, &p, &errors);
    snprintf(want, sizeof(want), "(root): file is larger than %d bytes", TC_POLICY_MAX_BYTES);
    ok = ok && r == -EFBIG && p == NULL && has_error(errors, want);
    json_decref(errors);
    errors = NULL;
    r = tc_policy_load_buffer(big, n, &p, &errors);
    ok = ok && r == -EFBIG && p == NULL &&
         has_error(errors, "(root): file is larger than 1048576 bytes");
    json_decref(errors);
    unlink(path);
    free(big);
    return ok;
}

static bool test_io_errors(void)
{
    struct tc_policy *p = NULL;
    json_t *errors = NULL;

    CHECK(tc_policy_load("/nonexistent/policy.json", &p, &errors) == -ENOENT);
    CHECK(has_error(errors, "(root): cannot read: No such file or directory"));
    json_decref(errors);
    CHECK(tc_policy_load("/tmp", &p, &errors) == -EISDIR);
    json_decref(errors);
    CHECK(tc_policy_load("/dev/null", &p, &errors) == -EINVAL);
    CHECK(has_error(errors, "(root): not a regular file"));
    json_decref(errors);
    CHECK(tc_policy_load("/nonexistent", &p, NULL) == -ENOENT);
    CHECK(p == NULL);
    return true;
}

static bool test_digest(void)
{
    /* BLAKE2b-256 of these exact bytes, computed independently (Python hashlib.blake2b). */
    const char *doc = "{\"version\": 1, \"tools\": {\"t\": {\"description\": \"d\", \"command\": "
                      "[\"/bin/true\"]}}}";
    const char *want = "4ff29baeb0e50e9971cb65c18451b23a55891b1fc07499660290be0e2e788fc7";
    struct tc_policy *a = NULL, *b = NULL, *c = NULL;
    char spaced[256];

    CHECK(load_str(doc, &a, NULL) == 0);
    CHECK(load_str(doc, &b, NULL) == 0);
    snprintf(spaced, sizeof(spaced), "%s\n", doc);
    CHECK(load_str(spaced, &c, NULL) == 0);
    CHECK(strcmp(tc_policy_digest(a), want) == 0);
    CHECK(strcmp(tc_policy_digest(a), tc_policy_digest(b)) == 0);
    CHECK(strcmp(tc_policy_digest(a), tc_policy_digest(c)) != 0); /* bytes, not meaning */
    tc_policy_unref(a);
    tc_policy_unref(b);
    tc_policy_unref(c);
    return true;
}

static bool test_describe(void)
{
    struct tc_policy *p = NULL;
    json_t *d, *lim;
    const struct tc_tool *t;

    CHECK(load_tool(NULL, &p,
                    "\"network\": {\"allow\": [\"a.com:443\"]}, \"limits\": {\"pids\": "
                    "{\"default\": 2, \"max\": 9}},"
                    " \"env\": {\"SECRETISH\": \"v\"}") == 0);
    t = tc_policy_tool(p, "t");
    d = tc_tool_describe(t);
    CHECK(d);
    CHECK(strcmp(json_string_value(json_object_get(d, "name")), "t") == 0);
    CHECK(strcmp(json_string_value(json_object_get(d, "description")), "d") == 0);
    CHECK(strcmp(json_string_value(json_object_get(d, "language")), "other") == 0);
    CHECK(strcmp(json_string_value(json_object_get(d, "backend")), "native") == 0);
    CHECK(strcmp(json_string_value(json_object_get(d, "tier")), "auto") == 0);
    CHECK(json_is_false(json_object_get(d, "irreversible")));
    CHECK(strcmp(json_string_value(
                     json_array_get(json_object_get(json_object_get(d, "network"), "allow"), 0)),
                 "a.com:443") == 0);
    lim = json_object_get(json_object_get(d, "limits"), "pids");
    CHECK(json_integer_value(json_object_get(lim, "default")) == 2);
    CHECK(json_integer_value(json_object_get(lim, "max")) == 9);
    CHECK(json_object_size(json_object_get(d, "limits")) == TC_LIMIT__COUNT);
    CHECK(json_object_get(d, "env") == NULL && json_object_get(d, "command") == NULL);
    CHECK(json_object_size(d) == 9);
    CHECK(json_is_null(json_object_get(d, "session"))); /* not a session tool */
    json_decref(d);
    tc_policy_unref(p);

    CHECK(load_tool(NULL, &p, "") == 0);
    d = tc_tool_describe(tc_policy_tool(p, "t"));
    CHECK(d && strcmp(json_string_value(json_object_get(d, "network")), "none") == 0);
    json_decref(d);
    tc_policy_unref(p);
    CHECK(tc_tool_describe(NULL) == NULL);
    return true;
}

/* "image" takes a reference; "workdir" says where the program starts and needs an image. */
static bool test_image_and_workdir(void)
{
    struct tc_policy *p = NULL;
    const struct tc_tool *t;
    json_t *d;
    const char *pin = "\"image\": \"reg.example:5000/team/py:1.4@sha256:"
                      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"";
    char extra[512];

    CHECK(tool_loads(pin));
    CHECK(tool_loads("\"image\": \"py-data\""));
    CHECK(tool_fails_with("\"image\": \"../x\"",
                          "tools.t.image: an image reference: \"name[:tag]\", "
                          "\"name[:tag]@sha256:<64 hex>\" or \"sha256:<64 hex>\" "
                          "(see `toolcage images ls`)"));
    CHECK(tool_fails_with("\"image\": 7", "tools.t.image: an image reference: \"name[:tag]\", "
                                          "\"name[:tag]@sha256:<64 hex>\" or \"sha256:<64 hex>\" "
                                          "(see `toolcage images ls`)"));
    CHECK(tool_fails_with("\"workdir\": \"image\"",
                          "tools.t.workdir: \"image\" needs the tool to have an \"image\""));
    snprintf(extra, sizeof(extra), "%s, \"workdir\": \"elsewhere\"", pin);
    CHECK(!tool_loads(extra));

    snprintf(extra, sizeof(extra), "%s, \"workdir\": \"image\"", pin);
    CHECK(load_tool(NULL, &p, extra) == 0);
    t = tc_policy_tool(p, "t");
    CHECK(t && t->image && t->workdir_image);
    d = tc_tool_describe(t);
    CHECK(d && !strcmp(json_string_value(json_object_get(json_object_get(d, "image"), "workdir")),
                       "image"));
    json_decref(d);
    tc_policy_unref(p);

    CHECK(load_tool(NULL, &p, pin) == 0);
    t = tc_policy_tool(p, "t");
    CHECK(t && !t->workdir_image);
    d = tc_tool_describe(t);
    CHECK(d && !strcmp(json_string_value(json_object_get(json_object_get(d, "image"), "workdir")),
                       "workspace"));
    json_decref(d);
    tc_policy_unref(p);
    return true;
}

static bool test_request_limits(void)
{
    struct tc_policy *p = NULL;
    const struct tc_tool *t;
    int64_t v[TC_LIMIT__COUNT], sentinel[TC_LIMIT__COUNT];
    json_t *req, *errors = NULL;

    CHECK(load_tool(NULL, &p, "\"limits\": {\"timeout_ms\": {\"default\": 1000, \"max\": 9000}}") ==
          0);
    t = tc_policy_tool(p, "t");
    CHECK(tc_tool_limits(t, NULL, v, &errors) == 0 && errors == NULL);
    CHECK(v[TC_LIMIT_TIMEOUT_MS] == 1000 && v[TC_LIMIT_PIDS] == tc_limit_builtin[TC_LIMIT_PIDS]);

    req = json_pack("{s:i}", "timeout_ms", 9000);
    CHECK(tc_tool_limits(t, req, v, NULL) == 0 && v[TC_LIMIT_TIMEOUT_MS] == 9000);
    json_decref(req);

    for (int i = 0; i < TC_LIMIT__COUNT; i++)
        v[i] = sentinel[i] = -7;
    req = json_pack("{s:i}", "timeout_ms", 9001);
    CHECK(tc_tool_limits(t, req, v, &errors) == -ERANGE);
    CHECK(has_error(errors, "limits.timeout_ms: 9001 exceeds this tool's max of 9000"));
    CHECK(memcmp(v, sentinel, sizeof(v)) == 0);
    json_decref(errors);
    json_decref(req);

    req = json_pack("{s:i,s:s}", "timeout_ms", 9001, "pids", "many");
    CHECK(tc_tool_limits(t, req, v, &errors) == -EINVAL);
    CHECK(has_error(errors, "limits.pids: must be a positive integer"));
    json_decref(errors);
    json_decref(req);

    req = json_pack("{s:i}", "gpus", 1);
    CHECK(tc_tool_limits(t, req, v, &errors) == -EINVAL);
    CHECK(has_error(errors, "limits.gpus: unknown key"));
    json_decref(errors);
    json_decref(req);

    req = json_pack("{s:i}", "memory_mb", 0);
    CHECK(tc_tool_limits(t, req, v, NULL) == -EINVAL);
    json_decref(req);
    tc_policy_unref(p);
    return true;
}

int main(void)
{
    run("example policy loads", test_example_loads);
    run("every key of the format loads (full.json)", test_full_fixture);
    run("all errors are reported at once, path-named", test_all_errors_at_once);
    run("JSON syntax errors report line and column", test_syntax_error_position);
    run("unknown keys are refused at every level", test_unknown_keys_every_level);
    run("limits: ranges, default > max, forms", test_limits);
    run("required keys and types", test_required_and_types);
    run("top level: version, tools, tool names", test_top_level);
    run("more than 256 tools refused", test_too_many_tools);
    run("env names, values, counts", test_env);
    run("filesystem paths and reserved targets", test_filesystem);
    run("network allowlist syntax", test_network);
    run("reserved sections validated strictly", test_reserved_sections);
    run("error list is capped", test_error_cap);
    run("refcount and unref(NULL)", test_refcount);
    run("lookup of a missing tool returns NULL", test_lookup);
    run("gvisor backend needs runsc", test_gvisor_needs_runsc);
    run("microvm backend: network none, no mounts, no sessions", test_microvm_backend);
    run("huge file refused", test_huge_file);
    run("I/O errors name the file", test_io_errors);
    run("digest is BLAKE2b-256 of the bytes, stable", test_digest);
    run("tc_tool_describe", test_describe);
    run("request limits only tighten", test_request_limits);
    run("image and workdir", test_image_and_workdir);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
