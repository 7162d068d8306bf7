#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>

size_t
str_copy(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);

	if (size > 0) {
		size_t n = len < size - 1 ? len : size - 1;
		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

int
parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s == NULL || *s < '0' || *s > '9') {
		errno = EINVAL;
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0') {
		errno = EINVAL;
		return -1;
	}
	if (errno == ERANGE || v < min || v > max) {
		errno = ERANGE;
		return -1;
	}
	*out = v;
	return 0;
}

int
hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

double
ms_since_boot(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double clock_origin;

void
clock_mark_start(void)
{
	clock_origin = ms_since_boot();
}

double
ms_since_start(void)
{
	return ms_since_boot() - clock_origin;
}

int
fd_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl);
}

int
fd_set_cloexec(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -1;
	fl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
	return fcntl(fd, F_SETFD, fl);
}

void
fd_close(int *fd)
{
	int saved = errno;

	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	errno = saved;
}

socklen_t
sockaddr_set(struct sockaddr_storage *ss, int family, const char *addr, uint16_t port)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if ((family == 0 || family == AF_INET) && inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		return sizeof(*sin);
	}
	if ((family == 0 || family == AF_INET6) &&
	    inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		return sizeof(*sin6);
	}
	return 0; /* inet_pton wrote nothing: *ss is still all zero */
}

void
opt_error(char *err, size_t errlen, int c, int argc, char **argv, const char *help)
{
	const char *word = optind > 0 && optind - 1 < argc ? argv[optind - 1] : "";
	char shortopt[3] = {'-', (char)optopt, '\0'};
	int len;

	/* A short option may sit in a cluster ("-vx"): optopt is the one. */
	if (optopt != 0 && !(word[0] == '-' && word[1] == '-'))
		word = shortopt;
	len = (int)strcspn(word, "=");
	if (len > 64)
		len = 64;
	if (c == ':')
		snprintf(err, errlen, "option '%.*s' needs a value; see '%s'", len, word, help);
	else
		snprintf(err, errlen, "unknown option '%.*s'; see '%s'", len, word, help);
}

int
parse_duration_ms(const char *s, uint64_t bare_unit_ms, uint64_t max_ms, uint64_t *ms)
{
	size_t len = strlen(s);
	uint64_t n, unit;
	char num[24];

	if (len == 0 || len >= sizeof(num))
		return -1;
	switch (s[len - 1]) {
	case 's':
		unit = 1000;
		break;
	case 'm':
		unit = 60 * 1000;
		break;
	case 'h':
		unit = 3600 * 1000;
		break;
	case 'd':
		unit = 86400 * 1000;
		break;
	default:
		if (bare_unit_ms == 0)
			return -1;
		unit = bare_unit_ms;
		len++; /* no unit to cut */
		break;
	}
	memcpy(num, s, len - 1);
	num[len - 1] = '\0';
	if (parse_uint(num, 0, max_ms / unit, &n) < 0)
		return -1;
	*ms = n * unit;
	return 0;
}
