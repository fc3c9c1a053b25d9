/* Internal to the launcher (sandbox/launcher*.c): its state and the functions its files share.
 * launcher.c: the epoll loop, I/O, set-up and main; launcher_start.c: starting a sandbox (native
 * and gVisor), hold and go; launcher_result.c: kill, teardown and the result. */
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>

#include "common/util.h"
#include "sandbox/cgroup.h"
#include "sandbox/child.h"
#include "sandbox/egress.h"
#include "sandbox/egress_link.h"
#include "sandbox/egress_tls.h"
#include "sandbox/gvisor.h"
#include "sandbox/microvm.h"
#include "sandbox/launcher.h"
#include "sandbox/pool.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"
#include "sandbox/uidrange.h"
#include "sandbox/wire.h"
#include "sandbox/workspace.h"

#define MAX_VIOLATIONS      64
#define OUTPUT_KILL_DISCARD (64ULL << 20)
#define TICK_MS             50
#define UID_NOTE_MS         100 /* after the start: the pid into the uid range's file */
#define MAX_SLOTS           1024
_Static_assert(MAX_SLOTS <= TC_UID_RANGE_SIZE, "one host uid per slot, from the launcher's range");
#define SETUP_QUIET_MS  5           /* see setting_up() */
#define CALL_QUIET_MS   50          /* a call this young: no refill meanwhile (setting_up()) */
#define RESULT_QUIET_MS 10          /* nor this soon after a result went out (setting_up()) */
#define KILL_AGAIN_MS   5           /* a killed sandbox not dead yet is killed again this often */
#define HOLD_MAX_MS     60000       /* a held sandbox the server never released (see hold()) */
#define CHUNK_EVERY_MS  20          /* a "stream" sandbox's output goes out at most this often */
#define SESSION_OUT_BUF (1u << 20)  /* a session's unsent output per stream (never dropped) */
#define SESSION_IN_MAX  (64u << 20) /* a session's stdin not read yet */

enum wkind {
    W_CLIENT = 1,
    W_SIGNAL,
    W_PIDFD,
    W_STDIN,
    W_STDOUT,
    W_STDERR,
    W_CTL,
    W_NOTIFY,
    W_EGRESS,
    W_SHELL,
    W_OOM
};

/* epoll data: the slot (or pool entry) and what its fd is */
static inline uint64_t lc_wdata(unsigned slot, enum wkind k)
{
    return ((uint64_t)slot << 8) | (uint64_t)k;
}

struct stream {
    int fd;
    char *data;
    size_t len;
    size_t sent; /* bytes of data sent as TC_WIRE_CHUNK (spec "stream") */
    uint64_t dropped;
};

struct violation {
    char name[48];
    unsigned count;
};

struct sbx {
    bool used;
    unsigned slot;
    /* warm (launcher_warm.c): 1 + its template while it waits for a call (no caller: nothing
     * of it is ever sent); warm_used once a call took it; cpu_base_ns its CPU before the call */
    unsigned warm_tmpl, warm_gen; /* the template's entry, and which template held it then */
    bool warm_used;
    bool warm_skip; /* passed over by the call being matched (launcher_warm.c): still starting */
    uint64_t cpu_base_ns;
    unsigned image_ref; /* 1 + the slot of L->images its root is, 0 none */
    char id[72];
    json_t *spec_json;
    struct tc_spec spec;
    uid_t uid;

    pid_t pid;
    int pidfd;
    bool exited;
    int wstatus;
    struct rusage ru;

    int stdin_fd;
    unsigned char *stdin_data;
    size_t stdin_len, stdin_off;
    bool stdin_closing; /* a session's stdin: closed once what is pending is written */
    struct stream out, err;
    int ctl_fd, notify_fd;
    int oom_fd;   /* v1: readable when the memory limit makes the kernel kill (tc_cg_oom_eventfd) */
    int sync_fd;  /* the shell's, until go */
    int ns_fd[3]; /* PID 1's mount, network and IPC namespaces, held (lc_hold_ns) */
    int cfg_fd;   /* PID 1's configuration, between prepare() and release() */
    bool held;    /* set up, waiting for TC_WIRE_GO (spec "hold") */
    bool cancel_requested; /* killed by TC_WIRE_CANCEL: the result says "cancelled" */
    int64_t chunk_ms;      /* spec "stream": when output last went out as TC_WIRE_CHUNK */
    uint64_t budget_ns;    /* spec "session": the call's CPU budget (TC_WIRE_BUDGET), 0 = none */
    uint64_t budget_base_ns;
    char budget_call[40];

    struct tc_cgroup cg;
    bool has_cg;
    char ws_path[PATH_MAX];
    int ws_fd;
    bool ws_mounted, ws_dir;

    int64_t start_ms, end_ms, deadline_ms;
    int64_t kill_ms;        /* the last kill (lc_kill_sbx): its end is awaited on its pidfd */
    int64_t setup_until_ms; /* between go and the program's exec; see setting_up() */
    const char *killed_reason;
    bool have_exit;
    int exit_status;
    int setup_err;
    char setup_what[96];
    int exec_err;
    struct violation viol[MAX_VIOLATIONS];
    unsigned n_viol;
    bool viol_news;         /* spec "session": violations since the last TC_WIRE_CHUNK '5' */
    uint64_t egress_handle; /* registered with the egress proxy (network allowlist), 0 = none */
    json_t *egress_tls;     /* credentials at egress: inject, CA cert and key, until attached */
    bool tls_moved;         /* egress_tls went to the proxy: the spec no longer holds it */
    unsigned shell_tries;   /* shells that died before go under this call (launcher_start.c) */

    /* gvisor backend: pid/pidfd are runsc's; the bundle is a tmpfs of its own */
    bool gvisor;
    bool vm; /* microvm backend: a native sandbox whose program is toolcage-vmrun (microvm.h) */
    char vm_verdict[96]; /* what the guest's kernel saw (vm_proto.h TC_VM_VERDICT_FMT), "" none */
    char gv_path[PATH_MAX];
    int gv_fd;
    bool gv_mounted, gv_dir;
    char gv_error[384]; /* runsc failed before the program ran */
};

#define WARM_TEMPLATES       16    /* specs the launcher keeps warm sandboxes for */
#define WARM_GROUP_TEMPLATES 4     /* of them, one group's (a tenant's) at most */
#define WARM_IDLE_MS         60000 /* a warm sandbox no call took by then is killed */
/* a microvm template keeps one booted guest at most, however many calls miss: each holds its
 * memory_mb + ~250 MiB on the host, and its boot a core for seconds under TCG */
#define WARM_VM_PER_TEMPLATE 1

/* What a call must match to take a warm sandbox: its spec without the per-call parts. */
struct warm_tmpl {
    char *key;        /* canonical JSON (launcher_warm.c, warm_key); NULL: a free entry */
    json_t *spec;     /* the spec a warm sandbox of it starts with (id set at each start) */
    unsigned target;  /* warm sandboxes to keep: 0 for a template seen once, raised by
                       * each call that found none ready (a microvm one's to
                       * WARM_VM_PER_TEMPLATE at most) */
    bool vm;          /* a microvm template */
    int64_t used_ms;  /* the last call that matched (kept warm for WARM_IDLE_MS after) */
    int64_t miss_ms;  /* the last call that found none ready (or the last step down) */
    int64_t retry_ms; /* not before: one of its warm sandboxes ended by itself */
    unsigned gen;     /* tells this template's sandboxes from a forgotten one's in the entry */
    char group[65];   /* the spec's warm_group ("" without) */
};

#define MAX_IMAGES    64    /* tool image roots one launcher keeps bound */
#define IMAGE_IDLE_MS 60000 /* a root no sandbox used for this long is let go */

struct launcher {
    int sock, epfd, sigfd;
    int release_fd;     /* to the thread that lets go of mount namespaces (lc_release_start) */
    int ns_pending[48]; /* namespaces to let go of once the launcher is quiet */
    unsigned n_ns_pending;
    ino_t own_mnt_ino; /* our mount namespace, which a shell shares until PID 1 has its own */
    char scratch[PATH_MAX - 64], newroot[PATH_MAX], wsdir[PATH_MAX], gvdir[PATH_MAX];
    char imgdir[PATH_MAX];          /* scratch/img: image roots bound for the sandboxes */
    char state_dir[PATH_MAX - 128]; /* the image store is state_dir/images (image/image.h) */
    struct {
        char root[65];    /* chain id */
        int fd;           /* the root, flock'ed shared: `toolcage images gc` leaves it alone */
        unsigned users;   /* sandboxes on it now */
        int64_t last_ms;  /* when the last one ended */
    } images[MAX_IMAGES]; /* a free slot has root "" */
    unsigned n_images;
    struct tc_cg_host cg;
    struct tc_seccomp_prog sc;
    struct tc_rootfs_info rootfs;
    int init_fd; /* toolcage-init (O_PATH), exec'ed as every sandbox's PID 1 */
    int base_fd; /* its base configuration (tc_child_base_config) */
    char init_path[PATH_MAX];
    char setup_error[PATH_MAX + 64]; /* why setup failed, when errno alone does not say */
    struct sbx *slots;
    unsigned max, running;     /* max: slots, calls' and warm ones' */
    unsigned max_calls;        /* sandboxes for calls at once; the other slots are for warm ones */
    unsigned warm_max, n_warm; /* warm sandboxes waiting for a call: at most, now */
    unsigned warm_group_max;   /* of them, one group's at most (launcher_warm.c) */
    int64_t quiet_from_ms;     /* young calls have put refills off since (lc_quiet_begin) */
    int64_t result_ms;         /* the last result went out (setting_up()) */
    unsigned warm_seq, warm_gens;
    unsigned warm_for; /* 1 + the template a warm sandbox was evicted for: it starts next */
    struct warm_tmpl warm[WARM_TEMPLATES];
    bool warm_dirty; /* the warm list (lc_warm_publish) is out of date */
    uid_t uid_base;
    unsigned uid_index;  /* the range in the uid registry (uidrange.h) */
    int uid_fd;          /* holds the range until we are gone */
    int64_t uid_note_ms; /* when our pid goes into its file (tc_uidrange_note); 0: done */
    bool stopping;
    bool once;                  /* one call (--once, toolcage exec): gone once its result is out */
    struct tc_cgroup *dead_cgs; /* finished sandboxes' groups: removed once the result is
                                 * out, retried on tick while busy */
    size_t n_dead_cgs;
    struct tc_egress_link *egress; /* the egress proxy, NULL if it could not be started */
    pid_t egress_told;             /* the proxy's pid the server was told (HELLO) */
    struct tc_pool pool;           /* shells created ahead of time, and the sandboxes' uids */
    struct tc_gv_host gv;
    struct tc_vm_host vm;
    unsigned gv_seq; /* gvisor cgroups are named g<seq> */
};

/* Shared by the launcher's files (each is defined next to its kind of work):
 *   launcher.c: now_ms, watch/unwatch_close, send_result/send_error/deliver_result, read_ctl
 *   launcher_start.c: start_sandbox, go, drop_held (a held sandbox the server did not release)
 *   launcher_result.c: kill_sbx, teardown, fail_teardown, maybe_finish, retry_dead_cgs */
void lc_drop_held(struct launcher *L, struct sbx *s, const char *why);
void lc_go(struct launcher *L, const char *id);
void lc_kill_sbx(struct launcher *L, struct sbx *s, const char *reason);
void lc_maybe_finish(struct launcher *L, struct sbx *s);
/* A call starts or a result goes out: the start of a spell without refills, if none runs
 * (launcher.c, setting_up()). */
void lc_quiet_begin(struct launcher *L, int64_t now);
int64_t lc_now_ms(void);
void lc_retry_dead_cgs(struct launcher *L);
void lc_send_result(struct launcher *L, const char *id, json_t *result);
void lc_start_sandbox(struct launcher *L, const char *hdr_id, char *payload);
void lc_teardown(struct launcher *L, struct sbx *s);
void lc_hold_ns(struct launcher *L, struct sbx *s);
int lc_release_start(struct launcher *L);
void lc_release_pending(struct launcher *L);
/* launcher_start.c: a sandbox is done with its tool image's root; roots unused for a while
 * are unbound (and their flock dropped, for gc). */
void lc_image_release(struct launcher *L, struct sbx *s);
void lc_images_tick(struct launcher *L, int64_t now);
/* Milliseconds until an idle root is due to go (lc_images_tick), -1 if none is idle: an idle
 * launcher wakes for it, so a root it no longer uses is never held past IMAGE_IDLE_MS. */
int64_t lc_images_timeout(const struct launcher *L, int64_t now);
void lc_unwatch_close(struct launcher *L, int *fd);
void lc_read_ctl(struct launcher *L, struct sbx *s);

void lc_deliver_result(void *userdata, const char *id, json_t *result);
/* launcher_files.c: TC_WIRE_FILE, a session's file operation, answered at once. */
void lc_file_op(struct launcher *L, const char *id, const char *payload, size_t len);
/* One of toolcage's own files in a spec (.toolcage/..., mode 0444: the runner), not the
 * call's. */
bool lc_own_file(json_t *f);
/* Whether files (of the spec's, all) may be written: a call's file where one of toolcage's own
 * is, or (gated: staged) under TC_WS_STAGE, may not (-EEXIST); a staged path too long,
 * -ENAMETOOLONG. 0 or -errno with err set; nothing is written. */
int lc_check_files(json_t *files, json_t *all, bool gated, char *err, size_t errlen);
/* Writes files (of the spec's, all) into s's workspace (lc_check_files first); a gated spec's
 * call files staged (TC_WS_STAGE, docs/sandbox.md). 0 or -errno with err set. */
int lc_write_files(struct sbx *s, json_t *files, json_t *all, char *err, size_t errlen);
/* A "stream" sandbox's output not sent yet goes out now (before its result). */
void lc_flush_chunks(struct launcher *L, struct sbx *s);
/* The sandbox's seccomp violations so far: [{syscall, count}, ...]. */
json_t *lc_violations_json(const struct sbx *s);

void lc_fail_teardown(struct launcher *L, struct sbx *s, const char *msg);

/* launcher_start.c: start a sandbox from a parsed spec in slot s (free); warm_tmpl 0 for a
 * call, else 1 + the template of a warm sandbox (then nothing is ever sent for it). */
void lc_start_in_slot(struct launcher *L, struct sbx *s, json_t *spec, struct tc_spec *parsed,
                      unsigned warm_tmpl);
/* launcher_warm.c (docs/sandbox.md, Warm interpreters). A "warm" call: hand it to a warm
 * sandbox of its template, true when one took it (spec and parsed are then its); else the
 * template is learned or its target raised, false (the call starts cold). */
bool lc_warm_take(struct launcher *L, json_t *spec, struct tc_spec *parsed);
/* A held call in a warm sandbox is let go: its gate byte and stdin go out from now. 0. */
int lc_warm_go(struct launcher *L, struct sbx *s);
void lc_pump_stdin(struct launcher *L, struct sbx *s);
/* Idle: start one warm sandbox a template wants. True when one was started. */
bool lc_warm_refill(struct launcher *L, int64_t now);
/* Milliseconds until the warm sandboxes want the loop (0: a refill is due), -1 for never. */
int64_t lc_warm_timeout(const struct launcher *L, int64_t now);
/* Templates not used for WARM_IDLE_MS are forgotten; targets step down. */
void lc_warm_tick(struct launcher *L, int64_t now);
void lc_warm_fini(struct launcher *L);
/* A warm sandbox no call took is ending (torn down next): its template backs off a while if
 * it died by itself (a template whose program cannot wait is not restarted in a loop). */
void lc_warm_ended(struct launcher *L, struct sbx *s);
/* scratch/warm, the warm sandboxes waiting for a call, one per line: "PID UID WS CGROUP" (PID
 * 1's host pid, its host uid, its workspace's name under scratch/ws, its cgroups' name; "-"
 * without). Rewritten (atomically) when warm_dirty, at the end of a loop turn: the host
 * checks of the tests (tests/integration/attacks.test.mjs) read it through
 * /proc/<launcher>/root to tell a warm sandbox from one left behind. */
void lc_warm_publish(struct launcher *L);
/* A slot for a call: free, and calls below max_calls. NULL if none. */
struct sbx *lc_call_slot(struct launcher *L);
int lc_watch(struct launcher *L, int fd, uint32_t events, unsigned slot, enum wkind k);
void lc_send_error(struct launcher *L, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
