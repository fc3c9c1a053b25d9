/* Pre-screening of a whole execute request: the code, every file of files[] (decoded), and
 * stdin where it runs as a program. See tc_prescreen_request() in prescreen.h. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "policy/prescreen.h"

/* ---- which language a file or stdin is ---- */

static const char *lang_of_interp(const char *base)
{
    static const char *const shells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", NULL};
    if (strncmp(base, "python", 6) == 0)
        return "python";
    if (strcmp(base, "node") == 0 || strcmp(base, "nodejs") == 0)
        return "javascript";
    for (size_t i = 0; shells[i]; i++)
        if (strcmp(base, shells[i]) == 0)
            return "shell";
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* By name (.py .sh .js ...), then by the #! line ("#!/usr/bin/env python3"), else NULL. */
static const char *lang_of_file(const char *path, const char *text, size_t len)
{
    static const struct {
        const char *ext, *lang;
    } exts[] = {{".py", "python"},      {".pyw", "python"},     {".pyi", "python"},
                {".sh", "shell"},       {".bash", "shell"},     {".zsh", "shell"},
                {".ksh", "shell"},      {".bats", "shell"},     {".js", "javascript"},
                {".mjs", "javascript"}, {".cjs", "javascript"}, {".jsx", "javascript"},
                {".ts", "javascript"},  {".mts", "javascript"}, {".cts", "javascript"}};
    const char *dot = strrchr(base_name(path), '.');
    for (size_t i = 0; dot && i < TC_ARRAY_SIZE(exts); i++)
        if (strcmp(dot, exts[i].ext) == 0)
            return exts[i].lang;
    if (len > 2 && text[0] == '#' && text[1] == '!') {
        /* "/usr/bin/env -S python3 -u" -> python3; "/bin/bash -e" -> bash */
        size_t k = 2;
        while (k < len && text[k] != '\n') {
            while (k < len && (text[k] == ' ' || text[k] == '\t'))
                k++;
            size_t st = k;
            while (k < len && text[k] != ' ' && text[k] != '\t' && text[k] != '\n')
                k++;
            char word[128];
            if (k == st || k - st >= sizeof(word))
                break;
            memcpy(word, text + st, k - st);
            word[k - st] = '\0';
            const char *b = base_name(word);
            if (strcmp(b, "env") == 0 || word[0] == '-')
                continue;
            return lang_of_interp(b);
        }
    }
    return NULL;
}

/* ---- does stdin run as a program? ---- */

/* The tool's command reads its program from stdin: an interpreter with "-", "-s" or
 * /dev/stdin, or with no program operand at all ("bash", "python3 -u"). */
static const char *stdin_lang_by_command(const struct tc_tool *tool)
{
    if (!tool || tool->ncommand == 0)
        return NULL;
    const char *lang = lang_of_interp(base_name(tool->command[0]));
    if (!lang)
        return NULL;
    bool shell = strcmp(lang, "shell") == 0;
    for (size_t i = 1; i < tool->ncommand; i++) {
        const char *a = tool->command[i];
        if (strcmp(a, "-") == 0 || strcmp(a, "/dev/stdin") == 0 || (shell && strcmp(a, "-s") == 0))
            return lang;
        /* -c PROGRAM, -e PROGRAM, -m MODULE, a script: the program is not stdin */
        if (strcmp(a, "-c") == 0 || strcmp(a, "-e") == 0 || strcmp(a, "-m") == 0 ||
            strcmp(a, "-p") == 0 || strcmp(a, "--eval") == 0 || strcmp(a, "--print") == 0)
            return NULL;
        if (a[0] != '-')
            return NULL;
    }
    return lang;
}

/* Code that hands its stdin to an interpreter: `bash`, `sh -s`, `python3 -`, `cat | sh`,
 * `. /dev/stdin`, `eval "$(cat)"`; exec(sys.stdin.read()), exec(input()), os.system("sh");
 * eval(fs.readFileSync(0)), spawn("sh", {stdio: "inherit"}). The language it runs stdin as. */
struct stdin_pattern {
    const char *code_lang; /* the language of the code the pattern is for */
    const char *runs_as;   /* the language stdin is then */
    const char *re;
};

#define SH_CMD "(?:^|[;&|(`{]|\\$\\(|\\bthen|\\bdo|\\belse|\\bexec|\\bsudo|\\bcommand)\\s*"
#define SH_END "\\s*(?:$|[;&|)#`}])"
static const struct stdin_pattern stdin_patterns[] = {
    {"shell", "shell",
     SH_CMD "(?:/usr)?(?:/bin/)?(?:ba|da|z|k|mk)?sh(?:\\s+-[a-zA-Z]*[si][a-zA-Z]*|\\s+-|\\s+--)*"
            "(?:\\s+-[a-zA-Z]*[el][a-zA-Z]*)*" SH_END "|" SH_CMD
            "(?:\\.|source)\\s+(?:/dev/stdin|/dev/fd/0|/proc/self/fd/0|-)" SH_END
            "|\\beval\\s+\"?\\$\\(\\s*cat\\s*(?:-\\s*)?\\)"
            "|" SH_CMD "\\$\\(\\s*cat\\s*\\)"
            "|\\bread\\s+(?:-r\\s+)?(\\w+)\\s*(?:;|\\n)[^\\n]*\\beval\\s+\"?\\$\\{?\\1\\b"},
    {"shell", "python",
     SH_CMD "(?:/usr/bin/)?python[23]?(?:\\.\\d+)?(?:\\s+-[a-zA-Z]+)*(?:\\s+-)?" SH_END},
    {"shell", "javascript", SH_CMD "(?:/usr/bin/)?node(?:js)?(?:\\s+-)?" SH_END},
    {"python", "python",
     "\\b(?:exec|eval|compile)\\s*\\(\\s*(?:sys\\.stdin|input\\s*\\(|open\\s*\\(\\s*(?:0\\b|[\"']/"
     "dev/"
     "stdin)|io\\.open\\s*\\(\\s*0\\b|os\\.read\\s*\\(\\s*0\\b)"},
    {"python", "shell",
     "\\b(?:os\\.(?:system|popen|exec\\w*|spawn\\w*)|subprocess\\.\\w+|pty\\.spawn|commands\\.\\w+)"
     "\\s*\\(\\s*\\[?\\s*[\"'](?:/usr)?(?:/bin/)?(?:ba|da|z|k)?sh(?:\\s+-s)?[\"']\\s*[\\]),]"},
    {"python", "python",
     "\\b(?:os\\.(?:system|popen|exec\\w*)|subprocess\\.\\w+)\\s*\\(\\s*\\[?\\s*[\"'](?:/usr/bin/)?"
     "python[23]?(?:\\s+-)?[\"']\\s*[\\]),]"},
    {"javascript", "javascript",
     "\\b(?:eval|Function|runInThisContext|runInNewContext|runInContext)\\s*\\([^;\\n]*(?:"
     "readFileSync\\s*\\(\\s*(?:0\\b|[\"']/dev/stdin)|process\\.stdin)"},
    {"javascript", "shell",
     "\\b(?:exec|execSync|spawn|spawnSync|execFile|execFileSync)\\s*\\(\\s*[\"'](?:/usr)?(?:/bin/)?"
     "(?:ba|da|z|k)?sh(?:\\s+-s)?[\"']\\s*[,)][^\\n]*(?:inherit|process\\.stdin)"},
};

static pcre2_code *stdin_re[TC_ARRAY_SIZE(stdin_patterns)];
static pthread_once_t stdin_once = PTHREAD_ONCE_INIT;

static void compile_stdin_patterns(void)
{
    for (size_t i = 0; i < TC_ARRAY_SIZE(stdin_patterns); i++) {
        int err;
        PCRE2_SIZE off;
        stdin_re[i] = pcre2_compile((PCRE2_SPTR)stdin_patterns[i].re, PCRE2_ZERO_TERMINATED,
                                    PCRE2_MULTILINE, &err, &off, NULL);
        if (stdin_re[i] && tc_prescreen_jit())
            (void)pcre2_jit_compile(stdin_re[i], PCRE2_JIT_COMPLETE);
    }
}

static const char *stdin_lang_by_code(const char *lang, const char *code, size_t len)
{
    const char *found = NULL;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pthread_once(&stdin_once, compile_stdin_patterns);
    if (!lang || !code || !(md = pcre2_match_data_create(4, NULL)))
        return NULL;
    if (!(mc = pcre2_match_context_create(NULL))) {
        pcre2_match_data_free(md);
        return NULL;
    }
    pcre2_set_match_limit(mc, 200000);
    pcre2_set_depth_limit(mc, 2000);
    for (size_t i = 0; i < TC_ARRAY_SIZE(stdin_patterns) && !found; i++)
        if (stdin_re[i] && strcmp(stdin_patterns[i].code_lang, lang) == 0 &&
            pcre2_match(stdin_re[i], (PCRE2_SPTR)code, len, 0, 0, md, mc) >= 0)
            found = stdin_patterns[i].runs_as;
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    return found;
}

const char *tc_prescreen_stdin_language(const struct tc_tool *tool, const char *code, size_t len)
{
    const char *lang = tc_prescreen_language(tool);
    const char *by_cmd = stdin_lang_by_command(tool);
    if (by_cmd)
        return strcmp(lang, "other") && strcmp(lang, "none") ? lang : by_cmd;
    return stdin_lang_by_code(lang, code, len);
}

/* ---- binary files ---- */

/* A compiled program or bytecode, by its magic number: what it does cannot be screened. */
static const char *executable_kind(const unsigned char *b, size_t n)
{
    if (n >= 4 && memcmp(b,
                         "\x7f"
                         "ELF",
                         4) == 0)
        return "an ELF executable or library";
    if (n >= 4 && (memcmp(b, "\xfe\xed\xfa\xce", 4) == 0 || memcmp(b, "\xfe\xed\xfa\xcf", 4) == 0 ||
                   memcmp(b, "\xce\xfa\xed\xfe", 4) == 0 || memcmp(b, "\xcf\xfa\xed\xfe", 4) == 0))
        return "a Mach-O executable";
    if (n >= 4 && memcmp(b, "\xca\xfe\xba\xbe", 4) == 0)
        return "a Java class or universal binary";
    if (n >= 2 && b[0] == 'M' && b[1] == 'Z')
        return "a Windows executable";
    if (n >= 4 && memcmp(b, "\0asm", 4) == 0)
        return "a WebAssembly module";
    if (n >= 16 && b[2] == '\r' && b[3] == '\n' && b[1] < 0x10 && b[0] != 0)
        return "Python bytecode (.pyc)";
    return NULL;
}

static bool archive(const unsigned char *b, size_t n)
{
    return (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0) ||
           (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) ||
           (n >= 6 && memcmp(b,
                             "\xfd"
                             "7zXZ\0",
                             6) == 0) ||
           (n >= 3 && memcmp(b, "BZh", 3) == 0) ||
           (n >= 6 && memcmp(b, "7z\xbc\xaf\x27\x1c", 6) == 0) ||
           (n >= 262 && memcmp(b + 257, "ustar", 5) == 0) ||
           (n >= 4 && memcmp(b, "\x28\xb5\x2f\xfd", 4) == 0);
}

static json_t *finding(const char *rule, const char *sev, const char *message, const char *excerpt)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:s, s:s}", "rule", rule, "severity", sev, "line", 1,
                     "column", 1, "excerpt", excerpt, "message", message);
}

/* ---- the request ---- */

/* Append the findings of one source, tagged. */
static int add_all(json_t *all, json_t *found, const char *source, const char *path)
{
    size_t i;
    json_t *x;
    json_array_foreach(found, i, x)
    {
        if (json_object_set_new(x, "source", json_string(source)) < 0 ||
            (path && json_object_set_new(x, "path", json_string(path)) < 0) ||
            json_array_append(all, x) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Data read from stdin is screened too, but only as a hint: findings in it are capped at
 * "low" (nothing runs it as code as far as the pre-screen can tell). */
static void cap_low(json_t *found)
{
    size_t i;
    json_t *x;
    json_array_foreach(found, i, x)
    {
        json_object_set_new(x, "severity", json_string("low"));
        const char *m = json_string_value(json_object_get(x, "message"));
        char msg[512];
        snprintf(msg, sizeof(msg), "%s (in standard input, which is read as data)", m ? m : "");
        json_object_set_new(x, "message", json_string(msg));
    }
}

static int sev_rank(json_t *x)
{
    static const char *const s[] = {"low", "medium", "high", "critical"};
    const char *v = json_string_value(json_object_get(x, "severity"));
    for (int k = 0; k < 4 && v; k++)
        if (strcmp(v, s[k]) == 0)
            return k;
    return 0;
}

/* More than TC_PRESCREEN_MAX_FINDINGS: keep the most severe (then the earliest in request
 * order), so that what decides the action is never the part that was cut. */
static json_t *cap_findings(json_t *all)
{
    size_t n = json_array_size(all);
    if (n <= TC_PRESCREEN_MAX_FINDINGS)
        return all;
    json_t *kept = json_array();
    if (!kept) {
        json_decref(all);
        return NULL;
    }
    int counts[4] = {0, 0, 0, 0}, floor = 0;
    size_t i, room = TC_PRESCREEN_MAX_FINDINGS, above = 0;
    json_t *x;
    json_array_foreach(all, i, x) counts[sev_rank(x)]++;
    for (floor = 3; floor > 0 && above + (size_t)counts[floor] < room; floor--)
        above += (size_t)counts[floor];
    size_t at_floor = room - above; /* how many of the floor severity still fit */
    json_array_foreach(all, i, x)
    {
        int s = sev_rank(x);
        if (s > floor || (s == floor && at_floor > 0)) {
            if (s == floor)
                at_floor--;
            json_array_append(kept, x);
        }
    }
    json_decref(all);
    return kept;
}

int tc_prescreen_request(const struct tc_tool *tool, const json_t *body, json_t **ret_findings)
{
    const char *lang = tc_prescreen_language(tool);
    json_t *all = json_array(), *found = NULL;
    const json_t *code = json_object_get(body, "code"), *in = json_object_get(body, "stdin");
    const char *c = json_string_value(code);
    size_t clen = json_string_length(code);
    unsigned char *bin = NULL;
    int r = -ENOMEM;

    if (!all)
        return -ENOMEM;
    if (strcmp(lang, "none") == 0)
        goto done; /* the operator turned the pre-screen off for this tool */

    /* the code */
    if ((r = tc_prescreen(lang, c, clen, &found)) < 0 ||
        (r = add_all(all, found, "code", NULL)) < 0)
        goto out;
    json_decref(found);
    found = NULL;

    /* stdin: as a program where something runs it, else as data (hints only) */
    if (json_string_length(in) > 0) {
        const char *slang = tc_prescreen_stdin_language(tool, c, clen);
        if ((r = tc_prescreen(slang ? slang : lang, json_string_value(in), json_string_length(in),
                              &found)) < 0)
            goto out;
        if (!slang)
            cap_low(found);
        if ((r = add_all(all, found, "stdin", NULL)) < 0)
            goto out;
        json_decref(found);
        found = NULL;
    }

    /* every file, decoded */
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(body, "files"), i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        const char *enc = json_string_value(json_object_get(f, "encoding"));
        json_t *content = json_object_get(f, "content");
        const char *text = json_string_value(content);
        size_t len = json_string_length(content);
        if (!path || !text)
            continue;
        if (enc && strcmp(enc, "base64") == 0) {
            free(bin);
            if (!(bin = malloc(len + 1))) {
                r = -ENOMEM;
                goto out;
            }
            size_t blen = 0;
            if (sodium_base642bin(bin, len + 1, text, len, NULL, &blen, NULL,
                                  sodium_base64_VARIANT_ORIGINAL) != 0)
                continue; /* validation refuses it before we get here */
            bin[blen] = '\0';
            if (!tc_utf8_valid((const char *)bin, blen, false)) {
                const char *kind = executable_kind(bin, blen);
                json_t *x = kind ? finding("opaque_executable", "high",
                                           "a compiled program or bytecode arrives as a file: "
                                           "the pre-screen cannot read what it does",
                                           kind)
                            : archive(bin, blen)
                                ? finding("unscreened_archive", "medium",
                                          "an archive arrives as a file: code in it is not "
                                          "screened (it can be unpacked or imported and run)",
                                          "archive")
                                : finding("unscreened_binary", "low",
                                          "binary content is not screened", "binary data");
                if (!x || !(found = json_array()) || json_array_append_new(found, x) < 0) {
                    r = -ENOMEM;
                    goto out;
                }
                if ((r = add_all(all, found, "file", path)) < 0)
                    goto out;
                json_decref(found);
                found = NULL;
                continue;
            }
            text = (const char *)bin;
            len = blen;
        }
        const char *flang = lang_of_file(path, text, len);
        if ((r = tc_prescreen(flang ? flang : lang, text, len, &found)) < 0 ||
            (r = add_all(all, found, "file", path)) < 0)
            goto out;
        json_decref(found);
        found = NULL;
    }
done:
    if (!(all = cap_findings(all)))
        return -ENOMEM;
    *ret_findings = all;
    all = NULL;
    r = 0;
out:
    free(bin);
    json_decref(found);
    json_decref(all);
    return r;
}
