#include "sandbox/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define JOIN_STUCK_MS     5000
#define REFILL_BACKOFF_MS 1000

int tc_pool_alloc_uid(struct tc_pool *p, uid_t *ret)
{
    /* round robin: a finished sandbox's uid is not handed out again right away */
    for (unsigned k = 0; k < p->n_uids; k++) {
        unsigned i = (p->uid_next + k) % p->n_uids;
        if (!p->uid_used[i]) {
            p->uid_used[i] = 1;
            p->uid_next = (i + 1) % p->n_uids;
            *ret = p->uid_base + i;
            return 0;
        }
    }
    return -EAGAIN;
}

void tc_pool_release_uid(struct tc_pool *p, uid_t uid)
{
    if (uid >= p->uid_base && uid - p->uid_base < p->n_uids)
        p->uid_used[uid - p->uid_base] = 0;
}

static int create(struct tc_pool *p, struct tc_shell *ret)
{
    char name[32];
    uid_t uid;
    int r = tc_pool_alloc_uid(p, &uid);

    if (r < 0)
        return r;
    snprintf(name, sizeof(name), "s%u", ++p->cg_seq);
    r = tc_shell_create(&p->env, uid, name, ret);
    if (r < 0)
        tc_pool_release_uid(p, uid);
    return r;
}

/* Kill a pooled shell and free its uid and groups; for a handed one, just forget it (its
 * sandbox owns the rest). */
static void drop(struct tc_pool *p, unsigned idx)
{
    struct tc_pool_entry *e = &p->e[idx];

    if (e->sh.sync_fd >= 0)
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, e->sh.sync_fd, NULL);
    if (e->handed) {
        close(e->sh.sync_fd);
        memset(e, 0, sizeof(*e));
        return;
    }
    tc_shell_kill(&e->sh);
    if (e->sh.has_cg) {
        /* empty once its only task is reaped; on EBUSY the launcher's exit removes it */
        (void)tc_cg_destroy(&e->sh.cg);
        e->sh.has_cg = false;
    }
    tc_pool_release_uid(p, e->sh.uid);
    memset(e, 0, sizeof(*e));
}

int tc_pool_init(struct tc_pool *p, const struct tc_shell_env *env, uid_t uid_base, unsigned n_uids,
                 unsigned min, unsigned max, int64_t shrink_ms, int epfd,
                 uint64_t (*epdata)(unsigned idx))
{
    memset(p, 0, sizeof(*p));
    p->env = *env;
    p->min = min > TC_POOL_MAX ? TC_POOL_MAX : min;
    p->max = max < p->min ? p->min : max > TC_POOL_MAX ? TC_POOL_MAX : max;
    p->target = p->min;
    p->shrink_ms = shrink_ms > 0 ? shrink_ms : TC_POOL_SHRINK_MS;
    p->epfd = epfd;
    p->epdata = epdata;
    p->uid_base = uid_base;
    p->n_uids = n_uids;
    p->uid_used = calloc(n_uids, 1);
    return p->uid_used ? 0 : -ENOMEM;
}

void tc_pool_fini(struct tc_pool *p)
{
    for (unsigned i = 0; i < TC_POOL_MAX; i++)
        if (p->e[i].used)
            drop(p, i);
    free(p->uid_used);
    p->uid_used = NULL;
    p->n_uids = 0;
}

bool tc_pool_joining(const struct tc_pool *p)
{
    for (unsigned i = 0; i < TC_POOL_MAX; i++)
        if (p->e[i].used && !p->e[i].ready)
            return true;
    return false;
}

static unsigned count(const struct tc_pool *p)
{
    unsigned n = 0;
    for (unsigned i = 0; i < TC_POOL_MAX; i++)
        n += p->e[i].used && !p->e[i].handed;
    return n;
}

/* Take entry idx out of the pool (ready: for good; joining: keep listening for its 'j'). */
static void take(struct tc_pool *p, unsigned idx, int64_t now_ms, struct tc_shell *ret)
{
    struct tc_pool_entry *e = &p->e[idx];
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = p->epdata(idx)};
    int keep = e->ready ? -1 : fcntl(e->sh.sync_fd, F_DUPFD_CLOEXEC, 3);

    epoll_ctl(p->epfd, EPOLL_CTL_DEL, e->sh.sync_fd, NULL);
    *ret = e->sh;
    memset(e, 0, sizeof(*e));
    if (keep < 0)
        return;
    if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, keep, &ev) < 0) {
        close(keep);
        return;
    }
    e->used = e->handed = true;
    e->since_ms = now_ms;
    e->sh.sync_fd = keep;
    e->sh.pid = e->sh.pidfd = e->sh.stdin_fd = e->sh.stdout_fd = e->sh.stderr_fd = e->sh.ctl_fd =
        -1;
}

/* The call pays for (or waits on) its shell: the next burst should not. */
static void missed(struct tc_pool *p, int64_t now_ms)
{
    p->misses++;
    p->last_change_ms = now_ms;
    if (p->target < p->max)
        p->target++;
}

int tc_pool_take(struct tc_pool *p, int64_t now_ms, bool count_miss, struct tc_shell *ret)
{
    int joining = -1;

    if (p->once) /* its one call takes a shell: the one made ahead, or (it died) a new one */
        p->min = p->max = p->target = 0;

    for (unsigned i = 0; i < TC_POOL_MAX; i++) {
        struct tc_pool_entry *e = &p->e[i];
        if (!e->used || e->handed)
            continue;
        if (!e->ready) {
            /* its 'j' may be waiting unread: a ready shell is better than a joining one */
            int r = tc_shell_poll_ready(&e->sh);
            if (r < 0) {
                drop(p, i);
                continue;
            }
            e->ready = r > 0;
        }
        char c;
        if (e->ready && recv(e->sh.sync_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 0) {
            drop(p, i); /* died while waiting (killed, or its base setup failed) */
            continue;
        }
        if (e->ready) {
            take(p, i, now_ms, ret);
            return 0;
        }
        joining = (int)i;
    }
    if (count_miss)
        missed(p, now_ms);
    if (joining >= 0) {
        take(p, (unsigned)joining, now_ms, ret);
        return 0;
    }
    return create(p, ret);
}

void tc_pool_event(struct tc_pool *p, unsigned idx)
{
    struct tc_pool_entry *e;
    int r;

    if (idx >= TC_POOL_MAX || !p->e[idx].used)
        return;
    e = &p->e[idx];
    r = tc_shell_poll_ready(&e->sh);
    if (r < 0 || (r > 0 && e->handed)) {
        drop(p, idx);
        return;
    }
    if (r > 0) {
        e->ready = true;
        /* nothing more to hear until go: stop watching */
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, e->sh.sync_fd, NULL);
    }
}

bool tc_pool_wants_refill(const struct tc_pool *p, int64_t now_ms)
{
    return p->target > 0 && now_ms >= p->retry_at_ms && count(p) < p->target && !tc_pool_joining(p);
}

int64_t tc_pool_timeout(const struct tc_pool *p, int64_t now_ms)
{
    int64_t t = -1;
    if (tc_pool_joining(p))
        return 1000;
    if (p->target > p->min) { /* the next step down */
        int64_t at = p->last_change_ms + p->shrink_ms;
        t = at > now_ms ? at - now_ms : 0;
    }
    if (p->target == 0 || count(p) >= p->target)
        return t;
    int64_t r = p->retry_at_ms > now_ms ? p->retry_at_ms - now_ms : 0;
    return t < 0 || r < t ? r : t;
}

void tc_pool_refill(struct tc_pool *p, int64_t now_ms)
{
    struct epoll_event ev = {.events = EPOLLIN};
    unsigned idx = TC_POOL_MAX;

    for (unsigned i = 0; i < TC_POOL_MAX && idx == TC_POOL_MAX; i++)
        if (!p->e[i].used)
            idx = i;
    if (idx == TC_POOL_MAX)
        return;
    struct tc_pool_entry *e = &p->e[idx];
    if (create(p, &e->sh) < 0) {
        p->retry_at_ms = now_ms + REFILL_BACKOFF_MS;
        return;
    }
    e->used = true;
    e->ready = false;
    e->since_ms = now_ms;
    ev.data.u64 = p->epdata(idx);
    if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, e->sh.sync_fd, &ev) < 0) {
        drop(p, idx);
        p->retry_at_ms = now_ms + REFILL_BACKOFF_MS;
    }
}

void tc_pool_once(struct tc_pool *p, int64_t now_ms)
{
    p->once = true;
    p->min = p->max = p->target = 1;
    tc_pool_refill(p, now_ms);
}

void tc_pool_tick(struct tc_pool *p, int64_t now_ms)
{
    for (unsigned i = 0; i < TC_POOL_MAX; i++)
        if (p->e[i].used && !p->e[i].ready && now_ms - p->e[i].since_ms > JOIN_STUCK_MS)
            drop(p, i);
    if (p->target > p->min && now_ms - p->last_change_ms >= p->shrink_ms) {
        p->target--;
        p->last_change_ms = now_ms;
    }
    /* one idle shell beyond the target at a time, never while one joins (v1: the rmdir
     * would wait on the cgroup mutex that join holds) */
    if (count(p) > p->target && !tc_pool_joining(p))
        for (unsigned i = 0; i < TC_POOL_MAX; i++)
            if (p->e[i].used && p->e[i].ready && !p->e[i].handed) {
                drop(p, i);
                break;
            }
}
