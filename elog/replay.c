/* `airlock log replay -p POLICY`: what-if. Every logged event is decided
 * again under a candidate policy, the same way the supervisor decides
 * (verdict_decide, then on the dialled address the deny cidr rules and
 * the address guard), and every destination whose outcome would change is
 * listed with its counts. The old rule or reason is shown as logged: a
 * log from before the reason tokens (policy/verdict.h) says "no match"
 * where a new one says "no-rule", and both read the same. */
#include "elog/review.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/buf.h"
#include "elog/record.h"
#include "elog/strmap.h"
#include "policy/guard.h"
#include "policy/policy.h"
#include "policy/verdict.h"

struct change {
	char *dest;
	bool now_allowed; /* direction: denied before -> allowed now */
	uint64_t events;
	char *was; /* old rule or reason (first seen) */
	char *now; /* new rule or reason */
};

/* True when the address guard refuses ss on port under p, as the proxy's
 * addr_check (proxy/upstream.c) does after the deny cidr rules: a
 * guarded class that no cidr rule explicitly opens (policy_cidr_allows).
 * The host's own addresses are not known here; those are judged as the
 * public addresses they are. */
static bool
guarded(const struct policy *p, const struct sockaddr_storage *ss, uint16_t port)
{
	const struct sockaddr *sa = (const struct sockaddr *)ss;

	return guard_classify(sa) != GUARD_PUBLIC && !policy_cidr_allows(p, sa, port);
}

/* Decide one event under p, with the proxy's and the DNS listener's one
 * decision (verdict_decide) and then, as the proxy does after resolving,
 * the deny cidr rules and the address guard on the dialled address.
 * Returns true when it would be allowed; *why gets the deciding rule or
 * the reason's token (static or borrowed from p). */
static bool
decide(const struct policy *p, const struct elog_record *r, const char **why)
{
	struct sockaddr_storage ss, dial;
	struct verdict_query q = {.port = r->port >= 0 ? (uint16_t)r->port : 0};
	struct verdict_result v;
	bool dns = strcmp(r->kind, "dns") == 0, by_name = false;
	bool has_dial = !dns && r->ip != NULL && elog_parse_addr(r->ip, &dial);
	char name[256];

	if (r->host != NULL && !elog_parse_addr(r->host, &ss)) {
		const char *bad;

		if (policy_name_normalize(r->host, name, sizeof(name), &bad) < 0) {
			*why = verdict_reason_token(VR_BAD_NAME);
			return false;
		}
		by_name = true;
		if (dns || r->port < 0) {
			/* A DNS query has no port: the resolver answers a name
			 * some port of which is allowed. */
			q.src = VERDICT_SRC_DNS;
			q.name = name;
		} else if (strcmp(r->kind, "tcp") == 0 && has_dial) {
			/* A name-less connection the DNS answers named. */
			q.src = VERDICT_SRC_LEARNED;
			q.addr = (struct sockaddr *)&dial;
			q.learned = name;
		} else {
			q.src = VERDICT_SRC_CONNECT;
			q.name = name;
		}
	} else {
		const char *a = r->host != NULL ? r->host : r->ip;

		if (a == NULL || !elog_parse_addr(a, &ss)) {
			*why = "no destination";
			return false;
		}
		q.src = VERDICT_SRC_NONE;
		q.addr = (struct sockaddr *)&ss;
		dial = ss;
		has_dial = true;
	}
	verdict_decide(p, POLICY_MODE_ENFORCE, &q, &v);
	if (v.verdict == VERDICT_ALLOW && has_dial) {
		struct policy_verdict av;

		/* As the proxy: a deny cidr rule refuses the address an
		 * allowed name resolved to; the guard refuses a guarded one
		 * (address literals too: a catch-all cidr opens none). */
		if (by_name && q.src != VERDICT_SRC_LEARNED) {
			policy_match_addr(p, (struct sockaddr *)&dial, q.port, &av);
			if (av.action == POLICY_DENY) {
				*why = av.where != NULL ? av.where
				                        : verdict_reason_token(VR_RULE_DENY);
				return false;
			}
		}
		if (guarded(p, &dial, q.port)) {
			*why = verdict_reason_token(VR_GUARD);
			return false;
		}
	}
	if (v.verdict == VERDICT_ALLOW) {
		*why = v.rule != NULL ? v.rule : "allow";
		return true;
	}
	*why = v.rule != NULL ? v.rule : verdict_reason_token(v.reason);
	return false;
}

static void
dest_key(const struct elog_record *r, struct elog_buf *b)
{
	const char *name = r->host != NULL ? r->host : r->ip;
	char norm[256];
	const char *why;

	/* One line per name however the sandbox spelled it (case, final dot). */
	if (r->host != NULL && policy_name_normalize(r->host, norm, sizeof(norm), &why) == 0)
		name = norm;
	bool v6 = r->host == NULL && r->ip != NULL && strchr(r->ip, ':') != NULL;

	if (name == NULL)
		name = "-";
	if (v6 && r->port >= 0)
		elog_buf_putc(b, '[');
	elog_buf_safe_text(b, name, 255);
	if (v6 && r->port >= 0)
		elog_buf_putc(b, ']');
	if (r->port >= 0 && strcmp(r->kind, "dns") != 0) {
		elog_buf_putc(b, ':');
		elog_buf_i64(b, r->port);
	}
	if (strcmp(r->kind, "dns") == 0)
		elog_buf_puts(b, " (dns)");
	else if (strcmp(r->kind, "packet") == 0 && r->proto != NULL) {
		elog_buf_putc(b, '/');
		elog_buf_safe_text(b, r->proto, 16);
	}
}

static void
change_free(struct change *c)
{
	free(c->dest);
	free(c->was);
	free(c->now);
	free(c);
}

static int
change_cmp(const void *a, const void *b)
{
	const struct change *x = *(struct change *const *)a;
	const struct change *y = *(struct change *const *)b;

	if (x->now_allowed != y->now_allowed)
		return x->now_allowed ? 1 : -1;
	if (x->events != y->events)
		return x->events > y->events ? -1 : 1;
	return strcmp(x->dest, y->dest);
}

static void
safe_copy(char *out, size_t outlen, const char *s)
{
	struct elog_buf b;

	elog_buf_init(&b, out, outlen - 1);
	elog_buf_safe_text(&b, s, 255);
	out[b.len] = '\0';
}

/* What one replay has counted so far. */
struct replay {
	const struct policy *p;
	struct elog_strmap *changes; /* "+dest" or "-dest" -> struct change */
	uint64_t events, same, n_to_deny, n_to_allow;
	bool oom;
};

/* elog_read_files callback: judge one event again under the new policy;
 * stop reading once out of memory. */
static int
replay_each(const struct elog_record *r, void *arg)
{
	struct replay *rp = arg;
	const char *why;
	bool was, now;
	char kstore[600];
	struct elog_buf kb;
	struct change *c;
	uint64_t n;

	if (r->type != ELOG_REC_EVENT || r->verdict == NULL)
		return 0;
	n = elog_record_events(r);
	rp->events += n;
	was = strcmp(r->verdict, "allow") == 0;
	now = decide(rp->p, r, &why);
	if (was == now) {
		rp->same += n;
		return 0;
	}
	elog_buf_init(&kb, kstore, sizeof(kstore) - 8);
	elog_buf_puts(&kb, now ? "+" : "-");
	dest_key(r, &kb);
	kb.data[kb.len] = '\0';
	c = elog_strmap_get(rp->changes, kb.data);
	if (c == NULL) {
		char was_s[300], now_s[300];
		const char *old = r->rule != NULL     ? r->rule
		                  : r->reason != NULL ? r->reason
		                                      : r->verdict;

		safe_copy(was_s, sizeof(was_s), old);
		safe_copy(now_s, sizeof(now_s), why);
		c = calloc(1, sizeof(*c));
		if (c == NULL || (c->dest = strdup(kb.data + 1)) == NULL ||
		    (c->was = strdup(was_s)) == NULL || (c->now = strdup(now_s)) == NULL ||
		    elog_strmap_put(rp->changes, kb.data, c) < 0) {
			if (c != NULL)
				change_free(c);
			rp->oom = true;
			return -1;
		}
		c->now_allowed = now;
	}
	c->events += n;
	if (now)
		rp->n_to_allow += n;
	else
		rp->n_to_deny += n;
	return 0;
}

int
review_replay(const char *policy_path, char *const *files, int n_files, FILE *out)
{
	struct policy_diag diag = {0};
	struct policy *p = policy_load(policy_path, &diag);
	struct replay rp = {.p = p};
	struct change **list = NULL;
	int rc = 0;

	if (p == NULL) {
		for (size_t i = 0; i < diag.n_lines; i++)
			log_warnx("%s", diag.lines[i]);
		if (diag.n_lines == 0)
			log_warnx("cannot load policy %s", policy_path);
		policy_diag_clear(&diag);
		return -1;
	}
	policy_diag_clear(&diag);
	rp.changes = elog_strmap_new();
	if (rp.changes == NULL) {
		rp.oom = true;
		goto out;
	}
	rc = elog_read_files(files, n_files, replay_each, &rp);
	if (rp.oom || rc < 0)
		goto out;
	size_t n = elog_strmap_count(rp.changes);
	list = calloc(n + 1, sizeof(*list));
	if (list == NULL) {
		rp.oom = true;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		list[i] = elog_strmap_value(rp.changes, i);
	qsort(list, n, sizeof(*list), change_cmp);
	for (size_t i = 0; i < n; i++) {
		const struct change *c = list[i];

		if (i == 0 || c->now_allowed != list[i - 1]->now_allowed)
			fprintf(out, "%s%s\n", i > 0 ? "\n" : "",
			        c->now_allowed ? "denied before, allowed now:"
			                       : "allowed before, denied now:");
		fprintf(out, "  %-40s %6" PRIu64 " event%s  was: %s  now: %s\n", c->dest, c->events,
		        c->events == 1 ? " " : "s", c->was, c->now);
	}
	if (n > 0)
		fputc('\n', out);
	fprintf(out,
	        "%" PRIu64 " events replayed under %s: %" PRIu64 " unchanged, %" PRIu64
	        " would now be denied, %" PRIu64 " would now be allowed\n",
	        rp.events, policy_name(p), rp.same, rp.n_to_deny, rp.n_to_allow);
	rc = n > 0 ? 1 : 0;
out:
	if (rp.oom) {
		log_warnx("log replay: out of memory");
		rc = -1;
	}
	free(list);
	for (size_t i = 0; rp.changes != NULL && i < elog_strmap_count(rp.changes); i++)
		change_free(elog_strmap_value(rp.changes, i));
	elog_strmap_free(rp.changes);
	policy_free(p);
	return rc;
}
