/* How the sandbox comes to trust the task CA without the user doing
 * anything (issue 17, item 3): the files and variables that tools read.
 * Pure but for reading the host's bundle, which the supervisor does before
 * the sandbox starts; the sandbox's set-up writes the files into its
 * staging area and binds them over the paths that exist. */
#ifndef AIRLOCK_TLS_TRUST_H
#define AIRLOCK_TLS_TRUST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

/* Where the sandbox finds them (its own /run is private). */
#define TLSTRUST_DIR    "/run/airlock/tls"
#define TLSTRUST_BUNDLE TLSTRUST_DIR "/ca-bundle.pem" /* host roots + task CA */
#define TLSTRUST_CA     TLSTRUST_DIR "/task-ca.pem"   /* the task CA alone */

/* Java's trust stores: bound over with tlstrust_jks's store where they
 * exist (Debian's ca-certificates-java, Fedora's and the JDKs' own).
 * NULL-terminated. */
extern const char *const tlstrust_java_stores[];

/* The system bundle files distributions keep, in the order tried: the
 * merged bundle is bound over each that exists. NULL-terminated. */
extern const char *const tlstrust_system_bundles[];

/* The host's bundle: the first of tlstrust_system_bundles that reads, at
 * most max bytes, into a malloc'd NUL-terminated string (*len its length)
 * and its path in *from (borrowed). NULL with a one-line reason in err
 * when none reads. */
char *tlstrust_host_bundle(size_t max, size_t *len, const char **from, char *err, size_t errlen);

/* The merged bundle: host (len bytes, any text) then the CA's PEM, with a
 * newline between when host lacks its last; malloc'd, NUL-terminated,
 * *out_len its length. NULL when out of memory. */
char *tlstrust_merge(const char *host, size_t len, const char *ca_pem, size_t *out_len);

/* A Java KeyStore (JKS, the format of Debian's cacerts) of trusted
 * certificates: every certificate in the PEM text bundle (len bytes; what
 * is not a certificate is skipped), and the task CA first under the alias
 * "airlock-task-ca". Its integrity digest is keyed with Java's default
 * store password, "changeit". malloc'd into *out (*out_len bytes). Returns
 * the number of certificates, or -1 with a one-line reason in err. */
int tlstrust_jks(const char *bundle, size_t len, X509 *ca, int64_t now_ms, unsigned char **out,
                 size_t *out_len, char *err, size_t errlen);

/* One variable of CMD's environment. */
struct tlstrust_var {
	const char *name;
	const char *value; /* TLSTRUST_BUNDLE or TLSTRUST_CA (static) */
};

/* The variables that point tools at the bundle (OpenSSL, Python requests,
 * curl, pip, git, cargo, the AWS SDKs, Nix) or, for Node, which adds its
 * roots to what NODE_EXTRA_CA_CERTS names, at the CA alone. n: set to the
 * count. Static. */
const struct tlstrust_var *tlstrust_env(size_t *n);

#endif
