/* airlock: run a command in a sandbox whose only way to the network is an
 * allowlist. This file only dispatches to the subcommands in cmd_*.c. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "cli/cmd.h"
#include "common/log.h"
#include "common/util.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "run", cmd_run, "run a command in a sandbox under a policy" },
	{ "proxy", cmd_proxy, "run the allowlist proxy alone (explicit mode)" },
	{ "policy", cmd_policy, "check a policy, or test destinations against it" },
	{ "log", cmd_log, "review egress logs: show, summary, suggest, replay, verify" },
	{ "diff", cmd_diff, "list what a kept overlay layer (run --overlay-keep) changed" },
	{ "selftest", cmd_selftest, "check that this machine can enforce a sandbox" },
};

/* libevent's own messages, as airlock's lines (never its bare "[warn]"). */
static void
libevent_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_warnx("libevent: %s", msg);
	else
		log_debug("libevent: %s", msg);
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock COMMAND [ARGS...]\n"
	        "       airlock run -p POLICY [OPTIONS] -- CMD [ARGS...]\n"
	        "\n"
	        "commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(out,
	        "\n"
	        "`airlock COMMAND --help` describes each command.\n"
	        "  -h, --help      this text\n"
	        "  -V, --version   print the version\n");
}

int
main(int argc, char **argv)
{
	clock_mark_start();
	event_set_log_callback(libevent_log);
	/* A peer closing a socket must never kill the supervisor. */
	signal(SIGPIPE, SIG_IGN);

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		printf("airlock %s\n", AIRLOCK_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "airlock: unknown command '%s'; see 'airlock --help'\n", argv[1]);
	return EXIT_USAGE;
}
