/* A host name looked up with a bound on the wait. libc's getaddrinfo waits as long as the
 * resolver's configuration says (timeout x attempts x servers, per search domain): seconds to
 * minutes against a resolver that does not answer, and no caller can stop it. */
#pragma once

#include <netdb.h>
#include <pthread.h>

struct tc_lookup;

/* Lookups that share a bound on how many may be pending at once: a pool per purpose (the
 * database's names, the names tenants ask webhooks to go to), so that one kind cannot use up
 * another's. A lookup of a name joins one of that name pending for less than fresh_ms, else
 * starts anew, while the pool has room and the name has fewer than a quarter of it (at least
 * 2) pending: once the resolver answers again (or the name is in /etc/hosts again), a lookup
 * has it within fresh_ms, or, after an outage longer than that many lookups, once the newest
 * pending one ends (libc's own timeouts). Static: TC_RESOLVER_INIT(max, fresh_ms). */
struct tc_resolver {
    pthread_mutex_t mu;
    unsigned max, n; /* lookups pending: at most max */
    int fresh_ms;
    struct tc_lookup *pending; /* under mu */
};
#define TC_RESOLVER_INIT(max_, fresh_ms_)                                                          \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, (max_), 0, (fresh_ms_), NULL                                    \
    }

/* Looks host up (stream sockets, any family) on a thread of its own, waiting at most
 * timeout_ms: 0 and *ret_ai (free with tc_resolve_free), -ETIMEDOUT when no answer came in
 * time, -ENOENT when the name has no address or the lookup failed, -EAGAIN when max lookups
 * are pending already and none of this name (or no thread could be started), -ENOMEM. A
 * lookup given up on goes on until the resolver answers or gives up; meanwhile lookups of the
 * same name join it (above) instead of each starting another. */
int tc_resolve_within(struct tc_resolver *r, const char *host, int timeout_ms,
                      struct addrinfo **ret_ai);
void tc_resolve_free(struct addrinfo *ai);
