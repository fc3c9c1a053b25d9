/* The command line's shared pieces: each command is a function in one of main/'s files
 * (serve.c; exec.c: policy check and exec; admin.c: migrate, keys, users, secrets, audit;
 * images.c: the image store; cli.c: version). Two binaries: `toolcage` (front.c, lean: only
 * the libraries exec needs) runs exec, policy and version and execs `toolcage-server`
 * (main.c: every command) for the others. cli.c holds the usage both print. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/config.h"
#include "sandbox/sandbox.h"

/* Every command: its name, usage line(s) (alternatives joined by " | ") and help. */
struct tc_cli_command {
    const char *name, *usage, *help;
};
extern const struct tc_cli_command tc_cli_commands[];
extern const size_t tc_cli_n_commands;
/* The usage of every command and the environment's variables. */
void tc_cli_usage(FILE *f);
/* What both binaries' main() does first: libsodium, the usage (no command, help) and the
 * internal `launcher`: its exit status, or -1 when argv[1] is a command to look up. */
int tc_cli_begin(int argc, char **argv);

/* Exit status for a configuration the command cannot run with. */
int tc_cli_fail_config(void);
/* Loads the configuration (one line on stderr naming a bad variable) and the log level. */
int tc_cli_load_config(struct tc_config *cfg);
/* Called by tc_cli_load_config with each configuration it loads: toolcage-server applies the
 * settings of its libraries there (the database's), which the lean front does not link. */
extern void (*tc_cli_config_loaded)(const struct tc_config *cfg);
/* What the launcher takes from the configuration (it reads no environment itself). */
struct tc_launcher_options tc_cli_launcher_options(const struct tc_config *cfg, unsigned max);
/* True when argv asks for --help / -h. */
bool tc_cli_wants_help(int argc, char **argv);
/* Every policy error, one per line, on stderr. */
void tc_cli_print_policy_errors(const char *path, json_t *errors);
/* Applies the migrations as the schema owner: 0, or -1 with the cause on stderr. */
int tc_cli_run_migrations(const struct tc_config *cfg);
/* Prints one command's usage: its exit status. */
int tc_cli_usage_of(const char *name);

int tc_cmd_serve(int argc, char **argv);
int tc_cmd_migrate(int argc, char **argv);
int tc_cmd_keys(int argc, char **argv);
int tc_cmd_webhook_secret(int argc, char **argv);
int tc_cmd_policy(int argc, char **argv);
int tc_cmd_exec(int argc, char **argv);
int tc_cmd_audit(int argc, char **argv);
int tc_cmd_receipt(int argc, char **argv);
int tc_cmd_users(int argc, char **argv);
int tc_cmd_secrets(int argc, char **argv);
int tc_cmd_images(int argc, char **argv);
int tc_cmd_version(int argc, char **argv);
int tc_cmd_tenants(int argc, char **argv);
