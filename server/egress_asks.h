/* Ask on egress, the server's part: the launcher reports a connection the egress proxy holds
 * for a reviewer (tc_launcher_on_ask); a thread of its own writes the ask
 * (approval/egress_ask.h), looks at the pending ones' answers every 250 ms (they may come from
 * any replica or the console), passes each answer to the proxy (tc_launcher_verdict), and
 * closes what nobody answered in time (expired) or what outlived its execution (withdrawn).
 * The proxy keeps its own clock: no answer within the tool's ask_timeout_seconds is a deny
 * whatever happens here. */
#pragma once

struct tc_server;

/* -errno. Once, after the launcher started. */
int tc_egress_asks_start(struct tc_server *srv);
/* Before the launcher stops; safe when not started. Asks still pending are left to expire. */
void tc_egress_asks_stop(void);
