/* The request rules of an inspected host (DESIGN.md, "TLS inspection and
 * L7 rules"): which methods on which canonical paths may go. A pure
 * function of an immutable rule set and one request, as policy_match is
 * for destinations: it allocates nothing and names the deciding rule.
 *
 * Order: a matching deny rule refuses; then a path outside only_paths
 * refuses; then a matching allow rule, or the access preset, allows;
 * anything else is refused. */
#ifndef AIRLOCK_INSPECT_RULES_H
#define AIRLOCK_INSPECT_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Methods as bits; a rule's set, 0 for every method. */
enum inspect_method {
	INSPECT_M_GET = 1u << 0,
	INSPECT_M_HEAD = 1u << 1,
	INSPECT_M_OPTIONS = 1u << 2,
	INSPECT_M_POST = 1u << 3,
	INSPECT_M_PUT = 1u << 4,
	INSPECT_M_PATCH = 1u << 5,
	INSPECT_M_DELETE = 1u << 6,
	INSPECT_M_TRACE = 1u << 7,
	INSPECT_M_CONNECT = 1u << 8,
	INSPECT_M_OTHER = 1u << 9, /* any other token (PROPFIND, ...) */
};
#define INSPECT_M_ALL 0x3ffu

/* The method token of a request line (case-sensitive, RFC 9110 9.1) as
 * its bit; an unknown token is INSPECT_M_OTHER. */
unsigned inspect_method_bit(const char *method, size_t len);
/* A rule's method name (the same tokens, or "*" for all) as its bits; 0
 * when it is none of them. */
unsigned inspect_method_parse(const char *name);

enum inspect_access {
	INSPECT_ACCESS_NONE = 0,   /* only the allow rules allow */
	INSPECT_ACCESS_READ_ONLY,  /* GET, HEAD, OPTIONS on every path */
	INSPECT_ACCESS_READ_WRITE, /* and POST, PUT, PATCH, DELETE */
	INSPECT_ACCESS_FULL,       /* every method */
};

struct inspect_rule {
	unsigned methods; /* INSPECT_M_* bits; 0 = every method */
	const char *path; /* a glob inspect_glob_check accepted; NULL = every path */
	const char *where; /* "file:line" of the rule, for the log */
};

/* One inspected host's rules, borrowed by inspect_decide (the compiled
 * policy owns them). */
struct inspect_rules {
	enum inspect_access access;
	const char *access_where; /* "file:line" of the access key */
	const struct inspect_rule *deny;
	size_t n_deny;
	const char *const *only_paths; /* globs; none = every path */
	size_t n_only_paths;
	const char *only_where;
	const struct inspect_rule *allow;
	size_t n_allow;
};

enum inspect_reason {
	INSPECT_R_DENY_RULE = 1, /* a deny rule matched */
	INSPECT_R_ONLY_PATHS,    /* the path is outside only_paths */
	INSPECT_R_ALLOW_RULE,    /* an allow rule matched */
	INSPECT_R_ACCESS,        /* the access preset allows it */
	INSPECT_R_NO_RULE,       /* nothing allows it */
};

struct inspect_verdict {
	bool allow;
	enum inspect_reason reason;
	const char *where; /* the deciding rule's "file:line", or NULL */
};

/* Decide one request: its method bit (inspect_method_bit) and its
 * canonical path (inspect_path_canon). */
void inspect_decide(const struct inspect_rules *r, unsigned method, const char *path,
                    struct inspect_verdict *out);

/* The methods an access preset allows. */
unsigned inspect_access_methods(enum inspect_access a);

#endif
