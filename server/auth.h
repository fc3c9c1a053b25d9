/* API keys: "tc_" + 43 base64url characters (32 random bytes). Stored only as BLAKE2b-256. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <microhttpd.h>
#include <stdbool.h>

/* The tenant roles act inside their tenant only. An operator key belongs to no tenant and
 * does what concerns the whole service (every tenant's audit trail, policy reload); only the
 * CLI creates one. */
enum tc_role {
    TC_ROLE_AGENT = 1,
    TC_ROLE_REVIEWER = 2,
    TC_ROLE_AUDITOR = 4,
    TC_ROLE_ADMIN = 8,
    TC_ROLE_OPERATOR = 16
};
/* A route's roles may add this: a request with no Authorization header goes through
 * unauthenticated (principal role 0); one with a key must be of the other roles. */
#define TC_ROLE_KEY_OPTIONAL 0x100
/* Every tenant role (not the operator, whose principal has no tenant). */
#define TC_ROLE_ANY (TC_ROLE_AGENT | TC_ROLE_REVIEWER | TC_ROLE_AUDITOR | TC_ROLE_ADMIN)

struct tc_principal {
    char tenant_id[37];   /* "" for an operator */
    char tenant_name[65]; /* "" for an operator */
    char key_id[37];
    char person_id[37]; /* the person the key or console user is bound to, or "" */
    enum tc_role role;
};

int tc_role_parse(const char *s); /* enum value, or -EINVAL */
const char *tc_role_name(enum tc_role r);

struct tc_keys;

/* Creates the tenant if needed and a new key for it, with a `key.create` audit record, in one
 * transaction; *ret_key is the only copy of the key. role "operator": tenant and person must
 * be NULL. person (NULL for none): the key is bound to this person of the tenant (created if
 * needed). -EINVAL (bad arguments, *ret_error says why) or -EIO. */
int tc_auth_create_key(PGconn *c, const struct tc_keys *keys, const char *tenant, const char *role,
                       const char *person, char **ret_key, char **ret_error);
/* The id of the person `name` of tenant_id, created if needed, inside the caller's
 * transaction (*ret_id 37 bytes). -EINVAL bad name, -EIO. */
int tc_auth_person(PGconn *c, const char *tenant_id, const char *name, char ret_id[37]);
/* The id of the tenant named `name` (*ret_id 37 bytes): 0, -ENOENT or -EIO. */
int tc_auth_tenant_id(PGconn *c, const char *name, char ret_id[37]);
/* 0 and *ret filled when the key is valid and not revoked; -EACCES otherwise; -EIO on db error. */
int tc_auth_lookup(PGconn *c, const char *key, struct tc_principal *ret);

/* The audit record's actor for a request made with an API key (type, key id, role). */
json_t *tc_auth_actor(const struct tc_principal *p);

struct tc_request;
struct tc_route;
/* The dispatch of API routes (struct tc_route_group): a route with roles needs exactly one
 * "Authorization: Bearer <key>" header naming a valid key whose role is among rt->roles
 * (401 or 403 otherwise, 503 when the database is down); then rt->handler runs with
 * r->principal set. Routes with roles 0 run unauthenticated. */
enum MHD_Result tc_auth_bearer_dispatch(struct tc_request *r, const struct tc_route *rt);
