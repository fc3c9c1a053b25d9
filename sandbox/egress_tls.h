/* Credentials at egress: TLS for the egress proxy (OpenSSL).
 *
 * A sandbox whose spec has "inject" entries ({host, port, header, value, scrub, secret,
 * lease_id}: a policy grant `"as": "header"`) gets a CA of its own, made by the launcher at
 * its start (tc_tls_ca_new): its certificate joins the system's in a bundle the sandbox trusts
 * (/run/secrets/toolcage-ca.pem, SSL_CERT_FILE and friends); its key only goes to the proxy.
 * A CONNECT to an inject host:port is terminated by the proxy with a leaf certificate that CA
 * signs; each request is read, its Host forced to the granted host, the credential header set
 * (any the sandbox sent dropped), Connection: close, and sent over a TLS connection to the
 * upstream that is verified against the system store (and the operator's extra CA file). The
 * secret never enters the sandbox; the proxy also blanks it in what the upstream answers.
 * Other hosts are tunnelled untouched. The CA is name-constrained to the inject hosts and
 * lives as long as the sandbox. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_TLS_MAX_INJECT     16
#define TC_TLS_CA_BUNDLE_NAME "toolcage-ca.pem" /* in /run/secrets */

/* Launcher: a fresh CA (EC P-256, a day long, name-constrained to the inject entries'
 * hosts). *ret_cert_pem, *ret_key_pem: malloc'ed; the key is wiped by the caller. 0/-errno. */
int tc_tls_ca_new(json_t *inject, char **ret_cert_pem, char **ret_key_pem) __attribute__((weak));
/* The system's CA bundle followed by cert_pem, base64 (for a secret_files entry), malloc'ed;
 * NULL on failure. */
char *tc_tls_ca_bundle_b64(const char *cert_pem) __attribute__((weak));
/* (both weak: the launcher's side links without them where no proxy runs, sandbox/egress.h) */

/* Proxy, once, before it drops its privileges: reads extra_ca_file (when not NULL; it must
 * hold a PEM certificate). Upstreams are verified against the system bundle and it; the store
 * is built on first use. 0 or -errno. */
int tc_tls_client_init(const char *extra_ca_file);

struct tc_tls_mitm;
/* Proxy, per sandbox: leaf certificates for every inject host. NULL on failure. */
struct tc_tls_mitm *tc_tls_mitm_new(const char *ca_cert_pem, const char *ca_key_pem,
                                    json_t *inject);
void tc_tls_mitm_free(struct tc_tls_mitm *m);
/* The inject entry for host:port, or -1. */
int tc_tls_mitm_find(const struct tc_tls_mitm *m, const char *host, uint16_t port);
/* Its secret's name and lease id (for the attempt's record). */
const char *tc_tls_mitm_secret(const struct tc_tls_mitm *m, int idx);
const char *tc_tls_mitm_lease(const struct tc_tls_mitm *m, int idx);
const char *tc_tls_mitm_header(const struct tc_tls_mitm *m, int idx);

/* After "200 Connection established" on cfd (the sandbox) with ufd connected to the upstream:
 * terminate, inject, relay until either side closes or idle_ms pass without a byte. Plaintext
 * bytes are added to *sent / *received. Returns NULL when the exchange ran, else why it did
 * not ("tls_client_failed", "tls_upstream_failed", "bad_request", ...); the sandbox got a
 * 4xx/5xx over TLS when that was still possible. */
const char *tc_tls_mitm_serve(struct tc_tls_mitm *m, int idx, int cfd, int ufd, int idle_ms,
                              uint64_t *sent, uint64_t *received, bool *ret_injected);

/* ---- the parts the unit tests reach ---- */

/* The request head (ending with its blank line) an injected request goes out with: the
 * sandbox's request line (origin-form target, HTTP/1.x) and headers, minus the credential
 * header, Host, hop-by-hop headers and Accept-Encoding, plus Host, the credential and
 * Connection: close. Length, or -1 for a head this proxy does not forward (absolute-form or
 * CONNECT targets, obs-fold,
 * bare LF, bad names, TRACE/TRACK/CONNECT, a Content-Length that is not one number) or that
 * does not fit size; -2 for a Transfer-Encoding (a body must have a Content-Length: one
 * request, one body, framed one way). It goes upstream as HTTP/1.0 (answers are never
 * chunked) with Accept-Encoding: identity; Range, Forwarded, X-Forwarded-*, method overrides
 * and Expect are dropped too. *ret_body: the body's length. */
long tc_tls_rewrite_head(const char *in, size_t len, const char *host, uint16_t port,
                         const char *header, const char *value, char *out, size_t size,
                         uint64_t *ret_body);

/* Blanks (same length, '*') every occurrence of secret in a stream, across pieces: the last
 * len-1 bytes of each piece wait for the next one (or last). Secrets under 4 bytes are not
 * blanked. */
struct tc_tls_scrubber {
    const char *secret;
    size_t len;
    char tail[4096]; /* a secret is at most 4096 bytes (sandbox/spec.c) */
    size_t ntail;
};
/* data joined to what waited; what may go out now is written to out (room >= n + 4096), its
 * length returned. */
size_t tc_tls_scrub_feed(struct tc_tls_scrubber *sc, const char *data, size_t n, char *out,
                         size_t room, bool last);
