/* A host name looked up with a bound on the wait. libc's getaddrinfo waits as long as the
 * resolver's configuration says (timeout x attempts x servers, per search domain): seconds to
 * minutes against a resolver that does not answer, and no caller can stop it. */
#pragma once

#include <netdb.h>

/* Looks host up (stream sockets, any family), waiting at most timeout_ms: 0 and *ret_ai (free
 * with tc_resolve_free), -ETIMEDOUT when no answer came in time, -ENOENT when the name has no
 * address or the lookup failed, -ENOMEM. A lookup given up on goes on in the background (on
 * libc's thread) until the resolver answers or gives up; meanwhile every lookup of the same
 * name waits for that one instead of starting another, so that a resolver that does not
 * answer costs one pending lookup per name, however often it is asked. */
int tc_resolve_within(const char *host, int timeout_ms, struct addrinfo **ret_ai);
void tc_resolve_free(struct addrinfo *ai);
