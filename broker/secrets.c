#include "broker/secrets.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "core/keys.h"
#include "common/util.h"
#include "core/db.h"

#define AD_PREFIX "toolcage-secret-v1"
#define META_COLS                                                                                  \
    "name, description, array_to_json(allowed_tools)::text, max_ttl_seconds, key_id, " TC_SQL_ISO( \
        "created_at") ", " TC_SQL_ISO("updated_at")

bool tc_secret_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128 || name[0] == '.' || name[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* "toolcage-secret-v1\0" tenant_id "\0" name: binds the ciphertext to its row. */
static size_t build_ad(const char *tenant_id, const char *name, unsigned char *ad, size_t cap)
{
    size_t a = sizeof(AD_PREFIX), t = strlen(tenant_id) + 1, n = strlen(name);
    if (a + t + n > cap)
        return 0;
    memcpy(ad, AD_PREFIX, a);
    memcpy(ad + a, tenant_id, t);
    memcpy(ad + a + t, name, n);
    return a + t + n;
}

void tc_secret_seal(const unsigned char key[32], const char *tenant_id, const char *name,
                    const void *value, size_t len, unsigned char nonce[TC_SECRET_NONCE_BYTES],
                    unsigned char *ct)
{
    unsigned char ad[sizeof(AD_PREFIX) + 64 + 130];
    size_t adlen = build_ad(tenant_id, name, ad, sizeof(ad));
    randombytes_buf(nonce, TC_SECRET_NONCE_BYTES);
    crypto_aead_xchacha20poly1305_ietf_encrypt(ct, NULL, value, len, ad, adlen, NULL, nonce, key);
}

int tc_secret_open(const unsigned char key[32], const char *tenant_id, const char *name,
                   const unsigned char *ct, size_t ct_len,
                   const unsigned char nonce[TC_SECRET_NONCE_BYTES], unsigned char *out)
{
    unsigned char ad[sizeof(AD_PREFIX) + 64 + 130];
    size_t adlen = build_ad(tenant_id, name, ad, sizeof(ad));
    if (adlen == 0 || ct_len < TC_SECRET_TAG_BYTES)
        return -EBADMSG;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL, ct, ct_len, ad, adlen, nonce,
                                                   key) != 0)
        return -EBADMSG;
    return 0;
}

void tc_secret_value_free(struct tc_secret_value *v)
{
    if (!v || !v->data)
        return;
    sodium_free(v->data); /* wipes */
    v->data = NULL;
    v->len = 0;
}

/* PostgreSQL's text form of bytea ("\x0a1b...") into a malloc'ed buffer. */
static int bytea_decode(const char *s, unsigned char **ret, size_t *ret_len)
{
    if (strncmp(s, "\\x", 2) != 0)
        return -EINVAL;
    size_t hex = strlen(s + 2), n = 0;
    unsigned char *b = malloc(hex / 2 + 1);
    if (!b)
        return -ENOMEM;
    if (sodium_hex2bin(b, hex / 2 + 1, s + 2, hex, NULL, &n, NULL) != 0) {
        free(b);
        return -EINVAL;
    }
    *ret = b;
    *ret_len = n;
    return 0;
}

static char *bytea_encode(const unsigned char *b, size_t n)
{
    char *s = malloc(2 * n + 3);
    if (!s)
        return NULL;
    tc_db_bytea_hex(b, n, s);
    return s;
}

int tc_secret_open_row(const struct tc_keys *keys, const char *key_id, const char *tenant_id,
                       const char *name, const char *ct_bytea, const char *nonce_bytea,
                       struct tc_secret_value *ret)
{
    const unsigned char *key = tc_keys_secret_key(keys, key_id);
    if (!key)
        return -ENOKEY;
    _cleanup_free_ unsigned char *ct = NULL, *nonce = NULL;
    size_t ct_len = 0, nonce_len = 0;
    if (bytea_decode(ct_bytea, &ct, &ct_len) < 0 ||
        bytea_decode(nonce_bytea, &nonce, &nonce_len) < 0 || nonce_len != TC_SECRET_NONCE_BYTES ||
        ct_len < TC_SECRET_TAG_BYTES)
        return -EBADMSG;
    size_t len = ct_len - TC_SECRET_TAG_BYTES;
    char *out = sodium_malloc(len + 1);
    if (!out)
        return -ENOMEM;
    int r = tc_secret_open(key, tenant_id, name, ct, ct_len, nonce, (unsigned char *)out);
    if (r < 0) {
        sodium_free(out);
        return r;
    }
    out[len] = '\0';
    *ret = (struct tc_secret_value){.data = out, .len = len};
    return 0;
}

/* ---- database ---- */

static json_t *meta_of(PGresult *r, int i)
{
    json_t *tools = json_loads(PQgetvalue(r, i, 2), 0, NULL);
    return json_pack("{s:s, s:s, s:o, s:i, s:s, s:s, s:s}", "name", PQgetvalue(r, i, 0),
                     "description", PQgetvalue(r, i, 1), "allowed_tools",
                     tools ? tools : json_array(), "max_ttl_seconds",
                     (int)strtol(PQgetvalue(r, i, 3), NULL, 10), "key_id", PQgetvalue(r, i, 4),
                     "created_at", PQgetvalue(r, i, 5), "updated_at", PQgetvalue(r, i, 6));
}

/* JSON array of strings -> PostgreSQL array literal {"a","b"} (names are [a-z0-9_-] or "*",
 * so no quoting beyond the braces is needed; anything else is refused). */
static char *pg_text_array(json_t *a)
{
    size_t i;
    json_t *v;
    char *out = malloc(json_array_size(a) * 68 + 3);
    if (!out)
        return NULL;
    size_t o = 0;
    out[o++] = '{';
    json_array_foreach(a, i, v)
    {
        const char *s = json_string_value(v);
        size_t n = s ? strlen(s) : 0;
        if (!s || n == 0 || n > 64 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-*") != n) {
            free(out);
            return NULL;
        }
        if (i)
            out[o++] = ',';
        memcpy(out + o, s, n);
        o += n;
    }
    out[o++] = '}';
    out[o] = '\0';
    return out;
}

int tc_secret_put(PGconn *c, const struct tc_keys *keys, const char *tenant_id, const char *name,
                  const char *value, size_t len, const char *description, json_t *allowed_tools,
                  int64_t max_ttl_seconds, const json_t *actor, bool *ret_created,
                  json_t **ret_meta)
{
    unsigned char nonce[TC_SECRET_NONCE_BYTES];
    _cleanup_free_ unsigned char *ct = malloc(len + TC_SECRET_TAG_BYTES);
    _cleanup_free_ char *tools = pg_text_array(allowed_tools);
    if (!ct || !tools)
        return -EINVAL;
    tc_secret_seal(keys->secret_key, tenant_id, name, value, len, nonce, ct);
    _cleanup_free_ char *ct_s = bytea_encode(ct, len + TC_SECRET_TAG_BYTES);
    _cleanup_free_ char *nonce_s = bytea_encode(nonce, sizeof(nonce));
    char ttl[24], hash[65];
    snprintf(ttl, sizeof(ttl), "%lld", (long long)max_ttl_seconds);
    tc_audit_value_hash(keys, tenant_id, value, len, hash);
    if (!ct_s || !nonce_s)
        return -ENOMEM;
    const char *p[] = {
        tenant_id, name, ct_s, nonce_s, keys->master_id, description ? description : "",
        tools,     ttl};
    if (tc_db_begin(c) < 0)
        return -EIO;
    /* xmax = 0 tells an insert from an update in one statement */
    PGresult *r = tc_db_exec(
        c,
        "INSERT INTO secrets (tenant_id, name, ciphertext, nonce, key_id, description,"
        " allowed_tools, max_ttl_seconds) VALUES ($1, $2, $3::bytea, $4::bytea, $5, $6,"
        " $7::text[], $8::int)"
        " ON CONFLICT (tenant_id, name) DO UPDATE SET ciphertext = EXCLUDED.ciphertext,"
        " nonce = EXCLUDED.nonce, key_id = EXCLUDED.key_id, description = EXCLUDED.description,"
        " allowed_tools = EXCLUDED.allowed_tools, max_ttl_seconds = EXCLUDED.max_ttl_seconds,"
        " updated_at = now()"
        " RETURNING " META_COLS ", (xmax = 0)",
        8, p);
    bool ok = r && PQntuples(r) == 1;
    bool created = ok && strcmp(PQgetvalue(r, 0, 7), "t") == 0;
    json_t *meta = ok ? meta_of(r, 0) : NULL;
    PQclear(r);
    json_t *ev = json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:b, s:O, s:I}", "action", "secret.put",
                           "tenant_id", tenant_id, "actor", actor, "secret", name, "value_hash",
                           hash, "key_id", keys->master_id, "created", created, "allowed_tools",
                           allowed_tools, "max_ttl_seconds", (json_int_t)max_ttl_seconds);
    ok = ok && meta && ev && tc_audit_append_tx(c, keys, ev, NULL) == 0;
    json_decref(ev);
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    sodium_memzero(hash, sizeof(hash));
    if (!ok) {
        json_decref(meta);
        return -EIO;
    }
    *ret_created = created;
    *ret_meta = meta;
    return 0;
}

int tc_secret_get(PGconn *c, const char *tenant_id, const char *name, json_t **ret_meta)
{
    const char *p[] = {tenant_id, name};
    PGresult *r =
        tc_db_exec(c, "SELECT " META_COLS " FROM secrets WHERE tenant_id = $1 AND name = $2", 2, p);
    if (!r)
        return -EIO;
    int rc = -ENOENT;
    if (PQntuples(r) == 1) {
        json_t *m = meta_of(r, 0);
        rc = m ? 0 : -ENOMEM;
        if (m)
            *ret_meta = m;
    }
    PQclear(r);
    return rc;
}

int tc_secret_list(PGconn *c, const char *tenant_id, json_t **ret_list)
{
    const char *p[] = {tenant_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT " META_COLS " FROM secrets WHERE tenant_id = $1"
                             " ORDER BY name LIMIT 10000",
                             1, p);
    if (!r)
        return -EIO;
    json_t *a = json_array();
    for (int i = 0; a && i < PQntuples(r); i++)
        json_array_append_new(a, meta_of(r, i));
    PQclear(r);
    if (!a)
        return -ENOMEM;
    *ret_list = a;
    return 0;
}

int tc_secret_delete(PGconn *c, const struct tc_keys *keys, const char *tenant_id, const char *name,
                     const json_t *actor)
{
    const char *p[] = {tenant_id, name};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r = tc_db_exec(c, "DELETE FROM secrets WHERE tenant_id = $1 AND name = $2", 2, p);
    bool ok = r != NULL, found = r && strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    PGresult *lr =
        ok && found
            ? tc_db_exec(c,
                         "UPDATE credential_leases SET revoked_at = now(), revoke_reason = 'secret "
                         "deleted'"
                         " WHERE tenant_id = $1 AND secret_name = $2 AND revoked_at IS NULL",
                         2, p)
            : NULL;
    long revoked = lr ? strtol(PQcmdTuples(lr), NULL, 10) : 0;
    ok = ok && (!found || lr);
    PQclear(lr);
    if (ok && found) {
        json_t *ev =
            json_pack("{s:s, s:s, s:O, s:s, s:i}", "action", "secret.delete", "tenant_id",
                      tenant_id, "actor", actor, "secret", name, "leases_revoked", (int)revoked);
        ok = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0;
        json_decref(ev);
    }
    ok = tc_db_command(c, ok && found ? "COMMIT" : "ROLLBACK") && ok;
    if (!ok)
        return -EIO;
    return found ? 0 : -ENOENT;
}

/* Re-seal an opened value under to's key and store it (inside the caller's transaction). */
static int store_resealed(PGconn *c, const struct tc_keys *to, const char *tenant_id,
                          const char *name, const char *old_id, const struct tc_secret_value *v)
{
    unsigned char nonce[TC_SECRET_NONCE_BYTES];
    _cleanup_free_ unsigned char *ct = malloc(v->len + TC_SECRET_TAG_BYTES);
    if (!ct)
        return -ENOMEM;
    tc_secret_seal(to->secret_key, tenant_id, name, v->data, v->len, nonce, ct);
    _cleanup_free_ char *ct_s = bytea_encode(ct, v->len + TC_SECRET_TAG_BYTES);
    _cleanup_free_ char *nonce_s = bytea_encode(nonce, sizeof(nonce));
    if (!ct_s || !nonce_s)
        return -ENOMEM;
    const char *u[] = {tenant_id, name, ct_s, nonce_s, to->master_id};
    PGresult *ur = tc_db_exec(c,
                              "UPDATE secrets SET ciphertext = $3::bytea, nonce = $4::bytea,"
                              " key_id = $5 WHERE tenant_id = $1 AND name = $2",
                              5, u);
    json_t *ev =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s}", "action", "secret.reseal", "tenant_id",
                  tenant_id, "actor", "type", "system", "id", "secrets rotate-master", "secret",
                  name, "from_key_id", old_id, "key_id", to->master_id);
    int rc = ur && ev && tc_audit_append_tx(c, to, ev, NULL) == 0 ? 0 : -EIO;
    PQclear(ur);
    json_decref(ev);
    return rc;
}

/* One row in its own transaction: 1 re-sealed, 0 left as it is (cannot be opened, gone, or
 * re-sealed meanwhile), -EIO. */
static int reseal_one(PGconn *c, const struct tc_keys *from, const struct tc_keys *to,
                      const char *tenant_id, const char *name)
{
    const char *p[] = {tenant_id, name, to->master_id};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r = tc_db_exec(c,
                             "SELECT key_id, ciphertext, nonce FROM secrets"
                             " WHERE tenant_id = $1 AND name = $2 AND key_id <> $3 FOR UPDATE",
                             3, p);
    int rc = r ? 0 : -EIO;
    if (r && PQntuples(r) == 1) {
        struct tc_secret_value v = {0};
        const char *old_id = PQgetvalue(r, 0, 0);
        int orc = tc_secret_open_row(from, old_id, tenant_id, name, PQgetvalue(r, 0, 1),
                                     PQgetvalue(r, 0, 2), &v);
        if (orc == -ENOKEY)
            orc = tc_secret_open_row(to, old_id, tenant_id, name, PQgetvalue(r, 0, 1),
                                     PQgetvalue(r, 0, 2), &v);
        if (orc == 0)
            rc = store_resealed(c, to, tenant_id, name, old_id, &v) == 0 ? 1 : -EIO;
        tc_secret_value_free(&v);
    }
    PQclear(r);
    bool ok = tc_db_command(c, rc == 1 ? "COMMIT" : "ROLLBACK");
    return rc == 1 && !ok ? -EIO : rc;
}

int tc_secrets_reseal_all(PGconn *c, const struct tc_keys *from, const struct tc_keys *to,
                          size_t *ret_resealed, size_t *ret_failed)
{
    const char *p[] = {to->master_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT tenant_id, name FROM secrets WHERE key_id <> $1"
                             " ORDER BY tenant_id, name",
                             1, p);
    if (!r)
        return -EIO;
    size_t done = 0, failed = 0;
    int rc = 0;
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        int x = reseal_one(c, from, to, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
        if (x < 0)
            rc = x;
        else if (x == 1)
            done++;
        else
            failed++;
    }
    PQclear(r);
    /* rows that vanished or were re-sealed meanwhile were counted as "failed": recount */
    PGresult *left =
        rc == 0 ? tc_db_exec(c, "SELECT count(*) FROM secrets WHERE key_id <> $1", 1, p) : NULL;
    if (left && PQntuples(left) == 1)
        failed = (size_t)strtoull(PQgetvalue(left, 0, 0), NULL, 10);
    PQclear(left);
    *ret_resealed = done;
    *ret_failed = failed;
    return rc;
}
