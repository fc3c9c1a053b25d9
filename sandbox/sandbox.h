/* The launcher: a small single-threaded process that owns every sandbox.
 *
 * The server never forks a sandbox itself. tc_launcher_start() spawns the launcher
 * (fork + immediate exec of the toolcage binary, so it is safe from a multi-threaded
 * process and the launcher starts with a clean address space), and talks to it over a
 * SOCK_SEQPACKET socketpair with typed, size-checked messages. The wire format and
 * the spec/result JSON are documented in docs/sandbox.md.
 *
 * Spec (input, JSON object):
 *   id           string, [A-Za-z0-9-]{1,64}
 *   backend      "native" | "gvisor"
 *   argv         array of strings, argv[0] absolute path inside the sandbox
 *   env          array of "NAME=value" (the whole environment)
 *   cwd          string, default "/workspace"
 *   stdin_b64    string (base64), optional
 *   files        array of {path (relative, no ".."), content_b64, mode (int, optional)}, optional
 *   collect      array of glob patterns relative to /workspace, optional
 *   mounts       array of {source, target, writable}, optional
 *   secret_files array of {name (plain file name), content_b64}, optional: leased secrets,
 *                written to /run/secrets/<name> (own tmpfs, read-only, file mode 0400)
 *   hostname     string, optional (default "toolcage")
 *   network      "none" (loopback only) | {"allow": ["host[:port]" | "*.domain[:port]", ...]}
 *                (1..256 entries): the egress proxy at 127.0.0.1:3128, HTTP(S)_PROXY set
 *   limits       {wall_ms, cpu_ms, memory_bytes, pids, file_size_bytes, nofile,
 *                 output_bytes, workspace_bytes, tmp_bytes}  (all integers, all required)
 *   hold         bool, optional: set everything up, then send TC_WIRE_READY and start the
 *                program only on TC_WIRE_GO (tc_launcher_go); CANCEL ends it without running.
 *                The wall time counts from go; a sandbox not released within 60 s ends with
 *                an error. Lets the server record that the program starts before it can run.
 *   stream       bool, optional: output also as it comes (TC_WIRE_CHUNK, see sandbox/wire.h).
 *   session      bool, optional (native only; implies stream): a long-lived program fed by the
 *                server. Its stdin stays open: tc_launcher_input() appends to it (stdin_b64
 *                first), an empty input closes it. Its output goes out only as chunks, never
 *                dropped (a program writing faster than the server reads waits on its pipe)
 *                and not kept: the result's stdout/stderr are empty. tc_launcher_interrupt()
 *                sends SIGINT to the program's process group. wall_ms bounds the whole life.
 *   gate         bool, optional (not with session): the program reads one byte from stdin, 'g',
 *                before it runs the call's code (the python tools' runner, execution/plots.h,
 *                given --gate); the launcher writes it, then stdin_b64.
 *   warm         bool, optional (requires gate): the launcher may have started the program
 *                before the call, in a sandbox of its own made from an earlier call's spec
 *                (docs/sandbox.md, Warm interpreters). Used only for native specs without
 *                network, credentials (the server leaves warm out when it leases any: they
 *                may be in env) or session; one sandbox per call, never reused; with hold, the
 *                gate opens at go.
 *   warm_group   string, [A-Za-z0-9-]{1,64}, optional (with warm): only specs of the same group
 *                share warm sandboxes (the server's: the tenant); a group holds at most
 *                warm_group_max of them and evicts only its own.
 *
 * Result (JSON object):
 *   id, status ("completed" exit 0 | "failed" exit != 0 | "timeout" | "killed" | "error"),
 *   exit_code (int|null), signal (string like "SIGKILL"|null),
 *   stdout_b64, stderr_b64, stdout_truncated, stderr_truncated,
 *   duration_ms, cpu_ms, memory_peak_bytes,
 *   killed_reason (null|"timeout"|"memory"|"pids"|"output"|"cpu"|"disk"|"cancelled"),
 *   enforced {limit name -> "cgroup_v2"|"cgroup_v1"|"rlimit"|"launcher"|"tmpfs"|"none"}
 *            ("+" joins two mechanisms, e.g. "cgroup_v1+rlimit"),
 *   policy_violations [{"syscall": name, "count": n}],
 *   files [{path, content_b64, size, truncated}] (collected),
 *   files_incomplete (true, only when a collect cap left a matching file out),
 *   pids_limit_hit (bool: a fork was refused by pids.max), workspace_full (bool),
 *   error (string, when status == "error"),
 *   network [{host (string|null), port, allowed (bool), reason, bytes_sent, bytes_received,
 *             resolved (string|null)}] (egress proxy attempts; [] for "none"),
 *   network_dropped (int, attempts beyond the 256 recorded; with "allow" only),
 *   network_error (string, only if the proxy could not report)
 *   warm (true, only when the program was started before the call: "warm")
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct tc_launcher;

/* Zero-initialised fields take the defaults; the launcher reads no environment. */
struct tc_launcher_options {
    const char *exe;          /* binary to exec as the launcher; NULL: toolcage-launcher beside ours
                                 (tc_child_find_binary), else "/proc/self/exe" launcher */
    const char *state_dir;    /* scratch space for the launcher */
    unsigned max_sandboxes;   /* concurrent sandboxes; submissions beyond get -EAGAIN */
    int pool;                 /* shells kept ready, 1..TC_POOL_MAX; 0: 2; TC_POOL_NONE: none */
    int pool_max;             /* the most shells bursts grow the pool to, up to TC_POOL_MAX
                                 (below pool: pool); 0: 8, or none with pool TC_POOL_NONE;
                                 TC_POOL_NONE: never grown */
    unsigned pool_shrink_ms;  /* a grown pool steps down by one shell after this long without
                                 a miss; 0: TC_POOL_SHRINK_MS (a minute) */
    int warm;                 /* warm sandboxes at most (spec "warm"), up to TC_POOL_MAX; 0: 8;
                                 TC_POOL_NONE: none */
    int warm_group_max;       /* of them, what one warm_group (the server's: a tenant) holds
                                 at most, 1..TC_POOL_MAX (above warm: warm); 0: 4 */
    const char *uid_registry; /* NULL: TC_UID_REGISTRY (sandbox/uidrange.h) */
    const char *gvisor_platform; /* "ptrace" (NULL) or "kvm" */
    const char *egress_ca_file;  /* extra upstream CAs for the egress proxy's TLS, or NULL */
    const char *init_path;       /* NULL: toolcage-init next to the binary (sandbox/child.h) */
    bool no_cgroup;              /* limits by rlimits only */
    bool no_seccomp_notify;      /* the filter kills without reporting the call */
    bool no_egress;              /* no egress proxy: specs with network fail (one-shot runs of a
                                  * tool with "network": "none" start only what they need) */
    bool microvm_fast;           /* microvm guests boot the kernel unpacked once, at its PVH
                                  * entry: no decompressor, no guest KASLR (microvm.h) */
    bool no_exec; /* the launcher is a fork of the caller running tc_launcher_main, not an exec
                   * (of exe or toolcage-launcher): the binary and its libraries are not loaded
                   * again (toolcage exec: one launcher for one run). Only for a caller whose only
                   * thread is the one calling (else: exec'ed as without it); the launcher is
                   * not restarted if it dies; the caller's memory is the launcher's too (hold
                   * no secret in it before the start) */
};
/* No shell kept ready: each is made on demand, on the request's path. */
#define TC_POOL_NONE (-1)

/* Spawn the launcher and connect to it. Starts one reader thread. */
int tc_launcher_start(const struct tc_launcher_options *opts, struct tc_launcher **ret_launcher);

/* Called exactly once per accepted submission, from the client's reader thread.
 * result is borrowed (json_incref it to keep it). If the launcher dies, pending
 * callbacks get a result with status "error". */
typedef void (*tc_launcher_cb)(void *userdata, json_t *result);

/* Called once for a "hold" spec when its sandbox is set up, from the client's reader thread
 * (must not block: queue the work). Answer with tc_launcher_go() or tc_launcher_cancel(). */
typedef void (*tc_launcher_ready_cb)(void *userdata, const char *id);

struct tc_launcher_job {
    tc_launcher_cb done;        /* required */
    tc_launcher_ready_cb ready; /* required with "hold": true in the spec, NULL without */
    /* With "stream": true in the spec (else never called): output as the program writes it,
     * stream 1 (stdout) or 2 (stderr), raw and unredacted, in order, only bytes within the
     * output cap (so the result's stdout/stderr start with what came here); and stream 3,
     * the egress proxy's news of a connection: one attempt as the result's "network" lists
     * it, plus its "index" there, as JSON (once when the proxy decides it, again with its
     * bytes when a connection it let through ends; may be missed: the result is the record);
     * stream 4, a "session" sandbox's CPU budget news (tc_launcher_budget()); stream 5, a
     * "session" sandbox's seccomp violations so far, {"violations": [{syscall, count}]} (as
     * the result lists them), sent when they changed, before the output read after them.
     * On the reader thread, before done; keep it short. */
    void (*chunk)(void *userdata, int stream, const char *data, size_t len);
    void *userdata;
    bool reserved; /* takes a slot promised by tc_launcher_reserve() */
    /* or NULL: set to when tc_launcher_go() sent the go (tc_now_us; 0: none was sent), on the
     * reader thread right before done, so it lives as long as userdata must */
    int64_t *went_us;
};

/* 0, -EINVAL (spec fails validation), -EAGAIN (too many in flight), -EPIPE (launcher gone). */
int tc_launcher_submit(struct tc_launcher *l, json_t *spec, tc_launcher_cb cb, void *userdata);
/* The same with a ready callback and/or a reserved slot (consumed even on failure). */
int tc_launcher_submit_job(struct tc_launcher *l, json_t *spec, const struct tc_launcher_job *job);
/* Promise one slot to a later submission, so that a caller can refuse work before recording
 * it: 0, -EAGAIN (every slot is in flight or promised), -EPIPE (no launcher). */
int tc_launcher_reserve(struct tc_launcher *l);
void tc_launcher_unreserve(struct tc_launcher *l);
/* Slots neither in flight nor promised now (0 without a launcher). */
unsigned tc_launcher_free_slots(struct tc_launcher *l);
/* cb(ud) runs (on whichever thread gave it back, outside the client's locks) each time a
 * slot is given back: a result delivered, a promise withdrawn, a submission that failed. */
void tc_launcher_on_free(struct tc_launcher *l, void (*cb)(void *ud), void *ud);
/* A sandbox whose spec says network "ask_ms": the egress proxy holds one of its connections
 * (to a host its allowlist does not name) until tc_launcher_verdict() answers ask n, or
 * ask_ms pass (a deny). cb(ud, id, ask) runs on the reader thread with {"ask": n, "host",
 * "port", "index" (in the result's "network")}: keep it short. One handler per client. */
void tc_launcher_on_ask(struct tc_launcher *l, void (*cb)(void *ud, const char *id, json_t *ask),
                        void *ud);
/* verdict: "allow_once" (the connections waiting for this answer), "allow_execution" (and
 * every later one to host:port in this sandbox) or "deny". 0 or -errno. */
int tc_launcher_verdict(struct tc_launcher *l, const char *id, long ask, const char *verdict);
/* Start a held sandbox's program (see "hold"). 0 or -EPIPE. */
int tc_launcher_go(struct tc_launcher *l, const char *id);
/* A "session" sandbox: more stdin (len 0 closes it), or SIGINT to its program's process
 * group (an id not running a session is ignored). 0, -EINVAL (bad id, too large), -EPIPE. */
int tc_launcher_input(struct tc_launcher *l, const char *id, const void *data, size_t len);
int tc_launcher_interrupt(struct tc_launcher *l, const char *id);
/* A "session" sandbox's CPU budget for one call (call: a tag without spaces, e.g. its
 * execution id), from now; cpu_ms 0 ends it. The launcher answers on the chunk callback,
 * stream 4: {"call", "meter"} ("cgroup_v1"/"cgroup_v2", null when it cannot measure), and
 * when the sandbox has used cpu_ms more it sends SIGINT as tc_launcher_interrupt() does and
 * {"call", "spent_ms"}. */
int tc_launcher_budget(struct tc_launcher *l, const char *id, int64_t cpu_ms, const char *call);
/* A file operation in a running "session" sandbox's workspace (sandbox/workspace.h): op is
 * {op: "get"|"put"|"delete"|"list", path?, max?} (a "req" is added), data the bytes of a
 * put. Waits up to timeout_ms for the launcher's answer: *ret_head {errno?, size?, created?,
 * entries?, incomplete?} and (ret_data, may be NULL) the bytes of a get, malloc'ed. 0, or
 * -EPIPE (no launcher, or it went away), -ETIMEDOUT, -EINVAL (too large), -ENOMEM. A sandbox
 * that is not running a session answers errno ENOENT. */
int tc_launcher_file(struct tc_launcher *l, const char *id, json_t *op, const void *data,
                     size_t len, int timeout_ms, json_t **ret_head, char **ret_data,
                     size_t *ret_len);
/* Ask the launcher to kill a running sandbox; its callback still runs. */
int tc_launcher_cancel(struct tc_launcher *l, const char *id);
/* Blocking convenience for the CLI and tests. */
int tc_launcher_run_sync(struct tc_launcher *l, json_t *spec, json_t **ret_result);
/* The same, calling meanwhile(userdata) once the spec is submitted: the caller's own work
 * while the sandbox runs (`toolcage exec` screens the code and builds its redactor).
 * *ret_done_ms (if not NULL): the wall clock (ms) when the result came. */
int tc_launcher_run_sync_while(struct tc_launcher *l, json_t *spec, void (*meanwhile)(void *),
                               void *userdata, json_t **ret_result, int64_t *ret_done_ms);
/* One run in a launcher of its own (`toolcage exec`), in two steps. tc_launcher_open_once
 * opens it before the run's spec is known: a launcher forked (opts->no_exec) starts its setup
 * there, beside the caller's own (the policy, the code, the spec: hold no secret before it);
 * it makes its one shell as it sets up, before the spec comes, and none after; it goes by
 * itself once its result is out (--once).
 * tc_launcher_run_once then runs the spec in it, as tc_launcher_start and
 * tc_launcher_run_sync_while would, except that a forked launcher is handed the spec at once,
 * before its HELLO. A launcher that cannot start: its cause (as tc_launcher_start's), no
 * result. Either way l is the caller's to stop (tc_launcher_stop, which waits for the
 * launcher's end: its cgroups and mounts gone), also when no spec ever went to it; stopped
 * after the result has been used, the launcher's teardown and the caller's work overlap. */
int tc_launcher_open_once(const struct tc_launcher_options *opts,
                          struct tc_launcher **ret_launcher);
int tc_launcher_run_once(struct tc_launcher *l, json_t *spec, void (*meanwhile)(void *),
                         void *userdata, json_t **ret_result, int64_t *ret_done_ms);
/* A launcher opened with tc_launcher_open_once that will not be used: told to go at once (a
 * forked one sees its socket closed, tears down what it set up and exits, beside the caller's
 * work); tc_launcher_stop, later, only reaps it. */
void tc_launcher_dismiss(struct tc_launcher *l);

bool tc_launcher_alive(struct tc_launcher *l);
unsigned tc_launcher_in_flight(struct tc_launcher *l);
unsigned tc_launcher_restarts(struct tc_launcher *l);
/* What this host can enforce, e.g.
 * {"cgroup":"v1","controllers":["memory","pids","cpuacct"],"seccomp_notify":true}. */
json_t *tc_launcher_host_info(struct tc_launcher *l);

/* Pid of the current launcher process, 0 while there is none (diagnostics, tests). */
int tc_launcher_pid(struct tc_launcher *l);

/* Kills every sandbox, waits for the launcher, frees. NULL is a no-op. */
void tc_launcher_stop(struct tc_launcher *l);

/* A program of toolcage's installed beside the running binary (next to it, one folder up, or
 * in ../libexec/toolcage/), used only if it and its folder are root's (or ours) and writable
 * by no one else: an O_PATH fd to exec, its path in ret_path; -ENOENT, or -EPERM when others
 * could have written it. */
int tc_find_trusted_program(const char *name, char *ret_path, size_t size);

/* Entry point of the launcher process: `toolcage launcher --fd N` (internal, not in --help). */
int tc_launcher_main(int argc, char **argv);
/* Whether this binary has the egress proxy (sandbox/egress.h): false in the lean `toolcage`,
 * whose one launcher, a fork, runs no tool with network; it execs toolcage-server for
 * `launcher`. */
bool tc_egress_available(void);
