/* Build-time generator: compiles the logger's seccomp filter with
 * libseccomp (logger_filter.c) and prints it as C for logger_prebuilt.c.
 * Runs on the build machine, which must be the architecture the binary
 * runs on (native builds only), as broker/gen_seccomp.c. */
#include <stdio.h>
#include <stdlib.h>

#include "common/confine_gen.h"
#include "elog/logger_filter.h"

int
main(void)
{
	struct sock_filter *insns;
	unsigned short len;
	char err[256];
	int rc;

	if (elog_logger_seccomp_compile(&insns, &len, err, sizeof(err)) < 0) {
		fprintf(stderr, "logger gen_seccomp: %s\n", err);
		return 1;
	}
	rc = confine_bpf_print(stdout, "elog_logger_seccomp_bpf", insns, len);
	free(insns);
	return rc == 0 ? 0 : 1;
}
