/* Reading egress logs back: one record per line, typed fields of schema v1,
 * robust to what real files contain. A line that is not a JSON object with
 * a valid ts and kind, has a known field of the wrong type, or is longer
 * than ELOG_LINE_MAX is garbage: reported on stderr as FILE:LINE and
 * skipped (at most 20 reports per file, then a count). A last line without
 * its newline (a crashed run) is used when it parses, else reported as cut
 * and skipped. Unknown fields are ignored: schema v1 only ever adds. */
#ifndef AIRLOCK_ELOG_RECORD_H
#define AIRLOCK_ELOG_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "elog/json.h"

enum elog_rec_type {
	ELOG_REC_EVENT = 0, /* connect, http, tls, tcp, dns, packet, or newer */
	ELOG_REC_TASK_START,
	ELOG_REC_TASK_END,
	ELOG_REC_LOG_BUDGET, /* the log's budget is spent (reason) */
};

/* Every pointer is borrowed from the reader and valid until the next
 * elog_reader_next() or elog_reader_free(). Absent strings are NULL,
 * absent numbers 0 (port: -1). */
struct elog_record {
	enum elog_rec_type type;
	const char *file;
	uint64_t lineno;
	const char *raw; /* the line's bytes, without its newline */
	size_t raw_len;

	const char *ts;
	int64_t ts_ms; /* ms since the epoch, UTC */
	const char *task;
	const char *kind;
	const char *host, *ip;
	int port;
	const char *verdict, *rule, *reason;
	uint64_t bytes_up, bytes_down, duration_ms;
	const char *sni, *method, *url, *qtype, *rcode, *proto, *orig_dst;
	const char *client; /* airlock proxy: the client's ip:port; NULL */
	int answers;      /* token of the answers array, or -1 */
	uint64_t packets; /* packet lines: blocked packets the line stands for (0: absent) */
	uint64_t count;   /* repeats counted: events the line stands for (0: absent, one) */
	/* The hash chain (elog/chain.h), on every line since it was added. */
	bool has_seq;
	uint64_t seq;
	const char *prev; /* hex SHA-256 of the chain's previous line */

	/* task-start */
	const char *policy, *policy_sha256, *mode, *selftest;
	int command; /* token of the command array, or -1 */
	/* task-end */
	int64_t exit_status, signal;
	bool has_totals;
	uint64_t t_connections, t_allowed, t_denied, t_bytes_up, t_bytes_down;
	uint64_t t_unlogged; /* events the log budget left without a line */

	const struct elog_json *json; /* for the arrays above */
};

struct elog_reader;

/* Open path for reading ("-" is stdin). NULL with a reason in err. */
struct elog_reader *elog_reader_open(const char *path, char *err, size_t errlen);
void elog_reader_free(struct elog_reader *r);
/* Next good record: 1, or 0 at the end, or -1 on a read error (reported). */
int elog_reader_next(struct elog_reader *r, struct elog_record *rec);
/* One line as it is in the file, for a reader that judges every line
 * itself (`airlock log verify`); data is borrowed like a record's. */
struct elog_line {
	const char *data; /* without its newline; NULL when too_long */
	size_t len;
	uint64_t lineno;
	bool cut;      /* the file's last line, without its newline */
	bool too_long; /* longer than ELOG_LINE_MAX: skipped to its end */
};
/* Next line, blank and garbage ones included, none reported: 1, or 0 at
 * the end, or -1 on a read error (reported). Do not mix with
 * elog_reader_next on one reader. */
int elog_reader_line(struct elog_reader *r, struct elog_line *l);
/* The path the reader was opened with ("-" for stdin). */
const char *elog_reader_path(const struct elog_reader *r);
/* Lines skipped as garbage so far. */
uint64_t elog_reader_garbage(const struct elog_reader *r);

/* The review commands' one way through their input: call each on every
 * good record of files[0..n_files) in order. A file that cannot be opened
 * or read is reported and makes the result -1, but the others are still
 * read, so one bad file does not hide the rest. each returns 0 to go on,
 * or non-zero to stop reading altogether (the caller records why, e.g.
 * out of memory). Returns 0, or -1 when a file failed. */
int elog_read_files(char *const *files, int n_files,
                    int (*each)(const struct elog_record *r, void *arg), void *arg);

/* A logged host or ip field ("192.0.2.1", "2001:db8::1", "[2001:db8::1]")
 * to an address with only family and address set. False when it is not
 * an address literal (a name). */
bool elog_parse_addr(const char *s, struct sockaddr_storage *ss);

/* Decode one line (without newline) into rec. Returns 0, or -1 with a
 * reason in why. j must outlive rec. Pure; used by the reader and fuzzed. */
int elog_record_parse(struct elog_json *j, const char *line, size_t len, struct elog_record *rec,
                      char *why, size_t whylen);

/* The events an event line stands for, the one weight the review
 * commands count with: a packet line's packets, a line of counted repeats'
 * count, else 1. */
uint64_t elog_record_events(const struct elog_record *r);

/* RFC 3339 date-time ("2026-11-30T10:24:48.123Z", offsets allowed) to ms
 * since the epoch. Returns 0 or -1. */
int elog_parse_time(const char *s, int64_t *ms);
/* Format ms since the epoch as "2026-11-30T10:24:48.123Z" (25 bytes). */
void elog_format_time(int64_t ms, char *out, size_t outlen);

#endif
