#include "server/waiters.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "server/http.h"

#define MAX_WAITERS 4096

struct waiter {
    char exec_id[37];
    struct tc_request *r;
    int64_t deadline_ms;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct waiter waiters[MAX_WAITERS];
static size_t nwaiters;
/* Set by tc_waiters_wake_all() (shutdown): no new waiter may park after it, or
 * MHD_stop_daemon() would find a suspended connection and abort the process. */
static bool closed;

int tc_waiter_add(const char *exec_id, struct tc_request *r, int64_t deadline_ms)
{
    pthread_mutex_lock(&lock);
    if (closed || nwaiters == MAX_WAITERS) {
        int rc = closed ? -ESHUTDOWN : -EAGAIN;
        pthread_mutex_unlock(&lock);
        return rc;
    }
    struct waiter *w = &waiters[nwaiters++];
    snprintf(w->exec_id, sizeof(w->exec_id), "%s", exec_id);
    w->r = r;
    w->deadline_ms = deadline_ms;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Caller holds the lock. */
static void take(size_t i)
{
    waiters[i] = waiters[--nwaiters];
}

bool tc_waiter_remove(struct tc_request *r)
{
    bool found = false;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nwaiters; i++)
        if (waiters[i].r == r) {
            take(i);
            found = true;
            break;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

/* Resume outside the lock: collect first, then resume, so each waiter is resumed once. */
static void wake_matching(const char *exec_id, int64_t now_ms, bool all)
{
    struct tc_request *batch[256];
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < nwaiters && n < TC_ARRAY_SIZE(batch);) {
            struct waiter *w = &waiters[i];
            if (all || (exec_id && strcmp(w->exec_id, exec_id) == 0) ||
                (!exec_id && now_ms >= w->deadline_ms)) {
                batch[n++] = w->r;
                take(i);
            } else {
                i++;
            }
        }
        pthread_mutex_unlock(&lock);
        for (size_t i = 0; i < n; i++)
            tc_request_resume(batch[i]);
        if (n < TC_ARRAY_SIZE(batch))
            return;
    }
}

void tc_waiters_wake(const char *exec_id)
{
    wake_matching(exec_id, 0, false);
}
void tc_waiters_expire(int64_t now_ms)
{
    wake_matching(NULL, now_ms, false);
}
void tc_waiters_wake_all(void)
{
    pthread_mutex_lock(&lock);
    closed = true;
    pthread_mutex_unlock(&lock);
    wake_matching(NULL, 0, true);
}
