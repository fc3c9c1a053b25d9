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

/* An OCI archive at path, one image of one gzip layer (tb_layer, uncompressed: tb_raw),
 * with diff_id as given (NULL: the right one); tamper flips a byte of the layer blob. */
static void write_oci(const char *path, struct tarbuf *raw, struct tarbuf *gz, const char *diff,
                      bool tamper, const char *name)
{
    char ldig[72], diff_id[72], cdig[72], mdig[72];
    struct tarbuf out;
    digest_of(raw->data, raw->len, diff_id);
    struct archive *a = tar_new(&out, false);
    put(a, "oci-layout", AE_IFREG, 0644, "{\"imageLayoutVersion\":\"1.0.0\"}", 30, NULL, false);
    digest_of(gz->data, gz->len, ldig);
    if (tamper)
        gz->data[gz->len / 2] ^= 1;
    char p[96];
    snprintf(p, sizeof(p), "blobs/sha256/%s", ldig + 7);
    put(a, p, AE_IFREG, 0644, gz->data, gz->len, NULL, false);
    char *config = NULL, *manifest = NULL, *index = NULL;
    if (asprintf(&config,
                 "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\","
                 "\"FOO=bar\"],\"WorkingDir\":\"/app\",\"User\":\"1000\"},\"rootfs\":{\"type\":"
                 "\"layers\",\"diff_ids\":[\"%s\"]}}",
                 diff ? diff : diff_id) < 0)
        abort();
    blob(a, config, strlen(config), cdig);
    if (asprintf(
            &manifest,
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
            "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
            "\"digest\":\"%s\",\"size\":%zu},\"layers\":[{\"mediaType\":\"application/"
            "vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"%s\",\"size\":%zu}]}",
            cdig, strlen(config), ldig, gz->len) < 0)
        abort();
    blob(a, manifest, strlen(manifest), mdig);
    if (asprintf(&index,
                 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image."
                 "manifest.v1+json\",\"digest\":\"%s\",\"size\":%zu,\"annotations\":{\"org."
                 "opencontainers.image.ref.name\":\"%s\"}}]}",
                 mdig, strlen(manifest), name) < 0)
        abort();
    put(a, "index.json", AE_IFREG, 0644, index, strlen(index), NULL, false);
    tar_end(a);
    FILE *f = fopen(path, "w");
    fwrite(out.data, 1, out.len, f);
    fclose(f);
    free(out.data);
    free(config);
    free(manifest);
    free(index);
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
    int r = tc_image_import(state, file, NULL, 0, &done, err, sizeof(err));
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
    CHECK(tc_image_import(state, file, NULL, 0, &done, err, sizeof(err)) == -EBADMSG);
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
    CHECK(tc_image_import(state, file, NULL, 0, &done, err, sizeof(err)) == -EBADMSG);
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
    CHECK(tc_image_import(state, file, NULL, 0, &done, err, sizeof(err)) < 0);
    CHECK(tc_image_import(state, file, "bad name", 0, &done, err, sizeof(err)) == -EINVAL);
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
    CHECK(tc_image_import(state, file, NULL, 4 << 20, &done, err, sizeof(err)) == -EFBIG);
    CHECK(strstr(err, "bound") != NULL);
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
    CHECK(!tc_image_ref_valid(
        "sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
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
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_tmp);
    if (system(cmd) != 0)
        return 1;
    return TAP_DONE();
}
