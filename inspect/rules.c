/* The request rules of an inspected host (inspect/rules.h). */
#include "inspect/rules.h"

#include "inspect/path.h"

#include <string.h>
#include <strings.h>

static const struct {
	const char *name;
	unsigned bit;
} methods[] = {
        {"GET", INSPECT_M_GET},         {"HEAD", INSPECT_M_HEAD},
        {"OPTIONS", INSPECT_M_OPTIONS}, {"POST", INSPECT_M_POST},
        {"PUT", INSPECT_M_PUT},         {"PATCH", INSPECT_M_PATCH},
        {"DELETE", INSPECT_M_DELETE},   {"TRACE", INSPECT_M_TRACE},
        {"CONNECT", INSPECT_M_CONNECT},
};

unsigned
inspect_method_bit(const char *method, size_t len)
{
	/* In any case: methods are case-sensitive (RFC 9110 9.1), but some
	 * servers upper-case them (Werkzeug), so "delete" must meet a DELETE
	 * rule rather than pass as another method. */
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strlen(methods[i].name) == len && strncasecmp(methods[i].name, method, len) == 0)
			return methods[i].bit;
	return INSPECT_M_OTHER;
}

unsigned
inspect_method_parse(const char *name)
{
	if (strcmp(name, "*") == 0)
		return INSPECT_M_ALL;
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i].name, name) == 0)
			return methods[i].bit;
	return 0;
}

unsigned
inspect_access_methods(enum inspect_access a)
{
	const unsigned read = INSPECT_M_GET | INSPECT_M_HEAD | INSPECT_M_OPTIONS;

	switch (a) {
	case INSPECT_ACCESS_NONE:
		return 0;
	case INSPECT_ACCESS_READ_ONLY:
		return read;
	case INSPECT_ACCESS_READ_WRITE:
		return read | INSPECT_M_POST | INSPECT_M_PUT | INSPECT_M_PATCH | INSPECT_M_DELETE;
	case INSPECT_ACCESS_FULL:
		return INSPECT_M_ALL;
	}
	return 0;
}

/* A deny rule is read the widest way servers read requests: a GET rule
 * covers HEAD (frameworks run HEAD through the GET handler), and its path
 * glob ignores case and a trailing '/' (Express, Spring, IIS route
 * "/Admin/" as "/admin"). Allow rules and only_paths are read exactly,
 * so neither way widens what is allowed. */
static bool
rule_matches(const struct inspect_rule *r, unsigned method, const char *path, bool deny)
{
	unsigned bits = r->methods;

	if (deny && (bits & INSPECT_M_GET))
		bits |= INSPECT_M_HEAD;
	return (bits == 0 || (bits & method) != 0) &&
	       (r->path == NULL || (deny ? inspect_glob_match_loose(r->path, path)
	                                 : inspect_glob_match(r->path, path)));
}

static const struct inspect_rule *
first_match(const struct inspect_rule *rules, size_t n, unsigned method, const char *path,
            bool deny)
{
	for (size_t i = 0; i < n; i++)
		if (rule_matches(&rules[i], method, path, deny))
			return &rules[i];
	return NULL;
}

void
inspect_decide(const struct inspect_rules *r, unsigned method, const char *path,
               struct inspect_verdict *out)
{
	const struct inspect_rule *m;

	*out = (struct inspect_verdict){.allow = false, .reason = INSPECT_R_NO_RULE};
	if ((m = first_match(r->deny, r->n_deny, method, path, true)) != NULL) {
		out->reason = INSPECT_R_DENY_RULE;
		out->where = m->where;
		return;
	}
	if (r->n_only_paths > 0) {
		bool inside = false;

		for (size_t i = 0; i < r->n_only_paths && !inside; i++)
			inside = inspect_glob_match(r->only_paths[i], path);
		if (!inside) {
			out->reason = INSPECT_R_ONLY_PATHS;
			out->where = r->only_where;
			return;
		}
	}
	if ((m = first_match(r->allow, r->n_allow, method, path, false)) != NULL) {
		*out = (struct inspect_verdict){.allow = true, .reason = INSPECT_R_ALLOW_RULE,
		                                .where = m->where};
		return;
	}
	if ((inspect_access_methods(r->access) & method) != 0)
		*out = (struct inspect_verdict){.allow = true, .reason = INSPECT_R_ACCESS,
		                                .where = r->access_where};
}
