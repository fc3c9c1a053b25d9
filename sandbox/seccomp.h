/* The sandbox seccomp policy: default allow, deny the syscalls a container without
 * capabilities has no business making (after Docker's default profile). Denied calls
 * are reported to the launcher through a user-notification listener (SECCOMP_RET_USER_NOTIF)
 * so each attempt can be counted by name; without kernel support they fail with EPERM. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <linux/filter.h>

struct tc_seccomp_prog {
    struct sock_fprog prog; /* filter->len instructions, malloc'ed */
    bool notify;            /* the filter uses SECCOMP_RET_USER_NOTIF */
};

/* Compile the policy once (launcher start). notify=false forces the EPERM variant. */
int tc_seccomp_build(bool notify, struct tc_seccomp_prog *ret);
void tc_seccomp_free(struct tc_seccomp_prog *p);
/* True when the kernel + libseccomp support user notification. */
bool tc_seccomp_notify_supported(void);

/* Answer one pending notification on listener fd. On a denied call the syscall name is
 * stored in name (true returned in *ret_denied); allowed edge cases (personality queries)
 * continue. 0, -ENOENT (target gone, nothing to count), or -errno. */
int tc_seccomp_handle(int listener, char *name, size_t namelen, bool *ret_denied);

/* The launcher's helpers (the egress proxy, which parses bytes from sandboxed code): the same
 * denylist with EPERM, plus execve/execveat and raw/packet sockets. Installs in the calling
 * process, which must still be single-threaded and have no_new_privs. 0 or -errno. */
int tc_seccomp_install_helper(void);
