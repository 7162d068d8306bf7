/* `airlock selftest`: build a whole sandbox without a command, run every
 * check of its own enforcement from where CMD would run, tear it down and
 * print one line per check (docs/run.md, Self-test). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "common/util.h"
#include "common/log.h"
#include "sandbox/env.h"
#include "sandbox/sandbox.h"
#include "sandbox/status.h"

extern char **environ;

static const char usage[] =
        "usage: airlock selftest [-v] [--root]\n"
        "\n"
        "Create a sandbox, check that it enforces what airlock promises (user\n"
        "namespace, only lo, nftables ruleset, listeners, read-only root, private\n"
        "/tmp and /proc, no capabilities, seccomp, traffic capture), tear it\n"
        "down. One line per check, then a note on whether `airlock run` can map\n"
        "a range of ids here (docs/run.md, Ids); exit 0 when all pass, 1 when\n"
        "one fails, 125 when airlock itself fails.\n"
        "\n"
        "  -v, --verbose   more detail on stderr\n"
        "      --root      check the --root variant (uid 0 inside)\n"
        "  -h, --help      this text\n";

static void
print_report(const struct sbx_report *rep, int *failures)
{
	for (int i = 0; i < SBX_CHECK_COUNT; i++) {
		const struct sbx_check_result *c = &rep->check[i];
		const char *name = sbx_check_name((enum sbx_check)i);

		if (!c->ran) {
			printf("skip %s\n", name);
			(*failures)++;
		} else if (c->ok) {
			printf("ok   %s\n", name);
		} else {
			printf("FAIL %s: %s\n", name, c->reason);
			(*failures)++;
		}
	}
	fflush(stdout);
}

/* Not a check: whether `airlock run --ids range` can map a range for this
 * caller (sandbox/ids.h), on a line of its own. */
static void
print_ids_range(void)
{
	struct sbx_ids ids;
	char err[256];
	uid_t uid = geteuid();

	if (sbx_ids_resolve(&ids, SBX_IDS_RANGE, uid, getegid(), 0, 0, NULL, NULL, err,
	                    sizeof(err)) < 0) {
		printf("note ids range: unavailable (%s)\n", err);
		return;
	}
	if (ids.helper && (access("/usr/bin/newuidmap", X_OK) < 0 ||
	                   access("/usr/bin/newgidmap", X_OK) < 0)) {
		printf("note ids range: unavailable (/usr/bin/newuidmap or newgidmap is missing: "
		       "install uidmap)\n");
		return;
	}
	printf("note ids range: available (uid map");
	for (size_t i = 0; i < ids.uid.n; i++)
		printf("%s %u %u %u", i > 0 ? "," : "", (unsigned)ids.uid.line[i].inside,
		       (unsigned)ids.uid.line[i].outside, (unsigned)ids.uid.line[i].count);
	printf("%s)\n", ids.helper ? ", through newuidmap" : "");
}

int
cmd_selftest(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"verbose", no_argument, NULL, 'v'},
	        {"root", no_argument, NULL, 'r'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct sbx_config cfg;
	struct sbx_report rep;
	struct sbx_listeners lst;
	struct sbx_result res;
	struct sbx *s = NULL;
	char **env = NULL;
	char err[512];
	char dir[] = "/tmp/airlock-selftest.XXXXXX";
	bool have_dir = false;
	int c, failures = 0, status = SBX_EXIT_FAILURE;

	memset(&cfg, 0, sizeof(cfg));
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			log_set_level(LOG_LEVEL_DEBUG);
			break;
		case 'r':
			cfg.root = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default: {
			char why[160];

			opt_error(why, sizeof(why), c, argc, argv, "airlock selftest --help");
			log_warnx("selftest: %s", why);
			return EXIT_USAGE;
		}
		}
	}
	if (optind < argc) {
		log_warnx("selftest takes no command; see 'airlock run'");
		return EXIT_USAGE;
	}

	memset(&rep, 0, sizeof(rep));
	sbx_listeners_init(&lst);
	if (sbx_fix_stdio() < 0) {
		log_warn("stdio: cannot open /dev/null");
		return SBX_EXIT_FAILURE;
	}
	env = sbx_env_build(environ, true, NULL, NULL, 0, err, sizeof(err));
	if (env == NULL) {
		log_warnx("%s", err);
		goto out;
	}
	/* A scratch working directory: the caller's may be / or anywhere. */
	if (mkdtemp(dir) == NULL) {
		log_warn("selftest: scratch directory");
		goto out;
	}
	have_dir = true;
	cfg.envp = env;
	cfg.workdir = dir;
	cfg.selftest = true;
	cfg.home = getenv("HOME"); /* hidden as in `airlock run` */
	s = sbx_new(&cfg, err, sizeof(err));
	if (s == NULL) {
		log_warnx("%s", err);
		goto out;
	}
	if (sbx_start(s, err, sizeof(err)) < 0) {
		printf("FAIL %s: %s\n", sbx_check_name(SBX_CHECK_USERNS), err);
		status = 1;
		goto out;
	}
	if (sbx_recv_listeners(s, &lst, &rep, err, sizeof(err)) < 0) {
		if (err[0] != '\0') /* empty: init has said why (sandbox.h) */
			log_warnx("%s", err);
		goto out;
	}
	/* Holding the listeners is all the post-set-up checks need: a
	 * connection is complete once the kernel queues it. */
	if (sbx_go(s, sbx_report_first_failure(&rep, SBX_CHECK_PRE_GO) < 0) < 0) {
		log_warn("selftest: go");
		goto out;
	}
	if (sbx_end(s, &res, &rep) < 0) {
		log_warn("selftest: reap");
		goto out;
	}
	print_report(&rep, &failures);
	print_ids_range();
	status = failures == 0 ? 0 : 1;
out:
	sbx_listeners_close(&lst);
	sbx_free(s);
	sbx_env_free(env);
	if (have_dir)
		rmdir(dir);
	return status;
}
