/* OpenSSL's errors as airlock's one-line reasons. */
#ifndef AIRLOCK_TLS_ERROR_H
#define AIRLOCK_TLS_ERROR_H

#include <stddef.h>

/* "prefix: <OpenSSL's first queued error>" into err; the queue is
 * emptied. */
void tls_error(char *err, size_t errlen, const char *prefix);

#endif
