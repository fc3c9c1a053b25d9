#include "server/reload.h"

#include <errno.h>

#include "audit/audit.h"
#include "policy/policy.h"
#include "core/db.h"
#include "server/http.h"

static int audit(struct tc_server *srv, json_t *event)
{
    PGconn *c = tc_db_acquire(srv->db, TC_DB_WAIT_MS);
    int rc = c ? tc_audit_append(c, srv->keys, event, NULL) : -EIO;
    tc_db_release(srv->db, c);
    return rc;
}

/* A new policy changes what every tenant's calls may do: each tenant's auditors must see it,
 * so the record is written once per tenant (with its tenant_id), all in one transaction
 * (none if the service has no tenant yet: then one record that operators see). */
static int audit_every_tenant(struct tc_server *srv, json_t *event)
{
    PGconn *c = tc_db_acquire(srv->db, TC_DB_WAIT_MS);
    if (!c)
        return -EIO;
    int rc = tc_db_command(c, "BEGIN") ? 0 : -EIO;
    PGresult *r = rc == 0 ? tc_db_exec(c, "SELECT id FROM tenants ORDER BY id", 0, NULL) : NULL;
    if (!r)
        rc = -EIO;
    int n = r ? PQntuples(r) : 0;
    for (int i = 0; i < n && rc == 0; i++) {
        json_t *ev = json_deep_copy(event);
        if (!ev) {
            rc = -ENOMEM;
            break;
        }
        json_object_set_new(ev, "tenant_id", json_string(PQgetvalue(r, i, 0)));
        rc = tc_audit_append_tx(c, srv->keys, ev, NULL);
        json_decref(ev);
    }
    PQclear(r);
    if (rc == 0 && n == 0)
        rc = tc_audit_append_tx(c, srv->keys, event, NULL);
    rc = tc_db_finish(c, rc);
    tc_db_release(srv->db, c);
    return rc;
}

int tc_server_reload_policy(struct tc_server *srv, json_t *actor, json_t **ret_errors,
                            json_t **ret_info)
{
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    int rc = tc_policy_load(srv->cfg->policy_path, &p, &errors);
    if (rc < 0) {
        json_t *ev = json_pack("{s:s, s:O, s:s, s:s, s:O}", "action", "policy.reload", "actor",
                               actor, "status", "refused", "policy", srv->cfg->policy_path,
                               "errors", errors ? errors : json_array());
        audit(srv, ev); /* refused either way; a failed record changes nothing (and affects no
                           tenant: it has none, so operators see it) */
        json_decref(ev);
        *ret_errors = errors ? errors : json_array();
        return -EINVAL;
    }
    json_t *ev = json_pack("{s:s, s:O, s:s, s:s, s:s, s:i}", "action", "policy.reload", "actor",
                           actor, "status", "applied", "policy", srv->cfg->policy_path, "digest",
                           tc_policy_digest(p), "tools", (int)tc_policy_ntools(p));
    rc = ev ? audit_every_tenant(srv, ev) : -ENOMEM;
    json_decref(ev);
    if (rc < 0) {
        tc_policy_unref(p);
        return -EIO;
    }
    *ret_info =
        json_pack("{s:s, s:i}", "digest", tc_policy_digest(p), "tools", (int)tc_policy_ntools(p));
    tc_server_set_policy(srv, p);
    return 0;
}
