/* Cancelling an execution that is no longer held for approval (a held one is withdrawn by
 * tc_approval_cancel, approval/approval.h): a queued one (approved, not claimed yet) closes
 * at once as `cancelled`; for a running one the request is audited and announced to every
 * server process (NOTIFY toolcage_cancel, <id>): the one whose launcher runs it kills the
 * sandbox, and the outcome (status `cancelled`) is recorded as for any run. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>

struct tc_keys;

enum tc_cancel_result {
    TC_CANCEL_DONE = 0,      /* it was queued: now cancelled, with its outcome record */
    TC_CANCEL_REQUESTED = 1, /* it runs: the sandbox is being killed */
};

/* In a transaction of its own. TC_CANCEL_DONE or TC_CANCEL_REQUESTED; -ENOENT (no execution
 * of this tenant has this id), -ESTALE (it has finished, or waits for approval), -EIO.
 * actor: the audit actor of the caller. */
int tc_execution_cancel(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                        const char *execution_id, json_t *actor);

/* queued -> cancelled in c's transaction (the row locked by the caller): the call never ran;
 * its outcome record says so. TC_CANCEL_DONE, or -EIO (not queued any more, database). */
int tc_execution_close_queued_tx(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                                 const char *id, const char *tool, json_t *actor);
