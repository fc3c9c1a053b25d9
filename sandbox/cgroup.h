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
    char note[256];       /* why a mode/controller is unavailable */
    int dynmods_fd;       /* v1: a hierarchy mounted favordynmods, detached, held open (or -1) */
    char dynmods_why[96]; /* v1 without it: why */
};

struct tc_cgroup {
    const struct tc_cg_host *host;
    char name[72];
    int fd[TC_CG_N_]; /* -1 when not available */
};

/* Detect and create the launcher's parent groups. Never fails: mode NONE on trouble. On v1,
 * unless no_favor, also a controller-less hierarchy mounted favordynmods (never attached
 * anywhere, held by dynmods_fd as long as the launcher lives): a v1 cgroup.procs write then
 * does not wait for an RCU grace period (docs/sandbox.md, Cgroups). */
void tc_cg_host_init(struct tc_cg_host *h, bool disabled /* mode TC_CG_NONE */, bool no_favor);
/* The favordynmods hierarchy (named toolcage_dynmods, no controllers, detached): its mount
 * fd (CLOEXEC), or -errno with why ("STEP: error"). */
int tc_cg_favor_dynmods(char *why, size_t whysize);
/* Remove the launcher's parent groups (after every sandbox is gone). */
void tc_cg_host_fini(struct tc_cg_host *h);
/* Name of the mechanism that enforces memory/pids/cpu: "cgroup_v1", "cgroup_v2" or NULL. */
const char *tc_cg_mech(const struct tc_cg_host *h, enum tc_cg_ctl c);

/* mkdir the groups (name unique below the launcher's parents), no limits yet. */
int tc_cg_create(const struct tc_cg_host *h, const char *name, struct tc_cgroup *ret);
/* Write memory/swap/pids limits. Never takes the kernel's cgroup mutex (unlike mkdir, rmdir
 * and migrations), so it does not wait behind another task's v1 migration. */
int tc_cg_set_limits(struct tc_cgroup *cg, const struct tc_limits *lim);
/* Open the group's cgroup.procs files for writing (-1 where absent), so that a child can
 * move itself in ("0") without any path lookup. Caller closes. */
int tc_cg_open_procs(struct tc_cgroup *cg, int ret_fds[TC_CG_N_]);
/* Usage counters; -ENODATA when the controller is not there. */
int tc_cg_cpu_ns(struct tc_cgroup *cg, uint64_t *ret);
int tc_cg_mem_peak(struct tc_cgroup *cg, uint64_t *ret);
/* true if the kernel OOM-killed something in the group / a fork hit pids.max. */
bool tc_cg_oom_killed(struct tc_cgroup *cg);
bool tc_cg_pids_hit(struct tc_cgroup *cg);
/* SIGKILL every process in the group. Returns number of processes seen. */
int tc_cg_kill(struct tc_cgroup *cg);
/* Kill, then rmdir. -EBUSY if the group is still populated (retry later). */
int tc_cg_destroy(struct tc_cgroup *cg);
