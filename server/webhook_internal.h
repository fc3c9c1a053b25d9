/* Shared by webhook.c and webhook_target.c only. */
#pragma once
#include <stdbool.h>
#include <sys/socket.h>

/* NULL if a webhook may connect to sa, else the name of its address class ("loopback",
 * "metadata", ...; sandbox/egress_rules.h). */
const char *tc_webhook_address_refused(const struct sockaddr *sa, bool allow_private);
