/* What the launcher hands to toolcage-init (the sandbox's PID 1), and what PID 1 and the
 * program child report back. Shared by the launcher (sandbox/child.c) and the static init
 * program (sandbox/init/init.c); plain C and libc only, no project headers.
 *
 * Two blobs, each in a sealed memfd at TC_INIT_FD_CFG, strings NUL-terminated:
 *
 * The base, the same for every sandbox of a launcher, there when init starts: init builds
 * what every sandbox has in its root filesystem before its sandbox exists (a shell may wait
 * in the launcher's pool), then closes it.
 *   struct tc_init_base_hdr, then:
 *     newroot, localtime_target,
 *     /etc binds: source, target, "d"|"f"        (n_binds times)
 *     merged-usr links: name, target             (n_links times)
 *
 * The sandbox's configuration, passed with "go":
 *   struct tc_init_hdr, then:
 *     ws_path, cwd, hostname,
 *     image: "" (the host's /usr) or "img/<chain id>", a tool image's root bound by the
 *            launcher in its scratch directory (image/image.h)
 *     argv[n_argv], env[n_env],
 *     mounts: source, target, "r"|"w"           (n_mounts times)
 *     secret files: name, then a uint32 length and the raw bytes (n_secrets times)
 *   then, at hdr.bpf_off (8-byte aligned), hdr.bpf_len struct sock_filter instructions.
 *
 * Everything is bounds-checked by the reader; the blobs come from the launcher, but a
 * malformed one must fail setup, not crash into undefined behaviour. */
#pragma once

#include <stdint.h>

#define TC_INIT_MAGIC      0x74636933U /* "tci3" */
#define TC_INIT_BASE_MAGIC 0x74636231U /* "tcb1" */
#define TC_INIT_MAX_CFG    (64u << 20)

/* fds of PID 1 across the exec (everything else is closed) */
enum {
    TC_INIT_FD_SYNC = 3, /* stream socket: "go" (one byte) with the configuration memfd;
                          * EOF = the launcher dropped us or died */
    TC_INIT_FD_CTL = 4,  /* SOCK_SEQPACKET: struct tc_ctl_msg to the launcher */
    TC_INIT_FD_CFG = 5,  /* the base memfd at the exec; the configuration's after go */
    TC_INIT_FD_EXE = 6,  /* only before the exec: toolcage-init itself */
    TC_INIT_FD_FIRST_FREE = 7,
};

enum {
    TC_INIT_F_NOTIFY = 1u << 0,       /* seccomp filter uses user notification */
    TC_INIT_F_RLIMIT_AS = 1u << 1,    /* no memory cgroup: bound the address space */
    TC_INIT_F_RLIMIT_NPROC = 1u << 2, /* no pids cgroup: bound processes per host uid */
    TC_INIT_F_VERDICT = 1u << 3,      /* the program gets a pipe at fd 3 to say how it ended
                                       * (the microvm backend's toolcage-vmrun: what the guest's
                                       * kernel saw); PID 1 passes what it wrote, at most 95
                                       * bytes, in TC_CTL_EXIT's what */
};

struct tc_init_base_hdr {
    uint32_t magic;
    uint32_t size; /* whole blob */
    uint32_t cap_last_cap;
    uint32_t n_binds, n_links;
};

struct tc_init_hdr {
    uint32_t magic;
    uint32_t size; /* whole blob */
    uint32_t flags;
    uint32_t pad;
    int64_t cpu_ms, memory_bytes, pids, file_size_bytes, nofile, tmp_bytes;
    uint32_t n_argv, n_env, n_mounts, n_secrets;
    uint32_t secrets_bytes; /* sum of the secret files' sizes */
    uint32_t bpf_off, bpf_len;
};
_Static_assert(sizeof(struct tc_init_base_hdr) == 20 && sizeof(struct tc_init_hdr) == 96,
               "the headers' layout is the protocol (init may have another C library)");

/* Messages on the control socket from the sandbox to the launcher. */
enum tc_ctl_kind {
    TC_CTL_SETUP_ERROR = 1, /* err + what: sandbox setup failed, nothing ran */
    TC_CTL_NOTIFY_FD,       /* seccomp listener attached */
    TC_CTL_EXEC_ERROR,      /* err: execve failed */
    TC_CTL_EXIT,            /* wstatus of the program (+ what: the verdict) */
};

/* Fixed-width fields only: toolcage-init may be built against another C library than the
 * launcher (musl: CMakeLists.txt), whose structs (struct rusage: 144 bytes in glibc, 272 in
 * musl) need not agree. The launcher has the program tree's rusage from its wait4. */
struct tc_ctl_msg {
    uint32_t kind;
    int32_t err;
    int32_t wstatus;
    int32_t pad;
    char what[96];
};
_Static_assert(sizeof(struct tc_ctl_msg) == 112, "the control message's size is the protocol");

#define TC_SANDBOX_UID 1000
#define TC_SANDBOX_GID 1000
