/* toolcage-vminit: PID 1 of a microvm guest (docs/sandbox.md, microvm backend). Static, in
 * the initramfs the launcher builds (sandbox/microvm.c) with the kernel modules it needs.
 *
 * It loads the modules, mounts the host's /usr (read-only) and the call's workspace over 9p,
 * says READY on the "toolcage" port (vm_proto.h) and waits there for the program's
 * configuration; then it puts the program in a cgroup of its own (memory, pids: the guest
 * kernel enforces the call's limits), forks it as an unprivileged user with the call's
 * rlimits, relays its stdin, stdout and stderr over the port, reports how it ended and
 * powers the guest off. Nothing here is a secret: the guest belongs to one call. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vm_proto.h"

#define MAX_ARGS 4096

static int port = -1;

static void msleep(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static _Noreturn void power_off(void)
{
    sync();
    reboot(RB_POWER_OFF);
    for (;;)
        pause();
}

static int send_frame(int type, const void *data, uint32_t len)
{
    unsigned char h[TC_VM_HDR];
    tc_vm_hdr(h, type, len);
    if (port < 0 || tc_vm_write_all(port, h, sizeof(h)) < 0)
        return -1;
    return len ? tc_vm_write_all(port, data, len) : 0;
}

/* Before the port is open there is nobody to tell: power off (vmrun reports "no guest"). */
static _Noreturn void die(const char *what, int err)
{
    char msg[256];
    int n = snprintf(msg, sizeof(msg), "microvm guest: %s: %s", what, strerror(err));
    send_frame(TC_VM_FAIL, msg, (uint32_t)(n < 0 ? 0 : n));
    power_off();
}

static void load_modules(void)
{
    char list[4096], path[256];
    int fd = open("/kmod/order", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, list, sizeof(list) - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return;
    list[n] = '\0';
    for (char *save = NULL, *m = strtok_r(list, "\n", &save); m; m = strtok_r(NULL, "\n", &save)) {
        snprintf(path, sizeof(path), "/kmod/%s", m);
        int mfd = open(path, O_RDONLY | O_CLOEXEC);
        if (mfd < 0)
            continue;
        /* a compressed module (.ko.xz, .ko.zst) is the kernel's to decompress: 4 is
         * MODULE_INIT_COMPRESSED_FILE; EEXIST: built in */
        size_t ml = strlen(m);
        bool z = ml > 3 && (strcmp(m + ml - 3, ".xz") == 0 || strcmp(m + ml - 4, ".zst") == 0 ||
                            strcmp(m + ml - 3, ".gz") == 0);
        (void)syscall(SYS_finit_module, mfd, "", z ? 4 : 0);
        close(mfd);
    }
}

/* /dev/vportNpM whose name is "toolcage" (no udev here to make the by-name link) */
static int open_port(void)
{
    char p[300], name[64];
    for (int tries = 0; tries < 3000; tries++) {
        DIR *d = opendir("/sys/class/virtio-ports");
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            snprintf(p, sizeof(p), "/sys/class/virtio-ports/%s/name", de->d_name);
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            ssize_t n = fd < 0 ? -1 : read(fd, name, sizeof(name) - 1);
            if (fd >= 0)
                close(fd);
            if (n <= 0)
                continue;
            name[n] = '\0';
            name[strcspn(name, "\n")] = '\0';
            if (strcmp(name, TC_VM_PORT) != 0)
                continue;
            snprintf(p, sizeof(p), "/dev/%s", de->d_name);
            closedir(d);
            int pfd = open(p, O_RDWR | O_CLOEXEC);
            if (pfd >= 0)
                return pfd;
            d = NULL;
            break;
        }
        if (d)
            closedir(d);
        msleep(10);
    }
    return -1;
}

static void mount_9p(const char *tag, const char *dst, bool ro, const char *cache)
{
    char opts[128];
    snprintf(opts, sizeof(opts), "trans=virtio,version=9p2000.L,msize=524288,cache=%s", cache);
    mkdir(dst, 0755);
    if (mount(tag, dst, "9p", MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0), opts) < 0)
        die(dst, errno);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || tc_vm_write_all(fd, text, strlen(text)) < 0)
        die(path, errno);
    close(fd);
}

struct cfg {
    unsigned long uid;
    long long memory, pids, nofile, fsize, cpu_ms, tmp_bytes;
    const char *cwd, *hostname;
    bool secrets;
    char *argv[MAX_ARGS + 1], *envp[MAX_ARGS + 1];
};

static void parse_cfg(char *buf, uint32_t len, struct cfg *c)
{
    char *p = buf, *end = buf + len;
    long long argc = -1, envc = -1;
    int na = 0, ne = 0;
    memset(c, 0, sizeof(*c));
    c->uid = 1000;
    c->cwd = "/workspace";
    c->hostname = "sandbox";
    while (p < end) {
        char *s = p;
        char *z = memchr(p, '\0', (size_t)(end - p));
        if (!z)
            die("configuration", EINVAL);
        p = z + 1;
        if (argc >= 0 && envc >= 0) { /* after the counts: the strings, counted */
            if (na < argc)
                c->argv[na++] = s;
            else if (ne < envc)
                c->envp[ne++] = s;
            else
                die("configuration", EINVAL);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq)
            die("configuration", EINVAL);
        *eq = '\0';
        const char *v = eq + 1;
        if (strcmp(s, "uid") == 0)
            c->uid = strtoul(v, NULL, 10);
        else if (strcmp(s, "memory") == 0)
            c->memory = strtoll(v, NULL, 10);
        else if (strcmp(s, "pids") == 0)
            c->pids = strtoll(v, NULL, 10);
        else if (strcmp(s, "nofile") == 0)
            c->nofile = strtoll(v, NULL, 10);
        else if (strcmp(s, "fsize") == 0)
            c->fsize = strtoll(v, NULL, 10);
        else if (strcmp(s, "cpu_ms") == 0)
            c->cpu_ms = strtoll(v, NULL, 10);
        else if (strcmp(s, "tmp_bytes") == 0)
            c->tmp_bytes = strtoll(v, NULL, 10);
        else if (strcmp(s, "cwd") == 0)
            c->cwd = v;
        else if (strcmp(s, "hostname") == 0)
            c->hostname = v;
        else if (strcmp(s, "secrets") == 0)
            c->secrets = strcmp(v, "1") == 0;
        else if (strcmp(s, "argc") == 0)
            argc = strtoll(v, NULL, 10);
        else if (strcmp(s, "envc") == 0)
            envc = strtoll(v, NULL, 10);
        if (argc > MAX_ARGS || envc > MAX_ARGS)
            die("configuration", E2BIG);
    }
    c->argv[na] = NULL;
    c->envp[ne] = NULL;
    if (na == 0 || na != argc || ne != envc || c->uid == 0 || c->uid > 65534)
        die("configuration", EINVAL);
}

/* the program's cgroup: the guest kernel enforces memory and pids on it */
static void program_cgroup(const struct cfg *c)
{
    char v[32];
    mkdir("/sys/fs/cgroup", 0755);
    if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        die("cgroup2", errno);
    write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids", 0644);
    if (mkdir("/sys/fs/cgroup/program", 0755) < 0)
        die("cgroup", errno);
    if (c->memory > 0) {
        snprintf(v, sizeof(v), "%lld", c->memory);
        write_file("/sys/fs/cgroup/program/memory.max", v, 0644);
        write_file("/sys/fs/cgroup/program/memory.swap.max", "0", 0644);
    }
    if (c->pids > 0) {
        snprintf(v, sizeof(v), "%lld", c->pids);
        write_file("/sys/fs/cgroup/program/pids.max", v, 0644);
    }
}

static void set_limit(int res, long long v)
{
    struct rlimit rl = {(rlim_t)(v < 0 ? 0 : v), (rlim_t)(v < 0 ? 0 : v)};
    setrlimit(res, &rl);
}

static _Noreturn void child(const struct cfg *c, int in, int out, int err, int errpipe)
{
    char msg[300];
    int e;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    int cg = open("/sys/fs/cgroup/program/cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (cg < 0 || write(cg, "0", 1) != 1) {
        e = errno;
        goto fail_cg;
    }
    close(cg);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || dup2(errpipe, 3) < 0)
        _exit(127);
    errpipe = 3;
    fcntl(errpipe, F_SETFD, FD_CLOEXEC); /* closed by the exec: EOF means it ran */
    syscall(SYS_close_range, 4U, ~0U, 0U);
    /* as the native backend's (init.c); 0 from the host means "not given": left as is */
    if (c->nofile > 0)
        set_limit(RLIMIT_NOFILE, c->nofile);
    if (c->fsize > 0)
        set_limit(RLIMIT_FSIZE, c->fsize);
    /* no RLIMIT_NPROC: as in a native sandbox with a pids cgroup, the cgroup is the limit (an
     * rlimit at the same count would act first, and the cgroup could not say it was hit) */
    set_limit(RLIMIT_CORE, 0);
    set_limit(RLIMIT_MEMLOCK, 0);
    set_limit(RLIMIT_MSGQUEUE, 0);
    if (c->memory > 0)
        set_limit(RLIMIT_STACK, c->memory < (8 << 20) ? c->memory : 8 << 20);
    if (c->cpu_ms > 0) { /* a backstop per process behind the cgroup's total (main) */
        /* a second past the budget: the cgroup's look acts first, this only if it could not */
        struct rlimit rl = {(rlim_t)(c->cpu_ms + 999) / 1000 + 1,
                            (rlim_t)(c->cpu_ms + 999) / 1000 + 2};
        setrlimit(RLIMIT_CPU, &rl);
    }
    if (setgroups(0, NULL) < 0 || setresgid(c->uid, c->uid, c->uid) < 0 ||
        setresuid(c->uid, c->uid, c->uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        _exit(127);
    if (chdir(c->cwd) < 0) {
        snprintf(msg, sizeof(msg), "chdir %s: %s", c->cwd, strerror(errno));
        goto fail;
    }
    for (char *const *ev = c->envp; *ev; ev++) /* a bare name is looked up in the program's PATH */
        if (strncmp(*ev, "PATH=", 5) == 0)
            setenv("PATH", *ev + 5, 1);
    execvpe(c->argv[0], c->argv, c->envp);
    snprintf(msg, sizeof(msg), "exec %s: %s", c->argv[0], strerror(errno));
    goto fail;
fail_cg:
    snprintf(msg, sizeof(msg), "cgroup: %s", strerror(e));
fail:
    if (write(errpipe, msg, strlen(msg)) < 0)
        _exit(126);
    _exit(127);
}

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Send one buffer of what a pipe holds (a writer that never stops must not keep the loop
 * from the program's end); 1 while open, 0 at EOF. */
static int pump(int fd, int type)
{
    static char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) < 0 && errno == EINTR)
        ;
    if (n > 0 && send_frame(type, buf, (uint32_t)n) < 0)
        power_off();
    return n == 0 || (n < 0 && errno != EAGAIN) ? 0 : 1;
}

/* A number from one of the program's cgroup files: the value after "key " (key NULL: the
 * file's first number); -1 unknown. */
static long long cg_value(const char *file, const char *key)
{
    char path[96], buf[512];
    snprintf(path, sizeof(path), "/sys/fs/cgroup/program/%s", file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (!key)
        return strtoll(buf, NULL, 10);
    size_t kl = strlen(key);
    for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
            return strtoll(l + kl + 1, NULL, 10);
    return -1;
}

/* The program's CPU time so far (its cgroup: every process it made), in ms; -1 unknown. */
static long long cgroup_cpu_ms(void)
{
    long long us = cg_value("cpu.stat", "usage_usec");
    return us < 0 ? -1 : us / 1000;
}

int main(void)
{
    static char cfgbuf[TC_VM_FRAME_MAX];
    static unsigned char inbuf[TC_VM_FRAME_MAX];
    struct cfg c;
    unsigned char h[TC_VM_HDR];
    sigset_t mask;

    mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, NULL);
    /* the kernel gave us no stdin, stdout, stderr (no /dev/console in the initramfs): fill
     * 0-2, so that no descriptor opened below is taken for one */
    int nfd;
    while ((nfd = open("/dev/null", O_RDWR)) >= 0 && nfd < 3)
        ;
    if (nfd >= 3)
        close(nfd);
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    signal(SIGPIPE, SIG_IGN);
    load_modules();
    if ((port = open_port()) < 0)
        power_off();

    /* the filesystem: the host's /usr read-only, the workspace, our /etc */
    mount_9p("usr", "/usr", true, "loose");
    mount_9p("workspace", "/workspace", false, "none");
    static const char *const links[][2] = {
        {"usr/bin", "/bin"}, {"usr/sbin", "/sbin"}, {"usr/lib", "/lib"}, {"usr/lib64", "/lib64"}};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        struct stat st;
        char real[64];
        snprintf(real, sizeof(real), "/%s", links[i][0]);
        if (stat(real, &st) == 0 && symlink(links[i][0], links[i][1]) < 0 && errno != EEXIST)
            die(links[i][1], errno);
    }
    mkdir("/etc", 0755);
    mkdir("/run", 0755);
    mkdir("/tmp", 01777);
    mkdir("/dev/shm", 01777);
    write_file("/etc/passwd",
               "root:x:0:0:root:/root:/usr/sbin/nologin\n"
               "sandbox:x:1000:1000:sandbox:/workspace:/bin/bash\n"
               "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
               0644);
    write_file("/etc/group", "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n", 0644);
    write_file("/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n", 0644);
    write_file("/etc/resolv.conf", "", 0644);

    if (send_frame(TC_VM_READY, NULL, 0) < 0)
        power_off();
    if (tc_vm_read_all(port, h, sizeof(h)) < 0 || h[0] != TC_VM_CONFIG ||
        tc_vm_len(h) >= sizeof(cfgbuf) || tc_vm_read_all(port, cfgbuf, tc_vm_len(h)) < 0)
        die("no configuration", EPROTO);
    parse_cfg(cfgbuf, tc_vm_len(h), &c);

    char hosts[256], tmpopts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t%s\n",
             c.hostname);
    write_file("/etc/hosts", hosts, 0644);
    write_file("/etc/hostname", c.hostname, 0644);
    if (sethostname(c.hostname, strlen(c.hostname)) < 0)
        die("hostname", errno);
    snprintf(tmpopts, sizeof(tmpopts), "mode=1777,size=%lld", c.tmp_bytes > 0 ? c.tmp_bytes : 1);
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmpopts) < 0 ||
        mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmpopts) < 0)
        die("/tmp", errno);
    if (c.secrets) {
        mkdir("/run/secrets", 0500);
        mount_9p("secrets", "/run/secrets", true, "none");
    }
    mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL); /* the initramfs: ours, not its */
    program_cgroup(&c);

    int pin[2], pout[2], perr[2], pexec[2];
    if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0 ||
        pipe2(pexec, O_CLOEXEC) < 0)
        die("pipe", errno);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", errno);
    if (pid == 0)
        child(&c, pin[0], pout[1], perr[1], pexec[1]);
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    close(pexec[1]);
    char emsg[300];
    ssize_t en = read(pexec[0], emsg, sizeof(emsg) - 1);
    close(pexec[0]);
    if (en > 0) {
        waitpid(pid, NULL, 0);
        send_frame(TC_VM_FAIL, emsg, (uint32_t)en);
        power_off();
    }
    send_frame(TC_VM_STARTED, NULL, 0);
    nonblock(pin[1]);
    nonblock(pout[0]);
    nonblock(perr[0]);

    int in_fd = pin[1], out_fd = pout[0], err_fd = perr[0], status = 0;
    size_t in_len = 0, in_off = 0;
    bool in_eof = false, done = false, cpu_out = false;
    while (!done) {
        struct pollfd p[5] = {
            {.fd = (in_len == in_off && !in_eof) ? port : -1, .events = POLLIN},
            {.fd = in_len > in_off && in_fd >= 0 ? in_fd : -1, .events = POLLOUT},
            {.fd = out_fd, .events = POLLIN},
            {.fd = err_fd, .events = POLLIN},
            {.fd = sfd, .events = POLLIN},
        };
        /* the CPU budget is the cgroup's (every process of the program), looked at ten times
         * a second: when spent, the whole cgroup is killed */
        if (poll(p, 5, c.cpu_ms > 0 ? 100 : -1) < 0 && errno != EINTR) {
            status = SIGKILL; /* (a wait status: killed) we cannot watch it: it ends */
            break;
        }
        if (c.cpu_ms > 0 && !cpu_out && cgroup_cpu_ms() > c.cpu_ms) {
            int kfd = open("/sys/fs/cgroup/program/cgroup.kill", O_WRONLY | O_CLOEXEC);
            if (kfd < 0 || write(kfd, "1", 1) != 1)
                kill(-pid, SIGKILL); /* (no cgroup.kill: its process group at least) */
            if (kfd >= 0)
                close(kfd);
            cpu_out = true;
        }
        if (p[0].revents) {
            uint32_t n;
            if (tc_vm_read_all(port, h, sizeof(h)) < 0)
                in_eof = true; /* the host went away: the wall clock ends us */
            else if (h[0] == TC_VM_STDIN && (n = tc_vm_len(h)) <= sizeof(inbuf)) {
                if (tc_vm_read_all(port, inbuf, n) < 0)
                    in_eof = true;
                else {
                    in_len = n;
                    in_off = 0;
                }
            } else {
                in_eof = true; /* STDIN_EOF, or nothing we know */
            }
        }
        if (in_len > in_off && in_fd >= 0) {
            ssize_t w = write(in_fd, inbuf + in_off, in_len - in_off);
            if (w > 0)
                in_off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                in_off = in_len; /* the program closed its stdin: drop the rest */
        }
        if (in_eof && in_off == in_len && in_fd >= 0) {
            close(in_fd);
            in_fd = -1;
        }
        if (out_fd >= 0 && p[2].revents && pump(out_fd, TC_VM_STDOUT) == 0) {
            close(out_fd);
            out_fd = -1;
        }
        if (err_fd >= 0 && p[3].revents && pump(err_fd, TC_VM_STDERR) == 0) {
            close(err_fd);
            err_fd = -1;
        }
        if (p[4].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
            int st;
            pid_t r;
            while ((r = waitpid(-1, &st, WNOHANG)) > 0)
                if (r == pid) {
                    status = st;
                    done = true;
                }
        }
    }
    /* The program ended: as in the native backend, that ends the sandbox. Everything it left
     * is killed first (no writer is left), then what its pipes still hold goes out, then how
     * it ended. */
    kill(-1, SIGKILL);
    /* to EOF, or for 2 s at most (a task stuck in the kernel may hold a pipe) */
    for (int i = 0; i < 200 && (out_fd >= 0 || err_fd >= 0); i++) {
        struct pollfd d[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
        if (poll(d, 2, 10) < 0 && errno != EINTR)
            break;
        if (out_fd >= 0 && d[0].revents && pump(out_fd, TC_VM_STDOUT) == 0)
            out_fd = -1;
        if (err_fd >= 0 && d[1].revents && pump(err_fd, TC_VM_STDERR) == 0)
            err_fd = -1;
    }
    /* how it ended, and what this kernel saw of it (the launcher reports it as the native
     * backend reports its host cgroup's: killed_reason, cpu_ms, memory_peak_bytes) */
    struct tc_vm_exit xs = {
        .kind = WIFSIGNALED(status) ? 1 : 0,
        .value = WIFSIGNALED(status) ? (uint32_t)WTERMSIG(status) : (uint32_t)WEXITSTATUS(status),
        .oom = cg_value("memory.events", "oom_kill") > 0,
        .pids = cg_value("pids.events", "max") > 0,
    };
    long long cpu_us = cg_value("cpu.stat", "usage_usec"), peak = cg_value("memory.peak", NULL);
    xs.cpu_us = cpu_us > 0 ? (uint64_t)cpu_us : 0;
    xs.peak = peak > 0 ? (uint64_t)peak : 0;
    if (cpu_out) { /* the CPU budget ended it: said as the native backend's rlimit says it */
        xs.kind = 1;
        xs.value = SIGXCPU;
    }
    unsigned char x[TC_VM_EXIT_LEN];
    tc_vm_exit_pack(x, &xs);
    send_frame(TC_VM_EXIT, x, sizeof(x));
    power_off();
}
