/* A session's files (TC_WIRE_FILE): the launcher holds each sandbox's workspace (ws_fd, the
 * tmpfs's root, opened before the program ran), so it reads and writes the files there for
 * the server; sandbox/workspace.c does it without following anything the program made. The
 * answer is one TC_WIRE_FILE_DONE: a JSON line, then the file's bytes for "get". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/launcher_int.h"
#include "sandbox/wire.h"
#include "sandbox/workspace.h"

#define LIST_MAX 10000 /* entries in one listing */

bool lc_own_file(json_t *f)
{
    const char *p = json_string_value(json_object_get(f, "path"));
    return p && strncmp(p, ".toolcage/", 10) == 0 &&
           json_integer_value(json_object_get(f, "mode")) == 0444;
}

/* a and b cannot both be: the same path, or one a folder above the other */
static bool clash(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
    return strncmp(a, b, n) == 0 && (la == lb || (la < lb ? b[la] : a[lb]) == '/');
}

int lc_check_files(json_t *files, json_t *all, bool gated, char *err, size_t errlen)
{
    json_t *f, *g;
    size_t i, j;
    json_array_foreach(files, i, f)
    {
        const char *p = json_string_value(json_object_get(f, "path"));
        if (lc_own_file(f))
            continue;
        if (!p) {
            snprintf(err, errlen, "files[%zu]: no path", i);
            return -EINVAL;
        }
        if (gated && strlen(p) + sizeof(TC_WS_STAGE "/") > TC_WS_STAGED_PATH_MAX) {
            snprintf(err, errlen, "files[%zu]: %s", i, strerror(ENAMETOOLONG));
            return -ENAMETOOLONG;
        }
        bool taken = gated && clash(p, TC_WS_STAGE);
        json_array_foreach(all, j, g) if (!taken && lc_own_file(g)) taken =
            clash(p, json_string_value(json_object_get(g, "path")));
        if (taken) {
            snprintf(err, errlen, "files[%zu]: %s: %s", i, p, strerror(EEXIST));
            return -EEXIST;
        }
    }
    return 0;
}

/* A gated spec's call files (its runner waits for its gate: a warm sandbox's, a cold call's)
 * are written under TC_WS_STAGE, not in place: a warm sandbox's interpreter may still be
 * starting when they are written (gvisor and microvm ones cannot be seen at their gate), and
 * its start-up reads some files of the workspace (a .pth or usercustomize.py under HOME, a
 * sitecustomize.py on a PYTHONPATH in it), so that the call's code would run before its gate,
 * before its start is recorded. The runner moves them into place once the gate has opened
 * (execution/plots.c), merging folders with toolcage's own (.toolcage). */
int lc_write_files(struct sbx *s, json_t *files, json_t *all, char *err, size_t errlen)
{
    json_t *own, *call, *f;
    size_t i;
    int r;

    if ((r = lc_check_files(files, all, s->spec.gate, err, errlen)) < 0)
        return r;
    if (!s->spec.gate)
        return tc_ws_write_files(s->ws_fd, files, s->uid, s->uid, err, errlen);
    own = json_array();
    call = json_array();
    if (!own || !call) {
        json_decref(own);
        json_decref(call);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    json_array_foreach(files, i, f)
    {
        if (lc_own_file(f)) {
            json_array_append(own, f);
            continue;
        }
        char staged[TC_WS_STAGED_PATH_MAX]; /* (lc_check_files: it fits) */
        snprintf(staged, sizeof(staged), "%s/%s", TC_WS_STAGE,
                 json_string_value(json_object_get(f, "path")));
        json_t *c = json_copy(f); /* (shallow: the content is shared) */
        if (c && json_object_set_new(c, "path", json_string(staged)) < 0) {
            json_decref(c);
            c = NULL;
        }
        if (!c || json_array_append_new(call, c) < 0) {
            snprintf(err, errlen, "out of memory");
            r = -ENOMEM;
            break;
        }
    }
    if (r == 0)
        r = tc_ws_write_files(s->ws_fd, own, s->uid, s->uid, err, errlen);
    if (r == 0)
        r = tc_ws_write_files(s->ws_fd, call, s->uid, s->uid, err, errlen);
    json_decref(own);
    json_decref(call);
    return r;
}

static void answer(struct launcher *L, const char *id, json_t *head, const void *data, size_t len)
{
    char *line = head ? json_dumps(head, JSON_COMPACT) : NULL;
    json_decref(head);
    if (!line)
        return; /* the server's wait times out */
    size_t n = strlen(line);
    char *msg = malloc(n + 1 + len);
    if (msg) {
        memcpy(msg, line, n);
        msg[n] = '\n';
        if (len)
            memcpy(msg + n + 1, data, len);
        (void)tc_wire_send(L->sock, TC_WIRE_FILE_DONE, id, msg, n + 1 + len);
    }
    free(msg);
    free(line);
}

void lc_file_op(struct launcher *L, const char *id, const char *payload, size_t len)
{
    const char *nl = payload ? memchr(payload, '\n', len) : NULL;
    json_t *op = nl ? json_loadb(payload, (size_t)(nl - payload), 0, NULL) : NULL;
    json_int_t req = json_integer_value(json_object_get(op, "req"));
    const char *what = json_string_value(json_object_get(op, "op"));
    const char *path = json_string_value(json_object_get(op, "path"));
    json_int_t max = json_integer_value(json_object_get(op, "max"));
    const char *data = nl ? nl + 1 : NULL;
    size_t dlen = nl ? len - (size_t)(nl + 1 - payload) : 0;
    struct sbx *s = NULL;
    int r = -ENOENT;

    for (unsigned i = 0; i < L->max; i++)
        if (L->slots[i].used && !L->slots[i].exited && L->slots[i].spec.session &&
            L->slots[i].ws_fd >= 0 && strcmp(L->slots[i].id, id) == 0)
            s = &L->slots[i];
    json_t *head = json_pack("{s:I}", "req", req);
    char *buf = NULL;
    size_t blen = 0;
    if (!op || !what || (strcmp(what, "list") != 0 && (!path || !tc_ws_path_ok(path)))) {
        r = -EINVAL;
    } else if (s && strcmp(what, "get") == 0) {
        size_t cap = TC_WIRE_MAX_PAYLOAD - 4096;
        r = tc_ws_get(s->ws_fd, path, max > 0 && (size_t)max < cap ? (size_t)max : cap, &buf,
                      &blen);
        if (r == 0)
            json_object_set_new(head, "size", json_integer((json_int_t)blen));
    } else if (s && strcmp(what, "put") == 0) {
        bool created = false;
        r = tc_ws_put(s->ws_fd, path, data, dlen, s->uid, s->uid, &created);
        if (r == 0)
            json_object_set_new(head, "created", json_boolean(created));
    } else if (s && strcmp(what, "delete") == 0) {
        r = tc_ws_delete(s->ws_fd, path);
    } else if (s && strcmp(what, "list") == 0) {
        bool incomplete = false;
        json_t *entries = tc_ws_list(s->ws_fd, LIST_MAX, &incomplete);
        r = entries ? 0 : -ENOMEM;
        if (entries) {
            json_object_set_new(head, "entries", entries);
            json_object_set_new(head, "incomplete", json_boolean(incomplete));
        }
    } else if (s) {
        r = -EINVAL;
    }
    if (r < 0)
        json_object_set_new(head, "errno", json_integer(-r));
    answer(L, id, head, r == 0 ? buf : NULL, r == 0 ? blen : 0);
    free(buf);
    json_decref(op);
}
