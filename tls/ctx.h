/* The two TLS legs of an inspected connection (DESIGN.md, "TLS inspection
 * and L7 rules"), as OpenSSL contexts made once per task:
 *
 *  - upstream: airlock is the client. The origin is verified against the
 *    host's trust store (and an extra CA a test lab or a corporate proxy
 *    needs), never against the task CA; TLS 1.2 at least; the name checked
 *    with no partial wildcards ("f*.example.com" matches nothing).
 *  - sandbox: airlock is the server, presenting the task CA's leaf for
 *    the decided name with the leaves' key, and giving the client the
 *    protocol (ALPN) the origin chose, when the client offered it.
 *
 * Both contexts load everything they need when made (the trust store is
 * read then, before the worker gives up opening files). */
#ifndef AIRLOCK_TLS_CTX_H
#define AIRLOCK_TLS_CTX_H

#include <stddef.h>

#include <openssl/ssl.h>

/* The upstream context. extra_ca: a PEM file of CAs trusted beside the
 * host's, or NULL; store_file: the host trust store, NULL for OpenSSL's
 * default paths (tests give a file of their own). NULL with a one-line
 * reason in err. */
SSL_CTX *tlsctx_upstream_new(const char *store_file, const char *extra_ca, char *err,
                             size_t errlen);

/* A client SSL for name (a normalised DNS name): SNI set, the certificate
 * verified for that name. alpn: the protocols to offer, in wire format
 * (length-prefixed), or NULL for none. The caller owns the SSL. NULL when
 * out of memory. */
SSL *tlsctx_upstream_ssl(SSL_CTX *ctx, const char *name, const unsigned char *alpn,
                         size_t alpn_len);

/* The sandbox-side context; leaf_key is borrowed for the context's life
 * (tlsca_leaf_key). NULL with a reason in err. */
SSL_CTX *tlsctx_sandbox_new(EVP_PKEY *leaf_key, char *err, size_t errlen);

/* A server SSL presenting the leaf (DER, copied) and, after it, the CA
 * certificate (borrowed; its reference is taken). proto: the protocol
 * the origin chose (ALPN, e.g. "http/1.1"), NULL or "" for none: it is
 * selected when the client offered it, and no protocol otherwise. The
 * caller owns the SSL. NULL on a bad leaf or out of memory. */
SSL *tlsctx_sandbox_ssl(SSL_CTX *ctx, const unsigned char *leaf_der, size_t leaf_len, X509 *ca,
                        const char *proto);

#endif
