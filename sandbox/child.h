/* The launcher's side of a sandbox's PID 1. The clone of the launcher runs
 * tc_child_main() only until it has joined its cgroups, arranged its fds and been given
 * its uid/gid maps; then it exec's toolcage-init (sandbox/init/init.c, a small static
 * program) with the sandbox's configuration in a memfd, so that no sandbox process ever
 * holds a copy of the launcher's memory. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include "sandbox/init/init_proto.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

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
    /* The launcher's scratch tmpfs (absolute). Its ancestors may be root-only (0700), and
     * root is unmapped in the sandbox's user namespace, so the child enters it while it still
     * has the launcher's fs uid; init uses paths relative to it from then on. */
    const char *scratch;
    int sync_fd;  /* read: one byte when uid/gid maps and cgroups are set up */
    int ctl_fd;   /* write: struct tc_ctl_msg */
    int cfg_fd;   /* the configuration memfd (tc_child_config) */
    int init_fd;  /* toolcage-init, opened at launcher start */
    int cap_last_cap;
    int stdin_fd, stdout_fd, stderr_fd;
    /* cgroup.procs of the sandbox's groups (-1 = none): the child moves itself in before
     * anything else, so the launcher's loop never waits for a cgroup migration (on v1
     * that can take an RCU grace period, ~10 ms). */
    int cg_procs[3];
};

/* Never returns: exec's toolcage-init or exits 125 after reporting the failed step. */
_Noreturn void tc_child_main(const struct tc_child_cfg *cfg);

/* Build PID 1's configuration (init_proto.h) for a sandbox into a sealed memfd.
 * newroot and ws_path are relative to the scratch directory. Returns the fd or -errno. */
int tc_child_config(const struct tc_spec *spec, const struct tc_seccomp_prog *seccomp,
                    const struct tc_rootfs_info *rootfs, const char *newroot, const char *ws_path,
                    bool rlimit_as, bool rlimit_nproc);

/* Open the toolcage-init binary for fexecve: $TOOLCAGE_INIT, else next to our own
 * executable, else ../libexec/toolcage/ relative to it. Returns an O_PATH fd or -errno. */
int tc_child_open_init(char *ret_path, size_t size);

/* Fill the rootfs description from the host (launcher start). */
void tc_rootfs_detect(struct tc_rootfs_info *ret);
