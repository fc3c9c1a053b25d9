/* The launcher: starting a sandbox (native shells from the pool, or gVisor), hold and go
 * (sandbox/launcher_int.h). */
#include "sandbox/launcher_int.h"

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
    lc_fail_teardown(L, s, msg);
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

/* v1: the memory limit's OOM event into the loop (the kernel kills one task; the rest of the
 * tree is killed when it is read, not at the next tick: TICK_MS later, by when the program may
 * have seen its children die and gone on). Without it the tick's tc_cg_oom_killed remains. */
static void watch_oom(struct launcher *L, struct sbx *s)
{
    int fd = s->has_cg && s->oom_fd < 0 ? tc_cg_oom_eventfd(&s->cg) : -1;
    if (fd >= 0 && lc_watch(L, fd, EPOLLIN, s->slot, W_OOM) == 0)
        s->oom_fd = fd;
    else if (fd >= 0)
        close(fd);
}

/* Limits, configuration, egress listener, then let the shell go. */
/* PID 1's pidfd, stdout, stderr, control socket and (if there is input, or will be: a session)
 * stdin into the loop, non-blocking; without input, stdin is closed at once. 0 or -errno. */
static int watch_streams(struct launcher *L, struct sbx *s)
{
    int r;
    fcntl(s->stdin_fd, F_SETFL, O_NONBLOCK);
    fcntl(s->out.fd, F_SETFL, O_NONBLOCK);
    fcntl(s->err.fd, F_SETFL, O_NONBLOCK);
    fcntl(s->ctl_fd, F_SETFL, O_NONBLOCK);
    if ((r = lc_watch(L, s->pidfd, EPOLLIN, s->slot, W_PIDFD)) < 0 ||
        (r = lc_watch(L, s->out.fd, EPOLLIN, s->slot, W_STDOUT)) < 0 ||
        (r = lc_watch(L, s->err.fd, EPOLLIN, s->slot, W_STDERR)) < 0 ||
        (r = lc_watch(L, s->ctl_fd, EPOLLIN, s->slot, W_CTL)) < 0)
        return r;
    /* a session's stays open (launcher.c), a warm one's until its call (launcher_warm.c) */
    if (s->stdin_len > 0 || s->spec.session || s->warm_tmpl)
        return lc_watch(L, s->stdin_fd, s->stdin_len > 0 ? EPOLLOUT : 0, s->slot, W_STDIN);
    close(s->stdin_fd);
    s->stdin_fd = -1;
    return 0;
}

static void image_evict(struct launcher *L, unsigned i)
{
    char dst[PATH_MAX];
    if (snprintf(dst, sizeof(dst), "%s/%.64s", L->imgdir, L->images[i].root) < (int)sizeof(dst)) {
        umount2(dst, MNT_DETACH);
        rmdir(dst);
    }
    close(L->images[i].fd); /* and the flock goes: gc may take the root now */
    L->images[i].root[0] = '\0';
    L->images[i].fd = -1;
}

/* A tool image's root, bound read-only at scratch/img/<root> on its first use (every shell
 * of the pool sees it there: the directory is shared); rel gets "img/<root>", *ret_ref
 * 1 + its slot (the sandbox holds it until its teardown: lc_image_release). A bound root
 * is flock'ed (shared) against `toolcage images gc` until no sandbox has used it for a
 * while (lc_images_tick) or its slot is needed. */
static int image_root(struct launcher *L, const char *root, char *rel, size_t rellen,
                      unsigned *ret_ref)
{
    char src[PATH_MAX], dst[PATH_MAX], self[64];
    unsigned i, slot = MAX_IMAGES;
    struct stat a, b;
    int r;

    snprintf(rel, rellen, "img/%s", root);
    for (i = 0; i < L->n_images; i++)
        if (strcmp(L->images[i].root, root) == 0) {
            L->images[i].users++;
            *ret_ref = i + 1;
            return 0;
        }
    for (i = 0; i < L->n_images && slot == MAX_IMAGES; i++) /* a free slot */
        if (!L->images[i].root[0])
            slot = i;
    if (slot == MAX_IMAGES && L->n_images < MAX_IMAGES)
        slot = L->n_images;
    for (i = 0; i < L->n_images && slot == MAX_IMAGES; i++) /* an unused one */
        if (L->images[i].users == 0) {
            image_evict(L, i);
            slot = i;
        }
    if (slot == MAX_IMAGES)
        return -EMFILE;
    if (snprintf(src, sizeof(src), "%s/images/roots/%s", L->state_dir, root) >= (int)sizeof(src))
        return -ENAMETOOLONG;
    if (snprintf(dst, sizeof(dst), "%s/%.64s", L->imgdir, root) >= (int)sizeof(dst))
        return -ENAMETOOLONG;
    int fd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* gc holds it (it is going away), or took it away between our open and our lock (the fd
     * is no longer roots/<root>): the root is not there */
    if (flock(fd, LOCK_SH | LOCK_NB) < 0 || fstat(fd, &a) < 0 || stat(src, &b) < 0 ||
        a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(fd);
        return -ENOENT;
    }
    /* bound from the fd we checked, not from the path */
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if ((mkdir(dst, 0755) < 0 && errno != EEXIST) || mount(self, dst, NULL, MS_BIND, NULL) < 0 ||
        mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
        r = -errno;
        umount2(dst, MNT_DETACH);
        rmdir(dst);
        close(fd);
        return r;
    }
    snprintf(L->images[slot].root, sizeof(L->images[0].root), "%s", root);
    L->images[slot].fd = fd;
    L->images[slot].users = 1;
    if (slot == L->n_images)
        L->n_images++;
    *ret_ref = slot + 1;
    return 0;
}

void lc_image_release(struct launcher *L, struct sbx *s)
{
    if (s->image_ref == 0 || s->image_ref > L->n_images)
        return;
    if (L->images[s->image_ref - 1].users > 0)
        L->images[s->image_ref - 1].users--;
    L->images[s->image_ref - 1].last_ms = lc_now_ms();
    s->image_ref = 0;
}

void lc_images_tick(struct launcher *L, int64_t now)
{
    for (unsigned i = 0; i < L->n_images; i++)
        if (L->images[i].root[0] && L->images[i].users == 0 &&
            now - L->images[i].last_ms > IMAGE_IDLE_MS)
            image_evict(L, i);
}

int64_t lc_images_timeout(const struct launcher *L, int64_t now)
{
    int64_t t = -1;
    for (unsigned i = 0; i < L->n_images; i++) {
        if (!L->images[i].root[0] || L->images[i].users > 0)
            continue;
        int64_t d = L->images[i].last_ms + IMAGE_IDLE_MS + 1 - now;
        if (d < 0)
            d = 0;
        if (t < 0 || d < t)
            t = d;
    }
    return t;
}

/* Everything before PID 1 is released: its configuration, the limits, the egress listener. */
static int prepare(struct launcher *L, struct sbx *s)
{
    char image[80];
    int r;

    if (s->spec.image_root &&
        (r = image_root(L, s->spec.image_root, image, sizeof(image), &s->image_ref)) < 0)
        return r;
    /* PID 1 exec's toolcage-init and reads everything it needs from this memfd. */
    s->cfg_fd = tc_child_config(
        &s->spec, &L->sc, s->ws_path + strlen(L->scratch) + 1 /* "ws/<id>" */,
        s->spec.image_root ? image : NULL,
        (L->cg.has[TC_CG_MEMORY] ? 0 : TC_INIT_F_RLIMIT_AS) |
            (L->cg.has[TC_CG_PIDS] ? 0 : TC_INIT_F_RLIMIT_NPROC) | (s->vm ? TC_INIT_F_VERDICT : 0));
    if (s->cfg_fd < 0) {
        r = s->cfg_fd;
        s->cfg_fd = -1;
        return r;
    }
    if (s->has_cg && (r = tc_cg_set_limits(&s->cg, &s->spec.limits)) < 0)
        return r;
    watch_oom(L, s);
    /* Network allowlist: the proxy's listener goes into the sandbox's network namespace
     * before PID 1 is released (and brings lo up). */
    if (s->spec.network_allow) {
        r = tc_egress_link_attach(L->egress, s->pid, s->spec.network_allow, s->spec.network_ask_ms,
                                  s->spec.network_ask_private, s->egress_tls, &s->egress_handle);
        json_decref(s->egress_tls); /* the CA key lives in the proxy only from here */
        s->egress_tls = NULL;
        if (r < 0)
            return r;
    }
    return 0;
}

static void restart(struct launcher *L, struct sbx *s);

/* release() gave the call to a new shell: s is that start's (set up, or failed and reported) */
#define RESTARTED 1

/* Let the shell go: from here on the program may run. 0, RESTARTED or -errno. */
static int release(struct launcher *L, struct sbx *s)
{
    int r = tc_shell_go(s->sync_fd, s->cfg_fd);
    close(s->sync_fd);
    s->sync_fd = -1;
    close(s->cfg_fd);
    s->cfg_fd = -1;
    if (r == -EPIPE || r == -ECONNRESET) {
        /* The shell closed its end before go reached it: it died (killed while it waited
         * in the pool or held, or its cgroup join failed) and never read go, so nothing of
         * the program ran. The call starts over in another shell, once; credentials at
         * egress are the proxy's now and cannot be given twice, so such a call, and a
         * second death, end as before (PID 1's report, if any, is on ctl_fd); a warm
         * sandbox (no call yet) just ends. */
        if (s->shell_tries == 0 && !s->tls_moved && !s->gvisor && !s->warm_tmpl) {
            restart(L, s);
            return RESTARTED;
        }
        r = 0;
    } else if (r < 0)
        return r;
    s->setup_until_ms = lc_now_ms() + SETUP_QUIET_MS;
    return watch_streams(L, s);
}

/* A "hold" spec: everything is set up; tell the server and wait for TC_WIRE_GO (or CANCEL).
 * The server records that the program starts before it says go, so that a crash at any
 * point leaves a record that tells whether the program can have run. The wall-time limit
 * counts from go; HOLD_MAX_MS bounds the wait. */
static void hold(struct launcher *L, struct sbx *s)
{
    s->held = true;
    s->deadline_ms = lc_now_ms() + HOLD_MAX_MS;
    lc_hold_ns(L, s);
    (void)tc_wire_send(L->sock, TC_WIRE_READY, s->id, NULL, 0);
}

/* gvisor: runsc in the sandbox's cgroup, with the stdio pipes; its pidfd stands for PID 1. */
static int spawn_gvisor(struct launcher *L, struct sbx *s)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1};
    struct tc_gv_child c = {.cg_join = {-1, -1, -1}};
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
    if (s->has_cg && !into_cg && (r = tc_cg_open_join(&s->cg, c.cg_join)) < 0)
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
        if ((r = tc_cg_open_join(&s->cg, c.cg_join)) < 0)
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
    L->warm_dirty |= s->warm_tmpl != 0; /* a warm one's pid is known now (scratch/warm) */
    s->stdin_fd = in[1];
    s->out.fd = out[0];
    s->err.fd = err[0];
    s->ctl_fd = ctl[0];
    in[1] = out[0] = err[0] = ctl[0] = -1;
    r = watch_streams(L, s);
out:
    for (int i = 0; i < 3; i++)
        if (c.cg_join[i] >= 0)
            close(c.cg_join[i]);
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
    char image[80] = "", path[PATH_MAX + 96];
    if (s->spec.image_root &&
        (r = image_root(L, s->spec.image_root, image, sizeof(image), &s->image_ref)) < 0) {
        snprintf(err, errlen, "image root: %s", strerror(-r));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s", L->scratch, image);
    return tc_gv_write_bundle(s->gv_fd, s->gv_path, &s->spec, &L->rootfs,
                              s->spec.image_root ? path : NULL, s->ws_path, s->uid,
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
        watch_oom(L, s);
    }
    return 0;
}

void lc_start_sandbox(struct launcher *L, const char *hdr_id, char *payload)
{
    json_error_t jerr;
    json_t *spec = json_loads(payload, JSON_REJECT_DUPLICATES, &jerr);
    struct tc_spec parsed;
    char err[256] = "";
    struct sbx *s = NULL;
    int r;

    if (!spec) {
        lc_send_error(L, hdr_id, "spec: invalid JSON");
        return;
    }
    r = tc_spec_parse(spec, &parsed, err, sizeof(err));
    if (r < 0) {
        lc_send_error(L, hdr_id, "invalid spec: %s", err);
        json_decref(spec);
        return;
    }
    if (strcmp(parsed.backend, "microvm") == 0) {
        /* from here on a native sandbox that runs the guest (microvm.h) */
        json_t *native = tc_vm_rewrite(&L->vm, spec, err, sizeof(err));
        tc_spec_release(&parsed);
        json_decref(spec);
        if (!native) {
            lc_send_error(L, hdr_id, "%s", err);
            return;
        }
        spec = native;
        if ((r = tc_spec_parse(spec, &parsed, err, sizeof(err))) < 0) {
            lc_send_error(L, hdr_id, "invalid spec: %s", err);
            json_decref(spec);
            return;
        }
    }
    bool gvisor = strcmp(parsed.backend, "gvisor") == 0;
    if (strcmp(parsed.id, hdr_id) != 0) {
        lc_send_error(L, hdr_id, "spec id does not match the message");
        goto fail_parsed;
    }
    if (gvisor && !L->gv.available) {
        lc_send_error(L, hdr_id, "backend gvisor: runsc not found on this host");
        goto fail_parsed;
    }
    if (gvisor && parsed.network_allow) {
        /* runsc runs with --network=none; the egress proxy lives in a host netns */
        lc_send_error(L, hdr_id, "backend gvisor: network allowlists are not supported");
        goto fail_parsed;
    }
    for (unsigned i = 0; i < L->max; i++)
        if (L->slots[i].used && strcmp(L->slots[i].id, parsed.id) == 0) {
            lc_send_error(L, hdr_id, "a sandbox with this id is running");
            goto fail_parsed;
        }
    s = L->stopping ? NULL : lc_call_slot(L);
    if (!s) {
        lc_send_error(L, hdr_id, "too many sandboxes");
        goto fail_parsed;
    }
    if (parsed.warm && lc_warm_take(L, spec, &parsed))
        return; /* a warm sandbox has it (and spec, parsed) */
    lc_start_in_slot(L, s, spec, &parsed, 0);
    return;
fail_parsed:
    tc_spec_release(&parsed);
    json_decref(spec);
}

struct sbx *lc_call_slot(struct launcher *L)
{
    if (L->running - L->n_warm >= L->max_calls)
        return NULL;
    for (unsigned i = 0; i < L->max; i++)
        if (!L->slots[i].used)
            return &L->slots[i];
    return NULL;
}

void lc_start_in_slot(struct launcher *L, struct sbx *s, json_t *spec, struct tc_spec *parsed,
                      unsigned warm_tmpl)
{
    char err[256] = "";
    int r;

    L->running++;
    s->used = true;
    s->spec_json = spec;
    s->spec = *parsed;
    snprintf(s->id, sizeof(s->id), "%s", parsed->id);
    s->gvisor = strcmp(parsed->backend, "gvisor") == 0;
    s->vm = strcmp(parsed->backend, "microvm") == 0;
    if (!warm_tmpl)
        lc_quiet_begin(L, lc_now_ms());
    s->start_ms = lc_now_ms();
    s->deadline_ms = s->start_ms + s->spec.limits.wall_ms;
    if (warm_tmpl) { /* waits for a call that wants it, not longer */
        s->warm_tmpl = warm_tmpl;
        s->warm_gen = L->warm[warm_tmpl - 1].gen;
        L->n_warm++;
        s->deadline_ms = s->start_ms + WARM_IDLE_MS;
    }
    if (s->spec.network_allow && tc_egress_spec_env(&s->spec) < 0) {
        start_fail(L, s, "out of memory");
        return;
    }
    if ((r = tc_egress_spec_tls(&s->spec, s->spec_json, &s->egress_tls)) < 0) {
        start_fail(L, s, "credentials at egress: %s",
                   r == -EEXIST ? "secret file name " TC_TLS_CA_BUNDLE_NAME " is reserved"
                                : strerror(-r));
        return;
    }
    if (s->egress_tls) { /* the credentials live in egress_tls (then the proxy) only */
        s->tls_moved = true;
        s->spec.inject = NULL;
        json_object_del(s->spec_json, "inject");
    }

    if (s->spec.stdin_b64 && tc_b64_decode(s->spec.stdin_b64, strlen(s->spec.stdin_b64),
                                           &s->stdin_data, &s->stdin_len) < 0) {
        start_fail(L, s, "stdin_b64: invalid base64");
        return;
    }
    /* gate: 'g' first, then the call's stdin; a warm sandbox gets them with its call */
    if (s->spec.gate && !warm_tmpl) {
        unsigned char *in = malloc(s->stdin_len + 1);
        if (!in) {
            start_fail(L, s, "out of memory");
            return;
        }
        in[0] = 'g';
        if (s->stdin_len)
            memcpy(in + 1, s->stdin_data, s->stdin_len);
        free(s->stdin_data);
        s->stdin_data = in;
        s->stdin_len++;
    }
    /* The shell brings the sandbox's host uid; a gvisor sandbox takes one of its own. */
    if (s->gvisor) {
        if ((r = tc_pool_alloc_uid(&L->pool, &s->uid)) < 0) {
            start_fail(L, s, "spawn: %s", strerror(-r));
            return;
        }
    } else {
        struct tc_shell sh;
        /* a warm start that finds no shell ready is no call paying for one: not a miss */
        if ((r = tc_pool_take(&L->pool, s->start_ms, !warm_tmpl, &sh)) < 0) {
            start_fail(L, s, "spawn: %s", strerror(-r));
            return;
        }
        adopt(s, &sh);
        L->warm_dirty |= warm_tmpl != 0; /* its pid, uid and groups are known now */
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
        (r = lc_write_files(s, s->spec.files, s->spec.files, err, sizeof(err))) < 0) {
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
    if (r == 0)
        lc_hold_ns(L, s);
}

/* A new shell for s's call (release() above): s's sandbox is torn down without a word to
 * the server, and its spec starts again in the same slot, released at once (a held call's go
 * has come; a new hold would wait for a second one). */
static void restart(struct launcher *L, struct sbx *s)
{
    char err[256] = "", id[sizeof(s->id)];
    struct tc_spec parsed;
    json_t *spec = json_incref(s->spec_json);
    unsigned tries = s->shell_tries + 1;

    memcpy(id, s->id, sizeof(id));
    lc_teardown(L, s);
    lc_retry_dead_cgs(L);
    json_object_del(spec, "hold");
    if (tc_spec_parse(spec, &parsed, err, sizeof(err)) < 0) { /* it parsed before */
        lc_send_error(L, id, "invalid spec: %s", err);
        json_decref(spec);
        return;
    }
    s->shell_tries = tries; /* (lc_start_in_slot keeps it: it clears nothing it does not set) */
    lc_start_in_slot(L, s, spec, &parsed, 0);
}

/* TC_WIRE_GO: start a held sandbox's program, with its full wall time from now. */
void lc_go(struct launcher *L, const char *id)
{
    for (unsigned i = 0; i < L->max; i++) {
        struct sbx *s = &L->slots[i];
        if (!s->used || !s->held || strcmp(s->id, id) != 0)
            continue;
        s->held = false;
        lc_quiet_begin(L, lc_now_ms());
        s->start_ms = lc_now_ms();
        s->deadline_ms = s->start_ms + s->spec.limits.wall_ms;
        int r = s->warm_used ? lc_warm_go(L, s) : s->gvisor ? spawn_gvisor(L, s) : release(L, s);
        if (r < 0)
            start_fail(L, s, "spawn: %s", strerror(-r));
        else if (r == 0)
            lc_hold_ns(L, s); /* (a shell that was not ready at hold()) */
        return;
    }
}

/* A held sandbox ends without its program having run. */
void lc_drop_held(struct launcher *L, struct sbx *s, const char *why)
{
    lc_fail_teardown(L, s, why);
}
