/* The pre-screen normaliser for Python and JavaScript (policy/prescreen_norm_int.h): the lexer,
 * folding passes, evasion checks, aliases, and the normalised text. */
#include "policy/prescreen_norm_int.h"

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
                    size_t used = pn_unescape1(c + k + 1, len - k - 1, &sb, &dec, &err);
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
                int hv = c[d] == '_' ? -2 : tc_hexval((unsigned char)c[d]);
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
        return pn_rot13(s, n, out);
    if (strstr(how, "base64") || strstr(how, "b64") || strcmp(how, "atob") == 0 ||
        strstr(how, "decodebytes") || strstr(how, "decodestring"))
        return pn_b64_decode(s, n, out);
    if (strstr(how, "hex") || strstr(how, "b16") || strcmp(how, "unhexlify") == 0)
        return pn_hex_decode(s, n, out);
    if (strcmp(how, "unescape") == 0 || strcmp(how, "decodeURIComponent") == 0 ||
        strcmp(how, "decodeURI") == 0)
        return pn_pct_decode(s, n, out);
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
    return pn_add_note(f->nm, "evasion_computed_name", TC_SEV_HIGH, src, what);
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
    const char *v = f->consts ? pn_kv_get(f->consts, name, n) : NULL;
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
            r = pn_put_utf8(&o, (unsigned long)a->num);
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
            r = pn_put_utf8(&jb, (unsigned long)in->v[k].num);
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
        r = pn_put_utf8(&f->v, (unsigned long)in->v[k].num);
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
            r = pn_add_note(f->nm, "evasion_object_graph", TC_SEV_HIGH, in->v[i].src,
                            "imports through an object reached by walking the object graph");
        if (r < 0)
            return r;
        if (s->flags & F_BUILT)
            r = note_built(f, in->v[i].src, "module imported by a name built at run time");
        else if (f->py)
            r = pn_add_note(f->nm, "dynamic_import", TC_SEV_LOW, in->v[i].src,
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
        (r = pn_add_note(f->nm, "encoded_literal", TC_SEV_LOW, in->v[i].src,
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
    pn_kv_free(consts);
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
        r = pn_kv_set(consts, ttext(ts, nt), nt->n, val, cand[q].val->n + 1);
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
    const char *a = pn_kv_get(al, chain, n);
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
                    r = pn_kv_set(al, ttext(ts, a), a->n, chain, strlen(chain));
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
                r = pn_kv_set(al, ttext(ts, as), as->n, full, strlen(full));
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
                r = pn_kv_set(al, ttext(ts, as), as->n, full, strlen(full));
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
                    r = pn_kv_set(al, ttext(ts, as), as->n, full, strlen(full));
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
                    r = pn_kv_set(al, ttext(ts, &ts->v[k]), ts->v[k].n, tgt, strlen(tgt));
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
            pn_kv_get(taint, ttext(ts, t), t->n))
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
        pn_kv_free(cand);
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
            if (pn_kv_get(taint, ttext(ts, nt), nt->n) || pn_kv_get(cand, ttext(ts, nt), nt->n))
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
                r = pn_kv_set(cand, ttext(ts, nt), nt->n, "0", 1);
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
            const char *c = pn_kv_get(cand, ttext(ts, &ts->v[i]), ts->v[i].n);
            if (c && c[0] < '2' && binds_at(ts, i, in_for)) {
                char next[2] = {(char)(c[0] + 1), '\0'};
                r = pn_kv_set(cand, ttext(ts, &ts->v[i]), ts->v[i].n, next, 1);
            }
        }
        size_t before = taint->n;
        for (size_t q = 0; q < cand->n && r >= 0; q++)
            if (cand->e[q].v[0] == '1')
                r = pn_kv_set(taint, cand->e[q].k, cand->e[q].kn, "1", 1);
        if (taint->n == before)
            break;
    }
    pn_kv_free(cand);
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
                r = pn_add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
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
                r = pn_add_note(
                    n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
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
                r = pn_add_note(
                    n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
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
                    r = pn_add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
                                    "a namespace is indexed by a name computed at run time");
            }
            continue;
        }
        if (IS_OP(ts, j, "[") && namespace_chain(py, res) && sinks++ < 4096 &&
            call_arg(ts, j, 0, &a, &b) && strong_expr(py, ts, a, b, taint))
            r = pn_add_note(n, "evasion_computed_name", TC_SEV_HIGH, ts->v[i].src,
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
        return pn_add_note(n, "evasion_alias", TC_SEV_HIGH, as->src,
                           "a code-execution builtin (eval, exec, Function, __import__, getattr) "
                           "is given another name");
    if (!in_list(head, spawn_modules) || (strcmp(head, target) != 0 && !in_list(last, spawn_funcs)))
        return 0;
    if (abbreviates(alias, as->n, last))
        return 0;
    return pn_add_note(n, "evasion_alias", TC_SEV_HIGH, as->src,
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
            r = pn_out_bytes(n, "\n", 1, t->src);
            prev_word = false;
            continue;
        }
        if (t->t == T_NAME) {
            bool after_dot = i > 0 && IS_OP(ts, i - 1, ".");
            if (!after_dot)
                chain_start = i;
            const char *a = NULL;
            if (!after_dot && !(IS_OP(ts, i + 1, "=") && !IS_OP(ts, i + 2, "=")))
                a = pn_kv_get(al, s, t->n);
            if (prev_word && (r = pn_out_bytes(n, " ", 1, t->src)) < 0)
                break;
            r = a ? pn_out_bytes(n, a, strlen(a), t->src) : pn_out_bytes(n, s, t->n, t->src);
            prev_word = true;
            continue;
        }
        if (t->t == T_NUM) {
            if (prev_word && (r = pn_out_bytes(n, " ", 1, t->src)) < 0)
                break;
            r = pn_out_bytes(n, s, t->n, t->src);
            prev_word = true;
            continue;
        }
        if (t->t == T_OP) {
            if (IS_OP(ts, i, "(") && chain_start != SIZE_MAX && i > 0 && ts->v[i - 1].t == T_NAME) {
                chain_at(ts, chain_start, chain, sizeof(chain));
                resolve(al, chain, call, sizeof(call));
            } else if (!IS_OP(ts, i, "."))
                chain_start = SIZE_MAX;
            r = pn_out_bytes(n, s, t->n, t->src);
            prev_word = false;
            continue;
        }
        /* string literal */
        if (prev_word && (r = pn_out_bytes(n, " ", 1, t->src)) < 0)
            break;
        if ((r = pn_out_bytes(n, "\"", 1, t->src)) < 0)
            break;
        if ((t->flags & F_DECODED) && (r = pn_out_bytes(n, "\x01", 1, t->src)) < 0)
            break;
        for (size_t k = 0; k < t->n && r >= 0; k++) {
            char c = s[k];
            if (c == '"')
                c = '\'';
            else if (c == '\n' || c == '\r' || c == 0)
                c = ' ';
            r = pn_out_bytes(n, &c, 1, t->src);
        }
        if (r >= 0)
            r = pn_out_bytes(n, "\"", 1, t->src);
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
                r = pn_add_job(n, PS_SHELL, s, t->n, t->src, depth + 1);
            else if (in_list(last, code_sinks) && strcmp(head, "re") != 0 &&
                     strcmp(head, "regex") != 0)
                r = pn_add_job(n, self, s, t->n, t->src, depth + 1);
            else if (t->flags & F_DECODED)
                r = pn_add_job(n, self, s, t->n, t->src, depth + 1);
        } else if (t->flags & F_DECODED)
            r = pn_add_job(n, self, s, t->n, t->src, depth + 1);
        call[0] = '\0';
        (void)res;
    }
    return r;
}

int pn_normalise_pyjs(bool py, const char *code, size_t len, int depth, uint32_t origin,
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
        pn_kv_free(al);
    if (consts)
        pn_kv_free(consts);
    if (taint)
        pn_kv_free(taint);
    free(al);
    free(consts);
    free(taint);
    return r;
}
