/* The egress log's hash chain (docs/log.md, "The hash chain"). Every line
 * the writer emits ends in two fields: "seq", 0 at task-start and one more
 * on each line after it, and "prev", the SHA-256 (lowercase hex) of the
 * previous line's bytes as written, newline excluded; task-start's prev is
 * ELOG_CHAIN_GENESIS. Editing, deleting, inserting or reordering a line
 * then breaks the chain at or just after it (`airlock log verify`).
 *
 * This object is the writer's whole chain state, so that whichever process
 * alone holds the log fd owns it: the logger (elog/logger.h) in airlock run
 * and airlock proxy, the writer itself for a log it writes directly.
 * A line is sealed before it is written and becomes prev only once the
 * sink took it: a line the budget drops is never sealed, and one whose
 * write fails is not committed (the log has failed; nothing follows it). */
#ifndef AIRLOCK_ELOG_CHAIN_H
#define AIRLOCK_ELOG_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elog/buf.h"

#define ELOG_SHA256_LEN 32
/* Hex digits of a SHA-256, without the NUL. */
#define ELOG_SHA256_HEX 64
/* task-start's prev: 64 zeros. A run's chain starts at its own task-start,
 * so several runs appending to one file are separate chains. */
#define ELOG_CHAIN_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"
/* The most bytes elog_chain_seal appends: the two fields, "}" and the
 * newline. The writer keeps this much room free in every line. */
#define ELOG_CHAIN_SUFFIX_MAX                                                                      \
	(sizeof(",\"seq\":18446744073709551615,\"prev\":\"\"}\n") - 1 + ELOG_SHA256_HEX)

struct elog_chain {
	uint64_t ch_seq;                          /* the next line's seq */
	unsigned char ch_prev[ELOG_SHA256_LEN];   /* the last committed line's hash */
	unsigned char ch_sealed[ELOG_SHA256_LEN]; /* the sealed, not yet committed line's */
};

/* SHA-256 of data[0..len) (OpenSSL's low-level SHA-256: it loads no
 * provider and opens no file, elog/chain.c). 0, or -1 when it fails. */
int elog_sha256(const void *data, size_t len, unsigned char out[ELOG_SHA256_LEN]);
/* out[0..64) = lowercase hex of h, NUL at out[64]. */
void elog_sha256_hex(const unsigned char h[ELOG_SHA256_LEN], char out[ELOG_SHA256_HEX + 1]);

/* A chain with no line yet: the first line sealed gets seq 0 and the
 * genesis prev, like a task-start. */
void elog_chain_init(struct elog_chain *c);
/* A task-start begins a new chain: seq 0, prev the genesis. */
void elog_chain_restart(struct elog_chain *c);
/* Close the line being built in b (an object whose '}' is not written
 * yet, with ELOG_CHAIN_SUFFIX_MAX bytes free) with seq, prev, '}' and the
 * newline, and hash it. 0, or -1 when the hash failed or b overflowed:
 * the line must then not be written. */
int elog_chain_seal(struct elog_chain *c, struct elog_buf *b);
/* The bytes elog_chain_seal would append now (the budget counts them). */
size_t elog_chain_suffix_len(const struct elog_chain *c);
/* The sealed line was written (or queued, in order): it is now prev. */
void elog_chain_commit(struct elog_chain *c);

#endif
