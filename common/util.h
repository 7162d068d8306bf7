/* Small helpers shared by every module. */
#ifndef AIRLOCK_COMMON_UTIL_H
#define AIRLOCK_COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Copy src into dst[size], always NUL-terminated. Returns strlen(src), so
 * a result >= size means the copy was cut (as strlcpy). */
size_t str_copy(char *dst, const char *src, size_t size);

/* Parse a decimal unsigned integer in [min, max] from the whole of s.
 * Returns 0 and sets *out, or -1 (errno EINVAL or ERANGE). */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* A duration: a whole number with a unit, s, m, h or d (90s, 10m, 2h, 7d),
 * or, with bare_unit_ms nonzero, a bare number in that unit. Into *ms;
 * 0, or -1 when malformed or above max_ms. */
int parse_duration_ms(const char *s, uint64_t bare_unit_ms, uint64_t max_ms, uint64_t *ms);

/* The value of one hexadecimal digit (either case), or -1. Takes an int
 * so that a char, signed or not, and a uint8_t both pass unchanged. */
int hex_value(int c);

/* Monotonic clock in milliseconds. */
uint64_t now_ms(void);

/* The same clock in milliseconds with microsecond precision, for the
 * step timings that -vv prints. */
double ms_since_boot(void);
/* Milliseconds since clock_mark_start() (called once, first thing in
 * main; processes cloned or forked after it share the origin), for the
 * -vv timeline of a run. */
void clock_mark_start(void);
double ms_since_start(void);

/* Set or clear O_NONBLOCK / FD_CLOEXEC. Return 0 or -1 with errno. */
int fd_set_nonblock(int fd, bool on);
int fd_set_cloexec(int fd, bool on);

/* *ss = addr:port, addr a numeric address of family (AF_INET or AF_INET6;
 * 0: either). Returns the length to pass with it, or 0 if addr is not one
 * (*ss is then all zero). */
socklen_t sockaddr_set(struct sockaddr_storage *ss, int family, const char *addr, uint16_t port);
/* close(2) that keeps errno and tolerates -1; sets *fd to -1. */
void fd_close(int *fd);

/* The one-line error for an option getopt_long refused: c is what it
 * returned ('?' an unknown option, ':' a missing value: the optstring
 * must start with ':' (after '+'), and opterr be 0). Names the option as
 * typed (a long one without its "=value"), then "see 'HELP'". */
void opt_error(char *err, size_t errlen, int c, int argc, char **argv, const char *help);

#endif
