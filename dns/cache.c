/* IP -> name cache: a chained hash table over a fixed array of entries,
 * plus a doubly linked age list (least recently written first) for
 * eviction. Everything is allocated once in dns_cache_new, so a put never
 * allocates and the size bound is exact. An entry is one (address, name)
 * pair, so a shared address keeps every name it was handed out for (up
 * to DNS_CACHE_NAMES_PER_ADDR); all of an address's entries share its
 * bucket. */
#include "dns/cache.h"

#include "common/util.h"
#include "dns/msg.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define NIL UINT32_MAX
/* Names kept per address: past it, the address's oldest name goes. */
#define DNS_CACHE_NAMES_PER_ADDR 16

struct cache_entry {
	uint8_t ce_family; /* 0 = free */
	uint8_t ce_addr[16];
	uint64_t ce_expires; /* seconds, monotonic; expired when now >= */
	uint32_t ce_hnext;   /* hash chain */
	uint32_t ce_older, ce_newer;
	uint64_t ce_stamp; /* order of the puts, for "the last name learned" */
	char ce_name[DNS_NAME_TEXT_MAX];
};

struct dns_cache {
	struct cache_entry *entries;
	size_t max;
	size_t used; /* entries handed out so far (never shrinks) */
	uint32_t *buckets;
	size_t n_buckets; /* power of two */
	uint32_t oldest, newest;
	uint32_t free_list; /* through ce_hnext */
	uint64_t seed;
	uint64_t stamp;
};

struct dns_cache *
dns_cache_new(size_t max_entries)
{
	struct dns_cache *c;

	if (max_entries == 0 || max_entries >= NIL / 2)
		return NULL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->max = max_entries;
	c->n_buckets = 16;
	while (c->n_buckets < max_entries)
		c->n_buckets <<= 1;
	c->entries = calloc(max_entries, sizeof(*c->entries));
	c->buckets = malloc(c->n_buckets * sizeof(*c->buckets));
	if (c->entries == NULL || c->buckets == NULL) {
		dns_cache_free(c);
		return NULL;
	}
	for (size_t i = 0; i < c->n_buckets; i++)
		c->buckets[i] = NIL;
	c->oldest = c->newest = c->free_list = NIL;
	/* A secret seed: the sandbox picks which names get resolved, so it
	 * must not be able to aim every address at one bucket. */
	if (getrandom(&c->seed, sizeof(c->seed), GRND_NONBLOCK) != sizeof(c->seed))
		c->seed = now_ms() * 0x9e3779b97f4a7c15ull;
	return c;
}

void
dns_cache_free(struct dns_cache *c)
{
	if (c == NULL)
		return;
	free(c->entries);
	free(c->buckets);
	free(c);
}

/* Key of an address: family + 4 or 16 bytes. Returns false for any other
 * family. */
static bool
addr_key(const struct sockaddr *sa, uint8_t *family, uint8_t addr[16])
{
	memset(addr, 0, 16);
	if (sa->sa_family == AF_INET) {
		memcpy(addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(addr, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	} else {
		return false;
	}
	*family = (uint8_t)sa->sa_family;
	return true;
}

static size_t
bucket_of(const struct dns_cache *c, uint8_t family, const uint8_t addr[16])
{
	uint64_t h = c->seed ^ family;

	/* Two rounds of a 64-bit mix per 8 bytes (splitmix64 finaliser). */
	for (int i = 0; i < 16; i += 8) {
		uint64_t w;

		memcpy(&w, addr + i, 8);
		h ^= w;
		h ^= h >> 30;
		h *= 0xbf58476d1ce4e5b9ull;
		h ^= h >> 27;
		h *= 0x94d049bb133111ebull;
		h ^= h >> 31;
	}
	return (size_t)h & (c->n_buckets - 1);
}

/* The entry for (address, name), or NIL. With *oldest and *count, also
 * the address's oldest entry and how many it has. */
static uint32_t
find(const struct dns_cache *c, uint8_t family, const uint8_t addr[16], size_t bucket,
     const char *name, uint32_t *oldest, unsigned *count)
{
	uint32_t found = NIL;

	*oldest = NIL;
	*count = 0;
	for (uint32_t i = c->buckets[bucket]; i != NIL; i = c->entries[i].ce_hnext) {
		const struct cache_entry *e = &c->entries[i];

		if (e->ce_family != family || memcmp(e->ce_addr, addr, 16) != 0)
			continue;
		(*count)++;
		if (*oldest == NIL || e->ce_stamp < c->entries[*oldest].ce_stamp)
			*oldest = i;
		if (found == NIL && dns_name_eq(e->ce_name, name))
			found = i;
	}
	return found;
}

static void
age_unlink(struct dns_cache *c, uint32_t i)
{
	struct cache_entry *e = &c->entries[i];

	if (e->ce_older != NIL)
		c->entries[e->ce_older].ce_newer = e->ce_newer;
	else
		c->oldest = e->ce_newer;
	if (e->ce_newer != NIL)
		c->entries[e->ce_newer].ce_older = e->ce_older;
	else
		c->newest = e->ce_older;
	e->ce_older = e->ce_newer = NIL;
}

static void
age_push_newest(struct dns_cache *c, uint32_t i)
{
	struct cache_entry *e = &c->entries[i];

	e->ce_older = c->newest;
	e->ce_newer = NIL;
	if (c->newest != NIL)
		c->entries[c->newest].ce_newer = i;
	else
		c->oldest = i;
	c->newest = i;
}

/* Unlink entry i from its hash chain and the age list and free it. */
static void
remove_entry(struct dns_cache *c, uint32_t i)
{
	struct cache_entry *e = &c->entries[i];
	size_t b = bucket_of(c, e->ce_family, e->ce_addr);
	uint32_t *pp = &c->buckets[b];

	while (*pp != i && *pp != NIL)
		pp = &c->entries[*pp].ce_hnext;
	if (*pp == i)
		*pp = e->ce_hnext;
	age_unlink(c, i);
	e->ce_family = 0;
	e->ce_hnext = c->free_list;
	c->free_list = i;
}

void
dns_cache_put(struct dns_cache *c, const struct sockaddr *sa, const char *name, uint32_t ttl,
              uint64_t now_s)
{
	uint8_t family, addr[16];
	size_t b;
	uint32_t i, oldest;
	unsigned count;
	struct cache_entry *e;

	if (c == NULL || !addr_key(sa, &family, addr))
		return;
	b = bucket_of(c, family, addr);
	i = find(c, family, addr, b, name, &oldest, &count);
	if (i == NIL && count >= DNS_CACHE_NAMES_PER_ADDR)
		i = oldest; /* relabelled: it stays on its chain */
	if (i != NIL) {
		age_unlink(c, i);
	} else {
		if (c->free_list != NIL) {
			i = c->free_list;
			c->free_list = c->entries[i].ce_hnext;
		} else if (c->used < c->max) {
			i = (uint32_t)c->used++;
		} else {
			i = c->oldest;
			remove_entry(c, i);
			c->free_list = c->entries[i].ce_hnext;
		}
		e = &c->entries[i];
		e->ce_family = family;
		memcpy(e->ce_addr, addr, 16);
		e->ce_hnext = c->buckets[b];
		c->buckets[b] = i;
	}
	e = &c->entries[i];
	str_copy(e->ce_name, name, sizeof(e->ce_name));
	e->ce_expires = now_s + ttl;
	e->ce_stamp = ++c->stamp;
	age_push_newest(c, i);
}

const char *
dns_cache_lookup(struct dns_cache *c, const struct sockaddr *sa, uint64_t now_s)
{
	uint8_t family, addr[16];
	uint32_t best = NIL;

	if (c == NULL || !addr_key(sa, &family, addr))
		return NULL;
	for (uint32_t i = c->buckets[bucket_of(c, family, addr)], next; i != NIL; i = next) {
		const struct cache_entry *e = &c->entries[i];

		next = e->ce_hnext;
		if (e->ce_family != family || memcmp(e->ce_addr, addr, 16) != 0)
			continue;
		/* Expired: gone for good, even if the clock were to go back. */
		if (now_s >= e->ce_expires) {
			remove_entry(c, i);
			continue;
		}
		if (best == NIL || e->ce_stamp > c->entries[best].ce_stamp)
			best = i;
	}
	return best != NIL ? c->entries[best].ce_name : NULL;
}

bool
dns_cache_told(struct dns_cache *c, const struct sockaddr *sa, const char *name, uint64_t now_s)
{
	uint8_t family, addr[16];
	uint32_t i, oldest;
	unsigned count;

	if (c == NULL || name == NULL || name[0] == '\0' || !addr_key(sa, &family, addr))
		return false;
	i = find(c, family, addr, bucket_of(c, family, addr), name, &oldest, &count);
	return i != NIL && now_s < c->entries[i].ce_expires;
}
