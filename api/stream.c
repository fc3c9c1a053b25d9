/* An execution's output as Server-Sent Events: see stream.h. */
#include "api/stream.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "common/buf.h"
#include "common/util.h"
#include "core/db.h"
#include "execution/request.h"
#include "policy/redact.h"

/* The event text of one execution is bounded: output events stop at this size (the result
 * event still comes, and it holds all the output). */
#define LOG_CAP_MIN    (1u << 20)
#define LOG_CAP_MAX    (32u << 20)
#define FOLLOW_POLL_MS 1000
#define FOLLOW_ASK_MS  3000 /* how often a follower asks for a run's output to be shared */
#define NET_MAX        256  /* attempts a sandbox's "network" lists (sandbox/egress.h) */

/* ---- Accept ---- */

static enum MHD_Result accept_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    bool *found = cls;
    (void)kind;
    if (!key || strcasecmp(key, "Accept") != 0 || !value)
        return MHD_YES;
    /* media ranges, comma-separated: type/subtype *(; param) */
    const char *p = value;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        static const char es[] = "text/event-stream";
        if (n >= sizeof(es) - 1 && strncasecmp(p, es, sizeof(es) - 1) == 0) {
            const char *rest = p + sizeof(es) - 1;
            size_t rn = n - (sizeof(es) - 1);
            while (rn && (*rest == ' ' || *rest == '\t'))
                rest++, rn--;
            bool zero = false;
            /* a parameter q=0 (or 0.0...) refuses it */
            for (size_t i = 0; i + 2 < rn; i++)
                if ((rest[i] == ';' || rest[i] == ' ') &&
                    (rest[i + 1] == 'q' || rest[i + 1] == 'Q')) {
                    size_t k = i + 2;
                    while (k < rn && rest[k] == ' ')
                        k++;
                    if (k < rn && rest[k] == '=') {
                        k++;
                        while (k < rn && rest[k] == ' ')
                            k++;
                        zero = k < rn && rest[k] == '0';
                        for (size_t j = k + 1; zero && j < rn && rest[j] != ';'; j++)
                            if (rest[j] != '.' && rest[j] != '0' && rest[j] != ' ')
                                zero = false;
                    }
                }
            if ((rn == 0 || *rest == ';') && !zero)
                *found = true;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return MHD_YES;
}

bool tc_stream_wanted(struct tc_request *r)
{
    bool found = false;
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, accept_header, &found);
    return found;
}

/* ---- pushing ---- */

static const char *const names[2] = {"stdout", "stderr"};

/* An output event into e, and to tap (may be NULL) whether or not the log had room. */
static int push_text(struct tc_events *e, const struct tc_stream_tap *tap, const char *type,
                     const char *text, size_t n, size_t out, size_t err)
{
    char id[48];
    snprintf(id, sizeof(id), "%zu-%zu", out, err);
    json_t *d = json_object();
    if (!d || json_object_set_new(d, "text", json_stringn(text, n)) < 0) {
        json_decref(d);
        return -ENOMEM;
    }
    int r = tc_events_push(e, type, id, d, false);
    if (tap && tap->event)
        tap->event(tap->ud, type, d);
    json_decref(d);
    return r;
}

/* What the client has not seen of view's stdout and stderr (it has out and err bytes), then the
 * connections not told live (seen: a bit per index of view's network, NULL = none told), then
 * the view as "result", and the end; tap (may be NULL) hears the same. An offset inside a
 * character or past the text starts over. */
static void push_end(struct tc_events *e, const struct tc_stream_tap *tap, json_t *view,
                     size_t *out, size_t *err, const uint8_t *seen)
{
    size_t *offs[2] = {out, err};
    for (int k = 0; k < 2; k++) {
        json_t *t = json_object_get(view, names[k]);
        const char *s = json_string_value(t);
        size_t n = json_string_length(t);
        if (!s)
            continue;
        if (*offs[k] > n || (*offs[k] < n && ((unsigned char)s[*offs[k]] & 0xc0) == 0x80))
            *offs[k] = 0;
        if (*offs[k] < n) {
            size_t from = *offs[k];
            *offs[k] = n;
            (void)push_text(e, tap, names[k], s + from, n - from, *out, *err);
        }
    }
    /* the connections the proxy's live news missed (or all, following from elsewhere) */
    size_t i;
    json_t *att;
    json_array_foreach(json_object_get(view, "network"), i, att)
    {
        if (seen && i < NET_MAX && (seen[i / 8] & (1u << (i % 8))))
            continue;
        (void)tc_events_push(e, "network", NULL, att, true);
        if (tap && tap->event)
            tap->event(tap->ud, "network", att);
    }
    (void)tc_events_push(e, "result", "end", view, true);
    if (tap && tap->event)
        tap->event(tap->ud, "result", view);
    tc_events_close(e);
}

/* ---- a run on this process ---- */

struct tc_exec_stream {
    pthread_mutex_t mu;
    struct tc_stream_tap tap; /* .event NULL: none (or told its end) */
    struct tc_events *e;
    struct tc_redact_stream *rs[2];
    struct tc_buf red[2];          /* redacted, not yet made text (an unfinished UTF-8 sequence) */
    size_t sent[2];                /* text bytes pushed */
    bool stopped;                  /* an output event did not fit: the result carries the rest */
    struct tc_exec_filter filter;  /* for the hosts of network events (secrets: copies) */
    uint8_t net_seen[NET_MAX / 8]; /* network events pushed, by index in the result's list */
    char id[40];
    struct tc_exec_stream *reg_next; /* in reg: findable by id while it lives */
    json_t *hist;                    /* the output events pushed: [[k, text, out, err], ...] */
    struct tc_share *share;          /* shared with readers elsewhere (stream_share.c), or NULL */
};

/* The streams of this process (lock order: reg.mu, a stream's mu, the share thread's). */
static struct {
    pthread_mutex_t mu;
    struct tc_exec_stream *list;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

int tc_exec_stream_new(const char *exec_id, const struct tc_redactor *red,
                       const char *const *secrets, size_t nsecrets, int64_t output_bytes,
                       bool findable, struct tc_exec_stream **ret)
{
    struct tc_exec_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    for (int k = 0; k < 2; k++)
        tc_buf_init(&s->red[k], SIZE_MAX / 2);
    /* JSON escapes can grow text up to six times; the result event comes on top */
    uint64_t cap = output_bytes > 0 ? (uint64_t)output_bytes * 8 : LOG_CAP_MIN;
    cap = cap < LOG_CAP_MIN ? LOG_CAP_MIN : cap > LOG_CAP_MAX ? LOG_CAP_MAX : cap;
    s->filter.redactor = red;
    char **copies = nsecrets ? calloc(nsecrets, sizeof(*copies)) : NULL;
    s->filter.secrets = (const char *const *)copies;
    s->filter.nsecrets = copies ? nsecrets : 0;
    for (size_t i = 0; i < s->filter.nsecrets; i++)
        if (!(copies[i] = strdup(secrets[i]))) {
            tc_exec_stream_free(s);
            return -ENOMEM;
        }
    if (nsecrets && !copies) {
        tc_exec_stream_free(s);
        return -ENOMEM;
    }
    int r = tc_events_new(exec_id, (size_t)cap, findable, &s->e);
    for (int k = 0; r == 0 && k < 2; k++)
        r = tc_redact_stream_new(red, secrets, nsecrets, &s->rs[k]);
    if (r == 0 && !(s->hist = json_array()))
        r = -ENOMEM;
    if (r < 0) {
        tc_exec_stream_free(s);
        return r;
    }
    snprintf(s->id, sizeof(s->id), "%s", exec_id);
    pthread_mutex_lock(&reg.mu);
    s->reg_next = reg.list;
    reg.list = s;
    pthread_mutex_unlock(&reg.mu);
    *ret = s;
    return 0;
}

struct tc_events *tc_exec_stream_events(struct tc_exec_stream *s)
{
    return s->e;
}

void tc_exec_stream_tap(struct tc_exec_stream *s, const struct tc_stream_tap *tap)
{
    pthread_mutex_lock(&s->mu);
    s->tap = *tap;
    pthread_mutex_unlock(&s->mu);
}

static void tell(struct tc_exec_stream *s, const char *event, json_t *data)
{
    if (s->tap.event)
        s->tap.event(s->tap.ud, event, data);
}

void tc_exec_stream_event(struct tc_exec_stream *s, const char *event, json_t *data)
{
    pthread_mutex_lock(&s->mu);
    (void)tc_events_push(s->e, event, NULL, data, true);
    tell(s, event, data);
    if (strcmp(event, "execution") == 0) { /* then each pre-screen finding, before any output */
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(data, "findings"), i, f)
        {
            (void)tc_events_push(s->e, "finding", NULL, f, true);
            tell(s, "finding", f);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void tc_exec_stream_chunk(struct tc_exec_stream *s, int stream, const char *data, size_t len)
{
    int k = stream == 2 ? 1 : 0;
    pthread_mutex_lock(&s->mu);
    if (s->stopped || tc_redact_stream_feed(s->rs[k], data, len, &s->red[k]) < 0) {
        s->stopped = true;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    size_t ready = tc_exec_text_settled(s->red[k].data, s->red[k].len);
    if (ready > 0) {
        json_t *t = tc_exec_text(s->red[k].data, ready);
        memmove(s->red[k].data, s->red[k].data + ready, s->red[k].len - ready + 1);
        s->red[k].len -= ready;
        if (t) {
            s->sent[k] += json_string_length(t);
            if (push_text(s->e, &s->tap, names[k], json_string_value(t), json_string_length(t),
                          s->sent[0], s->sent[1]) < 0) {
                s->stopped = true;
            } else {
                json_t *ev =
                    json_pack("[i, O, I, I]", k, t, (json_int_t)s->sent[0], (json_int_t)s->sent[1]);
                if (!ev || json_array_append_new(s->hist, ev) < 0)
                    s->stopped = true; /* a reader elsewhere gets the rest with the result */
                if (s->share)
                    tc_share_event(s->share, k, json_string_value(t), json_string_length(t),
                                   s->sent[0], s->sent[1]);
            }
        } else {
            s->stopped = true;
        }
        json_decref(t);
    }
    pthread_mutex_unlock(&s->mu);
}

void tc_exec_stream_network_at(struct tc_exec_stream *s, json_t *att, size_t pos)
{
    pthread_mutex_lock(&s->mu);
    if (pos < NET_MAX && !(s->net_seen[pos / 8] & (1u << (pos % 8)))) {
        /* once, as decided: its bytes come with the result */
        json_t *d = tc_exec_network_entry(&s->filter, att, false, NULL);
        if (d) {
            s->net_seen[pos / 8] |= (uint8_t)(1u << (pos % 8));
            (void)tc_events_push(s->e, "network", NULL, d, true);
            tell(s, "network", d);
        }
        json_decref(d);
    }
    pthread_mutex_unlock(&s->mu);
}

void tc_exec_stream_network(struct tc_exec_stream *s, const char *json, size_t len)
{
    json_t *att = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *ix = json_object_get(att, "index");
    if (json_is_integer(ix) && json_integer_value(ix) >= 0)
        tc_exec_stream_network_at(s, att, (size_t)json_integer_value(ix));
    json_decref(att);
}

void tc_exec_stream_end(struct tc_exec_stream *s, json_t *view, json_t *problem)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (view) {
        /* The output pushed is a prefix of view's (one-shot redaction equals the stream's); a
         * stream that stopped early is not continued: the result has everything. */
        size_t out = s->sent[0], err = s->sent[1];
        if (s->stopped) {
            json_t *t = json_object_get(view, names[0]), *u = json_object_get(view, names[1]);
            out = json_string_length(t);
            err = json_string_length(u);
        }
        /* the tap hears the rest too (output written right before the end often comes only
         * with the result) */
        push_end(s->e, &s->tap, view, &out, &err, s->net_seen);
    } else if (problem) {
        (void)tc_events_push(s->e, "error", NULL, problem, true);
        tell(s, "error", problem);
    }
    pthread_mutex_unlock(&s->mu);
    tc_exec_stream_free(s);
}

void tc_exec_stream_recorded(struct tc_exec_stream *s, int rc, json_t *view)
{
    bool ok = (rc == 0 || rc == -ESTALE) && view;
    json_t *problem =
        ok ? NULL
           : json_pack("{s:s, s:s, s:i, s:s}", "type", "urn:toolcage:problem:unavailable", "title",
                       "Service unavailable", "status", 503, "detail",
                       "the execution's outcome is not stored yet (it is kept and will be); "
                       "read it with GET /v1/executions/{id}");
    tc_exec_stream_end(s, ok ? view : NULL, problem);
    json_decref(problem);
}

int tc_exec_stream_share(const char *exec_id)
{
    int r = -ENOENT;
    pthread_mutex_lock(&reg.mu);
    for (struct tc_exec_stream *s = reg.list; s; s = s->reg_next) {
        if (strcmp(s->id, exec_id) != 0)
            continue;
        pthread_mutex_lock(&s->mu);
        if (!s->share)
            s->share = tc_share_open(exec_id, json_deep_copy(s->hist));
        r = s->share ? 0 : -ENOMEM;
        pthread_mutex_unlock(&s->mu);
        break;
    }
    pthread_mutex_unlock(&reg.mu);
    return r;
}

void tc_exec_stream_free(struct tc_exec_stream *s)
{
    if (!s)
        return;
    if (s->id[0]) {
        pthread_mutex_lock(&reg.mu);
        for (struct tc_exec_stream **pp = &reg.list; *pp; pp = &(*pp)->reg_next)
            if (*pp == s) {
                *pp = s->reg_next;
                break;
            }
        pthread_mutex_unlock(&reg.mu);
    }
    tc_share_close(s->share); /* its outcome is stored (or will not be here): rows go */
    json_decref(s->hist);
    tell(s, NULL, NULL); /* the end, once: the tap may free its state */
    s->tap.event = NULL;
    if (s->e) {
        tc_events_close(s->e);
        tc_events_unref(s->e);
    }
    for (int k = 0; k < 2; k++) {
        tc_redact_stream_free(s->rs[k]);
        tc_buf_free(&s->red[k]);
    }
    for (size_t i = 0; i < s->filter.nsecrets; i++)
        free((char *)s->filter.secrets[i]);
    free((void *)s->filter.secrets);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- a run elsewhere: the database ---- */

struct follow {
    struct tc_db *db;
    char tenant[40], id[40], status[32];
    size_t out, err;
    int64_t next_ms;
    int seq;        /* execution_output rows read */
    int64_t ask_ms; /* when to ask (again) for its output to be shared */
    bool gap;       /* a row is missing: the rest comes with the result */
};

/* What the replica running it shares (execution_output, stream_share.c) after what e has. */
static void follow_output(struct tc_events *e, struct follow *f, int64_t now)
{
    if (f->gap || strcmp(f->status, "running") != 0)
        return;
    PGconn *c = tc_db_acquire(f->db, 200);
    if (!c)
        return;
    const char *ask[] = {f->id};
    if (now >= f->ask_ms) { /* again now and then: the run may have started since */
        f->ask_ms = now + FOLLOW_ASK_MS;
        PQclear(tc_db_exec(c, "SELECT pg_notify('toolcage_follow', $1)", 1, ask));
    }
    char seq[16];
    snprintf(seq, sizeof(seq), "%d", f->seq);
    const char *p[] = {f->id, seq};
    PGresult *r = tc_db_exec(c,
                             "SELECT seq, stream, text, out_bytes, err_bytes FROM execution_output"
                             " WHERE execution_id = $1::uuid AND seq >= $2::int ORDER BY seq"
                             " LIMIT 500",
                             2, p);
    tc_db_release(f->db, c);
    for (int i = 0; r && i < PQntuples(r); i++) {
        int k = strcmp(PQgetvalue(r, i, 1), "stderr") == 0;
        const char *text = PQgetvalue(r, i, 2);
        size_t n = (size_t)PQgetlength(r, i, 2);
        size_t o = (size_t)strtoull(PQgetvalue(r, i, 3), NULL, 10);
        size_t er = (size_t)strtoull(PQgetvalue(r, i, 4), NULL, 10);
        size_t end = k ? er : o, *have = k ? &f->err : &f->out;
        f->seq = atoi(PQgetvalue(r, i, 0)) + 1;
        if (end <= *have)
            continue; /* had it (Last-Event-ID) */
        if (end - n > *have || n > end) {
            f->gap = true;
            break;
        }
        size_t skip = *have - (end - n);
        while (skip < n && ((unsigned char)text[skip] & 0xc0) == 0x80)
            skip++; /* never half a character */
        *have = end;
        (void)push_text(e, NULL, names[k], text + skip, n - skip, f->out, f->err);
    }
    PQclear(r);
}

static bool follow_poll(struct tc_events *e, void *ud)
{
    struct follow *f = ud;
    int64_t now = tc_now_ms();
    follow_output(e, f, now);
    if (now < f->next_ms)
        return false;
    f->next_ms = now + FOLLOW_POLL_MS;
    json_t *view = NULL;
    int rc = tc_api_execution_load(f->db, f->tenant, f->id, &view);
    if (rc == -ENOENT) {
        tc_events_close(e);
        return true;
    }
    if (rc < 0)
        return false; /* the database is away: try again */
    const char *status = json_string_value(json_object_get(view, "status"));
    if (status && strcmp(status, f->status) != 0) {
        if (strcmp(f->status, "pending_approval") == 0 &&
            json_is_string(json_object_get(view, "approval_status")) &&
            strcmp(json_string_value(json_object_get(view, "approval_status")), "approved") == 0) {
            json_t *d = json_pack("{s:s, s:O}", "status", status, "approval_id",
                                  json_object_get(view, "approval_id"));
            if (d)
                (void)tc_events_push(e, "approved", NULL, d, true);
            json_decref(d);
        }
        snprintf(f->status, sizeof(f->status), "%s", status ? status : "");
    }
    bool over = tc_api_execution_terminal(status);
    if (over)
        push_end(e, NULL, view, &f->out, &f->err, NULL);
    json_decref(view);
    return over;
}

int tc_exec_stream_follow(struct tc_events *e, struct tc_db *db, const char *tenant_id,
                          const char *exec_id, const char *status, size_t out, size_t err)
{
    struct follow *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->db = db;
    snprintf(f->tenant, sizeof(f->tenant), "%s", tenant_id);
    snprintf(f->id, sizeof(f->id), "%s", exec_id);
    snprintf(f->status, sizeof(f->status), "%s", status);
    f->out = out;
    f->err = err;
    f->next_ms = tc_now_ms() + FOLLOW_POLL_MS / 4;
    int r = tc_events_watch(e, follow_poll, free, f);
    if (r < 0)
        free(f);
    return r;
}

enum MHD_Result tc_exec_stream_respond(struct tc_request *r, struct tc_events *e,
                                       const char *last_id, bool watched)
{
    struct MHD_Response *resp =
        tc_events_response_hb(e, r->conn, last_id, watched ? TC_STREAM_GONE_HEARTBEAT_MS : 0);
    if (!resp)
        return tc_respond_problem(r, 503, "overloaded", "Too many readers", NULL,
                                  "too many connections read this execution's events");
    return tc_http_queue(r, 200, resp);
}

/* ---- GET /v1/executions/{id}/events ---- */

/* "O-E" as this file writes it, or "end". */
static bool parse_last_id(const char *s, size_t *out, size_t *err, bool *end)
{
    *out = *err = 0;
    *end = false;
    if (!s)
        return true;
    if (strcmp(s, "end") == 0)
        return (*end = true);
    char *p;
    errno = 0;
    if (!isdigit((unsigned char)s[0]))
        return false;
    uintmax_t a = strtoumax(s, &p, 10);
    if (errno || *p != '-' || !isdigit((unsigned char)p[1]) || a > (1ull << 40))
        return false;
    uintmax_t b = strtoumax(p + 1, &p, 10);
    if (errno || *p || b > (1ull << 40))
        return false;
    *out = (size_t)a;
    *err = (size_t)b;
    return true;
}

enum MHD_Result tc_api_execution_events(struct tc_request *r)
{
    const char *id = r->params[0];
    if (!tc_uuid_valid(id))
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    const char *last = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
    size_t out, err;
    bool end;
    if (last && (strlen(last) > 40 || !parse_last_id(last, &out, &err, &end)))
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "Last-Event-ID must be an id this stream sent (\"O-E\" or "
                                  "\"end\")");
    (void)parse_last_id(last, &out, &err, &end);
    /* The tenant's own, or not found: the database decides, before any log is read. */
    json_t *view = NULL;
    int rc = tc_api_execution_load(r->srv->db, r->principal.tenant_id, id, &view);
    if (rc == -ENOENT)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    if (rc < 0)
        return tc_respond_db_down(r);
    enum MHD_Result ret;
    struct tc_events *e = tc_events_find(id);
    if (e) { /* running here, or just finished: the live log */
        ret = tc_exec_stream_respond(r, e, last, false);
        tc_events_unref(e);
        json_decref(view);
        return ret;
    }
    const char *status = json_string_value(json_object_get(view, "status"));
    if (tc_events_new(id, LOG_CAP_MAX, false, &e) < 0) {
        json_decref(view);
        return tc_respond_problem(r, 503, "overloaded", "Too many event streams", NULL,
                                  "too many event streams are open; retry later");
    }
    if (end) {
        tc_events_close(e);
    } else if (tc_api_execution_terminal(status)) {
        push_end(e, NULL, view, &out, &err, NULL);
    } else {
        json_t *d = json_pack("{s:s, s:s, s:O?}", "id", id, "status", status, "approval_id",
                              json_object_get(view, "approval_id"));
        if (d)
            (void)tc_events_push(e, "execution", NULL, d, true);
        json_decref(d);
        if (tc_exec_stream_follow(e, r->srv->db, r->principal.tenant_id, id, status, out, err) < 0)
            tc_events_close(e);
    }
    json_decref(view);
    ret = tc_exec_stream_respond(r, e, NULL, false);
    tc_events_unref(e);
    return ret;
}
