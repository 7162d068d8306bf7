/* The egress log: JSON Lines, schema v1 (docs/log.md). One object per
 * event, built by the supervisor only, each line whole (elog/sink.h:
 * never blocking, never a partial line); in airlock run and airlock proxy
 * the lines are written by the logger, which alone holds the log's fd
 * (elog/logger.h, elog_open_logger). Every string the sandbox controls
 * is escaped and capped before it is written. Every line written ends in
 * seq and prev, a hash chain from the run's task-start (elog/chain.h);
 * a line the budget drops is not in it.
 *
 * Volume is bounded twice: events that moved no bytes (DNS queries,
 * refusals) are aggregated, the first written at once and repeats counted
 * (elog_event_agg, elog/agg.h); and a per-task budget of bytes, once
 * spent, stops the detail but not the counts, and admits no new
 * destination (elog_admit).
 *
 * Fail closed: after a failed write, or once a pipe's reader has gone or
 * stalled, elog_failed() is true and stays true; callers then refuse new
 * connections, and the run exits non-zero (elog_error says why). */
#ifndef AIRLOCK_ELOG_ELOG_H
#define AIRLOCK_ELOG_ELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct elog;
struct event_base;

/* No line the writer produces is longer than this (newline included): every
 * field is capped (docs/log.md), and the readers treat longer lines as
 * garbage. */
#define ELOG_LINE_MAX 65536

/* Open path for appending (created 0600 if missing). "-" means stdout: a
 * description of its own when stdout is a pipe or terminal (reopened, so
 * that making it non-blocking leaves the caller's stdout as it was), else
 * a duplicate of fd 1; elog_free() leaves stdout open. Returns NULL with a
 * one-line reason in err. */
struct elog *elog_open(const char *path, char *err, size_t errlen);
/* elog_open's opening alone: the fd (owned by the caller, CLOEXEC), or -1
 * with a one-line reason in err. For a log written by the logger
 * (elog/logger.h). */
int elog_open_path(const char *path, char *err, size_t errlen);
/* A log whose lines the logger writes (elog/logger.h, elog_logger_open):
 * fd is its socket, pid the logger (both owned, also on failure; see
 * elog/sink.h elog_sink_new_logger). The writer builds, aggregates and
 * budgets lines as for a file; the logger alone holds the log fd and
 * seals each line into the hash chain. NULL when out of memory. */
struct elog *elog_open_logger(int fd, pid_t pid);
/* Wrap an fd opened by the caller; takes ownership of fd, also on
 * failure. A pipe or terminal is made non-blocking (elog/sink.h). NULL
 * (the reason said on stderr) when out of memory or when a file that ends
 * in a partial line cannot be mended. */
struct elog *elog_open_fd(int fd);
/* Frees; detaches it from its loop first, so free the log before the
 * loop, or call elog_detach() before freeing the loop. */
void elog_free(struct elog *log);
/* Free the copy a fork left in the process that does not write the log
 * (the supervisor, once the worker serves): nothing is written, not even
 * what waits for a slow reader, and the descriptor's flags stay as the
 * writer set them. */
void elog_abandon(struct elog *log);
/* The logger process behind log (elog_logger_open), from now on reaped by
 * whoever calls this, not by elog_free/elog_drain: the supervisor, whose
 * child it is, while a worker it forked writes to it (elog_logger_reap).
 * Returns its pid, 0 when there is none. */
pid_t elog_disown_logger(struct elog *log);

/* Serve the log from an event loop (borrowed; detach before it is freed):
 * the aggregation window closes on a timer, and lines a slow reader had
 * no room for are written when its pipe is writable again. Without a
 * loop, both happen on the next line (and elog_flush / elog_drain).
 * Returns 0 or -1 (out of memory; the log then works as without). */
int elog_attach(struct elog *log, struct event_base *base);
void elog_detach(struct elog *log);

/* Task id written on every line; copied. */
void elog_set_task(struct elog *log, const char *task_id);
/* With -v: also a short human line per event on this stream (borrowed). */
void elog_set_human(struct elog *log, FILE *human);
/* Denials said on stderr as they are logged (elog/notice.h; borrowed,
 * NULL: none). */
struct elog_notice;
void elog_set_notice(struct elog *log, struct elog_notice *notice);
/* True once a line could not be written, and, for a log that is a pipe or
 * socket, as soon as its reader has gone (before the next line is lost)
 * or has taken nothing for ELOG_SINK_STALL_MS with lines waiting. Costs
 * one poll(2) on such a log; callers check it per new connection. */
bool elog_failed(struct elog *log);
/* Why the log failed, one line ("" while it has not). */
const char *elog_error(const struct elog *log);

/* The per-task log budget: bytes of event lines (task-start, task-end and
 * the log-budget line are outside it); 0 = none. Once a line would go
 * past it, one "log-budget" line says so, and from then on (docs/log.md,
 * "The log budget"):
 *  - event lines are no longer written, only counted: in task-end's
 *    totals, with totals.unlogged the events that have no line;
 *  - except the first line of a destination that traffic was let through
 *    to (a connection admitted before the budget ran out ends), so every
 *    destination reached is still named;
 *  - elog_admit() admits only destinations the log already names. */
#define ELOG_BUDGET_DEFAULT (64ULL * 1024 * 1024)
void elog_set_budget(struct elog *log, uint64_t bytes);
/* Parse a --log-budget SIZE: whole bytes, or with a binary suffix k, M, G
 * (also KiB, MiB, GiB, any case); "0" is no budget. At most 1 TiB.
 * Returns 0, or -1 when s is none of these. */
int elog_parse_size(const char *s, uint64_t *out);
/* May a connection or DNS query to dest (a name or address; port -1 for
 * DNS) go ahead, as far as the log is concerned? Always while the budget
 * is not spent (and the destination is remembered); afterwards only
 * destinations admitted or named before. The caller refuses with
 * VR_LOG_BUDGET (policy/verdict.h) otherwise. */
bool elog_admit(struct elog *log, const char *dest, int port);
/* True once the budget is spent. */
bool elog_budget_spent(const struct elog *log);

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
	const char *reason;  /* why, when denied or failed: a token of the one
	                      * table (policy/verdict.h: "no-rule", ...) */
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
	uint64_t packets;     /* packet: the blocked packets this line stands for
	                       * (0: no such count, field left out) */
	uint64_t count;       /* a line for repeats (elog_event_agg): how many
	                       * events it stands for (0: one, field left out) */
	const char *path;     /* unix: the socket path CMD gave (sandbox-controlled) */
	const char *detail;   /* with a reason: the sentence for people, naming
	                       * what was seen ("no rule allows a.test port 443") */
};

int elog_event(struct elog *log, const struct elog_event *ev);
/* The same for an event that may repeat many times (a DNS query, a
 * refused connection): when it moved no bytes and one like it was already
 * written in this window, it is only counted, and the window's count goes
 * out as one line (with "count") when the window closes (elog/agg.h). The
 * first of each is written at once, so nothing new is delayed. An event
 * that moved bytes is written as by elog_event. */
int elog_event_agg(struct elog *log, const struct elog_event *ev);
/* The aggregation window and table (tests; 0 = the default). */
#define ELOG_AGG_WINDOW_MS 1000
#define ELOG_AGG_MAX       4096
void elog_set_agg(struct elog *log, unsigned window_ms, size_t max_events);
/* Write every count still held, now (before task-end, so the totals and
 * the lines agree), and try to write what waits for a slow reader. */
void elog_flush(struct elog *log);
/* At the end of a run, after task-end: wait up to max_ms for lines still
 * waiting for a slow reader. 0, or -1 when the log has failed. */
int elog_drain(struct elog *log, unsigned max_ms);
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
	const char *const *labels; /* "KEY=VALUE" each (--label), n_labels of them */
	size_t n_labels;
	bool worker;          /* a confined worker serves (run and proxy): write landlock */
	int landlock;         /* the Landlock ABI the worker applies; 0: the kernel has none */
	const char *ids;      /* "range" with --ids range; NULL: one id (written only when set) */
	const char *overlay;  /* --overlay: "tmpfs", or the --overlay-keep directory; NULL: none */
};
int elog_task_start(struct elog *log, const struct elog_task_start *ts);

struct elog_task_end {
	int exit_status; /* airlock's exit status */
	int signal;      /* signal that killed CMD, 0 if none */
	uint64_t duration_ms;
	uint64_t connections, allowed, denied; /* totals over the task */
	uint64_t bytes_up, bytes_down;
	uint64_t unlogged; /* events without a line (the budget); written
	                    * when not 0 */
};
int elog_task_end(struct elog *log, const struct elog_task_end *te);

/* Totals so far (for task-end), counted by elog_event() and
 * elog_event_agg(): connections is every event (DNS queries, blocked
 * packet lines and counted repeats included, written or not), denied
 * counts "deny" and "audit-deny", bytes are summed, unlogged counts the
 * events the budget left without a line. Fills only those six fields. */
void elog_totals(const struct elog *log, struct elog_task_end *te);

#endif
