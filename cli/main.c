/* fastclock: explain this machine's clocks, measure them, run programs on
 * fastclock.  Dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "fastclock.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fastclock <command> [options]\n"
            "\n"
            "commands:\n"
            "  doctor [--json] [--quick]        explain this machine's clocks, measure them, say what to change\n"
            "  bench  [--json|--csv] [--threads LIST] [--seconds S] [--svg FILE]\n"
            "                                   measure every way to read the time, side by side\n"
            "  run    [--mode M] -- CMD [ARGS]  run a program with fastclock preloaded\n"
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
    if (strcmp(cmd, "doctor") == 0)
        return cmd_doctor(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("fastclock %s\n", fastclock_version());
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "fastclock: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
