/* Loading schema v1 (DESIGN.md, docs/policy.md): read with bounds, parse
 * with libyaml (ytree.c), validate every node strictly while collecting
 * every error with its file:line:column, follow includes, then compile.
 * Any error at all rejects the whole policy: no partial matcher ever
 * leaves this file. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
/* The low-level SHA-256 on purpose: EVP_sha256() loads OpenSSL 3's
 * provider machinery on first use, about 1 ms of CPU on every sandbox's
 * start-up critical path (bench/run.md); this one costs microseconds and
 * allocates nothing. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "common/util.h"
#include "policy/inspect.h"
#include "policy/internal.h"
#include "policy/ytree.h"

/* And without OpenSSL's CPU probe. Linked statically, libcrypto runs
 * OPENSSL_cpuid_setup before main in every program, for every program,
 * and under a hypervisor each of its cpuid instructions traps: 60 us of
 * every run's start-up here (bench/run.md), for one hash of a file of a
 * few KiB. Defined here, libcrypto's own (alone in its object, cpuid.o)
 * stays out of the link and the capability vector stays zero, so SHA-256
 * runs its portable x86-64 code, as OPENSSL_ia32cap=0 would select. Should
 * a libcrypto define it beside something airlock uses, the link fails on
 * the duplicate instead of going quietly wrong. */
#if defined(__x86_64__)
void OPENSSL_cpuid_setup(void);
void
OPENSSL_cpuid_setup(void)
{
}
#endif

static char *preset_dirs[POLICY_MAX_PRESET_DIRS];
static size_t n_preset_dirs;

struct loader {
	struct policy *p;
	char **errs;
	size_t n_errs;      /* kept lines */
	size_t n_errs_seen; /* all errors, kept or not */
	SHA256_CTX sha;
	struct policy_rule_src *rules;
	uint32_t n_rules, cap_rules;
	bool rules_full;
	struct pport *ports;
	uint32_t n_ports, cap_ports;
	char *stack[POLICY_MAX_INCLUDE_DEPTH + 2]; /* realpaths being loaded */
	int depth;
	char *loaded[POLICY_MAX_FILES]; /* realpaths already loaded */
	char *opened[POLICY_MAX_FILES]; /* ... and each one's path as opened */
	size_t n_loaded;
	size_t n_files;
	struct punix unix_socks[POLICY_MAX_UNIX]; /* unix: entries, strings in the arena */
	uint32_t n_unix;
	bool unix_full;
	bool oom;
};

int
policy_diag_add(char ***lines, size_t *n, const char *fmt, ...)
{
	va_list ap;
	char *line = NULL, **nl;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -1;
	if ((nl = realloc(*lines, sizeof(*nl) * (*n + 1))) == NULL) {
		free(line);
		return -1;
	}
	nl[(*n)++] = line;
	*lines = nl;
	return 0;
}

static void lerr(struct loader *ld, const char *file, uint32_t line, uint32_t col, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

/* One error: "FILE:LINE:COLUMN: message". Past POLICY_MAX_ERRORS only
 * counted, so a file of 100,000 bad lines costs 50 lines of output. */
static void
lerr(struct loader *ld, const char *file, uint32_t line, uint32_t col, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	ld->n_errs_seen++;
	if (ld->n_errs >= POLICY_MAX_ERRORS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (policy_diag_add(&ld->errs, &ld->n_errs, "%s:%u:%u: %s", file, line, col, msg) != 0)
		ld->oom = true;
}

static const char *
node_str(const struct ytree *t, const struct ynode *n)
{
	return ytree_str(t, n);
}

static const char *
type_name(const struct ynode *n)
{
	switch (n->type) {
	case YNODE_SEQ:
		return "a list";
	case YNODE_MAP:
		return "a mapping";
	default:
		return "a string";
	}
}

/* ---- ports ---- */

static int
port_add(struct loader *ld, uint16_t lo, uint16_t hi)
{
	if (ld->n_ports == ld->cap_ports) {
		uint32_t cap = ld->cap_ports ? ld->cap_ports * 2 : 256;
		struct pport *np = realloc(ld->ports, sizeof(*np) * cap);

		if (np == NULL) {
			ld->oom = true;
			return -1;
		}
		ld->ports = np;
		ld->cap_ports = cap;
	}
	ld->ports[ld->n_ports].lo = lo;
	ld->ports[ld->n_ports].hi = hi;
	ld->n_ports++;
	return 0;
}

static int
parse_port(const char *s, uint16_t *out)
{
	uint64_t v;

	if (parse_uint(s, 1, 65535, &v) != 0)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

/* ports: [443, 8000-8100, "9000-9100"]. Returns 0 with the rule's slice
 * of ld->ports, or -1 after reporting. */
static int
parse_ports(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n,
            uint32_t *off, uint16_t *count)
{
	uint32_t start = ld->n_ports;
	int bad = 0;

	if (n->type != YNODE_SEQ) {
		lerr(ld, file, n->line, n->col,
		     "ports: expected a list of ports like [443] or [\"8000-8100\"], got %s",
		     type_name(n));
		return -1;
	}
	if (n->len == 0) {
		lerr(ld, file, n->line, n->col,
		     "ports: empty list; leave ports out for the default [80, 443]");
		return -1;
	}
	if (n->len > POLICY_MAX_PORTS) {
		lerr(ld, file, n->line, n->col,
		     "ports: %u entries; at most %u are allowed (write a range like \"8000-8999\")",
		     n->len, POLICY_MAX_PORTS);
		return -1;
	}
	for (uint32_t c = n->child; c != YNODE_NONE; c = t->nodes[c].next) {
		const struct ynode *e = &t->nodes[c];
		const char *s = node_str(t, e), *dash;
		uint16_t lo, hi;

		if (e->type != YNODE_SCALAR) {
			lerr(ld, file, e->line, e->col,
			     "ports: expected a port number 1-65535 or a range \"LOW-HIGH\", got "
			     "%s",
			     type_name(e));
			bad = -1;
			continue;
		}
		if ((dash = strchr(s, '-')) != NULL) {
			char lows[8];
			size_t ll = (size_t)(dash - s);

			if (ll == 0 || ll >= sizeof(lows)) {
				lo = 0;
			} else {
				memcpy(lows, s, ll);
				lows[ll] = '\0';
				if (parse_port(lows, &lo) != 0)
					lo = 0;
			}
			if (lo == 0 || parse_port(dash + 1, &hi) != 0 || hi < lo) {
				lerr(ld, file, e->line, e->col,
				     "ports: bad range '%s'; expected \"LOW-HIGH\" with 1 <= LOW "
				     "<= HIGH <= 65535",
				     s);
				bad = -1;
				continue;
			}
		} else if (parse_port(s, &lo) == 0) {
			hi = lo;
		} else {
			lerr(ld, file, e->line, e->col,
			     "ports: bad port '%s'; expected a number 1-65535", s);
			bad = -1;
			continue;
		}
		if (port_add(ld, lo, hi) != 0)
			return -1;
	}
	if (bad != 0) {
		ld->n_ports = start;
		return -1;
	}
	*off = start;
	*count = (uint16_t)(ld->n_ports - start);
	return 0;
}

/* ---- hosts and cidrs ---- */

static bool
last_label_numeric(const char *s)
{
	const char *dot = strrchr(s, '.');
	const char *l = dot ? dot + 1 : s;

	return policy_label_numeric(l, strlen(l));
}

/* Fills r->kind and r->key; -1 after reporting. */
static int
parse_host(struct loader *ld, const char *file, const struct ynode *n, const char *s,
           struct policy_rule_src *r)
{
	char buf[256], addr[16];
	const char *why = NULL, *name = s;

	if (inet_pton(AF_INET, s, addr) == 1) {
		lerr(ld, file, n->line, n->col,
		     "host: '%s' is an IP address; IP literals only match cidr rules: write `cidr: "
		     "%s/32`",
		     s, s);
		return -1;
	}
	if (strchr(s, ':') != NULL) {
		char inner[64];
		size_t l = strlen(s);

		if (l >= 2 && s[0] == '[' && s[l - 1] == ']' && l - 2 < sizeof(inner)) {
			memcpy(inner, s + 1, l - 2);
			inner[l - 2] = '\0';
		} else {
			str_copy(inner, s, sizeof(inner));
		}
		if (inet_pton(AF_INET6, inner, addr) == 1) {
			lerr(ld, file, n->line, n->col,
			     "host: '%s' is an IP address; IP literals only match cidr rules: "
			     "write `cidr: %s/128`",
			     s, inner);
			return -1;
		}
		lerr(ld, file, n->line, n->col,
		     "host: '%s' contains ':'; expected a DNS name (ports go in `ports:`)", s);
		return -1;
	}
	r->kind = PRULE_EXACT;
	if (strcmp(s, "*") == 0 || strcmp(s, "*.") == 0) {
		lerr(ld, file, n->line, n->col,
		     "host: '*' alone would allow every name; expected a name or a wildcard like "
		     "*.example.com");
		return -1;
	}
	if (s[0] == '*' && s[1] == '.') {
		r->kind = PRULE_WILDCARD;
		name = s + 2;
	}
	if (policy_name_normalize(name, buf, sizeof(buf), &why) != 0) {
		lerr(ld, file, n->line, n->col, "host: bad name '%s': %s", s, why);
		return -1;
	}
	if (last_label_numeric(buf)) {
		lerr(ld, file, n->line, n->col,
		     "host: '%s' ends in a numeric label, which no DNS name does; for addresses "
		     "write a cidr rule",
		     s);
		return -1;
	}
	r->key = policy_arena_strndup(ld->p->p_arena, buf, strlen(buf));
	if (r->kind == PRULE_WILDCARD) {
		char pat[260];

		snprintf(pat, sizeof(pat), "*.%s", buf);
		r->pattern = policy_arena_strndup(ld->p->p_arena, pat, strlen(pat));
	} else {
		r->pattern = r->key;
	}
	if (r->key == NULL || r->pattern == NULL) {
		ld->oom = true;
		return -1;
	}
	return 0;
}

static int
parse_cidr(struct loader *ld, const char *file, const struct ynode *n, const char *s,
           struct policy_rule_src *r)
{
	char addr[64], shown[128];
	const char *slash = strchr(s, '/');
	size_t al = slash ? (size_t)(slash - s) : strlen(s);
	uint64_t plen;
	unsigned maxlen;
	uint8_t masked[16];

	if (al == 0 || al >= sizeof(addr))
		goto bad;
	memcpy(addr, s, al);
	addr[al] = '\0';
	memset(r->addr, 0, sizeof(r->addr));
	if (inet_pton(AF_INET, addr, r->addr) == 1) {
		r->kind = PRULE_CIDR4;
		maxlen = 32;
	} else if (inet_pton(AF_INET6, addr, r->addr) == 1) {
		r->kind = PRULE_CIDR6;
		maxlen = 128;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		if (memcmp(r->addr, mapped, sizeof(mapped)) == 0) {
			lerr(ld, file, n->line, n->col,
			     "cidr: '%s' is IPv4-mapped IPv6; write the IPv4 form (mapped "
			     "addresses are matched as IPv4)",
			     s);
			return -1;
		}
	} else {
		goto bad;
	}
	if (slash == NULL)
		plen = maxlen; /* a bare address is a single host */
	else if (parse_uint(slash + 1, 0, maxlen, &plen) != 0)
		goto bad;
	r->plen = (uint8_t)plen;
	memcpy(masked, r->addr, 16);
	for (unsigned i = 0; i < maxlen / 8; i++) {
		unsigned bits = plen > i * 8 ? (unsigned)plen - i * 8 : 0;

		if (bits < 8)
			masked[i] &= (uint8_t)(0xff00u >> bits);
	}
	if (memcmp(masked, r->addr, 16) != 0) {
		char net[INET6_ADDRSTRLEN];

		inet_ntop(r->kind == PRULE_CIDR4 ? AF_INET : AF_INET6, masked, net, sizeof(net));
		lerr(ld, file, n->line, n->col,
		     "cidr: '%s' has bits set after the prefix; did you mean %s/%u?", s, net,
		     (unsigned)plen);
		return -1;
	}
	inet_ntop(r->kind == PRULE_CIDR4 ? AF_INET : AF_INET6, r->addr, addr, sizeof(addr));
	snprintf(shown, sizeof(shown), "%s/%u", addr, (unsigned)plen);
	r->key = NULL;
	r->pattern = policy_arena_strndup(ld->p->p_arena, shown, strlen(shown));
	if (r->pattern == NULL) {
		ld->oom = true;
		return -1;
	}
	return 0;
bad:
	lerr(ld, file, n->line, n->col,
	     "cidr: bad network '%s'; expected ADDRESS/PREFIX like 203.0.113.0/24 or 2001:db8::/32",
	     s);
	return -1;
}

static int
rule_push(struct loader *ld, const struct policy_rule_src *r)
{
	if (ld->n_rules == ld->cap_rules) {
		uint32_t cap = ld->cap_rules ? ld->cap_rules * 2 : 64;
		struct policy_rule_src *nr = realloc(ld->rules, sizeof(*nr) * cap);

		if (nr == NULL) {
			ld->oom = true;
			return -1;
		}
		ld->rules = nr;
		ld->cap_rules = cap;
	}
	ld->rules[ld->n_rules++] = *r;
	return 0;
}

/* ech: allow | deny, on host allow rules only (docs/policy.md, "ECH"). */
static int
parse_ech(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n,
          uint8_t action, bool is_host, struct policy_rule_src *r)
{
	const char *v = n->type == YNODE_SCALAR ? node_str(t, n) : NULL;

	if (v == NULL || (strcmp(v, "allow") != 0 && strcmp(v, "deny") != 0)) {
		if (v == NULL || v[0] == '\0')
			v = v == NULL ? type_name(n) : "nothing";
		lerr(ld, file, n->line, n->col, "ech: expected allow or deny, got %s", v);
		return -1;
	}
	if (action != POLICY_ALLOW) {
		lerr(ld, file, n->line, n->col,
		     "ech: only allow rules take it (a deny rule refuses the name, encrypted or "
		     "not)");
		return -1;
	}
	if (!is_host) {
		lerr(ld, file, n->line, n->col,
		     "ech: only host rules take it (ECH is let through for the ClientHello's "
		     "outer server name, which a cidr rule does not match)");
		return -1;
	}
	r->ech = strcmp(v, "allow") == 0;
	return 0;
}

/* reason: the policy author's words for people, carried into every
 * refusal by the rule (verdict_message). One line of printable text:
 * it reaches a terminal, an HTTP header and a DNS answer. */
static int
parse_reason(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n,
             struct policy_rule_src *r)
{
	const char *v = n->type == YNODE_SCALAR ? node_str(t, n) : NULL;
	size_t len = v != NULL ? strlen(v) : 0;

	if (v == NULL || len == 0 || len > POLICY_MAX_REASON) {
		lerr(ld, file, n->line, n->col,
		     "reason: expected one line of text, 1 to %d characters, got %s",
		     POLICY_MAX_REASON, v == NULL ? type_name(n) : len == 0 ? "nothing" : "more");
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];

		/* Quotes and backslashes too: the text lands inside a quoted
		 * Proxy-Status parameter. */
		if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
			lerr(ld, file, n->line, n->col,
			     "reason: character %u is not allowed (control characters, '\"' and "
			     "'\\' are not)",
			     (unsigned)i + 1);
			return -1;
		}
	}
	if ((r->why = policy_arena_strndup(ld->p->p_arena, v, len)) == NULL) {
		ld->oom = true;
		return -1;
	}
	return 0;
}

static void
lerr_sink(void *ctx, const char *file, uint32_t line, uint32_t col, const char *msg)
{
	lerr(ctx, file, line, col, "%s", msg);
}

/* inspect: on host allow rules only (docs/policy.md, "Inspection"). */
static int
parse_inspect(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n,
              uint8_t action, bool is_host, struct policy_rule_src *r)
{
	struct policy_errsink es = {lerr_sink, ld};

	if (action != POLICY_ALLOW) {
		lerr(ld, file, n->line, n->col,
		     "inspect: only allow rules take it (a deny rule refuses every request)");
		return -1;
	}
	if (!is_host) {
		lerr(ld, file, n->line, n->col,
		     "inspect: only host rules take it (the leaf certificate is made for a name; "
		     "write `host: NAME`)");
		return -1;
	}
	return policy_inspect_parse(ld->p->p_arena, file, t, n, &es, &r->inspect, &ld->oom);
}

/* One entry of allow: or deny:. */
static void
parse_rule(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n,
           uint8_t action, const char *list)
{
	struct policy_rule_src r;
	const struct ynode *host = NULL, *cidr = NULL, *ports = NULL, *ech = NULL, *reason = NULL;
	const struct ynode *inspect = NULL;
	char where[PATH_MAX + 16];
	int bad = 0;

	memset(&r, 0, sizeof(r));
	r.action = action;
	if (n->type != YNODE_MAP) {
		lerr(ld, file, n->line, n->col,
		     "%s: expected a rule like `- host: example.com` or `- cidr: 203.0.113.0/24`, "
		     "got %s",
		     list, type_name(n));
		return;
	}
	for (uint32_t k = n->child; k != YNODE_NONE;) {
		const struct ynode *key = &t->nodes[k];
		uint32_t v = key->next;
		const struct ynode *val = v != YNODE_NONE ? &t->nodes[v] : key;
		const char *ks = node_str(t, key);
		const struct ynode **slot = NULL;

		if (key->type != YNODE_SCALAR)
			lerr(ld, file, key->line, key->col,
			     "%s: rule keys must be plain words (host, cidr, ports, ech, inspect, "
			     "reason)",
			     list);
		else if (strcmp(ks, "host") == 0)
			slot = &host;
		else if (strcmp(ks, "cidr") == 0)
			slot = &cidr;
		else if (strcmp(ks, "ports") == 0)
			slot = &ports;
		else if (strcmp(ks, "ech") == 0)
			slot = &ech;
		else if (strcmp(ks, "reason") == 0)
			slot = &reason;
		else if (strcmp(ks, "inspect") == 0)
			slot = &inspect;
		else
			lerr(ld, file, key->line, key->col,
			     "%s: unknown key '%s' in a rule; expected host, cidr, ports, ech, inspect "
			     "or reason",
			     list, ks);
		if (slot != NULL) {
			if (*slot != NULL)
				lerr(ld, file, key->line, key->col,
				     "%s: '%s' given twice in one rule", list, ks);
			else
				*slot = val;
		} else {
			bad = 1;
		}
		k = v != YNODE_NONE ? t->nodes[v].next : YNODE_NONE;
	}
	if (host != NULL && cidr != NULL) {
		lerr(ld, file, n->line, n->col,
		     "%s: a rule has either host or cidr, not both; write two rules", list);
		return;
	}
	if (host == NULL && cidr == NULL) {
		lerr(ld, file, n->line, n->col,
		     "%s: rule without host or cidr; expected `host: NAME` or `cidr: NET/LEN`",
		     list);
		return;
	}
	if (host != NULL) {
		if (host->type != YNODE_SCALAR || host->len == 0) {
			lerr(ld, file, host->line, host->col,
			     "host: expected a DNS name like example.com, got %s",
			     host->len == 0 && host->type == YNODE_SCALAR ? "nothing"
			                                                  : type_name(host));
			bad = 1;
		} else if (parse_host(ld, file, host, node_str(t, host), &r) != 0) {
			bad = 1;
		}
	} else {
		if (cidr->type != YNODE_SCALAR || cidr->len == 0) {
			lerr(ld, file, cidr->line, cidr->col,
			     "cidr: expected a network like 203.0.113.0/24, got %s",
			     cidr->len == 0 && cidr->type == YNODE_SCALAR ? "nothing"
			                                                  : type_name(cidr));
			bad = 1;
		} else if (parse_cidr(ld, file, cidr, node_str(t, cidr), &r) != 0) {
			bad = 1;
		}
	}
	if (ports != NULL) {
		if (parse_ports(ld, file, t, ports, &r.port_off, &r.n_ports) != 0)
			bad = 1;
	} else {
		r.port_off = 0; /* the shared default [80, 443] */
		r.n_ports = 2;
	}
	if (ech != NULL && parse_ech(ld, file, t, ech, action, host != NULL, &r) != 0)
		bad = 1;
	if (reason != NULL && parse_reason(ld, file, t, reason, &r) != 0)
		bad = 1;
	if (inspect != NULL && parse_inspect(ld, file, t, inspect, action, host != NULL, &r) != 0)
		bad = 1;
	if (bad)
		return;
	r.line = n->line;
	r.col = n->col;
	if (ld->n_rules >= POLICY_MAX_RULES) {
		if (!ld->rules_full)
			lerr(ld, file, n->line, n->col,
			     "more than %u rules in all; that is the limit", POLICY_MAX_RULES);
		ld->rules_full = true;
		return;
	}
	snprintf(where, sizeof(where), "%s:%u", file, n->line);
	if ((r.where = policy_arena_strndup(ld->p->p_arena, where, strlen(where))) == NULL) {
		ld->oom = true;
		return;
	}
	rule_push(ld, &r);
}

/* ---- files and includes ---- */

static bool
is_preset_name(const char *s)
{
	size_t l = strlen(s);

	if (l == 0 || strchr(s, '/') != NULL)
		return false;
	if ((l > 5 && strcmp(s + l - 5, ".yaml") == 0) || (l > 4 && strcmp(s + l - 4, ".yml") == 0))
		return false;
	return strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static bool
valid_preset_name(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_'))
			return false;
	return true;
}

size_t
policy_preset_dirs(const char **dirs, size_t max)
{
	size_t n = 0;
	const char *env = getenv("AIRLOCK_POLICY_DIR");

	for (size_t i = 0; i < n_preset_dirs && n < max; i++)
		dirs[n++] = preset_dirs[i];
	if (env != NULL && *env != '\0' && n < max)
		dirs[n++] = env;
	/* Only a test build looks in its source tree (meson_options.txt,
	 * source_presets): an installed airlock whose checkout lies in a
	 * task's workdir would otherwise let the task rewrite its presets. */
	if (AIRLOCK_SOURCE_POLICY_DIR[0] != '\0' && n < max)
		dirs[n++] = AIRLOCK_SOURCE_POLICY_DIR;
	if (n < max)
		dirs[n++] = AIRLOCK_POLICY_DIR;
	return n;
}

/* Resolve a preset name to a path in out. Returns 0, or -1 with the list
 * of directories searched in tried. */
static int
preset_find(const char *name, char *out, size_t outlen, char *tried, size_t triedlen)
{
	const char *dirs[POLICY_MAX_PRESET_DIRS + 3];
	size_t n = policy_preset_dirs(dirs, sizeof(dirs) / sizeof(dirs[0])), used = 0;

	tried[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		int w = snprintf(out, outlen, "%s/%s.yaml", dirs[i], name);

		if (w > 0 && (size_t)w < outlen && stat(out, &st) == 0 && S_ISREG(st.st_mode))
			return 0;
		w = snprintf(tried + used, triedlen - used, "%s%s", used ? ", " : "", dirs[i]);
		if (w > 0 && (size_t)w < triedlen - used)
			used += (size_t)w;
	}
	return -1;
}

static int load_bytes(struct loader *ld, const char *file, const char *real,
                      const unsigned char *data, size_t len);

/* Read a whole regular file of at most POLICY_MAX_FILE_SIZE bytes. On
 * error writes the reason into why and returns NULL. */
static unsigned char *
read_file(const char *path, size_t *len, char *why, size_t whylen)
{
	struct stat st;
	unsigned char *buf = NULL;
	size_t got = 0, cap;
	int fd;

	/* O_NONBLOCK: a FIFO named as a policy must not hang the loader. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "%s",
		         S_ISDIR(st.st_mode) ? "is a directory; expected a policy file"
		                             : "not a regular file; expected a policy file");
		goto fail;
	}
	if ((uint64_t)st.st_size > POLICY_MAX_FILE_SIZE) {
		snprintf(why, whylen,
		         "file is %llu bytes; policies are limited to %u bytes (4 MiB), split it "
		         "with include",
		         (unsigned long long)st.st_size, POLICY_MAX_FILE_SIZE);
		goto fail;
	}
	/* Size the buffer from st_size, but grow it as needed up to one byte
	 * past the limit: files in /proc report 0 and may hold more. */
	cap = (size_t)st.st_size + 1 < 4096 ? 4096 : (size_t)st.st_size + 1;
	if ((buf = malloc(cap)) == NULL) {
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	for (;;) {
		ssize_t r;

		if (got == cap) {
			size_t ncap = cap * 2 > POLICY_MAX_FILE_SIZE + 1 ? POLICY_MAX_FILE_SIZE + 1
			                                                 : cap * 2;
			unsigned char *nb;

			if (ncap == cap) {
				snprintf(why, whylen,
				         "file is over %u bytes (4 MiB); split it with include",
				         POLICY_MAX_FILE_SIZE);
				goto fail;
			}
			if ((nb = realloc(buf, ncap)) == NULL) {
				snprintf(why, whylen, "out of memory");
				goto fail;
			}
			buf = nb;
			cap = ncap;
		}
		r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(why, whylen, "%s", strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		got += (size_t)r;
		if (got > POLICY_MAX_FILE_SIZE) {
			snprintf(why, whylen,
			         "file is over %u bytes (4 MiB); split it with include",
			         POLICY_MAX_FILE_SIZE);
			goto fail;
		}
	}
	close(fd);
	*len = got;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

/* Load one file named by path (already resolved against its includer).
 * from/line/col say where it was named, for messages (from may be NULL
 * for the top-level file). */
static void
load_path(struct loader *ld, const char *path, const char *from, uint32_t line, uint32_t col)
{
	char why[256], real[PATH_MAX];
	unsigned char *data;
	size_t len = 0;

	if (realpath(path, real) == NULL) {
		if (from != NULL)
			lerr(ld, from, line, col, "include '%s': %s", path, strerror(errno));
		else
			lerr(ld, path, 1, 1, "cannot open: %s", strerror(errno));
		return;
	}
	for (int i = 0; i < ld->depth; i++) {
		if (ld->stack[i] != NULL && strcmp(ld->stack[i], real) == 0) {
			char chain[2048];
			size_t used = 0;

			chain[0] = '\0';
			for (int j = i; j < ld->depth; j++) {
				int w = snprintf(chain + used, sizeof(chain) - used, "%s -> ",
				                 ld->stack[j]);

				if (w > 0 && (size_t)w < sizeof(chain) - used)
					used += (size_t)w;
			}
			lerr(ld, from ? from : path, line, col, "include cycle: %s%s", chain, real);
			return;
		}
	}
	/* A file reached twice without a cycle (a diamond) is loaded once. */
	for (size_t i = 0; i < ld->n_loaded; i++)
		if (strcmp(ld->loaded[i], real) == 0)
			return;
	if (ld->n_files >= POLICY_MAX_FILES) {
		lerr(ld, from ? from : path, line, col,
		     "include '%s': more than %u files in one policy", path, POLICY_MAX_FILES);
		return;
	}
	if ((data = read_file(path, &len, why, sizeof(why))) == NULL) {
		if (from != NULL)
			lerr(ld, from, line, col, "include '%s': %s", path, why);
		else
			lerr(ld, path, 1, 1, "%s", why);
		return;
	}
	load_bytes(ld, path, real, data, len);
	free(data);
}

static void
load_include(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n)
{
	const char *s = node_str(t, n);
	char path[PATH_MAX], tried[1024];

	if (n->type != YNODE_SCALAR || n->len == 0) {
		lerr(ld, file, n->line, n->col, "include: expected a preset name or a path, got %s",
		     n->type == YNODE_SCALAR ? "nothing" : type_name(n));
		return;
	}
	if (ld->depth > POLICY_MAX_INCLUDE_DEPTH) {
		lerr(ld, file, n->line, n->col, "include '%s': includes nested more than %d deep",
		     s, POLICY_MAX_INCLUDE_DEPTH);
		return;
	}
	if (is_preset_name(s)) {
		if (!valid_preset_name(s)) {
			lerr(ld, file, n->line, n->col,
			     "include: '%s' is not a preset name (lowercase letters, digits, '-', "
			     "'_'); "
			     "write a path like ./%s.yaml for a file",
			     s, s);
			return;
		}
		if (preset_find(s, path, sizeof(path), tried, sizeof(tried)) != 0) {
			lerr(ld, file, n->line, n->col,
			     "include: no preset named '%s' (looked in %s)", s, tried);
			return;
		}
	} else if (s[0] == '/') {
		str_copy(path, s, sizeof(path));
	} else {
		/* Relative to the including file's directory. */
		const char *slash = strrchr(file, '/');
		int w;

		if (slash == NULL)
			w = snprintf(path, sizeof(path), "%s", s);
		else
			w = snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - file), file, s);
		if (w < 0 || (size_t)w >= sizeof(path)) {
			lerr(ld, file, n->line, n->col, "include '%s': path too long", s);
			return;
		}
	}
	load_path(ld, path, file, n->line, n->col);
}

static bool
valid_policy_name(const char *s)
{
	size_t l = strlen(s);

	if (l == 0 || l > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

static void
load_rules(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n,
           uint8_t action, const char *list)
{
	if (n->type != YNODE_SEQ) {
		lerr(ld, file, n->line, n->col,
		     "%s: expected a list of rules (`- host: example.com`), got %s", list,
		     n->type == YNODE_SCALAR && n->len == 0 ? "nothing (write [] for none)"
		                                            : type_name(n));
		return;
	}
	for (uint32_t c = n->child; c != YNODE_NONE; c = t->nodes[c].next)
		parse_rule(ld, file, t, &t->nodes[c], action, list);
}

/* unix: [/run/user/1000/ssh-agent.socket, ...]: host sockets CMD may
 * reach (docs/policy.md). Absolute paths; an included file's entries are
 * added to the includer's, each path once. */
static void
load_unix(struct loader *ld, const char *file, const struct ytree *t, const struct ynode *n)
{
	char where[PATH_MAX + 16];

	if (n->type != YNODE_SEQ) {
		lerr(ld, file, n->line, n->col,
		     "unix: expected a list of socket paths like "
		     "[/run/user/1000/ssh-agent.socket], "
		     "got %s",
		     n->type == YNODE_SCALAR && n->len == 0 ? "nothing (write [] for none)"
		                                            : type_name(n));
		return;
	}
	for (uint32_t c = n->child; c != YNODE_NONE; c = t->nodes[c].next) {
		const struct ynode *e = &t->nodes[c];
		const char *s = node_str(t, e);
		bool dup = false;

		if (e->type != YNODE_SCALAR || e->len == 0) {
			lerr(ld, file, e->line, e->col,
			     "unix: expected the absolute path of a socket, got %s",
			     e->type == YNODE_SCALAR ? "nothing" : type_name(e));
			continue;
		}
		if (s[0] != '/') {
			lerr(ld, file, e->line, e->col,
			     "unix: '%s' is not an absolute path; write the socket's full path on "
			     "the "
			     "host, like /run/user/1000/ssh-agent.socket",
			     s);
			continue;
		}
		if (e->len >= PATH_MAX) {
			lerr(ld, file, e->line, e->col, "unix: path longer than %d bytes",
			     PATH_MAX - 1);
			continue;
		}
		for (uint32_t i = 0; i < ld->n_unix && !dup; i++)
			dup = strcmp(ld->unix_socks[i].path, s) == 0;
		if (dup)
			continue;
		if (ld->n_unix >= POLICY_MAX_UNIX) {
			if (!ld->unix_full)
				lerr(ld, file, e->line, e->col,
				     "unix: more than %u sockets in all; that is the limit",
				     POLICY_MAX_UNIX);
			ld->unix_full = true;
			continue;
		}
		snprintf(where, sizeof(where), "%s:%u", file, e->line);
		struct punix *u = &ld->unix_socks[ld->n_unix];
		u->path = policy_arena_strndup(ld->p->p_arena, s, e->len);
		u->where = policy_arena_strndup(ld->p->p_arena, where, strlen(where));
		if (u->path == NULL || u->where == NULL) {
			ld->oom = true;
			return;
		}
		ld->n_unix++;
	}
}

/* Validate one parsed file; its own rules first, then its includes. */
static void
load_tree(struct loader *ld, const char *file, const struct ytree *t)
{
	static const char *const keys[] = {"version", "name", "description", "include",
	                                   "allow",   "deny", "mode",        "unix"};
	const struct ynode *root, *seen[ARRAY_SIZE(keys)] = {NULL};
	bool top = ld->depth == 1;

	if (t->n_nodes == 0) {
		lerr(ld, file, 1, 1, "empty policy; expected a mapping starting with `version: 1`");
		return;
	}
	root = &t->nodes[0];
	if (root->type != YNODE_MAP) {
		lerr(ld, file, root->line, root->col,
		     "expected a mapping of keys (version, allow, ...), got %s", type_name(root));
		return;
	}
	for (uint32_t k = root->child; k != YNODE_NONE;) {
		const struct ynode *key = &t->nodes[k];
		uint32_t v = key->next;
		const struct ynode *val = v != YNODE_NONE ? &t->nodes[v] : key;
		const char *ks = node_str(t, key);
		size_t i;

		k = v != YNODE_NONE ? t->nodes[v].next : YNODE_NONE;
		for (i = 0; i < ARRAY_SIZE(keys); i++)
			if (key->type == YNODE_SCALAR && strcmp(ks, keys[i]) == 0)
				break;
		if (key->type != YNODE_SCALAR) {
			lerr(ld, file, key->line, key->col,
			     "keys must be plain words (version, allow, ...), got %s",
			     type_name(key));
			continue;
		}
		if (i == ARRAY_SIZE(keys)) {
			lerr(ld, file, key->line, key->col,
			     "unknown key '%s'; expected version, name, description, include, "
			     "allow, deny, mode or unix",
			     ks);
			continue;
		}
		if (seen[i] != NULL) {
			lerr(ld, file, key->line, key->col, "'%s' given twice (first at line %u)",
			     ks, seen[i]->line);
			continue;
		}
		seen[i] = key;
		switch (i) {
		case 0: /* version */
			/* A quoted "1" is a string to YAML; "got 1" would
			 * read as nonsense, so that case gets its own words. */
			if (val->type == YNODE_SCALAR && !val->plain &&
			    strcmp(node_str(t, val), "1") == 0)
				lerr(ld, file, val->line, val->col,
				     "version: must be the number 1, not the string "
				     "\"1\" (drop the quotes)");
			else if (val->type != YNODE_SCALAR || !val->plain ||
			         strcmp(node_str(t, val), "1") != 0)
				lerr(ld, file, val->line, val->col,
				     "version: expected 1 (the only schema version), got %s",
				     val->type == YNODE_SCALAR ? node_str(t, val) : type_name(val));
			break;
		case 1: /* name */
			if (val->type != YNODE_SCALAR || !valid_policy_name(node_str(t, val)))
				lerr(ld, file, val->line, val->col,
				     "name: expected 1-64 letters, digits, '-', '_' or '.'");
			else if (top &&
			         (ld->p->p_name = policy_arena_strndup(
			                  ld->p->p_arena, node_str(t, val), val->len)) == NULL)
				ld->oom = true;
			break;
		case 2: /* description */
			if (val->type != YNODE_SCALAR || val->len > 1024)
				lerr(ld, file, val->line, val->col,
				     "description: expected one string of at most 1024 characters");
			else if (top &&
			         (ld->p->p_description = policy_arena_strndup(
			                  ld->p->p_arena, node_str(t, val), val->len)) == NULL)
				ld->oom = true;
			break;
		case 3: /* include: later, after this file's own rules */
			if (val->type != YNODE_SEQ)
				lerr(ld, file, val->line, val->col,
				     "include: expected a list like [pypi], got %s",
				     type_name(val));
			break;
		case 4:
			load_rules(ld, file, t, val, POLICY_ALLOW, "allow");
			break;
		case 5:
			load_rules(ld, file, t, val, POLICY_DENY, "deny");
			break;
		case 6: /* mode */
			if (val->type == YNODE_SCALAR && strcmp(node_str(t, val), "enforce") == 0) {
				if (top)
					ld->p->p_mode = POLICY_MODE_ENFORCE;
			} else if (val->type == YNODE_SCALAR &&
			           strcmp(node_str(t, val), "audit") == 0) {
				/* An included file's mode never changes the
				 * includer's: only the top file decides. */
				if (top)
					ld->p->p_mode = POLICY_MODE_AUDIT;
			} else {
				lerr(ld, file, val->line, val->col,
				     "mode: expected enforce or audit, got %s",
				     val->type == YNODE_SCALAR ? node_str(t, val) : type_name(val));
			}
			break;
		case 7:
			load_unix(ld, file, t, val);
			break;
		}
	}
	if (seen[0] == NULL)
		lerr(ld, file, root->line, root->col,
		     "missing `version: 1`; every policy starts with it");
	if (seen[3] != NULL) {
		const struct ynode *inc = &t->nodes[seen[3]->next];

		if (inc->type == YNODE_SEQ)
			for (uint32_t c = inc->child; c != YNODE_NONE; c = t->nodes[c].next)
				load_include(ld, file, t, &t->nodes[c]);
	}
}

static int
load_bytes(struct loader *ld, const char *file, const char *real, const unsigned char *data,
           size_t len)
{
	struct ytree t;
	char err[512];
	const unsigned char *nul;

	ld->n_files++;
	(void)SHA256_Update(&ld->sha, data, len);
	if (real != NULL && ld->n_loaded < POLICY_MAX_FILES) {
		ld->loaded[ld->n_loaded] = strdup(real);
		ld->opened[ld->n_loaded] = strdup(file);
		ld->n_loaded++;
		if (ld->loaded[ld->n_loaded - 1] == NULL || ld->opened[ld->n_loaded - 1] == NULL) {
			ld->oom = true;
			return -1;
		}
	}
	if (len > POLICY_MAX_FILE_SIZE) {
		lerr(ld, file, 1, 1,
		     "%zu bytes; policies are limited to %u bytes (4 MiB), split it with include",
		     len, POLICY_MAX_FILE_SIZE);
		return -1;
	}
	/* libyaml would call a NUL a "control character"; say what it is. */
	if ((nul = memchr(data, '\0', len)) != NULL) {
		lerr(ld, file, 1, 1,
		     "binary data (NUL byte at offset %zu); expected a YAML text policy",
		     (size_t)(nul - data));
		return -1;
	}
	memset(&t, 0, sizeof(t));
	if (ytree_parse(&t, data, len, err, sizeof(err)) != 0) {
		ld->n_errs_seen++;
		if (ld->n_errs < POLICY_MAX_ERRORS &&
		    policy_diag_add(&ld->errs, &ld->n_errs, "%s:%s", file, err) != 0)
			ld->oom = true;
		ytree_free(&t);
		return -1;
	}
	ld->stack[ld->depth++] = (char *)real;
	load_tree(ld, file, &t);
	ld->depth--;
	ytree_free(&t);
	return 0;
}

/* Default name: the file's base name without .yaml/.yml. */
static int
default_name(struct loader *ld, const char *file)
{
	const char *base = strrchr(file, '/');
	size_t l;

	base = base ? base + 1 : file;
	l = strlen(base);
	if (l > 5 && strcmp(base + l - 5, ".yaml") == 0)
		l -= 5;
	else if (l > 4 && strcmp(base + l - 4, ".yml") == 0)
		l -= 4;
	if (l == 0) {
		base = "policy";
		l = 6;
	}
	ld->p->p_name = policy_arena_strndup(ld->p->p_arena, base, l);
	return ld->p->p_name ? 0 : -1;
}

static const struct pport default_ports[] = {{80, 80}, {443, 443}};

/* The files read, from the loader into the policy's arena. 0 or -1. */
static int
keep_sources(struct loader *ld)
{
	struct policy *p = ld->p;

	if (ld->n_loaded == 0)
		return 0;
	p->p_sources = policy_arena_alloc(p->p_arena, sizeof(*p->p_sources) * ld->n_loaded);
	if (p->p_sources == NULL)
		return -1;
	for (size_t i = 0; i < ld->n_loaded; i++) {
		struct policy_source *src = &p->p_sources[i];

		src->path = policy_arena_strndup(p->p_arena, ld->opened[i], strlen(ld->opened[i]));
		src->real = policy_arena_strndup(p->p_arena, ld->loaded[i], strlen(ld->loaded[i]));
		if (src->path == NULL || src->real == NULL)
			return -1;
	}
	p->p_n_sources = ld->n_loaded;
	return 0;
}

/* ---- inspect: and other rules on the same name and port ---- */

static bool
is_subdomain(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);

	return n > k + 1 && name[n - k - 1] == '.' && strcmp(name + n - k, suffix) == 0;
}

/* Whether two host rules name a common name. */
static bool
names_overlap(const struct policy_rule_src *a, const struct policy_rule_src *b)
{
	if (a->kind == PRULE_EXACT && b->kind == PRULE_EXACT)
		return strcmp(a->key, b->key) == 0;
	if (a->kind == PRULE_EXACT)
		return is_subdomain(a->key, b->key);
	if (b->kind == PRULE_EXACT)
		return is_subdomain(b->key, a->key);
	return strcmp(a->key, b->key) == 0 || is_subdomain(a->key, b->key) ||
	       is_subdomain(b->key, a->key);
}

static bool
ports_overlap(const struct loader *ld, const struct policy_rule_src *a,
              const struct policy_rule_src *b)
{
	for (uint32_t i = 0; i < a->n_ports; i++)
		for (uint32_t j = 0; j < b->n_ports; j++) {
			const struct pport *x = &ld->ports[a->port_off + i];
			const struct pport *y = &ld->ports[b->port_off + j];

			if (x->lo <= y->hi && y->lo <= x->hi)
				return true;
		}
	return false;
}

/* An allow rule that inspects and one that does not, on a common name and
 * port, would leave it to rule order whether a connection is inspected:
 * a load error, named at the later of the two (docs/policy.md,
 * "Inspection"). Cost: the inspecting rules times all rules. */
static void
check_inspect_overlap(struct loader *ld)
{
	for (uint32_t i = 0; i < ld->n_rules; i++) {
		const struct policy_rule_src *a = &ld->rules[i];

		if (a->inspect == NULL)
			continue;
		for (uint32_t j = 0; j < ld->n_rules; j++) {
			const struct policy_rule_src *b = &ld->rules[j];
			const struct policy_rule_src *later = i > j ? a : b;

			if (b->inspect != NULL || b->action != POLICY_ALLOW ||
			    (b->kind != PRULE_EXACT && b->kind != PRULE_WILDCARD) ||
			    !names_overlap(a, b) || !ports_overlap(ld, a, b))
				continue;
			ld->n_errs_seen++;
			if (ld->n_errs < POLICY_MAX_ERRORS &&
			    policy_diag_add(&ld->errs, &ld->n_errs,
			                    "%s:%u: %s overlaps %s (%s at %s) on a port: one rule "
			                    "inspects, the other does not; give both the same "
			                    "`inspect:` or make their ports disjoint",
			                    later->where, later->col, later->pattern,
			                    later == a ? b->pattern : a->pattern,
			                    later == a ? "not inspected" : "inspected",
			                    later == a ? b->where : a->where) != 0)
				ld->oom = true;
		}
	}
}

static struct policy *
load_common(const char *file, const unsigned char *data, size_t len, bool from_path,
            struct policy_diag *diag)
{
	struct loader ld;
	struct policy *p = NULL;
	unsigned char md[SHA256_DIGEST_LENGTH];
	bool ok = false;

	memset(&ld, 0, sizeof(ld));
	(void)SHA256_Init(&ld.sha);
	if ((p = calloc(1, sizeof(*p))) == NULL || (p->p_arena = policy_arena_new()) == NULL) {
		ld.oom = true;
		goto out;
	}
	ld.p = p;
	port_add(&ld, default_ports[0].lo, default_ports[0].hi);
	port_add(&ld, default_ports[1].lo, default_ports[1].hi);
	if (from_path)
		load_path(&ld, file, NULL, 0, 0);
	else
		load_bytes(&ld, file, NULL, data, len);
	if (!ld.oom && ld.n_errs_seen == 0)
		check_inspect_overlap(&ld);
	if (ld.oom || ld.n_errs_seen > 0)
		goto out;
	if (p->p_name == NULL && default_name(&ld, file) != 0) {
		ld.oom = true;
		goto out;
	}
	(void)SHA256_Final(md, &ld.sha);
	for (unsigned i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(p->p_sha256 + 2 * i, 3, "%02x", md[i]);
	if ((p->p_ports = policy_arena_alloc(p->p_arena, sizeof(struct pport) * ld.n_ports)) ==
	    NULL) {
		ld.oom = true;
		goto out;
	}
	memcpy(p->p_ports, ld.ports, sizeof(struct pport) * ld.n_ports);
	if (ld.n_unix > 0) {
		p->p_unix = policy_arena_alloc(p->p_arena, sizeof(struct punix) * ld.n_unix);
		if (p->p_unix == NULL) {
			ld.oom = true;
			goto out;
		}
		memcpy(p->p_unix, ld.unix_socks, sizeof(struct punix) * ld.n_unix);
		p->p_n_unix = ld.n_unix;
	}
	if (keep_sources(&ld) != 0 || policy_compile(p, ld.rules, ld.n_rules) != 0) {
		ld.oom = true;
		goto out;
	}
	ok = true;
	if (diag != NULL && (policy_catalog_check(p, diag) != 0 ||
	                     policy_cidr_check(ld.rules, ld.n_rules, diag) != 0)) {
		ok = false;
		ld.oom = true;
	}
out:
	if (ld.oom)
		lerr(&ld, file, 1, 1, "out of memory loading the policy");
	if (ld.n_errs_seen > ld.n_errs && ld.n_errs > 0)
		policy_diag_add(&ld.errs, &ld.n_errs, "%s: %zu more errors not shown", file,
		                ld.n_errs_seen - ld.n_errs);
	if (diag != NULL) {
		/* Hand the lines over; the diag may already hold lines from an
		 * earlier load, so append. */
		for (size_t i = 0; i < ld.n_errs; i++) {
			char **nl = realloc(diag->lines, sizeof(*nl) * (diag->n_lines + 1));

			if (nl == NULL) {
				free(ld.errs[i]);
				continue;
			}
			diag->lines = nl;
			diag->lines[diag->n_lines++] = ld.errs[i];
		}
	} else {
		for (size_t i = 0; i < ld.n_errs; i++)
			free(ld.errs[i]);
	}
	free(ld.errs);
	for (size_t i = 0; i < ld.n_loaded; i++) {
		free(ld.loaded[i]);
		free(ld.opened[i]);
	}
	free(ld.rules);
	free(ld.ports);
	if (!ok) {
		policy_free(p);
		return NULL;
	}
	return p;
}

struct policy *
policy_load(const char *path, struct policy_diag *diag)
{
	char found[PATH_MAX], tried[1024];

	if (path == NULL || *path == '\0') {
		if (diag != NULL)
			policy_diag_add(&diag->lines, &diag->n_lines,
			                "(none):1:1: no policy file given");
		return NULL;
	}
	if (is_preset_name(path)) {
		if (!valid_preset_name(path) ||
		    preset_find(path, found, sizeof(found), tried, sizeof(tried)) != 0) {
			if (diag != NULL)
				policy_diag_add(&diag->lines, &diag->n_lines,
				                "%s:1:1: no preset named '%s' (looked in %s); for "
				                "a file here write ./%s",
				                path, path,
				                valid_preset_name(path)
				                        ? tried
				                        : "no directory: not a preset name",
				                path);
			return NULL;
		}
		return load_common(found, NULL, 0, true, diag);
	}
	return load_common(path, NULL, 0, true, diag);
}

struct policy *
policy_load_buffer(const char *name, const void *data, size_t len, struct policy_diag *diag)
{
	return load_common(name ? name : "(buffer)", data, len, false, diag);
}

void
policy_free(struct policy *p)
{
	if (p == NULL)
		return;
	policy_arena_free(p->p_arena);
	free(p);
}

void
policy_diag_clear(struct policy_diag *diag)
{
	if (diag == NULL)
		return;
	for (size_t i = 0; i < diag->n_lines; i++)
		free(diag->lines[i]);
	for (size_t i = 0; i < diag->n_warnings; i++)
		free(diag->warnings[i]);
	free(diag->lines);
	free(diag->warnings);
	memset(diag, 0, sizeof(*diag));
}

int
policy_add_preset_dir(const char *dir)
{
	char *d;

	if (dir == NULL || n_preset_dirs >= POLICY_MAX_PRESET_DIRS)
		return -1;
	if ((d = strdup(dir)) == NULL)
		return -1;
	preset_dirs[n_preset_dirs++] = d;
	return 0;
}

size_t
policy_sources(const struct policy *p, const struct policy_source **out)
{
	*out = p->p_sources;
	return p->p_n_sources;
}

const char *
policy_name(const struct policy *p)
{
	return p->p_name;
}

const char *
policy_sha256(const struct policy *p)
{
	return p->p_sha256;
}

enum policy_mode
policy_mode(const struct policy *p)
{
	return p->p_mode;
}

void
policy_set_mode(struct policy *p, enum policy_mode mode)
{
	p->p_mode = mode;
}

size_t
policy_unix_count(const struct policy *p)
{
	return p->p_n_unix;
}

const char *
policy_unix_path(const struct policy *p, size_t i, const char **where)
{
	if (i >= p->p_n_unix)
		return NULL;
	if (where != NULL)
		*where = p->p_unix[i].where;
	return p->p_unix[i].path;
}
