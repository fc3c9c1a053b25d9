#include "audit/receipt.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "core/keys.h"

/* The signed message: the context, a NUL, the canonical statement. */
static unsigned char *message(const json_t *statement, size_t *ret_len)
{
    size_t clen = 0;
    char *canon = tc_audit_canonical(statement, &clen);
    size_t ctx = sizeof(TC_RECEIPT_CONTEXT); /* with its NUL */
    unsigned char *m = canon ? malloc(ctx + clen) : NULL;
    if (m) {
        memcpy(m, TC_RECEIPT_CONTEXT, ctx);
        memcpy(m + ctx, canon, clen);
        *ret_len = ctx + clen;
    }
    free(canon);
    return m;
}

json_t *tc_receipt_sign(const struct tc_keys *keys, json_t *statement)
{
    size_t len = 0;
    unsigned char *m = statement ? message(statement, &len) : NULL;
    if (!m) {
        json_decref(statement);
        return NULL;
    }
    unsigned char sig[crypto_sign_BYTES];
    crypto_sign_detached(sig, NULL, m, len, keys->audit_sign_sk);
    free(m);
    char pk[65], b64[sodium_base64_ENCODED_LEN(crypto_sign_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2hex(pk, sizeof(pk), keys->audit_sign_pk, 32);
    sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig), sodium_base64_VARIANT_ORIGINAL);
    return json_pack("{s:o, s:{s:s, s:s, s:s, s:s}}", "statement", statement, "signature", "alg",
                     "Ed25519", "key_id", keys->audit_key_id, "public_key", pk, "value", b64);
}

static int fail(const char **ret_why, const char *why)
{
    *ret_why = why;
    return -EINVAL;
}

int tc_receipt_verify(const json_t *doc, const unsigned char pk[32], const char **ret_why)
{
    const json_t *st = json_object_get(doc, "statement"), *sg = json_object_get(doc, "signature");
    if (!json_is_object(doc) || json_object_size(doc) != 2 || !json_is_object(st) ||
        !json_is_object(sg))
        return fail(ret_why, "not a receipt: an object of a statement and a signature");
    const char *fmt = json_string_value(json_object_get(st, "format"));
    if (!fmt || strcmp(fmt, TC_RECEIPT_FORMAT) != 0)
        return fail(ret_why, "not a receipt of format " TC_RECEIPT_FORMAT);
    const char *alg = json_string_value(json_object_get(sg, "alg"));
    if (!alg || strcmp(alg, "Ed25519") != 0)
        return fail(ret_why, "the signature is not Ed25519");
    /* the key the file names must be the one the verifier trusts (it is only a hint) */
    const char *pkh = json_string_value(json_object_get(sg, "public_key"));
    unsigned char named[32];
    size_t nlen = 0;
    if (!pkh || sodium_hex2bin(named, sizeof(named), pkh, strlen(pkh), NULL, &nlen, NULL) != 0 ||
        nlen != 32 || sodium_memcmp(named, pk, 32) != 0)
        return fail(ret_why, "signed with another key than the one given");
    const char *v = json_string_value(json_object_get(sg, "value"));
    unsigned char sig[crypto_sign_BYTES];
    size_t slen = 0;
    if (!v ||
        sodium_base642bin(sig, sizeof(sig), v, strlen(v), NULL, &slen, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        slen != sizeof(sig))
        return fail(ret_why, "the signature is not 64 bytes of base64");
    size_t len = 0;
    unsigned char *m = message(st, &len);
    if (!m)
        return fail(ret_why, "out of memory");
    int bad = crypto_sign_verify_detached(sig, m, len, pk);
    free(m);
    if (bad)
        return fail(ret_why, "the signature does not match the statement (it was changed)");
    return 0;
}
