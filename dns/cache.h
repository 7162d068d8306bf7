/* IP -> name cache fed by DNS answers for allowed names, consulted by the
 * transparent proxy for connections that carry no name (DESIGN.md,
 * decision 3). Bounded in size; entries expire with their TTL. */
#ifndef AIRLOCK_DNS_CACHE_H
#define AIRLOCK_DNS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct dns_cache;

/* An address is kept at least this long, whatever its TTL: programs keep
 * using an address well past a short one. */
#define DNS_CACHE_MIN_TTL 60

/* max_entries > 0; the oldest entries are evicted past it. */
struct dns_cache *dns_cache_new(size_t max_entries);
void dns_cache_free(struct dns_cache *c);

/* Record that name (normalised, copied) resolved to sa for ttl seconds,
 * counted from now_s (a monotonic clock in seconds). */
void dns_cache_put(struct dns_cache *c, const struct sockaddr *sa, const char *name, uint32_t ttl,
                   uint64_t now_s);

/* The name sa was last learned for, or NULL if unknown or expired. The
 * string is borrowed and valid until the next dns_cache_put or free. */
const char *dns_cache_lookup(struct dns_cache *c, const struct sockaddr *sa, uint64_t now_s);

/* Whether sa was handed out for name (normalised) and its TTL has not
 * run out: what the sandbox was told, whichever name came last. */
bool dns_cache_told(struct dns_cache *c, const struct sockaddr *sa, const char *name,
                    uint64_t now_s);

#endif
