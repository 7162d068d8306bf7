/* The broker's messages (DESIGN.md, "Confinement"): fixed-layout structs,
 * one per SOCK_SEQPACKET datagram, in the manner of relayd's imsg. A
 * request asks the broker to connect one upstream socket, or to resolve
 * one DNS question for the sandbox's listener; the reply carries the
 * outcome and, when connected, the socket (SCM_RIGHTS), or the filtered
 * answer.
 *
 * Both ends run on the same host from the same binary: fields are in host
 * byte order, ports included. Every byte of a message is defined: padding
 * and the bytes after a string's NUL are zero, so one request has exactly
 * one encoding and the parser can refuse anything else.
 *
 * The parsers are pure and bounded (fuzzed: tests/fuzz/fuzz_broker.c). */
#ifndef AIRLOCK_BROKER_MSG_H
#define AIRLOCK_BROKER_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "dns/answer.h"
#include "policy/verdict.h"

enum broker_msg_type {
	BROKER_MSG_CONNECT_NAME = 1, /* worker -> broker: a name and a port */
	BROKER_MSG_CONNECT_ADDR = 2, /* worker -> broker: an address and a port */
	BROKER_MSG_REPLY = 3,        /* broker -> worker */
	BROKER_MSG_RESOLVE = 4,      /* worker -> broker: a DNS question */
	BROKER_MSG_DNS_REPLY = 5,    /* broker -> worker: its answer */
	BROKER_MSG_MINT = 6,         /* worker -> broker: a leaf certificate for a name */
	BROKER_MSG_LEAF = 7,         /* broker -> worker: the leaf, when minted */
	BROKER_MSG_SELFTEST = 0x7e,  /* test builds only (BROKER_SELFTEST) */
};

/* The longest name, as policy_name_normalize writes it (253 characters of
 * a DNS name in text form, NUL included, with room to spare). */
#define BROKER_NAME_MAX 256
/* "file:line" of a rule, NUL included; a longer one is cut. */
#define BROKER_RULE_MAX 128
/* A refusal's reason for the log, NUL included: room for the proxy's
 * sentences about a long name (a reply is then as large as a request). */
#define BROKER_REASON_MAX 256

struct broker_hdr {
	uint16_t type; /* enum broker_msg_type */
	uint16_t len;  /* the whole message's size: exactly its type's */
	uint32_t id;   /* the request's id, nonzero, echoed in its reply */
};

/* An address and port. family AF_INET (the first 4 bytes of addr) or
 * AF_INET6; AF_UNSPEC with every other byte zero where an address is
 * optional. */
struct broker_addr {
	uint8_t family;
	uint8_t pad;
	uint16_t port;
	uint8_t addr[16];
};

/* Flags of a request. */
#define BROKER_F_ORIG                                                                              \
	0x1u              /* transparent: orig is the original destination,                        \
	                   * and the name must resolve to it */
#define BROKER_F_ECH 0x2u /* the ClientHello has encrypted_client_hello */
#define BROKER_F_ALL (BROKER_F_ORIG | BROKER_F_ECH)

/* "Connect NAME:PORT", the worker having matched rule (its claim: the
 * broker decides again and reports its own). A name learned from DNS for
 * a transparent connection without one comes this way too, with the
 * original destination. */
struct broker_req_name {
	struct broker_hdr h;
	uint16_t port;  /* nonzero */
	uint16_t flags; /* BROKER_F_* */
	uint32_t pad;
	struct broker_addr orig;    /* with BROKER_F_ORIG, else zero */
	char name[BROKER_NAME_MAX]; /* NUL-terminated */
	char rule[BROKER_RULE_MAX]; /* NUL-terminated, may be empty */
};

/* "Connect ADDR:PORT": an IP literal, or a transparent connection without
 * a name (dst is the original destination). Only a cidr rule allows it. */
struct broker_req_addr {
	struct broker_hdr h;
	uint16_t flags; /* none defined: zero */
	uint16_t pad;
	uint32_t pad2;
	struct broker_addr dst; /* port nonzero */
	char rule[BROKER_RULE_MAX];
};

/* "Resolve this question" for the sandbox's DNS listener: the query's
 * name as asked (its case kept: the upstream's answer must echo it), its
 * type and class, and the name normalised (the cache key; the broker
 * normalises qname itself and refuses a name that differs). The broker
 * decides again (dns_decide on its policy): a name it refuses is never
 * asked upstream. */
struct broker_req_resolve {
	struct broker_hdr h;
	uint16_t qtype;
	uint16_t qclass;
	uint32_t pad;
	char qname[BROKER_NAME_MAX]; /* NUL-terminated, shorter than DNS_NAME_TEXT_MAX */
	char name[BROKER_NAME_MAX];  /* NUL-terminated */
};

/* "A leaf certificate for NAME", for an inspected connection to NAME:PORT
 * (DESIGN.md, "TLS inspection and L7 rules"). The broker decides again:
 * it mints only for a name and port that an inspecting allow rule of its
 * policy matches, and counts every leaf it signs against the task's
 * limit (tls/ca.h). The answer is a LEAF, or a REPLY with the refusal
 * (BROKER_E_NOT_INSPECTED, _MINT_LIMIT, _BAD_NAME, _RESOURCE, _BUSY). */
struct broker_req_mint {
	struct broker_hdr h;
	uint16_t port; /* nonzero */
	uint16_t pad;
	uint32_t pad2;
	char name[BROKER_NAME_MAX]; /* NUL-terminated */
};

/* A leaf's DER, at most: a P-256 leaf with a 253-byte name as its
 * subjectAltName is well under a kilobyte. */
#define BROKER_LEAF_DER_MAX 2048

/* The minted leaf: len bytes of DER, the rest zero. Its key is the
 * task's leaf key, which the worker was given at start; the CA's key
 * never leaves the broker. */
struct broker_leaf {
	struct broker_hdr h;
	uint16_t len; /* 1 .. BROKER_LEAF_DER_MAX */
	uint16_t pad;
	uint32_t pad2;
	unsigned char der[BROKER_LEAF_DER_MAX];
};

/* Test builds: make the confined broker try something it must not be
 * able to do and report the errno (tests/broker/). */
enum broker_selftest_op {
	BROKER_SELFTEST_OPEN = 1, /* openat("/etc/passwd") */
	BROKER_SELFTEST_EXECVE,   /* execve("/bin/true") */
	BROKER_SELFTEST_UNIX,     /* socket(AF_UNIX) */
	BROKER_SELFTEST_BIND,     /* bind a TCP socket */
	BROKER_SELFTEST_LANDLOCK, /* err = the Landlock ABI applied */
	BROKER_SELFTEST_X32,      /* getpid through the x32 ABI: killed */
	BROKER_SELFTEST_I386,     /* getpid through int 0x80: killed */
	BROKER_SELFTEST_RAW,      /* socket(AF_INET, SOCK_RAW) */
	BROKER_SELFTEST_MAX = BROKER_SELFTEST_RAW,
};

struct broker_req_selftest {
	struct broker_hdr h;
	uint32_t op; /* enum broker_selftest_op */
	uint32_t pad;
};

/* The outcome of a request: one value per reason, turned into text in one
 * place (broker_status_name). */
enum broker_status {
	BROKER_OK = 0,        /* connected: the socket is attached */
	BROKER_E_MALFORMED,   /* the request broke the format */
	BROKER_E_BUSY,        /* too many requests in flight */
	BROKER_E_DUP_ID,      /* the id is already in flight */
	BROKER_E_BAD_NAME,    /* not a name policy_name_normalize accepts */
	BROKER_E_DENIED,      /* a deny rule matched (rule says which) */
	BROKER_E_NO_RULE,     /* no rule allows it */
	BROKER_E_ECH,         /* ECH, and no rule has `ech: allow` */
	BROKER_E_DNS,         /* does not resolve */
	BROKER_E_DNS_TIMEOUT, /* resolution timed out */
	BROKER_E_NOT_ORIG,    /* the name does not resolve to orig */
	BROKER_E_GUARD,       /* the address guard refused every address */
	BROKER_E_DENY_CIDR,   /* a deny cidr rule refused the address */
	BROKER_E_REFUSED,     /* the destination refused the connection */
	BROKER_E_UNREACHABLE, /* connecting failed otherwise (err says how) */
	BROKER_E_TIMEOUT,     /* connecting timed out */
	BROKER_E_RESOURCE,    /* out of descriptors or memory in the broker */
	BROKER_E_GONE,        /* client side only: the broker went away */
	BROKER_E_CNAME,       /* the name's CNAME chain runs through a denied name */
	BROKER_E_NOT_INSPECTED, /* MINT: no inspecting rule matches the name and port */
	BROKER_E_MINT_LIMIT,    /* MINT: the task's leaf limit is spent */
	BROKER_STATUS_MAX = BROKER_E_MINT_LIMIT,
};

/* Which verdict the broker's own decision gave. */
enum broker_verdict {
	BROKER_V_DENY = 0,
	BROKER_V_ALLOW,
	BROKER_V_AUDIT_DENY, /* audit mode: let through what enforce refuses */
};

struct broker_reply {
	struct broker_hdr h;
	uint8_t status;  /* enum broker_status */
	uint8_t verdict; /* enum broker_verdict */
	/* With BROKER_V_AUDIT_DENY: the refusal enforce mode would have
	 * given (BROKER_E_DENIED, _NO_RULE, _ECH, _NOT_ORIG, _DENY_CIDR,
	 * _CNAME); else BROKER_OK. */
	uint8_t audit;
	uint8_t pad;
	int32_t err;                    /* an errno for E_UNREACHABLE / E_RESOURCE, else 0 */
	struct broker_addr addr;        /* connected to, or the refused address */
	char rule[BROKER_RULE_MAX];     /* the deciding rule, may be empty */
	char reason[BROKER_REASON_MAX]; /* for the log, empty when OK */
};

/* The outcome of a RESOLVE. */
enum broker_dns_status {
	BROKER_DNS_ANSWER = 0, /* rr[0..n) is the answer (rcode NOERROR or NXDOMAIN) */
	BROKER_DNS_TIMEOUT,    /* no upstream answered in time */
	BROKER_DNS_FAIL,       /* SERVFAIL, an unusable answer or a local failure */
	BROKER_DNS_REFUSED,    /* the broker's policy does not forward this question */
	BROKER_DNS_STATUS_MAX = BROKER_DNS_REFUSED,
};

/* Flags of a DNS reply: what dns_filtered and the resolver said of it. */
#define BROKER_DNS_F_CACHED       0x1u /* from the broker's answer cache */
#define BROKER_DNS_F_HOSTS        0x2u /* from the hosts file */
#define BROKER_DNS_F_CNAME_DENIED 0x4u /* the chain ran through a denied name */
#define BROKER_DNS_F_GUARDED      0x8u /* the address guard removed an address */
#define BROKER_DNS_F_ALL          0xfu

/* "Why", with the removed addresses (the resolver's text), NUL included. */
#define BROKER_DNS_WHY_MAX 512

/* One record of a filtered answer: what dns_filter lets through (IN
 * class A, AAAA or CNAME), names in text form. */
struct broker_rr {
	uint16_t type;   /* DNS_TYPE_A, _AAAA or _CNAME */
	uint16_t rclass; /* DNS_CLASS_IN */
	uint32_t ttl;
	uint8_t addr[16];            /* A: the first 4 bytes; CNAME: zero */
	char name[BROKER_NAME_MAX];   /* NUL-terminated, shorter than DNS_NAME_TEXT_MAX */
	char target[BROKER_NAME_MAX]; /* CNAME: as name; else empty */
};

/* The answer to a RESOLVE: a fixed head and exactly n records, so the
 * message is sizeof(head) + n * sizeof(struct broker_rr) bytes, n <=
 * DNS_MAX_RR (the whole may not fit 16 bits: h.len is the head's size). Fixed-size fields rather than DNS wire bytes: the worker
 * checks every field against what dns_filter can produce (types, class,
 * terminated strings with zero tails) with no parser of compressed names
 * in between, and a reply has one encoding. */
struct broker_dns_reply {
	struct broker_hdr h;
	uint8_t status; /* enum broker_dns_status */
	uint8_t rcode;  /* BROKER_DNS_ANSWER: DNS_RCODE_NOERROR or _NXDOMAIN; else 0 */
	uint8_t flags;  /* BROKER_DNS_F_* */
	uint8_t why;    /* enum verdict_reason: why records were withheld or it failed */
	uint16_t n;     /* records that follow */
	uint16_t pad;
	uint32_t pad2;
	char text[BROKER_DNS_WHY_MAX]; /* the resolver's words, may be empty */
	struct broker_rr rr[];
};

/* The largest request: a receive buffer one byte larger tells a longer
 * datagram (MSG_TRUNC) from one that fits. */
#define BROKER_MSG_MAX sizeof(struct broker_req_resolve)
/* The largest message the worker receives, likewise. */
#define BROKER_DNS_REPLY_MAX (sizeof(struct broker_dns_reply) + DNS_MAX_RR * sizeof(struct broker_rr))
/* Room the socket's buffers are given (SO_SNDBUF, SO_RCVBUF; the kernel
 * refuses a datagram larger than the sender's): two largest replies. */
#define BROKER_SOCK_BUF (2 * BROKER_DNS_REPLY_MAX + 4096)

/* --- parsing (pure) ------------------------------------------------------ */

/* A request, checked and normalised. */
struct broker_request {
	enum broker_msg_type type;
	uint32_t id;
	uint16_t port;
	unsigned flags;
	struct sockaddr_storage addr; /* CONNECT_ADDR: dst; CONNECT_NAME: orig
	                               * when BROKER_F_ORIG (port set) */
	char name[BROKER_NAME_MAX];   /* CONNECT_NAME: normalised */
	char rule[BROKER_RULE_MAX];   /* the worker's claim */
	uint32_t op;                  /* SELFTEST */
	/* RESOLVE: the question as asked (name holds it normalised) */
	char qname[BROKER_NAME_MAX];
	uint16_t qtype, qclass;
};

/* Why a request was refused by the parser. */
enum broker_parse {
	BROKER_PARSE_OK = 0,
	BROKER_PARSE_SHORT,  /* shorter than a header: no id to answer */
	BROKER_PARSE_LEN,    /* header length and datagram size differ */
	BROKER_PARSE_TYPE,   /* unknown type, or one the worker never sends */
	BROKER_PARSE_SIZE,   /* not its type's exact size */
	BROKER_PARSE_ID,     /* id 0 */
	BROKER_PARSE_PAD,    /* nonzero padding or bytes after a NUL */
	BROKER_PARSE_PORT,   /* port 0 */
	BROKER_PARSE_FLAGS,  /* unknown flags */
	BROKER_PARSE_ADDR,   /* bad family, or an address where none goes */
	BROKER_PARSE_STRING, /* a string without its NUL */
	BROKER_PARSE_NAME,   /* policy_name_normalize refused it, or an IP
	                      * literal given as a name */
	BROKER_PARSE_OP,     /* unknown self-test op */
	BROKER_PARSE_FDS,    /* descriptors came with it (set by the
	                      * caller, which sees the control data) */
};

/* Check one datagram from the worker (len bytes of buf) and fill *out.
 * Bounded by len; reads nothing past it. With selftest false a
 * BROKER_MSG_SELFTEST is BROKER_PARSE_TYPE. On failure other than
 * BROKER_PARSE_SHORT out->id holds the header's id (possibly 0) so the
 * caller can answer it. */
enum broker_parse broker_parse_request(const void *buf, size_t len, bool selftest,
                                       struct broker_request *out);

/* The reply status a parse failure gets. */
enum broker_status broker_parse_status(enum broker_parse p);

/* Check a reply (len bytes of buf), for the worker. 0 with *out a copy,
 * or -1 when it breaks the format (bad size, type, status, verdict,
 * padding, or a string without its NUL). */
int broker_parse_reply(const void *buf, size_t len, struct broker_reply *out);

/* A DNS reply, checked for the worker and turned into what the resolver
 * would have said. */
struct broker_dns_result {
	uint32_t id;
	enum broker_dns_status status;
	unsigned flags;                /* BROKER_DNS_F_* */
	char why[BROKER_DNS_WHY_MAX];  /* may be empty */
	/* ANSWER: rcode, n, rr, why (enum), detail (its static sentence),
	 * cname_denied and guarded; the rest zero (the removed addresses
	 * are in why). Else why (enum) alone. */
	struct dns_filtered f;
};

/* Check a LEAF (len bytes of buf), for the worker: 0 with *out a copy,
 * or -1 when it breaks the format (size, type, id 0, len 0 or over
 * BROKER_LEAF_DER_MAX, padding, bytes after the DER). The DER itself is
 * the TLS library's to parse. */
int broker_parse_leaf(const void *buf, size_t len, struct broker_leaf *out);

/* Check a DNS reply (len bytes of buf), for the worker: 0 with *out
 * filled, or -1 when it breaks the format (size other than its n's,
 * type, status, rcode, flags, a reason out of range, padding, a record
 * dns_filter could not have kept, a string without its NUL or with bytes
 * after it, records with a status other than ANSWER). */
int broker_parse_dns_reply(const void *buf, size_t len, struct broker_dns_result *out);

/* --- building ------------------------------------------------------------ */

/* Fill a request (zeroed first). 0, or -1 when name or rule do not fit
 * (name must be shorter than BROKER_NAME_MAX; a rule too long is cut).
 * orig may be NULL (no BROKER_F_ORIG). */
int broker_build_name(struct broker_req_name *m, uint32_t id, const char *name, uint16_t port,
                      unsigned flags, const struct sockaddr *orig, const char *rule);
int broker_build_addr(struct broker_req_addr *m, uint32_t id, const struct sockaddr *dst,
                      uint16_t port, const char *rule);

/* Fill a RESOLVE (zeroed first). 0, or -1 when qname or name do not fit. */
int broker_build_resolve(struct broker_req_resolve *m, uint32_t id, const char *qname,
                         uint16_t qtype, uint16_t qclass, const char *name);

/* Fill a MINT (zeroed first). 0, or -1 when name does not fit or port
 * is 0. */
int broker_build_mint(struct broker_req_mint *m, uint32_t id, const char *name, uint16_t port);
/* Fill a LEAF (zeroed first). 0, or -1 when len is 0 or over
 * BROKER_LEAF_DER_MAX. */
int broker_build_leaf(struct broker_leaf *m, uint32_t id, const unsigned char *der, size_t len);

/* Fill a DNS reply into m, which has room for DNS_MAX_RR records (zeroed
 * first), and return its size. f: the answer with status ANSWER, else
 * NULL; why may be NULL. */
size_t broker_build_dns_reply(struct broker_dns_reply *m, uint32_t id,
                              enum broker_dns_status status, enum verdict_reason reason,
                              unsigned flags, const struct dns_filtered *f, const char *why);

/* Fill a reply (zeroed first); addr, rule and reason may be NULL; rule
 * and reason are cut to fit. */
void broker_build_reply(struct broker_reply *r, uint32_t id, enum broker_status status,
                        enum broker_verdict verdict, int err, const struct sockaddr *addr,
                        const char *rule, const char *reason);

/* struct broker_addr <-> sockaddr. broker_addr_set zeroes a first and
 * takes AF_INET/AF_INET6 (a v4-mapped IPv6 address as the IPv4 it is);
 * other families leave it AF_UNSPEC. broker_addr_get returns 0, or -1
 * for a family other than AF_INET/AF_INET6. */
void broker_addr_set(struct broker_addr *a, const struct sockaddr *sa, uint16_t port);
int broker_addr_get(const struct broker_addr *a, struct sockaddr_storage *ss);

/* Short stable names: "ok", "malformed", "busy", ... */
const char *broker_status_name(enum broker_status s);
const char *broker_parse_name(enum broker_parse p);

#endif
