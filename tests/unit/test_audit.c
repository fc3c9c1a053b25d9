/* audit/: the chain and checkpoint formats, verified offline from an export (the database
 * path, authentication codes included, is covered by the integration tests): old (v1) and
 * new (v2, digests) chains, exports that withhold other tenants' records, exports of a range
 * anchored at a checkpoint, and the tampering each must reveal. */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/receipt.h"
#include "core/keys.h"
#include "tap.h"

#define N 250

static unsigned char pk[32], sk[64];
static char *export_buf; /* the stream's backing memory, freed after each verify */

enum tamper {
    NONE,
    ALTER,        /* a record's content changed, its line's hash and digest left */
    ALTER_REHASH, /* changed, and its own line's digest and hash recomputed */
    ALTER_ALL,    /* changed, and every later hash recomputed (up to the end) */
    DROP,         /* a line removed */
    SWAP,         /* two records of the exporting tenant swap places */
    CUT_TAIL,     /* lines from the victim on removed (checkpoints kept) */
    RENUMBER,     /* a record's own seq changed */
    STUB_DIGEST,  /* a withheld line's digest changed */
};

struct gen {
    bool v2;       /* digest lines */
    bool withhold; /* records of tenants other than "a" are withheld */
    int start;     /* first exported seq (the export anchors at checkpoint start - 1) */
    bool final_cp; /* a checkpoint at N too (exports end at one) */
    enum tamper t;
    int victim;
};

static const char *tenant_of(int seq)
{
    static const char *const t[] = {"a", "b", "c"}; /* three tenants interleaved */
    return t[seq % 3];
}

static void hex(const unsigned char *b, size_t n, char *out)
{
    sodium_bin2hex(out, 2 * n + 1, b, n);
}

static void sign_cp(FILE *out, int seq, const unsigned char hash[32])
{
    char hh[65], msg[200], sh[129];
    unsigned char sig[64];
    hex(hash, 32, hh);
    snprintf(msg, sizeof(msg), "toolcage-audit-checkpoint-v1\n%d\n%s\n%s", seq, hh,
             "2026-11-22T00:00:01.000Z");
    crypto_sign_detached(sig, NULL, (unsigned char *)msg, strlen(msg), sk);
    hex(sig, 64, sh);
    fprintf(out,
            "{\"checkpoint\":{\"seq\":%d,\"hash\":\"%s\",\"ts\":\"%s\",\"key_id\":\"k\","
            "\"signature\":\"%s\"}}\n",
            seq, hh, "2026-11-22T00:00:01.000Z", sh);
}

static json_t *make_record(int seq, const unsigned char prev[32])
{
    char prev_hex[65];
    hex(prev, 32, prev_hex);
    return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s}", "seq", seq, "ts", "2026-11-22T00:00:00.000Z",
                     "prev_hash", prev_hex, "action", "execute", "tool", "python \xc3\xa9",
                     "tenant_id", tenant_of(seq));
}

/* digest (v2) and hash of a record after prev */
static void seal(const struct gen *g, const json_t *rec, const unsigned char prev[32],
                 unsigned char digest[32], unsigned char hash[32])
{
    size_t clen;
    char *canon = tc_audit_canonical(rec, &clen);
    if (g->v2) {
        tc_audit_digest(canon, clen, digest);
        tc_audit_link(prev, digest, hash);
    } else {
        tc_audit_chain_hash(prev, canon, clen, hash);
    }
    free(canon);
}

/* One export of records 1..N under g, written to a memory stream. */
static FILE *make_export(const struct gen *g)
{
    char *buf = NULL, *cbuf = NULL;
    size_t len = 0, clen = 0;
    FILE *recs = open_memstream(&buf, &len), *cps = open_memstream(&cbuf, &clen);
    unsigned char prev[32] = {0}, fprev[32] = {0}; /* true chain; the forger's chain */
    int start = g->start ? g->start : 1, end = N;
    char *lines[N + 1] = {0};
    for (int seq = 1; seq <= N; seq++) {
        unsigned char digest[32], hash[32];
        json_t *rec = make_record(seq, prev);
        seal(g, rec, prev, digest, hash);
        bool cp_here = seq % 100 == 0 || (g->final_cp && seq == N);
        if (cp_here && seq >= start - 1 && seq <= end)
            sign_cp(cps, seq, hash);
        memcpy(prev, hash, 32);

        /* what the line says */
        bool victim = seq == g->victim;
        bool shown = !g->withhold || strcmp(tenant_of(seq), "a") == 0;
        unsigned char ldigest[32], lhash[32];
        memcpy(ldigest, digest, 32);
        memcpy(lhash, hash, 32);
        if (g->t == ALTER_ALL && seq >= g->victim) {
            /* the forger re-links everything from the victim on, from his own chain */
            json_t *frec = make_record(seq, fprev);
            if (victim)
                json_object_set_new(frec, "tool", json_string("evil"));
            seal(g, frec, fprev, ldigest, lhash);
            json_decref(rec);
            rec = frec;
        } else if (victim && (g->t == ALTER || g->t == ALTER_REHASH)) {
            json_object_set_new(rec, "tool", json_string("evil"));
            if (g->t == ALTER_REHASH)
                seal(g, rec, fprev, ldigest, lhash); /* fprev: the previous hash */
        }
        if (victim && g->t == RENUMBER)
            json_object_set_new(rec, "seq", json_integer(seq + 1));
        if (victim && g->t == STUB_DIGEST)
            ldigest[0] ^= 1;
        memcpy(fprev, g->t == ALTER_ALL && seq >= g->victim ? lhash : hash, 32);

        char hh[65], dh[65];
        hex(lhash, 32, hh);
        hex(ldigest, 32, dh);
        char *s = json_dumps(rec, JSON_COMPACT), *line = NULL;
        size_t ll = 0;
        FILE *lf = open_memstream(&line, &ll);
        fprintf(lf, "{\"seq\":%d,\"hash\":\"%s\"", seq, hh);
        if (g->v2)
            fprintf(lf, ",\"digest\":\"%s\"", dh);
        if (shown)
            fprintf(lf, ",\"record\":%s}\n", s);
        else
            fprintf(lf, ",\"withheld\":true}\n");
        fclose(lf);
        free(s);
        json_decref(rec);
        bool skip =
            seq < start || (g->t == DROP && victim) || (g->t == CUT_TAIL && seq >= g->victim);
        if (!skip)
            lines[seq] = line;
        else
            free(line);
    }
    if (g->t == SWAP) { /* the victim and the next record of tenant a trade places */
        char *t = lines[g->victim];
        lines[g->victim] = lines[g->victim + 3];
        lines[g->victim + 3] = t;
    }
    for (int seq = 1; seq <= N; seq++)
        if (lines[seq]) {
            fputs(lines[seq], recs);
            free(lines[seq]);
        }
    fclose(recs);
    fclose(cps);
    char *all = NULL;
    size_t alen = 0;
    FILE *out = open_memstream(&all, &alen);
    fwrite(cbuf, 1, clen, out);
    fwrite(buf, 1, len, out);
    fclose(out);
    free(buf);
    free(cbuf);
    export_buf = all;
    return fmemopen(all, alen, "r");
}

static struct tc_audit_verdict verify_g(const struct gen *g, const unsigned char *key)
{
    struct tc_audit_verdict v;
    memset(&v, 0, sizeof(v));
    FILE *f = make_export(g);
    CHECK(tc_audit_verify_file(f, key, &v) == 0);
    fclose(f);
    free(export_buf);
    export_buf = NULL;
    return v;
}

/* v1, everything shown, ending on a checkpoint, with one tampering */
static struct tc_audit_verdict verify(enum tamper t, int victim, const unsigned char *key)
{
    struct gen g = {.final_cp = true, .t = t, .victim = victim};
    return verify_g(&g, key);
}

TEST(intact_chain_verifies_with_checkpoints)
{
    struct tc_audit_verdict v = verify(NONE, 0, pk);
    CHECK(v.ok);
    CHECK(v.checked == N);
    CHECK(v.checkpoint_seq == N);
}

TEST(altered_record_is_named)
{
    struct tc_audit_verdict v = verify(ALTER, 137, pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 137);
    CHECK(strstr(v.reason, "altered") != NULL);
}

TEST(deleted_record_is_named)
{
    struct tc_audit_verdict v = verify(DROP, 42, pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 42);
}

TEST(renumbered_record_is_named)
{
    struct tc_audit_verdict v = verify(RENUMBER, 7, pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 7);
}

TEST(cut_tail_before_a_checkpoint_is_detected)
{
    struct tc_audit_verdict v = verify(CUT_TAIL, 150, pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 150);
    CHECK(strstr(v.reason, "tail") != NULL);
}

TEST(records_after_the_last_checkpoint_are_not_vouched_for)
{
    /* Lines appended after the newest signed checkpoint could be anyone's. */
    struct gen g = {.final_cp = false};
    struct tc_audit_verdict v = verify_g(&g, pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 201);
    CHECK(strstr(v.reason, "not covered") != NULL);
    g.v2 = true;
    v = verify_g(&g, pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 201);
}

TEST(checkpoint_under_another_key_fails)
{
    unsigned char other_pk[32], other_sk[64];
    crypto_sign_keypair(other_pk, other_sk);
    struct tc_audit_verdict v = verify(NONE, 0, other_pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 100);
    CHECK(strstr(v.reason, "signature") != NULL);
}

TEST(v2_chain_verifies_and_detects_tampering)
{
    struct gen g = {.v2 = true, .final_cp = true};
    struct tc_audit_verdict v = verify_g(&g, pk);
    CHECK(v.ok);
    CHECK(v.checked == N && v.withheld == 0);
    g.t = ALTER, g.victim = 61;
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == 61 && strstr(v.reason, "digest") != NULL);
    g.t = ALTER_REHASH;
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == 62); /* the next record no longer links */
    g.t = ALTER_ALL;
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == 100 && strstr(v.reason, "checkpoint") != NULL);
}

/* A tenant's export with the other two tenants' records withheld (seq, hash, digest only):
 * it verifies, and a change, removal or reordering of the tenant's own records is found. */
TEST(withheld_records_chain_and_own_tampering_is_found)
{
    struct gen g = {.v2 = true, .withhold = true, .final_cp = true};
    struct tc_audit_verdict v = verify_g(&g, pk);
    CHECK(v.ok);
    CHECK(v.checked == N);
    CHECK(v.withheld == N - N / 3); /* tenant a has every third record */

    int own = 99; /* 99 % 3 == 0: tenant a, followed by withheld records */
    CHECK(strcmp(tenant_of(own), "a") == 0);
    g.victim = own;
    g.t = ALTER;
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == own);
    g.t = ALTER_REHASH; /* the next, withheld, record's link gives it away */
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == own + 1);
    g.t = ALTER_ALL; /* everything re-linked: the signed checkpoint gives it away */
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == 100);
    g.t = DROP;
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == own);
    g.t = SWAP;
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == own);
    g.t = STUB_DIGEST, g.victim = own + 1; /* another tenant's record, changed */
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == own + 1);
}

TEST(a_range_export_anchors_at_a_checkpoint)
{
    struct gen g = {.v2 = true, .withhold = true, .final_cp = true, .start = 101};
    struct tc_audit_verdict v = verify_g(&g, pk);
    CHECK(v.ok);
    CHECK(v.checked == N - 100);
    /* without the checkpoint before it, the range does not chain to anything signed */
    g.start = 102;
    v = verify_g(&g, pk);
    CHECK(!v.ok && v.first_bad_seq == 1 && strstr(v.reason, "missing") != NULL);
    /* and the anchor must verify under the trusted key */
    unsigned char other_pk[32], other_sk[64];
    crypto_sign_keypair(other_pk, other_sk);
    g.start = 101;
    v = verify_g(&g, other_pk);
    CHECK(!v.ok);
}

TEST(a_malformed_withheld_line_is_refused)
{
    const char *text = "{\"seq\":1,\"hash\":\"00\",\"digest\":\"00\",\"withheld\":true}\n";
    struct tc_audit_verdict v;
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    CHECK(tc_audit_verify_file(f, pk, &v) == 0);
    fclose(f);
    CHECK(!v.ok && v.first_bad_seq == 1 && strstr(v.reason, "parsed") != NULL);
}

TEST(garbage_is_not_an_export)
{
    struct tc_audit_verdict v;
    FILE *f = fmemopen((void *)"not json\n", 9, "r");
    CHECK(tc_audit_verify_file(f, pk, &v) == -EINVAL);
    fclose(f);
}

TEST(canonical_form_is_sorted_ascii)
{
    json_t *o = json_pack("{s:s, s:i, s:s}", "b", "\xc3\xa9", "a", 1, "c", "x\ny");
    size_t n;
    char *c = tc_audit_canonical(o, &n);
    CHECK(strcmp(c, "{\"a\":1,\"b\":\"\\u00E9\",\"c\":\"x\\ny\"}") == 0);
    CHECK(n == strlen(c));
    free(c);
    json_decref(o);
}

TEST(mac_binds_key_seq_and_hash)
{
    unsigned char k1[32], k2[32], h[32], m1[32], m2[32];
    randombytes_buf(k1, 32);
    randombytes_buf(k2, 32);
    randombytes_buf(h, 32);
    tc_audit_mac(k1, 7, h, m1);
    tc_audit_mac(k1, 7, h, m2);
    CHECK(memcmp(m1, m2, 32) == 0);
    tc_audit_mac(k2, 7, h, m2);
    CHECK(memcmp(m1, m2, 32) != 0);
    tc_audit_mac(k1, 8, h, m2);
    CHECK(memcmp(m1, m2, 32) != 0);
    h[0] ^= 1;
    tc_audit_mac(k1, 7, h, m2);
    CHECK(memcmp(m1, m2, 32) != 0);
}

TEST(value_hash_is_per_tenant)
{
    unsigned char key[32];
    randombytes_buf(key, 32);
    char a[65], a2[65], b[65];
    tc_audit_value_hash_with(key, "tenant-a", "s3cret-value", 12, a);
    tc_audit_value_hash_with(key, "tenant-a", "s3cret-value", 12, a2);
    tc_audit_value_hash_with(key, "tenant-b", "s3cret-value", 12, b);
    CHECK(strcmp(a, a2) == 0);
    CHECK(strcmp(a, b) != 0); /* tenant a's hash of a guess says nothing about b's records */
    CHECK(strlen(a) == 64);
}

/* Receipts: signed over the context and the canonical statement; any changed value, another
 * key, a dropped or extra member fails; the file's layout does not matter. */
TEST(receipt_binds_its_statement_and_key)
{
    struct tc_keys keys;
    memset(&keys, 0, sizeof(keys));
    memcpy(keys.audit_sign_pk, pk, 32);
    memcpy(keys.audit_sign_sk, sk, 64);
    snprintf(keys.audit_key_id, sizeof(keys.audit_key_id), "0011223344556677");
    json_t *doc = tc_receipt_sign(
        &keys, json_pack("{s:s, s:s, s:{s:s}, s:[{s:i}]}", "format", TC_RECEIPT_FORMAT, "status",
                         "completed", "output", "stdout_sha256", "ab", "audit", "seq", 7));
    CHECK(doc != NULL);
    const char *why = NULL;
    CHECK(tc_receipt_verify(doc, pk, &why) == 0);
    /* another layout of the same values */
    char *text = json_dumps(doc, JSON_INDENT(3));
    json_t *again = json_loads(text, 0, NULL);
    free(text);
    CHECK(tc_receipt_verify(again, pk, &why) == 0);
    json_decref(again);
    /* a changed value, an added member, a removed one */
    json_t *st = json_object_get(doc, "statement");
    json_object_set_new(st, "status", json_string("failed"));
    CHECK(tc_receipt_verify(doc, pk, &why) == -EINVAL && strstr(why, "changed"));
    json_object_set_new(st, "status", json_string("completed"));
    CHECK(tc_receipt_verify(doc, pk, &why) == 0);
    json_object_set_new(st, "extra", json_true());
    CHECK(tc_receipt_verify(doc, pk, &why) == -EINVAL);
    json_object_del(st, "extra");
    json_array_clear(json_object_get(st, "audit"));
    CHECK(tc_receipt_verify(doc, pk, &why) == -EINVAL);
    json_decref(doc);
    /* another key; the same statement signed without the receipt context (a checkpoint-style
     * signature of the audit key) */
    unsigned char opk[32], osk[64];
    crypto_sign_keypair(opk, osk);
    doc = tc_receipt_sign(&keys, json_pack("{s:s}", "format", TC_RECEIPT_FORMAT));
    CHECK(tc_receipt_verify(doc, opk, &why) == -EINVAL && strstr(why, "another key"));
    size_t len = 0;
    char *canon = tc_audit_canonical(json_object_get(doc, "statement"), &len);
    unsigned char sig[64];
    crypto_sign_detached(sig, NULL, (const unsigned char *)canon, len, sk);
    free(canon);
    char b64[sodium_base64_ENCODED_LEN(64, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof(b64), sig, 64, sodium_base64_VARIANT_ORIGINAL);
    json_object_set_new(json_object_get(doc, "signature"), "value", json_string(b64));
    CHECK(tc_receipt_verify(doc, pk, &why) == -EINVAL);
    json_decref(doc);
    /* not a receipt at all */
    json_t *junk = json_pack("{s:s}", "statement", "x");
    CHECK(tc_receipt_verify(junk, pk, &why) == -EINVAL);
    json_decref(junk);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    crypto_sign_keypair(pk, sk);
    RUN(intact_chain_verifies_with_checkpoints);
    RUN(altered_record_is_named);
    RUN(deleted_record_is_named);
    RUN(renumbered_record_is_named);
    RUN(cut_tail_before_a_checkpoint_is_detected);
    RUN(records_after_the_last_checkpoint_are_not_vouched_for);
    RUN(checkpoint_under_another_key_fails);
    RUN(v2_chain_verifies_and_detects_tampering);
    RUN(withheld_records_chain_and_own_tampering_is_found);
    RUN(a_range_export_anchors_at_a_checkpoint);
    RUN(a_malformed_withheld_line_is_refused);
    RUN(garbage_is_not_an_export);
    RUN(canonical_form_is_sorted_ascii);
    RUN(mac_binds_key_seq_and_hash);
    RUN(value_hash_is_per_tenant);
    RUN(receipt_binds_its_statement_and_key);
    return TAP_DONE();
}
