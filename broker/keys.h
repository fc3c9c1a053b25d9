/* The master key and the keys derived from it.
 *
 * One 32-byte master key lives in a file of mode 0600 (TOOLCAGE_MASTER_KEY_FILE). Every
 * other key is derived from it with libsodium's crypto_kdf, each under its own id, so
 * there is one secret to protect and rotate. Key material lives in sodium_malloc'ed,
 * locked memory and is wiped on free. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct tc_keys {
    unsigned char master[32];
    char master_id[17];            /* hex of the first 8 bytes of BLAKE2b(master): names the key */
    unsigned char audit_sign_pk[32];
    unsigned char audit_sign_sk[64];
    char audit_key_id[17];         /* hex of the first 8 bytes of BLAKE2b(audit_sign_pk) */
    unsigned char audit_value_key[32]; /* keyed hash of secret values in audit records */
    unsigned char webhook_key[32];     /* per-tenant webhook signing secrets derive from it */
};

/* Load the key file. Refuses a file that group or others can read (-EPERM), or that is not
 * exactly 32 bytes (-EINVAL); *ret_error then says why in one line. */
int tc_keys_load(const char *path, struct tc_keys **ret_keys, char **ret_error);
/* Create a new key file (O_EXCL, mode 0600) with 32 random bytes. */
int tc_keys_create_file(const char *path);
void tc_keys_free(struct tc_keys *k); /* NULL is a no-op */
