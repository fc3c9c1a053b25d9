/* Tool images (docs/images.md): OCI images imported into a content-addressed store under
 * TOOLCAGE_STATE_DIR/images, each unpacked once into a read-only root that a tool's sandbox
 * gets instead of the host's /usr and /etc.
 *
 *   images/index.json              the images: name, digests, root, the config's
 * Env/WorkingDir/User images/blobs/sha256/<hex>      manifests, configs and layers, each verified
 * on the way in images/roots/<chain id hex>    a root: the layers applied in order (whiteouts too),
 * every file owned by root, no setuid/setgid bit, no device node, no xattr; readable by anyone the
 * owner's bits let read images/lock                    imports, removals and collections take it in
 * turn
 *
 * The store belongs to root (0700): only the CLI writes it; the launcher (root) binds a root
 * into its scratch space for the sandboxes (sandbox/launcher.c), the server only reads the
 * index. A root in use by a launcher is held with a shared flock, so gc leaves it alone. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define TC_IMAGE_REF_MAX     255
#define TC_IMAGE_HEX_LEN     64
#define TC_IMAGE_META_MAX    (4 << 20)   /* a manifest, config or index.json */
#define TC_IMAGE_MAX_BYTES   (8LL << 30) /* default bound on an import's bytes */
#define TC_IMAGE_MAX_ENTRIES (1 << 19)   /* files in one import, all layers */
#define TC_IMAGE_INDEX_MAX   (32 << 20)  /* index.json (written only up to half of it) */
#define TC_IMAGE_ENV_MAX     256         /* a config's Env entries we keep, ... */
#define TC_IMAGE_ENV_BYTES   (64 << 10)  /* ... and their bytes */

/* A reference a policy may name: "name[:tag]", "name[:tag]@sha256:<hex>" or "sha256:<hex>"
 * (a manifest or config digest); printable, no spaces, at most TC_IMAGE_REF_MAX bytes. */
bool tc_image_ref_valid(const char *ref);
/* Do two names (references without their digests) name the same image? A name without a
 * tag is the name with ":latest" ("repo" and "repo:latest" are one name). */
bool tc_image_name_same(const char *a, const char *b);
/* "<64 lowercase hex>" */
bool tc_image_hex_valid(const char *s);

/* The index entry (a new reference) of the image ref names, or -ENOENT; -errno for I/O, -EINVAL
 * for a damaged index. Reads index.json without the lock (it is replaced by rename). */
int tc_image_find(const char *state_dir, const char *ref, json_t **ret_entry);
/* The whole index, {"images": [...]} (a new reference). An absent store is an empty one. */
int tc_image_list(const char *state_dir, json_t **ret_index);

/* Import an OCI image layout or `docker save` archive (tar, possibly compressed): every blob
 * verified against its digest and every layer against the config's diff_ids, the roots
 * unpacked, the index updated. name (or NULL) names the image when the archive holds exactly
 * one. A name the archive gives its image does not move off another image in the store
 * (-EEXIST) unless name is given or replace. max_bytes bounds the archive's bytes, and
 * separately what its layers decompress to and what the roots get, over the whole import.
 * On success *ret_images is the array of the index entries written. On failure err says why
 * and nothing but verified blobs stays in the store. */
int tc_image_import(const char *state_dir, const char *file, const char *name, bool replace,
                    int64_t max_bytes, json_t **ret_images, char *err, size_t errlen);

struct tc_image_pull_opts {
    const char *name;        /* the name it gets (default: the reference without its digest) */
    const char *credentials; /* "user:password" for the registry or its token service, or NULL */
    const char *ca_file;     /* a CA bundle for the registry's TLS beside the system's, or NULL */
    bool plain_http;         /* http:// (a registry on a trusted network); https otherwise */
    int64_t max_bytes;       /* bound on the download and, separately, on the root */
};
/* Pull ref ("host[:port]/repository[:tag][@sha256:<hex>]"; no host: Docker Hub) from its
 * registry (distribution API v2, Bearer-token or Basic authentication): an index resolves to
 * linux on our architecture; the manifest (against the reference's digest, if any), config
 * and layers are verified before they are stored; a layer download that stopped is resumed;
 * then the image is registered as an import is. *ret_entry: its index entry. */
int tc_image_pull(const char *state_dir, const char *ref, const struct tc_image_pull_opts *opts,
                  json_t **ret_entry, char *err, size_t errlen);

/* Remove the index entries ref matches (their blobs and roots stay until gc); the number
 * removed in *ret_n. -ENOENT when none matched. */
int tc_image_remove(const char *state_dir, const char *ref, int *ret_n);

struct tc_image_gc_stats {
    int roots_removed, roots_busy, blobs_removed;
    int64_t bytes_freed;
};
/* Delete the roots and blobs no index entry references, and leftovers of failed imports. */
int tc_image_gc(const char *state_dir, struct tc_image_gc_stats *ret_stats);

/* ---- for the importer and its tests (image/layer.c) ---- */

struct archive;
struct tc_layer_state {
    int64_t max_bytes, max_entries; /* bounds over all layers of one root */
    int64_t bytes, entries;         /* so far */
    int64_t setuid_stripped;        /* files that had a setuid or setgid bit */
};
/* Apply one layer, an uncompressed tar read through a, onto the tree at rootfd (an O_PATH or
 * O_DIRECTORY fd): OCI whiteouts (.wh.NAME, .wh..wh..opq) remove what lower layers made;
 * every path resolves inside the root (a symlink the layers made is followed as if the root
 * were /, never out of it); device nodes and FIFOs are refused; setuid and setgid bits are
 * dropped. 0, or -errno with err set ("entry PATH: why"). */
int tc_layer_apply(int rootfd, struct archive *a, struct tc_layer_state *st, char *err,
                   size_t errlen);
/* Remove name under dirfd, a directory tree too, never following a symlink. */
int tc_image_rm_tree(int dirfd, const char *name);
