/* The caller's terminal, seen from `airlock run` (docs/run.md, Terminal
 * and signals). term_probe looks at it before the sandbox starts. When
 * stdin is a terminal CMD gets a terminal of its own (sandbox/pty.c), and
 * term_new relays its master to the caller's terminal from the
 * supervisor's event loop, as ssh does: the caller's terminal in raw mode,
 * every byte passed on, CMD's terminal's line discipline doing the editing
 * and making CMD's signals (Ctrl-C, Ctrl-Z, Ctrl-\), the window size
 * following. term_free gives the caller's terminal its modes back. */
#ifndef AIRLOCK_CLI_TERM_H
#define AIRLOCK_CLI_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <termios.h>

struct event_base;

/* Whether CMD is to get a terminal of its own (sbx_config.tty): when
 * stdin and stdout are both the caller's terminal. Not when stdout goes
 * to a pipe: its reader (less, a pager, fzf) may use the terminal itself,
 * and a relay in raw mode would fight it for keystrokes and modes. Then,
 * *tio is the terminal's modes. One ioctl when stdin is no terminal. */
bool term_probe(struct termios *tio);

struct term;

/* Relay master, CMD's terminal (ownership taken, closed on failure too),
 * and the caller's terminal on stdin and stdout (term_probe said so; tio
 * its modes then, copied), from base. CMD's terminal gets those modes and
 * the caller's window size, then the caller's terminal goes raw. NULL +
 * reason on failure, the caller's terminal then as it was. */
struct term *term_new(struct event_base *base, int master, const struct termios *tio, char *err,
                      size_t errlen);

/* Once the sandbox has ended: write what CMD's terminal still holds to the
 * caller's, for ms milliseconds at most. Blocks (the loop is done). */
void term_drain(struct term *t, int ms);

/* Stop relaying, leave raw mode, give the caller's file status flags back,
 * close CMD's terminal. NULL is fine. */
void term_free(struct term *t);

#endif
