#include "server/recorder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "broker/leases.h"
#include "common/util.h"
#include "sandbox/sandbox.h"
#include "core/db.h"
#include "execution/record.h"
#include "server/http.h"
#include "core/log.h"
#include "core/metrics.h"
#include "server/waiters.h"

#define THREADS          2
#define START_GIVE_UP_MS 15000 /* a held sandbox waits this long for its start record */
#define ANSWER_WITHIN_MS 10000 /* a waiting client hears within this long, stored or not */
#define STOP_DRAIN_MS    5000  /* at shutdown, store what can be stored within this long */
#define MEMORY_MAX_ITEMS 256   /* unstored outcomes kept in memory; beyond: on disk */
#define MEMORY_MAX_BYTES ((size_t)32 << 20)
#define SPILL_MAX_BYTES  ((size_t)80 << 20) /* a spilled outcome: output caps plus JSON */
#define BACKOFF_MAX_MS   2000
#define BACKOFF_STUCK_MS 5000 /* the database answers but refuses: a bug; retry slowly */

enum kind { K_START, K_FINISH };

struct item {
    struct item *next;
    enum kind kind;
    char exec_id[37], tenant_id[37], tool[65], request_id[65], action[32];
    int claimed_by;
    json_t *actor, *raw, *view; /* view: NULL while not built, or while spilled */
    tc_record_build_fn build;
    tc_recorded_fn done;
    void *userdata;
    bool release_credentials, built, spilled, busy, counted;
    bool answerable; /* (mu) built: done may be called from here on, by whoever is first */
    size_t bytes;    /* of view, while counted in memory */
    unsigned tries;
    int64_t next_ms, answer_by_ms, give_up_ms;
};

struct tc_recorder {
    struct tc_server *srv;
    pthread_t threads[THREADS], answerer;
    unsigned nthreads;
    bool answerer_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* work for the recorder's threads (one is woken per item) */
    pthread_cond_t answer_cv; /* the answerer's own: it must not take a wake-up meant for them */
    struct item *head;
    unsigned count, mem_items;
    size_t mem_bytes;
    bool stopping;
    int64_t stop_by_ms;
    char dir[PATH_MAX];
};

static void item_free(struct item *it)
{
    if (!it)
        return;
    json_decref(it->actor);
    json_decref(it->raw);
    json_decref(it->view);
    free(it);
}

static void set_ids(struct item *it, const struct tc_record_ids *ids)
{
    snprintf(it->exec_id, sizeof(it->exec_id), "%s", ids->exec_id);
    snprintf(it->tenant_id, sizeof(it->tenant_id), "%s", ids->tenant_id);
    snprintf(it->tool, sizeof(it->tool), "%s", ids->tool);
    snprintf(it->request_id, sizeof(it->request_id), "%s", ids->request_id ? ids->request_id : "");
    it->claimed_by = ids->claimed_by;
    it->actor = json_incref(ids->actor);
}

/* Append (FIFO) and wake a thread. */
static void enqueue(struct tc_recorder *rec, struct item *it)
{
    pthread_mutex_lock(&rec->mu);
    struct item **pp = &rec->head;
    while (*pp)
        pp = &(*pp)->next;
    *pp = it;
    it->next = NULL;
    rec->count++;
    pthread_cond_signal(&rec->cv);
    pthread_mutex_unlock(&rec->mu);
}

/* With mu held. */
static void unlink_item(struct tc_recorder *rec, struct item *it)
{
    for (struct item **pp = &rec->head; *pp; pp = &(*pp)->next)
        if (*pp == it) {
            *pp = it->next;
            rec->count--;
            break;
        }
    if (it->counted) {
        rec->mem_items--;
        rec->mem_bytes -= it->bytes;
        it->counted = false;
    }
}

static void remove_item(struct tc_recorder *rec, struct item *it)
{
    pthread_mutex_lock(&rec->mu);
    unlink_item(rec, it);
    pthread_mutex_unlock(&rec->mu);
}

/* ---- disk ---- */

static int spill_path(const struct tc_recorder *rec, const char *id, const char *suffix,
                      char out[PATH_MAX])
{
    int n = snprintf(out, PATH_MAX, "%s/%s.json%s", rec->dir, id, suffix);
    return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* Write the item to disk (fsync'ed, atomically renamed) and drop its JSON from memory. */
static int spill(struct tc_recorder *rec, struct item *it)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    int r;
    if (!rec->dir[0])
        return -ENOENT;
    if ((r = spill_path(rec, it->exec_id, ".tmp", tmp)) < 0 ||
        (r = spill_path(rec, it->exec_id, "", path)) < 0)
        return r;
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:i, s:O, s:s, s:O, s:b}", "version", 1,
                          "execution_id", it->exec_id, "tenant_id", it->tenant_id, "tool", it->tool,
                          "request_id", it->request_id, "claimed_by", it->claimed_by, "actor",
                          it->actor, "action", it->action, "view", it->view, "release_credentials",
                          it->release_credentials);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return -ENOMEM;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    r = fd < 0 ? -errno : tc_write_all(fd, text, strlen(text));
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (fd >= 0 && close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    free(text);
    if (r < 0) {
        unlink(tmp);
        return r;
    }
    int dfd = open(rec->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    json_decref(it->view);
    it->view = NULL;
    it->spilled = true;
    return 0;
}

/* Bring a spilled item's JSON back. 0, or -errno (-EBADMSG: not a spilled outcome). */
static int load(struct tc_recorder *rec, struct item *it, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int r = fd < 0 ? -errno : tc_read_all(fd, SPILL_MAX_BYTES, &text, &len);
    if (fd >= 0)
        close(fd);
    if (r < 0)
        return r;
    json_t *o = json_loadb(text, len, 0, NULL);
    free(text);
    const char *id = json_string_value(json_object_get(o, "execution_id"));
    const char *tenant = json_string_value(json_object_get(o, "tenant_id"));
    const char *tool = json_string_value(json_object_get(o, "tool"));
    const char *action = json_string_value(json_object_get(o, "action"));
    json_t *view = json_object_get(o, "view"), *actor = json_object_get(o, "actor");
    if (!id || !tc_uuid_valid(id) || !tenant || !tc_uuid_valid(tenant) || !tool || !action ||
        !json_is_object(view) || !json_is_object(actor) ||
        !json_is_integer(json_object_get(o, "claimed_by"))) {
        json_decref(o);
        return -EBADMSG;
    }
    struct tc_record_ids ids = {.exec_id = id,
                                .tenant_id = tenant,
                                .tool = tool,
                                .request_id = json_string_value(json_object_get(o, "request_id")),
                                .claimed_by =
                                    (int)json_integer_value(json_object_get(o, "claimed_by")),
                                .actor = actor};
    json_decref(it->actor);
    set_ids(it, &ids);
    snprintf(it->action, sizeof(it->action), "%s", action);
    it->release_credentials = json_is_true(json_object_get(o, "release_credentials"));
    json_decref(it->view);
    it->view = json_incref(view);
    it->built = true;
    json_decref(o);
    return 0;
}

static void forget_spill(struct tc_recorder *rec, struct item *it)
{
    char path[PATH_MAX];
    if (it->spilled && spill_path(rec, it->exec_id, "", path) == 0)
        unlink(path);
}

/* Outcomes an earlier process left on disk: stored (guarded by the instance that ran them,
 * like any other) before anything else. */
static void load_spilled(struct tc_recorder *rec)
{
    DIR *d = opendir(rec->dir);
    if (!d)
        return;
    struct dirent *de;
    unsigned n = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len != 36 + 5 || strcmp(de->d_name + 36, ".json") != 0)
            continue;
        struct item *it = calloc(1, sizeof(*it));
        if (!it)
            break;
        it->kind = K_FINISH;
        it->built = it->spilled = true;
        snprintf(it->exec_id, sizeof(it->exec_id), "%.36s", de->d_name);
        if (!tc_uuid_valid(it->exec_id)) {
            free(it);
            continue;
        }
        enqueue(rec, it);
        n++;
    }
    closedir(d);
    if (n)
        tc_log(TC_LOG_INFO, "outcomes left on disk by an earlier run will be stored", "{s:i, s:s}",
               "count", (int)n, "dir", rec->dir);
}

/* ---- the database side ---- */

static void launcher_say(struct tc_recorder *rec, const char *id, bool go)
{
    struct tc_server *srv = rec->srv;
    if (!tc_server_begin(srv))
        return; /* stopping: the launcher ends every sandbox itself */
    int r = go ? tc_launcher_go(srv->launcher, id) : tc_launcher_cancel(srv->launcher, id);
    tc_server_end(srv);
    if (r < 0)
        tc_log(TC_LOG_WARN,
               go ? "telling the launcher to go failed" : "cancelling a held sandbox failed",
               "{s:s, s:s}", "execution_id", id, "error", strerror(-r));
}

/* 0 recorded (now or earlier), -ESTALE not ours to start, -EAGAIN lock not held, -EIO. */
static int write_start(struct tc_recorder *rec, PGconn *c, struct item *it)
{
    if (!rec->srv->instance_locked)
        return -EAGAIN; /* a process without its lock starts nothing */
    char claimed[16];
    snprintf(claimed, sizeof(claimed), "%d", it->claimed_by);
    const char *p[] = {it->exec_id, it->tenant_id, claimed};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r =
        tc_db_exec(c,
                   "UPDATE executions SET code_started_at = now() WHERE id = $1 AND tenant_id = $2"
                   " AND status = 'running' AND claimed_by = $3::int AND code_started_at IS NULL"
                   " RETURNING 1",
                   3, p);
    int rc = -EIO;
    if (r && PQntuples(r) == 1) {
        json_t *ev = json_pack(
            "{s:s, s:s, s:O, s:s, s:s, s:s*, s:i}", "action", "execution.start", "tenant_id",
            it->tenant_id, "actor", it->actor, "tool", it->tool, "execution_id", it->exec_id,
            "request_id", it->request_id[0] ? it->request_id : NULL, "instance", it->claimed_by);
        rc = ev && tc_audit_append_tx(c, rec->srv->keys, ev, NULL) == 0 ? 0 : -EIO;
        json_decref(ev);
    } else if (r) {
        /* Started already (an earlier attempt committed, its answer lost)? */
        PQclear(r);
        r = tc_db_exec(c,
                       "SELECT 1 FROM executions WHERE id = $1 AND tenant_id = $2"
                       " AND status = 'running' AND claimed_by = $3::int"
                       " AND code_started_at IS NOT NULL",
                       3, p);
        rc = !r ? -EIO : PQntuples(r) == 1 ? 0 : -ESTALE;
    }
    PQclear(r);
    return tc_db_finish(c, rc);
}

static void process_start(struct tc_recorder *rec, PGconn **c, struct item *it)
{
    int rc = tc_db_ensure(c, rec->srv->cfg->database_url) ? write_start(rec, *c, it) : -EIO;
    if (rc == -EIO || rc == -EAGAIN) {
        int64_t now = tc_now_ms();
        if (now < it->give_up_ms) {
            if (it->tries++ == 0)
                tc_log(TC_LOG_WARN, "recording a start failed; the sandbox waits", "{s:s, s:s}",
                       "execution_id", it->exec_id, "error",
                       rc == -EAGAIN ? "the instance lock is not held"
                                     : (*c ? tc_db_error(*c) : "no connection"));
            pthread_mutex_lock(&rec->mu);
            it->next_ms = now + 100;
            it->busy = false;
            pthread_mutex_unlock(&rec->mu);
            return;
        }
        tc_log(TC_LOG_ERROR, "the start could not be recorded; the sandbox is cancelled unrun",
               "{s:s}", "execution_id", it->exec_id);
    } else if (rc == -ESTALE) {
        tc_log(TC_LOG_WARN, "the execution is no longer this instance's; its sandbox is cancelled",
               "{s:s}", "execution_id", it->exec_id);
    }
    launcher_say(rec, it->exec_id, rc == 0);
    remove_item(rec, it);
    item_free(it);
}

/* done is called once: by the thread that stored (or gave up on) the item, or by the
 * answerer at the item's deadline, whichever takes it first. */
static void answer(struct item *it, int rc, json_t *view)
{
    tc_recorded_fn done = __atomic_exchange_n(&it->done, NULL, __ATOMIC_ACQ_REL);
    if (done)
        done(it->userdata, rc, view);
}

/* A failed store: back off, and keep memory bounded by putting outcomes on disk. */
static void retry_later(struct tc_recorder *rec, PGconn *c, struct item *it)
{
    bool refused = c && PQstatus(c) == CONNECTION_OK; /* the database answered: not an outage */
    if (it->tries == 0) {
        tc_metrics_audit_failure();
        tc_log(TC_LOG_WARN, "storing an outcome failed; it is kept and retried", "{s:s, s:s}",
               "execution_id", it->exec_id, "error", c ? tc_db_error(c) : "no connection");
    } else if (refused) {
        tc_log(TC_LOG_ERROR, "storing an outcome is refused by the database; retrying",
               "{s:s, s:s}", "execution_id", it->exec_id, "error", tc_db_error(c));
    }
    it->tries++;
    unsigned shift = it->tries < 5 ? it->tries : 5;
    int64_t backoff = refused ? BACKOFF_STUCK_MS : (int64_t)100 << shift;
    if (backoff > BACKOFF_MAX_MS && !refused)
        backoff = BACKOFF_MAX_MS;
    size_t bytes = 0;
    if (!it->spilled && !it->counted) {
        char *text = json_dumps(it->view, JSON_COMPACT);
        bytes = text ? strlen(text) : 0;
        free(text);
    }
    pthread_mutex_lock(&rec->mu);
    bool over = rec->mem_items + 1 > MEMORY_MAX_ITEMS || rec->mem_bytes + bytes > MEMORY_MAX_BYTES;
    pthread_mutex_unlock(&rec->mu);
    if (!it->spilled && over) {
        int r = spill(rec, it);
        if (r < 0)
            tc_log(TC_LOG_WARN, "an unstored outcome cannot go to disk; it stays in memory",
                   "{s:s, s:s, s:s}", "execution_id", it->exec_id, "dir", rec->dir, "error",
                   strerror(-r));
    } else if (it->spilled) {
        json_decref(it->view); /* on disk already: free the copy loaded for this attempt */
        it->view = NULL;
    }
    pthread_mutex_lock(&rec->mu);
    if (!it->spilled && !it->counted) {
        it->counted = true;
        it->bytes = bytes;
        rec->mem_items++;
        rec->mem_bytes += bytes;
    }
    it->next_ms = tc_now_ms() + backoff;
    it->busy = false;
    pthread_mutex_unlock(&rec->mu);
}

static void process_finish(struct tc_recorder *rec, PGconn **c, struct item *it)
{
    struct tc_server *srv = rec->srv;
    if (!it->built) {
        it->view = it->build ? it->build(it->userdata, it->raw) : NULL;
        if (!it->view) {
            pthread_mutex_lock(&rec->mu);
            it->next_ms = tc_now_ms() + 100; /* out of memory: try again */
            it->busy = false;
            pthread_mutex_unlock(&rec->mu);
            return;
        }
        it->built = true;
        json_decref(it->raw);
        it->raw = NULL;
        pthread_mutex_lock(&rec->mu);
        it->answerable = true; /* (its userdata is not used again) */
        pthread_mutex_unlock(&rec->mu);
    }
    if (it->spilled && !it->view) {
        char path[PATH_MAX];
        int r = spill_path(rec, it->exec_id, "", path);
        if (r == 0)
            r = load(rec, it, path);
        if (r < 0) {
            tc_log(TC_LOG_ERROR, "a spilled outcome cannot be read; it is left on disk",
                   "{s:s, s:s}", "path", path, "error", strerror(-r));
            if (r == -EBADMSG) {
                char bad[PATH_MAX];
                if (spill_path(rec, it->exec_id, ".bad", bad) == 0)
                    (void)rename(path, bad);
            }
            answer(it, -ETIMEDOUT, NULL);
            remove_item(rec, it);
            item_free(it);
            return;
        }
    }
    if (!tc_db_ensure(c, srv->cfg->database_url)) {
        retry_later(rec, *c, it);
        return;
    }
    /* Ended (or refused, or interrupted): its leases and tokens end with it. Idempotent. */
    if (it->release_credentials) {
        if (tc_broker_release(*c, srv->keys, it->exec_id) < 0) {
            retry_later(rec, *c, it);
            return;
        }
        it->release_credentials = false;
    }
    struct tc_finish f = {.tenant_id = it->tenant_id,
                          .exec_id = it->exec_id,
                          .tool = it->tool,
                          .request_id = it->request_id[0] ? it->request_id : NULL,
                          .claimed_by = it->claimed_by,
                          .actor = it->actor,
                          .view = it->view,
                          .action = it->action};
    int rc = tc_execution_finish(*c, srv->keys, &f);
    json_t *stored = NULL;
    if (rc == -ESTALE) {
        tc_log(TC_LOG_WARN, "the execution was closed meanwhile; its result is kept as late",
               "{s:s, s:s}", "execution_id", it->exec_id, "status",
               json_string_value(json_object_get(it->view, "status")));
        if (tc_execution_late_result(*c, srv->keys, &f, &stored) < 0)
            rc = -EIO;
    }
    if (rc == -EIO) {
        retry_later(rec, *c, it);
        return;
    }
    if (rc == 0) {
        tc_metrics_execution(it->tool, json_string_value(json_object_get(it->view, "status")),
                             json_integer_value(json_object_get(it->view, "duration_ms")));
        if (it->tries)
            tc_log(TC_LOG_INFO, "outcome stored after retries", "{s:s, s:i}", "execution_id",
                   it->exec_id, "attempts", (int)it->tries + 1);
    }
    forget_spill(rec, it);
    tc_waiters_wake(it->exec_id);
    remove_item(rec, it);
    answer(it, rc, rc == 0 ? it->view : stored);
    json_decref(stored);
    item_free(it);
}

/* ---- threads ---- */

/* With mu held: the next item to work on, or NULL and *ret_wait_ms. Starts first (a sandbox
 * waits), then outcomes to build, then retries that are due. */
static struct item *pick(struct tc_recorder *rec, int64_t now, int64_t *ret_wait_ms)
{
    struct item *best = NULL;
    int best_rank = 3;
    int64_t wait = 200;
    for (struct item *it = rec->head; it; it = it->next) {
        if (it->busy)
            continue;
        if (it->next_ms > now) {
            if (it->next_ms - now < wait)
                wait = it->next_ms - now;
            continue;
        }
        int rank = it->kind == K_START ? 0 : !it->built ? 1 : 2;
        if (rank < best_rank) {
            best = it;
            best_rank = rank;
        }
    }
    *ret_wait_ms = wait;
    return best;
}

/* Wait on cv (mu held) for at most ms. */
static void wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

struct late_answer {
    tc_recorded_fn done;
    void *userdata;
};

static void *recorder_main(void *arg)
{
    struct tc_recorder *rec = arg;
    PGconn *c = NULL;
    for (;;) {
        struct item *it = NULL;
        pthread_mutex_lock(&rec->mu);
        for (;;) {
            int64_t now = tc_now_ms(), wait;
            it = pick(rec, now, &wait);
            if (it) {
                it->busy = true;
                break;
            }
            if (rec->stopping && (rec->count == 0 || now >= rec->stop_by_ms))
                break;
            wait_ms(&rec->cv, &rec->mu, wait);
        }
        bool leave = !it;
        pthread_mutex_unlock(&rec->mu);
        if (leave)
            break;
        if (it && it->kind == K_START)
            process_start(rec, &c, it);
        else if (it)
            process_finish(rec, &c, it);
    }
    PQfinish(c);
    return NULL;
}

/* A client waits for its outcome only so long: at its deadline it hears that the outcome is
 * not stored yet (the item stays and is stored later). A thread of its own, so that a store
 * stuck in the database (a statement that hangs: a lock, a frozen server) holds no client
 * past its deadline; the recorder's threads may all be in such a store. */
static void *answerer_main(void *arg)
{
    struct tc_recorder *rec = arg;
    pthread_mutex_lock(&rec->mu);
    while (!rec->stopping) {
        struct late_answer late[16];
        size_t nlate = 0;
        int64_t now = tc_now_ms(), next = now + 1000;
        for (struct item *i = rec->head; i && nlate < TC_ARRAY_SIZE(late); i = i->next) {
            if (!i->answerable || !__atomic_load_n(&i->done, __ATOMIC_ACQUIRE))
                continue;
            if (now < i->answer_by_ms) {
                next = i->answer_by_ms < next ? i->answer_by_ms : next;
                continue;
            }
            tc_recorded_fn done = __atomic_exchange_n(&i->done, NULL, __ATOMIC_ACQ_REL);
            if (done)
                late[nlate++] = (struct late_answer){done, i->userdata};
        }
        if (nlate) {
            pthread_mutex_unlock(&rec->mu);
            for (size_t k = 0; k < nlate; k++)
                late[k].done(late[k].userdata, -ETIMEDOUT, NULL);
            pthread_mutex_lock(&rec->mu);
            continue;
        }
        wait_ms(&rec->answer_cv, &rec->mu, next > now ? next - now : 1);
    }
    pthread_mutex_unlock(&rec->mu);
    return NULL;
}

int tc_recorder_start(struct tc_server *srv, struct tc_recorder **ret_recorder)
{
    struct tc_recorder *rec = calloc(1, sizeof(*rec));
    if (!rec)
        return -ENOMEM;
    rec->srv = srv;
    pthread_mutex_init(&rec->mu, NULL);
    pthread_cond_init(&rec->cv, NULL);
    pthread_cond_init(&rec->answer_cv, NULL);
    int n = snprintf(rec->dir, sizeof(rec->dir), "%s/outcomes", srv->cfg->state_dir);
    if (n < 0 || (size_t)n >= sizeof(rec->dir)) {
        rec->dir[0] = '\0';
    } else if ((mkdir(srv->cfg->state_dir, 0700) < 0 && errno != EEXIST) ||
               (mkdir(rec->dir, 0700) < 0 && errno != EEXIST)) {
        /* Without it unstored outcomes stay in memory: worth a line, not a refusal. */
        tc_log(TC_LOG_WARN, "no directory for unstored outcomes", "{s:s, s:s}", "dir", rec->dir,
               "error", strerror(errno));
    }
    load_spilled(rec);
    for (unsigned i = 0; i < THREADS; i++) {
        if (pthread_create(&rec->threads[i], NULL, recorder_main, rec) != 0)
            break;
        rec->nthreads++;
    }
    rec->answerer_started =
        rec->nthreads > 0 && pthread_create(&rec->answerer, NULL, answerer_main, rec) == 0;
    if (!rec->answerer_started) {
        tc_recorder_stop(rec);
        return -EAGAIN;
    }
    *ret_recorder = rec;
    return 0;
}

void tc_recorder_stop(struct tc_recorder *rec)
{
    if (!rec)
        return;
    pthread_mutex_lock(&rec->mu);
    rec->stopping = true;
    rec->stop_by_ms = tc_now_ms() + STOP_DRAIN_MS;
    pthread_cond_broadcast(&rec->cv);
    pthread_cond_broadcast(&rec->answer_cv);
    pthread_mutex_unlock(&rec->mu);
    for (unsigned i = 0; i < rec->nthreads; i++)
        pthread_join(rec->threads[i], NULL);
    if (rec->answerer_started)
        pthread_join(rec->answerer, NULL);
    /* Alone now. What is left goes to disk for the next start; waiting callers hear. */
    unsigned kept = 0, lost = 0;
    while (rec->head) {
        struct item *it = rec->head;
        unlink_item(rec, it);
        if (it->kind == K_FINISH && !it->built && it->build)
            it->view = it->build(it->userdata, it->raw);
        it->built = it->built || it->view;
        answer(it, -ETIMEDOUT, NULL);
        if (it->kind == K_FINISH) {
            if (it->spilled || (it->view && spill(rec, it) == 0)) {
                kept++;
            } else {
                lost++;
                tc_log(TC_LOG_ERROR, "an outcome could be neither stored nor kept on disk",
                       "{s:s, s:s}", "execution_id", it->exec_id, "dir", rec->dir);
            }
        }
        item_free(it);
    }
    if (kept)
        tc_log(TC_LOG_WARN, "outcomes not stored yet are kept on disk for the next start",
               "{s:i, s:s}", "count", (int)kept, "dir", rec->dir);
    (void)lost;
    pthread_mutex_destroy(&rec->mu);
    pthread_cond_destroy(&rec->cv);
    pthread_cond_destroy(&rec->answer_cv);
    free(rec);
}

int tc_recorder_start_run(struct tc_recorder *rec, const struct tc_record_ids *ids)
{
    struct item *it = calloc(1, sizeof(*it));
    if (!it) {
        launcher_say(rec, ids->exec_id, false);
        return -ENOMEM;
    }
    it->kind = K_START;
    set_ids(it, ids);
    it->give_up_ms = tc_now_ms() + START_GIVE_UP_MS;
    enqueue(rec, it);
    return 0;
}

int tc_recorder_finish(struct tc_recorder *rec, const struct tc_record_outcome *o)
{
    struct item *it = calloc(1, sizeof(*it));
    if (!it)
        return -ENOMEM;
    it->kind = K_FINISH;
    set_ids(it, &o->ids);
    snprintf(it->action, sizeof(it->action), "%s", o->action);
    it->raw = json_incref(o->raw);
    it->view = json_incref(o->view);
    it->built = it->answerable = o->view != NULL;
    it->build = o->build;
    it->done = o->done;
    it->userdata = o->userdata;
    it->release_credentials = o->release_credentials;
    it->answer_by_ms = tc_now_ms() + ANSWER_WITHIN_MS;
    enqueue(rec, it);
    return 0;
}

unsigned tc_recorder_pending(struct tc_recorder *rec)
{
    if (!rec)
        return 0;
    pthread_mutex_lock(&rec->mu);
    unsigned n = 0;
    for (struct item *it = rec->head; it; it = it->next)
        n += it->kind == K_FINISH;
    pthread_mutex_unlock(&rec->mu);
    return n;
}
