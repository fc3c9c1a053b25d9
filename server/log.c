#include "server/log.h"

#include "common/util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum tc_log_level min_level = TC_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void tc_log_set_level(enum tc_log_level level) { min_level = level; }

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
    if (line) {
        /* one fputs per line: stdio locks the stream, so lines from threads never interleave */
        flockfile(stderr);
        fputs(line, stderr);
        fputc('\n', stderr);
        funlockfile(stderr);
        free(line);
    }
}
