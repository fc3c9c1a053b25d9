/* Importing an OCI image layout or a `docker save` archive into the store (image.h). The
 * archive is read once: each file under blobs/sha256/ must hash to its name, every other
 * file of a docker archive is stored under the digest it hashes to; the small JSON files
 * that say what the images are stay in memory. Then each image's manifest and config are
 * read from the store, and its root is unpacked unless a root with its chain id exists. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/util.h"
#include "image/image.h"
#include "image/store.h"

#define MT_OCI_INDEX    "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST  "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG   "application/vnd.oci.image.config.v1+json"
#define MT_OCI_LAYER    "application/vnd.oci.image.layer.v1.tar"
#define MAX_LAYERS      128 /* more than any real image; bounds the work of a hostile one */
#define MAX_IMAGES      64
#define MAX_ARCHIVE_FILES                                                                          \
    65536 /* an image archive holds a few blobs per image (the layers' files                       \
             are inside the layer blobs) */

struct importer {
    const char *state_dir;
    char blobs[PATH_MAX], tmp[PATH_MAX], roots[PATH_MAX];
    int64_t max_bytes, read_bytes, archive_entries;
    /* one budget for the whole import, however often its layers are named: the bytes the
     * layers decompress to, and the bytes and entries the roots get */
    int64_t inflated, written, entries;
    bool may_move; /* a name given by the operator (--name, --replace, a pull's reference) may
                      move off another image; a name the archive gives itself may not */
    json_t *paths; /* archive path -> "sha256:<hex>" of each file stored as a blob */
    json_t *meta;  /* index.json, manifest.json -> their JSON */
    char *err;
    size_t errlen;
};

static int fail(struct importer *im, int r, const char *fmt, ...) TC_PRINTF(3, 4);
static int fail(struct importer *im, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(im->err, im->errlen, fmt, ap);
    va_end(ap);
    return r;
}

static void hex_of(const unsigned char h[crypto_hash_sha256_BYTES], char out[65])
{
    sodium_bin2hex(out, 65, h, crypto_hash_sha256_BYTES);
}

/* Only the decompressors built into libarchive: never one that runs an external program. */
static struct archive *reader(void)
{
    struct archive *a = archive_read_new();
    if (a) {
        archive_read_support_filter_gzip(a);
        archive_read_support_filter_zstd(a);
        archive_read_support_filter_xz(a);
        archive_read_support_filter_bzip2(a);
    }
    return a;
}

/* ---- pass 1: the archive ---- */

/* The entry's bytes into the store under the digest they hash to; want (or NULL): the hex
 * they must hash to, else nothing is stored (a file already there is never touched). */
static int store_entry(struct importer *im, struct archive *a, const char *path, const char *want,
                       char ret_hex[65])
{
    char tmp[PATH_MAX + 32], dst[PATH_MAX + 80];
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    static char buf[1 << 16];
    la_ssize_t n;
    int r = 0;

    snprintf(tmp, sizeof(tmp), "%s/blob.XXXXXX", im->tmp);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return fail(im, -errno, "cannot write to the store: %s", strerror(errno));
    crypto_hash_sha256_init(&st);
    /* (its size was counted against the bound before: read_archive) */
    while (r == 0 && (n = archive_read_data(a, buf, sizeof(buf))) > 0) {
        if ((r = tc_write_all(fd, buf, (size_t)n)) < 0)
            r = fail(im, r, "cannot write to the store: %s", strerror(-r));
        else
            crypto_hash_sha256_update(&st, (const unsigned char *)buf, (size_t)n);
    }
    if (r == 0 && n < 0)
        r = fail(im, -EINVAL, "%s: cannot read it from the archive: %s", path,
                 archive_error_string(a));
    if (r == 0 && fsync(fd) < 0)
        r = fail(im, -errno, "cannot write to the store: %s", strerror(errno));
    close(fd);
    crypto_hash_sha256_final(&st, h);
    hex_of(h, ret_hex);
    snprintf(dst, sizeof(dst), "%s/%s", im->blobs, ret_hex);
    if (r == 0 && want && strcmp(want, ret_hex) != 0)
        r = fail(im, -EBADMSG,
                 "blob sha256:%.64s does not match its digest (it hashes to sha256:%s): "
                 "tampered or damaged",
                 want, ret_hex);
    if (r == 0 && rename(tmp, dst) < 0)
        r = fail(im, -errno, "cannot write to the store: %s", strerror(errno));
    if (r < 0)
        unlink(tmp);
    return r;
}

static int read_meta(struct importer *im, struct archive *a, const char *path)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, cap = 0;
    la_ssize_t n;
    for (;;) {
        if (len + 4096 > cap) {
            if (cap >= TC_IMAGE_META_MAX)
                return fail(im, -EFBIG, "%s: larger than %d bytes", path, TC_IMAGE_META_MAX);
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb)
                return -ENOMEM;
            buf = nb;
        }
        n = archive_read_data(a, buf + len, cap - len);
        if (n < 0)
            return fail(im, -EINVAL, "%s: %s", path, archive_error_string(a));
        if (n == 0)
            break;
        len += (size_t)n;
    }
    json_error_t je;
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return fail(im, -EINVAL, "%s is not JSON: %s", path, je.text);
    json_object_set_new(im->meta, path, j);
    return 0;
}

static int read_archive(struct importer *im, const char *file)
{
    struct archive *a = reader();
    struct archive_entry *e;
    int r = 0, ar;
    if (!a)
        return -ENOMEM;
    archive_read_support_format_tar(a);
    if (archive_read_open_filename(a, file, 1 << 16) != ARCHIVE_OK) {
        r = fail(im, -EINVAL, "cannot read %s: %s", file, archive_error_string(a));
        archive_read_free(a);
        return r;
    }
    while (r == 0 && (ar = archive_read_next_header(a, &e)) != ARCHIVE_EOF) {
        char path[PATH_MAX], hex[65], digest[72];
        if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
            r = fail(im, -EINVAL, "%s is not an image archive (tar): %s", file,
                     archive_error_string(a));
            break;
        }
        /* what is skipped is decompressed all the same: it counts, and so does each header
         * (an archive of a million empty entries is work too) */
        la_int64_t esize = archive_entry_size(e);
        const char *ep = archive_entry_pathname(e);
        im->read_bytes += 512 + (ep ? (int64_t)strlen(ep) : 0);
        if (++im->archive_entries > MAX_ARCHIVE_FILES) {
            r = fail(im, -EFBIG, "the archive holds more than %d files", MAX_ARCHIVE_FILES);
            break;
        }
        if ((esize > 0 && (im->read_bytes += esize) > im->max_bytes) ||
            im->read_bytes > im->max_bytes) {
            r = fail(im, -EFBIG, "the archive is larger than the bound (%lld bytes)",
                     (long long)im->max_bytes);
            break;
        }
        if (archive_entry_filetype(e) != AE_IFREG || !archive_entry_pathname(e))
            continue;
        const char *p = archive_entry_pathname(e);
        while (p[0] == '.' && p[1] == '/')
            p += 2;
        snprintf(path, sizeof(path), "%s", p);
        if (!strcmp(path, "index.json") || !strcmp(path, "manifest.json")) {
            r = read_meta(im, a, path);
            continue;
        }
        bool is_blob = strncmp(path, "blobs/sha256/", 13) == 0;
        size_t n = strlen(path);
        bool docker_file = !is_blob && ((n > 4 && !strcmp(path + n - 4, ".tar")) ||
                                        (n > 5 && !strcmp(path + n - 5, ".json")));
        if (!is_blob && !docker_file)
            continue;
        if (is_blob && !tc_image_hex_valid(path + 13)) {
            r = fail(im, -EINVAL, "%.200s: not a sha256 blob name", path);
            break;
        }
        if ((r = store_entry(im, a, path, is_blob ? path + 13 : NULL, hex)) < 0)
            break;
        snprintf(digest, sizeof(digest), "sha256:%s", hex);
        json_object_set_new(im->paths, path, json_string(digest));
    }
    archive_read_free(a);
    return r;
}

/* ---- pass 2: the images ---- */

static int blob_path(struct importer *im, const char *digest, char *out, size_t len)
{
    if (!digest || strncmp(digest, "sha256:", 7) || !tc_image_hex_valid(digest + 7))
        return fail(im, -EINVAL, "a descriptor names no valid sha256 digest");
    snprintf(out, len, "%s/%s", im->blobs, digest + 7);
    if (access(out, F_OK) < 0)
        return fail(im, -ENOENT, "blob %s is neither in the archive nor in the store", digest);
    return 0;
}

static int load_blob_json(struct importer *im, const char *digest, json_t **ret)
{
    char p[PATH_MAX + 80];
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = blob_path(im, digest, p, sizeof(p));
    if (r < 0)
        return r;
    if ((r = tc_read_file(p, TC_IMAGE_META_MAX, &buf, &len)) < 0)
        return fail(im, r, "blob %s: %s", digest, strerror(-r));
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return fail(im, -EINVAL, "blob %s is not a JSON object", digest);
    }
    *ret = j;
    return 0;
}

static const char *our_arch(void)
{
    struct utsname u;
    if (uname(&u) == 0 && !strcmp(u.machine, "aarch64"))
        return "arm64";
    return "amd64";
}

/* descriptor -> an image manifest's descriptor (an index picks linux on our architecture) */
static int pick_manifest(struct importer *im, json_t *desc, int depth, json_t **ret_manifest,
                         char ret_digest[72], char ret_index[72])
{
    const char *mt = json_string_value(json_object_get(desc, "mediaType"));
    const char *digest = json_string_value(json_object_get(desc, "digest"));
    json_t *m = NULL, *d;
    size_t i;
    int r = load_blob_json(im, digest, &m);
    if (r < 0)
        return r;
    const char *inner = json_string_value(json_object_get(m, "mediaType"));
    bool is_index =
        (mt && (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST))) ||
        (inner && (!strcmp(inner, MT_OCI_INDEX) || !strcmp(inner, MT_DOCKER_LIST))) ||
        (!json_object_get(m, "config") && json_is_array(json_object_get(m, "manifests")));
    if (!is_index) {
        *ret_manifest = m;
        snprintf(ret_digest, 72, "%s", digest);
        return 0;
    }
    if (depth > 2) {
        json_decref(m);
        return fail(im, -EINVAL, "image indexes nested too deep");
    }
    if (depth == 0) /* a pin on a multi-platform image names the index */
        snprintf(ret_index, 72, "%s", digest);
    json_array_foreach(json_object_get(m, "manifests"), i, d)
    {
        json_t *pl = json_object_get(d, "platform");
        const char *os = json_string_value(json_object_get(pl, "os"));
        const char *arch = json_string_value(json_object_get(pl, "architecture"));
        if (os && !strcmp(os, "linux") && arch && !strcmp(arch, our_arch())) {
            r = pick_manifest(im, d, depth + 1, ret_manifest, ret_digest, ret_index);
            json_decref(m);
            return r;
        }
    }
    json_decref(m);
    return fail(im, -ENOENT, "index %s has no image for linux/%s", digest, our_arch());
}

struct layer_src {
    struct archive *raw;
    crypto_hash_sha256_state h;
    int64_t bytes, max;
    char buf[1 << 16];
};

static la_ssize_t layer_read(struct archive *tar, void *ctx, const void **out)
{
    struct layer_src *s = ctx;
    la_ssize_t n = archive_read_data(s->raw, s->buf, sizeof(s->buf));
    if (n < 0) {
        archive_set_error(tar, EIO, "%s", archive_error_string(s->raw));
        return -1;
    }
    s->bytes += n;
    if (s->bytes > s->max) {
        archive_set_error(tar, EFBIG, "decompresses to more than the bound");
        return -1;
    }
    crypto_hash_sha256_update(&s->h, (const unsigned char *)s->buf, (size_t)n);
    *out = s->buf;
    return n;
}

/* Unpack one layer blob onto rootfd; its uncompressed bytes must hash to diff_id. */
static int unpack_layer(struct importer *im, int rootfd, const char *digest, const char *diff_id,
                        int index, struct tc_layer_state *st)
{
    char p[PATH_MAX + 80], hex[65], lerr[256] = "";
    unsigned char h[crypto_hash_sha256_BYTES];
    struct archive_entry *e;
    struct layer_src *s = calloc(1, sizeof(*s));
    struct archive *tar = archive_read_new();
    int r = blob_path(im, digest, p, sizeof(p));
    if (!s || !tar)
        r = -ENOMEM;
    if (r == 0 && !(s->raw = reader()))
        r = -ENOMEM;
    if (r == 0) {
        archive_read_support_format_raw(s->raw);
        s->max = im->max_bytes - im->inflated;
        crypto_hash_sha256_init(&s->h);
        if (archive_read_open_filename(s->raw, p, 1 << 16) != ARCHIVE_OK ||
            archive_read_next_header(s->raw, &e) != ARCHIVE_OK)
            r = fail(im, -EINVAL, "layer %d (%s): %s", index, digest, archive_error_string(s->raw));
    }
    if (r == 0) {
        archive_read_support_format_tar(tar);
        if (archive_read_open(tar, s, NULL, layer_read, NULL) != ARCHIVE_OK)
            r = fail(im, -EINVAL, "layer %d (%s): %s", index, digest, archive_error_string(tar));
    }
    if (r == 0 && (r = tc_layer_apply(rootfd, tar, st, lerr, sizeof(lerr))) < 0)
        fail(im, r, "layer %d (%s): %s", index, digest, lerr);
    /* what tar did not read (the end blocks, padding) is part of the diff too */
    for (la_ssize_t n; r == 0 && (n = archive_read_data(s->raw, s->buf, sizeof(s->buf))) != 0;) {
        if (n < 0 || (s->bytes += n) > s->max)
            r = fail(im, n < 0 ? -EINVAL : -EFBIG, "layer %d (%s): %s", index, digest,
                     n < 0 ? archive_error_string(s->raw) : "decompresses to more than the bound");
        else
            crypto_hash_sha256_update(&s->h, (const unsigned char *)s->buf, (size_t)n);
    }
    if (r == 0) {
        crypto_hash_sha256_final(&s->h, h);
        hex_of(h, hex);
        if (!diff_id || strncmp(diff_id, "sha256:", 7) || strcmp(diff_id + 7, hex))
            r = fail(im, -EBADMSG,
                     "layer %d (%s): its content hashes to sha256:%s, the image's "
                     "config says %.80s",
                     index, digest, hex, diff_id ? diff_id : "nothing");
    }
    if (s)
        im->inflated += s->bytes;
    archive_read_free(tar);
    if (s && s->raw)
        archive_read_free(s->raw);
    free(s);
    return r;
}

static void chain_id(json_t *diff_ids, char out[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];
    char cur[72];
    size_t i;
    json_t *d;
    json_array_foreach(diff_ids, i, d)
    {
        if (i == 0) {
            snprintf(cur, sizeof(cur), "%s", json_string_value(d));
        } else {
            char line[160];
            int n = snprintf(line, sizeof(line), "%s %s", cur, json_string_value(d));
            crypto_hash_sha256(h, (const unsigned char *)line, (size_t)n);
            snprintf(cur, sizeof(cur), "sha256:");
            hex_of(h, cur + 7);
        }
    }
    snprintf(out, 65, "%s", cur + 7);
}

/* The root for these layers, unpacked unless there already. */
static int make_root(struct importer *im, json_t *layers, json_t *diff_ids, const char *chain,
                     struct tc_layer_state *st)
{
    char final[PATH_MAX + 80], tmp[PATH_MAX + 32];
    struct stat sb;
    size_t i;
    json_t *l;
    int r = 0;

    snprintf(final, sizeof(final), "%s/%s", im->roots, chain);
    if (stat(final, &sb) == 0 && S_ISDIR(sb.st_mode))
        return 0;
    snprintf(tmp, sizeof(tmp), "%s/root.XXXXXX", im->tmp);
    if (!mkdtemp(tmp))
        return fail(im, -errno, "cannot write to the store: %s", strerror(errno));
    int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fchmod(fd, 0755) < 0)
        r = fail(im, -errno, "cannot write to the store: %s", strerror(errno));
    json_array_foreach(r == 0 ? layers : NULL, i, l)
    {
        const char *digest = json_string_value(json_object_get(l, "digest"));
        if ((r = unpack_layer(im, fd, digest, json_string_value(json_array_get(diff_ids, i)),
                              (int)i, st)) < 0)
            break;
    }
    if (fd >= 0)
        close(fd);
    if (r == 0 && rename(tmp, final) < 0)
        r = fail(im, -errno, "cannot write to the store: %s", strerror(errno));
    if (r < 0) {
        char *slash = strrchr(tmp, '/');
        int dfd = open(im->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            tc_image_rm_tree(dfd, slash + 1);
            close(dfd);
        }
    }
    return r;
}

/* The config's Env, bounded (it goes into index.json, read at every call): NULL past the
 * bounds. */
static json_t *env_list(json_t *a)
{
    json_t *out = json_array(), *v;
    size_t i, bytes = 0;
    json_array_foreach(a, i, v)
    {
        if (!json_is_string(v))
            continue;
        bytes += json_string_length(v);
        if (json_array_size(out) >= TC_IMAGE_ENV_MAX || bytes > TC_IMAGE_ENV_BYTES ||
            strlen(json_string_value(v)) != json_string_length(v)) {
            json_decref(out);
            return NULL;
        }
        json_array_append(out, v);
    }
    return out;
}

static const char *short_string(json_t *v)
{
    const char *s = json_string_value(v);
    return s && strlen(s) <= 1024 ? s : "";
}

/* One image: manifest (a JSON object with "config" and "layers") to an index entry. */
static int import_image(struct importer *im, json_t *manifest, const char *digest, const char *name,
                        const char *index_digest, json_t **ret_entry)
{
    json_t *config = NULL, *layers = json_object_get(manifest, "layers"), *l;
    const char *cdigest =
        json_string_value(json_object_get(json_object_get(manifest, "config"), "digest"));
    /* the roots of one import share one bound (the same layers under 64 images do not get it
     * 64 times) */
    struct tc_layer_state st = {.max_bytes = im->max_bytes - im->written,
                                .max_entries = TC_IMAGE_MAX_ENTRIES - im->entries};
    char chain[65], when[32];
    size_t i;
    int r;

    if (!json_is_array(layers) || json_array_size(layers) == 0 ||
        json_array_size(layers) > MAX_LAYERS)
        return fail(im, -EINVAL, "manifest %s: between 1 and %d layers, please", digest,
                    MAX_LAYERS);
    if ((r = load_blob_json(im, cdigest, &config)) < 0)
        return r;
    json_t *diff_ids = json_object_get(json_object_get(config, "rootfs"), "diff_ids");
    const char *os = json_string_value(json_object_get(config, "os"));
    r = 0;
    if (os && strcmp(os, "linux"))
        r = fail(im, -EINVAL, "image %s is for %.32s, not linux", digest, os);
    else if (json_array_size(diff_ids) != json_array_size(layers))
        r = fail(im, -EINVAL, "image %s: the config lists %zu diff_ids for %zu layers", digest,
                 json_array_size(diff_ids), json_array_size(layers));
    json_array_foreach(r == 0 ? layers : NULL, i, l)
    {
        const char *d = json_string_value(json_array_get(diff_ids, i));
        const char *mt = json_string_value(json_object_get(l, "mediaType"));
        if (!d || strncmp(d, "sha256:", 7) || !tc_image_hex_valid(d + 7)) {
            r = fail(im, -EINVAL, "image %s: diff_id %zu is not a sha256 digest", digest, i);
            break;
        }
        if (mt && strstr(mt, "nondistributable") == NULL && strstr(mt, "foreign") == NULL &&
            strstr(mt, "tar") == NULL) {
            r = fail(im, -EINVAL, "image %s: layer %zu has media type %.100s", digest, i, mt);
            break;
        }
    }
    json_t *env =
        r == 0 ? env_list(json_object_get(json_object_get(config, "config"), "Env")) : NULL;
    if (r == 0 && !env)
        r = fail(im, -EFBIG, "image %s: its config's Env has more than %d entries or %d bytes",
                 digest, TC_IMAGE_ENV_MAX, TC_IMAGE_ENV_BYTES);
    if (r == 0) {
        chain_id(diff_ids, chain);
        r = make_root(im, layers, diff_ids, chain, &st);
        im->written += st.bytes;
        im->entries += st.entries;
    }
    if (r == 0) {
        json_t *cc = json_object_get(config, "config");
        json_t *ldig = json_array();
        json_array_foreach(layers, i, l)
        {
            json_array_append(ldig, json_object_get(l, "digest"));
        }
        tc_iso8601(tc_wall_ms(), when);
        *ret_entry = json_pack(
            "{s:s, s:s, s:s, s:s, s:o, s:O, s:s, s:s, s:s, s:s, s:I, s:I}", "name",
            name ? name : "", "digest", digest, "config", cdigest, "root", chain, "layers", ldig,
            "env", env, "workdir", short_string(json_object_get(cc, "WorkingDir")), "user",
            short_string(json_object_get(cc, "User")), "architecture",
            short_string(json_object_get(config, "architecture")), "imported", when, "bytes",
            (json_int_t)st.bytes, "setuid_stripped", (json_int_t)st.setuid_stripped);
        if (*ret_entry && index_digest && index_digest[0])
            json_object_set_new(*ret_entry, "index_digest", json_string(index_digest));
        if (!*ret_entry)
            r = -ENOMEM;
    }
    json_decref(env);
    json_decref(config);
    return r;
}

/* A `docker save` manifest.json entry as an OCI manifest of our own (stored, so its digest
 * names the image the same way every time). */
static int docker_manifest(struct importer *im, json_t *item, json_t **ret, char ret_digest[72])
{
    const char *cfg = json_string_value(json_object_get(item, "Config"));
    const char *cd = cfg ? json_string_value(json_object_get(im->paths, cfg)) : NULL;
    json_t *layers = json_array(), *l;
    size_t i;
    if (!cd) {
        json_decref(layers);
        return fail(im, -EINVAL, "manifest.json names a config the archive does not hold");
    }
    json_array_foreach(json_object_get(item, "Layers"), i, l)
    {
        const char *p = json_string_value(l);
        const char *d = p ? json_string_value(json_object_get(im->paths, p)) : NULL;
        if (!d) {
            json_decref(layers);
            return fail(im, -EINVAL, "manifest.json names a layer the archive does not hold");
        }
        json_array_append_new(layers,
                              json_pack("{s:s, s:s}", "mediaType", MT_OCI_LAYER, "digest", d));
    }
    json_t *m =
        json_pack("{s:i, s:s, s:{s:s, s:s}, s:o}", "schemaVersion", 2, "mediaType", MT_OCI_MANIFEST,
                  "config", "mediaType", MT_OCI_CONFIG, "digest", cd, "layers", layers);
    char *s = m ? json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    unsigned char h[crypto_hash_sha256_BYTES];
    char hex[65], p[PATH_MAX + 80];
    int r = s ? 0 : -ENOMEM;
    if (r == 0) {
        crypto_hash_sha256(h, (const unsigned char *)s, strlen(s));
        hex_of(h, hex);
        snprintf(p, sizeof(p), "%s/%s", im->blobs, hex);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        r = fd < 0 ? -errno : tc_write_all(fd, s, strlen(s));
        if (fd >= 0)
            close(fd);
        snprintf(ret_digest, 72, "sha256:%s", hex);
    }
    free(s);
    if (r < 0) {
        json_decref(m);
        return fail(im, r, "cannot write to the store: %s", strerror(-r));
    }
    *ret = m;
    return 0;
}

/* The images the archive holds, as (manifest, digest, name) triples. */
static int collect(struct importer *im, json_t *out)
{
    json_t *index = json_object_get(im->meta, "index.json");
    json_t *dman = json_object_get(im->meta, "manifest.json");
    json_t *d;
    size_t i;
    int r = 0;
    if (index) {
        json_array_foreach(json_object_get(index, "manifests"), i, d)
        {
            json_t *m = NULL;
            char digest[72], idx[72] = "";
            json_t *ann = json_object_get(d, "annotations");
            const char *name = json_string_value(json_object_get(ann, "io.containerd.image.name"));
            if (!name)
                name = json_string_value(json_object_get(ann, "org.opencontainers.image.ref.name"));
            if (json_array_size(out) >= MAX_IMAGES)
                return fail(im, -EINVAL, "more than %d images in one archive", MAX_IMAGES);
            if ((r = pick_manifest(im, d, 0, &m, digest, idx)) < 0)
                return r;
            json_array_append_new(out, json_pack("{s:o, s:s, s:s?, s:s}", "manifest", m, "digest",
                                                 digest, "name", name, "index_digest", idx));
        }
    } else if (json_is_array(dman)) {
        json_array_foreach(dman, i, d)
        {
            json_t *m = NULL;
            char digest[72];
            if (json_array_size(out) >= MAX_IMAGES)
                return fail(im, -EINVAL, "more than %d images in one archive", MAX_IMAGES);
            if ((r = docker_manifest(im, d, &m, digest)) < 0)
                return r;
            json_array_append_new(
                out,
                json_pack("{s:o, s:s, s:s?}", "manifest", m, "digest", digest, "name",
                          json_string_value(json_array_get(json_object_get(d, "RepoTags"), 0))));
        }
    }
    if (json_array_size(out) == 0)
        return fail(im, -EINVAL,
                    "no image in the archive (neither an OCI layout's index.json "
                    "nor a docker archive's manifest.json)");
    return 0;
}

static int taken(struct importer *im, const char *name, const char *digest)
{
    return fail(im, -EEXIST,
                "the archive names an image %.200s, a name the store gives %s: "
                "import with --name %.200s (or --replace) to move the name",
                name, digest, name);
}

/* Before anything is unpacked: a name the archive gives two different images of its own, or
 * (unless the operator moves names) one the store gives another image, stops the import
 * (record() checks the store again, under the same lock). */
static int check_names(struct importer *im, json_t *found)
{
    json_t *index = NULL, *f, *old;
    size_t i, k;
    int r = im->may_move ? 0 : tc_image_list(im->state_dir, &index);
    json_array_foreach(r == 0 ? found : NULL, i, f)
    {
        const char *n = json_string_value(json_object_get(f, "name"));
        const char *d = json_string_value(json_object_get(f, "digest"));
        if (!n || !tc_image_ref_valid(n) || !d)
            continue;
        for (k = 0; k < i && r == 0; k++) {
            json_t *g = json_array_get(found, k);
            const char *gd = json_string_value(json_object_get(g, "digest"));
            if (tc_image_name_same(json_string_value(json_object_get(g, "name")), n) && gd &&
                strcmp(gd, d))
                r = fail(im, -EINVAL, "the archive names two different images %.200s", n);
        }
        json_array_foreach(r == 0 && index ? json_object_get(index, "images") : NULL, k, old)
        {
            const char *on = json_string_value(json_object_get(old, "name"));
            const char *od = json_string_value(json_object_get(old, "digest"));
            if (tc_image_name_same(on, n) && od && strcmp(od, d)) {
                r = taken(im, n, od);
                break;
            }
        }
        if (r < 0)
            break;
    }
    json_decref(index);
    return r;
}

/* The index gets the entries in done: a name moves to its new image; an unnamed re-import
 * replaces itself; a root found already keeps the size it was unpacked with. */
static int record(struct importer *im, json_t *done)
{
    json_t *index = NULL, *f;
    size_t i;
    int r = tc_image_list(im->state_dir, &index);
    json_array_foreach(r == 0 ? done : NULL, i, f)
    {
        json_t *images = json_object_get(index, "images");
        const char *n = json_string_value(json_object_get(f, "name"));
        const char *d = json_string_value(json_object_get(f, "digest"));
        const char *root = json_string_value(json_object_get(f, "root"));
        for (size_t k = json_array_size(images); k-- > 0;) {
            json_t *old = json_array_get(images, k);
            const char *on = json_string_value(json_object_get(old, "name"));
            const char *od = json_string_value(json_object_get(old, "digest"));
            const char *oroot = json_string_value(json_object_get(old, "root"));
            if (json_integer_value(json_object_get(f, "bytes")) == 0 && oroot && root &&
                !strcmp(oroot, root))
                json_object_set(f, "bytes", json_object_get(old, "bytes"));
            if (n[0] && tc_image_name_same(on, n) && od && strcmp(od, d) && !im->may_move) {
                r = taken(im, n, od);
                break;
            }
            if (tc_image_name_same(on, n) || (!n[0] && on && !on[0] && od && !strcmp(od, d)))
                json_array_remove(images, k);
        }
        if (r < 0)
            break;
        json_array_append(images, f);
    }
    if (r == 0 && (r = tc_store_write_index(im->state_dir, index)) < 0)
        fail(im, r, "cannot write the image index: %s", strerror(-r));
    json_decref(index);
    return r;
}

int tc_image_register(const char *state_dir, json_t *manifest, const char *digest,
                      const char *index_digest, const char *name, int64_t max_bytes,
                      json_t **ret_entry, char *err, size_t errlen)
{
    struct importer im = {.state_dir = state_dir,
                          .may_move = true,
                          .max_bytes = max_bytes > 0 ? max_bytes : TC_IMAGE_MAX_BYTES,
                          .err = err,
                          .errlen = errlen};
    json_t *entry = NULL, *done = json_array();
    int r = done ? 0 : -ENOMEM;
    err[0] = '\0';
    if (r == 0 && (r = tc_store_path(im.blobs, sizeof(im.blobs), state_dir, "blobs/sha256")) == 0 &&
        (r = tc_store_path(im.tmp, sizeof(im.tmp), state_dir, "tmp")) == 0)
        r = tc_store_path(im.roots, sizeof(im.roots), state_dir, "roots");
    if (r == 0)
        r = import_image(&im, manifest, digest, name, index_digest, &entry);
    if (r == 0) {
        json_array_append(done, entry);
        r = record(&im, done);
    }
    json_decref(done);
    if (r == 0)
        *ret_entry = entry;
    else
        json_decref(entry);
    if (r < 0 && !err[0])
        snprintf(err, errlen, "%s", strerror(-r));
    return r;
}

int tc_image_import(const char *state_dir, const char *file, const char *name, bool replace,
                    int64_t max_bytes, json_t **ret_images, char *err, size_t errlen)
{
    struct importer im = {.state_dir = state_dir,
                          .may_move = name || replace,
                          .max_bytes = max_bytes > 0 ? max_bytes : TC_IMAGE_MAX_BYTES,
                          .paths = json_object(),
                          .meta = json_object(),
                          .err = err,
                          .errlen = errlen};
    json_t *found = json_array(), *done = json_array(), *f;
    size_t i;
    int lock = -1, r;

    err[0] = '\0';
    r = 0;
    if (name && !tc_image_ref_valid(name))
        r = fail(&im, -EINVAL, "%.100s is not a valid image name", name);
    else if (sodium_init() < 0)
        r = -EIO;
    if (r == 0)
        r = tc_store_prepare(state_dir);
    if (r == 0 && (r = tc_store_path(im.blobs, sizeof(im.blobs), state_dir, "blobs/sha256")) == 0 &&
        (r = tc_store_path(im.tmp, sizeof(im.tmp), state_dir, "tmp")) == 0)
        r = tc_store_path(im.roots, sizeof(im.roots), state_dir, "roots");
    if (r < 0 && !err[0])
        fail(&im, r, "cannot make the image store under %s: %s", state_dir, strerror(-r));
    if (r == 0 && (lock = tc_store_lock(state_dir)) < 0)
        r = fail(&im, lock, "cannot lock the image store: %s", strerror(-lock));
    if (r == 0 && (!im.paths || !im.meta || !found || !done))
        r = -ENOMEM;
    if (r == 0)
        r = read_archive(&im, file);
    if (r == 0)
        r = collect(&im, found);
    if (r == 0 && name && json_array_size(found) != 1)
        r = fail(&im, -EINVAL, "--name names one image; the archive holds %zu",
                 json_array_size(found));
    if (r == 0)
        r = check_names(&im, found);
    json_array_foreach(r == 0 ? found : NULL, i, f)
    {
        json_t *entry = NULL;
        const char *n = name ? name : json_string_value(json_object_get(f, "name"));
        if (n && !tc_image_ref_valid(n))
            n = NULL; /* an annotation we cannot use as a name: by digest only */
        r = import_image(&im, json_object_get(f, "manifest"),
                         json_string_value(json_object_get(f, "digest")), n,
                         json_string_value(json_object_get(f, "index_digest")), &entry);
        if (r < 0)
            break;
        json_array_append_new(done, entry);
    }
    if (r == 0)
        r = record(&im, done);
    if (lock >= 0)
        close(lock);
    json_decref(found);
    json_decref(im.paths);
    json_decref(im.meta);
    if (r == 0)
        *ret_images = done;
    else
        json_decref(done);
    if (r < 0 && !err[0])
        snprintf(err, errlen, "%s", strerror(-r));
    return r;
}
