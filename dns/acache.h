/* The answer cache: filtered upstream answers (after policy, CNAME chain
 * and address guard) keyed by lowercased name and type, kept for the
 * smallest TTL among their records (negative answers for a short fixed
 * time). Bounded; the least recently stored entry is evicted. Only names
 * the policy let through are ever stored, and the policy is checked again
 * on every query before the cache is consulted. */
#ifndef AIRLOCK_DNS_ACACHE_H
#define AIRLOCK_DNS_ACACHE_H

#include "dns/answer.h"

#include <stddef.h>
#include <stdint.h>

/* Negative answers (NXDOMAIN, NODATA) are kept this long (seconds). */
#define DNS_ACACHE_NEG_TTL 30

struct dns_acache;

struct dns_acache *dns_acache_new(size_t max_entries);
void dns_acache_free(struct dns_acache *c);

/* Store f (copied) as the answer for name/qtype at now_ms. Returns 0, or
 * -1 when it is not cacheable (SERVFAIL, zero TTL) or memory ran out. */
int dns_acache_put(struct dns_acache *c, const char *name, uint16_t qtype,
                   const struct dns_filtered *f, const char *reason, uint64_t now_ms);

/* Fill out with the cached answer for name/qtype, TTLs reduced by its age,
 * and *reason (borrowed until the next put or free; may be NULL).
 * Returns 0 on a hit, -1 on a miss or an expired entry. */
int dns_acache_get(struct dns_acache *c, const char *name, uint16_t qtype, uint64_t now_ms,
                   struct dns_filtered *out, const char **reason);

#endif
