/* The egress proxy: one libevent loop over the listeners the sandbox hands
 * the supervisor (or that `airlock proxy` opens). Explicit (CONNECT and
 * absolute-form HTTP/1.1) and transparent (SO_ORIGINAL_DST + TLS SNI / HTTP
 * Host sniffing). Every connection ends in exactly one egress log line. */
#ifndef AIRLOCK_PROXY_PROXY_H
#define AIRLOCK_PROXY_PROXY_H

#include <stdint.h>

struct event_base;
struct broker_client;
struct policy;
struct elog;
struct dns_cache;
struct fdres;
struct membudget;
struct proxy;

enum proxy_listener_kind {
	PROXY_LISTEN_EXPLICIT,
	PROXY_LISTEN_TRANSPARENT,
};

struct proxy_config {
	const struct policy *policy; /* borrowed, outlives the proxy */
	struct elog *log;            /* borrowed */
	/* borrowed, may be NULL: the IP -> name cache of what the sandbox's
	 * DNS listener answered (dns/cache.h) */
	struct dns_cache *cache;
	/* borrowed, outlives the proxy: the broker (broker/client.h), which
	 * resolves, guards and connects every upstream socket; the proxy
	 * makes none itself */
	struct broker_client *broker;
	unsigned max_conns;          /* concurrent connections; 0 = default */
	uint32_t connect_timeout_ms; /* 0 = default */
	uint32_t idle_timeout_ms;    /* 0 = default */
	uint32_t header_timeout_ms;  /* request head / ClientHello; 0 = default */
	/* absolute-form: from the request's last byte sent (or the last
	 * byte moved) to the response head's first; 0 = default */
	uint32_t response_timeout_ms;
	/* airlock proxy: every line names the client's ip:port (in airlock
	 * run the sandbox is the only client, and its address says nothing) */
	bool log_client;
};

/* Call it with RLIMIT_NOFILE already raised (fdres_raise_limit): the
 * descriptor reserve is sized from the limit in force. */
struct proxy *proxy_new(struct event_base *base, const struct proxy_config *cfg);
/* Serve a listening socket; takes ownership of fd. Returns 0 or -1. */
int proxy_add_listener(struct proxy *px, int fd, enum proxy_listener_kind kind);
void proxy_free(struct proxy *px);
/* The proxy's budget of queued bytes (common/membudget.h) and its
 * descriptor reserve (common/fdres.h), for the DNS listener to share:
 * borrowed, valid until proxy_free(). */
struct membudget *proxy_queue_budget(struct proxy *px);
struct fdres *proxy_fd_reserve(struct proxy *px);

#endif
