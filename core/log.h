/* Structured JSON log lines on stderr. Only server/ and api/ log; lower layers return errors. */
#pragma once
#include <jansson.h>

enum tc_log_level { TC_LOG_DEBUG, TC_LOG_INFO, TC_LOG_WARN, TC_LOG_ERROR };

void tc_log_set_level(enum tc_log_level level);
int tc_log_parse_level(const char *s); /* -EINVAL if unknown */
/* fields: a json_pack format for extra fields ("{s:s, s:I}") or NULL. Never pass secrets
 * or unredacted sandbox output here. */
void tc_log(enum tc_log_level level, const char *msg, const char *fields, ...);
