/* The caller's terminal, seen from `airlock run` (docs/run.md, Terminal
 * and signals). term_probe looks at it before the sandbox starts. When
 * stdin is a terminal CMD gets a terminal of its own (sandbox/pty.c), and
 * term_new relays its master to the caller's terminal from the
 * supervisor's event loop, as ssh does: the caller's terminal in raw mode,
 * every byte passed on, CMD's terminal's line discipline doing the editing
 * and making CMD's signals (Ctrl-C, Ctrl-Z, Ctrl-\), the window size
 * following. term_free leaves raw mode; term_saved_restore puts back the
 * modes term_probe saw, whatever happened in between. */
#ifndef AIRLOCK_CLI_TERM_H
#define AIRLOCK_CLI_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <termios.h>

struct event_base;

/* The caller's terminal when the run started. Plain data. */
struct term_saved {
	int fd;             /* the first of stdin, stdout, stderr that is a terminal; -1: none */
	struct termios tio; /* its modes then */
};

/* Fill *ts. True when stdin is a terminal: CMD is then to get one of its
 * own (sbx_config.tty). Costs one ioctl per std fd until one is a
 * terminal. */
bool term_probe(struct term_saved *ts);

/* Put back ts's modes on its terminal if they differ now. Without a
 * terminal of its own CMD holds the caller's on stdout or stderr and may
 * have changed them; with one, term_free already did this. Works from a
 * background process group too (SIGTTOU is held). */
void term_saved_restore(const struct term_saved *ts);

struct term;

/* Relay master, CMD's terminal (ownership taken, closed on failure too),
 * and the caller's terminal, stdin (ts, borrowed until term_free, with
 * ts->fd 0), from base. CMD's terminal gets the caller's modes and window
 * size, then the caller's terminal goes raw. NULL + reason on failure,
 * the caller's terminal then as it was. */
struct term *term_new(struct event_base *base, int master, const struct term_saved *ts,
                      char *err, size_t errlen);

/* Once the sandbox has ended: write what CMD's terminal still holds to the
 * caller's, for ms milliseconds at most. Blocks (the loop is done). */
void term_drain(struct term *t, int ms);

/* Stop relaying, leave raw mode, give the caller's file status flags back,
 * close CMD's terminal. NULL is fine. */
void term_free(struct term *t);

#endif
