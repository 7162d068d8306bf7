/* See fdinherit.h. */
#include "common/fdinherit.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

int
fd_inherited_take(struct fd_inherited *fi)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t cap = 0;
	int saved;

	fi->fi_fds = NULL;
	fi->fi_n = 0;
	if (d == NULL)
		return -1;
	for (;;) {
		uint64_t fd;

		errno = 0;
		if ((de = readdir(d)) == NULL)
			break;

		/* ".", "..", and the directory's own descriptor. */
		if (parse_uint(de->d_name, 3, INT32_MAX, &fd) < 0 || (int)fd == dirfd(d))
			continue;
		if (fi->fi_n == cap) {
			size_t ncap = cap == 0 ? 8 : cap * 2;
			int *n = realloc(fi->fi_fds, ncap * sizeof(*n));

			if (n == NULL)
				goto fail;
			fi->fi_fds = n;
			cap = ncap;
		}
		fi->fi_fds[fi->fi_n++] = (int)fd;
	}
	if (errno != 0)
		goto fail;
	closedir(d);
	return 0;
fail:
	saved = errno;
	closedir(d);
	free(fi->fi_fds);
	fi->fi_fds = NULL;
	fi->fi_n = 0;
	errno = saved;
	return -1;
}

void
fd_inherited_close(struct fd_inherited *fi)
{
	for (size_t i = 0; i < fi->fi_n; i++)
		(void)close(fi->fi_fds[i]);
	free(fi->fi_fds);
	fi->fi_fds = NULL;
	fi->fi_n = 0;
}
