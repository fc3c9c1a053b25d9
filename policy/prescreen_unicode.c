/* Hidden and misleading characters (see prescreen_unicode.h). The table follows Unicode's
 * Default_Ignorable_Code_Point and Bidi_Control properties, plus the blank characters that
 * are valid in identifiers and the separators JavaScript treats as line breaks. */
#include "policy/prescreen_unicode.h"

#include <stdio.h>

struct range {
    uint32_t lo, hi;
    enum tc_hidden kind;
    const char *name;
};

/* Sorted by lo; no overlaps. */
static const struct range ranges[] = {
    {0x0000, 0x0008, TC_HIDDEN_CONTROL, "control character"},
    {0x000B, 0x000C, TC_HIDDEN_CONTROL, "vertical tab or form feed"},
    {0x000D, 0x000D, TC_HIDDEN_CONTROL, "CARRIAGE RETURN"},
    {0x000E, 0x001F, TC_HIDDEN_CONTROL, "control character"},
    {0x007F, 0x007F, TC_HIDDEN_CONTROL, "DELETE"},
    {0x0080, 0x0084, TC_HIDDEN_CONTROL, "C1 control character"},
    {0x0085, 0x0085, TC_HIDDEN_SEPARATOR, "NEXT LINE"},
    {0x0086, 0x009F, TC_HIDDEN_CONTROL, "C1 control character"},
    {0x00A0, 0x00A0, TC_HIDDEN_SPACE, "NO-BREAK SPACE"},
    {0x00AD, 0x00AD, TC_HIDDEN_INVISIBLE, "SOFT HYPHEN"},
    {0x034F, 0x034F, TC_HIDDEN_INVISIBLE, "COMBINING GRAPHEME JOINER"},
    {0x061C, 0x061C, TC_HIDDEN_MARK, "ARABIC LETTER MARK"},
    {0x115F, 0x1160, TC_HIDDEN_FILLER, "HANGUL FILLER"},
    {0x1680, 0x1680, TC_HIDDEN_SPACE, "OGHAM SPACE MARK"},
    {0x17B4, 0x17B5, TC_HIDDEN_FILLER, "KHMER INHERENT VOWEL"},
    {0x180B, 0x180D, TC_HIDDEN_VARIATION, "MONGOLIAN FREE VARIATION SELECTOR"},
    {0x180E, 0x180E, TC_HIDDEN_INVISIBLE, "MONGOLIAN VOWEL SEPARATOR"},
    {0x180F, 0x180F, TC_HIDDEN_VARIATION, "MONGOLIAN FREE VARIATION SELECTOR"},
    {0x2000, 0x200A, TC_HIDDEN_SPACE, "typographic space"},
    {0x200B, 0x200B, TC_HIDDEN_INVISIBLE, "ZERO WIDTH SPACE"},
    {0x200C, 0x200C, TC_HIDDEN_INVISIBLE, "ZERO WIDTH NON-JOINER"},
    {0x200D, 0x200D, TC_HIDDEN_INVISIBLE, "ZERO WIDTH JOINER"},
    {0x200E, 0x200E, TC_HIDDEN_MARK, "LEFT-TO-RIGHT MARK"},
    {0x200F, 0x200F, TC_HIDDEN_MARK, "RIGHT-TO-LEFT MARK"},
    {0x2028, 0x2028, TC_HIDDEN_SEPARATOR, "LINE SEPARATOR"},
    {0x2029, 0x2029, TC_HIDDEN_SEPARATOR, "PARAGRAPH SEPARATOR"},
    {0x202A, 0x202A, TC_HIDDEN_BIDI, "LEFT-TO-RIGHT EMBEDDING"},
    {0x202B, 0x202B, TC_HIDDEN_BIDI, "RIGHT-TO-LEFT EMBEDDING"},
    {0x202C, 0x202C, TC_HIDDEN_BIDI, "POP DIRECTIONAL FORMATTING"},
    {0x202D, 0x202D, TC_HIDDEN_BIDI, "LEFT-TO-RIGHT OVERRIDE"},
    {0x202E, 0x202E, TC_HIDDEN_BIDI, "RIGHT-TO-LEFT OVERRIDE"},
    {0x202F, 0x202F, TC_HIDDEN_SPACE, "NARROW NO-BREAK SPACE"},
    {0x205F, 0x205F, TC_HIDDEN_SPACE, "MEDIUM MATHEMATICAL SPACE"},
    {0x2060, 0x2060, TC_HIDDEN_INVISIBLE, "WORD JOINER"},
    {0x2061, 0x2064, TC_HIDDEN_INVISIBLE, "invisible mathematical operator"},
    {0x2065, 0x2065, TC_HIDDEN_INVISIBLE, "reserved invisible character"},
    {0x2066, 0x2066, TC_HIDDEN_BIDI, "LEFT-TO-RIGHT ISOLATE"},
    {0x2067, 0x2067, TC_HIDDEN_BIDI, "RIGHT-TO-LEFT ISOLATE"},
    {0x2068, 0x2068, TC_HIDDEN_BIDI, "FIRST STRONG ISOLATE"},
    {0x2069, 0x2069, TC_HIDDEN_BIDI, "POP DIRECTIONAL ISOLATE"},
    {0x206A, 0x206F, TC_HIDDEN_INVISIBLE, "deprecated format character"},
    {0x3000, 0x3000, TC_HIDDEN_SPACE, "IDEOGRAPHIC SPACE"},
    {0x3164, 0x3164, TC_HIDDEN_FILLER, "HANGUL FILLER"},
    {0xFE00, 0xFE0F, TC_HIDDEN_VARIATION, "VARIATION SELECTOR"},
    {0xFEFF, 0xFEFF, TC_HIDDEN_INVISIBLE, "ZERO WIDTH NO-BREAK SPACE (BOM)"},
    {0xFFA0, 0xFFA0, TC_HIDDEN_FILLER, "HALFWIDTH HANGUL FILLER"},
    {0xFFF0, 0xFFF8, TC_HIDDEN_INVISIBLE, "unassigned specials character"},
    {0xFFF9, 0xFFFB, TC_HIDDEN_INVISIBLE, "INTERLINEAR ANNOTATION character"},
    {0x1BCA0, 0x1BCA3, TC_HIDDEN_INVISIBLE, "SHORTHAND FORMAT CONTROL"},
    {0x1D173, 0x1D17A, TC_HIDDEN_INVISIBLE, "MUSICAL SYMBOL format character"},
    {0xE0000, 0xE007F, TC_HIDDEN_TAG, "TAG character (invisible ASCII)"},
    {0xE0080, 0xE00FF, TC_HIDDEN_INVISIBLE, "reserved default-ignorable character"},
    {0xE0100, 0xE01EF, TC_HIDDEN_VARIATION, "VARIATION SELECTOR SUPPLEMENT"},
    {0xE01F0, 0xE0FFF, TC_HIDDEN_INVISIBLE, "reserved default-ignorable character"},
};

enum tc_hidden tc_hidden_class(uint32_t cp, const char **ret_name)
{
    size_t lo = 0, hi = sizeof(ranges) / sizeof(ranges[0]);
    if (cp == '\t' || cp == '\n') {
        if (ret_name)
            *ret_name = NULL;
        return TC_HIDDEN_NONE;
    }
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < ranges[mid].lo)
            hi = mid;
        else if (cp > ranges[mid].hi)
            lo = mid + 1;
        else {
            if (ret_name)
                *ret_name = ranges[mid].name;
            return ranges[mid].kind;
        }
    }
    if (ret_name)
        *ret_name = NULL;
    return TC_HIDDEN_NONE;
}

const char *tc_hidden_kind_name(enum tc_hidden k)
{
    static const char *const names[] = {"none", "bidi",      "mark",   "invisible", "separator",
                                        "tag",  "variation", "filler", "control",   "space"};
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "none";
}

size_t tc_utf8_next(const char *s, size_t n, uint32_t *ret_cp)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t cp;
    size_t len;
    if (n == 0)
        return 0;
    if (u[0] < 0x80) {
        *ret_cp = u[0];
        return 1;
    }
    if (u[0] >= 0xc2 && u[0] <= 0xdf)
        len = 2, cp = u[0] & 0x1f;
    else if (u[0] >= 0xe0 && u[0] <= 0xef)
        len = 3, cp = u[0] & 0x0f;
    else if (u[0] >= 0xf0 && u[0] <= 0xf4)
        len = 4, cp = u[0] & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((u[k] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (u[k] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    *ret_cp = cp;
    return len;
}

size_t tc_hidden_marker(uint32_t cp, char *out, size_t outsz)
{
    int n = snprintf(out, outsz, "\xe2\x9f\xaaU+%04X\xe2\x9f\xab", (unsigned)cp);
    return n < 0 ? 0 : (size_t)n < outsz ? (size_t)n : outsz - 1;
}
