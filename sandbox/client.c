/* Server side of the launcher: spawn (fork + immediate exec; or, for toolcage exec, a fork
 * that runs the launcher's code: no_exec), submit, and one reader thread that delivers
 * results to callbacks and respawns the launcher if it dies. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/child.h"
#include "sandbox/launcher.h"
#include "sandbox/pool.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"
#include "sandbox/egress.h"
#include "sandbox/egress_rules.h"
#include "sandbox/wire.h"

#define HELLO_TIMEOUT_MS 10000

struct pending {
    struct pending *next;
    char id[72];
    tc_launcher_cb cb;
    tc_launcher_ready_cb ready;
    void (*chunk)(void *userdata, int stream, const char *data, size_t len);
    void *userdata;
    int64_t *went_us; /* the job's, written at delivery with go_us */
    int64_t go_us;    /* (l->mu) when tc_launcher_go sent the go */
};

struct tc_launcher {
    char *exe, *state_dir;
    int exe_fd; /* toolcage-launcher, opened (O_PATH) and checked once at start: every launcher
                   this server starts, after a respawn too, is that file, exec'ed by its fd */
    /* the launcher's settings, passed on its command line (struct tc_launcher_options) */
    char pool[8], pool_max[8], pool_shrink_ms[16], warm[8], warm_group_max[8];
    char *uid_registry, *gvisor_platform, *init_path, *egress_ca_file;
    bool no_cgroup, no_seccomp_notify, no_egress, microvm_fast;
    bool once; /* a launcher for one run (tc_launcher_open_once): --once */
    unsigned max;
    /* the launcher is a fork of ours running tc_launcher_main, not an exec (one generation:
     * forked by the caller's thread before the reader starts; tc_launcher_options.no_exec) */
    bool no_exec;
    int first_sock; /* that launcher's socket and pid, until the reader takes them */
    pid_t first_pid;
    char *bin_dir; /* where such a launcher finds toolcage-init and the microvm helpers: the
                      folder of the binary an exec would have run */

    /* Lock order: mu, then send_mu. mu guards the state below and is never held while
     * blocking on the socket; send_mu serialises sends and keeps the socket fd alive
     * while a send is in progress (the reader closes it only under send_mu). */
    pthread_mutex_t mu;
    pthread_mutex_t send_mu;
    pthread_cond_t cv;
    pthread_t reader;
    bool reader_started;
    int wake[2]; /* stop pipe for the reader */

    int sock; /* -1 while no launcher */
    pid_t pid;
    bool alive; /* HELLO received, accepting submissions */
    bool stopping;
    bool hello_done; /* the first spawn attempt finished (ok or failed) */
    int hello_err;
    unsigned restarts, in_flight, spawns;
    void (*on_free)(void *ud); /* a slot was given back (tc_launcher_on_free) */
    void *on_free_ud;
    void (*on_ask)(void *ud, const char *id, json_t *ask); /* tc_launcher_on_ask */
    void *on_ask_ud;
    unsigned reserved; /* slots promised by tc_launcher_reserve(), not yet submitted */
    struct pending *pending;
    struct file_wait *file_waits; /* tc_launcher_file() calls waiting for their answer */
    uint64_t file_seq;
    json_t *host_info;
};

struct file_wait {
    struct file_wait *next;
    uint64_t req;
    bool done;
    char *answer; /* the TC_WIRE_FILE_DONE payload (NULL: the launcher went away) */
    size_t len;
};

extern char **environ;

/* The launcher (root, and parent of the egress proxy) needs nothing of the server's database,
 * key or mail configuration: credentials never reach it. Variables dropped by name or prefix. */
static bool launcher_env_ok(const char *kv)
{
    static const char *const drop[] = {"TOOLCAGE_DATABASE_URL=",
                                       "TOOLCAGE_MIGRATE_DATABASE_URL=",
                                       "TOOLCAGE_MASTER_KEY_FILE=",
                                       "TOOLCAGE_PREVIOUS_MASTER_KEY_FILES=",
                                       "TOOLCAGE_SMTP_URL=", /* (its password) */
                                       "PG",
                                       "DATABASE_URL="};
    for (size_t i = 0; i < TC_ARRAY_SIZE(drop); i++)
        if (strncmp(kv, drop[i], strlen(drop[i])) == 0)
            return false;
    return true;
}

/* A copy of the environment without what launcher_env_ok() refuses (the strings are shared
 * with environ; free only the array). NULL on ENOMEM. */
static char **launcher_env(void)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 1, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (launcher_env_ok(environ[i]))
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

static void reap_launcher(pid_t pid);

/* true if this process has one thread (/proc/self/stat's 20th field): a fork of it may go
 * on running any code, no other thread holding a lock the fork would inherit held. */
static bool single_threaded(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    int field = 2; /* the comm, which may hold spaces, ends at the last ')' */
    for (const char *p = strrchr(buf, ')'); p && *p; p++)
        if (*p == ' ' && ++field == 20)
            return strtol(p + 1, NULL, 10) == 1;
    return false;
}

int tc_find_trusted_program(const char *name, char *ret_path, size_t size)
{
    return tc_child_find_trusted(name, ret_path, size);
}

static int spawn_launcher(struct tc_launcher *l, int *ret_sock, pid_t *ret_pid)
{
    int sv[2];
    char fdarg[] = "3", maxarg[16], ppidarg[24], one[] = "1";
    enum { FIXED = 20, OPTIONAL_PAIRS = 10 }; /* (twice too small before: count them) */
    char *argv[FIXED + 2 * OPTIONAL_PAIRS + 1] = {"toolcage",
                                                  "launcher",
                                                  "--fd",
                                                  fdarg,
                                                  "--max",
                                                  maxarg,
                                                  "--state-dir",
                                                  l->state_dir,
                                                  "--ppid",
                                                  ppidarg,
                                                  "--pool",
                                                  l->pool,
                                                  "--pool-max",
                                                  l->pool_max,
                                                  "--pool-shrink-ms",
                                                  l->pool_shrink_ms,
                                                  "--warm",
                                                  l->warm,
                                                  "--warm-group-max",
                                                  l->warm_group_max};
    size_t n = FIXED;
    pid_t pid;
    _Static_assert(FIXED + 2 * OPTIONAL_PAIRS + 1 == 41, "argv: 20 fixed, 10 optional pairs, NULL");

    if (l->uid_registry) {
        argv[n++] = "--uid-registry";
        argv[n++] = l->uid_registry;
    }
    if (l->gvisor_platform) {
        argv[n++] = "--gvisor-platform";
        argv[n++] = l->gvisor_platform;
    }
    if (l->init_path) {
        argv[n++] = "--init";
        argv[n++] = l->init_path;
    }
    if (l->egress_ca_file) {
        argv[n++] = "--egress-ca";
        argv[n++] = l->egress_ca_file;
    }
    if (l->no_cgroup) {
        argv[n++] = "--no-cgroup";
        argv[n++] = one;
    }
    if (l->no_egress) {
        argv[n++] = "--no-egress";
        argv[n++] = one;
    }
    if (l->no_seccomp_notify) {
        argv[n++] = "--no-seccomp-notify";
        argv[n++] = one;
    }
    if (l->microvm_fast) {
        argv[n++] = "--microvm-fast";
        argv[n++] = one;
    }
    if (l->once) {
        argv[n++] = "--once";
        argv[n++] = one;
    }
    if (n >= sizeof(argv) / sizeof(argv[0]))
        abort(); /* an option added above without its room */
    argv[n] = NULL;

    snprintf(maxarg, sizeof(maxarg), "%u", l->max);
    snprintf(ppidarg, sizeof(ppidarg), "%ld", (long)getpid());
    char **envp =
        launcher_env(); /* built before fork: the child only calls async-signal-safe code */
    if (!envp)
        return -ENOMEM;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        int r = -errno;
        free(envp);
        return r;
    }
    pid = fork();
    if (pid < 0) {
        int r = -errno;
        close(sv[0]);
        close(sv[1]);
        free(envp);
        return r;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: we may be a fork of a threaded server. */
        sigset_t none;
        int nul, xfd = l->exe_fd;
        if (xfd >= 0 && xfd <= 4 && (xfd = fcntl(xfd, F_DUPFD, 5)) < 0)
            _exit(127);
        if (dup2(sv[1], 3) < 0)
            _exit(127);
        if (sv[1] == 3)
            fcntl(3, F_SETFD, 0);
        nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
        }
        /* the binary by the fd opened at start (4, closed by the exec) */
        if (xfd >= 0 && (dup2(xfd, 4) < 0 || fcntl(4, F_SETFD, FD_CLOEXEC) < 0))
            _exit(127);
        syscall(SYS_close_range, xfd >= 0 ? 5U : 4U, ~0U, 0U);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (l->no_exec) { /* a fork of a single-threaded caller (tc_launcher_start) */
            /* what an exec would not have passed on is wiped from our copy of the caller's
             * environment (the strings themselves: /proc/PID/environ shows them) */
            for (char **e = environ; e && *e; e++)
                if (!launcher_env_ok(*e))
                    explicit_bzero(*e, strlen(*e));
            for (size_t i = 0; i < n; i++) /* writable, as an exec's (the launcher blanks
                                              them; /proc/PID/cmdline is the caller's) */
                if (!(argv[i] = strdup(argv[i])))
                    _exit(127);
            if (xfd >= 0)
                close(4); /* (the binary we did not exec) */
            environ = envp;
            tc_child_set_binary_dir(l->bin_dir);
            /* named as an exec'd launcher would be (ps -C, top, the audits that look for
             * it); its cmdline stays the caller's */
            prctl(PR_SET_NAME, "toolcage-launch");
            _exit(tc_launcher_main((int)n, argv));
        }
        if (xfd >= 0)
            syscall(SYS_execveat, 4, "", argv, envp, AT_EMPTY_PATH);
        else
            execve(l->exe, argv, envp);
        _exit(127);
    }
    free(envp);
    close(sv[1]);
    *ret_sock = sv[0];
    *ret_pid = pid;
    return 0;
}

static void deliver(struct pending *p, json_t *result)
{
    if (p->went_us) /* (unlinked from l->pending: no one else sees p) */
        *p->went_us = p->go_us;
    p->cb(p->userdata, result);
    free(p);
}

static void slot_freed(struct tc_launcher *l)
{
    pthread_mutex_lock(&l->mu);
    void (*cb)(void *) = l->on_free;
    void *ud = l->on_free_ud;
    pthread_mutex_unlock(&l->mu);
    if (cb)
        cb(ud);
}

void tc_launcher_on_ask(struct tc_launcher *l, void (*cb)(void *ud, const char *id, json_t *ask),
                        void *ud)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->on_ask = cb;
    l->on_ask_ud = ud;
    pthread_mutex_unlock(&l->mu);
}

void tc_launcher_on_free(struct tc_launcher *l, void (*cb)(void *ud), void *ud)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->on_free = cb;
    l->on_free_ud = ud;
    pthread_mutex_unlock(&l->mu);
}

unsigned tc_launcher_free_slots(struct tc_launcher *l)
{
    if (!l)
        return 0;
    pthread_mutex_lock(&l->mu);
    unsigned n = !l->alive || l->stopping || l->in_flight + l->reserved >= l->max
                     ? 0
                     : l->max - l->in_flight - l->reserved;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* Fail every pending submission (launcher gone). Called with mu held; unlocks around callbacks. */
static void fail_all_locked(struct tc_launcher *l, const char *why)
{
    for (struct file_wait *w = l->file_waits; w; w = w->next)
        w->done = true; /* no answer: the operation's fate is unknown */
    pthread_cond_broadcast(&l->cv);
    struct pending *list = l->pending;
    l->pending = NULL;
    l->in_flight = 0;
    pthread_mutex_unlock(&l->mu);
    while (list) {
        struct pending *next = list->next;
        json_t *r = tc_result_error(list->id, why);
        deliver(list, r);
        json_decref(r);
        list = next;
    }
    pthread_mutex_lock(&l->mu);
}

static int wait_readable(int fd, int wake, int timeout_ms)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = wake, .events = POLLIN}};
    int n;
    do
        n = poll(p, 2, timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -ETIMEDOUT;
    if (p[1].revents)
        return -ECANCELED;
    return 0;
}

/* One launcher generation: spawn, HELLO, then results until EOF. */
/* The pending submission id, or NULL. Used on the reader thread only: an entry the launcher
 * knows of is removed only by its result, which comes later on this same thread, so the entry
 * outlives the use of what this returns. */
static struct pending *pending_find(struct tc_launcher *l, const char *id)
{
    struct pending *found = NULL;
    pthread_mutex_lock(&l->mu);
    for (struct pending *p = l->pending; p && !found; p = p->next)
        if (strcmp(p->id, id) == 0)
            found = p;
    pthread_mutex_unlock(&l->mu);
    return found;
}

/* TC_WIRE_ASK of a sandbox this client submitted: {"ask": n >= 0, "host": 1..253 bytes,
 * "port": 1..65535, "index"}, or nothing (the launcher is trusted, the proxy's text is not
 * taken on trust further than this). */
static void deliver_ask(struct tc_launcher *l, const char *id, const char *payload)
{
    json_t *j = payload ? json_loads(payload, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *n = json_object_get(j, "ask"), *host = json_object_get(j, "host"),
           *port = json_object_get(j, "port");
    bool mine = pending_find(l, id) != NULL;
    pthread_mutex_lock(&l->mu);
    void (*cb)(void *, const char *, json_t *) = l->on_ask;
    void *ud = l->on_ask_ud;
    pthread_mutex_unlock(&l->mu);
    json_t *t = json_object_get(j, "timeout_ms");
    char norm[TC_EGRESS_HOST_MAX + 1] = "";
    /* the host as the proxy normalises it (nothing else reaches reviewers' notices) */
    bool host_ok = json_is_string(host) && json_string_length(host) >= 1 &&
                   json_string_length(host) < sizeof(norm) &&
                   strlen(json_string_value(host)) == json_string_length(host);
    if (host_ok) {
        snprintf(norm, sizeof(norm), "%s", json_string_value(host));
        struct in6_addr a6;
        host_ok = inet_pton(AF_INET6, norm, &a6) == 1 || /* the proxy's canonical IPv6 text */
                  (tc_egress_host_normalise(norm, sizeof(norm)) == 0 &&
                   strcmp(norm, json_string_value(host)) == 0);
    }
    if (cb && mine && host_ok && json_is_integer(n) && json_integer_value(n) >= 0 &&
        json_integer_value(n) < TC_EGRESS_MAX_ASKS && json_is_integer(port) &&
        json_integer_value(port) >= 1 && json_integer_value(port) <= 65535 && json_is_integer(t) &&
        json_integer_value(t) >= 1000 && json_integer_value(t) <= 3600 * 1000)
        cb(ud, id, j);
    json_decref(j);
}

static void run_generation(struct tc_launcher *l)
{
    struct tc_wire_hdr h;
    char *payload = NULL;
    int sock = -1, r;
    pid_t pid = -1;

    if (l->first_pid > 0) { /* forked by tc_launcher_start */
        sock = l->first_sock, pid = l->first_pid, r = 0;
        l->first_sock = -1, l->first_pid = -1;
    } else {
        /* a launcher that is a fork of ours is not started again: this thread may not fork
         * and go on running our code (the caller's other threads' locks) */
        r = l->no_exec ? -EPIPE : spawn_launcher(l, &sock, &pid);
    }
    if (r == 0 && (r = wait_readable(sock, l->wake[0], HELLO_TIMEOUT_MS)) == 0) {
        r = tc_wire_recv(sock, &h, &payload);
        /* a launcher that exits with a message of ours unread (one that failed its setup,
         * handed a spec before its HELLO: tc_launcher_run_once) resets the connection: the
         * error comes first, once, then what it sent (its HELLO, with the cause) */
        if (r == -ECONNRESET)
            r = tc_wire_recv(sock, &h, &payload);
    }
    if (r == 0 && h.type != TC_WIRE_HELLO)
        r = -EBADMSG;
    json_t *hi = r == 0 && payload ? json_loads(payload, 0, NULL) : NULL;
    free(payload);
    payload = NULL;
    if (r == 0 && (!hi || json_object_get(hi, "error"))) {
        json_int_t e = json_integer_value(json_object_get(hi, "errno"));
        r = e > 0 && e < 4096 ? -(int)e : -EIO; /* the launcher's own cause, e.g. ENOSPC */
    }

    pthread_mutex_lock(&l->mu);
    l->spawns++;
    if (r == 0) {
        l->sock = sock;
        l->pid = pid;
        l->alive = true;
        json_decref(l->host_info);
        l->host_info = hi;
        hi = NULL;
    } else if (hi) {
        json_decref(l->host_info);
        l->host_info = hi; /* keep the launcher's error for host_info() */
        hi = NULL;
    }
    l->hello_done = true;
    l->hello_err = r;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);

    while (r == 0) {
        r = wait_readable(sock, l->wake[0], -1);
        if (r < 0)
            break;
        r = tc_wire_recv(sock, &h, &payload);
        if (r == -EBADMSG) {
            r = 0;
            continue;
        }
        if (r < 0)
            break;
        if (h.type == TC_WIRE_HELLO) {
            /* a later HELLO: the fields of the host info that changed (the egress proxy's pid
             * after it was started again, 0 after it died); only those a launcher may change
             * are taken */
            json_t *upd = payload ? json_loads(payload, 0, NULL) : NULL;
            json_t *epid = json_object_get(upd, "egress_pid");
            pthread_mutex_lock(&l->mu);
            if (json_is_integer(epid) && json_integer_value(epid) >= 0 &&
                json_integer_value(epid) <= INT_MAX && l->host_info)
                json_object_set(l->host_info, "egress_pid", epid);
            pthread_mutex_unlock(&l->mu);
            json_decref(upd);
        } else if (h.type == TC_WIRE_READY) {
            /* A held sandbox is set up: its owner says go (or cancels) when it is ready. */
            struct pending *p = pending_find(l, h.id);
            if (p && p->ready)
                p->ready(p->userdata, h.id);
        } else if (h.type == TC_WIRE_CHUNK) {
            struct pending *p = pending_find(l, h.id);
            if (p && p->chunk && payload && h.len >= 2 && (payload[0] >= '1' && payload[0] <= '5'))
                p->chunk(p->userdata, payload[0] - '0', payload + 1, (size_t)h.len - 1);
        } else if (h.type == TC_WIRE_ASK) {
            deliver_ask(l, h.id, payload);
        } else if (h.type == TC_WIRE_FILE_DONE) {
            json_t *head = payload ? json_loadb(payload, strcspn(payload, "\n"), 0, NULL) : NULL;
            uint64_t req = (uint64_t)json_integer_value(json_object_get(head, "req"));
            json_decref(head);
            pthread_mutex_lock(&l->mu);
            for (struct file_wait *w = l->file_waits; w; w = w->next) {
                if (w->req == req && !w->done) {
                    w->answer = payload;
                    w->len = (size_t)h.len;
                    w->done = true;
                    payload = NULL;
                    pthread_cond_broadcast(&l->cv);
                    break;
                }
            }
            pthread_mutex_unlock(&l->mu);
        } else if (h.type == TC_WIRE_RESULT) {
            json_t *res = payload ? json_loads(payload, 0, NULL) : NULL;
            struct pending **pp, *p = NULL;
            pthread_mutex_lock(&l->mu);
            for (pp = &l->pending; *pp; pp = &(*pp)->next) {
                if (strcmp((*pp)->id, h.id) == 0) {
                    p = *pp;
                    *pp = p->next;
                    l->in_flight--;
                    break;
                }
            }
            pthread_mutex_unlock(&l->mu);
            if (p) {
                if (!res)
                    res = tc_result_error(h.id, "launcher sent an unreadable result");
                deliver(p, res);
                slot_freed(l);
            }
            json_decref(res);
        }
        free(payload);
        payload = NULL;
    }

    pthread_mutex_lock(&l->mu);
    l->alive = false;
    l->sock = -1;
    fail_all_locked(l, l->stopping ? "launcher stopped" : "launcher died");
    pthread_mutex_unlock(&l->mu);
    if (sock >= 0) {
        pthread_mutex_lock(&l->send_mu);
        if (r == -ECANCELED) /* stopping: ask politely, then wait */
            (void)tc_wire_send(sock, TC_WIRE_SHUTDOWN, NULL, NULL, 0);
        close(sock);
        pthread_mutex_unlock(&l->send_mu);
    }
    if (pid > 0)
        reap_launcher(pid);
    json_decref(hi);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for the launcher's exit (it tears its sandboxes down first): on a pidfd, so that the
 * caller goes on the moment it is gone (`toolcage exec` ends then); SIGKILL after 3 s. */
static void reap_launcher(pid_t pid)
{
    int st, pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int64_t t0 = mono_ms(), now;
    bool killed = false;
    while ((now = mono_ms()) - t0 < 5000) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        if (!killed && now - t0 >= 3000) {
            kill(pid, SIGKILL);
            killed = true;
        }
        int wait_ms = (int)((killed ? 5000 : 3000) - (now - t0));
        if (wait_ms > 100)
            wait_ms = 100;
        if (pfd >= 0)
            (void)poll(&(struct pollfd){.fd = pfd, .events = POLLIN}, 1, wait_ms > 0 ? wait_ms : 1);
        else
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (pfd >= 0)
        close(pfd);
    if (waitpid(pid, &st, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
}

static void *reader_main(void *arg)
{
    struct tc_launcher *l = arg;
    unsigned backoff_ms = 50;

    for (;;) {
        pthread_mutex_lock(&l->mu);
        bool stop = l->stopping;
        pthread_mutex_unlock(&l->mu);
        if (stop)
            break;
        run_generation(l);
        pthread_mutex_lock(&l->mu);
        stop = l->stopping || l->no_exec || l->once; /* (once: it goes after its result) */
        if (!stop && l->spawns > 0)
            l->restarts++;
        pthread_mutex_unlock(&l->mu);
        if (stop)
            break;
        struct pollfd p = {.fd = l->wake[0], .events = POLLIN};
        (void)poll(&p, 1, (int)backoff_ms);
        backoff_ms = backoff_ms < 5000 ? backoff_ms * 2 : 5000;
    }
    return NULL;
}

/* The launcher object, its options checked; a launcher that is a fork of ours is forked
 * (l->first_sock, l->first_pid). No thread yet: launcher_begin(). */
static int launcher_open(const struct tc_launcher_options *opts, bool once,
                         struct tc_launcher **ret_launcher)
{
    struct tc_launcher *l;
    int r;

    if (!opts || !ret_launcher)
        return -EINVAL;
    l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->sock = -1;
    l->exe_fd = -1;
    l->wake[0] = l->wake[1] = -1;
    l->first_sock = l->first_pid = -1;
    /* (never with an egress proxy: a fork of this launcher, it would hold the caller's
     * memory while it parses what sandboxes send) */
    l->no_exec = opts->no_exec && opts->no_egress && single_threaded();
    l->max = opts->max_sandboxes ? opts->max_sandboxes : 16;
    if (l->max > 1024)
        l->max = 1024;
    /* toolcage-launcher beside us if it is installed (it starts in a few milliseconds: only
     * the libraries it uses) and root's (or ours) alone, else this very binary's `launcher`
     * subcommand */
    char found[PATH_MAX];
    l->exe_fd = opts->exe ? -1 : tc_find_trusted_program("toolcage-launcher", found, sizeof(found));
    l->exe = strdup(opts->exe ? opts->exe : l->exe_fd >= 0 ? found : "/proc/self/exe");
    if (l->no_exec) { /* the folder of what an exec would run (-1: run it after all) */
        char real[PATH_MAX], *slash;
        if (l->exe && realpath(l->exe, real) && (slash = strrchr(real, '/')) && slash != real) {
            *slash = '\0';
            l->bin_dir = strdup(real);
        }
        l->no_exec = l->bin_dir != NULL;
    }
    l->state_dir = strdup(opts->state_dir ? opts->state_dir : "/run/toolcage");
    if (!l->exe || !l->state_dir || l->state_dir[0] != '/') {
        r = !l->exe || !l->state_dir ? -ENOMEM : -EINVAL;
        goto fail;
    }
    if (opts->pool < TC_POOL_NONE || opts->pool > TC_POOL_MAX || opts->pool_max < TC_POOL_NONE ||
        opts->pool_max > TC_POOL_MAX || opts->warm < TC_POOL_NONE || opts->warm > TC_POOL_MAX ||
        opts->warm_group_max < 0 || opts->warm_group_max > TC_POOL_MAX) {
        r = -EINVAL;
        goto fail;
    }
    int pool = opts->pool == TC_POOL_NONE ? 0 : opts->pool ? opts->pool : 2;
    int pool_max = opts->pool_max == TC_POOL_NONE ? 0
                   : opts->pool_max               ? opts->pool_max
                   : opts->pool == TC_POOL_NONE   ? 0
                                                  : 8;
    snprintf(l->pool, sizeof(l->pool), "%d", pool);
    snprintf(l->pool_max, sizeof(l->pool_max), "%d", pool_max < pool ? pool : pool_max);
    snprintf(l->pool_shrink_ms, sizeof(l->pool_shrink_ms), "%u", opts->pool_shrink_ms);
    snprintf(l->warm, sizeof(l->warm), "%d",
             opts->warm == TC_POOL_NONE ? 0
             : opts->warm               ? opts->warm
                                        : 8);
    snprintf(l->warm_group_max, sizeof(l->warm_group_max), "%d",
             opts->warm_group_max ? opts->warm_group_max : 4);
    l->no_cgroup = opts->no_cgroup;
    l->no_seccomp_notify = opts->no_seccomp_notify;
    l->no_egress = opts->no_egress;
    l->microvm_fast = opts->microvm_fast;
    l->once = once;
    if ((opts->uid_registry && !(l->uid_registry = strdup(opts->uid_registry))) ||
        (opts->gvisor_platform && !(l->gvisor_platform = strdup(opts->gvisor_platform))) ||
        (opts->init_path && !(l->init_path = strdup(opts->init_path))) ||
        (opts->egress_ca_file && !(l->egress_ca_file = strdup(opts->egress_ca_file)))) {
        r = -ENOMEM;
        goto fail;
    }
    if (pipe2(l->wake, O_CLOEXEC) < 0) {
        r = -errno;
        goto fail;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->send_mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    /* The reader thread spawns the launcher: PR_SET_PDEATHSIG follows the thread that
     * forked, so the forker must live as long as the launcher object. A launcher that is a
     * fork of ours is forked here, while this thread is the process's only one (the caller's
     * thread: it lives as long as the launcher object, in toolcage exec the main thread). */
    if (l->no_exec && (r = spawn_launcher(l, &l->first_sock, &l->first_pid)) < 0)
        goto fail_sync;
    *ret_launcher = l;
    return 0;
fail_sync:
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->send_mu);
    pthread_cond_destroy(&l->cv);
fail:
    if (l->wake[0] >= 0) {
        close(l->wake[0]);
        close(l->wake[1]);
    }
    if (l->exe_fd >= 0)
        close(l->exe_fd);
    free(l->exe);
    free(l->bin_dir);
    free(l->state_dir);
    free(l->uid_registry);
    free(l->gvisor_platform);
    free(l->egress_ca_file);
    free(l->init_path);
    free(l);
    return r;
}

/* The reader thread (it spawns the launcher, or takes the one launcher_open forked), then,
 * if hello, its HELLO. On failure l is left to the caller to stop (tc_launcher_stop reaps a
 * launcher launcher_open forked). */
static int launcher_read(struct tc_launcher *l, bool hello)
{
    int r = -pthread_create(&l->reader, NULL, reader_main, l);
    if (r < 0)
        return r;
    l->reader_started = true;
    if (!hello)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += HELLO_TIMEOUT_MS / 1000 + 1;
    pthread_mutex_lock(&l->mu);
    while (!l->hello_done)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
            break;
    r = l->hello_done ? l->hello_err : -ETIMEDOUT;
    pthread_mutex_unlock(&l->mu);
    return r;
}

/* launcher_read; on failure l is stopped (freed) */
static int launcher_begin(struct tc_launcher *l, bool hello)
{
    int r = launcher_read(l, hello);
    if (r < 0)
        tc_launcher_stop(l);
    return r;
}

int tc_launcher_start(const struct tc_launcher_options *opts, struct tc_launcher **ret_launcher)
{
    struct tc_launcher *l;
    int r = launcher_open(opts, false, &l);
    if (r == 0 && (r = launcher_begin(l, true)) == 0)
        *ret_launcher = l;
    return r;
}

int tc_launcher_reserve(struct tc_launcher *l)
{
    int r = 0;
    if (!l)
        return -EPIPE;
    pthread_mutex_lock(&l->mu);
    if (!l->alive || l->stopping)
        r = -EPIPE;
    else if (l->in_flight + l->reserved >= l->max)
        r = -EAGAIN;
    else
        l->reserved++;
    pthread_mutex_unlock(&l->mu);
    return r;
}

void tc_launcher_unreserve(struct tc_launcher *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    if (l->reserved > 0)
        l->reserved--;
    pthread_mutex_unlock(&l->mu);
    slot_freed(l);
}

int tc_launcher_submit(struct tc_launcher *l, json_t *spec, tc_launcher_cb cb, void *userdata)
{
    struct tc_launcher_job job = {.done = cb, .userdata = userdata};
    return tc_launcher_submit_job(l, spec, &job);
}

/* A submission's pending entry and its JSON (*ret_text, malloc'ed). 0, -EINVAL, -ENOMEM. */
static int pending_new(json_t *spec, const struct tc_launcher_job *job, struct pending **ret_p,
                       char **ret_text)
{
    struct tc_spec parsed;
    *ret_p = NULL;
    *ret_text = NULL;
    if (!job || !job->done || tc_spec_parse(spec, &parsed, NULL, 0) < 0)
        return -EINVAL;
    /* A held program waits for tc_launcher_go(): only with someone to say it. */
    bool hold = parsed.hold;
    struct pending *p = calloc(1, sizeof(*p));
    if (p)
        snprintf(p->id, sizeof(p->id), "%s", parsed.id);
    tc_spec_release(&parsed);
    if (hold != (job->ready != NULL)) {
        free(p);
        return -EINVAL;
    }
    char *s = p ? json_dumps(spec, JSON_COMPACT) : NULL;
    if (!s) {
        free(p);
        return -ENOMEM;
    }
    if (strlen(s) > TC_WIRE_MAX_PAYLOAD) {
        free(p);
        free(s);
        return -EINVAL;
    }
    p->cb = job->done;
    p->ready = job->ready;
    p->chunk = job->chunk;
    p->userdata = job->userdata;
    p->went_us = job->went_us;
    *ret_p = p;
    *ret_text = s;
    return 0;
}

int tc_launcher_submit_job(struct tc_launcher *l, json_t *spec, const struct tc_launcher_job *job)
{
    struct pending *p = NULL;
    char *s = NULL;
    int r;
    bool reserved = job && job->reserved;

    if (!l) {
        r = -EINVAL;
        goto out;
    }
    if ((r = pending_new(spec, job, &p, &s)) < 0)
        goto out;
    pthread_mutex_lock(&l->mu);
    if (reserved && l->reserved > 0)
        l->reserved--; /* this submission takes the promised slot, whatever happens next */
    reserved = false;
    if (!l->alive || l->stopping) {
        pthread_mutex_unlock(&l->mu);
        r = -EPIPE;
        goto out;
    }
    if (!(job->reserved) && l->in_flight + l->reserved >= l->max) {
        pthread_mutex_unlock(&l->mu);
        r = -EAGAIN;
        goto out;
    }
    for (struct pending *q = l->pending; q; q = q->next)
        if (strcmp(q->id, p->id) == 0) {
            pthread_mutex_unlock(&l->mu);
            r = -EINVAL; /* duplicate id in flight */
            goto out;
        }
    /* Registered before sending: the result may arrive before tc_wire_send returns. */
    struct pending *mine = p;
    p->next = l->pending;
    l->pending = p;
    l->in_flight++;
    p = NULL;
    int sock = l->sock;
    pthread_mutex_lock(&l->send_mu);
    pthread_mutex_unlock(&l->mu);
    r = tc_wire_send(sock, TC_WIRE_SUBMIT, mine->id, s, strlen(s));
    pthread_mutex_unlock(&l->send_mu);
    if (r < 0) {
        /* Still pending: take it back and report the failure. Gone: the reader already
         * failed it (launcher died), so its callback ran and the submission counts. */
        bool found = false;
        pthread_mutex_lock(&l->mu);
        for (struct pending **pp = &l->pending; *pp; pp = &(*pp)->next)
            if (*pp == mine) {
                *pp = mine->next;
                l->in_flight--;
                found = true;
                break;
            }
        pthread_mutex_unlock(&l->mu);
        if (found) {
            free(mine);
            slot_freed(l);
            r = -EPIPE;
        } else {
            r = 0;
        }
    }
out:
    if (reserved)
        tc_launcher_unreserve(l);
    free(p);
    free(s);
    return r;
}

/* One message about a sandbox to the launcher. 0, -EINVAL, -EPIPE. */
static int send_about(struct tc_launcher *l, enum tc_wire_type type, const char *id,
                      const void *data, size_t len)
{
    int r;
    if (!l || !tc_spec_id_valid(id))
        return -EINVAL;
    pthread_mutex_lock(&l->mu);
    if (!l->alive) {
        pthread_mutex_unlock(&l->mu);
        return -EPIPE;
    }
    int sock = l->sock;
    pthread_mutex_lock(&l->send_mu);
    pthread_mutex_unlock(&l->mu);
    r = tc_wire_send(sock, type, id, data, len);
    pthread_mutex_unlock(&l->send_mu);
    return r == -EMSGSIZE || r == -E2BIG ? -EINVAL : r < 0 ? -EPIPE : 0;
}

int tc_launcher_verdict(struct tc_launcher *l, const char *id, long ask, const char *verdict)
{
    json_t *j = json_pack("{s:I, s:s}", "ask", (json_int_t)ask, "verdict", verdict);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    int r = text ? send_about(l, TC_WIRE_VERDICT, id, text, strlen(text)) : -ENOMEM;
    free(text);
    return r;
}

int tc_launcher_go(struct tc_launcher *l, const char *id)
{
    int64_t now = tc_now_us();
    if (!l || !id)
        return -EINVAL;
    pthread_mutex_lock(&l->mu);
    for (struct pending *p = l->pending; p; p = p->next)
        if (strcmp(p->id, id) == 0) {
            p->go_us = now;
            break;
        }
    pthread_mutex_unlock(&l->mu);
    return send_about(l, TC_WIRE_GO, id, NULL, 0);
}

int tc_launcher_cancel(struct tc_launcher *l, const char *id)
{
    return send_about(l, TC_WIRE_CANCEL, id, NULL, 0);
}

int tc_launcher_input(struct tc_launcher *l, const char *id, const void *data, size_t len)
{
    return send_about(l, TC_WIRE_INPUT, id, data, len);
}

int tc_launcher_interrupt(struct tc_launcher *l, const char *id)
{
    return send_about(l, TC_WIRE_INTERRUPT, id, NULL, 0);
}

int tc_launcher_budget(struct tc_launcher *l, const char *id, int64_t cpu_ms, const char *call)
{
    char msg[96];
    int n = snprintf(msg, sizeof(msg), "%lld %s", (long long)(cpu_ms > 0 ? cpu_ms : 0), call);
    if (n < 0 || (size_t)n >= sizeof(msg) || strchr(call, ' ') || !*call)
        return -EINVAL;
    return send_about(l, TC_WIRE_BUDGET, id, msg, (size_t)n);
}

int tc_launcher_file(struct tc_launcher *l, const char *id, json_t *op, const void *data,
                     size_t len, int timeout_ms, json_t **ret_head, char **ret_data,
                     size_t *ret_len)
{
    struct file_wait w = {0};
    *ret_head = NULL;
    pthread_mutex_lock(&l->mu);
    w.req = ++l->file_seq;
    w.next = l->file_waits;
    l->file_waits = &w;
    pthread_mutex_unlock(&l->mu);

    int r = -ENOMEM;
    char *line = json_object_set_new(op, "req", json_integer((json_int_t)w.req)) == 0
                     ? json_dumps(op, JSON_COMPACT)
                     : NULL;
    size_t n = line ? strlen(line) : 0;
    char *msg = line ? malloc(n + 1 + len) : NULL;
    if (msg) {
        memcpy(msg, line, n);
        msg[n] = '\n';
        if (len)
            memcpy(msg + n + 1, data, len);
        r = send_about(l, TC_WIRE_FILE, id, msg, n + 1 + len);
    }
    free(msg);
    free(line);

    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&l->mu);
    while (r == 0 && !w.done)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &until) == ETIMEDOUT)
            r = -ETIMEDOUT;
    for (struct file_wait **pp = &l->file_waits; *pp; pp = &(*pp)->next)
        if (*pp == &w) {
            *pp = w.next;
            break;
        }
    pthread_mutex_unlock(&l->mu);
    if (r == 0 && !w.answer)
        r = -EPIPE;
    if (r == 0) {
        size_t hl = strcspn(w.answer, "\n");
        *ret_head = json_loadb(w.answer, hl, 0, NULL);
        r = *ret_head ? 0 : -EPROTO;
        size_t dl = hl < w.len ? w.len - hl - 1 : 0;
        if (r == 0 && ret_data) {
            *ret_data = malloc(dl + 1);
            if (*ret_data) {
                memcpy(*ret_data, w.answer + hl + 1, dl);
                (*ret_data)[dl] = '\0';
                *ret_len = dl;
            } else {
                json_decref(*ret_head);
                *ret_head = NULL;
                r = -ENOMEM;
            }
        }
    }
    free(w.answer);
    return r;
}

struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *result;
    bool done;
    int64_t done_ms; /* wall clock when the result came */
};

static void sync_cb(void *userdata, json_t *result)
{
    struct sync_wait *w = userdata;
    pthread_mutex_lock(&w->mu);
    w->result = json_incref(result);
    w->done = true;
    w->done_ms = tc_wall_ms();
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int tc_launcher_run_sync(struct tc_launcher *l, json_t *spec, json_t **ret_result)
{
    return tc_launcher_run_sync_while(l, spec, NULL, NULL, ret_result, NULL);
}

int tc_launcher_run_sync_while(struct tc_launcher *l, json_t *spec, void (*meanwhile)(void *),
                               void *userdata, json_t **ret_result, int64_t *ret_done_ms)
{
    struct sync_wait w = {.result = NULL, .done = false};
    int r;

    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    r = tc_launcher_submit(l, spec, sync_cb, &w);
    if (r == 0 && meanwhile)
        meanwhile(userdata);
    if (r == 0) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        *ret_result = w.result;
        if (ret_done_ms)
            *ret_done_ms = w.done_ms;
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return r;
}

int tc_launcher_open_once(const struct tc_launcher_options *opts, struct tc_launcher **ret_launcher)
{
    return launcher_open(opts, true, ret_launcher);
}

void tc_launcher_dismiss(struct tc_launcher *l)
{
    if (l && l->first_pid > 0 && !l->reader_started && l->first_sock >= 0) {
        close(l->first_sock);
        l->first_sock = -1;
    }
}

int tc_launcher_run_once(struct tc_launcher *l, json_t *spec, void (*meanwhile)(void *),
                         void *userdata, json_t **ret_result, int64_t *ret_done_ms)
{
    int r;
    if (!l || !l->once || l->reader_started || (l->first_pid > 0 && l->first_sock < 0))
        return -EINVAL;      /* one run, in a launcher opened for it (and not dismissed) */
    if (l->first_pid <= 0) { /* exec'd: started, then used as any other */
        if ((r = launcher_read(l, true)) < 0)
            return r;
        return tc_launcher_run_sync_while(l, spec, meanwhile, userdata, ret_result, ret_done_ms);
    }
    /* A fork of ours, and no other thread yet: the spec goes into its socket now, and the
     * launcher reads it once it has set itself up and said HELLO (its setup, this JSON and
     * meanwhile overlap, instead of one waiting for the other). */
    struct sync_wait w = {.result = NULL, .done = false};
    struct tc_launcher_job job = {.done = sync_cb, .userdata = &w};
    struct pending *p;
    char *s;
    if ((r = pending_new(spec, &job, &p, &s)) < 0)
        return r;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    l->pending = p;
    l->in_flight = 1;
    bool sent = tc_wire_send(l->first_sock, TC_WIRE_SUBMIT, p->id, s, strlen(s)) == 0;
    free(s);
    if (!sent) { /* gone already (its setup failed): its HELLO still tells why */
        l->pending = NULL;
        l->in_flight = 0;
        free(p);
    }
    if ((r = launcher_read(l, !sent)) == 0) {
        if (sent && meanwhile)
            meanwhile(userdata);
        /* the result, or an error one when the launcher dies (the reader fails what is
         * pending), in its setup too: then its cause is ours to return */
        pthread_mutex_lock(&w.mu);
        while (sent && !w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        pthread_mutex_lock(&l->mu);
        r = !sent ? -EPIPE : l->hello_done ? l->hello_err : -EPIPE;
        pthread_mutex_unlock(&l->mu);
        if (r == 0) {
            *ret_result = w.result;
            w.result = NULL;
            if (ret_done_ms)
                *ret_done_ms = w.done_ms;
        }
    } /* (else no reader runs, or none was sent: what is pending is tc_launcher_stop's) */
    json_decref(w.result);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return r;
}

bool tc_launcher_alive(struct tc_launcher *l)
{
    bool a;
    if (!l)
        return false;
    pthread_mutex_lock(&l->mu);
    a = l->alive;
    pthread_mutex_unlock(&l->mu);
    return a;
}

unsigned tc_launcher_in_flight(struct tc_launcher *l)
{
    unsigned n;
    if (!l)
        return 0;
    pthread_mutex_lock(&l->mu);
    n = l->in_flight;
    pthread_mutex_unlock(&l->mu);
    return n;
}

unsigned tc_launcher_restarts(struct tc_launcher *l)
{
    unsigned n;
    if (!l)
        return 0;
    pthread_mutex_lock(&l->mu);
    n = l->restarts;
    pthread_mutex_unlock(&l->mu);
    return n;
}

json_t *tc_launcher_host_info(struct tc_launcher *l)
{
    json_t *h;
    if (!l)
        return NULL;
    pthread_mutex_lock(&l->mu);
    h = l->host_info ? json_deep_copy(l->host_info) : json_object();
    pthread_mutex_unlock(&l->mu);
    return h;
}

int tc_launcher_pid(struct tc_launcher *l)
{
    int pid;
    if (!l)
        return 0;
    pthread_mutex_lock(&l->mu);
    pid = l->alive ? (int)l->pid : 0;
    pthread_mutex_unlock(&l->mu);
    return pid;
}

void tc_launcher_stop(struct tc_launcher *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_mutex_unlock(&l->mu);
    if (l->wake[1] >= 0)
        (void)!write(l->wake[1], "x", 1);
    if (l->reader_started)
        pthread_join(l->reader, NULL);
    if (l->first_pid > 0) { /* forked by the start, stopped before the reader took it */
        if (l->first_sock >= 0)
            close(l->first_sock);
        reap_launcher(l->first_pid);
    }
    for (struct pending *p = l->pending, *next; p; p = next) { /* (no reader ever ran) */
        next = p->next;
        free(p);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->send_mu);
    pthread_cond_destroy(&l->cv);
    close(l->wake[0]);
    close(l->wake[1]);
    json_decref(l->host_info);
    if (l->exe_fd >= 0)
        close(l->exe_fd);
    free(l->exe);
    free(l->bin_dir);
    free(l->state_dir);
    free(l->uid_registry);
    free(l->gvisor_platform);
    free(l->egress_ca_file);
    free(l->init_path);
    free(l);
}
