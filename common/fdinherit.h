/* The descriptors a process was started with beyond stdin, stdout and
 * stderr: what its caller passed (`airlock run ... 9<file`), which no
 * process airlock forks may keep (docs/run.md, "The processes").
 *
 * Taken first thing, before the process opens anything, and closed once
 * set-up has read what the command line names (a `--log /dev/fd/3` or a
 * `-p /dev/fd/9` opens its own descriptor of the same file). Until then
 * they are open, so no descriptor of the process's own can take one of
 * their numbers: closing the numbers taken closes exactly the caller's. */
#ifndef AIRLOCK_COMMON_FDINHERIT_H
#define AIRLOCK_COMMON_FDINHERIT_H

#include <stddef.h>

struct fd_inherited {
	int *fi_fds; /* ascending; owned */
	size_t fi_n;
};

/* Fill in with every open descriptor above stderr, from /proc/self/fd.
 * 0, or -1 with errno (nothing allocated). */
int fd_inherited_take(struct fd_inherited *fi);
/* Close every one taken and free the list; tolerates an empty one, and
 * leaves it empty. */
void fd_inherited_close(struct fd_inherited *fi);

#endif
