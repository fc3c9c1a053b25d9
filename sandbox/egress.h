/* The egress proxy: a process forked by the launcher at its start (never exec'd).
 *
 * One process for all sandboxes, outside them. For each sandbox whose spec allows network
 * the launcher creates a TCP listener on 127.0.0.1:3128 *inside the sandbox's network
 * namespace* and hands it over (ADD); connections from the sandbox land here, are checked
 * against that sandbox's allowlist, resolved here (the sandbox has no DNS), checked again
 * by address class, and relayed. CLOSE ends a sandbox: its connections are cut and every
 * attempt is reported back (FINAL). Protocol: sandbox/egress_proto.h; rules:
 * sandbox/egress_rules.h; launcher side: sandbox/egress_link.h. */
#pragma once

#include <sys/types.h>

/* Per-sandbox and process-wide caps (documented in docs/sandbox.md). */
#define TC_EGRESS_MAX_CONN_SANDBOX 32
#define TC_EGRESS_MAX_CONN_TOTAL   1024
#define TC_EGRESS_MAX_ATTEMPTS     256 /* recorded per sandbox; further ones are counted */
#define TC_EGRESS_MAX_ASKS         8   /* hosts asked about per sandbox; further ones denied */

/* Body of the proxy process: serve the launcher on fd (SOCK_SEQPACKET) until it goes away.
 * Drops to nobody with no_new_privs first and re-arms PR_SET_PDEATHSIG (checked against
 * ppid). Returns the process exit code.
 *
 * The proxy and its TLS (egress.c, egress_tls.c, which bring OpenSSL) are the object library
 * tcegress: linked into toolcage-server, toolcage-launcher and the tests, not into the lean
 * `toolcage` (main/front.c), whose one launcher is a fork that never runs a proxy (no_exec
 * needs no_egress) and which need not load OpenSSL for it (~0.7 ms of every `toolcage exec`:
 * its 4,000 symbol bindings). The references from the launcher's side are weak: NULL in that
 * binary, where tc_egress_available() is false and a spec that allows network fails. */
int tc_egress_run(int fd, pid_t ppid, const char *ca_file) __attribute__((weak));
