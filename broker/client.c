/* See client.h. Ids carry the slot they are in (low bits) and a
 * generation (high bits), so a reply finds its request in O(1) and a
 * late reply to a reused slot is told apart. */
#include "broker/client.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "broker/broker.h"
#include "common/util.h"

#define CLIENT_SLOT_BITS 12 /* BROKER_MAX_INFLIGHT = 4096 */
_Static_assert((1u << CLIENT_SLOT_BITS) >= BROKER_MAX_INFLIGHT, "slot bits");

struct pending {
	uint32_t id; /* 0 when free */
	bool cancelled;
	broker_client_fn fn;  /* a connect */
	resolver_cb dns_fn;   /* a RESOLVE: fn is NULL */
	broker_client_leaf_fn leaf_fn; /* a MINT: fn is NULL */
	void *arg;
};

struct broker_client {
	struct event_base *base; /* borrowed */
	int fd;                  /* owned */
	struct event *ev;
	struct pending *p;
	unsigned n, used, next_slot;
	unsigned dns_used; /* RESOLVEs in flight, at most n / 2 */
	uint32_t gen;
	uint64_t dropped;
	/* One datagram at a time (a DNS reply is large): the receive buffer,
	 * one byte more than the largest (MSG_TRUNC), and its parse. */
	unsigned char *rbuf;
	struct broker_dns_result *dres;
	char now_why[96]; /* a failure answered at once (broker_client_asker) */
	/* Told before and after each read event's replies (the listener
	 * batches its UDP replies): dns_asker's set_burst. */
	void (*burst)(void *arg, bool begin);
	void *burst_arg;
	/* Told after a read event that freed slots (broker_client_set_room):
	 * a reply of any kind, a DNS answer too, means the broker has read
	 * requests, so a caller refused EBUSY or EAGAIN may send again. */
	void (*room)(void *arg);
	void *room_arg;
	bool freed; /* a slot was released in this read event */
	/* A callback may free the client: inside client_read, free only
	 * marks it dead and client_read frees it on the way out. */
	unsigned in_read;
	bool dead;
};

static void client_read(evutil_socket_t fd, short what, void *arg);

struct broker_client *
broker_client_new(struct event_base *base, int fd, unsigned max_inflight)
{
	struct broker_client *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		close(fd);
		return NULL;
	}
	c->base = base;
	c->fd = fd;
	c->n = max_inflight != 0 ? max_inflight : BROKER_DEFAULT_INFLIGHT;
	if (c->n > BROKER_MAX_INFLIGHT)
		c->n = BROKER_MAX_INFLIGHT;
	c->p = calloc(c->n, sizeof(*c->p));
	c->rbuf = malloc(BROKER_DNS_REPLY_MAX + 1);
	c->dres = malloc(sizeof(*c->dres));
	c->ev = event_new(base, fd, EV_READ | EV_PERSIST, client_read, c);
	if (c->p == NULL || c->rbuf == NULL || c->dres == NULL || c->ev == NULL || event_add(c->ev, NULL) != 0 ||
	    fd_set_nonblock(fd, true) != 0) {
		broker_client_free(c);
		return NULL;
	}
	return c;
}

void
broker_client_free(struct broker_client *c)
{
	if (c == NULL)
		return;
	if (c->in_read > 0) {
		c->dead = true;
		return;
	}
	if (c->ev != NULL)
		event_free(c->ev);
	fd_close(&c->fd);
	free(c->p);
	free(c->rbuf);
	free(c->dres);
	free(c);
}

static int
take_slot(struct broker_client *c, uint32_t *id)
{
	if (c->fd < 0) {
		errno = EPIPE;
		return -1;
	}
	if (c->used == c->n) {
		errno = EBUSY;
		return -1;
	}
	for (unsigned k = 0; k < c->n; k++) {
		unsigned i = (c->next_slot + k) % c->n;

		if (c->p[i].id != 0)
			continue;
		c->next_slot = i + 1;
		/* The generation wraps within 20 bits; 0 never is an id. */
		c->gen = (c->gen + 1) & ((1u << (32 - CLIENT_SLOT_BITS)) - 1);
		if (c->gen == 0)
			c->gen = 1;
		*id = (c->gen << CLIENT_SLOT_BITS) | i;
		return (int)i;
	}
	errno = EBUSY;
	return -1;
}

static int
send_req(struct broker_client *c, int slot, uint32_t id, const void *m, size_t len,
         broker_client_fn fn, void *arg)
{
	ssize_t n;

	do
		n = send(c->fd, m, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)len) {
		if (n >= 0 || errno == EWOULDBLOCK)
			errno = EAGAIN;
		return -1;
	}
	c->p[slot] = (struct pending){.id = id, .fn = fn, .arg = arg};
	c->used++;
	return 0;
}

int
broker_client_connect_name(struct broker_client *c, const char *name, uint16_t port,
                           const struct sockaddr *orig, unsigned flags, const char *rule,
                           broker_client_fn fn, void *arg, uint32_t *id)
{
	struct broker_req_name m;
	int slot = take_slot(c, id);

	if (slot < 0)
		return -1;
	if (broker_build_name(&m, *id, name, port, flags & BROKER_F_ECH, orig, rule) != 0) {
		errno = EINVAL;
		return -1;
	}
	return send_req(c, slot, *id, &m, sizeof(m), fn, arg);
}

int
broker_client_connect_addr(struct broker_client *c, const struct sockaddr *dst, uint16_t port,
                           const char *rule, broker_client_fn fn, void *arg, uint32_t *id)
{
	struct broker_req_addr m;
	int slot = take_slot(c, id);

	if (slot < 0)
		return -1;
	if (broker_build_addr(&m, *id, dst, port, rule) != 0) {
		errno = EINVAL;
		return -1;
	}
	return send_req(c, slot, *id, &m, sizeof(m), fn, arg);
}

int
broker_client_resolve(struct broker_client *c, const struct dns_query *q, const char *name,
                      resolver_cb fn, void *arg, uint32_t *id)
{
	struct broker_req_resolve m;
	int slot;

	/* Half the table at most: a connect refused EBUSY then always has
	 * a connect in flight whose reply wakes it (client.h). */
	if (c->fd >= 0 && c->dns_used >= c->n / 2) {
		errno = EBUSY;
		return -1;
	}
	if ((slot = take_slot(c, id)) < 0)
		return -1;
	if (broker_build_resolve(&m, *id, q->qname, q->qtype, q->qclass, name) != 0) {
		errno = EINVAL;
		return -1;
	}
	if (send_req(c, slot, *id, &m, sizeof(m), NULL, arg) != 0)
		return -1;
	c->p[slot].dns_fn = fn;
	c->dns_used++;
	return 0;
}

int
broker_client_mint(struct broker_client *c, const char *name, uint16_t port,
                   broker_client_leaf_fn fn, void *arg, uint32_t *id)
{
	struct broker_req_mint m;
	int slot = take_slot(c, id);

	if (slot < 0)
		return -1;
	if (broker_build_mint(&m, *id, name, port) != 0) {
		errno = EINVAL;
		return -1;
	}
	if (send_req(c, slot, *id, &m, sizeof(m), NULL, arg) != 0)
		return -1;
	c->p[slot].leaf_fn = fn;
	return 0;
}

static struct pending *
lookup(struct broker_client *c, uint32_t id)
{
	unsigned i = id & ((1u << CLIENT_SLOT_BITS) - 1);

	return id != 0 && i < c->n && c->p[i].id == id ? &c->p[i] : NULL;
}

void
broker_client_cancel(struct broker_client *c, uint32_t id)
{
	struct pending *p = lookup(c, id);

	if (p != NULL)
		p->cancelled = true;
}

void
broker_client_set_room(struct broker_client *c, void (*fn)(void *arg), void *arg)
{
	c->room = fn;
	c->room_arg = arg;
}

unsigned
broker_client_inflight(const struct broker_client *c)
{
	return c->used;
}

uint64_t
broker_client_dropped(const struct broker_client *c)
{
	return c->dropped;
}

/* p's slot is free again. */
static void
release(struct broker_client *c, struct pending *p)
{
	if (p->dns_fn != NULL)
		c->dns_used--;
	p->id = 0;
	p->dns_fn = NULL;
	p->leaf_fn = NULL;
	c->used--;
	c->freed = true;
}

/* A RESOLVE's answer: the broker's reply as the resolver would have
 * given it. r: a DNS reply (NULL when reason says why there is none). */
static void
dns_deliver(const struct pending *p, const struct broker_dns_result *r, enum verdict_reason reason,
            const char *why)
{
	struct resolver_result res = {.status = RESOLVER_FAIL, .fail_reason = reason, .why = why};

	if (r != NULL) {
		res.why = r->why;
		res.cached = (r->flags & BROKER_DNS_F_CACHED) != 0;
		res.from_hosts = (r->flags & BROKER_DNS_F_HOSTS) != 0;
		switch (r->status) {
		case BROKER_DNS_ANSWER:
			res.status = RESOLVER_ANSWER;
			res.f = &r->f;
			res.fail_reason = VR_NONE;
			break;
		case BROKER_DNS_TIMEOUT:
			res.status = RESOLVER_TIMEOUT;
			res.fail_reason = VR_NONE;
			break;
		case BROKER_DNS_FAIL:
			res.fail_reason = r->f.why == VR_DNS_UPSTREAM ? VR_NONE : r->f.why;
			break;
		case BROKER_DNS_REFUSED:
			/* The broker's policy and the worker's disagree. */
			res.fail_reason = r->f.why != VR_NONE ? r->f.why : VR_BROKER;
			break;
		}
	}
	p->dns_fn(&res, p->arg);
}

/* Every request in flight fails: the broker is gone. */
static void
client_gone(struct broker_client *c)
{
	event_del(c->ev);
	fd_close(&c->fd);
	for (unsigned i = 0; i < c->n && !c->dead; i++) {
		struct pending p = c->p[i];
		struct broker_reply r;

		if (p.id == 0)
			continue;
		release(c, &c->p[i]);
		if (p.cancelled)
			continue;
		if (p.dns_fn != NULL) {
			dns_deliver(&p, NULL, VR_BROKER, "the broker is gone");
			continue;
		}
		broker_build_reply(&r, p.id, BROKER_E_GONE, BROKER_V_DENY, EPIPE, NULL, NULL,
		                   "the broker is gone");
		if (p.leaf_fn != NULL)
			p.leaf_fn(NULL, &r, p.arg);
		else
			p.fn(&r, -1, p.arg);
	}
}

/* A DNS reply (n bytes of c->rbuf, no descriptor with it: nothing is
 * dropped silently, so a parked question is answered whatever came). */
static void
take_dns(struct broker_client *c, size_t n, bool bad)
{
	struct pending *p, done;

	if (bad || broker_parse_dns_reply(c->rbuf, n, c->dres) != 0 ||
	    (p = lookup(c, c->dres->id)) == NULL || p->dns_fn == NULL) {
		c->dropped++;
		return;
	}
	done = *p;
	release(c, p);
	if (!done.cancelled)
		dns_deliver(&done, c->dres, VR_NONE, NULL);
}

/* A LEAF (n bytes of c->rbuf; none comes with a descriptor). One that
 * breaks the format, or answers no MINT in flight, is dropped (and its
 * MINT, if any, waits for the broker's end: a broker bug). */
static void
take_leaf(struct broker_client *c, size_t n, bool bad)
{
	struct broker_leaf l;
	struct pending *p, done;

	if (bad || broker_parse_leaf(c->rbuf, n, &l) != 0 || (p = lookup(c, l.h.id)) == NULL ||
	    p->leaf_fn == NULL) {
		c->dropped++;
		return;
	}
	done = *p;
	release(c, p);
	if (!done.cancelled)
		done.leaf_fn(&l, NULL, done.arg);
}

static void
client_read(evutil_socket_t fd, short what, void *arg)
{
	struct broker_client *c = arg;

	(void)what;
	c->in_read++;
	if (c->burst != NULL)
		c->burst(c->burst_arg, true);
	for (int k = 0; k < 64 && !c->dead && c->fd >= 0; k++) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int) * 4)];
		} cm;
		struct iovec iov = {.iov_base = c->rbuf, .iov_len = BROKER_DNS_REPLY_MAX + 1};
		struct msghdr msg = {.msg_iov = &iov,
		                     .msg_iovlen = 1,
		                     .msg_control = cm.b,
		                     .msg_controllen = sizeof(cm.b)};
		struct broker_reply r;
		struct broker_hdr h;
		struct pending *p, done;
		int got = -1, extra = 0;
		ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* The broker's socket is one end of a pair: 0 or an error is
		 * its end gone. */
		if (n <= 0) {
			client_gone(c);
			break;
		}
		for (struct cmsghdr *ch = CMSG_FIRSTHDR(&msg); ch != NULL;
		     ch = CMSG_NXTHDR(&msg, ch)) {
			size_t nfd;

			if (ch->cmsg_level != SOL_SOCKET || ch->cmsg_type != SCM_RIGHTS)
				continue;
			nfd = (ch->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfd; i++) {
				int f;

				memcpy(&f, CMSG_DATA(ch) + i * sizeof(int), sizeof(int));
				if (got < 0)
					got = f;
				else {
					close(f);
					extra++;
				}
			}
		}
		memset(&h, 0, sizeof(h));
		memcpy(&h, c->rbuf, (size_t)n < sizeof(h) ? (size_t)n : sizeof(h));
		if (h.type == BROKER_MSG_LEAF) {
			take_leaf(c, (size_t)n,
			          (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || got >= 0 || extra != 0);
			fd_close(&got);
			continue;
		}
		if (h.type == BROKER_MSG_DNS_REPLY) {
			take_dns(c, (size_t)n,
			         (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || got >= 0 || extra != 0);
			fd_close(&got);
			continue;
		}
		/* A connected socket that could not be received here (no
		 * descriptor free: the kernel truncated the control data and
		 * closed it) fails its request as the resource limit it is. */
		if (!(msg.msg_flags & MSG_TRUNC) && (msg.msg_flags & MSG_CTRUNC) && got < 0 &&
		    extra == 0 && broker_parse_reply(c->rbuf, (size_t)n, &r) == 0 &&
		    r.status == BROKER_OK) {
			broker_build_reply(&r, r.h.id, BROKER_E_RESOURCE, BROKER_V_DENY, EMFILE, NULL,
			                   NULL, "out of file descriptors");
			p = lookup(c, r.h.id);
		} else {
			p = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || extra != 0 ||
			                    broker_parse_reply(c->rbuf, (size_t)n, &r) != 0 ||
			                    (r.status == BROKER_OK) != (got >= 0)
			            ? NULL
			            : lookup(c, r.h.id);
		}
		if (p == NULL || p->cancelled) {
			if (p != NULL)
				release(c, p);
			else
				c->dropped++;
			fd_close(&got);
			continue;
		}
		done = *p;
		release(c, p);
		if (done.dns_fn != NULL) {
			/* The broker refused the question (malformed, busy, a
			 * duplicate id, out of memory): it never has a socket
			 * for one. */
			fd_close(&got);
			dns_deliver(&done, NULL,
			            r.status == BROKER_E_BUSY || r.status == BROKER_E_RESOURCE
			                    ? VR_RESOURCE
			                    : VR_BROKER,
			            r.reason[0] != '\0' ? r.reason : broker_status_name(r.status));
			continue;
		}
		if (done.leaf_fn != NULL) {
			/* A refusal: a leaf comes as a LEAF, never with a socket
			 * (a REPLY with OK and a socket is not one). */
			fd_close(&got);
			if (r.status == BROKER_OK)
				broker_build_reply(&r, r.h.id, BROKER_E_MALFORMED, BROKER_V_DENY, 0,
				                   NULL, NULL, "a MINT answered with a socket");
			done.leaf_fn(NULL, &r, done.arg);
			continue;
		}
		done.fn(&r, got, done.arg);
	}
	/* Read again: a listener freed meanwhile has said so (set_burst
	 * NULL), and c itself is still here (in_read). */
	if (c->burst != NULL)
		c->burst(c->burst_arg, false);
	if (c->freed && c->room != NULL && !c->dead) {
		c->freed = false;
		c->room(c->room_arg);
	}
	if (--c->in_read == 0 && c->dead)
		broker_client_free(c);
}

/* ---- the DNS listener's asker (dns/resolver.h) ---- */

static int
asker_ask(void *arg, const struct dns_query *q, const char *name, resolver_cb cb, void *cb_arg,
          struct resolver_result *now, uint64_t *handle)
{
	struct broker_client *c = arg;
	uint32_t id;
	int err;

	if (broker_client_resolve(c, q, name, cb, cb_arg, &id) == 0) {
		*handle = id;
		return 0;
	}
	err = errno;
	memset(now, 0, sizeof(*now));
	now->status = RESOLVER_FAIL;
	now->fail_reason = err == EPIPE ? VR_BROKER : VR_RESOURCE;
	str_copy(c->now_why,
	         err == EPIPE                   ? "the broker is gone"
	         : err == EBUSY || err == EAGAIN ? "too many questions out to the broker"
	                                         : "the question does not fit the broker's message",
	         sizeof(c->now_why));
	now->why = c->now_why;
	return 1;
}

static void
asker_cancel(void *arg, uint64_t handle)
{
	broker_client_cancel(arg, (uint32_t)handle);
}

static void
asker_set_burst(void *arg, void (*fn)(void *fn_arg, bool begin), void *fn_arg)
{
	struct broker_client *c = arg;

	c->burst = fn;
	c->burst_arg = fn_arg;
}

void
broker_client_asker(struct broker_client *c, struct dns_asker *out)
{
	*out = (struct dns_asker){
	        .ask = asker_ask, .cancel = asker_cancel, .set_burst = asker_set_burst, .arg = c};
}
