/* bench-log: how fast `airlock log summary` reads a big egress log, and in
 * how much memory, side by side with what a user would otherwise reach
 * for (jq, a python3 script) doing a smaller job (per-destination counts
 * and bytes only).
 *
 *   bench-log [--lines N] [--airlock PATH] [--timeout SECONDS] [--keep]
 *
 * Writes N lines (default 1,000,000) with the real writer (elog/elog.c) to
 * a temporary file, reporting the writer's rate, then runs each reader on
 * it once as a child process and reports wall time and peak RSS (wait4's
 * ru_maxrss); a reader still running after --timeout (default 120 s) is
 * stopped and reported as such. Nothing touches the network. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "elog/elog.h"

#define MAX_LINES 10000000ull

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A realistic mix: 20 tasks, 1000 names over 50 parents, DNS queries,
 * allows with bytes, denies, a few blocked packets. */
static int
generate(const char *path, uint64_t lines)
{
	char err[256], host[64], ip[32], task[16], url[96];
	struct elog *log = elog_open(path, err, sizeof(err));
	const char *argv[] = {"pip", "install", "-r", "requirements.txt"};
	uint64_t written = 0;
	unsigned seed = 12345;

	if (log == NULL) {
		fprintf(stderr, "bench-log: %s\n", err);
		return -1;
	}
	for (int t = 0; t < 20 && written < lines; t++) {
		uint64_t per = (lines - written) / (uint64_t)(20 - t);
		struct elog_task_start ts = {.policy = "pypi",
		                             .policy_sha256 = "ab",
		                             .mode = "enforce",
		                             .argv = argv,
		                             .argc = 4,
		                             .selftest = "pass"};
		struct elog_task_end te = {0};

		snprintf(task, sizeof(task), "task-%02d", t);
		elog_set_task(log, task);
		if (per < 2)
			per = 2;
		elog_task_start(log, &ts);
		written++;
		for (uint64_t i = 0; i + 2 < per; i++) {
			unsigned r = rand_r(&seed);
			unsigned h = r % 1000;
			const char *answers[] = {ip};
			struct elog_event ev = {.port = 443, .host = host, .ip = ip};

			snprintf(host, sizeof(host), "n%u.p%u.example.test", h, h % 50);
			snprintf(ip, sizeof(ip), "192.0.2.%u", h % 250 + 1);
			switch (r % 10) {
			case 0:
			case 1:
				ev.kind = "dns";
				ev.port = -1;
				ev.ip = NULL;
				ev.qtype = "A";
				ev.rcode = "NOERROR";
				ev.answers = answers;
				ev.n_answers = 1;
				ev.verdict = "allow";
				ev.rule = "policies/pypi.yaml:33";
				break;
			case 2:
				ev.kind = "tls";
				ev.sni = host;
				ev.verdict = "deny";
				ev.reason = "no match";
				ev.bytes_up = 517;
				break;
			case 3:
				ev.kind = "packet";
				ev.host = NULL;
				ev.proto = "udp";
				ev.verdict = "deny";
				ev.reason = "udp is not proxied";
				break;
			case 4:
				ev.kind = "http";
				ev.port = 80;
				ev.method = "GET";
				snprintf(url, sizeof(url), "http://%s/simple/pkg-%u/", host,
				         r % 977);
				ev.url = url;
				ev.verdict = "allow";
				ev.rule = "policies/pypi.yaml:35";
				ev.bytes_up = 300;
				ev.bytes_down = 4000 + r % 100000;
				break;
			default:
				ev.kind = "connect";
				ev.verdict = "allow";
				ev.rule = "policies/pypi.yaml:33";
				ev.bytes_up = 1800 + r % 1000;
				ev.bytes_down = 40000 + r % 1000000;
				ev.duration_ms = r % 2000;
				break;
			}
			if (elog_event(log, &ev) < 0)
				goto fail;
			written++;
		}
		elog_totals(log, &te);
		te.duration_ms = 60000;
		if (elog_task_end(log, &te) < 0)
			goto fail;
		written++;
	}
	elog_free(log);
	return 0;
fail:
	fprintf(stderr, "bench-log: writing %s failed\n", path);
	elog_free(log);
	return -1;
}

struct result {
	double secs;
	double cpu; /* user + system seconds of the child */
	long maxrss_kb;
	int status;
};

static double timeout_s = 120;

static double
tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

/* Run argv with stdout to /dev/null; wall time and peak RSS of the child.
 * A child still running after timeout_s is killed (status -1). */
static int
run(char *const argv[], struct result *res)
{
	struct rusage ru;
	double t0 = now_s();
	pid_t pid = fork(), got;
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (fd >= 0)
			dup2(fd, STDOUT_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	for (;;) {
		struct timespec tick = {0, 5 * 1000 * 1000};

		got = wait4(pid, &st, WNOHANG, &ru);
		if (got < 0 && errno != EINTR)
			return -1;
		if (got == pid)
			break;
		if (now_s() - t0 > timeout_s) {
			kill(pid, SIGKILL);
			if (wait4(pid, &st, 0, &ru) < 0)
				return -1;
			res->secs = now_s() - t0;
			res->cpu = tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
			res->maxrss_kb = ru.ru_maxrss;
			res->status = -1;
			return 0;
		}
		nanosleep(&tick, NULL);
	}
	res->secs = now_s() - t0;
	res->cpu = tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
	res->maxrss_kb = ru.ru_maxrss;
	res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

static bool
have(const char *prog)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

static const char jq_prog[] =
        "reduce (inputs | select(.kind != \"task-start\" and .kind != \"task-end\")) as $e"
        " ({}; (($e.host // $e.ip) + \":\" + ($e.port | tostring)) as $k"
        " | .[$k].n += 1 | .[$k].up += $e.bytes_up | .[$k].down += $e.bytes_down)";

static const char py_prog[] =
        "import json, sys\n"
        "d = {}\n"
        "for line in open(sys.argv[1], 'rb'):\n"
        "    try:\n"
        "        e = json.loads(line)\n"
        "    except ValueError:\n"
        "        continue\n"
        "    if e.get('kind') in ('task-start', 'task-end'):\n"
        "        continue\n"
        "    k = '%s:%s' % (e.get('host') or e.get('ip'), e.get('port'))\n"
        "    s = d.setdefault(k, [0, 0, 0])\n"
        "    s[0] += 1; s[1] += e.get('bytes_up', 0); s[2] += e.get('bytes_down', 0)\n"
        "print(len(d))\n";

static void
report(const char *what, const struct result *r, const struct result *base)
{
	printf("%-44s %8.3f s %8.3f s %9ld KiB", what, r->secs, r->cpu, r->maxrss_kb);
	if (base != NULL && base->cpu > 0)
		printf("   %6.1fx the CPU of airlock", r->cpu / base->cpu);
	if (r->status == -1)
		printf("   (stopped after %.0f s: slower than that)", timeout_s);
	else if (r->status != 0)
		printf("   (exit %d)", r->status);
	putchar('\n');
	fflush(stdout);
}

/* The machine's load: wall times mean little when other work shares it. */
static void
print_load(void)
{
	char buf[128] = "";
	FILE *f = fopen("/proc/loadavg", "r");

	if (f != NULL) {
		if (fgets(buf, sizeof(buf), f) == NULL)
			buf[0] = '\0';
		fclose(f);
	}
	printf("load average: %s", buf[0] != '\0' ? buf : "unknown\n");
}

int
main(int argc, char **argv)
{
	const char *airlock = "cli/airlock";
	uint64_t lines = 1000000;
	bool keep = false;
	char path[] = "/tmp/airlock-bench-log-XXXXXX";
	struct stat st;
	struct result base, r;
	double t0;
	int fd;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--lines") == 0 && i + 1 < argc) {
			if (parse_uint(argv[++i], 10, MAX_LINES, &lines) < 0) {
				fprintf(stderr, "bench-log: --lines: 10..%llu\n", MAX_LINES);
				return 2;
			}
		} else if (strcmp(argv[i], "--airlock") == 0 && i + 1 < argc) {
			airlock = argv[++i];
		} else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			uint64_t t;
			if (parse_uint(argv[++i], 1, 3600, &t) < 0) {
				fprintf(stderr, "bench-log: --timeout: 1..3600 seconds\n");
				return 2;
			}
			timeout_s = (double)t;
		} else if (strcmp(argv[i], "--keep") == 0) {
			keep = true;
		} else {
			fprintf(stderr, "usage: bench-log [--lines N] [--airlock PATH] [--timeout "
			                "S] [--keep]\n");
			return 2;
		}
	}
	fd = mkstemp(path);
	if (fd < 0) {
		perror("bench-log: mkstemp");
		return 1;
	}
	close(fd);
	t0 = now_s();
	if (generate(path, lines) < 0) {
		unlink(path);
		return 1;
	}
	t0 = now_s() - t0;
	stat(path, &st);
	printf("log: %s, %" PRIu64 " lines, %.1f MiB\n", path, lines,
	       (double)st.st_size / 1048576.0);
	printf("writer (elog_event, one write(2) per line): %.3f s wall, %.0f lines/s\n\n", t0,
	       (double)lines / t0);
	fflush(stdout);
	print_load();
	printf("%-44s %10s %10s %13s\n", "reader", "wall", "CPU", "peak RSS");

	char *summary[] = {(char *)airlock, "log", "summary", path, NULL};
	if (run(summary, &base) < 0 || base.status != 0) {
		fprintf(stderr, "bench-log: %s log summary failed (status %d)\n", airlock,
		        base.status);
		if (!keep)
			unlink(path);
		return 1;
	}
	report("airlock log summary", &base, NULL);
	char *summary_json[] = {(char *)airlock, "log", "summary", "--json", path, NULL};
	if (run(summary_json, &r) == 0)
		report("airlock log summary --json", &r, &base);
	char *suggest[] = {(char *)airlock, "log", "suggest", path, NULL};
	if (run(suggest, &r) == 0)
		report("airlock log suggest", &r, &base);
	if (have("jq")) {
		char *jq[] = {"jq", "-n", (char *)jq_prog, path, NULL};
		if (run(jq, &r) == 0)
			report("jq -n 'reduce inputs ...' (counts+bytes)", &r, &base);
	} else {
		printf("jq: not installed, skipped\n");
	}
	if (have("python3")) {
		char *py[] = {"python3", "-c", (char *)py_prog, path, NULL};
		if (run(py, &r) == 0)
			report("python3 json.loads loop (counts+bytes)", &r, &base);
	}
	if (keep)
		printf("\nkept %s\n", path);
	else
		unlink(path);
	return 0;
}
