/* A bump allocator for the compiled policy: a policy is built once and
 * dies all at once, so its thousands of small strings and tables share a
 * few large chunks and one free path. (After unbound's util/regional.) */
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

#define ARENA_CHUNK (256u * 1024u)
#define ARENA_ALIGN 16u

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char data[];
};

struct policy_arena {
	struct arena_chunk *head;
	size_t total;
};

struct policy_arena *
policy_arena_new(void)
{
	return calloc(1, sizeof(struct policy_arena));
}

void
policy_arena_free(struct policy_arena *a)
{
	struct arena_chunk *c, *next;

	if (a == NULL)
		return;
	for (c = a->head; c != NULL; c = next) {
		next = c->next;
		free(c);
	}
	free(a);
}

void *
policy_arena_alloc(struct policy_arena *a, size_t size)
{
	struct arena_chunk *c = a->head;
	size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void *p;

	if (need < size)
		return NULL;
	if (c == NULL || c->size - c->used < need) {
		/* Big requests (hash tables) get a chunk of their own so the
		 * tail of the current chunk stays usable. */
		size_t csize = need > ARENA_CHUNK ? need : ARENA_CHUNK;

		if (csize > SIZE_MAX - sizeof(*c))
			return NULL;
		c = malloc(sizeof(*c) + csize);
		if (c == NULL)
			return NULL;
		c->size = csize;
		c->used = 0;
		if (need > ARENA_CHUNK && a->head != NULL) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
		a->total += csize;
	}
	p = c->data + c->used;
	c->used += need;
	memset(p, 0, size);
	return p;
}

char *
policy_arena_strndup(struct policy_arena *a, const char *s, size_t n)
{
	char *p;

	if (n == SIZE_MAX || (p = policy_arena_alloc(a, n + 1)) == NULL)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

size_t
policy_arena_size(const struct policy_arena *a)
{
	return a->total;
}
