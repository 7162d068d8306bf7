/* The worker's filter as generated at build time (gen_seccomp.c). */
#include <linux/filter.h>

#include "worker/sysfilter.h"

/* The probe build has the ENOSYS filter an installed airlock has, so
 * that what it reports is what airlock does. */
#ifdef WORKER_CONFINE_PROBE
#include "worker_probe_bpf.h"
#else
#include "worker_seccomp_bpf.h"
#endif
