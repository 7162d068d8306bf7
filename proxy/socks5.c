/* SOCKS5 messages from a client (proxy/socks5.h). */
#include "proxy/socks5.h"

#include <netinet/in.h>
#include <string.h>

enum socks5_result
socks5_greeting_parse(const uint8_t *buf, size_t len, struct socks5_greeting *out,
                      size_t *used)
{
	size_t n;

	*out = (struct socks5_greeting){0};
	if (len >= 1 && buf[0] != SOCKS5_VERSION)
		return SOCKS5_BAD;
	if (len < 2)
		return SOCKS5_MORE;
	n = buf[1];
	if (n == 0)
		return SOCKS5_BAD; /* offers nothing at all */
	if (len < 2 + n)
		return SOCKS5_MORE;
	for (size_t i = 0; i < n; i++) {
		out->none |= buf[2 + i] == SOCKS5_M_NONE;
		out->userpass |= buf[2 + i] == SOCKS5_M_USERPASS;
	}
	*used = 2 + n;
	return SOCKS5_DONE;
}

enum socks5_result
socks5_userpass_parse(const uint8_t *buf, size_t len, struct socks5_userpass *out, size_t *used)
{
	size_t ulen, plen;

	out->user[0] = '\0';
	if (len >= 1 && buf[0] != 1)
		return SOCKS5_BAD; /* RFC 1929's version is 1 */
	if (len < 2)
		return SOCKS5_MORE;
	ulen = buf[1];
	if (ulen == 0)
		return SOCKS5_BAD;
	if (len < 2 + ulen + 1)
		return SOCKS5_MORE;
	if (memchr(buf + 2, '\0', ulen) != NULL)
		return SOCKS5_BAD;
	plen = buf[2 + ulen];
	if (len < 3 + ulen + plen)
		return SOCKS5_MORE;
	memcpy(out->user, buf + 2, ulen);
	out->user[ulen] = '\0';
	*used = 3 + ulen + plen;
	return SOCKS5_DONE;
}

enum socks5_result
socks5_request_parse(const uint8_t *buf, size_t len, struct socks5_request *out, size_t *used,
                     enum socks5_rep *rep)
{
	size_t alen, need;
	uint8_t atyp;

	memset(out, 0, sizeof(*out));
	*rep = SOCKS5_REP_FAILURE;
	if (len >= 1 && buf[0] != SOCKS5_VERSION)
		return SOCKS5_BAD;
	if (len >= 3 && buf[2] != 0)
		return SOCKS5_BAD; /* RSV */
	if (len < 5)
		return SOCKS5_MORE;
	atyp = buf[3];
	switch (atyp) {
	case 1:
		alen = 4;
		break;
	case 4:
		alen = 16;
		break;
	case 3:
		alen = 1 + (size_t)buf[4];
		if (buf[4] == 0)
			return SOCKS5_BAD;
		break;
	default:
		*rep = SOCKS5_REP_ATYP_UNSUPPORTED;
		return SOCKS5_BAD;
	}
	need = 4 + alen + 2;
	if (len < need)
		return SOCKS5_MORE;
	if (buf[1] < SOCKS5_CMD_CONNECT || buf[1] > SOCKS5_CMD_UDP_ASSOCIATE) {
		*rep = SOCKS5_REP_CMD_UNSUPPORTED;
		return SOCKS5_BAD;
	}
	out->cmd = (enum socks5_cmd)buf[1];
	out->port = (uint16_t)(buf[need - 2] << 8 | buf[need - 1]);
	if (atyp == 3) {
		size_t n = buf[4];

		if (memchr(buf + 5, '\0', n) != NULL)
			return SOCKS5_BAD;
		out->is_name = true;
		memcpy(out->name, buf + 5, n);
		out->name[n] = '\0';
	} else if (atyp == 1) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&out->addr;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, buf + 4, 4);
		sin->sin_port = htons(out->port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->addr;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, buf + 4, 16);
		sin6->sin6_port = htons(out->port);
	}
	*rep = SOCKS5_REP_OK;
	*used = need;
	return SOCKS5_DONE;
}

size_t
socks5_reply(enum socks5_rep rep, const struct sockaddr *bound, uint8_t *buf, size_t cap)
{
	size_t n = 0;

	if (cap < SOCKS5_REPLY_MAX)
		return 0;
	buf[n++] = SOCKS5_VERSION;
	buf[n++] = (uint8_t)rep;
	buf[n++] = 0;
	if (bound != NULL && bound->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)bound;

		buf[n++] = 4;
		memcpy(buf + n, &sin6->sin6_addr, 16);
		n += 16;
		memcpy(buf + n, &sin6->sin6_port, 2);
	} else {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)bound;

		buf[n++] = 1;
		if (bound != NULL && bound->sa_family == AF_INET) {
			memcpy(buf + n, &sin->sin_addr, 4);
			memcpy(buf + n + 4, &sin->sin_port, 2);
		} else {
			memset(buf + n, 0, 6);
		}
		n += 4;
	}
	return n + 2;
}
