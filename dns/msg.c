#include "dns/msg.h"

#include "common/util.h"

#include <stdio.h>
#include <string.h>

/* Bound on compression pointers followed for one name. Pointers must also
 * go strictly backwards, which alone rules out loops; the bound keeps the
 * work per name small even for a long backwards chain. */
#define DNS_MAX_POINTERS 32

static const char *const dns_err_names[DNS_ERR__COUNT] = {
        [DNS_OK] = "ok",
        [DNS_ERR_SHORT] = "message cut short",
        [DNS_ERR_QR] = "wrong QR bit",
        [DNS_ERR_OPCODE] = "opcode is not QUERY",
        [DNS_ERR_COUNTS] = "bad section counts",
        [DNS_ERR_NAME] = "malformed name",
        [DNS_ERR_CHARS] = "name has bytes other than letters, digits, '-' and '_'",
        [DNS_ERR_RR] = "malformed record",
        [DNS_ERR_OPT] = "malformed or misplaced OPT record",
        [DNS_ERR_TRAILING] = "bytes after the last record",
};

const char *
dns_err_str(enum dns_err e)
{
	if ((unsigned)e >= DNS_ERR__COUNT)
		return "unknown error";
	return dns_err_names[e];
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static bool
label_char_ok(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

enum dns_err
dns_name_read(const uint8_t *msg, size_t len, size_t *off, char out[DNS_NAME_TEXT_MAX])
{
	size_t pos = *off;
	size_t end = 0;     /* where the name ends in the uncompressed stream */
	size_t floor = pos; /* a pointer must target below this */
	size_t wire = 0;    /* wire length so far, root byte counted at the end */
	size_t olen = 0;
	unsigned hops = 0;
	bool jumped = false;

	for (;;) {
		uint8_t c;

		if (pos >= len)
			return DNS_ERR_SHORT;
		c = msg[pos];
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (pos + 1 >= len)
				return DNS_ERR_SHORT;
			target = ((size_t)(c & 0x3f) << 8) | msg[pos + 1];
			if (target >= floor || ++hops > DNS_MAX_POINTERS)
				return DNS_ERR_NAME;
			if (!jumped)
				end = pos + 2;
			jumped = true;
			floor = target;
			pos = target;
			continue;
		}
		if ((c & 0xc0) != 0)
			return DNS_ERR_NAME; /* 0x40, 0x80: extended/reserved */
		if (c == 0) {
			if (wire + 1 > DNS_NAME_WIRE_MAX)
				return DNS_ERR_NAME;
			if (!jumped)
				end = pos + 1;
			break;
		}
		if (pos + 1 + c > len)
			return DNS_ERR_SHORT;
		wire += 1 + (size_t)c;
		if (wire + 1 > DNS_NAME_WIRE_MAX)
			return DNS_ERR_NAME;
		/* wire <= 254 keeps the text within 253 characters plus NUL. */
		if (olen > 0)
			out[olen++] = '.';
		for (size_t i = 0; i < c; i++) {
			uint8_t ch = msg[pos + 1 + i];

			if (!label_char_ok(ch))
				return DNS_ERR_CHARS;
			out[olen++] = (char)ch;
		}
		pos += 1 + (size_t)c;
	}
	out[olen] = '\0';
	*off = end;
	return DNS_OK;
}

static char
lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
}

bool
dns_name_eq(const char *a, const char *b)
{
	for (; *a != '\0' && *b != '\0'; a++, b++)
		if (lower(*a) != lower(*b))
			return false;
	return *a == *b;
}

/* An OPT record's rdata: a sequence of (code, length, value) options that
 * must exactly fill it. */
static bool
opt_rdata_ok(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t olen;

		if (n - i < 4)
			return false;
		olen = get16(p + i + 2);
		if (olen > n - i - 4)
			return false;
		i += 4 + olen;
	}
	return true;
}

enum dns_err
dns_query_parse(const uint8_t *buf, size_t len, struct dns_query *q)
{
	size_t off = DNS_HEADER_LEN;
	uint16_t qd, an, ns, ar;
	enum dns_err e;

	memset(q, 0, sizeof(*q));
	if (len < DNS_HEADER_LEN)
		return DNS_ERR_SHORT;
	q->id = get16(buf);
	q->flags = get16(buf + 2);
	q->udp_size = DNS_UDP_MIN;
	if (q->flags & DNS_FLAG_QR)
		return DNS_ERR_QR;
	if (DNS_OPCODE(q->flags) != 0)
		return DNS_ERR_OPCODE;
	qd = get16(buf + 4);
	an = get16(buf + 6);
	ns = get16(buf + 8);
	ar = get16(buf + 10);
	if (qd != 1 || an != 0 || ns != 0 || ar > 1)
		return DNS_ERR_COUNTS;
	if ((e = dns_name_read(buf, len, &off, q->qname)) != DNS_OK)
		return e;
	if (len - off < 4)
		return DNS_ERR_SHORT;
	q->qtype = get16(buf + off);
	q->qclass = get16(buf + off + 2);
	off += 4;
	if (ar == 1) {
		char owner[DNS_NAME_TEXT_MAX];
		uint32_t ttl;
		uint16_t size;
		size_t rdlen;

		if ((e = dns_name_read(buf, len, &off, owner)) != DNS_OK)
			return e == DNS_ERR_SHORT ? e : DNS_ERR_OPT;
		if (len - off < 10)
			return DNS_ERR_SHORT;
		if (owner[0] != '\0' || get16(buf + off) != DNS_TYPE_OPT)
			return DNS_ERR_OPT;
		size = get16(buf + off + 2);
		ttl = get32(buf + off + 4);
		rdlen = get16(buf + off + 8);
		off += 10;
		if (rdlen > len - off)
			return DNS_ERR_SHORT;
		if (!opt_rdata_ok(buf + off, rdlen))
			return DNS_ERR_OPT;
		off += rdlen;
		q->has_opt = true;
		/* RFC 6891 6.2.3: values below 512 are treated as 512. */
		q->udp_size = size < DNS_UDP_MIN ? DNS_UDP_MIN : size;
		q->edns_version = (uint8_t)(ttl >> 16);
		q->edns_do = (ttl & 0x8000u) != 0;
	}
	if (off != len)
		return DNS_ERR_TRAILING;
	return DNS_OK;
}

/* Walk one record at *off: check its bounds and, for the answer section,
 * decode what we keep. keep is NULL to only check. */
static enum dns_err
rr_walk(const uint8_t *buf, size_t len, size_t *off, struct dns_rr *keep, bool *kept)
{
	struct dns_rr tmp;
	struct dns_rr *rr = keep != NULL ? keep : &tmp;
	size_t rdlen, rdoff;
	enum dns_err e;

	*kept = false;
	if ((e = dns_name_read(buf, len, off, rr->name)) != DNS_OK)
		return e;
	if (len - *off < 10)
		return DNS_ERR_SHORT;
	rr->type = get16(buf + *off);
	rr->rclass = get16(buf + *off + 2);
	rr->ttl = get32(buf + *off + 4);
	rdlen = get16(buf + *off + 8);
	*off += 10;
	if (rdlen > len - *off)
		return DNS_ERR_SHORT;
	rdoff = *off;
	*off += rdlen;
	if (keep == NULL || rr->rclass != DNS_CLASS_IN)
		return DNS_OK;
	/* RFC 2181 8: a TTL with the top bit set is treated as zero. */
	if (rr->ttl & 0x80000000u)
		rr->ttl = 0;
	switch (rr->type) {
	case DNS_TYPE_A:
		if (rdlen != 4)
			return DNS_ERR_RR;
		memcpy(rr->addr, buf + rdoff, 4);
		break;
	case DNS_TYPE_AAAA:
		if (rdlen != 16)
			return DNS_ERR_RR;
		memcpy(rr->addr, buf + rdoff, 16);
		break;
	case DNS_TYPE_CNAME: {
		size_t p = rdoff;

		/* The target may point anywhere earlier, but must end
		 * exactly at the end of the rdata. */
		if ((e = dns_name_read(buf, rdoff + rdlen, &p, rr->target)) != DNS_OK)
			return e == DNS_ERR_SHORT ? DNS_ERR_RR : e;
		if (p != rdoff + rdlen)
			return DNS_ERR_RR;
		break;
	}
	default:
		return DNS_OK;
	}
	*kept = true;
	return DNS_OK;
}

enum dns_err
dns_response_parse(const uint8_t *buf, size_t len, struct dns_response *r)
{
	size_t off = DNS_HEADER_LEN;
	uint16_t qd, cnt[3];
	bool seen_opt = false;
	enum dns_err e;

	r->n_an = 0;
	r->qname[0] = '\0';
	if (len < DNS_HEADER_LEN)
		return DNS_ERR_SHORT;
	r->id = get16(buf);
	r->flags = get16(buf + 2);
	if (!(r->flags & DNS_FLAG_QR))
		return DNS_ERR_QR;
	if (DNS_OPCODE(r->flags) != 0)
		return DNS_ERR_OPCODE;
	qd = get16(buf + 4);
	cnt[0] = get16(buf + 6);
	cnt[1] = get16(buf + 8);
	cnt[2] = get16(buf + 10);
	if (qd != 1)
		return DNS_ERR_COUNTS;
	if ((e = dns_name_read(buf, len, &off, r->qname)) != DNS_OK)
		return e;
	if (len - off < 4)
		return DNS_ERR_SHORT;
	r->qtype = get16(buf + off);
	r->qclass = get16(buf + off + 2);
	off += 4;
	for (int s = 0; s < 3; s++) {
		for (unsigned i = 0; i < cnt[s]; i++) {
			struct dns_rr *keep = NULL;
			bool kept;
			size_t start = off;

			if (s == 0 && r->n_an < DNS_MAX_RR)
				keep = &r->an[r->n_an];
			if ((e = rr_walk(buf, len, &off, keep, &kept)) != DNS_OK)
				return e;
			if (kept)
				r->n_an++;
			if (s == 2 && off - start >= 11 && buf[start] == 0 &&
			    get16(buf + start + 1) == DNS_TYPE_OPT) {
				if (seen_opt)
					return DNS_ERR_OPT;
				seen_opt = true;
			}
		}
	}
	if (off != len)
		return DNS_ERR_TRAILING;
	return DNS_OK;
}

/* ---- builder ---- */

static void
put_bytes(struct dns_builder *b, const void *p, size_t n)
{
	if (b->overflow || n > b->cap - b->len) {
		b->overflow = true;
		return;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void
put16(struct dns_builder *b, uint16_t v)
{
	uint8_t t[2] = {(uint8_t)(v >> 8), (uint8_t)v};

	put_bytes(b, t, 2);
}

static void
put32(struct dns_builder *b, uint32_t v)
{
	uint8_t t[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};

	put_bytes(b, t, 4);
}

void
dns_build_init(struct dns_builder *b, uint8_t *buf, size_t cap, uint16_t id, uint16_t flags)
{
	memset(b, 0, sizeof(*b));
	b->buf = buf;
	b->cap = cap;
	put16(b, id);
	put16(b, flags);
	for (int i = 0; i < 4; i++)
		put16(b, 0);
}

/* Presentation -> wire. Labels are validated as the reader would. */
static int
put_name(struct dns_builder *b, const char *name)
{
	uint8_t wire[DNS_NAME_WIRE_MAX];
	size_t w = 0;
	const char *p = name;

	if (b->qname_off != 0 && dns_name_eq(name, b->qname)) {
		put16(b, (uint16_t)(0xc000u | b->qname_off));
		return b->overflow ? -1 : 0;
	}
	while (*p != '\0') {
		const char *dot = strchr(p, '.');
		size_t l = dot != NULL ? (size_t)(dot - p) : strlen(p);

		if (l == 0 || l > DNS_LABEL_MAX || w + 1 + l + 1 > DNS_NAME_WIRE_MAX)
			return -1;
		for (size_t i = 0; i < l; i++)
			if (!label_char_ok((uint8_t)p[i]))
				return -1;
		wire[w++] = (uint8_t)l;
		memcpy(wire + w, p, l);
		w += l;
		p += l;
		if (*p == '.') {
			p++;
			if (*p == '\0')
				return -1; /* names are written without the dot */
		}
	}
	wire[w++] = 0;
	put_bytes(b, wire, w);
	return b->overflow ? -1 : 0;
}

int
dns_build_question(struct dns_builder *b, const char *name, uint16_t qtype, uint16_t qclass)
{
	size_t at = b->len;

	if (b->overflow ||
	    b->counts[DNS_SEC_AN] + b->counts[DNS_SEC_NS] + b->counts[DNS_SEC_AR] != 0)
		return -1;
	if (put_name(b, name) != 0)
		return -1;
	put16(b, qtype);
	put16(b, qclass);
	if (b->overflow)
		return -1;
	if (b->qname_off == 0 && at < 0x4000) {
		b->qname_off = at;
		str_copy(b->qname, name, sizeof(b->qname));
	}
	b->counts[DNS_SEC_QD]++;
	return 0;
}

static int
rr_head(struct dns_builder *b, enum dns_section sec, const char *name, uint16_t type,
        uint16_t rclass, uint32_t ttl)
{
	if (b->overflow)
		return -1;
	for (int s = sec + 1; s <= DNS_SEC_AR; s++)
		if (b->counts[s] != 0)
			return -1; /* sections must be written in order */
	if (put_name(b, name) != 0)
		return -1;
	put16(b, type);
	put16(b, rclass);
	put32(b, ttl);
	return b->overflow ? -1 : 0;
}

int
dns_build_rr(struct dns_builder *b, enum dns_section sec, const char *name, uint16_t type,
             uint32_t ttl, const void *rdata, uint16_t rdlen)
{
	size_t mark = b->len;

	if (sec == DNS_SEC_QD || rr_head(b, sec, name, type, DNS_CLASS_IN, ttl) != 0)
		goto fail;
	put16(b, rdlen);
	put_bytes(b, rdata, rdlen);
	if (b->overflow)
		goto fail;
	b->counts[sec]++;
	return 0;
fail:
	if (!b->overflow)
		b->len = mark;
	return -1;
}

int
dns_build_rr_name(struct dns_builder *b, enum dns_section sec, const char *name, uint16_t type,
                  uint32_t ttl, const char *target)
{
	size_t mark = b->len, rdstart;

	if (sec == DNS_SEC_QD || rr_head(b, sec, name, type, DNS_CLASS_IN, ttl) != 0)
		goto fail;
	put16(b, 0);
	rdstart = b->len;
	if (put_name(b, target) != 0)
		goto fail;
	b->buf[rdstart - 2] = (uint8_t)((b->len - rdstart) >> 8);
	b->buf[rdstart - 1] = (uint8_t)(b->len - rdstart);
	b->counts[sec]++;
	return 0;
fail:
	if (!b->overflow)
		b->len = mark;
	return -1;
}

int
dns_build_opt(struct dns_builder *b, uint16_t udp_size, unsigned rcode, int ede_code,
              const char *ede_text)
{
	size_t tlen = 0, rdlen = 0;

	if (ede_code >= 0) {
		if (ede_text != NULL) {
			tlen = strlen(ede_text);
			if (tlen > DNS_EDE_TEXT_MAX)
				tlen = DNS_EDE_TEXT_MAX;
		}
		rdlen = 4 + 2 + tlen;
	}
	if (b->overflow)
		return -1;
	put_bytes(b, "", 1); /* root owner */
	put16(b, DNS_TYPE_OPT);
	put16(b, udp_size);
	/* TTL: extended rcode (upper 8 bits), version 0, flags 0. */
	put32(b, (uint32_t)((rcode >> 4) & 0xffu) << 24);
	put16(b, (uint16_t)rdlen);
	if (ede_code >= 0) {
		put16(b, DNS_OPT_EDE);
		put16(b, (uint16_t)(2 + tlen));
		put16(b, (uint16_t)ede_code);
		put_bytes(b, ede_text, tlen);
	}
	if (b->overflow)
		return -1;
	b->counts[DNS_SEC_AR]++;
	return 0;
}

size_t
dns_build_finish(struct dns_builder *b)
{
	if (b->overflow || b->len < DNS_HEADER_LEN)
		return 0;
	for (int i = 0; i < 4; i++) {
		b->buf[4 + 2 * i] = (uint8_t)(b->counts[i] >> 8);
		b->buf[5 + 2 * i] = (uint8_t)b->counts[i];
	}
	return b->len;
}

const char *
dns_type_str(uint16_t type, char *buf, size_t len)
{
	static const struct {
		uint16_t t;
		const char *s;
	} names[] = {
	        {DNS_TYPE_A, "A"},     {DNS_TYPE_NS, "NS"},     {DNS_TYPE_CNAME, "CNAME"},
	        {DNS_TYPE_SOA, "SOA"}, {DNS_TYPE_PTR, "PTR"},   {DNS_TYPE_MX, "MX"},
	        {DNS_TYPE_TXT, "TXT"}, {DNS_TYPE_AAAA, "AAAA"}, {DNS_TYPE_SRV, "SRV"},
	        {DNS_TYPE_OPT, "OPT"}, {DNS_TYPE_SVCB, "SVCB"}, {DNS_TYPE_HTTPS, "HTTPS"},
	        {DNS_TYPE_ANY, "ANY"},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].t == type)
			return names[i].s;
	/* RFC 3597 generic form. */
	snprintf(buf, len, "TYPE%u", (unsigned)type);
	return buf;
}

const char *
dns_rcode_str(unsigned rcode)
{
	switch (rcode) {
	case DNS_RCODE_NOERROR:
		return "NOERROR";
	case DNS_RCODE_FORMERR:
		return "FORMERR";
	case DNS_RCODE_SERVFAIL:
		return "SERVFAIL";
	case DNS_RCODE_NXDOMAIN:
		return "NXDOMAIN";
	case DNS_RCODE_NOTIMP:
		return "NOTIMP";
	case DNS_RCODE_REFUSED:
		return "REFUSED";
	case DNS_RCODE_BADVERS:
		return "BADVERS";
	default:
		return "RCODE?";
	}
}
