#include "sandbox/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

char *tc_b64_encode(const void *data, size_t len)
{
    size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
    char *out = malloc(n);
    if (!out)
        return NULL;
    sodium_bin2base64(out, n, data, len, sodium_base64_VARIANT_ORIGINAL);
    return out;
}

int tc_b64_decode(const char *s, size_t slen, unsigned char **ret, size_t *ret_len)
{
    size_t cap = slen / 4 * 3 + 3, n = 0;
    const char *end = NULL;
    unsigned char *out = malloc(cap + 1);

    if (!out)
        return -ENOMEM;
    if (sodium_base642bin(out, cap, s, slen, NULL, &n, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        end != s + slen) {
        free(out);
        return -EINVAL;
    }
    *ret = out;
    *ret_len = n;
    return 0;
}

int tc_ws_mount(const char *path, int64_t size, uid_t uid, gid_t gid)
{
    char opts[160];
    int fd;

    snprintf(opts, sizeof(opts), "size=%" PRId64 ",nr_inodes=%" PRId64 ",mode=0700,uid=%u,gid=%u",
             size, size / 1024 < 1024 ? 1024 : (size / 1024 > 1000000 ? 1000000 : size / 1024),
             (unsigned)uid, (unsigned)gid);
    if (mount("tcws", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
        return -errno;
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int r = -errno;
        umount2(path, MNT_DETACH);
        return r;
    }
    return fd;
}

void tc_ws_unmount(const char *path)
{
    umount2(path, MNT_DETACH);
}

/* Open (creating as needed) the directory holding the last component of rel. */
static int open_parent(int dirfd, const char *rel, uid_t uid, gid_t gid, const char **ret_base)
{
    int cur = dup(dirfd);
    const char *s = rel;

    if (cur < 0)
        return -errno;
    for (;;) {
        const char *slash = strchr(s, '/');
        char comp[256];
        size_t n;
        int next;

        if (!slash)
            break;
        n = (size_t)(slash - s);
        if (n == 0 || n >= sizeof(comp)) {
            close(cur);
            return -EINVAL;
        }
        memcpy(comp, s, n);
        comp[n] = '\0';
        if (mkdirat(cur, comp, 0755) == 0) {
            if (fchownat(cur, comp, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
                int r = -errno;
                close(cur);
                return r;
            }
        } else if (errno != EEXIST) {
            int r = -errno;
            close(cur);
            return r;
        }
        next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(cur);
        if (next < 0)
            return -errno;
        cur = next;
        s = slash + 1;
    }
    *ret_base = s;
    return cur;
}

int tc_ws_write_files(int dirfd, json_t *files, uid_t uid, gid_t gid, char *err, size_t errlen)
{
    size_t i;
    json_t *f;

    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        json_t *b = json_object_get(f, "content_b64"), *m = json_object_get(f, "mode");
        _cleanup_free_ unsigned char *data = NULL;
        _cleanup_close_ int pfd = -1, fd = -1;
        const char *base = NULL;
        size_t len = 0;
        int r;

        r = tc_b64_decode(json_string_value(b), json_string_length(b), &data, &len);
        if (r < 0) {
            snprintf(err, errlen, "files[%zu]: invalid base64", i);
            return r;
        }
        pfd = open_parent(dirfd, path, uid, gid, &base);
        if (pfd < 0) {
            snprintf(err, errlen, "files[%zu]: %s", i, strerror(-pfd));
            return pfd;
        }
        fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    m ? (mode_t)json_integer_value(m) : 0644);
        if (fd < 0) {
            r = -errno;
            snprintf(err, errlen, "files[%zu]: %s", i, strerror(-r));
            return r;
        }
        for (size_t off = 0; off < len;) {
            ssize_t n = write(fd, data + off, len - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                r = -errno;
                snprintf(err, errlen, "files[%zu]: %s", i, strerror(-r));
                return r;
            }
            off += (size_t)n;
        }
        if (fchown(fd, uid, gid) < 0 || (m && fchmod(fd, (mode_t)json_integer_value(m)) < 0)) {
            r = -errno;
            snprintf(err, errlen, "files[%zu]: %s", i, strerror(-r));
            return r;
        }
    }
    return 0;
}

struct collect_ctx {
    /* each entry the walk meets (not "." or ".."); st from fstatat without following */
    void (*visit)(struct collect_ctx *c, int dfd, const char *name, const char *rel,
                  const struct stat *st);
    json_t *patterns, *out;
    size_t max_out; /* the listing's bound (tc_ws_list) */
    int64_t budget;
    size_t nfiles, nentries;
    bool incomplete; /* a match (or a directory that may hold one) was left out */
};

static bool matches(json_t *patterns, const char *rel)
{
    size_t i;
    json_t *p;
    json_array_foreach(patterns, i, p)
    {
        if (fnmatch(json_string_value(p), rel, FNM_PERIOD) == 0)
            return true;
    }
    return false;
}

static void collect_file(struct collect_ctx *c, int dfd, const char *name, const char *rel)
{
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    _cleanup_free_ char *buf = NULL;
    _cleanup_free_ char *b64 = NULL;
    struct stat st;
    size_t want, got = 0;

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    want = (size_t)st.st_size;
    if (want > TC_WS_COLLECT_FILE_MAX)
        want = TC_WS_COLLECT_FILE_MAX;
    if ((int64_t)want > c->budget)
        want = c->budget > 0 ? (size_t)c->budget : 0;
    buf = malloc(want + 1);
    if (!buf)
        return;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    b64 = tc_b64_encode(buf, got);
    if (!b64)
        return;
    /* NULL for a name that is not valid UTF-8: left out, and said so */
    json_t *entry =
        json_pack("{s:s, s:s, s:I, s:b}", "path", rel, "content_b64", b64, "size",
                  (json_int_t)st.st_size, "truncated", (int64_t)got < (int64_t)st.st_size);
    if (!entry || json_array_append_new(c->out, entry) < 0) {
        c->incomplete = true;
        return;
    }
    c->budget -= (int64_t)got;
    c->nfiles++;
}

static void walk(struct collect_ctx *c, int dfd, const char *prefix, int depth)
{
    int dup_fd;
    DIR *d;
    struct dirent *de;

    if (depth > 32) {
        c->incomplete = true;
        return;
    }
    /* an open of its own, not dup(): a dup shares the offset, and the workspace's fd is
     * walked again (a session's listings) */
    dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0)
        return;
    d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return;
    }
    while (!(c->incomplete && c->nfiles >= TC_WS_COLLECT_MAX_FILES) &&
           !(c->max_out && c->incomplete) && (de = readdir(d))) {
        char rel[4096];
        struct stat st;

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        /* The launcher's loop waits for this walk: bound it, whatever the sandbox created. */
        if (++c->nentries > TC_WS_COLLECT_MAX_ENTRIES) {
            c->incomplete = true;
            break;
        }
        if ((size_t)snprintf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) >=
            sizeof(rel)) {
            c->incomplete = true;
            continue;
        }
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        c->visit(c, dfd, de->d_name, rel, &st);
        if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int sub =
                openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                walk(c, sub, rel, depth + 1);
        }
    }
    closedir(d);
}

static void visit_collect(struct collect_ctx *c, int dfd, const char *name, const char *rel,
                          const struct stat *st)
{
    if (!S_ISREG(st->st_mode) || !matches(c->patterns, rel))
        return;
    if (c->nfiles >= TC_WS_COLLECT_MAX_FILES)
        c->incomplete = true; /* one more match than we return: say so, stop */
    else
        collect_file(c, dfd, name, rel);
}

json_t *tc_ws_collect(int dirfd, json_t *patterns, int64_t total_max, bool *ret_incomplete)
{
    struct collect_ctx c = {
        .visit = visit_collect, .patterns = patterns, .out = json_array(), .budget = total_max};

    if (!c.out)
        return NULL;
    if (json_array_size(patterns) > 0 && dirfd >= 0)
        walk(&c, dirfd, "", 0);
    *ret_incomplete = c.incomplete;
    return c.out;
}

/* ---- one file at a time (a session's files API) ---- */

bool tc_ws_path_ok(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > 255 || p[0] == '/')
        return false;
    /* each component: not empty, not "." or "..", printable, no backslash */
    const char *s = p;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\')
                return false;
        s += len;
        if (*s == '/')
            s++;
    }
    return p[n - 1] != '/';
}

static void visit_list(struct collect_ctx *c, int dfd, const char *name, const char *rel,
                       const struct stat *st)
{
    (void)dfd, (void)name;
    if (json_array_size(c->out) >= c->max_out) {
        c->incomplete = true;
        return;
    }
    const char *type = S_ISREG(st->st_mode)   ? "file"
                       : S_ISDIR(st->st_mode) ? "directory"
                       : S_ISLNK(st->st_mode) ? "symlink"
                                              : "other";
    /* NULL for a name that is not valid UTF-8: left out, and said so */
    json_t *e = json_pack("{s:s, s:s, s:I, s:i, s:I}", "path", rel, "type", type, "size",
                          (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777), "mtime",
                          (json_int_t)st->st_mtim.tv_sec);
    if (!e || json_array_append_new(c->out, e) < 0)
        c->incomplete = true;
}

json_t *tc_ws_list(int dirfd, size_t max_entries, bool *ret_incomplete)
{
    struct collect_ctx c = {.visit = visit_list, .out = json_array(), .max_out = max_entries};
    if (!c.out)
        return NULL;
    if (dirfd >= 0 && max_entries > 0)
        walk(&c, dirfd, "", 0);
    *ret_incomplete = c.incomplete;
    return c.out;
}

/* rel under dirfd with the kernel's word that nothing but plain directories was crossed: no
 * symbolic link (even one that stays inside), no "..", no other mount. */
static int open_beneath(int dirfd, const char *rel, uint64_t flags, uint64_t mode)
{
    struct open_how how = {
        .flags = flags | O_CLOEXEC, /* RESOLVE_NO_SYMLINKS: the last part too (ELOOP) */
        .mode = mode,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
    return fd < 0 ? -errno : (int)fd;
}

int tc_ws_get(int dirfd, const char *rel, size_t max, char **ret, size_t *ret_len)
{
    if (!tc_ws_path_ok(rel))
        return -EINVAL;
    /* O_NONBLOCK: a FIFO the program left there must not stop the launcher */
    _cleanup_close_ int fd = open_beneath(dirfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    struct stat st;
    if (fd < 0)
        return fd;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (S_ISDIR(st.st_mode))
        return -EISDIR;
    if (!S_ISREG(st.st_mode))
        return -EPERM;
    if ((uint64_t)st.st_size > max)
        return -EFBIG;
    /* the program may be writing it: what is there now, up to max */
    return tc_read_all(fd, max, ret, ret_len);
}

/* The directory holding rel's last component, created (owned by uid) as needed; its name
 * in *ret_base. Every step checked by the kernel, as in open_beneath. */
static int parent_beneath(int dirfd, const char *rel, bool create, uid_t uid, gid_t gid,
                          const char **ret_base)
{
    const char *slash = strrchr(rel, '/');
    *ret_base = slash ? slash + 1 : rel;
    if (!slash)
        return open_beneath(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
    char dir[4096];
    size_t n = (size_t)(slash - rel);
    if (n == 0 || n >= sizeof(dir))
        return -EINVAL;
    memcpy(dir, rel, n);
    dir[n] = '\0';
    int fd = open_beneath(dirfd, dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd != -ENOENT || !create)
        return fd;
    /* create each missing step: open_parent() does it one name at a time, O_NOFOLLOW */
    return open_parent(dirfd, rel, uid, gid, ret_base);
}

int tc_ws_put(int dirfd, const char *rel, const void *data, size_t len, uid_t uid, gid_t gid,
              bool *ret_created)
{
    if (!tc_ws_path_ok(rel))
        return -EINVAL;
    const char *base = NULL;
    _cleanup_close_ int pfd = parent_beneath(dirfd, rel, true, uid, gid, &base);
    char tmp[64];
    struct stat st;
    if (pfd < 0)
        return pfd;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return -EINVAL;
    bool existed = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (existed && S_ISDIR(st.st_mode))
        return -EISDIR;
    /* written aside, then renamed over the name: a reader sees the old file or the new one,
     * and a symbolic link (or FIFO) of that name is replaced, never followed */
    unsigned char rnd[8];
    randombytes_buf(rnd, sizeof(rnd));
    snprintf(tmp, sizeof(tmp), ".toolcage-upload-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    int fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int r = tc_write_all(fd, data, len);
    if (r == 0 && fchown(fd, uid, gid) < 0)
        r = -errno;
    close(fd);
    if (r == 0 && renameat(pfd, tmp, pfd, base) < 0)
        r = -errno;
    if (r < 0)
        (void)unlinkat(pfd, tmp, 0);
    if (r == 0 && ret_created)
        *ret_created = !existed;
    return r;
}

int tc_ws_delete(int dirfd, const char *rel)
{
    if (!tc_ws_path_ok(rel))
        return -EINVAL;
    const char *base = NULL;
    _cleanup_close_ int pfd = parent_beneath(dirfd, rel, false, 0, 0, &base);
    if (pfd < 0)
        return pfd;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return -EINVAL;
    if (unlinkat(pfd, base, 0) == 0)
        return 0;
    if (errno != EISDIR)
        return -errno;
    return unlinkat(pfd, base, AT_REMOVEDIR) == 0 ? 0 : -errno; /* an empty directory only */
}
