#include "broker/leases.h"

#include <ctype.h>
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "core/keys.h"
#include "broker/secrets.h"
#include "broker/token.h"
#include "common/util.h"
#include "policy/policy.h"
#include "core/db.h"

#define MAX_ITEMS 64 /* the policy allows at most 32 credentials per tool */

struct grant_item {
    bool file;      /* else an environment variable, or a header (inject) */
    char name[132]; /* variable or file name; the header's name */
    char *value;    /* sodium_malloc'ed, NUL-terminated */
    size_t len;
    /* "as": "header": added by the egress proxy to HTTPS requests to host:port */
    char *inject; /* sodium_malloc'ed: the header's value (format with {value}), or NULL */
    char host[254];
    int port;
    char lease_id[37];
    char secret[132]; /* the secret's name */
};

struct tc_grant {
    struct grant_item items[MAX_ITEMS];
    size_t n;
    const char *values[MAX_ITEMS];
    json_t *leases, *tokens;
};

static json_t *broker_actor(void)
{
    return json_pack("{s:s, s:s}", "type", "system", "id", "broker");
}

static int fail(char **ret_error, int rc, const char *fmt, ...) TC_PRINTF(3, 4);
static int fail(char **ret_error, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (ret_error) {
        free(*ret_error);
        *ret_error = s;
    } else {
        free(s);
    }
    return rc;
}

void tc_grant_free(struct tc_grant *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        if (g->items[i].value)
            sodium_free(g->items[i].value); /* wipes */
    for (size_t i = 0; i < g->n; i++)
        if (g->items[i].inject)
            sodium_free(g->items[i].inject);
    json_decref(g->leases);
    json_decref(g->tokens);
    free(g);
}

static struct tc_grant *grant_new(void)
{
    struct tc_grant *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->leases = json_array();
    g->tokens = json_array();
    if (!g->leases || !g->tokens) {
        tc_grant_free(g);
        return NULL;
    }
    return g;
}

static int grant_add(struct tc_grant *g, bool file, const char *name, const char *value, size_t len)
{
    if (g->n >= MAX_ITEMS)
        return -E2BIG;
    struct grant_item *it = &g->items[g->n];
    it->value = sodium_malloc(len + 1);
    if (!it->value)
        return -ENOMEM;
    memcpy(it->value, value, len);
    it->value[len] = '\0';
    it->len = len;
    it->file = file;
    snprintf(it->name, sizeof(it->name), "%s", name);
    g->values[g->n] = it->value;
    g->n++;
    return 0;
}

/* The value of a header grant: its format with {value} replaced (validated by the policy). */
static int grant_add_header(struct tc_grant *g, json_t *cred, const char *lease_id,
                            const char *value, size_t len)
{
    const char *format = json_string_value(json_object_get(cred, "format"));
    if (!format)
        format = "{value}";
    const char *at = strstr(format, "{value}");
    if (!at)
        return -EINVAL;
    while (len > 0 && (value[len - 1] == '\n' || value[len - 1] == '\r'))
        len--; /* a token stored with its line end: a header value cannot hold it */
    int rc = grant_add(g, false, json_string_value(json_object_get(cred, "header")), value, len);
    if (rc < 0)
        return rc;
    struct grant_item *it = &g->items[g->n - 1];
    size_t pre = (size_t)(at - format), post = strlen(at + 7);
    it->inject = sodium_malloc(pre + len + post + 1);
    if (!it->inject)
        return -ENOMEM;
    memcpy(it->inject, format, pre);
    memcpy(it->inject + pre, value, len);
    memcpy(it->inject + pre + len, at + 7, post + 1);
    snprintf(it->host, sizeof(it->host), "%s", json_string_value(json_object_get(cred, "host")));
    for (char *h = it->host; *h; h++) /* as the proxy compares it (its requests' hosts) */
        *h = (char)tolower((unsigned char)*h);
    json_t *port = json_object_get(cred, "port");
    it->port = port ? (int)json_integer_value(port) : 443;
    snprintf(it->lease_id, sizeof(it->lease_id), "%.36s", lease_id);
    snprintf(it->secret, sizeof(it->secret), "%s",
             json_string_value(json_object_get(cred, "secret")));
    return 0;
}

bool tc_grant_empty(const struct tc_grant *g)
{
    return !g || g->n == 0;
}

const char *const *tc_grant_values(const struct tc_grant *g, size_t *ret_n)
{
    *ret_n = g ? g->n : 0;
    return g ? g->values : NULL;
}

json_t *tc_grant_summary(const struct tc_grant *g)
{
    return json_pack("{s:O, s:O}", "leases", g ? g->leases : json_array(), "tokens",
                     g ? g->tokens : json_array());
}

int tc_grant_apply_spec(const struct tc_grant *g, json_t *spec)
{
    if (tc_grant_empty(g))
        return 0;
    /* a warm sandbox is made from a call's spec and kept for a later one: never with these */
    json_object_del(spec, "warm");
    json_object_del(spec, "warm_group");
    json_t *env = json_object_get(spec, "env");
    if (!env) {
        env = json_array();
        if (!env || json_object_set_new(spec, "env", env) < 0)
            return -ENOMEM;
    }
    json_t *files = json_array(), *inject = json_array();
    if (!files || !inject) {
        json_decref(files);
        json_decref(inject);
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < g->n && rc == 0; i++) {
        const struct grant_item *it = &g->items[i];
        if (it->inject) { /* for the egress proxy only: never in the sandbox */
            rc = json_array_append_new(inject,
                                       json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s}", "host",
                                                 it->host, "port", it->port, "header", it->name,
                                                 "value", it->inject, "scrub", it->value, "secret",
                                                 it->secret, "lease_id", it->lease_id)) < 0
                     ? -ENOMEM
                     : 0;
            continue;
        }
        if (!it->file) {
            size_t n = strlen(it->name) + 1 + it->len + 1;
            char *kv = sodium_malloc(n);
            if (!kv) {
                rc = -ENOMEM;
                break;
            }
            snprintf(kv, n, "%s=%s", it->name, it->value);
            /* the credential is the variable: nothing else of that name (a tool image's Env) */
            size_t nl = strlen(it->name);
            for (size_t k = json_array_size(env); k-- > 0;) {
                const char *e = json_string_value(json_array_get(env, k));
                if (e && strncmp(e, it->name, nl) == 0 && e[nl] == '=')
                    json_array_remove(env, k);
            }
            rc = json_array_append_new(env, json_string(kv)) < 0 ? -ENOMEM : 0;
            sodium_free(kv);
            continue;
        }
        size_t bn = sodium_base64_encoded_len(it->len, sodium_base64_VARIANT_ORIGINAL);
        char *b64 = sodium_malloc(bn);
        if (!b64) {
            rc = -ENOMEM;
            break;
        }
        sodium_bin2base64(b64, bn, (const unsigned char *)it->value, it->len,
                          sodium_base64_VARIANT_ORIGINAL);
        rc = json_array_append_new(
                 files, json_pack("{s:s, s:s}", "name", it->name, "content_b64", b64)) < 0
                 ? -ENOMEM
                 : 0;
        sodium_free(b64);
    }
    if (rc == 0 && json_array_size(files) > 0)
        rc = json_object_set(spec, "secret_files", files) < 0 ? -ENOMEM : 0;
    if (rc == 0 && json_array_size(inject) > 0)
        rc = json_object_set(spec, "inject", inject) < 0 ? -ENOMEM : 0;
    json_decref(files);
    json_decref(inject);
    return rc;
}

/* ---- leasing ---- */

struct lease_plan {
    char id[37];
    const char *secret, *as, *name;
    json_t *cred;     /* the policy's grant */
    char target[330]; /* a header grant's "Header@host:port" (name points here) */
};

/* Step 1 (one transaction): check every grant, record the leases and issue the tokens. */
static int issue(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                 const struct tc_tool *tool, const char *exec_id, int64_t ttl_ms, json_t *creds,
                 struct tc_grant *g, struct lease_plan *plan, size_t *ret_nplan, char **ret_error)
{
    int64_t need_s = (ttl_ms + 999) / 1000;
    size_t np = 0, ntok = 0, i;
    json_t *cred, *actor = broker_actor();
    int rc = 0;
    if (!tc_db_command(c, "BEGIN")) {
        json_decref(actor);
        return -EIO;
    }
    json_array_foreach(creds, i, cred)
    {
        if (rc < 0)
            break;
        json_t *tok = json_object_get(cred, "token");
        if (tok) {
            const char *aud = json_string_value(json_object_get(tok, "audience"));
            const char *scope = json_string_value(json_object_get(tok, "scope"));
            struct tc_token_request req = {
                .tenant_id = tenant_id,
                .tool = tool->name,
                .execution_id = exec_id,
                .audience = aud,
                .scope = scope,
                .ttl_seconds = json_integer_value(json_object_get(tok, "ttl_seconds"))};
            char env[48];
            if (ntok == 0)
                snprintf(env, sizeof(env), "%s", TC_GRANT_TOKEN_ENV);
            else
                snprintf(env, sizeof(env), "%s_%zu", TC_GRANT_TOKEN_ENV, ntok);
            char *value = NULL;
            json_t *info = NULL;
            rc = tc_token_issue_tx(c, keys, &req, actor, &value, &info);
            if (rc == 0) {
                rc = grant_add(g, false, env, value, strlen(value));
                json_array_append_new(g->tokens,
                                      json_pack("{s:O, s:s, s:s, s:s, s:O}", "token_id",
                                                json_object_get(info, "token_id"), "audience", aud,
                                                "scope", scope, "env", env, "expires_at",
                                                json_object_get(info, "expires_at")));
                sodium_memzero(value, strlen(value));
                free(value);
                json_decref(info);
                ntok++;
            }
            continue;
        }
        struct lease_plan *lp = &plan[np];
        lp->secret = json_string_value(json_object_get(cred, "secret"));
        lp->as = json_string_value(json_object_get(cred, "as"));
        lp->name = json_string_value(json_object_get(cred, "name"));
        lp->cred = cred;
        if (lp->as && strcmp(lp->as, "header") == 0) {
            json_t *port = json_object_get(cred, "port");
            snprintf(lp->target, sizeof(lp->target), "%s@%s:%lld",
                     json_string_value(json_object_get(cred, "header")),
                     json_string_value(json_object_get(cred, "host")),
                     port ? (long long)json_integer_value(port) : 443LL);
            lp->name = lp->target;
        }
        if (!lp->secret || !lp->as || !lp->name) {
            rc = fail(ret_error, -ENOENT, "credentials[%zu] is not a secret grant", i);
            break;
        }
        const char *p[] = {tenant_id, lp->secret, tool->name};
        PGresult *r = tc_db_exec(c,
                                 "SELECT $3 = ANY(allowed_tools) OR '*' = ANY(allowed_tools),"
                                 " max_ttl_seconds FROM secrets"
                                 " WHERE tenant_id = $1 AND name = $2 FOR SHARE",
                                 3, p);
        if (!r) {
            rc = -EIO;
            break;
        }
        int64_t max_ttl = 0;
        if (PQntuples(r) != 1)
            rc = fail(ret_error, -ENOENT, "secret '%s' is not stored for this tenant", lp->secret);
        else if (strcmp(PQgetvalue(r, 0, 0), "t") != 0)
            rc = fail(ret_error, -EPERM,
                      "secret '%s' is not allowed for tool '%s'"
                      " (see its allowed_tools)",
                      lp->secret, tool->name);
        else if (tc_parse_i64(PQgetvalue(r, 0, 1), 1, TC_SECRET_MAX_TTL, &max_ttl) < 0 ||
                 need_s > max_ttl)
            rc = fail(ret_error, -ERANGE,
                      "the execution may run %lld s, longer than secret '%s'"
                      " may be leased (max_ttl_seconds %lld)",
                      (long long)need_s, lp->secret, (long long)max_ttl);
        PQclear(r);
        if (rc < 0)
            break;
        int64_t lease_s = need_s + TC_LEASE_GRACE_SECONDS;
        if (lease_s > max_ttl)
            lease_s = max_ttl;
        char secs[24];
        snprintf(secs, sizeof(secs), "%lld", (long long)lease_s);
        tc_uuid7(lp->id);
        const char *ip[] = {lp->id,     tenant_id, exec_id,  tool->name,
                            lp->secret, lp->as,    lp->name, secs};
        r = tc_db_exec(
            c,
            "INSERT INTO credential_leases (id, tenant_id, execution_id, tool,"
            " secret_name, delivered_as, target, expires_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8::int))"
            " RETURNING " TC_SQL_ISO("expires_at"),
            8, ip);
        json_t *ev = r && PQntuples(r) == 1
                         ? json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "action",
                                     "credential.lease.issue", "tenant_id", tenant_id, "actor",
                                     actor, "tool", tool->name, "execution_id", exec_id, "lease_id",
                                     lp->id, "secret", lp->secret, "as", lp->as, "name", lp->name,
                                     "expires_at", PQgetvalue(r, 0, 0))
                         : NULL;
        if (ev)
            json_array_append_new(g->leases,
                                  json_pack("{s:s, s:s, s:s, s:s, s:s}", "lease_id", lp->id,
                                            "secret", lp->secret, "as", lp->as, "name", lp->name,
                                            "expires_at", PQgetvalue(r, 0, 0)));
        PQclear(r);
        rc = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0 ? 0 : -EIO;
        json_decref(ev);
        np++;
    }
    json_decref(actor);
    bool ok = tc_db_command(c, rc == 0 ? "COMMIT" : "ROLLBACK");
    if (rc == 0 && !ok)
        rc = -EIO;
    if (rc == 0)
        *ret_nplan = np;
    return rc;
}

/* Step 2 (one transaction): hand the values out, but only under leases that are still
 * neither expired nor revoked; each use is audited with the keyed hash of the value. */
static int redeem(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                  const struct tc_tool *tool, const char *exec_id, struct lease_plan *plan,
                  size_t np, struct tc_grant *g, char **ret_error)
{
    if (np == 0)
        return 0;
    if (tc_db_begin(c) < 0)
        return -EIO;
    int rc = 0;
    json_t *actor = broker_actor();
    for (size_t i = 0; i < np && rc == 0; i++) {
        struct lease_plan *lp = &plan[i];
        const char *p[] = {lp->id, exec_id, tenant_id};
        PGresult *r =
            tc_db_exec(c,
                       "UPDATE credential_leases l SET used_at = now() FROM secrets s"
                       " WHERE l.id = $1 AND l.execution_id = $2 AND l.tenant_id = $3"
                       " AND l.revoked_at IS NULL AND l.expires_at > now() AND l.used_at IS NULL"
                       " AND s.tenant_id = l.tenant_id AND s.name = l.secret_name"
                       " RETURNING s.key_id, s.ciphertext, s.nonce",
                       3, p);
        if (!r) {
            rc = -EIO;
            break;
        }
        struct tc_secret_value v = {0};
        if (PQntuples(r) != 1) {
            rc = fail(ret_error, -ESTALE,
                      "the lease of secret '%s' expired or was revoked before"
                      " it was handed out",
                      lp->secret);
        } else {
            rc = tc_secret_open_row(keys, PQgetvalue(r, 0, 0), tenant_id, lp->secret,
                                    PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), &v);
            if (rc == -ENOKEY)
                fail(ret_error, rc,
                     "secret '%s' is sealed under master key %s, which this"
                     " server does not hold",
                     lp->secret, PQgetvalue(r, 0, 0));
            else if (rc < 0)
                rc = fail(ret_error, -EBADMSG,
                          "secret '%s' cannot be opened: its ciphertext does"
                          " not authenticate (altered, or moved from another row)",
                          lp->secret);
        }
        PQclear(r);
        if (rc < 0)
            break;
        char hash[65];
        tc_audit_value_hash(keys, tenant_id, v.data, v.len, hash);
        rc = strcmp(lp->as, "header") == 0
                 ? grant_add_header(g, lp->cred, lp->id, v.data, v.len)
                 : grant_add(g, strcmp(lp->as, "file") == 0, lp->name, v.data, v.len);
        tc_secret_value_free(&v);
        json_t *ev =
            json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:s}", "action", "credential.lease.use",
                      "tenant_id", tenant_id, "actor", actor, "tool", tool->name, "execution_id",
                      exec_id, "lease_id", lp->id, "secret", lp->secret, "value_hash", hash);
        if (rc == 0)
            rc = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0 ? 0 : -EIO;
        json_decref(ev);
    }
    json_decref(actor);
    bool ok = tc_db_command(c, rc == 0 ? "COMMIT" : "ROLLBACK");
    return rc == 0 && !ok ? -EIO : rc;
}

static void audit_refusal(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                          const char *tool, const char *exec_id, const char *why)
{
    json_t *actor = broker_actor();
    json_t *ev =
        json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:s}", "action", "credential.lease.refused",
                  "tenant_id", tenant_id, "actor", actor, "tool", tool, "execution_id", exec_id,
                  "status", "refused", "reason", why ? why : "database error");
    if (ev)
        (void)tc_audit_append(c, keys, ev, NULL);
    json_decref(ev);
}

int tc_broker_lease(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                    const struct tc_tool *tool, const char *exec_id, int64_t ttl_ms,
                    struct tc_grant **ret, char **ret_error)
{
    json_t *creds = json_object_get(tool->raw, "credentials");
    struct tc_grant *g = grant_new();
    if (!g)
        return -ENOMEM;
    if (json_array_size(creds) == 0) {
        *ret = g;
        return 0;
    }
    if (json_array_size(creds) > MAX_ITEMS) {
        tc_grant_free(g);
        return fail(ret_error, -E2BIG, "too many credentials");
    }
    struct lease_plan plan[MAX_ITEMS];
    size_t np = 0;
    char *why = NULL;
    int rc = issue(c, keys, tenant_id, tool, exec_id, ttl_ms, creds, g, plan, &np, &why);
    if (rc == 0)
        rc = redeem(c, keys, tenant_id, tool, exec_id, plan, np, g, &why);
    if (rc < 0) {
        /* Nothing stays granted: revoke whatever step 1 committed, record why. */
        (void)tc_broker_release(c, keys, exec_id);
        audit_refusal(c, keys, tenant_id, tool->name, exec_id, why);
        tc_grant_free(g);
        if (ret_error)
            *ret_error = why;
        else
            free(why);
        return rc;
    }
    free(why);
    *ret = g;
    return 0;
}

int tc_broker_release(PGconn *c, const struct tc_keys *keys, const char *exec_id)
{
    if (!tc_uuid_valid(exec_id))
        return -EINVAL;
    const char *p[] = {exec_id};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *lr = tc_db_exec(
        c,
        "UPDATE credential_leases SET revoked_at = now(), revoke_reason = 'execution ended'"
        " WHERE execution_id = $1 AND revoked_at IS NULL"
        " RETURNING id, tenant_id, tool, secret_name",
        1, p);
    PGresult *tr = lr ? tc_db_exec(c,
                                   "UPDATE credential_tokens SET revoked_at = now(), revoke_reason "
                                   "= 'execution ended'"
                                   " WHERE execution_id = $1 AND revoked_at IS NULL"
                                   " RETURNING id, tenant_id, tool, audience",
                                   1, p)
                      : NULL;
    bool ok = lr && tr;
    json_t *actor = broker_actor();
    for (int i = 0; ok && i < PQntuples(lr); i++) {
        json_t *ev = json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:s}", "action",
                               "credential.lease.revoke", "tenant_id", PQgetvalue(lr, i, 1),
                               "actor", actor, "tool", PQgetvalue(lr, i, 2), "execution_id",
                               exec_id, "lease_id", PQgetvalue(lr, i, 0), "secret",
                               PQgetvalue(lr, i, 3), "reason", "execution ended");
        ok = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0;
        json_decref(ev);
    }
    for (int i = 0; ok && i < PQntuples(tr); i++) {
        json_t *ev = json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:s}", "action",
                               "credential.token.revoke", "tenant_id", PQgetvalue(tr, i, 1),
                               "actor", actor, "tool", PQgetvalue(tr, i, 2), "execution_id",
                               exec_id, "token_id", PQgetvalue(tr, i, 0), "audience",
                               PQgetvalue(tr, i, 3), "reason", "execution ended");
        ok = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0;
        json_decref(ev);
    }
    json_decref(actor);
    PQclear(lr);
    PQclear(tr);
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    return ok ? 0 : -EIO;
}
