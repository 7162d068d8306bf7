#include "dns/acache.h"

#include "common/util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct acache_entry {
	char a_name[DNS_NAME_TEXT_MAX]; /* lowercase */
	uint16_t a_qtype;
	unsigned a_rcode;
	uint64_t a_stored_ms, a_expires_ms;
	size_t a_n;
	bool a_cname_denied, a_guarded;
	uint8_t a_removed_addr[16]; /* a_guarded: the first address removed */
	uint16_t a_removed_type;
	struct dns_rr *a_rr;
	char *a_reason;
	enum verdict_reason a_why;
	struct acache_entry *a_hnext;
	struct acache_entry *a_older, *a_newer;
};

struct dns_acache {
	struct acache_entry **buckets;
	size_t n_buckets; /* power of two */
	size_t n, max;
	struct acache_entry *oldest, *newest;
	uint64_t seed;
};

struct dns_acache *
dns_acache_new(size_t max_entries)
{
	struct dns_acache *c;

	if (max_entries == 0 || (c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->max = max_entries;
	c->n_buckets = 16;
	while (c->n_buckets < max_entries)
		c->n_buckets <<= 1;
	if ((c->buckets = calloc(c->n_buckets, sizeof(*c->buckets))) == NULL) {
		free(c);
		return NULL;
	}
	/* Secret seed: the sandbox chooses the names (under a wildcard). */
	if (getrandom(&c->seed, sizeof(c->seed), GRND_NONBLOCK) != sizeof(c->seed))
		c->seed = now_ms() * 0x9e3779b97f4a7c15ull;
	return c;
}

static void
entry_free(struct acache_entry *e)
{
	free(e->a_rr);
	free(e->a_reason);
	free(e);
}

void
dns_acache_free(struct dns_acache *c)
{
	struct acache_entry *e, *next;

	if (c == NULL)
		return;
	for (e = c->oldest; e != NULL; e = next) {
		next = e->a_newer;
		entry_free(e);
	}
	free(c->buckets);
	free(c);
}

static void
lower_copy(char out[DNS_NAME_TEXT_MAX], const char *in)
{
	size_t i;

	for (i = 0; in[i] != '\0' && i + 1 < DNS_NAME_TEXT_MAX; i++)
		out[i] = (in[i] >= 'A' && in[i] <= 'Z') ? (char)(in[i] + 32) : in[i];
	out[i] = '\0';
}

static size_t
bucket_of(const struct dns_acache *c, const char *lname, uint16_t qtype)
{
	/* FNV-1a over the name, seeded, finished with a 64-bit mix. */
	uint64_t h = 0xcbf29ce484222325ull ^ c->seed ^ qtype;

	for (const char *p = lname; *p != '\0'; p++) {
		h ^= (uint8_t)*p;
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h & (c->n_buckets - 1);
}

static struct acache_entry **
find(struct dns_acache *c, const char *lname, uint16_t qtype)
{
	struct acache_entry **pp = &c->buckets[bucket_of(c, lname, qtype)];

	for (; *pp != NULL; pp = &(*pp)->a_hnext)
		if ((*pp)->a_qtype == qtype && strcmp((*pp)->a_name, lname) == 0)
			break;
	return pp;
}

/* Unlink *pp from its chain and the age list, then free it. */
static void
remove_at(struct dns_acache *c, struct acache_entry **pp)
{
	struct acache_entry *e = *pp;

	*pp = e->a_hnext;
	if (e->a_older != NULL)
		e->a_older->a_newer = e->a_newer;
	else
		c->oldest = e->a_newer;
	if (e->a_newer != NULL)
		e->a_newer->a_older = e->a_older;
	else
		c->newest = e->a_older;
	c->n--;
	entry_free(e);
}

int
dns_acache_put(struct dns_acache *c, const char *name, uint16_t qtype, const struct dns_filtered *f,
               const char *reason, uint64_t now_ms)
{
	char lname[DNS_NAME_TEXT_MAX];
	struct acache_entry **pp, *e;
	uint32_t ttl;

	if (c == NULL || (f->rcode != DNS_RCODE_NOERROR && f->rcode != DNS_RCODE_NXDOMAIN))
		return -1;
	ttl = f->n > 0 ? f->min_ttl : DNS_ACACHE_NEG_TTL;
	if (ttl == 0)
		return -1;
	lower_copy(lname, name);
	pp = find(c, lname, qtype);
	if (*pp != NULL)
		remove_at(c, pp);
	if (c->n >= c->max)
		remove_at(c, find(c, c->oldest->a_name, c->oldest->a_qtype));
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return -1;
	if (f->n > 0 && (e->a_rr = malloc(f->n * sizeof(*e->a_rr))) == NULL) {
		free(e);
		return -1;
	}
	if (reason != NULL && (e->a_reason = strdup(reason)) == NULL) {
		entry_free(e);
		return -1;
	}
	str_copy(e->a_name, lname, sizeof(e->a_name));
	e->a_qtype = qtype;
	e->a_rcode = f->rcode;
	e->a_why = f->why;
	e->a_n = f->n;
	e->a_cname_denied = f->cname_denied;
	e->a_guarded = f->guarded;
	if (f->guarded) {
		memcpy(e->a_removed_addr, f->first_removed.addr, 16);
		e->a_removed_type = f->first_removed.type;
	}
	if (f->n > 0)
		memcpy(e->a_rr, f->rr, f->n * sizeof(*e->a_rr));
	e->a_stored_ms = now_ms;
	e->a_expires_ms = now_ms + (uint64_t)ttl * 1000;
	pp = find(c, lname, qtype);
	*pp = e;
	e->a_older = c->newest;
	if (c->newest != NULL)
		c->newest->a_newer = e;
	else
		c->oldest = e;
	c->newest = e;
	c->n++;
	return 0;
}

int
dns_acache_get(struct dns_acache *c, const char *name, uint16_t qtype, uint64_t now_ms,
               struct dns_filtered *out, const char **reason)
{
	char lname[DNS_NAME_TEXT_MAX];
	struct acache_entry **pp, *e;
	uint32_t age;

	if (c == NULL)
		return -1;
	lower_copy(lname, name);
	pp = find(c, lname, qtype);
	if ((e = *pp) == NULL)
		return -1;
	if (now_ms >= e->a_expires_ms) {
		remove_at(c, pp);
		return -1;
	}
	age = (uint32_t)((now_ms - e->a_stored_ms) / 1000);
	out->rcode = e->a_rcode;
	out->n = e->a_n;
	out->n_removed = 0;
	out->why = e->a_why;
	out->detail = NULL;
	out->min_ttl = UINT32_MAX;
	out->cname_denied = e->a_cname_denied;
	out->guarded = e->a_guarded;
	if (e->a_guarded) {
		memset(&out->first_removed, 0, sizeof(out->first_removed));
		memcpy(out->first_removed.addr, e->a_removed_addr, 16);
		out->first_removed.type = e->a_removed_type;
	}
	for (size_t i = 0; i < e->a_n; i++) {
		out->rr[i] = e->a_rr[i];
		out->rr[i].ttl = out->rr[i].ttl > age ? out->rr[i].ttl - age : 0;
		if (out->rr[i].ttl < out->min_ttl)
			out->min_ttl = out->rr[i].ttl;
	}
	*reason = e->a_reason;
	return 0;
}
