/* Per-sandbox cgroups: v2 (unified) or v1 (memory, pids, cpuacct hierarchies), detected
 * at launcher start. Groups live under <launcher's own cgroup>/toolcage/L<launcher pid>/<name>
 * so that several launchers on one host never collide and stay inside whatever limit
 * the service itself was started in. On v2 the own group's processes move to its leaf
 * supervisor/ first, so that the group may delegate (docs/sandbox.md, Cgroups). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/spec.h"

enum tc_cg_mode { TC_CG_NONE = 0, TC_CG_V1, TC_CG_V2 };
enum tc_cg_ctl { TC_CG_MEMORY, TC_CG_PIDS, TC_CG_CPU, TC_CG_N_ };

struct tc_cg_host {
    enum tc_cg_mode mode;
    bool has[TC_CG_N_];
    bool memsw;              /* v1 memory.memsw.* (swap accounting) */
    int parent_fd[TC_CG_N_]; /* v1: one per controller; v2: all equal */
    char parent_path[TC_CG_N_][512];
    char note[256]; /* why a mode/controller is unavailable */
};

struct tc_cgroup {
    const struct tc_cg_host *host;
    char name[72];
    int fd[TC_CG_N_]; /* -1 when not available */
};

/* Detect and create the launcher's parent groups. Never fails: mode NONE on trouble. */
void tc_cg_host_init(struct tc_cg_host *h, bool disabled /* mode TC_CG_NONE */);
/* Remove the launcher's parent groups (after every sandbox is gone). */
void tc_cg_host_fini(struct tc_cg_host *h);
/* Name of the mechanism that enforces memory/pids/cpu: "cgroup_v1", "cgroup_v2" or NULL. */
const char *tc_cg_mech(const struct tc_cg_host *h, enum tc_cg_ctl c);

/* mkdir the groups (name unique below the launcher's parents), no limits yet. */
int tc_cg_create(const struct tc_cg_host *h, const char *name, struct tc_cgroup *ret);
/* Write memory/swap/pids limits. Never takes the kernel's cgroup mutex (unlike mkdir, rmdir
 * and migrations), so it does not wait behind another task's v1 migration. */
int tc_cg_set_limits(struct tc_cgroup *cg, const struct tc_limits *lim);
/* Open the files through which a child joins the group (-1 where absent): it writes "0" to
 * each, without any path lookup, while it is still single-threaded. v1: the group's `tasks`
 * (the calling thread alone moves: the kernel then takes no threadgroup lock, so the move
 * does not wait for an RCU grace period as a cgroup.procs write does); v2: cgroup.procs
 * (used only where CLONE_INTO_CGROUP is refused). Caller closes. */
int tc_cg_open_join(struct tc_cgroup *cg, int ret_fds[TC_CG_N_]);
/* Usage counters; -ENODATA when the controller is not there. */
int tc_cg_cpu_ns(struct tc_cgroup *cg, uint64_t *ret);
int tc_cg_mem_peak(struct tc_cgroup *cg, uint64_t *ret);
/* true if the kernel OOM-killed something in the group / a fork hit pids.max. */
bool tc_cg_oom_killed(struct tc_cgroup *cg);
/* v1: an eventfd (non-blocking, close-on-exec) that becomes readable when the group's memory
 * limit makes the kernel's OOM killer act (cgroup.event_control on memory.oom_control), which
 * kills one task: the caller kills the rest at once instead of at its next poll of
 * tc_cg_oom_killed. -EOPNOTSUPP on v2 (memory.oom.group kills the whole group) or without
 * the memory controller. Caller closes. */
int tc_cg_oom_eventfd(struct tc_cgroup *cg);
bool tc_cg_pids_hit(struct tc_cgroup *cg);
/* SIGKILL every process in the group. Returns number of processes seen. */
int tc_cg_kill(struct tc_cgroup *cg);
/* Kill, then rmdir. -EBUSY if the group is still populated (retry later). */
int tc_cg_destroy(struct tc_cgroup *cg);
