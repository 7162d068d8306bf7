/* Dropping every capability before CMD runs. Init holds the full set in
 * its user namespace (the creator of a user namespace always does); CMD
 * must hold none, even with --root (uid 0 inside would regain the set at
 * execve without the securebits below). No libcap: five prctl calls and one
 * capset are all it takes. */
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/internal.h"

int
sbx_caps_drop(char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = {
	        .version = _LINUX_CAPABILITY_VERSION_3,
	        .pid = 0,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	int cap;

	/* Lock root out of capability semantics: uid 0 (--root) gains
	 * nothing at execve and nothing can turn this back on. Needs
	 * CAP_SETPCAP, so it comes first. */
	if (prctl(PR_SET_SECUREBITS,
	          SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
	                  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
	                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	          0, 0, 0) < 0) {
		snprintf(err, errlen, "privilege drop: securebits: %s", strerror(errno));
		return -1;
	}
	/* The bounding set: until the kernel says there is no such cap. */
	for (cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break;
			snprintf(err, errlen, "privilege drop: bounding set cap %d: %s", cap,
			         strerror(errno));
			return -1;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
		snprintf(err, errlen, "privilege drop: ambient set: %s", strerror(errno));
		return -1;
	}
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0) {
		snprintf(err, errlen, "privilege drop: capset: %s", strerror(errno));
		return -1;
	}
	return 0;
}
