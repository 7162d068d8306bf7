/* Fuzz the logger's datagram parser (elog/logmsg.c) with what it then
 * does to a line it takes (elog/chain.c's sealing, as logger.c does).
 * Properties checked, beyond "no crash, no UB":
 *  - a datagram taken as a LINE is a whole object's start: it begins with
 *    '{', holds no control byte, and its header's length is the
 *    datagram's; sealed, it is exactly one line (one newline, at the end)
 *    within ELOG_LINE_MAX;
 *  - the status parser takes only FAILED, DONE and SYNC, with bodies in
 *    their bounds;
 *  - the input with a true length past what was read (recv's MSG_TRUNC)
 *    is refused as too long, never read past. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elog/buf.h"
#include "elog/chain.h"
#include "elog/logmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char line[ELOG_LINE_MAX];
	struct elog_logmsg m;
	struct elog_chain c;
	struct elog_buf b;
	enum elog_logmsg_parse p;
	/* A copy of exactly size bytes, so ASan sees any read past them. */
	uint8_t *copy = malloc(size > 0 ? size : 1);

	if (copy == NULL)
		return 0;
	if (size > 0)
		memcpy(copy, data, size);
	p = elog_logmsg_parse_input(copy, size, &m);
	if (p == ELOG_LOGMSG_OK && m.type == ELOG_LOGMSG_LINE) {
		struct elog_logmsg_hdr h;

		memcpy(&h, copy, sizeof(h));
		if (m.len == 0 || m.len != h.lm_len || m.len + sizeof(h) != size ||
		    m.len > ELOG_LOGMSG_BODY_MAX || m.body[0] != '{')
			abort();
		for (size_t i = 0; i < m.len; i++)
			if ((unsigned char)m.body[i] < 0x20 || (unsigned char)m.body[i] == 0x7f)
				abort();
		elog_chain_init(&c);
		c.ch_seq = UINT64_MAX; /* the widest seq */
		elog_buf_init(&b, line, sizeof(line));
		elog_buf_put(&b, m.body, m.len);
		if (elog_chain_seal(&c, &b) != 0 || b.len > ELOG_LINE_MAX ||
		    memchr(b.data, '\n', b.len - 1) != NULL || b.data[b.len - 1] != '\n')
			abort();
	} else if (p == ELOG_LOGMSG_OK && (m.type != ELOG_LOGMSG_SYNC || m.len != 0)) {
		abort();
	}
	p = elog_logmsg_parse_status(copy, size, &m);
	if (p == ELOG_LOGMSG_OK) {
		if (m.type == ELOG_LOGMSG_FAILED) {
			if (m.len == 0 || m.len > ELOG_LOGMSG_REASON_MAX)
				abort();
		} else if ((m.type != ELOG_LOGMSG_DONE && m.type != ELOG_LOGMSG_SYNC) || m.len != 0)
			abort();
	}
	/* A datagram longer than the buffer it was read into. */
	if (elog_logmsg_parse_input(copy, ELOG_LOGMSG_MAX + 1 + size, &m) != ELOG_LOGMSG_E_TOO_LONG)
		abort();
	free(copy);
	return 0;
}
