/* Placeholder until this subcommand lands (issue tracker). */
#include <stdio.h>

#include "commands.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fastclock run: not built yet\n");
    return 2;
}
