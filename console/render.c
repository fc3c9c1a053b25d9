#include "console/render.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/embedded.h"
#include "common/util.h"
#include "policy/prescreen_unicode.h"

#define MAX_NODES 8192
#define MAX_NAME  64

/* ---- escapers ---- */

int tc_escape_html(struct tc_buf *b, const char *s, size_t len)
{
    int r = 0;
    size_t start = 0;
    for (size_t i = 0; i < len && r == 0; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        case '`':
            rep = "&#96;";
            break;
        case '\0':
            rep = "\xef\xbf\xbd";
            break; /* U+FFFD: a NUL never reaches the page */
        default:
            continue;
        }
        r = tc_buf_append(b, s + start, i - start);
        if (r == 0)
            r = tc_buf_append(b, rep, strlen(rep));
        start = i + 1;
    }
    return r ? r : tc_buf_append(b, s + start, len - start);
}

/* Past this many markers in one value, the rest are plain "⟪U+200B⟫" text without a span:
 * a megabyte of alternating invisible characters must not make a page too big to render. */
#define MAX_MARKER_SPANS 4096

int tc_escape_html_visible(struct tc_buf *b, const char *s, size_t len)
{
    int r = 0;
    size_t start = 0, spans = 0;
    for (size_t i = 0; i < len && r == 0;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        size_t n = c < 0x80 ? 1 : tc_utf8_next(s + i, len - i, &cp);
        if (c < 0x80)
            cp = c;
        enum tc_hidden h = n ? tc_hidden_class(cp, NULL) : TC_HIDDEN_NONE;
        /* a CR that ends a line (CRLF, or the end of the value) is just a line end */
        if (cp == '\r' && (i + 1 == len || s[i + 1] == '\n'))
            h = TC_HIDDEN_NONE;
        if (n && h == TC_HIDDEN_NONE) {
            if (c == '&' || c == '<' || c == '>' || c == '"' || c == '\'' || c == '`') {
                r = tc_escape_html(b, s + start, i + 1 - start);
                start = i + 1;
            }
            i += n;
            continue;
        }
        /* flush the plain text before this character */
        r = tc_escape_html(b, s + start, i - start);
        if (r)
            break;
        if (n == 0) { /* not UTF-8: a replacement character, never the raw byte */
            r = tc_buf_append(b, "\xef\xbf\xbd", 3);
            i++;
        } else {
            const char *name = NULL;
            char marker[24];
            (void)tc_hidden_class(cp, &name);
            size_t mn = tc_hidden_marker(cp, marker, sizeof(marker));
            /* a run of the same character is one marker: "⟪U+200B⟫×300" */
            size_t run = 1, e = i + n;
            uint32_t next;
            while (e < len && h != TC_HIDDEN_SPACE && tc_utf8_next(s + e, len - e, &next) == n &&
                   next == cp)
                e += n, run++;
            bool span = spans++ < MAX_MARKER_SPANS;
            if (span)
                r = tc_buf_appendf(b, "<span class=\"uc uc-%s\" title=\"U+%04X %s\">",
                                   tc_hidden_kind_name(h), (unsigned)cp, name ? name : "");
            /* unusual spaces are shown as themselves, highlighted; the rest by the marker */
            if (r == 0)
                r = h == TC_HIDDEN_SPACE ? tc_buf_append(b, s + i, n)
                                         : tc_buf_append(b, marker, mn);
            if (r == 0 && run > 1)
                r = tc_buf_appendf(b, "\xc3\x97%zu", run);
            if (r == 0 && span)
                r = tc_buf_append(b, "</span>", 7);
            i = e;
        }
        start = i;
    }
    return r ? r : tc_escape_html(b, s + start, len - start);
}

static bool url_allowed(const char *s, size_t len)
{
    if (len == 0)
        return true;
    /* Browsers drop tabs and newlines anywhere and spaces/controls at the ends of a URL;
     * refuse every control character so that "java\tscript:" cannot slip through. */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == ' ' || s[i] == '\\')
            return false;
    if ((len >= 7 && strncasecmp(s, "http://", 7) == 0) ||
        (len >= 8 && strncasecmp(s, "https://", 8) == 0))
        return true;
    /* Relative: no scheme, i.e. no ':' before the first '/', '?' or '#'. */
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '/' || s[i] == '?' || s[i] == '#')
            return true;
        if (s[i] == ':')
            return false;
    }
    return true;
}

int tc_escape_url(struct tc_buf *b, const char *s, size_t len)
{
    if (!url_allowed(s, len))
        return tc_buf_append(b, "#", 1);
    return tc_escape_html(b, s, len);
}

int tc_escape_url_component(struct tc_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    int r = 0;
    for (size_t i = 0; i < len && r == 0; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            r = tc_buf_append(b, s + i, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            r = tc_buf_append(b, e, 3);
        }
    }
    return r;
}

/* ---- HTML context, tracked over the template's literal text ---- */

enum mode {
    M_TEXT,
    M_TAG_OPEN, /* after '<' */
    M_TAG_NAME,
    M_TAG, /* inside a tag, between attributes */
    M_ATTR_NAME,
    M_AFTER_NAME, /* after an attribute name, before '=' or the next attribute */
    M_BEFORE_VALUE,
    M_VALUE_DQ,
    M_VALUE_SQ,
    M_VALUE_UNQ,
    M_COMMENT, /* <!-- ... --> */
    M_BOGUS,   /* <!DOCTYPE ...>, <?...> */
    M_RAWTEXT, /* inside <script> or <style> */
};

enum akind { A_PLAIN, A_URL, A_FORBIDDEN };

enum esc { E_HTML, E_URL_START, E_URL_PART };

struct hstate {
    enum mode m;
    enum akind ak;
    bool end_tag;
    bool value_empty; /* nothing emitted yet in the current attribute value */
    char tag[16];
    size_t taglen;
    char attr[24];
    size_t attrlen;
    char rawtag[16]; /* the element whose raw text we are in */
};

static enum akind attr_kind(const char *a)
{
    static const char *const url[] = {"href",     "src",        "action",     "formaction",
                                      "cite",     "poster",     "background", "longdesc",
                                      "usemap",   "xlink:href", "data",       "codebase",
                                      "manifest", "ping",       "icon"};
    static const char *const bad[] = {"style", "srcdoc", "srcset", "content", "http-equiv"};
    if (strncmp(a, "on", 2) == 0)
        return A_FORBIDDEN;
    for (size_t i = 0; i < TC_ARRAY_SIZE(bad); i++)
        if (strcmp(a, bad[i]) == 0)
            return A_FORBIDDEN;
    for (size_t i = 0; i < TC_ARRAY_SIZE(url); i++)
        if (strcmp(a, url[i]) == 0)
            return A_URL;
    return A_PLAIN;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static void tag_closed(struct hstate *st)
{
    if (!st->end_tag && (strcmp(st->tag, "script") == 0 || strcmp(st->tag, "style") == 0)) {
        snprintf(st->rawtag, sizeof(st->rawtag), "%s", st->tag);
        st->m = M_RAWTEXT;
    } else {
        st->m = M_TEXT;
    }
}

/* Advance the state over literal template text. */
static void scan(struct hstate *st, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        switch (st->m) {
        case M_TEXT:
            if (c == '<')
                st->m = M_TAG_OPEN;
            break;
        case M_TAG_OPEN:
            st->taglen = 0;
            st->tag[0] = '\0';
            st->end_tag = false;
            if (c == '!' && i + 2 < len && s[i + 1] == '-' && s[i + 2] == '-') {
                st->m = M_COMMENT;
                i += 2;
            } else if (c == '!' || c == '?') {
                st->m = M_BOGUS;
            } else if (c == '/') {
                st->end_tag = true;
                st->m = M_TAG_NAME;
            } else if (isalpha((unsigned char)c)) {
                st->m = M_TAG_NAME;
                i--; /* reread as the name's first character */
            } else {
                st->m = M_TEXT;
                i--;
            }
            break;
        case M_TAG_NAME:
            if (is_space(c) || c == '/') {
                st->m = M_TAG;
            } else if (c == '>') {
                tag_closed(st);
            } else if (st->taglen + 1 < sizeof(st->tag)) {
                st->tag[st->taglen++] = (char)tolower((unsigned char)c);
                st->tag[st->taglen] = '\0';
            }
            break;
        case M_TAG:
            if (c == '>') {
                tag_closed(st);
            } else if (!is_space(c) && c != '/') {
                st->m = M_ATTR_NAME;
                st->attrlen = 0;
                st->attr[0] = '\0';
                i--;
            }
            break;
        case M_ATTR_NAME:
        case M_AFTER_NAME:
            if (c == '=') {
                st->m = M_BEFORE_VALUE;
                st->ak = attr_kind(st->attr);
            } else if (c == '>') {
                tag_closed(st);
            } else if (is_space(c) || c == '/') {
                st->m = M_AFTER_NAME;
            } else if (st->m == M_AFTER_NAME) {
                st->m = M_ATTR_NAME; /* a new attribute */
                st->attrlen = 0;
                st->attr[0] = '\0';
                i--;
            } else if (st->attrlen + 1 < sizeof(st->attr)) {
                st->attr[st->attrlen++] = (char)tolower((unsigned char)c);
                st->attr[st->attrlen] = '\0';
            }
            break;
        case M_BEFORE_VALUE:
            st->value_empty = true;
            if (c == '"')
                st->m = M_VALUE_DQ;
            else if (c == '\'')
                st->m = M_VALUE_SQ;
            else if (c == '>')
                tag_closed(st);
            else if (!is_space(c))
                st->m = M_VALUE_UNQ;
            break;
        case M_VALUE_DQ:
        case M_VALUE_SQ:
            if (c == (st->m == M_VALUE_DQ ? '"' : '\''))
                st->m = M_TAG;
            else
                st->value_empty = false;
            break;
        case M_VALUE_UNQ:
            if (is_space(c))
                st->m = M_TAG;
            else if (c == '>')
                tag_closed(st);
            break;
        case M_COMMENT:
            if (c == '>' && i >= 2 && s[i - 1] == '-' && s[i - 2] == '-')
                st->m = M_TEXT;
            break;
        case M_BOGUS:
            if (c == '>')
                st->m = M_TEXT;
            break;
        case M_RAWTEXT: {
            size_t n = strlen(st->rawtag);
            if (c == '<' && i + 1 + n < len && s[i + 1] == '/' &&
                strncasecmp(s + i + 2, st->rawtag, n) == 0) {
                st->m = M_TAG;
                st->end_tag = true;
                snprintf(st->tag, sizeof(st->tag), "%s", st->rawtag);
                i += 1 + n;
            }
            break;
        }
        }
    }
}

static bool same_context(const struct hstate *a, const struct hstate *b)
{
    if (a->m != b->m)
        return false;
    if (a->m == M_VALUE_DQ || a->m == M_VALUE_SQ)
        return a->ak == b->ak;
    return true;
}

/* ---- parse ---- */

enum nkind { N_TEXT, N_VAR, N_RAW, N_SHOW, N_EACH, N_IF, N_UNLESS, N_PARTIAL };

struct node {
    enum nkind kind;
    enum esc esc;
    const char *s; /* text, or the name */
    size_t len;
    int line;
    struct node *child, *alt, *next;
};

struct parser {
    const char *name;
    const char *p, *end, *start;
    struct node *nodes;
    size_t nnodes;
    struct hstate st;
    char err[200];
    int rc;
};

static int line_of(const struct parser *ps, const char *at)
{
    int line = 1;
    for (const char *q = ps->start; q < at; q++)
        line += *q == '\n';
    return line;
}

static void perr(struct parser *ps, const char *at, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void perr(struct parser *ps, const char *at, int rc, const char *fmt, ...)
{
    if (ps->rc)
        return;
    ps->rc = rc;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(ps->err, sizeof(ps->err), "%s:%d: %s", ps->name, line_of(ps, at), msg);
}

static struct node *new_node(struct parser *ps, enum nkind k, const char *at)
{
    if (ps->nnodes >= MAX_NODES) {
        perr(ps, at, -E2BIG, "too many template nodes");
        return NULL;
    }
    struct node *n = &ps->nodes[ps->nnodes++];
    *n = (struct node){.kind = k, .line = 0, .s = at};
    return n;
}

static bool name_ok(const char *s, size_t len)
{
    if (len == 0 || len > MAX_NAME)
        return false;
    if (len == 1 && s[0] == '.')
        return true;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!(isalnum((unsigned char)c) || c == '_' || c == '-' ||
              (c == '.' && i > 0 && i + 1 < len && s[i - 1] != '.') || (c == '@' && i == 0)))
            return false;
    }
    return true;
}

/* Where does this substitution go, and is it allowed there? */
static bool var_context(struct parser *ps, const char *at, bool raw, enum esc *ret)
{
    struct hstate *st = &ps->st;
    switch (st->m) {
    case M_TEXT:
        *ret = E_HTML;
        return true;
    case M_VALUE_DQ:
    case M_VALUE_SQ:
        if (raw)
            break;
        if (st->ak == A_FORBIDDEN) {
            perr(ps, at, -EINVAL, "no substitution allowed in the attribute '%s'", st->attr);
            return false;
        }
        *ret = st->ak == A_URL ? (st->value_empty ? E_URL_START : E_URL_PART) : E_HTML;
        st->value_empty = false;
        return true;
    default:
        break;
    }
    perr(ps, at, -EINVAL, "%s not allowed here (only in HTML text%s)",
         raw ? "raw output is" : "a substitution is", raw ? "" : " or a quoted attribute value");
    return false;
}

/* Parses nodes until a closing tag; returns the list. *ret_close names what ended it:
 * "" (end of input), "else", "/each", "/if", "/unless". */
static struct node *parse_list(struct parser *ps, int depth, const char **ret_close);

static struct node *parse_block(struct parser *ps, enum nkind kind, const char *name, size_t nlen,
                                const char *at, int depth)
{
    struct node *n = new_node(ps, kind, name);
    if (!n)
        return NULL;
    n->len = nlen;
    const char *want = kind == N_EACH ? "/each" : kind == N_IF ? "/if" : "/unless";
    struct hstate before = ps->st;
    const char *close = NULL;
    n->child = parse_list(ps, depth + 1, &close);
    if (ps->rc)
        return NULL;
    struct hstate after_then = ps->st;
    if (strcmp(close, "else") == 0) {
        ps->st = before;
        n->alt = parse_list(ps, depth + 1, &close);
        if (ps->rc)
            return NULL;
        if (!same_context(&after_then, &ps->st)) {
            perr(ps, at, -EINVAL, "the branches of this block end in different HTML contexts");
            return NULL;
        }
    } else if (!same_context(&before, &after_then)) {
        perr(ps, at, -EINVAL, "this block ends in another HTML context than it starts in");
        return NULL;
    }
    if (kind == N_EACH && !same_context(&before, &after_then)) {
        perr(ps, at, -EINVAL, "the body of this each ends in another HTML context");
        return NULL;
    }
    if (strcmp(close, want) != 0) {
        perr(ps, at, -EINVAL, "{{#%s}} is not closed by {{%s}}", want + 1, want);
        return NULL;
    }
    /* A value emitted inside may or may not have been: later ones are not "at the start". */
    if (ps->st.m == M_VALUE_DQ || ps->st.m == M_VALUE_SQ)
        ps->st.value_empty = ps->st.value_empty && before.value_empty;
    return n;
}

static struct node *parse_list(struct parser *ps, int depth, const char **ret_close)
{
    struct node *head = NULL, **tail = &head;
    *ret_close = "";
    if (depth > TC_RENDER_MAX_DEPTH) {
        perr(ps, ps->p, -E2BIG, "blocks nested deeper than %d", TC_RENDER_MAX_DEPTH);
        return NULL;
    }
    while (ps->p < ps->end && !ps->rc) {
        const char *open = memmem(ps->p, (size_t)(ps->end - ps->p), "{{", 2);
        const char *text_end = open ? open : ps->end;
        if (text_end > ps->p) {
            struct node *t = new_node(ps, N_TEXT, ps->p);
            if (!t)
                return NULL;
            t->len = (size_t)(text_end - ps->p);
            scan(&ps->st, t->s, t->len);
            *tail = t;
            tail = &t->next;
        }
        if (!open) {
            ps->p = ps->end;
            break;
        }
        const char *close = memmem(open + 2, (size_t)(ps->end - open - 2), "}}", 2);
        if (!close) {
            perr(ps, open, -EINVAL, "unterminated {{");
            return NULL;
        }
        ps->p = close + 2;
        const char *in = open + 2, *ie = close;
        while (in < ie && is_space(*in))
            in++;
        while (ie > in && is_space(ie[-1]))
            ie--;
        size_t ilen = (size_t)(ie - in);
        if (ilen > 0 && in[0] == '!')
            continue; /* comment */
        struct node *n = NULL;
        if (ilen > 0 && (in[0] == '/' || (ilen == 4 && memcmp(in, "else", 4) == 0))) {
            if (ilen == 4 && memcmp(in, "else", 4) == 0)
                *ret_close = "else";
            else if (ilen == 5 && memcmp(in, "/each", 5) == 0)
                *ret_close = "/each";
            else if (ilen == 3 && memcmp(in, "/if", 3) == 0)
                *ret_close = "/if";
            else if (ilen == 7 && memcmp(in, "/unless", 7) == 0)
                *ret_close = "/unless";
            else {
                perr(ps, open, -EINVAL, "unknown closing tag");
                return NULL;
            }
            if (depth == 0) {
                perr(ps, open, -EINVAL, "{{%.*s}} without an open block", (int)ilen, in);
                return NULL;
            }
            return head;
        }
        enum nkind kind = N_VAR;
        const char *name = in;
        if (ilen > 0 && in[0] == '#') {
            const char *sp = memchr(in, ' ', ilen);
            size_t kw = sp ? (size_t)(sp - in) : ilen;
            if (kw == 5 && memcmp(in, "#each", 5) == 0)
                kind = N_EACH;
            else if (kw == 3 && memcmp(in, "#if", 3) == 0)
                kind = N_IF;
            else if (kw == 7 && memcmp(in, "#unless", 7) == 0)
                kind = N_UNLESS;
            else {
                perr(ps, open, -EINVAL, "unknown block '%.*s'", (int)kw, in);
                return NULL;
            }
            name = sp ? sp + 1 : ie;
        } else if (ilen > 0 && in[0] == '>') {
            kind = N_PARTIAL;
            name = in + 1;
        } else if (ilen > 4 && memcmp(in, "raw ", 4) == 0) {
            kind = N_RAW;
            name = in + 4;
        } else if (ilen > 5 && memcmp(in, "show ", 5) == 0) {
            kind = N_SHOW;
            name = in + 5;
        }
        while (name < ie && is_space(*name))
            name++;
        size_t nlen = (size_t)(ie - name);
        if (!name_ok(name, nlen)) {
            perr(ps, open, -EINVAL, "bad name '%.*s'", (int)(nlen > 64 ? 64 : nlen), name);
            return NULL;
        }
        if (kind == N_EACH || kind == N_IF || kind == N_UNLESS) {
            n = parse_block(ps, kind, name, nlen, open, depth);
        } else {
            n = new_node(ps, kind, name);
            if (n) {
                n->len = nlen;
                if (kind == N_PARTIAL && ps->st.m != M_TEXT)
                    perr(ps, open, -EINVAL, "a partial may only be included in HTML text");
                else if (kind == N_SHOW && ps->st.m != M_TEXT)
                    perr(ps, open, -EINVAL, "show is only allowed in HTML text");
                else if (kind != N_PARTIAL)
                    var_context(ps, open, kind == N_RAW, &n->esc);
            }
        }
        if (!n || ps->rc)
            return NULL;
        n->line = line_of(ps, open);
        *tail = n;
        tail = &n->next;
    }
    return head;
}

/* ---- render ---- */

struct frame {
    const json_t *value;
    long index; /* -1 unless an each element */
};

struct renderer {
    struct tc_buf out;
    struct frame stack[TC_RENDER_MAX_DEPTH * (TC_RENDER_MAX_PARTIALS + 1) + 2];
    int nstack;
    int partials;
    tc_render_lookup lookup;
    void *lookup_cls;
    char err[200];
};

static const json_t *lookup_in(const json_t *v, const char *path, size_t len)
{
    while (v && len > 0) {
        const char *dot = memchr(path, '.', len);
        size_t seg = dot ? (size_t)(dot - path) : len;
        char key[MAX_NAME + 1];
        snprintf(key, sizeof(key), "%.*s", (int)seg, path);
        v = json_is_object(v) ? json_object_get(v, key) : NULL;
        path += seg;
        len -= seg;
        if (len > 0) {
            path++;
            len--;
        }
    }
    return v;
}

static const json_t *resolve(struct renderer *R, const char *name, size_t len, json_t **ret_tmp)
{
    *ret_tmp = NULL;
    if (len == 1 && name[0] == '.')
        return R->stack[R->nstack - 1].value;
    if (name[0] == '@') {
        for (int i = R->nstack - 1; i >= 0; i--)
            if (R->stack[i].index >= 0) {
                long k = R->stack[i].index + (len == 7 && memcmp(name, "@number", 7) == 0);
                if (!(len == 6 && memcmp(name, "@index", 6) == 0) &&
                    !(len == 7 && memcmp(name, "@number", 7) == 0))
                    return NULL;
                *ret_tmp = json_integer(k);
                return *ret_tmp;
            }
        return NULL;
    }
    const char *dot = memchr(name, '.', len);
    size_t first = dot ? (size_t)(dot - name) : len;
    char key[MAX_NAME + 1];
    snprintf(key, sizeof(key), "%.*s", (int)first, name);
    for (int i = R->nstack - 1; i >= 0; i--) {
        const json_t *v = R->stack[i].value;
        if (json_is_object(v) && json_object_get(v, key))
            return lookup_in(v, name, len);
    }
    return NULL;
}

static bool truthy(const json_t *v)
{
    if (!v)
        return false;
    switch (json_typeof(v)) {
    case JSON_NULL:
    case JSON_FALSE:
        return false;
    case JSON_TRUE:
        return true;
    case JSON_INTEGER:
        return json_integer_value(v) != 0;
    case JSON_REAL:
        return json_real_value(v) != 0;
    case JSON_STRING:
        return json_string_length(v) > 0;
    case JSON_ARRAY:
        return json_array_size(v) > 0;
    case JSON_OBJECT:
        return json_object_size(v) > 0;
    }
    return false;
}

static int emit(struct renderer *R, enum nkind kind, enum esc esc, const json_t *v)
{
    char num[48];
    const char *s = "";
    size_t len = 0;
    if (json_is_string(v)) {
        s = json_string_value(v);
        len = json_string_length(v);
    } else if (json_is_integer(v)) {
        len = (size_t)snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        s = num;
    } else if (json_is_real(v)) {
        len = (size_t)snprintf(num, sizeof(num), "%.6g", json_real_value(v));
        s = num;
    } else if (json_is_boolean(v)) {
        s = json_is_true(v) ? "true" : "false";
        len = strlen(s);
    }
    if (kind == N_RAW)
        return tc_buf_append(&R->out, s, len);
    if (kind == N_SHOW)
        return tc_escape_html_visible(&R->out, s, len);
    switch (esc) {
    case E_URL_START:
        return tc_escape_url(&R->out, s, len);
    case E_URL_PART:
        return tc_escape_url_component(&R->out, s, len);
    default:
        return tc_escape_html(&R->out, s, len);
    }
}

static int render_template(struct renderer *R, const char *name, const char *tmpl, size_t len);

static int render_list(struct renderer *R, const struct node *n)
{
    int r = 0;
    for (; n && r == 0; n = n->next) {
        json_t *tmp = NULL;
        switch (n->kind) {
        case N_TEXT:
            r = tc_buf_append(&R->out, n->s, n->len);
            break;
        case N_VAR:
        case N_RAW:
        case N_SHOW:
            r = emit(R, n->kind, n->esc, resolve(R, n->s, n->len, &tmp));
            break;
        case N_IF:
        case N_UNLESS: {
            bool t = truthy(resolve(R, n->s, n->len, &tmp));
            if (n->kind == N_UNLESS)
                t = !t;
            r = render_list(R, t ? n->child : n->alt);
            break;
        }
        case N_EACH: {
            const json_t *arr = resolve(R, n->s, n->len, &tmp);
            if (!json_is_array(arr) || json_array_size(arr) == 0) {
                r = render_list(R, n->alt);
                break;
            }
            if (R->nstack >= (int)TC_ARRAY_SIZE(R->stack)) {
                r = -E2BIG;
                break;
            }
            for (size_t i = 0; i < json_array_size(arr) && r == 0; i++) {
                R->stack[R->nstack++] = (struct frame){json_array_get(arr, i), (long)i};
                r = render_list(R, n->child);
                R->nstack--;
            }
            break;
        }
        case N_PARTIAL: {
            char pname[MAX_NAME + 1];
            snprintf(pname, sizeof(pname), "%.*s", (int)n->len, n->s);
            size_t plen = 0;
            const char *pt = R->lookup ? R->lookup(R->lookup_cls, pname, &plen) : NULL;
            if (!pt) {
                snprintf(R->err, sizeof(R->err), "line %d: no partial named '%s'", n->line, pname);
                r = -EINVAL;
            } else if (R->partials >= TC_RENDER_MAX_PARTIALS) {
                snprintf(R->err, sizeof(R->err), "partials nested deeper than %d",
                         TC_RENDER_MAX_PARTIALS);
                r = -E2BIG;
            } else {
                R->partials++;
                r = render_template(R, pname, pt, plen);
                R->partials--;
            }
            break;
        }
        }
        json_decref(tmp);
    }
    return r;
}

static int render_template(struct renderer *R, const char *name, const char *tmpl, size_t len)
{
    if (len > TC_RENDER_MAX_TEMPLATE) {
        snprintf(R->err, sizeof(R->err), "%s: the template exceeds %u bytes", name,
                 TC_RENDER_MAX_TEMPLATE);
        return -E2BIG;
    }
    struct parser ps = {.name = name, .p = tmpl, .start = tmpl, .end = tmpl + len};
    ps.nodes = calloc(MAX_NODES, sizeof(*ps.nodes));
    if (!ps.nodes)
        return -ENOMEM;
    const char *close = NULL;
    struct node *root = parse_list(&ps, 0, &close);
    if (!ps.rc && ps.st.m != M_TEXT)
        perr(&ps, ps.end, -EINVAL, "the template ends inside a tag, comment or raw text");
    int r = ps.rc;
    if (r == 0) {
        r = render_list(R, root);
        if (r == -E2BIG && !R->err[0])
            snprintf(R->err, sizeof(R->err), "%s: the output exceeds %u bytes", name,
                     TC_RENDER_MAX_OUTPUT);
    } else if (!R->err[0]) {
        snprintf(R->err, sizeof(R->err), "%s", ps.err);
    }
    free(ps.nodes);
    return r;
}

int tc_render_string(const char *name, const char *tmpl, size_t len, const json_t *data,
                     tc_render_lookup lookup, void *lookup_cls, char **ret_out, size_t *ret_len,
                     char **ret_error)
{
    struct renderer *R = calloc(1, sizeof(*R));
    if (!R)
        return -ENOMEM;
    tc_buf_init(&R->out, TC_RENDER_MAX_OUTPUT);
    R->lookup = lookup;
    R->lookup_cls = lookup_cls;
    R->stack[R->nstack++] = (struct frame){data, -1};
    int r = render_template(R, name, tmpl, len);
    if (r == 0) {
        char *out = tc_buf_steal(&R->out, ret_len);
        if (!out)
            r = -ENOMEM;
        else
            *ret_out = out;
    } else if (ret_error) {
        *ret_error = strdup(R->err[0] ? R->err : strerror(-r));
    }
    tc_buf_free(&R->out);
    free(R);
    return r;
}

static const char *embedded_lookup(void *cls, const char *name, size_t *ret_len)
{
    char path[128];
    snprintf(path, sizeof(path), "console/templates/%s.html", name);
    const struct tc_embedded *e = tc_embedded_find(path);
    if (!e)
        return NULL;
    *ret_len = e->len;
    return (const char *)e->data;
}

int tc_render(const char *name, const json_t *data, char **ret_out, size_t *ret_len,
              char **ret_error)
{
    size_t len = 0;
    const char *t = embedded_lookup(NULL, name, &len);
    if (!t) {
        if (ret_error)
            *ret_error = strdup("no such template");
        return -ENOENT;
    }
    return tc_render_string(name, t, len, data, embedded_lookup, NULL, ret_out, ret_len, ret_error);
}
