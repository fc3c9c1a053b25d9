/* Tool policy loader: parse the operator's policy file, validate every key strictly, and keep an
 * immutable, reference-counted, name-sorted table of tools. Format: docs/policy.md. */
#include "policy/policy.h"
#include "policy/redact.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "image/image.h"

const char *const tc_limit_names[TC_LIMIT__COUNT] = {
    [TC_LIMIT_TIMEOUT_MS] = "timeout_ms",     [TC_LIMIT_CPU_MS] = "cpu_ms",
    [TC_LIMIT_MEMORY_MB] = "memory_mb",       [TC_LIMIT_PIDS] = "pids",
    [TC_LIMIT_OUTPUT_BYTES] = "output_bytes", [TC_LIMIT_FILE_SIZE_MB] = "file_size_mb",
    [TC_LIMIT_WORKSPACE_MB] = "workspace_mb", [TC_LIMIT_TMP_MB] = "tmp_mb",
    [TC_LIMIT_OPEN_FILES] = "open_files",
};

/* Strict on purpose: a tool that needs more says so in the policy. */
const int64_t tc_limit_builtin[TC_LIMIT__COUNT] = {
    [TC_LIMIT_TIMEOUT_MS] = 5000, [TC_LIMIT_CPU_MS] = 5000,        [TC_LIMIT_MEMORY_MB] = 128,
    [TC_LIMIT_PIDS] = 32,         [TC_LIMIT_OUTPUT_BYTES] = 65536, [TC_LIMIT_FILE_SIZE_MB] = 8,
    [TC_LIMIT_WORKSPACE_MB] = 16, [TC_LIMIT_TMP_MB] = 16,          [TC_LIMIT_OPEN_FILES] = 64,
};

const int64_t tc_limit_ceiling[TC_LIMIT__COUNT] = {
    [TC_LIMIT_TIMEOUT_MS] = 3600000,
    [TC_LIMIT_CPU_MS] = 3600000,
    [TC_LIMIT_MEMORY_MB] = 65536,
    [TC_LIMIT_PIDS] = 4096,
    [TC_LIMIT_OUTPUT_BYTES] = 64 * 1024 * 1024,
    [TC_LIMIT_FILE_SIZE_MB] = 65536,
    [TC_LIMIT_WORKSPACE_MB] = 65536,
    [TC_LIMIT_TMP_MB] = 65536,
    [TC_LIMIT_OPEN_FILES] = 65536,
};

#define MAX_DESCRIPTION    1024
#define MAX_COMMAND        64
#define MAX_ARG            4096
#define MAX_CODE_FILE      128
#define MAX_ENV            64
#define MAX_ENV_NAME       128
#define MAX_ENV_VALUE      4096
#define MAX_MOUNTS         64
#define MAX_PATH_LEN       4095
#define MAX_ALLOW          256
#define MAX_CREDENTIALS    32
#define MAX_REDACT_DISABLE 64
#define MAX_NAME           128 /* secret names, rule names, token audience */
#define MAX_SCOPE          1024
#define PATH_BUF           512

static const char *const default_env[][2] = {
    {"PATH", "/usr/local/bin:/usr/bin:/bin"},
    {"HOME", "/workspace"},
    {"LANG", "C.UTF-8"},
};

static const char *const languages[] = {"python", "shell", "javascript", "other", NULL};
static const char *const backends[] = {"native", "gvisor", "microvm", NULL};
static const char *const tiers[] = {"auto", "assisted", "human_approve", "manual_only", NULL};
/* Sandbox paths the sandbox itself owns: a mount there would hide or subvert them. */
static const char *const reserved_targets[] = {"/proc",      "/dev", "/sys",
                                               "/workspace", "/tmp", "/etc"};

struct tc_policy {
    atomic_uint refs;
    json_t *root; /* owns every tool's raw object */
    struct tc_tool *tools;
    size_t ntools;
    char digest[crypto_generichash_BYTES * 2 + 1];
};

/* ---- error collection ---------------------------------------------------------------------- */

struct ctx {
    json_t *errors;
    size_t nerrors;
    bool oom;
};

TC_PRINTF(3, 4)
static void add_err(struct ctx *c, const char *path, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    int n;

    c->nerrors++;
    if (c->nerrors > TC_POLICY_MAX_ERRORS)
        return;
    n = snprintf(msg, sizeof(msg), "%s: ", path[0] ? path : "(root)");
    if (n < 0 || (size_t)n >= sizeof(msg))
        n = 0;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    /* Messages may quote the file (jansson's "near '...'"): keep terminals safe. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    if (json_array_append_new(c->errors, json_string(msg)) < 0)
        c->oom = true;
}

static void finish_errors(struct ctx *c)
{
    char msg[128];

    if (c->nerrors > TC_POLICY_MAX_ERRORS) {
        snprintf(msg, sizeof(msg), "(root): %zu more errors not shown",
                 c->nerrors - TC_POLICY_MAX_ERRORS);
        if (json_array_append_new(c->errors, json_string(msg)) < 0)
            c->oom = true;
    }
}

static char *xstrdup(struct ctx *c, const char *s)
{
    char *r = strdup(s);
    if (!r)
        c->oom = true;
    return r;
}

static void *xcalloc(struct ctx *c, size_t n, size_t size)
{
    void *r = calloc(n ? n : 1, size);
    if (!r)
        c->oom = true;
    return r;
}

/* ---- JSON paths ---------------------------------------------------------------------------- */

static bool is_ident(const char *s)
{
    size_t n = 0;

    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return false;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
              (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '-'))
            return false;
    return n <= 64;
}

/* Paths are for people: a truncated one still ends visibly ("..."). */
static void mark_truncated(char *out, size_t size, int n)
{
    if ((n < 0 || (size_t)n >= size) && size >= 4)
        memcpy(out + size - 4, "...", 4);
}

/* parent.key, or parent["key"] (escaped, truncated) when key is not a plain identifier. */
static void path_key(char *out, size_t size, const char *parent, const char *key)
{
    char esc[160];
    size_t o = 0;

    if (is_ident(key)) {
        mark_truncated(out, size, snprintf(out, size, "%s%s%s", parent, parent[0] ? "." : "", key));
        return;
    }
    for (size_t i = 0; key[i] && o + 5 < sizeof(esc); i++) {
        unsigned char ch = (unsigned char)key[i];
        if (i >= 64) {
            esc[o++] = '.', esc[o++] = '.', esc[o++] = '.';
            break;
        }
        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
            o += (size_t)snprintf(esc + o, sizeof(esc) - o, "\\x%02x", ch);
        else
            esc[o++] = (char)ch;
    }
    esc[o] = '\0';
    mark_truncated(out, size, snprintf(out, size, "%s[\"%s\"]", parent, esc));
}

static void path_index(char *out, size_t size, const char *parent, size_t i)
{
    mark_truncated(out, size, snprintf(out, size, "%s[%zu]", parent, i));
}

/* ---- typed getters ------------------------------------------------------------------------- */

/* Report every key of obj not in allowed (NULL-terminated). */
static void check_keys(struct ctx *c, const char *path, json_t *obj, const char *const *allowed)
{
    const char *key;
    json_t *v;
    char p[PATH_BUF];

    json_object_foreach(obj, key, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0)
                ok = true;
        if (!ok) {
            path_key(p, sizeof(p), path, key);
            add_err(c, p, "unknown key");
        }
    }
}

/* A string of 1..maxlen bytes without NUL; NULL (reported) otherwise. */
static const char *want_string(struct ctx *c, const char *path, json_t *v, size_t maxlen)
{
    const char *s;
    size_t len;

    if (!json_is_string(v)) {
        add_err(c, path, "must be a string");
        return NULL;
    }
    s = json_string_value(v);
    len = json_string_length(v);
    if (len != strlen(s)) {
        add_err(c, path, "must not contain NUL bytes");
        return NULL;
    }
    if (len == 0) {
        add_err(c, path, "must not be empty");
        return NULL;
    }
    if (len > maxlen) {
        add_err(c, path, "must be at most %zu bytes", maxlen);
        return NULL;
    }
    return s;
}

static const char *get_string(struct ctx *c, const char *path, json_t *obj, const char *key,
                              bool required, size_t maxlen)
{
    char p[PATH_BUF];
    json_t *v = json_object_get(obj, key);

    path_key(p, sizeof(p), path, key);
    if (!v) {
        if (required)
            add_err(c, p, "required");
        return NULL;
    }
    return want_string(c, p, v, maxlen);
}

static int enum_index(const char *const *values, const char *s)
{
    for (int i = 0; values[i]; i++)
        if (strcmp(values[i], s) == 0)
            return i;
    return -1;
}

static void enum_error(struct ctx *c, const char *path, const char *const *values)
{
    char list[256];
    size_t o = 0;

    list[0] = '\0';
    for (size_t i = 0; values[i] && o < sizeof(list); i++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s\"%s\"",
                              i ? (values[i + 1] ? ", " : " or ") : "", values[i]);
    add_err(c, path, "must be one of %s", list);
}

static int want_enum(struct ctx *c, const char *path, json_t *v, const char *const *values, int def)
{
    int i;

    if (json_is_string(v) && json_string_length(v) == strlen(json_string_value(v)) &&
        (i = enum_index(values, json_string_value(v))) >= 0)
        return i;
    enum_error(c, path, values);
    return def;
}

static int get_enum(struct ctx *c, const char *path, json_t *obj, const char *key,
                    const char *const *values, int def)
{
    char p[PATH_BUF];
    json_t *v = json_object_get(obj, key);

    if (!v)
        return def;
    path_key(p, sizeof(p), path, key);
    return want_enum(c, p, v, values, def);
}

static bool want_int(struct ctx *c, const char *path, json_t *v, int64_t min, int64_t max,
                     int64_t *ret)
{
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        add_err(c, path, "must be an integer between %" PRId64 " and %" PRId64, min, max);
        return false;
    }
    *ret = json_integer_value(v);
    return true;
}

static json_t *get_object(struct ctx *c, const char *path, json_t *obj, const char *key)
{
    char p[PATH_BUF];
    json_t *v = json_object_get(obj, key);

    if (v && !json_is_object(v)) {
        path_key(p, sizeof(p), path, key);
        add_err(c, p, "must be an object");
        return NULL;
    }
    return v;
}

/* An array of at most max elements (min..max); NULL (reported) otherwise or when absent. */
static json_t *get_array(struct ctx *c, const char *path, json_t *obj, const char *key,
                         bool required, size_t min, size_t max)
{
    char p[PATH_BUF];
    json_t *v = json_object_get(obj, key);

    path_key(p, sizeof(p), path, key);
    if (!v) {
        if (required)
            add_err(c, p, "required");
        return NULL;
    }
    if (!json_is_array(v)) {
        add_err(c, p, "must be an array");
        return NULL;
    }
    if (json_array_size(v) < min || json_array_size(v) > max) {
        if (min == max)
            add_err(c, p, "must have exactly %zu elements", min);
        else
            add_err(c, p, "must have between %zu and %zu elements", min, max);
        return NULL;
    }
    return v;
}

/* ---- syntax checks of individual values ---------------------------------------------------- */

static bool valid_tool_name(const char *s)
{
    size_t n;

    if (!(*s >= 'a' && *s <= 'z'))
        return false;
    for (n = 1; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_' ||
              s[n] == '-'))
            return false;
    return n <= 64;
}

/* TOOLCAGE_TOKEN, TOOLCAGE_TOKEN_1, ... carry token grants (broker/leases.h): a policy may
 * not set or shadow them, nor anything else in that namespace. */
static bool reserved_env_name(const char *s)
{
    return strncmp(s, "TOOLCAGE_", 9) == 0;
}

static bool valid_env_name(const char *s)
{
    size_t n;

    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return false;
    for (n = 1; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
              (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return false;
    return n <= MAX_ENV_NAME;
}

/* Names of secrets and redaction rules: [A-Za-z0-9_.-], not starting with '.' or '-'. */
static bool valid_ref_name(const char *s)
{
    size_t n;

    if (*s == '.' || *s == '-' || *s == '\0')
        return false;
    for (n = 0; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
              (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '.' || s[n] == '-'))
            return false;
    return n <= MAX_NAME;
}

/* A plain file name: [A-Za-z0-9_.+-], not starting with '.' or '-', no "..". */
static const char *bad_file_name(const char *s)
{
    if (strchr(s, '/'))
        return "must be a file name, not a path (no '/')";
    if (strstr(s, ".."))
        return "must not contain \"..\"";
    if (s[0] == '.' || s[0] == '-')
        return "must not start with '.' or '-'";
    for (size_t i = 0; s[i]; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' || s[i] == '-' ||
              s[i] == '+'))
            return "may only contain letters, digits, '_', '.', '+' and '-'";
    return NULL;
}

/* An absolute, normalised path: no empty, "." or ".." components, no trailing '/', no control
 * bytes. */
static const char *bad_abs_path(const char *s)
{
    size_t len = strlen(s);

    if (s[0] != '/')
        return "must be an absolute path";
    if (len > MAX_PATH_LEN)
        return "is too long";
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return "must not contain control characters";
    if (len == 1)
        return NULL;
    if (s[len - 1] == '/')
        return "must not end with '/'";
    if (strstr(s, "//"))
        return "must not contain \"//\"";
    for (const char *p = s; p; p = strchr(p + 1, '/')) {
        const char *comp = p + 1;
        size_t n = strcspn(comp, "/");
        if ((n == 1 && comp[0] == '.') || (n == 2 && comp[0] == '.' && comp[1] == '.'))
            return "must not contain \".\" or \"..\" components";
    }
    return NULL;
}

static bool path_is_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* "host", "host:port", "*.domain", "*.domain:port" -> lowercased copy in out; NULL or a reason. */
static const char *bad_host_entry(const char *s, char *out, size_t size)
{
    const char *colon = strrchr(s, ':');
    const char *host = s;
    size_t hlen = colon ? (size_t)(colon - s) : strlen(s);
    size_t label = 0;

    if (strlen(s) >= size)
        return "is too long";
    if (colon) {
        const char *port = colon + 1;
        size_t plen = strlen(port);
        long v = 0;
        if (plen == 0 || plen > 5 || port[0] == '0')
            return "has an invalid port (must be 1..65535)";
        for (size_t i = 0; i < plen; i++) {
            if (port[i] < '0' || port[i] > '9')
                return "has an invalid port (must be 1..65535)";
            v = v * 10 + (port[i] - '0');
        }
        if (v < 1 || v > 65535)
            return "has an invalid port (must be 1..65535)";
    }
    if (hlen >= 2 && host[0] == '*' && host[1] == '.') {
        host += 2;
        hlen -= 2;
    }
    if (hlen == 0 || hlen > 253)
        return "is not a host, host:port, *.domain or *.domain:port";
    for (size_t i = 0; i < hlen; i++) {
        char ch = host[i];
        if (ch == '.') {
            if (label == 0 || host[i - 1] == '-')
                return "is not a valid host name";
            label = 0;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-'))
            return "is not a host, host:port, *.domain or *.domain:port";
        if (ch == '-' && label == 0)
            return "is not a valid host name";
        if (++label > 63)
            return "has a DNS label longer than 63 characters";
    }
    if (label == 0 || host[hlen - 1] == '-')
        return "is not a valid host name";
    for (size_t i = 0; s[i]; i++)
        out[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    out[strlen(s)] = '\0';
    return NULL;
}

/* ---- tools --------------------------------------------------------------------------------- */

static void free_strv(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void tool_done(struct tc_tool *t)
{
    free(t->name);
    free(t->description);
    free(t->language);
    free_strv(t->command, t->ncommand);
    free(t->code_file);
    free_strv(t->env, t->nenv);
    free(t->env_default);
    for (size_t i = 0; i < t->nmounts; i++) {
        free(t->mounts[i].source);
        free(t->mounts[i].target);
    }
    free(t->mounts);
    free_strv(t->network_allow, t->nnetwork_allow);
    free(t->runtime);
    free(t->image);
}

static void parse_command(struct ctx *c, const char *path, json_t *obj, struct tc_tool *t,
                          bool *ret_uses_code)
{
    char p[PATH_BUF], ap[PATH_BUF];
    json_t *arr = get_array(c, path, obj, "command", true, 1, MAX_COMMAND);
    json_t *v;
    size_t i;

    if (!arr)
        return;
    path_key(p, sizeof(p), path, "command");
    t->command = xcalloc(c, json_array_size(arr), sizeof(char *));
    if (!t->command)
        return;
    json_array_foreach(arr, i, v)
    {
        const char *s, *why;
        path_index(ap, sizeof(ap), p, i);
        if (!(s = want_string(c, ap, v, MAX_ARG)))
            continue;
        if (i == 0 && (why = bad_abs_path(s)))
            add_err(c, ap, "%s (the program to run)", why);
        if (strcmp(s, "{code_file}") == 0)
            *ret_uses_code = true;
        else if (strstr(s, "{code_file}"))
            add_err(c, ap, "\"{code_file}\" is only replaced as a whole element");
        t->command[t->ncommand++] = xstrdup(c, s);
    }
}

static void parse_limits(struct ctx *c, const char *path, json_t *obj, struct tc_tool *t)
{
    char lp[PATH_BUF], p[PATH_BUF], sp[PATH_BUF];
    json_t *limits = get_object(c, path, obj, "limits");

    for (int i = 0; i < TC_LIMIT__COUNT; i++)
        t->limits[i] = (struct tc_limit){tc_limit_builtin[i], tc_limit_builtin[i]};
    if (!limits)
        return;
    path_key(lp, sizeof(lp), path, "limits");
    check_keys(c, lp, limits,
               (const char *const[]){"timeout_ms", "cpu_ms", "memory_mb", "pids", "output_bytes",
                                     "file_size_mb", "workspace_mb", "tmp_mb", "open_files", NULL});
    for (int i = 0; i < TC_LIMIT__COUNT; i++) {
        json_t *v = json_object_get(limits, tc_limit_names[i]);
        int64_t def, max, ceil = tc_limit_ceiling[i];

        if (!v)
            continue;
        path_key(p, sizeof(p), lp, tc_limit_names[i]);
        if (json_is_object(v)) {
            bool ok = true;
            check_keys(c, p, v, (const char *const[]){"default", "max", NULL});
            for (int k = 0; k < 2; k++) {
                const char *key = k ? "max" : "default";
                json_t *x = json_object_get(v, key);
                path_key(sp, sizeof(sp), p, key);
                if (!x) {
                    add_err(c, sp, "required");
                    ok = false;
                } else if (!want_int(c, sp, x, 1, ceil, k ? &max : &def)) {
                    ok = false;
                }
            }
            if (!ok)
                continue;
            if (def > max) {
                add_err(c, p, "default (%" PRId64 ") exceeds max (%" PRId64 ")", def, max);
                continue;
            }
        } else if (json_is_integer(v)) {
            if (!want_int(c, p, v, 1, ceil, &def))
                continue;
            max = def;
        } else {
            add_err(c, p,
                    "must be an integer between 1 and %" PRId64 " or {\"default\": N, \"max\": N}",
                    ceil);
            continue;
        }
        t->limits[i] = (struct tc_limit){def, max};
    }
}

static int env_cmp(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t nx = strcspn(x, "="), ny = strcspn(y, "=");
    int r = memcmp(x, y, nx < ny ? nx : ny);
    return r ? r : (nx > ny) - (nx < ny);
}

static char *env_entry(struct ctx *c, const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 2;
    char *s = malloc(n);

    if (!s) {
        c->oom = true;
        return NULL;
    }
    snprintf(s, n, "%s=%s", name, value);
    return s;
}

static void parse_env(struct ctx *c, const char *path, json_t *obj, struct tc_tool *t)
{
    char ep[PATH_BUF], p[PATH_BUF];
    json_t *env = get_object(c, path, obj, "env");
    const char *key;
    json_t *v;
    size_t n = TC_ARRAY_SIZE(default_env);

    if (env) {
        path_key(ep, sizeof(ep), path, "env");
        if (json_object_size(env) > MAX_ENV) {
            add_err(c, ep, "must have at most %d entries", MAX_ENV);
            env = NULL;
        } else {
            n += json_object_size(env);
        }
    }
    t->env = xcalloc(c, n, sizeof(char *));
    if (!t->env)
        return;
    for (size_t i = 0; i < TC_ARRAY_SIZE(default_env); i++)
        if (!env || !json_object_get(env, default_env[i][0]))
            t->env[t->nenv++] = env_entry(c, default_env[i][0], default_env[i][1]);
    if (env) {
        json_object_foreach(env, key, v)
        {
            const char *s;
            path_key(p, sizeof(p), ep, key);
            if (!valid_env_name(key)) {
                add_err(c, p, "variable name must match [A-Za-z_][A-Za-z0-9_]* (at most %d bytes)",
                        MAX_ENV_NAME);
                continue;
            }
            if (reserved_env_name(key)) {
                add_err(c, p, "TOOLCAGE_* names are reserved (token grants)");
                continue;
            }
            if (!json_is_string(v)) {
                add_err(c, p, "must be a string");
                continue;
            }
            s = json_string_value(v);
            if (json_string_length(v) != strlen(s)) {
                add_err(c, p, "must not contain NUL bytes");
                continue;
            }
            if (json_string_length(v) > MAX_ENV_VALUE) {
                add_err(c, p, "must be at most %d bytes", MAX_ENV_VALUE);
                continue;
            }
            t->env[t->nenv++] = env_entry(c, key, s);
        }
    }
    for (size_t i = 0; i < t->nenv; i++)
        if (!t->env[i])
            return; /* OOM already recorded; keep the array valid for freeing */
    qsort(t->env, t->nenv, sizeof(char *), env_cmp);
    t->env_default = xcalloc(c, t->nenv ? t->nenv : 1, sizeof(bool));
    for (size_t i = 0; t->env_default && i < t->nenv; i++)
        for (size_t d = 0; d < TC_ARRAY_SIZE(default_env); d++) {
            size_t dn = strlen(default_env[d][0]);
            if (strncmp(t->env[i], default_env[d][0], dn) == 0 && t->env[i][dn] == '=' &&
                !(env && json_object_get(env, default_env[d][0])))
                t->env_default[i] = true;
        }
}

static void parse_filesystem(struct ctx *c, const char *path, json_t *obj, struct tc_tool *t)
{
    char fp[PATH_BUF], p[PATH_BUF], kp[PATH_BUF];
    json_t *arr = get_array(c, path, obj, "filesystem", false, 0, MAX_MOUNTS);
    json_t *m;
    size_t i;

    if (!arr)
        return;
    path_key(fp, sizeof(fp), path, "filesystem");
    t->mounts = xcalloc(c, json_array_size(arr), sizeof(*t->mounts));
    if (!t->mounts)
        return;
    json_array_foreach(arr, i, m)
    {
        const char *src, *dst, *why;
        bool ok = true;
        int mode;

        path_index(p, sizeof(p), fp, i);
        if (!json_is_object(m)) {
            add_err(c, p, "must be an object {\"source\", \"target\", \"mode\"}");
            continue;
        }
        check_keys(c, p, m, (const char *const[]){"source", "target", "mode", NULL});
        src = get_string(c, p, m, "source", true, MAX_PATH_LEN);
        dst = get_string(c, p, m, "target", true, MAX_PATH_LEN);
        mode = get_enum(c, p, m, "mode", (const char *const[]){"ro", "rw", NULL}, 0);
        if (src) {
            path_key(kp, sizeof(kp), p, "source");
            if ((why = bad_abs_path(src))) {
                add_err(c, kp, "%s", why);
                ok = false;
            } else if (strcmp(src, "/") == 0) {
                add_err(c, kp, "must not be the host's root directory");
                ok = false;
            }
        }
        if (dst) {
            path_key(kp, sizeof(kp), p, "target");
            if ((why = bad_abs_path(dst))) {
                add_err(c, kp, "%s", why);
                ok = false;
            } else if (strcmp(dst, "/") == 0) {
                add_err(c, kp, "must not be the sandbox's root directory");
                ok = false;
            } else {
                for (size_t r = 0; r < TC_ARRAY_SIZE(reserved_targets); r++)
                    if (path_is_under(dst, reserved_targets[r])) {
                        add_err(c, kp, "must not be %s or under it (reserved by the sandbox)",
                                reserved_targets[r]);
                        ok = false;
                    }
                for (size_t k = 0; k < t->nmounts && ok; k++)
                    if (strcmp(t->mounts[k].target, dst) == 0) {
                        add_err(c, kp, "duplicates filesystem[%zu].target", k);
                        ok = false;
                    }
            }
        }
        if (!src || !dst || !ok)
            continue;
        t->mounts[t->nmounts].source = xstrdup(c, src);
        t->mounts[t->nmounts].target = xstrdup(c, dst);
        t->mounts[t->nmounts].writable = mode == 1;
        t->nmounts++;
    }
}

static void parse_network(struct ctx *c, const char *path, json_t *obj, struct tc_tool *t)
{
    char np[PATH_BUF], p[PATH_BUF];
    json_t *net = json_object_get(obj, "network");
    json_t *allow, *v;
    size_t i;

    t->network_none = true;
    if (!net)
        return;
    path_key(np, sizeof(np), path, "network");
    if (json_is_string(net) && strcmp(json_string_value(net), "none") == 0)
        return;
    if (!json_is_object(net)) {
        add_err(c, np, "must be \"none\" or {\"allow\": [...]}");
        return;
    }
    check_keys(c, np, net,
               (const char *const[]){"allow", "ask", "ask_timeout_seconds", "ask_private", NULL});
    /* "ask": a connection to a host not listed is held for a reviewer (docs/approvals.md) */
    t->network_ask_timeout_s = 120;
    if ((v = json_object_get(net, "ask"))) {
        path_key(p, sizeof(p), np, "ask");
        if (!json_is_boolean(v))
            add_err(c, p, "must be a boolean");
        t->network_ask = json_is_true(v);
    }
    /* a reviewer may allow loopback/private/link-local IPv4 literals (on-premises services);
     * without it they are refused without asking. Metadata addresses never. */
    if ((v = json_object_get(net, "ask_private"))) {
        path_key(p, sizeof(p), np, "ask_private");
        if (!json_is_boolean(v))
            add_err(c, p, "must be a boolean");
        else if (!t->network_ask)
            add_err(c, p, "needs \"ask\": true");
        t->network_ask_private = json_is_true(v);
    }
    if ((v = json_object_get(net, "ask_timeout_seconds"))) {
        path_key(p, sizeof(p), np, "ask_timeout_seconds");
        if (!t->network_ask)
            add_err(c, p, "needs \"ask\": true");
        (void)want_int(c, p, v, 5, 3600, &t->network_ask_timeout_s);
    }
    allow = get_array(c, np, net, "allow", true, 0, MAX_ALLOW);
    if (!allow)
        return;
    path_key(p, sizeof(p), np, "allow");
    if (json_array_size(allow) == 0 && !t->network_ask) {
        add_err(c, p, "must list at least one host (use \"network\": \"none\" for no network)");
        return;
    }
    t->network_allow = xcalloc(c, json_array_size(allow) + 1, sizeof(char *));
    if (!t->network_allow)
        return;
    t->network_none = false;
    json_array_foreach(allow, i, v)
    {
        char ip[PATH_BUF], norm[300];
        const char *s, *why;
        bool dup = false;

        path_index(ip, sizeof(ip), p, i);
        if (!(s = want_string(c, ip, v, sizeof(norm) - 1)))
            continue;
        if ((why = bad_host_entry(s, norm, sizeof(norm)))) {
            add_err(c, ip, "\"%s\" %s", s, why);
            continue;
        }
        for (size_t k = 0; k < t->nnetwork_allow; k++)
            if (strcmp(t->network_allow[k], norm) == 0)
                dup = true;
        if (dup) {
            add_err(c, ip, "duplicate entry \"%s\"", norm);
            continue;
        }
        if ((t->network_allow[t->nnetwork_allow] = xstrdup(c, norm)))
            t->nnetwork_allow++;
    }
}

/* Shape of the sections later modules own: validated here, read by them from t->raw. */
static void check_prescreen(struct ctx *c, const char *path, json_t *obj)
{
    static const char *const rules[] = {"python", "shell", "javascript", "none", NULL};
    static const char *const severities[] = {"low", "medium", "high", "critical", NULL};
    static const char *const actions[] = {"warn", "approve", "block", NULL};
    char pp[PATH_BUF], ap[PATH_BUF], p[PATH_BUF];
    json_t *ps = get_object(c, path, obj, "prescreen");
    json_t *acts;
    const char *key;
    json_t *v;

    if (!ps)
        return;
    path_key(pp, sizeof(pp), path, "prescreen");
    check_keys(c, pp, ps, (const char *const[]){"rules", "actions", NULL});
    get_enum(c, pp, ps, "rules", rules, 0);
    if (!(acts = get_object(c, pp, ps, "actions")))
        return;
    path_key(ap, sizeof(ap), pp, "actions");
    json_object_foreach(acts, key, v)
    {
        path_key(p, sizeof(p), ap, key);
        if (enum_index(severities, key) < 0)
            add_err(c, p,
                    "unknown key (severities are \"low\", \"medium\", \"high\" and \"critical\")");
        else
            want_enum(c, p, v, actions, 0);
    }
}

static void check_approval(struct ctx *c, const char *path, json_t *obj)
{
    char ap[PATH_BUF], p[PATH_BUF];
    json_t *a = get_object(c, path, obj, "approval");
    json_t *v;
    int64_t x;

    if (!a)
        return;
    path_key(ap, sizeof(ap), path, "approval");
    check_keys(c, ap, a, (const char *const[]){"ttl_seconds", "approvers", NULL});
    if ((v = json_object_get(a, "ttl_seconds"))) {
        path_key(p, sizeof(p), ap, "ttl_seconds");
        want_int(c, p, v, 60, 604800, &x);
    }
    if ((v = json_object_get(a, "approvers"))) {
        path_key(p, sizeof(p), ap, "approvers");
        want_int(c, p, v, 1, 10, &x);
    }
}

/* {"secret", "as": "header", "host", "port"?, "header", "format"?}: the egress proxy adds
 * "header: format" (its "{value}" the secret's) to HTTPS requests to host:port (default 443),
 * which the tool's network.allow must name as "host:port" (or "host" for 443); the value
 * never enters the sandbox (docs/sandbox.md, "Credentials at egress"). */
static void check_header_grant(struct ctx *c, const char *p, json_t *cred, const struct tc_tool *t)
{
    char kp[PATH_BUF], norm[300];
    check_keys(c, p, cred,
               (const char *const[]){"secret", "as", "host", "port", "header", "format", NULL});
    const char *secret = get_string(c, p, cred, "secret", true, MAX_NAME);
    const char *host = get_string(c, p, cred, "host", true, 253);
    const char *header = get_string(c, p, cred, "header", true, 64);
    const char *format = get_string(c, p, cred, "format", false, 256);
    int64_t port = 443;
    json_t *pv = json_object_get(cred, "port");
    path_key(kp, sizeof(kp), p, "secret");
    if (secret && !valid_ref_name(secret))
        add_err(c, kp, "secret names may only contain letters, digits, '_', '.' and '-'");
    path_key(kp, sizeof(kp), p, "port");
    if (pv)
        (void)want_int(c, kp, pv, 1, 65535, &port);
    path_key(kp, sizeof(kp), p, "header");
    bool token = header && *header;
    for (const char *h = header; token && *h; h++)
        token = isalnum((unsigned char)*h) || strchr("!#$%&'*+-.^_`|~", *h);
    if (header && !token)
        add_err(c, kp, "must be an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)");
    else if (header && (strcasecmp(header, "host") == 0 || strcasecmp(header, "connection") == 0 ||
                        strcasecmp(header, "content-length") == 0 ||
                        strcasecmp(header, "transfer-encoding") == 0 ||
                        strncasecmp(header, "proxy-", 6) == 0))
        add_err(c, kp, "%s is not a credential header", header);
    path_key(kp, sizeof(kp), p, "format");
    if (format) {
        const char *v = strstr(format, "{value}");
        bool ctl = false;
        for (const char *f = format; *f; f++)
            ctl |= (unsigned char)*f < 0x20 || *f == 0x7f;
        if (!v || strstr(v + 7, "{value}"))
            add_err(c, kp, "must contain {value} once");
        else if (ctl)
            add_err(c, kp, "must not contain control characters");
    }
    path_key(kp, sizeof(kp), p, "host");
    if (!host)
        return;
    const char *why = bad_host_entry(host, norm, sizeof(norm));
    if (why || strchr(host, ':') || host[0] == '*') {
        add_err(c, kp, "\"%s\" must be one host name or IPv4 address, without port", host);
        return;
    }
    char with_port[320];
    snprintf(with_port, sizeof(with_port), "%s:%lld", norm, (long long)port);
    bool listed = false;
    for (size_t k = 0; k < t->nnetwork_allow; k++)
        listed |= strcmp(t->network_allow[k], with_port) == 0 ||
                  (port == 443 && strcmp(t->network_allow[k], norm) == 0);
    if (!listed)
        add_err(c, kp, "%s must be in network.allow (as \"%s\")", with_port, with_port);
    /* one header per host:port: the proxy adds one grant's header to a connection */
    json_t *all = json_object_get(t->raw, "credentials"), *o;
    size_t k;
    json_array_foreach(all, k, o)
    {
        if (o == cred)
            break;
        const char *oh = json_string_value(json_object_get(o, "host"));
        json_t *op = json_object_get(o, "port");
        if (json_is_string(json_object_get(o, "as")) &&
            strcmp(json_string_value(json_object_get(o, "as")), "header") == 0 && oh &&
            strcasecmp(oh, host) == 0 && (op ? json_integer_value(op) : 443) == port) {
            add_err(c, kp, "credentials[%zu] already adds a header for %s", k, with_port);
            break;
        }
    }
}

static void check_credentials(struct ctx *c, const char *path, json_t *obj, const struct tc_tool *t)
{
    char cp[PATH_BUF], p[PATH_BUF], kp[PATH_BUF], tp[PATH_BUF];
    json_t *arr = get_array(c, path, obj, "credentials", false, 0, MAX_CREDENTIALS);
    json_t *cred;
    size_t i;

    if (!arr)
        return;
    path_key(cp, sizeof(cp), path, "credentials");
    json_array_foreach(arr, i, cred)
    {
        path_index(p, sizeof(p), cp, i);
        if (!json_is_object(cred)) {
            add_err(c, p, "must be an object");
            continue;
        }
        if (json_object_get(cred, "token")) {
            json_t *tok;
            json_t *ttl;
            int64_t x;
            check_keys(c, p, cred, (const char *const[]){"token", NULL});
            if (!(tok = get_object(c, p, cred, "token")))
                continue;
            path_key(kp, sizeof(kp), p, "token");
            check_keys(c, kp, tok, (const char *const[]){"audience", "scope", "ttl_seconds", NULL});
            get_string(c, kp, tok, "audience", true, MAX_NAME);
            get_string(c, kp, tok, "scope", true, MAX_SCOPE);
            path_key(tp, sizeof(tp), kp, "ttl_seconds");
            if (!(ttl = json_object_get(tok, "ttl_seconds")))
                add_err(c, tp, "required");
            else
                want_int(c, tp, ttl, 1, 3600, &x);
            continue;
        }
        if (json_is_string(json_object_get(cred, "as")) &&
            strcmp(json_string_value(json_object_get(cred, "as")), "header") == 0) {
            check_header_grant(c, p, cred, t);
            continue;
        }
        check_keys(c, p, cred, (const char *const[]){"secret", "as", "name", NULL});
        {
            const char *secret = get_string(c, p, cred, "secret", true, MAX_NAME);
            const char *name = get_string(c, p, cred, "name", true, MAX_NAME);
            json_t *as = json_object_get(cred, "as");
            int how = -1;
            const char *why;

            path_key(kp, sizeof(kp), p, "secret");
            if (secret && !valid_ref_name(secret))
                add_err(c, kp, "secret names may only contain letters, digits, '_', '.' and '-'");
            path_key(kp, sizeof(kp), p, "as");
            if (!as)
                add_err(c, kp, "required");
            else
                how =
                    want_enum(c, kp, as, (const char *const[]){"env", "file", "header", NULL}, -1);
            path_key(kp, sizeof(kp), p, "name");
            if (!name || how < 0)
                continue;
            if (how == 0) {
                if (!valid_env_name(name))
                    add_err(c, kp, "must be an environment variable name [A-Za-z_][A-Za-z0-9_]*");
                else if (reserved_env_name(name))
                    add_err(c, kp, "TOOLCAGE_* names are reserved (token grants)");
                else
                    for (size_t k = 0; k < t->nenv; k++)
                        if (t->env[k] && strncmp(t->env[k], name, strlen(name)) == 0 &&
                            t->env[k][strlen(name)] == '=') {
                            add_err(c, kp,
                                    "%s is also set by env; a credential must not be overridden",
                                    name);
                            break;
                        }
            } else if ((why = bad_file_name(name))) {
                add_err(c, kp, "%s", why);
            }
        }
    }
    /* Two credentials landing on the same variable or file name would shadow one another. */
    for (size_t a = 0; a < json_array_size(arr); a++)
        for (size_t b = 0; b < a; b++) {
            json_t *x = json_array_get(arr, a), *y = json_array_get(arr, b);
            json_t *xn = json_object_get(x, "name"), *yn = json_object_get(y, "name");
            json_t *xa = json_object_get(x, "as"), *ya = json_object_get(y, "as");
            if (json_is_string(xn) && json_is_string(yn) && json_is_string(xa) &&
                json_is_string(ya) && json_equal(xn, yn) && json_equal(xa, ya)) {
                path_index(p, sizeof(p), cp, a);
                path_key(kp, sizeof(kp), p, "name");
                add_err(c, kp, "same %s name as credentials[%zu]", json_string_value(xa), b);
                break;
            }
        }
}

/* output.redact.disable / .enable: known rule names, each once, never in both lists. */
static void check_rule_list(struct ctx *c, const char *rp, json_t *redact, const char *key,
                            json_t *other)
{
    char dp[PATH_BUF], p[PATH_BUF];
    json_t *list, *v;
    size_t i;
    if (!(list = get_array(c, rp, redact, key, false, 0, MAX_REDACT_DISABLE)))
        return;
    path_key(dp, sizeof(dp), rp, key);
    json_array_foreach(list, i, v)
    {
        const char *s;
        path_index(p, sizeof(p), dp, i);
        if (!(s = want_string(c, p, v, MAX_NAME)))
            continue;
        size_t nrules;
        const char *const *rules = tc_redact_rule_names(&nrules);
        bool known = false;
        for (size_t k = 0; k < nrules; k++)
            known |= strcmp(rules[k], s) == 0;
        if (!known)
            add_err(c, p, "unknown redaction rule \"%s\" (see docs/redaction.md)", s);
        for (size_t k = 0; k < i; k++)
            if (json_equal(json_array_get(list, k), v)) {
                add_err(c, p, "duplicate entry \"%s\"", s);
                break;
            }
        size_t k;
        json_t *o;
        json_array_foreach(other, k, o) if (json_equal(o, v))
        {
            add_err(c, p, "\"%s\" is both enabled and disabled", s);
            break;
        }
    }
}

static void check_output(struct ctx *c, const char *path, json_t *obj)
{
    char op[PATH_BUF], rp[PATH_BUF];
    json_t *out = get_object(c, path, obj, "output");
    json_t *redact;

    if (!out)
        return;
    path_key(op, sizeof(op), path, "output");
    check_keys(c, op, out, (const char *const[]){"redact", "plots", NULL});
    json_t *plots = json_object_get(out, "plots");
    if (plots) {
        char pp[PATH_BUF];
        path_key(pp, sizeof(pp), op, "plots");
        const char *lang = json_string_value(json_object_get(obj, "language"));
        if (!json_is_boolean(plots))
            add_err(c, pp, "must be a boolean");
        else if (json_is_true(plots) && (!lang || strcmp(lang, "python") != 0))
            add_err(c, pp, "only a tool of language \"python\" can return plots");
    }
    if (!(redact = get_object(c, op, out, "redact")))
        return;
    path_key(rp, sizeof(rp), op, "redact");
    check_keys(c, rp, redact, (const char *const[]){"disable", "enable", NULL});
    json_t *dis = json_object_get(redact, "disable");
    check_rule_list(c, rp, redact, "disable", NULL);
    check_rule_list(c, rp, redact, "enable", json_is_array(dis) ? dis : NULL);
}

static bool has_code_file_arg(const struct tc_tool *t)
{
    for (size_t i = 0; i < t->ncommand; i++)
        if (t->command[i] && strcmp(t->command[i], "{code_file}") == 0)
            return true;
    return false;
}

/* "session": whether the tool can be opened as a session (api/sessions.c), and its bounds. */
static void parse_session(struct ctx *c, const char *path, json_t *obj, struct tc_tool *t)
{
    char sp[PATH_BUF], p[PATH_BUF];
    json_t *ses = get_object(c, path, obj, "session"), *v;

    t->session_ttl_max_s = 3600;
    t->session_idle_max_s = 600;
    if (!ses)
        return;
    path_key(sp, sizeof(sp), path, "session");
    check_keys(c, sp, ses,
               (const char *const[]){"enabled", "max_ttl_seconds", "max_idle_seconds", "held_calls",
                                     NULL});
    if ((v = json_object_get(ses, "enabled"))) {
        path_key(p, sizeof(p), sp, "enabled");
        if (!json_is_boolean(v))
            add_err(c, p, "must be a boolean");
        t->session = json_is_true(v);
    }
    if ((v = json_object_get(ses, "max_ttl_seconds"))) {
        path_key(p, sizeof(p), sp, "max_ttl_seconds");
        (void)want_int(c, p, v, 10, TC_SESSION_TTL_CEILING_S, &t->session_ttl_max_s);
    }
    if ((v = json_object_get(ses, "max_idle_seconds"))) {
        path_key(p, sizeof(p), sp, "max_idle_seconds");
        (void)want_int(c, p, v, 1, TC_SESSION_TTL_CEILING_S, &t->session_idle_max_s);
    }
    /* A call the gate holds: refused (the default), or held in the session until a person
     * decides (the session waits, busy, for that call). */
    if ((v = json_object_get(ses, "held_calls"))) {
        path_key(p, sizeof(p), sp, "held_calls");
        const char *hc = json_string_value(v);
        if (!hc || (strcmp(hc, "refuse") != 0 && strcmp(hc, "hold") != 0))
            add_err(c, p, "must be \"refuse\" or \"hold\"");
        t->session_hold = hc && strcmp(hc, "hold") == 0;
    }
    const char *lang = json_string_value(json_object_get(obj, "language"));
    path_key(p, sizeof(p), sp, "enabled");
    if (t->session && (!lang || (strcmp(lang, "python") != 0 && strcmp(lang, "shell") != 0)))
        add_err(c, p, "only a tool of language \"python\" or \"shell\" can be a session");
    if (t->session && t->backend != TC_BACKEND_NATIVE)
        add_err(c, p, "sessions need the \"native\" backend");
    if (t->session && (t->ncommand == 0 || !has_code_file_arg(t)))
        add_err(c, p, "a session runs its driver in place of {code_file}: the command needs it");
}

static char *find_runsc(struct ctx *c)
{
    char path[PATH_MAX];
    return tc_find_runsc(path, sizeof(path)) == 0 ? xstrdup(c, path) : NULL;
}

static void parse_tool(struct ctx *c, const char *name, json_t *obj, struct tc_tool *t)
{
    static const char *const keys[] = {
        "description", "language",     "command",  "code_file",   "backend",
        "tier",        "irreversible", "limits",   "env",         "filesystem",
        "network",     "prescreen",    "approval", "credentials", "output",
        "session",     "image",        "workdir",  NULL};
    char path[PATH_BUF], p[PATH_BUF];
    const char *s, *why;
    bool uses_code = false, tier_ok;
    size_t before;
    json_t *v;

    path_key(path, sizeof(path), "tools", name);
    t->raw = obj;
    t->name = xstrdup(c, name);
    check_keys(c, path, obj, keys);

    if ((s = get_string(c, path, obj, "description", true, MAX_DESCRIPTION)))
        t->description = xstrdup(c, s);
    t->language = xstrdup(c, languages[get_enum(c, path, obj, "language", languages, 3)]);
    parse_command(c, path, obj, t, &uses_code);

    path_key(p, sizeof(p), path, "code_file");
    if ((v = json_object_get(obj, "code_file"))) {
        if ((s = want_string(c, p, v, MAX_CODE_FILE))) {
            if ((why = bad_file_name(s)))
                add_err(c, p, "%s", why);
            else
                t->code_file = xstrdup(c, s);
        }
    } else if (uses_code) {
        add_err(c, p, "required when command contains \"{code_file}\"");
    } else {
        t->code_file = xstrdup(c, "main.txt");
    }

    t->backend = (enum tc_backend)get_enum(c, path, obj, "backend", backends, TC_BACKEND_NATIVE);
    if (t->backend == TC_BACKEND_GVISOR && !(t->runtime = find_runsc(c))) {
        path_key(p, sizeof(p), path, "backend");
        add_err(c, p,
                "runsc not found in PATH, /usr/bin, /usr/sbin or /usr/local/bin "
                "(install gVisor or use \"native\")");
    }
    if ((v = json_object_get(obj, "image"))) {
        path_key(p, sizeof(p), path, "image");
        if (!json_is_string(v) || !tc_image_ref_valid(json_string_value(v)))
            add_err(c, p,
                    "an image reference: \"name[:tag]\", \"name[:tag]@sha256:<64 hex>\" or "
                    "\"sha256:<64 hex>\" (see `toolcage images ls`)");
        else
            t->image = xstrdup(c, json_string_value(v));
    }
    if ((v = json_object_get(obj, "workdir"))) {
        /* where the program starts: the call's workspace (the tool contract), or the image's
         * WorkingDir (an opt-in: agents' code assumes it starts beside its files) */
        static const char *const workdirs[] = {"workspace", "image", NULL};
        path_key(p, sizeof(p), path, "workdir");
        int w = get_enum(c, path, obj, "workdir", workdirs, 0);
        if (w == 1 && !t->image)
            add_err(c, p, "\"image\" needs the tool to have an \"image\"");
        t->workdir_image = w == 1;
    }
    before = c->nerrors;
    t->tier = (enum tc_tier)get_enum(c, path, obj, "tier", tiers, TC_TIER_AUTO);
    tier_ok = c->nerrors == before;
    if ((v = json_object_get(obj, "irreversible"))) {
        path_key(p, sizeof(p), path, "irreversible");
        if (!json_is_boolean(v))
            add_err(c, p, "must be true or false");
        else
            t->irreversible = json_is_true(v);
    }
    /* An irreversible call must never run without a person deciding. */
    if (tier_ok && t->irreversible && (t->tier == TC_TIER_AUTO || t->tier == TC_TIER_ASSISTED)) {
        path_key(p, sizeof(p), path, "tier");
        add_err(c, p, "an irreversible tool needs tier \"human_approve\" or \"manual_only\"");
    }

    parse_limits(c, path, obj, t);
    parse_env(c, path, obj, t);
    parse_filesystem(c, path, obj, t);
    parse_network(c, path, obj, t);
    if (t->backend == TC_BACKEND_GVISOR && !t->network_none) {
        /* runsc runs with --network=none; the egress proxy serves native sandboxes only */
        path_key(p, sizeof(p), path, "network");
        add_err(c, p, "the gvisor backend supports \"none\" only (allowlists need \"native\")");
    }
    if (t->backend == TC_BACKEND_MICROVM) {
        /* the guest has no network device; its filesystem is /usr and the workspace */
        if (!t->network_none) {
            path_key(p, sizeof(p), path, "network");
            add_err(c, p,
                    "the microvm backend supports \"none\" only (allowlists need \"native\")");
        }
        if (json_object_get(obj, "image")) {
            path_key(p, sizeof(p), path, "image");
            add_err(c, p, "the microvm backend runs the host's /usr: no tool image yet");
        }
        if (json_array_size(json_object_get(obj, "filesystem")) > 0) {
            path_key(p, sizeof(p), path, "filesystem");
            add_err(c, p, "the microvm backend shares only /usr and the workspace with its guest");
        }
    }
    check_prescreen(c, path, obj);
    check_approval(c, path, obj);
    check_credentials(c, path, obj, t);
    check_output(c, path, obj);
    t->plots = json_is_true(json_object_get(json_object_get(obj, "output"), "plots"));
    parse_session(c, path, obj, t);
    if (t->network_ask && t->session) {
        /* a session's sandbox outlives its calls: an ask would have no one execution to name */
        path_key(p, sizeof(p), path, "network");
        add_err(c, p, "\"ask\" is not available for session tools");
    }
}

/* ---- the policy ---------------------------------------------------------------------------- */

static void policy_free(struct tc_policy *p)
{
    for (size_t i = 0; i < p->ntools; i++)
        tool_done(&p->tools[i]);
    free(p->tools);
    json_decref(p->root);
    free(p);
}

static int tool_cmp(const void *a, const void *b)
{
    return strcmp(((const struct tc_tool *)a)->name, ((const struct tc_tool *)b)->name);
}

static void validate(struct ctx *c, json_t *root, struct tc_policy *p)
{
    json_t *version, *tools, *v;
    const char *name;
    char tp[PATH_BUF];

    if (!json_is_object(root)) {
        add_err(c, "", "must be an object {\"version\": 1, \"tools\": {...}}");
        return;
    }
    check_keys(c, "", root, (const char *const[]){"version", "tools", NULL});
    version = json_object_get(root, "version");
    if (!version)
        add_err(c, "version", "required (this build reads version 1)");
    else if (!json_is_integer(version) || json_integer_value(version) != 1)
        add_err(c, "version", "unsupported version (this build reads version 1)");
    tools = json_object_get(root, "tools");
    if (!tools) {
        add_err(c, "tools", "required");
        return;
    }
    if (!json_is_object(tools)) {
        add_err(c, "tools", "must be an object {\"NAME\": {...}}");
        return;
    }
    if (json_object_size(tools) == 0) {
        add_err(c, "tools", "must declare at least one tool");
        return;
    }
    if (json_object_size(tools) > TC_POLICY_MAX_TOOLS) {
        add_err(c, "tools", "at most %d tools may be declared", TC_POLICY_MAX_TOOLS);
        return;
    }
    p->tools = xcalloc(c, json_object_size(tools), sizeof(*p->tools));
    if (!p->tools)
        return;
    json_object_foreach(tools, name, v)
    {
        path_key(tp, sizeof(tp), "tools", name);
        if (!valid_tool_name(name)) {
            add_err(c, tp, "tool name must match [a-z][a-z0-9_-]{0,63}");
            continue;
        }
        if (strncmp(name, "toolcage_", 9) == 0) { /* built-in tools (api/mcp.c: toolcage_wait) */
            add_err(c, tp, "tool names starting with \"toolcage_\" are reserved");
            continue;
        }
        if (!json_is_object(v)) {
            add_err(c, tp, "must be an object");
            continue;
        }
        parse_tool(c, name, v, &p->tools[p->ntools++]);
        if (c->oom)
            return;
    }
}

static void set_errors(json_t **ret_errors, json_t *errors)
{
    if (ret_errors)
        *ret_errors = json_incref(errors);
}

static int load(const char *text, size_t len, struct tc_policy **ret_policy, json_t **ret_errors)
{
    unsigned char hash[crypto_generichash_BYTES];
    struct ctx c = {.errors = json_array()};
    struct tc_policy *p = NULL;
    json_error_t jerr;
    int r = -EINVAL;

    if (!c.errors)
        return -ENOMEM;
    if (len > TC_POLICY_MAX_BYTES) {
        add_err(&c, "", "file is larger than %d bytes", TC_POLICY_MAX_BYTES);
        r = -EFBIG;
        goto out;
    }
    if (sodium_init() < 0) {
        r = -EIO;
        goto out;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        r = -ENOMEM;
        goto out;
    }
    atomic_init(&p->refs, 1);
    p->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!p->root) {
        add_err(&c, "", "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
                jerr.text);
        goto out;
    }
    validate(&c, p->root, p);
    if (c.oom) {
        r = -ENOMEM;
        goto out;
    }
    if (c.nerrors > 0)
        goto out;
    qsort(p->tools, p->ntools, sizeof(*p->tools), tool_cmp);
    crypto_generichash(hash, sizeof(hash), (const unsigned char *)text, len, NULL, 0);
    sodium_bin2hex(p->digest, sizeof(p->digest), hash, sizeof(hash));
    *ret_policy = TC_STEAL(p);
    r = 0;
out:
    finish_errors(&c);
    if (r < 0)
        set_errors(ret_errors, c.errors);
    else if (ret_errors)
        *ret_errors = NULL;
    json_decref(c.errors);
    if (p)
        policy_free(p);
    return r;
}

int tc_policy_load_buffer(const char *text, size_t len, struct tc_policy **ret_policy,
                          json_t **ret_errors)
{
    if (!text || !ret_policy)
        return -EINVAL;
    return load(text, len, ret_policy, ret_errors);
}

static int read_policy_file(const char *path, char **ret_buf, size_t *ret_len)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    struct stat st;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    /* Read one byte past the cap so an oversized (or growing) file is noticed. */
    buf = malloc(TC_POLICY_MAX_BYTES + 2);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        ssize_t n = TC_RETRY(read(fd, buf + len, TC_POLICY_MAX_BYTES + 1 - len));
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > TC_POLICY_MAX_BYTES)
            return -EFBIG;
    }
    buf[len] = '\0';
    *ret_buf = TC_STEAL(buf);
    *ret_len = len;
    return 0;
}

int tc_policy_load(const char *path, struct tc_policy **ret_policy, json_t **ret_errors)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r;

    if (!path || !ret_policy)
        return -EINVAL;
    r = read_policy_file(path, &buf, &len);
    if (r < 0) {
        /* No file name here: callers print it in front of every error. */
        if (ret_errors) {
            char msg[256];
            if (r == -EFBIG)
                snprintf(msg, sizeof(msg), "(root): file is larger than %d bytes",
                         TC_POLICY_MAX_BYTES);
            else if (r == -EINVAL)
                snprintf(msg, sizeof(msg), "(root): not a regular file");
            else
                snprintf(msg, sizeof(msg), "(root): cannot read: %s", strerror(-r));
            *ret_errors = json_pack("[s]", msg);
        }
        return r;
    }
    return load(buf, len, ret_policy, ret_errors);
}

struct tc_policy *tc_policy_ref(struct tc_policy *p)
{
    if (p)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void tc_policy_unref(struct tc_policy *p)
{
    if (!p)
        return;
    /* acq_rel: every reader's accesses happen before the last unref frees. */
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        policy_free(p);
}

const struct tc_tool *tc_policy_tool(const struct tc_policy *p, const char *name)
{
    size_t lo = 0, hi;

    if (!p || !name)
        return NULL;
    hi = p->ntools;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(name, p->tools[mid].name);
        if (r == 0)
            return &p->tools[mid];
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

size_t tc_policy_ntools(const struct tc_policy *p)
{
    return p ? p->ntools : 0;
}

const struct tc_tool *tc_policy_tool_at(const struct tc_policy *p, size_t i)
{
    return p && i < p->ntools ? &p->tools[i] : NULL;
}

const char *tc_policy_digest(const struct tc_policy *p)
{
    return p ? p->digest : NULL;
}

/* ---- per-call views ------------------------------------------------------------------------ */

json_t *tc_tool_describe(const struct tc_tool *t)
{
    json_t *o, *limits, *net;

    if (!t)
        return NULL;
    limits = json_object();
    if (!limits)
        return NULL;
    for (int i = 0; i < TC_LIMIT__COUNT; i++)
        if (json_object_set_new(limits, tc_limit_names[i],
                                json_pack("{s:I,s:I}", "default", (json_int_t)t->limits[i].def,
                                          "max", (json_int_t)t->limits[i].max)) < 0) {
            json_decref(limits);
            return NULL;
        }
    if (t->network_none) {
        net = json_string("none");
    } else {
        json_t *allow = json_array();
        for (size_t i = 0; allow && i < t->nnetwork_allow; i++)
            if (json_array_append_new(allow, json_string(t->network_allow[i])) < 0) {
                json_decref(allow);
                allow = NULL;
            }
        net = allow ? json_pack("{s:o}", "allow", allow) : NULL;
        if (net && t->network_ask &&
            (json_object_set_new(net, "ask", json_true()) < 0 ||
             json_object_set_new(net, "ask_timeout_seconds",
                                 json_integer(t->network_ask_timeout_s)) < 0 ||
             json_object_set_new(net, "ask_private", json_boolean(t->network_ask_private)) < 0)) {
            json_decref(net);
            net = NULL;
        }
    }
    if (!net) {
        json_decref(limits);
        return NULL;
    }
    json_t *ses = t->session ? json_pack("{s:I, s:I, s:s}", "max_ttl_seconds",
                                         (json_int_t)t->session_ttl_max_s, "max_idle_seconds",
                                         (json_int_t)t->session_idle_max_s, "held_calls",
                                         t->session_hold ? "hold" : "refuse")
                             : json_null();
    o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:o,s:o,s:o}", "name", t->name, "description",
                  t->description, "language", t->language, "backend", backends[t->backend], "tier",
                  tiers[t->tier], "irreversible", (int)t->irreversible, "network", net, "limits",
                  limits, "session", ses);
    if (o && t->image)
        json_object_set_new(o, "image",
                            json_pack("{s:s, s:s}", "ref", t->image, "workdir",
                                      t->workdir_image ? "image" : "workspace"));
    return o; /* json_pack steals "o" references even on failure */
}

int tc_tool_limits(const struct tc_tool *t, const json_t *requested,
                   int64_t ret_values[TC_LIMIT__COUNT], json_t **ret_errors)
{
    int64_t v[TC_LIMIT__COUNT];
    struct ctx c = {0};
    size_t nrange = 0;
    const char *key;
    json_t *val;
    char p[PATH_BUF];

    if (!t || !ret_values)
        return -EINVAL;
    c.errors = json_array();
    if (!c.errors)
        return -ENOMEM;
    for (int i = 0; i < TC_LIMIT__COUNT; i++)
        v[i] = t->limits[i].def;
    if (requested && !json_is_object(requested)) {
        add_err(&c, "limits", "must be an object");
    } else if (requested) {
        json_object_foreach((json_t *)requested, key, val)
        {
            int i;
            path_key(p, sizeof(p), "limits", key);
            for (i = 0; i < TC_LIMIT__COUNT; i++)
                if (strcmp(key, tc_limit_names[i]) == 0)
                    break;
            if (i == TC_LIMIT__COUNT) {
                add_err(&c, p, "unknown key");
                continue;
            }
            if (!json_is_integer(val) || json_integer_value(val) < 1) {
                add_err(&c, p, "must be a positive integer");
                continue;
            }
            if (json_integer_value(val) > t->limits[i].max) {
                add_err(&c, p, "%" PRId64 " exceeds this tool's max of %" PRId64,
                        (int64_t)json_integer_value(val), t->limits[i].max);
                nrange++;
                continue;
            }
            v[i] = json_integer_value(val);
        }
    }
    if (c.nerrors > 0) {
        /* Only-too-large is a 422; any malformed entry makes the whole request a 400. */
        int r = nrange == c.nerrors ? -ERANGE : -EINVAL;

        finish_errors(&c);
        set_errors(ret_errors, c.errors);
        json_decref(c.errors);
        return r;
    }
    json_decref(c.errors);
    if (ret_errors)
        *ret_errors = NULL;
    memcpy(ret_values, v, sizeof(v));
    return 0;
}
