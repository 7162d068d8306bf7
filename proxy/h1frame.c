/* HTTP/1 request framing on a connection. See h1frame.h for the contract. */
#include "proxy/h1frame.h"

#include <stdlib.h>
#include <string.h>

void
h1frame_init(struct h1frame *f)
{
	memset(f, 0, sizeof(*f));
	f->state = H1FRAME_HEAD;
}

void
h1frame_clear(struct h1frame *f)
{
	free(f->head);
	f->head = NULL;
	f->head_len = 0;
}

static enum h1frame_step
frame_bad(struct h1frame *f, enum verdict_reason vr, const char *why)
{
	f->vr = vr;
	f->why = why;
	return H1FRAME_STEP_BAD;
}

/* Bytes at a message boundary, or the rest of a head begun before. The
 * usual case, a whole head in one read, is parsed where it lies; only a
 * head in pieces is copied, and only up to HTTP_MAX_HEAD. */
static enum h1frame_step
frame_head(struct h1frame *f, const uint8_t *buf, size_t len, uint16_t port, struct http_head *h,
           struct peek *p, size_t *used)
{
	size_t old = f->head_len, take;
	const uint8_t *s = buf;
	enum peek_kind k;

	if (old == 0) {
		k = peek_parse(buf, len, port, h, p);
		take = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	} else {
		take = len < HTTP_MAX_HEAD - old ? len : HTTP_MAX_HEAD - old;
		memcpy(f->head + old, buf, take);
		f->head_len += take;
		s = (const uint8_t *)f->head;
		k = peek_parse(s, f->head_len, port, h, p);
	}
	switch (k) {
	case PEEK_HTTP:
		/* The head was not complete within what was held before. */
		if (p->len <= old) {
			f->head_len = old;
			return frame_bad(f, VR_FRAMING, "request head framing lost");
		}
		*used = p->len - old;
		f->head_len = old > 0 ? p->len : 0;
		f->out = (const char *)s;
		f->out_len = p->len;
		/* peek_parse() refused what cannot be framed: this holds. */
		if (http_request_framing(f->out, h, &f->next, &f->next_len) != 0) {
			f->head_len = old;
			return frame_bad(f, VR_FRAMING, "request body framing is ambiguous");
		}
		return H1FRAME_STEP_HEAD;
	case PEEK_MORE:
		if (p->proto == PEEK_PROTO_TLS)
			break;
		if (old + take >= HTTP_MAX_HEAD) {
			f->head_len = old;
			return frame_bad(f, VR_HEAD_TOO_LARGE,
			                 "request head not complete within its size limit");
		}
		if (old == 0) {
			if (f->head == NULL && (f->head = malloc(HTTP_MAX_HEAD)) == NULL)
				return frame_bad(f, VR_RESOURCE,
				                 "out of memory for a request head");
			memcpy(f->head, buf, take);
			f->head_len = take;
		}
		*used = take;
		return H1FRAME_STEP_HOLD;
	case PEEK_BAD:
		f->head_len = old; /* what is held is what came before buf */
		if (p->proto == PEEK_PROTO_TLS)
			break;
		return H1FRAME_STEP_BAD;
	case PEEK_TLS:
	case PEEK_OTHER:
		break;
	}
	f->head_len = old;
	return frame_bad(f, VR_BAD_REQUEST,
	                 "bytes where a request must begin are not an HTTP/1 request head");
}

enum h1frame_step
h1frame_step(struct h1frame *f, const uint8_t *buf, size_t len, uint16_t default_port,
             struct http_head *h, struct peek *p, size_t *used)
{
	*used = 0;
	f->why = NULL;
	f->vr = VR_NONE;
	memset(p, 0, sizeof(*p));
	if (len == 0)
		return H1FRAME_STEP_PASS;
	switch (f->state) {
	case H1FRAME_OPAQUE:
		*used = len;
		return H1FRAME_STEP_PASS;
	case H1FRAME_UPGRADE:
		return H1FRAME_STEP_WAIT;
	case H1FRAME_LENGTH:
		*used = len < f->left ? len : (size_t)f->left;
		h1frame_skip(f, *used);
		return H1FRAME_STEP_PASS;
	case H1FRAME_CHUNKED: {
		bool done;
		ssize_t n = http_chunked_feed(&f->chunks, buf, len, &done);

		if (n < 0)
			return frame_bad(f, VR_FRAMING,
			                 "malformed chunked request body (a chunk size, "
			                 "extension or trailer line)");
		if (done)
			f->state = H1FRAME_HEAD;
		*used = (size_t)n;
		return H1FRAME_STEP_PASS;
	}
	case H1FRAME_HEAD:
		break;
	}
	return frame_head(f, buf, len, default_port, h, p, used);
}

void
h1frame_accept(struct h1frame *f, bool watch_upgrade)
{
	h1frame_clear(f);
	f->out = NULL;
	f->out_len = 0;
	f->requests++;
	switch (f->next) {
	case HTTP_BODY_LENGTH:
		f->left = f->next_len;
		f->state = f->left > 0 ? H1FRAME_LENGTH : H1FRAME_HEAD;
		break;
	case HTTP_BODY_CHUNKED:
		http_chunked_init(&f->chunks);
		f->state = H1FRAME_CHUNKED;
		break;
	case HTTP_BODY_NONE:
	case HTTP_BODY_CLOSE: /* never a request's */
		f->state = watch_upgrade ? H1FRAME_UPGRADE : H1FRAME_HEAD;
		break;
	}
}

void
h1frame_upgraded(struct h1frame *f, bool yes)
{
	if (f->state == H1FRAME_UPGRADE)
		f->state = yes ? H1FRAME_OPAQUE : H1FRAME_HEAD;
}

uint64_t
h1frame_opaque(const struct h1frame *f)
{
	switch (f->state) {
	case H1FRAME_OPAQUE:
		return UINT64_MAX;
	case H1FRAME_LENGTH:
		return f->left;
	case H1FRAME_CHUNKED:
		return http_chunked_data_left(&f->chunks);
	case H1FRAME_HEAD:
	case H1FRAME_UPGRADE:
		break;
	}
	return 0;
}

void
h1frame_skip(struct h1frame *f, uint64_t n)
{
	switch (f->state) {
	case H1FRAME_LENGTH:
		if (n > f->left)
			n = f->left;
		f->left -= n;
		if (f->left == 0)
			f->state = H1FRAME_HEAD;
		return;
	case H1FRAME_CHUNKED:
		http_chunked_skip(&f->chunks, n);
		return;
	case H1FRAME_OPAQUE:
	case H1FRAME_HEAD:
	case H1FRAME_UPGRADE:
		return;
	}
}
