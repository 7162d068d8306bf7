/* Where the egress log's lines go: a regular file, or a pipe, socket or
 * terminal. The sink never blocks its caller (the supervisor's event
 * loop) and never leaves a partial line for the next line to be glued to
 * (docs/log.md, "How lines are written"):
 *
 *  - a regular file gets each line with one write(2). A write that fails
 *    or comes out short (disk full, quota, file size limit) is cut back
 *    with ftruncate(2) to where the line began, so the file still ends in
 *    a whole line; and when a file is opened that does not end in a
 *    newline (an earlier run crashed mid-line), one is written first.
 *  - anything else is written non-blocking. What the reader has no room
 *    for waits in a queue of at most ELOG_SINK_QUEUE_MAX bytes, written
 *    when the fd is writable again (elog_sink_flush). A reader that takes
 *    nothing for ELOG_SINK_STALL_MS while bytes wait counts as gone: the
 *    sink fails, as it does when the reader has left (POLLERR/POLLHUP),
 *    on a write error, and when the queue would overflow. On a pipe a line
 *    of at most PIPE_BUF bytes is written whole or not at all; a longer
 *    one may go out in pieces, still in order and never interleaved with
 *    airlock's other lines, but other writers of the same pipe may land
 *    between them, and a sink that fails mid-line leaves that line cut as
 *    the stream's last bytes (nothing is written after it).
 *
 *  - the logger's socket (elog_sink_new_logger): each line one datagram to
 *    the logger, which holds the log's fd and writes it by the rules
 *    above; what the logger has no room for waits here, as for a pipe.
 *
 * A failed sink stays failed and writes nothing more; the first reason is
 * kept for the message that ends the run. */
#ifndef AIRLOCK_ELOG_SINK_H
#define AIRLOCK_ELOG_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A reader that takes nothing for this long, with bytes waiting for it,
 * is treated as one that has left (docs/log.md: "the documented second"). */
#define ELOG_SINK_STALL_MS 1000
/* Bytes that may wait for a slow reader; one more fails the sink. */
#define ELOG_SINK_QUEUE_MAX (1024 * 1024)

struct elog_sink;

/* Takes ownership of fd, also on failure. A pipe or terminal is made
 * non-blocking (its flags are restored by elog_sink_free, for a file
 * description shared with others). NULL with a reason in err when out of
 * memory, or when a file that ends in a partial line cannot be mended. */
struct elog_sink *elog_sink_new(int fd, char *err, size_t errlen);
void elog_sink_free(struct elog_sink *s);
/* A sink whose lines go to the logger (elog/logger.h) over fd, its
 * SOCK_SEQPACKET socket (owned, nonblocking), as LINE messages
 * (elog/logmsg.h): the logger seals them into the chain, so the lines
 * given here carry no seq and prev and no closing "}\n". The same rules
 * hold as for a pipe: never blocking, at most ELOG_SINK_QUEUE_MAX bytes
 * queued, a logger that takes nothing for ELOG_SINK_STALL_MS counts as
 * gone. The sink fails when the logger reports a failed log (FAILED, its
 * reason kept), and when it has gone (killed). pid (owned) is reaped by
 * elog_sink_drain, which waits for the logger's DONE, or by
 * elog_sink_free (bounded, then SIGKILL). NULL when out of memory (fd
 * closed, the logger killed). */
struct elog_sink *elog_sink_new_logger(int fd, pid_t pid, char *err, size_t errlen);

/* After a fork, in the process that no longer writes: free this copy
 * without touching the description the writer shares (its flags stay as
 * the writer needs them; nothing queued is written). */
void elog_sink_abandon(struct elog_sink *s);
/* The logger this sink writes to (its pid, 0 when none) is not this
 * process's to reap from now on: after a fork, in both processes, the
 * parent reaps it (elog_logger_reap) once every writer is done. Returns
 * the pid. */
pid_t elog_sink_disown(struct elog_sink *s);

/* Append one whole line (line[len - 1] is '\n'). Returns 0 when it was
 * written or queued, -1 when the sink has failed (now or before); the
 * line is then not written, not even in part. */
int elog_sink_write(struct elog_sink *s, const char *line, size_t len);
/* Write what is queued, as far as the fd takes it (call when writable). */
void elog_sink_flush(struct elog_sink *s);
/* Bytes queued, not yet written. */
size_t elog_sink_queued(const struct elog_sink *s);
/* True once the sink has failed; notices a gone or stalled reader (one
 * poll(2) on a pipe or socket). */
bool elog_sink_failed(struct elog_sink *s);
/* True once the sink has failed, as far as it knows already: no check,
 * no system call (for every line; the write itself notices). */
bool elog_sink_dead(const struct elog_sink *s);
/* Why it failed ("" while it has not), for the run's last message. */
const char *elog_sink_error(const struct elog_sink *s);
/* At the end of a run: wait up to max_ms in poll(2) for the queue to be
 * written (the stall rule still applies). 0 when everything is out, -1
 * when the sink has failed or time ran out (the sink is then failed).
 * For the logger, "out" means written by it: its input is then ended and
 * its DONE awaited (up to ELOG_LOGMSG_DRAIN_MS and a second more), and
 * it is reaped. */
int elog_sink_drain(struct elog_sink *s, unsigned max_ms);
/* For the logger: wait up to max_ms until it has written every line
 * given so far (ELOG_LOGMSG_SYNC). 0 when it has, -1 when the sink has
 * failed (the logger reported why, went, or did not answer in time). For
 * the other sinks: 0 unless failed. Blocks: for the run's start. */
int elog_sink_sync(struct elog_sink *s, unsigned max_ms);
/* The fd, for a writability event; -1 when the sink has none. */
int elog_sink_fd(const struct elog_sink *s);

#endif
