/* Per-sandbox workspace: a size-capped tmpfs owned by the sandbox's host uid, filled
 * from the spec's files before the run and searched for collect patterns after it.
 * Every path is resolved relative to the workspace dirfd, never following symlinks. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Mount a tmpfs of size bytes at path (an existing empty dir). Returns an O_PATH-free
 * directory fd on the new mount, or -errno. */
int tc_ws_mount(const char *path, int64_t size, uid_t uid, gid_t gid);
void tc_ws_unmount(const char *path);

/* Write the spec's files array. -EINVAL (bad entry), -ENOSPC, -EEXIST, ... with err set. */
int tc_ws_write_files(int dirfd, json_t *files, uid_t uid, gid_t gid, char *err, size_t errlen);
/* Where a gated spec's call files wait for its gate (sandbox/launcher_files.c); the runner
 * (execution/plots.c) moves them into place. */
#define TC_WS_STAGE           ".toolcage/stage"
#define TC_WS_STAGED_PATH_MAX 4096 /* a staged file's path (TC_WS_STAGE/PATH), NUL included */

/* Collect regular files matching the patterns (fnmatch on the relative path, '*' also
 * matches '/'): [{path, content_b64, size, truncated}]. Each file is capped at
 * TC_WS_COLLECT_FILE_MAX bytes and all files together at total_max; at most
 * TC_WS_COLLECT_MAX_FILES files, and the walk looks at no more than
 * TC_WS_COLLECT_MAX_ENTRIES directory entries or 32 levels. *ret_incomplete is set when a
 * match was left out for one of these caps (or its name is not UTF-8). NULL on ENOMEM. */
#define TC_WS_COLLECT_FILE_MAX    (1 << 20)
#define TC_WS_COLLECT_MAX_FILES   256
#define TC_WS_COLLECT_MAX_ENTRIES 65536
json_t *tc_ws_collect(int dirfd, json_t *patterns, int64_t total_max, bool *ret_incomplete);

/* A session's files, one at a time, relative to the workspace (rel: no leading '/', no '.'
 * or '..' part; the kernel refuses any path that crosses a symbolic link or another mount:
 * -ELOOP, -EXDEV). Whatever the sandboxed program made of the workspace, nothing outside
 * it is reached and nothing blocks (a FIFO is not a file).
 *   tc_ws_get:    a regular file's bytes (malloc'ed, NUL-terminated); -EFBIG past max,
 *                 -EISDIR, -EPERM (not a regular file), -ENOENT.
 *   tc_ws_put:    writes the file (owned by uid:gid, mode 0644) aside and renames it over the
 *                 name; missing directories are made. -ENOSPC when the workspace is full,
 *                 -EISDIR. *ret_created (may be NULL): there was no such name before.
 *   tc_ws_delete: a file (or symbolic link, not followed) or an empty directory;
 *                 -ENOTEMPTY.
 *   tc_ws_list:   every entry [{path, type, size, mode, mtime}] (type "file", "directory",
 *                 "symlink" or "other"), at most max_entries, with collect's bounds on the
 *                 walk; *ret_incomplete when some were left out. NULL on ENOMEM. */
/* A path as the API takes it: relative, at most 255 bytes, no empty, "." or ".." part, no
 * control character or backslash, no trailing '/'. */
bool tc_ws_path_ok(const char *rel);
int tc_ws_get(int dirfd, const char *rel, size_t max, char **ret, size_t *ret_len);
int tc_ws_put(int dirfd, const char *rel, const void *data, size_t len, uid_t uid, gid_t gid,
              bool *ret_created);
int tc_ws_delete(int dirfd, const char *rel);
json_t *tc_ws_list(int dirfd, size_t max_entries, bool *ret_incomplete);

/* base64 helpers (libsodium, standard alphabet with padding). */
char *tc_b64_encode(const void *data, size_t len);
int tc_b64_decode(const char *s, size_t slen, unsigned char **ret, size_t *ret_len);
