/* Launcher <-> server wire format: one fixed-size header per SOCK_SEQPACKET message,
 * the (JSON) payload in a sealed memfd passed with SCM_RIGHTS. Sizes are checked on
 * both ends; anything malformed is rejected with -EBADMSG. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define TC_WIRE_MAGIC       0x7463776eU /* "tcwn" */
#define TC_WIRE_MAX_PAYLOAD (64u << 20)

enum tc_wire_type {
    TC_WIRE_HELLO = 1, /* launcher -> server: host info JSON; later, the fields that changed */
    TC_WIRE_SUBMIT,    /* server -> launcher: spec JSON */
    TC_WIRE_CANCEL,    /* server -> launcher: id only */
    TC_WIRE_RESULT,    /* launcher -> server: result JSON */
    TC_WIRE_SHUTDOWN,  /* server -> launcher: kill everything and exit */
    TC_WIRE_READY,     /* launcher -> server: id only; a "hold" sandbox is set up, waiting */
    TC_WIRE_GO,        /* server -> launcher: id only; start the held sandbox's program */
    TC_WIRE_CHUNK,     /* launcher -> server: output of a "stream" sandbox as it comes: one
                        * byte '1' (stdout) or '2' (stderr), then the bytes; only bytes that
                        * the result will also hold (within the output cap), in order; or '3'
                        * .. '5' and news as JSON (sandbox.h) */
    TC_WIRE_INPUT,     /* server -> launcher: bytes for a "session" sandbox's stdin, appended to
                        * what it has not read yet; an empty payload closes its stdin */
    TC_WIRE_INTERRUPT, /* server -> launcher: id only; SIGINT to a "session" sandbox's program
                        * and its process group (PID 1 forwards it) */
    TC_WIRE_FILE,      /* server -> launcher: a file operation in a "session" sandbox's
                        * workspace: a JSON line {req, op: get|put|delete|list, path?, max?},
                        * then (put) the file's bytes */
    TC_WIRE_FILE_DONE, /* launcher -> server: its answer, a JSON line {req, errno?, size?,
                        * created?, entries?, incomplete?}, then (get) the file's bytes */
    TC_WIRE_BUDGET,    /* server -> launcher: "<ms> <call>": a "session" sandbox's CPU budget for
                        * one call, from now (0: none); the launcher answers as a TC_WIRE_CHUNK
                        * '4' {call, meter} and, when it is spent, sends SIGINT as
                        * TC_WIRE_INTERRUPT does and '4' {call, spent_ms} */
    TC_WIRE_ASK,       /* launcher -> server: the egress proxy holds a connection of this sandbox
                        * for a reviewer: {"ask": n, "host", "port", "index"} (egress_proto.h) */
    TC_WIRE_VERDICT,   /* server -> launcher: the answer, {"ask": n, "verdict": "allow_once" |
                        * "allow_execution" | "deny"}, passed on to the proxy */
    TC_WIRE_TYPE_MAX_,
};

struct tc_wire_hdr {
    uint32_t magic;
    uint32_t type;
    uint64_t len; /* payload bytes in the memfd; 0 = no fd */
    char id[72];  /* NUL-terminated sandbox id (<= 64 chars), or empty */
};

/* Send one message. 0 or -errno. */
/* A sealed (seal, shrink, grow, write) memfd holding payload: the receiver can trust its
 * size and that nobody changes it after the check. The fd, or -errno. */
int tc_wire_memfd_new(const void *payload, size_t len);
/* Read exactly len bytes from a memfd made by tc_wire_memfd_new (its seals and size are
 * checked: -EBADMSG otherwise) into a fresh NUL-terminated buffer. */
int tc_wire_memfd_read(int fd, uint64_t len, char **ret);

int tc_wire_send(int sock, enum tc_wire_type type, const char *id, const void *payload, size_t len);
/* Receive one message. *ret_payload is malloc'ed and NUL-terminated (NULL when len == 0).
 * 0, -EPIPE on orderly EOF, -EAGAIN if non-blocking and nothing is there, -EBADMSG on a
 * malformed message, or another -errno. */
int tc_wire_recv(int sock, struct tc_wire_hdr *ret_hdr, char **ret_payload);

/* Receive one fd plus a small blob over a unix socket (sandbox child -> launcher). Returns
 * bytes received (>= 0), *ret_fd = -1 when none came. */
long tc_recv_fd(int sock, int *ret_fd, void *data, size_t len);
