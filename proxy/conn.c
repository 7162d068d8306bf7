/* One proxied connection: the state machine from accept to the single
 * egress log line written when it ends (DESIGN.md, "Decisions in the
 * supervisor"). Two symmetric halves, down (the sandbox) and up (the
 * destination); the state changes only in conn_enter(). */
#include "proxy/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
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

#include "common/fdres.h"
#include "common/log.h"
#include "common/util.h"
#include "dns/cache.h"
#include "elog/elog.h"
#include "policy/policy.h"
#include "proxy/sni.h"
#include "proxy/socks5.h"

static const char *const conn_state_names[] = {
        [CONN_HEAD] = "head",       [CONN_SNIFF] = "sniff",   [CONN_CONNECT] = "connect", [CONN_TUNNEL] = "tunnel", [CONN_HTTP] = "http",
        [CONN_REPLY] = "reply",
};

static void conn_down_read(struct bufferevent *bev, void *arg);
static void conn_down_write(struct bufferevent *bev, void *arg);
static void conn_down_event(struct bufferevent *bev, short what, void *arg);
static void conn_up_read(struct bufferevent *bev, void *arg);
static void conn_up_write(struct bufferevent *bev, void *arg);
static void conn_up_event(struct bufferevent *bev, short what, void *arg);
static void conn_timer(evutil_socket_t fd, short what, void *arg);

static const char *const conn_kind_names[] = {
        [CONN_KIND_NONE] = "unknown",  [CONN_KIND_CONNECT] = "connect", [CONN_KIND_HTTP] = "http",
        [CONN_KIND_SOCKS5] = "socks5", [CONN_KIND_TLS] = "tls",         [CONN_KIND_TCP] = "tcp",
};

/* How long a connection may stay in state s before conn_timer() acts
 * (0: no timer; the broker bounds resolving and connecting, upstream.c). */
static uint64_t
conn_state_timeout(const struct conn *c, enum conn_state s)
{
	const struct proxy_config *cfg = &c->px->px_cfg;

	switch (s) {
	case CONN_HEAD:
		return cfg->header_timeout_ms;
	case CONN_SNIFF:
		/* A silent client is taken for a server-speaks-first one. */
		return PROXY_SNIFF_SILENT_MS < cfg->header_timeout_ms ? PROXY_SNIFF_SILENT_MS
		                                                      : cfg->header_timeout_ms;
	case CONN_CONNECT:
		return 0;
	case CONN_TUNNEL:
		return cfg->idle_timeout_ms;
	case CONN_HTTP:
		/* Until the response head (forward_timer). */
		return cfg->response_timeout_ms;
	case CONN_REPLY:
		return CONN_REPLY_MS;
	}
	return 0;
}

/* The only place the state changes. Entering a state sets what runs in
 * it: the timer (conn_state_timeout), the callbacks of the halves this
 * file serves and their watermarks. A tunnel keeps another owner's setup:
 * its callbacks are the relay's (relay_start, which enters CONN_TUNNEL
 * first). In CONN_CONNECT there is no upstream yet: the broker's reply
 * brings it (upstream.c). */
void
conn_enter(struct conn *c, enum conn_state s)
{
	uint64_t ms = conn_state_timeout(c, s);
	struct bufferevent *down = c->down.bev, *up = c->up.bev;

	log_debug("conn %llu: %s -> %s", (unsigned long long)c->id, conn_state_names[c->state],
	          conn_state_names[s]);
	c->state = s;
	evtimer_del(c->timer);
	if (ms > 0)
		conn_timer_in(c, ms);
	if (down == NULL)
		return;
	switch (s) {
	case CONN_HEAD:
		bufferevent_setcb(down, conn_down_read, conn_down_write, conn_down_event, c);
		bufferevent_setwatermark(down, EV_READ, 0, HTTP_MAX_HEAD + 1);
		/* A kept-alive upstream is watched between requests. */
		if (up != NULL)
			bufferevent_setcb(up, conn_up_read, conn_up_write, conn_up_event, c);
		break;
	case CONN_SNIFF:
		bufferevent_setcb(down, conn_down_read, conn_down_write, conn_down_event, c);
		bufferevent_setwatermark(down, EV_READ, 0, SNI_MAX_INPUT);
		break;
	case CONN_CONNECT:
		/* The client's early bytes wait in its input, bounded by the
		 * head's or the sniffer's mark. */
		break;
	case CONN_HTTP:
		bufferevent_setcb(down, conn_down_read, conn_down_write, conn_down_event, c);
		bufferevent_setwatermark(down, EV_READ, 0, 0);
		/* Each side's write callback fires once half its queue has
		 * gone, to refill it before it runs dry. */
		bufferevent_setwatermark(down, EV_WRITE, CONN_HIGH_WATER / 2, 0);
		if (up != NULL) {
			bufferevent_setcb(up, conn_up_read, conn_up_write, conn_up_event, c);
			bufferevent_setwatermark(up, EV_WRITE, CONN_HIGH_WATER / 2, 0);
		}
		break;
	case CONN_TUNNEL:
		break;
	case CONN_REPLY:
		bufferevent_setcb(down, conn_down_read, conn_down_write, conn_down_event, c);
		bufferevent_setwatermark(down, EV_WRITE, 0, 0);
		bufferevent_setwatermark(down, EV_READ, 0, 0);
		break;
	}
}

void
conn_timer_in(struct conn *c, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(c->timer, &tv);
}

void
conn_enter_tunnel(struct conn *c)
{
	conn_enter(c, CONN_TUNNEL);
}

void
conn_touch(struct conn *c)
{
	c->last_ms = now_ms();
}

/* The egress log line for this connection (or this HTTP exchange). */
void
conn_log(struct conn *c)
{
	struct proxy *px = c->px;
	struct elog_event ev;
	char ip[INET6_ADDRSTRLEN], orig[INET6_ADDRSTRLEN + 8];

	if (c->logged)
		return;
	c->logged = true;
	memset(&ev, 0, sizeof(ev));
	ev.kind = conn_kind_names[c->kind];
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
	ev.verdict = c->decided ? verdict_str(c->verdict) : "deny";
	ev.rule = c->rule[0] != '\0' ? c->rule : NULL;
	if (c->why != VR_NONE) {
		ev.reason = verdict_reason_token(c->why);
		ev.detail = c->detail[0] != '\0' ? c->detail : NULL;
	}
	ev.bytes_up = c->up.bytes;
	ev.bytes_down = c->down.bytes;
	ev.duration_ms = now_ms() - c->start_ms;
	ev.sni = c->tls && c->has_name ? c->host : NULL;
	ev.method = c->method[0] != '\0' ? c->method : NULL;
	ev.url = c->url;
	ev.client = c->client[0] != '\0' ? c->client : NULL;
	/* A refusal that moved no bytes may repeat by the thousand: counted
	 * after the first (elog_event_agg). */
	if (elog_event_agg(px->px_cfg.log, &ev) != 0)
		proxy_log_failed(px);
}

void
conn_half_set_bev(struct conn_half *h, struct bufferevent *bev)
{
	h->bev = bev;
	h->rd_want = false;
	membudget_share_init(&h->q, h->c->px->px_queue);
	/* Unwatched (out of memory for one callback entry), the buffers are
	 * still bounded per connection; only the global count misses them. */
	if (membudget_share_watch(&h->q, bev) != 0)
		log_warnx("proxy: conn %llu: its buffers go uncounted",
		          (unsigned long long)h->c->id);
}

void
conn_half_drop_bev(struct conn_half *h)
{
	if (h->bev == NULL)
		return;
	/* Before the free: the budget's callbacks must not outlive it. */
	membudget_share_release(&h->q);
	bufferevent_free(h->bev);
	h->bev = NULL;
	h->rd_want = false;
}

void
conn_half_free(struct conn_half *h)
{
	conn_half_drop_bev(h);
	fd_close(&h->fd);
}

void
conn_half_read(struct conn_half *h, bool on)
{
	bool read;

	h->rd_want = on;
	if (h->bev == NULL)
		return;
	read = on && !membudget_over(h->c->px->px_queue);
	if (read == ((bufferevent_get_enabled(h->bev) & EV_READ) != 0))
		return; /* the common case: no change, no event_add */
	if (read)
		bufferevent_enable(h->bev, EV_READ);
	else
		bufferevent_disable(h->bev, EV_READ);
}

int
conn_queue_move(struct evbuffer *dst, struct evbuffer *src, size_t n)
{
	struct evbuffer_iovec v[8];

	while (n > 0) {
		int k = evbuffer_peek(src, (ssize_t)n, NULL, v, ARRAY_SIZE(v));
		size_t moved = 0;

		if (k <= 0)
			return -1; /* src holds less than n */
		for (int i = 0; i < k && i < (int)ARRAY_SIZE(v) && moved < n; i++) {
			size_t len = v[i].iov_len < n - moved ? v[i].iov_len : n - moved;

			/* evbuffer_add fills dst's last chain before it makes
			 * another: dst's chains end up full. */
			if (evbuffer_add(dst, v[i].iov_base, len) != 0) {
				evbuffer_drain(src, moved);
				return -1;
			}
			moved += len;
		}
		evbuffer_drain(src, moved);
		n -= moved;
	}
	return 0;
}

void
conn_close(struct conn *c)
{
	struct proxy *px = c->px;

	/* An explicit client that connected and left without a byte asked
	 * for nothing: no line. Everything else gets exactly one. */
	if (!c->logged && (c->lkind == PROXY_LISTEN_TRANSPARENT || c->kind != CONN_KIND_NONE))
		conn_log(c);
	TAILQ_REMOVE(&px->px_conns, c, entry);
	px->px_n_conns--;
	if (px->px_over_limit > 0) {
		log_warnx("proxy: below the limit of %u connections again; %" PRIu64
		          " refused while at it (each is in the log)",
		          px->px_cfg.max_conns, px->px_over_limit);
		px->px_over_limit = 0;
	}
	upstream_cancel(c);
	relay_free(c);
	bind_frame_free(c);
	conn_half_free(&c->up);
	conn_half_free(&c->down);
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
	case 421:
		return "Misdirected Request";
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
void
conn_finish(struct conn *c)
{
	upstream_cancel(c);
	relay_free(c);
	conn_half_free(&c->up);
	conn_enter(c, CONN_REPLY);
	bufferevent_enable(c->down.bev, EV_WRITE);
	conn_half_read(&c->down, true);
	if (evbuffer_get_length(bufferevent_get_output(c->down.bev)) == 0)
		conn_down_write(c->down.bev, c);
}

void
conn_set_why(struct conn *c, enum verdict_reason why, const char *detail)
{
	c->why = why;
	str_copy(c->detail, detail != NULL ? detail : verdict_reason_text(why), sizeof(c->detail));
	safe_text(c->detail);
}

/* A SOCKS5 refusal: the reply its request is owed (RFC 1928 6, the code
 * from the reason), then the close; before the request, just the close. */
static void
conn_socks_refuse(struct conn *c, enum verdict_reason why, unsigned flags, int status)
{
	uint8_t r[SOCKS5_REPLY_MAX];
	enum socks5_rep rep = SOCKS5_REP_FAILURE;

	if ((flags & VR_DENIES) || status == 403 || status == 421)
		rep = SOCKS5_REP_NOT_ALLOWED;
	else if (why == VR_BAD_REQUEST && c->http.socks_rep != 0)
		rep = (enum socks5_rep)c->http.socks_rep;
	else if (status == 502)
		rep = SOCKS5_REP_HOST_UNREACHABLE;
	else if (status == 504)
		rep = SOCKS5_REP_TTL_EXPIRED;
	conn_log(c);
	if (c->socks == CONN_SOCKS_ASKED)
		bufferevent_write(c->down.bev, r, socks5_reply(rep, NULL, r, sizeof(r)));
	conn_finish(c);
}

void
conn_refuse(struct conn *c, enum verdict_reason why, const char *fmt, ...)
{
	char body[512], head[1024];
	const char *token = verdict_reason_token(why);
	unsigned flags = verdict_reason_flags(why);
	int status = verdict_reason_status(why), hl, bl;
	va_list ap;

	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(body, sizeof(body), fmt, ap); /* fmt's args may be c->detail */
		va_end(ap);
	} else {
		str_copy(body, verdict_reason_text(why), sizeof(body));
	}
	/* The refusal is the cause, whatever was said before it. */
	c->why = why;
	str_copy(c->detail, body, sizeof(c->detail));
	safe_text(c->detail);
	if ((flags & VR_DENIES) || !c->decided) {
		c->verdict = VERDICT_DENY;
		c->decided = true;
	}
	/* A rule allowed the name; something else refused it: the rule is
	 * not the reason, so it is not reported as one. */
	if (flags & VR_NORULE)
		c->rule[0] = '\0';
	log_debug("conn %llu: %s %s:%u: %s: %s", (unsigned long long)c->id, verdict_str(c->verdict),
	         c->host[0] != '\0' ? c->host : "-", (unsigned)c->port, token, c->detail);
	if (c->down.bev == NULL) {
		conn_close(c);
		return;
	}
	if (c->kind == CONN_KIND_SOCKS5) {
		conn_socks_refuse(c, why, flags, status);
		return;
	}
	if (c->reply_alert || (c->lkind == PROXY_LISTEN_TRANSPARENT && c->tls)) {
		/* A TLS client gets an alert, never a hang or a plaintext
		 * answer it cannot parse. */
		conn_log(c);
		bufferevent_write(c->down.bev, sni_alert_access_denied,
		                  sizeof(sni_alert_access_denied));
		conn_finish(c);
		return;
	}
	if (status == 0 || (c->lkind == PROXY_LISTEN_TRANSPARENT && c->kind != CONN_KIND_HTTP)) {
		conn_reset(c);
		return;
	}
	bl = snprintf(body, sizeof(body), "airlock: %s %s port %u: %s\n",
	              status == 403 || status == 421 ? "denied" : "cannot reach",
	              c->host[0] != '\0' ? c->host : "?", (unsigned)c->port, c->detail);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		bl = (int)strlen(body);
	hl = snprintf(head, sizeof(head),
	              "HTTP/1.1 %d %s\r\n"
	              "Content-Type: text/plain; charset=utf-8\r\n"
	              "Content-Length: %d\r\n"
	              "Proxy-Status: airlock; error=%s; details=\"%s: %s\"\r\n"
	              "Connection: close\r\n\r\n",
	              status, status_text(status), bl, verdict_reason_error(why), token, c->detail);
	if (hl < 0 || (size_t)hl >= sizeof(head))
		hl = (int)strlen(head);
	conn_log(c);
	bufferevent_write(c->down.bev, head, (size_t)hl);
	bufferevent_write(c->down.bev, body, (size_t)bl);
	conn_finish(c);
}

void
conn_refuse_resource(struct conn *c, const char *what)
{
	/* proxy_internal_error: RFC 9209 has no finer token for a limit of
	 * the proxy's own; the details and the log's detail name it. */
	conn_refuse(c, VR_RESOURCE, "resource limit: %s", what);
}

void
conn_tunnel_done(struct conn *c, enum verdict_reason why, const char *detail)
{
	if (c->why == VR_NONE)
		conn_set_why(c, why, detail);
	conn_close(c);
}

void
conn_abort(struct conn *c, enum verdict_reason why, const char *detail)
{
	struct linger lg = {1, 0};

	if (c->why == VR_NONE)
		conn_set_why(c, why, detail);
	log_debug("proxy: conn %llu: %s; resetting both sides", (unsigned long long)c->id,
	          c->detail);
	if (c->down.fd >= 0)
		(void)setsockopt(c->down.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (c->up.fd >= 0)
		(void)setsockopt(c->up.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	conn_close(c);
}

/* ---- decisions ---- */

/* A destination the policy lets through must also be one the log may
 * still take: once the log budget is spent, only destinations it already
 * names (docs/log.md). Returns true to go on, false after refusing (c may
 * be gone). */
static bool
conn_admit(struct conn *c)
{
	char ip[INET6_ADDRSTRLEN];
	const char *dest = c->host;

	if (dest[0] == '\0') {
		conn_addr_str(&c->orig, ip, sizeof(ip));
		dest = ip;
	}
	if (elog_admit(c->px->px_cfg.log, dest, c->port))
		return true;
	conn_refuse(c, VR_LOG_BUDGET, NULL); /* no rule refused it: the rule goes */
	return false;
}

/* How c's name was learned, for the decision. */
static enum verdict_source
conn_source(const struct conn *c)
{
	if (c->lkind == PROXY_LISTEN_EXPLICIT)
		return c->kind == CONN_KIND_CONNECT || c->kind == CONN_KIND_SOCKS5
		               ? VERDICT_SRC_CONNECT
		               : VERDICT_SRC_ABSOLUTE;
	return c->tls ? VERDICT_SRC_SNI : VERDICT_SRC_HOST;
}

/* Copy the decision r of q into c: the verdict, the rule, and the reason
 * with its sentence (the policy may go away before c does). */
static void
conn_take(struct conn *c, const struct verdict_result *r, const struct verdict_query *q)
{
	c->decided = true;
	c->verdict = r->verdict;
	str_copy(c->rule, r->rule != NULL ? r->rule : "", sizeof(c->rule));
	if (r->reason != VR_NONE) {
		c->why = r->reason;
		verdict_message(r, q, c->detail, sizeof(c->detail));
		safe_text(c->detail);
	}
}

/* Policy on c->host (a normalised name or an IP literal) and c->port.
 * Returns true to go on (allowed, or audit mode), false when refused. */
bool
conn_decide_name(struct conn *c)
{
	const struct policy *p = c->px->px_cfg.policy;
	struct verdict_query q = {
	        .src = conn_source(c),
	        .name = c->host,
	        .ip_literal = c->ip_literal,
	        .port = c->port,
	        .ech = c->ech,
	};
	struct verdict_result r;
	union conn_addr a;

	if (c->ip_literal) {
		(void)conn_addr_parse(&a, c->host, c->port); /* checked by the parser */
		q.addr = &a.sa;
	}
	verdict_decide(p, policy_mode(p), &q, &r);
	conn_take(c, &r, &q);
	if (r.verdict == VERDICT_DENY) {
		conn_refuse(c, r.reason, "%s", c->detail);
		return false;
	}
	return conn_admit(c);
}

/* Set c->host from an untrusted name: IP literal, or a normalised DNS
 * name. Returns 0, or -1 with a reason in why. */
int
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

/* Transparent connection without a name: the original address must be
 * allowed by a cidr rule, or have been learned from DNS for an allowed
 * name still within its TTL. */
void
conn_decide_noname(struct conn *c)
{
	const struct policy *p = c->px->px_cfg.policy;
	struct verdict_query q = {.src = VERDICT_SRC_LEARNED, .addr = &c->orig.sa, .port = c->port};
	struct verdict_result r;
	struct timespec ts;

	/* No name: host stays empty unless DNS taught us one (and it
	 * decided: a cidr rule on the address comes first); the log's ip
	 * field carries the address. */
	c->host[0] = '\0';
	if (c->px->px_cfg.cache != NULL) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		q.learned = dns_cache_lookup(c->px->px_cfg.cache, &c->orig.sa, (uint64_t)ts.tv_sec);
	}
	verdict_decide(p, policy_mode(p), &q, &r);
	if (r.by_learned)
		str_copy(c->host, q.learned, sizeof(c->host));
	conn_take(c, &r, &q);
	if (r.verdict == VERDICT_DENY) {
		conn_refuse(c, r.reason, "%s", c->detail);
		return;
	}
	if (!conn_admit(c))
		return;
	c->ip_literal = true;
	conn_start_resolve(c);
}

void
conn_start_resolve(struct conn *c)
{
	/* A new destination: whatever upstream an earlier exchange on this
	 * connection kept alive goes now. Left, it would be overwritten by the
	 * new one still holding c as its callbacks' argument. */
	conn_half_free(&c->up);
	c->has_dst = false;
	c->up_host[0] = '\0';
	c->up_port = 0;
	/* No timer of ours: the broker bounds resolving and each connect
	 * with the connect timeout, and always answers (a broker that goes
	 * away answers every request at once). */
	conn_enter(c, CONN_CONNECT);
	upstream_request(c);
}

/* ---- explicit: request heads ---- */

void
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

	c->kind = CONN_KIND_CONNECT;
	if (http_parse_authority(s + h->target.off, h->target.len, true, 0, &a) != 0) {
		conn_refuse(c, VR_BAD_REQUEST, "CONNECT needs host:port");
		return;
	}
	c->port = a.port;
	if (conn_set_host(c, a.host, a.ip_literal, &why) != 0) {
		conn_refuse(c, VR_BAD_NAME, "bad host name: %s", why);
		return;
	}
	evbuffer_drain(bufferevent_get_input(c->down.bev), h->head_len);
	if (conn_decide_name(c))
		conn_start_resolve(c);
}

/* A SOCKS5 client's next message, as much of it as has come. CONNECT is
 * decided exactly as an HTTP CONNECT is (same policy path, guard, broker
 * dial, tunnel bound to its target); BIND and UDP ASSOCIATE get "command
 * not supported". The header timeout bounds a silent client. */
static void
conn_socks_read(struct conn *c, struct evbuffer *in)
{
	for (;;) {
		size_t len = evbuffer_get_length(in), used = 0;
		const uint8_t *p = evbuffer_pullup(in, (ssize_t)(len < 600 ? len : 600));
		enum socks5_result r;

		if (len == 0)
			return;
		if (elog_failed(c->px->px_cfg.log)) {
			proxy_log_failed(c->px);
			conn_refuse(c, VR_LOG_FAILED, NULL);
			return;
		}
		len = len < 600 ? len : 600;
		if (c->socks == CONN_SOCKS_GREETING) {
			struct socks5_greeting g;
			uint8_t m[2] = {SOCKS5_VERSION, SOCKS5_M_REFUSED};

			if ((r = socks5_greeting_parse(p, len, &g, &used)) == SOCKS5_MORE)
				return;
			if (r == SOCKS5_DONE)
				m[1] = g.none       ? SOCKS5_M_NONE
				       : g.userpass ? SOCKS5_M_USERPASS
				                    : SOCKS5_M_REFUSED;
			if (r == SOCKS5_BAD || m[1] == SOCKS5_M_REFUSED) {
				if (r == SOCKS5_DONE)
					bufferevent_write(c->down.bev, m, sizeof(m));
				conn_refuse(c, VR_BAD_REQUEST,
				            r == SOCKS5_BAD
				                    ? "malformed SOCKS5 greeting"
				                    : "SOCKS5: no method offered that airlock "
				                      "accepts (none, user name)");
				return;
			}
			bufferevent_write(c->down.bev, m, sizeof(m));
			c->socks = m[1] == SOCKS5_M_NONE ? CONN_SOCKS_REQUEST : CONN_SOCKS_AUTH;
		} else if (c->socks == CONN_SOCKS_AUTH) {
			struct socks5_userpass up;
			uint8_t ok[2] = {1, 0};

			if ((r = socks5_userpass_parse(p, len, &up, &used)) == SOCKS5_MORE)
				return;
			if (r == SOCKS5_BAD) {
				ok[1] = 1;
				bufferevent_write(c->down.bev, ok, sizeof(ok));
				conn_refuse(c, VR_BAD_REQUEST,
				            "malformed SOCKS5 user name/password");
				return;
			}
			/* The name is not checked (nor logged yet); the password
			 * is never kept. */
			bufferevent_write(c->down.bev, ok, sizeof(ok));
			c->socks = CONN_SOCKS_REQUEST;
		} else {
			struct socks5_request q;
			enum socks5_rep rep = SOCKS5_REP_FAILURE;
			char ip[INET6_ADDRSTRLEN], url[HTTP_HOST_MAX + 16];
			const char *why = NULL;

			if ((r = socks5_request_parse(p, len, &q, &used, &rep)) == SOCKS5_MORE)
				return;
			c->socks = CONN_SOCKS_ASKED;
			if (r == SOCKS5_BAD) {
				c->http.socks_rep = (uint8_t)rep;
				conn_refuse(c, VR_BAD_REQUEST, "malformed SOCKS5 request");
				return;
			}
			evbuffer_drain(in, used);
			if (q.cmd != SOCKS5_CMD_CONNECT) {
				c->http.socks_rep = SOCKS5_REP_CMD_UNSUPPORTED;
				conn_refuse(c, VR_BAD_REQUEST,
				            "SOCKS5 %s is not supported (CONNECT only)",
				            q.cmd == SOCKS5_CMD_BIND ? "BIND" : "UDP ASSOCIATE");
				return;
			}
			if (!q.is_name) {
				union conn_addr a;

				memcpy(&a, &q.addr, sizeof(a));
				conn_addr_str(&a, ip, sizeof(ip));
			}
			c->port = q.port;
			snprintf(url, sizeof(url),
			         q.is_name || q.addr.ss_family == AF_INET ? "%s:%u" : "[%s]:%u",
			         q.is_name ? q.name : ip, (unsigned)q.port);
			free(c->url);
			c->url = strdup(url);
			/* A name that is an address is one, as in an HTTP CONNECT. */
			if (q.is_name) {
				uint8_t a6[16];

				q.is_name = inet_pton(AF_INET, q.name, a6) != 1 &&
				            inet_pton(AF_INET6, q.name, a6) != 1;
			}
			if (conn_set_host(c, q.is_name || q.name[0] != '\0' ? q.name : ip,
			                  !q.is_name, &why) != 0) {
				conn_refuse(c, VR_BAD_NAME, "bad host name: %s", why);
				return;
			}
			if (conn_decide_name(c))
				conn_start_resolve(c);
			return;
		}
		evbuffer_drain(in, used);
	}
}

/* GET /healthz, exactly (origin-form, the bytes as written): the liveness
 * probe of a gateway's orchestrator (docs/proxy.md). */
static bool
conn_is_healthz(const char *s, const struct http_head *h)
{
	static const char path[] = "/healthz";

	return h->method.len == 3 && memcmp(s + h->method.off, "GET", 3) == 0 &&
	       h->target.len == sizeof(path) - 1 &&
	       memcmp(s + h->target.off, path, sizeof(path) - 1) == 0;
}

/* 200 while the proxy serves, 503 once its log has failed (it then refuses
 * every request); not a request for the network, so not logged. */
static void
conn_healthz(struct conn *c, const struct http_head *h)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\n"
	                         "Content-Type: text/plain; charset=utf-8\r\n"
	                         "Content-Length: 3\r\n"
	                         "Connection: close\r\n\r\nok\n";
	static const char bad[] = "HTTP/1.1 503 Service Unavailable\r\n"
	                          "Content-Type: text/plain; charset=utf-8\r\n"
	                          "Content-Length: 22\r\n"
	                          "Connection: close\r\n\r\nthe egress log failed\n";
	bool failed = elog_failed(c->px->px_cfg.log);

	c->logged = true;
	evbuffer_drain(bufferevent_get_input(c->down.bev), h->head_len);
	bufferevent_write(c->down.bev, failed ? bad : ok,
	                  failed ? sizeof(bad) - 1 : sizeof(ok) - 1);
	conn_finish(c);
}

void
conn_head_read(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in), n = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	static struct http_head h; /* one loop, one thread: no re-entry */
	enum http_result r;
	const char *s;

	if (len == 0)
		return;
	if (c->kind == CONN_KIND_NONE) {
		uint8_t first;

		(void)evbuffer_copyout(in, &first, 1);
		/* bytes arrived: this is now an attempt; 5 is no HTTP method.
		 * A connection that has served HTTP goes on in HTTP. */
		c->kind = first == SOCKS5_VERSION && !c->served_http ? CONN_KIND_SOCKS5
		                                                     : CONN_KIND_HTTP;
	}
	if (c->kind == CONN_KIND_SOCKS5) {
		conn_socks_read(c, in);
		return;
	}
	s = (const char *)evbuffer_pullup(in, (ssize_t)n);
	r = http_parse_request(s, n, &h);
	if (r == HTTP_OK && conn_is_healthz(s, &h)) {
		conn_healthz(c, &h);
		return;
	}
	/* A kept-alive client's next request is not served once the log has
	 * failed: it could not be recorded. */
	if (elog_failed(c->px->px_cfg.log)) {
		proxy_log_failed(c->px);
		conn_refuse(c, VR_LOG_FAILED, NULL);
		return;
	}
	if (r == HTTP_INCOMPLETE)
		return;
	if (r != HTTP_OK) {
		conn_refuse(c, r == HTTP_BAD_SYNTAX ? VR_BAD_REQUEST : VR_HEAD_TOO_LARGE, "%s",
		            http_result_str(r));
		return;
	}
	conn_set_method_url(c, s, &h);
	if (http_span_eq(s, h.method, "CONNECT"))
		conn_connect_request(c, s, &h);
	else
		forward_request(c, s, &h);
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
		sniff_decide(c, false);
		break;
	case CONN_HTTP:
		forward_pump_request(c);
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
	/* Room for more of the response: what waits in the upstream's input
	 * goes first (reading it again alone would wait for bytes that may
	 * never come, the last of them being there already). c may be gone
	 * after this. */
	if (c->state == CONN_HTTP)
		forward_pump_response(c);
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
			sniff_decide(c, true);
			return;
		}
	}
	if (c->why == VR_NONE)
		conn_set_why(c, (what & BEV_EVENT_ERROR) ? VR_CLIENT_ERROR : VR_CLIENT_CLOSED,
		             NULL);
	conn_close(c);
}

static void
conn_up_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	(void)bev;

	conn_touch(c);
	if (c->state == CONN_HTTP) {
		forward_pump_response(c);
	} else if (c->state == CONN_HEAD) {
		/* Bytes nobody asked for between requests: this upstream
		 * cannot be trusted with the next one. */
		conn_half_free(&c->up);
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
		forward_pump_request(c);
}

static void
conn_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	(void)bev;

	if (c->state == CONN_HEAD) {
		/* The kept-alive upstream went away between requests: the next
		 * request to that host simply connects again. */
		conn_half_free(&c->up);
		c->up_host[0] = '\0';
		return;
	}
	if (c->state == CONN_HTTP) {
		forward_upstream_event(c, what);
		return;
	}
	conn_set_why(c, VR_UPSTREAM_CLOSED, NULL);
	conn_close(c);
}

void
conn_connected(struct conn *c)
{
	int one = 1;

	(void)setsockopt(c->up.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	str_copy(c->up_host, c->host, sizeof(c->up_host));
	c->up_port = c->port;
	/* The callbacks come with the state entered next: CONN_HTTP's
	 * (forward_start) or the tunnel's (relay_start). */
	if (c->lkind == PROXY_LISTEN_EXPLICIT && c->kind == CONN_KIND_HTTP) {
		forward_start(c);
		return;
	}
	if (c->kind == CONN_KIND_SOCKS5) {
		uint8_t r[SOCKS5_REPLY_MAX];

		bufferevent_write(c->down.bev, r, socks5_reply(SOCKS5_REP_OK, NULL, r, sizeof(r)));
		/* What the client says first in the tunnel must name c->host,
		 * as in a CONNECT tunnel (bind.c). */
		c->bind_watch = true;
	} else if (c->lkind == PROXY_LISTEN_EXPLICIT) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		ssize_t n = 0;

		/* Straight to the socket, which nearly always has room: the
		 * tunnel then goes to splice now instead of after a round
		 * through the loop for writability. A short or failed send
		 * leaves the rest (and the error) to the bufferevent. */
		if (evbuffer_get_length(bufferevent_get_output(c->down.bev)) == 0)
			n = send(c->down.fd, ok, sizeof(ok) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0)
			n = 0;
		if ((size_t)n < sizeof(ok) - 1)
			bufferevent_write(c->down.bev, ok + n, sizeof(ok) - 1 - (size_t)n);
		/* What the client says first in the tunnel must name c->host. */
		c->bind_watch = true;
	} else if (!c->has_name && !c->tls) {
		/* Decided without a name (a cidr rule, a DNS-learned address):
		 * a ClientHello or head that comes later is still read. */
		c->bind_watch = true;
	} else if (c->tls) {
		/* Every ClientHello on it must carry the SNI decided; after
		 * one without, a named one is decided as if it came first. */
		c->bind_watch = c->bind_tls = true;
		c->bind_unnamed = !c->has_name;
	} else if (bind_frame_start(c) != 0) {
		/* HTTP/1 with a name: every request on it must carry it. */
		conn_tunnel_done(c, VR_RESOURCE, "out of memory");
		return;
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
		if (evbuffer_get_length(bufferevent_get_input(c->down.bev)) == 0 &&
		    c->kind != CONN_KIND_SOCKS5) {
			/* An idle keep-alive connection: close quietly (a SOCKS5
			 * client silent after its greeting is refused, logged). */
			conn_close(c);
			return;
		}
		conn_refuse(c, VR_HEAD_TIMEOUT, "request head not complete within %u ms",
		            (unsigned)c->px->px_cfg.header_timeout_ms);
		return;
	case CONN_SNIFF:
		if (now - c->start_ms < c->px->px_cfg.header_timeout_ms &&
		    evbuffer_get_length(bufferevent_get_input(c->down.bev)) > 0) {
			/* Bytes came but not enough: wait out the header time. */
			conn_timer_in(c, c->px->px_cfg.header_timeout_ms - (now - c->start_ms));
			return;
		}
		sniff_decide(c, true);
		return;
	case CONN_HTTP:
		forward_timer(c, now);
		return;
	case CONN_TUNNEL: {
		uint64_t next;

		if (now - c->last_ms >= idle) {
			conn_set_why(c, VR_IDLE_TIMEOUT, NULL);
			conn_close(c);
			return;
		}
		next = idle - (now - c->last_ms);
		if (c->bind_watch && bind_tunnel_timer(c, now, &next) != 0)
			return;
		conn_timer_in(c, next);
		return;
	}
	case CONN_REPLY:
		conn_close(c);
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
	conn_addr_unmap(out);
	return 0;
}

/* The client's address for the log (log_client), "ip:port" or
 * "[ip]:port"; "" when it is not to be logged or not known. */
static void
client_str(const struct proxy *px, const struct sockaddr *sa, socklen_t salen, char *out,
           size_t size)
{
	union conn_addr a;
	char ip[INET6_ADDRSTRLEN];

	out[0] = '\0';
	if (!px->px_cfg.log_client || sa == NULL ||
	    (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) || salen > sizeof(a))
		return;
	memset(&a, 0, sizeof(a));
	memcpy(&a, sa, salen);
	conn_addr_unmap(&a); /* a dual-stack listener's IPv4 client as IPv4 */
	conn_addr_str(&a, ip, sizeof(ip));
	snprintf(out, size, a.sa.sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
	         (unsigned)ntohs(a.sa.sa_family == AF_INET6 ? a.in6.sin6_port : a.in.sin_port));
}

/* Refuse before a connection object exists (limits, log failure). An
 * explicit client gets a 503; what it already sent is read and dropped
 * before the close, which would otherwise be a reset that can destroy the
 * reply on its way. A transparent one gets a reset. */
static void
conn_refuse_early(struct proxy *px, int fd, const char *client, enum proxy_listener_kind kind,
                  enum verdict_reason why)
{
#define CONN_BUSY_BODY "airlock: too many connections; retry.\n"
	static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
	                           "Content-Type: text/plain; charset=utf-8\r\n"
	                           "Proxy-Status: airlock; error=connection_limit_reached\r\n"
	                           "Content-Length: %zu\r\nConnection: close\r\n\r\n"
	                           "%s";
	char reply[sizeof(busy) + sizeof(CONN_BUSY_BODY) + 16];
	char sink[4096];
	struct linger lg = {1, 0};
	struct elog_event ev;
	int n;

	if (kind == PROXY_LISTEN_EXPLICIT) {
		n = snprintf(reply, sizeof(reply), busy, sizeof(CONN_BUSY_BODY) - 1,
		             CONN_BUSY_BODY);
		if (n > 0 && (size_t)n < sizeof(reply))
			(void)send(fd, reply, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)shutdown(fd, SHUT_WR);
		/* Bounded: what is already there, up to a request head's
		 * worth (HTTP_MAX_HEAD); anything later meets a closed
		 * socket after the reply has gone. */
		for (int i = 0; i < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
			;
	} else {
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
#undef CONN_BUSY_BODY
	close(fd);
	if (elog_failed(px->px_cfg.log))
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind == PROXY_LISTEN_EXPLICIT ? "connect" : "tcp";
	ev.port = -1;
	ev.verdict = "deny";
	ev.reason = verdict_reason_token(why);
	ev.detail = verdict_reason_text(why);
	ev.client = client[0] != '\0' ? client : NULL;
	if (elog_event_agg(px->px_cfg.log, &ev) != 0)
		proxy_log_failed(px);
}

void
conn_accept(struct proxy *px, int fd, const struct sockaddr *sa, socklen_t salen,
            enum proxy_listener_kind kind)
{
	struct bufferevent *bev;
	struct conn *c;
	char client[INET6_ADDRSTRLEN + 8];
	int one = 1;

	client_str(px, sa, salen, client, sizeof(client));

	if (elog_failed(px->px_cfg.log)) {
		proxy_log_failed(px);
		conn_refuse_early(px, fd, client, kind, VR_LOG_FAILED);
		return;
	}
	if (px->px_n_conns >= px->px_cfg.max_conns) {
		/* Once per stretch at the limit, not once per refusal: a
		 * burst must not flood the terminal (each has its log line). */
		if (px->px_over_limit++ == 0)
			log_warnx("proxy: %u connections open (the limit); refusing new ones until "
			          "some close",
			          px->px_n_conns);
		conn_refuse_early(px, fd, client, kind, VR_TOO_MANY_CONNS);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		/* Refused, but still one line: every attempt is recorded. */
		log_warn("proxy: allocating a connection");
		conn_refuse_early(px, fd, client, kind, VR_RESOURCE);
		return;
	}
	c->px = px;
	c->id = ++px->px_next_id;
	c->lkind = kind;
	memcpy(c->client, client, sizeof(c->client));
	c->down.c = c->up.c = c;
	c->down.peer = &c->up;
	c->up.peer = &c->down;
	c->down.fd = fd;
	c->up.fd = -1;
	c->start_ms = c->last_ms = now_ms();
	c->state = kind == PROXY_LISTEN_EXPLICIT ? CONN_HEAD : CONN_SNIFF;
	TAILQ_INSERT_TAIL(&px->px_conns, c, entry);
	px->px_n_conns++;
	if (px->px_nodelay_each)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	c->timer = evtimer_new(px->px_base, conn_timer, c);
	bev = bufferevent_socket_new(px->px_base, fd, 0);
	if (bev != NULL)
		conn_half_set_bev(&c->down, bev);
	if (c->timer == NULL || c->down.bev == NULL) {
		log_warnx("proxy: cannot set up a connection");
		c->kind = CONN_KIND_TCP;
		conn_close(c);
		return;
	}
	if (kind == PROXY_LISTEN_TRANSPARENT) {
		if (conn_original_dst(fd, &c->orig) != 0) {
			c->kind = CONN_KIND_TCP;
			conn_set_why(c, VR_NO_ORIG_DST, NULL);
			log_warn("proxy: SO_ORIGINAL_DST");
			conn_reset(c);
			return;
		}
		c->has_orig = true;
		c->port = ntohs(c->orig.sa.sa_family == AF_INET6 ? c->orig.in6.sin6_port
		                                                 : c->orig.in.sin_port);
	}
	conn_enter(c, c->state); /* its callbacks, read mark and first timer */
	if (!fdres_refill(px->px_fds)) {
		/* The descriptor just accepted was the last one free: none is
		 * left for this connection's upstream (the reserve is not for
		 * it). Said as what it is, and accepting pauses. */
		c->kind = kind == PROXY_LISTEN_EXPLICIT ? CONN_KIND_CONNECT : CONN_KIND_TCP;
		proxy_fd_starved(px);
		conn_refuse_resource(c, "out of file descriptors");
		return;
	}
	px->px_fd_starved = false;
	/* Writing is enabled where something is written (a refusal, a
	 * response, the relay): enabled here with nothing queued, it would
	 * cost a wake-up and two epoll changes per connection. */
	conn_half_read(&c->down, true);
}
