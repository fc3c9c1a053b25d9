/* Internal to the pre-screener: per-language normalisation of code into a text the rules scan.
 * Not an API for other modules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

enum ps_lang { PS_NONE, PS_PYTHON, PS_SHELL, PS_JS };

/* Marks a string literal whose value was produced by decoding (base64, hex, rot13, chr(),
 * escapes, reversal, joins): the normalised text shows it as "\x01value". */
#define PS_DECODED_MARK '\x01'

#define PS_MAX_DEPTH      3          /* decoded payloads re-scanned at most this deep */
#define PS_MAX_NORM_BYTES (8u << 20) /* normalised text of one scan, all jobs together */

/* A note the normaliser itself raises (dynamic import, string-built attribute name, ...). */
struct ps_note {
    const char *rule;
    int severity; /* enum tc_severity */
    uint32_t src; /* offset in the original code */
    const char *message;
};

/* A decoded payload or code string to scan again (as lang) and report at src. */
struct ps_job {
    enum ps_lang lang;
    char *code;
    size_t len;
    uint32_t src;
    int depth;
};

struct ps_norm {
    struct tc_buf text; /* normalised text */
    uint32_t *map;      /* map[i]: offset in the original code of text byte i */
    size_t mapalloc;
    struct ps_note *notes;
    size_t nnotes, notesalloc;
    struct ps_job *jobs;
    size_t njobs, jobsalloc;
};

/* Normalise code (as lang). When depth > 0 every position maps to origin (the payload came from
 * there). Appends to n (text, map, notes, jobs). 0 or -ENOMEM; past the size caps the text is
 * truncated, not an error. */
int ps_normalise(enum ps_lang lang, const char *code, size_t len, int depth, uint32_t origin,
                 struct ps_norm *n);
void ps_norm_free(struct ps_norm *n);
