/* The worker's side of the broker (broker.h): send a request, park the
 * connection (or the DNS query), get one callback per request with the
 * broker's reply and, when connected, the socket. Never blocks: a request the socket cannot
 * take now fails at once, and the caller refuses its connection. */
#ifndef AIRLOCK_BROKER_CLIENT_H
#define AIRLOCK_BROKER_CLIENT_H

#include <stdint.h>
#include <sys/socket.h>

#include "broker/msg.h"
#include "dns/resolver.h"

struct event_base;
struct broker_client;

/* One reply. r is borrowed for the call. fd: the connected socket when
 * r->status == BROKER_OK (owned by the callee from here on), else -1. A
 * broker that goes away answers every request in flight with
 * BROKER_E_GONE (fail closed). The callback may free the client. */
typedef void (*broker_client_fn)(const struct broker_reply *r, int fd, void *arg);

/* A client on fd (the worker's end from broker_spawn; ownership passes),
 * with at most max_inflight requests out (0 = BROKER_DEFAULT_INFLIGHT;
 * the broker's own bound should be the same). NULL when out of memory
 * (fd is closed). */
struct broker_client *broker_client_new(struct event_base *base, int fd, unsigned max_inflight);

/* Close the socket; callbacks in flight are never called. NULL fine. */
void broker_client_free(struct broker_client *c);

/* Ask for NAME:PORT (orig: the transparent original destination, or
 * NULL; flags: BROKER_F_ECH or 0; rule: the worker's own verdict's
 * rule, or NULL). The id (nonzero) goes to *id for broker_client_cancel. 0, or
 * -1 with errno: EBUSY (max_inflight out), EAGAIN (the socket is full),
 * EINVAL (the name does not fit), EPIPE (the broker is gone). fn is
 * never called for a request that failed here. */
int broker_client_connect_name(struct broker_client *c, const char *name, uint16_t port,
                               const struct sockaddr *orig, unsigned flags, const char *rule,
                               broker_client_fn fn, void *arg, uint32_t *id);

/* Ask for ADDR:PORT (an IP literal, or a connection without a name). */
int broker_client_connect_addr(struct broker_client *c, const struct sockaddr *dst, uint16_t port,
                               const char *rule, broker_client_fn fn, void *arg, uint32_t *id);

/* Ask the broker to resolve q (qname as asked, qtype, qclass) for the
 * normalised name. fn gets the answer as the resolver would give it
 * (dns/resolver.h; res borrowed for the call): the broker's filtered
 * records, or a failure: RESOLVER_FAIL with fail_reason VR_BROKER when
 * the broker is gone or refused the question, VR_RESOURCE when it was
 * busy. At most half of max_inflight questions are out at once (the
 * rest is the proxy's). 0, or -1 with errno as for a connect (fn never
 * called then). Cancelled with broker_client_cancel. */
int broker_client_resolve(struct broker_client *c, const struct dns_query *q, const char *name,
                          resolver_cb fn, void *arg, uint32_t *id);

/* The listener's asker (dns/resolver.h) over c (borrowed: c outlives the
 * DNS server): what dns/server.c asks in the worker. */
void broker_client_asker(struct broker_client *c, struct dns_asker *out);

/* A MINT's answer: the leaf (borrowed for the call; checked by
 * broker_parse_leaf, its DER for the TLS library to parse) and r NULL;
 * or leaf NULL and r the refusal (BROKER_E_NOT_INSPECTED, _MINT_LIMIT,
 * _BAD_NAME, _BUSY, _RESOURCE, _GONE, ...). The callback may free the
 * client. */
typedef void (*broker_client_leaf_fn)(const struct broker_leaf *leaf, const struct broker_reply *r,
                                      void *arg);
/* Ask for a leaf certificate for name (normalised) on port, for an
 * inspected connection. 0, or -1 with errno as for a connect (fn never
 * called then). Cancelled with broker_client_cancel. */
int broker_client_mint(struct broker_client *c, const char *name, uint16_t port,
                       broker_client_leaf_fn fn, void *arg, uint32_t *id);
/* The connection that asked is gone: its reply, when it comes, is
 * dropped and its socket closed. Unknown ids are ignored. */
void broker_client_cancel(struct broker_client *c, uint32_t id);

/* fn(arg) after each read event that freed request slots, whatever kind
 * of request they held (a DNS answer frees a slot a connect may take):
 * where a caller refused EBUSY or EAGAIN sends again. NULL: none. */
void broker_client_set_room(struct broker_client *c, void (*fn)(void *arg), void *arg);

/* Requests in flight: a caller that got EBUSY or EAGAIN may wait for a
 * reply (one comes for each) only while this is nonzero. */
unsigned broker_client_inflight(const struct broker_client *c);

/* Replies dropped because they broke the format or named no request in
 * flight (a broker bug, or a cancelled request). For tests and -v. */
uint64_t broker_client_dropped(const struct broker_client *c);

#endif
