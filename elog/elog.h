/* The egress log: JSON Lines, schema v1 (docs/log.md). One object per
 * event, written by the supervisor only, each line with a single write(2)
 * so lines never interleave. Every string the sandbox controls is escaped
 * and capped before it is written.
 *
 * Fail closed: after a failed write elog_failed() is true and stays true;
 * callers then refuse new connections. */
#ifndef AIRLOCK_ELOG_ELOG_H
#define AIRLOCK_ELOG_ELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct elog;

/* No line the writer produces is longer than this (newline included): every
 * field is capped (docs/log.md), and the readers treat longer lines as
 * garbage. */
#define ELOG_LINE_MAX 65536

/* Open path for appending (created 0600 if missing). "-" means stdout (a
 * duplicate of fd 1, so elog_free() leaves stdout open). Returns NULL with
 * a one-line reason in err. */
struct elog *elog_open(const char *path, char *err, size_t errlen);
/* Wrap an fd opened by the caller; takes ownership of fd. */
struct elog *elog_open_fd(int fd);
void elog_free(struct elog *log);

/* Task id written on every line; copied. */
void elog_set_task(struct elog *log, const char *task_id);
/* With -v: also a short human line per event on this stream (borrowed). */
void elog_set_human(struct elog *log, FILE *human);
/* True once a line could not be written, and, for a log that is a pipe or
 * socket, as soon as its reader has gone (before the next line is lost).
 * Costs one poll(2) on such a log; callers check it per new connection. */
bool elog_failed(const struct elog *log);

/* One connection, DNS query or blocked packet, written when it ends.
 * NULL strings and port < 0 are left out of the line; a NULL kind is
 * written as "unknown". Strings are borrowed for the call only. Returns 0,
 * or -1 when the log has failed (now or before; the line is not written). */
struct elog_event {
	const char *kind; /* "connect" | "http" | "tls" | "tcp" | "dns" | "packet" | "unix" */
	const char *host; /* destination name as asked (sandbox-controlled) */
	const char *ip;   /* address actually dialled (or the original dst) */
	int port;
	const char *verdict; /* "allow" | "deny" | "audit-deny" */
	const char *rule;    /* "file:line" of the deciding rule */
	const char *reason;  /* why, when denied or failed ("no match", ...) */
	uint64_t bytes_up;   /* sandbox -> upstream */
	uint64_t bytes_down; /* upstream -> sandbox */
	uint64_t duration_ms;
	const char *sni;
	const char *method;
	const char *url;
	const char *qtype;          /* dns */
	const char *rcode;          /* dns: "NOERROR", "NXDOMAIN", ... */
	const char *const *answers; /* dns: addresses returned */
	size_t n_answers;
	const char *proto;    /* packet: "udp", "tcp", "icmp", "icmpv6", ... */
	const char *orig_dst; /* transparent: SO_ORIGINAL_DST "ip:port" when it
	                       * differs from ip */
	uint64_t packets; /* packet: the blocked packets this line stands for
	                   * (0: no such count, field left out) */
	const char *path; /* unix: the socket path CMD gave (sandbox-controlled) */
};

int elog_event(struct elog *log, const struct elog_event *ev);
/* True for the verdicts that count as denied ("deny", "audit-deny"): the
 * writer's task totals and the review commands' counts use this one test,
 * so a summary of a log agrees with the log's own totals. */
bool elog_verdict_denied(const char *verdict);

struct elog_task_start {
	const char *policy; /* policy name */
	const char *policy_sha256;
	const char *mode;        /* "enforce" | "audit" */
	const char *const *argv; /* the command, argc entries */
	int argc;
	const char *selftest; /* "pass" or the failed check */
};
int elog_task_start(struct elog *log, const struct elog_task_start *ts);

struct elog_task_end {
	int exit_status; /* airlock's exit status */
	int signal;      /* signal that killed CMD, 0 if none */
	uint64_t duration_ms;
	uint64_t connections, allowed, denied; /* totals over the task */
	uint64_t bytes_up, bytes_down;
};
int elog_task_end(struct elog *log, const struct elog_task_end *te);

/* Totals so far (for task-end), counted by elog_event(): connections is
 * every event written (DNS queries and blocked packets included), denied
 * counts "deny" and "audit-deny", bytes are summed. Fills only those five
 * fields of te. */
void elog_totals(const struct elog *log, struct elog_task_end *te);

#endif
