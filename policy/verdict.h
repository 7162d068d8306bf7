/* One decision, one vocabulary (DESIGN.md, "One decision, one resolver").
 *
 * verdict_decide() is the one answer to "may this go?" for a connection,
 * a request, a DNS question or a name that later bytes present: a pure
 * function of the compiled policy, the mode and what is asked, returning
 * an enum verdict and an enum reason. Every refusal anywhere in airlock
 * (policy, address guard, binding, protocol, upstream failure, limit) has
 * one enum verdict_reason, and VERDICT_REASONS below is the one table
 * from which its strings come: the egress log's `reason` token, the
 * Proxy-Status error (RFC 9209), the HTTP status and the default
 * sentence for people. docs/log.md lists the same table ("Reasons"). */
#ifndef AIRLOCK_POLICY_VERDICT_H
#define AIRLOCK_POLICY_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/policy.h"

enum verdict {
	VERDICT_ALLOW = 0,
	VERDICT_DENY,
	VERDICT_AUDIT_DENY, /* audit mode: let through, would be denied under enforce */
};

/* What a reason does to the line's verdict and rule when a connection is
 * refused for it (conn_refuse): */
#define VR_DENIES 0x1 /* the verdict becomes deny: a refusal of the destination */
#define VR_NORULE 0x2 /* the rule (which allowed the name) is not the cause: dropped */

/* X(ENUM, token, Proxy-Status error, HTTP status, flags, default sentence)
 * The token is the log's `reason` (schema v1: stable, only ever added);
 * the status and error are what an HTTP client is answered; a TLS client
 * gets an alert and a transparent non-HTTP one a reset whatever they say.
 * Reasons that end an allowed connection (timeouts, closes) have status 0:
 * nothing is answered. */
#define VERDICT_REASONS(X)                                                                         \
	X(NONE, "", "", 0, 0, "")                                                                  \
	/* the policy */                                                                           \
	X(RULE_DENY, "denied-by-rule", "http_request_denied", 403, VR_DENIES,                      \
	  "a deny rule matches")                                                                   \
	X(NO_RULE, "no-rule", "http_request_denied", 403, VR_DENIES, "no rule allows it")          \
	X(ECH, "ech-not-allowed", "http_request_denied", 403, VR_DENIES,                           \
	  "ClientHello has encrypted_client_hello and no rule for the name has `ech: allow`")      \
	X(NAME_CHANGED, "name-changed", "http_request_denied", 421, VR_DENIES | VR_NORULE,         \
	  "later bytes name another destination than the one decided")                             \
	X(GUARD, "address-guard", "destination_ip_prohibited", 403, VR_DENIES | VR_NORULE,         \
	  "the address guard refuses the address")                                                 \
	X(NOT_AT_ADDRESS, "name-not-at-address", "destination_ip_prohibited", 403,                 \
	  VR_DENIES | VR_NORULE, "the name does not resolve to the original destination")          \
	X(LOG_BUDGET, "log-budget", "connection_limit_reached", 503, VR_DENIES | VR_NORULE,        \
	  "egress log budget spent; new destinations are refused")                                 \
	/* what the bytes are */                                                                   \
	X(BAD_REQUEST, "bad-request", "http_request_error", 400, 0, "malformed request")           \
	X(BAD_NAME, "bad-name", "http_request_error", 400, VR_DENIES, "not a valid name")          \
	X(HEAD_TOO_LARGE, "head-too-large", "http_request_error", 431, 0,                          \
	  "request head over a limit")                                                             \
	X(FRAMING, "ambiguous-framing", "http_request_error", 400, 0,                              \
	  "the message's length or routing is ambiguous")                                          \
	X(UPGRADE, "upgrade-refused", "http_request_error", 400, 0,                                \
	  "only websocket upgrades are let through")                                               \
	X(HEAD_TIMEOUT, "head-timeout", "http_request_error", 408, 0,                              \
	  "request head not complete in time")                                                     \
	X(REQUEST_DENIED, "request-denied", "http_request_denied", 403, VR_DENIES,                  \
	  "the host's inspect: rules refuse this method or path")                                  \
	X(BAD_PATH, "bad-path", "http_request_error", 400, 0,                                      \
	  "the request target has no canonical form")                                              \
	X(BODY_TOO_LARGE, "body-too-large", "http_request_error", 413, 0,                          \
	  "the request body is over max_request_body")                                             \
	X(LENGTH_REQUIRED, "length-required", "http_request_error", 411, 0,                        \
	  "a chunked request body where max_request_body needs its length first")                  \
	X(TLS_MALFORMED, "tls-malformed", "tls_protocol_error", 403, 0,                            \
	  "malformed or incomplete ClientHello")                                                   \
	X(SNI_MANY, "sni-many-names", "tls_protocol_error", 403, VR_DENIES,                        \
	  "ClientHello server_name lists more than one name")                                      \
	/* the way there */                                                                        \
	X(DNS_ERROR, "dns-error", "dns_error", 502, 0, "the name does not resolve")                \
	X(DNS_TIMEOUT, "dns-timeout", "dns_timeout", 504, 0, "resolving the name timed out")       \
	X(CONNECT_TIMEOUT, "connect-timeout", "connection_timeout", 504, 0,                        \
	  "connecting timed out")                                                                  \
	X(CONNECT_REFUSED, "connect-refused", "connection_refused", 502, 0,                        \
	  "the destination refused the connection")                                                \
	X(UNREACHABLE, "unreachable", "destination_ip_unroutable", 502, 0,                         \
	  "the destination cannot be reached")                                                     \
	X(UPSTREAM_PROTOCOL, "upstream-protocol-error", "http_protocol_error", 502, 0,             \
	  "malformed response from upstream")                                                      \
	X(UPSTREAM_HEAD_TOO_LARGE, "upstream-head-too-large", "http_response_header_section_size", \
	  502, 0, "response head too large")                                                       \
	X(UPSTREAM_CLOSED, "upstream-closed", "connection_terminated", 502, 0,                     \
	  "upstream closed the connection")                                                        \
	X(UPSTREAM_RESET, "upstream-reset", "connection_terminated", 502, 0,                       \
	  "upstream connection reset")                                                             \
	X(UPSTREAM_ERROR, "upstream-error", "connection_terminated", 502, 0,                       \
	  "upstream connection error")                                                             \
	X(RESPONSE_TIMEOUT, "response-timeout", "http_response_timeout", 504, 0,                   \
	  "no response from upstream in time")                                                     \
	/* how an allowed connection ended */                                                      \
	X(CLIENT_CLOSED, "client-closed", "", 0, 0, "client closed the connection")                \
	X(CLIENT_RESET, "client-reset", "", 0, 0, "client connection reset")                       \
	X(CLIENT_ERROR, "client-error", "", 0, 0, "client connection error")                       \
	X(IDLE_TIMEOUT, "idle-timeout", "", 0, 0, "idle timeout")                                  \
	/* the proxy itself */                                                                     \
	X(TOO_MANY_CONNS, "too-many-connections", "connection_limit_reached", 503, VR_DENIES,      \
	  "too many connections")                                                                  \
	X(RESOURCE, "resource-limit", "proxy_internal_error", 503, 0,                              \
	  "out of a resource of the proxy's own")                                                  \
	X(LOG_FAILED, "log-failed", "proxy_internal_error", 503, VR_DENIES,                        \
	  "the egress log cannot be written")                                                      \
	X(NO_ORIG_DST, "no-original-destination", "proxy_internal_error", 0, VR_DENIES,            \
	  "no original destination (not redirected by nftables?)")                                 \
	X(BROKER, "broker-failed", "proxy_internal_error", 503, 0,                                 \
	  "the broker cannot take the request (gone, busy, or it refused the message)")            \
	/* the DNS listener */                                                                     \
	X(DNS_CLASS, "dns-class", "", 0, 0, "query class is not IN")                               \
	X(DNS_REVERSE, "dns-reverse", "", 0, 0, "reverse zone: only PTR of learned addresses")     \
	X(DNS_ANY, "dns-any", "", 0, 0, "ANY is not answered")                                     \
	X(DNS_QTYPE, "dns-type", "", 0, 0, "query type not forwarded")                             \
	X(CNAME_DENIED, "cname-denied", "http_request_denied", 403, VR_DENIES | VR_NORULE,         \
	  "CNAME to a denied name")                                                                \
	X(DNS_UPSTREAM, "dns-upstream-failed", "", 0, 0, "upstream failed")                        \
	X(DNS_PTR, "dns-ptr-learned", "", 0, 0, "answered from the IP cache")                      \
	/* the kernel and the unix socket gate */                                                  \
	X(FIREWALL, "firewall", "", 0, 0, "blocked by the sandbox firewall")                       \
	X(FIREWALL_OVERFLOW, "firewall-overflow", "", 0, 0, "too many blocked destinations")       \
	X(FIREWALL_OVERRUN, "firewall-overrun", "", 0, 0,                                          \
	  "blocked packets lost: NFLOG socket overrun")                                            \
	X(UNIX_NOT_LISTED, "unix-not-listed", "", 0, 0,                                            \
	  "a socket of the host that the policy's unix: list does not name")

#define VERDICT_REASON_ENUM(e, tok, err, st, fl, text) VR_##e,
enum verdict_reason { VERDICT_REASONS(VERDICT_REASON_ENUM) VR_COUNT };
#undef VERDICT_REASON_ENUM

/* The strings of the table; every function accepts any value (one out of
 * range reads as VR_NONE). Static, never NULL. */
const char *verdict_str(enum verdict v); /* "allow" | "deny" | "audit-deny" */
const char *verdict_reason_token(enum verdict_reason r);
const char *verdict_reason_error(enum verdict_reason r); /* "" when none */
int verdict_reason_status(enum verdict_reason r);        /* 0 when none */
unsigned verdict_reason_flags(enum verdict_reason r);
const char *verdict_reason_text(enum verdict_reason r);
/* The reason whose token is s (for a reader that interprets a logged
 * reason); VR_COUNT when s is none. */
enum verdict_reason verdict_reason_parse(const char *s);

/* How the name being decided was learned. */
enum verdict_source {
	VERDICT_SRC_NONE = 0, /* no name: the address decides (cidr rules) */
	VERDICT_SRC_CONNECT,  /* explicit proxy: CONNECT host:port */
	VERDICT_SRC_ABSOLUTE, /* explicit proxy: GET http://host/... */
	VERDICT_SRC_SNI,      /* transparent: the ClientHello's server_name */
	VERDICT_SRC_HOST,     /* transparent: the request's Host (or target) */
	VERDICT_SRC_LEARNED,  /* transparent: the name the DNS listener gave
	                       * the original destination for (see .learned) */
	VERDICT_SRC_DNS,      /* a DNS question: the name on any port */
};

/* What is asked. Strings and the address are borrowed for the call. */
struct verdict_query {
	enum verdict_source src;
	/* The name, normalised (policy_name_normalize), or an IP literal
	 * (then ip_literal and addr is that address); NULL for SRC_NONE. */
	const char *name;
	bool ip_literal;
	/* The address: the IP literal's, or for SRC_NONE / SRC_LEARNED the
	 * original destination, which the cidr rules judge first. */
	const struct sockaddr *addr;
	uint16_t port;
	/* SRC_LEARNED: the name the DNS answers gave addr (NULL if none);
	 * it decides only when no cidr rule speaks of addr and port (a cidr
	 * deny wins over any name the address also serves). */
	const char *learned;
	bool ech; /* the ClientHello carries encrypted_client_hello */
	/* A name bytes after the decision present (a ClientHello's SNI, a
	 * later request's Host), NULL if none: on a connection decided for
	 * a name it must be that name (case and one trailing dot folded, IP
	 * literals compared as addresses); on one a cidr rule let through
	 * without a name it is decided as if it had come first. */
	const char *claim;
};

/* The answer. rule is borrowed from the policy (valid until
 * policy_free; a connection copies it). */
struct verdict_result {
	enum verdict verdict;
	enum verdict_reason reason; /* VR_NONE when allowed without remark */
	const char *rule;           /* "file:line" of the deciding rule, or NULL */
	const char *rule_why;       /* a deny rule's `reason:` text, or NULL */
	bool by_learned;            /* SRC_LEARNED: the learned name decided */
	bool by_claim;              /* the claim was decided as a name */
};

/* The one decision: q under p in mode (the policy's own mode is not
 * consulted, so `policy test` and `log replay` can ask for enforce).
 * Pure: no allocation, no I/O; the same query gets the same answer. */
void verdict_decide(const struct policy *p, enum policy_mode mode, const struct verdict_query *q,
                    struct verdict_result *out);

/* Whether two names are one for binding: case and one trailing dot
 * folded; two IP literals compared as addresses (IPv4-mapped IPv6 is the
 * IPv4 address). */
bool verdict_same_name(const char *a, const char *b);

/* The one-line sentence for people about r's decision of q: the reason's
 * default sentence with the names, ports and the deciding rule filled in
 * ("no rule allows pypi.org port 443", "denied by rule p.yaml:4",
 * "tunnel decided for a.test carries b.test"). Writes at most outlen
 * bytes (NUL included); returns out. */
char *verdict_message(const struct verdict_result *r, const struct verdict_query *q, char *out,
                      size_t outlen);

#endif
