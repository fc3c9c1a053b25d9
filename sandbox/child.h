/* The launcher's side of a sandbox's PID 1. The clone of the launcher runs
 * tc_child_main() only until it has arranged its fds, joined its cgroups and been given its
 * uid/gid maps; then it exec's toolcage-init (sandbox/init/init.c, a small static program),
 * which waits for the sandbox's configuration in a memfd, so that no sandbox process ever
 * holds a copy of the launcher's memory. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include "sandbox/cgroup.h"
#include "sandbox/init/init_proto.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

/* clone3 (the launcher's sandboxes and gvisor's runsc): glibc has no wrapper or struct. */
#define CLONE_INTO_CGROUP_ 0x200000000ULL
struct clone_args_ {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
        set_tid_size, cgroup;
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
    /* The launcher's scratch tmpfs (absolute). Its ancestors may be root-only (0700), and
     * root is unmapped in the sandbox's user namespace, so the child enters it while it still
     * has the launcher's fs uid; init uses paths relative to it from then on. */
    const char *scratch;
    int sync_fd; /* stream socket: 'm' from the launcher once the uid/gid maps are written,
                  * 'j' to it once in the cgroups; then (to init) "go" with the
                  * configuration memfd (tc_child_config) */
    int ctl_fd;  /* write: struct tc_ctl_msg */
    int base_fd; /* the base configuration (tc_child_base_config), init's fd 5 at its exec */
    int init_fd; /* toolcage-init, opened at launcher start */
    int cap_last_cap;
    int stdin_fd, stdout_fd, stderr_fd;
    /* the sandbox's groups (tc_cg_open_join; -1 = none): the child moves itself in before
     * anything else, so the launcher's loop never waits for a cgroup migration. */
    int cg_join[3];
};

/* Never returns: exec's toolcage-init or exits 125 after reporting the failed step. */
_Noreturn void tc_child_main(const struct tc_child_cfg *cfg);

/* A sandbox's PID 1 before "go": cloned into new user, pid, network, IPC and UTS
 * namespaces, given its uid/gid maps, moved into its own (still unlimited) cgroups, exec'd
 * into toolcage-init (uid 1000 there, non-dumpable), which has taken its own mount
 * namespace, built the part of the root filesystem every sandbox has and brought lo up; it
 * waits for its configuration with nothing but its own fds. At go it adds the sandbox's
 * own mounts (its workspace comes from the launcher's ws directory, a shared mount: see
 * docs/sandbox.md) and pivots. The launcher creates shells on demand or ahead of time (its
 * pool): that is most of a sandbox's fixed cost. */
struct tc_shell {
    pid_t pid;
    int pidfd;
    int stdin_fd, stdout_fd, stderr_fd; /* the launcher's ends of the stdio pipes */
    int ctl_fd;                         /* the launcher's end of the control socket */
    int sync_fd;                        /* the launcher's end of cfg.sync_fd */
    uid_t uid;                          /* host uid of the sandbox's uid 1000 */
    struct tc_cgroup cg;
    bool has_cg;
};

struct tc_shell_env {
    const struct tc_cg_host *cg; /* mode NONE: no groups */
    const char *scratch;         /* see tc_child_cfg */
    int base_fd;
    int init_fd;
    int cap_last_cap;
};

/* Create a shell whose sandbox runs as host uid `uid`, with cgroups named `cg_name`.
 * Returns 0 or -errno (nothing left behind). */
int tc_shell_create(const struct tc_shell_env *env, uid_t uid, const char *cg_name,
                    struct tc_shell *ret);
/* Non-blocking: 1 the first time the child reports that it is in its cgroups, 0 while it is
 * not yet, -EPIPE if it died. */
int tc_shell_poll_ready(struct tc_shell *sh);
/* Hand the shell its configuration (the sealed memfd of tc_child_config) and let it go,
 * through its sync_fd. Limits must already be in place. */
int tc_shell_go(int sync_fd, int cfg_fd);
/* Kill and reap the shell's process and close its fds; the cgroups are left to the caller. */
void tc_shell_kill(struct tc_shell *sh);

/* PID 1's base configuration (init_proto.h): what every sandbox of this launcher has in its
 * root filesystem; newroot is relative to the scratch directory. Returns a sealed memfd or
 * -errno. */
int tc_child_base_config(const struct tc_rootfs_info *rootfs, const char *newroot);

/* PID 1's configuration for one sandbox (init_proto.h), handed over with go. ws_path and
 * image (NULL: the host's /usr) are relative to the scratch directory; flags are
 * TC_INIT_F_RLIMIT_AS, _RLIMIT_NPROC and _VERDICT (NOTIFY comes from seccomp). Returns a sealed
 * memfd or -errno. */
int tc_child_config(const struct tc_spec *spec, const struct tc_seccomp_prog *seccomp,
                    const char *ws_path, const char *image, unsigned flags);

/* Open the toolcage-init binary for fexecve: path (TOOLCAGE_INIT) when not NULL, else next
 * to our own executable, else ../libexec/toolcage/ relative to it; the path opened goes to
 * ret_path. Returns an O_PATH fd or -errno (-EPERM: not trusted, tc_child_trusted_binary). */
int tc_child_open_init(const char *path, char *ret_path, size_t size);
/* A program of ours installed beside the running binary: next to it, one folder up, or in
 * ../libexec/toolcage/ (an executable regular file). O_PATH fd and its path, or -ENOENT. */
int tc_child_find_binary(const char *name, char *ret_path, size_t size);
/* True if the binary (fd, opened from path) and its folder are root's or ours and writable by
 * no one else: what runs as PID 1 of every sandbox, or beside qemu, or as the launcher, is
 * taken from no place another user could have written. */
bool tc_child_trusted_binary(int fd, const char *path);
/* tc_child_find_binary, then -EPERM (fd closed) for a binary tc_child_trusted_binary refuses. */
int tc_child_find_trusted(const char *name, char *ret_path, size_t size);
/* Look beside dir instead of the running binary from now on (a launcher forked by toolcage
 * exec, sandbox/client.c: it finds toolcage-init and the microvm helpers where an exec'd
 * toolcage-launcher would, not beside the bin/ of the CLI it is a fork of). */
void tc_child_set_binary_dir(const char *dir);

/* Fill the rootfs description from the host (launcher start). */
void tc_rootfs_detect(struct tc_rootfs_info *ret);
