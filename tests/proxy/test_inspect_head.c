/* A request head on an inspected connection (proxy/inspect_head.c):
 * authority bound to the connection's name (421), the canonical path is
 * what is decided and what is forwarded, the rules' refusals (403 with
 * the reason in the body and Proxy-Status), max_request_body (413, 411),
 * nothing ambiguous let through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy/inspect.h"
#include "policy/policy.h"
#include "proxy/http.h"
#include "proxy/inspect_head.h"

static const char policy_yaml[] =
        "version: 1\n"
        "allow:\n"
        "  - host: origin.lab\n"
        "    ports: [443, 8443]\n"
        "    inspect:\n"
        "      http:\n"
        "        access: read-only\n"
        "        deny:\n"
        "          - {methods: [\"*\"], path: \"/**/git-receive-pack\"}\n"
        "        allow:\n"
        "          - {methods: [POST], path: \"/org/*/git-upload-pack\"}\n"
        "        only_paths: [\"/org/**\", \"/simple/**\"]\n"
        "        max_request_body: 100\n";

static struct policy *pol;
static const struct policy_inspect *pi;
static struct inspect_head_result res;
static char out[16384];

static int
setup(void **state)
{
	struct policy_diag d = {0};

	(void)state;
	pol = policy_load_buffer("i.yaml", policy_yaml, sizeof(policy_yaml) - 1, &d);
	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	policy_diag_clear(&d);
	if (pol == NULL)
		return -1;
	pi = policy_match_inspect(pol, "origin.lab", 443);
	return pi != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	policy_free(pol);
	return 0;
}

/* Decide head on origin.lab:port: the forwarded bytes (NUL-terminated in
 * out), or NULL on refusal. */
static const char *
decide(const char *head, uint16_t port)
{
	struct http_head h;
	ssize_t n;

	assert_int_equal(http_parse_request(head, strlen(head), &h), HTTP_OK);
	n = inspect_head_decide(pi, "origin.lab", port, head, &h, &res, out, sizeof(out) - 1);
	assert_true(n >= 0);
	if (n == 0) {
		assert_int_not_equal(res.reason, VR_NONE);
		assert_true(res.close);
		return NULL;
	}
	assert_int_equal(res.reason, VR_NONE);
	out[n] = '\0';
	return out;
}

static void
expect_refused(const char *head, enum verdict_reason why, int status, const char *why_part)
{
	char ans[4096];
	ssize_t n;

	if (decide(head, 443) != NULL)
		fail_msg("forwarded, expected %d:\n%s", status, head);
	if (res.reason != why)
		fail_msg("reason %s (%s), expected %s", verdict_reason_token(res.reason), res.why,
		         verdict_reason_token(why));
	if (strstr(res.why, why_part) == NULL)
		fail_msg("'%s' lacks '%s'", res.why, why_part);
	n = inspect_head_refusal(&res, "origin.lab", ans, sizeof(ans));
	assert_true(n > 0);
	ans[n] = '\0';
	{
		char line[64], ps[512];

		snprintf(line, sizeof(line), "HTTP/1.1 %d ", status);
		assert_memory_equal(ans, line, strlen(line));
		snprintf(ps, sizeof(ps), "\r\nProxy-Status: airlock; error=%s; details=\"%s: %s\"\r\n",
		         verdict_reason_error(why), verdict_reason_token(why), res.why);
		assert_non_null(strstr(ans, ps));
		assert_non_null(strstr(ans, "\r\nConnection: close\r\n"));
		/* The body says it too. */
		assert_non_null(strstr(strstr(ans, "\r\n\r\n"), res.why));
	}
}

static void
test_forward_canonical(void **state)
{
	const char *f;

	(void)state;
	f = decide("GET /org/repo/info/refs?service=git-upload-pack HTTP/1.1\r\n"
	           "Host: origin.lab\r\nUser-Agent: git/2\r\nProxy-Authorization: x\r\n\r\n",
	           443);
	assert_non_null(f);
	assert_string_equal(f, "GET /org/repo/info/refs?service=git-upload-pack HTTP/1.1\r\n"
	                       "Host: origin.lab\r\nUser-Agent: git/2\r\nVia: 1.1 airlock\r\n\r\n");
	assert_string_equal(res.method, "GET");
	assert_string_equal(res.target.path, "/org/repo/info/refs");
	assert_int_equal(res.rule.reason, INSPECT_R_ACCESS);
	assert_string_equal(res.rule.where, "i.yaml:7");

	/* Dot segments, escapes of unreserved bytes, ;params: decided and
	 * sent in the one canonical form. */
	f = decide("GET /simple/../org/./a/%7euser;jsessionid=1/x HTTP/1.1\r\nHost: ORIGIN.lab\r\n\r\n",
	           443);
	assert_non_null(f);
	assert_memory_equal(f, "GET /org/a/~user/x HTTP/1.1\r\n", 29);

	/* The allow rule lets a POST through; its body is under the limit. */
	f = decide("POST /org/r/git-upload-pack HTTP/1.1\r\nHost: origin.lab\r\n"
	           "Content-Length: 100\r\n\r\n",
	           443);
	assert_non_null(f);
	assert_int_equal(res.framing, HTTP_BODY_LENGTH);
	assert_int_equal(res.length, 100);
	assert_string_equal(res.rule.where, "i.yaml:11");

	/* Another port: Host names it, or names none. */
	f = decide("GET /org/x HTTP/1.1\r\nHost: origin.lab:8443\r\n\r\n", 8443);
	assert_non_null(f);
	assert_non_null(strstr(f, "\r\nHost: origin.lab:8443\r\n"));
	assert_non_null(decide("GET /org/x HTTP/1.1\r\nHost: origin.lab\r\n\r\n", 8443));
}

static void
test_rules_refuse(void **state)
{
	(void)state;
	expect_refused("POST /org/r/git-receive-pack HTTP/1.1\r\nHost: origin.lab\r\n"
	               "Content-Length: 5\r\n\r\n",
	               VR_REQUEST_DENIED, 403, "POST /org/r/git-receive-pack: refused by a deny rule at i.yaml:9");
	expect_refused("GET /org/r/git-receive-pack HTTP/1.1\r\nHost: origin.lab\r\n\r\n",
	               VR_REQUEST_DENIED, 403, "a deny rule");
	/* A path trick is decided on the canonical path. */
	expect_refused("GET /org/r/x/..%2e/%2e%2e/git-receive-pack HTTP/1.1\r\nHost: origin.lab\r\n\r\n",
	               VR_REQUEST_DENIED, 403, "GET /org/r/x/git-receive-pack");
	expect_refused("GET /org/r/x/%2e%2e/%2E%2e/git-receive-pack HTTP/1.1\r\nHost: origin.lab\r\n\r\n",
	               VR_REQUEST_DENIED, 403, "GET /org/git-receive-pack");
	expect_refused("GET /org/../etc/passwd HTTP/1.1\r\nHost: origin.lab\r\n\r\n",
	               VR_REQUEST_DENIED, 403, "GET /etc/passwd: refused by only_paths");
	expect_refused("PUT /org/x HTTP/1.1\r\nHost: origin.lab\r\nContent-Length: 0\r\n\r\n",
	               VR_REQUEST_DENIED, 403, "PUT /org/x: refused by no rule allows it");
	expect_refused("GET /org%2Fx HTTP/1.1\r\nHost: origin.lab\r\n\r\n", VR_BAD_PATH, 400,
	               "request target:");
	expect_refused("GET http://origin.lab/org/x HTTP/1.1\r\nHost: origin.lab\r\n\r\n",
	               VR_BAD_PATH, 400, "request target:");
}

static void
test_authority(void **state)
{
	(void)state;
	expect_refused("GET /org/x HTTP/1.1\r\nHost: other.lab\r\n\r\n", VR_NAME_CHANGED, 421,
	               "decided for origin.lab port 443 carries a request for Host other.lab");
	expect_refused("GET /org/x HTTP/1.1\r\nHost: origin.lab:8443\r\n\r\n", VR_NAME_CHANGED,
	               421, "Host origin.lab:8443");
	expect_refused("GET /org/x HTTP/1.1\r\nHost: 203.0.113.10\r\n\r\n", VR_NAME_CHANGED, 421,
	               "203.0.113.10");
	expect_refused("GET /org/x HTTP/1.1\r\nHost: sub.origin.lab\r\n\r\n", VR_NAME_CHANGED, 421,
	               "sub.origin.lab");
	expect_refused("GET /org/x HTTP/1.1\r\nUser-Agent: a\r\n\r\n", VR_BAD_REQUEST, 400,
	               "no Host field");
	expect_refused("GET /org/x HTTP/1.1\r\nHost: origin.lab\r\nHost: other.lab\r\n\r\n",
	               VR_BAD_REQUEST, 400, "more than one Host");
}

static void
test_bodies_and_framing(void **state)
{
	(void)state;
	expect_refused("POST /org/r/git-upload-pack HTTP/1.1\r\nHost: origin.lab\r\n"
	               "Content-Length: 101\r\n\r\n",
	               VR_BODY_TOO_LARGE, 413, "Content-Length 101 is over max_request_body 100");
	expect_refused("POST /org/r/git-upload-pack HTTP/1.1\r\nHost: origin.lab\r\n"
	               "Transfer-Encoding: chunked\r\n\r\n",
	               VR_LENGTH_REQUIRED, 411, "send Content-Length");
	expect_refused("POST /org/r/git-upload-pack HTTP/1.1\r\nHost: origin.lab\r\n"
	               "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	               VR_FRAMING, 400, "ambiguous");
	expect_refused("GET /org/x HTTP/1.1\r\nHost: origin.lab\r\nConnection: Upgrade\r\n"
	               "Upgrade: h2c\r\n\r\n",
	               VR_UPGRADE, 400, "Upgrade on an inspected connection");
	expect_refused("GET /org/x HTTP/1.1\r\nHost: origin.lab\r\nConnection: content-length\r\n"
	               "\r\n",
	               VR_FRAMING, 400, "Connection names Content-Length");
}

/* The head sent gains a Via: one with as many fields as a head may hold
 * is refused, never sent as one a server would refuse (found by
 * fuzz_inspect). */
static void
test_field_count(void **state)
{
	static char head[HTTP_MAX_HEADERS * 16 + 128];
	size_t off;

	(void)state;
	off = (size_t)snprintf(head, sizeof(head), "GET /org/x HTTP/1.1\r\nHost: origin.lab\r\n");
	for (int i = 1; i < HTTP_MAX_HEADERS - 1; i++)
		off += (size_t)snprintf(head + off, sizeof(head) - off, "X-%d: v\r\n", i);
	snprintf(head + off, sizeof(head) - off, "\r\n");
	assert_non_null(decide(head, 443)); /* HTTP_MAX_HEADERS - 1 fields */
	snprintf(head + off, sizeof(head) - off, "X-last: v\r\n\r\n");
	expect_refused(head, VR_HEAD_TOO_LARGE, 431, "fields; at most");
}

/* The sentence never carries a byte that breaks the quoted header. */
static void
test_refusal_text(void **state)
{
	char ans[64];

	(void)state;
	expect_refused("GET /org/x HTTP/1.1\r\nHost: a\"b\r\n\r\n", VR_BAD_REQUEST, 400, "Host");
	assert_null(strchr(res.why, '"'));
	expect_refused("GET /org/x HTTP/1.1\r\nHost: other.lab\r\n\r\n", VR_NAME_CHANGED, 421,
	               "other.lab");
	assert_int_equal(inspect_head_refusal(&res, "origin.lab", ans, sizeof(ans)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_forward_canonical), cmocka_unit_test(test_rules_refuse),
	        cmocka_unit_test(test_authority),         cmocka_unit_test(test_bodies_and_framing),
	        cmocka_unit_test(test_refusal_text),      cmocka_unit_test(test_field_count),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
