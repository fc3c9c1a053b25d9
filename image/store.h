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
