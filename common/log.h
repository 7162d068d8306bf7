/* Operational messages of airlock itself (not the egress log, see elog/).
 *
 * Every line goes to stderr prefixed "airlock: ". log_warn() appends the
 * current errno text, log_warnx() does not. Nothing here exits except
 * log_fatal*(), which only main and sandbox set-up may call. */
#ifndef AIRLOCK_COMMON_LOG_H
#define AIRLOCK_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
};

/* Messages above this level are dropped. Default LOG_LEVEL_WARN. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Replace "airlock" in the prefix (for example "airlock[init]"). The string
 * is borrowed and must outlive every later log call. */
void log_set_ident(const char *ident);

/* End every line on stderr with "\r\n" instead of "\n" while on: for
 * while stderr is a terminal in raw mode (cli/term.c), whose output
 * processing no longer adds the carriage return. Default off. */
void log_set_crlf(bool on);

/* stderr as a stdio stream whose lines follow log_set_crlf, for other
 * writers of human lines (the egress log's -v lines). Made on first use,
 * kept until exit; NULL when it cannot be made (use stderr then). */
FILE *log_stream(void);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_vmsg(enum log_level level, int errnum, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));

/* Print and exit(status). For main and sandbox set-up only. */
void log_fatal(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void log_fatalx(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

#endif
