#include "kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int fc_read_text(const char *root, const char *path, char *buf, size_t size)
{
    char full[512];
    size_t rl = root ? strlen(root) : 0, pl = strlen(path);
    if (size == 0)
        return -EINVAL;
    buf[0] = 0;
    if (rl + pl + 1 > sizeof full)
        return -ENAMETOOLONG;
    if (rl)
        memcpy(full, root, rl);
    memcpy(full + rl, path, pl + 1);

    int fd;
    do fd = open(full, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            buf[0] = 0;
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = 0;
    return (int)n;
}

void fc_clocksource_read(const char *root, struct fc_clocksource_info *cs)
{
    int r;
    memset(cs, 0, sizeof *cs);
    r = fc_read_text(root, FC_CLOCKSOURCE_DIR "/current_clocksource", cs->current, sizeof cs->current);
    cs->current_errno = r < 0 ? -r : (r == 0 ? ENODATA : 0);
    r = fc_read_text(root, FC_CLOCKSOURCE_DIR "/available_clocksource", cs->available, sizeof cs->available);
    cs->available_errno = r < 0 ? -r : (r == 0 ? ENODATA : 0);
}

int fc_word_in_list(const char *list, const char *word)
{
    size_t wl = strlen(word);
    const char *p = list;
    if (!wl)
        return 0;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        const char *s = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
        if ((size_t)(p - s) == wl && memcmp(s, word, wl) == 0)
            return 1;
    }
    return 0;
}

int fc_cmdline_param(const char *cmdline, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    const char *p = cmdline;
    int found = 0;
    if (size)
        out[0] = 0;
    while (*p) {
        while (*p == ' ' || *p == '\n') p++;
        const char *s = p;
        while (*p && *p != ' ' && *p != '\n') p++;
        /* Arguments after "--" belong to init, not to the kernel. */
        if (p - s == 2 && s[0] == '-' && s[1] == '-')
            break;
        if ((size_t)(p - s) > nl && memcmp(s, name, nl) == 0 && s[nl] == '=') {
            size_t vl = (size_t)(p - s) - nl - 1;
            if (size) {
                if (vl >= size) vl = size - 1;
                memcpy(out, s + nl + 1, vl);
                out[vl] = 0;
            }
            found = 1;
        }
    }
    return found;
}

const char *fc_errno_text(int e)
{
    switch (e) {
    case EACCES: return "permission denied";
    case EINVAL: return "invalid argument";
    case EPERM: return "operation not permitted";
    case ENOENT: return "no such file";
    case ENOTDIR: return "not a directory";
    case ENODATA: return "empty";
    case EIO: return "input/output error";
    case ENAMETOOLONG: return "path too long";
    case EMFILE: case ENFILE: return "too many open files";
    case ENOMEM: return "out of memory";
    case EISDIR: return "is a directory";
    default: return "unreadable";
    }
}
