#include "sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "common/util.h"

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* Denied outright: kernel-global state, other namespaces, other processes' memory,
 * kernel attack surface that containers do not need. */
static const char *const denied[] = {
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "iopl",
    "ioperm",
    "swapon",
    "swapoff",
    "reboot",
    "settimeofday",
    "stime",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "acct",
    "open_by_handle_at",
    "name_to_handle_at",
    "mbind",
    "set_mempolicy",
    "migrate_pages",
    "move_pages",
    "lookup_dcookie",
    "quotactl",
    "quotactl_fd",
    "nfsservctl",
    "vhangup",
    "syslog",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "fanotify_init",
    "vm86",
    "vm86old",
};

static const uint64_t clone_ns_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                          CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                          CLONE_NEWNET};

bool tc_seccomp_notify_supported(void)
{
    return seccomp_api_get() >= 5;
}

static int add_rules(scmp_filter_ctx ctx, uint32_t act)
{
    int r;

    for (size_t i = 0; i < TC_ARRAY_SIZE(denied); i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue;
        r = seccomp_rule_add(ctx, act, nr, 0);
        if (r < 0 && r != -EDOM)
            return r;
    }
    /* clone3 passes its flags in memory that a filter cannot read: make libc fall back to clone. */
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (r < 0)
        return r;
    for (size_t i = 0; i < TC_ARRAY_SIZE(clone_ns_flags); i++) {
        r = seccomp_rule_add(ctx, act, SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]));
        if (r < 0)
            return r;
    }
    /* ioctl's request is an int: compare the low 32 bits only. */
    static const uint64_t bad_ioctls[] = {TIOCSTI, TIOCLINUX};
    for (size_t i = 0; i < TC_ARRAY_SIZE(bad_ioctls); i++) {
        r = seccomp_rule_add(ctx, act, SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, bad_ioctls[i]));
        if (r < 0)
            return r;
    }
    /* socket(): only AF_UNIX, AF_INET, AF_INET6; no raw or packet sockets. */
    for (uint64_t fam = 0; fam <= AF_INET6; fam++) {
        if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6)
            continue;
        r = seccomp_rule_add(ctx, act, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, fam, 0));
        if (r < 0)
            return r;
    }
    r = seccomp_rule_add(ctx, act, SCMP_SYS(socket), 1,
                         SCMP_A0(SCMP_CMP_GT, (uint64_t)AF_INET6, 0));
    if (r < 0)
        return r;
    static const uint64_t bad_types[] = {SOCK_RAW, SOCK_PACKET};
    for (size_t i = 0; i < TC_ARRAY_SIZE(bad_types); i++) {
        r = seccomp_rule_add(ctx, act, SCMP_SYS(socket), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfULL, bad_types[i]));
        if (r < 0)
            return r;
    }
    /* personality: with notify the launcher lets the harmless values through (see
     * tc_seccomp_handle); without it, any bit outside PER_LINUX32|UNAME26 is refused. */
    if (act == SCMP_ACT_NOTIFY)
        return seccomp_rule_add(ctx, act, SCMP_SYS(personality), 0);
    for (int bit = 0; bit < 32; bit++) {
        uint64_t m = 1ULL << bit;
        if (m == PER_LINUX32 || m == UNAME26)
            continue;
        r = seccomp_rule_add(ctx, act, SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, m, m));
        if (r < 0)
            return r;
    }
    return seccomp_rule_add(ctx, act, SCMP_SYS(personality), 1,
                            SCMP_A0(SCMP_CMP_GT, 0xffffffffULL, 0));
}

int tc_seccomp_build(bool notify, struct tc_seccomp_prog *ret)
{
    scmp_filter_ctx ctx;
    _cleanup_close_ int mfd = -1;
    struct stat st;
    struct sock_filter *insns = NULL;
    int r;

    if (notify && !tc_seccomp_notify_supported())
        notify = false;
    ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -ENOMEM;
    /* Only the native ABI: i386 (int 0x80) and x32 calls kill the process. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0)
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* the child sets it itself */
    if (r == 0)
        r = add_rules(ctx, notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM));
    if (r < 0)
        goto out;
    mfd = memfd_create("tc-bpf", MFD_CLOEXEC);
    if (mfd < 0) {
        r = -errno;
        goto out;
    }
    r = seccomp_export_bpf(ctx, mfd);
    if (r < 0)
        goto out;
    if (fstat(mfd, &st) < 0) {
        r = -errno;
        goto out;
    }
    if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
        st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
        r = -EINVAL;
        goto out;
    }
    insns = malloc((size_t)st.st_size);
    if (!insns) {
        r = -ENOMEM;
        goto out;
    }
    if (pread(mfd, insns, (size_t)st.st_size, 0) != st.st_size) {
        free(insns);
        r = -EIO;
        goto out;
    }
    ret->prog.filter = insns;
    ret->prog.len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
    ret->notify = notify;
    r = 0;
out:
    seccomp_release(ctx);
    return r;
}

void tc_seccomp_free(struct tc_seccomp_prog *p)
{
    if (!p)
        return;
    free(p->prog.filter);
    p->prog.filter = NULL;
    p->prog.len = 0;
}

static bool personality_harmless(uint64_t v)
{
    return v == 0 || v == PER_LINUX32 || v == UNAME26 || v == (PER_LINUX32 | UNAME26) ||
           v == 0xffffffffULL;
}

int tc_seccomp_handle(int listener, char *name, size_t namelen, bool *ret_denied)
{
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    char *sname;

    memset(&req, 0, sizeof(req));
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
        return -errno;
    memset(&resp, 0, sizeof(resp));
    resp.id = req.id;
    *ret_denied = true;
    if (req.data.nr == SCMP_SYS(personality) && personality_harmless(req.data.args[0])) {
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE; /* value argument: no TOCTOU */
        *ret_denied = false;
    } else {
        resp.error = -EPERM;
    }
    sname = seccomp_syscall_resolve_num_arch(req.data.arch, req.data.nr);
    if (namelen > 0) {
        if (sname) {
            size_t n = strnlen(sname, namelen - 1);
            memcpy(name, sname, n);
            name[n] = '\0';
        } else {
            snprintf(name, namelen, "syscall_%d", req.data.nr);
        }
    }
    free(sname);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0)
        return errno == ENOENT ? -ENOENT : -errno;
    return 0;
}

int tc_seccomp_install_helper(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int r;

    if (!ctx)
        return -ENOMEM;
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    for (size_t i = 0; r == 0 && i < TC_ARRAY_SIZE(denied); i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue;
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (r == -EDOM)
            r = 0;
    }
    /* a helper never starts a program, and never needs a namespace of its own */
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execve), 0);
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execveat), 0);
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    for (size_t i = 0; r == 0 && i < TC_ARRAY_SIZE(clone_ns_flags); i++)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]));
    /* no raw or packet sockets (netlink stays: glibc's getaddrinfo asks it for addresses) */
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, (uint64_t)AF_PACKET, 0));
    static const uint64_t bad_types[] = {SOCK_RAW, SOCK_PACKET};
    for (size_t i = 0; r == 0 && i < TC_ARRAY_SIZE(bad_types); i++)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfULL, bad_types[i]));
    if (r == 0)
        r = seccomp_load(ctx);
    seccomp_release(ctx);
    return r;
}
