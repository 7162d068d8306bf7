/* `airlock log suggest`: the smallest schema-v1 policy that would have
 * allowed what the logged tasks were let do or, in audit mode, would have
 * been refused. Exact names by default; a "*.parent" rule only where at
 * least wildcard_min sibling names under one parent were seen.
 *
 * The log is the task's word, and the task may be hostile: what it merely
 * tried is not evidence that it needs it. So a name becomes a rule only
 * from an allowed or an audit-deny event. Names denied in enforce mode,
 * names that resolved to an address the guard refuses, loopback names and
 * look-alikes of names that were allowed are listed as commented-out rules
 * with the reason (include_denied turns the first and the look-alikes into
 * rules); addresses contacted without a name and guarded ranges appear as
 * commented-out cidr rules. Allowing those is a decision a person makes. */
#include "elog/review.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/buf.h"
#include "elog/record.h"
#include "elog/strmap.h"
#include "policy/guard.h"
#include "policy/policy.h"

#define MAX_PORTS    64
#define NAME_MAX_LEN 253

/* Why a name is not suggested as a rule. */
enum held {
	HELD_NO,        /* a rule */
	HELD_DENIED,    /* only denied in enforce mode */
	HELD_GUARD,     /* resolved to an address the guard refuses */
	HELD_LOOPBACK,  /* localhost and its kind */
	HELD_LOOKALIKE, /* one edit or confusable away from an allowed name */
	HELD_PUNYCODE,  /* an internationalised name nobody allowed */
};

struct stat_entry {
	char *key; /* name, "*.parent" or address */
	uint16_t ports[MAX_PORTS];  /* of allowed and audit-deny events */
	size_t n_ports;
	uint16_t dports[MAX_PORTS]; /* of enforce-mode denials */
	size_t n_dports;
	bool ports_overflow;
	uint64_t attempts, allowed, denied, audit_denied, dns, dns_ok;
	bool guarded;   /* an event the address guard decided */
	char *reason;   /* the first denial's reason, for the comment */
	enum held held;
	const char *like; /* HELD_LOOKALIKE: the allowed name (borrowed) */
	char *protos; /* packets: "udp,icmp" */
	/* wildcard: the names it replaced */
	char *members;
	size_t n_members;
	bool covered; /* replaced by a wildcard */
	bool apex_kept;
};

struct suggest {
	struct elog_strmap *names;
	struct elog_strmap *addrs;
	uint64_t events, tasks, skipped;
	bool oom;
};

static void
entry_free(struct stat_entry *e)
{
	free(e->key);
	free(e->reason);
	free(e->protos);
	free(e->members);
	free(e);
}

static struct stat_entry *
entry_get(struct suggest *s, struct elog_strmap *m, const char *key)
{
	struct stat_entry *e = elog_strmap_get(m, key);

	if (e != NULL)
		return e;
	e = calloc(1, sizeof(*e));
	if (e == NULL || (e->key = strdup(key)) == NULL || elog_strmap_put(m, key, e) < 0) {
		if (e != NULL)
			entry_free(e);
		s->oom = true;
		return NULL;
	}
	return e;
}

/* Into a sorted list of at most MAX_PORTS (overflow says some were lost). */
static void
add_port_to(uint16_t *ports, size_t *n, bool *overflow, int port)
{
	size_t i;

	if (port < 0)
		return;
	for (i = 0; i < *n; i++)
		if (ports[i] == port)
			return;
	if (*n == MAX_PORTS) {
		*overflow = true;
		return;
	}
	/* Keep sorted: the output is then stable. */
	for (i = *n; i > 0 && ports[i - 1] > port; i--)
		ports[i] = ports[i - 1];
	ports[i] = (uint16_t)port;
	(*n)++;
}

static void
add_port(struct stat_entry *e, int port)
{
	add_port_to(e->ports, &e->n_ports, &e->ports_overflow, port);
}

static void
add_proto(struct suggest *s, struct stat_entry *e, const char *proto)
{
	size_t have, n;
	char *p;

	if (proto == NULL || strlen(proto) > 16)
		return;
	if (e->protos != NULL) {
		/* A short list: a linear search is enough. */
		const char *c = e->protos;
		size_t pl = strlen(proto);
		while (c != NULL) {
			if (strncmp(c, proto, pl) == 0 && (c[pl] == ',' || c[pl] == '\0'))
				return;
			c = strchr(c, ',');
			c = c != NULL ? c + 1 : NULL;
		}
	}
	have = e->protos != NULL ? strlen(e->protos) : 0;
	if (have > 128)
		return;
	n = have + strlen(proto) + 2;
	p = realloc(e->protos, n);
	if (p == NULL) {
		s->oom = true;
		return;
	}
	if (have > 0)
		p[have++] = ',';
	memcpy(p + have, proto, strlen(proto) + 1);
	e->protos = p;
}

/* The address guard decided the event (tokens, and older logs' words). */
static bool
guard_reason(const char *reason)
{
	return reason != NULL &&
	       (strcmp(reason, "address-guard") == 0 || strcmp(reason, "name-not-at-address") == 0 ||
	        strstr(reason, "address guard") != NULL || strstr(reason, "host's address") != NULL);
}

static void
count(struct suggest *s, struct stat_entry *e, const struct elog_record *r)
{
	bool dns = strcmp(r->kind, "dns") == 0;
	uint64_t n = elog_record_events(r);
	const char *v = r->verdict != NULL ? r->verdict : "";
	bool ok = strcmp(v, "allow") == 0 || strcmp(v, "audit-deny") == 0;
	bool denied = strcmp(v, "deny") == 0;

	e->guarded |= guard_reason(r->reason);
	if (denied && e->reason == NULL && r->reason != NULL &&
	    (e->reason = strndup(r->reason, 64)) == NULL)
		s->oom = true;
	if (dns) {
		/* A query's port is the resolver's, not the name's. */
		e->dns += n;
		e->dns_ok += ok ? n : 0;
		return;
	}
	e->attempts += n;
	if (strcmp(v, "allow") == 0)
		e->allowed += n;
	else if (denied)
		e->denied += n;
	else if (strcmp(v, "audit-deny") == 0)
		e->audit_denied += n;
	if (ok)
		add_port(e, r->port);
	else if (denied)
		add_port_to(e->dports, &e->n_dports, &e->ports_overflow, r->port);
}

/* The policy's own normalisation (lowercase, no final dot, valid labels),
 * plus the length limit of a DNS name, so every name suggested loads. */
static int
normalize_name(const char *in, char *out, size_t outlen)
{
	const char *why;

	if (policy_name_normalize(in, out, outlen, &why) < 0)
		return -1;
	return strlen(out) <= NAME_MAX_LEN ? 0 : -1;
}

/* A plain YAML scalar that a YAML reader could take for something other
 * than a string (a number, a boolean, null) is quoted. */
static bool
needs_quotes(const char *name)
{
	static const char *const words[] = {"y",   "n",    "yes",   "no",   "on",
	                                    "off", "true", "false", "null", "~"};

	if (strpbrk(name, "abcdefghijklmnopqrstuvwxyz") == NULL)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		if (strcmp(name, words[i]) == 0)
			return true;
	return false;
}

static void
suggest_add(struct suggest *s, const struct elog_record *r)
{
	struct sockaddr_storage ss;
	char name[NAME_MAX_LEN + 2];
	struct stat_entry *e;

	if (r->type == ELOG_REC_TASK_START)
		s->tasks++;
	if (r->type != ELOG_REC_EVENT)
		return;
	s->events += elog_record_events(r);
	if (r->host != NULL && !elog_parse_addr(r->host, &ss)) {
		if (normalize_name(r->host, name, sizeof(name)) < 0) {
			s->skipped++;
			if (s->skipped <= 10) {
				char storage[400];
				struct elog_buf b;
				elog_buf_init(&b, storage, sizeof(storage) - 1);
				elog_buf_safe_text(&b, r->host, 255);
				elog_buf_putc(&b, '\0');
				log_warnx("%s:%" PRIu64 ": \"%s\" is not a valid host name; "
				          "left out of the suggestion",
				          r->file, r->lineno, b.data);
			}
			return;
		}
		e = entry_get(s, s->names, name);
		if (e != NULL)
			count(s, e, r);
		return;
	}
	const char *a = r->host != NULL ? r->host : r->ip;
	if (a == NULL || !elog_parse_addr(a, &ss))
		return;
	char canon[INET6_ADDRSTRLEN];
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, canon, sizeof(canon));
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, canon, sizeof(canon));
	e = entry_get(s, s->addrs, canon);
	if (e == NULL)
		return;
	count(s, e, r);
	if (strcmp(r->kind, "packet") == 0)
		add_proto(s, e, r->proto);
}

/* elog_read_files callback: stop reading once out of memory. */
static int
suggest_each(const struct elog_record *r, void *arg)
{
	struct suggest *s = arg;

	suggest_add(s, r);
	return s->oom ? -1 : 0;
}

static const char *
parent_of(const char *name)
{
	const char *dot = strchr(name, '.');

	/* The parent must itself have two labels: never "*.com". */
	if (dot == NULL || strchr(dot + 1, '.') == NULL)
		return NULL;
	return dot + 1;
}

static bool
under(const char *name, const char *parent)
{
	size_t n = strlen(name), p = strlen(parent);

	return n > p + 1 && name[n - p - 1] == '.' && strcmp(name + n - p, parent) == 0;
}

static void
merge_into(struct suggest *s, struct stat_entry *w, struct stat_entry *e)
{
	size_t have = w->members != NULL ? strlen(w->members) : 0;
	char *m;

	for (size_t i = 0; i < e->n_ports; i++)
		add_port(w, e->ports[i]);
	w->ports_overflow |= e->ports_overflow;
	w->attempts += e->attempts;
	w->allowed += e->allowed;
	w->denied += e->denied;
	w->audit_denied += e->audit_denied;
	w->dns += e->dns;
	e->covered = true;
	w->n_members++;
	if (w->n_members > 6)
		return; /* the comment lists the first few */
	m = realloc(w->members, have + strlen(e->key) + 3);
	if (m == NULL) {
		s->oom = true;
		return;
	}
	if (have > 0) {
		m[have++] = ',';
		m[have++] = ' ';
	}
	memcpy(m + have, e->key, strlen(e->key) + 1);
	w->members = m;
}

/* --- what is held back ------------------------------------------------- */

static bool
loopback_name(const char *name)
{
	size_t n = strlen(name), l = strlen(".localhost");

	return strcmp(name, "localhost") == 0 || strcmp(name, "localhost.localdomain") == 0 ||
	       strcmp(name, "ip6-localhost") == 0 || strcmp(name, "ip6-loopback") == 0 ||
	       (n > l && strcmp(name + n - l, ".localhost") == 0);
}

static bool
punycode_name(const char *name)
{
	for (const char *p = name; p != NULL; p = strchr(p, '.'), p = p != NULL ? p + 1 : NULL)
		if (strncmp(p, "xn--", 4) == 0)
			return true;
	return false;
}

/* The last two labels: what a look-alike imitates (no public suffix list:
 * "co.uk" names compare on "co.uk", which only makes fewer matches). */
static const char *
registrable(const char *name)
{
	const char *last = strrchr(name, '.'), *p;

	if (last == NULL)
		return name;
	for (p = last; p > name && p[-1] != '.'; p--)
		;
	return p;
}

/* name as it reads: digits and letters that pass for others folded to
 * one (0 o, 1 i l, rn m, vv w), hyphens dropped. */
static void
fold(const char *name, char *out, size_t outlen)
{
	size_t k = 0;

	for (const char *p = name; *p != '\0' && k + 1 < outlen; p++) {
		char c = *p;

		if (c == '-')
			continue;
		if (c == 'r' && p[1] == 'n') {
			c = 'm';
			p++;
		} else if (c == 'v' && p[1] == 'v') {
			c = 'w';
			p++;
		} else if (c == '0') {
			c = 'o';
		} else if (c == '1' || c == 'i') {
			c = 'l';
		}
		out[k++] = c;
	}
	out[k] = '\0';
}

/* At most one insertion, deletion, substitution or swap of neighbours. */
static bool
one_edit(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i = 0;

	if (la > lb + 1 || lb > la + 1)
		return false;
	while (i < la && i < lb && a[i] == b[i])
		i++;
	if (la == lb) {
		if (i == la)
			return true;
		return strcmp(a + i + 1, b + i + 1) == 0 ||
		       (i + 1 < la && a[i] == b[i + 1] && a[i + 1] == b[i] &&
		        strcmp(a + i + 2, b + i + 2) == 0);
	}
	return la > lb ? strcmp(a + i + 1, b + i) == 0 : strcmp(a + i, b + i + 1) == 0;
}

/* a imitates b: their registrable parts differ, yet read the same or are
 * one edit apart (pypl.org, githuh.com, g00gle.com). */
static bool
looks_like(const char *a, const char *b)
{
	const char *ra = registrable(a), *rb = registrable(b);
	char fa[NAME_MAX_LEN + 1], fb[NAME_MAX_LEN + 1];

	if (strcmp(ra, rb) == 0)
		return false;
	fold(ra, fa, sizeof(fa));
	fold(rb, fb, sizeof(fb));
	return strcmp(fa, fb) == 0 || one_edit(ra, rb);
}

/* Decide, for every name, whether it may become a rule. */
static void
hold_back(struct suggest *s, bool include_denied)
{
	size_t n = elog_strmap_count(s->names);

	for (size_t i = 0; i < n; i++) {
		struct stat_entry *e = elog_strmap_value(s->names, i);
		bool earned = e->allowed + e->audit_denied + e->dns_ok > 0;

		if (loopback_name(e->key))
			e->held = HELD_LOOPBACK;
		else if (e->guarded)
			e->held = HELD_GUARD;
		else if (!earned && !include_denied)
			e->held = HELD_DENIED;
		if (e->held != HELD_NO || e->allowed > 0 || include_denied)
			continue;
		/* Not allowed by the policy that ran: is it a look-alike of a
		 * name that was? */
		for (size_t k = 0; k < n; k++) {
			const struct stat_entry *a = elog_strmap_value(s->names, k);

			if (a->allowed > 0 && looks_like(e->key, a->key)) {
				e->held = HELD_LOOKALIKE;
				e->like = a->key;
				break;
			}
		}
		if (e->held == HELD_NO && punycode_name(e->key))
			e->held = HELD_PUNYCODE;
	}
}

/* Build the wildcard rules: count direct children per parent, then fold
 * every name under a chosen parent (any depth) into its wildcard. */
static int
make_wildcards(struct suggest *s, unsigned min, struct elog_strmap *wild)
{
	struct elog_strmap *kids = elog_strmap_new();
	size_t n = elog_strmap_count(s->names);
	int rc = 0;

	if (kids == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *p = parent_of(elog_strmap_key(s->names, i));
		if (p == NULL || ((struct stat_entry *)elog_strmap_value(s->names, i))->held != HELD_NO)
			continue;
		uintptr_t c = (uintptr_t)elog_strmap_get(kids, p);
		if (elog_strmap_put(kids, p, (void *)(c + 1)) < 0) {
			rc = -1;
			goto out;
		}
	}
	for (size_t k = 0; k < elog_strmap_count(kids); k++) {
		const char *p = elog_strmap_key(kids, k);
		char key[NAME_MAX_LEN + 4];

		if ((uintptr_t)elog_strmap_value(kids, k) < min)
			continue;
		snprintf(key, sizeof(key), "*.%s", p);
		struct stat_entry *w = entry_get(s, wild, key);
		if (w == NULL) {
			rc = -1;
			goto out;
		}
	}
	/* Fold names into the longest (most specific) matching wildcard. */
	for (size_t i = 0; i < n; i++) {
		struct stat_entry *e = elog_strmap_value(s->names, i);
		struct stat_entry *best = NULL;

		if (e->held != HELD_NO)
			continue;

		for (const char *p = strchr(e->key, '.'); p != NULL; p = strchr(p + 1, '.')) {
			char key[NAME_MAX_LEN + 4];
			snprintf(key, sizeof(key), "*.%s", p + 1);
			best = elog_strmap_get(wild, key);
			if (best != NULL && under(e->key, p + 1))
				break;
			best = NULL;
		}
		if (best != NULL)
			merge_into(s, best, e);
	}
out:
	elog_strmap_free(kids);
	return rc;
}

static int
entry_cmp(const void *a, const void *b)
{
	const struct stat_entry *x = *(struct stat_entry *const *)a;
	const struct stat_entry *y = *(struct stat_entry *const *)b;

	/* By the name read right to left, so a domain's names sit together. */
	const char *xk = x->key[0] == '*' ? x->key + 2 : x->key;
	const char *yk = y->key[0] == '*' ? y->key + 2 : y->key;
	size_t xl = strlen(xk), yl = strlen(yk);

	while (xl > 0 && yl > 0) {
		const char *xd = memrchr(xk, '.', xl), *yd = memrchr(yk, '.', yl);
		size_t xs = xd != NULL ? (size_t)(xd - xk) + 1 : 0;
		size_t ys = yd != NULL ? (size_t)(yd - yk) + 1 : 0;
		size_t xn = xl - xs, yn = yl - ys;
		int c = strncmp(xk + xs, yk + ys, xn < yn ? xn : yn);
		if (c == 0 && xn != yn)
			c = xn < yn ? -1 : 1;
		if (c != 0)
			return c;
		xl = xs > 0 ? xs - 1 : 0;
		yl = ys > 0 ? ys - 1 : 0;
		if (xs == 0 || ys == 0)
			break;
	}
	if (xl != yl)
		return xl < yl ? -1 : 1;
	/* The apex before its wildcard. */
	return (x->key[0] == '*') - (y->key[0] == '*');
}

static void
put_counts(FILE *out, const struct stat_entry *e)
{
	const char *sep = " (";

	if (e->attempts > 0) {
		fprintf(out, "%" PRIu64 " connection%s", e->attempts, e->attempts == 1 ? "" : "s");
		if (e->allowed > 0) {
			fprintf(out, "%s%" PRIu64 " allowed", sep, e->allowed);
			sep = ", ";
		}
		if (e->denied > 0) {
			fprintf(out, "%s%" PRIu64 " denied", sep, e->denied);
			sep = ", ";
		}
		if (e->audit_denied > 0) {
			fprintf(out, "%s%" PRIu64 " audit-deny", sep, e->audit_denied);
			sep = ", ";
		}
		if (sep[0] == ',')
			fputc(')', out);
	}
	if (e->attempts > 0 && e->dns > 0)
		fputs(", ", out);
	if (e->dns > 0)
		fprintf(out, "%" PRIu64 " DNS quer%s", e->dns, e->dns == 1 ? "y" : "ies");
}

static void
put_ports(FILE *out, const struct stat_entry *e, const char *prefix)
{
	if (e->n_ports == 0)
		return;
	fprintf(out, "%sports: [", prefix);
	for (size_t i = 0; i < e->n_ports; i++)
		fprintf(out, "%s%u", i > 0 ? ", " : "", e->ports[i]);
	fputs("]\n", out);
}

/* Every port seen, allowed or denied: for rules left as comments. */
static void
put_all_ports(FILE *out, const struct stat_entry *e, const char *prefix)
{
	struct stat_entry all = {.n_ports = 0};

	for (size_t i = 0; i < e->n_ports; i++)
		add_port(&all, e->ports[i]);
	for (size_t i = 0; i < e->n_dports; i++)
		add_port(&all, e->dports[i]);
	put_ports(out, &all, prefix);
}

static void
write_rule(FILE *out, const struct stat_entry *e)
{
	fputs("  # ", out);
	if (e->key[0] == '*')
		fprintf(out, "%zu names under %s (%s%s): ", e->n_members, e->key + 2,
		        e->members != NULL ? e->members : "", e->n_members > 6 ? ", ..." : "");
	put_counts(out, e);
	fputc('\n', out);
	if (e->n_ports == 0)
		fputs("  # seen in DNS only: ports unknown, the default 80, 443 applies\n", out);
	if (e->ports_overflow)
		fprintf(out, "  # more than %d ports were seen; only the first are listed\n",
		        MAX_PORTS);
	if (e->n_dports > 0) {
		fputs("  # also denied in enforce mode on ports [", out);
		for (size_t i = 0; i < e->n_dports; i++)
			fprintf(out, "%s%u", i > 0 ? ", " : "", e->dports[i]);
		fputs("]: not added\n", out);
	}
	if (e->key[0] == '*' || needs_quotes(e->key))
		fprintf(out, "  - host: \"%s\"\n", e->key);
	else
		fprintf(out, "  - host: %s\n", e->key);
	put_ports(out, e, "    ");
}

/* A name held back: its counts, why, and the rule commented out. */
static void
write_held(FILE *out, const struct stat_entry *e)
{
	char why[320];
	struct elog_buf b;

	elog_buf_init(&b, why, sizeof(why) - 1);
	elog_buf_safe_text(&b, e->reason != NULL ? e->reason : "no reason logged", 64);
	why[b.len] = '\0';
	fprintf(out, "  # %s: ", e->key);
	put_counts(out, e);
	fputs("\n  # ", out);
	switch (e->held) {
	case HELD_DENIED:
		fprintf(out, "denied in enforce mode (%s), never allowed: add it only if the task "
		             "needs it (--include-denied adds such names)\n",
		        why);
		break;
	case HELD_GUARD:
		fputs("resolved to an address the address guard refuses: a host rule would not "
		      "open it (docs/policy.md, The address guard)\n",
		      out);
		break;
	case HELD_LOOPBACK:
		fputs("a loopback name: the sandbox's own host, not a destination\n", out);
		break;
	case HELD_LOOKALIKE:
		fprintf(out, "looks like %s, which was allowed: a typo, or a look-alike of it?\n",
		        e->like);
		break;
	case HELD_PUNYCODE:
		fputs("an internationalised (punycode) name, never allowed: it may imitate another; "
		      "check what it reads as\n",
		      out);
		break;
	case HELD_NO:
		break;
	}
	fprintf(out, needs_quotes(e->key) ? "  # - host: \"%s\"\n" : "  # - host: %s\n", e->key);
	put_all_ports(out, e, "  #   ");
}

static void
write_addr(FILE *out, const struct stat_entry *e)
{
	struct sockaddr_storage ss;
	enum guard_class g;
	bool v6;

	elog_parse_addr(e->key, &ss);
	v6 = ss.ss_family == AF_INET6;
	g = guard_classify((struct sockaddr *)&ss);
	fprintf(out, "  # %s: ", e->key);
	put_counts(out, e);
	fputs(" by address, not by name", out);
	if (e->protos != NULL)
		fprintf(out, " (blocked packets: %s)", e->protos);
	fputs(".\n", out);
	if (g != GUARD_PUBLIC)
		fprintf(out,
		        "  # A %s address, refused by the address guard: allowing it "
		        "can open the host's own or internal services.\n",
		        guard_class_name(g));
	fputs("  # Left out on purpose; enable only if this address is really needed:\n", out);
	fprintf(out, "  # - cidr: %s/%d\n", e->key, v6 ? 128 : 32);
	put_all_ports(out, e, "  #   ");
}

/* The policy loader is the authority on what a host rule may hold (it
 * refuses, for example, a numeric last label): every rule is loaded alone
 * first, and one it refuses is left out with the loader's reason, so the
 * suggestion as a whole always loads. Returns the new count. */
static size_t
keep_loadable(struct stat_entry **list, size_t n)
{
	size_t kept = 0;

	for (size_t i = 0; i < n; i++) {
		char yaml[NAME_MAX_LEN + 64];
		struct policy_diag diag = {0};
		struct policy *p;
		int len = snprintf(yaml, sizeof(yaml),
		                   "version: 1\nname: check\nallow:\n  - host: \"%s\"\n",
		                   list[i]->key);

		p = policy_load_buffer("suggested rule", yaml, (size_t)len, &diag);
		if (p != NULL)
			list[kept++] = list[i];
		else
			log_warnx("suggest: %s left out: %s", list[i]->key,
			          diag.n_lines > 0 ? diag.lines[0]
			                           : "refused by the policy loader");
		policy_free(p);
		policy_diag_clear(&diag);
	}
	return kept;
}

/* One warning naming the first few addresses, not one per address. */
static void
warn_addrs(const struct suggest *s)
{
	size_t n = elog_strmap_count(s->addrs);
	char list[256];
	struct elog_buf b;

	elog_buf_init(&b, list, sizeof(list) - 1);
	for (size_t i = 0; i < n && i < 4; i++) {
		const struct stat_entry *e = elog_strmap_value(s->addrs, i);
		struct sockaddr_storage ss;

		elog_parse_addr(e->key, &ss);
		if (i > 0)
			elog_buf_puts(&b, ", ");
		elog_buf_puts(&b, e->key);
		if (guard_classify((struct sockaddr *)&ss) != GUARD_PUBLIC) {
			elog_buf_puts(&b, " (");
			elog_buf_puts(&b, guard_class_name(guard_classify((struct sockaddr *)&ss)));
			elog_buf_putc(&b, ')');
		}
	}
	list[b.len] = '\0';
	log_warnx("suggest: %zu address%s contacted without a name (%s%s) left as "
	          "commented-out cidr rules: review them",
	          n, n == 1 ? "" : "es", list, n > 4 ? ", ..." : "");
}

int
review_suggest(char *const *files, int n_files, const struct review_suggest_opts *o, FILE *out)
{
	struct suggest s = {.names = elog_strmap_new(), .addrs = elog_strmap_new()};
	struct elog_strmap *wild = elog_strmap_new();
	struct stat_entry **list = NULL;
	size_t n = 0, n_held = 0;
	int rc = 0;
	char now[40];

	if (s.names == NULL || s.addrs == NULL || wild == NULL) {
		s.oom = true;
		goto out;
	}
	rc = elog_read_files(files, n_files, suggest_each, &s);
	if (rc < 0 || s.oom)
		goto out;
	hold_back(&s, o->include_denied);
	if (o->wildcard_min > 0 && make_wildcards(&s, o->wildcard_min, wild) < 0) {
		s.oom = true;
		goto out;
	}
	list = calloc(elog_strmap_count(s.names) + elog_strmap_count(wild) + 1, sizeof(*list));
	if (list == NULL) {
		s.oom = true;
		goto out;
	}
	for (size_t i = 0; i < elog_strmap_count(s.names); i++) {
		struct stat_entry *e = elog_strmap_value(s.names, i);
		if (e->held != HELD_NO)
			n_held++;
		else if (!e->covered)
			list[n++] = e;
	}
	for (size_t i = 0; i < elog_strmap_count(wild); i++)
		list[n++] = elog_strmap_value(wild, i);
	qsort(list, n, sizeof(*list), entry_cmp);
	n = keep_loadable(list, n);

	elog_format_time((int64_t)time(NULL) * 1000, now, sizeof(now));
	fprintf(out,
	        "# Suggested by `airlock log suggest` at %s from %d log file%s\n"
	        "# (%" PRIu64 " task%s, %" PRIu64 " events). Review every rule before "
	        "enforcing it.\n",
	        now, n_files, n_files == 1 ? "" : "s", s.tasks, s.tasks == 1 ? "" : "s", s.events);
	fputs("version: 1\n", out);
	fprintf(out, "name: %s\n", o->name != NULL ? o->name : "suggested");
	fputs("description: allowlist suggested from egress logs\n", out);
	fputs(n == 0 ? "allow: []\n" : "allow:\n", out);
	for (size_t i = 0; i < n; i++)
		write_rule(out, list[i]);
	if (n_held > 0) {
		fputs("  # Names the logs show but that are not suggested (review each):\n", out);
		for (size_t i = 0; i < elog_strmap_count(s.names); i++) {
			const struct stat_entry *e = elog_strmap_value(s.names, i);

			if (e->held != HELD_NO)
				write_held(out, e);
		}
		log_warnx("suggest: %zu name%s left as commented-out rules (denied in enforce mode, "
		          "guarded, loopback or a look-alike): review them",
		          n_held, n_held == 1 ? "" : "s");
	}
	if (elog_strmap_count(s.addrs) > 0) {
		fputs(n == 0 ? "# addresses contacted without a name (allow: stays empty):\n" : "",
		      out);
		for (size_t i = 0; i < elog_strmap_count(s.addrs); i++)
			write_addr(out, elog_strmap_value(s.addrs, i));
		warn_addrs(&s);
	}
	fputs("mode: enforce\n", out);
	if (s.skipped > 10)
		log_warnx("suggest: %" PRIu64 " events with invalid host names left out",
		          s.skipped);
out:
	if (s.oom) {
		log_warnx("log suggest: out of memory");
		rc = -1;
	}
	free(list);
	for (size_t i = 0; s.names != NULL && i < elog_strmap_count(s.names); i++)
		entry_free(elog_strmap_value(s.names, i));
	for (size_t i = 0; s.addrs != NULL && i < elog_strmap_count(s.addrs); i++)
		entry_free(elog_strmap_value(s.addrs, i));
	for (size_t i = 0; wild != NULL && i < elog_strmap_count(wild); i++)
		entry_free(elog_strmap_value(wild, i));
	elog_strmap_free(s.names);
	elog_strmap_free(s.addrs);
	elog_strmap_free(wild);
	return rc;
}
