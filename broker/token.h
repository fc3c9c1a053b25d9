/* Scoped tokens for downstream services: PASETO v4.public (Ed25519 over PAE, per the PASETO
 * specification), with the footer {"kid": "<key id>"} naming the signing key, and claims
 * iss "toolcage", sub (tenant id), aud, exp, iat, nbf (RFC 3339 UTC), jti (token id), scope,
 * tool and, for tokens granted to an execution, execution_id. The signing key derives from
 * the master key; every public key ever used is kept in token_keys and published at
 * GET /v1/credentials/keys, so tokens verify offline. Issued tokens are recorded (never the
 * token itself) so that introspection honours revocation. See docs/credentials.md. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

struct tc_keys;

#define TC_TOKEN_MAX_BYTES 8192
#define TC_TOKEN_MAX_TTL   3600 /* the policy's cap on ttl_seconds */

/* ---- PASETO v4.public (pure) ---- */

/* Pre-Authentication Encoding: LE64(n) || for each piece LE64(len) || piece. Writes to out
 * (may be NULL to measure) and returns the encoded length. */
size_t tc_paseto_pae(const void *const *pieces, const size_t *lens, size_t n, unsigned char *out);
/* "v4.public." b64url(m || sig) ["." b64url(f)]; sig = Ed25519(sk, PAE(h, m, f, i)).
 * Malloc'ed, NULL on ENOMEM. */
char *tc_paseto_sign(const unsigned char sk[64], const void *m, size_t mlen, const void *f,
                     size_t flen, const void *i, size_t ilen);
/* The footer, unverified (to choose the key). Malloc'ed, NUL-terminated; "" when none.
 * -EINVAL when the token is not shaped like v4.public. */
int tc_paseto_footer(const char *token, char **ret_footer, size_t *ret_len);
/* Verify and return the message (malloc'ed, NUL-terminated). -EINVAL (not a v4.public token),
 * -EBADMSG (signature does not verify under pk with this implicit assertion). */
int tc_paseto_verify(const char *token, const unsigned char pk[32], const void *i, size_t ilen,
                     char **ret_message, size_t *ret_len);

/* The claim checks of introspection, without the database: NULL when claims (a verified
 * message) are from iss "toolcage", for tenant_id, within [nbf, exp) at now_ms and, when
 * audience is non-NULL, for that audience; else why not ("expired", "audience", ...). */
const char *tc_token_check_claims(const json_t *claims, const char *tenant_id, const char *audience,
                                  int64_t now_ms);

/* ---- tokens (database) ---- */

struct tc_token_request {
    const char *tenant_id;
    const char *tool;
    const char *execution_id; /* NULL for tokens asked for through POST /v1/credentials */
    const char *audience;
    const char *scope;
    int64_t ttl_seconds;
    const char *issuer_key_id; /* API key that asked, or NULL (granted to an execution) */
};

/* Issue inside the caller's transaction; audited ("credential.token.issue"). *ret_token is
 * malloc'ed (the caller wipes and frees it); *ret_info is {token_id, kid, audience, scope,
 * tool, execution_id, issued_at, expires_at}. 0, or -EIO. */
int tc_token_issue_tx(PGconn *c, const struct tc_keys *keys, const struct tc_token_request *req,
                      const json_t *actor, char **ret_token, json_t **ret_info);
/* The same in a transaction of its own. */
int tc_token_issue(PGconn *c, const struct tc_keys *keys, const struct tc_token_request *req,
                   const json_t *actor, char **ret_token, json_t **ret_info);

/* RFC 7662-style answer for a token presented by tenant_id: {"active": false} unless the
 * signature verifies under a published key, iss is toolcage, sub is tenant_id, now is within
 * [nbf, exp), aud equals audience (when given) and the token is recorded and not revoked;
 * then {"active": true, "token_id", "kid", and every claim}. Audited when the signature
 * verifies ("credential.token.introspect"). 0 or -EIO. */
int tc_token_introspect(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                        const char *token, const char *audience, const json_t *actor, json_t **ret);

/* Revoke one token of tenant_id. only_issuer: when non-NULL, the token must have been issued
 * by that API key (-EPERM otherwise). Idempotent. *ret_info = {token_id, revoked_at}.
 * Audited ("credential.token.revoke"). -ENOENT, -EPERM or -EIO. */
int tc_token_revoke(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                    const char *token_id, const char *only_issuer, const json_t *actor,
                    json_t **ret_info);

/* Register the current public key in token_keys (idempotent). */
int tc_token_publish_key(PGconn *c, const struct tc_keys *keys);
/* {"keys": [{kid, kty "OKP", crv "Ed25519", x (base64url), public_key_hex, version
 * "v4.public", current, created_at}]}: the current key first, then every earlier one. */
int tc_token_keys_json(PGconn *c, const struct tc_keys *keys, json_t **ret);
