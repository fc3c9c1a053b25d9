/* The gvisor backend: the program runs under gVisor's runsc (Debian package "runsc") on an
 * OCI bundle the launcher writes per sandbox, with --network=none. The launcher keeps the
 * parts that do not depend on the backend: the workspace tmpfs (bound into the bundle), the
 * cgroup (runsc and everything it starts are born into it, so memory, CPU and teardown cover
 * gVisor's own sentry and gofer too), stdio pipes, the wall-clock timer and collect.
 * docs/sandbox.md ("gvisor backend") lists which limit holds by which mechanism. */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sandbox/cgroup.h"
#include "sandbox/child.h"
#include "sandbox/spec.h"

/* runsc and the Go runtime of its three processes (run, gofer, sandbox) use host threads,
 * and the ptrace platform a host thread per application thread plus the sentry thread that
 * traces it: the host pids cgroup is set to 3 x pids + this, a backstop well above the
 * tool's pids limit, which gVisor itself enforces as RLIMIT_NPROC. */
#define TC_GV_PIDS_HEADROOM 256

struct tc_gv_host {
    bool available;
    char runsc[PATH_MAX]; /* absolute path, found at launcher start */
    char platform[16];    /* "ptrace" (default) or "kvm": $TOOLCAGE_GVISOR_PLATFORM */
};

/* Find runsc: the absolute entries of PATH, then /usr/bin, /usr/sbin, /usr/local/bin (the
 * search the policy loader does, in the same environment). */
void tc_gv_detect(struct tc_gv_host *h, const char *platform /* "ptrace", "kvm" */);

/* Write the bundle into dirfd, the empty directory bundle (a tmpfs the launcher mounted):
 * config.json, a rootfs skeleton (merged-usr links, a generated /etc, mount points) and the
 * leased secret files. ws_path is the sandbox's workspace on the host; uid the sandbox's
 * unprivileged uid, used inside gVisor and for the files its gofer creates in the workspace.
 * 0 or -errno with a reason in err. */
int tc_gv_write_bundle(int dirfd, const char *bundle, const struct tc_spec *spec,
                       const struct tc_rootfs_info *ri, const char *image, const char *ws_path,
                       uid_t uid, bool rlimit_as, char *err, size_t errlen);

/* argv for `runsc ... run --bundle <bundle> <id>`, with its state (--root) and log inside the
 * bundle. bufs must hold 6 strings of PATH_MAX + 32 bytes; argv at least 12 entries. */
void tc_gv_argv(const struct tc_gv_host *h, const char *bundle, const char *id,
                char bufs[][PATH_MAX + 32], const char **argv);

/* runsc run exits with the program's status, 128 + signal when a signal ended it, and 128
 * when runsc itself failed (then its log, runsc.log in the bundle, has a "level":"error"
 * line). Turns its wait status into the program's: 0 and *ret_status, or -EPROTO with the
 * runsc error (at most errlen bytes) when the program never ran. */
int tc_gv_status(int bundle_fd, int wstatus, int *ret_status, char *err, size_t errlen);

/* The result's "enforced" map for a gvisor sandbox. */
json_t *tc_gv_enforced(const struct tc_cg_host *cg);

/* The launcher's fork that becomes runsc (async-signal-safe calls only): joins the cgroups,
 * takes the stdio pipes as 0-2, closes every other fd, resets signals, starts a session,
 * dies with the launcher, and exec's runsc with an empty environment but PATH. A failure
 * before the exec is reported on ctl_fd as TC_CTL_SETUP_ERROR. */
struct tc_gv_child {
    int stdin_fd, stdout_fd, stderr_fd, ctl_fd;
    int cg_join[3];
    const char *const *argv;
    pid_t launcher; /* getppid() must still be this once PDEATHSIG is armed */
};
_Noreturn void tc_gv_child_main(const struct tc_gv_child *c);
