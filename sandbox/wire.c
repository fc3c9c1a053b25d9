#include "sandbox/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define REQUIRED_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

int tc_wire_memfd_new(const void *payload, size_t len)
{
    _cleanup_close_ int fd = memfd_create("tc-msg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int r;

    if (fd < 0)
        return -errno;
    if ((r = tc_write_all(fd, payload, len)) < 0)
        return r;
    if (fcntl(fd, F_ADD_SEALS, REQUIRED_SEALS) < 0)
        return -errno;
    return tc_steal_fd(&fd);
}

int tc_wire_send(int sock, enum tc_wire_type type, const char *id, const void *payload, size_t len)
{
    struct tc_wire_hdr h = {.magic = TC_WIRE_MAGIC, .type = (uint32_t)type, .len = len};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    _cleanup_close_ int fd = -1;

    if (len > TC_WIRE_MAX_PAYLOAD)
        return -E2BIG;
    if (id) {
        size_t n = strnlen(id, sizeof(h.id));
        if (n >= sizeof(h.id))
            return -EINVAL;
        memcpy(h.id, id, n);
    }
    if (len > 0) {
        fd = tc_wire_memfd_new(payload, len);
        if (fd < 0)
            return fd;
        memset(&cm, 0, sizeof(cm));
        msg.msg_control = cm.buf;
        msg.msg_controllen = sizeof(cm.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        return n == (ssize_t)sizeof(h) ? 0 : -EIO;
    }
}

static void close_cmsg_fds(struct msghdr *msg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            close(fd);
        }
    }
}

int tc_wire_memfd_read(int fd, uint64_t len, char **ret)
{
    struct stat st;
    int seals;
    _cleanup_free_ char *buf = NULL;
    size_t off = 0;

    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != len)
        return -EBADMSG;
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & REQUIRED_SEALS) != REQUIRED_SEALS)
        return -EBADMSG;
    buf = malloc(len + 1);
    if (!buf)
        return -ENOMEM;
    while (off < len) {
        ssize_t n = pread(fd, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EBADMSG;
        off += (size_t)n;
    }
    buf[len] = '\0';
    *ret = TC_STEAL(buf);
    return 0;
}

int tc_wire_recv(int sock, struct tc_wire_hdr *ret_hdr, char **ret_payload)
{
    struct tc_wire_hdr h;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } cm;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
    _cleanup_close_ int fd = -1;
    char *payload = NULL;
    ssize_t n;
    int nfds = 0, r;

    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -EPIPE;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            nfds += (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            if (nfds == 1)
                memcpy(&fd, CMSG_DATA(c), sizeof(int));
        } else {
            nfds = 99; /* credentials or anything else: not ours */
        }
    }
    if (nfds > 1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (nfds > 1) {
            fd = -1;
            close_cmsg_fds(&msg);
        }
        return -EBADMSG;
    }
    if ((size_t)n != sizeof(h) || h.magic != TC_WIRE_MAGIC || h.type == 0 ||
        h.type >= TC_WIRE_TYPE_MAX_ || h.len > TC_WIRE_MAX_PAYLOAD ||
        memchr(h.id, '\0', sizeof(h.id)) == NULL || (h.len > 0) != (fd >= 0))
        return -EBADMSG;
    if (h.len > 0 && (r = tc_wire_memfd_read(fd, h.len, &payload)) < 0)
        return r;
    *ret_hdr = h;
    *ret_payload = payload;
    return 0;
}

long tc_recv_fd(int sock, int *ret_fd, void *data, size_t len)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } cm;
    struct iovec iov = {.iov_base = data, .iov_len = len};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
    ssize_t n;
    int fd = -1;

    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int x;
            memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (fd < 0)
                fd = x;
            else
                close(x);
        }
    }
    *ret_fd = fd;
    return n;
}
