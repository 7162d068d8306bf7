#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static enum log_level log_level = LOG_LEVEL_WARN;
static const char *log_ident = "airlock";
static bool log_crlf;
static FILE *log_file; /* log_stream's, made on first use */

void
log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

void
log_set_ident(const char *ident)
{
	log_ident = ident;
}

void
log_set_crlf(bool on)
{
	log_crlf = on;
}

static int
write_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* log_stream's writer: the bytes to stderr, each "\n" as "\r\n" while
 * log_crlf is on. */
static ssize_t
stream_write(void *cookie, const char *buf, size_t size)
{
	size_t done = 0;

	while (done < size) {
		const char *nl = log_crlf ? memchr(buf + done, '\n', size - done) : NULL;
		size_t chunk = nl != NULL ? (size_t)(nl - (buf + done)) : size - done;

		if (write_all(buf + done, chunk) < 0 || (nl != NULL && write_all("\r\n", 2) < 0))
			return -1;
		done += chunk + (nl != NULL);
	}
	return (ssize_t)size;
}

FILE *
log_stream(void)
{
	if (log_file == NULL) {
		log_file = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stream_write});
		if (log_file != NULL)
			setvbuf(log_file, NULL, _IOLBF, 0);
	}
	return log_file;
}

void
log_vmsg(enum log_level level, int errnum, const char *fmt, va_list ap)
{
	char line[2048];
	int n;
	size_t len;

	if (level > log_level)
		return;
	/* Build the whole line first so one write(2) keeps it intact when
	 * several processes share stderr. */
	n = snprintf(line, sizeof(line), "%s: ", log_ident);
	if (n < 0)
		return;
	len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
	n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	if (n > 0)
		len += (size_t)n < sizeof(line) - len ? (size_t)n : sizeof(line) - len - 1;
	if (errnum != 0 && len < sizeof(line) - 1) {
		n = snprintf(line + len, sizeof(line) - len, ": %s", strerror(errnum));
		if (n > 0)
			len += (size_t)n < sizeof(line) - len ? (size_t)n : sizeof(line) - len - 1;
	}
	if (len >= sizeof(line) - 2)
		len = sizeof(line) - 3;
	if (log_crlf)
		line[len++] = '\r';
	line[len++] = '\n';
	(void)!write(STDERR_FILENO, line, len);
}

#define LOG_BODY(level, errnum)                                                                    \
	do {                                                                                       \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		log_vmsg((level), (errnum), fmt, ap);                                              \
		va_end(ap);                                                                        \
	} while (0)

void
log_warn(const char *fmt, ...)
{
	int saved = errno;

	LOG_BODY(LOG_LEVEL_WARN, saved);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	LOG_BODY(LOG_LEVEL_WARN, 0);
}

void
log_info(const char *fmt, ...)
{
	LOG_BODY(LOG_LEVEL_INFO, 0);
}

void
log_debug(const char *fmt, ...)
{
	LOG_BODY(LOG_LEVEL_DEBUG, 0);
}

void
log_fatal(int status, const char *fmt, ...)
{
	int saved = errno;

	LOG_BODY(LOG_LEVEL_ERROR, saved);
	exit(status);
}

void
log_fatalx(int status, const char *fmt, ...)
{
	LOG_BODY(LOG_LEVEL_ERROR, 0);
	exit(status);
}
