/* The logger's message layout (logmsg.h): pure, bounded, fuzzed. */
#include "elog/logmsg.h"

#include <string.h>

/* The header and the checks every message shares. */
static enum elog_logmsg_parse
logmsg_frame(const void *buf, size_t len, struct elog_logmsg *m)
{
	struct elog_logmsg_hdr h;

	if (len < sizeof(h))
		return ELOG_LOGMSG_E_SHORT;
	if (len > ELOG_LOGMSG_MAX)
		return ELOG_LOGMSG_E_TOO_LONG;
	memcpy(&h, buf, sizeof(h)); /* the datagram need not be aligned */
	if (h.lm_len != len - sizeof(h))
		return ELOG_LOGMSG_E_LENGTH;
	m->type = (enum elog_logmsg_type)h.lm_type;
	m->body = (const char *)buf + sizeof(h);
	m->len = h.lm_len;
	return ELOG_LOGMSG_OK;
}

enum elog_logmsg_parse
elog_logmsg_parse_input(const void *buf, size_t len, struct elog_logmsg *m)
{
	enum elog_logmsg_parse p = logmsg_frame(buf, len, m);

	if (p != ELOG_LOGMSG_OK)
		return p;
	if (m->type == ELOG_LOGMSG_SYNC)
		return m->len == 0 ? ELOG_LOGMSG_OK : ELOG_LOGMSG_E_BODY;
	if (m->type != ELOG_LOGMSG_LINE)
		return ELOG_LOGMSG_E_TYPE;
	if (m->len == 0)
		return ELOG_LOGMSG_E_EMPTY;
	if (m->body[0] != '{')
		return ELOG_LOGMSG_E_NOT_OBJECT;
	for (size_t i = 0; i < m->len; i++) {
		unsigned char c = (unsigned char)m->body[i];

		if (c < 0x20 || c == 0x7f)
			return ELOG_LOGMSG_E_CONTROL;
	}
	/* The chain's fields are the logger's to add: a sender's own "seq"
	 * or "prev" would be the one a reader takes (the first of duplicate
	 * keys). Every string in a line is escaped, so an unescaped quote is
	 * structure, and these bytes can only be the keys. */
	if (memmem(m->body, m->len, "\"seq\":", 6) != NULL ||
	    memmem(m->body, m->len, "\"prev\":", 7) != NULL)
		return ELOG_LOGMSG_E_CHAIN;
	return ELOG_LOGMSG_OK;
}

enum elog_logmsg_parse
elog_logmsg_parse_status(const void *buf, size_t len, struct elog_logmsg *m)
{
	enum elog_logmsg_parse p = logmsg_frame(buf, len, m);

	if (p != ELOG_LOGMSG_OK)
		return p;
	switch (m->type) {
	case ELOG_LOGMSG_DONE:
	case ELOG_LOGMSG_SYNC:
		return m->len == 0 ? ELOG_LOGMSG_OK : ELOG_LOGMSG_E_BODY;
	case ELOG_LOGMSG_FAILED:
		if (m->len == 0 || m->len > ELOG_LOGMSG_REASON_MAX)
			return ELOG_LOGMSG_E_BODY;
		return ELOG_LOGMSG_OK;
	default:
		return ELOG_LOGMSG_E_TYPE;
	}
}

const char *
elog_logmsg_error(enum elog_logmsg_parse p)
{
	switch (p) {
	case ELOG_LOGMSG_OK:
		return "ok";
	case ELOG_LOGMSG_E_SHORT:
		return "shorter than its header";
	case ELOG_LOGMSG_E_TOO_LONG:
		return "longer than the longest line";
	case ELOG_LOGMSG_E_LENGTH:
		return "its length field is not its length";
	case ELOG_LOGMSG_E_TYPE:
		return "a message type not taken here";
	case ELOG_LOGMSG_E_EMPTY:
		return "an empty line";
	case ELOG_LOGMSG_E_NOT_OBJECT:
		return "a line that is not a JSON object";
	case ELOG_LOGMSG_E_CONTROL:
		return "a line with a raw control byte (a newline would forge a line)";
	case ELOG_LOGMSG_E_BODY:
		return "a status with a malformed body";
	case ELOG_LOGMSG_E_CHAIN:
		return "a line that carries its own seq or prev (the chain is the logger's)";
	}
	return "unknown";
}
