/* Egress proxy rules: allowlist entries, destination address classes and the HTTP
 * request-head parser. Pure code (no I/O), shared by the proxy, the spec validator and
 * the unit tests. See docs/sandbox.md "Network egress". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define TC_EGRESS_PORT        3128 /* 127.0.0.1:3128 inside the sandbox */
#define TC_EGRESS_MAX_RULES   256
#define TC_EGRESS_HOST_MAX    253
#define TC_EGRESS_HEAD_MAX    8192 /* request line + headers + blank line */
#define TC_EGRESS_MAX_HEADERS 100

struct tc_egress_rule {
    char host[TC_EGRESS_HOST_MAX + 1]; /* lowercase; for "*.d" this is "d" */
    bool wildcard;                     /* "*.domain": any name below domain, not domain */
    bool ip_literal;                   /* host is a dotted-quad IPv4 address */
    uint8_t ip[4];                     /* when ip_literal */
    uint16_t port;                     /* 0: ports 80 and 443 only */
};

/* "host", "host:port", "*.domain", "*.domain:port" (the policy grammar). 0 or -EINVAL. */
int tc_egress_rule_parse(const char *s, struct tc_egress_rule *ret_rule);

enum tc_egress_match {
    TC_EGRESS_MATCH = 0,
    TC_EGRESS_NO_HOST = -1, /* no entry names this host */
    TC_EGRESS_NO_PORT = -2, /* an entry names the host, none this port */
};
/* First rule matching host (normalised: lowercase, no trailing dot) and port. On a match
 * *ret_index is set. */
enum tc_egress_match tc_egress_match(const struct tc_egress_rule *rules, size_t n, const char *host,
                                     uint16_t port, size_t *ret_index);

enum tc_addr_class {
    TC_ADDR_PUBLIC = 0,
    TC_ADDR_LOOPBACK,
    TC_ADDR_PRIVATE,
    TC_ADDR_LINK_LOCAL,
    TC_ADDR_METADATA,
    TC_ADDR_CGNAT,
    TC_ADDR_MULTICAST,
    TC_ADDR_UNSPECIFIED,
    TC_ADDR_RESERVED,
};
/* Class of an AF_INET / AF_INET6 address; IPv6 forms that embed an IPv4 address
 * (v4-mapped, v4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16) take the class of the
 * embedded address when that is not public. Other families: TC_ADDR_RESERVED. */
enum tc_addr_class tc_egress_classify(const struct sockaddr *sa);
const char *tc_egress_class_name(enum tc_addr_class c);
/* May the proxy connect to sa for a request that matched rule? Public addresses: yes.
 * Anything else only when the rule names that very address literally. */
bool tc_egress_addr_allowed(const struct tc_egress_rule *rule, const struct sockaddr *sa);

/* Normalise a request's host in place: lowercase, one trailing dot removed; IPv6
 * literals given as "[...]" become their canonical text without brackets. Rejects (-EINVAL)
 * anything that is not a DNS name, a dotted-quad IPv4 address or a bracketed IPv6 address,
 * including the inet_aton() forms ("0x7f.1", "2130706433") a resolver would accept. */
int tc_egress_host_normalise(char *host, size_t size);

enum tc_http_kind { TC_HTTP_CONNECT = 1, TC_HTTP_ABSOLUTE };

struct tc_http_hdr {
    uint16_t off, len; /* the whole "Name: value" line without CRLF */
    uint16_t name_len;
};

struct tc_http_head {
    enum tc_http_kind kind;
    char method[16];
    char host[TC_EGRESS_HOST_MAX + 1];       /* normalised (tc_egress_host_normalise) */
    char authority[TC_EGRESS_HOST_MAX + 10]; /* "host[:port]" as sent upstream in Host: */
    uint16_t port;
    uint16_t path_off, path_len; /* origin-form target ("/..."); absent (0) means "/" */
    bool path_needs_slash;       /* target was "http://h?q": send "/?q" */
    uint8_t minor;               /* HTTP/1.<minor> */
    size_t head_len;             /* bytes of the head including the final CRLF CRLF */
    struct tc_http_hdr hdrs[TC_EGRESS_MAX_HEADERS];
    size_t n_hdrs;
};

/* Parse the request head at the start of buf. 0 (complete; bytes after head_len belong to
 * the body or tunnel), -EAGAIN (incomplete, read more), -E2BIG (no end within
 * TC_EGRESS_HEAD_MAX bytes or too many headers), -EBADMSG (malformed or unsupported:
 * anything but CONNECT host:port or an absolute http:// URL, userinfo, bad characters). */
int tc_http_head_parse(const char *buf, size_t len, struct tc_http_head *ret_head);

/* The head to send upstream for a TC_HTTP_ABSOLUTE request: origin-form request line,
 * Host set to the URL's authority, hop-by-hop and proxy headers dropped, "Connection:
 * close" added. Returns its length, or -ENOSPC when out is too small. */
long tc_http_head_rewrite(const char *buf, const struct tc_http_head *h, char *out, size_t size);
