/* Audit chain verification off the request threads. A whole-chain walk costs ~26 s per
 * million records and holds a pooled connection, so it runs on a thread of its own, one walk
 * at a time server-wide, and everyone who asks shares it: GET /v1/audit/verify and the
 * console's audit page wait (suspended, holding no HTTP thread) for a walk that started after
 * they asked, or take the cached verdict of a recent one. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "audit/audit.h"

struct tc_server;
struct tc_request;
struct tc_verifier;

/* Start the thread (it walks only when asked). -errno. */
int tc_verifier_start(struct tc_server *srv, struct tc_verifier **ret);
/* Resume every waiting request and end the thread; afterwards tc_verifier_wait() refuses.
 * NULL is a no-op. */
void tc_verifier_stop(struct tc_verifier *v);
void tc_verifier_free(struct tc_verifier *v); /* after stop; NULL is a no-op */

/* The newest verdict, if there is one whose walk started at or after not_before_ms
 * (tc_now_ms clock): true, *ret, when its walk started (tc_now_ms clock, and wall clock
 * for display) and finished. Outputs may be NULL. */
bool tc_verifier_cached(struct tc_verifier *v, int64_t not_before_ms, struct tc_audit_verdict *ret,
                        int64_t *ret_started_ms, int64_t *ret_started_wall_ms,
                        int64_t *ret_finished_ms);
/* Ask for a walk starting from now and resume r (already suspended by the caller, inside
 * tc_server_begin/end) when it has finished. -ESHUTDOWN (stopping) or -EAGAIN (too many
 * waiting): the caller resumes r at once. */
int tc_verifier_wait(struct tc_verifier *v, struct tc_request *r);
/* Ask for a walk from now without waiting for it. */
void tc_verifier_kick(struct tc_verifier *v);
