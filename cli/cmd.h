/* Subcommands of the airlock binary. Each takes the arguments after its own
 * name (argv[0] is the subcommand name) and returns the process exit
 * status. Exit statuses: 0 success, 1 a denial or an invalid policy, 2 a
 * usage error; `run` passes on CMD's status (docs/cli.md). */
#ifndef AIRLOCK_CLI_CMD_H
#define AIRLOCK_CLI_CMD_H

#define EXIT_USAGE 2

int cmd_policy(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_proxy(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_selftest(int argc, char **argv);
int cmd_diff(int argc, char **argv);

#endif
