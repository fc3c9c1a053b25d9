#include "console/session.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "common/util.h"
#include "core/config.h"
#include "core/db.h"

/* ---- settings ---- */

/* The defaults of core/config.c, until tc_console_configure() (tests of this file use them). */
static struct tc_console_settings g_settings = {
    .idle_seconds = 900,
    .absolute_seconds = 28800,
    .cookie_secure = -1,
    .max_failures = 5,
    .max_source_failures = 20,
    .window_seconds = 900,
};

void tc_console_configure(const struct tc_config *cfg)
{
    g_settings = (struct tc_console_settings){
        .idle_seconds = cfg->session_idle_seconds,
        .absolute_seconds = cfg->session_max_seconds,
        .cookie_secure = cfg->cookie_secure,
        .max_failures = cfg->signin_max_failures,
        .max_source_failures = cfg->signin_max_source_failures,
        .window_seconds = cfg->signin_window_seconds,
    };
}

const struct tc_console_settings *tc_console_settings(void)
{
    return &g_settings;
}

/* ---- users ---- */

bool tc_console_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > TC_CONSOLE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || !(c == '.' || c == '_' || c == '@' || c == '-')))
            return false;
    }
    return true;
}

static int audit_signin(PGconn *c, const struct tc_keys *keys, const char *action,
                        const char *status, const char *tenant_id, const char *user_id,
                        const char *name, const char *role, const char *source, const char *reason);

int tc_console_user_add(PGconn *c, const struct tc_keys *keys, const char *tenant, const char *name,
                        const char *role, const char *person, const char *password,
                        char **ret_error)
{
    if (!tc_console_name_ok(name)) {
        *ret_error = strdup("the name must be 1 to 64 characters: letters, digits and . _ @ -"
                            " (starting with a letter or digit)");
        return -EINVAL;
    }
    if (strcmp(role, "reviewer") && strcmp(role, "auditor") && strcmp(role, "admin")) {
        *ret_error = strdup("the role must be reviewer, auditor or admin");
        return -EINVAL;
    }
    size_t pl = strlen(password);
    if (pl < TC_CONSOLE_PASSWORD_MIN || pl > TC_CONSOLE_PASSWORD_MAX) {
        *ret_error = strdup("the password must be 8 to 1024 bytes");
        return -EINVAL;
    }
    char hash[crypto_pwhash_STRBYTES];
    if (crypto_pwhash_str(hash, password, pl, crypto_pwhash_OPSLIMIT_INTERACTIVE,
                          crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
        *ret_error = strdup("out of memory while hashing the password");
        return -ENOMEM;
    }
    char tenant_id[37], user_id[37];
    tc_uuid7(tenant_id);
    tc_uuid7(user_id);
    const char *p[] = {tenant_id, tenant, user_id, name, role, hash};
    if (!tc_db_command(c, "BEGIN")) {
        sodium_memzero(hash, sizeof(hash));
        *ret_error = strdup(tc_db_error(c));
        return -EIO;
    }
    /* The tenant in a statement of its own, as in tc_auth_create_key(): the next statement's
     * snapshot sees a tenant a concurrent transaction created meanwhile. */
    PGresult *t = tc_db_exec(c,
                             "INSERT INTO tenants (id, name) VALUES ($1, $2)"
                             " ON CONFLICT (name) DO NOTHING",
                             2, p);
    PGresult *r =
        t ? tc_db_exec(c,
                       "INSERT INTO console_users (id, tenant_id, name, role, password_hash)"
                       " SELECT $2, id, $3, $4, $5 FROM tenants WHERE name = $1"
                       " ON CONFLICT (name) DO NOTHING RETURNING tenant_id",
                       5, p + 1)
          : NULL;
    PQclear(t);
    sodium_memzero(hash, sizeof(hash));
    if (!r) {
        *ret_error = strdup(tc_db_error(c));
        tc_db_command(c, "ROLLBACK");
        return -EIO;
    }
    bool inserted = PQntuples(r) == 1;
    char tid[37] = "";
    if (inserted)
        snprintf(tid, sizeof(tid), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (!inserted) {
        tc_db_command(c, "ROLLBACK");
        *ret_error = strdup("a console user with this name exists");
        return -EEXIST;
    }
    /* Every console user is a person: the one named by --person, else one of its own name. */
    char person_id[37];
    const char *pname = person ? person : name;
    int rc = tc_auth_person(c, tid, pname, person_id);
    if (rc == 0) {
        const char *pp[] = {user_id, person_id};
        r = tc_db_exec(c, "UPDATE console_users SET person_id = $2 WHERE id = $1", 2, pp);
        rc = r ? 0 : -EIO;
        PQclear(r);
    }
    if (rc < 0) {
        *ret_error = strdup(rc == -EINVAL ? "the person's name must be 1 to 64 characters: "
                                            "letters, digits and . _ @ -"
                                          : tc_db_error(c));
        tc_db_command(c, "ROLLBACK");
        return rc;
    }
    /* the new user is the record's subject; the actor is the operator at the command line */
    json_t *ev = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:{s:s, s:s}}}",
                           "action", "user.create", "status", "ok", "tenant_id", tid, "actor",
                           "type", "cli", "id", "users add", "user", "id", user_id, "name", name,
                           "role", role, "person", "id", person_id, "name", pname);
    rc = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0 && tc_db_command(c, "COMMIT") ? 0 : -EIO;
    json_decref(ev);
    if (rc < 0) {
        *ret_error = strdup(tc_db_error(c));
        tc_db_command(c, "ROLLBACK");
    }
    return rc;
}

/* ---- sessions ---- */

static void token_hash_hex(const char *token, char out[2 * 32 + 3])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)token, strlen(token), NULL, 0);
    tc_db_bytea_hex(h, sizeof(h), out);
}

static void random_token(char out[TC_CONSOLE_TOKEN_LEN + 1])
{
    unsigned char rnd[32];
    randombytes_buf(rnd, sizeof(rnd));
    sodium_bin2base64(out, TC_CONSOLE_TOKEN_LEN + 1, rnd, sizeof(rnd),
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(rnd, sizeof(rnd));
}

static bool token_well_formed(const char *t)
{
    if (strlen(t) != TC_CONSOLE_TOKEN_LEN)
        return false;
    for (const char *p = t; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_'))
            return false;
    return true;
}

/* A hash to verify against when the name is unknown, so that both cases cost the same. */
static char g_dummy_hash[crypto_pwhash_STRBYTES];
static pthread_once_t g_dummy_once = PTHREAD_ONCE_INIT;
static void dummy_init(void)
{
    char pw[TC_CONSOLE_TOKEN_LEN + 1];
    random_token(pw);
    if (crypto_pwhash_str(g_dummy_hash, pw, 16, crypto_pwhash_OPSLIMIT_INTERACTIVE,
                          crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0)
        g_dummy_hash[0] = '\0';
}

static int audit_signin(PGconn *c, const struct tc_keys *keys, const char *action,
                        const char *status, const char *tenant_id, const char *user_id,
                        const char *name, const char *role, const char *source, const char *reason)
{
    json_t *actor =
        json_pack("{s:s, s:s, s:s}", "type", "console_user", "id", user_id, "name", name);
    if (actor && role)
        json_object_set_new(actor, "role", json_string(role));
    json_t *ev = json_pack("{s:s, s:s, s:o, s:s, s:s*}", "action", action, "status", status,
                           "actor", actor, "source", source, "reason", reason);
    if (ev && tenant_id && *tenant_id)
        json_object_set_new(ev, "tenant_id", json_string(tenant_id));
    int r = ev ? tc_audit_append_tx(c, keys, ev, NULL) : -ENOMEM;
    json_decref(ev);
    return r;
}

int tc_session_signin(PGconn *c, const struct tc_keys *keys, const char *name, const char *password,
                      const char *source, enum tc_signin_result *ret_result,
                      char ret_token[TC_CONSOLE_TOKEN_LEN + 1], struct tc_console_user *ret_user)
{
    const struct tc_console_settings *cfg = tc_console_settings();
    pthread_once(&g_dummy_once, dummy_init);
    /* The name as the throttle sees it: lower-cased, bounded, so "Alice" and "alice" share. */
    char lname[TC_CONSOLE_NAME_MAX + 1];
    size_t i;
    for (i = 0; name[i] && i < TC_CONSOLE_NAME_MAX; i++)
        lname[i] = (name[i] >= 'A' && name[i] <= 'Z') ? (char)(name[i] + 32) : name[i];
    lname[i] = '\0';
    if (!tc_utf8_valid(lname, strlen(lname), false))
        snprintf(lname, sizeof(lname), "(invalid)");

    char window[24], maxf[24], maxs[24];
    snprintf(window, sizeof(window), "%" PRId64, cfg->window_seconds);
    snprintf(maxf, sizeof(maxf), "%" PRId64, cfg->max_failures);
    snprintf(maxs, sizeof(maxs), "%" PRId64, cfg->max_source_failures);
    /* Check and count in one step: under a lock on the name and one on the source (always in
     * that order), an attempt is let through only together with its row, inserted as a
     * failure before the password is even looked at (and turned into a success below). So
     * however many arrive at once, at most max_failures of them per name are evaluated. */
    const char *pt[] = {lname, source, window, maxf, maxs};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r = tc_db_exec(c,
                             "SELECT pg_advisory_xact_lock(7716, hashtext($1)),"
                             " pg_advisory_xact_lock(7717, hashtext($2))",
                             2, pt);
    PQclear(r);
    /* a statement of its own: its snapshot sees what the lock holders before us committed */
    r = r ? tc_db_exec(
                c,
                "INSERT INTO console_signin_attempts (name, source, ok) SELECT $1, $2, false"
                " WHERE NOT ((SELECT count(*) FROM console_signin_attempts WHERE name = $1 AND NOT "
                "ok"
                "   AND created_at > now() - make_interval(secs => $3::int)"
                "   AND created_at > coalesce((SELECT max(created_at) FROM console_signin_attempts"
                "                              WHERE name = $1 AND ok), '-infinity')) >= $4::int"
                " OR (SELECT count(*) FROM console_signin_attempts WHERE source = $2 AND NOT ok"
                "   AND created_at > now() - make_interval(secs => $3::int)) >= $5::int)"
                " RETURNING id",
                5, pt)
          : NULL;
    if (!r || !tc_db_command(c, "COMMIT")) {
        PQclear(r);
        tc_db_command(c, "ROLLBACK");
        return -EIO;
    }
    bool throttled = PQntuples(r) != 1;
    char attempt[24] = "";
    if (!throttled)
        snprintf(attempt, sizeof(attempt), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);

    struct tc_console_user u = {0};
    char role[16] = "", hash[crypto_pwhash_STRBYTES] = "";
    bool found = false;
    if (!throttled) {
        const char *pu[] = {name};
        r = tc_db_exec(c,
                       "SELECT u.id, u.name, u.role, u.tenant_id, t.name, u.password_hash"
                       " FROM console_users u JOIN tenants t ON t.id = u.tenant_id"
                       " WHERE u.name = $1 AND u.disabled_at IS NULL",
                       1, pu);
        if (!r)
            return -EIO;
        if (PQntuples(r) == 1) {
            found = true;
            snprintf(u.id, sizeof(u.id), "%s", PQgetvalue(r, 0, 0));
            snprintf(u.name, sizeof(u.name), "%s", PQgetvalue(r, 0, 1));
            snprintf(role, sizeof(role), "%s", PQgetvalue(r, 0, 2));
            snprintf(u.tenant_id, sizeof(u.tenant_id), "%s", PQgetvalue(r, 0, 3));
            snprintf(u.tenant_name, sizeof(u.tenant_name), "%s", PQgetvalue(r, 0, 4));
            snprintf(hash, sizeof(hash), "%s", PQgetvalue(r, 0, 5));
        }
        PQclear(r);
    }
    bool ok = false;
    if (!throttled) {
        size_t pl = strlen(password);
        const char *h = found ? hash : g_dummy_hash;
        ok = h[0] && pl <= TC_CONSOLE_PASSWORD_MAX &&
             crypto_pwhash_str_verify(h, password, pl) == 0 && found;
    }
    int role_bit = ok ? tc_role_parse(role) : -1;
    if (ok && role_bit < 0)
        ok = false;

    char token[TC_CONSOLE_TOKEN_LEN + 1] = "";
    if (tc_db_begin(c) < 0)
        return -EIO;
    int rc = 0;
    if (ok) { /* the attempt was recorded as a failure when it was let through */
        const char *pa[] = {attempt};
        PGresult *ra = tc_db_exec(c,
                                  "UPDATE console_signin_attempts SET ok = true"
                                  " WHERE id = $1::bigint",
                                  1, pa);
        if (!ra)
            rc = -EIO;
        PQclear(ra);
    }
    if (rc == 0 && ok) {
        random_token(token);
        random_token(u.csrf);
        char th[2 * 32 + 3], abs_s[24];
        token_hash_hex(token, th);
        snprintf(abs_s, sizeof(abs_s), "%" PRId64, cfg->absolute_seconds);
        const char *ps[] = {th, u.id, u.csrf, source, abs_s};
        PGresult *rs = tc_db_exec(
            c,
            "INSERT INTO console_sessions (token_hash, user_id, csrf_token, source, expires_at)"
            " VALUES ($1::bytea, $2, $3, $4, now() + make_interval(secs => $5::int))",
            5, ps);
        if (!rs)
            rc = -EIO;
        PQclear(rs);
        /* Housekeeping: sessions past their absolute expiry, attempts older than a day. */
        PQclear(tc_db_exec(c, "DELETE FROM console_sessions WHERE expires_at < now()", 0, NULL));
        PQclear(tc_db_exec(c,
                           "DELETE FROM console_signin_attempts"
                           " WHERE created_at < now() - interval '1 day'",
                           0, NULL));
    }
    if (rc == 0) {
        /* The typed name is untrusted text: it is recorded (bounded), and shown escaped. */
        rc = audit_signin(c, keys, ok ? "console.signin" : "console.signin_failed",
                          ok ? "ok" : "refused", found ? u.tenant_id : NULL, found ? u.id : "",
                          found ? u.name : lname, ok ? role : NULL, source,
                          ok          ? NULL
                          : throttled ? "throttled"
                                      : "bad_credentials");
    }
    if (rc == 0 && !tc_db_command(c, "COMMIT"))
        rc = -EIO;
    if (rc < 0) {
        tc_db_command(c, "ROLLBACK");
        sodium_memzero(token, sizeof(token));
        return rc;
    }
    *ret_result = ok ? TC_SIGNIN_OK : throttled ? TC_SIGNIN_THROTTLED : TC_SIGNIN_BAD;
    if (ok) {
        u.role = (enum tc_role)role_bit;
        memcpy(ret_token, token, sizeof(token));
        *ret_user = u;
    }
    sodium_memzero(token, sizeof(token));
    return 0;
}

int tc_session_get(PGconn *c, const char *token, struct tc_console_user *ret_user)
{
    if (!token_well_formed(token))
        return -EACCES;
    char th[2 * 32 + 3], idle[24];
    token_hash_hex(token, th);
    snprintf(idle, sizeof(idle), "%" PRId64, tc_console_settings()->idle_seconds);
    const char *p[] = {th, idle};
    PGresult *r = tc_db_exec(
        c,
        "UPDATE console_sessions s SET last_seen_at = now()"
        " FROM console_users u JOIN tenants t ON t.id = u.tenant_id"
        " WHERE s.token_hash = $1::bytea AND u.id = s.user_id AND u.disabled_at IS NULL"
        " AND s.expires_at > now() AND s.last_seen_at > now() - make_interval(secs => $2::int)"
        " RETURNING u.id, u.name, u.role, u.tenant_id, t.name, s.csrf_token,"
        " coalesce(u.person_id::text, '')",
        2, p);
    if (!r)
        return -EIO;
    if (PQntuples(r) != 1) {
        PQclear(r);
        /* Expired or unknown: make sure it can never come back. */
        PQclear(tc_db_exec(c, "DELETE FROM console_sessions WHERE token_hash = $1::bytea", 1, p));
        return -EACCES;
    }
    struct tc_console_user u = {0};
    snprintf(u.id, sizeof(u.id), "%s", PQgetvalue(r, 0, 0));
    snprintf(u.name, sizeof(u.name), "%s", PQgetvalue(r, 0, 1));
    int role = tc_role_parse(PQgetvalue(r, 0, 2));
    snprintf(u.tenant_id, sizeof(u.tenant_id), "%s", PQgetvalue(r, 0, 3));
    snprintf(u.tenant_name, sizeof(u.tenant_name), "%s", PQgetvalue(r, 0, 4));
    snprintf(u.csrf, sizeof(u.csrf), "%s", PQgetvalue(r, 0, 5));
    snprintf(u.person_id, sizeof(u.person_id), "%s", PQgetvalue(r, 0, 6));
    PQclear(r);
    if (role < 0 || role == TC_ROLE_AGENT)
        return -EACCES;
    u.role = (enum tc_role)role;
    *ret_user = u;
    return 0;
}

int tc_session_signout(PGconn *c, const struct tc_keys *keys, const char *token,
                       const struct tc_console_user *user, const char *source)
{
    if (!token_well_formed(token))
        return 0;
    char th[2 * 32 + 3];
    token_hash_hex(token, th);
    const char *p[] = {th};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r = tc_db_exec(c, "DELETE FROM console_sessions WHERE token_hash = $1::bytea", 1, p);
    int rc = r ? 0 : -EIO;
    PQclear(r);
    if (rc == 0)
        rc = audit_signin(c, keys, "console.signout", "ok", user->tenant_id, user->id, user->name,
                          tc_role_name(user->role), source, NULL);
    rc = tc_db_finish(c, rc);
    return rc;
}
