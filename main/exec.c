/* toolcage policy check and toolcage exec: a policy file's errors; one sandboxed run without
 * server or database. */
#include <getopt.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
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

int tc_cmd_policy(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv) || argc != 3 || strcmp(argv[1], "check") != 0)
        return tc_cli_usage_of("policy");
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    if (tc_policy_load(argv[2], &p, &errors) < 0) {
        if (json_array_size(errors) == 0)
            fprintf(stderr, "%s: cannot be read\n", argv[2]);
        tc_cli_print_policy_errors(argv[2], errors);
        json_decref(errors);
        return 1;
    }
    printf("ok: %zu tools\n", tc_policy_ntools(p));
    tc_policy_unref(p);
    return 0;
}

static int exit_status_of(json_t *view)
{
    const char *status = json_string_value(json_object_get(view, "status"));
    json_t *code = json_object_get(view, "exit_code");
    if (status && (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0) &&
        json_is_integer(code))
        return (int)json_integer_value(code);
    if (status && strcmp(status, "timeout") == 0)
        return 124;
    if (status && strcmp(status, "killed") == 0)
        return 137;
    return 125;
}

struct meanwhile {
    const struct tc_tool *tool;
    json_t *body;
    const char *state_dir;
    json_t *findings;
    struct tc_redactor *red;
    int red_err;
};

static void screen_and_redactor(void *ud)
{
    struct meanwhile *m = ud;
    if (tc_prescreen_request(m->tool, m->body, &m->findings) < 0)
        m->findings = json_array();
    m->red_err = tc_exec_redactor(m->tool, m->state_dir, &m->red);
}

/* Wipes and frees *s (a credential the launcher, a fork of ours, must not hold). */
static void forget(char **s)
{
    if (*s) {
        explicit_bzero(*s, strlen(*s));
        free(*s);
        *s = NULL;
    }
}

int tc_cmd_exec(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv))
        return tc_cli_usage_of("exec");
    const char *tool_name = NULL, *policy_path = NULL;
    bool as_json = false;
    static const struct option lopts[] = {{"tool", required_argument, NULL, 't'},
                                          {"policy", required_argument, NULL, 'p'},
                                          {"json", no_argument, NULL, 'j'},
                                          {NULL, 0, NULL, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 't')
            tool_name = optarg;
        else if (c == 'p')
            policy_path = optarg;
        else if (c == 'j')
            as_json = true;
        else
            return 2;
    }
    if (!tool_name || optind != argc) {
        fprintf(stderr, "toolcage exec: --tool NAME is required; the code is read from stdin\n");
        return 2;
    }
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    /* none of the configuration's credentials in the launcher (a fork of ours): exec needs no
     * database nor mail */
    forget(&cfg.database_url);
    forget(&cfg.migrate_database_url);
    forget(&cfg.smtp_url);
    /* One run: start only what it needs (no spare shells; no egress proxy without network).
     * The launcher is started now, before the policy is read, so that its setup goes on
     * beside ours (the policy, the code, the spec): forked, not exec'd, as for a tool without
     * network (most; one with network gets its own, exec'd, below), with nothing of the run
     * in this process yet. */
    struct tc_launcher_options lo = tc_cli_launcher_options(&cfg, 1);
    lo.pool = lo.pool_max = lo.warm = TC_POOL_NONE;
    lo.no_egress = lo.no_exec = true;
    struct tc_launcher *launcher = NULL, *spare = NULL;
    if (tc_launcher_open_once(&lo, &launcher) < 0)
        launcher = NULL; /* (opened again below, where its failure is told) */
    int rc = 125;
    struct tc_policy *policy = NULL;
    json_t *errors = NULL, *body = NULL, *spec = NULL, *result = NULL, *view = NULL;
    struct tc_exec_request req = {0};
    _cleanup_free_ char *code = NULL;
    size_t code_len = 0;
    if (!policy_path)
        policy_path = cfg.policy_path;

    if (tc_policy_load(policy_path, &policy, &errors) < 0) {
        tc_cli_print_policy_errors(policy_path, errors);
        goto out;
    }
    int r = tc_read_all(STDIN_FILENO, TC_EXEC_MAX_CODE_BYTES, &code, &code_len);
    if (r < 0) {
        fprintf(stderr, "toolcage exec: cannot read the code from stdin: %s\n", strerror(-r));
        goto out;
    }
    body = json_pack("{s:s, s:s%}", "tool", tool_name, "code", code, code_len);
    if (!body || tc_exec_request_parse(body, &req, &errors) < 0) {
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e) fprintf(stderr, "toolcage exec: %s: %s\n",
                                                 json_string_value(json_object_get(e, "path")),
                                                 json_string_value(json_object_get(e, "message")));
        goto out;
    }
    const struct tc_tool *tool = tc_policy_tool(policy, tool_name);
    if (!tool) {
        fprintf(stderr, "toolcage exec: no tool named '%s' in %s\n", tool_name, policy_path);
        goto out;
    }
    int64_t limits[TC_LIMIT__COUNT];
    if (tc_exec_limits(tool, &req, limits, &errors) < 0)
        goto out;
    char id[37], created[32], finished[32];
    tc_uuid7(id);
    tc_iso8601(tc_wall_ms(), created);
    json_t *image = NULL;
    if ((r = tc_exec_image(tool, cfg.state_dir, &image)) < 0) {
        fprintf(stderr,
                "toolcage exec: the tool's image %s is not in the image store under %s "
                "(toolcage images import)\n",
                tool->image, cfg.state_dir);
        goto out;
    }
    spec = tc_exec_build_spec(tool, &req, limits, id, image);
    json_decref(image);
    if (!spec) {
        fprintf(stderr, "toolcage exec: %s\n", strerror(ENOMEM));
        goto out;
    }
    /* A tool with network needs the egress proxy, a fork of its launcher that parses what the
     * sandbox sends: that launcher is exec'd, so that the proxy does not hold this process's
     * memory (the environment, the policy, the code, whatever else). The one forked above
     * goes, unused: told now, reaped at the end (its teardown beside the run, not before it).
     * The redactor's secrets are read meanwhile, below, after either. */
    if (!tool->network_none) {
        tc_launcher_dismiss(launcher);
        spare = launcher;
        launcher = NULL;
        lo.no_egress = lo.no_exec = false;
    }
    if (!launcher && (r = tc_launcher_open_once(&lo, &launcher)) < 0) {
        fprintf(stderr, "toolcage exec: the sandbox did not run: %s\n", strerror(-r));
        launcher = NULL;
        goto out;
    }
    /* the screen's findings and the redactor are made while the launcher sets up and the
     * sandbox runs (the CLI does not hold a call back on its findings: it reports them, as
     * the audit would) */
    if (code_len <= 64 * 1024) /* one short screen: no JIT to compile (more would pay it back) */
        tc_prescreen_once();
    struct meanwhile mw = {.tool = tool, .body = req.body, .state_dir = cfg.state_dir};
    int64_t done_ms = 0;
    if ((r = tc_launcher_run_once(launcher, spec, screen_and_redactor, &mw, &result, &done_ms)) <
        0) {
        /* the launcher's own words, if it said why (its setup: it does not print them) */
        json_t *hi = tc_launcher_host_info(launcher);
        const char *why = json_string_value(json_object_get(hi, "error"));
        fprintf(stderr, "toolcage exec: the sandbox did not run: %s\n", why ? why : strerror(-r));
        json_decref(hi);
        tc_redactor_free(mw.red);
        json_decref(mw.findings);
        goto out;
    }
    tc_iso8601(done_ms, finished); /* when the sandbox's result came, not after the screen */
    struct tc_redactor *red = mw.red;
    json_t *findings = mw.findings;
    if (mw.red_err < 0) {
        fprintf(stderr, "toolcage exec: cannot build the redactor: %s\n", strerror(-mw.red_err));
        json_decref(findings);
        goto out;
    }
    struct tc_exec_filter filter = {.redactor = red};
    view = tc_exec_view(id, tool->name, result, limits, created, finished, &filter, findings);
    tc_redactor_free(red);
    json_decref(findings);
    if (as_json) {
        json_dumpf(view, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    } else {
        fputs(json_string_value(json_object_get(view, "stdout")), stdout);
        fputs(json_string_value(json_object_get(view, "stderr")), stderr);
        const char *status = json_string_value(json_object_get(view, "status"));
        if (strcmp(status, "completed") && strcmp(status, "failed"))
            fprintf(stderr, "toolcage exec: %s%s%s\n", status,
                    json_is_string(json_object_get(view, "killed_reason")) ? ": " : "",
                    json_is_string(json_object_get(view, "killed_reason"))
                        ? json_string_value(json_object_get(view, "killed_reason"))
                        : "");
    }
    rc = exit_status_of(view);
out:
    /* the result is out: the launcher's end (the sandbox's cgroups, its mounts) is awaited
     * now, before ours */
    tc_launcher_stop(launcher);
    tc_launcher_stop(spare);
    tc_exec_request_done(&req);
    json_decref(errors);
    json_decref(body);
    json_decref(spec);
    json_decref(result);
    json_decref(view);
    tc_policy_unref(policy);
    tc_config_free(&cfg);
    return rc;
}
