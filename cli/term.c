/* The relay between CMD's terminal and the caller's (term.h). Two bounded
 * buffers, one per direction, and four events; after every read or write
 * term_arm decides again what waits for what, so a side that does not
 * take its bytes stops the other from being read (CMD's writes then block
 * in its own terminal, the caller's typing waits in theirs). Nothing here
 * blocks the supervisor's loop: every fd is non-blocking. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/term.h"
#include "common/log.h"
#include "common/util.h"

/* Per direction. A terminal's own buffers hold about 4 KiB (n_tty) to
 * 64 KiB (a pty's), so more here would only hide backpressure. */
#define TERM_BUF 16384

struct term_buf {
	char data[TERM_BUF];
	size_t off, len; /* the bytes not yet written: data[off, off + len) */
};

struct term {
	struct event_base *base; /* borrowed */
	struct termios saved;    /* the caller's modes, to go back to */
	int master;              /* CMD's terminal; -1 once hung up */
	bool master_eof;         /* every slave is closed */
	/* The caller's terminal: own_fd is our own open file description
	 * of it; without one, in_fd and out_fd are the caller's stdin and
	 * stdout, made non-blocking until term_free (fl[]). out_fd is -1
	 * once writing to it failed: CMD's output is dropped from then on. */
	int own_fd;
	int in_fd, out_fd;
	bool in_eof;
	int fl[3];        /* status flags of std fd i before O_NONBLOCK; -1: untouched */
	bool stderr_term; /* airlock's stderr is the caller's terminal */
	bool raw;         /* the caller's terminal is in raw mode */
	int sigfd;        /* SIGWINCH, SIGTSTP, SIGCONT; -1 */
	bool blocked;     /* we blocked them: oldmask is what to go back to */
	sigset_t oldmask;
	struct event *ev_in, *ev_out, *ev_mread, *ev_mwrite, *ev_sig;
	struct term_buf up;   /* the caller's typing, for CMD */
	struct term_buf down; /* CMD's output, for the caller */
};

enum term_io {
	TERM_IO_OK,    /* moved bytes (or had none to move) */
	TERM_IO_AGAIN, /* nothing now: wait for the fd (or for room) */
	TERM_IO_END,   /* closed or failed for good */
};

/* Read what fd has into b, as far as b has room. */
static enum term_io
buf_read(struct term_buf *b, int fd)
{
	size_t room;
	ssize_t n;

	if (b->len == 0)
		b->off = 0;
	else if (b->off > 0 && b->off + b->len == sizeof(b->data)) {
		memmove(b->data, b->data + b->off, b->len);
		b->off = 0;
	}
	room = sizeof(b->data) - b->off - b->len;
	if (room == 0)
		return TERM_IO_AGAIN;
	do
		n = read(fd, b->data + b->off + b->len, room);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		b->len += (size_t)n;
		return TERM_IO_OK;
	}
	if (n < 0 && errno == EAGAIN)
		return TERM_IO_AGAIN;
	/* 0: a hang-up; EIO on a master: every slave is closed. */
	return TERM_IO_END;
}

/* Write as much of b to fd as fd takes. */
static enum term_io
buf_write(struct term_buf *b, int fd)
{
	while (b->len > 0) {
		ssize_t n = write(fd, b->data + b->off, b->len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return TERM_IO_AGAIN;
		if (n <= 0)
			return TERM_IO_END;
		b->off += (size_t)n;
		b->len -= (size_t)n;
	}
	return TERM_IO_OK;
}

static bool
buf_full(const struct term_buf *b)
{
	return b->len == sizeof(b->data);
}

/* Set the modes of the terminal fd is on, now. With hold, SIGTTOU is
 * held meanwhile, so that this works from a background process group
 * too: for giving modes back, which must happen whatever our job's
 * state. Entering raw mode must not: a background airlock stops there
 * until brought to the foreground, as any full-screen program does. */
static int
tty_set(int fd, const struct termios *tio, bool hold)
{
	sigset_t ttou, old;
	int rc, e;

	if (hold) {
		sigemptyset(&ttou);
		sigaddset(&ttou, SIGTTOU);
		sigprocmask(SIG_BLOCK, &ttou, &old);
	}
	do
		rc = tcsetattr(fd, TCSANOW, tio);
	while (rc < 0 && errno == EINTR);
	e = errno;
	if (hold)
		sigprocmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return rc;
}

bool
term_probe(struct termios *tio)
{
	struct stat in, out;

	return tcgetattr(STDIN_FILENO, tio) == 0 && fstat(STDIN_FILENO, &in) == 0 &&
	       fstat(STDOUT_FILENO, &out) == 0 && S_ISCHR(out.st_mode) && out.st_rdev == in.st_rdev;
}

/* Raw mode as ssh makes it: no echo, no line editing, no signals from
 * Ctrl-C and friends, no output processing, every byte as it comes. Those
 * are the job of CMD's terminal now, which has the caller's modes. */
static void
make_raw(struct termios *tio)
{
	tio->c_iflag |= IGNPAR;
	tio->c_iflag &=
	        ~(IGNBRK | BRKINT | ISTRIP | INLCR | IGNCR | ICRNL | IXON | IXANY | IXOFF | IUCLC);
	tio->c_lflag &= ~(ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHONL | IEXTEN);
	tio->c_oflag &= ~OPOST;
	tio->c_cc[VMIN] = 1;
	tio->c_cc[VTIME] = 0;
}

static int
term_set_raw(struct term *t, bool on)
{
	struct termios tio = t->saved;

	if (on)
		make_raw(&tio);
	if (tty_set(t->in_fd, &tio, !on) < 0)
		return -1;
	t->raw = on;
	/* The terminal no longer turns our "\n" into "\r\n". */
	log_set_crlf(on && t->stderr_term);
	return 0;
}

/* CMD's window size is the caller's. The kernel signals SIGWINCH to CMD's
 * foreground process group when it changes. */
static void
term_resize(struct term *t)
{
	struct winsize ws;

	if (t->master >= 0 && ioctl(t->in_fd, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(t->master, TIOCSWINSZ, &ws);
}

static void
want(struct event *ev, bool on)
{
	bool pending = event_pending(ev, EV_READ | EV_WRITE, NULL) != 0;

	if (on && !pending)
		event_add(ev, NULL);
	else if (!on && pending)
		event_del(ev);
}

/* After any I/O: what waits for what. */
static void
term_arm(struct term *t)
{
	bool master = t->master >= 0;

	want(t->ev_mread, master && !t->master_eof && !buf_full(&t->down));
	want(t->ev_out, t->out_fd >= 0 && t->down.len > 0);
	want(t->ev_in, master && !t->in_eof && !buf_full(&t->up));
	want(t->ev_mwrite, master && t->up.len > 0);
}

/* The caller's terminal is gone (hung up, or its reader failed): hang up
 * CMD's, whose session then gets SIGHUP from the kernel, as when an ssh
 * connection drops. */
static void
term_hangup(struct term *t)
{
	if (t->master < 0)
		return;
	log_info("the terminal hung up: hanging up CMD's");
	event_del(t->ev_mread);
	event_del(t->ev_mwrite);
	fd_close(&t->master);
	t->up.len = 0;
	t->down.len = 0;
}

/* Move CMD's output on; a caller's terminal that fails takes no more. */
static void
term_down(struct term *t)
{
	if (t->out_fd >= 0 && buf_write(&t->down, t->out_fd) == TERM_IO_END)
		t->out_fd = -1;
	if (t->out_fd < 0)
		t->down.len = 0;
}

static void
term_master_read(evutil_socket_t fd, short what, void *arg)
{
	struct term *t = arg;

	/* The end: every slave closed (CMD and init gone, or CMD closed its
	 * terminal); a hung-up master would be reported readable forever. */
	if (buf_read(&t->down, t->master) == TERM_IO_END)
		t->master_eof = true;
	term_down(t);
	term_arm(t);
}

static void
term_out_ready(evutil_socket_t fd, short what, void *arg)
{
	struct term *t = arg;

	term_down(t);
	term_arm(t);
}

static void
term_up(struct term *t)
{
	if (t->master >= 0 && buf_write(&t->up, t->master) == TERM_IO_END)
		t->up.len = 0; /* CMD's terminal takes nothing: its side is closed */
}

static void
term_in_read(evutil_socket_t fd, short what, void *arg)
{
	struct term *t = arg;

	if (buf_read(&t->up, t->in_fd) == TERM_IO_END) {
		t->in_eof = true;
		term_hangup(t);
	}
	term_up(t);
	term_arm(t);
}

static void
term_master_ready(evutil_socket_t fd, short what, void *arg)
{
	struct term *t = arg;

	term_up(t);
	term_arm(t);
}

static void
term_signal(evutil_socket_t fd, short what, void *arg)
{
	struct term *t = arg;
	struct signalfd_siginfo si;

	while (read(t->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGWINCH:
			term_resize(t);
			break;
		case SIGTSTP:
			/* Someone stops airlock (the caller's Ctrl-Z cannot:
			 * it is CMD's byte now). Give the terminal its modes
			 * back for the shell, as any program that changed
			 * them does, and stop; SIGCONT brings raw mode back. */
			if (t->raw && term_set_raw(t, false) < 0)
				log_warn("cannot give the terminal its modes back");
			kill(getpid(), SIGSTOP);
			break;
		case SIGCONT:
			if (!t->raw && term_set_raw(t, true) < 0)
				log_warn("terminal: raw mode");
			term_resize(t); /* it may have changed meanwhile */
			break;
		}
	}
}

/* Whether fd is on the same terminal as stdin (in). */
static bool
same_terminal(int fd, const struct stat *in)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == in->st_rdev &&
	       isatty(fd);
}

/* Where to read and write the caller's terminal. Our own open of
 * /dev/tty when it is stdin's terminal: O_NONBLOCK on it is ours alone.
 * Otherwise (stdin is a terminal but not our controlling one) the std fds
 * themselves, whose open file description the caller shares with others
 * (a shell, the rest of a pipeline): non-blocking only until term_free,
 * as ssh does. */
static int
term_open_caller(struct term *t, char *err, size_t errlen)
{
	struct stat in;
	int fds[2];

	if (fstat(STDIN_FILENO, &in) < 0) {
		snprintf(err, errlen, "terminal: stdin: %s", strerror(errno));
		return -1;
	}
	t->stderr_term = same_terminal(STDERR_FILENO, &in);
	t->own_fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (t->own_fd >= 0 && !same_terminal(t->own_fd, &in))
		fd_close(&t->own_fd);
	if (t->own_fd >= 0) {
		t->in_fd = t->out_fd = t->own_fd;
		return 0;
	}
	fds[0] = t->in_fd = STDIN_FILENO;
	fds[1] = t->out_fd = STDOUT_FILENO; /* the same terminal (term_probe) */
	/* Both saved before either is changed: they may share a description. */
	for (int i = 0; i < 2; i++) {
		if ((t->fl[fds[i]] = fcntl(fds[i], F_GETFL)) < 0) {
			snprintf(err, errlen, "terminal: fd %d: %s", fds[i], strerror(errno));
			return -1;
		}
	}
	for (int i = 0; i < 2; i++) {
		if (fcntl(fds[i], F_SETFL, t->fl[fds[i]] | O_NONBLOCK) < 0) {
			snprintf(err, errlen, "terminal: fd %d: %s", fds[i], strerror(errno));
			return -1;
		}
	}
	return 0;
}

struct term *
term_new(struct event_base *base, int master, const struct termios *tio, char *err, size_t errlen)
{
	struct term *t = malloc(sizeof(*t));
	sigset_t sigs;

	if (t == NULL) {
		snprintf(err, errlen, "terminal: out of memory");
		fd_close(&master);
		return NULL;
	}
	/* Not the buffers: 32 KiB that a quiet run never touches. */
	memset(t, 0, offsetof(struct term, up));
	t->up.off = t->up.len = t->down.off = t->down.len = 0;
	t->base = base;
	t->saved = *tio;
	t->master = master;
	t->own_fd = t->in_fd = t->out_fd = t->sigfd = -1;
	for (int i = 0; i < 3; i++)
		t->fl[i] = -1;
	if (term_open_caller(t, err, errlen) < 0)
		goto fail;
	/* CMD's terminal starts as the caller's was: the same modes (erase
	 * and interrupt characters, IUTF8, ...) and size. Through the
	 * master, these set the slave's. */
	if (fd_set_nonblock(t->master, true) < 0 || tty_set(t->master, tio, false) < 0) {
		snprintf(err, errlen, "terminal: CMD's: %s", strerror(errno));
		goto fail;
	}
	term_resize(t);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGWINCH);
	sigaddset(&sigs, SIGTSTP);
	sigaddset(&sigs, SIGCONT);
	if (sigprocmask(SIG_BLOCK, &sigs, &t->oldmask) < 0) {
		snprintf(err, errlen, "terminal: block signals: %s", strerror(errno));
		goto fail;
	}
	t->blocked = true;
	t->sigfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (t->sigfd < 0) {
		snprintf(err, errlen, "terminal: signalfd: %s", strerror(errno));
		goto fail;
	}
	t->ev_in = event_new(base, t->in_fd, EV_READ | EV_PERSIST, term_in_read, t);
	t->ev_mwrite = event_new(base, t->master, EV_WRITE | EV_PERSIST, term_master_ready, t);
	t->ev_mread = event_new(base, t->master, EV_READ | EV_PERSIST, term_master_read, t);
	t->ev_sig = event_new(base, t->sigfd, EV_READ | EV_PERSIST, term_signal, t);
	t->ev_out = event_new(base, t->out_fd, EV_WRITE | EV_PERSIST, term_out_ready, t);
	if (t->ev_in == NULL || t->ev_mwrite == NULL || t->ev_mread == NULL || t->ev_sig == NULL ||
	    t->ev_out == NULL || event_add(t->ev_sig, NULL) < 0) {
		snprintf(err, errlen, "terminal: cannot watch it");
		goto fail;
	}
	/* Last: from here on the caller's terminal is changed, and only
	 * term_free changes it back. */
	if (term_set_raw(t, true) < 0) {
		snprintf(err, errlen, "terminal: raw mode: %s", strerror(errno));
		goto fail;
	}
	term_arm(t);
	return t;
fail:
	term_free(t);
	return NULL;
}

void
term_drain(struct term *t, int ms)
{
	double end = ms_since_boot() + ms;

	if (t == NULL)
		return;
	/* A non-blocking read of a master returns what CMD wrote, the part
	 * the kernel has yet to move to the master's side included, before
	 * it says EAGAIN or, once every slave is closed, EIO. */
	for (;;) {
		enum term_io rd = TERM_IO_END;
		double left;

		if (t->master >= 0 && !t->master_eof &&
		    (rd = buf_read(&t->down, t->master)) == TERM_IO_END)
			t->master_eof = true;
		term_down(t);
		if (t->down.len == 0 && rd != TERM_IO_OK)
			return; /* all out, and nothing more to read */
		left = end - ms_since_boot();
		if (left <= 0)
			return;
		if (t->down.len > 0) {
			struct pollfd p = {.fd = t->out_fd, .events = POLLOUT};
			(void)poll(&p, 1, (int)left + 1);
		}
	}
}

void
term_free(struct term *t)
{
	struct event *evs[5];

	if (t == NULL)
		return;
	evs[0] = t->ev_in;
	evs[1] = t->ev_out;
	evs[2] = t->ev_mread;
	evs[3] = t->ev_mwrite;
	evs[4] = t->ev_sig;
	for (size_t i = 0; i < ARRAY_SIZE(evs); i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
	if (t->raw && term_set_raw(t, false) < 0)
		log_warn("cannot give the terminal its modes back");
	for (int fd = STDERR_FILENO; fd >= STDIN_FILENO; fd--)
		if (t->fl[fd] >= 0)
			(void)fcntl(fd, F_SETFL, t->fl[fd]);
	fd_close(&t->sigfd);
	/* After the modes: a SIGTSTP that waited now stops a cooked terminal. */
	if (t->blocked)
		sigprocmask(SIG_SETMASK, &t->oldmask, NULL);
	fd_close(&t->own_fd);
	fd_close(&t->master);
	free(t);
}
