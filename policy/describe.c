/* The human summary behind `airlock policy check`. */
#include <stdio.h>
#include <stdlib.h>

#include "policy/internal.h"

static void
put_ports(FILE *f, const struct policy *p, const struct prule *r)
{
	for (uint16_t i = 0; i < r->n_ports; i++) {
		const struct pport *pp = &p->p_ports[r->port_off + i];

		if (pp->lo == pp->hi)
			fprintf(f, "%s%u", i ? "," : "", pp->lo);
		else
			fprintf(f, "%s%u-%u", i ? "," : "", pp->lo, pp->hi);
	}
}

char *
policy_describe(const struct policy *p)
{
	char *buf = NULL;
	size_t len = 0;
	uint32_t n_allow = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	for (uint32_t i = 0; i < p->p_n_rules; i++)
		n_allow += p->p_rules[i].action == POLICY_ALLOW;
	fprintf(f, "%u rule%s: %u allow, %u deny; anything else is denied\n", p->p_n_rules,
	        p->p_n_rules == 1 ? "" : "s", n_allow, p->p_n_rules - n_allow);
	for (uint32_t i = 0; i < p->p_n_rules; i++) {
		const struct prule *r = &p->p_rules[i];

		fprintf(f, "%-5s %s ports ", r->action == POLICY_DENY ? "deny" : "allow",
		        r->pattern);
		put_ports(f, p, r);
		fprintf(f, "%s%s%s  (%s)\n", r->kind == PRULE_WILDCARD ? " (subdomains only)" : "",
		        r->ech ? " ech: allow" : "",
		        p->p_inspect != NULL && p->p_inspect[i] != NULL ? " inspect: http" : "",
		        r->where);
	}
	for (uint32_t i = 0; i < p->p_n_unix; i++)
		fprintf(f, "unix  %s  (%s)\n", p->p_unix[i].path, p->p_unix[i].where);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
