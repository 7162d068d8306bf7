/* The writer's side of the egress log's hash chain (chain.h). */
#include "elog/chain.h"

#include <string.h>

#include <openssl/evp.h>

/* The digest fetched once and one context reused: EVP_sha256() with
 * EVP_Digest looks the algorithm up in the provider and allocates a
 * context on every call, about half the cost of hashing a line (bench/
 * proxy.md). Every process that hashes is single-threaded, and the two
 * live until exit: the logger hashes until its last line. */
static EVP_MD *sha256_md;
static EVP_MD_CTX *sha256_ctx;

int
elog_sha256(const void *data, size_t len, unsigned char out[ELOG_SHA256_LEN])
{
	unsigned int n = 0;

	if (sha256_md == NULL && (sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL)
		return -1;
	if (sha256_ctx == NULL && (sha256_ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	if (EVP_DigestInit_ex2(sha256_ctx, sha256_md, NULL) != 1 ||
	    EVP_DigestUpdate(sha256_ctx, data, len) != 1 ||
	    EVP_DigestFinal_ex(sha256_ctx, out, &n) != 1 || n != ELOG_SHA256_LEN)
		return -1;
	return 0;
}

void
elog_sha256_hex(const unsigned char h[ELOG_SHA256_LEN], char out[ELOG_SHA256_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < ELOG_SHA256_LEN; i++) {
		out[2 * i] = digits[h[i] >> 4];
		out[2 * i + 1] = digits[h[i] & 0xf];
	}
	out[ELOG_SHA256_HEX] = '\0';
}

void
elog_chain_init(struct elog_chain *c)
{
	memset(c, 0, sizeof(*c));
}

void
elog_chain_restart(struct elog_chain *c)
{
	c->ch_seq = 0;
	memset(c->ch_prev, 0, sizeof(c->ch_prev));
}

int
elog_chain_seal(struct elog_chain *c, struct elog_buf *b)
{
	char hex[ELOG_SHA256_HEX + 1];

	elog_buf_puts(b, ",\"seq\":");
	elog_buf_u64(b, c->ch_seq);
	elog_buf_puts(b, ",\"prev\":\"");
	/* The genesis is all zeros: the zeroed prev of a fresh chain hexes
	 * to it. */
	elog_sha256_hex(c->ch_prev, hex);
	elog_buf_put(b, hex, ELOG_SHA256_HEX);
	elog_buf_puts(b, "\"}\n");
	if (b->overflow)
		return -1;
	return elog_sha256(b->data, b->len - 1, c->ch_sealed);
}

size_t
elog_chain_suffix_len(const struct elog_chain *c)
{
	size_t digits = 1;

	for (uint64_t v = c->ch_seq; v >= 10; v /= 10)
		digits++;
	return sizeof(",\"seq\":,\"prev\":\"\"}\n") - 1 + digits + ELOG_SHA256_HEX;
}

void
elog_chain_commit(struct elog_chain *c)
{
	memcpy(c->ch_prev, c->ch_sealed, sizeof(c->ch_prev));
	c->ch_seq++;
}
