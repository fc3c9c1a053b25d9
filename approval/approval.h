/* The approval gate: which calls are held, what exactly was approved, and the race-free
 * state machine (pending -> approved | denied | expired | cancelled) kept in PostgreSQL.
 * Functions here take a connection and return 0 or a negative errno; server/ and api/ map
 * those to HTTP statuses and log. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>

#include "execution/request.h"
#include "policy/policy.h"

struct tc_keys;

#define TC_APPROVAL_TTL_DEFAULT    3600
#define TC_APPROVAL_MANUAL_DEFAULT 2

/* Does this call need a human? *ret_reasons (new array, or NULL when not held) lists why:
 * "irreversible", "tier:human_approve", "tier:manual_only", "prescreen:<severity>".
 * prescreen_wants_approval: the pre-screen decided `approve`. */
bool tc_approval_needed(const struct tc_tool *tool, bool prescreen_wants_approval,
                        json_t **ret_reasons);
/* Could any call of this tool be held, whatever its code? *ret_reasons (new array, or NULL
 * when not) lists why: what tc_approval_needed() gives without a pre-screen, plus
 * "prescreen:<severity>" for each severity the tool's pre-screen holds for (when it scans
 * at all). A credential of such a tool may exist only inside an approved execution. */
bool tc_approval_may_hold(const struct tc_tool *tool, json_t **ret_reasons);
int tc_approval_required_approvers(const struct tc_tool *tool);
int tc_approval_ttl_seconds(const struct tc_tool *tool);

/* Everything that will run, as one object: {tool, code, stdin, files, limits, credentials,
 * tool_policy (tc_approval_tool_digest), and collect when the request has it}.
 * The hash is BLAKE2b-256 of its canonical JSON (see docs/audit.md for the canonical form). */
json_t *tc_approval_payload(const struct tc_tool *tool, const struct tc_exec_request *req,
                            const int64_t limits[TC_LIMIT__COUNT]);
void tc_approval_payload_hash(const json_t *payload, unsigned char out[32]);
/* BLAKE2b-256 (hex) of the canonical JSON of the tool's policy entry as loaded. */
void tc_approval_tool_digest(const struct tc_tool *tool, char hex[65]);

/* A new approval of payload (stolen), held for reasons: {id, payload, reasons, payload_hash
 * (bytea hex), tier, ttl, required}; NULL when out of memory. */
json_t *tc_approval_new(const struct tc_tool *tool, json_t *payload, json_t *reasons);
/* Store it, pending, for the held execution (its row written before, same transaction).
 * ret_expires: when it expires (RFC 3339). 0 or -EIO. */
int tc_approval_insert_tx(PGconn *c, json_t *approval, const char *tenant_id,
                          const char *execution_id, const char *tool, const char *requester_key_id,
                          json_t *findings, const char *public_url, char ret_expires[32]);

/* Reviewer notifications (docs/approvals.md, "Notifications"): event ("approval.pending",
 * "approval.reminder") of approval_id queued for every sink its tenant configured
 * (tenant_notifications), in c's transaction, to be delivered by the webhook thread
 * (server/webhook.h). What is held, why, until when, and a link to the console under
 * public_url; never code, stdin or files. 0 or -EIO. */
/* The same for an egress ask (approval/egress_ask.h): event "egress.ask", a link to
 * /console/egress-asks/{id}; host, port, tool, until when. 0 or -EIO. */
int tc_egress_ask_notify_tx(PGconn *c, const char *tenant_id, const char *ask_id,
                            const char *public_url);
/* The outbox rows themselves: one per sink of the tenant; approval_id or ask_id (the other
 * NULL) lets the delivery thread give up a notice that is no longer true. */
int tc_notify_sinks_tx(PGconn *c, const char *tenant_id, const char *execution_id,
                       const char *approval_id, const char *ask_id, const char *event,
                       json_t *facts, const char *text, const char *subject, const char *link);
int tc_approval_notify_tx(PGconn *c, const char *tenant_id, const char *approval_id,
                          const char *event, const char *public_url);
/* Queue the reminders that are due (pending approvals within their tenant's
 * remind_before_seconds of expiry, each once), in a transaction of its own. How many, -EIO. */
int tc_approval_remind_due(PGconn *c, const char *public_url);
/* A session ended (in c's transaction): its call still held is withdrawn (approval and
 * execution `cancelled`), one approved but not started yet closes as `cancelled`; audited.
 * How many, or -EIO. */
int tc_approval_session_ended_tx(PGconn *c, const struct tc_keys *keys, const char *session_id,
                                 json_t *actor);

enum tc_decision { TC_DECIDE_APPROVE, TC_DECIDE_DENY };

struct tc_decide_result {
    char status[16]; /* the approval's status after the decision */
    char execution_id[37];
    int approvals; /* approvals counted so far */
    int required;
};

/* Apply one decision in one transaction, with its audit record:
 * -ENOENT no such approval for this tenant; -EPERM the decider asked for it (maker is not
 * checker: the requesting key is requester_guard, or is bound to decider_person);
 * -EALREADY this decider already decided; -ESTALE not pending (decided, expired or
 * cancelled; expiry is enforced here too); -EIO database. actor: the audit actor object.
 * decider names the credential ("key:<id>", "user:<name>"); when decider_person is not
 * empty the decision is the person's ("person:<id>"), so a person's keys and console login
 * count once. */
int tc_approval_decide(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                       const char *approval_id, const char *decider, const char *decider_person,
                       const char *requester_guard, json_t *actor, enum tc_decision d,
                       const char *reason, struct tc_decide_result *ret);

/* Cancel a pending approval and its execution (the requesting tenant). -ENOENT no such
 * execution of this tenant; -ESTALE not pending, or never held; -EIO. */
int tc_approval_cancel(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                       const char *execution_id, json_t *actor);

/* Mark every pending approval past its expiry as expired (audited). Returns how many. */
int tc_approval_expire_due(PGconn *c, const struct tc_keys *keys);

/* Detail view of one approval (payload, findings, decisions) or NULL (-ENOENT via *ret_err). */
json_t *tc_approval_get(PGconn *c, const char *tenant_id, const char *approval_id, int *ret_err);
