/* Host uid ranges of launchers (sandbox/uidrange.h): the lock-file registry, then real
 * launchers forced onto the same ranges. Run as root. Like test_sandbox, the binary is its
 * own launcher (`test_sandbox_uids launcher --fd 3 ...`). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "sandbox/uidrange.h"
#include "tap.h"

static char base_dir[128];

static void rm_registry(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* A child that takes a range with the given hint, reports it on `report` and holds it until
 * `hold` reaches EOF (or it is killed). */
static pid_t holder(const char *dir, unsigned nranges, unsigned hint, int report, int hold,
                    int hold_w)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    close(hold_w);
    unsigned idx = 0;
    int fd = -1;
    int r = tc_uidrange_acquire(dir, nranges, hint, &idx, &fd);
    if (r == 0)
        tc_uidrange_note(fd);
    int msg[2] = {r, (int)idx};
    (void)!write(report, msg, sizeof(msg));
    char c;
    while (read(hold, &c, 1) > 0)
        ;
    _exit(0);
}

static int file_pid(const char *dir, unsigned idx)
{
    char p[256], buf[32] = "";
    snprintf(p, sizeof(p), "%s/%u.lock", dir, idx);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return (int)strtol(buf, NULL, 10);
}

/* A launcher writes its pid into its range's file shortly after its start (UID_NOTE_MS, off
 * its first call's path): wait for it, up to 2 s. */
static bool file_names(const char *dir, unsigned idx, int pid)
{
    for (int i = 0; i < 200 && file_pid(dir, idx) != pid; i++)
        usleep(10000);
    return file_pid(dir, idx) == pid;
}

/* Twelve processes start from the same range at once: each gets one of its own, the
 * next free ones in order; a range held by a process killed with SIGKILL, or that exited,
 * is free again at once. */
TEST(same_hint_never_shared_and_freed_on_death)
{
    char dir[160];
    snprintf(dir, sizeof(dir), "%s/reg1", base_dir);
    int rep[2], hold[2];
    CHECK(pipe(rep) == 0 && pipe(hold) == 0);
    pid_t kids[12];
    for (int i = 0; i < 12; i++)
        kids[i] = holder(dir, TC_UID_RANGES, 7, rep[1], hold[0], hold[1]);
    close(hold[0]);
    unsigned seen[12], mask = 0;
    pid_t holding10 = 0;
    for (int i = 0; i < 12; i++) {
        int msg[2] = {-1, 0};
        CHECK(read(rep[0], msg, sizeof(msg)) == sizeof(msg));
        CHECK(msg[0] == 0);
        seen[i] = (unsigned)msg[1];
        CHECK(seen[i] >= 7 && seen[i] < 19);
        if (seen[i] >= 7 && seen[i] < 19) {
            CHECK(!(mask & (1u << (seen[i] - 7)))); /* never twice */
            mask |= 1u << (seen[i] - 7);
        }
        int fp = file_pid(dir, seen[i]);
        for (int k = 0; k < 12; k++)
            if (kids[k] == fp && seen[i] == 10)
                holding10 = fp;
    }
    CHECK(mask == 0xfff);
    CHECK(holding10 > 0); /* the lock file names its holder */

    /* SIGKILL: no clean-up runs, the kernel drops the lock */
    unsigned idx = 0;
    int fd = -1;
    if (holding10 > 0) {
        kill(holding10, SIGKILL);
        waitpid(holding10, NULL, 0);
        CHECK(tc_uidrange_acquire(dir, TC_UID_RANGES, 7, &idx, &fd) == 0);
        CHECK(idx == 10);
        close(fd);
    }
    /* everyone exits: all twelve free again */
    close(hold[1]);
    for (int i = 0; i < 12; i++)
        if (kids[i] != holding10)
            waitpid(kids[i], NULL, 0);
    int fds[12];
    for (int i = 0; i < 12; i++) {
        CHECK(tc_uidrange_acquire(dir, TC_UID_RANGES, 7, &idx, &fds[i]) == 0);
        CHECK(idx == 7u + (unsigned)i);
    }
    for (int i = 0; i < 12; i++)
        close(fds[i]);
    close(rep[0]);
    close(rep[1]);
    rm_registry(dir);
}

TEST(all_taken_is_ebusy)
{
    char dir[160];
    snprintf(dir, sizeof(dir), "%s/reg2", base_dir);
    int fds[3];
    unsigned idx;
    for (int i = 0; i < 3; i++)
        CHECK(tc_uidrange_acquire(dir, 3, 0, &idx, &fds[i]) == 0);
    /* a second process: the locks of one open file description are not shared by another */
    int rep[2], hold[2];
    CHECK(pipe(rep) == 0 && pipe(hold) == 0);
    pid_t k = holder(dir, 3, 1, rep[1], hold[0], hold[1]);
    int msg[2] = {0, 0};
    CHECK(read(rep[0], msg, sizeof(msg)) == sizeof(msg));
    CHECK(msg[0] == -EBUSY);
    close(hold[1]);
    waitpid(k, NULL, 0);
    /* even this process cannot take a range twice (the new open file is another owner) */
    int fd = -1;
    CHECK(tc_uidrange_acquire(dir, 3, 2, &idx, &fd) == -EBUSY);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    close(rep[0]);
    close(rep[1]);
    close(hold[0]);
    rm_registry(dir);
}

/* The lock file names its holder alone, whatever an earlier holder (or an older launcher,
 * which wrote "PID\n") left in it: the pid is written over it, in a fixed width, with no
 * truncation. */
TEST(lock_file_names_the_holder)
{
    char dir[160], p[200];
    snprintf(dir, sizeof(dir), "%s/reg5", base_dir);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(p, sizeof(p), "%s/0.lock", dir);
    FILE *f = fopen(p, "w");
    CHECK(f && fputs("9999999\n", f) >= 0 && fclose(f) == 0);
    unsigned idx = 99;
    int fd = -1;
    CHECK(tc_uidrange_acquire(dir, 3, 0, &idx, &fd) == 0 && idx == 0);
    tc_uidrange_note(fd);
    CHECK(file_pid(dir, 0) == (int)getpid());
    struct stat st;
    CHECK(stat(p, &st) == 0 && st.st_size == 11); /* one line: "%10d\n" */
    close(fd);
    rm_registry(dir);
}

TEST(unsafe_registry_refused)
{
    char dir[160], link[170];
    unsigned idx;
    int fd = -1;
    snprintf(dir, sizeof(dir), "%s/reg3", base_dir);
    CHECK(mkdir(dir, 0777) == 0 && chmod(dir, 0777) == 0);
    CHECK(tc_uidrange_acquire(dir, 10, 0, &idx, &fd) == -EPERM); /* others could write */
    CHECK(chmod(dir, 0700) == 0 && chown(dir, 65534, 65534) == 0);
    CHECK(tc_uidrange_acquire(dir, 10, 0, &idx, &fd) == -EPERM); /* not ours */
    CHECK(chown(dir, 0, 0) == 0);
    snprintf(link, sizeof(link), "%s/link", base_dir);
    CHECK(symlink(dir, link) == 0);
    CHECK(tc_uidrange_acquire(link, 10, 0, &idx, &fd) < 0); /* never through a symlink */
    CHECK(tc_uidrange_acquire("relative/dir", 10, 0, &idx, &fd) == -EINVAL);
    CHECK(tc_uidrange_acquire(dir, 10, 0, &idx, &fd) == 0 && idx == 0);
    close(fd);
    unlink(link);
    rm_registry(dir);
}

static int range_index(struct tc_launcher *l, uid_t *ret_first)
{
    json_t *hi = tc_launcher_host_info(l);
    json_t *r = json_object_get(hi, "uid_range");
    int idx = json_is_object(r) ? (int)json_integer_value(json_object_get(r, "index")) : -1;
    if (ret_first)
        *ret_first = (uid_t)json_integer_value(json_object_get(r, "first"));
    CHECK(json_integer_value(json_object_get(r, "count")) == TC_UID_RANGE_SIZE);
    json_decref(hi);
    return idx;
}

/* Some process runs as a host uid of [first, first + TC_UID_RANGE_SIZE). */
static bool uid_in_use(uid_t first)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    bool found = false;
    while (d && !found && (e = readdir(d))) {
        char p[300], line[256];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/status", e->d_name);
        FILE *f = fopen(p, "r");
        while (f && fgets(line, sizeof(line), f)) {
            unsigned long uid;
            if (sscanf(line, "Uid: %lu", &uid) == 1) {
                found = uid >= first && uid < first + TC_UID_RANGE_SIZE;
                break;
            }
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

struct sync_run {
    struct tc_launcher *l;
    json_t *spec, *res;
    int rc;
};

static void *run_thread(void *arg)
{
    struct sync_run *sr = arg;
    sr->rc = tc_launcher_run_sync(sr->l, sr->spec, &sr->res);
    return NULL;
}

static const char *registry; /* NULL: the default registry */

static int start(const char *name, struct tc_launcher **ret)
{
    char state[192];
    snprintf(state, sizeof(state), "%s/%s", base_dir, name);
    mkdir(state, 0700);
    struct tc_launcher_options o = {.exe = "/proc/self/exe",
                                    .state_dir = state,
                                    .max_sandboxes = 4,
                                    .uid_registry = registry,
                                    .pool = 1};
    return tc_launcher_start(&o, ret);
}

/* Real launchers whose pids would pick ranges another process holds: every range but two is
 * held, so every launcher has to search, and two launchers get the two free ranges, never one
 * range twice; a third cannot start; a launcher killed with SIGKILL frees its range for the
 * launcher that replaces it; a stopped one frees it too. */
TEST(launchers_forced_together_never_share)
{
    char dir[160];
    snprintf(dir, sizeof(dir), "%s/reg4", base_dir);
    const unsigned free1 = 100, free2 = 1500;
    int rep[2], hold[2];
    CHECK(pipe(rep) == 0 && pipe(hold) == 0);
    pid_t hog = fork();
    if (hog == 0) {
        close(hold[1]);
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        int ok = 0;
        for (unsigned i = 0; i < TC_UID_RANGES; i++) {
            unsigned idx;
            int fd;
            if (i == free1 || i == free2)
                continue;
            if (tc_uidrange_acquire(dir, TC_UID_RANGES, i, &idx, &fd) == 0 && idx == i)
                ok++;
        }
        (void)!write(rep[1], &ok, sizeof(ok));
        char c;
        while (read(hold[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(hold[0]);
    int held = 0;
    CHECK(read(rep[0], &held, sizeof(held)) == sizeof(held));
    CHECK(held == (int)TC_UID_RANGES - 2);
    if (held != (int)TC_UID_RANGES - 2) {
        fprintf(stderr, "    (the hog holds %d ranges; RLIMIT_NOFILE too low?)\n", held);
        kill(hog, SIGKILL);
        waitpid(hog, NULL, 0);
        return;
    }

    registry = dir;
    struct tc_launcher *a = NULL, *b = NULL, *c = NULL;
    CHECK(start("la", &a) == 0);
    CHECK(start("lb", &b) == 0);
    uid_t first_a = 0, first_b = 0;
    int ia = a ? range_index(a, &first_a) : -1, ib = b ? range_index(b, &first_b) : -1;
    CHECK(ia != ib);
    CHECK((ia == (int)free1 && ib == (int)free2) || (ia == (int)free2 && ib == (int)free1));
    CHECK(first_a == tc_uidrange_first((unsigned)ia) && first_b == tc_uidrange_first((unsigned)ib));
    CHECK(file_names(dir, (unsigned)ia, tc_launcher_pid(a)));
    /* a third launcher finds no range: it refuses to start rather than share one */
    CHECK(start("lc", &c) < 0);

    /* the sandboxes run as uids of their launcher's range */
    if (a) {
        json_t *spec = json_pack(
            "{s:s, s:s, s:[s,s,s], s:[s], s:{s:i, s:i, s:I, s:i, s:I, s:i, s:i, s:I, s:I}}", "id",
            "uid-probe", "backend", "native", "argv", "/bin/bash", "-c", "sleep 1.5; echo done",
            "env", "PATH=/usr/bin:/bin", "limits", "wall_ms", 10000, "cpu_ms", 10000,
            "memory_bytes", (json_int_t)128 << 20, "pids", 16, "file_size_bytes",
            (json_int_t)1 << 20, "nofile", 64, "output_bytes", 4096, "workspace_bytes",
            (json_int_t)1 << 20, "tmp_bytes", (json_int_t)1 << 20);
        struct sync_run sr = {.l = a, .spec = spec, .rc = -1};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, run_thread, &sr) == 0);
        usleep(700000);
        CHECK(uid_in_use(first_a));
        pthread_join(t, NULL);
        CHECK(sr.rc == 0);
        CHECK(strcmp(json_string_value(json_object_get(sr.res, "status")), "completed") == 0);
        json_decref(sr.res);
        json_decref(spec);
    }

    /* SIGKILL the launcher of a: its replacement gets the range back (the only free one) */
    if (a) {
        unsigned restarts = tc_launcher_restarts(a);
        int old = tc_launcher_pid(a);
        kill(old, SIGKILL);
        for (int i = 0; i < 500 && (tc_launcher_restarts(a) == restarts || !tc_launcher_alive(a));
             i++)
            usleep(10000);
        CHECK(tc_launcher_alive(a));
        CHECK(tc_launcher_pid(a) != old);
        CHECK(range_index(a, NULL) == ia);
        CHECK(file_names(dir, (unsigned)ia, tc_launcher_pid(a)));
    }

    /* stopped launchers free their ranges */
    tc_launcher_stop(a);
    tc_launcher_stop(b);
    registry = NULL;
    unsigned idx;
    int f1 = -1, f2 = -1;
    CHECK(tc_uidrange_acquire(dir, TC_UID_RANGES, 0, &idx, &f1) == 0 && idx == free1);
    CHECK(tc_uidrange_acquire(dir, TC_UID_RANGES, 0, &idx, &f2) == 0 && idx == free2);
    close(f1);
    close(f2);
    close(hold[1]);
    waitpid(hog, NULL, 0);
    close(rep[0]);
    close(rep[1]);
    rm_registry(dir);
    char p[192];
    static const char *const names[] = {"la", "lb", "lc"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s/run", base_dir, names[i]);
        rmdir(p);
        snprintf(p, sizeof(p), "%s/%s", base_dir, names[i]);
        rmdir(p);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "launcher") == 0)
        return tc_launcher_main(argc - 1, argv + 1);
    if (geteuid() != 0) {
        printf("0 passed, 0 failed (skipped: needs root)\n");
        return 0;
    }
    snprintf(base_dir, sizeof(base_dir), "/tmp/toolcage-test-uids-%d", (int)getpid());
    mkdir(base_dir, 0700);
    RUN(same_hint_never_shared_and_freed_on_death);
    RUN(all_taken_is_ebusy);
    RUN(lock_file_names_the_holder);
    RUN(unsafe_registry_refused);
    RUN(launchers_forced_together_never_share);
    rmdir(base_dir);
    return TAP_DONE();
}
