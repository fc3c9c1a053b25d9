/* Waiting for a sandbox slot, fairly: see slotq.h. */
#include "server/slotq.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sandbox/sandbox.h"

struct waiting {
    struct tc_request *r;
    int64_t deadline_ms;
};

/* One tenant's calls, oldest first (a ring). */
struct tq {
    char tenant[40];
    struct waiting q[TC_SLOTQ_PER_TENANT];
    unsigned head, n;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct tq **tqs; /* tenants with calls waiting, in the order they came */
static size_t ntq, atq;
static size_t cursor;   /* the tenant served next */
static unsigned total;  /* calls waiting */
static unsigned grants; /* calls resumed for a free slot that have not tried for it yet */
static bool closed;
static struct tc_server *g_srv;

static void on_free(void *ud)
{
    (void)ud;
    tc_slotq_pump();
}

void tc_slotq_init(struct tc_server *srv)
{
    pthread_mutex_lock(&mu);
    g_srv = srv;
    closed = false;
    pthread_mutex_unlock(&mu);
    tc_launcher_on_free(srv->launcher, on_free, NULL);
}

void tc_slotq_detach(void)
{
    pthread_mutex_lock(&mu);
    struct tc_server *srv = g_srv;
    g_srv = NULL; /* pump() reads the launcher under mu: none does from here on */
    pthread_mutex_unlock(&mu);
    if (srv)
        tc_launcher_on_free(srv->launcher, NULL, NULL);
}

bool tc_slotq_may_try(void)
{
    pthread_mutex_lock(&mu);
    bool ok = total == 0 && grants == 0;
    pthread_mutex_unlock(&mu);
    return ok;
}

int tc_slotq_add(struct tc_request *r, const char *tenant_id, int64_t deadline_ms, bool front)
{
    int rc = 0;
    pthread_mutex_lock(&mu);
    struct tq *t = NULL;
    for (size_t i = 0; i < ntq && !t; i++)
        if (strcmp(tqs[i]->tenant, tenant_id) == 0)
            t = tqs[i];
    if (closed)
        rc = -ESHUTDOWN;
    else if (total >= TC_SLOTQ_MAX || (t && t->n >= TC_SLOTQ_PER_TENANT))
        rc = -EAGAIN;
    else if (!t) {
        if (ntq == atq) {
            size_t n = atq ? atq * 2 : 16;
            struct tq **v = realloc(tqs, n * sizeof(*v));
            if (v)
                tqs = v, atq = n;
        }
        t = ntq < atq ? calloc(1, sizeof(*t)) : NULL;
        if (!t)
            rc = -EAGAIN;
        else {
            snprintf(t->tenant, sizeof(t->tenant), "%s", tenant_id);
            tqs[ntq++] = t;
        }
    }
    if (rc == 0) {
        unsigned at;
        if (front) {
            t->head = (t->head + TC_SLOTQ_PER_TENANT - 1) % TC_SLOTQ_PER_TENANT;
            at = t->head;
        } else {
            at = (t->head + t->n) % TC_SLOTQ_PER_TENANT;
        }
        t->q[at] = (struct waiting){r, deadline_ms};
        t->n++;
        total++;
    }
    pthread_mutex_unlock(&mu);
    if (rc == 0)
        tc_slotq_pump(); /* a slot may have come free meanwhile */
    return rc;
}

/* Under mu: drop tenant i, whose queue is empty, keeping the others' order. */
static void drop_tenant(size_t i)
{
    free(tqs[i]);
    memmove(&tqs[i], &tqs[i + 1], (ntq - i - 1) * sizeof(*tqs));
    ntq--;
    if (cursor > i)
        cursor--;
    if (cursor >= ntq)
        cursor = 0;
}

void tc_slotq_tried(void)
{
    pthread_mutex_lock(&mu);
    if (grants > 0)
        grants--;
    pthread_mutex_unlock(&mu);
    tc_slotq_pump();
}

static void resume_all(struct tc_request **batch, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tc_request_resume(batch[i]);
}

void tc_slotq_pump(void)
{
    struct tc_request *batch[64];
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&mu);
        unsigned free_slots = g_srv ? tc_launcher_free_slots(g_srv->launcher) : 0;
        while (total > 0 && grants < free_slots && n < TC_ARRAY_SIZE(batch)) {
            if (cursor >= ntq)
                cursor = 0;
            struct tq *t = tqs[cursor];
            struct waiting w = t->q[t->head];
            t->head = (t->head + 1) % TC_SLOTQ_PER_TENANT;
            t->n--;
            total--;
            grants++;
            w.r->slot_wait = TC_SLOT_GRANTED;
            batch[n++] = w.r;
            if (t->n == 0)
                drop_tenant(cursor);
            else
                cursor++;
        }
        pthread_mutex_unlock(&mu);
        resume_all(batch, n);
        if (n < TC_ARRAY_SIZE(batch))
            return;
    }
}

/* Under mu: take every call with deadline_ms <= now (all when now < 0) into batch. */
static size_t take_due(int64_t now, struct tc_request **batch, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < ntq && n < cap;) {
        struct tq *t = tqs[i];
        struct waiting keep[TC_SLOTQ_PER_TENANT];
        unsigned nk = 0;
        for (unsigned k = 0; k < t->n; k++) {
            struct waiting w = t->q[(t->head + k) % TC_SLOTQ_PER_TENANT];
            if ((now < 0 || w.deadline_ms <= now) && n < cap) {
                w.r->slot_wait = TC_SLOT_WAITED;
                batch[n++] = w.r;
                total--;
            } else {
                keep[nk++] = w;
            }
        }
        memcpy(t->q, keep, nk * sizeof(*keep));
        t->head = 0;
        t->n = nk;
        if (nk == 0)
            drop_tenant(i);
        else
            i++;
    }
    return n;
}

void tc_slotq_expire(int64_t now_ms)
{
    struct tc_request *batch[64];
    size_t n;
    do {
        pthread_mutex_lock(&mu);
        n = take_due(now_ms, batch, TC_ARRAY_SIZE(batch));
        pthread_mutex_unlock(&mu);
        resume_all(batch, n);
    } while (n == TC_ARRAY_SIZE(batch));
}

void tc_slotq_close(void)
{
    pthread_mutex_lock(&mu);
    closed = true;
    pthread_mutex_unlock(&mu);
    tc_slotq_expire(-1);
}
