/* The messages between a serving process and the logger (elog/logger.h),
 * over a SOCK_SEQPACKET socketpair: one message per datagram, a fixed
 * 8-byte header and at most ELOG_LOGMSG_BODY_MAX bytes after it. Every
 * length is checked before use, the header's against the datagram's.
 *
 *  - LINE, serving process -> logger: one log line as the writer built it,
 *    an object whose '}' is not written yet (elog/chain.h); the logger
 *    closes it with seq, prev, '}' and the newline. The body must be
 *    non-empty, begin with '{' and hold no byte below 0x20 and no DEL: the
 *    writer escapes every such byte (docs/log.md), so a raw one, above all
 *    a newline that would start a line of the sender's own, is forged.
 *  - FAILED, logger -> serving process: the log has failed; the body is the
 *    reason, one line of text, for the run's last message. The logger exits
 *    after it.
 *  - DONE, logger -> serving process: the serving process closed its end,
 *    every line is written; the logger exits 0 after it. No body.
 *  - SYNC, both ways, no body: the serving process asks, the logger
 *    answers once every line before the question is written (or FAILED).
 *    For task-start: a log that cannot be written stops the run before
 *    the command starts.
 *
 * The parser is pure (fuzzed: tests/fuzz/fuzz_logmsg.c). */
#ifndef AIRLOCK_ELOG_LOGMSG_H
#define AIRLOCK_ELOG_LOGMSG_H

#include <stddef.h>
#include <stdint.h>

#include "elog/chain.h"
#include "elog/elog.h"

enum elog_logmsg_type {
	ELOG_LOGMSG_LINE = 1,
	ELOG_LOGMSG_FAILED = 2,
	ELOG_LOGMSG_DONE = 3,
	ELOG_LOGMSG_SYNC = 4,
};

/* Host byte order: both ends are the same program on the same machine. */
struct elog_logmsg_hdr {
	uint32_t lm_type; /* enum elog_logmsg_type */
	uint32_t lm_len;  /* bytes after the header */
};

/* The longest body: a line, with the chain's fields the logger adds,
 * stays within ELOG_LINE_MAX. A FAILED reason is far shorter. */
#define ELOG_LOGMSG_BODY_MAX (ELOG_LINE_MAX - ELOG_CHAIN_SUFFIX_MAX)
#define ELOG_LOGMSG_MAX      (sizeof(struct elog_logmsg_hdr) + ELOG_LOGMSG_BODY_MAX)
/* The longest FAILED reason (the sink's error text fits). */
#define ELOG_LOGMSG_REASON_MAX 255

/* The logger's own wait, at the end, for a slow reader to take what it
 * still holds; the serving process waits a second more for its DONE. */
#define ELOG_LOGMSG_DRAIN_MS 5000
/* How long the serving process waits for the answer to a SYNC (at
 * task-start): a bound for a loaded machine, not a stall rule. */
#define ELOG_LOGMSG_SYNC_MS 5000

/* One value per way a datagram is refused (elog_logmsg_error says it). */
enum elog_logmsg_parse {
	ELOG_LOGMSG_OK = 0,
	ELOG_LOGMSG_E_SHORT,      /* shorter than the header (zero-length included) */
	ELOG_LOGMSG_E_TOO_LONG,   /* longer than ELOG_LOGMSG_MAX */
	ELOG_LOGMSG_E_LENGTH,     /* lm_len is not the datagram's length after the header */
	ELOG_LOGMSG_E_TYPE,       /* a type this end does not take */
	ELOG_LOGMSG_E_EMPTY,      /* a LINE with no body */
	ELOG_LOGMSG_E_NOT_OBJECT, /* a LINE that does not begin with '{' */
	ELOG_LOGMSG_E_CONTROL,    /* a LINE with a raw control byte (a newline: a forged line) */
	ELOG_LOGMSG_E_BODY,       /* a DONE or SYNC with a body, a FAILED reason too long or empty */
	ELOG_LOGMSG_E_CHAIN,      /* a LINE that carries "seq" or "prev" (the logger's to add) */
};

/* A parsed message: type and body (pointing into the datagram). */
struct elog_logmsg {
	enum elog_logmsg_type type;
	const char *body; /* borrowed from the datagram */
	size_t len;
};

/* Check one datagram of len bytes (len is what recv(2) returned with
 * MSG_TRUNC: the datagram's true length, which may exceed what was read;
 * buf holds at least min(len, ELOG_LOGMSG_MAX) bytes) as the logger takes
 * it: LINE or SYNC. */
enum elog_logmsg_parse elog_logmsg_parse_input(const void *buf, size_t len,
                                               struct elog_logmsg *m);
/* The same for the serving process's side: FAILED, DONE or SYNC. */
enum elog_logmsg_parse elog_logmsg_parse_status(const void *buf, size_t len,
                                                struct elog_logmsg *m);
/* Why a datagram was refused, a few words. */
const char *elog_logmsg_error(enum elog_logmsg_parse p);

#endif
