/* The two TLS legs of an inspected connection (tls/ctx.h). */
#include "tls/ctx.h"

#include "tls/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

/* Where each sandbox-side SSL keeps the protocol its origin chose, for the
 * ALPN callback (which OpenSSL calls with the context's argument, not the
 * connection's). An index registered once with OpenSSL; the string is
 * freed with the SSL. */
static int alpn_index = -1;

static void
alpn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	free(ptr);
}

SSL_CTX *
tlsctx_upstream_new(const char *store_file, const char *extra_ca, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	X509_STORE *store;
	const char *file = store_file != NULL ? store_file : X509_get_default_cert_file();

	if (ctx == NULL) {
		tls_error(err, errlen, "tls upstream");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		tls_error(err, errlen, "tls upstream: TLS 1.2");
		goto fail;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* The store is read whole now: no hashed-directory lookup, which
	 * would open files at each verification, long after the worker can
	 * no longer open any. */
	store = SSL_CTX_get_cert_store(ctx);
	if (X509_STORE_load_file(store, file) != 1) {
		char what[320];

		snprintf(what, sizeof(what), "tls upstream: trust store %s", file);
		tls_error(err, errlen, what);
		goto fail;
	}
	if (extra_ca != NULL && X509_STORE_load_file(store, extra_ca) != 1) {
		char what[320];

		snprintf(what, sizeof(what), "tls upstream: CA file %s", extra_ca);
		tls_error(err, errlen, what);
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL *
tlsctx_upstream_ssl(SSL_CTX *ctx, const char *name, const unsigned char *alpn, size_t alpn_len)
{
	SSL *ssl = SSL_new(ctx);

	if (ssl == NULL)
		return NULL;
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1 ||
	    (alpn != NULL && SSL_set_alpn_protos(ssl, alpn, (unsigned)alpn_len) != 0)) {
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

/* Select the origin's protocol if the client offered it; else none (the
 * client then speaks what it would without ALPN, or gives up). */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
            unsigned inlen, void *arg)
{
	const char *proto = SSL_get_ex_data(ssl, alpn_index);
	size_t n = proto != NULL ? strlen(proto) : 0;

	for (unsigned i = 0; n > 0 && i < inlen;) {
		unsigned len = in[i];

		if (len > inlen - i - 1)
			break; /* OpenSSL has checked the list; stay bounded anyway */
		if (len == n && memcmp(in + i + 1, proto, n) == 0) {
			*out = in + i + 1;
			*outlen = (unsigned char)len;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + len;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

SSL_CTX *
tlsctx_sandbox_new(EVP_PKEY *leaf_key, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	if (alpn_index < 0 &&
	    (alpn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, alpn_free)) < 0) {
		tls_error(err, errlen, "tls sandbox: ex_data");
		return NULL;
	}
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		tls_error(err, errlen, "tls sandbox");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, leaf_key) != 1) {
		tls_error(err, errlen, "tls sandbox: the leaf key");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	return ctx;
}

SSL *
tlsctx_sandbox_ssl(SSL_CTX *ctx, const unsigned char *leaf_der, size_t leaf_len, X509 *ca,
                   const char *proto)
{
	const unsigned char *p = leaf_der;
	X509 *leaf = d2i_X509(NULL, &p, (long)leaf_len);
	SSL *ssl = NULL;
	char *copy = NULL;

	if (leaf == NULL || p != leaf_der + leaf_len || (ssl = SSL_new(ctx)) == NULL)
		goto fail;
	/* A leaf that is not the key's makes OpenSSL drop the key quietly:
	 * check that the pair still stands. */
	if (SSL_use_certificate(ssl, leaf) != 1 || SSL_check_private_key(ssl) != 1 ||
	    SSL_add1_chain_cert(ssl, ca) != 1)
		goto fail;
	if (proto != NULL && proto[0] != '\0') {
		if ((copy = strdup(proto)) == NULL || SSL_set_ex_data(ssl, alpn_index, copy) != 1)
			goto fail;
		copy = NULL; /* the SSL's now */
	}
	X509_free(leaf);
	return ssl;
fail:
	ERR_clear_error();
	free(copy);
	SSL_free(ssl);
	X509_free(leaf);
	return NULL;
}
