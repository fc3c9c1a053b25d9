/* libFuzzer target: the pre-screener. The first byte picks the language; the findings must be
 * well-formed (bounded count, excerpts valid UTF-8 and at most 120 bytes, 1-based positions). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "policy/prescreen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const langs[] = {"python", "shell", "javascript", "other"};
    json_t *f = NULL, *x;
    size_t i;
    if (size < 1)
        return 0;
    const char *lang = langs[data[0] & 3];
    if (tc_prescreen(lang, (const char *)data + 1, size - 1, &f) < 0)
        abort();
    if (json_array_size(f) > TC_PRESCREEN_MAX_FINDINGS)
        abort();
    json_array_foreach(f, i, x)
    {
        const char *e = json_string_value(json_object_get(x, "excerpt"));
        if (!e || strlen(e) > TC_PRESCREEN_MAX_EXCERPT || !tc_utf8_valid(e, strlen(e), false))
            abort();
        if (json_integer_value(json_object_get(x, "line")) < 1 ||
            json_integer_value(json_object_get(x, "column")) < 1)
            abort();
    }
    (void)tc_prescreen_decide(NULL, f);
    json_decref(f);
    return 0;
}
