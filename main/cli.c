/* The command line's pieces both binaries share (main/cli.h): the commands' usage, the
 * configuration, the launcher's options. Nothing here needs the server's libraries: the
 * lean `toolcage` (main/front.c) links it. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "core/log.h"
#include "main/cli.h"

const struct tc_cli_command tc_cli_commands[] = {
    {"serve", "serve", "run the HTTP service (migrates the database first)"},
    {"migrate", "migrate", "apply the database migrations (idempotent)"},
    {"keys",
     "keys create --tenant NAME --role agent|reviewer|auditor|admin [--person NAME]"
     " | keys create --role operator | keys webhook-secret --tenant NAME",
     "create an API key (printed alone on the last line; --person binds it to a person of the"
     " tenant, who counts once among approvers); an operator key (no tenant) reads every"
     " tenant's audit trail and reloads the policy; print a tenant's webhook secret"},
    {"policy", "policy check FILE", "validate a policy file and print every error"},
    {"exec", "exec --tool NAME [--policy FILE] [--json]",
     "run code from stdin in the tool's sandbox, without server or database"},
    {"audit", "audit verify [--file EXPORT [--public-key HEX]] | audit public-key",
     "verify the audit chain (the database, with the master key; or an export file, with the"
     " checkpoint public key); print the checkpoint key"},
    {"receipt", "receipt verify FILE --public-key HEX",
     "check an execution receipt (GET /v1/executions/{id}/receipt; FILE - reads stdin) against"
     " the audit signing key's public half (toolcage audit public-key): exit 0 if it is"
     " signed by that key and unchanged, 3 if not"},
    {"users", "users add --name NAME --role reviewer|auditor|admin [--tenant NAME] [--person NAME]",
     "create a web console user (tenant default: demo; person default: NAME, the same person"
     " as keys made with --person NAME); the password is read from stdin"},
    {"tenants",
     "tenants quota --tenant NAME [--max-concurrent N|default] [--rate-per-minute N|default]"
     " [--cpu-seconds-per-day N|default] [--wall-seconds-per-day N|default]"
     " [--max-sessions N|default]",
     "print a tenant's quota and use; set its executions running at once, calls per minute,"
     " CPU/wall seconds per rolling day and sessions open at once (default: the server's "
     "TOOLCAGE_TENANT_*); every"
     " replica enforces them from the next call"},
    {"images",
     "images import FILE [--name NAME] [--replace] [--max-bytes N]"
     " | images pull REF [--name NAME] [--credentials-file FILE] [--ca-file FILE] [--plain-http]"
     " [--max-bytes N] | images ls [--json] | images rm REF | images gc",
     "import an OCI image layout or `docker save` archive, or pull from a registry (Bearer"
     " token or Basic auth with user:password from FILE; a stopped download resumes); every"
     " blob and layer is verified, the root unpacked once, for tools that name the image in"
     " \"image\" (a name the archive gives moves off another image only with --name or"
     " --replace); list, remove (by name or sha256 digest) and free what no image uses (roots"
     " a running launcher holds are kept)"},
    {"secrets", "secrets rotate-master [--new-key-file FILE]",
     "re-seal every secret under FILE's master key (default: the current one)"},
    {"version", "version", "print the version"},
};
const size_t tc_cli_n_commands = TC_ARRAY_SIZE(tc_cli_commands);

int tc_cli_fail_config(void)
{
    return 2;
}

void (*tc_cli_config_loaded)(const struct tc_config *cfg);

int tc_cli_load_config(struct tc_config *cfg)
{
    _cleanup_free_ char *err = NULL;
    if (tc_config_load(cfg, &err) < 0) {
        fprintf(stderr, "toolcage: invalid configuration: %s\n", err ? err : "out of memory");
        return -1;
    }
    tc_log_set_level((enum tc_log_level)cfg->log_level);
    if (tc_cli_config_loaded)
        tc_cli_config_loaded(cfg);
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
        .microvm_fast = cfg->microvm_boot && strcmp(cfg->microvm_boot, "fast") == 0,
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

int tc_cli_usage_of(const char *name)
{
    for (size_t i = 0; i < TC_ARRAY_SIZE(tc_cli_commands); i++)
        if (strcmp(tc_cli_commands[i].name, name) == 0) {
            printf("usage: toolcage %s\n\n%s\n\n", tc_cli_commands[i].usage,
                   tc_cli_commands[i].help);
            tc_config_print_help(stdout);
            return 0;
        }
    return 2;
}

void tc_cli_usage(FILE *f)
{
    fprintf(f, "usage: toolcage COMMAND [ARGS]\n\ncommands:\n");
    /* usage lines are long (alternatives joined by " | "): each on its own lines, then the
     * help indented, as the environment table below */
    for (size_t i = 0; i < TC_ARRAY_SIZE(tc_cli_commands); i++) {
        const char *u = tc_cli_commands[i].usage;
        fprintf(f, "  ");
        for (const char *bar; (bar = strstr(u, " | ")); u = bar + 3)
            fprintf(f, "%.*s\n  ", (int)(bar - u), u);
        fprintf(f, "%s\n      %s\n", u, tc_cli_commands[i].help);
    }
    fprintf(f, "\n`toolcage COMMAND --help` for one command.\n\n");
    tc_config_print_help(f);
}

int tc_cmd_version(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv))
        return tc_cli_usage_of("version");
    printf("toolcage %s\n", TOOLCAGE_VERSION);
    return 0;
}

int tc_cli_begin(int argc, char **argv)
{
    if (sodium_init() < 0) {
        fprintf(stderr, "toolcage: libsodium failed to initialise\n");
        return 1;
    }
    if (argc < 2) {
        tc_cli_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        tc_cli_usage(stdout);
        return 0;
    }
    /* (a binary without the egress proxy, the lean front, execs toolcage-server for it) */
    if (strcmp(argv[1], "launcher") == 0 && tc_egress_available())
        return tc_launcher_main(argc - 1, argv + 1);
    return -1;
}
