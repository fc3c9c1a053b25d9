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
