/* Matching rules: exact names, wildcards (any depth, never the apex),
 * ports (default 80 and 443, lists, ranges), cidr v4 and v6, deny wins,
 * no match is deny, IP literals only match cidr rules, includes. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/policy/util.h"

static const char *const base_yaml = "version: 1\n"                                /* 1 */
                                     "allow:\n"                                    /* 2 */
                                     "  - host: pypi.org\n"                        /* 3 */
                                     "  - host: \"*.pythonhosted.org\"\n"          /* 4 */
                                     "    ports: [443]\n"                          /* 5 */
                                     "  - host: Ssh.Example.COM.\n"                /* 6 */
                                     "    ports: [22, \"8000-8100\", 9000-9001]\n" /* 7 */
                                     "  - cidr: 203.0.113.0/24\n"                  /* 8 */
                                     "    ports: [22]\n"                           /* 9 */
                                     "  - cidr: 2001:db8::/32\n"                   /* 10 */
                                     "  - cidr: 198.51.100.7\n"                    /* 11 */
                                     "  - host: \"*.example.net\"\n"               /* 12 */
                                     "  - host: example.net\n"                     /* 13 */
                                     "    ports: [8080]\n"                         /* 14 */
                                     "deny:\n"                                     /* 15 */
                                     "  - host: upload.pypi.org\n"                 /* 16 */
                                     "  - host: \"*.bad.pythonhosted.org\"\n"      /* 17 */
                                     "  - host: pypi.org\n"                        /* 18 */
                                     "    ports: [80]\n"                           /* 19 */
                                     "  - cidr: 203.0.113.128/25\n"                /* 20 */
                                     "  - cidr: 2001:db8:dead::/48\n"              /* 21 */
                                     "    ports: [443]\n";                         /* 22 */

static int
setup(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(base_yaml, &d);

	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	policy_diag_clear(&d);
	*state = p;
	return p == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	policy_free(*state);
	return 0;
}

static void
expect_host(const struct policy *p, const char *name, uint16_t port, enum policy_action want,
            const char *where)
{
	struct policy_verdict v;

	policy_match_host(p, name, port, &v);
	if (v.action != want)
		fail_msg("%s:%u: action %d, expected %d", name, port, v.action, want);
	if (where == NULL)
		assert_null(v.where);
	else
		assert_string_equal(v.where, where);
}

static void
expect_addr(const struct policy *p, const char *a, uint16_t port, enum policy_action want,
            const char *where)
{
	struct sockaddr_storage ss;
	struct policy_verdict v;

	policy_match_addr(p, addr(&ss, a), port, &v);
	if (v.action != want)
		fail_msg("%s:%u: action %d, expected %d", a, port, v.action, want);
	if (where == NULL)
		assert_null(v.where);
	else
		assert_string_equal(v.where, where);
}

static void
test_exact(void **state)
{
	expect_host(*state, "pypi.org", 443, POLICY_ALLOW, "t.yaml:3");
	/* exact names do not cover subdomains */
	expect_host(*state, "www.pypi.org", 443, POLICY_NO_MATCH, NULL);
	expect_host(*state, "pypi.org.evil.test", 443, POLICY_NO_MATCH, NULL);
	expect_host(*state, "xpypi.org", 443, POLICY_NO_MATCH, NULL);
	expect_host(*state, "org", 443, POLICY_NO_MATCH, NULL);
	/* the rule was normalised (case, trailing dot) at load */
	expect_host(*state, "ssh.example.com", 22, POLICY_ALLOW, "t.yaml:6");
}

static void
test_wildcard(void **state)
{
	expect_host(*state, "files.pythonhosted.org", 443, POLICY_ALLOW, "t.yaml:4");
	expect_host(*state, "a.b.c.pythonhosted.org", 443, POLICY_ALLOW, "t.yaml:4");
	/* never the apex */
	expect_host(*state, "pythonhosted.org", 443, POLICY_NO_MATCH, NULL);
	/* a suffix match must be on a label boundary */
	expect_host(*state, "evilpythonhosted.org", 443, POLICY_NO_MATCH, NULL);
	/* wildcard and exact for the apex combine */
	expect_host(*state, "www.example.net", 80, POLICY_ALLOW, "t.yaml:12");
	expect_host(*state, "example.net", 80, POLICY_NO_MATCH, NULL);
	expect_host(*state, "example.net", 8080, POLICY_ALLOW, "t.yaml:13");
}

static void
test_ports(void **state)
{
	/* default ports are 80 and 443 and nothing else */
	expect_host(*state, "upload.example.net", 80, POLICY_ALLOW, "t.yaml:12");
	expect_host(*state, "upload.example.net", 443, POLICY_ALLOW, "t.yaml:12");
	expect_host(*state, "upload.example.net", 8443, POLICY_NO_MATCH, NULL);
	expect_host(*state, "upload.example.net", 0, POLICY_NO_MATCH, NULL);
	/* an explicit list replaces the default */
	expect_host(*state, "files.pythonhosted.org", 80, POLICY_NO_MATCH, NULL);
	expect_host(*state, "ssh.example.com", 443, POLICY_NO_MATCH, NULL);
	/* ranges, inclusive at both ends, quoted or plain */
	expect_host(*state, "ssh.example.com", 8000, POLICY_ALLOW, "t.yaml:6");
	expect_host(*state, "ssh.example.com", 8100, POLICY_ALLOW, "t.yaml:6");
	expect_host(*state, "ssh.example.com", 8101, POLICY_NO_MATCH, NULL);
	expect_host(*state, "ssh.example.com", 7999, POLICY_NO_MATCH, NULL);
	expect_host(*state, "ssh.example.com", 9001, POLICY_ALLOW, "t.yaml:6");
	expect_host(*state, "ssh.example.com", 9002, POLICY_NO_MATCH, NULL);
}

static void
test_deny_wins(void **state)
{
	/* deny exact over allow exact, only on the deny's ports */
	expect_host(*state, "pypi.org", 80, POLICY_DENY, "t.yaml:18");
	expect_host(*state, "pypi.org", 443, POLICY_ALLOW, "t.yaml:3");
	expect_host(*state, "upload.pypi.org", 443, POLICY_DENY, "t.yaml:16");
	/* deny wildcard over allow wildcard, any depth */
	expect_host(*state, "x.bad.pythonhosted.org", 443, POLICY_DENY, "t.yaml:17");
	expect_host(*state, "y.x.bad.pythonhosted.org", 443, POLICY_DENY, "t.yaml:17");
	expect_host(*state, "bad.pythonhosted.org", 443, POLICY_ALLOW, "t.yaml:4");
	/* deny cidr over allow cidr, on the deny's ports (default 80, 443) */
	expect_addr(*state, "203.0.113.200", 443, POLICY_DENY, "t.yaml:20");
	expect_addr(*state, "203.0.113.200", 22, POLICY_ALLOW, "t.yaml:8");
	expect_addr(*state, "203.0.113.5", 22, POLICY_ALLOW, "t.yaml:8");
	expect_addr(*state, "2001:db8:dead::1", 443, POLICY_DENY, "t.yaml:21");
	expect_addr(*state, "2001:db8:dead::1", 80, POLICY_ALLOW, "t.yaml:10");
}

static void
test_no_match(void **state)
{
	expect_host(*state, "evil.test", 443, POLICY_NO_MATCH, NULL);
	expect_host(*state, "", 443, POLICY_NO_MATCH, NULL);
	expect_addr(*state, "192.0.2.1", 443, POLICY_NO_MATCH, NULL);
	expect_addr(*state, "2001:db9::1", 443, POLICY_NO_MATCH, NULL);
}

static void
test_cidr(void **state)
{
	expect_addr(*state, "203.0.113.0", 22, POLICY_ALLOW, "t.yaml:8");
	expect_addr(*state, "203.0.113.127", 22, POLICY_ALLOW, "t.yaml:8");
	expect_addr(*state, "203.0.114.1", 22, POLICY_NO_MATCH, NULL);
	expect_addr(*state, "203.0.113.5", 443, POLICY_NO_MATCH, NULL);
	/* a bare address is a /32 */
	expect_addr(*state, "198.51.100.7", 443, POLICY_ALLOW, "t.yaml:11");
	expect_addr(*state, "198.51.100.8", 443, POLICY_NO_MATCH, NULL);
	/* v6 */
	expect_addr(*state, "2001:db8::1", 443, POLICY_ALLOW, "t.yaml:10");
	expect_addr(*state, "2001:db8:ffff:ffff::1", 80, POLICY_ALLOW, "t.yaml:10");
	/* a v4-mapped v6 address matches the v4 rules */
	expect_addr(*state, "::ffff:203.0.113.5", 22, POLICY_ALLOW, "t.yaml:8");
	expect_addr(*state, "::ffff:203.0.113.200", 80, POLICY_DENY, "t.yaml:20");
	/* other families never match */
	expect_addr(*state, "not-an-address", 22, POLICY_NO_MATCH, NULL);
}

static void
test_cidr_allows(void **state)
{
	struct sockaddr_storage ss;

	assert_true(policy_cidr_allows(*state, addr(&ss, "203.0.113.5"), 22));
	assert_false(policy_cidr_allows(*state, addr(&ss, "203.0.113.5"), 443));
	assert_false(policy_cidr_allows(*state, addr(&ss, "203.0.113.200"), 443));
	assert_false(policy_cidr_allows(*state, addr(&ss, "10.0.0.1"), 22));
}

static void
test_ip_literal_never_matches_host(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str("version: 1\nallow:\n  - host: \"*.2.3.4.example\"\n"
	                            "  - host: \"*.in-addr.arpa\"\n",
	                            &d);

	assert_non_null(p);
	/* names never end in a numeric label: IP literals are refused here */
	expect_host(*state, "203.0.113.5", 443, POLICY_NO_MATCH, NULL);
	expect_host(*state, "198.51.100.7", 443, POLICY_NO_MATCH, NULL);
	expect_host(p, "1.2.3.4", 443, POLICY_NO_MATCH, NULL);
	expect_host(p, "2001:db8::1", 443, POLICY_NO_MATCH, NULL);
	expect_host(p, "x.2.3.4.example", 443, POLICY_ALLOW, "t.yaml:3");
	policy_free(p);
	policy_diag_clear(&d);
}

static void
test_first_rule_decides(void **state)
{
	struct policy_diag d = {0};
	struct policy *p =
	        load_str("version: 1\nallow:\n  - host: \"*.a.test\"\n  - host: \"*.b.a.test\"\n"
	                 "  - host: c.b.a.test\n"
	                 "deny:\n  - host: \"*.z.test\"\n  - host: \"*.y.z.test\"\n",
	                 &d);

	assert_non_null(p);
	expect_host(p, "c.b.a.test", 443, POLICY_ALLOW, "t.yaml:3");
	expect_host(p, "x.y.z.test", 443, POLICY_DENY, "t.yaml:7");
	policy_free(p);
	policy_diag_clear(&d);
}

static void
test_empty_policy_denies(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str("version: 1\n", &d);
	struct sockaddr_storage ss;
	struct policy_verdict v;

	assert_non_null(p);
	assert_string_equal(policy_name(p), "t");
	assert_int_equal(policy_mode(p), POLICY_MODE_ENFORCE);
	expect_host(p, "pypi.org", 443, POLICY_NO_MATCH, NULL);
	policy_match_addr(p, addr(&ss, "203.0.113.1"), 443, &v);
	assert_int_equal(v.action, POLICY_NO_MATCH);
	policy_free(p);
	policy_diag_clear(&d);
}

static void
test_mode_and_meta(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str("version: 1\nname: my-pol\ndescription: x\nmode: audit\n", &d);

	assert_non_null(p);
	assert_string_equal(policy_name(p), "my-pol");
	assert_int_equal(policy_mode(p), POLICY_MODE_AUDIT);
	policy_set_mode(p, POLICY_MODE_ENFORCE);
	assert_int_equal(policy_mode(p), POLICY_MODE_ENFORCE);
	/* sha256 of the bytes: printf 'version: 1\nname: my-pol\n...' | sha256sum */
	assert_int_equal(strlen(policy_sha256(p)), 64);
	policy_free(p);
	policy_diag_clear(&d);
}

static void
test_sha256(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str("version: 1\n", &d);

	assert_non_null(p);
	/* echo 'version: 1' | sha256sum */
	assert_string_equal(policy_sha256(p),
	                    "09bfcc6a14b83e2192b8673677725c84883ee9cd0c70e45c9ec09daa8f2b2847");
	policy_free(p);
	policy_diag_clear(&d);
}

/* Includes: relative to the including file, diamonds loaded once, mode
 * only from the top file, and the sha256 covers every file in load order
 * (each file, then its includes). */
static void
write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
test_includes(void **state)
{
	char dir[] = "/tmp/airlock-policy-test.XXXXXX", path[512], where[600];
	struct policy_diag d = {0};
	struct policy *p;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sub", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	write_file(dir, "top.yaml",
	           "version: 1\ninclude: [sub/a.yaml, ./b.yaml]\nallow:\n  - host: top.test\n");
	write_file(dir, "sub/a.yaml",
	           "version: 1\nmode: audit\ninclude: [../b.yaml]\nallow:\n  - host: a.test\n");
	write_file(dir, "b.yaml", "version: 1\ndeny:\n  - host: top.test\n");

	snprintf(path, sizeof(path), "%s/top.yaml", dir);
	p = policy_load(path, &d);
	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	assert_non_null(p);
	assert_string_equal(policy_name(p), "top");
	/* an included file's mode never changes the includer's */
	assert_int_equal(policy_mode(p), POLICY_MODE_ENFORCE);
	snprintf(where, sizeof(where), "%s/sub/a.yaml:5", dir);
	expect_host(p, "a.test", 443, POLICY_ALLOW, where);
	/* the deny comes from b.yaml, reached through sub/a.yaml first */
	snprintf(where, sizeof(where), "%s/sub/../b.yaml:3", dir);
	expect_host(p, "top.test", 443, POLICY_DENY, where);
	assert_string_equal(policy_sha256(p),
	                    "31026df7bb3f342108de83b4a1980928b56e31051b4f0c70e480b3076bd6748f");
	/* Every file read, once, in load order: as opened (what airlock run
	 * keeps out of the sandbox's reach, as the next run names it) and
	 * resolved. */
	{
		const struct policy_source *src;
		const char *want[][2] = {{"top.yaml", "top.yaml"},
		                         {"sub/a.yaml", "sub/a.yaml"},
		                         {"sub/../b.yaml", "b.yaml"}};
		char real[PATH_MAX], want_real[PATH_MAX + 64];

		assert_non_null(realpath(dir, real));
		assert_int_equal(policy_sources(p, &src), 3);
		for (size_t i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, want[i][0]);
			assert_string_equal(src[i].path, path);
			snprintf(want_real, sizeof(want_real), "%s/%s", real, want[i][1]);
			assert_string_equal(src[i].real, want_real);
		}
	}
	policy_free(p);
	policy_diag_clear(&d);

	/* From memory: only what it includes. */
	{
		const struct policy_source *src;
		char yaml[600];

		snprintf(yaml, sizeof(yaml), "version: 1\ninclude: [%s/b.yaml]\n", dir);
		p = policy_load_buffer("mem.yaml", yaml, strlen(yaml), &d);
		assert_non_null(p);
		assert_int_equal(policy_sources(p, &src), 1);
		snprintf(path, sizeof(path), "%s/b.yaml", dir);
		assert_string_equal(src[0].path, path);
		policy_free(p);
		p = policy_load_buffer("mem.yaml", "version: 1\n", 11, &d);
		assert_non_null(p);
		assert_int_equal(policy_sources(p, &src), 0);
		policy_free(p);
	}

	/* the same file twice is not a cycle; a file including itself is */
	write_file(dir, "self.yaml", "version: 1\ninclude: [self.yaml]\n");
	snprintf(path, sizeof(path), "%s/self.yaml", dir);
	assert_null(policy_load(path, &d));
	assert_int_equal(d.n_lines, 1);
	assert_non_null(strstr(d.lines[0], "self.yaml:2:11: include cycle: "));
	policy_diag_clear(&d);

	snprintf(path, sizeof(path), "rm -r '%s'", dir);
	assert_int_equal(system(path), 0);
}

/* The hash tables and filters against a linear scan: 3,000 random rules
 * (exact, wildcard, v4 cidr of every prefix length, allow and deny, some
 * with ports) and 8,000 random queries must give the same verdict and
 * the same deciding rule. */
struct naive_rule {
	int kind; /* 0 exact, 1 wildcard, 2 cidr */
	int deny;
	char name[32];
	uint32_t net;
	unsigned plen;
	int port443_only;
};

static uint32_t
xrand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

static int
naive_covers(const struct naive_rule *r, const char *name, uint32_t a, uint16_t port)
{
	size_t nl = strlen(name), sl = strlen(r->name);

	if (r->port443_only ? port != 443 : port != 443 && port != 80)
		return 0;
	if (r->kind == 0)
		return name[0] != '\0' && strcmp(name, r->name) == 0;
	if (r->kind == 1)
		return nl > sl + 1 && name[nl - sl - 1] == '.' &&
		       strcmp(name + nl - sl, r->name) == 0;
	if (name[0] != '\0')
		return 0;
	return r->plen == 0 || ((a ^ r->net) >> (32 - r->plen)) == 0;
}

static void
test_against_linear_scan(void **state)
{
	enum { N_RULES = 3000, N_QUERIES = 8000 };
	struct naive_rule *r = calloc(N_RULES, sizeof(*r));
	char *yaml = malloc(N_RULES * 80 + 64), **where = calloc(N_RULES, sizeof(char *));
	size_t off;
	uint64_t seed = 0x1234567887654321ull;
	struct policy_diag d = {0};
	struct policy *p;

	(void)state;
	/* allow and deny lists; rules are written in index order so that
	 * rule i sits on line i + 4 (deny list after the allow list) */
	off = (size_t)snprintf(yaml, 64, "version: 1\nallow:\n");
	for (int i = 0; i < N_RULES; i++) {
		struct naive_rule *x = &r[i];
		uint32_t pick = xrand(&seed) % 10;

		x->deny = i >= N_RULES * 9 / 10;
		x->port443_only = xrand(&seed) % 4 == 0;
		if (i == N_RULES * 9 / 10)
			off += (size_t)snprintf(yaml + off, 16, "deny:\n");
		if (pick < 4) {
			x->kind = 0;
			snprintf(x->name, sizeof(x->name), "h%u.d%u.test", xrand(&seed) % 500,
			         xrand(&seed) % 20);
			off += (size_t)snprintf(yaml + off, 80, "  - {host: %s%s}\n", x->name,
			                        x->port443_only ? ", ports: [443]" : "");
		} else if (pick < 7) {
			x->kind = 1;
			snprintf(x->name, sizeof(x->name), "d%u.test", xrand(&seed) % 20);
			if (xrand(&seed) % 2)
				snprintf(x->name, sizeof(x->name), "h%u.d%u.test",
				         xrand(&seed) % 500, xrand(&seed) % 20);
			off += (size_t)snprintf(yaml + off, 80, "  - {host: \"*.%s\"%s}\n", x->name,
			                        x->port443_only ? ", ports: [443]" : "");
		} else {
			x->kind = 2;
			x->plen = xrand(&seed) % 33;
			x->net = (xrand(&seed) & 0x0f0f0f0fu) |
			         0xc0000000u; /* a small space so addresses collide */
			x->net = x->plen == 0 ? 0 : x->net & (~0u << (32 - x->plen));
			off += (size_t)snprintf(yaml + off, 80, "  - {cidr: %u.%u.%u.%u/%u%s}\n",
			                        x->net >> 24, (x->net >> 16) & 255,
			                        (x->net >> 8) & 255, x->net & 255, x->plen,
			                        x->port443_only ? ", ports: [443]" : "");
		}
		where[i] = malloc(32);
		snprintf(where[i], 32, "t.yaml:%d", i + 3 + (x->deny ? 1 : 0));
	}
	p = policy_load_buffer("t.yaml", yaml, off, &d);
	for (size_t i = 0; i < d.n_lines && i < 5; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	assert_non_null(p);
	for (int q = 0; q < N_QUERIES; q++) {
		char name[64] = "";
		uint32_t a = 0;
		uint16_t port = xrand(&seed) % 3 == 0 ? 80 : xrand(&seed) % 5 == 0 ? 22 : 443;
		int best_allow = -1, best_deny = -1, want_action;
		const char *want_where;
		struct policy_verdict v;

		switch (xrand(&seed) % 4) {
		case 0:
			snprintf(name, sizeof(name), "h%u.d%u.test", xrand(&seed) % 500,
			         xrand(&seed) % 20);
			break;
		case 1:
			snprintf(name, sizeof(name), "x.h%u.d%u.test", xrand(&seed) % 500,
			         xrand(&seed) % 20);
			break;
		case 2:
			snprintf(name, sizeof(name), "d%u.test", xrand(&seed) % 25);
			break;
		default:
			a = (xrand(&seed) & 0x0f0f0f0fu) | 0xc0000000u;
			break;
		}
		for (int i = 0; i < N_RULES; i++) {
			if (!naive_covers(&r[i], name, a, port))
				continue;
			if (r[i].deny && best_deny < 0)
				best_deny = i;
			if (!r[i].deny && best_allow < 0)
				best_allow = i;
		}
		want_action = best_deny >= 0    ? POLICY_DENY
		              : best_allow >= 0 ? POLICY_ALLOW
		                                : POLICY_NO_MATCH;
		want_where = best_deny >= 0    ? where[best_deny]
		             : best_allow >= 0 ? where[best_allow]
		                               : NULL;
		if (name[0] != '\0') {
			policy_match_host(p, name, port, &v);
		} else {
			struct sockaddr_in sin = {.sin_family = AF_INET};

			sin.sin_addr.s_addr = htonl(a);
			policy_match_addr(p, (struct sockaddr *)&sin, port, &v);
		}
		if ((int)v.action != want_action ||
		    (want_where == NULL ? v.where != NULL
		                        : v.where == NULL || strcmp(v.where, want_where) != 0))
			fail_msg("query %d (%s / %08x port %u): got %d %s, expected %d %s", q, name,
			         a, port, v.action, v.where ? v.where : "-", want_action,
			         want_where ? want_where : "-");
	}
	policy_free(p);
	policy_diag_clear(&d);
	for (int i = 0; i < N_RULES; i++)
		free(where[i]);
	free(where);
	free(yaml);
	free(r);
}

static void
expect_name(const struct policy *p, const char *name, enum policy_action want, const char *where)
{
	struct policy_verdict v;

	policy_match_name(p, name, &v);
	if (v.action != want)
		fail_msg("%s: action %d, expected %d", name, v.action, want);
	if (where == NULL)
		assert_null(v.where);
	else
		assert_string_equal(v.where, where);
}

/* Hyphens at a label's edge, empty labels and numeric last labels never
 * match a host rule, even one whose wildcard would cover them, whether
 * or not the caller normalised the name first. */
static void
test_bad_names_never_match(void **state)
{
	static const char *const names[] = {
	        "-bad-.example.net",
	        "-a.example.net",
	        "a-.example.net",
	        "x.-y.example.net",
	        "a..example.net",
	        ".example.net",
	        "www.example.net.",
	        "www.example.net-",
	        "-",
	        "123.456",
	        "1.0x7f",
	        "0x7f",
	        "a.0X1F",
	        "a.0x",
	        "10",
	        "www.example.net.1",
	};

	expect_host(*state, "www.example.net", 443, POLICY_ALLOW, "t.yaml:12");
	expect_host(*state, "w-w.example.net", 443, POLICY_ALLOW, "t.yaml:12");
	expect_name(*state, "www.example.net", POLICY_ALLOW, "t.yaml:12");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		expect_host(*state, names[i], 443, POLICY_NO_MATCH, NULL);
		expect_host(*state, names[i], 80, POLICY_NO_MATCH, NULL);
		expect_name(*state, names[i], POLICY_NO_MATCH, NULL);
	}
	/* a hex-looking label that is not last is an ordinary label */
	{
		struct policy_diag d = {0};
		struct policy *p = load_str("version: 1\nallow:\n  - host: 0x7f.example\n", &d);

		assert_non_null(p);
		expect_host(p, "0x7f.example", 443, POLICY_ALLOW, "t.yaml:3");
		policy_free(p);
	}
}

static const char *const name_yaml = "version: 1\n"                      /* 1 */
                                     "allow:\n"                          /* 2 */
                                     "  - host: db.example.com\n"        /* 3 */
                                     "    ports: [5432]\n"               /* 4 */
                                     "  - host: \"*.example.com\"\n"     /* 5 */
                                     "    ports: [443, 5432]\n"          /* 6 */
                                     "  - host: web.example.org\n"       /* 7 */
                                     "  - host: both.example.org\n"      /* 8 */
                                     "    ports: [443, \"8000-8100\"]\n" /* 9 */
                                     "  - host: ssh.example.org\n"       /* 10 */
                                     "    ports: [22]\n"                 /* 11 */
                                     "  - host: skip.example.info\n"     /* 12 */
                                     "    ports: [80]\n"                 /* 13 */
                                     "  - host: \"*.example.info\"\n"    /* 14 */
                                     "    ports: [9000]\n"               /* 15 */
                                     "deny:\n"                           /* 16 */
                                     "  - host: \"*.example.com\"\n"     /* 17 */
                                     "  - host: gone.example.net\n"      /* 18 */
                                     "    ports: [1]\n"                  /* 19 */
                                     "  - host: web.example.org\n"       /* 20 */
                                     "    ports: [80]\n"                 /* 21 */
                                     "  - host: web.example.org\n"       /* 22 */
                                     "    ports: [443]\n"                /* 23 */
                                     "  - host: both.example.org\n"      /* 24 */
                                     "    ports: [22]\n"                 /* 25 */
                                     "  - host: both.example.org\n"      /* 26 */
                                     "    ports: [\"1-8050\"]\n"         /* 27 */
                                     "  - host: both.example.org\n"      /* 28 */
                                     "    ports: [\"8051-9000\"]\n"      /* 29 */
                                     "  - host: skip.example.info\n"     /* 30 */
                                     "    ports: [80]\n";                /* 31 */

static void
test_match_name(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(name_yaml, &d);

	(void)state;
	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	assert_non_null(p);
	/* allowed on a port other than 443/80/22 only */
	expect_name(p, "db.example.com", POLICY_ALLOW, "t.yaml:3");
	/* the deny wildcard takes 80 and 443, but 5432 stays open */
	expect_name(p, "x.example.com", POLICY_ALLOW, "t.yaml:5");
	expect_host(p, "x.example.com", 443, POLICY_DENY, "t.yaml:17");
	expect_host(p, "x.example.com", 5432, POLICY_ALLOW, "t.yaml:5");
	expect_name(p, "a.b.example.com", POLICY_ALLOW, "t.yaml:5");
	/* the apex: no rule */
	expect_name(p, "example.com", POLICY_NO_MATCH, NULL);
	/* 80 and 443 closed by two rules: the lower-numbered one decides */
	expect_name(p, "web.example.org", POLICY_DENY, "t.yaml:20");
	/* two deny ranges that only together cover every allowed port; the
	 * deny rule on port 22 opens none of them and does not decide */
	expect_name(p, "both.example.org", POLICY_DENY, "t.yaml:26");
	expect_name(p, "ssh.example.org", POLICY_ALLOW, "t.yaml:10");
	/* named by a deny rule only */
	expect_name(p, "gone.example.net", POLICY_DENY, "t.yaml:18");
	expect_name(p, "other.example.org", POLICY_NO_MATCH, NULL);
	/* an allow rule whose every port is denied does not decide; the
	 * next one with an open port does */
	expect_name(p, "skip.example.info", POLICY_ALLOW, "t.yaml:14");
	expect_name(p, "x.example.info", POLICY_ALLOW, "t.yaml:14");
	/* base policy: pypi.org 443 open, 80 denied; upload.pypi.org denied */
	expect_name(*state, "pypi.org", POLICY_ALLOW, "t.yaml:3");
	expect_name(*state, "upload.pypi.org", POLICY_DENY, "t.yaml:16");
	expect_name(*state, "ssh.example.com", POLICY_ALLOW, "t.yaml:6");
	expect_name(*state, "evil.test", POLICY_NO_MATCH, NULL);
	expect_name(*state, "", POLICY_NO_MATCH, NULL);
	expect_name(*state, "203.0.113.5", POLICY_NO_MATCH, NULL);
	policy_free(p);
	policy_diag_clear(&d);
}

/* policy_match_name against a model: random small policies over a few
 * overlapping names (exact and wildcard, allow and deny, ports and ranges
 * that overlap and touch), each name's allowed and denied ports as
 * 65,536-bit maps. The verdict and deciding rule must be the model's, and
 * ALLOW must mean policy_match_host allows some port (checked at every
 * interval edge, where its verdict can change). */
#define MODEL_RULES 14
struct model_rule {
	const char *host;
	int deny;
	unsigned n;
	uint16_t lo[3], hi[3];
};

static int
model_covers(const char *host, const char *name)
{
	size_t nl = strlen(name), sl;

	if (host[0] != '*')
		return strcmp(host, name) == 0;
	host += 2;
	sl = strlen(host);
	return nl > sl + 1 && name[nl - sl - 1] == '.' && strcmp(name + nl - sl, host) == 0;
}

static void
test_match_name_model(void **state)
{
	static const char *const hosts[] = {"a.t", "b.a.t", "*.t", "*.a.t", "c.t", "*.b.a.t"};
	static const char *const names[] = {"a.t", "b.a.t", "c.t", "d.a.t", "x.b.a.t", "t", "z.t"};
	static uint64_t amap[1024], dmap[1024];
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	(void)state;
	for (int round = 0; round < 300; round++) {
		struct model_rule r[MODEL_RULES];
		char yaml[4096], where[32];
		size_t off = 0;
		int line[MODEL_RULES], ln = 1,
		                       n_allow = 1 + (int)(xrand(&seed) % (MODEL_RULES - 1));
		struct policy_diag d = {0};
		struct policy *p;

		off += (size_t)snprintf(yaml + off, sizeof(yaml) - off, "version: 1\nallow:\n");
		ln = 3;
		for (int i = 0; i < MODEL_RULES; i++) {
			struct model_rule *x = &r[i];

			x->deny = i >= n_allow;
			if (i == n_allow) {
				off += (size_t)snprintf(yaml + off, sizeof(yaml) - off, "deny:\n");
				ln++;
			}
			x->host = hosts[xrand(&seed) % 6];
			x->n = 1 + xrand(&seed) % 3;
			off += (size_t)snprintf(yaml + off, sizeof(yaml) - off,
			                        "  - {host: \"%s\", ports: [", x->host);
			for (unsigned e = 0; e < x->n; e++) {
				uint32_t k = xrand(&seed) % 10;

				if (k == 0) {
					x->lo[e] = 1;
					x->hi[e] = 65535;
				} else if (k < 5) {
					x->lo[e] = x->hi[e] = (uint16_t)(1 + xrand(&seed) % 12);
				} else {
					x->lo[e] = (uint16_t)(1 + xrand(&seed) % 12);
					x->hi[e] = (uint16_t)(x->lo[e] + xrand(&seed) % 6);
				}
				off += (size_t)snprintf(yaml + off, sizeof(yaml) - off,
				                        "%s\"%u-%u\"", e ? ", " : "", x->lo[e],
				                        x->hi[e]);
			}
			off += (size_t)snprintf(yaml + off, sizeof(yaml) - off, "]}\n");
			line[i] = ln++;
		}
		p = policy_load_buffer("t.yaml", yaml, off, &d);
		if (p == NULL)
			fail_msg("%s\n%s", d.n_lines ? d.lines[0] : "?", yaml);
		for (size_t q = 0; q < sizeof(names) / sizeof(names[0]); q++) {
			const char *name = names[q];
			int allow = -1, deny = -1, any_allow = 0, host_allows = 0;
			enum policy_action want;
			struct policy_verdict v;

			memset(amap, 0, sizeof(amap));
			memset(dmap, 0, sizeof(dmap));
			for (int i = 0; i < MODEL_RULES; i++)
				for (unsigned e = 0; model_covers(r[i].host, name) && e < r[i].n;
				     e++)
					for (uint32_t port = r[i].lo[e]; port <= r[i].hi[e]; port++)
						(r[i].deny ? dmap : amap)[port / 64] |=
						        1ull << (port % 64);
			for (int w = 0; w < 1024; w++) {
				any_allow |= amap[w] != 0;
			}
			/* lowest allow rule with a port outside the deny map */
			for (int i = 0; i < MODEL_RULES && allow < 0; i++) {
				if (r[i].deny || !model_covers(r[i].host, name))
					continue;
				for (unsigned e = 0; e < r[i].n && allow < 0; e++)
					for (uint32_t port = r[i].lo[e]; port <= r[i].hi[e]; port++)
						if (!((dmap[port / 64] >> (port % 64)) & 1)) {
							allow = i;
							break;
						}
			}
			/* else the lowest deny rule closing an allowed port (any,
			 * when nothing is allowed) */
			for (int i = 0; i < MODEL_RULES && allow < 0 && deny < 0; i++) {
				if (!r[i].deny || !model_covers(r[i].host, name))
					continue;
				for (unsigned e = 0; e < r[i].n && deny < 0; e++)
					for (uint32_t port = r[i].lo[e]; port <= r[i].hi[e]; port++)
						if (!any_allow ||
						    ((amap[port / 64] >> (port % 64)) & 1)) {
							deny = i;
							break;
						}
			}
			want = allow >= 0  ? POLICY_ALLOW
			       : deny >= 0 ? POLICY_DENY
			                   : POLICY_NO_MATCH;
			policy_match_name(p, name, &v);
			if (want != POLICY_NO_MATCH)
				snprintf(where, sizeof(where), "t.yaml:%d",
				         line[allow >= 0 ? allow : deny]);
			if (v.action != want ||
			    (want == POLICY_NO_MATCH
			             ? v.where != NULL
			             : v.where == NULL || strcmp(v.where, where) != 0))
				fail_msg("round %d %s: got %d %s, expected %d %s\n%s", round, name,
				         v.action, v.where ? v.where : "-", want,
				         want ? where : "-", yaml);
			/* the same answer from policy_match_host at every edge */
			for (int i = 0; i < MODEL_RULES; i++)
				for (unsigned e = 0; e < r[i].n; e++) {
					const uint32_t ports[] = {r[i].lo[e], r[i].hi[e],
					                          r[i].hi[e] + 1u};

					for (int k = 0; k < 3; k++) {
						if (ports[k] > 65535)
							continue;
						policy_match_host(p, name, (uint16_t)ports[k], &v);
						host_allows |= v.action == POLICY_ALLOW;
					}
				}
			assert_int_equal(host_allows, want == POLICY_ALLOW);
		}
		policy_free(p);
		policy_diag_clear(&d);
	}
}

static void
expect_addr_any(const struct policy *p, const char *a, enum policy_action want, const char *where)
{
	struct sockaddr_storage ss;
	struct policy_verdict v;

	policy_match_addr_any(p, addr(&ss, a), &v);
	if (v.action != want)
		fail_msg("%s: action %d, expected %d", a, v.action, want);
	if (where == NULL)
		assert_null(v.where);
	else
		assert_string_equal(v.where, where);
}

/* The any-port verdict for addresses (the resolver's address guard). */
static void
test_match_addr_any(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str("version: 1\n"
	                            "allow:\n"
	                            "  - cidr: 10.0.0.0/8\n"      /* 3 */
	                            "    ports: [5432]\n"         /* 4 */
	                            "  - cidr: 10.3.0.0/16\n"     /* 5 */
	                            "  - cidr: 2001:db8::/32\n"   /* 6 */
	                            "    ports: [\"1-100\"]\n"    /* 7 */
	                            "deny:\n"                     /* 8 */
	                            "  - cidr: 10.1.0.0/16\n"     /* 9 */
	                            "    ports: [5432]\n"         /* 10 */
	                            "  - cidr: 10.2.0.0/16\n"     /* 11 */
	                            "    ports: [80]\n"           /* 12 */
	                            "  - cidr: 10.3.3.0/24\n"     /* 13 */
	                            "    ports: [\"1-65535\"]\n"  /* 14 */
	                            "  - cidr: 2001:db8:1::/48\n" /* 15 */
	                            "    ports: [\"1-50\"]\n"     /* 16 */
	                            "  - cidr: 2001:db8:1::/64\n" /* 17 */
	                            "    ports: [\"51-100\"]\n"   /* 18 */
	                            "  - cidr: 192.0.2.0/24\n",   /* 19 */
	                            &d);

	(void)state;
	assert_non_null(p);
	expect_addr_any(p, "10.0.0.1", POLICY_ALLOW, "t.yaml:3");
	expect_addr_any(p, "::ffff:10.0.0.1", POLICY_ALLOW, "t.yaml:3");
	expect_addr_any(p, "10.1.2.3", POLICY_DENY, "t.yaml:9");
	/* the deny on port 80 leaves 5432 open */
	expect_addr_any(p, "10.2.0.1", POLICY_ALLOW, "t.yaml:3");
	/* 10.3/16 adds 80 and 443 to 5432; the /24 deny takes all three */
	expect_addr_any(p, "10.3.1.1", POLICY_ALLOW, "t.yaml:3");
	expect_addr_any(p, "10.3.3.1", POLICY_DENY, "t.yaml:13");
	expect_addr_any(p, "2001:db8::1", POLICY_ALLOW, "t.yaml:6");
	expect_addr_any(p, "2001:db8:1::1", POLICY_DENY, "t.yaml:15");
	expect_addr_any(p, "2001:db8:1:1::1", POLICY_ALLOW, "t.yaml:6");
	expect_addr_any(p, "192.0.2.1", POLICY_DENY, "t.yaml:19");
	expect_addr_any(p, "11.0.0.1", POLICY_NO_MATCH, NULL);
	expect_addr_any(p, "2001:db9::1", POLICY_NO_MATCH, NULL);
	policy_free(p);
	policy_diag_clear(&d);
}

/* ECH is let through by any matching allow rule that opts in, whatever
 * the rule order; a matching deny rule, another port or another name
 * lets nothing through. */
static void
test_match_ech(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str("version: 1\n"
	                            "allow:\n"
	                            "  - host: \"*.cdn.test\"\n" /* 3 */
	                            "  - host: a.cdn.test\n"     /* 4 */
	                            "    ech: allow\n"           /* 5 */
	                            "  - host: \"*.ech.test\"\n" /* 6 */
	                            "    ports: [443]\n"         /* 7 */
	                            "    ech: allow\n"           /* 8 */
	                            "  - host: plain.test\n"     /* 9 */
	                            "deny:\n"                    /* 10 */
	                            "  - host: no.ech.test\n",   /* 11 */
	                            &d);

	(void)state;
	assert_non_null(p);
	/* the verdict still names rule 3; ECH is allowed by rule 4 */
	expect_host(p, "a.cdn.test", 443, POLICY_ALLOW, "t.yaml:3");
	assert_string_equal(policy_match_ech(p, "a.cdn.test", 443), "t.yaml:4");
	assert_null(policy_match_ech(p, "b.cdn.test", 443));
	assert_string_equal(policy_match_ech(p, "x.ech.test", 443), "t.yaml:6");
	assert_null(policy_match_ech(p, "x.ech.test", 80));
	assert_null(policy_match_ech(p, "no.ech.test", 443));
	assert_null(policy_match_ech(p, "plain.test", 443));
	assert_null(policy_match_ech(p, "other.test", 443));
	assert_null(policy_match_ech(p, "", 443));
	policy_free(p);
	policy_diag_clear(&d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_exact),
	        cmocka_unit_test(test_wildcard),
	        cmocka_unit_test(test_ports),
	        cmocka_unit_test(test_deny_wins),
	        cmocka_unit_test(test_no_match),
	        cmocka_unit_test(test_cidr),
	        cmocka_unit_test(test_cidr_allows),
	        cmocka_unit_test(test_ip_literal_never_matches_host),
	        cmocka_unit_test(test_first_rule_decides),
	        cmocka_unit_test(test_empty_policy_denies),
	        cmocka_unit_test(test_mode_and_meta),
	        cmocka_unit_test(test_sha256),
	        cmocka_unit_test(test_includes),
	        cmocka_unit_test(test_against_linear_scan),
	        cmocka_unit_test(test_bad_names_never_match),
	        cmocka_unit_test(test_match_name),
	        cmocka_unit_test(test_match_name_model),
	        cmocka_unit_test(test_match_addr_any),
	        cmocka_unit_test(test_match_ech),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
