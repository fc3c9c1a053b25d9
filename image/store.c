/* The image store's index, lookups, removal and collection (image.h). */
#include "image/store.h"

#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

int tc_store_path(char *out, size_t len, const char *state_dir, const char *rel)
{
    int n = snprintf(out, len, "%s/images%s%s", state_dir, rel[0] ? "/" : "", rel);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int tc_store_prepare(const char *state_dir)
{
    static const char *const dirs[] = {"", "blobs", "blobs/sha256", "roots", "tmp"};
    char p[PATH_MAX];
    if (mkdir(state_dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    for (size_t i = 0; i < TC_ARRAY_SIZE(dirs); i++) {
        int r = tc_store_path(p, sizeof(p), state_dir, dirs[i]);
        if (r < 0)
            return r;
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
            return -errno;
    }
    return 0;
}

int tc_store_lock(const char *state_dir)
{
    char p[PATH_MAX];
    int r = tc_store_path(p, sizeof(p), state_dir, "lock");
    if (r < 0)
        return r;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    if (TC_RETRY(flock(fd, LOCK_EX)) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

static int load_index(const char *p, json_t **ret_index)
{
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = tc_read_file(p, TC_IMAGE_INDEX_MAX, &buf, &len);
    if (r == -ENOENT) {
        *ret_index = json_pack("{s:[]}", "images");
        return *ret_index ? 0 : -ENOMEM;
    }
    if (r < 0)
        return r;
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_array(json_object_get(j, "images"))) {
        json_decref(j);
        return -EINVAL;
    }
    *ret_index = j;
    return 0;
}

/* The index as read last, while index.json is the same file (a writer replaces it by rename:
 * a new inode). Shared read-only by every thread of a server: each call of an image tool and
 * each GET /v1/tools looks an image up. */
static struct {
    pthread_mutex_t lock;
    char path[PATH_MAX];
    dev_t dev;
    ino_t ino;
    struct timespec mtime;
    off_t size;
    json_t *index;
} g_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int cached_index(const char *state_dir, json_t **ret_index)
{
    char p[PATH_MAX];
    struct stat st;
    json_t *j = NULL;
    int r = tc_store_path(p, sizeof(p), state_dir, "index.json");
    if (r < 0)
        return r;
    if (stat(p, &st) < 0)
        return errno == ENOENT ? load_index(p, ret_index) : -errno;
    pthread_mutex_lock(&g_cache.lock);
    if (g_cache.index && !strcmp(g_cache.path, p) && g_cache.dev == st.st_dev &&
        g_cache.ino == st.st_ino && g_cache.size == st.st_size &&
        g_cache.mtime.tv_sec == st.st_mtim.tv_sec && g_cache.mtime.tv_nsec == st.st_mtim.tv_nsec)
        j = json_incref(g_cache.index);
    pthread_mutex_unlock(&g_cache.lock);
    if (j) {
        *ret_index = j;
        return 0;
    }
    if ((r = load_index(p, &j)) < 0)
        return r;
    pthread_mutex_lock(&g_cache.lock);
    json_decref(g_cache.index);
    g_cache.index = json_incref(j);
    snprintf(g_cache.path, sizeof(g_cache.path), "%s", p);
    g_cache.dev = st.st_dev;
    g_cache.ino = st.st_ino;
    g_cache.size = st.st_size;
    g_cache.mtime = st.st_mtim;
    pthread_mutex_unlock(&g_cache.lock);
    *ret_index = j;
    return 0;
}

int tc_image_list(const char *state_dir, json_t **ret_index)
{
    char p[PATH_MAX];
    int r = tc_store_path(p, sizeof(p), state_dir, "index.json");
    return r < 0 ? r : load_index(p, ret_index);
}

int tc_store_write_index(const char *state_dir, json_t *index)
{
    char p[PATH_MAX], tmp[PATH_MAX];
    int r = tc_store_path(p, sizeof(p), state_dir, "index.json");
    if (r < 0 || (r = tc_store_path(tmp, sizeof(tmp), state_dir, "index.json.tmp")) < 0)
        return r;
    char *s = json_dumps(index, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!s)
        return -ENOMEM;
    if (strlen(s) > TC_IMAGE_INDEX_MAX / 2) { /* room to grow, and always readable again */
        free(s);
        return -EFBIG;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    r = fd < 0 ? -errno : tc_write_all(fd, s, strlen(s));
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (fd >= 0)
        close(fd);
    free(s);
    if (r == 0 && rename(tmp, p) < 0)
        r = -errno;
    return r;
}

/* Does entry answer to ref? A digest names the manifest or the config; a name without a tag
 * is the name with ":latest". */
static bool matches(json_t *entry, const char *ref)
{
    const char *digest = json_string_value(json_object_get(entry, "digest"));
    const char *config = json_string_value(json_object_get(entry, "config"));
    const char *name = json_string_value(json_object_get(entry, "name"));
    const char *index = json_string_value(json_object_get(entry, "index_digest"));
    const char *at = strchr(ref, '@');
    const char *d = strncmp(ref, "sha256:", 7) == 0 ? ref : at ? at + 1 : NULL;
    if (d)
        return (digest && !strcmp(digest, d)) || (config && !strcmp(config, d)) ||
               (index && !strcmp(index, d));
    return tc_image_name_same(name, ref);
}

int tc_image_find(const char *state_dir, const char *ref, json_t **ret_entry)
{
    json_t *index = NULL, *e, *found = NULL;
    size_t i;
    int r = cached_index(state_dir, &index);
    if (r < 0)
        return r;
    json_array_foreach(json_object_get(index, "images"), i, e)
    {
        if (matches(e, ref)) {
            found = e; /* the last one imported wins */
        }
    }
    if (found && !tc_image_hex_valid(json_string_value(json_object_get(found, "root"))))
        found = NULL;
    if (found)
        *ret_entry = json_incref(found);
    json_decref(index);
    return found ? 0 : -ENOENT;
}

int tc_image_remove(const char *state_dir, const char *ref, int *ret_n)
{
    json_t *index = NULL;
    int n = 0, lock = tc_store_lock(state_dir);
    if (lock < 0)
        return lock;
    int r = tc_image_list(state_dir, &index);
    if (r == 0) {
        json_t *images = json_object_get(index, "images");
        for (size_t i = json_array_size(images); i-- > 0;)
            if (matches(json_array_get(images, i), ref)) {
                json_array_remove(images, i);
                n++;
            }
        r = n == 0 ? -ENOENT : tc_store_write_index(state_dir, index);
    }
    json_decref(index);
    close(lock);
    if (r == 0)
        *ret_n = n;
    return r;
}

static int64_t tree_bytes(int dirfd, const char *name, int depth)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (!S_ISDIR(st.st_mode) || depth > 128)
        return S_ISREG(st.st_mode) ? st.st_blocks * 512 : 0;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    int64_t sum = 0;
    struct dirent *de;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            sum += tree_bytes(fd, de->d_name, depth + 1);
    closedir(d);
    return sum;
}

/* Each name in dir that keep does not hold is removed. A root goes to tmp_dir first, renamed
 * while its exclusive flock is held (and removed there once the lock is dropped: a launcher
 * that opened it before the rename finds its fd no longer roots/<id>) (a launcher takes a shared
 * one before it binds a root, and checks after that its fd is still roots/<id>): no launcher binds
 * a root being deleted, and roots/ never holds half of one. An error on one name does not stop the
 * others: the first is returned. */
static int sweep(const char *dir, const char *tmp_dir, json_t *keep, bool roots,
                 struct tc_image_gc_stats *st)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    int tfd = roots ? open(tmp_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (dfd < 0 || (roots && tfd < 0)) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return e == ENOENT ? 0 : -e;
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        if (tfd >= 0)
            close(tfd);
        return -ENOMEM;
    }
    struct dirent *de;
    int first = 0;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        int r = 0, wfd = dfd;
        char gone[96];
        if (!strcmp(n, ".") || !strcmp(n, "..") || json_object_get(keep, n))
            continue;
        snprintf(gone, sizeof(gone), "%.64s", n);
        int64_t bytes = tree_bytes(dfd, n, 0);
        if (roots) {
            /* a root is deleted only under its exclusive flock; what is not a directory (no
             * launcher can bind it) goes as it is; a directory we cannot open and lock stays */
            int fd = openat(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 && errno != ENOTDIR && errno != ELOOP) {
                if (first == 0)
                    first = -errno;
                continue;
            }
            if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) { /* a launcher uses it */
                close(fd);
                st->roots_busy++;
                continue;
            }
            snprintf(gone, sizeof(gone), "gc.%.64s.%d", n, (int)getpid());
            if (renameat(dfd, n, tfd, gone) < 0)
                r = -errno;
            if (fd >= 0)
                close(fd);
            wfd = tfd;
        }
        if (r == 0)
            r = tc_image_rm_tree(wfd, roots ? gone : n);
        if (r == 0) {
            st->bytes_freed += bytes;
            if (roots)
                st->roots_removed++;
            else
                st->blobs_removed++;
        } else if (first == 0) {
            first = r;
        }
    }
    closedir(d);
    if (tfd >= 0)
        close(tfd);
    return first;
}

int tc_image_gc(const char *state_dir, struct tc_image_gc_stats *ret_stats)
{
    struct tc_image_gc_stats st = {0};
    json_t *index = NULL, *e, *roots = json_object(), *blobs = json_object();
    char p[PATH_MAX];
    size_t i;
    int lock = -1, r = tc_store_prepare(state_dir);
    if (r == 0 && (lock = tc_store_lock(state_dir)) < 0)
        r = lock;
    if (r == 0)
        r = tc_image_list(state_dir, &index);
    if (r == 0 && (!roots || !blobs))
        r = -ENOMEM;
    json_array_foreach(r == 0 ? json_object_get(index, "images") : NULL, i, e)
    {
        const char *keys[] = {"digest", "config"};
        size_t k;
        json_t *l;
        json_object_set_new(roots, json_string_value(json_object_get(e, "root")) ?: "",
                            json_true());
        for (k = 0; k < TC_ARRAY_SIZE(keys); k++) {
            const char *d = json_string_value(json_object_get(e, keys[k]));
            if (d && strlen(d) > 7)
                json_object_set_new(blobs, d + 7, json_true());
        }
        json_array_foreach(json_object_get(e, "layers"), k, l)
        {
            const char *d = json_string_value(l);
            if (d && strlen(d) > 7)
                json_object_set_new(blobs, d + 7, json_true());
        }
    }
    /* every part is swept, whatever failed before: the first error is the answer */
    char tmp[PATH_MAX];
    if (r == 0 && (r = tc_store_path(tmp, sizeof(tmp), state_dir, "tmp")) == 0 &&
        (r = tc_store_path(p, sizeof(p), state_dir, "roots")) == 0) {
        int r1 = sweep(p, tmp, roots, true, &st), r2 = 0, r3 = 0;
        if ((r2 = tc_store_path(p, sizeof(p), state_dir, "blobs/sha256")) == 0)
            r2 = sweep(p, NULL, blobs, false, &st);
        /* leftovers of imports that died (the lock says none is running) */
        r3 = sweep(tmp, NULL, NULL, false, &(struct tc_image_gc_stats){0});
        r = r1 ? r1 : r2 ? r2 : r3;
    }
    json_decref(index);
    json_decref(roots);
    json_decref(blobs);
    if (lock >= 0)
        close(lock);
    if (r == 0)
        *ret_stats = st;
    return r;
}
