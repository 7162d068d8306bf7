/* bench-policy: compile time, lookup rate and memory of the policy matcher
 * on generated policies of 1,000 / 10,000 / 100,000 rules (60% exact
 * names, 25% wildcards, 15% cidr; 10% with explicit ports), next to the
 * obvious alternative a user would write first: a linear scan over the
 * rules with a suffix compare (what simple allowlist filters do).
 *
 *   bench-policy [SECONDS-PER-MEASUREMENT]   (default 0.5)
 *
 * Each size runs in its own child so its peak RSS (getrusage ru_maxrss,
 * measured after the YAML text and query list exist, so only load +
 * compile count) is its own. Queries are precomputed: half hits (exact
 * names and names 1-3 labels under a wildcard), half misses (unknown
 * names, apexes of wildcards, look-alike suffixes). No network. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "policy/policy.h"

#define N_QUERIES (1u << 16)

/* CPU time of this (single-threaded) process: the rate of one core even
 * when the machine is shared with other work. */
static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift: deterministic, so every run benchmarks the same policy */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t
rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

enum kind { K_EXACT, K_WILD, K_CIDR };

struct gen_rule {
	enum kind kind;
	char text[64]; /* name, suffix (without "*."), or cidr */
	uint32_t v4;
	unsigned plen;
};

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len)
			break;
		b->cap = b->cap * 2 + 4096;
		if ((b->p = realloc(b->p, b->cap)) == NULL)
			abort();
	}
	b->len += (size_t)n;
}

static struct gen_rule *
gen_rules(uint32_t n, struct buf *yaml)
{
	struct gen_rule *r = calloc(n, sizeof(*r));

	buf_printf(yaml, "version: 1\nname: bench\nallow:\n");
	for (uint32_t i = 0; i < n; i++) {
		uint32_t pick = rng() % 100;

		if (pick < 60) {
			r[i].kind = K_EXACT;
			snprintf(r[i].text, sizeof(r[i].text), "n%u.z%u.test", i, rng() % 1000);
			buf_printf(yaml, "  - host: %s\n", r[i].text);
		} else if (pick < 85) {
			r[i].kind = K_WILD;
			snprintf(r[i].text, sizeof(r[i].text), "w%u.test", i);
			buf_printf(yaml, "  - host: \"*.%s\"\n", r[i].text);
		} else {
			r[i].kind = K_CIDR;
			r[i].plen = 16 + rng() % 17; /* /16 .. /32 */
			r[i].v4 = (rng() | 0x0b000000u) & 0x7fffffffu;
			r[i].v4 &= r[i].plen == 0 ? 0 : ~0u << (32 - r[i].plen);
			snprintf(r[i].text, sizeof(r[i].text), "%u.%u.%u.%u/%u", r[i].v4 >> 24,
			         (r[i].v4 >> 16) & 255, (r[i].v4 >> 8) & 255, r[i].v4 & 255,
			         r[i].plen);
			buf_printf(yaml, "  - cidr: %s\n", r[i].text);
		}
		if (rng() % 10 == 0)
			buf_printf(yaml, "    ports: [443, \"8000-8100\"]\n");
	}
	return r;
}

struct query {
	char name[96];
	uint32_t v4;
};

static struct query *
gen_queries(const struct gen_rule *r, uint32_t n)
{
	struct query *q = calloc(N_QUERIES, sizeof(*q));

	for (uint32_t i = 0; i < N_QUERIES; i++) {
		const struct gen_rule *g = &r[rng() % n];
		uint32_t miss = rng() % 2;

		q[i].v4 = rng();
		if (g->kind == K_CIDR) {
			/* an address inside (hit) or just random (mostly miss) */
			q[i].v4 = miss ? rng()
			               : g->v4 | (rng() & (g->plen == 32 ? 0 : ~0u >> g->plen));
			snprintf(q[i].name, sizeof(q[i].name), "cdn%u.example.org", rng() % 100000);
		} else if (!miss && g->kind == K_EXACT) {
			snprintf(q[i].name, sizeof(q[i].name), "%s", g->text);
		} else if (!miss) {
			unsigned depth = 1 + rng() % 3;

			if (depth == 1)
				snprintf(q[i].name, sizeof(q[i].name), "a%u.%s", rng() % 100,
				         g->text);
			else if (depth == 2)
				snprintf(q[i].name, sizeof(q[i].name), "b.a%u.%s", rng() % 100,
				         g->text);
			else
				snprintf(q[i].name, sizeof(q[i].name), "c.b.a%u.%s", rng() % 100,
				         g->text);
		} else {
			switch (rng() % 3) {
			case 0: /* unknown name */
				snprintf(q[i].name, sizeof(q[i].name), "x%u.y%u.example.net", rng(),
				         rng() % 1000);
				break;
			case 1: /* apex of a wildcard or a parent of an exact name */
				snprintf(q[i].name, sizeof(q[i].name), "%s",
				         g->kind == K_WILD ? g->text : strchr(g->text, '.') + 1);
				break;
			default: /* look-alike suffix */
				snprintf(q[i].name, sizeof(q[i].name), "evil%s.attacker.test",
				         g->text);
				break;
			}
		}
	}
	return q;
}

/* The baseline: every query against every rule, deny-wins semantics kept
 * (all rules are allow here so the first match decides). */
static int
naive_match(const struct gen_rule *r, uint32_t n, const char *name)
{
	size_t nl = strlen(name);

	for (uint32_t i = 0; i < n; i++) {
		if (r[i].kind == K_EXACT) {
			if (strcmp(name, r[i].text) == 0)
				return 1;
		} else if (r[i].kind == K_WILD) {
			size_t sl = strlen(r[i].text);

			if (nl > sl + 1 && name[nl - sl - 1] == '.' &&
			    memcmp(name + nl - sl, r[i].text, sl) == 0)
				return 1;
		}
	}
	return 0;
}

static void
run_size(uint32_t n, double secs)
{
	struct buf yaml = {0};
	struct gen_rule *rules;
	struct query *q;
	struct policy_diag d = {0};
	struct policy *p;
	struct rusage ru0, ru1;
	struct mallinfo2 m0, m1;
	double t0, t1, load_ms, host_rate, addr_rate, naive_rate;
	uint64_t iters, allow = 0;
	volatile uint64_t sink;

	rng_state = 0x9e3779b97f4a7c15ull ^ n;
	rules = gen_rules(n, &yaml);
	q = gen_queries(rules, n);

	getrusage(RUSAGE_SELF, &ru0);
	m0 = mallinfo2();
	t0 = now_s();
	p = policy_load_buffer("bench.yaml", yaml.p, yaml.len, &d);
	t1 = now_s();
	getrusage(RUSAGE_SELF, &ru1);
	m1 = mallinfo2();
	if (p == NULL) {
		fprintf(stderr, "bench-policy: generated policy refused: %s\n",
		        d.n_lines ? d.lines[0] : "?");
		exit(1);
	}
	load_ms = (t1 - t0) * 1e3;

	/* names: one core, the precomputed list over and over until secs */
	iters = 0;
	t0 = now_s();
	do {
		for (uint32_t i = 0; i < N_QUERIES; i++) {
			struct policy_verdict v;

			policy_match_host(p, q[i].name, 443, &v);
			allow += v.action == POLICY_ALLOW;
		}
		iters += N_QUERIES;
		t1 = now_s();
	} while (t1 - t0 < secs);
	host_rate = (double)iters / (t1 - t0);
	sink = allow;

	iters = 0;
	allow = 0;
	t0 = now_s();
	do {
		for (uint32_t i = 0; i < N_QUERIES; i++) {
			struct sockaddr_in sin = {.sin_family = AF_INET};
			struct policy_verdict v;

			sin.sin_addr.s_addr = htonl(q[i].v4);
			policy_match_addr(p, (struct sockaddr *)&sin, 443, &v);
			allow += v.action == POLICY_ALLOW;
		}
		iters += N_QUERIES;
		t1 = now_s();
	} while (t1 - t0 < secs);
	addr_rate = (double)iters / (t1 - t0);
	sink += allow;

	/* baseline: bounded in time, at least one query */
	iters = 0;
	t0 = now_s();
	do {
		sink += (uint64_t)naive_match(rules, n, q[iters % N_QUERIES].name);
		iters++;
		t1 = now_s();
	} while (t1 - t0 < secs && iters < N_QUERIES);
	naive_rate = (double)iters / (t1 - t0);
	(void)sink;

	printf("%8u %9.2f %9.1f %9.1f %9.1f %12.2f %12.2f %12.3f %9.0fx\n", n,
	       (double)yaml.len / 1048576.0, load_ms,
	       (double)(ru1.ru_maxrss - ru0.ru_maxrss) / 1024.0,
	       (double)(m1.uordblks - m0.uordblks) / 1048576.0, host_rate / 1e6, addr_rate / 1e6,
	       naive_rate / 1e6, host_rate / naive_rate);
	fflush(stdout);
	policy_free(p);
	policy_diag_clear(&d);
	free(q);
	free(rules);
	free(yaml.p);
}

int
main(int argc, char **argv)
{
	static const uint32_t sizes[] = {1000, 10000, 100000};
	double secs = argc > 1 ? strtod(argv[1], NULL) : 0.5;

	if (secs <= 0 || secs > 60) {
		fprintf(stderr, "usage: bench-policy [SECONDS-PER-MEASUREMENT (0-60]]\n");
		return 2;
	}
	printf("policy matcher, one core; lookups/s over %u precomputed queries (half hits)\n",
	       N_QUERIES);
	printf("baseline: linear scan with suffix compare (names only)\n\n");
	printf("%8s %9s %9s %9s %9s %12s %12s %12s %10s\n", "rules", "yaml MiB", "load ms",
	       "peak MiB", "heap MiB", "host Mlook/s", "addr Mlook/s", "naive Mlk/s", "vs naive");
	fflush(stdout);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			run_size(sizes[i], secs);
			_exit(0);
		}
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "bench-policy: size %u failed\n", sizes[i]);
			return 1;
		}
	}
	printf("\nTimes are CPU time of one core (CLOCK_PROCESS_CPUTIME_ID).\n"
	       "load ms: policy_load_buffer (libyaml parse + validation + compile);\n"
	       "peak MiB: ru_maxrss growth during that load; heap MiB: malloc'd bytes the\n"
	       "compiled policy keeps (mallinfo2).\n");
	return 0;
}
