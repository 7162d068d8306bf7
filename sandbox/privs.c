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

/* What CMD as root keeps with --ids range: owning, reading and writing
 * files of any id the map has, and switching to those ids, which apt (its
 * _apt user) and dpkg (chown to root:adm) need. Nothing over the network,
 * mounts, namespaces or processes: the ruleset and the view stay out of
 * reach, and in the sandbox's user namespace these reach only its ids. */
static const int root_set[] = {CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,
                               CAP_FSETID, CAP_SETGID,       CAP_SETUID};

static bool
in_root_set(int cap)
{
	for (size_t i = 0; i < sizeof(root_set) / sizeof(root_set[0]); i++)
		if (root_set[i] == cap)
			return true;
	return false;
}

int
sbx_caps_drop(bool keep_root_set, char *err, size_t errlen)
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
	unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
	                     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
	                     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

	/* keep_root_set: root's usual semantics, locked, so uid 0 regains
	 * root_set (the bounding set below) at execve and a switch to
	 * another uid drops it. no_new_privs caps that at the permitted set
	 * held before the execve: it is root_set too (capset below). */
	if (keep_root_set)
		bits &= ~(unsigned long)(SECBIT_NOROOT | SECBIT_NO_SETUID_FIXUP);
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0) {
		snprintf(err, errlen, "privilege drop: securebits: %s", strerror(errno));
		return -1;
	}
	/* The bounding set: until the kernel says there is no such cap. */
	for (cap = 0; cap < 64; cap++) {
		if (keep_root_set && in_root_set(cap))
			continue;
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
	for (size_t i = 0; keep_root_set && i < sizeof(root_set) / sizeof(root_set[0]); i++) {
		data[root_set[i] / 32].permitted |= 1u << (root_set[i] % 32);
		data[root_set[i] / 32].effective |= 1u << (root_set[i] % 32);
	}
	if (syscall(SYS_capset, &hdr, data) < 0) {
		snprintf(err, errlen, "privilege drop: capset: %s", strerror(errno));
		return -1;
	}
	return 0;
}
