/* Normalisation for the pre-screener: undo the cheap tricks that hide a call from a regex.
 *
 * Python and JavaScript: a small lexer (comments dropped, string escapes decoded), then folding
 * passes over the tokens ("a"+"b", chr(N), String.fromCharCode, b64decode/atob/Buffer.from,
 * codecs.decode(..,"rot13"), bytes.fromhex, [::-1], "".join([...]), getattr(x,"n") -> x.n,
 * x["n"] -> x.n, __import__/importlib.import_module/require("m") -> m), then import/assignment
 * aliases are resolved while the tokens are written out as one normalised text.
 * Shell: words are rebuilt the way the shell would (quotes and backslashes removed, $'..'
 * decoded, constant variables and aliases expanded, ${IFS} -> space), and echo/printf pipelines
 * through base64 -d, xxd -r -p, rev or a rot13 tr are evaluated.
 * Decoded payloads and strings handed to exec/eval/system are queued to be scanned again.
 * Everything is bounded: passes, aliases, variables, text size and decode depth. */
#include "policy/prescreen_norm.h"

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

static void toks_init(struct toks *ts)
{
    *ts = (struct toks){0};
    tc_buf_init(&ts->pool, 64u << 20);
}

static void toks_free(struct toks *ts)
{
    free(ts->v);
    tc_buf_free(&ts->pool);
}

static const char *ttext(const struct toks *ts, const struct tok *t)
{
    return ts->pool.data ? ts->pool.data + t->off : "";
}

static bool teq(const struct toks *ts, size_t i, enum tt type, const char *s)
{
    if (i >= ts->n || ts->v[i].t != type)
        return false;
    size_t n = strlen(s);
    return ts->v[i].n == n && memcmp(ttext(ts, &ts->v[i]), s, n) == 0;
}
#define IS_OP(ts, i, s)   teq(ts, i, T_OP, s)
#define IS_NAME(ts, i, s) teq(ts, i, T_NAME, s)
static bool is_t(const struct toks *ts, size_t i, enum tt type)
{
    return i < ts->n && ts->v[i].t == type;
}

static int push(struct toks *ts, enum tt t, uint32_t src, const char *s, size_t n, int flags,
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

static int copy_tok(struct toks *dst, const struct toks *src, size_t i)
{
    const struct tok *t = &src->v[i];
    return push(dst, (enum tt)t->t, t->src, ttext(src, t), t->n, t->flags, t->num);
}

/* ---- small decoders ---- */

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* base64 (standard or URL-safe, whitespace ignored); false unless it is plausibly base64 */
static bool b64_decode(const char *s, size_t n, struct tc_buf *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        int v = b64val(c);
        if (v < 0)
            return false;
        chars++;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char ch = (char)(acc >> bits);
            if (tc_buf_append(out, &ch, 1) < 0)
                return false;
        }
    }
    return chars >= 2;
}

static bool hex_decode(const char *s, size_t n, struct tc_buf *out)
{
    int hi = -1;
    size_t digits = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\n' || c == ':' || c == '\t')
            continue;
        if (c == '\\' && i + 1 < n && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
            i++;
            continue;
        }
        int v = hexval(c);
        if (v < 0)
            return false;
        digits++;
        if (hi < 0)
            hi = v;
        else {
            char ch = (char)(hi << 4 | v);
            hi = -1;
            if (tc_buf_append(out, &ch, 1) < 0)
                return false;
        }
    }
    return digits >= 2 && hi < 0;
}

static bool rot13(const char *s, size_t n, struct tc_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'a' && c <= 'z')
            c = (char)('a' + (c - 'a' + 13) % 26);
        else if (c >= 'A' && c <= 'Z')
            c = (char)('A' + (c - 'A' + 13) % 26);
        if (tc_buf_append(out, &c, 1) < 0)
            return false;
    }
    return true;
}

static bool pct_decode(const char *s, size_t n, struct tc_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
            hexval((unsigned char)s[i + 2]) >= 0) {
            c = (char)(hexval((unsigned char)s[i + 1]) << 4 | hexval((unsigned char)s[i + 2]));
            i += 2;
        } else if (c == '%' && i + 5 < n && s[i + 1] == 'u') {
            int v = 0, ok = 1;
            for (int k = 2; k < 6; k++)
                ok &= hexval((unsigned char)s[i + k]) >= 0,
                    v = v * 16 + (hexval((unsigned char)s[i + k]) & 15);
            if (ok && v < 128) {
                c = (char)v;
                i += 5;
            }
        }
        if (tc_buf_append(out, &c, 1) < 0)
            return false;
    }
    return true;
}

static int put_utf8(struct tc_buf *b, unsigned long cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80)
        u[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)),
        u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else if (cp < 0x110000)
        u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)),
        u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63)), n = 4;
    else
        return 0;
    return tc_buf_append(b, u, n);
}

/* Backslash escapes shared by Python, JS, $'..', printf and echo -e. Returns the bytes consumed
 * after the backslash (0: not an escape we decode) and sets *dec when it was a \x/\u/octal. */
static size_t unescape1(const char *s, size_t n, struct tc_buf *out, bool *dec, int *err)
{
    static const char simple_in[] = "ntr0abfv\\'\"`e";
    static const char simple_out[] = "\n\t\r\0\a\b\f\v\\'\"`\033";
    if (n == 0)
        return 0;
    char c = s[0];
    if ((c == 'x' || c == 'X') && n >= 3 && hexval((unsigned char)s[1]) >= 0 &&
        hexval((unsigned char)s[2]) >= 0) {
        char ch = (char)(hexval((unsigned char)s[1]) << 4 | hexval((unsigned char)s[2]));
        *dec = true;
        *err |= tc_buf_append(out, &ch, 1);
        return 3;
    }
    if (c == 'u' && n >= 2 && s[1] == '{') {
        unsigned long v = 0;
        size_t k = 2;
        while (k < n && k < 9 && hexval((unsigned char)s[k]) >= 0)
            v = v * 16 + (unsigned long)hexval((unsigned char)s[k++]);
        if (k < n && s[k] == '}' && k > 2) {
            *dec = true;
            *err |= put_utf8(out, v);
            return k + 1;
        }
        return 0;
    }
    if (c == 'u' || c == 'U') {
        size_t want = c == 'u' ? 4 : 8;
        unsigned long v = 0;
        if (n < want + 1)
            return 0;
        for (size_t k = 1; k <= want; k++) {
            int h = hexval((unsigned char)s[k]);
            if (h < 0)
                return 0;
            v = v * 16 + (unsigned long)h;
        }
        *dec = true;
        *err |= put_utf8(out, v);
        return want + 1;
    }
    if (c >= '0' && c <= '7') {
        unsigned v = 0;
        size_t k = 0;
        if (c == '0' && n > 1 && !(s[1] >= '0' && s[1] <= '7'))
            goto simple;
        while (k < n && k < 4 && s[k] >= '0' && s[k] <= '7' && v * 8 + (unsigned)(s[k] - '0') < 256)
            v = v * 8 + (unsigned)(s[k++] - '0');
        char ch = (char)v;
        *dec = true;
        *err |= tc_buf_append(out, &ch, 1);
        return k;
    }
simple:
    for (size_t k = 0; simple_in[k]; k++)
        if (simple_in[k] == c) {
            *err |= tc_buf_append(out, &simple_out[k], 1);
            return 1;
        }
    return 0;
}

/* ---- aliases and variables ---- */

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

static uint32_t kv_hash(const char *k, size_t kn)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < kn; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

/* The slot of key k: where it is, or the empty slot where it would go. */
static size_t kv_slot(const struct kvs *m, const char *k, size_t kn)
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

static const char *kv_get(const struct kvs *m, const char *k, size_t kn)
{
    size_t s = kv_slot(m, k, kn);
    return m->slot[s] ? m->e[m->slot[s] - 1].v : NULL;
}

static int kv_set(struct kvs *m, const char *k, size_t kn, const char *v, size_t vn)
{
    if (vn > MAX_VALUE)
        vn = MAX_VALUE;
    size_t s = kv_slot(m, k, kn);
    if (m->slot[s]) {
        char *nv = strndup(v, vn);
        if (!nv)
            return -ENOMEM;
        free(m->e[m->slot[s] - 1].v);
        m->e[m->slot[s] - 1].v = nv;
        return 0;
    }
    if (m->n >= MAX_ALIASES)
        return 0;
    /* the key keeps all kn bytes (a name may hold a NUL); the value is a C string */
    char *nk = malloc(kn + 1), *nv = strndup(v, vn);
    if (nk) {
        memcpy(nk, k, kn);
        nk[kn] = '\0';
    }
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    m->e[m->n] = (struct kv){nk, nv, kn};
    m->slot[s] = (uint16_t)(++m->n);
    return 0;
}

static void kv_free(struct kvs *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].k);
        free(m->e[i].v);
    }
    m->n = 0;
    memset(m->slot, 0, sizeof(m->slot));
}

/* ---- output helpers ---- */

static int out_bytes(struct ps_norm *n, const char *s, size_t len, uint32_t src)
{
    if (n->text.len + len > PS_MAX_NORM_BYTES)
        return 0; /* truncated: scanning what we have is better than failing */
    if (n->text.len + len > n->mapalloc) {
        size_t na = n->mapalloc ? n->mapalloc : 4096;
        while (na < n->text.len + len)
            na *= 2;
        uint32_t *nm = realloc(n->map, na * sizeof(*nm));
        if (!nm)
            return -ENOMEM;
        n->map = nm;
        n->mapalloc = na;
    }
    for (size_t i = 0; i < len; i++)
        n->map[n->text.len + i] = src;
    return tc_buf_append(&n->text, s, len);
}

static int add_note(struct ps_norm *n, const char *rule, int sev, uint32_t src, const char *msg)
{
    if (n->nnotes >= 1000)
        return 0;
    if (n->nnotes == n->notesalloc) {
        size_t na = n->notesalloc ? n->notesalloc * 2 : 16;
        struct ps_note *nn = realloc(n->notes, na * sizeof(*nn));
        if (!nn)
            return -ENOMEM;
        n->notes = nn;
        n->notesalloc = na;
    }
    n->notes[n->nnotes++] = (struct ps_note){rule, sev, src, msg};
    return 0;
}

static int add_job(struct ps_norm *n, enum ps_lang lang, const char *s, size_t len, uint32_t src,
                   int depth)
{
    if (depth > PS_MAX_DEPTH || len < 4 || n->njobs >= 256)
        return 0;
    if (n->njobs == n->jobsalloc) {
        size_t na = n->jobsalloc ? n->jobsalloc * 2 : 8;
        struct ps_job *nj = realloc(n->jobs, na * sizeof(*nj));
        if (!nj)
            return -ENOMEM;
        n->jobs = nj;
        n->jobsalloc = na;
    }
    char *c = malloc(len + 1);
    if (!c)
        return -ENOMEM;
    memcpy(c, s, len);
    c[len] = '\0';
    n->jobs[n->njobs++] = (struct ps_job){lang, c, len, src, depth};
    return 0;
}

void ps_norm_free(struct ps_norm *n)
{
    tc_buf_free(&n->text);
    free(n->map);
    free(n->notes);
    for (size_t i = 0; i < n->njobs; i++)
        free(n->jobs[i].code);
    free(n->jobs);
    *n = (struct ps_norm){0};
}

/* ================= Python / JavaScript ================= */

static bool ident_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c >= 0x80;
}
static bool ident_char(unsigned char c)
{
    return ident_start(c) || (c >= '0' && c <= '9');
}

/* Does the text of an f-string (py) or template literal interpolate anything? */
static bool has_interpolation(bool py, const char *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (py && s[k] == '{') {
            if (k + 1 < n && s[k + 1] == '{') {
                k++;
                continue;
            }
            return true;
        }
        if (!py && s[k] == '$' && k + 1 < n && s[k + 1] == '{')
            return true;
    }
    return false;
}

static int lex_pyjs(bool py, const char *c, size_t len, int depth, uint32_t origin, struct toks *ts)
{
    struct tc_buf sb;
    size_t i = 0;
    int r = 0;

    int nest = 0; /* newlines inside (), [] and {} (Python) do not end a statement */
    tc_buf_init(&sb, MAX_VALUE * 16);
#define SRC(x) (depth ? origin : (uint32_t)(x))
    while (i < len && r >= 0) {
        unsigned char ch = (unsigned char)c[i];
        if (ch == '\n') {
            if (!(ts->n && ts->v[ts->n - 1].t == T_NL) && !(py && nest > 0))
                r = push(ts, T_NL, SRC(i), "\n", 1, 0, 0);
            i++;
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v' || ch == 0) {
            i++;
            continue;
        }
        if (ch == '\\' && i + 1 < len && c[i + 1] == '\n') {
            i += 2;
            continue;
        }
        if ((py && ch == '#') || (!py && ch == '/' && i + 1 < len && c[i + 1] == '/')) {
            while (i < len && c[i] != '\n')
                i++;
            continue;
        }
        if (!py && ch == '/' && i + 1 < len && c[i + 1] == '*') {
            const char *e = memmem(c + i + 2, len - i - 2, "*/", 2);
            i = e ? (size_t)(e - c) + 2 : len;
            continue;
        }
        /* string, with an optional Python prefix */
        size_t q = i;
        bool raw = false, fstr = false;
        if (py) {
            while (q < len && q - i < 2 && strchr("rRbBuUfF", c[q]) && c[q])
                raw |= c[q] == 'r' || c[q] == 'R', fstr |= c[q] == 'f' || c[q] == 'F', q++;
            if (q == len || (c[q] != '\'' && c[q] != '"'))
                q = i, raw = false, fstr = false;
        }
        if (q < len && (c[q] == '\'' || c[q] == '"' || (!py && c[q] == '`'))) {
            char quote = c[q];
            bool triple = py && q + 2 < len && c[q + 1] == quote && c[q + 2] == quote;
            size_t k = q + (triple ? 3 : 1);
            bool dec = false;
            int err = 0;
            tc_buf_reset(&sb);
            while (k < len) {
                if (triple
                        ? (k + 2 < len && c[k] == quote && c[k + 1] == quote && c[k + 2] == quote)
                        : c[k] == quote)
                    break;
                if (!triple && quote != '`' && c[k] == '\n')
                    break; /* unterminated: stop at the line end */
                if (c[k] == '\\' && k + 1 < len) {
                    if (raw) {
                        err |= tc_buf_append(&sb, c + k, 2);
                        k += 2;
                        continue;
                    }
                    if (c[k + 1] == '\n') {
                        k += 2;
                        continue;
                    }
                    size_t used = unescape1(c + k + 1, len - k - 1, &sb, &dec, &err);
                    if (used) {
                        k += 1 + used;
                        continue;
                    }
                    err |= tc_buf_append(&sb, c + k, 2);
                    k += 2;
                    continue;
                }
                err |= tc_buf_append(&sb, c + k, 1);
                k++;
            }
            if (err == -ENOMEM) {
                r = -ENOMEM;
                break;
            }
            int fl = dec ? F_DECODED : 0;
            if ((fstr || quote == '`') && has_interpolation(py, sb.data ? sb.data : "", sb.len))
                fl |= F_TEMPLATE;
            r = push(ts, T_STR, SRC(i), sb.data ? sb.data : "", sb.len, fl, 0);
            i = k < len ? k + (triple ? 3 : (c[k] == '\n' ? 0 : 1)) : len;
            continue;
        }
        if (ch >= '0' && ch <= '9') {
            size_t k = i;
            while (k < len && (ident_char((unsigned char)c[k]) || c[k] == '.'))
                k++;
            long long v = 0;
            bool ok = true;
            int base = 10;
            size_t d = i;
            if (k - i > 2 && c[i] == '0' && (c[i + 1] == 'x' || c[i + 1] == 'X'))
                base = 16, d = i + 2;
            else if (k - i > 2 && c[i] == '0' && (c[i + 1] == 'o' || c[i + 1] == 'O'))
                base = 8, d = i + 2;
            else if (k - i > 2 && c[i] == '0' && (c[i + 1] == 'b' || c[i + 1] == 'B'))
                base = 2, d = i + 2;
            for (; d < k && ok; d++) {
                int hv = c[d] == '_' ? -2 : hexval((unsigned char)c[d]);
                if (hv == -2)
                    continue;
                if (hv < 0 || hv >= base || v > (1LL << 40))
                    ok = false;
                else
                    v = v * base + hv;
            }
            r = push(ts, T_NUM, SRC(i), c + i, k - i, 0, ok ? v : -1);
            i = k;
            continue;
        }
        if (ident_start(ch)) {
            size_t k = i;
            while (k < len && ident_char((unsigned char)c[k]))
                k++;
            r = push(ts, T_NAME, SRC(i), c + i, k - i, 0, 0);
            i = k;
            continue;
        }
        if (ch == '(' || ch == '[' || ch == '{')
            nest++;
        else if ((ch == ')' || ch == ']' || ch == '}') && nest > 0)
            nest--;
        r = push(ts, T_OP, SRC(i), c + i, 1, 0, 0);
        i++;
    }
#undef SRC
    tc_buf_free(&sb);
    return r == -E2BIG ? 0 : r;
}

/* A dotted name NAME(.NAME)* at i: its end index; joined text into out. */
static size_t chain_at(const struct toks *ts, size_t i, char *out, size_t outsz)
{
    size_t j = i, o = 0;
    if (outsz)
        out[0] = '\0';
    while (is_t(ts, j, T_NAME)) {
        const struct tok *t = &ts->v[j];
        if (o && o + 1 < outsz)
            out[o++] = '.';
        size_t n = t->n < outsz - o - 1 ? t->n : (o + 1 < outsz ? outsz - o - 1 : 0);
        memcpy(out + o, ttext(ts, t), n);
        o += n;
        out[o] = '\0';
        j++;
        if (IS_OP(ts, j, ".") && is_t(ts, j + 1, T_NAME))
            j++;
        else
            break;
    }
    return j;
}

static const char *last_component(const char *chain)
{
    const char *d = strrchr(chain, '.');
    return d ? d + 1 : chain;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static bool ident_like(const char *s, size_t n)
{
    if (n == 0 || n > 64 || !ident_start((unsigned char)s[0]) || (unsigned char)s[0] >= 0x80)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!ident_char((unsigned char)s[i]) || (unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

/* Apply a named decoding to s; false if it does not apply. */
static bool decode_as(const char *how, const char *s, size_t n, struct tc_buf *out)
{
    if (strstr(how, "rot") && strstr(how, "13"))
        return rot13(s, n, out);
    if (strstr(how, "base64") || strstr(how, "b64") || strcmp(how, "atob") == 0 ||
        strstr(how, "decodebytes") || strstr(how, "decodestring"))
        return b64_decode(s, n, out);
    if (strstr(how, "hex") || strstr(how, "b16") || strcmp(how, "unhexlify") == 0)
        return hex_decode(s, n, out);
    if (strcmp(how, "unescape") == 0 || strcmp(how, "decodeURIComponent") == 0 ||
        strcmp(how, "decodeURI") == 0)
        return pct_decode(s, n, out);
    return false;
}

/* ---- folding: one function per rule ----
 *
 * fold_pass() walks the tokens once and, at each position, tries the rules below in order. A
 * rule either folds (pushes its result to f->out, sets *next past what it consumed and returns
 * 1), does not apply (returns 0, pushes nothing) or fails (-ENOMEM). Passes repeat until
 * nothing changes (at most MAX_PASSES), so a rule only needs to see constants that earlier
 * passes produced: `getattr(__import__("o" + "s"), "system")` folds in three passes.
 *
 * Flags on the string a rule produces: F_DECODED when it was decoded (base64, hex, rot13, char
 * codes, reversal, slicing, joining characters), F_FOLDED when it was assembled from pieces
 * (concatenation, format, replace, case changes, f-strings or templates with constant parts).
 * Either marks a name built at run time: handed to getattr/import/require/a namespace lookup,
 * it is an evasion finding (nobody writes `getattr(os, "sys" + "tem")` for readability). */

struct fold {
    bool py;
    const struct toks *in;
    struct toks *out;
    struct ps_norm *nm;
    const struct kvs *consts; /* single-assignment string variables: flag byte + value */
    struct tc_buf v;          /* the value being built */
    bool changed;
    size_t grown, budget; /* bytes folds added beyond what they replaced; at most budget */
};

/* May a fold replace the tokens [i, next) by a value of n bytes? Growth is budgeted over the
 * whole text, so that however folds are nested the normalised code stays within a few times
 * the size of the code (and the code after them is still scanned). */
static bool growth_ok(struct fold *f, size_t i, size_t next, size_t n)
{
    size_t was = 0;
    for (size_t k = i; k < next && k < f->in->n; k++)
        was += f->in->v[k].n + 1;
    if (n <= was)
        return true;
    if (f->grown + (n - was) > f->budget)
        return false;
    f->grown += n - was;
    return true;
}

#define F_BUILT (F_DECODED | F_FOLDED)

/* Folds that can make a value larger than their input (a join with a separator, replace,
 * format) give up past this: names and commands are short, and nesting such folds must not
 * turn a few hundred bytes of code into megabytes of normalised text. */
#define MAX_GROWN (MAX_VALUE / 4)
/* A constant variable's value is put in place of its uses only up to this size: names and
 * commands are short, and a long value used many times must not fill the token pool. */
#define MAX_CONST_USE 1024

static int note_built(struct fold *f, uint32_t src, const char *what)
{
    return add_note(f->nm, "evasion_computed_name", TC_SEV_HIGH, src, what);
}

/* Replace v[piece..] with s[0..n). */
static int v_set_piece(struct tc_buf *v, size_t piece, const char *s, size_t n)
{
    v->len = piece;
    if (v->data)
        v->data[piece] = '\0';
    return tc_buf_append(v, s, n);
}

static void reverse_bytes(char *s, size_t n)
{
    for (size_t a = 0, b = n; a + 1 < b; a++, b--) {
        char tmp = s[a];
        s[a] = s[b - 1];
        s[b - 1] = tmp;
    }
}

/* An integer literal, optionally negative, at i: its value in *ret and the tokens used, or 0. */
static size_t int_at(const struct toks *ts, size_t i, long long *ret)
{
    bool neg = IS_OP(ts, i, "-");
    size_t k = i + neg;
    if (!is_t(ts, k, T_NUM) || ts->v[k].num < 0)
        return 0;
    *ret = neg ? -ts->v[k].num : ts->v[k].num;
    return k + 1 - i;
}

/* The value of a constant variable (NULL if name is not one); *fl gets its flags. */
static const char *const_value(const struct fold *f, const char *name, size_t n, int *fl)
{
    const char *v = f->consts ? kv_get(f->consts, name, n) : NULL;
    if (!v || !v[0])
        return NULL;
    *fl = (unsigned char)v[0] & 0x7f;
    return v + 1;
}

/* f"..{'x'}.." / `..${"x"}..` whose interpolations are all literals or constant variables:
 * the value into f->v (1), or 0 when some part is not constant. */
static int template_fold(struct fold *f, const struct tok *t, int *fl)
{
    const char *s = ttext(f->in, t);
    size_t n = t->n;
    int r = 0;
    tc_buf_reset(&f->v);
    for (size_t k = 0; k < n && r >= 0;) {
        bool open = f->py ? s[k] == '{' : (s[k] == '$' && k + 1 < n && s[k + 1] == '{');
        if (f->py && (s[k] == '{' || s[k] == '}') && k + 1 < n && s[k + 1] == s[k]) {
            r = tc_buf_append(&f->v, s + k, 1); /* {{ and }} are literal braces */
            k += 2;
            continue;
        }
        if (!open) {
            r = tc_buf_append(&f->v, s + k, 1);
            k++;
            continue;
        }
        size_t a = k + (f->py ? 1 : 2), e = a;
        while (e < n && s[e] != '}')
            e++;
        if (e >= n)
            return 0;
        size_t b = e;
        while (a < b && s[a] == ' ')
            a++;
        while (b > a && s[b - 1] == ' ')
            b--;
        if (b - a >= 2 && (s[a] == '\'' || s[a] == '"') && s[b - 1] == s[a] &&
            !memchr(s + a + 1, s[a], b - a - 2) && !memchr(s + a + 1, '\\', b - a - 2)) {
            r = tc_buf_append(&f->v, s + a + 1, b - a - 2);
        } else {
            int cf = 0;
            const char *cv = ident_like(s + a, b - a) ? const_value(f, s + a, b - a, &cf) : NULL;
            if (!cv)
                return 0;
            *fl |= cf;
            r = tc_buf_append(&f->v, cv, strlen(cv));
        }
        k = e + 1;
        if (f->v.len > MAX_GROWN)
            return 0;
    }
    return r < 0 ? r : 1;
}

/* An f-string or template literal that is nothing but interpolations: f"{a}{b}". */
static bool template_only_parts(bool py, const char *s, size_t n)
{
    size_t parts = 0;
    for (size_t k = 0; k < n;) {
        bool open = py ? s[k] == '{' : (s[k] == '$' && k + 1 < n && s[k + 1] == '{');
        if (!open || (py && k + 1 < n && s[k + 1] == '{'))
            return false;
        const char *e = memchr(s + k, '}', n - k);
        if (!e)
            return false;
        k = (size_t)(e - s) + 1;
        parts++;
    }
    return parts >= 2;
}

/* "...".format(...) or "..." % (...): substitute {} / {N} / %s %c %d %% with constants.
 * 0 when a placeholder or an argument is not one we evaluate. */
static int format_apply(struct fold *f, size_t piece, bool percent, const struct toks *in,
                        const size_t *args, size_t nargs)
{
    struct tc_buf o;
    char fmt[1024];
    size_t fn = f->v.len - piece, next = 0;
    int r = 0, ok = 1;
    if (fn >= sizeof(fmt))
        return 0;
    memcpy(fmt, f->v.data + piece, fn);
    tc_buf_init(&o, MAX_VALUE * 16);
    for (size_t k = 0; k < fn && ok && r >= 0;) {
        char c = fmt[k];
        size_t arg = SIZE_MAX;
        char conv = 's';
        if (!percent && (c == '{' || c == '}') && k + 1 < fn && fmt[k + 1] == c) {
            r = tc_buf_append(&o, &c, 1);
            k += 2;
            continue;
        }
        if (!percent && c == '{') {
            size_t e = k + 1;
            long long idx = -1;
            while (e < fn && fmt[e] >= '0' && fmt[e] <= '9' && e - k < 4)
                idx = (idx < 0 ? 0 : idx * 10) + (fmt[e++] - '0');
            if (e >= fn || fmt[e] != '}') {
                ok = 0;
                break;
            }
            arg = idx >= 0 ? (size_t)idx : next++;
            k = e + 1;
        } else if (percent && c == '%' && k + 1 < fn) {
            conv = fmt[k + 1];
            k += 2;
            if (conv == '%') {
                r = tc_buf_append(&o, "%", 1);
                continue;
            }
            if (conv != 's' && conv != 'c' && conv != 'd' && conv != 'i') {
                ok = 0;
                break;
            }
            arg = next++;
        } else if (!percent && c == '}') {
            ok = 0;
            break;
        } else {
            r = tc_buf_append(&o, &c, 1);
            k++;
            continue;
        }
        if (arg >= nargs) {
            ok = 0;
            break;
        }
        const struct tok *a = &in->v[args[arg]];
        if (a->t == T_STR && conv != 'c' && conv != 'd' && conv != 'i') {
            r = tc_buf_append(&o, ttext(in, a), a->n);
        } else if (a->t == T_NUM && a->num >= 0 && conv == 'c') {
            r = put_utf8(&o, (unsigned long)a->num);
        } else if (a->t == T_NUM && a->num >= 0) {
            char num[24];
            int m = snprintf(num, sizeof(num), "%lld", a->num);
            r = tc_buf_append(&o, num, (size_t)m);
        } else {
            ok = 0;
        }
    }
    if (o.len > MAX_GROWN)
        ok = 0;
    if (ok && r >= 0)
        r = v_set_piece(&f->v, piece, o.data ? o.data : "", o.len);
    tc_buf_free(&o);
    return r < 0 ? r : ok;
}

/* Literal arguments (strings or non-negative integers) from a to the closing ')' or ']':
 * indexes into args (at most max), the index of the closing token in *ret_end; false if any
 * argument is something else. */
static bool literal_args(const struct toks *in, size_t a, const char *close, size_t *args,
                         size_t max, size_t *nargs, size_t *ret_end)
{
    size_t k = a;
    *nargs = 0;
    while (k < in->n && !IS_OP(in, k, close)) {
        if (!(is_t(in, k, T_STR) && !(in->v[k].flags & F_TEMPLATE)) &&
            !(is_t(in, k, T_NUM) && in->v[k].num >= 0))
            return false;
        if (*nargs == max)
            return false;
        args[(*nargs)++] = k++;
        if (IS_OP(in, k, ","))
            k++;
        else if (!IS_OP(in, k, close))
            return false;
    }
    if (!IS_OP(in, k, close))
        return false;
    *ret_end = k;
    return true;
}

/* ---- suffixes of a string: each returns the tokens it consumed (> 0), 0 or -ENOMEM ---- */

/* Python slicing and indexing of a constant: s[::-1], s[2:-2], s[0]. */
static int sfx_slice(struct fold *f, size_t j, size_t piece, int *fl)
{
    const struct toks *in = f->in;
    long long fld[3] = {0, 0, 1};
    bool set[3] = {false, false, false};
    int nf = 0;
    size_t k = j + 1;
    if (!IS_OP(in, j, "["))
        return 0;
    for (;;) {
        size_t used = nf < 3 ? int_at(in, k, &fld[nf]) : 0;
        if (used)
            set[nf] = true, k += used;
        nf++;
        if (IS_OP(in, k, ":") && nf < 3) {
            k++;
            continue;
        }
        break;
    }
    if (!IS_OP(in, k, "]") || (nf == 1 && !set[0]) || (set[2] && fld[2] == 0))
        return 0;
    long long len = (long long)(f->v.len - piece);
    char *s = f->v.data ? f->v.data + piece : NULL;
    struct tc_buf o;
    int r = 0;
    tc_buf_init(&o, MAX_VALUE * 16);
    if (nf == 1) { /* indexing */
        long long x = fld[0] < 0 ? fld[0] + len : fld[0];
        if (x < 0 || x >= len) {
            tc_buf_free(&o);
            return 0;
        }
        r = tc_buf_append(&o, s + x, 1);
    } else {
        long long step = set[2] ? fld[2] : 1;
        long long lo = set[0] ? fld[0] : (step > 0 ? 0 : len - 1);
        long long hi = set[1] ? fld[1] : (step > 0 ? len : -len - 1);
        if (lo < 0)
            lo += len;
        if (hi < 0)
            hi += len;
        if (step > 0) {
            lo = lo < 0 ? 0 : lo > len ? len : lo;
            hi = hi < 0 ? 0 : hi > len ? len : hi;
            for (long long x = lo; x < hi && r >= 0; x += step)
                r = tc_buf_append(&o, s + x, 1);
        } else {
            lo = lo >= len ? len - 1 : lo;
            hi = hi < -1 ? -1 : hi;
            for (long long x = lo; x > hi && x >= 0 && r >= 0; x += step)
                r = tc_buf_append(&o, s + x, 1);
        }
    }
    if (r >= 0)
        r = v_set_piece(&f->v, piece, o.data ? o.data : "", o.len);
    tc_buf_free(&o);
    /* indexing or a plain slice of a variable's value is ordinary (OP[0]); reversing or
     * stepping through it, or slicing a literal, is not */
    bool plain = nf == 1 || !set[2] || fld[2] == 1;
    if (!(piece == 0 && (*fl & F_VAR) && plain))
        *fl |= F_DECODED;
    return r < 0 ? r : (int)(k + 1 - j);
}

/* Python's "%s%s" % ("a", "b"). */
static int sfx_percent(struct fold *f, size_t j, size_t piece, int *fl)
{
    const struct toks *in = f->in;
    size_t args[16], nargs = 0, end;
    if (!f->py || !IS_OP(in, j, "%"))
        return 0;
    if (is_t(in, j + 1, T_STR) || is_t(in, j + 1, T_NUM)) {
        if (in->v[j + 1].t == T_STR && (in->v[j + 1].flags & F_TEMPLATE))
            return 0;
        args[0] = j + 1, nargs = 1, end = j + 1;
    } else if (!IS_OP(in, j + 1, "(") || !literal_args(in, j + 2, ")", args, 16, &nargs, &end)) {
        return 0;
    }
    int r = format_apply(f, piece, true, in, args, nargs);
    if (r <= 0)
        return r;
    *fl |= F_FOLDED;
    for (size_t k = 0; k < nargs; k++)
        *fl |= in->v[args[k]].t == T_STR ? in->v[args[k]].flags : 0;
    return (int)(end + 1 - j);
}

static int case_map(struct tc_buf *v, size_t piece, const char *how)
{
    bool up = strcmp(how, "upper") == 0 || strcmp(how, "toUpperCase") == 0;
    bool sw = strcmp(how, "swapcase") == 0;
    bool cap = strcmp(how, "capitalize") == 0;
    for (size_t k = piece; k < v->len; k++) {
        char c = v->data[k];
        bool lo = c >= 'a' && c <= 'z', hi = c >= 'A' && c <= 'Z';
        bool want_up = sw ? lo : cap ? k == piece : up;
        if (want_up && lo)
            v->data[k] = (char)(c - 32);
        else if (!want_up && hi)
            v->data[k] = (char)(c + 32);
    }
    return 0;
}

/* v[piece..] with every (or the first) occurrence of a replaced by b: 0, 1 when the result would
 * grow past MAX_GROWN (v unchanged), or -ENOMEM. */
static int replace_in(struct tc_buf *v, size_t piece, const char *a, size_t an, const char *b,
                      size_t bn, bool all)
{
    struct tc_buf o;
    int r = 0;
    bool done = false;
    if (an == 0)
        return 0;
    tc_buf_init(&o, MAX_VALUE * 16);
    for (size_t k = piece; k < v->len && r >= 0;) {
        if (!done && k + an <= v->len && memcmp(v->data + k, a, an) == 0) {
            r = tc_buf_append(&o, b, bn);
            k += an;
            done = !all;
        } else {
            r = tc_buf_append(&o, v->data + k, 1);
            k++;
        }
        if (o.len > MAX_GROWN && o.len > v->len - piece) {
            tc_buf_free(&o);
            return 1; /* too big: not folded */
        }
    }
    if (r >= 0)
        r = v_set_piece(v, piece, o.data ? o.data : "", o.len);
    tc_buf_free(&o);
    return r;
}

/* sep.join([...]) / sep.join((...)) / sep.join(map(chr, [...])) / sep.join("chars"):
 * *ret_end is the index of the call's closing ')'. 1, 0 or -ENOMEM. */
static int join_args(struct fold *f, size_t piece, size_t a, size_t *ret_end, int *fl)
{
    const struct toks *in = f->in;
    struct tc_buf sep, jb;
    size_t k = a, cnt = 0;
    int r = 0, ok = 0;
    if (is_t(in, k, T_STR) && !(in->v[k].flags & F_TEMPLATE) && IS_OP(in, k + 1, ")")) {
        /* joining the characters of a string */
        const char *s = ttext(in, &in->v[k]);
        tc_buf_init(&jb, MAX_VALUE * 16);
        for (size_t x = 0; x < in->v[k].n && r >= 0; x++) {
            if (x && f->v.len > piece)
                r = tc_buf_append(&jb, f->v.data + piece, f->v.len - piece);
            if (r >= 0)
                r = tc_buf_append(&jb, s + x, 1);
            if (jb.len > MAX_GROWN) {
                tc_buf_free(&jb);
                return 0;
            }
        }
        if (r >= 0)
            r = v_set_piece(&f->v, piece, jb.data ? jb.data : "", jb.len);
        tc_buf_free(&jb);
        *fl |= in->v[k].flags | F_DECODED;
        *ret_end = k + 1;
        return r < 0 ? r : 1;
    }
    bool is_map = IS_NAME(in, k, "map") && IS_OP(in, k + 1, "(") && IS_NAME(in, k + 2, "chr") &&
                  IS_OP(in, k + 3, ",");
    if (is_map)
        k += 4;
    if (!IS_OP(in, k, "[") && !IS_OP(in, k, "("))
        return 0;
    tc_buf_init(&sep, MAX_VALUE * 16);
    tc_buf_init(&jb, MAX_VALUE * 16);
    if (f->v.len > piece)
        r = tc_buf_append(&sep, f->v.data + piece, f->v.len - piece);
    k++;
    bool good = true;
    while (good && r >= 0 && k < in->n && !IS_OP(in, k, "]") && !IS_OP(in, k, ")")) {
        if (cnt && sep.len && !is_map)
            r = tc_buf_append(&jb, sep.data, sep.len);
        if (!is_map && is_t(in, k, T_STR) && !(in->v[k].flags & F_TEMPLATE)) {
            r = tc_buf_append(&jb, ttext(in, &in->v[k]), in->v[k].n);
            *fl |= in->v[k].flags;
        } else if (is_map && is_t(in, k, T_NUM) && in->v[k].num >= 0 && in->v[k].num < 0x110000) {
            r = put_utf8(&jb, (unsigned long)in->v[k].num);
        } else {
            good = false;
        }
        cnt++, k++;
        if (IS_OP(in, k, ","))
            k++;
        if (jb.len > MAX_GROWN)
            good = false;
    }
    if (good && r >= 0 && cnt && (IS_OP(in, k, "]") || IS_OP(in, k, ")"))) {
        k++;
        if (is_map && IS_OP(in, k, ")"))
            k++;
        if (IS_OP(in, k, ")")) {
            r = v_set_piece(&f->v, piece, jb.data ? jb.data : "", jb.len);
            *fl |= F_DECODED;
            *ret_end = k;
            ok = 1;
        }
    }
    tc_buf_free(&sep);
    tc_buf_free(&jb);
    return r < 0 ? r : ok;
}

/* .split(sep) [.reverse()] .join(sep2) on a constant. */
static int split_join(struct fold *f, size_t piece, size_t j, int *fl)
{
    const struct toks *in = f->in;
    /* j: the "split" name; its argument at j + 2 */
    if (!is_t(in, j + 2, T_STR) || !IS_OP(in, j + 3, ")"))
        return 0;
    size_t k = j + 4;
    bool rev = false;
    if (IS_OP(in, k, ".") && IS_NAME(in, k + 1, "reverse") && IS_OP(in, k + 2, "(") &&
        IS_OP(in, k + 3, ")"))
        rev = true, k += 4;
    if (!(IS_OP(in, k, ".") && IS_NAME(in, k + 1, "join") && IS_OP(in, k + 2, "(") &&
          ((is_t(in, k + 3, T_STR) && IS_OP(in, k + 4, ")")) || IS_OP(in, k + 3, ")"))))
        return 0;
    const char *sp = ttext(in, &in->v[j + 2]);
    size_t spn = in->v[j + 2].n;
    const char *js = IS_OP(in, k + 3, ")") ? "," : ttext(in, &in->v[k + 3]);
    size_t jn = IS_OP(in, k + 3, ")") ? 1 : in->v[k + 3].n;
    size_t end = IS_OP(in, k + 3, ")") ? k + 3 : k + 4;
    /* split into parts (characters when sep is empty), then join (reversed) */
    const char *s = f->v.data ? f->v.data + piece : "";
    size_t n = f->v.len - piece, nparts = 0;
    size_t starts[512], lens[512];
    for (size_t x = 0; x <= n && nparts < 512;) {
        if (spn == 0) {
            if (x == n)
                break;
            starts[nparts] = x, lens[nparts++] = 1, x++;
            continue;
        }
        const char *hit = x < n ? memmem(s + x, n - x, sp, spn) : NULL;
        size_t e = hit ? (size_t)(hit - s) : n;
        starts[nparts] = x, lens[nparts++] = e - x;
        if (!hit)
            break;
        x = e + spn;
        if (x == n) {
            starts[nparts] = n, lens[nparts++] = 0;
            break;
        }
    }
    if (nparts == 512)
        return 0;
    struct tc_buf o;
    int r = 0;
    tc_buf_init(&o, MAX_VALUE * 16);
    for (size_t q = 0; q < nparts && r >= 0; q++) {
        size_t p = rev ? nparts - 1 - q : q;
        if (q)
            r = tc_buf_append(&o, js, jn);
        if (r >= 0)
            r = tc_buf_append(&o, s + starts[p], lens[p]);
        if (o.len > MAX_GROWN) {
            tc_buf_free(&o);
            return 0;
        }
    }
    if (r >= 0)
        r = v_set_piece(&f->v, piece, o.data ? o.data : "", o.len);
    tc_buf_free(&o);
    *fl |= F_DECODED;
    return r < 0 ? r : (int)(end + 1 - j);
}

/* JavaScript substring-like methods with integer arguments. */
static int js_substr(struct fold *f, size_t piece, const char *m, size_t a, size_t *ret_end)
{
    const struct toks *in = f->in;
    long long x[2] = {0, 0};
    int nx = 0;
    size_t k = a;
    while (nx < 2) {
        size_t used = int_at(in, k, &x[nx]);
        if (!used)
            break;
        k += used, nx++;
        if (IS_OP(in, k, ","))
            k++;
    }
    if (!IS_OP(in, k, ")") || nx == 0)
        return 0;
    long long len = (long long)(f->v.len - piece), lo, hi;
    if (strcmp(m, "substr") == 0) {
        lo = x[0] < 0 ? (x[0] + len < 0 ? 0 : x[0] + len) : x[0];
        hi = nx > 1 ? lo + x[1] : len;
    } else if (strcmp(m, "charAt") == 0) {
        lo = x[0], hi = x[0] + 1;
    } else {
        lo = x[0], hi = nx > 1 ? x[1] : len;
        if (strcmp(m, "slice") == 0) {
            lo = lo < 0 ? lo + len : lo;
            hi = hi < 0 ? hi + len : hi;
        } else if (lo > hi) {
            long long t = lo;
            lo = hi, hi = t;
        }
    }
    lo = lo < 0 ? 0 : lo > len ? len : lo;
    hi = hi < lo ? lo : hi > len ? len : hi;
    char tmp[1024];
    if (hi - lo >= (long long)sizeof(tmp))
        return 0;
    memcpy(tmp, f->v.data + piece + lo, (size_t)(hi - lo));
    *ret_end = k;
    return v_set_piece(&f->v, piece, tmp, (size_t)(hi - lo)) < 0 ? -ENOMEM : 1;
}

/* .method(...) on a constant. */
static int sfx_method(struct fold *f, size_t j, size_t piece, int *fl)
{
    static const char *const casing[] = {
        "lower",       "upper",       "casefold",          "swapcase",          "capitalize",
        "toLowerCase", "toUpperCase", "toLocaleLowerCase", "toLocaleUpperCase", NULL};
    static const char *const substrs[] = {"slice", "substring", "substr", "charAt", NULL};
    const struct toks *in = f->in;
    char m[32];
    int r;
    if (!IS_OP(in, j, ".") || !is_t(in, j + 1, T_NAME) || !IS_OP(in, j + 2, "(") ||
        in->v[j + 1].n >= sizeof(m))
        return 0;
    snprintf(m, sizeof(m), "%.*s", (int)in->v[j + 1].n, ttext(in, &in->v[j + 1]));
    size_t a = j + 3, end = 0;
    if (strcmp(m, "decode") == 0 || strcmp(m, "encode") == 0 || strcmp(m, "toString") == 0) {
        if (IS_OP(in, a, ")"))
            return 4;
        if (!(is_t(in, a, T_STR) && IS_OP(in, a + 1, ")")))
            return 0;
        if (strcmp(m, "encode") != 0) {
            char how[32];
            struct tc_buf d;
            snprintf(how, sizeof(how), "%.*s", (int)in->v[a].n, ttext(in, &in->v[a]));
            tc_buf_init(&d, MAX_VALUE * 16);
            if (decode_as(how, f->v.data ? f->v.data + piece : "", f->v.len - piece, &d)) {
                if ((r = v_set_piece(&f->v, piece, d.data ? d.data : "", d.len)) < 0) {
                    tc_buf_free(&d);
                    return r;
                }
                *fl |= F_DECODED;
            }
            tc_buf_free(&d);
        }
        return 5;
    }
    /* normalising a variable's value (name.upper(), key.replace("-", "_")) is ordinary;
     * changing the case of, or replacing in, a literal is not */
    bool of_var = piece == 0 && (*fl & F_VAR);
    if (in_list(m, casing) && IS_OP(in, a, ")")) {
        case_map(&f->v, piece, m);
        *fl |= of_var ? 0 : F_FOLDED;
        return 4;
    }
    if ((strcmp(m, "replace") == 0 || strcmp(m, "replaceAll") == 0) && is_t(in, a, T_STR) &&
        IS_OP(in, a + 1, ",") && is_t(in, a + 2, T_STR) && IS_OP(in, a + 3, ")")) {
        bool all = f->py || strcmp(m, "replaceAll") == 0;
        if ((r = replace_in(&f->v, piece, ttext(in, &in->v[a]), in->v[a].n,
                            ttext(in, &in->v[a + 2]), in->v[a + 2].n, all)) != 0)
            return r < 0 ? r : 0;
        *fl |=
            (of_var ? 0 : F_FOLDED) | (in->v[a].flags & F_BUILT) | (in->v[a + 2].flags & F_BUILT);
        return (int)(a + 4 - j);
    }
    if (strcmp(m, "split") == 0) {
        r = split_join(f, piece, j + 1, fl);
        return r > 0 ? r + 1 : r;
    }
    if (strcmp(m, "join") == 0) {
        if ((r = join_args(f, piece, a, &end, fl)) <= 0)
            return r;
        return (int)(end + 1 - j);
    }
    if (strcmp(m, "format") == 0) {
        size_t args[16], nargs;
        if (!literal_args(in, a, ")", args, 16, &nargs, &end))
            return 0;
        if ((r = format_apply(f, piece, false, in, args, nargs)) <= 0)
            return r;
        *fl |= F_FOLDED;
        for (size_t k = 0; k < nargs; k++)
            *fl |= in->v[args[k]].t == T_STR ? in->v[args[k]].flags : 0;
        return (int)(end + 1 - j);
    }
    if (strcmp(m, "concat") == 0 && !f->py) {
        size_t args[16], nargs;
        if (!literal_args(in, a, ")", args, 16, &nargs, &end))
            return 0;
        for (size_t k = 0; k < nargs; k++) {
            const struct tok *t = &in->v[args[k]];
            if ((r = tc_buf_append(&f->v, ttext(in, t), t->n)) < 0)
                return r;
            *fl |= t->t == T_STR ? t->flags : 0;
        }
        *fl |= F_FOLDED;
        return (int)(end + 1 - j);
    }
    if (!f->py && in_list(m, substrs)) {
        if ((r = js_substr(f, piece, m, a, &end)) <= 0)
            return r;
        *fl |= F_DECODED;
        return (int)(end + 1 - j);
    }
    return 0;
}

/* Suffixes that bind tighter than '+' (slicing, methods, Python's %), applied to the piece. */
static int sfx_tight(struct fold *f, size_t j, size_t piece, int *fl)
{
    int n = sfx_slice(f, j, piece, fl);
    if (n == 0)
        n = sfx_method(f, j, piece, fl);
    if (n == 0)
        n = sfx_percent(f, j, piece, fl);
    return n;
}

static bool tight_follows(const struct fold *f, size_t j)
{
    return IS_OP(f->in, j, ".") || IS_OP(f->in, j, "[") || IS_OP(f->in, j, "(") ||
           (f->py && IS_OP(f->in, j, "%"));
}

/* + "literal" (and Python's implicit "a" "b"), with the new piece's own suffixes folded; rolled
 * back when a suffix of that piece does not fold ("x" + "y".join(z) is not ("x" + "y").join). */
static int sfx_concat(struct fold *f, size_t j, size_t *piece, int *fl)
{
    const struct toks *in = f->in;
    size_t k = j;
    if (IS_OP(in, k, "+") && is_t(in, k + 1, T_STR))
        k++;
    else if (!(f->py && is_t(in, k, T_STR)))
        return 0;
    if (in->v[k].flags & F_TEMPLATE)
        return 0;
    size_t old_len = f->v.len, np = f->v.len;
    int nfl = *fl | in->v[k].flags | F_FOLDED, r;
    if ((r = tc_buf_append(&f->v, ttext(in, &in->v[k]), in->v[k].n)) < 0)
        return r;
    size_t e = k + 1;
    for (int guard = 0; guard < 64; guard++) {
        int n = sfx_tight(f, e, np, &nfl);
        if (n < 0)
            return n;
        if (n == 0)
            break;
        e += (size_t)n;
    }
    if (tight_follows(f, e)) {
        f->v.len = old_len;
        if (f->v.data)
            f->v.data[old_len] = '\0';
        return 0;
    }
    *piece = np;
    *fl = nfl;
    return (int)(e - j);
}

/* ---- rules ---- */

/* A string literal and the operations on it that can be evaluated. */
static int fr_string(struct fold *f, size_t i, size_t *next)
{
    const struct tok *t = &f->in->v[i];
    int fl = t->flags, r;
    bool folded = false;
    size_t j = i + 1, piece = 0;
    if (t->t != T_STR)
        return 0;
    if (fl & F_TEMPLATE) {
        int cf = 0;
        if ((r = template_fold(f, t, &cf)) <= 0)
            return r;
        fl = (fl & ~F_TEMPLATE) | F_FOLDED | cf;
        folded = true;
    } else {
        tc_buf_reset(&f->v);
        if ((r = tc_buf_append(&f->v, ttext(f->in, t), t->n)) < 0)
            return r;
    }
    for (int guard = 0; guard < 64; guard++) {
        int n = sfx_concat(f, j, &piece, &fl);
        if (n == 0)
            n = sfx_tight(f, j, piece, &fl);
        if (n < 0)
            return n;
        if (n == 0)
            break;
        j += (size_t)n;
        folded = true;
    }
    if (!folded || !growth_ok(f, i, j, f->v.len))
        return 0;
    if ((r = push(f->out, T_STR, t->src, f->v.data ? f->v.data : "", f->v.len, fl, 0)) < 0)
        return r;
    *next = j;
    return 1;
}

/* x["name"] -> x.name */
static int fr_subscript(struct fold *f, size_t i, size_t *next)
{
    const struct toks *in = f->in;
    struct toks *out = f->out;
    int r;
    if (!IS_OP(in, i, "[") || !is_t(in, i + 1, T_STR) || !IS_OP(in, i + 2, "]") || !out->n ||
        !(out->v[out->n - 1].t == T_NAME || teq(out, out->n - 1, T_OP, ")") ||
          teq(out, out->n - 1, T_OP, "]")) ||
        !ident_like(ttext(in, &in->v[i + 1]), in->v[i + 1].n))
        return 0;
    const struct tok *s = &in->v[i + 1];
    /* the name keeps its flags: scan_sinks() judges it with the object it indexes */
    if ((r = push(out, T_OP, in->v[i].src, ".", 1, 0, 0)) < 0 ||
        (r = push(out, T_NAME, in->v[i].src, ttext(in, s), s->n, s->flags & F_BUILT, 0)) < 0)
        return r;
    *next = i + 3;
    return 1;
}

/* ["a", "b"].join("") (JavaScript) */
static int fr_array_join(struct fold *f, size_t i, size_t *next)
{
    const struct toks *in = f->in;
    size_t k = i + 1, cnt = 0;
    int r = 0;
    if (f->py || !IS_OP(in, i, "["))
        return 0;
    while (is_t(in, k, T_STR) && !(in->v[k].flags & F_TEMPLATE)) {
        k++, cnt++;
        if (IS_OP(in, k, ","))
            k++;
    }
    if (!cnt || !IS_OP(in, k, "]") || !IS_OP(in, k + 1, ".") || !IS_NAME(in, k + 2, "join") ||
        !IS_OP(in, k + 3, "(") || !is_t(in, k + 4, T_STR) || !IS_OP(in, k + 5, ")"))
        return 0;
    int fl = F_DECODED;
    tc_buf_reset(&f->v);
    for (size_t a = i + 1, m = 0; a < k && r >= 0; a++)
        if (in->v[a].t == T_STR) {
            if (m++)
                r = tc_buf_append(&f->v, ttext(in, &in->v[k + 4]), in->v[k + 4].n);
            if (r >= 0)
                r = tc_buf_append(&f->v, ttext(in, &in->v[a]), in->v[a].n);
            fl |= in->v[a].flags;
        }
    if (r < 0 ||
        (r = push(f->out, T_STR, in->v[i].src, f->v.data ? f->v.data : "", f->v.len, fl, 0)) < 0)
        return r;
    *next = k + 6;
    return 1;
}

/* ("literal") -> "literal" when the parentheses group, not call */
static int fr_paren(struct fold *f, size_t i, size_t *next)
{
    const struct toks *in = f->in;
    const struct toks *out = f->out;
    if (!IS_OP(in, i, "(") || !is_t(in, i + 1, T_STR) || !IS_OP(in, i + 2, ")") ||
        (in->v[i + 1].flags & F_TEMPLATE))
        return 0;
    if (out->n && (out->v[out->n - 1].t == T_NAME || out->v[out->n - 1].t == T_STR ||
                   teq(out, out->n - 1, T_OP, ")") || teq(out, out->n - 1, T_OP, "]")))
        return 0;
    int r = copy_tok(f->out, in, i + 1);
    *next = i + 3;
    return r < 0 ? r : 1;
}

/* A use of a constant variable -> its value. */
static bool binding_keyword(const struct toks *ts, size_t i)
{
    static const char *const kw[] = {"def",    "class",  "function", "for",    "as",
                                     "import", "global", "nonlocal", "lambda", "del",
                                     "let",    "const",  "var",      "from",   NULL};
    if (!is_t(ts, i, T_NAME))
        return false;
    char b[16];
    if (ts->v[i].n >= sizeof(b))
        return false;
    snprintf(b, sizeof(b), "%.*s", (int)ts->v[i].n, ttext(ts, &ts->v[i]));
    return in_list(b, kw);
}

/* NAME (, NAME)* = ... : the names being assigned (targets). */
static bool is_target(const struct toks *ts, size_t i)
{
    size_t k = i + 1;
    while (IS_OP(ts, k, ",") && is_t(ts, k + 1, T_NAME))
        k += 2;
    if (IS_OP(ts, k, "=") && !IS_OP(ts, k + 1, "="))
        return true;
    /* compound assignment: += -= ... := (but not <= >= !=) */
    return k == i + 1 && is_t(ts, k, T_OP) && strchr("+-*/%|&^@:?", ttext(ts, &ts->v[k])[0]) &&
           IS_OP(ts, k + 1, "=");
}

static int fr_const(struct fold *f, size_t i, size_t *next)
{
    const struct toks *in = f->in;
    const struct tok *t = &in->v[i];
    int fl = 0;
    if (t->t != T_NAME || !f->consts || !f->consts->n || (i > 0 && IS_OP(in, i - 1, ".")) ||
        (i > 0 && binding_keyword(in, i - 1)) || IS_OP(in, i + 1, "(") || is_target(in, i) ||
        (IS_OP(in, i + 1, ":") && i > 0 &&
         (IS_OP(in, i - 1, "{") || IS_OP(in, i - 1, ",") || IS_OP(in, i - 1, "("))))
        return 0;
    const char *v = const_value(f, ttext(in, t), t->n, &fl);
    if (!v || strlen(v) > MAX_CONST_USE || !growth_ok(f, i, i + 1, strlen(v)))
        return 0;
    int r = push(f->out, T_STR, t->src, v, strlen(v), fl | F_VAR, 0);
    *next = i + 1;
    return r < 0 ? r : 1;
}

/* chr(N), String.fromCharCode(N, ...), bytes([N, ...]) */
static int fr_char_codes(struct fold *f, size_t i, size_t j, const char *chain, size_t *next)
{
    const struct toks *in = f->in;
    size_t a = j + 1;
    int r = 0;
    if (!(strcmp(chain, "chr") == 0 || strcmp(chain, "unichr") == 0 ||
          strcmp(chain, "String.fromCharCode") == 0 || strcmp(chain, "String.fromCodePoint") == 0 ||
          ((strcmp(chain, "bytes") == 0 || strcmp(chain, "bytearray") == 0) && IS_OP(in, a, "["))))
        return 0;
    bool br = IS_OP(in, a, "[");
    size_t k = a + br, cnt = 0;
    tc_buf_reset(&f->v);
    while (is_t(in, k, T_NUM) && r >= 0) {
        if (in->v[k].num < 0 || in->v[k].num >= 0x110000)
            return 0;
        r = put_utf8(&f->v, (unsigned long)in->v[k].num);
        k++, cnt++;
        if (IS_OP(in, k, ","))
            k++;
    }
    if (r < 0)
        return r;
    if (br && IS_OP(in, k, "]"))
        k++;
    if (!cnt || !IS_OP(in, k, ")"))
        return 0;
    if ((r = push(f->out, T_STR, in->v[i].src, f->v.data ? f->v.data : "", f->v.len, F_DECODED,
                  0)) < 0)
        return r;
    *next = k + 1;
    return 1;
}

/* reversed("abc") -> "cba" */
static int fr_reversed(struct fold *f, size_t i, size_t j, const char *chain, size_t *next)
{
    const struct toks *in = f->in;
    if (strcmp(chain, "reversed") != 0 || !is_t(in, j + 1, T_STR) || !IS_OP(in, j + 2, ")") ||
        (in->v[j + 1].flags & F_TEMPLATE))
        return 0;
    tc_buf_reset(&f->v);
    int r = tc_buf_append(&f->v, ttext(in, &in->v[j + 1]), in->v[j + 1].n);
    if (r < 0)
        return r;
    if (f->v.data)
        reverse_bytes(f->v.data, f->v.len);
    if ((r = push(f->out, T_STR, in->v[i].src, f->v.data ? f->v.data : "", f->v.len,
                  in->v[j + 1].flags | F_DECODED, 0)) < 0)
        return r;
    *next = j + 3;
    return 1;
}

static bool is_importer(bool py, const char *chain)
{
    const char *last = last_component(chain);
    if (strcmp(last, "import_module") == 0 || strcmp(last, "__import__") == 0)
        return true;
    return !py && (strcmp(chain, "require") == 0 || strcmp(chain, "import") == 0);
}

/* f("literal" [, "how"] ...) for decoders, codecs, pass-through conversions and importers. */
static int fr_call_literal(struct fold *f, size_t i, size_t j, const char *chain, size_t *next)
{
    static const char *const decoders[] = {"b64decode",
                                           "standard_b64decode",
                                           "urlsafe_b64decode",
                                           "decodebytes",
                                           "decodestring",
                                           "b16decode",
                                           "unhexlify",
                                           "a2b_hex",
                                           "a2b_base64",
                                           "fromhex",
                                           "atob",
                                           "unescape",
                                           "decodeURIComponent",
                                           "decodeURI",
                                           NULL};
    static const char *const passthru[] = {
        "bytes", "str", "bytearray", "String", "Buffer.from", "TextDecoder.decode", NULL};
    const struct toks *in = f->in;
    const char *last = last_component(chain);
    size_t a = j + 1, k = a + 1;
    char how[64] = "";
    int r = 0;
    if (!is_t(in, a, T_STR) || (in->v[a].flags & F_TEMPLATE) ||
        !(IS_OP(in, a + 1, ")") || IS_OP(in, a + 1, ",")))
        return 0;
    const struct tok *s = &in->v[a];
    if (IS_OP(in, k, ",") && is_t(in, k + 1, T_STR)) {
        snprintf(how, sizeof(how), "%.*s", (int)in->v[k + 1].n, ttext(in, &in->v[k + 1]));
        k += 2;
    }
    /* skip further simple arguments up to ')' */
    while (k < in->n && k - a < 8 && !IS_OP(in, k, ")") && !IS_OP(in, k, "(") && in->v[k].t != T_NL)
        k++;
    if (!IS_OP(in, k, ")"))
        return 0;
    if (is_importer(f->py, chain) && s->n && s->n < 128) {
        const char *m = ttext(in, s);
        size_t mn = s->n;
        if (mn > 5 && memcmp(m, "node:", 5) == 0)
            m += 5, mn -= 5;
        /* __import__ reached through function globals or frames keeps its evasion visible */
        const char *dunder = strstr(chain, "__.");
        if (dunder || strstr(chain, "f_globals") || strstr(chain, "f_builtins"))
            r = add_note(f->nm, "evasion_object_graph", TC_SEV_HIGH, in->v[i].src,
                         "imports through an object reached by walking the object graph");
        if (r < 0)
            return r;
        if (s->flags & F_BUILT)
            r = note_built(f, in->v[i].src, "module imported by a name built at run time");
        else if (f->py)
            r = add_note(f->nm, "dynamic_import", TC_SEV_LOW, in->v[i].src,
                         "module imported by name at run time");
        if (r >= 0)
            r = push(f->out, T_NAME, in->v[i].src, m, mn, 0, 0);
        *next = k + 1;
        return r < 0 ? r : 1;
    }
    int fl = s->flags;
    bool done = false;
    tc_buf_reset(&f->v);
    if (in_list(last, decoders)) {
        done = decode_as(last, ttext(in, s), s->n, &f->v);
        fl |= F_DECODED;
    } else if ((strcmp(chain, "codecs.decode") == 0 || strcmp(chain, "codecs.encode") == 0 ||
                strcmp(chain, "decode") == 0) &&
               how[0]) {
        done = decode_as(how, ttext(in, s), s->n, &f->v);
        fl |= F_DECODED;
    } else if (in_list(chain, passthru)) {
        if (!how[0] || !(done = decode_as(how, ttext(in, s), s->n, &f->v))) {
            tc_buf_reset(&f->v);
            if ((r = tc_buf_append(&f->v, ttext(in, s), s->n)) < 0)
                return r;
            done = true;
        } else {
            fl |= F_DECODED;
        }
    }
    if (!done)
        return 0;
    if ((fl & F_DECODED) && !(s->flags & F_DECODED) && strcmp(chain, "codecs.encode") != 0 &&
        (r = add_note(f->nm, "encoded_literal", TC_SEV_LOW, in->v[i].src,
                      "encoded string literal decoded at run time")) < 0)
        return r;
    if ((r = push(f->out, T_STR, in->v[i].src, f->v.data ? f->v.data : "", f->v.len, fl, 0)) < 0)
        return r;
    *next = k + 1;
    return 1;
}

/* getattr(x.y, "name"[, default]) and Reflect.get(x.y, "name") -> x.y.name */
static int fr_getattr(struct fold *f, size_t i, size_t j, const char *chain, size_t *next)
{
    const struct toks *in = f->in;
    char obj[256];
    size_t a = j + 1;
    int r = 0;
    if (!(strcmp(chain, "getattr") == 0 || strcmp(chain, "builtins.getattr") == 0 ||
          (!f->py && strcmp(chain, "Reflect.get") == 0)) ||
        !is_t(in, a, T_NAME))
        return 0;
    size_t k = chain_at(in, a, obj, sizeof(obj));
    if (!IS_OP(in, k, ",") || !is_t(in, k + 1, T_STR) ||
        !ident_like(ttext(in, &in->v[k + 1]), in->v[k + 1].n) ||
        !(IS_OP(in, k + 2, ")") || IS_OP(in, k + 2, ",")))
        return 0;
    const struct tok *s = &in->v[k + 1];
    size_t e = k + 2;
    while (e < in->n && !IS_OP(in, e, ")") && e - k < 8)
        e++;
    if (!IS_OP(in, e, ")"))
        return 0;
    for (size_t x = a; x < k && r >= 0; x++)
        r = copy_tok(f->out, in, x);
    if (r >= 0)
        r = push(f->out, T_OP, in->v[i].src, ".", 1, 0, 0);
    if (r >= 0)
        r = push(f->out, T_NAME, in->v[i].src, ttext(in, s), s->n,
                 (s->flags & F_BUILT) ? (s->flags & F_BUILT) | F_GETATTR : 0, 0);
    *next = e + 1;
    return r < 0 ? r : 1;
}

/* A dotted name followed by a call: the call rules, else the chain copied as is. */
static int fr_chain(struct fold *f, size_t i, size_t *next)
{
    const struct toks *in = f->in;
    char chain[256];
    int r;
    if (in->v[i].t != T_NAME || (i > 0 && IS_OP(in, i - 1, ".")))
        return 0;
    size_t j = chain_at(in, i, chain, sizeof(chain));
    if ((r = fr_const(f, i, next)) != 0)
        return r;
    if (IS_OP(in, j, "(")) {
        if ((r = fr_char_codes(f, i, j, chain, next)) != 0 ||
            (r = fr_reversed(f, i, j, chain, next)) != 0 ||
            (r = fr_call_literal(f, i, j, chain, next)) != 0 ||
            (r = fr_getattr(f, i, j, chain, next)) != 0)
            return r;
    }
    r = 0;
    for (size_t x = i; x < j && r >= 0; x++)
        r = copy_tok(f->out, in, x);
    *next = j;
    return r < 0 ? r : 2; /* copied, not folded */
}

typedef int (*fold_rule)(struct fold *f, size_t i, size_t *next);

/* One folding pass; f->changed set when anything was folded. */
static int fold_pass(struct fold *f)
{
    static const fold_rule rules[] = {fr_string, fr_subscript, fr_array_join, fr_paren, fr_chain};
    int r = 0;
    for (size_t i = 0; i < f->in->n && r >= 0;) {
        size_t next = i + 1;
        int got = 0;
        for (size_t k = 0; k < TC_ARRAY_SIZE(rules) && got == 0; k++)
            got = rules[k](f, i, &next);
        if (got < 0)
            return got;
        if (got == 0)
            r = copy_tok(f->out, f->in, i);
        else if (got == 1)
            f->changed = true;
        i = next > i ? next : i + 1;
    }
    return r;
}

/* The end of a statement (not of an argument). */
static bool stmt_end_strict(const struct toks *ts, size_t i)
{
    return i >= ts->n || ts->v[i].t == T_NL || IS_OP(ts, i, ";") || IS_OP(ts, i, "}");
}

/* Single-assignment string constants: NAME = "..." (or a, b = "x", "y") at the start of a
 * statement, with no other binding of NAME anywhere (another assignment, a compound one, a
 * for/as/def/import target). The value is stored behind a flag byte. */
static int collect_consts(bool py, const struct toks *ts, struct kvs *consts)
{
    struct {
        size_t tok;
        const struct tok *val;
    } cand[MAX_ALIASES];
    size_t nc = 0;
    int r = 0;
    kv_free(consts);
    for (size_t i = 0; i < ts->n && nc < MAX_ALIASES; i++) {
        bool start = i == 0 || ts->v[i - 1].t == T_NL || IS_OP(ts, i - 1, ";") ||
                     (!py && IS_OP(ts, i - 1, "{"));
        if (!start)
            continue;
        size_t k = i;
        if (!py && (IS_NAME(ts, k, "const") || IS_NAME(ts, k, "let") || IS_NAME(ts, k, "var")))
            k++;
        size_t names = k, nn = 0;
        while (is_t(ts, k, T_NAME) && nn < 8) {
            nn++, k++;
            if (!IS_OP(ts, k, ","))
                break;
            k++;
        }
        if (!nn || !IS_OP(ts, k, "=") || IS_OP(ts, k + 1, "="))
            continue;
        size_t v = k + 1, nv = 0;
        while (is_t(ts, v, T_STR) && !(ts->v[v].flags & F_TEMPLATE) && nv < 8) {
            nv++, v++;
            if (!IS_OP(ts, v, ","))
                break;
            v++;
        }
        if (nv != nn || !stmt_end_strict(ts, v))
            continue;
        for (size_t q = 0; q < nn && nc < MAX_ALIASES; q++)
            cand[nc].tok = names + 2 * q, cand[nc++].val = &ts->v[k + 1 + 2 * q];
    }
    if (!nc)
        return 0;
    /* every other binding of a candidate disqualifies it */
    bool *bad = calloc(nc, sizeof(*bad));
    if (!bad)
        return -ENOMEM;
    bool in_for = false;
    for (size_t i = 0; i < ts->n; i++) {
        if (IS_NAME(ts, i, "for"))
            in_for = true;
        else if (ts->v[i].t == T_NL || IS_NAME(ts, i, "in") || IS_NAME(ts, i, "of") ||
                 IS_OP(ts, i, ";") || IS_OP(ts, i, ":"))
            in_for = false;
        if (ts->v[i].t != T_NAME || (i > 0 && IS_OP(ts, i - 1, ".")))
            continue;
        bool binds = in_for ||
                     (i > 0 && binding_keyword(ts, i - 1) && !IS_NAME(ts, i - 1, "const") &&
                      !IS_NAME(ts, i - 1, "let") && !IS_NAME(ts, i - 1, "var")) ||
                     is_target(ts, i);
        if (!binds)
            continue;
        for (size_t q = 0; q < nc; q++)
            if (!bad[q] && q < nc && cand[q].tok != i && ts->v[i].n == ts->v[cand[q].tok].n &&
                memcmp(ttext(ts, &ts->v[i]), ttext(ts, &ts->v[cand[q].tok]), ts->v[i].n) == 0)
                bad[q] = true;
    }
    for (size_t q = 0; q < nc && r >= 0; q++) {
        if (bad[q] || cand[q].val->n > MAX_VALUE ||
            memchr(ttext(ts, cand[q].val), 0, cand[q].val->n))
            continue;
        char *val = malloc(cand[q].val->n + 2);
        if (!val) {
            r = -ENOMEM;
            break;
        }
        val[0] = (char)(0x80 | (cand[q].val->flags & F_BUILT));
        memcpy(val + 1, ttext(ts, cand[q].val), cand[q].val->n);
        val[cand[q].val->n + 1] = '\0';
        const struct tok *nt = &ts->v[cand[q].tok];
        r = kv_set(consts, ttext(ts, nt), nt->n, val, cand[q].val->n + 1);
        free(val);
    }
    free(bad);
    return r;
}

static const char *const sensitive_heads[] = {
    "os",       "sys",      "subprocess", "builtins",  "__builtins__", "eval",  "exec",
    "compile",  "getattr",  "__import__", "importlib", "socket",       "pty",   "shutil",
    "ctypes",   "codecs",   "base64",     "pickle",    "marshal",      "open",  "child_process",
    "Function", "process",  "fs",         "net",       "vm",           "http",  "https",
    "setattr",  "requests", "urllib",     "commands",  "execSync",     "spawn", "system",
    "popen",    "dup2",     "connect",    "Popen",     "require",      NULL};

static bool sensitive(const char *chain)
{
    char head[64];
    size_t n = strcspn(chain, ".");
    if (n >= sizeof(head))
        return false;
    memcpy(head, chain, n);
    head[n] = '\0';
    return in_list(head, sensitive_heads) || in_list(last_component(chain), sensitive_heads);
}

/* Resolve the head of a dotted chain through the aliases. */
static void resolve(const struct kvs *al, const char *chain, char *out, size_t outsz)
{
    size_t n = strcspn(chain, ".");
    const char *a = kv_get(al, chain, n);
    if (a)
        snprintf(out, outsz, "%s%s", a, chain + n);
    else
        snprintf(out, outsz, "%s", chain);
}

static bool stmt_end(const struct toks *ts, size_t i)
{
    return i >= ts->n || ts->v[i].t == T_NL || IS_OP(ts, i, ";") || IS_OP(ts, i, ",");
}

static int alias_note(struct ps_norm *n, const struct toks *ts, const struct tok *as,
                      const char *target);

/* Import and assignment aliases into al; a misleading one is also a note in n. */
static int collect_aliases(bool py, const struct toks *ts, struct kvs *al, struct ps_norm *n)
{
    char chain[256], tgt[512], full[640];
    int r = 0;
    for (size_t i = 0; i < ts->n && r >= 0; i++) {
        bool start = i == 0 || ts->v[i - 1].t == T_NL || IS_OP(ts, i - 1, ";");
        if (!start && !(i > 0 && IS_OP(ts, i - 1, "{") && !py))
            continue;
        if (py && IS_NAME(ts, i, "import")) {
            size_t k = i + 1;
            while (is_t(ts, k, T_NAME)) {
                size_t e = chain_at(ts, k, chain, sizeof(chain));
                if (IS_NAME(ts, e, "as") && is_t(ts, e + 1, T_NAME)) {
                    const struct tok *a = &ts->v[e + 1];
                    r = kv_set(al, ttext(ts, a), a->n, chain, strlen(chain));
                    if (r >= 0)
                        r = alias_note(n, ts, a, chain);
                    e += 2;
                }
                if (!IS_OP(ts, e, ","))
                    break;
                k = e + 1;
            }
        } else if (py && IS_NAME(ts, i, "from") && is_t(ts, i + 1, T_NAME)) {
            size_t e = chain_at(ts, i + 1, chain, sizeof(chain));
            if (!IS_NAME(ts, e, "import"))
                continue;
            size_t k = e + 1;
            if (IS_OP(ts, k, "("))
                k++;
            while (is_t(ts, k, T_NAME) && r >= 0) {
                const struct tok *nm = &ts->v[k], *as = nm;
                k++;
                if (IS_NAME(ts, k, "as") && is_t(ts, k + 1, T_NAME))
                    as = &ts->v[k + 1], k += 2;
                snprintf(full, sizeof(full), "%s.%.*s", chain, (int)nm->n, ttext(ts, nm));
                r = kv_set(al, ttext(ts, as), as->n, full, strlen(full));
                if (r >= 0 && as != nm)
                    r = alias_note(n, ts, as, full);
                if (!IS_OP(ts, k, ","))
                    break;
                k++;
                while (is_t(ts, k, T_NL))
                    k++;
            }
        } else if (!py && IS_NAME(ts, i, "import")) {
            /* import x from "m"; import * as x from "m"; import { a as b, c } from "m" */
            size_t k = i + 1, s = 0;
            while (k < ts->n && k - i < 64 && !IS_NAME(ts, k, "from") && ts->v[k].t != T_NL)
                k++;
            if (!IS_NAME(ts, k, "from") || !is_t(ts, k + 1, T_STR))
                continue;
            s = k + 1;
            snprintf(chain, sizeof(chain), "%.*s", (int)ts->v[s].n, ttext(ts, &ts->v[s]));
            if (strncmp(chain, "node:", 5) == 0)
                memmove(chain, chain + 5, strlen(chain + 5) + 1);
            for (size_t x = i + 1; x < k && r >= 0; x++) {
                if (!is_t(ts, x, T_NAME) || IS_NAME(ts, x, "as"))
                    continue;
                bool braced = false;
                for (size_t y = i + 1; y < x; y++)
                    braced = IS_OP(ts, y, "{") ? true : IS_OP(ts, y, "}") ? false : braced;
                const struct tok *nm = &ts->v[x], *as = nm;
                if (IS_NAME(ts, x + 1, "as") && is_t(ts, x + 2, T_NAME))
                    as = &ts->v[x + 2];
                else if (x > 0 && IS_NAME(ts, x - 1, "as"))
                    continue;
                if (braced)
                    snprintf(full, sizeof(full), "%s.%.*s", chain, (int)nm->n, ttext(ts, nm));
                else
                    snprintf(full, sizeof(full), "%s", chain);
                r = kv_set(al, ttext(ts, as), as->n, full, strlen(full));
                if (r >= 0)
                    r = alias_note(n, ts, as, full);
            }
        } else {
            size_t k = i;
            if (!py && (IS_NAME(ts, k, "const") || IS_NAME(ts, k, "let") || IS_NAME(ts, k, "var")))
                k++;
            if (!py && IS_OP(ts, k, "{")) {
                /* const { a, b: c } = chain */
                size_t e = k + 1;
                while (e < ts->n && e - k < 64 && !IS_OP(ts, e, "}"))
                    e++;
                if (!IS_OP(ts, e, "}") || !IS_OP(ts, e + 1, "=") || !is_t(ts, e + 2, T_NAME))
                    continue;
                size_t ce = chain_at(ts, e + 2, chain, sizeof(chain));
                if (!stmt_end(ts, ce))
                    continue;
                resolve(al, chain, tgt, sizeof(tgt));
                for (size_t x = k + 1; x < e && r >= 0; x++) {
                    if (!is_t(ts, x, T_NAME) || IS_OP(ts, x + 1, ":"))
                        continue;
                    const struct tok *as = &ts->v[x], *nm = as;
                    if (x >= 2 && IS_OP(ts, x - 1, ":") && is_t(ts, x - 2, T_NAME))
                        nm = &ts->v[x - 2];
                    snprintf(full, sizeof(full), "%s.%.*s", tgt, (int)nm->n, ttext(ts, nm));
                    r = kv_set(al, ttext(ts, as), as->n, full, strlen(full));
                    if (r >= 0)
                        r = alias_note(n, ts, as, full);
                }
                continue;
            }
            if (is_t(ts, k, T_NAME) && IS_OP(ts, k + 1, "=") && !IS_OP(ts, k + 2, "=") &&
                is_t(ts, k + 2, T_NAME)) {
                size_t ce = chain_at(ts, k + 2, chain, sizeof(chain));
                if (!stmt_end(ts, ce) && !IS_OP(ts, ce, "("))
                    continue;
                if (IS_OP(ts, ce, "(") && !(IS_OP(ts, ce + 1, ")") && stmt_end(ts, ce + 2)))
                    continue;
                resolve(al, chain, tgt, sizeof(tgt));
                if (IS_OP(ts, ce, "(")) /* x = os.popen() etc. are results, not aliases */
                    continue;
                if (sensitive(tgt)) {
                    r = kv_set(al, ttext(ts, &ts->v[k]), ts->v[k].n, tgt, strlen(tgt));
                    if (r >= 0)
                        r = alias_note(n, ts, &ts->v[k], tgt);
                }
            }
        }
    }
    return r;
}

/* ---- evasion: names built at run time, misleading aliases ----
 *
 * Folding resolves what it can; what it cannot resolve is judged by its shape. A name handed
 * to getattr/__import__/import_module/require/import()/Reflect.get, or used to index a
 * namespace (globals(), vars(x), __builtins__, sys.modules, __dict__, globalThis, process, a
 * module), that is computed with character codes, decoding, reversal, slicing, joining
 * characters, XOR, or from a variable that was, is an evasion: ordinary code names what it
 * calls. Building a name from a literal prefix and a variable ("do_" + cmd) is ordinary
 * dispatch and is not flagged. */

/* Operations that encode, decode or assemble text from character codes. (Not ord(), .decode(),
 * .reverse() or URL decoding on their own: ordinary code uses them on names all the time.) */
static const char *const strong_names[] = {"chr",
                                           "unichr",
                                           "fromCharCode",
                                           "fromCodePoint",
                                           "reversed",
                                           "b64decode",
                                           "b32decode",
                                           "b16decode",
                                           "b85decode",
                                           "a85decode",
                                           "urlsafe_b64decode",
                                           "standard_b64decode",
                                           "decodebytes",
                                           "decodestring",
                                           "unhexlify",
                                           "a2b_hex",
                                           "a2b_base64",
                                           "fromhex",
                                           "atob",
                                           "maketrans",
                                           "rot13",
                                           "rot_13",
                                           "decompress",
                                           NULL};

static const char *const transform_methods[] = {
    "lower",       "upper",  "casefold", "swapcase", "capitalize", "title",  "replace",
    "replaceAll",  "format", "split",    "slice",    "substring",  "substr", "toLowerCase",
    "toUpperCase", "concat", "repeat",   "strip",    "charAt",     NULL};

/* A literal made only of format placeholders: "%s%s", "{}{}", "%c%c%c". */
static bool only_placeholders(const char *s, size_t n)
{
    size_t k = 0, parts = 0;
    while (k < n) {
        if (s[k] == '%' && k + 1 < n && strchr("scdi", s[k + 1]))
            k += 2, parts++;
        else if (s[k] == '{') {
            const char *e = memchr(s + k, '}', n - k);
            if (!e || (size_t)(e - s) - k > 3)
                return false;
            k = (size_t)(e - s) + 1, parts++;
        } else
            return false;
    }
    return parts >= 2;
}

static bool tok_in(const struct toks *ts, size_t i, const char *const *list)
{
    char b[32];
    if (!is_t(ts, i, T_NAME) || ts->v[i].n >= sizeof(b))
        return false;
    snprintf(b, sizeof(b), "%.*s", (int)ts->v[i].n, ttext(ts, &ts->v[i]));
    return in_list(b, list);
}

/* Does the expression in tokens [a, b) compute a name in an obfuscating way? */
static bool strong_expr(bool py, const struct toks *ts, size_t a, size_t b, const struct kvs *taint)
{
    if (b > a + 256)
        b = a + 256;
    for (size_t k = a; k < b && k < ts->n; k++) {
        const struct tok *t = &ts->v[k];
        if (t->t == T_STR) {
            if (t->flags & F_BUILT)
                return true;
            if ((t->flags & F_TEMPLATE) && template_only_parts(py, ttext(ts, t), t->n))
                return true;
            if (IS_OP(ts, k + 1, "[")) /* slicing or indexing a literal */
                return true;
            if (IS_OP(ts, k + 1, ".") && tok_in(ts, k + 2, transform_methods))
                return true;
            if ((IS_OP(ts, k + 1, "%") ||
                 (IS_OP(ts, k + 1, ".") && IS_NAME(ts, k + 2, "format"))) &&
                only_placeholders(ttext(ts, t), t->n))
                return true;
            continue;
        }
        if (t->t == T_OP) {
            if (IS_OP(ts, k, "^") ||
                (IS_OP(ts, k, "[") && IS_OP(ts, k + 1, ":") && IS_OP(ts, k + 2, ":")))
                return true;
            /* .reverse().join(...): reversing a string in JavaScript */
            if (!py && IS_OP(ts, k, ".") && IS_NAME(ts, k + 1, "reverse") &&
                IS_OP(ts, k + 2, "(") && IS_OP(ts, k + 3, ")") && IS_OP(ts, k + 4, ".") &&
                IS_NAME(ts, k + 5, "join"))
                return true;
            continue;
        }
        if (t->t != T_NAME)
            continue;
        if (tok_in(ts, k, strong_names))
            return true;
        if (!(k > 0 && IS_OP(ts, k - 1, ".")) && !IS_OP(ts, k + 1, "(") &&
            kv_get(taint, ttext(ts, t), t->n))
            return true;
    }
    return false;
}

/* The index after the expression that starts at a (up to a ',' or the closing bracket at
 * depth 0). */
static size_t expr_end(const struct toks *ts, size_t a)
{
    int depth = 0;
    size_t k = a;
    for (; k < ts->n && k - a < 4096; k++) {
        if (is_t(ts, k, T_OP)) {
            char c = ttext(ts, &ts->v[k])[0];
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if (c == ')' || c == ']' || c == '}') {
                if (depth == 0)
                    break;
                depth--;
            } else if (c == ',' && depth == 0)
                break;
        } else if (ts->v[k].t == T_NL && depth == 0)
            break;
    }
    return k;
}

/* Is the name at i a binding of it (an assignment target, a loop variable, def/class/as/import
 * target)? in_for: between "for" and "in"/"of". */
static bool binds_at(const struct toks *ts, size_t i, bool in_for)
{
    return in_for || is_target(ts, i) || (i > 0 && binding_keyword(ts, i - 1));
}

/* Variables assigned from an obfuscating expression and bound nowhere else (names reused across
 * functions, like name or key, are not traced). A few rounds, so taint flows from variable to
 * variable; each round walks the tokens twice. */
static int collect_taint(bool py, const struct toks *ts, struct kvs *taint)
{
    struct kvs *cand = calloc(1, sizeof(*cand));
    int r = 0;
    if (!cand)
        return -ENOMEM;
    for (int round = 0; round < 3 && r >= 0; round++) {
        kv_free(cand);
        for (size_t i = 0; i < ts->n && r >= 0; i++) {
            bool start = i == 0 || ts->v[i - 1].t == T_NL || IS_OP(ts, i - 1, ";") ||
                         IS_OP(ts, i - 1, "{") || IS_OP(ts, i - 1, ":");
            if (!start)
                continue;
            size_t k = i;
            if (!py && (IS_NAME(ts, k, "const") || IS_NAME(ts, k, "let") || IS_NAME(ts, k, "var")))
                k++;
            if (!is_t(ts, k, T_NAME))
                continue;
            size_t eq = k + 1;
            if (is_t(ts, eq, T_OP) && !IS_OP(ts, eq, "=") && IS_OP(ts, eq + 1, "=") &&
                strchr("+-*/%|&^@", ttext(ts, &ts->v[eq])[0]))
                eq++;
            if (!IS_OP(ts, eq, "=") || IS_OP(ts, eq + 1, "="))
                continue;
            const struct tok *nt = &ts->v[k];
            if (kv_get(taint, ttext(ts, nt), nt->n) || kv_get(cand, ttext(ts, nt), nt->n))
                continue;
            size_t e = eq + 1;
            int depth = 0;
            for (; e < ts->n && e - eq < 4096; e++) {
                if (ts->v[e].t == T_NL && depth == 0)
                    break;
                if (is_t(ts, e, T_OP)) {
                    char c = ttext(ts, &ts->v[e])[0];
                    if (c == ';' && depth == 0)
                        break;
                    depth +=
                        (c == '(' || c == '[' || c == '{') - (c == ')' || c == ']' || c == '}');
                    if (depth < 0)
                        break;
                }
            }
            if (strong_expr(py, ts, eq + 1, e, taint))
                r = kv_set(cand, ttext(ts, nt), nt->n, "0", 1);
        }
        if (r < 0 || cand->n == 0)
            break;
        /* count the bindings of each candidate, in one walk */
        bool in_for = false;
        for (size_t i = 0; i < ts->n && r >= 0; i++) {
            if (IS_NAME(ts, i, "for"))
                in_for = true;
            else if (ts->v[i].t == T_NL || IS_NAME(ts, i, "in") || IS_NAME(ts, i, "of") ||
                     IS_OP(ts, i, ";") || IS_OP(ts, i, ":"))
                in_for = false;
            if (ts->v[i].t != T_NAME || (i > 0 && IS_OP(ts, i - 1, ".")))
                continue;
            const char *c = kv_get(cand, ttext(ts, &ts->v[i]), ts->v[i].n);
            if (c && c[0] < '2' && binds_at(ts, i, in_for)) {
                char next[2] = {(char)(c[0] + 1), '\0'};
                r = kv_set(cand, ttext(ts, &ts->v[i]), ts->v[i].n, next, 1);
            }
        }
        size_t before = taint->n;
        for (size_t q = 0; q < cand->n && r >= 0; q++)
            if (cand->e[q].v[0] == '1')
                r = kv_set(taint, cand->e[q].k, cand->e[q].kn, "1", 1);
        if (taint->n == before)
            break;
    }
    kv_free(cand);
    free(cand);
    return r;
}

/* Namespaces whose lookups by a computed name are an evasion. */
static bool namespace_chain(bool py, const char *chain)
{
    static const char *const py_ns[] = {"__builtins__", "builtins",    "__dict__",
                                        "modules",      "__globals__", "f_globals",
                                        "f_builtins",   "f_locals",    NULL};
    static const char *const js_ns[] = {"globalThis", "global", "window",  "self",
                                        "process",    "module", "require", NULL};
    const char *last = last_component(chain);
    char head[64];
    size_t hn = strcspn(chain, ".");
    snprintf(head, sizeof(head), "%.*s", (int)(hn < 63 ? hn : 63), chain);
    /* environment variables are looked up by built names all the time */
    if (strstr(chain, ".env") || strstr(chain, "environ"))
        return false;
    if (py)
        return in_list(last, py_ns) || in_list(head, py_ns) || sensitive(chain);
    return in_list(head, js_ns) || in_list(last, js_ns) || sensitive(chain);
}

static size_t match_close(const struct toks *ts, size_t open)
{
    int depth = 0;
    for (size_t k = open; k < ts->n && k - open < 4096; k++) {
        if (!is_t(ts, k, T_OP))
            continue;
        char c = ttext(ts, &ts->v[k])[0];
        if (c == '(' || c == '[' || c == '{')
            depth++;
        else if ((c == ')' || c == ']' || c == '}') && --depth == 0)
            return k;
    }
    return ts->n;
}

/* Argument number arg of the call whose '(' is at open: its range [*a, *b); false if absent. */
static bool call_arg(const struct toks *ts, size_t open, int arg, size_t *a, size_t *b)
{
    size_t k = open + 1;
    for (int x = 0; x < arg; x++) {
        k = expr_end(ts, k);
        if (!IS_OP(ts, k, ","))
            return false;
        k++;
    }
    *a = k;
    *b = expr_end(ts, k);
    return *b > *a;
}

/* Which argument of this call names what is looked up (-1: not a name sink). */
static int name_arg(bool py, const char *res)
{
    const char *last = last_component(res);
    if (strcmp(res, "getattr") == 0 || strcmp(res, "builtins.getattr") == 0 ||
        strcmp(res, "object.__getattribute__") == 0 || strcmp(res, "type.__getattribute__") == 0)
        return 1;
    if (strcmp(last, "__import__") == 0 || strcmp(last, "import_module") == 0 ||
        strcmp(last, "attrgetter") == 0 || strcmp(last, "__getattribute__") == 0)
        return 0;
    if (!py &&
        (strcmp(res, "require") == 0 || strcmp(res, "import") == 0 || strcmp(last, "_load") == 0))
        return 0;
    if (!py &&
        (strcmp(res, "Reflect.get") == 0 || strcmp(res, "Reflect.getOwnPropertyDescriptor") == 0))
        return 1;
    return -1;
}

static const char *const dangerous_names[] = {"os",
                                              "posix",
                                              "nt",
                                              "subprocess",
                                              "commands",
                                              "pty",
                                              "system",
                                              "popen",
                                              "Popen",
                                              "spawn",
                                              "spawnSync",
                                              "exec",
                                              "execSync",
                                              "execFile",
                                              "execFileSync",
                                              "execv",
                                              "execve",
                                              "execl",
                                              "execlp",
                                              "execvp",
                                              "eval",
                                              "compile",
                                              "__import__",
                                              "__builtins__",
                                              "builtins",
                                              "getattr",
                                              "import_module",
                                              "child_process",
                                              "require",
                                              "Function",
                                              "constructor",
                                              "binding",
                                              "mainModule",
                                              "process",
                                              "globalThis",
                                              "vm",
                                              "runInThisContext",
                                              "runInNewContext",
                                              "socket",
                                              "ctypes",
                                              "marshal",
                                              "pickle",
                                              "check_output",
                                              "getoutput",
                                              "check_call",
                                              "__globals__",
                                              "__subclasses__",
                                              "sh",
                                              "bash",
                                              "/bin/sh",
                                              "/bin/bash",
                                              "node:child_process",
                                              NULL};

static int scan_sinks(bool py, const struct toks *ts, const struct kvs *al, const struct kvs *taint,
                      struct ps_norm *n)
{
    char chain[256], res[512];
    int r = 0, sinks = 0; /* arguments examined, each up to 4096 tokens: bounded */
    for (size_t i = 0; i < ts->n && r >= 0; i++) {
        if (ts->v[i].t == T_STR && (ts->v[i].flags & F_BUILT) && ts->v[i].n < 32) {
            char v[32];
            snprintf(v, sizeof(v), "%.*s", (int)ts->v[i].n, ttext(ts, &ts->v[i]));
            if (in_list(v, dangerous_names))
                r = add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
                             "a string assembled or decoded at run time spells the name of a "
                             "process-spawning or code-executing function or module");
            continue;
        }
        if (ts->v[i].t == T_NAME && i > 1 && IS_OP(ts, i - 1, ".") && (ts->v[i].flags & F_BUILT)) {
            /* x["na" + "me"] / getattr(x, "na" + "me") folded into x.name: decoded names and
             * getattr always count; a name assembled from constant pieces when it indexes a
             * namespace, a module, a call's result or an array (config[key.upper()] is fine) */
            char nm[32];
            snprintf(nm, sizeof(nm), "%.*s", (int)(ts->v[i].n < 31 ? ts->v[i].n : 31),
                     ttext(ts, &ts->v[i]));
            bool hit = (ts->v[i].flags & F_GETATTR) || in_list(nm, dangerous_names) ||
                       is_t(ts, i - 2, T_OP); /* ...)[..], ...][..] */
            if (!hit) {
                size_t st = i - 2;
                while (st >= 2 && IS_OP(ts, st - 1, ".") && is_t(ts, st - 2, T_NAME))
                    st -= 2;
                chain_at(ts, st, chain, sizeof(chain));
                resolve(al, chain, res, sizeof(res));
                hit = namespace_chain(py, res);
            }
            if (hit)
                r = add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
                             "an attribute, global or module is looked up by a name built at run "
                             "time (joined, concatenated, decoded, reversed or from character "
                             "codes)");
            continue;
        }
        if (ts->v[i].t != T_NAME || (i > 0 && IS_OP(ts, i - 1, ".")))
            continue;
        size_t j = chain_at(ts, i, chain, sizeof(chain));
        resolve(al, chain, res, sizeof(res));
        size_t a, b;
        /* {"run": os.system} / {"run": staticmethod(os.system)} / setattr(x, "run", os.system):
         * a spawn function filed under another name */
        if (strchr(res, '.') && !IS_OP(ts, j, "(") && !IS_OP(ts, j, ".")) {
            size_t k = i;
            if (k >= 2 && IS_OP(ts, k - 1, "(") &&
                (IS_NAME(ts, k - 2, "staticmethod") || IS_NAME(ts, k - 2, "classmethod")))
                k -= 2;
            if (k >= 2 && (IS_OP(ts, k - 1, ":") || IS_OP(ts, k - 1, ",")) &&
                is_t(ts, k - 2, T_STR) && ts->v[k - 2].n && ts->v[k - 2].n < 64 &&
                (IS_OP(ts, k - 1, ":") || (k >= 5 && IS_NAME(ts, k - 5, "setattr"))) &&
                (r = alias_note(n, ts, &ts->v[k - 2], res)) < 0)
                break;
        }
        if (IS_OP(ts, j, "(")) {
            int arg = name_arg(py, res);
            const char *last = last_component(res);
            /* namespace.get(name) */
            if (arg < 0 && strcmp(last, "get") == 0 && strchr(res, '.')) {
                char obj[512];
                snprintf(obj, sizeof(obj), "%.*s", (int)(last - res - 1), res);
                if (namespace_chain(py, obj))
                    arg = 0;
            }
            if (arg >= 0 && sinks++ < 4096 && call_arg(ts, j, arg, &a, &b) &&
                strong_expr(py, ts, a, b, taint)) {
                r = add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
                             "a module, attribute or global is looked up by a name computed at "
                             "run time (character codes, decoding, reversal, slicing or joining)");
                continue;
            }
            /* globals()[...], vars(x)[...], locals().get(...) */
            if (py && (strcmp(chain, "globals") == 0 || strcmp(chain, "locals") == 0 ||
                       strcmp(chain, "vars") == 0)) {
                if (sinks++ >= 4096)
                    continue;
                size_t c = match_close(ts, j);
                size_t o = c + 1;
                if (IS_OP(ts, o, ".") && IS_NAME(ts, o + 1, "get") && IS_OP(ts, o + 2, "("))
                    o += 2;
                else if (!IS_OP(ts, o, "["))
                    continue;
                if (call_arg(ts, o, 0, &a, &b) && strong_expr(py, ts, a, b, taint))
                    r = add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
                                 "a namespace is indexed by a name computed at run time");
            }
            continue;
        }
        if (IS_OP(ts, j, "[") && namespace_chain(py, res) && sinks++ < 4096 &&
            call_arg(ts, j, 0, &a, &b) && strong_expr(py, ts, a, b, taint))
            r = add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
                         "a namespace or module is indexed by a name computed at run time");
    }
    return r;
}

/* Is alias an abbreviation of name, or name of alias (case and '_'/'$' ignored)? */
static bool abbreviates(const char *alias, size_t an, const char *name)
{
    char x[80], y[80];
    size_t xn = 0, yn = 0;
    for (size_t k = 0; k < an && xn + 1 < sizeof(x); k++)
        if (alias[k] != '_' && alias[k] != '$')
            x[xn++] = (char)((alias[k] >= 'A' && alias[k] <= 'Z') ? alias[k] + 32 : alias[k]);
    for (size_t k = 0; name[k] && yn + 1 < sizeof(y); k++)
        if (name[k] != '_' && name[k] != '$')
            y[yn++] = (char)((name[k] >= 'A' && name[k] <= 'Z') ? name[k] + 32 : name[k]);
    if (!xn || !yn)
        return true;
    const char *s = xn <= yn ? x : y, *l = xn <= yn ? y : x;
    size_t sn = xn <= yn ? xn : yn, ln = xn <= yn ? yn : xn, q = 0;
    for (size_t k = 0; k < ln && q < sn; k++)
        q += l[k] == s[q];
    return q == sn;
}

/* An alias of a process-spawning module/function under an unrelated name, or of a
 * code-execution builtin under any other name. */
static int alias_note(struct ps_norm *n, const struct toks *ts, const struct tok *as,
                      const char *target)
{
    static const char *const spawn_modules[] = {"os",    "subprocess", "pty",           "commands",
                                                "posix", "popen2",     "child_process", "shelljs",
                                                "execa", NULL};
    static const char *const spawn_funcs[] = {
        "system",       "popen",        "Popen",     "spawn",
        "spawnSync",    "exec",         "execSync",  "execFile",
        "execFileSync", "fork",         "call",      "check_call",
        "check_output", "run",          "getoutput", "getstatusoutput",
        "execl",        "execle",       "execlp",    "execlpe",
        "execv",        "execve",       "execvp",    "execvpe",
        "spawnl",       "spawnle",      "spawnlp",   "spawnlpe",
        "spawnv",       "spawnve",      "spawnvp",   "spawnvpe",
        "posix_spawn",  "posix_spawnp", NULL};
    static const char *const code_builtins[] = {"eval",     "exec",       "compile",
                                                "execfile", "__import__", "getattr",
                                                "Function", "require",    NULL};
    static const char *const global_objs[] = {"builtins", "__builtins__", "globalThis", "global",
                                              "window",   "self",         NULL};
    const char *alias = ttext(ts, as), *last = last_component(target);
    char head[64];
    size_t hn = strcspn(target, ".");
    snprintf(head, sizeof(head), "%.*s", (int)(hn < 63 ? hn : 63), target);
    if (as->n == strlen(target) && memcmp(alias, target, as->n) == 0)
        return 0;
    if (in_list(last, code_builtins) && (strcmp(head, target) == 0 || in_list(head, global_objs)))
        return add_note(n, "evasion_alias", TC_SEV_HIGH, as->src,
                        "a code-execution builtin (eval, exec, Function, __import__, getattr) "
                        "is given another name");
    if (!in_list(head, spawn_modules) || (strcmp(head, target) != 0 && !in_list(last, spawn_funcs)))
        return 0;
    if (abbreviates(alias, as->n, last))
        return 0;
    return add_note(n, "evasion_alias", TC_SEV_HIGH, as->src,
                    "a process-spawning module or function goes by an unrelated name");
}

static const char *const shell_sinks[] = {
    "system",     "popen",  "getoutput", "getstatusoutput", "check_output",
    "check_call", "call",   "run",       "Popen",           "exec",
    "execSync",   "spawn",  "spawnSync", "execFile",        "execFileSync",
    "execl",      "execlp", "spawnl",    "spawnlp",         NULL};
static const char *const shell_sink_heads[] = {"os",      "subprocess", "commands", "child_process",
                                               "shelljs", "pty",        NULL};
static const char *const code_sinks[] = {
    "exec",         "eval",   "compile",    "Function",    "runInNewContext", "runInThisContext",
    "runInContext", "Script", "setTimeout", "setInterval", "execfile",        NULL};

static int emit_pyjs(bool py, const struct toks *ts, const struct kvs *al, int depth,
                     struct ps_norm *n)
{
    char chain[256], res[512], call[512] = "";
    int r = 0;
    bool prev_word = false;
    size_t chain_start = SIZE_MAX;

    for (size_t i = 0; i < ts->n && r >= 0; i++) {
        const struct tok *t = &ts->v[i];
        const char *s = ttext(ts, t);
        if (t->t == T_NL) {
            r = out_bytes(n, "\n", 1, t->src);
            prev_word = false;
            continue;
        }
        if (t->t == T_NAME) {
            bool after_dot = i > 0 && IS_OP(ts, i - 1, ".");
            if (!after_dot)
                chain_start = i;
            const char *a = NULL;
            if (!after_dot && !(IS_OP(ts, i + 1, "=") && !IS_OP(ts, i + 2, "=")))
                a = kv_get(al, s, t->n);
            if (prev_word && (r = out_bytes(n, " ", 1, t->src)) < 0)
                break;
            r = a ? out_bytes(n, a, strlen(a), t->src) : out_bytes(n, s, t->n, t->src);
            prev_word = true;
            continue;
        }
        if (t->t == T_NUM) {
            if (prev_word && (r = out_bytes(n, " ", 1, t->src)) < 0)
                break;
            r = out_bytes(n, s, t->n, t->src);
            prev_word = true;
            continue;
        }
        if (t->t == T_OP) {
            if (IS_OP(ts, i, "(") && chain_start != SIZE_MAX && i > 0 && ts->v[i - 1].t == T_NAME) {
                chain_at(ts, chain_start, chain, sizeof(chain));
                resolve(al, chain, call, sizeof(call));
            } else if (!IS_OP(ts, i, "."))
                chain_start = SIZE_MAX;
            r = out_bytes(n, s, t->n, t->src);
            prev_word = false;
            continue;
        }
        /* string literal */
        if (prev_word && (r = out_bytes(n, " ", 1, t->src)) < 0)
            break;
        if ((r = out_bytes(n, "\"", 1, t->src)) < 0)
            break;
        if ((t->flags & F_DECODED) && (r = out_bytes(n, "\x01", 1, t->src)) < 0)
            break;
        for (size_t k = 0; k < t->n && r >= 0; k++) {
            char c = s[k];
            if (c == '"')
                c = '\'';
            else if (c == '\n' || c == '\r' || c == 0)
                c = ' ';
            r = out_bytes(n, &c, 1, t->src);
        }
        if (r >= 0)
            r = out_bytes(n, "\"", 1, t->src);
        prev_word = false;
        if (r < 0)
            break;
        /* queue payloads for another scan */
        enum ps_lang self = py ? PS_PYTHON : PS_JS;
        bool arg = i >= 1 && IS_OP(ts, i - 1, "(") && call[0];
        if (arg) {
            char head[64];
            size_t hn = strcspn(call, ".");
            snprintf(head, sizeof(head), "%.*s", (int)(hn < 63 ? hn : 63), call);
            const char *last = last_component(call);
            if (in_list(head, shell_sink_heads) && in_list(last, shell_sinks))
                r = add_job(n, PS_SHELL, s, t->n, t->src, depth + 1);
            else if (in_list(last, code_sinks) && strcmp(head, "re") != 0 &&
                     strcmp(head, "regex") != 0)
                r = add_job(n, self, s, t->n, t->src, depth + 1);
            else if (t->flags & F_DECODED)
                r = add_job(n, self, s, t->n, t->src, depth + 1);
        } else if (t->flags & F_DECODED)
            r = add_job(n, self, s, t->n, t->src, depth + 1);
        call[0] = '\0';
        (void)res;
    }
    return r;
}

static int normalise_pyjs(bool py, const char *code, size_t len, int depth, uint32_t origin,
                          struct ps_norm *n)
{
    struct toks a, b;
    struct kvs *al = calloc(1, sizeof(*al)), *consts = calloc(1, sizeof(*consts)),
               *taint = calloc(1, sizeof(*taint));
    /* folds may add at most four times the code's size (plus a little for tiny code) */
    struct fold f = {.py = py, .nm = n, .consts = consts, .budget = 4 * len + 65536};
    int r = -ENOMEM;

    toks_init(&a);
    toks_init(&b);
    tc_buf_init(&f.v, MAX_VALUE * 16);
    if (!al || !consts || !taint)
        goto out;
    if ((r = lex_pyjs(py, code, len, depth, origin, &a)) < 0)
        goto out;
    for (int pass = 0; pass < MAX_PASSES; pass++) {
        b.n = 0;
        tc_buf_reset(&b.pool);
        if ((r = collect_consts(py, &a, consts)) < 0)
            goto out;
        f.in = &a;
        f.out = &b;
        f.changed = false;
        if ((r = fold_pass(&f)) < 0) {
            if (r != -E2BIG)
                goto out;
            /* a cap was reached: keep the last complete pass, never give up the whole text */
            r = 0;
            break;
        }
        struct toks tmp = a;
        a = b;
        b = tmp;
        if (!f.changed)
            break;
    }
    if ((r = collect_aliases(py, &a, al, n)) < 0 || (r = collect_taint(py, &a, taint)) < 0 ||
        (r = scan_sinks(py, &a, al, taint, n)) < 0)
        goto out;
    r = emit_pyjs(py, &a, al, depth, n);
out:
    toks_free(&a);
    toks_free(&b);
    tc_buf_free(&f.v);
    if (al)
        kv_free(al);
    if (consts)
        kv_free(consts);
    if (taint)
        kv_free(taint);
    free(al);
    free(consts);
    free(taint);
    return r;
}

/* ================= Shell ================= */

struct sh {
    const char *c;
    size_t len, i;
    int depth;
    uint32_t origin;
    struct toks ts;
    struct kvs vars, aliases;
    struct ps_norm *n;
    size_t sub[64]; /* token index of each open "$(" / "`" */
    bool subq[64];  /* it was "$( inside double quotes */
    int nsub;
    bool cmdpos;
    struct kvs taint; /* variables whose value was computed ("1") or not ("0") */
    /* the word being read: its expansions, where the last one ended, built at run time? */
    int wexp;
    size_t exp_end, wexp_bytes;
    bool wpex;          /* a ${...} that slices, substitutes, changes case or is indirect */
    bool wadj;          /* two expansions side by side */
    bool wtaint;        /* a computed variable */
    struct kvs runners; /* functions that run their arguments as a command ("$@") */
    size_t work;        /* tokens looked at by the evasion checks, at most SH_MAX_WORK */
};

/* Substitutions nested thousands deep make each check look at thousands of tokens: the checks
 * of one text share this budget, then report nothing more. */
#define SH_MAX_WORK (4u << 20)

static bool name_char(char c, bool first);

static bool sh_tainted(const struct sh *s, const char *name, size_t n)
{
    const char *t = kv_get(&s->taint, name, n);
    return t && t[0] == '1';
}

/* Text between "${" and "}": does it slice, substitute, change case, transform or expand
 * indirectly (${x:1:2} ${x//a/b} ${x^^} ${x,,} ${x@P} ${!x}), rather than take a default,
 * a length or trim (${x:-y} ${#x} ${x%.txt})? */
static bool sh_param_computed(const char *p, size_t n)
{
    if (n == 0 || p[0] == '#')
        return false;
    if (p[0] == '!') /* ${!x} is indirect; ${!a[@]} ${!a[*]} ${!pre@} ${!pre*} list names */
        return !(p[n - 1] == '@' || p[n - 1] == '*' ||
                 (n >= 3 && p[n - 1] == ']' && (p[n - 2] == '@' || p[n - 2] == '*')));
    size_t k = 0;
    while (k < n && name_char(p[k], k == 0))
        k++;
    if (k < n && p[k] == '[') {
        const char *e = memchr(p + k, ']', n - k);
        k = e ? (size_t)(e - p) + 1 : n;
    }
    if (k >= n)
        return false;
    if (p[k] == ':') {
        char nx = k + 1 < n ? p[k + 1] : '\0';
        return !(nx == '-' || nx == '=' || nx == '?' || nx == '+');
    }
    return p[k] == '/' || p[k] == '^' || p[k] == ',' || p[k] == '@';
}

/* One more expansion in the current word, from start to s->i. */
static void sh_expansion(struct sh *s, size_t start, bool pex, bool tainted)
{
    if (s->wexp > 0 && start == s->exp_end)
        s->wadj = true;
    s->wtaint |= tainted;
    s->wpex |= pex;
    s->wexp++;
    s->exp_end = s->i;
}

static bool sh_opchar(char c)
{
    return c == '|' || c == '&' || c == ';' || c == '(' || c == ')' || c == '<' || c == '>' ||
           c == '`' || c == '\n';
}

static bool name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/* $NAME, ${NAME}, ${IFS}, $IFS: append the expansion (or the text itself when unknown). */
static int sh_dollar_expand(struct sh *s, struct tc_buf *w);

/* $NAME, ${...}: the expansion, counted as such (not as literal text of the word). */
static int sh_dollar(struct sh *s, struct tc_buf *w)
{
    size_t before = w->len;
    int r = sh_dollar_expand(s, w);
    s->wexp_bytes += w->len - before;
    return r;
}

static int sh_dollar_expand(struct sh *s, struct tc_buf *w)
{
    const char *c = s->c;
    size_t i = s->i + 1, st, en, start = s->i;
    int r;
    if (i < s->len && c[i] == '{') {
        st = i + 1;
        en = st;
        while (en < s->len && name_char(c[en], en == st))
            en++;
        if (en >= s->len || c[en] != '}' || en == st) {
            /* ${x:-y}, ${#x}, ...: copy raw up to the brace */
            size_t e = i;
            while (e < s->len && c[e] != '}' && c[e] != '\n')
                e++;
            r = tc_buf_append(w, c + s->i, (e < s->len ? e + 1 : e) - s->i);
            s->i = e < s->len ? e + 1 : e;
            const char *ifs = kv_get(&s->vars, "IFS", 3);
            bool pex = sh_param_computed(c + i + 1, e > i + 1 ? e - i - 1 : 0);
            /* "${a[*]}" joins the array with IFS: with IFS emptied it glues characters */
            if (ifs && strcmp(ifs, " \t\n") != 0 && e >= i + 4 && c[e - 1] == ']' &&
                c[e - 2] == '*')
                pex = true;
            sh_expansion(s, start, pex, false);
            return r;
        }
        s->i = en + 1;
    } else {
        st = i;
        en = st;
        while (en < s->len && name_char(c[en], en == st))
            en++;
        if (en == st) {
            if (i < s->len && ((c[i] >= '0' && c[i] <= '9') || strchr("@*#?$!-", c[i]))) {
                /* $1, $@, $?: a parameter we do not know; "$*" joins with IFS, which glues
                 * the pieces together once IFS is emptied */
                const char *ifs = kv_get(&s->vars, "IFS", 3);
                bool glue = c[i] == '*' && ifs && strcmp(ifs, " \t\n") != 0;
                r = tc_buf_append(w, c + s->i, 2);
                s->i += 2;
                sh_expansion(s, start, glue, false);
                return r;
            }
            s->i++;
            return tc_buf_append(w, "$", 1);
        }
        s->i = en;
    }
    if (en - st == 3 && memcmp(c + st, "IFS", 3) == 0)
        return tc_buf_append(w, " ", 1);
    sh_expansion(s, start, false, sh_tainted(s, c + st, en - st));
    const char *v = kv_get(&s->vars, c + st, en - st);
    if (v)
        return tc_buf_append(w, v, strlen(v));
    r = tc_buf_append(w, "$", 1);
    return r < 0 ? r : tc_buf_append(w, c + st, en - st);
}

/* Copy a balanced $( ... ) raw (inside a word or double quotes). */
static int sh_raw_subst(struct sh *s, struct tc_buf *w)
{
    size_t e = s->i + 2;
    int lvl = 1;
    while (e < s->len && lvl > 0) {
        if (s->c[e] == '(')
            lvl++;
        else if (s->c[e] == ')')
            lvl--;
        e++;
    }
    size_t start = s->i;
    int r = tc_buf_append(w, s->c + s->i, e - s->i);
    s->i = e;
    s->wexp_bytes += e - start;
    sh_expansion(s, start, false, false);
    return r;
}

/* One word; returns 0 and sets *got when a word was read. */
static int sh_word(struct sh *s, struct tc_buf *w, bool *dec)
{
    const char *c = s->c;
    int r = 0, err = 0;
    while (s->i < s->len && r >= 0) {
        char ch = c[s->i];
        if (ch == ' ' || ch == '\t' || ch == '\r' || sh_opchar(ch))
            break;
        if (ch == '\\') {
            if (s->i + 1 < s->len && c[s->i + 1] == '\n') {
                s->i += 2;
                continue;
            }
            if (s->i + 1 < s->len)
                r = tc_buf_append(w, c + s->i + 1, 1);
            s->i += 2;
            continue;
        }
        if (ch == '\'') {
            size_t e = s->i + 1;
            while (e < s->len && c[e] != '\'')
                e++;
            r = tc_buf_append(w, c + s->i + 1, e - s->i - 1);
            s->i = e < s->len ? e + 1 : e;
            continue;
        }
        if (ch == '$' && s->i + 1 < s->len && c[s->i + 1] == '\'') {
            size_t e = s->i + 2;
            while (e < s->len && c[e] != '\'') {
                if (c[e] == '\\' && e + 1 < s->len) {
                    size_t u = unescape1(c + e + 1, s->len - e - 1, w, dec, &err);
                    if (u) {
                        e += 1 + u;
                        continue;
                    }
                    err |= tc_buf_append(w, c + e + 1, 1);
                    e += 2;
                    continue;
                }
                err |= tc_buf_append(w, c + e, 1);
                e++;
            }
            s->i = e < s->len ? e + 1 : e;
            if (err == -ENOMEM)
                return -ENOMEM;
            continue;
        }
        if (ch == '"') {
            /* quotes do not separate expansions: "$a""$b" is $a$b */
            bool at = s->i == s->exp_end;
            s->i++;
            if (at)
                s->exp_end = s->i;
            while (s->i < s->len && c[s->i] != '"' && r >= 0) {
                char d = c[s->i];
                if (d == '\\' && s->i + 1 < s->len && strchr("\"\\$`\n", c[s->i + 1]) &&
                    c[s->i + 1]) {
                    if (c[s->i + 1] != '\n')
                        r = tc_buf_append(w, c + s->i + 1, 1);
                    s->i += 2;
                } else if (d == '$' && s->i + 1 < s->len && c[s->i + 1] == '(')
                    r = sh_raw_subst(s, w);
                else if (d == '$')
                    r = sh_dollar(s, w);
                else {
                    r = tc_buf_append(w, &d, 1);
                    s->i++;
                }
            }
            at = s->i == s->exp_end;
            if (s->i < s->len)
                s->i++;
            if (at)
                s->exp_end = s->i;
            continue;
        }
        if (ch == '$' && s->i + 2 < s->len && c[s->i + 1] == '(' && c[s->i + 2] == '(') {
            r = sh_raw_subst(s, w); /* $(( arithmetic )): a number */
            continue;
        }
        if (ch == '$' && s->i + 1 < s->len && c[s->i + 1] == '(') {
            if (w->len == 0 || (w->data[w->len - 1] == '=' && s->cmdpos))
                break; /* "$(" starts a substitution the caller tokenizes */
            r = sh_raw_subst(s, w);
            continue;
        }
        if (ch == '$') {
            r = sh_dollar(s, w);
            continue;
        }
        r = tc_buf_append(w, &ch, 1);
        s->i++;
    }
    if (w->len > MAX_VALUE)
        w->len = MAX_VALUE;
    return r;
}

static bool word_is(const struct toks *ts, size_t i, const char *const *list)
{
    if (!is_t(ts, i, T_NAME))
        return false;
    char b[32];
    size_t n = ts->v[i].n;
    if (n >= sizeof(b))
        return false;
    memcpy(b, ttext(ts, &ts->v[i]), n);
    b[n] = '\0';
    /* /usr/bin/base64 -> base64 */
    const char *base = strrchr(b, '/');
    return in_list(base ? base + 1 : b, list);
}

static bool has_arg(const struct toks *ts, size_t a, size_t b, const char *arg)
{
    for (size_t k = a; k < b; k++)
        if (is_t(ts, k, T_NAME)) {
            const char *t = ttext(ts, &ts->v[k]);
            size_t n = ts->v[k].n;
            if (n == strlen(arg) && memcmp(t, arg, n) == 0)
                return true;
            /* combined short options: -rp, -di */
            if (arg[0] == '-' && arg[1] && !arg[2] && n > 1 && t[0] == '-' && t[1] != '-' &&
                memchr(t, arg[1], n))
                return true;
        }
    return false;
}

/* Apply the decoder command in tokens [c, ce) to v; false if it is not one we evaluate. */
static bool sh_apply_stage(const struct toks *ts, size_t c, size_t ce, struct tc_buf *v)
{
    static const char *const b64[] = {"base64", "openssl", NULL};
    static const char *const xxd[] = {"xxd", NULL};
    static const char *const rev[] = {"rev", NULL};
    static const char *const tr[] = {"tr", NULL};
    struct tc_buf d;
    bool ok = false;
    tc_buf_init(&d, MAX_VALUE * 16);
    if (word_is(ts, c, b64) && (has_arg(ts, c + 1, ce, "-d") ||
                                has_arg(ts, c + 1, ce, "--decode") || has_arg(ts, c + 1, ce, "-D")))
        ok = b64_decode(v->data ? v->data : "", v->len, &d);
    else if (word_is(ts, c, xxd) && has_arg(ts, c + 1, ce, "-r"))
        ok = hex_decode(v->data ? v->data : "", v->len, &d);
    else if (word_is(ts, c, rev)) {
        ok = true;
        for (size_t x = v->len; x-- > 0 && ok;)
            if (v->data[x] != '\n' || x + 1 != v->len)
                ok = tc_buf_append(&d, v->data + x, 1) == 0;
    } else if (word_is(ts, c, tr) && ce == c + 3) {
        const char *x = ttext(ts, &ts->v[c + 1]), *y = ttext(ts, &ts->v[c + 2]);
        if ((strncmp(x, "A-Za-z", 6) == 0 && strncmp(y, "N-ZA-Mn-za-m", 12) == 0) ||
            (strncmp(x, "a-zA-Z", 6) == 0 && strncmp(y, "n-za-mN-ZA-M", 12) == 0))
            ok = rot13(v->data ? v->data : "", v->len, &d);
    }
    if (ok) {
        tc_buf_reset(v);
        ok = tc_buf_append(v, d.data ? d.data : "", d.len) == 0;
    }
    tc_buf_free(&d);
    return ok;
}

/* Evaluate "echo/printf ARGS [| decoder]..." in tokens [a, b). On success *ret_end is the first
 * token not consumed, v holds the value, *ndec the number of decoders applied. */
static bool sh_eval_pipeline(const struct toks *ts, size_t a, size_t b, struct tc_buf *v,
                             size_t *ret_end, int *ndec, bool *escaped)
{
    static const char *const producers[] = {"echo", "printf", NULL};
    size_t k = a, e;
    *ndec = 0;
    *escaped = false;
    tc_buf_reset(v);
    if (!word_is(ts, k, producers)) {
        /* "base64 -d <<< WORD": the here-string is the producer */
        e = k + 1;
        while (e < b && ts->v[e].t == T_NAME)
            e++;
        if (!is_t(ts, k, T_NAME) || !IS_OP(ts, e, "<<<") || !is_t(ts, e + 1, T_NAME) || e + 1 >= b)
            return false;
        if (tc_buf_append(v, ttext(ts, &ts->v[e + 1]), ts->v[e + 1].n) < 0)
            return false;
        if (!sh_apply_stage(ts, k, e, v))
            return false;
        (*ndec)++;
        k = e + 2;
        goto stages;
    }
    bool printf_ =
        IS_NAME(ts, k, "printf") || (ts->v[k].n > 7 && strstr(ttext(ts, &ts->v[k]), "printf"));
    e = k + 1;
    while (e < b && ts->v[e].t == T_NAME)
        e++;
    bool esc = printf_ || has_arg(ts, k + 1, e, "-e");
    size_t arg = k + 1, cnt = 0;
    while (arg < e && !printf_ && ts->v[arg].n >= 2 && ttext(ts, &ts->v[arg])[0] == '-' &&
           strspn(ttext(ts, &ts->v[arg]) + 1, "neE") == ts->v[arg].n - 1)
        arg++;
    if (printf_ && arg < e && IS_NAME(ts, arg, "%s") && arg + 1 < e)
        arg++, esc = false;
    for (; arg < e; arg++, cnt++) {
        const char *t = ttext(ts, &ts->v[arg]);
        size_t n = ts->v[arg].n;
        if (cnt && tc_buf_append(v, " ", 1) < 0)
            return false;
        for (size_t x = 0; x < n; x++) {
            if (esc && t[x] == '\\' && x + 1 < n) {
                bool d = false;
                int err = 0;
                size_t u = unescape1(t + x + 1, n - x - 1, v, &d, &err);
                if (err)
                    return false;
                if (u) {
                    *escaped |= d;
                    x += u;
                    continue;
                }
            }
            if (tc_buf_append(v, t + x, 1) < 0)
                return false;
        }
    }
    k = e;
stages:
    while (k < b && IS_OP(ts, k, "|")) {
        size_t c = k + 1, ce = c + 1;
        while (ce < b && ts->v[ce].t == T_NAME)
            ce++;
        if (!sh_apply_stage(ts, c, ce, v))
            break;
        (*ndec)++;
        k = ce;
    }
    *ret_end = k;
    return true;
}

static int sh_push_word(struct sh *s, uint32_t src, const char *w, size_t n, int flags)
{
    return push(&s->ts, T_NAME, src, w, n, flags, 0);
}

/* At ")" or closing "`": fold the substitution if it is a constant pipeline. */
/* Commands that encode, decode, compress or shift characters. (Not sed, awk or cut: scripts
 * quote and edit text with them all the time; printf and echo only with escapes.) */
static const char *const sh_transformers[] = {
    "base64", "base32",  "basenc",  "xxd",   "od",       "rev",        "tr",      "openssl",
    "gzip",   "gunzip",  "zcat",    "xz",    "unxz",     "bzip2",      "bunzip2", "perl",
    "python", "python2", "python3", "iconv", "uudecode", "zlib-flate", NULL};

/* Does a printf at k (up to b) use escapes or character conversions (\x41, \101, %b, %c)? */
static bool sh_printf_escapes(const struct toks *ts, size_t k, size_t b)
{
    for (size_t x = k + 1; x < b && x < ts->n && is_t(ts, x, T_NAME); x++) {
        const char *w = ttext(ts, &ts->v[x]);
        size_t n = ts->v[x].n;
        for (size_t y = 0; y + 1 < n; y++)
            if ((w[y] == '\\' && strchr("x0123456789u", w[y + 1])) ||
                (w[y] == '%' && strchr("bco", w[y + 1])))
                return true;
    }
    return false;
}

/* Do the tokens [a, b) run a command that transforms text (decoders, printf escapes, tr, ...)?
 * Charged to *work; false once the budget is spent. */
static bool sh_transforms(const struct toks *ts, size_t a, size_t b, size_t *work)
{
    static const char *const printfs[] = {"printf", NULL};
    if (b > ts->n)
        b = ts->n;
    if (b > a && (*work += b - a) > SH_MAX_WORK)
        return false;
    for (size_t k = a; k < b && k < ts->n; k++) {
        if (word_is(ts, k, sh_transformers))
            return true;
        if (word_is(ts, k, printfs) && sh_printf_escapes(ts, k, b))
            return true;
        if (IS_NAME(ts, k, "echo") && k + 1 < b && is_t(ts, k + 1, T_NAME) &&
            ttext(ts, &ts->v[k + 1])[0] == '-' &&
            memchr(ttext(ts, &ts->v[k + 1]), 'e', ts->v[k + 1].n))
            return true;
    }
    return false;
}

static int sh_close_subst(struct sh *s, uint32_t src)
{
    struct toks *ts = &s->ts;
    size_t open = s->sub[--s->nsub];
    bool q = s->subq[s->nsub];
    struct tc_buf v;
    size_t end;
    int ndec, r = 0;
    bool esc;

    tc_buf_init(&v, MAX_VALUE * 16);
    if (q && s->i < s->len && s->c[s->i] == '"')
        s->i++;
    if (sh_eval_pipeline(ts, open + 1, ts->n, &v, &end, &ndec, &esc) && end == ts->n) {
        uint32_t osrc = ts->v[open].src;
        ts->n = open; /* pool bytes stay, unreferenced */
        if (ndec || esc)
            r = add_job(s->n, PS_SHELL, v.data ? v.data : "", v.len, osrc, s->depth + 1);
        /* x=$(...) : merge into the assignment word and remember the value */
        if (r >= 0 && ts->n && (ts->v[ts->n - 1].flags & F_ASSIGN)) {
            struct tok *a = &ts->v[ts->n - 1];
            char name[128];
            snprintf(name, sizeof(name), "%.*s", (int)(a->n - 1 < 127 ? a->n - 1 : 127),
                     ttext(ts, a));
            r = kv_set(&s->vars, name, strlen(name), v.data ? v.data : "", v.len);
            if (r >= 0)
                r = kv_set(&s->taint, name, strlen(name), (ndec || esc) ? "1" : "0", 1);
            if (r >= 0) {
                struct tc_buf m;
                tc_buf_init(&m, MAX_VALUE * 16);
                r = tc_buf_append(&m, ttext(ts, a), a->n);
                if (r >= 0)
                    r = tc_buf_append(&m, v.data ? v.data : "", v.len);
                ts->n--;
                if (r >= 0)
                    r = sh_push_word(s, a->src, m.data, m.len, (ndec || esc) ? F_DECODED : 0);
                tc_buf_free(&m);
            }
        } else if (r >= 0)
            r = sh_push_word(s, osrc, v.data ? v.data : "", v.len, (ndec || esc) ? F_DECODED : 0);
    } else {
        /* x=$(...) that we cannot evaluate: x is unknown from here on, and computed when the
         * substitution transforms text (printf, base64, tr, rev, xxd, ...) */
        if (open > 0 && (ts->v[open - 1].flags & F_ASSIGN)) {
            const struct tok *a = &ts->v[open - 1];
            char name[128], raw[130];
            snprintf(name, sizeof(name), "%.*s", (int)(a->n - 1 < 127 ? a->n - 1 : 127),
                     ttext(ts, a));
            snprintf(raw, sizeof(raw), "$%s", name);
            r = kv_set(&s->vars, name, strlen(name), raw, strlen(raw));
            if (r >= 0)
                r = kv_set(&s->taint, name, strlen(name),
                           sh_transforms(ts, open + 1, ts->n, &s->work) ? "1" : "0", 1);
        }
        if (r >= 0)
            r = push(ts, T_OP, src, ")", 1, 0, 0);
    }
    tc_buf_free(&v);
    return r;
}

static int sh_lex(struct sh *s)
{
    struct tc_buf w;
    int r = 0;
    const char *c = s->c;
    static const char *const kw_cmd[] = {"then",  "do",  "else",    "elif",    "if",   "while",
                                         "until", "!",   "{",       "time",    "sudo", "exec",
                                         "nohup", "env", "command", "builtin", NULL};
    tc_buf_init(&w, MAX_VALUE * 4);
    s->cmdpos = true;
#define SRC(x) (s->depth ? s->origin : (uint32_t)(x))
    while (s->i < s->len && r >= 0) {
        char ch = c[s->i];
        size_t st = s->i;
        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == 0) {
            s->i++;
            continue;
        }
        if (ch == '\\' && s->i + 1 < s->len && c[s->i + 1] == '\n') {
            s->i += 2;
            continue;
        }
        if (ch == '#' && (st == 0 || strchr(" \t\n;|&(", c[st - 1]))) {
            while (s->i < s->len && c[s->i] != '\n')
                s->i++;
            continue;
        }
        if (ch == '\n') {
            if (!(s->ts.n && s->ts.v[s->ts.n - 1].t == T_NL))
                r = push(&s->ts, T_NL, SRC(st), "\n", 1, 0, 0);
            s->i++;
            s->cmdpos = true;
            continue;
        }
        if ((ch == '$' && s->i + 1 < s->len && c[s->i + 1] == '(' &&
             !(s->i + 2 < s->len && c[s->i + 2] == '(')) ||
            (ch == '"' && s->i + 2 < s->len && c[s->i + 1] == '$' && c[s->i + 2] == '(' &&
             !(s->i + 3 < s->len && c[s->i + 3] == '('))) {
            bool q = ch == '"';
            s->i += q ? 3 : 2;
            if (s->nsub < 64) {
                s->sub[s->nsub] = s->ts.n;
                s->subq[s->nsub++] = q;
            }
            r = push(&s->ts, T_OP, SRC(st), "$(", 2, 0, 0);
            s->cmdpos = true;
            continue;
        }
        if (ch == '`') {
            s->i++;
            if (s->nsub > 0 && IS_OP(&s->ts, s->sub[s->nsub - 1], "`"))
                r = sh_close_subst(s, SRC(st));
            else {
                if (s->nsub < 64) {
                    s->sub[s->nsub] = s->ts.n;
                    s->subq[s->nsub++] = false;
                }
                r = push(&s->ts, T_OP, SRC(st), "`", 1, 0, 0);
                s->cmdpos = true;
            }
            continue;
        }
        if (ch == ')' && s->nsub > 0 && IS_OP(&s->ts, s->sub[s->nsub - 1], "$(")) {
            s->i++;
            r = sh_close_subst(s, SRC(st));
            s->cmdpos = false;
            continue;
        }
        if (sh_opchar(ch)) {
            size_t n = 1;
            if (s->i + 1 < s->len &&
                (c[s->i + 1] == ch || (ch == '>' && c[s->i + 1] == '&') ||
                 (ch == '&' && c[s->i + 1] == '>') || (ch == '<' && c[s->i + 1] == '(')))
                n = 2;
            if (ch == '<' && s->i + 2 < s->len && c[s->i + 1] == '<' && c[s->i + 2] == '<')
                n = 3;
            r = push(&s->ts, T_OP, SRC(st), c + s->i, n, 0, 0);
            s->i += n;
            s->cmdpos = ch != '<' && ch != '>';
            continue;
        }
        /* a word */
        bool dec = false;
        tc_buf_reset(&w);
        bool glued = st > 0 && !strchr(" \t\n", c[st - 1]);
        s->wexp = 0;
        s->wpex = s->wadj = s->wtaint = false;
        s->wexp_bytes = 0;
        s->exp_end = SIZE_MAX;
        if ((r = sh_word(s, &w, &dec)) < 0)
            break;
        if (s->i == st) { /* nothing consumed: avoid looping */
            s->i++;
            continue;
        }
        const char *wd = w.data ? w.data : "";
        size_t eq = 0;
        while (eq < w.len && name_char(wd[eq], eq == 0))
            eq++;
        bool append = s->cmdpos && eq > 0 && eq + 1 < w.len && wd[eq] == '+' && wd[eq + 1] == '=';
        bool assign = append || (s->cmdpos && eq > 0 && eq < w.len && wd[eq] == '=');
        /* literal text of the word (of the value, for an assignment) */
        size_t lit = w.len > s->wexp_bytes ? w.len - s->wexp_bytes : 0;
        size_t prefix = assign ? eq + 1 + append : 0;
        bool comp = s->wpex || (s->wtaint && lit <= prefix);
        /* "$a$b" builds a name; "${DIR}${NAME}" that holds a '/' is a path */
        bool adj = s->wadj && lit <= prefix && !memchr(wd + prefix, '/', w.len - prefix);
        int flags = (dec ? F_DECODED : 0) | (glued ? F_GLUED : 0) | (comp ? F_COMPUTED : 0) |
                    (adj ? F_SH_ADJ : 0);
        if (append) {
            /* x+=piece: a value assembled piece by piece is computed */
            const char *old = kv_get(&s->vars, wd, eq);
            struct tc_buf nv;
            tc_buf_init(&nv, MAX_VALUE * 2);
            r = tc_buf_append(&nv, old ? old : "", old ? strlen(old) : 0);
            if (r >= 0)
                r = tc_buf_append(&nv, wd + eq + 2, w.len - eq - 2);
            if (r >= 0)
                r = kv_set(&s->vars, wd, eq, nv.data ? nv.data : "", nv.len);
            tc_buf_free(&nv);
            if (r >= 0)
                r = kv_set(&s->taint, wd, eq, "1", 1);
            if (r >= 0)
                r = sh_push_word(s, SRC(st), wd, w.len, flags);
            continue;
        }
        if (assign) {
            r = kv_set(&s->vars, wd, eq, wd + eq + 1, w.len - eq - 1);
            if (r >= 0)
                r = kv_set(&s->taint, wd, eq, (comp || dec || adj) ? "1" : "0", 1);
            if (r >= 0 && eq + 1 == w.len)
                flags |= F_ASSIGN;
            if (r >= 0)
                r = sh_push_word(s, SRC(st), wd, w.len, flags);
            continue; /* still command position */
        }
        if (s->cmdpos) {
            const char *al = kv_get(&s->aliases, wd, w.len);
            if (al) {
                r = sh_push_word(s, SRC(st), al, strlen(al), flags);
                s->cmdpos = false;
                continue;
            }
        }
        if (s->ts.n && IS_NAME(&s->ts, s->ts.n - 1, "alias") && eq > 0 && eq < w.len &&
            wd[eq] == '=') {
            r = kv_set(&s->aliases, wd, eq, wd + eq + 1, w.len - eq - 1);
            /* the alias's text runs wherever the alias is used: scan it as code */
            if (r >= 0)
                r = add_job(s->n, PS_SHELL, wd + eq + 1, w.len - eq - 1, SRC(st), s->depth + 1);
        }
        if (r >= 0)
            r = sh_push_word(s, SRC(st), wd, w.len, flags);
        bool keep_cmdpos = false;
        if (s->cmdpos) {
            char b[16];
            snprintf(b, sizeof(b), "%.*s", (int)(w.len < 15 ? w.len : 15), wd);
            keep_cmdpos = in_list(b, kw_cmd) || strcmp(b, "export") == 0 ||
                          strcmp(b, "local") == 0 || strcmp(b, "declare") == 0 ||
                          strcmp(b, "readonly") == 0 || strcmp(b, "typeset") == 0;
        }
        s->cmdpos = keep_cmdpos;
    }
#undef SRC
    tc_buf_free(&w);
    return r == -E2BIG ? 0 : r;
}

/* ---- shell: commands built or code generated at run time ---- */

static bool sh_sep(const struct toks *ts, size_t i)
{
    static const char *const seps[] = {";", "&&", "||", "|",  "&",  "|&", "(",
                                       ")", "$(", "`",  "<(", ">(", ";;", NULL};
    if (ts->v[i].t == T_NL)
        return true;
    if (ts->v[i].t != T_OP)
        return false;
    char b[4];
    snprintf(b, sizeof(b), "%.*s", (int)(ts->v[i].n < 3 ? ts->v[i].n : 3), ttext(ts, &ts->v[i]));
    return in_list(b, seps);
}

/* The ')' (or closing '`') of the substitution opened at open. */
static size_t sh_close_of(const struct toks *ts, size_t open, size_t *work)
{
    if ((*work += 64) > SH_MAX_WORK)
        return open + 1;
    int depth = 0;
    /* an unevaluated `...` is closed by ")" too (sh_close_subst) */
    for (size_t k = open; k < ts->n && k - open < 4096; k++, ++*work) {
        if (IS_OP(ts, k, "$(") || IS_OP(ts, k, "`") || IS_OP(ts, k, "(") || IS_OP(ts, k, "<(") ||
            IS_OP(ts, k, ">("))
            depth++;
        else if (IS_OP(ts, k, ")") && --depth == 0)
            return k;
    }
    return open + 4096 < ts->n ? open + 4096 : ts->n;
}

static bool sh_word_eq(const struct toks *ts, size_t i, const char *w)
{
    return is_t(ts, i, T_NAME) && ts->v[i].n == strlen(w) &&
           memcmp(ttext(ts, &ts->v[i]), w, ts->v[i].n) == 0;
}

/* Is the token at i a substitution (or a word) whose text is transformed or computed? */
static bool sh_generated(const struct toks *ts, size_t i, size_t *work)
{
    if (is_t(ts, i, T_NAME))
        return (ts->v[i].flags & (F_COMPUTED | F_DECODED)) != 0;
    if (IS_OP(ts, i, "$(") || IS_OP(ts, i, "`") || IS_OP(ts, i, "<("))
        return sh_transforms(ts, i + 1, sh_close_of(ts, i, work), work);
    return false;
}

/* The command a word names, as a base name: "/usr/bin/bash" -> "bash",
 * "${SHELL:-/bin/sh}" -> "sh" (the default is what runs when the variable is unset). */
static void sh_cmd_base(const struct toks *ts, size_t i, char *out, size_t outsz)
{
    const char *w = ttext(ts, &ts->v[i]);
    size_t n = ts->v[i].n;
    if (n > 4 && w[0] == '$' && w[1] == '{' && w[n - 1] == '}') {
        const char *d = memchr(w, '-', n);
        if (!d)
            d = memchr(w, '=', n);
        if (d) {
            n = (size_t)(w + n - 1 - (d + 1));
            w = d + 1;
        }
    }
    const char *sl = memrchr(w, '/', n);
    if (sl) {
        n -= (size_t)(sl + 1 - w);
        w = sl + 1;
    }
    snprintf(out, outsz, "%.*s", (int)(n < outsz - 1 ? n : outsz - 1), w);
}

static int sh_scan(struct sh *s)
{
    static const char *const shells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", NULL};
    static const char *const nodes[] = {"node", "nodejs", NULL};
    static const char *const kw[] = {
        "then", "do",   "else",  "elif", "if",      "while",   "until", "!",       "{", "time",
        "sudo", "exec", "nohup", "env",  "command", "builtin", "nice",  "timeout", NULL};
    const struct toks *ts = &s->ts;
    size_t pipe_start = 0;
    char func[64] = "", base[64];
    int r = 0, cases = 0;
    for (size_t i = 0; i < ts->n && r >= 0;) {
        size_t cs = i, e = i;
        /* inside case ... esac, "pattern | pattern)" is not a command */
        if (cases > 0 && !sh_word_eq(ts, i, "esac")) {
            size_t k = i;
            while (k < ts->n && (is_t(ts, k, T_NAME) || IS_OP(ts, k, "|")) && k - i < 64)
                k++;
            if (k > i && IS_OP(ts, k, ")")) {
                i = k + 1;
                continue;
            }
        }
        for (size_t k = i; k < ts->n && ts->v[k].t != T_NL; k++) {
            if (sh_word_eq(ts, k, "case") && (k == i || sh_sep(ts, k - 1)))
                cases++;
            else if (sh_word_eq(ts, k, "esac") && cases > 0)
                cases--;
            if (sh_sep(ts, k))
                break;
        }
        bool piped = i > 0 && (IS_OP(ts, i - 1, "|") || IS_OP(ts, i - 1, "|&"));
        if (!piped)
            pipe_start = cs;
        while (e < ts->n && !sh_sep(ts, e))
            e++;
        size_t cw = cs;
        while (cw < e && is_t(ts, cw, T_NAME) &&
               ((ts->v[cw].flags & F_ASSIGN) || word_is(ts, cw, kw) ||
                (memchr(ttext(ts, &ts->v[cw]), '=', ts->v[cw].n) &&
                 name_char(ttext(ts, &ts->v[cw])[0], true))))
            cw++;
        i = e + 1;
        /* f() { ...; } and function f: remember the name; a body that runs "$@" makes f a
         * runner, and a call of f runs its first argument */
        if (cw < e && IS_OP(ts, e, "(") && e == cw + 1 && IS_OP(ts, e + 1, ")")) {
            snprintf(func, sizeof(func), "%.*s", (int)(ts->v[cw].n < 63 ? ts->v[cw].n : 63),
                     ttext(ts, &ts->v[cw]));
            continue;
        }
        if (cw + 1 < e && sh_word_eq(ts, cw, "function") && is_t(ts, cw + 1, T_NAME)) {
            snprintf(func, sizeof(func), "%.*s", (int)(ts->v[cw + 1].n < 63 ? ts->v[cw + 1].n : 63),
                     ttext(ts, &ts->v[cw + 1]));
            continue;
        }
        if (cw < e && func[0] &&
            (sh_word_eq(ts, cw, "$@") || sh_word_eq(ts, cw, "$*") || sh_word_eq(ts, cw, "$1"))) {
            r = kv_set(&s->runners, func, strlen(func), "1", 1);
            continue;
        }
        if (cw < e && kv_get(&s->runners, ttext(ts, &ts->v[cw]), ts->v[cw].n))
            cw++;
        if (cw == e) {
            /* $(...) in command position (not an assignment's value) */
            if (e < ts->n && (IS_OP(ts, e, "$(") || IS_OP(ts, e, "`")) &&
                !(e > 0 && (ts->v[e - 1].flags & F_ASSIGN)) && sh_generated(ts, e, &s->work))
                r = add_note(s->n, "evasion_computed_command", TC_SEV_HIGH, ts->v[e].src,
                             "the command to run is produced by a substitution that transforms "
                             "text");
            continue;
        }
        const struct tok *c = &ts->v[cw];
        if (c->flags & (F_COMPUTED | F_DECODED | F_SH_ADJ)) {
            r = add_note(s->n, "evasion_computed_command", TC_SEV_HIGH, c->src,
                         "the command name is built at run time (adjacent expansions, ${x:1:2}, "
                         "${x//a/}, ${x,,}, ${!x}, decoded or transformed text)");
            continue;
        }
        sh_cmd_base(ts, cw, base, sizeof(base));
        if (strcmp(base, "eval") == 0) {
            bool gen = e < ts->n && e == cw + 1 && sh_generated(ts, e, &s->work);
            for (size_t k = cw + 1; k < e && !gen; k++)
                gen = sh_generated(ts, k, &s->work);
            if (gen)
                r = add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
                             "eval runs text that was decoded or transformed at run time");
            continue;
        }
        if (strcmp(base, "source") == 0 || strcmp(base, ".") == 0) {
            size_t a = cw + 1;
            if (a < ts->n && (sh_word_eq(ts, a, "/dev/stdin") || sh_word_eq(ts, a, "/dev/fd/0") ||
                              sh_word_eq(ts, a, "/proc/self/fd/0") || sh_word_eq(ts, a, "-")))
                r = add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
                             "sources code from standard input");
            else if (a < ts->n && IS_OP(ts, a, "<(") && sh_generated(ts, a, &s->work))
                r = add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
                             "sources code that is decoded or transformed at run time");
            continue;
        }
        if (strcmp(base, "xargs") == 0 && piped) {
            /* xargs -I{} {} ...: the command itself comes from the input */
            const char *repl = NULL;
            size_t rn = 0, k = cw + 1;
            for (; k < e && is_t(ts, k, T_NAME) && ttext(ts, &ts->v[k])[0] == '-'; k++) {
                const char *o = ttext(ts, &ts->v[k]);
                if (ts->v[k].n == 2 && o[1] == 'I' && k + 1 < e) {
                    repl = ttext(ts, &ts->v[k + 1]), rn = ts->v[k + 1].n, k++;
                } else if (ts->v[k].n > 2 && o[1] == 'I') {
                    repl = o + 2, rn = ts->v[k].n - 2;
                } else if (ts->v[k].n == 2 && o[1] == 'i') {
                    repl = "{}", rn = 2;
                }
            }
            if (repl && k < e && ts->v[k].n == rn && memcmp(ttext(ts, &ts->v[k]), repl, rn) == 0 &&
                sh_transforms(ts, pipe_start, cs, &s->work))
                r = add_note(s->n, "evasion_computed_command", TC_SEV_HIGH, c->src,
                             "xargs runs a command name that was decoded or transformed at run "
                             "time");
            continue;
        }
        if (in_list(base, shells)) {
            bool code_arg = false, gen = false;
            for (size_t k = cw + 1; k < e && r >= 0; k++) {
                if (sh_word_eq(ts, k, "-c") && k + 1 < ts->n) {
                    code_arg = true;
                    if (k + 1 < e && is_t(ts, k + 1, T_NAME))
                        r = add_job(s->n, PS_SHELL, ttext(ts, &ts->v[k + 1]), ts->v[k + 1].n,
                                    ts->v[k + 1].src, s->depth + 1);
                    gen |= sh_generated(ts, k + 1, &s->work);
                } else if (IS_OP(ts, k, "<<<") || IS_OP(ts, k, "<")) {
                    gen |= sh_generated(ts, k + 1, &s->work);
                } else if (is_t(ts, k, T_NAME) && ttext(ts, &ts->v[k])[0] != '-') {
                    code_arg = true; /* a script file */
                }
            }
            if (e < ts->n && IS_OP(ts, e, "<(") && e == cw + 1)
                gen |= sh_generated(ts, e, &s->work);
            if (e < ts->n && e == cw + 2 && sh_word_eq(ts, cw + 1, "-c"))
                gen |= sh_generated(ts, e, &s->work);
            if (!code_arg && piped)
                gen |= sh_transforms(ts, pipe_start, cs, &s->work) ||
                       sh_generated(ts, pipe_start, &s->work);
            for (size_t k = pipe_start; piped && !code_arg && k < cs && !gen; k++)
                gen = is_t(ts, k, T_NAME) && (ts->v[k].flags & (F_COMPUTED | F_DECODED));
            if (r >= 0 && gen)
                r = add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
                             "a shell runs code that was decoded, transformed or built at run "
                             "time");
            continue;
        }
        enum ps_lang lang = strncmp(base, "python", 6) == 0 ? PS_PYTHON
                            : in_list(base, nodes)          ? PS_JS
                                                            : PS_NONE;
        for (size_t k = cw + 1; lang != PS_NONE && k + 1 < e && r >= 0; k++) {
            bool flag = lang == PS_PYTHON
                            ? sh_word_eq(ts, k, "-c")
                            : (sh_word_eq(ts, k, "-e") || sh_word_eq(ts, k, "-p") ||
                               sh_word_eq(ts, k, "--eval") || sh_word_eq(ts, k, "--print"));
            if (flag && is_t(ts, k + 1, T_NAME)) {
                r = add_job(s->n, lang, ttext(ts, &ts->v[k + 1]), ts->v[k + 1].n, ts->v[k + 1].src,
                            s->depth + 1);
                break;
            }
        }
    }
    return r;
}

static int emit_shell(struct sh *s)
{
    struct toks *ts = &s->ts;
    struct tc_buf v;
    int r = 0;
    bool need_space = false;

    tc_buf_init(&v, MAX_VALUE * 16);
    for (size_t i = 0; i < ts->n && r >= 0; i++) {
        const struct tok *t = &ts->v[i];
        bool cmd = i == 0 || ts->v[i - 1].t == T_NL || ts->v[i - 1].t == T_OP;
        if (t->t == T_NL) {
            r = out_bytes(s->n, "\n", 1, t->src);
            need_space = false;
            continue;
        }
        if (need_space && (r = out_bytes(s->n, " ", 1, t->src)) < 0)
            break;
        need_space = true;
        if (t->t == T_OP) {
            r = out_bytes(s->n, ttext(ts, t), t->n, t->src);
            continue;
        }
        /* echo/printf ... | decoder ...: show the decoded value, queue it */
        size_t end;
        int ndec;
        bool esc;
        if (cmd && sh_eval_pipeline(ts, i, ts->n, &v, &end, &ndec, &esc) && (ndec || esc)) {
            r = add_job(s->n, PS_SHELL, v.data ? v.data : "", v.len, t->src, s->depth + 1);
            if (r >= 0)
                r = out_bytes(s->n, "echo \"\x01", 7, t->src);
            for (size_t k = 0; k < v.len && r >= 0; k++) {
                char c = v.data[k] == '"'                        ? '\''
                         : (v.data[k] == '\n' || v.data[k] == 0) ? ' '
                                                                 : v.data[k];
                r = out_bytes(s->n, &c, 1, t->src);
            }
            if (r >= 0)
                r = out_bytes(s->n, "\"", 1, t->src);
            i = end - 1;
            continue;
        }
        const char *w = ttext(ts, t);
        bool quote = memchr(w, ' ', t->n) || memchr(w, '\n', t->n) || memchr(w, '\t', t->n);
        bool mark = quote && (t->flags & F_DECODED);
        if (quote && (r = out_bytes(s->n, mark ? "\"\x01" : "\"", mark ? 2 : 1, t->src)) < 0)
            break;
        for (size_t k = 0; k < t->n && r >= 0; k++) {
            char c = w[k];
            if (quote && c == '"')
                c = '\'';
            if (c == '\n' || c == 0)
                c = ' ';
            r = out_bytes(s->n, &c, 1, t->src);
        }
        if (quote && r >= 0)
            r = out_bytes(s->n, "\"", 1, t->src);
        if (r >= 0 && (t->flags & F_DECODED) && t->n >= 4)
            r = add_job(s->n, PS_SHELL, w, t->n, t->src, s->depth + 1);
    }
    tc_buf_free(&v);
    return r;
}

static int normalise_shell(const char *code, size_t len, int depth, uint32_t origin,
                           struct ps_norm *n)
{
    struct sh *s = calloc(1, sizeof(*s));
    int r;
    if (!s)
        return -ENOMEM;
    s->c = code;
    s->len = len;
    s->depth = depth;
    s->origin = origin;
    s->n = n;
    toks_init(&s->ts);
    r = sh_lex(s);
    if (r >= 0)
        r = sh_scan(s);
    if (r >= 0)
        r = emit_shell(s);
    toks_free(&s->ts);
    kv_free(&s->vars);
    kv_free(&s->aliases);
    kv_free(&s->taint);
    kv_free(&s->runners);
    free(s);
    return r;
}

int ps_normalise(enum ps_lang lang, const char *code, size_t len, int depth, uint32_t origin,
                 struct ps_norm *n)
{
    int r;
    if (n->text.cap == 0)
        tc_buf_init(&n->text, PS_MAX_NORM_BYTES + 1);
    switch (lang) {
    case PS_PYTHON:
        r = normalise_pyjs(true, code, len, depth, origin, n);
        break;
    case PS_JS:
        r = normalise_pyjs(false, code, len, depth, origin, n);
        break;
    case PS_SHELL:
        r = normalise_shell(code, len, depth, origin, n);
        break;
    default:
        return 0;
    }
    if (r == -E2BIG)
        r = 0;
    if (r >= 0)
        r = out_bytes(n, "\n", 1, depth ? origin : (uint32_t)len);
    return r;
}
