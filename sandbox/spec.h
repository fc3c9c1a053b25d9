/* Sandbox spec: strict validation of the spec JSON (see sandbox.h) into a typed view.
 * Used by the client (reject bad specs before they reach the launcher) and by the
 * launcher (which trusts nothing the server sends and validates again). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_SPEC_ID_MAX           64
#define TC_SPEC_MAX_ARGS         4096
#define TC_SPEC_MAX_FILES        1024
#define TC_SPEC_MAX_MOUNTS       64
#define TC_SPEC_MAX_PATH         4096
#define TC_SPEC_MAX_SECRET_FILES 32
#define TC_SPEC_MAX_SECRET_BYTES (64 * 1024) /* decoded, per file */

struct tc_limits {
    int64_t wall_ms, cpu_ms, memory_bytes, pids, file_size_bytes, nofile, output_bytes,
        workspace_bytes, tmp_bytes;
};

struct tc_spec_mount {
    const char *source, *target;
    int writable;
};

/* Strings point into the JSON the spec was parsed from: keep it referenced. */
struct tc_spec {
    const char *id;
    const char *backend;
    const char **argv; /* NULL-terminated, malloc'ed array */
    const char **envp; /* NULL-terminated, malloc'ed array */
    const char *cwd;
    const char *hostname;
    const char *stdin_b64;
    json_t *files;        /* array or NULL */
    json_t *collect;      /* array or NULL */
    json_t *secret_files; /* array of {name, content_b64} or NULL: /run/secrets/<name>, 0400 */
    struct tc_spec_mount *mounts;
    size_t n_mounts;
    json_t *network_allow;    /* {"allow": [...]}: the rule strings; NULL for "none" */
    int64_t network_ask_ms;   /* > 0: hosts not allowed are asked about for this long */
    bool network_ask_private; /* a reviewer may allow non-public IPv4 literals (not metadata) */
    json_t *inject;           /* credentials the egress proxy adds (egress_tls.h), or NULL */
    const char *image_root;   /* a tool image's root: its chain id (image/image.h), or NULL */
    struct tc_limits limits;
    int hold;    /* wait for TC_WIRE_GO before the program starts (see sandbox.h) */
    int stream;  /* send output as it comes (TC_WIRE_CHUNK), not only in the result */
    int session; /* stdin stays open for TC_WIRE_INPUT; output only as chunks (see sandbox.h) */
    int gate;    /* the program reads one byte, 'g', from stdin before the call's code runs, then
                    moves the call's files from TC_WS_STAGE into place (sandbox/launcher_files.c) */
    int warm;    /* with gate: the launcher may start the program before the call (sandbox.h) */
};

/* 0, or -EINVAL with a reason in err. On success free with tc_spec_release(). */
int tc_spec_parse(json_t *spec, struct tc_spec *ret, char *err, size_t errlen);
void tc_spec_release(struct tc_spec *s);

/* [A-Za-z0-9-]{1,64} */
int tc_spec_id_valid(const char *id);
/* Relative path, no "..", no empty or "." components, no leading "/", bounded. */
int tc_spec_relpath_valid(const char *p);
