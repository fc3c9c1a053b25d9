/* libFuzzer target: toolcage-init's configuration reader (sandbox/init/init.c load_cfg). The
 * blob comes from the launcher, but PID 1 must refuse a malformed one, never read past it.
 * Input: the blob itself, served at fd TC_INIT_FD_CFG from a memfd as init sees it.
 * init.c is included so that its static reader is tested as built (its main is renamed). */
#include <sys/mman.h>

#define main toolcage_init_main
#include "sandbox/init/init.c"
#undef main

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("tc-init-cfg", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    if (dup2(fd, TC_INIT_FD_CFG) < 0)
        abort();
    close(fd);
    struct cfg c;
    memset(&c, 0, sizeof(c));
    if (load_cfg(&c) == 0) {
        /* everything it accepted lies inside the blob and is NUL-terminated */
        const char *lo = (const char *)c.h, *hi = lo + c.h->size;
        for (char **a = c.argv; *a; a++)
            if (*a < lo || *a >= hi || strnlen(*a, (size_t)(hi - *a)) == (size_t)(hi - *a))
                abort();
        for (size_t i = 0; i < c.n_secrets; i++)
            if ((const char *)c.secrets[i].data < lo ||
                (const char *)c.secrets[i].data + c.secrets[i].len > hi)
                abort();
        if ((const char *)c.bpf.filter < lo || (const char *)(c.bpf.filter + c.bpf.len) > hi)
            abort();
    }
    close(TC_INIT_FD_CFG); /* load_cfg closes it only on success */
    free((void *)c.h);
    free(c.argv);
    free(c.envp);
    free(c.mounts);
    free(c.binds);
    free(c.links);
    free(c.link_targets);
    free(c.secrets);
    return 0;
}
