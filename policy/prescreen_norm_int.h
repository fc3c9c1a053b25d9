/* Internal to the pre-screen's normaliser: what its three files share. prescreen_norm.c: tokens,
 * small decoders, constant tables (aliases, variables), the normalised text and the entry point;
 * prescreen_pyjs.c: Python and JavaScript; prescreen_shell.c: the shell. */
#pragma once
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/prescreen.h"
#include "policy/prescreen_norm.h"

/* pyjs and shell entry points (their files) */
int pn_normalise_pyjs(bool py, const char *code, size_t len, int depth, uint32_t origin,
                      struct ps_norm *n);
int pn_normalise_shell(const char *code, size_t len, int depth, uint32_t origin, struct ps_norm *n);

#include <stdio.h>
#include <string.h>

#include "policy/prescreen.h"

enum tt { T_NAME, T_STR, T_NUM, T_OP, T_NL };
enum {
    F_DECODED = 1,   /* produced by decoding (base64, hex, char codes, escapes, reversal, ...) */
    F_GLUED = 2,     /* shell: glued to the word before */
    F_ASSIGN = 4,    /* shell: NAME= with the value still to come */
    F_VAR = 8,       /* the value of a constant variable, put in its place */
    F_FOLDED = 16,   /* assembled from constant pieces (concatenation, format, replace, ...) */
    F_TEMPLATE = 32, /* an f-string or template literal that interpolates something */
    F_COMPUTED = 64, /* shell: a word built at run time (adjacent expansions, ${x:1:2}, ...) */
    F_GETATTR = 128, /* a name that getattr()/Reflect.get() looked up */
};
#define F_SH_ADJ F_GETATTR /* shell: a word of expansions side by side ("$a$b") */

struct tok {
    uint8_t t, flags;
    uint32_t src, off, n; /* text is pool[off .. off+n) */
    long long num;        /* T_NUM: value, -1 if not a plain integer */
};

struct toks {
    struct tok *v;
    size_t n, alloc;
    struct tc_buf pool;
};

#define MAX_TOKENS  (2u << 20)
#define MAX_PASSES  8
#define MAX_ALIASES 256
#define MAX_VARS    256
#define MAX_VALUE   (64 * 1024)

struct kv {
    char *k, *v;
    size_t kn;
};
#define KV_SLOTS (2 * MAX_ALIASES) /* open addressing, at most half full */
struct kvs {
    struct kv e[MAX_ALIASES];
    size_t n;
    uint16_t slot[KV_SLOTS]; /* index + 1 into e, 0: empty */
};

static inline void toks_init(struct toks *ts)
{
    *ts = (struct toks){0};
    tc_buf_init(&ts->pool, 64u << 20);
}

static inline void toks_free(struct toks *ts)
{
    free(ts->v);
    tc_buf_free(&ts->pool);
}

static inline const char *ttext(const struct toks *ts, const struct tok *t)
{
    return ts->pool.data ? ts->pool.data + t->off : "";
}

static inline bool teq(const struct toks *ts, size_t i, enum tt type, const char *s)
{
    if (i >= ts->n || ts->v[i].t != type)
        return false;
    size_t n = strlen(s);
    return ts->v[i].n == n && memcmp(ttext(ts, &ts->v[i]), s, n) == 0;
}
#define IS_OP(ts, i, s)   teq(ts, i, T_OP, s)
#define IS_NAME(ts, i, s) teq(ts, i, T_NAME, s)
static inline bool is_t(const struct toks *ts, size_t i, enum tt type)
{
    return i < ts->n && ts->v[i].t == type;
}

static inline int push(struct toks *ts, enum tt t, uint32_t src, const char *s, size_t n, int flags,
                       long long num)
{
    int r;
    if (ts->n >= MAX_TOKENS)
        return -E2BIG;
    if (ts->n == ts->alloc) {
        size_t na = ts->alloc ? ts->alloc * 2 : 256;
        struct tok *nv = realloc(ts->v, na * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        ts->v = nv;
        ts->alloc = na;
    }
    size_t off = ts->pool.len;
    if ((r = tc_buf_append(&ts->pool, s, n)) < 0)
        return r;
    ts->v[ts->n++] = (struct tok){(uint8_t)t, (uint8_t)flags, src, (uint32_t)off, (uint32_t)n, num};
    return 0;
}

static inline int copy_tok(struct toks *dst, const struct toks *src, size_t i)
{
    const struct tok *t = &src->v[i];
    return push(dst, (enum tt)t->t, t->src, ttext(src, t), t->n, t->flags, t->num);
}

static inline uint32_t kv_hash(const char *k, size_t kn)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < kn; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

/* The slot of key k: where it is, or the empty slot where it would go. */
static inline size_t kv_slot(const struct kvs *m, const char *k, size_t kn)
{
    size_t s = kv_hash(k, kn) % KV_SLOTS;
    while (m->slot[s]) {
        const struct kv *e = &m->e[m->slot[s] - 1];
        if (e->kn == kn && memcmp(e->k, k, kn) == 0)
            break;
        s = (s + 1) % KV_SLOTS;
    }
    return s;
}

/* small decoders, constant tables, the normalised text (prescreen_norm.c) */
int pn_b64val(unsigned char c);
bool pn_b64_decode(const char *s, size_t n, struct tc_buf *out);
bool pn_hex_decode(const char *s, size_t n, struct tc_buf *out);
bool pn_rot13(const char *s, size_t n, struct tc_buf *out);
bool pn_pct_decode(const char *s, size_t n, struct tc_buf *out);
int pn_put_utf8(struct tc_buf *b, unsigned long cp);
size_t pn_unescape1(const char *s, size_t n, struct tc_buf *out, bool *dec, int *err);
const char *pn_kv_get(const struct kvs *m, const char *k, size_t kn);
int pn_kv_set(struct kvs *m, const char *k, size_t kn, const char *v, size_t vn);
void pn_kv_free(struct kvs *m);
int pn_out_bytes(struct ps_norm *n, const char *s, size_t len, uint32_t src);
int pn_add_note(struct ps_norm *n, const char *rule, int sev, uint32_t src, const char *msg);
int pn_add_job(struct ps_norm *n, enum ps_lang lang, const char *s, size_t len, uint32_t src,
               int depth);

/* s is one of the NULL-terminated list */
static inline bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}
