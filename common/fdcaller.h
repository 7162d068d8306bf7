/* The caller's descriptors: those above stderr that were open when the
 * program started (`airlock run ... 9</etc/passwd`). The supervisor may
 * need them (`--log /dev/fd/3`); a process forked from it that parses
 * hostile bytes must not hold them, and it cannot tell them from its own
 * by number alone. fdcaller_note, first thing in main, writes them down
 * with what each is open on; fdcaller_close, in such a child, closes
 * each that is still open on the same file (a number the parent closed
 * and reused for one of its own is left alone). One thread. */
#ifndef AIRLOCK_COMMON_FDCALLER_H
#define AIRLOCK_COMMON_FDCALLER_H

/* 0, or -1 with errno (out of memory; nothing is noted then). */
int fdcaller_note(void);
/* Close the noted descriptors still open on what they were; 0, or -1
 * with errno when one could not be checked or closed. */
int fdcaller_close(void);
/* stdin and stdout on /dev/null: the caller's terminal or files are
 * not for a confined process to read or write (stderr stays). 0, or -1
 * with errno. */
int fdcaller_drop_stdio(void);
/* How many were noted. */
unsigned fdcaller_count(void);

#endif
