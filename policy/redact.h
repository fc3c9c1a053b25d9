/* Output redaction: secrets and host details are replaced by "[REDACTED:<rule>]" before any
 * output (stdout, stderr, files, errors, audit, logs) leaves. Pure code: no I/O, fuzzable.
 * Streaming and chunk-boundary safe: the stream holds back a bounded tail that could still be
 * part of a match (only the unfinished line, or up to TC_REDACT_MAX_TOKEN bytes of it), so
 * feeding the same bytes in any split gives exactly the one-shot output.
 * See docs/redaction.md for the rules and what each one matches. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "common/buf.h"

/* Longest match a rule can make (and so the tail a stream holds back), and the longest
 * private-key block swallowed after its BEGIN line. */
#define TC_REDACT_MAX_TOKEN 16384
#define TC_REDACT_MAX_PEM   (64 * 1024)
/* Leased secrets shorter than this are not redacted (they would shred ordinary output);
 * forms longer than TC_REDACT_MAX_TOKEN are skipped. */
#define TC_REDACT_MIN_SECRET  4
#define TC_REDACT_MAX_SECRETS 64

struct tc_redactor; /* compiled built-in rules minus the disabled ones; immutable, thread-safe */

/* Every rule is on but loopback_ip and link_local_ip. enabled: rule names to switch on (from
 * the policy's output.redact.enable), disabled: to switch off (output.redact.disable; a name in
 * both is off); an unknown name is -EINVAL; "secret" is accepted but has no effect (leased
 * values are always redacted). host_paths: extra absolute literal paths (the state dir)
 * redacted as "host_path" wherever they appear as a path prefix. 0, -EINVAL or -ENOMEM. */
int tc_redactor_new(const char *const *disabled, size_t ndisabled, const char *const *enabled,
                    size_t nenabled, const char *const *host_paths, size_t nhost_paths,
                    struct tc_redactor **ret);
void tc_redactor_free(struct tc_redactor *r); /* NULL is a no-op */

/* The stable rule names, for policy validation and docs (static storage). */
const char *const *tc_redact_rule_names(size_t *ret_n);

struct tc_redact_stream; /* one per output stream; not thread-safe itself */

/* secrets: the exact values leased to this execution (copied); they and their base64 (standard
 * and URL-safe, padded or not, at any 3-byte alignment), hex (lower/upper) and URL-encoded forms
 * are redacted as rule "secret", whatever the redactor disables. At most TC_REDACT_MAX_SECRETS.
 * 0, -EINVAL or -ENOMEM. */
int tc_redact_stream_new(const struct tc_redactor *r, const char *const *secrets, size_t nsecrets,
                         struct tc_redact_stream **ret);
/* Appends the redacted text that is final to out; holds back at most TC_REDACT_MAX_TOKEN bytes
 * that might still be part of a match. 0, -ENOMEM, or -E2BIG when out's cap is reached (out is
 * then partially filled; the stream should be abandoned). */
int tc_redact_stream_feed(struct tc_redact_stream *s, const char *data, size_t len,
                          struct tc_buf *out);
/* Flushes the held-back tail (end of stream). Feeding after finish is -EINVAL. */
int tc_redact_stream_finish(struct tc_redact_stream *s, struct tc_buf *out);
/* {"rule": count} of the redactions made so far (rules with zero omitted). New reference, NULL on
 * ENOMEM. */
json_t *tc_redact_stream_counts(const struct tc_redact_stream *s);
/* Total redactions made so far. */
size_t tc_redact_stream_total(const struct tc_redact_stream *s);
void tc_redact_stream_free(struct tc_redact_stream *s); /* NULL is a no-op */

/* One-shot: redact data[0..len) into a new NUL-terminated *ret_out (caller frees); the counts are
 * added into counts (an object; may be NULL). Same output as a stream fed the same bytes. */
int tc_redact_buffer(const struct tc_redactor *r, const char *const *secrets, size_t nsecrets,
                     const char *data, size_t len, char **ret_out, size_t *ret_len, json_t *counts);
