/* Internals shared by the files of policy/ only: the compiled policy, its
 * arena and the limits of the loader. Nothing outside policy/ includes
 * this; other modules see struct policy as opaque (policy.h). */
#ifndef AIRLOCK_POLICY_INTERNAL_H
#define AIRLOCK_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* Bounds on input (documented in docs/policy.md by the presets helper and
 * in the loader's messages). They keep a hostile or broken file from
 * costing more than a few tens of MiB or a fraction of a second:
 *  - a file over 4 MiB is refused before it is parsed (a generated policy
 *    of 100,000 rules is about 2.5 MiB, so real lists still fit);
 *  - YAML nesting deeper than 8 is refused (schema v1 needs 4);
 *  - at most 1,000,000 YAML nodes per file and 200,000 rules in all;
 *  - at most 64 port entries per rule (a "LOW-HIGH" range string counts
 *    as one entry, so any set of ports can still be written);
 *  - includes nest at most 8 deep and load at most 64 files;
 *  - at most 50 error lines are kept; the file is rejected either way. */
#define POLICY_MAX_FILE_SIZE     (4u * 1024u * 1024u)
#define POLICY_MAX_DEPTH         8
#define POLICY_MAX_NODES         1000000u
#define POLICY_MAX_RULES         200000u
#define POLICY_MAX_PORTS         64u
#define POLICY_MAX_REASON        200 /* a rule's reason: text */
#define POLICY_MAX_INCLUDE_DEPTH 8
#define POLICY_MAX_FILES         64u
#define POLICY_MAX_ERRORS        50u
#define POLICY_MAX_PRESET_DIRS   16u
/* unix: entries over all files (each a path up to PATH_MAX - 1). */
#define POLICY_MAX_UNIX 256u

/* ---- arena: everything a compiled policy owns dies with it ---- */

struct policy_arena;

struct policy_arena *policy_arena_new(void);
void policy_arena_free(struct policy_arena *a);
/* 16-byte aligned, zeroed. NULL on allocation failure. */
void *policy_arena_alloc(struct policy_arena *a, size_t size);
char *policy_arena_strndup(struct policy_arena *a, const char *s, size_t n);
/* Bytes reserved from the system so far (for the benchmark). */
size_t policy_arena_size(const struct policy_arena *a);

/* ---- compiled form ---- */

enum prule_kind {
	PRULE_EXACT = 0,
	PRULE_WILDCARD, /* key is the suffix after "*." */
	PRULE_CIDR4,
	PRULE_CIDR6,
};

struct pport {
	uint16_t lo, hi;
};

/* One rule as the matcher sees it. Rules are numbered in load order; a
 * lower number decides when several rules of the same action match. */
struct prule {
	const char *pattern; /* as shown to users: "*.example.com", "10.0.0.0/8" */
	const char *where;   /* "file:line" */
	const char *why;     /* `reason:`, or NULL */
	uint32_t next;       /* next rule with the same key, or PRULE_NONE */
	uint32_t port_off;   /* into policy->ports */
	uint8_t n_ports;     /* at most POLICY_MAX_PORTS */
	uint8_t action;      /* POLICY_ALLOW or POLICY_DENY */
	uint8_t kind : 4;    /* enum prule_kind */
	uint8_t ech : 1;     /* host allow rules: `ech: allow` */
	uint8_t guard;       /* cidr rules: what the rule may open, PRULE_GUARD_* */
	uint32_t set;        /* chain heads of name rules: index into p_sets */
};
#define PRULE_NONE UINT32_MAX
_Static_assert(POLICY_MAX_PORTS <= UINT8_MAX, "struct prule holds n_ports in 8 bits");

/* struct prule's guard byte, fixed at compile time from the rule's range
 * alone (every rule of a cidr chain has the same one):
 *  - the low bits: the non-public guard class (enum guard_class) whose
 *    addresses the rule may open, when both ends of its range are of that
 *    class and its prefix is at least as long as the guarded block holding
 *    them (the rule lies inside one loopback, private, link-local ...
 *    block); GUARD_PUBLIC (0) when it opens none;
 *  - PRULE_GUARD_NARROW: the prefix is /24 or longer (IPv4), /64 or
 *    longer (IPv6), which is what opening one of the host's own public
 *    addresses takes. */
#define PRULE_GUARD_CLASS  0x0fu
#define PRULE_GUARD_NARROW 0x10u

/* The ports of one name chain (all rules with the same exact name, or
 * the same wildcard suffix), merged at compile time: the allow rules'
 * ports and the deny rules' ports, each sorted, disjoint and with no two
 * intervals adjacent. policy_match_name() answers "is some port open?"
 * from these with binary searches instead of 65,536-bit maps. */
struct pset {
	uint32_t off;             /* into p_set_ports: allow, then deny */
	uint16_t n_allow, n_deny; /* merged: at most 32,768 each */
};

/* Open-addressing table of names (exact names, or wildcard suffixes).
 * The key pointer lives in the slot so that a hit can fetch the key text
 * and the first rule at the same time. */
struct pname_slot {
	uint64_t hash;
	const char *key;
	uint32_t len;   /* 0: empty slot (names are never empty) */
	uint32_t first; /* first rule of the chain */
};

/* IPv4 cidr: key is (prefix length << 32 | masked address). */
struct pcidr4_slot {
	uint64_t key;
	uint32_t first;
	uint32_t used;
};

/* IPv6 cidr: masked address and prefix length. */
struct pcidr6_slot {
	uint64_t hi, lo;
	uint32_t first;
	uint8_t used;
	uint8_t plen;
};

/* A socket of the host that `unix:` opens (docs/policy.md). */
struct punix {
	const char *path;  /* absolute, as written; arena string */
	const char *where; /* "file:line"; arena string */
};

struct policy {
	struct policy_arena *p_arena;
	char *p_name;
	char *p_description;
	char p_sha256[65];
	enum policy_mode p_mode;
	struct policy_source *p_sources; /* the files read, in load order */
	size_t p_n_sources;

	struct prule *p_rules;
	uint32_t p_n_rules;
	struct pport *p_ports;

	struct pname_slot *p_exact;
	uint64_t p_exact_mask;
	struct pname_slot *p_suffix;
	uint64_t p_suffix_mask;
	uint64_t *p_filter; /* bit per name and suffix: probe only if set */
	unsigned p_filter_shift;
	uint32_t p_n_wild;
	struct pset *p_sets;       /* one per name chain, see struct pset */
	struct pport *p_set_ports; /* the merged intervals of p_sets */
	struct pcidr4_slot *p_cidr4;
	unsigned p_cidr4_shift;   /* index = hash >> shift */
	uint64_t *p_cidr4_filter; /* bit per (prefix length, network) */
	unsigned p_cidr4_filter_shift;
	struct pcidr6_slot *p_cidr6;
	unsigned p_cidr6_shift;
	/* Prefix lengths present, so a lookup probes only those. */
	uint8_t p_plen4[33];
	uint8_t p_n_plen4;
	uint8_t p_plen6[129];
	uint8_t p_n_plen6;
	struct punix *p_unix; /* in load order, no duplicates */
	uint32_t p_n_unix;
	/* Per rule, its `inspect:` or NULL; the array itself is NULL when no
	 * rule inspects. */
	const struct policy_inspect **p_inspect;
};

/* A rule as the loader produced it, before compilation. */
struct policy_rule_src {
	uint8_t kind;
	uint8_t action;
	uint8_t plen;
	uint8_t addr[16];
	const char *key;     /* arena string: normalised name or suffix */
	const char *pattern; /* arena string */
	const char *where;   /* arena string */
	const char *why;     /* arena string: `reason:`, or NULL */
	uint32_t port_off;
	uint16_t n_ports;
	bool ech; /* `ech: allow` */
	uint32_t line, col;                   /* of the rule, for load errors */
	const struct policy_inspect *inspect; /* `inspect:`, or NULL */
};

/* Build the match tables of p from rules[0..n) (ports already in
 * p->p_ports, strings in p->p_arena). Returns 0 or -1 (out of memory). */
int policy_compile(struct policy *p, const struct policy_rule_src *rules, uint32_t n);

/* The guard byte (see struct prule) of a cidr rule. */
uint8_t policy_cidr_guard(const struct policy_rule_src *r);

/* Append a warning line for every allow cidr rule of rules[0..n) whose
 * range covers guarded addresses it does not open (0.0.0.0/0, ::/0, ...). */
int policy_cidr_check(const struct policy_rule_src *rules, uint32_t n, struct policy_diag *diag);

/* True when the label s[0..len) is numeric the way URL parsers read an
 * IPv4 part: all decimal digits, or "0x" followed by hex digits. A host
 * name never ends in such a label (the loader refuses it, the matchers
 * never match it), so "1.0x7f" or "10.1" cannot be taken for a name. */
bool policy_label_numeric(const char *s, size_t len);

/* Append a warning line for every catalog destination p admits. */
int policy_catalog_check(const struct policy *p, struct policy_diag *diag);

/* Where a parser in policy/ reports a load error (the loader's list). */
struct policy_errsink {
	void (*fn)(void *ctx, const char *file, uint32_t line, uint32_t col, const char *msg);
	void *ctx;
};

struct ytree;
struct ynode;
struct policy_inspect;

/* Parse the value n of an `inspect:` key (policy/inspect.c) into the
 * arena: 0 and *out, or -1 with every error reported to es (*oom set
 * when memory ran out). */
int policy_inspect_parse(struct policy_arena *a, const char *file, const struct ytree *t,
                         const struct ynode *n, const struct policy_errsink *es,
                         const struct policy_inspect **out, bool *oom);

/* Append a formatted line to a diag list; tolerates list == NULL. */
int policy_diag_add(char ***lines, size_t *n, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#endif
