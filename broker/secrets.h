/* Sealed secrets: a tenant's named values, stored only as XChaCha20-Poly1305 ciphertexts.
 *
 * The sealing key derives from the master key (core/keys.h); the associated data is
 * "toolcage-secret-v1\0" tenant_id "\0" name, so a ciphertext moved to another row (or
 * tenant) does not open. Every row names the master key that sealed it (key_id), so that
 * `toolcage secrets rotate-master` can re-seal row by row while servers that hold both keys
 * keep serving. Values are write-only through the API: nothing here returns one except
 * tc_secret_open*, whose output lives in sodium_malloc'ed memory. Low layer: returns
 * 0 or -errno, never logs. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tc_keys;

#define TC_SECRET_MIN_BYTES         4 /* shorter values could not be redacted reliably */
#define TC_SECRET_MAX_BYTES         (64 * 1024)
#define TC_SECRET_NONCE_BYTES       24
#define TC_SECRET_TAG_BYTES         16
#define TC_SECRET_MAX_TTL           86400
#define TC_SECRET_DEFAULT_TTL       3600
#define TC_SECRET_MAX_ALLOWED_TOOLS 64

/* [A-Za-z0-9_.-]{1,128}, not starting with '.' or '-' (the policy's rule for secret names). */
bool tc_secret_name_valid(const char *name);

/* Seal len bytes of value; ct receives len + TC_SECRET_TAG_BYTES bytes; a fresh random nonce
 * goes to nonce. */
void tc_secret_seal(const unsigned char key[32], const char *tenant_id, const char *name,
                    const void *value, size_t len, unsigned char nonce[TC_SECRET_NONCE_BYTES],
                    unsigned char *ct);
/* Open a ciphertext into out (ct_len - TC_SECRET_TAG_BYTES bytes). -EBADMSG when it does not
 * authenticate (altered, moved to another row, or another key). */
int tc_secret_open(const unsigned char key[32], const char *tenant_id, const char *name,
                   const unsigned char *ct, size_t ct_len,
                   const unsigned char nonce[TC_SECRET_NONCE_BYTES], unsigned char *out);

/* A value opened from the database: sodium_malloc'ed, NUL-terminated, wiped on free. */
struct tc_secret_value {
    char *data;
    size_t len;
};
void tc_secret_value_free(struct tc_secret_value *v); /* NULL or empty is a no-op */

/* Open a row as PostgreSQL returns it (bytea in hex text form). -ENOKEY when this process
 * does not hold the master key key_id; -EBADMSG when it does not authenticate. */
int tc_secret_open_row(const struct tc_keys *keys, const char *key_id, const char *tenant_id,
                       const char *name, const char *ct_bytea, const char *nonce_bytea,
                       struct tc_secret_value *ret);

/* Create or replace; audited ("secret.put", with the keyed hash of the value) in the same
 * transaction. allowed_tools: array of tool names or "*" (borrowed). *ret_meta is the
 * metadata object (see tc_secret_get). 0, or -EIO. */
int tc_secret_put(PGconn *c, const struct tc_keys *keys, const char *tenant_id, const char *name,
                  const char *value, size_t len, const char *description, json_t *allowed_tools,
                  int64_t max_ttl_seconds, const json_t *actor, bool *ret_created,
                  json_t **ret_meta);
/* Metadata only: {name, description, allowed_tools, max_ttl_seconds, key_id, created_at,
 * updated_at}. -ENOENT or -EIO. */
int tc_secret_get(PGconn *c, const char *tenant_id, const char *name, json_t **ret_meta);
int tc_secret_list(PGconn *c, const char *tenant_id, json_t **ret_list);
/* Deletes and revokes its open leases; audited ("secret.delete"). -ENOENT or -EIO. */
int tc_secret_delete(PGconn *c, const struct tc_keys *keys, const char *tenant_id, const char *name,
                     const json_t *actor);

/* Re-seal every row not yet under to's master key, one transaction per row (each audited as
 * "secret.reseal"). from opens (current and previous keys), to seals. Rows that cannot be
 * opened are counted in *ret_failed and left as they are. 0, or -EIO. */
int tc_secrets_reseal_all(PGconn *c, const struct tc_keys *from, const struct tc_keys *to,
                          size_t *ret_resealed, size_t *ret_failed);
