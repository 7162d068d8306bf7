/* Destinations that accept uploads from anyone: allowing one of them lets
 * a hostile task exfiltrate whatever it can read. `airlock policy check`
 * warns (never errors) when a policy admits one. Internal to policy/. */
#ifndef AIRLOCK_POLICY_CATALOG_H
#define AIRLOCK_POLICY_CATALOG_H

#include <stddef.h>

struct policy_sink {
	const char *probe; /* a concrete name to test, e.g. "pastebin.com" */
	const char *what;  /* why it is a sink, for the warning text */
};

/* The catalog: borrowed, static. */
const struct policy_sink *policy_catalog(size_t *n);

#endif
