#include "server/http.h"
#include "server/slotq.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/util.h"
#include "policy/policy.h"
#include "core/db.h"
#include "server/http_guard.h"
#include "core/log.h"
#include "core/metrics.h"

#define PROBLEM_PREFIX "urn:toolcage:problem:"
#define IDLE_TIMEOUT_S 30 /* libmicrohttpd's idle timeout; also a kept-alive connection's wait */
#define HEAD_SPAN_MAX  (1 << 20) /* no request head spans more of the read buffer than this */

struct tc_policy *tc_server_policy(struct tc_server *srv)
{
    pthread_mutex_lock(&srv->policy_lock);
    struct tc_policy *p = tc_policy_ref(srv->policy);
    pthread_mutex_unlock(&srv->policy_lock);
    return p;
}

void tc_server_set_policy(struct tc_server *srv, struct tc_policy *p)
{
    pthread_mutex_lock(&srv->policy_lock);
    struct tc_policy *old = srv->policy;
    srv->policy = p;
    pthread_mutex_unlock(&srv->policy_lock);
    tc_policy_unref(old);
}

static void add_common_headers(struct tc_request *r, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    if (!MHD_get_response_header(resp, "Cache-Control")) /* a handler may set its own */
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
}

enum MHD_Result tc_http_queue(struct tc_request *r, unsigned status, struct MHD_Response *resp)
{
    if (!resp)
        return MHD_NO;
    add_common_headers(r, resp);
    /* Every "try again later" says when (a handler may have set its own value). */
    if ((status == 503 || status == 429) && !MHD_get_response_header(resp, "Retry-After"))
        MHD_add_response_header(resp, "Retry-After", status == 503 ? "1" : "60");
    if (r->preference_applied && status >= 200 && status < 300)
        MHD_add_response_header(resp, "Preference-Applied", r->preference_applied);
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result tc_respond_text(struct tc_request *r, unsigned status, const char *content_type,
                                const void *data, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", content_type);
    return tc_http_queue(r, status, resp);
}

enum MHD_Result tc_respond_bytes(struct tc_request *r, unsigned status, const char *content_type,
                                 void *data, size_t len, const char *extra_name,
                                 const char *extra_value)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", content_type);
    if (extra_name)
        MHD_add_response_header(resp, extra_name, extra_value);
    return tc_http_queue(r, status, resp);
}

enum MHD_Result tc_respond_json_ex(struct tc_request *r, unsigned status, json_t *body,
                                   const char *content_type, const char *extra_name,
                                   const char *extra_value)
{
    if (r->reply_filter)
        return r->reply_filter(r, status, body, content_type);
    char *s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    if (!s)
        return MHD_NO;
    size_t len = strlen(s);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, s, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", content_type);
    if (extra_name)
        MHD_add_response_header(resp, extra_name, extra_value);
    return tc_http_queue(r, status, resp);
}

enum MHD_Result tc_respond_json(struct tc_request *r, unsigned status, json_t *body)
{
    return tc_respond_json_ex(r, status, body, "application/json", NULL, NULL);
}

static enum MHD_Result vproblem(struct tc_request *r, unsigned status, const char *slug,
                                const char *title, json_t *errors, const char *extra_name,
                                const char *extra_value, const char *fmt, va_list ap)
    __attribute__((format(printf, 8, 0)));
static enum MHD_Result vproblem(struct tc_request *r, unsigned status, const char *slug,
                                const char *title, json_t *errors, const char *extra_name,
                                const char *extra_value, const char *fmt, va_list ap)
{
    char detail[512];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    char type[96];
    snprintf(type, sizeof(type), PROBLEM_PREFIX "%s", slug);
    json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", title, "status",
                          (int)status, "detail", detail, "request_id", r->request_id);
    if (!o) {
        json_decref(errors);
        return MHD_NO;
    }
    if (errors)
        json_object_set_new(o, "errors", errors);
    return tc_respond_json_ex(r, status, o, "application/problem+json", extra_name, extra_value);
}

enum MHD_Result tc_respond_problem(struct tc_request *r, unsigned status, const char *type_slug,
                                   const char *title, json_t *errors, const char *detail_fmt, ...)
{
    va_list ap;
    va_start(ap, detail_fmt);
    enum MHD_Result ret = vproblem(r, status, type_slug, title, errors, NULL, NULL, detail_fmt, ap);
    va_end(ap);
    return ret;
}

enum MHD_Result tc_respond_problem_header(struct tc_request *r, unsigned status, const char *slug,
                                          const char *title, const char *hname, const char *hvalue,
                                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result ret = vproblem(r, status, slug, title, NULL, hname, hvalue, fmt, ap);
    va_end(ap);
    return ret;
}

enum MHD_Result tc_respond_db_down(struct tc_request *r)
{
    return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                              "the database is not reachable");
}

json_t *tc_request_json(struct tc_request *r, enum MHD_Result *ret_result)
{
    if (r->body.len == 0) {
        *ret_result = tc_respond_problem(r, 400, "invalid-json", "Malformed JSON", NULL,
                                         "the request body is empty; a JSON object is expected");
        return NULL;
    }
    if (!tc_utf8_valid(r->body.data, r->body.len, true)) {
        *ret_result = tc_respond_problem(r, 400, "invalid-encoding", "Invalid encoding", NULL,
                                         "the request body is not valid UTF-8");
        return NULL;
    }
    json_error_t err;
    /* NUL is allowed by the parser so that the validator can name the field that holds it. */
    json_t *j = json_loadb(r->body.data, r->body.len,
                           JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &err);
    if (!j) {
        *ret_result = tc_respond_problem(r, 400, "invalid-json", "Malformed JSON", NULL,
                                         "line %d, column %d: %s", err.line, err.column, err.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        *ret_result = tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                         "the request body must be a JSON object");
        return NULL;
    }
    return j;
}

bool tc_server_begin(struct tc_server *srv)
{
    pthread_rwlock_rdlock(&srv->run_lock);
    if (!srv->stopping)
        return true;
    pthread_rwlock_unlock(&srv->run_lock);
    return false;
}

void tc_server_end(struct tc_server *srv)
{
    pthread_rwlock_unlock(&srv->run_lock);
}

void tc_server_set_stopping(struct tc_server *srv)
{
    pthread_rwlock_wrlock(&srv->run_lock);
    srv->stopping = true;
    pthread_rwlock_unlock(&srv->run_lock);
}

void tc_request_suspend(struct tc_request *r, tc_handler resume)
{
    r->srv->suspended++;
    r->resume = resume;
    MHD_suspend_connection(r->conn);
}

void tc_request_resume(struct tc_request *r)
{
    MHD_resume_connection(r->conn);
}

const char *tc_request_query(struct tc_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- routing ---- */

struct header_count {
    const char *name;
    int n;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    struct header_count *hc = cls;
    (void)kind;
    (void)value;
    if (strcasecmp(key, hc->name) == 0)
        hc->n++;
    return MHD_YES;
}

int tc_request_header_count(struct tc_request *r, const char *name)
{
    struct header_count hc = {name, 0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_header, &hc);
    return hc.n;
}

/* libmicrohttpd's unescaping, except that %00 stays as it is: a decoded NUL would cut the
 * path or a query value short where C strings end ("/healthz%00junk" would be "/healthz"). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    char *out = s;
    for (const char *in = s; *in;) {
        int hi, lo;
        if (in[0] == '%' && (hi = tc_hexval(in[1])) >= 0 && (lo = tc_hexval(in[2])) >= 0 &&
            (hi | lo) != 0) {
            *out++ = (char)(hi << 4 | lo);
            in += 3;
        } else {
            *out++ = *in++;
        }
    }
    *out = '\0';
    return (size_t)(out - s);
}

static void free_params(struct tc_request *r)
{
    for (size_t i = 0; i < TC_ARRAY_SIZE(r->params); i++) {
        free(r->params[i]);
        r->params[i] = NULL;
    }
}

/* Match "/v1/executions/{}" against a path ("{}" one segment, a final "{*}" the rest, at
 * least one byte); fills r->params on success. */
static bool match(const char *pattern, const char *path, struct tc_request *r)
{
    size_t np = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (p[0] == '{' && p[1] == '*' && p[2] == '}' && p[3] == '\0') {
            /* the rest of the path, '/' included (a file's path) */
            if (np >= TC_ARRAY_SIZE(r->params))
                return false;
            if (r) {
                free(r->params[np]);
                r->params[np] = strdup(s);
            }
            return true;
        }
        if (p[0] == '{' && p[1] == '}') {
            const char *end = strchr(s, '/');
            size_t len = end ? (size_t)(end - s) : strlen(s);
            if (len == 0 || np >= TC_ARRAY_SIZE(r->params))
                return false;
            if (r) {
                free(r->params[np]);
                r->params[np] = strndup(s, len);
            }
            np++;
            s += len;
            p += 2;
            continue;
        }
        if (*p != *s)
            return false;
        p++;
        s++;
    }
    return *p == '\0' && *s == '\0';
}

/* The route for r among srv->routes, its group, and in allow the methods the path has. A
 * literal path wins over a template, as in OpenAPI: /v1/audit/hash is that path (POST only,
 * so GET is 405), never the record {seq} = "hash". */
static const struct tc_route *route_find(struct tc_request *r,
                                         const struct tc_route_group **ret_group, char *allow,
                                         size_t allow_size)
{
    for (int templated = 0; templated <= 1 && !allow[0]; templated++)
        for (const struct tc_route_group *const *g = r->routes; g && *g; g++)
            for (const struct tc_route *rt = (*g)->routes; rt->method; rt++) {
                if ((strstr(rt->pattern, "{}") != NULL) != templated ||
                    !match(rt->pattern, r->path, NULL))
                    continue;
                if (strcmp(rt->method, r->method) == 0) {
                    *ret_group = *g;
                    return rt;
                }
                size_t n = strlen(allow);
                snprintf(allow + n, allow_size - n, "%s%s", n ? ", " : "", rt->method);
            }
    return NULL;
}

static enum MHD_Result not_found(struct tc_request *r)
{
    for (const struct tc_route_group *const *g = r->routes; g && *g; g++)
        if ((*g)->not_found && (*g)->prefix[0] &&
            strncmp(r->path, (*g)->prefix, strlen((*g)->prefix)) == 0)
            return (*g)->not_found(r);
    return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such resource");
}

static enum MHD_Result dispatch(struct tc_request *r)
{
    const struct tc_route_group *group = NULL;
    char allow[128] = "";
    const struct tc_route *found = route_find(r, &group, allow, sizeof(allow));
    if (!found) {
        if (allow[0])
            return tc_respond_problem_header(r, 405, "method-not-allowed", "Method not allowed",
                                             "Allow", allow, "%s is not allowed here; allowed: %s",
                                             r->method, allow);
        return not_found(r);
    }
    match(found->pattern, r->path, r);
    r->route = found->pattern;
    if (r->body_too_large)
        return tc_respond_problem(r, 413, "body-too-large", "Request body too large", NULL,
                                  "the body exceeds %lld bytes",
                                  (long long)r->srv->cfg->max_body_bytes);
    return group->dispatch(r, found); /* who is calling, and may they: the group decides */
}

/* ---- MHD callbacks ---- */

static void request_free(struct tc_request *r)
{
    if (!r)
        return;
    if (r->state_free)
        r->state_free(r->state);
    free(r->gone_ud);
    if (r->reply_ctx_free)
        r->reply_ctx_free(r->reply_ctx);
    free_params(r);
    tc_buf_free(&r->body);
    free(r->path);
    free(r);
}

static bool request_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

/* libmicrohttpd 0.9.75 keeps the request line and the headers as C strings in its read
 * buffer, so a raw NUL byte cuts what the handler sees ("GET /healthz\0junk" arrives as
 * /healthz, "Authorization: Bearer <key>\0junk" as the key alone). A proxy in front may read
 * the whole line; refuse rather than disagree with it. The buffer after parsing is
 *   METHOD \0 [spaces] TARGET \0 VERSION \0 [\0]   (CRLF, or a bare LF, become NUL bytes)
 *   NAME \0 [spaces] VALUE \0 [\0]   ... one per header line ...   \0 [\0]
 * so anything but NUL bytes between the end of one string and the start of the next means
 * the client sent a NUL (or folded a header line: refused too, RFC 9112 5.2). raw_uri_len is
 * strlen() of the target as the URI log callback saw it, before '?' and escapes were cut out.
 * Returns NULL, or why the head is refused. */
struct head_walk {
    const char *prev_end; /* end of the previous header's value */
    bool bad;
};

static bool only_nul(const char *from, const char *to, size_t min, size_t max)
{
    if ((uintptr_t)to < (uintptr_t)from || (uintptr_t)to - (uintptr_t)from < min ||
        (uintptr_t)to - (uintptr_t)from > max)
        return false;
    for (const char *p = from; p < to; p++)
        if (*p)
            return false;
    return true;
}

static enum MHD_Result walk_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    struct head_walk *w = cls;
    (void)kind;
    (void)key_size;
    /* a header line ends with one or two NUL bytes, and the next one starts right after */
    if (w->prev_end && !only_nul(w->prev_end, key, 1, 2))
        w->bad = true;
    w->prev_end = value + value_size;
    return w->bad ? MHD_NO : MHD_YES;
}

static const char *head_nul(struct tc_request *r, const char *method, const char *url,
                            const char *version)
{
    uintptr_t m = (uintptr_t)method, u = (uintptr_t)url, v = (uintptr_t)version;
    /* all three point into the read buffer when the line had a target and a version; when
     * they do not (a static "" from libmicrohttpd), libmicrohttpd refused the line itself */
    if (!(m < u && u < v && v - m <= HEAD_SPAN_MAX))
        return NULL;
    const char *mend = method + strlen(method);
    if ((uintptr_t)mend >= u || *mend != '\0')
        return "the request line contains a NUL byte";
    for (const char *p = mend + 1; (uintptr_t)p < u; p++)
        if (*p != ' ')
            return "the request line contains a NUL byte";
    if (v - 1 - u != r->raw_uri_len)
        return "the request target contains a NUL byte";
    struct head_walk w = {0};
    MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, walk_header, &w);
    if (w.bad)
        return "a header contains a NUL byte, or a header line is folded";
    /* After the last line (a header's, or the request line's): its end and the empty line,
     * two to four NUL bytes up to where libmicrohttpd says the head ends. A line that starts
     * with a NUL byte would have ended the head early, and its rest, like a folded line's,
     * would lie in between. */
    const union MHD_ConnectionInfo *hs =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    const char *last = w.prev_end ? w.prev_end : version + strlen(version);
    if (hs && (hs->header_size > HEAD_SPAN_MAX || !only_nul(last, method + hs->header_size, 2, 4)))
        return "a header contains a NUL byte, or a header line is folded";
    return NULL;
}

/* The request line is in (MHD_OPTION_URI_LOG_CALLBACK): the request starts here. Its
 * result becomes the request's context, *con_cls of on_request and on_completed. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    const struct tc_listener *l = cls;
    struct tc_server *srv = l->srv;
    struct tc_request *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL; /* on_request then refuses it */
    r->srv = srv;
    srv->requests++; /* (on_completed: every request whose line came in completes) */
    r->conn = conn;
    r->routes = l->routes; /* the listener's own: the health listener's has health alone */
    r->line_us = tc_now_us();
    r->start_ms = r->line_us / 1000;
    r->raw_uri_len = strlen(uri);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->gconn = ci ? ci->socket_context : NULL;
    tc_http_guard_request_line(srv->guard, r->gconn);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct tc_server *srv = cls;
    struct tc_request *r = *con_cls;
    if (!r)
        return MHD_NO; /* on_request_line could not allocate it */
    if (!r->started) {
        r->started = true;
        tc_http_guard_headers_done(srv->guard, r->gconn);
        r->method = method;
        r->path = strdup(url);
        tc_buf_init(&r->body, (size_t)srv->cfg->max_body_bytes);
        const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
        if (rid && request_id_ok(rid))
            snprintf(r->request_id, sizeof(r->request_id), "%s", rid);
        else
            tc_uuid7(r->request_id);
        if (!r->path)
            return MHD_NO;
        const char *nul = head_nul(r, method, url, version);
        if (nul) {
            r->body_done = true;
            tc_http_guard_handling(srv->guard, r->gconn);
            return tc_respond_problem_header(r, 400, "bad-request", "Bad request", "Connection",
                                             "close", "%s", nul);
        }
        /* Request smuggling: where a proxy in front and libmicrohttpd could disagree on where
         * the body ends (two Content-Length headers, or one with Transfer-Encoding), refuse
         * and close the connection rather than pick one (RFC 9112 6.3). */
        int ncl = tc_request_header_count(r, "Content-Length"),
            nte = tc_request_header_count(r, "Transfer-Encoding");
        if (ncl > 1 || (ncl && nte)) {
            r->body_done = true;
            tc_http_guard_handling(srv->guard, r->gconn);
            return tc_respond_problem_header(
                r, 400, "bad-request", "Bad request", "Connection", "close",
                ncl > 1 ? "send exactly one Content-Length header"
                        : "send Content-Length or Transfer-Encoding, not both");
        }
        /* Refuse a declared oversize body before reading it. */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        int64_t n;
        if (cl && tc_parse_i64(cl, 0, INT64_MAX, &n) == 0 && n > srv->cfg->max_body_bytes) {
            r->body_too_large = true;
            r->body_done = true;
            tc_http_guard_handling(srv->guard, r->gconn);
            return tc_respond_problem(r, 413, "body-too-large", "Request body too large", NULL,
                                      "the body exceeds %lld bytes",
                                      (long long)srv->cfg->max_body_bytes);
        }
        return MHD_YES;
    }
    if (r->resume) {
        tc_handler h = r->resume;
        r->resume = NULL;
        srv->suspended--;
        return h(r);
    }
    if (*upload_data_size > 0) {
        tc_http_guard_body(srv->guard, r->gconn, *upload_data_size);
        if (!r->body_too_large && tc_buf_append(&r->body, upload_data, *upload_data_size) < 0)
            r->body_too_large = true;
        if (r->body_too_large)
            tc_buf_free(&r->body); /* drain and drop: memory stays bounded */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->body_done)
        return MHD_NO; /* a response was already queued */
    r->body_done = true;
    tc_http_guard_handling(srv->guard, r->gconn);
    return dispatch(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct tc_server *srv = cls;
    struct tc_request *r = *con_cls;
    if (!r)
        return;
    tc_http_guard_completed(srv->guard, r->gconn);
    if (r->on_gone && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK &&
        toe != MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN)
        r->on_gone(r, r->gone_ud);
    if (r->slot_wait == TC_SLOT_GRANTED) /* resumed for a slot, ended before trying for it */
        tc_slotq_tried();
    if (r->started) {
        tc_metrics_request(r->route ? r->route : "unmatched", r->status, tc_now_ms() - r->start_ms);
        tc_log(r->status >= 500 ? TC_LOG_WARN : TC_LOG_INFO, "request",
               "{s:s, s:s, s:s, s:i, s:I, s:s, s:b}", "request_id", r->request_id, "method",
               r->method ? r->method : "", "path", r->path ? r->path : "", "status", (int)r->status,
               "duration_ms", (json_int_t)(tc_now_ms() - r->start_ms), "tenant",
               r->principal.tenant_name, "completed", toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    } else {
        /* refused by libmicrohttpd before the handler saw it (431, 414, a bad header line),
         * or the client left, or was cut off (http_guard.h), in the middle of its head */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
        tc_log(TC_LOG_DEBUG, "request head not accepted", "{s:i, s:I}", "status",
               ci ? (int)ci->http_status : 0, "duration_ms",
               (json_int_t)(tc_now_ms() - r->start_ms));
    }
    request_free(r);
    *con_cls = NULL;
    srv->requests--;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct tc_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? tc_http_guard_open(srv->guard, ci->connect_fd) : NULL;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        tc_http_guard_close(srv->guard, *socket_context);
        *socket_context = NULL;
    }
}

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    tc_log(TC_LOG_DEBUG, "libmicrohttpd", "{s:s}", "detail", msg);
}

static void set_port(struct sockaddr *sa, uint16_t port)
{
    if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)(void *)sa)->sin_port = htons(port);
}

/* A listener: every request of it handled alike, with its own routes (l); threads 1: one
 * internal thread, more: a pool. */
static struct MHD_Daemon *start_daemon(struct tc_server *srv, unsigned flags,
                                       const struct sockaddr *sa, struct tc_listener *l,
                                       unsigned threads, unsigned max_connections)
{
    uint16_t port =
        ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port
                                        : ((const struct sockaddr_in *)(const void *)sa)->sin_port);
    return MHD_start_daemon(
        flags, port, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL,
        MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, srv, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, l, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, srv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, max_connections,
        /* one client address cannot take all the slots (idle sockets, slow headers) */
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)srv->cfg->max_connections_per_ip,
        MHD_OPTION_END);
}

int tc_http_start(struct tc_server *srv, char **ret_error)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV},
                    *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", srv->cfg->listen_port);
    int rc = getaddrinfo(srv->cfg->listen_host, port, &hints, &ai);
    if (rc != 0) {
        if (ret_error)
            *ret_error = strdup(gai_strerror(rc));
        return -EINVAL;
    }
    struct tc_http_guard_limits lim = {.header_ms = srv->cfg->http_header_timeout_ms,
                                       .idle_ms = IDLE_TIMEOUT_S * 1000,
                                       .min_rate = srv->cfg->http_body_min_rate,
                                       .max_body = srv->cfg->max_body_bytes};
    rc = tc_http_guard_new(&lim, &srv->guard);
    if (rc < 0) {
        freeaddrinfo(ai);
        if (ret_error)
            *ret_error = strdup("cannot start the connection guard");
        return rc;
    }
    srv->listen_api = (struct tc_listener){.srv = srv, .routes = srv->routes};
    srv->listen_health = (struct tc_listener){.srv = srv, .routes = srv->health_routes};
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    srv->mhd =
        start_daemon(srv, flags, ai->ai_addr, &srv->listen_api, (unsigned)srv->cfg->threads, 1000);
    if (srv->mhd && srv->cfg->health_port > 0 && srv->health_routes) {
        /* one thread, the same request handling, only the health routes (tc_server) */
        set_port(ai->ai_addr, (uint16_t)srv->cfg->health_port);
        srv->health_mhd = start_daemon(srv, flags, ai->ai_addr, &srv->listen_health, 1, 64);
        if (!srv->health_mhd) {
            MHD_stop_daemon(srv->mhd);
            srv->mhd = NULL;
        }
    }
    freeaddrinfo(ai);
    if (!srv->mhd) {
        tc_http_guard_free(srv->guard);
        srv->guard = NULL;
        if (ret_error)
            *ret_error = strdup("cannot listen (address in use or not available)");
        return -EADDRINUSE;
    }
    return 0;
}

void tc_http_stop(struct tc_server *srv)
{
    if (!srv->mhd)
        return;
    MHD_stop_daemon(srv->mhd);
    srv->mhd = NULL;
    if (srv->health_mhd)
        MHD_stop_daemon(srv->health_mhd);
    srv->health_mhd = NULL;
    tc_http_guard_free(srv->guard); /* after the daemon: its close notifications use it */
    srv->guard = NULL;
}

struct prefer_scan {
    const char *token;
    bool found;
};

static enum MHD_Result prefer_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    struct prefer_scan *p = cls;
    (void)kind;
    if (!key || strcasecmp(key, "Prefer") != 0 || !value)
        return MHD_YES;
    size_t tl = strlen(p->token);
    /* preference *( ";" parameter ) *( "," preference ... ): a token ends at '=', ';', ','
     * or white space; values may be quoted strings (with \-escapes), whose commas are not
     * separators */
    for (const char *s = value; *s;) {
        s += strspn(s, " \t,");
        size_t n = strcspn(s, "=;, \t\"");
        if (n == tl && strncasecmp(s, p->token, tl) == 0)
            p->found = true;
        bool quoted = false;
        for (; *s && (quoted || *s != ','); s++) {
            if (*s == '"')
                quoted = !quoted;
            else if (quoted && *s == '\\' && s[1])
                s++;
        }
    }
    return MHD_YES;
}

bool tc_request_prefers(struct tc_request *r, const char *token)
{
    struct prefer_scan p = {.token = token};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, prefer_header, &p);
    return p.found;
}
