/* Sandbox start-up cost against bare fork+exec, measured in one run (root required).
 *
 *   sandbox_bench [N]          N runs per case (default 50), then 50 concurrent sandboxes
 *
 * Cases (median / p90 wall time per run, ms):
 *   bare fork+exec /bin/true, bare python3 -c pass           (posix_spawn + waitpid)
 *   sandbox /bin/true, sandbox python3 -c pass               (launcher already running:
 *       submit -> result, the cost a long-running server pays per call)
 *   toolcage exec (one-shot CLI, shell tool running `true`)  (includes launcher start-up)
 * and the ratios sandbox/bare. Cases are interleaved (bare, sandbox, bare, ...) so that a
 * noisy neighbour hits both sides alike. Target (issue): sandboxed python3 -c pass at most
 * 1.3x bare. TOOLCAGE_BENCH_ENFORCE=1 exits 1 when the target is missed.
 * The binary is its own launcher (`sandbox_bench launcher ...`), like test_sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

extern char **environ;

static struct tc_launcher *L;
static unsigned id_counter;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static double bare(char *const argv[])
{
    pid_t pid;
    int st;
    posix_spawn_file_actions_t fa;
    double t0 = now_ms();

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
        perror("posix_spawn");
        exit(1);
    }
    posix_spawn_file_actions_destroy(&fa);
    waitpid(pid, &st, 0);
    return now_ms() - t0;
}

static const char *g_backend = "native";

static json_t *spec(const char *const *argv)
{
    char id[64];
    json_t *a = json_array();
    for (const char *const *p = argv; *p; p++)
        json_array_append_new(a, json_string(*p));
    snprintf(id, sizeof(id), "b%u-%d", ++id_counter, (int)getpid());
    return json_pack("{s:s, s:s, s:o, s:[s,s], s:{s:i, s:i, s:I, s:i, s:I, s:i, s:i, s:I, s:I}}",
                     "id", id, "backend", g_backend, "argv", a, "env", "PATH=/usr/bin:/bin",
                     "LANG=C.UTF-8", "limits", "wall_ms", 30000, "cpu_ms", 30000, "memory_bytes",
                     (json_int_t)256 << 20, "pids", 64, "file_size_bytes", (json_int_t)16 << 20,
                     "nofile", 256, "output_bytes", 1 << 20, "workspace_bytes",
                     (json_int_t)16 << 20, "tmp_bytes", (json_int_t)16 << 20);
}

static double sandboxed(const char *const *argv)
{
    json_t *s = spec(argv), *r = NULL;
    double t0 = now_ms();
    int rc = tc_launcher_run_sync(L, s, &r);
    double dt = now_ms() - t0;
    const char *status = json_string_value(json_object_get(r, "status"));
    if (rc < 0 || !status || strcmp(status, "completed") != 0) {
        char *d = r ? json_dumps(r, JSON_COMPACT) : NULL;
        fprintf(stderr, "sandbox run failed (%d): %s\n", rc, d ? d : "");
        exit(1);
    }
    json_decref(s);
    json_decref(r);
    return dt;
}

static char g_toolcage[4200], g_policy[4200];

static double cli_exec(void)
{
    /* toolcage exec --tool shell --policy examples/policy.json, code "true" on stdin */
    int in[2];
    pid_t pid;
    int st;
    char *argv[] = {g_toolcage, "exec", "--tool", "shell", "--policy", g_policy, NULL};
    posix_spawn_file_actions_t fa;
    double t0 = now_ms();

    if (pipe(in) < 0)
        exit(1);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid, g_toolcage, &fa, NULL, argv, environ) != 0)
        exit(1);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    if (write(in[1], "true\n", 5) != 5)
        exit(1);
    close(in[1]);
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "toolcage exec failed (status 0x%x)\n", st);
        return -1;
    }
    return now_ms() - t0;
}

struct conc {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, ok;
};

static void conc_cb(void *ud, json_t *r)
{
    struct conc *c = ud;
    pthread_mutex_lock(&c->mu);
    c->done++;
    const char *st = json_string_value(json_object_get(r, "status"));
    if (st && strcmp(st, "completed") == 0)
        c->ok++;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void row(const char *name, double *v, int n)
{
    double med = pct(v, n, 0.5), p90 = pct(v, n, 0.9);
    printf("  %-40s %8.1f %8.1f %8.1f\n", name, med, p90, v[0]);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "launcher") == 0)
        return tc_launcher_main(argc - 1, argv + 1);
    int n = argc > 1 ? atoi(argv[1]) : 50;
    if (n < 3)
        n = 3;
    if (geteuid() != 0) {
        fprintf(stderr, "sandbox_bench: needs root\n");
        return 2;
    }
    /* the toolcage binary next to us (build/bench/.. -> build/toolcage) */
    char self[4000];
    ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (k <= 0)
        return 1;
    self[k] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(g_toolcage, sizeof(g_toolcage), "%s/../toolcage", self);
    const char *src = getenv("TOOLCAGE_SOURCE_DIR");
    snprintf(g_policy, sizeof(g_policy), "%s/examples/policy.json", src ? src : ".");

    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-bench-%d", (int)getpid());
    mkdir(state, 0700);
    /* TOOLCAGE_POOL=0 measures the on-demand path (as the server's variable would) */
    const char *pool = getenv("TOOLCAGE_POOL");
    struct tc_launcher_options o = {.exe = "/proc/self/exe",
                                    .state_dir = state,
                                    .max_sandboxes = 64,
                                    .pool = pool && strcmp(pool, "0") == 0 ? TC_POOL_NONE
                                            : pool                         ? atoi(pool)
                                                                           : 0};
    if (tc_launcher_start(&o, &L) < 0) {
        fprintf(stderr, "sandbox_bench: cannot start the launcher\n");
        return 1;
    }
    json_t *hi = tc_launcher_host_info(L);
    char *his = json_dumps(hi, JSON_COMPACT);
    json_decref(hi);

    char *const true_argv[] = {"/bin/true", NULL};
    char *const py_argv[] = {"/usr/bin/python3", "-c", "pass", NULL};
    const char *const s_true[] = {"/bin/true", NULL};
    const char *const s_py[] = {"/usr/bin/python3", "-c", "pass", NULL};
    double *bt = calloc((size_t)n, sizeof(double)), *bp = calloc((size_t)n, sizeof(double)),
           *st = calloc((size_t)n, sizeof(double)), *sp = calloc((size_t)n, sizeof(double)),
           *ce = calloc((size_t)n, sizeof(double));
    int nce = 0;

    /* warm-up: page cache, python's .pyc, the launcher's first cgroup migration */
    for (int i = 0; i < 3; i++) {
        bare(py_argv);
        sandboxed(s_py);
    }
    for (int i = 0; i < n; i++) {
        bt[i] = bare(true_argv);
        st[i] = sandboxed(s_true);
        bp[i] = bare(py_argv);
        sp[i] = sandboxed(s_py);
    }
    bool have_cli = access(g_toolcage, X_OK) == 0 && access(g_policy, R_OK) == 0;
    for (int i = 0; have_cli && i < (n < 20 ? n : 20); i++) {
        double v = cli_exec();
        if (v >= 0)
            ce[nce++] = v;
    }

    /* 50 concurrent */
    struct conc c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    double t0 = now_ms();
    int submitted = 0;
    for (int i = 0; i < 50; i++) {
        json_t *s = spec(s_py);
        if (tc_launcher_submit(L, s, conc_cb, &c) == 0)
            submitted++;
        json_decref(s);
    }
    pthread_mutex_lock(&c.mu);
    while (c.done < submitted)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    double conc_ms = now_ms() - t0;

    printf("sandbox_bench: %d runs per case, interleaved; host %s\n", n, his ? his : "?");
    printf("  %-40s %8s %8s %8s  (ms)\n", "", "median", "p90", "min");
    row("bare fork+exec /bin/true", bt, n);
    row("sandbox /bin/true (launcher running)", st, n);
    row("bare python3 -c pass", bp, n);
    row("sandbox python3 -c pass (launcher running)", sp, n);
    if (nce)
        row("toolcage exec shell `true` (one-shot CLI)", ce, nce);
    double mbt = pct(bt, n, 0.5), mst = pct(st, n, 0.5), mbp = pct(bp, n, 0.5),
           msp = pct(sp, n, 0.5);
    printf("  ratio sandbox/bare /bin/true        %.2fx (+%.1f ms)\n", mst / mbt, mst - mbt);
    printf("  ratio sandbox/bare python3 -c pass  %.2fx (+%.1f ms; target <= 1.30x: %s)\n",
           msp / mbp, msp - mbp, msp / mbp <= 1.3 ? "met" : "missed");
    printf("  50 concurrent python3 -c pass: %d/%d completed in %.0f ms\n", c.ok, submitted,
           conc_ms);
    /* gvisor, when runsc is installed: fewer runs, it is two orders of magnitude slower */
    if (his && strstr(his, "gvisor")) {
        int ng = n < 10 ? n : 10;
        double *gb = calloc((size_t)ng, sizeof(double)), *gt = calloc((size_t)ng, sizeof(double)),
               *gp = calloc((size_t)ng, sizeof(double));
        g_backend = "gvisor";
        sandboxed(s_py); /* warm-up */
        for (int i = 0; i < ng; i++) {
            gb[i] = bare(py_argv);
            gt[i] = sandboxed(s_true);
            gp[i] = sandboxed(s_py);
        }
        row("bare python3 -c pass (gvisor rounds)", gb, ng);
        row("gvisor /bin/true (runsc run)", gt, ng);
        row("gvisor python3 -c pass (runsc run)", gp, ng);
        printf("  ratio gvisor/bare python3 -c pass   %.2fx (+%.1f ms; informational)\n",
               pct(gp, ng, 0.5) / pct(gb, ng, 0.5), pct(gp, ng, 0.5) - pct(gb, ng, 0.5));
        free(gb);
        free(gt);
        free(gp);
    } else {
        printf("  gvisor: not measured (runsc not found)\n");
    }
    free(his);
    tc_launcher_stop(L);
    char run[160];
    snprintf(run, sizeof(run), "%s/run", state);
    rmdir(run);
    rmdir(state);
    int fail = c.ok != 50 || submitted != 50;
    if (getenv("TOOLCAGE_BENCH_ENFORCE") && msp / mbp > 1.3)
        fail = 1;
    return fail;
}
