/* Strict spec validation: every field is typed, bounded, and unknown keys are rejected. */
#include "sandbox/spec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/egress_rules.h"

#define GiB (1024LL * 1024 * 1024)

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

int tc_spec_id_valid(const char *id)
{
    size_t n = 0;
    if (!id)
        return 0;
    for (; id[n]; n++) {
        char c = id[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return 0;
        if (n >= TC_SPEC_ID_MAX)
            return 0;
    }
    return n > 0;
}

int tc_spec_relpath_valid(const char *p)
{
    size_t len;
    if (!p || !*p || p[0] == '/')
        return 0;
    len = strlen(p);
    if (len >= TC_SPEC_MAX_PATH)
        return 0;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || n > 255 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!e)
            break;
        s = e + 1;
        if (!*s)
            return 0; /* trailing slash */
    }
    return 1;
}

static int abspath_valid(const char *p)
{
    if (!p || p[0] != '/' || strlen(p) >= TC_SPEC_MAX_PATH)
        return 0;
    return p[1] == '\0' || tc_spec_relpath_valid(p + 1);
}

static int get_limit(json_t *limits, const char *name, int64_t min, int64_t max, int64_t *ret,
                     char *err, size_t errlen)
{
    json_t *v = json_object_get(limits, name);
    if (!json_is_integer(v))
        return fail(err, errlen, "limits.%s: required integer", name);
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return fail(err, errlen, "limits.%s: out of range [%lld, %lld]", name, (long long)min,
                    (long long)max);
    *ret = x;
    return 0;
}

static int parse_limits(json_t *l, struct tc_limits *o, char *err, size_t errlen)
{
    static const char *const known[] = {"wall_ms",      "cpu_ms",          "memory_bytes",
                                        "pids",         "file_size_bytes", "nofile",
                                        "output_bytes", "workspace_bytes", "tmp_bytes"};
    const char *key;
    json_t *val;
    int r;

    if (!json_is_object(l))
        return fail(err, errlen, "limits: required object");
    json_object_foreach(l, key, val)
    {
        size_t i;
        for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            if (strcmp(key, known[i]) == 0)
                break;
        if (i == sizeof(known) / sizeof(known[0]))
            return fail(err, errlen, "limits: unknown key");
    }
    if ((r = get_limit(l, "wall_ms", 1, 24LL * 3600 * 1000, &o->wall_ms, err, errlen)) < 0 ||
        (r = get_limit(l, "cpu_ms", 1, 24LL * 3600 * 1000, &o->cpu_ms, err, errlen)) < 0 ||
        (r = get_limit(l, "memory_bytes", 1 << 20, 1024 * GiB, &o->memory_bytes, err, errlen)) <
            0 ||
        (r = get_limit(l, "pids", 1, 1 << 20, &o->pids, err, errlen)) < 0 ||
        (r = get_limit(l, "file_size_bytes", 1, 1024 * GiB, &o->file_size_bytes, err, errlen)) <
            0 ||
        (r = get_limit(l, "nofile", 1, 1 << 20, &o->nofile, err, errlen)) < 0 ||
        (r = get_limit(l, "output_bytes", 1, 64LL << 20, &o->output_bytes, err, errlen)) < 0 ||
        (r = get_limit(l, "workspace_bytes", 4096, 1024 * GiB, &o->workspace_bytes, err, errlen)) <
            0 ||
        (r = get_limit(l, "tmp_bytes", 4096, 1024 * GiB, &o->tmp_bytes, err, errlen)) < 0)
        return r;
    return 0;
}

static int string_array(json_t *a, size_t max, const char ***ret, const char *what, char *err,
                        size_t errlen)
{
    size_t n = json_array_size(a), i;
    const char **v;

    if (!json_is_array(a))
        return fail(err, errlen, "%s: required array of strings", what);
    if (n > max)
        return fail(err, errlen, "%s: too many entries", what);
    v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        json_t *s = json_array_get(a, i);
        if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s) ||
            json_string_length(s) > 128 * 1024) {
            free(v);
            return fail(err, errlen, "%s[%zu]: must be a string without NUL bytes", what, i);
        }
        v[i] = json_string_value(s);
    }
    *ret = v;
    return 0;
}

static int check_files(json_t *files, char *err, size_t errlen)
{
    size_t i;
    json_t *f;

    if (!json_is_array(files) || json_array_size(files) > TC_SPEC_MAX_FILES)
        return fail(err, errlen, "files: array of at most %d entries", TC_SPEC_MAX_FILES);
    json_array_foreach(files, i, f)
    {
        json_t *p = json_object_get(f, "path"), *c = json_object_get(f, "content_b64"),
               *m = json_object_get(f, "mode");
        if (!json_is_object(f) || !json_is_string(p) ||
            !tc_spec_relpath_valid(json_string_value(p)) ||
            strlen(json_string_value(p)) != json_string_length(p))
            return fail(err, errlen, "files[%zu].path: relative path without '..' required", i);
        if (!json_is_string(c))
            return fail(err, errlen, "files[%zu].content_b64: required string", i);
        if (m && (!json_is_integer(m) || json_integer_value(m) < 0 || json_integer_value(m) > 0777))
            return fail(err, errlen, "files[%zu].mode: integer in [0, 0777]", i);
        if (json_object_size(f) > 3 || (json_object_size(f) == 3 && !m))
            return fail(err, errlen, "files[%zu]: unknown key", i);
    }
    return 0;
}

static bool str_ok(json_t *v, size_t min, size_t max, bool ctl_ok)
{
    const char *s = json_string_value(v);
    if (!s || strlen(s) != json_string_length(v) || json_string_length(v) < min ||
        json_string_length(v) > max)
        return false;
    for (; !ctl_ok && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* Credentials the egress proxy adds (egress_tls.h): {host, port, header, value, scrub, secret,
 * lease_id}, at most TC_TLS_MAX_INJECT; never given to the sandbox. */
static int check_inject(json_t *a, char *err, size_t errlen)
{
    size_t i;
    json_t *e;
    if (!json_is_array(a) || json_array_size(a) > 16)
        return fail(err, errlen, "inject: array of at most 16 entries");
    json_array_foreach(a, i, e)
    {
        json_t *port = json_object_get(e, "port");
        struct tc_egress_rule rule;
        if (!json_is_object(e) || json_object_size(e) != 7 ||
            !str_ok(json_object_get(e, "host"), 1, 253, false) ||
            tc_egress_rule_parse(json_string_value(json_object_get(e, "host")), &rule) < 0 ||
            rule.wildcard || !json_is_integer(port) || json_integer_value(port) < 1 ||
            json_integer_value(port) > 65535 ||
            !str_ok(json_object_get(e, "header"), 1, 64, false) ||
            !str_ok(json_object_get(e, "value"), 1, 4096, false) ||
            !str_ok(json_object_get(e, "scrub"), 1, 4096, true) ||
            !str_ok(json_object_get(e, "secret"), 1, 128, false) ||
            !str_ok(json_object_get(e, "lease_id"), 1, 36, false))
            return fail(err, errlen,
                        "inject[%zu]: {host, port, header, value, scrub, secret, "
                        "lease_id} required",
                        i);
    }
    return 0;
}

/* Leased secret files: plain names (no '/', not "." or ".."), base64 content, bounded. */
static int check_secret_files(json_t *a, char *err, size_t errlen)
{
    size_t i;
    json_t *f;

    if (!json_is_array(a) || json_array_size(a) > TC_SPEC_MAX_SECRET_FILES)
        return fail(err, errlen, "secret_files: array of at most %d entries",
                    TC_SPEC_MAX_SECRET_FILES);
    json_array_foreach(a, i, f)
    {
        json_t *n = json_object_get(f, "name"), *c = json_object_get(f, "content_b64");
        const char *name = json_string_value(n);
        if (!json_is_object(f) || !name || strlen(name) != json_string_length(n) ||
            !tc_spec_relpath_valid(name) || strchr(name, '/'))
            return fail(err, errlen, "secret_files[%zu].name: plain file name required", i);
        if (!json_is_string(c) || json_string_length(c) > TC_SPEC_MAX_SECRET_BYTES / 3 * 4 + 4)
            return fail(err, errlen,
                        "secret_files[%zu].content_b64: base64 string of at most"
                        " %d bytes required",
                        i, TC_SPEC_MAX_SECRET_BYTES);
        if (json_object_size(f) != 2)
            return fail(err, errlen, "secret_files[%zu]: unknown key", i);
        for (size_t k = 0; k < i; k++)
            if (strcmp(name, json_string_value(json_object_get(json_array_get(a, k), "name"))) == 0)
                return fail(err, errlen, "secret_files[%zu].name: duplicate", i);
    }
    return 0;
}

/* "none", or {"allow": [rule, ...]} with 1..256 rules in the policy grammar (egress_rules.h). */
/* "none", or {"allow": [rule, ...], "ask_ms"?: n}: with ask_ms (1 s .. 1 h) hosts not in the
 * list are asked about (sandbox/egress.h), and the list may be empty. */
static int parse_network(json_t *v, json_t **ret_allow, int64_t *ret_ask_ms, bool *ret_ask_private,
                         char *err, size_t errlen)
{
    json_t *allow = json_object_get(v, "allow"), *ask = json_object_get(v, "ask_ms"), *e;
    json_t *priv = json_object_get(v, "ask_private");
    size_t i;

    if (json_is_string(v) && strcmp(json_string_value(v), "none") == 0) {
        *ret_allow = NULL;
        return 0;
    }
    if (ask && (!json_is_integer(ask) || json_integer_value(ask) < 1000 ||
                json_integer_value(ask) > 3600 * 1000))
        return fail(err, errlen, "network.ask_ms: integer 1000..3600000 required");
    if (priv && (!json_is_boolean(priv) || !ask))
        return fail(err, errlen, "network.ask_private: boolean, with ask_ms");
    if (!json_is_object(v) || json_object_size(v) != 1u + (ask != NULL) + (priv != NULL) ||
        !json_is_array(allow) || (json_array_size(allow) == 0 && !ask) ||
        json_array_size(allow) > TC_EGRESS_MAX_RULES)
        return fail(err, errlen,
                    "network: \"none\" or {\"allow\": [1..%d entries], \"ask_ms\"?} required",
                    TC_EGRESS_MAX_RULES);
    json_array_foreach(allow, i, e)
    {
        struct tc_egress_rule rule;
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e) ||
            tc_egress_rule_parse(json_string_value(e), &rule) < 0)
            return fail(err, errlen,
                        "network.allow[%zu]: host, host:port, *.domain or *.domain:port", i);
    }
    *ret_allow = allow;
    *ret_ask_ms = ask ? json_integer_value(ask) : 0;
    *ret_ask_private = json_is_true(priv);
    return 0;
}

static int check_collect(json_t *c, char *err, size_t errlen)
{
    size_t i;
    json_t *p;

    if (!json_is_array(c) || json_array_size(c) > 64)
        return fail(err, errlen, "collect: array of at most 64 patterns");
    json_array_foreach(c, i, p)
    {
        if (!json_is_string(p) || json_string_length(p) == 0 || json_string_length(p) > 1024 ||
            strlen(json_string_value(p)) != json_string_length(p) || json_string_value(p)[0] == '/')
            return fail(err, errlen, "collect[%zu]: relative glob pattern required", i);
    }
    return 0;
}

static int parse_mounts(json_t *a, struct tc_spec *o, char *err, size_t errlen)
{
    size_t i;
    json_t *m;

    if (!json_is_array(a) || json_array_size(a) > TC_SPEC_MAX_MOUNTS)
        return fail(err, errlen, "mounts: array of at most %d entries", TC_SPEC_MAX_MOUNTS);
    o->mounts = calloc(json_array_size(a) + 1, sizeof(*o->mounts));
    if (!o->mounts)
        return -ENOMEM;
    json_array_foreach(a, i, m)
    {
        json_t *s = json_object_get(m, "source"), *t = json_object_get(m, "target"),
               *w = json_object_get(m, "writable");
        if (!json_is_object(m) || !json_is_string(s) || !json_is_string(t) ||
            !abspath_valid(json_string_value(s)) || !abspath_valid(json_string_value(t)) ||
            strcmp(json_string_value(t), "/") == 0)
            return fail(err, errlen, "mounts[%zu]: absolute source and target required", i);
        if (w && !json_is_boolean(w))
            return fail(err, errlen, "mounts[%zu].writable: boolean", i);
        o->mounts[i].source = json_string_value(s);
        o->mounts[i].target = json_string_value(t);
        o->mounts[i].writable = json_is_true(w);
    }
    o->n_mounts = json_array_size(a);
    return 0;
}

int tc_spec_parse(json_t *spec, struct tc_spec *ret, char *err, size_t errlen)
{
    static const char *const known[] = {
        "id",      "backend", "argv",     "env",     "cwd",    "stdin_b64",    "files",
        "collect", "mounts",  "hostname", "network", "limits", "secret_files", "hold",
        "stream",  "session", "inject",   "image",   "gate",   "warm",         "warm_group"};
    struct tc_spec s = {0};
    const char *key;
    json_t *val, *v;
    int r;

    if (!json_is_object(spec))
        return fail(err, errlen, "spec: object required");
    json_object_foreach(spec, key, val)
    {
        size_t i;
        for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            if (strcmp(key, known[i]) == 0)
                break;
        if (i == sizeof(known) / sizeof(known[0]))
            return fail(err, errlen, "spec: unknown key");
    }

    v = json_object_get(spec, "id");
    if (!json_is_string(v) || !tc_spec_id_valid(json_string_value(v)))
        return fail(err, errlen, "id: [A-Za-z0-9-]{1,64} required");
    s.id = json_string_value(v);

    v = json_object_get(spec, "backend");
    if (!json_is_string(v) || (strcmp(json_string_value(v), "native") != 0 &&
                               strcmp(json_string_value(v), "gvisor") != 0 &&
                               strcmp(json_string_value(v), "microvm") != 0))
        return fail(err, errlen, "backend: \"native\", \"gvisor\" or \"microvm\" required");
    s.backend = json_string_value(v);

    v = json_object_get(spec, "network");
    if (v && (r = parse_network(v, &s.network_allow, &s.network_ask_ms, &s.network_ask_private, err,
                                errlen)) < 0)
        return r;

    v = json_object_get(spec, "hold");
    if (v && !json_is_boolean(v))
        return fail(err, errlen, "hold: boolean required");
    s.hold = json_is_true(v);

    v = json_object_get(spec, "stream");
    if (v && !json_is_boolean(v))
        return fail(err, errlen, "stream: boolean required");
    s.stream = json_is_true(v);

    v = json_object_get(spec, "session");
    if (v && !json_is_boolean(v))
        return fail(err, errlen, "session: boolean required");
    s.session = json_is_true(v);
    if (s.session && strcmp(s.backend, "native") != 0)
        return fail(err, errlen, "session: the native backend only");
    s.stream |= s.session;

    v = json_object_get(spec, "gate");
    if (v && !json_is_boolean(v))
        return fail(err, errlen, "gate: boolean required");
    s.gate = json_is_true(v);
    v = json_object_get(spec, "warm");
    if (v && !json_is_boolean(v))
        return fail(err, errlen, "warm: boolean required");
    s.warm = json_is_true(v);
    if (s.gate && s.session)
        return fail(err, errlen, "gate: not with session (its stdin is the session's)");
    if (s.warm && !s.gate)
        return fail(err, errlen, "warm: requires gate (the program waits for the call)");
    v = json_object_get(spec, "warm_group");
    if (v && (!json_is_string(v) || !tc_spec_id_valid(json_string_value(v)) || !s.warm))
        return fail(err, errlen, "warm_group: [A-Za-z0-9-]{1,64} required, with warm");

    v = json_object_get(spec, "image");
    if (v) {
        json_t *root = json_object_get(v, "root");
        const char *h = json_string_value(root);
        size_t n = 0;
        while (h && ((h[n] >= '0' && h[n] <= '9') || (h[n] >= 'a' && h[n] <= 'f')))
            n++;
        if (!json_is_object(v) || json_object_size(v) != 1 || !h || n != 64 || h[n])
            return fail(err, errlen, "image: {\"root\": <64 hex digits>} required");
        s.image_root = h;
    }

    v = json_object_get(spec, "cwd");
    if (v && (!json_is_string(v) || !abspath_valid(json_string_value(v))))
        return fail(err, errlen, "cwd: absolute path required");
    s.cwd = v ? json_string_value(v) : "/workspace";

    v = json_object_get(spec, "hostname");
    if (v) {
        const char *h = json_is_string(v) ? json_string_value(v) : NULL;
        size_t n = h ? strlen(h) : 0;
        if (!h || n == 0 || n > 63 || n != json_string_length(v))
            return fail(err, errlen, "hostname: 1-63 characters [A-Za-z0-9-.]");
        for (size_t i = 0; i < n; i++)
            if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
                  (h[i] >= '0' && h[i] <= '9') || h[i] == '-' || h[i] == '.'))
                return fail(err, errlen, "hostname: 1-63 characters [A-Za-z0-9-.]");
        s.hostname = h;
    } else {
        s.hostname = "toolcage";
    }

    v = json_object_get(spec, "stdin_b64");
    if (v && !json_is_string(v))
        return fail(err, errlen, "stdin_b64: string required");
    s.stdin_b64 = v ? json_string_value(v) : NULL;

    v = json_object_get(spec, "files");
    if (v && (r = check_files(v, err, errlen)) < 0)
        return r;
    s.files = v;
    v = json_object_get(spec, "collect");
    if (v && (r = check_collect(v, err, errlen)) < 0)
        return r;
    s.collect = v;
    v = json_object_get(spec, "secret_files");
    if (v && (r = check_secret_files(v, err, errlen)) < 0)
        return r;
    s.secret_files = v;
    v = json_object_get(spec, "inject");
    if (v && (r = check_inject(v, err, errlen)) < 0)
        return r;
    s.inject = v;
    if (json_array_size(s.inject) > 0 && !s.network_allow)
        return fail(err, errlen, "inject: needs a network allowlist");

    if ((r = parse_limits(json_object_get(spec, "limits"), &s.limits, err, errlen)) < 0)
        return r;

    r = string_array(json_object_get(spec, "argv"), TC_SPEC_MAX_ARGS, &s.argv, "argv", err, errlen);
    if (r < 0)
        goto out;
    if (!s.argv[0] || s.argv[0][0] != '/') {
        r = fail(err, errlen, "argv: non-empty, argv[0] must be an absolute path");
        goto out;
    }
    v = json_object_get(spec, "env");
    if (v) {
        r = string_array(v, TC_SPEC_MAX_ARGS, &s.envp, "env", err, errlen);
        if (r < 0)
            goto out;
        for (size_t i = 0; s.envp[i]; i++) {
            const char *eq = strchr(s.envp[i], '=');
            if (!eq || eq == s.envp[i]) {
                r = fail(err, errlen, "env[%zu]: NAME=value required", i);
                goto out;
            }
        }
    } else {
        s.envp = calloc(1, sizeof(*s.envp));
        if (!s.envp) {
            r = -ENOMEM;
            goto out;
        }
    }
    v = json_object_get(spec, "mounts");
    if (v && (r = parse_mounts(v, &s, err, errlen)) < 0)
        goto out;

    *ret = s;
    return 0;
out:
    tc_spec_release(&s);
    return r;
}

void tc_spec_release(struct tc_spec *s)
{
    if (!s)
        return;
    free(s->argv);
    free(s->envp);
    free(s->mounts);
    s->argv = s->envp = NULL;
    s->mounts = NULL;
}
