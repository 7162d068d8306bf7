/* broker_spawn (broker.h): a socketpair and a fork; the child keeps its
 * end and stderr, and serves. broker_socket and broker_start are the two
 * halves, for a caller that forks the broker later than it needs its
 * socket. */
#include "broker/broker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/msg.h"
#include "common/fdcaller.h"
#include "common/log.h"
#include "common/util.h"

/* Everything but stdin/stdout/stderr and keep: the parent's listeners,
 * its log and its netlink sockets are none of the broker's business. */
static int
close_others(int keep)
{
	if (keep > 3 && close_range(3, (unsigned)keep - 1, 0) != 0)
		return -1;
	return close_range((unsigned)keep + 1, ~0u, 0);
}

int
broker_socket(int *child, char *err, size_t errlen)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(err, errlen, "broker: socketpair: %s", strerror(errno));
		return -1;
	}
	/* Room for the largest DNS reply (msg.h, BROKER_SOCK_BUF): the kernel
	 * refuses a datagram larger than its sender's buffer. Best effort,
	 * capped by net.core.wmem_max and rmem_max: a reply still too large
	 * fails its question (server.c, slot_finish). */
	for (int i = 0; i < 2; i++) {
		(void)setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &(int){BROKER_SOCK_BUF}, sizeof(int));
		(void)setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &(int){BROKER_SOCK_BUF}, sizeof(int));
	}
	if (fd_set_nonblock(sv[0], true) != 0) {
		snprintf(err, errlen, "broker: nonblocking socket: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	*child = sv[1];
	return sv[0];
}

int
broker_start(const struct broker_cfg *cfg, int child, pid_t *pid, char *err, size_t errlen)
{
	pid_t parent = getpid();

	fflush(NULL); /* no buffered output written twice */
	*pid = fork();
	if (*pid < 0) {
		snprintf(err, errlen, "broker: fork: %s", strerror(errno));
		close(child);
		return -1;
	}
	if (*pid == 0) {
		int fd = child;

		log_set_ident("airlock[broker]");
		/* Its end above stderr, so closing the rest cannot hit it. */
		if (fd < 3 && (fd = fcntl(child, F_DUPFD_CLOEXEC, 3)) < 0)
			_exit(1);
		/* Nor the caller's stdin and stdout (its terminal, say). */
		if (close_others(fd) != 0 || fdcaller_drop_stdio() != 0) {
			log_warn("broker: closing inherited descriptors");
			_exit(1);
		}
		/* The broker does not outlive the process that spawned it. */
		(void)prctl(PR_SET_NAME, "airlock-broker"); /* for ps */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(1);
		signal(SIGINT, SIG_IGN); /* the supervisor decides when to stop */
		signal(SIGPIPE, SIG_IGN);
		/* _exit: no atexit handler of the parent's runs here. */
		_exit(broker_serve(cfg, fd, true));
	}
	close(child);
	return 0;
}

int
broker_spawn(const struct broker_cfg *cfg, pid_t *pid, char *err, size_t errlen)
{
	int child, fd = broker_socket(&child, err, errlen);

	if (fd < 0)
		return -1;
	if (broker_start(cfg, child, pid, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void
broker_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	/* Nothing is in flight once the worker's end is closed: the kill
	 * spares only its last debug line. */
	(void)kill(pid, SIGKILL);
}

void
broker_reap(pid_t pid)
{
	if (pid <= 0)
		return;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}
