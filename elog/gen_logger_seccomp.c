/* Build-time generator: compiles the logger's seccomp filter with
 * libseccomp (logger_filter.c) and prints it as C for logger_prebuilt.c.
 * Runs on the build machine, which must be the architecture the binary
 * runs on (native builds only), as broker/gen_seccomp.c. */
#include "common/confine_gen.h"
#include "elog/logger_filter.h"

int
main(void)
{
	return confine_gen_main("logger", "elog_logger_seccomp_bpf", elog_logger_seccomp_compile);
}
