/* The `inspect:` key of a host allow rule (policy/inspect.h): parsed and
 * checked into the compiled policy's arena, each error one line naming
 * file:line:column. */
#include "policy/inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/path.h"
#include "policy/internal.h"
#include "policy/ytree.h"

struct iparse {
	struct policy_arena *a;
	const char *file;
	const struct ytree *t;
	const struct policy_errsink *es;
	bool bad;
	bool oom;
};

static void ierr(struct iparse *ip, const struct ynode *n, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
ierr(struct iparse *ip, const struct ynode *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ip->es->fn(ip->es->ctx, ip->file, n->line, n->col, msg);
	ip->bad = true;
}

static const char *
kind_name(const struct ynode *n)
{
	switch (n->type) {
	case YNODE_SEQ:
		return "a list";
	case YNODE_MAP:
		return "a mapping";
	default:
		return n->len == 0 ? "nothing" : "a scalar";
	}
}

/* What a list of the wrong size is, for messages. */
static const char *
seq_size(const struct ynode *n)
{
	if (n->type != YNODE_SEQ)
		return kind_name(n);
	return n->len == 0 ? "an empty list" : "more";
}

static const char *
where_of(struct iparse *ip, const struct ynode *n)
{
	char w[PATH_MAX + 16];
	const char *s;

	snprintf(w, sizeof(w), "%s:%" PRIu32, ip->file, n->line);
	if ((s = policy_arena_strndup(ip->a, w, strlen(w))) == NULL)
		ip->oom = true;
	return s;
}

/* The value of each known key of map n into vals (NULL when absent);
 * unknown and repeated keys are errors. */
static void
map_keys(struct iparse *ip, const struct ynode *n, const char *what, const char *const *names,
         const struct ynode **keys, const struct ynode **vals, size_t nk, const char *expected)
{
	const struct ytree *t = ip->t;

	for (size_t i = 0; i < nk; i++)
		keys[i] = vals[i] = NULL;
	for (uint32_t k = n->child; k != YNODE_NONE;) {
		const struct ynode *key = &t->nodes[k];
		uint32_t v = key->next;
		const struct ynode *val = v != YNODE_NONE ? &t->nodes[v] : key;
		const char *ks = ytree_str(t, key);
		size_t i;

		for (i = 0; i < nk; i++)
			if (key->type == YNODE_SCALAR && strcmp(ks, names[i]) == 0)
				break;
		if (i == nk)
			ierr(ip, key, "%s: unknown key '%s'; expected %s", what, ks, expected);
		else if (keys[i] != NULL)
			ierr(ip, key, "%s: '%s' given twice (first at line %" PRIu32 ")", what, ks,
			     keys[i]->line);
		else {
			keys[i] = key;
			vals[i] = val;
		}
		k = v != YNODE_NONE ? t->nodes[v].next : YNODE_NONE;
	}
}

/* A glob (a path or an only_paths entry) into the arena. */
static const char *
parse_glob(struct iparse *ip, const struct ynode *n, const char *what)
{
	const char *s = ytree_str(ip->t, n);
	const char *why;
	size_t at = 0;
	const char *g;

	if (n->type != YNODE_SCALAR || n->len == 0) {
		ierr(ip, n, "%s: expected a path glob like \"/org/**\", got %s", what, kind_name(n));
		return NULL;
	}
	if (strlen(s) > INSPECT_GLOB_MAX) {
		ierr(ip, n, "%s: a glob is at most %d bytes", what, INSPECT_GLOB_MAX);
		return NULL;
	}
	if ((why = inspect_glob_check(s, &at)) != NULL) {
		ierr(ip, n, "%s: '%s' at byte %zu: %s", what, s, at + 1, why);
		return NULL;
	}
	if ((g = policy_arena_strndup(ip->a, s, strlen(s))) == NULL)
		ip->oom = true;
	return g;
}

static unsigned
parse_methods(struct iparse *ip, const struct ynode *n, const char *what)
{
	const struct ytree *t = ip->t;
	unsigned bits = 0;

	if (n->type != YNODE_SEQ || n->len == 0 || n->len > POLICY_INSPECT_MAX_METHODS) {
		ierr(ip, n, "%s: expected a list of 1 to %u methods like [GET, HEAD] or [\"*\"], got %s",
		     what, POLICY_INSPECT_MAX_METHODS, seq_size(n));
		return 0;
	}
	for (uint32_t c = n->child; c != YNODE_NONE; c = t->nodes[c].next) {
		const struct ynode *m = &t->nodes[c];
		unsigned b = m->type == YNODE_SCALAR ? inspect_method_parse(ytree_str(t, m)) : 0;

		if (b == 0)
			ierr(ip, m,
			     "%s: '%s' is not a method; expected GET, HEAD, OPTIONS, POST, PUT, PATCH, "
			     "DELETE, TRACE, CONNECT or \"*\"",
			     what, m->type == YNODE_SCALAR ? ytree_str(t, m) : kind_name(m));
		bits |= b;
	}
	return bits;
}

/* A deny: or allow: list of {methods, path}. */
static void
parse_rules(struct iparse *ip, const struct ynode *n, const char *what,
            const struct inspect_rule **out, size_t *n_out)
{
	static const char *const names[] = {"methods", "path"};
	const struct ytree *t = ip->t;
	struct inspect_rule *rules;
	size_t i = 0;

	*out = NULL;
	*n_out = 0;
	if (n->type != YNODE_SEQ || n->len > POLICY_INSPECT_MAX_RULES) {
		ierr(ip, n,
		     "%s: expected a list of at most %u rules like {methods: [POST], path: \"/**\"}, "
		     "got %s",
		     what, POLICY_INSPECT_MAX_RULES, seq_size(n));
		return;
	}
	if (n->len == 0)
		return;
	if ((rules = policy_arena_alloc(ip->a, sizeof(*rules) * n->len)) == NULL) {
		ip->oom = true;
		return;
	}
	for (uint32_t c = n->child; c != YNODE_NONE; c = t->nodes[c].next) {
		const struct ynode *r = &t->nodes[c];
		const struct ynode *keys[2], *vals[2];

		if (r->type != YNODE_MAP || r->len == 0) {
			ierr(ip, r, "%s: expected a rule like {methods: [POST], path: \"/**\"}, got %s",
			     what, kind_name(r));
			continue;
		}
		map_keys(ip, r, what, names, keys, vals, 2, "methods or path");
		rules[i].methods = vals[0] != NULL ? parse_methods(ip, vals[0], what) : 0;
		rules[i].path = vals[1] != NULL ? parse_glob(ip, vals[1], what) : NULL;
		rules[i].where = where_of(ip, r);
		i++;
	}
	*out = rules;
	*n_out = i;
}

static void
parse_only(struct iparse *ip, const struct ynode *n, struct policy_inspect *pi)
{
	const struct ytree *t = ip->t;
	const char **globs;
	size_t i = 0;

	if (n->type != YNODE_SEQ || n->len == 0 || n->len > POLICY_INSPECT_MAX_RULES) {
		ierr(ip, n, "only_paths: expected a list of 1 to %u path globs like [\"/org/**\"], got %s",
		     POLICY_INSPECT_MAX_RULES, seq_size(n));
		return;
	}
	if ((globs = policy_arena_alloc(ip->a, sizeof(*globs) * n->len)) == NULL) {
		ip->oom = true;
		return;
	}
	for (uint32_t c = n->child; c != YNODE_NONE; c = t->nodes[c].next)
		globs[i++] = parse_glob(ip, &t->nodes[c], "only_paths");
	pi->http.only_paths = globs;
	pi->http.n_only_paths = i;
	pi->http.only_where = where_of(ip, n);
}

/* "1048576", "512KiB", "1MiB", "2GiB" (also KB/MB/GB, read as 1000s). */
static void
parse_size(struct iparse *ip, const struct ynode *n, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {{"", 1},          {"B", 1},           {"KiB", 1u << 10}, {"MiB", 1u << 20},
	             {"GiB", 1u << 30}, {"KB", 1000},      {"MB", 1000000},   {"GB", 1000000000}};
	const char *s = ytree_str(ip->t, n);
	uint64_t v = 0;
	size_t i = 0;

	if (n->type != YNODE_SCALAR)
		goto bad;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > POLICY_INSPECT_BODY_MAX)
			goto bad;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0 || i > 12)
		goto bad;
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		if (strcmp(s + i, units[u].suffix) != 0)
			continue;
		if (v == 0 || v > POLICY_INSPECT_BODY_MAX / units[u].mult)
			goto bad;
		*out = v * units[u].mult;
		return;
	}
bad:
	ierr(ip, n,
	     "max_request_body: expected a size from 1 byte to 16GiB like 1048576 or 1MiB, got %s",
	     n->type == YNODE_SCALAR && n->len > 0 ? s : kind_name(n));
}

static void
parse_access(struct iparse *ip, const struct ynode *n, struct policy_inspect *pi)
{
	const char *s = ytree_str(ip->t, n);

	if (n->type == YNODE_SCALAR && strcmp(s, "read-only") == 0)
		pi->http.access = INSPECT_ACCESS_READ_ONLY;
	else if (n->type == YNODE_SCALAR && strcmp(s, "read-write") == 0)
		pi->http.access = INSPECT_ACCESS_READ_WRITE;
	else if (n->type == YNODE_SCALAR && strcmp(s, "full") == 0)
		pi->http.access = INSPECT_ACCESS_FULL;
	else {
		ierr(ip, n, "access: expected read-only, read-write or full, got %s",
		     n->type == YNODE_SCALAR && n->len > 0 ? s : kind_name(n));
		return;
	}
	pi->http.access_where = where_of(ip, n);
}

static void
parse_http(struct iparse *ip, const struct ynode *n, struct policy_inspect *pi)
{
	static const char *const names[] = {"access", "deny", "allow", "only_paths",
	                                    "max_request_body"};
	const struct ynode *keys[5], *vals[5];

	if (n->type != YNODE_MAP || n->len == 0) {
		ierr(ip, n, "http: expected a mapping like {access: read-only}, got %s", kind_name(n));
		return;
	}
	map_keys(ip, n, "http", names, keys, vals, 5,
	         "access, deny, allow, only_paths or max_request_body");
	if (vals[0] != NULL)
		parse_access(ip, vals[0], pi);
	if (vals[1] != NULL)
		parse_rules(ip, vals[1], "deny", &pi->http.deny, &pi->http.n_deny);
	if (vals[2] != NULL)
		parse_rules(ip, vals[2], "allow", &pi->http.allow, &pi->http.n_allow);
	if (vals[3] != NULL)
		parse_only(ip, vals[3], pi);
	if (vals[4] != NULL)
		parse_size(ip, vals[4], &pi->max_request_body);
	if (!ip->bad && vals[0] == NULL && pi->http.n_allow == 0)
		ierr(ip, n,
		     "http: nothing would be allowed; give `access: read-only` (or read-write, full) "
		     "or allow: rules");
}

int
policy_inspect_parse(struct policy_arena *a, const char *file, const struct ytree *t,
                     const struct ynode *n, const struct policy_errsink *es,
                     const struct policy_inspect **out, bool *oom)
{
	static const char *const names[] = {"http"};
	struct iparse ip = {.a = a, .file = file, .t = t, .es = es};
	const struct ynode *keys[1], *vals[1];
	struct policy_inspect *pi;

	*out = NULL;
	if (n->type != YNODE_MAP || n->len == 0) {
		ierr(&ip, n, "inspect: expected a mapping like {http: {access: read-only}}, got %s",
		     kind_name(n));
		return -1;
	}
	if ((pi = policy_arena_alloc(a, sizeof(*pi))) == NULL) {
		*oom = true;
		return -1;
	}
	map_keys(&ip, n, "inspect", names, keys, vals, 1, "http");
	if (vals[0] == NULL && !ip.bad)
		ierr(&ip, n, "inspect: missing `http:`; expected {http: {access: read-only}}");
	if (vals[0] != NULL)
		parse_http(&ip, vals[0], pi);
	pi->where = where_of(&ip, n);
	if (ip.oom)
		*oom = true;
	if (ip.bad || ip.oom)
		return -1;
	*out = pi;
	return 0;
}
