/* A small, strict, bounded DNS message parser and builder (RFC 1035, RFC
 * 6891 EDNS0, RFC 8914 Extended DNS Errors). Pure: no I/O, no allocation;
 * every read is checked against the message length, compression pointers
 * must point strictly backwards (so they cannot loop) and names are
 * bounded to 255 wire bytes. Used for the sandbox's queries (untrusted)
 * and the upstream's answers (trusted a little more, parsed as strictly). */
#ifndef AIRLOCK_DNS_MSG_H
#define AIRLOCK_DNS_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HEADER_LEN    12
#define DNS_NAME_WIRE_MAX 255 /* RFC 1035 3.1, root label included */
#define DNS_LABEL_MAX     63
/* Presentation form: at most 253 characters plus the NUL. */
#define DNS_NAME_TEXT_MAX 254
/* Largest UDP answer we send without EDNS, and the cap on what we honour
 * from a client's EDNS buffer size (DNS flag day 2020 recommends 1232). */
#define DNS_UDP_MIN 512
#define DNS_UDP_MAX 1232
#define DNS_MSG_MAX 65535
/* Answer records kept from one upstream response; the rest are ignored. */
#define DNS_MAX_RR 128
/* EXTRA-TEXT of an Extended DNS Error is capped to this many bytes. */
#define DNS_EDE_TEXT_MAX 200

enum dns_type {
	DNS_TYPE_A = 1,
	DNS_TYPE_NS = 2,
	DNS_TYPE_CNAME = 5,
	DNS_TYPE_SOA = 6,
	DNS_TYPE_PTR = 12,
	DNS_TYPE_MX = 15,
	DNS_TYPE_TXT = 16,
	DNS_TYPE_AAAA = 28,
	DNS_TYPE_SRV = 33,
	DNS_TYPE_OPT = 41,
	DNS_TYPE_SVCB = 64,
	DNS_TYPE_HTTPS = 65,
	DNS_TYPE_ANY = 255,
};

#define DNS_CLASS_IN 1

enum dns_rcode {
	DNS_RCODE_NOERROR = 0,
	DNS_RCODE_FORMERR = 1,
	DNS_RCODE_SERVFAIL = 2,
	DNS_RCODE_NXDOMAIN = 3,
	DNS_RCODE_NOTIMP = 4,
	DNS_RCODE_REFUSED = 5,
	DNS_RCODE_BADVERS = 16, /* extended: needs an OPT record */
};

/* RFC 8914 info-codes we send. */
#define DNS_EDE_OTHER                  0
#define DNS_EDE_BLOCKED                15
#define DNS_EDE_FILTERED               17
#define DNS_EDE_PROHIBITED             18
#define DNS_EDE_NO_REACHABLE_AUTHORITY 22
#define DNS_OPT_EDE                    15 /* EDNS option code of an Extended DNS Error */

#define DNS_FLAG_QR       0x8000u
#define DNS_FLAG_AA       0x0400u
#define DNS_FLAG_TC       0x0200u
#define DNS_FLAG_RD       0x0100u
#define DNS_FLAG_RA       0x0080u
#define DNS_FLAG_AD       0x0020u
#define DNS_FLAG_CD       0x0010u
#define DNS_OPCODE(flags) (((flags) >> 11) & 0xfu)
#define DNS_RCODE(flags)  ((flags)&0xfu)

/* Why a message was rejected; dns_err_str() names each. */
enum dns_err {
	DNS_OK = 0,
	DNS_ERR_SHORT,    /* shorter than a header, or cut inside a field */
	DNS_ERR_QR,       /* a response where a query was expected or v.v. */
	DNS_ERR_OPCODE,   /* not a standard QUERY (id and flags are set) */
	DNS_ERR_COUNTS,   /* section counts a query may not have */
	DNS_ERR_NAME,     /* bad label type, loop, forward pointer, too long */
	DNS_ERR_CHARS,    /* a name with bytes outside letters, digits, - and _ */
	DNS_ERR_RR,       /* a record whose rdata overruns or is malformed */
	DNS_ERR_OPT,      /* OPT record misplaced, repeated or malformed */
	DNS_ERR_TRAILING, /* bytes after the last section */
	DNS_ERR__COUNT,
};

const char *dns_err_str(enum dns_err e);

/* Read the (possibly compressed) name at *off of msg[0..len) into out in
 * presentation form, without trailing dot ("" for the root), keeping the
 * case. Only letters, digits, '-' and '_' are accepted in labels, so the
 * text form maps back to the same wire bytes. On success *off is just past
 * the name in the uncompressed stream. */
enum dns_err dns_name_read(const uint8_t *msg, size_t len, size_t *off,
                           char out[DNS_NAME_TEXT_MAX]);

/* ASCII case-insensitive name equality. */
bool dns_name_eq(const char *a, const char *b);

/* A query from the sandbox. */
struct dns_query {
	uint16_t id;
	uint16_t flags;
	char qname[DNS_NAME_TEXT_MAX]; /* as sent, case kept */
	uint16_t qtype;
	uint16_t qclass;
	bool has_opt;
	uint8_t edns_version;
	bool edns_do;      /* DNSSEC OK bit */
	uint16_t udp_size; /* the client's EDNS buffer size, or 512 */
};

/* Parse a query strictly: QR clear, QUERY opcode, exactly one question, no
 * answer or authority records, at most one additional record which must
 * be an OPT with the root owner, nothing after it. DNS_ERR_OPCODE leaves
 * q->id and q->flags set so a NOTIMP answer can be sent. */
enum dns_err dns_query_parse(const uint8_t *buf, size_t len, struct dns_query *q);

/* One resource record of an upstream answer section. */
struct dns_rr {
	char name[DNS_NAME_TEXT_MAX];
	uint16_t type;
	uint16_t rclass;
	uint32_t ttl;
	/* A: 4 bytes, AAAA: 16 bytes; CNAME: target (decompressed). */
	uint8_t addr[16];
	char target[DNS_NAME_TEXT_MAX];
};

struct dns_response {
	uint16_t id;
	uint16_t flags;
	char qname[DNS_NAME_TEXT_MAX];
	uint16_t qtype;
	uint16_t qclass;
	size_t n_an; /* records kept in an[] (A, AAAA, CNAME only) */
	struct dns_rr an[DNS_MAX_RR];
};

/* Parse an upstream response: QR set, one question, every section walked
 * and bounds-checked. Only IN-class A, AAAA and CNAME answer records are
 * kept (the first DNS_MAX_RR); everything else is checked and skipped. */
enum dns_err dns_response_parse(const uint8_t *buf, size_t len, struct dns_response *r);

/* Builder over a caller-owned buffer. Any write that does not fit sets
 * overflow, writes nothing, and makes every later call fail too, so a
 * sequence of calls can be checked once at the end. */
struct dns_builder {
	uint8_t *buf;
	size_t cap;
	size_t len;
	bool overflow;
	uint16_t counts[4]; /* qd, an, ns, ar: written by dns_build_finish */
	size_t qname_off;   /* offset of the question name (for compression) */
	char qname[DNS_NAME_TEXT_MAX];
};

enum dns_section { DNS_SEC_QD = 0, DNS_SEC_AN, DNS_SEC_NS, DNS_SEC_AR };

void dns_build_init(struct dns_builder *b, uint8_t *buf, size_t cap, uint16_t id, uint16_t flags);
/* Names are written in presentation form ("" is the root); a name equal to
 * the question's name is compressed to a pointer at it. Return 0 or -1. */
int dns_build_question(struct dns_builder *b, const char *name, uint16_t qtype, uint16_t qclass);
int dns_build_rr(struct dns_builder *b, enum dns_section sec, const char *name, uint16_t type,
                 uint32_t ttl, const void *rdata, uint16_t rdlen);
/* CNAME or PTR: the rdata is a name. */
int dns_build_rr_name(struct dns_builder *b, enum dns_section sec, const char *name, uint16_t type,
                      uint32_t ttl, const char *target);
/* An OPT record in the additional section with our buffer size; rcode is
 * the full (possibly extended) rcode whose upper 8 bits go into the OPT
 * TTL. ede_code < 0 means no Extended DNS Error; ede_text may be NULL and
 * is cut at DNS_EDE_TEXT_MAX bytes. */
int dns_build_opt(struct dns_builder *b, uint16_t udp_size, unsigned rcode, int ede_code,
                  const char *ede_text);
/* Write the section counts into the header. Returns the message length,
 * or 0 after an overflow. */
size_t dns_build_finish(struct dns_builder *b);

const char *dns_type_str(uint16_t type, char *buf, size_t len);
const char *dns_rcode_str(unsigned rcode);

#endif
