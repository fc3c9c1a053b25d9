/* A host name looked up with a bound on the wait (common/resolve.h). */
#include "common/resolve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A lookup libc works on (getaddrinfo_a), shared by whoever asks for its name meanwhile. Its
 * completion notification holds a reference and takes it out of the list; each waiter holds
 * one; the last to let go frees it. */
struct lookup {
    int refs; /* under mu */
    struct lookup *next;
    struct gaicb cb;
    struct addrinfo hints;
    char host[256];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct lookup *pending; /* under mu */

static void unref_locked(struct lookup *l)
{
    if (--l->refs > 0)
        return;
    if (l->cb.ar_result)
        freeaddrinfo(l->cb.ar_result);
    free(l);
}

static void unlist_locked(struct lookup *l)
{
    for (struct lookup **pp = &pending; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            return;
        }
}

/* (on a thread of libc's, once the lookup is over) */
static void lookup_done(union sigval sv)
{
    struct lookup *l = sv.sival_ptr;
    pthread_mutex_lock(&mu);
    unlist_locked(l);
    unref_locked(l);
    pthread_mutex_unlock(&mu);
}

/* A copy of a libc answer, each entry one allocation (tc_resolve_free), NULL out of memory. */
static struct addrinfo *copy_answer(const struct addrinfo *ai)
{
    struct addrinfo *head = NULL, **tail = &head;
    for (; ai; ai = ai->ai_next) {
        struct addrinfo *c = malloc(sizeof(*c) + ai->ai_addrlen);
        if (!c) {
            tc_resolve_free(head);
            return NULL;
        }
        *c = *ai;
        c->ai_addr = (struct sockaddr *)(void *)(c + 1);
        memcpy(c->ai_addr, ai->ai_addr, ai->ai_addrlen);
        c->ai_canonname = NULL;
        c->ai_next = NULL;
        *tail = c;
        tail = &c->ai_next;
    }
    return head;
}

void tc_resolve_free(struct addrinfo *ai)
{
    while (ai) {
        struct addrinfo *next = ai->ai_next;
        free(ai);
        ai = next;
    }
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int tc_resolve_within(const char *host, int timeout_ms, struct addrinfo **ret_ai)
{
    if (strlen(host) >= sizeof(((struct lookup *)NULL)->host))
        return -ENOENT; /* (no DNS name is that long) */
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct lookup *l;
    pthread_mutex_lock(&mu);
    for (l = pending; l && strcmp(l->host, host) != 0; l = l->next)
        ;
    if (l) {
        l->refs++; /* the same name asked for already: its answer is this one's too */
    } else if ((l = calloc(1, sizeof(*l)))) {
        l->refs = 2; /* ours and the notification's */
        snprintf(l->host, sizeof(l->host), "%s", host);
        l->hints.ai_family = AF_UNSPEC;
        l->hints.ai_socktype = SOCK_STREAM;
        l->cb.ar_name = l->host;
        l->cb.ar_request = &l->hints;
        struct sigevent se = {.sigev_notify = SIGEV_THREAD};
        se.sigev_notify_function = lookup_done;
        se.sigev_value.sival_ptr = l;
        struct gaicb *list[] = {&l->cb};
        /* (under mu: the notification runs on a thread of its own, and waits for it) */
        if (getaddrinfo_a(GAI_NOWAIT, list, 1, &se) != 0) {
            /* Not started, or started without its waiters' list: libc may still work on it
             * and notify, so it is never freed (a rare failure: out of memory or threads). */
            pthread_mutex_unlock(&mu);
            return -ENOENT;
        }
        l->next = pending;
        pending = l;
    }
    pthread_mutex_unlock(&mu);
    if (!l)
        return -ENOMEM;
    int rc, e;
    const struct gaicb *const wait[] = {&l->cb};
    while ((e = gai_error(&l->cb)) == EAI_INPROGRESS) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            break;
        struct timespec ts = {.tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000L};
        /* (its return says little: a timeout, a signal, a wake-up; the request says) */
        (void)gai_suspend(wait, 1, &ts);
    }
    if (e == EAI_INPROGRESS)
        rc = -ETIMEDOUT;
    else if (e == 0 && l->cb.ar_result) /* (read-only once done; our reference keeps it) */
        rc = (*ret_ai = copy_answer(l->cb.ar_result)) ? 0 : -ENOMEM;
    else
        rc = e == EAI_MEMORY ? -ENOMEM : -ENOENT;
    pthread_mutex_lock(&mu);
    unref_locked(l);
    pthread_mutex_unlock(&mu);
    return rc;
}
