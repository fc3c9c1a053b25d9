/* Console pages: approvals (queue, detail, decisions), executions, audit, admin pages.
 * Everything shown here was written by an untrusted model or agent: it goes into the page
 * only through the renderer's escaping (console/render.h), never by string concatenation. */
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "execution/receipt.h"
#include "server/audit_http.h"
#include "approval/approval.h"
#include "audit/audit.h"
#include "common/util.h"
#include "execution/request.h"
#include "console/web.h"
#include "policy/policy.h"
#include "core/db.h"
#include "core/log.h"
#include "server/verifier.h"

/* timestamps as the pages show them (UTC, to the second) */
#define TS(col)        "to_char(" col ", 'YYYY-MM-DD HH24:MI:SS')"
#define CODE_MAX_LINES 20000

static enum MHD_Result db_down(struct tc_request *r)
{
    return tc_console_message(r, 503, "Unavailable", "The database is not reachable.");
}

static json_t *str_or_null(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

static json_t *json_col(PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return json_null();
    json_t *v = json_loads(PQgetvalue(res, row, col), JSON_ALLOW_NUL, NULL);
    return v ? v : json_null();
}

static long long ll_col(PGresult *res, int row, int col)
{
    int64_t v = 0;
    if (!PQgetisnull(res, row, col))
        tc_parse_i64(PQgetvalue(res, row, col), INT64_MIN, INT64_MAX, &v);
    return (long long)v;
}

/* ---- approvals ---- */

enum MHD_Result tc_console_approvals(struct tc_request *r)
{
    const char *status = tc_request_query(r, "status");
    static const char *const statuses[] = {"pending", "approved", "denied", "expired", "cancelled"};
    bool ok = !status || !*status;
    for (size_t i = 0; i < TC_ARRAY_SIZE(statuses) && !ok; i++)
        ok = strcmp(status, statuses[i]) == 0;
    if (!ok)
        return tc_console_message(r, 400, "Bad request", "Unknown status filter.");
    if (status && !*status)
        status = NULL;
    const char *p[] = {r->principal.tenant_id, status};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return db_down(r);
    /* Pending first, oldest first (ids are time-ordered); then decided ones, newest first. */
    PGresult *res = tc_db_exec(
        c,
        "SELECT a.id, a.execution_id, a.tool, a.tier, a.status, jsonb_array_length(a.findings),"
        " coalesce(k.prefix, ''), coalesce(k.role, ''), " TS(
            "a.created_at") ","
                            " extract(epoch FROM a.expires_at - now())::bigint, "
                            "a.required_approvals,"
                            " (SELECT count(*) FROM approval_decisions d WHERE d.approval_id = a.id"
                            "  AND d.decision = 'approve')"
                            " FROM approvals a LEFT JOIN api_keys k ON k.id = a.requester_key_id"
                            " WHERE a.tenant_id = $1 AND ($2::text IS NULL OR a.status = $2)"
                            " ORDER BY a.status <> 'pending', CASE WHEN a.status = 'pending' THEN "
                            "a.id END,"
                            " a.id DESC LIMIT 200",
        2, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return db_down(r);
    json_t *items = json_array();
    int npending = 0;
    for (int i = 0; i < PQntuples(res); i++) {
        bool pending = strcmp(PQgetvalue(res, i, 4), "pending") == 0;
        npending += pending;
        char left[32] = "";
        if (pending)
            tc_console_duration(ll_col(res, i, 9), left, sizeof(left));
        json_array_append_new(
            items,
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:I, s:s, s:s, s:s, s:s, s:I, s:I}", "id",
                      PQgetvalue(res, i, 0), "execution_id", PQgetvalue(res, i, 1), "tool",
                      PQgetvalue(res, i, 2), "tier", PQgetvalue(res, i, 3), "status",
                      PQgetvalue(res, i, 4), "pending", pending, "findings",
                      (json_int_t)ll_col(res, i, 5), "requester", PQgetvalue(res, i, 6),
                      "requester_role", PQgetvalue(res, i, 7), "created_at", PQgetvalue(res, i, 8),
                      "time_left", left, "required", (json_int_t)ll_col(res, i, 10), "approvals",
                      (json_int_t)ll_col(res, i, 11)));
    }
    PQclear(res);
    return tc_console_page(r, 200, "approvals",
                           json_pack("{s:o, s:i, s:s}", "approvals", items, "pending_count",
                                     npending, "filter", status ? status : ""));
}

static const struct {
    const char *name, *label, *unit;
    long long div;
} limit_words[] = {
    {"timeout_ms", "Wall time", "s", 1000},
    {"cpu_ms", "CPU time", "s", 1000},
    {"memory_mb", "Memory", "MiB", 1},
    {"pids", "Processes", "", 1},
    {"output_bytes", "Output per stream", "KiB", 1024},
    {"file_size_mb", "Largest file", "MiB", 1},
    {"workspace_mb", "Workspace", "MiB", 1},
    {"tmp_mb", "/tmp", "MiB", 1},
    {"open_files", "Open files", "", 1},
};

static json_t *limits_words(const json_t *limits)
{
    json_t *out = json_array();
    for (size_t i = 0; i < TC_ARRAY_SIZE(limit_words); i++) {
        json_t *v = json_object_get(limits, limit_words[i].name);
        if (!json_is_integer(v))
            continue;
        char text[64];
        long long n = (long long)json_integer_value(v);
        if (limit_words[i].div > 1 && n % limit_words[i].div == 0)
            snprintf(text, sizeof(text), "%lld %s", n / limit_words[i].div, limit_words[i].unit);
        else if (limit_words[i].div > 1)
            snprintf(text, sizeof(text), "%.1f %s", (double)n / (double)limit_words[i].div,
                     limit_words[i].unit);
        else
            snprintf(text, sizeof(text), "%lld%s%s", n, *limit_words[i].unit ? " " : "",
                     limit_words[i].unit);
        json_array_append_new(
            out, json_pack("{s:s, s:s}", "label", limit_words[i].label, "value", text));
    }
    return out;
}

/* The tool's policy in plain words, from the policy loaded now. */
static json_t *policy_words(struct tc_request *r, const char *tool_name, const json_t *payload)
{
    struct tc_policy *pol = tc_server_policy(r->srv);
    const struct tc_tool *t = pol ? tc_policy_tool(pol, tool_name) : NULL;
    json_t *o = json_object();
    json_object_set_new(o, "known", json_boolean(t != NULL));
    json_object_set_new(o, "limits", limits_words(json_object_get(payload, "limits")));
    json_t *creds = json_array();
    size_t i;
    json_t *cr;
    json_array_foreach(json_object_get(payload, "credentials"), i, cr)
    {
        char text[512];
        json_t *tok = json_object_get(cr, "token");
        if (tok)
            snprintf(text, sizeof(text), "a scoped token for %s (scope %s, %lld s)",
                     json_string_value(json_object_get(tok, "audience")) ?: "?",
                     json_string_value(json_object_get(tok, "scope")) ?: "?",
                     (long long)json_integer_value(json_object_get(tok, "ttl_seconds")));
        else
            snprintf(text, sizeof(text), "the secret \"%s\" as %s %s",
                     json_string_value(json_object_get(cr, "secret")) ?: "?",
                     strcmp(json_string_value(json_object_get(cr, "as")) ?: "", "file") == 0
                         ? "the file"
                         : "the environment variable",
                     json_string_value(json_object_get(cr, "name")) ?: "?");
        json_array_append_new(creds, json_string(text));
    }
    json_object_set_new(o, "credentials", creds);
    if (t) {
        static const char *const tiers[] = {"auto", "assisted", "human_approve", "manual_only"};
        json_object_set_new(o, "tier", json_string(tiers[t->tier]));
        json_object_set_new(o, "irreversible", json_boolean(t->irreversible));
        json_object_set_new(o, "backend",
                            json_string(t->backend == TC_BACKEND_GVISOR    ? "gVisor"
                                        : t->backend == TC_BACKEND_MICROVM ? "microVM"
                                                                           : "native"));
        json_object_set_new(o, "description", json_string(t->description ? t->description : ""));
        if (t->image) { /* what runs: the image as this server's store has it now */
            json_t *entry = NULL;
            const char *digest = NULL;
            if (tc_exec_image(t, r->srv->cfg->state_dir, &entry) == 0 && entry)
                digest = json_string_value(json_object_get(entry, "digest"));
            json_object_set_new(o, "image", json_string(t->image));
            json_object_set_new(o, "image_digest",
                                json_string(digest ? digest : "not in this server's image store"));
            json_decref(entry);
        }
        char net[1024];
        if (t->network_none) {
            snprintf(net, sizeof(net), "none (loopback only)");
        } else {
            size_t n = (size_t)snprintf(net, sizeof(net), "only through the egress proxy to: ");
            for (size_t k = 0; k < t->nnetwork_allow && n < sizeof(net); k++)
                n += (size_t)snprintf(net + n, sizeof(net) - n, "%s%s", k ? ", " : "",
                                      t->network_allow[k]);
        }
        json_object_set_new(o, "network", json_string(net));
        json_object_set_new(o, "approvers", json_integer(tc_approval_required_approvers(t)));
        char ttl[32];
        tc_console_duration(tc_approval_ttl_seconds(t), ttl, sizeof(ttl));
        json_object_set_new(o, "ttl", json_string(ttl));
    }
    tc_policy_unref(pol);
    return o;
}

/* Does finding f point into this source? ("code" also takes findings recorded before findings
 * had a source.) */
static bool finding_in(const json_t *f, const char *source, const char *path)
{
    const char *src = json_string_value(json_object_get(f, "source"));
    if (!src)
        return strcmp(source, "code") == 0;
    if (strcmp(src, source) != 0)
        return false;
    return !path || strcmp(json_string_value(json_object_get(f, "path")) ?: "", path) == 0;
}

/* A text as numbered lines, each with the findings of this source that point at it; at most
 * max_lines, then a line that says how much is not shown. */
static json_t *text_lines(const char *text, size_t len, const json_t *findings, const char *source,
                          const char *path, int max_lines)
{
    json_t *lines = json_array();
    size_t start = 0;
    int n = 1;
    for (size_t i = 0; i <= len && n <= max_lines; i++) {
        if (i < len && text[i] != '\n')
            continue;
        if (i == len && start == len && n > 1)
            break; /* a final newline does not start an empty line */
        json_t *fl = json_array();
        size_t k;
        json_t *f;
        json_array_foreach(findings, k,
                           f) if (json_integer_value(json_object_get(f, "line")) == n &&
                                  finding_in(f, source, path))
            json_array_append_new(fl, json_pack("{s:O, s:O, s:O}", "severity",
                                                json_object_get(f, "severity"), "rule",
                                                json_object_get(f, "rule"), "message",
                                                json_object_get(f, "message")));
        json_array_append_new(lines, json_pack("{s:i, s:s%, s:o, s:b}", "n", n, "text",
                                               text + start, i - start, "findings", fl, "flagged",
                                               json_array_size(fl) > 0));
        start = i + 1;
        n++;
    }
    if (start < len) {
        /* Never hide code silently: say how much is not shown, and where to get all of it. */
        size_t more = 1;
        for (size_t i = start; i < len; i++)
            more += text[i] == '\n' && i + 1 < len;
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "[%zu more lines are not shown here; read the full payload"
                 " with GET /v1/approvals/{id}]",
                 more);
        json_array_append_new(
            lines, json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}], s:b}", "n", "…", "text", msg,
                             "findings", "severity", "notice", "rule", "console", "message",
                             "the text is longer than the console shows", "flagged", 1));
    }
    return lines;
}

/* The code as numbered lines, each with the findings that point at it. */
static json_t *code_lines(const char *code, size_t len, const json_t *findings)
{
    return text_lines(code, len, findings, "code", NULL, CODE_MAX_LINES);
}

#define FILE_MAX_LINES  2000  /* per file: 64 files of 1 MiB must not make a 100 MB page */
#define FILES_MAX_LINES 20000 /* all files together, on top of the code's 20000 */
#define FILE_HEX_BYTES  4096  /* of a binary file, the hex view shows the start */

/* Rows of a hex view: "00000000  7f 45 4c 46 ...  |.ELF....|". */
static json_t *hex_rows(const unsigned char *b, size_t n)
{
    json_t *rows = json_array();
    static const char hexd[] = "0123456789abcdef";
    for (size_t off = 0; off < n && off < FILE_HEX_BYTES; off += 16) {
        char hex[16 * 3 + 2], ascii[17];
        size_t h = 0, a = 0;
        for (size_t k = 0; k < 16; k++) {
            if (off + k < n) {
                unsigned char c = b[off + k];
                hex[h++] = hexd[c >> 4];
                hex[h++] = hexd[c & 15];
                ascii[a++] = c >= 0x20 && c < 0x7f ? (char)c : '.';
            } else {
                hex[h++] = ' ';
                hex[h++] = ' ';
            }
            hex[h++] = ' ';
            if (k == 7)
                hex[h++] = ' '; /* two groups of eight */
        }
        hex[h - 1] = '\0'; /* no separator after the last byte */
        ascii[a] = '\0';
        char offs[16];
        snprintf(offs, sizeof(offs), "%08zx", off);
        json_array_append_new(
            rows, json_pack("{s:s, s:s, s:s}", "offset", offs, "hex", hex, "ascii", ascii));
    }
    return rows;
}

/* Each file as the reviewer must see it: text (also base64 that decodes to UTF-8) as numbered
 * lines with its findings; anything else as a hex view of its start. Always the size in bytes
 * and the SHA-256 of the exact bytes that will be written into the sandbox. */
static json_t *files_view(const json_t *files, const json_t *findings)
{
    json_t *out = json_array();
    int budget = FILES_MAX_LINES;
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path")) ?: "";
        const char *enc = json_string_value(json_object_get(f, "encoding"));
        json_t *content = json_object_get(f, "content");
        const char *text = json_string_value(content) ?: "";
        size_t len = json_string_length(content);
        bool b64 = enc && strcmp(enc, "base64") == 0;
        unsigned char *bin = NULL;
        size_t blen = len;
        if (b64) {
            bin = malloc(len + 1);
            if (!bin || sodium_base642bin(bin, len + 1, text, len, NULL, &blen, NULL,
                                          sodium_base64_VARIANT_ORIGINAL) != 0) {
                free(bin);
                json_array_append_new(out, json_pack("{s:s, s:s, s:b}", "path", path, "encoding",
                                                     "base64", "undecodable", 1));
                continue;
            }
            text = (const char *)bin;
            len = blen;
        }
        unsigned char h[crypto_hash_sha256_BYTES];
        char hex[2 * crypto_hash_sha256_BYTES + 1];
        crypto_hash_sha256(h, (const unsigned char *)text, len);
        sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
        bool is_text = tc_utf8_valid(text, len, false);
        char anchor[32];
        snprintf(anchor, sizeof(anchor), "f%zu-", i);
        json_t *v = json_pack("{s:s, s:s, s:I, s:s, s:b, s:s, s:b}", "path", path, "encoding",
                              b64 ? "base64" : "utf8", "size", (json_int_t)len, "sha256", hex,
                              "text", is_text, "anchor", anchor, "decoded", b64 && is_text);
        if (is_text) {
            int most = budget < FILE_MAX_LINES ? (budget > 0 ? budget : 0) : FILE_MAX_LINES;
            json_t *lines = text_lines(text, len, findings, "file", path, most);
            budget -= (int)json_array_size(lines);
            json_object_set_new(v, "lines", lines);
        } else {
            json_object_set_new(v, "hex", hex_rows((const unsigned char *)text, len));
            json_object_set_new(v, "hex_cut", json_boolean(len > FILE_HEX_BYTES));
        }
        size_t k;
        json_t *x;
        json_t *ff = json_array();
        json_array_foreach(findings, k, x) if (finding_in(x, "file", path))
            json_array_append(ff, x);
        json_object_set_new(v, "findings", ff);
        json_array_append_new(out, v);
        free(bin);
    }
    return out;
}

/* All findings for the list on the page, each with where it points ("code", "stdin",
 * "file PATH") and a link to the line. */
static json_t *findings_list(const json_t *findings, const json_t *files)
{
    json_t *out = json_array();
    size_t k, i;
    json_t *x, *f;
    json_array_foreach(findings, k, x)
    {
        const char *src = json_string_value(json_object_get(x, "source")) ?: "code";
        const char *path = json_string_value(json_object_get(x, "path"));
        long long line = (long long)json_integer_value(json_object_get(x, "line"));
        char href[48] = "#stdin";
        if (strcmp(src, "code") == 0)
            snprintf(href, sizeof(href), "#L%lld", line);
        else if (strcmp(src, "file") == 0) {
            snprintf(href, sizeof(href), "#files");
            json_array_foreach(
                files, i, f) if (path && strcmp(json_string_value(json_object_get(f, "path")) ?: "",
                                                path) == 0)
            {
                snprintf(href, sizeof(href), "#f%zu-L%lld", i, line);
                break;
            }
        }
        json_t *v = json_deep_copy(x);
        json_object_set_new(v, "where", json_string(strcmp(src, "file") == 0 ? "file" : src));
        json_object_set_new(v, "href", json_string(href));
        json_array_append_new(out, v);
    }
    return out;
}

/* The findings of one source (stdin), for the list under it. */
static json_t *findings_of(const json_t *findings, const char *source)
{
    json_t *out = json_array();
    size_t k;
    json_t *x;
    json_array_foreach(findings, k, x) if (finding_in(x, source, NULL)) json_array_append(out, x);
    return out;
}

static enum MHD_Result approval_page(struct tc_request *r, unsigned status, const char *error,
                                     const char *reason)
{
    const char *id = r->params[0];
    if (!tc_uuid_valid(id))
        return tc_console_not_found(r);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return db_down(r);
    int err = 0;
    json_t *a = tc_approval_get(c, r->principal.tenant_id, id, &err);
    PGresult *res = NULL;
    if (a) {
        const char *p[] = {id};
        res = tc_db_exec(
            c,
            "SELECT coalesce(k.prefix, ''), coalesce(k.role, ''),"
            " extract(epoch FROM a.expires_at - now())::bigint, " TS(
                "a.created_at") ","
                                " " TS("a.expires_at") ", e.status"
                                                       " FROM approvals a LEFT JOIN api_keys k ON "
                                                       "k.id = a.requester_key_id"
                                                       " JOIN executions e ON e.id = "
                                                       "a.execution_id WHERE a.id = $1",
            1, p);
    }
    tc_db_release(r->srv->db, c);
    if (!a) {
        PQclear(res);
        return err == -ENOENT ? tc_console_not_found(r) : db_down(r);
    }
    if (!res || PQntuples(res) != 1) {
        PQclear(res);
        json_decref(a);
        return db_down(r);
    }
    json_t *payload = json_object_get(a, "payload");
    json_t *findings = json_object_get(a, "findings");
    json_t *code = json_object_get(payload, "code");
    bool pending = strcmp(json_string_value(json_object_get(a, "status")) ?: "", "pending") == 0;
    char left[32];
    tc_console_duration(ll_col(res, 0, 2), left, sizeof(left));
    const char *done = tc_request_query(r, "done");
    const char *flash = NULL;
    if (done && strcmp(done, "approved") == 0)
        flash = "Approved. The call is queued and runs once.";
    else if (done && strcmp(done, "pending") == 0)
        flash = "Your approval was recorded; more approvers are needed.";
    else if (done && strcmp(done, "denied") == 0)
        flash = "Denied. The agent has been told.";
    json_t *data = json_pack(
        "{s:O, s:o, s:O, s:o, s:o, s:o, s:O, s:o, s:o, s:o, s:O, s:O, s:b, s:s, s:s, s:s, s:s, s:s,"
        " s:s, s:s*, s:s*, s:s}",
        "approval", a, "lines",
        code_lines(json_string_value(code) ?: "", json_string_length(code), findings), "findings",
        findings, "findings_list", findings_list(findings, json_object_get(payload, "files")),
        "files", files_view(json_object_get(payload, "files"), findings), "collect",
        json_object_get(payload, "collect") ? json_incref(json_object_get(payload, "collect"))
                                            : json_array(),
        "stdin", json_object_get(payload, "stdin"), "stdin_findings",
        findings_of(findings, "stdin"), "policy",
        policy_words(r, json_string_value(json_object_get(a, "tool")) ?: "", payload),
        "reasons_text",
        json_object_get(a, "reasons") ? json_incref(json_object_get(a, "reasons")) : json_array(),
        "decisions", json_object_get(a, "decisions"), "payload_hash",
        json_object_get(a, "payload_hash"), "pending", pending, "time_left", left, "requester",
        PQgetvalue(res, 0, 0), "requester_role", PQgetvalue(res, 0, 1), "created",
        PQgetvalue(res, 0, 3), "expires", PQgetvalue(res, 0, 4), "execution_status",
        PQgetvalue(res, 0, 5), "error", error, "flash", flash, "reason", reason ? reason : "");
    PQclear(res);
    json_decref(a);
    return tc_console_page(r, status, "approval", data);
}

enum MHD_Result tc_console_approval(struct tc_request *r)
{
    return approval_page(r, 200, NULL, NULL);
}

static enum MHD_Result decide(struct tc_request *r, enum tc_decision d)
{
    struct tc_console_ctx *cx = tc_console_ctx(r);
    if (!tc_uuid_valid(r->params[0]))
        return tc_console_not_found(r);
    const char *reason = tc_console_form(r, "reason");
    if (reason && !*reason)
        reason = NULL;
    if (reason && strlen(reason) > 2000)
        return approval_page(r, 400, "The reason is longer than 2000 bytes.", reason);
    if (d == TC_DECIDE_DENY && (!reason || strspn(reason, " \t\n") == strlen(reason)))
        return approval_page(r, 400, "A reason is required to deny.", NULL);
    char decider[TC_CONSOLE_NAME_MAX + 8];
    snprintf(decider, sizeof(decider), "user:%s", cx->user.name);
    json_t *actor = json_pack("{s:s, s:s, s:s, s:s}", "type", "console_user", "id", cx->user.id,
                              "name", cx->user.name, "role", tc_role_name(cx->user.role));
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    struct tc_decide_result res;
    /* Console users never request calls, so maker-is-not-checker holds; the guard stays
     * (the user id can never equal a requesting key's id). */
    int rc = c ? tc_approval_decide(c, r->srv->keys, r->principal.tenant_id, r->params[0], decider,
                                    cx->user.person_id, cx->user.id, actor, d, reason, &res)
               : -EIO;
    if (rc == -EIO && c)
        tc_log(TC_LOG_ERROR, "recording a console decision failed", "{s:s, s:s}", "request_id",
               r->request_id, "error", tc_db_error(c));
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    switch (rc) {
    case 0: {
        tc_log(TC_LOG_INFO, "approval decided", "{s:s, s:s, s:s, s:s, s:s}", "request_id",
               r->request_id, "approval_id", r->params[0], "decision",
               d == TC_DECIDE_APPROVE ? "approve" : "deny", "status", res.status, "user",
               cx->user.name);
        char loc[128];
        snprintf(loc, sizeof(loc), "/console/approvals/%s?done=%s", r->params[0], res.status);
        return tc_console_redirect(r, loc, NULL, NULL);
    }
    case -ENOENT:
        return tc_console_not_found(r);
    case -EPERM:
        return approval_page(r, 403, "You asked for this call, so you cannot decide it.", NULL);
    case -EALREADY:
        return approval_page(r, 409,
                             "You have already decided this approval (as this user or with an"
                             " API key of yours).",
                             NULL);
    case -ESTALE:
        return approval_page(
            r, 409, "This approval is no longer pending (decided, expired or cancelled).", NULL);
    default:
        return db_down(r);
    }
}

enum MHD_Result tc_console_approve(struct tc_request *r)
{
    return decide(r, TC_DECIDE_APPROVE);
}
enum MHD_Result tc_console_deny(struct tc_request *r)
{
    return decide(r, TC_DECIDE_DENY);
}

/* ---- executions ---- */

enum MHD_Result tc_console_executions(struct tc_request *r)
{
    const char *status = tc_request_query(r, "status"), *before = tc_request_query(r, "before");
    static const char *const statuses[] = {"pending_approval", "queued",  "running",  "completed",
                                           "failed",           "timeout", "killed",   "error",
                                           "denied",           "expired", "cancelled"};
    if (status && !*status)
        status = NULL;
    bool ok = !status;
    for (size_t i = 0; i < TC_ARRAY_SIZE(statuses) && !ok; i++)
        ok = strcmp(status, statuses[i]) == 0;
    if (!ok || (before && !tc_uuid_valid(before)))
        return tc_console_message(r, 400, "Bad request", "Unknown status or cursor.");
    const char *p[] = {r->principal.tenant_id, status, before};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return db_down(r);
    PGresult *res = tc_db_exec(
        c,
        "SELECT e.id, e.tool, e.status, " TS(
            "e.created_at") ", e.result->>'exit_code',"
                            " e.result->>'duration_ms', e.result->>'killed_reason', a.id, "
                            "e.needs_review"
                            " FROM executions e LEFT JOIN approvals a ON a.execution_id = e.id"
                            " WHERE e.tenant_id = $1 AND ($2::text IS NULL OR e.status = $2)"
                            " AND ($3::uuid IS NULL OR e.id < $3::uuid) ORDER BY e.id DESC LIMIT "
                            "51",
        3, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return db_down(r);
    json_t *items = json_array();
    int n = PQntuples(res);
    for (int i = 0; i < n && i < 50; i++)
        json_array_append_new(
            items,
            json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:b}", "id", PQgetvalue(res, i, 0),
                      "tool", PQgetvalue(res, i, 1), "status", PQgetvalue(res, i, 2), "created_at",
                      PQgetvalue(res, i, 3), "exit_code", str_or_null(res, i, 4), "duration_ms",
                      str_or_null(res, i, 5), "killed_reason", str_or_null(res, i, 6),
                      "approval_id", str_or_null(res, i, 7), "needs_review",
                      strcmp(PQgetvalue(res, i, 8), "t") == 0));
    json_t *next = n > 50 ? json_string(PQgetvalue(res, 49, 0)) : json_null();
    PQclear(res);
    json_t *opts = json_array();
    for (size_t i = 0; i < TC_ARRAY_SIZE(statuses); i++)
        json_array_append_new(opts, json_pack("{s:s, s:b}", "value", statuses[i], "selected",
                                              status && strcmp(status, statuses[i]) == 0));
    return tc_console_page(r, 200, "executions",
                           json_pack("{s:o, s:o, s:s, s:o}", "executions", items, "next", next,
                                     "filter", status ? status : "", "statuses", opts));
}

static json_t *counts_list(const json_t *obj, const char *key_name, const char *count_name)
{
    json_t *out = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
        json_array_append_new(out, json_pack("{s:s, s:O}", key_name, k, count_name, v));
    return out;
}

enum MHD_Result tc_console_execution(struct tc_request *r)
{
    const char *id = r->params[0];
    if (!tc_uuid_valid(id))
        return tc_console_not_found(r);
    const char *p[] = {id, r->principal.tenant_id};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return db_down(r);
    PGresult *res = tc_db_exec(
        c,
        "SELECT e.result::text, e.tool, e.status, " TS("e.created_at") ", " TS(
            "e.finished_at") ","
                             " e.request::text, e.limits::text, a.id, a.status, e.needs_review,"
                             " e.code_started_at IS NOT NULL, e.late_result->>'status'"
                             " FROM executions e LEFT JOIN approvals a ON a.execution_id = e.id"
                             " WHERE e.id = $1 AND e.tenant_id = $2",
        2, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return db_down(r);
    if (PQntuples(res) != 1) {
        PQclear(res);
        return tc_console_not_found(r);
    }
    json_t *result = json_col(res, 0, 0);
    json_t *request = json_col(res, 0, 5);
    json_t *limits = json_col(res, 0, 6);
    json_t *code = json_object_get(request, "code");
    json_t *findings = json_object_get(result, "findings");
    json_t *na =
        json_object_get(result, "network"); /* the stored result view (execution/request.c) */
    json_t *data = json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:O, s:o, s:o, s:o, s:o, s:O, s:o, s:o, s:o, s:o}",
        "id", id, "tool", PQgetvalue(res, 0, 1), "status", PQgetvalue(res, 0, 2), "created_at",
        PQgetvalue(res, 0, 3), "finished_at", str_or_null(res, 0, 4), "approval_id",
        str_or_null(res, 0, 7), "approval_status", str_or_null(res, 0, 8), "result", result, "ran",
        json_boolean(json_is_object(result)), "lines",
        code_lines(json_string_value(code) ?: "", json_string_length(code), findings), "redactions",
        counts_list(json_object_get(result, "redactions"), "rule", "count"), "limits_words",
        limits_words(limits), "stdin", json_object_get(request, "stdin") ?: json_null(),
        "stdin_findings", findings_of(findings, "stdin"), "files",
        files_view(json_object_get(request, "files"), findings), "network_attempts",
        json_is_array(na) ? json_incref(na) : json_array(), "enforced",
        counts_list(json_object_get(result, "enforced"), "limit", "how"));
    if (data) {
        /* an interrupted approved call that may have had its effect (see docs/approvals.md) */
        json_object_set_new(data, "needs_review",
                            json_boolean(strcmp(PQgetvalue(res, 0, 9), "t") == 0));
        json_object_set_new(data, "started",
                            json_boolean(strcmp(PQgetvalue(res, 0, 10), "t") == 0));
        json_object_set_new(data, "late_status", str_or_null(res, 0, 11));
    }
    PQclear(res);
    json_decref(result);
    json_decref(request);
    json_decref(limits);
    return tc_console_page(r, 200, "execution", data);
}

/* The execution's signed receipt, as a file (execution/receipt.h). */
enum MHD_Result tc_console_execution_receipt(struct tc_request *r)
{
    const char *id = r->params[0];
    if (!tc_uuid_valid(id))
        return tc_console_not_found(r);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return db_down(r);
    json_t *doc = NULL;
    int rc = tc_execution_receipt(c, r->srv->keys, r->principal.tenant_id, id, true, &doc);
    tc_db_release(r->srv->db, c);
    if (rc == -ENOENT || rc == -EAGAIN) /* the page offers it only once there is an outcome */
        return tc_console_not_found(r);
    if (rc < 0)
        return db_down(r);
    char disp[96];
    snprintf(disp, sizeof(disp), "attachment; filename=\"receipt-%s.json\"", id);
    return tc_respond_json_ex(r, 200, doc, "application/json", "Content-Disposition", disp);
}

/* ---- audit ---- */

struct filter {
    struct tc_buf where;
    const char *params[16];
    int n;
};

static int filter_add(struct filter *f, const char *clause, const char *value)
{
    if (f->n >= 14)
        return -E2BIG;
    f->params[f->n++] = value;
    int r = tc_buf_append(&f->where, " AND ", 5);
    for (const char *p = clause; *p && r == 0; p++)
        r = *p == '?' ? tc_buf_appendf(&f->where, "$%d", f->n) : tc_buf_append(&f->where, p, 1);
    return r;
}

static bool date_ok(const char *s)
{
    /* YYYY-MM-DD or YYYY-MM-DDTHH:MM (what <input type=date|datetime-local> sends) */
    static const char shape[] = "dddd-dd-ddTdd:dd";
    size_t n = strlen(s);
    if (n != 10 && n != 16)
        return false;
    for (size_t i = 0; i < n; i++)
        if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i])
            return false;
    return true;
}

/* The audit page's chain verdict, from the server's verifier (server/verifier.h): the walk
 * runs on its thread, one at a time server-wide, and page loads share it. A verdict younger
 * than VERDICT_TTL_MS is shown as is (the page says how old it is); an older one is shown
 * while a new walk starts in the background; with none at all yet, the request waits
 * (suspended) for the first walk. A tampered record shows up at the first page load after
 * the next walk, within a minute; GET /v1/audit/verify (by default) and
 * `toolcage audit verify` wait for a walk that started after they asked. */
#define VERDICT_TTL_MS 60000

/* 1 with the verdict and when its walk started (tc_now_ms clock); 0 when the request was
 * suspended to wait for the first walk (return MHD_YES); -EIO when there is none. */
static int chain_verdict(struct tc_request *r, struct tc_audit_verdict *out, int64_t *ret_at)
{
    struct tc_verifier *vf = r->srv->verifier;
    if (tc_verifier_cached(vf, tc_now_ms() - VERDICT_TTL_MS, out, ret_at, NULL, NULL))
        return 1;
    if (tc_verifier_cached(vf, INT64_MIN, out, ret_at, NULL, NULL)) {
        tc_verifier_kick(vf); /* stale: show it, and refresh for the next page load */
        return 1;
    }
    struct tc_console_ctx *cx = tc_console_ctx(r);
    if (cx->waited || !tc_server_begin(r->srv)) /* waited already, or stopping */
        return -EIO;
    tc_request_suspend(r, tc_console_audit); /* runs the page again after the walk */
    cx->waited = true;
    if (tc_verifier_wait(vf, r) < 0)
        tc_request_resume(r);
    tc_server_end(r->srv);
    return 0;
}

enum MHD_Result tc_console_audit(struct tc_request *r)
{
    static const char *const eq[] = {"actor", "tool", "action", "status"};
    const char *vals[4], *since = tc_request_query(r, "since"),
                         *until = tc_request_query(r, "until");
    const char *q = tc_request_query(r, "q"), *cursor = tc_request_query(r, "cursor");
    struct filter f = {.n = 0};
    tc_buf_init(&f.where, 4096);
    int rc = tc_buf_appendf(&f.where, "TRUE");
    rc = rc ?: filter_add(&f, "tenant_id = ?", r->principal.tenant_id);
    json_t *form = json_object();
    for (size_t i = 0; i < TC_ARRAY_SIZE(eq); i++) {
        vals[i] = tc_request_query(r, eq[i]);
        if (vals[i] && !*vals[i])
            vals[i] = NULL;
        if (vals[i] && strlen(vals[i]) > 64)
            rc = -EINVAL;
        char clause[32];
        snprintf(clause, sizeof(clause), "%s = ?", eq[i]);
        if (vals[i] && rc == 0)
            rc = filter_add(&f, clause, vals[i]);
        json_object_set_new(form, eq[i], json_string(vals[i] ? vals[i] : ""));
    }
    char since_b[32] = "", until_b[32] = "", pat[200] = "";
    if (since && *since) {
        if (!date_ok(since))
            rc = -EINVAL;
        snprintf(since_b, sizeof(since_b), "%s", since);
        if (rc == 0)
            rc = filter_add(&f, "ts >= ?", since_b);
    }
    if (until && *until) {
        if (!date_ok(until))
            rc = -EINVAL;
        snprintf(until_b, sizeof(until_b), "%s", until);
        if (rc == 0)
            rc = filter_add(&f, "ts < ?", until_b);
    }
    if (q && *q) {
        if (strlen(q) > 64)
            rc = -EINVAL;
        size_t o = 0;
        pat[o++] = '%';
        for (const char *p = q; *p && o < sizeof(pat) - 4; p++) {
            if (*p == '%' || *p == '_' || *p == '\\')
                pat[o++] = '\\';
            pat[o++] = *p;
        }
        pat[o++] = '%';
        pat[o] = '\0';
        if (rc == 0)
            rc = filter_add(&f, "search ILIKE ?", pat);
    }
    int64_t cur = 0;
    if (cursor && *cursor) {
        if (tc_parse_i64(cursor, 1, INT64_MAX, &cur) < 0)
            rc = -EINVAL;
        else if (rc == 0)
            rc = filter_add(&f, "seq < ?::bigint", cursor);
    }
    json_object_set_new(form, "since", json_string(since ? since : ""));
    json_object_set_new(form, "until", json_string(until ? until : ""));
    json_object_set_new(form, "q", json_string(q ? q : ""));
    if (rc < 0) {
        tc_buf_free(&f.where);
        json_decref(form);
        return tc_console_message(r, 400, "Bad request",
                                  "Filters are at most 64 characters; dates look like 2026-01-31"
                                  " or 2026-01-31T12:00.");
    }
    struct tc_buf sql;
    tc_buf_init(&sql, 8192);
    rc = tc_buf_appendf(&sql,
                        "SELECT seq, ts, actor, action, tool, status, record->>'reason',"
                        " record->'actor'->>'name', record->>'execution_id',"
                        " record->>'approval_id', encode(hash, 'hex')"
                        " FROM audit_log WHERE %s ORDER BY seq DESC LIMIT 101",
                        f.where.data);
    struct tc_audit_verdict v;
    int64_t verified_at = 0;
    int vr = rc == 0 ? chain_verdict(r, &v, &verified_at) : -EIO;
    if (vr == 0) { /* waiting for the first walk; the page is built when it has finished */
        tc_buf_free(&sql);
        tc_buf_free(&f.where);
        json_decref(form);
        return MHD_YES;
    }
    PGconn *c = rc == 0 ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    PGresult *res = c ? tc_db_exec_once(c, sql.data, f.n, f.params) : NULL;
    tc_db_release(r->srv->db, c);
    tc_buf_free(&sql);
    tc_buf_free(&f.where);
    if (!res) {
        json_decref(form);
        return db_down(r);
    }
    json_t *items = json_array();
    int n = PQntuples(res);
    for (int i = 0; i < n && i < 100; i++)
        json_array_append_new(
            items, json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "seq",
                             PQgetvalue(res, i, 0), "ts", str_or_null(res, i, 1), "actor",
                             str_or_null(res, i, 2), "action", str_or_null(res, i, 3), "tool",
                             str_or_null(res, i, 4), "status", str_or_null(res, i, 5), "reason",
                             str_or_null(res, i, 6), "actor_name", str_or_null(res, i, 7),
                             "execution_id", str_or_null(res, i, 8), "approval_id",
                             str_or_null(res, i, 9), "hash", PQgetvalue(res, i, 10)));
    json_t *next = n > 100 ? json_string(PQgetvalue(res, 99, 0)) : json_null();
    PQclear(res);
    json_t *verdict = vr == 1 ? tc_audit_verdict_json(&v) : json_null();
    if (json_is_object(verdict)) {
        json_object_set_new(verdict, "checked_text", json_integer(v.checked));
        json_object_set_new(verdict, "age_s", json_integer((tc_now_ms() - verified_at) / 1000));
    }
    return tc_console_page(r, 200, "audit",
                           json_pack("{s:o, s:o, s:o, s:o}", "records", items, "next", next, "form",
                                     form, "verdict", verdict));
}

enum MHD_Result tc_console_audit_export(struct tc_request *r)
{
    /* The API's streamed export, scoped to the user's tenant whatever the console role:
     * console admins administer their tenant, not the whole service. */
    r->principal.role = TC_ROLE_AUDITOR;
    if (tc_request_query(r, "tenant"))
        return tc_console_message(r, 400, "Bad request", "The console exports your tenant only.");
    return tc_audit_export_respond(r);
}

/* ---- admin ---- */

enum MHD_Result tc_console_users(struct tc_request *r)
{
    const char *p[] = {r->principal.tenant_id};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return db_down(r);
    PGresult *res = tc_db_exec(
        c,
        "SELECT u.name, u.role, " TS(
            "u.created_at") ", u.disabled_at IS NOT NULL,"
                            " (SELECT count(*) FROM console_sessions s WHERE s.user_id = u.id AND "
                            "s.expires_at > now()),"
                            " (SELECT " TS(
                                "max(s.last_seen_at)") " FROM console_sessions s WHERE s.user_id = "
                                                       "u.id)"
                                                       " FROM console_users u WHERE u.tenant_id = "
                                                       "$1 ORDER BY u.name",
        1, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return db_down(r);
    json_t *items = json_array();
    for (int i = 0; i < PQntuples(res); i++)
        json_array_append_new(
            items, json_pack("{s:s, s:s, s:s, s:b, s:I, s:o}", "name", PQgetvalue(res, i, 0),
                             "role", PQgetvalue(res, i, 1), "created_at", PQgetvalue(res, i, 2),
                             "disabled", strcmp(PQgetvalue(res, i, 3), "t") == 0, "sessions",
                             (json_int_t)ll_col(res, i, 4), "last_seen", str_or_null(res, i, 5)));
    PQclear(res);
    return tc_console_page(r, 200, "users", json_pack("{s:o}", "users", items));
}

enum MHD_Result tc_console_secrets(struct tc_request *r)
{
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return db_down(r);
    PGresult *res = tc_db_exec(c, "SELECT to_regclass('secrets') IS NOT NULL", 0, NULL);
    bool exists = res && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    res = NULL;
    if (exists) {
        const char *p[] = {r->principal.tenant_id};
        /* Metadata columns only: never ciphertext or nonce. */
        res = tc_db_exec(
            c,
            "SELECT name, description, array_to_string(allowed_tools, ', '), max_ttl_seconds,"
            " key_id, " TS("created_at") ", " TS(
                "updated_at") " FROM secrets WHERE tenant_id = $1 ORDER BY name",
            1, p);
    }
    tc_db_release(r->srv->db, c);
    if (exists && !res)
        return db_down(r);
    json_t *items = json_array();
    for (int i = 0; res && i < PQntuples(res); i++)
        json_array_append_new(
            items,
            json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s}", "name", PQgetvalue(res, i, 0),
                      "description", PQgetvalue(res, i, 1), "allowed_tools", PQgetvalue(res, i, 2),
                      "max_ttl", (json_int_t)ll_col(res, i, 3), "key_id", PQgetvalue(res, i, 4),
                      "created_at", PQgetvalue(res, i, 5), "updated_at", PQgetvalue(res, i, 6)));
    PQclear(res);
    return tc_console_page(r, 200, "secrets",
                           json_pack("{s:o, s:b}", "secrets", items, "available", exists));
}
