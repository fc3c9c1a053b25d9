/* Recording a finished execution: one transaction stores the result, appends the audit
 * record, queues the webhook (if the call asked for one) and notifies every server process
 * (NOTIFY toolcage_done) so long-polls wake wherever they wait. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>

struct tc_keys;

/* view: the API's Execution object; action: "execution.complete", "execution.interrupted",
 * "execution.refused". 0 or -EIO. */
int tc_execution_finish(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                        json_t *actor, const char *tool, const char *exec_id,
                        const char *request_id, json_t *view, const char *action);
