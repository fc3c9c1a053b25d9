/* Egress proxy rules: allowlist grammar and matching, address classes (incl. IPv6 forms
 * that embed IPv4 and the metadata addresses), the request-head parser with hostile
 * inputs, the upstream rewrite, the launcher <-> proxy message checks, and the spec's
 * network field. Pure code: no root, no network. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/egress_proto.h"
#include "sandbox/egress_rules.h"
#include "sandbox/egress_tls.h"
#include "sandbox/spec.h"
#include "tap.h"

static struct sockaddr_storage addr(const char *text)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(text, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
            abort();
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        if (inet_pton(AF_INET, text, &s4->sin_addr) != 1)
            abort();
    }
    return ss;
}

static enum tc_addr_class cls(const char *text)
{
    struct sockaddr_storage ss = addr(text);
    return tc_egress_classify((struct sockaddr *)&ss);
}

static int parse(const char *s, struct tc_http_head *h)
{
    return tc_http_head_parse(s, strlen(s), h);
}

TEST(rule_grammar)
{
    struct tc_egress_rule r;
    CHECK(tc_egress_rule_parse("PyPI.org:443", &r) == 0 && strcmp(r.host, "pypi.org") == 0 &&
          r.port == 443 && !r.wildcard && !r.ip_literal);
    CHECK(tc_egress_rule_parse("*.example.com", &r) == 0 && r.wildcard && r.port == 0 &&
          strcmp(r.host, "example.com") == 0);
    CHECK(tc_egress_rule_parse("127.0.0.1:8123", &r) == 0 && r.ip_literal && r.ip[0] == 127 &&
          r.ip[3] == 1 && r.port == 8123);
    static const char *const bad[] = {
        "",       "*",      "*.",           "a:0", "a:65536", "a:",        "a:08", "-a.com",
        "a-.com", "a..com", "http://a.com", "a/b", "a_b.com", "[::1]:443", "a b",  "*.*.com"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (tc_egress_rule_parse(bad[i], &r) == 0) {
            fprintf(stderr, "    accepted bad rule \"%s\"\n", bad[i]);
            CHECK(0);
        }
    }
    /* numeric entries the policy grammar accepts: names, not addresses (they match nothing) */
    CHECK(tc_egress_rule_parse("1.2.3", &r) == 0 && !r.ip_literal);
    CHECK(tc_egress_rule_parse("1.2.3.04", &r) == 0 && !r.ip_literal);
    CHECK(tc_egress_rule_parse("*.1.2.3.4", &r) == 0 && !r.ip_literal && r.wildcard);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    CHECK(tc_egress_rule_parse(longname, &r) < 0);
    CHECK(tc_egress_rule_parse(NULL, &r) < 0);
}

TEST(matching)
{
    struct tc_egress_rule rules[4];
    size_t i = 99;
    CHECK(tc_egress_rule_parse("api.example.com", &rules[0]) == 0);
    CHECK(tc_egress_rule_parse("*.cdn.net:8443", &rules[1]) == 0);
    CHECK(tc_egress_rule_parse("127.0.0.1:8123", &rules[2]) == 0);
    CHECK(tc_egress_rule_parse("*.example.org", &rules[3]) == 0);
    /* exact host: 80 and 443 only when the entry names no port */
    CHECK(tc_egress_match(rules, 4, "api.example.com", 443, &i) == TC_EGRESS_MATCH && i == 0);
    CHECK(tc_egress_match(rules, 4, "api.example.com", 80, &i) == TC_EGRESS_MATCH);
    CHECK(tc_egress_match(rules, 4, "api.example.com", 22, &i) == TC_EGRESS_NO_PORT);
    CHECK(tc_egress_match(rules, 4, "api.example.com", 8080, &i) == TC_EGRESS_NO_PORT);
    CHECK(tc_egress_match(rules, 4, "x.api.example.com", 443, &i) == TC_EGRESS_NO_HOST);
    CHECK(tc_egress_match(rules, 4, "example.com", 443, &i) == TC_EGRESS_NO_HOST);
    CHECK(tc_egress_match(rules, 4, "api.example.com.evil.io", 443, &i) == TC_EGRESS_NO_HOST);
    /* wildcard: any depth below, never the bare domain, never a suffix look-alike */
    CHECK(tc_egress_match(rules, 4, "a.cdn.net", 8443, &i) == TC_EGRESS_MATCH && i == 1);
    CHECK(tc_egress_match(rules, 4, "a.b.cdn.net", 8443, &i) == TC_EGRESS_MATCH);
    CHECK(tc_egress_match(rules, 4, "a.cdn.net", 443, &i) == TC_EGRESS_NO_PORT);
    CHECK(tc_egress_match(rules, 4, "cdn.net", 8443, &i) == TC_EGRESS_NO_HOST);
    CHECK(tc_egress_match(rules, 4, "evilcdn.net", 8443, &i) == TC_EGRESS_NO_HOST);
    CHECK(tc_egress_match(rules, 4, ".cdn.net", 8443, &i) == TC_EGRESS_NO_HOST);
    CHECK(tc_egress_match(rules, 4, "www.example.org", 80, &i) == TC_EGRESS_MATCH && i == 3);
    CHECK(tc_egress_match(rules, 4, "example.org", 80, &i) == TC_EGRESS_NO_HOST);
    /* literal address */
    CHECK(tc_egress_match(rules, 4, "127.0.0.1", 8123, &i) == TC_EGRESS_MATCH && i == 2);
    CHECK(tc_egress_match(rules, 4, "127.0.0.1", 8124, &i) == TC_EGRESS_NO_PORT);
    CHECK(tc_egress_match(rules, 0, "api.example.com", 443, &i) == TC_EGRESS_NO_HOST);
}

TEST(address_classes)
{
    static const struct {
        const char *a;
        enum tc_addr_class c;
    } cases[] = {
        {"93.184.216.34", TC_ADDR_PUBLIC},
        {"8.8.8.8", TC_ADDR_PUBLIC},
        {"127.0.0.1", TC_ADDR_LOOPBACK},
        {"127.255.1.2", TC_ADDR_LOOPBACK},
        {"10.1.2.3", TC_ADDR_PRIVATE},
        {"172.16.0.1", TC_ADDR_PRIVATE},
        {"172.31.255.255", TC_ADDR_PRIVATE},
        {"172.32.0.1", TC_ADDR_PUBLIC},
        {"192.168.1.1", TC_ADDR_PRIVATE},
        {"169.254.1.1", TC_ADDR_LINK_LOCAL},
        {"169.254.169.254", TC_ADDR_METADATA},
        {"100.100.100.200", TC_ADDR_METADATA},
        {"100.64.0.1", TC_ADDR_CGNAT},
        {"100.127.255.255", TC_ADDR_CGNAT},
        {"100.128.0.1", TC_ADDR_PUBLIC},
        {"224.0.0.1", TC_ADDR_MULTICAST},
        {"0.0.0.0", TC_ADDR_UNSPECIFIED},
        {"0.1.2.3", TC_ADDR_UNSPECIFIED},
        {"255.255.255.255", TC_ADDR_RESERVED},
        {"240.0.0.1", TC_ADDR_RESERVED},
        {"2606:2800:220:1::1", TC_ADDR_PUBLIC},
        {"::1", TC_ADDR_LOOPBACK},
        {"::", TC_ADDR_UNSPECIFIED},
        {"fc00::1", TC_ADDR_PRIVATE},
        {"fd12:3456::1", TC_ADDR_PRIVATE},
        {"fe80::1", TC_ADDR_LINK_LOCAL},
        {"ff02::1", TC_ADDR_MULTICAST},
        {"fd00:ec2::254", TC_ADDR_METADATA},
        /* IPv6 spellings of IPv4 addresses take the IPv4 class */
        {"::ffff:127.0.0.1", TC_ADDR_LOOPBACK},
        {"::ffff:169.254.169.254", TC_ADDR_METADATA},
        {"::ffff:10.0.0.1", TC_ADDR_PRIVATE},
        {"::ffff:8.8.8.8", TC_ADDR_PUBLIC},
        {"::127.0.0.1", TC_ADDR_LOOPBACK},
        {"::8.8.8.8", TC_ADDR_RESERVED},
        {"64:ff9b::7f00:1", TC_ADDR_LOOPBACK},
        {"64:ff9b::a9fe:a9fe", TC_ADDR_METADATA},
        {"2002:7f00:1::1", TC_ADDR_LOOPBACK},
        {"2002:c0a8:101::1", TC_ADDR_PRIVATE},
        {"2001:0:4136:e378::1", TC_ADDR_RESERVED},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum tc_addr_class c = cls(cases[i].a);
        if (c != cases[i].c) {
            fprintf(stderr, "    %s: %s, expected %s\n", cases[i].a, tc_egress_class_name(c),
                    tc_egress_class_name(cases[i].c));
            CHECK(0);
        }
    }
    struct sockaddr_un_like {
        sa_family_t f;
    } other = {AF_UNIX};
    CHECK(tc_egress_classify((struct sockaddr *)&other) == TC_ADDR_RESERVED);
}

TEST(address_allowed_only_when_named)
{
    struct tc_egress_rule lit, name, meta;
    struct sockaddr_storage lo = addr("127.0.0.1"), lo2 = addr("127.0.0.2"),
                            mapped = addr("::ffff:127.0.0.1"), pub = addr("8.8.8.8"),
                            md = addr("169.254.169.254"), six = addr("::1");
    CHECK(tc_egress_rule_parse("127.0.0.1:8123", &lit) == 0);
    CHECK(tc_egress_rule_parse("localhost:8123", &name) == 0);
    CHECK(tc_egress_rule_parse("169.254.169.254", &meta) == 0);
    CHECK(tc_egress_addr_allowed(&lit, (struct sockaddr *)&lo));
    CHECK(tc_egress_addr_allowed(&lit, (struct sockaddr *)&mapped));
    CHECK(!tc_egress_addr_allowed(&lit, (struct sockaddr *)&lo2));
    CHECK(!tc_egress_addr_allowed(&lit, (struct sockaddr *)&six));
    CHECK(!tc_egress_addr_allowed(&name, (struct sockaddr *)&lo)); /* a name is not enough */
    CHECK(tc_egress_addr_allowed(&name, (struct sockaddr *)&pub));
    CHECK(!tc_egress_addr_allowed(&name, (struct sockaddr *)&md));
    CHECK(tc_egress_addr_allowed(&meta, (struct sockaddr *)&md));
    CHECK(!tc_egress_addr_allowed(NULL, (struct sockaddr *)&lo));
}

TEST(host_normalise)
{
    char h[300];
    snprintf(h, sizeof(h), "%s", "API.Example.COM.");
    CHECK(tc_egress_host_normalise(h, sizeof(h)) == 0 && strcmp(h, "api.example.com") == 0);
    snprintf(h, sizeof(h), "%s", "[0:0::1]");
    CHECK(tc_egress_host_normalise(h, sizeof(h)) == 0 && strcmp(h, "::1") == 0);
    snprintf(h, sizeof(h), "%s", "127.0.0.1");
    CHECK(tc_egress_host_normalise(h, sizeof(h)) == 0);
    /* what inet_aton would read as an address, and plain junk */
    static const char *const bad[] = {
        "2130706433", "0x7f.1", "0x7f000001", "127.1", "017.0.0.1", "1.2.3", "a..b",  "-a",
        "a b",        "a\\b",   "[::1",       "[zz]",  "",          ".",     "a%00b", "[]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(h, sizeof(h), "%s", bad[i]);
        if (tc_egress_host_normalise(h, sizeof(h)) == 0) {
            fprintf(stderr, "    accepted host \"%s\"\n", bad[i]);
            CHECK(0);
        }
    }
}

TEST(head_connect)
{
    struct tc_http_head h;
    const char *req = "CONNECT Files.PythonHosted.org:443 HTTP/1.1\r\nHost: x\r\n\r\nTLS...";
    CHECK(parse(req, &h) == 0);
    CHECK(h.kind == TC_HTTP_CONNECT && h.port == 443 &&
          strcmp(h.host, "files.pythonhosted.org") == 0);
    CHECK(h.head_len == strlen(req) - strlen("TLS..."));
    CHECK(parse("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", &h) == 0 && strcmp(h.host, "::1") == 0 &&
          h.port == 443);
    CHECK(parse("CONNECT a.com:443 HTTP/1.0\r\n\r\n", &h) == 0 && h.minor == 0);
}

TEST(head_absolute_and_rewrite)
{
    struct tc_http_head h;
    char out[TC_EGRESS_HEAD_MAX + 512];
    const char *req = "POST http://Api.Example.com:8080/v1/x?q=1 HTTP/1.1\r\n"
                      "Host: evil.internal\r\nProxy-Authorization: Basic Zm9v\r\n"
                      "Connection: keep-alive\r\nContent-Length: 2\r\nX-A: b\r\n\r\nhi";
    CHECK(parse(req, &h) == 0);
    CHECK(h.kind == TC_HTTP_ABSOLUTE && h.port == 8080 && strcmp(h.host, "api.example.com") == 0);
    long n = tc_http_head_rewrite(req, &h, out, sizeof(out));
    CHECK(n > 0);
    out[n > 0 ? n : 0] = '\0';
    CHECK(strcmp(out, "POST /v1/x?q=1 HTTP/1.1\r\nHost: api.example.com:8080\r\n"
                      "Content-Length: 2\r\nX-A: b\r\nConnection: close\r\n\r\n") == 0);
    CHECK(parse("GET http://a.com HTTP/1.1\r\n\r\n", &h) == 0 && h.port == 80);
    n = tc_http_head_rewrite("GET http://a.com HTTP/1.1\r\n\r\n", &h, out, sizeof(out));
    CHECK(n > 0 && strncmp(out, "GET / HTTP/1.1\r\nHost: a.com\r\n", 29) == 0);
    const char *q = "GET http://a.com?x=1 HTTP/1.1\r\n\r\n";
    CHECK(parse(q, &h) == 0);
    n = tc_http_head_rewrite(q, &h, out, sizeof(out));
    CHECK(n > 0 && strncmp(out, "GET /?x=1 HTTP/1.1\r\n", 20) == 0);
    CHECK(tc_http_head_rewrite(q, &h, out, 10) == -ENOSPC);
    CHECK(parse("GET http://a.com:80/ HTTP/1.1\r\n\r\n", &h) == 0 &&
          strcmp(h.authority, "a.com") == 0);
}

TEST(head_hostile)
{
    struct tc_http_head h;
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nHost: a.com\r\n\r\n", /* origin-form: not a proxy request */
        "GET https://a.com/ HTTP/1.1\r\n\r\n",   /* https without CONNECT */
        "GET ftp://a.com/ HTTP/1.1\r\n\r\n",
        "CONNECT a.com HTTP/1.1\r\n\r\n", /* port required */
        "CONNECT a.com:0 HTTP/1.1\r\n\r\n",
        "CONNECT a.com:99999 HTTP/1.1\r\n\r\n",
        "CONNECT a.com:443x HTTP/1.1\r\n\r\n",
        "CONNECT user@a.com:443 HTTP/1.1\r\n\r\n",
        "GET http://user:pw@a.com/ HTTP/1.1\r\n\r\n", /* userinfo */
        "GET http://a.com/#frag HTTP/1.1\r\n\r\n",
        "GET http://2130706433/ HTTP/1.1\r\n\r\n", /* inet_aton forms */
        "GET http://0x7f.1/ HTTP/1.1\r\n\r\n",
        "CONNECT 127.1:443 HTTP/1.1\r\n\r\n",
        "CONNECT a.com:443:1 HTTP/1.1\r\n\r\n",
        "CONNECT [::1]x:443 HTTP/1.1\r\n\r\n",
        "GET http://a.com/ HTTP/2.0\r\n\r\n",
        "GET http://a.com/ HTTP/1.1 \r\n\r\n",
        "GET  http://a.com/ HTTP/1.1\r\n\r\n",
        "G\x01T http://a.com/ HTTP/1.1\r\n\r\n",
        "GET http://a.com/\x7f HTTP/1.1\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\n folded: x\r\n\r\n", /* obs-fold */
        "GET http://a.com/ HTTP/1.1\r\nNo colon\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\nX: a\rb\r\n\r\n", /* bare CR in a value */
        "GET http://a.com/ HTTP/1.1\nX: y\r\n\r\n",      /* bare LF line end */
        "GET http://a..com/ HTTP/1.1\r\n\r\n",
        "VERYLONGMETHODNAME http://a.com/ HTTP/1.1\r\n\r\n",
        "\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = parse(bad[i], &h);
        if (r != -EBADMSG) {
            fprintf(stderr, "    case %zu: %d, expected -EBADMSG\n", i, r);
            CHECK(0);
        }
    }
    /* incomplete heads want more bytes */
    CHECK(parse("CONNECT a.com:443 HTTP/1.1\r\n", &h) == -EAGAIN);
    CHECK(parse("", &h) == -EAGAIN);
    /* a NUL byte in a header value */
    const char nul[] = "GET http://a.com/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
    CHECK(tc_http_head_parse(nul, sizeof(nul) - 1, &h) == -EBADMSG);
    /* caps: 8 KiB of head, 100 header lines */
    char *big = malloc(TC_EGRESS_HEAD_MAX + 64);
    memset(big, 'a', TC_EGRESS_HEAD_MAX + 64);
    memcpy(big, "GET http://a.com/", 17);
    CHECK(tc_http_head_parse(big, TC_EGRESS_HEAD_MAX + 64, &h) == -E2BIG);
    CHECK(tc_http_head_parse(big, 100, &h) == -EAGAIN);
    free(big);
    char many[8000];
    size_t o = (size_t)snprintf(many, sizeof(many), "GET http://a.com/ HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++)
        o += (size_t)snprintf(many + o, sizeof(many) - o, "X%d: y\r\n", i);
    o += (size_t)snprintf(many + o, sizeof(many) - o, "\r\n");
    CHECK(tc_http_head_parse(many, o, &h) == -E2BIG);
    /* the head ends at the first blank line even if garbage follows */
    CHECK(parse("CONNECT a.com:443 HTTP/1.1\r\n\r\n\x00\xff garbage", &h) == 0);
}

TEST(proto_checks)
{
    int sv[2];
    struct tc_eg_hdr h;
    char *payload = NULL;
    int fd = -1;
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK(tc_eg_send(sv[0], TC_EG_ADD, 7, "[\"a.com\"]", 9, sv[0]) == 0);
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == 0);
    CHECK(h.type == TC_EG_ADD && h.handle == 7 && payload && strcmp(payload, "[\"a.com\"]") == 0 &&
          fd >= 0);
    free(payload);
    if (fd >= 0)
        close(fd);
    CHECK(tc_eg_send(sv[0], TC_EG_CLOSE, 7, NULL, 0, -1) == 0);
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == 0 && h.type == TC_EG_CLOSE && !payload && fd < 0);
    /* handle 0, a short datagram, a bad magic: all refused */
    CHECK(tc_eg_send(sv[0], TC_EG_CLOSE, 0, NULL, 0, -1) == 0);
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == -EBADMSG);
    CHECK(send(sv[0], "xx", 2, 0) == 2);
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == -EBADMSG);
    struct tc_eg_hdr forged = {.magic = 1, .type = TC_EG_FINAL, .handle = 1};
    CHECK(send(sv[0], &forged, sizeof(forged), 0) == (ssize_t)sizeof(forged));
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == -EBADMSG);
    /* a header that promises a payload but carries no memfd */
    forged.magic = TC_EG_MAGIC;
    forged.len = 5;
    CHECK(send(sv[0], &forged, sizeof(forged), 0) == (ssize_t)sizeof(forged));
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == -EBADMSG);
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == -EAGAIN);
    close(sv[0]);
    CHECK(tc_eg_recv(sv[1], &h, &payload, &fd) == -EPIPE);
    close(sv[1]);
}

static int spec_with_network(const char *net_json, char *err, size_t errlen)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/true\"],\"network\":%s,"
             "\"limits\":{\"wall_ms\":1,\"cpu_ms\":1,\"memory_bytes\":1048576,\"pids\":1,"
             "\"file_size_bytes\":1,\"nofile\":1,\"output_bytes\":1,\"workspace_bytes\":4096,"
             "\"tmp_bytes\":4096}}",
             net_json);
    json_t *j = json_loads(buf, 0, NULL);
    struct tc_spec s;
    int r = j ? tc_spec_parse(j, &s, err, errlen) : -EINVAL;
    if (r == 0) {
        r = s.network_allow ? (int)json_array_size(s.network_allow) : 0;
        tc_spec_release(&s);
    }
    json_decref(j);
    return r;
}

TEST(spec_network)
{
    char err[256];
    CHECK(spec_with_network("\"none\"", err, sizeof(err)) == 0);
    CHECK(spec_with_network("{\"allow\":[\"a.com\",\"127.0.0.1:80\"]}", err, sizeof(err)) == 2);
    CHECK(spec_with_network("\"all\"", err, sizeof(err)) == -EINVAL);
    CHECK(spec_with_network("{\"allow\":[]}", err, sizeof(err)) == -EINVAL);
    CHECK(spec_with_network("{\"allow\":[\"*\"]}", err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "network.allow[0]") != NULL);
    CHECK(spec_with_network("{\"allow\":[\"a.com\"],\"x\":1}", err, sizeof(err)) == -EINVAL);
    CHECK(spec_with_network("{\"allow\":[1]}", err, sizeof(err)) == -EINVAL);
    /* asking: the list may be empty; the bound is 1 s .. 1 h */
    CHECK(spec_with_network("{\"allow\":[],\"ask_ms\":60000}", err, sizeof(err)) == 0);
    CHECK(spec_with_network("{\"allow\":[\"a.com\"],\"ask_ms\":1000}", err, sizeof(err)) == 1);
    CHECK(spec_with_network("{\"allow\":[],\"ask_ms\":999}", err, sizeof(err)) == -EINVAL);
    CHECK(spec_with_network("{\"allow\":[],\"ask_ms\":\"1\"}", err, sizeof(err)) == -EINVAL);
    CHECK(spec_with_network("{\"allow\":[],\"ask_ms\":3600001}", err, sizeof(err)) == -EINVAL);
}

static long inj(const char *head, char *out, size_t size)
{
    return tc_tls_rewrite_head(head, strlen(head), "api.example", 443, "Authorization",
                               "Bearer s3cret-value", out, size, NULL);
}

TEST(inject_rewrite)
{
    char out[4096];
    long n = inj("GET /v1/me?x=1 HTTP/1.1\r\nHost: evil.example\r\nauthorization: Bearer forged\r\n"
                 "Accept: */*\r\nConnection: keep-alive\r\nAccept-Encoding: gzip\r\n"
                 "Proxy-Authorization: x\r\nX-Trace: 1\r\n\r\n",
                 out, sizeof(out));
    CHECK(n > 0);
    out[n > 0 ? n : 0] = '\0';
    CHECK(strcmp(out, "GET /v1/me?x=1 HTTP/1.0\r\nAccept: */*\r\nX-Trace: 1\r\n"
                      "Host: api.example\r\nAuthorization: Bearer s3cret-value\r\n"
                      "Accept-Encoding: identity\r\nConnection: close\r\n\r\n") == 0);
    /* a port other than 443 is in Host */
    uint64_t body = 99;
    n = tc_tls_rewrite_head("GET / HTTP/1.0\r\n\r\n", 18, "10.0.0.1", 8443, "X-Key", "v", out,
                            sizeof(out), &body);
    CHECK(n > 0 && memmem(out, (size_t)n, "Host: 10.0.0.1:8443\r\n", 21) != NULL && body == 0);
    /* one body, framed one way */
    n = tc_tls_rewrite_head("POST /x HTTP/1.1\r\nContent-Length: 12\r\n\r\n", 41, "a.example", 443,
                            "X-Key", "v", out, sizeof(out), &body);
    CHECK(n > 0 && body == 12 && memmem(out, (size_t)n, "Content-Length: 12\r\n", 20) != NULL);
    CHECK(inj("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", out, sizeof(out)) == -2);
    CHECK(inj("POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", out,
              sizeof(out)) == -2);
    CHECK(inj("POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", out,
              sizeof(out)) == -1);
    CHECK(inj("POST /x HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n", out, sizeof(out)) == -1);
    CHECK(inj("POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", out, sizeof(out)) == -1);
    /* methods that echo the request, and headers that steer it, never go with a credential */
    CHECK(inj("TRACE / HTTP/1.1\r\n\r\n", out, sizeof(out)) == -1);
    CHECK(inj("track / HTTP/1.1\r\n\r\n", out, sizeof(out)) == -1);
    n = inj(
        "GET / HTTP/1.1\r\nX-Forwarded-Host: evil\r\nForwarded: host=evil\r\nRange: bytes=0-3\r\n"
        "X-HTTP-Method-Override: DELETE\r\n\r\n",
        out, sizeof(out));
    CHECK(n > 0 && !memmem(out, (size_t)n, "evil", 4) && !memmem(out, (size_t)n, "Range", 5) &&
          !memmem(out, (size_t)n, "DELETE", 6));
    /* what is not forwarded with a credential */
    CHECK(inj("GET https://other.example/ HTTP/1.1\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("CONNECT other.example:443 HTTP/1.1\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("GET / HTTP/2\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("GET / HTTP/1.1\r\nX-A: 1\r\n folded: injected\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("GET / HTTP/1.1\r\nX-A: 1\nHost: evil\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("G(T / HTTP/1.1\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("GET /a b HTTP/1.1\r\n\r\n", out, sizeof(out)) < 0);
    CHECK(inj("GET / HTTP/1.1\r\n\r\n", out, 40) < 0); /* does not fit */
}

TEST(inject_scrub)
{
    const char *secret = "s3cret-value";
    char out[2048];
    /* the secret cut anywhere between two pieces is still blanked, and nothing else is */
    for (size_t cut = 0; cut <= 40; cut++) {
        const char *text = "answer: Bearer s3cret-value; again s3cret-value.";
        struct tc_tls_scrubber sc = {.secret = secret, .len = strlen(secret)};
        size_t tl = strlen(text), a = cut < tl ? cut : tl, o = 0;
        o += tc_tls_scrub_feed(&sc, text, a, out + o, sizeof(out) - o, false);
        o += tc_tls_scrub_feed(&sc, text + a, tl - a, out + o, sizeof(out) - o, false);
        o += tc_tls_scrub_feed(&sc, "", 0, out + o, sizeof(out) - o, true);
        out[o] = '\0';
        CHECK(o == tl);
        CHECK(strcmp(out, "answer: Bearer ************; again ************.") == 0);
    }
    /* byte by byte */
    struct tc_tls_scrubber sc = {.secret = secret, .len = strlen(secret)};
    const char *text = "xs3cret-values3cret-valu";
    size_t o = 0;
    for (size_t i = 0; text[i]; i++)
        o += tc_tls_scrub_feed(&sc, text + i, 1, out + o, sizeof(out) - o, false);
    o += tc_tls_scrub_feed(&sc, "", 0, out + o, sizeof(out) - o, true);
    out[o] = '\0';
    CHECK(strcmp(out, "x************s3cret-valu") == 0);
}

int main(void)
{
    RUN(rule_grammar);
    RUN(matching);
    RUN(address_classes);
    RUN(address_allowed_only_when_named);
    RUN(host_normalise);
    RUN(head_connect);
    RUN(head_absolute_and_rewrite);
    RUN(head_hostile);
    RUN(proto_checks);
    RUN(spec_network);
    RUN(inject_rewrite);
    RUN(inject_scrub);
    return TAP_DONE();
}
