/* toolcage-server: every command, the server's among them (`serve` wires the HTTP server,
 * database pool and launcher together). The `toolcage` users run is the lean front
 * (main/front.c): it runs exec, policy and version itself and execs this binary for the rest. */
#include <getopt.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "execution/request.h"
#include "audit/audit.h"
#include "core/keys.h"
#include "broker/secrets.h"
#include "broker/token.h"
#include "api/api.h"
#include "common/util.h"
#include "console/console.h"
#include "policy/policy.h"
#include "policy/prescreen.h"
#include "policy/redact.h"
#include "sandbox/sandbox.h"
#include "console/session.h"
#include "server/auth.h"
#include "core/config.h"
#include "core/db.h"
#include "server/http.h"
#include "core/log.h"
#include "core/migrate.h"
#include "server/recorder.h"
#include "server/reload.h"
#include "server/verifier.h"
#include "server/waiters.h"
#include "server/webhook.h"
#include "server/worker.h"
#include "main/cli.h"

/* The runtime role's name, from the runtime conninfo, so migrations can grant to it. */
static char *app_role_of(const char *conninfo)
{
    char *role = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, "user") == 0 && o->val)
            role = strdup(o->val);
    PQconninfoFree(opts);
    return role;
}

int tc_cli_run_migrations(const struct tc_config *cfg)
{
    _cleanup_free_ char *err = NULL;
    PGconn *c = tc_db_connect(cfg->migrate_database_url, &err);
    if (!c) {
        tc_log(TC_LOG_ERROR, "cannot connect for migrations", "{s:s}", "error", err ? err : "");
        return -1;
    }
    _cleanup_free_ char *role = app_role_of(cfg->database_url);
    int n = tc_migrate(c, role, &err);
    PQfinish(c);
    if (n < 0) {
        tc_log(TC_LOG_ERROR, "migration failed", "{s:s}", "error", err ? err : "");
        return -1;
    }
    tc_log(TC_LOG_INFO, "migrations applied", "{s:i}", "applied", n);
    return n;
}

/* The commands and their functions (their usage and help: main/cli.c). */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"serve", tc_cmd_serve},     {"migrate", tc_cmd_migrate}, {"keys", tc_cmd_keys},
    {"policy", tc_cmd_policy},   {"exec", tc_cmd_exec},       {"audit", tc_cmd_audit},
    {"receipt", tc_cmd_receipt}, {"users", tc_cmd_users},     {"tenants", tc_cmd_tenants},
    {"images", tc_cmd_images},   {"secrets", tc_cmd_secrets}, {"version", tc_cmd_version},
};

/* Every command's configuration, as it is loaded (main/cli.h): before any connection. */
static void config_loaded(const struct tc_config *cfg)
{
    tc_db_prepare_statements(cfg->db_prepare);
    tc_db_set_timeout((int)cfg->db_timeout_seconds);
}

int main(int argc, char **argv)
{
    /* exec'ed by the front through its fd, the name would be the fd's number on older
     * kernels: the process is "toolcage", as before the split (ps -C, systemd, monitoring) */
    prctl(PR_SET_NAME, "toolcage");
    tc_cli_config_loaded = config_loaded;
    int rc = tc_cli_begin(argc, argv);
    if (rc >= 0)
        return rc;
    for (size_t i = 0; i < TC_ARRAY_SIZE(commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "toolcage: unknown command '%s'\n\n", argv[1]);
    tc_cli_usage(stderr);
    return 2;
}
