/* Build-time generator: compiles the broker's seccomp filter with
 * libseccomp (sysfilter.c) and prints it as C for seccomp_prebuilt.c. Runs
 * on the build machine, which must be the architecture the binary runs
 * on (native builds only), as sandbox/gen_seccomp.c. */
#include <stdio.h>
#include <stdlib.h>

#include "broker/sysfilter.h"
#include "common/confine_gen.h"

int
main(void)
{
	struct sock_filter *insns;
	unsigned short len;
	char err[256];
	int rc;

	if (broker_seccomp_compile(&insns, &len, err, sizeof(err)) < 0) {
		fprintf(stderr, "broker gen_seccomp: %s\n", err);
		return 1;
	}
	rc = confine_bpf_print(stdout, "broker_seccomp_bpf", insns, len);
	free(insns);
	return rc == 0 ? 0 : 1;
}
