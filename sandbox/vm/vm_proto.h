/* The microvm backend's one channel between toolcage-vmrun (host side, inside a native
 * sandbox, beside qemu) and toolcage-vminit (the guest's PID 1): a virtio-serial port named
 * "toolcage", carried by qemu over a socket vmrun holds. Frames, both ways:
 *
 *   u8 type, u32 length (little endian), length bytes
 *
 * host -> guest: CONFIG once (the program: NUL-terminated strings, see below), then STDIN
 * data and one STDIN_EOF. guest -> host: READY when the guest is up and waits for CONFIG,
 * STARTED when the program was exec'ed, STDOUT and STDERR data, then one EXIT (struct
 * tc_vm_exit, little endian) or FAIL (a message: the guest could not start the program; vmrun
 * prints it and exits 125).
 *
 * CONFIG: "key=value\0" strings (uid, memory, pids, nofile, fsize, cpu_ms, tmp_bytes, cwd,
 * hostname, secrets), "argc=N\0" and "envc=M\0" last, then exactly N argv strings and M
 * environment strings (counted: no string of the program's is ever read as a key). Everything the
 * guest reads is bounded by TC_VM_FRAME_MAX; a guest is one call's, so it trusts the host, and the
 * host trusts nothing of the guest but frame boundaries (vmrun checks every length). */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define TC_VM_PORT      "toolcage"
#define TC_VM_FRAME_MAX (1u << 20)

enum {
    TC_VM_CONFIG = 'C',
    TC_VM_STDIN = 'I',
    TC_VM_STDIN_EOF = 'E',
    TC_VM_READY = 'R',
    TC_VM_STARTED = 'S',
    TC_VM_STDOUT = 'O',
    TC_VM_STDERR = 'e',
    TC_VM_EXIT = 'X',
    TC_VM_FAIL = 'F',
};

#define TC_VM_HDR 5

/* EXIT: how the program ended and what the guest's kernel saw of it (its cgroup). */
struct tc_vm_exit {
    uint32_t kind; /* 0: exited with value; 1: killed by signal value */
    uint32_t value;
    uint32_t oom;    /* memory.events oom_kill > 0: the memory limit killed a process */
    uint32_t pids;   /* pids.events max > 0: a fork met the pids limit */
    uint64_t cpu_us; /* cpu.stat usage_usec: every process of the program */
    uint64_t peak;   /* memory.peak, bytes */
};
#define TC_VM_EXIT_LEN 32

/* What toolcage-vmrun hands the launcher about the guest, through the sandbox's PID 1 (the
 * verdict pipe, init_proto.h TC_INIT_F_VERDICT): one line, "v1 <oom> <pids> <cpu_us> <peak>".
 * As trusted as the guest's kernel and qemu: it explains an outcome (killed_reason, cpu_ms,
 * memory_peak_bytes, pids_limit_hit), it enforces nothing. */
#define TC_VM_VERDICT_FMT "v1 %u %u %llu %llu"

static inline void tc_vm_hdr(unsigned char h[TC_VM_HDR], int type, uint32_t len)
{
    h[0] = (unsigned char)type;
    h[1] = (unsigned char)(len & 0xff);
    h[2] = (unsigned char)((len >> 8) & 0xff);
    h[3] = (unsigned char)((len >> 16) & 0xff);
    h[4] = (unsigned char)((len >> 24) & 0xff);
}

static inline void tc_vm_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t tc_vm_get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void tc_vm_exit_pack(unsigned char b[TC_VM_EXIT_LEN], const struct tc_vm_exit *x)
{
    tc_vm_put32(b, x->kind);
    tc_vm_put32(b + 4, x->value);
    tc_vm_put32(b + 8, x->oom);
    tc_vm_put32(b + 12, x->pids);
    tc_vm_put32(b + 16, (uint32_t)x->cpu_us);
    tc_vm_put32(b + 20, (uint32_t)(x->cpu_us >> 32));
    tc_vm_put32(b + 24, (uint32_t)x->peak);
    tc_vm_put32(b + 28, (uint32_t)(x->peak >> 32));
}

static inline void tc_vm_exit_unpack(const unsigned char b[TC_VM_EXIT_LEN], struct tc_vm_exit *x)
{
    x->kind = tc_vm_get32(b);
    x->value = tc_vm_get32(b + 4);
    x->oom = tc_vm_get32(b + 8);
    x->pids = tc_vm_get32(b + 12);
    x->cpu_us = tc_vm_get32(b + 16) | (uint64_t)tc_vm_get32(b + 20) << 32;
    x->peak = tc_vm_get32(b + 24) | (uint64_t)tc_vm_get32(b + 28) << 32;
}

static inline uint32_t tc_vm_len(const unsigned char h[TC_VM_HDR])
{
    return tc_vm_get32(h + 1);
}

/* Both programs' (static, without the project's libraries) I/O on the port and the streams:
 * all of it, through EINTR, short counts and (a non-blocking fd) EAGAIN; -1 otherwise. */
static inline int tc_vm_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
            if (errno == EAGAIN) {
                struct timespec ts = {0, 1000000L};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* exactly len bytes: -1 at EOF or an error before */
static inline int tc_vm_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}
