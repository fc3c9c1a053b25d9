/* Sandbox launcher tests. Run as root. The binary is its own launcher: `test_sandbox
 * launcher --fd 3 ...` dispatches to tc_launcher_main(), like `toolcage launcher`. */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/microvm.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"
#include "sandbox/workspace.h"
#include "sandbox/uidrange.h"
#include "tap.h"

static struct tc_launcher *L;
static unsigned id_counter;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *limits(void)
{
    return json_pack("{s:i, s:i, s:I, s:i, s:I, s:i, s:i, s:I, s:I}", "wall_ms", 10000, "cpu_ms",
                     10000, "memory_bytes", (json_int_t)256 << 20, "pids", 64, "file_size_bytes",
                     (json_int_t)64 << 20, "nofile", 256, "output_bytes", 1 << 20,
                     "workspace_bytes", (json_int_t)64 << 20, "tmp_bytes", (json_int_t)64 << 20);
}

static json_t *spec_argv(json_t *argv)
{
    char id[64];
    snprintf(id, sizeof(id), "t%u-%d", ++id_counter, (int)getpid());
    return json_pack("{s:s, s:s, s:o, s:[s,s,s], s:o}", "id", id, "backend", "native", "argv", argv,
                     "env", "PATH=/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", "limits",
                     limits());
}

static json_t *spec_sh(const char *script)
{
    return spec_argv(json_pack("[s,s,s]", "/bin/bash", "-c", script));
}

static json_t *spec_py(const char *code)
{
    return spec_argv(json_pack("[s,s,s]", "/usr/bin/python3", "-c", code));
}

static void set_limit(json_t *spec, const char *name, json_int_t v)
{
    json_object_set_new(json_object_get(spec, "limits"), name, json_integer(v));
}

static json_t *run(json_t *spec)
{
    json_t *res = NULL;
    int r = tc_launcher_run_sync(L, spec, &res);
    json_decref(spec);
    if (r < 0) {
        fprintf(stderr, "    run_sync: %s\n", strerror(-r));
        return json_object();
    }
    return res;
}

/* Decoded stream as a NUL-terminated string (static buffer per stream). */
static const char *stream(json_t *res, const char *key)
{
    static char bufs[2][1 << 21];
    char *buf = bufs[strcmp(key, "stdout_b64") == 0 ? 0 : 1];
    const char *b = json_string_value(json_object_get(res, key));
    unsigned char *data = NULL;
    size_t len = 0;

    buf[0] = '\0';
    if (b && tc_b64_decode(b, strlen(b), &data, &len) == 0) {
        if (len >= sizeof(bufs[0]))
            len = sizeof(bufs[0]) - 1;
        memcpy(buf, data, len);
        buf[len] = '\0';
        free(data);
    }
    return buf;
}
#define OUT(res) stream(res, "stdout_b64")
#define ERR(res) stream(res, "stderr_b64")

static const char *str(json_t *res, const char *key)
{
    const char *s = json_string_value(json_object_get(res, key));
    return s ? s : "(null)";
}

static long long num(json_t *res, const char *key)
{
    json_t *v = json_object_get(res, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -999;
}

static long long violations(json_t *res, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(res, "policy_violations"), i, v)
    {
        if (strcmp(str(v, "syscall"), name) == 0)
            return num(v, "count");
    }
    return 0;
}

static void dump(json_t *res)
{
    char *s = json_dumps(res, JSON_COMPACT);
    fprintf(stderr, "    result: %.2000s\n    stdout: %.500s\n    stderr: %.500s\n", s ? s : "?",
            OUT(res), ERR(res));
    free(s);
}

/* ---- leak checks ---- */

static int count_dir(const char *path, bool dirs_only)
{
    DIR *d = opendir(path);
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.' && (!dirs_only || de->d_type == DT_DIR))
            n++;
    closedir(d);
    return n;
}

static bool same_link(const char *a, const char *b)
{
    char x[PATH_MAX], y[PATH_MAX];
    ssize_t n = readlink(a, x, sizeof(x) - 1), m = readlink(b, y, sizeof(y) - 1);
    return n > 0 && m > 0 && n == m && memcmp(x, y, (size_t)n) == 0;
}

/* A shell the launcher keeps ready (host_info "pool", docs/sandbox.md): its child in a pid
 * namespace of its own, toolcage-init waiting for go, so with no child of its own yet. */
static bool is_idle_shell(int lpid, long pid)
{
    char a[64], b[64], exe[PATH_MAX], kids[64] = "";
    snprintf(a, sizeof(a), "/proc/%d/ns/pid", lpid);
    snprintf(b, sizeof(b), "/proc/%ld/ns/pid", pid);
    if (same_link(a, b))
        return false;
    snprintf(a, sizeof(a), "/proc/%ld/exe", pid);
    ssize_t n = readlink(a, exe, sizeof(exe) - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    const char *base = strrchr(exe, '/');
    if (strcmp(base ? base + 1 : exe, "toolcage-init") != 0)
        return false;
    snprintf(a, sizeof(a), "/proc/%ld/task/%ld/children", pid, pid);
    FILE *f = fopen(a, "re");
    if (!f)
        return false;
    if (!fgets(kids, sizeof(kids), f))
        kids[0] = '\0';
    fclose(f);
    return kids[0] == '\0' || kids[0] == '\n';
}

/* The launcher's egress proxy: its child that runs as nobody (the first one forked at its
 * start, or one started again: egress_proxy_respawned). */
/* /proc/PID/status into buf ("" when gone). */
static void proc_status(long pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
}

static bool is_egress_proxy(long pid)
{
    char buf[4096];
    proc_status(pid, buf, sizeof(buf));
    return strstr(buf, "\nUid:\t65534\t65534\t65534\t65534\n") != NULL;
}

/* Children of the launcher other than its egress proxy (a permanent child) and its idle
 * shells (*ret_shells of them). */
/* pid's children (up to max) into pids; -1 when its list cannot be read. */
static int child_pids_of(int pid, pid_t *pids, int max)
{
    char path[128], buf[4096];
    int n = 0;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    if (fgets(buf, sizeof(buf), f))
        for (char *p = buf, *end; *p && n < max; p = end) {
            long child = strtol(p, &end, 10);
            if (end == p)
                break;
            pids[n++] = (pid_t)child;
        }
    fclose(f);
    return n;
}

/* The launcher's children (up to max) into pids; -1 when its list cannot be read. */
static int launcher_child_pids(pid_t *pids, int max)
{
    return child_pids_of(tc_launcher_pid(L), pids, max);
}

static int launcher_children(int *ret_shells)
{
    pid_t kids[512];
    int k = launcher_child_pids(kids, 512), n = 0, shells = 0;
    if (k < 0)
        return -1;
    for (int i = 0; i < k; i++) {
        if (is_egress_proxy(kids[i]))
            continue;
        if (is_idle_shell(tc_launcher_pid(L), kids[i]))
            shells++;
        else
            n++;
    }
    if (ret_shells)
        *ret_shells = shells;
    return n;
}

static int pool_target(void)
{
    json_t *hi = tc_launcher_host_info(L);
    int n = (int)json_integer_value(json_object_get(hi, "pool"));
    json_decref(hi);
    return n;
}

static int launcher_ws_mounts(void)
{
    char path[128], line[4096];
    int n = 0;
    FILE *f;
    snprintf(path, sizeof(path), "/proc/%d/mountinfo", tc_launcher_pid(L));
    f = fopen(path, "re");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "/run/ws/") || strstr(line, "/run/gv/"))
            n++;
    fclose(f);
    return n;
}

static int launcher_fds(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", tc_launcher_pid(L));
    return count_dir(path, false);
}

/* A group whose only task is an idle shell of the launcher (the shell's own groups). */
static bool idle_shell_group(const char *dir)
{
    char path[PATH_MAX + 16], buf[256];
    long pid = 0, extra = 0;
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    if (fgets(buf, sizeof(buf), f))
        pid = strtol(buf, NULL, 10);
    if (fgets(buf, sizeof(buf), f))
        extra = 1;
    fclose(f);
    return pid > 0 && !extra && is_idle_shell(tc_launcher_pid(L), pid);
}

/* Sandbox groups left below the launcher's parents (not counting its idle shells'). */
static int leftover_cgroups(void)
{
    json_t *hi = tc_launcher_host_info(L), *parents = json_object_get(hi, "cgroup_parents"), *v;
    const char *k;
    int n = 0;
    json_object_foreach(parents, k, v)
    {
        const char *parent = json_string_value(v);
        DIR *d = opendir(parent);
        struct dirent *de;
        if (!d)
            continue;
        while ((de = readdir(d))) {
            char dir[PATH_MAX];
            if (de->d_name[0] == '.' || de->d_type != DT_DIR)
                continue;
            snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name);
            if (!idle_shell_group(dir))
                n++;
        }
        closedir(d);
    }
    json_decref(hi);
    return n;
}

static int base_fds;

/* The pool is full again (at rest, the launcher refills it one shell at a time). */
static bool pool_full(void)
{
    int shells = 0;
    launcher_children(&shells);
    return shells == pool_target();
}

/* The launcher's fd count at rest, with its pool full (a message memfd may still be closing
 * right after HELLO). */
static int settled_fds(void)
{
    for (int i = 0; i < 300 && !pool_full(); i++)
        usleep(10000);
    int n = launcher_fds();
    for (int i = 0; i < 20; i++) {
        usleep(10000);
        int m = launcher_fds();
        if (m < n)
            n = m;
    }
    return n;
}

static void check_clean(void)
{
    int cg = -1, kids = -1, mounts = -1, fds = -1, shells = -1, pool = pool_target();
    /* results are sent before the last rmdir, and the pool refills when idle: give teardown
     * a moment */
    for (int i = 0; i < 200; i++) {
        cg = leftover_cgroups();
        kids = launcher_children(&shells);
        mounts = launcher_ws_mounts();
        fds = launcher_fds();
        if (cg == 0 && kids == 0 && mounts == 0 && fds == base_fds && shells == pool)
            break;
        usleep(10000);
    }
    if (cg || kids || mounts || fds != base_fds || shells != pool)
        fprintf(stderr,
                "    leak: cgroups=%d children=%d ws-mounts=%d fds=%d (base %d) idle shells=%d "
                "(pool %d)\n",
                cg, kids, mounts, fds, base_fds, shells, pool);
    CHECK(cg == 0);
    CHECK(kids == 0);
    CHECK(mounts == 0);
    CHECK(fds == base_fds);
    CHECK(shells == pool);
}

/* ---- cases ---- */

TEST(echo_exit_code)
{
    json_t *r = run(spec_sh("echo hello; echo oops >&2; exit 3"));
    CHECK(strcmp(str(r, "status"), "failed") == 0);
    CHECK(num(r, "exit_code") == 3);
    CHECK(strcmp(OUT(r), "hello\n") == 0);
    CHECK(strcmp(ERR(r), "oops\n") == 0);
    CHECK(json_is_null(json_object_get(r, "killed_reason")));
    CHECK(json_is_null(json_object_get(r, "signal")));
    CHECK(num(r, "duration_ms") >= 0 && num(r, "duration_ms") < 5000);
    CHECK(json_is_object(json_object_get(r, "enforced")));
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(python_completed)
{
    json_t *r = run(
        spec_py("import sys, os; print(sys.version_info[0], os.getcwd(), os.environ.get('HOME'))"));
    CHECK(strcmp(str(r, "status"), "completed") == 0);
    CHECK(num(r, "exit_code") == 0);
    CHECK(strcmp(OUT(r), "3 /workspace /workspace\n") == 0);
    CHECK(num(r, "memory_peak_bytes") > 1000000);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(stdin_delivered)
{
    json_t *s = spec_sh("tr a-z A-Z; echo; wc -c < /dev/stdin");
    json_object_set_new(s, "stdin_b64", json_string("aGVsbG8gc3RkaW4=")); /* "hello stdin" */
    json_t *r = run(s);
    CHECK(strcmp(OUT(r), "HELLO STDIN\n0\n") == 0);
    CHECK(num(r, "exit_code") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);

    /* a large stdin that does not fit into a pipe buffer */
    size_t n = 3 << 20;
    char *raw = malloc(n);
    memset(raw, 'z', n);
    char *b64 = tc_b64_encode(raw, n);
    s = spec_sh("wc -c");
    json_object_set_new(s, "stdin_b64", json_string(b64));
    r = run(s);
    CHECK(strcmp(OUT(r), "3145728\n") == 0);
    json_decref(r);
    free(raw);
    free(b64);
    check_clean();
}

TEST(workspace_files_and_collect)
{
    json_t *s = spec_sh("cat in/data.txt; ls -ln in/data.txt | awk '{print $1, $3}';"
                        " echo result > out.txt; mkdir -p sub; echo deep > sub/x.txt;"
                        " ln -s /etc/passwd link.txt; echo nope > skip.bin");
    json_object_set_new(s, "files",
                        json_pack("[{s:s, s:s, s:i}]", "path", "in/data.txt", "content_b64",
                                  "ZGF0YQo=", "mode", 0600));
    json_object_set_new(s, "collect", json_pack("[s]", "*.txt"));
    json_t *r = run(s);
    CHECK(strcmp(OUT(r), "data\n-rw------- 1000\n") == 0);
    json_t *files = json_object_get(r, "files");
    bool out = false, deep = false, link = false, skip = false, input = false;
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *p = str(f, "path");
        if (strcmp(p, "out.txt") == 0)
            out = strcmp(str(f, "content_b64"), "cmVzdWx0Cg==") == 0 && num(f, "size") == 7;
        if (strcmp(p, "sub/x.txt") == 0)
            deep = true;
        if (strcmp(p, "link.txt") == 0)
            link = true;
        if (strcmp(p, "skip.bin") == 0)
            skip = true;
        if (strcmp(p, "in/data.txt") == 0)
            input = true;
    }
    CHECK(out);
    CHECK(deep);
    CHECK(input);
    CHECK(!link); /* symlinks are never followed */
    CHECK(!skip);
    CHECK(!json_object_get(r, "files_incomplete")); /* only set when a cap left a match out */
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

/* A session's files API underneath (sandbox/workspace.h), on a plain directory: what the
 * sandboxed code can make of its workspace (links out and in, a FIFO, a deep tree) never
 * leads a get, put or delete outside it, and never blocks. */
TEST(workspace_file_ops)
{
    char dir[] = "/tmp/toolcage-ws-XXXXXX", outside[PATH_MAX];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(outside, sizeof(outside), "%s.outside", dir);
    FILE *f = fopen(outside, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("host secret\n", f);
        fclose(f);
    }
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(d >= 0);
    bool created = false;
    char *buf = NULL;
    size_t len = 0;

    CHECK(tc_ws_path_ok("a/b.txt") && tc_ws_path_ok("x"));
    const char *bad[] = {"",     "/etc/passwd", "../x", "a/../b", "a/./b",
                         "a//b", "a/",          ".",    "a\\b",   "a\tb"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(bad); i++) {
        CHECK(!tc_ws_path_ok(bad[i]));
        CHECK(tc_ws_put(d, bad[i], "x", 1, 0, 0, NULL) == -EINVAL);
        CHECK(tc_ws_get(d, bad[i], 100, &buf, &len) == -EINVAL);
    }

    CHECK(tc_ws_put(d, "sub/dir/f.txt", "hello", 5, 1234, 1234, &created) == 0 && created);
    CHECK(tc_ws_put(d, "sub/dir/f.txt", "hello!", 6, 1234, 1234, &created) == 0 && !created);
    struct stat st;
    CHECK(fstatat(d, "sub/dir/f.txt", &st, 0) == 0 && st.st_uid == 1234 &&
          (st.st_mode & 0777) == 0644);
    CHECK(fstatat(d, "sub", &st, 0) == 0 && st.st_uid == 1234);
    CHECK(tc_ws_get(d, "sub/dir/f.txt", 100, &buf, &len) == 0 && len == 6 &&
          memcmp(buf, "hello!", 6) == 0);
    free(buf);
    buf = NULL;
    CHECK(tc_ws_get(d, "sub/dir/f.txt", 5, &buf, &len) == -EFBIG);
    CHECK(tc_ws_get(d, "sub/dir", 100, &buf, &len) == -EISDIR);
    CHECK(tc_ws_get(d, "nope", 100, &buf, &len) == -ENOENT);

    /* what hostile code leaves: links out, a link in (to a file inside), a FIFO */
    CHECK(symlinkat(outside, d, "out") == 0);
    CHECK(symlinkat("/tmp", d, "tmpdir") == 0);
    CHECK(symlinkat("sub/dir/f.txt", d, "in") == 0);
    CHECK(mkfifoat(d, "pipe", 0644) == 0);
    CHECK(tc_ws_get(d, "out", 100, &buf, &len) == -ELOOP);
    CHECK(tc_ws_get(d, "in", 100, &buf, &len) == -ELOOP); /* even inside: never followed */
    CHECK(tc_ws_put(d, "tmpdir/planted", "x", 1, 0, 0, NULL) == -ELOOP);
    CHECK(access("/tmp/planted", F_OK) != 0);
    CHECK(tc_ws_get(d, "pipe", 100, &buf, &len) == -EPERM); /* at once: O_NONBLOCK */
    /* a put on a link's name replaces the link; the file it named is untouched */
    CHECK(tc_ws_put(d, "out", "mine", 4, 0, 0, &created) == 0 && !created);
    CHECK(fstatat(d, "out", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode));
    f = fopen(outside, "r");
    char line[64] = "";
    CHECK(f && fgets(line, sizeof(line), f) && strcmp(line, "host secret\n") == 0);
    if (f)
        fclose(f);
    /* delete: the link itself, never what it names; a non-empty directory stays */
    CHECK(tc_ws_delete(d, "tmpdir") == 0);
    CHECK(access("/tmp", F_OK) == 0);
    CHECK(tc_ws_delete(d, "sub/dir") == -ENOTEMPTY);
    CHECK(tc_ws_delete(d, "tmpdir/x") == -ENOENT);

    bool incomplete = true;
    json_t *l = tc_ws_list(d, 100, &incomplete);
    CHECK(l && !incomplete);
    size_t i;
    json_t *e;
    int seen = 0;
    json_array_foreach(l, i, e)
    {
        const char *p = json_string_value(json_object_get(e, "path"));
        const char *t = json_string_value(json_object_get(e, "type"));
        if (strcmp(p, "in") == 0 && strcmp(t, "symlink") == 0)
            seen |= 1;
        if (strcmp(p, "pipe") == 0 && strcmp(t, "other") == 0)
            seen |= 2;
        if (strcmp(p, "sub/dir/f.txt") == 0 && strcmp(t, "file") == 0 &&
            json_integer_value(json_object_get(e, "size")) == 6)
            seen |= 4;
    }
    CHECK(seen == 7);
    json_decref(l);
    l = tc_ws_list(d, 100, &incomplete); /* again, on the same fd: the same entries */
    CHECK(l && json_array_size(l) == i && !incomplete);
    json_decref(l);
    l = tc_ws_list(d, 2, &incomplete);
    CHECK(l && json_array_size(l) == 2 && incomplete);
    json_decref(l);

    close(d);
    char cmd[2 * PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, outside);
    CHECK(system(cmd) == 0);
}

TEST(collect_caps)
{
    /* 300 matches: 256 come back and the result says some were left out */
    json_t *s = spec_sh("mkdir m; for i in $(seq 1 300); do echo $i > m/f$i; done");
    json_object_set_new(s, "collect", json_pack("[s]", "m/*"));
    json_t *r = run(s);
    CHECK(json_array_size(json_object_get(r, "files")) == 256);
    CHECK(json_is_true(json_object_get(r, "files_incomplete")));
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(identity_caps_seccomp)
{
    json_t *r = run(
        spec_sh("id -u; id -g; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):'"
                " /proc/self/status | tr -s '\\t ' ' '; hostname; echo $$; cat /proc/self/cgroup"));
    const char *o = OUT(r);
    CHECK(strncmp(o, "1000\n1000\n", 10) == 0);
    CHECK(strstr(o, "CapEff: 0000000000000000\n") != NULL);
    CHECK(strstr(o, "CapPrm: 0000000000000000\n") != NULL);
    CHECK(strstr(o, "CapBnd: 0000000000000000\n") != NULL);
    CHECK(strstr(o, "NoNewPrivs: 1\n") != NULL);
    CHECK(strstr(o, "Seccomp: 2\n") != NULL);
    CHECK(strstr(o, "toolcage\n2\n") != NULL); /* hostname; the program is pid 2 after our init */
    CHECK(strstr(o, "process_api") == NULL && strstr(o, "toolcage/L") == NULL); /* cgroup ns */
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(host_files_unreachable)
{
    json_t *r =
        run(spec_sh("for p in /etc/shadow /etc/ssl/private /root/.pyenv /home/root /var "
                    "/sys/kernel /boot /work /old_root"
                    " /mnt/sandboxing /run; do if test -e \"$p\"; then echo \"LEAK $p\"; fi; done;"
                    " ls -A /root /home | grep -v : | grep . && echo LEAK-dir;"
                    " for f in environ maps mem root/etc/shadow; do cat /proc/1/$f >/dev/null 2>&1 "
                    "&& echo LEAK-pid1-$f; done;"
                    " tr '\\0' ' ' < /proc/1/cmdline | grep -q state-dir && echo LEAK-cmdline;"
                    " ls / | tr '\\n' ' '; echo; ls /proc | grep -E '^[0-9]+$' | wc -l"));
    const char *o = OUT(r);
    CHECK(strstr(o, "LEAK") == NULL);
    CHECK(strstr(o, "bin dev etc home lib") != NULL);
    CHECK(strstr(o, "pyenv") == NULL);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(readonly_outside_workspace)
{
    json_t *r = run(
        spec_sh("for p in /usr/x /etc/x /x /bin/x /dev/x /proc/sys/kernel/hostname; do"
                " echo hi 2>&1 > $p | sed 's/.*: //'; done;"
                " echo a > /workspace/a && echo a > /tmp/a && echo a > /dev/shm/a && echo rw-ok"));
    const char *o = OUT(r);
    /* every write outside the writable mounts fails with EROFS */
    int erofs = 0;
    for (const char *p = o; (p = strstr(p, "Read-only file system")); p++)
        erofs++;
    CHECK(erofs == 6);
    CHECK(strstr(o, "rw-ok") != NULL);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(network_only_loopback)
{
    int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    char script[512];

    CHECK(srv >= 0 && bind(srv, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(srv, 4) == 0);
    getsockname(srv, (struct sockaddr *)&a, &alen);
    snprintf(
        script, sizeof(script),
        "import socket\n"
        "s = socket.socket()\n"
        "try:\n s.connect(('127.0.0.1', %d)); print('CONNECTED')\n"
        "except OSError as e: print('connect', e.errno)\n"
        "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\n"
        "try:\n socket.create_connection(('1.1.1.1', 53), timeout=2); print('EGRESS')\n"
        "except OSError as e: print('egress', e.errno)\n"
        "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(); c = "
        "socket.create_connection(l.getsockname()); print('lo-ok')\n",
        ntohs(a.sin_port));
    json_t *r = run(spec_py(script));
    const char *o = OUT(r);
    CHECK(strstr(o, "connect 111\n") != NULL); /* ECONNREFUSED: our own empty loopback */
    CHECK(strstr(o, "['lo']\n") != NULL);
    CHECK(strstr(o, "egress 101\n") != NULL); /* ENETUNREACH */
    CHECK(strstr(o, "lo-ok") != NULL);
    CHECK(strstr(o, "CONNECTED") == NULL && strstr(o, "EGRESS") == NULL);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    close(srv);
    check_clean();
}

TEST(denied_syscalls_reported)
{
    json_t *r = run(spec_py("import ctypes, os, socket\n"
                            "libc = ctypes.CDLL(None, use_errno=True)\n"
                            "def t(name, rc):\n"
                            "    print(name, rc, os.strerror(ctypes.get_errno()))\n"
                            "t('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None))\n"
                            "t('unshare', libc.unshare(0x10000000))\n"
                            "t('ptrace', libc.ptrace(16, 1, 0, 0))\n"
                            "t('keyctl', libc.syscall(250, 0, 0, 0, 0, 0))\n"
                            "t('bpf', libc.syscall(321, 0, 0, 0))\n"
                            "t('bpf', libc.syscall(321, 0, 0, 0))\n"
                            "t('clone', libc.syscall(56, 0x40000000 | 17, 0, 0, 0, 0))\n"
                            "try:\n socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\nexcept "
                            "OSError as e: print('packet', e.errno)\n"
                            "try:\n socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)\nexcept "
                            "OSError as e: print('raw', e.errno)\n"
                            "import threading; th = threading.Thread(target=lambda: "
                            "print('thread-ok')); th.start(); th.join()\n"
                            "import subprocess; print(subprocess.run(['/bin/echo', 'sub-ok'], "
                            "capture_output=True).stdout.decode().strip())\n"));
    const char *o = OUT(r);
    CHECK(strstr(o, "mount -1 Operation not permitted") != NULL);
    CHECK(strstr(o, "unshare -1 Operation not permitted") != NULL);
    CHECK(strstr(o, "ptrace -1 Operation not permitted") != NULL);
    CHECK(strstr(o, "keyctl -1 Operation not permitted") != NULL);
    CHECK(strstr(o, "bpf -1 Operation not permitted") != NULL);
    CHECK(strstr(o, "clone -1 Operation not permitted") != NULL);
    CHECK(strstr(o, "packet 1\n") != NULL && strstr(o, "raw 1\n") != NULL);
    CHECK(strstr(o, "thread-ok") != NULL && strstr(o, "sub-ok") != NULL);
    CHECK(violations(r, "mount") == 1);
    CHECK(violations(r, "unshare") == 1);
    CHECK(violations(r, "ptrace") == 1);
    CHECK(violations(r, "keyctl") == 1);
    CHECK(violations(r, "bpf") == 2);
    CHECK(violations(r, "clone") == 1);
    CHECK(violations(r, "socket") == 2);
    CHECK(violations(r, "clone3") == 0); /* libc's clone3 probe is not a violation */
    CHECK(json_array_size(json_object_get(r, "policy_violations")) == 7);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(fork_bomb_contained)
{
    json_t *s = spec_sh(":(){ :|:& };: ; sleep 30");
    set_limit(s, "pids", 32);
    set_limit(s, "wall_ms", 2000);
    int64_t t0 = mono_ms();
    json_t *r = run(s);
    int64_t dt = mono_ms() - t0;
    CHECK(strcmp(str(r, "status"), "timeout") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "timeout") == 0);
    CHECK(dt < 4000);
    CHECK(json_is_true(json_object_get(r, "pids_limit_hit")));
    /* the host can still fork */
    pid_t p = fork();
    if (p == 0)
        _exit(7);
    int st = 0;
    CHECK(p > 0 && waitpid(p, &st, 0) == p && WEXITSTATUS(st) == 7);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(memory_bomb_killed)
{
    json_t *s = spec_py("a = []\nwhile True: a.append(bytearray(8 << 20))\n");
    set_limit(s, "memory_bytes", 64 << 20);
    json_t *r = run(s);
    CHECK(strcmp(str(r, "status"), "killed") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "memory") == 0);
    CHECK(num(r, "memory_peak_bytes") > (32 << 20) &&
          num(r, "memory_peak_bytes") <= (64 << 20) + (1 << 20));
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

/* A memory bomb spread over four children, each under the limit, together over it: the
 * kernel kills one of them, and the launcher the whole tree before the parent can learn that
 * all four are gone (v1, where the OOM killer takes one task at a time, this needs the OOM
 * event read at once: polled at the tick, 7 of 80 such runs printed "survived", and this test
 * failed 1 time in 3). */
TEST(memory_bomb_children_killed_together)
{
    int survived = 0, other = 0;
    for (int i = 0; i < 10; i++) {
        json_t *s = spec_py("import os, time\n"
                            "kids = []\n"
                            "for i in range(4):\n"
                            "    pid = os.fork()\n"
                            "    if pid == 0:\n"
                            "        b = bytearray(30 << 20)\n"
                            "        for j in range(0, len(b), 4096): b[j] = 1\n"
                            "        time.sleep(30)\n"
                            "        os._exit(0)\n"
                            "    kids.append(pid)\n"
                            "for k in kids: os.waitpid(k, 0)\n"
                            "print('survived', flush=True)\n");
        set_limit(s, "memory_bytes", 64 << 20);
        json_t *r = run(s);
        if (strstr(OUT(r), "survived"))
            survived++;
        if (strcmp(str(r, "status"), "killed") != 0 || strcmp(str(r, "killed_reason"), "memory"))
            other++, dump(r);
        json_decref(r);
    }
    CHECK(survived == 0);
    CHECK(other == 0);
    if (tap_case_failed)
        fprintf(stderr, "    of 10 runs: %d printed survived, %d not killed for memory\n", survived,
                other);
    check_clean();
}

TEST(timeout_kills_everything)
{
    json_t *s = spec_sh("sleep 100 & sleep 100 & (setsid sleep 100 &) ; sleep 100");
    set_limit(s, "wall_ms", 1000);
    int64_t t0 = mono_ms();
    json_t *r = run(s);
    int64_t dt = mono_ms() - t0;
    CHECK(strcmp(str(r, "status"), "timeout") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "timeout") == 0);
    CHECK(strcmp(str(r, "signal"), "SIGKILL") == 0);
    CHECK(dt >= 1000 && dt < 1500);
    CHECK(num(r, "duration_ms") >= 1000 && num(r, "duration_ms") < 1500);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(cpu_limit)
{
    json_t *s = spec_py("while True: pass\n");
    set_limit(s, "cpu_ms", 500);
    json_t *r = run(s);
    CHECK(strcmp(str(r, "status"), "killed") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "cpu") == 0);
    CHECK(num(r, "cpu_ms") >= 450 && num(r, "cpu_ms") < 2000);
    CHECK(num(r, "duration_ms") < 3000);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(output_truncated)
{
    json_t *s = spec_py("import sys; sys.stdout.write('x' * 100000); sys.stderr.write('e' * 10)");
    set_limit(s, "output_bytes", 1000);
    json_t *r = run(s);
    CHECK(strcmp(str(r, "status"), "completed") == 0);
    CHECK(strlen(OUT(r)) == 1000);
    CHECK(json_is_true(json_object_get(r, "stdout_truncated")));
    CHECK(json_is_false(json_object_get(r, "stderr_truncated")));
    CHECK(strcmp(ERR(r), "eeeeeeeeee") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);

    /* an endless flood is killed once 64 MiB have been thrown away */
    s = spec_argv(json_pack("[s]", "/usr/bin/yes"));
    set_limit(s, "output_bytes", 4096);
    r = run(s);
    CHECK(strcmp(str(r, "status"), "killed") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "output") == 0);
    CHECK(strlen(OUT(r)) == 4096);
    json_decref(r);
    check_clean();
}

TEST(disk_limits)
{
    json_t *s = spec_sh("dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1 | head -1; ls -l "
                        "/workspace/big | awk '{print $5}'");
    set_limit(s, "workspace_bytes", 8 << 20);
    json_t *r = run(s);
    CHECK(strstr(OUT(r), "No space left on device") != NULL);
    CHECK(strstr(OUT(r), "\n8388608\n") != NULL);
    CHECK(json_is_true(json_object_get(r, "workspace_full")));
    if (tap_case_failed)
        dump(r);
    json_decref(r);

    s = spec_argv(json_pack("[s,s,s,s,s]", "/usr/bin/dd", "if=/dev/zero", "of=/tmp/big", "bs=1M",
                            "count=10"));
    set_limit(s, "file_size_bytes", 1 << 20);
    r = run(s);
    CHECK(strcmp(str(r, "status"), "killed") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "disk") == 0);
    CHECK(strcmp(str(r, "signal"), "SIGXFSZ") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
}

TEST(spec_mounts)
{
    char dir[128], file[160];
    snprintf(dir, sizeof(dir), "/tmp/toolcage-test-%d-data", (int)getpid());
    snprintf(file, sizeof(file), "%s/in.txt", dir);
    mkdir(dir, 0755);
    chmod(dir, 01777); /* host permissions still apply to the sandbox's host uid */
    FILE *f = fopen(file, "w");
    if (f) {
        fputs("from host\n", f);
        fclose(f);
    }
    json_t *s = spec_sh("cat /data/ro/in.txt; echo x 2>&1 > /data/ro/new | sed 's/.*: //';"
                        " echo written > /data/rw/out.txt && echo rw-ok");
    json_object_set_new(s, "mounts",
                        json_pack("[{s:s, s:s}, {s:s, s:s, s:b}]", "source", dir, "target",
                                  "/data/ro", "source", dir, "target", "/data/rw", "writable", 1));
    json_t *r = run(s);
    CHECK(strcmp(OUT(r), "from host\nRead-only file system\nrw-ok\n") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    snprintf(file, sizeof(file), "%s/out.txt", dir);
    struct stat st;
    CHECK(stat(file, &st) == 0 && st.st_size == 8);
    unlink(file);
    snprintf(file, sizeof(file), "%s/in.txt", dir);
    unlink(file);
    rmdir(dir);

    /* a cwd that does not exist is a setup error, not a crash */
    s = spec_sh("pwd");
    json_object_set_new(s, "cwd", json_string("/nonexistent"));
    r = run(s);
    CHECK(strcmp(str(r, "status"), "error") == 0);
    CHECK(strstr(str(r, "error"), "chdir to cwd: No such file or directory") != NULL);
    json_decref(r);
    check_clean();
}

TEST(exec_failure)
{
    json_t *r = run(spec_argv(json_pack("[s]", "/no/such/binary")));
    CHECK(strcmp(str(r, "status"), "failed") == 0);
    CHECK(num(r, "exit_code") == 127);
    CHECK(strstr(ERR(r), "cannot execute /no/such/binary: No such file or directory") != NULL);
    json_decref(r);
    check_clean();
}

TEST(invalid_specs_rejected)
{
    static const char *const bad[] = {
        "{}",
        "{\"id\":\"a/b\",\"backend\":\"native\",\"argv\":[\"/bin/true\"],\"limits\":LIM}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"true\"],\"limits\":LIM}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[],\"limits\":LIM}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/true\"]}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/true\"],\"limits\":{\"wall_ms\":1}}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/true\"],\"files\":[{\"path\":\"../"
        "x\",\"content_b64\":\"\"}],\"limits\":LIM}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/true\"],\"files\":[{\"path\":\"/etc/"
        "x\",\"content_b64\":\"\"}],\"limits\":LIM}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/"
        "true\"],\"env\":[\"NOEQUALS\"],\"limits\":LIM}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/"
        "true\"],\"network\":\"host\",\"limits\":LIM}",
        "{\"id\":\"a\",\"backend\":\"native\",\"argv\":[\"/bin/true\"],\"bogus\":1,\"limits\":LIM}",
    };
    json_t *lj = limits();
    char *lim = json_dumps(lj, JSON_COMPACT);
    json_decref(lj);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[2048];
        const char *at = strstr(bad[i], "LIM");
        if (at)
            snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - bad[i]), bad[i], lim, at + 3);
        else
            snprintf(buf, sizeof(buf), "%s", bad[i]);
        json_t *spec = json_loads(buf, 0, NULL), *res = NULL;
        int rc = tc_launcher_run_sync(L, spec, &res);
        if (rc != -EINVAL)
            fprintf(stderr, "    case %zu: %d\n", i, rc);
        CHECK(rc == -EINVAL);
        json_decref(spec);
        json_decref(res);
    }
    free(lim);
    /* negative limit */
    json_t *s = spec_sh("true");
    set_limit(s, "memory_bytes", -1);
    json_t *res = NULL;
    CHECK(tc_launcher_run_sync(L, s, &res) == -EINVAL);
    json_decref(s);
    check_clean();
}

static void *cancel_later(void *arg)
{
    usleep(300000);
    tc_launcher_cancel(L, arg);
    return NULL;
}

TEST(cancel)
{
    json_t *s = spec_sh("sleep 100");
    char id[80];
    pthread_t t;
    snprintf(id, sizeof(id), "%s", str(s, "id"));
    pthread_create(&t, NULL, cancel_later, id);
    int64_t t0 = mono_ms();
    json_t *r = run(s);
    pthread_join(t, NULL);
    /* asked for: "cancelled" (a launcher that stops kills with status "killed") */
    CHECK(strcmp(str(r, "status"), "cancelled") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "cancelled") == 0);
    CHECK(mono_ms() - t0 < 2000);
    json_decref(r);
    check_clean();
}

/* A sandbox's mount namespace is the launcher's to let go of, not its PID 1's (a grace period
 * between the program's end and its result, docs/sandbox.md): while the program runs, the
 * launcher holds it (an fd of its own links to the namespace of the sandbox's PID 1); after
 * the result, once quiet, it holds nothing more (check_clean: its fds are back to base). */
struct ns_probe {
    volatile int stop;
    int held;
};

static bool launcher_holds(int lpid, const char *ns)
{
    char dir[64], fp[PATH_MAX], link[128];
    bool found = false;
    snprintf(dir, sizeof(dir), "/proc/%d/fd", lpid);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && !found && (de = readdir(d))) {
        snprintf(fp, sizeof(fp), "%s/%s", dir, de->d_name);
        ssize_t n = readlink(fp, link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            found = strcmp(link, ns) == 0;
        }
    }
    if (d)
        closedir(d);
    return found;
}

static void *probe_ns(void *arg)
{
    struct ns_probe *p = arg;
    int lpid = tc_launcher_pid(L);
    for (int i = 0; i < 500 && !p->stop && p->held != 3; i++) {
        char path[96], kids[4096], *save = NULL;
        usleep(5000);
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", lpid, lpid);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        if (!fgets(kids, sizeof(kids), f))
            kids[0] = '\0';
        fclose(f);
        for (char *tok = strtok_r(kids, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
            long k = strtol(tok, NULL, 10);
            if (k <= 0 || is_idle_shell(lpid, k))
                continue;
            static const char *const kinds[] = {"mnt", "net"};
            for (int j = 0; j < 2; j++) {
                char ns[128];
                snprintf(path, sizeof(path), "/proc/%ld/ns/%s", k, kinds[j]);
                ssize_t n = readlink(path, ns, sizeof(ns) - 1);
                if (n > 0) {
                    ns[n] = '\0';
                    if (launcher_holds(lpid, ns))
                        p->held |= 1 << j;
                }
            }
        }
    }
    return NULL;
}

TEST(namespaces_held_then_let_go)
{
    struct ns_probe p = {.stop = 0, .held = 0};
    pthread_t t;
    pthread_create(&t, NULL, probe_ns, &p);
    json_t *r = run(spec_sh("sleep 1"));
    p.stop = 1;
    pthread_join(t, NULL);
    CHECK(strcmp(str(r, "status"), "completed") == 0);
    CHECK(p.held & 1); /* the mount namespace */
    CHECK(p.held & 2); /* the network namespace */
    json_decref(r);
    check_clean();
}

/* "hold": the program waits for tc_launcher_go(); its wall time counts from go; a cancel
 * ends it unrun; a slot can be promised ahead (tc_launcher_reserve). */
struct held {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
    json_t *res;
};

static void held_ready(void *ud, const char *id)
{
    struct held *h = ud;
    (void)id;
    pthread_mutex_lock(&h->mu);
    h->ready++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void held_done(void *ud, json_t *res)
{
    struct held *h = ud;
    pthread_mutex_lock(&h->mu);
    h->res = json_incref(res);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Wait (up to ms) until the callback count or result is there. */
static void held_wait(struct held *h, bool for_result, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->mu);
    while (!(for_result ? h->res != NULL : h->ready > 0))
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&h->mu);
}

TEST(hold_go_cancel_reserve)
{
    /* go: runs, with its whole wall time counted from go (held longer than the limit).
     * TOOLCAGE_SLOW (the cgroup v2 VM under TCG sets 10) stretches both times alike. */
    int64_t slow = 1;
    if (getenv("TOOLCAGE_SLOW"))
        (void)tc_parse_i64(getenv("TOOLCAGE_SLOW"), 1, 100, &slow);
    struct held h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    json_t *s = spec_sh("sleep 0.1; echo ran");
    set_limit(s, "wall_ms", 400 * slow);
    json_object_set_new(s, "hold", json_true());
    char id[80];
    snprintf(id, sizeof(id), "%s", str(s, "id"));
    struct tc_launcher_job job = {.done = held_done, .ready = held_ready, .userdata = &h};
    CHECK(tc_launcher_submit_job(L, s, &job) == 0);
    held_wait(&h, false, 5000);
    CHECK(h.ready == 1);
    usleep((useconds_t)(600 * 1000 * slow));
    CHECK(h.res == NULL); /* nothing runs before go */
    CHECK(tc_launcher_go(L, id) == 0);
    held_wait(&h, true, 5000);
    CHECK(strcmp(str(h.res, "status"), "completed") == 0);
    CHECK(strcmp(OUT(h.res), "ran\n") == 0);
    json_decref(h.res);
    json_decref(s);

    /* cancel while held: ends unrun */
    struct held c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    s = spec_sh("echo ran");
    json_object_set_new(s, "hold", json_true());
    snprintf(id, sizeof(id), "%s", str(s, "id"));
    job.userdata = &c;
    CHECK(tc_launcher_submit_job(L, s, &job) == 0);
    held_wait(&c, false, 5000);
    CHECK(tc_launcher_cancel(L, id) == 0);
    held_wait(&c, true, 5000);
    CHECK(strcmp(str(c.res, "status"), "error") == 0);
    CHECK(strstr(str(c.res, "error"), "before the program started") != NULL);
    CHECK(strcmp(OUT(c.res), "") == 0);
    json_decref(c.res);

    /* "hold" and a ready callback go together */
    struct tc_launcher_job no_ready = {.done = held_done, .userdata = &c};
    CHECK(tc_launcher_submit_job(L, s, &no_ready) == -EINVAL);
    json_object_del(s, "hold");
    CHECK(tc_launcher_submit_job(L, s, &job) == -EINVAL);
    json_object_set_new(s, "hold", json_string("yes"));
    CHECK(tc_launcher_submit_job(L, s, &job) == -EINVAL);
    json_decref(s);

    /* promised slots count against the limit until submitted or given back */
    int n = 0;
    while (n < 100 && tc_launcher_reserve(L) == 0)
        n++;
    CHECK(n == 64);
    CHECK(tc_launcher_reserve(L) == -EAGAIN);
    s = spec_sh("true");
    CHECK(tc_launcher_submit(L, s, held_done, &c) == -EAGAIN);
    json_decref(s);
    while (n-- > 0)
        tc_launcher_unreserve(L);
    CHECK(tc_launcher_reserve(L) == 0);
    tc_launcher_unreserve(L);
    check_clean();
}

struct conc {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, ok;
};

static void conc_cb(void *ud, json_t *res)
{
    struct conc *c = ud;
    const char *o = stream(res, "stdout_b64");
    pthread_mutex_lock(&c->mu);
    (void)o;
    if (strcmp(str(res, "status"), "completed") == 0)
        c->ok++;
    else
        dump(res);
    c->done++;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void conc_cb_quiet(void *ud, json_t *res)
{
    struct conc *c = ud;
    pthread_mutex_lock(&c->mu);
    if (strcmp(str(res, "status"), "completed") == 0)
        c->ok++;
    c->done++;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* "session": stdin stays open for tc_launcher_input(), output comes only as chunks (never
 * dropped, even past the 1 MiB buffer), an interrupt reaches the command the shell waits for
 * without ending the shell, an empty input closes stdin, and the result holds no output. */
struct sess {
    struct held h;
    char out[4 << 20];
    size_t n;
};

static void sess_chunk(void *ud, int stream, const char *data, size_t len)
{
    struct sess *S = ud;
    pthread_mutex_lock(&S->h.mu);
    if (stream == 1 && S->n + len < sizeof(S->out)) {
        memcpy(S->out + S->n, data, len);
        S->n += len;
        S->out[S->n] = '\0';
    }
    pthread_cond_broadcast(&S->h.cv);
    pthread_mutex_unlock(&S->h.mu);
}

/* Until stdout holds want (up to ms). */
static bool sess_wait(struct sess *S, const char *want, int ms)
{
    int64_t end = mono_ms() + ms;
    pthread_mutex_lock(&S->h.mu);
    while (!strstr(S->out, want) && mono_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&S->h.cv, &S->h.mu, &ts);
    }
    bool ok = strstr(S->out, want) != NULL;
    pthread_mutex_unlock(&S->h.mu);
    return ok;
}

TEST(session_input_interrupt)
{
    static struct sess S;
    memset(&S, 0, sizeof(S));
    pthread_mutex_init(&S.h.mu, NULL);
    pthread_cond_init(&S.h.cv, NULL);
    json_t *spec = spec_sh("trap 'echo INT' INT\n"
                           "while IFS= read -r l; do\n"
                           "  case $l in big) head -c 3000000 /dev/zero | tr '\\0' x; echo;;\n"
                           "  nap) sleep 30; echo woke:$?;; esac\n"
                           "  echo got:$l\n"
                           "done\n"
                           "echo bye");
    json_object_set_new(spec, "session", json_true());
    char id[80];
    snprintf(id, sizeof(id), "%s", str(spec, "id"));
    struct tc_launcher_job job = {.done = held_done, .chunk = sess_chunk, .userdata = &S};
    CHECK(tc_launcher_submit_job(L, spec, &job) == 0);
    json_decref(spec);
    CHECK(tc_launcher_input(L, id, "one\n", 4) == 0);
    CHECK(sess_wait(&S, "got:one\n", 5000));
    CHECK(tc_launcher_input(L, id, "big\n", 4) == 0);
    CHECK(sess_wait(&S, "got:big\n", 10000));
    pthread_mutex_lock(&S.h.mu);
    size_t xs = 0;
    for (const char *p = strchr(S.out, 'x'); p && *p == 'x'; p++)
        xs++;
    pthread_mutex_unlock(&S.h.mu);
    CHECK(xs == 3000000); /* past the launcher's 1 MiB buffer, nothing dropped */
    int64_t t0 = mono_ms();
    CHECK(tc_launcher_input(L, id, "nap\n", 4) == 0);
    usleep(300 * 1000);
    CHECK(tc_launcher_interrupt(L, id) == 0);
    CHECK(sess_wait(&S, "got:nap\n", 5000));
    CHECK(mono_ms() - t0 < 5000); /* the sleep was interrupted, not waited for */
    CHECK(strstr(S.out, "INT\n") != NULL);
    CHECK(tc_launcher_input(L, id, "two\n", 4) == 0); /* the shell lives on */
    CHECK(sess_wait(&S, "got:two\n", 5000));
    CHECK(tc_launcher_input(L, id, NULL, 0) == 0); /* end of input: the loop ends */
    held_wait(&S.h, true, 5000);
    CHECK(S.h.res != NULL);
    CHECK(sess_wait(&S, "bye\n", 1000));
    if (S.h.res) {
        CHECK(strcmp(str(S.h.res, "status"), "completed") == 0);
        CHECK(strcmp(OUT(S.h.res), "") == 0); /* the output went out as chunks only */
    }
    json_decref(S.h.res);
    /* not a session: stdin without input is closed at once, as before (EOF, no wait) */
    json_t *r = run(spec_sh("read -t 5 x; echo [$?:$x]"));
    CHECK(strcmp(OUT(r), "[1:]\n") == 0);
    json_decref(r);
    check_clean();
}

/* The launcher's idle shells (toolcage-init with no child yet), up to max, into pids. */
static int idle_shell_pids(pid_t *pids, int max)
{
    pid_t kids[512];
    int k = launcher_child_pids(kids, 512), n = 0;
    for (int i = 0; i < k && n < max; i++)
        if (is_idle_shell(tc_launcher_pid(L), kids[i]))
            pids[n++] = kids[i];
    return n;
}

/* SIGKILL is delivered at once but a process ends when it ends (a second or more in the
 * cgroup v2 guest under TCG): wait (bounded) until each of pids has ended (a zombie has
 * closed its fds, which is what the launcher looks at; it may not have reaped them yet). */
static void wait_gone(const pid_t *pids, int n)
{
    for (int i = 0, gone = 0; i < 1000 && !gone; i++) {
        gone = 1;
        for (int k = 0; k < n; k++) {
            char st[64], line[256];
            snprintf(st, sizeof(st), "/proc/%d/stat", (int)pids[k]);
            FILE *sf = fopen(st, "re");
            const char *rp = sf && fgets(line, sizeof(line), sf) ? strrchr(line, ')') : NULL;
            if (rp && rp[1] == ' ' && rp[2] != 'Z') /* alive */
                gone = 0;
            if (sf)
                fclose(sf);
        }
        if (!gone)
            usleep(10000);
    }
}

/* Shells of the pool that die while they wait (killed from outside) are dropped when taken
 * and replaced; the sandbox does not notice. */
TEST(pool_shells_killed)
{
    pid_t dead[64];
    int killed = 0;

    for (int i = 0; i < 300 && !pool_full(); i++)
        usleep(10000);
    int n = idle_shell_pids(dead, 64);
    for (int k = 0; k < n; k++)
        if (kill(dead[k], SIGKILL) == 0)
            dead[killed++] = dead[k];
    CHECK(killed == pool_target());
    /* what is asserted is that a shell that died waiting is never handed a call, so the
     * call goes once they are gone */
    wait_gone(dead, killed);
    json_t *r = run(spec_sh("echo ok"));
    CHECK(strcmp(str(r, "status"), "completed") == 0);
    CHECK(strcmp(OUT(r), "ok\n") == 0);
    json_decref(r);
    check_clean();
}

/* TOOLCAGE_SLOW (the cgroup v2 VM under TCG sets 10): every time below is stretched by it */
static int64_t slow_factor(void)
{
    int64_t slow = 1;
    if (getenv("TOOLCAGE_SLOW"))
        (void)tc_parse_i64(getenv("TOOLCAGE_SLOW"), 1, 100, &slow);
    return slow;
}

static int idle_shells(void)
{
    int shells = 0;
    launcher_children(&shells);
    return shells;
}

/* A case's second launcher (state dir state) stops; the main one is L again. With its host
 * report hi (taken, freed here): its process and cgroup parents are gone, nothing is left. */
/* the microvm fast boot's unpacked kernels (microvm.h): state/vm */
static void rm_vm_cache(const char *state)
{
    char dir[192], p[512];
    snprintf(dir, sizeof(dir), "%s/vm", state);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* A launcher of its own for a case (options o, state directory /tmp/toolcage-test-PID-tag):
 * it becomes L until second_stop(). */
static struct tc_launcher *second_start(struct tc_launcher_options o, const char *tag, char *state,
                                        size_t statesz)
{
    struct tc_launcher *l2 = NULL;
    snprintf(state, statesz, "/tmp/toolcage-test-%d-%s", (int)getpid(), tag);
    o.exe = "/proc/self/exe";
    o.state_dir = state;
    int rc = tc_launcher_start(&o, &l2);
    CHECK(rc == 0);
    if (rc < 0)
        return NULL;
    L = l2;
    return l2;
}

static void second_stop(struct tc_launcher *l2, struct tc_launcher *main_l, const char *state,
                        json_t *hi)
{
    tc_launcher_stop(l2);
    if (hi) {
        CHECK(kill((pid_t)num(hi, "launcher_pid"), 0) < 0 && errno == ESRCH);
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(hi, "cgroup_parents"), k, v)
        {
            struct stat st;
            CHECK(stat(json_string_value(v), &st) < 0 && errno == ENOENT);
        }
        json_decref(hi);
    }
    L = main_l;
    char run_dir[160];
    snprintf(run_dir, sizeof(run_dir), "%s/run", state);
    rmdir(run_dir);
    rm_vm_cache(state);
    rmdir(state);
}

/* The comm of process pid into buf ("" if gone). */
/* /proc/PID/cmdline, its NULs as spaces; the length read (0 if none). */
static size_t cmdline_of(pid_t pid, char *buf, size_t n)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : read(fd, buf, n - 1);
    if (fd >= 0)
        close(fd);
    size_t len = got > 0 ? (size_t)got : 0;
    for (size_t i = 0; i < len; i++)
        if (!buf[i])
            buf[i] = ' ';
    buf[len] = '\0';
    return len;
}

static void comm_of(pid_t pid, char *buf, size_t n)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "re");
    buf[0] = '\0';
    if (f && fgets(buf, (int)n, f))
        buf[strcspn(buf, "\n")] = '\0';
    if (f)
        fclose(f);
}

/* no_exec (toolcage exec's launcher): from a single-threaded caller the launcher is a fork
 * running tc_launcher_main (it keeps the caller's comm; an exec'd one gets its binary's),
 * runs sandboxes, and is not restarted when it dies (a fork from the reader thread of a
 * process that may have other threads could inherit their locks held). From this process
 * (threads: the main launcher's reader) the option falls back to an exec. */
/* meanwhile of a one-run launcher's run: mid-run (the program sleeps 0.6 s), its children */
struct once_watch {
    pid_t lpid;
    int calls, kids_during, idle_during;
};

static void watch_once(void *ud)
{
    struct once_watch *w = ud;
    pid_t kids[8];
    w->calls++;
    nanosleep(&(struct timespec){0, 300000000L}, NULL);
    w->kids_during = child_pids_of(w->lpid, kids, 8);
    for (int k = 0; k < w->kids_during; k++)
        w->idle_during += is_idle_shell(w->lpid, kids[k]);
}

TEST(launcher_no_exec)
{
    char state[128], mine[32], theirs[32];
    struct tc_launcher_options o = {.max_sandboxes = 2,
                                    .pool = TC_POOL_NONE,
                                    .pool_max = TC_POOL_NONE,
                                    .warm = TC_POOL_NONE,
                                    .no_egress = true,
                                    .no_exec = true};
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-noexec", (int)getpid());
    o.exe = "/proc/self/exe";
    o.state_dir = state;
    pid_t child = fork();
    if (child == 0) { /* single-threaded here (a fork of this threaded process: it calls
                       * malloc and starts threads, which glibc's fork makes safe enough for
                       * a test; toolcage exec is single-threaded from its start) */
        struct tc_launcher *l = NULL;
        int bad = 0;
        alarm(120); /* a stalled child must not hang the suite */
        prctl(PR_SET_NAME, "tc-noexec-test");
        if (tc_launcher_start(&o, &l) < 0)
            _exit(10);
        pid_t lp = tc_launcher_pid(l);
        /* a fork: the caller's command line (an exec'd launcher's is its own, wiped), and
         * named as an exec'd launcher would be */
        char ours_cl[512], theirs_cl[512];
        comm_of(lp, theirs, sizeof(theirs));
        if (strcmp(theirs, "toolcage-launch") != 0 ||
            cmdline_of(getpid(), ours_cl, sizeof(ours_cl)) == 0 ||
            cmdline_of(lp, theirs_cl, sizeof(theirs_cl)) == 0 || strcmp(ours_cl, theirs_cl) != 0) {
            fprintf(stderr, "    forked launcher's comm: '%s', cmdline '%s' (ours '%s')\n", theirs,
                    theirs_cl, ours_cl);
            bad |= 1;
        }
        json_t *r = NULL;
        if (tc_launcher_run_sync(l, spec_sh("echo ran-in-fork"), &r) < 0 ||
            strcmp(OUT(r), "ran-in-fork\n") != 0) {
            fprintf(stderr, "    result: %s\n", r ? json_dumps(r, 0) : "(none)");
            bad |= 2;
        }
        json_decref(r);
        kill(lp, SIGKILL);
        for (int i = 0; i < 200 && tc_launcher_alive(l); i++)
            nanosleep(&(struct timespec){0, 10000000L}, NULL);
        nanosleep(&(struct timespec){0, 300000000L}, NULL); /* a restart would be under way */
        if (tc_launcher_alive(l) || tc_launcher_restarts(l) != 0 ||
            tc_launcher_run_sync(l, spec_sh("echo again"), &r) == 0) {
            fprintf(stderr, "    after its death: alive %d, restarts %u\n",
                    (int)tc_launcher_alive(l), tc_launcher_restarts(l));
            bad |= 4;
        }
        tc_launcher_stop(l);
        /* one run in a launcher of its own (toolcage exec), opened before its spec is known:
         * the forked launcher makes its one shell as it sets up (toolcage-init waiting, its
         * child, before any spec went to it); the spec is in its socket before its HELLO;
         * meanwhile runs; while the program runs no other shell is made; once the result is
         * out the launcher goes by itself (a zombie, ours to reap at the stop) */
        struct tc_launcher *once = NULL;
        struct once_watch ow = {0};
        int ahead = 0, gone = 0;
        pid_t before = getpid();
        if (tc_launcher_open_once(&o, &once) < 0)
            bad |= 8;
        else {
            char path[96];
            for (int i = 0; i < 500 && !ahead; i++) {
                pid_t sh[8];
                /* its pid: our only child (the reader, which would take it, is not started) */
                if (child_pids_of((int)before, sh, 1) == 1)
                    ow.lpid = sh[0];
                int n = ow.lpid > 0 ? child_pids_of(ow.lpid, sh, 8) : 0;
                for (int k = 0; k < n; k++)
                    ahead += is_idle_shell(ow.lpid, sh[k]);
                if (!ahead)
                    nanosleep(&(struct timespec){0, 10000000L}, NULL);
            }
            if (tc_launcher_run_once(once, spec_sh("sleep 0.6; echo once; exit 3"), watch_once, &ow,
                                     &r, NULL) < 0 ||
                strcmp(OUT(r), "once\n") != 0 ||
                json_integer_value(json_object_get(r, "exit_code")) != 3 || ow.calls != 1 ||
                getpid() != before)
                bad |= 8;
            /* exited: a zombie, or reaped already by the reader thread, which reaps it when
             * its socket ends (and kills it only at our stop, below) */
            for (int i = 0; i < 1000 && !gone; i++) { /* (10 s: LeakSanitizer's exit) */
                char st[512] = "";
                snprintf(path, sizeof(path), "/proc/%d/stat", (int)ow.lpid);
                FILE *f = fopen(path, "re");
                if (f && fgets(st, sizeof(st), f)) {
                    const char *e = strrchr(st, ')');
                    gone = e && e[1] == ' ' && e[2] == 'Z';
                } else
                    gone = !f && errno == ENOENT;
                if (f)
                    fclose(f);
                if (!gone)
                    nanosleep(&(struct timespec){0, 10000000L}, NULL);
            }
        }
        tc_launcher_stop(once);
        if ((bad & 8) || ahead != 1 || ow.idle_during != 0 || ow.kids_during != 1 || !gone ||
            waitpid(-1, NULL, WNOHANG) != -1) {
            fprintf(stderr,
                    "    run_once: %s, meanwhile %d, shells ahead %d, during the run %d "
                    "children (%d idle shells), gone by itself %d\n",
                    r ? json_dumps(r, 0) : "(none)", ow.calls, ahead, ow.kids_during,
                    ow.idle_during, gone);
            bad |= 8;
        }
        json_decref(r);
        r = NULL;
        /* a launcher whose setup fails: its cause, no result, nothing left to reap */
        struct tc_launcher_options broken = o;
        broken.init_path = "/nonexistent/toolcage-init";
        int rr = tc_launcher_open_once(&broken, &once);
        if (rr == 0) {
            rr = tc_launcher_run_once(once, spec_sh("echo never"), NULL, NULL, &r, NULL);
            tc_launcher_stop(once);
        }
        if (rr != -ENOENT || r || waitpid(-1, NULL, WNOHANG) != -1) {
            fprintf(stderr, "    run_once with no init: %d (%s)\n", rr, strerror(-rr));
            bad |= 16;
        }
        /* a held spec needs someone to say go: refused before anything runs; a launcher
         * opened and never used goes at the stop */
        json_t *held = spec_sh("echo held");
        json_object_set_new(held, "hold", json_true());
        if (tc_launcher_open_once(&o, &once) < 0 ||
            tc_launcher_run_once(once, held, NULL, NULL, &r, NULL) != -EINVAL || r)
            bad |= 32;
        tc_launcher_stop(once);
        if (tc_launcher_open_once(&o, &once) < 0)
            bad |= 64;
        tc_launcher_stop(once);
        if (waitpid(-1, NULL, WNOHANG) != -1)
            bad |= 64;
        _exit(bad);
    }
    int st = 0;
    CHECK(child > 0 && waitpid(child, &st, 0) == child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (tap_case_failed)
        fprintf(stderr, "    child: status %d\n", st);

    /* here, with threads: exec'd as without the option */
    struct tc_launcher *main_l = L, *l2;
    if (!(l2 = second_start(o, "noexec2", state, sizeof(state))))
        return;
    comm_of(getpid(), mine, sizeof(mine));
    comm_of(tc_launcher_pid(l2), theirs, sizeof(theirs));
    CHECK(theirs[0] && strcmp(theirs, mine) != 0);
    json_t *r = run(spec_sh("echo ran-execd"));
    CHECK(strcmp(OUT(r), "ran-execd\n") == 0);
    if (tap_case_failed)
        fprintf(stderr, "    comm: ours '%s', the launcher's '%s'\n", mine, theirs);
    json_decref(r);
    second_stop(l2, main_l, state, tc_launcher_host_info(l2));
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-noexec", (int)getpid());
    char run_dir[160];
    snprintf(run_dir, sizeof(run_dir), "%s/run", state);
    rmdir(run_dir);
    rm_vm_cache(state);
    rmdir(state);
}

/* A shell joins its groups by writing "0" to files the launcher opened (tc_cg_open_join):
 * on v1 each group's `tasks`, the calling thread alone (no threadgroup lock, so no RCU grace
 * period: bench/cgmove_bench), on v2 cgroup.procs. The shell writes while it is its
 * process's only thread, so the whole process must be in every group afterwards, and its
 * children born there: checked in /proc/PID/cgroup and in each group's cgroup.procs. (That
 * the shells write to the right fds is shown by every limit the cgroups enforce: the memory
 * bomb's OOM kill in its group, the fork bomb's pids.max, the CPU budget.) */
TEST(cgroup_join_moves_the_process)
{
    struct tc_cg_host h;
    struct tc_cgroup cg;
    int fds[TC_CG_N_] = {-1, -1, -1};
    tc_cg_host_init(&h, false);
    if (h.mode == TC_CG_NONE) {
        tc_cg_host_fini(&h);
        TAP_SKIP_HERE("no cgroups on this host (the rlimit fallback has its own tests)");
        return;
    }
    char name[40];
    snprintf(name, sizeof(name), "join-test-%d", (int)getpid());
    if (tc_cg_create(&h, name, &cg) < 0) {
        CHECK(!"tc_cg_create");
        tc_cg_host_fini(&h);
        return;
    }
    CHECK(tc_cg_open_join(&cg, fds) == 0);
    const char *want = h.mode == TC_CG_V1 ? "/tasks" : "/cgroup.procs";
    for (int c = 0; c < TC_CG_N_; c++) {
        char link[64], target[PATH_MAX] = "";
        if (fds[c] < 0)
            continue;
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[c]);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        size_t tl = strlen(target), wl = strlen(want);
        CHECK(tl > wl && strcmp(target + tl - wl, want) == 0 && strstr(target, name) != NULL);
    }
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) { /* single-threaded, as a shell is: join, then a child of its own */
        close(p[1]);
        for (int c = 0; c < TC_CG_N_; c++)
            if (fds[c] >= 0 && write(fds[c], "0", 1) != 1)
                _exit(1);
        if (fork() == 0) {
            char x;
            (void)!read(p[0], &x, 1);
            _exit(0);
        }
        char x;
        (void)!read(p[0], &x, 1);
        _exit(0);
    }
    close(p[0]);
    struct timespec ms10 = {0, 10000000L};
    for (int c = 0; c < TC_CG_N_; c++) {
        if (cg.fd[c] < 0)
            continue;
        char buf[256] = "";
        int procs = 0;
        for (int tries = 0; tries < 300 && procs < 2; tries++) { /* both there: at most 3 s */
            nanosleep(&ms10, NULL);
            int fd = openat(cg.fd[c], "cgroup.procs", O_RDONLY | O_CLOEXEC);
            ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
            if (fd >= 0)
                close(fd);
            buf[n > 0 ? n : 0] = '\0';
            procs = 0;
            for (char *q = buf; *q; q++)
                procs += *q == '\n';
        }
        char self[24];
        int sl = snprintf(self, sizeof(self), "\n%d\n", (int)pid);
        CHECK(procs == 2); /* the process and the child it forked after joining */
        CHECK(strncmp(buf, self + 1, (size_t)sl - 1) == 0 || strstr(buf, self) != NULL);
        if (tap_case_failed)
            fprintf(stderr, "    controller %d: cgroup.procs %s", c, buf);
    }
    char path[64], mine[4096] = "";
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    size_t got = f ? fread(mine, 1, sizeof(mine) - 1, f) : 0;
    mine[got] = '\0';
    if (f)
        fclose(f);
    int lines_in = 0, hierarchies = 0;
    for (char *q = mine; (q = strstr(q, name)); q++)
        lines_in++;
    dev_t seen[TC_CG_N_];
    for (int c = 0; c < TC_CG_N_; c++) { /* v1: one line per hierarchy holding our groups */
        struct stat st;
        bool dup = false;
        if (cg.fd[c] < 0 || fstat(cg.fd[c], &st) < 0)
            continue;
        for (int j = 0; j < hierarchies; j++)
            dup |= seen[j] == st.st_dev;
        if (!dup)
            seen[hierarchies++] = st.st_dev;
    }
    CHECK(lines_in == hierarchies && hierarchies >= 1);
    if (tap_case_failed)
        fprintf(stderr, "    /proc/%d/cgroup:\n%s", (int)pid, mine);
    close(p[1]);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    for (int c = 0; c < TC_CG_N_; c++)
        if (fds[c] >= 0)
            close(fds[c]);
    tc_cg_destroy(&cg); /* (kills what is left: the grandchild may outlive its parent a moment) */
    tc_cg_host_fini(&h);
}

/* A sandbox with a network allowlist that asks its egress proxy for a host not on it: its
 * stdout is the proxy's answer's first 12 bytes ("HTTP/1.1 403"), then "ran", then what
 * then (shell) prints. */
static json_t *spec_connect_denied(const char *then)
{
    char script[512];
    snprintf(script, sizeof(script),
             "exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9\n"
             "printf 'CONNECT denied.invalid:443 HTTP/1.1\\r\\n"
             "Host: denied.invalid:443\\r\\n\\r\\n' >&3\n"
             "head -c 12 <&3; echo ran; %s",
             then);
    json_t *s = spec_sh(script);
    json_object_set_new(s, "network", json_pack("{s:[s]}", "allow", "allowed.invalid"));
    return s;
}

/* A shell that dies after its call took it, before go (here while the call is held, as an
 * approval holds it; also between the pool and go), never read go: nothing of the program
 * ran, so the call starts over in another shell and runs, once. */
TEST(shell_dead_before_go_restarts)
{
    struct tc_launcher *main_l = L, *l2;
    char state[128], id[80];
    if (!(l2 = second_start((struct tc_launcher_options){.max_sandboxes = 2, .pool = TC_POOL_NONE},
                            "redo", state, sizeof(state))))
        return;
    int saved_base = base_fds;
    base_fds = settled_fds();
    struct held h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    /* with a network allowlist: the dead shell's proxy listener goes, the new one's comes */
    json_t *s = spec_connect_denied("");
    json_object_set_new(s, "hold", json_true());
    snprintf(id, sizeof(id), "%s", str(s, "id"));
    struct tc_launcher_job job = {.done = held_done, .ready = held_ready, .userdata = &h};
    CHECK(tc_launcher_submit_job(L, s, &job) == 0);
    json_decref(s);
    held_wait(&h, false, 5000);
    CHECK(h.ready == 1);
    pid_t held_pid[4];
    /* no pool: the held call's shell alone (once it has joined its groups and become
     * toolcage-init, which may be after the launcher said ready) */
    int n = 0;
    for (int i = 0; i < 500 && n == 0; i++)
        if ((n = idle_shell_pids(held_pid, 4)) == 0)
            usleep(10000);
    CHECK(n == 1);
    if (n == 1) {
        CHECK(kill(held_pid[0], SIGKILL) == 0);
        wait_gone(held_pid, 1);
    }
    CHECK(tc_launcher_go(L, id) == 0);
    held_wait(&h, true, 10000);
    CHECK(h.res != NULL);
    if (h.res) {
        CHECK(strcmp(str(h.res, "status"), "completed") == 0);
        CHECK(strcmp(OUT(h.res), "HTTP/1.1 403ran\n") == 0); /* once */
    }
    CHECK(h.ready == 1); /* no second hold: go had come */
    json_decref(h.res);
    check_clean();
    base_fds = saved_base;
    second_stop(l2, main_l, state, NULL);
}

/* A burst bigger than the pool leaves it as big as the burst (up to pool_max), refilled
 * while the launcher is idle, so the next burst finds its shells ready; a minute (here
 * 1.5 s) without a miss gives them back one at a time. */
TEST(pool_sized_by_demand)
{
    const int64_t slow = slow_factor();
    struct tc_launcher *main_l = L, *l2 = NULL;
    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-grow", (int)getpid());
    struct tc_launcher_options o = {.exe = "/proc/self/exe",
                                    .state_dir = state,
                                    .max_sandboxes = 8,
                                    .pool = 1,
                                    .pool_max = 4,
                                    .pool_shrink_ms = (unsigned)(1500 * slow)};
    int rc = tc_launcher_start(&o, &l2);
    CHECK(rc == 0);
    if (rc < 0)
        return;
    L = l2;
    int saved_base = base_fds;
    base_fds = settled_fds();
    json_t *hi = tc_launcher_host_info(L);
    CHECK(num(hi, "pool") == 1 && num(hi, "pool_max") == 4);
    json_decref(hi);
    CHECK(idle_shells() == 1);

    /* a burst of 6: one shell was ready, five are made on the calls' path; the pool stops
     * at 4 */
    int64_t burst_at = 0; /* before the last burst's submits: its misses come after */
    for (int round = 0; round < 2; round++) {
        struct conc c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
        burst_at = mono_ms();
        for (int i = 0; i < 6; i++) {
            json_t *sp = spec_sh("sleep 0.2; echo ok");
            CHECK(tc_launcher_submit(L, sp, conc_cb, &c) == 0);
            json_decref(sp);
        }
        pthread_mutex_lock(&c.mu);
        while (c.done < 6)
            pthread_cond_wait(&c.cv, &c.mu);
        pthread_mutex_unlock(&c.mu);
        CHECK(c.ok == 6);
        int most = 0, n = 0;
        int64_t t0 = mono_ms();
        while (mono_ms() - t0 < 1000 * slow) { /* grown within a second, and never beyond 4 */
            n = idle_shells();
            most = n > most ? n : most;
            if (n == 4)
                break;
            usleep(5000);
        }
        fprintf(stderr, "    after burst %d: %d idle shells in %lld ms\n", round + 1, n,
                (long long)(mono_ms() - t0));
        CHECK(n == 4 && most <= 4);
    }
    /* at rest: back to 1, one shell per 1.5 s */
    int64_t t0 = mono_ms(), at3 = -1;
    int n = 4;
    while (n > 1 && mono_ms() - t0 < 8000 * slow) {
        usleep(20000);
        n = idle_shells();
        if (n == 3 && at3 < 0)
            at3 = mono_ms() - burst_at;
    }
    fprintf(stderr, "    shrunk to %d in %lld ms (3 at %lld ms after the last burst began)\n", n,
            (long long)(mono_ms() - t0), (long long)at3);
    CHECK(n == 1);
    /* not before 1.5 s after the last miss, which came after the burst began (the burst itself
     * may take most of that on a busy machine: it is not counted from the rest) */
    CHECK(at3 >= 1500 * slow);
    check_clean();

    base_fds = saved_base;
    second_stop(l2, main_l, state, NULL);
}

/* A gated program, as the python tools' runner (execution/plots.h): one byte from stdin, then
 * the call's code. pre: what it does before the gate. */
static json_t *spec_gated(const char *pre, const char *code, const char *in)
{
    char prog[768];
    /* as the runner does (execution/plots.c): the gate, then the call's files into place */
    snprintf(prog, sizeof(prog),
             "import os, sys\n%s\nif os.read(0, 1) != b'g': os._exit(125)\n"
             "st = '/workspace/.toolcage/stage'\n"
             "for n in os.listdir(st) if os.path.isdir(st) else []:\n"
             "    os.rename(st + '/' + n, '/workspace/' + n)\n"
             "if os.path.isdir(st): os.rmdir(st)\n"
             "exec(compile(open('/workspace/main.py').read(), 'main.py', 'exec'))\n",
             pre);
    json_t *s = spec_py(prog);
    size_t n = strlen(code);
    char *b64 = tc_b64_encode(code, n);
    json_object_set_new(s, "files",
                        json_pack("[{s:s, s:s, s:i}, {s:s, s:s, s:i}]", "path", "main.py",
                                  "content_b64", b64, "mode", 0644, "path", ".toolcage/x",
                                  "content_b64", "eA==", "mode", 0444));
    free(b64);
    if (in) {
        b64 = tc_b64_encode(in, strlen(in));
        json_object_set_new(s, "stdin_b64", json_string(b64));
        free(b64);
    }
    json_object_set_new(s, "gate", json_true());
    json_object_set_new(s, "warm", json_true());
    return s;
}

/* The warm sandboxes waiting for a call, as the launcher lists them (host report warm_list,
 * in its mount namespace). */
static int warm_waiting(void)
{
    json_t *hi = tc_launcher_host_info(L);
    char path[PATH_MAX], line[256];
    snprintf(path, sizeof(path), "/proc/%d/root%s", tc_launcher_pid(L),
             json_string_value(json_object_get(hi, "warm_list")));
    json_decref(hi);
    FILE *f = fopen(path, "re");
    int n = 0;
    while (f && fgets(line, sizeof(line), f))
        n++;
    if (f)
        fclose(f);
    return n;
}

/* The warm sandboxes' programs, as the launcher lists them (host report warm_list, in its
 * mount namespace): how many are native (PID 1 is toolcage-init; gVisor's, runsc's, are not
 * looked into), how many of those are at their gate (PID 1's child blocked reading its stdin,
 * fd 0), and how many run python short of it. false if the list cannot be read. */
static bool warm_gates(int *native, int *at, int *before)
{
    json_t *hi = tc_launcher_host_info(L);
    char path[PATH_MAX], line[256], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/root%s", tc_launcher_pid(L),
             json_string_value(json_object_get(hi, "warm_list")));
    json_decref(hi);
    *native = *at = *before = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    while (fgets(line, sizeof(line), f)) {
        long pid = strtol(line, NULL, 10), kid = 0;
        snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", pid, pid);
        FILE *k = fopen(path, "re");
        if (k && fgets(buf, sizeof(buf), k))
            kid = strtol(buf, NULL, 10);
        if (k)
            fclose(k);
        snprintf(path, sizeof(path), "/proc/%ld/exe", pid);
        ssize_t n = readlink(path, buf, sizeof(buf) - 1);
        if (n <= 0 || !strstr((buf[n] = '\0', buf), "toolcage-init"))
            continue; /* runsc */
        (*native)++;
        snprintf(path, sizeof(path), "/proc/%ld/syscall", kid);
        k = kid > 0 ? fopen(path, "re") : NULL;
        bool gate = k && fgets(buf, sizeof(buf), k) && strncmp(buf, "0 0x0 ", 6) == 0;
        if (k)
            fclose(k);
        snprintf(path, sizeof(path), "/proc/%ld/exe", kid);
        n = kid > 0 ? readlink(path, buf, sizeof(buf) - 1) : -1;
        if (gate)
            (*at)++;
        else if (n > 0 && strstr((buf[n] = '\0', buf), "python3"))
            (*before)++;
    }
    fclose(f);
    return true;
}

/* Every warm sandbox's program is at its gate (gVisor's: not looked into). */
static bool warm_at_gate(void)
{
    int native, at, before;
    return warm_gates(&native, &at, &before) && at == native;
}

/* A warm sandbox's program runs python (exec'd, its start reported) short of its gate. */
static bool warm_before_gate(void)
{
    int native, at, before;
    return warm_gates(&native, &at, &before) && before > 0;
}

/* n warm sandboxes wait, each at its gate, and the launcher has no other child but idle
 * shells and its proxy (a shell being made, before its exec, is one for a moment: a refill
 * after a call). */
static bool wait_children(int n, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (warm_waiting() == n && launcher_children(NULL) == n && warm_at_gate())
            return true;
        usleep(10000);
    }
    return false;
}

/* A gated spec of a warm group (a tenant), its template told apart by its wall limit. */
static json_t *spec_tenant(const char *group, int64_t wall_ms)
{
    json_t *sp = spec_gated("", "print('t')\n", NULL);
    json_object_set_new(sp, "warm_group", json_string(group));
    set_limit(sp, "wall_ms", wall_ms);
    return sp;
}

/* Calls the spec; true when it ran (output "t") in a warm sandbox. */
static bool run_tenant(const char *group, int64_t wall_ms)
{
    json_t *r = run(spec_tenant(group, wall_ms));
    CHECK(strcmp(OUT(r), "t\n") == 0);
    bool warm = json_is_true(json_object_get(r, "warm"));
    json_decref(r);
    return warm;
}

/* The most warm sandboxes seen over ms. */
static int most_children(int ms)
{
    int most = 0;
    for (int i = 0; i < ms / 10; i++) {
        int n = warm_waiting();
        most = n > most ? n : most;
        usleep(10000);
    }
    return most;
}

/* Tenants share nothing of the warm sandboxes but their total: a tenant holds at most
 * warm_group_max, whatever it runs, and another's calls never take its warm ones (the
 * capacity side channel of docs/sandbox.md, Warm interpreters, "keeps tenants apart"). */
TEST(warm_tenants_apart)
{
    const int64_t slow = slow_factor();
    struct tc_launcher *main_l = L, *l2 = NULL;
    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-tenants", (int)getpid());
    struct tc_launcher_options o = {.exe = "/proc/self/exe",
                                    .state_dir = state,
                                    .max_sandboxes = 4,
                                    .pool_max = TC_POOL_NONE,
                                    .warm = 3,
                                    .warm_group_max = 2};
    int rc = tc_launcher_start(&o, &l2);
    CHECK(rc == 0);
    if (rc < 0)
        return;
    L = l2;
    json_t *hi = tc_launcher_host_info(L);
    CHECK(num(hi, "warm_max") == 3 && num(hi, "warm_group_max") == 2);
    json_decref(hi);

    /* tenant a, three templates, each called twice (each wants a warm sandbox): a holds two,
     * never three, though the launcher has room for three */
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < 2; i++)
            CHECK(!run_tenant("tenant-a", (2000 + t * 100) * slow));
        CHECK(wait_children(t < 2 ? t + 1 : 2, (int)(3000 * slow)));
    }
    int most = most_children((int)(1500 * slow));
    fprintf(stderr, "    tenant a: at most %d warm sandboxes\n", most);
    CHECK(most == 2);
    /* the third, in use, took the slot of the first once that one was idle for a second
     * (nothing else happened meanwhile: the launcher woke up for it) */
    CHECK(run_tenant("tenant-a", (2000 + 2 * 100) * slow));
    CHECK(wait_children(2, (int)(3000 * slow)));

    /* tenant b gets the third: a's share does not keep it out */
    for (int i = 0; i < 2; i++)
        CHECK(!run_tenant("tenant-b", 3000 * slow));
    CHECK(wait_children(3, (int)(3000 * slow)));

    /* all three are held, a's and b's idle for a second (any other template in use could
     * take an idle one's of its own tenant): tenant c's calls, in use, run cold and take
     * none of them */
    usleep((useconds_t)(1100000 * slow));
    for (int i = 0; i < 4; i++) {
        CHECK(!run_tenant("tenant-c", 3100 * slow));
        CHECK(warm_waiting() == 3);
        usleep((useconds_t)(300000 * slow));
    }
    CHECK(most_children((int)(500 * slow)) == 3);
    /* b's is still there, and its next call takes it */
    CHECK(run_tenant("tenant-b", 3000 * slow));

    second_stop(l2, main_l, state, NULL);
}

/* A warm sandbox goes to a call only once its program waits at its gate: until then its
 * interpreter may still be starting up, reading files of its workspace (a .pth under HOME,
 * usercustomize.py), and the call's files must not be there yet. Here a warm sandbox's
 * program (no main.py yet: a cold one has its call's) sleeps before its gate, long after its
 * exec was reported: a call meanwhile runs cold and leaves it be; once the program is at its
 * gate, the next call takes it. */
TEST(warm_only_at_gate)
{
    const int64_t slow = slow_factor();
    struct tc_launcher *main_l = L, *l2;
    char state[128];
    if (!(l2 = second_start(
              (struct tc_launcher_options){.max_sandboxes = 4, .pool_max = TC_POOL_NONE, .warm = 2},
              "atgate", state, sizeof(state))))
        return;
    /* (a call's files are staged before its program starts: a warm one has none) */
    const char *pre = "import time\nif not os.path.exists('/workspace/.toolcage/stage/main.py'): "
                      "time.sleep(3)";
    for (int i = 0; i < 2; i++) { /* cold twice: the template is learned */
        json_t *r = run(spec_gated(pre, "print('x')\n", NULL));
        CHECK(strcmp(OUT(r), "x\n") == 0);
        CHECK(!json_object_get(r, "warm"));
        json_decref(r);
    }
    bool before = false;
    for (int i = 0; i < 300 * slow && !(before = warm_before_gate()); i++)
        usleep(10000);
    CHECK(before); /* a warm sandbox's python runs, short of its gate */
    json_t *r = run(spec_gated(pre, "print('y')\n", NULL));
    CHECK(strcmp(OUT(r), "y\n") == 0);
    CHECK(!json_object_get(r, "warm")); /* cold: the warm one was not at its gate */
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    bool gated = false;
    for (int i = 0; i < 800 * slow && !gated; i++) {
        gated = warm_waiting() >= 1 && warm_at_gate();
        if (!gated)
            usleep(10000);
    }
    CHECK(gated);
    r = run(spec_gated(pre, "print('z')\n", NULL));
    CHECK(strcmp(OUT(r), "z\n") == 0);
    CHECK(json_is_true(json_object_get(r, "warm")));
    CHECK(num(r, "duration_ms") < 1500 * slow); /* its sleep was before the call */
    json_decref(r);
    second_stop(l2, main_l, state, NULL);
}

/* Warm sandboxes (docs/sandbox.md, Warm interpreters): learned from a call, started ahead,
 * each taken by one call that then has its own files, stdin, deadline and CPU from the
 * moment it took it; nothing of one call is seen by the next; a warm sandbox that did
 * anything before its call is never handed out; a spec with credentials never goes warm;
 * a stopped launcher leaves none behind. */
TEST(warm_sandboxes)
{
    const int64_t slow = slow_factor();
    struct tc_launcher *main_l = L, *l2 = NULL;
    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-warm", (int)getpid());
    struct tc_launcher_options o = {.exe = "/proc/self/exe",
                                    .state_dir = state,
                                    .max_sandboxes = 4,
                                    .pool_max = TC_POOL_NONE,
                                    .warm = 3};
    int rc = tc_launcher_start(&o, &l2);
    CHECK(rc == 0);
    if (rc < 0)
        return;
    L = l2;
    json_t *hi = tc_launcher_host_info(L);
    CHECK(num(hi, "warm_max") == 3 && num(hi, "max_sandboxes") == 4);

    /* the first two calls of a kind start cold (gate byte, then their own stdin); the first
     * leaves nothing behind (a spec seen once is not worth a warm start) */
    json_t *r = run(spec_gated("", "import sys\nprint('one', sys.stdin.read())\n", "in1"));
    CHECK(strcmp(OUT(r), "one in1\n") == 0);
    CHECK(!json_object_get(r, "warm"));
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    usleep(300000);
    CHECK(launcher_children(NULL) == 0);
    r = run(spec_gated("", "print('one again')\n", NULL));
    CHECK(strcmp(OUT(r), "one again\n") == 0);
    CHECK(!json_object_get(r, "warm"));
    json_decref(r);
    /* ... the second leaves one warm sandbox behind, its program waiting at the gate */
    CHECK(wait_children(1, (int)(3000 * slow)));

    /* another template (its limits differ): cold twice, and learned */
    for (int i = 0; i < 2; i++) {
        json_t *sp = spec_gated("", "pass\n", NULL);
        set_limit(sp, "wall_ms", 1000 * slow);
        set_limit(sp, "cpu_ms", 1000 * slow);
        r = run(sp);
        CHECK(!json_object_get(r, "warm"));
        json_decref(r);
    }
    CHECK(wait_children(2, (int)(3000 * slow)));
    json_t *sp = spec_gated("",
                            "import os, sys\n"
                            "open('/tmp/mark', 'w').write('x'); open('/workspace/mark', 'w')\n"
                            "print('two', sys.stdin.read(), sorted(os.listdir('/workspace')))\n",
                            "in2");
    set_limit(sp, "wall_ms", 1000 * slow);
    set_limit(sp, "cpu_ms", 1000 * slow);
    r = run(sp);
    CHECK(strcmp(OUT(r), "two in2 ['.toolcage', 'main.py', 'mark']\n") == 0);
    CHECK(json_is_true(json_object_get(r, "warm")));
    json_decref(r);
    CHECK(wait_children(2, (int)(3000 * slow)));

    /* its warm sandbox has waited longer than its wall limit: the limit counts from the call */
    usleep((useconds_t)(1300000 * slow));
    sp = spec_gated("",
                    "import os, sys, time\ntime.sleep(0.3)\n"
                    "print('four', sys.stdin.read(), os.path.exists('/tmp/mark'), "
                    "sorted(os.listdir('/workspace')))\n",
                    "in4");
    set_limit(sp, "wall_ms", 1000 * slow);
    set_limit(sp, "cpu_ms", 1000 * slow);
    r = run(sp);
    CHECK(strcmp(str(r, "status"), "completed") == 0);
    CHECK(json_is_true(json_object_get(r, "warm")));
    CHECK(strcmp(OUT(r), "four in4 False ['.toolcage', 'main.py']\n") == 0);
    CHECK(num(r, "duration_ms") < 1000 * slow);
    CHECK(num(r, "cpu_ms") < 200 * slow); /* the call's CPU, not the interpreter's start */
    if (tap_case_failed)
        dump(r);
    json_decref(r);

    /* the first template's, taken now; made again after, each is used once */
    for (int i = 0; i < 2; i++) {
        CHECK(wait_children(2, (int)(3000 * slow)));
        r = run(spec_gated("", "import os\nopen('/tmp/mark', 'w')\nprint('three')\n", NULL));
        CHECK(json_is_true(json_object_get(r, "warm")));
        CHECK(strcmp(OUT(r), "three\n") == 0);
        json_decref(r);
    }
    /* a warm one that does not finish in its wall time is killed as a cold one is */
    CHECK(wait_children(2, (int)(3000 * slow)));
    sp = spec_gated("", slow > 1 ? "import time\ntime.sleep(50)\n" : "import time\ntime.sleep(5)\n",
                    NULL);
    set_limit(sp, "wall_ms", 1000 * slow);
    set_limit(sp, "cpu_ms", 1000 * slow);
    r = run(sp);
    CHECK(json_is_true(json_object_get(r, "warm")));
    CHECK(strcmp(str(r, "status"), "timeout") == 0);
    CHECK(num(r, "duration_ms") >= 1000 * slow && num(r, "duration_ms") < 2000 * slow);
    json_decref(r);

    /* held (the server's calls): the gate opens at go, not before; a cancel ends it unrun */
    for (int i = 0; i < 2; i++) {
        CHECK(wait_children(2, (int)(3000 * slow)));
        struct held h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
        sp = spec_gated("", "print('ran')\n", NULL);
        json_object_set_new(sp, "hold", json_true());
        char hid[80];
        snprintf(hid, sizeof(hid), "%s", str(sp, "id"));
        struct tc_launcher_job job = {.done = held_done, .ready = held_ready, .userdata = &h};
        CHECK(tc_launcher_submit_job(L, sp, &job) == 0);
        json_decref(sp);
        held_wait(&h, false, (int)(5000 * slow));
        CHECK(h.ready == 1);
        usleep(300000);
        CHECK(h.res == NULL); /* the program would have printed and ended by now */
        CHECK((i == 0 ? tc_launcher_go(L, hid) : tc_launcher_cancel(L, hid)) == 0);
        held_wait(&h, true, (int)(5000 * slow));
        if (i == 0) {
            CHECK(strcmp(str(h.res, "status"), "completed") == 0);
            CHECK(strcmp(OUT(h.res), "ran\n") == 0);
            CHECK(json_is_true(json_object_get(h.res, "warm")));
        } else {
            CHECK(strcmp(str(h.res, "status"), "error") == 0);
            CHECK(strstr(str(h.res, "error"), "before the program started") != NULL);
            CHECK(strcmp(OUT(h.res), "") == 0);
        }
        json_decref(h.res);
    }

    /* another group (the server's: another tenant) never takes this one's; a group is a
     * template of its own */
    CHECK(wait_children(2, (int)(3000 * slow)));
    for (int i = 0; i < 3; i++) {
        sp = spec_gated("", "print('g')\n", NULL);
        json_object_set_new(sp, "warm_group", json_string("tenant-b"));
        r = run(sp);
        CHECK(strcmp(OUT(r), "g\n") == 0);
        CHECK(json_is_true(json_object_get(r, "warm")) == (i > 1));
        json_decref(r);
        if (i > 0)
            CHECK(wait_children(3, (int)(3000 * slow)));
    }

    /* a program that does anything before its call (here: writes) is never handed out: the
     * call runs cold, once */
    for (int i = 0; i < 2; i++) {
        r = run(spec_gated("print('early', flush=True)", "print('five')\n", NULL));
        CHECK(strcmp(OUT(r), "early\nfive\n") == 0);
        CHECK(!json_object_get(r, "warm"));
        json_decref(r);
        usleep(300000);
    }
    /* credentials (here a leased file) never go warm */
    for (int i = 0; i < 2; i++) {
        sp = spec_gated("", "print(open('/run/secrets/k').read())\n", NULL);
        json_object_set_new(sp, "secret_files",
                            json_pack("[{s:s, s:s}]", "name", "k", "content_b64", "czM="));
        r = run(sp);
        CHECK(strcmp(OUT(r), "s3\n") == 0);
        CHECK(!json_object_get(r, "warm"));
        json_decref(r);
        usleep(300000);
    }

    /* stopped: the warm ones go too, unreported; nothing is left */
    second_stop(l2, main_l, state, hi);
}

TEST(fifty_concurrent)
{
    struct conc c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    int submitted = 0;
    int64_t t0 = mono_ms();
    for (int i = 0; i < 50; i++) {
        json_t *s = spec_py("import time; time.sleep(0.5); print('ok')");
        if (tc_launcher_submit(L, s, conc_cb, &c) == 0)
            submitted++;
        json_decref(s);
    }
    CHECK(submitted == 50);
    CHECK(tc_launcher_in_flight(L) > 0);
    pthread_mutex_lock(&c.mu);
    while (c.done < submitted)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    fprintf(stderr, "    50 concurrent sandboxes: %lld ms\n", (long long)(mono_ms() - t0));
    CHECK(c.ok == 50);
    check_clean();
}

TEST(launcher_death_fails_pending_and_restarts)
{
    json_t *s = spec_sh("sleep 100");
    struct conc c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    unsigned restarts = tc_launcher_restarts(L);
    int pid = tc_launcher_pid(L);
    json_t *old_hi = tc_launcher_host_info(L);
    CHECK(tc_launcher_submit(L, s, conc_cb_quiet, &c) == 0);
    json_decref(s);
    usleep(200000);
    kill(pid, SIGKILL);
    pthread_mutex_lock(&c.mu);
    while (c.done < 1)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    CHECK(c.ok == 0);
    for (int i = 0; i < 300 && !tc_launcher_alive(L); i++)
        usleep(10000);
    CHECK(tc_launcher_alive(L));
    CHECK(tc_launcher_restarts(L) == restarts + 1);
    json_t *r = run(spec_sh("echo again"));
    CHECK(strcmp(OUT(r), "again\n") == 0);
    json_decref(r);
    /* the new launcher removed the dead one's cgroups (and the sandbox in them died with it) */
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(old_hi, "cgroup_parents"), k, v)
    {
        struct stat st;
        CHECK(stat(json_string_value(v), &st) < 0 && errno == ENOENT);
    }
    json_decref(old_hi);
    base_fds = settled_fds();
    check_clean();
}

/* Stopping a launcher with sandboxes running: every callback runs, nothing is left. */
TEST(stop_with_running_sandboxes)
{
    struct tc_launcher *l3 = NULL;
    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-stop", (int)getpid());
    struct tc_launcher_options o = {
        .exe = "/proc/self/exe", .state_dir = state, .max_sandboxes = 8};
    CHECK(tc_launcher_start(&o, &l3) == 0);
    if (!l3)
        return;
    json_t *hi = tc_launcher_host_info(l3);
    int lpid = tc_launcher_pid(l3);
    struct conc c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    for (int i = 0; i < 5; i++) {
        json_t *s = spec_sh("sleep 100 & sleep 100");
        CHECK(tc_launcher_submit(l3, s, conc_cb_quiet, &c) == 0);
        json_decref(s);
    }
    usleep(300000);
    int64_t t0 = mono_ms();
    tc_launcher_stop(l3);
    CHECK(mono_ms() - t0 < 3000);
    CHECK(c.done == 5 && c.ok == 0);
    CHECK(kill(lpid, 0) < 0 && errno == ESRCH);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(hi, "cgroup_parents"), k, v)
    {
        struct stat st;
        CHECK(stat(json_string_value(v), &st) < 0 && errno == ENOENT);
    }
    json_decref(hi);
    char run_dir[160];
    snprintf(run_dir, sizeof(run_dir), "%s/run", state);
    rmdir(run_dir);
    rmdir(state);
}

/* A second launcher that pretends the host has no cgroups and no seccomp notification:
 * rlimits and plain EPERM have to hold the line. It keeps no pool of shells either. */
TEST(fallback_rlimits_and_errno)
{
    struct tc_launcher *main_l = L, *l2 = NULL;
    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-fb", (int)getpid());
    /* and every option the launcher's command line can carry (its argv had room for fewer,
     * twice: ASan sees an overflow here) */
    char init[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", init, sizeof(init) - 32);
    CHECK(k > 0);
    init[k > 0 ? k : 0] = '\0';
    char *slash = strrchr(init, '/');
    snprintf(slash ? slash : init, 32, "/toolcage-init");
    struct tc_launcher_options o = {.exe = "/proc/self/exe",
                                    .state_dir = state,
                                    .max_sandboxes = 4,
                                    .no_cgroup = true,
                                    .no_seccomp_notify = true,
                                    .no_egress = true,
                                    .uid_registry = TC_UID_REGISTRY,
                                    .gvisor_platform = "ptrace",
                                    .init_path = init,
                                    .egress_ca_file = "/etc/ssl/certs/ca-certificates.crt",
                                    .pool = TC_POOL_NONE}; /* every shell created on demand */
    int rc = tc_launcher_start(&o, &l2);
    CHECK(rc == 0);
    if (rc < 0)
        return;
    L = l2;
    int saved_base = base_fds;
    base_fds = settled_fds();

    json_t *hi = tc_launcher_host_info(L);
    CHECK(strcmp(str(hi, "cgroup"), "none") == 0);
    CHECK(json_is_false(json_object_get(hi, "seccomp_notify")));
    json_decref(hi);

    json_t *r = run(spec_py(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), os.strerror(ctypes.get_errno()))\n"
        "try:\n    a = bytearray(512 << 20)\nexcept MemoryError: print('MemoryError')\n"));
    CHECK(strstr(OUT(r), "-1 Operation not permitted\nMemoryError\n") != NULL);
    CHECK(json_array_size(json_object_get(r, "policy_violations")) == 0);
    CHECK(strcmp(str(json_object_get(r, "enforced"), "memory_bytes"), "rlimit") == 0);
    CHECK(strcmp(str(json_object_get(r, "enforced"), "pids"), "rlimit") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);

    json_t *s = spec_py("import os, time\nok = err = 0\nfor i in range(40):\n"
                        "    try:\n        pid = os.fork()\n"
                        "    except BlockingIOError:\n        err += 1\n        continue\n"
                        "    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n"
                        "    ok += 1\nprint(ok, err)\n");
    set_limit(s, "pids", 8);
    r = run(s);
    CHECK(num(r, "exit_code") == 0);
    /* init + python + 6 children = 8 processes of this sandbox's host uid; the rest EAGAIN */
    CHECK(strcmp(OUT(r), "6 34\n") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);

    s = spec_py("while True: pass\n");
    set_limit(s, "cpu_ms", 1000);
    r = run(s);
    CHECK(strcmp(str(r, "killed_reason"), "cpu") == 0);
    CHECK(strcmp(str(r, "signal"), "SIGXCPU") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();

    base_fds = saved_base;
    second_stop(l2, main_l, state, NULL);
}

TEST(startup_overhead)
{
    enum { N = 100 };
    int64_t t0 = mono_ms();
    for (int i = 0; i < N; i++) {
        pid_t p = fork();
        if (p == 0) {
            execl("/usr/bin/python3", "python3", "-c", "pass", (char *)NULL);
            _exit(127);
        }
        waitpid(p, NULL, 0);
    }
    int64_t bare = mono_ms() - t0;
    int ok = 0;
    t0 = mono_ms();
    for (int i = 0; i < N; i++) {
        json_t *r = run(spec_argv(json_pack("[s,s,s]", "/usr/bin/python3", "-c", "pass")));
        ok += strcmp(str(r, "status"), "completed") == 0;
        json_decref(r);
    }
    int64_t sbx = mono_ms() - t0;
    fprintf(stderr,
            "    %d x python3 -c pass: bare %lld ms (%.1f ms each), sandboxed %lld ms (%.1f ms "
            "each), overhead %.1f ms\n",
            N, (long long)bare, bare / (double)N, (long long)sbx, sbx / (double)N,
            (sbx - bare) / (double)N);
    CHECK(ok == N);
    CHECK((sbx - bare) / N < 100);
    check_clean();
}

/* The egress proxy parses bytes from sandboxed code: nobody, no_new_privs, seccomp. */
TEST(egress_helper_confined)
{
    json_t *hi = tc_launcher_host_info(L);
    long pid = (long)json_integer_value(json_object_get(hi, "egress_pid"));
    json_decref(hi);
    CHECK(pid > 0);
    char buf[8192];
    proc_status(pid, buf, sizeof(buf));
    CHECK(strstr(buf, "\nUid:\t65534\t65534\t65534\t65534\n") != NULL);
    CHECK(strstr(buf, "\nNoNewPrivs:\t1\n") != NULL);
    CHECK(strstr(buf, "\nSeccomp:\t2\n") != NULL);
    CHECK(strstr(buf, "\nCapEff:\t0000000000000000\n") != NULL);
    if (tap_case_failed)
        fprintf(stderr, "%s\n", buf);
}

/* The egress proxy dies (killed from outside): the next sandbox that needs it starts a new
 * one, as confined as the first, and its allowlist is enforced (a denied CONNECT gets the
 * proxy's 403). Before, every network tool failed until the launcher restarted. */
TEST(egress_proxy_respawned)
{
    json_t *hi = tc_launcher_host_info(L);
    pid_t old = (pid_t)json_integer_value(json_object_get(hi, "egress_pid"));
    json_decref(hi);
    CHECK(old > 0 && is_egress_proxy(old));
    if (old <= 0)
        return;
    /* a sandbox that outlives the proxy: its connection was the dead proxy's, and its result
     * says so (a new proxy that never knew it must not report "no connections") */
    struct held a = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char script[64];
    snprintf(script, sizeof(script), "sleep %lld; echo late", (long long)(2 * slow_factor()));
    json_t *sa = spec_connect_denied(script);
    set_limit(sa, "wall_ms", 10000 + 4000 * slow_factor()); /* (the sleep, and room) */
    struct tc_launcher_job job = {.done = held_done, .userdata = &a};
    CHECK(tc_launcher_submit_job(L, sa, &job) == 0);
    json_decref(sa);
    usleep((useconds_t)(500 * 1000 * slow_factor())); /* its CONNECT is answered by then */
    CHECK(kill(old, SIGKILL) == 0);
    wait_gone(&old, 1);
    /* the host info no longer names the dead proxy (before, it did until one was started) */
    json_int_t told = -1;
    for (int i = 0; i < 500 * slow_factor() && told != 0; i++) {
        hi = tc_launcher_host_info(L);
        told = json_integer_value(json_object_get(hi, "egress_pid"));
        json_decref(hi);
        if (told != 0)
            usleep(10000);
    }
    CHECK(told == 0);
    for (int round = 0; round < 2; round++) { /* the first call starts it, the next uses it */
        json_t *r = run(spec_connect_denied(""));
        CHECK(strcmp(str(r, "status"), "completed") == 0);
        CHECK(strcmp(OUT(r), "HTTP/1.1 403ran\n") == 0);
        if (tap_case_failed) {
            char *dump = json_dumps(r, JSON_COMPACT);
            fprintf(stderr, "    %s\n", dump ? dump : "");
            free(dump);
        }
        json_decref(r);
    }
    held_wait(&a, true, (int)(10000 * slow_factor()));
    CHECK(a.res != NULL);
    if (a.res) {
        CHECK(strcmp(OUT(a.res), "HTTP/1.1 403ran\nlate\n") == 0);
        CHECK(json_array_size(json_object_get(a.res, "network")) == 0);
        const char *ne = json_string_value(json_object_get(a.res, "network_error"));
        CHECK(ne && strcmp(ne, "egress proxy died") == 0);
        if (tap_case_failed) {
            char *dump = json_dumps(a.res, JSON_COMPACT);
            fprintf(stderr, "    %s\n", dump ? dump : "");
            free(dump);
        }
    }
    json_decref(a.res);
    /* the new proxy: the launcher's child, as confined as egress_helper_confined's */
    char status[8192];
    pid_t kids[512], now = 0;
    for (int i = 0, k = launcher_child_pids(kids, 512); i < k; i++)
        if (is_egress_proxy(kids[i]))
            now = kids[i];
    CHECK(now > 0 && now != old);
    /* and the server's host info says so (before, it kept the first proxy's pid) */
    hi = tc_launcher_host_info(L);
    CHECK(json_integer_value(json_object_get(hi, "egress_pid")) == now);
    json_decref(hi);
    proc_status(now, status, sizeof(status));
    CHECK(strstr(status, "\nNoNewPrivs:\t1\n") != NULL);
    CHECK(strstr(status, "\nSeccomp:\t2\n") != NULL);
    CHECK(strstr(status, "\nCapEff:\t0000000000000000\n") != NULL);
    check_clean();
}

/* ---- gvisor backend (runsc) ---- */

static bool gvisor_available(void)
{
    json_t *hi = tc_launcher_host_info(L);
    const char *b = json_string_value(json_object_get(hi, "backends"));
    bool ok = b && strstr(b, "gvisor");
    json_decref(hi);
    return ok;
}

/* Processes whose command line mentions this sandbox id (runsc run/gofer/sandbox carry the
 * bundle path, which ends in the id). */
static int procs_with(const char *id)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d))) {
        char path[300], buf[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
            continue;
        for (ssize_t i = 0; i < k; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[k] = '\0';
        if (strstr(buf, id))
            n++;
    }
    closedir(d);
    return n;
}

static json_t *gv(json_t *spec)
{
    json_object_set_new(spec, "backend", json_string("gvisor"));
    return spec;
}

/* Warm sandboxes under gVisor (docs/sandbox.md, Warm interpreters): runsc booted and the
 * interpreter started up to its gate before the call; the call's files (written into the
 * workspace on the host after the boot) and stdin are the call's; a second call gets a
 * sandbox of its own. */
TEST(warm_gvisor)
{
    if (!gvisor_available())
        TAP_SKIP_HERE("runsc not installed: gvisor backend not tested");
    const int64_t slow = slow_factor();
    struct tc_launcher *main_l = L, *l2 = NULL;
    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-warmgv", (int)getpid());
    struct tc_launcher_options o = {.exe = "/proc/self/exe",
                                    .state_dir = state,
                                    .max_sandboxes = 4,
                                    .pool_max = TC_POOL_NONE,
                                    .warm = 2};
    int rc = tc_launcher_start(&o, &l2);
    CHECK(rc == 0);
    if (rc < 0)
        return;
    L = l2;
    json_t *hi = tc_launcher_host_info(L);
    /* cold twice, the second leaves a warm one behind */
    for (int i = 0; i < 2; i++) {
        json_t *r = run(gv(spec_gated("", "print('cold')\n", NULL)));
        CHECK(strcmp(OUT(r), "cold\n") == 0);
        CHECK(!json_object_get(r, "warm"));
        if (tap_case_failed)
            dump(r);
        json_decref(r);
    }
    CHECK(wait_children(1, (int)(10000 * slow)));
    usleep(500000); /* booted, and the interpreter at its gate */
    for (int i = 0; i < 2; i++) {
        json_t *r = run(gv(spec_gated(
            "",
            "import os, sys\nprint('warm', sys.stdin.read(), os.path.exists('/tmp/mark'),"
            " sorted(os.listdir('/workspace')))\n"
            "open('/tmp/mark', 'w')\nopen('/workspace/mark', 'w')\n",
            i ? "in2" : "in1")));
        CHECK(strcmp(str(r, "status"), "completed") == 0);
        CHECK(json_is_true(json_object_get(r, "warm")));
        /* the call's files only, and nothing of the call before */
        CHECK(strcmp(OUT(r), i ? "warm in2 False ['.toolcage', 'main.py']\n"
                               : "warm in1 False ['.toolcage', 'main.py']\n") == 0);
        fprintf(stderr, "    warm gvisor call %d: %lld ms, %lld ms CPU\n", i + 1,
                (long long)num(r, "duration_ms"), (long long)num(r, "cpu_ms"));
        if (tap_case_failed)
            dump(r);
        json_decref(r);
        CHECK(wait_children(1, (int)(10000 * slow)));
        usleep(500000);
    }
    /* a warm sandbox taken while its interpreter still starts (gVisor's is not looked into:
     * the launcher cannot tell): what start-up could read of the workspace holds nothing of
     * the call, whose files wait, staged, for the gate */
    const char *slow_start = "import time\ntime.sleep(2)\nseen = sorted(os.listdir('/workspace'))";
    for (int i = 0; i < 2; i++) { /* cold twice: its template learned */
        json_t *r = run(gv(spec_gated(slow_start, "print(seen)\n", NULL)));
        CHECK(strcmp(OUT(r), "['.toolcage']\n") == 0);
        json_decref(r);
    }
    bool warm_one = false;
    for (int i = 0; i < 1000 * slow && !warm_one; i++) /* (every one; not at its gate yet) */
        if (!(warm_one = warm_waiting() == 2))
            usleep(10000);
    json_t *r = run(gv(spec_gated(slow_start, "print(seen)\n", NULL)));
    CHECK(json_is_true(json_object_get(r, "warm")));
    CHECK(strcmp(OUT(r), "['.toolcage']\n") == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    second_stop(l2, main_l, state, hi);
}

/* ---- microvm backend (qemu, a guest kernel: sandbox/microvm.h) ---- */

static bool under_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return true;
#else
    return false;
#endif
}

static bool microvm_available(void)
{
    json_t *hi = tc_launcher_host_info(L);
    const char *b = json_string_value(json_object_get(hi, "backends"));
    bool ok = b && strstr(b, "microvm");
    json_decref(hi);
    return ok;
}

/* A guest boots in seconds under KVM, in 5 to 30 under TCG on a loaded 2-core machine: the
 * wall limit of a cold call covers the boot (docs/sandbox.md). */
static json_t *vm(json_t *spec, int64_t wall_ms)
{
    json_object_set_new(spec, "backend", json_string("microvm"));
    set_limit(spec, "wall_ms", wall_ms * slow_factor());
    set_limit(spec, "cpu_ms", 20000);
    return spec;
}

/* Output, status and files as for the other backends; inside, a kernel of its own: no host
 * process, file or network device to be seen, PID 1 is the guest's init. */
/* The launcher's VM directory (microvm.h) is mounted: a tmpfs "tcvm" in its mount namespace */
static bool vm_dir_mounted(void)
{
    char path[64], line[1024];
    bool found = false;
    snprintf(path, sizeof(path), "/proc/%d/mountinfo", tc_launcher_pid(L));
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f))
        found |= strstr(line, " - tmpfs tcvm ") != NULL;
    if (f)
        fclose(f);
    return found;
}

TEST(microvm_backend)
{
    if (getenv("TOOLCAGE_TEST_NO_MICROVM"))
        TAP_SKIP_HERE("microvm cases off here (TOOLCAGE_TEST_NO_MICROVM)");
    if (!microvm_available()) /* scripts/lib.sh installs qemu and a kernel */
        TAP_SKIP_HERE("qemu or a guest kernel missing: microvm backend not tested");
    char marker[64], script[2048];
    snprintf(marker, sizeof(marker), "/tmp/toolcage-test-%d-hostmark", (int)getpid());
    int mfd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(mfd >= 0);
    if (mfd >= 0)
        close(mfd);
    snprintf(script, sizeof(script),
             "tr a-z A-Z; echo oops >&2; id -u; hostname; cat in/data.txt; echo result > out.txt;"
             " echo procs $(for p in /proc/[0-9]*; do read -r -d '' a < $p/cmdline && echo;"
             " done 2>/dev/null | wc -l);"
             " echo init $(tr '\\0' ' ' < /proc/1/cmdline);"
             " echo net $(ls /sys/class/net); test -e /etc/shadow && echo SHADOW;"
             " test -e %s && echo HOSTMARK; test -e /boot && echo BOOT;"
             " cat /sys/fs/cgroup/program/memory.max /sys/fs/cgroup/program/pids.max;"
             " (echo x > /usr/x) 2>/dev/null && echo WROTE_USR;"
             " echo $SECRET_ENV; echo \"args $0 $1 [$ENDMARK]\"; exit 3",
             marker);
    /* a launcher's start does not build the VM directory (the one-shot CLI's start would pay
     * it): the first microvm call does */
    CHECK(!vm_dir_mounted());
    json_t *s = vm(spec_sh(script), 120000);
    json_object_set_new(s, "stdin_b64", json_string("aGVsbG8K")); /* "hello\n" */
    json_object_set_new(
        s, "files", json_pack("[{s:s, s:s}]", "path", "in/data.txt", "content_b64", "ZGF0YQo="));
    json_object_set_new(s, "collect", json_pack("[s]", "*.txt"));
    json_array_append_new(json_object_get(s, "env"), json_string("SECRET_ENV=from-env"));
    /* arguments that look like the relay's own words stay arguments (vm_proto.h) */
    json_array_append_new(json_object_get(s, "argv"), json_string("env"));
    json_array_append_new(json_object_get(s, "argv"), json_string("ENDMARK=x"));
    set_limit(s, "memory_bytes", 200 << 20);
    set_limit(s, "pids", 40);
    json_t *r = run(s);
    const char *out = OUT(r);
    CHECK(strcmp(str(r, "status"), "failed") == 0);
    CHECK(num(r, "exit_code") == 3);
    CHECK(strncmp(out, "HELLO\n", 6) == 0);
    CHECK(strstr(out, "\n1000\n") != NULL); /* not root inside */
    CHECK(strstr(out, "\ndata\n") != NULL);
    /* the guest's processes only (its kernel threads have no command line): init, bash and
     * the commands of the line; the host has hundreds */
    CHECK(strstr(out, "\nprocs ") != NULL && atoi(strstr(out, "\nprocs ") + 7) < 10);
    CHECK(strstr(out, "\ninit /init\n") != NULL);
    CHECK(strstr(out, "\nnet lo\n") != NULL); /* no network device but loopback */
    CHECK(!strstr(out, "SHADOW") && !strstr(out, "HOSTMARK") && !strstr(out, "BOOT"));
    CHECK(!strstr(out, "WROTE_USR"));
    CHECK(strstr(out, "\n209715200\n40\n") != NULL); /* the guest's cgroup has the limits */
    CHECK(strstr(out, "\nfrom-env\nargs env ENDMARK=x []\n") != NULL);
    CHECK(strcmp(ERR(r), "oops\n") == 0);
    json_t *files = json_object_get(r, "files");
    CHECK(json_array_size(files) == 2 &&
          strcmp(str(json_array_get(files, 0), "path"), "out.txt") == 0);
    json_t *enf = json_object_get(r, "enforced");
    CHECK(strncmp(str(enf, "isolation"), "microvm_", 8) == 0);
    CHECK(strcmp(str(enf, "memory_bytes"), "guest_cgroup_v2") == 0);
    CHECK(json_array_size(json_object_get(r, "policy_violations")) == 0);
    /* the peak is the guest program's (its cgroup there), not qemu's: bash and a few
     * commands, well under the guest's 200 MiB (qemu alone holds more on the host); cpu_ms
     * is qemu's on the host (what a quota is charged) */
    CHECK(json_is_null(json_object_get(r, "killed_reason")));
    CHECK(json_is_false(json_object_get(r, "pids_limit_hit")));
    CHECK(num(r, "memory_peak_bytes") > 0 && num(r, "memory_peak_bytes") < (64 << 20));
    CHECK(num(r, "cpu_ms") > 0);
    CHECK(vm_dir_mounted());
    json_t *hi = tc_launcher_host_info(L);
    CHECK(strcmp(str(json_object_get(hi, "microvm"), "boot"), "kaslr") == 0);
    json_decref(hi);
    fprintf(stderr, "    microvm (%s) cold call: %lld ms\n", str(enf, "isolation"),
            (long long)num(r, "duration_ms"));
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    unlink(marker);
    check_clean();

    /* a program that cannot start is reported as the native backend does: 127 */
    r = run(vm(spec_argv(json_pack("[s]", "/nonexistent")), 120000));
    CHECK(num(r, "exit_code") == 127);
    CHECK(strstr(ERR(r), "exec /nonexistent: No such file or directory") != NULL);
    json_decref(r);
    check_clean();
}

/* Attacks on the guest's limits, each with its evidence: a fork bomb meets the guest's pids
 * limit, a memory bomb (in a child) the guest's memory limit (OOM-killed there, the host's
 * qemu unharmed), a CPU spin the CPU budget of the guest's cgroup (in one boot); a program
 * that never ends meets the wall clock: qemu is killed on the host and nothing of it is
 * left. */
TEST(microvm_limits)
{
    if (getenv("TOOLCAGE_TEST_NO_MICROVM"))
        TAP_SKIP_HERE("microvm cases off here (TOOLCAGE_TEST_NO_MICROVM)");
    if (under_asan()) /* the launcher's microvm code ran under ASan in microvm_backend */
        TAP_SKIP_HERE("guests' limits run in the release unit lane (a minute of TCG boots)");
    if (!microvm_available())
        TAP_SKIP_HERE("qemu or a guest kernel missing: microvm backend not tested");
    struct tc_launcher *main_l = L, *l2;
    char state[128];
    /* (the fast boot: microvm_backend boots the kaslr way) */
    if (!(l2 = second_start((struct tc_launcher_options){.max_sandboxes = 4,
                                                         .pool_max = TC_POOL_NONE,
                                                         .microvm_fast = true},
                            "vmlimits", state, sizeof(state))))
        return;
    json_t *hi = tc_launcher_host_info(L);
    json_t *s = vm(spec_py("import os, signal, sys, time\n"
                           "kids, err = [], 0\n"
                           "for i in range(100):\n"
                           "    try:\n        pid = os.fork()\n"
                           "    except BlockingIOError:\n        err += 1\n        continue\n"
                           "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
                           "    kids.append(pid)\n"
                           "print('forks', len(kids), err, flush=True)\n"
                           "for k in kids:\n    os.kill(k, signal.SIGKILL)\n    os.waitpid(k, 0)\n"
                           "pid = os.fork()\n"
                           "if pid == 0:\n"
                           "    b = []\n"
                           "    for i in range(64):\n        b.append(bytearray(16 << 20))\n"
                           "    os._exit(0)\n"
                           "_, st = os.waitpid(pid, 0)\n"
                           "print('bomb', os.WIFSIGNALED(st) and os.WTERMSIG(st), flush=True)\n"
                           "t = time.process_time()\n"
                           "while True:\n"
                           "    if time.process_time() - t > 30: print('SPUN', flush=True)\n"),
                   0);
    int64_t wall = 90000 * slow_factor();
    set_limit(s, "wall_ms", wall);
    set_limit(s, "cpu_ms", 12000); /* the forks and the bomb take seconds under TCG */
    set_limit(s, "memory_bytes", 256 << 20);
    set_limit(s, "pids", 32);
    json_t *r = run(s);
    CHECK(strcmp(str(json_object_get(hi, "microvm"), "boot"), "fast") == 0);
    CHECK(vm_dir_mounted());
    const char *out = OUT(r);
    int ok = -1, err = -1;
    const char *f = strstr(out, "forks ");
    CHECK(f && sscanf(f, "forks %d %d", &ok, &err) == 2);
    CHECK(ok > 0 && ok < 32 && err > 0);      /* the guest's pids limit, not the host's */
    CHECK(strstr(out, "\nbomb 9\n") != NULL); /* OOM-killed in the guest */
    /* the spin met the CPU budget of the guest's cgroup: killed there, well before the wall */
    CHECK(!strstr(out, "SPUN"));
    /* reported as the native backend reports its own cgroup's findings: the guest's OOM kill
     * came first (killed, "memory"; native also keeps the first reason), the fork bomb met the
     * pids limit, the CPU budget's kill is the signal; the figures are the guest's */
    CHECK(strcmp(str(r, "status"), "killed") == 0 &&
          strcmp(str(r, "killed_reason"), "memory") == 0);
    CHECK(strcmp(str(r, "signal"), "SIGXCPU") == 0);
    CHECK(json_is_true(json_object_get(r, "pids_limit_hit")));
    /* qemu's host CPU, charged to the tenant: about the guest's budget or more (emulation
     * costs more than it emulates; but under TCG the guest's clock is the host's wall clock,
     * so a qemu waiting for a core on a busy host still ages its guest's CPU time: 11865 ms
     * seen once for the 12000 ms budget) */
    CHECK(num(r, "cpu_ms") >= 12000 * 9 / 10);
    /* (the guest kernel charges in batches: a few pages past memory.max at the kill) */
    CHECK(num(r, "memory_peak_bytes") > (64 << 20) && num(r, "memory_peak_bytes") < (260 << 20));
    CHECK(num(r, "duration_ms") < wall - 5000);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();

    /* a program that never ends meets the wall clock: qemu is killed on the host (booted or
     * still booting: the same kill; its end is the evidence) */
    wall = 15000 * slow_factor();
    s = vm(spec_sh("echo started; exec sleep 3600"), 0);
    set_limit(s, "wall_ms", wall);
    r = run(s);
    CHECK(strcmp(str(r, "status"), "timeout") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "timeout") == 0);
    CHECK(num(r, "duration_ms") < wall + 5000);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();
    second_stop(l2, main_l, state, hi);
}

static void make_file(const char *dir, const char *name, const char *content, time_t mtime)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f && fputs(content, f) >= 0);
    if (f)
        fclose(f);
    if (mtime) {
        struct timespec ts[2] = {{.tv_sec = mtime}, {.tv_sec = mtime}};
        CHECK(utimensat(AT_FDCWD, p, ts, 0) == 0);
    }
}

/* The fast boot's kernel (microvm.h tc_vm_kernel_unpack): the host's bzImage unpacks to an ELF
 * with a PVH entry; a truncated, foreign or corrupted image is refused and leaves no file. */
TEST(microvm_kernel_unpack)
{
    char ver[64] = "", bz[160], out[160], bad[160], why[96];
    DIR *d = opendir("/lib/modules");
    struct dirent *de;
    while (d && (de = readdir(d))) { /* any kernel with an image: the probe */
        snprintf(bz, sizeof(bz), "/boot/vmlinuz-%.64s", de->d_name);
        if (de->d_name[0] != '.' && access(bz, R_OK) == 0)
            snprintf(ver, sizeof(ver), "%.63s", de->d_name);
    }
    if (d)
        closedir(d);
    if (!ver[0])
        TAP_SKIP_HERE("no kernel image in /boot: nothing to unpack");
    snprintf(bz, sizeof(bz), "/boot/vmlinuz-%s", ver);
    snprintf(out, sizeof(out), "/tmp/toolcage-test-%d-vmlinux", (int)getpid());
    snprintf(bad, sizeof(bad), "/tmp/toolcage-test-%d-badimage", (int)getpid());
    CHECK(tc_vm_kernel_check(bz, why, sizeof(why)) == 0 || strstr(why, "not XZ"));
    int r = tc_vm_kernel_unpack(bz, out, why, sizeof(why));
    struct stat st;
    if (r == -ENOTSUP) /* (a kernel packed otherwise boots compressed: said, not failed) */
        TAP_SKIP_HERE("this host's kernel is not XZ with a PVH entry: the kaslr boot only");
    CHECK(r == 0);
    CHECK(stat(out, &st) == 0 && st.st_size > (8 << 20) && (st.st_mode & 0777) == 0444);
    /* kept for the cache below (an unpack takes ~1 s here, a minute under emulation: longer
     * than a launcher may take to start) */
    char good[192];
    snprintf(good, sizeof(good), "%s-good", out);
    CHECK(rename(out, good) == 0);

    /* the same image cut short, its payload corrupted, and not a kernel at all */
    unsigned char *img = NULL;
    size_t len = 0;
    FILE *f = fopen(bz, "rb");
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = (size_t)ftell(f)) > 0 && (img = malloc(len)) &&
        fseek(f, 0, SEEK_SET) == 0 && fread(img, 1, len, f) != len)
        len = 0;
    if (f)
        fclose(f);
    CHECK(img && len > 4096);
    for (int k = 0; img && len > 4096 && k < 3; k++) {
        FILE *w = fopen(bad, "wb");
        size_t n = k == 0 ? len / 2 : len;
        if (k == 1)
            memset(img + len / 2, 0x5a, 64); /* inside the XZ stream: its check fails */
        if (k == 2)
            memcpy(img + 0x202, "NoHd", 4);
        CHECK(w && fwrite(img, 1, n, w) == n);
        if (w)
            fclose(w);
        why[0] = '\0';
        /* the cheap check at a launcher's start sees the header, the bounds and the magic */
        CHECK((tc_vm_kernel_check(bad, why, sizeof(why)) < 0) == (k != 1));
        CHECK(tc_vm_kernel_unpack(bad, out, why, sizeof(why)) < 0 && why[0]);
        CHECK(access(out, F_OK) < 0);
    }
    free(img);
    unlink(bad);
    unlink(out);

    /* a cache directory others may write is not used: the launcher boots kaslr and says why */
    if (!microvm_available()) {
        unlink(good);
        return;
    }
    struct tc_launcher *main_l = L, *l2;
    char state[128], cache[160];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-vmcache", (int)getpid());
    snprintf(cache, sizeof(cache), "%s/vm", state);
    CHECK(mkdir(state, 0700) == 0 && mkdir(cache, 0700) == 0 && chmod(cache, 0777) == 0);
    if (!(l2 = second_start((struct tc_launcher_options){.max_sandboxes = 2,
                                                         .pool_max = TC_POOL_NONE,
                                                         .microvm_fast = true},
                            "vmcache", state, sizeof(state)))) {
        unlink(good);
        return;
    }
    json_t *hi = tc_launcher_host_info(L);
    json_t *mv = json_object_get(hi, "microvm");
    CHECK(strcmp(str(mv, "boot"), "kaslr") == 0);
    CHECK(strstr(str(mv, "boot_why"), "not ours alone") != NULL);
    CHECK(rmdir(cache) == 0); /* nothing was unpacked into it */
    if (tap_case_failed)
        dump(hi);
    second_stop(l2, main_l, state, hi);

    /* one of ours: the kernel in it is used, and a kernel whose image is gone goes */
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d-vmcache2", (int)getpid());
    snprintf(cache, sizeof(cache), "%s/vm", state);
    CHECK(mkdir(state, 0700) == 0 && mkdir(cache, 0700) == 0);
    make_file(cache, "vmlinux-0.0.0-gone-amd64-8-1700000000", "a kernel upgrade ago", 0);
    char p[256];
    CHECK(stat(bz, &st) == 0);
    snprintf(p, sizeof(p), "%s/vmlinux-%s-%lld-%lld", cache, ver, (long long)st.st_size,
             (long long)st.st_mtime);
    CHECK(rename(good, p) == 0); /* the kernel in use, unpacked by an earlier start */
    if (!(l2 = second_start((struct tc_launcher_options){.max_sandboxes = 2,
                                                         .pool_max = TC_POOL_NONE,
                                                         .microvm_fast = true},
                            "vmcache2", state, sizeof(state))))
        return;
    hi = tc_launcher_host_info(L);
    mv = json_object_get(hi, "microvm");
    CHECK(strcmp(str(mv, "boot"), "fast") == 0);
    CHECK(access(p, R_OK) == 0); /* kept */
    snprintf(p, sizeof(p), "%s/vmlinux-0.0.0-gone-amd64-8-1700000000", cache);
    CHECK(access(p, F_OK) < 0 && errno == ENOENT); /* swept */
    if (tap_case_failed)
        dump(hi);
    second_stop(l2, main_l, state, hi);
}

/* The kernel cache keeps what some launcher may boot: the kernel in use, and any other whose
 * image is still installed unchanged; the kernels of removed or replaced images (a kernel
 * upgrade's leftovers, ~30 MB each) and temporaries an unpack abandoned go. */
TEST(microvm_kernel_cache_sweep)
{
    char cache[128], boot[128], p[512];
    struct stat st;
    snprintf(cache, sizeof(cache), "/tmp/toolcage-test-%d-kcache", (int)getpid());
    snprintf(boot, sizeof(boot), "/tmp/toolcage-test-%d-boot", (int)getpid());
    CHECK(mkdir(cache, 0700) == 0 && mkdir(boot, 0755) == 0);
    make_file(boot, "vmlinuz-6.1.0-9-amd64", "an image", 1700000000);
    make_file(boot, "vmlinuz-6.1.0-7-amd64", "another image", 1600000000);
    make_file(cache, "vmlinux-6.1.0-9-amd64-8-1700000000", "in use", 0); /* keep */
    make_file(cache, "vmlinux-6.1.0-7-amd64-13-1600000000", "installed", 0);
    make_file(cache, "vmlinux-6.1.0-7-amd64-13-1500000000", "replaced", 0); /* mtime */
    make_file(cache, "vmlinux-6.1.0-7-amd64-99-1600000000", "replaced", 0); /* size */
    make_file(cache, "vmlinux-5.10.0-1-amd64-8-1700000000", "removed", 0);  /* no image */
    make_file(cache, "vmlinux-6.1.0-9-amd64-8-1700000000.4242.tmp", "old", time(NULL) - 3600);
    make_file(cache, "vmlinux-6.1.0-9-amd64-8-1700000000.4243.tmp", "being written", 0);
    make_file(cache, "vmlinux-odd", "not a name of ours", 0);
    make_file(cache, "notes", "not a kernel", 0);
    snprintf(p, sizeof(p), "%s/vmlinux-link-8-1", cache);
    CHECK(symlink("/etc/hostname", p) == 0); /* not followed, not removed */

    CHECK(tc_vm_cache_sweep(cache, "vmlinux-6.1.0-9-amd64-8-1700000000", boot) == 4);
    static const char *const kept[] = {"vmlinux-6.1.0-9-amd64-8-1700000000",
                                       "vmlinux-6.1.0-7-amd64-13-1600000000",
                                       "vmlinux-6.1.0-9-amd64-8-1700000000.4243.tmp",
                                       "vmlinux-odd",
                                       "notes",
                                       "vmlinux-link-8-1"};
    static const char *const gone[] = {
        "vmlinux-6.1.0-7-amd64-13-1500000000", "vmlinux-6.1.0-7-amd64-99-1600000000",
        "vmlinux-5.10.0-1-amd64-8-1700000000", "vmlinux-6.1.0-9-amd64-8-1700000000.4242.tmp"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(kept); i++) {
        snprintf(p, sizeof(p), "%s/%s", cache, kept[i]);
        if (lstat(p, &st) < 0) {
            fprintf(stderr, "    removed: %s\n", kept[i]);
            tap_case_failed = 1;
        }
        unlink(p);
    }
    for (size_t i = 0; i < TC_ARRAY_SIZE(gone); i++) {
        snprintf(p, sizeof(p), "%s/%s", cache, gone[i]);
        if (lstat(p, &st) == 0) {
            fprintf(stderr, "    kept: %s\n", gone[i]);
            tap_case_failed = 1;
            unlink(p);
        }
    }
    /* the image of the kernel in use gone too: the kernel in use stays all the same */
    snprintf(p, sizeof(p), "%s/vmlinuz-6.1.0-9-amd64", boot);
    unlink(p);
    make_file(cache, "vmlinux-6.1.0-9-amd64-8-1700000000", "in use", 0);
    CHECK(tc_vm_cache_sweep(cache, "vmlinux-6.1.0-9-amd64-8-1700000000", boot) == 0);
    snprintf(p, sizeof(p), "%s/vmlinux-6.1.0-9-amd64-8-1700000000", cache);
    CHECK(unlink(p) == 0);
    CHECK(rmdir(cache) == 0);
    snprintf(p, sizeof(p), "%s/vmlinuz-6.1.0-7-amd64", boot);
    unlink(p);
    CHECK(rmdir(boot) == 0);
    CHECK(tc_vm_cache_sweep(cache, "x", boot) == -ENOENT);
}

/* Warm guests: booted, the interpreter started up to its gate in the guest, before the
 * call; the call's files (written on the host after the boot) and stdin are the call's, and
 * the next call gets a guest of its own. */
TEST(warm_microvm)
{
    if (getenv("TOOLCAGE_TEST_NO_MICROVM"))
        TAP_SKIP_HERE("microvm cases off here (TOOLCAGE_TEST_NO_MICROVM)");
    if (under_asan())
        TAP_SKIP_HERE("warm guests run in the release unit lane (a minute of TCG boots)");
    if (!microvm_available())
        TAP_SKIP_HERE("qemu or a guest kernel missing: microvm backend not tested");
    const int64_t slow = slow_factor();
    struct tc_launcher *main_l = L, *l2;
    char state[128];
    /* (the fast boot: microvm_backend boots the kaslr way) */
    if (!(l2 = second_start(
              (struct tc_launcher_options){
                  .max_sandboxes = 6, .pool_max = TC_POOL_NONE, .warm = 4, .microvm_fast = true},
              "warmvm", state, sizeof(state))))
        return;
    json_t *hi = tc_launcher_host_info(L);
    /* cold twice: the first teaches the template, the second (a miss) asks for a warm one */
    for (int i = 0; i < 2; i++) {
        json_t *r = run(vm(spec_gated("", "print('cold')\n", NULL), 120000));
        CHECK(strcmp(OUT(r), "cold\n") == 0);
        CHECK(!json_object_get(r, "warm"));
        if (tap_case_failed)
            dump(r);
        json_decref(r);
    }
    for (int i = 0; i < 2; i++) {
        /* taken as soon as it waits: the call meets the guest booting, or booted */
        for (int k = 0; k < 1000 * slow && warm_waiting() != 1; k++)
            usleep(10000);
        CHECK(warm_waiting() == 1);
        json_t *r =
            run(vm(spec_gated("",
                              "import os, sys\nprint('warm', sys.stdin.read(),"
                              " os.path.exists('/tmp/mark'), sorted(os.listdir('/workspace')))\n"
                              "open('/tmp/mark', 'w')\nopen('/workspace/mark', 'w')\n",
                              i ? "in2" : "in1"),
                   120000));
        CHECK(strcmp(str(r, "status"), "completed") == 0);
        CHECK(json_is_true(json_object_get(r, "warm")));
        CHECK(strcmp(OUT(r), i ? "warm in2 False ['.toolcage', 'main.py']\n"
                               : "warm in1 False ['.toolcage', 'main.py']\n") == 0);
        fprintf(stderr, "    warm microvm call %d: %lld ms\n", i + 1,
                (long long)num(r, "duration_ms"));
        if (tap_case_failed)
            dump(r);
        json_decref(r);
    }
    /* three calls at once: one takes the waiting guest, the others miss and boot cold; the
     * template's target stays at one guest (WARM_VM_PER_TEMPLATE; a native template's would
     * rise to three): no second guest is started after, though the launcher may hold four */
    for (int k = 0; k < 1000 * slow && warm_waiting() != 1; k++)
        usleep(10000);
    struct conc c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    for (int i = 0; i < 3; i++) {
        json_t *sp = vm(spec_gated("", "print('burst')\n", NULL), 120000);
        CHECK(tc_launcher_submit(L, sp, conc_cb, &c) == 0);
        json_decref(sp);
    }
    pthread_mutex_lock(&c.mu);
    while (c.done < 3)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    CHECK(c.ok == 3);
    int most = 0; /* a raised target shows within moments: a sandbox waits in ms, booting */
    for (int k = 0; k < 300 * slow; k++) {
        int w = warm_waiting();
        most = w > most ? w : most;
        usleep(10000);
    }
    CHECK(most == 1);
    second_stop(l2, main_l, state, hi);
}

TEST(gvisor_backend)
{
    if (!gvisor_available()) /* scripts/lib.sh installs it: a skip the allowlist does not have */
        TAP_SKIP_HERE("runsc not installed: gvisor backend not tested");
    /* exit status, both streams, stdin, the same result schema */
    json_t *s = gv(spec_sh("tr a-z A-Z; echo oops >&2; id -u; hostname; exit 3"));
    json_object_set_new(s, "stdin_b64", json_string("aGVsbG8K")); /* "hello\n" */
    json_t *r = run(s);
    CHECK(strcmp(str(r, "status"), "failed") == 0);
    CHECK(num(r, "exit_code") == 3);
    CHECK(strncmp(OUT(r), "HELLO\n", 6) == 0 && strstr(OUT(r), "\ntoolcage\n"));
    CHECK(strstr(OUT(r), "\n0\n") == NULL); /* not root inside */
    CHECK(strcmp(ERR(r), "oops\n") == 0);
    json_t *enf = json_object_get(r, "enforced");
    CHECK(strcmp(str(enf, "pids"), "rlimit") == 0);
    CHECK(strcmp(str(enf, "tmp_bytes"), "tmpfs") == 0);
    CHECK(json_array_size(json_object_get(r, "policy_violations")) == 0);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();

    /* a signal is reported as one, as in the native backend */
    r = run(gv(spec_py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")));
    CHECK(strcmp(str(r, "status"), "failed") == 0);
    CHECK(strcmp(str(r, "signal"), "SIGSEGV") == 0);
    CHECK(json_is_null(json_object_get(r, "exit_code")));
    json_decref(r);
    check_clean();

    /* files in, collect out (symlinks not followed), leased secret file read-only */
    s = gv(spec_sh("cat in/data.txt; echo result > out.txt; ln -s /etc/passwd link.txt;"
                   " cat /run/secrets/tok;"
                   /* Debian 12's runsc rejects coreutils' statx flags (docs/sandbox.md) */
                   " python3 -c 'import os; print(oct(os.stat(\"/run/secrets/tok\").st_mode))';"
                   " echo x > /run/secrets/tok 2>/dev/null && echo WROTE || echo refused"));
    json_object_set_new(
        s, "files", json_pack("[{s:s, s:s}]", "path", "in/data.txt", "content_b64", "ZGF0YQo="));
    json_object_set_new(s, "collect", json_pack("[s]", "*.txt"));
    json_object_set_new(
        s, "secret_files",
        json_pack("[{s:s, s:s}]", "name", "tok", "content_b64", "czNjcjN0Cg==")); /* s3cr3t */
    r = run(s);
    CHECK(strcmp(OUT(r), "data\ns3cr3t\n0o100400\nrefused\n") == 0);
    bool out = false, link = false;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(r, "files"), i, f)
    {
        out |= strcmp(str(f, "path"), "out.txt") == 0 &&
               strcmp(str(f, "content_b64"), "cmVzdWx0Cg==") == 0;
        link |= strcmp(str(f, "path"), "link.txt") == 0;
    }
    CHECK(out && !link);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();

    /* wall-clock timeout kills runsc, its sandbox and gofer: nothing is left */
    s = gv(spec_sh("sleep 30 & sleep 30"));
    set_limit(s, "wall_ms", 1500);
    int64_t t0 = mono_ms();
    r = run(s);
    CHECK(strcmp(str(r, "status"), "timeout") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "timeout") == 0);
    CHECK(mono_ms() - t0 < 10000);
    json_decref(r);
    check_clean();

    /* memory: the cgroup holds the whole gVisor sandbox */
    s = gv(spec_py(
        "b = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('survived')"));
    set_limit(s, "memory_bytes", 128 << 20);
    r = run(s);
    CHECK(strcmp(str(r, "status"), "killed") == 0);
    CHECK(strcmp(str(r, "killed_reason"), "memory") == 0);
    CHECK(strstr(OUT(r), "survived") == NULL);
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();

    /* runsc itself failing is an error with its reason, not a program exit code */
    r = run(gv(spec_argv(json_pack("[s]", "/no/such/binary"))));
    CHECK(strcmp(str(r, "status"), "error") == 0);
    CHECK(strstr(str(r, "error"), "runsc:") && strstr(str(r, "error"), "/no/such/binary"));
    if (tap_case_failed)
        dump(r);
    json_decref(r);
    check_clean();

    /* the launcher killed mid-run: runsc dies with it (PDEATHSIG), its sandbox and gofer with
     * runsc (--attached) or with the dead launcher's cgroups, which the next launcher removes */
    {
        s = gv(spec_sh("sleep 100"));
        char id[64];
        snprintf(id, sizeof(id), "%s", str(s, "id"));
        struct conc c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
        unsigned restarts = tc_launcher_restarts(L);
        CHECK(tc_launcher_submit(L, s, conc_cb_quiet, &c) == 0);
        json_decref(s);
        int running = 0;
        for (int k = 0; k < 100 && running == 0; k++) {
            usleep(20000);
            running = procs_with(id);
        }
        CHECK(running > 0); /* runsc, its gofer and sandbox */
        kill(tc_launcher_pid(L), SIGKILL);
        pthread_mutex_lock(&c.mu);
        while (c.done < 1)
            pthread_cond_wait(&c.cv, &c.mu);
        pthread_mutex_unlock(&c.mu);
        CHECK(c.ok == 0);
        for (int k = 0; k < 300 && (!tc_launcher_alive(L) || tc_launcher_restarts(L) == restarts);
             k++)
            usleep(10000);
        CHECK(tc_launcher_alive(L));
        int left = -1;
        for (int k = 0; k < 200 && (left = procs_with(id)) != 0; k++)
            usleep(20000);
        CHECK(left == 0);
        r = run(gv(spec_sh("echo again")));
        CHECK(strcmp(OUT(r), "again\n") == 0);
        json_decref(r);
        base_fds = settled_fds();
        check_clean();
    }

    /* a mount point through the skeleton's bin -> usr/bin link is refused, never created on
     * the host by the launcher (root) */
    {
        struct stat st;
        s = gv(spec_sh("true"));
        json_object_set_new(
            s, "mounts",
            json_pack("[{s:s, s:s}]", "source", "/usr/share", "target", "/bin/tc-probe-dir/x"));
        r = run(s);
        CHECK(strcmp(str(r, "status"), "error") == 0);
        CHECK(stat("/usr/bin/tc-probe-dir", &st) < 0 && errno == ENOENT);
        json_decref(r);
        check_clean();
    }

    /* network allowlists need the native backend's egress proxy */
    s = gv(spec_sh("true"));
    json_object_set_new(s, "network", json_pack("{s:[s]}", "allow", "example.com:443"));
    r = run(s);
    CHECK(strcmp(str(r, "status"), "error") == 0);
    CHECK(strstr(str(r, "error"), "network allowlists are not supported") != NULL);
    json_decref(r);
    check_clean();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "launcher") == 0)
        return tc_launcher_main(argc - 1, argv + 1);
    if (geteuid() != 0) { /* counted as a skip: scripts/test fails on it (tests/skips.allow) */
        printf("ok - test_sandbox # SKIP needs root\n0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    char state[128];
    snprintf(state, sizeof(state), "/tmp/toolcage-test-%d", (int)getpid());
    mkdir(state, 0700); /* root-only, like a real state directory */
    /* a pool of the default size that bursts do not grow: check_clean() expects its size */
    struct tc_launcher_options o = {
        .exe = "/proc/self/exe", .state_dir = state, .max_sandboxes = 64, .pool_max = TC_POOL_NONE};
    int r = tc_launcher_start(&o, &L);
    if (r < 0) {
        printf("not ok - launcher_start (%s)\n0 passed, 1 failed\n", strerror(-r));
        return 1;
    }
    json_t *hi = tc_launcher_host_info(L);
    char *his = json_dumps(hi, JSON_COMPACT);
    fprintf(stderr, "# host: %s\n", his);
    free(his);
    json_decref(hi);
    base_fds = settled_fds();

    RUN(echo_exit_code);
    RUN(python_completed);
    RUN(stdin_delivered);
    RUN(workspace_files_and_collect);
    RUN(collect_caps);
    RUN(workspace_file_ops);
    RUN(identity_caps_seccomp);
    RUN(host_files_unreachable);
    RUN(cgroup_join_moves_the_process);
    RUN(launcher_no_exec);
    RUN(readonly_outside_workspace);
    RUN(network_only_loopback);
    RUN(denied_syscalls_reported);
    RUN(fork_bomb_contained);
    RUN(memory_bomb_killed);
    RUN(memory_bomb_children_killed_together);
    RUN(timeout_kills_everything);
    RUN(cpu_limit);
    RUN(output_truncated);
    RUN(disk_limits);
    RUN(spec_mounts);
    RUN(exec_failure);
    RUN(invalid_specs_rejected);
    RUN(cancel);
    RUN(namespaces_held_then_let_go);
    RUN(hold_go_cancel_reserve);
    RUN(session_input_interrupt);
    RUN(pool_shells_killed);
    RUN(shell_dead_before_go_restarts);
    RUN(pool_sized_by_demand);
    RUN(warm_sandboxes);
    RUN(warm_only_at_gate);
    RUN(warm_tenants_apart);
    RUN(fifty_concurrent);
    RUN(launcher_death_fails_pending_and_restarts);
    RUN(stop_with_running_sandboxes);
    RUN(fallback_rlimits_and_errno);
    RUN(egress_helper_confined);
    RUN(egress_proxy_respawned);
    RUN(gvisor_backend);
    RUN(microvm_backend);
    RUN(microvm_limits);
    RUN(microvm_kernel_unpack);
    RUN(microvm_kernel_cache_sweep);
    RUN(warm_microvm);
    RUN(warm_gvisor);
    if (!getenv("TOOLCAGE_QUICK"))
        RUN(startup_overhead);

    tc_launcher_stop(L);
    char run_dir[160];
    snprintf(run_dir, sizeof(run_dir), "%s/run", state);
    rmdir(run_dir);
    rmdir(state);
    return TAP_DONE();
}
