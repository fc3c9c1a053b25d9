#include "sandbox/child.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/workspace.h"

/* ---- PID 1 before its exec (a clone of the launcher: async-signal-safe calls only) ---- */

static _Noreturn void die(int ctl_fd, int err, const char *what)
{
    struct tc_ctl_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_SETUP_ERROR;
    m.err = err;
    snprintf(m.what, sizeof(m.what), "%s", what);
    (void)send(ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    _exit(125);
}

/* The shell's fds: 0-6 as init expects them (init_proto.h), the cgroup join files at 7-9
 * until it has joined. Everything else is closed. */
enum { SHELL_FD_CG = 7, SHELL_FD_FIRST_FREE = 10 };

static void arrange_fds(const struct tc_child_cfg *c)
{
    int src[SHELL_FD_FIRST_FREE] = {c->stdin_fd,   c->stdout_fd, c->stderr_fd, c->sync_fd,
                                    c->ctl_fd,     c->base_fd,   c->init_fd,   c->cg_join[0],
                                    c->cg_join[1], c->cg_join[2]},
        tmp[SHELL_FD_FIRST_FREE];

    for (int i = 0; i < SHELL_FD_FIRST_FREE; i++) {
        tmp[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD_CLOEXEC, SHELL_FD_FIRST_FREE);
        if (src[i] >= 0 && tmp[i] < 0)
            _exit(125);
    }
    for (int i = 0; i < SHELL_FD_FIRST_FREE; i++) {
        if (tmp[i] < 0)
            close(i);
        else if (dup2(tmp[i], i) < 0)
            _exit(125);
    }
    if (syscall(SYS_close_range, (unsigned)SHELL_FD_FIRST_FREE, ~0U, 0U) < 0)
        _exit(125);
    /* 0-5 survive the exec of init; the others do not */
    for (int i = 0; i < SHELL_FD_FIRST_FREE; i++)
        if (src[i] >= 0)
            fcntl(i, F_SETFD, i <= TC_INIT_FD_CFG ? 0 : FD_CLOEXEC);
}

/* Keep every capability (of the sandbox's user namespace) across the exec of init as
 * ambient capabilities: init needs them for the mounts and lo, and drops them all before
 * the program runs. uid 1000 is not root there, so an exec would otherwise clear them. */
static int caps_to_ambient(int last_cap)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];

    if (syscall(SYS_capget, &h, d) < 0)
        return -1;
    d[0].inheritable = d[0].permitted;
    d[1].inheritable = d[1].permitted;
    if (syscall(SYS_capset, &h, d) < 0)
        return -1;
    for (int c = 0; c <= last_cap; c++)
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0 && errno != EINVAL)
            return -1;
    return 0;
}

_Noreturn void tc_child_main(const struct tc_child_cfg *cfg)
{
    static char *const init_argv[] = {"toolcage-init", NULL};
    static char *const init_envp[] = {NULL};
    ssize_t n;
    char c;

    /* Launcher gone -> SIGKILL (init sets it again); or the sync socket reads EOF. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* First drop the launcher's other fds (other sandboxes' pipes, workspaces...). */
    arrange_fds(cfg);
    /* Still root of the parent namespace here (no uid map needed): join the cgroups. */
    for (int i = 0; i < 3; i++) {
        if (cfg->cg_join[i] < 0)
            continue;
        if (write(SHELL_FD_CG + i, "0", 1) != 1)
            die(TC_INIT_FD_CTL, errno, "join cgroup");
        close(SHELL_FD_CG + i);
    }
    /* The launcher writes our uid/gid maps right after the clone, then says 'm'. */
    while ((n = recv(TC_INIT_FD_SYNC, &c, 1, 0)) < 0 && errno == EINTR)
        ;
    if (n != 1 || c != 'm')
        _exit(125);
    /* (EPIPE when go has already been sent and the launcher closed its end: fine) */
    (void)send(TC_INIT_FD_SYNC, "j", 1, MSG_NOSIGNAL);
    if (chdir(cfg->scratch) < 0)
        die(TC_INIT_FD_CTL, errno, "chdir to scratch");
    /* The system calls, not libc's wrappers: this is a clone of a launcher that has a second
     * thread (launcher_result.c), which libc's setxid would wait for here, forever. */
    if (syscall(SYS_setresgid, TC_SANDBOX_GID, TC_SANDBOX_GID, TC_SANDBOX_GID) < 0)
        die(TC_INIT_FD_CTL, errno, "setresgid");
    /* Root is not mapped in this user namespace, so changing uid keeps our capabilities. */
    if (syscall(SYS_setresuid, TC_SANDBOX_UID, TC_SANDBOX_UID, TC_SANDBOX_UID) < 0)
        die(TC_INIT_FD_CTL, errno, "setresuid");
    if (caps_to_ambient(cfg->cap_last_cap) < 0)
        die(TC_INIT_FD_CTL, errno, "ambient capabilities");
    syscall(SYS_execveat, TC_INIT_FD_EXE, "", init_argv, init_envp, AT_EMPTY_PATH);
    die(TC_INIT_FD_CTL, errno, "exec toolcage-init");
}

/* ---- the shell, launcher side ---- */

static int write_proc(pid_t pid, const char *file, const char *data)
{
    char path[64];
    int fd;
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%ld/%s", (long)pid, file);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = write(fd, data, strlen(data));
    int r = n < 0 ? -errno : (size_t)n == strlen(data) ? 0 : -EIO;
    close(fd);
    return r;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int tc_shell_create(const struct tc_shell_env *env, uid_t uid, const char *cg_name,
                    struct tc_shell *ret)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1},
        sync[2] = {-1, -1};
    struct tc_shell sh = {.pid = -1, .pidfd = -1, .uid = uid};
    struct tc_child_cfg cfg;
    struct clone_args_ ca;
    char map[64];
    pid_t pid = -1;
    int r = 0;

    memset(&cfg, 0, sizeof(cfg));
    for (int i = 0; i < 3; i++)
        cfg.cg_join[i] = -1;
    /* stdio pipes are created with the sandbox's fs uid so that the program can reopen
     * them (/dev/stdin -> /proc/self/fd/0 checks the pipe inode's owner). */
    setfsgid(uid);
    setfsuid(uid);
    r = pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ? -errno
                                                                                           : 0;
    setfsuid(0);
    setfsgid(0);
    if (r < 0)
        goto fail;
    /* sync is a stream: a SEQPACKET peer that sends to a closed end loses its own queue */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
        r = -errno;
        goto fail;
    }
    if (env->cg->mode != TC_CG_NONE) {
        if ((r = tc_cg_create(env->cg, cg_name, &sh.cg)) < 0)
            goto fail;
        sh.has_cg = true;
    }
    /* v2: the child is born in its group (CLONE_INTO_CGROUP); v1: it moves itself in. */
    bool into_cg = sh.has_cg && env->cg->mode == TC_CG_V2 && sh.cg.fd[0] >= 0;
    if (sh.has_cg && !into_cg && (r = tc_cg_open_join(&sh.cg, cfg.cg_join)) < 0)
        goto fail;
    cfg.scratch = env->scratch;
    cfg.sync_fd = sync[1];
    cfg.ctl_fd = ctl[1];
    cfg.base_fd = env->base_fd;
    cfg.init_fd = env->init_fd;
    cfg.cap_last_cap = env->cap_last_cap;
    cfg.stdin_fd = in[0];
    cfg.stdout_fd = out[1];
    cfg.stderr_fd = err[1];

    /* No CLONE_NEWNS: init takes its own mount namespace once it runs (init.c). */
    memset(&ca, 0, sizeof(ca));
    ca.flags =
        CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)&sh.pidfd;
    ca.exit_signal = SIGCHLD;
    if (into_cg) {
        ca.flags |= CLONE_INTO_CGROUP_;
        ca.cgroup = (uint64_t)sh.cg.fd[0];
    }
    pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid < 0 && into_cg) {
        /* older kernel or not allowed: fall back to joining from the child */
        ca.flags &= ~CLONE_INTO_CGROUP_;
        ca.cgroup = 0;
        if ((r = tc_cg_open_join(&sh.cg, cfg.cg_join)) < 0)
            goto fail;
        pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    }
    if (pid < 0) {
        r = -errno;
        goto fail;
    }
    if (pid == 0)
        tc_child_main(&cfg);
    sh.pid = pid;
    snprintf(map, sizeof(map), "%d %u 1\n", TC_SANDBOX_UID, (unsigned)uid);
    if ((r = write_proc(pid, "uid_map", map)) < 0 ||
        (r = write_proc(pid, "setgroups", "deny")) < 0 || (r = write_proc(pid, "gid_map", map)) < 0)
        goto fail;
    if (send(sync[0], "m", 1, MSG_NOSIGNAL) != 1) {
        r = -errno;
        goto fail;
    }
    sh.stdin_fd = in[1];
    sh.stdout_fd = out[0];
    sh.stderr_fd = err[0];
    sh.ctl_fd = ctl[0];
    sh.sync_fd = sync[0];
    in[1] = out[0] = err[0] = ctl[0] = sync[0] = -1;
    goto out;
fail:
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    close_fd(&sh.pidfd);
    if (sh.has_cg)
        tc_cg_destroy(&sh.cg);
out:
    for (int i = 0; i < 3; i++)
        close_fd(&cfg.cg_join[i]);
    for (int i = 0; i < 2; i++) {
        close_fd(&in[i]);
        close_fd(&out[i]);
        close_fd(&err[i]);
        close_fd(&ctl[i]);
        close_fd(&sync[i]);
    }
    if (r == 0)
        *ret = sh;
    return r;
}

int tc_shell_poll_ready(struct tc_shell *sh)
{
    char c;
    ssize_t n = recv(sh->sync_fd, &c, 1, MSG_DONTWAIT);
    if (n == 1)
        return c == 'j' ? 1 : -EPROTO;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -EPIPE;
}

int tc_shell_go(int sync_fd, int cfg_fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = "g", .iov_len = 1};
    struct msghdr mh;
    struct cmsghdr *cm;
    ssize_t n;

    memset(cbuf, 0, sizeof(cbuf));
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &cfg_fd, sizeof(int));
    do
        n = sendmsg(sync_fd, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

void tc_shell_kill(struct tc_shell *sh)
{
    if (sh->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, sh->pidfd, SIGKILL, NULL, 0);
    else if (sh->pid > 0)
        kill(sh->pid, SIGKILL);
    if (sh->pid > 0)
        while (waitpid(sh->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    sh->pid = -1;
    close_fd(&sh->pidfd);
    close_fd(&sh->stdin_fd);
    close_fd(&sh->stdout_fd);
    close_fd(&sh->stderr_fd);
    close_fd(&sh->ctl_fd);
    close_fd(&sh->sync_fd);
}

/* ---- PID 1's configuration ---- */

struct tc_buf_ {
    char *data;
    size_t len, cap;
};

static int put(struct tc_buf_ *b, const void *p, size_t n)
{
    if (b->len + n > TC_INIT_MAX_CFG)
        return -E2BIG;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static int put_str(struct tc_buf_ *b, const char *s)
{
    return put(b, s ? s : "", strlen(s ? s : "") + 1);
}

/* The blob in a sealed memfd; frees (and wipes: it may hold leased secrets) the buffer. */
static int seal_blob(struct tc_buf_ *b, int r)
{
    int fd = -1;

    if (r < 0)
        goto out;
    fd = memfd_create("tc-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    for (size_t off = 0; off < b->len;) {
        ssize_t n = write(fd, b->data + off, b->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            goto out;
        }
        off += (size_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0) {
        r = -errno;
        goto out;
    }
    r = fd;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    if (b->data) {
        explicit_bzero(b->data, b->len);
        free(b->data);
    }
    return r;
}

int tc_child_base_config(const struct tc_rootfs_info *ri, const char *newroot)
{
    struct tc_buf_ b = {0};
    struct tc_init_base_hdr h;
    int r;

    memset(&h, 0, sizeof(h));
    h.magic = TC_INIT_BASE_MAGIC;
    h.cap_last_cap = (uint32_t)ri->cap_last_cap;
    r = put(&b, &h, sizeof(h));
    if (r == 0)
        r = put_str(&b, newroot);
    if (r == 0)
        r = put_str(&b, ri->localtime_target);
    for (int k = 0; r == 0 && k < ri->n_binds; k++, h.n_binds++) {
        r = put_str(&b, ri->binds[k].src);
        if (r == 0)
            r = put_str(&b, ri->binds[k].dst);
        if (r == 0)
            r = put_str(&b, ri->binds[k].is_dir ? "d" : "f");
    }
    for (int k = 0; r == 0 && k < ri->n_links; k++, h.n_links++) {
        r = put_str(&b, ri->usr_links[k]);
        if (r == 0)
            r = put_str(&b, ri->usr_targets[k]);
    }
    if (r == 0) {
        h.size = (uint32_t)b.len;
        memcpy(b.data, &h, sizeof(h));
    }
    return seal_blob(&b, r);
}

int tc_child_config(const struct tc_spec *spec, const struct tc_seccomp_prog *sc,
                    const char *ws_path, const char *image, unsigned flags)
{
    struct tc_buf_ b = {0};
    struct tc_init_hdr h;
    size_t i;
    json_t *f;
    int r = 0;

    memset(&h, 0, sizeof(h));
    h.magic = TC_INIT_MAGIC;
    h.flags = flags | (sc->notify ? TC_INIT_F_NOTIFY : 0);
    h.cpu_ms = spec->limits.cpu_ms;
    h.memory_bytes = spec->limits.memory_bytes;
    h.pids = spec->limits.pids;
    h.file_size_bytes = spec->limits.file_size_bytes;
    h.nofile = spec->limits.nofile;
    h.tmp_bytes = spec->limits.tmp_bytes;
    if ((r = put(&b, &h, sizeof(h))) < 0)
        goto out;
    r = put_str(&b, ws_path);
    if (r == 0)
        r = put_str(&b, spec->cwd);
    if (r == 0)
        r = put_str(&b, spec->hostname);
    if (r == 0)
        r = put_str(&b, image ? image : "");
    for (const char **a = spec->argv; r == 0 && *a; a++, h.n_argv++)
        r = put_str(&b, *a);
    for (const char **e = spec->envp; r == 0 && e && *e; e++, h.n_env++)
        r = put_str(&b, *e);
    for (i = 0; r == 0 && i < spec->n_mounts; i++, h.n_mounts++) {
        r = put_str(&b, spec->mounts[i].source);
        if (r == 0)
            r = put_str(&b, spec->mounts[i].target);
        if (r == 0)
            r = put_str(&b, spec->mounts[i].writable ? "w" : "r");
    }
    json_array_foreach(spec->secret_files, i, f)
    {
        const char *b64 = json_string_value(json_object_get(f, "content_b64"));
        unsigned char *data = NULL;
        size_t len = 0;
        uint32_t len32;
        if (r < 0)
            break;
        if (!b64 || tc_b64_decode(b64, strlen(b64), &data, &len) < 0) {
            r = -EINVAL;
            break;
        }
        len32 = (uint32_t)len;
        r = put_str(&b, json_string_value(json_object_get(f, "name")));
        if (r == 0)
            r = put(&b, &len32, sizeof(len32));
        if (r == 0)
            r = put(&b, data, len);
        explicit_bzero(data, len);
        free(data);
        h.n_secrets++;
        h.secrets_bytes += len32;
    }
    while (r == 0 && b.len % 8)
        r = put(&b, "", 1);
    if (r < 0)
        goto out;
    h.bpf_off = (uint32_t)b.len;
    h.bpf_len = sc->prog.len;
    if ((r = put(&b, sc->prog.filter, sc->prog.len * sizeof(struct sock_filter))) < 0)
        goto out;
    h.size = (uint32_t)b.len;
    memcpy(b.data, &h, sizeof(h));
out:
    return seal_blob(&b, r);
}

static char binary_dir[PATH_MAX]; /* tc_child_set_binary_dir; "": this binary's */

void tc_child_set_binary_dir(const char *dir)
{
    snprintf(binary_dir, sizeof(binary_dir), "%s", dir);
}

/* The launcher runs as root outside any sandbox: a binary found by its place is used only if
 * it and its folder are root's (or ours) and writable by no one else. */
static bool trusted_by_owner(const struct stat *st)
{
    return (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

bool tc_child_trusted_binary(int fd, const char *path)
{
    struct stat st, dir;
    char d[PATH_MAX];
    snprintf(d, sizeof(d), "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash || slash == d)
        return false;
    *slash = '\0';
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && trusted_by_owner(&st) &&
           stat(d, &dir) == 0 && S_ISDIR(dir.st_mode) && trusted_by_owner(&dir);
}

int tc_child_find_trusted(const char *name, char *ret_path, size_t size)
{
    int fd = tc_child_find_binary(name, ret_path, size);
    if (fd >= 0 && !tc_child_trusted_binary(fd, ret_path)) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

int tc_child_find_binary(const char *name, char *ret_path, size_t size)
{
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    ssize_t n;
    char *slash;

    if (binary_dir[0]) {
        snprintf(exe, sizeof(exe), "%s", binary_dir);
    } else {
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
            return -errno;
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (!slash)
            return -ENOENT;
        *slash = '\0';
    }
    static const char *const rel[] = {"", "../", "../libexec/toolcage/"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(cand, sizeof(cand), "%s/%s%s", exe, rel[i], name);
        int fd = open(cand, O_PATH | O_CLOEXEC);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
                snprintf(ret_path, size, "%s", cand);
                return fd;
            }
            close(fd);
        }
    }
    snprintf(ret_path, size, "%s/%s", exe, name);
    return -ENOENT;
}

int tc_child_open_init(const char *path, char *ret_path, size_t size)
{
    if (path && path[0] == '/') {
        snprintf(ret_path, size, "%s", path);
        int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        if (!tc_child_trusted_binary(fd, path)) { /* (named by the operator: the same rule) */
            close(fd);
            return -EPERM;
        }
        return fd;
    }
    return tc_child_find_trusted("toolcage-init", ret_path, size);
}

/* ---- host detection (launcher side) ---- */

static bool exists(const char *p, bool *is_dir)
{
    struct stat st;
    if (stat(p, &st) < 0)
        return false;
    *is_dir = S_ISDIR(st.st_mode);
    return S_ISDIR(st.st_mode) || S_ISREG(st.st_mode);
}

void tc_rootfs_detect(struct tc_rootfs_info *ri)
{
    static const char *const top[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
    static const char *const etc[] = {
        "/etc/ld.so.cache",  "/etc/ssl/certs",  "/etc/ssl/openssl.cnf",
        "/etc/alternatives", "/etc/python3",    "/etc/python3.11",
        "/etc/python3.12",   "/etc/python3.13", "/etc/ca-certificates.conf",
        "/etc/mime.types",   "/etc/protocols",  "/etc/services",
        "/etc/matplotlibrc", "/etc/fonts"};
    char buf[PATH_MAX];
    int last = 40;

    memset(ri, 0, sizeof(*ri));
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]) && ri->n_links < 8; i++) {
        char p[32];
        snprintf(p, sizeof(p), "/%s", top[i]);
        ssize_t n = readlink(p, buf, sizeof(buf) - 1);
        if (n <= 0 || (size_t)n >= sizeof(ri->usr_targets[0]))
            continue;
        buf[n] = '\0';
        if (strncmp(buf, "usr/", 4) != 0 && strncmp(buf, "/usr/", 5) != 0)
            continue;
        snprintf(ri->usr_links[ri->n_links], sizeof(ri->usr_links[0]), "%s", top[i]);
        memcpy(ri->usr_targets[ri->n_links], buf, (size_t)n + 1);
        ri->n_links++;
    }
    for (size_t i = 0; i < sizeof(etc) / sizeof(etc[0]) && ri->n_binds < 16; i++) {
        bool dir;
        if (!exists(etc[i], &dir))
            continue;
        struct tc_etc_bind *b = &ri->binds[ri->n_binds++];
        snprintf(b->src, sizeof(b->src), "%s", etc[i]);
        snprintf(b->dst, sizeof(b->dst), "%s", etc[i] + 1);
        b->is_dir = dir;
    }
    ssize_t n = readlink("/etc/localtime", buf, sizeof(buf) - 1);
    if (n > 0 && (size_t)n < sizeof(ri->localtime_target)) {
        buf[n] = '\0';
        if (strncmp(buf, "/usr/", 5) == 0)
            memcpy(ri->localtime_target, buf, (size_t)n + 1);
    }
    int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char num[16];
        ssize_t k = read(fd, num, sizeof(num) - 1);
        if (k > 0) {
            num[k] = '\0';
            char *end;
            long v = strtol(num, &end, 10);
            if (v > 0 && v < 128)
                last = (int)v;
        }
        close(fd);
    }
    ri->cap_last_cap = last;
}
