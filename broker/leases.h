/* Leases: the credentials a tool's policy grants, handed to one execution for its lifetime.
 *
 * Before a sandbox starts, tc_broker_lease() issues one lease per granted secret (and one
 * scoped token per granted token), records and audits them, then hands the values out only
 * if every lease is still neither expired nor revoked, and every ciphertext opens. After the
 * sandbox ends, tc_broker_release() revokes them all. A grant holds the values in
 * sodium_malloc'ed memory, wiped when freed. See docs/credentials.md. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tc_keys;
struct tc_tool;
struct tc_grant; /* what one execution was granted */

/* Environment variable of the i-th token grant (in policy order): TOOLCAGE_TOKEN for the
 * first, TOOLCAGE_TOKEN_<i> for the others. */
#define TC_GRANT_TOKEN_ENV "TOOLCAGE_TOKEN"
/* Seconds a lease outlives the execution's wall-time limit (start-up and tear-down). */
#define TC_LEASE_GRACE_SECONDS 30

/* Lease what tool's "credentials" grant to execution exec_id of tenant_id, for an execution
 * of at most ttl_ms wall time. Always sets *ret on success (an empty grant when the tool
 * grants nothing; then the database is not touched). On failure nothing stays granted (what
 * was issued is revoked), the refusal is audited, and *ret_error (caller frees) names the
 * credential and why:
 *   -ENOENT   a granted secret is not stored for this tenant
 *   -EPERM    the secret's allowed_tools does not include this tool
 *   -ERANGE   the execution may run longer than the secret's max_ttl_seconds
 *   -ESTALE   a lease expired or was revoked before its value was handed out
 *   -EBADMSG  a ciphertext does not authenticate (altered, or moved from another row)
 *   -ENOKEY   a secret is sealed under a master key this process does not hold
 *   -EIO      database error (no *ret_error)
 * The first five are the caller's 422 urn:toolcage:problem:credential-unavailable. */
int tc_broker_lease(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                    const struct tc_tool *tool, const char *exec_id, int64_t ttl_ms,
                    struct tc_grant **ret, char **ret_error);

/* Revoke every open lease and token of the execution (audited, one transaction). Idempotent.
 * 0 or -EIO. */
int tc_broker_release(PGconn *c, const struct tc_keys *keys, const char *exec_id);

/* Put the grant into a launcher spec: "NAME=value" entries appended to spec.env, and
 * spec.secret_files [{name, content_b64}] (files appear as /run/secrets/<name>, mode 0400).
 * 0 or -ENOMEM. */
int tc_grant_apply_spec(const struct tc_grant *g, json_t *spec);
/* The exact values granted (secrets and tokens), for the redactor (struct tc_exec_filter's
 * secrets/nsecrets). Valid until tc_grant_free(). */
const char *const *tc_grant_values(const struct tc_grant *g, size_t *ret_n);
/* {"leases": [{lease_id, secret, as, name, expires_at}], "tokens": [{token_id, audience,
 * scope, env, expires_at}]}: ids and names, never values. New reference. */
json_t *tc_grant_summary(const struct tc_grant *g);
bool tc_grant_empty(const struct tc_grant *g);
void tc_grant_free(struct tc_grant *g); /* wipes; NULL is a no-op */
