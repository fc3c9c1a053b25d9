/* The microvm guest's kernel, unpacked once for the fast boot (microvm.h, tc_vm_kernel_unpack).
 *
 * A bzImage is a small real-mode setup, a decompressor and the kernel ELF compressed (boot
 * protocol 2.08+: payload_offset/payload_length in the setup header). Under TCG the decompressor
 * is emulated: unpacking Debian's 8 MiB XZ payload to 63 MiB takes ~6 s of every cold boot.
 * Unpacked here (natively, ~1 s, once per kernel) the ELF boots through its PVH entry (a Xen
 * ELF note qemu looks for), skipping the decompressor. Everything read is bounds-checked: /boot
 * is root's, but a truncated or foreign file must fail here, not load garbage into a guest. */
#include "sandbox/microvm.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define BZIMAGE_MAX              (64u << 20)  /* Debian's are ~8 MiB */
#define KERNEL_MAX               (512u << 20) /* the unpacked ELF: Debian's is 63 MiB */
#define XEN_ELFNOTE_PHYS32_ENTRY 18

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int fail(char *why, size_t whylen, int err, const char *what)
{
    snprintf(why, whylen, "%s", what);
    return err;
}

/* An x86-64 ELF executable with a PVH entry note, all within len. */
static bool has_pvh_entry(const unsigned char *b, size_t len)
{
    Elf64_Ehdr eh;
    if (len < sizeof(eh))
        return false;
    memcpy(&eh, b, sizeof(eh));
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > len ||
        (size_t)eh.e_phnum > (len - eh.e_phoff) / sizeof(Elf64_Phdr))
        return false;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, b + eh.e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type != PT_NOTE || ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
            continue;
        const unsigned char *n = b + ph.p_offset, *end = n + ph.p_filesz;
        while ((size_t)(end - n) >= 12) {
            uint32_t namesz = get32(n), descsz = get32(n + 4), type = get32(n + 8);
            size_t nsz = ((size_t)namesz + 3) & ~(size_t)3, dsz = ((size_t)descsz + 3) & ~(size_t)3;
            if (nsz > (size_t)(end - n) - 12 || dsz > (size_t)(end - n) - 12 - nsz)
                break;
            if (namesz == 4 && memcmp(n + 12, "Xen", 4) == 0 && type == XEN_ELFNOTE_PHYS32_ENTRY &&
                descsz >= 4)
                return true;
            n += 12 + nsz + dsz;
        }
    }
    return false;
}

static int read_file(const char *path, unsigned char **ret, size_t *ret_len)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (uint64_t)st.st_size > BZIMAGE_MAX) {
        close(fd);
        return -EINVAL;
    }
    unsigned char *b = malloc((size_t)st.st_size);
    size_t got = 0;
    while (b && got < (size_t)st.st_size) {
        ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!b || got != (size_t)st.st_size) {
        free(b);
        return b ? -EIO : -ENOMEM;
    }
    *ret = b;
    *ret_len = got;
    return 0;
}

#define XZ_MAGIC                                                                                   \
    "\xfd"                                                                                         \
    "7zXZ" /* (6 bytes with its NUL) */

/* Where a bzImage's compressed kernel is (head: the file's first bytes, at least 0x250 of
 * them; len: the file's size): the setup header (Documentation/arch/x86/boot.rst), "HdrS",
 * boot protocol 2.08+ for payload_offset/payload_length. *off is from the file's start. */
static int payload_at(const unsigned char *head, size_t len, size_t *off, size_t *plen, char *why,
                      size_t whylen)
{
    if (len < 0x250 || memcmp(head + 0x202, "HdrS", 4) != 0 ||
        (head[0x206] | head[0x207] << 8) < 0x0208)
        return fail(why, whylen, -EINVAL, "not a bzImage of boot protocol 2.08 or later");
    size_t setup = ((size_t)(head[0x1f1] ? head[0x1f1] : 4) + 1) * 512;
    size_t poff = get32(head + 0x248), pl = get32(head + 0x24c);
    if (setup > len || poff > len - setup || pl > len - setup - poff || pl < 6)
        return fail(why, whylen, -EINVAL, "the payload is outside the image");
    *off = setup + poff;
    *plen = pl;
    return 0;
}

int tc_vm_kernel_check(const char *bzimage, char *why, size_t whylen)
{
    unsigned char head[0x250], magic[6];
    struct stat st;
    size_t off, plen;
    int r, fd = open(bzimage, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return fail(why, whylen, -errno, "cannot read the kernel image");
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        pread(fd, head, sizeof(head), 0) != sizeof(head))
        r = fail(why, whylen, -EINVAL, "not a bzImage of boot protocol 2.08 or later");
    else if ((r = payload_at(head, (size_t)st.st_size, &off, &plen, why, whylen)) == 0 &&
             (pread(fd, magic, sizeof(magic), (off_t)off) != sizeof(magic) ||
              memcmp(magic, XZ_MAGIC, 6) != 0))
        r = fail(why, whylen, -ENOTSUP, "the payload is not XZ");
    close(fd);
    return r;
}

int tc_vm_kernel_unpack(const char *bzimage, const char *out, char *why, size_t whylen)
{
    unsigned char *img = NULL, *elf = NULL;
    size_t len = 0, elf_len = 0, cap = 64u << 20;
    char tmp[PATH_MAX];
    int r, fd = -1;

    if ((r = read_file(bzimage, &img, &len)) < 0)
        return fail(why, whylen, r, "cannot read the kernel image");
    size_t poff, plen;
    if ((r = payload_at(img, len, &poff, &plen, why, whylen)) < 0)
        goto out;
    const unsigned char *payload = img + poff;
    if (memcmp(payload, XZ_MAGIC, 6) != 0) { /* (Debian 12's; others boot compressed) */
        r = fail(why, whylen, -ENOTSUP, "the payload is not XZ");
        goto out;
    }
    /* XZ, as the kernel's own decompressor does (a single stream; its CRC is checked) */
    lzma_stream z = LZMA_STREAM_INIT;
    if (lzma_stream_decoder(&z, 256u << 20, 0) != LZMA_OK) {
        r = fail(why, whylen, -ENOMEM, "cannot start the XZ decoder");
        goto out;
    }
    z.next_in = payload;
    z.avail_in = plen;
    lzma_ret lr = (elf = malloc(cap)) ? LZMA_OK : LZMA_MEM_ERROR;
    while (lr == LZMA_OK) {
        if (elf_len == cap) {
            unsigned char *n = cap < KERNEL_MAX ? realloc(elf, cap * 2) : NULL;
            if (!n) {
                lr = LZMA_MEM_ERROR;
                break;
            }
            elf = n;
            cap *= 2;
        }
        z.next_out = elf + elf_len;
        z.avail_out = cap - elf_len;
        lr = lzma_code(&z, LZMA_FINISH);
        elf_len = cap - z.avail_out;
    }
    lzma_end(&z);
    if (lr != LZMA_STREAM_END) {
        r = fail(why, whylen, -EINVAL, "the XZ payload does not unpack");
        goto out;
    }
    if (!has_pvh_entry(elf, elf_len)) {
        r = fail(why, whylen, -ENOTSUP, "the kernel has no PVH entry (CONFIG_PVH)");
        goto out;
    }
    /* whole or not at all: written beside, then renamed over */
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", out, (int)getpid());
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0)
        r = -errno;
    else if ((r = tc_write_all(fd, elf, elf_len)) == 0 && (fsync(fd) < 0 || rename(tmp, out) < 0))
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        fail(why, whylen, r, "cannot write the unpacked kernel");
        goto out;
    }
    r = 0;
out:
    if (fd >= 0)
        close(fd);
    free(img);
    free(elf);
    return r;
}
