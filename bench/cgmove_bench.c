/* A v1 cgroup migration after a rest, without and with the launcher's favordynmods hierarchy,
 * in one run (root, a cgroup v1 host; docs/sandbox.md, Cgroups).
 *
 *   cgmove_bench [N] [REST_MS]   N moves per case (default 10), each after REST_MS idle (300)
 *
 * A shell of the pool (or of a one-shot `toolcage exec`) moves itself into its groups by a
 * write to each hierarchy's cgroup.procs; the kernel takes cgroup_threadgroup_rwsem for
 * writing, which waits for an RCU grace period unless another migration happened within the
 * last one. Case A: groups of a cgroup host set up as the launcher does with
 * TOOLCAGE_CGROUP_FAVORDYNMODS=0; case B: as it does by default (a favordynmods hierarchy
 * held open). Each move: fork a child that waits, write its pid into the three groups, time
 * the writes. Prints medians and B/A.
 *
 * Order matters and is fixed, A then B: on Linux 6.18+ the first favordynmods hierarchy
 * switches the kernel to a per-process lock for the rest of the boot, so A after B (or after
 * any launcher ran) measures B again; the bench says so when A is as fast as B. */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/cgroup.h"

static double now_ms(void)
{
    return (double)tc_now_us() / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* n moves after rest_ms each into a group of host h: the median ms, the max in *ret_max. */
static double moves(struct tc_cg_host *h, const char *name, int n, int rest_ms, double *ret_max)
{
    struct tc_cgroup cg;
    int fds[TC_CG_N_];
    double *t = calloc((size_t)n, sizeof(double)), med = -1;

    if (!t || tc_cg_create(h, name, &cg) < 0) {
        fprintf(stderr, "cgmove_bench: cannot make the group %s\n", name);
        free(t);
        return -1;
    }
    if (tc_cg_open_procs(&cg, fds) < 0) {
        fprintf(stderr, "cgmove_bench: cannot open the group %s\n", name);
        tc_cg_destroy(&cg);
        free(t);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct timespec rest = {rest_ms / 1000, (long)(rest_ms % 1000) * 1000000L};
        nanosleep(&rest, NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("cgmove_bench: fork");
            n = i;
            break;
        }
        if (pid == 0) {
            pause();
            _exit(0);
        }
        char buf[24];
        int len = snprintf(buf, sizeof(buf), "%d", (int)pid);
        bool moved = true;
        double t0 = now_ms();
        for (int c = 0; c < TC_CG_N_; c++)
            if (fds[c] >= 0 && write(fds[c], buf, (size_t)len) != len)
                moved = false;
        t[i] = now_ms() - t0;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (!moved) {
            fprintf(stderr, "cgmove_bench: a move failed: %s\n", strerror(errno));
            n = i;
            break;
        }
    }
    for (int c = 0; c < TC_CG_N_; c++)
        if (fds[c] >= 0)
            close(fds[c]);
    tc_cg_destroy(&cg);
    if (n == 0) {
        free(t);
        return -1;
    }
    qsort(t, (size_t)n, sizeof(double), cmp);
    med = t[(n - 1) / 2];
    *ret_max = t[n - 1];
    free(t);
    return med;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10, rest = argc > 2 ? atoi(argv[2]) : 300;
    struct tc_cg_host a, b;
    double amax = 0, bmax = 0;

    if (n < 1 || rest < 0 || geteuid() != 0) {
        fprintf(stderr, "usage (as root): cgmove_bench [N] [REST_MS]\n");
        return 2;
    }
    tc_cg_host_init(&a, false, true); /* TOOLCAGE_CGROUP_FAVORDYNMODS=0 */
    if (a.mode != TC_CG_V1) {
        printf(
            "cgmove_bench: cgroup %s: no migration on a sandbox's path (v2: CLONE_INTO_CGROUP)\n",
            a.mode == TC_CG_V2 ? "v2" : "none");
        tc_cg_host_fini(&a);
        return 0;
    }
    double am = moves(&a, "move-a", n, rest, &amax);
    tc_cg_host_fini(&a);
    double t0 = now_ms();
    tc_cg_host_init(&b, false, false); /* the default: a favordynmods hierarchy */
    double made = now_ms() - t0;
    double bm = moves(&b, "move-b", n, rest, &bmax);
    bool favored = b.dynmods_fd >= 0;
    char why[sizeof(b.dynmods_why)];
    snprintf(why, sizeof(why), "%s", b.dynmods_why);
    tc_cg_host_fini(&b);
    if (am < 0 || bm < 0)
        return 1;
    printf("cgmove_bench: v1 migration into 3 groups after %d ms idle, %d moves each, medians\n",
           rest, n);
    printf("  A without favordynmods   %8.3f ms  (max %.3f)\n", am, amax);
    printf("  B favordynmods %-9s %8.3f ms  (max %.3f)  B/A %.3fx\n", favored ? "held" : "(none)",
           bm, bmax, am > 0 ? bm / am : 0);
    printf("  B's set-up (the groups and the hierarchy, once per launcher) %.3f ms\n", made);
    if (!favored)
        printf("  (no favordynmods hierarchy: %s)\n", why);
    else if (am < 1.0)
        printf("  (A is as fast as B: a favordynmods hierarchy was already mounted, or on Linux "
               "6.18+ was mounted once since boot: the per-process lock is one-way)\n");
    return 0;
}
