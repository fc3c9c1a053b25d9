/* Image references and digests (image.h): pure string checks, no store, no I/O (the policy
 * loader and the fuzzers use them alone). */
#include <string.h>

#include "image/image.h"

bool tc_image_hex_valid(const char *s)
{
    size_t i = 0;
    for (; s && s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return i == TC_IMAGE_HEX_LEN;
}

static bool digest_valid(const char *s)
{
    return s && strncmp(s, "sha256:", 7) == 0 && tc_image_hex_valid(s + 7);
}

bool tc_image_ref_valid(const char *ref)
{
    size_t n = ref ? strlen(ref) : 0;
    if (n == 0 || n > TC_IMAGE_REF_MAX)
        return false;
    if (strncmp(ref, "sha256:", 7) == 0)
        return digest_valid(ref);
    const char *at = strchr(ref, '@');
    if (at && !digest_valid(at + 1))
        return false;
    size_t name_len = at ? (size_t)(at - ref) : n;
    if (name_len == 0)
        return false;
    for (size_t i = 0; i < name_len; i++) {
        char c = ref[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '/' || c == ':'))
            return false;
    }
    return ref[0] != '/' && ref[0] != '.' && ref[0] != '-';
}
