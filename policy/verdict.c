/* The one decision and the one table of reasons (verdict.h). */
#include "policy/verdict.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

struct reason_row {
	const char *token, *error, *text;
	int status;
	unsigned flags;
};

#define VERDICT_REASON_ROW(e, tok, err, st, fl, txt)                                               \
	[VR_##e] = {.token = tok, .error = err, .text = txt, .status = st, .flags = fl},
static const struct reason_row reasons[VR_COUNT] = {VERDICT_REASONS(VERDICT_REASON_ROW)};
#undef VERDICT_REASON_ROW

static const struct reason_row *
row(enum verdict_reason r)
{
	return (unsigned)r < VR_COUNT ? &reasons[r] : &reasons[VR_NONE];
}

const char *
verdict_str(enum verdict v)
{
	switch (v) {
	case VERDICT_ALLOW:
		return "allow";
	case VERDICT_AUDIT_DENY:
		return "audit-deny";
	case VERDICT_DENY:
		break;
	}
	return "deny";
}

const char *
verdict_reason_token(enum verdict_reason r)
{
	return row(r)->token;
}

const char *
verdict_reason_error(enum verdict_reason r)
{
	return row(r)->error;
}

int
verdict_reason_status(enum verdict_reason r)
{
	return row(r)->status;
}

unsigned
verdict_reason_flags(enum verdict_reason r)
{
	return row(r)->flags;
}

const char *
verdict_reason_text(enum verdict_reason r)
{
	return row(r)->text;
}

enum verdict_reason
verdict_reason_parse(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return VR_COUNT;
	for (unsigned i = 1; i < VR_COUNT; i++)
		if (strcmp(reasons[i].token, s) == 0)
			return (enum verdict_reason)i;
	return VR_COUNT;
}

/* ---- the decision ---- */

/* An address literal as 16 bytes, IPv4 as its IPv4-mapped IPv6 form. */
static bool
addr_bytes(const char *text, uint8_t out[16])
{
	struct in_addr v4;

	if (inet_pton(AF_INET6, text, out) == 1)
		return true;
	if (inet_pton(AF_INET, text, &v4) != 1)
		return false;
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, &v4, 4);
	return true;
}

bool
verdict_same_name(const char *a, const char *b)
{
	uint8_t x[16], y[16];
	size_t la = strlen(a), lb = strlen(b);

	if (addr_bytes(a, x) && addr_bytes(b, y))
		return memcmp(x, y, 16) == 0;
	if (la > 1 && a[la - 1] == '.')
		la--;
	if (lb > 1 && b[lb - 1] == '.')
		lb--;
	return la == lb && strncasecmp(a, b, la) == 0;
}

/* The rules on a name (or an IP literal, which only cidr rules match). */
static void
match_name(const struct policy *p, const struct verdict_query *q, const char *name, bool ip_literal,
           struct policy_verdict *v)
{
	if (q->src == VERDICT_SRC_DNS) {
		policy_match_name(p, name, v);
	} else if (ip_literal) {
		struct sockaddr_storage ss;
		uint8_t b[16];

		memset(&ss, 0, sizeof(ss));
		if (!addr_bytes(name, b)) {
			v->action = POLICY_NO_MATCH;
			v->where = NULL;
			v->why = NULL;
			return;
		}
		if (memcmp(b, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
			struct sockaddr_in *s = (struct sockaddr_in *)&ss;

			s->sin_family = AF_INET;
			memcpy(&s->sin_addr, b + 12, 4);
		} else {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

			s->sin6_family = AF_INET6;
			memcpy(&s->sin6_addr, b, 16);
		}
		policy_match_addr(p, (const struct sockaddr *)&ss, q->port, v);
	} else {
		policy_match_host(p, name, q->port, v);
	}
}

static void
from_action(const struct policy_verdict *v, struct verdict_result *out)
{
	out->rule = v->where;
	out->rule_why = v->action == POLICY_DENY ? v->why : NULL;
	out->verdict = v->action == POLICY_ALLOW ? VERDICT_ALLOW : VERDICT_DENY;
	out->reason = v->action == POLICY_ALLOW  ? VR_NONE
	              : v->action == POLICY_DENY ? VR_RULE_DENY
	                                         : VR_NO_RULE;
}

void
verdict_decide(const struct policy *p, enum policy_mode mode, const struct verdict_query *q,
               struct verdict_result *out)
{
	struct policy_verdict v = {POLICY_NO_MATCH, NULL, NULL};
	const char *name = q->name != NULL && q->name[0] != '\0' ? q->name : NULL;

	memset(out, 0, sizeof(*out));
	if (q->src == VERDICT_SRC_NONE || q->src == VERDICT_SRC_LEARNED) {
		/* The address first: only one no cidr rule speaks of may
		 * borrow a name from DNS. */
		if (q->addr != NULL)
			policy_match_addr(p, q->addr, q->port, &v);
		if (v.action == POLICY_NO_MATCH && q->src == VERDICT_SRC_LEARNED &&
		    q->learned != NULL && q->learned[0] != '\0') {
			policy_match_host(p, q->learned, q->port, &v);
			out->by_learned = true;
			name = q->learned;
		}
		from_action(&v, out);
		/* A cidr rule let it through without a name: a name the bytes
		 * present later is decided as if it had come first. */
		if (out->verdict == VERDICT_ALLOW && !out->by_learned && q->claim != NULL &&
		    q->claim[0] != '\0') {
			uint8_t b[16];

			if (addr_bytes(q->claim, b))
				goto done; /* an address: the cidr rule's decision stands */
			policy_match_host(p, q->claim, q->port, &v);
			from_action(&v, out);
			out->by_claim = true;
			goto done;
		}
	} else if (name == NULL) {
		out->verdict = VERDICT_DENY;
		out->reason = VR_BAD_NAME;
		return;
	} else {
		match_name(p, q, name, q->ip_literal, &v);
		from_action(&v, out);
	}
	if (out->verdict == VERDICT_ALLOW && q->ech && q->src != VERDICT_SRC_DNS) {
		/* The SNI is only the outer name: the rule must say that the
		 * hidden one may be anything this server serves. */
		const char *ech_rule = name == NULL || q->ip_literal || out->by_learned ||
		                                       q->src == VERDICT_SRC_NONE
		                               ? NULL
		                               : policy_match_ech(p, name, q->port);

		if (ech_rule != NULL) {
			out->rule = ech_rule;
		} else {
			out->verdict = VERDICT_DENY;
			out->reason = VR_ECH;
		}
	}
	if (out->verdict == VERDICT_ALLOW && name != NULL && q->claim != NULL &&
	    !verdict_same_name(q->claim, name)) {
		out->verdict = VERDICT_DENY;
		out->reason = VR_NAME_CHANGED;
		out->rule = NULL;
	}
done:
	if (out->verdict == VERDICT_DENY && mode == POLICY_MODE_AUDIT)
		out->verdict = VERDICT_AUDIT_DENY;
}

/* ---- the sentence ---- */

char *
verdict_message(const struct verdict_result *r, const struct verdict_query *q, char *out,
                size_t outlen)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	const char *name = r->by_learned ? q->learned : q->name;

	if (q->addr != NULL && q->addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)q->addr)->sin_addr, ip,
		          sizeof(ip));
	else if (q->addr != NULL && q->addr->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)q->addr)->sin6_addr, ip,
		          sizeof(ip));
	if (r->by_claim)
		name = q->claim;
	if (name == NULL || name[0] == '\0')
		name = NULL;
	switch (r->reason) {
	case VR_RULE_DENY:
		/* The policy's own words, when the rule has them, go wherever
		 * this sentence goes: the log, stderr, the 403, Proxy-Status,
		 * the DNS extended error. */
		if (q->src == VERDICT_SRC_DNS)
			snprintf(out, outlen, "%s: denied by rule %s%s%s", name != NULL ? name : "?",
			         r->rule != NULL ? r->rule : "?", r->rule_why != NULL ? ": " : "",
			         r->rule_why != NULL ? r->rule_why : "");
		else
			snprintf(out, outlen, "%s%s port %u: denied by rule %s%s%s",
			         name != NULL ? "" : "address ", name != NULL ? name : ip,
			         (unsigned)q->port, r->rule != NULL ? r->rule : "?",
			         r->rule_why != NULL ? ": " : "", r->rule_why != NULL ? r->rule_why : "");
		break;
	case VR_NO_RULE:
		if (q->src == VERDICT_SRC_DNS)
			snprintf(out, outlen, "no rule allows %s on any port",
			         name != NULL ? name : "?");
		else if (name != NULL)
			snprintf(out, outlen, "no rule allows %s%s port %u%s",
			         q->ip_literal ? "address " : "", name, (unsigned)q->port,
			         r->by_learned ? " (the name DNS gave its address)" : "");
		else
			snprintf(out, outlen,
			         "no rule allows address %s port %u (no name; not learned from DNS "
			         "for an allowed name)",
			         ip, (unsigned)q->port);
		break;
	case VR_ECH:
		snprintf(
		        out, outlen,
		        "ClientHello has encrypted_client_hello: the name served may not be %s; no "
		        "rule for it has `ech: allow`",
		        name != NULL ? name : "the one it names");
		break;
	case VR_NAME_CHANGED:
		snprintf(out, outlen, "decided for %s, then the bytes name %s",
		         name != NULL ? name : ip, q->claim != NULL ? q->claim : "?");
		break;
	default:
		snprintf(out, outlen, "%s", verdict_reason_text(r->reason));
		break;
	}
	return out;
}
