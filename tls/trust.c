/* The task CA in the sandbox's trust stores (tls/trust.h). */
#include "tls/trust.h"

#include "tls/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

const char *const tlstrust_system_bundles[] = {
        "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu, Gentoo, Arch */
        "/etc/pki/tls/certs/ca-bundle.crt",                  /* Fedora, RHEL */
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* RHEL 7+ */
        "/etc/ssl/ca-bundle.pem",                            /* openSUSE */
        "/etc/ssl/cert.pem",                                 /* Alpine, macOS-like */
        NULL,
};

const char *const tlstrust_java_stores[] = {
        "/etc/ssl/certs/java/cacerts",                            /* Debian, Ubuntu */
        "/etc/pki/ca-trust/extracted/java/cacerts",               /* Fedora, RHEL */
        "/etc/pki/java/cacerts",                                  /* RHEL's link */
        NULL,
};

static const struct tlstrust_var vars[] = {
        {"SSL_CERT_FILE", TLSTRUST_BUNDLE},      {"REQUESTS_CA_BUNDLE", TLSTRUST_BUNDLE},
        {"CURL_CA_BUNDLE", TLSTRUST_BUNDLE},     {"PIP_CERT", TLSTRUST_BUNDLE},
        {"GIT_SSL_CAINFO", TLSTRUST_BUNDLE},     {"CARGO_HTTP_CAINFO", TLSTRUST_BUNDLE},
        {"AWS_CA_BUNDLE", TLSTRUST_BUNDLE},      {"NIX_SSL_CERT_FILE", TLSTRUST_BUNDLE},
        {"NODE_EXTRA_CA_CERTS", TLSTRUST_CA},
};

const struct tlstrust_var *
tlstrust_env(size_t *n)
{
	*n = sizeof(vars) / sizeof(vars[0]);
	return vars;
}

/* All of fd, at most max bytes (one more tells a longer file). */
static char *
read_all(int fd, size_t max, size_t *len)
{
	size_t cap = 64 * 1024, n = 0;
	char *buf = malloc(cap + 1), *grown;
	ssize_t r;

	while (buf != NULL) {
		if (n == cap) {
			if (cap > max || (grown = realloc(buf, 2 * cap + 1)) == NULL)
				break;
			buf = grown;
			cap *= 2;
		}
		if ((r = read(fd, buf + n, cap - n)) < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (r == 0) {
			if (n > max)
				break;
			buf[n] = '\0';
			*len = n;
			return buf;
		}
		n += (size_t)r;
	}
	free(buf);
	errno = errno != 0 ? errno : EFBIG;
	return NULL;
}

char *
tlstrust_host_bundle(size_t max, size_t *len, const char **from, char *err, size_t errlen)
{
	for (size_t i = 0; tlstrust_system_bundles[i] != NULL; i++) {
		int fd = open(tlstrust_system_bundles[i], O_RDONLY | O_CLOEXEC);
		char *text;

		if (fd < 0)
			continue;
		errno = 0;
		text = read_all(fd, max, len);
		close(fd);
		if (text == NULL) {
			snprintf(err, errlen, "tls: %s: %s", tlstrust_system_bundles[i],
			         errno == EFBIG ? "larger than the bundle limit" : strerror(errno));
			return NULL;
		}
		*from = tlstrust_system_bundles[i];
		return text;
	}
	snprintf(err, errlen, "tls: no CA bundle on this host (looked for %s and %zu others)",
	         tlstrust_system_bundles[0],
	         sizeof(tlstrust_system_bundles) / sizeof(tlstrust_system_bundles[0]) - 2);
	return NULL;
}

char *
tlstrust_merge(const char *host, size_t len, const char *ca_pem, size_t *out_len)
{
	size_t ca_len = strlen(ca_pem);
	bool nl = len > 0 && host[len - 1] != '\n';
	char *out = malloc(len + nl + ca_len + 1);

	if (out == NULL)
		return NULL;
	memcpy(out, host, len);
	if (nl)
		out[len] = '\n';
	memcpy(out + len + nl, ca_pem, ca_len + 1);
	*out_len = len + nl + ca_len;
	return out;
}

/* ---- Java KeyStore ---- */

/* The store being written: grown as entries are added. */
struct jks {
	unsigned char *p;
	size_t len, cap;
	bool failed;
};

static void
jks_put(struct jks *j, const void *data, size_t n)
{
	if (j->failed)
		return;
	if (j->len + n > j->cap) {
		size_t cap = j->cap ? j->cap : 64 * 1024;
		unsigned char *grown;

		while (cap < j->len + n)
			cap *= 2;
		if ((grown = realloc(j->p, cap)) == NULL) {
			j->failed = true;
			return;
		}
		j->p = grown;
		j->cap = cap;
	}
	memcpy(j->p + j->len, data, n);
	j->len += n;
}

static void
jks_u16(struct jks *j, uint16_t v)
{
	unsigned char b[2] = {(unsigned char)(v >> 8), (unsigned char)v};

	jks_put(j, b, 2);
}

static void
jks_u32(struct jks *j, uint32_t v)
{
	jks_u16(j, (uint16_t)(v >> 16));
	jks_u16(j, (uint16_t)v);
}

/* Java's writeUTF: a 16-bit length, then the bytes (ASCII here). */
static void
jks_utf(struct jks *j, const char *s)
{
	jks_u16(j, (uint16_t)strlen(s));
	jks_put(j, s, strlen(s));
}

/* One trusted-certificate entry (tag 2). */
static int
jks_cert(struct jks *j, const char *alias, int64_t now_ms, X509 *x)
{
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);

	if (n <= 0)
		return -1;
	jks_u32(j, 2);
	jks_utf(j, alias);
	jks_u32(j, (uint32_t)((uint64_t)now_ms >> 32));
	jks_u32(j, (uint32_t)now_ms);
	jks_utf(j, "X.509");
	jks_u32(j, (uint32_t)n);
	jks_put(j, der, (size_t)n);
	OPENSSL_free(der);
	return 0;
}

int
tlstrust_jks(const char *bundle, size_t len, X509 *ca, int64_t now_ms, unsigned char **out,
             size_t *out_len, char *err, size_t errlen)
{
	/* The digest's key: the password as UTF-16BE, then this phrase (the
	 * JKS format's own, sun.security.provider.JavaKeyStore). */
	static const char phrase[] = "Mighty Aphrodite";
	static const char password[] = "changeit";
	BIO *b = BIO_new_mem_buf(bundle, (int)len);
	struct jks j = {0};
	size_t count_at;
	unsigned char key[2 * sizeof(password)], digest[EVP_MAX_MD_SIZE];
	unsigned dlen = 0;
	EVP_MD_CTX *md = NULL;
	X509 *x;
	int n = 0;

	if (b == NULL || len > INT32_MAX) {
		snprintf(err, errlen, "tls: java store: %s", b == NULL ? "out of memory" : "bundle too large");
		BIO_free(b);
		return -1;
	}
	jks_u32(&j, 0xfeedfeedu);
	jks_u32(&j, 2);
	count_at = j.len;
	jks_u32(&j, 0); /* the count, set at the end */
	if (jks_cert(&j, "airlock-task-ca", now_ms, ca) < 0)
		goto fail;
	n = 1;
	while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
		char alias[32];

		snprintf(alias, sizeof(alias), "host-%d", n);
		if (jks_cert(&j, alias, now_ms, x) < 0) {
			X509_free(x);
			goto fail;
		}
		X509_free(x);
		n++;
	}
	/* The loop ends at the text's end (no further PEM block) or at a
	 * block that does not parse: a store missing the rest would be
	 * wrong without saying so. */
	if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE) {
		snprintf(err, errlen, "tls: java store: certificate %d of the bundle does not parse", n);
		ERR_clear_error();
		goto fail_quiet;
	}
	ERR_clear_error();
	if (j.failed)
		goto fail;
	j.p[count_at] = (unsigned char)(n >> 24);
	j.p[count_at + 1] = (unsigned char)(n >> 16);
	j.p[count_at + 2] = (unsigned char)(n >> 8);
	j.p[count_at + 3] = (unsigned char)n;
	for (size_t i = 0; i < sizeof(password) - 1; i++) {
		key[2 * i] = 0;
		key[2 * i + 1] = (unsigned char)password[i];
	}
	if ((md = EVP_MD_CTX_new()) == NULL || EVP_DigestInit_ex(md, EVP_sha1(), NULL) != 1 ||
	    EVP_DigestUpdate(md, key, 2 * (sizeof(password) - 1)) != 1 ||
	    EVP_DigestUpdate(md, phrase, sizeof(phrase) - 1) != 1 ||
	    EVP_DigestUpdate(md, j.p, j.len) != 1 || EVP_DigestFinal_ex(md, digest, &dlen) != 1)
		goto fail;
	jks_put(&j, digest, dlen);
	if (j.failed)
		goto fail;
	EVP_MD_CTX_free(md);
	BIO_free(b);
	*out = j.p;
	*out_len = j.len;
	return n;
fail:
	tls_error(err, errlen, "tls: java store");
fail_quiet:
	EVP_MD_CTX_free(md);
	BIO_free(b);
	free(j.p);
	return -1;
}
