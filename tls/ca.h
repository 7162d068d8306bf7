/* A task's certificate authority for TLS inspection (DESIGN.md, "TLS
 * inspection and L7 rules"): a P-256 CA made in memory when the task
 * starts, and leaf certificates minted from it, one per server name, on
 * demand. The CA's key exists in this process only; it is never written
 * anywhere and no function here hands it out (the broker holds a tlsca;
 * what leaves it is certificates, which are public, and the leaf key).
 *
 * Every leaf shares one per-task P-256 key, distinct from the CA's: the
 * process that terminates the sandbox's TLS needs a leaf key, never the
 * key that could sign another certificate. Leaves carry a random 128-bit
 * serial, the name as their only subjectAltName, serverAuth, and a short
 * validity; they are kept in a bounded LRU cache, and minting (a cache
 * miss) is counted against a per-task limit so that a flood of unique
 * subdomains costs a bounded amount of signing.
 *
 * Single-threaded: one tlsca belongs to one event loop. */
#ifndef AIRLOCK_TLS_CA_H
#define AIRLOCK_TLS_CA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/* Defaults for a zero field of struct tlsca_config. */
#define TLSCA_DEFAULT_CACHE       1024      /* leaves kept */
#define TLSCA_DEFAULT_MINT_LIMIT  4096      /* leaves minted per task */
#define TLSCA_DEFAULT_LEAF_SECS   86400     /* a leaf's validity: one day */
#define TLSCA_DEFAULT_CA_SECS     2592000   /* the CA's: thirty days */
/* notBefore is set this far in the past, for clients whose clock is a
 * little behind the host's. */
#define TLSCA_BACKDATE_SECS 300
/* The upper bound of every count above (a config beyond it is refused). */
#define TLSCA_LIMIT_MAX 1000000

struct tlsca_config {
	/* The CA's subject common name, e.g. "airlock task T" (NUL-terminated,
	 * at most 64 bytes; NULL or "" for "airlock task CA"). Borrowed. */
	const char *label;
	unsigned cache_max;  /* 0 = TLSCA_DEFAULT_CACHE */
	unsigned mint_limit; /* 0 = TLSCA_DEFAULT_MINT_LIMIT */
	uint32_t leaf_secs;  /* 0 = TLSCA_DEFAULT_LEAF_SECS */
	uint32_t ca_secs;    /* 0 = TLSCA_DEFAULT_CA_SECS; at least leaf_secs */
	/* The clock, for tests: NULL = time(). */
	time_t (*now)(void);
};

struct tlsca;

/* Make the CA and the leaf key. Returns NULL with a one-line reason in
 * err (a bad config, or OpenSSL's error). */
struct tlsca *tlsca_new(const struct tlsca_config *cfg, char *err, size_t errlen);
/* Frees every cached leaf and both keys (the memory is cleansed by
 * OpenSSL's key free). NULL is fine. */
void tlsca_free(struct tlsca *ca);

/* The CA certificate, borrowed until tlsca_free (for trust bundles). */
X509 *tlsca_cert(const struct tlsca *ca);
/* The CA certificate as PEM into a malloc'd, NUL-terminated string the
 * caller frees; *len (may be NULL) its length. NULL when out of memory. */
char *tlsca_cert_pem(const struct tlsca *ca, size_t *len);
/* The leaves' private key, borrowed until tlsca_free: the key the
 * terminating side presents with every leaf. */
EVP_PKEY *tlsca_leaf_key(const struct tlsca *ca);

enum tlsca_status {
	TLSCA_OK = 0,
	TLSCA_BAD_NAME, /* not a normalised DNS name (policy_name_normalize) */
	TLSCA_LIMIT,    /* the task's minting limit is spent */
	TLSCA_ERROR,    /* OpenSSL failed (out of memory) */
};

/* The leaf for name, a normalised DNS name (lowercase, no trailing dot,
 * no wildcard): from the cache while it has more than a tenth of its
 * validity left, else minted (counted). On TLSCA_OK *der and *len are
 * the certificate in DER, borrowed until the next tlsca_leaf or
 * tlsca_free (the form it travels in to the process that presents it);
 * else NULL and 0. */
enum tlsca_status tlsca_leaf(struct tlsca *ca, const char *name, const unsigned char **der,
                             size_t *len);

/* Counters, for the log's task-end and for tests. */
struct tlsca_stats {
	uint64_t hits;    /* leaves served from the cache */
	uint64_t minted;  /* leaves signed */
	uint64_t refused; /* TLSCA_LIMIT answers */
	size_t cached;    /* leaves in the cache now */
};
void tlsca_stats(const struct tlsca *ca, struct tlsca_stats *out);

/* A one-word name of a status, for messages. */
const char *tlsca_status_name(enum tlsca_status s);

#endif
