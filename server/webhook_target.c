/* Where a webhook may go: the call-time check of a callback_url (tc_webhook_target_refused)
 * and the connect-time check of every address (tc_webhook_address_refused). Both classify
 * addresses with the egress proxy's classifier. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/resolve.h"
#include "sandbox/egress_rules.h"
#include "server/webhook.h"
#include "server/webhook_internal.h"

#define LOOKUP_TIMEOUT_MS 1000 /* a slow resolver must not hold an HTTP thread for long */

/* The names tenants ask webhooks to go to: a pool of their own (not the database's), at most
 * 32 pending at once (a name's joined for a second); beyond, a name is not looked up now (as one
 * not resolved in time: the connect-time check decides). */
static struct tc_resolver lookups = TC_RESOLVER_INIT(32, LOOKUP_TIMEOUT_MS);

const char *tc_webhook_address_refused(const struct sockaddr *sa, bool allow_private)
{
    enum tc_addr_class c = tc_egress_classify(sa);
    if (c == TC_ADDR_PUBLIC)
        return NULL;
    /* the cloud metadata service hands out credentials; multicast is not a receiver */
    if (c == TC_ADDR_METADATA || c == TC_ADDR_MULTICAST || !allow_private)
        return tc_egress_class_name(c);
    return NULL;
}

/* what: the address class (tc_egress_class_name) or another short reason */
static void refusal(char *why, size_t n, const char *host, const char *addr, const char *what)
{
    if (addr && strcmp(host, addr) != 0)
        snprintf(why, n,
                 "callback_url host %s resolves to %s (%s): webhooks go to public "
                 "addresses only",
                 host, addr, what);
    else
        snprintf(why, n,
                 "callback_url host %s is not public (%s): webhooks go to public "
                 "addresses only",
                 host, what);
}

/* Resolves host within LOOKUP_TIMEOUT_MS (common/resolve.h); calls check(ai) on the answer if
 * it came in time. -ETIMEDOUT, -ENOENT (no answer), -ENOMEM, or what check returns. */
static int lookup(const char *host, int (*check)(const struct addrinfo *ai, void *arg), void *arg)
{
    struct addrinfo *ai;
    int rc = tc_resolve_within(&lookups, host, LOOKUP_TIMEOUT_MS, &ai);
    if (rc < 0)
        return rc;
    rc = check(ai, arg);
    tc_resolve_free(ai);
    return rc;
}

struct verdict {
    bool allow_private;
    const char *host;
    char *why;
    size_t n;
};

static int check_answer(const struct addrinfo *ai, void *arg)
{
    struct verdict *v = arg;
    for (; ai; ai = ai->ai_next) {
        const char *cls = tc_webhook_address_refused(ai->ai_addr, v->allow_private);
        if (cls) {
            char addr[INET6_ADDRSTRLEN] = "";
            const void *a =
                ai->ai_family == AF_INET6
                    ? (const void *)&((const struct sockaddr_in6 *)(const void *)ai->ai_addr)
                          ->sin6_addr
                    : (const void *)&((const struct sockaddr_in *)(const void *)ai->ai_addr)
                          ->sin_addr;
            inet_ntop(ai->ai_family, a, addr, sizeof(addr));
            refusal(v->why, v->n, v->host, addr, cls);
            return 1;
        }
    }
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

bool tc_webhook_target_refused(const char *url, bool allow_private, char *why, size_t why_size)
{
    CURLU *u = curl_url();
    char *host = NULL;
    bool refused = true;
    if (!u) {
        snprintf(why, why_size, "out of memory");
        return true;
    }
    /* libcurl's own parser: the host checked is the host it will connect to (it also turns
     * "0x7f.1" or "2130706433" into 127.0.0.1) */
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host) {
        snprintf(why, why_size, "callback_url is not a URL libcurl can use");
        goto out;
    }
    size_t hl = strlen(host);
    char lit[INET6_ADDRSTRLEN + 2];
    struct sockaddr_in s4 = {.sin_family = AF_INET};
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
    const struct sockaddr *sa = NULL;
    if (host[0] == '[' && hl >= 3 && hl - 2 < sizeof(lit) && host[hl - 1] == ']') {
        memcpy(lit, host + 1, hl - 2);
        lit[hl - 2] = '\0';
        char *zone = strchr(lit, '%'); /* [fe80::1%25eth0]: the zone is not the address */
        if (zone)
            *zone = '\0';
        if (inet_pton(AF_INET6, lit, &s6.sin6_addr) == 1)
            sa = (const struct sockaddr *)&s6;
    } else if (inet_pton(AF_INET, host, &s4.sin_addr) == 1) {
        sa = (const struct sockaddr *)&s4;
    }
    if (sa) {
        const char *cls = tc_webhook_address_refused(sa, allow_private);
        if (cls)
            refusal(why, why_size, host, NULL, cls);
        refused = cls != NULL;
        goto out;
    }
    /* Names that only ever mean this host, the local network or a cloud's metadata
     * service, whatever they resolve to from here (RFC 6761 localhost, mDNS .local,
     * .internal, home.arpa, a single label completed by the search domains). */
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)(hl && host[hl - 1] == '.' ? hl - 1 : hl), host);
    if (ends_with(name, "metadata.google.internal") || strcasecmp(name, "metadata.goog") == 0 ||
        strcasecmp(name, "metadata") == 0) {
        refusal(why, why_size, host, NULL, "metadata");
        goto out;
    }
    if (!allow_private && (strcasecmp(name, "localhost") == 0 || ends_with(name, ".localhost"))) {
        refusal(why, why_size, host, NULL, "loopback");
        goto out;
    }
    if (!allow_private && (ends_with(name, ".local") || ends_with(name, ".internal") ||
                           ends_with(name, ".home.arpa") || !strchr(name, '.'))) {
        refusal(why, why_size, host, NULL, "local network name");
        goto out;
    }
    struct verdict v = {allow_private, host, why, why_size};
    int rc = lookup(host, check_answer, &v);
    /* not resolved in time, or not at all: the connect-time check decides when it is sent */
    refused = rc == 1;
out:
    curl_free(host);
    curl_url_cleanup(u);
    return refused;
}
