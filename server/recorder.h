/* The recorder: the threads that write an execution's start and its outcome, whoever asked
 * for the run and whether or not its client is still connected.
 *
 * Start: a sandbox is submitted with "hold" (sandbox/sandbox.h); when the launcher says it
 * is ready, the recorder commits `executions.code_started_at` and the `execution.start`
 * audit record (guarded: the row must still be running under this instance, and this
 * instance must hold its lock), and only then tells the launcher to go. A start that cannot
 * be recorded within START_GIVE_UP_MS is cancelled: the program never runs unrecorded.
 *
 * Outcome: stored with tc_execution_finish() (guarded). A store that fails for want of the
 * database is retried with backoff until it succeeds, never dropped: the pending outcomes
 * stay in memory and, past a bound (or at shutdown), on disk under
 * TOOLCAGE_STATE_DIR/outcomes/, from where a later start of the server stores them. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

struct tc_server;
struct tc_recorder;

/* srv->cfg, srv->keys, srv->launcher are used; srv->instance_* are read. Loads outcomes
 * left on disk by an earlier process. 0 or -errno. */
int tc_recorder_start(struct tc_server *srv, struct tc_recorder **ret_recorder);
/* Stores what it can within a few seconds, spills the rest to disk, answers every caller
 * still waiting (-ETIMEDOUT), joins. Call after the launcher stopped. NULL is a no-op. */
void tc_recorder_stop(struct tc_recorder *rec);

struct tc_record_ids {
    const char *exec_id, *tenant_id, *tool, *request_id;
    int claimed_by; /* the instance that runs it */
    json_t *actor;  /* borrowed */
};

/* The launcher said the held sandbox exec_id is ready: record the start, then go.
 * 0, or -ENOMEM (the sandbox is cancelled). */
int tc_recorder_start_run(struct tc_recorder *rec, const struct tc_record_ids *ids);

/* The view (the API's Execution object) of a launcher result; runs once, on a recorder
 * thread, before the outcome is stored. NULL: out of memory. */
typedef json_t *(*tc_record_build_fn)(void *userdata, json_t *raw);
/* Called exactly once: rc 0 (stored; view is the stored Execution), -ESTALE (another
 * outcome was stored first, e.g. a sweeper's "interrupted"; view is that one, or NULL; this
 * result was kept as its late result), -ETIMEDOUT (not stored yet, it will be; view NULL).
 * view is borrowed. After this call userdata is not used again. */
typedef void (*tc_recorded_fn)(void *userdata, int rc, json_t *view);

struct tc_record_outcome {
    struct tc_record_ids ids;
    const char *action; /* "execution.complete", "execution.refused" */
    json_t *raw;        /* a launcher result for build (borrowed), or NULL ... */
    tc_record_build_fn build;
    json_t *view;        /* ... the view itself (borrowed) */
    tc_recorded_fn done; /* may be NULL */
    void *userdata;
    bool release_credentials; /* revoke the execution's leases and tokens first */
};

/* Queue an outcome. 0, or -ENOMEM (done is not called). */
int tc_recorder_finish(struct tc_recorder *rec, const struct tc_record_outcome *o);

/* Outcomes not stored yet (in memory and on disk), for metrics and tests. */
unsigned tc_recorder_pending(struct tc_recorder *rec);
