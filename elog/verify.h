/* `airlock log verify`: check the hash chains of egress logs (elog/chain.h,
 * docs/log.md "The hash chain"). A file holds one chain per run that wrote
 * to it, from its task-start on, told apart by the task id, so chains of
 * runs that appended at the same time may interleave line by line.
 *
 * The checker is pure: lines in, a verdict out, no I/O (fuzzed, with the
 * writer's sealing, in tests/fuzz/fuzz_logline.c). It stops at the first
 * break, which it names by line: a line that is not a log line, a cut or
 * over-long line, a chained line with no task-start of its task before
 * it, a task-start that does not begin a chain, a seq out of step, a prev
 * that is not the previous line's hash, or a line without seq and prev in
 * the middle of a chain. A prev that does not match is pinned on the line
 * that was changed when the line after it confirms which one is intact.
 *
 * What no chain can show: lines removed from a chain's end (the chain then
 * ends without task-end, which the summary counts), and a change to a
 * chain's last line. Lines with neither seq nor prev, outside any chain,
 * come from before the chain existed: counted as unchained, not checked. */
#ifndef AIRLOCK_ELOG_VERIFY_H
#define AIRLOCK_ELOG_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "elog/record.h"

enum elog_break {
	ELOG_BREAK_NONE = 0,
	ELOG_BREAK_GARBAGE,   /* not a log line (JSON, ts, kind, a field's type) */
	ELOG_BREAK_TOO_LONG,  /* longer than ELOG_LINE_MAX */
	ELOG_BREAK_CUT,       /* the last line has no newline */
	ELOG_BREAK_HALF,      /* seq without prev or the reverse, or prev not hex */
	ELOG_BREAK_NO_START,  /* a chained line before any task-start of its task */
	ELOG_BREAK_BAD_START, /* a task-start whose seq is not 0 or prev not the genesis */
	ELOG_BREAK_SEQ,       /* seq is not one more than the chain's last */
	ELOG_BREAK_PREV,      /* prev is not the hash of the chain's last line */
	ELOG_BREAK_CHANGED,   /* this line changed after it was written (the next
	                       * line's prev does not match it, the one after
	                       * confirms the next) */
	ELOG_BREAK_UNCHAINED, /* a line without seq and prev inside a chain */
};

/* The first break: where, what, and the line it is judged against. */
struct elog_verify_break {
	enum elog_break what;
	uint64_t line;      /* the line that breaks the chain */
	uint64_t other;     /* the chain's line it was checked against (0: none) */
	uint64_t want, got; /* ELOG_BREAK_SEQ: the seq expected and found */
	char detail[160];   /* ELOG_BREAK_GARBAGE: why; NO_START: the task */
};

struct elog_verify_stats {
	uint64_t lines;     /* lines read */
	uint64_t chained;   /* lines that belong to a chain and hold */
	uint64_t unchained; /* lines from before the chain (no seq, no prev) */
	uint64_t chains;    /* task-starts that began a chain */
	uint64_t ended;     /* chains that reached their task-end */
	uint64_t budget;    /* chains with a log-budget line (detail stopped) */
};

struct elog_verify;

/* A checker for one file. NULL when out of memory. */
struct elog_verify *elog_verify_new(void);
void elog_verify_free(struct elog_verify *v);

/* Feed the file's next line. 0 while everything holds; 1 when a break is
 * found (filled into brk; it may name an earlier line than l's), after
 * which nothing more is checked. */
int elog_verify_line(struct elog_verify *v, const struct elog_line *l,
                     struct elog_verify_break *brk);
/* The file ended: 1 with brk when a break was still being pinned down,
 * else 0. */
int elog_verify_end(struct elog_verify *v, struct elog_verify_break *brk);
/* Counts so far. */
const struct elog_verify_stats *elog_verify_stats(const struct elog_verify *v);

/* One line (no newline) saying what broke, without the FILE:LINE. */
void elog_verify_describe(const struct elog_verify_break *brk, char *out, size_t outlen);

enum elog_verify_result {
	ELOG_VERIFY_OK,        /* every chain holds, every line chained */
	ELOG_VERIFY_BROKEN,    /* a chain breaks, or a file could not be read */
	ELOG_VERIFY_UNCHAINED, /* nothing breaks, but some lines carry no chain */
};
/* Check every file (a path, or "-" for stdin): each file's first break
 * goes to out as "FILE:LINE: what"; when nothing broke, one summary line.
 * Unreadable files are reported on stderr and make the result BROKEN. */
enum elog_verify_result elog_verify_files(char *const *files, int n_files, FILE *out);

#endif
