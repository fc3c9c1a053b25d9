/* The normaliser's entry point: each language's pass (prescreen_pyjs.c, prescreen_shell.c),
 * over the shared helpers of prescreen_norm.c. */
#include "policy/prescreen_norm_int.h"

int ps_normalise(enum ps_lang lang, const char *code, size_t len, int depth, uint32_t origin,
                 struct ps_norm *n)
{
    int r;
    if (n->text.cap == 0)
        tc_buf_init(&n->text, PS_MAX_NORM_BYTES + 1);
    switch (lang) {
    case PS_PYTHON:
        r = pn_normalise_pyjs(true, code, len, depth, origin, n);
        break;
    case PS_JS:
        r = pn_normalise_pyjs(false, code, len, depth, origin, n);
        break;
    case PS_SHELL:
        r = pn_normalise_shell(code, len, depth, origin, n);
        break;
    default:
        return 0;
    }
    if (r == -E2BIG)
        r = 0;
    if (r >= 0)
        r = pn_out_bytes(n, "\n", 1, depth ? origin : (uint32_t)len);
    return r;
}
