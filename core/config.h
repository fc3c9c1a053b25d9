/* Configuration: one struct, filled from the environment through a table of defaults
 * (after redis' static_configs[]). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct tc_config {
    char *database_url;
    char *migrate_database_url;
    char *listen_host;
    uint16_t listen_port;
    char *policy_path;
    char *state_dir;
    int log_level; /* enum tc_log_level */
    int64_t threads;
    int64_t health_port; /* 0: none; else /healthz and /readyz on a listener of their own */
    int64_t db_pool;
    bool db_prepare;
    int64_t db_timeout_seconds; /* statement_timeout; round trips get 5 s more (core/db.h) */
    int64_t max_body_bytes;
    int64_t max_sandboxes;
    int64_t tenant_max_concurrent;       /* per tenant, all replicas (execution/quota.h); 0: none */
    int64_t tenant_max_sessions;         /* open sessions per tenant, all replicas; 0: none */
    int64_t tenant_rate_per_minute;      /* calls per tenant and minute; 0: none */
    int64_t key_rate_per_minute;         /* calls per API key and minute; 0: none */
    int64_t tenant_cpu_seconds_per_day;  /* rolling day; 0: none */
    int64_t tenant_wall_seconds_per_day; /* rolling day; 0: none */
    int64_t max_connections_per_ip;
    int64_t http_header_timeout_ms; /* absolute deadline for a request head (slowloris) */
    int64_t http_body_min_rate;     /* bytes/s a request body must keep up; 0: no deadline */
    char *master_key_file;
    char *previous_master_key_files; /* comma-separated; NULL when unset */
    bool webhook_allow_private;
    int64_t webhook_concurrency;        /* deliveries in flight, this process */
    int64_t webhook_tenant_concurrency; /* one tenant's deliveries in flight, all processes */
    int64_t webhook_max_attempts;
    char *public_url; /* links in notifications; NULL: http://listen_host:listen_port */
    char *smtp_url;   /* e-mail notifications; NULL: none */
    char *smtp_from;
    int64_t drain_seconds;         /* SIGTERM: running sandboxes get this long to finish */
    int64_t mcp_hold_seconds;      /* MCP tools/call of a held tool: wait this long (api/mcp.c) */
    int64_t queue_seconds;         /* a call waits this long for a sandbox slot (server/slotq.h) */
    int64_t sse_heartbeat_seconds; /* event streams' keep-alive comment (server/events.h) */
    /* the console (console/session.h) */
    int64_t session_idle_seconds;
    int64_t session_max_seconds;
    int cookie_secure; /* 1, 0, or -1 (unset: Secure unless the listener is loopback) */
    int64_t signin_max_failures;
    int64_t signin_max_source_failures;
    int64_t signin_window_seconds;
    /* the launcher (sandbox/sandbox.h struct tc_launcher_options) */
    int64_t pool;            /* shells kept ready */
    int64_t pool_max;        /* ... grown by bursts up to this many */
    int64_t warm;            /* warm sandboxes at most */
    int64_t warm_per_tenant; /* of them, one tenant's at most */
    char *uid_registry;      /* lock files of the host uid ranges */
    char *gvisor_platform;   /* "ptrace" or "kvm" */
    char *microvm_boot;      /* "kaslr" or "fast" (sandbox.h, microvm_fast) */
    char *egress_ca_file;    /* extra upstream CAs for the egress proxy's TLS, or NULL */
    char *init_path;         /* toolcage-init; NULL: found next to the binary */
    bool no_cgroup;          /* tests of the rlimit fallback */
    bool no_seccomp_notify;  /* tests of the kill-only filter */
};

/* Fill cfg from the environment. On a bad value returns -EINVAL and sets *ret_error
 * to one line naming the variable (caller frees). */
int tc_config_load(struct tc_config *cfg, char **ret_error);
void tc_config_free(struct tc_config *cfg);
/* The table, one variable per entry ("NAME (default: D)" then its help, indented), for
 * --help; the README's table lists the same names and defaults (checked by a test). */
void tc_config_print_help(FILE *f);
