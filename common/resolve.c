/* A host name looked up with a bound on the wait (common/resolve.h). */
#include "common/resolve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* getaddrinfo_a() goes on in the background after we stop waiting; its completion
 * notification holds the second reference, so whoever finishes last frees the request. */
struct lookup {
    pthread_mutex_t mu;
    int refs;
    struct gaicb cb;
    struct addrinfo hints;
    char host[256];
};

static void lookup_unref(struct lookup *l)
{
    pthread_mutex_lock(&l->mu);
    int refs = --l->refs;
    pthread_mutex_unlock(&l->mu);
    if (refs > 0)
        return;
    if (l->cb.ar_result)
        freeaddrinfo(l->cb.ar_result);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static void lookup_done(union sigval sv)
{
    lookup_unref(sv.sival_ptr);
}

int tc_resolve_within(const char *host, int timeout_ms, struct addrinfo **ret_ai)
{
    if (strlen(host) >= sizeof(((struct lookup *)NULL)->host))
        return -ENOENT; /* (no DNS name is that long) */
    struct lookup *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    pthread_mutex_init(&l->mu, NULL);
    l->refs = 2;
    snprintf(l->host, sizeof(l->host), "%s", host);
    l->hints.ai_family = AF_UNSPEC;
    l->hints.ai_socktype = SOCK_STREAM;
    l->cb.ar_name = l->host;
    l->cb.ar_request = &l->hints;
    struct sigevent se = {.sigev_notify = SIGEV_THREAD};
    se.sigev_notify_function = lookup_done;
    se.sigev_value.sival_ptr = l;
    struct gaicb *list[] = {&l->cb};
    if (getaddrinfo_a(GAI_NOWAIT, list, 1, &se) != 0) {
        pthread_mutex_destroy(&l->mu);
        free(l);
        return -ENOENT;
    }
    struct timespec deadline, left;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ms < 0)
        timeout_ms = 0;
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    int rc;
    for (;;) {
        const struct gaicb *const wait[] = {&l->cb};
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        left.tv_sec = deadline.tv_sec - now.tv_sec;
        left.tv_nsec = deadline.tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0) {
            left.tv_sec--;
            left.tv_nsec += 1000000000L;
        }
        if (gai_error(&l->cb) == EAI_INPROGRESS) {
            if (left.tv_sec < 0) {
                rc = -ETIMEDOUT;
                break;
            }
            /* (its return says little: a timeout, a signal, a wake-up; the request says) */
            (void)gai_suspend(wait, 1, &left);
            continue;
        }
        int e = gai_error(&l->cb);
        if (e == 0 && l->cb.ar_result) {
            /* ours: the notification's reference frees only what is still in cb */
            pthread_mutex_lock(&l->mu);
            *ret_ai = l->cb.ar_result;
            l->cb.ar_result = NULL;
            pthread_mutex_unlock(&l->mu);
            rc = 0;
        } else {
            rc = e == EAI_MEMORY ? -ENOMEM : -ENOENT;
        }
        break;
    }
    lookup_unref(l);
    return rc;
}
