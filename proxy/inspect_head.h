/* One request head on an inspected connection (DESIGN.md, "TLS inspection
 * and L7 rules"), decided before any byte of it goes upstream: the
 * authority bound (the connection's decided name, which the SNI and the
 * CONNECT target already matched, and every request's Host), the target
 * canonicalised (inspect/path.h) and checked against the host's rules
 * (inspect/rules.h), the body's size against max_request_body; then the
 * head to forward, written with the canonical path, or the refusal to
 * answer. Pure and bounded: no allocation (the result is the caller's),
 * fuzzed (tests/fuzz/fuzz_inspect.c). The worker's TLS legs and relay
 * around it are not built yet (docs/proxy.md, "Inspection"). */
#ifndef AIRLOCK_PROXY_INSPECT_HEAD_H
#define AIRLOCK_PROXY_INSPECT_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inspect/path.h"
#include "inspect/rules.h"
#include "policy/inspect.h"
#include "policy/verdict.h"
#include "proxy/http.h"

/* A method as the log shows it, NUL included: a longer token is cut. */
#define INSPECT_HEAD_METHOD_MAX 32
/* The reason's sentence, NUL included (it goes to the 403 body, the
 * Proxy-Status details and the log's detail). */
#define INSPECT_HEAD_WHY_MAX 256

struct inspect_head_result {
	/* VR_NONE: forward; else the refusal (its status from the verdict
	 * table: 400, 403, 411, 413, 421). */
	enum verdict_reason reason;
	char why[INSPECT_HEAD_WHY_MAX]; /* "" when forwarded; printable, no '"' or '\' */
	char method[INSPECT_HEAD_METHOD_MAX];
	unsigned method_bit;           /* inspect_method_bit */
	struct inspect_target target;  /* canonical; valid unless reason is VR_BAD_PATH */
	struct inspect_verdict rule;   /* the rules' answer (where: the L7 rule) */
	enum http_framing framing;     /* of the request's body */
	uint64_t length;               /* HTTP_BODY_LENGTH: its bytes */
	bool close;                    /* the connection must close after the answer */
};

/* Decide the request head h (parsed from buf by http_parse_request) on a
 * connection decided for name (normalised) and port, under pi. On
 * forward, the head to send upstream (the canonical path and query, Host
 * as the name, end-to-end fields) goes into out (outlen bytes) and its
 * length is returned; on refusal, 0; -1 when out is too small (the
 * result then says VR_HEAD_TOO_LARGE). res is filled either way. */
ssize_t inspect_head_decide(const struct policy_inspect *pi, const char *name, uint16_t port,
                            const char *buf, const struct http_head *h,
                            struct inspect_head_result *res, char *out, size_t outlen);

/* The answer to a refused request: status line, Proxy-Status with the
 * reason's error token and the sentence, a text body with the same, and
 * "Connection: close" when res->close. Its length, or -1 when out is too
 * small. */
ssize_t inspect_head_refusal(const struct inspect_head_result *res, const char *name, char *out,
                             size_t outlen);

#endif
