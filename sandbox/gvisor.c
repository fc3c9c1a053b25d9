/* gvisor backend: bundle generation and runsc's exit protocol (see gvisor.h). */
#include "sandbox/gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/init/init_proto.h"
#include "sandbox/workspace.h"

void tc_gv_detect(struct tc_gv_host *h, const char *platform)
{
    memset(h, 0, sizeof(*h));
    snprintf(h->platform, sizeof(h->platform), "%s",
             platform && (strcmp(platform, "kvm") == 0 || strcmp(platform, "ptrace") == 0)
                 ? platform
                 : "ptrace");
    h->available = tc_find_runsc(h->runsc, sizeof(h->runsc)) == 0;
}

/* ---- bundle ---- */

static int fail(char *err, size_t errlen, int r, const char *what)
{
    snprintf(err, errlen, "%s: %s", what, strerror(-r));
    return r;
}

/* mkdir -p of a path relative to dirfd, one component at a time with O_NOFOLLOW: the
 * skeleton holds symlinks (bin -> usr/bin, maybe absolute), and a mount point under one must
 * never make the launcher (root) create something on the host. The last component is a file
 * when file is set. 0 or -errno (-ELOOP/-ENOTDIR through a symlink). */
static int make_path(int dirfd, const char *rel, bool file)
{
    char buf[PATH_MAX];
    size_t n = strlen(rel);
    if (n == 0 || n >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, rel, n + 1);
    int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    char *save = NULL, *name = strtok_r(buf, "/", &save);
    int r = 0;
    while (name && r == 0) {
        char *next = strtok_r(NULL, "/", &save);
        if (!next && file) {
            int fd = openat(cur, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0)
                r = -errno;
            else
                close(fd);
        } else {
            if (mkdirat(cur, name, 0755) < 0 && errno != EEXIST)
                r = -errno;
            int fd = r ? -1 : openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (!r && fd < 0)
                r = -errno;
            if (fd >= 0) {
                close(cur);
                cur = fd;
            }
        }
        name = next;
    }
    close(cur);
    return r;
}

static int write_file(int dirfd, const char *rel, const void *data, size_t len, mode_t mode)
{
    _cleanup_close_ int fd =
        openat(dirfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static json_t *mount_entry(const char *dst, const char *type, const char *src, const char *opts)
{
    json_t *o = json_array();
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", opts);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(o, json_string(t));
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src,
                     "options", o);
}

static json_t *rlimit(const char *type, uint64_t soft, uint64_t hard)
{
    return json_pack("{s:s, s:I, s:I}", "type", type, "soft", (json_int_t)soft, "hard",
                     (json_int_t)hard);
}

static int write_etc(int dirfd, const struct tc_spec *spec, const struct tc_rootfs_info *ri,
                     uid_t uid, char *err, size_t errlen)
{
    char passwd[512], group[256], hosts[256];
    int r;

    snprintf(passwd, sizeof(passwd),
             "root:x:0:0:root:/root:/usr/sbin/nologin\n"
             "sandbox:x:%u:%u:sandbox:/workspace:/bin/bash\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             (unsigned)uid, (unsigned)uid);
    snprintf(group, sizeof(group), "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n", (unsigned)uid);
    snprintf(hosts, sizeof(hosts), "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t%s\n",
             spec->hostname);
    const char *files[][2] = {
        {"rootfs/etc/passwd", passwd},
        {"rootfs/etc/group", group},
        {"rootfs/etc/hosts", hosts},
        {"rootfs/etc/resolv.conf", ""},
        {"rootfs/etc/hostname", spec->hostname},
        {"rootfs/etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                                     "networks: files\nprotocols: files\nservices: files\n"},
    };
    for (size_t i = 0; i < TC_ARRAY_SIZE(files); i++)
        if ((r = write_file(dirfd, files[i][0], files[i][1], strlen(files[i][1]), 0644)) < 0)
            return fail(err, errlen, r, "bundle /etc");
    if (ri && ri->localtime_target[0] &&
        symlinkat(ri->localtime_target, dirfd, "rootfs/etc/localtime") < 0)
        return fail(err, errlen, -errno, "bundle /etc/localtime");
    return 0;
}

static int write_secrets(int dirfd, const char *bundle, const struct tc_spec *spec, uid_t uid,
                         json_t *mounts, char *err, size_t errlen)
{
    char src[PATH_MAX];
    size_t i;
    json_t *f;
    int r;

    if (!spec->secret_files || json_array_size(spec->secret_files) == 0)
        return 0;
    if (mkdirat(dirfd, "secrets", 0700) < 0)
        return fail(err, errlen, -errno, "bundle secrets");
    _cleanup_close_ int sfd =
        openat(dirfd, "secrets", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return fail(err, errlen, -errno, "bundle secrets");
    json_array_foreach(spec->secret_files, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *b64 = json_string_value(json_object_get(f, "content_b64"));
        unsigned char *data = NULL;
        size_t len = 0;
        if (!name || !b64 || tc_b64_decode(b64, strlen(b64), &data, &len) < 0)
            return fail(err, errlen, -EINVAL, "secret file");
        r = write_file(sfd, name, data, len, 0400);
        sodium_memzero(data, len);
        free(data);
        if (r < 0 || fchownat(sfd, name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
            return fail(err, errlen, r < 0 ? r : -errno, "secret file");
    }
    if (fchown(sfd, uid, uid) < 0 || fchmod(sfd, 0500) < 0)
        return fail(err, errlen, -errno, "bundle secrets");
    if ((r = make_path(dirfd, "rootfs/run/secrets", false)) < 0)
        return fail(err, errlen, r, "bundle /run/secrets");
    snprintf(src, sizeof(src), "%s/secrets", bundle);
    json_array_append_new(mounts,
                          mount_entry("/run/secrets", "bind", src, "rbind,ro,nosuid,nodev,noexec"));
    return 0;
}

/* A tool image's root (image/image.h) in the bundle: each entry of the image's top level and
 * of its /etc bound read-only (a link copied as a link), but what the sandbox gets from us
 * (/proc, /dev, /tmp, /workspace, /run, our /etc files). gVisor's gofer serves them; nothing
 * of the host's /usr is there. */
static int image_entries(int dirfd, const char *image, const char *sub, json_t *mounts, char *err,
                         size_t errlen)
{
    static const char *const ours[] = {"proc", "dev", "tmp", "workspace",
                                       "run",  "sys", "etc", NULL};
    static const char *const ours_etc[] = {"passwd",   "group",         "hosts",     "resolv.conf",
                                           "hostname", "nsswitch.conf", "localtime", NULL};
    char dir[PATH_MAX], src[PATH_MAX + 256], rel[PATH_MAX], dst[PATH_MAX], link[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s%s%s", image, sub[0] ? "/" : "", sub);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return errno == ENOENT && sub[0] ? 0 : fail(err, errlen, -errno, "image root");
    }
    struct dirent *de;
    int r = 0;
    while (r == 0 && (de = readdir(d))) {
        const char *n = de->d_name;
        bool skip = !strcmp(n, ".") || !strcmp(n, "..");
        for (const char *const *o = sub[0] ? ours_etc : ours; !skip && *o; o++)
            skip = !strcmp(n, *o);
        if (skip)
            continue;
        struct stat st;
        snprintf(src, sizeof(src), "%s/%s", dir, n);
        snprintf(rel, sizeof(rel), "rootfs/%s%s%s", sub, sub[0] ? "/" : "", n);
        snprintf(dst, sizeof(dst), "/%s%s%s", sub, sub[0] ? "/" : "", n);
        if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            ssize_t k = readlinkat(fd, n, link, sizeof(link) - 1);
            if (k < 0)
                continue;
            link[k] = '\0';
            if (symlinkat(link, dirfd, rel) < 0 && errno != EEXIST)
                r = fail(err, errlen, -errno, "bundle image link");
            continue;
        }
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
            continue;
        if ((r = make_path(dirfd, rel, !S_ISDIR(st.st_mode))) < 0) {
            r = fail(err, errlen, r, "bundle image mount point");
            break;
        }
        json_array_append_new(mounts, mount_entry(dst, "bind", src, "rbind,ro,nosuid,nodev"));
    }
    closedir(d);
    return r;
}

int tc_gv_write_bundle(int dirfd, const char *bundle, const struct tc_spec *spec,
                       const struct tc_rootfs_info *ri, const char *image, const char *ws_path,
                       uid_t uid, bool rlimit_as, char *err, size_t errlen)
{
    static const char *const dirs[] = {"rootfs",     "rootfs/proc", "rootfs/dev",      "rootfs/tmp",
                                       "rootfs/etc", "rootfs/run",  "rootfs/workspace"};
    const struct tc_limits *l = &spec->limits;
    json_t *args = json_array(), *env = json_array(), *mounts = json_array(), *rl = json_array();
    char rel[PATH_MAX], opts[96];
    int r;

    for (size_t i = 0; i < TC_ARRAY_SIZE(dirs); i++)
        if (mkdirat(dirfd, dirs[i], 0755) < 0) {
            r = fail(err, errlen, -errno, "bundle rootfs");
            goto out;
        }
    if (!image && mkdirat(dirfd, "rootfs/usr", 0755) < 0) {
        r = fail(err, errlen, -errno, "bundle rootfs");
        goto out;
    }
    for (int i = 0; !image && i < ri->n_links; i++) {
        snprintf(rel, sizeof(rel), "rootfs/%s", ri->usr_links[i]);
        if (symlinkat(ri->usr_targets[i], dirfd, rel) < 0) {
            r = fail(err, errlen, -errno, "bundle rootfs link");
            goto out;
        }
    }
    if ((r = write_etc(dirfd, spec, image ? NULL : ri, uid, err, errlen)) < 0)
        goto out;

    /* Mounts, most general first. The root itself is read-only; only the workspace and /tmp
     * (gVisor's own size-capped tmpfs) are writable, as in the native backend. */
    json_array_append_new(mounts, mount_entry("/proc", "proc", "proc", "nosuid,noexec,nodev"));
    json_array_append_new(mounts,
                          mount_entry("/dev", "tmpfs", "tmpfs", "nosuid,noexec,mode=755,size=64k"));
    snprintf(opts, sizeof(opts), "nosuid,nodev,mode=1777,size=%" PRId64, l->tmp_bytes);
    json_array_append_new(mounts, mount_entry("/tmp", "tmpfs", "tmpfs", opts));
    json_array_append_new(mounts, mount_entry("/dev/shm", "tmpfs", "shm", opts));
    if (image && ((r = image_entries(dirfd, image, "", mounts, err, errlen)) < 0 ||
                  (r = image_entries(dirfd, image, "etc", mounts, err, errlen)) < 0))
        goto out;
    if (!image)
        json_array_append_new(mounts, mount_entry("/usr", "bind", "/usr", "rbind,ro,nosuid,nodev"));
    for (int i = 0; !image && i < ri->n_binds; i++) {
        snprintf(rel, sizeof(rel), "rootfs/%s", ri->binds[i].dst);
        if ((r = make_path(dirfd, rel, !ri->binds[i].is_dir)) < 0) {
            r = fail(err, errlen, r, "bundle /etc mount point");
            goto out;
        }
        json_array_append_new(mounts, mount_entry(rel + strlen("rootfs"), "bind", ri->binds[i].src,
                                                  "rbind,ro,nosuid,nodev"));
    }
    json_array_append_new(mounts,
                          mount_entry("/workspace", "bind", ws_path, "rbind,rw,nosuid,nodev"));
    for (size_t i = 0; i < spec->n_mounts; i++) {
        const struct tc_spec_mount *m = &spec->mounts[i];
        struct stat st;
        snprintf(rel, sizeof(rel), "rootfs%s", m->target);
        if (stat(m->source, &st) < 0) {
            r = fail(err, errlen, -errno, "mount source");
            goto out;
        }
        if ((r = make_path(dirfd, rel, !S_ISDIR(st.st_mode))) < 0) {
            r = fail(err, errlen, r, "bundle mount point");
            goto out;
        }
        json_array_append_new(
            mounts, mount_entry(m->target, "bind", m->source,
                                m->writable ? "rbind,rw,nosuid,nodev" : "rbind,ro,nosuid,nodev"));
    }
    if ((r = write_secrets(dirfd, bundle, spec, uid, mounts, err, errlen)) < 0)
        goto out;

    for (const char **a = spec->argv; *a; a++)
        json_array_append_new(args, json_string(*a));
    for (const char **e = spec->envp; *e; e++)
        json_array_append_new(env, json_string(*e));
    /* RLIMIT_CPU in whole seconds is a backstop behind the launcher's cgroup poll. */
    uint64_t cpu_s = (uint64_t)((l->cpu_ms + 999) / 1000);
    json_array_append_new(
        rl, rlimit("RLIMIT_FSIZE", (uint64_t)l->file_size_bytes, (uint64_t)l->file_size_bytes));
    json_array_append_new(rl, rlimit("RLIMIT_NOFILE", (uint64_t)l->nofile, (uint64_t)l->nofile));
    json_array_append_new(rl, rlimit("RLIMIT_NPROC", (uint64_t)l->pids, (uint64_t)l->pids));
    json_array_append_new(rl, rlimit("RLIMIT_CORE", 0, 0));
    json_array_append_new(rl, rlimit("RLIMIT_MEMLOCK", 0, 0));
    json_array_append_new(rl, rlimit("RLIMIT_MSGQUEUE", 0, 0));
    json_array_append_new(rl, rlimit("RLIMIT_CPU", cpu_s, cpu_s + 1));
    uint64_t stack = l->memory_bytes < (8 << 20) ? (uint64_t)l->memory_bytes : 8 << 20;
    json_array_append_new(rl, rlimit("RLIMIT_STACK", stack, stack));
    if (rlimit_as)
        json_array_append_new(
            rl, rlimit("RLIMIT_AS", (uint64_t)l->memory_bytes, (uint64_t)l->memory_bytes));

    json_t *empty_caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
                                   "inheritable", "permitted", "ambient");
    json_t *cfg = json_pack(
        "{s:s, s:{s:b, s:{s:I, s:I}, s:o, s:o, s:s, s:b, s:o, s:o}, s:{s:s, s:b}, s:s, s:o,"
        " s:{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]}}",
        "ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", (json_int_t)uid, "gid",
        (json_int_t)uid, "args", args, "env", env, "cwd", spec->cwd, "noNewPrivileges", 1,
        "capabilities", empty_caps, "rlimits", rl, "root", "path", "rootfs", "readonly", 1,
        "hostname", spec->hostname, "mounts", mounts, "linux", "namespaces", "type", "pid", "type",
        "network", "type", "ipc", "type", "uts", "type", "mount");
    args = env = mounts = rl = NULL; /* stolen by json_pack, also on failure */
    if (!cfg) {
        r = fail(err, errlen, -ENOMEM, "bundle config");
        goto out;
    }
    char *text = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    if (!text) {
        r = fail(err, errlen, -ENOMEM, "bundle config");
        goto out;
    }
    r = write_file(dirfd, "config.json", text, strlen(text), 0600);
    free(text);
    if (r < 0)
        fail(err, errlen, r, "bundle config.json");
out:
    json_decref(args);
    json_decref(env);
    json_decref(mounts);
    json_decref(rl);
    return r;
}

void tc_gv_argv(const struct tc_gv_host *h, const char *bundle, const char *id,
                char bufs[][PATH_MAX + 32], const char **argv)
{
    int n = 0;
    snprintf(bufs[0], PATH_MAX + 32, "--root=%s/state", bundle);
    snprintf(bufs[1], PATH_MAX + 32, "--log=%s/runsc.log", bundle);
    snprintf(bufs[2], PATH_MAX + 32, "--platform=%s", h->platform);
    snprintf(bufs[3], PATH_MAX + 32, "%s", bundle);
    snprintf(bufs[4], PATH_MAX + 32, "%s", id);
    argv[n++] = h->runsc;
    argv[n++] = bufs[0];
    argv[n++] = bufs[1];
    argv[n++] = bufs[2];
    argv[n++] = "--network=none";
    argv[n++] = "--ignore-cgroups";
    /* the workspace is revalidated against the host at each access (the default, said here):
     * a warm sandbox's call writes its files there after runsc started */
    argv[n++] = "--file-access-mounts=shared";
    argv[n++] = "run";
    argv[n++] = "--bundle";
    argv[n++] = bufs[3];
    argv[n++] = bufs[4];
    argv[n] = NULL;
}

/* The message of the first "level":"error" line in runsc.log, if any. */
static bool runsc_error(int bundle_fd, char *err, size_t errlen)
{
    char buf[8192];
    _cleanup_close_ int fd = openat(bundle_fd, "runsc.log", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        json_t *j = json_loads(line, 0, NULL);
        const char *lvl = json_string_value(json_object_get(j, "level"));
        const char *msg = json_string_value(json_object_get(j, "msg"));
        bool hit = lvl && msg && strcmp(lvl, "error") == 0;
        if (hit)
            snprintf(err, errlen, "runsc: %s", msg);
        json_decref(j);
        if (hit)
            return true;
    }
    return false;
}

int tc_gv_status(int bundle_fd, int wstatus, int *ret_status, char *err, size_t errlen)
{
    if (!WIFEXITED(wstatus)) { /* runsc itself was signalled (our kill) */
        *ret_status = wstatus;
        return 0;
    }
    int code = WEXITSTATUS(wstatus);
    if (code == 128 && runsc_error(bundle_fd, err, errlen))
        return -EPROTO;
    if (code > 128 && code < 128 + 65)
        *ret_status = code - 128; /* a wait status "killed by signal code-128" */
    else
        *ret_status = (code & 0xff) << 8;
    return 0;
}

json_t *tc_gv_enforced(const struct tc_cg_host *cg)
{
    const char *mem = tc_cg_mech(cg, TC_CG_MEMORY), *cpu = tc_cg_mech(cg, TC_CG_CPU);
    char cpubuf[32];
    if (cg->mode == TC_CG_V2)
        cpu = "cgroup_v2";
    snprintf(cpubuf, sizeof(cpubuf), "%s%s", cpu ? cpu : "", cpu ? "+rlimit" : "rlimit");
    /* rlimits here are gVisor's: its kernel enforces them on the program. pids is gVisor's
     * RLIMIT_NPROC (the host pids cgroup only bounds runsc's own threads, with headroom);
     * /tmp is gVisor's tmpfs with the size cap; the workspace is the host tmpfs. */
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "wall_ms", "launcher",
                     "cpu_ms", cpubuf, "memory_bytes", mem ? mem : "rlimit", "pids", "rlimit",
                     "file_size_bytes", "rlimit", "nofile", "rlimit", "output_bytes", "launcher",
                     "workspace_bytes", "tmpfs", "tmp_bytes", "tmpfs");
}

/* ---- the fork that exec's runsc ---- */

static _Noreturn void child_die(int ctl_fd, int err, const char *what)
{
    struct tc_ctl_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = TC_CTL_SETUP_ERROR;
    m.err = err;
    snprintf(m.what, sizeof(m.what), "%s", what);
    (void)send(ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
    _exit(125);
}

_Noreturn void tc_gv_child_main(const struct tc_gv_child *c)
{
    static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    int src[4] = {c->stdin_fd, c->stdout_fd, c->stderr_fd, c->ctl_fd}, tmp[4];
    sigset_t none;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != c->launcher)
        _exit(125); /* the launcher died before PDEATHSIG was armed: nobody would supervise */
    for (int i = 0; i < 3; i++)
        if (c->cg_join[i] >= 0 && write(c->cg_join[i], "0", 1) != 1)
            child_die(c->ctl_fd, errno, "join cgroup");
    for (int i = 0; i < 4; i++)
        if ((tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 10)) < 0)
            child_die(c->ctl_fd, errno, "dup");
    for (int i = 0; i < 3; i++)
        if (dup2(tmp[i], i) < 0) /* dup2 clears FD_CLOEXEC on 0-2 */
            child_die(tmp[3], errno, "dup2");
    if (dup2(tmp[3], 3) < 0 || syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
        child_die(tmp[3], errno, "close fds");
    fcntl(3, F_SETFD, FD_CLOEXEC); /* EOF on the control socket = runsc started */
    /* The launcher blocks SIGTERM/SIGINT/SIGHUP and ignores SIGPIPE: runsc gets defaults. */
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (setsid() < 0)
        child_die(3, errno, "setsid");
    execve(c->argv[0], (char *const *)c->argv, envp);
    child_die(3, errno, "exec runsc");
}
