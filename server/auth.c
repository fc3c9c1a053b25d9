#include "server/auth.h"

#include "audit/audit.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "core/db.h"
#include "server/http.h"

#define KEY_PREFIX       "tc_"
#define KEY_RANDOM_BYTES 32

static const char *const role_names[] = {"agent", "reviewer", "auditor", "admin", "operator"};

int tc_role_parse(const char *s)
{
    for (int i = 0; i < (int)TC_ARRAY_SIZE(role_names); i++)
        if (strcmp(s, role_names[i]) == 0)
            return 1 << i;
    return -EINVAL;
}

const char *tc_role_name(enum tc_role r)
{
    for (int i = 0; i < (int)TC_ARRAY_SIZE(role_names); i++)
        if ((int)r == (1 << i))
            return role_names[i];
    return "unknown";
}

/* The hash is the lookup key; keys carry 256 bits of entropy, so a fast hash is enough
 * (a slow KDF protects low-entropy secrets such as passwords, not these). */
static void key_hash_hex(const char *key, char out[2 * 32 + 3])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)key, strlen(key), NULL, 0);
    tc_db_bytea_hex(h, sizeof(h), out);
}

static bool key_well_formed(const char *key)
{
    size_t n = strlen(key);
    if (n != strlen(KEY_PREFIX) + 43 || strncmp(key, KEY_PREFIX, strlen(KEY_PREFIX)) != 0)
        return false;
    for (size_t i = strlen(KEY_PREFIX); i < n; i++) {
        char c = key[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

static bool person_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || !(c == '.' || c == '_' || c == '@' || c == '-')))
            return false;
    }
    return true;
}

int tc_auth_person(PGconn *c, const char *tenant_id, const char *name, char ret_id[37])
{
    if (!person_name_ok(name))
        return -EINVAL;
    char id[37];
    tc_uuid7(id);
    const char *p[] = {id, tenant_id, name};
    PGresult *r = tc_db_exec(c,
                             "INSERT INTO persons (id, tenant_id, name) VALUES ($1, $2, $3)"
                             " ON CONFLICT (tenant_id, name) DO NOTHING",
                             3, p);
    if (!r)
        return -EIO;
    PQclear(r);
    r = tc_db_exec(c, "SELECT id FROM persons WHERE tenant_id = $1 AND name = $2", 2, p + 1);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        return -EIO;
    }
    snprintf(ret_id, 37, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

int tc_auth_create_key(PGconn *c, const struct tc_keys *keys, const char *tenant, const char *role,
                       const char *person, char **ret_key, char **ret_error)
{
    int role_bit = tc_role_parse(role);
    if (role_bit < 0) {
        *ret_error = strdup("role must be agent, reviewer, auditor, admin or operator");
        return -EINVAL;
    }
    bool operator= role_bit == TC_ROLE_OPERATOR;
    if (operator&&(tenant || person)) {
        *ret_error = strdup("an operator key belongs to no tenant and no person: give neither"
                            " --tenant nor --person");
        return -EINVAL;
    }
    if (!operator&& !tenant) {
        *ret_error = strdup("--tenant is required (except for --role operator)");
        return -EINVAL;
    }
    if (person && !person_name_ok(person)) {
        *ret_error = strdup("--person must be 1 to 64 letters, digits and . _ @ - (starting "
                            "with a letter or digit)");
        return -EINVAL;
    }
    unsigned char rnd[KEY_RANDOM_BYTES];
    randombytes_buf(rnd, sizeof(rnd));
    char key[64];
    memcpy(key, KEY_PREFIX, 3);
    sodium_bin2base64(key + 3, sizeof(key) - 3, rnd, sizeof(rnd),
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(rnd, sizeof(rnd));

    char tenant_id[37], key_id[37], hash[2 * 32 + 3], prefix[16], person_id[37] = "";
    tc_uuid7(tenant_id);
    tc_uuid7(key_id);
    key_hash_hex(key, hash);
    snprintf(prefix, sizeof(prefix), "%.11s", key);

    /* Upsert the tenant and insert the key, and the audit record, in one transaction. */
    const char *p[] = {tenant_id, tenant ? tenant : "", key_id, role, hash, prefix};
    if (!tc_db_command(c, "BEGIN")) {
        *ret_error = strdup(tc_db_error(c));
        sodium_memzero(key, sizeof(key));
        return -EIO;
    }
    /* The tenant first, in a statement of its own: a concurrent `keys create` for the same new
     * tenant makes this one wait for its commit, and the next statement's snapshot (READ
     * COMMITTED) then sees the row. In one statement (a CTE) it saw neither and inserted
     * nothing. */
    PGresult *r = NULL, *t = NULL;
    if (operator)
        r = tc_db_exec(c,
                       "INSERT INTO api_keys (id, tenant_id, role, key_hash, prefix)"
                       " VALUES ($1, NULL, $2, $3::bytea, $4) RETURNING ''",
                       4, p + 2);
    else if ((t = tc_db_exec(c,
                             "INSERT INTO tenants (id, name) VALUES ($1, $2)"
                             " ON CONFLICT (name) DO NOTHING",
                             2, p)))
        r = tc_db_exec(c,
                       "INSERT INTO api_keys (id, tenant_id, role, key_hash, prefix)"
                       " SELECT $2, id, $3, $4::bytea, $5 FROM tenants WHERE name = $1"
                       " RETURNING tenant_id",
                       5, p + 1);
    PQclear(t);
    json_t *ev = r && PQntuples(r) == 1
                     ? json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s}}", "action",
                                 "key.create", "status", "ok", "actor", "type", "cli", "id",
                                 "keys create", "key", "id", key_id, "role", role, "prefix", prefix)
                     : NULL;
    if (ev && !operator) /* an operator key's record has no tenant: operators see it */
        json_object_set_new(ev, "tenant_id", json_string(PQgetvalue(r, 0, 0)));
    int rc = ev ? 0 : -EIO;
    if (rc == 0 && person) {
        rc = tc_auth_person(c, PQgetvalue(r, 0, 0), person, person_id);
        const char *pp[] = {key_id, person_id};
        PGresult *u = rc == 0
                          ? tc_db_exec(c, "UPDATE api_keys SET person_id = $2 WHERE id = $1", 2, pp)
                          : NULL;
        rc = u ? 0 : -EIO;
        PQclear(u);
        json_object_set_new(json_object_get(ev, "key"), "person",
                            json_pack("{s:s, s:s}", "id", person_id, "name", person));
    }
    PQclear(r);
    rc = rc == 0 && tc_audit_append_tx(c, keys, ev, NULL) == 0 && tc_db_command(c, "COMMIT") ? 0
                                                                                             : -EIO;
    json_decref(ev);
    if (rc < 0) {
        *ret_error = strdup(tc_db_error(c));
        tc_db_command(c, "ROLLBACK");
        sodium_memzero(key, sizeof(key));
        return rc;
    }
    *ret_key = strdup(key);
    sodium_memzero(key, sizeof(key));
    return *ret_key ? 0 : -ENOMEM;
}

int tc_auth_tenant_id(PGconn *c, const char *name, char ret_id[37])
{
    const char *p[] = {name};
    PGresult *r = tc_db_exec(c, "SELECT id FROM tenants WHERE name = $1", 1, p);
    int rc = !r ? -EIO : PQntuples(r) == 1 ? 0 : -ENOENT;
    if (rc == 0)
        snprintf(ret_id, 37, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

int tc_auth_lookup(PGconn *c, const char *key, struct tc_principal *ret)
{
    if (!key_well_formed(key))
        return -EACCES;
    char hash[2 * 32 + 3];
    key_hash_hex(key, hash);
    const char *p[] = {hash};
    PGresult *r =
        tc_db_exec(c,
                   "SELECT k.id, coalesce(k.tenant_id::text, ''), coalesce(t.name, ''), k.role,"
                   " coalesce(k.person_id::text, '')"
                   " FROM api_keys k LEFT JOIN tenants t ON t.id = k.tenant_id"
                   " WHERE k.key_hash = $1::bytea AND k.revoked_at IS NULL",
                   1, p);
    if (!r)
        return -EIO;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return -EACCES;
    }
    struct tc_principal pr = {0};
    snprintf(pr.key_id, sizeof(pr.key_id), "%s", PQgetvalue(r, 0, 0));
    snprintf(pr.tenant_id, sizeof(pr.tenant_id), "%s", PQgetvalue(r, 0, 1));
    snprintf(pr.tenant_name, sizeof(pr.tenant_name), "%s", PQgetvalue(r, 0, 2));
    snprintf(pr.person_id, sizeof(pr.person_id), "%s", PQgetvalue(r, 0, 4));
    int role = tc_role_parse(PQgetvalue(r, 0, 3));
    PQclear(r);
    /* A tenant role always has a tenant, an operator never (the schema says so too). */
    if (role < 0 || (role == TC_ROLE_OPERATOR) != (pr.tenant_id[0] == '\0'))
        return -EACCES;
    pr.role = (enum tc_role)role;
    *ret = pr;
    return 0;
}

enum MHD_Result tc_auth_bearer_dispatch(struct tc_request *r, const struct tc_route *rt)
{
    if (!rt->roles)
        return rt->handler(r);
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
    if (tc_request_header_count(r, "Authorization") >
        1) /* a proxy in front may have checked the other one: trust neither */
        return tc_respond_problem_header(r, 401, "unauthorized", "Unauthorized", "WWW-Authenticate",
                                         "Bearer", "send exactly one Authorization header");
    if (!h && (rt->roles & TC_ROLE_KEY_OPTIONAL))
        return rt->handler(r); /* the public view (principal role 0) */
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return tc_respond_problem_header(r, 401, "unauthorized", "Unauthorized", "WWW-Authenticate",
                                         "Bearer",
                                         "an API key is required: Authorization: Bearer <key>");
    r->auth_us = tc_now_us();
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    int rc = tc_auth_lookup(c, h + 7, &r->principal);
    tc_db_release(r->srv->db, c);
    r->authed_us = tc_now_us();
    if (rc == -EIO)
        return tc_respond_db_down(r);
    if (rc < 0)
        return tc_respond_problem_header(r, 401, "unauthorized", "Unauthorized", "WWW-Authenticate",
                                         "Bearer error=\"invalid_token\"",
                                         "the API key is not valid");
    if (!(rt->roles & r->principal.role))
        return tc_respond_problem(r, 403, "forbidden", "Forbidden", NULL,
                                  "the role '%s' may not do this", tc_role_name(r->principal.role));
    return rt->handler(r);
}

json_t *tc_auth_actor(const struct tc_principal *p)
{
    return json_pack("{s:s, s:s, s:s}", "type", "api_key", "id", p->key_id, "role",
                     tc_role_name(p->role));
}
