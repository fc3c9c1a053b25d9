/* The session wire (execution/session.h): the request frame, and the end-of-call scanner
 * fed the driver's output split at every place and at random, with look-alike markers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execution/session.h"
#include "tap.h"

static const char NONCE[] = "0123456789abcdef0123456789abcdef";

static void collect(void *ud, const char *data, size_t len)
{
    if (tc_buf_append(ud, data, len) < 0)
        abort();
}

/* Feed text in pieces cut at cuts[0..n); the call's output, what followed the marker line,
 * and whether it ended. */
static int run_scan(const char *text, size_t len, const size_t *cuts, size_t n, struct tc_buf *out,
                    struct tc_buf *after, json_t **meta)
{
    struct tc_session_scan s;
    tc_session_scan_init(&s, NONCE);
    int ended = 0;
    size_t prev = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t end = i < n ? cuts[i] : len, a = 0;
        int r = tc_session_scan_feed(&s, text + prev, end - prev, collect, out, &a);
        if (r < 0)
            return r;
        if (r == 1 || ended)
            collect(after, text + prev + a, end - prev - a);
        ended |= r == 1;
        prev = end;
    }
    *meta = tc_session_scan_meta(&s);
    tc_session_scan_free(&s);
    return ended;
}

TEST(frame)
{
    struct tc_buf b;
    tc_buf_init(&b, 1 << 20);
    CHECK(tc_session_frame(&b, NONCE, "print(1)", 8, "in\n", 3, "plots") == 0);
    CHECK(strcmp(b.data, "TCS1 0123456789abcdef0123456789abcdef 8 3 plots\nprint(1)in\n") == 0);
    tc_buf_free(&b);
    char a[TC_SESSION_NONCE_LEN + 1], c[TC_SESSION_NONCE_LEN + 1];
    tc_session_nonce(a);
    tc_session_nonce(c);
    CHECK(strlen(a) == TC_SESSION_NONCE_LEN && strcmp(a, c) != 0);
}

TEST(scan_every_split)
{
    /* look-alikes first: the marker's start, another nonce, a nonce's prefix */
    const char text[] =
        "out\x1eTCS1 0123456789abcdef0123456789abcdeX \x1e\x1eTCS1 "
        "0123456789\x1eTCS1 ffff\x1eT"
        "\x1eTCS1 0123456789abcdef0123456789abcdef {\"status\":\"ok\",\"result\":\"2\"}\n"
        "later";
    size_t len = sizeof(text) - 1;
    const char *want_end = strstr(text, "\x1eTCS1 0123456789abcdef0123456789abcdef {");
    size_t want_out = (size_t)(want_end - text);
    int bad = 0;
    for (size_t i = 0; i <= len; i++)
        for (size_t j = i; j <= len; j++) {
            size_t cuts[2] = {i, j};
            struct tc_buf out, after;
            tc_buf_init(&out, 1 << 20);
            tc_buf_init(&after, 1 << 20);
            json_t *meta = NULL;
            int r = run_scan(text, len, cuts, 2, &out, &after, &meta);
            if (r != 1 || out.len != want_out || memcmp(out.data, text, want_out) != 0 ||
                !after.data || strcmp(after.data, "later") != 0 || !meta ||
                strcmp(json_string_value(json_object_get(meta, "result")), "2") != 0) {
                if (!bad++)
                    fprintf(stderr, "#   cuts %zu %zu: r=%d out=%zu after=%s\n", i, j, r, out.len,
                            after.data ? after.data : "");
            }
            json_decref(meta);
            tc_buf_free(&out);
            tc_buf_free(&after);
        }
    CHECK(bad == 0);
}

TEST(scan_random_and_stderr)
{
    /* a long output of near-markers, cut at random; stderr's marker has no JSON */
    struct tc_buf text;
    tc_buf_init(&text, 1 << 22);
    srand(7);
    for (int i = 0; i < 20000; i++) {
        int k = rand() % 4;
        if (k == 0)
            CHECK(tc_buf_append(&text, "\x1eTCS1 0123456789abcdef", 21) == 0);
        else if (k == 1)
            CHECK(tc_buf_append(&text, "\x1e", 1) == 0);
        else
            CHECK(tc_buf_append(&text, "abc\n", 4) == 0);
    }
    size_t want_out = text.len;
    CHECK(tc_buf_appendf(&text, "\x1eTCS1 %s\nbg", NONCE) == 0);
    for (int round = 0; round < 50; round++) {
        size_t cuts[64], n = 0, prev = 0;
        while (n < 64 && prev < text.len) {
            prev += 1 + (size_t)rand() % (round < 25 ? 40 : 20000);
            if (prev < text.len)
                cuts[n++] = prev;
        }
        struct tc_buf out, after;
        tc_buf_init(&out, 1 << 22);
        tc_buf_init(&after, 1 << 20);
        json_t *meta = NULL;
        int r = run_scan(text.data, text.len, cuts, n, &out, &after, &meta);
        CHECK(r == 1 && out.len == want_out && memcmp(out.data, text.data, want_out) == 0);
        CHECK(after.data && strcmp(after.data, "bg") == 0);
        CHECK(json_is_object(meta) && json_object_size(meta) == 0);
        json_decref(meta);
        tc_buf_free(&out);
        tc_buf_free(&after);
    }
    tc_buf_free(&text);
}

TEST(scan_meta_bounded_and_invalid)
{
    struct tc_session_scan s;
    size_t a;
    tc_session_scan_init(&s, NONCE);
    struct tc_buf out;
    tc_buf_init(&out, 1 << 20);
    char mark[64];
    snprintf(mark, sizeof(mark), "\x1eTCS1 %s ", NONCE);
    CHECK(tc_session_scan_feed(&s, mark, strlen(mark), collect, &out, &a) == 0);
    char *big = malloc(1 << 20);
    memset(big, 'x', 1 << 20);
    int r = 0;
    for (int i = 0; i < 17 && r == 0; i++)
        r = tc_session_scan_feed(&s, big, 1 << 20, collect, &out, &a);
    CHECK(r == -E2BIG); /* a marker line longer than the bound is refused, not buffered */
    free(big);
    tc_session_scan_free(&s);
    tc_session_scan_init(&s, NONCE);
    snprintf(mark, sizeof(mark), "\x1eTCS1 %s [1]\n", NONCE);
    CHECK(tc_session_scan_feed(&s, mark, strlen(mark), collect, &out, &a) == 1);
    CHECK(tc_session_scan_meta(&s) == NULL); /* not an object */
    CHECK(out.len == 0);
    tc_session_scan_free(&s);
    tc_buf_free(&out);
}

int main(void)
{
    RUN(frame);
    RUN(scan_every_split);
    RUN(scan_random_and_stderr);
    RUN(scan_meta_bounded_and_invalid);
    return TAP_DONE();
}
