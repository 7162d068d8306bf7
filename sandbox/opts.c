#include "sandbox/opts.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "elog/elog.h"
#include "elog/logdir.h"

const char sbx_opts_usage[] =
        "usage: airlock run -p POLICY [OPTIONS] [--] CMD [ARGS...]\n"
        "\n"
        "Run CMD in a sandbox whose only way to the network is POLICY's allowlist.\n"
        "\n"
        "  -p, --policy FILE      policy file or preset name (required)\n"
        "      --log FILE         egress log (JSON Lines); default\n"
        "                         $XDG_STATE_HOME/airlock/TASKID.jsonl\n"
        "                         (~/.local/state/airlock/); never CMD's\n"
        "                         stdout or stderr (use /dev/fd/N for a pipe)\n"
        "      --log-budget SIZE  bytes of event lines per task (k, M, G; 0: no\n"
        "                         limit; default 64M); then detail stops, counts\n"
        "                         go on, new destinations are refused\n"
        "  -v, --verbose          a human line per event on stderr (twice: debug)\n"
        "  -q, --quiet            say nothing of refused destinations (by default:\n"
        "                         one line per destination, and a summary)\n"
        "      --task-id ID       the task's id in the log (default: random); letters,\n"
        "                         digits, . _ -; at most 64\n"
        "      --label KEY=VALUE  a label in the log's task-start (repeatable, 16)\n"
        "      --audit            allow everything, log what would be denied\n"
        "      --dns-upstream ADDR  resolver for allowed names (default: the\n"
        "                         host's /etc/resolv.conf)\n"
        "      --timeout TIME     kill the whole sandbox after TIME: seconds, or\n"
        "                         90s, 10m, 2h, 7d (exit 124)\n"
        "      --workdir DIR      read-write working directory (default: cwd)\n"
        "      --rw PATH          bind PATH read-write\n"
        "      --ro PATH          bind PATH read-only (e.g. inside an --rw path)\n"
        "      --tmpfs PATH       empty writable tmpfs on PATH\n"
        "      --hide PATH        hide PATH (empty directory or empty file)\n"
        "      --share-home       do not hide the home directories (default:\n"
        "                         empty writable dirs on $HOME, /home, /root)\n"
        "      --cache DIR        keep package caches in DIR (made if missing; yours,\n"
        "                         not world-writable, outside the workdir): bound\n"
        "                         at /run/airlock/cache with XDG_CACHE_HOME,\n"
        "                         PIP_CACHE_DIR, npm_config_cache, CARGO_HOME,\n"
        "                         GOMODCACHE, GOCACHE, GRADLE_USER_HOME set; one\n"
        "                         run at a time holds DIR\n"
        "      --cache-shared     let runs that all say so use DIR at once\n"
        "      --env NAME[=VALUE] set NAME, or pass the caller's NAME\n"
        "      --clearenv         start CMD's environment empty (PATH kept)\n"
        "      --root             run CMD as uid 0 inside (no capabilities)\n"
        "      --ids one|range    one: the caller's id alone (default); range: 65536\n"
        "                         ids (as root the host's own, else /etc/subuid's),\n"
        "                         and root keeps the file and id capabilities apt\n"
        "                         needs\n"
        "      --overlay          the host's directories writable, changes kept in\n"
        "                         a tmpfs of the task's own (the host's never change)\n"
        "      --overlay-keep DIR the same, the changes kept in DIR (new or empty;\n"
        "                         list them with airlock diff DIR)\n"
        "  -h, --help             this text\n"
        "\n"
        "Exit status: CMD's; 128+N if killed by signal N; 124 timeout;\n"
        "125 airlock failed; 126 CMD not executable; 127 CMD not found.\n"
        "See docs/run.md.\n";

enum {
	OPT_LOG = 256,
	OPT_LOG_BUDGET,
	OPT_AUDIT,
	OPT_DNS,
	OPT_TIMEOUT,
	OPT_WORKDIR,
	OPT_RW,
	OPT_RO,
	OPT_TMPFS,
	OPT_HIDE,
	OPT_ENV,
	OPT_CLEARENV,
	OPT_ROOT,
	OPT_SHARE_HOME,
	OPT_TASK_ID,
	OPT_LABEL,
	OPT_CACHE,
	OPT_CACHE_SHARED,
	OPT_IDS,
	OPT_OVERLAY,
	OPT_OVERLAY_KEEP,
};

static const struct option long_opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"log", required_argument, NULL, OPT_LOG},
        {"log-budget", required_argument, NULL, OPT_LOG_BUDGET},
        {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},
        {"audit", no_argument, NULL, OPT_AUDIT},
        {"dns-upstream", required_argument, NULL, OPT_DNS},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"workdir", required_argument, NULL, OPT_WORKDIR},
        {"rw", required_argument, NULL, OPT_RW},
        {"ro", required_argument, NULL, OPT_RO},
        {"tmpfs", required_argument, NULL, OPT_TMPFS},
        {"hide", required_argument, NULL, OPT_HIDE},
        {"env", required_argument, NULL, OPT_ENV},
        {"clearenv", no_argument, NULL, OPT_CLEARENV},
        {"root", no_argument, NULL, OPT_ROOT},
        {"share-home", no_argument, NULL, OPT_SHARE_HOME},
        {"task-id", required_argument, NULL, OPT_TASK_ID},
        {"label", required_argument, NULL, OPT_LABEL},
        {"cache", required_argument, NULL, OPT_CACHE},
        {"cache-shared", no_argument, NULL, OPT_CACHE_SHARED},
        {"ids", required_argument, NULL, OPT_IDS},
        {"overlay", no_argument, NULL, OPT_OVERLAY},
        {"overlay-keep", required_argument, NULL, OPT_OVERLAY_KEEP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

static int
add_mount(struct sbx_opts *o, enum sbx_mount_kind kind, const char *path, const char *flag,
          char *err, size_t errlen)
{
	if (o->n_mounts >= SBX_MAX_USER_MOUNTS) {
		snprintf(err, errlen, "too many mount flags (at most %d)", SBX_MAX_USER_MOUNTS);
		return -1;
	}
	if (path[0] == '\0') {
		snprintf(err, errlen, "%s: empty path", flag);
		return -1;
	}
	o->mounts[o->n_mounts].kind = kind;
	o->mounts[o->n_mounts].path = path;
	o->n_mounts++;
	return 0;
}

/* --label KEY=VALUE: KEY 1-32 of a-z 0-9 _ . - starting with a letter,
 * VALUE at most 128 bytes and no control character; keys distinct. */
static int
add_label(struct sbx_opts *o, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	size_t klen = eq != NULL ? (size_t)(eq - arg) : 0;

	if (eq == NULL || klen == 0 || klen > 32 || !(arg[0] >= 'a' && arg[0] <= 'z') ||
	    strspn(arg, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != klen) {
		snprintf(err, errlen,
		         "--label '%.80s': expected KEY=VALUE, KEY 1 to 32 of a-z, 0-9, '_', '.', "
		         "'-' starting with a letter",
		         arg);
		return -1;
	}
	if (strlen(eq + 1) > 128) {
		snprintf(err, errlen, "--label %.*s: the value is longer than 128 bytes", (int)klen,
		         arg);
		return -1;
	}
	for (const unsigned char *p = (const unsigned char *)eq + 1; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			snprintf(err, errlen, "--label %.*s: the value holds a control character",
			         (int)klen, arg);
			return -1;
		}
	}
	for (size_t i = 0; i < o->n_labels; i++) {
		if (strncmp(o->labels[i], arg, klen + 1) == 0) {
			snprintf(err, errlen, "--label %.*s given twice", (int)klen, arg);
			return -1;
		}
	}
	if (o->n_labels == SBX_MAX_LABELS) {
		snprintf(err, errlen, "more than %d --label", SBX_MAX_LABELS);
		return -1;
	}
	o->labels[o->n_labels++] = arg;
	return 0;
}

int
sbx_opts_parse(struct sbx_opts *o, int argc, char **argv, char *err, size_t errlen)
{
	int c;
	uint64_t v;

	memset(o, 0, sizeof(*o));
	o->log_budget = ELOG_BUDGET_DEFAULT;
	/* optind 0 makes glibc re-initialise, so the parser can run twice
	 * (tests); opterr 0 because errors are reported here, in one line. */
	optind = 0;
	opterr = 0;
	/* '+': stop at the first non-option, so CMD's own flags stay its own
	 * even without "--". */
	while ((c = getopt_long(argc, argv, "+:p:vqh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->policy = optarg;
			break;
		case OPT_LOG:
			/* CMD inherits stdout: it could write lines that look
			 * like the log's, or cut ours in half. */
			if (strcmp(optarg, "-") == 0) {
				snprintf(err, errlen,
				         "--log -: CMD shares stdout and could forge log lines; "
				         "use --log FILE, or --log /dev/fd/N with N open on a "
				         "pipe CMD does not write to");
				return -1;
			}
			o->log = optarg;
			break;
		case OPT_LOG_BUDGET:
			if (elog_parse_size(optarg, &o->log_budget) < 0) {
				snprintf(err, errlen,
				         "--log-budget '%.32s': expected bytes, e.g. 65536, 64k, "
				         "64M, 1G, or 0 for no limit",
				         optarg);
				return -1;
			}
			break;
		case 'v':
			o->verbose++;
			break;
		case 'q':
			o->quiet = true;
			break;
		case OPT_AUDIT:
			o->audit = true;
			break;
		case OPT_DNS:
			o->dns_upstream = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_duration_ms(optarg, 1000, (uint64_t)SBX_MAX_TIMEOUT_S * 1000, &v) <
			            0 ||
			    v < 1000) {
				snprintf(err, errlen,
				         "--timeout '%.32s': expected seconds (1 to %u) or a duration "
				         "such as 90s, 10m, 2h, 7d",
				         optarg, SBX_MAX_TIMEOUT_S);
				return -1;
			}
			o->timeout_s = (unsigned)(v / 1000);
			break;
		case OPT_WORKDIR:
			if (optarg[0] == '\0') {
				snprintf(err, errlen, "--workdir: empty path");
				return -1;
			}
			o->workdir = optarg;
			break;
		case OPT_RW:
			if (add_mount(o, SBX_MOUNT_RW, optarg, "--rw", err, errlen) < 0)
				return -1;
			break;
		case OPT_RO:
			if (add_mount(o, SBX_MOUNT_RO, optarg, "--ro", err, errlen) < 0)
				return -1;
			break;
		case OPT_TMPFS:
			if (add_mount(o, SBX_MOUNT_TMPFS, optarg, "--tmpfs", err, errlen) < 0)
				return -1;
			break;
		case OPT_HIDE:
			if (add_mount(o, SBX_MOUNT_HIDE, optarg, "--hide", err, errlen) < 0)
				return -1;
			break;
		case OPT_ENV:
			if (o->n_env >= SBX_MAX_ENV) {
				snprintf(err, errlen, "too many --env flags (at most %d)",
				         SBX_MAX_ENV);
				return -1;
			}
			o->env[o->n_env++] = optarg;
			break;
		case OPT_CLEARENV:
			o->clearenv = true;
			break;
		case OPT_ROOT:
			o->root = true;
			break;
		case OPT_SHARE_HOME:
			o->share_home = true;
			break;
		case OPT_IDS:
			if (sbx_ids_mode_parse(optarg, &o->ids) < 0) {
				snprintf(err, errlen, "--ids '%.80s': expected one or range", optarg);
				return -1;
			}
			break;
		case OPT_OVERLAY:
			o->overlay = true;
			break;
		case OPT_OVERLAY_KEEP:
			if (optarg[0] == '\0') {
				snprintf(err, errlen, "--overlay-keep: empty path");
				return -1;
			}
			o->overlay = true;
			o->overlay_keep = optarg;
			break;
		case OPT_TASK_ID:
			if (!elog_task_id_valid(optarg)) {
				snprintf(err, errlen,
				         "--task-id '%.80s': expected 1 to %d letters, digits, '.', '_' "
				         "or '-', starting with a letter or digit",
				         optarg, ELOG_TASK_ID_MAX);
				return -1;
			}
			o->task_id = optarg;
			break;
		case OPT_CACHE:
			if (optarg[0] == '\0') {
				snprintf(err, errlen, "--cache: empty path");
				return -1;
			}
			o->cache = optarg;
			break;
		case OPT_CACHE_SHARED:
			o->cache_shared = true;
			break;
		case OPT_LABEL:
			if (add_label(o, optarg, err, errlen) < 0)
				return -1;
			break;
		case 'h':
			o->help = true;
			return 0;
		default:
			opt_error(err, errlen, c, argc, argv, "airlock run --help");
			return -1;
		}
	}
	if (o->policy == NULL) {
		snprintf(err, errlen,
		         "no policy: -p POLICY is required (policies/none.yaml "
		         "allows nothing)");
		return -1;
	}
	if (o->cache_shared && o->cache == NULL) {
		snprintf(err, errlen, "--cache-shared without --cache DIR");
		return -1;
	}
	if (optind >= argc) {
		snprintf(err, errlen, "no command: airlock run -p POLICY -- CMD [ARGS...]");
		return -1;
	}
	o->cmd = &argv[optind];
	o->cmd_argc = argc - optind;
	return 0;
}
