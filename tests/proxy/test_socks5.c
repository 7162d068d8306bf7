/* proxy/socks5.c: the messages of real clients (curl's socks5h, ssh's
 * ProxyCommand-less DynamicForward clients), byte by byte, and the broken
 * ones a task may send instead. */
#include "proxy/socks5.h"

#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* Every prefix of a message asks for more; the whole is done with every
 * byte used. */
static void
request_whole(const uint8_t *m, size_t len, struct socks5_request *rq)
{
	enum socks5_rep rep;
	size_t used = 0;

	for (size_t i = 0; i < len; i++)
		assert_int_equal(socks5_request_parse(m, i, rq, &used, &rep), SOCKS5_MORE);
	assert_int_equal(socks5_request_parse(m, len, rq, &used, &rep), SOCKS5_DONE);
	assert_int_equal(used, len);
	assert_int_equal(rep, SOCKS5_REP_OK);
}

static void
test_greeting(void **state)
{
	static const uint8_t curl[] = {5, 2, 0, 1};  /* none, GSSAPI */
	static const uint8_t up[] = {5, 1, 2};       /* user/pass only */
	struct socks5_greeting g;
	size_t used = 0;

	assert_int_equal(socks5_greeting_parse(curl, 0, &g, &used), SOCKS5_MORE);
	assert_int_equal(socks5_greeting_parse(curl, 3, &g, &used), SOCKS5_MORE);
	assert_int_equal(socks5_greeting_parse(curl, 4, &g, &used), SOCKS5_DONE);
	assert_int_equal(used, 4);
	assert_true(g.none);
	assert_false(g.userpass);
	assert_int_equal(socks5_greeting_parse(up, 3, &g, &used), SOCKS5_DONE);
	assert_false(g.none);
	assert_true(g.userpass);
	/* SOCKS4, an HTTP request, no methods at all */
	assert_int_equal(socks5_greeting_parse((const uint8_t *)"\x04\x01", 2, &g, &used),
	                 SOCKS5_BAD);
	assert_int_equal(socks5_greeting_parse((const uint8_t *)"GET /", 5, &g, &used), SOCKS5_BAD);
	assert_int_equal(socks5_greeting_parse((const uint8_t *)"\x05\x00", 2, &g, &used),
	                 SOCKS5_BAD);
}

static void
test_request_name(void **state)
{
	static const uint8_t m[] = {5, 1, 0, 3, 8, 'p', 'y', 'p', 'i', '.', 'o', 'r', 'g', 0x01, 0xbb};
	struct socks5_request rq;

	request_whole(m, sizeof(m), &rq);
	assert_int_equal(rq.cmd, SOCKS5_CMD_CONNECT);
	assert_true(rq.is_name);
	assert_string_equal(rq.name, "pypi.org");
	assert_int_equal(rq.port, 443);
}

static void
test_request_addrs(void **state)
{
	static const uint8_t v4[] = {5, 1, 0, 1, 192, 0, 2, 7, 0, 22};
	static const uint8_t v6[] = {5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
	                             0,    0,    0,    0,    0, 0, 0, 1, 0x1f, 0x90};
	struct socks5_request rq;
	char text[INET6_ADDRSTRLEN];

	request_whole(v4, sizeof(v4), &rq);
	assert_false(rq.is_name);
	assert_int_equal(rq.addr.ss_family, AF_INET);
	inet_ntop(AF_INET, &((struct sockaddr_in *)&rq.addr)->sin_addr, text, sizeof(text));
	assert_string_equal(text, "192.0.2.7");
	assert_int_equal(ntohs(((struct sockaddr_in *)&rq.addr)->sin_port), 22);
	request_whole(v6, sizeof(v6), &rq);
	assert_int_equal(rq.addr.ss_family, AF_INET6);
	inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&rq.addr)->sin6_addr, text, sizeof(text));
	assert_string_equal(text, "2001:db8::1");
	assert_int_equal(rq.port, 8080);
}

static void
test_request_refused(void **state)
{
	struct socks5_request rq;
	enum socks5_rep rep;
	size_t used;

	/* UDP ASSOCIATE and BIND parse, for the caller to refuse */
	request_whole((const uint8_t *)"\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00", 10, &rq);
	assert_int_equal(rq.cmd, SOCKS5_CMD_UDP_ASSOCIATE);
	request_whole((const uint8_t *)"\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00", 10, &rq);
	assert_int_equal(rq.cmd, SOCKS5_CMD_BIND);
	/* an unknown command, an unknown address type */
	assert_int_equal(socks5_request_parse((const uint8_t *)"\x05\x09\x00\x01\x00\x00\x00\x00"
	                                                       "\x00\x00",
	                                      10, &rq, &used, &rep),
	                 SOCKS5_BAD);
	assert_int_equal(rep, SOCKS5_REP_CMD_UNSUPPORTED);
	assert_int_equal(socks5_request_parse((const uint8_t *)"\x05\x01\x00\x02\x00", 5, &rq, &used,
	                                      &rep),
	                 SOCKS5_BAD);
	assert_int_equal(rep, SOCKS5_REP_ATYP_UNSUPPORTED);
	/* a name of length 0, a NUL inside a name, RSV not 0, version 4 */
	assert_int_equal(socks5_request_parse((const uint8_t *)"\x05\x01\x00\x03\x00\x00\x50", 7,
	                                      &rq, &used, &rep),
	                 SOCKS5_BAD);
	assert_int_equal(socks5_request_parse((const uint8_t *)"\x05\x01\x00\x03\x03"
	                                                       "a\0b\x00\x50",
	                                      10, &rq, &used, &rep),
	                 SOCKS5_BAD);
	assert_int_equal(rep, SOCKS5_REP_FAILURE);
	assert_int_equal(socks5_request_parse((const uint8_t *)"\x05\x01\x01", 3, &rq, &used, &rep),
	                 SOCKS5_BAD);
	assert_int_equal(socks5_request_parse((const uint8_t *)"\x04", 1, &rq, &used, &rep),
	                 SOCKS5_BAD);
}

static void
test_userpass(void **state)
{
	static const uint8_t m[] = {1, 5, 'a', 'g', 'e', 'n', 't', 3, 'p', 'w', 'd'};
	struct socks5_userpass up;
	size_t used = 0;

	for (size_t i = 0; i < sizeof(m); i++)
		assert_int_equal(socks5_userpass_parse(m, i, &up, &used), SOCKS5_MORE);
	assert_int_equal(socks5_userpass_parse(m, sizeof(m), &up, &used), SOCKS5_DONE);
	assert_int_equal(used, sizeof(m));
	assert_string_equal(up.user, "agent");
	assert_int_equal(socks5_userpass_parse((const uint8_t *)"\x05\x01", 2, &up, &used),
	                 SOCKS5_BAD);
	assert_int_equal(socks5_userpass_parse((const uint8_t *)"\x01\x02" "a\0\x00", 5, &up, &used),
	                 SOCKS5_BAD);
}

static void
test_reply(void **state)
{
	uint8_t buf[SOCKS5_REPLY_MAX];
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(40000)};
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(1)};

	assert_int_equal(socks5_reply(SOCKS5_REP_NOT_ALLOWED, NULL, buf, sizeof(buf)), 10);
	assert_memory_equal(buf, "\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00", 10);
	inet_pton(AF_INET, "198.51.100.1", &sin.sin_addr);
	assert_int_equal(socks5_reply(SOCKS5_REP_OK, (struct sockaddr *)&sin, buf, sizeof(buf)), 10);
	assert_memory_equal(buf, "\x05\x00\x00\x01\xc6\x33\x64\x01\x9c\x40", 10);
	assert_int_equal(socks5_reply(SOCKS5_REP_OK, (struct sockaddr *)&sin6, buf, sizeof(buf)),
	                 22);
	assert_int_equal(buf[3], 4);
	assert_int_equal(buf[21], 1);
	assert_int_equal(socks5_reply(SOCKS5_REP_OK, NULL, buf, 21), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_greeting),      cmocka_unit_test(test_request_name),
	        cmocka_unit_test(test_request_addrs), cmocka_unit_test(test_request_refused),
	        cmocka_unit_test(test_userpass),      cmocka_unit_test(test_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
