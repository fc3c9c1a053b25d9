#include "audit/audit.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <string.h>

#include "core/keys.h"
#include "common/util.h"
#include "core/db.h"

char *tc_audit_canonical(const json_t *record, size_t *ret_len)
{
    char *s = json_dumps(record, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    if (s && ret_len)
        *ret_len = strlen(s);
    return s;
}

void tc_audit_chain_hash(const unsigned char prev[32], const char *canonical, size_t len,
                         unsigned char out[32])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, prev, 32);
    crypto_generichash_update(&st, (const unsigned char *)canonical, len);
    crypto_generichash_final(&st, out, 32);
}

void tc_audit_digest(const char *canonical, size_t len, unsigned char out[32])
{
    crypto_generichash(out, 32, (const unsigned char *)canonical, len, NULL, 0);
}

void tc_audit_link(const unsigned char prev[32], const unsigned char digest[32],
                   unsigned char out[32])
{
    unsigned char in[64];
    memcpy(in, prev, 32);
    memcpy(in + 32, digest, 32);
    crypto_generichash(out, 32, in, sizeof(in), NULL, 0);
}

void tc_audit_mac(const unsigned char key[32], int64_t seq, const unsigned char hash[32],
                  unsigned char out[32])
{
    unsigned char in[40];
    memcpy(in, hash, 32);
    for (int i = 0; i < 8; i++)
        in[32 + i] = (unsigned char)((uint64_t)seq >> (8 * i));
    crypto_generichash(out, 32, in, sizeof(in), key, 32);
}

void tc_audit_value_hash_with(const unsigned char key[32], const char *tenant_id, const void *value,
                              size_t len, char out[65])
{
    /* The tenant's key: BLAKE2b keyed with the audit value key over a label and the id. */
    static const char label[] = "toolcage-audit-value-tenant-v1";
    unsigned char tk[32], h[32];
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, 32, sizeof(tk));
    crypto_generichash_update(&st, (const unsigned char *)label, sizeof(label)); /* with NUL */
    crypto_generichash_update(&st, (const unsigned char *)(tenant_id ? tenant_id : ""),
                              tenant_id ? strlen(tenant_id) : 0);
    crypto_generichash_final(&st, tk, sizeof(tk));
    crypto_generichash(h, sizeof(h), value, len, tk, sizeof(tk));
    sodium_memzero(tk, sizeof(tk));
    sodium_bin2hex(out, 65, h, sizeof(h));
}

void tc_audit_value_hash(const struct tc_keys *keys, const char *tenant_id, const void *value,
                         size_t len, char out[65])
{
    tc_audit_value_hash_with(keys->audit_value_key, tenant_id, value, len, out);
}

static void checkpoint_message(int64_t seq, const char *hash_hex, const char *ts, char *out,
                               size_t outlen)
{
    snprintf(out, outlen, "toolcage-audit-checkpoint-v1\n%" PRId64 "\n%s\n%s", seq, hash_hex, ts);
}

static int sign_checkpoint(PGconn *c, const struct tc_keys *keys, int64_t seq,
                           const unsigned char hash[32])
{
    char ts[32], hash_hex[65], msg[192], seqs[24], hash_bytea[67], sig_bytea[131];
    unsigned char sig[64];
    tc_iso8601(tc_wall_ms(), ts);
    sodium_bin2hex(hash_hex, sizeof(hash_hex), hash, 32);
    checkpoint_message(seq, hash_hex, ts, msg, sizeof(msg));
    crypto_sign_detached(sig, NULL, (const unsigned char *)msg, strlen(msg), keys->audit_sign_sk);
    snprintf(seqs, sizeof(seqs), "%" PRId64, seq);
    tc_db_bytea_hex(hash, 32, hash_bytea);
    tc_db_bytea_hex(sig, 64, sig_bytea);
    const char *p[] = {seqs, hash_bytea, ts, keys->audit_key_id, sig_bytea};
    PGresult *r =
        tc_db_exec(c,
                   "INSERT INTO audit_checkpoints (seq, hash, ts, key_id, signature)"
                   " VALUES ($1, $2::bytea, $3, $4, $5::bytea) ON CONFLICT (seq) DO NOTHING",
                   5, p);
    if (!r)
        return -EIO;
    PQclear(r);
    return 0;
}

static int checkpoint_locked(PGconn *c, const struct tc_keys *keys, int64_t head_seq,
                             const unsigned char head_hash[32], int64_t *ret_seq);

int tc_audit_append_tx(PGconn *c, const struct tc_keys *keys, const json_t *event, int64_t *ret_seq)
{
    PGresult *r = tc_db_exec(c, "SELECT seq, hash FROM audit_head FOR UPDATE", 0, NULL);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        return -EIO;
    }
    int64_t seq = 0;
    unsigned char prev[32], digest[32], hash[32], mac[32];
    bool ok = tc_parse_i64(PQgetvalue(r, 0, 0), 0, INT64_MAX - 1, &seq) == 0 &&
              tc_db_bytea_parse(PQgetvalue(r, 0, 1), prev, 32);
    PQclear(r);
    if (!ok)
        return -EIO;
    seq++;

    json_t *rec = json_deep_copy(event);
    if (!rec)
        return -ENOMEM;
    char ts[32], prev_hex[65];
    tc_iso8601(tc_wall_ms(), ts);
    sodium_bin2hex(prev_hex, sizeof(prev_hex), prev, 32);
    json_object_set_new(rec, "seq", json_integer(seq));
    json_object_set_new(rec, "ts", json_string(ts));
    json_object_set_new(rec, "prev_hash", json_string(prev_hex));
    size_t len;
    char *canon = tc_audit_canonical(rec, &len);
    json_decref(rec);
    if (!canon)
        return -ENOMEM;
    tc_audit_digest(canon, len, digest);
    tc_audit_link(prev, digest, hash);
    tc_audit_mac(keys->audit_mac_key, seq, hash, mac);

    char seqs[24], hash_bytea[67], digest_bytea[67], mac_bytea[67];
    snprintf(seqs, sizeof(seqs), "%" PRId64, seq);
    tc_db_bytea_hex(hash, 32, hash_bytea);
    tc_db_bytea_hex(digest, 32, digest_bytea);
    tc_db_bytea_hex(mac, 32, mac_bytea);
    const char *p[] = {seqs, canon, hash_bytea, digest_bytea, mac_bytea, keys->master_id};
    /* the record and the new head in one statement (a WITH's INSERT runs once and to
     * completion whatever the outer statement reads), sent with the transaction's next one,
     * its COMMIT most often: one round trip for both (a failure fails that one) */
    bool sent =
        tc_db_send(c,
                   "WITH rec AS (INSERT INTO audit_log (seq, record, hash, digest, mac, mac_key_id)"
                   " VALUES ($1, $2::jsonb, $3::bytea, $4::bytea, $5::bytea, $6))"
                   " UPDATE audit_head SET seq = $1, hash = $3::bytea",
                   6, p);
    free(canon);
    if (!sent)
        return -EIO;
    /* A checkpoint that cannot be signed (a record since the last one does not verify) does
     * not stop appends: the minute tick reports it, and verification names the record. */
    if (seq % TC_AUDIT_CHECKPOINT_EVERY == 0 && checkpoint_locked(c, keys, seq, hash, NULL) == -EIO)
        return -EIO;
    if (ret_seq)
        *ret_seq = seq;
    return 0;
}

int tc_audit_append(PGconn *c, const struct tc_keys *keys, const json_t *event, int64_t *ret_seq)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    int r = tc_audit_append_tx(c, keys, event, ret_seq);
    return tc_db_finish(c, r);
}

int tc_audit_publish_key(PGconn *c, const struct tc_keys *keys)
{
    char pk[67];
    tc_db_bytea_hex(keys->audit_sign_pk, 32, pk);
    const char *p[] = {keys->audit_key_id, pk};
    PGresult *r = tc_db_exec(c,
                             "INSERT INTO audit_keys (key_id, public_key) VALUES ($1, $2::bytea)"
                             " ON CONFLICT (key_id) DO NOTHING",
                             2, p);
    if (!r)
        return -EIO;
    PQclear(r);
    return 0;
}

int tc_audit_checkpoint(PGconn *c, const struct tc_keys *keys, int64_t *ret_seq)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    int rc = -EIO;
    PGresult *r = tc_db_exec(c, "SELECT seq, hash FROM audit_head FOR UPDATE", 0, NULL);
    if (r && PQntuples(r) == 1) {
        int64_t seq = 0;
        unsigned char hash[32];
        if (tc_parse_i64(PQgetvalue(r, 0, 0), 0, INT64_MAX, &seq) == 0 &&
            tc_db_bytea_parse(PQgetvalue(r, 0, 1), hash, 32))
            rc = checkpoint_locked(c, keys, seq, hash, ret_seq);
    }
    PQclear(r);
    return tc_db_finish(c, rc);
}

/* ---- verification ---- */

struct checkpoint {
    int64_t seq;
    unsigned char hash[32];
    char ts[32];
    char key_id[17];
    bool valid_signature;
    bool covers; /* vouches for the records up to it: file, a valid signature; database, a
                    valid signature by a key this process holds */
};

/* One record (or a withheld one: record NULL) as stored or exported. */
struct row {
    int64_t seq;
    json_t *record;
    unsigned char hash[32];
    bool has_digest;
    unsigned char digest[32];
    bool has_mac;
    unsigned char mac[32];
    char mac_key_id[17];
};

struct chain {
    unsigned char prev[32];
    int64_t next_seq;
    bool database; /* rows from the database: v2 from v2_from on, with authentication codes */
    int64_t v2_from;
    bool seen_v2;
    const struct tc_keys *keys; /* database: to check authentication codes */
    bool strict;                /* signing: a code this process cannot check is a failure */
    int64_t pending; /* first record no covering checkpoint has vouched for yet (0: none) */
    struct tc_audit_verdict *v;
    struct checkpoint *cps;
    size_t ncps, next_cp;
};

static void verdict_bad(struct tc_audit_verdict *v, int64_t seq, const char *reason)
{
    if (!v->ok)
        return;
    v->ok = false;
    v->first_bad_seq = seq;
    snprintf(v->reason, sizeof(v->reason), "%s", reason);
}

/* The first row of an export that starts after seq 1 must follow a checkpoint that vouches
 * for its predecessor: the chain continues from that checkpoint's (signed) hash. */
static bool anchor_at_checkpoint(struct chain *ch, int64_t seq)
{
    for (size_t i = 0; i < ch->ncps; i++) {
        struct checkpoint *cp = &ch->cps[i];
        if (cp->seq == seq - 1 && cp->covers) {
            memcpy(ch->prev, cp->hash, 32);
            ch->next_seq = seq;
            while (ch->next_cp < ch->ncps && ch->cps[ch->next_cp].seq < seq)
                ch->next_cp++;
            return true;
        }
    }
    return false;
}

/* The authentication code of a v2 row from the database. false: bad (verdict set). */
static bool check_mac(struct chain *ch, const struct row *row, const unsigned char h[32])
{
    struct tc_audit_verdict *v = ch->v;
    if (!row->has_mac) {
        verdict_bad(v, row->seq,
                    "the record has no authentication code (it was not written by "
                    "a holder of the master key)");
        return false;
    }
    const unsigned char *key = ch->keys ? tc_keys_audit_mac_key(ch->keys, row->mac_key_id) : NULL;
    if (!key) {
        if (ch->strict) {
            verdict_bad(v, row->seq,
                        "the record's authentication code was made under a master "
                        "key this process does not hold");
            return false;
        }
        if (!ch->pending)
            ch->pending = row->seq; /* a checkpoint signed by a held key must cover it */
        return true;
    }
    unsigned char want[32];
    tc_audit_mac(key, row->seq, h, want);
    if (sodium_memcmp(want, row->mac, 32) != 0) {
        verdict_bad(v, row->seq,
                    "the record's authentication code does not verify (it was "
                    "written or changed without the master key)");
        return false;
    }
    return true;
}

/* One record: its position, its link to the previous one, its hash and, from the database,
 * its authentication code. */
static void chain_step(struct chain *ch, const struct row *row)
{
    struct tc_audit_verdict *v = ch->v;
    if (!v->ok)
        return;
    int64_t seq = row->seq;
    if (ch->next_seq == 1 && seq > 1 && !ch->database && anchor_at_checkpoint(ch, seq)) {
        /* an export of a range: continues from the signed checkpoint before it */
    }
    v->checked++;
    if (seq != ch->next_seq) {
        verdict_bad(v, ch->next_seq, "a record is missing (sequence gap)");
        return;
    }
    bool v2 = ch->database ? seq >= ch->v2_from : row->has_digest;
    if (ch->database && v2 && !row->has_digest) {
        verdict_bad(v, seq, "the record has no digest (it was not written by toolcage)");
        return;
    }
    if (!v2 && ch->seen_v2) {
        verdict_bad(v, seq, "the record is in the old chain format after records in the new one");
        return;
    }
    ch->seen_v2 |= v2;
    unsigned char h[32];
    if (row->record) {
        char prev_hex[65];
        sodium_bin2hex(prev_hex, sizeof(prev_hex), ch->prev, 32);
        json_t *rs = json_object_get(row->record, "seq");
        const char *rp = json_string_value(json_object_get(row->record, "prev_hash"));
        if (!json_is_integer(rs) || json_integer_value(rs) != seq) {
            verdict_bad(v, seq, "the record's own sequence number was changed");
            return;
        }
        if (!rp || strcmp(rp, prev_hex) != 0) {
            verdict_bad(v, seq, "the record does not link to its predecessor");
            return;
        }
        size_t len;
        char *canon = tc_audit_canonical(row->record, &len);
        if (!canon) {
            verdict_bad(v, seq, "out of memory");
            return;
        }
        if (v2) {
            unsigned char d[32];
            tc_audit_digest(canon, len, d);
            if (sodium_memcmp(d, row->digest, 32) != 0) {
                free(canon);
                verdict_bad(v, seq, "the record was altered (digest mismatch)");
                return;
            }
            tc_audit_link(ch->prev, d, h);
        } else {
            tc_audit_chain_hash(ch->prev, canon, len, h);
        }
        free(canon);
    } else {
        v->withheld++;
        if (v2)
            tc_audit_link(ch->prev, row->digest, h);
        else
            memcpy(h, row->hash,
                   32); /* an old-format record withheld: its hash is taken as given */
    }
    if (sodium_memcmp(h, row->hash, 32) != 0) {
        verdict_bad(v, seq, "the record was altered (hash mismatch)");
        return;
    }
    if (ch->database && v2 && !check_mac(ch, row, h))
        return;
    if (!ch->database && !ch->pending)
        ch->pending = seq;
    while (ch->next_cp < ch->ncps && ch->cps[ch->next_cp].seq <= seq) {
        struct checkpoint *cp = &ch->cps[ch->next_cp++];
        if (cp->seq != seq)
            continue;
        if (sodium_memcmp(cp->hash, h, 32) != 0) {
            verdict_bad(v, seq, "the chain differs from a signed checkpoint");
            return;
        }
        if (cp->covers)
            ch->pending = 0;
    }
    memcpy(ch->prev, h, 32);
    ch->next_seq = seq + 1;
}

static void chain_finish(struct chain *ch)
{
    struct tc_audit_verdict *v = ch->v;
    for (size_t i = 0; i < ch->ncps; i++) {
        struct checkpoint *cp = &ch->cps[i];
        if (!cp->valid_signature) {
            verdict_bad(v, cp->seq, "a checkpoint's signature does not verify");
            continue;
        }
        if (cp->seq >= ch->next_seq) {
            verdict_bad(v, ch->next_seq,
                        "records were cut from the tail (a signed checkpoint "
                        "names a record that is missing)");
            continue;
        }
        if (cp->seq > v->checkpoint_seq) {
            v->checkpoint_seq = cp->seq;
            snprintf(v->checkpoint_ts, sizeof(v->checkpoint_ts), "%s", cp->ts);
            snprintf(v->checkpoint_key_id, sizeof(v->checkpoint_key_id), "%s", cp->key_id);
        }
    }
    if (ch->pending)
        verdict_bad(v, ch->pending,
                    ch->database
                        ? "the record's authentication code was made under a master key this "
                          "process does not hold, and no checkpoint signed by a key it holds "
                          "covers it"
                        : "the records from here on are not covered by a signed checkpoint "
                          "(anyone could have appended them)");
}

static bool checkpoint_verify(struct checkpoint *cp, const unsigned char *sig,
                              const unsigned char *pk)
{
    char hash_hex[65], msg[192];
    sodium_bin2hex(hash_hex, sizeof(hash_hex), cp->hash, 32);
    checkpoint_message(cp->seq, hash_hex, cp->ts, msg, sizeof(msg));
    return pk && crypto_sign_verify_detached(sig, (const unsigned char *)msg, strlen(msg), pk) == 0;
}

/* One checkpoint row (seq, hash, ts, key_id, signature, public_key) of a query result. */
static void checkpoint_from_db(PGresult *r, int row, const struct tc_keys *keys,
                               struct checkpoint *cp)
{
    unsigned char sig[64], pk[32];
    bool have_pk = !PQgetisnull(r, row, 5) && tc_db_bytea_parse(PQgetvalue(r, row, 5), pk, 32);
    memset(cp, 0, sizeof(*cp));
    tc_parse_i64(PQgetvalue(r, row, 0), 0, INT64_MAX, &cp->seq);
    snprintf(cp->ts, sizeof(cp->ts), "%s", PQgetvalue(r, row, 2));
    snprintf(cp->key_id, sizeof(cp->key_id), "%s", PQgetvalue(r, row, 3));
    cp->valid_signature = tc_db_bytea_parse(PQgetvalue(r, row, 1), cp->hash, 32) &&
                          tc_db_bytea_parse(PQgetvalue(r, row, 4), sig, 64) &&
                          checkpoint_verify(cp, sig, have_pk ? pk : NULL);
    cp->covers = cp->valid_signature && keys && tc_keys_audit_pk_held(keys, pk);
}

#define CHECKPOINT_COLUMNS                                                                         \
    "cp.seq, cp.hash, cp.ts, cp.key_id, cp.signature, k.public_key"                                \
    " FROM audit_checkpoints cp LEFT JOIN audit_keys k USING (key_id)"

static int load_v2_from(PGconn *c, int64_t *ret)
{
    PGresult *r = tc_db_exec(c, "SELECT v2_from FROM audit_chain", 0, NULL);
    if (!r)
        return -EIO;
    int rc =
        PQntuples(r) == 1 && tc_parse_i64(PQgetvalue(r, 0, 0), 1, INT64_MAX, ret) == 0 ? 0 : -EIO;
    PQclear(r);
    return rc;
}

/* Walk rows (after, upto] of audit_log through ch, in keyset pages (constant memory). */
static int walk_db(PGconn *c, struct chain *ch, int64_t after, int64_t upto)
{
    char last[24], upto_s[24];
    snprintf(last, sizeof(last), "%" PRId64, after);
    snprintf(upto_s, sizeof(upto_s), "%" PRId64, upto);
    for (;;) {
        const char *p[] = {last, upto_s};
        PGresult *r = tc_db_exec(c,
                                 "SELECT seq, record::text, hash, digest, mac, mac_key_id"
                                 " FROM audit_log WHERE seq > $1 AND seq <= $2"
                                 " ORDER BY seq LIMIT 2000",
                                 2, p);
        if (!r)
            return -EIO;
        int n = PQntuples(r);
        for (int i = 0; i < n && ch->v->ok; i++) {
            struct row row = {0};
            tc_parse_i64(PQgetvalue(r, i, 0), 0, INT64_MAX, &row.seq);
            row.record = json_loads(PQgetvalue(r, i, 1), 0, NULL);
            row.has_digest =
                !PQgetisnull(r, i, 3) && tc_db_bytea_parse(PQgetvalue(r, i, 3), row.digest, 32);
            row.has_mac = !PQgetisnull(r, i, 4) && !PQgetisnull(r, i, 5) &&
                          tc_db_bytea_parse(PQgetvalue(r, i, 4), row.mac, 32);
            snprintf(row.mac_key_id, sizeof(row.mac_key_id), "%s", PQgetvalue(r, i, 5));
            if (!row.record || !tc_db_bytea_parse(PQgetvalue(r, i, 2), row.hash, 32))
                verdict_bad(ch->v, row.seq, "the record cannot be parsed");
            else
                chain_step(ch, &row);
            json_decref(row.record);
        }
        if (n > 0)
            snprintf(last, sizeof(last), "%s", PQgetvalue(r, n - 1, 0));
        PQclear(r);
        if (n < 2000 || !ch->v->ok)
            return 0;
    }
}

/* Caller holds the head lock. Vouch for every record since the newest checkpoint signed by
 * a held key, then sign the head. */
static int checkpoint_locked(PGconn *c, const struct tc_keys *keys, int64_t head_seq,
                             const unsigned char head_hash[32], int64_t *ret_seq)
{
    struct tc_audit_verdict v = {.ok = true};
    struct checkpoint anchor = {0};
    struct chain ch = {.next_seq = 1, .database = true, .keys = keys, .strict = true, .v = &v};
    /* The newest checkpoints first; one of them is normally ours. A forged or foreign one
     * (not signed by a key held here) is no anchor: the walk starts further back. */
    PGresult *r =
        tc_db_exec(c, "SELECT " CHECKPOINT_COLUMNS " ORDER BY cp.seq DESC LIMIT 50", 0, NULL);
    if (!r)
        return -EIO;
    for (int i = 0; i < PQntuples(r); i++) {
        checkpoint_from_db(r, i, keys, &anchor);
        if (anchor.covers)
            break;
        memset(&anchor, 0, sizeof(anchor));
    }
    PQclear(r);
    if (anchor.seq >= head_seq) {
        if (ret_seq)
            *ret_seq = anchor.seq;
        return 0;
    }
    if (load_v2_from(c, &ch.v2_from) < 0)
        return -EIO;
    if (anchor.seq > 0) {
        memcpy(ch.prev, anchor.hash, 32);
        ch.next_seq = anchor.seq + 1;
    }
    if (walk_db(c, &ch, anchor.seq, head_seq) < 0)
        return -EIO;
    if (v.ok && (ch.next_seq != head_seq + 1 || sodium_memcmp(ch.prev, head_hash, 32) != 0))
        verdict_bad(&v, ch.next_seq, "the chain head does not name the last record");
    if (!v.ok)
        return -EBADMSG;
    int rc = sign_checkpoint(c, keys, head_seq, head_hash);
    if (rc == 0 && ret_seq)
        *ret_seq = head_seq;
    return rc;
}

int tc_audit_verify_db(PGconn *c, const struct tc_keys *keys, struct tc_audit_verdict *ret)
{
    struct tc_audit_verdict v = {.ok = true};
    struct chain ch = {.next_seq = 1, .database = true, .keys = keys, .v = &v};
    int rc = -EIO;
    if (load_v2_from(c, &ch.v2_from) < 0)
        return -EIO;
    PGresult *r = tc_db_exec(c, "SELECT " CHECKPOINT_COLUMNS " ORDER BY cp.seq", 0, NULL);
    if (!r)
        return -EIO;
    ch.ncps = (size_t)PQntuples(r);
    ch.cps = calloc(ch.ncps ? ch.ncps : 1, sizeof(*ch.cps));
    if (!ch.cps) {
        PQclear(r);
        return -ENOMEM;
    }
    for (size_t i = 0; i < ch.ncps; i++)
        checkpoint_from_db(r, (int)i, keys, &ch.cps[i]);
    PQclear(r);

    if (walk_db(c, &ch, 0, INT64_MAX) < 0)
        goto out;
    if (v.ok) {
        r = tc_db_exec(c, "SELECT seq, hash FROM audit_head", 0, NULL);
        if (!r)
            goto out;
        int64_t head = 0;
        unsigned char hh[32];
        if (PQntuples(r) == 1 && tc_parse_i64(PQgetvalue(r, 0, 0), 0, INT64_MAX, &head) == 0 &&
            tc_db_bytea_parse(PQgetvalue(r, 0, 1), hh, 32)) {
            if (head != ch.next_seq - 1 || sodium_memcmp(hh, ch.prev, 32) != 0)
                verdict_bad(&v, ch.next_seq,
                            "records were cut from the tail (the chain head "
                            "names a later record)");
        }
        PQclear(r);
    }
    chain_finish(&ch);
    *ret = v;
    rc = 0;
out:
    free(ch.cps);
    return rc;
}

/* Split one CSV line (RFC 4180 quoting, no embedded newlines) into at most max fields. */
static size_t csv_split(char *line, char **fields, size_t max)
{
    size_t n = 0;
    char *p = line;
    while (n < max) {
        char *out = p;
        fields[n++] = p;
        if (*p == '"') {
            char *in = p + 1;
            for (;;) {
                if (*in == '\0')
                    break;
                if (*in == '"' && in[1] == '"') {
                    *out++ = '"';
                    in += 2;
                } else if (*in == '"') {
                    in++;
                    break;
                } else {
                    *out++ = *in++;
                }
            }
            p = in;
        } else {
            while (*p && *p != ',' && *p != '\n')
                *out++ = *p++;
        }
        char sep = *p;
        *out = '\0';
        if (sep != ',')
            break;
        p++;
    }
    return n;
}

/* A row of the CSV export as the object a JSON-lines export would hold. Exports made before
 * the digest column existed have 12 columns. */
static json_t *csv_row(char *line)
{
    char *f[13];
    size_t n = csv_split(line, f, 13);
    if (n != 12 && n != 13)
        return NULL;
    json_int_t seq = strtoll(f[1], NULL, 10);
    const char *digest = n == 13 && f[12][0] ? f[12] : NULL;
    json_t *o = NULL;
    if (strcmp(f[0], "checkpoint") == 0)
        return json_pack("{s:{s:I, s:s, s:s, s:s, s:s}}", "checkpoint", "seq", seq, "ts", f[2],
                         "hash", f[8], "key_id", f[9], "signature", f[10]);
    if (strcmp(f[0], "record") == 0)
        o = json_pack("{s:I, s:s, s:o}", "seq", seq, "hash", f[8], "record",
                      json_loads(f[11], 0, NULL));
    else if (strcmp(f[0], "withheld") == 0)
        o = json_pack("{s:I, s:s, s:b}", "seq", seq, "hash", f[8], "withheld", 1);
    if (o && digest)
        json_object_set_new(o, "digest", json_string(digest));
    return o;
}

static bool hex32(const char *s, unsigned char out[32])
{
    size_t l = 0;
    return s && sodium_hex2bin(out, 32, s, strlen(s), NULL, &l, NULL) == 0 && l == 32;
}

static int checkpoint_cmp(const void *a, const void *b)
{
    const struct checkpoint *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

int tc_audit_verify_file(FILE *f, const unsigned char *pk, struct tc_audit_verdict *ret)
{
    struct tc_audit_verdict v = {.ok = true};
    struct chain ch = {.next_seq = 1, .v = &v};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    size_t cps_alloc = 0;
    bool records_started = false, csv = false, first = true;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (n == 1 && line[0] == '\n')
            continue;
        if (first && strncmp(line, "kind,", 5) == 0) {
            csv = true;
            first = false;
            continue;
        }
        first = false;
        json_t *o = csv ? csv_row(line) : json_loadb(line, (size_t)n, 0, NULL);
        if (!json_is_object(o)) {
            json_decref(o);
            rc = -EINVAL;
            break;
        }
        json_t *cpj = json_object_get(o, "checkpoint");
        if (cpj && records_started) {
            /* the walk compares each checkpoint as it passes its record: they come first */
            json_decref(o);
            rc = -EINVAL;
            break;
        }
        if (cpj) {
            if (ch.ncps == cps_alloc) {
                size_t na = cps_alloc ? cps_alloc * 2 : 16;
                struct checkpoint *nc = realloc(ch.cps, na * sizeof(*nc));
                if (!nc) {
                    json_decref(o);
                    rc = -ENOMEM;
                    break;
                }
                ch.cps = nc;
                cps_alloc = na;
            }
            struct checkpoint *cp = &ch.cps[ch.ncps++];
            memset(cp, 0, sizeof(*cp));
            unsigned char sig[64];
            size_t l1 = 0, l2 = 0;
            const char *hh = json_string_value(json_object_get(cpj, "hash"));
            const char *sh = json_string_value(json_object_get(cpj, "signature"));
            cp->seq = json_integer_value(json_object_get(cpj, "seq"));
            snprintf(cp->ts, sizeof(cp->ts), "%s",
                     json_string_value(json_object_get(cpj, "ts")) ?: "");
            snprintf(cp->key_id, sizeof(cp->key_id), "%s",
                     json_string_value(json_object_get(cpj, "key_id")) ?: "");
            cp->valid_signature =
                hh && sh && sodium_hex2bin(cp->hash, 32, hh, strlen(hh), NULL, &l1, NULL) == 0 &&
                l1 == 32 && sodium_hex2bin(sig, 64, sh, strlen(sh), NULL, &l2, NULL) == 0 &&
                l2 == 64 && checkpoint_verify(cp, sig, pk);
            cp->covers = cp->valid_signature;
        } else {
            if (!records_started) {
                records_started = true;
                if (ch.ncps)
                    qsort(ch.cps, ch.ncps, sizeof(*ch.cps), checkpoint_cmp);
            }
            struct row row = {.seq = json_integer_value(json_object_get(o, "seq"))};
            const char *dh = json_string_value(json_object_get(o, "digest"));
            row.record = json_object_get(o, "record");
            row.has_digest = dh != NULL;
            bool withheld = !row.record && json_is_true(json_object_get(o, "withheld"));
            if (!hex32(json_string_value(json_object_get(o, "hash")), row.hash) ||
                (dh && !hex32(dh, row.digest)) || (!json_is_object(row.record) && !withheld)) {
                verdict_bad(&v, row.seq, "the record cannot be parsed");
            } else {
                if (withheld)
                    row.record = NULL;
                chain_step(&ch, &row);
            }
        }
        json_decref(o);
    }
    free(line);
    if (rc == 0) {
        if (!records_started && ch.ncps)
            qsort(ch.cps, ch.ncps, sizeof(*ch.cps), checkpoint_cmp);
        chain_finish(&ch);
        *ret = v;
    }
    free(ch.cps);
    return rc;
}

json_t *tc_audit_verdict_json(const struct tc_audit_verdict *v)
{
    json_t *o = json_pack("{s:b, s:I}", "ok", v->ok, "checked", (json_int_t)v->checked);
    json_object_set_new(o, "first_bad_seq", v->ok ? json_null() : json_integer(v->first_bad_seq));
    json_object_set_new(o, "reason", v->ok ? json_null() : json_string(v->reason));
    json_object_set_new(o, "checkpoint",
                        v->checkpoint_seq
                            ? json_pack("{s:I, s:s, s:s}", "seq", (json_int_t)v->checkpoint_seq,
                                        "ts", v->checkpoint_ts, "key_id", v->checkpoint_key_id)
                            : json_null());
    if (v->withheld)
        json_object_set_new(o, "withheld", json_integer(v->withheld));
    return o;
}
