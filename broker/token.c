#include "broker/token.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"
#include "core/keys.h"
#include "common/util.h"
#include "core/db.h"

#define HEADER     "v4.public."
#define HEADER_LEN (sizeof(HEADER) - 1)
#define B64URL     sodium_base64_VARIANT_URLSAFE_NO_PADDING

/* ---- PASETO v4.public ---- */

static void le64(uint64_t n, unsigned char out[8])
{
    n &= UINT64_MAX >> 1; /* the spec clears the top bit for interoperability */
    for (int k = 0; k < 8; k++) {
        out[k] = (unsigned char)(n & 0xff);
        n >>= 8;
    }
}

size_t tc_paseto_pae(const void *const *pieces, const size_t *lens, size_t n, unsigned char *out)
{
    size_t o = 0;
    if (out)
        le64(n, out);
    o += 8;
    for (size_t k = 0; k < n; k++) {
        if (out) {
            le64(lens[k], out + o);
            if (lens[k])
                memcpy(out + o + 8, pieces[k], lens[k]);
        }
        o += 8 + lens[k];
    }
    return o;
}

static char *b64url(const void *data, size_t len)
{
    size_t n = sodium_base64_encoded_len(len, B64URL);
    char *s = malloc(n);
    if (s)
        sodium_bin2base64(s, n, data, len, B64URL);
    return s;
}

/* Decode a whole base64url (unpadded) string; trailing garbage is an error. */
static int unb64url(const char *s, size_t slen, unsigned char **ret, size_t *ret_len)
{
    unsigned char *b = malloc(slen * 3 / 4 + 2);
    size_t n = 0;
    const char *end = NULL;
    if (!b)
        return -ENOMEM;
    if (sodium_base642bin(b, slen * 3 / 4 + 2, s, slen, NULL, &n, &end, B64URL) != 0 ||
        end != s + slen) {
        free(b);
        return -EINVAL;
    }
    b[n] = '\0';
    *ret = b;
    *ret_len = n;
    return 0;
}

static unsigned char *pae4(const void *m, size_t mlen, const void *f, size_t flen, const void *i,
                           size_t ilen, size_t *ret_len)
{
    const void *pieces[] = {HEADER, m, f, i};
    size_t lens[] = {HEADER_LEN, mlen, flen, ilen};
    size_t n = tc_paseto_pae(pieces, lens, 4, NULL);
    unsigned char *out = malloc(n);
    if (out)
        tc_paseto_pae(pieces, lens, 4, out);
    *ret_len = n;
    return out;
}

char *tc_paseto_sign(const unsigned char sk[64], const void *m, size_t mlen, const void *f,
                     size_t flen, const void *i, size_t ilen)
{
    size_t plen;
    _cleanup_free_ unsigned char *pae = pae4(m, mlen, f, flen, i, ilen, &plen);
    _cleanup_free_ unsigned char *body = malloc(mlen + crypto_sign_BYTES);
    if (!pae || !body)
        return NULL;
    memcpy(body, m, mlen);
    crypto_sign_detached(body + mlen, NULL, pae, plen, sk);
    _cleanup_free_ char *b = b64url(body, mlen + crypto_sign_BYTES);
    _cleanup_free_ char *fb = flen ? b64url(f, flen) : NULL;
    if (!b || (flen && !fb))
        return NULL;
    size_t n = HEADER_LEN + strlen(b) + (fb ? 1 + strlen(fb) : 0) + 1;
    char *tok = malloc(n);
    if (tok)
        snprintf(tok, n, "%s%s%s%s", HEADER, b, fb ? "." : "", fb ? fb : "");
    return tok;
}

/* Split "v4.public.<body>[.<footer>]": body and footer spans. */
static int split(const char *token, const char **body, size_t *blen, const char **foot,
                 size_t *flen)
{
    size_t n = strnlen(token, TC_TOKEN_MAX_BYTES + 1);
    if (n > TC_TOKEN_MAX_BYTES || strncmp(token, HEADER, HEADER_LEN) != 0)
        return -EINVAL;
    const char *b = token + HEADER_LEN, *dot = strchr(b, '.');
    *body = b;
    *blen = dot ? (size_t)(dot - b) : strlen(b);
    *foot = dot ? dot + 1 : b + *blen;
    *flen = dot ? strlen(dot + 1) : 0;
    if (*blen == 0 || (dot && (*flen == 0 || strchr(dot + 1, '.'))))
        return -EINVAL;
    return 0;
}

int tc_paseto_footer(const char *token, char **ret_footer, size_t *ret_len)
{
    const char *b, *f;
    size_t blen, flen;
    if (split(token, &b, &blen, &f, &flen) < 0)
        return -EINVAL;
    unsigned char *out = NULL;
    size_t n = 0;
    if (flen == 0) {
        out = calloc(1, 1);
        if (!out)
            return -ENOMEM;
    } else if (unb64url(f, flen, &out, &n) < 0) {
        return -EINVAL;
    }
    *ret_footer = (char *)out;
    *ret_len = n;
    return 0;
}

int tc_paseto_verify(const char *token, const unsigned char pk[32], const void *i, size_t ilen,
                     char **ret_message, size_t *ret_len)
{
    const char *b, *f;
    size_t blen, flen;
    if (split(token, &b, &blen, &f, &flen) < 0)
        return -EINVAL;
    _cleanup_free_ unsigned char *body = NULL, *foot = NULL;
    size_t n = 0, fn = 0;
    if (unb64url(b, blen, &body, &n) < 0 || n < crypto_sign_BYTES)
        return -EINVAL;
    if (flen && unb64url(f, flen, &foot, &fn) < 0)
        return -EINVAL;
    size_t mlen = n - crypto_sign_BYTES, plen;
    _cleanup_free_ unsigned char *pae =
        pae4(body, mlen, foot ? foot : (unsigned char *)"", fn, i, ilen, &plen);
    if (!pae)
        return -ENOMEM;
    if (crypto_sign_verify_detached(body + mlen, pae, plen, pk) != 0)
        return -EBADMSG;
    char *m = malloc(mlen + 1);
    if (!m)
        return -ENOMEM;
    memcpy(m, body, mlen);
    m[mlen] = '\0';
    *ret_message = m;
    *ret_len = mlen;
    return 0;
}

/* ---- tokens ---- */

int tc_token_publish_key(PGconn *c, const struct tc_keys *keys)
{
    char pk[67];
    tc_db_bytea_hex(keys->token_sign_pk, 32, pk);
    const char *p[] = {keys->token_key_id, pk};
    PGresult *r = tc_db_exec(c,
                             "INSERT INTO token_keys (key_id, public_key) VALUES ($1, $2::bytea)"
                             " ON CONFLICT (key_id) DO NOTHING",
                             2, p);
    if (!r)
        return -EIO;
    PQclear(r);
    return 0;
}

/* "2026-01-31T12:00:00.000Z" (tc_iso8601's form) -> ms since the epoch; -1 if malformed. */
static int64_t iso_ms(const char *s)
{
    struct tm tm = {0};
    int ms = 0, n = 0;
    if (!s || strlen(s) != 24 ||
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &n) != 7 ||
        n != 24)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    return t < 0 ? -1 : (int64_t)t * 1000 + ms;
}

int tc_token_issue_tx(PGconn *c, const struct tc_keys *keys, const struct tc_token_request *req,
                      const json_t *actor, char **ret_token, json_t **ret_info)
{
    char jti[37], iat[32], nbf[32], exp[32], ttl[24];
    tc_uuid7(jti);
    /* The token lives ttl_seconds from now, to the millisecond: truncating "now" to whole
     * seconds made a 1 s token dead on arrival when issued at x.999. nbf is the whole second
     * before, so a verifier that compares whole seconds does not see it in the future. */
    int64_t now = tc_wall_ms();
    tc_iso8601(now, iat);
    tc_iso8601(now / 1000 * 1000, nbf);
    tc_iso8601(now + req->ttl_seconds * 1000, exp);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)req->ttl_seconds);
    json_t *claims = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "iss", "toolcage",
                               "sub", req->tenant_id, "aud", req->audience, "exp", exp, "iat", iat,
                               "nbf", nbf, "jti", jti, "scope", req->scope, "tool", req->tool);
    if (claims && req->execution_id)
        json_object_set_new(claims, "execution_id", json_string(req->execution_id));
    json_t *footer = json_pack("{s:s}", "kid", keys->token_key_id);
    _cleanup_free_ char *m = claims ? json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    _cleanup_free_ char *f = footer ? json_dumps(footer, JSON_COMPACT) : NULL;
    json_decref(claims);
    json_decref(footer);
    if (!m || !f)
        return -ENOMEM;
    char *tok = tc_paseto_sign(keys->token_sign_sk, m, strlen(m), f, strlen(f), "", 0);
    if (!tok)
        return -ENOMEM;
    const char *p[] = {jti,
                       req->tenant_id,
                       req->tool,
                       req->execution_id,
                       req->audience,
                       req->scope,
                       keys->token_key_id,
                       req->issuer_key_id,
                       iat,
                       exp};
    PGresult *r = tc_db_exec(
        c,
        "INSERT INTO credential_tokens (id, tenant_id, tool, execution_id, audience, scope,"
        " key_id, issuer_key_id, issued_at, expires_at)"
        " VALUES ($1, $2, $3, $4::uuid, $5, $6, $7, $8::uuid, $9::timestamptz, $10::timestamptz)",
        10, p);
    bool ok = r != NULL && tc_token_publish_key(c, keys) == 0;
    PQclear(r);
    json_t *info = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "token_id", jti, "kid",
                             keys->token_key_id, "audience", req->audience, "scope", req->scope,
                             "tool", req->tool, "execution_id",
                             req->execution_id ? json_string(req->execution_id) : json_null(),
                             "issued_at", iat, "expires_at", exp);
    json_t *ev =
        json_pack("{s:s, s:s, s:O, s:s, s:s*, s:s, s:s, s:s, s:s, s:I, s:s}", "action",
                  "credential.token.issue", "tenant_id", req->tenant_id, "actor", actor, "tool",
                  req->tool, "execution_id", req->execution_id, "token_id", jti, "kid",
                  keys->token_key_id, "audience", req->audience, "scope", req->scope, "ttl_seconds",
                  (json_int_t)req->ttl_seconds, "expires_at", exp);
    ok = ok && info && ev && tc_audit_append_tx(c, keys, ev, NULL) == 0;
    json_decref(ev);
    if (!ok) {
        json_decref(info);
        sodium_memzero(tok, strlen(tok));
        free(tok);
        return -EIO;
    }
    *ret_token = tok;
    *ret_info = info;
    return 0;
}

int tc_token_issue(PGconn *c, const struct tc_keys *keys, const struct tc_token_request *req,
                   const json_t *actor, char **ret_token, json_t **ret_info)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    char *tok = NULL;
    json_t *info = NULL;
    int r = tc_token_issue_tx(c, keys, req, actor, &tok, &info);
    if (r < 0 || !tc_db_command(c, "COMMIT")) {
        tc_db_command(c, "ROLLBACK");
        if (tok) {
            sodium_memzero(tok, strlen(tok));
            free(tok);
        }
        json_decref(info);
        return r < 0 ? r : -EIO;
    }
    *ret_token = tok;
    *ret_info = info;
    return 0;
}

/* The public key named kid: the current one, or one registered in token_keys. */
static int public_key_of(PGconn *c, const struct tc_keys *keys, const char *kid,
                         unsigned char pk[32])
{
    if (strcmp(kid, keys->token_key_id) == 0) {
        memcpy(pk, keys->token_sign_pk, 32);
        return 0;
    }
    const char *p[] = {kid};
    PGresult *r =
        tc_db_exec(c, "SELECT encode(public_key, 'hex') FROM token_keys WHERE key_id = $1", 1, p);
    if (!r)
        return -EIO;
    size_t n = 0;
    int rc = PQntuples(r) == 1 &&
                     sodium_hex2bin(pk, 32, PQgetvalue(r, 0, 0), 64, NULL, &n, NULL) == 0 && n == 32
                 ? 0
                 : -ENOENT;
    PQclear(r);
    return rc;
}

const char *tc_token_check_claims(const json_t *claims, const char *tenant_id, const char *audience,
                                  int64_t now)
{
    const char *jti = json_string_value(json_object_get(claims, "jti"));
    const char *aud = json_string_value(json_object_get(claims, "aud"));
    int64_t exp = iso_ms(json_string_value(json_object_get(claims, "exp")));
    int64_t nbf = iso_ms(json_string_value(json_object_get(claims, "nbf")));
    if (!json_is_object(claims) || !jti || !tc_uuid_valid(jti) || !aud || exp < 0 || nbf < 0)
        return "malformed claims";
    if (strcmp(json_string_value(json_object_get(claims, "iss")) ?: "", "toolcage") != 0)
        return "issuer";
    if (strcmp(json_string_value(json_object_get(claims, "sub")) ?: "", tenant_id) != 0)
        return "another tenant";
    if (exp <= now)
        return "expired";
    if (nbf > now)
        return "not yet valid";
    if (audience && strcmp(aud, audience) != 0)
        return "audience";
    return NULL;
}

static json_t *inactive(void)
{
    return json_pack("{s:b}", "active", 0);
}

int tc_token_introspect(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                        const char *token, const char *audience, const json_t *actor, json_t **ret)
{
    _cleanup_free_ char *foot = NULL, *msg = NULL;
    size_t flen = 0, mlen = 0;
    if (tc_paseto_footer(token, &foot, &flen) < 0) {
        *ret = inactive();
        return 0;
    }
    json_t *fj = json_loadb(foot, flen, JSON_REJECT_DUPLICATES, NULL);
    const char *kid = json_string_value(json_object_get(fj, "kid"));
    unsigned char pk[32];
    int rc = kid && strlen(kid) == 16 ? public_key_of(c, keys, kid, pk) : -ENOENT;
    char kid_s[17] = "";
    if (kid)
        snprintf(kid_s, sizeof(kid_s), "%s", kid);
    json_decref(fj);
    if (rc == -EIO)
        return -EIO;
    if (rc < 0 || tc_paseto_verify(token, pk, "", 0, &msg, &mlen) < 0) {
        *ret = inactive();
        return 0;
    }
    json_t *claims = json_loadb(msg, mlen, JSON_REJECT_DUPLICATES, NULL);
    const char *jti = json_string_value(json_object_get(claims, "jti"));
    const char *why = tc_token_check_claims(claims, tenant_id, audience, tc_wall_ms());
    bool active = false;
    if (!why) {
        const char *p[] = {jti, tenant_id};
        PGresult *r = tc_db_exec(c,
                                 "SELECT revoked_at IS NULL FROM credential_tokens"
                                 " WHERE id = $1::uuid AND tenant_id = $2",
                                 2, p);
        if (!r) {
            json_decref(claims);
            return -EIO;
        }
        if (PQntuples(r) != 1)
            why = "unknown";
        else if (strcmp(PQgetvalue(r, 0, 0), "t") != 0)
            why = "revoked";
        else
            active = true;
        PQclear(r);
    }
    /* Another tenant's token is not this tenant's business: nothing is recorded for it. */
    if (jti && tc_uuid_valid(jti) && (!why || strcmp(why, "another tenant") != 0)) {
        json_t *ev = json_pack("{s:s, s:s, s:O, s:s, s:s, s:b, s:s*, s:O}", "action",
                               "credential.token.introspect", "tenant_id", tenant_id, "actor",
                               actor, "token_id", jti, "kid", kid_s, "active", active, "reason",
                               why, "tool", json_object_get(claims, "tool") ?: json_null());
        int arc = ev ? tc_audit_append(c, keys, ev, NULL) : -ENOMEM;
        json_decref(ev);
        if (arc < 0) {
            json_decref(claims);
            return -EIO;
        }
    }
    if (!active) {
        json_decref(claims);
        *ret = inactive();
        return 0;
    }
    json_object_set_new(claims, "active", json_true());
    json_object_set_new(claims, "token_id", json_string(jti));
    json_object_set_new(claims, "kid", json_string(kid_s));
    *ret = claims;
    return 0;
}

int tc_token_revoke(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                    const char *token_id, const char *only_issuer, const json_t *actor,
                    json_t **ret_info)
{
    const char *p[] = {token_id, tenant_id};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r = tc_db_exec(c,
                             "SELECT coalesce(issuer_key_id::text, ''), revoked_at IS NOT NULL,"
                             " tool FROM credential_tokens WHERE id = $1::uuid AND tenant_id = $2"
                             " FOR UPDATE",
                             2, p);
    int rc = !r ? -EIO : PQntuples(r) != 1 ? -ENOENT : 0;
    if (rc == 0 && only_issuer && strcmp(PQgetvalue(r, 0, 0), only_issuer) != 0)
        rc = -EPERM;
    bool already = rc == 0 && strcmp(PQgetvalue(r, 0, 1), "t") == 0;
    char tool[65] = "";
    if (rc == 0)
        snprintf(tool, sizeof(tool), "%s", PQgetvalue(r, 0, 2));
    PQclear(r);
    r = NULL;
    if (rc == 0 && !already) {
        PGresult *u = tc_db_exec(c,
                                 "UPDATE credential_tokens SET revoked_at = now(),"
                                 " revoke_reason = 'revoked by request'"
                                 " WHERE id = $1::uuid AND tenant_id = $2",
                                 2, p);
        json_t *ev = json_pack("{s:s, s:s, s:O, s:s, s:s, s:s}", "action",
                               "credential.token.revoke", "tenant_id", tenant_id, "actor", actor,
                               "token_id", token_id, "tool", tool, "reason", "revoked by request");
        rc = u && ev && tc_audit_append_tx(c, keys, ev, NULL) == 0 ? 0 : -EIO;
        PQclear(u);
        json_decref(ev);
    }
    if (rc == 0)
        r = tc_db_exec(
            c, "SELECT " TC_SQL_ISO("revoked_at") " FROM credential_tokens WHERE id = $1::uuid", 1,
            p);
    if (rc == 0 && (!r || PQntuples(r) != 1))
        rc = -EIO;
    json_t *info =
        rc == 0 ? json_pack("{s:s, s:s}", "token_id", token_id, "revoked_at", PQgetvalue(r, 0, 0))
                : NULL;
    PQclear(r);
    bool ok = tc_db_command(c, rc == 0 ? "COMMIT" : "ROLLBACK");
    if (rc == 0 && (!ok || !info)) {
        json_decref(info);
        return -EIO;
    }
    if (rc == 0)
        *ret_info = info;
    return rc;
}

static json_t *key_json(const char *kid, const unsigned char pk[32], bool current,
                        const char *created_at)
{
    char hex[65];
    sodium_bin2hex(hex, sizeof(hex), pk, 32);
    _cleanup_free_ char *x = b64url(pk, 32);
    if (!x)
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:s*}", "kid", kid, "kty", "OKP", "crv",
                     "Ed25519", "x", x, "public_key_hex", hex, "version", "v4.public", "current",
                     current, "created_at", created_at);
}

int tc_token_keys_json(PGconn *c, const struct tc_keys *keys, json_t **ret)
{
    PGresult *r =
        tc_db_exec(c,
                   "SELECT key_id, encode(public_key, 'hex'), " TC_SQL_ISO(
                       "created_at") " FROM token_keys ORDER BY created_at DESC, key_id LIMIT 1000",
                   0, NULL);
    if (!r)
        return -EIO;
    json_t *list = json_array();
    const char *cur_created = NULL;
    for (int i = 0; i < PQntuples(r); i++)
        if (strcmp(PQgetvalue(r, i, 0), keys->token_key_id) == 0)
            cur_created = PQgetvalue(r, i, 2);
    json_array_append_new(list,
                          key_json(keys->token_key_id, keys->token_sign_pk, true, cur_created));
    for (int i = 0; i < PQntuples(r); i++) {
        unsigned char pk[32];
        size_t n = 0;
        if (strcmp(PQgetvalue(r, i, 0), keys->token_key_id) == 0 ||
            sodium_hex2bin(pk, 32, PQgetvalue(r, i, 1), 64, NULL, &n, NULL) != 0 || n != 32)
            continue;
        json_array_append_new(list, key_json(PQgetvalue(r, i, 0), pk, false, PQgetvalue(r, i, 2)));
    }
    PQclear(r);
    *ret = json_pack("{s:o}", "keys", list);
    return *ret ? 0 : -ENOMEM;
}
