/* The delivery thread: claims, delivers with a libcurl multi handle, records. See webhook.h. */
#include "server/webhook.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/keys.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"
#include "core/metrics.h"
#include "server/webhook_internal.h"

#define ATTEMPT_TIMEOUT_MS 5000 /* one POST, from the connect to the last byte of the answer */
#define CONNECT_TIMEOUT_MS 2000
#define LEASE_S            60    /* longer than any attempt: a live process never loses a claim */
#define CLAIM_EVERY_MS     500   /* due rows are looked for at least this often */
#define CLAIM_GAP_MS       50    /* and not more often, however many executions finish */
#define SWEEP_EVERY_MS     10000 /* rows left claimed by a process that died on their last try */
#define BACKOFF_MAX_S      3600
#define SCAN_ROWS          "1000" /* due rows looked at per claim */

void tc_webhook_secret(const struct tc_keys *keys, const char *tenant_id, char out[65])
{
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, keys->webhook_key, sizeof(keys->webhook_key));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)tenant_id, strlen(tenant_id));
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_bin2hex(out, 65, mac, sizeof(mac));
}

struct delivery {
    struct tc_webhooks *w;
    CURL *h;
    struct curl_slist *hdrs;
    struct curl_slist *rcpt; /* e-mail: the recipient */
    char id[37], tenant_id[37], kind[16];
    char *body;
    char *mail; /* e-mail: the message, and how much of it libcurl has read */
    size_t mail_len, mail_off;
    int attempt;
    const char *refused; /* set by open_socket: the class of the address it refused */
    char refused_addr[INET6_ADDRSTRLEN];
    char err[CURL_ERROR_SIZE];
    struct delivery *prev, *next;
};

struct tc_webhooks {
    struct tc_webhooks_options o;
    char *database_url;
    char instance[16], lease[16], per_tenant[16], max_attempts[16];
    PGconn *conn;
    bool listening;
    CURLM *multi;
    pthread_t thread;
    _Atomic bool stopping;
    struct delivery *inflight;
    unsigned n_inflight;
};

/* The claim: due rows of tenants below their cap, the earliest first and at most
 * per_tenant - (in flight) per tenant, locked without waiting for rows another process is
 * claiming, then leased to us with the attempt counted.
 * $1 instance, $2 lease seconds, $3 per-tenant cap, $4 how many, $5 max attempts. */
static const char CLAIM_SQL[] =
    "WITH busy AS ("
    "  SELECT e.tenant_id, count(*) AS n"
    "  FROM webhook_deliveries b JOIN executions e ON e.id = b.execution_id"
    "  WHERE b.delivered_at IS NULL AND b.gave_up_at IS NULL AND b.lease_until > now()"
    "  GROUP BY e.tenant_id),"
    " due AS ("
    "  SELECT c.id, c.next_attempt_at,"
    "         row_number() OVER (PARTITION BY c.tenant_id ORDER BY c.next_attempt_at, c.id)"
    "         + c.busy AS slot"
    "  FROM (SELECT w.id, w.next_attempt_at, e.tenant_id, coalesce(busy.n, 0) AS busy"
    "        FROM webhook_deliveries w JOIN executions e ON e.id = w.execution_id"
    "        LEFT JOIN busy ON busy.tenant_id = e.tenant_id"
    "        WHERE w.delivered_at IS NULL AND w.gave_up_at IS NULL"
    "          AND w.next_attempt_at <= now() AND w.attempts < $5::int"
    "          AND (w.lease_until IS NULL OR w.lease_until <= now())"
    "          AND coalesce(busy.n, 0) < $3::int"
    "          AND (w.approval_id IS NULL OR EXISTS (SELECT 1 FROM approvals a"
    "               WHERE a.id = w.approval_id AND a.status = 'pending'))"
    "          AND (w.ask_id IS NULL OR EXISTS (SELECT 1 FROM egress_asks k"
    "               WHERE k.id = w.ask_id AND k.status = 'pending'))"
    "        ORDER BY w.next_attempt_at LIMIT " SCAN_ROWS ") c),"
    " picked AS ("
    "  SELECT w.id FROM webhook_deliveries w JOIN due ON due.id = w.id"
    "  WHERE due.slot <= $3::int AND w.delivered_at IS NULL AND w.gave_up_at IS NULL"
    "    AND (w.lease_until IS NULL OR w.lease_until <= now())"
    "  ORDER BY due.next_attempt_at LIMIT $4::int"
    "  FOR UPDATE OF w SKIP LOCKED)"
    " UPDATE webhook_deliveries d SET lease_until = now() + make_interval(secs => $2::int),"
    "   leased_by = $1::int, attempts = d.attempts + 1, last_attempt_at = now()"
    " FROM picked, executions e"
    " WHERE d.id = picked.id AND e.id = d.execution_id"
    " RETURNING d.id, d.url, d.body::text, d.attempts, e.tenant_id, d.kind";

static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct delivery *d = clientp;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKET_BAD;
    /* The address libcurl is about to connect to, after its DNS lookup: whatever the name
     * resolved to at call time, or resolves to for the next connection, this one is checked. */
    const char *cls = tc_webhook_address_refused(&addr->addr, d->w->o.allow_private);
    if (cls) {
        d->refused = cls;
        const void *a =
            addr->family == AF_INET6
                ? (const void *)&((const struct sockaddr_in6 *)(const void *)&addr->addr)->sin6_addr
                : (const void *)&((const struct sockaddr_in *)(const void *)&addr->addr)->sin_addr;
        if (!inet_ntop(addr->family, a, d->refused_addr, sizeof(d->refused_addr)))
            snprintf(d->refused_addr, sizeof(d->refused_addr), "?");
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    return size * nmemb;
}

static void delivery_free(struct delivery *d)
{
    if (!d)
        return;
    if (d->h)
        curl_easy_cleanup(d->h);
    curl_slist_free_all(d->hdrs);
    curl_slist_free_all(d->rcpt);
    free(d->body);
    free(d->mail);
    free(d);
}

static int sign_header(const struct tc_keys *keys, const char *tenant_id, const char *body,
                       char *out, size_t size)
{
    char secret[65], ts[24], mac_hex[65];
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    tc_webhook_secret(keys, tenant_id, secret);
    snprintf(ts, sizeof(ts), "%" PRId64, tc_wall_ms() / 1000);
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, (const unsigned char *)secret, 64);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)ts, strlen(ts));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)".", 1);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)body, strlen(body));
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(secret, sizeof(secret));
    sodium_bin2hex(mac_hex, sizeof(mac_hex), mac, sizeof(mac));
    int n = snprintf(out, size, "X-Toolcage-Signature: t=%s,v1=%s", ts, mac_hex);
    return n > 0 && (size_t)n < size ? 0 : -ENOSPC;
}

static bool add_header(struct curl_slist **list, const char *h)
{
    struct curl_slist *l = curl_slist_append(*list, h);
    if (l)
        *list = l;
    return l != NULL;
}

/* An easy handle for one attempt. 0 or -ENOMEM. */
static int prepare(struct tc_webhooks *w, struct delivery *d, const char *url)
{
    char sig[160];
    if (sign_header(w->o.keys, d->tenant_id, d->body, sig, sizeof(sig)) < 0)
        return -ENOMEM;
    d->h = curl_easy_init();
    if (!d->h || !add_header(&d->hdrs, "Content-Type: application/json") ||
        !add_header(&d->hdrs, sig) || !add_header(&d->hdrs, "User-Agent: toolcage-webhook/1"))
        return -ENOMEM;
    CURL *h = d->h;
    bool ok =
        curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
        /* "" disables every proxy, http_proxy / HTTPS_PROXY / ALL_PROXY in our environment
         * included: the connection goes where open_socket checked it goes */
        curl_easy_setopt(h, CURLOPT_PROXY, "") == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ATTEMPT_TIMEOUT_MS) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS) == CURLE_OK &&
        /* one connection per attempt, each opened (and checked) by open_socket */
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, d->body) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, d->hdrs) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, d) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, d->err) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_PRIVATE, d) == CURLE_OK;
    return ok ? 0 : -ENOMEM;
}

/* ---- e-mail (kind "email": url "mailto:<address>", body {subject, text}) ---- */

static size_t mail_read(char *buf, size_t size, size_t nitems, void *userdata)
{
    struct delivery *d = userdata;
    size_t n = size * nitems, left = d->mail_len - d->mail_off;
    if (n > left)
        n = left;
    memcpy(buf, d->mail + d->mail_off, n);
    d->mail_off += n;
    return n;
}

/* s with every byte that could end a header line or is not printable ASCII made a space */
static void header_safe(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = ' ';
}

/* An easy handle that sends the message through the server's mail relay (the operator's,
 * trusted: not checked like a tenant's URL). 0, -ENOMEM, -EINVAL (no relay configured). */
static int prepare_mail(struct tc_webhooks *w, struct delivery *d, const char *url)
{
    if (!w->o.smtp_url || !*w->o.smtp_url)
        return -EINVAL;
    json_t *b = json_loads(d->body, 0, NULL);
    char to[320], from[320], subject[256], date[64], msgid[80];
    snprintf(to, sizeof(to), "%s", strncmp(url, "mailto:", 7) == 0 ? url + 7 : url);
    snprintf(from, sizeof(from), "%s", w->o.smtp_from ? w->o.smtp_from : "toolcage@localhost");
    snprintf(subject, sizeof(subject), "%s",
             json_string_value(json_object_get(b, "subject")) ?: "[toolcage] notification");
    header_safe(to);
    header_safe(from);
    header_safe(subject);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
    snprintf(msgid, sizeof(msgid), "<%s@toolcage>", d->id);
    /* the text with CRLF line ends (libcurl escapes a line that is a lone dot) */
    const char *text = json_string_value(json_object_get(b, "text")) ?: "";
    struct tc_buf m;
    tc_buf_init(&m, 1u << 20);
    int rc = tc_buf_appendf(&m,
                            "Date: %s\r\nFrom: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: %s\r\n"
                            "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
                            "Content-Transfer-Encoding: 8bit\r\nAuto-Submitted: auto-generated"
                            "\r\n\r\n",
                            date, from, to, subject, msgid);
    for (const char *p = text; rc == 0 && *p; p++)
        rc = *p == '\n' ? tc_buf_append(&m, "\r\n", 2) : tc_buf_append(&m, p, 1);
    json_decref(b);
    if (rc < 0) {
        tc_buf_free(&m);
        return -ENOMEM;
    }
    d->mail = m.data; /* the buffer's, now the delivery's */
    d->mail_len = m.len;
    char rcpt[330], mfrom[330];
    snprintf(rcpt, sizeof(rcpt), "<%s>", to);
    snprintf(mfrom, sizeof(mfrom), "<%s>", from);
    d->h = curl_easy_init();
    d->rcpt = curl_slist_append(NULL, rcpt);
    if (!d->h || !d->rcpt)
        return -ENOMEM;
    CURL *h = d->h;
    bool ok =
        curl_easy_setopt(h, CURLOPT_URL, w->o.smtp_url) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp,smtps") == CURLE_OK &&
        /* STARTTLS whenever the relay offers it (smtps:// is TLS from the start) */
        curl_easy_setopt(h, CURLOPT_USE_SSL, (long)CURLUSESSL_TRY) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_PROXY, "") == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ATTEMPT_TIMEOUT_MS) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_MAIL_FROM, mfrom) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_MAIL_RCPT, d->rcpt) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)d->mail_len) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_READFUNCTION, mail_read) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_READDATA, d) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, d->err) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_PRIVATE, d) == CURLE_OK;
    return ok ? 0 : -ENOMEM;
}

static void record(struct tc_webhooks *w, struct delivery *d, bool delivered, long status,
                   const char *error, bool give_up)
{
    char st[24], backoff[24];
    snprintf(st, sizeof(st), "%ld", status);
    /* 1 s, 2 s, 4 s, ... at most an hour, from the end of this attempt */
    long b = d->attempt >= 13 ? BACKOFF_MAX_S : 1L << (d->attempt > 0 ? d->attempt - 1 : 0);
    snprintf(backoff, sizeof(backoff), "%ld", b < BACKOFF_MAX_S ? b : BACKOFF_MAX_S);
    const char *p[] = {d->id,          w->instance, status > 0 ? st : NULL,
                       error,          backoff,     give_up ? "true" : "false",
                       w->max_attempts};
    PGresult *r =
        delivered
            ? tc_db_exec(w->conn,
                         "UPDATE webhook_deliveries SET delivered_at = now(), lease_until = NULL,"
                         " last_error = NULL, last_status = $3::int"
                         " WHERE id = $1 AND leased_by = $2::int AND delivered_at IS NULL",
                         3, p)
            : tc_db_exec(w->conn,
                         "UPDATE webhook_deliveries SET lease_until = NULL, last_error = $4,"
                         " last_status = $3::int,"
                         " next_attempt_at = now() + make_interval(secs => $5::int),"
                         " gave_up_at = CASE WHEN $6::bool OR attempts >= $7::int THEN now() END"
                         " WHERE id = $1 AND leased_by = $2::int AND delivered_at IS NULL",
                         7, p);
    bool gave_up = !delivered && (give_up || d->attempt >= (int)w->o.max_attempts);
    tc_metrics_delivery(d->kind, delivered ? "delivered" : gave_up ? "given_up" : "failed");
    if (!r) /* the lease runs out and the delivery is tried again: at least once, not exactly */
        tc_log(TC_LOG_ERROR, "recording a webhook delivery failed", "{s:s, s:s}", "delivery_id",
               d->id, "error", tc_db_error(w->conn));
    PQclear(r);
    if (!delivered)
        tc_log(give_up || d->attempt >= (int)w->o.max_attempts ? TC_LOG_ERROR : TC_LOG_WARN,
               give_up || d->attempt >= (int)w->o.max_attempts ? "webhook delivery given up"
                                                               : "webhook delivery failed",
               "{s:s, s:s, s:i, s:s}", "delivery_id", d->id, "tenant_id", d->tenant_id, "attempt",
               d->attempt, "error", error);
}

static void unlink_inflight(struct tc_webhooks *w, struct delivery *d)
{
    if (d->prev)
        d->prev->next = d->next;
    else
        w->inflight = d->next;
    if (d->next)
        d->next->prev = d->prev;
    w->n_inflight--;
}

/* An attempt ended: what happened goes to its row. */
static void finished(struct tc_webhooks *w, struct delivery *d, CURLcode rc)
{
    long status = 0;
    char error[CURL_ERROR_SIZE + 128];
    curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && (status >= 200 && status <= 299)) { /* HTTP 2xx; SMTP's 250 too */
        record(w, d, true, status, NULL, false);
    } else if (d->refused) {
        /* a target we must not reach: no later attempt would be allowed either */
        snprintf(error, sizeof(error), "refused: %s is a %s address", d->refused_addr, d->refused);
        record(w, d, false, 0, error, true);
    } else if (strcmp(d->kind, "email") == 0 && status >= 500) {
        /* a permanent SMTP refusal: trying again would be refused again */
        snprintf(error, sizeof(error), "SMTP %ld: %s", status,
                 d->err[0] ? d->err : curl_easy_strerror(rc));
        record(w, d, false, status, error, true);
    } else if (rc != CURLE_OK) {
        snprintf(error, sizeof(error), "%s", d->err[0] ? d->err : curl_easy_strerror(rc));
        record(w, d, false, status, error, false);
    } else {
        snprintf(error, sizeof(error), "HTTP %ld", status);
        record(w, d, false, status, error, false);
    }
}

static void start(struct tc_webhooks *w, PGresult *r, int row)
{
    struct delivery *d = calloc(1, sizeof(*d));
    if (!d)
        return; /* the lease runs out; tried again then */
    d->w = w;
    snprintf(d->id, sizeof(d->id), "%s", PQgetvalue(r, row, 0));
    snprintf(d->tenant_id, sizeof(d->tenant_id), "%s", PQgetvalue(r, row, 4));
    snprintf(d->kind, sizeof(d->kind), "%s", PQgetvalue(r, row, 5));
    d->attempt = (int)strtol(PQgetvalue(r, row, 3), NULL, 10);
    d->body = strdup(PQgetvalue(r, row, 2));
    bool mail = strcmp(d->kind, "email") == 0;
    int prc = !d->body ? -ENOMEM
              : mail   ? prepare_mail(w, d, PQgetvalue(r, row, 1))
                       : prepare(w, d, PQgetvalue(r, row, 1));
    if (prc == -EINVAL) { /* no mail relay: no later attempt would do better */
        record(w, d, false, 0, "e-mail notifications need TOOLCAGE_SMTP_URL", true);
        delivery_free(d);
        return;
    }
    if (prc < 0 || curl_multi_add_handle(w->multi, d->h) != CURLM_OK) {
        record(w, d, false, 0, "could not start the attempt (out of memory)", false);
        delivery_free(d);
        return;
    }
    d->next = w->inflight;
    if (w->inflight)
        w->inflight->prev = d;
    w->inflight = d;
    w->n_inflight++;
}

static void claim(struct tc_webhooks *w)
{
    unsigned room = w->o.max_in_flight > w->n_inflight ? w->o.max_in_flight - w->n_inflight : 0;
    if (room == 0)
        return;
    char lim[16];
    snprintf(lim, sizeof(lim), "%u", room);
    const char *p[] = {w->instance, w->lease, w->per_tenant, lim, w->max_attempts};
    PGresult *r = tc_db_exec(w->conn, CLAIM_SQL, 5, p);
    if (!r) {
        tc_log(TC_LOG_WARN, "claiming webhook deliveries failed", "{s:s}", "error",
               tc_db_error(w->conn));
        return;
    }
    for (int i = 0; i < PQntuples(r); i++)
        start(w, r, i);
    PQclear(r);
}

/* Rows whose last attempt was claimed by a process that died before it could record it. */
static void sweep(struct tc_webhooks *w)
{
    const char *p[] = {w->max_attempts};
    PGresult *r = tc_db_exec(w->conn,
                             "UPDATE webhook_deliveries SET gave_up_at = now(),"
                             " last_error = coalesce(last_error, 'no attempt left')"
                             " WHERE delivered_at IS NULL AND gave_up_at IS NULL"
                             " AND attempts >= $1::int"
                             " AND (lease_until IS NULL OR lease_until < now())",
                             1, p);
    PQclear(r);
    /* a reviewer notice whose approval is no longer pending says nothing true any more */
    r = tc_db_exec(w->conn,
                   "UPDATE webhook_deliveries d SET gave_up_at = now(),"
                   " last_error = 'the approval is no longer pending'"
                   " FROM approvals a WHERE a.id = d.approval_id AND a.status <> 'pending'"
                   " AND d.delivered_at IS NULL AND d.gave_up_at IS NULL"
                   " AND (d.lease_until IS NULL OR d.lease_until < now())",
                   0, NULL);
    PQclear(r);
    r = tc_db_exec(w->conn,
                   "UPDATE webhook_deliveries d SET gave_up_at = now(),"
                   " last_error = 'the egress ask is no longer pending'"
                   " FROM egress_asks k WHERE k.id = d.ask_id AND k.status <> 'pending'"
                   " AND d.delivered_at IS NULL AND d.gave_up_at IS NULL"
                   " AND (d.lease_until IS NULL OR d.lease_until < now())",
                   0, NULL);
    PQclear(r);
}

static bool connected(struct tc_webhooks *w)
{
    if (w->conn && PQstatus(w->conn) == CONNECTION_OK)
        return true;
    w->listening = false;
    if (!tc_db_revive(&w->conn, w->database_url))
        return false;
    /* every finished execution is announced (execution/record.c): its delivery may be due */
    w->listening = tc_db_command(w->conn, "LISTEN toolcage_done");
    return true;
}

/* True if an execution finished since the last call. */
static bool notified(struct tc_webhooks *w)
{
    bool any = false;
    if (!w->listening)
        return false;
    PQconsumeInput(w->conn);
    PGnotify *n;
    while ((n = PQnotifies(w->conn))) {
        any = true;
        PQfreemem(n);
    }
    return any;
}

static void reap(struct tc_webhooks *w)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(w->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct delivery *d = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&d);
        CURLcode rc = m->data.result;
        curl_multi_remove_handle(w->multi, m->easy_handle);
        if (!d)
            continue;
        unlink_inflight(w, d);
        finished(w, d, rc);
        delivery_free(d);
    }
}

static void *delivery_main(void *arg)
{
    struct tc_webhooks *w = arg;
    int64_t next_claim = 0, last_claim = 0, next_sweep = 0;
    while (!w->stopping) {
        int64_t now = tc_now_ms();
        if (connected(w)) {
            if (notified(w) && next_claim > last_claim + CLAIM_GAP_MS)
                next_claim = last_claim + CLAIM_GAP_MS;
            if (now >= next_claim) {
                claim(w);
                last_claim = now;
                next_claim = now + CLAIM_EVERY_MS;
            }
            if (now >= next_sweep) {
                sweep(w);
                next_sweep = now + SWEEP_EVERY_MS;
            }
        } else {
            next_claim = now + 1000;
        }
        int running = 0;
        curl_multi_perform(w->multi, &running);
        unsigned before = w->n_inflight;
        reap(w);
        if (w->n_inflight < before && next_claim > last_claim + CLAIM_GAP_MS)
            next_claim = last_claim + CLAIM_GAP_MS; /* room again: the next due ones */
        now = tc_now_ms();
        int64_t wait = next_claim - now;
        if (wait < 1)
            wait = 1;
        if (wait > CLAIM_EVERY_MS)
            wait = CLAIM_EVERY_MS;
        struct curl_waitfd extra = {.fd = w->listening ? PQsocket(w->conn) : -1,
                                    .events = CURL_WAIT_POLLIN};
        curl_multi_poll(w->multi, &extra, extra.fd >= 0 ? 1 : 0, (int)wait, NULL);
    }
    /* Stopping: the attempts in flight end here; their rows are due again at once. */
    while (w->inflight) {
        struct delivery *d = w->inflight;
        unlink_inflight(w, d);
        curl_multi_remove_handle(w->multi, d->h);
        const char *p[] = {d->id, w->instance};
        PGresult *r = w->conn ? tc_db_exec(w->conn,
                                           "UPDATE webhook_deliveries SET lease_until = NULL,"
                                           " next_attempt_at = now(),"
                                           " last_error = 'interrupted: the server stopped'"
                                           " WHERE id = $1 AND leased_by = $2::int"
                                           " AND delivered_at IS NULL",
                                           2, p)
                              : NULL;
        PQclear(r);
        delivery_free(d);
    }
    return NULL;
}

int tc_webhooks_start(const struct tc_webhooks_options *opts, struct tc_webhooks **ret_webhooks,
                      char **ret_error)
{
    if (!opts || !opts->database_url || !opts->keys || opts->max_in_flight == 0 ||
        opts->per_tenant == 0 || opts->max_attempts == 0)
        return -EINVAL;
    if (opts->smtp_url && !tc_email_address_ok(opts->smtp_from)) {
        *ret_error = strdup("TOOLCAGE_SMTP_FROM must be a plain address (local@domain)");
        return -EINVAL;
    }
    struct tc_webhooks *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->o = *opts;
    w->database_url = strdup(opts->database_url);
    w->multi = curl_multi_init();
    snprintf(w->instance, sizeof(w->instance), "%d", opts->instance_id);
    snprintf(w->lease, sizeof(w->lease), "%d", LEASE_S);
    snprintf(w->per_tenant, sizeof(w->per_tenant), "%u", opts->per_tenant);
    snprintf(w->max_attempts, sizeof(w->max_attempts), "%u", opts->max_attempts);
    if (!w->database_url || !w->multi)
        goto fail;
    w->conn = tc_db_connect(w->database_url, ret_error);
    if (!w->conn)
        goto fail;
    if (pthread_create(&w->thread, NULL, delivery_main, w) != 0)
        goto fail;
    *ret_webhooks = w;
    return 0;
fail:
    PQfinish(w->conn);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    free(w->database_url);
    free(w);
    return -EIO;
}

void tc_webhooks_stop(struct tc_webhooks *w)
{
    if (!w)
        return;
    w->stopping = true;
    curl_multi_wakeup(w->multi);
    pthread_join(w->thread, NULL);
    curl_multi_cleanup(w->multi);
    PQfinish(w->conn);
    free(w->database_url);
    free(w);
}
