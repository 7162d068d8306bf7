/* `airlock log show|summary|suggest|replay|verify FILE...`: reviewing
 * egress logs (docs/log.md, docs/audit.md). The work is in elog/review.h
 * and elog/verify.h; this file parses flags and maps results to exit
 * statuses. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "common/util.h"
#include "elog/logdir.h"
#include "elog/ocsf.h"
#include "elog/review.h"
#include "elog/verify.h"

/* log verify: no break, but lines without a chain (older logs). */
#define EXIT_UNCHAINED 3

static void
usage_log(FILE *out)
{
	fprintf(out, "usage: airlock log show [--denied] [--host GLOB] [--task ID] [--since TIME]\n"
	             "                        [--json] [--follow] FILE...|--last\n"
	             "       airlock log summary [--json] FILE...|--last\n"
	             "       airlock log suggest [--wildcard-min N] [--name NAME] [--include-denied]\n"
	             "                           FILE...|--last > policy.yaml\n"
	             "       airlock log replay -p POLICY FILE...|--last\n"
	             "       airlock log verify FILE...|--last\n"
	             "       airlock log export --format ocsf FILE...|--last\n"
	             "       airlock log prune --older DURATION [--dry-run]\n"
	             "\n"
	             "  show     one readable line per event, filtered\n"
	             "  summary  per destination and per task: attempts, verdicts, bytes, times\n"
	             "  suggest  the smallest policy that would have allowed what was allowed\n"
	             "  replay   what would change under another policy (exit 1 if anything)\n"
	             "  verify   check each run's hash chain; name the line that breaks it\n"
	             "  export   the events in another schema (OCSF 1.1), one JSON object a line\n"
	             "  prune    remove the log directory's logs older than DURATION\n"
	             "\n"
	             "FILE is an egress log (JSON Lines, docs/log.md), or - for stdin;\n"
	             "--last is the newest in the log directory (~/.local/state/airlock/,\n"
	             "or $XDG_STATE_HOME/airlock/), and show --task ID alone is that task's.\n"
	             "Garbage lines are reported on stderr as FILE:LINE and skipped.\n"
	             "`airlock log COMMAND --help` describes each command.\n");
}

static void
usage_prune(FILE *out)
{
	fprintf(out, "usage: airlock log prune --older DURATION [--dry-run]\n"
	             "\n"
	             "Remove every TASK.jsonl in the log directory (~/.local/state/airlock/,\n"
	             "or $XDG_STATE_HOME/airlock/) last written more than DURATION ago (12h,\n"
	             "30d), naming each on stdout. Nothing else in it is touched.\n"
	             "\n"
	             "  --older DURATION  the age: a number with s, m, h or d\n"
	             "  --dry-run         only name what would be removed\n"
	             "\n"
	             "Exit status: 0, 1 a log could not be removed, 2 usage error.\n");
}

static void
usage_show(FILE *out)
{
	fprintf(out, "usage: airlock log show [OPTIONS] FILE...|--last\n"
	             "\n"
	             "One line per event: time, verdict, kind, host:port, address (or DNS\n"
	             "type), bytes up/down, and the deciding rule or the reason.\n"
	             "\n"
	             "  --denied       only deny and audit-deny events\n"
	             "  --host GLOB    only events whose host (or address) matches GLOB\n"
	             "                 (shell pattern, case-insensitive: '*.pythonhosted.org')\n"
	             "  --task ID      only this task's lines (without FILE: its log in the log\n"
	             "                 directory)\n"
	             "  --since TIME   only lines at or after TIME: RFC 3339\n"
	             "                 (2026-11-30T10:00:00Z) or back from now (90s, 10m, 2h, 7d)\n"
	             "  --json         print the selected lines unchanged (JSON Lines)\n"
	             "  --color WHEN   auto (default: on a terminal, unless NO_COLOR is set),\n"
	             "                 always, never\n"
	             "  --last         the newest log in the log directory\n"
	             "  --follow       keep showing one log as it grows, until its tasks end\n"
	             "\n"
	             "Exit status: 0, 1 a file could not be read, 2 usage error.\n");
}

static void
usage_summary(FILE *out)
{
	fprintf(out, "usage: airlock log summary [--json] FILE...|--last\n"
	             "\n"
	             "Per destination (host:port, or address:port when there is no name;\n"
	             "\"name (dns)\" for DNS queries): attempts, allowed, denied, bytes up\n"
	             "and down, first and last time. Per task: command, policy and mode,\n"
	             "exit status and duration, totals.\n"
	             "\n"
	             "  --json   one JSON object {\"destinations\": [...], \"tasks\": [...]}\n"
	             "  --last   the newest log in the log directory\n"
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
	             "  --last            the newest log in the log directory\n"
	             "\n"
	             "Exit status: 0, 1 a file could not be read, 2 usage error.\n");
}

static void
usage_replay(FILE *out)
{
	fprintf(out, "usage: airlock log replay -p POLICY FILE...|--last\n"
	             "\n"
	             "Decide every logged event again under POLICY (a path or a preset name)\n"
	             "and list the destinations whose outcome would change: allowed before\n"
	             "and denied now, and the reverse, with counts, the old rule or reason\n"
	             "and the new one. Events are decided by their rules (as in enforce\n"
	             "mode), whatever the policy's mode.\n"
	             "\n"
	             "  -p, --policy POLICY   the candidate policy\n"
	             "      --last            the newest log in the log directory\n"
	             "\n"
	             "Exit status: 0 nothing would change, 1 something would (or a file\n"
	             "could not be read), 2 usage error or an invalid policy.\n");
}

static void
usage_verify(FILE *out)
{
	fprintf(out, "usage: airlock log verify FILE...|--last\n"
	             "\n"
	             "Check the hash chain of every run in each FILE: each line's seq is one\n"
	             "more than the line before it of its task, and its prev is that line's\n"
	             "SHA-256, from the run's task-start on. For each FILE that breaks, one\n"
	             "line FILE:LINE: what broke (an edited, missing, inserted or reordered\n"
	             "line, a line that is not a log line, a cut last line); when none does,\n"
	             "one summary line. Chains without a task-end (a run still going, killed,\n"
	             "or whose last lines were removed) are counted in the summary.\n"
	             "\n"
	             "  --last   the newest log in the log directory\n"
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

/* The logs a subcommand reads: the FILEs given (argc, argv); or with
 * --last the newest log in the log directory (elog/logdir.h); or, for
 * show, with --task ID and no FILE, that task's log there. The picked
 * path goes to path, and *files to one[0]. 0, or the exit status after
 * saying why. */
static int
pick_files(const char *cmd, bool last, const char *task, int argc, char **argv, char *path,
           size_t pathlen, char **one, char ***files, int *n)
{
	char dir[PATH_MAX], err[PATH_MAX + 64];
	struct stat st;

	*files = argv;
	*n = argc;
	if (argc > 0 && !last)
		return 0;
	if (argc > 0) {
		fprintf(stderr, "airlock: log %s: --last or FILE..., not both\n", cmd);
		return EXIT_USAGE;
	}
	if (!last && task == NULL)
		return no_files(cmd);
	if (elog_logdir(dir, sizeof(dir), false, err, sizeof(err)) < 0 ||
	    (last && elog_logdir_last(dir, path, pathlen, err, sizeof(err)) < 0)) {
		fprintf(stderr, "airlock: log %s: %s\n", cmd, err);
		return 1;
	}
	if (!last) {
		if (!elog_task_id_valid(task) ||
		    snprintf(path, pathlen, "%s/%s.jsonl", dir, task) >= (int)pathlen ||
		    lstat(path, &st) < 0) {
			fprintf(stderr, "airlock: log %s: no log of task %s in %s; name the FILE\n", cmd,
			        task, dir);
			return 1;
		}
	}
	one[0] = path;
	*files = one;
	*n = 1;
	return 0;
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

/* How many times needle occurs in hay with its end past skip bytes. */
static long
count_ending_after(const char *hay, size_t len, const char *needle, size_t skip)
{
	size_t nl = strlen(needle);
	long n = 0;

	for (const char *p = hay; (p = memmem(p, len - (size_t)(p - hay), needle, nl)) != NULL;
	     p++)
		n += (size_t)(p - hay) + nl > skip;
	return n;
}

/* --follow's copier, in a child: the log's bytes to out as they come,
 * waiting at its end, until every task that started in it has ended (its
 * task-end line: the log is airlock's, and a sandbox string cannot hold
 * an unescaped quote, so the marker cannot be forged) or the reader goes. */
static int
follow_copy(int in, int out)
{
	static const char start[] = "\"kind\":\"task-start\"", end[] = "\"kind\":\"task-end\"";
	char buf[sizeof(start) + 65536];
	size_t carry = 0;
	long starts = 0, ends = 0;

	for (;;) {
		ssize_t n = read(in, buf + carry, sizeof(buf) - carry);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 1;
		if (n == 0) {
			if (starts > 0 && ends >= starts)
				return 0;
			struct timespec wait = {0, 200 * 1000 * 1000};
			nanosleep(&wait, NULL);
			continue;
		}
		/* Markers split across reads: the last bytes are kept. */
		starts += count_ending_after(buf, carry + (size_t)n, start, carry);
		ends += count_ending_after(buf, carry + (size_t)n, end, carry);
		for (size_t off = carry; off < carry + (size_t)n;) {
			ssize_t w = write(out, buf + off, carry + (size_t)n - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return 0; /* the reader went: done */
			off += (size_t)w;
		}
		size_t keep = sizeof(start) - 1 < carry + (size_t)n ? sizeof(start) - 1 : carry + (size_t)n;
		memmove(buf, buf + carry + (size_t)n - keep, keep);
		carry = keep;
	}
}

/* show --follow: path shown as it grows (docs/log.md). */
static int
show_follow(const char *path, const struct review_show_opts *o)
{
	char dev[32], *files[1] = {dev};
	int p[2], fd = open(path, O_RDONLY | O_CLOEXEC), rc, status;
	pid_t pid;

	if (fd < 0) {
		fprintf(stderr, "airlock: log show: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		fprintf(stderr, "airlock: log show --follow: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	if (pid == 0) {
		close(p[0]);
		_exit(follow_copy(fd, p[1]));
	}
	close(fd);
	close(p[1]);
	snprintf(dev, sizeof(dev), "/dev/fd/%d", p[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = review_show(files, 1, o, stdout) < 0 ? 1 : 0;
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return rc;
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
	        {"last", no_argument, NULL, 'L'},
	        {"follow", no_argument, NULL, 'f'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct review_show_opts o = {0};
	const char *when = "auto";
	struct timespec now;
	char path[PATH_MAX], *one[1], **files;
	bool last = false, follow = false;
	int c, n, rc;

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
		case 'L':
			last = true;
			break;
		case 'f':
			follow = true;
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
	if ((rc = pick_files("show", last, o.task, argc - optind, argv + optind, path, sizeof(path),
	                     one, &files, &n)) != 0)
		return rc;
	if (follow && (n != 1 || strcmp(files[0], "-") == 0)) {
		fprintf(stderr, "airlock: log show: --follow reads one log FILE (or --last, --task)\n");
		return EXIT_USAGE;
	}
	o.color = !o.json && want_color(when);
	if (follow)
		return show_follow(files[0], &o);
	/* A log read as it is written (stdin, a pipe, a FIFO: `tail -f LOG |
	 * airlock log show -`) is shown line by line, not a buffer at a time;
	 * regular files keep the faster full buffering. */
	for (int i = 0; i < n; i++) {
		struct stat st;

		if (strcmp(files[i], "-") == 0 || (stat(files[i], &st) == 0 && !S_ISREG(st.st_mode))) {
			setvbuf(stdout, NULL, _IOLBF, 0);
			break;
		}
	}
	return review_show(files, n, &o, stdout) < 0 ? 1 : 0;
}

static int
log_summary(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"json", no_argument, NULL, 'j'},
	        {"last", no_argument, NULL, 'L'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	char path[PATH_MAX], *one[1], **files;
	bool json = false, last = false;
	int c, n, rc;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'L':
			last = true;
			break;
		case 'h':
			usage_summary(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if ((rc = pick_files("summary", last, NULL, argc - optind, argv + optind, path, sizeof(path), one,
	                     &files, &n)) != 0)
		return rc;
	return review_summary(files, n, json, stdout) < 0 ? 1 : 0;
}

static int
log_suggest(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"wildcard-min", required_argument, NULL, 'w'},
	        {"name", required_argument, NULL, 'n'},
	        {"include-denied", no_argument, NULL, 'D'},
	        {"last", no_argument, NULL, 'L'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct review_suggest_opts o = {.wildcard_min = 3, .name = "suggested"};
	char path[PATH_MAX], *one[1], **files;
	bool last = false;
	uint64_t v;
	int c, n, rc;

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
		case 'L':
			last = true;
			break;
		case 'h':
			usage_suggest(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if ((rc = pick_files("suggest", last, NULL, argc - optind, argv + optind, path, sizeof(path), one,
	                     &files, &n)) != 0)
		return rc;
	return review_suggest(files, n, &o, stdout) < 0 ? 1 : 0;
}

static int
log_replay(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"policy", required_argument, NULL, 'p'},
	        {"last", no_argument, NULL, 'L'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	const char *policy = NULL;
	char path[PATH_MAX], *one[1], **files;
	bool last = false;
	int c, n, rc;

	while ((c = getopt_long(argc, argv, "+:hp:", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			policy = optarg;
			break;
		case 'L':
			last = true;
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
	if ((rc = pick_files("replay", last, NULL, argc - optind, argv + optind, path, sizeof(path), one,
	                     &files, &n)) != 0)
		return rc;
	rc = review_replay(policy, files, n, stdout);
	return rc < 0 ? EXIT_USAGE : rc;
}

static int
log_prune(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"older", required_argument, NULL, 'o'},
	        {"dry-run", no_argument, NULL, 'n'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct elog_prune_opts o = {.older_ms = 0};
	char dir[PATH_MAX], err[PATH_MAX + 64];
	bool have_older = false;
	long n;
	int c;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (parse_duration_ms(optarg, 0, (uint64_t)100 * 365 * 86400 * 1000,
			                      &o.older_ms) < 0) {
				fprintf(stderr,
				        "airlock: log prune: --older '%s': expected a duration such "
				        "as 12h, 30d\n",
				        optarg);
				return EXIT_USAGE;
			}
			have_older = true;
			break;
		case 'n':
			o.dry_run = true;
			break;
		case 'h':
			usage_prune(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if (!have_older || optind != argc) {
		fprintf(stderr, "airlock: log prune: --older DURATION is required, and takes no FILE; "
		                "see 'airlock log prune --help'\n");
		return EXIT_USAGE;
	}
	if (elog_logdir(dir, sizeof(dir), false, err, sizeof(err)) < 0 ||
	    (n = elog_logdir_prune(dir, &o, stdout, err, sizeof(err))) < 0) {
		fprintf(stderr, "airlock: log prune: %s\n", err);
		return 1;
	}
	fprintf(stderr, "airlock: log prune: %ld log%s %s in %s\n", n, n == 1 ? "" : "s",
	        o.dry_run ? "would be removed" : "removed", dir);
	return 0;
}

static int
log_verify(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"last", no_argument, NULL, 'L'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	char path[PATH_MAX], *one[1], **files;
	bool last = false;
	int c, n, rc;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'L':
			last = true;
			break;
		case 'h':
			usage_verify(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if ((rc = pick_files("verify", last, NULL, argc - optind, argv + optind, path, sizeof(path), one,
	                     &files, &n)) != 0)
		return rc;
	switch (elog_verify_files(files, n, stdout)) {
	case ELOG_VERIFY_OK:
		return 0;
	case ELOG_VERIFY_UNCHAINED:
		return EXIT_UNCHAINED;
	case ELOG_VERIFY_BROKEN:
		break;
	}
	return 1;
}

static void
usage_export(FILE *out)
{
	fprintf(out, "usage: airlock log export --format ocsf [--unverified] FILE...|--last\n"
	             "\n"
	             "Check each file's hash chain as log verify does, then write each event\n"
	             "(connection, request, DNS query, blocked packets) as an\n"
	             "OCSF 1.1 event on stdout, one JSON object a line: DNS Activity (4003),\n"
	             "HTTP Activity (4002) or Network Activity (4001), the task id in\n"
	             "metadata.correlation_uid, the verdict in disposition_id and action_id,\n"
	             "airlock's own fields in unmapped.airlock (docs/log.md, \"OCSF\").\n"
	             "task-start and task-end lines are not events and are left out.\n"
	             "A log whose chain breaks is not exported (exit 1) unless --unverified.\n");
}

/* export's check: the files' hash chains hold (older, unchained lines
 * pass: there is nothing to check). 0, or -1 with the first break said. */
static int
export_verify(char *const *files, int n)
{
	char *text = NULL, *nl;
	size_t len = 0;
	FILE *m;
	enum elog_verify_result v;

	for (int i = 0; i < n; i++) {
		if (strcmp(files[i], "-") == 0) {
			fprintf(stderr, "airlock: log export: standard input cannot be read twice to "
			                "check its chain first; give the file, or --unverified\n");
			return -1;
		}
	}
	if ((m = open_memstream(&text, &len)) == NULL) {
		perror("airlock: log export");
		return -1;
	}
	v = elog_verify_files(files, n, m);
	fclose(m);
	if (v != ELOG_VERIFY_BROKEN) {
		free(text);
		return 0;
	}
	if (text != NULL && (nl = strchr(text, '\n')) != NULL)
		*nl = '\0';
	fprintf(stderr,
	        "airlock: log export: %s; not exported: the log was changed or is not whole "
	        "(airlock log verify; --unverified exports it anyway)\n",
	        text != NULL && text[0] != '\0' ? text : "a file could not be read");
	free(text);
	return -1;
}

static int
log_export(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"format", required_argument, NULL, 'f'},
	        {"unverified", no_argument, NULL, 'U'},
	        {"last", no_argument, NULL, 'L'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	char path[PATH_MAX], *one[1], **files;
	const char *format = NULL;
	bool last = false, unverified = false;
	int c, n, rc;

	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			format = optarg;
			break;
		case 'U':
			unverified = true;
			break;
		case 'L':
			last = true;
			break;
		case 'h':
			usage_export(stdout);
			return 0;
		default:
			return bad_option(c, argc, argv);
		}
	}
	if (format == NULL) {
		fprintf(stderr, "airlock: log export: --format is required (ocsf)\n");
		return EXIT_USAGE;
	}
	if (strcmp(format, "ocsf") != 0) {
		fprintf(stderr, "airlock: log export: unknown format '%s'; expected ocsf\n", format);
		return EXIT_USAGE;
	}
	if ((rc = pick_files("export", last, NULL, argc - optind, argv + optind, path, sizeof(path),
	                     one, &files, &n)) != 0)
		return rc;
	if (!unverified && export_verify(files, n) != 0)
		return 1;
	return elog_export_ocsf(files, n, stdout) == 0 ? 0 : 1;
}

int
cmd_log(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} subs[] = {
	        {"show", log_show},     {"summary", log_summary}, {"suggest", log_suggest},
	        {"replay", log_replay}, {"verify", log_verify},   {"prune", log_prune},
	        {"export", log_export},
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
	        "suggest, replay, verify, export or prune\n",
	        argv[1]);
	return EXIT_USAGE;
}
