/* libFuzzer target: the redactor. Input: [nsplits][secret len][secret][text]; the text is
 * redacted one-shot and streamed with split points taken from the input, and the outputs must
 * be identical; the secret must not survive in the output. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tc_redactor *R;

/* True when some occurrence of the secret in out is made of output bytes alone, i.e. does not
 * overlap a "[REDACTED:...]" marker. A marker's own bytes may combine with neighbouring text
 * into the secret (secret "]]]]", text "]]]]]]]" -> "[REDACTED:secret]]]]"): that is not the
 * secret surviving, and no redactor could avoid it for every secret. */
static bool survives(const char *out, size_t len, const char *secret, size_t sl)
{
    for (const char *p = out; (p = memmem(p, len - (size_t)(p - out), secret, sl)); p++) {
        size_t at = (size_t)(p - out);
        bool covered = false;
        for (const char *m = out;
             !covered && (m = memmem(m, len - (size_t)(m - out), "[REDACTED:", 10));) {
            const char *end = memchr(m, ']', len - (size_t)(m - out));
            if (!end)
                break;
            size_t ms = (size_t)(m - out), me = (size_t)(end - out) + 1;
            covered = at < me && at + sl > ms;
            m = end;
        }
        if (!covered)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!R) {
        const char *paths[] = {"/var/lib/toolcage"};
        if (tc_redactor_new(NULL, 0, NULL, 0, paths, 1, &R) < 0)
            abort();
    }
    if (size < 2)
        return 0;
    size_t nsplit = data[0] % 8, sl = data[1] % 24;
    data += 2, size -= 2;
    if (sl > size)
        sl = size;
    char secret[32];
    memcpy(secret, data, sl);
    secret[sl] = '\0';
    bool usable = strlen(secret) == sl && sl >= TC_REDACT_MIN_SECRET;
    const char *secrets[] = {secret};
    data += sl, size -= sl;

    char *one = NULL;
    size_t onelen = 0;
    if (tc_redact_buffer(R, secrets, 1, (const char *)data, size, &one, &onelen, NULL) < 0)
        abort();

    struct tc_redact_stream *s = NULL;
    struct tc_buf out;
    tc_buf_init(&out, SIZE_MAX / 2);
    if (tc_redact_stream_new(R, secrets, 1, &s) < 0)
        abort();
    size_t pos = 0;
    for (size_t k = 0; k < nsplit && pos < size; k++) {
        size_t step = (size_t)((data[(pos * 7 + k) % size] * 131u + k * 17u) % (size - pos + 1));
        if (tc_redact_stream_feed(s, (const char *)data + pos, step, &out) < 0)
            abort();
        pos += step;
    }
    if (tc_redact_stream_feed(s, (const char *)data + pos, size - pos, &out) < 0 ||
        tc_redact_stream_finish(s, &out) < 0)
        abort();
    if (out.len != onelen || memcmp(out.data ? out.data : "", one, onelen) != 0)
        abort(); /* streaming must equal one-shot */
    if (usable && survives(one, onelen, secret, sl))
        abort(); /* a leased secret survived */
    tc_redact_stream_free(s);
    tc_buf_free(&out);
    free(one);
    return 0;
}
