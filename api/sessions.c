/* Sessions (docs/sessions.md): a sandbox that stays up for a tenant's calls. Its program is
 * a driver (execution/session/) that runs each call's code in one interpreter or shell; the
 * server writes each call to the driver's stdin and finds its end in the output
 * (execution/session.h). A call is an execution like any other: recorded before it runs,
 * pre-screened, redacted, audited (with its session_id), stored by the recorder.
 *
 *   POST   /v1/sessions                 {tool, ttl_seconds?, idle_timeout_seconds?, limits?}
 *   GET    /v1/sessions                 the tenant's sessions, newest first
 *   GET    /v1/sessions/{id}
 *   DELETE /v1/sessions/{id}
 *   POST   /v1/sessions/{id}/execute    {code, stdin?, files?, timeout_ms?, cpu_ms?}
 *   GET    /v1/sessions/{id}/files      the workspace's entries
 *   PUT|GET|DELETE /v1/sessions/{id}/files/{path}   one file (the path may hold '/')
 *
 * A session lives on the server process that opened it. One thread (the keeper) enforces the
 * per-call time (SIGINT to the driver's process group, then the session is killed if the call
 * does not end within KILL_GRACE_MS), the idle timeout and the TTL (also the sandbox's wall
 * limit, which the launcher enforces), and records ends the sandbox caused. Locking: one
 * mutex (ss.mu) over the registry and every session's state; nothing blocks under it. */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/stream.h"
#include "approval/approval.h"
#include "audit/audit.h"
#include "broker/leases.h"
#include "common/embedded.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"
#include "core/metrics.h"
#include "execution/quota.h"
#include "execution/record.h"
#include "execution/request.h"
#include "execution/session.h"
#include "policy/policy.h"
#include "policy/prescreen.h"
#include "policy/redact.h"
#include "sandbox/sandbox.h"
#include "sandbox/workspace.h"
#include "server/auth.h"
#include "server/recorder.h"

#define KILL_GRACE_MS  2000 /* after the interrupt, a call that has not ended kills its session */
#define STRAY_MAX      (64u << 10) /* output between calls kept for the next one, per stream */
#define DEFAULT_TTL_S  600
#define DEFAULT_IDLE_S 300
#define LIST_MAX       100
#define HELD_POLL_MS   250 /* the keeper looks at held calls' decisions this often */
#define NET_MAX        256 /* attempts the egress proxy tells of per sandbox (sandbox/egress.h) */

struct session;

struct call {
    struct session *s;
    struct tc_request *r;
    struct tc_principal principal;
    char exec_id[37], nonce[TC_SESSION_NONCE_LEN + 1], request_id[65], created_at[32];
    int64_t limits[TC_LIMIT__COUNT];
    json_t *findings;
    int64_t t0_ms, deadline_ms, interrupt_ms;
    bool interrupted, timed_out, cancelled;
    bool cpu_spent;      /* its CPU budget ran out (the launcher interrupted it) */
    int64_t cpu_used_ms; /* what the launcher measured when it did */
    char cpu_meter[16];  /* how the launcher measures the budget ("" = it could not) */
    struct tc_session_scan scan[2];
    unsigned ended; /* bit k: stream k's marker seen */
    struct tc_buf raw[2];
    bool trunc[2];
    json_t *meta;    /* the driver's account of the call */
    json_t *sandbox; /* the sandbox's result when it ended during the call */
    int record_rc;
    json_t *view;
    struct tc_exec_stream *stream; /* Accept: text/event-stream: its events (api/stream.h) */
    uint8_t net[NET_MAX];          /* the egress attempts it has (indexes), in the order told */
    unsigned nnet;
    json_t *network;        /* theirs as they stood at its end (its "network") */
    json_t *viol_base;      /* the session's violations when it started (or NULL) */
    json_t *violations;     /* its own: those since (its "policy_violations") */
    const char *refused;    /* it ended before it ran, for this reason (a held call) */
    bool cancel_asked;      /* cancelled while it was being started: it does not run */
    struct call *drop_next; /* in ss.dropped */
};

struct session {
    struct session *next;
    int refs; /* under ss.mu: the registry, the launcher (until its result), each call */
    char id[37], tenant_id[37], tool[65];
    char tool_policy[65]; /* the tool's definition (tc_approval_tool_digest) */
    struct tc_principal principal;
    struct tc_policy *policy;
    const struct tc_tool *t; /* in policy */
    struct tc_redactor *redactor;
    struct tc_grant *grant;
    int64_t limits[TC_LIMIT__COUNT];
    int64_t ttl_s, idle_s, expires_ms, last_ms;
    bool plots, in_registry, launched;
    bool busy;                  /* a call has the session (from its admission to its end) */
    const char *end_reason;     /* set once: why it ends */
    bool end_recorded;          /* the database says so (or will: queued for the keeper) */
    struct session *retry_next; /* in ss.retry: its end could not be recorded yet */
    const char *retry_reason;
    struct call *call;     /* the call the driver runs now (armed), or NULL */
    struct call *held;     /* a call held for a person's approval (the session busy for it) */
    struct call *starting; /* an approved held call being started (the held thread's) */
    struct tc_buf stray[2];
    json_t *net;                   /* the egress proxy's news, each attempt's latest by index */
    uint8_t net_told[NET_MAX / 8]; /* indexes some call (or net_stray) has */
    uint8_t net_stray[NET_MAX];    /* told between calls (indexes): the next call's */
    unsigned nnet_stray;
    char budget_of[37];   /* an ended call whose CPU budget the keeper tells the launcher to end */
    json_t *viol;         /* the sandbox's seccomp violations so far (the launcher's news) */
    int64_t cpu_calls_ms; /* what calls reported, for the session's CPU accounting */
    int64_t cpu_left_ms;  /* the sandbox's CPU the calls did not report (at its end) */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct session *list;
    struct session *ended; /* ends the sandbox caused, for the keeper to record (next chain) */
    struct session *retry; /* ends the database did not take, retried (retry_next chain) */
    struct call *dropped;  /* held calls of ended sessions, for the keeper to free */
    pthread_t held_thread; /* looks at held calls' decisions (held_main) */
    pthread_cond_t held_cv;
    bool held_started;
    int64_t retry_ms; /* when the keeper tries them again */
    struct tc_server *srv;
    pthread_t keeper;
    unsigned launched;  /* sessions whose sandbox has not given its result yet */
    bool started, stop; /* stop: no new session; quit: the keeper ends (after the results) */
    bool quit;
} ss = {.mu = PTHREAD_MUTEX_INITIALIZER,
        .cv = PTHREAD_COND_INITIALIZER,
        .held_cv = PTHREAD_COND_INITIALIZER};

/* ---- sessions' lifetimes ---- */

static void session_unref_locked(struct session *s)
{
    if (--s->refs > 0)
        return;
    tc_policy_unref(s->policy);
    tc_redactor_free(s->redactor);
    tc_grant_free(s->grant);
    tc_buf_free(&s->stray[0]);
    tc_buf_free(&s->stray[1]);
    json_decref(s->net);
    json_decref(s->viol);
    free(s);
}

static void session_unref(struct session *s)
{
    pthread_mutex_lock(&ss.mu);
    session_unref_locked(s);
    pthread_mutex_unlock(&ss.mu);
}

/* The tenant's session id, with a reference; NULL if it is not open here. */
static struct session *lookup(const char *tenant_id, const char *id)
{
    pthread_mutex_lock(&ss.mu);
    struct session *s = ss.list;
    while (s && !(strcmp(s->id, id) == 0 && strcmp(s->tenant_id, tenant_id) == 0))
        s = s->next;
    if (s)
        s->refs++;
    pthread_mutex_unlock(&ss.mu);
    return s;
}

static void unlink_locked(struct session *s)
{
    if (!s->in_registry)
        return;
    for (struct session **p = &ss.list; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    s->in_registry = false;
    s->next = NULL;
    if (s->held) { /* its record is closed with the session's end (record_end) */
        s->held->drop_next = ss.dropped;
        ss.dropped = s->held;
        s->held = NULL;
        pthread_cond_signal(&ss.cv);
    }
    session_unref_locked(s);
}

#define RETRY_END_MS 2000 /* an end the database did not take is tried again this often */

/* The session's end in the database (guarded: only an active row) with its audit record, and
 * its credentials revoked. Blocks on the database: never under ss.mu. 0 or -EIO. */
static int record_end(struct session *s, const char *reason)
{
    struct tc_server *srv = ss.srv;
    PGconn *c = tc_db_acquire(srv->db, 5000);
    const char *p[] = {s->id, reason};
    int rc = c ? tc_db_begin(c) : -EIO;
    PGresult *res = rc == 0 ? tc_db_exec(c,
                                         "UPDATE sessions SET status = 'ended', ended_at = now(),"
                                         " ended_reason = $2 WHERE id = $1 AND status = 'active'"
                                         " RETURNING calls",
                                         2, p)
                            : NULL;
    if (rc == 0 && !res)
        rc = -EIO;
    if (res && PQntuples(res) == 1) {
        json_t *actor = tc_auth_actor(&s->principal);
        json_t *ev =
            json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:i}", "action", "session.end", "tenant_id",
                      s->tenant_id, "actor", actor, "tool", s->tool, "session_id", s->id, "reason",
                      reason, "calls", atoi(PQgetvalue(res, 0, 0)));
        if (!ev || tc_audit_append_tx(c, srv->keys, ev, NULL) < 0)
            rc = -EIO;
        json_decref(ev);
        /* a call it held for a person: withdrawn with it */
        json_t *sys = json_pack("{s:s, s:s}", "type", "system", "id", "session");
        if (rc == 0 && (!sys || tc_approval_session_ended_tx(c, srv->keys, s->id, sys) < 0))
            rc = -EIO;
        json_decref(sys);
    }
    PQclear(res);
    if (c)
        rc = tc_db_finish(c, rc);
    if (c && !tc_grant_empty(s->grant) && tc_broker_release(c, srv->keys, s->id) < 0)
        rc = -EIO;
    tc_db_release(srv->db, c);
    if (rc < 0) /* the keeper tries again (and the sweeper ends it if this process dies) */
        tc_log(TC_LOG_ERROR, "recording a session's end failed (retried)", "{s:s, s:s}",
               "session_id", s->id, "reason", reason);
    else
        tc_log(TC_LOG_INFO, "session ended", "{s:s, s:s}", "session_id", s->id, "reason", reason);
    return rc < 0 ? -EIO : 0;
}

/* An end the database did not take: the keeper records it later (with a reference). */
static void retry_end_locked(struct session *s, const char *reason)
{
    s->refs++;
    s->retry_reason = reason;
    s->retry_next = ss.retry;
    ss.retry = s;
}

/* End s for reason (the first reason wins): no new call, the sandbox killed. record: write
 * the end now (callers that may block); else the keeper does. -EIO: the end is not stored yet
 * (the keeper retries it). */
static int end_session(struct session *s, const char *reason, bool record)
{
    pthread_mutex_lock(&ss.mu);
    bool first = !s->end_reason;
    if (first)
        s->end_reason = reason;
    unlink_locked(s);
    bool do_record = first && record && !s->end_recorded;
    if (do_record)
        s->end_recorded = true;
    bool launched = s->launched;
    pthread_mutex_unlock(&ss.mu);
    int rc = do_record ? record_end(s, reason) : 0;
    if (rc < 0) {
        pthread_mutex_lock(&ss.mu);
        retry_end_locked(s, reason);
        pthread_mutex_unlock(&ss.mu);
    }
    if (launched && tc_server_begin(ss.srv)) {
        (void)tc_launcher_cancel(ss.srv->launcher, s->id);
        tc_server_end(ss.srv);
    }
    return rc;
}

/* ---- a call's end ---- */

static json_t *b64_json(const struct tc_buf *b)
{
    char *e = tc_b64_encode(b->data ? b->data : "", b->len);
    json_t *j = json_string(e ? e : "");
    free(e);
    return j;
}

/* What the launcher would say of a one-shot run, from the driver's account (or the sandbox's
 * result, when the session ended during the call). */
static json_t *call_result(struct call *c)
{
    const char *status = "completed", *killed = NULL, *error = NULL;
    json_t *exit_code = json_null(), *signal = json_null();
    const char *ms = json_string_value(json_object_get(c->meta, "status"));
    if (c->meta) {
        json_int_t code = json_integer_value(json_object_get(c->meta, "exit_code"));
        exit_code = json_integer(code);
        if (ms && strcmp(ms, "interrupted") == 0 && c->cpu_spent) {
            status = "killed";
            killed = "cpu";
        } else if (ms && strcmp(ms, "interrupted") == 0 && (c->timed_out || c->cancelled)) {
            status = c->timed_out ? "timeout" : "cancelled";
            killed = status;
        } else if (code != 0 || (ms && strcmp(ms, "error") == 0)) {
            status = "failed";
        }
    } else if (c->sandbox) {
        /* the session's sandbox ended before the call did */
        const char *kr = json_string_value(json_object_get(c->sandbox, "killed_reason"));
        const char *ss_ = json_string_value(json_object_get(c->sandbox, "status"));
        json_decref(exit_code);
        json_decref(signal);
        exit_code = json_incref(json_object_get(c->sandbox, "exit_code"));
        signal = json_incref(json_object_get(c->sandbox, "signal"));
        if (!exit_code)
            exit_code = json_null();
        if (!signal)
            signal = json_null();
        if (c->cpu_spent) {
            status = "killed";
            killed = "cpu";
        } else if (c->timed_out || c->cancelled) {
            status = c->timed_out ? "timeout" : "cancelled";
            killed = status;
        } else if (kr && strcmp(kr, "timeout") != 0 && strcmp(kr, "cancelled") != 0) {
            status = "killed";
            killed = kr;
        } else if (ss_ && strcmp(ss_, "error") == 0) {
            status = "error";
            error = json_string_value(json_object_get(c->sandbox, "error"));
        } else if (kr) {
            status = "killed";
            killed = kr;
            error = strcmp(kr, "timeout") == 0 ? "the session's time (ttl_seconds) ran out"
                                               : "the session was ended during the call";
        } else if (json_integer_value(exit_code) != 0 || !json_is_integer(exit_code)) {
            status = "failed";
            error = "the session's program exited during the call (the session has ended)";
        } /* else: `exit 0`, the session's end asked for by its code */
    } else if (c->cancel_asked) {
        status = "cancelled";
        killed = "cancelled";
    } else if (c->refused) {
        status = "error";
        error = c->refused;
    } else {
        status = "error";
        error = "the session ended during the call";
    }
    int64_t dur = tc_now_ms() - c->t0_ms;
    json_t *files = json_array();
    size_t i;
    json_t *fig;
    json_array_foreach(json_object_get(c->meta, "figures"), i, fig)
    {
        char path[64];
        snprintf(path, sizeof(path), ".toolcage/outputs/fig-%03zu.png", i + 1);
        if (json_is_string(fig))
            json_array_append_new(
                files, json_pack("{s:s, s:O, s:I, s:b}", "path", path, "content_b64", fig, "size",
                                 (json_int_t)json_string_length(fig) * 3 / 4, "truncated", 0));
    }
    json_int_t cpu = json_integer_value(json_object_get(c->meta, "cpu_ms"));
    if (cpu < c->cpu_used_ms)
        cpu = c->cpu_used_ms;
    json_t *res = json_pack(
        "{s:s, s:s, s:o, s:o, s:o, s:o, s:b, s:b, s:I, s:I, s:s?, s:o, s:{s:s, s:s?}, s:o, s:o}",
        "id", c->exec_id, "status", status, "exit_code", exit_code, "signal", signal, "stdout_b64",
        b64_json(&c->raw[0]), "stderr_b64", b64_json(&c->raw[1]), "stdout_truncated", c->trunc[0],
        "stderr_truncated", c->trunc[1], "duration_ms", (json_int_t)dur, "cpu_ms", cpu,
        "killed_reason", killed, "files", files, "enforced", "wall_ms", "server", "cpu_ms",
        c->cpu_meter[0] ? c->cpu_meter : NULL, "policy_violations",
        c->violations ? json_incref(c->violations) : json_array(), "network",
        c->network ? json_incref(c->network) : json_array());
    if (res && error)
        json_object_set_new(res, "error", json_string(error));
    return res;
}

static json_t *call_view(void *userdata, json_t *raw)
{
    struct call *c = userdata;
    struct session *s = c->s;
    char finished[32];
    tc_iso8601(tc_wall_ms(), finished);
    struct tc_exec_filter filter = {.redactor = s->redactor};
    filter.secrets = tc_grant_values(s->grant, &filter.nsecrets);
    json_t *view = tc_exec_view(c->exec_id, s->tool, raw, c->limits, c->created_at, finished,
                                &filter, c->findings);
    if (!view)
        return NULL;
    json_object_set_new(view, "session_id", json_string(s->id));
    const char *result = json_string_value(json_object_get(c->meta, "result"));
    json_object_set_new(view, "result",
                        result ? tc_exec_redact_string(&filter, result, strlen(result),
                                                       json_object_get(view, "redactions"))
                               : json_null());
    return view;
}

static void call_free(void *p)
{
    struct call *c = p;
    if (!c)
        return;
    tc_session_scan_free(&c->scan[0]);
    tc_session_scan_free(&c->scan[1]);
    tc_buf_free(&c->raw[0]);
    tc_buf_free(&c->raw[1]);
    json_decref(c->meta);
    json_decref(c->sandbox);
    json_decref(c->findings);
    json_decref(c->network);
    json_decref(c->viol_base);
    json_decref(c->violations);
    json_decref(c->view);
    tc_exec_stream_free(c->stream); /* before the session: it reads its redactor */
    if (c->s)
        session_unref(c->s);
    free(c);
}

static void call_recorded(void *userdata, int rc, json_t *view)
{
    struct call *c = userdata;
    if (c->stream) { /* answered with the events: the call is its own, and ends here */
        tc_exec_stream_recorded(TC_STEAL(c->stream), rc, view);
        call_free(c);
        return;
    }
    if (!c->r) { /* a held call run by the keeper: nobody waits (GET /v1/executions/{id}) */
        call_free(c);
        return;
    }
    c->record_rc = rc;
    c->view = json_incref(view);
    tc_request_resume(c->r);
}

/* The call is over (detached from its session already): store it, then answer. */
static void call_finish(struct call *c)
{
    json_t *raw = call_result(c);
    json_t *actor = tc_auth_actor(&c->principal);
    struct tc_record_outcome o = {.ids = {.exec_id = c->exec_id,
                                          .tenant_id = c->principal.tenant_id,
                                          .tool = c->s->tool,
                                          .request_id = c->request_id,
                                          .claimed_by = ss.srv->instance_id,
                                          .actor = actor},
                                  .action = c->refused ? "execution.refused" : "execution.complete",
                                  .raw = raw,
                                  .build = call_view,
                                  .done = call_recorded,
                                  .userdata = c};
    if (!raw || !actor || tc_recorder_finish(ss.srv->recorder, &o) < 0)
        call_recorded(c, -ENOMEM, NULL);
    json_decref(actor);
    json_decref(raw);
}

/* ---- the launcher's side (its reader thread: nothing may block) ---- */

struct emit_ctx {
    struct call *c;
    int k;
};

static void emit_output(void *ud, const char *data, size_t len)
{
    struct emit_ctx *e = ud;
    struct call *c = e->c;
    size_t cap = (size_t)c->limits[TC_LIMIT_OUTPUT_BYTES];
    size_t room = c->raw[e->k].len < cap ? cap - c->raw[e->k].len : 0;
    if (len > room)
        c->trunc[e->k] = true;
    size_t keep = len < room ? len : room;
    if (keep && tc_buf_append(&c->raw[e->k], data, keep) < 0) {
        c->trunc[e->k] = true;
        keep = 0;
    }
    if (keep && c->stream) /* what the result will hold, as it comes */
        tc_exec_stream_chunk(c->stream, e->k + 1, data, keep);
}

/* Output between calls (programs left in the background): the next call's, up to STRAY_MAX. */
static void keep_stray(struct session *s, int k, const char *data, size_t len)
{
    size_t room = s->stray[k].len < STRAY_MAX ? STRAY_MAX - s->stray[k].len : 0;
    if (room && tc_buf_append(&s->stray[k], data, len < room ? len : room) < 0)
        return; /* bounded: the rest is dropped */
}

/* The egress proxy's news of a connection (the launcher's stream 3, sandbox.h): kept as the
 * attempt's latest; the call running now has it (and tells it live) if no call had it before,
 * or the next call does when none runs. */
static void network_locked(struct session *s, const char *data, size_t len)
{
    json_t *att = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *ix = json_object_get(att, "index");
    json_int_t i = json_integer_value(ix);
    if (!json_is_object(att) || !json_is_integer(ix) || i < 0 || i >= NET_MAX) {
        json_decref(att);
        return;
    }
    if (!s->net)
        s->net = json_array();
    while (s->net && json_array_size(s->net) <= (size_t)i)
        json_array_append_new(s->net, json_null());
    if (!s->net || json_array_set_new(s->net, (size_t)i, att) < 0)
        return;
    if (s->net_told[i / 8] & (1u << (i % 8)))
        return;
    s->net_told[i / 8] |= (uint8_t)(1u << (i % 8));
    struct call *c = s->call;
    if (!c) {
        s->net_stray[s->nnet_stray++] = (uint8_t)i;
        return;
    }
    if (c->stream)
        tc_exec_stream_network_at(c->stream, att, c->nnet);
    c->net[c->nnet++] = (uint8_t)i;
}

/* The launcher's news of the running call's CPU budget (stream 4, sandbox.h): how it is
 * measured, or that it ran out (the launcher has interrupted the program: the call ends
 * "killed" by "cpu", or its session if it does not end within KILL_GRACE_MS). */
static void budget_locked(struct session *s, const char *data, size_t len)
{
    json_t *n = json_loadb(data, len, 0, NULL);
    const char *call = json_string_value(json_object_get(n, "call"));
    json_t *meter = json_object_get(n, "meter"), *spent = json_object_get(n, "spent_ms");
    struct call *c = s->call;
    if (c && call && strcmp(call, c->exec_id) == 0) {
        if (json_is_string(meter))
            snprintf(c->cpu_meter, sizeof(c->cpu_meter), "%s", json_string_value(meter));
        if (json_is_integer(spent) && !c->interrupted) {
            c->interrupted = c->cpu_spent = true;
            c->interrupt_ms = tc_now_ms();
            c->cpu_used_ms = json_integer_value(spent);
        }
    }
    json_decref(n);
}

/* The launcher's news of the sandbox's seccomp violations so far (stream 5). */
static void violations_locked(struct session *s, const char *data, size_t len)
{
    json_t *n = json_loadb(data, len, 0, NULL);
    json_t *v = json_object_get(n, "violations");
    if (json_is_array(v)) {
        json_decref(s->viol);
        s->viol = json_incref(v);
    }
    json_decref(n);
}

/* What now (cumulative, as the launcher counts per sandbox) has on top of base. */
static json_t *violations_since(json_t *now, json_t *base)
{
    json_t *out = json_array(), *v;
    size_t i;
    json_array_foreach(now, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "syscall"));
        json_int_t count = json_integer_value(json_object_get(v, "count")), before = 0;
        size_t j;
        json_t *b;
        json_array_foreach(base, j, b)
        {
            const char *was = json_string_value(json_object_get(b, "syscall"));
            if (name && was && strcmp(name, was) == 0)
                before = json_integer_value(json_object_get(b, "count"));
        }
        if (name && count > before)
            json_array_append_new(out, json_pack("{s:s, s:I}", "syscall", name, "count",
                                                 (json_int_t)(count - before)));
    }
    return out;
}

/* c ends: its attempts as they stand now become its "network". */
static void call_network_locked(struct session *s, struct call *c)
{
    json_t *list = json_array();
    for (unsigned k = 0; list && k < c->nnet; k++)
        json_array_append(list, json_array_get(s->net, c->net[k]));
    json_decref(c->network);
    c->network = list;
}

/* Output of stream k for the running call (or, with none, kept for the next). Under ss.mu;
 * 1 when this ended the call (s->call is then NULL and *ret_done the call), 0, or -E2BIG: the
 * end marker's line is past its bound (the driver is not ours any more: end the session). */
static int feed_locked(struct session *s, int k, const char *data, size_t len,
                       struct call **ret_done)
{
    struct call *c = s->call;
    if (!c) {
        keep_stray(s, k, data, len);
        return 0;
    }
    if (c->ended & (1u << k)) { /* this stream's end came: the rest is no call's */
        keep_stray(s, k, data, len);
        return 0;
    }
    struct emit_ctx e = {c, k};
    size_t after = len;
    int r = tc_session_scan_feed(&c->scan[k], data, len, emit_output, &e, &after);
    if (r < 0)
        return r;
    if (r == 1) {
        c->ended |= 1u << k;
        if (k == 0)
            c->meta = tc_session_scan_meta(&c->scan[0]);
        if (after < len) /* after the marker: no call's (kept for the next) */
            keep_stray(s, k, data + after, len - after);
    }
    if (c->ended != 3)
        return 0;
    if (c->meta) { /* the driver's word, bounded: it can only under-count the session's CPU */
        json_int_t cpu = json_integer_value(json_object_get(c->meta, "cpu_ms"));
        int64_t most = tc_now_ms() - c->t0_ms;
        cpu = cpu < 0 ? 0 : cpu > most * 64 ? most * 64 : cpu;
        json_object_set_new(c->meta, "cpu_ms", json_integer(cpu));
        s->cpu_calls_ms += cpu;
    }
    call_network_locked(s, c);
    c->violations = violations_since(s->viol, c->viol_base);
    memcpy(s->budget_of, c->exec_id, sizeof(s->budget_of));
    pthread_cond_signal(&ss.cv); /* the keeper ends its budget */
    s->call = NULL;
    s->busy = false;
    s->last_ms = tc_now_ms();
    *ret_done = c;
    return 1;
}

static void on_chunk(void *userdata, int stream, const char *data, size_t len)
{
    struct session *s = userdata;
    struct call *done = NULL;
    bool bad = false;
    pthread_mutex_lock(&ss.mu);
    if (stream == 1 || stream == 2)
        bad = feed_locked(s, stream - 1, data, len, &done) < 0;
    else if (stream == 3)
        network_locked(s, data, len);
    else if (stream == 4)
        budget_locked(s, data, len);
    else if (stream == 5)
        violations_locked(s, data, len);
    pthread_mutex_unlock(&ss.mu);
    if (done)
        call_finish(done);
    if (bad)
        end_session(s, "killed", false);
}

/* The session's sandbox is gone (its result): a call still running ends with it; the end is
 * recorded by the keeper unless it was already. */
static void on_sandbox_done(void *userdata, json_t *result)
{
    struct session *s = userdata;
    pthread_mutex_lock(&ss.mu);
    if (!s->end_reason) {
        const char *kr = json_string_value(json_object_get(result, "killed_reason"));
        const char *st = json_string_value(json_object_get(result, "status"));
        s->end_reason = kr && strcmp(kr, "timeout") == 0 ? "ttl_expired"
                        : kr                             ? "killed"
                        : st && strcmp(st, "error") == 0 ? "error"
                                                         : "exited";
    }
    unlink_locked(s);
    struct call *c = s->call;
    s->call = NULL;
    if (c) {
        c->sandbox = json_incref(result);
        call_network_locked(s, c);
        c->violations =
            violations_since(json_object_get(result, "policy_violations"), c->viol_base);
    }
    s->launched = false;
    ss.launched--;
    /* the keeper records the end (and the CPU no call reported), then drops the launcher's
     * reference */
    s->cpu_left_ms = json_integer_value(json_object_get(result, "cpu_ms")) - s->cpu_calls_ms;
    s->next = ss.ended;
    ss.ended = s;
    pthread_cond_signal(&ss.cv);
    pthread_mutex_unlock(&ss.mu);
    if (c)
        call_finish(c);
}

/* ---- the keeper ---- */

/* CPU of a session's sandbox that no call reported (the driver's own, programs left in the
 * background), for the tenant's daily budget. */
static void add_usage(const char *tenant_id, int64_t cpu_ms)
{
    PGconn *c = tc_db_acquire(ss.srv->db, 5000);
    int rc = c ? tc_db_begin(c) : -EIO;
    if (rc == 0 && !tc_quota_add_usage_tx(c, tenant_id, cpu_ms, 0))
        rc = -EIO;
    if (c)
        rc = tc_db_finish(c, rc);
    tc_db_release(ss.srv->db, c);
    if (rc < 0)
        tc_log(TC_LOG_WARN, "a session's CPU use could not be recorded", "{s:s, s:I}", "tenant_id",
               tenant_id, "cpu_ms", (json_int_t)cpu_ms);
}

static void *keeper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ss.mu);
    while (!ss.quit || ss.ended || ss.list || ss.dropped) {
        /* ends the sandboxes caused */
        while (ss.ended) {
            struct session *s = ss.ended;
            ss.ended = s->next;
            s->next = NULL;
            bool rec = !s->end_recorded;
            s->end_recorded = true;
            pthread_mutex_unlock(&ss.mu);
            bool failed = rec && record_end(s, s->end_reason) < 0;
            if (s->cpu_left_ms > 0)
                add_usage(s->tenant_id, s->cpu_left_ms);
            pthread_mutex_lock(&ss.mu);
            if (failed)
                retry_end_locked(s, s->end_reason);
            session_unref_locked(s); /* the launcher's */
        }
        while (ss.dropped) { /* held calls of ended sessions (their records are closed) */
            struct call *c = ss.dropped;
            ss.dropped = c->drop_next;
            pthread_mutex_unlock(&ss.mu);
            call_free(c);
            pthread_mutex_lock(&ss.mu);
        }
        if (ss.quit && !ss.list)
            break;
        /* timers */
        int64_t now = tc_now_ms();
        if (ss.retry && now >= ss.retry_ms) { /* ends the database did not take, again */
            struct session *list = ss.retry;
            ss.retry = NULL;
            ss.retry_ms = now + RETRY_END_MS;
            pthread_mutex_unlock(&ss.mu);
            while (list) {
                struct session *s = list;
                list = s->retry_next;
                s->retry_next = NULL;
                bool failed = record_end(s, s->retry_reason) < 0;
                pthread_mutex_lock(&ss.mu);
                if (failed)
                    retry_end_locked(s, s->retry_reason);
                session_unref_locked(s);
                pthread_mutex_unlock(&ss.mu);
            }
            pthread_mutex_lock(&ss.mu);
            continue;
        }
        struct session *end = NULL, *intr = NULL, *unbudget = NULL;
        const char *why = NULL;
        char budget_of[37];
        for (struct session *s = ss.list; s && !end && !intr && !unbudget; s = s->next) {
            struct call *c = s->call;
            if (s->budget_of[0]) {
                unbudget = s;
                memcpy(budget_of, s->budget_of, sizeof(budget_of));
                s->budget_of[0] = '\0';
            } else if (c && !c->interrupted && now >= c->deadline_ms) {
                c->interrupted = c->timed_out = true;
                c->interrupt_ms = now;
                intr = s;
            } else if (c && c->interrupted && now >= c->interrupt_ms + KILL_GRACE_MS) {
                end = s, why = "call_unresponsive";
            } else if (!s->busy && now >= s->last_ms + s->idle_s * 1000) {
                end = s, why = "idle_timeout";
            } else if (now >= s->expires_ms) {
                end = s, why = "ttl_expired";
            }
        }
        if (unbudget) { /* the launcher ends it only if it is still that call's */
            unbudget->refs++;
            pthread_mutex_unlock(&ss.mu);
            if (tc_server_begin(ss.srv)) {
                (void)tc_launcher_budget(ss.srv->launcher, unbudget->id, 0, budget_of);
                tc_server_end(ss.srv);
            }
            pthread_mutex_lock(&ss.mu);
            session_unref_locked(unbudget);
            continue;
        }
        if (intr) { /* a send to the launcher: never under ss.mu */
            intr->refs++;
            pthread_mutex_unlock(&ss.mu);
            if (tc_server_begin(ss.srv)) {
                (void)tc_launcher_interrupt(ss.srv->launcher, intr->id);
                tc_server_end(ss.srv);
            }
            pthread_mutex_lock(&ss.mu);
            session_unref_locked(intr);
            continue;
        }
        if (end) {
            end->refs++;
            pthread_mutex_unlock(&ss.mu);
            end_session(end, why, true);
            pthread_mutex_lock(&ss.mu);
            session_unref_locked(end);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!ss.ended && !ss.dropped)
            pthread_cond_timedwait(&ss.cv, &ss.mu, &ts);
    }
    /* stopping with ends still unstored: the sweeper ends them once this instance is gone */
    while (ss.retry) {
        struct session *s = ss.retry;
        ss.retry = s->retry_next;
        tc_log(TC_LOG_ERROR, "a session's end is not stored (the sweeper will end it)",
               "{s:s, s:s}", "session_id", s->id, "reason", s->retry_reason);
        session_unref_locked(s);
    }
    pthread_mutex_unlock(&ss.mu);
    return NULL;
}

/* POST /v1/executions/{id}/cancel of a session's call (through the worker's NOTIFY, on every
 * process): the call is interrupted as a timeout would be (the session lives on unless the
 * call does not end within KILL_GRACE_MS), and ends as "cancelled". */
static int cancel_call(const char *exec_id)
{
    char sid[37] = "";
    pthread_mutex_lock(&ss.mu);
    for (struct session *s = ss.list; s; s = s->next) {
        if (s->starting && strcmp(s->starting->exec_id, exec_id) == 0) {
            s->starting->cancel_asked = true; /* call_launch does not send it */
            pthread_mutex_unlock(&ss.mu);
            return 0;
        }
        struct call *c = s->call;
        if (c && strcmp(c->exec_id, exec_id) == 0) {
            if (!c->interrupted) {
                c->interrupted = c->cancelled = true;
                c->interrupt_ms = tc_now_ms();
                memcpy(sid, s->id, sizeof(sid));
            }
            break;
        }
    }
    pthread_mutex_unlock(&ss.mu);
    if (!sid[0])
        return -ENOENT;
    (void)tc_launcher_interrupt(ss.srv->launcher, sid); /* outside the lock, as the keeper */
    return 0;
}

static void *held_main(void *arg);

int tc_api_sessions_start(struct tc_server *srv)
{
    ss.srv = srv;
    srv->cancel_session_call = cancel_call;
    ss.stop = ss.quit = false;
    if (pthread_create(&ss.keeper, NULL, keeper_main, NULL) != 0)
        return -EAGAIN;
    ss.started = true;
    if (pthread_create(&ss.held_thread, NULL, held_main, NULL) != 0)
        return -EAGAIN; /* the caller stops what started */
    ss.held_started = true;
    return 0;
}

void tc_api_sessions_stop(void)
{
    if (!ss.started)
        return;
    pthread_mutex_lock(&ss.mu);
    ss.stop = true; /* no session is opened from here on (create checks it under the lock) */
    pthread_mutex_unlock(&ss.mu);
    /* every open session ends now, recorded so; their sandboxes are killed */
    for (;;) {
        pthread_mutex_lock(&ss.mu);
        struct session *s = ss.list;
        if (s)
            s->refs++;
        pthread_mutex_unlock(&ss.mu);
        if (!s)
            break;
        end_session(s, "server_shutdown", true);
        session_unref(s);
    }
    /* their results (bounded: the launcher's stop kills what is left) */
    pthread_mutex_lock(&ss.mu);
    for (int i = 0; i < 100 && ss.launched > 0; i++) {
        pthread_mutex_unlock(&ss.mu);
        usleep(50 * 1000);
        pthread_mutex_lock(&ss.mu);
    }
    ss.quit = true;
    pthread_cond_signal(&ss.cv);
    pthread_cond_signal(&ss.held_cv);
    pthread_mutex_unlock(&ss.mu);
    if (ss.held_started) /* first: what it starts, the keeper may have to end */
        pthread_join(ss.held_thread, NULL);
    ss.held_started = false;
    pthread_join(ss.keeper, NULL);
    ss.started = false;
}

/* ---- HTTP ---- */

static json_t *session_json(PGresult *res, int row)
{
    json_t *limits = json_loads(PQgetvalue(res, row, 4), 0, NULL);
#define ISNULL_OR(col)                                                                             \
    (PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col)))
    json_t *v =
        json_pack("{s:s, s:s, s:s, s:o, s:I, s:I, s:s, s:s, s:s, s:I, s:o, s:o}", "id",
                  PQgetvalue(res, row, 0), "tool", PQgetvalue(res, row, 1), "status",
                  PQgetvalue(res, row, 2), "limits", limits ? limits : json_object(), "ttl_seconds",
                  (json_int_t)atoll(PQgetvalue(res, row, 5)), "idle_timeout_seconds",
                  (json_int_t)atoll(PQgetvalue(res, row, 6)), "created_at", PQgetvalue(res, row, 7),
                  "expires_at", PQgetvalue(res, row, 8), "last_used_at", PQgetvalue(res, row, 9),
                  "calls", (json_int_t)atoll(PQgetvalue(res, row, 10)), "ended_at", ISNULL_OR(11),
                  "ended_reason", ISNULL_OR(12));
#undef ISNULL_OR
    return v;
}

#define SESSION_COLS                                                                                \
    "id, tool, status, instance_id, limits::text, ttl_seconds, idle_timeout_seconds, " TC_SQL_ISO(  \
        "created_at") ", " TC_SQL_ISO("expires_at") ", " TC_SQL_ISO("last_used_at") ", "            \
                                                                                    "calls,"        \
                                                                                    " " TC_SQL_ISO( \
                                                                                        "ended_"    \
                                                                                        "at") ", "  \
                                                                                              "en"  \
                                                                                              "de"  \
                                                                                              "d_"  \
                                                                                              "re"  \
                                                                                              "as"  \
                                                                                              "on"

/* The tenant's session as stored: 0 and *ret, -ENOENT, -EIO. */
static int load_session(struct tc_server *srv, const char *tenant_id, const char *id, json_t **ret)
{
    const char *p[] = {id, tenant_id};
    /* A session of this process that has left the registry has ended here, and the keeper is
     * storing that: its row is waited for (bounded), not answered as running elsewhere. */
    for (int tries = 0;; tries++) {
        PGconn *c = tc_db_acquire(srv->db, TC_DB_WAIT_MS);
        if (!c)
            return -EIO;
        PGresult *res = tc_db_exec(
            c, "SELECT " SESSION_COLS " FROM sessions WHERE id::text = $1 AND tenant_id = $2", 2,
            p);
        tc_db_release(srv->db, c);
        if (!res)
            return -EIO;
        int rc = PQntuples(res) == 1 ? 0 : -ENOENT;
        bool ending_here = rc == 0 && strcmp(PQgetvalue(res, 0, 2), "active") == 0 &&
                           atoi(PQgetvalue(res, 0, 3)) == (int)srv->instance_id;
        if (ending_here) {
            struct session *s = lookup(tenant_id, id);
            ending_here = !s;
            if (s)
                session_unref(s);
        }
        if (ending_here && tries < 100) {
            PQclear(res);
            usleep(50 * 1000);
            continue;
        }
        if (rc == 0)
            *ret = session_json(res, 0);
        PQclear(res);
        return rc == 0 && !*ret ? -ENOMEM : rc;
    }
}

static enum MHD_Result elsewhere(struct tc_request *r)
{
    return tc_respond_problem(r, 409, "session-elsewhere", "Session on another server", NULL,
                              "this session runs on another server process; send its requests "
                              "there");
}

static enum MHD_Result not_found(struct tc_request *r)
{
    return tc_respond_problem(r, 404, "not-found", "Not found", NULL,
                              "no session with this id belongs to your tenant");
}

/* Strict: only known keys, of the right types. errors gets {path, message} entries. */
static void check_keys(json_t *body, const char *const *known, json_t *errors)
{
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        size_t i = 0;
        while (known[i] && strcmp(known[i], k) != 0)
            i++;
        if (!known[i])
            json_array_append_new(errors,
                                  json_pack("{s:s, s:s}", "path", k, "message", "unknown field"));
    }
}

static int64_t opt_int(json_t *body, const char *key, int64_t def, json_t *errors)
{
    json_t *v = json_object_get(body, key);
    if (!v)
        return def;
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        json_array_append_new(
            errors, json_pack("{s:s, s:s}", "path", key, "message", "must be a positive integer"));
        return def;
    }
    return json_integer_value(v);
}

static enum MHD_Result quota_refused(struct tc_request *r, const struct tc_quota_refusal *q)
{
    char retry[24];
    snprintf(retry, sizeof(retry), "%lld", (long long)q->retry_after_s);
    tc_metrics_quota_rejection(r->principal.tenant_id, q->limit);
    if (strcmp(q->limit, "max_sessions") == 0)
        return tc_respond_problem_header(
            r, 429, "quota-exceeded", "Quota exceeded", "Retry-After", retry,
            "tenant '%s' has %lld sessions open, its limit max_sessions (%s)",
            r->principal.tenant_name, (long long)q->running,
            q->own ? "set for the tenant" : "the server's default");
    return tc_respond_problem_header(r, 429, "quota-exceeded", "Quota exceeded", "Retry-After",
                                     retry, "%s: the tenant's limit is reached (%lld)", q->limit,
                                     (long long)q->value);
}

/* The sandbox spec of a session: the tool's, with its language's driver (embedded) as its
 * program. NULL: out of memory, or no driver. */
static json_t *session_spec(const struct tc_tool *tool, const char *id,
                            const int64_t limits[TC_LIMIT__COUNT], int64_t ttl_s, json_t *image)
{
    bool py = strcmp(tool->language, "python") == 0;
    const struct tc_embedded *e =
        tc_embedded_find(py ? "execution/session/driver.py" : "execution/session/driver.sh");
    if (!e)
        return NULL;
    const char *driver = (const char *)e->data;
    struct tc_tool t = *tool;
    t.plots = false; /* the driver saves figures itself */
    t.code_file = (char *)(py ? ".toolcage/session_driver.py" : ".toolcage/session_driver.sh");
    json_t *body = json_pack("{s:s, s:s}", "tool", tool->name, "code", driver);
    struct tc_exec_request req = {.tool = tool->name, .body = body, .driver = true};
    int64_t L[TC_LIMIT__COUNT];
    memcpy(L, limits, sizeof(L));
    L[TC_LIMIT_TIMEOUT_MS] = ttl_s * 1000; /* the sandbox's wall limit is the session's life */
    json_t *spec = body ? tc_exec_build_spec(&t, &req, L, id, image) : NULL;
    json_decref(body);
    if (spec) {
        json_object_set_new(spec, "session", json_true());
        json_object_set_new(json_array_get(json_object_get(spec, "files"), 0), "mode",
                            json_integer(0444));
    }
    return spec;
}

bool tc_api_session_allowed(const struct tc_tool *tool)
{
    json_t *reasons = NULL;
    bool held = tc_approval_needed(tool, false, &reasons);
    json_decref(reasons);
    return tool->session && !held &&
           !(json_object_size(json_object_get(tool->raw, "credentials")) &&
             tc_approval_may_hold(tool, NULL));
}

enum MHD_Result tc_api_session_create(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    return body ? tc_api_session_create_json(r, body) : ret;
}

enum MHD_Result tc_api_session_create_json(struct tc_request *r, json_t *body)
{
    enum MHD_Result ret;
    json_t *errors = json_array();
    check_keys(body,
               (const char *const[]){"tool", "ttl_seconds", "idle_timeout_seconds", "limits", NULL},
               errors);
    const char *name = json_string_value(json_object_get(body, "tool"));
    if (!name || json_string_length(json_object_get(body, "tool")) != strlen(name) || !*name ||
        strlen(name) > 64)
        json_array_append_new(
            errors, json_pack("{s:s, s:s}", "path", "tool", "message", "required: a tool name"));
    int64_t ttl = opt_int(body, "ttl_seconds", 0, errors);
    int64_t idle = opt_int(body, "idle_timeout_seconds", 0, errors);
    json_t *lim = json_object_get(body, "limits");
    if (lim && !json_is_object(lim))
        json_array_append_new(
            errors, json_pack("{s:s, s:s}", "path", "limits", "message", "must be an object"));
    if (json_array_size(errors)) {
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(errors);
    errors = NULL;
    if (r->srv->draining) {
        json_decref(body);
        return tc_respond_problem(r, 503, "draining", "Service unavailable", NULL,
                                  "this server is shutting down; open the session elsewhere");
    }
    struct tc_policy *policy = tc_server_policy(r->srv);
    const struct tc_tool *tool = tc_policy_tool(policy, name);
    struct session *s = NULL;
    json_t *reasons = NULL, *spec = NULL;
    if (!tool) {
        ret = tc_respond_problem(r, 404, "unknown-tool", "Unknown tool", NULL,
                                 "no tool named '%s' is declared in the policy", name);
        goto out;
    }
    if (tc_approval_needed(tool, false, &reasons) && !tool->session_hold) {
        ret = tc_respond_problem(r, 422, "session-not-allowed", "Sessions not allowed", NULL,
                                 "calls of tool '%s' are held for a person's approval, and its "
                                 "policy refuses held calls in a session (session.held_calls); "
                                 "use POST /v1/execute",
                                 tool->name);
        goto out;
    }
    if (!tool->session) {
        ret = tc_respond_problem(r, 422, "session-not-allowed", "Sessions not allowed", NULL,
                                 "the policy of tool '%s' does not allow sessions "
                                 "(session.enabled)",
                                 tool->name);
        goto out;
    }
    if (json_object_size(json_object_get(tool->raw, "credentials")) &&
        tc_approval_may_hold(tool, NULL)) {
        ret = tc_respond_problem(r, 422, "session-not-allowed", "Sessions not allowed", NULL,
                                 "tool '%s' leases credentials and its calls may be held for "
                                 "approval: its credentials exist only in approved calls",
                                 tool->name);
        goto out;
    }
    if (ttl == 0)
        ttl = tool->session_ttl_max_s < DEFAULT_TTL_S ? tool->session_ttl_max_s : DEFAULT_TTL_S;
    if (idle == 0)
        idle =
            tool->session_idle_max_s < DEFAULT_IDLE_S ? tool->session_idle_max_s : DEFAULT_IDLE_S;
    if (ttl > tool->session_ttl_max_s || idle > tool->session_idle_max_s) {
        ret = tc_respond_problem(r, 422, "limit-exceeds-policy", "Limit exceeds policy", NULL,
                                 "tool '%s' allows sessions of at most %lld s, idle at most %lld s",
                                 tool->name, (long long)tool->session_ttl_max_s,
                                 (long long)tool->session_idle_max_s);
        goto out;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        ret = MHD_NO;
        goto out;
    }
    s->refs = 1; /* this handler's */
    tc_buf_init(&s->stray[0], STRAY_MAX);
    tc_buf_init(&s->stray[1], STRAY_MAX);
    struct tc_exec_request lreq = {.tool = tool->name, .body = body};
    if (tc_exec_limits(tool, &lreq, s->limits, &errors) < 0) {
        ret = tc_respond_problem(r, 422, "limit-exceeds-policy", "Limit exceeds policy", errors,
                                 "a requested limit is above what the policy allows");
        errors = NULL;
        goto out;
    }
    tc_uuid7(s->id);
    snprintf(s->tenant_id, sizeof(s->tenant_id), "%s", r->principal.tenant_id);
    snprintf(s->tool, sizeof(s->tool), "%s", tool->name);
    s->principal = r->principal;
    s->policy = tc_policy_ref(policy);
    s->t = tool;
    tc_approval_tool_digest(tool, s->tool_policy);
    s->plots = tool->plots;
    s->ttl_s = ttl;
    s->idle_s = idle;
    json_t *image = NULL;
    if (tc_exec_image(tool, r->srv->cfg->state_dir, &image) < 0) {
        ret = tc_respond_problem(r, 503, "image-unavailable", "Tool image unavailable", NULL,
                                 "the tool's image %s is not in this server's image store "
                                 "(toolcage images import)",
                                 tool->image);
        goto out;
    }
    spec = tc_exec_redactor(tool, r->srv->cfg->state_dir, &s->redactor) < 0
               ? NULL
               : session_spec(tool, s->id, s->limits, ttl, image);
    json_decref(image);
    if (!spec) {
        ret = MHD_NO;
        goto out;
    }
    if (!r->srv->instance_locked) {
        ret = tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                 "this server is reconnecting to its database");
        goto out;
    }
    int rr = -ESHUTDOWN;
    if (tc_server_begin(r->srv)) {
        rr = tc_launcher_reserve(r->srv->launcher);
        tc_server_end(r->srv);
    }
    if (rr == -EAGAIN) {
        ret = tc_respond_problem(r, 503, "overloaded", "Too many sandboxes", NULL,
                                 "every sandbox slot is busy; retry later");
        goto out;
    }
    if (rr < 0) {
        ret = tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                 "the sandbox launcher is not available");
        goto out;
    }
    /* Recorded before it starts: the row, its audit record, the tenant's session quota. */
    struct tc_quota_refusal q = {0};
    const struct tc_quota_defaults qd = tc_quota_defaults_of(r->srv->cfg);
    json_t *lj = tc_exec_limits_json(s->limits);
    char *lt = json_dumps(lj, JSON_COMPACT);
    json_decref(lj);
    char inst[16], ttls[24], idles[24];
    snprintf(inst, sizeof(inst), "%d", (int)r->srv->instance_id);
    snprintf(ttls, sizeof(ttls), "%lld", (long long)ttl);
    snprintf(idles, sizeof(idles), "%lld", (long long)idle);
    PGconn *c = lt ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    int rc = c ? tc_db_begin(c) : -EIO;
    if (rc == 0)
        rc = tc_quota_admit_session_tx(c, s->tenant_id, &qd, &q);
    PGresult *res = NULL;
    if (rc == 0) {
        const char *p[] = {s->id, s->tenant_id, r->principal.key_id, s->tool, inst, lt,
                           ttls,  idles};
        res = tc_db_exec(c,
                         "INSERT INTO sessions (id, tenant_id, api_key_id, tool, status,"
                         " instance_id, limits, ttl_seconds, idle_timeout_seconds, expires_at)"
                         " VALUES ($1, $2, $3, $4, 'active', $5::int, $6::jsonb, $7::int, $8::int,"
                         " now() + make_interval(secs => $7::int)) RETURNING " SESSION_COLS,
                         8, p);
        rc = res && PQntuples(res) == 1 ? 0 : -EIO;
    }
    if (rc == 0) {
        json_t *ev = json_pack(
            "{s:s, s:s, s:o, s:s, s:s, s:s, s:o, s:I, s:I}", "action", "session.create",
            "tenant_id", s->tenant_id, "actor", tc_auth_actor(&r->principal), "tool", s->tool,
            "session_id", s->id, "request_id", r->request_id, "limits", json_loads(lt, 0, NULL),
            "ttl_seconds", (json_int_t)ttl, "idle_timeout_seconds", (json_int_t)idle);
        rc = ev && tc_audit_append_tx(c, r->srv->keys, ev, NULL) == 0 ? 0 : -EIO;
        json_decref(ev);
    }
    if (c)
        rc = tc_db_finish(c, rc);
    free(lt);
    if (rc < 0) {
        tc_db_release(r->srv->db, c);
        PQclear(res);
        if (tc_server_begin(r->srv)) {
            tc_launcher_unreserve(r->srv->launcher);
            tc_server_end(r->srv);
        }
        ret = rc == -EDQUOT ? quota_refused(r, &q)
                            : tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                                 "the session could not be recorded");
        goto out;
    }
    json_t *view = session_json(res, 0);
    PQclear(res);
    /* Credentials for the session's life, revoked when it ends. */
    char *why = NULL;
    int lrc =
        tc_broker_lease(c, r->srv->keys, s->tenant_id, tool, s->id, ttl * 1000, &s->grant, &why);
    if (lrc == 0 && tc_grant_apply_spec(s->grant, spec) < 0)
        lrc = -ENOMEM;
    tc_db_release(r->srv->db, c);
    if (lrc < 0) {
        if (tc_server_begin(r->srv)) {
            tc_launcher_unreserve(r->srv->launcher);
            tc_server_end(r->srv);
        }
        record_end(s, "error");
        json_decref(view);
        ret = lrc == -EIO || lrc == -ENOMEM
                  ? tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                       "the credentials of this tool could not be leased")
                  : tc_respond_problem(r, 422, "credential-unavailable", "Credential unavailable",
                                       NULL, "%s", why ? why : "a credential is unavailable");
        free(why);
        goto out;
    }
    /* Into the registry, then the sandbox (its callbacks may run before submit returns). */
    int64_t now = tc_now_ms();
    s->expires_ms = now + ttl * 1000;
    s->last_ms = now;
    pthread_mutex_lock(&ss.mu);
    bool stopping = ss.stop || !ss.started;
    if (!stopping) {
        s->refs += 2; /* the registry's, the launcher's */
        s->in_registry = true;
        s->launched = true;
        ss.launched++;
        s->next = ss.list;
        ss.list = s;
    }
    pthread_mutex_unlock(&ss.mu);
    if (stopping) {
        if (tc_server_begin(r->srv)) {
            tc_launcher_unreserve(r->srv->launcher);
            tc_server_end(r->srv);
        }
        record_end(s, "server_shutdown");
        json_decref(view);
        ret = tc_respond_problem(r, 503, "draining", "Service unavailable", NULL,
                                 "this server is shutting down; open the session elsewhere");
        goto out;
    }
    struct tc_launcher_job job = {
        .done = on_sandbox_done, .chunk = on_chunk, .userdata = s, .reserved = true};
    int src = -ESHUTDOWN;
    if (tc_server_begin(r->srv)) {
        src = tc_launcher_submit_job(r->srv->launcher, spec, &job);
        tc_server_end(r->srv);
    }
    if (src < 0) {
        pthread_mutex_lock(&ss.mu);
        s->launched = false;
        ss.launched--;
        session_unref_locked(s); /* the launcher's: it never took it */
        pthread_mutex_unlock(&ss.mu);
        end_session(s, "error", true);
        json_decref(view);
        ret = tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                 "the sandbox launcher is not available");
        goto out;
    }
    tc_log(TC_LOG_INFO, "session opened", "{s:s, s:s, s:s}", "request_id", r->request_id,
           "session_id", s->id, "tool", s->tool);
    char location[64];
    snprintf(location, sizeof(location), "/v1/sessions/%s", s->id);
    ret = tc_respond_json_ex(r, 201, view, "application/json", "Location", location);
out:
    if (s)
        session_unref(s);
    json_decref(spec);
    json_decref(errors);
    json_decref(reasons);
    json_decref(body);
    tc_policy_unref(policy);
    return ret;
}

enum MHD_Result tc_api_session_get(struct tc_request *r)
{
    json_t *v = NULL;
    int rc = tc_uuid_valid(r->params[0])
                 ? load_session(r->srv, r->principal.tenant_id, r->params[0], &v)
                 : -ENOENT;
    if (rc == -ENOENT)
        return not_found(r);
    if (rc < 0)
        return tc_respond_db_down(r);
    return tc_respond_json(r, 200, v);
}

enum MHD_Result tc_api_sessions_list(struct tc_request *r)
{
    const char *status = tc_request_query(r, "status");
    if (status && strcmp(status, "active") != 0 && strcmp(status, "ended") != 0)
        return tc_respond_problem(
            r, 400, "validation", "Invalid request",
            json_pack("[{s:s, s:s}]", "path", "status", "message", "\"active\" or \"ended\""),
            "status must be \"active\" or \"ended\"");
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    const char *p[] = {r->principal.tenant_id, status};
    PGresult *res = tc_db_exec(c,
                               "SELECT " SESSION_COLS " FROM sessions WHERE tenant_id = $1"
                               " AND ($2::text IS NULL OR status = $2)"
                               " ORDER BY created_at DESC, id DESC LIMIT " TC_STRINGIFY(LIST_MAX),
                               2, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return tc_respond_db_down(r);
    json_t *items = json_array();
    for (int i = 0; i < PQntuples(res); i++)
        json_array_append_new(items, session_json(res, i));
    PQclear(res);
    return tc_respond_json(r, 200, json_pack("{s:o}", "items", items));
}

enum MHD_Result tc_api_session_delete(struct tc_request *r)
{
    if (!tc_uuid_valid(r->params[0]))
        return not_found(r);
    struct session *s = lookup(r->principal.tenant_id, r->params[0]);
    if (s) {
        int erc = end_session(s, "deleted", true);
        session_unref(s);
        if (erc < 0)
            return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                      "the session has ended (its processes are killed), but the "
                                      "database did not take its end yet: it is retried");
    }
    json_t *v = NULL;
    int rc = load_session(r->srv, r->principal.tenant_id, r->params[0], &v);
    if (rc == -ENOENT)
        return not_found(r);
    if (rc < 0)
        return tc_respond_db_down(r);
    if (!s && strcmp(json_string_value(json_object_get(v, "status")), "active") == 0) {
        json_decref(v);
        return elsewhere(r);
    }
    return tc_respond_json(r, 200, v);
}

bool tc_api_session_end_here(const char *tenant_id, const char *id)
{
    struct session *s = tc_uuid_valid(id) ? lookup(tenant_id, id) : NULL;
    if (!s)
        return false;
    end_session(s, "deleted", true);
    session_unref(s);
    return true;
}

/* ---- a call ---- */

static int file_op(struct session *s, json_t *op, const void *data, size_t len, json_t **ret_head,
                   char **ret_data, size_t *ret_len);
static enum MHD_Result file_problem(struct tc_request *r, int rc, const char *path);

static enum MHD_Result call_answer(struct tc_request *r)
{
    struct call *c = r->state;
    if ((c->record_rc == 0 || c->record_rc == -ESTALE) && c->view) {
        tc_log(TC_LOG_INFO, "session call finished", "{s:s, s:s, s:s, s:O}", "request_id",
               r->request_id, "execution_id", c->exec_id, "session_id", c->s->id, "status",
               json_object_get(c->view, "status"));
        return tc_respond_json(r, 200, json_incref(c->view));
    }
    return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                              "the call's outcome is not stored yet (it is kept and will be); "
                              "read it with GET /v1/executions/%s",
                              c->exec_id);
}

/* Why a call cannot run in session id now (not open here): a problem answer. */
static enum MHD_Result not_open(struct tc_request *r, const char *id)
{
    json_t *v = NULL;
    int rc = tc_uuid_valid(id) ? load_session(r->srv, r->principal.tenant_id, id, &v) : -ENOENT;
    if (rc == -ENOENT)
        return not_found(r);
    if (rc < 0)
        return tc_respond_db_down(r);
    const char *st = json_string_value(json_object_get(v, "status"));
    enum MHD_Result ret;
    if (st && strcmp(st, "ended") == 0)
        ret = tc_respond_problem(r, 409, "session-ended", "Session ended", NULL,
                                 "the session has ended (%s)",
                                 json_string_value(json_object_get(v, "ended_reason")));
    else
        ret = elsewhere(r);
    json_decref(v);
    return ret;
}

/* ---- a call's way to the driver (a request's, or a held one's once approved) ---- */

/* The "execute" audit record of call c (asked by r), decided so (api/api.h). */
static json_t *call_event(struct tc_request *r, struct call *c, json_t *body, const char *decision)
{
    struct session *s = c->s;
    struct tc_api_call_ids ids = {.principal = &r->principal,
                                  .request_id = r->request_id,
                                  .tool = s->tool,
                                  .exec_id = c->exec_id,
                                  .limits = c->limits,
                                  .findings = c->findings,
                                  .session_id = s->id,
                                  .tool_policy = s->tool_policy};
    return tc_api_execute_event(&ids, s->redactor, body, decision);
}

/* The request as its execution row keeps it: {tool, code, session_id, stdin?, files?}. */
static char *call_request_text(struct session *s, json_t *body)
{
    json_t *rq = json_pack("{s:s, s:O, s:s}", "tool", s->tool, "code",
                           json_object_get(body, "code"), "session_id", s->id);
    if (rq && json_object_get(body, "stdin"))
        json_object_set(rq, "stdin", json_object_get(body, "stdin"));
    if (rq && json_object_get(body, "files"))
        json_object_set(rq, "files", json_object_get(body, "files"));
    char *text = rq ? json_dumps(rq, JSON_COMPACT) : NULL;
    json_decref(rq);
    return text;
}

/* The session for c (one call at a time), or false with the answer in *ret (c freed). */
static bool take_session(struct tc_request *r, struct call *c, enum MHD_Result *ret)
{
    struct session *s = c->s;
    char held[37] = "";
    pthread_mutex_lock(&ss.mu);
    bool busy = s->busy, gone = !s->in_registry;
    if (!busy && !gone)
        s->busy = true;
    if (busy && s->held)
        memcpy(held, s->held->exec_id, sizeof(held));
    pthread_mutex_unlock(&ss.mu);
    if (!busy && !gone)
        return true;
    call_free(c);
    if (gone)
        *ret = not_open(r, r->params[0]);
    else if (held[0])
        *ret = tc_respond_problem(r, 409, "session-busy", "Session busy", NULL,
                                  "a call of this session is held for a person's approval "
                                  "(execution %s); it runs, or is withdrawn, before the next",
                                  held);
    else
        *ret = tc_respond_problem(r, 409, "session-busy", "Session busy", NULL,
                                  "a call is running in this session; wait for its answer");
    return false;
}

/* The session is free again (a call that never reached the driver). */
static void give_back(struct session *s)
{
    pthread_mutex_lock(&ss.mu);
    s->busy = false;
    s->last_ms = tc_now_ms();
    pthread_mutex_unlock(&ss.mu);
}

/* A call's "files" into the workspace (*ret_path: the one that failed). */
static int put_files(struct session *s, json_t *files, const char **ret_path)
{
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        unsigned char *bytes = NULL;
        size_t len = 0;
        json_t *head = NULL;
        int rc = tc_exec_file_bytes(f, &bytes, &len);
        if (rc == 0)
            rc = file_op(s, json_pack("{s:s, s:s}", "op", "put", "path", path), bytes, len, &head,
                         NULL, NULL);
        free(bytes);
        json_decref(head);
        if (rc < 0) {
            *ret_path = path;
            return rc;
        }
    }
    return 0;
}

/* Arm c as its session's call and send it (frame, built with frc) to the driver; from here
 * the call is its own: it ends with its marker, its session's end, or its time. */
static void call_launch(struct call *c, struct tc_buf *frame, int frc)
{
    struct session *s = c->s;
    struct call *done = NULL;
    pthread_mutex_lock(&ss.mu);
    s->refs++; /* this function's, to its end: the call (and its reference) may end first */
    if (s->starting == c)
        s->starting = NULL;
    bool armed = s->in_registry && !c->cancel_asked;
    if (c->cancel_asked && s->in_registry) { /* cancelled before it was sent: it never runs */
        s->busy = false;
        s->last_ms = tc_now_ms();
    }
    c->t0_ms = tc_now_ms();
    c->deadline_ms = c->t0_ms + c->limits[TC_LIMIT_TIMEOUT_MS];
    if (armed) {
        s->call = c;
        c->viol_base = json_incref(s->viol);         /* replaced, never changed, by news */
        memcpy(c->net, s->net_stray, s->nnet_stray); /* told between calls: this one's */
        c->nnet = s->nnet_stray;
        s->nnet_stray = 0;
        for (int k = 0; k < 2; k++) {
            struct tc_buf stray = s->stray[k];
            tc_buf_init(&s->stray[k], STRAY_MAX);
            if (stray.len)
                (void)feed_locked(s, k, stray.data, stray.len, &done);
            tc_buf_free(&stray);
        }
    }
    pthread_mutex_unlock(&ss.mu);
    if (!armed) { /* it (or its session) ended meanwhile: recorded as such */
        tc_buf_free(frame);
        call_finish(c);
        session_unref(s);
        return;
    }
    int irc = frc < 0 ? -ENOMEM : -ESHUTDOWN;
    if (frc == 0 && tc_server_begin(ss.srv)) {
        irc = tc_launcher_budget(ss.srv->launcher, s->id, c->limits[TC_LIMIT_CPU_MS], c->exec_id);
        if (irc == 0)
            irc = tc_launcher_input(ss.srv->launcher, s->id, frame->data, frame->len);
        tc_server_end(ss.srv);
    }
    tc_buf_free(frame);
    if (done) /* cannot be: the driver has not seen the nonce */
        call_finish(done);
    if (irc < 0) /* the session cannot take it: it ends, and the call with it */
        end_session(s, "error", true);
    session_unref(s);
}

/* The frame of a call: a fresh nonce, the scanners on it (execution/session.h). */
static int call_frame(struct call *c, struct tc_buf *frame, json_t *code, json_t *in)
{
    tc_session_nonce(c->nonce);
    tc_session_scan_free(&c->scan[0]);
    tc_session_scan_free(&c->scan[1]);
    tc_session_scan_init(&c->scan[0], c->nonce);
    tc_session_scan_init(&c->scan[1], c->nonce);
    tc_buf_init(frame, 3u << 20);
    return tc_session_frame(frame, c->nonce, json_string_value(code), json_string_length(code),
                            in ? json_string_value(in) : NULL, in ? json_string_length(in) : 0,
                            c->s->plots ? "plots" : "-");
}

/* ---- held calls (session.held_calls "hold") ----
 * A call the gate holds is recorded as a one-shot held call is (pending_approval, its approval
 * with the exact payload, which names the session), and the session waits for it: busy, its
 * idle clock stopped, its TTL running. The keeper looks at held calls every HELD_POLL_MS (the
 * decision may come from any replica): approved (queued), the call is claimed here and its
 * approved payload, nothing else, runs in the session; denied, expired or withdrawn, the
 * session is free again. The session's end withdraws it (record_end). */

static enum MHD_Result hold_call(struct tc_request *r, struct call *c, json_t *body,
                                 json_t *reasons, bool events, bool cancel_gone)
{
    struct session *s = c->s;
    enum MHD_Result ret;
    if (!take_session(r, c, &ret)) {
        json_decref(reasons);
        json_decref(body);
        return ret;
    }
    tc_uuid7(c->exec_id);
    tc_iso8601(tc_wall_ms(), c->created_at);
    struct tc_exec_request req = {.tool = s->tool, .body = body};
    json_t *payload = tc_approval_payload(s->t, &req, c->limits);
    if (payload)
        json_object_set_new(payload, "session_id", json_string(s->id));
    json_t *approval = tc_approval_new(s->t, payload, reasons);
    json_t *ev = call_event(r, c, body, "held");
    if (ev && approval) {
        json_object_set(ev, "approval_id", json_object_get(approval, "id"));
        json_object_set(ev, "reasons", reasons);
    }
    char *rq_text = call_request_text(s, body);
    json_t *lj = tc_exec_limits_json(c->limits);
    char *lt = lj ? json_dumps(lj, JSON_COMPACT) : NULL;
    json_decref(lj);
    char expires[32] = "";
    PGconn *db =
        (approval && ev && rq_text && lt) ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    int rc = db ? tc_db_begin(db) : -EIO;
    if (rc == 0) {
        const char *p[] = {c->exec_id, s->tenant_id, r->principal.key_id,
                           s->tool,    rq_text,      r->request_id,
                           lt,         s->id};
        /* the session still open, in the database too: its end withdraws what it holds */
        PGresult *res = tc_db_exec(
            db,
            "WITH e AS (INSERT INTO executions (id, tenant_id, api_key_id, tool, status, request,"
            " request_id, created_at, limits, session_id)"
            " VALUES ($1, $2, $3, $4, 'pending_approval', $5::jsonb, $6, now(), $7::jsonb, $8)"
            " RETURNING 1)"
            " UPDATE sessions SET calls = calls + 1, last_used_at = now()"
            " WHERE id = $8 AND status = 'active' AND EXISTS (SELECT 1 FROM e) RETURNING 1",
            8, p);
        rc = res && PQntuples(res) == 1 ? 0 : -EIO;
        PQclear(res);
    }
    if (rc == 0)
        rc = tc_approval_insert_tx(db, approval, s->tenant_id, c->exec_id, s->tool,
                                   r->principal.key_id, c->findings, r->srv->public_url, expires);
    if (rc == 0)
        rc = tc_audit_append_tx(db, r->srv->keys, ev, NULL) == 0 ? 0 : -EIO;
    if (db)
        rc = tc_db_finish(db, rc);
    tc_db_release(r->srv->db, db);
    free(rq_text);
    free(lt);
    json_decref(ev);
    char approval_id[37] = "";
    if (approval)
        snprintf(approval_id, sizeof(approval_id), "%s",
                 json_string_value(json_object_get(approval, "id")));
    json_decref(approval);
    if (rc < 0) {
        give_back(s);
        call_free(c);
        json_decref(reasons);
        json_decref(body);
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the call could not be recorded, so it was not held");
    }
    json_t *answer = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O, s:o, s:s, s:s}", "id", c->exec_id,
                               "tool", s->tool, "status", "pending_approval", "approval_id",
                               approval_id, "expires_at", expires, "reasons", reasons, "findings",
                               c->findings ? json_incref(c->findings) : json_array(), "created_at",
                               c->created_at, "session_id", s->id);
    json_decref(reasons);
    json_decref(body);
    tc_log(TC_LOG_INFO, "session call held for approval", "{s:s, s:s, s:s, s:s}", "request_id",
           r->request_id, "execution_id", c->exec_id, "session_id", s->id, "approval_id",
           approval_id);
    char exec_id[37];
    memcpy(exec_id, c->exec_id, sizeof(exec_id));
    /* The session waits for it (or, ended meanwhile, its end withdrew it). */
    pthread_mutex_lock(&ss.mu);
    if (s->in_registry) {
        s->held = c;
        c = NULL;
        pthread_cond_signal(&ss.held_cv); /* looked at soon: a decision may already be there */
    }
    pthread_mutex_unlock(&ss.mu);
    call_free(c);
    ret = tc_api_held_answer(r, exec_id, answer, events, cancel_gone);
    if (cancel_gone && events)
        tc_api_cancel_when_gone(r, exec_id); /* the request for approval is withdrawn */
    return ret;
}

/* Claim the approved call c of its session (queued -> running here, not started) and check
 * what was approved, in one transaction: *ret_payload is it; *ret_why, when it must not run (it
 * then ends as an error, never started). -EAGAIN: not now (not queued, the tenant at its
 * concurrency quota, the database away): the next look decides. */
static int held_claim(struct call *c, json_t **ret_payload, const char **ret_why)
{
    struct session *s = c->s;
    struct tc_server *srv = ss.srv;
    *ret_payload = NULL;
    *ret_why = NULL;
    if (!srv->instance_locked)
        return -EAGAIN;
    char me[16];
    snprintf(me, sizeof(me), "%d", (int)srv->instance_id);
    const char *p[] = {c->exec_id, me, s->id};
    PGconn *db = tc_db_acquire(srv->db, TC_DB_WAIT_MS);
    int rc = db ? tc_db_begin(db) : -EIO;
    struct tc_quota q;
    if (rc == 0)
        rc = tc_quota_admit_tx(db, s->tenant_id, srv->cfg->tenant_max_concurrent, &q);
    PGresult *res = NULL;
    if (rc == 0) {
        res = tc_db_exec(db,
                         "UPDATE executions SET status = 'running', claimed_by = $2::int,"
                         " started_at = now(), attempts = attempts + 1"
                         " WHERE id = $1 AND status = 'queued' AND session_id = $3 RETURNING 1",
                         3, p);
        rc = !res ? -EIO : PQntuples(res) == 1 ? 0 : -EAGAIN;
        PQclear(res);
    }
    json_t *payload = NULL;
    if (rc == 0) {
        res = tc_db_exec(db,
                         "SELECT payload::text, payload_hash FROM approvals"
                         " WHERE execution_id = $1 AND status = 'approved'",
                         1, p);
        if (!res)
            rc = -EIO;
        else if (PQntuples(res) != 1)
            *ret_why = "no approved approval for this execution";
        else {
            payload = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
            unsigned char want[32], got[32];
            bool ok = payload && tc_db_bytea_parse(PQgetvalue(res, 0, 1), want, sizeof(want));
            if (ok) {
                tc_approval_payload_hash(payload, got);
                ok = sodium_memcmp(want, got, 32) == 0;
            }
            /* the tool as the session runs it, and as the policy (the reviewer's) says now */
            const char *mine = s->tool_policy; /* the session's definition */
            char now[65] = "";
            struct tc_policy *policy = tc_server_policy(srv);
            const struct tc_tool *cur = tc_policy_tool(policy, s->tool);
            if (cur)
                tc_approval_tool_digest(cur, now);
            tc_policy_unref(policy);
            json_t *creds = json_object_get(s->t->raw, "credentials");
            json_t *now_creds = creds ? json_incref(creds) : json_array();
            const char *sid = json_string_value(json_object_get(payload, "session_id"));
            const char *tool = json_string_value(json_object_get(payload, "tool"));
            const char *tp = json_string_value(json_object_get(payload, "tool_policy"));
            if (!ok)
                *ret_why = "the stored payload does not match the approved hash";
            else if (!sid || strcmp(sid, s->id) != 0 || !tool || strcmp(tool, s->tool) != 0)
                *ret_why = "the approved payload is not this session's";
            else if (!tp || strcmp(tp, mine) != 0 || strcmp(tp, now) != 0 ||
                     !json_equal(now_creds, json_object_get(payload, "credentials")))
                *ret_why = "the tool's policy changed since approval";
            else if (!json_is_string(json_object_get(payload, "code")))
                *ret_why = "the approved payload no longer validates";
            json_decref(now_creds);
        }
        PQclear(res);
    }
    if (db)
        rc = tc_db_finish(db, rc);
    tc_db_release(srv->db, db);
    if (rc < 0) {
        json_decref(payload);
        return rc == -EDQUOT || rc == -EIO ? -EAGAIN : rc;
    }
    *ret_payload = payload;
    return 0;
}

/* Its start, audited, before the driver sees it (migrations/0008: it starts once). */
static int held_record_start(struct call *c)
{
    struct session *s = c->s;
    struct tc_server *srv = ss.srv;
    const char *p[] = {c->exec_id};
    PGconn *db = tc_db_acquire(srv->db, TC_DB_WAIT_MS);
    int rc = db ? tc_db_begin(db) : -EIO;
    PGresult *res =
        rc == 0
            ? tc_db_exec(db, "UPDATE executions SET code_started_at = now() WHERE id = $1", 1, p)
            : NULL;
    if (rc == 0 && !res)
        rc = -EIO;
    PQclear(res);
    json_t *start =
        json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:i, s:s, s:b}", "action", "execution.start",
                  "tenant_id", s->tenant_id, "actor", tc_auth_actor(&c->principal), "tool", s->tool,
                  "execution_id", c->exec_id, "request_id", c->request_id, "instance",
                  (int)srv->instance_id, "session_id", s->id, "approved", 1);
    if (rc == 0 && (!start || tc_audit_append_tx(db, srv->keys, start, NULL) < 0))
        rc = -EIO;
    json_decref(start);
    if (db)
        rc = tc_db_finish(db, rc);
    tc_db_release(srv->db, db);
    return rc;
}

/* c (claimed, or found claimed) ends without running: recorded with why; the session free. */
static void held_refuse(struct call *c, const char *why)
{
    struct session *s = c->s;
    tc_log(TC_LOG_WARN, "approved session call not run", "{s:s, s:s, s:s}", "execution_id",
           c->exec_id, "session_id", s->id, "reason", why);
    pthread_mutex_lock(&ss.mu);
    if (s->starting == c)
        s->starting = NULL;
    s->busy = false;
    s->last_ms = tc_now_ms();
    pthread_mutex_unlock(&ss.mu);
    c->refused = why;
    c->t0_ms = tc_now_ms();
    call_finish(c);
}

/* The held call exec_id of s was approved: run it, as approved. */
static void held_start(struct session *s, const char *exec_id)
{
    pthread_mutex_lock(&ss.mu);
    struct call *c = s->held && strcmp(s->held->exec_id, exec_id) == 0 ? s->held : NULL;
    if (c) { /* the held thread's while it starts; the session stays busy */
        s->held = NULL;
        s->starting = c;
    }
    pthread_mutex_unlock(&ss.mu);
    if (!c)
        return;
    json_t *payload = NULL;
    const char *why = NULL;
    if (held_claim(c, &payload, &why) < 0) { /* held as it was, looked at again */
        pthread_mutex_lock(&ss.mu);
        s->starting = NULL;
        if (s->in_registry && !s->held) {
            s->held = c;
            c = NULL;
        }
        pthread_mutex_unlock(&ss.mu);
        call_free(c); /* the session ended meanwhile: its end withdraws the call */
        return;
    }
    json_t *lim = json_object_get(payload, "limits");
    for (int i = 0; !why && i < TC_LIMIT__COUNT; i++) {
        json_t *v = json_object_get(lim, tc_limit_names[i]);
        if (json_is_integer(v))
            c->limits[i] = json_integer_value(v);
    }
    /* its files first: a call whose files cannot be written never starts */
    const char *bad_path = NULL;
    if (!why && put_files(s, json_object_get(payload, "files"), &bad_path) < 0)
        why = "a file of the approved call could not be written to the workspace";
    if (!why && held_record_start(c) < 0)
        why = "the call's start could not be recorded, so it was not run";
    if (why) {
        held_refuse(c, why);
        json_decref(payload);
        return;
    }
    /* its events, shared with readers wherever they are (as the worker's runs) */
    size_t nsec = 0;
    const char *const *sec = tc_grant_values(s->grant, &nsec);
    if (tc_exec_stream_new(c->exec_id, s->redactor, sec, nsec, c->limits[TC_LIMIT_OUTPUT_BYTES],
                           false, &c->stream) < 0)
        c->stream = NULL;
    json_t *in = json_object_get(payload, "stdin");
    struct tc_buf frame;
    int frc =
        call_frame(c, &frame, json_object_get(payload, "code"), json_is_string(in) ? in : NULL);
    tc_log(TC_LOG_INFO, "approved session call runs", "{s:s, s:s}", "execution_id", c->exec_id,
           "session_id", s->id);
    call_launch(c, &frame, frc);
    json_decref(payload);
}

/* The held call exec_id of s ended without running (denied, expired, withdrawn), or is running
 * though it never left here (a claim whose commit was not confirmed): either way, not held. */
static void held_release(struct session *s, const char *exec_id, const char *status)
{
    bool running = strcmp(status, "running") == 0;
    pthread_mutex_lock(&ss.mu);
    struct call *c = s->held && strcmp(s->held->exec_id, exec_id) == 0 ? s->held : NULL;
    if (c) {
        s->held = NULL;
        if (!running) {
            s->busy = false;
            s->last_ms = tc_now_ms();
        }
    }
    pthread_mutex_unlock(&ss.mu);
    if (c && running) {
        held_refuse(c, "the call's claim was not confirmed by the database; it did not run");
        return;
    }
    if (c)
        tc_log(TC_LOG_INFO, "held session call ended without running", "{s:s, s:s, s:s}",
               "execution_id", exec_id, "session_id", s->id, "status", status);
    call_free(c);
}

/* One look at the held calls of this process's sessions: their statuses in one query. */
static void held_poll(void)
{
    pthread_mutex_lock(&ss.mu);
    size_t n = 0, cap = 0;
    for (struct session *s = ss.list; s; s = s->next)
        cap += s->held != NULL;
    struct session **list = cap ? calloc(cap, sizeof(*list)) : NULL;
    char(*ids)[37] = cap ? calloc(cap, sizeof(*ids)) : NULL;
    for (struct session *s = ss.list; s && list && ids && n < cap; s = s->next)
        if (s->held) {
            s->refs++;
            list[n] = s;
            memcpy(ids[n], s->held->exec_id, sizeof(ids[n]));
            n++;
        }
    pthread_mutex_unlock(&ss.mu);
    struct tc_buf arr;
    tc_buf_init(&arr, n * 38 + 8);
    bool ok = n > 0 && tc_buf_append(&arr, "{", 1) == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = (i == 0 || tc_buf_append(&arr, ",", 1) == 0) && tc_buf_append(&arr, ids[i], 36) == 0;
    ok = ok && tc_buf_append(&arr, "}", 2) == 0; /* with its NUL */
    PGconn *db = ok ? tc_db_acquire(ss.srv->db, TC_DB_WAIT_MS) : NULL;
    const char *p[] = {arr.data};
    PGresult *res =
        db ? tc_db_exec(db, "SELECT id, status FROM executions WHERE id = ANY($1::uuid[])", 1, p)
           : NULL;
    tc_db_release(ss.srv->db, db);
    tc_buf_free(&arr);
    for (int row = 0; res && row < PQntuples(res); row++) {
        const char *id = PQgetvalue(res, row, 0), *status = PQgetvalue(res, row, 1);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(ids[i], id) != 0)
                continue;
            if (strcmp(status, "queued") == 0)
                held_start(list[i], id);
            else if (strcmp(status, "running") == 0 || tc_api_execution_terminal(status))
                held_release(list[i], id, status);
        }
    }
    PQclear(res);
    pthread_mutex_lock(&ss.mu);
    for (size_t i = 0; i < n; i++)
        session_unref_locked(list[i]);
    pthread_mutex_unlock(&ss.mu);
    free(list);
    free(ids);
}

/* The held thread: a look every HELD_POLL_MS while any call is held (a decision can come from
 * any replica or the console: PostgreSQL is where it is), off the keeper, whose timers must
 * not wait on the database or the workspace. */
static void *held_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ss.mu);
    while (!ss.quit) {
        bool any = false;
        for (struct session *s = ss.list; s && !any; s = s->next)
            any = s->held != NULL;
        if (any) {
            pthread_mutex_unlock(&ss.mu);
            held_poll();
            pthread_mutex_lock(&ss.mu);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += HELD_POLL_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (!ss.quit)
            pthread_cond_timedwait(&ss.held_cv, &ss.mu, &ts);
    }
    pthread_mutex_unlock(&ss.mu);
    return NULL;
}

enum MHD_Result tc_api_session_execute(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    return body ? tc_api_session_execute_json(r, body, NULL) : ret;
}

enum MHD_Result tc_api_session_execute_json(struct tc_request *r, json_t *body,
                                            const struct tc_stream_tap *tap)
{
    enum MHD_Result ret;
    /* The session first: an id that names nothing is 404 whatever the body. */
    struct session *s =
        tc_uuid_valid(r->params[0]) ? lookup(r->principal.tenant_id, r->params[0]) : NULL;
    if (!s) {
        json_decref(body);
        return not_open(r, r->params[0]);
    }
    json_t *errors = json_array();
    check_keys(body,
               (const char *const[]){"code", "stdin", "files", "timeout_ms", "cpu_ms",
                                     "cancel_on_disconnect", NULL},
               errors);
    json_t *code = json_object_get(body, "code"), *in = json_object_get(body, "stdin");
    json_t *files = json_object_get(body, "files");
    tc_exec_check_files(files, errors);
    if (!json_is_string(code) || json_string_length(code) > TC_EXEC_MAX_CODE_BYTES)
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "code", "message",
                                                "required: a string of at most 1 MiB"));
    if (in && (!json_is_string(in) || json_string_length(in) > TC_EXEC_MAX_STDIN_BYTES))
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "stdin", "message",
                                                "a string of at most 1 MiB"));
    int64_t timeout = opt_int(body, "timeout_ms", 0, errors);
    int64_t cpu = opt_int(body, "cpu_ms", 0, errors);
    json_t *cod = json_object_get(body, "cancel_on_disconnect");
    if (cod && !json_is_boolean(cod))
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "cancel_on_disconnect",
                                                "message", "must be a boolean"));
    else if (json_is_true(cod) && (r->reply_filter || !tc_stream_wanted(r)))
        json_array_append_new(errors,
                              json_pack("{s:s, s:s}", "path", "cancel_on_disconnect", "message",
                                        "needs an answer streamed as events (Accept: "
                                        "text/event-stream)"));
    bool cancel_gone = json_is_true(cod);
    if (json_array_size(errors)) {
        json_decref(body);
        session_unref(s);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(errors);
    struct call *c = calloc(1, sizeof(*c));
    if (!c) {
        json_decref(body);
        session_unref(s);
        return MHD_NO;
    }
    c->s = s; /* the lookup's reference is the call's */
    c->r = NULL;
    c->principal = r->principal;
    snprintf(c->request_id, sizeof(c->request_id), "%s", r->request_id);
    memcpy(c->limits, s->limits, sizeof(c->limits));
    if (timeout > s->t->limits[TC_LIMIT_TIMEOUT_MS].max) {
        ret = tc_respond_problem(r, 422, "limit-exceeds-policy", "Limit exceeds policy", NULL,
                                 "timeout_ms: at most %lld for tool '%s'",
                                 (long long)s->t->limits[TC_LIMIT_TIMEOUT_MS].max, s->tool);
        call_free(c); /* its reference to s: the last, maybe */
        json_decref(body);
        return ret;
    }
    if (cpu > s->t->limits[TC_LIMIT_CPU_MS].max) {
        ret = tc_respond_problem(r, 422, "limit-exceeds-policy", "Limit exceeds policy", NULL,
                                 "cpu_ms: at most %lld for tool '%s'",
                                 (long long)s->t->limits[TC_LIMIT_CPU_MS].max, s->tool);
        call_free(c);
        json_decref(body);
        return ret;
    }
    if (timeout)
        c->limits[TC_LIMIT_TIMEOUT_MS] = timeout;
    /* the call's CPU: asked for, else the tool's default; never more than the session's */
    int64_t call_cpu = cpu ? cpu : s->t->limits[TC_LIMIT_CPU_MS].def;
    if (call_cpu > 0 && call_cpu < c->limits[TC_LIMIT_CPU_MS])
        c->limits[TC_LIMIT_CPU_MS] = call_cpu;
    tc_session_scan_init(&c->scan[0], "");
    tc_session_scan_init(&c->scan[1], "");
    tc_buf_init(&c->raw[0], (size_t)c->limits[TC_LIMIT_OUTPUT_BYTES] + 1);
    tc_buf_init(&c->raw[1], (size_t)c->limits[TC_LIMIT_OUTPUT_BYTES] + 1);

    /* Pre-screened as a one-shot call of the tool would be; a session cannot wait for a
     * person, so a call the screen would hold is refused. */
    json_t *screen = json_pack("{s:s, s:O}", "tool", s->tool, "code", code);
    if (screen && in)
        json_object_set(screen, "stdin", in);
    if (screen && files)
        json_object_set(screen, "files", files);
    if (!screen || tc_prescreen_request(s->t, screen, &c->findings) < 0) {
        json_decref(screen);
        call_free(c);
        json_decref(body);
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the pre-screen could not run, so the call was not run");
    }
    json_decref(screen);
    enum tc_prescreen_action action = tc_prescreen_decide(s->t, c->findings);
    /* Held (the tool's tier, or code the screen holds): in the session until a person decides
     * if its policy says so (session.held_calls), else refused: nothing runs unapproved. */
    json_t *reasons = NULL;
    bool held = action != TC_ACTION_BLOCK &&
                tc_approval_needed(s->t, action == TC_ACTION_APPROVE, &reasons);
    if (held && s->t->session_hold && !tap && !r->reply_filter) /* MCP: its own held calls */
        return hold_call(r, c, body, reasons, tc_stream_wanted(r), cancel_gone);
    json_decref(reasons);
    if (action == TC_ACTION_BLOCK || held) {
        tc_uuid7(c->exec_id);
        json_t *ev = call_event(r, c, body, action == TC_ACTION_BLOCK ? "blocked" : "refused");
        PGconn *db = ev ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
        int arc = db ? tc_audit_append(db, r->srv->keys, ev, NULL) : -EIO;
        tc_db_release(r->srv->db, db);
        json_decref(ev);
        json_t *f = tc_api_findings_errors(c->findings, body);
        if (arc < 0) {
            json_decref(f);
            ret = tc_respond_db_down(r);
        } else {
            tc_metrics_execution(s->tool, "blocked", 0);
            if (action == TC_ACTION_BLOCK)
                ret = tc_respond_problem(r, 403, "blocked-by-prescreen", "Blocked by pre-screen", f,
                                         "the pre-screen blocked this code (see errors)");
            else
                ret = tc_respond_problem(
                    r, 422, "approval-required", "Approval required", f,
                    "this call would be held for a person's approval, and the policy of tool "
                    "'%s' refuses held calls in a session (session.held_calls); run it with "
                    "POST /v1/execute",
                    s->tool);
        }
        call_free(c); /* after its session's last use: this may be its last reference */
        json_decref(body);
        return ret;
    }

    /* The session is this call's (one at a time). */
    if (!take_session(r, c, &ret)) {
        json_decref(body);
        return ret;
    }
    /* The call's files, into the workspace before it is recorded (a refusal after this leaves
     * them there, as an upload would). */
    const char *bad_path = NULL;
    int frc0 = put_files(s, files, &bad_path);
    if (frc0 < 0) {
        give_back(s);
        ret = file_problem(r, frc0, bad_path);
        call_free(c);
        json_decref(body);
        return ret;
    }
    /* Recorded as started before the driver sees it: the row, the execute and execution.start
     * records, the tenant's call quota; the session's use. */
    tc_uuid7(c->exec_id);
    tc_iso8601(tc_wall_ms(), c->created_at);
    json_t *ev = call_event(r, c, body, "allowed");
    char *req_text = call_request_text(s, body);
    json_t *lj = tc_exec_limits_json(c->limits);
    char *lt = json_dumps(lj, JSON_COMPACT);
    json_decref(lj);
    char inst[16];
    snprintf(inst, sizeof(inst), "%d", (int)r->srv->instance_id);
    struct tc_quota_refusal q = {0};
    const struct tc_quota_defaults qd = tc_quota_defaults_of(r->srv->cfg);
    PGconn *db = (ev && req_text && lt) ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    int rc = db ? tc_db_begin(db) : -EIO;
    if (rc == 0)
        rc = tc_quota_admit_call_tx(db, s->tenant_id, r->principal.key_id, &qd, &q);
    if (rc == 0) {
        const char *p[] = {c->exec_id, s->tenant_id, r->principal.key_id,
                           s->tool,    req_text,     r->request_id,
                           lt,         inst,         s->id};
        PGresult *res = tc_db_exec(
            db,
            "WITH e AS (INSERT INTO executions (id, tenant_id, api_key_id, tool, status, request,"
            " request_id, created_at, started_at, limits, claimed_by, session_id)"
            " VALUES ($1, $2, $3, $4, 'running', $5::jsonb, $6, now(), now(), $7::jsonb,"
            " $8::int, $9) RETURNING 1)"
            " UPDATE sessions SET calls = calls + 1, last_used_at = now()"
            " WHERE id = $9 AND status = 'active' AND EXISTS (SELECT 1 FROM e) RETURNING 1",
            9, p);
        rc = res && PQntuples(res) == 1 ? 0 : -EIO;
        PQclear(res);
        /* started (migrations/0008: a row is created unstarted, then starts once) */
        res = rc == 0 ? tc_db_exec(
                            db, "UPDATE executions SET code_started_at = now() WHERE id = $1", 1, p)
                      : NULL;
        rc = rc == 0 && !res ? -EIO : rc;
        PQclear(res);
    }
    if (rc == 0 && tc_audit_append_tx(db, r->srv->keys, ev, NULL) < 0)
        rc = -EIO;
    if (rc == 0) {
        json_t *start =
            json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:i, s:s}", "action", "execution.start",
                      "tenant_id", s->tenant_id, "actor", tc_auth_actor(&r->principal), "tool",
                      s->tool, "execution_id", c->exec_id, "request_id", r->request_id, "instance",
                      (int)r->srv->instance_id, "session_id", s->id);
        rc = start && tc_audit_append_tx(db, r->srv->keys, start, NULL) == 0 ? 0 : -EIO;
        json_decref(start);
    }
    if (rc == -EIO && db)
        tc_log(TC_LOG_ERROR, "recording a session call failed", "{s:s, s:s}", "request_id",
               r->request_id, "error", tc_db_error(db));
    if (db)
        rc = tc_db_finish(db, rc);
    tc_db_release(r->srv->db, db);
    json_decref(ev);
    free(req_text);
    free(lt);
    if (rc < 0) {
        pthread_mutex_lock(&ss.mu);
        s->busy = false;
        pthread_mutex_unlock(&ss.mu);
        call_free(c);
        json_decref(body);
        if (rc == -EDQUOT)
            return quota_refused(r, &q);
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the call could not be recorded, so it was not run");
    }
    /* The frame, the scanners on its nonce, then the driver. Output that came between calls
     * (programs left in the background) is this call's. */
    struct tc_buf frame;
    int frc = call_frame(c, &frame, code, in);
    json_decref(body);
    /* Answered by call_answer() once the outcome is stored, whatever happens from here; or at
     * once with its events (Accept: text/event-stream), the call then its own. */
    if (tap || (!r->reply_filter && tc_stream_wanted(r))) {
        size_t nsec = 0;
        const char *const *sec = tc_grant_values(s->grant, &nsec);
        if (tc_exec_stream_new(c->exec_id, s->redactor, sec, nsec, c->limits[TC_LIMIT_OUTPUT_BYTES],
                               true, &c->stream) < 0)
            tc_log(TC_LOG_WARN, "no event stream for this session call", "{s:s, s:s}", "request_id",
                   r->request_id, "execution_id", c->exec_id);
    }
    if (c->stream) {
        json_t *accepted =
            json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "id", c->exec_id, "tool", s->tool, "status",
                      "running", "created_at", c->created_at, "findings",
                      c->findings ? json_incref(c->findings) : json_array(), "session_id", s->id);
        if (tap) /* MCP: its own answer from the same events (api/mcp.c) */
            tc_exec_stream_tap(c->stream, tap);
        if (accepted)
            tc_exec_stream_event(c->stream, "execution", accepted);
        json_decref(accepted);
        if (tap) {
            r->reply_filter = NULL;
            ret = tap->answer(tap->ud, r);
        } else {
            ret = tc_exec_stream_respond(r, tc_exec_stream_events(c->stream), NULL, cancel_gone);
            if (cancel_gone) /* interrupted as by POST .../cancel; the session lives on */
                tc_api_cancel_when_gone(r, c->exec_id);
        }
    } else {
        r->state = c;
        r->state_free = call_free;
        c->r = r;
        tc_request_suspend(r, call_answer);
        ret = MHD_YES;
    }
    call_launch(c, &frame, frc);
    return ret;
}

/* ---- files: PUT|GET|DELETE /v1/sessions/{id}/files/{path}, GET /v1/sessions/{id}/files ----
 * The launcher does the work in the workspace it holds (sandbox/workspace.h: the kernel
 * refuses any path through a symbolic link or onto another mount); downloads are redacted like
 * collected files; every operation is audited (a download before its bytes leave). */

#define FILE_OP_MS   10000 /* the launcher answers in milliseconds; this is its bound */
#define FILE_GET_MAX (16u << 20)

/* The live session the request names (a reference), or NULL with the answer in *ret. */
static struct session *files_session(struct tc_request *r, bool writes, enum MHD_Result *ret)
{
    struct session *s =
        tc_uuid_valid(r->params[0]) ? lookup(r->principal.tenant_id, r->params[0]) : NULL;
    bool live = false, held = false;
    if (s) {
        pthread_mutex_lock(&ss.mu);
        live = !s->end_reason && s->launched;
        held = s->held || s->starting;
        pthread_mutex_unlock(&ss.mu);
        json_t *reasons = NULL;
        bool gated = tc_approval_needed(s->t, false, &reasons); /* every call held */
        json_decref(reasons);
        if (live && writes && gated) {
            /* a person approves each call: what it runs must be in what they approve */
            *ret = tc_respond_problem(r, 422, "approval-required", "Approval required", NULL,
                                      "every call of tool '%s' is approved by a person: files "
                                      "enter its sessions only with a call (its \"files\"), in "
                                      "the payload the person approves",
                                      s->tool);
            session_unref(s);
            return NULL;
        }
        if (live && !(writes && held))
            return s;
        session_unref(s);
    }
    if (live) /* what a person approves runs in the workspace as it was when it was held */
        *ret = tc_respond_problem(r, 409, "session-busy", "Session busy", NULL,
                                  "a call of this session is held for a person's approval: "
                                  "its workspace does not change until that call has run "
                                  "or is withdrawn");
    else
        *ret = not_open(r, r->params[0]);
    return NULL;
}

/* The launcher's part: 0, or -errno of the operation (or of reaching the launcher). */
static int file_op(struct session *s, json_t *op, const void *data, size_t len, json_t **ret_head,
                   char **ret_data, size_t *ret_len)
{
    int rc = op ? tc_launcher_file(ss.srv->launcher, s->id, op, data, len, FILE_OP_MS, ret_head,
                                   ret_data, ret_len)
                : -ENOMEM;
    json_decref(op);
    if (rc < 0)
        return rc == -ENOENT ? -EPIPE : rc;
    json_int_t e = json_integer_value(json_object_get(*ret_head, "errno"));
    if (e > 0 && ret_data) {
        free(*ret_data);
        *ret_data = NULL;
    }
    return e > 0 && e < 4096 ? -(int)e : 0;
}

static enum MHD_Result file_problem(struct tc_request *r, int rc, const char *path)
{
    switch (rc) {
    case -ENOENT:
    case -ENOTDIR:
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL,
                                  "the session's workspace has no file %s", path);
    case -ELOOP:
    case -EXDEV:
        return tc_respond_problem(r, 409, "unsafe-path", "Unsafe path", NULL,
                                  "%s is or passes through a symbolic link (or another mount): "
                                  "toolcage never follows what the sandboxed code made",
                                  path);
    case -EISDIR:
    case -EPERM:
    case -ENOTEMPTY:
        return tc_respond_problem(r, 409, "not-a-file", "Not a file", NULL, "%s is %s", path,
                                  rc == -EISDIR      ? "a directory"
                                  : rc == -ENOTEMPTY ? "a directory that is not empty"
                                                     : "not a regular file (a FIFO, socket, ...)");
    case -EFBIG:
        return tc_respond_problem(r, 422, "file-too-large", "File too large", NULL,
                                  "%s is larger than a download may be (%u bytes)", path,
                                  FILE_GET_MAX);
    case -ENOSPC:
    case -EDQUOT:
        return tc_respond_problem(r, 507, "workspace-full", "Workspace full", NULL,
                                  "the session's workspace has no room for %s (see the tool's "
                                  "workspace_bytes limit)",
                                  path);
    case -EACCES:
        return tc_respond_problem(r, 403, "file-withheld", "File withheld", NULL,
                                  "%s is binary and a redaction rule matched in its bytes: it is "
                                  "withheld, as a collected file would be",
                                  path);
    case -EINVAL:
    case -ENAMETOOLONG:
        return tc_respond_problem(
            r, 400, "validation", "Invalid request",
            json_pack("[{s:s, s:s}]", "path", "path", "message",
                      "a relative path without '.', '..' or empty parts, at most 255 bytes"),
            "the file path is not valid");
    default:
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the session's sandbox did not answer (%s)", strerror(-rc));
    }
}

/* One audit record for a file operation; 0 or -EIO. */
static int file_audit(struct tc_request *r, struct session *s, const char *action, const char *path,
                      json_t *more)
{
    json_t *ev = json_pack("{s:s, s:s, s:o, s:s, s:s, s:s}", "action", action, "tenant_id",
                           s->tenant_id, "actor", tc_auth_actor(&r->principal), "tool", s->tool,
                           "session_id", s->id, "path", path);
    if (ev && more)
        json_object_update(ev, more);
    json_decref(more);
    PGconn *db = ev ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    int rc = db ? tc_audit_append(db, r->srv->keys, ev, NULL) : -EIO;
    tc_db_release(r->srv->db, db);
    json_decref(ev);
    return rc < 0 ? -EIO : 0;
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, data, len);
    sodium_bin2hex(out, 65, h, sizeof(h));
}

/* The live session and the valid file path a file request names, or NULL with its answer. */
static struct session *file_request(struct tc_request *r, bool writes, const char **ret_path,
                                    enum MHD_Result *ret)
{
    *ret_path = r->params[1] && tc_ws_path_ok(r->params[1]) ? r->params[1] : NULL;
    if (!*ret_path) {
        *ret = file_problem(r, -EINVAL, "");
        return NULL;
    }
    return files_session(r, writes, ret);
}

enum MHD_Result tc_api_session_file_put(struct tc_request *r)
{
    enum MHD_Result ret = MHD_NO;
    const char *path = NULL;
    struct session *s = file_request(r, true, &path, &ret);
    if (!s)
        return ret;
    /* Screened as a call's file would be: code in the session can run what it uploads. */
    char *b64 = tc_b64_encode(r->body.data ? r->body.data : "", r->body.len);
    json_t *screen = b64 ? json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}]}", "tool", s->tool, "code", "",
                                     "files", "path", path, "content", b64, "encoding", "base64")
                         : NULL;
    free(b64);
    json_t *findings = NULL;
    if (!screen || tc_prescreen_request(s->t, screen, &findings) < 0) {
        json_decref(screen);
        session_unref(s);
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the pre-screen could not run, so the file was not written");
    }
    enum tc_prescreen_action action = tc_prescreen_decide(s->t, findings);
    if (action == TC_ACTION_BLOCK || action == TC_ACTION_APPROVE) {
        json_t *f = tc_api_findings_errors(findings, screen);
        bool block = action == TC_ACTION_BLOCK;
        if (file_audit(r, s, "session.file.put", path,
                       json_pack("{s:I, s:s, s:O}", "size", (json_int_t)r->body.len, "refused",
                                 block ? "blocked" : "approval-required", "findings", findings)) <
            0) {
            json_decref(f);
            ret = tc_respond_db_down(r);
        } else if (block)
            ret = tc_respond_problem(r, 403, "blocked-by-prescreen", "Blocked by pre-screen", f,
                                     "the pre-screen blocked this file (see errors); it was not "
                                     "written");
        else
            ret = tc_respond_problem(r, 422, "approval-required", "Approval required", f,
                                     "the pre-screen holds this file for a person's approval, "
                                     "which an upload cannot wait for; it was not written");
        json_decref(screen);
        json_decref(findings);
        session_unref(s);
        return ret;
    }
    json_decref(screen);
    json_t *head = NULL;
    int rc = file_op(s, json_pack("{s:s, s:s}", "op", "put", "path", path), r->body.data,
                     r->body.len, &head, NULL, NULL);
    bool created = json_is_true(json_object_get(head, "created"));
    json_decref(head);
    char sum[65];
    sha256_hex(r->body.data ? r->body.data : "", r->body.len, sum);
    if (rc < 0) {
        ret = file_problem(r, rc, path);
    } else if (file_audit(r, s, "session.file.put", path,
                          json_pack("{s:I, s:s, s:b, s:o}", "size", (json_int_t)r->body.len,
                                    "sha256", sum, "created", created, "findings",
                                    findings ? findings : json_array())) < 0) {
        findings = NULL;
        ret = tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                 "the file was written but its audit record was not: the "
                                 "database is not reachable");
    } else {
        findings = NULL;
        ret = tc_respond_json(r, created ? 201 : 200,
                              json_pack("{s:s, s:I, s:s}", "path", path, "size",
                                        (json_int_t)r->body.len, "sha256", sum));
    }
    json_decref(findings);
    session_unref(s);
    return ret;
}

enum MHD_Result tc_api_session_file_get(struct tc_request *r)
{
    enum MHD_Result ret = MHD_NO;
    const char *path = NULL;
    struct session *s = file_request(r, false, &path, &ret);
    if (!s)
        return ret;
    json_t *head = NULL;
    char *data = NULL, *out = NULL;
    size_t len = 0, olen = 0;
    int rc = file_op(
        s, json_pack("{s:s, s:s, s:I}", "op", "get", "path", path, "max", (json_int_t)FILE_GET_MAX),
        NULL, 0, &head, &data, &len);
    json_decref(head);
    json_t *counts = json_object();
    if (rc == 0) {
        struct tc_exec_filter filter = {.redactor = s->redactor};
        filter.secrets = tc_grant_values(s->grant, &filter.nsecrets);
        rc = tc_exec_redact_file(&filter, (const unsigned char *)data, len, counts, &out, &olen);
    }
    free(data);
    json_int_t n = 0;
    const char *rule;
    json_t *v;
    json_object_foreach(counts, rule, v) n += json_integer_value(v);
    if (rc < 0 && rc != -EACCES) {
        ret = file_problem(r, rc, path);
    } else if (file_audit(r, s, "session.file.get", path,
                          json_pack("{s:I, s:O, s:b}", "size", (json_int_t)len, "redactions",
                                    counts, "withheld", rc == -EACCES)) < 0) {
        ret = tc_respond_db_down(r); /* nothing leaves unaudited */
    } else if (rc == -EACCES) {
        ret = file_problem(r, rc, path);
    } else {
        char hv[24];
        snprintf(hv, sizeof(hv), "%lld", (long long)n);
        ret = tc_respond_bytes(r, 200, "application/octet-stream", out, olen, "Toolcage-Redactions",
                               hv);
        out = NULL;
    }
    free(out);
    json_decref(counts);
    session_unref(s);
    return ret;
}

enum MHD_Result tc_api_session_file_delete(struct tc_request *r)
{
    enum MHD_Result ret = MHD_NO;
    const char *path = NULL;
    struct session *s = file_request(r, true, &path, &ret);
    if (!s)
        return ret;
    json_t *head = NULL;
    int rc = file_op(s, json_pack("{s:s, s:s}", "op", "delete", "path", path), NULL, 0, &head, NULL,
                     NULL);
    json_decref(head);
    if (rc < 0)
        ret = file_problem(r, rc, path);
    else if (file_audit(r, s, "session.file.delete", path, NULL) < 0)
        ret = tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                 "the file was deleted but its audit record was not: the "
                                 "database is not reachable");
    else
        ret = tc_respond_text(r, 204, "text/plain", "", 0);
    session_unref(s);
    return ret;
}

static int cmp_entry_path(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "path")),
                  json_string_value(json_object_get(*(json_t *const *)b, "path")));
}

enum MHD_Result tc_api_session_files_list(struct tc_request *r)
{
    enum MHD_Result ret = MHD_NO;
    struct session *s = files_session(r, false, &ret);
    if (!s)
        return ret;
    json_t *head = NULL;
    int rc = file_op(s, json_pack("{s:s}", "op", "list"), NULL, 0, &head, NULL, NULL);
    if (rc < 0) {
        json_decref(head);
        session_unref(s);
        return file_problem(r, rc, ".");
    }
    /* the names are the sandboxed code's: redacted like a collected file's path */
    struct tc_exec_filter filter = {.redactor = s->redactor};
    filter.secrets = tc_grant_values(s->grant, &filter.nsecrets);
    json_t *in = json_object_get(head, "entries"), *e, *counts = json_object();
    size_t n = json_array_size(in), k = 0, i;
    json_t **items = calloc(n ? n : 1, sizeof(*items));
    json_array_foreach(in, i, e)
    {
        const char *p = json_string_value(json_object_get(e, "path"));
        if (!items || !p)
            continue;
        char when[32] = "";
        time_t t = (time_t)json_integer_value(json_object_get(e, "mtime"));
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        items[k] = json_pack("{s:o, s:O, s:O, s:O, s:s}", "path",
                             tc_exec_redact_string(&filter, p, strlen(p), counts), "type",
                             json_object_get(e, "type"), "size", json_object_get(e, "size"), "mode",
                             json_object_get(e, "mode"), "modified_at", when);
        if (items[k])
            k++;
    }
    if (items)
        qsort(items, k, sizeof(*items), cmp_entry_path);
    json_t *files = json_array();
    for (i = 0; i < k; i++)
        json_array_append_new(files, items[i]);
    free(items);
    json_t *body = json_pack("{s:o, s:b}", "files", files, "truncated",
                             json_is_true(json_object_get(head, "incomplete")) || k < n);
    json_decref(head);
    json_decref(counts);
    session_unref(s);
    return body ? tc_respond_json(r, 200, body) : MHD_NO;
}
