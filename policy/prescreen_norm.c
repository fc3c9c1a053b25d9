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
enum { F_DECODED = 1, F_GLUED = 2, F_ASSIGN = 4, F_QUOTED = 8 };

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
};
struct kvs {
    struct kv e[MAX_ALIASES];
    size_t n;
};

static const char *kv_get(const struct kvs *m, const char *k, size_t kn)
{
    for (size_t i = m->n; i-- > 0;)
        if (strlen(m->e[i].k) == kn && memcmp(m->e[i].k, k, kn) == 0)
            return m->e[i].v;
    return NULL;
}

static int kv_set(struct kvs *m, const char *k, size_t kn, const char *v, size_t vn)
{
    if (vn > MAX_VALUE)
        vn = MAX_VALUE;
    for (size_t i = 0; i < m->n; i++)
        if (strlen(m->e[i].k) == kn && memcmp(m->e[i].k, k, kn) == 0) {
            char *nv = strndup(v, vn);
            if (!nv)
                return -ENOMEM;
            free(m->e[i].v);
            m->e[i].v = nv;
            return 0;
        }
    if (m->n >= MAX_ALIASES)
        return 0;
    char *nk = strndup(k, kn), *nv = strndup(v, vn);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    m->e[m->n++] = (struct kv){nk, nv};
    return 0;
}

static void kv_free(struct kvs *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].k);
        free(m->e[i].v);
    }
    m->n = 0;
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
        bool raw = false;
        if (py) {
            while (q < len && q - i < 2 && strchr("rRbBuUfF", c[q]) && c[q])
                raw |= c[q] == 'r' || c[q] == 'R', q++;
            if (q == len || (c[q] != '\'' && c[q] != '"'))
                q = i, raw = false;
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
            r = push(ts, T_STR, SRC(i), sb.data ? sb.data : "", sb.len, dec ? F_DECODED : 0, 0);
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

/* One folding pass; *changed set when anything was folded. */
static int fold_pass(bool py, struct toks *in, struct toks *out, struct ps_norm *nm, bool *changed)
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
    static const char *const importers[] = {"__import__", "importlib.import_module", "require",
                                            "importlib.__import__", NULL};
    struct tc_buf v;
    char chain[256];
    int r = 0;

    tc_buf_init(&v, MAX_VALUE * 16);
    for (size_t i = 0; i < in->n && r >= 0;) {
        const struct tok *t = &in->v[i];
        tc_buf_reset(&v);
        if (t->t == T_STR) {
            size_t j = i + 1;
            int fl = t->flags;
            bool folded = false;
            if ((r = tc_buf_append(&v, ttext(in, t), t->n)) < 0)
                break;
            for (int guard = 0; guard < 64; guard++) {
                if (IS_OP(in, j, "+") && is_t(in, j + 1, T_STR)) { /* "a" + "b" */
                    r = tc_buf_append(&v, ttext(in, &in->v[j + 1]), in->v[j + 1].n);
                    fl |= in->v[j + 1].flags, j += 2, folded = true;
                } else if (py && is_t(in, j, T_STR)) { /* "a" "b" */
                    r = tc_buf_append(&v, ttext(in, &in->v[j]), in->v[j].n);
                    fl |= in->v[j].flags, j += 1, folded = true;
                } else if (IS_OP(in, j, "[") && IS_OP(in, j + 1, ":") && IS_OP(in, j + 2, ":") &&
                           IS_OP(in, j + 3, "-") && is_t(in, j + 4, T_NUM) &&
                           in->v[j + 4].num == 1 && IS_OP(in, j + 5, "]")) { /* s[::-1] */
                    for (size_t a = 0, b = v.len; a + 1 < b; a++, b--) {
                        char tmp = v.data[a];
                        v.data[a] = v.data[b - 1];
                        v.data[b - 1] = tmp;
                    }
                    fl |= F_DECODED, j += 6, folded = true;
                } else if (IS_OP(in, j, ".") && is_t(in, j + 1, T_NAME) && IS_OP(in, j + 2, "(")) {
                    chain_at(in, j + 1, chain, sizeof(chain));
                    if ((strcmp(chain, "decode") == 0 || strcmp(chain, "encode") == 0 ||
                         strcmp(chain, "toString") == 0) &&
                        (IS_OP(in, j + 3, ")") ||
                         (is_t(in, j + 3, T_STR) && IS_OP(in, j + 4, ")")))) {
                        if (is_t(in, j + 3, T_STR) && strcmp(chain, "encode") != 0) {
                            char how[32];
                            snprintf(how, sizeof(how), "%.*s", (int)in->v[j + 3].n,
                                     ttext(in, &in->v[j + 3]));
                            struct tc_buf d;
                            tc_buf_init(&d, MAX_VALUE * 16);
                            if (decode_as(how, v.data, v.len, &d)) {
                                tc_buf_reset(&v);
                                r = tc_buf_append(&v, d.data ? d.data : "", d.len);
                                fl |= F_DECODED;
                            }
                            tc_buf_free(&d);
                        }
                        j += IS_OP(in, j + 3, ")") ? 4 : 5;
                        folded = true;
                    } else if (strcmp(chain, "split") == 0 && is_t(in, j + 3, T_STR) &&
                               in->v[j + 3].n == 0 && IS_OP(in, j + 4, ")") &&
                               IS_OP(in, j + 5, ".") && IS_NAME(in, j + 6, "reverse") &&
                               IS_OP(in, j + 7, "(") && IS_OP(in, j + 8, ")") &&
                               IS_OP(in, j + 9, ".") && IS_NAME(in, j + 10, "join") &&
                               IS_OP(in, j + 11, "(") && is_t(in, j + 12, T_STR) &&
                               in->v[j + 12].n == 0 && IS_OP(in, j + 13, ")")) {
                        for (size_t a = 0, b = v.len; a + 1 < b; a++, b--) {
                            char tmp = v.data[a];
                            v.data[a] = v.data[b - 1];
                            v.data[b - 1] = tmp;
                        }
                        fl |= F_DECODED, j += 14, folded = true;
                    } else if (strcmp(chain, "join") == 0) {
                        /* sep.join([s, s, ...]) / sep.join((..)) / sep.join(map(chr, [n, ..])) */
                        const char *sep = ttext(in, t);
                        size_t sepn = t->n, k = j + 3, cnt = 0;
                        bool is_map = IS_NAME(in, k, "map") && IS_OP(in, k + 1, "(") &&
                                      IS_NAME(in, k + 2, "chr") && IS_OP(in, k + 3, ",");
                        if (is_map)
                            k += 4;
                        if (IS_OP(in, k, "[") || IS_OP(in, k, "(")) {
                            struct tc_buf jb;
                            tc_buf_init(&jb, MAX_VALUE * 16);
                            k++;
                            bool ok = true;
                            while (ok && k < in->n && !IS_OP(in, k, "]") && !IS_OP(in, k, ")")) {
                                if (cnt && sepn && !is_map)
                                    r = tc_buf_append(&jb, sep, sepn);
                                if (!is_map && is_t(in, k, T_STR))
                                    r = tc_buf_append(&jb, ttext(in, &in->v[k]), in->v[k].n);
                                else if (is_map && is_t(in, k, T_NUM) && in->v[k].num >= 0 &&
                                         in->v[k].num < 0x110000)
                                    r = put_utf8(&jb, (unsigned long)in->v[k].num);
                                else
                                    ok = false;
                                cnt++, k++;
                                if (IS_OP(in, k, ","))
                                    k++;
                            }
                            if (ok && cnt && (IS_OP(in, k, "]") || IS_OP(in, k, ")"))) {
                                k++;
                                if (is_map && IS_OP(in, k, ")"))
                                    k++;
                                if (IS_OP(in, k, ")")) {
                                    tc_buf_reset(&v);
                                    r = tc_buf_append(&v, jb.data ? jb.data : "", jb.len);
                                    fl |= F_DECODED;
                                    j = k + 1;
                                    folded = true;
                                }
                            }
                            tc_buf_free(&jb);
                        }
                        if (!folded)
                            break;
                    } else
                        break;
                } else
                    break;
                if (r < 0)
                    break;
            }
            if (r < 0)
                break;
            *changed |= folded;
            r = push(out, T_STR, t->src, v.data ? v.data : "", v.len, fl, 0);
            i = j;
            continue;
        }
        if (t->t == T_OP && IS_OP(in, i, "[") && is_t(in, i + 1, T_STR) && IS_OP(in, i + 2, "]") &&
            out->n &&
            (out->v[out->n - 1].t == T_NAME || teq(out, out->n - 1, T_OP, ")") ||
             teq(out, out->n - 1, T_OP, "]")) &&
            ident_like(ttext(in, &in->v[i + 1]), in->v[i + 1].n)) {
            /* x["name"] -> x.name */
            if ((r = push(out, T_OP, t->src, ".", 1, 0, 0)) < 0 ||
                (r = push(out, T_NAME, in->v[i + 1].src, ttext(in, &in->v[i + 1]), in->v[i + 1].n,
                          in->v[i + 1].flags, 0)) < 0)
                break;
            if (in->v[i + 1].flags & F_DECODED)
                r = add_note(nm, "obfuscated_attribute", TC_SEV_MEDIUM, t->src,
                             "attribute looked up by a computed (decoded or concatenated) name");
            *changed = true;
            i += 3;
            continue;
        }
        if (t->t == T_OP && IS_OP(in, i, "[") && !py) {
            /* ["a", "b"].join("") */
            size_t k = i + 1, cnt = 0;
            while (is_t(in, k, T_STR)) {
                k++, cnt++;
                if (IS_OP(in, k, ","))
                    k++;
            }
            if (cnt && IS_OP(in, k, "]") && IS_OP(in, k + 1, ".") && IS_NAME(in, k + 2, "join") &&
                IS_OP(in, k + 3, "(") && is_t(in, k + 4, T_STR) && IS_OP(in, k + 5, ")")) {
                size_t m = 0;
                for (size_t a = i + 1; a < k; a++)
                    if (in->v[a].t == T_STR) {
                        if (m++ &&
                            (r = tc_buf_append(&v, ttext(in, &in->v[k + 4]), in->v[k + 4].n)) < 0)
                            break;
                        if ((r = tc_buf_append(&v, ttext(in, &in->v[a]), in->v[a].n)) < 0)
                            break;
                    }
                if (r < 0 ||
                    (r = push(out, T_STR, t->src, v.data ? v.data : "", v.len, F_DECODED, 0)) < 0)
                    break;
                *changed = true;
                i = k + 6;
                continue;
            }
        }
        if (t->t == T_NAME && !(i > 0 && IS_OP(in, i - 1, "."))) {
            size_t j = chain_at(in, i, chain, sizeof(chain));
            const char *last = last_component(chain);
            if (IS_OP(in, j, "(")) {
                size_t a = j + 1;
                /* chr(N), String.fromCharCode(N, ...), bytes([N, ...]) */
                if (strcmp(chain, "chr") == 0 || strcmp(chain, "unichr") == 0 ||
                    strcmp(chain, "String.fromCharCode") == 0 ||
                    ((strcmp(chain, "bytes") == 0 || strcmp(chain, "bytearray") == 0) &&
                     IS_OP(in, a, "["))) {
                    bool br = IS_OP(in, a, "[");
                    size_t k = a + br, cnt = 0;
                    bool ok = true;
                    while (ok && is_t(in, k, T_NUM)) {
                        if (in->v[k].num < 0 || in->v[k].num >= 0x110000)
                            ok = false;
                        else
                            r = put_utf8(&v, (unsigned long)in->v[k].num);
                        k++, cnt++;
                        if (IS_OP(in, k, ","))
                            k++;
                    }
                    if (br && IS_OP(in, k, "]"))
                        k++;
                    if (ok && cnt && IS_OP(in, k, ")")) {
                        if (r < 0 || (r = push(out, T_STR, t->src, v.data ? v.data : "", v.len,
                                               F_DECODED, 0)) < 0)
                            break;
                        *changed = true;
                        i = k + 1;
                        continue;
                    }
                    tc_buf_reset(&v);
                }
                if (is_t(in, a, T_STR) && (IS_OP(in, a + 1, ")") || IS_OP(in, a + 1, ","))) {
                    const struct tok *s = &in->v[a];
                    size_t k = a + 1;
                    char how[64] = "";
                    if (IS_OP(in, k, ",") && is_t(in, k + 1, T_STR)) {
                        snprintf(how, sizeof(how), "%.*s", (int)in->v[k + 1].n,
                                 ttext(in, &in->v[k + 1]));
                        k += 2;
                    }
                    /* skip further simple arguments up to ')' */
                    while (k < in->n && k - a < 8 && !IS_OP(in, k, ")") && !IS_OP(in, k, "(") &&
                           in->v[k].t != T_NL)
                        k++;
                    if (IS_OP(in, k, ")")) {
                        bool done = false;
                        int fl = s->flags;
                        if (in_list(last, decoders)) {
                            done = decode_as(last, ttext(in, s), s->n, &v);
                            fl |= F_DECODED;
                            if (done)
                                r = add_note(nm, "encoded_literal", TC_SEV_LOW, t->src,
                                             "encoded string literal decoded at run time");
                        } else if ((strcmp(chain, "codecs.decode") == 0 ||
                                    strcmp(chain, "codecs.encode") == 0 ||
                                    strcmp(chain, "decode") == 0) &&
                                   how[0]) {
                            done = decode_as(how, ttext(in, s), s->n, &v);
                            fl |= F_DECODED;
                            if (done)
                                r = add_note(nm, "encoded_literal", TC_SEV_LOW, t->src,
                                             "encoded string literal decoded at run time");
                        } else if (in_list(chain, passthru)) {
                            if (!how[0] || !(done = decode_as(how, ttext(in, s), s->n, &v))) {
                                tc_buf_reset(&v);
                                r = tc_buf_append(&v, ttext(in, s), s->n);
                                done = true;
                            } else
                                fl |= F_DECODED;
                        } else if (in_list(chain, importers) && s->n && s->n < 128) {
                            const char *m = ttext(in, s);
                            size_t mn = s->n;
                            if (mn > 5 && memcmp(m, "node:", 5) == 0)
                                m += 5, mn -= 5;
                            if (py || (s->flags & F_DECODED))
                                r = add_note(nm, "dynamic_import", TC_SEV_MEDIUM, t->src,
                                             "module imported by a computed name");
                            if (r >= 0)
                                r = push(out, T_NAME, t->src, m, mn, 0, 0);
                            if (r < 0)
                                break;
                            *changed = true;
                            i = k + 1;
                            continue;
                        }
                        if (r < 0)
                            break;
                        if (done) {
                            if ((r = push(out, T_STR, t->src, v.data ? v.data : "", v.len, fl, 0)) <
                                0)
                                break;
                            *changed = true;
                            i = k + 1;
                            continue;
                        }
                        tc_buf_reset(&v);
                    }
                }
                /* getattr(x.y, "name") -> x.y.name */
                if (strcmp(chain, "getattr") == 0 && is_t(in, a, T_NAME)) {
                    char obj[256];
                    size_t k = chain_at(in, a, obj, sizeof(obj));
                    if (IS_OP(in, k, ",") && is_t(in, k + 1, T_STR) &&
                        ident_like(ttext(in, &in->v[k + 1]), in->v[k + 1].n) &&
                        (IS_OP(in, k + 2, ")") || IS_OP(in, k + 2, ","))) {
                        const struct tok *s = &in->v[k + 1];
                        size_t e = k + 2;
                        while (e < in->n && !IS_OP(in, e, ")") && e - k < 8)
                            e++;
                        if (IS_OP(in, e, ")")) {
                            for (size_t x = a; x < k && r >= 0; x++)
                                r = copy_tok(out, in, x);
                            if (r >= 0)
                                r = push(out, T_OP, t->src, ".", 1, 0, 0);
                            if (r >= 0)
                                r = push(out, T_NAME, s->src, ttext(in, s), s->n, 0, 0);
                            if (r >= 0 && (s->flags & F_DECODED))
                                r = add_note(
                                    nm, "obfuscated_attribute", TC_SEV_MEDIUM, t->src,
                                    "getattr() with a computed (decoded or concatenated) name");
                            if (r < 0)
                                break;
                            *changed = true;
                            i = e + 1;
                            continue;
                        }
                    }
                }
                /* globals()/vars()/locals() behave like the builtins namespace for lookups */
                if ((strcmp(chain, "globals") == 0 || strcmp(chain, "vars") == 0 ||
                     strcmp(chain, "locals") == 0) &&
                    IS_OP(in, a, ")")) {
                    if ((r = push(out, T_NAME, t->src, "__builtins__", 12, 0, 0)) < 0)
                        break;
                    *changed = true;
                    i = a + 1;
                    continue;
                }
            }
            /* copy the chain as is */
            for (size_t x = i; x < j && r >= 0; x++)
                r = copy_tok(out, in, x);
            i = j;
            continue;
        }
        r = copy_tok(out, in, i);
        i++;
    }
    tc_buf_free(&v);
    return r;
}

static const char *const sensitive_heads[] = {
    "os",      "sys",      "subprocess",    "builtins",   "__builtins__", "eval",
    "exec",    "compile",  "getattr",       "__import__", "importlib",    "socket",
    "pty",     "shutil",   "ctypes",        "codecs",     "base64",       "pickle",
    "marshal", "open",     "child_process", "Function",   "process",      "fs",
    "net",     "vm",       "http",          "https",      "setattr",      "requests",
    "urllib",  "commands", "execSync",      "spawn",      "system",       "popen",
    "dup2",    "connect",  "Popen",         NULL};

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

static int collect_aliases(bool py, const struct toks *ts, struct kvs *al)
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
                if (sensitive(tgt))
                    r = kv_set(al, ttext(ts, &ts->v[k]), ts->v[k].n, tgt, strlen(tgt));
            }
        }
    }
    return r;
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
    struct kvs *al = calloc(1, sizeof(*al));
    int r;

    if (!al)
        return -ENOMEM;
    toks_init(&a);
    toks_init(&b);
    if ((r = lex_pyjs(py, code, len, depth, origin, &a)) < 0)
        goto out;
    for (int pass = 0; pass < MAX_PASSES; pass++) {
        bool changed = false;
        b.n = 0;
        tc_buf_reset(&b.pool);
        if ((r = fold_pass(py, &a, &b, n, &changed)) < 0)
            goto out;
        struct toks tmp = a;
        a = b;
        b = tmp;
        if (!changed)
            break;
    }
    if ((r = collect_aliases(py, &a, al)) < 0)
        goto out;
    r = emit_pyjs(py, &a, al, depth, n);
out:
    toks_free(&a);
    toks_free(&b);
    kv_free(al);
    free(al);
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
};

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
static int sh_dollar(struct sh *s, struct tc_buf *w)
{
    const char *c = s->c;
    size_t i = s->i + 1, st, en;
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
            int r = tc_buf_append(w, c + s->i, (e < s->len ? e + 1 : e) - s->i);
            s->i = e < s->len ? e + 1 : e;
            return r;
        }
        s->i = en + 1;
    } else {
        st = i;
        en = st;
        while (en < s->len && name_char(c[en], en == st))
            en++;
        if (en == st) {
            s->i++;
            return tc_buf_append(w, "$", 1);
        }
        s->i = en;
    }
    if (en - st == 3 && memcmp(c + st, "IFS", 3) == 0)
        return tc_buf_append(w, " ", 1);
    const char *v = kv_get(&s->vars, c + st, en - st);
    if (v)
        return tc_buf_append(w, v, strlen(v));
    int r = tc_buf_append(w, "$", 1);
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
    int r = tc_buf_append(w, s->c + s->i, e - s->i);
    s->i = e;
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
            s->i++;
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
            if (s->i < s->len)
                s->i++;
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
            r = sh_push_word(s, osrc, v.data ? v.data : "", v.len, F_DECODED);
    } else
        r = push(ts, T_OP, src, ")", 1, 0, 0);
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
        bool assign = s->cmdpos && eq > 0 && eq < w.len && wd[eq] == '=';
        int flags = (dec ? F_DECODED : 0) | (glued ? F_GLUED : 0);
        if (assign) {
            r = kv_set(&s->vars, wd, eq, wd + eq + 1, w.len - eq - 1);
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
            wd[eq] == '=')
            r = kv_set(&s->aliases, wd, eq, wd + eq + 1, w.len - eq - 1);
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
        r = emit_shell(s);
    toks_free(&s->ts);
    kv_free(&s->vars);
    kv_free(&s->aliases);
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
