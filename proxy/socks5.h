/* SOCKS5 (RFC 1928, with RFC 1929's user name and password) as the proxy
 * reads it from a client: the method greeting, the optional
 * sub-negotiation, and one CONNECT request, each parsed from however many
 * bytes have arrived. Pure and bounded: every function reads at most len
 * bytes and allocates nothing (fuzzed: tests/fuzz/fuzz_socks5.c).
 *
 * A request names its destination as SOCKS does: an IPv4 or IPv6 address,
 * or a domain name (socks5h://, which ssh and database clients use) that
 * the proxy decides exactly as it decides an HTTP CONNECT's host. BIND and
 * UDP ASSOCIATE are parsed only to be refused with "command not
 * supported". */
#ifndef AIRLOCK_PROXY_SOCKS5_H
#define AIRLOCK_PROXY_SOCKS5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SOCKS5_VERSION 5

/* Methods (RFC 1928 3) */
#define SOCKS5_M_NONE     0x00
#define SOCKS5_M_USERPASS 0x02
#define SOCKS5_M_REFUSED  0xff /* no acceptable method */

/* Commands (RFC 1928 4) */
enum socks5_cmd {
	SOCKS5_CMD_CONNECT = 1,
	SOCKS5_CMD_BIND = 2,
	SOCKS5_CMD_UDP_ASSOCIATE = 3,
};

/* Reply codes (RFC 1928 6) */
enum socks5_rep {
	SOCKS5_REP_OK = 0,
	SOCKS5_REP_FAILURE = 1,
	SOCKS5_REP_NOT_ALLOWED = 2, /* connection not allowed by ruleset */
	SOCKS5_REP_NET_UNREACHABLE = 3,
	SOCKS5_REP_HOST_UNREACHABLE = 4,
	SOCKS5_REP_REFUSED = 5,
	SOCKS5_REP_TTL_EXPIRED = 6,
	SOCKS5_REP_CMD_UNSUPPORTED = 7,
	SOCKS5_REP_ATYP_UNSUPPORTED = 8,
};

enum socks5_result {
	SOCKS5_MORE = 0, /* not all there yet: read more, then call again */
	SOCKS5_DONE,     /* parsed: *used bytes are its */
	SOCKS5_BAD,      /* not SOCKS5, or broken: close (after the reply given) */
};

/* The greeting "VER NMETHODS METHODS...". */
struct socks5_greeting {
	bool none;     /* offers "no authentication" */
	bool userpass; /* offers RFC 1929 */
};
enum socks5_result socks5_greeting_parse(const uint8_t *buf, size_t len,
                                         struct socks5_greeting *out, size_t *used);

/* RFC 1929: "VER(1) ULEN UNAME PLEN PASSWD". The name is for the log
 * (NUL-terminated; a NUL inside it is SOCKS5_BAD); the password is not
 * kept. */
struct socks5_userpass {
	char user[256];
};
enum socks5_result socks5_userpass_parse(const uint8_t *buf, size_t len,
                                         struct socks5_userpass *out, size_t *used);

/* The request "VER CMD RSV ATYP DST.ADDR DST.PORT". */
struct socks5_request {
	enum socks5_cmd cmd;  /* any of the three; the caller refuses 2 and 3 */
	bool is_name;         /* ATYP 3: name holds the destination */
	char name[256];       /* NUL-terminated, as sent (1-255 bytes, no NUL) */
	struct sockaddr_storage addr; /* ATYP 1 and 4; port set */
	uint16_t port;        /* host order */
};
/* SOCKS5_BAD with *rep the reply owed before closing (ATYP or command
 * unsupported, or a general failure for a broken request). */
enum socks5_result socks5_request_parse(const uint8_t *buf, size_t len,
                                        struct socks5_request *out, size_t *used,
                                        enum socks5_rep *rep);

/* The reply "VER REP RSV ATYP BND.ADDR BND.PORT" into buf (at least 22
 * bytes); bound may be NULL (0.0.0.0:0, as a refusal carries). Returns
 * its length. */
size_t socks5_reply(enum socks5_rep rep, const struct sockaddr *bound, uint8_t *buf,
                    size_t cap);

/* The largest reply socks5_reply writes. */
#define SOCKS5_REPLY_MAX 22

#endif
