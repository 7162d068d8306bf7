/* The bounded key table (tab.h): entries in an array in insertion order,
 * chained from a power-of-two bucket array by index; keys packed into one
 * arena in the same order, so compaction is one forward pass. */
#include "elog/tab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct tab_entry {
	uint32_t te_hash;
	int32_t te_next; /* bucket chain: index into tb_entries, -1 ends */
	size_t te_off;   /* key in tb_arena; NUL-terminated */
	size_t te_len;
};

struct elog_tab {
	struct tab_entry *tb_entries;
	unsigned char *tb_payloads; /* tb_payload_size bytes per entry */
	size_t tb_payload_size;
	size_t tb_n, tb_max;
	int32_t *tb_buckets;
	size_t tb_nbuckets; /* a power of two, at least twice tb_max */
	char *tb_arena;
	size_t tb_used, tb_arena_size;
	uint32_t tb_seed;
};

/* FNV-1a from a random start. */
static uint32_t
tab_hash(const struct elog_tab *t, const void *key, size_t len)
{
	const unsigned char *p = key;
	uint32_t h = 2166136261u ^ t->tb_seed;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void
tab_rechain(struct elog_tab *t)
{
	for (size_t i = 0; i < t->tb_nbuckets; i++)
		t->tb_buckets[i] = -1;
	for (size_t i = 0; i < t->tb_n; i++) {
		int32_t *b = &t->tb_buckets[t->tb_entries[i].te_hash & (t->tb_nbuckets - 1)];

		t->tb_entries[i].te_next = *b;
		*b = (int32_t)i;
	}
}

struct elog_tab *
elog_tab_new(size_t max_entries, size_t arena_bytes, size_t payload_size)
{
	struct elog_tab *t;

	if (max_entries == 0 || max_entries > (1u << 24) || arena_bytes == 0)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->tb_max = max_entries;
	t->tb_payload_size = payload_size;
	t->tb_arena_size = arena_bytes;
	for (t->tb_nbuckets = 16; t->tb_nbuckets < 2 * max_entries; t->tb_nbuckets *= 2)
		;
	t->tb_seed = arc4random();
	/* Read only below tb_n / tb_used, written before: not zeroed. */
	t->tb_entries = reallocarray(NULL, max_entries, sizeof(*t->tb_entries));
	t->tb_payloads = reallocarray(NULL, max_entries, payload_size > 0 ? payload_size : 1);
	t->tb_buckets = reallocarray(NULL, t->tb_nbuckets, sizeof(*t->tb_buckets));
	t->tb_arena = malloc(arena_bytes);
	if (t->tb_entries == NULL || t->tb_payloads == NULL || t->tb_buckets == NULL ||
	    t->tb_arena == NULL) {
		elog_tab_free(t);
		return NULL;
	}
	tab_rechain(t);
	return t;
}

void
elog_tab_free(struct elog_tab *t)
{
	if (t == NULL)
		return;
	free(t->tb_entries);
	free(t->tb_payloads);
	free(t->tb_buckets);
	free(t->tb_arena);
	free(t);
}

void *
elog_tab_find(const struct elog_tab *t, const void *key, size_t len)
{
	uint32_t h = tab_hash(t, key, len);

	for (int32_t i = t->tb_buckets[h & (t->tb_nbuckets - 1)]; i >= 0;
	     i = t->tb_entries[i].te_next) {
		const struct tab_entry *e = &t->tb_entries[i];

		if (e->te_hash == h && e->te_len == len &&
		    memcmp(t->tb_arena + e->te_off, key, len) == 0)
			return t->tb_payloads + (size_t)i * t->tb_payload_size;
	}
	return NULL;
}

void *
elog_tab_insert(struct elog_tab *t, const void *key, size_t len)
{
	struct tab_entry *e;
	int32_t *b;
	void *payload;

	if (t->tb_n == t->tb_max || len >= t->tb_arena_size - t->tb_used)
		return NULL;
	e = &t->tb_entries[t->tb_n];
	e->te_hash = tab_hash(t, key, len);
	e->te_off = t->tb_used;
	e->te_len = len;
	memcpy(t->tb_arena + t->tb_used, key, len);
	t->tb_arena[t->tb_used + len] = '\0';
	t->tb_used += len + 1;
	b = &t->tb_buckets[e->te_hash & (t->tb_nbuckets - 1)];
	e->te_next = *b;
	*b = (int32_t)t->tb_n;
	payload = t->tb_payloads + t->tb_n * t->tb_payload_size;
	memset(payload, 0, t->tb_payload_size);
	t->tb_n++;
	return payload;
}

size_t
elog_tab_count(const struct elog_tab *t)
{
	return t->tb_n;
}

void *
elog_tab_payload(const struct elog_tab *t, size_t i)
{
	return t->tb_payloads + i * t->tb_payload_size;
}

const char *
elog_tab_key(const struct elog_tab *t, size_t i, size_t *len)
{
	*len = t->tb_entries[i].te_len;
	return t->tb_arena + t->tb_entries[i].te_off;
}

void
elog_tab_retain(struct elog_tab *t,
                bool (*keep)(void *payload, const char *key, size_t len, void *arg), void *arg)
{
	size_t kept = 0, used = 0;

	for (size_t i = 0; i < t->tb_n; i++) {
		struct tab_entry e = t->tb_entries[i];
		void *payload = elog_tab_payload(t, i);

		if (keep == NULL || !keep(payload, t->tb_arena + e.te_off, e.te_len, arg))
			continue;
		/* Kept keys move only towards the front, in order. */
		memmove(t->tb_arena + used, t->tb_arena + e.te_off, e.te_len + 1);
		e.te_off = used;
		used += e.te_len + 1;
		if (kept != i)
			memcpy(elog_tab_payload(t, kept), payload, t->tb_payload_size);
		t->tb_entries[kept++] = e;
	}
	t->tb_n = kept;
	t->tb_used = used;
	tab_rechain(t);
}
