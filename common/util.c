#include "common/util.h"

#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int tc_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
    /* strtoll would skip leading white space and accept a '+': a strict parser does not */
    if (!s || !(*s == '-' || (*s >= '0' && *s <= '9')))
        return -EINVAL;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    if (end == s || *end != '\0')
        return -EINVAL;
    if (v < min || v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

int tc_parse_iso_utc(const char *s, int64_t *ret_ms)
{
    size_t n = s ? strlen(s) : 0;
    if (n != 10 && n != 20 && n != 24)
        return -EINVAL;
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (size_t i = 0; i < n; i++) {
        char want = (n == 20 && i == 19) ? 'Z' : shape[i];
        if (want == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != want)
            return -EINVAL;
    }
    int v[7] = {0};
    static const int at[7] = {0, 5, 8, 11, 14, 17, 20}, len[7] = {4, 2, 2, 2, 2, 2, 3};
    for (int k = 0; k < 7; k++) {
        if ((size_t)at[k] >= n)
            break;
        for (int i = 0; i < len[k]; i++)
            v[k] = v[k] * 10 + (s[at[k] + i] - '0');
    }
    if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[3] > 23 || v[4] > 59 || v[5] > 59)
        return -EINVAL;
    struct tm tm = {.tm_year = v[0] - 1900,
                    .tm_mon = v[1] - 1,
                    .tm_mday = v[2],
                    .tm_hour = v[3],
                    .tm_min = v[4],
                    .tm_sec = v[5]};
    time_t t = timegm(&tm);
    /* timegm normalises 31 February into March: a real date comes back unchanged */
    if (t == (time_t)-1 || tm.tm_mday != v[2] || tm.tm_mon != v[1] - 1)
        return -EINVAL;
    *ret_ms = (int64_t)t * 1000 + v[6];
    return 0;
}

int tc_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int tc_read_all(int fd, size_t max, char **ret_buf, size_t *ret_len)
{
    size_t alloc = 4096, len = 0;
    char *buf = malloc(alloc);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len + 1 >= alloc) {
            if (alloc > max + 1) {
                free(buf);
                return -EFBIG;
            }
            size_t na = alloc * 2;
            char *nb = realloc(buf, na);
            if (!nb) {
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
            alloc = na;
        }
        ssize_t n = read(fd, buf + len, alloc - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int r = -errno;
            free(buf);
            return r;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max) {
            free(buf);
            return -EFBIG;
        }
    }
    buf[len] = '\0';
    *ret_buf = buf;
    if (ret_len)
        *ret_len = len;
    return 0;
}

int tc_read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    return tc_read_all(fd, max, ret_buf, ret_len);
}

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tc_now_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}
int64_t tc_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timespec tc_timespec_in(clockid_t clock, int64_t ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    if (ms < 0)
        ms = 0;
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
int64_t tc_wall_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

void tc_uuid7(char out[37])
{
    unsigned char b[16];
    uint64_t ms = (uint64_t)tc_wall_ms();
    randombytes_buf(b, sizeof(b));
    for (int i = 0; i < 6; i++)
        b[i] = (unsigned char)(ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | (b[6] & 0x0f));
    b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

bool tc_email_address_ok(const char *a)
{
    size_t n = a ? strlen(a) : 0;
    const char *at = a ? strchr(a, '@') : NULL;
    if (n < 3 || n > 254 || !at || at == a || !at[1] || strchr(at + 1, '@'))
        return false;
    for (const char *p = a; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || strchr("<>()[]\\,;:\"", *p))
            return false;
    return true;
}

bool tc_uuid_valid(const char *s)
{
    if (!s || strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return false;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

bool tc_utf8_valid(const char *s, size_t len, bool allow_nul)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) {
            if (c == 0 && !allow_nul)
                return false;
            p++;
            continue;
        }
        size_t n;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if ((size_t)(end - p) <= n)
            return false;
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        /* overlong, surrogates, beyond U+10FFFF */
        if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        p += n + 1;
    }
    return true;
}

void tc_iso8601(int64_t wall_ms, char out[32])
{
    time_t sec = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char tmp[96]; /* roomy enough for any int fields, so the compiler can prove no truncation */
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(wall_ms % 1000));
    snprintf(out, 32, "%.31s", tmp);
}

static bool is_executable_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int tc_find_runsc(char *ret, size_t size)
{
    static const char *const dirs[] = {"/usr/bin", "/usr/sbin", "/usr/local/bin"};
    char cand[PATH_MAX];
    const char *path = getenv("PATH");

    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && path[0] == '/' && n + sizeof("/runsc") <= sizeof(cand)) {
            snprintf(cand, sizeof(cand), "%.*s/runsc", (int)n, path);
            if (is_executable_file(cand))
                goto found;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    for (size_t i = 0; i < TC_ARRAY_SIZE(dirs); i++) {
        snprintf(cand, sizeof(cand), "%s/runsc", dirs[i]);
        if (is_executable_file(cand))
            goto found;
    }
    return -ENOENT;
found:
    if ((size_t)snprintf(ret, size, "%s", cand) >= size)
        return -ENAMETOOLONG;
    return 0;
}

int tc_hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int tc_path_clean(const char *path, char *out, size_t outlen)
{
    size_t n = 0;
    if (outlen < 2)
        return -ENAMETOOLONG;
    for (const char *p = path ? path : ""; *p;) {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--;
        } else if (len > 255 || (len > 0 && n + 1 + len + 1 > outlen)) {
            return -ENAMETOOLONG;
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            out[n++] = '/';
            memcpy(out + n, p, len);
            n += len;
        }
        p += len;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    return 0;
}
