/* The seccomp filter as compiled at build time (gen_seccomp.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/filter.h>

#include "sandbox/internal.h"
#include "seccomp_bpf.h"

int
sbx_seccomp_build(struct sbx_filter *f, char *err, size_t errlen)
{
	f->len = 0;
	f->insns = malloc(sizeof(seccomp_prebuilt));
	if (f->insns == NULL) {
		snprintf(err, errlen, "seccomp: out of memory");
		return -1;
	}
	memcpy(f->insns, seccomp_prebuilt, sizeof(seccomp_prebuilt));
	f->len = (unsigned short)(sizeof(seccomp_prebuilt) / sizeof(seccomp_prebuilt[0]));
	return 0;
}
