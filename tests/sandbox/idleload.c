/* LD_PRELOAD shim for tests/sandbox/cpus.sh: /proc/loadavg says the
 * machine is idle (one task runnable: the reader), so that airlock splits
 * its set-up over the CPUs (sandbox.c, split_cpus_prepare) whatever else
 * runs here. Every other open() goes to libc. Both names, open and
 * open64: which one airlock calls depends on its build's flags. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int open(const char *path, int flags, ...);
int open64(const char *path, int flags, ...);

static int
fake_loadavg(int flags)
{
	static const char idle[] = "0.00 0.00 0.00 1/100 1\n";
	int fd = memfd_create("loadavg", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);

	if (fd < 0)
		return -1;
	if (write(fd, idle, sizeof(idle) - 1) != (ssize_t)sizeof(idle) - 1 ||
	    lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
real_open(const char *sym, const char *path, int flags, mode_t mode)
{
	int (*real)(const char *, int, ...) =
	        (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, sym);

	return real(path, flags, mode);
}

/* open and open64 alike: the fake for /proc/loadavg, else libc's sym
 * with the mode when one comes (O_CREAT, O_TMPFILE). */
static int
open_any(const char *sym, const char *path, int flags, va_list ap)
{
	mode_t mode = 0;

	if (strcmp(path, "/proc/loadavg") == 0)
		return fake_loadavg(flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	return real_open(sym, path, flags, mode);
}

int
open(const char *path, int flags, ...)
{
	va_list ap;
	int fd;

	va_start(ap, flags);
	fd = open_any("open", path, flags, ap);
	va_end(ap);
	return fd;
}

int
open64(const char *path, int flags, ...)
{
	va_list ap;
	int fd;

	va_start(ap, flags);
	fd = open_any("open64", path, flags, ap);
	va_end(ap);
	return fd;
}
