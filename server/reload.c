#include "server/reload.h"

#include <errno.h>

#include "audit/audit.h"
#include "policy/policy.h"
#include "server/db.h"
#include "server/http.h"

static int audit(struct tc_server *srv, json_t *event)
{
    PGconn *c = tc_db_acquire(srv->db, 5000);
    int rc = c ? tc_audit_append(c, srv->keys, event, NULL) : -EIO;
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
        audit(srv, ev); /* refused either way; a failed record changes nothing */
        json_decref(ev);
        *ret_errors = errors ? errors : json_array();
        return -EINVAL;
    }
    json_t *ev = json_pack("{s:s, s:O, s:s, s:s, s:s, s:i}", "action", "policy.reload", "actor",
                           actor, "status", "applied", "policy", srv->cfg->policy_path, "digest",
                           tc_policy_digest(p), "tools", (int)tc_policy_ntools(p));
    rc = ev ? audit(srv, ev) : -ENOMEM;
    json_decref(ev);
    if (rc < 0) {
        tc_policy_unref(p);
        return -EIO;
    }
    *ret_info = json_pack("{s:s, s:i}", "digest", tc_policy_digest(p), "tools",
                          (int)tc_policy_ntools(p));
    tc_server_set_policy(srv, p);
    return 0;
}
