/* The execute request: strict validation, limits merged with the tool's policy, the
 * launcher spec built from both, and the result turned into the API's Execution object.
 * Shared by POST /v1/execute and `toolcage exec`. No I/O. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "policy/policy.h"

struct tc_redactor;

#define TC_EXEC_MAX_CODE_BYTES      (1024 * 1024)
#define TC_EXEC_MAX_STDIN_BYTES     (1024 * 1024)
#define TC_EXEC_MAX_FILES           64
#define TC_EXEC_MAX_FILE_BYTES      (1024 * 1024)
#define TC_EXEC_MAX_COLLECT         32  /* patterns in "collect" */
#define TC_EXEC_MAX_COLLECT_PATTERN 256 /* bytes per pattern */

struct tc_exec_request {
    const char *tool; /* borrowed from body */
    json_t *body;     /* the validated request (a reference) */
    bool driver;      /* the code is a session's driver (api/sessions.c): run as it is */
};

/* http(s)://host... without credentials, control characters or backslashes; <= 2048 bytes. */
bool tc_exec_callback_url_ok(const char *url);

/* A request's "files" ([{path, content, encoding?}], NULL: none): each problem appended to
 * errors as {path, message}. */
void tc_exec_check_files(json_t *files, json_t *errors);
/* The bytes of one valid "files" entry (malloc'ed); -EINVAL, -ENOMEM. */
int tc_exec_file_bytes(json_t *file, unsigned char **ret, size_t *ret_len);

/* A spec that may go warm (sandbox.h "warm") goes warm only with the calls of its tenant: a
 * warm sandbox made after one tenant's call is never another's, and whether a call was warm
 * tells a tenant nothing of another's. */
void tc_exec_spec_tenant(json_t *spec, const char *tenant_id);

/* Validate a request body. 0, or -EINVAL with *ret_errors an array of {path, message}. */
int tc_exec_request_parse(json_t *body, struct tc_exec_request *ret_req, json_t **ret_errors);
void tc_exec_request_done(struct tc_exec_request *req);

/* Effective limits: the request's value where given, else the tool's default.
 * -ERANGE with *ret_errors when a requested value exceeds the tool's max. */
int tc_exec_limits(const struct tc_tool *tool, const struct tc_exec_request *req,
                   int64_t ret_limits[TC_LIMIT__COUNT], json_t **ret_errors);
json_t *tc_exec_limits_json(const int64_t limits[TC_LIMIT__COUNT]);

/* The tool's image (image/image.h) as the store under state_dir has it now: its index entry
 * in *ret_image (NULL for a tool without one). -ENOENT when the store has no such image. */
int tc_exec_image(const struct tc_tool *tool, const char *state_dir, json_t **ret_image);

/* The launcher spec (see sandbox/sandbox.h) for this request; image is tc_exec_image()'s
 * entry or NULL (its root; its Env under the tool's). NULL on allocation failure. */
json_t *tc_exec_build_spec(const struct tc_tool *tool, const struct tc_exec_request *req,
                           const int64_t limits[TC_LIMIT__COUNT], const char *id, json_t *image);

/* What is scrubbed from everything an execution returns. */
struct tc_exec_filter {
    const struct tc_redactor *redactor; /* the tool's rules (see tc_exec_redactor) */
    const char *const *secrets;         /* exact values leased to this execution */
    size_t nsecrets;
};

/* The tool's redactor: every built-in rule but those its policy disables, plus the state
 * directory as a host path. 0 or -errno. */
int tc_exec_redactor(const struct tc_tool *tool, const char *state_dir,
                     struct tc_redactor **ret_redactor);
/* A redacted copy of a string (for audit records); counts (may be NULL) is added to. */
/* Output bytes as the API shows them: a string of valid UTF-8 without NUL (invalid bytes and
 * NUL become U+FFFD), as in an Execution's stdout. tc_exec_text_settled(): how much of
 * data[0..len) becomes text the same way whatever bytes follow (all but an unfinished
 * sequence at the end), so that a stream of pieces gives exactly the text of the whole. */
json_t *tc_exec_text(const void *data, size_t len);
size_t tc_exec_text_settled(const void *data, size_t len);
json_t *tc_exec_redact_string(const struct tc_exec_filter *f, const char *s, size_t len,
                              json_t *counts);

/* A file's bytes as a download gives them (malloc'ed, NUL-terminated): text (valid UTF-8)
 * redacted like stdout; binary bytes unchanged, or withheld whole (-EACCES) if a rule matches
 * in them, like a collected binary file. counts (may be NULL) is added to. 0, -EACCES,
 * -ENOMEM. */
int tc_exec_redact_file(const struct tc_exec_filter *f, const unsigned char *bin, size_t len,
                        json_t *counts, char **ret, size_t *ret_len);

/* One egress attempt (the launcher result's "network", or the proxy's live news of it:
 * sandbox.h) as the API gives it: its known fields only, the host redacted (it comes from the
 * sandboxed code), the byte counts only with bytes. counts (may be NULL) is added to. NULL if
 * att is not an object. */
json_t *tc_exec_network_entry(const struct tc_exec_filter *f, json_t *att, bool bytes,
                              json_t *counts);

/* The API's Execution object from a launcher result: stdout, stderr and error redacted
 * (counts per rule in "redactions"), then made valid UTF-8 with U+FFFD for invalid bytes
 * and NUL. findings (borrowed, may be NULL) are the pre-screen's. */
json_t *tc_exec_view(const char *id, const char *tool, json_t *result,
                     const int64_t limits[TC_LIMIT__COUNT], const char *created_at,
                     const char *finished_at, const struct tc_exec_filter *filter,
                     json_t *findings);
