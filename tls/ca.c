/* A task's CA and its leaves (tls/ca.h). relayd's ca.c keeps its keys in
 * a process of their own for the same reason the broker holds this one.
 *
 * The leaf cache is a hash table over a doubly linked LRU list, sized at
 * creation and never grown: cache_max entries at most, the least recently
 * used evicted first. The hash is FNV-1a keyed by a random per-CA seed, so
 * a task cannot aim its names at one bucket. */
#include "tls/ca.h"

#include "tls/error.h"

#include "policy/policy.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

/* A normalised name fits in 254 bytes (policy_name_normalize). */
#define LEAF_NAME_MAX 256
/* RFC 5280's upper bound of a common name; a longer name goes in the
 * subjectAltName only. */
#define CN_MAX 64

struct leaf {
	char name[LEAF_NAME_MAX];
	unsigned char *der;  /* owned: the certificate, DER */
	size_t der_len;
	time_t minted_at;    /* the clock when it was signed */
	time_t fresh_until;  /* served from the cache until then */
	uint64_t hash;
	struct leaf *hnext;  /* bucket chain */
	struct leaf *newer;  /* LRU list: towards the most recent */
	struct leaf *older;
};

struct tlsca {
	EVP_PKEY *ca_key;   /* owned; never leaves this file */
	EVP_PKEY *leaf_key; /* owned */
	unsigned char *leaf_point; /* owned: its public point, uncompressed */
	size_t leaf_point_len;
	X509 *ca_cert;      /* owned */
	EVP_MD *sha256;     /* owned: fetched once, not per signature */
	/* The extensions every leaf carries, built once (X509_add_ext copies
	 * them): basicConstraints, keyUsage, extendedKeyUsage, the
	 * authorityKeyIdentifier of ca_cert. Owned. */
	X509_EXTENSION *leaf_ext[4];
	unsigned cache_max, mint_limit;
	uint32_t leaf_secs;
	time_t (*now)(void);
	uint64_t seed;
	struct leaf **buckets; /* n_buckets, a power of two */
	size_t n_buckets;
	struct leaf *newest, *oldest;
	size_t n_cached;
	struct tlsca_stats st;
};

static time_t
clock_now(void)
{
	return time(NULL);
}

static EVP_PKEY *
key_p256(void)
{
	return EVP_EC_gen("P-256");
}

/* A random positive serial of 128 bits (RFC 5280 4.1.2.2: at most 20
 * octets, positive; CA/Browser Forum: at least 64 bits of randomness). */
static int
serial_set(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn;
	int rc = -1;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f; /* positive as a DER INTEGER, still 127 random bits */
	b[0] |= 0x40; /* and always 16 octets long */
	if ((bn = BN_bin2bn(b, sizeof(b), NULL)) == NULL)
		return -1;
	if (BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL)
		rc = 0;
	BN_free(bn);
	return rc;
}

/* One extension from a constant config string (never sandbox bytes). */
static int
ext_add(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok;

	if (ext == NULL)
		return -1;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

/* subjectAltName = DNS:name, built as a structure, not parsed from text. */
static int
san_add(X509 *x, const char *name, bool critical)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_IA5STRING *ia5 = ASN1_IA5STRING_new();
	int rc = -1;

	if (gens == NULL || g == NULL || ia5 == NULL ||
	    ASN1_STRING_set(ia5, name, (int)strlen(name)) != 1)
		goto out;
	GENERAL_NAME_set0_value(g, GEN_DNS, ia5);
	ia5 = NULL;
	if (sk_GENERAL_NAME_push(gens, g) <= 0)
		goto out;
	g = NULL;
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical ? 1 : 0, 0) == 1)
		rc = 0;
out:
	ASN1_IA5STRING_free(ia5);
	GENERAL_NAME_free(g);
	GENERAL_NAMES_free(gens);
	return rc;
}

/* The parts every certificate here shares: v3, a random serial, validity
 * from now - TLSCA_BACKDATE_SECS to now + secs, the subject, the issuer's
 * name. The caller sets the public key. */
static X509 *
cert_begin(time_t now, uint32_t secs, X509_NAME *subject, X509 *issuer)
{
	X509 *x = X509_new();

	if (x == NULL || X509_set_version(x, X509_VERSION_3) != 1 || serial_set(x) < 0 ||
	    X509_time_adj_ex(X509_getm_notBefore(x), 0, -TLSCA_BACKDATE_SECS, &now) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), 0, (long)secs, &now) == NULL ||
	    X509_set_subject_name(x, subject) != 1 ||
	    X509_set_issuer_name(x, issuer != NULL ? X509_get_subject_name(issuer) : subject) != 1) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static X509 *
ca_cert_make(struct tlsca *ca, const char *label, uint32_t secs)
{
	X509_NAME *subject = X509_NAME_new();
	X509V3_CTX ctx;
	X509 *x = NULL;

	if (subject == NULL ||
	    X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8, (const unsigned char *)"airlock",
	                               -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, (const unsigned char *)label,
	                               -1, -1, 0) != 1)
		goto fail;
	if ((x = cert_begin(ca->now(), secs, subject, NULL)) == NULL ||
	    X509_set_pubkey(x, ca->ca_key) != 1)
		goto fail;
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (ext_add(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    ext_add(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    ext_add(x, &ctx, NID_subject_key_identifier, "hash") < 0 ||
	    X509_sign(x, ca->ca_key, ca->sha256) <= 0)
		goto fail;
	X509_NAME_free(subject);
	return x;
fail:
	X509_free(x);
	X509_NAME_free(subject);
	return NULL;
}

/* The leaves' shared extensions, from constant text, once. */
static int
leaf_ext_make(struct tlsca *ca)
{
	static const struct {
		int nid;
		const char *value;
	} exts[] = {
	        {NID_basic_constraints, "critical,CA:FALSE"},
	        {NID_key_usage, "critical,digitalSignature"},
	        {NID_ext_key_usage, "serverAuth"},
	        {NID_authority_key_identifier, "keyid:always"},
	};
	X509V3_CTX ctx;

	_Static_assert(sizeof(exts) / sizeof(exts[0]) == sizeof(ca->leaf_ext) / sizeof(ca->leaf_ext[0]),
	               "one slot per leaf extension");
	X509V3_set_ctx(&ctx, ca->ca_cert, NULL, NULL, NULL, 0);
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++)
		if ((ca->leaf_ext[i] = X509V3_EXT_conf_nid(NULL, &ctx, exts[i].nid, exts[i].value)) ==
		    NULL)
			return -1;
	return 0;
}

/* The leaf key's SubjectPublicKeyInfo, from its encoded point. Not
 * X509_set_pubkey: OpenSSL 3.0 encodes and decodes a provider key through
 * its encoder and decoder lookups each time, three quarters of a mint's
 * CPU (perf, bench/bench_tls.c). The X509 made this way has no decoded
 * key (X509_get0_pubkey fails on it): it is only signed and encoded, and
 * whoever parses the DER gets a whole certificate. */
static int
leaf_pubkey_set(struct tlsca *ca, X509 *x)
{
	unsigned char *point = OPENSSL_memdup(ca->leaf_point, ca->leaf_point_len);

	if (point == NULL)
		return -1;
	if (X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x), OBJ_nid2obj(NID_X9_62_id_ecPublicKey),
	                           V_ASN1_OBJECT, OBJ_nid2obj(NID_X9_62_prime256v1), point,
	                           (int)ca->leaf_point_len) != 1) {
		OPENSSL_free(point);
		return -1;
	}
	return 0;
}

static X509 *
leaf_make(struct tlsca *ca, const char *name, time_t now)
{
	size_t len = strlen(name);
	X509_NAME *subject = X509_NAME_new();
	X509 *x = NULL;

	/* A name too long for a common name has an empty subject, and then
	 * its subjectAltName must be critical (RFC 5280 4.2.1.6). */
	if (subject == NULL ||
	    (len <= CN_MAX && X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
	                                                 (const unsigned char *)name, (int)len, -1,
	                                                 0) != 1))
		goto fail;
	if ((x = cert_begin(now, ca->leaf_secs, subject, ca->ca_cert)) == NULL ||
	    leaf_pubkey_set(ca, x) < 0)
		goto fail;
	for (size_t i = 0; i < sizeof(ca->leaf_ext) / sizeof(ca->leaf_ext[0]); i++)
		if (X509_add_ext(x, ca->leaf_ext[i], -1) != 1)
			goto fail;
	if (san_add(x, name, len > CN_MAX) < 0 || X509_sign(x, ca->ca_key, ca->sha256) <= 0)
		goto fail;
	X509_NAME_free(subject);
	return x;
fail:
	X509_free(x);
	X509_NAME_free(subject);
	return NULL;
}

struct tlsca *
tlsca_new(const struct tlsca_config *cfg, char *err, size_t errlen)
{
	const char *label = cfg->label != NULL && cfg->label[0] != '\0' ? cfg->label
	                                                                 : "airlock task CA";
	uint32_t ca_secs = cfg->ca_secs != 0 ? cfg->ca_secs : TLSCA_DEFAULT_CA_SECS;
	struct tlsca *ca;

	if (cfg->cache_max > TLSCA_LIMIT_MAX || cfg->mint_limit > TLSCA_LIMIT_MAX) {
		snprintf(err, errlen, "tls ca: cache or mint limit above %u", TLSCA_LIMIT_MAX);
		return NULL;
	}
	if (strlen(label) > CN_MAX) {
		snprintf(err, errlen, "tls ca: label longer than %d bytes", CN_MAX);
		return NULL;
	}
	if ((ca = calloc(1, sizeof(*ca))) == NULL) {
		snprintf(err, errlen, "tls ca: out of memory");
		return NULL;
	}
	ca->cache_max = cfg->cache_max != 0 ? cfg->cache_max : TLSCA_DEFAULT_CACHE;
	ca->mint_limit = cfg->mint_limit != 0 ? cfg->mint_limit : TLSCA_DEFAULT_MINT_LIMIT;
	ca->leaf_secs = cfg->leaf_secs != 0 ? cfg->leaf_secs : TLSCA_DEFAULT_LEAF_SECS;
	ca->now = cfg->now != NULL ? cfg->now : clock_now;
	if (ca_secs < ca->leaf_secs) {
		snprintf(err, errlen, "tls ca: the CA's validity is shorter than a leaf's");
		goto fail;
	}
	/* Buckets: the next power of two at or above twice the cache. */
	for (ca->n_buckets = 16; ca->n_buckets < 2 * (size_t)ca->cache_max; ca->n_buckets *= 2)
		;
	if ((ca->buckets = calloc(ca->n_buckets, sizeof(*ca->buckets))) == NULL) {
		snprintf(err, errlen, "tls ca: out of memory");
		goto fail;
	}
	if (RAND_bytes((unsigned char *)&ca->seed, sizeof(ca->seed)) != 1) {
		tls_error(err, errlen, "tls ca: random seed");
		goto fail;
	}
	if ((ca->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL) {
		tls_error(err, errlen, "tls ca: SHA-256");
		goto fail;
	}
	if ((ca->ca_key = key_p256()) == NULL || (ca->leaf_key = key_p256()) == NULL ||
	    (ca->leaf_point_len = EVP_PKEY_get1_encoded_public_key(ca->leaf_key,
	                                                           &ca->leaf_point)) == 0) {
		tls_error(err, errlen, "tls ca: P-256 key");
		goto fail;
	}
	if ((ca->ca_cert = ca_cert_make(ca, label, ca_secs)) == NULL) {
		tls_error(err, errlen, "tls ca: CA certificate");
		goto fail;
	}
	if (leaf_ext_make(ca) < 0) {
		tls_error(err, errlen, "tls ca: leaf extensions");
		goto fail;
	}
	return ca;
fail:
	tlsca_free(ca);
	return NULL;
}

void
tlsca_free(struct tlsca *ca)
{
	struct leaf *l, *next;

	if (ca == NULL)
		return;
	for (l = ca->newest; l != NULL; l = next) {
		next = l->older;
		OPENSSL_free(l->der);
		free(l);
	}
	free(ca->buckets);
	for (size_t i = 0; i < sizeof(ca->leaf_ext) / sizeof(ca->leaf_ext[0]); i++)
		X509_EXTENSION_free(ca->leaf_ext[i]);
	EVP_MD_free(ca->sha256);
	OPENSSL_free(ca->leaf_point);
	X509_free(ca->ca_cert);
	EVP_PKEY_free(ca->leaf_key);
	EVP_PKEY_free(ca->ca_key);
	free(ca);
}

X509 *
tlsca_cert(const struct tlsca *ca)
{
	return ca->ca_cert;
}

EVP_PKEY *
tlsca_leaf_key(const struct tlsca *ca)
{
	return ca->leaf_key;
}

char *
tlsca_cert_pem(const struct tlsca *ca, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	long n;

	if (b == NULL)
		return NULL;
	if (PEM_write_bio_X509(b, ca->ca_cert) == 1 && (n = BIO_get_mem_data(b, &data)) > 0 &&
	    (out = malloc((size_t)n + 1)) != NULL) {
		memcpy(out, data, (size_t)n);
		out[n] = '\0';
		if (len != NULL)
			*len = (size_t)n;
	}
	BIO_free(b);
	return out;
}

/* ---- the cache ---- */

static uint64_t
name_hash(const struct tlsca *ca, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull ^ ca->seed;

	for (const unsigned char *p = (const unsigned char *)name; *p != '\0'; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return h ^ (h >> 29);
}

static void
lru_unlink(struct tlsca *ca, struct leaf *l)
{
	if (l->newer != NULL)
		l->newer->older = l->older;
	else
		ca->newest = l->older;
	if (l->older != NULL)
		l->older->newer = l->newer;
	else
		ca->oldest = l->newer;
	l->newer = l->older = NULL;
}

static void
lru_push(struct tlsca *ca, struct leaf *l)
{
	l->older = ca->newest;
	l->newer = NULL;
	if (ca->newest != NULL)
		ca->newest->newer = l;
	ca->newest = l;
	if (ca->oldest == NULL)
		ca->oldest = l;
}

static struct leaf **
bucket_slot(struct tlsca *ca, const char *name, uint64_t hash)
{
	struct leaf **pp = &ca->buckets[hash & (ca->n_buckets - 1)];

	while (*pp != NULL && ((*pp)->hash != hash || strcmp((*pp)->name, name) != 0))
		pp = &(*pp)->hnext;
	return pp;
}

/* Take l out of the table and the list and free it. */
static void
leaf_drop(struct tlsca *ca, struct leaf *l)
{
	struct leaf **pp = bucket_slot(ca, l->name, l->hash);

	*pp = l->hnext;
	lru_unlink(ca, l);
	OPENSSL_free(l->der);
	free(l);
	ca->n_cached--;
}

/* name must be what policy_name_normalize makes of it, and a DNS name
 * (no IP literal: TLS carries none in SNI, RFC 6066 3). */
static bool
name_ok(const char *name)
{
	char norm[LEAF_NAME_MAX];
	const char *why;
	const char *last;

	if (strnlen(name, LEAF_NAME_MAX) >= LEAF_NAME_MAX ||
	    policy_name_normalize(name, norm, sizeof(norm), &why) < 0 || strcmp(norm, name) != 0)
		return false;
	/* A name whose last label is all digits is an IPv4 literal or not a
	 * host name at all. */
	last = strrchr(name, '.');
	last = last != NULL ? last + 1 : name;
	return strspn(last, "0123456789") != strlen(last);
}

enum tlsca_status
tlsca_leaf(struct tlsca *ca, const char *name, const unsigned char **der, size_t *len)
{
	time_t now = ca->now();
	uint64_t hash;
	struct leaf **pp, *l;
	unsigned char *out = NULL;
	X509 *x;
	int n;

	*der = NULL;
	*len = 0;
	if (!name_ok(name))
		return TLSCA_BAD_NAME;
	hash = name_hash(ca, name);
	pp = bucket_slot(ca, name, hash);
	if ((l = *pp) != NULL) {
		/* Within its validity (a clock set back past notBefore
		 * makes a new one) and with a tenth of it still left. */
		if (now < l->fresh_until && now >= l->minted_at - TLSCA_BACKDATE_SECS) {
			lru_unlink(ca, l);
			lru_push(ca, l);
			*der = l->der;
			*len = l->der_len;
			ca->st.hits++;
			return TLSCA_OK;
		}
		leaf_drop(ca, l); /* stale, or the clock went back */
	}
	if (ca->st.minted >= ca->mint_limit) {
		ca->st.refused++;
		return TLSCA_LIMIT;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return TLSCA_ERROR;
	x = leaf_make(ca, name, now);
	n = x != NULL ? i2d_X509(x, &out) : -1;
	X509_free(x);
	if (n <= 0) {
		ERR_clear_error();
		free(l);
		return TLSCA_ERROR;
	}
	ca->st.minted++;
	if (ca->n_cached >= ca->cache_max)
		leaf_drop(ca, ca->oldest);
	memcpy(l->name, name, strlen(name) + 1);
	l->der = out;
	l->der_len = (size_t)n;
	l->hash = hash;
	l->minted_at = now;
	l->fresh_until = now + (time_t)(ca->leaf_secs - ca->leaf_secs / 10);
	pp = bucket_slot(ca, name, hash); /* the eviction may have moved it */
	l->hnext = *pp;
	*pp = l;
	lru_push(ca, l);
	ca->n_cached++;
	*der = l->der;
	*len = l->der_len;
	return TLSCA_OK;
}

void
tlsca_stats(const struct tlsca *ca, struct tlsca_stats *out)
{
	*out = ca->st;
	out->cached = ca->n_cached;
}

const char *
tlsca_status_name(enum tlsca_status s)
{
	switch (s) {
	case TLSCA_OK:
		return "ok";
	case TLSCA_BAD_NAME:
		return "bad-name";
	case TLSCA_LIMIT:
		return "mint-limit";
	case TLSCA_ERROR:
		return "error";
	}
	return "unknown";
}
