/* The administrative commands: migrate, keys, users, secrets, audit, version. */
#include <getopt.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "execution/quota.h"
#include "execution/request.h"
#include "audit/audit.h"
#include "audit/receipt.h"
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

int tc_cmd_migrate(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv))
        return tc_cli_usage_of("migrate");
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    int n = tc_cli_run_migrations(&cfg);
    tc_config_free(&cfg);
    if (n < 0)
        return 1;
    printf("%d migration(s) applied\n", n);
    return 0;
}

int tc_cmd_webhook_secret(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[2], "--tenant") != 0)
        return tc_cli_usage_of("keys");
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    int rc = 1;
    struct tc_keys *keys = NULL;
    _cleanup_free_ char *err = NULL;
    PGconn *conn = NULL;
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else {
        char id[37];
        if (tc_auth_tenant_id(conn, argv[3], id) == 0) {
            char secret[65];
            tc_webhook_secret(keys, id, secret);
            printf("%s\n", secret);
            sodium_memzero(secret, sizeof(secret));
            rc = 0;
        } else {
            fprintf(stderr, "toolcage: no tenant named '%s'\n", argv[3]);
        }
    }
    PQfinish(conn);
    tc_keys_free(keys);
    tc_config_free(&cfg);
    return rc;
}

int tc_cmd_keys(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "webhook-secret") == 0 && !tc_cli_wants_help(argc, argv))
        return tc_cmd_webhook_secret(argc, argv);
    if (tc_cli_wants_help(argc, argv) || argc < 2 || strcmp(argv[1], "create") != 0)
        return tc_cli_usage_of("keys");
    const char *tenant = NULL, *role = NULL, *person = NULL;
    static const struct option lopts[] = {{"tenant", required_argument, NULL, 't'},
                                          {"role", required_argument, NULL, 'r'},
                                          {"person", required_argument, NULL, 'p'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 't')
            tenant = optarg;
        else if (c == 'r')
            role = optarg;
        else if (c == 'p')
            person = optarg;
        else
            return tc_cli_usage_of("keys") ? 2 : 2;
    }
    bool operator= role && strcmp(role, "operator") == 0;
    if (!role || (!tenant && !operator) || ((tenant || person) && operator) || optind != argc) {
        fprintf(stderr, "toolcage keys create: --tenant and --role are required (--role operator"
                        " takes neither --tenant nor --person)\n");
        return 2;
    }
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    _cleanup_free_ char *err = NULL;
    _cleanup_free_ char *key = NULL;
    struct tc_keys *keys = NULL; /* the audit record may be a signed checkpoint's */
    PGconn *conn = NULL;
    int rc = 1;
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else if (tc_auth_create_key(conn, keys, tenant, role, person, &key, &err) < 0) {
        fprintf(stderr, "toolcage: cannot create the key: %s\n", err ? err : "");
    } else {
        if (operator)
            printf("created an operator key (every tenant's audit trail, policy reload); it is"
                   " shown once:\n%s\n",
                   key);
        else
            printf("created a %s key for tenant %s%s%s; it is shown once:\n%s\n", role, tenant,
                   person ? ", person " : "", person ? person : "", key);
        rc = 0;
    }
    PQfinish(conn);
    tc_keys_free(keys);
    tc_config_free(&cfg);
    return rc;
}

int tc_cmd_audit(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv) || argc < 2 ||
        (strcmp(argv[1], "verify") != 0 && strcmp(argv[1], "public-key") != 0))
        return tc_cli_usage_of("audit");
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    int rc = 1;
    if (strcmp(argv[1], "public-key") == 0) {
        struct tc_keys *keys = NULL;
        _cleanup_free_ char *err = NULL;
        if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
            fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
        } else {
            char hex[65];
            sodium_bin2hex(hex, sizeof(hex), keys->audit_sign_pk, 32);
            printf("key_id %s\n%s\n", keys->audit_key_id, hex);
            rc = 0;
        }
        tc_keys_free(keys);
        tc_config_free(&cfg);
        return rc;
    }
    const char *file = NULL, *pk_hex = NULL;
    static const struct option lopts[] = {{"file", required_argument, NULL, 'f'},
                                          {"public-key", required_argument, NULL, 'k'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 'f')
            file = optarg;
        else if (c == 'k')
            pk_hex = optarg;
        else
            goto out;
    }
    struct tc_audit_verdict v;
    if (file) {
        unsigned char pk[32];
        size_t pklen = 0;
        if (pk_hex &&
            (sodium_hex2bin(pk, sizeof(pk), pk_hex, strlen(pk_hex), NULL, &pklen, NULL) != 0 ||
             pklen != 32)) {
            fprintf(stderr, "toolcage audit verify: --public-key must be 64 hex digits\n");
            goto out;
        }
        FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "re");
        if (!f) {
            fprintf(stderr, "toolcage audit verify: %s: %s\n", file, strerror(errno));
            goto out;
        }
        int r = tc_audit_verify_file(f, pk_hex ? pk : NULL, &v);
        if (f != stdin)
            fclose(f);
        if (r < 0) {
            fprintf(stderr, "toolcage audit verify: %s is not an audit export\n", file);
            goto out;
        }
    } else {
        /* The database mode checks every record's authentication code: it needs the master
         * key (and the previous ones during a rotation). */
        _cleanup_free_ char *err = NULL;
        struct tc_keys *keys = NULL;
        if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0 ||
            tc_keys_add_previous(keys, cfg.previous_master_key_files, &err) < 0) {
            fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
            tc_keys_free(keys);
            goto out;
        }
        PGconn *conn = tc_db_connect(cfg.database_url, &err);
        if (!conn) {
            fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
            tc_keys_free(keys);
            goto out;
        }
        int r = tc_audit_verify_db(conn, keys, &v);
        PQfinish(conn);
        tc_keys_free(keys);
        if (r < 0) {
            fprintf(stderr, "toolcage audit verify: the audit trail cannot be read\n");
            goto out;
        }
    }
    json_t *o = tc_audit_verdict_json(&v);
    json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(o);
    rc = v.ok ? 0 : 3;
out:
    tc_config_free(&cfg);
    return rc;
}

int tc_cmd_receipt(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv) || argc < 3 || strcmp(argv[1], "verify") != 0)
        return tc_cli_usage_of("receipt");
    const char *file = argv[2], *pk_hex = NULL;
    static const struct option lopts[] = {{"public-key", required_argument, NULL, 'k'},
                                          {NULL, 0, NULL, 0}};
    optind = 3;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c != 'k')
            return tc_cli_usage_of("receipt");
        pk_hex = optarg;
    }
    unsigned char pk[32];
    size_t pklen = 0;
    if (!pk_hex ||
        sodium_hex2bin(pk, sizeof(pk), pk_hex, strlen(pk_hex), NULL, &pklen, NULL) != 0 ||
        pklen != 32) {
        fprintf(stderr, "toolcage receipt verify: --public-key must be 64 hex digits\n");
        return 1;
    }
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "re");
    if (!f) {
        fprintf(stderr, "toolcage receipt verify: %s: %s\n", file, strerror(errno));
        return 1;
    }
    json_error_t jerr;
    json_t *doc = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    if (f != stdin)
        fclose(f);
    const char *why = "not JSON";
    bool ok = doc && tc_receipt_verify(doc, pk, &why) == 0;
    json_t *st = json_object_get(doc, "statement");
    json_t *out = json_pack("{s:b, s:s*, s:O*, s:O*}", "ok", ok, "error", ok ? NULL : why,
                            "execution_id", ok ? json_object_get(st, "execution_id") : NULL,
                            "status", ok ? json_object_get(st, "status") : NULL);
    json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(out);
    json_decref(doc);
    return ok ? 0 : 3;
}

int tc_cmd_users(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv) || argc < 2 || strcmp(argv[1], "add") != 0)
        return tc_cli_usage_of("users");
    const char *name = NULL, *role = NULL, *tenant = "demo", *person = NULL;
    static const struct option lopts[] = {{"name", required_argument, NULL, 'n'},
                                          {"role", required_argument, NULL, 'r'},
                                          {"tenant", required_argument, NULL, 't'},
                                          {"person", required_argument, NULL, 'p'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 'n')
            name = optarg;
        else if (c == 'r')
            role = optarg;
        else if (c == 't')
            tenant = optarg;
        else if (c == 'p')
            person = optarg;
        else
            return 2;
    }
    if (!name || !role || optind != argc) {
        fprintf(stderr, "toolcage users add: --name and --role are required; the password is"
                        " read from stdin\n");
        return 2;
    }
    _cleanup_free_ char *pw = NULL;
    size_t len = 0;
    int r = tc_read_all(STDIN_FILENO, TC_CONSOLE_PASSWORD_MAX + 2, &pw, &len);
    if (r < 0) {
        fprintf(stderr, "toolcage users add: cannot read the password from stdin: %s\n",
                strerror(-r));
        return 2;
    }
    if (len > 0 && pw[len - 1] == '\n') /* one trailing newline, as `echo` or a terminal adds */
        pw[--len] = '\0';
    if (len > 0 && pw[len - 1] == '\r')
        pw[--len] = '\0';
    if (strlen(pw) != len) {
        sodium_memzero(pw, len);
        fprintf(stderr, "toolcage users add: the password contains a NUL byte\n");
        return 2;
    }
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0) {
        sodium_memzero(pw, len);
        return tc_cli_fail_config();
    }
    _cleanup_free_ char *err = NULL;
    struct tc_keys *keys = NULL;
    PGconn *conn = NULL;
    int rc = 1;
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else if ((r = tc_console_user_add(conn, keys, tenant, name, role, person, pw, &err)) < 0) {
        fprintf(stderr, "toolcage users add: %s\n", err ? err : "failed");
        rc = r == -EEXIST || r == -EINVAL ? 2 : 1;
    } else {
        printf("created console user %s (%s) in tenant %s\n", name, role, tenant);
        rc = 0;
    }
    sodium_memzero(pw, len);
    PQfinish(conn);
    tc_keys_free(keys);
    tc_config_free(&cfg);
    return rc;
}

/* rotate-master: re-seal every secret under the new master key (or, without --new-key-file,
 * under the current one), row by row, so servers holding both keys keep serving throughout.
 * See docs/credentials.md for the procedure. */
int tc_cmd_secrets(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv) || argc < 2 || strcmp(argv[1], "rotate-master") != 0)
        return tc_cli_usage_of("secrets");
    const char *new_file = NULL;
    static const struct option lopts[] = {{"new-key-file", required_argument, NULL, 'n'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c != 'n')
            return 2;
        new_file = optarg;
    }
    if (optind != argc)
        return tc_cli_usage_of("secrets") ? 2 : 2;
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    int rc = 1;
    struct tc_keys *cur = NULL, *to = NULL;
    _cleanup_free_ char *err = NULL;
    PGconn *conn = NULL;
    size_t done = 0, left = 0;
    if (tc_keys_load(cfg.master_key_file, &cur, &err) < 0 ||
        tc_keys_add_previous(cur, cfg.previous_master_key_files, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master keys");
    } else if (new_file && tc_keys_load(new_file, &to, &err) < 0) {
        fprintf(stderr, "toolcage secrets rotate-master: %s\n", err ? err : "cannot load the key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else {
        const struct tc_keys *target = to ? to : cur;
        /* Publish both token keys, so tokens signed under either keep verifying. */
        if (tc_audit_publish_key(conn, target) < 0 || tc_token_publish_key(conn, cur) < 0 ||
            tc_token_publish_key(conn, target) < 0 ||
            tc_secrets_reseal_all(conn, cur, target, &done, &left) < 0) {
            fprintf(stderr, "toolcage secrets rotate-master: database error: %s",
                    tc_db_error(conn));
        } else {
            printf("re-sealed %zu secret(s) under master key %s; %zu could not be opened\n", done,
                   target->master_id, left);
            /* Holding the current and the previous keys, vouch for the audit records made
             * under either with a checkpoint (see docs/audit.md, trust model). */
            if (!to && tc_audit_checkpoint(conn, cur, NULL) < 0)
                fprintf(stderr, "toolcage secrets rotate-master: no audit checkpoint could be"
                                " signed (GET /v1/audit/verify says why)\n");
            rc = left ? 3 : 0;
        }
    }
    PQfinish(conn);
    tc_keys_free(cur);
    tc_keys_free(to);
    tc_config_free(&cfg);
    return rc;
}

/* tenants quota --tenant NAME [--max-concurrent N|default] [--rate-per-minute N|default]
 * [--cpu-seconds-per-day N|default] [--wall-seconds-per-day N|default]
 * [--max-sessions N|default]: print (and set) a
 * tenant's quota; every replica enforces it from the next call on. */
int tc_cmd_tenants(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv) || argc < 2 || strcmp(argv[1], "quota") != 0)
        return tc_cli_usage_of("tenants");
    const char *tenant = NULL;
    int64_t v[TC_QUOTA__COUNT];
    bool any = false, bad = false;
    for (int i = 0; i < TC_QUOTA__COUNT; i++)
        v[i] = TC_QUOTA_KEEP;
    /* --max-concurrent, --rate-per-minute, ... (the limit names with '-') */
    char names[TC_QUOTA__COUNT][32];
    struct option lopts[TC_QUOTA__COUNT + 2] = {{"tenant", required_argument, NULL, 't'}};
    for (int i = 0; i < TC_QUOTA__COUNT; i++) {
        snprintf(names[i], sizeof(names[i]), "%s", tc_quota_limit_names[i]);
        for (char *q = names[i]; *q; q++)
            if (*q == '_')
                *q = '-';
        lopts[1 + i] = (struct option){names[i], required_argument, NULL, 'a' + i};
    }
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 't') {
            tenant = optarg;
        } else if (c >= 'a' && c < 'a' + TC_QUOTA__COUNT) {
            int i = c - 'a';
            any = true;
            if (strcmp(optarg, "default") == 0)
                v[i] = TC_QUOTA_DEFAULT;
            else if (tc_parse_i64(optarg, 0, tc_quota_limit_max[i], &v[i]) < 0)
                bad = true;
        } else {
            return 2;
        }
    }
    if (!tenant || optind != argc || bad) {
        fprintf(stderr, "toolcage tenants quota: --tenant NAME is required; each limit is an"
                        " integer from 0 up to its maximum, or \"default\"\n");
        return 2;
    }
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    int rc = 1;
    struct tc_keys *keys = NULL;
    _cleanup_free_ char *err = NULL;
    PGconn *conn = NULL;
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else {
        char id[37] = "";
        if (tc_auth_tenant_id(conn, tenant, id) < 0)
            id[0] = '\0';
        json_t *actor = json_pack("{s:s, s:s}", "type", "cli", "id", "tenants quota");
        const struct tc_quota_defaults d = tc_quota_defaults_of(&cfg);
        json_t *q = NULL;
        if (!id[0]) {
            fprintf(stderr, "toolcage: no tenant named '%s'\n", tenant);
        } else if (any && tc_quota_set(conn, keys, id, v, actor) < 0) {
            fprintf(stderr, "toolcage: the quota could not be stored: %s", tc_db_error(conn));
        } else if (!(q = tc_quota_describe(conn, id, &d))) {
            fprintf(stderr, "toolcage: %s", tc_db_error(conn));
        } else {
            /* one line per part, as GET /v1/quota shows it */
            printf("tenant %s\n", tenant);
            const char *key;
            json_t *part;
            json_object_foreach(q, key, part)
            {
                char *text = json_dumps(part, JSON_COMPACT | JSON_PRESERVE_ORDER);
                printf("  %s %s\n", key, text ? text : "?");
                free(text);
            }
            rc = 0;
        }
        json_decref(q);
        json_decref(actor);
    }
    PQfinish(conn);
    tc_keys_free(keys);
    tc_config_free(&cfg);
    return rc;
}
