/* console/render.c: context-aware escaping, blocks, caps, and templates it must refuse. */
#include <errno.h>
#include <string.h>

#include "common/buf.h"
#include "console/render.h"
#include "tap.h"

static const char *partials[][2] = {
    {"head", "<h1>{{title}}</h1>"},
    {"loop", "{{> loop}}"},
    {"attr", "<a href=\"{{u}}\">x</a>"},
};

static const char *lookup(void *cls, const char *name, size_t *ret_len)
{
    for (size_t i = 0; i < sizeof(partials) / sizeof(partials[0]); i++)
        if (strcmp(partials[i][0], name) == 0) {
            *ret_len = strlen(partials[i][1]);
            return partials[i][1];
        }
    return NULL;
}

/* Render tmpl with data given as JSON text; returns the output (static) or NULL. */
static char out_buf[1 << 16];
static int last_rc;
static const char *R(const char *tmpl, const char *data_json)
{
    json_t *data = json_loads(data_json ? data_json : "{}", JSON_ALLOW_NUL, NULL);
    char *out = NULL, *err = NULL;
    size_t len = 0;
    last_rc = tc_render_string("t", tmpl, strlen(tmpl), data, lookup, NULL, &out, &len, &err);
    json_decref(data);
    if (last_rc < 0) {
        free(err);
        return NULL;
    }
    snprintf(out_buf, sizeof(out_buf), "%s", out);
    free(out);
    return out_buf;
}

static bool eq(const char *got, const char *want)
{
    if (got && strcmp(got, want) == 0)
        return true;
    fprintf(stderr, "    got:  %s\n    want: %s\n", got ? got : "(error)", want);
    return false;
}

TEST(text_is_escaped)
{
    CHECK(eq(R("<p>{{x}}</p>", "{\"x\":\"<img src=x onerror=alert(1)>\"}"),
             "<p>&lt;img src=x onerror=alert(1)&gt;</p>"));
    CHECK(eq(R("<p>{{x}}</p>", "{\"x\":\"\\\"><script>alert(1)</script>&'`\"}"),
             "<p>&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#39;&#96;</p>"));
    CHECK(eq(R("<textarea>{{x}}</textarea>", "{\"x\":\"</textarea><script>x</script>\"}"),
             "<textarea>&lt;/textarea&gt;&lt;script&gt;x&lt;/script&gt;</textarea>"));
    /* a NUL never reaches the page */
    CHECK(eq(R("{{x}}", "{\"x\":\"a\\u0000b\"}"), "a\xef\xbf\xbd"
                                                  "b"));
    /* template syntax inside data is data */
    CHECK(eq(R("{{x}}", "{\"x\":\"{{y}}\",\"y\":\"no\"}"), "{{y}}"));
}

TEST(values_and_paths)
{
    CHECK(
        eq(R("{{a.b.c}}|{{n}}|{{f}}|{{t}}|{{z}}|{{missing}}|{{o}}",
             "{\"a\":{\"b\":{\"c\":\"deep\"}},\"n\":42,\"f\":1.5,\"t\":true,\"z\":null,\"o\":{}}"),
           "deep|42|1.5|true|||"));
}

TEST(attributes_are_escaped)
{
    CHECK(eq(R("<td title=\"{{x}}\">", "{\"x\":\"\\\" onmouseover=\\\"alert(1)\"}"),
             "<td title=\"&quot; onmouseover=&quot;alert(1)\">"));
    CHECK(eq(R("<td title='{{x}}'>", "{\"x\":\"' onmouseover='alert(1)\"}"),
             "<td title='&#39; onmouseover=&#39;alert(1)'>"));
}

TEST(urls_at_the_start_allow_only_http_and_relative)
{
    const char *bad[] = {"javascript:alert(1)",
                         "JaVaScRiPt:alert(1)",
                         " javascript:alert(1)",
                         "java\\tscript:alert(1)",
                         "java\\nscript:alert(1)",
                         "data:text/html,<script>",
                         "vbscript:x",
                         "\\u0001javascript:x",
                         "file:///etc/passwd"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char data[256];
        snprintf(data, sizeof(data), "{\"u\":\"%s\"}", bad[i]);
        CHECK(eq(R("<a href=\"{{u}}\">x</a>", data), "<a href=\"#\">x</a>"));
    }
    CHECK(eq(R("<a href=\"{{u}}\">", "{\"u\":\"https://example.com/a?b=1&c=2\"}"),
             "<a href=\"https://example.com/a?b=1&amp;c=2\">"));
    CHECK(eq(R("<a href=\"{{u}}\">", "{\"u\":\"/console/x?y=\\\"z\"}"),
             "<a href=\"/console/x?y=&quot;z\">"));
    CHECK(eq(R("<a href=\"{{u}}\">", "{\"u\":\"a/b:c\"}"), "<a href=\"a/b:c\">"));
    /* an entity in data stays text: the browser sees "&#x61;", not "a" */
    CHECK(eq(R("<a href=\"{{u}}\">", "{\"u\":\"jav&#x61;script:x\"}"),
             "<a href=\"jav&amp;#x61;script:x\">"));
    CHECK(eq(R("<form action=\"{{u}}\">", "{\"u\":\"javascript:x\"}"), "<form action=\"#\">"));
    CHECK(eq(R("<img src=\"{{u}}\">", "{\"u\":\"javascript:x\"}"), "<img src=\"#\">"));
    /* through a partial too */
    CHECK(eq(R("{{> attr}}", "{\"u\":\"javascript:x\"}"), "<a href=\"#\">x</a>"));
}

TEST(urls_in_the_middle_are_percent_encoded)
{
    CHECK(eq(
        R("<a href=\"/console/audit?q={{q}}&amp;x=1\">", "{\"q\":\"javascript:alert(1) \\\"&<\"}"),
        "<a href=\"/console/audit?q=javascript%3Aalert%281%29%20%22%26%3C&amp;x=1\">"));
    CHECK(eq(R("<a href=\"/e/{{id}}\">", "{\"id\":\"../../x\"}"), "<a href=\"/e/..%2F..%2Fx\">"));
    /* a value after another one is not at the start */
    CHECK(eq(R("<a href=\"{{a}}{{b}}\">", "{\"a\":\"\",\"b\":\"javascript:x\"}"),
             "<a href=\"javascript%3Ax\">"));
    CHECK(eq(R("<a href=\"{{#if a}}/x{{/if}}{{b}}\">", "{\"a\":false,\"b\":\"javascript:x\"}"),
             "<a href=\"javascript%3Ax\">"));
}

TEST(substitutions_refused_where_unsafe)
{
    const char *bad[] = {
        "<a {{x}}>",                 /* attribute name position */
        "<a href={{x}}>",            /* unquoted value */
        "<a onclick=\"{{x}}\">",     /* event handler */
        "<a style=\"{{x}}\">",       /* CSS */
        "<iframe srcdoc=\"{{x}}\">", /* HTML in an attribute */
        "<script>var a = {{x}};</script>",
        "<style>{{x}}</style>",
        "<!-- {{x}} -->",
        "<a href=\"{{raw x}}\">", /* raw only in text */
        "<{{x}}>",
        "<div",                          /* ends inside a tag */
        "{{#if a}}<a href=\"{{/if}}\">", /* branch changes context */
        "{{#each l}}<b title=\"{{/each}}\">",
        "{{#if a}}x", /* unclosed */
        "{{/if}}",
        "{{#if a}}x{{/each}}",
        "{{#bogus a}}{{/bogus}}",
        "{{x",
        "{{bad name}}",
        "{{a..b}}",
        "{{}}",
        "<a title=\"{{> head}}\">", /* partial inside an attribute */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *got = R(bad[i], "{\"x\":\"1\",\"a\":true,\"l\":[1]}");
        if (got) {
            fprintf(stderr, "    accepted: %s -> %s\n", bad[i], got);
            CHECK(!got);
        } else {
            CHECK(last_rc == -EINVAL || last_rc == -E2BIG);
        }
    }
    /* after </script> substitutions work again */
    CHECK(eq(R("<script src=\"/a.js\"></script><p>{{x}}</p>", "{\"x\":\"<\"}"),
             "<script src=\"/a.js\"></script><p>&lt;</p>"));
}

TEST(blocks)
{
    CHECK(eq(R("{{#each l}}[{{@index}}/{{@number}}:{{.}}]{{else}}none{{/each}}",
               "{\"l\":[\"a\",\"<\"]}"),
             "[0/1:a][1/2:&lt;]"));
    CHECK(eq(R("{{#each l}}x{{else}}none{{/each}}", "{\"l\":[]}"), "none"));
    CHECK(eq(R("{{#each l}}x{{else}}none{{/each}}", "{\"l\":\"not a list\"}"), "none"));
    CHECK(eq(R("{{#each l}}{{n}}{{top}}{{/each}}", "{\"top\":\"T\",\"l\":[{\"n\":1},{\"n\":2}]}"),
             "1T2T"));
    CHECK(eq(R("{{#if a}}y{{else}}n{{/if}}{{#unless a}}u{{/unless}}", "{\"a\":0}"), "nu"));
    CHECK(eq(R("{{#if a}}y{{else}}n{{/if}}", "{\"a\":\"x\"}"), "y"));
    CHECK(eq(R("{{#if a}}y{{else}}n{{/if}}", "{\"a\":[]}"), "n"));
    CHECK(
        eq(R("<tr class=\"{{#if f}}flagged{{/if}}\">", "{\"f\":true}"), "<tr class=\"flagged\">"));
    CHECK(eq(R("{{! a comment }}ok", "{}"), "ok"));
    CHECK(eq(R("{{> head}}", "{\"title\":\"<b>\"}"), "<h1>&lt;b&gt;</h1>"));
    CHECK(eq(R("<!DOCTYPE html><p>{{x}}</p>", "{\"x\":\"&\"}"), "<!DOCTYPE html><p>&amp;</p>"));
}

TEST(raw_is_explicit)
{
    CHECK(eq(R("<div>{{raw x}}</div>", "{\"x\":\"<b>ok</b>\"}"), "<div><b>ok</b></div>"));
}

TEST(caps_hold)
{
    /* nesting */
    struct tc_buf b;
    tc_buf_init(&b, 1 << 20);
    for (int i = 0; i < 100; i++)
        CHECK(tc_buf_appendf(&b, "{{#if a}}") == 0);
    for (int i = 0; i < 100; i++)
        CHECK(tc_buf_appendf(&b, "{{/if}}") == 0);
    CHECK(R(b.data, "{\"a\":true}") == NULL && last_rc == -E2BIG);
    tc_buf_free(&b);
    /* self-including partial */
    CHECK(R("{{> loop}}", "{}") == NULL && last_rc == -E2BIG);
    CHECK(R("{{> nosuch}}", "{}") == NULL && last_rc == -EINVAL);
    /* output: a 1 MiB string of quotes repeated blows the 16 MiB cap */
    size_t n = 1 << 20;
    char *big = malloc(n + 1);
    memset(big, '"', n);
    big[n] = '\0';
    json_t *d = json_pack("{s:s, s:[iiiiii]}", "x", big, "l", 1, 2, 3, 4, 5, 6);
    char *out = NULL, *err = NULL;
    size_t len;
    const char *t = "{{#each l}}{{x}}{{x}}{{x}}{{/each}}";
    int r = tc_render_string("big", t, strlen(t), d, NULL, NULL, &out, &len, &err);
    CHECK(r == -E2BIG && out == NULL && err != NULL);
    free(err);
    json_decref(d);
    free(big);
    /* template size */
    char *huge = malloc(TC_RENDER_MAX_TEMPLATE + 2);
    memset(huge, 'a', TC_RENDER_MAX_TEMPLATE + 1);
    huge[TC_RENDER_MAX_TEMPLATE + 1] = '\0';
    CHECK(R(huge, "{}") == NULL && last_rc == -E2BIG);
    free(huge);
    /* many nodes */
    tc_buf_init(&b, 1 << 20);
    for (int i = 0; i < 10000; i++)
        CHECK(tc_buf_appendf(&b, "{{x}}") == 0);
    CHECK(R(b.data, "{}") == NULL && last_rc == -E2BIG);
    tc_buf_free(&b);
}

TEST(escaper_functions)
{
    struct tc_buf b;
    tc_buf_init(&b, 1024);
    CHECK(tc_escape_url_component(&b, "a b/é", strlen("a b/é")) == 0);
    CHECK(eq(b.data, "a%20b%2F%C3%A9"));
    tc_buf_reset(&b);
    CHECK(tc_escape_url(&b, "?q=1", 4) == 0 && eq(b.data, "?q=1"));
    tc_buf_reset(&b);
    CHECK(tc_escape_url(&b, "#L3", 3) == 0 && eq(b.data, "#L3"));
    tc_buf_free(&b);
}

/* {{show x}}: what a reader would not see becomes visible; nothing raw, nothing executable. */
TEST(show_makes_hidden_characters_visible)
{
    /* Trojan Source: RLO ... LRI ... PDI around a comment */
    const char *trojan = "{\"x\":\"if a != 'none\\u202e \\u2066# admin\\u2069 \\u2066':\"}";
    const char *out = R("<code>{{show x}}</code>", trojan);
    CHECK(out != NULL);
    if (out) {
        CHECK(strstr(out, "\xe2\x80\xae") == NULL && strstr(out, "\xe2\x81\xa6") == NULL &&
              strstr(out, "\xe2\x81\xa9") == NULL);
        CHECK(strstr(out, "<span class=\"uc uc-bidi\" title=\"U+202E RIGHT-TO-LEFT OVERRIDE\">"
                          "\xe2\x9f\xaaU+202E\xe2\x9f\xab</span>") != NULL);
        CHECK(strstr(out, "\xe2\x9f\xaaU+2066\xe2\x9f\xab") &&
              strstr(out, "\xe2\x9f\xaaU+2069\xe2\x9f\xab"));
        CHECK(strstr(out, "&#39;none") != NULL); /* still escaped around the markers */
    }
    /* zero-width, tags, Hangul filler, line separator, variation selector, soft hyphen, BOM */
    static const struct {
        const char *json, *marker, *kind;
    } cases[] = {
        {"is\\u200bAdmin", "U+200B", "invisible"}, {"x\\udb40\\udc41y", "U+E0041", "tag"},
        {"a\\u3164b", "U+3164", "filler"},         {"a\\u2028b", "U+2028", "separator"},
        {"a\\ufe01b", "U+FE01", "variation"},      {"ad\\u00admin", "U+00AD", "invisible"},
        {"\\ufeffx", "U+FEFF", "invisible"},       {"a\\u001bb", "U+001B", "control"},
        {"a\\u200fb", "U+200F", "mark"},           {"a\\u0085b", "U+0085", "separator"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char data[128], want_m[64], want_c[64];
        snprintf(data, sizeof(data), "{\"x\":\"%s\"}", cases[i].json);
        snprintf(want_m, sizeof(want_m), "\xe2\x9f\xaa%s\xe2\x9f\xab", cases[i].marker);
        snprintf(want_c, sizeof(want_c), "class=\"uc uc-%s\"", cases[i].kind);
        out = R("{{show x}}", data);
        bool ok = out && strstr(out, want_m) && strstr(out, want_c);
        if (!ok)
            fprintf(stderr, "    %s -> %s\n", cases[i].json, out ? out : "(error)");
        CHECK(ok);
    }
    /* an unusual space stays a space, highlighted */
    CHECK(eq(R("{{show x}}", "{\"x\":\"a\\u00a0b\"}"),
             "a<span class=\"uc uc-space\" title=\"U+00A0 NO-BREAK SPACE\">\xc2\xa0</span>b"));
    /* ordinary text is unchanged: tabs, CRLF, accents, emoji */
    CHECK(eq(R("{{show x}}", "{\"x\":\"\\tcaf\\u00e9 \\ud83d\\ude00\\r\\n\"}"),
             "\tcaf\xc3\xa9 \xf0\x9f\x98\x80\r\n"));
    /* a lone CR (which hides the start of a line on terminals) is marked */
    out = R("{{show x}}", "{\"x\":\"safe\\rrm -rf /\"}");
    CHECK(out && strstr(out, "U+000D") != NULL);
    /* markup in the value stays text */
    CHECK(eq(R("{{show x}}", "{\"x\":\"<script>\\u202e</script>\"}"),
             "&lt;script&gt;<span class=\"uc uc-bidi\" title=\"U+202E RIGHT-TO-LEFT OVERRIDE\">"
             "\xe2\x9f\xaaU+202E\xe2\x9f\xab</span>&lt;/script&gt;"));
    /* NUL and bytes that are not UTF-8 never reach the page raw */
    out = R("{{show x}}", "{\"x\":\"a\\u0000b\"}");
    CHECK(out && strstr(out, "U+0000") != NULL);
    struct tc_buf b;
    tc_buf_init(&b, 1 << 16);
    CHECK(tc_escape_html_visible(&b, "a\xff\xc3(b", 5) == 0);
    CHECK(b.data && strcmp(b.data, "a\xef\xbf\xbd\xef\xbf\xbd(b") == 0);
    tc_buf_free(&b);
    /* a run of one character is one marker with a count; a flood stays bounded */
    CHECK(eq(R("{{show x}}", "{\"x\":\"a\\u200b\\u200b\\u200bb\"}"),
             "a<span class=\"uc uc-invisible\" title=\"U+200B ZERO WIDTH SPACE\">"
             "\xe2\x9f\xaaU+200B\xe2\x9f\xab\xc3\x97"
             "3</span>b"));
    tc_buf_init(&b, 16u << 20);
    struct tc_buf in;
    tc_buf_init(&in, 4u << 20);
    for (int i = 0; i < 150000; i++) /* alternating: no runs to collapse */
        CHECK(tc_buf_append(&in, i & 1 ? "\xe2\x80\x8b" : "\xe2\x80\x8c", 3) == 0);
    CHECK(tc_escape_html_visible(&b, in.data, in.len) == 0);
    CHECK(b.len < 3u << 20); /* 4096 spans, then "⟪U+200B⟫" text: a few MB, not 20 */
    CHECK(strstr(b.data, "\xe2\x80\x8b") == NULL && strstr(b.data, "\xe2\x80\x8c") == NULL);
    CHECK(strstr(b.data + b.len - 40, "\xe2\x9f\xaaU+200") != NULL); /* still marked at the end */
    tc_buf_free(&in);
    tc_buf_free(&b);
    /* only in HTML text: never in an attribute, never raw */
    CHECK(R("<a title=\"{{show x}}\">", "{\"x\":\"a\"}") == NULL && last_rc == -EINVAL);
    CHECK(R("<a {{show x}}>", "{\"x\":\"a\"}") == NULL);
    CHECK(R("<script>{{show x}}</script>", "{\"x\":\"a\"}") == NULL);
}

int main(void)
{
    RUN(text_is_escaped);
    RUN(values_and_paths);
    RUN(attributes_are_escaped);
    RUN(urls_at_the_start_allow_only_http_and_relative);
    RUN(urls_in_the_middle_are_percent_encoded);
    RUN(substitutions_refused_where_unsafe);
    RUN(blocks);
    RUN(raw_is_explicit);
    RUN(caps_hold);
    RUN(escaper_functions);
    RUN(show_makes_hidden_characters_visible);
    return TAP_DONE();
}
