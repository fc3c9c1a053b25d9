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
    /* neither an empty repository nor an empty tag ("a:", ":b", "reg:5000/a:") */
    if (ref[name_len - 1] == ':' || ref[0] == ':')
        return false;
    return ref[0] != '/' && ref[0] != '.' && ref[0] != '-';
}

/* The length of name's repository part and its tag ("latest" when it has none); a port in the
 * host part ("host:5000/repo") is not a tag. */
static size_t split_tag(const char *name, const char **ret_tag)
{
    const char *at = strchr(name, '@');
    size_t n = at ? (size_t)(at - name) : strlen(name);
    const char *slash = memrchr(name, '/', n);
    const char *colon =
        memchr(slash ? slash : name, ':', n - (size_t)((slash ? slash : name) - name));
    if (!colon) {
        *ret_tag = "latest";
        return n;
    }
    *ret_tag = colon + 1;
    return (size_t)(colon - name);
}

bool tc_image_name_same(const char *a, const char *b)
{
    if (!a || !b || !a[0] || !b[0])
        return false;
    const char *ta, *tb;
    size_t na = split_tag(a, &ta), nb = split_tag(b, &tb);
    size_t la = strcspn(ta, "@"), lb = strcspn(tb, "@");
    return na == nb && !strncmp(a, b, na) && la == lb && !strncmp(ta, tb, la);
}
