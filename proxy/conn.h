/* Internal to proxy/: the proxy object, one connection with its two
 * symmetric halves, and the functions the files of this module share.
 *
 *   proxy.c     listeners, accept, limits
 *   conn.c      the per-connection state machine, decisions, replies, log
 *   sniff.c     transparent: SNI / Host / no name from the first bytes
 *   forward.c   explicit absolute-form HTTP: one exchange at a time
 *   upstream.c  the upstream socket, asked of the broker (broker/client.h)
 *   relay.c     tunnel bytes both ways: bufferevents, then splice(2)
 *   bind.c      the first bytes after a decision must name what was decided,
 *               and so must every ClientHello and HTTP/1 request after them
 *   http.c      request/response heads (pure)   sni.c  ClientHello (pure)
 *   h1frame.c   a connection's HTTP/1 requests, one after the other (pure)
 */
#ifndef AIRLOCK_PROXY_CONN_H
#define AIRLOCK_PROXY_CONN_H

#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "common/membudget.h"
#include "policy/verdict.h"
#include "proxy/http.h"
#include "proxy/proxy.h"

struct bufferevent;
struct event;
struct evconnlistener;
struct evbuffer;
struct fdres;
struct h1frame;
struct relay;

#define PROXY_DEFAULT_MAX_CONNS  8192
#define PROXY_DEFAULT_CONNECT_MS 10000
#define PROXY_DEFAULT_IDLE_MS    300000
#define PROXY_DEFAULT_HEADER_MS  10000
/* An origin that accepted and says nothing: 504 after this (squid's
 * read_timeout is 15 min, nginx's proxy_read_timeout 60 s). */
#define PROXY_DEFAULT_RESPONSE_MS 60000
/* Transparent: how long a silent client is given before it is taken for a
 * server-speaks-first protocol (ssh banner exchange, SMTP, ...). */
#define PROXY_SNIFF_SILENT_MS 300
/* A reply (403, 502, alert) gets this long to drain before a hard close. */
#define CONN_REPLY_MS 5000
/* Longest URL kept for the log. */
#define CONN_URL_MAX 1024
/* Per-direction buffering cap before reading that side pauses: what the
 * source side's input and the other side's output (or the direction's
 * pipe) hold together, plus at most one read (EVBUFFER_MAX_READ, 4 KiB). */
#define CONN_HIGH_WATER (256 * 1024)
/* The global cap on queued bytes: this much per connection --max-conns
 * allows, and never more than PROXY_MAX_QUEUED (256 MiB at the default
 * 8192 connections, either way). A connection may still queue up to
 * 2 x CONN_HIGH_WATER as long as the total stays under the cap. */
#define PROXY_QUEUED_PER_CONN (32 * 1024)
#define PROXY_MAX_QUEUED      ((size_t)256 * 1024 * 1024)
/* Spare empty pipes kept for splice. */
#define PROXY_PIPE_POOL 32

union conn_addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

struct proxy_listener {
	struct proxy *px;
	struct evconnlistener *lev;
	enum proxy_listener_kind kind;
};

TAILQ_HEAD(conn_list, conn);

struct proxy {
	struct event_base *px_base;
	struct proxy_config px_cfg;
	struct proxy_listener *px_listeners;
	size_t px_n_listeners;
	struct event *px_resume;    /* re-enables accepting after EMFILE */
	struct event *px_log_dead;  /* closes every connection once the log fails */
	struct event *px_log_check; /* notices a log failure nobody here caused */
	struct membudget *px_queue; /* every connection's queued bytes */
	struct fdres *px_fds;       /* descriptors kept for the DNS listener, the log */
	bool px_fd_starved;         /* said so; cleared by the next clean accept */
	struct conn_list px_conns;
	/* Connections whose request the broker's client could not take
	 * (max in flight, or its socket full), oldest first: each reply
	 * makes room, and sends from here (upstream.c). */
	TAILQ_HEAD(, conn) px_broker_wait;
	unsigned px_n_conns;
	uint64_t px_over_limit; /* refused at the limit since it was reached */
	uint64_t px_next_id;
	bool px_said_log_failed;
	/* A listener would not take TCP_NODELAY, which accepted sockets
	 * inherit from it (Linux): each accepted one is then set itself. */
	bool px_nodelay_each;
	bool px_said_broker_gone;
	/* Empty pipes for splice, shared: a tunnel holds one only while
	 * bytes wait in it, so idle tunnels cost no pipe descriptors. */
	int px_pipes[PROXY_PIPE_POOL][2];
	size_t px_pipe_cap[PROXY_PIPE_POOL]; /* bytes each pipe holds */
	size_t px_n_pipes;
};

enum conn_state {
	CONN_HEAD,    /* explicit: reading a request head */
	CONN_SNIFF,   /* transparent: peeking at the first bytes */
	CONN_CONNECT, /* waiting for the broker: it resolves and connects */
	CONN_TUNNEL,  /* relaying bytes both ways (CONNECT, transparent) */
	CONN_HTTP,    /* forwarding one request and its response */
	CONN_REPLY,   /* our own reply (403, 502, TLS alert) drains, then close */
};

/* What the log's kind says the connection is. */
enum conn_kind {
	CONN_KIND_NONE = 0, /* nothing asked yet (an explicit client's first bytes) */
	CONN_KIND_CONNECT,
	CONN_KIND_HTTP,
	CONN_KIND_TLS,    /* transparent: a ClientHello that named a server */
	CONN_KIND_TCP,    /* transparent: no name */
	CONN_KIND_SOCKS5, /* explicit: a SOCKS5 CONNECT (first byte 5) */
};

/* Where a SOCKS5 client is (RFC 1928). */
enum conn_socks {
	CONN_SOCKS_GREETING = 0, /* its methods, next */
	CONN_SOCKS_AUTH,         /* RFC 1929 user name and password, next */
	CONN_SOCKS_REQUEST,      /* its request, next */
	CONN_SOCKS_ASKED,        /* request read: every refusal owes a reply */
};

/* One side of a connection. The half owns fd; bev borrows it. */
struct conn_half {
	struct conn *c;
	struct conn_half *peer;
	int fd;
	struct bufferevent *bev;
	struct membudget_share q; /* what bev's buffers hold, on px_queue */
	uint64_t bytes;           /* bytes written towards this side */
	bool rd_want;             /* the connection wants this side read */
	bool eof;                 /* this side sent FIN */
	bool shut;                /* we shut down writing towards this side */
};

/* HTTP forwarding state for one request/response exchange. */
struct conn_http {
	enum http_framing req_framing, resp_framing;
	uint64_t req_left, resp_left; /* Content-Length bytes still to move */
	struct http_chunked req_chunks, resp_chunks;
	bool req_done;       /* request body fully forwarded */
	bool resp_head_done; /* final response head sent to the client */
	bool head_request;
	bool client_close; /* client asked to close, or HTTP/1.0 */
	bool server_close; /* close-delimited body or Connection: close */
	char *out_head;    /* rewritten request head awaiting the connect */
	size_t out_len;
	uint8_t socks_rep; /* SOCKS5: the reply a bad request is owed, 0 = general */
};

struct conn {
	TAILQ_ENTRY(conn) entry;
	struct proxy *px;
	uint64_t id;
	enum conn_state state;
	enum proxy_listener_kind lkind;
	struct conn_half down; /* the sandbox (client) side */
	struct conn_half up;   /* the upstream side, fd -1 until connected */
	struct event *timer;   /* header deadline, sniff wait, idle, reply */
	uint64_t start_ms, last_ms;
	struct relay *relay; /* splice state once the tunnel switched */
	uint32_t broker_id;  /* the broker's request while it is out, else 0 */
	bool broker_waiting; /* on px_broker_wait */
	TAILQ_ENTRY(conn) wait_entry;

	/* What is being asked, for the decision and the log. */
	enum conn_kind kind;
	char host[HTTP_HOST_MAX];
	uint16_t port;
	bool ip_literal;
	bool has_name;         /* transparent: SNI or Host found */
	bool tls;              /* transparent: the client speaks TLS */
	bool ech;              /* transparent: its ClientHello has encrypted_client_hello */
	bool logged;           /* the log line for this exchange is written */
	bool served_http;      /* an HTTP exchange has ended here: no SOCKS5 after it */
	enum conn_socks socks; /* CONN_KIND_SOCKS5 only */
	/* CONNECT, or transparent decided without a name: the client's
	 * first bytes in the tunnel are still to be looked at (bind.c);
	 * until then nothing of them goes up, and the tunnel stays on
	 * bufferevents; a TLS tunnel's later handshake records (bind_tls)
	 * are watched on either (relay.c splices them). */
	bool bind_watch;
	uint64_t bind_since_ms; /* when a head began to come while watched; 0 before */
	bool bind_tls;          /* transparent TLS: every plaintext ClientHello is read */
	bool bind_ccs;          /* the client sent change_cipher_spec */
	bool bind_fin;          /* a handshake record after it went (TLS 1.2's Finished) */
	bool reply_alert;       /* a refusal answers with a TLS alert (bind.c) */
	/* Owned: the client's HTTP/1 requests, every one framed and its
	 * name checked (bind.c); NULL on a connection that is not HTTP/1,
	 * and again once a WebSocket upgrade is answered with 101. */
	struct h1frame *frame;
	bool bind_unnamed; /* the first ClientHello watched had no SNI */
	char method[16];
	char *url;            /* malloc'd, capped; HTTP only */
	char client[INET6_ADDRSTRLEN + 8]; /* log_client: "ip:port" or "[ip]:port"; "" */
	union conn_addr orig; /* transparent: SO_ORIGINAL_DST */
	bool has_orig;
	union conn_addr dst; /* the address dialled */
	bool has_dst;
	char up_host[HTTP_HOST_MAX]; /* host:port the open upstream serves */
	uint16_t up_port;

	/* The decision, copied so the policy may go away first. */
	bool decided; /* verdict is set; a line without one says deny */
	enum verdict verdict;
	char rule[128];
	enum verdict_reason why; /* the log's reason (VR_NONE: none) */
	char detail[320];        /* its sentence for people (printable ASCII) */

	struct conn_http http;
};

/* conn.c */
/* sa: the client's address as accept gave it (NULL: not known). */
void conn_accept(struct proxy *px, int fd, const struct sockaddr *sa, socklen_t salen,
                 enum proxy_listener_kind kind);
/* The one teardown: logs (once), frees both halves, the relay, timers. */
void conn_close(struct conn *c);
/* The only place c->state changes (logged at debug level). Entering s
 * sets what runs in it: the callbacks and watermarks of the halves conn.c
 * serves in s, and c->timer armed for s's limit (none for CONN_CONNECT,
 * which the broker bounds). A tunnel's callbacks are the relay's
 * (relay_start). */
void conn_enter(struct conn *c, enum conn_state s);
/* Re-arm c->timer within the current state (a deadline moved, a look
 * started); what it means depends on the state. */
void conn_timer_in(struct conn *c, uint64_t ms);
/* Write the egress log line for this connection or exchange, once. */
void conn_log(struct conn *c);
/* Give h the bufferevent made on h->fd (h takes ownership): its buffers
 * are charged to the proxy's queue budget from now on. */
void conn_half_set_bev(struct conn_half *h, struct bufferevent *bev);
/* Free h's bufferevent (what it held is given back); the fd stays. */
void conn_half_drop_bev(struct conn_half *h);
/* Free a half's bufferevent and close its fd; tolerates an empty half. */
void conn_half_free(struct conn_half *h);
/* Whether h's socket is read: on when the connection wants it, and
 * granted while the proxy's queued bytes are under the global cap (the
 * proxy's resume turns wanted reads back on). Every EV_READ enabling in
 * the proxy goes through here. */
void conn_half_read(struct conn_half *h, bool on);
/* Move n bytes (src holds at least n) from src to dst, which is queued
 * for writing. Copied rather than relinked: a read leaves its bytes in a
 * chain twice their size, and relinking would keep that slack in dst for
 * as long as the writer is slow. 0, or -1 when out of memory (some bytes
 * may have moved: the connection cannot go on). */
int conn_queue_move(struct evbuffer *dst, struct evbuffer *src, size_t n);
/* Drop the upstream, drain what is queued for the client, then close. */
void conn_finish(struct conn *c);
/* Policy on c->host and c->port; false after refusing (c may be gone). */
bool conn_decide_name(struct conn *c);
/* Set c->host from an untrusted name (IP literal or normalised DNS name);
 * 0, or -1 with a static reason in *why. */
int conn_set_host(struct conn *c, const char *name, bool ip_literal, const char **why);
/* conn.c: the log's method and url from a parsed head h of the bytes s
 * (cut to their fields' sizes): the explicit proxy's and the sniffer's. */
struct http_head;
void conn_set_method_url(struct conn *c, const char *s, const struct http_head *h);
/* Transparent without a name: a cidr rule decides (a deny is final); only
 * when none speaks of the address and port, the DNS cache's name does. */
void conn_decide_noname(struct conn *c);
/* Ask the broker for the upstream; the connection parks in CONN_CONNECT. */
void conn_start_resolve(struct conn *c);
/* Explicit: parse the request head buffered so far and act on it. */
void conn_head_read(struct conn *c);
void conn_touch(struct conn *c);
/* conn_enter(c, CONN_TUNNEL): the idle timer runs (relay.c). */
void conn_enter_tunnel(struct conn *c);
/* Called by upstream.c: c->up holds the connected socket. */
void conn_connected(struct conn *c);
/* Refuse for why with the HTTP status and Proxy-Status error its row of
 * the table gives (policy/verdict.h), a TLS alert or a reset, as fits the
 * connection; log, drain, close. fmt (NULL: the reason's own sentence)
 * makes the detail for the log and the client. c is gone. */
void conn_refuse(struct conn *c, enum verdict_reason why, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Set the log's reason (VR_NONE: none) and its detail (NULL: the
 * reason's own sentence), replacing what was there. */
void conn_set_why(struct conn *c, enum verdict_reason why, const char *detail);
/* Refuse because the proxy itself is out of something (what: "out of
 * file descriptors"): 503, Proxy-Status proxy_internal_error, the reason
 * "resource limit: ..." — never the destination's fault. c is gone. */
void conn_refuse_resource(struct conn *c, const char *what);
/* Called by relay.c when both directions are finished or failed; why
 * (VR_NONE: none) and detail as for conn_set_why. c is gone. */
void conn_tunnel_done(struct conn *c, enum verdict_reason why, const char *detail);
/* One side reset (or failed): close both with a reset (SO_LINGER {1, 0})
 * so the other learns that what it got is cut, never a clean end; why
 * becomes the log's reason unless one is set. c is gone. */
void conn_abort(struct conn *c, enum verdict_reason why, const char *detail);

/* sniff.c: decide a transparent connection from its first bytes; with
 * timed_out, decide on what is there. */
void sniff_decide(struct conn *c, bool timed_out);

/* bind.c: c->bind_watch is set and c->down's input has bytes (or the
 * client ended): look at them. Returns 0 with *pass the bytes that may
 * go now (SIZE_MAX: all; the look is over once c->bind_watch is cleared,
 * in audit mode also after a logged refusal; the rest waits where it is),
 * or -1 after refusing the connection (c is gone). */
int bind_tunnel_read(struct conn *c, size_t *pass);
/* The same for a TLS connection whose handshake records are watched
 * (c->bind_tls), on bytes wherever they wait: buf[0..len), the client's
 * bytes from a record boundary on (a bufferevent's input, or a spliced
 * tunnel's, relay.c). c->down.eof says whether more can come. */
int bind_tls_scan(struct conn *c, const uint8_t *buf, size_t len, size_t *pass);
/* The tunnel's timer, while c->bind_watch: a head that began to come
 * header_timeout_ms ago and is still not complete is refused (-1, c is
 * gone); else 0, with *next_ms lowered to when to look again. */
int bind_tunnel_timer(struct conn *c, uint64_t now, uint64_t *next_ms);
/* Frame the client's requests from where its bytes stand now (a head
 * must come first): 0, or -1 when out of memory (c untouched). */
int bind_frame_start(struct conn *c);
/* The one place c->frame is freed; tolerates none. */
void bind_frame_free(struct conn *c);
/* Where the framer puts bytes that may go: emit(arg, p, n) appends them
 * after what went before; 0, or -1 (then the connection cannot go on). */
typedef int bind_emit_fn(void *arg, const void *p, size_t n);
/* Frame buf[0..len), the client's next bytes (c->frame set): each head's
 * name must be c's (or, on a connection a cidr rule let through without
 * one, is decided as if it had come first), each run of bytes that may go
 * is given to emit, in order. Returns the bytes consumed: all of them, or
 * fewer while a WebSocket upgrade waits for its answer (the rest must
 * wait where it is); -1 after refusing (c is gone). c->frame may be gone
 * after (audit mode, the connection no longer framed). */
ssize_t bind_frame(struct conn *c, const uint8_t *buf, size_t len, bind_emit_fn *emit, void *arg);
/* c->frame waits for the answer to a WebSocket upgrade: look at the
 * upstream's input (a response head; interim 1xx heads pass). Returns 0
 * with *pass the upstream bytes that may go (SIZE_MAX once answered:
 * 101 ends framing, anything else goes back to it), or -1 if c is gone. */
int bind_upgrade_answer(struct conn *c, size_t *pass);

/* forward.c */
/* An absolute-form request head (s, h): check, rewrite, decide, connect. */
void forward_request(struct conn *c, const char *s, const struct http_head *h);
/* The upstream is connected: send the head and start the exchange. */
void forward_start(struct conn *c);
void forward_pump_request(struct conn *c);
void forward_pump_response(struct conn *c);
void forward_upstream_event(struct conn *c, short what);
/* c's timer in CONN_HTTP: 504 http_response_timeout for an origin silent
 * for response_timeout_ms before its response head, the idle timeout
 * after it. c may be gone. */
void forward_timer(struct conn *c, uint64_t now);

/* upstream.c */
/* Ask the broker for c's upstream: c->host (a name, or an IP literal) and
 * c->port, or for a transparent connection the original destination, which
 * a name must resolve to. Its reply calls conn_connected() or refuses c.
 * Returns 0, or -1 after refusing the connection (c is gone). */
int upstream_request(struct conn *c);
/* The broker's client has room again (broker_client_set_room's fn; arg
 * is the proxy): the connections waiting for it send, oldest first. */
void upstream_room(void *arg);
/* Audit mode: mark c audit-deny if a deny cidr rule covers a, the address
 * of an upstream kept open for the next request, and nothing else marked
 * it already. */
void upstream_mark_audit(struct conn *c, const union conn_addr *a);
/* The connection is gone or moves on: its request's reply, when it comes,
 * is dropped (and its socket closed). */
void upstream_cancel(struct conn *c);
/* proxy.c: descriptors ran out (EMFILE/ENFILE, or the reserve could not be
 * made whole). Pauses accepting for a while, gives the spare pipes back,
 * and says so once until a connection is accepted cleanly again. */
void proxy_fd_starved(struct proxy *px);
/* proxy.c: the egress log has failed. Says so once and closes every open
 * connection soon after (from the loop, never under the caller's feet),
 * each through conn_close(). Nothing goes on unlogged: fail closed. */
void proxy_log_failed(struct proxy *px);
socklen_t conn_addr_len(const union conn_addr *a);
/* "ip" text of an address. */
void conn_addr_str(const union conn_addr *a, char *out, size_t outlen);
bool conn_addr_eq(const union conn_addr *a, const union conn_addr *b);
/* Turn an IPv4-mapped IPv6 address (::ffff:a.b.c.d) into the AF_INET
 * address it is, port kept; anything else is left as it is. Every address
 * the proxy compares or guards goes through this first, so one host never
 * has two spellings. */
void conn_addr_unmap(union conn_addr *a);
/* *a = the numeric IPv4 or IPv6 address text, unmapped, with port; false
 * (and *a zero) if text is not one. */
bool conn_addr_parse(union conn_addr *a, const char *text, uint16_t port);

/* relay.c */
/* Relay bytes between c->down and c->up until both sides are done. */
void relay_start(struct conn *c);
void relay_free(struct conn *c);
/* The queue budget is over / under again: stop / restart the splice
 * relay's reads (the bufferevents' go through conn_half_read). */
/* A refusal on a spliced connection (bind.c): put a bufferevent back on
 * c->down for the reply, the splice state freed, if nothing is on its way
 * to the client. 0, or -1 (nothing changed: a reset is all that fits). */
int relay_reply_bev(struct conn *c);
void relay_pause(struct conn *c);
void relay_resume(struct conn *c);
/* The record watch ended outside the relay (bind_tunnel_timer, audit
 * mode): the client's bytes it held go from the loop. Only on a spliced
 * tunnel. */
void relay_watch_flush(struct conn *c);

#endif
