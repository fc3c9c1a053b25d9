/* Writes a configuration blob exactly as the launcher does (tc_child_config) for a spec with
 * every section used (argv, env, mounts, secret files), as a seed for fuzz_initcfg. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/child.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

int main(int argc, char **argv)
{
    const char *text =
        "{\"id\":\"seed\",\"backend\":\"native\",\"argv\":[\"/usr/bin/python3\",\"-c\",\"pass\"],"
        "\"env\":[\"PATH=/usr/bin:/bin\",\"HOME=/workspace\"],\"cwd\":\"/workspace\","
        "\"mounts\":[{\"source\":\"/usr/share\",\"target\":\"/opt/share\",\"writable\":false}],"
        "\"secret_files\":[{\"name\":\"token\",\"content_b64\":\"czNjcjN0\"}],"
        "\"limits\":{\"wall_ms\":1000,\"cpu_ms\":1000,\"memory_bytes\":67108864,\"pids\":16,"
        "\"file_size_bytes\":1048576,\"nofile\":64,\"output_bytes\":65536,"
        "\"workspace_bytes\":1048576,\"tmp_bytes\":1048576}}";
    json_t *j = json_loads(text, 0, NULL);
    struct tc_spec spec;
    struct tc_seccomp_prog sc = {0};
    char err[256];
    if (argc != 2 || !j || tc_spec_parse(j, &spec, err, sizeof(err)) < 0 ||
        tc_seccomp_build(false, &sc) < 0)
        return 1;
    int fd =
        tc_child_config(&spec, &sc, "ws/seed", NULL, TC_INIT_F_RLIMIT_AS | TC_INIT_F_RLIMIT_NPROC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return 1;
    char *buf = malloc((size_t)st.st_size);
    int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!buf || out < 0 || pread(fd, buf, (size_t)st.st_size, 0) != st.st_size ||
        write(out, buf, (size_t)st.st_size) != st.st_size)
        return 1;
    return 0;
}
