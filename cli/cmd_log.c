/* `airlock log show|summary|suggest|replay|verify FILE...`: reviewing
 * egress logs (docs/log.md, docs/audit.md). The work is in elog/review.h
 * and elog/verify.h; this file parses flags and maps results to exit
 * statuses. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "common/util.h"
#include "elog/review.h"
#include "elog/verify.h"

/* log verify: no break, but lines without a chain (older logs). */
#define EXIT_UNCHAINED 3

static void
usage_log(FILE *out)
{
	fprintf(out, "usage: airlock log show [--denied] [--host GLOB] [--task ID] [--since TIME]\n"
	             "                        [--json] FILE...\n"
	             "       airlock log summary [--json] FILE...\n"
	             "       airlock log suggest [--wildcard-min N] [--name NAME] [--include-denied] FILE... > "
	             "policy.yaml\n"
	             "       airlock log replay -p POLICY FILE...\n"
	             "       airlock log verify FILE...\n"
	             "\n"
	             "  show     one readable line per event, filtered\n"
	             "  summary  per destination and per task: attempts, verdicts, bytes, times\n"
	             "  suggest  the smallest policy that would have allowed what was attempted\n"
	             "  replay   what would change under another policy (exit 1 if anything)\n"
	             "  verify   check each run's hash chain; name the line that breaks it\n"
	             "\n"
	             "FILE is an egress log (JSON Lines, docs/log.md), or - for stdin.\n"
	             "Garbage lines are reported on stderr as FILE:LINE and skipped.\n"
	             "`airlock log COMMAND --help` describes each command.\n");
}

static void
usage_show(FILE *out)
{
	fprintf(out, "usage: airlock log show [OPTIONS] FILE...\n"
	             "\n"
	             "One line per event: time, verdict, kind, host:port, address (or DNS\n"
	             "type), bytes up/down, and the deciding rule or the reason.\n"
	             "\n"
	             "  --denied       only deny and audit-deny events\n"
	             "  --host GLOB    only events whose host (or address) matches GLOB\n"
	             "                 (shell pattern, case-insensitive: '*.pythonhosted.org')\n"
	             "  --task ID      only this task's lines\n"
	             "  --since TIME   only lines at or after TIME: RFC 3339\n"
	             "                 (2026-11-30T10:00:00Z) or back from now (90s, 10m, 2h, 7d)\n"
	             "  --json         print the selected lines unchanged (JSON Lines)\n"
	             "  --color WHEN   auto (default: on a terminal, unless NO_COLOR is set),\n"
	             "                 always, never\n"
	             "\n"
	             "Exit status: 0, 1 a file could not be read, 2 usage error.\n");
}

static void
usage_summary(FILE *out)
{
	fprintf(out, "usage: airlock log summary [--json] FILE...\n"
	             "\n"
	             "Per destination (host:port, or address:port when there is no name;\n"
	             "\"name (dns)\" for DNS queries): attempts, allowed, denied, bytes up\n"
	             "and down, first and last time. Per task: command, policy and mode,\n"
	             "exit status and duration, totals.\n"
	             "\n"
	             "  --json   one JSON object {\"destinations\": [...], \"tasks\": [...]}\n"
	             "\n"
	             "Exit status: 0, 1 a file could not be read, 2 usage error.\n");
}

static void
usage_suggest(FILE *out)
{
	fprintf(out, "usage: airlock log suggest [--wildcard-min N] [--name NAME] [--include-denied]\n"
	             "                           FILE...\n"
	             "\n"
	             "Print (schema v1 YAML) the smallest policy that would have allowed\n"
	             "what the logged tasks were allowed, or in audit mode would have been\n"
	             "refused (audit-deny); a DNS query counts as the name being needed.\n"
	             "Exact names, ports collected per name, each rule commented with its\n"
	             "counts. The log is the task's word: names only denied in enforce mode,\n"
	             "names that resolved to a guarded address, loopback names and\n"
	             "look-alikes of allowed names (one edit away, or reading the same:\n"
	             "pypl.org for pypi.org; punycode names) are listed as commented-out\n"
	             "rules with the reason, never as rules. Addresses contacted without a\n"
	             "name and guarded ranges appear only as commented-out cidr rules.\n"
	             "Each kind is said on stderr.\n"
	             "\n"
	             "  --wildcard-min N  use \"*.parent\" where at least N sibling names under\n"
	             "                    one parent were seen (default 3; 0: never)\n"
	             "  --name NAME       the policy's name (default \"suggested\")\n"
	             "  --include-denied  also make rules of names denied in enforce mode and\n"
	             "                    of look-alikes (guarded and loopback names: never)\n"
	             "\n"
	             "Exit status: 0, 1 a file could not be read, 2 usage error.\n");
}

static void
usage_replay(FILE *out)
{
	fprintf(out, "usage: airlock log replay -p POLICY FILE...\n"
	             "\n"
	             "Decide every logged event again under POLICY (a path or a preset name)\n"
	             "and list the destinations whose outcome would change: allowed before\n"
	             "and denied now, and the reverse, with counts, the old rule or reason\n"
	             "and the new one. Events are decided by their rules (as in enforce\n"
	             "mode), whatever the policy's mode.\n"
	             "\n"
	             "  -p, --policy POLICY   the candidate policy\n"
	             "\n"
	             "Exit status: 0 nothing would change, 1 something would (or a file\n"
	             "could not be read), 2 usage error or an invalid policy.\n");
}

static void
usage_verify(FILE *out)
{
	fprintf(out, "usage: airlock log verify FILE...\n"
	             "\n"
	             "Check the hash chain of every run in each FILE: each line's seq is one\n"
	             "more than the line before it of its task, and its prev is that line's\n"
	             "SHA-256, from the run's task-start on. For each FILE that breaks, one\n"
	             "line FILE:LINE: what broke (an edited, missing, inserted or reordered\n"
	             "line, a line that is not a log line, a cut last line); when none does,\n"
	             "one summary line. Chains without a task-end (a run still going, killed,\n"
	             "or whose last lines were removed) are counted in the summary.\n"
	             "\n"
	             "Exit status: 0 every chain holds, 1 a chain breaks (or a file could not\n"
	             "be read), 2 usage error, 3 nothing breaks but some lines carry no\n"
	             "chain (written before airlock added seq and prev): not checked.\n");
}

static int
no_files(const char *cmd)
{
	fprintf(stderr,
	        "airlock: log %s: no log FILE given; see 'airlock log %s "
	        "--help'\n",
	        cmd, cmd);
	return EXIT_USAGE;
}

static bool
want_color(const char *when)
{
	const char *nc = getenv("NO_COLOR");

	if (strcmp(when, "always") == 0)
		return true;
	if (strcmp(when, "never") == 0)
		return false;
	return isatty(STDOUT_FILENO) && (nc == NULL || nc[0] == '\0');
}

/* An option a subcommand's getopt_long refused (c: '?' or ':'), in one
 * line that names the subcommand; argv[0] is the subcommand's name. */
static int
bad_option(int c, int argc, char **argv)
{
	char help[64], err[160];

	snprintf(help, sizeof(help), "airlock log %s --help", argv[0]);
	opt_error(err, sizeof(err), c, argc, argv, help);
	fprintf(stderr, "airlock: log %s: %s\n", argv[0], err);
	return EXIT_USAGE;
}

static int
log_show(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"denied", no_argument, NULL, 'd'},
	        {"host", required_argument, NULL, 'H'},
	        {"task", required_argument, NULL, 't'},
	        {"since", required_argument, NULL, 's'},
	        {"json", no_argument, NULL, 'j'},
	        {"color", required_argument, NULL, 'c'},
	        {"colour", required_argument, NULL, 'c'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct review_show_opts o = {0};
	const char *when = "auto";
	struct timespec now;
	int c;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.denied = true;
			break;
		case 'H':
			o.host_glob = optarg;
			break;
		case 't':
			o.task = optarg;
			break;
		case 'j':
			o.json = true;
			break;
		case 's':
			clock_gettime(CLOCK_REALTIME, &now);
			if (review_parse_since(optarg,
			                       (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
			                       &o.since_ms) < 0) {
				fprintf(stderr,
				        "airlock: log show: --since '%s': expected an "
				        "RFC 3339 time or a duration such as 10m, 2h\n",
				        optarg);
				return EXIT_USAGE;
			}
			o.has_since = true;
			break;
		case 'c':
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "always") != 0 &&
			    strcmp(optarg, "never") != 0) {
				fprintf(stderr,
				        "airlock: log show: --color '%s': expected "
				        "auto, always or never\n",
				        optarg);
				return EXIT_USAGE;
			}
			when = optarg;
			break;
		case 'h':
			usage_show(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if (optind >= argc)
		return no_files("show");
	o.color = !o.json && want_color(when);
	/* A log read as it is written (stdin, a pipe, a FIFO: `tail -f LOG |
	 * airlock log show -`) is shown line by line, not a buffer at a time;
	 * regular files keep the faster full buffering. */
	for (int i = optind; i < argc; i++) {
		struct stat st;

		if (strcmp(argv[i], "-") == 0 || (stat(argv[i], &st) == 0 && !S_ISREG(st.st_mode))) {
			setvbuf(stdout, NULL, _IOLBF, 0);
			break;
		}
	}
	return review_show(argv + optind, argc - optind, &o, stdout) < 0 ? 1 : 0;
}

static int
log_summary(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"json", no_argument, NULL, 'j'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage_summary(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if (optind >= argc)
		return no_files("summary");
	return review_summary(argv + optind, argc - optind, json, stdout) < 0 ? 1 : 0;
}

static int
log_suggest(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"wildcard-min", required_argument, NULL, 'w'},
	        {"name", required_argument, NULL, 'n'},
	        {"include-denied", no_argument, NULL, 'D'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct review_suggest_opts o = {.wildcard_min = 3, .name = "suggested"};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (parse_uint(optarg, 0, 1000000, &v) < 0) {
				fprintf(stderr,
				        "airlock: log suggest: --wildcard-min '%s': "
				        "expected a number (0 turns wildcards off)\n",
				        optarg);
				return EXIT_USAGE;
			}
			o.wildcard_min = (unsigned)v;
			break;
		case 'n':
			/* The name lands in YAML unquoted: keep it to a safe set. */
			if (optarg[0] == '\0' || strlen(optarg) > 64 ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			                   "0123456789-_.") != strlen(optarg)) {
				fprintf(stderr,
				        "airlock: log suggest: --name '%s': expected "
				        "letters, digits, '-', '_' or '.' (at most 64)\n",
				        optarg);
				return EXIT_USAGE;
			}
			o.name = optarg;
			break;
		case 'D':
			o.include_denied = true;
			break;
		case 'h':
			usage_suggest(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if (optind >= argc)
		return no_files("suggest");
	return review_suggest(argv + optind, argc - optind, &o, stdout) < 0 ? 1 : 0;
}

static int
log_replay(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"policy", required_argument, NULL, 'p'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	const char *policy = NULL;
	int c, rc;

	while ((c = getopt_long(argc, argv, "+:hp:", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			policy = optarg;
			break;
		case 'h':
			usage_replay(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if (policy == NULL) {
		fprintf(stderr, "airlock: log replay: -p POLICY is required\n");
		return EXIT_USAGE;
	}
	if (optind >= argc)
		return no_files("replay");
	rc = review_replay(policy, argv + optind, argc - optind, stdout);
	return rc < 0 ? EXIT_USAGE : rc;
}

static int
log_verify(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage_verify(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if (optind >= argc)
		return no_files("verify");
	switch (elog_verify_files(argv + optind, argc - optind, stdout)) {
	case ELOG_VERIFY_OK:
		return 0;
	case ELOG_VERIFY_UNCHAINED:
		return EXIT_UNCHAINED;
	case ELOG_VERIFY_BROKEN:
		break;
	}
	return 1;
}

int
cmd_log(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} subs[] = {
	        {"show", log_show},     {"summary", log_summary}, {"suggest", log_suggest},
	        {"replay", log_replay}, {"verify", log_verify},
	};

	if (argc < 2) {
		usage_log(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage_log(stdout);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
		if (strcmp(argv[1], subs[i].name) == 0) {
			optind = 1; /* each subcommand parses from its own name */
			opterr = 0; /* bad_option says it, in one line */
			fflush(stdout);
			int rc = subs[i].fn(argc - 1, argv + 1);
			if (fflush(stdout) != 0 && rc == 0) {
				perror("airlock: log: writing output");
				rc = 1;
			}
			return rc;
		}
	}
	fprintf(stderr,
	        "airlock: log: unknown command '%s'; expected show, summary, "
	        "suggest, replay or verify\n",
	        argv[1]);
	return EXIT_USAGE;
}
