/* The sandbox's only resolver (DESIGN.md, DNS listener): answers allowed
 * names from upstream, NXDOMAIN with an Extended DNS Error for the rest,
 * every answer address through the address guard, every query logged. */
#ifndef AIRLOCK_DNS_DNS_H
#define AIRLOCK_DNS_DNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct fdres;
struct membudget;
struct policy;
struct elog;
struct dns_cache;
struct dns_server;
struct resolver;
struct dns_asker;

#define DNS_MAX_UPSTREAMS 4
/* Queries the listener holds waiting for the resolver (UDP and TCP
 * together); beyond it a query gets SERVFAIL with an EDE at once. */
#define DNS_MAX_PENDING 4096

struct dns_server_config {
	const struct policy *policy; /* borrowed, outlives the server */
	struct elog *log;            /* borrowed */
	struct dns_cache *cache;     /* borrowed; answers are recorded here */
	/* Borrowed, outlives the server: the resolver shared with the proxy
	 * (dns/resolver.h). When NULL the server makes its own from the
	 * four fields below, which are otherwise ignored. */
	struct resolver *resolver;
	/* Borrowed, outlives the server: who answers the questions instead
	 * (dns/resolver.h; in the worker, the broker). When set, the five
	 * fields about resolving here are ignored. */
	const struct dns_asker *asker;
	struct sockaddr_storage upstream[DNS_MAX_UPSTREAMS];
	size_t n_upstream;
	uint32_t ttl_cap;    /* seconds; answers' TTLs are capped to it */
	uint32_t timeout_ms; /* upstream budget before SERVFAIL */
	/* Shared with the proxy (proxy_queue_budget, proxy_fd_reserve);
	 * borrowed, may be NULL, must outlive the server. What TCP clients
	 * and upstream TCP connections queue is charged to queue, and their
	 * reading pauses while it is over; on EMFILE the listener and the
	 * upstream TCP fallback draw from fds. */
	struct membudget *queue;
	struct fdres *fds;
};

/* Read up to max nameserver addresses (port 53) from a resolv.conf file.
 * Returns how many were found (0 is possible), or -1 if it can't be read. */
int dns_upstream_from_resolv_conf(const char *path, struct sockaddr_storage *out, size_t max);

/* Parse "ADDR" or "ADDR:PORT" / "[V6]:PORT" for --dns-upstream. 0 or -1. */
int dns_upstream_parse(const char *s, struct sockaddr_storage *out);

struct dns_server *dns_server_new(struct event_base *base, const struct dns_server_config *cfg);
/* Serve on a bound UDP socket / a listening TCP socket; takes ownership of
 * fd in every case. Returns 0 or -1. */
int dns_server_add_udp(struct dns_server *srv, int fd);
int dns_server_add_tcp(struct dns_server *srv, int fd);
void dns_server_free(struct dns_server *srv);

#endif
