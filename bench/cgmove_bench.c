/* A v1 cgroup join after a rest: a process moved by a cgroup.procs write against a thread
 * that moves itself by a write to `tasks` (what a shell does; tc_cg_open_join), in one run
 * (root, a cgroup v1 host; docs/sandbox.md, Cgroups).
 *
 *   cgmove_bench [N] [REST_MS]   N joins per case (default 10), each after REST_MS idle (300)
 *
 * Case A writes "0" to the three groups' cgroup.procs, as shells did before: the kernel takes
 * cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period unless another
 * writer came within the last one. Case B writes "0" to their `tasks`: a thread moving itself
 * takes no threadgroup lock. Each join: rest, fork a child, the child opens nothing (the files
 * are opened beforehand, as the launcher does) and times its three writes. A and B take
 * turns, so that both see the same machine. Prints medians and B/A. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/cgroup.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One join into the groups whose files are fds: the child's three writes of "0", in ms
 * (shared with the parent through *slot); -1 on failure. */
static double join_once(const int fds[TC_CG_N_], int rest_ms, double *slot)
{
    struct timespec rest = {rest_ms / 1000, (long)(rest_ms % 1000) * 1000000L};
    nanosleep(&rest, NULL);
    *slot = -1;
    pid_t pid = fork();
    if (pid < 0) {
        perror("cgmove_bench: fork");
        return -1;
    }
    if (pid == 0) {
        int64_t t0 = tc_now_us();
        for (int c = 0; c < TC_CG_N_; c++)
            if (fds[c] >= 0 && write(fds[c], "0", 1) != 1)
                _exit(1);
        *slot = (double)(tc_now_us() - t0) / 1e3;
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "cgmove_bench: a join failed\n");
        return -1;
    }
    return *slot;
}

static int open_files(struct tc_cgroup *cg, const char *file, int fds[TC_CG_N_])
{
    for (int c = 0; c < TC_CG_N_; c++)
        fds[c] = cg->fd[c] < 0 ? -1 : openat(cg->fd[c], file, O_WRONLY | O_CLOEXEC);
    for (int c = 0; c < TC_CG_N_; c++)
        if (cg->fd[c] >= 0 && fds[c] < 0)
            return -errno;
    return 0;
}

static void close_files(int fds[TC_CG_N_])
{
    for (int c = 0; c < TC_CG_N_; c++)
        if (fds[c] >= 0)
            close(fds[c]);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10, rest = argc > 2 ? atoi(argv[2]) : 300, rc = 1;
    struct tc_cg_host h;
    struct tc_cgroup ga, gb;
    int fa[TC_CG_N_] = {-1, -1, -1}, fb[TC_CG_N_] = {-1, -1, -1};

    if (n < 1 || n > 1000 || rest < 0 || geteuid() != 0) {
        fprintf(stderr, "usage (as root): cgmove_bench [N (1-1000)] [REST_MS]\n");
        return 2;
    }
    tc_cg_host_init(&h, false);
    if (h.mode != TC_CG_V1) {
        printf("cgmove_bench: cgroup %s: no migration on a sandbox's path "
               "(v2: CLONE_INTO_CGROUP)\n",
               h.mode == TC_CG_V2 ? "v2" : "none");
        tc_cg_host_fini(&h);
        return 0;
    }
    double *slot =
        mmap(NULL, sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double *ta = calloc((size_t)n, sizeof(double)), *tb = calloc((size_t)n, sizeof(double));
    bool made_a = false, made_b = false;
    if (slot == MAP_FAILED || !ta || !tb || !(made_a = tc_cg_create(&h, "join-a", &ga) == 0) ||
        !(made_b = tc_cg_create(&h, "join-b", &gb) == 0) ||
        open_files(&ga, "cgroup.procs", fa) < 0 || tc_cg_open_join(&gb, fb) < 0) {
        fprintf(stderr, "cgmove_bench: cannot make or open the groups: %s\n", strerror(errno));
        goto out;
    }
    for (int i = 0; i < n; i++)
        if ((ta[i] = join_once(fa, rest, slot)) < 0 || (tb[i] = join_once(fb, rest, slot)) < 0)
            goto out;
    qsort(ta, (size_t)n, sizeof(double), cmp);
    qsort(tb, (size_t)n, sizeof(double), cmp);
    double am = ta[(n - 1) / 2], bm = tb[(n - 1) / 2];
    printf("cgmove_bench: a v1 join into 3 groups after %d ms idle, %d joins each (turn about), "
           "medians\n",
           rest, n);
    printf("  A the process, \"0\" to cgroup.procs   %8.3f ms  (min %.3f, max %.3f)\n", am, ta[0],
           ta[n - 1]);
    printf("  B the thread, \"0\" to tasks (shells)  %8.3f ms  (min %.3f, max %.3f)  B/A %.3fx\n",
           bm, tb[0], tb[n - 1], am > 0 ? bm / am : 0);
    if (am < 1.0)
        printf("  (A took no grace period: a favordynmods hierarchy is mounted, or was once "
               "since boot on Linux 6.18+, where its per-process lock is one-way)\n");
    rc = 0;
out:
    close_files(fa);
    close_files(fb);
    if (made_a)
        tc_cg_destroy(&ga);
    if (made_b)
        tc_cg_destroy(&gb);
    free(ta);
    free(tb);
    if (slot != MAP_FAILED)
        munmap(slot, sizeof(double));
    tc_cg_host_fini(&h);
    return rc;
}
