/* A host name looked up with a bound on the wait (common/resolve.h). */
#include "common/resolve.h"
#include "common/util.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A name's lookups pending at once, at most: a quarter of the pool (at least 2). A silent
 * resolver gets a new lookup every fresh_ms, each as long as libc waits; beyond, the newest
 * is joined, and the rest of the pool stays for other names. */
static unsigned per_name(const struct tc_resolver *r)
{
    return r->max / 4 < 2 ? 2 : r->max / 4;
}

/* One name's lookup: libc's getaddrinfo on a thread of its own (not getaddrinfo_a: its one
 * pool of threads, first come first served, would make the database's lookups wait behind
 * whatever names tenants ask webhooks to go to). The thread holds a reference until it is done
 * and takes it out of the pending list; each waiter holds one; the last to let go frees it. */
struct tc_lookup {
    struct tc_resolver *r;
    struct tc_lookup *next;
    int64_t started_ms;  /* tc_now_ms */
    int refs;            /* under r->mu */
    bool done;           /* under r->mu, with err and ai */
    int err;             /* getaddrinfo's return */
    struct addrinfo *ai; /* its answer */
    pthread_cond_t cv;   /* CLOCK_MONOTONIC; broadcast when done */
    char host[256];
};

static void unref_locked(struct tc_lookup *l)
{
    if (--l->refs > 0)
        return;
    if (l->ai)
        freeaddrinfo(l->ai);
    pthread_cond_destroy(&l->cv);
    free(l);
}

static void *lookup_main(void *arg)
{
    struct tc_lookup *l = arg;
    struct tc_resolver *r = l->r;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int e = getaddrinfo(l->host, NULL, &hints, &ai);
    pthread_mutex_lock(&r->mu);
    l->err = e;
    l->ai = e == 0 ? ai : NULL;
    l->done = true;
    for (struct tc_lookup **pp = &r->pending; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    r->n--;
    pthread_cond_broadcast(&l->cv);
    unref_locked(l);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* A copy of an answer, each entry one allocation (tc_resolve_free), NULL out of memory. */
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

/* A new lookup of host, its thread started: NULL when it cannot be (memory, threads). */
static struct tc_lookup *start_locked(struct tc_resolver *r, const char *host)
{
    struct tc_lookup *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->r = r;
    l->started_ms = tc_now_ms();
    l->refs = 2; /* the thread's and the caller's */
    snprintf(l->host, sizeof(l->host), "%s", host);
    pthread_attr_t a;
    pthread_t t;
    sigset_t all, old;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigfillset(&all); /* (no signal is this thread's to take) */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&t, &a, lookup_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (e != 0) {
        pthread_cond_destroy(&l->cv);
        free(l);
        return NULL;
    }
    l->next = r->pending;
    r->pending = l;
    r->n++;
    return l;
}

int tc_resolve_within(struct tc_resolver *r, const char *host, int timeout_ms,
                      struct addrinfo **ret_ai)
{
    if (strlen(host) >= sizeof(((struct tc_lookup *)NULL)->host))
        return -ENOENT; /* (no DNS name is that long) */
    struct timespec until = tc_timespec_in(CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&r->mu);
    struct tc_lookup *l, *same = NULL; /* the newest pending lookup of this name */
    unsigned of_name = 0;
    for (l = r->pending; l; l = l->next)
        if (strcmp(l->host, host) == 0) {
            of_name++;
            if (!same || l->started_ms > same->started_ms)
                same = l;
        }
    /* asked for a moment ago, or as many pending as one name may have (it never takes the
     * pool from the others): its answer is this one's too */
    if (same && (tc_now_ms() - same->started_ms < r->fresh_ms || of_name >= per_name(r))) {
        l = same;
        l->refs++;
    } else if (r->n < r->max && (l = start_locked(r, host))) {
        ; /* (its two references set: the thread's and ours) */
    } else if ((l = same)) {
        l->refs++; /* the pool full: the name's newest lookup, when it answers */
    } else {
        pthread_mutex_unlock(&r->mu);
        return -EAGAIN;
    }
    while (!l->done && pthread_cond_timedwait(&l->cv, &r->mu, &until) != ETIMEDOUT)
        ;
    int rc;
    if (!l->done)
        rc = -ETIMEDOUT;
    else if (l->err == 0 && l->ai)
        rc = (*ret_ai = copy_answer(l->ai)) ? 0 : -ENOMEM;
    else
        rc = l->err == EAI_MEMORY ? -ENOMEM : -ENOENT;
    unref_locked(l);
    pthread_mutex_unlock(&r->mu);
    return rc;
}
