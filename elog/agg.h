/* Repeated events, counted instead of written one by one (docs/log.md,
 * "Repeated events"). The writer (elog.c) asks for each event that moved
 * no bytes whether one like it was already written in this window: the
 * same kind, host, ip, port, verdict, rule, reason, sni, method, qtype,
 * rcode, proto and orig_dst (everything but the url, the answers, the
 * byte counts and the duration). The first is written at once; repeats
 * are counted, with their bytes summed and the longest duration kept, and
 * each window's counts go out as one line per distinct event when it
 * closes.
 * An entry that counted nothing for a whole window is forgotten. Bounded:
 * a full table is reported to the caller, which flushes early (nothing is
 * dropped). Pure: no I/O, no clock; the caller keeps the window. */
#ifndef AIRLOCK_ELOG_AGG_H
#define AIRLOCK_ELOG_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elog/elog.h"

struct elog_agg;

/* At most max_entries events remembered, their keys in arena_bytes. NULL
 * when out of memory. */
struct elog_agg *elog_agg_new(size_t max_entries, size_t arena_bytes);
void elog_agg_free(struct elog_agg *a);

enum elog_agg_result {
	ELOG_AGG_FIRST,   /* none like it remembered: write it now (now remembered) */
	ELOG_AGG_COUNTED, /* a repeat: counted, for the line at the window's end */
	ELOG_AGG_FULL,    /* no room to remember it: flush, then ask again */
};
enum elog_agg_result elog_agg_note(struct elog_agg *a, const struct elog_event *ev);

/* Close the window: for every remembered event with repeats counted,
 * call emit with an event that carries its key fields, the repeats'
 * summed bytes and longest duration, and count = the repeats (the event
 * and its strings are borrowed for the call; emit must not call back into
 * a). Then forget what counted nothing this window; with final, forget
 * everything. */
void elog_agg_flush(struct elog_agg *a, bool final,
                    void (*emit)(const struct elog_event *ev, void *arg), void *arg);
/* Events remembered. */
size_t elog_agg_size(const struct elog_agg *a);

#endif
