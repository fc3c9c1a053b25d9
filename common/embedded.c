#include "common/embedded.h"

#include <string.h>

/* Weak so that unit tests, which link only tccore, do not need the generated table. */
__attribute__((weak)) const struct tc_embedded tc_embedded_files[] = {{NULL, NULL, 0}};

const struct tc_embedded *tc_embedded_find(const char *name)
{
    for (const struct tc_embedded *e = tc_embedded_files; e->name; e++)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}
