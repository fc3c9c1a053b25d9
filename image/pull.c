/* Pulling an image from a registry (image.h, tc_image_pull): the distribution API v2
 * (GET /v2/<repo>/manifests/<ref>, GET /v2/<repo>/blobs/<digest>) through libcurl, with the
 * registry's own authentication (a Bearer token from the realm its 401 names, or Basic).
 * Every manifest, config and layer is verified against its digest before it is stored; a
 * layer download that stops is resumed from what images/partial/ holds. Then the image is
 * registered as an import is (import.c). */
#include <curl/curl.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"
#include "image/image.h"
#include "image/store.h"

#define ACCEPT_MANIFESTS                                                                           \
    "Accept: application/vnd.oci.image.index.v1+json, "                                            \
    "application/vnd.oci.image.manifest.v1+json, "                                                 \
    "application/vnd.docker.distribution.manifest.list.v2+json, "                                  \
    "application/vnd.docker.distribution.manifest.v2+json"
#define MAX_AUTH_HEADER 4096 /* a WWW-Authenticate we keep */
#define MAX_TOKEN       (64 << 10)

struct ref {
    char host[256];  /* registry host[:port] as the URL has it */
    char repo[272];  /* repository path */
    char tag[130];   /* tag, or "" */
    char digest[72]; /* "sha256:<hex>", or "" */
};

struct puller {
    const char *state_dir;
    const struct tc_image_pull_opts *o;
    struct ref ref;
    CURL *curl;
    char base[600]; /* scheme://host/v2/repo */
    char *authz;    /* "Authorization: ..." header, or NULL */
    bool basic;     /* the registry asked for Basic: credentials on every request */
    char challenge[MAX_AUTH_HEADER];
    int64_t budget; /* bytes we may still download */
    char *err;
    size_t errlen;
};

static int fail(struct puller *p, int r, const char *fmt, ...) TC_PRINTF(3, 4);
static int fail(struct puller *p, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    return r;
}

/* [host/]repo[:tag][@sha256:hex]; a first component with '.' or ':' or "localhost" is the
 * host, otherwise Docker Hub's (and a one-component repo is under library/). */
static int parse_ref(const char *s, struct ref *r)
{
    char buf[TC_IMAGE_REF_MAX + 1];
    memset(r, 0, sizeof(*r));
    if (!tc_image_ref_valid(s) || strncmp(s, "sha256:", 7) == 0)
        return -EINVAL;
    snprintf(buf, sizeof(buf), "%s", s);
    char *at = strchr(buf, '@');
    if (at) {
        snprintf(r->digest, sizeof(r->digest), "%s", at + 1);
        *at = '\0';
    }
    char *slash = strchr(buf, '/');
    char *name = buf;
    if (slash &&
        (memchr(buf, '.', (size_t)(slash - buf)) || memchr(buf, ':', (size_t)(slash - buf)) ||
         (slash - buf == 9 && !strncmp(buf, "localhost", 9)))) {
        *slash = '\0';
        snprintf(r->host, sizeof(r->host), "%s", buf);
        name = slash + 1;
    } else {
        snprintf(r->host, sizeof(r->host), "registry-1.docker.io");
    }
    char *colon = strrchr(name, ':');
    if (colon && !strchr(colon, '/')) {
        snprintf(r->tag, sizeof(r->tag), "%s", colon + 1);
        *colon = '\0';
    }
    if (!name[0] || (!r->tag[0] && !r->digest[0]))
        snprintf(r->tag, sizeof(r->tag), "latest");
    if (!strcmp(r->host, "registry-1.docker.io") && !strchr(name, '/'))
        snprintf(r->repo, sizeof(r->repo), "library/%s", name);
    else
        snprintf(r->repo, sizeof(r->repo), "%s", name);
    return name[0] ? 0 : -EINVAL;
}

/* ---- one request ---- */

struct sink {
    CURL *curl;
    struct tc_buf *buf; /* the body into memory (bounded), or */
    int fd;             /* into a file, hashed */
    crypto_hash_sha256_state *h;
    int64_t got, cap;
    bool over;
};

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    struct sink *s = ud;
    size_t len = size * n;
    long code = 0;
    /* only a 200 or 206 is content: an error's body goes nowhere */
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200 && code != 206)
        return len;
    s->got += (int64_t)len;
    if (s->got > s->cap) {
        s->over = true;
        return 0;
    }
    if (s->buf)
        return tc_buf_append(s->buf, data, len) == 0 ? len : 0;
    if (tc_write_all(s->fd, data, len) < 0)
        return 0;
    crypto_hash_sha256_update(s->h, (const unsigned char *)data, len);
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    struct puller *p = ud;
    size_t len = size * n;
    if (len > 18 && strncasecmp(data, "WWW-Authenticate:", 17) == 0) {
        size_t k = len - 17;
        if (k >= sizeof(p->challenge))
            k = sizeof(p->challenge) - 1;
        memcpy(p->challenge, data + 17, k);
        p->challenge[k] = '\0';
        p->challenge[strcspn(p->challenge, "\r\n")] = '\0';
    }
    return len;
}

/* GET url into sink; *ret_status the final HTTP status. range_from > 0 asks for the rest. */
static int get(struct puller *p, const char *url, const char *accept, struct sink *s,
               int64_t range_from, long *ret_status)
{
    struct curl_slist *h = NULL;
    char range[48];
    CURL *c = p->curl;
    curl_easy_reset(c);
    s->curl = c;
    if (accept)
        h = curl_slist_append(h, accept);
    if (p->authz && !p->basic)
        h = curl_slist_append(h, p->authz);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, p);
    /* blobs are often redirected to object storage: followed, without our Authorization
     * (libcurl sends it to the first host only) */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, p->o->plain_http ? "http,https" : "https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, p->o->plain_http ? "http,https" : "https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 16384L); /* a stalled transfer ends */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    /* and no request holds the store's lock for ever: a manifest or token in 2 minutes, a
     * blob in an hour (a stopped one resumes) */
    curl_easy_setopt(c, CURLOPT_TIMEOUT, s->buf ? 120L : 3600L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "toolcage/" TOOLCAGE_VERSION);
    if (p->o->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, p->o->ca_file);
    if (p->basic && p->o->credentials) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, p->o->credentials);
    }
    if (range_from > 0) {
        snprintf(range, sizeof(range), "%lld-", (long long)range_from);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    p->challenge[0] = '\0';
    CURLcode cc = curl_easy_perform(c);
    curl_slist_free_all(h);
    *ret_status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, ret_status);
    if (s->over)
        return fail(p, -EFBIG, "%s: larger than the bound", url);
    if (cc != CURLE_OK)
        return fail(p, -EIO, "%s: %s", url, curl_easy_strerror(cc));
    return 0;
}

/* key="value" of a challenge's parameters */
static bool challenge_param(const char *ch, const char *key, char *out, size_t len)
{
    size_t k = strlen(key);
    for (const char *q = ch; (q = strstr(q, key)); q += k) {
        if ((q != ch && q[-1] != ' ' && q[-1] != ',') || q[k] != '=' || q[k + 1] != '"')
            continue;
        const char *v = q + k + 2, *end = strchr(v, '"');
        if (!end || (size_t)(end - v) >= len)
            return false;
        memcpy(out, v, (size_t)(end - v));
        out[end - v] = '\0';
        return true;
    }
    return false;
}

/* A 401: get what its challenge asks for (a Bearer token from the realm, or Basic). */
static int authenticate(struct puller *p, const char *what)
{
    char ch[MAX_AUTH_HEADER], realm[1024], service[256] = "", scope[512] = "";
    snprintf(ch, sizeof(ch), "%s", p->challenge);
    const char *s = ch;
    while (*s == ' ')
        s++;
    if (p->authz || p->basic)
        return fail(p, -EACCES, "%s: the registry refused our credentials (401)", what);
    if (strncasecmp(s, "Basic", 5) == 0) {
        if (!p->o->credentials)
            return fail(p, -EACCES, "%s: the registry wants credentials (--credentials-file)",
                        what);
        p->basic = true;
        return 0;
    }
    if (strncasecmp(s, "Bearer", 6) != 0 || !challenge_param(s, "realm", realm, sizeof(realm)))
        return fail(p, -EACCES, "%s: 401 without a challenge we can answer", what);
    if (strncmp(realm, "https://", 8) != 0 && !(p->o->plain_http && !strncmp(realm, "http://", 7)))
        return fail(p, -EACCES, "%s: the token realm %.200s is not https", what, realm);
    challenge_param(s, "service", service, sizeof(service));
    if (!challenge_param(s, "scope", scope, sizeof(scope)))
        snprintf(scope, sizeof(scope), "repository:%s:pull", p->ref.repo);
    char *es = curl_easy_escape(p->curl, service, 0), *esc = curl_easy_escape(p->curl, scope, 0);
    char url[2048];
    snprintf(url, sizeof(url), "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
             es ? es : "", esc ? esc : "");
    curl_free(es);
    curl_free(esc);
    struct tc_buf body;
    tc_buf_init(&body, 4096);
    struct sink sink = {.buf = &body, .cap = MAX_TOKEN};
    long status;
    /* the token endpoint gets the credentials (if any): Basic, as the protocol has it */
    p->basic = p->o->credentials != NULL;
    int r = get(p, url, NULL, &sink, 0, &status);
    p->basic = false;
    if (r == 0 && status != 200)
        r = fail(p, -EACCES, "%s: the token service answered %ld", what, status);
    json_t *j = r == 0 ? json_loadb(body.data, body.len, 0, NULL) : NULL;
    const char *tok = json_string_value(json_object_get(j, "token"));
    if (!tok)
        tok = json_string_value(json_object_get(j, "access_token"));
    if (r == 0 && (!tok || !tok[0] || strlen(tok) > MAX_TOKEN || strpbrk(tok, "\r\n")))
        r = fail(p, -EACCES, "%s: the token service gave no token", what);
    if (r == 0 && asprintf(&p->authz, "Authorization: Bearer %s", tok) < 0) {
        p->authz = NULL;
        r = -ENOMEM;
    }
    json_decref(j);
    sodium_memzero(body.data, body.len);
    tc_buf_free(&body);
    return r;
}

/* GET with the authentication the registry asks for (one round of 401). */
static int get_authed(struct puller *p, const char *url, const char *accept, struct sink *s,
                      int64_t range_from, long *ret_status, const char *what,
                      int (*rewind)(struct sink *))
{
    int r = get(p, url, accept, s, range_from, ret_status);
    if (r == 0 && *ret_status == 401) {
        if ((r = authenticate(p, what)) < 0 || (r = rewind(s)) < 0)
            return r;
        r = get(p, url, accept, s, range_from, ret_status);
    }
    return r;
}

static int rewind_buf(struct sink *s)
{
    tc_buf_reset(s->buf);
    s->got = 0;
    return 0;
}

static int rewind_none(struct sink *s)
{
    (void)s;
    return 0; /* a 401 carries no body we wrote: the file is as it was */
}

static void hex_of(const unsigned char h[crypto_hash_sha256_BYTES], char out[65])
{
    sodium_bin2hex(out, 65, h, crypto_hash_sha256_BYTES);
}

/* A manifest (or index) by tag or digest: verified against want (if any), stored. */
static int fetch_manifest(struct puller *p, const char *ref, const char *want, json_t **ret,
                          char ret_digest[72])
{
    char url[1024], hex[65], path[PATH_MAX];
    unsigned char h[crypto_hash_sha256_BYTES];
    struct tc_buf body;
    long status;
    snprintf(url, sizeof(url), "%s/manifests/%s", p->base, ref);
    tc_buf_init(&body, 8192);
    struct sink s = {.buf = &body, .cap = TC_IMAGE_META_MAX};
    int r = get_authed(p, url, ACCEPT_MANIFESTS, &s, 0, &status, "manifest", rewind_buf);
    if (r == 0 && status != 200)
        r = fail(p, status == 404 ? -ENOENT : -EIO, "%s/%s:%s: the registry answered %ld",
                 p->ref.host, p->ref.repo, ref, status);
    if (r == 0) {
        crypto_hash_sha256(h, (const unsigned char *)body.data, body.len);
        hex_of(h, hex);
        snprintf(ret_digest, 72, "sha256:%s", hex);
        if (want && want[0] && strcmp(want, ret_digest))
            r = fail(p, -EBADMSG, "manifest %s: the registry sent content hashing to %s", want,
                     ret_digest);
    }
    /* (json_is_object evaluates its argument twice: parse first) */
    json_t *j = r == 0 ? json_loadb(body.data, body.len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (r == 0 && !json_is_object(j))
        r = fail(p, -EINVAL, "manifest %s is not a JSON object", ret_digest);
    if (r == 0 && tc_store_path(path, sizeof(path), p->state_dir, "blobs/sha256") == 0) {
        char file[PATH_MAX + 72];
        snprintf(file, sizeof(file), "%s/%s", path, hex);
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        r = fd < 0 ? -errno : tc_write_all(fd, body.data, body.len);
        if (fd >= 0)
            close(fd);
        if (r < 0)
            fail(p, r, "cannot write to the store: %s", strerror(-r));
    }
    tc_buf_free(&body);
    if (r == 0)
        *ret = j;
    else
        json_decref(j);
    return r;
}

/* A blob by digest into the store, unless there: resumed from images/partial/<hex>. */
static int fetch_blob(struct puller *p, const char *digest)
{
    char blobs[PATH_MAX], partial_dir[PATH_MAX], dst[PATH_MAX + 72], part[PATH_MAX + 72], url[1024],
        hex[65];
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    struct stat sb;
    long status;
    int r;

    if (!digest || strncmp(digest, "sha256:", 7) || !tc_image_hex_valid(digest + 7))
        return fail(p, -EINVAL, "a descriptor names no valid sha256 digest");
    if ((r = tc_store_path(blobs, sizeof(blobs), p->state_dir, "blobs/sha256")) < 0 ||
        (r = tc_store_path(partial_dir, sizeof(partial_dir), p->state_dir, "partial")) < 0)
        return r;
    snprintf(dst, sizeof(dst), "%s/%s", blobs, digest + 7);
    if (stat(dst, &sb) == 0)
        return 0;
    if (mkdir(partial_dir, 0700) < 0 && errno != EEXIST)
        return fail(p, -errno, "cannot write to the store: %s", strerror(errno));
    snprintf(part, sizeof(part), "%s/%s", partial_dir, digest + 7);
    int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return fail(p, -errno, "cannot write to the store: %s", strerror(errno));
    /* what an earlier pull got: hashed again, then asked for the rest */
    crypto_hash_sha256_init(&st);
    int64_t have = 0;
    char buf[1 << 16];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0; have += n)
        crypto_hash_sha256_update(&st, (unsigned char *)buf, (size_t)n);
    snprintf(url, sizeof(url), "%s/blobs/%s", p->base, digest);
    struct sink s = {.fd = fd, .h = &st, .cap = p->budget};
    r = get_authed(p, url, NULL, &s, have, &status, "blob", rewind_none);
    if (r == 0 && have > 0 && status == 416) { /* nothing after what we have: whole already? */
        crypto_hash_sha256_state copy = st;
        crypto_hash_sha256_final(&copy, h);
        hex_of(h, hex);
        status = strcmp(hex, digest + 7) == 0 ? 206 : 200;
        if (status == 200) { /* no: the bytes we had are wrong; all of it again */
            if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
                r = -errno;
            } else {
                crypto_hash_sha256_init(&st);
                have = 0;
                s.got = 0;
                r = get(p, url, NULL, &s, 0, &status);
            }
        }
    } else if (r == 0 && have > 0 && status == 200) { /* the registry sent it all again */
        if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
            r = -errno;
        } else {
            crypto_hash_sha256_init(&st);
            have = 0;
            s.got = 0;
            r = get(p, url, NULL, &s, 0, &status);
        }
    }
    if (r == 0 && status != 200 && status != 206)
        r = fail(p, -EIO, "blob %s: the registry answered %ld", digest, status);
    p->budget -= s.got;
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    close(fd);
    if (r == 0) {
        crypto_hash_sha256_final(&st, h);
        hex_of(h, hex);
        if (strcmp(hex, digest + 7) != 0) {
            unlink(part); /* a resume cannot mend it: start over next time */
            r = fail(p, -EBADMSG, "blob %s: the registry sent content hashing to sha256:%s", digest,
                     hex);
        } else if (rename(part, dst) < 0) {
            r = fail(p, -errno, "cannot write to the store: %s", strerror(errno));
        }
    }
    return r;
}

static const char *our_arch(void)
{
    struct utsname u;
    return uname(&u) == 0 && !strcmp(u.machine, "aarch64") ? "arm64" : "amd64";
}

int tc_image_pull(const char *state_dir, const char *ref, const struct tc_image_pull_opts *o,
                  json_t **ret_entry, char *err, size_t errlen)
{
    struct puller p = {.state_dir = state_dir, .o = o, .err = err, .errlen = errlen};
    json_t *m = NULL, *entry = NULL, *l;
    char digest[72] = "", index_digest[72] = "", name[TC_IMAGE_REF_MAX + 1];
    size_t i;
    int lock = -1, r;

    err[0] = '\0';
    p.budget = o->max_bytes > 0 ? o->max_bytes : TC_IMAGE_MAX_BYTES;
    if (parse_ref(ref, &p.ref) < 0)
        return fail(&p, -EINVAL, "%.200s is not an image reference (host/repository:tag)", ref);
    if (o->name && !tc_image_ref_valid(o->name))
        return fail(&p, -EINVAL, "%.100s is not a valid image name", o->name);
    if (sodium_init() < 0 || !(p.curl = curl_easy_init()))
        return -ENOMEM;
    snprintf(p.base, sizeof(p.base), "%s://%s/v2/%s", o->plain_http ? "http" : "https", p.ref.host,
             p.ref.repo);
    /* the name it gets: the reference as given, without the digest */
    snprintf(name, sizeof(name), "%s", o->name ? o->name : ref);
    if (!o->name && strchr(name, '@'))
        *strchr(name, '@') = '\0';
    if (!o->name && !p.ref.tag[0])
        name[0] = '\0';
    r = tc_store_prepare(state_dir);
    if (r == 0 && (lock = tc_store_lock(state_dir)) < 0)
        r = lock;
    if (r < 0 && !err[0])
        fail(&p, r, "cannot use the image store under %s: %s", state_dir, strerror(-r));
    if (r == 0)
        r = fetch_manifest(&p, p.ref.digest[0] ? p.ref.digest : p.ref.tag, p.ref.digest, &m,
                           digest);
    /* an index: the manifest for linux on our architecture */
    for (int depth = 0;
         r == 0 && json_is_array(json_object_get(m, "manifests")) && !json_object_get(m, "config");
         depth++) {
        json_t *pick = NULL, *d;
        char want[72];
        json_array_foreach(json_object_get(m, "manifests"), i, d)
        {
            json_t *pl = json_object_get(d, "platform");
            if (!strcmp(json_string_value(json_object_get(pl, "os")) ?: "", "linux") &&
                !strcmp(json_string_value(json_object_get(pl, "architecture")) ?: "", our_arch())) {
                pick = d;
                break;
            }
        }
        if (depth == 0) /* a pin on a multi-platform image names the index */
            snprintf(index_digest, sizeof(index_digest), "%s", digest);
        if (!pick || depth > 2) {
            r = fail(&p, -ENOENT, "%s has no image for linux/%s", ref, our_arch());
            break;
        }
        snprintf(want, sizeof(want), "%s",
                 json_string_value(json_object_get(pick, "digest")) ?: "");
        json_decref(m);
        m = NULL;
        r = want[0] ? fetch_manifest(&p, want, want, &m, digest)
                    : fail(&p, -EINVAL, "%s: an index entry without a digest", ref);
    }
    if (r == 0)
        r = fetch_blob(&p,
                       json_string_value(json_object_get(json_object_get(m, "config"), "digest")));
    json_array_foreach(r == 0 ? json_object_get(m, "layers") : NULL, i, l)
    {
        if ((r = fetch_blob(&p, json_string_value(json_object_get(l, "digest")))) < 0)
            break;
    }
    if (r == 0)
        r = tc_image_register(state_dir, m, digest, index_digest, name, o->max_bytes, &entry, err,
                              errlen);
    if (lock >= 0)
        close(lock);
    json_decref(m);
    if (p.authz) {
        sodium_memzero(p.authz, strlen(p.authz));
        free(p.authz);
    }
    curl_easy_cleanup(p.curl);
    if (r == 0)
        *ret_entry = entry;
    if (r < 0 && !err[0])
        snprintf(err, errlen, "%s", strerror(-r));
    return r;
}
