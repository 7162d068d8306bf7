/* Unit tests for the DNS message parser and builder (dns/msg.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dns/msg.h"

/* A query for "www.example.com" A, id 0x1234, RD. */
static const uint8_t q_plain[] = {
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 3,    'w',  'w',  'w',  7,    'e',  'x',  'a',  'm',  'p',
        'l',  'e',  3,    'c',  'o',  'm',  0,    0x00, 0x01, 0x00, 0x01,
};

static size_t
build_query(uint8_t *buf, size_t cap, const char *name, uint16_t type, bool opt, uint16_t size)
{
	struct dns_builder b;

	dns_build_init(&b, buf, cap, 0xbeef, DNS_FLAG_RD);
	if (dns_build_question(&b, name, type, DNS_CLASS_IN) != 0)
		return 0;
	if (opt && dns_build_opt(&b, size, 0, -1, NULL) != 0)
		return 0;
	return dns_build_finish(&b);
}

static void
test_query_plain(void **state)
{
	struct dns_query q;

	(void)state;
	assert_int_equal(dns_query_parse(q_plain, sizeof(q_plain), &q), DNS_OK);
	assert_int_equal(q.id, 0x1234);
	assert_string_equal(q.qname, "www.example.com");
	assert_int_equal(q.qtype, DNS_TYPE_A);
	assert_int_equal(q.qclass, DNS_CLASS_IN);
	assert_false(q.has_opt);
	assert_int_equal(q.udp_size, 512);
}

static void
test_query_truncated_everywhere(void **state)
{
	struct dns_query q;

	(void)state;
	/* Every proper prefix of a valid query is rejected. */
	for (size_t n = 0; n < sizeof(q_plain); n++)
		assert_int_not_equal(dns_query_parse(q_plain, n, &q), DNS_OK);
}

static void
test_query_trailing(void **state)
{
	uint8_t buf[sizeof(q_plain) + 1];
	struct dns_query q;

	(void)state;
	memcpy(buf, q_plain, sizeof(q_plain));
	buf[sizeof(q_plain)] = 0;
	assert_int_equal(dns_query_parse(buf, sizeof(buf), &q), DNS_ERR_TRAILING);
}

static void
test_query_flags_counts(void **state)
{
	uint8_t buf[sizeof(q_plain)];
	struct dns_query q;

	(void)state;
	memcpy(buf, q_plain, sizeof(buf));
	buf[2] |= 0x80; /* QR: a response */
	assert_int_equal(dns_query_parse(buf, sizeof(buf), &q), DNS_ERR_QR);
	memcpy(buf, q_plain, sizeof(buf));
	buf[2] = 0x28; /* opcode 5 (UPDATE) */
	assert_int_equal(dns_query_parse(buf, sizeof(buf), &q), DNS_ERR_OPCODE);
	assert_int_equal(q.id, 0x1234);
	memcpy(buf, q_plain, sizeof(buf));
	buf[5] = 2; /* two questions */
	assert_int_equal(dns_query_parse(buf, sizeof(buf), &q), DNS_ERR_COUNTS);
	memcpy(buf, q_plain, sizeof(buf));
	buf[7] = 1; /* an answer in a query */
	assert_int_equal(dns_query_parse(buf, sizeof(buf), &q), DNS_ERR_COUNTS);
}

static void
test_name_compression_loop(void **state)
{
	/* Question name is a pointer to itself, and to the header. */
	uint8_t self[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1};
	uint8_t hdr[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0, 1, 0, 1};
	/* A forward pointer. */
	uint8_t fwd[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 14, 0, 0, 1, 0, 1};
	struct dns_query q;

	(void)state;
	assert_int_equal(dns_query_parse(self, sizeof(self), &q), DNS_ERR_NAME);
	assert_int_equal(dns_query_parse(fwd, sizeof(fwd), &q), DNS_ERR_NAME);
	/* A pointer into the header is legal as long as it goes backwards:
	 * byte 0 is 0x00, the root name. */
	assert_int_equal(dns_query_parse(hdr, sizeof(hdr), &q), DNS_OK);
	assert_string_equal(q.qname, "");
}

static void
test_name_pointer_ok_and_two_node_loop(void **state)
{
	/* Name at 12: "a" then pointer to 12 -> loop of two? No: a pointer
	 * must go strictly before its own name start, so this is a loop. */
	uint8_t loop[] = {1, 'a', 0xc0, 0};
	/* "b" at 0, "a" + pointer to 0 at 3: a.b */
	uint8_t ok[] = {1, 'b', 0, 1, 'a', 0xc0, 0};
	char out[DNS_NAME_TEXT_MAX];
	size_t off = 0;

	(void)state;
	assert_int_equal(dns_name_read(loop, sizeof(loop), &off, out), DNS_ERR_NAME);
	off = 3;
	assert_int_equal(dns_name_read(ok, sizeof(ok), &off, out), DNS_OK);
	assert_string_equal(out, "a.b");
	assert_int_equal(off, 7);
}

static void
test_name_overlong(void **state)
{
	uint8_t buf[400];
	char out[DNS_NAME_TEXT_MAX];
	size_t off = 0, n = 0;

	(void)state;
	/* 5 labels of 63 = 320 wire bytes: too long. */
	for (int l = 0; l < 5; l++) {
		buf[n++] = 63;
		memset(buf + n, 'x', 63);
		n += 63;
	}
	buf[n++] = 0;
	assert_int_equal(dns_name_read(buf, n, &off, out), DNS_ERR_NAME);
	/* 4 labels: 63*4+4+1 = 257 > 255: too long as well. */
	n = 0;
	for (int l = 0; l < 4; l++) {
		buf[n++] = 63;
		memset(buf + n, 'x', 63);
		n += 63;
	}
	buf[n++] = 0;
	off = 0;
	assert_int_equal(dns_name_read(buf, n, &off, out), DNS_ERR_NAME);
	/* 3 x 63 + 61 = 4 + 250 + 1 = 255 bytes: the longest legal name. */
	n = 0;
	for (int l = 0; l < 4; l++) {
		int ll = l < 3 ? 63 : 61;

		buf[n++] = (uint8_t)ll;
		memset(buf + n, 'y', (size_t)ll);
		n += (size_t)ll;
	}
	buf[n++] = 0;
	off = 0;
	assert_int_equal(n, 255);
	assert_int_equal(dns_name_read(buf, n, &off, out), DNS_OK);
	assert_int_equal(strlen(out), 253);
	/* A label type 0x40 is rejected. */
	buf[0] = 0x41;
	off = 0;
	assert_int_equal(dns_name_read(buf, n, &off, out), DNS_ERR_NAME);
}

static void
test_name_chars(void **state)
{
	uint8_t dot[] = {3, 'a', '.', 'b', 0};
	uint8_t nul[] = {3, 'a', 0, 'b', 0};
	uint8_t under[] = {4, '_', 't', 'c', 'p', 0};
	char out[DNS_NAME_TEXT_MAX];
	size_t off = 0;

	(void)state;
	assert_int_equal(dns_name_read(dot, sizeof(dot), &off, out), DNS_ERR_CHARS);
	off = 0;
	assert_int_equal(dns_name_read(nul, sizeof(nul), &off, out), DNS_ERR_CHARS);
	off = 0;
	assert_int_equal(dns_name_read(under, sizeof(under), &off, out), DNS_OK);
	assert_string_equal(out, "_tcp");
}

static void
test_edns(void **state)
{
	uint8_t buf[512];
	struct dns_query q;
	size_t n;

	(void)state;
	n = build_query(buf, sizeof(buf), "Example.ORG", DNS_TYPE_AAAA, true, 4096);
	assert_true(n > 0);
	assert_int_equal(dns_query_parse(buf, n, &q), DNS_OK);
	assert_true(q.has_opt);
	assert_int_equal(q.udp_size, 4096);
	assert_int_equal(q.edns_version, 0);
	assert_string_equal(q.qname, "Example.ORG");
	/* Sizes below 512 count as 512. */
	n = build_query(buf, sizeof(buf), "a.b", DNS_TYPE_A, true, 100);
	assert_int_equal(dns_query_parse(buf, n, &q), DNS_OK);
	assert_int_equal(q.udp_size, 512);
	/* A bad option TLV inside OPT: option length beyond rdata. */
	buf[n - 2] = 0;
	buf[n - 1] = 4; /* rdlen 4 */
	{
		uint8_t bad[600];

		memcpy(bad, buf, n);
		bad[n] = 0;
		bad[n + 1] = 10;
		bad[n + 2] = 0;
		bad[n + 3] = 9; /* option length 9 > 0 left */
		assert_int_equal(dns_query_parse(bad, n + 4, &q), DNS_ERR_OPT);
	}
	/* OPT with a non-root owner. */
	n = build_query(buf, sizeof(buf), "a.b", DNS_TYPE_A, true, 1232);
	{
		uint8_t bad[600];

		/* Replace the root owner with "x". */
		size_t optstart = n - 11;

		memcpy(bad, buf, optstart);
		bad[optstart] = 1;
		bad[optstart + 1] = 'x';
		bad[optstart + 2] = 0;
		memcpy(bad + optstart + 3, buf + optstart + 1, 10);
		assert_int_equal(dns_query_parse(bad, n + 2, &q), DNS_ERR_OPT);
	}
}

/* Find EDE option in a built message: returns info code, copies text. */
static int
find_ede(const uint8_t *m, size_t n, char *text, size_t tl)
{
	/* OPT is the last record; scan for option code 15. */
	for (size_t i = DNS_HEADER_LEN; i + 6 <= n; i++) {
		if (m[i] == 0 && m[i + 1] == 0 && m[i + 2] == DNS_TYPE_OPT) {
			size_t rd = i + 11;
			size_t rdlen = (size_t)(m[i + 9] << 8 | m[i + 10]);

			if (rd + rdlen != n || rdlen < 6)
				return -1;
			if ((m[rd] << 8 | m[rd + 1]) != DNS_OPT_EDE)
				return -1;
			size_t olen = (size_t)(m[rd + 2] << 8 | m[rd + 3]);
			int code = m[rd + 4] << 8 | m[rd + 5];
			size_t t = olen - 2 < tl - 1 ? olen - 2 : tl - 1;

			memcpy(text, m + rd + 6, t);
			text[t] = '\0';
			return code;
		}
	}
	return -1;
}

static void
test_build_ede_and_reparse(void **state)
{
	uint8_t buf[600];
	struct dns_builder b;
	struct dns_response r;
	char text[256];
	size_t n;
	uint8_t a[4] = {203, 0, 113, 10};

	(void)state;
	dns_build_init(&b, buf, sizeof(buf), 7, DNS_FLAG_QR | DNS_RCODE_NXDOMAIN);
	assert_int_equal(dns_build_question(&b, "evil.test", DNS_TYPE_A, 1), 0);
	assert_int_equal(
	        dns_build_opt(&b, 1232, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, "airlock: blocked"),
	        0);
	n = dns_build_finish(&b);
	assert_true(n > 0);
	assert_int_equal(find_ede(buf, n, text, sizeof(text)), DNS_EDE_BLOCKED);
	assert_string_equal(text, "airlock: blocked");
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_OK);
	assert_int_equal(DNS_RCODE(r.flags), DNS_RCODE_NXDOMAIN);

	/* Answers: the CNAME compresses its owner to the question. */
	dns_build_init(&b, buf, sizeof(buf), 8, DNS_FLAG_QR);
	assert_int_equal(dns_build_question(&b, "www.a.test", DNS_TYPE_A, 1), 0);
	assert_int_equal(
	        dns_build_rr_name(&b, DNS_SEC_AN, "www.a.test", DNS_TYPE_CNAME, 60, "cdn.b.test"),
	        0);
	assert_int_equal(dns_build_rr(&b, DNS_SEC_AN, "cdn.b.test", DNS_TYPE_A, 30, a, 4), 0);
	n = dns_build_finish(&b);
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_OK);
	assert_int_equal(r.n_an, 2);
	assert_int_equal(r.an[0].type, DNS_TYPE_CNAME);
	assert_string_equal(r.an[0].name, "www.a.test");
	assert_string_equal(r.an[0].target, "cdn.b.test");
	assert_int_equal(r.an[1].ttl, 30);
	assert_memory_equal(r.an[1].addr, a, 4);
	/* The EDE text is capped. */
	{
		char longtext[400];

		memset(longtext, 'z', sizeof(longtext) - 1);
		longtext[sizeof(longtext) - 1] = '\0';
		dns_build_init(&b, buf, sizeof(buf), 9, DNS_FLAG_QR);
		dns_build_question(&b, "x", DNS_TYPE_A, 1);
		assert_int_equal(dns_build_opt(&b, 1232, 0, DNS_EDE_BLOCKED, longtext), 0);
		n = dns_build_finish(&b);
		assert_int_equal(find_ede(buf, n, text, sizeof(text)), DNS_EDE_BLOCKED);
		assert_int_equal(strlen(text), DNS_EDE_TEXT_MAX);
	}
	/* Extended rcode BADVERS: upper bits in the OPT TTL. */
	dns_build_init(&b, buf, sizeof(buf), 9, DNS_FLAG_QR);
	dns_build_question(&b, "x", DNS_TYPE_A, 1);
	dns_build_opt(&b, 1232, DNS_RCODE_BADVERS, -1, NULL);
	n = dns_build_finish(&b);
	assert_int_equal(buf[n - 6], 1); /* TTL high byte = 16 >> 4 */
}

static void
test_build_overflow(void **state)
{
	uint8_t buf[20];
	struct dns_builder b;

	(void)state;
	dns_build_init(&b, buf, sizeof(buf), 1, 0);
	assert_int_equal(dns_build_question(&b, "a-rather-long-name.example", 1, 1), -1);
	assert_int_equal(dns_build_finish(&b), 0);
	/* Bad names are refused. */
	{
		uint8_t big[600];

		dns_build_init(&b, big, sizeof(big), 1, 0);
		assert_int_equal(dns_build_question(&b, "a..b", 1, 1), -1);
		dns_build_init(&b, big, sizeof(big), 1, 0);
		assert_int_equal(dns_build_question(&b, "a.b.", 1, 1), -1);
		dns_build_init(&b, big, sizeof(big), 1, 0);
		assert_int_equal(dns_build_question(&b, "sp ace", 1, 1), -1);
	}
}

static void
test_response_rdata_bounds(void **state)
{
	uint8_t buf[512];
	struct dns_builder b;
	struct dns_response r;
	size_t n;
	uint8_t a6[16] = {0x20, 0x01, 0x0d, 0xb8};

	(void)state;
	dns_build_init(&b, buf, sizeof(buf), 1, DNS_FLAG_QR);
	dns_build_question(&b, "v6.test", DNS_TYPE_AAAA, 1);
	dns_build_rr(&b, DNS_SEC_AN, "v6.test", DNS_TYPE_AAAA, 100, a6, 16);
	n = dns_build_finish(&b);
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_OK);
	assert_int_equal(r.n_an, 1);
	/* Every prefix fails. */
	for (size_t k = 0; k < n; k++)
		assert_int_not_equal(dns_response_parse(buf, k, &r), DNS_OK);
	/* An AAAA with 4 bytes of rdata is malformed. */
	dns_build_init(&b, buf, sizeof(buf), 1, DNS_FLAG_QR);
	dns_build_question(&b, "v6.test", DNS_TYPE_AAAA, 1);
	dns_build_rr(&b, DNS_SEC_AN, "v6.test", DNS_TYPE_AAAA, 100, a6, 4);
	n = dns_build_finish(&b);
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_ERR_RR);
	/* A query where a response is expected. */
	n = build_query(buf, sizeof(buf), "a.b", 1, false, 0);
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_ERR_QR);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_query_plain),
	        cmocka_unit_test(test_query_truncated_everywhere),
	        cmocka_unit_test(test_query_trailing),
	        cmocka_unit_test(test_query_flags_counts),
	        cmocka_unit_test(test_name_compression_loop),
	        cmocka_unit_test(test_name_pointer_ok_and_two_node_loop),
	        cmocka_unit_test(test_name_overlong),
	        cmocka_unit_test(test_name_chars),
	        cmocka_unit_test(test_edns),
	        cmocka_unit_test(test_build_ede_and_reparse),
	        cmocka_unit_test(test_build_overflow),
	        cmocka_unit_test(test_response_rdata_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
