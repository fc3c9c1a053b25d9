/* The master key and the keys derived from it.
 *
 * One 32-byte master key lives in a file of mode 0600 (TOOLCAGE_MASTER_KEY_FILE). Every
 * other key is derived from it with libsodium's crypto_kdf, each under its own id, so
 * there is one secret to protect and rotate. Key material lives in sodium_malloc'ed,
 * locked memory and is wiped on free. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define TC_KEYS_MAX_PREVIOUS 4

struct tc_keys {
    unsigned char master[32];
    char master_id[17]; /* hex of the first 8 bytes of BLAKE2b(master): names the key */
    unsigned char audit_sign_pk[32];
    unsigned char audit_sign_sk[64];
    char audit_key_id[17]; /* hex of the first 8 bytes of BLAKE2b(audit_sign_pk) */
    unsigned char
        audit_value_key[32];         /* keyed hash of secret values in audit records (per tenant) */
    unsigned char audit_mac_key[32]; /* authentication codes of audit records (audit/audit.h) */
    unsigned char webhook_key[32];   /* per-tenant webhook signing secrets derive from it */
    unsigned char token_sign_pk[32]; /* scoped tokens (PASETO v4.public), see broker/token.h */
    unsigned char token_sign_sk[64];
    char token_key_id[17];        /* hex of the first 8 bytes of BLAKE2b(token_sign_pk) */
    unsigned char secret_key[32]; /* seals secrets at rest (broker/secrets.h) */
    /* Earlier master keys (TOOLCAGE_PREVIOUS_MASTER_KEY_FILES), kept only to open what they
     * sealed and to recognise what they hashed until `toolcage secrets rotate-master` ran. */
    size_t nprevious;
    struct tc_previous_key {
        char master_id[17];
        unsigned char secret_key[32];
        unsigned char audit_value_key[32];
        unsigned char audit_mac_key[32]; /* to check records written before the rotation */
        unsigned char audit_sign_pk[32]; /* to recognise checkpoints signed before it */
    } previous[TC_KEYS_MAX_PREVIOUS];
};

/* Load the key file. Refuses a file that group or others can read (-EPERM), or that is not
 * exactly 32 bytes (-EINVAL); *ret_error then says why in one line. */
int tc_keys_load(const char *path, struct tc_keys **ret_keys, char **ret_error);
/* Create a new key file (O_EXCL, mode 0600) with 32 random bytes. */
int tc_keys_create_file(const char *path);
void tc_keys_free(struct tc_keys *k); /* NULL is a no-op */
/* Add earlier master keys from a comma-separated list of key files (same checks as
 * tc_keys_load; empty or NULL is a no-op; the current key and duplicates are skipped).
 * -E2BIG past TC_KEYS_MAX_PREVIOUS; *ret_error then says which file and why. */
int tc_keys_add_previous(struct tc_keys *k, const char *paths, char **ret_error);
/* The secret-sealing key of the master key named key_id (current or previous); NULL if
 * this process does not hold it. */
const unsigned char *tc_keys_secret_key(const struct tc_keys *k, const char *key_id);
/* The audit authentication-code key of the master key named key_id (current or previous);
 * NULL if this process does not hold it. */
const unsigned char *tc_keys_audit_mac_key(const struct tc_keys *k, const char *key_id);
/* Is pk the checkpoint public key of the current or a previous master key held here? */
bool tc_keys_audit_pk_held(const struct tc_keys *k, const unsigned char pk[32]);
