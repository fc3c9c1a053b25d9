/* The pre-screen normaliser for the shell (policy/prescreen_norm_int.h): words rebuilt as the
 * shell would, constant variables and aliases, pipelines through decoders evaluated. */
#include "policy/prescreen_norm_int.h"

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
    const char *t = pn_kv_get(&s->taint, name, n);
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
            const char *ifs = pn_kv_get(&s->vars, "IFS", 3);
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
                const char *ifs = pn_kv_get(&s->vars, "IFS", 3);
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
    const char *v = pn_kv_get(&s->vars, c + st, en - st);
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
                    size_t u = pn_unescape1(c + e + 1, s->len - e - 1, w, dec, &err);
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
        ok = pn_b64_decode(v->data ? v->data : "", v->len, &d);
    else if (word_is(ts, c, xxd) && has_arg(ts, c + 1, ce, "-r"))
        ok = pn_hex_decode(v->data ? v->data : "", v->len, &d);
    else if (word_is(ts, c, rev)) {
        ok = true;
        for (size_t x = v->len; x-- > 0 && ok;)
            if (v->data[x] != '\n' || x + 1 != v->len)
                ok = tc_buf_append(&d, v->data + x, 1) == 0;
    } else if (word_is(ts, c, tr) && ce == c + 3) {
        const char *x = ttext(ts, &ts->v[c + 1]), *y = ttext(ts, &ts->v[c + 2]);
        if ((strncmp(x, "A-Za-z", 6) == 0 && strncmp(y, "N-ZA-Mn-za-m", 12) == 0) ||
            (strncmp(x, "a-zA-Z", 6) == 0 && strncmp(y, "n-za-mN-ZA-M", 12) == 0))
            ok = pn_rot13(v->data ? v->data : "", v->len, &d);
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
                size_t u = pn_unescape1(t + x + 1, n - x - 1, v, &d, &err);
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
            r = pn_add_job(s->n, PS_SHELL, v.data ? v.data : "", v.len, osrc, s->depth + 1);
        /* x=$(...) : merge into the assignment word and remember the value */
        if (r >= 0 && ts->n && (ts->v[ts->n - 1].flags & F_ASSIGN)) {
            struct tok *a = &ts->v[ts->n - 1];
            char name[128];
            snprintf(name, sizeof(name), "%.*s", (int)(a->n - 1 < 127 ? a->n - 1 : 127),
                     ttext(ts, a));
            r = pn_kv_set(&s->vars, name, strlen(name), v.data ? v.data : "", v.len);
            if (r >= 0)
                r = pn_kv_set(&s->taint, name, strlen(name), (ndec || esc) ? "1" : "0", 1);
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
            r = pn_kv_set(&s->vars, name, strlen(name), raw, strlen(raw));
            if (r >= 0)
                r = pn_kv_set(&s->taint, name, strlen(name),
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
            const char *old = pn_kv_get(&s->vars, wd, eq);
            struct tc_buf nv;
            tc_buf_init(&nv, MAX_VALUE * 2);
            r = tc_buf_append(&nv, old ? old : "", old ? strlen(old) : 0);
            if (r >= 0)
                r = tc_buf_append(&nv, wd + eq + 2, w.len - eq - 2);
            if (r >= 0)
                r = pn_kv_set(&s->vars, wd, eq, nv.data ? nv.data : "", nv.len);
            tc_buf_free(&nv);
            if (r >= 0)
                r = pn_kv_set(&s->taint, wd, eq, "1", 1);
            if (r >= 0)
                r = sh_push_word(s, SRC(st), wd, w.len, flags);
            continue;
        }
        if (assign) {
            r = pn_kv_set(&s->vars, wd, eq, wd + eq + 1, w.len - eq - 1);
            if (r >= 0)
                r = pn_kv_set(&s->taint, wd, eq, (comp || dec || adj) ? "1" : "0", 1);
            if (r >= 0 && eq + 1 == w.len)
                flags |= F_ASSIGN;
            if (r >= 0)
                r = sh_push_word(s, SRC(st), wd, w.len, flags);
            continue; /* still command position */
        }
        if (s->cmdpos) {
            const char *al = pn_kv_get(&s->aliases, wd, w.len);
            if (al) {
                r = sh_push_word(s, SRC(st), al, strlen(al), flags);
                s->cmdpos = false;
                continue;
            }
        }
        if (s->ts.n && IS_NAME(&s->ts, s->ts.n - 1, "alias") && eq > 0 && eq < w.len &&
            wd[eq] == '=') {
            r = pn_kv_set(&s->aliases, wd, eq, wd + eq + 1, w.len - eq - 1);
            /* the alias's text runs wherever the alias is used: scan it as code */
            if (r >= 0)
                r = pn_add_job(s->n, PS_SHELL, wd + eq + 1, w.len - eq - 1, SRC(st), s->depth + 1);
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
            r = pn_kv_set(&s->runners, func, strlen(func), "1", 1);
            continue;
        }
        if (cw < e && pn_kv_get(&s->runners, ttext(ts, &ts->v[cw]), ts->v[cw].n))
            cw++;
        if (cw == e) {
            /* $(...) in command position (not an assignment's value) */
            if (e < ts->n && (IS_OP(ts, e, "$(") || IS_OP(ts, e, "`")) &&
                !(e > 0 && (ts->v[e - 1].flags & F_ASSIGN)) && sh_generated(ts, e, &s->work))
                r = pn_add_note(s->n, "evasion_computed_command", TC_SEV_HIGH, ts->v[e].src,
                                "the command to run is produced by a substitution that transforms "
                                "text");
            continue;
        }
        const struct tok *c = &ts->v[cw];
        if (c->flags & (F_COMPUTED | F_DECODED | F_SH_ADJ)) {
            r = pn_add_note(s->n, "evasion_computed_command", TC_SEV_HIGH, c->src,
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
                r = pn_add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
                                "eval runs text that was decoded or transformed at run time");
            continue;
        }
        if (strcmp(base, "source") == 0 || strcmp(base, ".") == 0) {
            size_t a = cw + 1;
            if (a < ts->n && (sh_word_eq(ts, a, "/dev/stdin") || sh_word_eq(ts, a, "/dev/fd/0") ||
                              sh_word_eq(ts, a, "/proc/self/fd/0") || sh_word_eq(ts, a, "-")))
                r = pn_add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
                                "sources code from standard input");
            else if (a < ts->n && IS_OP(ts, a, "<(") && sh_generated(ts, a, &s->work))
                r = pn_add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
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
                r = pn_add_note(s->n, "evasion_computed_command", TC_SEV_HIGH, c->src,
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
                        r = pn_add_job(s->n, PS_SHELL, ttext(ts, &ts->v[k + 1]), ts->v[k + 1].n,
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
                r = pn_add_note(s->n, "evasion_indirect_exec", TC_SEV_HIGH, c->src,
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
                r = pn_add_job(s->n, lang, ttext(ts, &ts->v[k + 1]), ts->v[k + 1].n,
                               ts->v[k + 1].src, s->depth + 1);
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
            r = pn_out_bytes(s->n, "\n", 1, t->src);
            need_space = false;
            continue;
        }
        if (need_space && (r = pn_out_bytes(s->n, " ", 1, t->src)) < 0)
            break;
        need_space = true;
        if (t->t == T_OP) {
            r = pn_out_bytes(s->n, ttext(ts, t), t->n, t->src);
            continue;
        }
        /* echo/printf ... | decoder ...: show the decoded value, queue it */
        size_t end;
        int ndec;
        bool esc;
        if (cmd && sh_eval_pipeline(ts, i, ts->n, &v, &end, &ndec, &esc) && (ndec || esc)) {
            r = pn_add_job(s->n, PS_SHELL, v.data ? v.data : "", v.len, t->src, s->depth + 1);
            if (r >= 0)
                r = pn_out_bytes(s->n, "echo \"\x01", 7, t->src);
            for (size_t k = 0; k < v.len && r >= 0; k++) {
                char c = v.data[k] == '"'                        ? '\''
                         : (v.data[k] == '\n' || v.data[k] == 0) ? ' '
                                                                 : v.data[k];
                r = pn_out_bytes(s->n, &c, 1, t->src);
            }
            if (r >= 0)
                r = pn_out_bytes(s->n, "\"", 1, t->src);
            i = end - 1;
            continue;
        }
        const char *w = ttext(ts, t);
        bool quote = memchr(w, ' ', t->n) || memchr(w, '\n', t->n) || memchr(w, '\t', t->n);
        bool mark = quote && (t->flags & F_DECODED);
        if (quote && (r = pn_out_bytes(s->n, mark ? "\"\x01" : "\"", mark ? 2 : 1, t->src)) < 0)
            break;
        for (size_t k = 0; k < t->n && r >= 0; k++) {
            char c = w[k];
            if (quote && c == '"')
                c = '\'';
            if (c == '\n' || c == 0)
                c = ' ';
            r = pn_out_bytes(s->n, &c, 1, t->src);
        }
        if (quote && r >= 0)
            r = pn_out_bytes(s->n, "\"", 1, t->src);
        if (r >= 0 && (t->flags & F_DECODED) && t->n >= 4)
            r = pn_add_job(s->n, PS_SHELL, w, t->n, t->src, s->depth + 1);
    }
    tc_buf_free(&v);
    return r;
}

int pn_normalise_shell(const char *code, size_t len, int depth, uint32_t origin, struct ps_norm *n)
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
    pn_kv_free(&s->vars);
    pn_kv_free(&s->aliases);
    pn_kv_free(&s->taint);
    pn_kv_free(&s->runners);
    free(s);
    return r;
}
