/* The microvm backend's one channel between toolcage-vmrun (host side, inside a native
 * sandbox, beside qemu) and toolcage-vminit (the guest's PID 1): a virtio-serial port named
 * "toolcage", carried by qemu over a socket vmrun holds. Frames, both ways:
 *
 *   u8 type, u32 length (little endian), length bytes
 *
 * host -> guest: CONFIG once (the program: NUL-terminated strings, see below), then STDIN
 * data and one STDIN_EOF. guest -> host: READY when the guest is up and waits for CONFIG,
 * STARTED when the program was exec'ed, STDOUT and STDERR data, then one EXIT (u32 kind,
 * u32 value: kind 0 = exited with value, 1 = killed by signal value) or FAIL (a message:
 * the guest could not start the program; vmrun prints it and exits 125).
 *
 * CONFIG: "key=value\0" strings (uid, memory, pids, nofile, fsize, cpu_ms, tmp_bytes, cwd,
 * hostname, secrets), "argc=N\0" and "envc=M\0" last, then exactly N argv strings and M
 * environment strings (counted: no string of the program's is ever read as a key). Everything the
 * guest reads is bounded by TC_VM_FRAME_MAX; a guest is one call's, so it trusts the host, and the
 * host trusts nothing of the guest but frame boundaries (vmrun checks every length). */
#pragma once

#include <stdint.h>

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

static inline void tc_vm_hdr(unsigned char h[TC_VM_HDR], int type, uint32_t len)
{
    h[0] = (unsigned char)type;
    h[1] = (unsigned char)(len & 0xff);
    h[2] = (unsigned char)((len >> 8) & 0xff);
    h[3] = (unsigned char)((len >> 16) & 0xff);
    h[4] = (unsigned char)((len >> 24) & 0xff);
}

static inline uint32_t tc_vm_len(const unsigned char h[TC_VM_HDR])
{
    return (uint32_t)h[1] | (uint32_t)h[2] << 8 | (uint32_t)h[3] << 16 | (uint32_t)h[4] << 24;
}
