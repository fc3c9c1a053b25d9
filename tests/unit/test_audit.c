/* audit/: the chain and checkpoint format, verified offline from an export
 * (the database path is covered by the integration tests). */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <string.h>

#include "audit/audit.h"
#include "tap.h"

#define N 250

static unsigned char pk[32], sk[64];
static char *export_buf; /* the stream's backing memory, freed after each verify */

/* Write an export of N records (+ a checkpoint every 100) to a memory stream, applying
 * `tamper` to record `victim` (0: none). */
enum tamper { NONE, ALTER, DROP, CUT_TAIL, REORDER_SEQ };

static FILE *make_export(enum tamper t, int victim)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *recs = open_memstream(&buf, &len);
    unsigned char prev[32] = {0}, hash[32];
    char cps[4][512];
    int ncps = 0;
    for (int seq = 1; seq <= N; seq++) {
        char prev_hex[65];
        sodium_bin2hex(prev_hex, sizeof(prev_hex), prev, 32);
        json_t *rec = json_pack("{s:i, s:s, s:s, s:s, s:s}", "seq", seq, "ts",
                                "2026-11-22T00:00:00.000Z", "prev_hash", prev_hex, "action",
                                "execute", "tool", "python \xc3\xa9");
        size_t clen;
        char *canon = tc_audit_canonical(rec, &clen);
        tc_audit_chain_hash(prev, canon, clen, hash);
        free(canon);
        if (seq % 100 == 0) {
            char hh[65], msg[200];
            unsigned char sig[64];
            char sh[129];
            sodium_bin2hex(hh, sizeof(hh), hash, 32);
            snprintf(msg, sizeof(msg), "toolcage-audit-checkpoint-v1\n%d\n%s\n%s", seq, hh,
                     "2026-11-22T00:00:01.000Z");
            crypto_sign_detached(sig, NULL, (unsigned char *)msg, strlen(msg), sk);
            sodium_bin2hex(sh, sizeof(sh), sig, 64);
            snprintf(cps[ncps++], sizeof(cps[0]),
                     "{\"checkpoint\":{\"seq\":%d,\"hash\":\"%s\",\"ts\":\"%s\",\"key_id\":\"k\","
                     "\"signature\":\"%s\"}}\n",
                     seq, hh, "2026-11-22T00:00:01.000Z", sh);
        }
        if (t == ALTER && seq == victim)
            json_object_set_new(rec, "tool", json_string("evil"));
        if (t == REORDER_SEQ && seq == victim)
            json_object_set_new(rec, "seq", json_integer(seq + 1));
        bool skip = (t == DROP && seq == victim) || (t == CUT_TAIL && seq >= victim);
        if (!skip) {
            char hh[65];
            char *s = json_dumps(rec, JSON_COMPACT);
            sodium_bin2hex(hh, sizeof(hh), hash, 32);
            fprintf(recs, "{\"seq\":%d,\"hash\":\"%s\",\"record\":%s}\n", seq, hh, s);
            free(s);
        }
        json_decref(rec);
        memcpy(prev, hash, 32);
    }
    fclose(recs);
    char *all = NULL;
    size_t alen = 0;
    FILE *out = open_memstream(&all, &alen);
    for (int i = 0; i < ncps; i++)
        fputs(cps[i], out);
    fwrite(buf, 1, len, out);
    fclose(out);
    free(buf);
    export_buf = all;
    return fmemopen(all, alen, "r");
}

static struct tc_audit_verdict verify(enum tamper t, int victim, const unsigned char *key)
{
    struct tc_audit_verdict v;
    memset(&v, 0, sizeof(v));
    FILE *f = make_export(t, victim);
    CHECK(tc_audit_verify_file(f, key, &v) == 0);
    fclose(f);
    free(export_buf);
    export_buf = NULL;
    return v;
}

TEST(intact_chain_verifies_with_checkpoints)
{
    struct tc_audit_verdict v = verify(NONE, 0, pk);
    CHECK(v.ok);
    CHECK(v.checked == N);
    CHECK(v.checkpoint_seq == 200);
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
    struct tc_audit_verdict v = verify(REORDER_SEQ, 7, pk);
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

TEST(checkpoint_under_another_key_fails)
{
    unsigned char other_pk[32], other_sk[64];
    crypto_sign_keypair(other_pk, other_sk);
    struct tc_audit_verdict v = verify(NONE, 0, other_pk);
    CHECK(!v.ok);
    CHECK(v.first_bad_seq == 100);
    CHECK(strstr(v.reason, "signature") != NULL);
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
    RUN(checkpoint_under_another_key_fails);
    RUN(garbage_is_not_an_export);
    RUN(canonical_form_is_sorted_ascii);
    return TAP_DONE();
}
