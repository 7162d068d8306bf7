#include "dns/answer.h"

#include "common/util.h"
#include "policy/guard.h"
#include "policy/policy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

/* The policy matches name + port, but a DNS question carries no port. A
 * name resolves when some port is open for it: an allow rule names it on
 * a port no deny rule takes back (policy_match_name), so a name allowed
 * only on, say, 5432 resolves too. See docs/dns.md. */
int
dns_name_verdict(const struct policy *p, const char *name, const char **rule)
{
	struct policy_verdict v;

	policy_match_name(p, name, &v);
	*rule = v.where;
	return v.action;
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls >= lx && dns_name_eq(s + ls - lx, suffix);
}

/* Say why with the reason's own sentence. */
static void
dns_why(struct dns_decision *d, enum verdict_reason why)
{
	d->why = why;
	str_copy(d->detail, verdict_reason_text(why), sizeof(d->detail));
}

void
dns_decide(const struct policy *p, const struct dns_query *q, struct dns_decision *d)
{
	struct verdict_query vq = {.src = VERDICT_SRC_DNS};
	struct verdict_result r;
	const char *why = NULL;

	memset(d, 0, sizeof(*d));
	d->verdict = VERDICT_DENY;
	d->rcode = DNS_RCODE_REFUSED;
	if (q->qname[0] == '\0') {
		str_copy(d->name, ".", sizeof(d->name));
	} else if (policy_name_normalize(q->qname, d->name, sizeof(d->name), &why) != 0) {
		str_copy(d->name, q->qname, sizeof(d->name));
		d->action = DNS_ACT_DENY;
		d->rcode = DNS_RCODE_NXDOMAIN;
		d->why = VR_BAD_NAME;
		str_copy(d->detail, why != NULL ? why : "invalid name", sizeof(d->detail));
		return;
	}
	if (q->qclass != DNS_CLASS_IN) {
		d->action = DNS_ACT_LOCAL;
		d->rcode = DNS_RCODE_NOTIMP;
		dns_why(d, VR_DNS_CLASS);
		return;
	}
	/* Reverse lookups never go upstream: the only addresses the sandbox
	 * may know names for are those it learned from us. */
	if (ends_with(d->name, ".in-addr.arpa") || ends_with(d->name, ".ip6.arpa") ||
	    dns_name_eq(d->name, "in-addr.arpa") || dns_name_eq(d->name, "ip6.arpa")) {
		if (q->qtype == DNS_TYPE_PTR && dns_reverse_parse(d->name, &d->ptr_addr) == 0) {
			d->action = DNS_ACT_PTR;
			d->verdict = VERDICT_ALLOW;
			return;
		}
		d->action = DNS_ACT_DENY;
		d->rcode = DNS_RCODE_NXDOMAIN;
		dns_why(d, VR_DNS_REVERSE);
		return;
	}
	/* The root is no name a rule can allow. */
	vq.name = q->qname[0] == '\0' ? "." : d->name;
	verdict_decide(p, policy_mode(p), &vq, &r);
	d->verdict = r.verdict;
	d->rule = r.rule;
	d->why = r.reason;
	if (r.reason != VR_NONE)
		verdict_message(&r, &vq, d->detail, sizeof(d->detail));
	if (r.verdict == VERDICT_DENY) {
		d->action = DNS_ACT_DENY;
		d->rcode = DNS_RCODE_NXDOMAIN;
		return;
	}
	switch (q->qtype) {
	case DNS_TYPE_A:
	case DNS_TYPE_AAAA:
	case DNS_TYPE_CNAME:
		d->action = DNS_ACT_FORWARD;
		return;
	case DNS_TYPE_ANY:
		/* RFC 8482 lets a server refuse to enumerate; NOTIMP is what
		 * large public resolvers answer. */
		d->action = DNS_ACT_LOCAL;
		d->rcode = DNS_RCODE_NOTIMP;
		dns_why(d, VR_DNS_ANY);
		return;
	default:
		/* HTTPS/SVCB would hand out ECH keys and alternative endpoints,
		 * TXT/MX/SRV/NULL are tunnelling channels and nothing a task
		 * needs: an empty NOERROR makes clients fall back to A/AAAA. */
		d->action = DNS_ACT_LOCAL;
		d->rcode = DNS_RCODE_NOERROR;
		dns_why(d, VR_DNS_QTYPE);
		return;
	}
}

static bool
addr_allowed(const struct policy *p, const struct sockaddr *sa, const char **cls)
{
	enum guard_class c = guard_classify(sa);

	*cls = guard_class_name(c);
	if (c == GUARD_PUBLIC)
		return true;
	/* A guarded address a cidr rule explicitly opens on some port (a
	 * database on 10.0.0.5:5432) may be answered; a catch-all such as
	 * 0.0.0.0/0 opens none (policy_cidr_opens_any). The proxy still
	 * checks the port of every connection. */
	return policy_cidr_opens_any(p, sa);
}

static void
rr_sockaddr(const struct dns_rr *rr, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (rr->type == DNS_TYPE_A) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, rr->addr, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, rr->addr, 16);
	}
}

int
dns_filter(const struct policy *p, const struct dns_query *q, const struct dns_response *r,
           uint32_t ttl_cap, struct dns_filtered *out)
{
	const char *cur = q->qname;
	unsigned rc = DNS_RCODE(r->flags);

	out->n = 0;
	out->n_removed = 0;
	out->why = VR_NONE;
	out->detail = NULL;
	out->min_ttl = ttl_cap;
	out->cname_denied = false;
	out->guarded = false;
	if (!dns_name_eq(r->qname, q->qname) || r->qtype != q->qtype || r->qclass != q->qclass)
		return -1;
	if (rc == DNS_RCODE_NXDOMAIN) {
		out->rcode = DNS_RCODE_NXDOMAIN;
		return 0;
	}
	if (rc != DNS_RCODE_NOERROR) {
		out->rcode = DNS_RCODE_SERVFAIL;
		out->why = VR_DNS_UPSTREAM;
		out->detail = verdict_reason_text(VR_DNS_UPSTREAM);
		return 0;
	}
	out->rcode = DNS_RCODE_NOERROR;
	/* Follow the chain from the question name; records that are not on
	 * it are dropped, so an upstream cannot slip in addresses for other
	 * names (and into the IP -> name cache). A chain may lead to any
	 * name (CDNs), unless a deny rule names a link. */
	for (int hop = 0; hop < DNS_MAX_CHAIN; hop++) {
		const struct dns_rr *next = NULL;

		for (size_t i = 0; i < r->n_an; i++)
			if (r->an[i].type == DNS_TYPE_CNAME && dns_name_eq(r->an[i].name, cur)) {
				next = &r->an[i];
				break;
			}
		if (next == NULL)
			break;
		if (next->target[0] != '\0') {
			const char *rule;
			char norm[DNS_NAME_TEXT_MAX];
			const char *why;

			if (policy_name_normalize(next->target, norm, sizeof(norm), &why) != 0 ||
			    dns_name_verdict(p, norm, &rule) == POLICY_DENY) {
				out->cname_denied = true;
				/* Audit mode allows what the guard permits, and
				 * says what enforce mode would have cut. */
				out->why = VR_CNAME_DENIED;
				if (policy_mode(p) == POLICY_MODE_AUDIT) {
					out->detail = "audit: CNAME to a denied name";
				} else {
					out->n = 0;
					out->detail = verdict_reason_text(VR_CNAME_DENIED);
					return 0;
				}
			}
		}
		out->rr[out->n] = *next;
		if (out->rr[out->n].ttl > ttl_cap)
			out->rr[out->n].ttl = ttl_cap;
		if (out->rr[out->n].ttl < out->min_ttl)
			out->min_ttl = out->rr[out->n].ttl;
		out->n++;
		cur = next->target;
	}
	if (q->qtype == DNS_TYPE_CNAME)
		return 0;
	for (size_t i = 0; i < r->n_an && out->n < DNS_MAX_RR; i++) {
		const struct dns_rr *rr = &r->an[i];
		struct sockaddr_storage ss;
		const char *cls;

		if (rr->type != q->qtype || !dns_name_eq(rr->name, cur))
			continue;
		rr_sockaddr(rr, &ss);
		if (!addr_allowed(p, (struct sockaddr *)&ss, &cls)) {
			char ip[INET6_ADDRSTRLEN];

			inet_ntop(rr->type == DNS_TYPE_A ? AF_INET : AF_INET6, rr->addr, ip,
			          sizeof(ip));
			snprintf(out->removed[out->n_removed], sizeof(out->removed[out->n_removed]),
			         "%s (%s)", ip, cls);
			if (!out->guarded)
				out->first_removed = *rr;
			out->n_removed++;
			out->guarded = true;
			out->why = VR_GUARD;
			out->detail = "address guard removed answers";
			continue;
		}
		out->rr[out->n] = *rr;
		if (out->rr[out->n].ttl > ttl_cap)
			out->rr[out->n].ttl = ttl_cap;
		if (out->rr[out->n].ttl < out->min_ttl)
			out->min_ttl = out->rr[out->n].ttl;
		out->n++;
	}
	return 0;
}

size_t
dns_udp_limit(const struct dns_query *q)
{
	if (!q->has_opt)
		return DNS_UDP_MIN;
	return q->udp_size > DNS_UDP_MAX ? DNS_UDP_MAX : q->udp_size;
}

static size_t
reply_once(const struct dns_query *q, const struct dns_filtered *f, unsigned rcode, int ede,
           const char *ede_text, bool truncated, uint8_t *buf, size_t cap)
{
	struct dns_builder b;
	uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RA | (q->flags & (DNS_FLAG_RD | DNS_FLAG_CD));

	flags |= (uint16_t)(rcode & 0xfu);
	if (truncated)
		flags |= DNS_FLAG_TC;
	dns_build_init(&b, buf, cap, q->id, flags);
	if (dns_build_question(&b, q->qname, q->qtype, q->qclass) != 0)
		return 0;
	for (size_t i = 0; f != NULL && !truncated && i < f->n; i++) {
		const struct dns_rr *rr = &f->rr[i];
		int rc;

		if (rr->type == DNS_TYPE_CNAME || rr->type == DNS_TYPE_PTR)
			rc = dns_build_rr_name(&b, DNS_SEC_AN, rr->name, rr->type, rr->ttl,
			                       rr->target);
		else
			rc = dns_build_rr(&b, DNS_SEC_AN, rr->name, rr->type, rr->ttl, rr->addr,
			                  rr->type == DNS_TYPE_A ? 4 : 16);
		if (rc != 0)
			return 0;
	}
	if (q->has_opt && dns_build_opt(&b, DNS_UDP_MAX, rcode, ede, ede_text) != 0)
		return 0;
	return dns_build_finish(&b);
}

size_t
dns_reply(const struct dns_query *q, const struct dns_filtered *f, unsigned rcode, int ede,
          const char *ede_text, size_t limit, uint8_t *buf, size_t cap)
{
	size_t n;

	if (f != NULL)
		rcode = f->rcode;
	/* An extended rcode cannot be said without OPT. */
	if (rcode > 15 && !q->has_opt)
		rcode = DNS_RCODE_SERVFAIL;
	if (limit > cap)
		limit = cap;
	n = reply_once(q, f, rcode, ede, ede_text, false, buf, cap);
	if (n != 0 && n <= limit)
		return n;
	n = reply_once(q, f, rcode, ede, ede_text, true, buf, cap);
	if (n != 0 && n <= limit)
		return n;
	/* Even the bare reply is too long (a long EDE text): drop the text. */
	n = reply_once(q, NULL, rcode, -1, NULL, true, buf, cap);
	return n <= limit ? n : 0;
}

size_t
dns_upstream_query(const struct dns_query *q, uint16_t id, uint8_t *buf, size_t cap)
{
	struct dns_builder b;

	dns_build_init(&b, buf, cap, id, DNS_FLAG_RD);
	if (dns_build_question(&b, q->qname, q->qtype, q->qclass) != 0 ||
	    dns_build_opt(&b, DNS_UDP_MAX, 0, -1, NULL) != 0)
		return 0;
	return dns_build_finish(&b);
}

int
dns_rr_addr(const struct dns_rr *rr, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (rr->type == DNS_TYPE_A) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, rr->addr, 4);
		return 0;
	}
	if (rr->type == DNS_TYPE_AAAA) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, rr->addr, 16);
		return 0;
	}
	return -1;
}

int
dns_reverse_parse(const char *name, struct sockaddr_storage *sa)
{
	size_t len = strlen(name);

	memset(sa, 0, sizeof(*sa));
	if (ends_with(name, ".in-addr.arpa")) {
		struct sockaddr_in *sin = (struct sockaddr_in *)sa;
		uint8_t a[4];
		const char *p = name;

		/* Exactly four decimal labels, least significant first. */
		for (int i = 3; i >= 0; i--) {
			unsigned v = 0;
			int digits = 0;

			while (*p >= '0' && *p <= '9' && digits < 4) {
				v = v * 10 + (unsigned)(*p++ - '0');
				digits++;
			}
			if (digits == 0 || digits > 3 || v > 255 || *p != '.' ||
			    (digits > 1 && p[-digits] == '0'))
				return -1;
			a[i] = (uint8_t)v;
			p++;
		}
		if (!dns_name_eq(p, "in-addr.arpa"))
			return -1;
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, a, 4);
		return 0;
	}
	if (ends_with(name, ".ip6.arpa") && len == 64 + 8) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)sa;
		uint8_t a[16] = {0};

		/* 32 "n." pairs, least significant nibble first. */
		for (int i = 0; i < 32; i++) {
			int v = hex_value(name[2 * i]);

			if (v < 0 || name[2 * i + 1] != '.')
				return -1;
			a[15 - i / 2] |= (uint8_t)(i % 2 == 0 ? v : v << 4);
		}
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, a, 16);
		return 0;
	}
	return -1;
}
