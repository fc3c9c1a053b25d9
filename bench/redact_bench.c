/* Redaction throughput on mixed text (prose, code, logs, JSON, base64, with a secret every few
 * KiB), one core. Prints MB/s one-shot and streaming (64 KiB feeds) and, as a baseline measured
 * in the same run, memcpy and a plain memchr scan of the same bytes.
 * Usage: redact_bench [MiB] (default 64). Exit 1 if streaming is below 200 MB/s and
 * TOOLCAGE_BENCH_ENFORCE=1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "policy/redact.h"

static const char *const pieces[] = {
    "2024-05-01T12:00:01.123Z INFO request id=4f1c2e7a-9b3d-4e21-8c5a-1f2e3d4c5b6a method=GET "
    "path=/v1/tools status=200 dur_ms=3\n",
    "The quick brown fox jumps over the lazy dog while the service processes requests from many "
    "tenants.\n",
    "def process(rows):\n    total = 0\n    for row in rows:\n        total += "
    "int(row['amount'])\n    return total\n",
    "{\"id\": 1234, \"name\": \"widget\", \"tags\": [\"a\", \"b\"], \"price\": 19.99, \"sha\": "
    "\"e3b0c44298fc1c149afbf4c8996fb924\"}\n",
    "for f in *.csv; do wc -l \"$f\" >> counts.txt; done  # count lines per file, version 1.2.3\n",
    "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 12, in "
    "<module>\nValueError: bad value\n",
    "SGVsbG8sIFdvcmxkIQ== dGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcw== aGVsbG8gd29ybGQgYWdhaW4=\n",
    "const result = items.filter(x => x.enabled).map(x => ({ key: x.key, value: x.value }));\n",
    "connected to 10.0.3.17:5432 as app; password=hunter2 set; token "
    "ghp_aB3dE5gH7jK9mN1pQ2sT4vW6yZ8cF0aB3dE5\n",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut "
    "labore.\n",
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 64;
    size_t size = (mib ? mib : 64) << 20, n = 0, i = 0;
    char *text = malloc(size + 256), *copy = malloc(size + 256);
    struct tc_redactor *r = NULL;
    const char *paths[] = {"/var/lib/toolcage"};
    const char *secrets[] = {"leased-S3cret-value"};

    if (!text || !copy || tc_redactor_new(NULL, 0, NULL, 0, paths, 1, &r) < 0)
        return 2;
    /* the secret-bearing line appears once per ~1 KiB (1 in 10 pieces) */
    while (n < size) {
        const char *p = pieces[(i * 7) % TC_ARRAY_SIZE(pieces)];
        size_t l = strlen(p);
        if (n + l > size)
            break;
        memcpy(text + n, p, l);
        n += l;
        i++;
    }
    double mb = (double)n / 1e6;

    memset(copy, 0, n); /* fault the pages in: measure the copy, not the kernel */
    double t0 = now_s();
    memcpy(copy, text, n);
    double t_memcpy = now_s() - t0;
    t0 = now_s();
    size_t nl = 0;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + n - p))); p++)
        nl++;
    double t_memchr = now_s() - t0;

    char *out = NULL;
    size_t outlen = 0;
    json_t *counts = json_object();
    t0 = now_s();
    if (tc_redact_buffer(r, secrets, 1, text, n, &out, &outlen, counts) < 0)
        return 2;
    double t_one = now_s() - t0;

    struct tc_redact_stream *s = NULL;
    struct tc_buf b;
    tc_buf_init(&b, SIZE_MAX / 2);
    if (tc_redact_stream_new(r, secrets, 1, &s) < 0)
        return 2;
    /* the consumer takes each piece of output away (as the server does): the output buffer is
     * reused, and compared with the one-shot output as it goes */
    size_t done = 0;
    int same = 1;
    t0 = now_s();
    for (size_t off = 0; off < n; off += 65536) {
        if (tc_redact_stream_feed(s, text + off, n - off < 65536 ? n - off : 65536, &b) < 0)
            return 2;
        same &= done + b.len <= outlen && memcmp(b.data ? b.data : "", out + done, b.len) == 0;
        done += b.len;
        tc_buf_reset(&b);
    }
    if (tc_redact_stream_finish(s, &b) < 0)
        return 2;
    double t_stream = now_s() - t0;
    same &= done + b.len == outlen && memcmp(b.data ? b.data : "", out + done, b.len) == 0;

    char *cj = json_dumps(counts, JSON_SORT_KEYS);
    printf("redact_bench: %.1f MB of mixed text (%zu lines), one core\n", mb, nl);
    printf("  baseline memcpy        %8.0f MB/s\n", mb / t_memcpy);
    printf("  baseline memchr scan   %8.0f MB/s\n", mb / t_memchr);
    printf("  redact one-shot        %8.0f MB/s  (%.2fx memcpy time)\n", mb / t_one,
           t_one / t_memcpy);
    printf("  redact stream 64 KiB   %8.0f MB/s  (target >= 200 MB/s: %s)\n", mb / t_stream,
           mb / t_stream >= 200 ? "met" : "NOT MET");
    printf("  stream == one-shot: %s; redactions: %s\n", same ? "yes" : "NO", cj ? cj : "?");
    free(cj);
    json_decref(counts);
    tc_redact_stream_free(s);
    tc_buf_free(&b);
    free(out);
    free(text);
    free(copy);
    tc_redactor_free(r);
    const char *enforce = getenv("TOOLCAGE_BENCH_ENFORCE");
    if (!same || (enforce && strcmp(enforce, "1") == 0 && mb / t_stream < 200))
        return 1;
    return 0;
}
