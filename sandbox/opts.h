/* The `airlock run` command line (docs/run.md), parsed into a plain struct
 * by pure code so it can be tested without a sandbox. */
#ifndef AIRLOCK_SANDBOX_OPTS_H
#define AIRLOCK_SANDBOX_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/env.h"
#include "sandbox/sandbox.h"

#define SBX_MAX_TIMEOUT_S   (7u * 24 * 3600)
#define SBX_MAX_USER_MOUNTS 64 /* --rw, --ro, --tmpfs, --hide */
#define SBX_MAX_LABELS      16 /* --label */

struct sbx_opts {
	const char *policy;       /* -p/--policy, required */
	const char *log;          /* --log; NULL = the default path */
	uint64_t log_budget;      /* --log-budget bytes; 0 = none */
	int verbose;              /* -v count */
	bool quiet;               /* -q: no denial lines, no summary */
	const char *task_id;      /* --task-id, checked (elog_task_id_valid); NULL: random */
	const char *labels[SBX_MAX_LABELS]; /* --label KEY=VALUE, checked, keys distinct */
	size_t n_labels;
	bool audit;               /* --audit */
	const char *dns_upstream; /* --dns-upstream ADDR; NULL = resolv.conf */
	unsigned timeout_s;       /* --timeout; 0 = none */
	const char *workdir;      /* --workdir; NULL = cwd */
	struct sbx_mount mounts[SBX_MAX_USER_MOUNTS];
	size_t n_mounts;
	const char *env[SBX_MAX_ENV];
	size_t n_env;
	bool clearenv;
	bool root;
	enum sbx_ids_mode ids;    /* --ids one|range (ids.h); default one */
	bool overlay;             /* --overlay, or --overlay-keep */
	const char *overlay_keep; /* --overlay-keep DIR; NULL: a tmpfs upper layer */
	bool share_home; /* --share-home: keep the home directories visible */
	const char *cache; /* --cache DIR (sandbox/cache.h); NULL: none */
	bool cache_shared; /* --cache-shared: DIR's lock shared with other runs */
	bool help;
	char **cmd; /* CMD and its arguments (points into argv), NULL-terminated */
	int cmd_argc;
};

/* Parse argv (argv[0] = "run"). All strings point into argv. Returns 0, or
 * -1 with a one-line reason in err. With --help, help is set and the rest
 * is not checked. Uses getopt_long (resets optind). */
int sbx_opts_parse(struct sbx_opts *o, int argc, char **argv, char *err, size_t errlen);

/* The usage text of `airlock run`. */
extern const char sbx_opts_usage[];

#endif
