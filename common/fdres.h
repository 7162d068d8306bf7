/* File descriptors of a serving process: its limit raised as far as it
 * goes, and a reserve kept for what must not starve (the DNS listener,
 * the log) when connections have taken the rest.
 *
 * The reserve is a handful of placeholder descriptors held open. Whatever
 * else the limit allows is what accept(2) and a dial's socket(2) may use,
 * so EMFILE there means only the reserve is left: the proxy then pauses
 * accepting. A caller that must not starve draws placeholders on EMFILE
 * and retries; every close is followed by a refill, so descriptors freed
 * go back to the reserve before anyone else gets them. One thread. */
#ifndef AIRLOCK_COMMON_FDRES_H
#define AIRLOCK_COMMON_FDRES_H

#include <stdbool.h>
#include <sys/resource.h>

struct fdres;

/* Raise this process's RLIMIT_NOFILE soft limit to its hard limit (a
 * proxy needs two descriptors per tunnel). Returns the soft limit now in
 * force, or 0 if it cannot be read. Call it after any child that should
 * keep the caller's limit has been started. */
rlim_t fdres_raise_limit(void);

/* The reserve a serving process keeps: 128 descriptors, or an eighth of
 * the soft limit when that is smaller. */
unsigned fdres_default_size(void);

/* Hold n placeholders (fewer if the limit is already that close). NULL
 * only when out of memory. */
struct fdres *fdres_new(unsigned n);
/* Closes the placeholders. Tolerates NULL. */
void fdres_free(struct fdres *r);
/* Close up to n placeholders, so that the caller's next n opens succeed;
 * returns how many were closed (0: the reserve is spent too). */
unsigned fdres_draw(struct fdres *r, unsigned n);
/* Take descriptors back until the reserve is whole again, as far as free
 * descriptors allow; cheap when it is whole. True when whole. */
bool fdres_refill(struct fdres *r);
/* Whether every placeholder is held. True for NULL. */
bool fdres_full(const struct fdres *r);

#endif
