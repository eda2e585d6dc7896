/* Placeholder until this subcommand lands (issue tracker). */
#include <stdio.h>

#include "commands.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fastclock bench: not built yet\n");
    return 2;
}
