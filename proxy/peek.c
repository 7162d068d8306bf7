/* First bytes of a stream: ClientHello, HTTP/1 request head, or neither.
 * See peek.h for the contract. */
#include "proxy/peek.h"

#include <stdio.h>
#include <string.h>

#include "policy/policy.h"
#include "policy/verdict.h"

#define TLS_RECORD_HANDSHAKE 0x16

/* An untrusted value for a reason: printable ASCII kept, the rest '?'. */
static void
copy_printable(char *out, size_t outlen, const char *p, size_t n)
{
	if (n >= outlen)
		n = outlen - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
	out[n] = '\0';
}

static enum peek_kind
refuse(struct peek *out, enum peek_error e)
{
	out->error = e;
	return PEEK_BAD;
}

static void
take_name(struct peek *out, const struct http_authority *a)
{
	memcpy(out->name, a->host, sizeof(out->name));
	out->ip_literal = a->ip_literal;
	out->port = a->port;
	out->has_port = a->has_port;
}

static enum peek_kind
peek_tls(const uint8_t *buf, size_t len, struct peek *out)
{
	struct sni_hello hello;
	struct http_authority a;
	enum sni_result r = sni_parse(buf, len, &hello);

	out->proto = PEEK_PROTO_TLS;
	out->ech = hello.ech;
	switch (r) {
	case SNI_NOT_TLS:
		out->proto = PEEK_PROTO_UNKNOWN;
		return PEEK_OTHER;
	case SNI_INCOMPLETE:
		return len < PEEK_MAX_INPUT ? PEEK_MORE : refuse(out, PEEK_TLS_TOO_LARGE);
	case SNI_FOUND:
		/* An SNI that is an address (RFC 6066 forbids it; clients
		 * still send it) is matched as one, like a Host literal. */
		memcpy(out->name, hello.name, sizeof(out->name));
		out->ip_literal =
		        http_parse_authority(hello.name, strlen(hello.name), false, 0, &a) == 0 &&
		        a.ip_literal;
		/* fall through */
	case SNI_NO_NAME:
		out->len = hello.len;
		return PEEK_TLS;
	case SNI_MANY_NAMES:
		memcpy(out->name, hello.name, sizeof(out->name));
		memcpy(out->detail, hello.second, sizeof(out->detail));
		return refuse(out, PEEK_TLS_MANY_NAMES);
	case SNI_MALFORMED:
		break;
	}
	return refuse(out, PEEK_TLS_MALFORMED);
}

static enum peek_kind
peek_http(const char *s, size_t len, uint16_t default_port, struct http_head *h, struct peek *out)
{
	struct http_authority name, other;
	enum http_result r;
	const char *f;
	int idx = -1;

	out->proto = PEEK_PROTO_HTTP;
	r = http_parse_request(s, len, h);
	if (r == HTTP_INCOMPLETE)
		return PEEK_MORE;
	if (r != HTTP_OK) {
		out->http = r;
		out->head_error = r == HTTP_BAD_SYNTAX ? h->error : NULL;
		return refuse(out, PEEK_HTTP_HEAD);
	}
	out->len = h->head_len;
	switch (http_request_name(s, h, default_port, &name, &other)) {
	case HTTP_NAME_OK:
		take_name(out, &name);
		break;
	case HTTP_NAME_NONE:
		break;
	case HTTP_NAME_BAD_TARGET:
		copy_printable(out->detail, sizeof(out->detail), s + h->target.off, h->target.len);
		return refuse(out, PEEK_HTTP_TARGET);
	case HTTP_NAME_BAD_HOST:
		idx = http_find_header(s, h, "host", 0);
		copy_printable(out->detail, sizeof(out->detail), s + h->headers[idx].value.off,
		               h->headers[idx].value.len);
		return refuse(out, PEEK_HTTP_HOST);
	case HTTP_NAME_MANY_HOSTS:
		return refuse(out, PEEK_HTTP_MANY_HOSTS);
	case HTTP_NAME_MISMATCH:
		take_name(out, &name);
		if (other.has_port)
			snprintf(out->detail, sizeof(out->detail), "%.200s:%u", other.host,
			         (unsigned)other.port);
		else
			snprintf(out->detail, sizeof(out->detail), "%s", other.host);
		return refuse(out, PEEK_HTTP_MISMATCH);
	}
	{
		enum http_framing fr;
		uint64_t n;

		if (http_request_framing(s, h, &fr, &n) != 0)
			return refuse(out, PEEK_HTTP_FRAMING);
	}
	if ((f = http_connection_framing(s, h)) != NULL) {
		snprintf(out->detail, sizeof(out->detail), "%s", f);
		return refuse(out, PEEK_HTTP_CONNECTION);
	}
	switch (http_request_upgrade(s, h, &idx)) {
	case HTTP_UPGRADE_NONE:
		break;
	case HTTP_UPGRADE_WEBSOCKET:
		out->websocket = true;
		break;
	case HTTP_UPGRADE_OTHER:
		copy_printable(out->detail, sizeof(out->detail), s + h->headers[idx].value.off,
		               h->headers[idx].value.len);
		return refuse(out, PEEK_HTTP_UPGRADE);
	}
	return PEEK_HTTP;
}

enum peek_kind
peek_parse(const uint8_t *buf, size_t len, uint16_t default_port, struct http_head *h,
           struct peek *out)
{
	memset(out, 0, sizeof(*out));
	if (len > PEEK_MAX_INPUT)
		len = PEEK_MAX_INPUT;
	if (len == 0)
		return PEEK_MORE;
	if (buf[0] == TLS_RECORD_HANDSHAKE)
		return peek_tls(buf, len, out);
	switch (http_sniff_request((const char *)buf, len)) {
	case HTTP_SNIFF_UNSURE:
		return PEEK_MORE;
	case HTTP_SNIFF_PARTIAL:
		/* Not the parser's yet: the line may still turn out to be
		 * another protocol's, and the answer must not change. */
		out->proto = PEEK_PROTO_HTTP;
		return PEEK_MORE;
	case HTTP_SNIFF_HTTP:
		return peek_http((const char *)buf, len, default_port, h, out);
	case HTTP_SNIFF_OTHER:
		break;
	}
	return PEEK_OTHER;
}

void
peek_reason(const struct peek *p, char *out, size_t outlen)
{
	switch (p->error) {
	case PEEK_OK:
		snprintf(out, outlen, "no refusal");
		return;
	case PEEK_TLS_MALFORMED:
		snprintf(out, outlen, "malformed ClientHello");
		return;
	case PEEK_TLS_TOO_LARGE:
		snprintf(out, outlen, "ClientHello not complete within %u bytes",
		         (unsigned)PEEK_MAX_INPUT);
		return;
	case PEEK_TLS_MANY_NAMES:
		snprintf(out, outlen,
		         "ClientHello server_name lists more than one name (%s, %s): "
		         "servers differ on which one they serve",
		         p->name, p->detail);
		return;
	case PEEK_HTTP_HEAD:
		snprintf(out, outlen, "%s%s%s", http_result_str(p->http),
		         p->head_error != NULL ? ": " : "",
		         p->head_error != NULL ? p->head_error : "");
		return;
	case PEEK_HTTP_TARGET:
		snprintf(out, outlen,
		         "request target '%.200s' is not origin-form, absolute-form (http, "
		         "https) or CONNECT's host:port",
		         p->detail);
		return;
	case PEEK_HTTP_HOST:
		snprintf(out, outlen, "bad Host header '%.200s'", p->detail);
		return;
	case PEEK_HTTP_MANY_HOSTS:
		snprintf(out, outlen, "more than one Host header");
		return;
	case PEEK_HTTP_MISMATCH:
		snprintf(out, outlen, "the request target names %s but Host names %s", p->name,
		         p->detail);
		return;
	case PEEK_HTTP_FRAMING:
		snprintf(out, outlen,
		         "the request body's length is ambiguous "
		         "(Content-Length/Transfer-Encoding)");
		return;
	case PEEK_HTTP_CONNECTION:
		snprintf(out, outlen, HTTP_CONNECTION_FRAMING_WHY, p->detail);
		return;
	case PEEK_HTTP_UPGRADE:
		snprintf(out, outlen,
		         "Upgrade: %.200s refused: only websocket is let through on a "
		         "name-checked connection",
		         p->detail);
		return;
	}
	snprintf(out, outlen, "?");
}

int
peek_status(const struct peek *p)
{
	if (p->error == PEEK_HTTP_HEAD &&
	    (p->http == HTTP_TOO_LARGE || p->http == HTTP_TOO_MANY_HEADERS))
		return 431;
	return 400;
}

enum verdict_reason
peek_why(const struct peek *p)
{
	switch (p->error) {
	case PEEK_OK:
		return VR_NONE;
	case PEEK_TLS_MALFORMED:
	case PEEK_TLS_TOO_LARGE:
		return VR_TLS_MALFORMED;
	case PEEK_TLS_MANY_NAMES:
		return VR_SNI_MANY;
	case PEEK_HTTP_HEAD:
		return p->http == HTTP_TOO_LARGE || p->http == HTTP_TOO_MANY_HEADERS
		               ? VR_HEAD_TOO_LARGE
		               : VR_BAD_REQUEST;
	case PEEK_HTTP_TARGET:
	case PEEK_HTTP_HOST:
	case PEEK_HTTP_MANY_HOSTS:
	case PEEK_HTTP_MISMATCH:
		return VR_BAD_REQUEST;
	case PEEK_HTTP_FRAMING:
	case PEEK_HTTP_CONNECTION:
		return VR_FRAMING;
	case PEEK_HTTP_UPGRADE:
		return VR_UPGRADE;
	}
	return VR_BAD_REQUEST;
}

bool
peek_same_name(const struct peek *p, const char *name, bool ip_literal)
{
	char folded[HTTP_HOST_MAX];
	const char *why;

	if (p->ip_literal != ip_literal)
		return false;
	if (ip_literal) /* the same address, however it is written */
		return verdict_same_name(p->name, name);
	if (policy_name_normalize(p->name, folded, sizeof(folded), &why) != 0)
		return false;
	return strcmp(folded, name) == 0;
}

#define TLS_RECORD_CCS      0x14
#define TLS_HANDSHAKE_HELLO 0x01
#define TLS_RECORD_HEADER   5
#define TLS_MAX_RECORD      (16384 + 2048) /* TLSCiphertext's bound */
/* TLS 1.2's encrypted Finished: 16 bytes, with an explicit IV or nonce,
 * a MAC or tag and padding well under this. */
#define TLS_FINISHED_MAX 256

enum peek_rec
peek_tls_record(const uint8_t *buf, size_t len, bool after_ccs, struct peek *out, size_t *skip)
{
	size_t rl;

	memset(out, 0, sizeof(*out));
	*skip = 0;
	if (len < TLS_RECORD_HEADER + 1)
		return len > 0 && buf[0] != TLS_RECORD_HANDSHAKE && buf[0] != TLS_RECORD_CCS
		               ? PEEK_REC_END
		               : PEEK_REC_MORE;
	rl = (size_t)buf[3] << 8 | buf[4];
	if ((buf[0] != TLS_RECORD_HANDSHAKE && buf[0] != TLS_RECORD_CCS) || rl == 0 ||
	    rl > TLS_MAX_RECORD)
		return PEEK_REC_END;
	if (buf[0] == TLS_RECORD_HANDSHAKE && buf[TLS_RECORD_HEADER] == TLS_HANDSHAKE_HELLO) {
		/* Before change_cipher_spec nothing is encrypted: a record that
		 * starts as a ClientHello is one. After it, a record as small as
		 * TLS 1.2's encrypted Finished may only look like one; a larger
		 * one is a hello. A hello peek_parse does not take (broken,
		 * too large, not TLS to sni_parse) is refused: let through, its
		 * name would go unread. */
		bool hello = !after_ccs || rl > TLS_FINISHED_MAX;
		size_t n = len < PEEK_MAX_INPUT ? len : PEEK_MAX_INPUT;
		enum peek_kind k;

		if (!hello) {
			/* Decided on this record alone, whatever follows it
			 * in the read: the answer must not depend on how the
			 * client's bytes were cut. */
			if (len < TLS_RECORD_HEADER + rl)
				return PEEK_REC_MORE;
			n = TLS_RECORD_HEADER + rl;
		}
		k = peek_tls(buf, n, out);

		if (k == PEEK_TLS)
			return PEEK_REC_HELLO;
		if (k == PEEK_BAD && out->error == PEEK_TLS_MANY_NAMES)
			return PEEK_REC_BAD;
		if (hello) {
			if (k == PEEK_MORE)
				return PEEK_REC_MORE; /* peek_tls refuses at PEEK_MAX_INPUT */
			if (k != PEEK_BAD) {
				out->proto = PEEK_PROTO_TLS;
				out->error = PEEK_TLS_MALFORMED;
			}
			return PEEK_REC_BAD;
		}
		/* Small, after change_cipher_spec: TLS 1.2's encrypted
		 * Finished (its random nonce may begin 01 00 ...) or a hello's
		 * first fragment. It goes once whole: the client waits for the
		 * server's answer to a Finished, so holding it for the rest of
		 * a "hello" hangs the handshake. A fragment alone tells the
		 * server nothing; the caller refuses any handshake record after
		 * it (bind.c), so a hello cut up here never passes whole. */
		memset(out, 0, sizeof(*out));
	}
	if (len < TLS_RECORD_HEADER + rl)
		return PEEK_REC_MORE;
	*skip = TLS_RECORD_HEADER + rl;
	return PEEK_REC_SKIP;
}
