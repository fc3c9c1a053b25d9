/* Pre-screening of tool-call code before it runs (pure code: no I/O, fuzzable).
 * Advisory by nature: a determined author can evade it; the sandbox is the enforcement.
 * Code is normalised per language (comments stripped, import aliases resolved, string
 * concatenation, chr()/escape/hex/base64/rot13 decoding folded, decoded payloads re-scanned)
 * before the rules run. See docs/prescreen.md. */
#pragma once

#include <jansson.h>
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

/* language: "python" | "shell" | "javascript"; "none", "other", NULL or anything else: no rules
 * (an empty array). On success returns 0 and sets *ret_findings to a new JSON array of findings
 * [{rule, severity ("low"|"medium"|"high"|"critical"), line (1-based), column (1-based, bytes),
 *   excerpt (<= 120 bytes, valid UTF-8), message}], sorted by line, column and rule, at most
 * TC_PRESCREEN_MAX_FINDINGS. Any bytes are accepted (NUL, invalid UTF-8). -ENOMEM on failure
 * (ret untouched). Thread-safe. */
int tc_prescreen(const char *language, const char *code, size_t len, json_t **ret_findings);

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
