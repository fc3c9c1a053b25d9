#include "common/buf.h"

#include <stdio.h>
#include <string.h>

void tc_buf_init(struct tc_buf *b, size_t cap)
{
    *b = (struct tc_buf){.cap = cap};
}

void tc_buf_free(struct tc_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
}

void tc_buf_reset(struct tc_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int buf_reserve(struct tc_buf *b, size_t extra)
{
    if (extra > b->cap || b->len > b->cap - extra)
        return -E2BIG;
    size_t need = b->len + extra + 1;
    if (need <= b->alloc)
        return 0;
    size_t na = b->alloc ? b->alloc : 256;
    while (na < need)
        na *= 2;
    char *nd = realloc(b->data, na);
    if (!nd)
        return -ENOMEM;
    b->data = nd;
    b->alloc = na;
    return 0;
}

int tc_buf_append(struct tc_buf *b, const void *data, size_t len)
{
    int r = buf_reserve(b, len);
    if (r < 0)
        return r;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int tc_buf_vappendf(struct tc_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return -EINVAL;
    int r = buf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int tc_buf_appendf(struct tc_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = tc_buf_vappendf(b, fmt, ap);
    va_end(ap);
    return r;
}

char *tc_buf_steal(struct tc_buf *b, size_t *ret_len)
{
    char *d = b->data;
    if (!d) {
        d = calloc(1, 1);
        if (!d)
            return NULL;
    }
    if (ret_len)
        *ret_len = b->len;
    b->data = NULL;
    b->len = b->alloc = 0;
    return d;
}
