/* Fuzz the HTTP/1 head parser and everything the proxy derives from a head:
 * the sniffer's verdict, the name a request presents (Host, absolute and
 * CONNECT targets), Upgrade and Connection checks, targets, framing,
 * hop-by-hop rewriting; and the chunked delimiter fed in pieces. The first
 * byte picks request or response parsing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
chunked(const uint8_t *data, size_t size, size_t step)
{
	struct http_chunked c;
	size_t off = 0;
	bool done = false;

	http_chunked_init(&c);
	while (off < size && !done) {
		size_t n = size - off < step ? size - off : step;
		ssize_t used = http_chunked_feed(&c, data + off, n, &done);

		if (used < 0)
			return;
		if ((size_t)used > n || ((size_t)used < n && !done))
			abort();
		off += (size_t)used;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_head h;
	static char out[HTTP_MAX_HEAD * 2];
	const char *buf;
	char *copy;
	enum http_framing f;
	uint64_t n;

	if (size < 1)
		return 0;
	copy = malloc(size - 1 + 1);
	memcpy(copy, data + 1, size - 1);
	buf = copy;
	size--;

	if (data[0] & 1) {
		enum http_sniff sn = http_sniff_request(buf, size);
		enum http_result r = http_parse_request(buf, size, &h);

		/* Bounded: from the head limit on, the sniffer always answers. */
		if (size >= HTTP_MAX_HEAD && sn == HTTP_SNIFF_UNSURE)
			abort();
		if (r == HTTP_BAD_SYNTAX && h.error == NULL)
			abort();
		if (r == HTTP_OK) {
			struct http_authority a, name, other;
			const char *path;
			size_t plen;
			int idx = -1;
			enum http_name nr;

			if (h.head_len > size)
				abort();
			/* Whatever parses as a request, the sniffer takes for one:
			 * a request it let pass as "other" would go unchecked. */
			if (sn != HTTP_SNIFF_HTTP)
				abort();
			nr = http_request_name(buf, &h, 80, &name, &other);
			if ((nr == HTTP_NAME_OK || nr == HTTP_NAME_MISMATCH) &&
			    (name.host[0] == '\0' || strlen(name.host) >= sizeof(name.host)))
				abort();
			if (http_request_upgrade(buf, &h, &idx) == HTTP_UPGRADE_OTHER &&
			    (idx < 0 || (size_t)idx >= h.n_headers))
				abort();
			(void)http_connection_framing(buf, &h);
			(void)http_request_framing(buf, &h, &f, &n);
			(void)http_parse_authority(buf + h.target.off, h.target.len, true, 0, &a);
			if (http_parse_absolute(buf + h.target.off, h.target.len, &a, &path,
			                        &plen) == 0) {
				if (path < buf || path + plen > buf + size)
					abort();
				(void)http_rewrite_request(buf, &h, path, plen, a.host, out,
				                           sizeof(out));
			}
			(void)http_has_token(buf, &h, "connection", "close");
		}
	} else {
		if (http_parse_response(buf, size, &h) == HTTP_OK) {
			if (h.head_len > size)
				abort();
			(void)http_response_framing(buf, &h, data[0] & 2, &f, &n);
			(void)http_connection_framing(buf, &h);
			(void)http_rewrite_response(buf, &h, data[0] & 4, out, sizeof(out));
		}
	}
	chunked(data + 1, size, (size_t)(data[0] >> 3) + 1);
	free(copy);
	return 0;
}
