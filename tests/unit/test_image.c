/* Tool images (image/): hostile layers applied to a scratch root (traversal, absolute and
 * relative symlinks written through, hard links out of the root, device nodes, setuid bits,
 * whiteouts, opaque directories, bombs), then whole OCI archives imported into a scratch
 * store (a good one, a tampered blob, a layer whose content is not its diff_id, a
 * decompression bomb) and the store's removal and collection. Each case checks what is on
 * disk afterwards, inside the root and outside it. Needs root (the store is root's). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/image.h"
#include "tap.h"

static char g_tmp[64];

/* ---- building tars ---- */

struct tarbuf {
    char *data;
    size_t len, cap;
};

static struct archive *tar_new(struct tarbuf *tb, bool gzip)
{
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    if (gzip)
        archive_write_add_filter_gzip(a);
    tb->cap = 64 << 20;
    tb->data = malloc(tb->cap);
    tb->len = 0;
    archive_write_open_memory(a, tb->data, tb->cap, &tb->len);
    return a;
}

static void put(struct archive *a, const char *path, mode_t type, mode_t perm, const char *data,
                size_t len, const char *link, bool hard)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_mtime(e, 1700000000, 0);
    if (type == AE_IFCHR)
        archive_entry_set_rdev(e, makedev(1, 3));
    if (link && hard)
        archive_entry_set_hardlink(e, link);
    else if (link)
        archive_entry_set_symlink(e, link);
    archive_entry_set_size(e, type == AE_IFREG && !hard ? (la_int64_t)len : 0);
    archive_write_header(a, e);
    if (data && len)
        archive_write_data(a, data, len);
    archive_entry_free(e);
}
#define FILE_(a, p, m, s) put(a, p, AE_IFREG, m, s, strlen(s), NULL, false)
#define DIR_(a, p)        put(a, p, AE_IFDIR, 0755, NULL, 0, NULL, false)
#define SYM_(a, p, t)     put(a, p, AE_IFLNK, 0777, NULL, 0, t, false)
#define HARD_(a, p, t)    put(a, p, AE_IFREG, 0644, NULL, 0, t, true)

static void tar_end(struct archive *a)
{
    archive_write_close(a);
    archive_write_free(a);
}

/* Apply tb (an uncompressed tar) onto root: tc_layer_apply's result, err filled. */
static int apply(const char *root, struct tarbuf *tb, struct tc_layer_state *st, char *err,
                 size_t errlen)
{
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    archive_read_open_memory(a, tb->data, tb->len);
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int r = tc_layer_apply(fd, a, st, err, errlen);
    close(fd);
    archive_read_free(a);
    free(tb->data);
    tb->data = NULL;
    return r;
}

static struct tc_layer_state limits(void)
{
    return (struct tc_layer_state){.max_bytes = 64 << 20, .max_entries = 1000};
}

static void fresh(char *root, size_t len, const char *name)
{
    char cmd[256];
    snprintf(root, len, "%s/%s/root", g_tmp, name);
    snprintf(cmd, sizeof(cmd), "rm -rf %s/%s && mkdir -p %s/%s/root %s/%s/outside", g_tmp, name,
             g_tmp, name, g_tmp, name);
    if (system(cmd) != 0)
        abort();
}

static bool exists(const char *base, const char *rel)
{
    char p[512];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", base, rel);
    return lstat(p, &st) == 0;
}

static mode_t mode_of(const char *base, const char *rel)
{
    char p[512];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", base, rel);
    return lstat(p, &st) == 0 ? st.st_mode : 0;
}

static int count_files(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "exit $(ls -A %s | wc -l)", dir);
    int st = system(cmd);
    return WEXITSTATUS(st);
}

/* ---- layers ---- */

TEST(layer_basic_modes)
{
    char root[128], err[256];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "basic");
    struct archive *a = tar_new(&tb, false);
    DIR_(a, "usr/");
    FILE_(a, "usr/bin/tool", 04755, "#!/bin/sh\n"); /* parent made implicitly */
    FILE_(a, "etc/shadow", 0600, "root:x\n");
    put(a, "root", AE_IFDIR, 0700, NULL, 0, NULL, false);
    SYM_(a, "bin", "usr/bin");
    HARD_(a, "usr/bin/tool2", "usr/bin/tool");
    FILE_(a, "./a//b/./c", 0644, "x");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    CHECK((mode_of(root, "usr/bin/tool") & 07777) == 0755); /* setuid dropped */
    CHECK(st.setuid_stripped == 1);
    CHECK((mode_of(root, "etc/shadow") & 07777) == 0644); /* the owner's read for everyone */
    CHECK((mode_of(root, "root") & 07777) == 0755);
    CHECK(S_ISLNK(mode_of(root, "bin")));
    CHECK(exists(root, "a/b/c"));
    struct stat s1, s2;
    char p1[256], p2[256];
    snprintf(p1, sizeof(p1), "%s/usr/bin/tool", root);
    snprintf(p2, sizeof(p2), "%s/usr/bin/tool2", root);
    CHECK(stat(p1, &s1) == 0 && stat(p2, &s2) == 0 && s1.st_ino == s2.st_ino);
    CHECK(s1.st_mtime == 1700000000); /* kept: python's .pyc stay valid */
    CHECK(s1.st_uid == 0 && s1.st_gid == 0);
}

TEST(layer_traversal_refused)
{
    char root[128], err[256], outside[160];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "trav");
    snprintf(outside, sizeof(outside), "%s/trav/outside", g_tmp);
    struct archive *a = tar_new(&tb, false);
    FILE_(a, "../outside/pwned", 0644, "x");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "leaves the root") != NULL);
    CHECK(!exists(outside, "pwned"));

    a = tar_new(&tb, false);
    FILE_(a, "a/../../outside/pwned", 0644, "x");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EINVAL);
    CHECK(!exists(outside, "pwned"));

    /* an absolute path is a path in the root */
    a = tar_new(&tb, false);
    FILE_(a, "/etc/abs", 0644, "x");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    CHECK(exists(root, "etc/abs"));
}

TEST(layer_symlink_write_through_stays_inside)
{
    char root[128], err[256], outside[160], rel[256];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "sym");
    snprintf(outside, sizeof(outside), "%s/sym/outside", g_tmp);
    /* layer 1: links that point out of the root, absolutely and relatively */
    struct archive *a = tar_new(&tb, false);
    SYM_(a, "abs", outside);
    SYM_(a, "rel", "../outside");
    SYM_(a, "up", "../../../../../../..");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    /* then layers that write through them: each write fails (the link resolves to a
     * directory the root does not have) or lands inside the root; none outside */
    const char *through[] = {"abs/pwned1", "rel/pwned2", "up/pwned3"};
    for (int i = 0; i < 3; i++) {
        a = tar_new(&tb, false);
        FILE_(a, through[i], 0644, "x");
        tar_end(a);
        (void)apply(root, &tb, &st, err, sizeof(err));
    }
    a = tar_new(&tb, false);
    snprintf(rel, sizeof(rel), "up%s/pwned4", outside);
    FILE_(a, rel, 0644, "x"); /* makes the directories it needs, inside */
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    CHECK(count_files(outside) == 0);
    char in[320];
    snprintf(in, sizeof(in), "%s%s", root, outside);
    CHECK(exists(in, "pwned4"));
    CHECK(exists(root, "pwned3")); /* "up" is the root itself */
    /* now that the directory exists inside, the absolute link leads there */
    a = tar_new(&tb, false);
    FILE_(a, "abs/pwned5", 0644, "x");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    CHECK(exists(in, "pwned5") && count_files(outside) == 0);
}

TEST(layer_hardlinks_out_refused)
{
    char root[128], err[256], outside[160], secret[200];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "hard");
    snprintf(outside, sizeof(outside), "%s/hard/outside", g_tmp);
    snprintf(secret, sizeof(secret), "%s/secret", outside);
    FILE *f = fopen(secret, "w");
    fputs("host secret", f);
    fclose(f);

    struct archive *a = tar_new(&tb, false);
    HARD_(a, "h1", "../outside/secret");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) < 0);
    CHECK(!exists(root, "h1"));

    a = tar_new(&tb, false);
    HARD_(a, "h2", secret); /* absolute: in the root, where there is no such file */
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) < 0);
    CHECK(!exists(root, "h2"));

    a = tar_new(&tb, false);
    SYM_(a, "ln", secret);
    HARD_(a, "h3", "ln"); /* a hard link to a symlink that leads out */
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EPERM);
    CHECK(!exists(root, "h3"));
    struct stat sb;
    CHECK(stat(secret, &sb) == 0 && sb.st_nlink == 1); /* never linked */
}

TEST(layer_devices_refused)
{
    char root[128], err[256];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "dev");
    struct archive *a = tar_new(&tb, false);
    put(a, "dev/mem", AE_IFCHR, 0666, NULL, 0, NULL, false);
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EPERM);
    CHECK(strstr(err, "device") != NULL);
    CHECK(!exists(root, "dev/mem"));
    a = tar_new(&tb, false);
    put(a, "fifo", AE_IFIFO, 0666, NULL, 0, NULL, false);
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EPERM);
    CHECK(!exists(root, "fifo"));
}

TEST(layer_whiteouts)
{
    char root[128], err[256];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "wh");
    struct archive *a = tar_new(&tb, false);
    FILE_(a, "a/b", 0644, "b");
    FILE_(a, "a/c", 0644, "c");
    FILE_(a, "d/e/f", 0644, "f");
    FILE_(a, "o/x", 0644, "x");
    FILE_(a, "o/sub/y", 0644, "y");
    FILE_(a, "o/sub/keep", 0644, "k");
    DIR_(a, "proc");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    a = tar_new(&tb, false);
    FILE_(a, "a/.wh.b", 0644, "");
    FILE_(a, ".wh.d", 0644, "");
    FILE_(a, ".wh.proc", 0644, "");
    DIR_(a, "o/");
    FILE_(a, "o/new", 0644, "n");
    FILE_(a, "o/.wh..wh..opq", 0644, "");
    FILE_(a, "o/sub/z", 0644, "z");
    FILE_(a, "nodir/.wh.nothing", 0644, ""); /* a whiteout makes nothing */
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    CHECK(!exists(root, "a/b") && exists(root, "a/c"));
    CHECK(!exists(root, "d") && !exists(root, "proc"));
    CHECK(exists(root, "o/new") && exists(root, "o/sub/z"));
    CHECK(!exists(root, "o/x") && !exists(root, "o/sub/y") && !exists(root, "o/sub/keep"));
    CHECK(!exists(root, "nodir"));
    CHECK(!exists(root, "a/.wh.b") && !exists(root, "o/.wh..wh..opq"));

    a = tar_new(&tb, false);
    FILE_(a, "a/.wh...", 0644, "");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EINVAL);
    CHECK(exists(root, "a/c"));
}

TEST(layer_replacements)
{
    char root[128], err[256];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "repl");
    struct archive *a = tar_new(&tb, false);
    FILE_(a, "x/inner", 0644, "1");
    FILE_(a, "y", 0644, "2");
    SYM_(a, "z", "/etc");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    a = tar_new(&tb, false);
    FILE_(a, "x", 0644, "now a file");
    DIR_(a, "y");
    DIR_(a, "z"); /* a directory replaces the link (it is not followed) */
    FILE_(a, "z/f", 0644, "f");
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    CHECK(S_ISREG(mode_of(root, "x")) && S_ISDIR(mode_of(root, "y")));
    CHECK(S_ISDIR(mode_of(root, "z")) && exists(root, "z/f"));
}

TEST(layer_bounds)
{
    char root[128], err[256];
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    st.max_bytes = 1 << 20;
    fresh(root, sizeof(root), "bound");
    char *big = calloc(1, 2 << 20);
    memset(big, 'a', 2 << 20);
    struct archive *a = tar_new(&tb, false);
    put(a, "big", AE_IFREG, 0644, big, 2 << 20, NULL, false);
    tar_end(a);
    free(big);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EFBIG);
    st = limits();
    st.max_entries = 10;
    a = tar_new(&tb, false);
    for (int i = 0; i < 20; i++) {
        char n[32];
        snprintf(n, sizeof(n), "f%d", i);
        FILE_(a, n, 0644, "x");
    }
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == -EFBIG);
    CHECK(!exists(root, "f15"));
}

/* ---- whole archives ---- */

struct oci {
    struct archive *a;
    struct tarbuf tb;
};

static void digest_of(const void *data, size_t len, char out[72])
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, data, len);
    memcpy(out, "sha256:", 7);
    sodium_bin2hex(out + 7, 65, h, sizeof(h));
}

static void blob(struct archive *a, const void *data, size_t len, char digest[72])
{
    char p[96];
    digest_of(data, len, digest);
    snprintf(p, sizeof(p), "blobs/sha256/%s", digest + 7);
    put(a, p, AE_IFREG, 0644, data, len, NULL, false);
}

struct oci_opts {
    const char *diff;       /* the config's diff_id (NULL: the right one) */
    bool tamper;            /* flip a byte of the stored layer blob after its name is taken */
    const char *name;       /* the ref.name annotation */
    int repeat;             /* the layer named this many times (0: once) */
    const char *env_json;   /* the config's Env array (NULL: two entries) */
    bool via_index;         /* index.json names an image index naming the manifest */
    const char *extra_name; /* one more file in the archive (a blob under a chosen name) */
    const void *extra;
    size_t extra_len;
    const char *twin_name;     /* index.json also names a second manifest (another digest, the same
                                  config and layers) by this name */
    char *ret_mdig, *ret_idig; /* char[72] each, or NULL */
};

/* An OCI archive at path, one image of one gzip layer (raw: its uncompressed tar). */
static void write_oci_opts(const char *path, struct tarbuf *raw, struct tarbuf *gz,
                           const struct oci_opts *o)
{
    char ldig[72], diff_id[72], cdig[72], mdig[72], idig[72] = "";
    struct tarbuf out;
    int n = o->repeat > 0 ? o->repeat : 1;
    digest_of(raw->data, raw->len, diff_id);
    struct archive *a = tar_new(&out, false);
    put(a, "oci-layout", AE_IFREG, 0644, "{\"imageLayoutVersion\":\"1.0.0\"}", 30, NULL, false);
    digest_of(gz->data, gz->len, ldig);
    if (o->tamper)
        gz->data[gz->len / 2] ^= 1;
    char p[96];
    snprintf(p, sizeof(p), "blobs/sha256/%s", ldig + 7);
    put(a, p, AE_IFREG, 0644, gz->data, gz->len, NULL, false);
    if (o->extra_name)
        put(a, o->extra_name, AE_IFREG, 0644, o->extra, o->extra_len, NULL, false);
    char diffs[16384] = "", layers[16384] = "";
    for (int i = 0; i < n; i++) {
        size_t dl = strlen(diffs), ll = strlen(layers);
        snprintf(diffs + dl, sizeof(diffs) - dl, "%s\"%s\"", i ? "," : "",
                 o->diff ? o->diff : diff_id);
        snprintf(layers + ll, sizeof(layers) - ll,
                 "%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":"
                 "\"%s\",\"size\":%zu}",
                 i ? "," : "", ldig, gz->len);
    }
    char *config = NULL, *manifest = NULL, *index = NULL, *inner = NULL;
    if (asprintf(&config,
                 "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":%s,"
                 "\"WorkingDir\":\"/app\",\"User\":\"1000\"},\"rootfs\":{\"type\":"
                 "\"layers\",\"diff_ids\":[%s]}}",
                 o->env_json ? o->env_json : "[\"PATH=/bin\",\"FOO=bar\"]", diffs) < 0)
        abort();
    blob(a, config, strlen(config), cdig);
    if (asprintf(
            &manifest,
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
            "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
            "\"digest\":\"%s\",\"size\":%zu},\"layers\":[%s]}",
            cdig, strlen(config), layers) < 0)
        abort();
    blob(a, manifest, strlen(manifest), mdig);
    const char *top = mdig, *top_type = "application/vnd.oci.image.manifest.v1+json";
    size_t top_size = strlen(manifest);
    if (o->via_index) {
        if (asprintf(
                &inner,
                "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
                "\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                "\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"os\":\"linux\","
                "\"architecture\":\"amd64\"}}]}",
                mdig, strlen(manifest)) < 0)
            abort();
        blob(a, inner, strlen(inner), idig);
        top = idig;
        top_type = "application/vnd.oci.image.index.v1+json";
        top_size = strlen(inner);
    }
    char twin[512] = "";
    if (o->twin_name) {
        char tdig[72], *tm = NULL;
        if (asprintf(&tm, "%.*s,\"annotations\":{\"twin\":\"1\"}}", (int)strlen(manifest) - 1,
                     manifest) < 0)
            abort();
        blob(a, tm, strlen(tm), tdig);
        snprintf(twin, sizeof(twin),
                 ",{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":"
                 "\"%s\",\"size\":%zu,\"annotations\":{\"org.opencontainers.image.ref.name\":"
                 "\"%s\"}}",
                 tdig, strlen(tm), o->twin_name);
        free(tm);
    }
    if (asprintf(&index,
                 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\","
                 "\"size\":%zu,\"annotations\":{\"org.opencontainers.image.ref.name\":\"%s\"}}%s]}",
                 top_type, top, top_size, o->name, twin) < 0)
        abort();
    put(a, "index.json", AE_IFREG, 0644, index, strlen(index), NULL, false);
    tar_end(a);
    FILE *f = fopen(path, "w");
    fwrite(out.data, 1, out.len, f);
    fclose(f);
    if (o->ret_mdig)
        memcpy(o->ret_mdig, mdig, 72);
    if (o->ret_idig)
        memcpy(o->ret_idig, idig, 72);
    free(out.data);
    free(config);
    free(manifest);
    free(index);
    free(inner);
}

static void write_oci(const char *path, struct tarbuf *raw, struct tarbuf *gz, const char *diff,
                      bool tamper, const char *name)
{
    write_oci_opts(path, raw, gz, &(struct oci_opts){.diff = diff, .tamper = tamper, .name = name});
}

/* A layer: the raw tar and its gzip, from the same entries. */
static void make_layer(struct tarbuf *raw, struct tarbuf *gz, size_t zeros)
{
    for (int pass = 0; pass < 2; pass++) {
        struct archive *a = tar_new(pass ? gz : raw, pass == 1);
        FILE_(a, "etc/os-release", 0644, "NAME=test\n");
        SYM_(a, "bin/sh", "/usr/bin/dash");
        if (zeros) {
            char *z = calloc(1, zeros);
            put(a, "zeros", AE_IFREG, 0644, z, zeros, NULL, false);
            free(z);
        }
        tar_end(a);
    }
}

TEST(import_oci_and_find)
{
    char state[128], file[160], err[512], p[256];
    struct tarbuf raw, gz;
    json_t *done = NULL, *e = NULL;
    snprintf(state, sizeof(state), "%s/store1", g_tmp);
    snprintf(file, sizeof(file), "%s/good.tar", g_tmp);
    make_layer(&raw, &gz, 0);
    write_oci(file, &raw, &gz, NULL, false, "example.org/team/t:1");
    int r = tc_image_import(state, file, NULL, false, 0, &done, err, sizeof(err));
    CHECK(r == 0);
    if (r < 0)
        fprintf(stderr, "    %s\n", err);
    e = json_array_get(done, 0);
    char root[65] = "";
    snprintf(root, sizeof(root), "%s", json_string_value(json_object_get(e, "root")) ?: "");
    CHECK(json_array_size(done) == 1 && tc_image_hex_valid(root));
    CHECK(!strcmp(json_string_value(json_object_get(e, "name")) ?: "", "example.org/team/t:1"));
    CHECK(
        !strcmp(json_string_value(json_array_get(json_object_get(e, "env"), 1)) ?: "", "FOO=bar"));
    snprintf(p, sizeof(p), "%s/images/roots/%s/etc/os-release", state, root);
    CHECK(access(p, F_OK) == 0);
    json_t *found = NULL;
    CHECK(tc_image_find(state, "example.org/team/t:1", &found) == 0);
    char digest[80] = "", byref[200];
    snprintf(digest, sizeof(digest), "%s",
             json_string_value(json_object_get(found, "digest")) ?: "");
    snprintf(byref, sizeof(byref), "example.org/team/t:1@%s", digest);
    json_decref(found);
    CHECK(tc_image_find(state, byref, &found) == 0);
    json_decref(found);
    CHECK(tc_image_find(state, digest, &found) == 0);
    json_decref(found);
    CHECK(tc_image_find(state, "example.org/team/t:2", &found) == -ENOENT);
    CHECK(tc_image_find(state,
                        "example.org/team/t:1@sha256:"
                        "0000000000000000000000000000000000000000000000000000000000000000",
                        &found) == -ENOENT);
    /* the store is root's alone */
    snprintf(p, sizeof(p), "%s/images", state);
    CHECK((mode_of(p, "") & 0777) == 0700);
    json_decref(done);

    /* removed, then collected; a root a launcher holds stays */
    int n = 0;
    CHECK(tc_image_remove(state, "example.org/team/t:1", &n) == 0 && n == 1);
    CHECK(tc_image_remove(state, "example.org/team/t:1", &n) == -ENOENT);
    snprintf(p, sizeof(p), "%s/images/roots/%s", state, root);
    int hold = open(p, O_RDONLY | O_DIRECTORY);
    CHECK(hold >= 0 && flock(hold, LOCK_SH) == 0);
    struct tc_image_gc_stats gs;
    CHECK(tc_image_gc(state, &gs) == 0);
    CHECK(gs.roots_busy == 1 && gs.roots_removed == 0 && gs.blobs_removed == 3);
    CHECK(access(p, F_OK) == 0);
    close(hold);
    CHECK(tc_image_gc(state, &gs) == 0);
    CHECK(gs.roots_removed == 1 && gs.roots_busy == 0);
    CHECK(access(p, F_OK) < 0);
    free(raw.data);
    free(gz.data);
}

TEST(import_tampered_and_lying)
{
    char state[128], file[160], err[512], p[256];
    struct tarbuf raw, gz;
    json_t *done = NULL, *index = NULL;
    snprintf(state, sizeof(state), "%s/store2", g_tmp);
    snprintf(file, sizeof(file), "%s/tampered.tar", g_tmp);
    make_layer(&raw, &gz, 0);
    write_oci(file, &raw, &gz, NULL, true, "t:1");
    CHECK(tc_image_import(state, file, NULL, false, 0, &done, err, sizeof(err)) == -EBADMSG);
    CHECK(strstr(err, "does not match its digest") != NULL);
    snprintf(p, sizeof(p), "%s/images/roots", state);
    CHECK(count_files(p) == 0);
    snprintf(p, sizeof(p), "%s/images/tmp", state);
    CHECK(count_files(p) == 0);
    CHECK(tc_image_list(state, &index) == 0 &&
          json_array_size(json_object_get(index, "images")) == 0);
    json_decref(index);
    free(raw.data);
    free(gz.data);

    /* the config's diff_id names other content than the layer holds */
    snprintf(file, sizeof(file), "%s/lying.tar", g_tmp);
    make_layer(&raw, &gz, 0);
    write_oci(file, &raw, &gz,
              "sha256:1111111111111111111111111111111111111111111111111111111111111111", false,
              "t:1");
    CHECK(tc_image_import(state, file, NULL, false, 0, &done, err, sizeof(err)) == -EBADMSG);
    CHECK(strstr(err, "hashes to") != NULL);
    snprintf(p, sizeof(p), "%s/images/roots", state);
    CHECK(count_files(p) == 0);
    snprintf(p, sizeof(p), "%s/images/tmp", state);
    CHECK(count_files(p) == 0);
    free(raw.data);
    free(gz.data);

    /* not an archive at all; a name that is no reference */
    snprintf(file, sizeof(file), "%s/notatar", g_tmp);
    FILE *f = fopen(file, "w");
    fputs("hello", f);
    fclose(f);
    CHECK(tc_image_import(state, file, NULL, false, 0, &done, err, sizeof(err)) < 0);
    CHECK(tc_image_import(state, file, "bad name", false, 0, &done, err, sizeof(err)) == -EINVAL);
}

TEST(import_decompression_bomb)
{
    char state[128], file[160], err[512], p[256];
    struct tarbuf raw, gz;
    json_t *done = NULL;
    snprintf(state, sizeof(state), "%s/store3", g_tmp);
    snprintf(file, sizeof(file), "%s/bomb.tar", g_tmp);
    make_layer(&raw, &gz, 48 << 20); /* 48 MiB of zeros: a gzip of about 50 KiB */
    CHECK(gz.len < (1 << 20));
    write_oci(file, &raw, &gz, NULL, false, "bomb:1");
    CHECK(tc_image_import(state, file, NULL, false, 4 << 20, &done, err, sizeof(err)) == -EFBIG);
    CHECK(strstr(err, "bound") != NULL);
    snprintf(p, sizeof(p), "%s/images/roots", state);
    CHECK(count_files(p) == 0);
    snprintf(p, sizeof(p), "%s/images/tmp", state);
    CHECK(count_files(p) == 0);
    free(raw.data);
    free(gz.data);
}

static int import_as(const char *state, const char *file, const char *name, bool replace,
                     int64_t max, char *err, size_t errlen)
{
    json_t *done = NULL;
    int r = tc_image_import(state, file, name, replace, max, &done, err, errlen);
    json_decref(done);
    return r;
}

static int index_count(const char *state)
{
    json_t *index = NULL;
    int n = tc_image_list(state, &index) == 0
                ? (int)json_array_size(json_object_get(index, "images"))
                : -1;
    json_decref(index);
    return n;
}

TEST(layer_deep_and_sparse)
{
    char root[128], err[256], path[8192] = "";
    struct tarbuf tb;
    struct tc_layer_state st = limits();
    fresh(root, sizeof(root), "deep");
    struct archive *a = tar_new(&tb, false);
    for (int i = 0; i < 300; i++) { /* deeper than any fixed bound a removal might have */
        strcat(path, "d/");
        DIR_(a, path);
    }
    /* a sparse file: 10 MiB, of which one block of data (the rest a hole at its end) */
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "sparse");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, 10 << 20);
    archive_entry_sparse_add_entry(e, 0, 4096);
    archive_write_header(a, e);
    char block[4096];
    memset(block, 'x', sizeof(block));
    archive_write_data(a, block, sizeof(block));
    archive_entry_free(e);
    tar_end(a);
    CHECK(apply(root, &tb, &st, err, sizeof(err)) == 0);
    struct stat sb;
    char sp[256];
    snprintf(sp, sizeof(sp), "%s/sparse", root);
    CHECK(stat(sp, &sb) == 0 && sb.st_size == 10 << 20);
    int dfd = open(root, O_RDONLY | O_DIRECTORY);
    CHECK(tc_image_rm_tree(dfd, "d") == 0);
    close(dfd);
    CHECK(!exists(root, "d"));
}

TEST(import_blob_under_a_wrong_name_deletes_nothing)
{
    char state[128], file[160], err[512], p[256];
    struct tarbuf raw, gz;
    snprintf(state, sizeof(state), "%s/store4", g_tmp);
    snprintf(file, sizeof(file), "%s/good4.tar", g_tmp);
    make_layer(&raw, &gz, 0);
    write_oci(file, &raw, &gz, NULL, false, "good:1");
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == 0);
    char ldig[72];
    digest_of(gz.data, gz.len, ldig);
    snprintf(p, sizeof(p), "%s/images/blobs/sha256/%s", state, ldig + 7);
    CHECK(access(p, F_OK) == 0);
    /* another archive holds the good layer's bytes under a name they do not hash to */
    snprintf(file, sizeof(file), "%s/evil4.tar", g_tmp);
    write_oci_opts(
        file, &raw, &gz,
        &(struct oci_opts){
            .name = "evil:1",
            .extra_name =
                "blobs/sha256/0000000000000000000000000000000000000000000000000000000000000000",
            .extra = gz.data,
            .extra_len = gz.len});
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == -EBADMSG);
    CHECK(access(p, F_OK) == 0); /* the good image's blob is still there */
    free(raw.data);
    free(gz.data);
}

TEST(import_names_env_index_and_one_budget)
{
    char state[128], file[160], err[512], env[20000];
    struct tarbuf raw, gz;
    json_t *found = NULL;
    int before;
    snprintf(state, sizeof(state), "%s/store5", g_tmp);
    snprintf(file, sizeof(file), "%s/named.tar", g_tmp);
    make_layer(&raw, &gz, 0);
    /* an archive that calls itself by a name the store gives another image: refused, unless
     * the operator says so */
    write_oci(file, &raw, &gz, NULL, false, "team/tool:1");
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == 0);
    struct tarbuf raw2, gz2;
    for (int pass = 0; pass < 2; pass++) {
        struct archive *a = tar_new(pass ? &gz2 : &raw2, pass == 1);
        FILE_(a, "etc/os-release", 0644, "NAME=impostor\n");
        tar_end(a);
    }
    snprintf(file, sizeof(file), "%s/impostor.tar", g_tmp);
    write_oci(file, &raw2, &gz2, NULL, false, "team/tool:1");
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == -EEXIST);
    CHECK(strstr(err, "--replace") != NULL);
    CHECK(tc_image_find(state, "team/tool:1", &found) == 0);
    CHECK(strcmp(json_string_value(json_object_get(found, "root")) ?: "", "") != 0);
    char first_root[65];
    snprintf(first_root, sizeof(first_root), "%s",
             json_string_value(json_object_get(found, "root")) ?: "");
    json_decref(found);
    CHECK(import_as(state, file, NULL, true, 0, err, sizeof(err)) == 0);
    CHECK(tc_image_find(state, "team/tool:1", &found) == 0);
    CHECK(strcmp(json_string_value(json_object_get(found, "root")) ?: "", first_root) != 0);
    json_decref(found);

    /* "team/app" is "team/app:latest": an archive calling itself either does not take the
     * other's name, and is refused before anything of it is unpacked */
    write_oci(file, &raw, &gz, NULL, false, "team/app");
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == 0);
    char impostor[160], p[256];
    snprintf(impostor, sizeof(impostor), "%s/impostor-latest.tar", g_tmp);
    free(raw2.data);
    free(gz2.data);
    for (int pass = 0; pass < 2; pass++) {
        struct archive *a = tar_new(pass ? &gz2 : &raw2, pass == 1);
        FILE_(a, "etc/os-release", 0644, "NAME=impostor-latest\n");
        tar_end(a);
    }
    write_oci(impostor, &raw2, &gz2, NULL, false, "team/app:latest");
    snprintf(p, sizeof(p), "%s/images/roots", state);
    int roots_before = count_files(p);
    CHECK(import_as(state, impostor, NULL, false, 0, err, sizeof(err)) == -EEXIST);
    CHECK(count_files(p) == roots_before);
    CHECK(tc_image_find(state, "team/app", &found) == 0);
    CHECK(!strcmp(json_string_value(json_object_get(found, "name")) ?: "", "team/app"));
    json_decref(found);
    CHECK(tc_image_find(state, "team/app:latest", &found) == 0);
    json_decref(found);
    /* an archive naming two different images of its own "dual" and "dual:latest": refused
     * before anything is unpacked, whoever imports it */
    snprintf(p, sizeof(p), "%s/dual.tar", g_tmp);
    write_oci_opts(p, &raw, &gz, &(struct oci_opts){.name = "dual", .twin_name = "dual:latest"});
    CHECK(import_as(state, p, NULL, true, 0, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "two different images dual") != NULL);
    write_oci_opts(p, &raw, &gz, &(struct oci_opts){.name = "dual", .twin_name = "dual:2"});
    CHECK(import_as(state, p, NULL, false, 0, err, sizeof(err)) == 0);
    snprintf(p, sizeof(p), "%s/images/roots", state);
    /* the operator moves it: one entry answers to the name afterwards */
    before = index_count(state);
    CHECK(import_as(state, impostor, NULL, true, 0, err, sizeof(err)) == 0);
    CHECK(index_count(state) == before);
    CHECK(tc_image_find(state, "team/app", &found) == 0);
    CHECK(!strcmp(json_string_value(json_object_get(found, "name")) ?: "", "team/app:latest"));
    json_decref(found);

    /* a config Env past the bounds: refused, the index stays small */
    int n = snprintf(env, sizeof(env), "[");
    for (int i = 0; i < 300; i++)
        n += snprintf(env + n, sizeof(env) - (size_t)n, "%s\"V%d=x\"", i ? "," : "", i);
    snprintf(env + n, sizeof(env) - (size_t)n, "]");
    snprintf(file, sizeof(file), "%s/env.tar", g_tmp);
    write_oci_opts(file, &raw, &gz, &(struct oci_opts){.name = "env:1", .env_json = env});
    before = index_count(state);
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == -EFBIG);
    CHECK(index_count(state) == before);

    /* an image behind an image index: a pin on the index's digest finds it */
    char mdig[72], idig[72];
    snprintf(file, sizeof(file), "%s/multi.tar", g_tmp);
    write_oci_opts(file, &raw, &gz,
                   &(struct oci_opts){
                       .name = "multi:1", .via_index = true, .ret_mdig = mdig, .ret_idig = idig});
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == 0);
    char ref[200];
    snprintf(ref, sizeof(ref), "multi:1@%s", idig);
    CHECK(tc_image_find(state, ref, &found) == 0);
    CHECK(!strcmp(json_string_value(json_object_get(found, "digest")) ?: "", mdig));
    json_decref(found);

    /* one budget for the whole import: a layer of 3 MiB named 8 times does not get 8 bounds */
    struct tarbuf raw3, gz3;
    make_layer(&raw3, &gz3, 3 << 20);
    snprintf(file, sizeof(file), "%s/amp.tar", g_tmp);
    write_oci_opts(file, &raw3, &gz3, &(struct oci_opts){.name = "amp:1", .repeat = 8});
    CHECK(import_as(state, file, NULL, false, 8 << 20, err, sizeof(err)) == -EFBIG);
    write_oci_opts(file, &raw3, &gz3, &(struct oci_opts){.name = "amp:1", .repeat = 1});
    CHECK(import_as(state, file, NULL, false, 8 << 20, err, sizeof(err)) == 0);
    free(raw.data);
    free(gz.data);
    free(raw2.data);
    free(gz2.data);
    free(raw3.data);
    free(gz3.data);
}

TEST(gc_removes_a_deep_root)
{
    char state[128], file[160], err[512], path[4096] = "";
    struct tarbuf raw, gz;
    snprintf(state, sizeof(state), "%s/store6", g_tmp);
    snprintf(file, sizeof(file), "%s/deep.tar", g_tmp);
    for (int pass = 0; pass < 2; pass++) {
        struct archive *a = tar_new(pass ? &gz : &raw, pass == 1);
        path[0] = '\0';
        for (int i = 0; i < 300; i++) {
            strcat(path, "d/");
            DIR_(a, path);
        }
        tar_end(a);
    }
    write_oci(file, &raw, &gz, NULL, false, "deep:1");
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == 0);
    int n = 0;
    CHECK(tc_image_remove(state, "deep:1", &n) == 0 && n == 1);
    struct tc_image_gc_stats gs;
    CHECK(tc_image_gc(state, &gs) == 0);
    CHECK(gs.roots_removed == 1);
    char p[256];
    snprintf(p, sizeof(p), "%s/images/roots", state);
    CHECK(count_files(p) == 0);
    snprintf(p, sizeof(p), "%s/images/tmp", state);
    CHECK(count_files(p) == 0);
    free(raw.data);
    free(gz.data);
}

TEST(refs)
{
    CHECK(tc_image_ref_valid("python:3.11"));
    CHECK(tc_image_ref_valid("registry.example:5000/team/py-data:1.4@sha256:"
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    CHECK(tc_image_ref_valid(
        "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    CHECK(!tc_image_ref_valid(""));
    CHECK(!tc_image_ref_valid("a b"));
    CHECK(!tc_image_ref_valid("../x"));
    CHECK(!tc_image_ref_valid("/abs"));
    CHECK(!tc_image_ref_valid("x@sha256:short"));
    CHECK(!tc_image_ref_valid("app:"));
    CHECK(!tc_image_ref_valid(":latest"));
    CHECK(!tc_image_ref_valid(
        "sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    /* one name, with or without ":latest"; a registry's port is not a tag */
    CHECK(tc_image_name_same("team/app", "team/app:latest"));
    CHECK(tc_image_name_same("team/app:latest", "team/app"));
    CHECK(tc_image_name_same("reg:5000/app", "reg:5000/app:latest"));
    CHECK(!tc_image_name_same("reg:5000/app", "reg:5001/app"));
    CHECK(!tc_image_name_same("reg:5000/app", "reg/app:5000"));
    CHECK(!tc_image_name_same("team/app", "team/app:1"));
    CHECK(!tc_image_name_same("team/app", "team/ap"));
    CHECK(!tc_image_name_same("team/ap", "team/app:latest"));
    CHECK(tc_image_name_same("app:1@sha256:aa", "app:1"));
    CHECK(!tc_image_name_same("", ""));
    CHECK(!tc_image_name_same(NULL, "app"));
}

/* A wide and deep tree goes whole, on the disk and on a tmpfs (whose directory offsets count
 * entries on older kernels: resuming after a removal must not skip any). */
static bool build_tree(const char *dir, int depth)
{
    char p[512];
    if (mkdir(dir, 0755) < 0)
        return false;
    for (int i = 0; i < 40; i++) {
        snprintf(p, sizeof(p), "%s/f%02d", dir, i);
        int fd = open(p, O_WRONLY | O_CREAT, 0644);
        if (fd < 0)
            return false;
        close(fd);
        if (depth > 0 && i % 8 == 0) {
            snprintf(p, sizeof(p), "%s/d%02d", dir, i);
            if (!build_tree(p, depth - 1))
                return false;
        }
    }
    return true;
}

TEST(rm_tree_wide_and_deep)
{
    char base[128], p[192];
    snprintf(base, sizeof(base), "%s/wide", g_tmp);
    CHECK(mkdir(base, 0755) == 0);
    for (int fs = 0; fs < 2; fs++) {
        bool tmpfs = fs == 1 && mount("tmpfs", base, "tmpfs", 0, "size=64m") == 0;
        if (fs == 1 && !tmpfs)
            continue;
        snprintf(p, sizeof(p), "%s/t", base);
        CHECK(build_tree(p, 3)); /* 5^0 + 5 + 25 + 125 directories of 40 entries each */
        int dfd = open(base, O_RDONLY | O_DIRECTORY);
        CHECK(tc_image_rm_tree(dfd, "t") == 0);
        close(dfd);
        CHECK(!exists(base, "t"));
        if (tmpfs)
            CHECK(umount(base) == 0);
    }
}

TEST(gc_never_follows_or_blindly_deletes)
{
    char state[128], p[256], target[160], file[160], err[512];
    struct tarbuf raw, gz;
    snprintf(state, sizeof(state), "%s/store7", g_tmp);
    snprintf(file, sizeof(file), "%s/seven.tar", g_tmp);
    make_layer(&raw, &gz, 0);
    write_oci(file, &raw, &gz, NULL, false, "seven:1");
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == 0);
    /* a symlink and a plain file among the roots: removed as what they are, the symlink's
     * target untouched */
    snprintf(target, sizeof(target), "%s/gc-target", g_tmp);
    CHECK(mkdir(target, 0755) == 0);
    snprintf(p, sizeof(p), "%s/keep", target);
    CHECK(close(open(p, O_WRONLY | O_CREAT, 0644)) == 0);
    snprintf(p, sizeof(p), "%s/images/roots/%064d", state, 1);
    CHECK(symlink(target, p) == 0);
    snprintf(p, sizeof(p), "%s/images/roots/%064d", state, 2);
    CHECK(close(open(p, O_WRONLY | O_CREAT, 0644)) == 0);
    struct tc_image_gc_stats gs;
    CHECK(tc_image_gc(state, &gs) == 0);
    CHECK(gs.roots_removed == 2);
    CHECK(exists(target, "keep"));
    snprintf(p, sizeof(p), "%s/images/roots", state);
    CHECK(count_files(p) == 1); /* seven's root stays */
    free(raw.data);
    free(gz.data);
}

TEST(archive_headers_count)
{
    char state[128], file[160], err[512], name[32];
    struct tarbuf tb;
    snprintf(state, sizeof(state), "%s/store8", g_tmp);
    snprintf(file, sizeof(file), "%s/many.tar", g_tmp);
    /* empty files cost no bytes of content, but each has a header to read */
    struct archive *a = tar_new(&tb, false);
    for (int i = 0; i < 65537; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        put(a, name, AE_IFREG, 0644, NULL, 0, NULL, false);
    }
    tar_end(a);
    FILE *f = fopen(file, "w");
    CHECK(f && fwrite(tb.data, 1, tb.len, f) == tb.len);
    fclose(f);
    free(tb.data);
    CHECK(import_as(state, file, NULL, false, 0, err, sizeof(err)) == -EFBIG);
    CHECK(strstr(err, "more than 65536 files") != NULL);
    /* and their bytes count against the bound */
    CHECK(import_as(state, file, NULL, false, 1 << 20, err, sizeof(err)) == -EFBIG);
    CHECK(strstr(err, "larger than the bound") != NULL);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("1..0 # SKIP the image store is root's\n");
        return 0;
    }
    if (sodium_init() < 0)
        return 1;
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/tc-image-test.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    RUN(refs);
    RUN(layer_basic_modes);
    RUN(layer_traversal_refused);
    RUN(layer_symlink_write_through_stays_inside);
    RUN(layer_hardlinks_out_refused);
    RUN(layer_devices_refused);
    RUN(layer_whiteouts);
    RUN(layer_replacements);
    RUN(layer_bounds);
    RUN(import_oci_and_find);
    RUN(import_tampered_and_lying);
    RUN(import_decompression_bomb);
    RUN(layer_deep_and_sparse);
    RUN(import_blob_under_a_wrong_name_deletes_nothing);
    RUN(import_names_env_index_and_one_budget);
    RUN(gc_removes_a_deep_root);
    RUN(rm_tree_wide_and_deep);
    RUN(gc_never_follows_or_blindly_deletes);
    RUN(archive_headers_count);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_tmp);
    if (system(cmd) != 0)
        return 1;
    return TAP_DONE();
}
