/* The `inspect:` key of a host allow rule (docs/policy.md, "Inspection";
 * DESIGN.md, "TLS inspection and L7 rules"): what the request rules of an
 * inspected host are, parsed from the policy file into the compiled
 * policy's arena. The rules themselves are decided by inspect/rules.c. */
#ifndef AIRLOCK_POLICY_INSPECT_H
#define AIRLOCK_POLICY_INSPECT_H

#include <stdint.h>

#include "inspect/rules.h"

/* The largest max_request_body: 16 GiB. */
#define POLICY_INSPECT_BODY_MAX (16ull << 30)
/* Request rules per list (deny, allow) and globs in only_paths. */
#define POLICY_INSPECT_MAX_RULES 256u
/* Methods in one rule's list. */
#define POLICY_INSPECT_MAX_METHODS 16u

/* One inspected rule's settings. Owned by the compiled policy; borrowed
 * until policy_free. */
struct policy_inspect {
	struct inspect_rules http;
	uint64_t max_request_body; /* bytes; 0 = no limit */
	const char *where;         /* "file:line" where the `inspect:` value starts */
};

#endif
