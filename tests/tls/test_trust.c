/* tls/trust.c: the merged bundle holds every host root and the task CA,
 * and verifies a leaf of the task CA as a client reading it would. */
#include "tls/ca.h"
#include "tls/trust.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

/* Certificates in PEM text, counted by OpenSSL's own reader. */
static int
store_from(const char *pem, size_t len, X509_STORE *store)
{
	BIO *b = BIO_new_mem_buf(pem, (int)len);
	X509 *x;
	int n = 0;

	while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
		if (store != NULL)
			X509_STORE_add_cert(store, x);
		X509_free(x);
		n++;
	}
	BIO_free(b);
	return n;
}

static void
test_merge_verifies(void **state)
{
	struct tlsca_config cfg = {0};
	char err[256];
	struct tlsca *ca = tlsca_new(&cfg, err, sizeof(err));
	struct tlsca *other = tlsca_new(&cfg, err, sizeof(err));
	char *ca_pem = tlsca_cert_pem(ca, NULL), *other_pem = tlsca_cert_pem(other, NULL);
	size_t len;
	/* A "host bundle" of one root whose last line has no newline. */
	size_t host_len = strlen(other_pem) - 1;
	char *merged = tlstrust_merge(other_pem, host_len, ca_pem, &len);
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *vctx = X509_STORE_CTX_new();
	const unsigned char *der;
	size_t der_len;
	X509 *leaf;

	assert_non_null(merged);
	assert_int_equal(len, strlen(merged));
	assert_int_equal(store_from(merged, len, store), 2);
	assert_int_equal(tlsca_leaf(ca, "pypi.org", &der, &der_len), TLSCA_OK);
	leaf = d2i_X509(NULL, &der, (long)der_len);
	assert_non_null(leaf);
	assert_int_equal(X509_STORE_CTX_init(vctx, store, leaf, NULL), 1);
	assert_int_equal(X509_verify_cert(vctx), 1);

	X509_free(leaf);
	X509_STORE_CTX_free(vctx);
	X509_STORE_free(store);
	free(merged);
	free(ca_pem);
	free(other_pem);
	tlsca_free(ca);
	tlsca_free(other);
}

/* This Debian machine's bundle reads, and merged it keeps every root. */
static void
test_host_bundle(void **state)
{
	char err[256] = "";
	const char *from = NULL;
	size_t len = 0, merged_len;
	char *host = tlstrust_host_bundle(16u << 20, &len, &from, err, sizeof(err));
	char *merged;
	int n_host;

	if (host == NULL)
		fail_msg("%s", err);
	assert_string_equal(from, tlstrust_system_bundles[0]);
	n_host = store_from(host, len, NULL);
	assert_true(n_host > 10);
	merged = tlstrust_merge(host, len, "", &merged_len);
	assert_int_equal(store_from(merged, merged_len, NULL), n_host);
	free(merged);
	free(host);

	/* a limit below the bundle's size is an error that says so */
	assert_null(tlstrust_host_bundle(1024, &len, &from, err, sizeof(err)));
	assert_non_null(strstr(err, "larger than the bundle limit"));
}

static void
test_env(void **state)
{
	size_t n = 0;
	const struct tlstrust_var *v = tlstrust_env(&n);
	bool node = false, ssl = false;

	assert_true(n >= 8);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].name, "NODE_EXTRA_CA_CERTS") == 0)
			node = strcmp(v[i].value, TLSTRUST_CA) == 0;
		if (strcmp(v[i].name, "SSL_CERT_FILE") == 0)
			ssl = strcmp(v[i].value, TLSTRUST_BUNDLE) == 0;
	}
	assert_true(node);
	assert_true(ssl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_merge_verifies),
	        cmocka_unit_test(test_host_bundle),
	        cmocka_unit_test(test_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
