/* tls/ctx.c: the two legs of an inspected connection, each handshaking
 * over a BIO pair with a peer made here (no sockets): the upstream leg
 * verifies its origin for the name and only against its own trust store;
 * the sandbox leg presents the task CA's leaf and mirrors the origin's
 * protocol. */
#include "tls/ca.h"
#include "tls/ctx.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

struct fixture {
	struct tlsca *origin_ca; /* stands in for a public CA */
	struct tlsca *task_ca;   /* the task's own */
	char store[64];          /* a trust store file holding origin_ca */
	SSL_CTX *origin;         /* the origin's server context */
	SSL_CTX *upstream;       /* airlock's client context */
	SSL_CTX *sandbox;        /* airlock's server context */
};

static struct tlsca *
ca_make(void)
{
	struct tlsca_config cfg = {0};
	char err[256];
	struct tlsca *ca = tlsca_new(&cfg, err, sizeof(err));

	if (ca == NULL)
		fail_msg("tlsca_new: %s", err);
	return ca;
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	char *pem;
	int fd;

	f->origin_ca = ca_make();
	f->task_ca = ca_make();
	snprintf(f->store, sizeof(f->store), "/tmp/airlock-test-store-XXXXXX");
	fd = mkstemp(f->store);
	assert_true(fd >= 0);
	pem = tlsca_cert_pem(f->origin_ca, NULL);
	assert_int_equal(write(fd, pem, strlen(pem)), (ssize_t)strlen(pem));
	close(fd);
	free(pem);
	f->origin = tlsctx_sandbox_new(tlsca_leaf_key(f->origin_ca), err, sizeof(err));
	f->upstream = tlsctx_upstream_new(f->store, NULL, err, sizeof(err));
	f->sandbox = tlsctx_sandbox_new(tlsca_leaf_key(f->task_ca), err, sizeof(err));
	if (f->origin == NULL || f->upstream == NULL || f->sandbox == NULL)
		fail_msg("context: %s", err);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	SSL_CTX_free(f->origin);
	SSL_CTX_free(f->upstream);
	SSL_CTX_free(f->sandbox);
	tlsca_free(f->origin_ca);
	tlsca_free(f->task_ca);
	unlink(f->store);
	free(f);
	return 0;
}

/* A server SSL for name with a leaf of ca. */
static SSL *
server_for(SSL_CTX *ctx, struct tlsca *ca, const char *name, const char *proto)
{
	const unsigned char *der;
	size_t len;
	SSL *s;

	assert_int_equal(tlsca_leaf(ca, name, &der, &len), TLSCA_OK);
	s = tlsctx_sandbox_ssl(ctx, der, len, tlsca_cert(ca), proto);
	assert_non_null(s);
	return s;
}

/* Run both handshakes over a BIO pair until each is done or one fails
 * (bounded: a handful of flights). True when both completed. */
static bool
handshake(SSL *client, SSL *server)
{
	BIO *cb, *sb;
	int c = 0, s = 0;

	assert_int_equal(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
	SSL_set_bio(client, cb, cb);
	SSL_set_bio(server, sb, sb);
	SSL_set_connect_state(client);
	SSL_set_accept_state(server);
	for (int i = 0; i < 20 && (c != 1 || s != 1); i++) {
		if (c != 1) {
			c = SSL_do_handshake(client);
			if (c <= 0 && SSL_get_error(client, c) != SSL_ERROR_WANT_READ)
				return ERR_clear_error(), false;
		}
		if (s != 1) {
			s = SSL_do_handshake(server);
			if (s <= 0 && SSL_get_error(server, s) != SSL_ERROR_WANT_READ)
				return ERR_clear_error(), false;
		}
	}
	return c == 1 && s == 1;
}

static void
test_upstream_verifies(void **state)
{
	struct fixture *f = *state;
	static const unsigned char alpn[] = "\x02h2\x08http/1.1";
	SSL *c = tlsctx_upstream_ssl(f->upstream, "origin.test", alpn, sizeof(alpn) - 1);
	SSL *s = server_for(f->origin, f->origin_ca, "origin.test", "http/1.1");
	const unsigned char *sel;
	unsigned sel_len;

	assert_true(handshake(c, s));
	assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
	assert_true(SSL_version(c) >= TLS1_2_VERSION);
	SSL_get0_alpn_selected(c, &sel, &sel_len);
	assert_int_equal(sel_len, 8);
	assert_memory_equal(sel, "http/1.1", 8);
	assert_true((X509_VERIFY_PARAM_get_hostflags(SSL_get0_param(c)) &
	             X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS) != 0);
	SSL_free(c);
	SSL_free(s);
}

static void
test_upstream_wrong_name(void **state)
{
	struct fixture *f = *state;
	SSL *c = tlsctx_upstream_ssl(f->upstream, "other.test", NULL, 0);
	SSL *s = server_for(f->origin, f->origin_ca, "origin.test", NULL);

	assert_false(handshake(c, s));
	assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_HOSTNAME_MISMATCH);
	SSL_free(c);
	SSL_free(s);
}

/* The task CA signs what the sandbox sees; upstream it is a stranger. */
static void
test_upstream_never_trusts_the_task_ca(void **state)
{
	struct fixture *f = *state;
	SSL *c = tlsctx_upstream_ssl(f->upstream, "origin.test", NULL, 0);
	SSL *s = server_for(f->sandbox, f->task_ca, "origin.test", NULL);

	assert_false(handshake(c, s));
	/* the chain sent ends in the task CA, which this store does not hold */
	assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN);
	SSL_free(c);
	SSL_free(s);
}

static void
test_upstream_refuses_old_tls(void **state)
{
	struct fixture *f = *state;
	SSL *c = tlsctx_upstream_ssl(f->upstream, "origin.test", NULL, 0);
	SSL *s = server_for(f->origin, f->origin_ca, "origin.test", NULL);

	/* Both ends at security level 0 and no system configuration (main):
	 * only the context's own minimum refuses TLS 1.1 here. */
	SSL_set_security_level(c, 0);
	SSL_set_security_level(s, 0);
	assert_int_equal(SSL_set_min_proto_version(s, TLS1_VERSION), 1);
	assert_int_equal(SSL_set_max_proto_version(s, TLS1_1_VERSION), 1);
	assert_false(handshake(c, s));
	SSL_free(c);
	SSL_free(s);
}

static void
test_upstream_bad_store(void **state)
{
	char err[256] = "";

	assert_null(tlsctx_upstream_new("/nonexistent/store.pem", NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/store.pem"));
}

/* A client that trusts the task CA (as the sandbox does) accepts the
 * sandbox leg's leaf for the name, and gets the origin's protocol only if
 * it offered it. */
static void
test_sandbox_leg(void **state)
{
	struct fixture *f = *state;
	char *pem = tlsca_cert_pem(f->task_ca, NULL);
	char store[] = "/tmp/airlock-test-task-XXXXXX";
	int fd = mkstemp(store);
	char err[256];
	SSL_CTX *client_ctx;
	SSL *c, *s;
	const unsigned char *sel;
	unsigned sel_len;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, pem, strlen(pem)), (ssize_t)strlen(pem));
	close(fd);
	free(pem);
	client_ctx = tlsctx_upstream_new(store, NULL, err, sizeof(err));
	assert_non_null(client_ctx);

	c = tlsctx_upstream_ssl(client_ctx, "pypi.org", (const unsigned char *)"\x08http/1.1", 9);
	s = server_for(f->sandbox, f->task_ca, "pypi.org", "http/1.1");
	assert_true(handshake(c, s));
	assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
	SSL_get0_alpn_selected(c, &sel, &sel_len);
	assert_int_equal(sel_len, 8);
	SSL_free(c);
	SSL_free(s);

	/* an h2-only client when the origin chose http/1.1: no protocol */
	c = tlsctx_upstream_ssl(client_ctx, "pypi.org", (const unsigned char *)"\x02h2", 3);
	s = server_for(f->sandbox, f->task_ca, "pypi.org", "http/1.1");
	assert_true(handshake(c, s));
	SSL_get0_alpn_selected(c, &sel, &sel_len);
	assert_int_equal(sel_len, 0);
	SSL_get0_alpn_selected(s, &sel, &sel_len);
	assert_int_equal(sel_len, 0);
	SSL_free(c);
	SSL_free(s);

	SSL_CTX_free(client_ctx);
	unlink(store);
}

static void
test_sandbox_bad_leaf(void **state)
{
	struct fixture *f = *state;
	const unsigned char *der;
	size_t len;

	assert_int_equal(tlsca_leaf(f->task_ca, "pypi.org", &der, &len), TLSCA_OK);
	assert_null(tlsctx_sandbox_ssl(f->sandbox, der, len - 1, tlsca_cert(f->task_ca), NULL));
	/* a leaf whose key is not the context's */
	assert_int_equal(tlsca_leaf(f->origin_ca, "pypi.org", &der, &len), TLSCA_OK);
	assert_null(tlsctx_sandbox_ssl(f->sandbox, der, len, tlsca_cert(f->task_ca), NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_upstream_verifies),
	        cmocka_unit_test(test_upstream_wrong_name),
	        cmocka_unit_test(test_upstream_never_trusts_the_task_ca),
	        cmocka_unit_test(test_upstream_refuses_old_tls),
	        cmocka_unit_test(test_upstream_bad_store),
	        cmocka_unit_test(test_sandbox_leg),
	        cmocka_unit_test(test_sandbox_bad_leaf),
	};

	/* Debian's openssl.cnf raises every context's minimum to TLS 1.2 by
	 * itself; without it the tests see what the code does. */
	setenv("OPENSSL_CONF", "/dev/null", 1);
	return cmocka_run_group_tests(tests, setup, teardown);
}
