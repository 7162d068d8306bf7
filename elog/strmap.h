/* A string-keyed hash map for the review commands' aggregation (per
 * destination, per task, per name). Open addressing, grows by doubling;
 * keys are copied; values are caller-owned pointers. */
#ifndef AIRLOCK_ELOG_STRMAP_H
#define AIRLOCK_ELOG_STRMAP_H

#include <stddef.h>

struct elog_strmap;

struct elog_strmap *elog_strmap_new(void);
/* Frees the keys, not the values. */
void elog_strmap_free(struct elog_strmap *m);
/* The value stored under key, or NULL. */
void *elog_strmap_get(const struct elog_strmap *m, const char *key);
/* Store value under key (replacing). Returns 0 or -1 (out of memory). */
int elog_strmap_put(struct elog_strmap *m, const char *key, void *value);
size_t elog_strmap_count(const struct elog_strmap *m);
/* Values in insertion order; i < count. */
void *elog_strmap_value(const struct elog_strmap *m, size_t i);
const char *elog_strmap_key(const struct elog_strmap *m, size_t i);

#endif
