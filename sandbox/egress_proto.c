#include "sandbox/egress_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/wire.h"

int tc_eg_send(int sock, enum tc_eg_type type, uint64_t handle, const char *payload, size_t len,
               int fd)
{
    struct tc_eg_hdr h = {.magic = TC_EG_MAGIC,
                          .type = (uint32_t)type,
                          .handle = handle,
                          .len = (uint32_t)len,
                          .has_fd = fd >= 0};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } cm;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    _cleanup_close_ int mfd = -1;
    int fds[2], nfds = 0;
    ssize_t n;

    if (len > TC_EG_MAX_PAYLOAD)
        return -E2BIG;
    if (len > 0) {
        mfd = tc_wire_memfd_new(payload, len);
        if (mfd < 0)
            return mfd;
        fds[nfds++] = mfd;
    }
    if (fd >= 0)
        fds[nfds++] = fd;
    if (nfds > 0) {
        memset(&cm, 0, sizeof(cm));
        msg.msg_control = cm.buf;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL | (type == TC_EG_ATTEMPT ? MSG_DONTWAIT : 0));
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return n == (ssize_t)sizeof(h) ? 0 : -EIO;
}

int tc_eg_recv(int sock, struct tc_eg_hdr *ret_hdr, char **ret_payload, int *ret_fd)
{
    struct tc_eg_hdr h;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } cm;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
    int fds[4] = {-1, -1, -1, -1}, nfds = 0, r = 0;
    bool foreign = false;
    char *payload = NULL;
    ssize_t n;

    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -EPIPE;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int x;
                memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (nfds < 4)
                    fds[nfds++] = x;
                else
                    close(x);
            }
        } else {
            foreign = true;
        }
    }
    if (foreign || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n != sizeof(h) ||
        h.magic != TC_EG_MAGIC || h.type == 0 || h.type >= TC_EG_TYPE_MAX_ ||
        h.len > TC_EG_MAX_PAYLOAD || h.has_fd > 1 || nfds != (h.len > 0 ? 1 : 0) + (int)h.has_fd ||
        h.handle == 0)
        r = -EBADMSG;
    if (r == 0 && h.len > 0)
        r = tc_wire_memfd_read(fds[0], h.len, &payload);
    if (r == 0) {
        *ret_hdr = h;
        *ret_payload = payload;
        *ret_fd = h.has_fd ? fds[nfds - 1] : -1;
        if (h.has_fd)
            fds[nfds - 1] = -1;
    }
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return r;
}
