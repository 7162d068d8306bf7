/* bench-mint: a leaf certificate through the broker (issue 17): the
 * worker's MINT, the confined broker's decision and signing, its LEAF
 * back, one at a time over the real socketpair.
 *
 *   bench-mint [N]   (default 2000)
 *
 * Prints, for N distinct names (every one a miss: signed) and then N
 * repeats (hits: from the broker's cache): the wall time per round trip,
 * and the broker's CPU per leaf (its rusage, read when it has exited).
 * No network: the broker resolves nothing for a MINT. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/msg.h"
#include "policy/policy.h"
#include "tls/ca.h"

static const char yaml[] = "version: 1\n"
                           "allow:\n"
                           "  - host: '*.bench.test'\n"
                           "    ports: [443]\n"
                           "    inspect: {http: {access: read-only}}\n";

static double
wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One MINT and its LEAF; exits on anything else. */
static void
mint(int fd, uint32_t id, const char *name)
{
	struct broker_req_mint m;
	_Alignas(8) unsigned char buf[sizeof(struct broker_leaf) + 1];
	struct broker_leaf l;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n;

	if (broker_build_mint(&m, id, name, 443) != 0 || send(fd, &m, sizeof(m), 0) != sizeof(m) ||
	    poll(&pfd, 1, 5000) != 1 || (n = recv(fd, buf, sizeof(buf), 0)) < 0 ||
	    broker_parse_leaf(buf, (size_t)n, &l) != 0 || l.h.id != id) {
		fprintf(stderr, "bench-mint: %s: no leaf\n", name);
		exit(1);
	}
}

int
main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
	struct tlsca_config cc = {.label = "bench", .cache_max = 100000, .mint_limit = 1000000};
	struct broker_cfg cfg;
	struct policy_diag d = {0};
	struct policy *p = policy_load_buffer("bench.yaml", yaml, sizeof(yaml) - 1, &d);
	struct tlsca *ca;
	struct rusage ru;
	char err[256], name[64];
	double t0, t_miss, t_hit;
	pid_t pid;
	int fd, status;

	if (n < 1 || n > 100000 || p == NULL ||
	    (ca = tlsca_new(&cc, err, sizeof(err))) == NULL) {
		fprintf(stderr, "usage: bench-mint [N]  (1..100000)\n");
		return 2;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.policy = p;
	cfg.ca = ca;
	if ((fd = broker_spawn(&cfg, &pid, err, sizeof(err))) < 0) {
		fprintf(stderr, "bench-mint: %s\n", err);
		return 1;
	}
	t0 = wall_s();
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "n%ld.bench.test", i);
		mint(fd, (uint32_t)i + 1, name);
	}
	t_miss = wall_s() - t0;
	t0 = wall_s();
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "n%ld.bench.test", i);
		mint(fd, (uint32_t)(n + i + 1), name);
	}
	t_hit = wall_s() - t0;
	close(fd);
	if (waitpid(pid, &status, 0) != pid || getrusage(RUSAGE_CHILDREN, &ru) != 0)
		return 1;
	printf("mint round trips: %ld misses %.3f ms each (wall), %ld hits %.3f ms each (wall)\n", n,
	       t_miss * 1e3 / (double)n, n, t_hit * 1e3 / (double)n);
	printf("broker CPU, all %ld requests: %.3f ms per request (user+sys, misses and hits "
	       "together)\n",
	       2 * n,
	       ((double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	        (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6) *
	               1e3 / (double)(2 * n));
	tlsca_free(ca);
	policy_free(p);
	return 0;
}
