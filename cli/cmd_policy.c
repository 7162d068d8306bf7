/* `airlock policy check FILE...` and `airlock policy test FILE DEST...`:
 * the check-only commands over policy/ (after unbound-checkconf). Nothing
 * here touches the network. */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cmd.h"
#include "common/util.h"
#include "inspect/path.h"
#include "inspect/rules.h"
#include "policy/inspect.h"
#include "policy/policy.h"
#include "policy/verdict.h"

static void
usage_policy(FILE *out)
{
	fprintf(out, "usage: airlock policy check [--policy-dir DIR] FILE...\n"
	             "       airlock policy test [--policy-dir DIR] FILE HOST[:PORT]|URL...\n"
	             "\n"
	             "  check   load each policy; print valid and a summary of what it allows,\n"
	             "          or every error as FILE:LINE:COLUMN; warn about upload sinks\n"
	             "  test    print allow or deny for each destination, with the deciding\n"
	             "          rule as FILE:LINE and/or the reason (no-rule, ...)\n"
	             "\n"
	             "FILE is a path or a preset name (pypi, npm, none, ...).\n"
	             "Exit status: 0 all valid / all allowed, 1 an invalid policy or a\n"
	             "denied destination, 2 a usage error.\n");
}

static void
usage_check(FILE *out)
{
	fprintf(out, "usage: airlock policy check [--policy-dir DIR] FILE...\n"
	             "\n"
	             "Load each policy (a path, or a preset name) with all its includes.\n"
	             "Prints 'FILE: valid', its name, mode, sha256 and one line per rule;\n"
	             "or every error, one per line as FILE:LINE:COLUMN: what; expected.\n"
	             "Warnings (not errors) name allowed destinations that accept uploads\n"
	             "from anyone: paste sites, webhook catchers, public buckets, tunnels,\n"
	             "DNS-over-HTTPS resolvers.\n"
	             "\n"
	             "  --policy-dir DIR  search DIR for preset names first (repeatable)\n"
	             "  --help            this text\n"
	             "\n"
	             "Exit status: 0 every file is valid, 1 any is not, 2 usage error.\n");
}

static void
usage_test(FILE *out)
{
	fprintf(out, "usage: airlock policy test [--policy-dir DIR] FILE HOST[:PORT]|URL...\n"
	             "\n"
	             "For each destination print one line:\n"
	             "  allow|deny DESTINATION RULE [REASON]\n"
	             "where RULE is the deciding rule as FILE:LINE and REASON the egress\n"
	             "log's reason for a denial (denied-by-rule, no-rule, bad-name: ...),\n"
	             "then the deny rule's own reason: text when it has one;\n"
	             "a denial no rule decided prints the REASON alone.\n"
	             "HOST is a DNS name, an IPv4 address, or [IPv6]; PORT defaults to 443.\n"
	             "A URL (http://HOST[:PORT]/..., https://...) means its host and port\n"
	             "(80 for http, 443 for https); the rest of it does not matter here.\n"
	             "On a rule with inspect:, a URL's path is decided too, with GET or\n"
	             "--method: one more line, '  inspect METHOD PATH: allow|deny RULE'\n"
	             "(the canonical path; RULE the deciding L7 rule).\n"
	             "IP addresses only match cidr rules. The result is what the rules say;\n"
	             "a policy in audit mode (see 'check') would let a denied one through\n"
	             "and log it.\n"
	             "\n"
	             "  --policy-dir DIR  search DIR for preset names first (repeatable)\n"
	             "  -X, --method M    the method URLs on inspected rules are decided with\n"
	             "  --help            this text\n"
	             "\n"
	             "Exit status: 0 every destination is allowed, 1 any is denied or the\n"
	             "policy is invalid, 2 usage error.\n");
}

/* Common options; returns the index of the first operand, or -1 (usage
 * error, already reported) or -2 (help printed). */
/* test --method: the method a URL on an inspected rule is decided with
 * (NULL: GET). */
static const char *test_method;

static int
parse_opts(int argc, char **argv, void (*help)(FILE *))
{
	static const struct option opts[] = {
	        {"policy-dir", required_argument, NULL, 'd'},
	        {"method", required_argument, NULL, 'X'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:hd:X:", opts, NULL)) != -1) {
		switch (c) {
		case 'X':
			if (help != usage_test) {
				fprintf(stderr, "airlock: policy %s: --method is for 'policy test'\n",
				        argv[0]);
				return -1;
			}
			if (inspect_method_parse(optarg) == 0 || strcmp(optarg, "*") == 0) {
				fprintf(stderr,
				        "airlock: policy test: --method '%s': expected GET, HEAD, "
				        "OPTIONS, POST, PUT, PATCH, DELETE, TRACE or CONNECT\n",
				        optarg);
				return -1;
			}
			test_method = optarg;
			break;
		case 'h':
			help(stdout);
			return -2;
		case 'd':
			if (policy_add_preset_dir(optarg) != 0) {
				fprintf(stderr, "airlock: --policy-dir: too many directories\n");
				return -1;
			}
			break;
		default: {
			char see[64], err[160];

			snprintf(see, sizeof(see), "airlock policy %s --help", argv[0]);
			opt_error(err, sizeof(err), c, argc, argv, see);
			fprintf(stderr, "airlock: policy %s: %s\n", argv[0], err);
			return -1;
		}
		}
	}
	return optind;
}

static void
print_errors(const struct policy_diag *d)
{
	for (size_t i = 0; i < d->n_lines; i++)
		fprintf(stderr, "%s\n", d->lines[i]);
}

static int
cmd_check(int argc, char **argv)
{
	int first = parse_opts(argc, argv, usage_check), status = 0;

	if (first == -2)
		return 0;
	if (first < 0)
		return EXIT_USAGE;
	if (first >= argc) {
		fprintf(stderr, "airlock: policy check: no FILE given; see --help\n");
		return EXIT_USAGE;
	}
	for (int i = first; i < argc; i++) {
		struct policy_diag d = {0};
		struct policy *p = policy_load(argv[i], &d);
		char *desc;

		if (p == NULL) {
			print_errors(&d);
			printf("%s: invalid (%zu error%s)\n", argv[i], d.n_lines,
			       d.n_lines == 1 ? "" : "s");
			policy_diag_clear(&d);
			status = 1;
			continue;
		}
		printf("%s: valid\n", argv[i]);
		printf("  name %s, mode %s, sha256 %s\n", policy_name(p),
		       policy_mode(p) == POLICY_MODE_AUDIT
		               ? "audit (denials are logged, not enforced)"
		               : "enforce",
		       policy_sha256(p));
		if ((desc = policy_describe(p)) != NULL) {
			/* Indent the summary under the file's line. */
			for (const char *line = desc; *line != '\0';) {
				size_t n = strcspn(line, "\n");

				printf("  %.*s\n", (int)n, line);
				line += n + (line[n] == '\n');
			}
			free(desc);
		}
		for (size_t k = 0; k < d.n_warnings; k++)
			printf("  warning: %s\n", d.warnings[k]);
		policy_diag_clear(&d);
		policy_free(p);
	}
	return status;
}

/* Split HOST[:PORT] / [IPv6]:PORT / bare IPv6 (s, len bytes). host gets
 * the host part without brackets; *port is dflt when none is given.
 * Returns 0, or -1 with *why set. */
static int
parse_authority(const char *s, size_t len, uint16_t dflt, char *host, size_t hostlen,
                uint16_t *port, const char **why)
{
	const char *colon = NULL, *end = s + len;
	char num[8];
	size_t plen;
	uint64_t v;

	*port = dflt;
	if (len > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (close == NULL) {
			*why = "missing ']' after an IPv6 address";
			return -1;
		}
		if ((size_t)(close - s - 1) >= hostlen) {
			*why = "address too long";
			return -1;
		}
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		if (close + 1 == end)
			return 0;
		if (close[1] != ':') {
			*why = "expected ':PORT' after ']'";
			return -1;
		}
		colon = close + 1;
	} else {
		const char *first = memchr(s, ':', len);

		/* Several colons and no brackets: a bare IPv6 address. */
		if (first != NULL && memchr(first + 1, ':', (size_t)(end - first - 1)) == NULL)
			colon = first;
		if ((size_t)((colon != NULL ? colon : end) - s) >= hostlen || len > 253) {
			*why = "name longer than 253 characters";
			return -1;
		}
		memcpy(host, s, (size_t)((colon != NULL ? colon : end) - s));
		host[(colon != NULL ? colon : end) - s] = '\0';
		if (colon == NULL)
			return 0;
	}
	plen = (size_t)(end - colon - 1);
	if (plen < sizeof(num)) {
		memcpy(num, colon + 1, plen);
		num[plen] = '\0';
	}
	if (plen >= sizeof(num) || parse_uint(num, 1, 65535, &v) != 0) {
		*why = "bad port; expected a number 1-65535";
		return -1;
	}
	*port = (uint16_t)v;
	return 0;
}

/* A destination as HOST[:PORT] (port 443 when none), or as a URL:
 * http:// (port 80) or https:// (port 443), whose user info, path, query
 * and fragment do not matter to the decision. Returns 0, or -1 with *why. */
static int
parse_dest(const char *s, char *host, size_t hostlen, uint16_t *port, const char **why)
{
	const char *sep = strstr(s, "://"), *auth, *at;
	uint16_t dflt;
	size_t len;

	if (sep == NULL)
		return parse_authority(s, strlen(s), 443, host, hostlen, port, why);
	if ((size_t)(sep - s) == 5 && strncasecmp(s, "https", 5) == 0) {
		dflt = 443;
	} else if ((size_t)(sep - s) == 4 && strncasecmp(s, "http", 4) == 0) {
		dflt = 80;
	} else {
		*why = "not an http:// or https:// URL, nor HOST[:PORT]";
		return -1;
	}
	auth = sep + 3;
	len = strcspn(auth, "/?#");
	at = memchr(auth, '@', len);
	if (at != NULL) {
		len -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	if (len == 0) {
		*why = "no host in the URL";
		return -1;
	}
	return parse_authority(auth, len, dflt, host, hostlen, port, why);
}

/* A URL's request target ("/..." up to a '#'), "/" when it has none;
 * NULL for HOST[:PORT]. Into out (outlen bytes), cut to fit. */
static const char *
url_target(const char *s, char *out, size_t outlen)
{
	const char *sep = strstr(s, "://"), *t;
	size_t len;

	if (sep == NULL)
		return NULL;
	t = sep + 3 + strcspn(sep + 3, "/?#");
	len = strcspn(t, "#");
	snprintf(out, outlen, "%s%.*s", len == 0 || t[0] == '?' ? "/" : "", (int)len, t);
	return out;
}

/* The request rules of an inspected rule, for a URL: one more line,
 * "  inspect METHOD PATH: allow|deny ...". 0 allowed, 1 refused. */
static int
test_inspect(const struct policy_inspect *pi, const char *target)
{
	static struct inspect_target canon;
	const char *method = test_method != NULL ? test_method : "GET";
	struct inspect_verdict v;
	enum inspect_path_err e;
	size_t at = 0;

	e = inspect_path_canon(target, strlen(target), false, &canon, &at);
	if (e != INSPECT_PATH_OK) {
		printf("  inspect %s %s: deny %s: request target: %s (byte %zu)\n", method, target,
		       verdict_reason_token(VR_BAD_PATH), inspect_path_err_text(e), at + 1);
		return 1;
	}
	inspect_decide(&pi->http, inspect_method_bit(method, strlen(method)), canon.path, &v);
	printf("  inspect %s %s: %s %s%s%s\n", method, canon.path, v.allow ? "allow" : "deny",
	       v.where != NULL ? v.where : "", v.where != NULL && !v.allow ? " " : "",
	       v.allow ? "" : verdict_reason_token(VR_REQUEST_DENIED));
	return v.allow ? 0 : 1;
}

static int
cmd_test(int argc, char **argv)
{
	int first = parse_opts(argc, argv, usage_test), status = 0;
	struct policy_diag d = {0};
	struct policy *p;

	if (first == -2)
		return 0;
	if (first < 0)
		return EXIT_USAGE;
	if (argc - first < 2) {
		fprintf(stderr, "airlock: policy test: expected FILE and at least one HOST[:PORT]; "
		                "see --help\n");
		return EXIT_USAGE;
	}
	/* Check every destination's syntax before loading anything, so a
	 * typo is a usage error whatever the policy says. */
	for (int i = first + 1; i < argc; i++) {
		char host[512];
		uint16_t port;
		const char *why = NULL;

		if (parse_dest(argv[i], host, sizeof(host), &port, &why) != 0) {
			fprintf(stderr, "airlock: policy test: '%s': %s\n", argv[i], why);
			return EXIT_USAGE;
		}
	}
	if ((p = policy_load(argv[first], &d)) == NULL) {
		print_errors(&d);
		printf("%s: invalid (%zu error%s)\n", argv[first], d.n_lines,
		       d.n_lines == 1 ? "" : "s");
		policy_diag_clear(&d);
		return 1;
	}
	policy_diag_clear(&d);
	for (int i = first + 1; i < argc; i++) {
		char host[512], name[256];
		struct sockaddr_storage ss;
		/* What the proxy decides for CONNECT HOST:PORT, under the
		 * rules whatever the policy's mode (verdict.h). */
		struct verdict_query q = {.src = VERDICT_SRC_CONNECT, .name = name};
		struct verdict_result r;
		uint16_t port;
		const char *why = NULL;
		bool v6 = false;

		parse_dest(argv[i], host, sizeof(host), &port, &why);
		q.port = port;
		if (sockaddr_set(&ss, 0, host, port) != 0) {
			str_copy(name, host, sizeof(name));
			q.ip_literal = true;
			q.addr = (struct sockaddr *)&ss;
			v6 = ss.ss_family == AF_INET6;
		} else if (policy_name_normalize(host, name, sizeof(name), &why) != 0) {
			/* A name no policy could match: deny, and say why. */
			printf("deny %s %s: %s\n", argv[i], verdict_reason_token(VR_BAD_NAME), why);
			status = 1;
			continue;
		}
		verdict_decide(p, POLICY_MODE_ENFORCE, &q, &r);
		printf("%s %s%s%s:%u %s%s%s%s%s\n", verdict_str(r.verdict), v6 ? "[" : "", name,
		       v6 ? "]" : "", port, r.rule != NULL ? r.rule : "",
		       r.rule != NULL && r.reason != VR_NONE ? " " : "",
		       verdict_reason_token(r.reason), r.rule_why != NULL ? ": " : "",
		       r.rule_why != NULL ? r.rule_why : "");
		if (r.verdict != VERDICT_ALLOW) {
			status = 1;
		} else {
			const struct policy_inspect *pi =
			        q.ip_literal ? NULL : policy_match_inspect(p, name, port);
			char target[INSPECT_TARGET_MAX + 2];

			if (pi != NULL && url_target(argv[i], target, sizeof(target)) != NULL &&
			    test_inspect(pi, target) != 0)
				status = 1;
		}
	}
	policy_free(p);
	return status;
}

int
cmd_policy(int argc, char **argv)
{
	if (argc < 2) {
		usage_policy(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage_policy(stdout);
		return 0;
	}
	if (strcmp(argv[1], "check") == 0)
		return cmd_check(argc - 1, argv + 1);
	if (strcmp(argv[1], "test") == 0)
		return cmd_test(argc - 1, argv + 1);
	fprintf(stderr, "airlock: policy: unknown subcommand '%s'; expected check or test\n",
	        argv[1]);
	return EXIT_USAGE;
}
