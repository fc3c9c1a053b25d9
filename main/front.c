/* toolcage: the command users run. It is lean: linked with only what `exec`, `policy check`
 * and `version` use (no libpq, libmicrohttpd, libcurl, libarchive: 9 shared objects instead
 * of 50), so a one-shot `toolcage exec` does not pay ~15 ms of dynamic loading for libraries
 * it never calls. Every other command (serve, migrate, keys...) is exec'ed, argv unchanged,
 * as toolcage-server: the same commands linked with everything, found beside this binary
 * (or in ../libexec/toolcage/) and used only if root's (or ours) and writable by no one
 * else (tc_find_trusted_program). `launcher` (the fallback when toolcage-launcher is not
 * installed, sandbox/client.c) is exec'ed too: this binary has no egress proxy, so no
 * OpenSSL (sandbox/egress.h); the launcher `exec` forks for a tool without network needs
 * neither. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "main/cli.h"
#include "sandbox/sandbox.h"

extern char **environ;

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} here[] = {
    {"exec", tc_cmd_exec},
    {"policy", tc_cmd_policy},
    {"version", tc_cmd_version},
};

int main(int argc, char **argv)
{
    int rc = tc_cli_begin(argc, argv);
    if (rc >= 0)
        return rc;
    for (size_t i = 0; i < sizeof(here) / sizeof(here[0]); i++)
        if (strcmp(argv[1], here[i].name) == 0)
            return here[i].run(argc - 1, argv + 1);
    /* `launcher` too: this binary has no egress proxy (sandbox/egress.h); it is the launcher
     * only when sandbox/client.c found no toolcage-launcher, and then toolcage-server is */
    bool known = strcmp(argv[1], "launcher") == 0;
    for (size_t i = 0; i < tc_cli_n_commands && !known; i++)
        known = strcmp(argv[1], tc_cli_commands[i].name) == 0;
    if (!known) {
        fprintf(stderr, "toolcage: unknown command '%s'\n\n", argv[1]);
        tc_cli_usage(stderr);
        return 2;
    }
    char path[4096];
    int fd = tc_find_trusted_program("toolcage-server", path, sizeof(path));
    if (fd >= 0) {
        execveat(fd, "", argv, environ, AT_EMPTY_PATH);
        fd = -errno;
    }
    fprintf(stderr, "toolcage: %s runs in toolcage-server, which %s (%s)\n", argv[1],
            fd == -EPERM ? "others than root could have written" : "cannot be run",
            fd == -EPERM ? path : strerror(-fd));
    return 125;
}
