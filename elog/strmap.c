#include "elog/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	char *key;
	void *value;
};

struct elog_strmap {
	uint32_t *slots; /* index+1 into entries, 0 = empty */
	size_t n_slots;  /* power of two */
	struct entry *entries;
	size_t n, cap;
};

static uint64_t
hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

struct elog_strmap *
elog_strmap_new(void)
{
	struct elog_strmap *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->n_slots = 64;
	m->slots = calloc(m->n_slots, sizeof(*m->slots));
	if (m->slots == NULL) {
		free(m);
		return NULL;
	}
	return m;
}

void
elog_strmap_free(struct elog_strmap *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->entries[i].key);
	free(m->entries);
	free(m->slots);
	free(m);
}

static size_t
find(const struct elog_strmap *m, const char *key, uint64_t h)
{
	size_t mask = m->n_slots - 1, i = (size_t)h & mask;

	while (m->slots[i] != 0 && strcmp(m->entries[m->slots[i] - 1].key, key) != 0)
		i = (i + 1) & mask;
	return i;
}

void *
elog_strmap_get(const struct elog_strmap *m, const char *key)
{
	size_t i = find(m, key, hash(key));

	return m->slots[i] != 0 ? m->entries[m->slots[i] - 1].value : NULL;
}

static int
grow(struct elog_strmap *m)
{
	size_t n_slots = m->n_slots * 2;
	uint32_t *slots = calloc(n_slots, sizeof(*slots));

	if (slots == NULL)
		return -1;
	free(m->slots);
	m->slots = slots;
	m->n_slots = n_slots;
	for (size_t e = 0; e < m->n; e++)
		m->slots[find(m, m->entries[e].key, hash(m->entries[e].key))] = (uint32_t)(e + 1);
	return 0;
}

int
elog_strmap_put(struct elog_strmap *m, const char *key, void *value)
{
	uint64_t h = hash(key);
	size_t i = find(m, key, h);

	if (m->slots[i] != 0) {
		m->entries[m->slots[i] - 1].value = value;
		return 0;
	}
	if (m->n >= UINT32_MAX - 1)
		return -1;
	if (m->n == m->cap) {
		size_t cap = m->cap != 0 ? m->cap * 2 : 32;
		struct entry *e = realloc(m->entries, cap * sizeof(*e));
		if (e == NULL)
			return -1;
		m->entries = e;
		m->cap = cap;
	}
	m->entries[m->n].key = strdup(key);
	if (m->entries[m->n].key == NULL)
		return -1;
	m->entries[m->n].value = value;
	m->n++;
	/* Keep the load under one half. */
	if (m->n * 2 > m->n_slots) {
		if (grow(m) < 0) {
			m->n--;
			free(m->entries[m->n].key);
			return -1;
		}
	} else {
		m->slots[i] = (uint32_t)m->n;
	}
	return 0;
}

size_t
elog_strmap_count(const struct elog_strmap *m)
{
	return m->n;
}

void *
elog_strmap_value(const struct elog_strmap *m, size_t i)
{
	return m->entries[i].value;
}

const char *
elog_strmap_key(const struct elog_strmap *m, size_t i)
{
	return m->entries[i].key;
}
