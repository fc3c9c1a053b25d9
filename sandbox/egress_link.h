/* Launcher side of the egress proxy (sandbox/egress.h): spawn it, give it each sandbox's
 * listener and allowlist, and hold a finished sandbox's result until the proxy has
 * reported that sandbox's connection attempts (or a deadline passes). Single-threaded,
 * like the launcher that owns it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/spec.h"

#define TC_EGRESS_FINAL_TIMEOUT_MS 2000

struct tc_egress_link;

typedef void (*tc_egress_deliver_fn)(void *userdata, const char *id, json_t *result);
/* An attempt as the proxy decides it, or a connection's bytes as it ends (ATTEMPT,
 * egress_proto.h): json is one attempt with its "index" in the sandbox's list. ask: the
 * same for a connection held for a reviewer (ASK): {"ask", "host", "port", "index"}. */
typedef void (*tc_egress_attempt_fn)(void *userdata, uint64_t handle, const char *json, size_t len);
/* What the link calls with the proxy's news: a parked result complete (deliver), an attempt,
 * an ask. */
struct tc_egress_handlers {
    tc_egress_deliver_fn deliver;
    tc_egress_attempt_fn attempt, ask;
    void *userdata;
};

/* Fork the proxy (no exec; call this once, at launcher start, before any sandbox exists:
 * the proxy keeps a copy of the launcher's memory as it is now). The link keeps its
 * socket registered in epfd (EPOLLIN, data.u64 = epdata). -ENOTSUP without the
 * proxy (tc_egress_available). */
int tc_egress_link_new(int epfd, uint64_t epdata, const char *ca_file,
                       const struct tc_egress_handlers *handlers, struct tc_egress_link **ret_link);
/* Kill the proxy, reap it, drop parked results. NULL is a no-op. */
void tc_egress_link_free(struct tc_egress_link *l);

pid_t tc_egress_link_pid(const struct tc_egress_link *l); /* 0 while there is none */

/* Create the sandbox's proxy endpoint: a TCP listener on 127.0.0.1:3128 in the network
 * namespace of pid (entered with setns and left again), registered with the proxy
 * together with allow (the spec's network.allow). A proxy that died is started again here
 * (exec'd, at most once a second); -ENETUNREACH when there is none. */
int tc_egress_link_attach(struct tc_egress_link *l, pid_t pid, json_t *allow, int64_t ask_ms,
                          bool ask_private, json_t *tls, uint64_t *ret_handle);
/* A spec with "inject" (egress_tls.h): a CA of its own. Its bundle (the system's and it) goes
 * to /run/secrets/toolcage-ca.pem, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and
 * NODE_EXTRA_CA_CERTS name it (replacing the tool's); *ret_tls (for attach) holds inject, the
 * certificate and the key. spec_json is the spec's JSON (its secret_files grows). 0/-errno. */
int tc_egress_spec_tls(struct tc_spec *spec, json_t *spec_json, json_t **ret_tls);
/* A reviewer's answer to one of the sandbox's asks ({"ask": n, "verdict": ...},
 * egress_proto.h VERDICT). 0 or -errno. */
int tc_egress_link_verdict(struct tc_egress_link *l, uint64_t handle, const char *json);
/* The sandbox is gone: the proxy cuts its connections and reports (FINAL). */
void tc_egress_link_close(struct tc_egress_link *l, uint64_t handle);

/* Hold result (owned) until FINAL for handle arrives or deadline_ms passes, then hand it
 * to deliver with "network" (and "network_dropped") filled in. A handle of a proxy that has
 * died (a later one runs, or none) is delivered at once with network_error. */
void tc_egress_link_park(struct tc_egress_link *l, uint64_t handle, const char *id, json_t *result,
                         int64_t deadline_ms);
void tc_egress_link_on_readable(struct tc_egress_link *l);
void tc_egress_link_tick(struct tc_egress_link *l, int64_t now_ms);
size_t tc_egress_link_parked(const struct tc_egress_link *l);

/* Give a spec with network.allow the proxy environment: HTTP_PROXY, HTTPS_PROXY (and
 * lowercase) = http://127.0.0.1:3128, NO_PROXY=localhost,127.0.0.1,::1 unless the allowlist
 * names a loopback address literally (then no NO_PROXY, so requests to it use the proxy).
 * Replaces spec->envp (the spec's own *_PROXY entries are dropped). 0 or -ENOMEM. */
int tc_egress_spec_env(struct tc_spec *spec);
