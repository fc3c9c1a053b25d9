/* microvm backend: the launcher's side (see microvm.h). */
#include "sandbox/microvm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/child.h"
#include "sandbox/spec.h"

#define QEMU "/usr/bin/qemu-system-x86_64"
/* What the guest kernel and init take of the guest's memory, beyond the program's limit,
 * and what qemu itself takes on the host beyond the guest's memory (TCG's code buffer is
 * capped at 64 MiB by vmrun). Measured: python `pass` in a 352 MiB guest peaks at 215 MiB. */
#define GUEST_EXTRA_MB 96
#define QEMU_EXTRA_MB  192
#define QEMU_PIDS      256
#define QEMU_NOFILE    1024
/* qemu's CPU time on the host: its wall clock bounds it; this only keeps within the spec's
 * bounds (a day) */
#define TC_VM_CPU_MS_MAX (24LL * 3600 * 1000)

/* The modules the guest needs, in the order modules.dep gives; built-in ones are skipped. */
static const char *const wanted[] = {"virtio_mmio", "virtio_console", "9pnet_virtio", "9p"};

static void unavailable(struct tc_vm_host *h, const char *what, const char *arg)
{
    h->available = false;
    snprintf(h->why, sizeof(h->why), "%s%.120s", what, arg);
}

/* ---- initramfs: a newc cpio written as we go ---- */

struct cpio {
    FILE *f;
    unsigned ino;
};

static int cpio_entry(struct cpio *c, const char *name, mode_t mode, const void *data, size_t len)
{
    static const char zeros[4] = {0};
    size_t nlen = strlen(name) + 1;
    if (fprintf(c->f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ++c->ino,
                (unsigned)mode, 0u, 0u, S_ISDIR(mode) ? 2u : 1u, 0u, len, 0u, 0u, 0u, 0u, nlen,
                0u) < 0 ||
        fwrite(name, 1, nlen, c->f) != nlen ||
        fwrite(zeros, 1, (4 - (110 + nlen) % 4) % 4, c->f) != (4 - (110 + nlen) % 4) % 4)
        return -EIO;
    if (len && fwrite(data, 1, len, c->f) != len)
        return -EIO;
    if (fwrite(zeros, 1, (4 - len % 4) % 4, c->f) != (4 - len % 4) % 4)
        return -EIO;
    return 0;
}

static int slurp(const char *path, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || st.st_size > (64 << 20))
        return -EINVAL;
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return -ENOMEM;
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) {
            free(buf);
            return n < 0 ? -errno : -EIO;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    *ret = buf;
    *ret_len = got;
    return 0;
}

static int copy_file(const char *src, const char *dst, mode_t mode)
{
    char *buf;
    size_t len;
    int r = slurp(src, &buf, &len);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    r = fd < 0 ? -errno : 0;
    for (size_t off = 0; r == 0 && off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w <= 0)
            r = w < 0 ? -errno : -EIO;
        else
            off += (size_t)w;
    }
    free(buf);
    return r;
}

/* Appends to order (newline-separated file names) module rel (a modules.dep path) and, first,
 * what it depends on; each once. */
static int add_module(const char *moddir, const char *dep, const char *rel, char *order,
                      size_t ordersz, struct cpio *c, int depth)
{
    char line_start[PATH_MAX + 2], path[PATH_MAX * 2];
    const char *base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    /* already in? (a whole line) */
    for (const char *p = order; (p = strstr(p, base));) {
        size_t bl = strlen(base);
        if ((p == order || p[-1] == '\n') && p[bl] == '\n')
            return 0;
        p += bl;
    }
    if (depth > 16)
        return -ELOOP;
    snprintf(line_start, sizeof(line_start), "\n%s:", rel);
    const char *deps = NULL, *line = strstr(dep, line_start);
    if (line)
        deps = line + strlen(line_start);
    else if (strncmp(dep, line_start + 1, strlen(line_start) - 1) == 0) /* the first line */
        deps = dep + strlen(line_start) - 1;
    if (!deps)
        return -ENOENT;
    const char *eol = strchr(deps, '\n');
    size_t dlen = eol ? (size_t)(eol - deps) : strlen(deps);
    char list[4096];
    if (dlen >= sizeof(list))
        return -E2BIG;
    memcpy(list, deps, dlen);
    list[dlen] = '\0';
    /* modules.dep lists every dependency, the last to load last: load them in reverse */
    char *items[64];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(list, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (n == 64)
            return -E2BIG;
        items[n++] = t;
    }
    for (int i = n - 1; i >= 0; i--) {
        int r = add_module(moddir, dep, items[i], order, ordersz, c, depth + 1);
        if (r < 0)
            return r;
    }
    char *data;
    size_t len;
    snprintf(path, sizeof(path), "%s/%s", moddir, rel);
    int r = slurp(path, &data, &len);
    if (r < 0)
        return r;
    char name[PATH_MAX + 8]; /* (base: a part of a path) */
    snprintf(name, sizeof(name), "kmod/%s", base);
    r = cpio_entry(c, name, S_IFREG | 0444, data, len);
    free(data);
    if (r < 0)
        return r;
    size_t ol = strlen(order);
    if (ol + strlen(base) + 2 > ordersz)
        return -E2BIG;
    snprintf(order + ol, ordersz - ol, "%s\n", base);
    return 0;
}

static bool builtin(const char *moddir, const char *name)
{
    char *b, pat[128];
    size_t len;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/modules.builtin", moddir);
    if (slurp(path, &b, &len) < 0)
        return false;
    snprintf(pat, sizeof(pat), "/%s.ko\n", name);
    bool hit = strstr(b, pat) != NULL;
    free(b);
    return hit;
}

/* the modules.dep entry (a path relative to moddir) of module name, into rel */
static int find_module(const char *dep, const char *name, char *rel, size_t relsz)
{
    char pat[128];
    static const char *const ext[] = {".ko:", ".ko.xz:", ".ko.zst:", ".ko.gz:"};
    for (size_t e = 0; e < TC_ARRAY_SIZE(ext); e++) {
        snprintf(pat, sizeof(pat), "/%s%s", name, ext[e]);
        const char *hit = strstr(dep, pat);
        if (!hit)
            continue;
        const char *start = hit;
        while (start > dep && start[-1] != '\n')
            start--;
        size_t n = (size_t)(hit - start) + strlen(pat) - 1;
        if (n >= relsz)
            return -E2BIG;
        memcpy(rel, start, n);
        rel[n] = '\0';
        return 0;
    }
    return -ENOENT;
}

static int write_initrd(const char *path, const char *vminit, const char *moddir)
{
    struct cpio c = {0};
    char *init = NULL, *dep = NULL, order[4096] = "", rel[PATH_MAX];
    size_t init_len, dep_len;
    int r;
    char deppath[PATH_MAX + 32];
    snprintf(deppath, sizeof(deppath), "%s/modules.dep", moddir);
    if ((r = slurp(vminit, &init, &init_len)) < 0 || (r = slurp(deppath, &dep, &dep_len)) < 0)
        goto out;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0 || !(c.f = fdopen(fd, "w"))) {
        r = -errno;
        if (fd >= 0)
            close(fd);
        goto out;
    }
    static const char *const dirs[] = {"dev", "proc", "sys", "kmod", "usr", "workspace"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(dirs); i++)
        if ((r = cpio_entry(&c, dirs[i], S_IFDIR | 0755, NULL, 0)) < 0)
            goto out;
    if ((r = cpio_entry(&c, "init", S_IFREG | 0755, init, init_len)) < 0)
        goto out;
    for (size_t i = 0; i < TC_ARRAY_SIZE(wanted); i++) {
        if (builtin(moddir, wanted[i]))
            continue;
        if ((r = find_module(dep, wanted[i], rel, sizeof(rel))) < 0 ||
            (r = add_module(moddir, dep, rel, order, sizeof(order), &c, 0)) < 0)
            goto out;
    }
    if ((r = cpio_entry(&c, "kmod/order", S_IFREG | 0444, order, strlen(order))) < 0 ||
        (r = cpio_entry(&c, "TRAILER!!!", 0, NULL, 0)) < 0)
        goto out;
    r = 0;
out:
    if (c.f && fclose(c.f) != 0 && r == 0)
        r = -EIO;
    free(init);
    free(dep);
    return r;
}

/* The newest kernel with both an image in /boot and its modules. */
static bool find_kernel(char *ver, size_t versz)
{
    DIR *d = opendir("/lib/modules");
    struct dirent *de;
    char best[64] = "", p[PATH_MAX];
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(best))
            continue;
        snprintf(p, sizeof(p), "/boot/vmlinuz-%s", de->d_name);
        if (access(p, R_OK) != 0)
            continue;
        snprintf(p, sizeof(p), "/lib/modules/%s/modules.dep", de->d_name);
        if (access(p, R_OK) != 0)
            continue;
        if (!best[0] || strverscmp(de->d_name, best) > 0)
            memcpy(best, de->d_name, strlen(de->d_name) + 1); /* (shorter than best: above) */
    }
    if (d)
        closedir(d);
    snprintf(ver, versz, "%s", best);
    return best[0] != '\0';
}

static int no_fast(struct tc_vm_host *h, int err, const char *what, const char *arg)
{
    snprintf(h->boot_why, sizeof(h->boot_why), "%s%.100s", what, arg ? arg : "");
    return err;
}

#define CACHE_TMP_STALE_S 600 /* an unpack's temporary this old was abandoned (one takes ~1 s) */

int tc_vm_cache_sweep(const char *cache_dir, const char *keep, const char *boot_dir)
{
    DIR *d = opendir(cache_dir);
    struct dirent *de;
    int n = 0;

    if (!d)
        return -errno;
    time_t now = time(NULL);
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        struct stat st, src;
        if (strncmp(name, "vmlinux-", 8) != 0 || strcmp(name, keep) == 0 ||
            fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        size_t len = strlen(name);
        bool gone;
        if (len > 4 && strcmp(name + len - 4, ".tmp") == 0) {
            gone = now - st.st_mtime > CACHE_TMP_STALE_S;
        } else {
            /* vmlinux-RELEASE-SIZE-MTIME (cache_kernel): the image it was unpacked from,
             * still installed and unchanged, is another launcher's kernel: kept */
            char rel[256];
            long long size, mtime;
            const char *b = strrchr(name, '-');
            const char *a = b > name + 8 ? memrchr(name + 8, '-', (size_t)(b - (name + 8))) : NULL;
            if (!a || a - (name + 8) <= 0 || (size_t)(a - (name + 8)) >= sizeof(rel) ||
                sscanf(a, "-%lld-%lld", &size, &mtime) != 2)
                continue; /* not a name of ours */
            memcpy(rel, name + 8, (size_t)(a - (name + 8)));
            rel[a - (name + 8)] = '\0';
            char path[PATH_MAX];
            gone = (size_t)snprintf(path, sizeof(path), "%s/vmlinuz-%s", boot_dir, rel) <
                       sizeof(path) &&
                   !(stat(path, &src) == 0 && src.st_size == size && src.st_mtime == mtime);
        }
        if (gone && unlinkat(dirfd(d), name, 0) == 0)
            n++;
    }
    closedir(d);
    return n;
}

/* The unpacked kernel for the fast boot, in cache_dir (made by the first launcher start that
 * finds it missing: ~1 s once per kernel, not in a call's path; named by the image's
 * release, size and time, so a reinstalled kernel is unpacked again): its path in h->cached.
 * The directory and the file must be ours and no one else's to write. 0, or -errno with
 * h->boot_why. */
static int cache_kernel(struct tc_vm_host *h, const char *bzimage, const char *cache_dir)
{
    struct stat st, dst;
    if (stat(bzimage, &st) < 0)
        return no_fast(h, -errno, "cannot read ", bzimage);
    if (mkdir(cache_dir, 0700) < 0 && errno != EEXIST)
        return no_fast(h, -errno, "cannot make ", cache_dir);
    if (lstat(cache_dir, &dst) < 0 || !S_ISDIR(dst.st_mode) || dst.st_uid != geteuid() ||
        (dst.st_mode & 022))
        return no_fast(h, -EPERM, "not ours alone: ", cache_dir);
    if ((size_t)snprintf(h->cached, sizeof(h->cached), "%s/vmlinux-%s-%lld-%lld", cache_dir,
                         h->kernel, (long long)st.st_size,
                         (long long)st.st_mtime) >= sizeof(h->cached))
        return no_fast(h, -ENAMETOOLONG, "path too long", NULL);
    int fd = open(h->cached, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat cst;
    bool ok = fd >= 0 && fstat(fd, &cst) == 0 && S_ISREG(cst.st_mode) && cst.st_uid == geteuid() &&
              !(cst.st_mode & 0222) && cst.st_size > 0;
    if (fd >= 0)
        close(fd);
    if (!ok) { /* (written beside and renamed over: another launcher's stays whole) */
        char why[96];
        int r = tc_vm_kernel_unpack(bzimage, h->cached, why, sizeof(why));
        if (r < 0)
            return no_fast(h, r, why, NULL);
    }
    /* the kernels of images removed or replaced since (~30 MB each, a kernel upgrade's
     * leftovers): no launcher boots them again */
    (void)tc_vm_cache_sweep(cache_dir, strrchr(h->cached, '/') + 1, "/boot");
    return 0;
}

/* The cached kernel bound read-only on dst (a file in the VM directory), through the
 * descriptor we checked (no path is looked up twice). 0, or -errno with h->boot_why. */
static int fast_kernel(struct tc_vm_host *h, const char *dst)
{
    struct stat cst;
    char self[64];
    int r = 0, fd = open(h->cached, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return no_fast(h, -errno, "cannot open ", h->cached);
    if (fstat(fd, &cst) < 0 || !S_ISREG(cst.st_mode) || cst.st_uid != geteuid() ||
        (cst.st_mode & 0222))
        r = no_fast(h, -EPERM, "not ours alone: ", h->cached);
    int out = r < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (r == 0 && out < 0)
        r = no_fast(h, -errno, "cannot make ", dst);
    if (out >= 0)
        close(out);
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (r == 0 && mount(self, dst, NULL, MS_BIND, NULL) < 0) {
        r = no_fast(h, -errno, "cannot bind ", h->cached);
        unlink(dst);
    }
    close(fd);
    return r;
}

void tc_vm_setup(struct tc_vm_host *h, const char *scratch, const char *cache_dir, bool fast)
{
    char src[PATH_MAX];
    memset(h, 0, sizeof(*h));
    snprintf(h->accel, sizeof(h->accel), "tcg");
    snprintf(h->boot, sizeof(h->boot), "%s", fast ? "fast" : "kaslr");
    h->fast = fast;
    if (access(QEMU, X_OK) != 0)
        return unavailable(h, "not found (package qemu-system-x86): ", QEMU);
    if (!find_kernel(h->kernel, sizeof(h->kernel)))
        return unavailable(h, "no kernel in /boot with modules in /lib/modules ",
                           "(package linux-image-amd64)");
    static const char *const bins[] = {"toolcage-vminit", "toolcage-vmrun"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(bins); i++) {
        int fd = tc_child_find_trusted(bins[i], src, sizeof(src));
        if (fd == -EPERM)
            return unavailable(h, "writable by others than root (or its folder): ", src);
        if (fd < 0)
            return unavailable(h, "not found: ", src);
        close(fd);
    }
    if (fast) { /* the header, the payload's magic; the unpack if no launcher did it before */
        char why[96];
        snprintf(src, sizeof(src), "/boot/vmlinuz-%s", h->kernel);
        if (!cache_dir || !cache_dir[0])
            snprintf(h->boot_why, sizeof(h->boot_why), "no state directory");
        else if (tc_vm_kernel_check(src, why, sizeof(why)) < 0)
            snprintf(h->boot_why, sizeof(h->boot_why), "%s", why);
        else
            (void)cache_kernel(h, src, cache_dir); /* (sets boot_why when it cannot) */
        h->fast = !h->boot_why[0];
        snprintf(h->boot, sizeof(h->boot), "%s", h->fast ? "fast" : "kaslr");
    }
    /* A shared mount point, as the launcher's ws and img: the tmpfs mounted on it at the
     * first microvm call (tc_vm_prepare) appears in every shell's mount namespace, also in
     * those of the shells the pool made before. */
    snprintf(h->dir, sizeof(h->dir), "%s/vm", scratch);
    if (mkdir(h->dir, 0755) < 0 && errno != EEXIST)
        return unavailable(h, "cannot make ", h->dir);
    if (mount(h->dir, h->dir, NULL, MS_BIND, NULL) < 0)
        return unavailable(h, "cannot bind ", h->dir);
    if (mount(NULL, h->dir, NULL, MS_SHARED, NULL) < 0)
        return unavailable(h, "cannot share ", h->dir);
    h->available = true;
}

/* A prepare that failed leaves nothing half-built (the next call tries again). */
static int prepare_fail(struct tc_vm_host *h, const char *what, const char *arg)
{
    snprintf(h->prep_why, sizeof(h->prep_why), "%s%.120s", what, arg);
    if (h->dir_mounted)
        umount2(h->dir, MNT_DETACH);
    h->dir_mounted = false;
    return -EIO;
}

int tc_vm_prepare(struct tc_vm_host *h)
{
    char moddir[PATH_MAX], p[PATH_MAX + 64], src[PATH_MAX];
    if (!h->available)
        return -ENOENT;
    if (h->dir_mounted)
        return 0;
    if (mount("tcvm", h->dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m") < 0)
        return prepare_fail(h, "cannot mount a tmpfs on ", h->dir);
    h->dir_mounted = true;
    snprintf(moddir, sizeof(moddir), "/lib/modules/%s", h->kernel);

    snprintf(src, sizeof(src), "/boot/vmlinuz-%s", h->kernel);
    snprintf(p, sizeof(p), "%s/kernel", h->dir);
    if (h->fast && fast_kernel(h, p) < 0) {
        /* (it was there at start: removed since, or not ours; the report said fast) */
        fprintf(stderr, "toolcage launcher: microvm: the fast boot failed (%s): kaslr\n",
                h->boot_why);
        h->fast = false;
        snprintf(h->boot, sizeof(h->boot), "kaslr");
    }
    if (!h->fast && copy_file(src, p, 0444) < 0)
        return prepare_fail(h, "cannot read ", src);
    /* Both are read through the fd whose file was checked (/proc/self/fd/N opens that very
     * inode), not by their path again: nothing swapped in after the check is copied. */
    char pinned[64];
    int fd = tc_child_find_trusted("toolcage-vminit", src, sizeof(src));
    if (fd < 0)
        return prepare_fail(h, "not found or not trusted: ", src);
    snprintf(pinned, sizeof(pinned), "/proc/self/fd/%d", fd);
    snprintf(p, sizeof(p), "%s/initrd", h->dir);
    int r = write_initrd(p, pinned, moddir);
    close(fd);
    if (r < 0)
        return prepare_fail(h, "cannot build the guest's initramfs: ", strerror(-r));
    fd = tc_child_find_trusted("toolcage-vmrun", src, sizeof(src));
    if (fd < 0)
        return prepare_fail(h, "not found or not trusted: ", src);
    snprintf(pinned, sizeof(pinned), "/proc/self/fd/%d", fd);
    snprintf(p, sizeof(p), "%s/toolcage-vmrun", h->dir);
    r = copy_file(pinned, p, 0555);
    close(fd);
    if (r < 0)
        return prepare_fail(h, "cannot copy ", src);
    if (mount(NULL, h->dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        return prepare_fail(h, "cannot make read-only: ", h->dir);
    return 0;
}

/* ---- the call's spec ---- */

static int64_t lim(json_t *limits, const char *k)
{
    return json_integer_value(json_object_get(limits, k));
}

static void set_lim(json_t *limits, const char *k, int64_t v)
{
    json_object_set_new(limits, k, json_integer(v));
}

json_t *tc_vm_rewrite(struct tc_vm_host *h, json_t *spec, char *err, size_t errlen)
{
    if (!h->available) {
        snprintf(err, errlen, "backend microvm: %s", h->why);
        return NULL;
    }
    if (json_object_get(spec, "network") && !json_is_null(json_object_get(spec, "network")) &&
        json_is_object(json_object_get(spec, "network"))) {
        snprintf(err, errlen, "backend microvm: network allowlists are not supported");
        return NULL;
    }
    if (json_object_get(spec, "image")) {
        snprintf(err, errlen, "backend microvm: tool images are not supported");
        return NULL;
    }
    if (json_is_true(json_object_get(spec, "session"))) {
        snprintf(err, errlen, "backend microvm: sessions are not supported");
        return NULL;
    }
    /* what the rewrite adds must still fit the spec's bounds (spec.h) */
    if (json_array_size(json_object_get(spec, "argv")) > TC_SPEC_MAX_ARGS - 32 ||
        json_array_size(json_object_get(spec, "mounts")) >= TC_SPEC_MAX_MOUNTS) {
        snprintf(err, errlen, "backend microvm: too many arguments or mounts");
        return NULL;
    }
    /* a call the backend can run: its directory, built at the first (tc_vm_setup) */
    if (tc_vm_prepare(h) < 0) {
        snprintf(err, errlen, "backend microvm: %s", h->prep_why);
        return NULL;
    }
    json_t *out = json_deep_copy(spec);
    json_t *limits = out ? json_object_get(out, "limits") : NULL;
    json_t *argv = json_array();
    if (!out || !json_is_object(limits) || !argv) {
        json_decref(out);
        json_decref(argv);
        snprintf(err, errlen, "backend microvm: %s", out ? "limits required" : "out of memory");
        return NULL;
    }
    int64_t mem = lim(limits, "memory_bytes"), wall = lim(limits, "wall_ms");
    if (mem > (int64_t)1000 << 30) { /* guest + qemu must stay under the spec's 1 TiB */
        json_decref(out);
        json_decref(argv);
        snprintf(err, errlen, "backend microvm: memory_bytes above 1000 GiB");
        return NULL;
    }
    int64_t guest_mb = (mem + (1 << 20) - 1) / (1 << 20) + GUEST_EXTRA_MB;
    char buf[12][32], vmrun[PATH_MAX];
    snprintf(vmrun, sizeof(vmrun), "%s/toolcage-vmrun", TC_VM_MOUNT);
    snprintf(buf[0], sizeof(buf[0]), "%" PRId64, guest_mb);
    snprintf(buf[1], sizeof(buf[1]), "%" PRId64, mem);
    snprintf(buf[2], sizeof(buf[2]), "%" PRId64, lim(limits, "pids"));
    snprintf(buf[3], sizeof(buf[3]), "%" PRId64, lim(limits, "nofile"));
    snprintf(buf[4], sizeof(buf[4]), "%" PRId64, lim(limits, "file_size_bytes"));
    snprintf(buf[5], sizeof(buf[5]), "%" PRId64, lim(limits, "cpu_ms"));
    snprintf(buf[6], sizeof(buf[6]), "%" PRId64, lim(limits, "tmp_bytes"));
    const char *pre[] = {vmrun,  "--dir",       TC_VM_MOUNT, "--accel",  h->accel, "--guest-mb",
                         buf[0], "--cpus",      "1",         "--memory", buf[1],   "--pids",
                         buf[2], "--nofile",    buf[3],      "--fsize",  buf[4],   "--cpu-ms",
                         buf[5], "--tmp-bytes", buf[6]};
    for (size_t i = 0; i < TC_ARRAY_SIZE(pre); i++)
        json_array_append_new(argv, json_string(pre[i]));
    json_t *sf = json_object_get(out, "secret_files");
    if (json_is_array(sf) && json_array_size(sf) > 0)
        json_array_append_new(argv, json_string("--secrets"));
    json_array_append_new(argv, json_string("--"));
    json_array_extend(argv, json_object_get(out, "argv"));
    json_object_set_new(out, "argv", argv);

    json_t *mounts = json_object_get(out, "mounts");
    if (!json_is_array(mounts)) {
        mounts = json_array();
        json_object_set_new(out, "mounts", mounts);
    }
    /* toolcage-init mounts it before its pivot, its cwd the launcher's scratch: by that
     * path, as the state directory above it may be closed to the sandbox's uid */
    json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "source", "/proc/self/cwd/vm",
                                            "target", TC_VM_MOUNT, "writable", 0));
    /* qemu's limits on the host: the guest's memory and qemu's own; its threads and files;
     * CPU: under TCG qemu spends many times the guest's CPU time, so on the host only the
     * wall clock bounds it (the guest's program has its own RLIMIT_CPU) */
    set_lim(limits, "memory_bytes", (guest_mb + QEMU_EXTRA_MB) << 20);
    set_lim(limits, "pids", QEMU_PIDS);
    set_lim(limits, "nofile", QEMU_NOFILE);
    int64_t host_cpu = wall * 2 + 1000;
    set_lim(limits, "cpu_ms", host_cpu < TC_VM_CPU_MS_MAX ? host_cpu : TC_VM_CPU_MS_MAX);
    return out;
}

int64_t tc_vm_program_memory(int64_t host_bytes)
{
    int64_t extra = (int64_t)(GUEST_EXTRA_MB + QEMU_EXTRA_MB) << 20;
    return host_bytes > extra ? host_bytes - extra : 0;
}

json_t *tc_vm_enforced(const char *accel)
{
    char iso[24];
    snprintf(iso, sizeof(iso), "microvm_%s", accel);
    /* the program's limits are the guest kernel's (its cgroup v2, its rlimits, its tmpfs);
     * qemu around it is bounded on the host as a native sandbox is */
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "wall_ms", "launcher",
                     "cpu_ms", "guest_cgroup_v2", "memory_bytes", "guest_cgroup_v2", "pids",
                     "guest_cgroup_v2", "file_size_bytes", "guest_rlimit", "nofile", "guest_rlimit",
                     "output_bytes", "launcher", "workspace_bytes", "tmpfs", "tmp_bytes",
                     "guest_tmpfs", "isolation", iso);
}

json_t *tc_vm_report(const struct tc_vm_host *h)
{
    if (!h->available)
        return json_pack("{s:b, s:s}", "available", 0, "why", h->why);
    json_t *r = json_pack("{s:b, s:s, s:s, s:s, s:s}", "available", 1, "accel", h->accel, "kernel",
                          h->kernel, "boot", h->boot, "kvm",
                          "not used: qemu runs in a native sandbox without /dev/kvm "
                          "(docs/sandbox.md)");
    if (r && h->boot_why[0])
        json_object_set_new(r, "boot_why", json_string(h->boot_why));
    return r;
}

bool tc_vm_qemu_probe(const char *name)
{
    static const char *const probes[] = {"io_uring_setup", "set_mempolicy", "mbind",
                                         "get_mempolicy"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(probes); i++)
        if (strcmp(name, probes[i]) == 0)
            return true;
    return false;
}
