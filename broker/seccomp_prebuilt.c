/* The broker's filter as generated at build time (gen_seccomp.c). */
#include <linux/filter.h>

#include "broker/sysfilter.h"

#include "broker_seccomp_bpf.h"
