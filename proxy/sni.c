/* TLS ClientHello server_name reader (RFC 8446 4.1.2, RFC 6066 3). */
#include "proxy/sni.h"

#include <string.h>

#define TLS_RECORD_HANDSHAKE 0x16
#define TLS_HS_CLIENT_HELLO  0x01
#define TLS_EXT_SERVER_NAME  0x0000
#define TLS_SNI_HOST_NAME    0x00
#define TLS_EXT_ECH          0xfe0d /* encrypted_client_hello, RFC 9849 */
#define TLS_EXT_ESNI         0xffce /* encrypted_server_name, draft-ietf-tls-esni-02 */
/* Plaintext records carry at most 2^14 bytes (RFC 8446 5.1). */
#define TLS_MAX_RECORD 16384

/* fatal(2), access_denied(49), in a TLS 1.2-versioned alert record. */
const uint8_t sni_alert_access_denied[7] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31};

/* A read cursor that never goes past its end: every take fails instead. */
struct cursor {
	const uint8_t *p;
	size_t left;
};

static int
take_u8(struct cursor *c, unsigned *v)
{
	if (c->left < 1)
		return -1;
	*v = c->p[0];
	c->p++;
	c->left--;
	return 0;
}

static int
take_u16(struct cursor *c, unsigned *v)
{
	if (c->left < 2)
		return -1;
	*v = (unsigned)c->p[0] << 8 | c->p[1];
	c->p += 2;
	c->left -= 2;
	return 0;
}

static int
take_sub(struct cursor *c, size_t n, struct cursor *sub)
{
	if (c->left < n)
		return -1;
	sub->p = c->p;
	sub->left = n;
	c->p += n;
	c->left -= n;
	return 0;
}

/* Copy an untrusted name for a log reason: printable ASCII kept, anything
 * else shown as '?'. */
static void
copy_printable(char *out, size_t outlen, const uint8_t *p, size_t n)
{
	if (n >= outlen)
		n = outlen - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = p[i] > 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	out[n] = '\0';
}

/* server_name extension body: a non-empty list of (type, name) that fills
 * the extension exactly. One host_name is a name; more entries of any type
 * are refused (RFC 6066 3 allows one name per type, defines one type, and
 * servers differ on which of several they would serve). */
static enum sni_result
parse_server_name(struct cursor *ext, struct sni_hello *out)
{
	struct cursor list, host;
	unsigned list_len, type, host_len, n = 0;

	if (take_u16(ext, &list_len) != 0 || take_sub(ext, list_len, &list) != 0 ||
	    ext->left != 0 || list.left == 0)
		return SNI_MALFORMED;
	while (list.left > 0) {
		if (take_u8(&list, &type) != 0 || take_u16(&list, &host_len) != 0 ||
		    take_sub(&list, host_len, &host) != 0)
			return SNI_MALFORMED;
		if (++n == 2) {
			copy_printable(out->second, sizeof(out->second), host.p, host_len);
			continue;
		}
		if (n > 2)
			continue;
		if (type != TLS_SNI_HOST_NAME || host_len == 0 || host_len > 253)
			return SNI_MALFORMED;
		for (size_t i = 0; i < host_len; i++)
			if (host.p[i] <= 0x20 || host.p[i] >= 0x7f)
				return SNI_MALFORMED;
		memcpy(out->name, host.p, host_len);
		out->name[host_len] = '\0';
	}
	return n == 1 ? SNI_FOUND : SNI_MANY_NAMES;
}

static enum sni_result
parse_client_hello(struct cursor *hello, struct sni_hello *out)
{
	struct cursor skip, exts;
	enum sni_result r = SNI_NO_NAME;
	bool named = false;
	unsigned v, len;

	/* legacy_version, random */
	if (take_u16(hello, &v) != 0 || take_sub(hello, 32, &skip) != 0)
		return SNI_MALFORMED;
	/* legacy_session_id <0..32> */
	if (take_u8(hello, &len) != 0 || len > 32 || take_sub(hello, len, &skip) != 0)
		return SNI_MALFORMED;
	/* cipher_suites <2..2^16-2> */
	if (take_u16(hello, &len) != 0 || len < 2 || len % 2 != 0 ||
	    take_sub(hello, len, &skip) != 0)
		return SNI_MALFORMED;
	/* legacy_compression_methods <1..2^8-1> */
	if (take_u8(hello, &len) != 0 || len < 1 || take_sub(hello, len, &skip) != 0)
		return SNI_MALFORMED;
	/* An SSLv3-style hello may end here: no extensions, no name. */
	if (hello->left == 0)
		return SNI_NO_NAME;
	if (take_u16(hello, &len) != 0 || take_sub(hello, len, &exts) != 0 || hello->left != 0)
		return SNI_MALFORMED;
	/* All of them: an ECH extension may follow the name, and a second
	 * server_name (RFC 8446 4.2 forbids repeats) could be the one a
	 * server reads. */
	while (exts.left > 0) {
		struct cursor ext;
		unsigned type, ext_len;

		if (take_u16(&exts, &type) != 0 || take_u16(&exts, &ext_len) != 0 ||
		    take_sub(&exts, ext_len, &ext) != 0)
			return SNI_MALFORMED;
		if (type == TLS_EXT_SERVER_NAME) {
			if (named)
				return SNI_MALFORMED;
			named = true;
			if ((r = parse_server_name(&ext, out)) == SNI_MALFORMED)
				return r;
		} else if (type == TLS_EXT_ECH || type == TLS_EXT_ESNI) {
			if (out->ech)
				return SNI_MALFORMED;
			out->ech = true;
		}
	}
	return r;
}

enum sni_result
sni_parse(const uint8_t *buf, size_t len, struct sni_hello *out)
{
	/* The handshake bytes of every record so far, joined: a ClientHello
	 * may be split over records (RFC 8446 5.1). */
	uint8_t hs[SNI_MAX_HELLO];
	size_t hs_len = 0, off = 0;

	out->name[0] = out->second[0] = '\0';
	out->ech = false;
	out->len = 0;
	if (len >= 1 && buf[0] != TLS_RECORD_HANDSHAKE)
		return SNI_NOT_TLS;
	if (len >= 2 && buf[1] != 0x03)
		return SNI_NOT_TLS;
	for (;;) {
		size_t rec_len, avail;
		if (len - off < 5)
			return SNI_INCOMPLETE;
		if (buf[off] != TLS_RECORD_HANDSHAKE || buf[off + 1] != 0x03)
			return SNI_MALFORMED;
		rec_len = (size_t)buf[off + 3] << 8 | buf[off + 4];
		if (rec_len == 0 || rec_len > TLS_MAX_RECORD)
			return SNI_MALFORMED;
		avail = len - off - 5;
		if (avail > rec_len)
			avail = rec_len;
		if (avail > sizeof(hs) - hs_len)
			return SNI_MALFORMED;
		memcpy(hs + hs_len, buf + off + 5, avail);
		hs_len += avail;

		if (hs_len >= 4) {
			size_t msg_len;
			struct cursor hello;

			if (hs[0] != TLS_HS_CLIENT_HELLO)
				return SNI_MALFORMED;
			msg_len = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
			if (msg_len > sizeof(hs) - 4)
				return SNI_MALFORMED;
			if (hs_len >= 4 + msg_len) {
				enum sni_result r;

				/* The record that completes the hello must be
				 * in whole too: its rest is not the client's
				 * next message, it is this record's. */
				if (avail < rec_len)
					return SNI_INCOMPLETE;
				hello.p = hs + 4;
				hello.left = msg_len;
				r = parse_client_hello(&hello, out);
				if (r != SNI_MALFORMED)
					out->len = off + 5 + rec_len;
				return r;
			}
		}
		if (avail < rec_len)
			return SNI_INCOMPLETE;
		off += 5 + rec_len;
	}
}

const char *
sni_result_str(enum sni_result r)
{
	switch (r) {
	case SNI_FOUND:
		return "found";
	case SNI_INCOMPLETE:
		return "incomplete";
	case SNI_NO_NAME:
		return "no server_name";
	case SNI_NOT_TLS:
		return "not TLS";
	case SNI_MALFORMED:
		return "malformed ClientHello";
	case SNI_MANY_NAMES:
		return "server_name lists more than one name";
	}
	return "?";
}
