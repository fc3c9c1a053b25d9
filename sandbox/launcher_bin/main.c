/* toolcage-launcher: the launcher on its own (sandbox/launcher.c), the program the server and
 * `toolcage exec` start for their sandboxes. The same code as `toolcage launcher`, linked with
 * only the libraries it uses (jansson, libseccomp, libsodium, OpenSSL: 8 shared objects
 * instead of 50), so that starting it costs ~4 ms instead of ~18 (the dynamic loader's symbol
 * lookups and the mappings of libpq's, libcurl's and libarchive's dependencies), and none of
 * the server's libraries is in the process that forks every sandbox. Installed next to
 * toolcage-init (libexec/toolcage/); sandbox/client.c finds it there, and falls back to
 * `toolcage launcher` when it is absent. */
#include <string.h>

#include "sandbox/sandbox.h"

int main(int argc, char **argv)
{
    /* started as `toolcage-launcher launcher --fd ...`, the argv `toolcage launcher` gets:
     * tc_launcher_main keeps its argv[0] and blanks the rest, so the process shows
     * "toolcage launcher" as the other one does */
    if (argc > 1 && strcmp(argv[1], "launcher") == 0)
        return tc_launcher_main(argc - 1, argv + 1);
    return tc_launcher_main(argc, argv);
}
