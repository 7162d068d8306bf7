/* peek_parse(): what the first bytes of a connection are and which name
 * they present, and the reasons it refuses them with. One case per class
 * of issue 15 (leading empty lines, odd methods, absolute-form targets,
 * several SNI names, ECH, Upgrade, Connection naming framing), each also
 * cut at every byte: a prefix may only ask for more, never answer
 * differently from the whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxy/peek.h"

static struct http_head head;

static enum peek_kind
peek(const void *buf, size_t len, struct peek *p)
{
	/* exact-size copy: ASan sees any read past len */
	uint8_t *copy = malloc(len ? len : 1);
	enum peek_kind k;

	assert_non_null(copy);
	if (len > 0)
		memcpy(copy, buf, len);
	k = peek_parse(copy, len, 80, &head, p);
	free(copy);
	return k;
}

/* The whole input answers want; every prefix PEEK_MORE or the same. */
static void
check(const void *buf, size_t len, enum peek_kind want, struct peek *p)
{
	for (size_t i = 0; i < len; i++) {
		struct peek q;
		enum peek_kind k = peek(buf, i, &q);

		if (k != PEEK_MORE)
			assert_int_equal(k, want);
	}
	assert_int_equal(peek(buf, len, p), want);
}

static void
check_str(const char *s, enum peek_kind want, struct peek *p)
{
	check(s, strlen(s), want, p);
}

static void
expect_reason(const struct peek *p, const char *want)
{
	char why[512];

	peek_reason(p, why, sizeof(why));
	assert_string_equal(why, want);
}

static void
test_http_names(void **state)
{
	struct peek p;
	(void)state;

	check_str("GET / HTTP/1.1\r\nHost: A.test\r\n\r\nbody", PEEK_HTTP, &p);
	assert_int_equal(p.proto, PEEK_PROTO_HTTP);
	assert_string_equal(p.name, "a.test");
	assert_false(p.has_port);
	assert_int_equal(p.len, 32);
	check_str("\r\nGET / HTTP/1.1\r\nHost: secret.test:8080\r\n\r\n", PEEK_HTTP, &p);
	assert_string_equal(p.name, "secret.test");
	assert_true(p.has_port);
	assert_int_equal(p.port, 8080);
	check_str("M-SEARCH * HTTP/1.1\r\nHost: secret.test\r\n\r\n", PEEK_BAD, &p);
	assert_int_equal(p.error, PEEK_HTTP_TARGET); /* * is OPTIONS' only */
	check_str("M-SEARCH / HTTP/1.1\r\nHost: secret.test\r\n\r\n", PEEK_HTTP, &p);
	assert_string_equal(p.name, "secret.test");
	check_str("GET http://secret.test/ HTTP/1.1\r\n\r\n", PEEK_HTTP, &p);
	assert_string_equal(p.name, "secret.test");
	check_str("GET http://192.0.2.7/ HTTP/1.1\r\nHost: 192.0.2.7\r\n\r\n", PEEK_HTTP, &p);
	assert_true(p.ip_literal);
	check_str("GET / HTTP/1.0\r\n\r\n", PEEK_HTTP, &p);
	assert_string_equal(p.name, "");
	check_str("GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n"
	          "Connection: Upgrade\r\n\r\n",
	          PEEK_HTTP, &p);
	assert_true(p.websocket);
}

static void
test_http_refused(void **state)
{
	static const struct {
		const char *s;
		enum peek_error e;
		int status;
		const char *reason;
	} cases[] = {
	        {"\nGET / HTTP/1.1\r\nHost: a.test\r\n\r\n", PEEK_HTTP_HEAD, 400,
	         "malformed request head: bare LF (lines must end in CRLF)"},
	        {"GET http://secret.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", PEEK_HTTP_MISMATCH,
	         400, "the request target names secret.test but Host names a.test"},
	        {"GET http://a.test:81/ HTTP/1.1\r\nHost: a.test:82\r\n\r\n", PEEK_HTTP_MISMATCH,
	         400, "the request target names a.test but Host names a.test:82"},
	        {"GET a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", PEEK_HTTP_TARGET, 400,
	         "request target 'a.test' is not origin-form, absolute-form (http, https) or "
	         "CONNECT's host:port"},
	        {"GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n", PEEK_HTTP_HEAD, 400,
	         "malformed request head: a control byte in a field value"},
	        {"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", PEEK_HTTP_HOST, 400,
	         "bad Host header 'a/b'"},
	        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", PEEK_HTTP_MANY_HOSTS, 400,
	         "more than one Host header"},
	        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: "
	         "chunked\r\n\r\n",
	         PEEK_HTTP_FRAMING, 400,
	         "the request body's length is ambiguous (Content-Length/Transfer-Encoding)"},
	        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: "
	         "Content-Length\r\n\r\n",
	         PEEK_HTTP_CONNECTION, 400,
	         "Connection names Content-Length: a hop that drops it frames or routes the rest "
	         "differently (request smuggling)"},
	        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
	         "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
	         PEEK_HTTP_UPGRADE, 400,
	         "Upgrade: h2c refused: only websocket is let through on a name-checked "
	         "connection"},
	        {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", PEEK_HTTP_HEAD, 400,
	         "malformed request head: the version is not HTTP/1.0 or HTTP/1.1"},
	};
	struct peek p;
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_str(cases[i].s, PEEK_BAD, &p);
		assert_int_equal(p.proto, PEEK_PROTO_HTTP);
		assert_int_equal(p.error, cases[i].e);
		assert_int_equal(peek_status(&p), cases[i].status);
		expect_reason(&p, cases[i].reason);
	}
}

static void
test_more_and_other(void **state)
{
	struct peek p;
	char *big;
	(void)state;

	assert_int_equal(peek("", 0, &p), PEEK_MORE);
	assert_int_equal(p.proto, PEEK_PROTO_UNKNOWN);
	assert_int_equal(peek("GET", 3, &p), PEEK_MORE);
	assert_int_equal(p.proto, PEEK_PROTO_UNKNOWN);
	assert_int_equal(peek("\r\n", 2, &p), PEEK_MORE);
	assert_int_equal(p.proto, PEEK_PROTO_HTTP);
	assert_int_equal(peek("GET / HTTP/1.1\r\nHost: a", 23, &p), PEEK_MORE);
	assert_int_equal(p.proto, PEEK_PROTO_HTTP);
	assert_int_equal(peek("\x16\x03\x01\x00", 4, &p), PEEK_MORE);
	assert_int_equal(p.proto, PEEK_PROTO_TLS);
	check_str("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", PEEK_OTHER, &p);
	check_str("\x16\x02", PEEK_OTHER, &p);
	check("\x00\x00\x00\x08\x04\xd2\x16\x2f", 8, PEEK_OTHER, &p); /* postgres SSLRequest */

	/* Bounded: at the limits the answer is final. */
	big = malloc(PEEK_MAX_INPUT);
	memset(big, 'A', PEEK_MAX_INPUT);
	assert_int_equal(peek(big, HTTP_MAX_HEAD, &p), PEEK_BAD);
	assert_int_equal(p.error, PEEK_HTTP_HEAD);
	assert_int_equal(peek_status(&p), 431);
	/* a ClientHello in 1-byte records never completes in time */
	for (size_t i = 0; i + 6 <= PEEK_MAX_INPUT; i += 6) {
		static const uint8_t start[] = {1, 0, 0x3f, 0}; /* ClientHello, 16128 bytes */

		memcpy(big + i, "\x16\x03\x01\x00\x01", 5);
		big[i + 5] = (char)(i / 6 < sizeof(start) ? start[i / 6] : 0);
	}
	memset(big + PEEK_MAX_INPUT / 6 * 6, 0x16, PEEK_MAX_INPUT % 6);
	assert_int_equal(peek(big, PEEK_MAX_INPUT, &p), PEEK_BAD);
	assert_int_equal(p.error, PEEK_TLS_TOO_LARGE);
	free(big);
}

/* A ClientHello with a server_name list of names and maybe ECH. */
static size_t
hello(const char *const *names, size_t n, bool ech, uint8_t *out)
{
	uint8_t ext[1024];
	size_t e = 0, o = 0, body;

	if (n > 0) {
		size_t l0 = e;

		e += 4 + 2;
		for (size_t i = 0; i < n; i++) {
			size_t l = strlen(names[i]);

			ext[e++] = 0;
			ext[e++] = (uint8_t)(l >> 8);
			ext[e++] = (uint8_t)l;
			memcpy(ext + e, names[i], l);
			e += l;
		}
		ext[l0] = 0;
		ext[l0 + 1] = 0;
		ext[l0 + 2] = (uint8_t)((e - l0 - 4) >> 8);
		ext[l0 + 3] = (uint8_t)(e - l0 - 4);
		ext[l0 + 4] = (uint8_t)((e - l0 - 6) >> 8);
		ext[l0 + 5] = (uint8_t)(e - l0 - 6);
	}
	if (ech) {
		memcpy(ext + e, "\xfe\x0d\x00\x08\x00\x00\x01\x00\x01\x42\x00\x00", 12);
		e += 12;
	}
	body = 2 + 32 + 1 + 4 + 2 + 2 + e;
	memcpy(out, "\x16\x03\x01", 3);
	o = 3;
	out[o++] = (uint8_t)((body + 4) >> 8);
	out[o++] = (uint8_t)(body + 4);
	out[o++] = 1;
	out[o++] = 0;
	out[o++] = (uint8_t)(body >> 8);
	out[o++] = (uint8_t)body;
	out[o++] = 3;
	out[o++] = 3;
	memset(out + o, 7, 32);
	o += 32;
	memcpy(out + o, "\x00\x00\x02\x13\x01\x01\x00", 7);
	o += 7;
	out[o++] = (uint8_t)(e >> 8);
	out[o++] = (uint8_t)e;
	memcpy(out + o, ext, e);
	return o + e;
}

static void
test_tls(void **state)
{
	static const char *const one[] = {"Allowed.test"}, *const two[] = {"allowed.test",
	                                                                   "secret.test"};
	static const char *const lit[] = {"192.0.2.7"};
	uint8_t buf[2048];
	struct peek p;
	size_t n;
	(void)state;

	n = hello(one, 1, false, buf);
	check(buf, n, PEEK_TLS, &p);
	assert_string_equal(p.name, "Allowed.test"); /* as sent: the caller normalises */
	assert_false(p.ech);
	assert_int_equal(p.len, n);
	n = hello(one, 1, true, buf);
	check(buf, n, PEEK_TLS, &p);
	assert_true(p.ech);
	n = hello(NULL, 0, true, buf);
	check(buf, n, PEEK_TLS, &p);
	assert_string_equal(p.name, "");
	assert_true(p.ech);
	n = hello(lit, 1, false, buf);
	check(buf, n, PEEK_TLS, &p);
	assert_true(p.ip_literal);
	n = hello(two, 2, false, buf);
	check(buf, n, PEEK_BAD, &p);
	assert_int_equal(p.proto, PEEK_PROTO_TLS);
	assert_int_equal(p.error, PEEK_TLS_MANY_NAMES);
	expect_reason(&p, "ClientHello server_name lists more than one name (allowed.test, "
	                  "secret.test): servers differ on which one they serve");
	buf[5] = 2; /* ServerHello */
	check(buf, n, PEEK_BAD, &p);
	assert_int_equal(p.error, PEEK_TLS_MALFORMED);
	expect_reason(&p, "malformed ClientHello");
}

/* A client's records after its first ClientHello: CCS and other
 * handshake messages pass whole, a second ClientHello is read, and
 * application data ends the look. After CCS a handshake record that is
 * not a well-formed ClientHello (TLS 1.2's encrypted Finished) passes. */
static void
test_tls_records(void **state)
{
	static const char *const one[] = {"a.test"}, *const two[] = {"a.test", "b.test"};
	static const uint8_t ccs[] = {0x14, 3, 3, 0, 1, 1};
	static const uint8_t cke[] = {0x16, 3, 3, 0, 4, 0x10, 0, 0, 0};
	static const uint8_t fin[] = {0x16, 3, 3, 0, 4, 0x01, 0x99, 0x42, 0x17};
	static const uint8_t app[] = {0x17, 3, 3, 0, 2, 0xaa, 0xbb};
	uint8_t buf[2048];
	struct peek p;
	size_t n, skip;
	(void)state;

	assert_int_equal(peek_tls_record(ccs, 3, false, &p, &skip), PEEK_REC_MORE);
	assert_int_equal(peek_tls_record(ccs, sizeof(ccs), false, &p, &skip), PEEK_REC_SKIP);
	assert_int_equal(skip, sizeof(ccs));
	assert_int_equal(peek_tls_record(cke, sizeof(cke) - 1, false, &p, &skip), PEEK_REC_MORE);
	assert_int_equal(peek_tls_record(cke, sizeof(cke), false, &p, &skip), PEEK_REC_SKIP);
	assert_int_equal(peek_tls_record(app, 1, false, &p, &skip), PEEK_REC_END);
	assert_int_equal(peek_tls_record(app, sizeof(app), true, &p, &skip), PEEK_REC_END);
	n = hello(one, 1, false, buf);
	assert_int_equal(peek_tls_record(buf, n - 1, false, &p, &skip), PEEK_REC_MORE);
	assert_int_equal(peek_tls_record(buf, n, true, &p, &skip), PEEK_REC_HELLO);
	assert_string_equal(p.name, "a.test");
	assert_int_equal(p.len, n);
	/* before CCS, a broken hello is refused; after it, it is opaque */
	assert_int_equal(peek_tls_record(fin, sizeof(fin), false, &p, &skip), PEEK_REC_BAD);
	assert_int_equal(peek_tls_record(fin, sizeof(fin), true, &p, &skip), PEEK_REC_SKIP);
	assert_int_equal(skip, sizeof(fin));
	n = hello(two, 2, false, buf);
	assert_int_equal(peek_tls_record(buf, n, true, &p, &skip), PEEK_REC_BAD);
	assert_int_equal(p.error, PEEK_TLS_MANY_NAMES);
	/* After CCS, a record larger than any encrypted Finished that starts
	 * as a hello but does not parse as one (here: its length claims more
	 * than the record, a hello too large for the sniffer to read) is a
	 * hello whose name went unread: refused, not passed. */
	memset(buf, 0, 600);
	memcpy(buf, (const uint8_t[]){0x16, 3, 3, 0x02, 0x50, 0x01, 0x00, 0xff, 0xff}, 9);
	assert_int_equal(peek_tls_record(buf, 5 + 0x250, true, &p, &skip), PEEK_REC_BAD);
	assert_int_equal(peek_tls_record(buf, 5 + 0x250, false, &p, &skip), PEEK_REC_BAD);
	/* A small one may be a hello's first fragment, or TLS 1.2's
	 * encrypted Finished whose nonce begins so: passed once whole (the
	 * client waits for the server's answer); bind.c refuses any handshake
	 * record after it. */
	buf[3] = 0;
	buf[4] = 7;
	buf[7] = 0;
	buf[8] = 0x40; /* a 64-byte hello, in fragments */
	assert_int_equal(peek_tls_record(buf, 11, true, &p, &skip), PEEK_REC_MORE);
	assert_int_equal(peek_tls_record(buf, 12, true, &p, &skip), PEEK_REC_SKIP);
	assert_int_equal(skip, 12);
}

/* The name a head carries against the one decided: case and a trailing
 * dot folded; addresses as addresses; a name is never an address. */
static void
test_same_name(void **state)
{
	struct peek p;
	(void)state;

	check_str("GET / HTTP/1.1\r\nHost: Evil.TEST.\r\n\r\n", PEEK_HTTP, &p);
	assert_true(peek_same_name(&p, "evil.test", false));
	assert_false(peek_same_name(&p, "secret.evil.test", false));
	assert_false(peek_same_name(&p, "evil.tes", false));
	assert_false(peek_same_name(&p, "203.0.113.66", true));
	check_str("GET / HTTP/1.1\r\nHost: [::ffff:203.0.113.66]:80\r\n\r\n", PEEK_HTTP, &p);
	assert_true(peek_same_name(&p, "203.0.113.66", true));
	assert_false(peek_same_name(&p, "203.0.113.67", true));
	assert_false(peek_same_name(&p, "evil.test", false));
	check_str("GET / HTTP/1.1\r\nHost: [2001:DB8:0::66]\r\n\r\n", PEEK_HTTP, &p);
	assert_true(peek_same_name(&p, "2001:db8::66", true));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_http_names),     cmocka_unit_test(test_http_refused),
	        cmocka_unit_test(test_more_and_other), cmocka_unit_test(test_tls),
	        cmocka_unit_test(test_same_name),      cmocka_unit_test(test_tls_records),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
