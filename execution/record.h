/* Recording an execution's outcome. One transaction closes the row with a guarded UPDATE
 * (only a row still `running` under the instance that ran it: an outcome is never
 * overwritten; migrations/0008 enforces the same in a trigger), appends the one outcome
 * record, queues the webhook (if the call asked for one) and notifies every server process
 * (NOTIFY toolcage_done) so long-polls wake wherever they wait. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>

struct tc_keys;

struct tc_finish {
    const char *tenant_id, *exec_id, *tool, *request_id;
    int claimed_by;     /* the guard: the instance that ran (or refused) it */
    json_t *actor;      /* the audit actor */
    json_t *view;       /* the API's Execution object; "started" is set from the row */
    const char *action; /* "execution.complete", "execution.interrupted", "execution.refused" */
    bool needs_review;  /* an approved call interrupted after it started */
};

/* Inside the caller's transaction. 0 (stored now, or by an earlier attempt whose answer was
 * lost), -ESTALE (the row is not running under claimed_by: another outcome was recorded),
 * -EIO. f->view gains "started". */
int tc_execution_finish_tx(PGconn *c, const struct tc_keys *keys, const struct tc_finish *f);
/* The same in a transaction of its own. */
int tc_execution_finish(PGconn *c, const struct tc_keys *keys, const struct tc_finish *f);

/* A result that arrived after its execution was closed otherwise (typically: marked
 * interrupted while this process had lost its database lock). It never replaces the
 * outcome: it is kept once in executions.late_result, the approved call is flagged for
 * review, and an `execution.late_result` record says what happened. *ret_stored (may be
 * NULL) is the stored outcome (a new reference, or NULL). 0 or -EIO. */
int tc_execution_late_result(PGconn *c, const struct tc_keys *keys, const struct tc_finish *f,
                             json_t **ret_stored);
