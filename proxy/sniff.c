/* Transparent connections: what the first bytes say about the
 * destination (DESIGN.md, decision 1). A TLS ClientHello gives the SNI, an
 * HTTP/1 request its Host; anything else, or silence (server-speaks-first
 * protocols), gives no name. Peeking is bounded in bytes and time. */
#include "proxy/conn.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/util.h"
#include "proxy/sni.h"

/* Whether the first bytes start an HTTP/1 request line: an upper-case
 * method and a space (1), could still (0), or cannot (-1). */
static int
sniff_looks_http(const uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n && i < 16; i++) {
		if (buf[i] == ' ')
			return i > 0 ? 1 : -1;
		if (buf[i] < 'A' || buf[i] > 'Z')
			return -1;
	}
	return n < 16 ? 0 : -1;
}

void
sniff_decide(struct conn *c, bool timed_out)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in), n = len < SNI_MAX_INPUT ? len : SNI_MAX_INPUT;
	const uint8_t *buf = n > 0 ? evbuffer_pullup(in, (ssize_t)n) : NULL;
	char name[SNI_NAME_MAX];
	const char *why = NULL;
	enum sni_result sr;

	if (n == 0) {
		if (!timed_out)
			return;
		c->kind = "tcp";
		conn_decide_noname(c);
		return;
	}
	sr = sni_parse(buf, n, name, sizeof(name));
	if (sr != SNI_NOT_TLS) {
		/* The log's "tls" means a ClientHello that named a server;
		 * TLS without a (readable) name is name-less "tcp", though
		 * a refusal still answers it with a TLS alert. */
		c->tls = true;
		c->kind = sr == SNI_FOUND ? "tls" : "tcp";
		if (sr == SNI_INCOMPLETE && n < SNI_MAX_INPUT && !timed_out)
			return;
		if (sr == SNI_FOUND) {
			struct http_authority a;
			bool lit = http_parse_authority(name, strlen(name), false, 0, &a) == 0 &&
			           a.ip_literal;

			c->has_name = true;
			if (conn_set_host(c, name, lit, &why) != 0) {
				conn_refuse(c, 403, "http_request_denied", "bad SNI name: %s", why);
				return;
			}
			if (conn_decide_name(c))
				conn_start_resolve(c);
			return;
		}
		if (sr == SNI_NO_NAME) {
			conn_decide_noname(c);
			return;
		}
		conn_refuse(c, 403, "tls_protocol_error", "%s",
		            sr == SNI_INCOMPLETE ? "incomplete ClientHello" : sni_result_str(sr));
		return;
	} else {
		static struct http_head h; /* one loop, one thread: no re-entry */
		enum http_result hr;
		const char *s = (const char *)buf;
		int hi, looks = sniff_looks_http(buf, n);

		if (looks == 0 && !timed_out)
			return;
		if (looks <= 0) {
			/* Not HTTP/1 nor TLS: a protocol we cannot name. */
			c->kind = "tcp";
			conn_decide_noname(c);
			return;
		}
		hr = http_parse_request(s, n, &h);
		if (hr == HTTP_INCOMPLETE && !timed_out)
			return;
		if (hr != HTTP_OK) {
			/* HTTP, but not a head we can read in time: refused
			 * like a bad one. */
			c->kind = "http";
			conn_refuse(c, hr == HTTP_INCOMPLETE ? 408 : 400, "http_request_error",
			            "%s",
			            hr == HTTP_INCOMPLETE ? "request head not complete in time"
			                                  : http_result_str(hr));
			return;
		}
		c->kind = "http";
		str_copy(c->method, "", sizeof(c->method));
		if (h.method.len < sizeof(c->method)) {
			memcpy(c->method, s + h.method.off, h.method.len);
			c->method[h.method.len] = '\0';
		}
		c->url = strndup(s + h.target.off,
		                 h.target.len < CONN_URL_MAX ? h.target.len : CONN_URL_MAX);
		hi = http_find_header(s, &h, "host", 0);
		if (hi >= 0 && http_find_header(s, &h, "host", (size_t)hi + 1) < 0) {
			struct http_authority a;

			if (http_parse_authority(s + h.headers[hi].value.off,
			                         h.headers[hi].value.len, false, c->port,
			                         &a) != 0 ||
			    conn_set_host(c, a.host, a.ip_literal, &why) != 0) {
				conn_refuse(c, 400, "http_request_error", "bad Host header");
				return;
			}
			c->has_name = true;
			if (conn_decide_name(c))
				conn_start_resolve(c);
			return;
		}
		if (hi >= 0) {
			conn_refuse(c, 400, "http_request_error", "more than one Host header");
			return;
		}
		conn_decide_noname(c);
	}
}
