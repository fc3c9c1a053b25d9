/* Removing a tree of the store (image/image.h, tc_image_rm_tree): apart from the layers'
 * unpacking (layer.c), so that what only lists, finds or removes images (store.c; the lean
 * `toolcage exec`) does not need libarchive. */
#include "image/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* Remove name under dirfd, a tree of any depth too (a layer may nest directories as deep as
 * it likes): down with openat(O_NOFOLLOW), up with "..", the names on the way kept in a
 * buffer of our own (never a path the kernel resolves). Coming back up, the reading resumes
 * where it went down (the entry's d_off: a hash cookie on ext4 and xfs, stable while entries
 * go), and a last pass from the start sees the directory empty. On tmpfs and ramfs an offset
 * is an entry's index (before Linux 6.6), which a seek walks to from the start: there every
 * pass starts at 0, which costs nothing more, since removed entries leave the list. Either
 * way the work is linear in the tree's size. The store is locked and root's: nothing else
 * renames in it meanwhile. */
int tc_image_rm_tree(int dirfd, const char *name)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    int cur = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cur < 0)
        return -errno;
    char *stack = NULL; /* "a\0b\0c\0": the directories we went down through */
    off_t *offs = NULL; /* where to resume reading each of their parents */
    size_t len = 0, cap = 0, depth = 0, ocap = 0;
    off_t resume = 0;
    int r = 0;
    struct statfs sfs;
    bool index_offsets =
        fstatfs(cur, &sfs) < 0 || sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
    for (;;) {
        /* one pass over cur from resume: files go; the first directory is gone down into */
        bool any = false, down = false, from_start = resume == 0;
        int dfd = lseek(cur, resume, SEEK_SET) < 0 ? -1 : dup(cur);
        DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
        if (!d) {
            if (dfd >= 0)
                close(dfd);
            r = -errno;
            break;
        }
        struct dirent *de;
        while (r == 0 && !down && (de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            any = true;
            if (unlinkat(cur, de->d_name, 0) == 0 || errno == ENOENT)
                continue;
            if (errno != EISDIR && errno != EPERM) {
                r = -errno;
                break;
            }
            size_t n = strlen(de->d_name) + 1;
            if (len + n > cap || depth + 1 > ocap) {
                size_t ncap = cap ? cap * 2 : 4096, nocap = ocap ? ocap * 2 : 256;
                while (ncap < len + n)
                    ncap *= 2;
                char *ns = realloc(stack, ncap);
                if (ns)
                    stack = ns, cap = ncap;
                off_t *no = ns ? realloc(offs, nocap * sizeof(*offs)) : NULL;
                if (!no) {
                    r = -ENOMEM;
                    break;
                }
                offs = no;
                ocap = nocap;
            }
            int sub = openat(cur, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                r = -errno;
                break;
            }
            memcpy(stack + len, de->d_name, n);
            len += n;
            offs[depth++] = de->d_off;
            close(cur);
            cur = sub;
            resume = 0;
            down = true;
        }
        closedir(d);
        if (r < 0)
            break;
        if (down)
            continue;
        if (any || !from_start) { /* once more from the start: is it empty now? */
            resume = 0;
            continue;
        }
        /* cur is empty: up, and remove it */
        if (len == 0) {
            close(cur);
            cur = -1;
            if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                r = -errno;
            break;
        }
        int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (up < 0) {
            r = -errno;
            break;
        }
        close(cur);
        cur = up;
        size_t last = len - 1;
        while (last > 0 && stack[last - 1] != '\0')
            last--;
        if (unlinkat(cur, stack + last, AT_REMOVEDIR) < 0 && errno != ENOENT) {
            r = -errno;
            break;
        }
        len = last;
        resume = index_offsets ? 0 : offs[--depth];
        if (index_offsets)
            depth--;
    }
    if (cur >= 0)
        close(cur);
    free(stack);
    free(offs);
    return r;
}
