/* The DNS listener's event-driven shell around dns/answer.c: UDP and TCP
 * listeners for the sandbox, the questions handed to the one resolver
 * (dns/resolver.h: its cache, CNAME policy, hosts file and upstream
 * client), in the worker through the broker (broker/client.h), which
 * decides again and records what it answers; the addresses answered
 * recorded in this side's IP -> name cache too (for PTR answers and the
 * proxy's hint), and one egress log line per query. Single-threaded on
 * the worker's event base. */
#include "dns/dns.h"

#include "common/fdres.h"
#include "common/log.h"
#include "common/membudget.h"
#include "common/util.h"
#include "dns/answer.h"
#include "dns/cache.h"
#include "dns/msg.h"
#include "dns/resolver.h"
#include "elog/elog.h"
#include "policy/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DNS_MAX_LISTENERS   4
#define DNS_MAX_TCP_CONNS   64
#define DNS_TCP_MAX_PENDING 16 /* queries in flight per connection */
/* A TCP client is closed this long after its last complete query (or
 * its connection, before any): bytes that trickle in do not count. */
#define DNS_TCP_IDLE_MS     10000
#define DNS_TCP_OUT_MAX     (256 * 1024) /* stop reading above this backlog */
#define DNS_UDP_BATCH       64           /* datagrams read per readiness event */
#define DNS_ACCEPT_PAUSE_MS 200          /* pause after EMFILE */

struct dns_tcp;

/* Where a reply goes: a UDP peer, or a TCP connection (NULL once it has
 * gone away; the query still finishes and is logged). */
struct dns_client {
	int udp_fd; /* borrowed from the listener */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct dns_tcp *tcp;
};

/* A forwarded query waiting for the resolver. */
struct dns_pending {
	struct dns_server *p_srv;
	struct dns_query p_q;
	struct dns_decision p_d;
	struct dns_client p_client;
	struct dns_pending *p_tnext, *p_tprev; /* on p_client.tcp's list */
	struct dns_pending *p_next, *p_prev;   /* on the server's list */
	uint64_t p_start_ms;
	uint64_t p_h; /* the asker's handle */
	bool p_out;   /* not answered yet: p_h is live */
};

/* A TCP connection from the sandbox. */
struct dns_tcp {
	struct dns_server *t_srv;
	struct bufferevent *t_bev;
	struct membudget_share t_q;    /* what t_bev's buffers hold */
	struct event *t_idle;          /* DNS_TCP_IDLE_MS after t_last_ms */
	uint64_t t_last_ms;            /* the last complete query, or the accept */
	struct dns_pending *t_pending; /* list head */
	unsigned t_n_pending;
	bool t_eof;
	struct dns_tcp *t_next, *t_prev;
};

struct dns_udp_listener {
	int fd;
	struct event *ev;
};

/* Datagrams per recvmmsg/sendmmsg call. */
#define DNS_BATCH 32
/* A UDP query longer than this is malformed (one question and an OPT). */
#define DNS_UDP_QUERY_MAX 4096

struct dns_send_batch {
	int fd;
	unsigned n;
	struct mmsghdr msgs[DNS_BATCH];
	struct iovec iov[DNS_BATCH];
	struct sockaddr_storage addr[DNS_BATCH];
	uint8_t buf[DNS_BATCH][DNS_UDP_MAX];
};

struct dns_recv_batch {
	struct mmsghdr msgs[DNS_BATCH];
	struct iovec iov[DNS_BATCH];
	struct sockaddr_storage addr[DNS_BATCH];
	uint8_t buf[DNS_BATCH][DNS_UDP_QUERY_MAX];
};

struct dns_server {
	struct event_base *base;
	struct dns_server_config cfg;
	struct dns_udp_listener udp[DNS_MAX_LISTENERS];
	size_t n_udp;
	struct evconnlistener *tcpl[DNS_MAX_LISTENERS];
	size_t n_tcpl;
	struct event *accept_timer;
	struct dns_asker ask;      /* cfg.asker's copy, or over res */
	struct resolver *res;      /* without an asker: cfg.resolver, or res_own */
	struct resolver *res_own;  /* made from cfg's upstreams when none given */
	struct dns_pending *pends; /* every query waiting for the resolver */
	size_t n_pends;            /* at most DNS_MAX_PENDING */
	/* What the pendings hold, charged to cfg.queue: a flood of queries
	 * weighs on the same budget as the proxy's buffers. */
	struct membudget_share pends_q;
	struct dns_tcp *tcps;
	size_t n_tcps;
	uint64_t n_malformed;
	/* Scratch space for one message at a time (single-threaded). */
	uint8_t qbuf[DNS_MSG_MAX + 2]; /* queries from the sandbox */
	uint8_t out[DNS_MSG_MAX + 2];  /* what we send */
	struct dns_filtered filt;
	bool batching; /* replies go into batch until the callback ends */
	struct dns_send_batch batch;
	struct dns_recv_batch rbatch;
};

static void pending_free(struct dns_pending *p);
static void tcp_close(struct dns_tcp *t);
static void tcp_maybe_resume(struct dns_tcp *t);

/* ---- logging ---- */

/* snprintf for texts that are cut on purpose (EDE text, reasons). */
static void textf(char *buf, size_t len, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
textf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static void
log_query(struct dns_server *srv, const struct dns_query *q, const struct dns_decision *d,
          unsigned rcode, enum verdict_reason why, const char *detail, const char *const *answers,
          size_t n_answers, uint64_t start_ms)
{
	struct elog_event ev = {0};
	char tbuf[16];

	if (srv->cfg.log == NULL)
		return;
	ev.kind = "dns";
	ev.host = d->name;
	ev.port = -1;
	ev.verdict = verdict_str(d->verdict);
	ev.rule = d->rule;
	if (why != VR_NONE) {
		ev.reason = verdict_reason_token(why);
		ev.detail = detail != NULL ? detail : verdict_reason_text(why);
	}
	ev.qtype = dns_type_str(q->qtype, tbuf, sizeof(tbuf));
	ev.rcode = dns_rcode_str(rcode);
	ev.answers = answers;
	ev.n_answers = n_answers;
	ev.duration_ms = now_ms() - start_ms;
	/* The same query by the thousand is counted after the first. */
	if (elog_event_agg(srv->cfg.log, &ev) != 0)
		log_warnx("dns: egress log write failed; refusing further queries");
}

/* ---- sending replies ---- */

/* Send the UDP replies gathered so far with one sendmmsg(2). */
static void
batch_flush(struct dns_server *srv)
{
	struct dns_send_batch *b = &srv->batch;
	unsigned done = 0;

	while (done < b->n) {
		int r = sendmmsg(b->fd, b->msgs + done, b->n - done, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r <= 0) {
			/* A full socket buffer drops the rest; clients retry
			 * as with any lost datagram. */
			if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
				log_debug("dns: replies to clients: %s", strerror(errno));
			break;
		}
		done += (unsigned)r;
	}
	b->n = 0;
}

static void
client_send(struct dns_server *srv, struct dns_client *c, const uint8_t *msg, size_t len)
{
	struct dns_send_batch *b = &srv->batch;

	if (len == 0)
		return;
	if (c->tcp != NULL) {
		uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
		struct evbuffer *out = bufferevent_get_output(c->tcp->t_bev);

		evbuffer_add(out, hdr, 2);
		evbuffer_add(out, msg, len);
		return;
	}
	if (c->udp_fd < 0)
		return;
	if (!srv->batching || len > DNS_UDP_MAX) {
		if (sendto(c->udp_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL,
		           (struct sockaddr *)&c->addr, c->addrlen) < 0 &&
		    errno != EAGAIN && errno != EWOULDBLOCK)
			log_debug("dns: reply to client: %s", strerror(errno));
		return;
	}
	/* Inside a read callback: gather replies and send them together
	 * when the callback ends (fewer syscalls and wake-ups under load). */
	if (b->n > 0 && b->fd != c->udp_fd)
		batch_flush(srv);
	b->fd = c->udp_fd;
	memcpy(b->buf[b->n], msg, len);
	memcpy(&b->addr[b->n], &c->addr, c->addrlen);
	b->iov[b->n].iov_base = b->buf[b->n];
	b->iov[b->n].iov_len = len;
	memset(&b->msgs[b->n], 0, sizeof(b->msgs[b->n]));
	b->msgs[b->n].msg_hdr.msg_name = &b->addr[b->n];
	b->msgs[b->n].msg_hdr.msg_namelen = c->addrlen;
	b->msgs[b->n].msg_hdr.msg_iov = &b->iov[b->n];
	b->msgs[b->n].msg_hdr.msg_iovlen = 1;
	if (++b->n == DNS_BATCH)
		batch_flush(srv);
}

static size_t
client_limit(const struct dns_client *c, const struct dns_query *q)
{
	return c->tcp != NULL ? DNS_MSG_MAX : dns_udp_limit(q);
}

/* A reply with no records; ede < 0 for none. */
static void
reply_empty(struct dns_server *srv, struct dns_client *c, const struct dns_query *q, unsigned rcode,
            int ede, const char *ede_text)
{
	size_t n = dns_reply(q, NULL, rcode, ede, ede_text, client_limit(c, q), srv->out,
	                     sizeof(srv->out));

	client_send(srv, c, srv->out, n);
}

/* Send filtered records f to c, record the addresses in the IP -> name
 * cache and log. why is the full reason ("" if none); a non-empty reason
 * on an answer means something was withheld, said with an EDE. */
static void
answer_send(struct dns_server *srv, struct dns_client *c, const struct dns_query *q,
            const struct dns_decision *d, const struct dns_filtered *f, const char *why,
            uint64_t start_ms)
{
	const char *answers[DNS_MAX_RR];
	char abuf[DNS_MAX_RR][INET6_ADDRSTRLEN];
	char ede_text[DNS_EDE_TEXT_MAX + 1];
	size_t n_answers = 0, n;
	uint64_t now_s = now_ms() / 1000;
	int ede = -1;

	if (why[0] != '\0') {
		ede = f->rcode == DNS_RCODE_SERVFAIL ? DNS_EDE_OTHER : DNS_EDE_BLOCKED;
		textf(ede_text, sizeof(ede_text), "airlock: %s", why);
	}
	for (size_t i = 0; i < f->n; i++) {
		const struct dns_rr *rr = &f->rr[i];
		struct sockaddr_storage ss;

		if (dns_rr_addr(rr, &ss) != 0)
			continue;
		inet_ntop(ss.ss_family, rr->addr, abuf[n_answers], sizeof(abuf[0]));
		answers[n_answers] = abuf[n_answers];
		n_answers++;
		/* Keyed to the name the sandbox asked for (not a CNAME
		 * target): that is the name the proxy must check. The
		 * broker, which answered, keeps its own record (the one it
		 * decides by); this copy is a hint and the PTR answers'. */
		if (srv->cfg.cache != NULL)
			dns_cache_put(srv->cfg.cache, (struct sockaddr *)&ss, d->name,
			              rr->ttl < DNS_CACHE_MIN_TTL ? DNS_CACHE_MIN_TTL : rr->ttl,
			              now_s);
	}
	n = dns_reply(q, f, f->rcode, ede, ede >= 0 ? ede_text : NULL, client_limit(c, q), srv->out,
	              sizeof(srv->out));
	client_send(srv, c, srv->out, n);
	log_query(srv, q, d, f->rcode, why[0] != '\0' ? f->why : VR_NONE, why, answers, n_answers,
	          start_ms);
}

/* The resolver's result for a query: reply, cache, log. */
static void
query_result(struct dns_server *srv, struct dns_client *c, const struct dns_query *q,
             const struct dns_decision *d, const struct resolver_result *res, uint64_t start_ms)
{
	char ede_text[DNS_EDE_TEXT_MAX + 1];

	if (res->status == RESOLVER_ANSWER) {
		answer_send(srv, c, q, d, res->f, res->why, start_ms);
		return;
	}
	textf(ede_text, sizeof(ede_text), "airlock: %s", res->why);
	reply_empty(srv, c, q, DNS_RCODE_SERVFAIL, DNS_EDE_NO_REACHABLE_AUTHORITY, ede_text);
	log_query(srv, q, d, DNS_RCODE_SERVFAIL,
	          res->status == RESOLVER_TIMEOUT       ? VR_DNS_TIMEOUT
	          : res->fail_reason != VR_NONE ? res->fail_reason
	                                        : VR_DNS_UPSTREAM,
	          res->why, NULL, 0, start_ms);
}

static void
pending_answered(const struct resolver_result *res, void *arg)
{
	struct dns_pending *p = arg;

	p->p_out = false;
	query_result(p->p_srv, &p->p_client, &p->p_q, &p->p_d, res, p->p_start_ms);
	pending_free(p);
}

/* The resolver's upstream socket (or the broker's) has a burst of
 * answers: gather the UDP replies and send them together. */
static void
resolver_burst(void *arg, bool begin)
{
	struct dns_server *srv = arg;

	if (begin) {
		srv->batching = true;
		return;
	}
	batch_flush(srv);
	srv->batching = false;
}

/* ---- queries ---- */

static void
ptr_answer(struct dns_server *srv, struct dns_client *c, const struct dns_query *q,
           struct dns_decision *d, uint64_t start_ms)
{
	const char *name = NULL;

	if (srv->cfg.cache != NULL)
		name = dns_cache_lookup(srv->cfg.cache, (struct sockaddr *)&d->ptr_addr,
		                        now_ms() / 1000);
	if (name != NULL) {
		const char *answers[1] = {name};
		struct dns_filtered *f = &srv->filt;
		size_t n;

		memset(f, 0, offsetof(struct dns_filtered, rr));
		f->rcode = DNS_RCODE_NOERROR;
		f->n = 1;
		str_copy(f->rr[0].name, q->qname, sizeof(f->rr[0].name));
		f->rr[0].type = DNS_TYPE_PTR;
		f->rr[0].rclass = DNS_CLASS_IN;
		f->rr[0].ttl = DNS_CACHE_MIN_TTL;
		str_copy(f->rr[0].target, name, sizeof(f->rr[0].target));
		n = dns_reply(q, f, 0, -1, NULL, client_limit(c, q), srv->out, sizeof(srv->out));
		client_send(srv, c, srv->out, n);
		log_query(srv, q, d, DNS_RCODE_NOERROR, VR_DNS_PTR, NULL, answers, 1, start_ms);
		return;
	}
	d->verdict = VERDICT_DENY;
	reply_empty(srv, c, q, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED,
	            "airlock: no allowed name is known for this address");
	log_query(srv, q, d, DNS_RCODE_NXDOMAIN, VR_DNS_REVERSE,
	          "reverse lookup of an unknown address", NULL, 0, start_ms);
}

static void
query_forward(struct dns_server *srv, struct dns_client *c, const struct dns_query *q,
              const struct dns_decision *d, uint64_t start_ms)
{
	struct dns_pending *p;
	struct resolver_result now;

	/* Each query waiting costs a pending here and a waiter in the
	 * resolver for up to its budget: bounded in number and in the
	 * shared queue budget, the rest refused now (logged, aggregated). */
	if (srv->n_pends >= DNS_MAX_PENDING || membudget_over(srv->cfg.queue)) {
		reply_empty(srv, c, q, DNS_RCODE_SERVFAIL, DNS_EDE_OTHER,
		            "airlock: too many queries in flight");
		log_query(srv, q, d, DNS_RCODE_SERVFAIL, VR_RESOURCE, "too many queries in flight",
		          NULL, 0, start_ms);
		return;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		reply_empty(srv, c, q, DNS_RCODE_SERVFAIL, -1, NULL);
		log_query(srv, q, d, DNS_RCODE_SERVFAIL, VR_RESOURCE, "out of memory", NULL, 0,
		          start_ms);
		return;
	}
	if (srv->ask.ask(srv->ask.arg, q, d->name, pending_answered, p, &now, &p->p_h) != 0) {
		/* Known at once: the cache, the hosts file, or a failure. */
		free(p);
		query_result(srv, c, q, d, &now, start_ms);
		return;
	}
	p->p_out = true;
	p->p_srv = srv;
	p->p_q = *q;
	p->p_d = *d;
	p->p_client = *c;
	p->p_start_ms = start_ms;
	p->p_next = srv->pends;
	if (p->p_next != NULL)
		p->p_next->p_prev = p;
	srv->pends = p;
	srv->n_pends++;
	membudget_share_add(&srv->pends_q, sizeof(*p));
	if (c->tcp != NULL) {
		p->p_tnext = c->tcp->t_pending;
		if (p->p_tnext != NULL)
			p->p_tnext->p_tprev = p;
		c->tcp->t_pending = p;
		c->tcp->t_n_pending++;
	}
}

static void
handle_query(struct dns_server *srv, struct dns_client *c, const uint8_t *msg, size_t len)
{
	struct dns_query q;
	struct dns_decision d;
	enum dns_err e;
	uint64_t start = now_ms();
	char text[DNS_EDE_TEXT_MAX + 1];

	e = dns_query_parse(msg, len, &q);
	if (e == DNS_ERR_OPCODE) {
		/* Well-formed enough to say no. */
		uint8_t r[DNS_HEADER_LEN] = {msg[0], msg[1], (uint8_t)(0x80 | (msg[2] & 0x79)),
		                             DNS_RCODE_NOTIMP};

		client_send(srv, c, r, sizeof(r));
		return;
	}
	if (e != DNS_OK) {
		srv->n_malformed++;
		log_debug("dns: dropped malformed query (%s); %llu so far", dns_err_str(e),
		          (unsigned long long)srv->n_malformed);
		return;
	}
	if (q.has_opt && q.edns_version != 0) {
		reply_empty(srv, c, &q, DNS_RCODE_BADVERS, -1, NULL);
		return;
	}
	/* Fail closed: a query we cannot log is not answered. */
	if (srv->cfg.log != NULL && elog_failed(srv->cfg.log)) {
		reply_empty(srv, c, &q, DNS_RCODE_REFUSED, DNS_EDE_PROHIBITED,
		            "airlock: egress log unavailable");
		return;
	}
	dns_decide(srv->cfg.policy, &q, &d);
	/* Once the log budget is spent, only names the log already has. */
	if (d.action != DNS_ACT_DENY && srv->cfg.log != NULL &&
	    !elog_admit(srv->cfg.log, d.name, -1)) {
		d.verdict = VERDICT_DENY;
		d.rule = NULL;
		textf(text, sizeof(text), "airlock: %s", verdict_reason_text(VR_LOG_BUDGET));
		reply_empty(srv, c, &q, DNS_RCODE_REFUSED, DNS_EDE_PROHIBITED, text);
		log_query(srv, &q, &d, DNS_RCODE_REFUSED, VR_LOG_BUDGET, NULL, NULL, 0, start);
		return;
	}
	switch (d.action) {
	case DNS_ACT_DENY:
		if (d.rule != NULL)
			textf(text, sizeof(text), "airlock: %s denied by policy '%s' (%s)", d.name,
			      policy_name(srv->cfg.policy), d.rule);
		else
			textf(text, sizeof(text), "airlock: %s (policy '%s')", d.detail,
			      policy_name(srv->cfg.policy));
		reply_empty(srv, c, &q, d.rcode, DNS_EDE_BLOCKED, text);
		log_query(srv, &q, &d, d.rcode, d.why, d.detail, NULL, 0, start);
		return;
	case DNS_ACT_LOCAL:
		/* Say why the answer is empty, for whoever debugs it. */
		textf(text, sizeof(text), "airlock: %s", d.detail);
		reply_empty(srv, c, &q, d.rcode, DNS_EDE_BLOCKED, text);
		log_query(srv, &q, &d, d.rcode, d.why, d.detail, NULL, 0, start);
		return;
	case DNS_ACT_PTR:
		ptr_answer(srv, c, &q, &d, start);
		return;
	case DNS_ACT_FORWARD:
		query_forward(srv, c, &q, &d, start);
		return;
	}
}

static void
udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct dns_server *srv = arg;
	struct dns_recv_batch *rb = &srv->rbatch;

	(void)what;
	srv->batching = true;
	for (int round = 0; round < DNS_UDP_BATCH / DNS_BATCH; round++) {
		int n;

		for (unsigned i = 0; i < DNS_BATCH; i++) {
			rb->iov[i].iov_base = rb->buf[i];
			rb->iov[i].iov_len = sizeof(rb->buf[i]);
			memset(&rb->msgs[i], 0, sizeof(rb->msgs[i]));
			rb->msgs[i].msg_hdr.msg_name = &rb->addr[i];
			rb->msgs[i].msg_hdr.msg_namelen = sizeof(rb->addr[i]);
			rb->msgs[i].msg_hdr.msg_iov = &rb->iov[i];
			rb->msgs[i].msg_hdr.msg_iovlen = 1;
		}
		n = recvmmsg(fd, rb->msgs, DNS_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			struct dns_client c = {.udp_fd = fd, .tcp = NULL};

			if (rb->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
				srv->n_malformed++;
				continue;
			}
			memcpy(&c.addr, &rb->addr[i], sizeof(c.addr));
			c.addrlen = rb->msgs[i].msg_hdr.msg_namelen;
			handle_query(srv, &c, rb->buf[i], rb->msgs[i].msg_len);
		}
		if (n < DNS_BATCH)
			break;
	}
	batch_flush(srv);
	srv->batching = false;
}

/* ---- TCP from the sandbox ---- */

static void
tcp_idle_arm(struct dns_tcp *t)
{
	uint64_t now = now_ms(), since = now - t->t_last_ms;
	uint64_t left = since < DNS_TCP_IDLE_MS ? DNS_TCP_IDLE_MS - since : 0;
	struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};

	evtimer_add(t->t_idle, &tv);
}

/* No complete query for DNS_TCP_IDLE_MS: closed, whatever bytes came
 * meanwhile. One with a query in flight waits for its answer (the query
 * budget bounds that) and the idle time starts again. The timer is set
 * once per idle time, not at every query: when it fires early, it is set
 * again for what is left. */
static void
tcp_idle(evutil_socket_t fd, short what, void *arg)
{
	struct dns_tcp *t = arg;

	(void)fd;
	(void)what;
	if (t->t_n_pending > 0)
		t->t_last_ms = now_ms();
	if (now_ms() - t->t_last_ms < DNS_TCP_IDLE_MS) {
		tcp_idle_arm(t);
		return;
	}
	tcp_close(t);
}

static void
tcp_read(struct bufferevent *bev, void *arg)
{
	struct dns_tcp *t = arg;
	struct dns_server *srv = t->t_srv;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (t->t_n_pending < DNS_TCP_MAX_PENDING &&
	       evbuffer_get_length(bufferevent_get_output(bev)) < DNS_TCP_OUT_MAX &&
	       !membudget_over(srv->cfg.queue)) {
		struct dns_client c = {.udp_fd = -1, .tcp = t};
		size_t len;

		if (!dns_tcp_take(in, srv->qbuf, &len))
			return;
		t->t_last_ms = now_ms();
		handle_query(srv, &c, srv->qbuf, len);
	}
	/* Backpressure: resume when queries finish, output drains or the
	 * queue budget is under its cap again. */
	bufferevent_disable(bev, EV_READ);
}

static void
tcp_write(struct bufferevent *bev, void *arg)
{
	struct dns_tcp *t = arg;

	(void)bev;
	if (t->t_eof && t->t_n_pending == 0) {
		tcp_close(t);
		return;
	}
	tcp_maybe_resume(t);
}

static void
tcp_event(struct bufferevent *bev, short what, void *arg)
{
	struct dns_tcp *t = arg;

	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		/* Half-close: answer what was asked, then close. */
		t->t_eof = true;
		bufferevent_disable(bev, EV_READ);
		if (t->t_n_pending == 0 && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			tcp_close(t);
		return;
	}
	tcp_close(t); /* error */
}

static void
tcp_maybe_resume(struct dns_tcp *t)
{
	if (t->t_eof)
		return;
	if (t->t_n_pending < DNS_TCP_MAX_PENDING &&
	    evbuffer_get_length(bufferevent_get_output(t->t_bev)) < DNS_TCP_OUT_MAX &&
	    !membudget_over(t->t_srv->cfg.queue) &&
	    !(bufferevent_get_enabled(t->t_bev) & EV_READ)) {
		bufferevent_enable(t->t_bev, EV_READ);
		/* Queries may already be buffered; run the read callback from
		 * the loop, never nested inside one. */
		if (evbuffer_get_length(bufferevent_get_input(t->t_bev)) >= 2)
			bufferevent_trigger(t->t_bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
	}
}

static void
tcp_close(struct dns_tcp *t)
{
	struct dns_server *srv = t->t_srv;

	for (struct dns_pending *p = t->t_pending; p != NULL; p = p->p_tnext)
		p->p_client.tcp = NULL;
	if (t->t_prev != NULL)
		t->t_prev->t_next = t->t_next;
	else
		srv->tcps = t->t_next;
	if (t->t_next != NULL)
		t->t_next->t_prev = t->t_prev;
	srv->n_tcps--;
	if (t->t_idle != NULL)
		event_free(t->t_idle);
	/* Before the free: the budget's callbacks must not outlive it. */
	membudget_share_release(&t->t_q);
	if (t->t_bev != NULL)
		bufferevent_free(t->t_bev);
	free(t);
	fdres_refill(srv->cfg.fds);
}

/* The queue budget is over / under its cap again (membudget.h). */
static void
tcp_queue_pause(void *arg)
{
	struct dns_server *srv = arg;

	for (struct dns_tcp *t = srv->tcps; t != NULL; t = t->t_next)
		bufferevent_disable(t->t_bev, EV_READ);
}

static void
tcp_queue_resume(void *arg)
{
	struct dns_server *srv = arg;

	for (struct dns_tcp *t = srv->tcps; t != NULL; t = t->t_next)
		tcp_maybe_resume(t);
}

static void
accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct dns_server *srv = arg;

	(void)fd;
	(void)what;
	for (size_t i = 0; i < srv->n_tcpl; i++)
		evconnlistener_enable(srv->tcpl[i]);
}

static void
accept_error(struct evconnlistener *l, void *arg)
{
	struct dns_server *srv = arg;
	struct timeval tv = {0, DNS_ACCEPT_PAUSE_MS * 1000};
	int err = EVUTIL_SOCKET_ERROR();

	(void)l;
	/* Out of descriptors: the reserve is there for this listener. The
	 * listener is still readable, so the loop's next turn accepts. */
	if ((err == EMFILE || err == ENFILE) && fdres_draw(srv->cfg.fds, 1) == 1)
		return;
	/* EMFILE and friends: pause instead of spinning on a ready fd. */
	log_warn("dns: accept");
	for (size_t i = 0; i < srv->n_tcpl; i++)
		evconnlistener_disable(srv->tcpl[i]);
	evtimer_add(srv->accept_timer, &tv);
}

/* When every connection is taken, the one longest without a complete
 * query makes room, if it has none in flight (its answers are owed):
 * one with nothing left to send first. Clients that trickle bytes are
 * always the oldest, so they cannot keep a client that asks out. */
static struct dns_tcp *
tcp_victim(struct dns_server *srv)
{
	struct dns_tcp *best = NULL;
	bool best_busy = false;

	for (struct dns_tcp *t = srv->tcps; t != NULL; t = t->t_next) {
		bool busy = evbuffer_get_length(bufferevent_get_output(t->t_bev)) > 0;

		if (t->t_n_pending > 0)
			continue;
		/* <=: the list runs newest first, so of equal times the
		 * oldest connection is the one kept last. */
		if (best == NULL || (best_busy && !busy) ||
		    (best_busy == busy && t->t_last_ms <= best->t_last_ms)) {
			best = t;
			best_busy = busy;
		}
	}
	return best;
}

static void
tcp_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct dns_server *srv = arg;
	struct dns_tcp *t, *victim;

	(void)l;
	(void)sa;
	(void)salen;
	if (srv->n_tcps >= DNS_MAX_TCP_CONNS) {
		if ((victim = tcp_victim(srv)) == NULL) {
			close(fd);
			return;
		}
		log_debug("dns: %d TCP connections; closing one idle %llu ms for a new one",
		          DNS_MAX_TCP_CONNS, (unsigned long long)(now_ms() - victim->t_last_ms));
		tcp_close(victim);
	}
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		close(fd);
		return;
	}
	t->t_srv = srv;
	t->t_bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	t->t_idle = evtimer_new(srv->base, tcp_idle, t);
	if (t->t_bev == NULL || t->t_idle == NULL) {
		if (t->t_bev != NULL)
			bufferevent_free(t->t_bev);
		else
			close(fd);
		if (t->t_idle != NULL)
			event_free(t->t_idle);
		free(t);
		return;
	}
	membudget_share_init(&t->t_q, srv->cfg.queue);
	(void)membudget_share_watch(&t->t_q, t->t_bev);
	t->t_next = srv->tcps;
	if (t->t_next != NULL)
		t->t_next->t_prev = t;
	srv->tcps = t;
	srv->n_tcps++;
	t->t_last_ms = now_ms();
	tcp_idle_arm(t);
	bufferevent_setcb(t->t_bev, tcp_read, tcp_write, tcp_event, t);
	bufferevent_setwatermark(t->t_bev, EV_READ, 0, 4 * (DNS_MSG_MAX + 2));
	bufferevent_enable(t->t_bev, EV_WRITE);
	if (!membudget_over(srv->cfg.queue))
		bufferevent_enable(t->t_bev, EV_READ);
}

/* ---- lifetime ---- */

static void
pending_free(struct dns_pending *p)
{
	struct dns_server *srv = p->p_srv;
	struct dns_tcp *t = p->p_client.tcp;

	if (p->p_out)
		srv->ask.cancel(srv->ask.arg, p->p_h);
	if (p->p_prev != NULL)
		p->p_prev->p_next = p->p_next;
	else
		srv->pends = p->p_next;
	if (p->p_next != NULL)
		p->p_next->p_prev = p->p_prev;
	srv->n_pends--;
	membudget_share_sub(&srv->pends_q, sizeof(*p));
	if (t != NULL) {
		if (p->p_tprev != NULL)
			p->p_tprev->p_tnext = p->p_tnext;
		else
			t->t_pending = p->p_tnext;
		if (p->p_tnext != NULL)
			p->p_tnext->p_tprev = p->p_tprev;
		t->t_n_pending--;
	}
	free(p);
	if (t != NULL) {
		if (t->t_eof && t->t_n_pending == 0 &&
		    evbuffer_get_length(bufferevent_get_output(t->t_bev)) == 0)
			tcp_close(t);
		else
			tcp_maybe_resume(t);
	}
}

struct dns_server *
dns_server_new(struct event_base *base, const struct dns_server_config *cfg)
{
	struct dns_server *srv;

	if (cfg->policy == NULL || (cfg->asker == NULL && cfg->resolver == NULL &&
	                            cfg->n_upstream > DNS_MAX_UPSTREAMS)) {
		log_warnx("dns: server config needs a policy and at most %d upstreams",
		          DNS_MAX_UPSTREAMS);
		return NULL;
	}
	if ((srv = calloc(1, sizeof(*srv))) == NULL) {
		log_warn("dns: server");
		return NULL;
	}
	srv->base = base;
	srv->cfg = *cfg;
	srv->res = cfg->asker == NULL ? cfg->resolver : NULL;
	if (cfg->asker == NULL && srv->res == NULL) {
		struct resolver_config rc = {.policy = cfg->policy,
		                             .n_upstream = cfg->n_upstream,
		                             .ttl_cap = cfg->ttl_cap,
		                             .timeout_ms = cfg->timeout_ms};

		memcpy(rc.upstream, cfg->upstream, sizeof(rc.upstream));
		if ((srv->res = srv->res_own = resolver_new(base, &rc)) == NULL)
			goto fail;
		resolver_set_limits(srv->res_own, cfg->queue, cfg->fds);
	}
	if (cfg->asker != NULL)
		srv->ask = *cfg->asker;
	else
		resolver_asker(srv->res, &srv->ask);
	srv->ask.set_burst(srv->ask.arg, resolver_burst, srv);
	srv->accept_timer = evtimer_new(base, accept_resume, srv);
	if (srv->accept_timer == NULL) {
		log_warn("dns: server");
		goto fail;
	}
	if (srv->cfg.queue != NULL) {
		struct membudget_hooks h = {tcp_queue_pause, tcp_queue_resume, srv};

		if (membudget_add_user(srv->cfg.queue, &h) != 0) {
			log_warnx("dns: cannot share the queue budget");
			srv->cfg.queue = NULL;
			goto fail;
		}
	}
	membudget_share_init(&srv->pends_q, srv->cfg.queue);
	return srv;
fail:
	dns_server_free(srv);
	return NULL;
}

int
dns_server_add_udp(struct dns_server *srv, int fd)
{
	struct dns_udp_listener *u;

	if (srv->n_udp >= DNS_MAX_LISTENERS) {
		log_warnx("dns: more than %d UDP listeners", DNS_MAX_LISTENERS);
		close(fd);
		return -1;
	}
	u = &srv->udp[srv->n_udp];
	if (fd_set_nonblock(fd, true) != 0 || fd_set_cloexec(fd, true) != 0) {
		log_warn("dns: UDP listener fd %d", fd);
		close(fd);
		return -1;
	}
	/* Best effort: room for bursts (capped by net.core.rmem_max). */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){1 << 20}, sizeof(int));
	u->fd = fd;
	u->ev = event_new(srv->base, fd, EV_READ | EV_PERSIST, udp_read, srv);
	if (u->ev == NULL || event_add(u->ev, NULL) != 0) {
		log_warnx("dns: cannot watch UDP listener fd %d", fd);
		if (u->ev != NULL)
			event_free(u->ev);
		u->ev = NULL;
		close(fd);
		return -1;
	}
	srv->n_udp++;
	return 0;
}

int
dns_server_add_tcp(struct dns_server *srv, int fd)
{
	struct evconnlistener *l;

	if (srv->n_tcpl >= DNS_MAX_LISTENERS) {
		log_warnx("dns: more than %d TCP listeners", DNS_MAX_LISTENERS);
		close(fd);
		return -1;
	}
	if (fd_set_nonblock(fd, true) != 0 || fd_set_cloexec(fd, true) != 0) {
		log_warn("dns: TCP listener fd %d", fd);
		close(fd);
		return -1;
	}
	/* Backlog 0: the socket is already listening. */
	l = evconnlistener_new(srv->base, tcp_accept, srv,
	                       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (l == NULL) {
		log_warnx("dns: cannot watch TCP listener fd %d", fd);
		close(fd);
		return -1;
	}
	evconnlistener_set_error_cb(l, accept_error);
	srv->tcpl[srv->n_tcpl++] = l;
	return 0;
}

void
dns_server_free(struct dns_server *srv)
{
	if (srv == NULL)
		return;
	if (srv->cfg.queue != NULL)
		membudget_remove_user(srv->cfg.queue, srv);
	while (srv->tcps != NULL)
		tcp_close(srv->tcps);
	/* Queries still in flight are answered and logged too. */
	while (srv->pends != NULL) {
		struct dns_pending *p = srv->pends;
		struct resolver_result res = {.status = RESOLVER_FAIL,
		                              .why = "resolver shutting down"};

		query_result(srv, &p->p_client, &p->p_q, &p->p_d, &res, p->p_start_ms);
		pending_free(p);
	}
	membudget_share_release(&srv->pends_q);
	if (srv->ask.set_burst != NULL)
		srv->ask.set_burst(srv->ask.arg, NULL, NULL);
	resolver_free(srv->res_own);
	if (srv->n_malformed > 0)
		log_warnx("dns: dropped %llu malformed queries",
		          (unsigned long long)srv->n_malformed);
	for (size_t i = 0; i < srv->n_udp; i++) {
		event_free(srv->udp[i].ev);
		close(srv->udp[i].fd);
	}
	for (size_t i = 0; i < srv->n_tcpl; i++)
		evconnlistener_free(srv->tcpl[i]);
	if (srv->accept_timer != NULL)
		event_free(srv->accept_timer);
	free(srv);
}
