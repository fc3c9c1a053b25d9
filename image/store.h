/* The store's paths, lock and index, shared by the importer (image/import.c) and the
 * lookups (image/store.c). Not for other modules: they use image.h. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "image/image.h"

/* STATE_DIR/images/REL ("" for the store itself) */
int tc_store_path(char *out, size_t len, const char *state_dir, const char *rel);
/* Make the store's directories (0700, root's). */
int tc_store_prepare(const char *state_dir);
/* The store's lock, held until the fd returned is closed; -errno. */
int tc_store_lock(const char *state_dir);
/* Replace index.json (write, fsync, rename). Call with the lock held. */
int tc_store_write_index(const char *state_dir, json_t *index);
/* One image whose manifest (a JSON object with "config" and "layers"; digest names it, and
 * index_digest (or NULL) the index it was picked from) and blobs are in the store already: its root
 * unpacked unless there, its entry recorded (a new reference in *ret_entry). Call with the lock
 * held. */
int tc_image_register(const char *state_dir, json_t *manifest, const char *digest,
                      const char *index_digest, const char *name, int64_t max_bytes,
                      json_t **ret_entry, char *err, size_t errlen);
