/* LD_PRELOAD shim for tests/sandbox/workerfail.sh: the worker's empty
 * mount view cannot be made (its tmpfs mount fails, as a kernel or a
 * security module might refuse it), so the worker cannot confine itself
 * after CMD was given the go. Every other mount() goes to libc. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/mount.h>

int
mount(const char *src, const char *target, const char *fstype, unsigned long flags,
      const void *data)
{
	int (*real)(const char *, const char *, const char *, unsigned long, const void *) =
	        (int (*)(const char *, const char *, const char *, unsigned long,
	                 const void *))dlsym(RTLD_NEXT, "mount");

	if (src != NULL && strcmp(src, "airlock-worker") == 0) {
		errno = EPERM;
		return -1;
	}
	return real(src, target, fstype, flags, data);
}
