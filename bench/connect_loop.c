/* Run inside `airlock run` by bench/bench_unixgate.sh: N TCP connects to a
 * listener of its own on 127.0.0.1 (nothing leaves the sandbox), each
 * accepted and closed; prints the wall time per connect in microseconds.
 * Every connect() is a seccomp notification the unix socket gate answers
 * (docs/run.md, Unix sockets), so this measures the gate's cost. Also
 * times N sendmsg() calls of one byte on a connected TCP socket, the
 * other call the gate performs for every use. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int
main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000; /* bounded below */
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), c, s;
	char byte = 'x', sink[4096];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	double t0, t1, t2, t3;

	if (n <= 0 || n > 100000 || l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 128) < 0 || getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return perror("listener"), 1;
	t0 = now_us();
	for (long i = 0; i < n; i++) {
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
			return perror("connect"), 1;
		s = accept(l, NULL, NULL);
		if (s < 0)
			return perror("accept"), 1;
		close(s);
		close(c);
	}
	t1 = now_us();
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (s = accept(l, NULL, NULL)) < 0)
		return perror("connect"), 1;
	t2 = now_us();
	for (long i = 0; i < n; i++) {
		if (sendmsg(c, &mh, 0) != 1)
			return perror("sendmsg"), 1;
		if (i % 1024 == 1023 && read(s, sink, sizeof(sink)) < 0)
			return perror("read"), 1;
	}
	t3 = now_us();
	printf("connect_us %.2f sendmsg_us %.2f\n", (t1 - t0) / n, (t3 - t2) / n);
	return 0;
}
