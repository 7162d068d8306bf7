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
#include <unistd.h>

#include <cmocka.h>

#include <openssl/evp.h>
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

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The Java store of this machine's bundle and a task CA: read back by the
 * format's rules (magic, version, count, entries, the keyed SHA-1), and
 * by Java's own keytool where there is one. */
static void
test_jks(void **state)
{
	struct tlsca_config cfg = {0};
	char err[256] = "";
	struct tlsca *ca = tlsca_new(&cfg, err, sizeof(err));
	const char *from;
	size_t len, jlen, off;
	char *host = tlstrust_host_bundle(16u << 20, &len, &from, err, sizeof(err));
	unsigned char *jks = NULL, *ca_der = NULL, digest[20];
	unsigned char key[16];
	int n, ca_len, n_host;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned dlen;

	assert_non_null(host);
	n_host = store_from(host, len, NULL);
	n = tlstrust_jks(host, len, tlsca_cert(ca), 1800000000000, &jks, &jlen, err, sizeof(err));
	if (n < 0)
		fail_msg("%s", err);
	assert_int_equal(n, n_host + 1);
	assert_int_equal(be32(jks), 0xfeedfeedu);
	assert_int_equal(be32(jks + 4), 2);
	assert_int_equal(be32(jks + 8), (uint32_t)n);
	/* the first entry: a trusted certificate, the task CA */
	assert_int_equal(be32(jks + 12), 2);
	assert_int_equal(jks[16] << 8 | jks[17], 15);
	assert_memory_equal(jks + 18, "airlock-task-ca", 15);
	off = 18 + 15 + 8;
	assert_int_equal(jks[off] << 8 | jks[off + 1], 5);
	assert_memory_equal(jks + off + 2, "X.509", 5);
	off += 7;
	ca_len = i2d_X509(tlsca_cert(ca), &ca_der);
	assert_int_equal(be32(jks + off), (uint32_t)ca_len);
	assert_memory_equal(jks + off + 4, ca_der, (size_t)ca_len);
	/* the digest over "changeit" in UTF-16BE, the phrase, the store */
	for (int i = 0; i < 8; i++) {
		key[2 * i] = 0;
		key[2 * i + 1] = (unsigned char)"changeit"[i];
	}
	assert_int_equal(EVP_DigestInit_ex(md, EVP_sha1(), NULL), 1);
	EVP_DigestUpdate(md, key, sizeof(key));
	EVP_DigestUpdate(md, "Mighty Aphrodite", 16);
	EVP_DigestUpdate(md, jks, jlen - 20);
	EVP_DigestFinal_ex(md, digest, &dlen);
	assert_memory_equal(jks + jlen - 20, digest, 20);

	{
		const char *must = getenv("AIRLOCK_MUST_WORK");
		char path[] = "/tmp/airlock-test-jks-XXXXXX", cmd[256];
		int fd = mkstemp(path), rc;

		assert_true(fd >= 0);
		assert_int_equal(write(fd, jks, jlen), (ssize_t)jlen);
		close(fd);
		if (system("command -v keytool >/dev/null 2>&1") == 0) {
			snprintf(cmd, sizeof(cmd),
			         "keytool -list -keystore %s -storepass changeit -alias airlock-task-ca "
			         ">/dev/null 2>&1",
			         path);
			rc = system(cmd);
			assert_int_equal(rc, 0);
		} else if (must != NULL && strcmp(must, "1") == 0) {
			fail_msg("keytool is not installed (scripts/setup.sh installs it)");
		}
		unlink(path);
	}

	/* a bundle with a broken certificate block is an error, not a short store */
	{
		static const char broken[] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
		unsigned char *bad = NULL;
		size_t blen;

		assert_int_equal(tlstrust_jks(broken, sizeof(broken) - 1, tlsca_cert(ca), 0, &bad, &blen,
		                              err, sizeof(err)),
		                 -1);
		assert_non_null(strstr(err, "java store"));
		assert_null(bad);
	}
	EVP_MD_CTX_free(md);
	OPENSSL_free(ca_der);
	free(jks);
	free(host);
	tlsca_free(ca);
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
	        cmocka_unit_test(test_jks),
	        cmocka_unit_test(test_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
