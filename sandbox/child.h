/* Inside the sandbox: PID 1 of the new pid namespace builds the root filesystem,
 * pivots into it, starts the program and reaps everything; the program child drops
 * every privilege, loads seccomp last and execs. Runs in a clone of the launcher
 * (no exec in between), so it closes every inherited fd first. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

#define TC_SANDBOX_UID 1000
#define TC_SANDBOX_GID 1000

/* Messages on the control socket (SOCK_SEQPACKET) from the sandbox to the launcher. */
enum tc_ctl_kind {
    TC_CTL_SETUP_ERROR = 1, /* err + what: sandbox setup failed, nothing ran */
    TC_CTL_NOTIFY_FD,       /* seccomp listener attached */
    TC_CTL_EXEC_ERROR,      /* err: execve failed */
    TC_CTL_EXIT,            /* wstatus + rusage of the program tree */
};

struct tc_ctl_msg {
    uint32_t kind;
    int32_t err;
    int32_t wstatus;
    int32_t pad;
    struct rusage ru;
    char what[96];
};

/* Host files bound read-only into the sandbox's /etc (computed once per launcher). */
struct tc_etc_bind {
    char src[128];
    char dst[128]; /* relative to the new root, e.g. "etc/ld.so.cache" */
    bool is_dir;
};

struct tc_rootfs_info {
    struct tc_etc_bind binds[16];
    int n_binds;
    char usr_links[8][16]; /* top-level merged-usr symlinks: "bin" -> "usr/bin" */
    char usr_targets[8][32];
    int n_links;
    char localtime_target[128]; /* symlink target of /etc/localtime, "" if none */
    int cap_last_cap;
};

struct tc_child_cfg {
    const struct tc_spec *spec;
    const struct tc_seccomp_prog *seccomp;
    const struct tc_rootfs_info *rootfs;
    /* The launcher's scratch tmpfs (absolute). Its ancestors may be root-only (0700), and
     * root is unmapped in the sandbox's user namespace, so PID 1 enters it while it still
     * has the launcher's fs uid and uses paths relative to it from then on. */
    const char *scratch;
    const char *newroot; /* relative to scratch: an empty directory */
    const char *ws_path; /* relative to scratch: the per-sandbox workspace tmpfs */
    int sync_fd;         /* read: one byte when uid/gid maps and cgroups are set up */
    int ctl_fd;          /* write: struct tc_ctl_msg */
    int stdin_fd, stdout_fd, stderr_fd;
    /* cgroup.procs of the sandbox's groups (-1 = none): the child moves itself in before
     * anything else, so the launcher's loop never waits for a cgroup migration (on v1
     * that can take an RCU grace period, ~10 ms). */
    int cg_procs[3];
    bool rlimit_as;    /* no memory cgroup: bound the address space instead */
    bool rlimit_nproc; /* no pids cgroup: bound processes per (unique) host uid */
};

/* Never returns. */
_Noreturn void tc_child_main(const struct tc_child_cfg *cfg);

/* Fill the rootfs description from the host (launcher start). */
void tc_rootfs_detect(struct tc_rootfs_info *ret);
