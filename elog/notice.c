#include "elog/notice.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>

#include "common/util.h"
#include "elog/buf.h"
#include "elog/elog.h"
#include "elog/record.h"
#include "elog/strmap.h"

/* The summary names this many destinations, then "and N more". */
#define NOTICE_NAMED 3
/* Sandbox-controlled text in one line: names, details. */
#define NOTICE_CAP 200

struct elog_notice {
	FILE *out;
	bool per_event;
	struct elog_strmap *seen; /* key -> (void *)1 */
	uint64_t dests, attempts, audit_dests;
	bool overflow; /* a destination past ELOG_NOTICE_MAX_DESTS (or no memory) */
};

struct elog_notice *
elog_notice_new(FILE *out, bool per_event)
{
	struct elog_notice *n = calloc(1, sizeof(*n));

	if (n == NULL || (n->seen = elog_strmap_new()) == NULL) {
		free(n);
		return NULL;
	}
	n->out = out;
	n->per_event = per_event;
	return n;
}

void
elog_notice_free(struct elog_notice *n)
{
	if (n == NULL)
		return;
	elog_strmap_free(n->seen);
	free(n);
}

/* The destination as a person names it: host:port, [v6]:port, "name
 * (dns)", "udp to addr:port", a socket path. Escaped. */
static void
put_key(struct elog_buf *b, const struct elog_event *ev)
{
	const char *name = ev->host != NULL ? ev->host : ev->ip;
	bool dns = ev->kind != NULL && strcmp(ev->kind, "dns") == 0;

	if (ev->path != NULL) {
		elog_buf_puts(b, "unix socket ");
		elog_buf_safe_text(b, ev->path, NOTICE_CAP);
		return;
	}
	if (ev->proto != NULL) {
		elog_buf_safe_text(b, ev->proto, 16);
		elog_buf_puts(b, " to ");
	}
	if (name == NULL) {
		elog_buf_putc(b, '-');
		return;
	}
	if (strchr(name, ':') != NULL && ev->port >= 0) {
		elog_buf_putc(b, '[');
		elog_buf_safe_text(b, name, NOTICE_CAP);
		elog_buf_putc(b, ']');
	} else {
		elog_buf_safe_text(b, name, NOTICE_CAP);
	}
	if (dns) {
		elog_buf_puts(b, " (dns)");
	} else if (ev->port >= 0) {
		elog_buf_putc(b, ':');
		elog_buf_i64(b, ev->port);
	}
}

static bool
reason_is(const struct elog_event *ev, const char *token)
{
	return ev->reason != NULL && strcmp(ev->reason, token) == 0;
}

/* What would let it through, in the policy's words, when there is one
 * thing to say. */
static void
put_fix(struct elog_buf *b, const struct elog_event *ev)
{
	bool dns = ev->kind != NULL && strcmp(ev->kind, "dns") == 0;
	struct sockaddr_storage ss;
	const char *addr = ev->host != NULL && elog_parse_addr(ev->host, &ss) ? ev->host : NULL;

	if (reason_is(ev, "no-rule") && addr != NULL) {
		/* An address as the host: only cidr rules match addresses. */
		elog_buf_puts(b, "; addresses are allowed only by cidr rules: {cidr: ");
		elog_buf_safe_text(b, addr, NOTICE_CAP);
		elog_buf_puts(b, ss.ss_family == AF_INET6 ? "/128" : "/32");
		if (ev->port >= 0) {
			elog_buf_puts(b, ", ports: [");
			elog_buf_i64(b, ev->port);
			elog_buf_putc(b, ']');
		}
		elog_buf_puts(b, "}");
	} else if (reason_is(ev, "no-rule") && ev->host != NULL) {
		elog_buf_puts(b, "; to allow it, add {host: ");
		elog_buf_safe_text(b, ev->host, NOTICE_CAP);
		if (!dns && ev->port >= 0) {
			elog_buf_puts(b, ", ports: [");
			elog_buf_i64(b, ev->port);
			elog_buf_putc(b, ']');
		}
		elog_buf_puts(b, "} to the policy's allow list");
	} else if (reason_is(ev, "no-rule")) {
		elog_buf_puts(b, "; reach it by name (a cidr rule would allow the address)");
	} else if (reason_is(ev, "denied-by-rule") && ev->rule != NULL && ev->detail == NULL) {
		elog_buf_puts(b, "; the policy denies it at ");
		elog_buf_safe_text(b, ev->rule, NOTICE_CAP);
	} else if (reason_is(ev, "address-guard")) {
		elog_buf_puts(b, "; only a cidr rule naming that address opens it (docs/policy.md, "
		                 "\"The address guard\")");
	} else if (reason_is(ev, "ech-not-allowed")) {
		elog_buf_puts(b, "; add 'ech: allow' to the name's rule to let it through");
	} else if (reason_is(ev, "name-not-at-address")) {
		elog_buf_puts(b, "; connect through the proxy (HTTPS_PROXY) or the sandbox's DNS");
	} else if (reason_is(ev, "firewall")) {
		elog_buf_puts(b, "; only TCP, through the proxy, and DNS leave the sandbox");
	} else if (reason_is(ev, "unix-not-listed") && ev->path != NULL) {
		elog_buf_puts(b, "; to allow it, add it to the policy's unix: list");
	}
}

void
elog_notice_event(struct elog_notice *n, const struct elog_event *ev)
{
	char key[512], storage[1024];
	struct elog_buf k, b;
	bool audit;
	uint64_t times;

	if (n == NULL || ev->verdict == NULL)
		return;
	audit = strcmp(ev->verdict, "audit-deny") == 0;
	if (!audit && strcmp(ev->verdict, "deny") != 0)
		return;
	times = ev->count > 0 ? ev->count : ev->packets > 0 ? ev->packets : 1;
	n->attempts += times;
	elog_buf_init(&k, key, sizeof(key) - 1);
	put_key(&k, ev);
	key[k.len] = '\0';
	if (elog_strmap_get(n->seen, key) != NULL)
		return;
	if (elog_strmap_count(n->seen) >= ELOG_NOTICE_MAX_DESTS ||
	    elog_strmap_put(n->seen, key, (void *)1) < 0) {
		/* Counted in attempts; said in the summary as "more". */
		n->overflow = true;
		return;
	}
	n->dests++;
	n->audit_dests += audit;
	if (!n->per_event)
		return;
	elog_buf_init(&b, storage, sizeof(storage) - 2);
	elog_buf_puts(&b, audit ? "airlock: audit mode would refuse " : "airlock: refused ");
	elog_buf_puts(&b, key);
	if (ev->detail != NULL) {
		elog_buf_puts(&b, ": ");
		elog_buf_safe_text(&b, ev->detail, NOTICE_CAP);
	}
	if (ev->reason != NULL) {
		elog_buf_puts(&b, ev->detail != NULL ? " (" : " (reason: ");
		elog_buf_safe_text(&b, ev->reason, 64);
		elog_buf_putc(&b, ')');
	}
	put_fix(&b, ev);
	elog_buf_putc(&b, '\n');
	/* One fwrite: on a line-buffered stream, one write(2) of the line. */
	fwrite(b.data, 1, b.len, n->out);
	fflush(n->out);
}

void
elog_notice_summary(const struct elog_notice *n, const char *logpath)
{
	char storage[2048];
	struct elog_buf b;
	uint64_t dests;
	size_t named = 0;

	if (n == NULL || n->dests == 0)
		return;
	dests = n->dests;
	elog_buf_init(&b, storage, sizeof(storage) - 2);
	if (n->audit_dests == n->dests && !n->overflow)
		elog_buf_puts(&b, "airlock: audit mode enforced nothing; the policy would have refused ");
	else
		elog_buf_puts(&b, "airlock: refused ");
	elog_buf_u64(&b, dests);
	elog_buf_puts(&b, dests == 1 ? " destination (" : " destinations (");
	elog_buf_u64(&b, n->attempts);
	elog_buf_puts(&b, n->attempts == 1 ? " attempt): " : " attempts): ");
	for (size_t i = 0; i < elog_strmap_count(n->seen) && named < NOTICE_NAMED; i++, named++) {
		if (i > 0)
			elog_buf_puts(&b, ", ");
		elog_buf_puts(&b, elog_strmap_key(n->seen, i));
	}
	if (dests > named) {
		elog_buf_puts(&b, " and ");
		elog_buf_u64(&b, dests - named);
		elog_buf_puts(&b, " more");
	}
	if (n->overflow)
		elog_buf_puts(&b, " (and others: only the first destinations are counted)");
	if (logpath != NULL) {
		elog_buf_puts(&b, "; details: airlock log show --denied ");
		elog_buf_safe_text(&b, logpath, NOTICE_CAP);
	}
	elog_buf_putc(&b, '\n');
	fwrite(b.data, 1, b.len, n->out);
	fflush(n->out);
}

uint64_t
elog_notice_dests(const struct elog_notice *n)
{
	return n->dests;
}

uint64_t
elog_notice_attempts(const struct elog_notice *n)
{
	return n->attempts;
}
