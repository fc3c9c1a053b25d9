/* GET|PUT /v1/notifications (docs/approvals.md, "Notifications"): where a tenant's reviewers
 * are told of held calls, and whether they are reminded before the approval expires.
 *   {"sinks": [{"type": "webhook", "url": "https://..."},   a signed JSON POST
 *              {"type": "slack", "url": "https://hooks..."}, a Slack-compatible message
 *              {"type": "email", "to": "a@example.com"}],    through TOOLCAGE_SMTP_URL
 *    "remind_before_seconds": 600 | null}
 * A PUT replaces the whole setting (admins of the tenant; audited). A URL is refused when a
 * callback_url to it would be (server/webhook.h); deliveries check every connection again. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "audit/audit.h"
#include "core/db.h"
#include "execution/request.h"
#include "server/auth.h"
#include "server/webhook.h"
#include "common/util.h"

#define SINKS_MAX 10

static enum MHD_Result answer(struct tc_request *r, PGconn *c)
{
    const char *p[] = {r->principal.tenant_id};
    PGresult *res = tc_db_exec(c,
                               "SELECT sinks::text, remind_before_seconds,"
                               " " TC_SQL_ISO("updated_at") " FROM tenant_notifications"
                                                            " WHERE tenant_id = $1",
                               1, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return tc_respond_db_down(r);
    json_t *o = PQntuples(res) == 1
                    ? json_pack("{s:o, s:o, s:s}", "sinks",
                                json_loads(PQgetvalue(res, 0, 0), 0, NULL), "remind_before_seconds",
                                PQgetisnull(res, 0, 1) ? json_null()
                                                       : json_integer(atoll(PQgetvalue(res, 0, 1))),
                                "updated_at", PQgetvalue(res, 0, 2))
                    : json_pack("{s:[], s:n, s:n}", "sinks", "remind_before_seconds", "updated_at");
    PQclear(res);
    return o ? tc_respond_json(r, 200, o) : MHD_NO;
}

enum MHD_Result tc_api_notifications_get(struct tc_request *r)
{
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    return c ? answer(r, c) : tc_respond_db_down(r);
}

static void err(json_t *errors, const char *path, const char *msg)
{
    json_array_append_new(errors, json_pack("{s:s, s:s}", "path", path, "message", msg));
}

/* What the audit record keeps of a sink: a Slack URL is itself a credential, and the trail is
 * forever; so its scheme and host, and a keyed hash of the whole (tc_audit_value_hash). */
static json_t *sink_audited(struct tc_request *r, json_t *sink)
{
    const char *type = json_string_value(json_object_get(sink, "type"));
    const char *v = json_string_value(json_object_get(sink, "url"));
    bool mail = !v;
    if (mail)
        v = json_string_value(json_object_get(sink, "to"));
    char hash[65], where[300];
    tc_audit_value_hash(r->srv->keys, r->principal.tenant_id, v, strlen(v), hash);
    if (mail) { /* the domain */
        snprintf(where, sizeof(where), "%s", strchr(v, '@') + 1);
    } else { /* scheme://host[:port] */
        const char *h = strstr(v, "://");
        size_t n = h ? (size_t)(h - v) + 3 + strcspn(h + 3, "/?#") : strlen(v);
        snprintf(where, sizeof(where), "%.*s", (int)(n < sizeof(where) - 1 ? n : sizeof(where) - 1),
                 v);
    }
    return json_pack("{s:s, s:s, s:s}", "type", type, mail ? "domain" : "origin", where,
                     "value_hash", hash);
}

/* The sinks as stored (only known members), or NULL with errors. */
static json_t *check_sinks(struct tc_request *r, json_t *sinks, json_t *errors)
{
    if (!json_is_array(sinks) || json_array_size(sinks) > SINKS_MAX) {
        err(errors, "sinks", "an array of at most 10 sinks");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(sinks, i, s)
    {
        char path[48];
        snprintf(path, sizeof(path), "sinks[%zu]", i);
        const char *type = json_string_value(json_object_get(s, "type"));
        const char *url = json_string_value(json_object_get(s, "url"));
        const char *to = json_string_value(json_object_get(s, "to"));
        const char *k;
        json_t *v;
        bool extra = false;
        json_object_foreach(s, k, v)
        {
            if (strcmp(k, "type") && strcmp(k, "url") && strcmp(k, "to"))
                extra = true;
        }
        if (!json_is_object(s) || !type || extra) {
            err(errors, path, "an object {type, url} or {type: \"email\", to}");
            continue;
        }
        if (strcmp(type, "webhook") == 0 || strcmp(type, "slack") == 0) {
            char why[512];
            if (!url || to || !tc_exec_callback_url_ok(url))
                err(errors, path, "needs url: http(s), no credentials, at most 2048 bytes");
            else if (tc_webhook_target_refused(url, r->srv->cfg->webhook_allow_private, why,
                                               sizeof(why)))
                err(errors, path, why);
            else
                json_array_append_new(out, json_pack("{s:s, s:s}", "type", type, "url", url));
        } else if (strcmp(type, "email") == 0) {
            if (!to || url || !tc_email_address_ok(to))
                err(errors, path, "needs to: one e-mail address");
            else if (!r->srv->cfg->smtp_url)
                err(errors, path, "this server sends no e-mail (TOOLCAGE_SMTP_URL is not set)");
            else
                json_array_append_new(out, json_pack("{s:s, s:s}", "type", type, "to", to));
        } else {
            err(errors, path, "type is one of webhook, slack, email");
        }
    }
    return out;
}

enum MHD_Result tc_api_notifications_put(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    if (!body)
        return ret;
    json_t *errors = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "sinks") && strcmp(k, "remind_before_seconds"))
            err(errors, k, "unknown member");
    }
    json_t *sinks = check_sinks(r, json_object_get(body, "sinks"), errors);
    json_t *rb = json_object_get(body, "remind_before_seconds");
    if (rb && !json_is_null(rb) &&
        (!json_is_integer(rb) || json_integer_value(rb) < 60 || json_integer_value(rb) > 604800))
        err(errors, "remind_before_seconds", "null, or an integer from 60 to 604800");
    if (json_array_size(errors)) {
        json_decref(sinks);
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(errors);
    char *text = json_dumps(sinks, JSON_COMPACT);
    char remind[24] = "";
    if (json_is_integer(rb))
        snprintf(remind, sizeof(remind), "%lld", (long long)json_integer_value(rb));
    json_t *audited = json_array();
    size_t si;
    json_t *sk;
    json_array_foreach(sinks, si, sk) json_array_append_new(audited, sink_audited(r, sk));
    json_t *ev =
        json_pack("{s:s, s:s, s:o, s:o, s:O}", "action", "notifications.update", "tenant_id",
                  r->principal.tenant_id, "actor", tc_auth_actor(&r->principal), "sinks", audited,
                  "remind_before_seconds", rb ? rb : json_null());
    json_decref(sinks);
    json_decref(body);
    const char *p[] = {r->principal.tenant_id, text, remind[0] ? remind : NULL};
    PGconn *c = text && ev ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    int rc = c ? tc_db_begin(c) : -EIO;
    if (rc == 0) {
        PGresult *res = tc_db_exec(c,
                                   "INSERT INTO tenant_notifications (tenant_id, sinks,"
                                   " remind_before_seconds) VALUES ($1, $2::jsonb, $3::int)"
                                   " ON CONFLICT (tenant_id) DO UPDATE SET sinks = $2::jsonb,"
                                   " remind_before_seconds = $3::int, updated_at = now()",
                                   3, p);
        rc = res ? 0 : -EIO;
        PQclear(res);
    }
    if (rc == 0 && tc_audit_append_tx(c, r->srv->keys, ev, NULL) < 0)
        rc = -EIO;
    if (c)
        rc = tc_db_finish(c, rc);
    free(text);
    json_decref(ev);
    if (rc < 0) {
        tc_db_release(r->srv->db, c);
        return tc_respond_db_down(r);
    }
    return answer(r, c);
}
