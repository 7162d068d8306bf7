/* Build-time generator: compiles the worker's seccomp filter with
 * libseccomp (sysfilter.c) and prints it as C for seccomp_prebuilt.c,
 * with this architecture's syscall names for the SIGSYS report. Runs on
 * the build machine, which must be the architecture the binary runs on
 * (native builds only), as broker/gen_seccomp.c. "--trap": a call not on
 * the list raises SIGSYS instead of returning ENOSYS (the test build). */
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/confine_gen.h"
#include "worker/sysfilter.h"

/* Above every syscall number of the native ABIs (x86-64's end near 470). */
#define NAMES_MAX 1024

static int
print_names(FILE *out)
{
	unsigned last = 0;

	for (unsigned n = 0; n < NAMES_MAX; n++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)n);

		if (name != NULL)
			last = n + 1;
		free(name);
	}
	fprintf(out, "const char *const worker_syscall_names[] = {\n");
	for (unsigned n = 0; n < last; n++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)n);

		if (name != NULL)
			fprintf(out, "\t[%u] = \"%s\",\n", n, name);
		free(name);
	}
	fprintf(out, "};\nconst unsigned worker_syscall_names_len = %u;\n", last);
	return ferror(out) ? -1 : 0;
}

int
main(int argc, char **argv)
{
	bool trap = argc > 1 && strcmp(argv[1], "--trap") == 0;
	struct sock_filter *insns;
	unsigned short len;
	char err[256];
	int rc;

	if (worker_seccomp_compile(trap, &insns, &len, err, sizeof(err)) < 0) {
		fprintf(stderr, "worker gen_seccomp: %s\n", err);
		return 1;
	}
	rc = confine_bpf_print(stdout, "worker_seccomp_bpf", insns, len);
	free(insns);
	if (rc == 0)
		rc = print_names(stdout);
	return rc == 0 ? 0 : 1;
}
