#include "sandbox/uidrange.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/* mkdir -p with mode for the last component; parents get 0755. */
static int make_dirs(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf) || path[0] != '/')
        return -EINVAL;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* 1: taken by us, 0: held by someone else, <0: error. */
static int try_range(int dirfd, unsigned n, int *ret_fd)
{
    char name[32];
    snprintf(name, sizeof(name), "%u.lock", n);
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (fd < 0)
        return -errno;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        int e = errno;
        close(fd);
        return (e == EAGAIN || e == EACCES) ? 0 : -e;
    }
    *ret_fd = fd;
    return 1;
}

void tc_uidrange_note(int fd)
{
    /* right-aligned in a fixed width that covers any pid and the shorter lines older
     * launchers wrote: no ftruncate (on ext4 it frees the old block through the journal) */
    char pid[24];
    int len = snprintf(pid, sizeof(pid), "%10ld\n", (long)getpid());
    (void)!pwrite(fd, pid, (size_t)len, 0);
}

int tc_uidrange_acquire(const char *dir, unsigned nranges, unsigned hint, unsigned *ret_index,
                        int *ret_fd)
{
    struct stat st;
    int r;

    if (nranges == 0 || nranges > TC_UID_RANGES)
        return -EINVAL;
    if ((r = make_dirs(dir, 0700)) < 0)
        return r;
    _cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dirfd < 0)
        return -errno;
    /* Whoever can write here can hold every range (and starve the launchers) or swap a lock
     * file for another under a launcher: only we may. */
    if (fstat(dirfd, &st) < 0)
        return -errno;
    if (st.st_uid != geteuid() || (st.st_mode & 022))
        return -EPERM;
    for (unsigned i = 0; i < nranges; i++) {
        unsigned n = (hint + i) % nranges;
        int fd = -1;
        r = try_range(dirfd, n, &fd);
        if (r < 0)
            return r;
        if (r == 1) {
            *ret_index = n;
            *ret_fd = fd;
            return 0;
        }
    }
    return -EBUSY;
}
