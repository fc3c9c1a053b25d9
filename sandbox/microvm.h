/* microvm backend (docs/sandbox.md): a separate guest kernel under qemu's microvm machine,
 * under TCG (qemu's emulation). KVM needs /dev/kvm inside the native sandbox qemu runs in,
 * open to the sandbox's uid: not done yet (docs/sandbox.md says what it takes), so every
 * guest is emulated today and says so (enforced.isolation "microvm_tcg").
 *
 * The launcher runs a microvm call as a native sandbox whose program is toolcage-vmrun
 * (sandbox/vm/vmrun.c): qemu stays inside every native boundary (namespaces, cgroup,
 * seccomp, rlimits, no network), and the guest kernel is one more. tc_vm_rewrite() turns
 * the call's spec into that native spec; the program's own limits go to the guest, which
 * enforces them with its own cgroup and rlimits (sandbox/vm/vminit.c). */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the launcher's VM directory (kernel, initrd, vmrun) appears in the sandbox. */
#define TC_VM_MOUNT "/run/toolcage-vm"

struct tc_vm_host {
    bool available;
    char why[192];           /* when not available */
    char accel[8];           /* "kvm" or "tcg" (what a call started now gets) */
    char kernel[64];         /* the guest kernel's release */
    char boot[8];            /* "fast": the unpacked kernel's PVH entry; "kaslr": the bzImage
                              * (until prepared: what was asked for) */
    char boot_why[128];      /* fast asked for, kaslr used: why */
    char dir[PATH_MAX - 64]; /* kernel, initrd, toolcage-vmrun; read-only */
    char cached[PATH_MAX];   /* the fast boot's unpacked kernel */
    char prep_why[192];      /* the last tc_vm_prepare that failed: why */
    bool fast;
    bool dir_mounted;
};

/* Finds what a guest needs (qemu, a kernel, toolcage-vminit and -vmrun) and makes dir
 * (scratch/vm) a shared mount point: cheap, as every launcher start (the one-shot CLI's too)
 * pays it. Never fails the launcher: a host without qemu or a kernel has no microvm backend
 * (h->available false, h->why says why). With fast, the kernel is unpacked here if no
 * launcher did it before (~1 s, once per kernel and state directory). tc_vm_prepare() builds
 * dir at the first microvm call (a tmpfs: the guest kernel, an initramfs with toolcage-vminit
 * and the modules it needs, toolcage-vmrun; ~10-30 ms); one that fails leaves nothing and the
 * next call tries again.
 *
 * The guest kernel: with fast, the kernel ELF unpacked from the bzImage once
 * (tc_vm_kernel_unpack, kept in cache_dir for the next launcher), booted at its PVH entry: no
 * decompressor, ~6 s less per cold boot under TCG, but no KASLR in the guest (the
 * decompressor is what places the kernel at a random address). Without fast, or when the
 * kernel cannot be unpacked (h->boot_why), the bzImage itself: the guest kernel randomises its
 * address as on hardware. */
void tc_vm_setup(struct tc_vm_host *h, const char *scratch, const char *cache_dir, bool fast);
int tc_vm_prepare(struct tc_vm_host *h);

/* The native spec that runs spec (a "microvm" one) in a guest (dir prepared first); NULL with
 * err set. */
json_t *tc_vm_rewrite(struct tc_vm_host *h, json_t *spec, char *err, size_t errlen);

/* The program's memory limit in the guest, from the rewritten spec's (the host's: qemu's
 * sandbox, which adds the guest kernel's and qemu's own). */
int64_t tc_vm_program_memory(int64_t host_bytes);

/* enforced (sandbox.h) for a microvm call that ran under accel; host report's "microvm". */
json_t *tc_vm_enforced(const char *accel);
json_t *tc_vm_report(const struct tc_vm_host *h);

/* Whether bzimage can be unpacked for the fast boot, from its header and the payload's magic
 * (cheap: a launcher's start): 0, -ENOTSUP (not XZ) or -errno, with why. */
int tc_vm_kernel_check(const char *bzimage, char *why, size_t whylen);

/* Unpacks the kernel ELF from bzimage (XZ payload, boot protocol 2.08+) into out (written
 * beside and renamed: whole or absent), checking it has a PVH entry. 0, or -errno with why. */
int tc_vm_kernel_unpack(const char *bzimage, const char *out, char *why, size_t whylen);

/* Removes from cache_dir the unpacked kernels (vmlinux-RELEASE-SIZE-MTIME) whose image in
 * boot_dir is gone or changed, except keep (a name), and unpacks' temporaries left over 10
 * minutes: regular files of ours only. The count removed, or -errno. */
int tc_vm_cache_sweep(const char *cache_dir, const char *keep, const char *boot_dir);

/* qemu's own probes that our seccomp filter denies (it falls back): not the program's. */
bool tc_vm_qemu_probe(const char *syscall_name);
