/* Launcher <-> egress proxy messages: one fixed-size header per SOCK_SEQPACKET datagram,
 * an optional JSON payload in a sealed memfd and, for ADD, the sandbox's listening socket,
 * both passed with SCM_RIGHTS. Same checks as sandbox/wire.c; anything else is -EBADMSG.
 *
 *   ADD   launcher -> proxy  handle, payload ["rule", ...], fd = listener in the sandbox netns
 *   CLOSE launcher -> proxy  handle: the sandbox is gone; stop, cut its connections, report
 *   FINAL proxy -> launcher  handle, payload {"attempts": [...], "dropped": n}
 *   ATTEMPT proxy -> launcher handle, payload one attempt as FINAL lists it plus its "index"
 *                             there: once when the proxy decides it, again with its bytes when
 *                             a connection it let through ends. Sent without waiting (dropped
 *                             when the launcher is behind): live news, FINAL is the record.
 *   (ADD's payload: {"allow": [rule, ...], "ask_ms": n, "ask_private": bool, and for
 *    credentials at egress "inject", "ca_cert", "ca_key": egress_tls.h})
 *   ASK   proxy -> launcher  handle, payload {"ask": n, "host", "port", "index", "timeout_ms"}:
 *                             a connection
 *                             to a host the rules do not allow is held for a reviewer (ADD's
 *                             "ask_ms" > 0); n counts the sandbox's asks from 0
 *   VERDICT launcher -> proxy handle, payload {"ask": n, "verdict": "allow_once" |
 *                             "allow_execution" | "deny"}; none within ask_ms is a deny
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define TC_EG_MAGIC       0x74636567U /* "tceg" */
#define TC_EG_MAX_PAYLOAD (1u << 20)

enum tc_eg_type {
    TC_EG_ADD = 1,
    TC_EG_CLOSE,
    TC_EG_FINAL,
    TC_EG_ATTEMPT,
    TC_EG_ASK,
    TC_EG_VERDICT,
    TC_EG_TYPE_MAX_,
};

struct tc_eg_hdr {
    uint32_t magic;
    uint32_t type;
    uint64_t handle; /* launcher-chosen, never 0 */
    uint32_t len;    /* payload bytes in the memfd; 0 = no memfd */
    uint32_t has_fd; /* 1: one more fd (the listener) follows the memfd */
};

/* 0 or -errno. fd < 0: none. */
int tc_eg_send(int sock, enum tc_eg_type type, uint64_t handle, const char *payload, size_t len,
               int fd);
/* 0, -EAGAIN, -EPIPE (EOF), -EBADMSG, or -errno. *ret_payload: malloc'ed, NUL-terminated, or
 * NULL; *ret_fd: the passed fd (O_CLOEXEC) or -1. */
int tc_eg_recv(int sock, struct tc_eg_hdr *ret_hdr, char **ret_payload, int *ret_fd);
