/* A host name looked up with a bound on the wait. libc's getaddrinfo waits as long as the
 * resolver's configuration says (timeout x attempts x servers, per search domain): seconds to
 * minutes against a resolver that does not answer, and no caller can stop it. */
#pragma once

#include <netdb.h>

/* Looks host up (stream sockets, any family), waiting at most timeout_ms: 0 and *ret_ai (free
 * with freeaddrinfo), -ETIMEDOUT when no answer came in time (the lookup goes on in the
 * background, on libc's thread, and frees itself when it ends), -ENOENT when the name has no
 * address or the lookup failed, -ENOMEM. */
int tc_resolve_within(const char *host, int timeout_ms, struct addrinfo **ret_ai);
