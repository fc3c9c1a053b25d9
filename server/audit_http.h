/* The audit trail over HTTP, shared by the API and the console: the filters of GET
 * /v1/audit (tenant scoping by the caller's role included) and the streamed export. */
#pragma once
#include "server/http.h"

/* WHERE clause and parameters built from the query string; every value is a parameter. */
struct tc_audit_filter {
    struct tc_buf where;
    const char *params[16];
    char owned[16][192]; /* the longest value is q's LIKE pattern: 2 + 2 * 64 bytes */
    int n;
};

/* clause: SQL with "?" where the parameter goes (each "?" becomes the same $N). */
int tc_audit_filter_add(struct tc_audit_filter *f, const char *clause, const char *value);
/* Fill f from the request's query (f->where must be freed with tc_buf_free whatever the
 * outcome). On a bad parameter a problem was queued: returns false, *ret to hand back. */
bool tc_audit_filter_build(struct tc_request *r, struct tc_audit_filter *f, enum MHD_Result *ret);
/* GET .../export: the records the filters select, as JSON lines or CSV (format=), streamed
 * from the database in batches, with the checkpoints that cover them. */
enum MHD_Result tc_audit_export_respond(struct tc_request *r);
