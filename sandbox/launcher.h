/* Internal pieces shared by the launcher's modules. */
#pragma once

#include <jansson.h>

/* Build an error result for id (status "error"). */
json_t *tc_result_error(const char *id, const char *msg);
