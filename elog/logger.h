/* The logger (DESIGN.md, "Confinement"): a child process that alone holds
 * the egress log's fd. The serving process (run's supervisor, `airlock
 * proxy`) builds each line and sends it, still open, as one LINE datagram
 * over a SOCK_SEQPACKET socketpair (elog/logmsg.h); the logger checks it,
 * closes it with seq and prev (the hash chain, elog/chain.h, is the
 * logger's: a compromised sender can withhold lines but cannot renumber,
 * drop from the middle or re-link them unseen) and writes it whole through
 * its sink (elog/sink.h: a file, or a pipe or socket never blocked on).
 * A datagram it refuses (malformed, over-long, forged) is named on stderr,
 * counted, and not written; the logger stays up.
 *
 * It runs confined: no capabilities, no_new_privs, Landlock with no
 * filesystem access (where the kernel has it), and a seccomp allowlist
 * generated at build time (elog/logger_filter.c: what receiving, writing
 * and exiting need; ENOSYS for the rest, other ABIs killed).
 *
 * When the log fails (the disk is full, the reader left or stalled) it
 * sends FAILED with the reason and exits 1; when the serving process ends
 * its input, it writes what it still holds (ELOG_LOGMSG_DRAIN_MS at most),
 * sends DONE and exits 0. The serving process learns of a killed logger
 * from the socket's hang-up: its log fails, and the run with it. */
#ifndef AIRLOCK_ELOG_LOGGER_H
#define AIRLOCK_ELOG_LOGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct elog;

/* Datagrams it refuses that are named on stderr one by one; the rest are
 * counted, and the count said when it exits. */
#define ELOG_LOGGER_WARN_MAX 16

/* Fork the logger with logfd (owned, also on failure; closed in this
 * process once the child has it) and return the log the caller writes to
 * (elog_open_logger), or NULL with a one-line reason in err. The child
 * keeps only logfd, its end of the socket and stderr (every other
 * inherited descriptor is closed), confines itself and serves; a child
 * that cannot confine itself says which step failed and exits, and the
 * log then fails at its first line (fail closed). */
struct elog *elog_logger_open(int logfd, char *err, size_t errlen);

/* The child's body, for elog_logger_open and tests: serve sock (owned)
 * and write to logfd (owned). Returns the exit status: 0 after the input
 * ended and every line was written (DONE sent), 1 when the log failed or
 * set-up did (FAILED sent when it could be). confine false is for tests
 * that run it unconfined. */
int elog_logger_serve(int sock, int logfd, bool confine);

/* Reap a disowned logger (elog_disown_logger) once no one writes to it:
 * it exits on its own when the last writer's end closes; waited for at
 * most max_ms, then killed. pid 0 is fine. */
void elog_logger_reap(pid_t pid, unsigned max_ms);

#endif
