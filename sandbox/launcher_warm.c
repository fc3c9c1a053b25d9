/* The launcher: warm sandboxes (docs/sandbox.md, Warm interpreters; sandbox/launcher_int.h).
 *
 * A "warm" spec (a python tool's runner, gated: it reads one byte from stdin before it runs
 * the call's code) may be served by a sandbox started before the call. The launcher learns a
 * template from a call (its spec without what belongs to the call: id, stdin, collect,
 * stream, hold, and every file but toolcage's own under .toolcage/), and when idle starts sandboxes
 * from it: a shell of the pool, the same configuration, limits and seccomp filter as the
 * call would get, the program started and blocked on its gate. A later call whose template
 * is byte for byte the same (canonical JSON) takes one: its files are written into the
 * workspace, its stdin (after the gate byte) goes to the program, its id, deadline and CPU
 * base are set from that moment. Nothing of the sandbox is shared: each is used by one call
 * and torn down after it, as a cold one. Nothing untrusted runs in it before its call: the
 * program (ours) waits on the gate; a warm sandbox that wrote anything, met the seccomp
 * filter, lost its stdin or ended is never handed out.
 *
 * Groups (the spec's warm_group: the server's tenant) share nothing but the total: a template
 * is one group's (the group is part of it), a group holds at most warm_group_max warm
 * sandboxes and WARM_GROUP_TEMPLATES templates, and a group's templates evict (or forget) only
 * that group's: another tenant's calls, however many and however varied, never take away a
 * tenant's warm sandboxes or templates. What a tenant can see of the others is only that all
 * of warm_max is held (its calls then run cold). */
#include <poll.h>

#include "sandbox/launcher_int.h"

static bool eligible(const struct launcher *L, const struct tc_spec *p)
{
    return L->warm_max > 0 && p->warm && p->gate &&
           (strcmp(p->backend, "native") == 0 || strcmp(p->backend, "gvisor") == 0 ||
            strcmp(p->backend, "microvm") == 0) &&
           !p->network_allow && !p->inject && !p->secret_files && !p->session;
}

/* The spec a warm sandbox of this call's template starts with (without an id). */
static json_t *template_spec(json_t *spec)
{
    /* shallow: what it keeps of the call's (argv, env, limits...) is not changed after */
    json_t *t = json_copy(spec), *files = json_array(), *f;
    size_t i;
    if (!t || !files) {
        json_decref(t);
        json_decref(files);
        return NULL;
    }
    static const char *const per_call[] = {"id", "stdin_b64", "collect", "stream", "hold"};
    for (i = 0; i < sizeof(per_call) / sizeof(per_call[0]); i++)
        json_object_del(t, per_call[i]);
    json_array_foreach(json_object_get(spec, "files"), i, f) if (lc_own_file(f))
        json_array_append(files, f);
    json_object_set_new(t, "files", files);
    return t;
}

static char *template_key(json_t *tspec)
{
    return tspec ? json_dumps(tspec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* s is a warm sandbox of template tmpl (1 + its entry), not of one the entry held before */
static bool of(const struct launcher *L, const struct sbx *s, unsigned tmpl)
{
    return s->used && s->warm_tmpl == tmpl && s->warm_gen == L->warm[tmpl - 1].gen;
}

/* s is a warm sandbox (waiting, or dying) of a template of group g */
static bool of_group(const struct launcher *L, const struct sbx *s, const char *g)
{
    return s->used && s->warm_tmpl && of(L, s, s->warm_tmpl) &&
           strcmp(L->warm[s->warm_tmpl - 1].group, g) == 0;
}

static void forget(struct launcher *L, unsigned idx)
{
    struct warm_tmpl *t = &L->warm[idx];
    if (L->warm_for == idx + 1)
        L->warm_for = 0;
    for (unsigned i = 0; i < L->max; i++)
        if (of(L, &L->slots[i], idx + 1))
            lc_kill_sbx(L, &L->slots[i], "forgotten");
    free(t->key);
    json_decref(t->spec);
    memset(t, 0, sizeof(*t));
}

/* Something is waiting on fd that the loop has not read yet (output, a seccomp notification,
 * a control message, the end of PID 1). */
static bool pending(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return fd >= 0 && poll(&p, 1, 0) != 0;
}

/* Something happened in it besides its program's start (it wrote, met the filter, ended,
 * failed to start, lost its stdin): it is never handed out. */
static bool dirty(const struct sbx *w)
{
    return w->exited || w->killed_reason || w->stdin_fd < 0 || w->out.fd < 0 || w->err.fd < 0 ||
           w->out.len || w->err.len || w->out.dropped || w->err.dropped || w->n_viol ||
           w->setup_err || w->exec_err || w->held;
}

/* Its start is over as far as the loop can tell (the set-up done, the exec reported), and
 * nothing is waiting to be read from it: else it is still starting (or something happened
 * that the loop has not read yet), and a call goes by it, leaving it be. */
static bool settled(const struct sbx *w, int64_t now)
{
    return w->sync_fd < 0 && w->setup_until_ms <= now && !pending(w->out.fd) &&
           !pending(w->err.fd) && !pending(w->ctl_fd) && !pending(w->notify_fd) &&
           !pending(w->oom_fd) && !pending(w->pidfd);
}

/* Its program waits at its gate: PID 1's child, blocked in read(2) on its stdin, as the
 * kernel reports it (/proc/PID/syscall). Until then its interpreter may still be starting
 * (the exec is reported long before the gate: python's start-up, the runner's warm-up), and
 * may read files of its workspace as it does (a .pth or usercustomize.py under HOME, a
 * sitecustomize.py on a PYTHONPATH that reaches into it): the call's files must not be there
 * before. gvisor and microvm: the program runs under another kernel, and its settled start is
 * all the launcher sees; so too on a host whose /proc does not say (no such files, or no
 * right to read them). */
static bool at_gate(const struct sbx *w)
{
    char path[64], *end;
    _cleanup_free_ char *kids = NULL, *call = NULL;
    if (w->gvisor || w->vm)
        return true;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)w->pid, (int)w->pid);
    if (tc_read_file(path, 4096, &kids, NULL) < 0)
        return true;
    long kid = strtol(kids, &end, 10);
    if (end == kids || kid <= 0) /* (no child yet: the exec has not come) */
        return false;
    snprintf(path, sizeof(path), "/proc/%ld/syscall", kid);
    if (tc_read_file(path, 4096, &call, NULL) < 0)
        return true;
    long nr = strtol(call, &end, 10); /* "NR ARG0 ...", or "running" */
    return end != call && nr == SYS_read && strncmp(end, " 0x0 ", 5) == 0;
}

/* The call takes warm sandbox w (settled, at its gate, not dirty): 0; -2: the call's own
 * stdin or files do not go in (w goes if any file went in): the call starts cold and meets
 * that error there. */
static int adopt(struct launcher *L, struct sbx *w, json_t *spec, struct tc_spec *parsed)
{
    unsigned char *in = NULL, *buf;
    size_t n = 0, i;
    char err[256];
    json_t *files, *f;

    if (parsed->stdin_b64 &&
        tc_b64_decode(parsed->stdin_b64, strlen(parsed->stdin_b64), &in, &n) < 0)
        return -2;
    buf = malloc(n + 1);
    if (!buf) {
        free(in);
        return -2;
    }
    buf[0] = 'g';
    if (n)
        memcpy(buf + 1, in, n);
    free(in);
    /* the call's files (toolcage's own are there: the template is the call's) */
    files = json_array();
    json_array_foreach(parsed->files, i, f) if (!lc_own_file(f)) json_array_append(files, f);
    /* (a clash is found before anything is written: the sandbox stays warm for another call) */
    if (!files || lc_check_files(files, parsed->files, true, err, sizeof(err)) < 0) {
        json_decref(files);
        free(buf);
        return -2;
    }
    if (json_array_size(files) && lc_write_files(w, files, parsed->files, err, sizeof(err)) < 0) {
        if (files && json_array_size(files))
            lc_kill_sbx(L, w, "spoilt"); /* some may be in it */
        json_decref(files);
        free(buf);
        return -2;
    }
    json_decref(files);

    /* from here on it is the call's sandbox */
    tc_spec_release(&w->spec);
    json_decref(w->spec_json);
    w->spec_json = spec;
    w->spec = *parsed;
    snprintf(w->id, sizeof(w->id), "%s", parsed->id);
    w->warm_tmpl = 0;
    w->warm_used = true;
    L->n_warm--;
    L->warm_dirty = true;
    w->stdin_data = buf;
    w->stdin_len = n + 1;
    w->stdin_off = 0;
    lc_quiet_begin(L, lc_now_ms());
    w->start_ms = lc_now_ms();
    if (w->spec.hold) { /* the server records the start first: the gate opens at TC_WIRE_GO */
        w->held = true;
        w->deadline_ms = w->start_ms + HOLD_MAX_MS;
        (void)tc_wire_send(L->sock, TC_WIRE_READY, w->id, NULL, 0);
        return 0;
    }
    return lc_warm_go(L, w);
}

int lc_warm_go(struct launcher *L, struct sbx *w)
{
    uint64_t cpu = 0;
    if (w->has_cg && tc_cg_cpu_ns(&w->cg, &cpu) < 0)
        cpu = 0;
    w->cpu_base_ns = cpu;
    w->start_ms = lc_now_ms();
    w->deadline_ms = w->start_ms + w->spec.limits.wall_ms;
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = lc_wdata(w->slot, W_STDIN)};
    epoll_ctl(L->epfd, EPOLL_CTL_MOD, w->stdin_fd, &ev);
    lc_pump_stdin(L, w); /* the gate and the call's stdin now (the pipe is empty): the rest, if
                          * any, when it drains */
    return 0;
}

bool lc_warm_take(struct launcher *L, json_t *spec, struct tc_spec *parsed)
{
    if (!eligible(L, parsed))
        return false;
    json_t *tspec = template_spec(spec);
    char *key = template_key(tspec);
    int64_t now = lc_now_ms();
    unsigned idx = WARM_TEMPLATES, lru = 0;

    if (!key) {
        json_decref(tspec);
        return false;
    }
    for (unsigned i = 0; i < WARM_TEMPLATES && idx == WARM_TEMPLATES; i++)
        if (L->warm[i].key && strcmp(L->warm[i].key, key) == 0)
            idx = i;
    if (idx < WARM_TEMPLATES) {
        struct warm_tmpl *t = &L->warm[idx];
        free(key);
        json_decref(tspec);
        t->used_ms = now;
        /* the oldest settled one first: it has waited longest */
        for (;;) {
            struct sbx *w = NULL;
            for (unsigned i = 0; i < L->max; i++) {
                struct sbx *c = &L->slots[i];
                if (of(L, c, idx + 1) && !c->killed_reason && !c->warm_skip &&
                    (!w || c->start_ms < w->start_ms))
                    w = c;
            }
            if (!w)
                break;
            if (dirty(w)) {
                /* not fit for a call: it goes, unreported, and the template waits a while
                 * (its program may do something before its gate every time) */
                lc_kill_sbx(L, w, "unclean");
                t->retry_ms = now + 1000;
                continue;
            }
            /* still starting: this call goes cold, it stays */
            if (!settled(w, now) || !at_gate(w)) {
                w->warm_skip = true;
                continue;
            }
            int r = adopt(L, w, spec, parsed);
            if (r == 0 || r == -2) { /* -2: the call's fault, not the template's */
                for (unsigned i = 0; i < L->max; i++)
                    L->slots[i].warm_skip = false;
                return r == 0;
            }
        }
        unsigned starting = 0;
        for (unsigned i = 0; i < L->max; i++) {
            starting += L->slots[i].warm_skip;
            L->slots[i].warm_skip = false;
        }
        /* a call paid for a cold start: keep one more warm, up to what its group may hold
         * (unless more than the target are on their way already: they are the raise) */
        if (starting > t->target)
            return false;
        t->miss_ms = now;
        if (t->target < (t->vm ? WARM_VM_PER_TEMPLATE : L->warm_group_max))
            t->target++;
        return false;
    }
    /* a new template: its group's least recently used goes when the group has its share,
     * else it takes a free entry; none free (other groups hold them all): not learned */
    const char *g = json_string_value(json_object_get(spec, "warm_group"));
    unsigned mine = 0;
    g = g ? g : "";
    if (strlen(g) >= sizeof(L->warm[0].group)) { /* (the spec's syntax keeps it to 64) */
        free(key);
        json_decref(tspec);
        return false;
    }
    for (unsigned i = 0; i < WARM_TEMPLATES; i++)
        if (L->warm[i].key && strcmp(L->warm[i].group, g) == 0 &&
            (mine++ == 0 || L->warm[i].used_ms < L->warm[lru].used_ms))
            lru = i;
    if (mine >= WARM_GROUP_TEMPLATES) {
        forget(L, lru);
        idx = lru;
    }
    for (unsigned i = 0; i < WARM_TEMPLATES && idx == WARM_TEMPLATES; i++)
        if (!L->warm[i].key)
            idx = i;
    if (idx == WARM_TEMPLATES) {
        free(key);
        json_decref(tspec);
        return false;
    }
    L->warm[idx] = (struct warm_tmpl){.key = key,
                                      .spec = tspec,
                                      .target = 0,
                                      .vm = strcmp(parsed->backend, "microvm") == 0,
                                      .used_ms = now,
                                      .miss_ms = now,
                                      .gen = ++L->warm_gens};
    memcpy(L->warm[idx].group, g, strlen(g) + 1);
    return false;
}

/* The warm sandboxes of each template (waiting, or dying), and whether any is dying. */
struct warm_counts {
    unsigned n[WARM_TEMPLATES];
    bool dying;
};

static void count_all(const struct launcher *L, struct warm_counts *c)
{
    memset(c, 0, sizeof(*c));
    for (unsigned k = 0; k < L->max; k++) {
        const struct sbx *s = &L->slots[k];
        if (!s->used || !s->warm_tmpl)
            continue;
        c->dying |= s->killed_reason != NULL;
        c->n[s->warm_tmpl - 1] += of(L, s, s->warm_tmpl);
    }
}

/* A template wants one more warm sandbox now. */
static bool wants(const struct launcher *L, const struct warm_counts *c, unsigned i, int64_t now)
{
    const struct warm_tmpl *t = &L->warm[i];
    return t->key && now - t->used_ms < WARM_IDLE_MS && now >= t->retry_ms && c->n[i] < t->target;
}

#define WARM_EVICT_IDLE_MS 1000 /* a template unused this long gives its warm ones up */

/* Whether template i can have one more warm sandbox now: below warm_max and its group below
 * warm_group_max, or by evicting (*victim) a warm sandbox of another template of its group
 * that has two more than this one (a burst's template shares with the others), or, if this
 * one is in use (a call in the last WARM_EVICT_IDLE_MS), of one that is not (two templates in
 * use take turns, they do not evict each other's at every call: each eviction throws a
 * started interpreter away). One at a time: none may be dying already. Another group's are
 * never evicted. */
static bool can_start(const struct launcher *L, const struct warm_counts *c, unsigned i,
                      int64_t now, struct sbx **victim)
{
    const struct warm_tmpl *me = &L->warm[i];
    unsigned group = 0, mine = c->n[i], most = 0;
    *victim = NULL;
    for (unsigned j = 0; j < WARM_TEMPLATES; j++)
        if (L->warm[j].key && strcmp(L->warm[j].group, me->group) == 0)
            group += c->n[j];
    if (L->n_warm < L->warm_max && group < L->warm_group_max)
        return true;
    if (now - me->used_ms >= WARM_EVICT_IDLE_MS || c->dying)
        return false; /* only a template in use takes another's; a dying one's end wakes us */
    for (unsigned k = 0; k < L->max; k++) {
        struct sbx *s = &L->slots[k];
        if (s->warm_tmpl == i + 1 || !of_group(L, s, me->group))
            continue;
        const struct warm_tmpl *t = &L->warm[s->warm_tmpl - 1];
        unsigned n = c->n[s->warm_tmpl - 1];
        /* an idle template's go to one in use (not the other way round: a template whose
         * warm one was taken away would take another's back, and round it would go) */
        bool idle = now - t->used_ms >= WARM_EVICT_IDLE_MS && t->used_ms < me->used_ms;
        if ((n >= mine + 2 || idle) &&
            (n > most ||
             (n == most && *victim && t->used_ms < L->warm[(*victim)->warm_tmpl - 1].used_ms))) {
            *victim = s;
            most = n;
        }
    }
    return *victim != NULL;
}

/* The template to start a warm sandbox for (-1: none wants one) and whether it can now
 * (*can; *victim: by evicting that one first): the one a sandbox was evicted for first
 * (else the evicted one's template, used more recently, would take its place back, and
 * round it would go), then the most recently used that can. */
static int pick(const struct launcher *L, int64_t now, bool *can, struct sbx **victim)
{
    struct warm_counts c;
    bool tried[WARM_TEMPLATES] = {false};
    int best = -1;
    *can = false;
    *victim = NULL;
    if (!L->warm_max || L->stopping || tc_pool_joining(&L->pool))
        return -1;
    count_all(L, &c);
    if (L->warm_for && wants(L, &c, L->warm_for - 1, now)) {
        best = (int)L->warm_for - 1;
        tried[best] = true;
        if ((*can = can_start(L, &c, (unsigned)best, now, victim)))
            return best;
    }
    for (;;) {
        int i = -1;
        for (unsigned j = 0; j < WARM_TEMPLATES; j++)
            if (!tried[j] && wants(L, &c, j, now) &&
                (i < 0 || L->warm[j].used_ms > L->warm[i].used_ms))
                i = (int)j;
        if (i < 0)
            return best;
        tried[i] = true;
        best = best < 0 ? i : best;
        if ((*can = can_start(L, &c, (unsigned)i, now, victim)))
            return i;
    }
}

bool lc_warm_refill(struct launcher *L, int64_t now)
{
    bool can;
    struct sbx *victim, *s = NULL;
    int i = pick(L, now, &can, &victim);
    if (i < 0 || !can)
        return false;
    if (victim) { /* the slot goes to template i */
        lc_kill_sbx(L, victim, "evicted");
        L->warm_for = (unsigned)i + 1;
        return false;
    }
    if (L->warm_for == (unsigned)i + 1)
        L->warm_for = 0;
    for (unsigned k = 0; k < L->max && !s; k++)
        if (!L->slots[k].used)
            s = &L->slots[k];
    json_t *spec = json_deep_copy(L->warm[i].spec);
    char id[32], err[128];
    struct tc_spec parsed;
    snprintf(id, sizeof(id), "warm-%u", ++L->warm_seq);
    if (!s || !spec || json_object_set_new(spec, "id", json_string(id)) < 0 ||
        tc_spec_parse(spec, &parsed, err, sizeof(err)) < 0) {
        json_decref(spec);
        L->warm[i].retry_ms = now + 1000;
        return false;
    }
    lc_start_in_slot(L, s, spec, &parsed, (unsigned)i + 1);
    return true;
}

int64_t lc_warm_timeout(const struct launcher *L, int64_t now)
{
    int64_t t = -1;
    bool can;
    struct sbx *victim;
    int want = pick(L, now, &can, &victim);
    if (want >= 0 && can)
        return 0;
    for (unsigned i = 0; i < WARM_TEMPLATES; i++) {
        const struct warm_tmpl *w = &L->warm[i];
        if (!w->key)
            continue;
        /* a template that wants a start it cannot have may evict this one's once it has been
         * idle for WARM_EVICT_IDLE_MS: nothing else may happen meanwhile to wake us */
        int64_t e = w->used_ms + WARM_EVICT_IDLE_MS - now;
        if (want >= 0 && (int)i != want && e > 0 && (t < 0 || e < t))
            t = e;
        int64_t d = w->used_ms + WARM_IDLE_MS - now; /* forgotten */
        if (w->target > 1 && w->miss_ms + WARM_IDLE_MS - now < d)
            d = w->miss_ms + WARM_IDLE_MS - now; /* a step down */
        if (w->retry_ms > now && w->retry_ms - now < d)
            d = w->retry_ms - now; /* a start put off */
        if (d < 0)
            d = 0;
        if (t < 0 || d < t)
            t = d;
    }
    return t;
}

void lc_warm_tick(struct launcher *L, int64_t now)
{
    struct warm_counts c; /* once, not once per template (a forgotten one's are not looked at) */
    count_all(L, &c);
    for (unsigned i = 0; i < WARM_TEMPLATES; i++) {
        struct warm_tmpl *t = &L->warm[i];
        if (!t->key)
            continue;
        if (now - t->used_ms >= WARM_IDLE_MS) {
            forget(L, i);
            continue;
        }
        if (t->target > 1 && now - t->miss_ms >= WARM_IDLE_MS) {
            t->target--;
            t->miss_ms = now;
        }
        if (c.n[i] > t->target)
            for (unsigned k = 0; k < L->max; k++) {
                struct sbx *s = &L->slots[k];
                if (of(L, s, i + 1) && !s->killed_reason) {
                    lc_kill_sbx(L, s, "surplus");
                    break;
                }
            }
    }
}

void lc_warm_ended(struct launcher *L, struct sbx *s)
{
    unsigned i = s->warm_tmpl - 1;
    if (i < WARM_TEMPLATES && L->warm[i].key && s->warm_gen == L->warm[i].gen && !s->killed_reason)
        L->warm[i].retry_ms = lc_now_ms() + 1000;
}

void lc_warm_fini(struct launcher *L)
{
    for (unsigned i = 0; i < WARM_TEMPLATES; i++) {
        free(L->warm[i].key);
        json_decref(L->warm[i].spec);
        memset(&L->warm[i], 0, sizeof(L->warm[i]));
    }
}

void lc_warm_publish(struct launcher *L)
{
    char path[PATH_MAX], tmp[PATH_MAX], line[256];
    if (!L->warm_dirty)
        return;
    L->warm_dirty = false;
    snprintf(path, sizeof(path), "%s/warm", L->scratch);
    snprintf(tmp, sizeof(tmp), "%s/warm.new", L->scratch);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return;
    bool ok = true;
    for (unsigned i = 0; i < L->max && ok; i++) {
        const struct sbx *s = &L->slots[i];
        if (!s->used || !s->warm_tmpl || s->pid <= 0)
            continue;
        const char *ws = strrchr(s->ws_path, '/');
        int n = snprintf(line, sizeof(line), "%d %u %s %s\n", (int)s->pid, (unsigned)s->uid,
                         ws ? ws + 1 : "-", s->has_cg && s->cg.name[0] ? s->cg.name : "-");
        ok = n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) == n;
    }
    if (close(fd) < 0 || !ok || rename(tmp, path) < 0) {
        unlink(tmp);
        L->warm_dirty = true; /* the next turn tries again */
    }
}
