/* LD_PRELOAD shim for tests/sandbox/selftest.sh: makes the sandbox's DNS
 * listener fail to bind (port 53 on 127.0.0.1, as if taken), so the test
 * can watch the self-test fail and airlock refuse to run the command. Every
 * other bind() goes to libc. */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

int bind(int fd, const struct sockaddr *sa, socklen_t len);

int
bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	int (*real)(int, const struct sockaddr *, socklen_t) =
	        (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");

	if (sa != NULL && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in) &&
	    ((const struct sockaddr_in *)(const void *)sa)->sin_port == htons(53)) {
		errno = EADDRINUSE;
		return -1;
	}
	return real(fd, sa, len);
}
