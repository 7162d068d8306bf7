/* The broker's resolver, behind a small interface: today evdns on the
 * broker's own loop, through the upstreams it was given; later the shared
 * resolver of dns/ (one cache, one CNAME policy, /etc/hosts), which will
 * replace this file and nothing else. Internal to broker/. */
#ifndef AIRLOCK_BROKER_RESOLVE_H
#define AIRLOCK_BROKER_RESOLVE_H

#include <stddef.h>
#include <sys/socket.h>

struct event_base;
struct broker_resolver;
struct broker_resolve;

/* At most this many addresses of one answer are kept (v6 first, then v4,
 * each in the resolver's order, duplicates dropped). */
#define BROKER_MAX_ADDRS 8

enum broker_resolve_err {
	BROKER_RESOLVE_OK = 0,
	BROKER_RESOLVE_NONE,    /* no such name, or no addresses */
	BROKER_RESOLVE_TIMEOUT, /* no answer in time */
	BROKER_RESOLVE_FAILED,  /* anything else (err text says) */
};

/* addrs (n of them, ports 0; IPv4-mapped answers as IPv4) is borrowed for
 * the call. why: a static text for a failure, NULL on success. */
typedef void (*broker_resolved_fn)(enum broker_resolve_err err,
                                   const struct sockaddr_storage *addrs, size_t n, const char *why,
                                   void *arg);

/* A resolver asking ns[0..n_ns) (copied) on base (borrowed, outlives it).
 * NULL with a reason in err. Free with broker_resolver_free (NULL fine):
 * cancels nothing; free every lookup first. */
struct broker_resolver *broker_resolver_new(struct event_base *base,
                                            const struct sockaddr_storage *ns, size_t n_ns,
                                            char *err, size_t errlen);
void broker_resolver_free(struct broker_resolver *r);

/* Resolve name (normalised). fn is called exactly once, from the loop,
 * never from inside this call, unless broker_resolve_cancel comes first.
 * NULL when out of memory (fn is then never called). */
struct broker_resolve *broker_resolve_start(struct broker_resolver *r, const char *name,
                                            broker_resolved_fn fn, void *arg);

/* Stop a lookup whose fn has not been called; fn never will be. */
void broker_resolve_cancel(struct broker_resolve *q);

#endif
