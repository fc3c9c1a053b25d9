/* Files compiled into the binary (migrations, openapi.yaml, console templates). */
#pragma once
#include <stddef.h>

struct tc_embedded {
    const char *name; /* path relative to the source tree, e.g. "migrations/0001_init.sql" */
    const unsigned char *data; /* NUL-terminated for convenience; len excludes it */
    size_t len;
};

/* Terminated by an entry with name == NULL. Defined in the generated embedded.c. */
extern const struct tc_embedded tc_embedded_files[];

/* NULL if no such file was embedded. */
const struct tc_embedded *tc_embedded_find(const char *name);
