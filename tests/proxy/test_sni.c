/* The ClientHello reader against real ClientHellos captured from openssl
 * s_client and curl (tests/proxy/data/), re-split at every byte and
 * re-fragmented into records of many sizes, and against broken input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxy/sni.h"

/* sni_parse, the name copied out (SNI_NAME_MAX bytes). */
static enum sni_result
parse(const uint8_t *buf, size_t len, char *name)
{
	struct sni_hello h;
	enum sni_result r = sni_parse(buf, len, &h);

	memcpy(name, h.name, SNI_NAME_MAX);
	return r;
}

static size_t
load(const char *name, uint8_t *buf, size_t cap)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", TEST_DATA, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	n = fread(buf, 1, cap, f);
	fclose(f);
	assert_true(n > 5 && n < cap);
	return n;
}

/* Every prefix shorter than the whole hello asks for more; the whole of it
 * gives the name. This is what TCP segments split anywhere look like. */
static void
check_all_prefixes(const uint8_t *buf, size_t len, enum sni_result want, const char *name)
{
	char out[SNI_NAME_MAX];

	for (size_t i = 0; i < len; i++) {
		uint8_t *copy = malloc(i + 1); /* exact size: ASan sees overreads */
		memcpy(copy, buf, i);
		assert_int_equal(parse(copy, i, out), SNI_INCOMPLETE);
		free(copy);
	}
	assert_int_equal(parse(buf, len, out), want);
	if (name != NULL)
		assert_string_equal(out, name);
}

/* Re-wrap the handshake bytes of a single-record hello into records of
 * at most frag bytes each. */
static size_t
refragment(const uint8_t *in, size_t len, size_t frag, uint8_t *out, size_t cap)
{
	size_t hs_len = (size_t)in[3] << 8 | in[4], o = 0;

	assert_int_equal(hs_len + 5, len);
	for (size_t off = 0; off < hs_len; off += frag) {
		size_t n = hs_len - off < frag ? hs_len - off : frag;
		assert_true(o + 5 + n <= cap);
		out[o++] = 0x16;
		out[o++] = in[1];
		out[o++] = in[2];
		out[o++] = (uint8_t)(n >> 8);
		out[o++] = (uint8_t)n;
		memcpy(out + o, in + 5 + off, n);
		o += n;
	}
	return o;
}

static void
test_real_hellos(void **state)
{
	static const struct {
		const char *file, *name;
		enum sni_result want;
	} cases[] = {
	        {"hello-openssl-tls13.bin", "www.Example.test", SNI_FOUND},
	        {"hello-openssl-tls12.bin", "tls12.example.test", SNI_FOUND},
	        {"hello-curl.bin", "allowed.test", SNI_FOUND},
	        {"hello-openssl-noname.bin", NULL, SNI_NO_NAME},
	};
	uint8_t buf[4096], frag[SNI_MAX_INPUT];
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = load(cases[i].file, buf, sizeof(buf));

		check_all_prefixes(buf, len, cases[i].want, cases[i].name);
		for (size_t f = 1; f <= 300; f = f < 8 ? f + 1 : f * 3) {
			size_t flen = refragment(buf, len, f, frag, sizeof(frag));
			char out[SNI_NAME_MAX];

			if (flen > SNI_MAX_INPUT)
				continue;
			assert_int_equal(parse(frag, flen, out), cases[i].want);
			if (cases[i].name != NULL)
				assert_string_equal(out, cases[i].name);
		}
	}
}

static void
test_not_tls(void **state)
{
	char out[SNI_NAME_MAX];
	(void)state;

	assert_int_equal(parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, out), SNI_NOT_TLS);
	assert_int_equal(parse((const uint8_t *)"SSH-2.0-OpenSSH_9.2\r\n", 21, out), SNI_NOT_TLS);
	/* 0x16 then not a TLS major version */
	assert_int_equal(parse((const uint8_t *)"\x16\x02", 2, out), SNI_NOT_TLS);
	assert_int_equal(parse((const uint8_t *)"", 0, out), SNI_INCOMPLETE);
	assert_int_equal(parse((const uint8_t *)"\x16", 1, out), SNI_INCOMPLETE);
}

static void
test_malformed(void **state)
{
	uint8_t buf[4096], bad[4096];
	char out[SNI_NAME_MAX];
	size_t len;
	(void)state;

	len = load("hello-curl.bin", buf, sizeof(buf));

	/* handshake type ServerHello instead of ClientHello */
	memcpy(bad, buf, len);
	bad[5] = 0x02;
	assert_int_equal(parse(bad, len, out), SNI_MALFORMED);

	/* zero-length record */
	memcpy(bad, buf, len);
	bad[3] = 0;
	bad[4] = 0;
	assert_int_equal(parse(bad, len, out), SNI_MALFORMED);

	/* handshake length larger than the limit */
	memcpy(bad, buf, len);
	bad[6] = 0x7f;
	assert_int_equal(parse(bad, len, out), SNI_MALFORMED);

	/* an alert record after the first handshake fragment */
	len = refragment(buf, len, 100, bad, sizeof(bad));
	bad[105] = 0x15;
	assert_int_equal(parse(bad, len, out), SNI_MALFORMED);

	/* extensions length larger than the message */
	{
		static const uint8_t hello[] = {
		        0x16, 0x03, 0x01, 0x00, 0x2f, /* record */
		        0x01, 0x00, 0x00, 0x2b,       /* ClientHello, 43 */
		        0x03, 0x03,                   /* version */
		        0,    0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* random */
		        0,    0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		        0x00,                   /* session id */
		        0x00, 0x02, 0x13, 0x01, /* cipher suites */
		        0x01, 0x00,             /* compression */
		        0x00, 0x40,             /* extensions: 64 > 0 left */
		};
		assert_int_equal(parse(hello, sizeof(hello), out), SNI_MALFORMED);
	}
}

/* A ClientHello built by hand with a server_name holding the given bytes. */
static size_t
build_hello(const char *name, size_t nlen, uint8_t *out)
{
	size_t o = 0, ext_len = 2 + 1 + 2 + nlen, exts = 4 + ext_len;
	size_t body = 2 + 32 + 1 + 4 + 2 + 2 + exts;

	out[o++] = 0x16;
	out[o++] = 0x03;
	out[o++] = 0x01;
	out[o++] = (uint8_t)((body + 4) >> 8);
	out[o++] = (uint8_t)(body + 4);
	out[o++] = 0x01;
	out[o++] = 0;
	out[o++] = (uint8_t)(body >> 8);
	out[o++] = (uint8_t)body;
	out[o++] = 0x03;
	out[o++] = 0x03;
	memset(out + o, 0xab, 32);
	o += 32;
	out[o++] = 0;
	out[o++] = 0;
	out[o++] = 2;
	out[o++] = 0x13;
	out[o++] = 0x01;
	out[o++] = 1;
	out[o++] = 0;
	out[o++] = (uint8_t)(exts >> 8);
	out[o++] = (uint8_t)exts;
	out[o++] = 0;
	out[o++] = 0; /* server_name */
	out[o++] = (uint8_t)(ext_len >> 8);
	out[o++] = (uint8_t)ext_len;
	out[o++] = (uint8_t)((ext_len - 2) >> 8);
	out[o++] = (uint8_t)(ext_len - 2);
	out[o++] = 0; /* host_name */
	out[o++] = (uint8_t)(nlen >> 8);
	out[o++] = (uint8_t)nlen;
	memcpy(out + o, name, nlen);
	o += nlen;
	return o;
}

static void
test_constructed_names(void **state)
{
	uint8_t buf[1024];
	char out[SNI_NAME_MAX], longname[300];
	size_t len;
	(void)state;

	len = build_hello("a.test", 6, buf);
	check_all_prefixes(buf, len, SNI_FOUND, "a.test");
	/* a NUL inside the name must not cut it short into an allowed one */
	len = build_hello("a.test\0.evil", 12, buf);
	assert_int_equal(parse(buf, len, out), SNI_MALFORMED);
	len = build_hello("a b", 3, buf);
	assert_int_equal(parse(buf, len, out), SNI_MALFORMED);
	len = build_hello("", 0, buf);
	assert_int_equal(parse(buf, len, out), SNI_MALFORMED);
	memset(longname, 'a', sizeof(longname));
	len = build_hello(longname, 255, buf);
	assert_int_equal(parse(buf, len, out), SNI_MALFORMED);
	len = build_hello(longname, 253, buf);
	assert_int_equal(parse(buf, len, out), SNI_FOUND);
	assert_int_equal(strlen(out), 253);
}

/* A ClientHello (one record) around the extension block exts[0..elen). */
static size_t
hello_with(const uint8_t *exts, size_t elen, uint8_t *out)
{
	size_t body = 2 + 32 + 1 + 4 + 2 + 2 + elen, o = 0;

	out[o++] = 0x16;
	out[o++] = 0x03;
	out[o++] = 0x01;
	out[o++] = (uint8_t)((body + 4) >> 8);
	out[o++] = (uint8_t)(body + 4);
	out[o++] = 0x01;
	out[o++] = 0;
	out[o++] = (uint8_t)(body >> 8);
	out[o++] = (uint8_t)body;
	out[o++] = 0x03;
	out[o++] = 0x03;
	memset(out + o, 0xcd, 32);
	o += 32;
	out[o++] = 0;
	out[o++] = 0;
	out[o++] = 2;
	out[o++] = 0x13;
	out[o++] = 0x01;
	out[o++] = 1;
	out[o++] = 0;
	out[o++] = (uint8_t)(elen >> 8);
	out[o++] = (uint8_t)elen;
	memcpy(out + o, exts, elen);
	return o + elen;
}

/* Append one extension to e at *o. */
static void
add_ext(uint8_t *e, size_t *o, unsigned type, const uint8_t *body, size_t blen)
{
	e[(*o)++] = (uint8_t)(type >> 8);
	e[(*o)++] = (uint8_t)type;
	e[(*o)++] = (uint8_t)(blen >> 8);
	e[(*o)++] = (uint8_t)blen;
	memcpy(e + *o, body, blen);
	*o += blen;
}

/* A server_name body listing names[0..n), each of type types[i]. */
static size_t
server_name(const char *const *names, const uint8_t *types, size_t n, uint8_t *out)
{
	size_t o = 2;

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(names[i]);

		out[o++] = types != NULL ? types[i] : 0;
		out[o++] = (uint8_t)(l >> 8);
		out[o++] = (uint8_t)l;
		memcpy(out + o, names[i], l);
		o += l;
	}
	out[0] = (uint8_t)((o - 2) >> 8);
	out[1] = (uint8_t)(o - 2);
	return o;
}

/* Every prefix asks for more; the whole gives want with the same fields. */
static void
check_hello(const uint8_t *buf, size_t len, enum sni_result want, const char *name,
            const char *second, bool ech)
{
	struct sni_hello h;

	for (size_t i = 0; i < len; i++) {
		uint8_t *copy = malloc(i + 1);

		memcpy(copy, buf, i);
		assert_int_equal(sni_parse(copy, i, &h), SNI_INCOMPLETE);
		free(copy);
	}
	assert_int_equal(sni_parse(buf, len, &h), want);
	assert_string_equal(h.name, name);
	assert_string_equal(h.second, second);
	assert_int_equal(h.ech, ech);
	assert_int_equal(h.len, len);
}

/* Several names, ECH, repeated extensions: what the name the server acts
 * on could differ from the one read. */
static void
test_names_and_ech(void **state)
{
	static const char *const two[] = {"allowed.test", "denied.test"};
	static const char *const three[] = {"allowed.test", "denied.test", "x.test"};
	static const char *const one[] = {"allowed.test"};
	static const uint8_t ech_body[] = {0x00, 0x00, 0x01, 0x00, 0x01, 0x42, 0x00, 0x02,
	                                   0xaa, 0xbb, 0x00, 0x03, 1,    2,    3};
	static const uint8_t other_type[] = {1};
	uint8_t sn[512], exts[2048], buf[4096];
	size_t n, o;
	(void)state;

	/* two and three names: refused, both first names reported */
	o = 0;
	n = server_name(two, NULL, 2, sn);
	add_ext(exts, &o, 0x0000, sn, n);
	check_hello(buf, hello_with(exts, o, buf), SNI_MANY_NAMES, "allowed.test", "denied.test",
	            false);
	o = 0;
	n = server_name(three, NULL, 3, sn);
	add_ext(exts, &o, 0x0000, sn, n);
	check_hello(buf, hello_with(exts, o, buf), SNI_MANY_NAMES, "allowed.test", "denied.test",
	            false);

	/* ECH after the name (as browsers order them) and before it */
	o = 0;
	n = server_name(one, NULL, 1, sn);
	add_ext(exts, &o, 0x0000, sn, n);
	add_ext(exts, &o, 0xfe0d, ech_body, sizeof(ech_body));
	check_hello(buf, hello_with(exts, o, buf), SNI_FOUND, "allowed.test", "", true);
	o = 0;
	add_ext(exts, &o, 0xfe0d, ech_body, sizeof(ech_body));
	add_ext(exts, &o, 0x0000, sn, n);
	check_hello(buf, hello_with(exts, o, buf), SNI_FOUND, "allowed.test", "", true);
	/* the draft ESNI extension hides the name the same way */
	o = 0;
	add_ext(exts, &o, 0x0000, sn, n);
	add_ext(exts, &o, 0xffce, ech_body, sizeof(ech_body));
	check_hello(buf, hello_with(exts, o, buf), SNI_FOUND, "allowed.test", "", true);
	/* ECH without a name */
	o = 0;
	add_ext(exts, &o, 0xfe0d, ech_body, sizeof(ech_body));
	check_hello(buf, hello_with(exts, o, buf), SNI_NO_NAME, "", "", true);
	/* ECH and several names */
	o = 0;
	add_ext(exts, &o, 0xfe0d, ech_body, sizeof(ech_body));
	add_ext(exts, &o, 0x0000, sn, server_name(two, NULL, 2, sn));
	check_hello(buf, hello_with(exts, o, buf), SNI_MANY_NAMES, "allowed.test", "denied.test",
	            true);

	/* malformed: a second server_name or ECH extension, an entry of
	 * another type, an empty list, bytes after the list */
	n = server_name(one, NULL, 1, sn);
	o = 0;
	add_ext(exts, &o, 0x0000, sn, n);
	add_ext(exts, &o, 0x0000, sn, n);
	assert_int_equal(parse(buf, hello_with(exts, o, buf), (char[SNI_NAME_MAX]){0}),
	                 SNI_MALFORMED);
	o = 0;
	add_ext(exts, &o, 0xfe0d, ech_body, sizeof(ech_body));
	add_ext(exts, &o, 0xfe0d, ech_body, sizeof(ech_body));
	assert_int_equal(parse(buf, hello_with(exts, o, buf), (char[SNI_NAME_MAX]){0}),
	                 SNI_MALFORMED);
	o = 0;
	add_ext(exts, &o, 0x0000, sn, server_name(one, other_type, 1, sn));
	assert_int_equal(parse(buf, hello_with(exts, o, buf), (char[SNI_NAME_MAX]){0}),
	                 SNI_MALFORMED);
	o = 0;
	add_ext(exts, &o, 0x0000, (const uint8_t *)"\0\0", 2);
	assert_int_equal(parse(buf, hello_with(exts, o, buf), (char[SNI_NAME_MAX]){0}),
	                 SNI_MALFORMED);
	n = server_name(one, NULL, 1, sn);
	sn[n++] = 0;
	o = 0;
	add_ext(exts, &o, 0x0000, sn, n);
	assert_int_equal(parse(buf, hello_with(exts, o, buf), (char[SNI_NAME_MAX]){0}),
	                 SNI_MALFORMED);
}

/* len says where the client's next bytes start: after the record that
 * completes the hello, however it was fragmented. */
static void
test_hello_len(void **state)
{
	uint8_t buf[4096], frag[SNI_MAX_INPUT];
	struct sni_hello h;
	size_t len, flen;
	(void)state;

	len = load("hello-curl.bin", buf, sizeof(buf));
	memcpy(buf + len, "\x14\x03\x03\x00\x01\x01", 6); /* a ChangeCipherSpec after it */
	assert_int_equal(sni_parse(buf, len + 6, &h), SNI_FOUND);
	assert_int_equal(h.len, len);
	flen = refragment(buf, len, 7, frag, sizeof(frag));
	assert_int_equal(sni_parse(frag, flen, &h), SNI_FOUND);
	assert_int_equal(h.len, flen);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_real_hellos),   cmocka_unit_test(test_not_tls),
	        cmocka_unit_test(test_malformed),     cmocka_unit_test(test_constructed_names),
	        cmocka_unit_test(test_names_and_ech), cmocka_unit_test(test_hello_len),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
