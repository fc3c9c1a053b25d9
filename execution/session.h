/* A session's wire to its driver (docs/sessions.md; the drivers are execution/session/): the
 * request frame the server writes to the driver's stdin, and the scanner that finds the end
 * of a call in the driver's raw output. Pure code, no I/O.
 *
 * A request is a header line "TCS1 <nonce> <code bytes> <stdin bytes> <flags>\n", then the
 * code, then the call's stdin. The driver ends the call with "\x1eTCS1 <nonce> <json>\n" on
 * stdout and "\x1eTCS1 <nonce>\n" on stderr. The nonce is new for every call (128 random
 * bits): output of the session's programs cannot end another call than the one it belongs to
 * without reading the driver's memory, and a session's programs can only confuse their own
 * session. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

#define TC_SESSION_NONCE_LEN 32          /* hex */
#define TC_SESSION_META_MAX  (16u << 20) /* the end marker's JSON (figures included) */

void tc_session_nonce(char out[TC_SESSION_NONCE_LEN + 1]);

/* The frame for one call. flags: "plots" or "-". 0 or -ENOMEM. */
int tc_session_frame(struct tc_buf *out, const char *nonce, const char *code, size_t code_len,
                     const char *in, size_t in_len, const char *flags);

/* One stream's scanner for one call. */
struct tc_session_scan {
    char mark[8 + TC_SESSION_NONCE_LEN]; /* "\x1eTCS1 " + nonce */
    size_t mark_len;
    char hold[8 + TC_SESSION_NONCE_LEN]; /* a tail that may be the marker's start */
    size_t hold_len;
    int state;          /* 0 before the marker, 1 in its line, 2 after */
    struct tc_buf meta; /* the marker line's rest, without "\n" */
};

void tc_session_scan_init(struct tc_session_scan *s, const char *nonce);
void tc_session_scan_free(struct tc_session_scan *s);
/* Feed raw output. emit(ud, data, len) gets the call's output (everything before the marker);
 * *ret_after the offset in data where what follows the marker line starts (output of no call:
 * the session's programs in the background), or len when the marker line has not ended.
 * Returns 1 when the marker line ended with this piece, 0 otherwise, -E2BIG when it is longer
 * than TC_SESSION_META_MAX. */
int tc_session_scan_feed(struct tc_session_scan *s, const char *data, size_t len,
                         void (*emit)(void *ud, const char *data, size_t len), void *ud,
                         size_t *ret_after);
/* After the end: the stdout marker's JSON (NULL if it is not an object). New reference. */
json_t *tc_session_scan_meta(const struct tc_session_scan *s);
