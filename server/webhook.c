#include "server/webhook.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "broker/keys.h"
#include "common/util.h"
#include "server/db.h"
#include "server/log.h"

#define MAX_ATTEMPTS 10

void tc_webhook_secret(const struct tc_keys *keys, const char *tenant_id, char out[65])
{
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, keys->webhook_key, sizeof(keys->webhook_key));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)tenant_id, strlen(tenant_id));
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_bin2hex(out, 65, mac, sizeof(mac));
}

static bool address_private(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        return (a >> 24) == 127 || (a >> 24) == 10 || (a >> 24) == 0 || (a >> 20) == 0xac1 ||
               (a >> 16) == 0xc0a8 || (a >> 16) == 0xa9fe || (a >> 22) == 0x191 /* 100.64/10 */ ||
               (a >> 28) >= 0xe;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            struct sockaddr_in v4 = {.sin_family = AF_INET};
            memcpy(&v4.sin_addr, &a->s6_addr[12], 4);
            return address_private((struct sockaddr *)&v4);
        }
        return IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LINKLOCAL(a) ||
               IN6_IS_ADDR_SITELOCAL(a) || (a->s6_addr[0] & 0xfe) == 0xfc || IN6_IS_ADDR_MULTICAST(a);
    }
    return true;
}

static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    bool allow_private = *(bool *)clientp;
    if (purpose != CURLSOCKTYPE_IPCXN || (!allow_private && address_private(&addr->addr)))
        return CURL_SOCKET_BAD;
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    return size * nmemb;
}

/* One POST; 0 on a 2xx answer, else -EIO with *err set. */
static int post(const char *url, const char *body, const char *tenant_id,
                const struct tc_keys *keys, bool allow_private, char err[CURL_ERROR_SIZE])
{
    char secret[65], ts[24], mac_hex[65], header[160];
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
    snprintf(header, sizeof(header), "X-Toolcage-Signature: t=%s,v1=%s", ts, mac_hex);

    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, CURL_ERROR_SIZE, "curl init failed");
        return -EIO;
    }
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, header);
    hdrs = curl_slist_append(hdrs, "User-Agent: toolcage-webhook/1");
    err[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &allow_private);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        if (!err[0])
            snprintf(err, CURL_ERROR_SIZE, "%s", curl_easy_strerror(rc));
        return -EIO;
    }
    if (status < 200 || status > 299) {
        snprintf(err, CURL_ERROR_SIZE, "HTTP %ld", status);
        return -EIO;
    }
    return 0;
}

void tc_webhook_deliver_due(PGconn *c, const struct tc_keys *keys, bool allow_private)
{
    PGresult *r = PQexec(c, "BEGIN");
    PQclear(r);
    r = tc_db_exec(c,
                   "SELECT d.id, d.url, d.body::text, d.attempts, e.tenant_id"
                   " FROM webhook_deliveries d JOIN executions e ON e.id = d.execution_id"
                   " WHERE d.delivered_at IS NULL AND d.next_attempt_at <= now()"
                   " AND d.attempts < " TC_STRINGIFY(MAX_ATTEMPTS)
                   " ORDER BY d.next_attempt_at LIMIT 8 FOR UPDATE OF d SKIP LOCKED",
                   0, NULL);
    for (int i = 0; r && i < PQntuples(r); i++) {
        char err[CURL_ERROR_SIZE];
        int attempts = (int)strtol(PQgetvalue(r, i, 3), NULL, 10) + 1;
        int rc = post(PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 4), keys,
                      allow_private, err);
        char att[16], backoff[16];
        snprintf(att, sizeof(att), "%d", attempts);
        /* 1 s, 2 s, 4 s, ... capped at one hour */
        snprintf(backoff, sizeof(backoff), "%d", attempts >= 12 ? 3600 : 1 << (attempts - 1));
        const char *p[] = {PQgetvalue(r, i, 0), att, backoff, err};
        PGresult *u =
            rc == 0 ? tc_db_exec(c, "UPDATE webhook_deliveries SET attempts = $2,"
                                    " delivered_at = now(), last_error = NULL WHERE id = $1", 2, p)
                    : tc_db_exec(c, "UPDATE webhook_deliveries SET attempts = $2, last_error = $4,"
                                    " next_attempt_at = now() + make_interval(secs => $3::int)"
                                    " WHERE id = $1", 4, p);
        PQclear(u);
        if (rc < 0)
            tc_log(TC_LOG_WARN, "webhook delivery failed", "{s:s, s:i, s:s}", "delivery_id",
                   PQgetvalue(r, i, 0), "attempt", attempts, "error", err);
    }
    PQclear(r);
    r = PQexec(c, "COMMIT");
    PQclear(r);
}
