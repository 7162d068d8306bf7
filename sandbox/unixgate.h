/* The unix socket gate (docs/run.md, Unix sockets): the supervisor's side
 * of the seccomp user notifications that CMD's connect, sendto (with an
 * address), sendmsg and sendmmsg raise. A small pool of threads receives
 * them, copies the call's arguments out of CMD's memory once, takes CMD's
 * socket with pidfd_getfd, decides on the copy and performs the call
 * itself on that socket: the notification is never answered with
 * "continue", so nothing CMD rewrites after the check can change what is
 * done. A pathname AF_UNIX destination is resolved in CMD's view of the
 * filesystem to one inode, which must be a socket bound inside the
 * sandbox's network namespace (CMD's own) or one the policy names
 * (`unix:`); anything else is refused with EACCES and reported. Every
 * other destination (TCP, UDP, abstract and unnamed unix addresses) is
 * passed through unchanged.
 *
 * Threads: the workers share nothing but the immutable config, the
 * unix_diag socket (under a lock) and the write end of the event pipe.
 * Decisions worth a log line reach the caller's thread as fixed-size
 * records on that pipe (ugate_read_event), so the log is written by one
 * thread only. */
#ifndef AIRLOCK_SANDBOX_UNIXGATE_H
#define AIRLOCK_SANDBOX_UNIXGATE_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ugate;

/* A socket the policy opens: the path on the host (stat'ed there at each
 * decision, matched by inode) and where the policy says so. Both
 * borrowed, valid until ugate_free. */
struct ugate_allow {
	const char *path;
	const char *where; /* "file:line" */
};

struct ugate_config {
	const struct ugate_allow *allow; /* borrowed until ugate_free */
	size_t n_allow;
	bool events;           /* report decisions on host sockets (ugate_event_fd) */
	const cpu_set_t *cpus; /* the workers' CPUs (copied); NULL: inherited */
};

enum ugate_verdict {
	UGATE_ALLOW = 1, /* a socket the policy names */
	UGATE_DENY,      /* a socket of the host: EACCES */
};

enum ugate_op {
	UGATE_CONNECT = 1,
	UGATE_SENDTO,
	UGATE_SENDMSG,
	UGATE_SENDMMSG,
};

/* One decision on a host socket, as the worker saw it. The path is the
 * one CMD gave (sun_path, at most 108 bytes, NUL-terminated here). */
#define UGATE_PATH_MAX 109
struct ugate_event {
	uint8_t verdict;   /* enum ugate_verdict */
	uint8_t op;        /* enum ugate_op */
	int32_t sock_type; /* SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET */
	int32_t allow;     /* index into ugate_config.allow; -1 when denied */
	char path[UGATE_PATH_MAX];
};

/* The gate on listener (the seccomp notification fd) with diag (a
 * NETLINK_SOCK_DIAG socket made inside the sandbox's network namespace).
 * Takes ownership of both fds, also on failure; cfg and what it points to
 * are borrowed until ugate_free. NULL with a one-line reason in err. */
struct ugate *ugate_new(int listener, int diag, const struct ugate_config *cfg, char *err,
                        size_t errlen);

/* Start its workers: apart from ugate_new so that the threads are made
 * after the go, while CMD is being exec'd (CMD's calls wait in the kernel
 * until a worker takes them). 0, or -1 with a one-line reason: CMD's
 * connect and send calls would then wait for ever, so the caller must end
 * the sandbox. */
int ugate_start(struct ugate *g, char *err, size_t errlen);

/* Readable when events are queued (cfg.events); -1 without events. */
int ugate_event_fd(const struct ugate *g);

/* Take one queued event without blocking: 1, or 0 when none is queued. */
int ugate_read_event(struct ugate *g, struct ugate_event *ev);

/* A worker gave up on the listener (said on stderr): CMD's calls may then
 * wait for ever, and the caller must end the sandbox. Any thread. */
bool ugate_broken(const struct ugate *g);

/* From now on the policy's unix: entries open nothing: the egress log has
 * failed or its budget is spent, and nothing may go on that the log does
 * not record (docs/log.md). CMD's own sockets keep working. Any thread;
 * idempotent. */
void ugate_seal(struct ugate *g);

/* Stop the workers and join them (one blocked in a call made for CMD is
 * interrupted). Events already queued stay readable. Idempotent. */
void ugate_stop(struct ugate *g);

/* Stop, then free everything. NULL is fine. */
void ugate_free(struct ugate *g);

/* The verdict's and the operation's names for the log: "allow", "deny";
 * "connect", "sendto", ... */
const char *ugate_verdict_name(enum ugate_verdict v);
const char *ugate_op_name(enum ugate_op op);

#endif
