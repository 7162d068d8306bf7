/* Denials an agent can read: `airlock run` says on stderr, without -v,
 * each destination it refused (once; repeats are counted), why, and what
 * would allow it; and at the end of a run that refused anything, one line
 * that sums it up. The agent reading its own terminal then sees "airlock
 * refused evil.test:443: no rule allows it" where its tool would print
 * "Could not resolve host" or "No matching distribution found".
 *
 * Fed from the log's own events (elog_set_notice), so it says exactly what
 * the log records. Sandbox-controlled text is escaped as in the log. */
#ifndef AIRLOCK_ELOG_NOTICE_H
#define AIRLOCK_ELOG_NOTICE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct elog_event;
struct elog_notice;

/* Destinations remembered for "once"; past it the attempts are still
 * counted, and the summary says there were others. */
#define ELOG_NOTICE_MAX_DESTS 4096

/* Lines go to out (borrowed; a stream that writes whole lines, e.g.
 * log_stream()). per_event false: only count, for the summary (with -v,
 * whose human lines already say each event). NULL when out of memory. */
struct elog_notice *elog_notice_new(FILE *out, bool per_event);
void elog_notice_free(struct elog_notice *n);

/* One event as logged; only deny and audit-deny ones matter. */
void elog_notice_event(struct elog_notice *n, const struct elog_event *ev);

/* The end of the run: one line when anything was refused (or, audit,
 * would have been), naming the first few destinations and where the log
 * is (logpath, or NULL). */
void elog_notice_summary(const struct elog_notice *n, const char *logpath);

/* What was counted (tests). */
uint64_t elog_notice_dests(const struct elog_notice *n);
uint64_t elog_notice_attempts(const struct elog_notice *n);

#endif
