#include "server/auth.h"

#include "audit/audit.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "server/db.h"

#define KEY_PREFIX "tc_"
#define KEY_RANDOM_BYTES 32

static const char *const role_names[] = {"agent", "reviewer", "auditor", "admin"};

int tc_role_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, role_names[i]) == 0)
            return 1 << i;
    return -EINVAL;
}

const char *tc_role_name(enum tc_role r)
{
    for (int i = 0; i < 4; i++)
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

int tc_auth_create_key(PGconn *c, const struct tc_keys *keys, const char *tenant, const char *role,
                       char **ret_key, char **ret_error)
{
    if (tc_role_parse(role) < 0) {
        *ret_error = strdup("role must be agent, reviewer, auditor or admin");
        return -EINVAL;
    }
    unsigned char rnd[KEY_RANDOM_BYTES];
    randombytes_buf(rnd, sizeof(rnd));
    char key[64];
    memcpy(key, KEY_PREFIX, 3);
    sodium_bin2base64(key + 3, sizeof(key) - 3, rnd, sizeof(rnd),
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(rnd, sizeof(rnd));

    char tenant_id[37], key_id[37], hash[2 * 32 + 3], prefix[16];
    tc_uuid7(tenant_id);
    tc_uuid7(key_id);
    key_hash_hex(key, hash);
    snprintf(prefix, sizeof(prefix), "%.11s", key);

    /* Upsert the tenant and insert the key, and the audit record, in one transaction. */
    const char *p[] = {tenant_id, tenant, key_id, role, hash, prefix};
    if (!tc_db_command(c, "BEGIN")) {
        *ret_error = strdup(PQerrorMessage(c));
        sodium_memzero(key, sizeof(key));
        return -EIO;
    }
    PGresult *r = tc_db_exec(c,
        "WITH ins AS (INSERT INTO tenants (id, name) VALUES ($1, $2)"
        "             ON CONFLICT (name) DO NOTHING RETURNING id),"
        " t AS (SELECT id FROM ins UNION ALL SELECT id FROM tenants WHERE name = $2)"
        " INSERT INTO api_keys (id, tenant_id, role, key_hash, prefix)"
        " SELECT $3, t.id, $4, $5::bytea, $6 FROM t LIMIT 1 RETURNING tenant_id", 6, p);
    json_t *ev = r && PQntuples(r) == 1
                     ? json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s}}", "action",
                                 "key.create", "status", "ok", "tenant_id", PQgetvalue(r, 0, 0),
                                 "actor", "type", "cli", "id", "keys create", "key", "id", key_id,
                                 "role", role, "prefix", prefix)
                     : NULL;
    PQclear(r);
    int rc = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0 && tc_db_command(c, "COMMIT") ? 0 : -EIO;
    json_decref(ev);
    if (rc < 0) {
        *ret_error = strdup(PQerrorMessage(c));
        tc_db_command(c, "ROLLBACK");
        sodium_memzero(key, sizeof(key));
        return rc;
    }
    *ret_key = strdup(key);
    sodium_memzero(key, sizeof(key));
    return *ret_key ? 0 : -ENOMEM;
}

int tc_auth_lookup(PGconn *c, const char *key, struct tc_principal *ret)
{
    if (!key_well_formed(key))
        return -EACCES;
    char hash[2 * 32 + 3];
    key_hash_hex(key, hash);
    const char *p[] = {hash};
    PGresult *r = tc_db_exec(c,
        "SELECT k.id, k.tenant_id, t.name, k.role FROM api_keys k JOIN tenants t ON t.id = k.tenant_id"
        " WHERE k.key_hash = $1::bytea AND k.revoked_at IS NULL", 1, p);
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
    int role = tc_role_parse(PQgetvalue(r, 0, 3));
    PQclear(r);
    if (role < 0)
        return -EACCES;
    pr.role = (enum tc_role)role;
    *ret = pr;
    return 0;
}
