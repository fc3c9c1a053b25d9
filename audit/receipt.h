/* Execution receipts (docs/audit.md, "Receipts"): a statement about one finished execution
 * (what was asked, under which policy, who approved it, what it was given, what it did and
 * which audit records tell it), signed with the audit signing key (Ed25519), checkable offline
 * with that key's public half alone (`toolcage receipt verify`).
 *
 * The signature covers TC_RECEIPT_CONTEXT, a NUL, then the canonical JSON of the statement
 * (tc_audit_canonical): a signature over anything else (an audit checkpoint, a token) is not a
 * receipt's, and whitespace or key order in the file do not matter; any changed value does. */
#pragma once
#include <jansson.h>

struct tc_keys;

#define TC_RECEIPT_FORMAT  "toolcage.receipt/1"
#define TC_RECEIPT_CONTEXT "toolcage execution receipt v1"

/* {statement, signature: {alg "Ed25519", key_id, public_key (hex), value (base64)}}; steals
 * statement. NULL when out of memory. */
json_t *tc_receipt_sign(const struct tc_keys *keys, json_t *statement);

/* 0 if doc is a receipt signed by the key pk; else -EINVAL with *ret_why saying what fails. */
int tc_receipt_verify(const json_t *doc, const unsigned char pk[32], const char **ret_why);
