/* broker/: sealing (AD binding, tampering, wrong and previous keys), PASETO v4.public
 * (PAE and the specification's test vectors, verification failures, claim checks), and the
 * sandbox spec's secret_files. The database paths are covered by the integration tests. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/keys.h"
#include "broker/secrets.h"
#include "broker/token.h"
#include "common/util.h"
#include "sandbox/spec.h"
#include "tap.h"

static const char *T1 = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
static const char *T2 = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c";

static void hex(const char *h, unsigned char *out, size_t n)
{
    size_t got = 0;
    sodium_hex2bin(out, n, h, strlen(h), NULL, &got, NULL);
}

/* ---- sealing ---- */

TEST(seal_open_roundtrip)
{
    unsigned char key[32], nonce[24], ct[64 + 16], out[64];
    randombytes_buf(key, sizeof(key));
    const char *v = "s3cr3t-value-0123456789";
    size_t n = strlen(v);
    tc_secret_seal(key, T1, "npm-token", v, n, nonce, ct);
    CHECK(memcmp(ct, v, n) != 0);
    CHECK(tc_secret_open(key, T1, "npm-token", ct, n + 16, nonce, out) == 0);
    CHECK(memcmp(out, v, n) == 0);
}

TEST(seal_binds_tenant_and_name)
{
    unsigned char key[32], nonce[24], ct[32 + 16], out[32];
    randombytes_buf(key, sizeof(key));
    tc_secret_seal(key, T1, "a", "value-of-a", 10, nonce, ct);
    CHECK(tc_secret_open(key, T1, "b", ct, 26, nonce, out) == -EBADMSG); /* other row */
    CHECK(tc_secret_open(key, T2, "a", ct, 26, nonce, out) == -EBADMSG); /* other tenant */
    /* "\0" separates the parts: (tenant "x", name "ya") is not (tenant "xy", name "a") */
    tc_secret_seal(key, "x", "ya", "value", 5, nonce, ct);
    CHECK(tc_secret_open(key, "xy", "a", ct, 21, nonce, out) == -EBADMSG);
    CHECK(tc_secret_open(key, "x", "ya", ct, 21, nonce, out) == 0);
}

TEST(seal_refuses_tampering_and_wrong_key)
{
    unsigned char key[32], other[32], nonce[24], ct[32 + 16], out[32];
    randombytes_buf(key, sizeof(key));
    randombytes_buf(other, sizeof(other));
    tc_secret_seal(key, T1, "a", "value-of-a", 10, nonce, ct);
    for (size_t i = 0; i < 26; i++) {
        ct[i] ^= 0x01;
        CHECK(tc_secret_open(key, T1, "a", ct, 26, nonce, out) == -EBADMSG);
        ct[i] ^= 0x01;
    }
    nonce[3] ^= 0x80;
    CHECK(tc_secret_open(key, T1, "a", ct, 26, nonce, out) == -EBADMSG);
    nonce[3] ^= 0x80;
    CHECK(tc_secret_open(key, T1, "a", ct, 25, nonce, out) == -EBADMSG); /* truncated */
    CHECK(tc_secret_open(key, T1, "a", ct, 8, nonce, out) == -EBADMSG);
    CHECK(tc_secret_open(other, T1, "a", ct, 26, nonce, out) == -EBADMSG);
    CHECK(tc_secret_open(key, T1, "a", ct, 26, nonce, out) == 0);
}

TEST(secret_names)
{
    CHECK(tc_secret_name_valid("npm-token"));
    CHECK(tc_secret_name_valid("ca.pem"));
    CHECK(tc_secret_name_valid("A_b.9-x"));
    CHECK(!tc_secret_name_valid(""));
    CHECK(!tc_secret_name_valid(".hidden"));
    CHECK(!tc_secret_name_valid("-x"));
    CHECK(!tc_secret_name_valid("a/b"));
    CHECK(!tc_secret_name_valid("a b"));
    char longname[130];
    memset(longname, 'a', 129);
    longname[129] = '\0';
    CHECK(!tc_secret_name_valid(longname));
    longname[128] = '\0';
    CHECK(tc_secret_name_valid(longname));
}

static char tmpdir[64];

static void write_key(const char *name, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmpdir, name);
    unlink(path);
    CHECK(tc_keys_create_file(path) == 0);
}

static char *bytea(const unsigned char *b, size_t n)
{
    char *s = malloc(2 * n + 3);
    s[0] = '\\';
    s[1] = 'x';
    sodium_bin2hex(s + 2, 2 * n + 1, b, n);
    return s;
}

TEST(keys_previous_open_old_rows)
{
    char old_path[128], new_path[128], list[400];
    write_key("old.key", old_path, sizeof(old_path));
    write_key("new.key", new_path, sizeof(new_path));
    struct tc_keys *old = NULL, *cur = NULL;
    char *err = NULL;
    CHECK(tc_keys_load(old_path, &old, &err) == 0);
    CHECK(tc_keys_load(new_path, &cur, &err) == 0);
    if (!old || !cur)
        return;
    CHECK(strcmp(old->master_id, cur->master_id) != 0);
    CHECK(strcmp(old->token_key_id, cur->token_key_id) != 0);
    CHECK(memcmp(old->secret_key, old->master, 32) != 0); /* derived, not the master itself */
    CHECK(memcmp(old->secret_key, old->audit_value_key, 32) != 0);

    /* a row sealed under the old key */
    unsigned char nonce[24], ct[11 + 16];
    tc_secret_seal(old->secret_key, T1, "db-pass", "hunter2-xyz", 11, nonce, ct);
    char *ct_s = bytea(ct, sizeof(ct)), *nonce_s = bytea(nonce, sizeof(nonce));
    struct tc_secret_value v = {0};
    CHECK(tc_secret_open_row(cur, old->master_id, T1, "db-pass", ct_s, nonce_s, &v) == -ENOKEY);
    snprintf(list, sizeof(list), "%s,%s,%s", old_path, new_path, old_path); /* dups skipped */
    CHECK(tc_keys_add_previous(cur, list, &err) == 0);
    CHECK(cur->nprevious == 1);
    CHECK(tc_keys_secret_key(cur, old->master_id) != NULL);
    CHECK(tc_keys_secret_key(cur, cur->master_id) == cur->secret_key);
    CHECK(tc_keys_secret_key(cur, "0000000000000000") == NULL);
    CHECK(tc_secret_open_row(cur, old->master_id, T1, "db-pass", ct_s, nonce_s, &v) == 0);
    CHECK(v.len == 11 && memcmp(v.data, "hunter2-xyz", 12) == 0);
    tc_secret_value_free(&v);
    /* the right key id but the wrong row */
    CHECK(tc_secret_open_row(cur, old->master_id, T1, "other", ct_s, nonce_s, &v) == -EBADMSG);
    CHECK(tc_secret_open_row(cur, old->master_id, T1, "db-pass", "\\x00", nonce_s, &v) == -EBADMSG);
    /* a file others can read is refused as a previous key too */
    chmod(old_path, 0644);
    free(err);
    err = NULL;
    struct tc_keys *k3 = NULL;
    CHECK(tc_keys_load(new_path, &k3, &err) == 0);
    CHECK(tc_keys_add_previous(k3, old_path, &err) == -EPERM);
    CHECK(err != NULL);
    free(err);
    tc_keys_free(k3);
    free(ct_s);
    free(nonce_s);
    tc_keys_free(old);
    tc_keys_free(cur);
    unlink(old_path);
    unlink(new_path);
}

/* ---- PASETO ---- */

TEST(pae_vectors)
{
    /* From the PASETO specification (Common.md, "PAE Definition"). */
    unsigned char out[64];
    size_t n = tc_paseto_pae(NULL, NULL, 0, out);
    CHECK(n == 8 && memcmp(out, "\x00\x00\x00\x00\x00\x00\x00\x00", 8) == 0);
    const void *one[] = {""};
    size_t one_len[] = {0};
    n = tc_paseto_pae(one, one_len, 1, out);
    CHECK(n == 16 && memcmp(out,
                            "\x01\x00\x00\x00\x00\x00\x00\x00"
                            "\x00\x00\x00\x00\x00\x00\x00\x00",
                            16) == 0);
    const void *test[] = {"test"};
    size_t test_len[] = {4};
    n = tc_paseto_pae(test, test_len, 1, out);
    CHECK(n == 20 && memcmp(out,
                            "\x01\x00\x00\x00\x00\x00\x00\x00"
                            "\x04\x00\x00\x00\x00\x00\x00\x00test",
                            20) == 0);
    CHECK(tc_paseto_pae(test, test_len, 1, NULL) == 20);
}

#define VEC_SEED   "b4cbfb43df4ce210727d953e4a713307fa19bb7d9f85041438d9e11b942a3774"
#define VEC_PK     "1eb9dbbbbc047c03fd70604e0071f0987e16b28b757225c11f00415d0e20b1a2"
#define VEC_MSG    "{\"data\":\"this is a signed message\",\"exp\":\"2022-01-01T00:00:00+00:00\"}"
#define VEC_FOOTER "{\"kid\":\"zVhMiPBP9fRf2snEcT7gFTioeA9COcNy9DfgL1W60haN\"}"

static const struct {
    const char *name, *footer, *ia, *token;
} vectors[] = {
    {"4-S-1", "", "",
     "v4.public."
     "eyJkYXRhIjoidGhpcyBpcyBhIHNpZ25lZCBtZXNzYWdlIiwiZXhwIjoiMjAyMi0wMS0wMVQwMDowMDowMCswMDowMCJ9b"
     "g_XBBzds8lTZShVlwwKSgeKpLT3yukTw6JUz3W4h_ExsQV-P0V54zemZDcAxFaSeef1QlXEFtkqxT1ciiQEDA"},
    {"4-S-2", VEC_FOOTER, "",
     "v4.public."
     "eyJkYXRhIjoidGhpcyBpcyBhIHNpZ25lZCBtZXNzYWdlIiwiZXhwIjoiMjAyMi0wMS0wMVQwMDowMDowMCswMDowMCJ9v"
     "3Jt8mx_TdM2ceTGoqwrh4yDFn0XsHvvV_D0DtwQxVrJEBMl0F2caAdgnpKlt4p7xBnx1HcO-SPo8FPp214HDw."
     "eyJraWQiOiJ6VmhNaVBCUDlmUmYyc25FY1Q3Z0ZUaW9lQTlDT2NOeTlEZmdMMVc2MGhhTiJ9"},
    {"4-S-3", VEC_FOOTER, "{\"test-vector\":\"4-S-3\"}",
     "v4.public."
     "eyJkYXRhIjoidGhpcyBpcyBhIHNpZ25lZCBtZXNzYWdlIiwiZXhwIjoiMjAyMi0wMS0wMVQwMDowMDowMCswMDowMCJ9N"
     "PWciuD3d0o5eXJXG5pJy-DiVEoyPYWs1YSTwWHNJq6DZD3je5gf-0M4JR9ipdUSJbIovzmBECeaWmaqcaP0DQ."
     "eyJraWQiOiJ6VmhNaVBCUDlmUmYyc25FY1Q3Z0ZUaW9lQTlDT2NOeTlEZmdMMVc2MGhhTiJ9"},
};

TEST(paseto_spec_vectors)
{
    unsigned char seed[32], pk[32], sk[64], want_pk[32];
    hex(VEC_SEED, seed, 32);
    hex(VEC_PK, want_pk, 32);
    crypto_sign_seed_keypair(pk, sk, seed);
    CHECK(memcmp(pk, want_pk, 32) == 0);
    for (size_t i = 0; i < TC_ARRAY_SIZE(vectors); i++) {
        const char *f = vectors[i].footer, *ia = vectors[i].ia;
        char *tok = tc_paseto_sign(sk, VEC_MSG, strlen(VEC_MSG), f, strlen(f), ia, strlen(ia));
        if (!tok || strcmp(tok, vectors[i].token) != 0)
            fprintf(stderr, "    %s: got %s\n", vectors[i].name, tok ? tok : "(null)");
        CHECK(tok && strcmp(tok, vectors[i].token) == 0); /* Ed25519 is deterministic */
        free(tok);
        char *m = NULL, *foot = NULL;
        size_t mlen = 0, flen = 0;
        CHECK(tc_paseto_verify(vectors[i].token, pk, ia, strlen(ia), &m, &mlen) == 0);
        CHECK(m && mlen == strlen(VEC_MSG) && strcmp(m, VEC_MSG) == 0);
        free(m);
        CHECK(tc_paseto_footer(vectors[i].token, &foot, &flen) == 0);
        CHECK(foot && flen == strlen(f) && strcmp(foot, f) == 0);
        free(foot);
    }
}

TEST(paseto_refuses)
{
    unsigned char seed[32], pk[32], sk[64], pk2[32], sk2[64];
    hex(VEC_SEED, seed, 32);
    crypto_sign_seed_keypair(pk, sk, seed);
    crypto_sign_keypair(pk2, sk2);
    const char *good = vectors[2].token, *ia = vectors[2].ia;
    char *m = NULL;
    size_t mlen;
    CHECK(tc_paseto_verify(good, pk2, ia, strlen(ia), &m, &mlen) == -EBADMSG); /* wrong key */
    CHECK(tc_paseto_verify(good, pk, "", 0, &m, &mlen) == -EBADMSG);           /* wrong i */
    CHECK(tc_paseto_verify(vectors[0].token, pk, ia, strlen(ia), &m, &mlen) == -EBADMSG);
    char *bad = strdup(good);
    /* every character of the body and the footer matters */
    for (size_t i = 10, n = strlen(bad); i < n; i += 7) {
        char saved = bad[i];
        if (saved == '.')
            continue;
        bad[i] = saved == 'A' ? 'B' : 'A';
        int r = tc_paseto_verify(bad, pk, ia, strlen(ia), &m, &mlen);
        CHECK(r == -EBADMSG || r == -EINVAL);
        bad[i] = saved;
    }
    /* the footer cannot be dropped or swapped */
    char *dot = strrchr(bad, '.');
    *dot = '\0';
    CHECK(tc_paseto_verify(bad, pk, ia, strlen(ia), &m, &mlen) == -EBADMSG);
    free(bad);
    CHECK(tc_paseto_verify("v4.local.AAAA", pk, "", 0, &m, &mlen) == -EINVAL);
    CHECK(tc_paseto_verify("v4.public.", pk, "", 0, &m, &mlen) == -EINVAL);
    CHECK(tc_paseto_verify("v4.public.AAAA", pk, "", 0, &m, &mlen) == -EINVAL); /* too short */
    CHECK(tc_paseto_verify("v4.public.a.b.c", pk, "", 0, &m, &mlen) == -EINVAL);
    CHECK(tc_paseto_verify("v4.public.a+b/", pk, "", 0, &m, &mlen) == -EINVAL); /* not url-safe */
}

static json_t *claims_at(int64_t now_ms, int64_t ttl_s)
{
    char iat[32], exp[32];
    tc_iso8601(now_ms, iat);
    tc_iso8601(now_ms + ttl_s * 1000, exp);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "iss", "toolcage", "sub", T1,
                     "aud", "https://api.example.com", "exp", exp, "iat", iat, "nbf", iat, "jti",
                     "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a00", "scope", "deploy:read", "tool",
                     "shell");
}

TEST(token_claims)
{
    int64_t now = tc_wall_ms() / 1000 * 1000;
    json_t *c = claims_at(now, 60);
    CHECK(tc_token_check_claims(c, T1, NULL, now) == NULL);
    CHECK(tc_token_check_claims(c, T1, "https://api.example.com", now + 59000) == NULL);
    const char *why = tc_token_check_claims(c, T1, "https://evil.example.com", now);
    CHECK(why && strcmp(why, "audience") == 0);
    why = tc_token_check_claims(c, T1, NULL, now + 60000);
    CHECK(why && strcmp(why, "expired") == 0);
    why = tc_token_check_claims(c, T1, NULL, now - 1000);
    CHECK(why && strcmp(why, "not yet valid") == 0);
    why = tc_token_check_claims(c, T2, NULL, now);
    CHECK(why && strcmp(why, "another tenant") == 0);
    json_object_set_new(c, "iss", json_string("someone-else"));
    why = tc_token_check_claims(c, T1, NULL, now);
    CHECK(why && strcmp(why, "issuer") == 0);
    json_object_set_new(c, "iss", json_string("toolcage"));
    json_object_set_new(c, "exp", json_string("tomorrow"));
    why = tc_token_check_claims(c, T1, NULL, now);
    CHECK(why && strcmp(why, "malformed claims") == 0);
    json_decref(c);
}

/* ---- sandbox spec ---- */

static int parse_with(json_t *secret_files)
{
    json_t *spec =
        json_pack("{s:s, s:s, s:[s], s:o, s:{s:i, s:i, s:I, s:i, s:i, s:i, s:i, s:i, s:i}}", "id",
                  "abc", "backend", "native", "argv", "/bin/true", "secret_files", secret_files,
                  "limits", "wall_ms", 1000, "cpu_ms", 1000, "memory_bytes", (json_int_t)(64 << 20),
                  "pids", 8, "file_size_bytes", 1 << 20, "nofile", 64, "output_bytes", 4096,
                  "workspace_bytes", 1 << 20, "tmp_bytes", 1 << 20);
    struct tc_spec s;
    char err[160];
    int r = tc_spec_parse(spec, &s, err, sizeof(err));
    if (r == 0)
        tc_spec_release(&s);
    json_decref(spec);
    return r;
}

TEST(spec_secret_files)
{
    CHECK(parse_with(json_pack("[{s:s, s:s}]", "name", "ca.pem", "content_b64", "aGVsbG8=")) == 0);
    CHECK(parse_with(json_array()) == 0);
    CHECK(parse_with(json_pack("[{s:s, s:s}]", "name", "../x", "content_b64", "")) == -EINVAL);
    CHECK(parse_with(json_pack("[{s:s, s:s}]", "name", "a/b", "content_b64", "")) == -EINVAL);
    CHECK(parse_with(json_pack("[{s:s, s:s}]", "name", "..", "content_b64", "")) == -EINVAL);
    CHECK(parse_with(json_pack("[{s:s, s:i}]", "name", "a", "content_b64", 1)) == -EINVAL);
    CHECK(parse_with(json_pack("[{s:s, s:s, s:i}]", "name", "a", "content_b64", "", "mode", 1)) ==
          -EINVAL);
    CHECK(parse_with(json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "a", "content_b64", "", "name",
                               "a", "content_b64", "")) == -EINVAL);
    CHECK(parse_with(json_string("x")) == -EINVAL);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tc-broker-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    RUN(seal_open_roundtrip);
    RUN(seal_binds_tenant_and_name);
    RUN(seal_refuses_tampering_and_wrong_key);
    RUN(secret_names);
    RUN(keys_previous_open_old_rows);
    RUN(pae_vectors);
    RUN(paseto_spec_vectors);
    RUN(paseto_refuses);
    RUN(token_claims);
    RUN(spec_secret_files);
    rmdir(tmpdir);
    return TAP_DONE();
}
