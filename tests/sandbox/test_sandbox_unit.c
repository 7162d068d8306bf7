/* Unit tests for the pure parts of sandbox/: `airlock run` argument
 * parsing, the exit status mapping and CMD's environment. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "sandbox/cache.h"
#include "sandbox/env.h"
#include "sandbox/internal.h"
#include "sandbox/opts.h"
#include "sandbox/status.h"

#define ARGV(...) ((char *[]){__VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, err, ...)                                                                         \
	sbx_opts_parse((o), ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (err), sizeof(err))

static void
opts_full(void **state)
{
	struct sbx_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "run", "-p", "pol.yaml", "--log", "l.jsonl", "-v", "-v",
	                       "--audit", "--dns-upstream", "192.0.2.53", "--timeout", "30",
	                       "--workdir", "/w", "--rw", "/a", "--ro", "/a/b", "--tmpfs", "/t",
	                       "--hide", "/h", "--env", "X=1", "--env", "Y", "--clearenv", "--root",
	                       "--share-home", "--", "make", "-j4"),
	                 0);
	assert_string_equal(o.policy, "pol.yaml");
	assert_string_equal(o.log, "l.jsonl");
	assert_int_equal(o.verbose, 2);
	assert_true(o.audit);
	assert_string_equal(o.dns_upstream, "192.0.2.53");
	assert_int_equal(o.timeout_s, 30);
	assert_string_equal(o.workdir, "/w");
	assert_int_equal(o.n_mounts, 4);
	assert_int_equal(o.mounts[0].kind, SBX_MOUNT_RW);
	assert_string_equal(o.mounts[0].path, "/a");
	assert_int_equal(o.mounts[1].kind, SBX_MOUNT_RO);
	assert_int_equal(o.mounts[2].kind, SBX_MOUNT_TMPFS);
	assert_int_equal(o.mounts[3].kind, SBX_MOUNT_HIDE);
	assert_string_equal(o.mounts[3].path, "/h");
	assert_int_equal(o.n_env, 2);
	assert_string_equal(o.env[1], "Y");
	assert_true(o.clearenv);
	assert_true(o.root);
	assert_true(o.share_home);
	assert_int_equal(o.cmd_argc, 2);
	assert_string_equal(o.cmd[0], "make");
	assert_string_equal(o.cmd[1], "-j4");
	assert_null(o.cmd[2]);
}

/* The log never shares stdout with CMD (which could forge lines); the
 * default keeps the home directories hidden. */
static void
opts_log_stdout_refused(void **state)
{
	struct sbx_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--log", "-", "true"), -1);
	assert_non_null(strstr(err, "--log -: CMD shares stdout"));
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--log", "/dev/fd/3", "true"), 0);
	assert_string_equal(o.log, "/dev/fd/3");
	assert_false(o.share_home);
}

/* The log budget: 64 MiB unless said otherwise, 0 for none. */
static void
opts_log_budget(void **state)
{
	struct sbx_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "true"), 0);
	assert_int_equal(o.log_budget, 64ULL << 20);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--log-budget", "4k", "true"), 0);
	assert_int_equal(o.log_budget, 4096);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--log-budget", "0", "true"), 0);
	assert_int_equal(o.log_budget, 0);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--log-budget", "lots", "true"), -1);
	assert_non_null(strstr(err, "--log-budget 'lots'"));
}

static void
opts_cmd_flags_stay_cmds(void **state)
{
	struct sbx_opts o;
	char err[256];

	/* Without "--" parsing stops at CMD; its -v is its own. */
	assert_int_equal(PARSE(&o, err, "run", "--policy=p", "ls", "-v", "--help"), 0);
	assert_int_equal(o.verbose, 0);
	assert_false(o.help);
	assert_int_equal(o.cmd_argc, 3);
	assert_string_equal(o.cmd[1], "-v");
	/* Parsing twice works (getopt state is reset). */
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "true"), 0);
	assert_string_equal(o.cmd[0], "true");
}

static void
opts_errors(void **state)
{
	struct sbx_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "run", "--", "true"), -1);
	assert_non_null(strstr(err, "-p POLICY"));
	assert_int_equal(PARSE(&o, err, "run", "-p", "p"), -1);
	assert_non_null(strstr(err, "no command"));
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "10m", "true"), 0);
	assert_int_equal(o.timeout_s, 600);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "90", "true"), 0);
	assert_int_equal(o.timeout_s, 90);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "7d", "true"), 0);
	assert_int_equal(o.timeout_s, 7 * 86400);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "8d", "true"), -1);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "0s", "true"), -1);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "m", "true"), -1);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "0", "true"), -1);
	assert_non_null(strstr(err, "--timeout"));
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "3x", "true"), -1);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "-1", "true"), -1);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--timeout", "99999999999", "true"), -1);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--bogus", "true"), -1);
	assert_non_null(strstr(err, "--bogus"));
	assert_int_equal(PARSE(&o, err, "run", "-p"), -1);
	assert_non_null(strstr(err, "option '-p' needs a value"));
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--rw", "", "true"), -1);
	assert_int_equal(PARSE(&o, err, "run", "-p", "p", "--workdir", "", "true"), -1);
	/* --help wins over a missing policy. */
	assert_int_equal(PARSE(&o, err, "run", "--help"), 0);
	assert_true(o.help);
}

static void
opts_mount_limit(void **state)
{
	char *argv[4 + 2 * (SBX_MAX_USER_MOUNTS + 1) + 2];
	struct sbx_opts o;
	char err[256];
	int n = 0;

	argv[n++] = "run";
	argv[n++] = "-p";
	argv[n++] = "p";
	for (int i = 0; i <= SBX_MAX_USER_MOUNTS; i++) {
		argv[n++] = "--tmpfs";
		argv[n++] = "/x";
	}
	argv[n++] = "true";
	argv[n] = NULL;
	assert_int_equal(sbx_opts_parse(&o, n, argv, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too many"));
}

static void
status_mapping(void **state)
{
	int sig;

	assert_int_equal(sbx_exit_status(W_EXITCODE(0, 0), &sig), 0);
	assert_int_equal(sig, 0);
	assert_int_equal(sbx_exit_status(W_EXITCODE(3, 0), &sig), 3);
	assert_int_equal(sbx_exit_status(W_EXITCODE(255, 0), NULL), 255);
	assert_int_equal(sbx_exit_status(SIGKILL, &sig), 137);
	assert_int_equal(sig, SIGKILL);
	assert_int_equal(sbx_exit_status(SIGTERM | 0x80 /* core */, &sig), 143);
	assert_int_equal(sig, SIGTERM);
	assert_int_equal(sbx_exit_status(W_STOPCODE(SIGSTOP), &sig), SBX_EXIT_FAILURE);
	assert_int_equal(sbx_exec_errno_status(ENOENT), 127);
	assert_int_equal(sbx_exec_errno_status(ENOTDIR), 127);
	assert_int_equal(sbx_exec_errno_status(EACCES), 126);
	assert_int_equal(sbx_exec_errno_status(ENOEXEC), 126);
}

static size_t
env_count(char **env, const char *name)
{
	size_t n = 0, len = strlen(name);

	for (size_t i = 0; env[i] != NULL; i++)
		if (strncmp(env[i], name, len) == 0 && env[i][len] == '=')
			n++;
	return n;
}

static void
env_default_passes_caller(void **state)
{
	char *caller[] = {"PATH=/p",   "HOME=/h", "http_proxy=http://evil:1", "NOEQ", "=x",
	                  "HOME=/dup", NULL};
	char err[256];
	char **e = sbx_env_build(caller, false, NULL, NULL, 0, err, sizeof(err));

	assert_non_null(e);
	assert_string_equal(sbx_env_get(e, "PATH"), "/p");
	/* A later duplicate replaces, never two entries. */
	assert_string_equal(sbx_env_get(e, "HOME"), "/dup");
	assert_int_equal(env_count(e, "HOME"), 1);
	assert_string_equal(sbx_env_get(e, "http_proxy"), "http://127.0.0.1:3128");
	assert_int_equal(env_count(e, "http_proxy"), 1);
	assert_string_equal(sbx_env_get(e, "HTTPS_PROXY"), "http://127.0.0.1:3128");
	assert_string_equal(sbx_env_get(e, "ALL_PROXY"), "http://127.0.0.1:3128");
	assert_string_equal(sbx_env_get(e, "all_proxy"), "http://127.0.0.1:3128");
	assert_string_equal(sbx_env_get(e, "NO_PROXY"), "localhost,127.0.0.1,::1");
	assert_string_equal(sbx_env_get(e, "no_proxy"), "localhost,127.0.0.1,::1");
	assert_null(sbx_env_get(e, "NOEQ"));
	sbx_env_free(e);
}

static void
env_clear_and_args(void **state)
{
	char *caller[] = {"PATH=/p", "SECRET=s", "KEEP=k", NULL};
	const char *args[] = {"KEEP", "NEW=a=b", "MISSING", "HTTPS_PROXY=http://x:1"};
	char err[256];
	char **e = sbx_env_build(caller, true, NULL, args, 4, err, sizeof(err));

	assert_non_null(e);
	assert_string_equal(sbx_env_get(e, "PATH"), "/p");
	assert_null(sbx_env_get(e, "SECRET"));
	assert_string_equal(sbx_env_get(e, "KEEP"), "k");
	assert_string_equal(sbx_env_get(e, "NEW"), "a=b");
	assert_null(sbx_env_get(e, "MISSING"));
	/* --env is the last word, even over the proxy variables. */
	assert_string_equal(sbx_env_get(e, "HTTPS_PROXY"), "http://x:1");
	assert_string_equal(sbx_env_get(e, "https_proxy"), "http://127.0.0.1:3128");
	sbx_env_free(e);

	/* No PATH anywhere: the default. */
	char *bare[] = {NULL};
	e = sbx_env_build(bare, true, NULL, NULL, 0, err, sizeof(err));
	assert_non_null(e);
	assert_string_equal(sbx_env_get(e, "PATH"), SBX_DEFAULT_PATH);
	sbx_env_free(e);
}

static void
env_marks(void **state)
{
	char *caller[] = {"AIRLOCK_TASK=outer", "AIRLOCK_POLICY=outer.yaml", "X=1", NULL};
	struct sbx_env_marks m = {.task = "0123abcd", .policy = "pypi"};
	char err[256];
	char **e = sbx_env_build(caller, false, &m, NULL, 0, err, sizeof(err));

	assert_non_null(e);
	assert_string_equal(sbx_env_get(e, "AIRLOCK_TASK"), "0123abcd");
	assert_string_equal(sbx_env_get(e, "AIRLOCK_POLICY"), "pypi");
	assert_int_equal(env_count(e, "AIRLOCK_TASK"), 1);
	sbx_env_free(e);
	/* No marks: an outer run's are dropped all the same. */
	e = sbx_env_build(caller, false, NULL, NULL, 0, err, sizeof(err));
	assert_non_null(e);
	assert_null(sbx_env_get(e, "AIRLOCK_TASK"));
	assert_null(sbx_env_get(e, "AIRLOCK_POLICY"));
	assert_string_equal(sbx_env_get(e, "X"), "1");
	sbx_env_free(e);
}

/* --cache: its variables replace the caller's, and --env still wins. */
static void
env_cache(void **state)
{
	char *caller[] = {"PIP_CACHE_DIR=/home/u/.cache/pip", "CARGO_HOME=/home/u/.cargo", NULL};
	const char *args[] = {"CARGO_HOME=/elsewhere"};
	struct sbx_env_marks m = {.cache = true};
	char err[256];
	char **e = sbx_env_build(caller, false, &m, args, 1, err, sizeof(err));

	assert_non_null(e);
	assert_string_equal(sbx_env_get(e, "PIP_CACHE_DIR"), SBX_CACHE_PATH "/pip");
	assert_int_equal(env_count(e, "PIP_CACHE_DIR"), 1);
	assert_string_equal(sbx_env_get(e, "XDG_CACHE_HOME"), SBX_CACHE_PATH "/xdg");
	assert_string_equal(sbx_env_get(e, "npm_config_cache"), SBX_CACHE_PATH "/npm");
	assert_string_equal(sbx_env_get(e, "GOMODCACHE"), SBX_CACHE_PATH "/go/mod");
	assert_string_equal(sbx_env_get(e, "CARGO_HOME"), "/elsewhere");
	sbx_env_free(e);
	/* Without --cache nothing of it. */
	e = sbx_env_build(caller, true, NULL, NULL, 0, err, sizeof(err));
	assert_non_null(e);
	assert_null(sbx_env_get(e, "PIP_CACHE_DIR"));
	assert_null(sbx_env_get(e, "XDG_CACHE_HOME"));
	sbx_env_free(e);
}

static void
opts_cache(void **state)
{
	struct sbx_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "run", "-p", "x", "--cache", "/c", "--", "true"), 0);
	assert_string_equal(o.cache, "/c");
	assert_false(o.cache_shared);
	assert_int_equal(
	        PARSE(&o, err, "run", "-p", "x", "--cache-shared", "--cache", "c", "true"), 0);
	assert_string_equal(o.cache, "c");
	assert_true(o.cache_shared);
	assert_int_equal(PARSE(&o, err, "run", "-p", "x", "--cache", "", "true"), -1);
	assert_string_equal(err, "--cache: empty path");
	assert_int_equal(PARSE(&o, err, "run", "-p", "x", "--cache-shared", "true"), -1);
	assert_string_equal(err, "--cache-shared without --cache DIR");
}

static void
env_bad_names(void **state)
{
	char *caller[] = {NULL};
	char err[256];
	const char *bad[] = {"=v", "1X=v", "A-B=v", "", "A B"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_null(sbx_env_build(caller, false, NULL, &bad[i], 1, err, sizeof(err)));
		assert_non_null(strstr(err, "--env"));
	}
}

static void
env_too_big(void **state)
{
	static char big[SBX_ENV_MAX_BYTES];
	char *caller[] = {big, NULL};
	char err[256];

	memset(big, 'a', sizeof(big) - 1);
	big[0] = 'B';
	big[1] = '=';
	assert_null(sbx_env_build(caller, false, NULL, NULL, 0, err, sizeof(err)));
	assert_non_null(strstr(err, "too large"));
}

/* The filter embedded at build time is what libseccomp compiles here and
 * now: a change to the rules without a rebuild of the header, or a
 * generator that wrote something else, fails. */
static void
seccomp_prebuilt_matches_compile(void **state)
{
	struct sbx_filter built, compiled;
	char err[256];

	(void)state;
	assert_int_equal(sbx_seccomp_build(&built, err, sizeof(err)), 0);
	assert_int_equal(sbx_seccomp_compile(&compiled, err, sizeof(err)), 0);
	assert_true(built.len > 10);
	assert_int_equal(built.len, compiled.len);
	assert_memory_equal(built.insns, compiled.insns, built.len * sizeof(built.insns[0]));
	sbx_seccomp_free(&built);
	sbx_seccomp_free(&compiled);
	assert_null(built.insns);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(opts_full),
	        cmocka_unit_test(opts_cmd_flags_stay_cmds),
	        cmocka_unit_test(opts_errors),
	        cmocka_unit_test(opts_mount_limit),
	        cmocka_unit_test(status_mapping),
	        cmocka_unit_test(env_default_passes_caller),
	        cmocka_unit_test(env_clear_and_args),
	        cmocka_unit_test(env_marks),
	        cmocka_unit_test(env_cache),
	        cmocka_unit_test(opts_cache),
	        cmocka_unit_test(env_bad_names),
	        cmocka_unit_test(env_too_big),
	        cmocka_unit_test(opts_log_stdout_refused),
	        cmocka_unit_test(opts_log_budget),
	        cmocka_unit_test(seccomp_prebuilt_matches_compile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
