/*
 * fastclock run: run a program with libfastclock-preload.so preloaded.
 *
 * Sets the environment and execs the program, so its exit status and any
 * signal that ends it are the command's own.  Exit status of run itself,
 * as env(1), nice(1) and timeout(1) do it: 125 when run cannot start the
 * program (usage, shim not found), 126 when COMMAND cannot be executed,
 * 127 when it does not exist.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "commands.h"
#include "mode.h" /* fc_env_word: FASTCLOCK_* words as the library reads them */
#include "util.h"

#define SHIM_NAME "libfastclock-preload.so"
#define EXIT_RUN_FAILED 125
#define EXIT_CANNOT_EXECUTE 126
#define EXIT_NOT_FOUND 127

#ifndef FASTCLOCK_BIN_TO_LIB
#define FASTCLOCK_BIN_TO_LIB "../lib"
#endif

static void usage(FILE *f)
{
    /* The install's library directory first, then ../lib and ../lib64 (once each). */
    const char *where = strcmp(FASTCLOCK_BIN_TO_LIB, "../lib") == 0 ? "../lib/, then ../lib64/"
                        : strcmp(FASTCLOCK_BIN_TO_LIB, "../lib64") == 0
                            ? "../lib64/, then ../lib/"
                            : FASTCLOCK_BIN_TO_LIB "/, then ../lib/, then ../lib64/";
    fprintf(f,
            "usage: fastclock run [options] [--] COMMAND [ARGS...]\n"
            "\n"
            "Runs COMMAND with " SHIM_NAME " preloaded (appended to LD_PRELOAD), so its\n"
            "clock_gettime, gettimeofday and timespec_get read the TSC through fastclock\n"
            "(JVMs: JDK 17 and later).  Children inherit it.  The exit status is COMMAND's.\n"
            "\n"
            "options:\n"
            "  --mode auto|tsc|percpu|system sets FASTCLOCK_MODE (system: the kernel answers;\n"
            "                                percpu may be written tsc-percpu)\n"
            "  --calibrator auto|thread|lazy sets FASTCLOCK_CALIBRATOR (default for the shim:\n"
            "                                lazy, no thread; thread: coarse clocks from memory)\n"
            "  --unordered                   sets FASTCLOCK_UNORDERED=1: no counter fence, about\n"
            "                                twice as fast, but monotonic within a thread only:\n"
            "                                a read after another thread's can be ~1.5 us earlier;\n"
            "                                not for JVMs or programs that compare threads' times\n"
            "  -h, --help                    this text\n"
            "\n"
            "environment: FASTCLOCK_PRELOAD=/path/to/" SHIM_NAME " overrides where the\n"
            "shim is looked for (by default %s\n"
            "relative to this program).\n"
            "\n"
            "exit status: COMMAND's; 125 if run itself fails, 126 if COMMAND cannot be\n"
            "executed, 127 if it is not found.\n",
            where);
}

static int one_of(const char *v, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(v, *allowed) == 0)
            return 1;
    return 0;
}

/* "one of: a b c", for an option whose value must be one of `allowed`. */
static void choices(char *buf, size_t size, const char *const *allowed)
{
    struct sbuf b;
    sb_init(&b, buf, size);
    sb_printf(&b, "one of:");
    for (const char *const *p = allowed; *p; p++)
        sb_printf(&b, " %s", *p);
}

static int readable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* The shim: $FASTCLOCK_PRELOAD, or next to this executable.  Absolute,
 * because the program may change directory before it execs a child. */
static int find_shim(char out[PATH_MAX])
{
    const char *env = getenv("FASTCLOCK_PRELOAD");
    if (env && *env) {
        if (!readable_file(env) || !realpath(env, out)) {
            fprintf(stderr, "fastclock run: FASTCLOCK_PRELOAD=%s: %s\n", env,
                    readable_file(env) ? strerror(errno) : "not a readable file");
            return -1;
        }
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "fastclock run: cannot find this program's directory (/proc/self/exe: %s); "
                        "set FASTCLOCK_PRELOAD=/path/to/" SHIM_NAME "\n", strerror(errno));
        return -1;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    const char *rel[] = {FASTCLOCK_BIN_TO_LIB, "../lib", "../lib64"};
    char tried[3 * PATH_MAX] = "";
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        if (i > 0 && strcmp(rel[i], rel[0]) == 0)
            continue; /* the install's directory is one of the two */
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%s/%s/%s", self, rel[i], SHIM_NAME) >= (int)sizeof cand)
            continue;
        if (readable_file(cand) && realpath(cand, out))
            return 0;
        if (!strstr(tried, cand)) {
            strncat(tried, tried[0] ? ", " : "", sizeof tried - strlen(tried) - 1);
            strncat(tried, cand, sizeof tried - strlen(tried) - 1);
        }
    }
    fprintf(stderr, "fastclock run: cannot find " SHIM_NAME " (looked for %s); "
                    "set FASTCLOCK_PRELOAD=/path/to/" SHIM_NAME "\n", tried);
    return -1;
}

/* LD_PRELOAD with this shim in it, malloc'd (NULL: out of memory): an entry
 * naming a shim (another copy, another version: it would interpose first)
 * becomes this one where it stands, later ones go, and without one the
 * shim is appended.  Says on stderr which copy it replaced. */
static char *preload_with_shim(const char *list, const char *shim)
{
    size_t shim_len = strlen(shim);
    char *out = malloc(strlen(list) + 1 + shim_len + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    int placed = 0;
    for (const char *p = list; *p;) {
        p += strspn(p, " :");
        size_t len = strcspn(p, " :");
        const char *entry = p;
        p += len;
        if (!len)
            continue;
        if (preload_entry_is_shim(entry, len)) {
            int same = len == shim_len && strncmp(entry, shim, len) == 0;
            if (!same && len < PATH_MAX) { /* the same file by another name: a symlink, /lib for /usr/lib */
                char path[PATH_MAX];
                struct stat a, b;
                memcpy(path, entry, len);
                path[len] = 0;
                same = stat(path, &a) == 0 && stat(shim, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
            }
            /* A bare name (the loader's search path) or one with $LIB or $PLATFORM
             * in it names a file stat cannot find from here: replaced, unremarked. */
            int comparable = memchr(entry, '/', len) && !memchr(entry, '$', len);
            if (!same && comparable)
                fprintf(stderr, "fastclock run: LD_PRELOAD names another copy of the shim (%.*s): %s\n", (int)len,
                        entry, placed ? "dropped" : "replaced by this one");
            if (placed)
                continue;
            entry = shim;
            len = shim_len;
            placed = 1;
        }
        if (n)
            out[n++] = ':';
        memcpy(out + n, entry, len);
        n += len;
    }
    if (!placed) {
        if (n)
            out[n++] = ':';
        memcpy(out + n, shim, shim_len);
        n += shim_len;
    }
    out[n] = 0;
    return out;
}

/* Where execvp would find `cmd`, for the warnings below (NULL if nowhere). */
static char *resolve_command(const char *cmd, char *buf, size_t size)
{
    if (strchr(cmd, '/'))
        return snprintf(buf, size, "%s", cmd) < (int)size ? buf : NULL;
    const char *path = getenv("PATH");
    char dflt[256];
    if (!path) { /* execvp's own default, so that the warnings name the file it runs */
        size_t n = confstr(_CS_PATH, dflt, sizeof dflt);
        path = n > 0 && n <= sizeof dflt ? dflt : "/bin:/usr/bin";
    }
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (snprintf(buf, size, "%.*s%s%s", (int)len, p, len ? "/" : "", cmd) < (int)size &&
            access(buf, X_OK) == 0) {
            struct stat st;
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
                return buf;
        }
        if (!end)
            return NULL;
        p = end;
    }
}

/* The ELF machine this build's shim is for (64-bit builds; elsewhere no
 * file is called foreign). */
#if defined(__x86_64__) && !defined(__ILP32__)
#define SHIM_MACHINE EM_X86_64
#define SHIM_MACHINE_NAME "x86-64"
#elif defined(__aarch64__) && !defined(__ILP32__)
#define SHIM_MACHINE EM_AARCH64
#define SHIM_MACHINE_NAME "arm64"
#else
#define SHIM_MACHINE EM_NONE
#define SHIM_MACHINE_NAME "?"
#endif

enum elf_kind {
    ELF_NONE,    /* not an ELF executable or library (a script) */
    ELF_UNREADABLE, /* cannot be opened for reading (execute-only, mode 4711): may be either */
    ELF_FOREIGN, /* 32-bit, or for another machine or byte order (a binary run
                    through binfmt_misc and qemu): the loader cannot take the
                    shim into it, and skips LD_PRELOAD with an error of its own */
    ELF_STATIC,  /* no interpreter: linked statically */
    ELF_DYNAMIC,
};

/* What the loader makes of the file, from one read of its header. */
static enum elf_kind elf_kind(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ELF_UNREADABLE;
    /* e_type and e_machine follow e_ident in both classes: a header cut
     * short still says that much (the rest reads as zeros). */
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof eh);
    ssize_t got = pread(fd, &eh, sizeof eh, 0);
    enum elf_kind kind = ELF_NONE;
    uint64_t phoff = 0;
    unsigned phnum = 0, phsize = 0;
    if (got < EI_NIDENT + 4 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        kind = ELF_NONE;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    } else if (SHIM_MACHINE != EM_NONE && eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        kind = ELF_FOREIGN; /* its type and machine read in another byte order */
#endif
    } else if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
        kind = ELF_NONE;
    } else if (SHIM_MACHINE != EM_NONE && (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != SHIM_MACHINE)) {
        kind = ELF_FOREIGN;
    } else if (got == (ssize_t)sizeof eh && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
               eh.e_phentsize == sizeof(Elf64_Phdr)) {
        phoff = eh.e_phoff, phnum = eh.e_phnum, phsize = sizeof(Elf64_Phdr);
    } else if (got >= (ssize_t)sizeof(Elf32_Ehdr) && eh.e_ident[EI_CLASS] == ELFCLASS32) {
        Elf32_Ehdr e32;
        memcpy(&e32, &eh, sizeof e32);
        if (e32.e_phentsize == sizeof(Elf32_Phdr))
            phoff = e32.e_phoff, phnum = e32.e_phnum, phsize = sizeof(Elf32_Phdr);
    }
    if (phsize) {
        kind = ELF_STATIC;
        for (unsigned i = 0; i < phnum; i++) {
            uint32_t type; /* p_type leads both Phdr layouts */
            if (pread(fd, &type, sizeof type, (off_t)(phoff + (uint64_t)i * phsize)) != (ssize_t)sizeof type ||
                type == PT_INTERP) {
                kind = ELF_DYNAMIC;
                break;
            }
        }
    }
    close(fd);
    return kind;
}

/* 1 where the kernel would run the file in secure mode (AT_SECURE) for its
 * capabilities, so that the loader ignores LD_PRELOAD: as
 * security/commoncap.c has it, for a caller whose real uid is not root, a
 * file whose effective flag is set, or whose capabilities leave the new
 * permitted set non-empty ((fP & bounding) | (fI & pI); a file with
 * capabilities clears the ambient set).  Root gains nothing (SECBIT_NOROOT
 * aside). */
static int secure_for_capabilities(const char *path)
{
    if (getuid() == 0)
        return 0;
    struct vfs_ns_cap_data fc;
    ssize_t n = getxattr(path, "security.capability", &fc, sizeof fc);
    if (n < (ssize_t)XATTR_CAPS_SZ_1)
        return 0;
    uint32_t magic = le32toh(fc.magic_etc);
    uint32_t revision = magic & VFS_CAP_REVISION_MASK;
    uint64_t fp = le32toh(fc.data[0].permitted), fi = le32toh(fc.data[0].inheritable);
    if ((revision == VFS_CAP_REVISION_2 || revision == VFS_CAP_REVISION_3) && n >= (ssize_t)XATTR_CAPS_SZ_2) {
        fp |= (uint64_t)le32toh(fc.data[1].permitted) << 32;
        fi |= (uint64_t)le32toh(fc.data[1].inheritable) << 32;
    } else if (revision != VFS_CAP_REVISION_1) {
        return 0;
    }
    if (magic & VFS_CAP_FLAGS_EFFECTIVE)
        return 1;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    uint64_t pi = 0;
    if (syscall(SYS_capget, &h, d) == 0)
        pi = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
    uint64_t bounding = 0;
    for (int cap = 0; cap < 64; cap++) {
        int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (r < 0)
            break; /* past the last capability this kernel knows */
        if (r > 0)
            bounding |= (uint64_t)1 << cap;
    }
    return ((fp & bounding) | (fi & pi)) != 0;
}

/* Say when the preload cannot take effect; the program still runs. */
static void warn_if_not_preloadable(const char *cmd)
{
    char path[PATH_MAX];
    struct stat st;
    if (!resolve_command(cmd, path, sizeof path) || stat(path, &st) != 0)
        return;
    /* On a nosuid mount neither the bits nor file capabilities take effect. */
    struct statvfs fs;
    int nosuid = statvfs(path, &fs) == 0 && (fs.f_flag & ST_NOSUID);
    /* Under no_new_privs (systemd's NoNewPrivileges=, Docker's
     * no-new-privileges) an exec gains nothing, and a script's bits are
     * ignored: no secure mode either way. */
    int gains = !nosuid && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1;
    enum elf_kind kind = elf_kind(path);
    /* Secure mode where the exec changes the effective id, or makes it
     * differ from the real one (the kernel's test). */
    if (gains && kind != ELF_NONE && /* a script's bits are ignored; an unreadable file may be a program */
        (((st.st_mode & S_ISUID) && (st.st_uid != geteuid() || st.st_uid != getuid())) ||
         ((st.st_mode & S_ISGID) && (st.st_gid != getegid() || st.st_gid != getgid()))))
        fprintf(stderr, "fastclock run: warning: %s is set-user/group-ID; the dynamic loader ignores "
                        "LD_PRELOAD for it, so it runs on the kernel's clocks\n", path);
    else if (gains && secure_for_capabilities(path))
        fprintf(stderr, "fastclock run: warning: %s has file capabilities; the dynamic loader ignores "
                        "LD_PRELOAD for it (secure mode), so it runs on the kernel's clocks\n", path);
    else if (kind == ELF_FOREIGN)
        fprintf(stderr, "fastclock run: warning: %s is not a 64-bit " SHIM_MACHINE_NAME " program; the shim "
                        "cannot be loaded into it, so it runs on the kernel's clocks\n", path);
    else if (kind == ELF_STATIC)
        fprintf(stderr, "fastclock run: warning: %s is statically linked; LD_PRELOAD has no effect "
                        "on it, so it runs on the kernel's clocks\n", path);
}

int cmd_run(int argc, char **argv)
{
    /* FASTCLOCK_MODE's own words: tsc-percpu too, the mode's name in status. */
    static const char *const modes[] = {"auto", "tsc", "percpu", "tsc-percpu", "system", NULL};
    static const char *const calibrators[] = {"auto", "thread", "lazy", NULL};
    const char *mode = NULL, *calibrator = NULL;
    int unordered = 0;
    enum { OPT_MODE = 256, OPT_CALIBRATOR, OPT_UNORDERED };
    static const struct option opts[] = {
        {"mode", required_argument, NULL, OPT_MODE},
        {"calibrator", required_argument, NULL, OPT_CALIBRATOR},
        {"unordered", no_argument, NULL, OPT_UNORDERED},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    char mode_needs[96], calibrator_needs[64];
    choices(mode_needs, sizeof mode_needs, modes);
    choices(calibrator_needs, sizeof calibrator_needs, calibrators);
    const char *const needs[] = {mode_needs, calibrator_needs, NULL, NULL};
    struct opt_parser p = {.opts = opts, .shorts = "h", .needs = needs};
    const char *val;
    for (int c; (c = opt_next(&p, argc, argv, &val)) != -1;) {
        switch (c) {
        case 'h':
            usage(stdout);
            return stdout_done("fastclock run", 0, EXIT_RUN_FAILED);
        case OPT_UNORDERED:
            unordered = 1;
            break;
        case OPT_MODE:
        case OPT_CALIBRATOR: {
            int is_mode = c == OPT_MODE;
            if (!one_of(val, is_mode ? modes : calibrators)) {
                fprintf(stderr, "fastclock run: --%s needs %s (got '%s')\n", is_mode ? "mode" : "calibrator",
                        needs[is_mode ? 0 : 1], val);
                return EXIT_RUN_FAILED;
            }
            *(is_mode ? &mode : &calibrator) = val;
            break;
        }
        default:
            fprintf(stderr, "fastclock run: %s%s\n\n", p.err, p.unknown ? " (put the command after --)" : "");
            usage(stderr);
            return EXIT_RUN_FAILED;
        }
    }
    int i = optind;
    if (i >= argc) {
        fprintf(stderr, "fastclock run: no command given\n\n");
        usage(stderr);
        return EXIT_RUN_FAILED;
    }
    char **command = argv + i;
    if (!command[0][0]) {
        fprintf(stderr, "fastclock run: the command is an empty word\n\n");
        usage(stderr);
        return EXIT_RUN_FAILED;
    }
    /* What COMMAND would inherit where no option overrides it: a word the
     * library would ignore (and run on auto) is refused here, as the
     * option's would be. */
    static const char *const inherited[][2] = {{"FASTCLOCK_MODE", "mode"}, {"FASTCLOCK_CALIBRATOR", "calibrator"}};
    for (size_t k = 0; k < sizeof inherited / sizeof inherited[0]; k++) {
        int is_mode = k == 0;
        const char *v = getenv(inherited[k][0]);
        if ((is_mode ? mode : calibrator) || !v)
            continue;
        int known = 0;
        for (const char *const *w = is_mode ? modes : calibrators; *w; w++)
            known |= fc_env_word(v, *w);
        if (!known && !fc_env_word(v, "")) {
            char shown[48];
            fprintf(stderr, "fastclock run: %s=%s in the environment: it needs %s (or use --%s)\n",
                    inherited[k][0], fc_env_echo(v, shown, sizeof shown), needs[is_mode ? 0 : 1], inherited[k][1]);
            return EXIT_RUN_FAILED;
        }
    }
    /* Likewise FASTCLOCK_UNORDERED, without --unordered: the words the
     * library reads (any other it reports and ignores, running ordered). */
    const char *u = getenv("FASTCLOCK_UNORDERED");
    if (!unordered && u) {
        if (fc_env_flag(u) < 0) {
            char shown[48];
            fprintf(stderr, "fastclock run: FASTCLOCK_UNORDERED=%s in the environment: it needs 0 or 1 (also "
                            "no/false, yes/true; or use --unordered)\n",
                    fc_env_echo(u, shown, sizeof shown));
            return EXIT_RUN_FAILED;
        }
    }

    char shim[PATH_MAX];
    if (find_shim(shim) != 0)
        return EXIT_RUN_FAILED;
    if (strpbrk(shim, " :")) {
        fprintf(stderr, "fastclock run: the shim's path '%s' contains a space or a colon, which "
                        "LD_PRELOAD cannot express; install it elsewhere or copy it\n", shim);
        return EXIT_RUN_FAILED;
    }

    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old) {
        setenv("LD_PRELOAD", shim, 1);
    } else {
        char *joined = preload_with_shim(old, shim);
        if (!joined) {
            fprintf(stderr, "fastclock run: out of memory\n");
            return EXIT_RUN_FAILED;
        }
        setenv("LD_PRELOAD", joined, 1);
        free(joined);
    }
    if (mode)
        setenv("FASTCLOCK_MODE", mode, 1);
    if (calibrator)
        setenv("FASTCLOCK_CALIBRATOR", calibrator, 1);
    if (unordered)
        setenv("FASTCLOCK_UNORDERED", "1", 1);

    warn_if_not_preloadable(command[0]);
    fflush(NULL);
    execvp(command[0], command);
    int err = errno;
    char found[PATH_MAX];
    if (err == ENOENT && resolve_command(command[0], found, sizeof found) && access(found, F_OK) == 0) {
        /* The file is there: its #! interpreter or its ELF loader is not. */
        fprintf(stderr, "fastclock run: %s: cannot execute: its interpreter or loader was not found\n",
                command[0]);
        return EXIT_CANNOT_EXECUTE;
    }
    if (err == ENOENT || err == ENOTDIR) {
        if (strchr(command[0], '/'))
            fprintf(stderr, "fastclock run: %s: %s\n", command[0], strerror(err));
        else
            fprintf(stderr, "fastclock run: %s: command not found\n", command[0]);
        return EXIT_NOT_FOUND;
    }
    fprintf(stderr, "fastclock run: %s: %s\n", command[0], strerror(err));
    return EXIT_CANNOT_EXECUTE;
}
