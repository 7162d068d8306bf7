/* LD_PRELOAD shim for tests/sandbox/workerfail.sh: the broker forks, then
 * cannot confine itself (no_new_privs refused, as a security module
 * might) and exits, while CMD runs. Only the process named airlock-broker
 * is refused; every other prctl() goes to libc. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>

int
prctl(int option, ...)
{
	int (*real)(int, unsigned long, unsigned long, unsigned long, unsigned long) =
	        (int (*)(int, unsigned long, unsigned long, unsigned long, unsigned long))dlsym(
	                RTLD_NEXT, "prctl");
	unsigned long a[4];
	char name[16] = "";
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_NO_NEW_PRIVS && real(PR_GET_NAME, (unsigned long)name, 0, 0, 0) == 0 &&
	    strcmp(name, "airlock-broker") == 0) {
		errno = EPERM;
		return -1;
	}
	return real(option, a[0], a[1], a[2], a[3]);
}
