/* Tunnel relay. It starts on the bufferevents the connection already has
 * (they may hold a CONNECT reply or pipelined bytes), with watermarks for
 * backpressure; as soon as every buffer is empty it drops them and moves
 * bytes kernel-side with splice(2) through one pipe per direction, created
 * on first use, so an idle tunnel costs two sockets and a few events.
 * Half-close is kept: EOF from one side becomes shutdown(SHUT_WR) on the
 * other once everything before it is delivered. */
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

#include "common/log.h"
#include "common/util.h"

/* Bytes moved per splice call, and calls per wake-up before yielding to
 * other connections. */
#define RELAY_CHUNK  (1024 * 1024)
#define RELAY_ROUNDS 16

/* One direction: from src's socket to dst's socket. */
struct relay_dir {
	struct conn_half *src, *dst;
	struct event *ev_read;  /* src readable */
	struct event *ev_write; /* dst writable */
	int pipe[2];
	size_t cap;        /* the pipe's capacity */
	size_t in_pipe;    /* bytes read from src, not yet written to dst */
	bool read_blocked; /* pipe full (or src empty) with bytes in it: read
	                    * again after the next write makes room */
	bool eof, done;
};

struct relay {
	struct conn *c;
	struct relay_dir dir[2]; /* [0] down -> up, [1] up -> down */
};

static void relay_bev_read(struct bufferevent *bev, void *arg);
static void relay_bev_write(struct bufferevent *bev, void *arg);
static void relay_bev_event(struct bufferevent *bev, short what, void *arg);

static struct conn_half *
half_of(struct conn *c, struct bufferevent *bev)
{
	return bev == c->down.bev ? &c->down : &c->up;
}

/* Take an empty pipe from the proxy's pool, or make one. */
static int
relay_pipe_get(struct proxy *px, struct relay_dir *d)
{
	int sz;

	if (px->px_n_pipes > 0) {
		px->px_n_pipes--;
		d->pipe[0] = px->px_pipes[px->px_n_pipes][0];
		d->pipe[1] = px->px_pipes[px->px_n_pipes][1];
		d->cap = px->px_pipe_cap[px->px_n_pipes];
		return 0;
	}
	if (pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		return -1;
	/* A larger pipe lets reading run ahead of a slow writer and moves a
	 * bulk transfer in fewer calls; pipes only live while bytes are in
	 * flight, so this costs idle tunnels nothing. Failure (a lower
	 * fs.pipe-max-size) keeps the default size. */
	(void)fcntl(d->pipe[1], F_SETPIPE_SZ, RELAY_CHUNK);
	sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
	d->cap = sz > 0 ? (size_t)sz : 65536;
	return 0;
}

/* Give the direction's pipe back once it is empty; a pipe with bytes in
 * it (or unknown contents) is closed instead. */
static void
relay_pipe_put(struct proxy *px, struct relay_dir *d)
{
	if (d->pipe[0] < 0)
		return;
	if (d->in_pipe == 0 && px->px_n_pipes < PROXY_PIPE_POOL) {
		px->px_pipes[px->px_n_pipes][0] = d->pipe[0];
		px->px_pipes[px->px_n_pipes][1] = d->pipe[1];
		px->px_pipe_cap[px->px_n_pipes] = d->cap;
		px->px_n_pipes++;
		d->pipe[0] = d->pipe[1] = -1;
		return;
	}
	fd_close(&d->pipe[0]);
	fd_close(&d->pipe[1]);
}

static void
relay_dir_free(struct proxy *px, struct relay_dir *d)
{
	if (d->ev_read != NULL)
		event_free(d->ev_read);
	if (d->ev_write != NULL)
		event_free(d->ev_write);
	relay_pipe_put(px, d);
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

/* Move what can be moved in one direction: write what the pipe holds,
 * read more while it has room, so reading src overlaps a slow dst instead
 * of waiting for it. Returns -1 if the connection was closed (c is gone),
 * 0 otherwise. Events are left armed for exactly what is still to do. */
static int
relay_pump(struct relay *r, struct relay_dir *d)
{
	struct conn *c = r->c;

	for (int round = 0; round < RELAY_ROUNDS; round++) {
		bool progress = false;
		ssize_t n;

		if (d->in_pipe > 0) {
			n = splice(d->pipe[0], NULL, d->dst->fd, NULL, d->in_pipe,
			           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				d->in_pipe -= (size_t)n;
				d->dst->bytes += (uint64_t)n;
				d->read_blocked = false;
				progress = true;
			} else if (n == 0 || errno != EAGAIN) {
				conn_tunnel_done(c, d->dst == &c->up ? "upstream write failed"
				                                     : "client write failed");
				return -1;
			}
		}
		if (!d->eof && !d->read_blocked && (d->pipe[0] < 0 || d->in_pipe < d->cap)) {
			if (d->pipe[0] < 0 && relay_pipe_get(c->px, d) != 0) {
				log_warn("proxy: pipe2 for splice");
				conn_tunnel_done(c, "out of file descriptors");
				return -1;
			}
			n = splice(d->src->fd, NULL, d->pipe[1], NULL, d->cap - d->in_pipe,
			           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				d->in_pipe += (size_t)n;
				progress = true;
			} else if (n == 0) {
				d->eof = true;
				d->src->eof = true;
				progress = true;
			} else if (errno != EAGAIN) {
				conn_tunnel_done(c, d->src == &c->up ? "upstream connection reset"
				                                     : "client connection reset");
				return -1;
			} else if (d->in_pipe > 0) {
				/* src empty or the pipe's slots full: either way
				 * the next write is when to try again. */
				d->read_blocked = true;
			} else {
				/* Nothing to read and the pipe is empty: return
				 * it to the pool until bytes come. */
				relay_pipe_put(c->px, d);
			}
		}
		if (d->eof && d->in_pipe == 0) {
			/* Everything before the FIN is delivered: pass it on. */
			relay_pipe_put(c->px, d);
			shutdown(d->dst->fd, SHUT_WR);
			d->dst->shut = true;
			d->done = true;
			event_del(d->ev_read);
			event_del(d->ev_write);
			if (r->dir[0].done && r->dir[1].done) {
				conn_tunnel_done(c, NULL);
				return -1;
			}
			return 0;
		}
		if (progress)
			conn_touch(c);
		else
			break;
	}
	if (d->in_pipe > 0)
		event_add(d->ev_write, NULL);
	else
		event_del(d->ev_write);
	if (!d->eof && !d->read_blocked && (d->pipe[0] < 0 || d->in_pipe < d->cap))
		event_add(d->ev_read, NULL);
	else
		event_del(d->ev_read);
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
	for (int i = 0; i < 2; i++) {
		struct relay_dir *d = &r->dir[i];
		event_callback_fn fn = i == 0 ? relay_ready0 : relay_ready1;

		d->src = i == 0 ? &c->down : &c->up;
		d->dst = i == 0 ? &c->up : &c->down;
		d->pipe[0] = d->pipe[1] = -1;
		d->ev_read = event_new(base, d->src->fd, EV_READ | EV_PERSIST, fn, r);
		d->ev_write = event_new(base, d->dst->fd, EV_WRITE | EV_PERSIST, fn, r);
		if (d->ev_read == NULL || d->ev_write == NULL) {
			relay_dir_free(c->px, &r->dir[0]);
			relay_dir_free(c->px, &r->dir[1]);
			free(r);
			return;
		}
	}
	bufferevent_free(c->down.bev);
	c->down.bev = NULL;
	bufferevent_free(c->up.bev);
	c->up.bev = NULL;
	c->relay = r;
	event_add(r->dir[0].ev_read, NULL);
	event_add(r->dir[1].ev_read, NULL);
}

static void
relay_maybe_splice(struct conn *c)
{
	if (c->relay != NULL || c->down.eof || c->up.eof || c->down.bev == NULL ||
	    c->up.bev == NULL)
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
	shutdown(to->fd, SHUT_WR);
	to->shut = true;
	if (c->down.shut && c->up.shut) {
		conn_tunnel_done(c, NULL);
		return -1;
	}
	return 0;
}

static void
relay_bev_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct conn_half *from = half_of(c, bev), *to = from->peer;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer *out = bufferevent_get_output(to->bev);
	size_t n = evbuffer_get_length(in);

	conn_touch(c);
	to->bytes += n;
	evbuffer_add_buffer(out, in);
	if (evbuffer_get_length(out) >= CONN_HIGH_WATER)
		bufferevent_disable(bev, EV_READ); /* resumed by relay_bev_write */
}

static void
relay_bev_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct conn_half *to = half_of(c, bev), *from = to->peer;

	conn_touch(c);
	if (!from->eof)
		bufferevent_enable(from->bev, EV_READ);
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
		relay_bev_read(bev, c);
		relay_bev_shut(c, from->peer);
		return;
	}
	conn_tunnel_done(c,
	                 from == &c->up ? "upstream connection error" : "client connection error");
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
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
	bufferevent_setwatermark(c->up.bev, EV_READ, 0, 0);
	/* Write callbacks fire when the peer's queue is half drained. */
	bufferevent_setwatermark(c->down.bev, EV_WRITE, CONN_HIGH_WATER / 2, 0);
	bufferevent_setwatermark(c->up.bev, EV_WRITE, CONN_HIGH_WATER / 2, 0);
	bufferevent_enable(c->down.bev, EV_READ | EV_WRITE);
	bufferevent_enable(c->up.bev, EV_READ | EV_WRITE);
	/* Bytes the client sent early (after CONNECT, or the sniffed
	 * ClientHello) go first. */
	if (evbuffer_get_length(bufferevent_get_input(c->down.bev)) > 0)
		relay_bev_read(c->down.bev, c);
	else
		relay_maybe_splice(c);
}
