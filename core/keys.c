#include "core/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

#define KDF_CONTEXT "toolcage" /* exactly crypto_kdf_CONTEXTBYTES (8) */
enum {
    KDF_AUDIT_SIGN = 1,
    KDF_AUDIT_VALUE = 2,
    KDF_WEBHOOK = 3,
    KDF_TOKEN_SIGN = 4,
    KDF_SECRETS = 5,
    KDF_AUDIT_MAC = 6
};

static void key_id(const unsigned char *key, size_t len, char out[17])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), key, len, NULL, 0);
    sodium_bin2hex(out, 17, h, 8);
}

static char *key_error(const char *path, const char *why)
{
    size_t n = strlen(path) + strlen(why) + 32;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "TOOLCAGE_MASTER_KEY_FILE=%s: %s", path, why);
    return s;
}

int tc_keys_load(const char *path, struct tc_keys **ret_keys, char **ret_error)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0) {
        int r = -errno;
        *ret_error = key_error(path, strerror(-r));
        return r;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        *ret_error = key_error(path, "not a regular file");
        return -EINVAL;
    }
    if (st.st_mode & 077) {
        *ret_error = key_error(path, "is readable or writable by group or others; chmod 0600 it");
        return -EPERM;
    }
    struct tc_keys *k = sodium_malloc(sizeof(*k));
    if (!k)
        return -ENOMEM;
    ssize_t n = TC_RETRY(read(fd, k->master, sizeof(k->master)));
    unsigned char extra;
    if (n != (ssize_t)sizeof(k->master) || TC_RETRY(read(fd, &extra, 1)) != 0) {
        sodium_free(k);
        *ret_error = key_error(path, "must hold exactly 32 bytes");
        return -EINVAL;
    }
    key_id(k->master, sizeof(k->master), k->master_id);
    unsigned char seed[crypto_sign_SEEDBYTES];
    crypto_kdf_derive_from_key(seed, sizeof(seed), KDF_AUDIT_SIGN, KDF_CONTEXT, k->master);
    crypto_sign_seed_keypair(k->audit_sign_pk, k->audit_sign_sk, seed);
    sodium_memzero(seed, sizeof(seed));
    key_id(k->audit_sign_pk, sizeof(k->audit_sign_pk), k->audit_key_id);
    crypto_kdf_derive_from_key(k->audit_value_key, sizeof(k->audit_value_key), KDF_AUDIT_VALUE,
                               KDF_CONTEXT, k->master);
    crypto_kdf_derive_from_key(k->audit_mac_key, sizeof(k->audit_mac_key), KDF_AUDIT_MAC,
                               KDF_CONTEXT, k->master);
    crypto_kdf_derive_from_key(k->webhook_key, sizeof(k->webhook_key), KDF_WEBHOOK, KDF_CONTEXT,
                               k->master);
    crypto_kdf_derive_from_key(seed, sizeof(seed), KDF_TOKEN_SIGN, KDF_CONTEXT, k->master);
    crypto_sign_seed_keypair(k->token_sign_pk, k->token_sign_sk, seed);
    sodium_memzero(seed, sizeof(seed));
    key_id(k->token_sign_pk, sizeof(k->token_sign_pk), k->token_key_id);
    crypto_kdf_derive_from_key(k->secret_key, sizeof(k->secret_key), KDF_SECRETS, KDF_CONTEXT,
                               k->master);
    k->nprevious = 0;
    sodium_mprotect_readonly(k);
    *ret_keys = k;
    return 0;
}

int tc_keys_create_file(const char *path)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    unsigned char key[32];
    randombytes_buf(key, sizeof(key));
    int r = tc_write_all(fd, key, sizeof(key));
    sodium_memzero(key, sizeof(key));
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    return r;
}

void tc_keys_free(struct tc_keys *k)
{
    if (k)
        sodium_free(k); /* sodium_free wipes the memory */
}

int tc_keys_add_previous(struct tc_keys *k, const char *paths, char **ret_error)
{
    if (!paths || !*paths)
        return 0;
    _cleanup_free_ char *list = strdup(paths);
    if (!list)
        return -ENOMEM;
    int rc = 0;
    sodium_mprotect_readwrite(k);
    for (char *path = list, *next; path && rc == 0; path = next) {
        next = strchr(path, ',');
        if (next)
            *next++ = '\0';
        if (!*path)
            continue;
        struct tc_keys *old = NULL;
        rc = tc_keys_load(path, &old, ret_error);
        if (rc < 0)
            break;
        bool known = strcmp(old->master_id, k->master_id) == 0;
        for (size_t i = 0; i < k->nprevious; i++)
            known |= strcmp(old->master_id, k->previous[i].master_id) == 0;
        if (!known && k->nprevious >= TC_KEYS_MAX_PREVIOUS) {
            *ret_error = key_error(path, "too many previous master keys (at most 4)");
            rc = -E2BIG;
        } else if (!known) {
            struct tc_previous_key *p = &k->previous[k->nprevious++];
            memcpy(p->master_id, old->master_id, sizeof(p->master_id));
            memcpy(p->secret_key, old->secret_key, sizeof(p->secret_key));
            memcpy(p->audit_value_key, old->audit_value_key, sizeof(p->audit_value_key));
            memcpy(p->audit_mac_key, old->audit_mac_key, sizeof(p->audit_mac_key));
            memcpy(p->audit_sign_pk, old->audit_sign_pk, sizeof(p->audit_sign_pk));
        }
        tc_keys_free(old);
    }
    sodium_mprotect_readonly(k);
    return rc;
}

const unsigned char *tc_keys_secret_key(const struct tc_keys *k, const char *key_id)
{
    if (strcmp(key_id, k->master_id) == 0)
        return k->secret_key;
    for (size_t i = 0; i < k->nprevious; i++)
        if (strcmp(key_id, k->previous[i].master_id) == 0)
            return k->previous[i].secret_key;
    return NULL;
}

const unsigned char *tc_keys_audit_mac_key(const struct tc_keys *k, const char *key_id)
{
    if (strcmp(key_id, k->master_id) == 0)
        return k->audit_mac_key;
    for (size_t i = 0; i < k->nprevious; i++)
        if (strcmp(key_id, k->previous[i].master_id) == 0)
            return k->previous[i].audit_mac_key;
    return NULL;
}

bool tc_keys_audit_pk_held(const struct tc_keys *k, const unsigned char pk[32])
{
    if (sodium_memcmp(pk, k->audit_sign_pk, 32) == 0)
        return true;
    for (size_t i = 0; i < k->nprevious; i++)
        if (sodium_memcmp(pk, k->previous[i].audit_sign_pk, 32) == 0)
            return true;
    return false;
}
