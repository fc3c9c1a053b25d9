#include "core/migrate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/embedded.h"
#include "common/util.h"
#include "core/db.h"

/* An arbitrary constant: every toolcage process takes the same lock before migrating. */
#define MIGRATE_LOCK_KEY "7715923601"

static int fail(PGconn *c, const char *what, char **ret_error)
{
    if (ret_error) {
        const char *m = PQerrorMessage(c);
        size_t n = strlen(what) + strlen(m) + 8;
        char *e = malloc(n);
        if (e)
            snprintf(e, n, "%s: %s", what, m);
        *ret_error = e;
    }
    return -EIO;
}

static bool is_migration(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "migrations/", 11) == 0 && n > 15 && strcmp(name + n - 4, ".sql") == 0;
}

int tc_migrate(PGconn *c, const char *app_role, char **ret_error)
{
    int applied = 0;
    PGresult *r = tc_db_exec(c, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", 0, NULL);
    if (!r)
        return fail(c, "advisory lock", ret_error);
    PQclear(r);

    const char *p1[] = {app_role ? app_role : ""};
    r = tc_db_exec(c, "SELECT set_config('toolcage.app_role', $1, false)", 1, p1);
    if (!r) {
        applied = fail(c, "set app role", ret_error);
        goto out;
    }
    PQclear(r);
    /* A server that holds only the runtime role (a deployment keeps the schema owner's
     * credentials for its migration step) finds nothing pending here: that takes SELECT on
     * schema_migrations, which the owner grants below, and no right on the schema. Creating
     * the table (IF NOT EXISTS or not) would need CREATE on the schema. */
    r = tc_db_exec(c, "SELECT to_regclass('schema_migrations') IS NULL", 0, NULL);
    if (!r) {
        applied = fail(c, "schema_migrations", ret_error);
        goto out;
    }
    bool missing = PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (missing) {
        r = PQexec(c, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                      " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())");
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            PQclear(r);
            applied = fail(c, "schema_migrations", ret_error);
            goto out;
        }
        PQclear(r);
    }

    /* The embedded table is in sorted order (CMake sorts the glob). */
    for (const struct tc_embedded *e = tc_embedded_files; e->name; e++) {
        if (!is_migration(e->name))
            continue;
        const char *version = e->name + 11;
        const char *pv[] = {version};
        r = tc_db_exec(c, "SELECT 1 FROM schema_migrations WHERE version = $1", 1, pv);
        if (!r) {
            applied = fail(c, version, ret_error);
            goto out;
        }
        bool done = PQntuples(r) > 0;
        PQclear(r);
        if (done)
            continue;
        r = PQexec(c, "BEGIN");
        PQclear(r);
        /* PQexec runs a multi-statement script; the file is trusted (compiled in). */
        r = PQexec(c, (const char *)e->data);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
            PQclear(r);
            applied = fail(c, version, ret_error);
            PQclear(PQexec(c, "ROLLBACK"));
            goto out;
        }
        PQclear(r);
        r = tc_db_exec(c, "INSERT INTO schema_migrations (version) VALUES ($1)", 1, pv);
        if (!r) {
            applied = fail(c, version, ret_error);
            PQclear(PQexec(c, "ROLLBACK"));
            goto out;
        }
        PQclear(r);
        r = PQexec(c, "COMMIT");
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            PQclear(r);
            applied = fail(c, version, ret_error);
            goto out;
        }
        PQclear(r);
        applied++;
    }
    /* The owner lets the runtime role see which migrations are applied (see above). */
    r = PQexec(c, "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = "
                  "current_schema() AND tablename = 'schema_migrations' AND tableowner = "
                  "current_user) THEN PERFORM tc_grant_app('SELECT', 'schema_migrations'); "
                  "END IF; END $$");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        PQclear(r);
        applied = fail(c, "grant on schema_migrations", ret_error);
        goto out;
    }
    PQclear(r);
out:
    PQclear(tc_db_exec(c, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", 0, NULL));
    return applied;
}
