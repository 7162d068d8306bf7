/* Tunnel relay. It starts on the bufferevents the connection already has
 * (they may hold a CONNECT reply or pipelined bytes), with watermarks for
 * backpressure; as soon as every buffer is empty it drops them and moves
 * bytes kernel-side with splice(2) through one pipe per direction, taken
 * only while bytes are in flight, so an idle tunnel costs two sockets and
 * a few events. A TLS tunnel splices while its handshake is still
 * watched (bind.c): the client's records are read here, looked at, and put
 * into the pipe whole. When no pipe can be had (out of descriptors) a direction
 * copies through a buffer of its own instead. Either way a direction holds
 * at most CONN_HIGH_WATER, charged to the proxy's queue budget, and reads
 * nothing while the budget is over. Half-close is kept: EOF from one side
 * becomes shutdown(SHUT_WR) on the other once everything before it is
 * delivered. */
#include "proxy/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/fdres.h"
#include "common/log.h"
#include "common/membudget.h"
#include "common/util.h"
#include "proxy/h1frame.h"
#include "proxy/peek.h"

/* The pipe's size: room for many small segments (each takes a slot of the
 * pipe, however few bytes it carries); how much a direction may hold in
 * it is CONN_HIGH_WATER. Calls per wake-up before yielding to other
 * connections. */
#define RELAY_PIPE_SIZE (1024 * 1024)
#define RELAY_ROUNDS    16
/* The userspace copy, when no pipe can be had (out of descriptors). */
#define RELAY_COPY_SIZE (64 * 1024)
/* A framed direction reads what its framer must see (heads, chunk
 * lines) in reads of at most this; bodies are spliced. What one such read
 * puts in the medium, with a head held from before (HTTP_MAX_HEAD), fits
 * an empty pipe or copy buffer. */
#define RELAY_FRAME_READ (16 * 1024)
/* A watched TLS tunnel's reads (relay_read_watched): what is held of a
 * record not yet whole, with the next read, fits (a record or a
 * ClientHello that does not fit is refused by peek_tls_record first). */
#define RELAY_WATCH_READ PEEK_MAX_INPUT

/* One direction: from src's socket to dst's socket, through a pipe (or,
 * without one, a buffer of ours) that holds what dst has not taken yet. */
struct relay_dir {
	struct conn_half *src, *dst;
	struct event *ev_read;  /* src readable */
	struct event *ev_write; /* dst writable */
	int pipe[2];
	uint8_t *copy;            /* instead of the pipe; NULL while it has one */
	size_t copy_off;          /* where the held bytes start in copy */
	size_t cap;               /* the most this direction may hold */
	size_t held;              /* bytes read from src, not yet written to dst */
	struct membudget_share q; /* held (and watch_len), on the proxy's budget */
	/* Owned, dir[0] of a TLS tunnel whose handshake records are still
	 * watched (c->bind_tls): the client's bytes of a record not yet
	 * whole, read but not in the medium. NULL until a read cuts one. */
	uint8_t *watch;
	size_t watch_len;
	bool read_blocked; /* pipe full (or src empty) with bytes in it:
	                    * read again after the next write makes room */
	bool eof, done;
};

struct relay {
	struct conn *c;
	struct relay_dir dir[2]; /* [0] down -> up, [1] up -> down */
};

static void relay_bev_read(struct bufferevent *bev, void *arg);
static void relay_bev_write(struct bufferevent *bev, void *arg);
static void relay_bev_event(struct bufferevent *bev, short what, void *arg);

/* The log's reason for a failed read from one side. */
static enum verdict_reason
relay_why(bool upstream, int err)
{
	if (err == ECONNRESET)
		return upstream ? VR_UPSTREAM_RESET : VR_CLIENT_RESET;
	return upstream ? VR_UPSTREAM_ERROR : VR_CLIENT_ERROR;
}

static struct conn_half *
half_of(struct conn *c, struct bufferevent *bev)
{
	return bev == c->down.bev ? &c->down : &c->up;
}

static bool
relay_has_medium(const struct relay_dir *d)
{
	return d->pipe[0] >= 0 || d->copy != NULL;
}

/* Somewhere to hold bytes: an empty pipe from the proxy's pool, a new
 * one, or, when no pipe can be had (descriptors ran out), a buffer of
 * ours: an established tunnel slows down rather than dies. 0, or -1 when
 * out of memory too. */
static int
relay_medium_get(struct proxy *px, struct relay_dir *d)
{
	int sz;

	d->copy_off = 0;
	if (px->px_n_pipes > 0) {
		px->px_n_pipes--;
		d->pipe[0] = px->px_pipes[px->px_n_pipes][0];
		d->pipe[1] = px->px_pipes[px->px_n_pipes][1];
		d->cap = px->px_pipe_cap[px->px_n_pipes];
		return 0;
	}
	if (pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
		/* A large pipe has slots for many small segments; pipes only
		 * live while bytes are in flight, so this costs idle tunnels
		 * nothing. Failure (a lower fs.pipe-max-size) keeps the
		 * default size. */
		(void)fcntl(d->pipe[1], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
		sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
		d->cap = sz > 0 ? (size_t)sz : 65536;
		if (d->cap > CONN_HIGH_WATER)
			d->cap = CONN_HIGH_WATER;
		return 0;
	}
	d->pipe[0] = d->pipe[1] = -1;
	if (errno == EMFILE || errno == ENFILE)
		proxy_fd_starved(px);
	log_debug("proxy: conn %llu: no pipe for splice (%s); copying instead",
	          (unsigned long long)d->src->c->id, strerror(errno));
	d->copy = malloc(RELAY_COPY_SIZE);
	if (d->copy == NULL)
		return -1;
	d->cap = RELAY_COPY_SIZE;
	return 0;
}

/* Give the direction's medium back once it is empty: a pipe to the pool
 * (or closed, as one with bytes or unknown contents always is), a copy
 * buffer freed. Bytes still held are given back to the budget. */
static void
relay_medium_put(struct proxy *px, struct relay_dir *d)
{
	if (d->copy != NULL) {
		free(d->copy);
		d->copy = NULL;
	} else if (d->pipe[0] < 0) {
		return;
	} else if (d->held == 0 && px->px_n_pipes < PROXY_PIPE_POOL) {
		px->px_pipes[px->px_n_pipes][0] = d->pipe[0];
		px->px_pipes[px->px_n_pipes][1] = d->pipe[1];
		px->px_pipe_cap[px->px_n_pipes] = d->cap;
		px->px_n_pipes++;
		d->pipe[0] = d->pipe[1] = -1;
	} else {
		fd_close(&d->pipe[0]);
		fd_close(&d->pipe[1]);
		fdres_refill(px->px_fds);
	}
	membudget_share_sub(&d->q, d->held);
	d->held = 0;
}

static void
relay_dir_free(struct proxy *px, struct relay_dir *d)
{
	if (d->ev_read != NULL)
		event_free(d->ev_read);
	if (d->ev_write != NULL)
		event_free(d->ev_write);
	relay_medium_put(px, d);
	free(d->watch);
	membudget_share_release(&d->q);
}

void
relay_free(struct conn *c)
{
	if (c->relay == NULL)
		return;
	relay_dir_free(c->px, &c->relay->dir[0]);
	relay_dir_free(c->px, &c->relay->dir[1]);
	free(c->relay);
	c->relay = NULL;
}

/* ---- splice mode ---- */

/* Whether d would read src now: not at EOF, not waiting for a write to
 * make room, and with room. The budget comes on top (relay_arm_read). */
static bool
relay_wants_read(const struct relay_dir *d)
{
	return !d->eof && !d->done && !d->read_blocked &&
	       (!relay_has_medium(d) || d->held < d->cap);
}

static void
relay_arm_read(struct relay_dir *d)
{
	if (relay_wants_read(d) && !membudget_over(d->q.b))
		event_add(d->ev_read, NULL);
	else
		event_del(d->ev_read);
}

/* Write what d holds to dst: > 0 bytes, 0 if dst takes nothing now
 * (EAGAIN), -1 on an error (errno) or a zero-length write. */
static ssize_t
relay_write_out(struct relay_dir *d)
{
	ssize_t n;

	if (d->copy != NULL)
		n = send(d->dst->fd, d->copy + d->copy_off, d->held, MSG_NOSIGNAL | MSG_DONTWAIT);
	else
		n = splice(d->pipe[0], NULL, d->dst->fd, NULL, d->held,
		           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n == 0)
		return -1;
	if (n > 0 && d->copy != NULL)
		d->copy_off += (size_t)n;
	return n;
}

/* Read from src into what d holds, at most room bytes: > 0 bytes, 0 at
 * EOF, -1 with errno (EAGAIN: nothing there now). */
static ssize_t
relay_read_in(struct relay_dir *d, size_t room)
{
	if (d->copy != NULL)
		return recv(d->src->fd, d->copy + d->copy_off + d->held, room, MSG_DONTWAIT);
	return splice(d->src->fd, NULL, d->pipe[1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
}

/* Put buf[0..n) into what d holds, after it, already on the budget (the
 * read that brought them charged them). Only with room (the medium empty
 * before a watched read). */
static int
relay_put_medium(struct relay_dir *d, const uint8_t *buf, size_t n)
{
	ssize_t w;

	if (n == 0)
		return 0;
	if (d->copy != NULL) {
		if (d->copy_off + d->held + n > RELAY_COPY_SIZE)
			return -1;
		memcpy(d->copy + d->copy_off + d->held, buf, n);
		w = (ssize_t)n;
	} else {
		w = write(d->pipe[1], buf, n);
	}
	if (w > 0)
		d->held += (size_t)w;
	return w == (ssize_t)n ? 0 : -1;
}

/* The framer's emit in splice mode: bytes that may go join what d holds,
 * after it, charged to the budget here (the framer's read did not). Only
 * called with room for them (relay_read_framed). */
static int
relay_emit_medium(void *arg, const void *p, size_t n)
{
	struct relay_dir *d = arg;
	size_t before = d->held;
	int rc = relay_put_medium(d, p, n);

	membudget_share_add(&d->q, d->held - before);
	return rc;
}

/* Read the client's bytes on a framed connection (c->frame): a body the
 * framer has counted is spliced as it is, never read; the rest (heads,
 * chunk lines) is read here and framed (bind_frame), which puts what may
 * go into the medium. Only with an empty medium, so that always fits: with
 * bytes held, EAGAIN (read again once they are written). Returns the
 * bytes read, 0 at EOF, -1 with errno, or -2 when the relay is gone (c
 * refused, its reply draining, or closed). d->held is kept here. */
static ssize_t
relay_read_framed(struct relay_dir *d, size_t room)
{
	struct conn *c = d->src->c;
	uint64_t opaque = h1frame_opaque(c->frame);
	uint8_t buf[RELAY_FRAME_READ];
	ssize_t n, k;

	if (opaque > 0) {
		if (room > opaque)
			room = (size_t)opaque;
		n = relay_read_in(d, room);
		if (n > 0) {
			h1frame_skip(c->frame, (uint64_t)n);
			d->held += (size_t)n;
			membudget_share_add(&d->q, (size_t)n);
		}
		return n;
	}
	if (d->held > 0) {
		errno = EAGAIN;
		return -1;
	}
	n = recv(d->src->fd, buf, room < sizeof(buf) ? room : sizeof(buf), MSG_DONTWAIT);
	if (n <= 0)
		return n;
	k = bind_frame(c, buf, (size_t)n, relay_emit_medium, d);
	if (k < 0)
		return -2;
	if (k < n) {
		/* An upgrade's answer is only waited for on bufferevents
		 * (bind_may_upgrade): bytes cannot be put back. */
		conn_tunnel_done(c, VR_FRAMING, "request framing lost its place");
		return -2;
	}
	return n;
}

/* Read the client's bytes on a TLS tunnel whose plaintext handshake is
 * still watched (c->bind_tls): the server's bytes are spliced meanwhile,
 * and the client's are read here, after what a read before left of a
 * record (d->watch), and looked at (bind_tls_scan). Whole records that
 * pass go into the medium, the rest of a record waits in d->watch for its
 * next read; once the look is over every byte goes, and from the next
 * read on the direction splices as any other. Only with an empty medium,
 * as relay_read_framed. Returns the bytes read (or, when the look ended
 * elsewhere, those it held and now let go), 0 at EOF (what was held goes
 * first), -1 with errno, or -2 when the relay is gone (c refused, or
 * closed). d->held is kept here. */
static ssize_t
relay_read_watched(struct relay_dir *d, size_t room)
{
	struct conn *c = d->src->c;
	uint8_t buf[RELAY_WATCH_READ];
	size_t len = d->watch_len, pass = SIZE_MAX, want;
	bool reads = c->bind_watch; /* else: only let go what is held */
	ssize_t n = 0;

	if (d->held > 0) {
		errno = EAGAIN;
		return -1;
	}
	if (len > 0)
		memcpy(buf, d->watch, len);
	if (reads) {
		want = sizeof(buf) - len < room ? sizeof(buf) - len : room;
		if (want == 0) {
			/* peek_tls_record decides any record before this. */
			conn_tunnel_done(c, VR_TLS_MALFORMED, "TLS record larger than the watch");
			return -2;
		}
		n = recv(d->src->fd, buf + len, want, MSG_DONTWAIT);
		if (n < 0 || (n == 0 && len == 0))
			return n;
		if (n == 0)
			c->down.eof = true; /* the scan lets the rest go */
		membudget_share_add(&d->q, (size_t)n);
		len += (size_t)n;
		if (bind_tls_scan(c, buf, len, &pass) != 0)
			return -2;
	}
	if (pass > len)
		pass = len;
	if (relay_put_medium(d, buf, pass) != 0) {
		/* The medium is empty and larger than buf: only an error. */
		conn_tunnel_done(c, VR_RESOURCE, "splice pipe write failed");
		return -2;
	}
	d->watch_len = len - pass;
	if (d->watch_len > 0) {
		if (d->watch == NULL && (d->watch = malloc(RELAY_WATCH_READ)) == NULL) {
			conn_tunnel_done(c, VR_RESOURCE, "out of memory");
			return -2;
		}
		memmove(d->watch, buf + pass, d->watch_len);
	} else if (!c->bind_watch) {
		free(d->watch);
		d->watch = NULL;
	}
	return reads ? n : (ssize_t)pass;
}

/* Move what can be moved in one direction: write what is held, read more
 * while there is room, so reading src overlaps a slow dst instead of
 * waiting for it. Returns -1 if the connection was closed (c is gone),
 * 0 otherwise. Events are left armed for exactly what is still to do. */
static int
relay_pump(struct relay *r, struct relay_dir *d)
{
	struct conn *c = r->c;

	for (int round = 0; round < RELAY_ROUNDS; round++) {
		bool progress = false;
		ssize_t n;

		if (d->held > 0) {
			n = relay_write_out(d);
			if (n < 0) {
				/* dst is gone: the other side learns it from a
				 * reset, not from a FIN that would read as an end. */
				conn_abort(c,
				           d->dst == &c->up ? VR_UPSTREAM_ERROR : VR_CLIENT_ERROR,
				           d->dst == &c->up ? "upstream write failed"
				                            : "client write failed");
				return -1;
			}
			if (n > 0) {
				d->held -= (size_t)n;
				membudget_share_sub(&d->q, (size_t)n);
				d->dst->bytes += (uint64_t)n;
				d->read_blocked = false;
				progress = true;
			}
		}
		if (relay_wants_read(d)) {
			bool framed, watched;
			size_t room;

			if (!relay_has_medium(d) && relay_medium_get(c->px, d) != 0) {
				conn_tunnel_done(c, VR_RESOURCE, "out of memory");
				return -1;
			}
			if (d->copy != NULL && d->held == 0)
				d->copy_off = 0;
			room = d->cap - d->held - (d->copy != NULL ? d->copy_off : 0);
			/* Never past the global cap: reading stops at it. */
			if (room > membudget_room(d->q.b))
				room = membudget_room(d->q.b);
			framed = d == &r->dir[0] && c->frame != NULL;
			watched = d == &r->dir[0] &&
			          ((c->bind_watch && c->bind_tls) || d->watch_len > 0);
			if (room > 0 && (framed || watched)) {
				n = watched ? relay_read_watched(d, room)
				            : relay_read_framed(d, room);
				if (n == -2)
					return -1;
			} else if (room > 0) {
				n = relay_read_in(d, room);
			} else {
				n = -1;
				errno = EAGAIN;
			}
			if (n > 0) {
				if (!framed && !watched) {
					d->held += (size_t)n;
					membudget_share_add(&d->q, (size_t)n);
				}
				progress = true;
			} else if (n == 0) {
				d->eof = true;
				d->src->eof = true;
				progress = true;
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* A reset is passed on as a reset. */
				conn_abort(c, relay_why(d->src == &c->up, errno), NULL);
				return -1;
			} else if (d->held > 0) {
				/* src empty or the pipe's slots full: either way
				 * the next write is when to try again. */
				d->read_blocked = true;
			} else {
				/* Nothing to read and nothing held: give the
				 * medium back until bytes come. */
				relay_medium_put(c->px, d);
			}
		}
		if (d->eof && d->held == 0) {
			/* Everything before the FIN is delivered: pass it on. */
			relay_medium_put(c->px, d);
			shutdown(d->dst->fd, SHUT_WR);
			d->dst->shut = true;
			d->done = true;
			event_del(d->ev_read);
			event_del(d->ev_write);
			if (r->dir[0].done && r->dir[1].done) {
				conn_tunnel_done(c, VR_NONE, NULL);
				return -1;
			}
			return 0;
		}
		if (progress)
			conn_touch(c);
		else
			break;
	}
	if (d->held > 0)
		event_add(d->ev_write, NULL);
	else
		event_del(d->ev_write);
	relay_arm_read(d);
	return 0;
}

static void
relay_ready0(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	(void)fd;
	(void)what;
	relay_pump(r, &r->dir[0]);
}

static void
relay_ready1(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	(void)fd;
	(void)what;
	relay_pump(r, &r->dir[1]);
}

void
relay_pause(struct conn *c)
{
	if (c->relay == NULL)
		return;
	event_del(c->relay->dir[0].ev_read);
	event_del(c->relay->dir[1].ev_read);
}

void
relay_watch_flush(struct conn *c)
{
	if (c->relay != NULL)
		event_active(c->relay->dir[0].ev_read, EV_READ, 1);
}

void
relay_resume(struct conn *c)
{
	if (c->relay == NULL)
		return;
	relay_arm_read(&c->relay->dir[0]);
	relay_arm_read(&c->relay->dir[1]);
}

int
relay_reply_bev(struct conn *c)
{
	struct bufferevent *bev;

	if (c->relay == NULL || c->down.bev != NULL)
		return c->down.bev != NULL ? 0 : -1;
	/* Bytes on their way to the client: a reply would land inside
	 * them. A response still to come is dropped with the upstream. */
	if (c->relay->dir[1].held > 0)
		return -1;
	bev = bufferevent_socket_new(c->px->px_base, c->down.fd, 0);
	if (bev == NULL)
		return -1;
	relay_free(c);
	conn_half_set_bev(&c->down, bev);
	return 0;
}

/* Swap the bufferevents for splice. Only called with every buffer empty
 * and neither side at EOF, so no byte is lost or reordered. */
static void
relay_to_splice(struct conn *c)
{
	struct relay *r = calloc(1, sizeof(*r));
	struct event_base *base = c->px->px_base;

	if (r == NULL)
		return; /* stay on bufferevents */
	r->c = c;
	/* Both, before either can fail: relay_dir_free() reads them. */
	r->dir[0].pipe[0] = r->dir[0].pipe[1] = r->dir[1].pipe[0] = r->dir[1].pipe[1] = -1;
	for (int i = 0; i < 2; i++) {
		struct relay_dir *d = &r->dir[i];
		event_callback_fn fn = i == 0 ? relay_ready0 : relay_ready1;

		d->src = i == 0 ? &c->down : &c->up;
		d->dst = i == 0 ? &c->up : &c->down;
		membudget_share_init(&d->q, c->px->px_queue);
		d->ev_read = event_new(base, d->src->fd, EV_READ | EV_PERSIST, fn, r);
		d->ev_write = event_new(base, d->dst->fd, EV_WRITE | EV_PERSIST, fn, r);
		if (d->ev_read == NULL || d->ev_write == NULL) {
			relay_dir_free(c->px, &r->dir[0]);
			relay_dir_free(c->px, &r->dir[1]);
			free(r);
			return;
		}
	}
	conn_half_drop_bev(&c->down);
	conn_half_drop_bev(&c->up);
	c->relay = r;
	relay_arm_read(&r->dir[0]);
	relay_arm_read(&r->dir[1]);
}

/* A WebSocket upgrade waits for its answer: the client's later bytes
 * wait unread, on bufferevents (bind_upgrade_answer). */
static bool
relay_upgrade_wait(const struct conn *c)
{
	return c->frame != NULL && c->frame->state == H1FRAME_UPGRADE;
}

static void
relay_maybe_splice(struct conn *c)
{
	/* A first look waits on bufferevents; a TLS tunnel's handshake
	 * records are watched on splice too (relay_read_watched). */
	if (c->relay != NULL || (c->bind_watch && !c->bind_tls) || c->down.eof || c->up.eof ||
	    c->down.bev == NULL || c->up.bev == NULL || relay_upgrade_wait(c))
		return;
	if (evbuffer_get_length(bufferevent_get_input(c->down.bev)) != 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->down.bev)) != 0 ||
	    evbuffer_get_length(bufferevent_get_input(c->up.bev)) != 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->up.bev)) != 0)
		return;
	relay_to_splice(c);
}

/* ---- bufferevent mode ---- */

/* Everything before an EOF has been written: pass the FIN on. Returns -1
 * if the connection is finished (and closed). */
static int
relay_bev_shut(struct conn *c, struct conn_half *to)
{
	if (!to->peer->eof || to->shut || evbuffer_get_length(bufferevent_get_output(to->bev)) != 0)
		return 0;
	/* The client's last bytes still wait for an upgrade's answer. */
	if (to == &c->up && evbuffer_get_length(bufferevent_get_input(c->down.bev)) != 0)
		return 0;
	shutdown(to->fd, SHUT_WR);
	to->shut = true;
	if (c->down.shut && c->up.shut) {
		conn_tunnel_done(c, VR_NONE, NULL);
		return -1;
	}
	return 0;
}

static int relay_bev_move(struct conn *c, struct conn_half *from);

/* Send up to n of in's first bytes to fd now, without blocking, and drain
 * what went: the count (0 when the socket takes none, or fails). */
static ssize_t
relay_send_direct(int fd, struct evbuffer *in, size_t n)
{
	struct evbuffer_iovec v[8];
	struct msghdr msg = {.msg_iov = (struct iovec *)v};
	int k = evbuffer_peek(in, (ssize_t)n, NULL, v, ARRAY_SIZE(v));
	size_t len = 0;
	ssize_t w;

	if (k <= 0)
		return 0;
	if (k > (int)ARRAY_SIZE(v))
		k = ARRAY_SIZE(v);
	for (int i = 0; i < k; i++) {
		if (v[i].iov_len > n - len)
			v[i].iov_len = n - len;
		len += v[i].iov_len;
	}
	msg.msg_iovlen = (size_t)k;
	w = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w <= 0)
		return 0;
	evbuffer_drain(in, (size_t)w);
	return w;
}

static int
relay_emit_bev(void *arg, const void *p, size_t n)
{
	return n == 0 ? 0 : evbuffer_add(arg, p, n);
}

/* The client's bytes on a framed connection, on bufferevents: what the
 * framer lets go is queued upstream, a head held in pieces stays in the
 * framer, and while an upgrade waits for its answer the rest stays in
 * the input, unread. Returns -1 if c is gone, else 0. */
static int
relay_bev_frame(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	struct evbuffer *out = bufferevent_get_output(c->up.bev);
	size_t len, n, before;
	const uint8_t *buf;
	ssize_t k;

	while (c->frame != NULL && (len = evbuffer_get_length(in)) > 0) {
		n = len < RELAY_FRAME_READ ? len : RELAY_FRAME_READ;
		buf = evbuffer_pullup(in, (ssize_t)n);
		if (buf == NULL) {
			conn_tunnel_done(c, VR_RESOURCE, "out of memory");
			return -1;
		}
		before = evbuffer_get_length(out);
		k = bind_frame(c, buf, n, relay_emit_bev, out);
		if (k < 0)
			return -1;
		c->up.bytes += evbuffer_get_length(out) - before;
		evbuffer_drain(in, (size_t)k);
		if ((size_t)k < n) {
			conn_half_read(&c->down, false); /* bind_upgrade_answer resumes it */
			return 0;
		}
	}
	/* No longer framed (upgraded, or audit mode): the rest as it is. */
	if (c->frame == NULL && evbuffer_get_length(in) > 0)
		return relay_bev_move(c, &c->down);
	if (evbuffer_get_length(out) >= CONN_HIGH_WATER)
		conn_half_read(&c->down, false); /* resumed by relay_bev_write */
	return 0;
}

/* The upgrade is answered: the upstream's bytes go on, and so do the
 * client's that waited. Returns -1 if c is gone, else 0. */
static int
relay_bev_answered(struct conn *c)
{
	if (relay_bev_move(c, &c->up) != 0)
		return -1;
	if (!c->down.eof)
		conn_half_read(&c->down, true);
	if (evbuffer_get_length(bufferevent_get_input(c->down.bev)) > 0 &&
	    relay_bev_move(c, &c->down) != 0)
		return -1;
	return relay_bev_shut(c, &c->up);
}

/* Move what from has read to its peer's output. Returns -1 if the
 * connection was closed (c is gone), 0 otherwise. */
static int
relay_bev_move(struct conn *c, struct conn_half *from)
{
	struct conn_half *to = from->peer;
	struct evbuffer *in = bufferevent_get_input(from->bev);
	struct evbuffer *out = bufferevent_get_output(to->bev);
	size_t n, pass = SIZE_MAX;

	conn_touch(c);
	/* The client's bytes after a decision are looked at before they go
	 * (bind.c): only what was looked at goes. */
	if (from == &c->down && c->bind_watch && bind_tunnel_read(c, &pass) != 0)
		return -1;
	if (from == &c->down && !c->bind_watch && c->frame != NULL)
		return relay_bev_frame(c);
	if (from == &c->up && relay_upgrade_wait(c)) {
		if (bind_upgrade_answer(c, &pass) != 0)
			return -1;
		if (!relay_upgrade_wait(c))
			return relay_bev_answered(c);
	}
	n = evbuffer_get_length(in);
	if (n > pass)
		n = pass;
	to->bytes += n;
	if (n > 0 && evbuffer_get_length(out) == 0) {
		/* Straight to the socket, as the CONNECT reply: nothing is
		 * queued before them, and a tunnel whose buffers are then
		 * empty splices from this callback (relay_bev_read) instead
		 * of after a round through the loop for writability. What the
		 * socket does not take (or an error, which the bufferevent
		 * then reports) is queued as before. */
		ssize_t w = relay_send_direct(to->fd, in, n);

		n -= (size_t)w;
	}
	if (conn_queue_move(out, in, n) != 0) {
		conn_tunnel_done(c, VR_RESOURCE, "out of memory");
		return -1;
	}
	if (evbuffer_get_length(out) >= CONN_HIGH_WATER)
		conn_half_read(from, false); /* resumed by relay_bev_write */
	return 0;
}

static void
relay_bev_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (relay_bev_move(c, half_of(c, bev)) == 0)
		relay_maybe_splice(c);
}

static void
relay_bev_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct conn_half *to = half_of(c, bev), *from = to->peer;

	conn_touch(c);
	if (!from->eof && !(from == &c->down && relay_upgrade_wait(c)))
		conn_half_read(from, true);
	if (relay_bev_shut(c, to) != 0)
		return;
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		relay_maybe_splice(c);
}

static void
relay_bev_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	struct conn_half *from = half_of(c, bev);

	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		from->eof = true;
		/* Anything read before the FIN is already queued. */
		if (relay_bev_move(c, from) != 0)
			return;
		relay_bev_shut(c, from->peer);
		return;
	}
	/* A reset (or another error) is passed on as a reset. */
	conn_abort(c, relay_why(from == &c->up, EVUTIL_SOCKET_ERROR()), NULL);
}

/* Writing on: libevent's bufferevent_enable(EV_WRITE) watches for
 * writability even with nothing to write, and the first writable wake-up
 * takes the watch away again (two epoll_ctl per socket for nothing).
 * A bufferevent is made with EV_WRITE enabled, and one enabled starts
 * watching by itself once bytes are queued; so enable only when it is
 * not, or when bytes wait already. */
static void
relay_want_write(struct bufferevent *bev)
{
	if ((bufferevent_get_enabled(bev) & EV_WRITE) == 0 ||
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0)
		bufferevent_enable(bev, EV_WRITE);
}

void
relay_start(struct conn *c)
{
	conn_enter_tunnel(c);
	/* Nothing queued either way (the usual case): straight to splice,
	 * without enabling events that would only be taken away again. */
	relay_maybe_splice(c);
	if (c->relay != NULL)
		return;
	bufferevent_setcb(c->down.bev, relay_bev_read, relay_bev_write, relay_bev_event, c);
	bufferevent_setcb(c->up.bev, relay_bev_read, relay_bev_write, relay_bev_event, c);
	/* While the first bytes are looked at, they wait in the input, no
	 * more of them than a look can need (bind.c lifts the cap). */
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, c->bind_watch ? PEEK_MAX_INPUT : 0);
	bufferevent_setwatermark(c->up.bev, EV_READ, 0, 0);
	/* Write callbacks fire when the peer's queue is half drained. */
	bufferevent_setwatermark(c->down.bev, EV_WRITE, CONN_HIGH_WATER / 2, 0);
	bufferevent_setwatermark(c->up.bev, EV_WRITE, CONN_HIGH_WATER / 2, 0);
	relay_want_write(c->down.bev);
	relay_want_write(c->up.bev);
	conn_half_read(&c->down, true);
	conn_half_read(&c->up, true);
	/* Bytes the client sent early (after CONNECT, or the sniffed
	 * ClientHello) go first. */
	if (evbuffer_get_length(bufferevent_get_input(c->down.bev)) > 0)
		relay_bev_read(c->down.bev, c);
	else
		relay_maybe_splice(c);
}
