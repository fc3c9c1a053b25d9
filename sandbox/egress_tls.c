#include "sandbox/egress_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "sandbox/egress_rules.h"

#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define HEAD_MAX      TC_EGRESS_HEAD_MAX
#define STEP_MS       10000 /* a handshake, a request head, a write: each within this */

/* ---- certificates ---- */

static bool is_ipv4(const char *host)
{
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1;
}

static bool add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = e && X509_add_ext(x, e, -1) == 1;
    X509_EXTENSION_free(e);
    return ok;
}

static X509 *cert_new(EVP_PKEY *key, const char *cn, long days)
{
    X509 *x = X509_new();
    BIGNUM *bn = BN_new();
    bool ok = x && bn && X509_set_version(x, 2) == 1 &&
              BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
              BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
              X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
              X509_gmtime_adj(X509_getm_notAfter(x), days * 86400) &&
              X509_set_pubkey(x, key) == 1 &&
              X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                                         (const unsigned char *)cn, -1, -1, 0) == 1;
    BN_free(bn);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static char *pem_of(int (*write)(BIO *, void *), void *obj)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *data;
    if (b && write(b, obj) == 1) {
        long n = BIO_get_mem_data(b, &data);
        out = n > 0 ? malloc((size_t)n + 1) : NULL;
        if (out) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

static int write_x509(BIO *b, void *x)
{
    return PEM_write_bio_X509(b, x);
}

static int write_key(BIO *b, void *k)
{
    return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

int tc_tls_ca_new(json_t *inject, char **ret_cert_pem, char **ret_key_pem)
{
    /* name constraints: the inject hosts and nothing else, per name form */
    char nc[TC_TLS_MAX_INJECT * 300 + 200] = "critical";
    size_t i;
    json_t *e;
    bool dns = false, ip = false;
    json_array_foreach(inject, i, e)
    {
        const char *host = json_string_value(json_object_get(e, "host"));
        if (!host || strlen(host) > 253)
            return -EINVAL;
        size_t l = strlen(nc);
        if (is_ipv4(host)) {
            snprintf(nc + l, sizeof(nc) - l, ",permitted;IP:%s/255.255.255.255", host);
            ip = true;
        } else {
            snprintf(nc + l, sizeof(nc) - l, ",permitted;DNS:%s", host);
            dns = true;
        }
    }
    size_t l = strlen(nc);
    if (!ip)
        snprintf(nc + l, sizeof(nc) - l, ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::");
    l = strlen(nc);
    if (!dns) /* a name that can never be granted: no DNS name passes */
        snprintf(nc + l, sizeof(nc) - l, ",permitted;DNS:toolcage.invalid");

    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = key ? cert_new(key, "toolcage sandbox CA", 1) : NULL;
    bool ok = x && X509_set_issuer_name(x, X509_get_subject_name(x)) == 1 &&
              add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
              add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
              add_ext(x, x, NID_subject_key_identifier, "hash") &&
              add_ext(x, x, NID_name_constraints, nc) && X509_sign(x, key, EVP_sha256()) > 0;
    char *cert = ok ? pem_of(write_x509, x) : NULL;
    char *pk = ok ? pem_of(write_key, key) : NULL;
    X509_free(x);
    EVP_PKEY_free(key);
    if (!cert || !pk) {
        free(cert);
        if (pk)
            sodium_memzero(pk, strlen(pk));
        free(pk);
        return -EIO;
    }
    *ret_cert_pem = cert;
    *ret_key_pem = pk;
    return 0;
}

char *tc_tls_ca_bundle_b64(const char *cert_pem)
{
    FILE *f = fopen(SYSTEM_BUNDLE, "re");
    char *sys = NULL;
    size_t n = 0, cap = 0;
    if (f) {
        char chunk[65536];
        size_t r;
        while ((r = fread(chunk, 1, sizeof(chunk), f)) > 0) {
            if (n + r + 1 > cap) {
                cap = (n + r + 1) * 2;
                char *p = realloc(sys, cap);
                if (!p)
                    break;
                sys = p;
            }
            memcpy(sys + n, chunk, r);
            n += r;
        }
        fclose(f);
    }
    size_t cl = strlen(cert_pem), total = n + 1 + cl;
    char *all = malloc(total + 1);
    if (!all) {
        free(sys);
        return NULL;
    }
    if (n)
        memcpy(all, sys, n);
    all[n] = '\n';
    memcpy(all + n + 1, cert_pem, cl + 1);
    free(sys);
    size_t bn = sodium_base64_encoded_len(total, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(bn);
    if (b64)
        sodium_bin2base64(b64, bn, (const unsigned char *)all, total,
                          sodium_base64_VARIANT_ORIGINAL);
    free(all);
    return b64;
}

/* ---- the proxy's side ---- */

/* Upstream connections: verified against the system store and the operator's extra file.
 * Built on first use (parsing the system bundle costs ~20 ms, ten times that under emulation,
 * and most launchers never need it); the extra file is read at start, before the proxy
 * drops its privileges (it may be readable by root only). */
static SSL_CTX *g_client;
static char *g_extra_pem;
static pthread_once_t g_client_once = PTHREAD_ONCE_INIT;

static void client_build(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    X509_STORE *store = ctx ? SSL_CTX_get_cert_store(ctx) : NULL;
    if (!store) {
        SSL_CTX_free(ctx);
        return;
    }
    if (X509_STORE_load_file(store, SYSTEM_BUNDLE) != 1)
        ERR_clear_error(); /* a host without the bundle: only the extra file, if any */
    if (g_extra_pem) {
        BIO *b = BIO_new_mem_buf(g_extra_pem, -1);
        X509 *x;
        while (b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
            X509_STORE_add_cert(store, x);
            X509_free(x);
        }
        BIO_free(b);
        ERR_clear_error(); /* the end of the file reads as an error */
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    g_client = ctx;
}

static SSL_CTX *client_ctx(void)
{
    pthread_once(&g_client_once, client_build);
    return g_client;
}

int tc_tls_client_init(const char *extra_ca_file)
{
    OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, NULL);
    if (!extra_ca_file || !*extra_ca_file)
        return 0;
    FILE *f = fopen(extra_ca_file, "re");
    if (!f)
        return -errno;
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap + 1);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *p = cap < (16u << 20) ? realloc(buf, cap * 2 + 1) : NULL;
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return -ENOMEM;
    buf[n] = '\0';
    /* at least one certificate, or the operator's file is not what it should be */
    BIO *b = BIO_new_mem_buf(buf, (int)n);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    ERR_clear_error();
    if (!x) {
        free(buf);
        return -EINVAL;
    }
    X509_free(x);
    g_extra_pem = buf;
    return 0;
}

struct grant {
    char host[TC_EGRESS_HOST_MAX + 1];
    uint16_t port;
    char header[65];
    char *value; /* sodium_malloc'ed */
    char *scrub; /* the secret itself, blanked in answers (sodium_malloc'ed) */
    char secret[132], lease[37];
    SSL_CTX *srv;
};

struct tc_tls_mitm {
    struct grant g[TC_TLS_MAX_INJECT];
    size_t n;
};

static char *secure_dup(const char *s)
{
    size_t l = strlen(s);
    char *p = sodium_malloc(l + 1);
    if (p)
        memcpy(p, s, l + 1);
    return p;
}

void tc_tls_mitm_free(struct tc_tls_mitm *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        if (m->g[i].value)
            sodium_free(m->g[i].value);
        if (m->g[i].scrub)
            sodium_free(m->g[i].scrub);
        SSL_CTX_free(m->g[i].srv);
    }
    free(m);
}

static SSL_CTX *leaf_ctx(X509 *ca, EVP_PKEY *ca_key, EVP_PKEY *key, const char *host)
{
    char san[300];
    snprintf(san, sizeof(san), "%s:%s", is_ipv4(host) ? "IP" : "DNS", host);
    X509 *x = cert_new(key, "toolcage sandbox leaf", 1); /* not a name: only the SAN counts */
    SSL_CTX *ctx = NULL;
    bool ok = x && X509_set_issuer_name(x, X509_get_subject_name(ca)) == 1 &&
              add_ext(ca, x, NID_basic_constraints, "critical,CA:FALSE") &&
              add_ext(ca, x, NID_key_usage, "critical,digitalSignature") &&
              add_ext(ca, x, NID_ext_key_usage, "serverAuth") &&
              add_ext(ca, x, NID_subject_alt_name, san) &&
              add_ext(ca, x, NID_authority_key_identifier, "keyid:always") &&
              X509_sign(x, ca_key, EVP_sha256()) > 0 &&
              (ctx = SSL_CTX_new(TLS_server_method())) != NULL &&
              SSL_CTX_use_certificate(ctx, x) == 1 && SSL_CTX_use_PrivateKey(ctx, key) == 1;
    if (ok) {
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    }
    X509_free(x);
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

struct tc_tls_mitm *tc_tls_mitm_new(const char *ca_cert_pem, const char *ca_key_pem, json_t *inject)
{
    struct tc_tls_mitm *m = calloc(1, sizeof(*m));
    BIO *cb = BIO_new_mem_buf(ca_cert_pem, -1), *kb = BIO_new_mem_buf(ca_key_pem, -1);
    X509 *ca = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *ca_key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *key = EVP_EC_gen("P-256"); /* one key for the sandbox's leaves */
    bool ok = m && ca && ca_key && key && json_array_size(inject) <= TC_TLS_MAX_INJECT;
    size_t i;
    json_t *e;
    json_array_foreach(inject, i, e)
    {
        if (!ok)
            break;
        struct grant *g = &m->g[m->n];
        const char *host = json_string_value(json_object_get(e, "host"));
        const char *header = json_string_value(json_object_get(e, "header"));
        const char *value = json_string_value(json_object_get(e, "value"));
        const char *scrub = json_string_value(json_object_get(e, "scrub"));
        const char *secret = json_string_value(json_object_get(e, "secret"));
        const char *lease = json_string_value(json_object_get(e, "lease_id"));
        json_int_t port = json_integer_value(json_object_get(e, "port"));
        ok = host && header && value && scrub && secret && lease && port >= 1 && port <= 65535 &&
             strlen(host) < sizeof(g->host) && strlen(header) < sizeof(g->header);
        if (!ok)
            break;
        snprintf(g->host, sizeof(g->host), "%s", host);
        g->port = (uint16_t)port;
        snprintf(g->header, sizeof(g->header), "%s", header);
        snprintf(g->secret, sizeof(g->secret), "%s", secret);
        snprintf(g->lease, sizeof(g->lease), "%.36s", lease);
        g->value = secure_dup(value);
        g->scrub = secure_dup(scrub);
        g->srv = leaf_ctx(ca, ca_key, key, host);
        m->n++;
        ok = g->value && g->scrub && g->srv;
    }
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    BIO_free(cb);
    BIO_free(kb);
    if (!ok) {
        tc_tls_mitm_free(m);
        return NULL;
    }
    return m;
}

int tc_tls_mitm_find(const struct tc_tls_mitm *m, const char *host, uint16_t port)
{
    for (size_t i = 0; m && i < m->n; i++)
        if (m->g[i].port == port && strcmp(m->g[i].host, host) == 0)
            return (int)i;
    return -1;
}

const char *tc_tls_mitm_secret(const struct tc_tls_mitm *m, int idx)
{
    return m->g[idx].secret;
}

const char *tc_tls_mitm_lease(const struct tc_tls_mitm *m, int idx)
{
    return m->g[idx].lease;
}

const char *tc_tls_mitm_header(const struct tc_tls_mitm *m, int idx)
{
    return m->g[idx].header;
}

/* ---- one connection ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for what SSL wants after error e: >0, 0 timeout, <0 failure. */
static int wait_ssl(int fd, int e, int64_t deadline)
{
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
    int r = poll(&p, 1, (int)left);
    return r < 0 && errno == EINTR ? 1 : r;
}

static bool ssl_write_all(SSL *s, int fd, const char *p, size_t n, int64_t deadline)
{
    while (n > 0) {
        int w = SSL_write(s, p, n > 65536 ? 65536 : (int)n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (wait_ssl(fd, SSL_get_error(s, w), deadline) <= 0)
            return false;
    }
    return true;
}

/* SSL_accept / SSL_connect on a non-blocking fd, within STEP_MS. */
static bool handshake(SSL *s, int fd, bool server)
{
    int64_t deadline = now_ms() + STEP_MS;
    for (;;) {
        int r = server ? SSL_accept(s) : SSL_connect(s);
        if (r == 1)
            return true;
        if (wait_ssl(fd, SSL_get_error(s, r), deadline) <= 0)
            return false;
    }
}

static void tls_reply(SSL *s, int fd, int status, const char *text, const char *body)
{
    char buf[768];
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     status, text, strlen(body), body);
    if (n > 0 && (size_t)n < sizeof(buf))
        (void)ssl_write_all(s, fd, buf, (size_t)n, now_ms() + 2000);
}

static bool tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("!#$%&'*+-.^_`|~", c);
}

/* Headers the proxy owns on an injected request, or that would let the sandbox steer where the
 * credential goes or read it back piecemeal: dropped from what the sandbox sent. */
static bool dropped(const char *name, size_t len, const char *grant_header)
{
    static const char *const own[] = {"host",
                                      "connection",
                                      "proxy-connection",
                                      "keep-alive",
                                      "te",
                                      "upgrade",
                                      "proxy-authorization",
                                      "accept-encoding",
                                      "range",
                                      "if-range",
                                      "forwarded",
                                      "x-forwarded-host",
                                      "x-forwarded-for",
                                      "x-forwarded-proto",
                                      "x-forwarded-port",
                                      "x-original-url",
                                      "x-rewrite-url",
                                      "x-http-method-override",
                                      "x-http-method",
                                      "x-method-override",
                                      "expect"};
    if (strlen(grant_header) == len && strncasecmp(name, grant_header, len) == 0)
        return true;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strlen(own[i]) == len && strncasecmp(name, own[i], len) == 0)
            return true;
    return false;
}

static bool is_name(const char *p, size_t n, const char *name)
{
    return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

long tc_tls_rewrite_head(const char *in, size_t len, const char *ghost, uint16_t gport,
                         const char *gheader, const char *gvalue, char *out, size_t size,
                         uint64_t *ret_body)
{
    const char *end = in + len, *eol = memchr(in, '\r', len);
    size_t o = 0;
    bool has_cl = false;
    uint64_t body = 0;
    if (!eol || eol + 1 >= end || eol[1] != '\n')
        return -1;
    /* METHOD SP /target SP HTTP/1.x */
    const char *sp1 = memchr(in, ' ', (size_t)(eol - in));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (!sp1 || sp1 == in || !sp2 || sp1[1] != '/' ||
        ((size_t)(eol - sp2 - 1) != 8 ||
         (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0)))
        return -1;
    for (const char *p = in; p < sp1; p++)
        if (!tchar(*p))
            return -1;
    /* TRACE and TRACK echo the request (the credential with it); CONNECT is not a request */
    if (is_name(in, (size_t)(sp1 - in), "TRACE") || is_name(in, (size_t)(sp1 - in), "TRACK") ||
        is_name(in, (size_t)(sp1 - in), "CONNECT"))
        return -1;
    for (const char *p = sp1 + 1; p < sp2; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return -1;
#define PUT(p, n)                                                                                  \
    do {                                                                                           \
        if (o + (n) > size)                                                                        \
            return -1;                                                                             \
        memcpy(out + o, (p), (n));                                                                 \
        o += (n);                                                                                  \
    } while (0)
    /* upstream as HTTP/1.0: an answer is never chunked (chunk-size lines could cut the secret
     * where the blanking does not see it whole) and the connection ends with it */
    PUT(in, (size_t)(sp2 - in) + 1);
    PUT("HTTP/1.0\r\n", 10);
    for (const char *line = eol + 2; line < end;) {
        const char *le = memchr(line, '\r', (size_t)(end - line));
        if (!le || le + 1 >= end || le[1] != '\n')
            return -1;
        if (le == line)
            break; /* the blank line */
        const char *colon = memchr(line, ':', (size_t)(le - line));
        if (!colon || colon == line)
            return -1;
        for (const char *p = line; p < colon; p++)
            if (!tchar(*p))
                return -1;
        for (const char *p = colon + 1; p < le; p++)
            if (*p == '\n' || *p == '\0')
                return -1;
        size_t nl = (size_t)(colon - line);
        /* one body, framed one way: a Content-Length (once, digits only) or none; no
         * Transfer-Encoding, so the upstream cannot read a second request into it */
        if (is_name(line, nl, "transfer-encoding"))
            return -2;
        if (is_name(line, nl, "content-length")) {
            const char *v = colon + 1, *ve = le;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (has_cl || v == ve || ve - v > 15)
                return -1;
            body = 0;
            for (const char *d = v; d < ve; d++) {
                if (*d < '0' || *d > '9')
                    return -1;
                body = body * 10 + (uint64_t)(*d - '0');
            }
            has_cl = true;
        }
        if (!dropped(line, nl, gheader))
            PUT(line, (size_t)(le - line) + 2);
        line = le + 2;
    }
    char host[TC_EGRESS_HOST_MAX + 16];
    int hl = gport == 443 ? snprintf(host, sizeof(host), "Host: %s\r\n", ghost)
                          : snprintf(host, sizeof(host), "Host: %s:%u\r\n", ghost, (unsigned)gport);
    PUT(host, (size_t)hl);
    PUT(gheader, strlen(gheader));
    PUT(": ", 2);
    PUT(gvalue, strlen(gvalue));
    PUT("\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n", 50);
#undef PUT
    if (ret_body)
        *ret_body = body;
    return (long)o;
}

/* Blanks every occurrence of the secret in what the upstream answers, across reads: the
 * last len-1 bytes wait for the next read. Same length ('*'), so framing holds. */
static void scrub_span(struct tc_tls_scrubber *sc, char *p, size_t n)
{
    if (sc->len < 4)
        return;
    for (char *q = p; (size_t)(q - p) + sc->len <= n;) {
        char *hit = memmem(q, n - (size_t)(q - p), sc->secret, sc->len);
        if (!hit)
            break;
        memset(hit, '*', sc->len);
        q = hit + sc->len;
    }
}

/* data (n bytes, in buf of room bytes) joined to the tail, scrubbed; what may go out now is
 * written to out (room bytes), its length returned; the new tail kept. */
size_t tc_tls_scrub_feed(struct tc_tls_scrubber *sc, const char *data, size_t n, char *out,
                         size_t room, bool last)
{
    size_t keep = sc->len > 1 && sc->len - 1 <= sizeof(sc->tail) ? sc->len - 1 : 0;
    size_t total = sc->ntail + n;
    if (total > room)
        total = room, n = room - sc->ntail;
    memcpy(out, sc->tail, sc->ntail);
    memcpy(out + sc->ntail, data, n);
    scrub_span(sc, out, total);
    size_t emit = last || total <= keep ? (last ? total : 0) : total - keep;
    sc->ntail = total - emit;
    memcpy(sc->tail, out + emit, sc->ntail);
    return emit;
}

/* What an SSL call that did not complete waits for: POLLIN or POLLOUT, or 0 (it failed). */
static short wants(SSL *s, int r)
{
    int e = SSL_get_error(s, r);
    return e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
}

const char *tc_tls_mitm_serve(struct tc_tls_mitm *m, int idx, int cfd, int ufd, int idle_ms,
                              uint64_t *sent, uint64_t *received, bool *ret_injected)
{
    const struct grant *g = &m->g[idx];
    const char *why = NULL;
    SSL_CTX *client = client_ctx();
    SSL *cs = SSL_new(g->srv), *us = client ? SSL_new(client) : NULL;
    char head[HEAD_MAX], out[HEAD_MAX + 4096 + 512], buf[16384];
    char clean[sizeof(buf) + sizeof(((struct tc_tls_scrubber *)0)->tail)];
    size_t len = 0;
    long hl;
    uint64_t body = 0;
    struct tc_tls_scrubber sc = {.secret = g->scrub, .len = strlen(g->scrub)};

    *ret_injected = false;
    fcntl(cfd, F_SETFL, fcntl(cfd, F_GETFL) | O_NONBLOCK);
    fcntl(ufd, F_SETFL, fcntl(ufd, F_GETFL) | O_NONBLOCK);
    if (!cs || !us || SSL_set_fd(cs, cfd) != 1 || SSL_set_fd(us, ufd) != 1) {
        why = "proxy_error";
        goto out;
    }
    if (!handshake(cs, cfd, true)) { /* the sandbox does not trust its CA, or spoke no TLS */
        why = "tls_client_failed";
        goto out;
    }
    /* the request head, within STEP_MS */
    int64_t deadline = now_ms() + STEP_MS;
    const char *blank = NULL;
    while (!blank) {
        if (len == sizeof(head)) {
            tls_reply(cs, cfd, 431, "Request Header Fields Too Large",
                      "toolcage egress proxy: request head too large\n");
            why = "request_too_large";
            goto out;
        }
        int r = SSL_read(cs, head + len, (int)(sizeof(head) - len));
        if (r > 0) {
            len += (size_t)r;
            blank = memmem(head, len, "\r\n\r\n", 4);
            continue;
        }
        if (wait_ssl(cfd, SSL_get_error(cs, r), deadline) <= 0) {
            why = "incomplete_request";
            goto out;
        }
    }
    size_t head_len = (size_t)(blank - head) + 4;
    hl = tc_tls_rewrite_head(head, head_len, g->host, g->port, g->header, g->value, out,
                             sizeof(out), &body);
    if (hl == -2) {
        tls_reply(cs, cfd, 411, "Length Required",
                  "toolcage egress proxy: a request with a credential has a Content-Length body"
                  " or none (no Transfer-Encoding)\n");
        why = "bad_request";
        goto out;
    }
    if (hl < 0) {
        tls_reply(cs, cfd, 400, "Bad Request",
                  "toolcage egress proxy: only origin-form HTTP/1.x requests (not TRACE) are"
                  " forwarded with a credential\n");
        why = "bad_request";
        goto out;
    }
    /* the upstream: verified against the system store, for this very host */
    SSL_set_verify(us, SSL_VERIFY_PEER, NULL);
    bool named = is_ipv4(g->host) ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(us), g->host) == 1
                                  : SSL_set_tlsext_host_name(us, g->host) == 1 &&
                                        SSL_set1_host(us, g->host) == 1;
    if (named)
        SSL_set_hostflags(us, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (!named || !handshake(us, ufd, false)) {
        char text[400];
        snprintf(text, sizeof(text),
                 "toolcage egress proxy: %s:%u did not present a certificate that verifies\n",
                 g->host, (unsigned)g->port);
        tls_reply(cs, cfd, 502, "Bad Gateway", text);
        why = "tls_upstream_failed";
        goto out;
    }
    /* the head, and of the body only what its Content-Length says: nothing after it */
    size_t early = len - head_len < body ? len - head_len : (size_t)body;
    deadline = now_ms() + STEP_MS;
    if (!ssl_write_all(us, ufd, out, (size_t)hl, deadline)) {
        why = "connect_failed";
        goto out;
    }
    *ret_injected = true; /* the credential left for the upstream */
    if (!ssl_write_all(us, ufd, head + head_len, early, deadline)) {
        why = "connect_failed";
        goto out;
    }
    *sent += (uint64_t)hl + early;
    body -= early;

    /* relay: the rest of the body up, the answer (blanked) down, until the upstream closes */
    short up_want = POLLIN, down_want = POLLIN; /* what each side's last SSL_read waits for */
    bool up_open = body > 0;
    for (;;) {
        bool moved = false;
        int r = SSL_read(us, buf, sizeof(buf));
        if (r > 0) {
            size_t n = tc_tls_scrub_feed(&sc, buf, (size_t)r, clean, sizeof(clean), false);
            if (!ssl_write_all(cs, cfd, clean, n, now_ms() + STEP_MS))
                break;
            *received += (uint64_t)r;
            moved = true;
            down_want = POLLIN;
        } else if (!(down_want = wants(us, r))) { /* the answer ended */
            size_t n = tc_tls_scrub_feed(&sc, "", 0, clean, sizeof(clean), true);
            (void)ssl_write_all(cs, cfd, clean, n, now_ms() + STEP_MS);
            SSL_shutdown(cs);
            break;
        }
        if (up_open) {
            r = SSL_read(cs, buf, body < sizeof(buf) ? (int)body : (int)sizeof(buf));
            if (r > 0) {
                if (!ssl_write_all(us, ufd, buf, (size_t)r, now_ms() + STEP_MS))
                    break;
                *sent += (uint64_t)r;
                body -= (uint64_t)r;
                up_open = body > 0; /* whatever the sandbox sends after its body is not read */
                moved = true;
                up_want = POLLIN;
            } else if (!(up_want = wants(cs, r))) {
                up_open = false; /* the sandbox is done sending (or gone): the answer may come */
            }
        }
        if (moved || SSL_pending(us) > 0 || (up_open && SSL_pending(cs) > 0))
            continue;
        struct pollfd p[2] = {{.fd = ufd, .events = down_want}, {.fd = cfd, .events = up_want}};
        int pr = poll(p, up_open ? 2 : 1, idle_ms);
        if (pr == 0) { /* idle: what waited for the blanking goes out, then the end */
            size_t n = tc_tls_scrub_feed(&sc, "", 0, clean, sizeof(clean), true);
            (void)ssl_write_all(cs, cfd, clean, n, now_ms() + STEP_MS);
            break;
        }
        if (pr < 0 && errno != EINTR)
            break;
    }
out:
    sodium_memzero(out, sizeof(out));
    sodium_memzero(buf, sizeof(buf));
    sodium_memzero(clean, sizeof(clean));
    sodium_memzero(&sc, sizeof(sc));
    SSL_free(cs);
    SSL_free(us);
    ERR_clear_error();
    return why;
}
