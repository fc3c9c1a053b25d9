#include "approval/approval.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "common/util.h"
#include "execution/cancel.h"
#include "policy/prescreen.h"
#include "core/db.h"

/* RFC 3339 UTC text of a timestamptz column (sessions run with TIME ZONE 'UTC'). */

bool tc_approval_needed(const struct tc_tool *tool, bool prescreen_wants_approval,
                        json_t **ret_reasons)
{
    json_t *reasons = json_array();
    if (tool->irreversible)
        json_array_append_new(reasons, json_string("irreversible"));
    if (tool->tier == TC_TIER_HUMAN_APPROVE)
        json_array_append_new(reasons, json_string("tier:human_approve"));
    if (tool->tier == TC_TIER_MANUAL_ONLY)
        json_array_append_new(reasons, json_string("tier:manual_only"));
    if (prescreen_wants_approval)
        json_array_append_new(reasons, json_string("prescreen"));
    if (json_array_size(reasons) == 0) {
        json_decref(reasons);
        *ret_reasons = NULL;
        return false;
    }
    *ret_reasons = reasons;
    return true;
}

bool tc_approval_may_hold(const struct tc_tool *tool, json_t **ret_reasons)
{
    json_t *reasons = NULL;
    if (!tc_approval_needed(tool, false, &reasons))
        reasons = json_array();
    /* The pre-screen holds a call for what its code contains; a credential used outside any
     * call escapes that screening, so a tool whose pre-screen can hold counts as held. */
    const char *rules = tc_prescreen_language(tool);
    bool screened = strcmp(rules, "python") == 0 || strcmp(rules, "shell") == 0 ||
                    strcmp(rules, "javascript") == 0;
    static const char *const severities[] = {"low", "medium", "high", "critical"};
    for (size_t i = 0; screened && i < TC_ARRAY_SIZE(severities); i++) {
        json_t *one = json_pack("[{s:s}]", "severity", severities[i]);
        bool holds = one && tc_prescreen_decide(tool, one) == TC_ACTION_APPROVE;
        json_decref(one);
        if (holds) {
            char why[48];
            snprintf(why, sizeof(why), "prescreen:%s", severities[i]);
            json_array_append_new(reasons, json_string(why));
        }
    }
    if (json_array_size(reasons) == 0) {
        json_decref(reasons);
        *ret_reasons = NULL;
        return false;
    }
    *ret_reasons = reasons;
    return true;
}

static json_t *approval_section(const struct tc_tool *tool)
{
    return json_object_get(tool->raw, "approval");
}

int tc_approval_required_approvers(const struct tc_tool *tool)
{
    json_t *n = json_object_get(approval_section(tool), "approvers");
    if (json_is_integer(n))
        return (int)json_integer_value(n);
    return tool->tier == TC_TIER_MANUAL_ONLY ? TC_APPROVAL_MANUAL_DEFAULT : 1;
}

int tc_approval_ttl_seconds(const struct tc_tool *tool)
{
    json_t *n = json_object_get(approval_section(tool), "ttl_seconds");
    return json_is_integer(n) ? (int)json_integer_value(n) : TC_APPROVAL_TTL_DEFAULT;
}

void tc_approval_tool_digest(const struct tc_tool *tool, char hex[65])
{
    unsigned char d[32];
    size_t len = 0;
    char *canon = tc_audit_canonical(tool->raw, &len);
    crypto_generichash(d, sizeof(d), (const unsigned char *)(canon ? canon : ""), canon ? len : 0,
                       NULL, 0);
    free(canon);
    sodium_bin2hex(hex, 65, d, sizeof(d));
}

json_t *tc_approval_payload(const struct tc_tool *tool, const struct tc_exec_request *req,
                            const int64_t limits[TC_LIMIT__COUNT])
{
    json_t *body = req->body;
    json_t *files = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(body, "files"), i, f)
    {
        json_t *enc = json_object_get(f, "encoding");
        json_array_append_new(files,
                              json_pack("{s:O, s:O, s:s}", "path", json_object_get(f, "path"),
                                        "content", json_object_get(f, "content"), "encoding",
                                        enc ? json_string_value(enc) : "utf8"));
    }
    json_t *in = json_object_get(body, "stdin");
    json_t *creds = json_object_get(tool->raw, "credentials");
    /* "o" for credentials: a new empty array must not be referenced twice (leak). */
    json_t *payload = json_pack("{s:s, s:O, s:O, s:o, s:o, s:o}", "tool", tool->name, "code",
                                json_object_get(body, "code"), "stdin", in ? in : json_null(),
                                "files", files, "limits", tc_exec_limits_json(limits),
                                "credentials", creds ? json_incref(creds) : json_array());
    /* What comes back is part of what is approved; absent when not asked for, so payloads
     * (and hashes) of calls without it are unchanged. */
    json_t *collect = json_object_get(body, "collect");
    if (payload && collect)
        json_object_set(payload, "collect", collect);
    /* The tool as declared (command, env, mounts, network, backend, redaction...): the run
     * is refused if the policy's definition of the tool changed after the decision. */
    char digest[65];
    tc_approval_tool_digest(tool, digest);
    if (payload)
        json_object_set_new(payload, "tool_policy", json_string(digest));
    return payload;
}

void tc_approval_payload_hash(const json_t *payload, unsigned char out[32])
{
    size_t len = 0;
    char *canon = tc_audit_canonical(payload, &len);
    crypto_generichash(out, 32, (const unsigned char *)(canon ? canon : ""), canon ? len : 0, NULL,
                       0);
    free(canon);
}

static int finish_tx(PGconn *c, int rc)
{
    return tc_db_finish(c, rc);
}

static bool exec_ok(PGconn *c, const char *sql, int n, const char *const *p)
{
    PGresult *r = tc_db_exec(c, sql, n, p);
    PQclear(r);
    return r != NULL;
}

/* Close an approval and its execution with a final status, and audit it. */
static int close_approval(PGconn *c, const struct tc_keys *keys, const char *approval_id,
                          const char *execution_id, const char *tenant_id, const char *tool,
                          const char *approval_status, const char *exec_status, json_t *actor,
                          const char *action, const char *reason)
{
    const char *p[] = {approval_id, approval_status};
    if (!exec_ok(c, "UPDATE approvals SET status = $2, decided_at = now() WHERE id = $1", 2, p))
        return -EIO;
    const char *p2[] = {execution_id, exec_status};
    /* Guarded like every transition (migrations/0008): only a call still held closes so. */
    PGresult *res = tc_db_exec(c,
                               "UPDATE executions SET status = $2, finished_at = now()"
                               " WHERE id = $1 AND status = 'pending_approval'",
                               2, p2);
    bool closed = res && strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    if (!closed)
        return -EIO;
    /* Finished without running: wake its long-polls on every instance (at commit). */
    if (!exec_ok(c, "SELECT pg_notify('toolcage_done', $1)", 1, p2))
        return -EIO;
    json_t *ev =
        json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:s*}", "action", action, "tenant_id",
                  tenant_id, "actor", actor, "tool", tool, "approval_id", approval_id,
                  "execution_id", execution_id, "status", approval_status, "reason", reason);
    int r = ev ? tc_audit_append_tx(c, keys, ev, NULL) : -ENOMEM;
    json_decref(ev);
    return r;
}

json_t *tc_approval_new(const struct tc_tool *tool, json_t *payload, json_t *reasons)
{
    static const char *const tiers[] = {"auto", "assisted", "human_approve", "manual_only"};
    char id[37], hash_hex[67];
    unsigned char h[32];
    if (!payload)
        return NULL;
    tc_uuid7(id);
    tc_approval_payload_hash(payload, h);
    tc_db_bytea_hex(h, sizeof(h), hash_hex);
    return json_pack("{s:s, s:o, s:O, s:s, s:s, s:i, s:i}", "id", id, "payload", payload, "reasons",
                     reasons, "payload_hash", hash_hex, "tier", tiers[tool->tier], "ttl",
                     tc_approval_ttl_seconds(tool), "required",
                     tc_approval_required_approvers(tool));
}

int tc_approval_insert_tx(PGconn *c, json_t *approval, const char *tenant_id,
                          const char *execution_id, const char *tool, const char *requester_key_id,
                          json_t *findings, const char *public_url, char ret_expires[32])
{
    char *payload = json_dumps(json_object_get(approval, "payload"), JSON_COMPACT);
    char *reasons = json_dumps(json_object_get(approval, "reasons"), JSON_COMPACT);
    char *found = json_dumps(findings ? findings : json_array(), JSON_COMPACT);
    char ttl[16], required[16];
    snprintf(ttl, sizeof(ttl), "%d", (int)json_integer_value(json_object_get(approval, "ttl")));
    snprintf(required, sizeof(required), "%d",
             (int)json_integer_value(json_object_get(approval, "required")));
    const char *p[] = {json_string_value(json_object_get(approval, "id")),
                       tenant_id,
                       execution_id,
                       tool,
                       json_string_value(json_object_get(approval, "tier")),
                       reasons,
                       payload,
                       json_string_value(json_object_get(approval, "payload_hash")),
                       requester_key_id,
                       required,
                       ttl,
                       found};
    PGresult *res = (payload && reasons && found)
                        ? tc_db_exec(c,
                                     "INSERT INTO approvals (id, tenant_id, execution_id, tool,"
                                     " tier, reasons, payload, payload_hash, requester_key_id,"
                                     " required_approvals, status, expires_at, findings)"
                                     " VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb,"
                                     " $8::bytea, $9, $10::int, 'pending',"
                                     " now() + make_interval(secs => $11::int), $12::jsonb)"
                                     " RETURNING " TC_SQL_ISO("expires_at"),
                                     12, p)
                        : NULL;
    bool ok = res && PQntuples(res) == 1;
    if (ok)
        snprintf(ret_expires, 32, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    free(payload);
    free(reasons);
    free(found);
    /* its reviewers are told (queued with it: told if and only if it is held) */
    if (ok &&
        tc_approval_notify_tx(c, tenant_id, json_string_value(json_object_get(approval, "id")),
                              "approval.pending", public_url) < 0)
        ok = false;
    return ok ? 0 : -EIO;
}

/* ---- reviewer notifications ---- */

/* One sink's row: its kind, where it goes and what it says (no code, stdin or files). */
/* One notice for one sink: a signed JSON webhook (facts + event + link), a Slack-compatible
 * {"text"}, or an e-mail {subject, text} (url mailto:), as a row of the outbox. */
static int notify_one(PGconn *c, const char *execution_id, const char *approval_id,
                      const char *ask_id, const char *event, json_t *sink, json_t *facts,
                      const char *text, const char *subject, const char *link)
{
    const char *type = json_string_value(json_object_get(sink, "type"));
    json_t *body = NULL;
    char *url = NULL; /* whole: a URL is up to 2048 bytes */
    const char *sink_url = json_string_value(json_object_get(sink, "url"));
    if (type && strcmp(type, "webhook") == 0 && sink_url) {
        body = json_deep_copy(facts);
        json_object_set_new(body, "event", json_string(event));
        json_object_set_new(body, "link", json_string(link));
        url = strdup(sink_url);
    } else if (type && strcmp(type, "slack") == 0 && sink_url) {
        body = json_pack("{s:s}", "text", text);
        url = strdup(sink_url);
    } else if (type && strcmp(type, "email") == 0) {
        body = json_pack("{s:s, s:s}", "subject", subject, "text", text);
        const char *to = json_string_value(json_object_get(sink, "to")) ?: "";
        url = malloc(strlen(to) + 8);
        if (url)
            sprintf(url, "mailto:%s", to);
    } else {
        return 0; /* validated when stored: nothing else is there */
    }
    char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    char id[37];
    tc_uuid7(id);
    const char *p[] = {id, execution_id, url, b, type, approval_id, event, ask_id};
    PGresult *r = b && url
                      ? tc_db_exec(c,
                                   "INSERT INTO webhook_deliveries (id, execution_id, url, body,"
                                   " kind, approval_id, event, ask_id)"
                                   " VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8)",
                                   8, p)
                      : NULL;
    free(b);
    free(url);
    PQclear(r);
    return r ? 0 : -EIO;
}

/* The console link of path under public_url (no double slash). */
static void console_link(char *out, size_t size, const char *public_url, const char *path,
                         const char *id)
{
    size_t n = strlen(public_url);
    while (n > 0 && public_url[n - 1] == '/')
        n--;
    snprintf(out, size, "%.*s/console/%s/%s", (int)n, public_url, path, id);
}

int tc_notify_sinks_tx(PGconn *c, const char *tenant_id, const char *execution_id,
                       const char *approval_id, const char *ask_id, const char *event,
                       json_t *facts, const char *text, const char *subject, const char *link)
{
    const char *p[] = {tenant_id};
    PGresult *r =
        tc_db_exec(c, "SELECT sinks::text FROM tenant_notifications WHERE tenant_id = $1", 1, p);
    if (!r)
        return -EIO;
    int rc = 0;
    if (PQntuples(r) == 1) {
        json_t *sinks = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
        size_t i;
        json_t *sink;
        json_array_foreach(sinks, i, sink)
        {
            if (rc == 0)
                rc = notify_one(c, execution_id, approval_id, ask_id, event, sink, facts, text,
                                subject, link);
        }
        rc = rc == 0 && !sinks ? -EIO : rc;
        json_decref(sinks);
    }
    PQclear(r);
    return rc;
}

int tc_approval_notify_tx(PGconn *c, const char *tenant_id, const char *approval_id,
                          const char *event, const char *public_url)
{
    const char *p[] = {approval_id, tenant_id};
    PGresult *r = tc_db_exec(
        c,
        "SELECT json_build_object('approval_id', a.id, 'execution_id',"
        " a.execution_id, 'tenant_id', a.tenant_id, 'tenant', t.name, 'tool', a.tool, 'tier',"
        " a.tier, 'reasons', a.reasons, 'required_approvals', a.required_approvals,"
        " 'expires_at', " TC_SQL_ISO("a.expires_at") ")::text, a.execution_id"
                                                     " FROM approvals a JOIN tenants t ON t.id ="
                                                     " a.tenant_id WHERE a.id = $1 AND"
                                                     " a.tenant_id = $2",
        2, p);
    if (!r)
        return -EIO;
    int rc = 0;
    if (PQntuples(r) == 1) {
        json_t *facts = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
        char link[512], text[1024], subject[256];
        console_link(link, sizeof(link), public_url, "approvals", approval_id);
        const char *tool = json_string_value(json_object_get(facts, "tool"));
        const char *tenant = json_string_value(json_object_get(facts, "tenant"));
        const char *expires = json_string_value(json_object_get(facts, "expires_at"));
        bool reminder = strcmp(event, "approval.reminder") == 0;
        char *reasons = json_dumps(json_object_get(facts, "reasons"), JSON_COMPACT);
        json_int_t need = json_integer_value(json_object_get(facts, "required_approvals"));
        snprintf(text, sizeof(text),
                 "%s: a call of tool %s (tenant %s) is held for approval (%s); %d approval%s "
                 "needed; it expires at %s UTC.\nReview it: %s\n",
                 reminder ? "Reminder" : "Approval needed", tool ? tool : "?",
                 tenant ? tenant : "?", reasons ? reasons : "[]", (int)need,
                 need == 1 ? " is" : "s are", expires ? expires : "?", link);
        snprintf(subject, sizeof(subject), "[toolcage] %s: %s (%s)",
                 reminder ? "reminder, approval needed" : "approval needed", tool ? tool : "?",
                 tenant ? tenant : "?");
        free(reasons);
        rc = facts ? tc_notify_sinks_tx(c, tenant_id, PQgetvalue(r, 0, 1), approval_id, NULL, event,
                                        facts, text, subject, link)
                   : -EIO;
        json_decref(facts);
    }
    PQclear(r);
    return rc;
}

int tc_egress_ask_notify_tx(PGconn *c, const char *tenant_id, const char *ask_id,
                            const char *public_url)
{
    const char *p[] = {ask_id, tenant_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT json_build_object('ask_id', a.id, 'execution_id',"
                             " a.execution_id, 'tenant_id', a.tenant_id, 'tenant', t.name, 'tool',"
                             " a.tool, 'host', a.host, 'port', a.port, 'expires_at', " TC_SQL_ISO(
                                 "a.expires_at") ")::text, a.execution_id"
                                                 " FROM egress_asks a JOIN tenants t ON t.id ="
                                                 " a.tenant_id WHERE a.id = $1 AND"
                                                 " a.tenant_id = $2",
                             2, p);
    if (!r)
        return -EIO;
    int rc = 0;
    if (PQntuples(r) == 1) {
        json_t *facts = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
        char link[512], text[1024], subject[400];
        console_link(link, sizeof(link), public_url, "egress-asks", ask_id);
        const char *tool = json_string_value(json_object_get(facts, "tool"));
        const char *tenant = json_string_value(json_object_get(facts, "tenant"));
        const char *host = json_string_value(json_object_get(facts, "host"));
        const char *expires = json_string_value(json_object_get(facts, "expires_at"));
        int port = (int)json_integer_value(json_object_get(facts, "port"));
        snprintf(text, sizeof(text),
                 "Connection held: a running call of tool %s (tenant %s) asks to reach %s:%d; "
                 "no answer by %s UTC is a deny.\nAnswer it: %s\n",
                 tool ? tool : "?", tenant ? tenant : "?", host ? host : "?", port,
                 expires ? expires : "?", link);
        snprintf(subject, sizeof(subject), "[toolcage] connection held: %s:%d (%s, %s)",
                 host ? host : "?", port, tool ? tool : "?", tenant ? tenant : "?");
        rc = facts ? tc_notify_sinks_tx(c, tenant_id, PQgetvalue(r, 0, 1), NULL, ask_id,
                                        "egress.ask", facts, text, subject, link)
                   : -EIO;
        json_decref(facts);
    }
    PQclear(r);
    return rc;
}

int tc_approval_remind_due(PGconn *c, const char *public_url)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    /* marked in the transaction that queues them: one reminder per approval */
    PGresult *r = tc_db_exec(
        c,
        "UPDATE approvals a SET reminded_at = now() FROM tenant_notifications n"
        " WHERE a.id IN (SELECT x.id FROM approvals x JOIN tenant_notifications m"
        "   ON m.tenant_id = x.tenant_id WHERE x.status = 'pending' AND x.reminded_at IS NULL"
        "   AND m.remind_before_seconds IS NOT NULL"
        "   AND x.expires_at - make_interval(secs => m.remind_before_seconds) <= now()"
        "   AND x.expires_at - make_interval(secs => m.remind_before_seconds) > x.created_at"
        "   AND x.expires_at > now() ORDER BY x.expires_at LIMIT 100 FOR UPDATE OF x SKIP LOCKED)"
        " AND n.tenant_id = a.tenant_id RETURNING a.id, a.tenant_id",
        0, NULL);
    if (!r)
        return finish_tx(c, -EIO);
    int n = PQntuples(r), rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = tc_approval_notify_tx(c, PQgetvalue(r, i, 1), PQgetvalue(r, i, 0), "approval.reminder",
                                   public_url);
    PQclear(r);
    rc = finish_tx(c, rc);
    return rc < 0 ? rc : n;
}

int tc_approval_session_ended_tx(PGconn *c, const struct tc_keys *keys, const char *session_id,
                                 json_t *actor)
{
    const char *p[] = {session_id};
    /* approvals before executions, the order every decision takes them in (no deadlock) */
    PGresult *r = tc_db_exec(c,
                             "SELECT 1 FROM approvals WHERE execution_id IN (SELECT id FROM"
                             " executions WHERE session_id = $1 AND status IN"
                             " ('pending_approval', 'queued')) ORDER BY id FOR UPDATE",
                             1, p);
    if (!r)
        return -EIO;
    PQclear(r);
    r = tc_db_exec(c,
                   "SELECT e.id, e.status, e.tenant_id, e.tool, coalesce(a.id::text, '')"
                   " FROM executions e LEFT JOIN approvals a ON a.execution_id = e.id"
                   " WHERE e.session_id = $1"
                   " AND e.status IN ('pending_approval', 'queued') FOR UPDATE OF e",
                   1, p);
    if (!r)
        return -EIO;
    int rc = 0, n = PQntuples(r);
    for (int i = 0; i < n && rc == 0; i++) {
        const char *id = PQgetvalue(r, i, 0), *tenant = PQgetvalue(r, i, 2);
        const char *tool = PQgetvalue(r, i, 3), *aid = PQgetvalue(r, i, 4);
        if (strcmp(PQgetvalue(r, i, 1), "pending_approval") == 0)
            rc = aid[0] ? close_approval(c, keys, aid, id, tenant, tool, "cancelled", "cancelled",
                                         actor, "approval.cancelled", "the session ended")
                        : -EIO;
        else
            rc = tc_execution_close_queued_tx(c, keys, tenant, id, tool, actor);
    }
    PQclear(r);
    return rc < 0 ? rc : n;
}

int tc_approval_decide(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                       const char *approval_id, const char *decider, const char *decider_person,
                       const char *requester_guard, json_t *actor, enum tc_decision d,
                       const char *reason, struct tc_decide_result *ret)
{
    char person_decider[48];
    bool by_person = decider_person && *decider_person;
    if (by_person) {
        snprintf(person_decider, sizeof(person_decider), "person:%s", decider_person);
        decider = person_decider;
    }
    if (tc_db_begin(c) < 0)
        return -EIO;
    const char *p[] = {approval_id, tenant_id};
    /* The row lock serialises every decision on this approval: of concurrent decisions,
     * each sees the state the previous one left. */
    PGresult *r =
        tc_db_exec(c,
                   "SELECT status, expires_at <= now(), coalesce(requester_key_id::text, ''),"
                   " required_approvals, execution_id, tool, coalesce((SELECT"
                   " k.person_id::text FROM api_keys k WHERE k.id = requester_key_id), '')"
                   " FROM approvals WHERE id = $1 AND tenant_id = $2 FOR UPDATE",
                   2, p);
    if (!r)
        return finish_tx(c, -EIO);
    if (PQntuples(r) != 1) {
        PQclear(r);
        return finish_tx(c, -ENOENT);
    }
    struct tc_decide_result res = {0};
    char status[16], tool[65];
    snprintf(status, sizeof(status), "%s", PQgetvalue(r, 0, 0));
    bool expired = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
    bool own = (requester_guard && strcmp(PQgetvalue(r, 0, 2), requester_guard) == 0) ||
               (by_person && strcmp(PQgetvalue(r, 0, 6), decider_person) == 0);
    res.required = (int)strtol(PQgetvalue(r, 0, 3), NULL, 10);
    snprintf(res.execution_id, sizeof(res.execution_id), "%s", PQgetvalue(r, 0, 4));
    snprintf(tool, sizeof(tool), "%s", PQgetvalue(r, 0, 5));
    PQclear(r);

    int rc = 0;
    if (strcmp(status, "pending") != 0) {
        rc = -ESTALE;
    } else if (expired) {
        /* Expiry is enforced in the deciding transaction itself, not only by the sweeper. */
        json_t *sys = json_pack("{s:s, s:s}", "type", "system", "id", "expiry");
        rc = close_approval(c, keys, approval_id, res.execution_id, tenant_id, tool, "expired",
                            "expired", sys, "approval.expired", NULL);
        json_decref(sys);
        rc = finish_tx(c, rc);
        return rc < 0 ? rc : -ESTALE;
    } else if (own) {
        rc = -EPERM;
    }
    if (rc < 0)
        return finish_tx(c, rc);

    char did[37];
    tc_uuid7(did);
    const char *pd[] = {did, approval_id, decider, d == TC_DECIDE_APPROVE ? "approve" : "deny",
                        reason};
    r = tc_db_exec(c,
                   "INSERT INTO approval_decisions (id, approval_id, decider, decision, reason)"
                   " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (approval_id, decider) DO NOTHING",
                   5, pd);
    if (!r)
        return finish_tx(c, -EIO);
    bool inserted = strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    if (!inserted)
        return finish_tx(c, -EALREADY);

    const char *pc[] = {approval_id};
    r = tc_db_exec(c,
                   "SELECT count(*) FROM approval_decisions WHERE approval_id = $1"
                   " AND decision = 'approve'",
                   1, pc);
    if (!r)
        return finish_tx(c, -EIO);
    res.approvals = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);

    const char *new_status = "pending";
    if (d == TC_DECIDE_DENY)
        new_status = "denied";
    else if (res.approvals >= res.required)
        new_status = "approved";
    snprintf(res.status, sizeof(res.status), "%s", new_status);

    if (strcmp(new_status, "denied") == 0) {
        rc = close_approval(c, keys, approval_id, res.execution_id, tenant_id, tool, "denied",
                            "denied", actor, "approval.denied", reason);
    } else {
        json_t *ev = json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:s*, s:i, s:i}", "action",
                               "approval.approved", "tenant_id", tenant_id, "actor", actor, "tool",
                               tool, "approval_id", approval_id, "execution_id", res.execution_id,
                               "status", new_status, "reason", reason, "approvals", res.approvals,
                               "required", res.required);
        rc = ev ? tc_audit_append_tx(c, keys, ev, NULL) : -ENOMEM;
        json_decref(ev);
        if (rc == 0 && strcmp(new_status, "approved") == 0) {
            const char *pa[] = {approval_id, res.execution_id};
            if (!exec_ok(c,
                         "UPDATE approvals SET status = 'approved', decided_at = now()"
                         " WHERE id = $1",
                         1, pa) ||
                !exec_ok(c,
                         "UPDATE executions SET status = 'queued' WHERE id = $1"
                         " AND status = 'pending_approval'",
                         1, pa + 1) ||
                !tc_db_command(c, "NOTIFY toolcage_queue"))
                rc = -EIO;
        }
    }
    rc = finish_tx(c, rc);
    if (rc == 0 && ret)
        *ret = res;
    return rc;
}

int tc_approval_cancel(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                       const char *execution_id, json_t *actor)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    const char *p[] = {execution_id, tenant_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT id, status, tool FROM approvals"
                             " WHERE execution_id = $1 AND tenant_id = $2 FOR UPDATE",
                             2, p);
    if (!r)
        return finish_tx(c, -EIO);
    if (PQntuples(r) != 1) {
        PQclear(r);
        /* An execution of this tenant that was never held exists, but is not cancellable. */
        r = tc_db_exec(c, "SELECT 1 FROM executions WHERE id = $1 AND tenant_id = $2", 2, p);
        int rc = !r ? -EIO : PQntuples(r) == 1 ? -ESTALE : -ENOENT;
        PQclear(r);
        return finish_tx(c, rc);
    }
    char id[37], tool[65];
    bool pending = strcmp(PQgetvalue(r, 0, 1), "pending") == 0;
    snprintf(id, sizeof(id), "%s", PQgetvalue(r, 0, 0));
    snprintf(tool, sizeof(tool), "%s", PQgetvalue(r, 0, 2));
    PQclear(r);
    if (!pending)
        return finish_tx(c, -ESTALE);
    int rc = close_approval(c, keys, id, execution_id, tenant_id, tool, "cancelled", "cancelled",
                            actor, "approval.cancelled", NULL);
    return finish_tx(c, rc);
}

int tc_approval_expire_due(PGconn *c, const struct tc_keys *keys)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r = tc_db_exec(c,
                             "SELECT id, execution_id, tenant_id, tool FROM approvals"
                             " WHERE status = 'pending' AND expires_at <= now()"
                             " ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED",
                             0, NULL);
    if (!r)
        return finish_tx(c, -EIO);
    int n = PQntuples(r), rc = 0;
    json_t *sys = json_pack("{s:s, s:s}", "type", "system", "id", "expiry");
    for (int i = 0; i < n && rc == 0; i++)
        rc = close_approval(c, keys, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                            PQgetvalue(r, i, 3), "expired", "expired", sys, "approval.expired",
                            NULL);
    json_decref(sys);
    PQclear(r);
    rc = finish_tx(c, rc);
    return rc < 0 ? rc : n;
}

json_t *tc_approval_get(PGconn *c, const char *tenant_id, const char *approval_id, int *ret_err)
{
    const char *p[] = {approval_id, tenant_id};
    PGresult *r = tc_db_exec(
        c,
        "SELECT a.id, a.execution_id, a.tool, a.tier, a.reasons::text, a.payload::text,"
        " encode(a.payload_hash, 'hex'), a.requester_key_id, a.findings::text,"
        " a.required_approvals, a.status, " TC_SQL_ISO("a.created_at") ", " TC_SQL_ISO(
            "a.expires_at") ","
                            " " TC_SQL_ISO(
                                "a.decided_at") ","
                                                " coalesce((SELECT "
                                                "json_agg(json_build_object('decider', d.decider, "
                                                "'decision', d.decision,"
                                                "   'reason', d.reason, 'created_at', " TC_SQL_ISO(
                                                    "d.created_at") ") ORDER BY d.created_at)"
                                                                    "   FROM approval_decisions d "
                                                                    "WHERE d.approval_id = a.id), "
                                                                    "'[]')::text,"
                                                                    " e.status, e.needs_review"
                                                                    " FROM approvals a JOIN "
                                                                    "executions e ON e.id = "
                                                                    "a.execution_id"
                                                                    " WHERE a.id = $1 AND "
                                                                    "a.tenant_id = $2",
        2, p);
    if (!r) {
        *ret_err = -EIO;
        return NULL;
    }
    if (PQntuples(r) != 1) {
        PQclear(r);
        *ret_err = -ENOENT;
        return NULL;
    }
    json_t *decisions = json_loads(PQgetvalue(r, 0, 14), 0, NULL);
    bool undecided = PQgetisnull(r, 0, 13);
    size_t i, approvals = 0;
    json_t *d;
    json_array_foreach(decisions, i,
                       d) if (strcmp(json_string_value(json_object_get(d, "decision")),
                                     "approve") == 0) approvals++;
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:s, s:o, s:i, s:i, s:s, s:s, s:s, s:s*, s:o}", "id",
        PQgetvalue(r, 0, 0), "execution_id", PQgetvalue(r, 0, 1), "tool", PQgetvalue(r, 0, 2),
        "tier", PQgetvalue(r, 0, 3), "reasons", json_loads(PQgetvalue(r, 0, 4), 0, NULL), "payload",
        json_loads(PQgetvalue(r, 0, 5), 0, NULL), "payload_hash", PQgetvalue(r, 0, 6),
        "requester_key_id", PQgetvalue(r, 0, 7), "findings",
        json_loads(PQgetvalue(r, 0, 8), 0, NULL), "required_approvals",
        (int)strtol(PQgetvalue(r, 0, 9), NULL, 10), "approvals", (int)approvals, "status",
        PQgetvalue(r, 0, 10), "created_at", PQgetvalue(r, 0, 11), "expires_at",
        PQgetvalue(r, 0, 12), "decided_at", undecided ? NULL : PQgetvalue(r, 0, 13), "decisions",
        decisions);
    if (o) {
        json_object_set_new(o, "execution_status", json_string(PQgetvalue(r, 0, 15)));
        json_object_set_new(o, "needs_review",
                            json_boolean(strcmp(PQgetvalue(r, 0, 16), "t") == 0));
    }
    PQclear(r);
    if (o && undecided)
        json_object_set_new(o, "decided_at", json_null());
    if (!o)
        *ret_err = -ENOMEM;
    return o;
}
