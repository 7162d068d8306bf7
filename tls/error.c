/* OpenSSL's errors as one line (tls/error.h). */
#include "tls/error.h"

#include <stdio.h>

#include <openssl/err.h>

void
tls_error(char *err, size_t errlen, const char *prefix)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "unknown error";

	if (e != 0)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	snprintf(err, errlen, "%s: %s", prefix, buf);
}
