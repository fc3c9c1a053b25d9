/* The audit trail over HTTP: filters and the streamed export (server/audit_http.h). */
#include "server/audit_http.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"
#include "server/auth.h"

#define EXPORT_BATCH 200 /* rows per query: records can be megabytes each, all held at once */

/* clause: SQL with "?" where the parameter goes (each "?" becomes the same $N). */
int tc_audit_filter_add(struct tc_audit_filter *f, const char *clause, const char *value)
{
    if (f->n >= 15)
        return -E2BIG;
    snprintf(f->owned[f->n], sizeof(f->owned[f->n]), "%s", value);
    f->params[f->n] = f->owned[f->n];
    f->n++;
    int r = tc_buf_append(&f->where, " AND ", 5);
    for (const char *p = clause; *p && r == 0; p++)
        r = *p == '?' ? tc_buf_appendf(&f->where, "$%d", f->n) : tc_buf_append(&f->where, p, 1);
    return r;
}

static bool iso_ts_ok(const char *s)
{
    /* YYYY-MM-DDTHH:MM:SS[.mmm]Z or a date alone; compared as text against the records' ts */
    size_t n = strlen(s);
    if (n != 10 && n != 20 && n != 24)
        return false;
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (size_t i = 0; i < n; i++) {
        char want = (n == 20 && i == 19) ? 'Z' : shape[i];
        if (want == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != want)
            return false;
    }
    return true;
}

/* s passed iso_ts_ok: "YYYY-MM-DDTHH:MM:SSZ" becomes "YYYY-MM-DDTHH:MM:SS.000Z" in buf. */
static const char *ts_with_ms(const char *s, char buf[25])
{
    if (strlen(s) != 20)
        return s;
    snprintf(buf, 25, "%.19s.000Z", s);
    return buf;
}

/* Fill f from the request. On a bad parameter a problem was queued: returns false. */
bool tc_audit_filter_build(struct tc_request *r, struct tc_audit_filter *f, enum MHD_Result *ret)
{
    tc_buf_init(&f->where, 4096);
    f->n = 0;
    if (tc_buf_appendf(&f->where, "TRUE") < 0)
        return false;
    const char *tenant = tc_request_query(r, "tenant");
    if (tenant && strlen(tenant) > 64) {
        *ret =
            tc_respond_problem(r, 400, "validation", "Invalid request", NULL, "tenant is too long");
        return false;
    }
    if (r->principal.role != TC_ROLE_OPERATOR) {
        /* Admins and auditors act on their own tenant only. */
        if (tenant && strcmp(tenant, r->principal.tenant_name) &&
            strcmp(tenant, r->principal.tenant_id)) {
            *ret = tc_respond_problem(r, 403, "forbidden", "Forbidden", NULL,
                                      "only an operator key may read another tenant's records");
            return false;
        }
        tc_audit_filter_add(f, "tenant_id = ?", r->principal.tenant_id);
    } else if (tenant) {
        tc_audit_filter_add(
            f, "tenant_id = (SELECT id::text FROM tenants WHERE name = ? OR id::text = ?)", tenant);
    }
    static const struct {
        const char *q, *clause;
    } eq[] = {{"actor", "actor = ?"},
              {"tool", "tool = ?"},
              {"action", "action = ?"},
              {"status", "status = ?"}};
    for (size_t i = 0; i < TC_ARRAY_SIZE(eq); i++) {
        const char *v = tc_request_query(r, eq[i].q);
        if (!v)
            continue;
        if (strlen(v) > 64) {
            *ret = tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                      "%s must be at most 64 characters", eq[i].q);
            return false;
        }
        tc_audit_filter_add(f, eq[i].clause, v);
    }
    const char *since = tc_request_query(r, "since"), *until = tc_request_query(r, "until");
    if ((since && !iso_ts_ok(since)) || (until && !iso_ts_ok(until))) {
        *ret = tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "since and until must be RFC 3339 UTC times like "
                                  "2026-01-31T12:00:00Z, or dates like 2026-01-31");
        return false;
    }
    /* Records' ts always carry milliseconds; compared as text, "…:05Z" would sort after
     * "…:05.250Z", so a whole-second bound is widened to "…:05.000Z" first. */
    char since_ms[25], until_ms[25];
    if (since)
        tc_audit_filter_add(f, "ts >= ?", ts_with_ms(since, since_ms));
    if (until)
        tc_audit_filter_add(f, "ts < ?", ts_with_ms(until, until_ms));
    const char *q = tc_request_query(r, "q");
    if (q) {
        if (strlen(q) > 64 || strlen(q) < 1) {
            *ret = tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                      "q must be 1 to 64 characters");
            return false;
        }
        /* LIKE metacharacters in the user's text are matched literally */
        char esc[160];
        size_t o = 0;
        for (const char *p = q; *p && o < sizeof(esc) - 3; p++) {
            if (*p == '%' || *p == '_' || *p == '\\')
                esc[o++] = '\\';
            esc[o++] = *p;
        }
        esc[o] = '\0';
        char pat[170];
        snprintf(pat, sizeof(pat), "%%%s%%", esc);
        tc_audit_filter_add(f, "search ILIKE ?", pat);
    }
    return true;
}

/* An export covers the range [start, end] of the chain: every record in it appears, in full
 * when the caller may see it and it matches the filters, else withheld (seq, hash and digest
 * only, no content), so that the range chains and verifies offline. It starts right after a
 * signed checkpoint (or at 1) and ends at one: every exported record is vouched for by a
 * signature. Checkpoints in [start - 1, end] come first. */
struct export_state {
    struct tc_server *srv;
    PGconn *conn;
    struct tc_audit_filter f;
    bool csv;
    int phase;     /* 0 header, 1 checkpoints, 2 records, 3 done */
    char last[24]; /* the last seq written (start - 1 before any) */
    char end[24];
    struct tc_buf out; /* pending bytes */
    size_t off;
    bool counted; /* in srv->exports */
};

static void export_free(void *cls)
{
    struct export_state *st = cls;
    if (st->counted)
        atomic_fetch_sub(&st->srv->exports, 1);
    tc_db_release(st->srv->db, st->conn);
    tc_buf_free(&st->f.where);
    tc_buf_free(&st->out);
    free(st);
}

/* A batch's rows are fetched: its connection goes back to the pool at once, not after the
 * rows are formatted (records can be megabytes each: a slow formatting of eight exports at
 * once held all eight connections for seconds while other requests waited). */
static void release_conn(struct export_state *st)
{
    tc_db_release(st->srv->db, st->conn);
    st->conn = NULL;
}

static int csv_field(struct tc_buf *b, const char *s, bool last)
{
    int r = tc_buf_append(b, "\"", 1);
    for (const char *p = s; *p && r == 0;) { /* runs without a quote at once: records are MBs */
        size_t n = strcspn(p, "\"");
        r = n ? tc_buf_append(b, p, n) : tc_buf_append(b, "\"\"", 2);
        p += n ? n : 1;
    }
    if (r == 0)
        r = tc_buf_append(b, last ? "\"\n" : "\",", 2);
    return r;
}

static int csv_row_out(struct tc_buf *b, const char *kind, const char *seq,
                       const char *const vals[11])
{
    int rc = tc_buf_appendf(b, "%s,%s,", kind, seq);
    for (size_t k = 0; k < 11 && rc == 0; k++)
        rc = csv_field(b, vals[k], k == 10);
    return rc;
}

static int export_checkpoints(struct export_state *st)
{
    const char *p[] = {st->last, st->end};
    PGresult *res = tc_db_exec(st->conn,
                               "SELECT seq, encode(hash, 'hex'), ts, key_id,"
                               " encode(signature, 'hex') FROM audit_checkpoints"
                               " WHERE seq >= $1::bigint AND seq <= $2::bigint"
                               " ORDER BY seq",
                               2, p);
    if (!res)
        return -EIO;
    release_conn(st); /* the rows are in res: the connection goes back before they are written */
    int rc = 0;
    for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
        if (st->csv) {
            const char *vals[] = {PQgetvalue(res, i, 2),
                                  "",
                                  "",
                                  "",
                                  "",
                                  "",
                                  PQgetvalue(res, i, 1),
                                  PQgetvalue(res, i, 3),
                                  PQgetvalue(res, i, 4),
                                  "",
                                  ""};
            rc = csv_row_out(&st->out, "checkpoint", PQgetvalue(res, i, 0), vals);
        } else {
            json_t *o = json_pack("{s:{s:I, s:s, s:s, s:s, s:s}}", "checkpoint", "seq",
                                  (json_int_t)strtoll(PQgetvalue(res, i, 0), NULL, 10), "hash",
                                  PQgetvalue(res, i, 1), "ts", PQgetvalue(res, i, 2), "key_id",
                                  PQgetvalue(res, i, 3), "signature", PQgetvalue(res, i, 4));
            char *s = json_dumps(o, JSON_COMPACT);
            json_decref(o);
            rc = s ? tc_buf_appendf(&st->out, "%s\n", s) : -ENOMEM;
            free(s);
        }
    }
    PQclear(res);
    return rc;
}

static int export_records(struct export_state *st)
{
    struct tc_buf sql;
    tc_buf_init(&sql, 8192);
    int rc = tc_buf_appendf(&sql,
                            "SELECT seq, encode(hash, 'hex'), coalesce(encode(digest, 'hex'), ''),"
                            " CASE WHEN %s THEN record::text END, ts, tenant_id, actor, action,"
                            " tool, status FROM audit_log WHERE seq > $%d AND seq <= $%d"
                            " ORDER BY seq LIMIT %d",
                            st->f.where.data, st->f.n + 1, st->f.n + 2, EXPORT_BATCH);
    st->f.params[st->f.n] = st->last;
    st->f.params[st->f.n + 1] = st->end;
    PGresult *res = rc == 0 ? tc_db_exec_once(st->conn, sql.data, st->f.n + 2, st->f.params) : NULL;
    tc_buf_free(&sql);
    if (!res)
        return -EIO;
    release_conn(st);
    int n = PQntuples(res);
    for (int i = 0; i < n && rc == 0; i++) {
        const char *seq = PQgetvalue(res, i, 0), *hash = PQgetvalue(res, i, 1);
        const char *digest = PQgetvalue(res, i, 2);
        bool shown = !PQgetisnull(res, i, 3);
        if (st->csv) {
            const char *vals[] = {shown ? PQgetvalue(res, i, 4) : "",
                                  shown ? PQgetvalue(res, i, 5) : "",
                                  shown ? PQgetvalue(res, i, 6) : "",
                                  shown ? PQgetvalue(res, i, 7) : "",
                                  shown ? PQgetvalue(res, i, 8) : "",
                                  shown ? PQgetvalue(res, i, 9) : "",
                                  hash,
                                  "",
                                  "",
                                  shown ? PQgetvalue(res, i, 3) : "",
                                  digest};
            rc = csv_row_out(&st->out, shown ? "record" : "withheld", seq, vals);
        } else {
            rc = tc_buf_appendf(&st->out, "{\"seq\":%s,\"hash\":\"%s\"", seq, hash);
            if (rc == 0 && *digest)
                rc = tc_buf_appendf(&st->out, ",\"digest\":\"%s\"", digest);
            if (rc == 0)
                rc = shown ? tc_buf_appendf(&st->out, ",\"record\":%s}\n", PQgetvalue(res, i, 3))
                           : tc_buf_appendf(&st->out, ",\"withheld\":true}\n");
        }
    }
    if (n > 0)
        snprintf(st->last, sizeof(st->last), "%s", PQgetvalue(res, n - 1, 0));
    if (n < EXPORT_BATCH)
        st->phase = 3;
    PQclear(res);
    return rc;
}

static int export_fill(struct export_state *st)
{
    tc_buf_reset(&st->out);
    st->off = 0;
    if (st->phase == 0) {
        st->phase = 1;
        return st->csv ? tc_buf_appendf(&st->out, "kind,seq,ts,tenant_id,actor,action,tool,status,"
                                                  "hash,key_id,signature,record,digest\n")
                       : 0;
    }
    if (st->phase == 1) {
        /* Checkpoints first: the offline verifier checks each one as the walk passes it. */
        st->phase = 2;
        return export_checkpoints(st);
    }
    return st->phase == 2 ? export_records(st) : 0;
}

static ssize_t export_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct export_state *st = cls;
    while (st->off >= st->out.len) {
        if (st->phase == 3)
            return MHD_CONTENT_READER_END_OF_STREAM;
        /* One pooled connection per batch, not per stream: a client that stops reading
         * must not pin a connection (eight such clients would starve the pool). */
        st->conn = st->phase == 0 ? NULL : tc_db_acquire(st->srv->db, TC_DB_WAIT_MS);
        bool had = st->phase == 0 || st->conn; /* (a batch gives it back once fetched) */
        int rc = had ? export_fill(st) : -EIO;
        if (rc < 0)
            tc_log(TC_LOG_ERROR, "audit export failed", "{s:s}", "error",
                   st->conn ? tc_db_error(st->conn)
                   : !had   ? "no database connection"
                            : strerror(-rc));
        tc_db_release(st->srv->db, st->conn);
        st->conn = NULL;
        if (rc < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->out.len - st->off;
    if (n > max)
        n = max;
    memcpy(buf, st->out.data + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* Sign a checkpoint of the head (so that the export ends on a signature), then fix the
 * range. 0, or -EIO. */
static int export_range(struct tc_request *r, struct export_state *st, PGconn *c)
{
    int64_t cp = 0;
    int rc = tc_audit_checkpoint(c, r->srv->keys, &cp);
    if (rc == -EBADMSG)
        tc_log(TC_LOG_ERROR,
               "audit export: a record since the last checkpoint does not verify; "
               "no checkpoint was signed, so the export's tail is not vouched for",
               "{s:s}", "request_id", r->request_id);
    else if (rc < 0)
        return rc;
    char upto[24] = "";
    if (rc == 0 && cp > 0)
        snprintf(upto, sizeof(upto), "%" PRId64, cp);
    struct tc_buf sql;
    tc_buf_init(&sql, 8192);
    /* $n+1: the last record to export (NULL: the head) */
    rc = tc_buf_appendf(
        &sql,
        "WITH u AS (SELECT coalesce($%d::bigint, (SELECT seq FROM audit_head)) AS upto),"
        " m AS (SELECT min(seq) AS first, max(seq) AS last FROM audit_log, u"
        "       WHERE %s AND seq <= u.upto)"
        " SELECT coalesce((SELECT max(seq) FROM audit_checkpoints WHERE seq < m.first), 0),"
        "        coalesce((SELECT min(seq) FROM audit_checkpoints, u"
        "                  WHERE seq >= m.last AND seq <= u.upto), u.upto), m.first IS NULL"
        " FROM m, u",
        st->f.n + 1, st->f.where.data);
    st->f.params[st->f.n] = upto[0] ? upto : NULL;
    PGresult *res = rc == 0 ? tc_db_exec_once(c, sql.data, st->f.n + 1, st->f.params) : NULL;
    tc_buf_free(&sql);
    if (!res || PQntuples(res) != 1) {
        PQclear(res);
        return -EIO;
    }
    snprintf(st->last, sizeof(st->last), "%s", PQgetvalue(res, 0, 0));
    snprintf(st->end, sizeof(st->end), "%s", PQgetvalue(res, 0, 1));
    if (strcmp(PQgetvalue(res, 0, 2), "t") == 0) /* nothing matches: an empty export */
        snprintf(st->end, sizeof(st->end), "0");
    PQclear(res);
    return 0;
}

enum MHD_Result tc_audit_export_respond(struct tc_request *r)
{
    const char *format = tc_request_query(r, "format");
    if (format && strcmp(format, "jsonl") && strcmp(format, "csv"))
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "format must be jsonl or csv");
    /* Exports at once: at most half the HTTP threads (and of the database pool). A stream's
     * batches are fetched and formatted on an HTTP thread, in its turn: twelve exports that
     * their clients had stopped reading kept every thread and connection busy, and a plain
     * request on the same thread waited seconds. */
    int most = (int)(r->srv->cfg->threads < r->srv->cfg->db_pool ? r->srv->cfg->threads
                                                                 : r->srv->cfg->db_pool) /
               2;
    if (atomic_fetch_add(&r->srv->exports, 1) >= (most > 0 ? most : 1)) {
        atomic_fetch_sub(&r->srv->exports, 1);
        return tc_respond_problem(r, 503, "overloaded", "Too many exports", NULL,
                                  "%d audit exports are streaming; retry when one has ended",
                                  most > 0 ? most : 1);
    }
    struct export_state *st = calloc(1, sizeof(*st));
    if (!st) {
        atomic_fetch_sub(&r->srv->exports, 1);
        return MHD_NO;
    }
    st->counted = true;
    st->srv = r->srv;
    st->csv = format && strcmp(format, "csv") == 0;
    tc_buf_init(&st->out, 64 << 20);
    enum MHD_Result ret = MHD_NO;
    if (!tc_audit_filter_build(r, &st->f, &ret)) {
        export_free(st);
        return ret;
    }
    PGconn *c =
        tc_db_acquire(r->srv->db, TC_DB_WAIT_MS); /* answer 503 now rather than a cut stream */
    int rc = c ? export_range(r, st, c) : -EIO;
    if (c && rc < 0)
        tc_log(TC_LOG_ERROR, "audit export failed", "{s:s, s:s}", "request_id", r->request_id,
               "error", tc_db_error(c));
    tc_db_release(r->srv->db, c);
    if (rc < 0) {
        export_free(st);
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the audit trail cannot be read right now");
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                                  export_read, st, export_free);
    if (!resp) {
        export_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type",
                            st->csv ? "text/csv; charset=utf-8" : "application/x-ndjson");
    MHD_add_response_header(resp, "Content-Disposition",
                            st->csv ? "attachment; filename=\"audit.csv\""
                                    : "attachment; filename=\"audit.jsonl\"");
    return tc_http_queue(r, 200, resp);
}
