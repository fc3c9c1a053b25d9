/* GET /v1/executions/{id}/receipt and the console's download (docs/audit.md, "Receipts"):
 * a signed statement of what one finished execution was asked, under which policy, who
 * approved it, what it was given, what it did and which audit records tell it. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdbool.h>

struct tc_keys;

/* The receipt of execution id of tenant_id (audit/receipt.h: {statement, signature}):
 * 0 and *ret, -ENOENT (no such execution of this tenant), -EAGAIN (it has no outcome yet),
 * -EIO, -ENOMEM. deciders: name who decided its approval (false: null, for agents, who see
 * the decisions and reasons but not the reviewers, as GET /v1/approvals shows them). */
int tc_execution_receipt(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                         const char *id, bool deciders, json_t **ret);
