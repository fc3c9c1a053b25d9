/* The launcher: killing a sandbox, tearing it down, and its result (sandbox/launcher_int.h). */
#include "sandbox/launcher_int.h"
#include "sandbox/vm/vm_proto.h"

/* ---------------- a sandbox's namespaces, let go of off the call's path ---------------- */

/* The last reference to a mount namespace takes its mounts down and then waits for an
 * expedited RCU grace period (namespace_unlock; ~0.4 ms on the development VM), and a network
 * or IPC namespace's end is kernel work that interrupts every CPU. PID 1 holds its sandbox's
 * until it exits: the wait would come between the program's end and its result, and the rest
 * beside the server's record of it. So the launcher holds them too, and lets go of them when
 * it is quiet (with the refills: not beside a young call or a fresh result), on a thread of
 * its own that only closes what it is handed (docs/sandbox.md, Namespaces let go of when
 * quiet). A second thread: the shells are raw clones of the launcher, so what they call in
 * libc must not wait for other threads (child.c, setresuid). */

static struct {
    int rfd, ready; /* the pipe's read end; the end that says the thread runs */
} release_args;

static void *release_main(void *arg)
{
    int rfd = release_args.rfd, fd;
    (void)arg;
    (void)!write(release_args.ready, "r", 1);
    close(release_args.ready);
    for (;;) {
        ssize_t n = read(rfd, &fd, sizeof(fd));
        if (n == (ssize_t)sizeof(fd))
            close(fd);
        else if (n == 0 || (n < 0 && errno != EINTR)) {
            close(rfd); /* the launcher's writes fail from here on: it closes inline */
            return NULL;
        }
    }
}

/* The thread, started: the launcher goes on (and clones shells) once it runs, not while its
 * start may hold a lock of libc's or of a sanitizer's runtime that a clone would inherit. */
int lc_release_start(struct launcher *L)
{
    int p[2], ready[2];
    pthread_t t;
    sigset_t all, old;
    char c;
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(ready, O_CLOEXEC) < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    release_args.rfd = p[0];
    release_args.ready = ready[1];
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&t, NULL, release_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        close(p[0]);
        close(p[1]);
        close(ready[0]);
        close(ready[1]);
        return -r;
    }
    pthread_detach(t);
    while (read(ready[0], &c, 1) < 0 && errno == EINTR)
        ;
    close(ready[0]);
    L->release_fd = p[1];
    return 0;
}

void lc_release_pending(struct launcher *L)
{
    for (unsigned i = 0; i < L->n_ns_pending; i++) {
        int fd = L->ns_pending[i];
        if (L->release_fd < 0 || write(L->release_fd, &fd, sizeof(fd)) != (ssize_t)sizeof(fd))
            close(fd);
    }
    L->n_ns_pending = 0;
}

static void release_later(struct launcher *L, int fd)
{
    if (L->n_ns_pending == TC_ARRAY_SIZE(L->ns_pending))
        lc_release_pending(L); /* a steady load, never quiet: no more than these wait */
    L->ns_pending[L->n_ns_pending++] = fd;
}

/* Called once PID 1 may have its own mount namespace (it takes one once it runs, before it
 * waits for go): a shell whose PID 1 does not yet is left alone, and tried again later. */
void lc_hold_ns(struct launcher *L, struct sbx *s)
{
    static const char *const names[] = {"mnt", "net", "ipc"};
    char path[40];
    struct stat st;
    if ((s->ns_fd[0] >= 0 && s->ns_fd[1] >= 0 && s->ns_fd[2] >= 0) || s->gvisor || s->pid <= 0 ||
        s->exited)
        return;
    snprintf(path, sizeof(path), "/proc/%d/ns", (int)s->pid);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    for (unsigned i = 0; i < TC_ARRAY_SIZE(names); i++) {
        if (s->ns_fd[i] >= 0)
            continue;
        int fd = openat(dfd, names[i], O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && i == 0 &&
            (!L->own_mnt_ino || fstat(fd, &st) < 0 || st.st_ino == L->own_mnt_ino)) {
            close(fd); /* still ours: PID 1 has not unshared yet */
            fd = -1;
        }
        s->ns_fd[i] = fd;
    }
    close(dfd);
}

/* ---------------- kill / teardown ---------------- */

void lc_kill_sbx(struct launcher *L, struct sbx *s, const char *reason)
{
    (void)L;
    if (!s->killed_reason)
        s->killed_reason = reason;
    s->kill_ms = lc_now_ms();
    if (!s->exited && s->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
    /* gvisor: runsc leads its own session (setsid), which its gofer and sandbox inherit; this
     * reaches them also on a host without cgroups. s->pid is not reaped yet, so not reused. */
    if (s->gvisor && !s->exited && s->pid > 0)
        kill(-s->pid, SIGKILL);
    if (s->has_cg)
        tc_cg_kill(&s->cg);
}

void lc_retry_dead_cgs(struct launcher *L)
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

json_t *lc_violations_json(const struct sbx *s)
{
    json_t *viol = json_array();
    for (unsigned i = 0; viol && i < s->n_viol; i++)
        json_array_append_new(viol, json_pack("{s:s, s:i}", "syscall", s->viol[i].name, "count",
                                              (int)s->viol[i].count));
    return viol;
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

void lc_teardown(struct launcher *L, struct sbx *s)
{
    tc_egress_link_close(L->egress, s->egress_handle); /* no-op for handle 0 */
    lc_image_release(L, s);
    lc_unwatch_close(L, &s->pidfd);
    lc_unwatch_close(L, &s->stdin_fd);
    lc_unwatch_close(L, &s->out.fd);
    lc_unwatch_close(L, &s->err.fd);
    lc_unwatch_close(L, &s->ctl_fd);
    lc_unwatch_close(L, &s->notify_fd);
    lc_unwatch_close(L, &s->oom_fd);
    if (s->sync_fd >= 0)
        close(s->sync_fd);
    if (s->cfg_fd >= 0)
        close(s->cfg_fd);
    for (unsigned i = 0; i < TC_ARRAY_SIZE(s->ns_fd); i++)
        if (s->ns_fd[i] >= 0)
            release_later(L, s->ns_fd[i]);
    if (json_array_size(s->spec.secret_files) > 0)
        lc_release_pending(L); /* its /run/secrets goes now (on the thread), not when quiet */
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
    json_decref(s->egress_tls);
    s->egress_tls = NULL;
    json_decref(s->spec_json);
    if (s->uid)
        tc_pool_release_uid(&L->pool, s->uid);
    if (s->warm_tmpl) {
        L->n_warm--;
        L->warm_dirty = true;
    }
    unsigned slot = s->slot;
    memset(s, 0, sizeof(*s));
    s->slot = slot;
    s->pidfd = s->stdin_fd = s->out.fd = s->err.fd = s->ctl_fd = s->notify_fd = s->oom_fd =
        s->ws_fd = s->sync_fd = s->gv_fd = s->cfg_fd = s->ns_fd[0] = s->ns_fd[1] = s->ns_fd[2] = -1;
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

void lc_fail_teardown(struct launcher *L, struct sbx *s, const char *msg)
{
    char id[sizeof(s->id)];
    bool warm = s->warm_tmpl != 0; /* no call has it: no one to tell */
    memcpy(id, s->id, sizeof(id));
    if (warm)
        lc_warm_ended(L, s);
    lc_teardown(L, s);
    if (!warm)
        lc_send_result(L, id, tc_result_error(id, msg));
    lc_retry_dead_cgs(L);
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

    if (s->warm_tmpl) { /* ended before a call took it: nothing to report, no one to tell */
        lc_warm_ended(L, s);
        lc_teardown(L, s);
        lc_retry_dead_cgs(L);
        return;
    }
    if (s->held) { /* its call's program never ran (a warm sandbox's interpreter died) */
        lc_fail_teardown(L, s, "the sandbox ended before the program started");
        return;
    }
    if (s->ctl_fd >= 0)
        lc_read_ctl(L, s);
    lc_flush_chunks(L, s); /* a session's output exists only as chunks */
    /* measurements */
    if (!(s->has_cg && tc_cg_cpu_ns(&s->cg, &cpu_ns) == 0))
        cpu_ns =
            ((uint64_t)s->ru.ru_utime.tv_sec + (uint64_t)s->ru.ru_stime.tv_sec) * 1000000000ULL +
            ((uint64_t)s->ru.ru_utime.tv_usec + (uint64_t)s->ru.ru_stime.tv_usec) * 1000ULL;
    else /* a warm sandbox's: from its call on (its program's start was before) */
        cpu_ns -= cpu_ns >= s->cpu_base_ns ? s->cpu_base_ns : cpu_ns;
    cpu_ms = (int64_t)(cpu_ns / 1000000);
    if (!(s->has_cg && tc_cg_mem_peak(&s->cg, &peak) == 0))
        peak = (uint64_t)s->ru.ru_maxrss * 1024;
    if (s->has_cg && tc_cg_oom_killed(&s->cg) && !s->killed_reason)
        s->killed_reason = "memory";
    bool pids_hit = s->has_cg && tc_cg_pids_hit(&s->cg);
    if (s->vm && s->have_exit) {
        /* a microvm's program ran under the guest's kernel: its cgroup there says what the
         * program met (vminit, through vmrun's verdict); the host's above measured qemu.
         * cpu_ms stays qemu's: it is what the tenant's CPU quota is charged (the guest's own
         * figure is the guest's word, and under TCG qemu spends several times more). The
         * peak is bounded by the program's limit (+ the guest kernel's charge batching).
         * Without a verdict (qemu died, the guest broke the protocol) the host's stand. */
        unsigned oom = 0, pids = 0;
        unsigned long long g_cpu_us = 0, g_peak = 0;
        if (sscanf(s->vm_verdict, TC_VM_VERDICT_FMT, &oom, &pids, &g_cpu_us, &g_peak) == 4) {
            uint64_t most = (uint64_t)tc_vm_program_memory(s->spec.limits.memory_bytes) + (1 << 20);
            if (oom && !s->killed_reason)
                s->killed_reason = "memory";
            pids_hit = pids != 0; /* (qemu's own threads on the host are not the program's) */
            if (g_peak > 0)       /* (0: the guest could not read it) */
                peak = g_peak < most ? g_peak : most;
        }
    }
    /* gvisor: the host pids cgroup is only a backstop for runsc's own threads; when it
     * bites, gVisor could not run the program faithfully (the Go runtime dies). */
    if (s->gvisor && s->has_cg && tc_cg_pids_hit(&s->cg) && !s->killed_reason)
        s->killed_reason = "pids";

    if (s->gv_error[0]) {
        char msg[sizeof(s->gv_error) + 32];
        snprintf(msg, sizeof(msg), "sandbox setup failed: %s", s->gv_error);
        lc_fail_teardown(L, s, msg);
        return;
    }
    if (s->setup_err) { /* from PID 1, or from the program child before its execve */
        char msg[256];
        snprintf(msg, sizeof(msg), "sandbox setup failed: %s: %s", s->setup_what,
                 strerror(s->setup_err));
        lc_fail_teardown(L, s, msg);
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
        lc_fail_teardown(L, s, msg);
        return;
    }
    /* RLIMIT_CPU is per process: show the limit hit (a microvm's cpu_ms is qemu's on the
     * host, its limit the host's bound on qemu: not the program's, which is in the guest) */
    if (s->killed_reason && strcmp(s->killed_reason, "cpu") == 0 &&
        cpu_ms < s->spec.limits.cpu_ms && !s->vm)
        cpu_ms = s->spec.limits.cpu_ms;

    if (s->cancel_requested && s->killed_reason && strcmp(s->killed_reason, "cancelled") == 0)
        status = "cancelled"; /* the server asked (POST /v1/executions/{id}/cancel) */
    else if (s->killed_reason)
        status = strcmp(s->killed_reason, "timeout") == 0 ? "timeout" : "killed";
    else if (json_is_integer(exit_code) && json_integer_value(exit_code) == 0)
        status = "completed";
    else
        status = "failed";

    viol = lc_violations_json(s);
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
                    s->gvisor ? tc_gv_enforced(&L->cg)
                    : s->vm   ? tc_vm_enforced(L->vm.accel)
                              : enforced_json(L),
                    "policy_violations", viol, "files", files ? files : json_array(),
                    "pids_limit_hit", pids_hit, "workspace_full", ws_full);
    if (res && !s->killed_reason)
        json_object_set_new(res, "killed_reason", json_null());
    if (res && files_incomplete)
        json_object_set_new(res, "files_incomplete", json_true());
    if (res && s->warm_used)
        json_object_set_new(res, "warm", json_true());
    /* Tear down before answering: once the caller has the result, nothing of the
     * sandbox is left (processes, mounts, fds); its empty cgroups go right after. */
    char id[sizeof(s->id)];
    memcpy(id, s->id, sizeof(id));
    uint64_t egress = s->egress_handle;
    lc_teardown(L, s);
    if (egress && res) /* the proxy reports this sandbox's connections first (FINAL) */
        tc_egress_link_park(L->egress, egress, id, res, lc_now_ms() + TC_EGRESS_FINAL_TIMEOUT_MS);
    else {
        if (res)
            json_object_set_new(res, "network", json_array());
        lc_send_result(L, id, res);
    }
    lc_retry_dead_cgs(L);
}

void lc_maybe_finish(struct launcher *L, struct sbx *s)
{
    if (s->used && s->exited && s->out.fd < 0 && s->err.fd < 0)
        finish(L, s);
}
