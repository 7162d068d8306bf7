/* The HTTP/1 requests a client sends on one connection, one after the
 * other, framed as the server will frame them (RFC 9112 6, 7.1): a head,
 * its body by Content-Length or chunked, the next head. A connection
 * bound to a name (bind.c) has every head looked at, pipelined and
 * kept-alive ones included, not only the first; the body in between is
 * counted, not read, so the relay can splice it (h1frame_opaque).
 *
 * Pure and bounded: the only memory is the struct and, while a head
 * arrives in pieces, one buffer of at most HTTP_MAX_HEAD bytes. Each
 * head goes through peek_parse(), so a head is refused here for what a
 * first head is refused for (malformed, both Content-Length and
 * Transfer-Encoding, a framing field named in Connection, obs-fold, an
 * Upgrade to anything but WebSocket, over a limit), and so is anything at
 * a message boundary that is not a request head (a bad chunk size, an
 * over-long chunk or trailer line, a trailer line that is no field line,
 * another protocol): what cannot be
 * framed safely is never let through unframed. */
#ifndef AIRLOCK_PROXY_H1FRAME_H
#define AIRLOCK_PROXY_H1FRAME_H

#include "policy/verdict.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/http.h"
#include "proxy/peek.h"

enum h1frame_state {
	H1FRAME_HEAD,    /* at a message boundary, or inside a head */
	H1FRAME_LENGTH,  /* in a Content-Length body */
	H1FRAME_CHUNKED, /* in a chunked body */
	H1FRAME_UPGRADE, /* a WebSocket upgrade was sent: nothing more until its answer */
	H1FRAME_OPAQUE,  /* upgraded (101): no more HTTP/1 on this connection */
};

struct h1frame {
	enum h1frame_state state;
	uint64_t left;              /* H1FRAME_LENGTH: body bytes still to come */
	struct http_chunked chunks; /* H1FRAME_CHUNKED */
	char *head;                 /* owned: a head in pieces, NULL between heads */
	size_t head_len;
	uint64_t requests; /* heads accepted so far */
	/* Between H1FRAME_STEP_HEAD and h1frame_accept(): the head's
	 * framing, and its bytes to send (f->head, or the caller's buf). */
	enum http_framing next;
	uint64_t next_len;
	const char *out;
	size_t out_len;
	const char *why;        /* H1FRAME_STEP_BAD not from peek_parse: what (static) */
	enum verdict_reason vr; /* and its reason */
};

enum h1frame_step {
	H1FRAME_STEP_PASS, /* buf[0..*used) may go as they are (body, chunk framing) */
	H1FRAME_STEP_HOLD, /* buf[0..*used) are part of a head, kept in f: none goes yet */
	/* A whole head, *used of buf its last bytes: p says what it names
	 * (as PEEK_HTTP); f->out[0..f->out_len) is all of it, to send once
	 * the caller has checked p and called h1frame_accept(). */
	H1FRAME_STEP_HEAD,
	/* Cannot be framed: f->why says why, or (f->why NULL) p as PEEK_BAD
	 * (peek_reason, peek_status). The connection must be refused (or,
	 * not framed further, goes on with f->head[0..f->head_len), held
	 * from before buf, then buf). */
	H1FRAME_STEP_BAD,
	H1FRAME_STEP_WAIT, /* H1FRAME_UPGRADE: nothing may be read yet */
};

void h1frame_init(struct h1frame *f);
/* Frees what f holds (not f); f may be half-used. */
void h1frame_clear(struct h1frame *f);

/* Frame buf[0..len), the client's next bytes. h is the caller's scratch
 * (spans into f->out while STEP_HEAD's head is looked at); default_port
 * is the port a Host without one means. Consumes at least one byte,
 * except for STEP_WAIT and STEP_BAD, or with len 0 (STEP_PASS, 0). */
enum h1frame_step h1frame_step(struct h1frame *f, const uint8_t *buf, size_t len,
                               uint16_t default_port, struct http_head *h, struct peek *p,
                               size_t *used);
/* After STEP_HEAD, once f->out is sent (it may be freed here): the head
 * went, its body (if any) is framed next.
 * watch_upgrade (a WebSocket request without a body): wait in
 * H1FRAME_UPGRADE for the caller's h1frame_upgraded(). */
void h1frame_accept(struct h1frame *f, bool watch_upgrade);
/* The answer to the upgrade: 101 (yes) ends framing, anything else goes
 * back to framing requests. */
void h1frame_upgraded(struct h1frame *f, bool yes);

/* How many of the next bytes may go unread (body or chunk data, or
 * everything once upgraded: UINT64_MAX); 0 when they must go through
 * h1frame_step(). */
uint64_t h1frame_opaque(const struct h1frame *f);
/* n bytes (at most h1frame_opaque()) went unread. */
void h1frame_skip(struct h1frame *f, uint64_t n);

#endif
