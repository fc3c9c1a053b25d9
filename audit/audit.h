/* The audit trail: append-only, hash-chained records in PostgreSQL, with signed checkpoints
 * and a keyed authentication code on every record (see docs/audit.md for the trust model).
 *
 * Each record is a JSON object; the writer adds "seq" (gap-free, from 1), "ts" and
 * "prev_hash" (hex). canonical = compact JSON with sorted keys and ASCII-only escapes.
 * Records written since migration 0007 ("v2") store
 *   digest = BLAKE2b-256(canonical)
 *   hash   = BLAKE2b-256(prev_hash_bytes || digest)
 *   mac    = BLAKE2b-256 keyed with the audit MAC key (from the master key) of
 *            (hash || LE64(seq)), with the id of the master key that made it;
 * older records ("v1") store hash = BLAKE2b-256(prev_hash_bytes || canonical) only.
 * The chain (digest, hash) is public: anyone can check it, and an export can carry only the
 * digest of a record it withholds (another tenant's) and still chain. The mac is secret: only
 * a holder of the master key can make one, so a record appended with database credentials
 * alone does not verify online, and the server never signs a checkpoint over such a record.
 * Signed checkpoints (Ed25519) are what an offline verifier trusts. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct tc_keys;

#define TC_AUDIT_CHECKPOINT_EVERY 100 /* records between signed checkpoints (also every minute) */

/* Canonical text of a record (caller frees). */
char *tc_audit_canonical(const json_t *record, size_t *ret_len);
/* v1 link (records written before migration 0007). */
void tc_audit_chain_hash(const unsigned char prev[32], const char *canonical, size_t len,
                         unsigned char out[32]);
/* v2: the record's digest, its link into the chain, and its authentication code. */
void tc_audit_digest(const char *canonical, size_t len, unsigned char out[32]);
void tc_audit_link(const unsigned char prev[32], const unsigned char digest[32],
                   unsigned char out[32]);
void tc_audit_mac(const unsigned char key[32], int64_t seq, const unsigned char hash[32],
                  unsigned char out[32]);

/* Append one record inside the caller's open transaction (so that the event and the action
 * it records commit or roll back together). event is not modified. 0 or -EIO. */
int tc_audit_append_tx(PGconn *c, const struct tc_keys *keys, const json_t *event,
                       int64_t *ret_seq);
/* The same in a transaction of its own. */
int tc_audit_append(PGconn *c, const struct tc_keys *keys, const json_t *event, int64_t *ret_seq);

/* Sign a checkpoint of the head if it moved since the newest checkpoint signed by a key
 * this process holds, after checking every record since then (chain and authentication
 * codes). *ret_seq (may be NULL): the newest such checkpoint afterwards (0: none).
 * 0; -EBADMSG when a record since that checkpoint does not verify (nothing is signed);
 * -EIO. */
int tc_audit_checkpoint(PGconn *c, const struct tc_keys *keys, int64_t *ret_seq);
/* Register the current checkpoint public key (idempotent). */
int tc_audit_publish_key(PGconn *c, const struct tc_keys *keys);

/* Keyed hash of a secret value, the only form in which a value may appear in the trail.
 * The key is per tenant (derived from the audit value key and the tenant id), so one
 * tenant cannot confirm a guess of another tenant's value. _with: under a given audit
 * value key (e.g. a previous master key's). */
void tc_audit_value_hash(const struct tc_keys *keys, const char *tenant_id, const void *value,
                         size_t len, char out[65]);
void tc_audit_value_hash_with(const unsigned char key[32], const char *tenant_id, const void *value,
                              size_t len, char out[65]);

struct tc_audit_verdict {
    bool ok;
    int64_t checked;       /* records checked */
    int64_t withheld;      /* of which withheld (export lines with digest, no content) */
    int64_t first_bad_seq; /* 0 when ok */
    char reason[200];
    int64_t checkpoint_seq; /* newest valid checkpoint, 0 if none */
    char checkpoint_ts[32];
    char checkpoint_key_id[17];
};

/* Walk the whole chain in the database (constant memory), checking authentication codes
 * with keys (current and previous master keys). 0, or -EIO on database errors. */
int tc_audit_verify_db(PGconn *c, const struct tc_keys *keys, struct tc_audit_verdict *ret);
/* Verify an export (JSON lines or CSV, see docs/audit.md) against a trusted public key (32
 * bytes); pk NULL trusts no checkpoint. Every record must be covered by a checkpoint that
 * verifies under pk. 0, or -EINVAL if the file cannot be parsed. */
int tc_audit_verify_file(FILE *f, const unsigned char *pk, struct tc_audit_verdict *ret);
json_t *tc_audit_verdict_json(const struct tc_audit_verdict *v);
