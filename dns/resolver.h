/* The one resolver (DESIGN.md, "One decision, one resolver"): the DNS
 * listener and the proxy both ask it, so both see one CNAME policy and one
 * address guard (dns_filter), one cache of filtered answers honouring
 * TTLs (dns/acache.h), one hosts file, and one upstream client: UDP with
 * a random id per try, a retry that keeps listening for the first try's
 * answer, and TCP when an answer comes back truncated. Single-threaded on
 * the supervisor's event base; never blocks it (the hosts file is read
 * once, in resolver_new). */
#ifndef AIRLOCK_DNS_RESOLVER_H
#define AIRLOCK_DNS_RESOLVER_H

#include "dns/answer.h"
#include "dns/dns.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct evbuffer;

struct event_base;
struct fdres;
struct membudget;
struct policy;
struct resolver;
struct resolver_req;
struct resolver_lookup;

#define RESOLVER_DEFAULT_TTL_CAP    300
#define RESOLVER_DEFAULT_TIMEOUT_MS 2000
/* Names (lines) read from the hosts file at most; the rest is ignored. */
#define RESOLVER_HOSTS_MAX 4096
/* Answers from the hosts file carry this TTL. */
#define RESOLVER_HOSTS_TTL 60
/* Addresses a resolver_lookup() hands on at most (v6 and v4 together). */
#define RESOLVER_MAX_ADDRS 16
/* resolver_ask() callers that may wait on one question in flight; the
 * next one fails at once (a listener flooded with one name costs 64
 * waiters, not one per query). resolver_lookup() is not counted: each of
 * the proxy's lookups holds a connection, which the proxy bounds. */
#define RESOLVER_MAX_WAITERS 64
/* Upstream TCP fallbacks (truncated or case-mismatched answers) open at
 * once; a question that would need one more fails. */
#define RESOLVER_MAX_TCP 64

struct resolver_config {
	const struct policy *policy; /* borrowed, outlives the resolver */
	struct sockaddr_storage upstream[DNS_MAX_UPSTREAMS];
	size_t n_upstream;
	uint32_t ttl_cap;    /* seconds; 0 = RESOLVER_DEFAULT_TTL_CAP */
	uint32_t timeout_ms; /* whole budget of one question; 0 = default */
	/* A hosts(5) file read once at start, or NULL for none. Its names
	 * are answered from it and never asked upstream; its addresses go
	 * through the policy and the address guard like any answer. */
	const char *hosts_path;
};

/* Returns NULL after logging why (the hosts file that cannot be read
 * is only a warning: the resolver runs without it). */
struct resolver *resolver_new(struct event_base *base, const struct resolver_config *cfg);
/* Every question still in flight is answered (RESOLVER_FAIL) first. */
void resolver_free(struct resolver *r);

/* Shared budgets (borrowed, may be NULL, must outlive r): the bytes the
 * upstream TCP connections queue are charged to queue, and on EMFILE the
 * TCP fallback draws from fds. Call once, before the first question. */
void resolver_set_limits(struct resolver *r, struct membudget *queue, struct fdres *fds);

/* Called with true before a burst of answers is handed out (one read
 * event of the upstream socket) and false after it, so that a listener
 * can batch its replies. Optional. */
void resolver_set_burst(struct resolver *r, void (*fn)(void *arg, bool begin), void *arg);

enum resolver_status {
	RESOLVER_ANSWER,  /* f is the answer (NOERROR, possibly empty, or NXDOMAIN) */
	RESOLVER_TIMEOUT, /* no upstream answered within timeout_ms */
	RESOLVER_FAIL,    /* SERVFAIL, an unusable answer or a local failure */
};

struct resolver_result {
	enum resolver_status status;
	/* RESOLVER_ANSWER: the records after dns_filter; borrowed, valid
	 * during the callback (or until the next call into r). */
	const struct dns_filtered *f;
	/* Why records were withheld or why it failed, with the removed
	 * addresses ("" when there is nothing to say); borrowed likewise. */
	const char *why;
	bool cached;     /* from the answer cache */
	bool from_hosts; /* from the hosts file */
	/* RESOLVER_FAIL without an upstream's failure: the log's reason
	 * (VR_BROKER, VR_RESOURCE); VR_NONE otherwise. */
	enum verdict_reason fail_reason;
};

/* Called exactly once per pending question, unless cancelled. */
typedef void (*resolver_cb)(const struct resolver_result *res, void *arg);

/* Ask q (its qname as sent, qtype, qclass) for the normalised name (the
 * cache key). The caller has decided that the name may be resolved (the
 * listener's dns_decide, the proxy's policy check); the resolver applies
 * the policy only to what comes back (CNAME links, the guard). When the answer is known at once
 * (hosts file, cache, or a failure before anything was sent) *now is filled, nothing is kept and
 * NULL is returned: cb is never called from inside this function. Else
 * returns the pending question; cb(res, arg) follows. */
struct resolver_req *resolver_ask(struct resolver *r, const struct dns_query *q, const char *name,
                                  resolver_cb cb, void *arg, struct resolver_result *now);
/* Forget a pending question: its callback will not run. The handle is
 * spent once its callback has run; do not cancel it then. */
void resolver_cancel(struct resolver_req *req);

/* Who answers the DNS listener's questions (dns/server.c): the broker in
 * the worker (broker/client.h, broker_client_asker), or a resolver in
 * this process (resolver_asker: the unit tests, tests/dns/dnsd.c). */
struct dns_asker {
	/* As resolver_ask: 0 with *handle set when the question is out (cb
	 * follows exactly once unless cancelled, never from inside), 1 when
	 * *now holds the answer already (its strings valid until the next
	 * call into the asker). */
	int (*ask)(void *arg, const struct dns_query *q, const char *name, resolver_cb cb,
	           void *cb_arg, struct resolver_result *now, uint64_t *handle);
	/* Forget an answer not yet given; its cb will not run. */
	void (*cancel)(void *arg, uint64_t handle);
	/* As resolver_set_burst: fn(fn_arg, true) before a burst of answers
	 * and fn(fn_arg, false) after it; fn NULL to stop. */
	void (*set_burst)(void *arg, void (*fn)(void *fn_arg, bool begin), void *fn_arg);
	void *arg;
};

/* An asker over r (borrowed: it outlives every question). */
void resolver_asker(struct resolver *r, struct dns_asker *out);

/* ---- addresses for the proxy ---- */

enum resolver_addrs_status {
	RESOLVER_ADDRS_OK,       /* n > 0 */
	RESOLVER_ADDRS_NXDOMAIN, /* the name does not exist */
	RESOLVER_ADDRS_NODATA,   /* it exists, with no address */
	RESOLVER_ADDRS_CNAME,    /* its chain runs through a denied name */
	RESOLVER_ADDRS_GUARD,    /* the address guard removed every address */
	RESOLVER_ADDRS_TIMEOUT,  /* no answer in time */
	RESOLVER_ADDRS_FAIL,     /* the upstream failed */
};

struct resolver_addrs {
	enum resolver_addrs_status status;
	/* Audit mode: the chain ran through a denied name and was followed
	 * (status OK); enforce would have refused it. */
	bool audit_cname;
	size_t n;
	struct sockaddr_storage addr[RESOLVER_MAX_ADDRS]; /* v6 first, then v4; port 0 */
	/* RESOLVER_ADDRS_GUARD: the first address the guard removed */
	struct sockaddr_storage refused;
	char why[192]; /* what the resolver said, for the refusal ("" if nothing) */
};

typedef void (*resolver_addrs_cb)(const struct resolver_addrs *res, void *arg);

/* The A and AAAA answers for a normalised name, through the same cache,
 * policy and guard as the listener's. As resolver_ask: NULL when *now
 * holds the result already (cb never called from inside), else pending
 * and cb(res, arg) follows exactly once unless cancelled. res is
 * borrowed for the callback. */
struct resolver_lookup *resolver_lookup(struct resolver *r, const char *name, resolver_addrs_cb cb,
                                        void *arg, struct resolver_addrs *now);
void resolver_lookup_cancel(struct resolver_lookup *l);

/* ---- the hosts file, pure (unit tested) ---- */

struct resolver_hosts;

/* Parse hosts(5) text: "ADDR NAME [ALIAS...]" lines, '#' comments.
 * Names are normalised; lines with a bad address or name are skipped.
 * At most RESOLVER_HOSTS_MAX names. NULL only when out of memory. */
struct resolver_hosts *resolver_hosts_parse(const char *text, size_t len);
void resolver_hosts_free(struct resolver_hosts *h);
/* Fill resp (as an upstream response to name/qtype would be) from the
 * entries for name. Returns false when the file does not know name. */
bool resolver_hosts_answer(const struct resolver_hosts *h, const char *name, uint16_t qtype,
                           struct dns_response *resp);

/* DNS over TCP frames each message with a two-byte length (RFC 1035
 * 4.2.2); the listener's clients and the resolver's upstream connections
 * are read the same way. Move one whole message from in to buf (at least
 * DNS_MSG_MAX bytes, which any two-byte length fits) and set *len. False
 * while it is not all there yet: nothing is consumed, so the next read
 * event tries again. */
bool dns_tcp_take(struct evbuffer *in, uint8_t *buf, size_t *len);

#endif
