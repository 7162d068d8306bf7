/* CMD's terminal (docs/run.md, Terminal and signals). When the caller's
 * stdin is a terminal, CMD does not get it: init opens a pseudo-terminal
 * in the sandbox's own devpts, gives CMD the slave as its controlling
 * terminal and hands the master to the supervisor, which relays it to the
 * caller's terminal (cli/term.c), as sshd and `docker run -t` do. So what
 * CMD does to its terminal (tcsetpgrp, TIOCSTI, its modes, the signals its
 * line discipline makes) stays on a terminal that exists only for it, and
 * its name is found under the sandbox's /dev/pts (ttyname works). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/internal.h"

/* How long the supervisor waits for init's terminal; init sends it at the
 * end of its set-up, which sbx_recv_listeners already waited for most of. */
#define TTY_TIMEOUT_MS 30000

int
sbx_pty_open(int sock, int *slave, char *err, size_t errlen)
{
	struct sbx_msg m;
	int unlock = 0;
	/* The devpts instance mounted by sbx_fs_setup, not the host's: the
	 * slave is then /dev/pts/N inside, and nothing of the host's. */
	int master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	int rc = -1;

	*slave = -1;
	if (master < 0) {
		snprintf(err, errlen, "terminal: /dev/pts/ptmx: %s", strerror(errno));
		return -1;
	}
	/* TIOCGPTPEER opens the slave through the master, not by a path
	 * that could name something else. */
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0 ||
	    (*slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "terminal: open the slave: %s", strerror(errno));
		goto out;
	}
	memset(&m, 0, sizeof(m));
	m.type = SBX_MSG_TTY;
	if (sbx_msg_send(sock, &m, &master, 1) < 0) {
		snprintf(err, errlen, "terminal: hand it to the supervisor: %s", strerror(errno));
		fd_close(slave);
		goto out;
	}
	rc = 0;
out:
	fd_close(&master); /* the supervisor's now; init keeps no way to read CMD's output */
	return rc;
}

int
sbx_pty_attach(int slave)
{
	struct stat in, st;
	bool same[3] = {true, false, false};
	int rc = 0;

	/* Which of stdout and stderr are the caller's terminal, decided
	 * before stdin is replaced. */
	if (fstat(STDIN_FILENO, &in) == 0 && S_ISCHR(in.st_mode))
		for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++)
			same[fd] = fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
			           st.st_rdev == in.st_rdev && isatty(fd);
	for (int fd = STDIN_FILENO; fd <= STDERR_FILENO && rc == 0; fd++)
		if (same[fd] && dup2(slave, fd) < 0)
			rc = -1;
	if (slave > STDERR_FILENO) {
		int e = errno;
		close(slave);
		errno = e;
	}
	return rc;
}

int
sbx_recv_tty(struct sbx *s, char *err, size_t errlen)
{
	struct pollfd pfd = {.fd = s->sock, .events = POLLIN};
	struct sbx_msg m;
	size_t nfds = 0;
	int fd = -1, rc, n;

	if (sbx_spin_readable(s, s->sock))
		rc = 1;
	else
		do
			rc = poll(&pfd, 1, TTY_TIMEOUT_MS);
		while (rc < 0 && errno == EINTR);
	if (rc == 0) {
		snprintf(err, errlen, "sandbox set-up: no terminal from init within %d s",
		         TTY_TIMEOUT_MS / 1000);
		return -1;
	}
	rc = sbx_msg_recv(s->sock, &m, &fd, 1, &nfds, 0);
	if (rc == 0 || (rc < 0 && (errno == ECONNRESET || errno == EPIPE))) {
		sbx_setup_lost(s, "waiting for CMD's terminal", rc == 0 ? 0 : errno, err, errlen);
		return -1;
	}
	/* Only a pseudo-terminal master answers TIOCGPTN. */
	if (rc < 0 || m.type != SBX_MSG_TTY || nfds != 1 || ioctl(fd, TIOCGPTN, &n) < 0) {
		snprintf(err, errlen, "sandbox set-up: bad message from init: %s",
		         rc < 0 ? strerror(errno) : "not a terminal");
		if (nfds == 1)
			fd_close(&fd);
		return -1;
	}
	return fd;
}
