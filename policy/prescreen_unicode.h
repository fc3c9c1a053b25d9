/* Characters a reviewer does not see, or that change what the reviewer sees: Unicode bidi
 * controls (Trojan Source, CVE-2021-42574), zero-width and other invisible format characters,
 * line and paragraph separators, tag characters (invisible ASCII), variation selectors, Hangul
 * and Khmer fillers (invisible identifiers), control characters and unusual spaces.
 * Shared by the pre-screen (findings) and the console (visible markers). Pure code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tc_hidden {
    TC_HIDDEN_NONE,
    TC_HIDDEN_BIDI,      /* embeddings, overrides, isolates: reorder what is displayed */
    TC_HIDDEN_MARK,      /* LRM, RLM, ALM: invisible direction marks */
    TC_HIDDEN_INVISIBLE, /* zero-width, joiners, soft hyphen, invisible operators, ... */
    TC_HIDDEN_SEPARATOR, /* U+2028, U+2029, U+0085: line breaks editors may not show */
    TC_HIDDEN_TAG,       /* U+E0000..U+E007F: invisible copies of ASCII */
    TC_HIDDEN_VARIATION, /* variation selectors (can carry hidden data) */
    TC_HIDDEN_FILLER,    /* Hangul/Khmer fillers: blank characters valid in identifiers */
    TC_HIDDEN_CONTROL,   /* C0/C1 controls other than tab and newline, DEL */
    TC_HIDDEN_SPACE,     /* spaces that are not U+0020 (no-break, ideographic, ...) */
};

/* Classify one code point; *ret_name (may be NULL) gets a short description ("RIGHT-TO-LEFT
 * OVERRIDE") for the kinds above, NULL for TC_HIDDEN_NONE. */
enum tc_hidden tc_hidden_class(uint32_t cp, const char **ret_name);

/* CSS class suffix of a kind: "bidi", "mark", "invisible", "separator", "tag", "variation",
 * "filler", "control", "space". */
const char *tc_hidden_kind_name(enum tc_hidden k);

/* Decode one UTF-8 sequence at s (n bytes available): its length (1..4) and *ret_cp, or 0 when
 * the bytes there are not valid UTF-8 (overlong, surrogate, out of range, truncated). */
size_t tc_utf8_next(const char *s, size_t n, uint32_t *ret_cp);

/* "⟪U+202E⟫" into out (at least 16 bytes): the visible stand-in for a hidden character.
 * Returns the length written. */
size_t tc_hidden_marker(uint32_t cp, char *out, size_t outsz);
