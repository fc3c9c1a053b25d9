/* Outgoing webhooks: a signed POST of the finished execution to the call's callback_url,
 * retried with exponential backoff. The receiver checks
 *   X-Toolcage-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
 * where secret is the tenant's webhook secret (`toolcage keys webhook-secret --tenant NAME`). */
#pragma once
#include <libpq-fe.h>
#include <stdbool.h>

struct tc_keys;

/* The tenant's signing secret as 64 hex characters (the HMAC key is these ASCII bytes). */
void tc_webhook_secret(const struct tc_keys *keys, const char *tenant_id, char out[65]);
/* Deliver what is due (at most a few per call). allow_private: permit loopback/private
 * targets (tests and closed networks); otherwise connections to them are refused at connect
 * time, after DNS, so a name that resolves to an internal address cannot be used. */
void tc_webhook_deliver_due(PGconn *c, const struct tc_keys *keys, bool allow_private);
