/* toolcage-vmrun: the host side of a microvm guest (docs/sandbox.md, microvm backend).
 *
 * The launcher runs it as the program of a native sandbox (namespaces, cgroup, seccomp,
 * rlimits: sandbox/microvm.c rewrites the call's spec), so qemu and everything it does stay
 * in that sandbox. It starts qemu (its own seccomp on: -sandbox) with the kernel and
 * initramfs in --dir, the host's /usr read-only and the sandbox's /workspace over 9p, no
 * network device, and one virtio-serial port on a socket it holds (vm_proto.h). It sends the
 * program's configuration (its own argv after "--", its environment, cwd and hostname, the
 * limits from its options) when the guest says READY, relays stdin to the guest and the
 * guest's stdout and stderr to its own, and ends as the guest's program ended: the same exit
 * code, or killed by the same signal. qemu's own messages are shown only when the guest gives
 * no status (they would otherwise be the program's stderr). What the guest's kernel saw of the
 * program (its cgroup: a memory kill, the pids limit, CPU time, peak memory) goes to the
 * verdict pipe at fd 3 when the sandbox's PID 1 gave one (vm_proto.h, TC_VM_VERDICT_FMT). */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm_proto.h"

#define QEMU "/usr/bin/qemu-system-x86_64"

extern char **environ;

struct opts {
    const char *dir, *accel, *guest_mb, *cpus, *memory, *pids, *nofile, *fsize, *cpu_ms, *tmp_bytes;
    bool secrets;
    char **argv;
};

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: toolcage-vmrun --dir DIR --accel tcg|kvm --guest-mb N --cpus N "
                    "[--memory B --pids N --nofile N --fsize B --cpu-ms MS --tmp-bytes B "
                    "--secrets] -- PROGRAM [ARG...]\n");
    exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        const char **dst = !strcmp(a, "--dir")         ? &o->dir
                           : !strcmp(a, "--accel")     ? &o->accel
                           : !strcmp(a, "--guest-mb")  ? &o->guest_mb
                           : !strcmp(a, "--cpus")      ? &o->cpus
                           : !strcmp(a, "--memory")    ? &o->memory
                           : !strcmp(a, "--pids")      ? &o->pids
                           : !strcmp(a, "--nofile")    ? &o->nofile
                           : !strcmp(a, "--fsize")     ? &o->fsize
                           : !strcmp(a, "--cpu-ms")    ? &o->cpu_ms
                           : !strcmp(a, "--tmp-bytes") ? &o->tmp_bytes
                                                       : NULL;
        if (!strcmp(a, "--secrets")) {
            o->secrets = true;
            continue;
        }
        if (!dst || i + 1 >= argc)
            usage();
        *dst = argv[++i];
    }
    if (i + 1 >= argc || !o->dir || !o->accel || !o->guest_mb || !o->cpus)
        usage();
    o->argv = argv + i + 1;
}

static _Noreturn void exec_qemu(const struct opts *o, int sock, int errfd)
{
    static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
    char kernel[512], initrd[512], append[256], machine[128];
    bool kvm = strcmp(o->accel, "kvm") == 0;
    snprintf(kernel, sizeof(kernel), "%s/kernel", o->dir); /* a bzImage, or an ELF (PVH) */
    snprintf(initrd, sizeof(initrd), "%s/initrd", o->dir);
    /* TCG: the kernel cannot calibrate the TSC against microvm's timers; tell it a rate (it
     * only paces the boot's delays). KVM has kvmclock. */
    snprintf(append, sizeof(append), "quiet loglevel=0 panic=-1 rdinit=/init%s",
             kvm ? "" : " tsc_early_khz=2000000");
    snprintf(machine, sizeof(machine), "microvm,pit=on,pic=on,rtc=on");
    const char *argv[64];
    int n = 0;
    argv[n++] = QEMU;
    argv[n++] = "-M";
    argv[n++] = machine;
    argv[n++] = "-accel";
    argv[n++] = kvm ? "kvm" : "tcg,tb-size=64";
    if (kvm) {
        argv[n++] = "-cpu";
        argv[n++] = "host";
    }
    argv[n++] = "-m";
    argv[n++] = o->guest_mb;
    argv[n++] = "-smp";
    argv[n++] = o->cpus;
    argv[n++] = "-nodefaults";
    argv[n++] = "-no-user-config";
    argv[n++] = "-display";
    argv[n++] = "none";
    argv[n++] = "-net";
    argv[n++] = "none";
    argv[n++] = "-no-reboot";
    argv[n++] = "-sandbox";
    argv[n++] = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";
    argv[n++] = "-kernel";
    argv[n++] = kernel;
    argv[n++] = "-initrd";
    argv[n++] = initrd;
    argv[n++] = "-append";
    argv[n++] = append;
    argv[n++] = "-chardev";
    argv[n++] = "socket,id=tc,fd=3";
    argv[n++] = "-device";
    argv[n++] = "virtio-serial-device";
    argv[n++] = "-device";
    argv[n++] = "virtserialport,chardev=tc,name=" TC_VM_PORT;
    argv[n++] = "-fsdev";
    argv[n++] = "local,id=usr,path=/usr,security_model=none,readonly=on,multidevs=remap";
    argv[n++] = "-device";
    argv[n++] = "virtio-9p-device,fsdev=usr,mount_tag=usr";
    argv[n++] = "-fsdev";
    argv[n++] = "local,id=ws,path=/workspace,security_model=none,multidevs=remap";
    argv[n++] = "-device";
    argv[n++] = "virtio-9p-device,fsdev=ws,mount_tag=workspace";
    if (o->secrets) {
        argv[n++] = "-fsdev";
        argv[n++] = "local,id=sec,path=/run/secrets,security_model=none,readonly=on";
        argv[n++] = "-device";
        argv[n++] = "virtio-9p-device,fsdev=sec,mount_tag=secrets";
    }
    argv[n] = NULL;

    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(errfd, 2) < 0 ||
        dup2(sock, 3) < 0 || syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
        _exit(125);
    execve(QEMU, (char *const *)argv, envp);
    fprintf(stderr, "exec %s: %s\n", QEMU, strerror(errno));
    _exit(125);
}

/* ---- output to the guest: one buffer, written as the socket takes it ---- */

static unsigned char *wbuf;
static size_t wlen, woff, wcap;

static void queue(int type, const void *data, uint32_t len)
{
    if (wlen + TC_VM_HDR + len > wcap) {
        wcap = (wlen + TC_VM_HDR + len) * 2;
        wbuf = realloc(wbuf, wcap);
        if (!wbuf)
            _exit(125);
    }
    tc_vm_hdr(wbuf + wlen, type, len);
    if (len)
        memcpy(wbuf + wlen + TC_VM_HDR, data, len);
    wlen += TC_VM_HDR + len;
}

static void queue_config(const struct opts *o)
{
    char cwd[4096], host[256], kv[128];
    size_t cap = 1 << 16, len = 0;
    char *c = malloc(cap);
#define PUT(s)                                                                                     \
    do {                                                                                           \
        size_t l_ = strlen(s) + 1;                                                                 \
        while (len + l_ > cap && (c = realloc(c, cap *= 2)))                                       \
            ;                                                                                      \
        if (!c || len + l_ >= TC_VM_FRAME_MAX)                                                     \
            goto big;                                                                              \
        memcpy(c + len, s, l_);                                                                    \
        len += l_;                                                                                 \
    } while (0)
    if (!c)
        _exit(125);
    if (!getcwd(cwd, sizeof(cwd)))
        snprintf(cwd, sizeof(cwd), "/workspace");
    if (gethostname(host, sizeof(host)) < 0)
        snprintf(host, sizeof(host), "sandbox");
    host[sizeof(host) - 1] = '\0';
    const char *keys[][2] = {{"memory", o->memory}, {"pids", o->pids},
                             {"nofile", o->nofile}, {"fsize", o->fsize},
                             {"cpu_ms", o->cpu_ms}, {"tmp_bytes", o->tmp_bytes}};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (keys[i][1]) {
            snprintf(kv, sizeof(kv), "%s=%s", keys[i][0], keys[i][1]);
            PUT(kv);
        }
    PUT("uid=1000");
    snprintf(kv, sizeof(kv), "secrets=%d", o->secrets ? 1 : 0);
    PUT(kv);
    {
        char *s;
        if (asprintf(&s, "cwd=%s", cwd) < 0)
            _exit(125);
        PUT(s);
        free(s);
        if (asprintf(&s, "hostname=%s", host) < 0)
            _exit(125);
        PUT(s);
        free(s);
    }
    /* counts, then exactly that many strings: no marker can be mistaken for an argument */
    size_t argc = 0, envc = 0;
    while (o->argv[argc])
        argc++;
    while (environ && environ[envc])
        envc++;
    snprintf(kv, sizeof(kv), "argc=%zu", argc);
    PUT(kv);
    snprintf(kv, sizeof(kv), "envc=%zu", envc);
    PUT(kv);
    for (size_t i = 0; i < argc; i++)
        PUT(o->argv[i]);
    for (size_t i = 0; i < envc; i++)
        PUT(environ[i]);
    queue(TC_VM_CONFIG, c, (uint32_t)len);
    free(c);
    return;
big:
    fprintf(stderr, "microvm: the program's arguments and environment exceed %u bytes\n",
            TC_VM_FRAME_MAX);
    exit(126);
#undef PUT
}

static pid_t qemu_pid;

static int qfd = -1, verdict_fd = -1;

/* A signal whose default action ends the process (a stop signal would leave us stopped, one
 * ignored by default would do nothing: those become exit 128 + n). */
static bool terminates(int sig)
{
    switch (sig) {
    case SIGSTOP:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
    case SIGCONT:
    case SIGCHLD:
    case SIGURG:
    case SIGWINCH:
        return false;
    default:
        return sig > 0 && sig < 32;
    }
}

static _Noreturn void finish(int kind, int val, const char *why, char *qerr, size_t qlen)
{
    if (qemu_pid > 0) {
        kill(qemu_pid, SIGKILL);
        waitpid(qemu_pid, NULL, 0);
    }
    if (why) {
        /* qemu is gone: what it said before is all in the pipe now */
        while (qfd >= 0 && qerr && qlen < 8192) {
            ssize_t n = read(qfd, qerr + qlen, 8192 - qlen);
            if (n <= 0)
                break;
            qlen += (size_t)n;
        }
        fprintf(stderr, "microvm: %s\n", why);
        if (qlen)
            fprintf(stderr, "%.*s", (int)qlen, qerr);
        exit(125);
    }
    if (kind == 1 && terminates(val)) {
        signal(val, SIG_DFL);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, val);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        prctl(PR_SET_DUMPABLE, 0); /* the guest picks the signal: no core of ours for it */
        raise(val);
    }
    exit(kind == 1 ? 128 + (val & 0x7f) : val & 0xff);
}

int main(int argc, char **argv)
{
    struct opts o;
    int sp[2], qe[2];
    static unsigned char rbuf[TC_VM_HDR + TC_VM_FRAME_MAX];
    static char qerr[8192];
    static unsigned char inb[65536];
    size_t rlen = 0, qlen = 0;
    bool ready = false, in_eof = false;

    parse(argc, argv, &o);
    signal(SIGPIPE, SIG_IGN);
    struct stat vst; /* the verdict pipe: ours only, not qemu's */
    if (fstat(3, &vst) == 0 && S_ISFIFO(vst.st_mode) && fcntl(3, F_SETFD, FD_CLOEXEC) == 0)
        verdict_fd = 3;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || pipe2(qe, O_CLOEXEC) < 0) {
        perror("microvm: socketpair");
        return 125;
    }
    qemu_pid = fork();
    if (qemu_pid < 0) {
        perror("microvm: fork");
        return 125;
    }
    if (qemu_pid == 0)
        exec_qemu(&o, sp[1], qe[1]);
    close(sp[1]);
    close(qe[1]);
    int s = sp[0];
    qfd = qe[0];
    fcntl(s, F_SETFL, O_NONBLOCK);

    for (;;) {
        struct pollfd p[3] = {
            {.fd = s, .events = POLLIN | (woff < wlen ? POLLOUT : 0)},
            {.fd = ready && !in_eof && woff == wlen ? 0 : -1, .events = POLLIN},
            {.fd = qfd, .events = POLLIN},
        };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            finish(0, 0, "poll failed", qerr, qlen);
        }
        if (p[2].revents) {
            ssize_t n = read(qfd, qerr + qlen, sizeof(qerr) - qlen);
            if (n <= 0 || qlen + (size_t)n >= sizeof(qerr)) {
                if (n > 0)
                    qlen += (size_t)n;
                close(qfd);
                qfd = -1; /* qemu ended (or said too much): the socket's end tells */
            } else {
                qlen += (size_t)n;
            }
        }
        if (p[1].revents) {
            ssize_t n = read(0, inb, sizeof(inb));
            if (n > 0)
                queue(TC_VM_STDIN, inb, (uint32_t)n);
            else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                in_eof = true;
                queue(TC_VM_STDIN_EOF, NULL, 0);
            }
        }
        if (p[0].revents & POLLOUT && woff < wlen) {
            ssize_t w = write(s, wbuf + woff, wlen - woff);
            if (w > 0 && (woff += (size_t)w) == wlen)
                woff = wlen = 0;
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t n = read(s, rbuf + rlen, sizeof(rbuf) - rlen);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            finish(0, 0, "the guest ended without a status", qerr, qlen);
        if (n > 0)
            rlen += (size_t)n;
        size_t off = 0;
        while (rlen - off >= TC_VM_HDR) {
            unsigned char *h = rbuf + off;
            uint32_t len = tc_vm_len(h);
            if (len > TC_VM_FRAME_MAX)
                finish(0, 0, "the guest broke the protocol", NULL, 0);
            if (rlen - off < TC_VM_HDR + len)
                break;
            unsigned char *d = h + TC_VM_HDR;
            switch (h[0]) {
            case TC_VM_READY:
                if (!ready)
                    queue_config(&o);
                ready = true;
                break;
            case TC_VM_STARTED:
                break;
            case TC_VM_STDOUT:
            case TC_VM_STDERR:
                if (tc_vm_write_all(h[0] == TC_VM_STDOUT ? 1 : 2, d, len) < 0 && errno != EPIPE)
                    finish(0, 0, "output failed", NULL, 0);
                break;
            case TC_VM_EXIT: {
                struct tc_vm_exit x;
                if (len != TC_VM_EXIT_LEN)
                    finish(0, 0, "the guest broke the protocol", NULL, 0);
                tc_vm_exit_unpack(d, &x);
                if (verdict_fd >= 0) { /* one write, under PIPE_BUF: whole or not at all */
                    char v[96];
                    int vn =
                        snprintf(v, sizeof(v), TC_VM_VERDICT_FMT, x.oom ? 1u : 0u, x.pids ? 1u : 0u,
                                 (unsigned long long)x.cpu_us, (unsigned long long)x.peak);
                    /* (a failure leaves the launcher with qemu's figures; nothing to say on
                     * the program's stderr) */
                    if (vn > 0 && (size_t)vn < sizeof(v))
                        (void)!write(verdict_fd, v, (size_t)vn);
                }
                finish(x.kind == 1 ? 1 : 0, (int)(x.value & 0xffff), NULL, NULL, 0);
            }
            case TC_VM_FAIL: {
                int l = (int)(len > 512 ? 512 : len);
                fprintf(stderr, "%.*s\n", l, (const char *)d);
                if (qemu_pid > 0) {
                    kill(qemu_pid, SIGKILL);
                    waitpid(qemu_pid, NULL, 0);
                }
                exit(len >= 5 && memcmp(d, "exec ", 5) == 0 ? 127 : 125);
            }
            default:
                finish(0, 0, "the guest broke the protocol", NULL, 0);
            }
            off += TC_VM_HDR + len;
        }
        if (off > 0) { /* (a frame still arriving stays where it is) */
            memmove(rbuf, rbuf + off, rlen - off);
            rlen -= off;
        }
    }
}
