/* Fuzz a request head on an inspected connection (proxy/inspect_head.h):
 * whatever head the sandbox sends on a connection decided for
 * origin.lab:443, under rules with every kind of clause. Properties, any
 * of which failing aborts:
 *  - forwarded: the bytes sent parse as one request head, its target is
 *    the canonical one (its own canonical form, and what was decided),
 *    its one Host is the connection's name, and the rules allow it;
 *  - refused: a reason with an HTTP status, a sentence without a byte
 *    that would break the quoted Proxy-Status, an answer that fits;
 *  - either way, nothing read or written outside the buffers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/path.h"
#include "inspect/rules.h"
#include "policy/inspect.h"
#include "policy/policy.h"
#include "proxy/http.h"
#include "proxy/inspect_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char policy_yaml[] =
        "version: 1\n"
        "allow:\n"
        "  - host: origin.lab\n"
        "    ports: [443]\n"
        "    inspect:\n"
        "      http:\n"
        "        access: read-only\n"
        "        deny:\n"
        "          - {methods: [\"*\"], path: \"/**/git-receive-pack\"}\n"
        "          - {methods: [GET], path: \"/org/*/secret/**\"}\n"
        "        allow:\n"
        "          - {methods: [POST, PUT], path: \"/org/*/git-upload-pack\"}\n"
        "        only_paths: [\"/org/**\", \"/simple/**\"]\n"
        "        max_request_body: 1KiB\n";

static struct inspect_head_result res;
static struct inspect_target again;
static char out[HTTP_MAX_HEAD * 2 + 4 * INSPECT_TARGET_MAX];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct policy *pol;
	static const struct policy_inspect *pi;
	struct http_head h, h2;
	const char *buf = (const char *)data;
	char ans[2048];
	ssize_t n;

	if (pol == NULL) {
		if ((pol = policy_load_buffer("f.yaml", policy_yaml, sizeof(policy_yaml) - 1,
		                              NULL)) == NULL ||
		    (pi = policy_match_inspect(pol, "origin.lab", 443)) == NULL)
			abort();
	}
	if (http_parse_request(buf, size, &h) != HTTP_OK)
		return 0;
	n = inspect_head_decide(pi, "origin.lab", 443, buf, &h, &res, out, sizeof(out));
	if (n > 0) {
		struct inspect_verdict v;
		int host;

		if (res.reason != VR_NONE || (size_t)n > sizeof(out))
			abort();
		if (http_parse_request(out, (size_t)n, &h2) != HTTP_OK || h2.head_len != (size_t)n)
			abort();
		if (inspect_path_canon(out + h2.target.off, h2.target.len, false, &again, NULL) !=
		            INSPECT_PATH_OK ||
		    strcmp(again.path, res.target.path) != 0 ||
		    strcmp(again.query, res.target.query) != 0)
			abort();
		host = http_find_header(out, &h2, "host", 0);
		if (host < 0 || http_find_header(out, &h2, "host", (size_t)host + 1) >= 0 ||
		    !http_span_eq(out, h2.headers[host].value, "origin.lab"))
			abort();
		inspect_decide(&pi->http, inspect_method_bit(out + h2.method.off, h2.method.len),
		               again.path, &v);
		if (!v.allow)
			abort();
		if (res.framing == HTTP_BODY_CHUNKED ||
		    (res.framing == HTTP_BODY_LENGTH && res.length > pi->max_request_body))
			abort();
	} else if (n == 0 || n == -1) {
		if (res.reason == VR_NONE || res.reason >= VR_COUNT ||
		    verdict_reason_status(res.reason) == 0 || !res.close)
			abort();
		for (const char *c = res.why; *c != '\0'; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f || *c == '"' ||
			    *c == '\\')
				abort();
		if (inspect_head_refusal(&res, "origin.lab", ans, sizeof(ans)) <= 0)
			abort();
	} else {
		abort();
	}
	return 0;
}
