#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static enum log_level log_level = LOG_LEVEL_WARN;
static const char *log_ident = "airlock";

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
	if (len >= sizeof(line) - 1)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	(void)!write(STDERR_FILENO, line, len);
}

#define LOG_BODY(level, errnum)                                                \
	do {                                                                   \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		log_vmsg((level), (errnum), fmt, ap);                          \
		va_end(ap);                                                    \
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
