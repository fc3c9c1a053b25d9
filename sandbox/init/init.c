/* toolcage-init: the sandbox's PID 1. A small static program, exec'ed by the launcher's
 * clone once it is in its cgroups and has its uid/gid maps, so that no sandbox process ever
 * holds a copy of the launcher's memory (other sandboxes' specs, stdin, secrets). It arrives
 * with uid/gid 1000 in the sandbox's user namespace and its capabilities there as ambient
 * caps. It takes its own mount namespace, builds what every sandbox has in its root
 * filesystem (from the base configuration on fd 5) and waits, maybe in the launcher's pool
 * of ready shells, for "go" with the sandbox's configuration (init_proto.h) on fd 3; then
 * it adds the sandbox's own mounts, pivots into the root, forks the program (which drops
 * every privilege, loads seccomp last and execs) and reaps everything until the program
 * exits. See docs/sandbox.md. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init_proto.h"

struct mnt {
    const char *source, *target;
    int writable;
};

struct bind {
    const char *src, *dst;
    bool is_dir;
};

struct secret {
    const char *name;
    const unsigned char *data;
    uint32_t len;
};

/* The base (before go) and the sandbox's configuration (after), init_proto.h. */
struct cfg {
    int cap_last_cap;
    const struct tc_init_hdr *h;
    const char *newroot, *ws_path, *cwd, *hostname, *localtime_target;
    const char *image; /* "" or the tool image's root, "img/<chain id>" (init_proto.h) */
    char **argv, **envp;
    struct mnt *mounts;
    size_t n_mounts;
    struct bind *binds;
    int n_binds;
    const char **links, **link_targets;
    int n_links;
    struct secret *secrets;
    size_t n_secrets;
    struct sock_fprog bpf;
    int ctl_fd;
};

#define SBX_PASSWD                                                                                 \
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"                                                    \
    "sandbox:x:1000:1000:sandbox:/workspace:/bin/bash\n"                                           \
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
#define SBX_GROUP "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"
#define SBX_NSSWITCH                                                                               \
    "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n"                  \
    "protocols: files\nservices: files\n"

/* ---- small helpers ---- */

static _Noreturn void die(const struct cfg *cfg, int err, const char *what)
{
    struct tc_ctl_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_SETUP_ERROR;
    m.err = err;
    snprintf(m.what, sizeof(m.what), "%s", what);
    (void)send(cfg->ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    _exit(125);
}

#define CHECK(cfg, expr, what)                                                                     \
    do {                                                                                           \
        if ((expr) < 0)                                                                            \
            die(cfg, errno, what);                                                                 \
    } while (0)

static void path_in(char *buf, size_t size, const char *root, const char *rel)
{
    int n = snprintf(buf, size, "%s/%s", root, rel);
    if (n < 0 || (size_t)n >= size)
        buf[0] = '\0'; /* makes the following syscall fail with ENOENT */
}

static int write_file(const char *path, const char *data, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    size_t len = strlen(data), off = 0;

    if (fd < 0)
        return -1;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        off += (size_t)n;
    }
    return close(fd);
}

static int touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    return close(fd);
}

/* mkdir -p inside the new root (components already validated: no "..") */
static int mkdir_p(char *path, mode_t mode)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int r = mkdir(path, mode);
        *p = '/';
        if (r < 0 && errno != EEXIST)
            return -1;
    }
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int setattr(const char *path, uint64_t set, bool recursive)
{
    struct mount_attr a;
    memset(&a, 0, sizeof(a));
    a.attr_set = set;
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a,
                        sizeof(a));
}

static int bind_mount(const char *src, const char *dst, bool ro)
{
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        return -1;
    return setattr(dst, (ro ? MOUNT_ATTR_RDONLY : 0) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
}

/* ---- root filesystem ---- */

static void setup_dev(const struct cfg *cfg, const char *root)
{
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
    static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                           {"stdin", "/proc/self/fd/0"},
                                           {"stdout", "/proc/self/fd/1"},
                                           {"stderr", "/proc/self/fd/2"},
                                           {"core", "/proc/kcore"}};
    char dev[PATH_MAX], p[PATH_MAX];

    path_in(dev, sizeof(dev), root, "dev");
    CHECK(cfg, mkdir(dev, 0755), "mkdir /dev");
    CHECK(cfg,
          mount("tcdev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"),
          "mount /dev");
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        char host[32];
        snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
        path_in(p, sizeof(p), dev, nodes[i]);
        CHECK(cfg, touch(p), "create /dev node");
        if (mount(host, p, NULL, MS_BIND, NULL) < 0)
            die(cfg, errno, "bind /dev node");
    }
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]) - 1; i++) {
        path_in(p, sizeof(p), dev, links[i][0]);
        CHECK(cfg, symlink(links[i][1], p), "symlink in /dev");
    }
    path_in(p, sizeof(p), dev, "shm");
    CHECK(cfg, mkdir(p, 0755), "mkdir /dev/shm");
    /* (/dev/shm is mounted at go, with the sandbox's size: a mount point needs no write) */
    CHECK(cfg, setattr(dev, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false),
          "remount /dev ro");
}

/* The /etc files every sandbox gets from us (a tool image's own /etc shows through the rest). */
static void write_etc_files(const struct cfg *cfg, const char *etc)
{
    char p[PATH_MAX];
    const char *files[][2] = {{"passwd", SBX_PASSWD},
                              {"group", SBX_GROUP},
                              {"resolv.conf", ""},
                              {"nsswitch.conf", SBX_NSSWITCH}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        path_in(p, sizeof(p), etc, files[i][0]);
        CHECK(cfg, write_file(p, files[i][1], 0644), "write /etc file");
    }
}

static void setup_etc(const struct cfg *cfg, const char *root)
{
    char etc[PATH_MAX], p[PATH_MAX];

    path_in(etc, sizeof(etc), root, "etc");
    CHECK(cfg, mkdir(etc, 0755), "mkdir /etc");
    write_etc_files(cfg, etc);
    if (cfg->localtime_target[0]) {
        path_in(p, sizeof(p), etc, "localtime");
        CHECK(cfg, symlink(cfg->localtime_target, p), "symlink /etc/localtime");
    }
    for (int i = 0; i < cfg->n_binds; i++) {
        path_in(p, sizeof(p), root, cfg->binds[i].dst);
        if (cfg->binds[i].is_dir) {
            CHECK(cfg, mkdir_p(p, 0755), "mkdir /etc bind");
        } else {
            char *slash = strrchr(p, '/');
            *slash = '\0';
            CHECK(cfg, mkdir_p(p, 0755), "mkdir /etc bind parent");
            *slash = '/';
            CHECK(cfg, touch(p), "create /etc bind");
        }
        CHECK(cfg, bind_mount(cfg->binds[i].src, p, true), "bind /etc entry");
    }
}

/* The sandbox's hostname in /etc (at go). */
static void setup_etc_host(const struct cfg *cfg, const char *root)
{
    char etc[PATH_MAX], p[PATH_MAX], hosts[256];

    path_in(etc, sizeof(etc), root, "etc");
    snprintf(hosts, sizeof(hosts), "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t%s\n",
             cfg->hostname);
    path_in(p, sizeof(p), etc, "hosts");
    CHECK(cfg, write_file(p, hosts, 0644), "write /etc file");
    path_in(p, sizeof(p), etc, "hostname");
    CHECK(cfg, write_file(p, cfg->hostname, 0644), "write /etc file");
}

/* The spec's mounts: with make, their targets are made first (in root, or in an image's
 * skeleton), without, only mounted. */
static void setup_mounts(const struct cfg *cfg, const char *root, bool make, bool mount_them)
{
    char p[PATH_MAX];

    for (size_t i = 0; i < cfg->n_mounts; i++) {
        const struct mnt *m = &cfg->mounts[i];
        struct stat st;
        CHECK(cfg, stat(m->source, &st), "spec mount source");
        snprintf(p, sizeof(p), "%s%s", root, m->target);
        if (!make) {
        } else if (S_ISDIR(st.st_mode)) {
            CHECK(cfg, mkdir_p(p, 0755), "spec mount target");
        } else {
            char *slash = strrchr(p, '/');
            *slash = '\0';
            CHECK(cfg, mkdir_p(p, 0755), "spec mount target");
            *slash = '/';
            CHECK(cfg, touch(p), "spec mount target");
        }
        if (mount_them)
            CHECK(cfg, bind_mount(m->source, p, !m->writable), "spec mount");
    }
}

/* Leased secret files: /run/secrets is a tmpfs of its own (gone with the sandbox), the
 * directory 0500 and each file 0400, owned by the sandbox uid (our fsuid), then read-only. */
static void mkdir_secrets(const struct cfg *cfg, const char *root)
{
    char p[PATH_MAX];

    path_in(p, sizeof(p), root, "run");
    CHECK(cfg, mkdir(p, 0755), "mkdir /run");
    path_in(p, sizeof(p), root, "run/secrets");
    CHECK(cfg, mkdir(p, 0500), "mkdir /run/secrets");
}

static void setup_secrets(const struct cfg *cfg, const char *root, bool made)
{
    char p[PATH_MAX], opts[96];

    if (cfg->n_secrets == 0)
        return;
    if (!made)
        mkdir_secrets(cfg, root);
    path_in(p, sizeof(p), root, "run/secrets");
    snprintf(opts, sizeof(opts), "mode=0700,size=%u,nr_inodes=%u",
             cfg->h->secrets_bytes + (1u << 16), (unsigned)cfg->n_secrets + 8);
    CHECK(cfg, mount("tcsecrets", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts),
          "mount /run/secrets");
    for (size_t i = 0; i < cfg->n_secrets; i++) {
        const struct secret *sf = &cfg->secrets[i];
        char fp[PATH_MAX + 256];
        size_t off = 0;
        int fd;

        snprintf(fp, sizeof(fp), "%s/%s", p, sf->name);
        fd = open(fp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
        while (fd >= 0 && off < sf->len) {
            ssize_t n = write(fd, sf->data + off, sf->len - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                break;
            off += (size_t)n;
        }
        if (fd < 0 || off < sf->len || fchmod(fd, 0400) < 0)
            die(cfg, errno ? errno : EIO, "write /run/secrets file");
        close(fd);
    }
    CHECK(cfg, chmod(p, 0500), "chmod /run/secrets");
    CHECK(cfg,
          setattr(p, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                  false),
          "remount /run/secrets ro");
}

/* What every sandbox has (before go, from the base configuration): the root tmpfs, /usr,
 * /etc but the hostname files, /proc, /dev, and the empty mount points. */
static void setup_root_base(const struct cfg *cfg)
{
    const char *root = cfg->newroot;
    char p[PATH_MAX];

    CHECK(cfg,
          mount("tcroot", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096"),
          "mount root tmpfs");

    path_in(p, sizeof(p), root, "usr");
    CHECK(cfg, mkdir(p, 0755), "mkdir /usr");
    CHECK(cfg, bind_mount("/usr", p, true), "bind /usr");
    for (int i = 0; i < cfg->n_links; i++) {
        path_in(p, sizeof(p), root, cfg->links[i]);
        CHECK(cfg, symlink(cfg->link_targets[i], p), "merged-usr symlink");
    }
    setup_etc(cfg, root);

    path_in(p, sizeof(p), root, "proc");
    CHECK(cfg, mkdir(p, 0555), "mkdir /proc");
    CHECK(cfg, mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "mount /proc");
    path_in(p, sizeof(p), root, "proc/sys");
    CHECK(cfg, bind_mount(p, p, true), "read-only /proc/sys");

    setup_dev(cfg, root);

    path_in(p, sizeof(p), root, "tmp");
    CHECK(cfg, mkdir(p, 01777), "mkdir /tmp");
    path_in(p, sizeof(p), root, "workspace");
    CHECK(cfg, mkdir(p, 0755), "mkdir /workspace");
    path_in(p, sizeof(p), root, "root");
    CHECK(cfg, mkdir(p, 0700), "mkdir /root");
    path_in(p, sizeof(p), root, "home");
    CHECK(cfg, mkdir(p, 0755), "mkdir /home");
}

/* A tool image's root (at go): a read-only overlay of a skeleton of ours (every mount point,
 * the /etc files we write) over the image's unpacked root, which the launcher bound at
 * cfg->image. A directory of the skeleton hides whatever the image has at that name (a
 * symlink /proc -> / in an image stays invisible), so each mount below lands on a directory
 * of ours. /proc and /dev move over from the base root. Returns the new root's path. */
static const char *setup_image_root(const struct cfg *cfg)
{
    static char merged[PATH_MAX];
    char skel[PATH_MAX], p[PATH_MAX], q[PATH_MAX], opts[PATH_MAX * 2 + 32];
    static const struct {
        const char *path;
        mode_t mode;
    } dirs[] = {{"proc", 0555}, {"dev", 0755},  {"tmp", 01777}, {"workspace", 0755},
                {"etc", 0755},  {"root", 0700}, {"home", 0755}};

    path_in(skel, sizeof(skel), cfg->newroot, ".skel");
    path_in(merged, sizeof(merged), cfg->newroot, ".image");
    CHECK(cfg, mkdir(skel, 0755), "mkdir image skeleton");
    CHECK(cfg, mkdir(merged, 0755), "mkdir image root");
    CHECK(cfg,
          mount("tcskel", skel, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096"),
          "mount image skeleton");
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        path_in(p, sizeof(p), skel, dirs[i].path);
        CHECK(cfg, mkdir(p, dirs[i].mode), "mkdir in image skeleton");
        CHECK(cfg, chmod(p, dirs[i].mode), "chmod in image skeleton");
    }
    path_in(p, sizeof(p), skel, "etc");
    write_etc_files(cfg, p);
    setup_etc_host(cfg, skel);
    if (cfg->n_secrets)
        mkdir_secrets(cfg, skel);
    setup_mounts(cfg, skel, true, false);
    CHECK(cfg, setattr(skel, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false),
          "remount image skeleton ro");

    int n = snprintf(opts, sizeof(opts), "lowerdir=%s:%s", skel, cfg->image);
    if (n < 0 || (size_t)n >= sizeof(opts) || strpbrk(cfg->image, ",:\\") || strpbrk(skel, ",:\\"))
        die(cfg, EINVAL, "image root path");
    CHECK(cfg, mount("tcimage", merged, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts),
          "mount image root (overlay)");
    path_in(p, sizeof(p), cfg->newroot, "proc");
    path_in(q, sizeof(q), merged, "proc");
    CHECK(cfg, mount(p, q, NULL, MS_MOVE, NULL), "move /proc to the image root");
    path_in(p, sizeof(p), cfg->newroot, "dev");
    path_in(q, sizeof(q), merged, "dev");
    CHECK(cfg, mount(p, q, NULL, MS_MOVE, NULL), "move /dev to the image root");
    return merged;
}

/* The sandbox's own part (at go), then pivot into the root. */
static void setup_root(const struct cfg *cfg)
{
    const bool image = cfg->image[0] != '\0';
    const char *root = image ? setup_image_root(cfg) : cfg->newroot;
    char p[PATH_MAX], opts[96];

    if (!image)
        setup_etc_host(cfg, root);
    path_in(p, sizeof(p), root, "dev/shm");
    snprintf(opts, sizeof(opts), "mode=1777,size=%lld,nr_inodes=4096",
             (long long)cfg->h->tmp_bytes);
    CHECK(cfg, mount("tcshm", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts),
          "mount /dev/shm");
    path_in(p, sizeof(p), root, "tmp");
    snprintf(opts, sizeof(opts), "mode=1777,size=%lld,nr_inodes=%lld", (long long)cfg->h->tmp_bytes,
             (long long)(cfg->h->tmp_bytes / 4096 + 64));
    CHECK(cfg, mount("tctmp", p, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount /tmp");
    setup_secrets(cfg, root, image);

    /* The workspace reached our copy of the launcher's ws directory by propagation (it was
     * mounted after we took the copy); from here on, nothing propagates to us any more. */
    struct stat ws, wsdir;
    snprintf(p, sizeof(p), "%s/..", cfg->ws_path);
    CHECK(cfg, stat(cfg->ws_path, &ws), "workspace");
    CHECK(cfg, stat(p, &wsdir), "workspace");
    if (ws.st_dev == wsdir.st_dev) /* never bind the launcher's scratch directory instead */
        die(cfg, ENOENT, "workspace not mounted");
    /* and only our own: the copy of ws holds every workspace mounted since this shell was
     * made; another sandbox's root belongs to a host uid that is unmapped here */
    if (ws.st_uid != TC_SANDBOX_UID)
        die(cfg, EPERM, "workspace of another sandbox");
    path_in(p, sizeof(p), root, "workspace");
    CHECK(cfg, bind_mount(cfg->ws_path, p, false), "bind /workspace");
    CHECK(cfg, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make / private");
    setup_mounts(cfg, root, !image, true);

    CHECK(cfg, setattr(root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false),
          "remount root ro");
    CHECK(cfg, chdir(root), "chdir new root");
    /* pivot_root(".", "."): the old root ends up stacked on top; detach it. */
    CHECK(cfg, (int)syscall(SYS_pivot_root, ".", "."), "pivot_root");
    CHECK(cfg, umount2(".", MNT_DETACH), "detach old root");
    CHECK(cfg, chdir("/"), "chdir /");
}

static void setup_lo(const struct cfg *cfg)
{
    struct ifreq ifr;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (s < 0)
        die(cfg, errno, "socket for lo");
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        die(cfg, errno, "SIOCGIFFLAGS lo");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        die(cfg, errno, "SIOCSIFFLAGS lo");
    close(s);
}

/* ---- privileges ---- */

/* Before go, what neither init nor the program will ever need again: the capabilities an
 * exec could grant (bounding set, ambient; init keeps its permitted and effective ones for
 * the mounts), and every signal disposition inherited from the launcher (SIGPIPE ignored). */
static void drop_for_exec(const struct cfg *cfg)
{
    for (int c = 0; c <= cfg->cap_last_cap; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
            die(cfg, errno, "drop bounding set");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        die(cfg, errno, "clear ambient capabilities");
    /* by the system call: a C library keeps signals of its own (musl 32-34, glibc 32-33) that
     * its sigaction refuses, and an ignored one would reach the program */
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        uint64_t mask;
    } dfl = {.handler = SIG_DFL};
    for (int s = 1; s <= 64; s++)
        if (s != SIGKILL && s != SIGSTOP)
            (void)syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof(dfl.mask));
}

/* The rest (drop_for_exec() ran before go): no capability left, no way to gain one. */
static int drop_caps(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];

    memset(d, 0, sizeof(d));
    if (syscall(SYS_capset, &h, d) < 0)
        return -1;
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* Never above the hard limit we inherited: raising it needs CAP_SYS_RESOURCE in the
 * initial user namespace, which the sandbox does not have. */
static int set_rlimit(int res, rlim_t v)
{
    struct rlimit rl;
    if (getrlimit(res, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
        v = rl.rlim_max;
    rl.rlim_cur = rl.rlim_max = v;
    return setrlimit(res, &rl);
}

static void set_limits(const struct cfg *cfg)
{
    const struct tc_init_hdr *l = cfg->h;
    /* RLIMIT_CPU is per process and whole seconds: a backstop behind the cgroup poll.
     * Soft limit -> SIGXCPU, one second later the kernel sends SIGKILL. */
    rlim_t cpu_s = (rlim_t)((l->cpu_ms + 999) / 1000);
    struct rlimit cpu = {.rlim_cur = cpu_s, .rlim_max = cpu_s + 1};

    CHECK(cfg, set_rlimit(RLIMIT_FSIZE, (rlim_t)l->file_size_bytes), "RLIMIT_FSIZE");
    CHECK(cfg, set_rlimit(RLIMIT_NOFILE, (rlim_t)l->nofile), "RLIMIT_NOFILE");
    CHECK(cfg, set_rlimit(RLIMIT_CORE, 0), "RLIMIT_CORE");
    CHECK(cfg, set_rlimit(RLIMIT_MEMLOCK, 0), "RLIMIT_MEMLOCK");
    CHECK(cfg, set_rlimit(RLIMIT_MSGQUEUE, 0), "RLIMIT_MSGQUEUE");
    CHECK(cfg, setrlimit(RLIMIT_CPU, &cpu), "RLIMIT_CPU");
    CHECK(cfg,
          set_rlimit(RLIMIT_STACK, l->memory_bytes < (8 << 20) ? (rlim_t)l->memory_bytes : 8 << 20),
          "RLIMIT_STACK");
    if ((cfg->h->flags & TC_INIT_F_RLIMIT_AS))
        CHECK(cfg, set_rlimit(RLIMIT_AS, (rlim_t)l->memory_bytes), "RLIMIT_AS");
    if ((cfg->h->flags & TC_INIT_F_RLIMIT_NPROC))
        CHECK(cfg, set_rlimit(RLIMIT_NPROC, (rlim_t)l->pids), "RLIMIT_NPROC");
}

/* ---- configuration ---- */

struct reader {
    const char *p, *end;
};

static const char *next_str(struct reader *r)
{
    const char *s = r->p;
    const char *nul = r->p < r->end ? memchr(r->p, '\0', (size_t)(r->end - r->p)) : NULL;
    if (!nul)
        return NULL;
    r->p = nul + 1;
    return s;
}

/* Reads fd TC_INIT_FD_CFG into memory (kept: cfg points into it) and closes it. */
static char *read_cfg_fd(size_t min, size_t *ret_len)
{
    struct stat st;
    char *buf;
    size_t off = 0;

    if (fstat(TC_INIT_FD_CFG, &st) < 0 || st.st_size < (off_t)min ||
        st.st_size > (off_t)TC_INIT_MAX_CFG)
        return NULL;
    buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return NULL;
    while (off < (size_t)st.st_size) {
        ssize_t n = pread(TC_INIT_FD_CFG, buf + off, (size_t)st.st_size - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        off += (size_t)n;
    }
    close(TC_INIT_FD_CFG);
    *ret_len = off;
    return buf;
}

/* The base configuration (at start). -1 on a malformed blob. */
static int load_base(struct cfg *c)
{
    size_t len;
    char *buf = read_cfg_fd(sizeof(struct tc_init_base_hdr), &len);
    const struct tc_init_base_hdr *h = (const struct tc_init_base_hdr *)(void *)buf;
    struct reader r;

    if (!buf || h->magic != TC_INIT_BASE_MAGIC || h->size != len || h->n_binds > 64 ||
        h->n_links > 16 || h->cap_last_cap > 127)
        return -1;
    c->cap_last_cap = (int)h->cap_last_cap;
    r.p = buf + sizeof(*h);
    r.end = buf + len;
    c->binds = calloc(h->n_binds + 1, sizeof(*c->binds));
    c->links = calloc(h->n_links + 1, sizeof(char *));
    c->link_targets = calloc(h->n_links + 1, sizeof(char *));
    if (!c->binds || !c->links || !c->link_targets)
        return -1;
    if (!(c->newroot = next_str(&r)) || !(c->localtime_target = next_str(&r)))
        return -1;
    for (uint32_t i = 0; i < h->n_binds; i++) {
        const char *d;
        if (!(c->binds[i].src = next_str(&r)) || !(c->binds[i].dst = next_str(&r)) ||
            !(d = next_str(&r)))
            return -1;
        c->binds[i].is_dir = d[0] == 'd';
    }
    c->n_binds = (int)h->n_binds;
    for (uint32_t i = 0; i < h->n_links; i++)
        if (!(c->links[i] = next_str(&r)) || !(c->link_targets[i] = next_str(&r)))
            return -1;
    c->n_links = (int)h->n_links;
    return 0;
}

/* The sandbox's configuration (after go). -1 on a malformed blob. */
static int load_cfg(struct cfg *c)
{
    size_t len;
    char *buf = read_cfg_fd(sizeof(struct tc_init_hdr), &len);
    const struct tc_init_hdr *h = (const struct tc_init_hdr *)(void *)buf;
    struct reader r;

    c->h = h; /* owned from here on (NULL if unread), valid once checked */
    if (!buf || h->magic != TC_INIT_MAGIC || h->size != len || h->n_argv == 0 || h->n_argv > 4096 ||
        h->n_env > 4096 || h->n_mounts > 64 || h->n_secrets > 64 || h->bpf_off % 8 ||
        h->bpf_off > h->size || h->bpf_len == 0 || h->bpf_len > BPF_MAXINSNS ||
        (uint64_t)h->bpf_len * sizeof(struct sock_filter) > h->size - h->bpf_off)
        return -1;
    r.p = buf + sizeof(*h);
    r.end = buf + h->bpf_off;
    c->argv = calloc(h->n_argv + 1, sizeof(char *));
    c->envp = calloc(h->n_env + 1, sizeof(char *));
    c->mounts = calloc(h->n_mounts + 1, sizeof(*c->mounts));
    c->secrets = calloc(h->n_secrets + 1, sizeof(*c->secrets));
    if (!c->argv || !c->envp || !c->mounts || !c->secrets)
        return -1;
    if (!(c->ws_path = next_str(&r)) || !(c->cwd = next_str(&r)) || !(c->hostname = next_str(&r)) ||
        !(c->image = next_str(&r)))
        return -1;
    for (uint32_t i = 0; i < h->n_argv; i++)
        if (!(c->argv[i] = (char *)next_str(&r)))
            return -1;
    for (uint32_t i = 0; i < h->n_env; i++)
        if (!(c->envp[i] = (char *)next_str(&r)))
            return -1;
    for (uint32_t i = 0; i < h->n_mounts; i++) {
        const char *w;
        if (!(c->mounts[i].source = next_str(&r)) || !(c->mounts[i].target = next_str(&r)) ||
            !(w = next_str(&r)))
            return -1;
        c->mounts[i].writable = w[0] == 'w';
    }
    c->n_mounts = h->n_mounts;
    for (uint32_t i = 0; i < h->n_secrets; i++) {
        uint32_t slen;
        if (!(c->secrets[i].name = next_str(&r)) || r.end - r.p < 4)
            return -1;
        memcpy(&slen, r.p, 4);
        r.p += 4;
        if ((size_t)(r.end - r.p) < slen)
            return -1;
        c->secrets[i].data = (const unsigned char *)r.p;
        c->secrets[i].len = slen;
        r.p += slen;
    }
    c->n_secrets = h->n_secrets;
    c->bpf.len = (unsigned short)h->bpf_len;
    c->bpf.filter = (struct sock_filter *)(void *)(buf + h->bpf_off);
    return 0;
}

/* ---- go ---- */

/* A shell waits here, possibly long before its sandbox exists (the launcher's pool), for one
 * byte with the configuration memfd, which goes to TC_INIT_FD_CFG. EOF: dropped. */
static void wait_for_go(void)
{
    char c, cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr mh;
    struct cmsghdr *cm;
    int fd = -1;
    ssize_t n;

    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    do
        n = recvmsg(TC_INIT_FD_SYNC, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        _exit(125);
    cm = CMSG_FIRSTHDR(&mh);
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
    if (fd < 0 || (fd != TC_INIT_FD_CFG && dup2(fd, TC_INIT_FD_CFG) < 0))
        _exit(125);
    if (fd != TC_INIT_FD_CFG)
        close(fd);
}

/* ---- the program ---- */

static _Noreturn void exec_program(const struct cfg *cfg, int verdict)
{
    struct tc_ctl_msg m;
    sigset_t none;
    int lfd, r;
    bool notify = cfg->h->flags & TC_INIT_F_NOTIFY;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* dispositions: default since drop_for_exec() */
    /* the verdict pipe's write end at fd 3 across the exec (the sync socket's number, closed
     * since go), the only descriptor of ours the program gets */
    if (verdict >= 0 && (verdict == 3 ? fcntl(3, F_SETFD, 0) : dup2(verdict, 3)) < 0)
        die(cfg, errno, "verdict pipe");
    if (setsid() < 0)
        die(cfg, errno, "setsid");
    if (chdir(cfg->cwd) < 0)
        die(cfg, errno, "chdir to cwd");
    set_limits(cfg);
    if (drop_caps() < 0)
        die(cfg, errno, "drop capabilities");
    /* Last step before exec: from here on every denied syscall goes to the launcher. */
    lfd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                       notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &cfg->bpf);
    if (lfd < 0)
        die(cfg, errno, "seccomp");
    if (notify) {
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov;
        struct msghdr mh;
        struct cmsghdr *cm;

        memset(&m, 0, sizeof(m));
        m.kind = TC_CTL_NOTIFY_FD;
        memset(cbuf, 0, sizeof(cbuf));
        memset(&mh, 0, sizeof(mh));
        iov.iov_base = &m;
        iov.iov_len = sizeof(m);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof(cbuf);
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &lfd, sizeof(int));
        if (sendmsg(cfg->ctl_fd, &mh, MSG_NOSIGNAL) < 0)
            _exit(125);
        close(lfd);
    }
    execve(cfg->argv[0], cfg->argv, cfg->envp);
    r = errno;
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_EXEC_ERROR;
    m.err = r;
    (void)send(cfg->ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    dprintf(2, "toolcage: cannot execute %s: %s\n", cfg->argv[0], strerror(r));
    _exit(127);
}

static volatile sig_atomic_t g_program_pid;

/* SIGTERM to the program; SIGINT to its process group (it leads one, setsid), as a terminal's
 * ^C: a session's interrupt reaches the command its shell waits for (sandbox.h "session"). */
static void forward_signal(int sig)
{
    if (g_program_pid > 0)
        kill(sig == SIGINT ? -(pid_t)g_program_pid : (pid_t)g_program_pid, sig);
}

int main(int argc, char **argv)
{
    struct cfg cfg;
    struct tc_ctl_msg m;
    struct sigaction sa;
    sigset_t none;
    pid_t prog;
    int status = 0, verdict[2] = {-1, -1};

    (void)argc;
    (void)argv;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ctl_fd = TC_INIT_FD_CTL;
    /* Nothing of the sandbox may read or trace PID 1 (it runs with capabilities until the
     * program is started). PDEATHSIG again: the exec may have cleared it. */
    prctl(PR_SET_DUMPABLE, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getpid() != 1)
        return 125; /* only ever PID 1 of a fresh sandbox */
    /* The control socket must not reach the program (its child closes it at execve;
     * tests/attacks/042 looks for such leaks); nor the sync socket, done with after go. */
    fcntl(TC_INIT_FD_CTL, F_SETFD, FD_CLOEXEC);
    /* Before go, what every sandbox has: our own mount namespace (a copy of the launcher's;
     * its ws directory keeps receiving the workspaces mounted since), the root filesystem
     * but the sandbox's own mounts, lo. */
    if (load_base(&cfg) < 0)
        die(&cfg, EINVAL, "toolcage-init: bad base configuration");
    if (unshare(CLONE_NEWNS) < 0)
        die(&cfg, errno, "unshare mount namespace");
    setup_root_base(&cfg);
    setup_lo(&cfg);
    drop_for_exec(&cfg);
    wait_for_go();
    close(TC_INIT_FD_SYNC);
    if (load_cfg(&cfg) < 0)
        die(&cfg, EINVAL, "toolcage-init: bad configuration");
    if (unshare(CLONE_NEWCGROUP) < 0)
        die(&cfg, errno, "unshare cgroup namespace");
    setup_root(&cfg);
    CHECK(&cfg, sethostname(cfg.hostname, strlen(cfg.hostname)), "sethostname");

    if ((cfg.h->flags & TC_INIT_F_VERDICT) && pipe2(verdict, O_CLOEXEC) < 0)
        die(&cfg, errno, "verdict pipe");
    prog = fork();
    if (prog < 0)
        die(&cfg, errno, "fork program");
    if (prog == 0)
        exec_program(&cfg, verdict[1]);
    g_program_pid = prog;
    if (verdict[1] >= 0)
        close(verdict[1]);

    /* PID 1 keeps nothing it does not need. */
    close(0);
    close(1);
    close(2);
    drop_caps();
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, 0);
        if (p < 0 && errno == EINTR)
            continue;
        if (p < 0)
            break;
        if (p == prog) {
            status = st;
            break;
        }
    }
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_EXIT;
    m.wstatus = status;
    if (verdict[0] >= 0) { /* written before the program's end, or never */
        fcntl(verdict[0], F_SETFL, O_NONBLOCK);
        ssize_t n = read(verdict[0], m.what, sizeof(m.what) - 1);
        m.what[n > 0 ? n : 0] = '\0';
    }
    (void)send(cfg.ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    /* Exiting as PID 1 kills every remaining process of the namespace. */
    _exit(0);
}
