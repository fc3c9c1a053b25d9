/* A host name looked up with a bound on the wait. libc's getaddrinfo waits as long as the
 * resolver's configuration says (timeout x attempts x servers, per search domain): seconds to
 * minutes against a resolver that does not answer, and no caller can stop it. */
#pragma once

#include <netdb.h>
#include <pthread.h>

struct tc_lookup;

/* Lookups that share a bound on how many names may be pending at once: a pool per purpose
 * (the database's names, the names tenants ask webhooks to go to), so that one kind cannot
 * use up another's. Static: TC_RESOLVER_INIT(max). */
struct tc_resolver {
    pthread_mutex_t mu;
    unsigned max, n;           /* names pending: at most max */
    struct tc_lookup *pending; /* under mu */
};
#define TC_RESOLVER_INIT(max_)                                                                     \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, (max_), 0, NULL                                                 \
    }

/* Looks host up (stream sockets, any family) on a thread of its own, waiting at most
 * timeout_ms: 0 and *ret_ai (free with tc_resolve_free), -ETIMEDOUT when no answer came in
 * time, -ENOENT when the name has no address or the lookup failed, -EAGAIN when max names are
 * pending already (or no thread could be started), -ENOMEM. A lookup given up on goes on until
 * the resolver answers or gives up; meanwhile every lookup of the same name waits for that one
 * instead of starting another, so that a resolver that does not answer costs one pending
 * lookup (and thread) per name, however often it is asked. */
int tc_resolve_within(struct tc_resolver *r, const char *host, int timeout_ms,
                      struct addrinfo **ret_ai);
void tc_resolve_free(struct addrinfo *ai);
