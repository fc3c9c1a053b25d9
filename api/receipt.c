/* GET /v1/executions/{id}/receipt: the signed receipt of a finished execution of the caller's
 * tenant (execution/receipt.h). */
#include <errno.h>

#include "api/api.h"
#include "common/util.h"
#include "core/db.h"
#include "execution/receipt.h"
#include "server/auth.h"

enum MHD_Result tc_api_execution_receipt(struct tc_request *r)
{
    const char *id = r->params[0];
    json_t *doc = NULL;
    int rc = -ENOENT;
    if (tc_uuid_valid(id)) {
        PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
        rc = c ? tc_execution_receipt(c, r->srv->keys, r->principal.tenant_id, id,
                                      r->principal.role != TC_ROLE_AGENT, &doc)
               : -EIO;
        tc_db_release(r->srv->db, c);
    }
    switch (rc) {
    case 0:
        return tc_respond_json(r, 200, doc);
    case -ENOENT:
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    case -EAGAIN:
        return tc_respond_problem(r, 409, "not-finished", "Not finished", NULL,
                                  "execution %s has no outcome yet: a receipt states one", id);
    default:
        return tc_respond_db_down(r);
    }
}
