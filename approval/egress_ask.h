/* Ask on egress: a running execution's connection to a host its tool's allowlist does not name,
 * held at the egress proxy until a reviewer answers (migrations/0021_egress_asks.sql). The
 * rows' state machine, pending -> allowed_once | allowed_execution | denied | expired |
 * withdrawn, each step audited in the same transaction. Allowing a connection starts nothing:
 * these are not approvals of an execution (approval/approval.h). 0 or a negative errno. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

struct tc_keys;

enum tc_egress_verdict { TC_EGRESS_ALLOW_ONCE, TC_EGRESS_ALLOW_EXECUTION, TC_EGRESS_DENY };

/* "allow_once" | "allow_execution" | "deny" -> 0..2, or -1 */
int tc_egress_verdict_parse(const char *s);
const char *tc_egress_verdict_name(enum tc_egress_verdict v);

/* A new pending ask for ask n of execution_id (which must be running), expiring after
 * timeout_ms; audited "egress.ask"; the tenant's notification sinks told (links under
 * public_url). ret_id: its id. -ENOENT (no running execution), -EIO. */
int tc_egress_ask_insert(PGconn *c, const struct tc_keys *keys, const char *execution_id, long n,
                         const char *host, int port, int64_t timeout_ms, const char *public_url,
                         char ret_id[37]);

/* A reviewer's answer. -ENOENT (no such ask of this tenant), -EPERM (the decider's key or
 * person asked for the execution: maker is not checker), -ESTALE (not pending: answered,
 * expired or withdrawn; expiry is enforced here too), -EIO. actor: the audit actor. */
int tc_egress_ask_decide(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                         const char *ask_id, const char *decider, const char *decider_key,
                         const char *decider_person, json_t *actor, enum tc_egress_verdict v,
                         const char *reason);

/* The proxy stopped waiting without an answer: status "expired" (its clock ran out) or
 * "withdrawn" (the execution ended first); audited. 0 (also when it was not pending), -EIO. */
int tc_egress_ask_close(PGconn *c, const struct tc_keys *keys, const char *ask_id,
                        const char *status);

/* Pending asks past their expiry by more than grace_s (their server is gone): expired,
 * audited. How many, or -EIO. */
int tc_egress_ask_expire_due(PGconn *c, const struct tc_keys *keys, int grace_s);

/* One ask as the API shows it: {id, execution_id, tool, host, port, status, created_at,
 * expires_at, decided_at, decider, reason, code}, or NULL (-ENOENT / -EIO in *ret_err). */
json_t *tc_egress_ask_get(PGconn *c, const char *tenant_id, const char *ask_id, int *ret_err);
/* A tenant's asks, newest first; status NULL: every status. NULL on a database error. */
json_t *tc_egress_ask_list(PGconn *c, const char *tenant_id, const char *status, int limit);
