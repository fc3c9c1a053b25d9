/* A growable byte buffer with a hard cap (after curl's dynbuf). */
#pragma once
#include <stdarg.h>
#include <stddef.h>
#include "common/util.h"

struct tc_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t alloc;
    size_t cap; /* appends that would exceed this fail with -E2BIG */
};

void tc_buf_init(struct tc_buf *b, size_t cap);
void tc_buf_free(struct tc_buf *b);
void tc_buf_reset(struct tc_buf *b);
int tc_buf_append(struct tc_buf *b, const void *data, size_t len) TC_WARN_UNUSED;
int tc_buf_appendf(struct tc_buf *b, const char *fmt, ...) TC_PRINTF(2, 3) TC_WARN_UNUSED;
int tc_buf_vappendf(struct tc_buf *b, const char *fmt, va_list ap) TC_PRINTF(2, 0) TC_WARN_UNUSED;
/* Hand the data out (caller frees); the buffer is reset. Never NULL: an empty buffer gives "". */
char *tc_buf_steal(struct tc_buf *b, size_t *ret_len);
