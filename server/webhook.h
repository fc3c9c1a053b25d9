/* Outgoing webhooks: a signed POST of the finished execution to the call's callback_url,
 * retried with exponential backoff; and, through the same outbox, reviewer notifications
 * (approval/approval.h tc_approval_notify_tx): a signed JSON webhook, a Slack-compatible
 * message, or an e-mail through the operator's SMTP relay. The receiver checks
 *   X-Toolcage-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
 * where secret is the tenant's webhook secret (`toolcage keys webhook-secret --tenant NAME`).
 *
 * Delivery (webhook.c): the row is an outbox entry, written in the transaction that finishes
 * the execution (execution/record.c). A delivery thread of each server process, with a libcurl
 * multi handle of its own, claims due rows (FOR UPDATE SKIP LOCKED, then a lease that other
 * processes respect and that expires if this one dies), delivers them outside any
 * transaction, and records each outcome in one statement: delivered, or the next attempt
 * after a backoff (1 s, 2 s, 4 s ... one hour at most, kept in next_attempt_at), or given up
 * after the last attempt. A tenant has at most per_tenant deliveries in flight (counted over
 * every process sharing the database), so a receiver that never answers delays only its own
 * tenant's deliveries, and nothing else: executions, expiry and long-polls run elsewhere.
 *
 * Targets (webhook_target.c): the address every connection goes to is checked when the
 * socket is opened, with the egress proxy's classifier (sandbox/egress_rules.h), so a name
 * that resolves, or re-resolves, to an internal address is never reached; no proxy from the
 * environment is used; redirects are not followed. When the call is made, a callback_url that
 * names or resolves to such an address is refused (tc_webhook_target_refused). Metadata and
 * multicast addresses are refused always; loopback, private, link-local and the other
 * non-public classes unless allow_private (TOOLCAGE_WEBHOOK_ALLOW_PRIVATE=1: tests, closed
 * networks). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct tc_keys;
struct tc_webhooks;

/* The tenant's signing secret as 64 hex characters (the HMAC key is these ASCII bytes). */
void tc_webhook_secret(const struct tc_keys *keys, const char *tenant_id, char out[65]);

/* May a webhook go to url? false if so; true with one sentence in why (naming the address
 * and its class) if not. A host name is resolved, waiting at most one second; a name that
 * does not resolve in time is let through (the connect-time check still applies). */
bool tc_webhook_target_refused(const char *url, bool allow_private, char *why, size_t why_size);

struct tc_webhooks_options {
    const char *database_url;
    const struct tc_keys *keys;
    bool allow_private;
    int instance_id;        /* this process in `instances`: the lease holder */
    unsigned max_in_flight; /* deliveries of this process at once */
    unsigned per_tenant;    /* deliveries of one tenant at once, over all processes */
    unsigned max_attempts;  /* then the delivery is given up */
    const char *smtp_url;   /* e-mail notifications' relay (TOOLCAGE_SMTP_URL), or NULL */
    const char *smtp_from;
};

/* Connects to the database and starts the delivery thread. 0, or -errno with *ret_error. */
int tc_webhooks_start(const struct tc_webhooks_options *opts, struct tc_webhooks **ret_webhooks,
                      char **ret_error);
/* Stops claiming, aborts the deliveries in flight (their rows are due again at once, the
 * attempt counted) and joins the thread. Returns within about a second. NULL is a no-op. */
void tc_webhooks_stop(struct tc_webhooks *w);
