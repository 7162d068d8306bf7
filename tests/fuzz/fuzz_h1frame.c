/* Fuzz the HTTP/1 request framer (h1frame.h) the way a connection feeds
 * it: the input after the first byte is the client's stream, fed once
 * whole, once a byte at a time, and once in pieces cut at points drawn from
 * the input, each time also letting body bytes go unread as the splice
 * relay does (h1frame_opaque/h1frame_skip). Every way of cutting must
 * frame the stream the same: the same heads, ending at the same offsets,
 * naming the same names, and then the same refusal (or none). A head's
 * bytes are exactly the stream's bytes that end there; nothing consumed
 * lies past the input; a held head stays within HTTP_MAX_HEAD. The first
 * byte's low bit says whether a WebSocket upgrade is answered with 101. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/h1frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 64

struct event {
	int kind; /* H1FRAME_STEP_HEAD or _BAD */
	size_t end;
	char name[HTTP_HOST_MAX];
	bool websocket;
};

struct run {
	struct event ev[MAX_EVENTS];
	size_t n;
	size_t consumed;
};

static struct http_head head;

static void
record(struct run *r, int kind, size_t end, const struct peek *p)
{
	if (r->n == MAX_EVENTS)
		return;
	r->ev[r->n].kind = kind;
	r->ev[r->n].end = end;
	memcpy(r->ev[r->n].name, p->name, sizeof(p->name));
	r->ev[r->n].websocket = p->websocket;
	r->n++;
}

/* Feed s[0..len) cut into pieces of the sizes cut() gives; with skip,
 * body bytes go unread. Stops at a refusal. */
static void
frame(const uint8_t *s, size_t len, size_t (*cut)(size_t, const uint8_t *, size_t), bool skip,
      bool yes, struct run *r)
{
	struct h1frame f;
	size_t off = 0, piece = 0;

	memset(r, 0, sizeof(*r));
	h1frame_init(&f);
	while (off < len) {
		size_t n = cut(piece++, s, len), end, pos = 0;
		uint8_t *copy;

		if (n == 0 || n > len - off)
			n = len - off;
		/* exact-size heap copy, freed after the piece: ASan sees any
		 * read past it and any use of it later */
		copy = malloc(n);
		if (copy == NULL)
			abort();
		memcpy(copy, s + off, n);
		end = off + n;
		while (pos < n) {
			uint64_t o = skip ? h1frame_opaque(&f) : 0;
			struct peek p;
			size_t used;

			if (o > 0) {
				size_t k = o < n - pos ? (size_t)o : n - pos;

				h1frame_skip(&f, k);
				pos += k;
				continue;
			}
			switch (h1frame_step(&f, copy + pos, n - pos, 8080, &head, &p, &used)) {
			case H1FRAME_STEP_PASS:
			case H1FRAME_STEP_HOLD:
				if (used == 0 || used > n - pos)
					abort();
				if (f.head_len > HTTP_MAX_HEAD)
					abort();
				pos += used;
				break;
			case H1FRAME_STEP_HEAD:
				if (used == 0 || used > n - pos || f.out_len == 0 ||
				    f.out_len > HTTP_MAX_HEAD || f.out_len > off + pos + used)
					abort();
				if (memcmp(f.out, s + off + pos + used - f.out_len, f.out_len) != 0)
					abort();
				if (memchr(p.name, '\0', sizeof(p.name)) == NULL)
					abort();
				pos += used;
				record(r, H1FRAME_STEP_HEAD, off + pos, &p);
				h1frame_accept(&f, p.websocket);
				break;
			case H1FRAME_STEP_WAIT:
				h1frame_upgraded(&f, yes);
				break;
			case H1FRAME_STEP_BAD:
				if (f.why == NULL && p.error == PEEK_OK)
					abort();
				record(r, H1FRAME_STEP_BAD, off + pos, &p);
				free(copy);
				h1frame_clear(&f);
				r->consumed = off + pos;
				return;
			}
		}
		free(copy);
		off = end;
	}
	r->consumed = off;
	h1frame_clear(&f);
}

static size_t
cut_whole(size_t i, const uint8_t *s, size_t len)
{
	(void)i;
	(void)s;
	return len;
}

static size_t
cut_byte(size_t i, const uint8_t *s, size_t len)
{
	(void)i;
	(void)s;
	(void)len;
	return 1;
}

static size_t
cut_drawn(size_t i, const uint8_t *s, size_t len)
{
	/* piece sizes 1..64 drawn from the stream's own bytes */
	return len > 0 ? (size_t)(s[(i * 7) % len] & 63) + 1 : 1;
}

static void
same(const struct run *a, const struct run *b)
{
	if (a->n != b->n)
		abort();
	/* A refusal is the same refusal wherever the cut made it seen;
	 * a head is the same head at the same place. */
	for (size_t i = 0; i < a->n; i++)
		if (a->ev[i].kind != b->ev[i].kind ||
		    (a->ev[i].kind == H1FRAME_STEP_HEAD &&
		     (a->ev[i].end != b->ev[i].end || strcmp(a->ev[i].name, b->ev[i].name) != 0 ||
		      a->ev[i].websocket != b->ev[i].websocket)))
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run whole, other;
	bool yes;

	if (size < 1 || size > 65536)
		return 0;
	yes = data[0] & 1;
	data++;
	size--;
	frame(data, size, cut_whole, false, yes, &whole);
	if (whole.consumed > size)
		abort();
	frame(data, size, cut_whole, true, yes, &other);
	same(&whole, &other);
	frame(data, size, cut_drawn, true, yes, &other);
	same(&whole, &other);
	frame(data, size, cut_drawn, false, yes, &other);
	same(&whole, &other);
	if (size <= 4096) {
		frame(data, size, cut_byte, false, yes, &other);
		same(&whole, &other);
	}
	return 0;
}
