/* Console HTTP glue: session authentication, CSRF and Origin checks, form parsing, page
 * rendering with the security headers, sign-in and sign-out, the stylesheet. */
#include <arpa/inet.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/embedded.h"
#include "common/util.h"
#include "console/render.h"
#include "console/web.h"
#include "core/db.h"
#include "core/log.h"

#define SESSION_COOKIE   "tc_session"
#define PRESIGNIN_COOKIE "tc_signin"
#define CSS_PATH         "console/static/console.css"
#define MAX_FORM_FIELDS  32

/* No script at all: every action is a form POST. */
#define CSP                                                                                        \
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self';"              \
    " frame-ancestors 'none'; base-uri 'none'"

void tc_console_headers(struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "Content-Security-Policy", CSP);
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    /* same-origin, not no-referrer: with no-referrer browsers send "Origin: null" on form
     * POSTs, and the Origin check below needs the real one. */
    MHD_add_response_header(resp, "Referrer-Policy", "same-origin");
    MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
    MHD_add_response_header(resp, "Permissions-Policy", "camera=(), microphone=(), geolocation=()");
}

/* Browsers keep Secure cookies off plain http, except to loopback addresses, which they treat
 * as secure origins: a server on loopback (a developer's, the browser tests') works over
 * plain HTTP; any other listener is meant to be reached through TLS. */
static bool listens_on_loopback(const char *host)
{
    unsigned char a[16];
    if (!host)
        return false;
    if (strcasecmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, a) == 1)
        return a[0] == 127;
    if (inet_pton(AF_INET6, host, a) == 1) {
        static const unsigned char one[16] = {[15] = 1};
        static const unsigned char v4mapped[12] = {[10] = 0xff, [11] = 0xff};
        return memcmp(a, one, 16) == 0 || (memcmp(a, v4mapped, 12) == 0 && a[12] == 127);
    }
    return false;
}

void tc_console_cookie(struct tc_request *r, char *out, size_t size, const char *name,
                       const char *value)
{
    int mode = tc_console_settings()->cookie_secure;
    bool secure = mode > 0 || (mode < 0 && !listens_on_loopback(r->srv->cfg->listen_host));
    if (value)
        snprintf(out, size, "%s=%s; Path=/console; HttpOnly; SameSite=Strict%s", name, value,
                 secure ? "; Secure" : "");
    else
        snprintf(out, size, "%s=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0%s", name,
                 secure ? "; Secure" : "");
}

const char *tc_console_home_of(enum tc_role role)
{
    return role == TC_ROLE_AUDITOR ? "/console/dashboard" : "/console/approvals";
}

void tc_console_duration(long long s, char *out, size_t size)
{
    if (s <= 0)
        snprintf(out, size, "expired");
    else if (s < 60)
        snprintf(out, size, "%lld s", s);
    else if (s < 3600)
        snprintf(out, size, "%lld min", s / 60);
    else if (s < 86400)
        snprintf(out, size, "%lld h %lld min", s / 3600, (s % 3600) / 60);
    else
        snprintf(out, size, "%lld d %lld h", s / 86400, (s % 86400) / 3600);
}

/* ---- static ---- */

static char css_version[17];
static pthread_once_t css_once = PTHREAD_ONCE_INIT;
static void css_init(void)
{
    const struct tc_embedded *e = tc_embedded_find(CSS_PATH);
    unsigned char h[8] = {0};
    if (e)
        crypto_generichash(h, sizeof(h), e->data, e->len, NULL, 0);
    sodium_bin2hex(css_version, sizeof(css_version), h, sizeof(h));
}

enum MHD_Result tc_console_static(struct tc_request *r)
{
    const struct tc_embedded *e = tc_embedded_find(CSS_PATH);
    if (!e)
        return tc_console_not_found(r);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(e->len, (void *)e->data, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "text/css; charset=utf-8");
    /* The page links it as ?v=<hash of the content>, so a new build is a new URL. */
    MHD_add_response_header(resp, "Cache-Control", "public, max-age=31536000, immutable");
    tc_console_headers(resp);
    return tc_http_queue(r, 200, resp);
}

/* ---- responses ---- */

static enum MHD_Result queue_html(struct tc_request *r, unsigned status, char *html, size_t len,
                                  const char *cookie1, const char *cookie2)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, html, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(html);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
    tc_console_headers(resp);
    if (cookie1)
        MHD_add_response_header(resp, "Set-Cookie", cookie1);
    if (cookie2)
        MHD_add_response_header(resp, "Set-Cookie", cookie2);
    return tc_http_queue(r, status, resp);
}

static json_t *common_data(struct tc_request *r)
{
    struct tc_console_ctx *cx = tc_console_ctx(r);
    pthread_once(&css_once, css_init);
    char css[96];
    snprintf(css, sizeof(css), "/console/static/console.css?v=%s", css_version);
    json_t *o = json_pack("{s:s, s:s}", "css", css, "request_id", r->request_id);
    if (cx && cx->user.name[0]) {
        enum tc_role role = cx->user.role;
        json_object_set_new(o, "me",
                            json_pack("{s:s, s:s, s:s}", "name", cx->user.name, "role",
                                      tc_role_name(role), "tenant", cx->user.tenant_name));
        json_object_set_new(o, "csrf", json_string(cx->user.csrf));
        json_object_set_new(o, "nav",
                            json_pack("{s:b, s:b, s:b, s:b, s:b}", "approvals", 1, "executions", 1,
                                      "audit", (role & (TC_ROLE_AUDITOR | TC_ROLE_ADMIN)) != 0,
                                      "dashboard", (role & (TC_ROLE_AUDITOR | TC_ROLE_ADMIN)) != 0,
                                      "admin", role == TC_ROLE_ADMIN));
        json_object_set_new(o, "can_decide",
                            json_boolean((role & (TC_ROLE_REVIEWER | TC_ROLE_ADMIN)) != 0));
    }
    return o;
}

enum MHD_Result tc_console_page(struct tc_request *r, unsigned status, const char *tmpl,
                                json_t *data)
{
    json_t *all = common_data(r);
    if (data)
        json_object_update(all, data); /* the page's own fields win */
    json_decref(data);
    static const char *const titles[][2] = {
        {"approvals", "Approvals"},     {"approval", "Approval"},    {"executions", "Executions"},
        {"execution", "Execution"},     {"audit", "Audit trail"},    {"dashboard", "Dashboard"},
        {"users", "Console users"},     {"secrets", "Secrets"},      {"signin", "Sign in"},
        {"egress_asks", "Egress asks"}, {"egress_ask", "Egress ask"}};
    for (size_t i = 0; i < TC_ARRAY_SIZE(titles) && !json_object_get(all, "title"); i++)
        if (strcmp(tmpl, titles[i][0]) == 0)
            json_object_set_new(all, "title", json_string(titles[i][1]));
    char active[48];
    snprintf(active, sizeof(active), "%s", tmpl);
    json_object_set_new(all, "active", json_pack("{s:b}", active, 1));
    char *html = NULL, *err = NULL;
    size_t len = 0;
    int rc = tc_render(tmpl, all, &html, &len, &err);
    json_decref(all);
    if (rc < 0) {
        tc_log(TC_LOG_ERROR, "console template failed", "{s:s, s:s, s:s}", "request_id",
               r->request_id, "template", tmpl, "error", err ? err : "");
        free(err);
        static const char fallback[] = "<!DOCTYPE html><title>Error</title><p>The page could not"
                                       " be rendered. See the server log.</p>";
        char *copy = strdup(fallback);
        return copy ? queue_html(r, 500, copy, strlen(copy), NULL, NULL) : MHD_NO;
    }
    return queue_html(r, status, html, len, NULL, NULL);
}

enum MHD_Result tc_console_message(struct tc_request *r, unsigned status, const char *title,
                                   const char *message)
{
    return tc_console_page(
        r, status, "message",
        json_pack("{s:s, s:s, s:i}", "title", title, "message", message, "status", (int)status));
}

enum MHD_Result tc_console_redirect(struct tc_request *r, const char *location, const char *cookie1,
                                    const char *cookie2)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Location", location);
    tc_console_headers(resp);
    if (cookie1)
        MHD_add_response_header(resp, "Set-Cookie", cookie1);
    if (cookie2)
        MHD_add_response_header(resp, "Set-Cookie", cookie2);
    return tc_http_queue(r, 303, resp);
}

enum MHD_Result tc_console_not_found(struct tc_request *r)
{
    return tc_console_message(r, 404, "Not found", "There is no such page.");
}

/* ---- forms ---- */

/* application/x-www-form-urlencoded -> object of strings. NULL on malformed input
 * (bad escapes, invalid UTF-8, NUL, duplicate or too many fields). */
static json_t *parse_form(const char *s, size_t len)
{
    json_t *o = json_object();
    const char *end = s + len;
    while (o && s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        const char *fe = amp ? amp : end;
        const char *eq = memchr(s, '=', (size_t)(fe - s));
        if (fe > s) {
            char *kv[2] = {NULL, NULL};
            size_t kvlen[2] = {0, 0};
            const char *parts[2][2] = {{s, eq ? eq : fe}, {eq ? eq + 1 : fe, fe}};
            bool ok = json_object_size(o) < MAX_FORM_FIELDS;
            for (int k = 0; k < 2 && ok; k++) {
                size_t n = (size_t)(parts[k][1] - parts[k][0]);
                kv[k] = malloc(n + 1);
                if (!kv[k]) {
                    ok = false;
                    break;
                }
                size_t o2 = 0;
                for (const char *p = parts[k][0]; p < parts[k][1]; p++) {
                    if (*p == '+') {
                        kv[k][o2++] = ' ';
                    } else if (*p == '%') {
                        if (parts[k][1] - p < 3 || tc_hexval(p[1]) < 0 || tc_hexval(p[2]) < 0) {
                            ok = false;
                            break;
                        }
                        kv[k][o2++] = (char)(tc_hexval(p[1]) * 16 + tc_hexval(p[2]));
                        p += 2;
                    } else {
                        kv[k][o2++] = *p;
                    }
                }
                kv[k][o2] = '\0';
                kvlen[k] = o2;
                if (ok && !tc_utf8_valid(kv[k], o2, false))
                    ok = false;
            }
            /* CRLF in a textarea arrives as %0D%0A: keep text as the user saw it, with \n. */
            if (ok && kv[1]) {
                size_t w = 0;
                for (size_t i = 0; i < kvlen[1]; i++)
                    if (!(kv[1][i] == '\r' && i + 1 < kvlen[1] && kv[1][i + 1] == '\n'))
                        kv[1][w++] = kv[1][i];
                kv[1][w] = '\0';
            }
            if (ok && json_object_get(o, kv[0]))
                ok = false;
            if (ok)
                json_object_set_new(o, kv[0], json_string(kv[1]));
            free(kv[0]);
            free(kv[1]);
            if (!ok) {
                json_decref(o);
                return NULL;
            }
        }
        s = amp ? amp + 1 : end;
    }
    return o;
}

const char *tc_console_form(struct tc_request *r, const char *name)
{
    struct tc_console_ctx *cx = tc_console_ctx(r);
    return cx && cx->form ? json_string_value(json_object_get(cx->form, name)) : NULL;
}

/* ---- dispatch ---- */

static const char *header(struct tc_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static const char *cookie(struct tc_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, name);
}

static void source_of(struct tc_request *r, char *out, size_t size)
{
    snprintf(out, size, "unknown");
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)size);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                  (socklen_t)size);
}

/* The host[:port] part of an http(s) origin or URL, or NULL. */
static const char *authority(const char *url, size_t *ret_len)
{
    const char *p;
    if (strncasecmp(url, "http://", 7) == 0)
        p = url + 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        p = url + 8;
    else
        return NULL;
    *ret_len = strcspn(p, "/?#");
    return p;
}

/* A browser names the page a POST came from (Origin, else Referer): it must be this host.
 * Clients that send neither still need the CSRF token. */
static bool same_origin(struct tc_request *r)
{
    const char *host = header(r, "Host");
    const char *o = header(r, "Origin");
    const char *src = o ? o : header(r, "Referer");
    if (!src)
        return true;
    size_t n = 0;
    const char *a = authority(src, &n);
    return host && a && n == strlen(host) && strncasecmp(a, host, n) == 0;
}

static bool token_equal(const char *a, const char *b)
{
    size_t n = a ? strlen(a) : 0;
    return a && b && n > 0 && n == strlen(b) && sodium_memcmp(a, b, n) == 0;
}

static void ctx_free(void *p)
{
    struct tc_console_ctx *cx = p;
    if (!cx)
        return;
    json_decref(cx->form);
    sodium_memzero(cx, sizeof(*cx));
    free(cx);
}

enum MHD_Result tc_console_dispatch(struct tc_request *r, const struct tc_route *rt)
{
    struct tc_console_ctx *cx = calloc(1, sizeof(*cx));
    if (!cx)
        return MHD_NO;
    r->state = cx;
    r->state_free = ctx_free;
    source_of(r, cx->source, sizeof(cx->source));
    bool post = strcmp(r->method, "POST") == 0;
    if (post) {
        const char *ct = header(r, "Content-Type");
        if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0)
            return tc_console_message(r, 415, "Unsupported form",
                                      "Forms are sent as application/x-www-form-urlencoded.");
        cx->form = parse_form(r->body.data ? r->body.data : "", r->body.len);
        if (!cx->form)
            return tc_console_message(r, 400, "Bad request", "The form could not be read.");
        if (!same_origin(r))
            return tc_console_message(r, 403, "Forbidden",
                                      "This form was sent from another site and was refused.");
    }
    if (!(rt->roles & TC_ROLE_ANY)) /* public: sign-in, the stylesheet */
        return rt->handler(r);

    const char *token = cookie(r, SESSION_COOKIE);
    int rc = -EACCES;
    if (token) {
        PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
        rc = c ? tc_session_get(c, token, &cx->user) : -EIO;
        tc_db_release(r->srv->db, c);
    }
    if (rc == -EIO)
        return tc_console_message(r, 503, "Unavailable", "The database is not reachable.");
    if (rc < 0) {
        char clear[160];
        tc_console_cookie(r, clear, sizeof(clear), SESSION_COOKIE, NULL);
        return tc_console_redirect(r, token ? "/console/signin?expired=1" : "/console/signin",
                                   token ? clear : NULL, NULL);
    }
    snprintf(r->principal.tenant_id, sizeof(r->principal.tenant_id), "%s", cx->user.tenant_id);
    snprintf(r->principal.tenant_name, sizeof(r->principal.tenant_name), "%s",
             cx->user.tenant_name);
    r->principal.role = cx->user.role;
    r->principal.key_id[0] = '\0';
    snprintf(r->principal.person_id, sizeof(r->principal.person_id), "%s", cx->user.person_id);
    if (!(rt->roles & cx->user.role))
        return tc_console_message(r, 403, "Forbidden",
                                  "Your role may not open this page or do this.");
    if (post && !token_equal(tc_console_form(r, "csrf"), cx->user.csrf)) {
        tc_log(TC_LOG_WARN, "console POST without a valid CSRF token", "{s:s, s:s}", "request_id",
               r->request_id, "path", r->path);
        return tc_console_message(r, 403, "Forbidden",
                                  "The form's security token is missing or stale. Reload the"
                                  " page and try again.");
    }
    return rt->handler(r);
}

/* ---- sign-in, sign-out, home ---- */

enum MHD_Result tc_console_home(struct tc_request *r)
{
    return tc_console_redirect(r, tc_console_home_of(tc_console_ctx(r)->user.role), NULL, NULL);
}

static enum MHD_Result signin_page(struct tc_request *r, unsigned status, const char *error,
                                   const char *name, const char *retry_after)
{
    char token[TC_CONSOLE_TOKEN_LEN + 1];
    unsigned char rnd[32];
    randombytes_buf(rnd, sizeof(rnd));
    sodium_bin2base64(token, sizeof(token), rnd, sizeof(rnd),
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    char set[200];
    tc_console_cookie(r, set, sizeof(set), PRESIGNIN_COOKIE, token);
    json_t *data = json_pack("{s:s, s:s, s:s*, s:s, s:b}", "title", "Sign in", "signin_csrf", token,
                             "error", error, "name", name ? name : "", "expired",
                             tc_request_query(r, "expired") != NULL);
    json_t *all = common_data(r);
    json_object_update(all, data);
    json_decref(data);
    char *html = NULL, *err = NULL;
    size_t len = 0;
    int rc = tc_render("signin", all, &html, &len, &err);
    json_decref(all);
    if (rc < 0) {
        tc_log(TC_LOG_ERROR, "console template failed", "{s:s, s:s}", "template", "signin", "error",
               err ? err : "");
        free(err);
        return tc_respond_text(r, 500, "text/plain; charset=utf-8", "error\n", 6);
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, html, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(html);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
    tc_console_headers(resp);
    MHD_add_response_header(resp, "Set-Cookie", set);
    if (retry_after)
        MHD_add_response_header(resp, "Retry-After", retry_after);
    return tc_http_queue(r, status, resp);
}

enum MHD_Result tc_console_signin_form(struct tc_request *r)
{
    /* Signed in already: go home. */
    const char *token = cookie(r, SESSION_COOKIE);
    if (token) {
        PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
        struct tc_console_user u;
        int rc = c ? tc_session_get(c, token, &u) : -EIO;
        tc_db_release(r->srv->db, c);
        if (rc == 0)
            return tc_console_redirect(r, tc_console_home_of(u.role), NULL, NULL);
    }
    return signin_page(r, 200, NULL, NULL, NULL);
}

enum MHD_Result tc_console_signin(struct tc_request *r)
{
    struct tc_console_ctx *cx = tc_console_ctx(r);
    /* Before a session there is no per-session token: the form carries the value of a
     * SameSite=Strict cookie set with it (double submit), and the Origin was checked. */
    if (!token_equal(tc_console_form(r, "csrf"), cookie(r, PRESIGNIN_COOKIE)))
        return signin_page(r, 403, "The sign-in form expired. Please try again.", NULL, NULL);
    const char *name = tc_console_form(r, "name"), *password = tc_console_form(r, "password");
    if (!name || !password || !*name || !*password)
        return signin_page(r, 400, "Enter your name and password.", name, NULL);
    if (strlen(name) > TC_CONSOLE_NAME_MAX || strlen(password) > TC_CONSOLE_PASSWORD_MAX)
        return signin_page(r, 401, "Wrong name or password.", NULL, NULL);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    enum tc_signin_result res = TC_SIGNIN_BAD;
    char token[TC_CONSOLE_TOKEN_LEN + 1];
    struct tc_console_user u;
    int rc =
        c ? tc_session_signin(c, r->srv->keys, name, password, cx->source, &res, token, &u) : -EIO;
    if (rc == -EIO && c)
        tc_log(TC_LOG_ERROR, "console sign-in failed", "{s:s, s:s}", "request_id", r->request_id,
               "error", tc_db_error(c));
    tc_db_release(r->srv->db, c);
    if (rc < 0)
        return tc_console_message(r, 503, "Unavailable",
                                  "Signing in is not possible right now (database).");
    if (res == TC_SIGNIN_THROTTLED) {
        char ra[24];
        snprintf(ra, sizeof(ra), "%lld", (long long)tc_console_settings()->window_seconds);
        tc_log(TC_LOG_WARN, "console sign-in throttled", "{s:s, s:s}", "request_id", r->request_id,
               "source", cx->source);
        return signin_page(r, 429, "Too many failed sign-ins. Try again later.", NULL, ra);
    }
    if (res != TC_SIGNIN_OK)
        return signin_page(r, 401, "Wrong name or password.", name, NULL);
    tc_log(TC_LOG_INFO, "console sign-in", "{s:s, s:s, s:s}", "request_id", r->request_id, "user",
           u.name, "role", tc_role_name(u.role));
    char set[200], clear[160];
    tc_console_cookie(r, set, sizeof(set), SESSION_COOKIE, token);
    tc_console_cookie(r, clear, sizeof(clear), PRESIGNIN_COOKIE, NULL);
    sodium_memzero(token, sizeof(token));
    enum MHD_Result ret = tc_console_redirect(r, tc_console_home_of(u.role), set, clear);
    sodium_memzero(set, sizeof(set));
    return ret;
}

enum MHD_Result tc_console_signout(struct tc_request *r)
{
    struct tc_console_ctx *cx = tc_console_ctx(r);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    int rc =
        c ? tc_session_signout(c, r->srv->keys, cookie(r, SESSION_COOKIE), &cx->user, cx->source)
          : -EIO;
    tc_db_release(r->srv->db, c);
    if (rc < 0)
        return tc_console_message(r, 503, "Unavailable", "Signing out failed (database).");
    char clear[160];
    tc_console_cookie(r, clear, sizeof(clear), SESSION_COOKIE, NULL);
    return tc_console_redirect(r, "/console/signin", clear, NULL);
}
