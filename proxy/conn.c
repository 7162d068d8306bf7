/* One proxied connection: the state machine from accept to the single
 * egress log line written when it ends (DESIGN.md, "Decisions in the
 * supervisor"). Two symmetric halves, down (the sandbox) and up (the
 * destination); the state changes only in conn_enter(). */
#include "proxy/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "dns/cache.h"
#include "elog/elog.h"
#include "policy/policy.h"
#include "proxy/sni.h"

#define CONN_URL_MAX 1024

static const char *const conn_state_names[] = {
        [CONN_HEAD] = "head",       [CONN_SNIFF] = "sniff",   [CONN_RESOLVE] = "resolve",
        [CONN_CONNECT] = "connect", [CONN_TUNNEL] = "tunnel", [CONN_HTTP] = "http",
        [CONN_REPLY] = "reply",
};

static void conn_down_read(struct bufferevent *bev, void *arg);
static void conn_down_write(struct bufferevent *bev, void *arg);
static void conn_down_event(struct bufferevent *bev, short what, void *arg);
static void conn_up_read(struct bufferevent *bev, void *arg);
static void conn_up_write(struct bufferevent *bev, void *arg);
static void conn_up_event(struct bufferevent *bev, short what, void *arg);
static void conn_timer(evutil_socket_t fd, short what, void *arg);
static void conn_head_read(struct conn *c);
static void conn_http_pump_req(struct conn *c);
static void conn_http_pump_resp(struct conn *c);

/* The only place the state changes. */
static void
conn_enter(struct conn *c, enum conn_state s)
{
	log_debug("conn %llu: %s -> %s", (unsigned long long)c->id, conn_state_names[c->state],
	          conn_state_names[s]);
	c->state = s;
}

static void
timer_in(struct conn *c, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(c->timer, &tv);
}

void
conn_enter_tunnel(struct conn *c)
{
	conn_enter(c, CONN_TUNNEL);
	evtimer_del(c->timer);
	timer_in(c, c->px->px_cfg.idle_timeout_ms);
}

void
conn_touch(struct conn *c)
{
	c->last_ms = now_ms();
}

/* The egress log line for this connection (or this HTTP exchange). */
static void
conn_log(struct conn *c)
{
	struct proxy *px = c->px;
	struct elog_event ev;
	char ip[INET6_ADDRSTRLEN], orig[INET6_ADDRSTRLEN + 8];

	if (c->logged)
		return;
	c->logged = true;
	memset(&ev, 0, sizeof(ev));
	ev.kind = c->kind;
	ev.host = c->host[0] != '\0' ? c->host : NULL;
	ev.port = c->port != 0 ? c->port : -1;
	if (c->has_dst) {
		conn_addr_str(&c->dst, ip, sizeof(ip));
		ev.ip = ip;
	} else if (c->has_orig) {
		conn_addr_str(&c->orig, ip, sizeof(ip));
		ev.ip = ip;
	}
	if (c->has_orig && c->has_dst && !conn_addr_eq(&c->orig, &c->dst)) {
		char o[INET6_ADDRSTRLEN];

		conn_addr_str(&c->orig, o, sizeof(o));
		snprintf(orig, sizeof(orig), c->orig.sa.sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u",
		         o, (unsigned)c->port);
		ev.orig_dst = orig;
	}
	ev.verdict = c->verdict != NULL ? c->verdict : "deny";
	ev.rule = c->rule[0] != '\0' ? c->rule : NULL;
	ev.reason = c->reason[0] != '\0' ? c->reason : NULL;
	ev.bytes_up = c->up.bytes;
	ev.bytes_down = c->down.bytes;
	ev.duration_ms = now_ms() - c->start_ms;
	ev.sni = c->tls && c->has_name ? c->host : NULL;
	ev.method = c->method[0] != '\0' ? c->method : NULL;
	ev.url = c->url;
	if (elog_event(px->px_cfg.log, &ev) != 0 && !px->px_said_log_failed) {
		px->px_said_log_failed = true;
		log_warnx("proxy: the egress log cannot be written; refusing every new connection");
	}
}

static void
half_free(struct conn_half *h)
{
	if (h->bev != NULL) {
		bufferevent_free(h->bev);
		h->bev = NULL;
	}
	fd_close(&h->fd);
}

void
conn_close(struct conn *c)
{
	struct proxy *px = c->px;

	/* An explicit client that connected and left without a byte asked
	 * for nothing: no line. Everything else gets exactly one. */
	if (!c->logged && (c->lkind == PROXY_LISTEN_TRANSPARENT || c->kind != NULL))
		conn_log(c);
	TAILQ_REMOVE(&px->px_conns, c, entry);
	px->px_n_conns--;
	upstream_cancel(c);
	relay_free(c);
	half_free(&c->up);
	half_free(&c->down);
	if (c->timer != NULL)
		event_free(c->timer);
	free(c->url);
	free(c->http.out_head);
	free(c);
}

static void
conn_reset(struct conn *c)
{
	struct linger lg = {1, 0};

	/* An RST tells a transparent client at once; nothing else fits a
	 * protocol we do not speak. */
	if (c->down.fd >= 0)
		(void)setsockopt(c->down.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	conn_close(c);
}

/* Text the client controls, made safe for a header's quoted string and a
 * text body: printable ASCII only, no quote or backslash. */
static void
safe_text(char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e || *s == '"' || *s == '\\')
			*s = '?';
}

static const char *
status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	}
	return "Error";
}

/* Stop forwarding, let what is queued for the client drain, then close;
 * the client's further bytes are read and dropped meanwhile so the close
 * never turns into a reset that destroys the reply in flight. */
static void
conn_finish(struct conn *c)
{
	upstream_cancel(c);
	relay_free(c);
	half_free(&c->up);
	conn_enter(c, CONN_REPLY);
	bufferevent_setcb(c->down.bev, conn_down_read, conn_down_write, conn_down_event, c);
	bufferevent_setwatermark(c->down.bev, EV_WRITE, 0, 0);
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
	bufferevent_enable(c->down.bev, EV_READ | EV_WRITE);
	evtimer_del(c->timer);
	timer_in(c, CONN_REPLY_MS);
	if (evbuffer_get_length(bufferevent_get_output(c->down.bev)) == 0)
		conn_down_write(c->down.bev, c);
}

void
conn_refuse(struct conn *c, int status, const char *error, const char *fmt, ...)
{
	char body[512], head[1024];
	va_list ap;
	bool policy_denial = strcmp(error, "http_request_denied") == 0 ||
	                     strcmp(error, "destination_ip_prohibited") == 0 ||
	                     strcmp(error, "connection_limit_reached") == 0;
	int hl, bl;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap); /* fmt's args may be c->reason */
	va_end(ap);
	str_copy(c->reason, body, sizeof(c->reason));
	safe_text(c->reason);
	if (policy_denial || c->verdict == NULL)
		c->verdict = "deny";
	/* A rule allowed the name; something else refused it: the rule is
	 * not the reason, so it is not reported as one. */
	if (strcmp(error, "destination_ip_prohibited") == 0)
		c->rule[0] = '\0';
	log_info("conn %llu: %s %s:%u: %s", (unsigned long long)c->id, c->verdict, c->host,
	         (unsigned)c->port, c->reason);
	if (c->down.bev == NULL) {
		conn_close(c);
		return;
	}
	if (c->lkind == PROXY_LISTEN_TRANSPARENT && c->tls) {
		/* A TLS client gets an alert, never a hang or a plaintext
		 * answer it cannot parse. */
		conn_log(c);
		bufferevent_write(c->down.bev, sni_alert_access_denied,
		                  sizeof(sni_alert_access_denied));
		conn_finish(c);
		return;
	}
	if (c->lkind == PROXY_LISTEN_TRANSPARENT &&
	    (c->kind == NULL || strcmp(c->kind, "http") != 0)) {
		conn_reset(c);
		return;
	}
	bl = snprintf(body, sizeof(body), "airlock: %s %s port %u: %s\n",
	              status == 403 ? "denied" : "cannot reach", c->host[0] != '\0' ? c->host : "?",
	              (unsigned)c->port, c->reason);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		bl = (int)strlen(body);
	hl = snprintf(head, sizeof(head),
	              "HTTP/1.1 %d %s\r\n"
	              "Content-Type: text/plain; charset=utf-8\r\n"
	              "Content-Length: %d\r\n"
	              "Proxy-Status: airlock; error=%s; details=\"%s\"\r\n"
	              "Connection: close\r\n\r\n",
	              status, status_text(status), bl, error, c->reason);
	if (hl < 0 || (size_t)hl >= sizeof(head))
		hl = (int)strlen(head);
	conn_log(c);
	bufferevent_write(c->down.bev, head, (size_t)hl);
	bufferevent_write(c->down.bev, body, (size_t)bl);
	conn_finish(c);
}

void
conn_tunnel_done(struct conn *c, const char *why)
{
	if (why != NULL && c->reason[0] == '\0')
		str_copy(c->reason, why, sizeof(c->reason));
	conn_close(c);
}

/* ---- decisions ---- */

/* Policy on c->host (a normalised name or an IP literal) and c->port.
 * Returns true to go on (allowed, or audit mode), false when refused. */
static bool
conn_decide_name(struct conn *c)
{
	const struct policy *p = c->px->px_cfg.policy;
	struct policy_verdict v;

	if (c->ip_literal) {
		union conn_addr a;

		memset(&a, 0, sizeof(a));
		if (inet_pton(AF_INET6, c->host, &a.in6.sin6_addr) == 1)
			a.sa.sa_family = AF_INET6;
		else if (inet_pton(AF_INET, c->host, &a.in.sin_addr) == 1)
			a.sa.sa_family = AF_INET;
		policy_match_addr(p, &a.sa, c->port, &v);
	} else {
		policy_match_host(p, c->host, c->port, &v);
	}
	str_copy(c->rule, v.where != NULL ? v.where : "", sizeof(c->rule));
	if (v.action == POLICY_ALLOW) {
		c->verdict = "allow";
		return true;
	}
	if (v.action == POLICY_DENY)
		snprintf(c->reason, sizeof(c->reason), "denied by rule");
	else
		snprintf(c->reason, sizeof(c->reason), "no rule allows %s%s port %u",
		         c->ip_literal ? "address " : "", c->host, (unsigned)c->port);
	if (policy_mode(p) == POLICY_MODE_AUDIT) {
		c->verdict = "audit-deny";
		return true;
	}
	c->verdict = "deny";
	conn_refuse(c, 403, "http_request_denied", "%s", c->reason);
	return false;
}

/* Set c->host from an untrusted name: IP literal, or a normalised DNS
 * name. Returns 0, or -1 with a reason in why. */
static int
conn_set_host(struct conn *c, const char *name, bool ip_literal, const char **why)
{
	c->ip_literal = ip_literal;
	if (ip_literal) {
		str_copy(c->host, name, sizeof(c->host));
		return 0;
	}
	if (policy_name_normalize(name, c->host, sizeof(c->host), why) != 0) {
		str_copy(c->host, name, sizeof(c->host));
		safe_text(c->host);
		return -1;
	}
	return 0;
}

/* The destination has been resolved (or was a literal / transparent
 * original destination): apply the guard and connect. */
void
conn_resolved(struct conn *c)
{
	char why[160] = "";

	if (upstream_take_answer(c) != 0)
		return;
	if (c->lkind == PROXY_LISTEN_TRANSPARENT) {
		/* Connect only to the original destination, and only if the
		 * name resolves to it: SNI/Host alone never decides. */
		bool found = false;

		for (size_t i = 0; i < c->n_addrs; i++)
			found = found || conn_addr_eq(&c->addrs[i], &c->orig);
		c->addrs[0] = c->orig;
		c->n_addrs = 1;
		c->next_addr = 0;
		if (!found) {
			c->dst = c->orig;
			c->has_dst = true;
			if (policy_mode(c->px->px_cfg.policy) != POLICY_MODE_AUDIT) {
				c->verdict = "deny";
				conn_refuse(c, 403, "destination_ip_prohibited",
				            "%s does not resolve to the original destination",
				            c->tls ? "SNI" : "Host");
				return;
			}
			c->verdict = "audit-deny";
			str_copy(c->reason, "name does not resolve to the original destination",
			         sizeof(c->reason));
		}
	}
	if (upstream_filter(c, why, sizeof(why)) == 0) {
		/* The refused address is named in the reason. */
		c->has_dst = false;
		conn_refuse(c, 403, "destination_ip_prohibited", "%s", why);
		return;
	}
	evtimer_del(c->timer);
	conn_enter(c, CONN_CONNECT);
	upstream_connect(c);
}

/* Transparent connection without a name: the original address must be
 * allowed by a cidr rule, or have been learned from DNS for an allowed
 * name still within its TTL. */
static void
conn_decide_noname(struct conn *c)
{
	const struct policy *p = c->px->px_cfg.policy;
	struct policy_verdict v;
	const char *name = NULL;
	struct timespec ts;

	conn_addr_str(&c->orig, c->host, sizeof(c->host));
	policy_match_addr(p, &c->orig.sa, c->port, &v);
	if (v.action != POLICY_ALLOW && c->px->px_cfg.cache != NULL) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		name = dns_cache_lookup(c->px->px_cfg.cache, &c->orig.sa, (uint64_t)ts.tv_sec);
		if (name != NULL) {
			str_copy(c->host, name, sizeof(c->host));
			policy_match_host(p, c->host, c->port, &v);
		}
	}
	str_copy(c->rule, v.where != NULL ? v.where : "", sizeof(c->rule));
	if (v.action == POLICY_ALLOW) {
		c->verdict = "allow";
	} else {
		if (v.action == POLICY_DENY)
			str_copy(c->reason, "denied by rule", sizeof(c->reason));
		else if (name != NULL)
			snprintf(c->reason, sizeof(c->reason), "no rule allows %s port %u", name,
			         (unsigned)c->port);
		else
			str_copy(c->reason,
			         "no name; address not allowed by a cidr rule nor learned "
			         "from DNS for an allowed name",
			         sizeof(c->reason));
		if (policy_mode(p) != POLICY_MODE_AUDIT) {
			c->verdict = "deny";
			conn_refuse(c, 403, "http_request_denied", "%s", c->reason);
			return;
		}
		c->verdict = "audit-deny";
	}
	c->addrs[0] = c->orig;
	c->n_addrs = 1;
	c->next_addr = 0;
	c->ip_literal = true;
	c->resolve_ready = true;
	conn_enter(c, CONN_RESOLVE);
	conn_resolved(c);
}

static void
conn_start_resolve(struct conn *c)
{
	/* evdns has its own timeouts, but a resolver without a reachable
	 * nameserver must not hold a client forever. */
	evtimer_del(c->timer);
	timer_in(c, c->px->px_cfg.connect_timeout_ms);
	conn_enter(c, CONN_RESOLVE);
	upstream_resolve(c);
}

/* ---- transparent: sniffing the first bytes ---- */

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

static void
conn_sniff_decide(struct conn *c, bool timed_out)
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
		c->tls = true;
		c->kind = "tls";
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

/* ---- explicit: request heads ---- */

static void
conn_set_method_url(struct conn *c, const char *s, const struct http_head *h)
{
	size_t ml = h->method.len < sizeof(c->method) - 1 ? h->method.len : sizeof(c->method) - 1;

	memcpy(c->method, s + h->method.off, ml);
	c->method[ml] = '\0';
	free(c->url);
	c->url = strndup(s + h->target.off,
	                 h->target.len < CONN_URL_MAX ? h->target.len : CONN_URL_MAX);
}

static void
conn_connect_request(struct conn *c, const char *s, const struct http_head *h)
{
	struct http_authority a;
	const char *why = NULL;

	c->kind = "connect";
	if (http_parse_authority(s + h->target.off, h->target.len, true, 0, &a) != 0) {
		conn_refuse(c, 400, "http_request_error", "CONNECT needs host:port");
		return;
	}
	c->port = a.port;
	if (conn_set_host(c, a.host, a.ip_literal, &why) != 0) {
		conn_refuse(c, 400, "http_request_error", "bad host name: %s", why);
		return;
	}
	evbuffer_drain(bufferevent_get_input(c->down.bev), h->head_len);
	if (conn_decide_name(c))
		conn_start_resolve(c);
}

static void
conn_http_request(struct conn *c, const char *s, const struct http_head *h)
{
	struct conn_http *ht = &c->http;
	struct http_authority a, ha;
	const char *path, *why = NULL;
	size_t plen;
	char hosthdr[HTTP_HOST_MAX + 8];
	ssize_t n;
	int hi;

	c->kind = "http";
	if (http_parse_absolute(s + h->target.off, h->target.len, &a, &path, &plen) != 0) {
		conn_refuse(c, 400, "http_request_error",
		            "the request target must be absolute-form http://host/path");
		return;
	}
	c->port = a.port;
	if (conn_set_host(c, a.host, a.ip_literal, &why) != 0) {
		conn_refuse(c, 400, "http_request_error", "bad host name: %s", why);
		return;
	}
	hi = http_find_header(s, h, "host", 0);
	if (hi >= 0) {
		if (http_find_header(s, h, "host", (size_t)hi + 1) >= 0 ||
		    http_parse_authority(s + h->headers[hi].value.off, h->headers[hi].value.len,
		                         false, 80, &ha) != 0 ||
		    strcmp(ha.host, a.host) != 0 || ha.port != a.port) {
			conn_refuse(c, 400, "http_request_error",
			            "the Host header disagrees with the request target");
			return;
		}
	}
	if (http_request_framing(s, h, &ht->req_framing, &ht->req_left) != 0) {
		conn_refuse(c, 400, "http_request_error",
		            "the request body's length is ambiguous "
		            "(Content-Length/Transfer-Encoding)");
		return;
	}
	if (a.port == 80)
		snprintf(hosthdr, sizeof(hosthdr),
		         a.host[0] != '\0' && strchr(a.host, ':') ? "[%s]" : "%s", a.host);
	else
		snprintf(hosthdr, sizeof(hosthdr), strchr(a.host, ':') ? "[%s]:%u" : "%s:%u",
		         a.host, (unsigned)a.port);
	free(ht->out_head);
	ht->out_head = malloc(HTTP_MAX_HEAD + 512);
	if (ht->out_head == NULL) {
		conn_refuse(c, 503, "proxy_internal_error", "out of memory");
		return;
	}
	n = http_rewrite_request(s, h, path, plen, hosthdr, ht->out_head, HTTP_MAX_HEAD + 512);
	if (n < 0) {
		conn_refuse(c, 431, "http_request_error", "request head too large");
		return;
	}
	ht->out_len = (size_t)n;
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
		conn_connected(c);
		return;
	}
	half_free(&c->up);
	c->has_dst = false;
	conn_start_resolve(c);
}

static void
conn_head_read(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in), n = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	static struct http_head h; /* one loop, one thread: no re-entry */
	enum http_result r;
	const char *s;

	if (len == 0)
		return;
	if (c->kind == NULL)
		c->kind = "http"; /* bytes arrived: this is now an attempt */
	s = (const char *)evbuffer_pullup(in, (ssize_t)n);
	r = http_parse_request(s, n, &h);
	if (r == HTTP_INCOMPLETE)
		return;
	if (r != HTTP_OK) {
		conn_refuse(c, r == HTTP_BAD_SYNTAX ? 400 : 431, "http_request_error", "%s",
		            http_result_str(r));
		return;
	}
	conn_set_method_url(c, s, &h);
	if (http_span_eq(s, h.method, "CONNECT"))
		conn_connect_request(c, s, &h);
	else
		conn_http_request(c, s, &h);
}

/* ---- HTTP forwarding ---- */

static void
conn_http_next(struct conn *c)
{
	struct conn_http *ht = &c->http;

	conn_log(c);
	if (ht->server_close || !ht->req_done) {
		half_free(&c->up);
		c->up_host[0] = '\0';
	}
	if (ht->client_close || !ht->req_done) {
		conn_finish(c);
		return;
	}
	/* Ready for the next request on this connection: a fresh exchange
	 * and, later, a fresh log line. */
	c->logged = false;
	c->kind = NULL;
	c->verdict = NULL;
	c->rule[0] = c->reason[0] = c->method[0] = c->host[0] = '\0';
	c->port = 0;
	free(c->url);
	c->url = NULL;
	c->up.bytes = c->down.bytes = 0;
	c->start_ms = now_ms();
	conn_enter(c, CONN_HEAD);
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, HTTP_MAX_HEAD + 1);
	bufferevent_enable(c->down.bev, EV_READ);
	evtimer_del(c->timer);
	timer_in(c, c->px->px_cfg.header_timeout_ms);
	conn_head_read(c);
}

/* Move request body bytes to the origin, bounded by its output buffer. */
static void
conn_http_pump_req(struct conn *c)
{
	struct conn_http *ht = &c->http;
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	struct evbuffer *out = bufferevent_get_output(c->up.bev);

	while (!ht->req_done && evbuffer_get_length(in) > 0) {
		size_t n = evbuffer_get_length(in);

		if (evbuffer_get_length(out) >= CONN_HIGH_WATER) {
			bufferevent_disable(c->down.bev, EV_READ);
			return;
		}
		if (ht->req_framing == HTTP_BODY_LENGTH) {
			if (n > ht->req_left)
				n = (size_t)ht->req_left;
			ht->req_left -= n;
			ht->req_done = ht->req_left == 0;
		} else {
			struct evbuffer_iovec v;
			bool done = false;
			ssize_t used;

			if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
				return;
			used = http_chunked_feed(&ht->req_chunks, v.iov_base, v.iov_len, &done);
			if (used < 0) {
				/* Part of the request is already upstream: this
				 * connection is beyond repair. */
				str_copy(c->reason, "malformed chunked request body",
				         sizeof(c->reason));
				conn_close(c);
				return;
			}
			n = (size_t)used;
			ht->req_done = done;
		}
		evbuffer_remove_buffer(in, out, n);
		c->up.bytes += n;
	}
	if (!ht->req_done)
		bufferevent_enable(c->down.bev, EV_READ);
	else
		/* A pipelined next request waits in the buffer, unread
		 * beyond the head limit, until this response is done. */
		bufferevent_disable(c->down.bev, EV_READ);
}

static int
conn_http_resp_head(struct conn *c)
{
	struct conn_http *ht = &c->http;
	struct evbuffer *in = bufferevent_get_input(c->up.bev);
	static struct http_head h;
	static char out[HTTP_MAX_HEAD + 512];

	for (;;) {
		size_t len = evbuffer_get_length(in), n = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
		const char *s;
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
			conn_refuse(c, 502, "http_protocol_error",
			            "malformed response from upstream");
			return -1;
		}
		if (h.status >= 100 && h.status < 200) {
			ol = http_rewrite_response(s, &h, false, out, sizeof(out));
			if (ol < 0) {
				conn_refuse(c, 502, "http_response_header_section_size",
				            "response head too large");
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
			conn_refuse(c, 502, "http_response_header_section_size",
			            "response head too large");
			return -1;
		}
		bufferevent_write(c->down.bev, out, (size_t)ol);
		c->down.bytes += (size_t)ol;
		evbuffer_drain(in, h.head_len);
		ht->resp_head_done = true;
		return 0;
	}
}

/* Move response bytes to the client; finish the exchange at the end. */
static void
conn_http_pump_resp(struct conn *c)
{
	struct conn_http *ht = &c->http;
	struct evbuffer *in, *out;

	if (c->up.bev == NULL)
		return;
	if (!ht->resp_head_done && (conn_http_resp_head(c) != 0 || !ht->resp_head_done))
		return;
	in = bufferevent_get_input(c->up.bev);
	out = bufferevent_get_output(c->down.bev);
	for (;;) {
		size_t n = evbuffer_get_length(in);
		bool done = false;

		if (ht->resp_framing == HTTP_BODY_NONE ||
		    (ht->resp_framing == HTTP_BODY_LENGTH && ht->resp_left == 0))
			break;
		if (n == 0)
			return;
		if (evbuffer_get_length(out) >= CONN_HIGH_WATER) {
			bufferevent_disable(c->up.bev, EV_READ);
			return;
		}
		if (ht->resp_framing == HTTP_BODY_LENGTH) {
			if (n > ht->resp_left)
				n = (size_t)ht->resp_left;
			ht->resp_left -= n;
		} else if (ht->resp_framing == HTTP_BODY_CHUNKED) {
			struct evbuffer_iovec v;
			ssize_t used;

			if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
				return;
			used = http_chunked_feed(&ht->resp_chunks, v.iov_base, v.iov_len, &done);
			if (used < 0) {
				str_copy(c->reason, "malformed chunked response body",
				         sizeof(c->reason));
				conn_close(c);
				return;
			}
			n = (size_t)used;
		}
		evbuffer_remove_buffer(in, out, n);
		c->down.bytes += n;
		if (done)
			break;
	}
	bufferevent_enable(c->up.bev, EV_READ);
	conn_http_next(c);
}

/* ---- callbacks ---- */

static void
conn_down_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	conn_touch(c);
	switch (c->state) {
	case CONN_HEAD:
		conn_head_read(c);
		break;
	case CONN_SNIFF:
		conn_sniff_decide(c, false);
		break;
	case CONN_HTTP:
		conn_http_pump_req(c);
		break;
	case CONN_REPLY:
		evbuffer_drain(bufferevent_get_input(bev),
		               evbuffer_get_length(bufferevent_get_input(bev)));
		break;
	default:
		/* resolve/connect: bytes wait in the buffer (bounded by the
		 * read watermark) for the upstream. */
		break;
	}
}

static void
conn_down_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	conn_touch(c);
	if (c->state == CONN_REPLY) {
		if (!c->down.shut) {
			c->down.shut = true;
			shutdown(c->down.fd, SHUT_WR);
		}
		if (c->down.eof)
			conn_close(c);
		return;
	}
	if (c->state == CONN_HTTP && c->up.bev != NULL)
		bufferevent_enable(c->up.bev, EV_READ);
	(void)bev;
}

static void
conn_down_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	(void)bev;

	if (c->state == CONN_REPLY) {
		c->down.eof = true;
		if (c->down.shut || (what & BEV_EVENT_ERROR))
			conn_close(c);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		c->down.eof = true;
		/* A client may half-close once its request is sent. */
		if (c->state == CONN_HTTP && c->http.req_done) {
			c->http.client_close = true;
			return;
		}
		if (c->state == CONN_SNIFF) {
			conn_sniff_decide(c, true);
			return;
		}
	}
	if (c->reason[0] == '\0')
		str_copy(c->reason,
		         (what & BEV_EVENT_ERROR) ? "client connection error"
		                                  : "client closed the connection",
		         sizeof(c->reason));
	conn_close(c);
}

static void
conn_up_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	(void)bev;

	conn_touch(c);
	if (c->state == CONN_HTTP) {
		conn_http_pump_resp(c);
	} else if (c->state == CONN_HEAD) {
		/* Bytes nobody asked for between requests: this upstream
		 * cannot be trusted with the next one. */
		half_free(&c->up);
		c->up_host[0] = '\0';
	}
}

static void
conn_up_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	(void)bev;

	conn_touch(c);
	if (c->state == CONN_HTTP && !c->http.req_done)
		conn_http_pump_req(c);
}

static void
conn_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	struct conn_http *ht = &c->http;
	(void)bev;

	if (c->state == CONN_HEAD) {
		/* The kept-alive upstream went away between requests: the next
		 * request to that host simply connects again. */
		half_free(&c->up);
		c->up_host[0] = '\0';
		return;
	}
	if (c->state == CONN_HTTP && (what & BEV_EVENT_EOF)) {
		c->up.eof = true;
		if (ht->resp_head_done && ht->resp_framing == HTTP_BODY_CLOSE) {
			conn_http_pump_resp(c);
			ht->server_close = true;
			ht->client_close = true;
			conn_http_next(c);
			return;
		}
		if (!ht->resp_head_done && c->down.bytes == 0) {
			conn_refuse(c, 502, "connection_terminated",
			            "upstream closed the connection before responding");
			return;
		}
	}
	if (c->state == CONN_HTTP && !ht->resp_head_done && c->down.bytes == 0) {
		conn_refuse(c, 502, "connection_terminated", "upstream connection failed");
		return;
	}
	str_copy(c->reason, "upstream closed during the response", sizeof(c->reason));
	conn_close(c);
}

void
conn_connected(struct conn *c)
{
	int one = 1;

	(void)setsockopt(c->up.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	str_copy(c->up_host, c->host, sizeof(c->up_host));
	c->up_port = c->port;
	bufferevent_setcb(c->up.bev, conn_up_read, conn_up_write, conn_up_event, c);
	if (c->lkind == PROXY_LISTEN_EXPLICIT && strcmp(c->kind, "http") == 0) {
		struct conn_http *ht = &c->http;

		conn_enter(c, CONN_HTTP);
		evtimer_del(c->timer);
		timer_in(c, c->px->px_cfg.idle_timeout_ms);
		bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
		bufferevent_write(c->up.bev, ht->out_head, ht->out_len);
		c->up.bytes += ht->out_len;
		free(ht->out_head);
		ht->out_head = NULL;
		bufferevent_enable(c->up.bev, EV_READ | EV_WRITE);
		conn_http_pump_req(c);
		return;
	}
	if (c->lkind == PROXY_LISTEN_EXPLICIT) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

		bufferevent_write(c->down.bev, ok, sizeof(ok) - 1);
	}
	relay_start(c);
}

static void
conn_timer(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	uint64_t now = now_ms(), idle = c->px->px_cfg.idle_timeout_ms;
	(void)fd;
	(void)what;

	switch (c->state) {
	case CONN_HEAD:
		if (evbuffer_get_length(bufferevent_get_input(c->down.bev)) == 0) {
			/* An idle keep-alive connection: close quietly. */
			conn_close(c);
			return;
		}
		conn_refuse(c, 408, "http_request_error", "request head not complete within %u ms",
		            (unsigned)c->px->px_cfg.header_timeout_ms);
		return;
	case CONN_SNIFF:
		if (now - c->start_ms < c->px->px_cfg.header_timeout_ms &&
		    evbuffer_get_length(bufferevent_get_input(c->down.bev)) > 0) {
			/* Bytes came but not enough: wait out the header time. */
			timer_in(c, c->px->px_cfg.header_timeout_ms - (now - c->start_ms));
			return;
		}
		conn_sniff_decide(c, true);
		return;
	case CONN_TUNNEL:
	case CONN_HTTP:
		if (now - c->last_ms >= idle) {
			str_copy(c->reason, "idle timeout", sizeof(c->reason));
			conn_close(c);
			return;
		}
		timer_in(c, idle - (now - c->last_ms));
		return;
	case CONN_REPLY:
		conn_close(c);
		return;
	case CONN_RESOLVE:
		upstream_cancel(c);
		conn_refuse(c, 504, "dns_timeout", "resolving %s took longer than %u ms", c->host,
		            (unsigned)c->px->px_cfg.connect_timeout_ms);
		return;
	default:
		return;
	}
}

/* ---- accept ---- */

static int
conn_original_dst(int fd, union conn_addr *out)
{
	union conn_addr local;
	socklen_t len = sizeof(local);

	memset(out, 0, sizeof(*out));
	if (getsockname(fd, &local.sa, &len) != 0)
		return -1;
	len = sizeof(*out);
	if (local.sa.sa_family == AF_INET6) {
		if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &out->in6, &len) != 0)
			return -1;
	} else if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &out->in, &len) != 0) {
		return -1;
	}
	/* A v4-mapped v6 destination is the v4 address it maps. */
	if (out->sa.sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&out->in6.sin6_addr)) {
		struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = out->in6.sin6_port};

		memcpy(&v4.sin_addr, &out->in6.sin6_addr.s6_addr[12], 4);
		memset(out, 0, sizeof(*out));
		out->in = v4;
	}
	return 0;
}

/* Refuse before a connection object exists (limits, log failure). */
static void
conn_refuse_early(struct proxy *px, int fd, enum proxy_listener_kind kind, const char *why)
{
	static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
	                           "Content-Type: text/plain; charset=utf-8\r\n"
	                           "Proxy-Status: airlock; error=connection_limit_reached\r\n"
	                           "Content-Length: 39\r\nConnection: close\r\n\r\n"
	                           "airlock: too many connections; retry.\n";
	struct linger lg = {1, 0};
	struct elog_event ev;

	if (kind == PROXY_LISTEN_EXPLICIT)
		(void)send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	else
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	if (elog_failed(px->px_cfg.log))
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind == PROXY_LISTEN_EXPLICIT ? "connect" : "tcp";
	ev.port = -1;
	ev.verdict = "deny";
	ev.reason = why;
	(void)elog_event(px->px_cfg.log, &ev);
}

void
conn_accept(struct proxy *px, int fd, enum proxy_listener_kind kind)
{
	struct conn *c;
	int one = 1;

	if (elog_failed(px->px_cfg.log)) {
		if (!px->px_said_log_failed) {
			px->px_said_log_failed = true;
			log_warnx("proxy: the egress log cannot be written; refusing every new "
			          "connection");
		}
		conn_refuse_early(px, fd, kind, "egress log failed");
		return;
	}
	if (px->px_n_conns >= px->px_cfg.max_conns) {
		log_warnx("proxy: %u connections open (the limit); refusing a new one",
		          px->px_n_conns);
		conn_refuse_early(px, fd, kind, "too many connections");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		log_warn("proxy: allocating a connection");
		close(fd);
		return;
	}
	c->px = px;
	c->id = ++px->px_next_id;
	c->lkind = kind;
	c->down.c = c->up.c = c;
	c->down.peer = &c->up;
	c->up.peer = &c->down;
	c->down.fd = fd;
	c->up.fd = -1;
	c->start_ms = c->last_ms = now_ms();
	c->state = kind == PROXY_LISTEN_EXPLICIT ? CONN_HEAD : CONN_SNIFF;
	TAILQ_INSERT_TAIL(&px->px_conns, c, entry);
	px->px_n_conns++;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	c->timer = evtimer_new(px->px_base, conn_timer, c);
	c->down.bev = bufferevent_socket_new(px->px_base, fd, 0);
	if (c->timer == NULL || c->down.bev == NULL) {
		log_warnx("proxy: cannot set up a connection");
		c->kind = "tcp";
		conn_close(c);
		return;
	}
	bufferevent_setcb(c->down.bev, conn_down_read, conn_down_write, conn_down_event, c);
	if (kind == PROXY_LISTEN_TRANSPARENT) {
		if (conn_original_dst(fd, &c->orig) != 0) {
			c->kind = "tcp";
			str_copy(c->reason, "no original destination (not redirected by nftables?)",
			         sizeof(c->reason));
			log_warn("proxy: SO_ORIGINAL_DST");
			conn_reset(c);
			return;
		}
		c->has_orig = true;
		c->port = ntohs(c->orig.sa.sa_family == AF_INET6 ? c->orig.in6.sin6_port
		                                                 : c->orig.in.sin_port);
		bufferevent_setwatermark(c->down.bev, EV_READ, 0, SNI_MAX_INPUT);
		timer_in(c, PROXY_SNIFF_SILENT_MS < px->px_cfg.header_timeout_ms
		                    ? PROXY_SNIFF_SILENT_MS
		                    : px->px_cfg.header_timeout_ms);
	} else {
		bufferevent_setwatermark(c->down.bev, EV_READ, 0, HTTP_MAX_HEAD + 1);
		timer_in(c, px->px_cfg.header_timeout_ms);
	}
	bufferevent_enable(c->down.bev, EV_READ | EV_WRITE);
}
