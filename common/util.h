/* Small helpers shared by every layer: scoped cleanup, fd hygiene, bounded parsing.
 * Conventions (see STYLE.md): low layers return 0 or -errno and never log;
 * outputs come last, are named ret_*, and are untouched on failure. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TC_STRINGIFY_(x) #x
#define TC_STRINGIFY(x)  TC_STRINGIFY_(x)
#define TC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TC_UNUSED        __attribute__((unused))
#define TC_PRINTF(a, b)  __attribute__((format(printf, a, b)))
#define TC_WARN_UNUSED   __attribute__((warn_unused_result))

static inline void tc_freep(void *p)
{
    free(*(void **)p);
}
static inline void tc_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
#define _cleanup_free_  __attribute__((cleanup(tc_freep)))
#define _cleanup_close_ __attribute__((cleanup(tc_closep)))

/* Hand ownership out of a scoped variable: `*ret = TC_STEAL(p);` */
#define TC_STEAL(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _tmp = (p);                                                                  \
        (p) = NULL;                                                                                \
        _tmp;                                                                                      \
    })
static inline int tc_steal_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}

/* Retry a syscall expression on EINTR. */
#define TC_RETRY(expr)                                                                             \
    ({                                                                                             \
        long _r;                                                                                   \
        do                                                                                         \
            _r = (long)(expr);                                                                     \
        while (_r < 0 && errno == EINTR);                                                          \
        _r;                                                                                        \
    })

/* Parse a whole string as a base-10 integer in [min, max]; trailing garbage,
 * empty strings and overflow are errors (-EINVAL / -ERANGE). */
int tc_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret);

/* A UTC time "YYYY-MM-DD", "YYYY-MM-DDTHH:MM:SSZ" or "YYYY-MM-DDTHH:MM:SS.mmmZ" that names a
 * real instant (no 31 February, no hour 24) as milliseconds since the epoch. 0 or -EINVAL. */
int tc_parse_iso_utc(const char *s, int64_t *ret_ms);

/* Write all of buf, retrying on EINTR and short writes. 0 or -errno. */
int tc_write_all(int fd, const void *buf, size_t len);
/* Read until EOF or max bytes. On success *ret_buf is malloc'ed and NUL-terminated
 * (not counted in *ret_len). -EFBIG if more than max bytes are available. */
int tc_read_all(int fd, size_t max, char **ret_buf, size_t *ret_len);
int tc_read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len);

/* Milliseconds of CLOCK_MONOTONIC / CLOCK_REALTIME. */
int64_t tc_now_ms(void);
int64_t tc_now_us(void); /* CLOCK_MONOTONIC, microseconds */
/* The time ms (>= 0) from now on clock, as pthread_cond_timedwait and friends take it. */
struct timespec tc_timespec_in(clockid_t clock, int64_t ms);
int64_t tc_wall_ms(void);

/* Random UUIDv7 (time-ordered) into out[37]. */
void tc_uuid7(char out[37]);
bool tc_uuid_valid(const char *s);
/* A plain e-mail address (local@domain: printable ASCII, no space, no angle brackets or other
 * specials, at most 254 bytes): safe on an SMTP envelope and a header line. */
bool tc_email_address_ok(const char *a);

/* True if s[0..len) is valid UTF-8 without NUL bytes (when !allow_nul). */
bool tc_utf8_valid(const char *s, size_t len, bool allow_nul);
/* path cleaned lexically, as an absolute path inside a root: repeated slashes, "." and a
 * trailing slash dropped, ".." takes the previous name back (never above /); a relative path is
 * taken from /. 0, or -ENAMETOOLONG (out too small, or a name longer than 255 bytes). */
int tc_path_clean(const char *path, char *out, size_t outlen);

/* RFC 3339 UTC timestamp with milliseconds, e.g. "2026-11-22T03:04:05.678Z". */
void tc_iso8601(int64_t wall_ms, char out[32]);

/* The gVisor runtime: runsc in an absolute $PATH entry, else in /usr/bin, /usr/sbin or
 * /usr/local/bin (a regular, executable file). 0 and its path in ret (size bytes), or
 * -ENOENT. The one lookup the policy check and the launcher share. */
int tc_find_runsc(char *ret, size_t size);

/* The value of a hexadecimal digit, or -1. */
int tc_hexval(int c);
