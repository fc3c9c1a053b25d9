#include "audit/audit.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <string.h>

#include "broker/keys.h"
#include "common/util.h"
#include "server/db.h"

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

void tc_audit_value_hash(const struct tc_keys *keys, const void *value, size_t len, char out[65])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), value, len, keys->audit_value_key,
                       sizeof(keys->audit_value_key));
    sodium_bin2hex(out, 65, h, sizeof(h));
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
    PGresult *r = tc_db_exec(c,
                             "INSERT INTO audit_checkpoints (seq, hash, ts, key_id, signature)"
                             " VALUES ($1, $2::bytea, $3, $4, $5::bytea) ON CONFLICT (seq) DO NOTHING",
                             5, p);
    if (!r)
        return -EIO;
    PQclear(r);
    return 0;
}

int tc_audit_append_tx(PGconn *c, const struct tc_keys *keys, const json_t *event,
                       int64_t *ret_seq)
{
    PGresult *r = tc_db_exec(c, "SELECT seq, hash FROM audit_head FOR UPDATE", 0, NULL);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        return -EIO;
    }
    int64_t seq = 0;
    unsigned char prev[32], hash[32];
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
    tc_audit_chain_hash(prev, canon, len, hash);

    char seqs[24], hash_bytea[67];
    snprintf(seqs, sizeof(seqs), "%" PRId64, seq);
    tc_db_bytea_hex(hash, 32, hash_bytea);
    const char *p[] = {seqs, canon, hash_bytea};
    r = tc_db_exec(c, "INSERT INTO audit_log (seq, record, hash) VALUES ($1, $2::jsonb, $3::bytea)",
                   3, p);
    free(canon);
    if (!r)
        return -EIO;
    PQclear(r);
    const char *p2[] = {seqs, hash_bytea};
    r = tc_db_exec(c, "UPDATE audit_head SET seq = $1, hash = $2::bytea", 2, p2);
    if (!r)
        return -EIO;
    PQclear(r);
    if (seq % TC_AUDIT_CHECKPOINT_EVERY == 0 && sign_checkpoint(c, keys, seq, hash) < 0)
        return -EIO;
    if (ret_seq)
        *ret_seq = seq;
    return 0;
}

static bool exec_simple(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

int tc_audit_append(PGconn *c, const struct tc_keys *keys, const json_t *event, int64_t *ret_seq)
{
    if (!exec_simple(c, "BEGIN"))
        return -EIO;
    int r = tc_audit_append_tx(c, keys, event, ret_seq);
    if (r < 0 || !exec_simple(c, "COMMIT")) {
        exec_simple(c, "ROLLBACK");
        return r < 0 ? r : -EIO;
    }
    return 0;
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

int tc_audit_checkpoint(PGconn *c, const struct tc_keys *keys)
{
    if (!exec_simple(c, "BEGIN"))
        return -EIO;
    int rc = -EIO;
    PGresult *r = tc_db_exec(c,
                             "SELECT h.seq, h.hash, coalesce((SELECT max(seq) FROM audit_checkpoints), 0)"
                             " FROM audit_head h FOR UPDATE",
                             0, NULL);
    if (r && PQntuples(r) == 1) {
        int64_t seq = 0, last = 0;
        unsigned char hash[32];
        if (tc_parse_i64(PQgetvalue(r, 0, 0), 0, INT64_MAX, &seq) == 0 &&
            tc_parse_i64(PQgetvalue(r, 0, 2), 0, INT64_MAX, &last) == 0 &&
            tc_db_bytea_parse(PQgetvalue(r, 0, 1), hash, 32))
            rc = (seq > last) ? sign_checkpoint(c, keys, seq, hash) : 0;
    }
    PQclear(r);
    if (rc < 0 || !exec_simple(c, "COMMIT")) {
        exec_simple(c, "ROLLBACK");
        return -EIO;
    }
    return 0;
}

/* ---- verification ---- */

struct checkpoint {
    int64_t seq;
    unsigned char hash[32];
    char ts[32];
    char key_id[17];
    bool valid_signature;
};

struct chain {
    unsigned char prev[32];
    int64_t next_seq;
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

/* One record: its position, its link to the previous one, and its hash. */
static void chain_step(struct chain *ch, int64_t seq, json_t *record, const unsigned char stored[32])
{
    struct tc_audit_verdict *v = ch->v;
    if (!v->ok)
        return;
    v->checked++;
    if (seq != ch->next_seq) {
        verdict_bad(v, ch->next_seq, "a record is missing (sequence gap)");
        return;
    }
    char prev_hex[65];
    sodium_bin2hex(prev_hex, sizeof(prev_hex), ch->prev, 32);
    json_t *rs = json_object_get(record, "seq");
    const char *rp = json_string_value(json_object_get(record, "prev_hash"));
    if (!json_is_integer(rs) || json_integer_value(rs) != seq) {
        verdict_bad(v, seq, "the record's own sequence number was changed");
        return;
    }
    if (!rp || strcmp(rp, prev_hex) != 0) {
        verdict_bad(v, seq, "the record does not link to its predecessor");
        return;
    }
    size_t len;
    char *canon = tc_audit_canonical(record, &len);
    unsigned char h[32];
    if (!canon) {
        verdict_bad(v, seq, "out of memory");
        return;
    }
    tc_audit_chain_hash(ch->prev, canon, len, h);
    free(canon);
    if (sodium_memcmp(h, stored, 32) != 0) {
        verdict_bad(v, seq, "the record was altered (hash mismatch)");
        return;
    }
    while (ch->next_cp < ch->ncps && ch->cps[ch->next_cp].seq <= seq) {
        struct checkpoint *cp = &ch->cps[ch->next_cp++];
        if (cp->seq == seq && sodium_memcmp(cp->hash, h, 32) != 0) {
            verdict_bad(v, seq, "the chain differs from a signed checkpoint");
            return;
        }
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
            verdict_bad(v, ch->next_seq, "records were cut from the tail (a signed checkpoint "
                                         "names a record that is missing)");
            continue;
        }
        if (cp->seq > v->checkpoint_seq) {
            v->checkpoint_seq = cp->seq;
            snprintf(v->checkpoint_ts, sizeof(v->checkpoint_ts), "%s", cp->ts);
            snprintf(v->checkpoint_key_id, sizeof(v->checkpoint_key_id), "%s", cp->key_id);
        }
    }
}

static bool checkpoint_verify(struct checkpoint *cp, const unsigned char *sig,
                              const unsigned char *pk)
{
    char hash_hex[65], msg[192];
    sodium_bin2hex(hash_hex, sizeof(hash_hex), cp->hash, 32);
    checkpoint_message(cp->seq, hash_hex, cp->ts, msg, sizeof(msg));
    return pk && crypto_sign_verify_detached(sig, (const unsigned char *)msg, strlen(msg), pk) == 0;
}

int tc_audit_verify_db(PGconn *c, struct tc_audit_verdict *ret)
{
    struct tc_audit_verdict v = {.ok = true};
    struct chain ch = {.next_seq = 1, .v = &v};
    int rc = -EIO;
    PGresult *r = tc_db_exec(c,
                             "SELECT cp.seq, cp.hash, cp.ts, cp.key_id, cp.signature, k.public_key"
                             " FROM audit_checkpoints cp LEFT JOIN audit_keys k USING (key_id)"
                             " ORDER BY cp.seq",
                             0, NULL);
    if (!r)
        return -EIO;
    ch.ncps = (size_t)PQntuples(r);
    ch.cps = calloc(ch.ncps ? ch.ncps : 1, sizeof(*ch.cps));
    if (!ch.cps) {
        PQclear(r);
        return -ENOMEM;
    }
    for (size_t i = 0; i < ch.ncps; i++) {
        struct checkpoint *cp = &ch.cps[i];
        unsigned char sig[64], pk[32];
        int row = (int)i;
        bool have_pk = !PQgetisnull(r, row, 5) && tc_db_bytea_parse(PQgetvalue(r, row, 5), pk, 32);
        tc_parse_i64(PQgetvalue(r, row, 0), 0, INT64_MAX, &cp->seq);
        snprintf(cp->ts, sizeof(cp->ts), "%s", PQgetvalue(r, row, 2));
        snprintf(cp->key_id, sizeof(cp->key_id), "%s", PQgetvalue(r, row, 3));
        cp->valid_signature = tc_db_bytea_parse(PQgetvalue(r, row, 1), cp->hash, 32) &&
                              tc_db_bytea_parse(PQgetvalue(r, row, 4), sig, 64) &&
                              checkpoint_verify(cp, sig, have_pk ? pk : NULL);
    }
    PQclear(r);

    /* Keyset pagination: constant memory for any size, and no long-lived cursor. */
    char last[24] = "0";
    for (;;) {
        const char *p[] = {last};
        r = tc_db_exec(c, "SELECT seq, record::text, hash FROM audit_log WHERE seq > $1"
                          " ORDER BY seq LIMIT 2000", 1, p);
        if (!r)
            goto out;
        int n = PQntuples(r);
        for (int i = 0; i < n && v.ok; i++) {
            int64_t seq = 0;
            unsigned char h[32];
            tc_parse_i64(PQgetvalue(r, i, 0), 0, INT64_MAX, &seq);
            json_t *rec = json_loads(PQgetvalue(r, i, 1), 0, NULL);
            if (!rec || !tc_db_bytea_parse(PQgetvalue(r, i, 2), h, 32))
                verdict_bad(&v, seq, "the record cannot be parsed");
            else
                chain_step(&ch, seq, rec, h);
            json_decref(rec);
        }
        if (n > 0)
            snprintf(last, sizeof(last), "%s", PQgetvalue(r, n - 1, 0));
        PQclear(r);
        if (n < 2000 || !v.ok)
            break;
    }
    if (v.ok) {
        r = tc_db_exec(c, "SELECT seq, hash FROM audit_head", 0, NULL);
        if (!r)
            goto out;
        int64_t head = 0;
        unsigned char hh[32];
        if (PQntuples(r) == 1 && tc_parse_i64(PQgetvalue(r, 0, 0), 0, INT64_MAX, &head) == 0 &&
            tc_db_bytea_parse(PQgetvalue(r, 0, 1), hh, 32)) {
            if (head != ch.next_seq - 1 || sodium_memcmp(hh, ch.prev, 32) != 0)
                verdict_bad(&v, ch.next_seq, "records were cut from the tail (the chain head "
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

/* A row of the CSV export as the object a JSON-lines export would hold. */
static json_t *csv_row(char *line)
{
    char *f[12];
    if (csv_split(line, f, 12) != 12)
        return NULL;
    json_int_t seq = strtoll(f[1], NULL, 10);
    if (strcmp(f[0], "checkpoint") == 0)
        return json_pack("{s:{s:I, s:s, s:s, s:s, s:s}}", "checkpoint", "seq", seq, "ts", f[2],
                         "hash", f[8], "key_id", f[9], "signature", f[10]);
    if (strcmp(f[0], "record") == 0)
        return json_pack("{s:I, s:s, s:o}", "seq", seq, "hash", f[8], "record",
                         json_loads(f[11], 0, NULL));
    return NULL;
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
        } else {
            if (!records_started) {
                records_started = true;
                qsort(ch.cps, ch.ncps, sizeof(*ch.cps), checkpoint_cmp);
            }
            int64_t seq = json_integer_value(json_object_get(o, "seq"));
            const char *hh = json_string_value(json_object_get(o, "hash"));
            json_t *rec = json_object_get(o, "record");
            unsigned char h[32];
            size_t l = 0;
            if (!hh || !json_is_object(rec) ||
                sodium_hex2bin(h, 32, hh, strlen(hh), NULL, &l, NULL) != 0 || l != 32)
                verdict_bad(&v, seq, "the record cannot be parsed");
            else
                chain_step(&ch, seq, rec, h);
        }
        json_decref(o);
    }
    free(line);
    if (rc == 0) {
        if (!records_started)
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
    json_object_set_new(o, "first_bad_seq",
                        v->ok ? json_null() : json_integer(v->first_bad_seq));
    json_object_set_new(o, "reason", v->ok ? json_null() : json_string(v->reason));
    json_object_set_new(o, "checkpoint",
                        v->checkpoint_seq ? json_pack("{s:I, s:s, s:s}", "seq",
                                                      (json_int_t)v->checkpoint_seq, "ts",
                                                      v->checkpoint_ts, "key_id",
                                                      v->checkpoint_key_id)
                                          : json_null());
    return o;
}
