/* Waiting for a sandbox slot, fairly (issue 19).
 *
 * A direct call that finds every launcher slot taken does not get 503 at once: it waits up to
 * TOOLCAGE_QUEUE_SECONDS, suspended (no thread held), in its tenant's queue. As slots are given
 * back the queues are served round-robin across tenants, one call each, so a tenant with one
 * call waiting is not behind another tenant's hundred. While anyone waits, a new call queues
 * too (no barging past the queue). A resumed call runs its handler again and takes the slot;
 * one that waited its time out is answered 503 overloaded. Bounded: TC_SLOTQ_PER_TENANT calls
 * per tenant and TC_SLOTQ_MAX in all, beyond which calls are refused at once as before.
 * Calls approved by a reviewer are not queued here: the worker claims them as slots allow,
 * fewest-running tenant first (server/worker.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "server/http.h"

#define TC_SLOTQ_MAX        1024
#define TC_SLOTQ_PER_TENANT 64

/* Installs the slot-given-back hook on srv's launcher; detach removes it (before the launcher
 * stops: nothing reads it afterwards). */
void tc_slotq_init(struct tc_server *srv);
void tc_slotq_detach(void);

/* A call that has not waited yet: may it try for a slot now (true), or must it queue behind
 * those waiting (false)? */
bool tc_slotq_may_try(void);

/* Queue r (the caller suspended it with the handler that will run again) for tenant_id until
 * deadline_ms; front: it waited already and lost a race for its slot. 0, or -EAGAIN (the
 * queue is full: resume r yourself; it will find itself out of time) or -ESHUTDOWN. */
int tc_slotq_add(struct tc_request *r, const char *tenant_id, int64_t deadline_ms, bool front);

/* A resumed call has tried for its slot (whether it got it or not). */
void tc_slotq_tried(void);

/* Resume as many waiting calls as there are free slots, round-robin over tenants. */
void tc_slotq_pump(void);
/* Resume the calls past their deadline (they answer 503). */
void tc_slotq_expire(int64_t now_ms);
/* Shutdown: resume every waiting call; afterwards tc_slotq_add() refuses. */
void tc_slotq_close(void);
