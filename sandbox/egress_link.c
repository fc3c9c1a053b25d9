#include "sandbox/egress_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/egress.h"
#include "sandbox/egress_proto.h"
#include "sandbox/egress_rules.h"
#include "sandbox/egress_tls.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"

struct parked {
    uint64_t handle;
    char id[72];
    json_t *result;
    int64_t deadline_ms;
};

struct tc_egress_link {
    int sock;
    pid_t pid;
    char *ca_file;      /* for a proxy started again (respawn) */
    int64_t respawn_ms; /* not before (one start a second: a proxy that cannot start) */
    int self_netns;     /* the launcher's own network namespace, to come back to */
    int epfd;
    uint64_t epdata;
    struct tc_egress_handlers h;
    uint64_t next_handle;
    uint64_t gen_first; /* the running proxy's first handle: those before were a dead one's */
    struct parked *parked;
    size_t n_parked, cap_parked;
};

static void reap(struct tc_egress_link *l);

/* Start the proxy on a new socket pair. At the launcher's start (exec false): a fork that
 * runs it, which holds a copy of the launcher's memory as it is then, before any sandbox's
 * data. Again after it died (exec true): a fork that execs this program as `launcher
 * --egress-proxy PPID` (every program that embeds the launcher dispatches `launcher` to
 * tc_launcher_main), so that the new proxy holds nothing of the launcher's memory as it is
 * now (running sandboxes' specs, secrets included). */
static int spawn(struct tc_egress_link *l, bool exec)
{
    int sv[2];
    pid_t ppid = getpid(), pid;
    char ppid_s[24];
    snprintf(ppid_s, sizeof(ppid_s), "%d", (int)ppid);
    char *argv[] = {
        "toolcage", "launcher", "--egress-proxy", ppid_s, l->ca_file ? "--egress-ca" : NULL,
        l->ca_file, NULL};

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return -e;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != ppid)
            _exit(1);
        if (dup2(sv[1], 3) < 0) /* sv[1] > 3: the launcher's own socket is 3; not cloexec */
            _exit(1);
        syscall(SYS_close_range, 4U, ~0U, 0U);
        if (!exec)
            _exit(tc_egress_run(3, ppid, l->ca_file));
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    l->sock = sv[0];
    l->pid = pid;
    l->gen_first = l->next_handle + 1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = l->epdata};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->sock, &ev) < 0) {
        int e = errno;
        reap(l);
        return -e;
    }
    return 0;
}

/* The proxy again, after it died (spawn, exec'd): at most one start a second, so that a
 * proxy that cannot start is not started in a loop. */
static int respawn(struct tc_egress_link *l)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (now < l->respawn_ms)
        return -EAGAIN;
    l->respawn_ms = now + 1000;
    return spawn(l, true);
}

/* The proxy is gone: every handle so far was a dead proxy's. */
static void reap(struct tc_egress_link *l)
{
    if (l->sock >= 0)
        close(l->sock);
    l->sock = -1;
    l->gen_first = l->next_handle + 1;
    if (l->pid > 0) {
        kill(l->pid, SIGKILL);
        while (waitpid(l->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    l->pid = 0;
}

bool tc_egress_available(void)
{
    return tc_egress_run && tc_tls_ca_new && tc_tls_ca_bundle_b64;
}

int tc_egress_link_new(int epfd, uint64_t epdata, const char *ca_file,
                       const struct tc_egress_handlers *handlers, struct tc_egress_link **ret)
{
    if (!tc_egress_available())
        return -ENOTSUP;
    struct tc_egress_link *l = calloc(1, sizeof(*l));
    int r;

    if (!l)
        return -ENOMEM;
    l->sock = -1;
    l->epfd = epfd;
    l->epdata = epdata;
    l->h = *handlers;
    l->self_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (l->self_netns < 0) {
        r = -errno;
        free(l);
        return r;
    }
    r = ca_file && !(l->ca_file = strdup(ca_file)) ? -ENOMEM : spawn(l, false);
    if (r < 0) {
        close(l->self_netns);
        free(l->ca_file);
        free(l);
        return r;
    }
    *ret = l;
    return 0;
}

static void deliver_one(struct tc_egress_link *l, struct parked *p, json_t *network,
                        json_int_t dropped, const char *error)
{
    if (p->result) {
        json_object_set_new(p->result, "network", network ? network : json_array());
        json_object_set_new(p->result, "network_dropped", json_integer(dropped));
        if (error)
            json_object_set_new(p->result, "network_error", json_string(error));
    } else {
        json_decref(network);
    }
    l->h.deliver(l->h.userdata, p->id, p->result);
    p->result = NULL;
}

/* (deliver hands results to the server: it never parks, attaches or closes here) */
static void flush_all(struct tc_egress_link *l, const char *error)
{
    for (size_t i = 0; i < l->n_parked; i++)
        deliver_one(l, &l->parked[i], NULL, 0, error);
    l->n_parked = 0;
}

void tc_egress_link_free(struct tc_egress_link *l)
{
    if (!l)
        return;
    reap(l);
    for (size_t i = 0; i < l->n_parked; i++)
        json_decref(l->parked[i].result);
    free(l->parked);
    if (l->self_netns >= 0)
        close(l->self_netns);
    free(l->ca_file);
    free(l);
}

pid_t tc_egress_link_pid(const struct tc_egress_link *l)
{
    return l ? l->pid : 0;
}

/* A listener on 127.0.0.1:3128 inside pid's network namespace. */
static int make_listener(struct tc_egress_link *l, pid_t pid)
{
    char path[64];
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(TC_EGRESS_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    _cleanup_close_ int ns = -1, fd = -1;
    int r = 0;

    snprintf(path, sizeof(path), "/proc/%ld/ns/net", (long)pid);
    ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0)
        return -errno;
    if (setns(ns, CLONE_NEWNET) < 0)
        return -errno;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        r = -errno;
    /* Back home before anything else can happen: a launcher left in a sandbox's network
     * namespace would hand that namespace to every later proxy listener. */
    if (setns(l->self_netns, CLONE_NEWNET) < 0)
        abort();
    if (r < 0)
        return r;
    /* The sandbox's lo is still down (PID 1 brings it up): binding works regardless. */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0)
        return -errno;
    return tc_steal_fd(&fd);
}

int tc_egress_link_attach(struct tc_egress_link *l, pid_t pid, json_t *allow, int64_t ask_ms,
                          bool ask_private, json_t *tls, uint64_t *ret_handle)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *payload = NULL;
    uint64_t handle;
    int r;

    if (!l)
        return -ENETUNREACH; /* no proxy: see tc_egress_link_new() */
    if (l->sock < 0 && respawn(l) < 0)
        return -ENETUNREACH; /* it died, and was started again less than a second ago */
    fd = make_listener(l, pid);
    if (fd < 0)
        return fd;
    json_t *add = json_pack("{s:O, s:I, s:b}", "allow", allow, "ask_ms", (json_int_t)ask_ms,
                            "ask_private", ask_private);
    if (add && tls && json_object_update(add, tls) < 0) {
        json_decref(add);
        add = NULL;
    }
    payload = add ? json_dumps(add, JSON_COMPACT) : NULL;
    json_decref(add);
    if (!payload)
        return -ENOMEM;
    handle = ++l->next_handle;
    r = tc_eg_send(l->sock, TC_EG_ADD, handle, payload, strlen(payload), fd);
    if (r == -EPIPE || r == -ECONNRESET) {
        /* it died and the loop has not read its end yet: what it sent before it died is
         * read now (its reports delivered, its parked results told it died), then a new
         * one, which gets this sandbox under a handle of its own */
        tc_egress_link_on_readable(l);
        if (l->sock >= 0) { /* (its end not marked closed for reading yet) */
            reap(l);
            flush_all(l, "egress proxy died");
        }
        if (respawn(l) == 0) {
            handle = ++l->next_handle;
            r = tc_eg_send(l->sock, TC_EG_ADD, handle, payload, strlen(payload), fd);
        } else {
            r = -ENETUNREACH; /* started again less than a second ago */
        }
    }
    explicit_bzero(payload, strlen(payload)); /* the CA key and the credentials */
    if (r < 0)
        return r;
    *ret_handle = handle;
    return 0;
}

int tc_egress_link_verdict(struct tc_egress_link *l, uint64_t handle, const char *json)
{
    if (!l || l->sock < 0 || !handle || handle < l->gen_first)
        return -ENETUNREACH;
    return tc_eg_send(l->sock, TC_EG_VERDICT, handle, json, strlen(json), -1);
}

void tc_egress_link_close(struct tc_egress_link *l, uint64_t handle)
{
    if (l && l->sock >= 0 && handle && handle >= l->gen_first) /* (a dead proxy's: gone) */
        (void)tc_eg_send(l->sock, TC_EG_CLOSE, handle, NULL, 0, -1);
}

void tc_egress_link_park(struct tc_egress_link *l, uint64_t handle, const char *id, json_t *result,
                         int64_t deadline_ms)
{
    struct parked p = {.handle = handle, .result = result, .deadline_ms = deadline_ms};
    snprintf(p.id, sizeof(p.id), "%s", id);
    if (handle < l->gen_first) { /* its proxy died (a new one, if any, never knew it) */
        deliver_one(l, &p, NULL, 0, "egress proxy died");
        return;
    }
    if (l->sock < 0) {
        deliver_one(l, &p, NULL, 0, "egress proxy is not running");
        return;
    }
    if (l->n_parked == l->cap_parked) {
        size_t cap = l->cap_parked ? l->cap_parked * 2 : 16;
        struct parked *n = realloc(l->parked, cap * sizeof(*n));
        if (!n) {
            deliver_one(l, &p, NULL, 0, "out of memory");
            return;
        }
        l->parked = n;
        l->cap_parked = cap;
    }
    l->parked[l->n_parked++] = p;
}

static bool str_ok(json_t *v, size_t max)
{
    return json_is_string(v) && json_string_length(v) <= max &&
           strlen(json_string_value(v)) == json_string_length(v);
}

/* The proxy parses untrusted traffic: rebuild its report field by field. */
static json_t *validated_attempts(json_t *root, json_int_t *ret_dropped)
{
    json_t *in = json_object_get(root, "attempts"), *out = json_array(), *a;
    json_t *dropped = json_object_get(root, "dropped");
    size_t i;

    if (!json_is_array(in) || json_array_size(in) > TC_EGRESS_MAX_ATTEMPTS || !out) {
        json_decref(out);
        return NULL;
    }
    json_array_foreach(in, i, a)
    {
        json_t *host = json_object_get(a, "host"), *port = json_object_get(a, "port"),
               *allowed = json_object_get(a, "allowed"), *reason = json_object_get(a, "reason"),
               *sent = json_object_get(a, "bytes_sent"),
               *recv = json_object_get(a, "bytes_received"),
               *resolved = json_object_get(a, "resolved");
        if (!(json_is_null(host) || str_ok(host, TC_EGRESS_HOST_MAX)) || !json_is_integer(port) ||
            json_integer_value(port) < 0 || json_integer_value(port) > 65535 ||
            !json_is_boolean(allowed) || !str_ok(reason, 64) || !json_is_integer(sent) ||
            json_integer_value(sent) < 0 || !json_is_integer(recv) ||
            json_integer_value(recv) < 0 || !(json_is_null(resolved) || str_ok(resolved, 45))) {
            json_decref(out);
            return NULL;
        }
        json_t *o = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "host", host, "port", port,
                              "allowed", allowed, "reason", reason, "bytes_sent", sent,
                              "bytes_received", recv, "resolved", resolved);
        /* credentials at egress: which one the proxy added (names, never a value) */
        json_t *cred = json_object_get(a, "credential");
        if (o && json_is_object(cred) && str_ok(json_object_get(cred, "secret"), 128) &&
            str_ok(json_object_get(cred, "lease_id"), 36) &&
            str_ok(json_object_get(cred, "header"), 64))
            json_object_set_new(o, "credential",
                                json_pack("{s:O, s:O, s:O}", "secret",
                                          json_object_get(cred, "secret"), "lease_id",
                                          json_object_get(cred, "lease_id"), "header",
                                          json_object_get(cred, "header")));
        json_array_append_new(out, o);
    }
    *ret_dropped = json_is_integer(dropped) && json_integer_value(dropped) > 0
                       ? json_integer_value(dropped)
                       : 0;
    return out;
}

static void on_final(struct tc_egress_link *l, uint64_t handle, const char *payload)
{
    for (size_t i = 0; i < l->n_parked; i++) {
        if (l->parked[i].handle != handle)
            continue;
        struct parked p = l->parked[i];
        l->parked[i] = l->parked[--l->n_parked];
        json_t *root = payload ? json_loads(payload, JSON_REJECT_DUPLICATES, NULL) : NULL;
        json_int_t dropped = 0;
        json_t *net = root ? validated_attempts(root, &dropped) : NULL;
        json_decref(root);
        deliver_one(l, &p, net, dropped, net ? NULL : "egress proxy sent a malformed report");
        return;
    }
    /* nobody waits for it (setup failure path): drop */
}

void tc_egress_link_on_readable(struct tc_egress_link *l)
{
    while (l && l->sock >= 0) {
        struct tc_eg_hdr h;
        char *payload = NULL;
        int fd = -1;
        int r = tc_eg_recv(l->sock, &h, &payload, &fd);
        if (r == -EAGAIN || r == -EINTR)
            return;
        if (r == -EBADMSG)
            continue;
        if (r < 0) {
            /* The proxy died: its sandboxes' connections died with it. The next sandbox
             * that needs one starts a new one (respawn: exec'd, not a fork of the launcher
             * as it is now). */
            reap(l);
            flush_all(l, "egress proxy died");
            return;
        }
        if (fd >= 0)
            close(fd);
        if (h.type == TC_EG_FINAL)
            on_final(l, h.handle, payload);
        else if (h.type == TC_EG_ATTEMPT && payload && l->h.attempt)
            l->h.attempt(l->h.userdata, h.handle, payload, h.len);
        else if (h.type == TC_EG_ASK && payload && l->h.ask)
            l->h.ask(l->h.userdata, h.handle, payload, h.len);
        free(payload);
    }
}

void tc_egress_link_tick(struct tc_egress_link *l, int64_t now)
{
    for (size_t i = 0; l && i < l->n_parked;) {
        if (l->parked[i].deadline_ms > now) {
            i++;
            continue;
        }
        struct parked p = l->parked[i];
        l->parked[i] = l->parked[--l->n_parked];
        deliver_one(l, &p, NULL, 0, "egress proxy did not report in time");
    }
}

size_t tc_egress_link_parked(const struct tc_egress_link *l)
{
    return l ? l->n_parked : 0;
}

static bool is_proxy_var(const char *e)
{
    static const char *const names[] = {
        "HTTP_PROXY=", "HTTPS_PROXY=", "NO_PROXY=", "ALL_PROXY=", "FTP_PROXY="};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncasecmp(e, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

int tc_egress_spec_env(struct tc_spec *spec)
{
    static const char *const vars[] = {
        "HTTP_PROXY=http://127.0.0.1:" TC_STRINGIFY(TC_EGRESS_PORT),
        "HTTPS_PROXY=http://127.0.0.1:" TC_STRINGIFY(TC_EGRESS_PORT),
        "http_proxy=http://127.0.0.1:" TC_STRINGIFY(TC_EGRESS_PORT),
        "https_proxy=http://127.0.0.1:" TC_STRINGIFY(TC_EGRESS_PORT)};
    static const char *const no_proxy[] = {"NO_PROXY=localhost,127.0.0.1,::1",
                                           "no_proxy=localhost,127.0.0.1,::1"};
    bool loopback_allowed = false;
    size_t n = 0, k = 0, i;
    json_t *v;
    const char **env;

    json_array_foreach(spec->network_allow, i, v)
    {
        struct tc_egress_rule r;
        if (json_is_string(v) && tc_egress_rule_parse(json_string_value(v), &r) == 0 &&
            r.ip_literal && r.ip[0] == 127)
            loopback_allowed = true;
    }
    while (spec->envp && spec->envp[n])
        n++;
    env = calloc(n + 7, sizeof(*env));
    if (!env)
        return -ENOMEM;
    for (i = 0; i < n; i++)
        if (!is_proxy_var(spec->envp[i]))
            env[k++] = spec->envp[i];
    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        env[k++] = vars[i];
    if (!loopback_allowed)
        for (i = 0; i < 2; i++)
            env[k++] = no_proxy[i];
    env[k] = NULL;
    free(spec->envp);
    spec->envp = env;
    return 0;
}

static bool is_ca_var(const char *e)
{
    static const char *const names[] = {"SSL_CERT_FILE=", "SSL_CERT_DIR=", "REQUESTS_CA_BUNDLE=",
                                        "CURL_CA_BUNDLE=", "NODE_EXTRA_CA_CERTS="};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(e, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

int tc_egress_spec_tls(struct tc_spec *spec, json_t *spec_json, json_t **ret_tls)
{
#define CA_PATH "/run/secrets/" TC_TLS_CA_BUNDLE_NAME
    static const char *const vars[] = {"SSL_CERT_FILE=" CA_PATH, "REQUESTS_CA_BUNDLE=" CA_PATH,
                                       "CURL_CA_BUNDLE=" CA_PATH, "NODE_EXTRA_CA_CERTS=" CA_PATH};
#undef CA_PATH
    char *cert = NULL, *key = NULL, *b64 = NULL;
    size_t i, n = 0, k = 0;
    json_t *f;
    int r;

    *ret_tls = NULL;
    if (json_array_size(spec->inject) == 0)
        return 0;
    if (!tc_egress_available())
        return -ENOTSUP;
    json_array_foreach(spec->secret_files, i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "name")), TC_TLS_CA_BUNDLE_NAME) == 0)
            return -EEXIST;
    }
    if ((r = tc_tls_ca_new(spec->inject, &cert, &key)) < 0)
        return r;
    r = -ENOMEM;
    if (!(b64 = tc_tls_ca_bundle_b64(cert)))
        goto out;
    if (!spec->secret_files) {
        json_t *arr = json_array();
        if (!arr || json_object_set_new(spec_json, "secret_files", arr) < 0)
            goto out;
        spec->secret_files = arr;
    }
    if (json_array_append_new(
            spec->secret_files,
            json_pack("{s:s, s:s}", "name", TC_TLS_CA_BUNDLE_NAME, "content_b64", b64)) < 0)
        goto out;
    while (spec->envp && spec->envp[n])
        n++;
    const char **env = calloc(n + 5, sizeof(*env));
    if (!env)
        goto out;
    for (i = 0; i < n; i++)
        if (!is_ca_var(spec->envp[i]))
            env[k++] = spec->envp[i];
    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        env[k++] = vars[i];
    env[k] = NULL;
    free(spec->envp);
    spec->envp = env;
    *ret_tls = json_pack("{s:O, s:s, s:s}", "inject", spec->inject, "ca_cert", cert, "ca_key", key);
    r = *ret_tls ? 0 : -ENOMEM;
out:
    free(cert);
    if (key)
        explicit_bzero(key, strlen(key));
    free(key);
    free(b64);
    return r;
}
