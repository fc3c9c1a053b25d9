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
#include "policy/prescreen_norm_int.h"

/* ---- small decoders ---- */

int pn_b64val(unsigned char c)
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
bool pn_b64_decode(const char *s, size_t n, struct tc_buf *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        int v = pn_b64val(c);
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

bool pn_hex_decode(const char *s, size_t n, struct tc_buf *out)
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
        int v = tc_hexval(c);
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

bool pn_rot13(const char *s, size_t n, struct tc_buf *out)
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

bool pn_pct_decode(const char *s, size_t n, struct tc_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && tc_hexval((unsigned char)s[i + 1]) >= 0 &&
            tc_hexval((unsigned char)s[i + 2]) >= 0) {
            c = (char)(tc_hexval((unsigned char)s[i + 1]) << 4 |
                       tc_hexval((unsigned char)s[i + 2]));
            i += 2;
        } else if (c == '%' && i + 5 < n && s[i + 1] == 'u') {
            int v = 0, ok = 1;
            for (int k = 2; k < 6; k++)
                ok &= tc_hexval((unsigned char)s[i + k]) >= 0,
                    v = v * 16 + (tc_hexval((unsigned char)s[i + k]) & 15);
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

int pn_put_utf8(struct tc_buf *b, unsigned long cp)
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
size_t pn_unescape1(const char *s, size_t n, struct tc_buf *out, bool *dec, int *err)
{
    static const char simple_in[] = "ntr0abfv\\'\"`e";
    static const char simple_out[] = "\n\t\r\0\a\b\f\v\\'\"`\033";
    if (n == 0)
        return 0;
    char c = s[0];
    if ((c == 'x' || c == 'X') && n >= 3 && tc_hexval((unsigned char)s[1]) >= 0 &&
        tc_hexval((unsigned char)s[2]) >= 0) {
        char ch = (char)(tc_hexval((unsigned char)s[1]) << 4 | tc_hexval((unsigned char)s[2]));
        *dec = true;
        *err |= tc_buf_append(out, &ch, 1);
        return 3;
    }
    if (c == 'u' && n >= 2 && s[1] == '{') {
        unsigned long v = 0;
        size_t k = 2;
        while (k < n && k < 9 && tc_hexval((unsigned char)s[k]) >= 0)
            v = v * 16 + (unsigned long)tc_hexval((unsigned char)s[k++]);
        if (k < n && s[k] == '}' && k > 2) {
            *dec = true;
            *err |= pn_put_utf8(out, v);
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
            int h = tc_hexval((unsigned char)s[k]);
            if (h < 0)
                return 0;
            v = v * 16 + (unsigned long)h;
        }
        *dec = true;
        *err |= pn_put_utf8(out, v);
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

const char *pn_kv_get(const struct kvs *m, const char *k, size_t kn)
{
    size_t s = kv_slot(m, k, kn);
    return m->slot[s] ? m->e[m->slot[s] - 1].v : NULL;
}

int pn_kv_set(struct kvs *m, const char *k, size_t kn, const char *v, size_t vn)
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

void pn_kv_free(struct kvs *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].k);
        free(m->e[i].v);
    }
    m->n = 0;
    memset(m->slot, 0, sizeof(m->slot));
}

/* ---- output helpers ---- */

int pn_out_bytes(struct ps_norm *n, const char *s, size_t len, uint32_t src)
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

int pn_add_note(struct ps_norm *n, const char *rule, int sev, uint32_t src, const char *msg)
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

int pn_add_job(struct ps_norm *n, enum ps_lang lang, const char *s, size_t len, uint32_t src,
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
