/* Console users and their sessions.
 *
 * Users: a name (unique across tenants), a role (reviewer, auditor, admin), a tenant, and an
 * argon2id password hash (crypto_pwhash_str, libsodium's interactive limits).
 * Sessions: the cookie holds 32 random bytes (base64url); the database keeps only their
 * BLAKE2b-256 hash, with a per-session CSRF token, an idle and an absolute expiry.
 * Sign-ins are throttled per name and per source address and every attempt is audited.
 * Functions take a connection and return 0 or a negative errno; they never log. */
#pragma once
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/auth.h"

struct tc_keys;

#define TC_CONSOLE_TOKEN_LEN    43 /* base64url of 32 bytes, no padding */
#define TC_CONSOLE_NAME_MAX     64
#define TC_CONSOLE_PASSWORD_MAX 1024
#define TC_CONSOLE_PASSWORD_MIN 8

/* From the configuration (core/config.h; docs/console.md lists the variables). */
struct tc_console_settings {
    int64_t idle_seconds;        /* TOOLCAGE_SESSION_IDLE_SECONDS, default 900 */
    int64_t absolute_seconds;    /* TOOLCAGE_SESSION_MAX_SECONDS, default 28800 */
    int cookie_secure;           /* TOOLCAGE_COOKIE_SECURE 1 or 0; unset: -1, Secure unless the
                                    server listens on a loopback address */
    int64_t max_failures;        /* TOOLCAGE_SIGNIN_MAX_FAILURES per name, default 5 */
    int64_t max_source_failures; /* TOOLCAGE_SIGNIN_MAX_SOURCE_FAILURES, default 20 */
    int64_t window_seconds;      /* TOOLCAGE_SIGNIN_WINDOW_SECONDS, default 900 */
};
struct tc_config;
/* Sets the console's settings from cfg; called once at start-up, before serving. */
void tc_console_configure(const struct tc_config *cfg);
const struct tc_console_settings *tc_console_settings(void);

struct tc_console_user {
    char id[37];
    char name[TC_CONSOLE_NAME_MAX + 1];
    enum tc_role role;
    char tenant_id[37];
    char tenant_name[65];
    char person_id[37];                  /* "" only for users made before persons existed */
    char csrf[TC_CONSOLE_TOKEN_LEN + 1]; /* of the session it was found by */
};

bool tc_console_name_ok(const char *name);

/* Create a user (and the tenant if needed), bound to the person `person` of the tenant (NULL:
 * the person of the user's own name), created if needed; keys bound to the same person
 * count as the same approver. -EEXIST name taken, -EINVAL bad name, role, person or password
 * (*ret_error says which, caller frees), -EIO database. */
int tc_console_user_add(PGconn *c, const struct tc_keys *keys, const char *tenant, const char *name,
                        const char *role, const char *person, const char *password,
                        char **ret_error);

enum tc_signin_result { TC_SIGNIN_OK, TC_SIGNIN_BAD, TC_SIGNIN_THROTTLED };

/* Check a password, record the attempt (throttling table and audit trail, in one
 * transaction) and on success open a session: *ret_token is the cookie value.
 * 0 with *ret_result set; -EIO database or audit failure (then nobody is signed in). */
int tc_session_signin(PGconn *c, const struct tc_keys *keys, const char *name, const char *password,
                      const char *source, enum tc_signin_result *ret_result,
                      char ret_token[TC_CONSOLE_TOKEN_LEN + 1], struct tc_console_user *ret_user);

/* The user of a live session (and its idle clock restarted). -EACCES when the token is
 * unknown, expired (idle or absolute) or the user disabled; -EIO. */
int tc_session_get(PGconn *c, const char *token, struct tc_console_user *ret_user);

/* End a session and audit it. 0 (also when it was already gone) or -EIO. */
int tc_session_signout(PGconn *c, const struct tc_keys *keys, const char *token,
                       const struct tc_console_user *user, const char *source);
