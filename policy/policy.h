/* Tool policy: the operator's declaration of every tool (trusted input, strictly validated).
 * Deny by default: an undeclared tool does not exist; an unset field is its strictest value.
 * Pure code: parsing and lookup only, no I/O beyond reading the file in tc_policy_load()
 * (and locating runsc when a tool asks for the gvisor backend). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tc_limit_id {
    TC_LIMIT_TIMEOUT_MS,   /* wall clock */
    TC_LIMIT_CPU_MS,       /* CPU time of the whole tree */
    TC_LIMIT_MEMORY_MB,    /* RAM of the whole tree (cgroup), per process (RLIMIT_AS) as fallback */
    TC_LIMIT_PIDS,         /* tasks in the sandbox */
    TC_LIMIT_OUTPUT_BYTES, /* per stream (stdout, stderr) */
    TC_LIMIT_FILE_SIZE_MB, /* RLIMIT_FSIZE */
    TC_LIMIT_WORKSPACE_MB, /* size of the /workspace tmpfs */
    TC_LIMIT_TMP_MB,       /* size of the /tmp tmpfs */
    TC_LIMIT_OPEN_FILES,   /* RLIMIT_NOFILE */
    TC_LIMIT__COUNT
};

/* Key names used in the policy file and in request "limits" objects, indexed by tc_limit_id. */
extern const char *const tc_limit_names[TC_LIMIT__COUNT];

struct tc_limit {
    int64_t def; /* applied when the request does not ask */
    int64_t max; /* a request above this is refused (422) */
};

enum tc_backend { TC_BACKEND_NATIVE, TC_BACKEND_GVISOR, TC_BACKEND_MICROVM };
enum tc_tier { TC_TIER_AUTO, TC_TIER_ASSISTED, TC_TIER_HUMAN_APPROVE, TC_TIER_MANUAL_ONLY };

struct tc_mount {
    char *source; /* absolute host path */
    char *target; /* absolute sandbox path */
    bool writable;
};

struct tc_tool {
    char *name;
    char *description;
    char *language; /* "python", "shell", "javascript" or "other": selects pre-screen rules */
    char *
        *command; /* argv; the element "{code_file}" is replaced by the code file's sandbox path */
    size_t ncommand;
    char *code_file; /* file name written into /workspace holding the request's code */
    enum tc_backend backend;
    enum tc_tier tier;
    bool irreversible;
    bool plots;   /* output.plots: matplotlib figures come back as PNG outputs (python) */
    bool session; /* session.enabled: can be opened as a session (python, shell; native) */
    int64_t session_ttl_max_s, session_idle_max_s; /* bounds of a session's life and idleness */
    bool session_hold; /* session.held_calls "hold": a held call waits in the session */
    struct tc_limit limits[TC_LIMIT__COUNT];
    char **env; /* "NAME=value", the sandbox's whole environment */
    size_t nenv;
    bool *env_default;       /* env_default[i]: env[i] is a built-in default (PATH, HOME, LANG the
                                policy does not set), which a tool image's Env replaces */
    struct tc_mount *mounts; /* extra host paths, read-only unless writable */
    size_t nmounts;
    bool network_none;    /* true: loopback only */
    char **network_allow; /* "host[:port]" / "*.domain[:port]" when !network_none */
    size_t nnetwork_allow;
    bool network_ask;              /* hosts not in network_allow are asked about (held) */
    bool network_ask_private;      /* ... and non-public IPv4 literals may be allowed */
    int64_t network_ask_timeout_s; /* how long a reviewer has to answer; then a deny */
    json_t *raw;   /* the tool's validated JSON object, for later modules (borrowed) */
    char *runtime; /* gvisor: absolute path of runsc found at load time; else NULL */
    char *image;   /* a tool image's reference (image/image.h), resolved at each call; or NULL */
    bool workdir_image; /* "workdir": "image": start in the image's WorkingDir (else /workspace) */
};

#define TC_SESSION_TTL_CEILING_S 86400 /* no session lives longer than a day */

/* Caps on the policy file itself (see docs/policy.md). */
#define TC_POLICY_MAX_BYTES  (1024 * 1024)
#define TC_POLICY_MAX_TOOLS  256
#define TC_POLICY_MAX_ERRORS 200 /* further problems are summarised in one last string */

/* Built-in value of a limit the policy leaves unset (default == max: the strictest) and the
 * hard ceiling no policy may exceed, indexed by tc_limit_id. */
extern const int64_t tc_limit_builtin[TC_LIMIT__COUNT];
extern const int64_t tc_limit_ceiling[TC_LIMIT__COUNT];

struct tc_policy; /* immutable once loaded; reference counted so reloads do not pull it from under
                     in-flight calls */

/* Load and validate. On failure returns -EINVAL (or -EFBIG past TC_POLICY_MAX_BYTES, -ENOMEM,
 * -errno for I/O) and, if ret_errors is non-NULL, sets it to a JSON array of strings
 * "json.path: message", one per problem found (all of them, not only the first; I/O errors
 * are one "(root): ..." string). The strings never name the file: print it in front.
 * On success *ret_errors is set to NULL. A tool with backend "gvisor"
 * makes loading look for runsc in PATH, /usr/bin, /usr/sbin and /usr/local/bin. */
int tc_policy_load(const char *path, struct tc_policy **ret_policy, json_t **ret_errors);
int tc_policy_load_buffer(const char *text, size_t len, struct tc_policy **ret_policy,
                          json_t **ret_errors);

struct tc_policy *tc_policy_ref(struct tc_policy *p);
void tc_policy_unref(struct tc_policy *p); /* NULL is a no-op */

/* NULL when the tool is not declared. */
const struct tc_tool *tc_policy_tool(const struct tc_policy *p, const char *name);
size_t tc_policy_ntools(const struct tc_policy *p);
const struct tc_tool *tc_policy_tool_at(const struct tc_policy *p, size_t i); /* sorted by name */
/* Hex BLAKE2b-256 of the file's bytes, for audit records of which policy ran. */
const char *tc_policy_digest(const struct tc_policy *p);

/* Public description of a tool for GET /v1/tools: {name, description, language, backend, tier,
 * irreversible, network: "none" | {"allow": [...]}, limits: {NAME: {default, max}}}.
 * Nothing secret (no env, mounts, command or credentials). New reference, NULL on ENOMEM. */
json_t *tc_tool_describe(const struct tc_tool *t);

/* Resolve the limits of one call: requested is NULL or the request's "limits" object
 * ({NAME: integer}); each value must be an integer in [1, the tool's max]; unset ones take the
 * tool's default. On failure returns -EINVAL (unknown key, wrong type: a 400-class problem) or
 * -ERANGE (a value above the tool's max: 422) and, if ret_errors is non-NULL, sets it to an
 * array of "limits.NAME: message" strings (NULL on success). ret_values is untouched on failure. */
int tc_tool_limits(const struct tc_tool *t, const json_t *requested,
                   int64_t ret_values[TC_LIMIT__COUNT], json_t **ret_errors);
