/* Helper of bench/audit_bench.sh (run that, not this).
 *
 *   audit_seed seed CONNINFO MASTER_KEY_FILE N TENANT_ID
 *     appends N records to an empty audit_log with a valid hash chain (tc_audit_canonical,
 *     tc_audit_digest, tc_audit_link and tc_audit_mac, as the server writes them) and a
 *     signed checkpoint every 100, by
 *     COPY; 1 tenant in 20 is TENANT_ID (the one the bench queries as), the others invented.
 *     Spread over the last 30 days; tools, actions, statuses and actors are skewed like a real
 *     trail; 1 record in 100 carries a "reason" for free-text search.
 *   audit_seed append CONNINFO MASTER_KEY_FILE N TENANT_ID
 *     times N x tc_audit_append (own transaction: head lock, insert, head update) against a
 *     baseline measured in the same run: N x the same record INSERTed, in its own
 *     transaction, into audit_plain (a copy of audit_log's columns and indexes, no chain, no
 *     triggers). Prints both per-record costs and the ratio. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"
#include "core/keys.h"
#include "common/buf.h"
#include "common/util.h"
#include "core/db.h"

static const char *const tools[] = {"python", "python",     "python",    "shell",   "shell",
                                    "deploy", "http_fetch", "sql_query", "browser", "node"};
static const char *const words[] = {"prod-db",  "rollback", "migration", "customer-export",
                                    "payments", "staging",  "hotfix",    "nightly-report"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* The event of record i (seq i + 1), without seq/ts/prev_hash. */
static json_t *event(int64_t i, const char *tenant, char tenants[20][37], char actors[20][5][37])
{
    int t = (int)(rnd() % 20);
    const char *tenant_id = t == 0 ? tenant : tenants[t];
    int a = (int)(rnd() % 5);
    const char *tool = tools[rnd() % TC_ARRAY_SIZE(tools)];
    char exec_id[37], req_id[37];
    tc_uuid7(exec_id);
    tc_uuid7(req_id);
    json_t *actor = json_pack("{s:s, s:s, s:s}", "type", "api_key", "id", actors[t][a], "role",
                              a == 4 ? "admin" : "agent");
    json_t *ev;
    if (i % 2 == 0) {
        char code[96], hash[65];
        snprintf(code, sizeof(code), "print(%" PRIu64 ")\nimport sys; sys.exit(0)", rnd() % 100000);
        unsigned char h[32];
        crypto_generichash(h, 32, (const unsigned char *)code, strlen(code), NULL, 0);
        sodium_bin2hex(hash, sizeof(hash), h, 32);
        ev = json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:n, s:[], s:{s:i, s:i, "
                       "s:i}, s:{}, s:[]}}",
                       "action", "execute", "tenant_id", tenant_id, "actor", actor, "tool", tool,
                       "execution_id", exec_id, "request_id", req_id, "decision", "allowed",
                       "params", "code", code, "code_hash", hash, "stdin", "files", "limits",
                       "timeout_ms", 10000, "memory_mb", 256, "pids", 64, "redactions", "findings");
    } else {
        uint64_t r = rnd() % 100;
        const char *status = r < 80 ? "completed" : r < 95 ? "failed" : "timeout";
        ev = json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:[]}", "action",
                       "execution.complete", "tenant_id", tenant_id, "actor", actor, "tool", tool,
                       "execution_id", exec_id, "request_id", req_id, "status", status, "exit_code",
                       r < 80 ? 0 : 1, "duration_ms", (int)(rnd() % 3000), "cpu_ms",
                       (int)(rnd() % 2000), "output_bytes", (int)(rnd() % 10000),
                       "policy_violations");
    }
    if (rnd() % 100 == 0) {
        char reason[96];
        snprintf(reason, sizeof(reason), "%s for ticket %" PRIu64,
                 words[rnd() % TC_ARRAY_SIZE(words)], rnd() % 10000);
        json_object_set_new(ev, "reason", json_string(reason));
    }
    return ev;
}

/* One COPY text-format field: backslash is the escape character. */
static int copy_escape(struct tc_buf *b, const char *s)
{
    int rc = 0;
    for (const char *p = s; *p && rc == 0; p++) {
        if (*p == '\\')
            rc = tc_buf_append(b, "\\\\", 2);
        else if (*p == '\t')
            rc = tc_buf_append(b, "\\t", 2);
        else if (*p == '\n')
            rc = tc_buf_append(b, "\\n", 2);
        else
            rc = tc_buf_append(b, p, 1);
    }
    return rc;
}

static int exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK ||
             PQresultStatus(r) == PGRES_COPY_IN;
    if (!ok)
        fprintf(stderr, "audit_seed: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok ? 0 : -1;
}

static int copy_flush(PGconn *c, struct tc_buf *b)
{
    if (b->len && PQputCopyData(c, b->data, (int)b->len) != 1) {
        fprintf(stderr, "audit_seed: COPY: %s", PQerrorMessage(c));
        return -1;
    }
    tc_buf_reset(b);
    return 0;
}

static int copy_end(PGconn *c)
{
    if (PQputCopyEnd(c, NULL) != 1)
        return -1;
    PGresult *r;
    int rc = 0;
    while ((r = PQgetResult(c))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            fprintf(stderr, "audit_seed: COPY: %s", PQerrorMessage(c));
            rc = -1;
        }
        PQclear(r);
    }
    return rc;
}

static void make_ids(char tenants[20][37], char actors[20][5][37])
{
    for (int t = 0; t < 20; t++) {
        tc_uuid7(tenants[t]);
        for (int a = 0; a < 5; a++)
            tc_uuid7(actors[t][a]);
    }
}

static int seed(PGconn *c, const struct tc_keys *keys, int64_t n, const char *tenant)
{
    static char tenants[20][37], actors[20][5][37];
    make_ids(tenants, actors);
    /* continue the chain after what is there (`keys create` records itself) */
    unsigned char prev[32] = {0}, hash[32];
    int64_t base = 0;
    if (exec_ok(c, "BEGIN") < 0)
        return -1;
    PGresult *h = PQexec(c, "SELECT seq, encode(hash, 'hex') FROM audit_head FOR UPDATE");
    if (PQresultStatus(h) != PGRES_TUPLES_OK || PQntuples(h) != 1 ||
        sodium_hex2bin(prev, 32, PQgetvalue(h, 0, 1), 64, NULL, NULL, NULL) != 0) {
        fprintf(stderr, "audit_seed: cannot read audit_head: %s", PQerrorMessage(c));
        PQclear(h);
        return -1;
    }
    base = strtoll(PQgetvalue(h, 0, 0), NULL, 10);
    PQclear(h);
    if (exec_ok(c, "COPY audit_log (seq, record, hash, digest, mac, mac_key_id) FROM STDIN") < 0)
        return -1;
    struct tc_buf b, cps;
    tc_buf_init(&b, 64 << 20);
    tc_buf_init(&cps, 64 << 20);
    int64_t start_ms = tc_wall_ms() - 30LL * 86400 * 1000, step = 30LL * 86400 * 1000 / (n + 1);
    double t0 = now_s();
    for (int64_t i = 0; i < n; i++) {
        int64_t seq = base + i + 1;
        char ts[32], prev_hex[65], hash_hex[65];
        tc_iso8601(start_ms + i * step, ts);
        sodium_bin2hex(prev_hex, sizeof(prev_hex), prev, 32);
        json_t *rec = event(i, tenant, tenants, actors);
        json_object_set_new(rec, "seq", json_integer(seq));
        json_object_set_new(rec, "ts", json_string(ts));
        json_object_set_new(rec, "prev_hash", json_string(prev_hex));
        size_t len;
        char *canon = tc_audit_canonical(rec, &len);
        json_decref(rec);
        unsigned char digest[32], mac[32];
        char digest_hex[65], mac_hex[65];
        tc_audit_digest(canon, len, digest);
        tc_audit_link(prev, digest, hash);
        tc_audit_mac(keys->audit_mac_key, seq, hash, mac);
        sodium_bin2hex(hash_hex, sizeof(hash_hex), hash, 32);
        sodium_bin2hex(digest_hex, sizeof(digest_hex), digest, 32);
        sodium_bin2hex(mac_hex, sizeof(mac_hex), mac, 32);
        int brc = tc_buf_appendf(&b, "%" PRId64 "\t", seq);
        if (brc == 0)
            brc = copy_escape(&b, canon);
        if (brc == 0)
            brc = tc_buf_appendf(&b, "\t\\\\x%s\t\\\\x%s\t\\\\x%s\t%s\n", hash_hex, digest_hex,
                                 mac_hex, keys->master_id);
        free(canon);
        if (brc < 0)
            return -1;
        memcpy(prev, hash, 32);
        if (seq % TC_AUDIT_CHECKPOINT_EVERY == 0) {
            char msg[192], sig_hex[129];
            unsigned char sig[64];
            snprintf(msg, sizeof(msg), "toolcage-audit-checkpoint-v1\n%" PRId64 "\n%s\n%s", seq,
                     hash_hex, ts);
            crypto_sign_detached(sig, NULL, (const unsigned char *)msg, strlen(msg),
                                 keys->audit_sign_sk);
            sodium_bin2hex(sig_hex, sizeof(sig_hex), sig, 64);
            if (tc_buf_appendf(&cps, "%" PRId64 "\t\\\\x%s\t%s\t%s\t\\\\x%s\n", seq, hash_hex, ts,
                               keys->audit_key_id, sig_hex) < 0)
                return -1;
        }
        if (b.len > (8 << 20) && copy_flush(c, &b) < 0)
            return -1;
    }
    if (copy_flush(c, &b) < 0 || copy_end(c) < 0)
        return -1;
    double t1 = now_s();
    if (exec_ok(c, "COPY audit_checkpoints (seq, hash, ts, key_id, signature) FROM STDIN") < 0 ||
        copy_flush(c, &cps) < 0 || copy_end(c) < 0)
        return -1;
    char hh[65], sql[256];
    sodium_bin2hex(hh, sizeof(hh), prev, 32);
    snprintf(sql, sizeof(sql), "UPDATE audit_head SET seq = %" PRId64 ", hash = '\\x%s'::bytea",
             base + n, hh);
    if (exec_ok(c, sql) < 0 || tc_audit_publish_key(c, keys) < 0 || exec_ok(c, "COMMIT") < 0)
        return -1;
    printf("seeded %" PRId64 " records with a valid chain and %" PRId64
           " signed checkpoints in %.1f s (%.1f s generating + COPY, %.1f s indexes/commit)\n",
           n, n / TC_AUDIT_CHECKPOINT_EVERY, now_s() - t0, t1 - t0, now_s() - t1);
    tc_buf_free(&b);
    tc_buf_free(&cps);
    return 0;
}

static int append(PGconn *c, const struct tc_keys *keys, int64_t n, const char *tenant)
{
    static char tenants[20][37], actors[20][5][37];
    make_ids(tenants, actors);
    if (exec_ok(c, "CREATE TABLE IF NOT EXISTS audit_plain (LIKE audit_log INCLUDING ALL)") < 0)
        return -1;
    /* Alternate the two so that cache and autovacuum effects fall on both alike. */
    double t_plain = 0, t_audit = 0;
    int64_t base = 10000000000LL;
    for (int64_t i = 0; i < n; i++) {
        json_t *ev = event(i, tenant, tenants, actors);
        double t0 = now_s();
        if (tc_audit_append(c, keys, ev, NULL) < 0) {
            fprintf(stderr, "audit_seed: tc_audit_append: %s", PQerrorMessage(c));
            json_decref(ev);
            return -1;
        }
        double t1 = now_s();
        /* The baseline: the same record, as canonical text, one INSERT in its own transaction. */
        char ts[32], seqs[24], hash[67] = "\\x";
        tc_iso8601(tc_wall_ms(), ts);
        json_object_set_new(ev, "seq", json_integer(base + i));
        json_object_set_new(ev, "ts", json_string(ts));
        json_object_set_new(ev, "prev_hash", json_string("00"));
        size_t len;
        char *canon = tc_audit_canonical(ev, &len);
        unsigned char h[32];
        randombytes_buf(h, 32);
        sodium_bin2hex(hash + 2, 65, h, 32);
        snprintf(seqs, sizeof(seqs), "%" PRId64, base + i);
        const char *p[] = {seqs, canon, hash, keys->master_id};
        double t2 = now_s();
        PGresult *r = PQexec(c, "BEGIN");
        PQclear(r);
        /* the same columns as a sealed record (random bytes stand in for digest and mac) */
        r = tc_db_exec(c,
                       "INSERT INTO audit_plain (seq, record, hash, digest, mac, mac_key_id)"
                       " VALUES ($1, $2::jsonb, $3::bytea, $3::bytea, $3::bytea, $4)",
                       4, p);
        int ok = r != NULL;
        PQclear(r);
        r = PQexec(c, "COMMIT");
        PQclear(r);
        double t3 = now_s();
        free(canon);
        json_decref(ev);
        if (!ok) {
            fprintf(stderr, "audit_seed: baseline insert: %s", PQerrorMessage(c));
            return -1;
        }
        t_audit += t1 - t0;
        t_plain += t3 - t2;
    }
    printf("append: tc_audit_append %.3f ms/record; baseline plain INSERT (same record, same "
           "indexes, no chain) %.3f ms/record; ratio %.2fx (%" PRId64 " each)\n",
           t_audit * 1000 / (double)n, t_plain * 1000 / (double)n, t_audit / t_plain, n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6 || (strcmp(argv[1], "seed") && strcmp(argv[1], "append"))) {
        fprintf(stderr, "usage: audit_seed seed|append CONNINFO MASTER_KEY_FILE N TENANT_ID\n");
        return 2;
    }
    if (sodium_init() < 0)
        return 1;
    int64_t n = 0;
    if (tc_parse_i64(argv[4], 1, 100000000, &n) < 0) {
        fprintf(stderr, "audit_seed: N must be 1..100000000\n");
        return 2;
    }
    struct tc_keys *keys = NULL;
    char *err = NULL;
    if (tc_keys_load(argv[3], &keys, &err) < 0) {
        fprintf(stderr, "audit_seed: %s\n", err ? err : "cannot load the master key");
        free(err);
        return 1;
    }
    PGconn *c = tc_db_connect(argv[2], &err);
    if (!c) {
        fprintf(stderr, "audit_seed: %s\n", err ? err : "cannot connect");
        free(err);
        tc_keys_free(keys);
        return 1;
    }
    /* tc_db_connect sets the server's statement timeout; one COPY of a million rows is longer. */
    int rc = exec_ok(c, "SET statement_timeout = 0");
    if (rc == 0)
        rc = strcmp(argv[1], "seed") == 0 ? seed(c, keys, n, argv[5]) : append(c, keys, n, argv[5]);
    PQfinish(c);
    tc_keys_free(keys);
    return rc < 0 ? 1 : 0;
}
