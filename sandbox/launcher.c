/* The launcher process: single-threaded epoll loop that owns every sandbox.
 * Lifecycle of one sandbox: workspace tmpfs + files -> shell (clone into new namespaces,
 * uid/gid maps, cgroups: child.c) -> limits + configuration -> go -> pump
 * stdin/stdout/stderr, answer seccomp notifications, enforce wall/cpu/memory/output ->
 * reap -> collect -> teardown (workspace) -> result -> cgroups removed. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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
#include "sandbox/egress_link.h"
#include "sandbox/gvisor.h"
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
#define MAX_SLOTS           1024
_Static_assert(MAX_SLOTS <= TC_UID_RANGE_SIZE, "one host uid per slot, from the launcher's range");
#define SETUP_QUIET_MS 5     /* see setting_up() */
#define HOLD_MAX_MS    60000 /* a held sandbox the server never released (see hold()) */

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
    W_SHELL
};

struct stream {
    int fd;
    char *data;
    size_t len;
    uint64_t dropped;
};

struct violation {
    char name[48];
    unsigned count;
};

struct sbx {
    bool used;
    unsigned slot;
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
    struct stream out, err;
    int ctl_fd, notify_fd;
    int sync_fd;           /* the shell's, until go */
    int cfg_fd;            /* PID 1's configuration, between prepare() and release() */
    bool held;             /* set up, waiting for TC_WIRE_GO (spec "hold") */
    bool cancel_requested; /* killed by TC_WIRE_CANCEL: the result says "cancelled" */

    struct tc_cgroup cg;
    bool has_cg;
    char ws_path[PATH_MAX];
    int ws_fd;
    bool ws_mounted, ws_dir;

    int64_t start_ms, end_ms, deadline_ms;
    int64_t setup_until_ms; /* between go and the program's exec; see setting_up() */
    const char *killed_reason;
    bool have_exit;
    int exit_status;
    struct rusage exit_ru;
    int setup_err;
    char setup_what[96];
    int exec_err;
    struct violation viol[MAX_VIOLATIONS];
    unsigned n_viol;
    uint64_t egress_handle; /* registered with the egress proxy (network allowlist), 0 = none */

    /* gvisor backend: pid/pidfd are runsc's; the bundle is a tmpfs of its own */
    bool gvisor;
    char gv_path[PATH_MAX];
    int gv_fd;
    bool gv_mounted, gv_dir;
    char gv_error[384]; /* runsc failed before the program ran */
};

struct launcher {
    int sock, epfd, sigfd;
    char scratch[PATH_MAX - 64], newroot[PATH_MAX], wsdir[PATH_MAX], gvdir[PATH_MAX];
    bool scratch_mounted;
    struct tc_cg_host cg;
    struct tc_seccomp_prog sc;
    struct tc_rootfs_info rootfs;
    int init_fd; /* toolcage-init (O_PATH), exec'ed as every sandbox's PID 1 */
    int base_fd; /* its base configuration (tc_child_base_config) */
    char init_path[PATH_MAX];
    char setup_error[PATH_MAX + 64]; /* why setup failed, when errno alone does not say */
    struct sbx *slots;
    unsigned max, running;
    uid_t uid_base;
    unsigned uid_index; /* the range in the uid registry (uidrange.h) */
    int uid_fd;         /* holds the range until we are gone */
    bool stopping;
    struct tc_cgroup *dead_cgs; /* finished sandboxes' groups: removed once the result is
                                 * out, retried on tick while busy */
    size_t n_dead_cgs;
    struct tc_egress_link *egress; /* the egress proxy, NULL if it could not be started */
    struct tc_pool pool;           /* shells created ahead of time, and the sandboxes' uids */
    struct tc_gv_host gv;
    unsigned gv_seq; /* gvisor cgroups are named g<seq> */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t wdata(unsigned slot, enum wkind k)
{
    return ((uint64_t)slot << 8) | (uint64_t)k;
}

static int watch(struct launcher *L, int fd, uint32_t events, unsigned slot, enum wkind k)
{
    struct epoll_event ev = {.events = events, .data.u64 = wdata(slot, k)};
    return epoll_ctl(L->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static void unwatch_close(struct launcher *L, int *fd)
{
    if (*fd < 0)
        return;
    epoll_ctl(L->epfd, EPOLL_CTL_DEL, *fd, NULL);
    close(*fd);
    *fd = -1;
}

json_t *tc_result_error(const char *id, const char *msg)
{
    return json_pack(
        "{s:s?, s:s, s:n, s:n, s:s, s:s, s:b, s:b, s:i, s:i, s:i, s:n, s:{}, s:[], s:[], s:s}",
        "id", id, "status", "error", "exit_code", "signal", "stdout_b64", "", "stderr_b64", "",
        "stdout_truncated", 0, "stderr_truncated", 0, "duration_ms", 0, "cpu_ms", 0,
        "memory_peak_bytes", 0, "killed_reason", "enforced", "policy_violations", "files", "error",
        msg);
}

static void send_result(struct launcher *L, const char *id, json_t *result)
{
    char *s;
    if (!result)
        result = tc_result_error(id, "out of memory");
    if (!result)
        return;
    s = json_dumps(result, JSON_COMPACT);
    json_decref(result);
    if (!s)
        return;
    size_t len = strlen(s);
    if (len > TC_WIRE_MAX_PAYLOAD) {
        /* stdout, stderr and collected files near their caps: an answer the wire cannot
         * carry would leave the caller waiting forever. */
        free(s);
        send_result(L, id,
                    tc_result_error(id, "the result is too large to return "
                                        "(lower output_bytes or collect less)"));
        return;
    }
    (void)tc_wire_send(L->sock, TC_WIRE_RESULT, id, s, len);
    free(s);
}

static void send_error(struct launcher *L, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_error(struct launcher *L, const char *id, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    send_result(L, id, tc_result_error(id, msg));
}

static void deliver_result(void *userdata, const char *id, json_t *result)
{
    send_result(userdata, id, result);
}

/* ---------------- kill / teardown ---------------- */

static void kill_sbx(struct launcher *L, struct sbx *s, const char *reason)
{
    (void)L;
    if (!s->killed_reason)
        s->killed_reason = reason;
    if (!s->exited && s->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
    /* gvisor: runsc leads its own session (setsid), which its gofer and sandbox inherit; this
     * reaches them also on a host without cgroups. s->pid is not reaped yet, so not reused. */
    if (s->gvisor && !s->exited && s->pid > 0)
        kill(-s->pid, SIGKILL);
    if (s->has_cg)
        tc_cg_kill(&s->cg);
}

static void retry_dead_cgs(struct launcher *L)
{
    size_t j = 0;
    if (tc_pool_joining(&L->pool))
        return; /* rmdir would wait for that migration: retried when it is over */
    for (size_t i = 0; i < L->n_dead_cgs; i++) {
        if (tc_cg_destroy(&L->dead_cgs[i]) < 0)
            L->dead_cgs[j++] = L->dead_cgs[i];
    }
    L->n_dead_cgs = j;
}

static void destroy_cg(struct launcher *L, struct tc_cgroup *cg)
{
    for (int i = 0; i < 200; i++) {
        if (tc_cg_destroy(cg) == 0)
            return;
        nanosleep(&(struct timespec){0, 500000}, NULL);
    }
    struct tc_cgroup *n = realloc(L->dead_cgs, (L->n_dead_cgs + 1) * sizeof(*n));
    if (n) {
        L->dead_cgs = n;
        L->dead_cgs[L->n_dead_cgs++] = *cg;
    }
}

/* A finished sandbox's groups are removed right after its result is out: rmdir takes the
 * kernel's global cgroup mutex, which another task's v1 migration can hold for an RCU grace
 * period (docs/sandbox.md, Cgroups). Every process is gone by then (PID 1 has been reaped,
 * and it outlives everything in its namespace). */
static void defer_cg(struct launcher *L, struct tc_cgroup *cg)
{
    struct tc_cgroup *n = realloc(L->dead_cgs, (L->n_dead_cgs + 1) * sizeof(*n));
    if (!n) {
        destroy_cg(L, cg);
        return;
    }
    L->dead_cgs = n;
    L->dead_cgs[L->n_dead_cgs++] = *cg;
}

static void teardown(struct launcher *L, struct sbx *s)
{
    tc_egress_link_close(L->egress, s->egress_handle); /* no-op for handle 0 */
    unwatch_close(L, &s->pidfd);
    unwatch_close(L, &s->stdin_fd);
    unwatch_close(L, &s->out.fd);
    unwatch_close(L, &s->err.fd);
    unwatch_close(L, &s->ctl_fd);
    unwatch_close(L, &s->notify_fd);
    if (s->sync_fd >= 0)
        close(s->sync_fd);
    if (s->cfg_fd >= 0)
        close(s->cfg_fd);
    if (s->pid > 0 && !s->exited) {
        /* only on setup failure paths: the child is ours, reap it */
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        s->exited = true;
    }
    if (s->has_cg) {
        tc_cg_kill(&s->cg);
        /* gvisor: runsc's sandbox and gofer were not children of ours: wait until the group
         * is empty (and gone) so that the result never precedes their end */
        if (s->gvisor)
            destroy_cg(L, &s->cg);
        else
            defer_cg(L, &s->cg);
        s->has_cg = false;
    }
    if (s->ws_fd >= 0) {
        close(s->ws_fd);
        s->ws_fd = -1;
    }
    if (s->ws_mounted)
        tc_ws_unmount(s->ws_path);
    if (s->ws_dir)
        rmdir(s->ws_path);
    if (s->gv_fd >= 0)
        close(s->gv_fd);
    if (s->gv_mounted)
        umount2(s->gv_path, MNT_DETACH); /* config, secrets, runsc's state and log */
    if (s->gv_dir)
        rmdir(s->gv_path);
    free(s->out.data);
    free(s->err.data);
    free(s->stdin_data);
    tc_spec_release(&s->spec);
    json_decref(s->spec_json);
    if (s->uid)
        tc_pool_release_uid(&L->pool, s->uid);
    unsigned slot = s->slot;
    memset(s, 0, sizeof(*s));
    s->slot = slot;
    s->pidfd = s->stdin_fd = s->out.fd = s->err.fd = s->ctl_fd = s->notify_fd = s->ws_fd =
        s->sync_fd = s->gv_fd = s->cfg_fd = -1;
    L->running--;
}

/* ---------------- result ---------------- */

static json_t *enforced_json(struct launcher *L)
{
    const char *mem = tc_cg_mech(&L->cg, TC_CG_MEMORY), *pids = tc_cg_mech(&L->cg, TC_CG_PIDS),
               *cpu = tc_cg_mech(&L->cg, TC_CG_CPU);
    char cpubuf[32];

    if (L->cg.mode == TC_CG_V2)
        cpu = "cgroup_v2";
    snprintf(cpubuf, sizeof(cpubuf), "%s%s", cpu ? cpu : "", cpu ? "+rlimit" : "rlimit");
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "wall_ms", "launcher",
                     "cpu_ms", cpubuf, "memory_bytes", mem ? mem : "rlimit", "pids",
                     pids ? pids : "rlimit", "file_size_bytes", "rlimit", "nofile", "rlimit",
                     "output_bytes", "launcher", "workspace_bytes", "tmpfs", "tmp_bytes", "tmpfs");
}

static const char *sig_name(int sig, char *buf, size_t size)
{
    const char *abbr = sigabbrev_np(sig);
    if (abbr)
        snprintf(buf, size, "SIG%s", abbr);
    else
        snprintf(buf, size, "SIG%d", sig);
    return buf;
}

static void read_ctl(struct launcher *L, struct sbx *s);

static void fail_teardown(struct launcher *L, struct sbx *s, const char *msg)
{
    char id[sizeof(s->id)];
    memcpy(id, s->id, sizeof(id));
    teardown(L, s);
    send_result(L, id, tc_result_error(id, msg));
    retry_dead_cgs(L);
}

static void finish(struct launcher *L, struct sbx *s)
{
    json_t *res, *viol, *files;
    _cleanup_free_ char *out_b64 = NULL, *err_b64 = NULL;
    const char *status;
    json_t *exit_code = json_null(), *signal = json_null();
    uint64_t cpu_ns = 0, peak = 0;
    char signame[32];
    int64_t cpu_ms;

    if (s->ctl_fd >= 0)
        read_ctl(L, s);
    /* measurements */
    if (!(s->has_cg && tc_cg_cpu_ns(&s->cg, &cpu_ns) == 0))
        cpu_ns =
            ((uint64_t)s->ru.ru_utime.tv_sec + (uint64_t)s->ru.ru_stime.tv_sec) * 1000000000ULL +
            ((uint64_t)s->ru.ru_utime.tv_usec + (uint64_t)s->ru.ru_stime.tv_usec) * 1000ULL;
    cpu_ms = (int64_t)(cpu_ns / 1000000);
    if (!(s->has_cg && tc_cg_mem_peak(&s->cg, &peak) == 0))
        peak = (uint64_t)s->ru.ru_maxrss * 1024;
    if (s->has_cg && tc_cg_oom_killed(&s->cg) && !s->killed_reason)
        s->killed_reason = "memory";
    /* gvisor: the host pids cgroup is only a backstop for runsc's own threads; when it
     * bites, gVisor could not run the program faithfully (the Go runtime dies). */
    if (s->gvisor && s->has_cg && tc_cg_pids_hit(&s->cg) && !s->killed_reason)
        s->killed_reason = "pids";

    if (s->gv_error[0]) {
        char msg[sizeof(s->gv_error) + 32];
        snprintf(msg, sizeof(msg), "sandbox setup failed: %s", s->gv_error);
        fail_teardown(L, s, msg);
        return;
    }
    if (s->setup_err) { /* from PID 1, or from the program child before its execve */
        char msg[256];
        snprintf(msg, sizeof(msg), "sandbox setup failed: %s: %s", s->setup_what,
                 strerror(s->setup_err));
        fail_teardown(L, s, msg);
        return;
    }
    if (s->have_exit) {
        int st = s->exit_status;
        if (WIFEXITED(st)) {
            exit_code = json_integer(WEXITSTATUS(st));
        } else if (WIFSIGNALED(st)) {
            int sig = WTERMSIG(st);
            signal = json_string(sig_name(sig, signame, sizeof(signame)));
            if (!s->killed_reason && sig == SIGXCPU)
                s->killed_reason = "cpu";
            else if (!s->killed_reason && sig == SIGXFSZ)
                s->killed_reason = "disk";
        }
    } else if (s->killed_reason) {
        signal = json_string("SIGKILL");
    } else {
        char msg[96];
        snprintf(msg, sizeof(msg), "sandbox init exited unexpectedly (status 0x%x)", s->wstatus);
        fail_teardown(L, s, msg);
        return;
    }
    if (s->killed_reason && strcmp(s->killed_reason, "cpu") == 0 && cpu_ms < s->spec.limits.cpu_ms)
        cpu_ms = s->spec.limits.cpu_ms; /* RLIMIT_CPU is per process: show the limit hit */

    if (s->cancel_requested && s->killed_reason && strcmp(s->killed_reason, "cancelled") == 0)
        status = "cancelled"; /* the server asked (POST /v1/executions/{id}/cancel) */
    else if (s->killed_reason)
        status = strcmp(s->killed_reason, "timeout") == 0 ? "timeout" : "killed";
    else if (json_is_integer(exit_code) && json_integer_value(exit_code) == 0)
        status = "completed";
    else
        status = "failed";

    viol = json_array();
    for (unsigned i = 0; i < s->n_viol; i++)
        json_array_append_new(viol, json_pack("{s:s, s:i}", "syscall", s->viol[i].name, "count",
                                              (int)s->viol[i].count));
    bool files_incomplete = false;
    files = s->spec.collect ? tc_ws_collect(s->ws_fd, s->spec.collect, s->spec.limits.output_bytes,
                                            &files_incomplete)
                            : json_array();
    out_b64 = tc_b64_encode(s->out.data ? s->out.data : "", s->out.len);
    err_b64 = tc_b64_encode(s->err.data ? s->err.data : "", s->err.len);
    bool ws_full = false;
    if (s->ws_fd >= 0) {
        struct statfs sf;
        ws_full = fstatfs(s->ws_fd, &sf) == 0 && sf.f_bavail == 0;
    }
    res = json_pack("{s:s, s:s, s:o, s:o, s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:s?, s:o, s:o, s:o,"
                    " s:b, s:b}",
                    "id", s->id, "status", status, "exit_code", exit_code, "signal", signal,
                    "stdout_b64", out_b64 ? out_b64 : "", "stderr_b64", err_b64 ? err_b64 : "",
                    "stdout_truncated", s->out.dropped > 0, "stderr_truncated", s->err.dropped > 0,
                    "duration_ms", (json_int_t)(s->end_ms - s->start_ms), "cpu_ms",
                    (json_int_t)cpu_ms, "memory_peak_bytes", (json_int_t)peak, "killed_reason",
                    s->killed_reason, "enforced",
                    s->gvisor ? tc_gv_enforced(&L->cg) : enforced_json(L), "policy_violations",
                    viol, "files", files ? files : json_array(), "pids_limit_hit",
                    s->has_cg && tc_cg_pids_hit(&s->cg), "workspace_full", ws_full);
    if (res && !s->killed_reason)
        json_object_set_new(res, "killed_reason", json_null());
    if (res && files_incomplete)
        json_object_set_new(res, "files_incomplete", json_true());
    /* Tear down before answering: once the caller has the result, nothing of the
     * sandbox is left (processes, mounts, fds); its empty cgroups go right after. */
    char id[sizeof(s->id)];
    memcpy(id, s->id, sizeof(id));
    uint64_t egress = s->egress_handle;
    teardown(L, s);
    if (egress && res) /* the proxy reports this sandbox's connections first (FINAL) */
        tc_egress_link_park(L->egress, egress, id, res, now_ms() + TC_EGRESS_FINAL_TIMEOUT_MS,
                            deliver_result, L);
    else {
        if (res)
            json_object_set_new(res, "network", json_array());
        send_result(L, id, res);
    }
    retry_dead_cgs(L);
}

static void maybe_finish(struct launcher *L, struct sbx *s)
{
    if (s->used && s->exited && s->out.fd < 0 && s->err.fd < 0)
        finish(L, s);
}

/* ---------------- I/O ---------------- */

static void pump_output(struct launcher *L, struct sbx *s, struct stream *st)
{
    char buf[65536];
    size_t cap = (size_t)s->spec.limits.output_bytes;

    for (;;) {
        ssize_t n = read(st->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            unwatch_close(L, &st->fd);
            maybe_finish(L, s);
            return;
        }
        size_t keep = st->len < cap ? cap - st->len : 0;
        if (keep > (size_t)n)
            keep = (size_t)n;
        if (keep > 0) {
            if (!st->data) {
                st->data = malloc(cap);
                if (!st->data)
                    keep = 0;
            }
            if (keep) {
                memcpy(st->data + st->len, buf, keep);
                st->len += keep;
            }
        }
        st->dropped += (uint64_t)n - keep;
        if (s->out.dropped + s->err.dropped > OUTPUT_KILL_DISCARD && !s->killed_reason)
            kill_sbx(L, s, "output");
    }
}

static void pump_stdin(struct launcher *L, struct sbx *s)
{
    while (s->stdin_off < s->stdin_len) {
        ssize_t n = write(s->stdin_fd, s->stdin_data + s->stdin_off, s->stdin_len - s->stdin_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n < 0)
            break; /* EPIPE: the program does not read stdin */
        s->stdin_off += (size_t)n;
    }
    unwatch_close(L, &s->stdin_fd);
}

static void add_violation(struct sbx *s, const char *name)
{
    for (unsigned i = 0; i < s->n_viol; i++) {
        if (strcmp(s->viol[i].name, name) == 0) {
            s->viol[i].count++;
            return;
        }
    }
    if (s->n_viol < MAX_VIOLATIONS) {
        snprintf(s->viol[s->n_viol].name, sizeof(s->viol[0].name), "%s", name);
        s->viol[s->n_viol++].count = 1;
    }
}

static void handle_notify(struct launcher *L, struct sbx *s, uint32_t events)
{
    if (events & EPOLLIN) {
        char name[48];
        bool denied = false;
        int r = tc_seccomp_handle(s->notify_fd, name, sizeof(name), &denied);
        if ((r == 0 || r == -ENOENT) && denied)
            add_violation(s, name);
        if (r == 0 || r == -ENOENT || r == -EINTR)
            return;
        unwatch_close(L, &s->notify_fd); /* unexpected error: do not spin on it */
        return;
    }
    if (events & (EPOLLHUP | EPOLLERR))
        unwatch_close(L, &s->notify_fd);
}

static void read_ctl(struct launcher *L, struct sbx *s)
{
    for (;;) {
        struct tc_ctl_msg m;
        int fd = -1;
        long n = tc_recv_fd(s->ctl_fd, &fd, &m, sizeof(m));
        if (n == -EAGAIN)
            return;
        if (n <= 0) {
            if (fd >= 0)
                close(fd);
            unwatch_close(L, &s->ctl_fd);
            return;
        }
        if ((size_t)n != sizeof(m)) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        switch (m.kind) {
        case TC_CTL_SETUP_ERROR:
            s->setup_err = m.err > 0 ? m.err : EIO;
            m.what[sizeof(m.what) - 1] = '\0';
            snprintf(s->setup_what, sizeof(s->setup_what), "%s", m.what);
            break;
        case TC_CTL_NOTIFY_FD: /* sent right before the program's execve */
            s->setup_until_ms = 0;
            if (fd >= 0 && s->notify_fd < 0 && watch(L, fd, EPOLLIN, s->slot, W_NOTIFY) == 0) {
                s->notify_fd = fd;
                fd = -1;
            }
            break;
        case TC_CTL_EXEC_ERROR:
            s->setup_until_ms = 0;
            s->exec_err = m.err;
            break;
        case TC_CTL_EXIT:
            s->have_exit = true;
            s->exit_status = m.wstatus;
            break;
        default:
            break;
        }
        if (fd >= 0)
            close(fd);
    }
}

static void handle_pidfd(struct launcher *L, struct sbx *s)
{
    int st;
    pid_t r = wait4(s->pid, &st, WNOHANG, &s->ru);
    if (r == 0)
        return;
    s->exited = true;
    s->wstatus = r > 0 ? st : 0;
    s->end_ms = now_ms();
    unwatch_close(L, &s->pidfd);
    if (s->gvisor && r > 0) {
        /* runsc run is the sandbox's "PID 1": its status is the program's */
        if (s->ctl_fd >= 0)
            read_ctl(L, s);
        if (!s->setup_err &&
            tc_gv_status(s->gv_fd, st, &s->exit_status, s->gv_error, sizeof(s->gv_error)) == 0)
            s->have_exit = true;
    }
    /* PID 1 is gone, so is the whole namespace; make sure the cgroup is empty too. */
    if (s->has_cg)
        tc_cg_kill(&s->cg);
    if (s->ctl_fd >= 0)
        read_ctl(L, s);
    maybe_finish(L, s);
}

/* ---------------- start ---------------- */

static void start_fail(struct launcher *L, struct sbx *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void start_fail(struct launcher *L, struct sbx *s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail_teardown(L, s, msg);
}

/* The sandbox takes over a shell's process, fds, uid and groups (teardown releases them). */
static void adopt(struct sbx *s, struct tc_shell *sh)
{
    s->pid = sh->pid;
    s->pidfd = sh->pidfd;
    s->stdin_fd = sh->stdin_fd;
    s->out.fd = sh->stdout_fd;
    s->err.fd = sh->stderr_fd;
    s->ctl_fd = sh->ctl_fd;
    s->sync_fd = sh->sync_fd;
    s->uid = sh->uid;
    s->cg = sh->cg;
    s->has_cg = sh->has_cg;
}

/* Limits, configuration, egress listener, then let the shell go. */
/* PID 1's pidfd, stdout, stderr, control socket and (if there is input) stdin into the loop,
 * non-blocking; without input, stdin is closed at once. 0 or -errno. */
static int watch_streams(struct launcher *L, struct sbx *s)
{
    int r;
    fcntl(s->stdin_fd, F_SETFL, O_NONBLOCK);
    fcntl(s->out.fd, F_SETFL, O_NONBLOCK);
    fcntl(s->err.fd, F_SETFL, O_NONBLOCK);
    fcntl(s->ctl_fd, F_SETFL, O_NONBLOCK);
    if ((r = watch(L, s->pidfd, EPOLLIN, s->slot, W_PIDFD)) < 0 ||
        (r = watch(L, s->out.fd, EPOLLIN, s->slot, W_STDOUT)) < 0 ||
        (r = watch(L, s->err.fd, EPOLLIN, s->slot, W_STDERR)) < 0 ||
        (r = watch(L, s->ctl_fd, EPOLLIN, s->slot, W_CTL)) < 0)
        return r;
    if (s->stdin_len > 0)
        return watch(L, s->stdin_fd, EPOLLOUT, s->slot, W_STDIN);
    close(s->stdin_fd);
    s->stdin_fd = -1;
    return 0;
}

/* Everything before PID 1 is released: its configuration, the limits, the egress listener. */
static int prepare(struct launcher *L, struct sbx *s)
{
    int r;

    /* PID 1 exec's toolcage-init and reads everything it needs from this memfd. */
    s->cfg_fd =
        tc_child_config(&s->spec, &L->sc, s->ws_path + strlen(L->scratch) + 1 /* "ws/<id>" */,
                        !L->cg.has[TC_CG_MEMORY], !L->cg.has[TC_CG_PIDS]);
    if (s->cfg_fd < 0) {
        r = s->cfg_fd;
        s->cfg_fd = -1;
        return r;
    }
    if (s->has_cg && (r = tc_cg_set_limits(&s->cg, &s->spec.limits)) < 0)
        return r;
    /* Network allowlist: the proxy's listener goes into the sandbox's network namespace
     * before PID 1 is released (and brings lo up). */
    if (s->spec.network_allow &&
        (r = tc_egress_link_attach(L->egress, s->pid, s->spec.network_allow, &s->egress_handle)) <
            0)
        return r;
    return 0;
}

/* Let the shell go: from here on the program may run. */
static int release(struct launcher *L, struct sbx *s)
{
    int r = tc_shell_go(s->sync_fd, s->cfg_fd);
    close(s->sync_fd);
    s->sync_fd = -1;
    close(s->cfg_fd);
    s->cfg_fd = -1;
    if (r == -EPIPE || r == -ECONNRESET)
        r = 0; /* it died on its way (a failed cgroup join): its report is on ctl_fd */
    else if (r < 0)
        return r;
    s->setup_until_ms = now_ms() + SETUP_QUIET_MS;
    return watch_streams(L, s);
}

/* A "hold" spec: everything is set up; tell the server and wait for TC_WIRE_GO (or CANCEL).
 * The server records that the program starts before it says go, so that a crash at any
 * point leaves a record that tells whether the program can have run. The wall-time limit
 * counts from go; HOLD_MAX_MS bounds the wait. */
static void hold(struct launcher *L, struct sbx *s)
{
    s->held = true;
    s->deadline_ms = now_ms() + HOLD_MAX_MS;
    (void)tc_wire_send(L->sock, TC_WIRE_READY, s->id, NULL, 0);
}

/* gvisor: runsc in the sandbox's cgroup, with the stdio pipes; its pidfd stands for PID 1. */
static int spawn_gvisor(struct launcher *L, struct sbx *s)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1};
    struct tc_gv_child c = {.cg_procs = {-1, -1, -1}};
    char bufs[6][PATH_MAX + 32];
    const char *argv[16];
    struct clone_args_ ca;
    int pidfd = -1, r = 0;
    pid_t pid;

    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
        r = -errno;
        goto out;
    }
    bool into_cg = s->has_cg && L->cg.mode == TC_CG_V2 && s->cg.fd[0] >= 0;
    if (s->has_cg && !into_cg && (r = tc_cg_open_procs(&s->cg, c.cg_procs)) < 0)
        goto out;
    tc_gv_argv(&L->gv, s->gv_path, s->id, bufs, argv);
    c.stdin_fd = in[0];
    c.stdout_fd = out[1];
    c.stderr_fd = err[1];
    c.ctl_fd = ctl[1];
    c.argv = argv;
    c.launcher = getpid();

    memset(&ca, 0, sizeof(ca));
    ca.flags = CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)&pidfd;
    ca.exit_signal = SIGCHLD;
    if (into_cg) {
        ca.flags |= CLONE_INTO_CGROUP_;
        ca.cgroup = (uint64_t)s->cg.fd[0];
    }
    pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid < 0 && into_cg) {
        ca.flags &= ~CLONE_INTO_CGROUP_;
        ca.cgroup = 0;
        if ((r = tc_cg_open_procs(&s->cg, c.cg_procs)) < 0)
            goto out;
        pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    }
    if (pid < 0) {
        r = -errno;
        goto out;
    }
    if (pid == 0)
        tc_gv_child_main(&c);
    s->pid = pid;
    s->pidfd = pidfd;
    s->stdin_fd = in[1];
    s->out.fd = out[0];
    s->err.fd = err[0];
    s->ctl_fd = ctl[0];
    in[1] = out[0] = err[0] = ctl[0] = -1;
    r = watch_streams(L, s);
out:
    for (int i = 0; i < 3; i++)
        if (c.cg_procs[i] >= 0)
            close(c.cg_procs[i]);
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
        if (err[i] >= 0)
            close(err[i]);
        if (ctl[i] >= 0)
            close(ctl[i]);
    }
    return r;
}

/* gvisor: the bundle on a tmpfs of its own (so a teardown is one unmount). */
static int prepare_gvisor(struct launcher *L, struct sbx *s, char *err, size_t errlen)
{
    int r = snprintf(s->gv_path, sizeof(s->gv_path), "%s/%s", L->gvdir, s->id);
    if (r < 0 || (size_t)r >= sizeof(s->gv_path) || mkdir(s->gv_path, 0700) < 0) {
        snprintf(err, errlen, "bundle: %s", strerror(errno));
        return -1;
    }
    s->gv_dir = true;
    /* config + rootfs skeleton + runsc state and log (~100 KiB) + the secret files */
    if (mount("tcgvisor", s->gv_path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0700,size=4m,nr_inodes=4096") < 0) {
        snprintf(err, errlen, "bundle: %s", strerror(errno));
        return -1;
    }
    s->gv_mounted = true;
    s->gv_fd = open(s->gv_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s->gv_fd < 0) {
        snprintf(err, errlen, "bundle: %s", strerror(errno));
        return -1;
    }
    return tc_gv_write_bundle(s->gv_fd, s->gv_path, &s->spec, &L->rootfs, s->ws_path, s->uid,
                              !L->cg.has[TC_CG_MEMORY], err, errlen) < 0
               ? -1
               : 0;
}

/* gvisor: bundle, cgroups with limits (pids with runsc's headroom), then runsc. 0 or -errno
 * (err says why for the bundle). */
static int setup_gvisor(struct launcher *L, struct sbx *s, char *err, size_t errlen)
{
    if (prepare_gvisor(L, s, err, errlen) < 0)
        return -EINVAL;
    if (L->cg.mode != TC_CG_NONE) {
        char name[32];
        struct tc_limits lim = s->spec.limits;
        lim.pids = lim.pids * 3 + TC_GV_PIDS_HEADROOM;
        snprintf(name, sizeof(name), "g%u", ++L->gv_seq); /* never reused, unlike uids */
        int r = tc_cg_create(&L->cg, name, &s->cg);
        if (r < 0)
            return r;
        s->has_cg = true;
        if ((r = tc_cg_set_limits(&s->cg, &lim)) < 0)
            return r;
    }
    return 0;
}

static void start_sandbox(struct launcher *L, const char *hdr_id, char *payload)
{
    json_error_t jerr;
    json_t *spec = json_loads(payload, JSON_REJECT_DUPLICATES, &jerr);
    struct tc_spec parsed;
    char err[256] = "";
    struct sbx *s = NULL;
    int r;

    if (!spec) {
        send_error(L, hdr_id, "spec: invalid JSON");
        return;
    }
    r = tc_spec_parse(spec, &parsed, err, sizeof(err));
    if (r < 0) {
        send_error(L, hdr_id, "invalid spec: %s", err);
        json_decref(spec);
        return;
    }
    bool gvisor = strcmp(parsed.backend, "gvisor") == 0;
    if (strcmp(parsed.id, hdr_id) != 0) {
        send_error(L, hdr_id, "spec id does not match the message");
        goto fail_parsed;
    }
    if (gvisor && !L->gv.available) {
        send_error(L, hdr_id, "backend gvisor: runsc not found on this host");
        goto fail_parsed;
    }
    if (gvisor && parsed.network_allow) {
        /* runsc runs with --network=none; the egress proxy lives in a host netns */
        send_error(L, hdr_id, "backend gvisor: network allowlists are not supported");
        goto fail_parsed;
    }
    for (unsigned i = 0; i < L->max; i++) {
        if (L->slots[i].used && strcmp(L->slots[i].id, parsed.id) == 0) {
            send_error(L, hdr_id, "a sandbox with this id is running");
            goto fail_parsed;
        }
        if (!L->slots[i].used && !s)
            s = &L->slots[i];
    }
    if (!s || L->stopping) {
        send_error(L, hdr_id, "too many sandboxes");
        goto fail_parsed;
    }
    L->running++;
    s->used = true;
    s->spec_json = spec;
    s->spec = parsed;
    snprintf(s->id, sizeof(s->id), "%s", parsed.id);
    s->gvisor = gvisor;
    s->start_ms = now_ms();
    s->deadline_ms = s->start_ms + s->spec.limits.wall_ms;
    if (s->spec.network_allow && tc_egress_spec_env(&s->spec) < 0) {
        start_fail(L, s, "out of memory");
        return;
    }

    if (s->spec.stdin_b64 && tc_b64_decode(s->spec.stdin_b64, strlen(s->spec.stdin_b64),
                                           &s->stdin_data, &s->stdin_len) < 0) {
        start_fail(L, s, "stdin_b64: invalid base64");
        return;
    }
    /* The shell brings the sandbox's host uid; a gvisor sandbox takes one of its own. */
    if (s->gvisor) {
        if ((r = tc_pool_alloc_uid(&L->pool, &s->uid)) < 0) {
            start_fail(L, s, "spawn: %s", strerror(-r));
            return;
        }
    } else {
        struct tc_shell sh;
        if ((r = tc_pool_take(&L->pool, s->start_ms, &sh)) < 0) {
            start_fail(L, s, "spawn: %s", strerror(-r));
            return;
        }
        adopt(s, &sh);
    }
    r = snprintf(s->ws_path, sizeof(s->ws_path), "%s/%s", L->wsdir, s->id);
    if (r < 0 || (size_t)r >= sizeof(s->ws_path) || mkdir(s->ws_path, 0700) < 0) {
        start_fail(L, s, "workspace: %s", strerror(errno));
        return;
    }
    s->ws_dir = true;
    r = tc_ws_mount(s->ws_path, s->spec.limits.workspace_bytes, s->uid, s->uid);
    if (r < 0) {
        start_fail(L, s, "workspace: %s", strerror(-r));
        return;
    }
    s->ws_mounted = true;
    s->ws_fd = r;
    if (s->spec.files &&
        (r = tc_ws_write_files(s->ws_fd, s->spec.files, s->uid, s->uid, err, sizeof(err))) < 0) {
        start_fail(L, s, "workspace %s", err);
        return;
    }
    if (s->gvisor && (r = setup_gvisor(L, s, err, sizeof(err))) == -EINVAL) {
        start_fail(L, s, "gvisor %s", err);
        return;
    }
    if (!s->gvisor)
        r = prepare(L, s);
    if (r == 0 && s->spec.hold) {
        hold(L, s);
        return;
    }
    if (r == 0)
        r = s->gvisor ? spawn_gvisor(L, s) : release(L, s);
    if (r < 0) {
        start_fail(L, s, "spawn: %s", strerror(-r));
        return;
    }
    return;
fail_parsed:
    tc_spec_release(&parsed);
    json_decref(spec);
}

/* TC_WIRE_GO: start a held sandbox's program, with its full wall time from now. */
static void go(struct launcher *L, const char *id)
{
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (!s->used || !s->held || strcmp(s->id, id) != 0)
            continue;
        s->held = false;
        s->start_ms = now_ms();
        s->deadline_ms = s->start_ms + s->spec.limits.wall_ms;
        int r = s->gvisor ? spawn_gvisor(L, s) : release(L, s);
        if (r < 0)
            start_fail(L, s, "spawn: %s", strerror(-r));
        return;
    }
}

/* A held sandbox ends without its program having run. */
static void drop_held(struct launcher *L, struct sbx *s, const char *why)
{
    fail_teardown(L, s, why);
}

/* ---------------- main loop ---------------- */

static void on_client(struct launcher *L)
{
    struct tc_wire_hdr h;
    char *payload = NULL;
    int r = tc_wire_recv(L->sock, &h, &payload);

    if (r == -EAGAIN || r == -EINTR)
        return;
    if (r == -EBADMSG) {
        /* a malformed message is dropped; the server is the only peer */
        return;
    }
    if (r < 0) {
        L->stopping = true;
        epoll_ctl(L->epfd, EPOLL_CTL_DEL, L->sock, NULL);
        return;
    }
    switch (h.type) {
    case TC_WIRE_SUBMIT:
        if (payload)
            start_sandbox(L, h.id, payload);
        else
            send_error(L, h.id, "empty spec");
        break;
    case TC_WIRE_CANCEL:
        for (unsigned i = 0; i < L->max; i++) {
            struct sbx *s = &L->slots[i];
            if (!s->used || strcmp(s->id, h.id) != 0)
                continue;
            if (s->held) {
                drop_held(L, s, "cancelled before the program started");
            } else {
                s->cancel_requested = !s->killed_reason;
                kill_sbx(L, s, "cancelled");
            }
        }
        break;
    case TC_WIRE_GO:
        go(L, h.id);
        break;
    case TC_WIRE_SHUTDOWN:
        L->stopping = true;
        break;
    default:
        break;
    }
    free(payload);
}

static void tick(struct launcher *L)
{
    int64_t now = now_ms();
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        uint64_t cpu;
        if (!s->used || s->exited)
            continue;
        if (s->held) {
            if (L->stopping)
                drop_held(L, s, "cancelled before the program started");
            else if (now >= s->deadline_ms)
                drop_held(L, s, "the server did not start the program in time");
            continue;
        }
        if (L->stopping)
            kill_sbx(L, s, "cancelled");
        else if (now >= s->deadline_ms)
            kill_sbx(L, s, "timeout");
        else if (s->has_cg && tc_cg_cpu_ns(&s->cg, &cpu) == 0 &&
                 cpu / 1000000 >= (uint64_t)s->spec.limits.cpu_ms)
            kill_sbx(L, s, "cpu");
        else if (s->has_cg && tc_cg_oom_killed(&s->cg))
            kill_sbx(L, s, "memory"); /* v1 kills one task; the contract kills the tree */
        else if (s->gvisor && s->has_cg && tc_cg_pids_hit(&s->cg))
            kill_sbx(L, s, "pids"); /* runsc's backstop, see TC_GV_PIDS_HEADROOM */
    }
    tc_pool_tick(&L->pool, now);
    if (L->n_dead_cgs)
        retry_dead_cgs(L);
    tc_egress_link_tick(L->egress, now, deliver_result, L);
}

/* A sandbox is between go and its program's exec (at most SETUP_QUIET_MS, for hosts without
 * seccomp notification, whose NOTIFY_FD message marks the exec): milliseconds left, else 0.
 * The pool is not refilled meanwhile, so that creating a shell (~1 ms of kernel work, and
 * locks such as the network namespace's) does not slow a sandbox's start. */
static int64_t setting_up(struct launcher *L, int64_t now)
{
    int64_t w = 0;
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (s->used && !s->exited && s->setup_until_ms - now > w)
            w = s->setup_until_ms - now;
    }
    return w;
}

static int next_timeout(struct launcher *L)
{
    int64_t now = now_ms(), t = -1;
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (!s->used || s->exited)
            continue;
        int64_t d = s->deadline_ms - now;
        if (d < 0)
            d = 0;
        if (d > TICK_MS)
            d = TICK_MS;
        if (t < 0 || d < t)
            t = d;
    }
    if (t < 0 && L->n_dead_cgs)
        t = 100;
    if (tc_egress_link_parked(L->egress) && (t < 0 || t > TICK_MS))
        t = TICK_MS;
    int64_t pt = L->stopping ? -1 : tc_pool_timeout(&L->pool, now);
    if (pt == 0)
        pt = setting_up(L, now);
    if (pt >= 0 && (t < 0 || pt < t))
        t = pt;
    return (int)t;
}

static void dispatch(struct launcher *L, struct epoll_event *ev)
{
    unsigned slot = (unsigned)(ev->data.u64 >> 8);
    enum wkind k = (enum wkind)(ev->data.u64 & 0xff);
    struct sbx *s;

    if (k == W_CLIENT) {
        on_client(L);
        return;
    }
    if (k == W_EGRESS) {
        tc_egress_link_on_readable(L->egress, deliver_result, L);
        return;
    }
    if (k == W_SHELL) {
        tc_pool_event(&L->pool, slot);
        retry_dead_cgs(L);
        return;
    }
    if (k == W_SIGNAL) {
        struct signalfd_siginfo si;
        while (read(L->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            L->stopping = true;
        return;
    }
    if (slot >= L->max)
        return;
    s = &L->slots[slot];
    if (!s->used)
        return;
    switch (k) {
    case W_PIDFD:
        handle_pidfd(L, s);
        break;
    case W_STDIN:
        pump_stdin(L, s);
        break;
    case W_STDOUT:
        if (s->out.fd >= 0)
            pump_output(L, s, &s->out);
        break;
    case W_STDERR:
        if (s->err.fd >= 0)
            pump_output(L, s, &s->err);
        break;
    case W_CTL:
        if (s->ctl_fd >= 0)
            read_ctl(L, s);
        break;
    case W_NOTIFY:
        if (s->notify_fd >= 0)
            handle_notify(L, s, ev->events);
        break;
    default:
        break;
    }
}

static uint64_t shell_wdata(unsigned idx)
{
    return wdata(idx, W_SHELL);
}

static json_t *host_info(struct launcher *L)
{
    struct utsname u;
    json_t *ctl = json_array(), *parents = json_object();
    static const char *const names[TC_CG_N_] = {"memory", "pids", "cpu"};

    uname(&u);
    for (int c = 0; c < TC_CG_N_; c++) {
        if (!L->cg.has[c])
            continue;
        json_array_append_new(
            ctl, json_string(L->cg.mode == TC_CG_V1 && c == TC_CG_CPU ? "cpuacct" : names[c]));
        json_object_set_new(parents, names[c], json_string(L->cg.parent_path[c]));
    }
    json_t *hi = json_pack(
        "{s:s, s:o, s:o, s:b, s:b, s:s, s:i, s:i, s:s, s:b, s:s?, s:i, s:i}", "cgroup",
        L->cg.mode == TC_CG_V2   ? "v2"
        : L->cg.mode == TC_CG_V1 ? "v1"
                                 : "none",
        "controllers", ctl, "cgroup_parents", parents, "seccomp_notify", L->sc.notify, "memsw",
        L->cg.memsw, "kernel", u.release, "launcher_pid", (int)getpid(), "max_sandboxes",
        (int)L->max, "backends", L->gv.available ? "native,gvisor" : "native", "userns", 1, "note",
        L->cg.note[0] ? L->cg.note : NULL, "egress_pid", (int)tc_egress_link_pid(L->egress), "pool",
        (int)L->pool.target);
    /* the host uids of this launcher's sandboxes: first .. first + count - 1 */
    if (hi)
        json_object_set_new(hi, "uid_range",
                            json_pack("{s:i, s:I, s:i}", "index", (int)L->uid_index, "first",
                                      (json_int_t)L->uid_base, "count", MAX_SLOTS));
    return hi;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *ret);

/* What tc_launcher_main() reads off its command line (struct tc_launcher_options). */
struct settings {
    char state_dir[PATH_MAX - 128];
    unsigned long pool;
    char uid_registry[PATH_MAX - 200];
    char gvisor_platform[16];
    char init_path[PATH_MAX];
    bool no_cgroup, no_seccomp_notify;
};

static int setup(struct launcher *L, const struct settings *set)
{
    const char *state_dir = set->state_dir;
    sigset_t mask;
    int r;

    /* A range of host uids no other launcher on this host has (uidrange.h). The search starts
     * at our pid only to spread launchers; the lock decides. */
    const char *registry = set->uid_registry;
    r = registry[0] == '/' ? tc_uidrange_acquire(registry, TC_UID_RANGES, (unsigned)getpid(),
                                                 &L->uid_index, &L->uid_fd)
                           : -EINVAL;
    if (r < 0) {
        char why[96];
        if (r == -EBUSY)
            snprintf(why, sizeof(why), "all %u are held by other launchers", TC_UID_RANGES);
        else
            snprintf(why, sizeof(why), "%s",
                     r == -EPERM ? "the directory must be ours and "
                                   "writable by nobody else"
                                 : strerror(-r));
        snprintf(L->setup_error, sizeof(L->setup_error),
                 "no host uid range for the sandboxes in the registry %.*s: %s", PATH_MAX - 200,
                 registry, why);
        return r;
    }
    L->uid_base = tc_uidrange_first(L->uid_index);
    if (setgroups(0, NULL) < 0)
        return -errno;
    /* Private mount namespace: everything we mount is invisible to the host and
     * disappears with us. */
    if (unshare(CLONE_NEWNS) < 0)
        return -errno;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -errno;
    snprintf(L->scratch, sizeof(L->scratch), "%s/run", state_dir);
    if ((r = mkdir_p(L->scratch, 0700)) < 0)
        return r;
    if (mount("tcscratch", L->scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0711,size=4m") < 0)
        return -errno;
    L->scratch_mounted = true;
    snprintf(L->newroot, sizeof(L->newroot), "%s/newroot", L->scratch);
    snprintf(L->wsdir, sizeof(L->wsdir), "%s/ws", L->scratch);
    snprintf(L->gvdir, sizeof(L->gvdir), "%s/gv", L->scratch);
    if (mkdir(L->newroot, 0755) < 0 || mkdir(L->wsdir, 0711) < 0 || mkdir(L->gvdir, 0700) < 0)
        return -errno;
    /* A shared mount point: each workspace mounted in it also appears in the mount namespace
     * of every shell waiting in the pool (as a slave), which was copied before. */
    if (mount(L->wsdir, L->wsdir, NULL, MS_BIND, NULL) < 0 ||
        mount(NULL, L->wsdir, NULL, MS_SHARED, NULL) < 0)
        return -errno;
    tc_gv_detect(&L->gv, set->gvisor_platform);

    L->init_fd = tc_child_open_init(set->init_path[0] ? set->init_path : NULL, L->init_path,
                                    sizeof(L->init_path));
    if (L->init_fd < 0) {
        snprintf(L->setup_error, sizeof(L->setup_error), "cannot open %s: %s", L->init_path,
                 strerror(-L->init_fd));
        return L->init_fd;
    }
    tc_cg_host_init(&L->cg, set->no_cgroup);
    tc_rootfs_detect(&L->rootfs);
    L->base_fd = tc_child_base_config(&L->rootfs, "newroot");
    if (L->base_fd < 0)
        return L->base_fd;
    r = tc_seccomp_build(!set->no_seccomp_notify, &L->sc);
    if (r < 0)
        return r;

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    L->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L->sigfd < 0 || L->epfd < 0)
        return -errno;
    if ((r = watch(L, L->sock, EPOLLIN, 0, W_CLIENT)) < 0 ||
        (r = watch(L, L->sigfd, EPOLLIN, 0, W_SIGNAL)) < 0)
        return r;
    /* Shells kept ready (docs/sandbox.md, Start-up cost): TOOLCAGE_POOL, default 2. */
    unsigned long pool = set->pool;
    if (pool > MAX_SLOTS - L->max)
        pool = MAX_SLOTS - L->max;
    struct tc_shell_env env = {.cg = &L->cg,
                               .scratch = L->scratch,
                               .base_fd = L->base_fd,
                               .init_fd = L->init_fd,
                               .cap_last_cap = L->rootfs.cap_last_cap};
    return tc_pool_init(&L->pool, &env, L->uid_base, MAX_SLOTS, (unsigned)pool, L->epfd,
                        shell_wdata);
}

static void cleanup(struct launcher *L)
{
    for (unsigned i = 0; i < L->max; i++)
        if (L->slots[i].used) {
            kill_sbx(L, &L->slots[i], "cancelled");
            teardown(L, &L->slots[i]);
        }
    tc_pool_fini(&L->pool);
    for (int i = 0; i < 100 && L->n_dead_cgs; i++) {
        retry_dead_cgs(L);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    tc_cg_host_fini(&L->cg);
    if (L->scratch_mounted)
        umount2(L->scratch, MNT_DETACH);
    tc_seccomp_free(&L->sc);
    if (L->init_fd >= 0)
        close(L->init_fd);
    if (L->base_fd >= 0)
        close(L->base_fd);
    tc_egress_link_free(L->egress);
    free(L->slots);
    free(L->dead_cgs);
    /* last: every process that ran as one of our uids is gone */
    if (L->uid_fd >= 0)
        close(L->uid_fd);
}

static int parse_uint(const char *s, unsigned long max, unsigned long *ret)
{
    char *end;
    unsigned long v;
    if (!s || !*s || *s == '-')
        return -EINVAL;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || v > max)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* Copies v into dst (size bytes): false when it does not fit. */
static bool copy_arg(char *dst, size_t size, const char *v)
{
    return (size_t)snprintf(dst, size, "%s", v) < size;
}

int tc_launcher_main(int argc, char **argv)
{
    struct launcher L;
    struct settings set = {.state_dir = "/run/toolcage",
                           .pool = 2,
                           .uid_registry = TC_UID_REGISTRY,
                           .gvisor_platform = "ptrace"};
    unsigned long fd = 3, max = 64, ppid = 0, flag;
    int r;

    memset(&L, 0, sizeof(L));
    L.sock = L.epfd = L.sigfd = L.init_fd = L.base_fd = L.uid_fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "launcher") == 0)
            continue;
        if (!v) {
            fprintf(stderr, "toolcage launcher: missing value for %s\n", a);
            return 2;
        }
        bool ok = (strcmp(a, "--fd") == 0 && parse_uint(v, INT_MAX, &fd) == 0) ||
                  (strcmp(a, "--max") == 0 && parse_uint(v, MAX_SLOTS, &max) == 0 && max > 0) ||
                  (strcmp(a, "--ppid") == 0 && parse_uint(v, INT_MAX, &ppid) == 0) ||
                  (strcmp(a, "--pool") == 0 && parse_uint(v, TC_POOL_MAX, &set.pool) == 0) ||
                  (strcmp(a, "--state-dir") == 0 && v[0] == '/' &&
                   copy_arg(set.state_dir, sizeof(set.state_dir), v)) ||
                  (strcmp(a, "--uid-registry") == 0 && v[0] == '/' &&
                   copy_arg(set.uid_registry, sizeof(set.uid_registry), v)) ||
                  (strcmp(a, "--init") == 0 && v[0] == '/' &&
                   copy_arg(set.init_path, sizeof(set.init_path), v)) ||
                  (strcmp(a, "--gvisor-platform") == 0 &&
                   (strcmp(v, "ptrace") == 0 || strcmp(v, "kvm") == 0) &&
                   copy_arg(set.gvisor_platform, sizeof(set.gvisor_platform), v));
        if (!ok && strcmp(a, "--no-cgroup") == 0 && parse_uint(v, 1, &flag) == 0) {
            set.no_cgroup = flag;
            ok = true;
        }
        if (!ok && strcmp(a, "--no-seccomp-notify") == 0 && parse_uint(v, 1, &flag) == 0) {
            set.no_seccomp_notify = flag;
            ok = true;
        }
        if (!ok) {
            fprintf(stderr, "toolcage launcher: bad argument %s\n", a);
            return 2;
        }
        i++;
    }
    /* Sandboxes can read their PID 1's cmdline (a fork of us): show nothing but the name. */
    for (int i = 1; i < argc; i++)
        memset(argv[i], 0, strlen(argv[i]));
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (ppid && getppid() != (pid_t)ppid)
        return 1; /* the server died before we armed PDEATHSIG */
    signal(SIGPIPE, SIG_IGN);
    umask(022); /* workspace files get exactly the modes the spec asks for */
    if (chdir("/") < 0)
        return 1;
    {
        /* ~10 fds per sandbox: use the whole hard limit we were given */
        struct rlimit nf;
        if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < nf.rlim_max) {
            nf.rlim_cur = nf.rlim_max;
            setrlimit(RLIMIT_NOFILE, &nf);
        }
    }
    L.sock = (int)fd;
    fcntl(L.sock, F_SETFD, FD_CLOEXEC);
    L.max = (unsigned)max;
    L.slots = calloc(L.max, sizeof(*L.slots));
    if (!L.slots)
        return 1;
    for (unsigned i = 0; i < L.max; i++) {
        struct sbx *s = &L.slots[i];
        s->slot = i;
        s->pidfd = s->stdin_fd = s->out.fd = s->err.fd = s->ctl_fd = s->notify_fd = s->ws_fd =
            s->sync_fd = s->gv_fd = s->cfg_fd = -1;
    }
    r = setup(&L, &set);
    if (r < 0) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof(msg), "launcher setup failed: %s",
                 L.setup_error[0] ? L.setup_error : strerror(-r));
        fprintf(stderr, "toolcage launcher: %s\n", msg); /* the server's stderr */
        /* the cause travels too: the server reports ENOSPC as such, not as "I/O error" */
        json_t *hi = json_pack("{s:s, s:i}", "error", msg, "errno", -r);
        char *s = hi ? json_dumps(hi, JSON_COMPACT) : NULL;
        if (s)
            tc_wire_send(L.sock, TC_WIRE_HELLO, NULL, s, strlen(s));
        free(s);
        json_decref(hi);
        cleanup(&L);
        return 1;
    }
    /* The egress proxy (network allowlists). Without it, specs that allow network fail. */
    if (tc_egress_link_new(L.epfd, wdata(0, W_EGRESS), &L.egress) < 0)
        L.egress = NULL;
    {
        json_t *hi = host_info(&L);
        char *s = hi ? json_dumps(hi, JSON_COMPACT) : NULL;
        json_decref(hi);
        if (!s || tc_wire_send(L.sock, TC_WIRE_HELLO, NULL, s, strlen(s)) < 0) {
            free(s);
            cleanup(&L);
            return 1;
        }
        free(s);
    }

    for (;;) {
        struct epoll_event evs[64];
        int n;
        if (L.stopping) {
            tick(&L); /* kills everything still running */
            if (L.running == 0 && tc_egress_link_parked(L.egress) == 0)
                break;
        }
        n = epoll_wait(L.epfd, evs, 64, next_timeout(&L));
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++)
            dispatch(&L, &evs[i]);
        int64_t now = now_ms();
        if (n == 0 && !L.stopping && tc_pool_wants_refill(&L.pool, now) && !setting_up(&L, now))
            tc_pool_refill(&L.pool, now); /* idle: one more shell ahead of time */
        tick(&L);
    }
    cleanup(&L);
    return 0;
}
