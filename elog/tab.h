/* A bounded table of byte-string keys, each with a small fixed-size
 * payload: the writer's memory of repeated events (agg.c) and of the
 * destinations its log names (elog.c, the log budget). Fixed memory, set
 * at creation: at most max entries, and their keys in one arena of
 * arena_bytes; an insert that does not fit fails, and the caller decides
 * (flush early, or treat the key as unknown). A random seed keeps the
 * sandbox, which chooses the keys, from aiming them at one bucket. Pure:
 * no I/O, no clock. */
#ifndef AIRLOCK_ELOG_TAB_H
#define AIRLOCK_ELOG_TAB_H

#include <stdbool.h>
#include <stddef.h>

struct elog_tab;

/* NULL when out of memory. Pages are touched only as the table fills. */
struct elog_tab *elog_tab_new(size_t max_entries, size_t arena_bytes, size_t payload_size);
void elog_tab_free(struct elog_tab *t);

/* The payload stored under key[0..len), or NULL. */
void *elog_tab_find(const struct elog_tab *t, const void *key, size_t len);
/* Insert a key that is not in the table (the caller looked first); its
 * payload is zeroed. NULL when the table or its arena is full. */
void *elog_tab_insert(struct elog_tab *t, const void *key, size_t len);

/* Entries in insertion order, i < elog_tab_count(). The key (borrowed,
 * valid until the next change) is NUL-terminated past its len bytes. */
size_t elog_tab_count(const struct elog_tab *t);
void *elog_tab_payload(const struct elog_tab *t, size_t i);
const char *elog_tab_key(const struct elog_tab *t, size_t i, size_t *len);

/* Keep only the entries keep() returns true for (it may update their
 * payload), in order; the arena is compacted. keep may be NULL: drop all. */
void elog_tab_retain(struct elog_tab *t,
                     bool (*keep)(void *payload, const char *key, size_t len, void *arg),
                     void *arg);

#endif
