/* The execute request: strict validation, limits merged with the tool's policy, the
 * launcher spec built from both, and the result turned into the API's Execution object.
 * Shared by POST /v1/execute and `toolcage exec`. No I/O. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "policy/policy.h"

#define TC_EXEC_MAX_CODE_BYTES (1024 * 1024)
#define TC_EXEC_MAX_STDIN_BYTES (1024 * 1024)
#define TC_EXEC_MAX_FILES 64
#define TC_EXEC_MAX_FILE_BYTES (1024 * 1024)

struct tc_exec_request {
    const char *tool;   /* borrowed from body */
    json_t *body;       /* the validated request (a reference) */
};

/* http(s)://host... without credentials, control characters or backslashes; <= 2048 bytes. */
bool tc_exec_callback_url_ok(const char *url);

/* Validate a request body. 0, or -EINVAL with *ret_errors an array of {path, message}. */
int tc_exec_request_parse(json_t *body, struct tc_exec_request *ret_req, json_t **ret_errors);
void tc_exec_request_done(struct tc_exec_request *req);

/* Effective limits: the request's value where given, else the tool's default.
 * -ERANGE with *ret_errors when a requested value exceeds the tool's max. */
int tc_exec_limits(const struct tc_tool *tool, const struct tc_exec_request *req,
                   int64_t ret_limits[TC_LIMIT__COUNT], json_t **ret_errors);
json_t *tc_exec_limits_json(const int64_t limits[TC_LIMIT__COUNT]);

/* The launcher spec (see sandbox/sandbox.h) for this request. NULL on allocation failure. */
json_t *tc_exec_build_spec(const struct tc_tool *tool, const struct tc_exec_request *req,
                           const int64_t limits[TC_LIMIT__COUNT], const char *id);

/* The API's Execution object from a launcher result (stdout/stderr decoded, made valid
 * UTF-8 with U+FFFD for invalid bytes and NUL). */
json_t *tc_exec_view(const char *id, const char *tool, json_t *result,
                     const int64_t limits[TC_LIMIT__COUNT], const char *created_at,
                     const char *finished_at);
