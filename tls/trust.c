/* The task CA in the sandbox's trust stores (tls/trust.h). */
#include "tls/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const tlstrust_system_bundles[] = {
        "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu, Gentoo, Arch */
        "/etc/pki/tls/certs/ca-bundle.crt",                  /* Fedora, RHEL */
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* RHEL 7+ */
        "/etc/ssl/ca-bundle.pem",                            /* openSUSE */
        "/etc/ssl/cert.pem",                                 /* Alpine, macOS-like */
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
