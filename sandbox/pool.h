/* Sandbox shells created ahead of time (child.h, struct tc_shell), and the host uids of the
 * launcher's sandboxes.
 *
 * Creating a shell is most of a sandbox's fixed cost: clone into five new namespaces
 * (CLONE_NEWNET alone is ~0.4 ms), uid/gid maps, mkdir of its cgroups, the exec of
 * toolcage-init (~0.5 ms), and on cgroup v1 the move into the cgroups, which waits for an
 * RCU grace period (5-15 ms) whenever no other task moved between cgroups in the last
 * ~15 ms. The launcher keeps `target` shells ready so that a sandbox starts with the
 * shell's go. Shells are created one at a time, when the launcher is idle and no other shell
 * of the pool is still joining its cgroups: a v1 migration holds the kernel's global cgroup
 * mutex during that grace period, and mkdir or rmdir by the launcher would wait for it
 * (tc_pool_joining() tells the launcher when to put its rmdirs off).
 *
 * A pooled shell is idle: toolcage-init, already exec'd, waiting for go on its sync socket
 * as uid 1000 of its own user namespace (the host uid it will run its sandbox as), with
 * nothing but its own fds; it gets its limits when it is taken and is the only task in its
 * cgroups. It lives in its own user, pid, network, IPC and UTS namespaces and in a mount
 * namespace of its own, copied from the launcher's when init started: a slave of the shared
 * `ws` mount, so it receives every workspace mounted later (init binds only its own, then
 * makes / private and detaches the old root before the program runs). Nothing of a sandbox
 * runs in it before go. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/child.h"

#define TC_POOL_MAX 16

/* How long the pool stays grown after its last miss before it gives one shell back. */
#define TC_POOL_SHRINK_MS 60000

struct tc_pool_entry {
    struct tc_shell sh;
    bool used, ready;
    /* handed to a sandbox while still joining: the pool keeps only a dup of its sync_fd,
     * to know when the join (and the cgroup mutex) is over */
    bool handed;
    int64_t since_ms; /* created (or handed) at */
};

/* Sized by demand: `target` starts at `min`; each take that finds no shell ready (a miss:
 * the call pays for its shell) raises it by one, up to `max`, so a burst bigger than the pool
 * leaves behind a pool as big as the burst for the next one. After `shrink_ms` without a miss
 * the target steps down by one (killing an idle shell beyond it), again every `shrink_ms`. */
struct tc_pool {
    struct tc_shell_env env;
    unsigned min, max, target;
    int64_t shrink_ms, last_change_ms; /* the last miss, or the last step down */
    unsigned long misses;              /* since start */
    struct tc_pool_entry e[TC_POOL_MAX];
    int epfd;
    uint64_t (*epdata)(unsigned idx); /* epoll data for entry idx's sync_fd */
    /* host uids: base .. base + n_uids - 1, each held by one sandbox or shell */
    uid_t uid_base;
    unsigned n_uids, uid_next;
    unsigned char *uid_used;
    unsigned cg_seq;     /* groups are named s<seq> */
    int64_t retry_at_ms; /* after a failed refill */
    bool once;           /* tc_pool_once: the target drops to 0 at the first take */
};

/* min..max shells (max < min is taken as min; both 0: shells are made on demand only);
 * shrink_ms 0: TC_POOL_SHRINK_MS. */
int tc_pool_init(struct tc_pool *p, const struct tc_shell_env *env, uid_t uid_base, unsigned n_uids,
                 unsigned min, unsigned max, int64_t shrink_ms, int epfd,
                 uint64_t (*epdata)(unsigned idx));
/* Kill every pooled shell and remove its groups. */
void tc_pool_fini(struct tc_pool *p);

/* A shell for a new sandbox: a ready one, else one still joining its cgroups (go is queued
 * behind the join), else a new one (a miss, if count_miss: a call waits for it). */
int tc_pool_take(struct tc_pool *p, int64_t now_ms, bool count_miss, struct tc_shell *ret);
/* A host uid for a sandbox that needs no shell (the gvisor backend). 0 or -EAGAIN. */
int tc_pool_alloc_uid(struct tc_pool *p, uid_t *ret);
/* A finished sandbox's uid is free again. */
void tc_pool_release_uid(struct tc_pool *p, uid_t uid);

/* The launcher's epoll loop: entry idx's sync_fd is readable. */
void tc_pool_event(struct tc_pool *p, unsigned idx);
/* A shell of the pool (or one taken from it early) is moving into its cgroups (v1: it may
 * hold the cgroup mutex for a grace period). */
bool tc_pool_joining(const struct tc_pool *p);
/* The pool is short of its target and may create a shell now. */
bool tc_pool_wants_refill(const struct tc_pool *p, int64_t now_ms);
/* Milliseconds until the pool wants the launcher's loop (0: refill when idle; retry after a
 * failed refill; watchdog while joining), -1 for never. */
int64_t tc_pool_timeout(const struct tc_pool *p, int64_t now_ms);
/* Create one shell (call when idle). */
void tc_pool_refill(struct tc_pool *p, int64_t now_ms);
/* A launcher for one call: one shell now, ahead of the call, kept until the call takes it,
 * and none made after that (but on demand, as with no pool). */
void tc_pool_once(struct tc_pool *p, int64_t now_ms);
/* Drop a shell stuck joining for seconds (it would block refills forever); step the target
 * down after shrink_ms without a miss. */
void tc_pool_tick(struct tc_pool *p, int64_t now_ms);
