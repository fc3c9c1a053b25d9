#include "core/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/log.h"

enum opt_kind {
    OPT_STRING,
    OPT_PATH,
    OPT_INT,
    OPT_BOOL,
    OPT_TRISTATE,
    OPT_LISTEN,
    OPT_LOGLEVEL,
    OPT_CHOICE
};

struct opt {
    const char *env;
    enum opt_kind kind;
    const char *def; /* NULL: inherit from another option (see fixups) */
    int64_t min, max;
    size_t offset;
    const char *help;
};

/* OPT_CHOICE: the values allowed, by variable */
static const struct {
    const char *env, *choices;
} choices[] = {
    {"TOOLCAGE_GVISOR_PLATFORM", "ptrace|kvm"},
    {"TOOLCAGE_MICROVM_BOOT", "kaslr|fast"},
};

static const char *choices_of(const char *env)
{
    for (size_t i = 0; i < TC_ARRAY_SIZE(choices); i++)
        if (strcmp(choices[i].env, env) == 0)
            return choices[i].choices;
    return "";
}

#define OFF(f) offsetof(struct tc_config, f)
static const struct opt options[] = {
    {"TOOLCAGE_DATABASE_URL", OPT_STRING, "dbname=toolcage", 0, 0, OFF(database_url),
     "libpq conninfo of the runtime role"},
    {"TOOLCAGE_MIGRATE_DATABASE_URL", OPT_STRING, NULL, 0, 0, OFF(migrate_database_url),
     "libpq conninfo of the role that owns the schema (unset: TOOLCAGE_DATABASE_URL)"},
    {"TOOLCAGE_LISTEN", OPT_LISTEN, "127.0.0.1:8080", 0, 0, 0, "address:port to serve HTTP on"},
    {"TOOLCAGE_POLICY", OPT_STRING, "examples/policy.json", 0, 0, OFF(policy_path),
     "tool policy file"},
    {"TOOLCAGE_STATE_DIR", OPT_STRING, "/var/lib/toolcage", 0, 0, OFF(state_dir),
     "directory for the launcher's scratch space and for outcomes not stored yet (outcomes/)"},
    {"TOOLCAGE_LOG_LEVEL", OPT_LOGLEVEL, "info", 0, 0, OFF(log_level),
     "debug, info, warn or error"},
    {"TOOLCAGE_THREADS", OPT_INT, "4", 1, 256, OFF(threads), "HTTP worker threads"},
    {"TOOLCAGE_HEALTH_PORT", OPT_INT, "0", 0, 65535, OFF(health_port),
     "port (on TOOLCAGE_LISTEN's address) of a listener with a thread of its own that answers"
     " only /healthz and /readyz, whatever the HTTP threads wait for (0: none)"},
    {"TOOLCAGE_DB_POOL", OPT_INT, "8", 1, 256, OFF(db_pool), "PostgreSQL connections"},
    {"TOOLCAGE_DB_PREPARE", OPT_BOOL, "1", 0, 1, OFF(db_prepare),
     "1: each connection keeps the statements it runs prepared (parsed and planned once); 0:"
     " every statement unnamed (a transaction-mode connection pooler in front of PostgreSQL)"},
    {"TOOLCAGE_DB_TIMEOUT_SECONDS", OPT_INT, "30", 1, 3600, OFF(db_timeout_seconds),
     "longest a statement may run (statement_timeout); a server that does not answer within it"
     " and 5 s more costs a call that long, then its connection is given up and made again"},
    {"TOOLCAGE_MAX_BODY_BYTES", OPT_INT, "4194304", 1024, 268435456, OFF(max_body_bytes),
     "largest request body accepted (413 beyond)"},
    {"TOOLCAGE_MAX_SANDBOXES", OPT_INT, "64", 1, 4096, OFF(max_sandboxes),
     "sandboxes running at once (503 beyond)"},
    {"TOOLCAGE_TENANT_MAX_CONCURRENT", OPT_INT, "32", 0, 4096, OFF(tenant_max_concurrent),
     "executions one tenant may have running at once, over every replica (429 beyond; 0: no"
     " limit); `toolcage tenants quota` sets a tenant's own"},
    {"TOOLCAGE_TENANT_MAX_SESSIONS", OPT_INT, "8", 0, 4096, OFF(tenant_max_sessions),
     "sessions one tenant may have open at once, over every replica (429 beyond; 0: no"
     " limit); `toolcage tenants quota --max-sessions` sets a tenant's own"},
    {"TOOLCAGE_TENANT_RATE_PER_MINUTE", OPT_INT, "0", 0, 1000000, OFF(tenant_rate_per_minute),
     "calls one tenant may start per minute, over every replica (a token bucket of that size;"
     " 429 beyond; 0: no limit); `toolcage tenants quota` sets a tenant's own"},
    {"TOOLCAGE_KEY_RATE_PER_MINUTE", OPT_INT, "0", 0, 1000000, OFF(key_rate_per_minute),
     "calls one API key may start per minute, over every replica (0: no limit)"},
    {"TOOLCAGE_TENANT_CPU_SECONDS_PER_DAY", OPT_INT, "0", 0, 100000000,
     OFF(tenant_cpu_seconds_per_day),
     "CPU seconds one tenant's executions may use in a rolling day (429 beyond; 0: no limit)"},
    {"TOOLCAGE_TENANT_WALL_SECONDS_PER_DAY", OPT_INT, "0", 0, 100000000,
     OFF(tenant_wall_seconds_per_day),
     "wall-clock seconds one tenant's executions may run in a rolling day (0: no limit)"},
    {"TOOLCAGE_MAX_CONNECTIONS_PER_IP", OPT_INT, "256", 0, 1000, OFF(max_connections_per_ip),
     "open HTTP connections per client address, of 1000 (0: no limit, e.g. behind a reverse "
     "proxy)"},
    {"TOOLCAGE_HTTP_HEADER_TIMEOUT_MS", OPT_INT, "10000", 100, 600000, OFF(http_header_timeout_ms),
     "a client must send its whole request line and headers within this time (then cut off)"},
    {"TOOLCAGE_HTTP_BODY_MIN_RATE", OPT_INT, "1024", 0, 1073741824, OFF(http_body_min_rate),
     "bytes/s a request body must average after TOOLCAGE_HTTP_HEADER_TIMEOUT_MS of grace (0: off)"},
    {"TOOLCAGE_MASTER_KEY_FILE", OPT_STRING, "/var/lib/toolcage/master.key", 0, 0,
     OFF(master_key_file), "32-byte key that seals secrets (mode 0600)"},
    {"TOOLCAGE_PREVIOUS_MASTER_KEY_FILES", OPT_STRING, NULL, 0, 0, OFF(previous_master_key_files),
     "comma-separated earlier master keys, to open secrets not yet re-sealed (see "
     "docs/credentials.md)"},
    {"TOOLCAGE_WEBHOOK_ALLOW_PRIVATE", OPT_BOOL, "0", 0, 1, OFF(webhook_allow_private),
     "1: webhooks may target loopback and private addresses (never cloud metadata)"},
    {"TOOLCAGE_WEBHOOK_CONCURRENCY", OPT_INT, "32", 1, 1024, OFF(webhook_concurrency),
     "webhook deliveries in flight at once, per server process"},
    {"TOOLCAGE_WEBHOOK_TENANT_CONCURRENCY", OPT_INT, "4", 1, 1024, OFF(webhook_tenant_concurrency),
     "one tenant's webhook deliveries in flight at once, over all server processes"},
    {"TOOLCAGE_WEBHOOK_MAX_ATTEMPTS", OPT_INT, "10", 1, 30, OFF(webhook_max_attempts),
     "attempts per webhook delivery (backoff 1 s, 2 s, 4 s ... 1 h) before it is given up"},
    {"TOOLCAGE_PUBLIC_URL", OPT_STRING, NULL, 0, 0, OFF(public_url),
     "the console's address as reviewers reach it, for the links in notifications (default: "
     "http://TOOLCAGE_LISTEN:TOOLCAGE_PORT)"},
    {"TOOLCAGE_SMTP_URL", OPT_STRING, NULL, 0, 0, OFF(smtp_url),
     "mail server for e-mail notifications, smtp://host[:port] or smtps://... (unset: tenants "
     "cannot add e-mail sinks)"},
    {"TOOLCAGE_SMTP_FROM", OPT_STRING, "toolcage@localhost", 0, 0, OFF(smtp_from),
     "sender address of e-mail notifications"},
    {"TOOLCAGE_DRAIN_SECONDS", OPT_INT, "30", 0, 3600, OFF(drain_seconds),
     "on SIGTERM, running sandboxes get this long to finish before they are killed (0: at once)"},
    {"TOOLCAGE_MCP_HOLD_SECONDS", OPT_INT, "30", 0, 60, OFF(mcp_hold_seconds),
     "an MCP tools/call held for approval waits this long for the decision and the run"},
    {"TOOLCAGE_QUEUE_SECONDS", OPT_INT, "10", 0, 60, OFF(queue_seconds),
     "a call that finds every sandbox slot taken waits this long for one, tenants served in turn "
     "(0: 503 at once)"},
    {"TOOLCAGE_SSE_HEARTBEAT_SECONDS", OPT_INT, "15", 1, 300, OFF(sse_heartbeat_seconds),
     "an event stream with nothing to send sends a comment line this often"},
    {"TOOLCAGE_SESSION_IDLE_SECONDS", OPT_INT, "900", 1, 86400, OFF(session_idle_seconds),
     "console sessions unused this long end (docs/console.md)"},
    {"TOOLCAGE_SESSION_MAX_SECONDS", OPT_INT, "28800", 1, 604800, OFF(session_max_seconds),
     "every console session ends this long after sign-in"},
    {"TOOLCAGE_COOKIE_SECURE", OPT_TRISTATE, NULL, 0, 1, OFF(cookie_secure),
     "1: console cookies carry Secure; 0: they do not; unset: Secure unless the listener is "
     "loopback"},
    {"TOOLCAGE_SIGNIN_MAX_FAILURES", OPT_INT, "5", 1, 1000, OFF(signin_max_failures),
     "failed console sign-ins per name in the window before refusing"},
    {"TOOLCAGE_SIGNIN_MAX_SOURCE_FAILURES", OPT_INT, "20", 1, 100000,
     OFF(signin_max_source_failures), "failed console sign-ins per client address in the window"},
    {"TOOLCAGE_SIGNIN_WINDOW_SECONDS", OPT_INT, "900", 1, 86400, OFF(signin_window_seconds),
     "the sign-in throttling window"},
    {"TOOLCAGE_POOL", OPT_INT, "2", 0, 16, OFF(pool),
     "sandbox shells the launcher keeps ready (0: each made on demand; docs/sandbox.md)"},
    {"TOOLCAGE_POOL_MAX", OPT_INT, "8", 0, 16, OFF(pool_max),
     "shells the pool grows to after a burst bigger than it, for a minute after the last (below"
     " TOOLCAGE_POOL: TOOLCAGE_POOL; 0 with TOOLCAGE_POOL=0: never grown)"},
    {"TOOLCAGE_WARM", OPT_INT, "8", 0, 16, OFF(warm),
     "sandboxes with a python tool's interpreter started before the call, at most (0: none;"
     " docs/sandbox.md, Warm interpreters)"},
    {"TOOLCAGE_WARM_PER_TENANT", OPT_INT, "4", 1, 16, OFF(warm_per_tenant),
     "of TOOLCAGE_WARM, what one tenant's calls hold at most (no tenant's calls take another's)"},
    {"TOOLCAGE_UID_REGISTRY", OPT_PATH, "/run/toolcage/uids", 0, 0, OFF(uid_registry),
     "directory of lock files that gives each launcher on the host its own range of sandbox uids"},
    {"TOOLCAGE_GVISOR_PLATFORM", OPT_CHOICE, "ptrace", 0, 0, OFF(gvisor_platform),
     "platform of the gvisor backend: ptrace or kvm"},
    {"TOOLCAGE_MICROVM_BOOT", OPT_CHOICE, "kaslr", 0, 0, OFF(microvm_boot),
     "how microvm guests boot: kaslr (the kernel image's own decompressor, which places the guest"
     " kernel at a random address) or fast (the kernel unpacked once on the host and started at"
     " its PVH entry: about 6 s less per cold boot under TCG, no KASLR in the guest)"},
    {"TOOLCAGE_EGRESS_CA_FILE", OPT_PATH, NULL, 0, 0, OFF(egress_ca_file),
     "PEM certificates the egress proxy trusts for upstreams besides the system's (credentials"
     " injected at egress verify the upstream)"},
    {"TOOLCAGE_INIT", OPT_PATH, NULL, 0, 0, OFF(init_path),
     "the sandbox's PID 1 (unset: toolcage-init next to the binary, or ../libexec/toolcage/)"},
    {"TOOLCAGE_NO_CGROUP", OPT_BOOL, "0", 0, 1, OFF(no_cgroup),
     "1: no cgroups, limits by rlimits only (for tests of that fallback)"},
    {"TOOLCAGE_NO_SECCOMP_NOTIFY", OPT_BOOL, "0", 0, 1, OFF(no_seccomp_notify),
     "1: the seccomp filter kills without reporting the call (for tests of that fallback)"},
};

/* The field at offset off of c (void *: the table's offsets keep each field's alignment). */
static void *field(struct tc_config *c, size_t off)
{
    return (char *)c + off;
}

static int parse_listen(const char *v, struct tc_config *cfg)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v)
        return -EINVAL;
    int64_t port;
    if (tc_parse_i64(colon + 1, 1, 65535, &port) < 0)
        return -EINVAL;
    const char *h = v;
    size_t hl = (size_t)(colon - v);
    if (h[0] == '[') { /* [::1]:8080 */
        if (hl < 3 || h[hl - 1] != ']')
            return -EINVAL;
        h++;
        hl -= 2;
    }
    char *host = strndup(h, hl);
    if (!host)
        return -ENOMEM;
    free(cfg->listen_host);
    cfg->listen_host = host;
    cfg->listen_port = (uint16_t)port;
    return 0;
}

int tc_config_load(struct tc_config *cfg, char **ret_error)
{
    struct tc_config c = {.cookie_secure = -1};
    for (size_t i = 0; i < TC_ARRAY_SIZE(options); i++) {
        const struct opt *o = &options[i];
        const char *v = getenv(o->env);
        if (!v || !*v)
            v = o->def;
        if (!v)
            continue;
        int r = 0;
        char why[160] = "";
        switch (o->kind) {
        case OPT_PATH:
            if (v[0] != '/') {
                r = -EINVAL;
                snprintf(why, sizeof(why), "must be an absolute path");
                break;
            }
            __attribute__((fallthrough));
        case OPT_STRING: {
            char *s = strdup(v);
            if (!s)
                r = -ENOMEM;
            else
                *(char **)field(&c, o->offset) = s;
            break;
        }
        case OPT_INT: {
            int64_t n;
            r = tc_parse_i64(v, o->min, o->max, &n);
            if (r < 0)
                snprintf(why, sizeof(why), "must be an integer from %lld to %lld",
                         (long long)o->min, (long long)o->max);
            else
                *(int64_t *)field(&c, o->offset) = n;
            break;
        }
        case OPT_BOOL:
            if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
                *(bool *)field(&c, o->offset) = v[0] == '1';
            else {
                r = -EINVAL;
                snprintf(why, sizeof(why), "must be 0 or 1");
            }
            break;
        case OPT_TRISTATE: /* set: 0 or 1; unset: -1 (see fixups) */
            if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
                *(int *)field(&c, o->offset) = v[0] == '1';
            else {
                r = -EINVAL;
                snprintf(why, sizeof(why), "must be 0 or 1 (or unset)");
            }
            break;
        case OPT_CHOICE: {
            size_t n = strlen(v);
            const char *p = choices_of(o->env);
            bool ok = false;
            while (*p && !ok) {
                size_t len = strcspn(p, "|");
                ok = len == n && strncmp(p, v, n) == 0;
                p += len + (p[len] == '|');
            }
            char *s = ok ? strdup(v) : NULL;
            if (!ok) {
                r = -EINVAL;
                snprintf(why, sizeof(why), "must be one of %s", choices_of(o->env));
            } else if (!s)
                r = -ENOMEM;
            else
                *(char **)field(&c, o->offset) = s;
            break;
        }
        case OPT_LISTEN:
            r = parse_listen(v, &c);
            if (r < 0)
                snprintf(why, sizeof(why), "must be HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080");
            break;
        case OPT_LOGLEVEL: {
            int l = tc_log_parse_level(v);
            if (l < 0) {
                r = -EINVAL;
                snprintf(why, sizeof(why), "must be debug, info, warn or error");
            } else {
                *(int *)field(&c, o->offset) = l;
            }
            break;
        }
        }
        if (r < 0) {
            if (ret_error) {
                size_t n = strlen(o->env) + strlen(v) + strlen(why) + 64;
                char *e = malloc(n);
                if (e) {
                    int at = snprintf(e, n, "%s=\"", o->env);
                    snprintf(e + at, n - (size_t)at, "%s\": %s", v, why[0] ? why : strerror(-r));
                    /* The value is echoed: keep the message one line and terminals safe
                     * (as policy errors do). */
                    for (char *p = e + at; *p; p++)
                        if ((unsigned char)*p < 0x20 || *p == 0x7f)
                            *p = '?';
                }
                *ret_error = e;
            }
            tc_config_free(&c);
            return -EINVAL;
        }
    }
    if (!c.migrate_database_url && !(c.migrate_database_url = strdup(c.database_url))) {
        tc_config_free(&c);
        return -ENOMEM;
    }
    *cfg = c;
    return 0;
}

void tc_config_free(struct tc_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->database_url);
    free(cfg->migrate_database_url);
    free(cfg->listen_host);
    free(cfg->policy_path);
    free(cfg->state_dir);
    free(cfg->master_key_file);
    free(cfg->previous_master_key_files);
    free(cfg->uid_registry);
    free(cfg->gvisor_platform);
    free(cfg->microvm_boot);
    free(cfg->egress_ca_file);
    free(cfg->init_path);
    free(cfg->public_url);
    free(cfg->smtp_url);
    free(cfg->smtp_from);
    *cfg = (struct tc_config){0};
}

void tc_config_print_help(FILE *f)
{
    fprintf(f, "Environment (a bad value stops start-up):\n");
    for (size_t i = 0; i < TC_ARRAY_SIZE(options); i++) {
        const struct opt *o = &options[i];
        if (o->def)
            fprintf(f, "  %s (default: %s)\n", o->env, o->def);
        else
            fprintf(f, "  %s (default: unset)\n", o->env);
        fprintf(f, "      %s\n", o->help);
    }
}
