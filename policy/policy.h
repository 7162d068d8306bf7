/* The task's allowlist: loading (schema v1, docs/policy.md), validation and
 * the compiled matcher. Pure: no I/O after policy_load(), no allocation in
 * the match functions, safe to share read-only between threads. */
#ifndef AIRLOCK_POLICY_POLICY_H
#define AIRLOCK_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct policy;

enum policy_mode {
	POLICY_MODE_ENFORCE = 0,
	POLICY_MODE_AUDIT, /* allow everything the guard permits; log audit-deny */
};

enum policy_action {
	POLICY_NO_MATCH = 0, /* no rule matched: deny */
	POLICY_ALLOW,        /* an allow rule matched and no deny rule did */
	POLICY_DENY,         /* a deny rule matched (deny wins) */
};

/* Result of one match. where is borrowed from the policy and valid until
 * policy_free(); a connection that may outlive the policy copies it. */
struct policy_verdict {
	enum policy_action action;
	const char *where; /* "file:line" of the deciding rule, NULL on no match */
	const char *why;   /* the deciding rule's `reason:`, or NULL */
};

/* Errors collected while loading: every problem found, each one line of the
 * form "FILE:LINE:COLUMN: what was wrong; what was expected". */
struct policy_diag {
	char **lines;
	size_t n_lines;
	char **warnings; /* policy_check-style warnings (upload sinks, ...) */
	size_t n_warnings;
};

/* Load and compile the policy at path (a file path, or a preset name such
 * as "pypi" looked up in the preset directories). On any error returns NULL
 * with every error in diag; never a partial policy. diag may be NULL.
 * The caller owns the result (policy_free) and diag's contents
 * (policy_diag_clear). */
struct policy *policy_load(const char *path, struct policy_diag *diag);

/* Same, from bytes in memory; name is used in messages as the file name. */
struct policy *policy_load_buffer(const char *name, const void *data, size_t len,
                                  struct policy_diag *diag);

void policy_free(struct policy *p);
void policy_diag_clear(struct policy_diag *diag);

/* Add a directory searched for preset names before the built-in ones
 * (tests and `--policy-dir`). The string is copied. Returns 0 or -1. */
int policy_add_preset_dir(const char *dir);

/* The directories a preset name is looked up in, first hit wins
 * (docs/policy.md, Include): those of policy_add_preset_dir,
 * $AIRLOCK_POLICY_DIR when set, the source tree's policies/ in a build
 * made with -Dsource_presets=true, and the installed presets. Puts at most
 * max into dirs (borrowed: valid until the environment or the added
 * directories change) and returns how many. */
size_t policy_preset_dirs(const char **dirs, size_t max);

/* One file a policy was read from. */
struct policy_source {
	const char *path; /* as opened: the top-level path as given (relative
	                   * to the current directory of the load), a preset
	                   * as DIR/NAME.yaml, an include joined onto its
	                   * includer's path */
	const char *real; /* path resolved (realpath at load time) */
};

/* The files p was read from, in load order, the top-level one first; each
 * once. A policy from policy_load_buffer has only the files it included.
 * *out is borrowed from p, valid until policy_free(). Returns how many. */
size_t policy_sources(const struct policy *p, const struct policy_source **out);

const char *policy_name(const struct policy *p);
/* Lowercase hex sha256 over the bytes of the file and every include, in
 * load order. */
const char *policy_sha256(const struct policy *p);
enum policy_mode policy_mode(const struct policy *p);
void policy_set_mode(struct policy *p, enum policy_mode mode);

/* Match a destination name (already normalised, see policy_name_normalize)
 * and port. An IP literal given here never matches a host rule; use
 * policy_match_addr for addresses. */
void policy_match_host(const struct policy *p, const char *name, uint16_t port,
                       struct policy_verdict *out);

/* The first allow rule (as "file:line") with `ech: allow` that matches
 * the name (normalised) and port, or NULL when none does or a deny rule
 * matches. A ClientHello with encrypted_client_hello goes on only with
 * such a rule: its SNI is the outer, public name, and the name the server
 * acts on may be another, encrypted one (docs/policy.md, "ECH"). */
const char *policy_match_ech(const struct policy *p, const char *name, uint16_t port);

/* The `inspect:` settings (policy/inspect.h) of the lowest-numbered
 * allow rule with `inspect:` that matches the name (normalised) and port,
 * or NULL when none does or a deny rule matches. Borrowed until
 * policy_free. */
struct policy_inspect;
const struct policy_inspect *policy_match_inspect(const struct policy *p, const char *name,
                                                  uint16_t port);
/* Whether any rule of p has `inspect:`. */
bool policy_inspects(const struct policy *p);

/* Match a name (normalised, as for policy_match_host) on no port in
 * particular, for DNS, whose questions carry none. The verdict is the best
 * one policy_match_host gives the name over all ports: POLICY_ALLOW when
 * some port is allowed (an allow rule names it there and no deny rule
 * does), where = the lowest-numbered allow rule with such a port;
 * otherwise POLICY_DENY when a deny rule names it, where = the
 * lowest-numbered deny rule that closes one of the ports the allow rules
 * open (any deny rule naming it, when no allow rule does); otherwise
 * POLICY_NO_MATCH. No allocation; cost grows with the rules naming it,
 * not with the size of the policy. */
void policy_match_name(const struct policy *p, const char *name, struct policy_verdict *out);

/* Match an address (AF_INET or AF_INET6, port ignored) against cidr rules
 * only, with the given port. The plain rule verdict, as for
 * policy_match_addr_any: the address guard is policy_cidr_allows. */
void policy_match_addr(const struct policy *p, const struct sockaddr *sa, uint16_t port,
                       struct policy_verdict *out);

/* policy_match_name's any-port verdict for an address against the cidr
 * rules: POLICY_ALLOW when some port of sa is allowed. The plain rule
 * verdict, with no regard to the address guard: a guarded address (see
 * policy/guard.h) is only ever let through by policy_cidr_allows or
 * policy_cidr_opens_any. */
void policy_match_addr_any(const struct policy *p, const struct sockaddr *sa,
                           struct policy_verdict *out);

/* The address guard's override: true when the cidr rules open sa on port
 * although the guard refuses it. It counts only allow cidr rules that
 * cover sa and port and may open sa:
 *  - sa of a guarded class (guard_classify(sa) != GUARD_PUBLIC): the
 *    rule's whole range lies inside the one guarded block of that class
 *    holding sa, i.e. its prefix is at least guard_block_prefix(sa) long
 *    (127.0.0.0/8 or 127.0.0.1/32 open 127.0.0.1, 10.0.0.5/32 opens
 *    10.0.0.5 and nothing else of 10/8, 169.254.169.254/32 opens the
 *    metadata address; 0.0.0.0/0, ::/0, 0.0.0.0/1, 8.0.0.0/5 open none);
 *  - sa public (the proxy asks so for the host's own addresses): the rule
 *    is /24 or longer (IPv4), /64 or longer (IPv6); a catch-all never
 *    opens the host.
 * A deny cidr rule covering sa and port wins over any allow rule. An
 * IPv4-mapped sa is matched against the IPv4 rules. The port is the one
 * the rule must list, so allowing 10.0.0.0/8 on port 22 opens nothing
 * else of 10/8. */
bool policy_cidr_allows(const struct policy *p, const struct sockaddr *sa, uint16_t port);

/* policy_cidr_allows on no port in particular, for the resolver's answer
 * filter, which sees an address but no port: true when
 * policy_cidr_allows(p, sa, port) holds for some port. */
bool policy_cidr_opens_any(const struct policy *p, const struct sockaddr *sa);

/* What the policy opens, for refusals the sandbox's firewall makes before
 * the proxy sees a connection (nft/refuse.h). policy_allow_ports: the
 * ports some allow rule (host or cidr) lists, merged into sorted, disjoint,
 * non-adjacent ranges; writes at most max into out and returns how many
 * there are (more than max when they did not fit). policy_allow_cidrs:
 * calls fn once per network (family, address in network order with the
 * host bits clear, prefix length) that an allow cidr rule names, on
 * whatever ports; returns how many. No allocation. */
struct policy_port_range {
	uint16_t lo, hi;
};
size_t policy_allow_ports(const struct policy *p, struct policy_port_range *out, size_t max);
size_t policy_allow_cidrs(const struct policy *p,
                          void (*fn)(int family, const uint8_t *addr, unsigned plen, void *arg),
                          void *arg);

/* The host's unix sockets the policy's `unix:` lists open (docs/policy.md,
 * "Unix sockets"), every file's in load order, each path once: how many,
 * and entry i's absolute path as written (the supervisor stats it on the
 * host and matches the inode) with the file:line that named it first.
 * Borrowed until policy_free. */
size_t policy_unix_count(const struct policy *p);
const char *policy_unix_path(const struct policy *p, size_t i, const char **where);

/* Normalise a DNS name for matching: lowercase, one trailing dot removed.
 * Writes at most outlen bytes (NUL included) to out. Returns 0, or -1 with
 * *why set to a static reason ("empty label", "label longer than 63
 * characters", "non-ASCII name; write it as punycode (xn--...)", ...). */
int policy_name_normalize(const char *in, char *out, size_t outlen, const char **why);

/* Human summary for `airlock policy check`: one line per rule. Writes into
 * a malloc'd string the caller frees. */
char *policy_describe(const struct policy *p);

#endif
