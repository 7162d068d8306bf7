/* Listeners, accepting, limits. */
#include "proxy/conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "broker/client.h"
#include "common/fdres.h"
#include "common/log.h"
#include "common/membudget.h"
#include "common/util.h"
#include "elog/elog.h"

/* After EMFILE/ENFILE, stop accepting this long rather than spin on a
 * listener the kernel keeps reporting readable. */
#define PROXY_ACCEPT_PAUSE_MS 200
/* How often the egress log is checked while no connection writes to it: a
 * line the DNS server failed to write, or a log pipe whose reader has gone,
 * must end open tunnels too, not only the next connection. */
#define PROXY_LOG_CHECK_MS 1000

void
proxy_log_failed(struct proxy *px)
{
	if (px->px_said_log_failed)
		return;
	px->px_said_log_failed = true;
	log_warnx("proxy: the egress log cannot be written; closing every connection and "
	          "refusing new ones");
	event_active(px->px_log_dead, 0, 0);
}

/* Every connection still open when the log failed ends now: tunnels and
 * kept-alive clients would otherwise go on moving bytes no line records.
 * One already answering with its own reply (CONN_REPLY) forwards nothing
 * and ends on its own within CONN_REPLY_MS; closing it here would only cut
 * that reply. */
static void
proxy_close_all(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	struct conn *c, *next;
	(void)fd;
	(void)what;

	for (c = TAILQ_FIRST(&px->px_conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state == CONN_REPLY)
			continue;
		if (c->why == VR_NONE)
			conn_set_why(c, VR_LOG_FAILED, NULL);
		conn_close(c);
	}
}

static void
proxy_log_check(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	(void)fd;
	(void)what;

	if (!px->px_said_log_failed && elog_failed(px->px_cfg.log))
		proxy_log_failed(px);
}

static void
proxy_resume(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	(void)fd;
	(void)what;

	for (size_t i = 0; i < px->px_n_listeners; i++)
		evconnlistener_enable(px->px_listeners[i].lev);
}

/* Stop accepting for PROXY_ACCEPT_PAUSE_MS (from the loop's timer, not a
 * spin on a listener the kernel keeps reporting readable). */
static void
proxy_pause_accepting(struct proxy *px)
{
	struct timeval tv = {0, PROXY_ACCEPT_PAUSE_MS * 1000};

	for (size_t i = 0; i < px->px_n_listeners; i++)
		evconnlistener_disable(px->px_listeners[i].lev);
	evtimer_add(px->px_resume, &tv);
}

void
proxy_fd_starved(struct proxy *px)
{
	if (!px->px_fd_starved)
		log_warnx("proxy: out of file descriptors (%zu connections open); pausing new "
		          "connections, tunnels copy without splice pipes meanwhile",
		          (size_t)px->px_n_conns);
	px->px_fd_starved = true;
	if (!evtimer_pending(px->px_resume, NULL))
		proxy_pause_accepting(px);
	/* Spare pipes are descriptors nobody uses. */
	while (px->px_n_pipes > 0) {
		px->px_n_pipes--;
		close(px->px_pipes[px->px_n_pipes][0]);
		close(px->px_pipes[px->px_n_pipes][1]);
	}
	fdres_refill(px->px_fds);
}

/* The queue budget reached its cap: no connection reads until it has
 * drained. Only stops reading (membudget.h: this runs inside a charge). */
static void
proxy_queue_pause(void *arg)
{
	struct proxy *px = arg;
	struct conn *c;

	for (c = TAILQ_FIRST(&px->px_conns); c != NULL; c = TAILQ_NEXT(c, entry)) {
		if (c->down.bev != NULL)
			bufferevent_disable(c->down.bev, EV_READ);
		if (c->up.bev != NULL)
			bufferevent_disable(c->up.bev, EV_READ);
		relay_pause(c);
	}
}

static void
proxy_queue_resume(void *arg)
{
	struct proxy *px = arg;
	struct conn *c;

	for (c = TAILQ_FIRST(&px->px_conns); c != NULL; c = TAILQ_NEXT(c, entry)) {
		conn_half_read(&c->down, c->down.rd_want);
		conn_half_read(&c->up, c->up.rd_want);
		relay_resume(c);
	}
}

struct membudget *
proxy_queue_budget(struct proxy *px)
{
	return px->px_queue;
}

struct fdres *
proxy_fd_reserve(struct proxy *px)
{
	return px->px_fds;
}

static void
proxy_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int salen,
             void *arg)
{
	struct proxy_listener *pl = arg;
	(void)lev;

	conn_accept(pl->px, fd, sa, salen > 0 ? (socklen_t)salen : 0, pl->kind);
}

static void
proxy_accept_error(struct evconnlistener *lev, void *arg)
{
	struct proxy_listener *pl = arg;
	struct proxy *px = pl->px;
	int err = EVUTIL_SOCKET_ERROR();
	(void)lev;

	if (err == EMFILE || err == ENFILE) {
		/* Only the reserve is left: new connections wait in the
		 * backlog until descriptors come back. */
		proxy_fd_starved(px);
		return;
	}
	if (err == ENOBUFS || err == ENOMEM) {
		log_warnx("proxy: accept: %s; pausing new connections for %d ms", strerror(err),
		          PROXY_ACCEPT_PAUSE_MS);
		proxy_pause_accepting(px);
		return;
	}
	/* ECONNABORTED and friends concern one client, not the listener. */
	log_debug("proxy: accept: %s", strerror(err));
}

struct proxy *
proxy_new(struct event_base *base, const struct proxy_config *cfg)
{
	struct proxy *px = calloc(1, sizeof(*px));
	struct timeval check = {PROXY_LOG_CHECK_MS / 1000, (PROXY_LOG_CHECK_MS % 1000) * 1000};
	struct membudget_hooks hooks = {proxy_queue_pause, proxy_queue_resume, NULL};
	size_t cap;

	if (px == NULL) {
		log_warn("proxy: allocating the proxy");
		return NULL;
	}
	px->px_base = base;
	px->px_cfg = *cfg;
	TAILQ_INIT(&px->px_conns);
	TAILQ_INIT(&px->px_broker_wait);
	if (px->px_cfg.max_conns == 0)
		px->px_cfg.max_conns = PROXY_DEFAULT_MAX_CONNS;
	if (px->px_cfg.connect_timeout_ms == 0)
		px->px_cfg.connect_timeout_ms = PROXY_DEFAULT_CONNECT_MS;
	if (px->px_cfg.idle_timeout_ms == 0)
		px->px_cfg.idle_timeout_ms = PROXY_DEFAULT_IDLE_MS;
	if (px->px_cfg.header_timeout_ms == 0)
		px->px_cfg.header_timeout_ms = PROXY_DEFAULT_HEADER_MS;
	if (px->px_cfg.response_timeout_ms == 0)
		px->px_cfg.response_timeout_ms = PROXY_DEFAULT_RESPONSE_MS;
	if (cfg->policy == NULL || cfg->log == NULL || cfg->broker == NULL) {
		log_warnx("proxy: a policy, an egress log and the broker are required");
		free(px);
		return NULL;
	}
	px->px_resume = evtimer_new(base, proxy_resume, px);
	px->px_log_dead = event_new(base, -1, 0, proxy_close_all, px);
	px->px_log_check = event_new(base, -1, EV_PERSIST, proxy_log_check, px);
	cap = (size_t)px->px_cfg.max_conns * PROXY_QUEUED_PER_CONN;
	px->px_queue = membudget_new(base, cap < PROXY_MAX_QUEUED ? cap : PROXY_MAX_QUEUED);
	hooks.arg = px;
	px->px_fds = fdres_new(fdres_default_size());
	if (px->px_resume == NULL || px->px_log_dead == NULL || px->px_log_check == NULL ||
	    px->px_queue == NULL || px->px_fds == NULL ||
	    event_add(px->px_log_check, &check) != 0 ||
	    membudget_add_user(px->px_queue, &hooks) != 0) {
		log_warnx("proxy: setting up the proxy failed (out of memory?)");
		if (px->px_resume != NULL)
			event_free(px->px_resume);
		if (px->px_log_dead != NULL)
			event_free(px->px_log_dead);
		if (px->px_log_check != NULL)
			event_free(px->px_log_check);
		membudget_free(px->px_queue);
		fdres_free(px->px_fds);
		free(px);
		return NULL;
	}
	/* A broker reply of any kind makes room for the connections waiting
	 * to ask (upstream.c); proxy_free takes the hook back. */
	broker_client_set_room(cfg->broker, upstream_room, px);
	return px;
}

int
proxy_add_listener(struct proxy *px, int fd, enum proxy_listener_kind kind)
{
	struct proxy_listener *arr;
	struct evconnlistener *lev;

	if (fd_set_nonblock(fd, true) != 0 || fd_set_cloexec(fd, true) != 0) {
		log_warn("proxy: listener fd %d", fd);
		close(fd);
		return -1;
	}
	/* Accepted sockets inherit TCP_NODELAY from their listener on
	 * Linux: set once here, not once per connection (conn_accept). */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) != 0)
		px->px_nodelay_each = true;
	/* Each listener's callback argument must not move: grow a fresh
	 * array and re-point every listener at its new slot. */
	arr = calloc(px->px_n_listeners + 1, sizeof(*arr));
	if (arr == NULL) {
		log_warn("proxy: adding a listener");
		close(fd);
		return -1;
	}
	/* backlog 0: the socket already listens (made by the caller). */
	lev = evconnlistener_new(px->px_base, proxy_accept, NULL,
	                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (lev == NULL) {
		log_warnx("proxy: cannot serve listener fd %d", fd);
		free(arr);
		close(fd);
		return -1;
	}
	if (px->px_n_listeners > 0)
		memcpy(arr, px->px_listeners, px->px_n_listeners * sizeof(*arr));
	free(px->px_listeners);
	px->px_listeners = arr;
	arr[px->px_n_listeners].px = px;
	arr[px->px_n_listeners].lev = lev;
	arr[px->px_n_listeners].kind = kind;
	px->px_n_listeners++;
	for (size_t i = 0; i < px->px_n_listeners; i++) {
		evconnlistener_set_cb(arr[i].lev, proxy_accept, &arr[i]);
		evconnlistener_set_error_cb(arr[i].lev, proxy_accept_error);
	}
	return 0;
}

void
proxy_free(struct proxy *px)
{
	struct conn *c;

	if (px == NULL)
		return;
	broker_client_set_room(px->px_cfg.broker, NULL, NULL);
	for (size_t i = 0; i < px->px_n_listeners; i++)
		evconnlistener_free(px->px_listeners[i].lev);
	free(px->px_listeners);
	/* Connections still open at exit are closed and logged. */
	while ((c = TAILQ_FIRST(&px->px_conns)) != NULL)
		conn_close(c);
	if (px->px_resume != NULL)
		event_free(px->px_resume);
	if (px->px_log_dead != NULL)
		event_free(px->px_log_dead);
	if (px->px_log_check != NULL)
		event_free(px->px_log_check);
	for (size_t i = 0; i < px->px_n_pipes; i++) {
		close(px->px_pipes[i][0]);
		close(px->px_pipes[i][1]);
	}
	log_info("proxy: queued bytes peaked at %zu (the cap is %zu)", membudget_peak(px->px_queue),
	         membudget_cap(px->px_queue));
	membudget_free(px->px_queue);
	fdres_free(px->px_fds);
	free(px);
}
