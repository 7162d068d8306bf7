/* The review commands over the recorded logs in tests/elog/data/: summary
 * numbers (read back from --json), show's filters, suggest's policy (loaded
 * with the real policy loader and matched), and replay's what-if. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "elog/json.h"
#include "elog/review.h"
#include "policy/policy.h"

static char data_dir[4096];
static struct elog_json J;

static char *
path(const char *name)
{
	static char bufs[4][4200];
	static int i;

	i = (i + 1) % 4;
	snprintf(bufs[i], sizeof(bufs[i]), "%s/%s", data_dir, name);
	return bufs[i];
}

struct out {
	char *data;
	size_t len;
	FILE *f;
};

static void
out_open(struct out *o)
{
	o->data = NULL;
	o->len = 0;
	o->f = open_memstream(&o->data, &o->len);
	assert_non_null(o->f);
}

static char *
out_close(struct out *o)
{
	fclose(o->f);
	return o->data;
}

static int
count_lines(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* The destination object with this key in summary --json output. */
static int
find_dest(const char *key)
{
	int arr = elog_json_get(&J, 0, "destinations");

	for (uint32_t k = 0; k < J.tok[arr].count; k++) {
		int d = elog_json_elem(&J, arr, k);
		const char *s = elog_json_str(&J, elog_json_get(&J, d, "destination"));
		if (s != NULL && strcmp(s, key) == 0)
			return d;
	}
	fail_msg("no destination %s", key);
	return -1;
}

/* summary --json over files, parsed into J; returns the text (J points
 * into it: free it when done with J). */
static char *
summary_json(char **files, int n)
{
	struct out o;
	char why[160];
	char *s;

	out_open(&o);
	assert_int_equal(review_summary(files, n, true, o.f), 0);
	s = out_close(&o);
	if (elog_json_parse(&J, s, strlen(s), why, sizeof(why)) != 0)
		fail_msg("summary --json is not JSON: %s", why);
	return s;
}

static uint64_t
num(int obj, const char *key)
{
	uint64_t v;

	assert_int_equal(elog_json_u64(&J, elog_json_get(&J, obj, key), &v), 0);
	return v;
}

static void
test_summary_json(void **state)
{
	char *files[] = {path("audit-pip.jsonl"), path("mixed.jsonl")};
	char *s = summary_json(files, 2);
	int d, tasks;

	/* pypi.org:443: one audit-deny in a1, two allows in b1; the line with
	 * "port":"443" in mixed.jsonl is garbage and not counted. */
	d = find_dest("pypi.org:443");
	assert_int_equal(num(d, "attempts"), 3);
	assert_int_equal(num(d, "allowed"), 2);
	assert_int_equal(num(d, "denied"), 1);
	assert_int_equal(num(d, "bytes_up"), 1830 + 900 + 100);
	assert_int_equal(num(d, "bytes_down"), 40211 + 30000 + 2000);
	assert_string_equal(elog_json_str(&J, elog_json_get(&J, d, "first")),
	                    "2026-11-30T10:24:40.180Z");
	assert_string_equal(elog_json_str(&J, elog_json_get(&J, d, "last")),
	                    "2026-11-30T11:00:01.300Z");
	/* Busiest first. */
	assert_int_equal(elog_json_elem(&J, elog_json_get(&J, 0, "destinations"), 0), d);
	/* No name: keyed by address; packets by address and protocol; DNS
	 * queries apart from connections. */
	assert_int_equal(num(find_dest("203.0.113.9:22"), "denied"), 1);
	assert_int_equal(num(find_dest("198.51.100.53:443/udp"), "denied"), 1);
	assert_int_equal(num(find_dest("pypi.org (dns)"), "attempts"), 1);
	/* The cut last line of mixed.jsonl is not counted. */
	assert_int_equal(num(find_dest("registry.npmjs.org:443"), "attempts"), 1);
	assert_int_equal(J.tok[elog_json_get(&J, 0, "destinations")].count, 10);

	tasks = elog_json_get(&J, 0, "tasks");
	assert_int_equal(J.tok[tasks].count, 3);
	int a1 = elog_json_elem(&J, tasks, 0);
	assert_string_equal(elog_json_str(&J, elog_json_get(&J, a1, "task")), "a1");
	assert_string_equal(elog_json_str(&J, elog_json_get(&J, a1, "mode")), "audit");
	assert_string_equal(
	        elog_json_str(&J, elog_json_elem(&J, elog_json_get(&J, a1, "command"), 4)),
	        "requests");
	assert_int_equal(num(a1, "duration_ms"), 3499);
	assert_int_equal(num(elog_json_get(&J, a1, "totals"), "denied"), 6);
	/* c2 has no task-end: totals are counted from its events. */
	int c2 = elog_json_elem(&J, tasks, 2);
	assert_string_equal(elog_json_str(&J, elog_json_get(&J, c2, "task")), "c2");
	assert_int_equal(elog_json_type(&J, elog_json_get(&J, c2, "ended")), ELOG_JSON_FALSE);
	assert_int_equal(elog_json_get(&J, c2, "exit_status"), -1);
	int t = elog_json_get(&J, c2, "totals");
	assert_int_equal(num(t, "connections"), 2);
	assert_int_equal(num(t, "allowed"), 1);
	assert_int_equal(num(t, "denied"), 1);
	free(s);
}

static void
test_summary_text(void **state)
{
	struct out o;
	char *files[] = {path("mixed.jsonl")};
	char *s;

	out_open(&o);
	assert_int_equal(review_summary(files, 1, false, o.f), 0);
	s = out_close(&o);
	assert_non_null(strstr(s, "destinations: 5\n"));
	assert_non_null(strstr(s, "  pypi.org:443 "));
	assert_non_null(strstr(s, "command:  npm ci\n"));
	assert_non_null(strstr(s, "no task-end line"));
	assert_non_null(strstr(s, "result:   exit 0, 3.000 s\n"));
	free(s);
}

static void
test_summary_missing_file(void **state)
{
	struct out o;
	char *files[] = {path("does-not-exist.jsonl")};

	out_open(&o);
	assert_int_equal(review_summary(files, 1, false, o.f), -1);
	free(out_close(&o));
}

static char *
show(char *file, const struct review_show_opts *opts)
{
	struct out o;
	char *files[] = {file};

	out_open(&o);
	assert_int_equal(review_show(files, 1, opts, o.f), 0);
	return out_close(&o);
}

static void
test_show_filters(void **state)
{
	struct review_show_opts o = {0};
	char *s;

	/* 13 lines: 4 garbage, 9 shown. */
	s = show(path("mixed.jsonl"), &o);
	assert_int_equal(count_lines(s), 9);
	free(s);

	o.denied = true;
	s = show(path("mixed.jsonl"), &o);
	assert_int_equal(count_lines(s), 3);
	assert_non_null(strstr(s, "deny       http    evil.test:80 "));
	assert_non_null(strstr(s, "policies/pypi.yaml:9\n"));
	free(s);

	o = (struct review_show_opts){.host_glob = "*.PYPI.org"};
	s = show(path("mixed.jsonl"), &o);
	assert_int_equal(count_lines(s), 1);
	assert_non_null(strstr(s, "upload.pypi.org:443"));
	free(s);

	o = (struct review_show_opts){.host_glob = "203.0.113.*"};
	s = show(path("mixed.jsonl"), &o);
	assert_int_equal(count_lines(s), 1); /* by address when no host */
	free(s);

	o = (struct review_show_opts){.task = "c2"};
	s = show(path("mixed.jsonl"), &o);
	assert_int_equal(count_lines(s), 3);
	assert_non_null(strstr(s, "task-start c2 policy npm (enforce): npm ci"));
	free(s);

	o = (struct review_show_opts){.has_since = true};
	assert_int_equal(review_parse_since("2026-11-30T11:00:02Z", 0, &o.since_ms), 0);
	s = show(path("mixed.jsonl"), &o);
	assert_int_equal(count_lines(s), 3);
	free(s);
}

static void
test_show_json_passthrough(void **state)
{
	struct review_show_opts o = {.json = true, .task = "c2"};
	char *s = show(path("mixed.jsonl"), &o);
	FILE *f = fopen(path("mixed.jsonl"), "r");
	char line[4096];
	size_t at = 0;
	int n = 0;

	/* Exactly the file's own lines of task c2, byte for byte, in order. */
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "\"task\":\"c2\"") == NULL || strchr(line, '\n') == NULL)
			continue;
		assert_memory_equal(s + at, line, strlen(line));
		at += strlen(line);
		n++;
	}
	fclose(f);
	assert_int_equal(n, 3);
	assert_int_equal(strlen(s), at);
	free(s);
}

static void
test_show_escapes_terminal(void **state)
{
	struct review_show_opts o = {.host_glob = "bad*"};
	char *s = show(path("wild.jsonl"), &o);

	assert_non_null(strstr(s, "bad\\x1bname.test:443"));
	assert_null(strchr(s, '\x1b'));
	free(s);
	o = (struct review_show_opts){.denied = true, .color = true};
	s = show(path("wild.jsonl"), &o);
	assert_non_null(strstr(s, "\033[31mdeny\033[0m"));
	assert_non_null(strstr(s, "\033[33maudit-deny\033[0m"));
	free(s);
}

static void
test_parse_since(void **state)
{
	int64_t t;

	assert_int_equal(review_parse_since("10m", 1000000000, &t), 0);
	assert_true(t == 1000000000 - 600000);
	assert_int_equal(review_parse_since("2h", 10000000000LL, &t), 0);
	assert_true(t == 10000000000LL - 7200000);
	assert_int_equal(review_parse_since("90s", 100000, &t), 0);
	assert_true(t == 10000);
	assert_int_equal(review_parse_since("2026-11-30T10:24:48Z", 0, &t), 0);
	assert_int_equal(review_parse_since("10x", 0, &t), -1);
	assert_int_equal(review_parse_since("m", 0, &t), -1);
	assert_int_equal(review_parse_since("-5m", 0, &t), -1);
	assert_int_equal(review_parse_since("", 0, &t), -1);
}

static char *
suggest(unsigned min, char **files, int n)
{
	struct out o;
	struct review_suggest_opts opts = {.wildcard_min = min, .name = "learned"};

	out_open(&o);
	assert_int_equal(review_suggest(files, n, &opts, o.f), 0);
	return out_close(&o);
}

static struct policy *
load(const char *yaml)
{
	struct policy_diag diag = {0};
	struct policy *p = policy_load_buffer("suggested.yaml", yaml, strlen(yaml), &diag);

	for (size_t i = 0; i < diag.n_lines; i++)
		print_error("%s\n", diag.lines[i]);
	policy_diag_clear(&diag);
	if (p == NULL)
		fail_msg("suggested policy does not load:\n%s", yaml);
	return p;
}

static enum policy_action
match(struct policy *p, const char *name, uint16_t port)
{
	struct policy_verdict v;

	policy_match_host(p, name, port, &v);
	return v.action;
}

static void
test_suggest_exact(void **state)
{
	char *files[] = {path("audit-pip.jsonl"), path("mixed.jsonl")};
	char *y = suggest(3, files, 2);
	struct policy *p = load(y);

	assert_string_equal(policy_name(p), "learned");
	assert_int_equal(policy_mode(p), POLICY_MODE_ENFORCE);
	/* Every name attempted, on the ports attempted, and nothing else. */
	assert_int_equal(match(p, "pypi.org", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "pypi.org", 80), POLICY_NO_MATCH);
	assert_int_equal(match(p, "files.pythonhosted.org", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "registry.npmjs.org", 443), POLICY_ALLOW);
	/* Only denied in enforce mode: a commented-out rule with the reason,
	 * not a rule. evil.test was audit-denied on 443 (a rule) and denied
	 * in enforce mode on 80 (not added, said). */
	assert_int_equal(match(p, "upload.pypi.org", 443), POLICY_NO_MATCH);
	assert_non_null(strstr(y, "  # - host: upload.pypi.org\n  #   ports: [443]\n"));
	assert_non_null(strstr(y, "denied in enforce mode"));
	assert_int_equal(match(p, "evil.test", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "evil.test", 80), POLICY_NO_MATCH);
	assert_non_null(strstr(y, "also denied in enforce mode on ports [80]: not added"));
	assert_int_equal(match(p, "evil.test", 22), POLICY_NO_MATCH);
	assert_int_equal(match(p, "other.pythonhosted.org", 443), POLICY_NO_MATCH);
	/* Counts in the comments. */
	assert_non_null(strstr(y, "  # 3 connections (2 allowed, 1 audit-deny), 1 DNS query\n"
	                          "  - host: pypi.org\n    ports: [443]\n"));
	/* Address-only destinations: commented out, never enabled. */
	assert_non_null(strstr(y, "  # - cidr: 203.0.113.9/32\n  #   ports: [22]\n"));
	assert_non_null(strstr(y, "  # - cidr: 198.51.100.53/32\n"));
	assert_null(strstr(y, "\n  - cidr"));
	policy_free(p);
	free(y);
}

static void
test_suggest_wildcards(void **state)
{
	char *files[] = {path("wild.jsonl")};
	char *y = suggest(3, files, 1);
	struct policy *p = load(y);
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};

	/* a, b, c directly under cdn.example.com: a wildcard, which also takes
	 * in deep.d.cdn.example.com and its port; the apex stays exact. */
	assert_non_null(strstr(y, "  - host: \"*.cdn.example.com\"\n    ports: [80, 443, 8443]\n"));
	assert_non_null(strstr(y, "4 names under cdn.example.com"));
	assert_int_equal(match(p, "zzz.cdn.example.com", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "cdn.example.com", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "cdn.example.com", 80), POLICY_NO_MATCH);
	/* Only two under other.test: exact names, no wildcard. */
	assert_int_equal(match(p, "one.other.test", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "three.other.test", 443), POLICY_NO_MATCH);
	/* Upper case and a final dot are normalised. */
	assert_null(strstr(y, "B.CDN"));
	/* DNS only: default ports, said in a comment. */
	assert_non_null(strstr(y, "seen in DNS only"));
	assert_int_equal(match(p, "only-dns.example.org", 443), POLICY_ALLOW);
	/* An invalid name is left out; loopback only as a commented rule with a
	 * guard note, and not allowed by the policy. */
	assert_null(strstr(y, "bad"));
	assert_non_null(strstr(y, "A loopback address, refused by the address guard"));
	assert_non_null(strstr(y, "  # - cidr: 127.0.0.1/32\n  #   ports: [8080]\n"));
	assert_false(policy_cidr_allows(p, (struct sockaddr *)&lo, 8080));
	policy_free(p);
	free(y);

	/* --wildcard-min 0: no wildcards at all. */
	y = suggest(0, files, 1);
	p = load(y);
	assert_null(strstr(y, "*."));
	assert_int_equal(match(p, "zzz.cdn.example.com", 443), POLICY_NO_MATCH);
	assert_int_equal(match(p, "deep.d.cdn.example.com", 8443), POLICY_ALLOW);
	policy_free(p);
	free(y);

	/* --wildcard-min 2: other.test gets one too. */
	y = suggest(2, files, 1);
	assert_non_null(strstr(y, "  - host: \"*.other.test\"\n"));
	free(y);
}

static void
test_suggest_uncommented_cidr_is_valid(void **state)
{
	/* A person who enables a commented cidr rule gets a valid policy. */
	char *files[] = {path("wild.jsonl")};
	char *y = suggest(3, files, 1);
	char *c;
	struct policy *p;

	while ((c = strstr(y, "  # - cidr:")) != NULL) {
		memmove(c + 2, c + 4, strlen(c + 4) + 1);
		c = strstr(c, "  #   ports:");
		assert_non_null(c);
		memmove(c + 2, c + 4, strlen(c + 4) + 1);
	}
	p = load(y);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0xcb007107)};
	assert_true(policy_cidr_allows(p, (struct sockaddr *)&a, 22));
	policy_free(p);
	free(y);
}

static void
test_suggest_safe(void **state)
{
	/* The log is the task's word: only allowed and audit-deny names become
	 * rules; enforce-mode denials (evil.test and its three subdomains, no
	 * wildcard of them), guarded names, loopback names and look-alikes of
	 * an allowed name are commented out with the reason. */
	char *files[] = {path("suggest-mixed.jsonl")};
	char *y = suggest(3, files, 1);
	struct policy *p = load(y);
	const char *names[] = {"evil.test",        "a.evil.test", "b.evil.test", "c.evil.test",
	                       "internal.example", "meta.example", "localhost", "pypl.org",
	                       "xn--pypi-7qa.org"};

	assert_int_equal(match(p, "pypi.org", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "files.pythonhosted.org", 443), POLICY_ALLOW);
	/* g00gle-apis.com looks like nothing allowed here: a rule. */
	assert_int_equal(match(p, "g00gle-apis.com", 443), POLICY_ALLOW);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char want[128];

		assert_int_equal(match(p, names[i], 443), POLICY_NO_MATCH);
		snprintf(want, sizeof(want), "  # - host: %s\n", names[i]);
		assert_non_null(strstr(y, want));
	}
	assert_null(strstr(y, "*.evil.test"));
	assert_non_null(strstr(y, "# evil.test: 1 connection (1 denied)\n"
	                          "  # denied in enforce mode (no-rule), never allowed"));
	assert_non_null(strstr(y, "# internal.example: 1 connection (1 denied)\n"
	                          "  # resolved to an address the address guard refuses"));
	assert_non_null(strstr(y, "# localhost: 1 connection (1 audit-deny)\n"
	                          "  # a loopback name"));
	assert_non_null(strstr(y, "# pypl.org: 1 connection (1 audit-deny)\n"
	                          "  # looks like pypi.org, which was allowed"));
	assert_non_null(strstr(y, "# xn--pypi-7qa.org: 1 connection (1 audit-deny)\n"
	                          "  # an internationalised (punycode) name"));
	policy_free(p);
	free(y);

	/* --include-denied: the enforce-mode denials and look-alikes become
	 * rules; guarded and loopback names never do. */
	struct out o;
	struct review_suggest_opts opts = {.wildcard_min = 3, .name = "all", .include_denied = true};

	out_open(&o);
	assert_int_equal(review_suggest(files, 1, &opts, o.f), 0);
	y = out_close(&o);
	p = load(y);
	assert_int_equal(match(p, "evil.test", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "pypl.org", 443), POLICY_ALLOW);
	assert_int_equal(match(p, "zz.evil.test", 443), POLICY_ALLOW); /* the wildcard */
	assert_int_equal(match(p, "internal.example", 443), POLICY_NO_MATCH);
	assert_int_equal(match(p, "localhost", 8080), POLICY_NO_MATCH);
	policy_free(p);
	free(y);
}

static void
test_suggest_odd_names(void **state)
{
	/* Whatever names a hostile task used, the suggestion loads: names the
	 * policy cannot hold are left out, YAML-ambiguous ones are quoted, and
	 * addresses (bracketed IPv6, metadata) are commented out. */
	char *files[] = {path("odd.jsonl")};
	char *y = suggest(3, files, 1);
	struct policy *p = load(y);
	struct sockaddr_in md = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0xa9fea9fe)};

	/* The loader refuses a numeric last label: left out, not emitted. */
	assert_null(strstr(y, "123.456"));
	assert_non_null(strstr(y, "  - host: \"on\"\n"));
	/* A punycode name nobody allowed: held back for a person to read. */
	assert_int_equal(match(p, "xn--bcher-kva.example", 443), POLICY_NO_MATCH);
	assert_non_null(strstr(y, "  # - host: xn--bcher-kva.example\n"));
	assert_int_equal(match(p, "a.b.c.d.e.f.example", 65535), POLICY_ALLOW);
	assert_null(strstr(y, "b\xc3\xbc"
	                      "cher"));
	assert_non_null(strstr(y, "  # - cidr: 2001:db8::5/128\n"));
	assert_non_null(strstr(y, "A link-local address"));
	assert_false(policy_cidr_allows(p, (struct sockaddr *)&md, 80));
	policy_free(p);
	free(y);
}

static int
replay(const char *policy_yaml, char **files, int n, char **out_text)
{
	char pol[] = "/tmp/elog-replay-XXXXXX";
	int fd = mkstemp(pol);
	struct out o;
	int rc;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, policy_yaml, strlen(policy_yaml)), (ssize_t)strlen(policy_yaml));
	close(fd);
	out_open(&o);
	rc = review_replay(pol, files, n, o.f);
	*out_text = out_close(&o);
	unlink(pol);
	return rc;
}

/* Packet lines count their packets field: one line per destination and
 * window stands for many packets. A line without the field (older logs)
 * is one packet; on any other kind the field means nothing. */
static void
test_summary_packets(void **state)
{
	char *files[] = {path("packets.jsonl")};
	char *s;
	int d;

	(void)state;
	s = summary_json(files, 1);
	d = find_dest("203.0.113.66:9999/udp");
	assert_int_equal(num(d, "attempts"), 62920);
	assert_int_equal(num(d, "denied"), 62920);
	assert_int_equal(num(find_dest("203.0.113.66:9998/udp"), "attempts"), 1);
	assert_int_equal(num(find_dest("files.example:443"), "attempts"), 1);
	free(s);
}

/* Lines of counted repeats stand for their count, in the summary's
 * destinations and in a task's totals counted from its events; the
 * log-budget line is no event. */
static void
test_summary_repeats(void **state)
{
	char *files[] = {path("repeats.jsonl")};
	char *s;
	int d;

	(void)state;
	s = summary_json(files, 1);
	d = find_dest("evil.test (dns)");
	assert_int_equal(num(d, "attempts"), 1 + 47793 + 26);
	assert_int_equal(num(d, "denied"), 1 + 47793 + 26);
	assert_int_equal(num(find_dest("evil.test:443"), "attempts"), 1 + 2999);
	assert_null(strstr(s, "log-budget"));
	free(s);
}

static void
test_replay(void **state)
{
	char *files[] = {path("mixed.jsonl")};
	char *s;

	/* The policy the log was made under (pypi + npm): nothing changes. */
	assert_int_equal(replay("version: 1\nname: same\nallow:\n"
	                        "  - host: pypi.org\n    ports: [443]\n"
	                        "  - host: registry.npmjs.org\n    ports: [443]\n"
	                        "deny:\n  - host: upload.pypi.org\n",
	                        files, 1, &s),
	                 0);
	assert_non_null(strstr(s, "6 events replayed under same: 6 unchanged, 0 would "
	                          "now be denied, 0 would now be allowed\n"));
	free(s);

	/* Drop npm, add evil.test:80 and the address 203.0.113.9:22. */
	assert_int_equal(replay("version: 1\nname: cand\nallow:\n"
	                        "  - host: pypi.org\n    ports: [443]\n"
	                        "  - host: evil.test\n    ports: [80]\n"
	                        "  - cidr: 203.0.113.0/24\n    ports: [22]\n",
	                        files, 1, &s),
	                 1);
	assert_non_null(strstr(s, "allowed before, denied now:\n"
	                          "  registry.npmjs.org:443 "));
	assert_non_null(strstr(s, "1 event   was: policies/npm.yaml:5  now: no-rule\n"));
	assert_non_null(strstr(s, "denied before, allowed now:\n"));
	assert_non_null(strstr(s, "  203.0.113.9:22 "));
	assert_non_null(strstr(s, "  evil.test:80 "));
	/* upload.pypi.org now matches no rule: still denied, unchanged. */
	assert_null(strstr(s, "upload.pypi.org"));
	assert_non_null(strstr(s, "6 events replayed under cand: 3 unchanged, 1 would "
	                          "now be denied, 2 would now be allowed\n"));
	free(s);

	/* A deny cidr rule covering the address pypi.org was dialled at
	 * refuses it, as the proxy now does, though a rule allows the name;
	 * the line without an ip is judged on the name alone. */
	assert_int_equal(replay("version: 1\nname: cidrdeny\nallow:\n"
	                        "  - host: pypi.org\n    ports: [443]\n"
	                        "  - host: registry.npmjs.org\n    ports: [443]\n"
	                        "deny:\n  - host: upload.pypi.org\n"
	                        "  - cidr: 192.0.2.0/28\n    ports: [443]\n",
	                        files, 1, &s),
	                 1);
	assert_non_null(strstr(s, "allowed before, denied now:\n  pypi.org:443 "));
	assert_non_null(strstr(s, "now: "));
	assert_non_null(strstr(s, ":10\n")); /* the deny cidr rule's line */
	assert_null(strstr(s, "registry.npmjs.org"));
	free(s);

	/* A broken policy is an error, not "no change". */
	assert_int_equal(replay("version: 1\nallow: [\n", files, 1, &s), -1);
	free(s);
}

static void
test_replay_guard_and_dns(void **state)
{
	char *files[] = {path("audit-pip.jsonl"), path("wild.jsonl")};
	char *s;

	/* A name allowed by rule whose logged address is loopback stays denied
	 * (the address guard); DNS queries follow the name on any port. */
	assert_int_equal(replay("version: 1\nname: g\nallow:\n"
	                        "  - host: pypi.org\n    ports: [443]\n"
	                        "  - host: \"*.cdn.example.com\"\n    ports: [443, 80, 8443]\n"
	                        "  - host: only-dns.example.org\n    ports: [22]\n",
	                        files, 2, &s),
	                 1);
	assert_non_null(strstr(s, "  pypi.org (dns) "));
	assert_non_null(strstr(s, "  pypi.org:443 "));
	assert_non_null(strstr(s, "  b.cdn.example.com:443 "));
	assert_non_null(strstr(s, "  only-dns.example.org (dns) "));
	assert_null(strstr(s, "  cdn.example.com:443 "));
	assert_null(strstr(s, "127.0.0.1"));
	free(s);
}

static void
test_replay_catch_all_cidr(void **state)
{
	char *files[] = {path("odd.jsonl"), path("wild.jsonl")};
	char *s;
	int rc;

	/* A catch-all cidr allows address literals but opens no guarded
	 * range: metadata and loopback stay denied, as the proxy's guard
	 * keeps them. A DNS question follows the name on any port (8443
	 * here), as the resolver answers it (policy_match_name). */
	rc = replay("version: 1\nname: wide\nallow:\n"
	            "  - cidr: 0.0.0.0/0\n    ports: [80, 8080]\n"
	            "  - host: only-dns.example.org\n    ports: [8443]\n",
	            files, 2, &s);
	assert_true(rc >= 0);
	assert_null(strstr(s, "169.254.169.254"));
	assert_null(strstr(s, "127.0.0.1"));
	assert_non_null(strstr(s, "  only-dns.example.org (dns) "));
	free(s);

	/* Rules naming those ranges open them. */
	rc = replay("version: 1\nname: narrow\nallow:\n"
	            "  - cidr: 169.254.169.254/32\n    ports: [80]\n"
	            "  - cidr: 127.0.0.0/8\n    ports: [8080]\n",
	            files, 2, &s);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(s, "  169.254.169.254:80 "));
	assert_non_null(strstr(s, "  127.0.0.1:8080 "));
	free(s);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_summary_json),
	        cmocka_unit_test(test_summary_text),
	        cmocka_unit_test(test_summary_missing_file),
	        cmocka_unit_test(test_show_filters),
	        cmocka_unit_test(test_show_json_passthrough),
	        cmocka_unit_test(test_show_escapes_terminal),
	        cmocka_unit_test(test_parse_since),
	        cmocka_unit_test(test_suggest_exact),
	        cmocka_unit_test(test_suggest_wildcards),
	        cmocka_unit_test(test_suggest_uncommented_cidr_is_valid),
	        cmocka_unit_test(test_suggest_safe),
	        cmocka_unit_test(test_suggest_odd_names),
	        cmocka_unit_test(test_summary_packets),
	        cmocka_unit_test(test_summary_repeats),
	        cmocka_unit_test(test_replay),
	        cmocka_unit_test(test_replay_guard_and_dns),
	        cmocka_unit_test(test_replay_catch_all_cidr),
	};
	snprintf(data_dir, sizeof(data_dir), "%s", argc > 1 ? argv[1] : "tests/elog/data");
	/* Garbage-line reports go to stderr; keep them out of the test output. */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
