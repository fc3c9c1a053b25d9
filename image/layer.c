/* One image layer applied onto a root (image.h, tc_layer_apply): the hostile part of an
 * import. Every path is resolved with openat2(RESOLVE_IN_ROOT) below the root's fd, so
 * "..", absolute symlinks and symlinks made by an earlier entry or layer all stay inside it;
 * the last component is never followed (O_NOFOLLOW, *at calls on a name). */
#include "image/image.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define MAX_DEPTH 128 /* directory nesting a removal follows */

static int fail(char *err, size_t errlen, int r, const char *path, const char *why)
{
    char shown[160];
    size_t i = 0;
    for (; path && path[i] && i < sizeof(shown) - 1; i++)
        shown[i] = (path[i] >= 0x20 && path[i] < 0x7f) ? path[i] : '?';
    shown[i] = '\0';
    snprintf(err, errlen, "entry %s: %s", shown, why);
    return r;
}

/* "./a//b/" -> "a/b"; -EINVAL for a ".." component or an overlong path; "" is the root. */
static int normalise(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = strchrnul(p, '/');
        size_t n = (size_t)(e - p);
        if (n == 0)
            break;
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (!(n == 1 && p[0] == '.')) {
            if (o + n + 2 > outlen)
                return -ENAMETOOLONG;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p = e;
    }
    out[o] = '\0';
    return 0;
}

static int open_in_root(int rootfd, const char *path, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    long fd = TC_RETRY(syscall(SYS_openat2, rootfd, path[0] ? path : ".", &how, sizeof(how)));
    return fd < 0 ? -errno : (int)fd;
}

/* The directory path names (resolved in the root), made with 0755 where missing if create. */
static int open_dir(int rootfd, const char *path, bool create, int depth)
{
    int fd = open_in_root(rootfd, path, O_PATH | O_DIRECTORY);
    if (fd != -ENOENT || !create)
        return fd;
    if (depth > MAX_DEPTH)
        return -ELOOP;
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", path);
    char *slash = strrchr(parent, '/');
    const char *name = slash ? slash + 1 : parent;
    if (slash)
        *slash = '\0';
    else
        parent[0] = '\0';
    _cleanup_close_ int pfd = open_dir(rootfd, slash ? parent : "", true, depth + 1);
    if (pfd < 0)
        return pfd;
    if (mkdirat(pfd, slash ? name : path, 0755) < 0 && errno != EEXIST)
        return -errno;
    return open_in_root(rootfd, path, O_PATH | O_DIRECTORY);
}

/* The key of a path in a layer's set of what it made: a 64-bit FNV-1a of the path, so that a
 * layer of a million long paths does not hold them all (a collision keeps one lower-layer
 * entry an opaque whiteout should have hidden: a wrong file, never a way out). */
static void made_key(const char *path, char out[17])
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        h = (h ^ *c) * 1099511628211ULL;
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* An opaque whiteout: everything below dir that this layer did not make goes (the layers
 * under this one), recursively, keeping what this layer wrote before the marker. */
static int opaque(int dirfd, const char *dirpath, json_t *made, int depth)
{
    if (depth > MAX_DEPTH)
        return -ELOOP;
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -ENOMEM;
    }
    int r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(d))) {
        char child[PATH_MAX];
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char key[17];
        snprintf(child, sizeof(child), "%s%s%s", dirpath, dirpath[0] ? "/" : "", de->d_name);
        made_key(child, key);
        if (!json_object_get(made, key)) {
            r = tc_image_rm_tree(fd, de->d_name);
        } else if (de->d_type == DT_DIR) {
            int cfd = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            r = cfd < 0 ? -errno : opaque(cfd, child, made, depth + 1);
            if (cfd >= 0)
                close(cfd);
        }
    }
    closedir(d);
    return r;
}

/* What anyone in the sandbox may do with the file: the owner's read and execute bits (the
 * sandbox's user owns nothing in the root), no setuid, setgid or sticky bit. */
static mode_t root_mode(mode_t perm)
{
    mode_t m = perm & 0777;
    if (m & 0400)
        m |= 0044;
    if (m & 0100)
        m |= 0011;
    return m;
}

static int write_file(struct archive *a, int pfd, const char *name, mode_t mode, int64_t mtime,
                      int64_t size, struct tc_layer_state *st)
{
    _cleanup_close_ int fd =
        openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    const void *buf;
    size_t len;
    la_int64_t off;
    int ar;
    while ((ar = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
        st->bytes += (int64_t)len;
        if (st->bytes > st->max_bytes)
            return -EFBIG;
        for (size_t done = 0; done < len;) {
            ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
            done += (size_t)n;
        }
    }
    if (ar != ARCHIVE_EOF)
        return -EIO;
    /* a sparse file's hole at the end: the size is the entry's, not the last block's end */
    struct timespec ts[2] = {{.tv_sec = mtime}, {.tv_sec = mtime}};
    if (ftruncate(fd, size) < 0 || fchmod(fd, mode) < 0 || futimens(fd, ts) < 0)
        return -errno;
    return 0;
}

static int apply_entry(int rootfd, struct archive *a, struct archive_entry *e, json_t *made,
                       struct tc_layer_state *st, char *err, size_t errlen)
{
    char path[PATH_MAX], parent[PATH_MAX];
    const char *raw = archive_entry_pathname(e);
    if (!raw)
        return fail(err, errlen, -EINVAL, "?", "no path");
    int r = normalise(raw, path, sizeof(path));
    if (r < 0)
        return fail(err, errlen, r, raw, "the path leaves the root");
    if (!path[0]) /* the root itself: its mode stays ours */
        return 0;
    if (++st->entries > st->max_entries)
        return fail(err, errlen, -EFBIG, raw, "too many entries in the image");
    /* names and link targets take room too */
    st->bytes += (int64_t)strlen(path) +
                 (archive_entry_symlink(e) ? (int64_t)strlen(archive_entry_symlink(e)) : 0);
    if (st->bytes > st->max_bytes)
        return fail(err, errlen, -EFBIG, raw, "the image is larger than the bound");

    char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - path) : 0, path);

    /* whiteouts: they remove, and never make the directory they name */
    if (strncmp(name, WH_PREFIX, strlen(WH_PREFIX)) == 0) {
        _cleanup_close_ int pfd = open_dir(rootfd, parent, false, 0);
        if (pfd == -ENOENT || pfd == -ENOTDIR)
            return 0;
        if (pfd < 0)
            return fail(err, errlen, pfd, raw, "cannot open its directory");
        if (strcmp(name, WH_OPAQUE) == 0) {
            _cleanup_close_ int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            r = dfd < 0 ? -errno : opaque(dfd, parent, made, 0);
            return r < 0 ? fail(err, errlen, r, raw, "opaque whiteout failed") : 0;
        }
        const char *victim = name + strlen(WH_PREFIX);
        if (strncmp(victim, WH_PREFIX, strlen(WH_PREFIX)) == 0) /* aufs metadata (.wh..wh.plnk) */
            return 0;
        if (!victim[0] || !strcmp(victim, ".") || !strcmp(victim, ".."))
            return fail(err, errlen, -EINVAL, raw, "a whiteout of no name");
        r = tc_image_rm_tree(pfd, victim);
        return r < 0 ? fail(err, errlen, r, raw, "whiteout failed") : 0;
    }

    mode_t type = archive_entry_filetype(e);
    const char *link = archive_entry_hardlink(e);
    if (!link && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
        return fail(err, errlen, -EPERM, raw,
                    type == AE_IFCHR || type == AE_IFBLK ? "device nodes are refused"
                                                         : "FIFOs and sockets are refused");

    _cleanup_close_ int pfd = open_dir(rootfd, parent, true, 0);
    if (pfd < 0)
        return fail(err, errlen, pfd, raw, "cannot make its directory");
    char key[17];
    made_key(path, key);
    json_object_set_new(made, key, json_true());

    mode_t perm = archive_entry_perm(e);
    struct stat old;
    bool exists = fstatat(pfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0;

    if (!link && type == AE_IFDIR) {
        if (exists && !S_ISDIR(old.st_mode) && (r = tc_image_rm_tree(pfd, name)) < 0)
            return fail(err, errlen, r, raw, "cannot replace what was there");
        if ((!exists || !S_ISDIR(old.st_mode)) && mkdirat(pfd, name, 0700) < 0)
            return fail(err, errlen, -errno, raw, "mkdir failed");
        _cleanup_close_ int dfd =
            openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0 || fchmod(dfd, root_mode(perm) | 0700) < 0)
            return fail(err, errlen, -errno, raw, "chmod failed");
        return 0;
    }
    if (exists && (r = tc_image_rm_tree(pfd, name)) < 0)
        return fail(err, errlen, r, raw, "cannot replace what was there");

    if (link) {
        char target[PATH_MAX];
        if ((r = normalise(link, target, sizeof(target))) < 0 || !target[0])
            return fail(err, errlen, -EINVAL, raw, "a hard link to outside the root");
        _cleanup_close_ int tfd = open_in_root(rootfd, target, O_PATH | O_NOFOLLOW);
        struct stat st_t;
        if (tfd < 0)
            return fail(err, errlen, tfd, raw, "the hard link's target is not in the image");
        if (fstat(tfd, &st_t) < 0 || !S_ISREG(st_t.st_mode))
            return fail(err, errlen, -EPERM, raw, "a hard link to something not a regular file");
        if (linkat(tfd, "", pfd, name, AT_EMPTY_PATH) < 0)
            return fail(err, errlen, -errno, raw, "link failed");
        return 0;
    }
    if (type == AE_IFLNK) {
        const char *target = archive_entry_symlink(e);
        if (!target || !target[0] || strlen(target) >= PATH_MAX)
            return fail(err, errlen, -EINVAL, raw, "a symbolic link without a target");
        if (symlinkat(target, pfd, name) < 0)
            return fail(err, errlen, -errno, raw, "symlink failed");
        return 0;
    }
    if (perm & 06000)
        st->setuid_stripped++;
    if (archive_entry_size(e) > st->max_bytes - st->bytes)
        return fail(err, errlen, -EFBIG, raw, "the image is larger than the bound");
    r = write_file(a, pfd, name, root_mode(perm), archive_entry_mtime(e),
                   archive_entry_size(e) > 0 ? archive_entry_size(e) : 0, st);
    if (r == -EFBIG)
        return fail(err, errlen, r, raw, "the image is larger than the bound");
    return r < 0 ? fail(err, errlen, r, raw, "write failed") : 0;
}

int tc_layer_apply(int rootfd, struct archive *a, struct tc_layer_state *st, char *err,
                   size_t errlen)
{
    json_t *made = json_object(); /* paths this layer wrote: an opaque whiteout keeps them */
    struct archive_entry *e;
    int r = 0, ar;
    if (!made)
        return -ENOMEM;
    while (r == 0 && (ar = archive_read_next_header(a, &e)) != ARCHIVE_EOF) {
        if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
            snprintf(err, errlen, "the layer is not a valid tar: %s", archive_error_string(a));
            r = -EINVAL;
            break;
        }
        r = apply_entry(rootfd, a, e, made, st, err, errlen);
    }
    json_decref(made);
    return r;
}
