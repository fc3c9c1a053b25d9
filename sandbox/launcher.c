/* The launcher process: single-threaded epoll loop that owns every sandbox.
 * Lifecycle of one sandbox: workspace tmpfs + files -> shell (clone into new namespaces,
 * uid/gid maps, cgroups: child.c) -> limits + configuration -> go -> pump
 * stdin/stdout/stderr, answer seccomp notifications, enforce wall/cpu/memory/output ->
 * reap -> collect -> teardown (workspace) -> result -> cgroups removed. */
#include "sandbox/launcher_int.h"
#include <sodium.h>

int64_t lc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lc_watch(struct launcher *L, int fd, uint32_t events, unsigned slot, enum wkind k)
{
    struct epoll_event ev = {.events = events, .data.u64 = lc_wdata(slot, k)};
    return epoll_ctl(L->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

void lc_unwatch_close(struct launcher *L, int *fd)
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

void lc_send_result(struct launcher *L, const char *id, json_t *result)
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
    lc_quiet_begin(L, lc_now_ms());
    L->result_ms = lc_now_ms();
    size_t len = strlen(s);
    if (len > TC_WIRE_MAX_PAYLOAD) {
        /* stdout, stderr and collected files near their caps: an answer the wire cannot
         * carry would leave the caller waiting forever. */
        free(s);
        lc_send_result(L, id,
                       tc_result_error(id, "the result is too large to return "
                                           "(lower output_bytes or collect less)"));
        return;
    }
    (void)tc_wire_send(L->sock, TC_WIRE_RESULT, id, s, len);
    free(s);
    /* one call's launcher: its result is out, it goes now (its teardown and exit beside the
     * caller's use of the result, not after the caller has said so) */
    if (L->once)
        L->stopping = true;
}

void lc_send_error(struct launcher *L, const char *id, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lc_send_result(L, id, tc_result_error(id, msg));
}

void lc_deliver_result(void *userdata, const char *id, json_t *result)
{
    lc_send_result(userdata, id, result);
}

/* ---------------- I/O ---------------- */

static void send_stream_chunk(struct launcher *L, struct sbx *s, int k);

static void pump_output(struct launcher *L, struct sbx *s, struct stream *st)
{
    char buf[65536];
    /* a session's output is not kept: what is not sent yet, sent as soon as this is full */
    size_t cap = s->spec.session ? SESSION_OUT_BUF : (size_t)s->spec.limits.output_bytes;
    size_t taken = 0;

    for (;;) {
        /* a session's output is never dropped, so a flood is not ended by a kill: read a
         * bounded share per wakeup (the loop comes back; every other sandbox gets its turn) */
        if (s->spec.session && taken >= SESSION_OUT_BUF) {
            send_stream_chunk(L, s, st == &s->out ? 0 : 1);
            return;
        }
        ssize_t n = read(st->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            taken += (size_t)n;
        if (n < 0 && errno == EAGAIN) {
            /* a session's output goes out as soon as it is read: its server waits for the end
             * of a call in it (not paced like a one-shot's stream) */
            if (s->spec.session)
                send_stream_chunk(L, s, st == &s->out ? 0 : 1);
            return;
        }
        if (n <= 0) {
            lc_unwatch_close(L, &st->fd);
            lc_maybe_finish(L, s);
            return;
        }
        if (s->spec.session && st->len + (size_t)n > cap)
            send_stream_chunk(L, s, st == &s->out ? 0 : 1); /* never dropped: empties it */
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
            lc_kill_sbx(L, s, "output");
    }
}

void lc_pump_stdin(struct launcher *L, struct sbx *s)
{
    while (s->stdin_off < s->stdin_len) {
        ssize_t n = write(s->stdin_fd, s->stdin_data + s->stdin_off, s->stdin_len - s->stdin_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n < 0) {
            s->stdin_closing = true; /* EPIPE: the program does not read stdin */
            break;
        }
        s->stdin_off += (size_t)n;
    }
    if (s->spec.session && !s->stdin_closing) {
        /* all written: stays open, unwatched until more comes (session_input) */
        struct epoll_event ev = {.events = 0, .data.u64 = lc_wdata(s->slot, W_STDIN)};
        epoll_ctl(L->epfd, EPOLL_CTL_MOD, s->stdin_fd, &ev);
        free(s->stdin_data);
        s->stdin_data = NULL;
        s->stdin_len = s->stdin_off = 0;
        return;
    }
    lc_unwatch_close(L, &s->stdin_fd);
}

/* One TC_WIRE_CHUNK of s: tag ('1' stdout, '2' stderr, '3'..'5' news: sandbox.h), then data.
 * 0 or -errno. */
static int send_tagged(struct launcher *L, const struct sbx *s, char tag, const char *data,
                       size_t len)
{
    char *msg = malloc(len + 1);
    if (!msg)
        return -ENOMEM;
    msg[0] = tag;
    memcpy(msg + 1, data, len);
    int r = tc_wire_send(L->sock, TC_WIRE_CHUNK, s->id, msg, len + 1);
    free(msg);
    return r;
}

/* News as JSON (news: stolen, may be NULL), tagged. 0 or -errno. */
static int send_news(struct launcher *L, const struct sbx *s, char tag, json_t *news)
{
    char *text = news ? json_dumps(news, JSON_COMPACT) : NULL;
    json_decref(news);
    int r = text ? send_tagged(L, s, tag, text, strlen(text)) : -ENOMEM;
    free(text);
    return r;
}

/* A "session" sandbox's CPU budget news (TC_WIRE_BUDGET): '4', after the output of the call it
 * is about. */
static void budget_news(struct launcher *L, struct sbx *s, json_t *news)
{
    lc_flush_chunks(L, s);
    (void)send_news(L, s, '4', news);
}

/* "<ms> <call>": measured from the sandbox's cgroup from now on; without one it cannot be
 * (meter null: the server says it was not enforced). */
static void set_budget(struct launcher *L, struct sbx *s, const char *payload)
{
    char call[40];
    unsigned long long ms;
    uint64_t now;
    if (!payload || sscanf(payload, "%llu %39s", &ms, call) != 2)
        return;
    if (ms == 0) { /* the end of that call's, not of a newer one's */
        if (strcmp(call, s->budget_call) == 0)
            s->budget_ns = 0;
        return;
    }
    s->budget_ns = 0;
    const char *meter = NULL;
    if (ms > 0 && ms < UINT64_MAX / 1000000 && s->has_cg && tc_cg_cpu_ns(&s->cg, &now) == 0) {
        s->budget_ns = (uint64_t)ms * 1000000;
        s->budget_base_ns = now;
        snprintf(s->budget_call, sizeof(s->budget_call), "%s", call);
        meter = tc_cg_mech(&L->cg, TC_CG_CPU);
    }
    budget_news(L, s, json_pack("{s:s, s:s?}", "call", call, "meter", meter));
}

/* The call's budget is spent: ^C to its program (PID 1 forwards it, as TC_WIRE_INTERRUPT). */
static void check_budget(struct launcher *L, struct sbx *s)
{
    uint64_t cpu;
    if (!s->budget_ns || !s->has_cg || tc_cg_cpu_ns(&s->cg, &cpu) < 0 ||
        cpu < s->budget_base_ns + s->budget_ns)
        return;
    s->budget_ns = 0;
    if (s->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGINT, NULL, 0);
    budget_news(L, s,
                json_pack("{s:s, s:I}", "call", s->budget_call, "spent_ms",
                          (json_int_t)((cpu - s->budget_base_ns) / 1000000)));
}

/* TC_WIRE_INPUT: more stdin for a session (appended to what it has not read), or its end. */
static void session_input(struct launcher *L, struct sbx *s, const char *data, size_t len)
{
    if (!s->spec.session || s->stdin_fd < 0 || s->stdin_closing)
        return;
    if (len == 0) {
        s->stdin_closing = true;
    } else {
        size_t pending = s->stdin_len - s->stdin_off;
        if (pending + len > SESSION_IN_MAX) {
            lc_kill_sbx(L, s, "output"); /* never: the server sends one request at a time */
            return;
        }
        unsigned char *buf = malloc(pending + len);
        if (!buf) {
            lc_kill_sbx(L, s, "memory");
            return;
        }
        if (pending)
            memcpy(buf, s->stdin_data + s->stdin_off, pending);
        memcpy(buf + pending, data, len);
        free(s->stdin_data);
        s->stdin_data = buf;
        s->stdin_len = pending + len;
        s->stdin_off = 0;
    }
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = lc_wdata(s->slot, W_STDIN)};
    epoll_ctl(L->epfd, EPOLL_CTL_MOD, s->stdin_fd, &ev);
}

static void add_violation(struct sbx *s, const char *name)
{
    s->viol_news = s->spec.session; /* a session's calls are told as they go */
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
        /* a microvm's program is qemu: its probes that fail over are not the call's */
        if ((r == 0 || r == -ENOENT) && denied && !(s->vm && tc_vm_qemu_probe(name)))
            add_violation(s, name);
        if (r == 0 || r == -ENOENT || r == -EINTR)
            return;
        lc_unwatch_close(L, &s->notify_fd); /* unexpected error: do not spin on it */
        return;
    }
    if (events & (EPOLLHUP | EPOLLERR))
        lc_unwatch_close(L, &s->notify_fd);
}

void lc_read_ctl(struct launcher *L, struct sbx *s)
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
            lc_unwatch_close(L, &s->ctl_fd);
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
            lc_hold_ns(L, s); /* PID 1 has its own mount namespace by now */
            if (fd >= 0 && s->notify_fd < 0 && lc_watch(L, fd, EPOLLIN, s->slot, W_NOTIFY) == 0) {
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
            if (s->vm) { /* the verdict pipe's line (TC_INIT_F_VERDICT), as vmrun wrote it */
                m.what[sizeof(m.what) - 1] = '\0';
                snprintf(s->vm_verdict, sizeof(s->vm_verdict), "%s", m.what);
            }
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
    s->end_ms = lc_now_ms();
    lc_unwatch_close(L, &s->pidfd);
    if (s->gvisor && r > 0) {
        /* runsc run is the sandbox's "PID 1": its status is the program's */
        if (s->ctl_fd >= 0)
            lc_read_ctl(L, s);
        if (!s->setup_err &&
            tc_gv_status(s->gv_fd, st, &s->exit_status, s->gv_error, sizeof(s->gv_error)) == 0)
            s->have_exit = true;
    }
    /* PID 1 is gone, so is the whole namespace; make sure the cgroup is empty too. */
    if (s->has_cg)
        tc_cg_kill(&s->cg);
    if (s->ctl_fd >= 0)
        lc_read_ctl(L, s);
    lc_maybe_finish(L, s);
}

/* ---------------- main loop ---------------- */

static void on_verdict(struct launcher *L, const char *id, const char *payload);

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
            lc_start_sandbox(L, h.id, payload);
        else
            lc_send_error(L, h.id, "empty spec");
        break;
    case TC_WIRE_CANCEL:
        for (unsigned i = 0; i < L->max; i++) {
            struct sbx *s = &L->slots[i];
            if (!s->used || strcmp(s->id, h.id) != 0)
                continue;
            if (s->held) {
                lc_drop_held(L, s, "cancelled before the program started");
            } else {
                s->cancel_requested = !s->killed_reason;
                lc_kill_sbx(L, s, "cancelled");
            }
        }
        break;
    case TC_WIRE_GO:
        lc_go(L, h.id);
        break;
    case TC_WIRE_INPUT:
    case TC_WIRE_INTERRUPT:
        for (unsigned i = 0; i < L->max; i++) {
            struct sbx *s = &L->slots[i];
            if (!s->used || s->exited || !s->spec.session || strcmp(s->id, h.id) != 0)
                continue;
            if (h.type == TC_WIRE_INPUT)
                session_input(L, s, payload, (size_t)h.len);
            else if (!s->held && s->pidfd >= 0) /* PID 1 forwards it to the program's group */
                syscall(SYS_pidfd_send_signal, s->pidfd, SIGINT, NULL, 0);
        }
        break;
    case TC_WIRE_FILE:
        lc_file_op(L, h.id, payload, (size_t)h.len);
        break;
    case TC_WIRE_BUDGET:
        for (unsigned i = 0; i < L->max; i++) {
            struct sbx *s = &L->slots[i];
            if (s->used && !s->exited && s->spec.session && strcmp(s->id, h.id) == 0)
                set_budget(L, s, payload);
        }
        break;
    case TC_WIRE_VERDICT:
        on_verdict(L, h.id, payload);
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
    int64_t now = lc_now_ms();
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        uint64_t cpu;
        if (!s->used || s->exited)
            continue;
        /* killed and not dead yet (its PID 1's end comes on its pidfd): killed again every
         * KILL_AGAIN_MS, not at every turn of the loop (a timeout's teardown spun a core) */
        if (s->killed_reason) {
            if (now - s->kill_ms >= KILL_AGAIN_MS)
                lc_kill_sbx(L, s, s->killed_reason);
            continue;
        }
        if (s->warm_tmpl) { /* nothing of it runs yet: only its time is up, or not */
            if (L->stopping || now >= s->deadline_ms)
                lc_kill_sbx(L, s, "expired");
            continue;
        }
        if (s->held) {
            if (L->stopping)
                lc_drop_held(L, s, "cancelled before the program started");
            else if (now >= s->deadline_ms)
                lc_drop_held(L, s, "the server did not start the program in time");
            continue;
        }
        if (s->budget_ns)
            check_budget(L, s);
        if (L->stopping)
            lc_kill_sbx(L, s, "cancelled");
        else if (now >= s->deadline_ms)
            lc_kill_sbx(L, s, "timeout");
        else if (s->has_cg && tc_cg_cpu_ns(&s->cg, &cpu) == 0 &&
                 (cpu - s->cpu_base_ns) / 1000000 >= (uint64_t)s->spec.limits.cpu_ms)
            lc_kill_sbx(L, s, "cpu");
        else if (s->has_cg && tc_cg_oom_killed(&s->cg))
            lc_kill_sbx(L, s, "memory"); /* v1 kills one task; the contract kills the tree */
        else if (s->gvisor && s->has_cg && tc_cg_pids_hit(&s->cg))
            lc_kill_sbx(L, s, "pids"); /* runsc's backstop, see TC_GV_PIDS_HEADROOM */
    }
    tc_pool_tick(&L->pool, now);
    lc_warm_tick(L, now);
    if (L->n_dead_cgs)
        lc_retry_dead_cgs(L);
    lc_images_tick(L, now);
    tc_egress_link_tick(L->egress, now);
}

/* The egress proxy died (0: none runs until a sandbox needs it) or was started again
 * (egress_link.c, respawn): the server's host info says so, in a HELLO of the fields that
 * changed. */
static void tell_egress_pid(struct launcher *L)
{
    pid_t pid = tc_egress_link_pid(L->egress);
    if (pid == L->egress_told || pid < 0)
        return;
    char msg[48];
    int n = snprintf(msg, sizeof(msg), "{\"egress_pid\":%d}", (int)pid);
    if (tc_wire_send(L->sock, TC_WIRE_HELLO, NULL, msg, (size_t)n) == 0)
        L->egress_told = pid;
}

/* A sandbox is between go and its program's exec (at most SETUP_QUIET_MS, for hosts without
 * seccomp notification, whose NOTIFY_FD message marks the exec), or a call came less than
 * CALL_QUIET_MS ago and runs or waits for its go (held: the server records its start), or a
 * result went out less than RESULT_QUIET_MS ago (the server stores it and answers):
 * milliseconds left, else 0. Neither the pool nor the warm sandboxes are refilled meanwhile,
 * so that creating a shell (~1 ms of kernel work, and locks such as the network namespace's)
 * or starting an interpreter (~30 ms of CPU) does not slow a sandbox's start, nor a short call
 * (most end within CALL_QUIET_MS: its result goes out first, and the refill after it). A
 * longer call lets them go on, and so does a steady load: young calls and fresh results put
 * refills off for CALL_QUIET_MS at most since the first of them (with a call always young,
 * refills would never come, and every call would make its shell); calls back to back, less
 * than RESULT_QUIET_MS apart, are such a load until they pause. */
static int64_t quiet_wanted(const struct launcher *L, int64_t now, int64_t *ret_setup)
{
    int64_t w = 0, c = 0;
    for (unsigned i = 0; i < L->max; i++) {
        const struct sbx *s = &L->slots[i];
        if (!s->used || s->exited)
            continue;
        if (s->setup_until_ms - now > w)
            w = s->setup_until_ms - now;
        if (!s->warm_tmpl && s->start_ms + CALL_QUIET_MS - now > c)
            c = s->start_ms + CALL_QUIET_MS - now;
    }
    if (L->result_ms && L->result_ms + RESULT_QUIET_MS - now > c)
        c = L->result_ms + RESULT_QUIET_MS - now;
    if (ret_setup)
        *ret_setup = w;
    return c;
}

/* A call starts (or is let go) or a result goes out: when nothing wanted quiet until now, a
 * new spell of it begins here. (The spell's start was once set by setting_up() alone, which
 * runs only while a refill is due: a spell that ended while none was due was still taken for
 * the current one at the next call, whose quiet was then "over" at once, and a warm sandbox
 * was started beside the call that had just taken one: seen 1.2 ms after its go.) */
void lc_quiet_begin(struct launcher *L, int64_t now)
{
    if (quiet_wanted(L, now, NULL) == 0)
        L->quiet_from_ms = now;
}

static int64_t setting_up(struct launcher *L, int64_t now)
{
    int64_t w = 0, c = quiet_wanted(L, now, &w);
    if (c == 0)
        return w;
    if (!L->quiet_from_ms)
        L->quiet_from_ms = now;
    int64_t left = L->quiet_from_ms + CALL_QUIET_MS - now;
    if (left > 0 && (c < left ? c : left) > w)
        w = c < left ? c : left;
    return w;
}

static bool chunk_due(const struct sbx *s)
{
    return s->spec.stream && (s->out.len > s->out.sent || s->err.len > s->err.sent || s->viol_news);
}

/* A session's violations so far, before the output read after them (a call's end marker comes
 * after its violations: the program waits in the syscall until the launcher has counted it):
 * '5' and {"violations": [...]}, a TC_WIRE_CHUNK. */
static void send_violations(struct launcher *L, struct sbx *s)
{
    if (s->viol_news &&
        send_news(L, s, '5', json_pack("{s:o}", "violations", lc_violations_json(s))) == 0)
        s->viol_news = false;
}

/* Stream k's (0 stdout, 1 stderr) output not sent yet, as one TC_WIRE_CHUNK; a session's
 * buffer is emptied (its output is not kept for the result). */
static void send_stream_chunk(struct launcher *L, struct sbx *s, int k)
{
    struct stream *st = k ? &s->err : &s->out;
    size_t n = st->len - st->sent;
    send_violations(L, s); /* before the output read after them */
    if (n == 0)
        return;
    /* failing, next time; a one-shot's result carries it all anyway */
    if (send_tagged(L, s, (char)('1' + k), st->data + st->sent, n) == 0)
        st->sent = st->len;
    if (s->spec.session && st->sent == st->len)
        st->sent = st->len = 0;
}

void lc_flush_chunks(struct launcher *L, struct sbx *s)
{
    if (!s->spec.stream)
        return;
    send_stream_chunk(L, s, 0);
    send_stream_chunk(L, s, 1);
    s->chunk_ms = lc_now_ms();
}

/* The egress proxy's news of a "stream" sandbox's connection, after the output written before
 * it: one TC_WIRE_CHUNK, '3' then the attempt (sandbox.h). Other sandboxes' wait for FINAL. */
static void on_attempt(void *userdata, uint64_t handle, const char *json, size_t len)
{
    struct launcher *L = userdata;
    for (unsigned i = 0; handle && i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (!s->used || s->egress_handle != handle || !s->spec.stream)
            continue;
        lc_flush_chunks(L, s);
        (void)send_tagged(L, s, '3', json, len);
        return;
    }
}

/* The egress proxy holds a connection of a sandbox for a reviewer: the server is asked
 * (TC_WIRE_ASK); its TC_WIRE_VERDICT comes back through on_verdict(). */
static void on_ask(void *userdata, uint64_t handle, const char *json, size_t len)
{
    struct launcher *L = userdata;
    for (unsigned i = 0; handle && i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (s->used && s->egress_handle == handle) {
            (void)tc_wire_send(L->sock, TC_WIRE_ASK, s->id, json, len);
            return;
        }
    }
}

/* TC_WIRE_VERDICT: to the proxy, for the sandbox's handle; only a well-formed answer. */
static void on_verdict(struct launcher *L, const char *id, const char *payload)
{
    json_t *j = payload ? json_loads(payload, JSON_REJECT_DUPLICATES, NULL) : NULL;
    const char *v = json_string_value(json_object_get(j, "verdict"));
    bool ok = json_is_integer(json_object_get(j, "ask")) && v &&
              (strcmp(v, "allow_once") == 0 || strcmp(v, "allow_execution") == 0 ||
               strcmp(v, "deny") == 0);
    json_decref(j);
    for (unsigned i = 0; ok && i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (s->used && !s->exited && s->egress_handle && strcmp(s->id, id) == 0) {
            (void)tc_egress_link_verdict(L->egress, s->egress_handle, payload);
            return;
        }
    }
}

/* A "stream" sandbox's new output, at most every CHUNK_EVERY_MS (a program writing in a tight
 * loop makes one message per interval, not one per write); the first write after a quiet
 * spell goes out at once. The server redacts it (the result stays the authority). */
static void send_chunks(struct launcher *L, int64_t now)
{
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (!s->used || !chunk_due(s) || now - s->chunk_ms < CHUNK_EVERY_MS)
            continue;
        send_stream_chunk(L, s, 0);
        send_stream_chunk(L, s, 1);
        s->chunk_ms = now;
    }
}

static int next_timeout(struct launcher *L)
{
    int64_t now = lc_now_ms(), t = -1;
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (!s->used || s->exited)
            continue;
        int64_t d = s->killed_reason ? s->kill_ms + KILL_AGAIN_MS - now : s->deadline_ms - now;
        if (chunk_due(s) && s->chunk_ms + CHUNK_EVERY_MS - now < d)
            d = s->chunk_ms + CHUNK_EVERY_MS - now;
        if (d < 0)
            d = 0;
        if (d > TICK_MS && !s->warm_tmpl) /* a warm one waiting uses no CPU: no polling */
            d = TICK_MS;
        if (t < 0 || d < t)
            t = d;
    }
    if (L->n_dead_cgs && (t < 0 || t > 100)) /* (a warm sandbox waits for up to a minute) */
        t = 100;
    if (L->uid_note_ms && (t < 0 || t > L->uid_note_ms - now))
        t = L->uid_note_ms > now ? L->uid_note_ms - now : 0;
    if (tc_egress_link_parked(L->egress) && (t < 0 || t > TICK_MS))
        t = TICK_MS;
    int64_t it = lc_images_timeout(L, now);
    if (it >= 0 && (t < 0 || it < t))
        t = it;
    int64_t pt = L->stopping ? -1 : tc_pool_timeout(&L->pool, now);
    int64_t wt = L->stopping ? -1 : lc_warm_timeout(L, now);
    if (wt >= 0 && (pt < 0 || wt < pt))
        pt = wt;
    if (pt == 0)
        pt = setting_up(L, now);
    if (L->n_ns_pending && !L->stopping) { /* let go of when quiet (lc_release_pending) */
        int64_t q = setting_up(L, now);
        if (pt < 0 || q < pt)
            pt = q;
    }
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
        tc_egress_link_on_readable(L->egress);
        return;
    }
    if (k == W_SHELL) {
        tc_pool_event(&L->pool, slot);
        lc_retry_dead_cgs(L);
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
        /* a session's stdin unwatched (nothing to write) reports only its reader gone */
        if (s->spec.session && s->stdin_off >= s->stdin_len &&
            (ev->events & (EPOLLERR | EPOLLHUP))) {
            s->stdin_closing = true;
            lc_unwatch_close(L, &s->stdin_fd);
            break;
        }
        lc_pump_stdin(L, s);
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
            lc_read_ctl(L, s);
        break;
    case W_NOTIFY:
        if (s->notify_fd >= 0)
            handle_notify(L, s, ev->events);
        break;
    case W_OOM: /* the kernel kills one task for the memory limit: we kill the rest now */
        if (s->oom_fd >= 0) {
            uint64_t n;
            (void)!read(s->oom_fd, &n, sizeof(n));
            if (!s->exited)
                lc_kill_sbx(L, s, "memory");
        }
        break;
    default:
        break;
    }
}

static uint64_t shell_wdata(unsigned idx)
{
    return lc_wdata(idx, W_SHELL);
}

static json_t *host_info(struct launcher *L)
{
    struct utsname u;
    char backends[32];
    snprintf(backends, sizeof(backends), "native%s%s", L->gv.available ? ",gvisor" : "",
             L->vm.available ? ",microvm" : "");
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
        "{s:s, s:o, s:o, s:b, s:b, s:s, s:i, s:i, s:s, s:b, s:s?, s:i, s:i, s:i, s:i, s:i}",
        "cgroup",
        L->cg.mode == TC_CG_V2   ? "v2"
        : L->cg.mode == TC_CG_V1 ? "v1"
                                 : "none",
        "controllers", ctl, "cgroup_parents", parents, "seccomp_notify", L->sc.notify, "memsw",
        L->cg.memsw, "kernel", u.release, "launcher_pid", (int)getpid(), "max_sandboxes",
        (int)L->max_calls, "backends", backends, "userns", 1, "note",
        L->cg.note[0] ? L->cg.note : NULL, "egress_pid", (int)tc_egress_link_pid(L->egress), "pool",
        (int)L->pool.min, "pool_max", (int)L->pool.max, "warm_max", (int)L->warm_max,
        "warm_group_max", (int)L->warm_group_max);
    if (hi && L->warm_max) { /* in the launcher's mount namespace: /proc/<launcher_pid>/root */
        char wl[PATH_MAX];
        snprintf(wl, sizeof(wl), "%s/warm", L->scratch);
        json_object_set_new(hi, "warm_list", json_string(wl));
    }
    if (hi)
        json_object_set_new(hi, "microvm", tc_vm_report(&L->vm));
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
    unsigned long pool, pool_max, pool_shrink_ms, warm, warm_group_max;
    char uid_registry[PATH_MAX - 200];
    char gvisor_platform[16];
    char init_path[PATH_MAX];
    char egress_ca[PATH_MAX];
    bool no_cgroup, no_seccomp_notify, no_egress, microvm_fast;
    bool once; /* one call (toolcage exec): its shell is made ahead, in setup */
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
    L->uid_note_ms = lc_now_ms() + UID_NOTE_MS; /* (off the first call's path) */
    if (setgroups(0, NULL) < 0)
        return -errno;
    /* Private mount namespace: everything we mount is invisible to the host and
     * disappears with us. */
    if (unshare(CLONE_NEWNS) < 0)
        return -errno;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -errno;
    struct stat mst;
    if (stat("/proc/self/ns/mnt", &mst) == 0)
        L->own_mnt_ino = mst.st_ino;
    snprintf(L->scratch, sizeof(L->scratch), "%s/run", state_dir);
    if ((r = mkdir_p(L->scratch, 0700)) < 0)
        return r;
    if (mount("tcscratch", L->scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0711,size=4m") < 0)
        return -errno;
    snprintf(L->newroot, sizeof(L->newroot), "%s/newroot", L->scratch);
    snprintf(L->wsdir, sizeof(L->wsdir), "%s/ws", L->scratch);
    snprintf(L->gvdir, sizeof(L->gvdir), "%s/gv", L->scratch);
    snprintf(L->imgdir, sizeof(L->imgdir), "%s/img", L->scratch);
    snprintf(L->state_dir, sizeof(L->state_dir), "%s", state_dir);
    if (mkdir(L->newroot, 0755) < 0 || mkdir(L->wsdir, 0711) < 0 || mkdir(L->gvdir, 0700) < 0 ||
        mkdir(L->imgdir, 0711) < 0)
        return -errno;
    /* A shared mount point: each workspace mounted in it also appears in the mount namespace
     * of every shell waiting in the pool (as a slave), which was copied before. */
    if (mount(L->wsdir, L->wsdir, NULL, MS_BIND, NULL) < 0 ||
        mount(NULL, L->wsdir, NULL, MS_SHARED, NULL) < 0)
        return -errno;
    /* the same for tool image roots, bound on first use (launcher_start.c) */
    if (mount(L->imgdir, L->imgdir, NULL, MS_BIND, NULL) < 0 ||
        mount(NULL, L->imgdir, NULL, MS_SHARED, NULL) < 0)
        return -errno;
    tc_gv_detect(&L->gv, set->gvisor_platform);
    char vm_cache[PATH_MAX];
    snprintf(vm_cache, sizeof(vm_cache), "%s/vm", state_dir);
    tc_vm_setup(&L->vm, L->scratch, vm_cache, set->microvm_fast);

    L->init_fd = tc_child_open_init(set->init_path[0] ? set->init_path : NULL, L->init_path,
                                    sizeof(L->init_path));
    if (L->init_fd < 0) {
        const char *why = L->init_fd == -EPERM
                              ? "not trusted: it or its folder is writable by others than root"
                              : strerror(-L->init_fd);
        int n = snprintf(L->setup_error, sizeof(L->setup_error), "cannot open %s: ", L->init_path);
        if (n >= 0 && (size_t)n < sizeof(L->setup_error))
            snprintf(L->setup_error + n, sizeof(L->setup_error) - (size_t)n, "%s", why);
        return L->init_fd;
    }
    tc_cg_host_init(&L->cg, set->no_cgroup);
    tc_rootfs_detect(&L->rootfs);
    L->base_fd = tc_child_base_config(&L->rootfs, "newroot");
    if (L->base_fd < 0)
        return L->base_fd;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    L->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L->sigfd < 0 || L->epfd < 0)
        return -errno;
    if ((r = lc_watch(L, L->sock, EPOLLIN, 0, W_CLIENT)) < 0 ||
        (r = lc_watch(L, L->sigfd, EPOLLIN, 0, W_SIGNAL)) < 0)
        return r;
    /* Shells kept ready (docs/sandbox.md, Start-up cost): TOOLCAGE_POOL, default 2, grown
     * by bursts up to TOOLCAGE_POOL_MAX. */
    unsigned long pool = set->pool, pool_max = set->pool_max;
    if (pool > MAX_SLOTS - L->max)
        pool = MAX_SLOTS - L->max;
    if (pool_max > MAX_SLOTS - L->max)
        pool_max = MAX_SLOTS - L->max;
    struct tc_shell_env env = {.cg = &L->cg,
                               .scratch = L->scratch,
                               .base_fd = L->base_fd,
                               .init_fd = L->init_fd,
                               .cap_last_cap = L->rootfs.cap_last_cap};
    r = tc_pool_init(&L->pool, &env, L->uid_base, MAX_SLOTS, (unsigned)pool, (unsigned)pool_max,
                     (int64_t)set->pool_shrink_ms, L->epfd, shell_wdata);
    if (r < 0)
        return r;
    L->once = set->once;
    /* One call's launcher (toolcage exec): its shell now, before the filter is built and the
     * spec read, so that the shell's own start (its fds, its cgroups, toolcage-init's exec
     * and base mounts) goes on beside them rather than after. */
    if (set->once)
        tc_pool_once(&L->pool, lc_now_ms());
    /* (the filter goes into each sandbox's configuration, at its start: none is made yet) */
    return tc_seccomp_build(!set->no_seccomp_notify, &L->sc);
}

static void cleanup(struct launcher *L)
{
    for (unsigned i = 0; i < L->max; i++)
        if (L->slots[i].used) {
            lc_kill_sbx(L, &L->slots[i], "cancelled");
            lc_teardown(L, &L->slots[i]);
        }
    tc_pool_fini(&L->pool);
    lc_warm_fini(L);
    for (int i = 0; i < 100 && L->n_dead_cgs; i++) {
        lc_retry_dead_cgs(L);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    tc_cg_host_fini(&L->cg);
    /* (the scratch tmpfs and the microvm folder are not unmounted: they are in our private
     * mount namespace, which goes, with them, when we exit (we always do after this; the
     * egress proxy, the only other process in it, is reaped below): one RCU grace period
     * for the whole namespace instead of one more per umount2, ~0.1 ms each here) */
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
                           .pool_max = 2,
                           .warm_group_max = 4,
                           .uid_registry = TC_UID_REGISTRY,
                           .gvisor_platform = "ptrace"};
    unsigned long fd = 3, max = 64, ppid = 0, flag, egress_ppid = 0;
    int r;

    /* libsodium picks its implementations and opens its randomness source here, before the
     * egress proxy (a fork of ours) locks itself down: used first behind its seccomp filter,
     * it aborts. toolcage's main() does it too; toolcage-launcher and the tests do not. */
    if (sodium_init() < 0) {
        fprintf(stderr, "toolcage launcher: libsodium failed to initialise\n");
        return 1;
    }
    memset(&L, 0, sizeof(L));
    L.sock = L.epfd = L.sigfd = L.init_fd = L.base_fd = L.uid_fd = L.release_fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "launcher") == 0)
            continue;
        if (!v) {
            fprintf(stderr, "toolcage launcher: missing value for %s\n", a);
            return 2;
        }
        bool ok =
            (strcmp(a, "--fd") == 0 && parse_uint(v, INT_MAX, &fd) == 0) ||
            (strcmp(a, "--max") == 0 && parse_uint(v, MAX_SLOTS, &max) == 0 && max > 0) ||
            (strcmp(a, "--ppid") == 0 && parse_uint(v, INT_MAX, &ppid) == 0) ||
            (strcmp(a, "--egress-proxy") == 0 && parse_uint(v, INT_MAX, &egress_ppid) == 0 &&
             egress_ppid > 0) ||
            (strcmp(a, "--pool") == 0 && parse_uint(v, TC_POOL_MAX, &set.pool) == 0) ||
            (strcmp(a, "--pool-max") == 0 && parse_uint(v, TC_POOL_MAX, &set.pool_max) == 0) ||
            (strcmp(a, "--pool-shrink-ms") == 0 &&
             parse_uint(v, 86400000, &set.pool_shrink_ms) == 0) ||
            (strcmp(a, "--warm") == 0 && parse_uint(v, TC_POOL_MAX, &set.warm) == 0) ||
            (strcmp(a, "--warm-group-max") == 0 &&
             parse_uint(v, TC_POOL_MAX, &set.warm_group_max) == 0 && set.warm_group_max > 0) ||
            (strcmp(a, "--state-dir") == 0 && v[0] == '/' &&
             copy_arg(set.state_dir, sizeof(set.state_dir), v)) ||
            (strcmp(a, "--uid-registry") == 0 && v[0] == '/' &&
             copy_arg(set.uid_registry, sizeof(set.uid_registry), v)) ||
            (strcmp(a, "--init") == 0 && v[0] == '/' &&
             copy_arg(set.init_path, sizeof(set.init_path), v)) ||
            (strcmp(a, "--egress-ca") == 0 && v[0] == '/' &&
             copy_arg(set.egress_ca, sizeof(set.egress_ca), v)) ||
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
        if (!ok && strcmp(a, "--no-egress") == 0 && parse_uint(v, 1, &flag) == 0) {
            set.no_egress = flag;
            ok = true;
        }
        if (!ok && strcmp(a, "--microvm-fast") == 0 && parse_uint(v, 1, &flag) == 0) {
            set.microvm_fast = flag;
            ok = true;
        }
        if (!ok && strcmp(a, "--once") == 0 && parse_uint(v, 1, &flag) == 0) {
            set.once = flag;
            ok = true;
        }
        if (!ok) {
            fprintf(stderr, "toolcage launcher: bad argument %s\n", a);
            return 2;
        }
        i++;
    }
    /* A launcher's egress proxy started again (sandbox/egress_link.c): its control socket
     * is fd 3; it is nothing else. */
    if (egress_ppid)
        return tc_egress_available()
                   ? tc_egress_run(3, (pid_t)egress_ppid, set.egress_ca[0] ? set.egress_ca : NULL)
                   : 127;
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
    /* warm sandboxes have slots of their own: they never keep a call out */
    L.max_calls = (unsigned)max;
    L.warm_max = set.warm < MAX_SLOTS - max ? (unsigned)set.warm : (unsigned)(MAX_SLOTS - max);
    L.warm_group_max = set.warm_group_max < L.warm_max ? (unsigned)set.warm_group_max : L.warm_max;
    L.max = L.max_calls + L.warm_max;
    L.slots = calloc(L.max, sizeof(*L.slots));
    if (!L.slots)
        return 1;
    for (unsigned i = 0; i < L.max; i++) {
        struct sbx *s = &L.slots[i];
        s->slot = i;
        s->pidfd = s->stdin_fd = s->out.fd = s->err.fd = s->ctl_fd = s->notify_fd = s->oom_fd =
            s->ws_fd = s->sync_fd = s->gv_fd = s->cfg_fd = s->ns_fd[0] = s->ns_fd[1] = s->ns_fd[2] =
                -1;
    }
    r = setup(&L, &set);
    if (r < 0) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof(msg), "launcher setup failed: %s",
                 L.setup_error[0] ? L.setup_error : strerror(-r));
        /* the server's stderr; a one-run launcher's (toolcage exec) goes in its HELLO only:
         * the CLI says it once, and not for the spare it turned away (a tool with network) */
        if (!set.once)
            fprintf(stderr, "toolcage launcher: %s\n", msg);
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
    struct tc_egress_handlers eh = {
        .deliver = lc_deliver_result, .attempt = on_attempt, .ask = on_ask, .userdata = &L};
    if (set.no_egress ||
        tc_egress_link_new(L.epfd, lc_wdata(0, W_EGRESS), set.egress_ca[0] ? set.egress_ca : NULL,
                           &eh, &L.egress) < 0)
        L.egress = NULL;
    /* The thread that lets go of the sandboxes' namespaces (launcher_result.c): after the
     * proxy's fork, which runs our code without an exec (a respawn execs). Without it, they
     * are closed inline. */
    (void)lc_release_start(&L);
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
        L.egress_told = tc_egress_link_pid(L.egress);
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
        tell_egress_pid(&L);
        int64_t now = lc_now_ms();
        if (L.uid_note_ms && now >= L.uid_note_ms) {
            tc_uidrange_note(L.uid_fd);
            L.uid_note_ms = 0;
        }
        send_chunks(&L, now);
        lc_warm_publish(&L);
        if (n == 0 && !L.stopping && !setting_up(&L, now)) {
            lc_release_pending(&L);
            if (tc_pool_wants_refill(&L.pool, now))
                tc_pool_refill(&L.pool, now); /* idle: one more shell ahead of time */
            else if (!tc_pool_joining(&L.pool))
                lc_warm_refill(&L, now); /* or one more warm sandbox, from a ready shell */
        }
        tick(&L);
        lc_warm_publish(&L);
    }
    cleanup(&L);
    return 0;
}
