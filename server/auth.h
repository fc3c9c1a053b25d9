/* API keys: "tc_" + 43 base64url characters (32 random bytes). Stored only as BLAKE2b-256. */
#pragma once
#include <libpq-fe.h>
#include <stdbool.h>

enum tc_role { TC_ROLE_AGENT = 1, TC_ROLE_REVIEWER = 2, TC_ROLE_AUDITOR = 4, TC_ROLE_ADMIN = 8 };
#define TC_ROLE_ANY (TC_ROLE_AGENT | TC_ROLE_REVIEWER | TC_ROLE_AUDITOR | TC_ROLE_ADMIN)

struct tc_principal {
    char tenant_id[37];
    char tenant_name[65];
    char key_id[37];
    enum tc_role role;
};

int tc_role_parse(const char *s); /* enum value, or -EINVAL */
const char *tc_role_name(enum tc_role r);

struct tc_keys;

/* Creates the tenant if needed and a new key for it, with a `key.create` audit record, in one
 * transaction; *ret_key is the only copy of the key. */
int tc_auth_create_key(PGconn *c, const struct tc_keys *keys, const char *tenant, const char *role,
                       char **ret_key, char **ret_error);
/* 0 and *ret filled when the key is valid and not revoked; -EACCES otherwise; -EIO on db error. */
int tc_auth_lookup(PGconn *c, const char *key, struct tc_principal *ret);
