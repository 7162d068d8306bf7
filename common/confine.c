/* See confine.h. Raw syscalls: glibc has no Landlock wrappers. */
#include "common/confine.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The build machine's <linux/landlock.h> may predate the ABI the kernel
 * has (Debian 12's knows ABI 2): the layout below is the kernel's stable
 * UAPI, its fields added at the end, so a shorter size means an older
 * ABI. */
struct confine_ll_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

#define LL_FS_TRUNCATE         (1ULL << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV        (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP        (1ULL << 0)
#define LL_NET_CONNECT_TCP     (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LL_SCOPE_SIGNAL        (1ULL << 1)

int
confine_drop_caps(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};

	/* The bounding set first (needs CAP_SETPCAP, dropped last): EINVAL
	 * past the kernel's last capability ends the loop, and so does EPERM
	 * (no CAP_SETPCAP: every drop is refused alike). */
	for (int cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL || errno == EPERM)
			break;
		return -1;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
		return -1;
	return syscall(SYS_capset, &h, d) == 0 ? 0 : -1;
}

int
confine_no_new_privs(void)
{
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? 0 : -1;
}

int
confine_landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return abi > 0 ? (int)abi : 0;
}

/* The filesystem rights each ABI added: handling one the kernel does not
 * know is EINVAL, so the set follows the ABI. */
static uint64_t
fs_rights(int abi)
{
	uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: EXECUTE..MAKE_SYM */

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LL_FS_TRUNCATE;
	if (abi >= 5)
		r |= LL_FS_IOCTL_DEV;
	return r;
}

int
confine_landlock(unsigned flags)
{
	struct confine_ll_attr attr = {0};
	int abi = confine_landlock_abi();
	size_t size;
	long fd;
	int rc;

	if (abi == 0)
		return 0;
	attr.handled_access_fs = fs_rights(abi);
	size = offsetof(struct confine_ll_attr, handled_access_net);
	if ((flags & CONFINE_LL_NET) && abi >= 4) {
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
		size = offsetof(struct confine_ll_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	/* An older kernel checks the size it knows: pass only the fields
	 * this ABI has. */
	fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0)
		return -1;
	rc = (int)syscall(SYS_landlock_restrict_self, (int)fd, 0);
	close((int)fd);
	return rc == 0 ? abi : -1;
}

int
confine_seccomp(const struct sock_filter *insns, unsigned short len)
{
	struct sock_fprog prog = {.len = len, .filter = (struct sock_filter *)insns};

	if (insns == NULL || len == 0) {
		errno = EINVAL;
		return -1;
	}
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : -1;
}
