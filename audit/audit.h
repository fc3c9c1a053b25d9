/* The audit trail: append-only, hash-chained records in PostgreSQL, with signed checkpoints.
 *
 * Each record is a JSON object; the writer adds "seq" (gap-free, from 1), "ts" and
 * "prev_hash" (hex), and stores hash = BLAKE2b-256(prev_hash_bytes || canonical(record)),
 * canonical = compact JSON with sorted keys and ASCII-only escapes. Verification repeats
 * that from the stored records, online (database) or offline (an export file). */
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
void tc_audit_chain_hash(const unsigned char prev[32], const char *canonical, size_t len,
                         unsigned char out[32]);

/* Append one record inside the caller's open transaction (so that the event and the action
 * it records commit or roll back together). event is not modified. 0 or -EIO. */
int tc_audit_append_tx(PGconn *c, const struct tc_keys *keys, const json_t *event,
                       int64_t *ret_seq);
/* The same in a transaction of its own. */
int tc_audit_append(PGconn *c, const struct tc_keys *keys, const json_t *event, int64_t *ret_seq);

/* Sign a checkpoint of the head if it moved since the last one. 0 or -EIO. */
int tc_audit_checkpoint(PGconn *c, const struct tc_keys *keys);
/* Register the current checkpoint public key (idempotent). */
int tc_audit_publish_key(PGconn *c, const struct tc_keys *keys);

/* Keyed hash of a secret value, the only form in which a value may appear in the trail. */
void tc_audit_value_hash(const struct tc_keys *keys, const void *value, size_t len, char out[65]);

struct tc_audit_verdict {
    bool ok;
    int64_t checked;       /* records checked */
    int64_t first_bad_seq; /* 0 when ok */
    char reason[160];
    int64_t checkpoint_seq; /* newest valid checkpoint, 0 if none */
    char checkpoint_ts[32];
    char checkpoint_key_id[17];
};

/* Walk the whole chain in the database (constant memory). 0, or -EIO on database errors. */
int tc_audit_verify_db(PGconn *c, struct tc_audit_verdict *ret);
/* Verify an export (JSON lines, see docs/audit.md) against a trusted public key (32 bytes);
 * pk NULL trusts no checkpoint (chain only). 0, or -EINVAL if the file cannot be parsed. */
int tc_audit_verify_file(FILE *f, const unsigned char *pk, struct tc_audit_verdict *ret);
json_t *tc_audit_verdict_json(const struct tc_audit_verdict *v);
