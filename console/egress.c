/* The console's egress asks (approval/egress_ask.h): the connections running executions'
 * egress proxies hold for a reviewer, listed and answered here as in the API
 * (GET/POST /v1/egress-asks). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "approval/egress_ask.h"
#include "common/util.h"
#include "console/console.h"
#include "console/web.h"
#include "core/db.h"
#include "core/log.h"

static enum MHD_Result db_down(struct tc_request *r)
{
    return tc_console_message(r, 503, "Unavailable", "The database is not reachable.");
}

enum MHD_Result tc_console_egress_asks(struct tc_request *r)
{
    const char *status = tc_request_query(r, "status");
    static const char *const statuses[] = {"pending", "allowed_once", "allowed_execution",
                                           "denied",  "expired",      "withdrawn"};
    if (status && !*status)
        status = NULL;
    bool ok = !status;
    for (size_t i = 0; i < TC_ARRAY_SIZE(statuses) && !ok; i++)
        ok = strcmp(status, statuses[i]) == 0;
    if (!ok)
        return tc_console_message(r, 400, "Bad request", "Unknown status filter.");
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    json_t *asks = c ? tc_egress_ask_list(c, r->principal.tenant_id, status, 200) : NULL;
    tc_db_release(r->srv->db, c);
    if (!asks)
        return db_down(r);
    size_t i, npending = 0;
    json_t *a;
    json_array_foreach(asks, i, a)
    {
        bool pending =
            strcmp(json_string_value(json_object_get(a, "status")) ?: "", "pending") == 0;
        npending += pending;
        json_object_set_new(a, "pending", json_boolean(pending));
    }
    json_t *opts = json_array();
    for (size_t k = 0; k < TC_ARRAY_SIZE(statuses); k++)
        json_array_append_new(opts, json_pack("{s:s, s:b}", "value", statuses[k], "selected",
                                              status && strcmp(status, statuses[k]) == 0));
    return tc_console_page(r, 200, "egress_asks",
                           json_pack("{s:o, s:I, s:o, s:s}", "asks", asks, "pending_count",
                                     (json_int_t)npending, "statuses", opts, "filter",
                                     status ? status : ""));
}

static enum MHD_Result ask_page(struct tc_request *r, unsigned code, const char *error,
                                const char *reason)
{
    if (!tc_uuid_valid(r->params[0]))
        return tc_console_not_found(r);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    int err = -EIO;
    json_t *a = c ? tc_egress_ask_get(c, r->principal.tenant_id, r->params[0], &err) : NULL;
    tc_db_release(r->srv->db, c);
    if (!a)
        return err == -ENOENT ? tc_console_not_found(r) : db_down(r);
    const char *st = json_string_value(json_object_get(a, "status")) ?: "";
    const char *done = tc_request_query(r, "done"), *flash = NULL;
    if (done && strcmp(done, st) == 0)
        flash = strcmp(st, "denied") == 0 ? "Denied. The connection is refused."
                                          : "Allowed. The connection goes through.";
    return tc_console_page(r, code, "egress_ask",
                           json_pack("{s:o, s:b, s:s*, s:s*, s:s}", "ask", a, "pending",
                                     strcmp(st, "pending") == 0, "error", error, "flash", flash,
                                     "reason", reason ? reason : ""));
}

enum MHD_Result tc_console_egress_ask(struct tc_request *r)
{
    return ask_page(r, 200, NULL, NULL);
}

enum MHD_Result tc_console_egress_decide(struct tc_request *r)
{
    struct tc_console_ctx *cx = tc_console_ctx(r);
    if (!tc_uuid_valid(r->params[0]))
        return tc_console_not_found(r);
    int d = tc_egress_verdict_parse(tc_console_form(r, "decision"));
    const char *reason = tc_console_form(r, "reason");
    if (reason && !*reason)
        reason = NULL;
    if (d < 0)
        return ask_page(r, 400, "Choose allow once, allow for this execution, or deny.", reason);
    if (reason && strlen(reason) > 1000)
        return ask_page(r, 400, "The reason is longer than 1000 bytes.", reason);
    if (d == TC_EGRESS_DENY && (!reason || strspn(reason, " \t\r\n") == strlen(reason)))
        return ask_page(r, 400, "A reason is required to deny.", NULL);
    char decider[TC_CONSOLE_NAME_MAX + 8];
    snprintf(decider, sizeof(decider), "user:%s", cx->user.name);
    json_t *actor = json_pack("{s:s, s:s, s:s, s:s}", "type", "console_user", "id", cx->user.id,
                              "name", cx->user.name, "role", tc_role_name(cx->user.role));
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    /* a console user never asks for an execution; its person may have (maker-checker) */
    int rc = c && actor ? tc_egress_ask_decide(c, r->srv->keys, r->principal.tenant_id,
                                               r->params[0], decider, NULL, cx->user.person_id,
                                               actor, (enum tc_egress_verdict)d, reason)
                        : -EIO;
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    switch (rc) {
    case 0: {
        tc_log(TC_LOG_INFO, "egress ask decided", "{s:s, s:s, s:s, s:s}", "request_id",
               r->request_id, "ask_id", r->params[0], "decision",
               tc_egress_verdict_name((enum tc_egress_verdict)d), "user", cx->user.name);
        static const char *const st[] = {"allowed_once", "allowed_execution", "denied"};
        char loc[128];
        snprintf(loc, sizeof(loc), "/console/egress-asks/%s?done=%s", r->params[0], st[d]);
        return tc_console_redirect(r, loc, NULL, NULL);
    }
    case -ENOENT:
        return tc_console_not_found(r);
    case -EPERM:
        return ask_page(r, 403, "You asked for this execution, so you cannot answer its asks.",
                        NULL);
    case -ESTALE:
        return ask_page(
            r, 409, "This ask is no longer pending (answered, expired, or its execution ended).",
            NULL);
    default:
        return db_down(r);
    }
}
