/* h1frame: the HTTP/1 requests a client sends on one connection, framed
 * as the server frames them. One case per rule of item 1 of issue 15:
 * heads kept alive and pipelined, bodies by Content-Length and chunked
 * (with a fake head inside: a body, never a request), what cannot be
 * framed (both lengths, a bad chunk size, obs-fold, a framing field named
 * in Connection, an oversized head, another protocol at a boundary), and
 * an Upgrade: WebSocket answered 101 or not, h2c refused. Each stream is
 * also fed a byte at a time: the same heads, at the same places. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxy/h1frame.h"

static struct http_head head;

/* What framing a stream gave: the heads' names (or "-" for none) joined
 * by ' ', then " BAD" if it was refused, and the refusal's peek error. */
struct result {
	char names[1024];
	bool bad;
	enum peek_error error;
	const char *why;
	size_t passed; /* bytes let go: bodies and heads */
};

/* Feed s in pieces of piece bytes (0: whole); a WebSocket head waits
 * for its answer, which is 101 when yes. */
static void
run(const char *s, size_t len, size_t piece, bool yes, struct result *r)
{
	struct h1frame f;
	size_t off = 0;

	memset(r, 0, sizeof(*r));
	h1frame_init(&f);
	while (off < len) {
		size_t n = piece == 0 || piece > len - off ? len - off : piece, pos = 0;
		/* exact-size copy: ASan sees any read past it */
		uint8_t *copy = malloc(n);

		assert_non_null(copy);
		memcpy(copy, s + off, n);
		while (pos < n) {
			struct peek p;
			size_t used;

			switch (h1frame_step(&f, copy + pos, n - pos, 80, &head, &p, &used)) {
			case H1FRAME_STEP_PASS:
				r->passed += used;
				break;
			case H1FRAME_STEP_HOLD:
				break;
			case H1FRAME_STEP_HEAD:
				assert_memory_equal(f.out, s + off + pos + used - f.out_len,
				                    f.out_len);
				r->passed += f.out_len;
				{
					size_t at = strlen(r->names);

					snprintf(r->names + at, sizeof(r->names) - at, "%s%s",
					         at > 0 ? " " : "",
					         p.name[0] != '\0' ? p.name : "-");
				}
				h1frame_accept(&f, p.websocket);
				break;
			case H1FRAME_STEP_WAIT:
				h1frame_upgraded(&f, yes);
				break;
			case H1FRAME_STEP_BAD:
				r->bad = true;
				r->error = p.error;
				r->why = f.why;
				free(copy);
				h1frame_clear(&f);
				return;
			}
			pos += used;
		}
		free(copy);
		off += n;
	}
	h1frame_clear(&f);
}

/* The stream framed whole and byte by byte: the same answer. */
static void
frame(const char *s, bool yes, struct result *r)
{
	struct result b;

	run(s, strlen(s), 1, yes, &b);
	run(s, strlen(s), 0, yes, r);
	assert_string_equal(r->names, b.names);
	assert_int_equal(r->bad, b.bad);
	if (!r->bad)
		assert_int_equal(r->passed, b.passed);
}

static void
test_keepalive_and_pipelined(void **state)
{
	struct result r;
	(void)state;

	frame("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
	      "\r\n" /* an empty line between requests, as servers allow */
	      "GET /2 HTTP/1.1\r\nHost: B.Test.\r\n\r\n"
	      "GET http://c.test/ HTTP/1.1\r\nHost: c.test\r\n\r\n"
	      "GET / HTTP/1.0\r\n\r\n",
	      false, &r);
	assert_false(r.bad);
	assert_string_equal(r.names, "a.test b.test. c.test -");
}

static void
test_length_body_is_not_a_request(void **state)
{
	static const char s[] = "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 34\r\n\r\n"
	                        "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n"
	                        "GET / HTTP/1.1\r\nHost: b.test\r\n\r\n";
	struct result r;
	(void)state;

	frame(s, false, &r);
	assert_false(r.bad);
	assert_string_equal(r.names, "a.test b.test");
	assert_int_equal(r.passed, strlen(s));
}

static void
test_chunked_body_is_not_a_request(void **state)
{
	struct result r;
	(void)state;

	frame("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	      "10;name=value\r\nGET / HTTP/1.1\r\n\r\n"
	      "12\r\nHost: x.test\r\n\r\n\r\n\r\n"
	      "0\r\nTrailer-Field: GET / HTTP/1.1\r\n\r\n"
	      "GET / HTTP/1.1\r\nHost: b.test\r\n\r\n",
	      false, &r);
	assert_false(r.bad);
	assert_string_equal(r.names, "a.test b.test");
}

/* Counted, not read: the relay splices what h1frame_opaque() allows. */
static void
test_opaque_body(void **state)
{
	static const char s[] = "PUT / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\n";
	struct h1frame f;
	struct peek p;
	size_t used;
	(void)state;

	h1frame_init(&f);
	assert_int_equal(h1frame_opaque(&f), 0);
	assert_int_equal(h1frame_step(&f, (const uint8_t *)s, strlen(s), 80, &head, &p, &used),
	                 H1FRAME_STEP_HEAD);
	h1frame_accept(&f, false);
	assert_int_equal(h1frame_opaque(&f), 10);
	h1frame_skip(&f, 4);
	assert_int_equal(h1frame_opaque(&f), 6);
	h1frame_skip(&f, 6);
	assert_int_equal(h1frame_opaque(&f), 0);
	assert_int_equal(f.state, H1FRAME_HEAD);
	h1frame_clear(&f);
}

static void
expect_bad(const char *s, enum peek_error error, const char *why)
{
	struct result r;

	frame(s, false, &r);
	assert_true(r.bad);
	if (why != NULL) {
		assert_non_null(r.why);
		assert_non_null(strstr(r.why, why));
	} else {
		assert_null(r.why);
		assert_int_equal(r.error, error);
	}
}

static void
test_unframable(void **state)
{
	static const char ok[] = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
	char big[HTTP_MAX_HEAD + 256];
	int n;
	(void)state;

	expect_bad("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
	           "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n"
	           "Transfer-Encoding: chunked\r\n\r\n",
	           PEEK_HTTP_FRAMING, NULL);
	expect_bad("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	           PEEK_OK, "chunked");
	expect_bad("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	           "3\r\nabcX",
	           PEEK_OK, "chunked");
	/* whitespace inside a chunk size; a request as a trailer line */
	expect_bad("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	           "1 0\r\nx\r\n0\r\n\r\n",
	           PEEK_OK, "chunked");
	expect_bad("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	           "0\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	           PEEK_OK, "chunked");
	expect_bad("GET / HTTP/1.1\r\nHost: a.test\r\nX: y\r\n folded\r\n\r\n", PEEK_HTTP_HEAD,
	           NULL);
	expect_bad("GET / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n"
	           "Connection: Content-Length\r\n\r\n",
	           PEEK_HTTP_CONNECTION, NULL);
	expect_bad("GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
	           PEEK_HTTP_UPGRADE, NULL);
	/* at a request boundary: TLS, another protocol */
	n = snprintf(big, sizeof(big), "%s\x16\x03\x01\x02\x01\x01", ok);
	assert_true(n > 0);
	expect_bad(big, PEEK_OK, "not an HTTP/1 request head");
	n = snprintf(big, sizeof(big), "%sSSH-2.0-x\r\n\r\n", ok);
	assert_true(n > 0);
	expect_bad(big, PEEK_OK, "not an HTTP/1 request head");
	/* a head over the limit, after one that was not */
	n = snprintf(big, sizeof(big), "%sGET / HTTP/1.1\r\nHost: a.test\r\nX: ", ok);
	memset(big + n, 'a', sizeof(big) - (size_t)n - 1);
	big[sizeof(big) - 1] = '\0';
	{
		struct result r;

		frame(big, false, &r);
		assert_true(r.bad);
		assert_string_equal(r.names, "a.test");
	}
}

static void
test_websocket(void **state)
{
	static const char s[] = "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\n"
	                        "Upgrade: websocket\r\n\r\n"
	                        "GET / HTTP/1.1\r\nHost: b.test\r\n\r\n";
	struct result r;
	(void)state;

	/* 101: what follows is the WebSocket's, not a request */
	frame(s, true, &r);
	assert_false(r.bad);
	assert_string_equal(r.names, "a.test");
	assert_int_equal(r.passed, strlen(s));
	/* declined: what follows is the next request */
	frame(s, false, &r);
	assert_false(r.bad);
	assert_string_equal(r.names, "a.test b.test");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_keepalive_and_pipelined),
	        cmocka_unit_test(test_length_body_is_not_a_request),
	        cmocka_unit_test(test_chunked_body_is_not_a_request),
	        cmocka_unit_test(test_opaque_body),
	        cmocka_unit_test(test_unframable),
	        cmocka_unit_test(test_websocket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
