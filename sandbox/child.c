#include "sandbox/child.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/wire.h"

#define SBX_PASSWD                                                                                 \
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"                                                    \
    "sandbox:x:1000:1000:sandbox:/workspace:/bin/bash\n"                                           \
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
#define SBX_GROUP "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"
#define SBX_NSSWITCH                                                                               \
    "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n"                  \
    "protocols: files\nservices: files\n"

/* ---- small async-signal-safe helpers (we are a fork of the launcher) ---- */

static _Noreturn void die(const struct tc_child_cfg *cfg, int err, const char *what)
{
    struct tc_ctl_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_SETUP_ERROR;
    m.err = err;
    snprintf(m.what, sizeof(m.what), "%s", what);
    (void)send(cfg->ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    _exit(125);
}

#define CHECK(cfg, expr, what)                                                                     \
    do {                                                                                           \
        if ((expr) < 0)                                                                            \
            die(cfg, errno, what);                                                                 \
    } while (0)

static void path_in(char *buf, size_t size, const char *root, const char *rel)
{
    int n = snprintf(buf, size, "%s/%s", root, rel);
    if (n < 0 || (size_t)n >= size)
        buf[0] = '\0'; /* makes the following syscall fail with ENOENT */
}

static int write_file(const char *path, const char *data, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    size_t len = strlen(data), off = 0;

    if (fd < 0)
        return -1;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        off += (size_t)n;
    }
    return close(fd);
}

static int touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    return close(fd);
}

/* mkdir -p inside the new root (components already validated: no "..") */
static int mkdir_p(char *path, mode_t mode)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int r = mkdir(path, mode);
        *p = '/';
        if (r < 0 && errno != EEXIST)
            return -1;
    }
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int setattr(const char *path, uint64_t set, bool recursive)
{
    struct mount_attr a;
    memset(&a, 0, sizeof(a));
    a.attr_set = set;
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a,
                        sizeof(a));
}

static int bind_mount(const char *src, const char *dst, bool ro)
{
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        return -1;
    return setattr(dst, (ro ? MOUNT_ATTR_RDONLY : 0) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
}

/* ---- root filesystem ---- */

static void setup_dev(const struct tc_child_cfg *cfg, const char *root)
{
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
    static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                           {"stdin", "/proc/self/fd/0"},
                                           {"stdout", "/proc/self/fd/1"},
                                           {"stderr", "/proc/self/fd/2"},
                                           {"core", "/proc/kcore"}};
    char dev[PATH_MAX], p[PATH_MAX], opts[96];

    path_in(dev, sizeof(dev), root, "dev");
    CHECK(cfg, mkdir(dev, 0755), "mkdir /dev");
    CHECK(cfg,
          mount("tcdev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"),
          "mount /dev");
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        char host[32];
        snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
        path_in(p, sizeof(p), dev, nodes[i]);
        CHECK(cfg, touch(p), "create /dev node");
        if (mount(host, p, NULL, MS_BIND, NULL) < 0)
            die(cfg, errno, "bind /dev node");
    }
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]) - 1; i++) {
        path_in(p, sizeof(p), dev, links[i][0]);
        CHECK(cfg, symlink(links[i][1], p), "symlink in /dev");
    }
    path_in(p, sizeof(p), dev, "shm");
    CHECK(cfg, mkdir(p, 0755), "mkdir /dev/shm");
    snprintf(opts, sizeof(opts), "mode=1777,size=%lld,nr_inodes=4096",
             (long long)cfg->spec->limits.tmp_bytes);
    CHECK(cfg, mount("tcshm", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts),
          "mount /dev/shm");
    CHECK(cfg, setattr(dev, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false),
          "remount /dev ro");
}

static void setup_etc(const struct tc_child_cfg *cfg, const char *root)
{
    const struct tc_rootfs_info *ri = cfg->rootfs;
    char etc[PATH_MAX], p[PATH_MAX], hosts[256];

    path_in(etc, sizeof(etc), root, "etc");
    CHECK(cfg, mkdir(etc, 0755), "mkdir /etc");
    snprintf(hosts, sizeof(hosts), "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t%s\n",
             cfg->spec->hostname);
    const char *files[][2] = {{"passwd", SBX_PASSWD},
                              {"group", SBX_GROUP},
                              {"hosts", hosts},
                              {"resolv.conf", ""},
                              {"nsswitch.conf", SBX_NSSWITCH},
                              {"hostname", cfg->spec->hostname}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        path_in(p, sizeof(p), etc, files[i][0]);
        CHECK(cfg, write_file(p, files[i][1], 0644), "write /etc file");
    }
    if (ri->localtime_target[0]) {
        path_in(p, sizeof(p), etc, "localtime");
        CHECK(cfg, symlink(ri->localtime_target, p), "symlink /etc/localtime");
    }
    for (int i = 0; i < ri->n_binds; i++) {
        path_in(p, sizeof(p), root, ri->binds[i].dst);
        if (ri->binds[i].is_dir) {
            CHECK(cfg, mkdir_p(p, 0755), "mkdir /etc bind");
        } else {
            char *slash = strrchr(p, '/');
            *slash = '\0';
            CHECK(cfg, mkdir_p(p, 0755), "mkdir /etc bind parent");
            *slash = '/';
            CHECK(cfg, touch(p), "create /etc bind");
        }
        CHECK(cfg, bind_mount(ri->binds[i].src, p, true), "bind /etc entry");
    }
}

static void setup_mounts(const struct tc_child_cfg *cfg, const char *root)
{
    char p[PATH_MAX];

    for (size_t i = 0; i < cfg->spec->n_mounts; i++) {
        const struct tc_spec_mount *m = &cfg->spec->mounts[i];
        struct stat st;
        CHECK(cfg, stat(m->source, &st), "spec mount source");
        snprintf(p, sizeof(p), "%s%s", root, m->target);
        if (S_ISDIR(st.st_mode)) {
            CHECK(cfg, mkdir_p(p, 0755), "spec mount target");
        } else {
            char *slash = strrchr(p, '/');
            *slash = '\0';
            CHECK(cfg, mkdir_p(p, 0755), "spec mount target");
            *slash = '/';
            CHECK(cfg, touch(p), "spec mount target");
        }
        CHECK(cfg, bind_mount(m->source, p, !m->writable), "spec mount");
    }
}

static void setup_root(const struct tc_child_cfg *cfg)
{
    const char *root = cfg->newroot;
    const struct tc_rootfs_info *ri = cfg->rootfs;
    char p[PATH_MAX], opts[96];

    CHECK(cfg, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make / private");
    CHECK(cfg,
          mount("tcroot", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096"),
          "mount root tmpfs");

    path_in(p, sizeof(p), root, "usr");
    CHECK(cfg, mkdir(p, 0755), "mkdir /usr");
    CHECK(cfg, bind_mount("/usr", p, true), "bind /usr");
    for (int i = 0; i < ri->n_links; i++) {
        path_in(p, sizeof(p), root, ri->usr_links[i]);
        CHECK(cfg, symlink(ri->usr_targets[i], p), "merged-usr symlink");
    }
    setup_etc(cfg, root);

    path_in(p, sizeof(p), root, "proc");
    CHECK(cfg, mkdir(p, 0555), "mkdir /proc");
    CHECK(cfg, mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "mount /proc");
    path_in(p, sizeof(p), root, "proc/sys");
    CHECK(cfg, bind_mount(p, p, true), "read-only /proc/sys");

    setup_dev(cfg, root);

    path_in(p, sizeof(p), root, "tmp");
    CHECK(cfg, mkdir(p, 01777), "mkdir /tmp");
    snprintf(opts, sizeof(opts), "mode=1777,size=%lld,nr_inodes=%lld",
             (long long)cfg->spec->limits.tmp_bytes,
             (long long)(cfg->spec->limits.tmp_bytes / 4096 + 64));
    CHECK(cfg, mount("tctmp", p, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount /tmp");

    path_in(p, sizeof(p), root, "workspace");
    CHECK(cfg, mkdir(p, 0755), "mkdir /workspace");
    CHECK(cfg, bind_mount(cfg->ws_path, p, false), "bind /workspace");

    path_in(p, sizeof(p), root, "root");
    CHECK(cfg, mkdir(p, 0700), "mkdir /root");
    path_in(p, sizeof(p), root, "home");
    CHECK(cfg, mkdir(p, 0755), "mkdir /home");
    setup_mounts(cfg, root);

    CHECK(cfg, setattr(root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false),
          "remount root ro");
    CHECK(cfg, chdir(root), "chdir new root");
    /* pivot_root(".", "."): the old root ends up stacked on top; detach it. */
    CHECK(cfg, (int)syscall(SYS_pivot_root, ".", "."), "pivot_root");
    CHECK(cfg, umount2(".", MNT_DETACH), "detach old root");
    CHECK(cfg, chdir("/"), "chdir /");
}

static void setup_net(const struct tc_child_cfg *cfg)
{
    struct ifreq ifr;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (s < 0)
        die(cfg, errno, "socket for lo");
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        die(cfg, errno, "SIOCGIFFLAGS lo");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        die(cfg, errno, "SIOCSIFFLAGS lo");
    close(s);
    CHECK(cfg, sethostname(cfg->spec->hostname, strlen(cfg->spec->hostname)), "sethostname");
}

/* ---- privileges ---- */

static int drop_caps(int last_cap)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];

    for (int c = 0; c <= last_cap; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    memset(d, 0, sizeof(d));
    if (syscall(SYS_capset, &h, d) < 0)
        return -1;
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* Never above the hard limit we inherited: raising it needs CAP_SYS_RESOURCE in the
 * initial user namespace, which the sandbox does not have. */
static int set_rlimit(int res, rlim_t v)
{
    struct rlimit rl;
    if (getrlimit(res, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
        v = rl.rlim_max;
    rl.rlim_cur = rl.rlim_max = v;
    return setrlimit(res, &rl);
}

static void set_limits(const struct tc_child_cfg *cfg)
{
    const struct tc_limits *l = &cfg->spec->limits;
    /* RLIMIT_CPU is per process and whole seconds: a backstop behind the cgroup poll.
     * Soft limit -> SIGXCPU, one second later the kernel sends SIGKILL. */
    rlim_t cpu_s = (rlim_t)((l->cpu_ms + 999) / 1000);
    struct rlimit cpu = {.rlim_cur = cpu_s, .rlim_max = cpu_s + 1};

    CHECK(cfg, set_rlimit(RLIMIT_FSIZE, (rlim_t)l->file_size_bytes), "RLIMIT_FSIZE");
    CHECK(cfg, set_rlimit(RLIMIT_NOFILE, (rlim_t)l->nofile), "RLIMIT_NOFILE");
    CHECK(cfg, set_rlimit(RLIMIT_CORE, 0), "RLIMIT_CORE");
    CHECK(cfg, set_rlimit(RLIMIT_MEMLOCK, 0), "RLIMIT_MEMLOCK");
    CHECK(cfg, set_rlimit(RLIMIT_MSGQUEUE, 0), "RLIMIT_MSGQUEUE");
    CHECK(cfg, setrlimit(RLIMIT_CPU, &cpu), "RLIMIT_CPU");
    CHECK(cfg,
          set_rlimit(RLIMIT_STACK, l->memory_bytes < (8 << 20) ? (rlim_t)l->memory_bytes : 8 << 20),
          "RLIMIT_STACK");
    if (cfg->rlimit_as)
        CHECK(cfg, set_rlimit(RLIMIT_AS, (rlim_t)l->memory_bytes), "RLIMIT_AS");
    if (cfg->rlimit_nproc)
        CHECK(cfg, set_rlimit(RLIMIT_NPROC, (rlim_t)l->pids), "RLIMIT_NPROC");
}

/* ---- the program ---- */

static _Noreturn void exec_program(const struct tc_child_cfg *cfg)
{
    struct tc_ctl_msg m;
    sigset_t none;
    int lfd, r;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    if (setsid() < 0)
        die(cfg, errno, "setsid");
    if (chdir(cfg->spec->cwd) < 0)
        die(cfg, errno, "chdir to cwd");
    set_limits(cfg);
    if (drop_caps(cfg->rootfs->cap_last_cap) < 0)
        die(cfg, errno, "drop capabilities");
    /* Last step before exec: from here on every denied syscall goes to the launcher. */
    lfd = tc_seccomp_install(cfg->seccomp);
    if (lfd < 0)
        die(cfg, -lfd, "seccomp");
    if (cfg->seccomp->notify) {
        memset(&m, 0, sizeof(m));
        m.kind = TC_CTL_NOTIFY_FD;
        if (tc_send_fd(cfg->ctl_fd, lfd, &m, sizeof(m)) < 0)
            _exit(125);
        close(lfd);
    }
    execve(cfg->spec->argv[0], (char *const *)cfg->spec->argv, (char *const *)cfg->spec->envp);
    r = errno;
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_EXEC_ERROR;
    m.err = r;
    (void)send(cfg->ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    dprintf(2, "toolcage: cannot execute %s: %s\n", cfg->spec->argv[0], strerror(r));
    _exit(127);
}

static volatile sig_atomic_t g_program_pid;

static void forward_signal(int sig)
{
    if (g_program_pid > 0)
        kill((pid_t)g_program_pid, sig);
}

/* Move fds to fixed numbers: 0-2 stdio, 3 sync, 4 ctl; close everything else. */
static void arrange_fds(struct tc_child_cfg *c)
{
    int src[5] = {c->stdin_fd, c->stdout_fd, c->stderr_fd, c->sync_fd, c->ctl_fd}, tmp[5];

    for (int i = 0; i < 5; i++) {
        tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 5);
        if (tmp[i] < 0)
            _exit(125);
    }
    for (int i = 0; i < 5; i++)
        if (dup2(tmp[i], i) < 0)
            _exit(125);
    if (syscall(SYS_close_range, 5U, ~0U, 0U) < 0)
        _exit(125);
    fcntl(3, F_SETFD, FD_CLOEXEC);
    fcntl(4, F_SETFD, FD_CLOEXEC);
    c->stdin_fd = 0;
    c->stdout_fd = 1;
    c->stderr_fd = 2;
    c->sync_fd = 3;
    c->ctl_fd = 4;
}

_Noreturn void tc_child_main(const struct tc_child_cfg *in)
{
    struct tc_child_cfg cfg = *in;
    struct tc_ctl_msg m;
    struct sigaction sa;
    sigset_t none;
    pid_t prog;
    int status = 0;
    char c;
    ssize_t n;

    /* Launcher gone before this point -> SIGKILL; or the sync pipe reads EOF below. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Still root of the parent namespace here (no uid map yet): join the cgroups. */
    for (int i = 0; i < 3; i++) {
        if (cfg.cg_procs[i] < 0)
            continue;
        if (write(cfg.cg_procs[i], "0", 1) != 1)
            die(&cfg, errno, "join cgroup");
    }
    arrange_fds(&cfg);
    do
        n = read(cfg.sync_fd, &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        _exit(125);
    close(cfg.sync_fd);

    if (chdir(cfg.scratch) < 0)
        die(&cfg, errno, "chdir to scratch");
    if (setresgid(TC_SANDBOX_GID, TC_SANDBOX_GID, TC_SANDBOX_GID) < 0)
        die(&cfg, errno, "setresgid");
    /* Root is not mapped in this user namespace, so changing uid keeps our capabilities
     * (needed for the mounts below); they are dropped explicitly later. */
    if (setresuid(TC_SANDBOX_UID, TC_SANDBOX_UID, TC_SANDBOX_UID) < 0)
        die(&cfg, errno, "setresuid");
    if (unshare(CLONE_NEWCGROUP) < 0)
        die(&cfg, errno, "unshare cgroup namespace");
    setup_root(&cfg);
    setup_net(&cfg);

    prog = fork();
    if (prog < 0)
        die(&cfg, errno, "fork program");
    if (prog == 0)
        exec_program(&cfg);
    g_program_pid = prog;

    /* PID 1 keeps nothing it does not need. */
    close(0);
    close(1);
    close(2);
    prctl(PR_SET_DUMPABLE, 0);
    drop_caps(cfg.rootfs->cap_last_cap);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, 0);
        if (p < 0 && errno == EINTR)
            continue;
        if (p < 0)
            break;
        if (p == prog) {
            status = st;
            break;
        }
    }
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_EXIT;
    m.wstatus = status;
    getrusage(RUSAGE_CHILDREN, &m.ru);
    (void)send(cfg.ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    /* Exiting as PID 1 kills every remaining process of the namespace. */
    _exit(0);
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
