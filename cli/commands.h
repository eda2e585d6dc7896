/* Subcommands of the `fastclock` command.  Each returns the exit status:
 * 0 fine, 1 a finding/failure the command is about, 2 usage or internal error. */
#ifndef FASTCLOCK_CLI_COMMANDS_H
#define FASTCLOCK_CLI_COMMANDS_H

int cmd_doctor(int argc, char **argv); /* cli/doctor.c */
int cmd_bench(int argc, char **argv);  /* cli/bench.c */
int cmd_run(int argc, char **argv);    /* cli/run.c */

#endif
