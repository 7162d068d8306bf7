/* tls/ca.c: the task's CA and its leaves, checked the way a client checks
 * them: OpenSSL's own chain verification with the CA as the only trust
 * anchor and the name as the expected host. */
#include "tls/ca.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

static time_t fake_now = 1800000000;

static time_t
fake_clock(void)
{
	return fake_now;
}

static struct tlsca *
ca_make(unsigned cache, unsigned limit)
{
	struct tlsca_config cfg = {.label = "airlock task test", .cache_max = cache,
	                           .mint_limit = limit, .now = fake_clock};
	char err[256] = "";
	struct tlsca *ca = tlsca_new(&cfg, err, sizeof(err));

	if (ca == NULL)
		fail_msg("tlsca_new: %s", err);
	return ca;
}

/* X509_V_OK, or the verification error, of leaf for host against the CA
 * alone, at the fake clock. */
static int
verify(struct tlsca *ca, X509 *leaf, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *vp;
	int rc;

	assert_non_null(store);
	assert_non_null(ctx);
	assert_int_equal(X509_STORE_add_cert(store, tlsca_cert(ca)), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
	vp = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_time(vp, fake_now);
	X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_SERVER);
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	assert_int_equal(X509_VERIFY_PARAM_set1_host(vp, host, 0), 1);
	rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	return rc;
}

/* The leaf for name, parsed from its DER as the presenting side will. */
static X509 *
leaf_ok(struct tlsca *ca, const char *name)
{
	const unsigned char *der = NULL, *p;
	size_t len = 0;
	X509 *x;

	assert_int_equal(tlsca_leaf(ca, name, &der, &len), TLSCA_OK);
	assert_non_null(der);
	p = der;
	x = d2i_X509(NULL, &p, (long)len);
	assert_non_null(x);
	assert_ptr_equal(p, der + len); /* the whole of it, nothing after */
	return x;
}

/* Whether two leaves are one certificate (a cache hit) or two. */
static bool
same_leaf(X509 *a, X509 *b)
{
	return X509_cmp(a, b) == 0;
}

static void
test_ca_is_a_ca(void **state)
{
	struct tlsca *ca = ca_make(0, 0);
	X509 *c = tlsca_cert(ca);
	EVP_PKEY *pub = X509_get0_pubkey(c);
	char *pem;
	size_t len = 0;

	/* Self-signed, P-256, a CA that may sign leaves and nothing below them. */
	assert_int_equal(X509_verify(c, pub), 1);
	assert_int_equal(EVP_PKEY_get_base_id(pub), EVP_PKEY_EC);
	assert_int_equal(EVP_PKEY_get_bits(pub), 256);
	assert_int_equal(X509_check_ca(c), 1);
	assert_int_equal(X509_get_pathlen(c), 0);
	assert_true((X509_get_key_usage(c) & KU_KEY_CERT_SIGN) != 0);
	/* The leaf key is not the CA's. */
	assert_int_not_equal(EVP_PKEY_eq(pub, tlsca_leaf_key(ca)), 1);

	pem = tlsca_cert_pem(ca, &len);
	assert_non_null(pem);
	assert_int_equal(strlen(pem), len);
	assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE-----"));
	assert_null(strstr(pem, "PRIVATE KEY"));
	free(pem);
	tlsca_free(ca);
}

static void
test_leaf_verifies_for_its_name_only(void **state)
{
	struct tlsca *ca = ca_make(0, 0);
	X509 *x = leaf_ok(ca, "pypi.org");
	const ASN1_INTEGER *serial;
	BIGNUM *bn;

	assert_int_equal(verify(ca, x, "pypi.org"), X509_V_OK);
	assert_int_equal(verify(ca, x, "evil.test"), X509_V_ERR_HOSTNAME_MISMATCH);
	assert_int_equal(verify(ca, x, "sub.pypi.org"), X509_V_ERR_HOSTNAME_MISMATCH);
	/* Signed by the CA with the leaf key inside, not a CA itself. */
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), tlsca_leaf_key(ca)), 1);
	assert_int_equal(X509_check_ca(x), 0);
	assert_int_equal(X509_get_extension_flags(x) & EXFLAG_CA, 0);
	assert_true((X509_get_extension_flags(x) & EXFLAG_BCONS) != 0);
	assert_true((X509_get_extended_key_usage(x) & XKU_SSL_SERVER) != 0);
	/* A positive serial of 16 octets. */
	serial = X509_get0_serialNumber(x);
	bn = ASN1_INTEGER_to_BN(serial, NULL);
	assert_non_null(bn);
	assert_false(BN_is_negative(bn));
	assert_int_equal(BN_num_bytes(bn), 16);
	BN_free(bn);
	/* Validity: backdated a little, a day long. */
	{
		int days = 0, secs = 0;

		assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x),
		                                X509_get0_notAfter(x)),
		                 1);
		assert_int_equal(days * 86400 + secs, TLSCA_DEFAULT_LEAF_SECS + TLSCA_BACKDATE_SECS);
	}
	X509_free(x);
	tlsca_free(ca);
}

/* A name longer than a common name may be goes in the SAN alone, and
 * still verifies. */
static void
test_long_name(void **state)
{
	struct tlsca *ca = ca_make(0, 0);
	char name[254];
	X509 *x;

	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (size_t i = 63; i < sizeof(name) - 1; i += 64)
		name[i] = '.';
	x = leaf_ok(ca, name);
	assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(x)), 0);
	assert_int_equal(verify(ca, x, name), X509_V_OK);
	X509_free(x);
	tlsca_free(ca);
}

static void
test_serials_differ(void **state)
{
	struct tlsca *ca = ca_make(0, 0);
	X509 *a = leaf_ok(ca, "a.example");
	X509 *b = leaf_ok(ca, "b.example");

	assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(a), X509_get0_serialNumber(b)),
	                     0);
	assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(a),
	                                      X509_get0_serialNumber(tlsca_cert(ca))),
	                     0);
	X509_free(a);
	X509_free(b);
	tlsca_free(ca);
}

static void
test_bad_names(void **state)
{
	static const char *const bad[] = {
	        "",          "Pypi.org",   "pypi.org.", "*.pypi.org", "a..b", "-a.test",
	        "a b.test",  "192.0.2.1",  "2001:db8::1", "caf\xc3\xa9.test", "x/y.test",
	        "a.test\n",
	};
	struct tlsca *ca = ca_make(0, 0);
	struct tlsca_stats st;
	char toolong[300];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const unsigned char *der = (const unsigned char *)"";
		size_t len = 1;

		if (tlsca_leaf(ca, bad[i], &der, &len) != TLSCA_BAD_NAME)
			fail_msg("accepted %s", bad[i]);
		assert_null(der);
		assert_int_equal(len, 0);
	}
	memset(toolong, 'a', sizeof(toolong) - 1);
	toolong[sizeof(toolong) - 1] = '\0';
	assert_int_equal(tlsca_leaf(ca, toolong, &(const unsigned char *){NULL}, &(size_t){0}),
	                 TLSCA_BAD_NAME);
	tlsca_stats(ca, &st);
	assert_int_equal(st.minted, 0);
	tlsca_free(ca);
}

/* The cache serves the same leaf, evicts the least recently used at its
 * bound, and re-mints once a leaf has a tenth of its validity left. */
static void
test_cache(void **state)
{
	struct tlsca *ca = ca_make(2, 0);
	struct tlsca_stats st;
	X509 *a1 = leaf_ok(ca, "a.example"), *b1 = leaf_ok(ca, "b.example");
	X509 *a2 = leaf_ok(ca, "a.example"); /* hit: a is now the newest */
	X509 *c1 = leaf_ok(ca, "c.example"); /* evicts b */
	X509 *b2 = leaf_ok(ca, "b.example"); /* minted again, evicts a */
	X509 *a3, *a4;

	assert_true(same_leaf(a1, a2));
	assert_false(same_leaf(b1, b2));
	tlsca_stats(ca, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.minted, 4);
	assert_int_equal(st.cached, 2);

	a3 = leaf_ok(ca, "a.example");
	assert_false(same_leaf(a1, a3));
	fake_now += TLSCA_DEFAULT_LEAF_SECS - TLSCA_DEFAULT_LEAF_SECS / 10;
	a4 = leaf_ok(ca, "a.example"); /* stale now */
	assert_false(same_leaf(a3, a4));
	assert_int_equal(verify(ca, a4, "a.example"), X509_V_OK);
	/* A reference the caller holds outlives the cache's, and expires. */
	assert_int_equal(verify(ca, a1, "a.example"), X509_V_OK);
	fake_now += TLSCA_DEFAULT_LEAF_SECS / 10 + 1;
	assert_int_equal(verify(ca, a1, "a.example"), X509_V_ERR_CERT_HAS_EXPIRED);
	assert_int_equal(verify(ca, a4, "a.example"), X509_V_OK);

	X509_free(a1);
	X509_free(a2);
	X509_free(a3);
	X509_free(a4);
	X509_free(b1);
	X509_free(b2);
	X509_free(c1);
	tlsca_free(ca);
}

/* A flood of unique names is refused once the minting limit is spent;
 * cached names are still served. */
static void
test_mint_limit(void **state)
{
	struct tlsca *ca = ca_make(8, 5);
	struct tlsca_stats st;
	char name[64];

	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "n%d.flood.test", i);
		X509_free(leaf_ok(ca, name));
	}
	for (int i = 5; i < 50; i++) {
		snprintf(name, sizeof(name), "n%d.flood.test", i);
		const unsigned char *der;
		size_t len;

		assert_int_equal(tlsca_leaf(ca, name, &der, &len), TLSCA_LIMIT);
		assert_null(der);
	}
	X509_free(leaf_ok(ca, "n0.flood.test"));
	tlsca_stats(ca, &st);
	assert_int_equal(st.minted, 5);
	assert_int_equal(st.refused, 45);
	assert_int_equal(st.hits, 1);
	tlsca_free(ca);
}

/* Many names through a small cache: the table and the list stay one
 * structure (every name found again while cached, nothing leaked). */
static void
test_cache_churn(void **state)
{
	struct tlsca *ca = ca_make(16, 2000);
	struct tlsca_stats st;
	char name[64];

	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "h%d.churn.test", i % 40);
		X509_free(leaf_ok(ca, name));
	}
	tlsca_stats(ca, &st);
	assert_int_equal(st.cached, 16);
	assert_int_equal(st.hits + st.minted, 1000);
	tlsca_free(ca);
}

static void
test_bad_config(void **state)
{
	char err[256] = "";
	struct tlsca_config cfg = {.leaf_secs = 100, .ca_secs = 50};

	assert_null(tlsca_new(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "shorter"));
	cfg = (struct tlsca_config){.label = "an overlong label of more than sixty-four bytes, "
	                                     "which X.509 refuses"};
	assert_null(tlsca_new(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "label"));
	cfg = (struct tlsca_config){.cache_max = TLSCA_LIMIT_MAX + 1};
	assert_null(tlsca_new(&cfg, err, sizeof(err)));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_ca_is_a_ca),
	        cmocka_unit_test(test_leaf_verifies_for_its_name_only),
	        cmocka_unit_test(test_long_name),
	        cmocka_unit_test(test_serials_differ),
	        cmocka_unit_test(test_bad_names),
	        cmocka_unit_test(test_cache),
	        cmocka_unit_test(test_mint_limit),
	        cmocka_unit_test(test_cache_churn),
	        cmocka_unit_test(test_bad_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
