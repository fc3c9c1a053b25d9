#include "core/log.h"

#include "common/util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum tc_log_level min_level = TC_LOG_INFO;
static unsigned long long dropped; /* lines that could not be written; under stderr's lock */

/* One write(2) of a whole line to stderr (unbuffered; EINTR retried). */
static bool put_line(const char *s, size_t len)
{
    fflush(stderr);
    return tc_write_all(STDERR_FILENO, s, len) == 0;
}
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void tc_log_set_level(enum tc_log_level level)
{
    min_level = level;
}

int tc_log_parse_level(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

void tc_log(enum tc_log_level level, const char *msg, const char *fields, ...)
{
    if (level < min_level)
        return;
    json_t *o = NULL;
    if (fields) {
        va_list ap;
        va_start(ap, fields);
        o = json_vpack_ex(NULL, 0, fields, ap);
        va_end(ap);
    }
    if (!o)
        o = json_object();
    char when[32];
    tc_iso8601(tc_wall_ms(), when);
    json_object_set_new(o, "ts", json_string(when));
    json_object_set_new(o, "level", json_string(level_names[level]));
    json_object_set_new(o, "msg", json_string(msg));
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!line) {
        dropped++;
        return;
    }
    /* stderr's lock keeps lines from threads apart (and guards the count) */
    flockfile(stderr);
    if (dropped > 0) {
        /* Lines were lost (a full disk, say): say so, with how many, as soon as one can be
         * written again. A leading newline ends a line a failed write may have cut. */
        char note[160];
        tc_iso8601(tc_wall_ms(), when);
        int n = snprintf(note, sizeof(note),
                         "\n{\"ts\":\"%s\",\"level\":\"warn\",\"msg\":\"log lines were dropped\","
                         "\"dropped\":%llu}\n",
                         when, dropped);
        if (n > 0 && (size_t)n < sizeof(note) && put_line(note, (size_t)n))
            dropped = 0;
    }
    size_t len = strlen(line);
    line[len] = '\n'; /* json_dumps' NUL: the line goes out in one write */
    if (dropped > 0 || !put_line(line, len + 1))
        dropped++;
    funlockfile(stderr);
    free(line);
}
