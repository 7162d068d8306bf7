/* See resolve.h: evdns_getaddrinfo on the broker's loop. */
#include "broker/resolve.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "common/log.h"

struct broker_resolver {
	struct event_base *base; /* borrowed */
	struct evdns_base *dns;  /* owned */
};

struct broker_resolve {
	struct broker_resolver *r;
	struct evdns_getaddrinfo_request *req; /* while evdns holds it */
	struct event *defer;                   /* hands an inline answer to the loop */
	broker_resolved_fn fn;
	void *arg;
	bool in_start;
	enum broker_resolve_err err;
	const char *why;
	struct sockaddr_storage addrs[BROKER_MAX_ADDRS];
	size_t n;
};

/* evdns's own messages (a nameserver down, back up) at debug level,
 * through the one log. */
static void
evdns_log(int is_warn, const char *msg)
{
	(void)is_warn;
	log_debug("broker: evdns: %s", msg);
}

struct broker_resolver *
broker_resolver_new(struct event_base *base, const struct sockaddr_storage *ns, size_t n_ns,
                    char *err, size_t errlen)
{
	struct broker_resolver *r = calloc(1, sizeof(*r));

	if (r == NULL) {
		snprintf(err, errlen, "resolver: out of memory");
		return NULL;
	}
	r->base = base;
	evdns_set_log_fn(evdns_log);
	/* No resolv.conf, no hosts file: only the upstreams given, as the
	 * proxy's resolver today (cli/cmd_run.c). */
	r->dns = evdns_base_new(base, 0);
	if (r->dns == NULL) {
		snprintf(err, errlen, "resolver: cannot create evdns");
		goto fail;
	}
	for (size_t i = 0; i < n_ns; i++) {
		socklen_t len = ns[i].ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
		                                            : sizeof(struct sockaddr_in);

		if (evdns_base_nameserver_sockaddr_add(r->dns, (const struct sockaddr *)&ns[i], len,
		                                       0) != 0) {
			snprintf(err, errlen, "resolver: cannot add upstream %zu", i);
			goto fail;
		}
	}
	evdns_base_set_option(r->dns, "timeout:", "3");
	evdns_base_set_option(r->dns, "attempts:", "2");
	return r;
fail:
	broker_resolver_free(r);
	return NULL;
}

void
broker_resolver_free(struct broker_resolver *r)
{
	if (r == NULL)
		return;
	if (r->dns != NULL)
		evdns_base_free(r->dns, 0);
	free(r);
}

static void
query_free(struct broker_resolve *q)
{
	if (q->defer != NULL)
		event_free(q->defer);
	free(q);
}

/* Keep v6 first, then v4, each in resolver order, at most
 * BROKER_MAX_ADDRS, as the proxy's upstream.c does. */
static void
take_addrs(struct broker_resolve *q, const struct evutil_addrinfo *res)
{
	q->n = 0;
	for (int pass = 0; pass < 2; pass++) {
		int want = pass == 0 ? AF_INET6 : AF_INET;

		for (const struct evutil_addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
			struct sockaddr_storage a;
			bool dup = false;

			if (ai->ai_family != want || q->n == BROKER_MAX_ADDRS ||
			    ai->ai_addrlen > sizeof(a))
				continue;
			memset(&a, 0, sizeof(a));
			memcpy(&a, ai->ai_addr, ai->ai_addrlen);
			if (want == AF_INET6) {
				struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a;
				struct sockaddr_in v4 = {.sin_family = AF_INET};

				in6->sin6_port = 0;
				if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
					memcpy(&v4.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
					memset(&a, 0, sizeof(a));
					memcpy(&a, &v4, sizeof(v4));
				}
			} else {
				((struct sockaddr_in *)&a)->sin_port = 0;
			}
			for (size_t i = 0; i < q->n && !dup; i++)
				dup = memcmp(&q->addrs[i], &a, sizeof(a)) == 0;
			if (!dup)
				q->addrs[q->n++] = a;
		}
	}
}

static void
deliver(struct broker_resolve *q)
{
	broker_resolved_fn fn = q->fn;
	void *arg = q->arg;
	struct sockaddr_storage addrs[BROKER_MAX_ADDRS];
	enum broker_resolve_err err = q->err;
	const char *why = q->why;
	size_t n = q->n;

	/* The lookup is over before fn runs: fn may start another. */
	memcpy(addrs, q->addrs, n * sizeof(addrs[0]));
	query_free(q);
	fn(err, addrs, n, why, arg);
}

static void
deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver(arg);
}

static void
dns_done(int result, struct evutil_addrinfo *res, void *arg)
{
	struct broker_resolve *q = arg;

	/* Cancelled: q is already gone; touch nothing. */
	if (result == EVUTIL_EAI_CANCEL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;
	}
	q->req = NULL;
	if (res != NULL) {
		take_addrs(q, res);
		evutil_freeaddrinfo(res);
	}
	if (result == EVUTIL_EAI_AGAIN) {
		q->err = BROKER_RESOLVE_TIMEOUT;
		q->why = "timed out";
	} else if (result != 0) {
		q->err = result == EVUTIL_EAI_NONAME || result == EVUTIL_EAI_NODATA
		                 ? BROKER_RESOLVE_NONE
		                 : BROKER_RESOLVE_FAILED;
		q->why = evutil_gai_strerror(result);
	} else if (q->n == 0) {
		q->err = BROKER_RESOLVE_NONE;
		q->why = "no addresses";
	}
	if (q->in_start) {
		event_active(q->defer, EV_TIMEOUT, 1);
		return;
	}
	deliver(q);
}

struct broker_resolve *
broker_resolve_start(struct broker_resolver *r, const char *name, broker_resolved_fn fn, void *arg)
{
	struct broker_resolve *q = calloc(1, sizeof(*q));
	struct evutil_addrinfo hints;

	if (q == NULL)
		return NULL;
	q->r = r;
	q->fn = fn;
	q->arg = arg;
	q->defer = evtimer_new(r->base, deferred, q);
	if (q->defer == NULL) {
		free(q);
		return NULL;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	q->in_start = true;
	q->req = evdns_getaddrinfo(r->dns, name, NULL, &hints, dns_done, q);
	q->in_start = false;
	return q;
}

void
broker_resolve_cancel(struct broker_resolve *q)
{
	if (q == NULL)
		return;
	if (q->req != NULL) {
		struct evdns_getaddrinfo_request *req = q->req;

		q->req = NULL;
		evdns_getaddrinfo_cancel(req);
	}
	query_free(q);
}
