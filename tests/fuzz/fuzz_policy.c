/* libFuzzer target: the policy loader on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    if (tc_policy_load_buffer((const char *)data, size, &p, &errors) == 0) {
        for (size_t i = 0; i < tc_policy_ntools(p); i++) {
            json_t *d = tc_tool_describe(tc_policy_tool_at(p, i));
            json_decref(d);
        }
        tc_policy_unref(p);
    }
    json_decref(errors);
    return 0;
}
