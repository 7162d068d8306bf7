/* Fuzz the SOCKS5 readers (proxy/socks5.h) as TCP delivers bytes: each of
 * the three messages is offered as every prefix of the input. A prefix
 * either asks for more or gives the whole input's answer; a parsed
 * message used no more bytes than it was given; a name is 1-255 bytes
 * with no NUL; a reply always fits SOCKS5_REPLY_MAX. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/socks5.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1); /* exact size: ASan sees any over-read */
	struct socks5_greeting g;
	struct socks5_userpass up;
	struct socks5_request rq, rq_whole;
	enum socks5_result whole_g, whole_u, whole_r, r;
	enum socks5_rep rep, rep_whole = SOCKS5_REP_OK;
	size_t used_g = 0, used_u = 0, used_r = 0, used;
	uint8_t reply[SOCKS5_REPLY_MAX];

	memcpy(copy, data, size);
	whole_g = socks5_greeting_parse(copy, size, &g, &used_g);
	whole_u = socks5_userpass_parse(copy, size, &up, &used_u);
	whole_r = socks5_request_parse(copy, size, &rq_whole, &used_r, &rep_whole);
	if ((whole_g == SOCKS5_DONE && used_g > size) || (whole_u == SOCKS5_DONE && used_u > size) ||
	    (whole_r == SOCKS5_DONE && used_r > size))
		abort();
	if (whole_u == SOCKS5_DONE && strlen(up.user) == 0)
		abort();
	if (whole_r == SOCKS5_DONE && rq_whole.is_name) {
		size_t n = strnlen(rq_whole.name, sizeof(rq_whole.name));

		if (n == 0 || n > 255)
			abort();
	}
	/* Prefixes: bounded to the first 300 bytes (every message fits). */
	for (size_t i = 0; i < size && i < 300; i++) {
		r = socks5_greeting_parse(copy, i, &g, &used);
		if (r != SOCKS5_MORE && (r != whole_g || (r == SOCKS5_DONE && used != used_g)))
			abort();
		r = socks5_userpass_parse(copy, i, &up, &used);
		if (r != SOCKS5_MORE && (r != whole_u || (r == SOCKS5_DONE && used != used_u)))
			abort();
		r = socks5_request_parse(copy, i, &rq, &used, &rep);
		if (r != SOCKS5_MORE && (r != whole_r || (r == SOCKS5_DONE && used != used_r)))
			abort();
	}
	if (whole_r == SOCKS5_DONE &&
	    socks5_reply(SOCKS5_REP_OK, (const struct sockaddr *)&rq_whole.addr, reply,
	                 sizeof(reply)) > sizeof(reply))
		abort();
	free(copy);
	return 0;
}
