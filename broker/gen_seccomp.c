/* Build-time generator: compiles the broker's seccomp filter with
 * libseccomp (sysfilter.c) and prints it as C for seccomp_prebuilt.c. Runs
 * on the build machine, which must be the architecture the binary runs
 * on (native builds only), as sandbox/gen_seccomp.c. */
#include "broker/sysfilter.h"
#include "common/confine_gen.h"

int
main(void)
{
	return confine_gen_main("broker", "broker_seccomp_bpf", broker_seccomp_compile);
}
