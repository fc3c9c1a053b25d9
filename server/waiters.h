/* Long-poll waiters: suspended GET /v1/executions/{id}?wait=N requests, woken when the
 * execution finishes (here or, through NOTIFY, in another server process) or at their
 * deadline. Holds no thread while waiting. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct tc_request;

/* Register r (already suspended by the caller afterwards) under exec_id. -EAGAIN when full,
 * -ESHUTDOWN after tc_waiters_wake_all(): the caller resumes r at once. */
int tc_waiter_add(const char *exec_id, struct tc_request *r, int64_t deadline_ms);
/* Remove r if still registered; true if it was (then the caller owns resuming it). */
bool tc_waiter_remove(struct tc_request *r);
/* Resume every waiter of exec_id / past its deadline / all (at shutdown; afterwards
 * tc_waiter_add() refuses). */
void tc_waiters_wake(const char *exec_id);
void tc_waiters_expire(int64_t now_ms);
void tc_waiters_wake_all(void);
