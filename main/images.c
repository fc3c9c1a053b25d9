/* toolcage images import|pull|ls|rm|gc: the tool image store (image/image.h). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "image/image.h"
#include "main/cli.h"

static void print_entry(json_t *e);

/* What an archive or a registry put into a message, safe for a terminal: C0 and C1 controls
 * (ESC, and U+009B, a CSI of its own, as UTF-8 or as a raw byte) and bytes that are not UTF-8
 * become '?'; other UTF-8 stays as it is. */
static const char *printable(char *s)
{
    unsigned char *c = (unsigned char *)s;
    while (*c) {
        size_t len = *c < 0x80             ? 1
                     : (*c & 0xe0) == 0xc0 ? 2
                     : (*c & 0xf0) == 0xe0 ? 3
                     : (*c & 0xf8) == 0xf0 ? 4
                                           : 0;
        uint32_t cp = len == 1 ? *c : len == 2 ? *c & 0x1f : len == 3 ? *c & 0x0f : *c & 0x07;
        size_t k = 1;
        for (; k < len && (c[k] & 0xc0) == 0x80; k++)
            cp = (cp << 6) | (c[k] & 0x3f);
        bool ok = len > 0 && k == len &&
                  (len == 1 || cp >= (len == 2   ? 0x80u
                                      : len == 3 ? 0x800u
                                                 : 0x10000u)) &&
                  cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
        if (!ok || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
            for (size_t j = 0; j < (ok ? len : 1); j++)
                c[j] = '?';
            c += ok ? len : 1;
        } else {
            c += len;
        }
    }
    return s;
}

static int cmd_import(const struct tc_config *cfg, int argc, char **argv)
{
    const char *name = NULL;
    bool replace = false;
    int64_t max = TC_IMAGE_MAX_BYTES;
    static const struct option lopts[] = {{"name", required_argument, NULL, 'n'},
                                          {"replace", no_argument, NULL, 'r'},
                                          {"max-bytes", required_argument, NULL, 'm'},
                                          {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 'n')
            name = optarg;
        else if (c == 'r')
            replace = true;
        else if (c != 'm' || tc_parse_i64(optarg, 1, INT64_MAX, &max) < 0)
            return tc_cli_usage_of("images") ? 2 : 2;
    }
    if (optind != argc - 1)
        return tc_cli_usage_of("images") ? 2 : 2;
    char err[512];
    json_t *done = NULL, *e;
    size_t i;
    if (tc_image_import(cfg->state_dir, argv[optind], name, replace, max, &done, err, sizeof(err)) <
        0) {
        fprintf(stderr, "toolcage images import: %s\n", printable(err));
        return 1;
    }
    json_array_foreach(done, i, e)
    {
        printf("imported ");
        print_entry(e);
    }
    json_decref(done);
    return 0;
}

static void print_entry(json_t *e)
{
    char n[TC_IMAGE_REF_MAX + 1];
    snprintf(n, sizeof(n), "%s", json_string_value(json_object_get(e, "name")) ?: "");
    printable(n);
    printf("%s %s (%lld bytes in %zu layers; %lld setuid/setgid bits dropped)\n",
           n[0] ? n : "<no name>", json_string_value(json_object_get(e, "digest")),
           (long long)json_integer_value(json_object_get(e, "bytes")),
           json_array_size(json_object_get(e, "layers")),
           (long long)json_integer_value(json_object_get(e, "setuid_stripped")));
}

static int cmd_pull(const struct tc_config *cfg, int argc, char **argv)
{
    struct tc_image_pull_opts o = {.max_bytes = TC_IMAGE_MAX_BYTES};
    const char *cred_file = NULL;
    static const struct option lopts[] = {{"name", required_argument, NULL, 'n'},
                                          {"credentials-file", required_argument, NULL, 'c'},
                                          {"ca-file", required_argument, NULL, 'a'},
                                          {"plain-http", no_argument, NULL, 'p'},
                                          {"max-bytes", required_argument, NULL, 'm'},
                                          {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 'n')
            o.name = optarg;
        else if (c == 'c')
            cred_file = optarg;
        else if (c == 'a')
            o.ca_file = optarg;
        else if (c == 'p')
            o.plain_http = true;
        else if (c != 'm' || tc_parse_i64(optarg, 1, INT64_MAX, &o.max_bytes) < 0)
            return tc_cli_usage_of("images") ? 2 : 2;
    }
    if (optind != argc - 1)
        return tc_cli_usage_of("images") ? 2 : 2;
    /* credentials from a file, never the command line (ps shows it to everyone) */
    _cleanup_free_ char *cred = NULL;
    size_t len = 0;
    if (cred_file) {
        int r = tc_read_file(cred_file, 4096, &cred, &len);
        if (r < 0 || len == 0) {
            fprintf(stderr, "toolcage images pull: %s: %s\n", cred_file,
                    r < 0 ? strerror(-r) : "empty");
            return 1;
        }
        cred[strcspn(cred, "\r\n")] = '\0';
        if (!strchr(cred, ':')) {
            fprintf(stderr, "toolcage images pull: %s: \"user:password\" expected\n", cred_file);
            return 1;
        }
        o.credentials = cred;
    }
    char err[512];
    json_t *e = NULL;
    int r = tc_image_pull(cfg->state_dir, argv[optind], &o, &e, err, sizeof(err));
    if (cred)
        explicit_bzero(cred, len);
    if (r < 0) {
        fprintf(stderr, "toolcage images pull: %s\n", printable(err));
        return 1;
    }
    printf("pulled ");
    print_entry(e);
    json_decref(e);
    return 0;
}

static int cmd_ls(const struct tc_config *cfg, bool as_json)
{
    json_t *index = NULL, *e;
    size_t i;
    int r = tc_image_list(cfg->state_dir, &index);
    if (r < 0) {
        fprintf(stderr, "toolcage images ls: %s\n", strerror(-r));
        return 1;
    }
    if (as_json) {
        json_dumpf(index, stdout, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
        putchar('\n');
    } else {
        printf("%-40s %-19s %12s %s\n", "NAME", "DIGEST", "BYTES", "IMPORTED");
        json_array_foreach(json_object_get(index, "images"), i, e)
        {
            const char *n = json_string_value(json_object_get(e, "name"));
            const char *d = json_string_value(json_object_get(e, "digest"));
            printf("%-40s %-19.19s %12lld %s\n", n && n[0] ? n : "<no name>", d ? d : "",
                   (long long)json_integer_value(json_object_get(e, "bytes")),
                   json_string_value(json_object_get(e, "imported")) ?: "");
        }
    }
    json_decref(index);
    return 0;
}

int tc_cmd_images(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv) || argc < 2)
        return tc_cli_usage_of("images");
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    const char *sub = argv[1];
    int rc = 2;
    if (!strcmp(sub, "import")) {
        rc = cmd_import(&cfg, argc - 1, argv + 1);
    } else if (!strcmp(sub, "pull")) {
        rc = cmd_pull(&cfg, argc - 1, argv + 1);
    } else if (!strcmp(sub, "ls") && (argc == 2 || (argc == 3 && !strcmp(argv[2], "--json")))) {
        rc = cmd_ls(&cfg, argc == 3);
    } else if (!strcmp(sub, "rm") && argc == 3) {
        int n = 0,
            r = tc_image_ref_valid(argv[2]) ? tc_image_remove(cfg.state_dir, argv[2], &n) : -EINVAL;
        if (r < 0)
            fprintf(stderr, "toolcage images rm: %s: %s\n", argv[2],
                    r == -ENOENT   ? "no such image"
                    : r == -EINVAL ? "not an image reference"
                                   : strerror(-r));
        else
            printf("removed %d image(s); `toolcage images gc` frees their space\n", n);
        rc = r < 0 ? 1 : 0;
    } else if (!strcmp(sub, "gc") && argc == 2) {
        struct tc_image_gc_stats st;
        int r = tc_image_gc(cfg.state_dir, &st);
        if (r < 0)
            fprintf(stderr, "toolcage images gc: %s\n", strerror(-r));
        else
            printf("removed %d root(s) and %d blob(s), %lld bytes; %d root(s) in use kept\n",
                   st.roots_removed, st.blobs_removed, (long long)st.bytes_freed, st.roots_busy);
        rc = r < 0 ? 1 : 0;
    } else {
        tc_cli_usage_of("images");
    }
    tc_config_free(&cfg);
    return rc;
}
