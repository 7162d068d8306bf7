/* The one resolver: see resolver.h. Moved here from dns/server.c (its
 * upstream client) so that the proxy asks the same code. */
#include "dns/resolver.h"

#include "common/fdres.h"
#include "common/log.h"
#include "common/membudget.h"
#include "common/util.h"
#include "dns/acache.h"
#include "dns/answer.h"
#include "dns/msg.h"
#include "policy/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define RESOLVER_MAX_PENDING    8192 /* questions in flight: the listener's and the proxy's */
#define RESOLVER_ACACHE_SIZE    4096
#define RESOLVER_UDP_BATCH      64 /* datagrams read per readiness event */
#define RESOLVER_ID_SPACE       65536
#define RESOLVER_TRIES          2
#define RESOLVER_HOSTS_FILE_MAX (1 << 20) /* bytes of the hosts file read */

/* One question on its way upstream, for every asker waiting on the same
 * name and type (a burst of CONNECTs to one name costs one A and one
 * AAAA). Each try has its own random id, and every try stays registered
 * until the question ends: a retry never throws away the first try's
 * answer, which may still come. */
struct resolver_question {
	struct resolver *q_r;
	/* The question as it goes upstream: its name in a random mix of
	 * cases (0x20), which a UDP answer must echo exactly. */
	struct dns_query q_q;
	char q_name[DNS_NAME_TEXT_MAX];    /* lowercase: the in-flight and cache key */
	struct resolver_req *q_waiters;    /* who asked; none once finishing */
	unsigned q_n_capped;               /* resolver_ask()'s waiters: RESOLVER_MAX_WAITERS */
	struct resolver_question *q_hnext; /* in-flight chain */
	bool q_finishing;                  /* answering its waiters */
	/* While resolver_ask() sends the first try: where a failure goes,
	 * so that the callback never runs from inside it. */
	struct resolver_result *q_sync;
	unsigned q_tries;              /* tries sent so far */
	uint16_t q_id[RESOLVER_TRIES]; /* pending[q_id[i]] == this */
	size_t q_up[RESOLVER_TRIES];   /* index into cfg.upstream */
	size_t q_tcp_up;               /* the upstream q_upbev talks to */
	bool q_last_round;             /* the timer runs to the budget's end */
	struct event *q_timer;
	struct bufferevent *q_upbev;  /* TCP fallback, after a truncated answer */
	struct membudget_share q_upq; /* what q_upbev's buffers hold */
};

/* One asker of a question: the handle resolver_ask() returns. */
struct resolver_req {
	struct resolver_question *w_q;
	resolver_cb w_cb;
	void *w_arg;
	struct resolver_req *w_next, *w_prev;
	bool w_capped; /* counted in q_n_capped */
};

#define RESOLVER_INFLIGHT_BUCKETS 1024

struct resolver {
	struct event_base *base;
	struct resolver_config cfg;
	struct membudget *queue; /* borrowed, may be NULL */
	struct fdres *fds;       /* borrowed, may be NULL */
	void (*burst)(void *arg, bool begin);
	void *burst_arg;
	int up_fd[2]; /* AF_INET, AF_INET6 */
	struct event *up_ev[2];
	struct resolver_question **pending; /* RESOLVER_ID_SPACE slots by id */
	size_t n_pending;
	unsigned n_tcp; /* questions with a TCP fallback open: RESOLVER_MAX_TCP */
	/* Questions in flight by name and type, to share them. */
	struct resolver_question *inflight[RESOLVER_INFLIGHT_BUCKETS];
	uint64_t seed;
	struct dns_acache *acache;
	struct resolver_hosts *hosts;
	/* One finished lookup kept for the next (owned): most lookups are
	 * answered from the cache at once, and a fresh 6.6 KiB calloc for
	 * each was a visible share of a tunnel's cost (bench/proxy.md). */
	struct resolver_lookup *spare_lookup;
	/* Scratch for one message at a time (single-threaded): an answer
	 * being filtered, a cache hit, the bytes sent or received. */
	uint8_t buf[DNS_MSG_MAX + 2];
	uint8_t out[DNS_MSG_MAX + 2];
	struct dns_response resp;
	struct dns_filtered filt, hit;
	char why[512], hitwhy[512];
};

static void req_free(struct resolver_question *q);
static void req_unregister(struct resolver_question *q);
static void inflight_remove(struct resolver_question *q);
static int req_send(struct resolver_question *q);

/* ---- helpers ---- */

static socklen_t
sa_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static bool
sa_equal(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
	}
	return false;
}

static void
sa_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(s->sin_port));
	} else {
		const struct sockaddr_in6 *s = (const void *)ss;

		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, (unsigned)ntohs(s->sin6_port));
	}
}

static int
fam_idx(sa_family_t f)
{
	return f == AF_INET6 ? 1 : 0;
}

/* The reason with the removed addresses appended ("" when none). */
static void
say_why(const struct dns_filtered *f, char *why, size_t len)
{
	str_copy(why, f->detail != NULL ? f->detail : "", len);
	for (size_t i = 0, off = strlen(why); i < f->n_removed && off < len; i++) {
		int w = snprintf(why + off, len - off, "%s%s", i == 0 ? ": " : ", ", f->removed[i]);

		if (w < 0)
			break;
		off += (size_t)w;
	}
}

static void
lower_copy(char *out, const char *in, size_t len)
{
	size_t i;

	for (i = 0; in[i] != '\0' && i + 1 < len; i++)
		out[i] = (in[i] >= 'A' && in[i] <= 'Z') ? (char)(in[i] + 32) : in[i];
	out[i] = '\0';
}

/* The in-flight chain of name (any case) and qtype: FNV-1a over the
 * lowercased name, seeded (the sandbox chooses names under a wildcard). */
static size_t
inflight_bucket(const struct resolver *r, const char *name, uint16_t qtype)
{
	uint64_t h = 0xcbf29ce484222325ull ^ r->seed ^ qtype;

	for (const char *p = name; *p != '\0'; p++) {
		h ^= (uint8_t)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	return (size_t)h & (RESOLVER_INFLIGHT_BUCKETS - 1);
}

static void
inflight_remove(struct resolver_question *q)
{
	struct resolver *r = q->q_r;
	struct resolver_question **pp = &r->inflight[inflight_bucket(r, q->q_name, q->q_q.qtype)];

	while (*pp != NULL && *pp != q)
		pp = &(*pp)->q_hnext;
	if (*pp == q)
		*pp = q->q_hnext;
	q->q_hnext = NULL;
}

/* Spell name's letters in a random mix of cases (DNS 0x20, Dagon and
 * Vixie 2008): an off-path spoofer must now guess one bit per letter on
 * top of the id, since upstreams echo the question as asked. */
static void
case_randomise(char *name)
{
	uint32_t bits = 0;
	unsigned left = 0;

	for (char *p = name; *p != '\0'; p++) {
		char lc = (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p;

		if (lc < 'a' || lc > 'z')
			continue;
		if (left == 0) {
			bits = arc4random();
			left = 32;
		}
		*p = (bits & 1) ? (char)(lc - 32) : lc;
		bits >>= 1;
		left--;
	}
}

static void
waiter_add(struct resolver_question *q, struct resolver_req *w, resolver_cb cb, void *arg,
           bool capped)
{
	w->w_capped = capped;
	q->q_n_capped += capped;
	w->w_q = q;
	w->w_cb = cb;
	w->w_arg = arg;
	w->w_prev = NULL;
	w->w_next = q->q_waiters;
	if (w->w_next != NULL)
		w->w_next->w_prev = w;
	q->q_waiters = w;
}

/* ---- ending a question ---- */

/* Hand the answer in r->filt (f != NULL) or a failure to the asker and
 * free q. */
static void
req_finish(struct resolver_question *q, enum resolver_status st, const struct dns_filtered *f,
           const char *reason)
{
	struct resolver *r = q->q_r;
	struct resolver_result res = {.status = st, .f = f};
	/* The reason every waiter is given, on this stack: a callback may
	 * call resolver_ask(), whose own failure rewrites r->why. (f is
	 * r->filt, which only an upstream answer rewrites, never a call
	 * from a callback.) */
	char why[sizeof(r->why)];

	if (f != NULL) {
		say_why(f, r->why, sizeof(r->why));
		(void)dns_acache_put(r->acache, q->q_name, q->q_q.qtype, f,
		                     r->why[0] != '\0' ? r->why : NULL, now_ms());
	} else {
		str_copy(r->why, reason, sizeof(r->why));
	}
	str_copy(why, r->why, sizeof(why));
	res.why = why;
	if (q->q_sync != NULL) {
		/* Only failures happen before the first try is out. */
		str_copy(r->hitwhy, r->why, sizeof(r->hitwhy));
		res.why = r->hitwhy;
		*q->q_sync = res;
		free(q->q_waiters);
		q->q_waiters = NULL;
		req_free(q);
		return;
	}
	/* Out of the tables first (no answer or asker reaches it now), then
	 * each waiter once; a callback may cancel a waiter still queued (it
	 * is unlinked and never called) or ask again (a new question: this
	 * one is no longer in flight), and q stays until the loop ends. */
	inflight_remove(q);
	req_unregister(q);
	q->q_finishing = true;
	while (q->q_waiters != NULL) {
		struct resolver_req *w = q->q_waiters;

		q->q_waiters = w->w_next;
		if (q->q_waiters != NULL)
			q->q_waiters->w_prev = NULL;
		w->w_cb(&res, w->w_arg);
		free(w);
	}
	req_free(q);
}

/* ---- answers ---- */

static void req_to_tcp(struct resolver_question *q, size_t up);

/* One upstream response (UDP from upstream up, or TCP) for q. Returns
 * false when it does not answer q's question (keep waiting). */
static bool
req_response(struct resolver_question *q, const uint8_t *msg, size_t len, bool via_tcp, size_t up)
{
	struct resolver *r = q->q_r;
	enum dns_err e = dns_response_parse(msg, len, &r->resp);

	if (e != DNS_OK) {
		/* A truncated UDP answer may be cut mid-record; the question
		 * is still there, which is all we need to go to TCP. */
		if (!via_tcp && len >= 4 && (msg[2] & 0x02) && (msg[2] & 0x80)) {
			req_to_tcp(q, up);
			return true;
		}
		log_debug("dns: bad upstream answer for %s: %s", q->q_name, dns_err_str(e));
		return false;
	}
	if (dns_filter(r->cfg.policy, &q->q_q, &r->resp, r->cfg.ttl_cap, &r->filt) != 0)
		return false;
	/* Right id, right sender, but not the case we asked in: a guess
	 * from off-path, or an upstream that does not keep the case. TCP
	 * answers both (no off-path guess reaches a connection). */
	if (!via_tcp && strcmp(r->resp.qname, q->q_q.qname) != 0) {
		log_debug("dns: %s: answer's question is spelled %s; asking over TCP", q->q_name,
		          r->resp.qname);
		req_to_tcp(q, up);
		return true;
	}
	if (!via_tcp && (r->resp.flags & DNS_FLAG_TC)) {
		req_to_tcp(q, up);
		return true;
	}
	if (r->filt.rcode == DNS_RCODE_SERVFAIL)
		req_finish(q, RESOLVER_FAIL, NULL,
		           r->filt.detail != NULL ? r->filt.detail : "upstream failed");
	else
		req_finish(q, RESOLVER_ANSWER, &r->filt, NULL);
	return true;
}

bool
dns_tcp_take(struct evbuffer *in, uint8_t *buf, size_t *len)
{
	uint8_t hdr[2];

	if (evbuffer_get_length(in) < 2)
		return false;
	evbuffer_copyout(in, hdr, 2);
	*len = (size_t)(hdr[0] << 8 | hdr[1]);
	if (evbuffer_get_length(in) < 2 + *len)
		return false;
	evbuffer_drain(in, 2);
	evbuffer_remove(in, buf, *len);
	return true;
}

static void
uptcp_read(struct bufferevent *bev, void *arg)
{
	struct resolver_question *q = arg;
	struct resolver *r = q->q_r;
	size_t len;

	if (!dns_tcp_take(bufferevent_get_input(bev), r->buf, &len))
		return;
	if (!req_response(q, r->buf, len, true, q->q_tcp_up))
		req_finish(q, RESOLVER_FAIL, NULL, "upstream TCP answer does not match the query");
}

static void
uptcp_event(struct bufferevent *bev, short what, void *arg)
{
	struct resolver_question *q = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	req_finish(q, RESOLVER_FAIL, NULL, "upstream TCP connection failed");
}

/* The answer from upstream up came back truncated (or in another case):
 * ask it again over TCP, with the same id, inside what is left of the
 * budget. At most RESOLVER_MAX_TCP such connections at once: every
 * question in flight could ask for one, and each costs a descriptor. */
static void
req_to_tcp(struct resolver_question *q, size_t up_i)
{
	struct resolver *r = q->q_r;
	const struct sockaddr_storage *up = &r->cfg.upstream[up_i];
	size_t qlen;
	uint8_t hdr[2];
	int fd;

	if (q->q_upbev != NULL)
		return;
	if (r->n_tcp >= RESOLVER_MAX_TCP) {
		req_finish(q, RESOLVER_FAIL, NULL, "too many upstream TCP connections");
		return;
	}
	q->q_tcp_up = up_i;
	qlen = dns_upstream_query(&q->q_q, q->q_id[0], r->out, sizeof(r->out));
	fd = socket(up->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* Connections may have taken every descriptor but the reserve,
	 * which is there for this. */
	if (fd < 0 && (errno == EMFILE || errno == ENFILE) && fdres_draw(r->fds, 1) == 1)
		fd = socket(up->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (qlen == 0 || fd < 0) {
		if (fd >= 0)
			close(fd);
		req_finish(q, RESOLVER_FAIL, NULL, "cannot open upstream TCP socket");
		return;
	}
	q->q_upbev = bufferevent_socket_new(r->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (q->q_upbev == NULL) {
		close(fd);
		req_finish(q, RESOLVER_FAIL, NULL, "cannot open upstream TCP socket");
		return;
	}
	r->n_tcp++; /* until req_free() frees q_upbev */
	membudget_share_init(&q->q_upq, r->queue);
	(void)membudget_share_watch(&q->q_upq, q->q_upbev);
	bufferevent_setcb(q->q_upbev, uptcp_read, NULL, uptcp_event, q);
	bufferevent_setwatermark(q->q_upbev, EV_READ, 0, DNS_MSG_MAX + 2);
	hdr[0] = (uint8_t)(qlen >> 8);
	hdr[1] = (uint8_t)qlen;
	bufferevent_write(q->q_upbev, hdr, 2);
	bufferevent_write(q->q_upbev, r->out, qlen);
	if (bufferevent_socket_connect(q->q_upbev, (struct sockaddr *)up, (int)sa_len(up)) != 0) {
		req_finish(q, RESOLVER_FAIL, NULL, "upstream TCP connect failed");
		return;
	}
	bufferevent_enable(q->q_upbev, EV_READ | EV_WRITE);
}

static void
upstream_read(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *r = arg;

	(void)what;
	if (r->burst != NULL)
		r->burst(r->burst_arg, true);
	for (int i = 0; i < RESOLVER_UDP_BATCH; i++) {
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		struct resolver_question *q;
		ssize_t n;
		uint16_t id;
		int t = -1;

		n = recvfrom(fd, r->buf, sizeof(r->buf), MSG_DONTWAIT, (struct sockaddr *)&from,
		             &flen);
		if (n < 0)
			break;
		if (n < DNS_HEADER_LEN)
			continue;
		id = (uint16_t)(r->buf[0] << 8 | r->buf[1]);
		q = r->pending[id];
		if (q == NULL || q->q_upbev != NULL)
			continue;
		/* Only the address a try with this id went to may answer it
		 * (no off-path guesses from other senders); dns_filter then
		 * checks the question. */
		for (unsigned k = 0; k < q->q_tries && t < 0; k++)
			if (q->q_id[k] == id && sa_equal(&from, &r->cfg.upstream[q->q_up[k]]))
				t = (int)k;
		if (t < 0)
			continue;
		(void)req_response(q, r->buf, (size_t)n, false, q->q_up[t]);
	}
	if (r->burst != NULL)
		r->burst(r->burst_arg, false);
}

/* ---- sending ---- */

static void
req_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct resolver_question *q = arg;
	struct resolver *r = q->q_r;
	char up[INET6_ADDRSTRLEN + 16], why[128];

	(void)fd;
	(void)what;
	if (!q->q_last_round && q->q_tries < RESOLVER_TRIES) {
		struct timeval tv;
		uint32_t rest = r->cfg.timeout_ms - r->cfg.timeout_ms / 2;

		if (q->q_upbev == NULL) {
			(void)req_send(q); /* on failure it finished q */
			return;
		}
		/* Over TCP already: no retry, but the rest of the budget. */
		q->q_last_round = true;
		tv.tv_sec = rest / 1000;
		tv.tv_usec = (rest % 1000) * 1000;
		evtimer_add(q->q_timer, &tv);
		return;
	}
	sa_str(&r->cfg.upstream[q->q_upbev != NULL ? q->q_tcp_up : q->q_up[q->q_tries - 1]], up,
	       sizeof(up));
	snprintf(why, sizeof(why), "upstream %s timed out%s", up,
	         q->q_upbev != NULL ? " (over TCP)" : "");
	req_finish(q, RESOLVER_TIMEOUT, NULL, why);
}

/* Send the next try with a fresh random id (the earlier tries stay
 * registered) and arm the timer for its share of the budget. Returns 0,
 * or -1 after finishing q. */
static int
req_send(struct resolver_question *q)
{
	struct resolver *r = q->q_r;
	unsigned t = q->q_tries;
	size_t up_i;
	const struct sockaddr_storage *up;
	struct timeval tv;
	uint32_t budget;
	size_t qlen;
	char why[160], upstr[INET6_ADDRSTRLEN + 16];
	int fi;
	uint16_t id = 0;

	/* The first try starts at a random upstream (spreading load), a
	 * retry goes to the next one. */
	if (t == 0)
		up_i = r->cfg.n_upstream > 1 ? arc4random_uniform((uint32_t)r->cfg.n_upstream) : 0;
	else
		up_i = (q->q_up[t - 1] + 1) % r->cfg.n_upstream;
	up = &r->cfg.upstream[up_i];
	fi = fam_idx(up->ss_family);
	for (int tries = 0;; tries++) {
		id = (uint16_t)arc4random();
		if (r->pending[id] == NULL)
			break;
		if (tries > 64) {
			req_finish(q, RESOLVER_FAIL, NULL, "no free query id");
			return -1;
		}
	}
	q->q_id[t] = id;
	q->q_up[t] = up_i;
	q->q_tries++;
	r->pending[id] = q;
	qlen = dns_upstream_query(&q->q_q, id, r->out, sizeof(r->out));
	if (r->up_fd[fi] < 0 || qlen == 0) {
		req_finish(q, RESOLVER_FAIL, NULL, "no socket for the upstream's address family");
		return -1;
	}
	if (sendto(r->up_fd[fi], r->out, qlen, MSG_DONTWAIT | MSG_NOSIGNAL,
	           (const struct sockaddr *)up, sa_len(up)) < 0) {
		sa_str(up, upstr, sizeof(upstr));
		snprintf(why, sizeof(why), "upstream %s: %s", upstr, strerror(errno));
		if (q->q_tries < RESOLVER_TRIES && r->cfg.n_upstream > 1)
			return req_send(q);
		req_finish(q, RESOLVER_FAIL, NULL, why);
		return -1;
	}
	/* The first try gets half the budget, the retry the rest; the
	 * first try's answer is taken until the very end. */
	budget =
	        q->q_tries == 1 ? r->cfg.timeout_ms / 2 : r->cfg.timeout_ms - r->cfg.timeout_ms / 2;
	tv.tv_sec = budget / 1000;
	tv.tv_usec = (budget % 1000) * 1000;
	evtimer_add(q->q_timer, &tv);
	return 0;
}

/* ---- asking ---- */

static int
asker_ask(void *arg, const struct dns_query *q, const char *name, resolver_cb cb, void *cb_arg,
          struct resolver_result *now, uint64_t *handle)
{
	struct resolver_req *req = resolver_ask(arg, q, name, cb, cb_arg, now);

	*handle = (uint64_t)(uintptr_t)req;
	return req != NULL ? 0 : 1;
}

static void
asker_cancel(void *arg, uint64_t handle)
{
	(void)arg;
	resolver_cancel((struct resolver_req *)(uintptr_t)handle);
}

static void
asker_set_burst(void *arg, void (*fn)(void *fn_arg, bool begin), void *fn_arg)
{
	resolver_set_burst(arg, fn, fn_arg);
}

void
resolver_asker(struct resolver *r, struct dns_asker *out)
{
	*out = (struct dns_asker){
	        .ask = asker_ask, .cancel = asker_cancel, .set_burst = asker_set_burst, .arg = r};
}

static void
result_now(struct resolver_result *now, enum resolver_status st, const struct dns_filtered *f,
           const char *why)
{
	memset(now, 0, sizeof(*now));
	now->status = st;
	now->f = f;
	now->why = why;
}

/* resolver_ask(); capped: the asker counts against RESOLVER_MAX_WAITERS
 * (the listener's queries cost the sandbox nothing; the proxy's lookups
 * each hold a connection, bounded by the proxy's own limits). */
static struct resolver_req *
ask(struct resolver *r, const struct dns_query *q, const char *name, resolver_cb cb, void *arg,
    struct resolver_result *now, bool capped)
{
	struct resolver_question *req;
	struct resolver_req *w = NULL;
	const char *why = NULL;
	size_t b;

	if (r->hosts != NULL && resolver_hosts_answer(r->hosts, name, q->qtype, &r->resp)) {
		/* The file speaks for the name in every type: A and AAAA
		 * from its lines, NODATA for the rest (glibc's files+dns
		 * would ask DNS for an MX; the upstream's view of a name
		 * the file overrides is not the sandbox's business). The
		 * same filter as an upstream answer: the guard still
		 * removes a private address a hosts line gives an allowed
		 * name, unless a cidr rule opens it. */
		str_copy(r->resp.qname, q->qname, sizeof(r->resp.qname));
		(void)dns_filter(r->cfg.policy, q, &r->resp, r->cfg.ttl_cap, &r->hit);
		say_why(&r->hit, r->hitwhy, sizeof(r->hitwhy));
		result_now(now, RESOLVER_ANSWER, &r->hit, r->hitwhy);
		now->from_hosts = true;
		return NULL;
	}
	if (dns_acache_get(r->acache, name, q->qtype, now_ms(), &r->hit, &why) == 0) {
		str_copy(r->hitwhy, why != NULL ? why : "", sizeof(r->hitwhy));
		result_now(now, RESOLVER_ANSWER, &r->hit, r->hitwhy);
		now->cached = true;
		return NULL;
	}
	b = inflight_bucket(r, name, q->qtype);
	for (req = r->inflight[b]; req != NULL; req = req->q_hnext)
		if (req->q_q.qtype == q->qtype && req->q_q.qclass == q->qclass &&
		    dns_name_eq(req->q_name, name))
			break;
	if (req != NULL) {
		/* Already asked: wait for the same answer, up to a point (a
		 * listener flooded with one name, a new id each time). */
		if (capped && req->q_n_capped >= RESOLVER_MAX_WAITERS) {
			result_now(now, RESOLVER_FAIL, NULL,
			           "too many queries for this name in flight");
			return NULL;
		}
		if ((w = calloc(1, sizeof(*w))) == NULL) {
			result_now(now, RESOLVER_FAIL, NULL, "out of memory");
			return NULL;
		}
		waiter_add(req, w, cb, arg, capped);
		return w;
	}
	if (r->cfg.n_upstream == 0 || r->n_pending >= RESOLVER_MAX_PENDING) {
		result_now(now, RESOLVER_FAIL, NULL,
		           r->cfg.n_upstream == 0 ? "no upstream resolver configured"
		                                  : "too many queries in flight");
		return NULL;
	}
	if ((req = calloc(1, sizeof(*req))) == NULL || (w = calloc(1, sizeof(*w))) == NULL ||
	    (req->q_timer = evtimer_new(r->base, req_timeout, req)) == NULL) {
		free(w);
		free(req);
		result_now(now, RESOLVER_FAIL, NULL, "out of memory");
		return NULL;
	}
	req->q_r = r;
	req->q_q = *q;
	case_randomise(req->q_q.qname);
	lower_copy(req->q_name, name, sizeof(req->q_name));
	waiter_add(req, w, cb, arg, capped);
	r->n_pending++;
	req->q_hnext = r->inflight[b];
	r->inflight[b] = req;
	req->q_sync = now;
	if (req_send(req) != 0)
		return NULL; /* req_finish() filled *now and freed req and w */
	req->q_sync = NULL;
	return w;
}

struct resolver_req *
resolver_ask(struct resolver *r, const struct dns_query *q, const char *name, resolver_cb cb,
             void *arg, struct resolver_result *now)
{
	return ask(r, q, name, cb, arg, now, true);
}

void
resolver_cancel(struct resolver_req *w)
{
	struct resolver_question *q;

	if (w == NULL)
		return;
	q = w->w_q;
	if (w->w_prev != NULL)
		w->w_prev->w_next = w->w_next;
	else
		q->q_waiters = w->w_next;
	if (w->w_next != NULL)
		w->w_next->w_prev = w->w_prev;
	q->q_n_capped -= w->w_capped;
	free(w);
	/* The last asker gone: nobody wants the answer. */
	if (q->q_waiters == NULL && !q->q_finishing) {
		inflight_remove(q);
		req_free(q);
	}
}

/* Off the id table: no answer reaches q any more. */
static void
req_unregister(struct resolver_question *q)
{
	struct resolver *r = q->q_r;

	for (unsigned i = 0; i < q->q_tries; i++)
		if (r->pending[q->q_id[i]] == q)
			r->pending[q->q_id[i]] = NULL;
}

static void
req_free(struct resolver_question *q)
{
	struct resolver *r = q->q_r;

	inflight_remove(q);
	req_unregister(q);
	r->n_pending--;
	if (q->q_timer != NULL)
		event_free(q->q_timer);
	if (q->q_upbev != NULL) {
		membudget_share_release(&q->q_upq);
		bufferevent_free(q->q_upbev);
		r->n_tcp--;
		fdres_refill(r->fds);
	}
	free(q);
}

/* ---- addresses for the proxy ---- */

/* Both questions of one name: A and AAAA, asked together. */
struct resolver_lookup {
	struct resolver *l_r;
	resolver_addrs_cb l_cb;
	void *l_arg;
	struct resolver_req *l_req[2]; /* AAAA, A; NULL once answered */
	struct resolver_addrs l_res;
	/* What each family's answer came to, combined at the end. */
	enum resolver_status l_st[2];
	unsigned l_rcode[2];
	bool l_cname[2], l_guard[2], l_done[2];
	struct sockaddr_storage l_addr[2][RESOLVER_MAX_ADDRS];
	size_t l_n[2];
};

static const uint16_t lookup_qtype[2] = {DNS_TYPE_AAAA, DNS_TYPE_A};

/* An A or AAAA record's address as a sockaddr (port 0). */
static void
rr_sockaddr(const struct dns_rr *rr, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (rr->type == DNS_TYPE_A) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;

		s->sin_family = AF_INET;
		memcpy(&s->sin_addr, rr->addr, 4);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;

		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, rr->addr, 16);
	}
}

/* Take one family's answer into l. */
static void
lookup_take(struct resolver_lookup *l, int i, const struct resolver_result *res)
{
	l->l_done[i] = true;
	l->l_st[i] = res->status;
	if (res->why != NULL && res->why[0] != '\0' && l->l_res.why[0] == '\0')
		str_copy(l->l_res.why, res->why, sizeof(l->l_res.why));
	if (res->status != RESOLVER_ANSWER)
		return;
	l->l_rcode[i] = res->f->rcode;
	l->l_cname[i] = res->f->cname_denied;
	l->l_guard[i] = res->f->guarded;
	if (res->f->guarded && l->l_res.refused.ss_family == 0)
		rr_sockaddr(&res->f->first_removed, &l->l_res.refused);
	if (res->f->cname_denied && policy_mode(l->l_r->cfg.policy) == POLICY_MODE_AUDIT)
		l->l_res.audit_cname = true;
	for (size_t k = 0; k < res->f->n && l->l_n[i] < RESOLVER_MAX_ADDRS / 2; k++) {
		const struct dns_rr *rr = &res->f->rr[k];
		struct sockaddr_storage *ss = &l->l_addr[i][l->l_n[i]];

		if (rr->type != lookup_qtype[i])
			continue;
		rr_sockaddr(rr, ss);
		l->l_n[i]++;
	}
}

/* Both answers are in: what they say together. A refused chain in
 * either refuses the name (enforce mode: dns_filter kept no records); an
 * address in either is an answer; else the worst failure speaks. */
static void
lookup_combine(struct resolver_lookup *l)
{
	struct resolver_addrs *a = &l->l_res;
	bool cname = false, guard = false, timeout = false, fail = false, nx = true;

	a->n = 0;
	for (int i = 0; i < 2; i++) {
		for (size_t k = 0; k < l->l_n[i]; k++)
			a->addr[a->n++] = l->l_addr[i][k];
		cname = cname || (l->l_cname[i] && !a->audit_cname);
		guard = guard || l->l_guard[i];
		timeout = timeout || l->l_st[i] == RESOLVER_TIMEOUT;
		fail = fail || l->l_st[i] == RESOLVER_FAIL;
		nx = nx && l->l_st[i] == RESOLVER_ANSWER && l->l_rcode[i] == DNS_RCODE_NXDOMAIN;
	}
	if (cname) {
		a->n = 0;
		a->status = RESOLVER_ADDRS_CNAME;
	} else if (a->n > 0) {
		a->status = RESOLVER_ADDRS_OK;
	} else if (guard) {
		a->status = RESOLVER_ADDRS_GUARD;
	} else if (timeout) {
		a->status = RESOLVER_ADDRS_TIMEOUT;
	} else if (fail) {
		a->status = RESOLVER_ADDRS_FAIL;
	} else {
		a->status = nx ? RESOLVER_ADDRS_NXDOMAIN : RESOLVER_ADDRS_NODATA;
	}
}

/* A lookup with nothing taken yet: the spare if there is one, else a
 * new one. Only what is read before it is written is set: the address
 * arrays are filled up to their counts (l_n, l_res.n) before they are
 * read, and clearing them (6.6 KiB) would cost more than the rest. */
static struct resolver_lookup *
lookup_alloc(struct resolver *r)
{
	struct resolver_lookup *l = r->spare_lookup;

	if (l != NULL)
		r->spare_lookup = NULL;
	else if ((l = malloc(sizeof(*l))) == NULL)
		return NULL;
	l->l_r = r;
	for (int i = 0; i < 2; i++) {
		l->l_req[i] = NULL;
		l->l_st[i] = RESOLVER_ANSWER;
		l->l_rcode[i] = 0;
		l->l_cname[i] = l->l_guard[i] = l->l_done[i] = false;
		l->l_n[i] = 0;
	}
	l->l_res.status = RESOLVER_ADDRS_OK;
	l->l_res.audit_cname = false;
	l->l_res.n = 0;
	memset(&l->l_res.refused, 0, sizeof(l->l_res.refused));
	l->l_res.why[0] = '\0';
	return l;
}

/* The lookup is finished or cancelled: kept as the spare, or freed. */
static void
lookup_release(struct resolver_lookup *l)
{
	struct resolver *r = l->l_r;

	if (r->spare_lookup == NULL)
		r->spare_lookup = l;
	else
		free(l);
}

/* res's result without the unused tail of its address array. */
static void
lookup_copy(struct resolver_addrs *to, const struct resolver_addrs *from)
{
	to->status = from->status;
	to->audit_cname = from->audit_cname;
	to->n = from->n;
	memcpy(to->addr, from->addr, from->n * sizeof(from->addr[0]));
	to->refused = from->refused;
	memcpy(to->why, from->why, sizeof(to->why));
}

static void
lookup_answered(const struct resolver_result *res, void *arg, int i)
{
	struct resolver_lookup *l = arg;

	l->l_req[i] = NULL;
	lookup_take(l, i, res);
	if (!l->l_done[0] || !l->l_done[1])
		return;
	lookup_combine(l);
	l->l_cb(&l->l_res, l->l_arg);
	lookup_release(l);
}

static void
lookup_cb6(const struct resolver_result *res, void *arg)
{
	lookup_answered(res, arg, 0);
}

static void
lookup_cb4(const struct resolver_result *res, void *arg)
{
	lookup_answered(res, arg, 1);
}

struct resolver_lookup *
resolver_lookup(struct resolver *r, const char *name, resolver_addrs_cb cb, void *arg,
                struct resolver_addrs *now)
{
	struct resolver_lookup *l = lookup_alloc(r);
	resolver_cb cbs[2] = {lookup_cb6, lookup_cb4};

	if (l == NULL) {
		memset(now, 0, sizeof(*now));
		now->status = RESOLVER_ADDRS_FAIL;
		str_copy(now->why, "out of memory", sizeof(now->why));
		return NULL;
	}
	l->l_cb = cb;
	l->l_arg = arg;
	for (int i = 0; i < 2; i++) {
		struct dns_query q = {0};
		struct resolver_result res;

		str_copy(q.qname, name, sizeof(q.qname));
		q.qtype = lookup_qtype[i];
		q.qclass = DNS_CLASS_IN;
		q.flags = DNS_FLAG_RD;
		q.udp_size = DNS_UDP_MIN;
		l->l_req[i] = ask(r, &q, name, cbs[i], l, &res, false);
		if (l->l_req[i] == NULL)
			lookup_take(l, i, &res);
	}
	if (l->l_done[0] && l->l_done[1]) {
		lookup_combine(l);
		lookup_copy(now, &l->l_res);
		lookup_release(l);
		return NULL;
	}
	return l;
}

void
resolver_lookup_cancel(struct resolver_lookup *l)
{
	if (l == NULL)
		return;
	for (int i = 0; i < 2; i++)
		resolver_cancel(l->l_req[i]);
	lookup_release(l);
}

/* ---- the hosts file ---- */

struct hosts_entry {
	char he_name[DNS_NAME_TEXT_MAX];
	uint16_t he_type; /* DNS_TYPE_A or DNS_TYPE_AAAA */
	uint8_t he_addr[16];
};

struct resolver_hosts {
	size_t n;
	struct hosts_entry e[];
};

static bool
is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r';
}

struct resolver_hosts *
resolver_hosts_parse(const char *text, size_t len)
{
	struct resolver_hosts *h;
	size_t pos = 0, cap = 0;

	/* Count the words first, for one allocation of the exact bound. */
	for (size_t i = 0; i < len; i++)
		if (!is_space(text[i]) && text[i] != '\n' &&
		    (i == 0 || is_space(text[i - 1]) || text[i - 1] == '\n'))
			cap++;
	if (cap > RESOLVER_HOSTS_MAX)
		cap = RESOLVER_HOSTS_MAX;
	if ((h = calloc(1, sizeof(*h) + cap * sizeof(h->e[0]))) == NULL)
		return NULL;
	while (pos < len) {
		size_t end = pos, wlen;
		char word[DNS_NAME_TEXT_MAX + 1], addrtext[INET6_ADDRSTRLEN + 1];
		uint8_t addr[16];
		uint16_t type;
		size_t p;

		while (end < len && text[end] != '\n')
			end++;
		/* One line [pos, end): cut the comment, then split words. */
		for (p = pos; p < end && text[p] != '#'; p++)
			;
		end = p;
		p = pos;
		while (p < end && is_space(text[p]))
			p++;
		for (wlen = 0; p + wlen < end && !is_space(text[p + wlen]); wlen++)
			;
		if (wlen == 0 || wlen >= sizeof(addrtext))
			goto next;
		memcpy(addrtext, text + p, wlen);
		addrtext[wlen] = '\0';
		if (inet_pton(AF_INET, addrtext, addr) == 1)
			type = DNS_TYPE_A;
		else if (inet_pton(AF_INET6, addrtext, addr) == 1)
			type = DNS_TYPE_AAAA;
		else
			goto next;
		p += wlen;
		while (p < end && h->n < cap) {
			const char *why;

			while (p < end && is_space(text[p]))
				p++;
			for (wlen = 0; p + wlen < end && !is_space(text[p + wlen]); wlen++)
				;
			if (wlen == 0)
				break;
			if (wlen < sizeof(word)) {
				memcpy(word, text + p, wlen);
				word[wlen] = '\0';
				if (policy_name_normalize(word, h->e[h->n].he_name,
				                          sizeof(h->e[h->n].he_name), &why) == 0) {
					h->e[h->n].he_type = type;
					memcpy(h->e[h->n].he_addr, addr, 16);
					h->n++;
				}
			}
			p += wlen;
		}
	next:
		pos = end;
		while (pos < len && text[pos] != '\n')
			pos++;
		pos++;
	}
	return h;
}

void
resolver_hosts_free(struct resolver_hosts *h)
{
	free(h);
}

bool
resolver_hosts_answer(const struct resolver_hosts *h, const char *name, uint16_t qtype,
                      struct dns_response *resp)
{
	bool known = false;

	memset(resp, 0, offsetof(struct dns_response, an));
	resp->flags = DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA;
	str_copy(resp->qname, name, sizeof(resp->qname));
	resp->qtype = qtype;
	resp->qclass = DNS_CLASS_IN;
	for (size_t i = 0; i < h->n; i++) {
		struct dns_rr *rr;

		if (!dns_name_eq(h->e[i].he_name, name))
			continue;
		known = true;
		if (h->e[i].he_type != qtype || resp->n_an == DNS_MAX_RR)
			continue;
		rr = &resp->an[resp->n_an++];
		memset(rr, 0, sizeof(*rr));
		str_copy(rr->name, name, sizeof(rr->name));
		rr->type = qtype;
		rr->rclass = DNS_CLASS_IN;
		rr->ttl = RESOLVER_HOSTS_TTL;
		memcpy(rr->addr, h->e[i].he_addr, 16);
	}
	return known;
}

/* Read the hosts file (before the loop runs: a blocking read is fine). */
static struct resolver_hosts *
hosts_load(const char *path)
{
	struct resolver_hosts *h = NULL;
	char *text = NULL;
	size_t len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;

	/* A FIFO or device would block or never end: regular files only. */
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		log_warnx("dns: %s: %s; names are not looked up in it", path,
		          fd < 0 ? strerror(errno) : "not a regular file");
		goto out;
	}
	if ((text = malloc(RESOLVER_HOSTS_FILE_MAX)) == NULL)
		goto out;
	while (len < RESOLVER_HOSTS_FILE_MAX &&
	       (n = read(fd, text + len, RESOLVER_HOSTS_FILE_MAX - len)) > 0)
		len += (size_t)n;
	if (len == RESOLVER_HOSTS_FILE_MAX)
		log_warnx("dns: %s: only its first %d bytes are read", path,
		          RESOLVER_HOSTS_FILE_MAX);
	h = resolver_hosts_parse(text, len);
out:
	free(text);
	if (fd >= 0)
		close(fd);
	return h;
}

/* ---- lifetime ---- */

static int
upstream_socket(struct resolver *r, int family)
{
	int fi = fam_idx((sa_family_t)family);
	int fd, size = 1 << 20;

	if (r->up_fd[fi] >= 0)
		return 0;
	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("dns: upstream socket (%s)", family == AF_INET6 ? "IPv6" : "IPv4");
		return -1;
	}
	/* Room for bursts of answers; failure only costs retries. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	r->up_fd[fi] = fd;
	r->up_ev[fi] = event_new(r->base, fd, EV_READ | EV_PERSIST, upstream_read, r);
	if (r->up_ev[fi] == NULL || event_add(r->up_ev[fi], NULL) != 0) {
		log_warnx("dns: cannot watch the upstream socket");
		return -1;
	}
	return 0;
}

struct resolver *
resolver_new(struct event_base *base, const struct resolver_config *cfg)
{
	struct resolver *r;

	if (cfg->policy == NULL || cfg->n_upstream > DNS_MAX_UPSTREAMS) {
		log_warnx("dns: the resolver needs a policy and at most %d upstreams",
		          DNS_MAX_UPSTREAMS);
		return NULL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		log_warn("dns: resolver");
		return NULL;
	}
	r->base = base;
	r->cfg = *cfg;
	r->cfg.hosts_path = NULL; /* not kept: borrowed only for this call */
	r->up_fd[0] = r->up_fd[1] = -1;
	r->seed = ((uint64_t)arc4random() << 32) | arc4random();
	if (r->cfg.ttl_cap == 0)
		r->cfg.ttl_cap = RESOLVER_DEFAULT_TTL_CAP;
	if (r->cfg.timeout_ms == 0)
		r->cfg.timeout_ms = RESOLVER_DEFAULT_TIMEOUT_MS;
	r->pending = calloc(RESOLVER_ID_SPACE, sizeof(*r->pending));
	r->acache = dns_acache_new(RESOLVER_ACACHE_SIZE);
	if (r->pending == NULL || r->acache == NULL) {
		log_warn("dns: resolver");
		goto fail;
	}
	for (size_t i = 0; i < r->cfg.n_upstream; i++)
		if (upstream_socket(r, r->cfg.upstream[i].ss_family) != 0)
			goto fail;
	if (cfg->hosts_path != NULL)
		r->hosts = hosts_load(cfg->hosts_path);
	return r;
fail:
	resolver_free(r);
	return NULL;
}

void
resolver_set_limits(struct resolver *r, struct membudget *queue, struct fdres *fds)
{
	r->queue = queue;
	r->fds = fds;
}

void
resolver_set_burst(struct resolver *r, void (*fn)(void *arg, bool begin), void *arg)
{
	r->burst = fn;
	r->burst_arg = arg;
}

void
resolver_free(struct resolver *r)
{
	if (r == NULL)
		return;
	if (r->pending != NULL) {
		/* Questions still in flight are answered too. The count ends
		 * the scan: the table is 512 KiB, mostly never touched. */
		for (size_t i = 0; i < RESOLVER_ID_SPACE && r->n_pending > 0; i++)
			if (r->pending[i] != NULL)
				req_finish(r->pending[i], RESOLVER_FAIL, NULL,
				           "resolver shutting down");
		free(r->pending);
	}
	for (int i = 0; i < 2; i++) {
		if (r->up_ev[i] != NULL)
			event_free(r->up_ev[i]);
		fd_close(&r->up_fd[i]);
	}
	dns_acache_free(r->acache);
	resolver_hosts_free(r->hosts);
	free(r->spare_lookup); /* after the questions: their lookups end in it */
	free(r);
}
