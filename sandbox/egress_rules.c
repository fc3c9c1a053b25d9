/* Allowlist matching, address classes and the request-head parser of the egress proxy.
 * Everything here parses untrusted bytes from the sandbox: bounded, no allocation. */
#include "sandbox/egress_rules.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* DNS name: labels of 1-63 [a-z0-9-_] not starting or ending with '-', <= 253 bytes. '_' is
 * accepted in requests (SRV-style names exist) though the policy grammar never has it. */
static bool dns_name_ok(const char *h, bool allow_underscore)
{
    size_t n = strlen(h), label = 0;
    if (n == 0 || n > TC_EGRESS_HOST_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c == '.') {
            if (label == 0 || h[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || (allow_underscore && c == '_')))
            return false;
        if (c == '-' && label == 0)
            return false;
        if (++label > 63)
            return false;
    }
    return label > 0 && h[n - 1] != '-';
}

static bool all_digits_dots(const char *h)
{
    for (; *h; h++)
        if (!is_digit(*h) && *h != '.')
            return false;
    return true;
}

static int parse_port(const char *s, size_t n, uint16_t *ret)
{
    unsigned long v = 0;
    if (n == 0 || n > 5 || s[0] == '0')
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -EINVAL;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -EINVAL;
    *ret = (uint16_t)v;
    return 0;
}

int tc_egress_rule_parse(const char *s, struct tc_egress_rule *ret)
{
    struct tc_egress_rule r;
    const char *colon, *h;
    size_t hlen;

    memset(&r, 0, sizeof(r));
    if (!s)
        return -EINVAL;
    colon = strrchr(s, ':');
    hlen = colon ? (size_t)(colon - s) : strlen(s);
    if (colon && parse_port(colon + 1, strlen(colon + 1), &r.port) < 0)
        return -EINVAL;
    h = s;
    if (hlen >= 2 && h[0] == '*' && h[1] == '.') {
        r.wildcard = true;
        h += 2;
        hlen -= 2;
    }
    if (hlen == 0 || hlen > TC_EGRESS_HOST_MAX)
        return -EINVAL;
    for (size_t i = 0; i < hlen; i++)
        r.host[i] = lower(h[i]);
    r.host[hlen] = '\0';
    if (!dns_name_ok(r.host, false))
        return -EINVAL;
    if (!r.wildcard) {
        struct in_addr a;
        /* Only a canonical dotted quad is an address. Other all-numeric entries ("1.2.3"),
         * which the policy grammar lets through, stay names that never match: requests for
         * such hosts are refused before matching (tc_egress_host_normalise). */
        if (inet_pton(AF_INET, r.host, &a) == 1) {
            r.ip_literal = true;
            memcpy(r.ip, &a, 4);
        }
    }
    *ret = r;
    return 0;
}

enum tc_egress_match tc_egress_match(const struct tc_egress_rule *rules, size_t n, const char *host,
                                     uint16_t port, size_t *ret_index)
{
    size_t hl = strlen(host);
    bool host_seen = false;

    for (size_t i = 0; i < n; i++) {
        const struct tc_egress_rule *r = &rules[i];
        size_t rl = strlen(r->host);
        bool host_ok;
        if (r->wildcard)
            host_ok =
                hl > rl + 1 && host[hl - rl - 1] == '.' && strcmp(host + hl - rl, r->host) == 0;
        else
            host_ok = strcmp(host, r->host) == 0;
        if (!host_ok)
            continue;
        host_seen = true;
        if (r->port ? port == r->port : (port == 80 || port == 443)) {
            *ret_index = i;
            return TC_EGRESS_MATCH;
        }
    }
    return host_seen ? TC_EGRESS_NO_PORT : TC_EGRESS_NO_HOST;
}

static enum tc_addr_class classify4(const uint8_t a[4])
{
    uint32_t x = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
#define IN(net, bits) ((x >> (32 - (bits))) == ((uint32_t)(net) >> (32 - (bits))))
    if (x == 0xa9fea9feU /* 169.254.169.254 */ || x == 0x646464c8U /* 100.100.100.200 */ ||
        x == 0xc00000c0U /* 192.0.0.192 */)
        return TC_ADDR_METADATA;
    if (IN(0x00000000U, 8))
        return TC_ADDR_UNSPECIFIED; /* "this network", 0.0.0.0 */
    if (IN(0x7f000000U, 8))
        return TC_ADDR_LOOPBACK;
    if (IN(0x0a000000U, 8) || IN(0xac100000U, 12) || IN(0xc0a80000U, 16))
        return TC_ADDR_PRIVATE;
    if (IN(0xa9fe0000U, 16))
        return TC_ADDR_LINK_LOCAL;
    if (IN(0x64400000U, 10))
        return TC_ADDR_CGNAT;
    if (IN(0xe0000000U, 4))
        return TC_ADDR_MULTICAST;
    if (IN(0xf0000000U, 4) || IN(0xc0000000U, 24) /* 192.0.0/24 */ ||
        IN(0xc6120000U, 15) /* 198.18/15 */)
        return TC_ADDR_RESERVED; /* includes 255.255.255.255 */
#undef IN
    return TC_ADDR_PUBLIC;
}

static enum tc_addr_class classify6(const uint8_t a[16])
{
    static const uint8_t zero[16], mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff},
                                   nat64[12] = {0, 0x64, 0xff, 0x9b};
    static const uint8_t metadata[16] = {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
    enum tc_addr_class c4 = TC_ADDR_PUBLIC;

    if (memcmp(a, metadata, 16) == 0)
        return TC_ADDR_METADATA;
    if (memcmp(a, zero, 16) == 0)
        return TC_ADDR_UNSPECIFIED;
    if (memcmp(a, zero, 15) == 0 && a[15] == 1)
        return TC_ADDR_LOOPBACK;
    if (memcmp(a, mapped, 12) == 0 || memcmp(a, zero, 12) == 0 || memcmp(a, nat64, 12) == 0)
        c4 = classify4(a + 12);
    else if (a[0] == 0x20 && a[1] == 0x02) /* 6to4: 2002:AABB:CCDD::/48 */
        c4 = classify4(a + 2);
    if (c4 != TC_ADDR_PUBLIC)
        return c4;
    if (memcmp(a, mapped, 12) == 0)
        return TC_ADDR_PUBLIC;
    if (memcmp(a, zero, 12) == 0)
        return TC_ADDR_RESERVED; /* deprecated IPv4-compatible */
    if ((a[0] & 0xfe) == 0xfc)
        return TC_ADDR_PRIVATE; /* fc00::/7 */
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return TC_ADDR_LINK_LOCAL; /* fe80::/10 */
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
        return TC_ADDR_PRIVATE; /* fec0::/10, deprecated site-local */
    if (a[0] == 0xff)
        return TC_ADDR_MULTICAST;
    if ((a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) /* Teredo */ ||
        (a[0] == 0x01 && a[1] == 0 && memcmp(a + 2, zero, 6) == 0) /* 100::/64 discard */)
        return TC_ADDR_RESERVED;
    return TC_ADDR_PUBLIC;
}

enum tc_addr_class tc_egress_classify(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        uint8_t a[4];
        memcpy(a, &s4->sin_addr, 4);
        return classify4(a);
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        return classify6(s6->sin6_addr.s6_addr);
    }
    return TC_ADDR_RESERVED;
}

const char *tc_egress_class_name(enum tc_addr_class c)
{
    static const char *const names[] = {
        [TC_ADDR_PUBLIC] = "public",       [TC_ADDR_LOOPBACK] = "loopback",
        [TC_ADDR_PRIVATE] = "private",     [TC_ADDR_LINK_LOCAL] = "link_local",
        [TC_ADDR_METADATA] = "metadata",   [TC_ADDR_CGNAT] = "cgnat",
        [TC_ADDR_MULTICAST] = "multicast", [TC_ADDR_UNSPECIFIED] = "unspecified",
        [TC_ADDR_RESERVED] = "reserved"};
    return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "reserved";
}

bool tc_egress_addr_allowed(const struct tc_egress_rule *rule, const struct sockaddr *sa)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const uint8_t *v4 = NULL;

    if (tc_egress_classify(sa) == TC_ADDR_PUBLIC)
        return true;
    if (!rule || !rule->ip_literal)
        return false;
    if (sa->sa_family == AF_INET)
        v4 = (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    else if (sa->sa_family == AF_INET6) {
        const uint8_t *a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        if (memcmp(a, mapped, 12) == 0)
            v4 = a + 12;
    }
    return v4 && memcmp(v4, rule->ip, 4) == 0;
}

int tc_egress_host_normalise(char *host, size_t size)
{
    size_t n = strnlen(host, size);
    struct in_addr a4;

    if (n == 0 || n >= size)
        return -EINVAL;
    if (host[0] == '[') {
        struct in6_addr a6;
        char tmp[INET6_ADDRSTRLEN];
        if (n < 3 || n - 2 >= sizeof(tmp) || host[n - 1] != ']')
            return -EINVAL;
        memcpy(tmp, host + 1, n - 2);
        tmp[n - 2] = '\0';
        if (inet_pton(AF_INET6, tmp, &a6) != 1 || !inet_ntop(AF_INET6, &a6, tmp, sizeof(tmp)) ||
            strlen(tmp) >= size)
            return -EINVAL;
        memcpy(host, tmp, strlen(tmp) + 1);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        host[i] = lower(host[i]);
    if (n > 1 && host[n - 1] == '.')
        host[--n] = '\0';
    if (!dns_name_ok(host, true))
        return -EINVAL;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return 0;
    /* The resolver would read "2130706433" or "0x7f.1" as an address: refuse them. */
    if (all_digits_dots(host) || inet_aton(host, &a4) != 0)
        return -EINVAL;
    return 0;
}

/* ---- request head ---- */

static bool tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit((char)c) ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static const char *find_crlf(const char *p, const char *end)
{
    for (; p + 1 < end; p++)
        if (p[0] == '\r' && p[1] == '\n')
            return p;
    return NULL;
}

/* authority "host[:port]" (IPv6 in brackets) -> normalised host + port */
static int parse_authority(const char *s, size_t n, bool port_required, uint16_t def_port,
                           struct tc_http_head *h)
{
    const char *colon = NULL;
    size_t hlen;

    if (n == 0 || n >= sizeof(h->authority) || memchr(s, '@', n))
        return -EBADMSG;
    if (s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return -EBADMSG;
        if ((size_t)(rb - s) + 1 < n) {
            if (rb[1] != ':')
                return -EBADMSG;
            colon = rb + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        if (colon && memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)))
            return -EBADMSG;
    }
    hlen = colon ? (size_t)(colon - s) : n;
    if (colon) {
        if (parse_port(colon + 1, n - hlen - 1, &h->port) < 0)
            return -EBADMSG;
    } else if (port_required) {
        return -EBADMSG;
    } else {
        h->port = def_port;
    }
    if (hlen == 0 || hlen >= sizeof(h->host))
        return -EBADMSG;
    memcpy(h->host, s, hlen);
    h->host[hlen] = '\0';
    if (tc_egress_host_normalise(h->host, sizeof(h->host)) < 0)
        return -EBADMSG;
    if (strchr(h->host, ':'))
        snprintf(h->authority, sizeof(h->authority), "[%s]", h->host);
    else
        snprintf(h->authority, sizeof(h->authority), "%s", h->host);
    if (colon && h->port != def_port) {
        size_t al = strlen(h->authority);
        snprintf(h->authority + al, sizeof(h->authority) - al, ":%u", (unsigned)h->port);
    }
    return 0;
}

int tc_http_head_parse(const char *buf, size_t len, struct tc_http_head *ret)
{
    struct tc_http_head h;
    const char *end, *p, *eol, *sp1, *sp2;
    size_t scan = len < TC_EGRESS_HEAD_MAX ? len : TC_EGRESS_HEAD_MAX;
    const char *term = NULL;

    for (size_t i = 0; i + 3 < scan; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            term = buf + i;
            break;
        }
    if (!term)
        return len >= TC_EGRESS_HEAD_MAX ? -E2BIG : -EAGAIN;
    memset(&h, 0, sizeof(h));
    end = term + 2; /* the last header line's CRLF is included */
    h.head_len = (size_t)(term - buf) + 4;

    /* request line: METHOD SP target SP HTTP/1.x */
    eol = find_crlf(buf, end);
    if (!eol)
        return -EBADMSG;
    sp1 = memchr(buf, ' ', (size_t)(eol - buf));
    if (!sp1 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof(h.method))
        return -EBADMSG;
    for (p = buf; p < sp1; p++)
        if (!tchar((unsigned char)*p))
            return -EBADMSG;
    memcpy(h.method, buf, (size_t)(sp1 - buf));
    sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
    if (!sp2 || sp2 == sp1 + 1 || eol - sp2 != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
        (sp2[8] != '0' && sp2[8] != '1'))
        return -EBADMSG;
    h.minor = (uint8_t)(sp2[8] - '0');
    for (p = sp1 + 1; p < sp2; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return -EBADMSG;

    if (strcmp(h.method, "CONNECT") == 0) {
        h.kind = TC_HTTP_CONNECT;
        if (parse_authority(sp1 + 1, (size_t)(sp2 - sp1 - 1), true, 0, &h) < 0)
            return -EBADMSG;
    } else {
        const char *t = sp1 + 1, *a, *ae;
        size_t tl = (size_t)(sp2 - t);
        h.kind = TC_HTTP_ABSOLUTE;
        if (tl < 8 || strncasecmp(t, "http://", 7) != 0)
            return -EBADMSG; /* origin-form (not a proxy request) or https:// (use CONNECT) */
        a = t + 7;
        for (ae = a; ae < sp2 && *ae != '/' && *ae != '?' && *ae != '#'; ae++)
            ;
        if (parse_authority(a, (size_t)(ae - a), false, 80, &h) < 0)
            return -EBADMSG;
        if (memchr(t, '#', tl))
            return -EBADMSG; /* a fragment never goes on the wire */
        h.path_off = (uint16_t)(ae - buf);
        h.path_len = (uint16_t)(sp2 - ae);
        h.path_needs_slash = ae < sp2 && *ae == '?';
    }

    /* header lines */
    for (p = eol + 2; p < end;) {
        const char *le = find_crlf(p, end), *colon;
        if (!le)
            return -EBADMSG;
        if (le == p)
            return -EBADMSG; /* an empty line before the terminator cannot happen */
        if (h.n_hdrs >= TC_EGRESS_MAX_HEADERS)
            return -E2BIG;
        colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p)
            return -EBADMSG; /* also rejects obs-fold (line starting with SP/HT) */
        for (const char *q = p; q < colon; q++)
            if (!tchar((unsigned char)*q))
                return -EBADMSG;
        for (const char *q = colon + 1; q < le; q++)
            if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
                return -EBADMSG;
        h.hdrs[h.n_hdrs].off = (uint16_t)(p - buf);
        h.hdrs[h.n_hdrs].len = (uint16_t)(le - p);
        h.hdrs[h.n_hdrs].name_len = (uint16_t)(colon - p);
        h.n_hdrs++;
        p = le + 2;
    }
    *ret = h;
    return 0;
}

static bool hdr_is(const char *buf, const struct tc_http_hdr *x, const char *name)
{
    return strlen(name) == x->name_len && strncasecmp(buf + x->off, name, x->name_len) == 0;
}

long tc_http_head_rewrite(const char *buf, const struct tc_http_head *h, char *out, size_t size)
{
    static const char *const drop[] = {"host",
                                       "connection",
                                       "proxy-connection",
                                       "keep-alive",
                                       "proxy-authorization",
                                       "proxy-authenticate",
                                       "te",
                                       "upgrade",
                                       "trailer"};
    size_t o = 0;
    int n;

#define PUT(p, l)                                                                                  \
    do {                                                                                           \
        if ((l) > size - o)                                                                        \
            return -ENOSPC;                                                                        \
        memcpy(out + o, (p), (l));                                                                 \
        o += (l);                                                                                  \
    } while (0)
    PUT(h->method, strlen(h->method));
    PUT(" ", 1);
    if (h->path_len == 0 || h->path_needs_slash)
        PUT("/", 1);
    PUT(buf + h->path_off, h->path_len);
    n = snprintf(out + o, size - o, " HTTP/1.%u\r\nHost: %s\r\n", (unsigned)h->minor, h->authority);
    if (n < 0 || (size_t)n >= size - o)
        return -ENOSPC;
    o += (size_t)n;
    for (size_t i = 0; i < h->n_hdrs; i++) {
        bool skip = false;
        for (size_t d = 0; d < sizeof(drop) / sizeof(drop[0]) && !skip; d++)
            skip = hdr_is(buf, &h->hdrs[i], drop[d]);
        if (skip)
            continue;
        PUT(buf + h->hdrs[i].off, h->hdrs[i].len);
        PUT("\r\n", 2);
    }
    PUT("Connection: close\r\n\r\n", 21);
#undef PUT
    return (long)o;
}
