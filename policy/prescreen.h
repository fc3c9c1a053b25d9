/* Pre-screening of tool-call code before it runs (pure code: no I/O, fuzzable).
 * Advisory by nature: a determined author can evade it; the sandbox is the enforcement.
 * Code is normalised per language (comments stripped, import aliases resolved, string
 * concatenation, chr()/escape/hex/base64/rot13 decoding folded, decoded payloads re-scanned)
 * before the rules run. See docs/prescreen.md. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy/policy.h"

enum tc_severity { TC_SEV_LOW, TC_SEV_MEDIUM, TC_SEV_HIGH, TC_SEV_CRITICAL };
enum tc_prescreen_action {
    TC_ACTION_RUN,
    TC_ACTION_WARN,
    TC_ACTION_APPROVE,
    TC_ACTION_BLOCK
}; /* ordered by strength */

#define TC_PRESCREEN_MAX_CODE     (1024 * 1024) /* longer code is scanned up to this many bytes */
#define TC_PRESCREEN_MAX_FINDINGS 100
#define TC_PRESCREEN_MAX_EXCERPT  120

/* language: "python" | "shell" | "javascript"; any other language but "none" (e.g. "other"):
 * only the check for hidden characters (bidi controls, invisible characters); "none" or NULL:
 * an empty array. On success returns 0 and sets *ret_findings to a new JSON array of findings
 * [{rule, severity ("low"|"medium"|"high"|"critical"), line (1-based), column (1-based, bytes),
 *   excerpt (<= 120 bytes, valid UTF-8), message}], sorted by line, column and rule, at most
 * TC_PRESCREEN_MAX_FINDINGS. Any bytes are accepted (NUL, invalid UTF-8). -ENOMEM on failure
 * (ret untouched). Thread-safe. */
int tc_prescreen(const char *language, const char *code, size_t len, json_t **ret_findings);

/* For a process that screens one short request (toolcage exec, code up to 64 KiB): the rules
 * are compiled without PCRE2's JIT, whose compiling (executable memory mapped rule by rule)
 * costs more than it saves on one program: ~2.7 ms of CPU of a 3.8 ms screen of `pass` on a
 * machine of ours, on the path of a one-shot run (bench/README.md). The same rules; PCRE2's
 * interpreter and JIT count the match limit differently, so a pathological input near it may
 * be reported otherwise than by the server (whose findings hold the call back; the CLI's
 * only report). Before the first screen; a long-lived process (the server) keeps the JIT. */
void tc_prescreen_once(void);
bool tc_prescreen_jit(void); /* (for the rule tables compiled in prescreen*.c) */

/* Everything in an execute request that can run, screened (body: a request that passed
 * tc_exec_request_parse, i.e. tool, code, and optional stdin and files):
 * - code, with the tool's rule set (tc_prescreen_language);
 * - every file of files[], decoded from base64: as python/shell/javascript by its name (.py,
 *   .sh, .js, ...) or its #! line, else with the tool's rule set (code can exec, source or
 *   import any file); a file that is not UTF-8 text is not scanned but reported: a compiled
 *   program or bytecode (ELF, Mach-O, PE, wasm, .pyc) as "opaque_executable" (high), an
 *   archive as "unscreened_archive" (medium), anything else as "unscreened_binary" (low);
 * - stdin, as the language that runs it (tc_prescreen_stdin_language), or, when nothing does
 *   as far as the pre-screen can tell, as data with every finding lowered to "low".
 * Findings as tc_prescreen()'s, each with "source": "code" | "stdin" | "file" and, for a file,
 * "path" (line and column point into that source). In request order; past
 * TC_PRESCREEN_MAX_FINDINGS the most severe are kept. Rule set "none": an empty array.
 * 0 or -ENOMEM (ret untouched). */
int tc_prescreen_request(const struct tc_tool *tool, const json_t *body, json_t **ret_findings);

/* The language stdin runs as, or NULL when it is data: the tool's command reads its program
 * from stdin (an interpreter with "-", "-s", /dev/stdin or no program operand), or the code
 * hands stdin to an interpreter (`bash`, `sh -s`, `cat | sh`, `. /dev/stdin`,
 * `eval "$(cat)"`, exec(sys.stdin.read()), os.system("sh"), eval(readFileSync(0)), ...). */
const char *tc_prescreen_stdin_language(const struct tc_tool *tool, const char *code, size_t len);

/* The rule set a tool's code is scanned with: tool->raw "prescreen".rules if set, else
 * tool->language ("other" when unset). Borrowed string. */
const char *tc_prescreen_language(const struct tc_tool *tool);

/* The strongest action the tool's policy maps these findings to (tool->raw
 * "prescreen".actions; a severity it does not list: low/medium -> warn, high -> approve,
 * critical -> block). No findings (or NULL): TC_ACTION_RUN. tool may be NULL (defaults). */
enum tc_prescreen_action tc_prescreen_decide(const struct tc_tool *tool, json_t *findings);

const char *
tc_prescreen_action_name(enum tc_prescreen_action a); /* "run" | "warn" | "approve" | "block" */
const char *tc_severity_name(enum tc_severity s);     /* "low" | ... | "critical" */
