/* A small HTML template renderer that escapes by context, for the console.
 *
 * Syntax (see docs/console.md):
 *   {{name}} {{a.b}} {{.}}       a value from the data (a jansson object), escaped for where it
 *                                 stands: HTML text, a quoted attribute value, or a URL attribute
 *                                 (href, src, action, ...). At the start of a URL attribute only
 *                                 http:, https: and relative URLs pass (anything else becomes "#");
 *                                 later in a URL attribute the value is percent-encoded.
 *   {{@index}} {{@number}}       position in the innermost {{#each}} (from 0 / from 1)
 *   {{#each list}}..{{else}}..{{/each}}   repeat for each element of an array (else: empty)
 *   {{#if x}}..{{else}}..{{/if}}, {{#unless x}}..{{/unless}}
 *                                 false: missing, null, false, 0, "", [] and {}
 *   {{> name}}                    include console/templates/name.html (in HTML text only)
 *   {{raw x}}                     the value unescaped: the one explicit opt-in (HTML text only)
 *   {{show x}}                    the value escaped, with every character a reader would not see
 *                                 (bidi controls, zero-width and invisible characters, U+2028,
 *                                 tag characters, variation selectors, fillers, controls) shown
 *                                 as a marked "⟪U+202E⟫" and invalid UTF-8 as U+FFFD (HTML text
 *                                 only: code, stdin, file contents)
 *   {{! comment }}
 * Substitutions are refused (a render error, never silent output) inside tags outside a
 * quoted value, in unquoted values, in on* / style / srcdoc / srcset attributes, in
 * <script> / <style> and in comments. The branches of an if, and the body of an each, must
 * end in the HTML context they started in.
 * Caps: output TC_RENDER_MAX_OUTPUT bytes, nesting TC_RENDER_MAX_DEPTH, template size,
 * partial depth; past a cap the render fails with -E2BIG. No I/O, no global state. */
#pragma once
#include <jansson.h>
#include <stddef.h>

#define TC_RENDER_MAX_OUTPUT   (16u << 20)
#define TC_RENDER_MAX_DEPTH    24
#define TC_RENDER_MAX_TEMPLATE (256u << 10)
#define TC_RENDER_MAX_PARTIALS 8

/* Finds a partial's text by name; NULL when there is none. */
typedef const char *(*tc_render_lookup)(void *cls, const char *name, size_t *ret_len);

/* Render a template given as text. 0 and *ret_out (malloc'ed, NUL-terminated, length in
 * *ret_len), or -EINVAL (template error), -E2BIG (a cap), -ENOMEM; on error *ret_error (may
 * be NULL) gets a one-line message "name:line: what" (caller frees). */
int tc_render_string(const char *name, const char *tmpl, size_t len, const json_t *data,
                     tc_render_lookup lookup, void *lookup_cls, char **ret_out, size_t *ret_len,
                     char **ret_error);

/* Render console/templates/<name>.html from the embedded files; partials likewise. */
int tc_render(const char *name, const json_t *data, char **ret_out, size_t *ret_len,
              char **ret_error);

/* The escapers, exported for the few places that build markup in C and for tests.
 * 0 or -E2BIG/-ENOMEM from the buffer. */
struct tc_buf;
int tc_escape_html(struct tc_buf *b, const char *s, size_t len);
/* tc_escape_html, and each hidden character (prescreen_unicode.h) as
 * <span class="uc uc-KIND" title="U+XXXX NAME">⟪U+XXXX⟫</span> (unusual spaces as themselves
 * inside such a span); bytes that are not UTF-8 as U+FFFD. The raw character never appears. */
int tc_escape_html_visible(struct tc_buf *b, const char *s, size_t len);
/* A URL that starts an attribute value: http(s) and relative URLs, else "#"; HTML-escaped. */
int tc_escape_url(struct tc_buf *b, const char *s, size_t len);
/* Percent-encode every byte outside [A-Za-z0-9-._~]. */
int tc_escape_url_component(struct tc_buf *b, const char *s, size_t len);
