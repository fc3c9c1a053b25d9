/* Host uid ranges for sandboxes, one per launcher, allocated machine-wide.
 *
 * Every sandbox (and every waiting shell, native or gVisor) runs as a host uid of its
 * launcher's range, so that nothing of one sandbox (files, RLIMIT_NPROC, signals) is shared
 * with another. Range n is the TC_UID_RANGE_SIZE uids from TC_UID_FIRST + n *
 * TC_UID_RANGE_SIZE. A launcher owns range n while it holds an exclusive open-file-description
 * lock (F_OFD_SETLK) on <registry>/<n>.lock: the kernel drops the lock when the last
 * descriptor of that open file goes away, so a launcher that exits or is killed (SIGKILL)
 * frees its range without any clean-up, and no two live launchers on the host, of one server
 * or of several, can hold the same range. The registry defaults to TC_UID_REGISTRY; every
 * launcher of the host must use the same directory (TOOLCAGE_UID_REGISTRY in the launcher's
 * environment overrides it, e.g. a directory shared by containers). */
#pragma once

#include <sys/types.h>

#define TC_UID_FIRST      1000000u
#define TC_UID_RANGE_SIZE 1024u /* the launcher's MAX_SLOTS */
#define TC_UID_RANGES     2000u /* uids 1000000 .. 3047999 */
#define TC_UID_REGISTRY   "/run/toolcage/uids"

/* Take the first free range of nranges (<= TC_UID_RANGES), starting the search at hint %
 * nranges, in directory dir (created 0700 with its parents if missing; it must belong to us
 * and be writable by nobody else). On success *ret_index is the range and *ret_fd the
 * O_CLOEXEC descriptor that holds it (close it to free the range). -EBUSY when every range
 * is taken, -EPERM when dir is not safe, other -errno from the file system. */
int tc_uidrange_acquire(const char *dir, unsigned nranges, unsigned hint, unsigned *ret_index,
                        int *ret_fd);
/* Writes our pid into the held range's file (fd from acquire), for people: a write that can
 * wait for the file system's journal (0.1-0.8 ms on ext4 here), so the launcher does it
 * after its start, not on its first call's path. */
void tc_uidrange_note(int fd);

/* First uid of range index. */
static inline uid_t tc_uidrange_first(unsigned index)
{
    return (uid_t)(TC_UID_FIRST + index * TC_UID_RANGE_SIZE);
}
