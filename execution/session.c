/* A session's wire to its driver (execution/session.h). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "execution/session.h"

void tc_session_nonce(char out[TC_SESSION_NONCE_LEN + 1])
{
    unsigned char r[TC_SESSION_NONCE_LEN / 2];
    randombytes_buf(r, sizeof(r));
    sodium_bin2hex(out, TC_SESSION_NONCE_LEN + 1, r, sizeof(r));
}

int tc_session_frame(struct tc_buf *out, const char *nonce, const char *code, size_t code_len,
                     const char *in, size_t in_len, const char *flags)
{
    if (tc_buf_appendf(out, "TCS1 %s %zu %zu %s\n", nonce, code_len, in_len, flags) < 0 ||
        (code_len && tc_buf_append(out, code, code_len) < 0) ||
        (in_len && tc_buf_append(out, in, in_len) < 0))
        return -ENOMEM;
    return 0;
}

void tc_session_scan_init(struct tc_session_scan *s, const char *nonce)
{
    memset(s, 0, sizeof(*s));
    s->mark_len = (size_t)snprintf(s->mark, sizeof(s->mark), "\x1eTCS1 %s", nonce);
    tc_buf_init(&s->meta, TC_SESSION_META_MAX);
}

void tc_session_scan_free(struct tc_session_scan *s)
{
    tc_buf_free(&s->meta);
}

/* The longest tail of data[0..len) that is a start of the marker (shorter than it). */
static size_t partial_tail(const struct tc_session_scan *s, const char *data, size_t len)
{
    size_t max = len < s->mark_len - 1 ? len : s->mark_len - 1;
    for (size_t n = max; n > 0; n--)
        if (memcmp(data + len - n, s->mark, n) == 0)
            return n;
    return 0;
}

/* In the marker line: up to its "\n". */
static int meta_feed(struct tc_session_scan *s, const char *data, size_t len, size_t *used)
{
    const char *nl = memchr(data, '\n', len);
    size_t n = nl ? (size_t)(nl - data) : len;
    if (tc_buf_append(&s->meta, data, n) < 0)
        return -E2BIG;
    *used = nl ? n + 1 : len;
    if (!nl)
        return 0;
    s->state = 2;
    return 1;
}

/* Before the marker, buf[0..n) with nothing held: emit up to the marker (then its line) or
 * all but a tail that may start it. shift: buf's offset minus data's (for *ret_after). */
static int plain_feed(struct tc_session_scan *s, const char *buf, size_t n, size_t shift,
                      void (*emit)(void *, const char *, size_t), void *ud, size_t *ret_after)
{
    const char *m = memmem(buf, n, s->mark, s->mark_len);
    if (!m) {
        size_t p = partial_tail(s, buf, n);
        if (n - p)
            emit(ud, buf, n - p);
        memcpy(s->hold, buf + n - p, p);
        s->hold_len = p;
        return 0;
    }
    size_t before = (size_t)(m - buf), start = before + s->mark_len, used = 0;
    if (before)
        emit(ud, buf, before);
    s->state = 1;
    int r = meta_feed(s, buf + start, n - start, &used);
    if (r == 1)
        *ret_after = start + used - shift;
    return r;
}

int tc_session_scan_feed(struct tc_session_scan *s, const char *data, size_t len,
                         void (*emit)(void *ud, const char *data, size_t len), void *ud,
                         size_t *ret_after)
{
    size_t used = 0;
    *ret_after = len;
    if (s->state == 2) {
        *ret_after = 0;
        return 0;
    }
    if (s->state == 1) {
        int r = meta_feed(s, data, len, &used);
        if (r == 1)
            *ret_after = used;
        return r;
    }
    if (s->hold_len == 0)
        return plain_feed(s, data, len, 0, emit, ud, ret_after);
    /* A held tail: a marker starting in it ends within the next mark_len - 1 bytes. */
    char combo[2 * sizeof(s->hold)];
    size_t held = s->hold_len, take = len < s->mark_len - 1 ? len : s->mark_len - 1;
    memcpy(combo, s->hold, held);
    memcpy(combo + held, data, take);
    s->hold_len = 0;
    if (take == len) /* all of this piece is in combo */
        return plain_feed(s, combo, held + take, held, emit, ud, ret_after);
    const char *m = memmem(combo, held + take, s->mark, s->mark_len);
    if (m && (size_t)(m - combo) < held) {
        size_t before = (size_t)(m - combo), start = before + s->mark_len - held;
        if (before)
            emit(ud, combo, before);
        s->state = 1;
        int r = meta_feed(s, data + start, len - start, &used);
        if (r == 1)
            *ret_after = start + used;
        return r;
    }
    emit(ud, combo, held); /* no marker starts in it */
    return plain_feed(s, data, len, 0, emit, ud, ret_after);
}

json_t *tc_session_scan_meta(const struct tc_session_scan *s)
{
    if (s->state != 2)
        return NULL;
    const char *m = s->meta.data ? s->meta.data : "";
    while (*m == ' ')
        m++;
    if (!*m)
        return json_object(); /* stderr's marker has no JSON */
    json_t *j = json_loadb(m, strlen(m), JSON_REJECT_DUPLICATES, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}
