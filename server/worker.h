/* The background worker of one server process.
 *
 * It registers the process in `instances` and holds the advisory lock (7715, id) on a
 * connection of its own for as long as the process lives; it LISTENs for approved work
 * (toolcage_queue) and finished executions (toolcage_done); it claims queued executions with
 * FOR UPDATE SKIP LOCKED and runs them through the launcher exactly once, after checking the
 * stored payload against the approved hash; it expires approvals, marks executions whose
 * process died as failed ("interrupted") and times out long-polls. Webhooks are delivered by
 * a thread of their own (server/webhook.h). */
#pragma once

struct tc_server;
struct tc_worker;

int tc_worker_start(struct tc_server *srv, struct tc_worker **ret_worker, char **ret_error);
int tc_worker_instance_id(const struct tc_worker *w);
/* Stop claiming new work (before the launcher stops). NULL is a no-op. */
void tc_worker_quiesce(struct tc_worker *w);
/* Stops claiming, waits for claimed runs to finish (the launcher must still be up), joins. */
void tc_worker_stop(struct tc_worker *w);
