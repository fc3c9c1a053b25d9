/* Atomic policy reload (SIGHUP, POST /v1/admin/policy/reload): a bad file is refused and
 * the old policy stays; executions in flight keep the policy they started with (they hold
 * a reference). Every attempt is audited, and a reload whose record cannot be written is
 * not applied. */
#pragma once
#include <jansson.h>

struct tc_server;

/* 0 (applied), -EINVAL (refused: *ret_errors lists why), -EIO (not audited, not applied).
 * On success *ret_info is {digest, tools}. */
int tc_server_reload_policy(struct tc_server *srv, json_t *actor, json_t **ret_errors,
                            json_t **ret_info);
