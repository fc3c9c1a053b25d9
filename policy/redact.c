/* Output redaction: a hand-written scanner (no regex engine on the hot path).
 *
 * Speed: a 64 Ki-bit table of the two-byte prefixes every rule can start with lets the
 * scanner skip most bytes with one load; the matchers only run at candidate positions.
 *
 * Streaming: every decision at position p reads only bytes [p - LOOKBEHIND, p + MAX_TOKEN)
 * and, at the very end of the stream, the fact that the input ends there. A stream therefore
 * scans only positions at least MAX_TOKEN bytes before the end of what it has seen (or all of
 * them once finished), keeping LOOKBEHIND bytes of context, and produces exactly what a
 * one-shot scan of the same bytes produces. Long constructs (PEM blocks, over-long tokens) are
 * swallowed by small position-driven states, which are split-independent too.
 *
 * Line settling: no rule matches across a newline (a PEM block is a state entered on its
 * BEGIN line; a leased secret or a host path holding a newline turns this off), and no matcher's
 * decision at p reads past the first newline at or after p. So everything up to the last newline
 * seen is final too, and a stream holds back only the unfinished line: a program that prints a line
 * and sleeps is seen at once (tests/unit/test_redact.c checks every split against one-shot). */
#include "policy/redact.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum rule {
    R_AWS_ACCESS_KEY,
    R_AWS_SECRET_KEY,
    R_GITHUB_TOKEN,
    R_SLACK_TOKEN,
    R_SLACK_WEBHOOK,
    R_STRIPE_KEY,
    R_OPENAI_KEY,
    R_ANTHROPIC_KEY,
    R_GOOGLE_API_KEY,
    R_JWT,
    R_PRIVATE_KEY,
    R_URL_CREDENTIALS,
    R_ASSIGNMENT,
    R_PRIVATE_IP,
    R_LOOPBACK_IP,   /* off unless a tool enables it */
    R_LINK_LOCAL_IP, /* off unless a tool enables it */
    R_HOST_PATH,
    R_SECRET,
    R__COUNT
};

static const char *const rule_names[R__COUNT] = {
    "aws_access_key", "aws_secret_key",  "github_token",  "slack_token",    "slack_webhook",
    "stripe_key",     "openai_key",      "anthropic_key", "google_api_key", "jwt",
    "private_key",    "url_credentials", "assignment",    "private_ip",     "loopback_ip",
    "link_local_ip",  "host_path",       "secret",
};

/* Rules a tool must enable: what they match is ordinary output an agent needs to read (a
 * test's 127.0.0.1:3128, the metadata address) more often than it is a secret. */
static bool off_by_default(int rule)
{
    return rule == R_LOOPBACK_IP || rule == R_LINK_LOCAL_IP;
}

#define MAXTOK         TC_REDACT_MAX_TOKEN
#define LOOKBEHIND     128
#define CHUNK          (64 * 1024)
#define MAX_HOST_PATHS 64
#define MAX_VALUE      512  /* assignment values and URL userinfo */
#define MAX_RUN        1024 /* API-key style tokens; longer runs are swallowed to their end */

/* ---- character classes ---- */

enum {
    C_ALNUM = 1,   /* [A-Za-z0-9] */
    C_B64URL = 2,  /* [A-Za-z0-9_-] */
    C_HEX = 4,     /* [0-9A-Fa-f] */
    C_PATH = 8,    /* [A-Za-z0-9._-] */
    C_KEY = 16,    /* [A-Za-z0-9_.-] key characters of assignments */
    C_UPNUM = 32,  /* [A-Z0-9] */
    C_SLACK = 64,  /* [A-Za-z0-9-] */
    C_SPACE = 128, /* space, tab, CR, LF, FF, VT */
};
static uint8_t cls[256];
static uint8_t set_b64url[256], set_alnum[256], set_slack[256], set_value[256], set_github_pat[256];

static void init_classes(void)
{
    for (int c = 0; c < 256; c++) {
        bool up = c >= 'A' && c <= 'Z', lo = c >= 'a' && c <= 'z', dg = c >= '0' && c <= '9';
        uint8_t v = 0;
        if (up || lo || dg)
            v |= C_ALNUM | C_B64URL | C_PATH | C_KEY | C_SLACK;
        if (c == '_' || c == '-')
            v |= C_B64URL | C_PATH | C_KEY;
        if (c == '-')
            v |= C_SLACK;
        if (c == '.')
            v |= C_PATH | C_KEY;
        if (dg || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))
            v |= C_HEX;
        if (up || dg)
            v |= C_UPNUM;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v')
            v |= C_SPACE;
        cls[c] = v;
        set_b64url[c] = (v & C_B64URL) != 0;
        set_alnum[c] = (v & C_ALNUM) != 0;
        set_slack[c] = (v & C_SLACK) != 0;
        set_github_pat[c] = (v & C_ALNUM) || c == '_';
        set_value[c] = !(v & C_SPACE) && !strchr("\"'`,;()[]{}<>&", c) && c != 0;
    }
}

#define IS(c, k) ((cls[(unsigned char)(c)] & (k)) != 0)

/* ---- compiled redactor ---- */

struct tc_redactor {
    bool on[R__COUNT];
    char *paths[MAX_HOST_PATHS];
    size_t pathlen[MAX_HOST_PATHS];
    size_t npaths;
    uint64_t pair[65536 / 64]; /* two-byte prefixes of the enabled built-in rules */
};

static inline void bit_set(uint64_t *t, unsigned i)
{
    t[i >> 6] |= UINT64_C(1) << (i & 63);
}
static inline bool bit_get(const uint64_t *t, unsigned i)
{
    return (t[i >> 6] >> (i & 63)) & 1;
}
static void pair_set(uint64_t *t, unsigned char a, unsigned char b)
{
    bit_set(t, (unsigned)a << 8 | b);
}
static void pair_set_any(uint64_t *t, unsigned char a)
{
    for (unsigned b = 0; b < 256; b++)
        pair_set(t, a, (unsigned char)b);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

const char *const *tc_redact_rule_names(size_t *ret_n)
{
    if (ret_n)
        *ret_n = R__COUNT;
    return rule_names;
}

static int rule_index(const char *name)
{
    for (int i = 0; i < R__COUNT; i++)
        if (strcmp(rule_names[i], name) == 0)
            return i;
    return -1;
}

void tc_redactor_free(struct tc_redactor *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->npaths; i++)
        free(r->paths[i]);
    free(r);
}

static bool any_ip_rule(const struct tc_redactor *r)
{
    return r->on[R_PRIVATE_IP] || r->on[R_LOOPBACK_IP] || r->on[R_LINK_LOCAL_IP];
}

int tc_redactor_new(const char *const *disabled, size_t ndisabled, const char *const *enabled,
                    size_t nenabled, const char *const *host_paths, size_t nhost_paths,
                    struct tc_redactor **ret)
{
    struct tc_redactor *r;

    pthread_once(&init_once, init_classes);
    if (nhost_paths > MAX_HOST_PATHS)
        return -EINVAL;
    for (size_t i = 0; i < ndisabled; i++)
        if (!disabled[i] || rule_index(disabled[i]) < 0)
            return -EINVAL;
    for (size_t i = 0; i < nenabled; i++)
        if (!enabled[i] || rule_index(enabled[i]) < 0)
            return -EINVAL;
    for (size_t i = 0; i < nhost_paths; i++)
        if (!host_paths[i] || host_paths[i][0] != '/' || strlen(host_paths[i]) >= 4096)
            return -EINVAL;
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    for (int i = 0; i < R__COUNT; i++)
        r->on[i] = !off_by_default(i);
    for (size_t i = 0; i < nenabled; i++)
        r->on[rule_index(enabled[i])] = true;
    for (size_t i = 0; i < ndisabled; i++) /* named in both: off (the stricter reading of a typo
                                              is not knowable; the policy check refuses it) */
        r->on[rule_index(disabled[i])] = false;
    r->on[R_SECRET] = true; /* leased values are always redacted */
    for (size_t i = 0; i < nhost_paths; i++) {
        size_t n = strlen(host_paths[i]);
        while (n > 1 && host_paths[i][n - 1] == '/')
            n--;
        if (n < 2) /* "/" alone would redact every path */
            continue;
        r->paths[r->npaths] = strndup(host_paths[i], n);
        if (!r->paths[r->npaths]) {
            tc_redactor_free(r);
            return -ENOMEM;
        }
        r->pathlen[r->npaths++] = n;
    }

    if (r->on[R_AWS_ACCESS_KEY])
        for (const char *p = "KSGIRNBC"; *p; p++)
            pair_set(r->pair, 'A', (unsigned char)*p);
    if (r->on[R_GOOGLE_API_KEY])
        pair_set(r->pair, 'A', 'I');
    if (r->on[R_GITHUB_TOKEN]) {
        pair_set(r->pair, 'g', 'h');
        pair_set(r->pair, 'g', 'i');
    }
    if (r->on[R_SLACK_TOKEN]) {
        pair_set(r->pair, 'x', 'o');
        pair_set(r->pair, 'x', 'a');
    }
    if (r->on[R_SLACK_WEBHOOK])
        pair_set(r->pair, 'h', 't');
    if (r->on[R_STRIPE_KEY] || r->on[R_OPENAI_KEY] || r->on[R_ANTHROPIC_KEY])
        pair_set(r->pair, 's', 'k');
    if (r->on[R_STRIPE_KEY])
        pair_set(r->pair, 'r', 'k');
    if (r->on[R_JWT])
        pair_set(r->pair, 'e', 'y');
    if (r->on[R_PRIVATE_KEY])
        pair_set(r->pair, '-', '-');
    if (r->on[R_URL_CREDENTIALS])
        pair_set(r->pair, ':', '/');
    if (any_ip_rule(r)) {
        for (unsigned char c = '0'; c <= '9'; c++)
            pair_set(r->pair, '1', c);
        pair_set(r->pair, ':', ':');
        for (const char *p = "cdeCDE"; *p; p++) {
            pair_set(r->pair, 'f', (unsigned char)*p);
            pair_set(r->pair, 'F', (unsigned char)*p);
        }
    }
    if (r->on[R_ASSIGNMENT]) {
        pair_set_any(r->pair, '=');
        pair_set_any(r->pair, ':');
    }
    if (r->on[R_HOST_PATH]) {
        pair_set(r->pair, '/', 'h');
        pair_set(r->pair, '/', 'r');
        for (size_t i = 0; i < r->npaths; i++)
            pair_set(r->pair, (unsigned char)r->paths[i][0], (unsigned char)r->paths[i][1]);
    }
    *ret = r;
    return 0;
}

/* ---- stream ---- */

struct lit {
    char *s;
    size_t n;
};

enum state { ST_NORMAL, ST_PEM, ST_RUN };

struct tc_redact_stream {
    const struct tc_redactor *r;
    struct lit *lits; /* secret forms, grouped by first byte, longest first */
    size_t nlits;
    size_t bucket[257];           /* lits[bucket[c] .. bucket[c+1]) start with byte c */
    uint64_t pair[65536 / 64];    /* built-in | secret prefixes */
    uint64_t secpair[65536 / 64]; /* secret prefixes */
    struct tc_buf pend;           /* [0, scan): already emitted context; [scan, len): pending */
    size_t scan;
    enum state state;
    size_t swallowed;       /* ST_PEM: bytes of the block so far */
    const uint8_t *run_set; /* ST_RUN: bytes that continue the token */
    size_t counts[R__COUNT];
    bool finished;
    bool settle_lines; /* no leased form holds a newline: see "Line settling" above */
};

struct match {
    size_t keep; /* bytes at p copied unchanged before the redacted part */
    size_t len;  /* bytes redacted */
    int rule;
    enum state next;
    const uint8_t *run_set;
};

static const char B64STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64_encode(const unsigned char *in, size_t n, const char *alpha, bool pad,
                        size_t *ret_n)
{
    char *o = malloc((n + 2) / 3 * 4 + 1);
    size_t j = 0;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        o[j++] = alpha[(v >> 18) & 63];
        o[j++] = alpha[(v >> 12) & 63];
        if (i + 1 < n)
            o[j++] = alpha[(v >> 6) & 63];
        else if (pad)
            o[j++] = '=';
        if (i + 2 < n)
            o[j++] = alpha[v & 63];
        else if (pad)
            o[j++] = '=';
    }
    o[j] = '\0';
    *ret_n = j;
    return o;
}

static int add_lit(struct lit **lits, size_t *n, size_t *alloc, char *s, size_t len)
{
    if (!s)
        return -ENOMEM;
    if (len < TC_REDACT_MIN_SECRET || len >= MAXTOK) {
        free(s);
        return 0;
    }
    for (size_t i = 0; i < *n; i++)
        if ((*lits)[i].n == len && memcmp((*lits)[i].s, s, len) == 0) {
            free(s);
            return 0;
        }
    if (*n == *alloc) {
        size_t na = *alloc ? *alloc * 2 : 32;
        struct lit *nl = realloc(*lits, na * sizeof(*nl));
        if (!nl) {
            free(s);
            return -ENOMEM;
        }
        *lits = nl;
        *alloc = na;
    }
    (*lits)[(*n)++] = (struct lit){s, len};
    return 0;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Every form of one secret that is redacted. */
static int secret_forms(const unsigned char *v, size_t n, struct lit **lits, size_t *nl, size_t *al)
{
    static const char hexl[] = "0123456789abcdef", hexu[] = "0123456789ABCDEF";
    int r;
    char *s;
    size_t m;

    if ((r = add_lit(lits, nl, al, dup_n((const char *)v, n), n)) < 0)
        return r;
    if (n * 2 < MAXTOK) {
        for (int up = 0; up < 2; up++) {
            const char *hx = up ? hexu : hexl;
            if (!(s = malloc(n * 2 + 1)))
                return -ENOMEM;
            for (size_t i = 0; i < n; i++) {
                s[2 * i] = hx[v[i] >> 4];
                s[2 * i + 1] = hx[v[i] & 15];
            }
            s[2 * n] = '\0';
            if ((r = add_lit(lits, nl, al, s, 2 * n)) < 0)
                return r;
        }
    }
    if (n * 2 < MAXTOK) {
        /* base64 whole (padded or not) and the stable core at each 3-byte alignment, for a
         * secret embedded in a longer encoded text (e.g. "Basic base64(user:secret)"). */
        unsigned char *tmp = malloc(n + 2);
        if (!tmp)
            return -ENOMEM;
        for (int a = 0; a < 2; a++) {
            const char *alpha = a ? B64URL : B64STD;
            for (int pad = 0; pad < 2; pad++) {
                m = 0;
                s = b64_encode(v, n, alpha, pad, &m);
                if ((r = add_lit(lits, nl, al, s, m)) < 0)
                    goto fail;
            }
            for (size_t k = 0; k < 3; k++) {
                size_t drop = k == 0 ? 0 : k + 1, t = k + n;
                memset(tmp, 0, k);
                memcpy(tmp + k, v, n);
                if (!(s = b64_encode(tmp, t, alpha, false, &m)))
                    goto nomem;
                if (t % 3)
                    m--; /* the last character mixes in the following byte */
                if (m <= drop) {
                    free(s);
                    continue;
                }
                memmove(s, s + drop, m - drop);
                s[m - drop] = '\0';
                if ((r = add_lit(lits, nl, al, s, m - drop)) < 0)
                    goto fail;
            }
        }
        free(tmp);
        goto b64_done;
    nomem:
        r = -ENOMEM;
    fail:
        free(tmp);
        return r;
    }
b64_done:
    if (n * 3 < MAXTOK) {
        for (int variant = 0; variant < 3; variant++) {
            const char *hx = variant == 1 ? hexl : hexu;
            bool changed = false;
            size_t j = 0;
            if (!(s = malloc(n * 3 + 1)))
                return -ENOMEM;
            for (size_t i = 0; i < n; i++) {
                unsigned char c = v[i];
                if (IS(c, C_ALNUM) || c == '-' || c == '.' || c == '_' || c == '~')
                    s[j++] = (char)c;
                else if (variant == 2 && c == ' ') {
                    s[j++] = '+';
                    changed = true;
                } else {
                    s[j++] = '%';
                    s[j++] = hx[c >> 4];
                    s[j++] = hx[c & 15];
                    changed = true;
                }
            }
            s[j] = '\0';
            if (!changed) {
                free(s);
                continue;
            }
            if ((r = add_lit(lits, nl, al, s, j)) < 0)
                return r;
        }
    }
    return 0;
}

static int lit_cmp(const void *a, const void *b)
{
    const struct lit *x = a, *y = b;
    unsigned char cx = (unsigned char)x->s[0], cy = (unsigned char)y->s[0];
    if (cx != cy)
        return cx < cy ? -1 : 1;
    return x->n > y->n ? -1 : x->n < y->n ? 1 : 0;
}

void tc_redact_stream_free(struct tc_redact_stream *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nlits; i++)
        free(s->lits[i].s);
    free(s->lits);
    tc_buf_free(&s->pend);
    free(s);
}

int tc_redact_stream_new(const struct tc_redactor *r, const char *const *secrets, size_t nsecrets,
                         struct tc_redact_stream **ret)
{
    struct tc_redact_stream *s;
    size_t alloc = 0;
    int rc;

    if (!r || nsecrets > TC_REDACT_MAX_SECRETS)
        return -EINVAL;
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->r = r;
    tc_buf_init(&s->pend, SIZE_MAX / 2);
    for (size_t i = 0; i < nsecrets; i++) {
        if (!secrets[i])
            continue;
        size_t n = strnlen(secrets[i], MAXTOK);
        if (n < TC_REDACT_MIN_SECRET || n >= MAXTOK)
            continue;
        if ((rc = secret_forms((const unsigned char *)secrets[i], n, &s->lits, &s->nlits, &alloc)) <
            0)
            goto fail;
    }
    if (s->nlits)
        qsort(s->lits, s->nlits, sizeof(*s->lits), lit_cmp);
    {
        size_t j = 0;
        for (unsigned c = 0; c < 256; c++) {
            s->bucket[c] = j;
            while (j < s->nlits && (unsigned char)s->lits[j].s[0] == c)
                j++;
        }
        s->bucket[256] = j;
    }
    memcpy(s->pair, r->pair, sizeof(s->pair));
    s->settle_lines = true;
    for (size_t i = 0; i < s->nlits; i++)
        if (memchr(s->lits[i].s, '\n', s->lits[i].n))
            s->settle_lines = false;
    for (size_t i = 0; i < r->npaths; i++)
        if (memchr(r->paths[i], '\n', r->pathlen[i]))
            s->settle_lines = false;
    for (size_t i = 0; i < s->nlits; i++) {
        pair_set(s->pair, (unsigned char)s->lits[i].s[0], (unsigned char)s->lits[i].s[1]);
        pair_set(s->secpair, (unsigned char)s->lits[i].s[0], (unsigned char)s->lits[i].s[1]);
    }
    if ((rc = tc_buf_append(&s->pend, "", 0)) < 0) /* data is never NULL from here on */
        goto fail;
    *ret = s;
    return 0;
fail:
    tc_redact_stream_free(s);
    return rc;
}

/* ---- matchers: b[p] is the candidate, [lo, p) context, [p, end) what may be read ---- */

static size_t run_len(const unsigned char *b, size_t p, size_t end, const uint8_t *set, size_t max)
{
    size_t q = p;
    while (q < end && q - p < max && set[b[q]])
        q++;
    return q - p;
}

static inline bool has_prefix_n(const unsigned char *b, size_t p, size_t end, const char *lit,
                                size_t n)
{
    return end - p >= n && memcmp(b + p, lit, n) == 0;
}
#define has_prefix(b, p, end, lit) has_prefix_n(b, p, end, "" lit, sizeof(lit) - 1)

/* A token made of a prefix and a run of set bytes: min..MAX_RUN long run, not glued to word
 * characters on either side. A run reaching MAX_RUN is swallowed to its end (ST_RUN). */
static bool token(const unsigned char *b, size_t p, size_t end, size_t prefix, const uint8_t *set,
                  size_t min, int rule, struct match *m)
{
    if (p > 0 && IS(b[p - 1], C_B64URL))
        return false;
    size_t n = run_len(b, p + prefix, end, set, MAX_RUN);
    if (n < min)
        return false;
    size_t q = p + prefix + n;
    if (n == MAX_RUN) {
        *m = (struct match){0, q - p, rule, ST_RUN, set};
        return true;
    }
    if (q < end && IS(b[q], C_ALNUM))
        return false;
    *m = (struct match){0, q - p, rule, ST_NORMAL, NULL};
    return true;
}

static bool m_aws(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    static const char *const pfx[] = {"AKIA", "ASIA", "AGPA", "AIDA", "AROA",
                                      "AIPA", "ANPA", "ANVA", "ABIA", "ACCA"};
    if (end - p < 20 || (p > 0 && IS(b[p - 1], C_ALNUM)))
        return false;
    for (size_t i = 0; i < TC_ARRAY_SIZE(pfx); i++)
        if (memcmp(b + p, pfx[i], 4) == 0) {
            for (size_t k = 4; k < 20; k++)
                if (!IS(b[p + k], C_UPNUM))
                    return false;
            if (p + 20 < end && IS(b[p + 20], C_ALNUM))
                return false;
            *m = (struct match){0, 20, R_AWS_ACCESS_KEY, ST_NORMAL, NULL};
            return true;
        }
    return false;
}

static bool m_google(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    if (!has_prefix(b, p, end, "AIza") || (p > 0 && IS(b[p - 1], C_B64URL)))
        return false;
    size_t n = run_len(b, p + 4, end, set_b64url, 36);
    if (n != 35)
        return false;
    *m = (struct match){0, 39, R_GOOGLE_API_KEY, ST_NORMAL, NULL};
    return true;
}

static bool m_github(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    if (end - p > 4 && b[p + 1] == 'h' && strchr("pousr", b[p + 2]) && b[p + 2] && b[p + 3] == '_')
        return token(b, p, end, 4, set_alnum, 36, R_GITHUB_TOKEN, m);
    if (has_prefix(b, p, end, "github_pat_"))
        return token(b, p, end, 11, set_github_pat, 22, R_GITHUB_TOKEN, m);
    return false;
}

static bool m_slack(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    if (end - p > 5 && b[p + 1] == 'o' && b[p + 2] == 'x' && b[p + 3] &&
        strchr("abposr", b[p + 3]) && b[p + 4] == '-')
        return token(b, p, end, 5, set_slack, 10, R_SLACK_TOKEN, m);
    if (has_prefix(b, p, end, "xapp-"))
        return token(b, p, end, 5, set_slack, 10, R_SLACK_TOKEN, m);
    return false;
}

static bool m_slack_webhook(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    size_t pre;
    if (has_prefix(b, p, end, "https://hooks.slack.com/services/"))
        pre = 33;
    else if (has_prefix(b, p, end, "http://hooks.slack.com/services/"))
        pre = 32;
    else
        return false;
    size_t q = p + pre;
    while (q < end && q - p < MAX_VALUE && (IS(b[q], C_B64URL) || b[q] == '/'))
        q++;
    if (q - p - pre < 16)
        return false;
    *m = (struct match){0, q - p, R_SLACK_WEBHOOK, ST_NORMAL, NULL};
    return true;
}

/* sk_live_/rk_test_ (Stripe), sk-ant- (Anthropic), sk- (OpenAI). */
static bool m_sk(const struct tc_redactor *r, const unsigned char *b, size_t p, size_t end,
                 struct match *m)
{
    if (p > 0 && (IS(b[p - 1], C_B64URL)))
        return false;
    if (r->on[R_STRIPE_KEY] && end - p > 8 && (b[p] == 's' || b[p] == 'r') && b[p + 1] == 'k' &&
        (memcmp(b + p + 2, "_live_", 6) == 0 || memcmp(b + p + 2, "_test_", 6) == 0))
        return token(b, p, end, 8, set_alnum, 10, R_STRIPE_KEY, m);
    if (b[p] != 's' || !has_prefix(b, p, end, "sk-"))
        return false;
    if (r->on[R_ANTHROPIC_KEY] && has_prefix(b, p, end, "sk-ant-"))
        return token(b, p, end, 7, set_b64url, 20, R_ANTHROPIC_KEY, m);
    if (r->on[R_OPENAI_KEY]) {
        size_t n = run_len(b, p + 3, end, set_b64url, MAX_RUN);
        bool digit = false, alpha = false;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = b[p + 3 + i];
            digit |= c >= '0' && c <= '9';
            alpha |= IS(c, C_ALNUM) && !(c >= '0' && c <= '9');
        }
        if (n >= 20 && digit && alpha)
            return token(b, p, end, 3, set_b64url, 20, R_OPENAI_KEY, m);
    }
    return false;
}

static int b64url_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-' || c == '+')
        return 62;
    if (c == '_' || c == '/')
        return 63;
    return -1;
}

/* Decode up to cap bytes of a base64url run. */
static size_t b64url_decode(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n && o < cap; i++) {
        int v = b64url_val(in[i]);
        if (v < 0)
            break;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return o;
}

/* header.payload.signature where header decodes to a JSON object with "alg" and the payload to
 * a JSON object. */
static bool m_jwt(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    unsigned char hdr[512];
    if (!has_prefix(b, p, end, "eyJ") || (p > 0 && (IS(b[p - 1], C_B64URL) || b[p - 1] == '.')))
        return false;
    size_t lim = end - p < MAXTOK - 1 ? end : p + MAXTOK - 1;
    size_t h = run_len(b, p, lim, set_b64url, MAXTOK);
    if (h < 10 || p + h >= lim || b[p + h] != '.')
        return false;
    size_t q = p + h + 1;
    size_t pl = run_len(b, q, lim, set_b64url, MAXTOK);
    if (pl < 4 || b[q] != 'e' || b[q + 1] != 'y' || q + pl >= lim || b[q + pl] != '.')
        return false;
    q += pl + 1;
    q += run_len(b, q, lim, set_b64url, MAXTOK);
    size_t hn = b64url_decode(b + p, h, hdr, sizeof(hdr));
    if (hn < 8 || hdr[0] != '{' || !memmem(hdr, hn, "\"alg\"", 5))
        return false;
    if (q < end && (IS(b[q], C_B64URL) || b[q] == '.'))
        return false; /* glued to more token text (or capped): not a clean JWT */
    *m = (struct match){0, q - p, R_JWT, ST_NORMAL, NULL};
    return true;
}

/* "-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----": the block is swallowed in ST_PEM. */
static bool m_pem(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    if (!has_prefix(b, p, end, "-----BEGIN "))
        return false;
    size_t q = p + 11;
    while (q < end && q - p < 96 && (IS(b[q], C_UPNUM) || b[q] == ' '))
        q++;
    size_t wl = q - p;
    if (wl >= 11 + 11 && memcmp(b + q - 11, "PRIVATE KEY", 11) == 0 &&
        has_prefix(b, q, end, "-----")) {
        *m = (struct match){0, wl + 5, R_PRIVATE_KEY, ST_PEM, NULL};
        return true;
    }
    if (wl >= 11 + 17 && memcmp(b + q - 17, "PRIVATE KEY BLOCK", 17) == 0 &&
        has_prefix(b, q, end, "-----")) {
        *m = (struct match){0, wl + 5, R_PRIVATE_KEY, ST_PEM, NULL};
        return true;
    }
    return false;
}

/* Length of a "-----END ...-----" line starting at q, or 0. */
static size_t pem_end_len(const unsigned char *b, size_t q, size_t end)
{
    if (!has_prefix(b, q, end, "-----END "))
        return 0;
    size_t k = q + 9;
    while (k < end && k - q < 96 && (IS(b[k], C_UPNUM) || b[k] == ' '))
        k++;
    if (!has_prefix(b, k, end, "-----"))
        return 0;
    return k + 5 - q;
}

/* scheme://user:pass@ -> scheme://[REDACTED]@ */
static bool m_url_credentials(const unsigned char *b, size_t p, size_t end, struct match *m)
{
    if (end - p < 4 || b[p + 1] != '/' || b[p + 2] != '/' || p == 0 || !IS(b[p - 1], C_ALNUM))
        return false;
    size_t u = p + 3, q = u, colon = 0;
    while (q < end && q - u < MAX_VALUE) {
        unsigned char c = b[q];
        if (c == '@')
            break;
        if (IS(c, C_SPACE) || c == '/' || c == '?' || c == '#' || c == '"' || c == '\'' ||
            c == '<' || c == '>' || c == '`' || c == '\\' || c == 0)
            return false;
        if (c == ':' && !colon)
            colon = q;
        q++;
    }
    if (q >= end || b[q] != '@' || !colon || colon + 1 == q)
        return false;
    *m = (struct match){3, q - u, R_URL_CREDENTIALS, ST_NORMAL, NULL};
    return true;
}

static int parse_octet(const unsigned char *b, size_t *q, size_t end)
{
    size_t s = *q;
    int v = 0;
    while (*q < end && *q - s < 3 && b[*q] >= '0' && b[*q] <= '9')
        v = v * 10 + (b[(*q)++] - '0');
    if (*q == s || (*q - s > 1 && b[s] == '0') || v > 255)
        return -1;
    if (*q < end && b[*q] >= '0' && b[*q] <= '9')
        return -1;
    return v;
}

/* IPv4 of the classes the redactor has on: private (10/8, 172.16/12, 192.168/16), loopback
 * (127/8), link-local (169.254/16). Documentation and public addresses never match. */
static bool m_ipv4(const struct tc_redactor *r, const unsigned char *b, size_t p, size_t end,
                   struct match *m)
{
    int o[4];
    size_t q = p;
    if (p > 0 && (IS(b[p - 1], C_ALNUM) || b[p - 1] == '.' || b[p - 1] == '_'))
        return false;
    for (int i = 0; i < 4; i++) {
        if (i > 0) {
            if (q >= end || b[q] != '.')
                return false;
            q++;
        }
        if ((o[i] = parse_octet(b, &q, end)) < 0)
            return false;
    }
    if (q < end && (IS(b[q], C_ALNUM) || b[q] == '_' ||
                    (b[q] == '.' && q + 1 < end && b[q + 1] >= '0' && b[q + 1] <= '9')))
        return false;
    int rule =
        o[0] == 127                    ? R_LOOPBACK_IP
        : (o[0] == 169 && o[1] == 254) ? R_LINK_LOCAL_IP
        : (o[0] == 10 || (o[0] == 172 && o[1] >= 16 && o[1] <= 31) || (o[0] == 192 && o[1] == 168))
            ? R_PRIVATE_IP
            : -1;
    if (rule < 0 || !r->on[rule])
        return false;
    *m = (struct match){0, q - p, rule, ST_NORMAL, NULL};
    return true;
}

/* IPv6 of the classes the redactor has on: unique-local fc00::/7 (private), loopback ::1,
 * link-local fe80::/10. */
static bool m_ipv6(const struct tc_redactor *r, const unsigned char *b, size_t p, size_t end,
                   struct match *m)
{
    size_t q = p;
    int groups = 0;
    bool dbl = false;
    unsigned first = 0;

    if (p > 0 && (IS(b[p - 1], C_KEY) || b[p - 1] == ':'))
        return false;
    if (b[p] == ':') {
        /* only "::1" starts with a colon here */
        if (end - p < 3 || b[p + 1] != ':' || b[p + 2] != '1')
            return false;
        q = p + 3;
        if (q < end && (IS(b[q], C_KEY) || b[q] == ':'))
            return false;
        if (p > 0 &&
            b[p - 1] == '[') { /* "[::1]" is a slice in Python unless it looks like a URL host */
            bool url = p >= 2 && (b[p - 2] == '/' || b[p - 2] == '@');
            bool port = q + 1 < end && b[q] == ']' && b[q + 1] == ':';
            if (!url && !port)
                return false;
        }
        if (!r->on[R_LOOPBACK_IP])
            return false;
        *m = (struct match){0, 3, R_LOOPBACK_IP, ST_NORMAL, NULL};
        return true;
    }
    while (groups < 8) {
        size_t s = q;
        unsigned v = 0;
        while (q < end && q - s < 5 && IS(b[q], C_HEX))
            v = v * 16 + (unsigned)(b[q] <= '9' ? b[q] - '0' : (b[q] | 0x20) - 'a' + 10), q++;
        size_t n = q - s;
        if (n > 4)
            return false;
        if (n == 0) {
            if (!(dbl && q > p && b[q - 1] == ':'))
                return false; /* empty group only right after "::" at the end */
            break;
        }
        if (groups == 0) {
            if (n != 4)
                return false;
            first = v;
        }
        groups++;
        if (q + 1 < end && b[q] == ':' && b[q + 1] == ':') {
            if (dbl)
                return false;
            dbl = true;
            q += 2;
            if (q >= end || !IS(b[q], C_HEX))
                break;
            continue;
        }
        if (q < end && b[q] == ':' && q + 1 < end && IS(b[q + 1], C_HEX)) {
            q++;
            continue;
        }
        break;
    }
    if (!(dbl ? groups < 8 : groups == 8))
        return false;
    if (q < end && (IS(b[q], C_KEY) || b[q] == ':'))
        return false;
    int rule = (first & 0xfe00) == 0xfc00   ? R_PRIVATE_IP
               : (first & 0xffc0) == 0xfe80 ? R_LINK_LOCAL_IP
                                            : -1;
    if (rule < 0 || !r->on[rule])
        return false;
    *m = (struct match){0, q - p, rule, ST_NORMAL, NULL};
    return true;
}

static bool m_host_path(const struct tc_redactor *r, const unsigned char *b, size_t p, size_t end,
                        struct match *m)
{
    if (p > 0 && (IS(b[p - 1], C_PATH) || b[p - 1] == '~' || b[p - 1] == '/'))
        return false;
    for (size_t i = 0; i < r->npaths; i++) {
        size_t n = r->pathlen[i];
        if (end - p >= n && memcmp(b + p, r->paths[i], n) == 0 &&
            (p + n >= end || !IS(b[p + n], C_PATH))) {
            *m = (struct match){0, n, R_HOST_PATH, ST_NORMAL, NULL};
            return true;
        }
    }
    if (has_prefix(b, p, end, "/home/")) {
        size_t n = run_len(b, p + 6, end, set_b64url, 65);
        if (n == 0 || n > 64)
            return false;
        size_t q = p + 6 + n;
        if (q < end && IS(b[q], C_PATH))
            return false;
        *m = (struct match){0, q - p, R_HOST_PATH, ST_NORMAL, NULL};
        return true;
    }
    if (has_prefix(b, p, end, "/root") && (p + 5 >= end || !IS(b[p + 5], C_PATH))) {
        *m = (struct match){0, 5, R_HOST_PATH, ST_NORMAL, NULL};
        return true;
    }
    return false;
}

static bool ieq_suffix(const unsigned char *k, size_t kn, const char *w, size_t n, size_t *ret_pos)
{
    if (kn < n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = k[kn - n + i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c | 0x20);
        if (c == '-')
            c = '_';
        if (c != (unsigned char)w[i])
            return false;
    }
    *ret_pos = kn - n;
    return true;
}

static bool key_is_secret(const unsigned char *k, size_t kn)
{
#define W(s)                                                                                       \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }
    static const struct {
        const char *s;
        size_t n;
    } words[] = {W("password"), W("passwd"),  W("passphrase"), W("secret"),     W("token"),
                 W("apikey"),   W("api_key"), W("access_key"), W("secret_key"), W("private_key")};
#undef W
    /* cheap reject: the key must end in one of the words' last letters */
    unsigned char last = k[kn - 1] | 0x20;
    if (last != 'd' && last != 'e' && last != 't' && last != 'n' && last != 'y')
        return false;
    for (size_t i = 0; i < TC_ARRAY_SIZE(words); i++) {
        size_t pos;
        if (!ieq_suffix(k, kn, words[i].s, words[i].n, &pos))
            continue;
        if (pos == 0 || !IS(k[pos - 1], C_ALNUM))
            return true; /* password, DB_PASSWORD, --password, x.token */
        if (k[pos - 1] >= 'a' && k[pos - 1] <= 'z' && k[pos] >= 'A' && k[pos] <= 'Z')
            return true; /* dbPassword, apiToken */
        if (k[pos - 1] >= '0' && k[pos - 1] <= '9')
            return true;
    }
    return false;
}

static bool ieq(const unsigned char *a, size_t n, const char *w)
{
    if (strlen(w) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((a[i] | 0x20) != (unsigned char)(w[i] | 0x20))
            return false;
    return true;
}

static bool try_match(const struct tc_redact_stream *s, const unsigned char *b, size_t p,
                      size_t end, bool tokens_only, struct match *m);

/* KEY=value, KEY: value, "key": "value" where KEY names a secret; only the value is redacted. */
static bool m_assignment(const struct tc_redact_stream *s, const unsigned char *b, size_t p,
                         size_t end, struct match *m)
{
    size_t lo = p > LOOKBEHIND ? p - LOOKBEHIND : 0;
    size_t k = p, sep = 1;
    bool spaced = false, colon = b[p] == ':';

    if (colon) {
        if (p + 1 < end && (b[p + 1] == '/' || b[p + 1] == ':'))
            return false;
        if (p + 1 < end && b[p + 1] == '=')
            sep = 2, colon = false;
    } else {
        if (p + 1 < end && (b[p + 1] == '=' || b[p + 1] == '>' || b[p + 1] == '~'))
            return false;
        if (p > 0 && strchr("=!<>:+-*/%&|^", b[p - 1]) && b[p - 1])
            return false;
    }
    /* the key, right before the separator */
    while (k > lo && (b[k - 1] == ' ' || b[k - 1] == '\t'))
        k--, spaced = true;
    if (k > lo && (b[k - 1] == '"' || b[k - 1] == '\''))
        k--;
    size_t ke = k;
    while (k > lo && IS(b[k - 1], C_KEY))
        k--;
    if (ke == k || ke - k >= LOOKBEHIND - 8 || !key_is_secret(b + k, ke - k))
        return false;
    bool aws = memmem(b + k, ke - k, "aws", 3) || memmem(b + k, ke - k, "AWS", 3);

    /* the value */
    size_t v = p + sep;
    while (v < end && v - p < 32 && (b[v] == ' ' || b[v] == '\t'))
        v++, spaced = true;
    if (v >= end)
        return false;
    size_t keep, n;
    unsigned char q = b[v];
    if (q == '"' || q == '\'' || q == '`') {
        size_t e = v + 1;
        while (e < end && e - v <= MAX_VALUE && b[e] != q && b[e] != '\n' && b[e] != '\\' &&
               !IS(b[e], C_SPACE))
            e++;
        if (e >= end || b[e] != q)
            return false;
        keep = v + 1 - p;
        n = e - v - 1;
        if (n == 0)
            return false;
    } else {
        n = run_len(b, v, end, set_value, MAX_VALUE + 1);
        if (n == 0 || n > MAX_VALUE)
            return false;
        keep = v - p;
        size_t e = v + n;
        unsigned char after = e < end ? b[e] : 0;
        if (after == '(' || after == '[' || after == '{')
            return false; /* a call or subscript: code, not a value */
        bool ident = true, digits = true;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = b[v + i];
            if (!(IS(c, C_ALNUM) || c == '_' || c == '.') || (c >= '0' && c <= '9'))
                ident = false;
            if (!(c >= '0' && c <= '9'))
                digits = false;
        }
        if (n < 3 || digits)
            return false;
        if ((spaced || colon || after == ',' || after == ')') && ident)
            return false; /* code (token = other_name, f(token=tok)) or prose */
        static const char *const kw[] = {"none", "null", "true", "false", "nil", "undefined"};
        for (size_t i = 0; i < TC_ARRAY_SIZE(kw); i++)
            if (ieq(b + v, n, kw[i]))
                return false;
    }
    unsigned char c0 = b[p + keep];
    if (c0 == '$' || c0 == '%' || c0 == '<' || c0 == '[' || c0 == '{' || c0 == '*' || c0 == '&')
        return false; /* variable references, templates, placeholders, masks */
    /* a specific rule (or a leased secret) at the value labels it better */
    struct match sub;
    if (try_match(s, b, p + keep, end, true, &sub))
        return false;
    int rule = R_ASSIGNMENT;
    if (aws && n == 40 && s->r->on[R_AWS_SECRET_KEY])
        rule = R_AWS_SECRET_KEY;
    *m = (struct match){keep, n, rule, ST_NORMAL, NULL};
    return true;
}

static bool m_secret(const struct tc_redact_stream *s, const unsigned char *b, size_t p, size_t end,
                     struct match *m)
{
    if (end - p < 2 || !bit_get(s->secpair, (unsigned)b[p] << 8 | b[p + 1]))
        return false;
    for (size_t i = s->bucket[b[p]]; i < s->bucket[b[p] + 1]; i++) {
        const struct lit *l = &s->lits[i];
        if (l->n <= end - p && memcmp(b + p, l->s, l->n) == 0) {
            *m = (struct match){0, l->n, R_SECRET, ST_NORMAL, NULL};
            return true;
        }
    }
    return false;
}

static bool try_match(const struct tc_redact_stream *s, const unsigned char *b, size_t p,
                      size_t end, bool tokens_only, struct match *m)
{
    const struct tc_redactor *r = s->r;
    if (s->nlits && m_secret(s, b, p, end, m))
        return true;
    switch (b[p]) {
    case 'A':
        return (r->on[R_AWS_ACCESS_KEY] && m_aws(b, p, end, m)) ||
               (r->on[R_GOOGLE_API_KEY] && m_google(b, p, end, m));
    case 'g':
        return r->on[R_GITHUB_TOKEN] && m_github(b, p, end, m);
    case 'x':
        return r->on[R_SLACK_TOKEN] && m_slack(b, p, end, m);
    case 'h':
        return r->on[R_SLACK_WEBHOOK] && m_slack_webhook(b, p, end, m);
    case 's':
    case 'r':
        return m_sk(r, b, p, end, m);
    case 'e':
        return r->on[R_JWT] && m_jwt(b, p, end, m);
    case '-':
        return !tokens_only && r->on[R_PRIVATE_KEY] && m_pem(b, p, end, m);
    case '1':
        return !tokens_only && any_ip_rule(r) && m_ipv4(r, b, p, end, m);
    case 'f':
    case 'F':
        return !tokens_only && any_ip_rule(r) && m_ipv6(r, b, p, end, m);
    case '/':
        return !tokens_only && r->on[R_HOST_PATH] && m_host_path(r, b, p, end, m);
    case ':':
        if (tokens_only)
            return false;
        if (r->on[R_URL_CREDENTIALS] && m_url_credentials(b, p, end, m))
            return true;
        if (r->on[R_LOOPBACK_IP] && m_ipv6(r, b, p, end, m))
            return true;
        return r->on[R_ASSIGNMENT] && m_assignment(s, b, p, end, m);
    case '=':
        return !tokens_only && r->on[R_ASSIGNMENT] && m_assignment(s, b, p, end, m);
    default:
        /* configured host paths start with '/', handled above */
        return false;
    }
}

/* ---- the scanner ---- */

static int emit_redaction(struct tc_redact_stream *s, int rule, struct tc_buf *out)
{
    char tag[48];
    size_t n = strlen(rule_names[rule]);
    memcpy(tag, "[REDACTED:", 10);
    memcpy(tag + 10, rule_names[rule], n);
    tag[10 + n] = ']';
    s->counts[rule]++;
    return tc_buf_append(out, tag, n + 11);
}

static int scan(struct tc_redact_stream *s, bool final, struct tc_buf *out)
{
    const unsigned char *b = (const unsigned char *)s->pend.data;
    size_t len = s->pend.len;
    size_t limit = final ? len : (len > MAXTOK ? len - MAXTOK : 0);
    size_t p = s->scan, lit = p;
    if (!final && s->settle_lines && len > p) {
        const unsigned char *nl = memrchr(b + p, '\n', len - p);
        if (nl && (size_t)(nl - b) + 1 > limit)
            limit = (size_t)(nl - b) + 1;
    }
    int rc = 0;

    while (p < limit) {
        if (s->state == ST_PEM) {
            /* swallow up to and including the END line, or TC_REDACT_MAX_PEM bytes */
            size_t stop = limit;
            if (TC_REDACT_MAX_PEM - s->swallowed < stop - p)
                stop = p + (TC_REDACT_MAX_PEM - s->swallowed);
            size_t q = p;
            size_t el = 0;
            while (q < stop) {
                const unsigned char *d = memchr(b + q, '-', stop - q);
                if (!d) {
                    q = stop;
                    break;
                }
                q = (size_t)(d - b);
                size_t wend = len - q < MAXTOK ? len : q + MAXTOK;
                if ((el = pem_end_len(b, q, wend)))
                    break;
                q++;
            }
            s->swallowed += q - p;
            if (el) {
                p = q + el;
                s->state = ST_NORMAL;
            } else {
                p = q;
                if (s->swallowed >= TC_REDACT_MAX_PEM)
                    s->state = ST_NORMAL;
            }
            lit = p;
            continue;
        }
        if (s->state == ST_RUN) {
            while (p < limit && s->run_set[b[p]])
                p++;
            if (p < limit)
                s->state = ST_NORMAL;
            lit = p;
            continue;
        }
        while (p < limit && !bit_get(s->pair, (unsigned)b[p] << 8 | b[p + 1]))
            p++;
        if (p >= limit)
            break;
        struct match m;
        size_t end = len - p < MAXTOK ? len : p + MAXTOK;
        if (!try_match(s, b, p, end, false, &m)) {
            p++;
            continue;
        }
        if ((rc = tc_buf_append(out, b + lit, p + m.keep - lit)) < 0 ||
            (rc = emit_redaction(s, m.rule, out)) < 0)
            return rc;
        p += m.keep + m.len;
        lit = p;
        s->state = m.next;
        s->run_set = m.run_set;
        s->swallowed = 0;
    }
    if (p > len)
        p = len;
    if (lit < p && (rc = tc_buf_append(out, b + lit, p - lit)) < 0)
        return rc;
    s->scan = p;
    return 0;
}

static void compact(struct tc_redact_stream *s)
{
    if (s->scan < CHUNK)
        return;
    size_t from = s->scan - LOOKBEHIND;
    memmove(s->pend.data, s->pend.data + from, s->pend.len - from + 1);
    s->pend.len -= from;
    s->scan -= from;
}

int tc_redact_stream_feed(struct tc_redact_stream *s, const char *data, size_t len,
                          struct tc_buf *out)
{
    int r;
    if (s->finished)
        return -EINVAL;
    while (len > 0) {
        size_t n = len < CHUNK ? len : CHUNK;
        if ((r = tc_buf_append(&s->pend, data, n)) < 0)
            return r;
        data += n;
        len -= n;
        if ((r = scan(s, false, out)) < 0)
            return r;
        compact(s);
    }
    return 0;
}

int tc_redact_stream_finish(struct tc_redact_stream *s, struct tc_buf *out)
{
    int r;
    if (s->finished)
        return -EINVAL;
    s->finished = true;
    if ((r = scan(s, true, out)) < 0)
        return r;
    tc_buf_reset(&s->pend);
    s->scan = 0;
    return 0;
}

json_t *tc_redact_stream_counts(const struct tc_redact_stream *s)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (int i = 0; i < R__COUNT; i++)
        if (s->counts[i] &&
            json_object_set_new(o, rule_names[i], json_integer((json_int_t)s->counts[i])) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

size_t tc_redact_stream_total(const struct tc_redact_stream *s)
{
    size_t t = 0;
    for (int i = 0; i < R__COUNT; i++)
        t += s->counts[i];
    return t;
}

int tc_redact_buffer(const struct tc_redactor *r, const char *const *secrets, size_t nsecrets,
                     const char *data, size_t len, char **ret_out, size_t *ret_len, json_t *counts)
{
    struct tc_redact_stream *s = NULL;
    struct tc_buf out;
    int rc;

    tc_buf_init(&out, SIZE_MAX / 2);
    if ((rc = tc_redact_stream_new(r, secrets, nsecrets, &s)) < 0)
        return rc;
    /* reserve about the input's size up front: one allocation instead of log2(len) */
    if ((rc = tc_buf_append(&out, data, len)) < 0)
        goto out;
    tc_buf_reset(&out);
    if ((rc = tc_redact_stream_feed(s, data, len, &out)) < 0 ||
        (rc = tc_redact_stream_finish(s, &out)) < 0)
        goto out;
    if (counts) {
        for (int i = 0; i < R__COUNT; i++) {
            if (!s->counts[i])
                continue;
            json_int_t prev = json_integer_value(json_object_get(counts, rule_names[i]));
            if (json_object_set_new(counts, rule_names[i],
                                    json_integer(prev + (json_int_t)s->counts[i])) < 0) {
                rc = -ENOMEM;
                goto out;
            }
        }
    }
    if (!(*ret_out = tc_buf_steal(&out, ret_len))) {
        rc = -ENOMEM;
        goto out;
    }
    rc = 0;
out:
    tc_buf_free(&out);
    tc_redact_stream_free(s);
    return rc;
}
