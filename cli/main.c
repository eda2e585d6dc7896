/* fastclock: explain this machine's clocks, measure them, run programs on
 * fastclock.  Dispatches to one file per subcommand. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "fastclock.h"
#include "util.h"

/*
 * doctor and bench compare libc's clocks with fastclock's.  Under the
 * preload shim (LD_PRELOAD: `fastclock run -- fastclock doctor`, or a
 * container's ENV) libc's clock_gettime is the shim, and that comparison
 * would be fastclock against itself, reported as libc.  So they run again
 * without it; where it did not come from LD_PRELOAD, they say so.
 */
static void without_the_shim(char **argv)
{
    if (!dlsym(RTLD_DEFAULT, "fastclock_preload_state"))
        return;
    const char *pre = getenv("LD_PRELOAD");
    char kept[4096];
    size_t n = 0;
    int dropped = 0, too_long = 0;
    for (const char *p = pre ? pre : ""; *p;) {
        size_t len = strcspn(p, " :");
        if (len && preload_entry_is_shim(p, len)) {
            dropped = 1;
        } else if (len && n + len + 2 > sizeof kept) {
            too_long = 1; /* never drop another library the user preloads */
        } else if (len) {
            if (n)
                kept[n++] = ':';
            memcpy(kept + n, p, len);
            n += len;
        }
        p += len;
        p += *p != 0;
    }
    kept[n] = 0;
    if (!dropped || too_long) {
        fprintf(stderr, "fastclock: the preload shim is loaded%s: the libc clocks below are the shim's\n",
                too_long ? " (LD_PRELOAD too long to rewrite)" : ", not through LD_PRELOAD (/etc/ld.so.preload?)");
        return;
    }
    if (n)
        setenv("LD_PRELOAD", kept, 1);
    else
        unsetenv("LD_PRELOAD");
    fprintf(stderr, "fastclock: running again without the preload shim, whose clock_gettime would stand in "
                    "for libc's\n");
    execv("/proc/self/exe", argv);
    fprintf(stderr, "fastclock: could not run again without the preload shim (%s): the libc clocks below are "
                    "the shim's\n", strerror(errno));
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fastclock <command> [options]\n"
            "\n"
            "commands:\n"
            "  doctor [--json] [--quick]        explain this machine's clocks, measure them, say what to change\n"
            "  bench  [--json|--csv] [--threads LIST] [--seconds S] [--svg FILE]\n"
            "                                   measure every way to read the time, side by side\n"
            "  run    [--mode M] [--calibrator C] [--unordered] -- CMD [ARGS]\n"
            "                                   run a program with fastclock preloaded\n"
            "\n"
            "  fastclock <command> --help       options of a command\n"
            "  fastclock --version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "doctor") == 0 || strcmp(cmd, "bench") == 0)
        without_the_shim(argv);
    if (strcmp(cmd, "doctor") == 0)
        return cmd_doctor(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("fastclock %s\n", fastclock_version());
        return stdout_done("fastclock", 0, 2);
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return stdout_done("fastclock", 0, 2);
    }
    fprintf(stderr, "fastclock: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
