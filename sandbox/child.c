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

/* Move fds to the numbers init expects (init_proto.h); close everything else. */
static void arrange_fds(const struct tc_child_cfg *c)
{
    int src[7] = {c->stdin_fd, c->stdout_fd, c->stderr_fd, c->sync_fd,
                  c->ctl_fd,   c->cfg_fd,    c->init_fd},
        tmp[7];

    for (int i = 0; i < 7; i++) {
        tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, TC_INIT_FD_FIRST_FREE);
        if (tmp[i] < 0)
            _exit(125);
    }
    for (int i = 0; i < 7; i++)
        if (dup2(tmp[i], i) < 0)
            _exit(125);
    if (syscall(SYS_close_range, (unsigned)TC_INIT_FD_FIRST_FREE, ~0U, 0U) < 0)
        _exit(125);
    /* 0-5 survive the exec; the init binary's own fd does not */
    for (int i = 0; i < TC_INIT_FD_EXE; i++)
        fcntl(i, F_SETFD, 0);
    fcntl(TC_INIT_FD_EXE, F_SETFD, FD_CLOEXEC);
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
    char c;
    ssize_t n;

    /* Launcher gone before this point -> SIGKILL; or the sync pipe reads EOF below. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Still root of the parent namespace here (no uid map yet): join the cgroups. */
    for (int i = 0; i < 3; i++) {
        if (cfg->cg_procs[i] < 0)
            continue;
        if (write(cfg->cg_procs[i], "0", 1) != 1)
            die(cfg->ctl_fd, errno, "join cgroup");
    }
    arrange_fds(cfg);
    do
        n = read(TC_INIT_FD_SYNC, &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        _exit(125);
    if (chdir(cfg->scratch) < 0)
        die(TC_INIT_FD_CTL, errno, "chdir to scratch");
    if (setresgid(TC_SANDBOX_GID, TC_SANDBOX_GID, TC_SANDBOX_GID) < 0)
        die(TC_INIT_FD_CTL, errno, "setresgid");
    /* Root is not mapped in this user namespace, so changing uid keeps our capabilities. */
    if (setresuid(TC_SANDBOX_UID, TC_SANDBOX_UID, TC_SANDBOX_UID) < 0)
        die(TC_INIT_FD_CTL, errno, "setresuid");
    if (caps_to_ambient(cfg->cap_last_cap) < 0)
        die(TC_INIT_FD_CTL, errno, "ambient capabilities");
    syscall(SYS_execveat, TC_INIT_FD_EXE, "", init_argv, init_envp, AT_EMPTY_PATH);
    die(TC_INIT_FD_CTL, errno, "exec toolcage-init");
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

int tc_child_config(const struct tc_spec *spec, const struct tc_seccomp_prog *sc,
                    const struct tc_rootfs_info *ri, const char *newroot, const char *ws_path,
                    bool rlimit_as, bool rlimit_nproc)
{
    struct tc_buf_ b = {0};
    struct tc_init_hdr h;
    size_t i;
    json_t *f;
    int r = 0, fd = -1;

    memset(&h, 0, sizeof(h));
    h.magic = TC_INIT_MAGIC;
    h.flags = (sc->notify ? TC_INIT_F_NOTIFY : 0) | (rlimit_as ? TC_INIT_F_RLIMIT_AS : 0) |
              (rlimit_nproc ? TC_INIT_F_RLIMIT_NPROC : 0);
    h.cap_last_cap = (uint32_t)ri->cap_last_cap;
    h.cpu_ms = spec->limits.cpu_ms;
    h.memory_bytes = spec->limits.memory_bytes;
    h.pids = spec->limits.pids;
    h.file_size_bytes = spec->limits.file_size_bytes;
    h.nofile = spec->limits.nofile;
    h.tmp_bytes = spec->limits.tmp_bytes;
    if ((r = put(&b, &h, sizeof(h))) < 0)
        goto out;
    r = put_str(&b, newroot);
    if (r == 0)
        r = put_str(&b, ws_path);
    if (r == 0)
        r = put_str(&b, spec->cwd);
    if (r == 0)
        r = put_str(&b, spec->hostname);
    if (r == 0)
        r = put_str(&b, ri->localtime_target);
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

    fd = memfd_create("tc-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    for (size_t off = 0; off < b.len;) {
        ssize_t n = write(fd, b.data + off, b.len - off);
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
    if (b.data) {
        explicit_bzero(b.data, b.len); /* may hold leased secrets */
        free(b.data);
    }
    return r;
}

int tc_child_open_init(char *ret_path, size_t size)
{
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    const char *env = getenv("TOOLCAGE_INIT");
    ssize_t n;
    char *slash;

    if (env && env[0] == '/') {
        snprintf(ret_path, size, "%s", env);
        int fd = open(env, O_PATH | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
    }
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -errno;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    static const char *const rel[] = {"toolcage-init", "../toolcage-init",
                                      "../libexec/toolcage/toolcage-init"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(cand, sizeof(cand), "%s/%s", exe, rel[i]);
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
    snprintf(ret_path, size, "%s/toolcage-init", exe);
    return -ENOENT;
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
        "/etc/mime.types",   "/etc/protocols",  "/etc/services"};
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
