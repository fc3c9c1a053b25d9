#include "server/verifier.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/util.h"
#include "core/db.h"
#include "server/http.h"
#include "core/log.h"

#define MAX_WAITING 1024 /* requests suspended until the next walk; more get 503 at once */

struct tc_verifier {
    struct tc_server *srv;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stopping;
    bool requested; /* a walk is wanted (someone asked after the current one started) */
    struct tc_request *waiting[MAX_WAITING];
    size_t nwaiting;
    bool have;
    struct tc_audit_verdict verdict;
    int64_t started_ms, started_wall_ms, finished_ms;
};

static void resume_all(struct tc_request **batch, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tc_request_resume(batch[i]);
}

static void *run(void *arg)
{
    struct tc_verifier *v = arg;
    struct tc_request **batch = calloc(MAX_WAITING, sizeof(*batch));
    pthread_mutex_lock(&v->mu);
    while (!v->stopping) {
        while (!v->requested && !v->stopping)
            pthread_cond_wait(&v->cond, &v->mu);
        if (v->stopping)
            break;
        /* Everyone registered so far asked before this walk starts: it answers them. */
        v->requested = false;
        size_t n = v->nwaiting;
        if (batch)
            for (size_t i = 0; i < n; i++)
                batch[i] = v->waiting[i];
        v->nwaiting = 0;
        int64_t started = tc_now_ms(), started_wall = tc_wall_ms();
        pthread_mutex_unlock(&v->mu);

        struct tc_audit_verdict verdict;
        PGconn *c = tc_db_acquire(v->srv->db, TC_DB_WAIT_MS);
        int rc = c ? tc_audit_verify_db(c, v->srv->keys, &verdict) : -EIO;
        tc_db_release(v->srv->db, c);
        if (rc < 0)
            tc_log(TC_LOG_ERROR, "audit chain verification could not read the trail", NULL);
        else if (!verdict.ok)
            tc_log(TC_LOG_ERROR, "audit chain verification failed", "{s:I, s:s}", "first_bad_seq",
                   (json_int_t)verdict.first_bad_seq, "reason", verdict.reason);

        pthread_mutex_lock(&v->mu);
        if (rc == 0) {
            v->have = true;
            v->verdict = verdict;
            v->started_ms = started;
            v->started_wall_ms = started_wall;
            v->finished_ms = tc_now_ms();
        }
        pthread_mutex_unlock(&v->mu);
        if (batch)
            resume_all(batch, n);
        pthread_mutex_lock(&v->mu);
    }
    /* Stopping: nobody waits any longer. */
    size_t n = v->nwaiting;
    if (batch)
        for (size_t i = 0; i < n; i++)
            batch[i] = v->waiting[i];
    v->nwaiting = 0;
    pthread_mutex_unlock(&v->mu);
    if (batch)
        resume_all(batch, n);
    free(batch);
    return NULL;
}

int tc_verifier_start(struct tc_server *srv, struct tc_verifier **ret)
{
    struct tc_verifier *v = calloc(1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    v->srv = srv;
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cond, NULL);
    int r = pthread_create(&v->thread, NULL, run, v);
    if (r != 0) {
        tc_verifier_free(v);
        return -r;
    }
    v->started = true;
    *ret = v;
    return 0;
}

void tc_verifier_stop(struct tc_verifier *v)
{
    if (!v || !v->started)
        return;
    pthread_mutex_lock(&v->mu);
    v->stopping = true;
    pthread_cond_signal(&v->cond);
    pthread_mutex_unlock(&v->mu);
    pthread_join(v->thread, NULL); /* waits for a walk in progress (its requests resume) */
    v->started = false;
}

void tc_verifier_free(struct tc_verifier *v)
{
    if (!v)
        return;
    tc_verifier_stop(v);
    pthread_mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->cond);
    free(v);
}

bool tc_verifier_cached(struct tc_verifier *v, int64_t not_before_ms, struct tc_audit_verdict *ret,
                        int64_t *ret_started_ms, int64_t *ret_started_wall_ms,
                        int64_t *ret_finished_ms)
{
    pthread_mutex_lock(&v->mu);
    bool ok = v->have && v->started_ms >= not_before_ms;
    if (ok) {
        *ret = v->verdict;
        if (ret_started_ms)
            *ret_started_ms = v->started_ms;
        if (ret_started_wall_ms)
            *ret_started_wall_ms = v->started_wall_ms;
        if (ret_finished_ms)
            *ret_finished_ms = v->finished_ms;
    }
    pthread_mutex_unlock(&v->mu);
    return ok;
}

int tc_verifier_wait(struct tc_verifier *v, struct tc_request *r)
{
    pthread_mutex_lock(&v->mu);
    int rc = v->stopping ? -ESHUTDOWN : v->nwaiting == MAX_WAITING ? -EAGAIN : 0;
    if (rc == 0) {
        v->waiting[v->nwaiting++] = r;
        v->requested = true;
        pthread_cond_signal(&v->cond);
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

void tc_verifier_kick(struct tc_verifier *v)
{
    pthread_mutex_lock(&v->mu);
    v->requested = true;
    pthread_cond_signal(&v->cond);
    pthread_mutex_unlock(&v->mu);
}
