/* fdcaller.h: a list of (fd, device, inode), read from /proc/self/fd, or
 * by probing each number below the limit when /proc is not mounted. */
#include "common/fdcaller.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/* Probed without /proc: numbers past this are not looked at. */
#define FDCALLER_PROBE_MAX 65536u

struct fdcaller {
	int fd;
	dev_t dev;
	ino_t ino;
};

static struct fdcaller *noted;
static unsigned n_noted, cap_noted;

static int
note_one(int fd)
{
	struct stat st;

	if (fd <= STDERR_FILENO || fstat(fd, &st) != 0)
		return 0; /* closed meanwhile: nothing to close later */
	if (n_noted == cap_noted) {
		unsigned cap = cap_noted == 0 ? 8 : cap_noted * 2;
		struct fdcaller *p = reallocarray(noted, cap, sizeof(*p));

		if (p == NULL)
			return -1;
		noted = p;
		cap_noted = cap;
	}
	noted[n_noted++] = (struct fdcaller){.fd = fd, .dev = st.st_dev, .ino = st.st_ino};
	return 0;
}

static int
note_probing(void)
{
	struct rlimit rl;
	unsigned max = FDCALLER_PROBE_MAX;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < max)
		max = (unsigned)rl.rlim_cur;
	for (unsigned fd = STDERR_FILENO + 1; fd < max; fd++)
		if (fcntl((int)fd, F_GETFD) >= 0 && note_one((int)fd) < 0)
			return -1;
	return 0;
}

int
fdcaller_note(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int rc = 0;

	n_noted = 0;
	if (d == NULL)
		return note_probing();
	while (rc == 0 && (e = readdir(d)) != NULL) {
		uint64_t fd;

		if (parse_uint(e->d_name, 0, INT32_MAX, &fd) != 0 || (int)fd == dirfd(d))
			continue; /* ".", "..", and the listing's own */
		rc = note_one((int)fd);
	}
	closedir(d);
	if (rc < 0)
		n_noted = 0;
	return rc;
}

int
fdcaller_close(void)
{
	int rc = 0;

	for (unsigned i = 0; i < n_noted; i++) {
		struct stat st;

		if (fstat(noted[i].fd, &st) != 0) {
			if (errno != EBADF)
				rc = -1;
			continue;
		}
		if (st.st_dev == noted[i].dev && st.st_ino == noted[i].ino && close(noted[i].fd) != 0 &&
		    errno != EINTR)
			rc = -1;
	}
	return rc;
}

int
fdcaller_drop_stdio(void)
{
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (nul < 0)
		return -1;
	if (dup2(nul, STDIN_FILENO) < 0 || dup2(nul, STDOUT_FILENO) < 0) {
		fd_close(&nul);
		return -1;
	}
	if (nul > STDERR_FILENO)
		close(nul);
	return 0;
}

unsigned
fdcaller_count(void)
{
	return n_noted;
}
