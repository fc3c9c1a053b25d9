/* The background worker of one server process.
 *
 * It registers the process in `instances` and holds the advisory lock (7715, id) on a
 * connection of its own for as long as the process lives. A monitor thread refreshes
 * `instances.heartbeat_at` on that connection every half second; when the connection breaks
 * (PostgreSQL restarted, the backend was terminated) the lock is gone with it, and
 * srv->instance_locked is false until the monitor has reconnected and taken it again. An
 * instance that was declared dead meanwhile (see below) is fenced: it registers anew under
 * a new id. Without its lock the process claims nothing, starts nothing and sweeps nothing.
 *
 * The worker thread LISTENs for approved work (toolcage_queue) and finished executions
 * (toolcage_done); it claims queued executions with FOR UPDATE SKIP LOCKED (only with a
 * sandbox slot reserved) and runs them through the launcher exactly once, after checking the
 * stored payload against the approved hash; it expires approvals. A third thread resumes
 * calls queued for a sandbox slot and long-polls at their deadlines, every 100 ms, whatever
 * the other two wait for (a queued call's 503 needs no database); webhooks are delivered by a
 * thread of their own (server/webhook.h).
 *
 * The sweeper closes executions left `running` by a dead instance: one whose lock is free,
 * seen so for TC_SWEEP_GRACE_MS by this process, and whose heartbeat is that old too. In one
 * transaction holding that instance's lock it marks the instance dead, then for each row:
 * an approved call that never started (no execution.start) is requeued (at most
 * TC_MAX_ATTEMPTS claims); anything else becomes `failed` with error
 * `interrupted_before_start` or `interrupted_after_start` (approved calls after start are
 * flagged needs_review, and never re-run). */
#pragma once

#define TC_SWEEP_GRACE_MS 2000
#define TC_MAX_ATTEMPTS   3

struct tc_server;
struct tc_worker;

int tc_worker_start(struct tc_server *srv, struct tc_worker **ret_worker, char **ret_error);
int tc_worker_instance_id(const struct tc_worker *w);
/* Stop claiming new work (before the launcher stops). NULL is a no-op. */
void tc_worker_quiesce(struct tc_worker *w);
/* Stop claiming queued work (a draining server): another replica takes it. The instance
 * lock, its heartbeat and the sweeper go on until tc_worker_stop(). */
void tc_worker_drain(struct tc_worker *w);
/* Stops claiming, waits for claimed runs to be recorded (the launcher must still be up, and
 * the recorder), joins. */
void tc_worker_stop(struct tc_worker *w);
