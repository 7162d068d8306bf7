/* See msg.h. The worker is presumed compromised: each field is checked
 * before anything looks at the next, and nothing is read past len. */
#include "broker/msg.h"

#include <arpa/inet.h>
#include <string.h>

#include "common/util.h"
#include "policy/policy.h"

/* No implicit padding anywhere: every byte of a message is a named field,
 * so "padding is zero" covers the whole encoding. */
_Static_assert(sizeof(struct broker_hdr) == 8, "broker_hdr layout");
_Static_assert(sizeof(struct broker_addr) == 20, "broker_addr layout");
_Static_assert(sizeof(struct broker_req_name) == 8 + 8 + 20 + BROKER_NAME_MAX + BROKER_RULE_MAX,
               "broker_req_name layout");
_Static_assert(sizeof(struct broker_req_addr) == 8 + 8 + 20 + BROKER_RULE_MAX,
               "broker_req_addr layout");
_Static_assert(sizeof(struct broker_req_selftest) == 16, "broker_req_selftest layout");
_Static_assert(sizeof(struct broker_reply) == 8 + 8 + 20 + BROKER_RULE_MAX + BROKER_REASON_MAX,
               "broker_reply layout");
_Static_assert(sizeof(struct broker_req_resolve) == 8 + 8 + 2 * BROKER_NAME_MAX,
               "broker_req_resolve layout");
_Static_assert(sizeof(struct broker_rr) == 8 + 16 + 2 * BROKER_NAME_MAX, "broker_rr layout");
_Static_assert(sizeof(struct broker_dns_reply) == 8 + 12 + BROKER_DNS_WHY_MAX,
               "broker_dns_reply layout");
_Static_assert(sizeof(struct broker_req_resolve) >= sizeof(struct broker_req_name) &&
                       sizeof(struct broker_req_resolve) >= sizeof(struct broker_reply) &&
                       sizeof(struct broker_req_resolve) >= sizeof(struct broker_req_addr),
               "BROKER_MSG_MAX is the largest request");
_Static_assert(BROKER_MSG_MAX < UINT16_MAX, "a length fits the header");
/* A DNS reply's size does not fit 16 bits: its length field holds the
 * head's size, its n the rest (broker_parse_dns_reply checks both). */
_Static_assert(DNS_MAX_RR <= UINT16_MAX && DNS_NAME_TEXT_MAX <= BROKER_NAME_MAX,
               "a record count and a name fit");
_Static_assert(BROKER_DNS_STATUS_MAX < 256 && VR_COUNT < 256, "a DNS reply's bytes");

static bool
all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			return false;
	return true;
}

/* A string field: NUL within size, every byte after it zero. */
static enum broker_parse
check_string(const char *s, size_t size)
{
	const char *nul = memchr(s, '\0', size);

	if (nul == NULL)
		return BROKER_PARSE_STRING;
	if (!all_zero(nul, size - (size_t)(nul - s)))
		return BROKER_PARSE_PAD;
	return BROKER_PARSE_OK;
}

/* An address field. optional: AF_UNSPEC with all zero is "none". */
static enum broker_parse
check_addr(const struct broker_addr *a, bool optional, struct sockaddr_storage *out)
{
	if (a->pad != 0)
		return BROKER_PARSE_PAD;
	if (a->family == AF_UNSPEC)
		return optional && a->port == 0 && all_zero(a->addr, sizeof(a->addr))
		               ? BROKER_PARSE_OK
		               : BROKER_PARSE_ADDR;
	if (a->family == AF_INET && !all_zero(a->addr + 4, sizeof(a->addr) - 4))
		return BROKER_PARSE_PAD;
	if (a->family != AF_INET && a->family != AF_INET6)
		return BROKER_PARSE_ADDR;
	if (a->port == 0)
		return BROKER_PARSE_PORT;
	if (broker_addr_get(a, out) != 0)
		return BROKER_PARSE_ADDR;
	return BROKER_PARSE_OK;
}

/* An IP literal is a CONNECT_ADDR: as a name it would match no host rule
 * anyway, but it must never reach the resolver as one. */
static bool
is_ip_literal(const char *s)
{
	unsigned char b[16];

	return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

static enum broker_parse
parse_name(const struct broker_req_name *m, struct broker_request *out)
{
	enum broker_parse r;
	const char *why;

	out->port = m->port;
	out->flags = m->flags;
	if (m->pad != 0)
		return BROKER_PARSE_PAD;
	if (m->port == 0)
		return BROKER_PARSE_PORT;
	if ((m->flags & ~BROKER_F_ALL) != 0)
		return BROKER_PARSE_FLAGS;
	if ((r = check_addr(&m->orig, !(m->flags & BROKER_F_ORIG), &out->addr)) != BROKER_PARSE_OK)
		return r;
	/* With BROKER_F_ORIG the address is required. */
	if ((m->flags & BROKER_F_ORIG) && m->orig.family == AF_UNSPEC)
		return BROKER_PARSE_ADDR;
	if (!(m->flags & BROKER_F_ORIG) && m->orig.family != AF_UNSPEC)
		return BROKER_PARSE_ADDR;
	if ((m->flags & BROKER_F_ORIG) && m->orig.port != m->port)
		return BROKER_PARSE_PORT;
	if ((r = check_string(m->name, sizeof(m->name))) != BROKER_PARSE_OK ||
	    (r = check_string(m->rule, sizeof(m->rule))) != BROKER_PARSE_OK)
		return r;
	if (policy_name_normalize(m->name, out->name, sizeof(out->name), &why) != 0 ||
	    out->name[0] == '\0' || is_ip_literal(out->name))
		return BROKER_PARSE_NAME;
	memcpy(out->rule, m->rule, sizeof(out->rule));
	return BROKER_PARSE_OK;
}

static enum broker_parse
parse_addr(const struct broker_req_addr *m, struct broker_request *out)
{
	enum broker_parse r;

	out->flags = m->flags;
	if (m->pad != 0 || m->pad2 != 0)
		return BROKER_PARSE_PAD;
	if (m->flags != 0)
		return BROKER_PARSE_FLAGS;
	if ((r = check_addr(&m->dst, false, &out->addr)) != BROKER_PARSE_OK)
		return r;
	if ((r = check_string(m->rule, sizeof(m->rule))) != BROKER_PARSE_OK)
		return r;
	out->port = m->dst.port;
	memcpy(out->rule, m->rule, sizeof(out->rule));
	return BROKER_PARSE_OK;
}

/* A name as dns_name_read writes it: labels of letters, digits, '-' and
 * '_', 1 to 63 bytes each, joined by dots; none empty, shorter than
 * DNS_NAME_TEXT_MAX. */
static bool
dns_text_name(const char *s)
{
	size_t label = 0, i;

	for (i = 0; s[i] != '\0'; i++) {
		char ch = s[i];

		if (ch == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '-' || ch == '_') ||
		    ++label > 63)
			return false;
	}
	return i > 0 && i < DNS_NAME_TEXT_MAX && label > 0;
}

static enum broker_parse
parse_resolve(const struct broker_req_resolve *m, struct broker_request *out)
{
	enum broker_parse r;
	const char *why;

	out->qtype = m->qtype;
	out->qclass = m->qclass;
	if (m->pad != 0)
		return BROKER_PARSE_PAD;
	if ((r = check_string(m->qname, sizeof(m->qname))) != BROKER_PARSE_OK ||
	    (r = check_string(m->name, sizeof(m->name))) != BROKER_PARSE_OK)
		return r;
	/* The question is the one dns_query_parse would have let through;
	 * the normalised name is the broker's own, and the worker's must be
	 * the same (it is the cache key of what the broker records). */
	if (!dns_text_name(m->qname) ||
	    policy_name_normalize(m->qname, out->name, sizeof(out->name), &why) != 0 ||
	    strcmp(out->name, m->name) != 0)
		return BROKER_PARSE_NAME;
	memcpy(out->qname, m->qname, sizeof(out->qname));
	return BROKER_PARSE_OK;
}

static enum broker_parse
parse_mint(const struct broker_req_mint *m, struct broker_request *out)
{
	enum broker_parse r;
	const char *why;

	out->port = m->port;
	if (m->pad != 0 || m->pad2 != 0)
		return BROKER_PARSE_PAD;
	if (m->port == 0)
		return BROKER_PARSE_PORT;
	if ((r = check_string(m->name, sizeof(m->name))) != BROKER_PARSE_OK)
		return r;
	/* A leaf is for a DNS name, never a wildcard or an address. */
	if (policy_name_normalize(m->name, out->name, sizeof(out->name), &why) != 0 ||
	    out->name[0] == '\0' || is_ip_literal(out->name) || strchr(out->name, '*') != NULL)
		return BROKER_PARSE_NAME;
	return BROKER_PARSE_OK;
}

static size_t
request_size(uint16_t type, bool selftest)
{
	switch (type) {
	case BROKER_MSG_CONNECT_NAME:
		return sizeof(struct broker_req_name);
	case BROKER_MSG_CONNECT_ADDR:
		return sizeof(struct broker_req_addr);
	case BROKER_MSG_RESOLVE:
		return sizeof(struct broker_req_resolve);
	case BROKER_MSG_MINT:
		return sizeof(struct broker_req_mint);
	case BROKER_MSG_SELFTEST:
		return selftest ? sizeof(struct broker_req_selftest) : 0;
	default:
		return 0; /* a reply, or unknown: the worker never sends it */
	}
}

enum broker_parse
broker_parse_request(const void *buf, size_t len, bool selftest, struct broker_request *out)
{
	/* Aligned copies: buf is any byte buffer. */
	union {
		struct broker_hdr h;
		struct broker_req_name name;
		struct broker_req_addr addr;
		struct broker_req_selftest st;
		struct broker_req_resolve rs;
		struct broker_req_mint mint;
	} m;
	size_t want;

	memset(out, 0, sizeof(*out));
	if (len < sizeof(struct broker_hdr))
		return BROKER_PARSE_SHORT;
	memcpy(&m.h, buf, sizeof(m.h));
	out->id = m.h.id;
	out->type = (enum broker_msg_type)m.h.type;
	if (m.h.len != len)
		return BROKER_PARSE_LEN;
	if ((want = request_size(m.h.type, selftest)) == 0)
		return BROKER_PARSE_TYPE;
	if (len != want)
		return BROKER_PARSE_SIZE;
	if (m.h.id == 0)
		return BROKER_PARSE_ID;
	memcpy(&m, buf, len);
	switch (m.h.type) {
	case BROKER_MSG_CONNECT_NAME:
		return parse_name(&m.name, out);
	case BROKER_MSG_CONNECT_ADDR:
		return parse_addr(&m.addr, out);
	case BROKER_MSG_RESOLVE:
		return parse_resolve(&m.rs, out);
	case BROKER_MSG_MINT:
		return parse_mint(&m.mint, out);
	default: /* BROKER_MSG_SELFTEST, selftest true */
		out->op = m.st.op;
		if (m.st.pad != 0)
			return BROKER_PARSE_PAD;
		if (m.st.op < BROKER_SELFTEST_OPEN || m.st.op > BROKER_SELFTEST_MAX)
			return BROKER_PARSE_OP;
		return BROKER_PARSE_OK;
	}
}

enum broker_status
broker_parse_status(enum broker_parse p)
{
	switch (p) {
	case BROKER_PARSE_OK:
		return BROKER_OK;
	case BROKER_PARSE_NAME:
		return BROKER_E_BAD_NAME;
	default:
		return BROKER_E_MALFORMED;
	}
}

int
broker_parse_reply(const void *buf, size_t len, struct broker_reply *out)
{
	if (len != sizeof(*out))
		return -1;
	memcpy(out, buf, sizeof(*out));
	if (out->h.type != BROKER_MSG_REPLY || out->h.len != len || out->h.id == 0 ||
	    out->status > BROKER_STATUS_MAX || out->verdict > BROKER_V_AUDIT_DENY ||
	    out->audit > BROKER_STATUS_MAX ||
	    (out->audit != BROKER_OK) != (out->verdict == BROKER_V_AUDIT_DENY) ||
	    out->pad != 0 || out->addr.pad != 0 ||
	    (out->addr.family != AF_UNSPEC && out->addr.family != AF_INET &&
	     out->addr.family != AF_INET6) ||
	    check_string(out->rule, sizeof(out->rule)) != BROKER_PARSE_OK ||
	    check_string(out->reason, sizeof(out->reason)) != BROKER_PARSE_OK)
		return -1;
	return 0;
}

int
broker_parse_leaf(const void *buf, size_t len, struct broker_leaf *out)
{
	if (len != sizeof(*out))
		return -1;
	memcpy(out, buf, sizeof(*out));
	if (out->h.type != BROKER_MSG_LEAF || out->h.len != len || out->h.id == 0 ||
	    out->len == 0 || out->len > BROKER_LEAF_DER_MAX || out->pad != 0 || out->pad2 != 0 ||
	    !all_zero(out->der + out->len, sizeof(out->der) - out->len))
		return -1;
	return 0;
}

int
broker_build_mint(struct broker_req_mint *m, uint32_t id, const char *name, uint16_t port)
{
	size_t n = strlen(name);

	memset(m, 0, sizeof(*m));
	if (n >= sizeof(m->name) || port == 0)
		return -1;
	m->h.type = BROKER_MSG_MINT;
	m->h.len = sizeof(*m);
	m->h.id = id;
	m->port = port;
	memcpy(m->name, name, n);
	return 0;
}

int
broker_build_leaf(struct broker_leaf *m, uint32_t id, const unsigned char *der, size_t len)
{
	memset(m, 0, sizeof(*m));
	if (len == 0 || len > sizeof(m->der))
		return -1;
	m->h.type = BROKER_MSG_LEAF;
	m->h.len = sizeof(*m);
	m->h.id = id;
	m->len = (uint16_t)len;
	memcpy(m->der, der, len);
	return 0;
}

/* One record as dns_filter keeps it (dns/answer.h): IN class, A with
 * four bytes, AAAA, or CNAME with a target; names complete. */
static bool
check_rr(const struct broker_rr *rr, struct dns_rr *out)
{
	if (rr->rclass != DNS_CLASS_IN ||
	    check_string(rr->name, sizeof(rr->name)) != BROKER_PARSE_OK ||
	    check_string(rr->target, sizeof(rr->target)) != BROKER_PARSE_OK ||
	    !dns_text_name(rr->name))
		return false;
	switch (rr->type) {
	case DNS_TYPE_A:
		if (!all_zero(rr->addr + 4, sizeof(rr->addr) - 4) || rr->target[0] != '\0')
			return false;
		break;
	case DNS_TYPE_AAAA:
		if (rr->target[0] != '\0')
			return false;
		break;
	case DNS_TYPE_CNAME:
		if (!all_zero(rr->addr, sizeof(rr->addr)) || !dns_text_name(rr->target))
			return false;
		break;
	default:
		return false;
	}
	memset(out, 0, sizeof(*out));
	out->type = rr->type;
	out->rclass = rr->rclass;
	out->ttl = rr->ttl;
	memcpy(out->addr, rr->addr, sizeof(out->addr));
	memcpy(out->name, rr->name, DNS_NAME_TEXT_MAX);
	memcpy(out->target, rr->target, DNS_NAME_TEXT_MAX);
	return true;
}

int
broker_parse_dns_reply(const void *buf, size_t len, struct broker_dns_result *out)
{
	const unsigned char *b = buf;
	struct broker_dns_reply h;
	struct broker_rr rr;

	memset(out, 0, offsetof(struct broker_dns_result, f.rr));
	out->f.n_removed = 0;
	if (len < sizeof(h))
		return -1;
	memcpy(&h, buf, sizeof(h));
	if (h.h.type != BROKER_MSG_DNS_REPLY || h.h.len != sizeof(h) || h.h.id == 0 ||
	    h.status > BROKER_DNS_STATUS_MAX || h.rcode > 15 || (h.flags & ~BROKER_DNS_F_ALL) != 0 ||
	    h.why >= VR_COUNT || h.pad != 0 || h.pad2 != 0 || h.n > DNS_MAX_RR ||
	    len != sizeof(h) + (size_t)h.n * sizeof(rr) ||
	    check_string(h.text, sizeof(h.text)) != BROKER_PARSE_OK)
		return -1;
	/* Only an answer has records, an rcode and what filtering said. */
	if (h.status != BROKER_DNS_ANSWER &&
	    (h.n != 0 || h.rcode != 0 ||
	     (h.flags & (BROKER_DNS_F_CNAME_DENIED | BROKER_DNS_F_GUARDED)) != 0))
		return -1;
	for (size_t i = 0; i < h.n; i++) {
		memcpy(&rr, b + sizeof(h) + i * sizeof(rr), sizeof(rr));
		if (!check_rr(&rr, &out->f.rr[i]))
			return -1;
	}
	out->id = h.h.id;
	out->status = (enum broker_dns_status)h.status;
	out->flags = h.flags;
	memcpy(out->why, h.text, sizeof(out->why));
	out->f.rcode = h.rcode;
	out->f.n = h.n;
	out->f.why = (enum verdict_reason)h.why;
	out->f.detail = h.why != VR_NONE ? verdict_reason_text(out->f.why) : NULL;
	out->f.cname_denied = (h.flags & BROKER_DNS_F_CNAME_DENIED) != 0;
	out->f.guarded = (h.flags & BROKER_DNS_F_GUARDED) != 0;
	return 0;
}

void
broker_addr_set(struct broker_addr *a, const struct sockaddr *sa, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	if (sa == NULL)
		return;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		a->family = AF_INET;
		memcpy(a->addr, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			a->family = AF_INET;
			memcpy(a->addr, &in6->sin6_addr.s6_addr[12], 4);
		} else {
			a->family = AF_INET6;
			memcpy(a->addr, &in6->sin6_addr, 16);
		}
	} else {
		return;
	}
	a->port = port;
}

int
broker_addr_get(const struct broker_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(a->port);
		memcpy(&in->sin_addr, a->addr, 4);
		return 0;
	}
	if (a->family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(a->port);
		memcpy(&in6->sin6_addr, a->addr, 16);
		return 0;
	}
	return -1;
}

/* Copy s into a fixed field, cut to fit; the rest stays zero. */
static void
set_field(char *field, size_t size, const char *s)
{
	if (s != NULL)
		(void)str_copy(field, s, size);
}

int
broker_build_name(struct broker_req_name *m, uint32_t id, const char *name, uint16_t port,
                  unsigned flags, const struct sockaddr *orig, const char *rule)
{
	memset(m, 0, sizeof(*m));
	m->h.type = BROKER_MSG_CONNECT_NAME;
	m->h.len = sizeof(*m);
	m->h.id = id;
	m->port = port;
	m->flags = (uint16_t)flags;
	if (orig != NULL) {
		broker_addr_set(&m->orig, orig, port);
		m->flags |= BROKER_F_ORIG;
	}
	if (strlen(name) >= sizeof(m->name))
		return -1;
	set_field(m->name, sizeof(m->name), name);
	set_field(m->rule, sizeof(m->rule), rule);
	return 0;
}

int
broker_build_resolve(struct broker_req_resolve *m, uint32_t id, const char *qname, uint16_t qtype,
                     uint16_t qclass, const char *name)
{
	memset(m, 0, sizeof(*m));
	m->h.type = BROKER_MSG_RESOLVE;
	m->h.len = sizeof(*m);
	m->h.id = id;
	m->qtype = qtype;
	m->qclass = qclass;
	if (strlen(qname) >= sizeof(m->qname) || strlen(name) >= sizeof(m->name))
		return -1;
	set_field(m->qname, sizeof(m->qname), qname);
	set_field(m->name, sizeof(m->name), name);
	return 0;
}

size_t
broker_build_dns_reply(struct broker_dns_reply *m, uint32_t id, enum broker_dns_status status,
                       enum verdict_reason reason, unsigned flags, const struct dns_filtered *f,
                       const char *why)
{
	size_t n = f != NULL && f->n < DNS_MAX_RR ? f->n : f != NULL ? DNS_MAX_RR : 0;

	memset(m, 0, sizeof(*m) + n * sizeof(m->rr[0]));
	m->h.type = BROKER_MSG_DNS_REPLY;
	m->h.len = sizeof(*m);
	m->h.id = id;
	m->status = (uint8_t)status;
	m->why = (uint8_t)(reason < VR_COUNT ? reason : VR_NONE);
	m->flags = (uint8_t)(flags & BROKER_DNS_F_ALL);
	set_field(m->text, sizeof(m->text), why);
	if (f == NULL)
		return sizeof(*m);
	m->rcode = (uint8_t)(f->rcode & 0xf);
	if (f->cname_denied)
		m->flags |= BROKER_DNS_F_CNAME_DENIED;
	if (f->guarded)
		m->flags |= BROKER_DNS_F_GUARDED;
	m->n = (uint16_t)n;
	for (size_t i = 0; i < n; i++) {
		struct broker_rr *rr = &m->rr[i];

		rr->type = f->rr[i].type;
		rr->rclass = f->rr[i].rclass;
		rr->ttl = f->rr[i].ttl;
		if (rr->type == DNS_TYPE_A)
			memcpy(rr->addr, f->rr[i].addr, 4);
		else if (rr->type == DNS_TYPE_AAAA)
			memcpy(rr->addr, f->rr[i].addr, 16);
		set_field(rr->name, sizeof(rr->name), f->rr[i].name);
		if (rr->type == DNS_TYPE_CNAME)
			set_field(rr->target, sizeof(rr->target), f->rr[i].target);
	}
	return sizeof(*m) + n * sizeof(m->rr[0]);
}

int
broker_build_addr(struct broker_req_addr *m, uint32_t id, const struct sockaddr *dst, uint16_t port,
                  const char *rule)
{
	memset(m, 0, sizeof(*m));
	m->h.type = BROKER_MSG_CONNECT_ADDR;
	m->h.len = sizeof(*m);
	m->h.id = id;
	broker_addr_set(&m->dst, dst, port);
	if (m->dst.family == AF_UNSPEC)
		return -1;
	set_field(m->rule, sizeof(m->rule), rule);
	return 0;
}

void
broker_build_reply(struct broker_reply *r, uint32_t id, enum broker_status status,
                   enum broker_verdict verdict, int err, const struct sockaddr *addr,
                   const char *rule, const char *reason)
{
	uint16_t port = 0;

	memset(r, 0, sizeof(*r));
	r->h.type = BROKER_MSG_REPLY;
	r->h.len = sizeof(*r);
	r->h.id = id;
	r->status = (uint8_t)status;
	r->verdict = (uint8_t)verdict;
	r->err = err;
	if (addr != NULL && addr->sa_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)addr)->sin_port);
	else if (addr != NULL && addr->sa_family == AF_INET6)
		port = ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
	broker_addr_set(&r->addr, addr, port);
	set_field(r->rule, sizeof(r->rule), rule);
	set_field(r->reason, sizeof(r->reason), reason);
}

const char *
broker_status_name(enum broker_status s)
{
	static const char *const names[] = {
	        [BROKER_OK] = "ok",
	        [BROKER_E_MALFORMED] = "malformed",
	        [BROKER_E_BUSY] = "busy",
	        [BROKER_E_DUP_ID] = "duplicate-id",
	        [BROKER_E_BAD_NAME] = "bad-name",
	        [BROKER_E_DENIED] = "denied",
	        [BROKER_E_NO_RULE] = "no-rule",
	        [BROKER_E_ECH] = "ech",
	        [BROKER_E_DNS] = "dns-error",
	        [BROKER_E_DNS_TIMEOUT] = "dns-timeout",
	        [BROKER_E_NOT_ORIG] = "not-original-destination",
	        [BROKER_E_GUARD] = "address-guard",
	        [BROKER_E_DENY_CIDR] = "deny-cidr",
	        [BROKER_E_REFUSED] = "connection-refused",
	        [BROKER_E_UNREACHABLE] = "unreachable",
	        [BROKER_E_TIMEOUT] = "connection-timeout",
	        [BROKER_E_RESOURCE] = "resource",
	        [BROKER_E_GONE] = "broker-gone",
	        [BROKER_E_CNAME] = "cname-denied",
	        [BROKER_E_NOT_INSPECTED] = "not-inspected",
	        [BROKER_E_MINT_LIMIT] = "mint-limit",
	};

	return (unsigned)s < ARRAY_SIZE(names) && names[s] != NULL ? names[s] : "?";
}

const char *
broker_parse_name(enum broker_parse p)
{
	static const char *const names[] = {
	        [BROKER_PARSE_OK] = "ok",
	        [BROKER_PARSE_SHORT] = "shorter than a header",
	        [BROKER_PARSE_LEN] = "length field and size differ",
	        [BROKER_PARSE_TYPE] = "unknown type",
	        [BROKER_PARSE_SIZE] = "wrong size for its type",
	        [BROKER_PARSE_ID] = "id 0",
	        [BROKER_PARSE_PAD] = "nonzero padding",
	        [BROKER_PARSE_PORT] = "bad port",
	        [BROKER_PARSE_FLAGS] = "unknown flags",
	        [BROKER_PARSE_ADDR] = "bad address",
	        [BROKER_PARSE_STRING] = "unterminated string",
	        [BROKER_PARSE_NAME] = "bad name",
	        [BROKER_PARSE_OP] = "unknown self-test op",
	        [BROKER_PARSE_FDS] = "descriptors attached",
	};

	return (unsigned)p < ARRAY_SIZE(names) && names[p] != NULL ? names[p] : "?";
}
