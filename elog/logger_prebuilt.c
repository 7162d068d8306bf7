/* The logger's filter as generated at build time (gen_logger_seccomp.c). */
#include <linux/filter.h>

#include "elog/logger_filter.h"

#include "logger_seccomp_bpf.h"
