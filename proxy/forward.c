/* Absolute-form HTTP/1.1 through the explicit proxy (docs/proxy.md):
 * one request at a time is decided, connected (the upstream reused only for
 * the same host:port), its head rewritten to origin-form without hop-by-hop
 * fields, its body moved with exact framing, the response relayed with its
 * own framing, then the next request is read. Anything that cannot be
 * framed exactly is refused or ends the connection, never guessed. */
#include "proxy/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/membudget.h"
#include "common/util.h"
#include "elog/elog.h"

static void forward_next(struct conn *c);

/* The rewritten request head is no longer needed (sent, or the exchange
 * is over before the connect). */
static void
forward_head_free(struct conn *c)
{
	struct conn_http *ht = &c->http;

	if (ht->out_head == NULL)
		return;
	membudget_share_sub(&c->down.q, ht->out_len);
	free(ht->out_head);
	ht->out_head = NULL;
	ht->out_len = 0;
}

void
forward_request(struct conn *c, const char *s, const struct http_head *h)
{
	struct conn_http *ht = &c->http;
	struct http_authority a, ha;
	const char *path, *why = NULL, *framing;
	size_t plen;
	char *p;
	char hosthdr[HTTP_HOST_MAX + 8];
	ssize_t n;
	int hi;

	c->kind = CONN_KIND_HTTP;
	if (http_parse_absolute(s + h->target.off, h->target.len, &a, &path, &plen) != 0) {
		conn_refuse(c, VR_BAD_REQUEST,
		            "the request target must be absolute-form http://host/path");
		return;
	}
	c->port = a.port;
	if (conn_set_host(c, a.host, a.ip_literal, &why) != 0) {
		conn_refuse(c, VR_BAD_NAME, "bad host name: %s", why);
		return;
	}
	hi = http_find_header(s, h, "host", 0);
	if (hi >= 0) {
		if (http_find_header(s, h, "host", (size_t)hi + 1) >= 0 ||
		    http_parse_authority(s + h->headers[hi].value.off, h->headers[hi].value.len,
		                         false, 80, &ha) != 0 ||
		    strcmp(ha.host, a.host) != 0 || ha.port != a.port) {
			conn_refuse(c, VR_BAD_REQUEST,
			            "the Host header disagrees with the request target");
			return;
		}
	}
	if (http_request_framing(s, h, &ht->req_framing, &ht->req_left) != 0) {
		conn_refuse(c, VR_FRAMING,
		            "the request body's length is ambiguous "
		            "(Content-Length/Transfer-Encoding)");
		return;
	}
	if ((framing = http_connection_framing(s, h)) != NULL) {
		conn_refuse(c, VR_FRAMING, HTTP_CONNECTION_FRAMING_WHY, framing);
		return;
	}
	if (a.port == 80)
		snprintf(hosthdr, sizeof(hosthdr),
		         a.host[0] != '\0' && strchr(a.host, ':') ? "[%s]" : "%s", a.host);
	else
		snprintf(hosthdr, sizeof(hosthdr), strchr(a.host, ':') ? "[%s]:%u" : "%s:%u",
		         a.host, (unsigned)a.port);
	forward_head_free(c);
	ht->out_head = malloc(HTTP_MAX_HEAD + 512);
	if (ht->out_head == NULL) {
		conn_refuse(c, VR_RESOURCE, "out of memory");
		return;
	}
	n = http_rewrite_request(s, h, path, plen, hosthdr, ht->out_head, HTTP_MAX_HEAD + 512);
	if (n < 0) {
		conn_refuse(c, VR_HEAD_TOO_LARGE, "request head too large");
		return;
	}
	/* The head waits here for the connect, queued as much as any byte
	 * in a buffer: only its size, and on the budget. */
	ht->out_len = (size_t)n;
	if ((p = realloc(ht->out_head, ht->out_len > 0 ? ht->out_len : 1)) != NULL)
		ht->out_head = p;
	membudget_share_add(&c->down.q, ht->out_len);
	ht->head_request = http_span_eq(s, h->method, "HEAD");
	ht->client_close = http_has_token(s, h, "connection", "close") ||
	                   (h->minor == 0 && !http_has_token(s, h, "connection", "keep-alive"));
	if (ht->req_framing == HTTP_BODY_CHUNKED)
		http_chunked_init(&ht->req_chunks);
	ht->req_done = ht->req_framing == HTTP_BODY_NONE;
	ht->resp_head_done = false;
	ht->server_close = false;
	evbuffer_drain(bufferevent_get_input(c->down.bev), h->head_len);
	if (!conn_decide_name(c))
		return;
	/* Reuse the open upstream only for the very same host and port. */
	if (c->up.bev != NULL && strcmp(c->up_host, c->host) == 0 && c->up_port == c->port) {
		upstream_mark_audit(c, &c->dst); /* the address it was dialled at */
		conn_connected(c);
		return;
	}
	conn_half_free(&c->up);
	c->has_dst = false;
	conn_start_resolve(c);
}

static void
forward_next(struct conn *c)
{
	struct conn_http *ht = &c->http;

	conn_log(c);
	/* The line just written may have been the one that failed: no next
	 * request on this connection then. */
	if (elog_failed(c->px->px_cfg.log))
		ht->client_close = true;
	if (ht->server_close || !ht->req_done) {
		conn_half_free(&c->up);
		c->up_host[0] = '\0';
	}
	if (ht->client_close || !ht->req_done) {
		conn_finish(c);
		return;
	}
	/* Ready for the next request on this connection: a fresh exchange
	 * and, later, a fresh log line. */
	c->logged = false;
	c->served_http = true;
	c->kind = CONN_KIND_NONE;
	c->decided = false;
	c->why = VR_NONE;
	c->rule[0] = c->detail[0] = c->method[0] = c->host[0] = '\0';
	c->port = 0;
	free(c->url);
	c->url = NULL;
	c->up.bytes = c->down.bytes = 0;
	c->start_ms = now_ms();
	conn_enter(c, CONN_HEAD);
	conn_half_read(&c->down, true);
	conn_head_read(c);
}

/* Request and response bodies are cut the same way. Of the *n bytes
 * waiting in in, keep in *n those that belong to the body under framing f:
 * no more than *left for Content-Length (counting them off), what the
 * chunked decoder ch takes (setting *done at the end), or all of them for
 * a close-delimited body. Returns 1, 0 when nothing can be looked at now,
 * or -1 for a malformed chunked body. */
static int
body_take(struct evbuffer *in, enum http_framing f, uint64_t *left, struct http_chunked *ch,
          size_t *n, bool *done)
{
	if (f == HTTP_BODY_LENGTH) {
		if (*n > *left)
			*n = (size_t)*left;
		*left -= *n;
	} else if (f == HTTP_BODY_CHUNKED) {
		struct evbuffer_iovec v;
		ssize_t used;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			return 0;
		used = http_chunked_feed(ch, v.iov_base, v.iov_len, done);
		if (used < 0)
			return -1;
		*n = (size_t)used;
	}
	return 1;
}

/* Move request body bytes to the origin. What the client's input and the
 * origin's output hold together stays under CONN_HIGH_WATER (and one
 * read): reading the client stops at the mark and goes on from
 * conn_up_write() once the origin has taken half. */
void
forward_pump_request(struct conn *c)
{
	struct conn_http *ht = &c->http;
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	struct evbuffer *out = bufferevent_get_output(c->up.bev);

	while (!ht->req_done && evbuffer_get_length(in) > 0) {
		size_t n = evbuffer_get_length(in);
		bool done = false;
		int took;

		if (evbuffer_get_length(out) >= CONN_HIGH_WATER) {
			conn_half_read(&c->down, false);
			return;
		}
		/* A request is framed by length or chunks: HTTP_BODY_NONE is
		 * done before the loop and HTTP_BODY_CLOSE is response only. */
		took = body_take(in, ht->req_framing, &ht->req_left, &ht->req_chunks, &n, &done);
		if (took == 0)
			return;
		if (took < 0) {
			/* Part of the request is already upstream: this
			 * connection is beyond repair. */
			conn_set_why(c, VR_BAD_REQUEST, "malformed chunked request body");
			conn_close(c);
			return;
		}
		ht->req_done = ht->req_framing == HTTP_BODY_LENGTH ? ht->req_left == 0 : done;
		if (conn_queue_move(out, in, n) != 0) {
			conn_set_why(c, VR_RESOURCE, "out of memory");
			conn_close(c);
			return;
		}
		c->up.bytes += n;
	}
	/* Once the body is through, a pipelined next request waits in the
	 * buffer, unread beyond the head limit, until this response is done. */
	conn_half_read(&c->down, !ht->req_done && evbuffer_get_length(out) < CONN_HIGH_WATER);
}

static int
forward_response_head(struct conn *c)
{
	struct conn_http *ht = &c->http;
	struct evbuffer *in = bufferevent_get_input(c->up.bev);
	static struct http_head h;
	static char out[HTTP_MAX_HEAD + 512];

	for (;;) {
		size_t len = evbuffer_get_length(in), n = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
		const char *s, *framing;
		enum http_result r;
		bool close;
		ssize_t ol;

		if (len == 0)
			return 0;
		s = (const char *)evbuffer_pullup(in, (ssize_t)n);
		r = http_parse_response(s, n, &h);
		if (r == HTTP_INCOMPLETE)
			return 0;
		if (r != HTTP_OK ||
		    http_response_framing(s, &h, ht->head_request, &ht->resp_framing,
		                          &ht->resp_left) != 0 ||
		    h.status == 101) {
			conn_refuse(c, VR_UPSTREAM_PROTOCOL, "malformed response from upstream");
			return -1;
		}
		if ((framing = http_connection_framing(s, &h)) != NULL) {
			conn_refuse(c, VR_UPSTREAM_PROTOCOL,
			            "response refused: " HTTP_CONNECTION_FRAMING_WHY, framing);
			return -1;
		}
		if (h.status >= 100 && h.status < 200) {
			ol = http_rewrite_response(s, &h, false, out, sizeof(out));
			if (ol < 0) {
				conn_refuse(c, VR_UPSTREAM_HEAD_TOO_LARGE, NULL);
				return -1;
			}
			bufferevent_write(c->down.bev, out, (size_t)ol);
			c->down.bytes += (size_t)ol;
			evbuffer_drain(in, h.head_len);
			continue;
		}
		ht->server_close =
		        ht->resp_framing == HTTP_BODY_CLOSE ||
		        http_has_token(s, &h, "connection", "close") ||
		        (h.minor == 0 && !http_has_token(s, &h, "connection", "keep-alive"));
		if (ht->resp_framing == HTTP_BODY_CLOSE)
			ht->client_close = true;
		if (ht->resp_framing == HTTP_BODY_CHUNKED)
			http_chunked_init(&ht->resp_chunks);
		close = ht->client_close;
		ol = http_rewrite_response(s, &h, close, out, sizeof(out));
		if (ol < 0) {
			conn_refuse(c, VR_UPSTREAM_HEAD_TOO_LARGE, NULL);
			return -1;
		}
		bufferevent_write(c->down.bev, out, (size_t)ol);
		c->down.bytes += (size_t)ol;
		evbuffer_drain(in, h.head_len);
		ht->resp_head_done = true;
		return 0;
	}
}

/* Move response bytes to the client; finish the exchange at the end. As
 * for the request, the upstream's input and the client's output together
 * stay under CONN_HIGH_WATER and one read; conn_down_write() calls this
 * again once the client has taken half. c may be gone after this. */
void
forward_pump_response(struct conn *c)
{
	struct conn_http *ht = &c->http;
	struct evbuffer *in, *out;

	if (c->up.bev == NULL)
		return;
	if (!ht->resp_head_done && (forward_response_head(c) != 0 || !ht->resp_head_done))
		return;
	in = bufferevent_get_input(c->up.bev);
	out = bufferevent_get_output(c->down.bev);
	for (;;) {
		size_t n = evbuffer_get_length(in);
		bool done = false;
		int took;

		if (ht->resp_framing == HTTP_BODY_NONE ||
		    (ht->resp_framing == HTTP_BODY_LENGTH && ht->resp_left == 0))
			break;
		if (evbuffer_get_length(out) >= CONN_HIGH_WATER) {
			conn_half_read(&c->up, false);
			return;
		}
		if (n == 0) {
			if (!c->up.eof) {
				conn_half_read(&c->up, true);
				return;
			}
			/* Everything the origin sent before its FIN is through:
			 * that ends a close-delimited body, and cuts any other
			 * (the client, told by the close, sees it short). */
			if (ht->resp_framing == HTTP_BODY_CLOSE)
				break;
			conn_set_why(c, VR_UPSTREAM_CLOSED, "upstream closed during the response");
			conn_close(c);
			return;
		}
		took = body_take(in, ht->resp_framing, &ht->resp_left, &ht->resp_chunks, &n, &done);
		if (took == 0)
			return;
		if (took < 0) {
			conn_set_why(c, VR_UPSTREAM_PROTOCOL, "malformed chunked response body");
			conn_close(c);
			return;
		}
		if (conn_queue_move(out, in, n) != 0) {
			conn_set_why(c, VR_RESOURCE, "out of memory");
			conn_close(c);
			return;
		}
		c->down.bytes += n;
		if (done)
			break;
	}
	/* Read on between exchanges: unasked bytes or a close from the kept
	 * upstream are noticed (conn_up_read, conn_up_event). */
	conn_half_read(&c->up, true);
	forward_next(c);
}

void
forward_start(struct conn *c)
{
	struct conn_http *ht = &c->http;

	/* Callbacks, watermarks and the response timeout (forward_timer)
	 * come with the state. */
	conn_enter(c, CONN_HTTP);
	bufferevent_enable(c->down.bev, EV_WRITE);
	conn_half_read(&c->down, true);
	bufferevent_write(c->up.bev, ht->out_head, ht->out_len);
	c->up.bytes += ht->out_len;
	forward_head_free(c);
	c->up.eof = false; /* a new upstream, or a kept one that has not ended */
	bufferevent_enable(c->up.bev, EV_WRITE);
	conn_half_read(&c->up, true);
	forward_pump_request(c);
}

void
forward_upstream_event(struct conn *c, short what)
{
	struct conn_http *ht = &c->http;

	if (!ht->resp_head_done && c->down.bytes == 0) {
		conn_refuse(c, VR_UPSTREAM_CLOSED,
		            (what & BEV_EVENT_ERROR)
		                    ? "upstream connection failed before responding"
		                    : "upstream closed the connection before responding");
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		/* A reset (or another error) mid-response: only a reset tells
		 * the client that what it got is cut, also when the body has
		 * no length and a close would read as its end. */
		conn_abort(c,
		           EVUTIL_SOCKET_ERROR() == ECONNRESET ? VR_UPSTREAM_RESET
		                                               : VR_UPSTREAM_ERROR,
		           NULL);
		return;
	}
	/* A FIN. What the origin sent before it may still wait in the
	 * upstream's input while the client's output is full: the pump moves
	 * it first and ends the exchange (or cuts it) once it is through.
	 * Neither connection can be reused after a close-delimited body. */
	c->up.eof = true;
	ht->server_close = true;
	if (ht->resp_framing == HTTP_BODY_CLOSE)
		ht->client_close = true;
	if (!ht->resp_head_done) {
		conn_set_why(c, VR_UPSTREAM_CLOSED, "upstream closed during the response");
		conn_close(c);
		return;
	}
	forward_pump_response(c);
}

void
forward_timer(struct conn *c, uint64_t now)
{
	const struct proxy_config *cfg = &c->px->px_cfg;
	uint64_t limit = c->http.resp_head_done ? cfg->idle_timeout_ms : cfg->response_timeout_ms;

	if (now - c->last_ms < limit) {
		conn_timer_in(c, limit - (now - c->last_ms));
		return;
	}
	if (!c->http.resp_head_done) {
		conn_refuse(c, VR_RESPONSE_TIMEOUT, "no response from upstream within %u ms",
		            (unsigned)cfg->response_timeout_ms);
		return;
	}
	conn_set_why(c, VR_IDLE_TIMEOUT, NULL);
	conn_close(c);
}
