/* toolcage: command-line entry point. Each subcommand is a function; `serve` wires the
 * HTTP server, database pool and launcher together. */
#include <getopt.h>
#include <libpq-fe.h>
#include <signal.h>
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

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
    const char *help;
};

int tc_cli_fail_config(void)
{
    return 2;
}

int tc_cli_load_config(struct tc_config *cfg)
{
    _cleanup_free_ char *err = NULL;
    if (tc_config_load(cfg, &err) < 0) {
        fprintf(stderr, "toolcage: invalid configuration: %s\n", err ? err : "out of memory");
        return -1;
    }
    tc_log_set_level((enum tc_log_level)cfg->log_level);
    return 0;
}

/* What the launcher takes from the configuration (it reads no environment itself). */
struct tc_launcher_options tc_cli_launcher_options(const struct tc_config *cfg, unsigned max)
{
    return (struct tc_launcher_options){
        .state_dir = cfg->state_dir,
        .max_sandboxes = max,
        .pool = cfg->pool ? (int)cfg->pool : TC_POOL_NONE,
        .pool_max = cfg->pool_max ? (int)cfg->pool_max : TC_POOL_NONE,
        .warm = cfg->warm ? (int)cfg->warm : TC_POOL_NONE,
        .warm_group_max = (int)cfg->warm_per_tenant,
        .uid_registry = cfg->uid_registry,
        .gvisor_platform = cfg->gvisor_platform,
        .egress_ca_file = cfg->egress_ca_file,
        .init_path = cfg->init_path,
        .no_cgroup = cfg->no_cgroup,
        .no_seccomp_notify = cfg->no_seccomp_notify,
    };
}

bool tc_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

void tc_cli_print_policy_errors(const char *path, json_t *errors)
{
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e) fprintf(stderr, "%s: %s\n", path, json_string_value(e));
}

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

static const struct command commands[] = {
    {"serve", tc_cmd_serve, "serve", "run the HTTP service (migrates the database first)"},
    {"migrate", tc_cmd_migrate, "migrate", "apply the database migrations (idempotent)"},
    {"keys", tc_cmd_keys,
     "keys create --tenant NAME --role agent|reviewer|auditor|admin [--person NAME]"
     " | keys create --role operator | keys webhook-secret --tenant NAME",
     "create an API key (printed alone on the last line; --person binds it to a person of the"
     " tenant, who counts once among approvers); an operator key (no tenant) reads every"
     " tenant's audit trail and reloads the policy; print a tenant's webhook secret"},
    {"policy", tc_cmd_policy, "policy check FILE", "validate a policy file and print every error"},
    {"exec", tc_cmd_exec, "exec --tool NAME [--policy FILE] [--json]",
     "run code from stdin in the tool's sandbox, without server or database"},
    {"audit", tc_cmd_audit, "audit verify [--file EXPORT [--public-key HEX]] | audit public-key",
     "verify the audit chain (the database, with the master key; or an export file, with the"
     " checkpoint public key); print the checkpoint key"},
    {"receipt", tc_cmd_receipt, "receipt verify FILE --public-key HEX",
     "check an execution receipt (GET /v1/executions/{id}/receipt; FILE - reads stdin) against"
     " the audit signing key's public half (toolcage audit public-key): exit 0 if it is"
     " signed by that key and unchanged, 3 if not"},
    {"users", tc_cmd_users,
     "users add --name NAME --role reviewer|auditor|admin [--tenant NAME] [--person NAME]",
     "create a web console user (tenant default: demo; person default: NAME, the same person"
     " as keys made with --person NAME); the password is read from stdin"},
    {"tenants", tc_cmd_tenants,
     "tenants quota --tenant NAME [--max-concurrent N|default] [--rate-per-minute N|default]"
     " [--cpu-seconds-per-day N|default] [--wall-seconds-per-day N|default]"
     " [--max-sessions N|default]",
     "print a tenant's quota and use; set its executions running at once, calls per minute,"
     " CPU/wall seconds per rolling day and sessions open at once (default: the server's "
     "TOOLCAGE_TENANT_*); every"
     " replica enforces them from the next call"},
    {"images", tc_cmd_images,
     "images import FILE [--name NAME] [--replace] [--max-bytes N]"
     " | images pull REF [--name NAME] [--credentials-file FILE] [--ca-file FILE] [--plain-http]"
     " [--max-bytes N] | images ls [--json] | images rm REF | images gc",
     "import an OCI image layout or `docker save` archive, or pull from a registry (Bearer"
     " token or Basic auth with user:password from FILE; a stopped download resumes); every"
     " blob and layer is verified, the root unpacked once, for tools that name the image in"
     " \"image\" (a name the archive gives moves off another image only with --name or"
     " --replace); list, remove (by name or sha256 digest) and free what no image uses (roots"
     " a running launcher holds are kept)"},
    {"secrets", tc_cmd_secrets, "secrets rotate-master [--new-key-file FILE]",
     "re-seal every secret under FILE's master key (default: the current one)"},
    {"version", tc_cmd_version, "version", "print the version"},
};

int tc_cli_usage_of(const char *name)
{
    for (size_t i = 0; i < TC_ARRAY_SIZE(commands); i++)
        if (strcmp(commands[i].name, name) == 0) {
            printf("usage: toolcage %s\n\n%s\n\n", commands[i].usage, commands[i].help);
            tc_config_print_help(stdout);
            return 0;
        }
    return 2;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: toolcage COMMAND [ARGS]\n\ncommands:\n");
    /* usage lines are long (alternatives joined by " | "): each on its own lines, then the
     * help indented, as the environment table below */
    for (size_t i = 0; i < TC_ARRAY_SIZE(commands); i++) {
        const char *u = commands[i].usage;
        fprintf(f, "  ");
        for (const char *bar; (bar = strstr(u, " | ")); u = bar + 3)
            fprintf(f, "%.*s\n  ", (int)(bar - u), u);
        fprintf(f, "%s\n      %s\n", u, commands[i].help);
    }
    fprintf(f, "\n`toolcage COMMAND --help` for one command.\n\n");
    tc_config_print_help(f);
}

int main(int argc, char **argv)
{
    if (sodium_init() < 0) {
        fprintf(stderr, "toolcage: libsodium failed to initialise\n");
        return 1;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "launcher") == 0)
        return tc_launcher_main(argc - 1, argv + 1);
    for (size_t i = 0; i < TC_ARRAY_SIZE(commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "toolcage: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
