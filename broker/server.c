/* The broker's loop (broker.h): requests from the worker's socket, each in
 * one slot of a fixed table while it resolves and connects, its reply sent
 * with the connected socket. The worker is presumed compromised: every
 * datagram is parsed before use (msg.c), every decision taken here again
 * from the policy, and what a flood costs is bounded by the table. */
#include "broker/broker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/util.h>

#include "broker/decide.h"
#include "broker/msg.h"
#include "broker/sysfilter.h"
#include "common/confine.h"
#include "common/log.h"
#include "common/util.h"
#include "dns/answer.h"
#include "dns/cache.h"
#include "dns/resolver.h"
#include "nft/hostaddr.h"
#include "policy/guard.h"
#include "policy/policy.h"
#include "tls/ca.h"

/* Datagrams read per wakeup: the loop's other work (timers, connects)
 * gets its turn during a flood. */
#define BROKER_READ_BATCH 64
/* Of which one recvmmsg takes at most this many (on the stack). */
#define BROKER_RECV_VEC 16
/* Descriptors a stray SCM_RIGHTS may carry that are received (and closed)
 * at once; more are truncated by the kernel (MSG_CTRUNC), which closes
 * them itself. */
#define BROKER_STRAY_FDS 8
/* Addresses of one answer kept and tried at most (v6 first, then v4, in
 * the resolver's order), as the proxy did (proxy/conn.h, CONN_MAX_ADDRS). */
#define BROKER_MAX_ADDRS 8
/* Addresses the broker remembers having told the sandbox (dns/cache.h):
 * as many as the worker's copy holds (cli/cmd_run.c). */
#define BROKER_TOLD_ENTRIES 4096

struct broker;

enum slot_state {
	SLOT_FREE = 0,
	SLOT_RESOLVING,  /* waiting for the resolver (timer: the deadline) */
	SLOT_CONNECTING, /* a connect under way on fd (event: writable or timeout) */
	SLOT_REPLYING,   /* reply built, waiting for room on the worker's socket */
};

/* One request in flight. */
struct slot {
	struct broker *b;
	enum slot_state state;
	struct broker_request rq;
	struct resolver_lookup *dns; /* SLOT_RESOLVING, a CONNECT_NAME */
	struct resolver_req *q;      /* SLOT_RESOLVING, a RESOLVE */
	struct broker_dns_reply *dreply; /* SLOT_REPLYING, a RESOLVE's (owned) */
	size_t dlen;
	struct event *ev;           /* deadline, or the connect's wait */
	int fd;                     /* the upstream socket */
	struct sockaddr_storage addrs[BROKER_MAX_ADDRS];
	bool audit[BROKER_MAX_ADDRS]; /* addrs[i] let through by audit mode */
	size_t n_addrs, next;
	enum broker_verdict verdict;
	enum broker_status audit_st; /* BROKER_V_AUDIT_DENY: what enforce would refuse */
	char rule[BROKER_RULE_MAX];
	char reason[BROKER_REASON_MAX];
	int last_err;
	bool timed_out;
	struct broker_reply reply; /* SLOT_REPLYING */
};

struct broker_stats {
	uint64_t requests, malformed, dropped, busy, dup_ids, stray_fds, replies_lost, stalls;
	uint64_t leaves; /* LEAF replies sent */
};

struct broker {
	struct event_base *base;
	const struct policy *policy; /* borrowed from the config */
	struct tlsca *ca;            /* borrowed from the config; NULL: MINT refused */
	struct guard_hosts *hosts;
	struct hostaddr_watch *watch;
	struct resolver *res; /* dns/resolver.h: cache, CNAME policy, hosts file */
	/* What the sandbox was told, address -> name with its TTL: the
	 * answers to its questions (RESOLVE), recorded here and nowhere the
	 * worker can write, for a transparent connection's name. */
	struct dns_cache *told;
	int fd; /* the worker's socket, owned */
	struct event *ev_read, *ev_write;
	struct slot *slots;
	unsigned n_slots, n_used;
	/* Refusals that hold no slot and found the socket full: a bounded
	 * ring; while it is full the broker reads no more requests, so a
	 * flood slows its sender and nothing is lost or queued unbounded. */
	struct broker_reply *ring;
	unsigned ring_cap, ring_head, ring_len;
	bool reading;
	uint32_t connect_ms;
	int landlock_abi;
	struct broker_stats st;
};

/* ---- replies ---- */

/* One reply on the socket, with fd attached when >= 0. 0 when sent, 1
 * when the socket is full (EAGAIN), -1 on another error. */
static int
send_msg(struct broker *b, const void *m, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = (void *)m, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		msg.msg_control = cm.buf;
		msg.msg_controllen = sizeof(cm.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	for (;;) {
		if (sendmsg(b->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len)
			return 0;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ? 1 : -1;
	}
}

static int
send_reply(struct broker *b, const struct broker_reply *r, int fd)
{
	return send_msg(b, r, sizeof(*r), fd);
}

/* A slot's reply: a RESOLVE's answer, or a connect's outcome with the
 * socket when connected. */
static int
slot_send(struct slot *s)
{
	if (s->dreply != NULL)
		return send_msg(s->b, s->dreply, s->dlen, -1);
	return send_reply(s->b, &s->reply, s->reply.status == BROKER_OK ? s->fd : -1);
}

static void
set_reading(struct broker *b, bool on)
{
	if (on == b->reading)
		return;
	b->reading = on;
	if (on)
		event_add(b->ev_read, NULL);
	else
		event_del(b->ev_read);
}

/* A reply that holds no slot (a refusal by the parser or the bounds, a
 * self-test's answer): sent now, or kept in the ring behind the ones
 * already waiting. */
static void
reply_now(struct broker *b, const struct broker_reply *r)
{
	int rc = b->ring_len == 0 ? send_reply(b, r, -1) : 1;

	if (rc == 0)
		return;
	if (rc < 0) {
		b->st.replies_lost++;
		return;
	}
	/* The ring is never full here: reading stops when it fills. */
	b->ring[(b->ring_head + b->ring_len++) % b->ring_cap] = *r;
	event_add(b->ev_write, NULL);
	if (b->ring_len == b->ring_cap) {
		b->st.stalls++;
		set_reading(b, false);
	}
}

static void
refuse_now(struct broker *b, uint32_t id, enum broker_status status, const char *reason)
{
	struct broker_reply r;

	broker_build_reply(&r, id, status, BROKER_V_DENY, 0, NULL, NULL, reason);
	reply_now(b, &r);
}

static void
slot_release(struct slot *s)
{
	if (s->dns != NULL) {
		resolver_lookup_cancel(s->dns);
		s->dns = NULL;
	}
	if (s->q != NULL) {
		resolver_cancel(s->q);
		s->q = NULL;
	}
	free(s->dreply);
	s->dreply = NULL;
	if (s->ev != NULL) {
		event_free(s->ev);
		s->ev = NULL;
	}
	fd_close(&s->fd);
	if (s->state != SLOT_FREE)
		s->b->n_used--;
	s->state = SLOT_FREE;
}

/* Send s's reply (with s->fd when connected) and free the slot; when the
 * socket is full, keep both until it drains (broker_writable). */
static void
slot_finish(struct slot *s)
{
	struct broker *b = s->b;
	int rc = slot_send(s);

	if (rc < 0 && s->dreply != NULL && errno == EMSGSIZE) {
		/* A socket buffer smaller than the answer (net.core.wmem_max
		 * below BROKER_SOCK_BUF): the question still gets its answer,
		 * a refusal that says why, sent as any other. */
		free(s->dreply);
		s->dreply = NULL;
		broker_build_reply(&s->reply, s->rq.id, BROKER_E_RESOURCE, BROKER_V_DENY, EMSGSIZE,
		                   NULL, NULL, "the answer is larger than the broker's socket takes");
		rc = slot_send(s);
	}
	if (rc == 1) {
		if (s->ev != NULL) {
			event_free(s->ev);
			s->ev = NULL;
		}
		s->state = SLOT_REPLYING;
		event_add(b->ev_write, NULL);
		return;
	}
	if (rc < 0)
		b->st.replies_lost++;
	slot_release(s);
}

/* Answer s with a refusal (or the outcome): addr may be NULL. */
static void
slot_reply(struct slot *s, enum broker_status status, int err, const struct sockaddr *addr,
           const char *reason)
{
	/* Connected under audit mode: the reason says what enforce would
	 * have refused. */
	if (status == BROKER_OK && reason == NULL && s->reason[0] != '\0')
		reason = s->reason;
	broker_build_reply(&s->reply, s->rq.id, status,
	                   status == BROKER_OK ? s->verdict : BROKER_V_DENY, err, addr, s->rule,
	                   reason);
	if (status == BROKER_OK && s->verdict == BROKER_V_AUDIT_DENY)
		s->reply.audit = (uint8_t)s->audit_st;
	/* Every status but OK carries no descriptor. */
	if (status != BROKER_OK)
		fd_close(&s->fd);
	slot_finish(s);
}

static void
broker_writable(evutil_socket_t fd, short what, void *arg)
{
	struct broker *b = arg;
	bool pending = false;

	(void)fd;
	(void)what;
	while (b->ring_len > 0) {
		int rc = send_reply(b, &b->ring[b->ring_head], -1);

		if (rc == 1) {
			event_add(b->ev_write, NULL);
			return;
		}
		if (rc < 0)
			b->st.replies_lost++;
		b->ring_head = (b->ring_head + 1) % b->ring_cap;
		b->ring_len--;
	}
	set_reading(b, true);
	for (unsigned i = 0; i < b->n_slots; i++) {
		struct slot *s = &b->slots[i];
		int rc;

		if (s->state != SLOT_REPLYING)
			continue;
		rc = slot_send(s);
		if (rc == 1) {
			pending = true;
			break;
		}
		if (rc < 0)
			b->st.replies_lost++;
		slot_release(s);
	}
	if (pending)
		event_add(b->ev_write, NULL);
}

/* ---- connecting ---- */

static void try_next(struct slot *s);
static void resolve_start(struct slot *s);

static void
connect_event(evutil_socket_t fd, short what, void *arg)
{
	struct slot *s = arg;
	int soerr = 0;
	socklen_t len = sizeof(soerr);

	if (what & EV_TIMEOUT) {
		s->last_err = ETIMEDOUT;
		s->timed_out = true;
	} else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) {
		s->last_err = errno;
	} else if (soerr == 0) {
		event_free(s->ev);
		s->ev = NULL;
		slot_reply(s, BROKER_OK, 0, (const struct sockaddr *)&s->addrs[s->next - 1], NULL);
		return;
	} else {
		s->last_err = soerr;
	}
	try_next(s);
}

/* Try the addresses from s->next on; after the last, refuse with the last
 * error. An address let through by audit mode marks the verdict. */
static void
try_next(struct slot *s)
{
	struct broker *b = s->b;
	struct timeval tv = {.tv_sec = b->connect_ms / 1000,
	                     .tv_usec = (b->connect_ms % 1000) * 1000};
	char ip[INET6_ADDRSTRLEN], why[BROKER_REASON_MAX];

	if (s->ev != NULL) {
		event_free(s->ev);
		s->ev = NULL;
	}
	fd_close(&s->fd);
	while (s->next < s->n_addrs) {
		const struct sockaddr_storage *a = &s->addrs[s->next];
		socklen_t alen = a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
		                                          : sizeof(struct sockaddr_in);

		if (s->audit[s->next] && s->verdict == BROKER_V_ALLOW) {
			const char *rule = NULL;

			s->verdict = BROKER_V_AUDIT_DENY;
			s->audit_st = BROKER_E_DENY_CIDR;
			(void)guard_addr_check(b->policy, b->hosts, (const struct sockaddr *)a,
			                       s->rq.port, s->reason, sizeof(s->reason), &rule);
			str_copy(s->rule, rule != NULL ? rule : "", sizeof(s->rule));
		}
		s->next++;
		s->fd = socket(a->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s->fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				slot_reply(s, BROKER_E_RESOURCE, errno, NULL,
				           errno == ENOMEM ? "out of memory"
				                           : "out of file descriptors");
				return;
			}
			s->last_err = errno;
			continue;
		}
		if (connect(s->fd, (const struct sockaddr *)a, alen) == 0) {
			slot_reply(s, BROKER_OK, 0, (const struct sockaddr *)a, NULL);
			return;
		}
		if (errno != EINPROGRESS) {
			s->last_err = errno;
			fd_close(&s->fd);
			continue;
		}
		s->ev = event_new(b->base, s->fd, EV_WRITE, connect_event, s);
		if (s->ev == NULL || event_add(s->ev, &tv) != 0) {
			slot_reply(s, BROKER_E_RESOURCE, ENOMEM, NULL, "out of memory");
			return;
		}
		s->state = SLOT_CONNECTING;
		return;
	}
	broker_addr_str((const struct sockaddr *)&s->addrs[s->n_addrs - 1], ip, sizeof(ip));
	if (s->timed_out && s->last_err == ETIMEDOUT) {
		snprintf(why, sizeof(why), "connecting to %s port %u timed out", ip,
		         (unsigned)s->rq.port);
		slot_reply(s, BROKER_E_TIMEOUT, ETIMEDOUT,
		           (const struct sockaddr *)&s->addrs[s->n_addrs - 1], why);
	} else if (s->last_err == ECONNREFUSED) {
		snprintf(why, sizeof(why), "%s port %u refused the connection", ip,
		         (unsigned)s->rq.port);
		slot_reply(s, BROKER_E_REFUSED, ECONNREFUSED,
		           (const struct sockaddr *)&s->addrs[s->n_addrs - 1], why);
	} else {
		snprintf(why, sizeof(why), "connecting to %s port %u: %s", ip, (unsigned)s->rq.port,
		         strerror(s->last_err));
		slot_reply(s, BROKER_E_UNREACHABLE, s->last_err,
		           (const struct sockaddr *)&s->addrs[s->n_addrs - 1], why);
	}
}

static void
set_port(struct sockaddr_storage *a, uint16_t port)
{
	if (a->ss_family == AF_INET6)
		((struct sockaddr_in6 *)a)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)a)->sin_port = htons(port);
}

static bool
same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
	              &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

/* The deny cidr rules and the guard over s->addrs: keep what may be
 * dialled (audit-denied ones last, so audit marks only what enforce would
 * refuse), then connect; none left refuses with the first refusal. */
static void
filter_and_connect(struct slot *s)
{
	struct broker *b = s->b;
	struct sockaddr_storage kept[BROKER_MAX_ADDRS], late[BROKER_MAX_ADDRS], refused;
	size_t n_kept = 0, n_late = 0;
	enum guard_addr_verdict first = GUARD_ADDR_PERMITTED;
	const char *first_rule = NULL;
	char why[BROKER_REASON_MAX] = "";

	for (size_t i = 0; i < s->n_addrs; i++) {
		const char *rule = NULL;
		enum guard_addr_verdict v;

		set_port(&s->addrs[i], s->rq.port);
		v = guard_addr_check(b->policy, b->hosts, (const struct sockaddr *)&s->addrs[i],
		                     s->rq.port, first == GUARD_ADDR_PERMITTED ? why : NULL,
		                     sizeof(why), &rule);
		if (v == GUARD_ADDR_PERMITTED) {
			kept[n_kept++] = s->addrs[i];
		} else if (v == GUARD_ADDR_AUDIT_DENIED) {
			late[n_late++] = s->addrs[i];
			if (first == GUARD_ADDR_PERMITTED)
				why[0] = '\0';
		} else if (first == GUARD_ADDR_PERMITTED) {
			first = v;
			first_rule = rule;
			refused = s->addrs[i];
		}
	}
	if (n_kept + n_late == 0) {
		if (first == GUARD_ADDR_REFUSED_CIDR) {
			str_copy(s->rule, first_rule != NULL ? first_rule : "", sizeof(s->rule));
			slot_reply(s, BROKER_E_DENY_CIDR, 0, (const struct sockaddr *)&refused,
			           why);
		} else {
			slot_reply(s, BROKER_E_GUARD, 0, (const struct sockaddr *)&refused, why);
		}
		return;
	}
	for (size_t i = 0; i < n_kept; i++) {
		s->addrs[i] = kept[i];
		s->audit[i] = false;
	}
	for (size_t i = 0; i < n_late; i++) {
		s->addrs[n_kept + i] = late[i];
		s->audit[n_kept + i] = true;
	}
	s->n_addrs = n_kept + n_late;
	s->next = 0;
	try_next(s);
}

/* A reason for the log, cut to the reply's field: a long name may cut
 * it, never the reply. */
__attribute__((format(printf, 3, 4))) static void
say(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

/* Audit mode let through what enforce refuses: the reply says which
 * refusal (the worker's log line names it). */
static void
slot_audit(struct slot *s, enum broker_status st, const char *why)
{
	s->verdict = BROKER_V_AUDIT_DENY;
	s->audit_st = st;
	str_copy(s->reason, why, sizeof(s->reason));
}

/* Refuse after the resolver's answer res, in the words the proxy's log
 * has always used for it (docs/log.md, "Reasons"). */
static void
refuse_answer(struct slot *s, const struct resolver_addrs *res)
{
	const char *name = s->rq.name;
	struct sockaddr_storage refused;
	char why[BROKER_REASON_MAX];

	switch (res->status) {
	case RESOLVER_ADDRS_CNAME:
		/* The chain decided, not a rule that matched the name. */
		s->rule[0] = '\0';
		say(why, sizeof(why), "%s: %s", name, res->why);
		slot_reply(s, BROKER_E_CNAME, 0, NULL, why);
		return;
	case RESOLVER_ADDRS_GUARD:
		refused = res->refused;
		set_port(&refused, s->rq.port);
		say(why, sizeof(why), "%s: %s", name, res->why);
		slot_reply(s, BROKER_E_GUARD, 0,
		           refused.ss_family != 0 ? (const struct sockaddr *)&refused : NULL, why);
		return;
	case RESOLVER_ADDRS_TIMEOUT:
		say(why, sizeof(why), "resolving %s timed out (%s)", name, res->why);
		slot_reply(s, BROKER_E_DNS_TIMEOUT, 0, NULL, why);
		return;
	case RESOLVER_ADDRS_NXDOMAIN:
		say(why, sizeof(why), "%s does not resolve (no such name)", name);
		break;
	case RESOLVER_ADDRS_NODATA:
	case RESOLVER_ADDRS_OK: /* with no address */
		say(why, sizeof(why), "%s does not resolve (no addresses)", name);
		break;
	case RESOLVER_ADDRS_FAIL:
		say(why, sizeof(why), "%s does not resolve (%s)", name,
		         res->why[0] != '\0' ? res->why : "resolver failed");
		break;
	}
	slot_reply(s, BROKER_E_DNS, 0, NULL, why);
}

/* Keep v6 first, then v4 (as the resolver gives them), at most
 * BROKER_MAX_ADDRS, without repeats; a mapped v6 answer is the v4
 * address it is. */
static void
take_addrs(struct slot *s, const struct resolver_addrs *res)
{
	s->n_addrs = 0;
	for (size_t i = 0; i < res->n && s->n_addrs < BROKER_MAX_ADDRS; i++) {
		struct broker_addr ba;
		struct sockaddr_storage a;
		bool dup = false;

		broker_addr_set(&ba, (const struct sockaddr *)&res->addr[i], 0);
		if (broker_addr_get(&ba, &a) != 0)
			continue;
		for (size_t k = 0; k < s->n_addrs && !dup; k++)
			dup = same_addr(&s->addrs[k], &a);
		if (!dup)
			s->addrs[s->n_addrs++] = a;
	}
}

static bool
told(struct broker *b, const struct sockaddr_storage *a, const char *name)
{
	return dns_cache_told(b->told, (const struct sockaddr *)a, name, now_ms() / 1000);
}

static void
resolved(const struct resolver_addrs *res, void *arg)
{
	struct slot *s = arg;
	bool found = false;

	s->dns = NULL;
	if (s->ev != NULL) {
		event_free(s->ev); /* the deadline */
		s->ev = NULL;
	}
	if (res->status != RESOLVER_ADDRS_OK || res->n == 0) {
		refuse_answer(s, res);
		return;
	}
	take_addrs(s, res);
	if (s->n_addrs == 0) {
		refuse_answer(s, &(struct resolver_addrs){.status = RESOLVER_ADDRS_NODATA});
		return;
	}
	if (res->audit_cname && s->verdict == BROKER_V_ALLOW) {
		char why[BROKER_REASON_MAX];

		say(why, sizeof(why), "%s: CNAME to a denied name", s->rq.name);
		slot_audit(s, BROKER_E_CNAME, why);
	}
	if (s->rq.flags & BROKER_F_ORIG) {
		/* Connect only to the original destination, and only if the
		 * name resolves to it: a name alone never decides. */
		for (size_t i = 0; i < s->n_addrs; i++)
			found = found || same_addr(&s->addrs[i], &s->rq.addr);
		/* Or the broker told the sandbox so, answering its question
		 * for the name within the TTL (servers that rotate their
		 * answers give this lookup others): the broker's own record,
		 * which the worker cannot write. The guard still applies. */
		found = found || told(s->b, &s->rq.addr, s->rq.name);
		s->addrs[0] = s->rq.addr;
		s->n_addrs = 1;
		if (!found) {
			if (policy_mode(s->b->policy) != POLICY_MODE_AUDIT) {
				slot_reply(s, BROKER_E_NOT_ORIG, 0,
				           (const struct sockaddr *)&s->rq.addr,
				           "name does not resolve to the original destination");
				return;
			}
			slot_audit(s, BROKER_E_NOT_ORIG,
			           "name does not resolve to the original destination");
		}
	}
	filter_and_connect(s);
}

static void
resolve_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct slot *s = arg;
	char why[BROKER_REASON_MAX];

	(void)fd;
	(void)what;
	/* The resolver has its own timeouts (dns/resolver.h); this one
	 * bounds the whole wait, whatever the resolver does. */
	resolver_lookup_cancel(s->dns);
	s->dns = NULL;
	say(why, sizeof(why), "resolving %s took longer than %u ms", s->rq.name,
	         (unsigned)s->b->connect_ms);
	slot_reply(s, BROKER_E_DNS_TIMEOUT, 0, NULL, why);
}

/* ---- deciding ---- */

/* The policy on the name and port, decided here again. True to go on
 * (allowed, or audit mode); false after refusing. */
static bool
decide_name(struct slot *s)
{
	const struct policy *p = s->b->policy;
	struct policy_verdict v;
	bool ech_refused = false;
	char why[BROKER_REASON_MAX];

	policy_match_host(p, s->rq.name, s->rq.port, &v);
	str_copy(s->rule, v.where != NULL ? v.where : "", sizeof(s->rule));
	if (v.action == POLICY_ALLOW && (s->rq.flags & BROKER_F_ECH)) {
		const char *ech = policy_match_ech(p, s->rq.name, s->rq.port);

		ech_refused = ech == NULL;
		if (ech != NULL)
			str_copy(s->rule, ech, sizeof(s->rule));
	}
	if (v.action == POLICY_ALLOW && !ech_refused) {
		s->verdict = BROKER_V_ALLOW;
		return true;
	}
	if (ech_refused)
		snprintf(why, sizeof(why),
		         "ClientHello has encrypted_client_hello; no rule for %.80s has `ech: "
		         "allow`",
		         s->rq.name);
	else if (v.action == POLICY_DENY)
		str_copy(why, "denied by rule", sizeof(why));
	else
		snprintf(why, sizeof(why), "no rule allows %.100s port %u", s->rq.name,
		         (unsigned)s->rq.port);
	if (policy_mode(p) == POLICY_MODE_AUDIT) {
		slot_audit(s,
		           ech_refused               ? BROKER_E_ECH
		           : v.action == POLICY_DENY ? BROKER_E_DENIED
		                                     : BROKER_E_NO_RULE,
		           why);
		return true;
	}
	slot_reply(s,
	           ech_refused               ? BROKER_E_ECH
	           : v.action == POLICY_DENY ? BROKER_E_DENIED
	                                     : BROKER_E_NO_RULE,
	           0, NULL, why);
	return false;
}

/* An address: only a cidr rule allows it. */
static bool
decide_addr(struct slot *s)
{
	const struct policy *p = s->b->policy;
	struct policy_verdict v;
	char ip[INET6_ADDRSTRLEN], why[BROKER_REASON_MAX];

	policy_match_addr(p, (const struct sockaddr *)&s->rq.addr, s->rq.port, &v);
	str_copy(s->rule, v.where != NULL ? v.where : "", sizeof(s->rule));
	if (v.action == POLICY_ALLOW) {
		s->verdict = BROKER_V_ALLOW;
		return true;
	}
	broker_addr_str((const struct sockaddr *)&s->rq.addr, ip, sizeof(ip));
	if (v.action == POLICY_DENY)
		str_copy(why, "denied by rule", sizeof(why));
	else
		snprintf(why, sizeof(why), "no rule allows address %s port %u", ip,
		         (unsigned)s->rq.port);
	if (policy_mode(p) == POLICY_MODE_AUDIT) {
		slot_audit(s, v.action == POLICY_DENY ? BROKER_E_DENIED : BROKER_E_NO_RULE, why);
		return true;
	}
	slot_reply(s, v.action == POLICY_DENY ? BROKER_E_DENIED : BROKER_E_NO_RULE, 0,
	           (const struct sockaddr *)&s->rq.addr, why);
	return false;
}

static void
slot_start(struct slot *s)
{
	struct broker *b = s->b;
	struct timeval tv = {.tv_sec = b->connect_ms / 1000,
	                     .tv_usec = (b->connect_ms % 1000) * 1000};
	struct resolver_addrs now;

	if (s->rq.type == BROKER_MSG_RESOLVE) {
		resolve_start(s);
		return;
	}
	if (s->rq.type == BROKER_MSG_CONNECT_ADDR) {
		if (!decide_addr(s))
			return;
		s->addrs[0] = s->rq.addr;
		s->n_addrs = 1;
		filter_and_connect(s);
		return;
	}
	if (!decide_name(s))
		return;
	s->state = SLOT_RESOLVING;
	/* An answer known at once (cache, hosts file, a local failure)
	 * is in now; else resolved() follows from the loop, and only then
	 * is there a deadline to keep (most names are in the cache: no
	 * timer made and freed for each). */
	s->dns = resolver_lookup(b->res, s->rq.name, resolved, s, &now);
	if (s->dns == NULL) {
		resolved(&now, s);
		return;
	}
	s->ev = evtimer_new(b->base, resolve_deadline, s);
	if (s->ev == NULL || evtimer_add(s->ev, &tv) != 0) {
		resolver_lookup_cancel(s->dns);
		s->dns = NULL;
		slot_reply(s, BROKER_E_RESOURCE, ENOMEM, NULL, "out of memory");
	}
}

/* ---- the sandbox's questions ---- */

/* Send s's DNS reply: the answer f (status ANSWER) or none. Out of memory
 * for it, the worker still gets an answer: the refusal the slot holds
 * room for (the client fails the question with it). */
static void
dns_finish(struct slot *s, enum broker_dns_status st, enum verdict_reason why, unsigned flags,
           const struct dns_filtered *f, const char *text)
{
	size_t n = f != NULL ? (f->n < DNS_MAX_RR ? f->n : DNS_MAX_RR) : 0;

	s->dreply = malloc(sizeof(*s->dreply) + n * sizeof(s->dreply->rr[0]));
	if (s->dreply == NULL) {
		slot_reply(s, BROKER_E_RESOURCE, ENOMEM, NULL, "out of memory");
		return;
	}
	s->dlen = broker_build_dns_reply(s->dreply, s->rq.id, st, why, flags, f, text);
	slot_finish(s);
}

/* The resolver's answer to a RESOLVE: record what the sandbox is told
 * (address -> the name it asked, for the TTL, at least DNS_CACHE_MIN_TTL:
 * exactly what the listener's copy records), and reply. */
static void
dns_answered(const struct resolver_result *res, void *arg)
{
	struct slot *s = arg;
	struct broker *b = s->b;
	unsigned flags = (res->cached ? BROKER_DNS_F_CACHED : 0) |
	                 (res->from_hosts ? BROKER_DNS_F_HOSTS : 0);
	uint64_t now_s = now_ms() / 1000;

	s->q = NULL;
	if (res->status == RESOLVER_TIMEOUT) {
		dns_finish(s, BROKER_DNS_TIMEOUT, VR_DNS_TIMEOUT, flags, NULL, res->why);
		return;
	}
	if (res->status != RESOLVER_ANSWER) {
		dns_finish(s, BROKER_DNS_FAIL, VR_DNS_UPSTREAM, flags, NULL, res->why);
		return;
	}
	for (size_t i = 0; i < res->f->n && i < DNS_MAX_RR; i++) {
		const struct dns_rr *rr = &res->f->rr[i];
		struct sockaddr_storage ss;

		if (dns_rr_addr(rr, &ss) != 0)
			continue;
		dns_cache_put(b->told, (const struct sockaddr *)&ss, s->rq.name,
		              rr->ttl < DNS_CACHE_MIN_TTL ? DNS_CACHE_MIN_TTL : rr->ttl, now_s);
	}
	dns_finish(s, BROKER_DNS_ANSWER, res->f->why, flags, res->f, res->why);
}

/* A question from the sandbox, decided here again on the broker's policy
 * as the listener decides it (dns_decide, audit mode included): only
 * what the policy forwards is asked upstream. */
static void
resolve_start(struct slot *s)
{
	struct broker *b = s->b;
	struct dns_query q;
	struct dns_decision d;
	struct resolver_result now;

	memset(&q, 0, sizeof(q));
	str_copy(q.qname, s->rq.qname, sizeof(q.qname));
	q.qtype = s->rq.qtype;
	q.qclass = s->rq.qclass;
	dns_decide(b->policy, &q, &d);
	if (d.action != DNS_ACT_FORWARD || strcmp(d.name, s->rq.name) != 0) {
		dns_finish(s, BROKER_DNS_REFUSED, d.why != VR_NONE ? d.why : VR_DNS_QTYPE, 0, NULL,
		           d.detail[0] != '\0' ? d.detail : "the broker does not forward it");
		return;
	}
	s->state = SLOT_RESOLVING;
	/* The resolver bounds the wait (its timeout_ms): no deadline here. */
	s->q = resolver_ask(b->res, &q, d.name, dns_answered, s, &now);
	if (s->q == NULL)
		dns_answered(&now, s);
}

/* ---- the self-test (test builds) ---- */

#ifdef BROKER_SELFTEST
#include <netinet/in.h>

/* Do what the confined broker must not be able to do; the errno says
 * what stopped it. The ABI ops do not return: the kernel kills us. */
static int
selftest(struct broker *b, uint32_t op)
{
	static char *const argv[] = {"/bin/true", NULL};
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd;

	errno = 0;
	switch (op) {
	case BROKER_SELFTEST_OPEN:
		fd = (int)syscall(SYS_openat, AT_FDCWD, "/etc/passwd", O_RDONLY | O_CLOEXEC);
		break;
	case BROKER_SELFTEST_EXECVE:
		fd = (int)syscall(SYS_execve, argv[0], argv, argv + 1);
		break;
	case BROKER_SELFTEST_UNIX:
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		break;
	case BROKER_SELFTEST_BIND:
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			close(fd);
			return 0;
		} else if (fd >= 0) {
			int e = errno;

			close(fd);
			return e;
		}
		break;
	case BROKER_SELFTEST_LANDLOCK:
		return b->landlock_abi;
	case BROKER_SELFTEST_RAW:
		fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
		break;

	case BROKER_SELFTEST_X32:
		/* __X32_SYSCALL_BIT | getpid */
		fd = (int)syscall(0x40000000L | SYS_getpid);
		break;
	default: /* BROKER_SELFTEST_I386: getpid (20) through int 0x80 */
#if defined(__x86_64__)
	{
		long ret;

		__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
		fd = (int)ret;
	}
#else
		fd = -1;
		errno = ENOSYS;
#endif
	break;
	}
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno;
}
#define BROKER_HAS_SELFTEST true
#else
#define BROKER_HAS_SELFTEST false
#endif

/* ---- requests ---- */

static struct slot *
slot_by_id(struct broker *b, uint32_t id)
{
	for (unsigned i = 0; i < b->n_slots; i++)
		if (b->slots[i].state != SLOT_FREE && b->slots[i].rq.id == id)
			return &b->slots[i];
	return NULL;
}

/* A MINT, answered at once: signing takes well under a millisecond and
 * is bounded by the task's limit (tls/ca.h), so it needs no slot. The
 * broker decides again: only a name and port an inspecting rule of its
 * policy matches gets a leaf. A LEAF that finds the socket full (or
 * replies already waiting) is not kept: the worker is told BUSY through
 * the ring instead, so nothing waits unbounded. */
static void
handle_mint(struct broker *b, const struct broker_request *rq)
{
	struct broker_leaf m;
	const unsigned char *der;
	size_t der_len;
	enum tlsca_status st;

	if (b->ca == NULL || policy_match_inspect(b->policy, rq->name, rq->port) == NULL) {
		refuse_now(b, rq->id, BROKER_E_NOT_INSPECTED,
		           "no inspecting rule matches this name and port");
		return;
	}
	st = tlsca_leaf(b->ca, rq->name, &der, &der_len);
	if (st != TLSCA_OK) {
		refuse_now(b, rq->id,
		           st == TLSCA_LIMIT      ? BROKER_E_MINT_LIMIT
		           : st == TLSCA_BAD_NAME ? BROKER_E_BAD_NAME
		                                  : BROKER_E_RESOURCE,
		           st == TLSCA_LIMIT ? "the task's limit of minted leaf certificates is spent"
		                             : tlsca_status_name(st));
		return;
	}
	if (broker_build_leaf(&m, rq->id, der, der_len) != 0) {
		refuse_now(b, rq->id, BROKER_E_RESOURCE, "leaf certificate too large");
		return;
	}
	if (b->ring_len == 0) {
		int rc = send_msg(b, &m, sizeof(m), -1);

		if (rc == 0) {
			b->st.leaves++;
			return;
		}
		if (rc < 0) {
			b->st.replies_lost++;
			return;
		}
	}
	b->st.busy++;
	refuse_now(b, rq->id, BROKER_E_BUSY, "replies are waiting; ask again");
}

static void
handle(struct broker *b, const void *buf, size_t len, bool bad_cmsg)
{
	struct broker_request rq;
	enum broker_parse p = broker_parse_request(buf, len, BROKER_HAS_SELFTEST, &rq);
	struct slot *s = NULL;

	b->st.requests++;
	if (p == BROKER_PARSE_SHORT) {
		b->st.dropped++;
		return;
	}
	/* A request that came with descriptors is refused whole: nothing
	 * the worker sends may carry one. */
	if (p == BROKER_PARSE_OK && bad_cmsg)
		p = BROKER_PARSE_FDS;
	if (p != BROKER_PARSE_OK) {
		b->st.malformed++;
		/* id 0 is never a request's: nobody waits for its answer. */
		if (rq.id != 0)
			refuse_now(b, rq.id, broker_parse_status(p), broker_parse_name(p));
		else
			b->st.dropped++;
		return;
	}
	if (slot_by_id(b, rq.id) != NULL) {
		b->st.dup_ids++;
		refuse_now(b, rq.id, BROKER_E_DUP_ID, "request id already in flight");
		return;
	}
#ifdef BROKER_SELFTEST
	if (rq.type == BROKER_MSG_SELFTEST) {
		struct broker_reply r;

		broker_build_reply(&r, rq.id, BROKER_OK, BROKER_V_DENY, selftest(b, rq.op), NULL,
		                   NULL, NULL);
		reply_now(b, &r);
		return;
	}
#endif
	if (rq.type == BROKER_MSG_MINT) {
		handle_mint(b, &rq);
		return;
	}
	if (b->n_used < b->n_slots)
		for (unsigned i = 0; i < b->n_slots && s == NULL; i++)
			if (b->slots[i].state == SLOT_FREE)
				s = &b->slots[i];
	if (s == NULL) {
		b->st.busy++;
		refuse_now(b, rq.id, BROKER_E_BUSY, "too many requests in flight");
		return;
	}
	memset(s, 0, sizeof(*s));
	s->b = b;
	s->fd = -1;
	s->rq = rq;
	s->state = SLOT_RESOLVING; /* taken; slot_start sets the real state */
	b->n_used++;
	slot_start(s);
}

/* Close every descriptor a control message brought. True when there was
 * any, or the kernel truncated it (it closed the rest itself). */
static bool
close_stray(struct broker *b, struct msghdr *msg)
{
	bool bad = (msg->msg_flags & MSG_CTRUNC) != 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
		bad = true;
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len >= CMSG_LEN(0)) {
			size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < n; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (fd >= 0) {
					close(fd);
					b->st.stray_fds++;
				}
			}
		}
	}
	return bad;
}

/* One received datagram, as recvmsg left it: refused, dropped or
 * handled. False when the worker's end is gone (the loop is told). */
static bool
take_one(struct broker *b, int fd, unsigned char *buf, size_t cap, struct msghdr *msg, size_t n)
{
	bool bad = close_stray(b, msg);

	if (n == 0) {
		/* An empty datagram reads as 0 too: only a hang-up ends the
		 * broker. */
		struct pollfd pfd = {.fd = fd, .events = POLLIN | POLLRDHUP};

		if (poll(&pfd, 1, 0) < 0 || (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
			event_base_loopbreak(b->base);
			return false;
		}
		b->st.requests++;
		b->st.dropped++;
		return true;
	}
	if (msg->msg_flags & MSG_TRUNC) {
		/* Too long for any type: refuse it by its header. */
		handle(b, buf, cap, true);
		return true;
	}
	handle(b, buf, n, bad);
	return true;
}

/* Up to BROKER_READ_BATCH datagrams per wakeup, BROKER_RECV_VEC per
 * recvmmsg: a call that returns fewer than asked found the socket empty,
 * so a wakeup costs one call, not one per datagram and one more that
 * says EAGAIN. Never more at once than the reply ring has room for: each
 * datagram handled adds at most one reply to it (reply_now), so it
 * cannot overflow before reading stops. */
static void
broker_readable(evutil_socket_t fd, short what, void *arg)
{
	struct broker *b = arg;
	unsigned done = 0;

	(void)what;
	while (done < BROKER_READ_BATCH && b->reading) {
		/* One byte more than the largest message: a longer datagram
		 * shows as MSG_TRUNC, never as one that fits. */
		_Alignas(8) unsigned char buf[BROKER_RECV_VEC][BROKER_MSG_MAX + 1];
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int) * BROKER_STRAY_FDS)];
		} cm[BROKER_RECV_VEC];
		struct iovec iov[BROKER_RECV_VEC];
		struct mmsghdr v[BROKER_RECV_VEC];
		unsigned want = BROKER_RECV_VEC, room = b->ring_cap - b->ring_len;
		int got;

		if (want > BROKER_READ_BATCH - done)
			want = BROKER_READ_BATCH - done;
		if (want > room)
			want = room;
		memset(v, 0, sizeof(v[0]) * want);
		for (unsigned i = 0; i < want; i++) {
			iov[i] = (struct iovec){.iov_base = buf[i], .iov_len = sizeof(buf[i])};
			v[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i],
			                               .msg_iovlen = 1,
			                               .msg_control = cm[i].buf,
			                               .msg_controllen = sizeof(cm[i].buf)};
		}
		got = recvmmsg(fd, v, want, MSG_DONTWAIT | MSG_CMSG_CLOEXEC, NULL);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			log_warn("broker: reading requests");
			event_base_loopbreak(b->base);
			return;
		}
		for (int i = 0; i < got; i++)
			if (!take_one(b, fd, buf[i], sizeof(buf[i]), &v[i].msg_hdr, v[i].msg_len))
				return;
		done += (unsigned)got;
		if ((unsigned)got < want)
			return;
	}
}

/* ---- set-up ---- */

static void
broker_free(struct broker *b)
{
	if (b->slots != NULL) {
		/* A free slot holds nothing (its fd field is not a
		 * descriptor until handle() takes the slot). */
		for (unsigned i = 0; i < b->n_slots; i++)
			if (b->slots[i].state != SLOT_FREE)
				slot_release(&b->slots[i]);
		free(b->slots);
	}
	free(b->ring);
	if (b->ev_read != NULL)
		event_free(b->ev_read);
	if (b->ev_write != NULL)
		event_free(b->ev_write);
	resolver_free(b->res);
	dns_cache_free(b->told);
	hostaddr_watch_free(b->watch);
	guard_hosts_free(b->hosts);
	if (b->base != NULL)
		event_base_free(b->base);
	fd_close(&b->fd);
}

/* No capabilities (a broker forked from root keeps none: no raw
 * sockets, no SO_MARK), no_new_privs, then Landlock, then seccomp last:
 * each later step is allowed by the ones before it. */
static int
broker_confine(struct broker *b)
{
	if (confine_drop_caps() != 0) {
		log_warn("broker: dropping capabilities");
		return -1;
	}
	if (confine_no_new_privs() != 0) {
		log_warn("broker: no_new_privs");
		return -1;
	}
	b->landlock_abi = confine_landlock(0);
	if (b->landlock_abi < 0) {
		log_warn("broker: Landlock");
		return -1;
	}
	if (b->landlock_abi == 0)
		log_info("broker: this kernel has no Landlock; seccomp alone keeps it off the "
		         "filesystem");
	if (confine_seccomp(broker_seccomp_bpf, broker_seccomp_bpf_len) != 0) {
		log_warn("broker: seccomp");
		return -1;
	}
	return 0;
}

int
broker_serve(const struct broker_cfg *cfg, int fd, bool confine)
{
	struct broker b;
	char err[256];
	int status = 1;

	memset(&b, 0, sizeof(b));
	b.fd = fd;
	b.policy = cfg->policy;
	b.ca = cfg->ca;
	b.connect_ms =
	        cfg->connect_timeout_ms != 0 ? cfg->connect_timeout_ms : BROKER_DEFAULT_CONNECT_MS;
	b.n_slots = cfg->max_inflight != 0 ? cfg->max_inflight : BROKER_DEFAULT_INFLIGHT;
	if (b.n_slots > BROKER_MAX_INFLIGHT)
		b.n_slots = BROKER_MAX_INFLIGHT;
	if (cfg->policy == NULL || cfg->dns.n_upstream > DNS_MAX_UPSTREAMS) {
		log_warnx("broker: bad configuration");
		goto out;
	}
	if (fd_set_nonblock(fd, true) != 0 || (b.base = event_base_new()) == NULL ||
	    (b.slots = calloc(b.n_slots, sizeof(*b.slots))) == NULL) {
		log_warnx("broker: cannot create the event loop");
		goto out;
	}
	/* Left untouched until used: the table's pages are only faulted in
	 * as a flood fills it. */
	b.ring_cap = b.n_slots < 64 ? 64 : b.n_slots;
	if ((b.ring = calloc(b.ring_cap, sizeof(*b.ring))) == NULL) {
		log_warnx("broker: out of memory");
		goto out;
	}
	{
		/* The one resolver (dns/resolver.h), here alone: the hosts
		 * file is read now, before confinement shuts the filesystem. */
		struct resolver_config rc = cfg->dns;

		rc.policy = cfg->policy;
		if ((b.res = resolver_new(b.base, &rc)) == NULL) {
			log_warnx("broker: cannot create the resolver");
			goto out;
		}
		if ((b.told = dns_cache_new(BROKER_TOLD_ENTRIES)) == NULL) {
			log_warnx("broker: out of memory");
			goto out;
		}
	}
	/* The host's own addresses, followed for the whole run from the
	 * namespace the broker runs in (the host's). */
	if ((b.hosts = guard_hosts_new(0)) == NULL ||
	    (b.watch = hostaddr_watch_new(b.base, b.hosts, err, sizeof(err))) == NULL) {
		log_warnx("broker: %s", b.hosts == NULL ? "host addresses: out of memory" : err);
		goto out;
	}
	b.ev_read = event_new(b.base, fd, EV_READ | EV_PERSIST, broker_readable, &b);
	b.ev_write = event_new(b.base, fd, EV_WRITE, broker_writable, &b);
	if (b.ev_read == NULL || b.ev_write == NULL || event_add(b.ev_read, NULL) != 0) {
		log_warnx("broker: cannot watch the worker's socket");
		goto out;
	}
	b.reading = true;
	if (confine && broker_confine(&b) != 0)
		goto out;
	event_base_dispatch(b.base);
	log_debug("broker: %llu requests, %llu malformed, %llu dropped, %llu busy, %llu "
	          "duplicate ids, %llu stray descriptors, %llu replies lost, %llu stalls, %llu "
	          "leaves sent",
	          (unsigned long long)b.st.requests, (unsigned long long)b.st.malformed,
	          (unsigned long long)b.st.dropped, (unsigned long long)b.st.busy,
	          (unsigned long long)b.st.dup_ids, (unsigned long long)b.st.stray_fds,
	          (unsigned long long)b.st.replies_lost, (unsigned long long)b.st.stalls,
	          (unsigned long long)b.st.leaves);
	status = 0;
out:
	broker_free(&b);
	return status;
}
