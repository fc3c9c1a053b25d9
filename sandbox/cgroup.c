#include "sandbox/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

static const char *const v1_names[TC_CG_N_] = {"memory", "pids", "cpuacct"};

static int write_at(int dfd, const char *file, const char *val)
{
    _cleanup_close_ int fd = openat(dfd, file, O_WRONLY | O_CLOEXEC);
    size_t len = strlen(val);
    ssize_t n;

    if (fd < 0)
        return -errno;
    do
        n = write(fd, val, len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

static int read_at(int dfd, const char *file, char *buf, size_t size)
{
    _cleanup_close_ int fd = openat(dfd, file, O_RDONLY | O_CLOEXEC);
    size_t off = 0;

    if (fd < 0)
        return -errno;
    while (off + 1 < size) {
        ssize_t n = read(fd, buf + off, size - 1 - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        off += (size_t)n;
    }
    buf[off] = '\0';
    return (int)off;
}

static int read_u64_at(int dfd, const char *file, uint64_t *ret)
{
    char buf[64], *end;
    unsigned long long v;
    int r = read_at(dfd, file, buf, sizeof(buf));

    if (r < 0)
        return r;
    errno = 0;
    v = strtoull(buf, &end, 10);
    if (errno || end == buf || (*end != '\n' && *end != '\0'))
        return -EINVAL;
    *ret = v;
    return 0;
}

/* Value of "key N" in a flat-keyed file (memory.events, cpu.stat, memory.oom_control). */
static int read_key_at(int dfd, const char *file, const char *key, uint64_t *ret)
{
    char buf[4096];
    size_t klen = strlen(key);
    int r = read_at(dfd, file, buf, sizeof(buf));

    if (r < 0)
        return r;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(line + klen + 1, &end, 10);
            if (errno || *end)
                return -EINVAL;
            *ret = v;
            return 0;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

/* Find the mount point of a cgroup hierarchy: v1 with controller ctl, or v2 (ctl NULL), and
 * the mount's root: the part of the hierarchy it shows. A container's /sys/fs/cgroup/memory
 * may show only the container's own group, while /proc/self/cgroup names the full path. */
static int find_mount(const char *ctl, char *ret, size_t size, char *ret_root, size_t rsize)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char *line = NULL;
    size_t cap = 0;
    int found = -ENOENT;

    if (!f)
        return -errno;
    while (getline(&line, &cap, f) > 0) {
        /* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
        char *sep = strstr(line, " - ");
        char root[512], mnt[512], fstype[32], src[64], sopts[512];
        if (!sep || sscanf(line, "%*s %*s %*s %511s %511s", root, mnt) != 2 ||
            sscanf(sep + 3, "%31s %63s %511s", fstype, src, sopts) < 2)
            continue;
        if (!ctl) {
            if (strcmp(fstype, "cgroup2") != 0)
                continue;
        } else {
            if (strcmp(fstype, "cgroup") != 0)
                continue;
            bool has = false;
            for (char *tok = sopts, *save = NULL; (tok = strtok_r(tok, ",", &save)); tok = NULL)
                if (strcmp(tok, ctl) == 0)
                    has = true;
            if (!has)
                continue;
        }
        if (strlen(mnt) < size && strlen(root) < rsize) {
            memcpy(ret, mnt, strlen(mnt) + 1);
            memcpy(ret_root, root, strlen(root) + 1);
            found = 0;
            break;
        }
    }
    free(line);
    fclose(f);
    return found;
}

/* The directory of our group own (from /proc/self/cgroup) under a mount of the hierarchy at
 * mnt whose root is root; -ENOENT if that mount does not show our group. */
static int group_dir(const char *mnt, const char *root, const char *own, char *ret, size_t size)
{
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);

    if (rl && (strncmp(own, root, rl) != 0 || (own[rl] != '/' && own[rl] != '\0')))
        return -ENOENT;
    own += rl;
    if (strcmp(own, "/") == 0)
        own = "";
    if ((size_t)snprintf(ret, size, "%s%s", mnt, own) >= size)
        return -ENAMETOOLONG;
    return 0;
}

/* A container runtime mounts the cgroup file system read-only for unprivileged containers.
 * With CAP_SYS_ADMIN (which the sandboxes need anyway) the launcher makes it writable in its
 * own private mount namespace only (setup() unshares it first); the mount still shows just
 * the container's own part of the hierarchy. */
static int remount_rw(const char *mnt)
{
    struct statvfs sv;
    unsigned long fl = MS_REMOUNT | MS_BIND;

    if (statvfs(mnt, &sv) < 0)
        return -errno;
    if (!(sv.f_flag & ST_RDONLY))
        return 0;
    /* keep the flags the kernel may have locked; drop only read-only */
    fl |= (sv.f_flag & ST_NOSUID ? MS_NOSUID : 0) | (sv.f_flag & ST_NODEV ? MS_NODEV : 0) |
          (sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0) | (sv.f_flag & ST_RELATIME ? MS_RELATIME : 0) |
          (sv.f_flag & ST_NOATIME ? MS_NOATIME : 0);
    return mount(NULL, mnt, NULL, fl, NULL) < 0 ? -errno : 0;
}

/* Our own cgroup path in a hierarchy: v1 by controller name, v2 (ctl NULL) the "0::" line. */
static int own_path(const char *ctl, char *ret, size_t size)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char *line = NULL;
    size_t cap = 0;
    int found = -ENOENT;

    if (!f)
        return -errno;
    while (getline(&line, &cap, f) > 0) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        char *path = c2 + 1;
        path[strcspn(path, "\n")] = '\0';
        bool match = false;
        if (!ctl)
            match = strcmp(line, "0") == 0 && c1[1] == '\0';
        else
            for (char *tok = c1 + 1, *save = NULL; (tok = strtok_r(tok, ",", &save)); tok = NULL)
                if (strcmp(tok, ctl) == 0)
                    match = true;
        if (match && strlen(path) < size) {
            memcpy(ret, path, strlen(path) + 1);
            found = 0;
            break;
        }
    }
    free(line);
    fclose(f);
    return found;
}

static int mkdir_open(int dfd, const char *name)
{
    if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
        return -errno;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int kill_procs(int dfd)
{
    char buf[65536];
    int r = read_at(dfd, "cgroup.procs", buf, sizeof(buf)), n = 0;

    if (r < 0)
        return r;
    for (char *p = buf; *p;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
            n++;
        p = end;
        while (*p == '\n')
            p++;
    }
    return n;
}

/* Kill leftovers of a dead launcher (L<pid> groups whose pid is gone), bottom-up. */
static void remove_tree(int dfd, const char *name, int depth)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (depth < 4) {
        int dup_fd = dup(fd);
        DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        struct dirent *de;
        if (!d && dup_fd >= 0)
            close(dup_fd);
        while (d && (de = readdir(d)))
            if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                remove_tree(fd, de->d_name, depth + 1);
        if (d)
            closedir(d);
    }
    for (int i = 0; i < 50 && kill_procs(fd) > 0; i++)
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    close(fd);
    for (int i = 0; i < 50 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno == EBUSY; i++)
        nanosleep(&(struct timespec){0, 2000000}, NULL);
}

static void reap_stale(int toolcage_fd)
{
    int dup_fd = dup(toolcage_fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    struct dirent *de;

    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return;
    }
    while ((de = readdir(d))) {
        char *end;
        long pid;
        if (de->d_name[0] != 'L')
            continue;
        errno = 0;
        pid = strtol(de->d_name + 1, &end, 10);
        if (errno || *end || pid <= 0 || pid == getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* that launcher is alive */
        remove_tree(toolcage_fd, de->d_name, 0);
    }
    closedir(d);
}

/* Create <base>/toolcage/L<pid> and open it. */
static int make_parent(const char *base, char *ret_path, size_t size, bool v2)
{
    _cleanup_close_ int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int tfd = -1;
    char lname[32];
    int fd;

    if (bfd < 0)
        return -errno;
    if (v2) {
        /* Delegate the controllers to toolcage/ (fails with EBUSY if base has processes
         * and is not the root: the caller then moves them aside, see evacuate()). */
        int r = write_at(bfd, "cgroup.subtree_control", "+memory +pids");
        if (r < 0)
            return r;
        (void)write_at(bfd, "cgroup.subtree_control", "+cpu");
    }
    tfd = mkdir_open(bfd, "toolcage");
    if (tfd < 0)
        return tfd;
    reap_stale(tfd);
    if (v2) {
        int r = write_at(tfd, "cgroup.subtree_control", "+memory +pids");
        if (r < 0)
            return r;
        (void)write_at(tfd, "cgroup.subtree_control", "+cpu");
    }
    snprintf(lname, sizeof(lname), "L%ld", (long)getpid());
    fd = mkdir_open(tfd, lname);
    if (fd < 0)
        return fd;
    if (v2) {
        int r = write_at(fd, "cgroup.subtree_control", "+memory +pids");
        if (r < 0) {
            close(fd);
            return r;
        }
        (void)write_at(fd, "cgroup.subtree_control", "+cpu");
    }
    snprintf(ret_path, size, "%s/toolcage/%s", base, lname);
    return fd;
}

static bool controllers_have(const char *dir, const char *ctl)
{
    char buf[512];
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (dfd < 0 || read_at(dfd, "cgroup.controllers", buf, sizeof(buf)) < 0)
        return false;
    for (char *tok = buf, *save = NULL; (tok = strtok_r(tok, " \n", &save)); tok = NULL)
        if (strcmp(tok, ctl) == 0)
            return true;
    return false;
}

/* v2's no-internal-process rule: a group that holds processes cannot give controllers to its
 * children. That is where a systemd service with Delegate=yes starts (the server and this
 * launcher in the unit's own group), and a container in its cgroup namespace's root. Move
 * every process of base into the leaf base/SUPERVISOR, so that base can delegate. New
 * processes are born in their parent's group, so a few rounds settle it. */
#define SUPERVISOR "supervisor"
static int evacuate(const char *base)
{
    _cleanup_close_ int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int sfd = -1;
    char buf[8192];

    if (bfd < 0)
        return -errno;
    sfd = mkdir_open(bfd, SUPERVISOR);
    if (sfd < 0)
        return sfd;
    for (int round = 0; round < 10; round++) {
        int r = read_at(bfd, "cgroup.procs", buf, sizeof(buf)), moved = 0;
        if (r < 0)
            return r;
        for (char *p = buf, *end; *p; p = end) {
            long pid = strtol(p, &end, 10);
            if (end == p)
                break;
            while (*end == '\n')
                end++;
            char val[24];
            snprintf(val, sizeof(val), "%ld", pid);
            r = write_at(sfd, "cgroup.procs", val);
            if (r < 0 && r != -ESRCH) /* a process that exited meanwhile is fine */
                return r;
            moved++;
        }
        if (moved == 0)
            return 0;
    }
    return -EBUSY;
}

/* make_parent at base (v2: moving base's own processes aside first if it holds any). */
static int delegate_at(const char *base, bool v2, char *ret_path, size_t size)
{
    int fd = make_parent(base, ret_path, size, v2);
    if (v2 && fd == -EBUSY && evacuate(base) == 0)
        fd = make_parent(base, ret_path, size, v2);
    return fd;
}

static bool try_v2(struct tc_cg_host *h)
{
    char mnt[256], root[256], own[256], base[600];
    int fd = -ENOENT;

    if (find_mount(NULL, mnt, sizeof(mnt), root, sizeof(root)) < 0 ||
        !controllers_have(mnt, "memory") || !controllers_have(mnt, "pids"))
        return false; /* no v2, or v1 holds the controllers (hybrid) */
    if (own_path(NULL, own, sizeof(own)) == 0 &&
        group_dir(mnt, root, own, base, sizeof(base)) == 0) {
        /* In our own supervisor leaf (a launcher of this service started before us moved us
         * there): delegate from its parent, as that launcher did. */
        size_t bl = strlen(base), sl = sizeof(SUPERVISOR) - 1;
        if (bl > strlen(mnt) + sl && base[bl - sl - 1] == '/' &&
            strcmp(base + bl - sl, SUPERVISOR) == 0)
            base[bl - sl - 1] = '\0';
        if (!controllers_have(base, "memory") || !controllers_have(base, "pids")) {
            snprintf(h->note, sizeof(h->note),
                     "cgroup v2: memory and pids are not available in %.180s (Delegate=yes?)",
                     base);
            fd = -ENOENT;
        } else {
            fd = delegate_at(base, true, h->parent_path[0], sizeof(h->parent_path[0]));
            if (fd == -EROFS && remount_rw(mnt) == 0)
                fd = delegate_at(base, true, h->parent_path[0], sizeof(h->parent_path[0]));
        }
    }
    /* Not delegated to us: the hierarchy's root, if we may write there (no processes). */
    if (fd < 0 && strcmp(root, "/") == 0)
        fd = make_parent(mnt, h->parent_path[0], sizeof(h->parent_path[0]), true);
    if (fd < 0) {
        if (!h->note[0])
            snprintf(h->note, sizeof(h->note), "cgroup v2: cannot create a delegated group: %s",
                     strerror(-fd));
        return false;
    }
    h->note[0] = '\0';
    h->mode = TC_CG_V2;
    for (int c = 0; c < TC_CG_N_; c++) {
        h->parent_fd[c] = c == 0 ? fd : dup(fd);
        memcpy(h->parent_path[c], h->parent_path[0], sizeof(h->parent_path[0]));
        h->has[c] = true;
    }
    h->has[TC_CG_CPU] = controllers_have(h->parent_path[0], "cpu");
    return true;
}

static bool try_v1(struct tc_cg_host *h)
{
    for (int c = 0; c < TC_CG_N_; c++) {
        char mnt[256], root[256], own[256], base[600];
        int fd;
        if (find_mount(v1_names[c], mnt, sizeof(mnt), root, sizeof(root)) < 0)
            continue;
        if (own_path(v1_names[c], own, sizeof(own)) < 0)
            snprintf(own, sizeof(own), "/");
        if ((fd = group_dir(mnt, root, own, base, sizeof(base))) == 0) {
            fd = make_parent(base, h->parent_path[c], sizeof(h->parent_path[c]), false);
            if (fd == -EROFS && remount_rw(mnt) == 0)
                fd = make_parent(base, h->parent_path[c], sizeof(h->parent_path[c]), false);
        }
        if (fd < 0) {
            snprintf(h->note, sizeof(h->note), "cgroup v1 %s: %s", v1_names[c], strerror(-fd));
            continue;
        }
        h->parent_fd[c] = fd;
        h->has[c] = true;
    }
    if (h->has[TC_CG_MEMORY]) {
        struct stat st;
        h->memsw = fstatat(h->parent_fd[TC_CG_MEMORY], "memory.memsw.limit_in_bytes", &st, 0) == 0;
        (void)write_at(h->parent_fd[TC_CG_MEMORY], "memory.use_hierarchy", "1");
    }
    if (!h->has[TC_CG_MEMORY] && !h->has[TC_CG_PIDS] && !h->has[TC_CG_CPU])
        return false;
    h->mode = TC_CG_V1;
    return true;
}

void tc_cg_host_init(struct tc_cg_host *h, bool disabled)
{
    memset(h, 0, sizeof(*h));
    for (int c = 0; c < TC_CG_N_; c++)
        h->parent_fd[c] = -1;
    if (disabled)
        return; /* tests of the rlimit fallback */
    if (try_v2(h))
        return; /* (children are born in their group: CLONE_INTO_CGROUP, no migration) */
    if (!try_v1(h))
        h->mode = TC_CG_NONE;
}

void tc_cg_host_fini(struct tc_cg_host *h)
{
    for (int c = 0; c < TC_CG_N_; c++) {
        if (h->parent_fd[c] < 0)
            continue;
        close(h->parent_fd[c]);
        h->parent_fd[c] = -1;
        if (h->parent_path[c][0] && (c == 0 || h->mode == TC_CG_V1)) {
            char *slash = strrchr(h->parent_path[c], '/');
            _cleanup_close_ int pfd = -1;
            if (!slash)
                continue;
            *slash = '\0';
            pfd = open(h->parent_path[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (pfd >= 0)
                remove_tree(pfd, slash + 1, 0);
            *slash = '/';
        }
    }
}

const char *tc_cg_mech(const struct tc_cg_host *h, enum tc_cg_ctl c)
{
    if (!h->has[c])
        return NULL;
    return h->mode == TC_CG_V2 ? "cgroup_v2" : "cgroup_v1";
}

int tc_cg_create(const struct tc_cg_host *h, const char *name, struct tc_cgroup *ret)
{
    struct tc_cgroup cg = {.host = h};
    int r = 0;

    for (int c = 0; c < TC_CG_N_; c++)
        cg.fd[c] = -1;
    if (strlen(name) >= sizeof(cg.name))
        return -EINVAL;
    memcpy(cg.name, name, strlen(name) + 1);

    for (int c = 0; c < TC_CG_N_; c++) {
        if (!h->has[c])
            continue;
        if (h->mode == TC_CG_V2 && c > 0) {
            cg.fd[c] = -1; /* shares fd[0] */
            continue;
        }
        if (mkdirat(h->parent_fd[c], name, 0755) < 0) {
            r = -errno;
            goto fail;
        }
        cg.fd[c] = openat(h->parent_fd[c], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg.fd[c] < 0) {
            r = -errno;
            unlinkat(h->parent_fd[c], name, AT_REMOVEDIR);
            goto fail;
        }
    }
    *ret = cg;
    return 0;
fail:
    tc_cg_destroy(&cg);
    return r;
}

int tc_cg_set_limits(struct tc_cgroup *cg, const struct tc_limits *lim)
{
    const struct tc_cg_host *h = cg->host;
    char val[64];
    int r;

    if (h->mode == TC_CG_V2) {
        int fd = cg->fd[0];
        snprintf(val, sizeof(val), "%" PRId64, lim->memory_bytes);
        if ((r = write_at(fd, "memory.max", val)) < 0)
            return r;
        (void)write_at(fd, "memory.swap.max", "0");
        (void)write_at(fd, "memory.oom.group", "1");
        snprintf(val, sizeof(val), "%" PRId64, lim->pids);
        if ((r = write_at(fd, "pids.max", val)) < 0)
            return r;
    } else if (h->mode == TC_CG_V1) {
        if (cg->fd[TC_CG_MEMORY] >= 0) {
            snprintf(val, sizeof(val), "%" PRId64, lim->memory_bytes);
            if ((r = write_at(cg->fd[TC_CG_MEMORY], "memory.limit_in_bytes", val)) < 0)
                return r;
            if (h->memsw &&
                (r = write_at(cg->fd[TC_CG_MEMORY], "memory.memsw.limit_in_bytes", val)) < 0)
                return r;
            (void)write_at(cg->fd[TC_CG_MEMORY], "memory.swappiness", "0");
        }
        if (cg->fd[TC_CG_PIDS] >= 0) {
            snprintf(val, sizeof(val), "%" PRId64, lim->pids);
            if ((r = write_at(cg->fd[TC_CG_PIDS], "pids.max", val)) < 0)
                return r;
        }
    }
    return 0;
}

static int ctl_fd(struct tc_cgroup *cg, enum tc_cg_ctl c)
{
    if (!cg->host || !cg->host->has[c])
        return -1;
    return cg->host->mode == TC_CG_V2 ? cg->fd[0] : cg->fd[c];
}

/* A v1 move writes the pid to cgroup.procs (the whole thread group) or a tid to `tasks` (one
 * thread). Either way the kernel takes the cgroup mutex; for the thread group, or for another
 * task's thread, it also takes cgroup_threadgroup_rwsem for writing, a per-cpu rwsem whose
 * writer waits for an RCU grace period unless another writer came within the last one: 6-28
 * ms measured on the development VM after half a second idle, with the cgroup mutex held
 * meanwhile (every mkdir, rmdir and move on the host queues behind it). A thread that moves
 * itself ("0" to `tasks`) needs no threadgroup lock: it cannot exit or exec while it writes
 * (Linux 5.5+; 0.06 ms). Our children write while they are their process's only thread, so
 * moving the thread moves the process. */
int tc_cg_open_join(struct tc_cgroup *cg, int ret_fds[TC_CG_N_])
{
    const char *file = cg->host && cg->host->mode == TC_CG_V1 ? "tasks" : "cgroup.procs";
    int fds[TC_CG_N_];
    for (int c = 0; c < TC_CG_N_; c++) {
        fds[c] = -1;
        if (cg->fd[c] < 0)
            continue;
        fds[c] = openat(cg->fd[c], file, O_WRONLY | O_CLOEXEC);
        if (fds[c] < 0) {
            int r = -errno;
            for (int j = 0; j < c; j++)
                if (fds[j] >= 0)
                    close(fds[j]);
            return r;
        }
    }
    memcpy(ret_fds, fds, sizeof(fds));
    return 0;
}

int tc_cg_cpu_ns(struct tc_cgroup *cg, uint64_t *ret)
{
    int fd = ctl_fd(cg, TC_CG_CPU);
    uint64_t v;
    int r;

    if (cg->host && cg->host->mode == TC_CG_V2 && cg->fd[0] >= 0) {
        /* cpu.stat usage_usec exists even without the cpu controller enabled */
        r = read_key_at(cg->fd[0], "cpu.stat", "usage_usec", &v);
        if (r < 0)
            return r;
        *ret = v * 1000;
        return 0;
    }
    if (fd < 0)
        return -ENODATA;
    r = read_u64_at(fd, "cpuacct.usage", &v);
    if (r < 0)
        return r;
    *ret = v;
    return 0;
}

int tc_cg_mem_peak(struct tc_cgroup *cg, uint64_t *ret)
{
    int fd = ctl_fd(cg, TC_CG_MEMORY);
    if (fd < 0)
        return -ENODATA;
    return read_u64_at(fd, cg->host->mode == TC_CG_V2 ? "memory.peak" : "memory.max_usage_in_bytes",
                       ret);
}

bool tc_cg_oom_killed(struct tc_cgroup *cg)
{
    int fd = ctl_fd(cg, TC_CG_MEMORY);
    uint64_t v = 0;

    if (fd < 0)
        return false;
    if (cg->host->mode == TC_CG_V2)
        return read_key_at(fd, "memory.events", "oom_kill", &v) == 0 && v > 0;
    /* memory.oom_control has the oom_kill counter since 4.13. memory.failcnt is no
     * substitute: it also counts limit hits that reclaim resolved. */
    return read_key_at(fd, "memory.oom_control", "oom_kill", &v) == 0 && v > 0;
}

int tc_cg_oom_eventfd(struct tc_cgroup *cg)
{
    int fd = ctl_fd(cg, TC_CG_MEMORY);
    if (fd < 0 || cg->host->mode == TC_CG_V2)
        return -EOPNOTSUPP;
    _cleanup_close_ int ctl = openat(fd, "memory.oom_control", O_RDONLY | O_CLOEXEC);
    if (ctl < 0)
        return -errno;
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0)
        return -errno;
    char line[32];
    snprintf(line, sizeof(line), "%d %d", efd, ctl);
    int r = write_at(fd, "cgroup.event_control", line); /* (the event holds its own reference) */
    if (r < 0) {
        close(efd);
        return r;
    }
    return efd;
}

bool tc_cg_pids_hit(struct tc_cgroup *cg)
{
    int fd = ctl_fd(cg, TC_CG_PIDS);
    uint64_t v = 0;

    if (fd < 0)
        return false;
    return read_key_at(fd, "pids.events", "max", &v) == 0 && v > 0;
}

int tc_cg_kill(struct tc_cgroup *cg)
{
    int n = 0;
    if (cg->host && cg->host->mode == TC_CG_V2 && cg->fd[0] >= 0) {
        if (write_at(cg->fd[0], "cgroup.kill", "1") == 0)
            return 1;
    }
    for (int c = 0; c < TC_CG_N_; c++) {
        if (cg->fd[c] < 0)
            continue;
        int r = kill_procs(cg->fd[c]);
        if (r > 0)
            n += r;
    }
    return n;
}

int tc_cg_destroy(struct tc_cgroup *cg)
{
    int r = 0;
    if (!cg->host)
        return 0;
    tc_cg_kill(cg);
    for (int c = 0; c < TC_CG_N_; c++) {
        if (cg->fd[c] < 0)
            continue;
        if (unlinkat(cg->host->parent_fd[c], cg->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
            r = -errno;
            continue;
        }
        close(cg->fd[c]);
        cg->fd[c] = -1;
    }
    return r;
}
